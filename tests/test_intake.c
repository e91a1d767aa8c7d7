/* test_intake.c - the round-robin intake (common/intake.h): a flooded source
 * gives one slice per take while every other source's messages come in the same take, the cap
 * bounds a take and the next take goes on where it cut (one fair round-robin over takes), a
 * source's order is kept, and adding, replacing and removing sources keep the rotation and release
 * what they drop, and the sources of a "later" topic get only the room the others leave (and,
 * paused, nothing, without being waited for).
 *
 * Sources are fake queues of integers (source tag * 100000 + sequence number), so nothing here
 * needs Kafka.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "intake.h"
#include "util.h"

#define ITEM(tag, seq) ((void *)(intptr_t)((tag) * 100000 + (seq) + 1))
#define TAG(p) ((int)(((intptr_t)(p)-1) / 100000))
#define SEQ(p) ((int)(((intptr_t)(p)-1) % 100000))

typedef struct {
    int tag;
    int len, pos; /* items pos..len-1 are still queued */
    int released;
} fake_t;

static void *fake_take(void *src)
{
    fake_t *f = src;
    if (f->pos >= f->len)
        return NULL;
    int seq = f->pos++;
    return ITEM(f->tag, seq);
}

static void fake_release(void *src)
{
    ((fake_t *)src)->released++;
}

static sl_intake_t *new_intake(int slice, int cap)
{
    sl_intake_opts_t o = {slice, cap, fake_take, fake_release, NULL};
    sl_intake_t *in = NULL;
    ck_assert_int_eq(sl_intake_new(&o, &in), SL_OK);
    ck_assert_ptr_nonnull(in);
    return in;
}

static void add(sl_intake_t *in, fake_t *f, int tag, int len)
{
    *f = (fake_t){tag, len, 0, 0};
    ck_assert_int_eq(sl_intake_add(in, "sluice.jobs", tag, f), SL_OK);
}

/* How many of out[0..n) come from source tag. */
static int count_tag(void **out, int n, int tag)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        c += TAG(out[i]) == tag;
    return c;
}

START_TEST(flood_gives_one_slice_beside_the_other_partitions)
{
    sl_intake_t *in = new_intake(16, 256);
    fake_t flood, a, b;
    add(in, &flood, 0, 10000);
    add(in, &a, 1, 3);
    add(in, &b, 2, 1);
    void *out[256];
    int n = sl_intake_take(in, out, 256);
    /* FIFO over one queue would hand out 256 flood messages first. */
    ck_assert_int_eq(n, 16 + 3 + 1);
    ck_assert_int_eq(count_tag(out, n, 0), 16);
    ck_assert_int_eq(count_tag(out, n, 1), 3);
    ck_assert_int_eq(count_tag(out, n, 2), 1);
    /* A message arriving behind the flood comes in the very next take. */
    a.len = 4;
    n = sl_intake_take(in, out, 256);
    ck_assert_int_eq(count_tag(out, n, 1), 1);
    for (int i = 0; i < n; i++) {
        if (TAG(out[i]) == 1)
            ck_assert_int_eq(SEQ(out[i]), 3);
    }
    ck_assert_int_eq(count_tag(out, n, 0), 16);
    sl_intake_free(in);
}
END_TEST

START_TEST(order_within_a_source_is_kept)
{
    sl_intake_t *in = new_intake(5, 12);
    fake_t f[3];
    for (int t = 0; t < 3; t++)
        add(in, &f[t], t, 40);
    int last[3] = {-1, -1, -1}, total = 0;
    void *out[12];
    for (int k = 0; k < 20; k++) {
        int n = sl_intake_take(in, out, 12);
        for (int i = 0; i < n; i++) {
            int t = TAG(out[i]);
            ck_assert_int_eq(SEQ(out[i]), last[t] + 1);
            last[t] = SEQ(out[i]);
        }
        total += n;
    }
    ck_assert_int_eq(total, 120);
    ck_assert_int_eq(sl_intake_take(in, out, 12), 0);
    sl_intake_free(in);
}
END_TEST

START_TEST(cap_cuts_a_take_and_the_next_resumes_there)
{
    sl_intake_t *in = new_intake(10, 25);
    fake_t f[4];
    for (int t = 0; t < 4; t++)
        add(in, &f[t], t, 1000);
    void *out[64];
    int n = sl_intake_take(in, out, 64);
    ck_assert_int_eq(n, 25);
    ck_assert_int_eq(count_tag(out, n, 0), 10);
    ck_assert_int_eq(count_tag(out, n, 1), 10);
    ck_assert_int_eq(count_tag(out, n, 2), 5);
    ck_assert_int_eq(count_tag(out, n, 3), 0);
    n = sl_intake_take(in, out, 64);
    ck_assert_int_eq(n, 25);
    /* The source the cap cut short goes first, with the rest of its slice. */
    ck_assert_int_eq(TAG(out[0]), 2);
    ck_assert_int_eq(count_tag(out, n, 2), 5);
    ck_assert_int_eq(count_tag(out, n, 3), 10);
    ck_assert_int_eq(count_tag(out, n, 0), 10);
    ck_assert_int_eq(count_tag(out, n, 1), 0);
    n = sl_intake_take(in, out, 64);
    ck_assert_int_eq(TAG(out[0]), 1);
    /* Over many capped takes every source gets the same share, within a slice. */
    for (int k = 0; k < 40; k++)
        sl_intake_take(in, out, 64);
    for (int t = 1; t < 4; t++)
        ck_assert_int_le(abs(f[t].pos - f[0].pos), 10);
    /* max below the cap bounds the take too. */
    ck_assert_int_eq(sl_intake_take(in, out, 7), 7);
    sl_intake_free(in);
}
END_TEST

START_TEST(uncapped_takes_rotate_the_first_source)
{
    sl_intake_t *in = new_intake(1, 100);
    fake_t f[3];
    for (int t = 0; t < 3; t++)
        add(in, &f[t], t, 10);
    void *out[100];
    for (int k = 0; k < 6; k++) {
        int n = sl_intake_take(in, out, 100);
        ck_assert_int_eq(n, 3);
        ck_assert_int_eq(TAG(out[0]), k % 3);
    }
    sl_intake_free(in);
}
END_TEST

START_TEST(add_replace_remove_and_clear_release_sources)
{
    sl_intake_t *in = new_intake(2, 100);
    fake_t f[4], again;
    for (int t = 0; t < 4; t++)
        add(in, &f[t], t, 10);
    ck_assert_int_eq(sl_intake_sources(in), 4);
    /* A reassigned partition: its new queue replaces the old one, which is released. */
    again = (fake_t){2, 10, 0, 0};
    ck_assert_int_eq(sl_intake_add(in, "sluice.jobs", 2, &again), SL_OK);
    ck_assert_int_eq(sl_intake_sources(in), 4);
    ck_assert_int_eq(f[2].released, 1);
    /* Same partition number on another topic is another source. */
    fake_t usage = {9, 10, 0, 0};
    ck_assert_int_eq(sl_intake_add(in, "sluice.usage", 2, &usage), SL_OK);
    ck_assert_int_eq(sl_intake_sources(in), 5);
    void *out[100];
    ck_assert_int_eq(sl_intake_take(in, out, 100), 10);
    ck_assert_int_eq(count_tag(out, 10, 9), 2);
    /* Revoked: released, and no longer read. */
    ck_assert_int_eq(sl_intake_remove(in, "sluice.jobs", 0), SL_OK);
    ck_assert_int_eq(f[0].released, 1);
    ck_assert_int_eq(sl_intake_remove(in, "sluice.jobs", 0), SL_ENOTFOUND);
    int n = sl_intake_take(in, out, 100);
    ck_assert_int_eq(n, 8);
    ck_assert_int_eq(count_tag(out, n, 0), 0);
    sl_intake_clear(in);
    ck_assert_int_eq(sl_intake_sources(in), 0);
    ck_assert_int_eq(f[1].released + again.released + f[3].released + usage.released, 4);
    ck_assert_int_eq(sl_intake_take(in, out, 100), 0);
    sl_intake_free(in);
}
END_TEST

static void add_on(sl_intake_t *in, const char *topic, fake_t *f, int tag, int len)
{
    *f = (fake_t){tag, len, 0, 0};
    ck_assert_int_eq(sl_intake_add(in, topic, tag, f), SL_OK);
}

/* ingest's case: a batch flood on every partition of the batch topic, an interactive request
 * arriving behind it on the requests topic. Without tiers the flood's partitions take the whole
 * cap in turn and the interactive one waits for its turn in the rotation. */
START_TEST(later_topic_gets_only_the_room_left)
{
    sl_intake_t *in = new_intake(32, 64);
    ck_assert_int_eq(sl_intake_later(in, "sluice.requests.batch", 0), SL_EINVAL);
    ck_assert_int_eq(sl_intake_later(in, "sluice.requests.batch", 48), SL_OK);
    fake_t flood[8], now;
    for (int i = 0; i < 8; i++)
        add_on(in, "sluice.requests.batch", &flood[i], i, 1000);
    add_on(in, "sluice.requests", &now, 9, 0);
    void *out[64];
    /* Only the flood queued: it is taken (work-conserving), its own cap at a time. */
    ck_assert_int_eq(sl_intake_take(in, out, 64), 48);
    ck_assert_int_eq(sl_intake_take(in, out, 64), 48);
    /* Three requests arrive on the first-tier topic: all three come in the next take. */
    now.len = 3;
    int n = sl_intake_take(in, out, 64);
    ck_assert_int_eq(n, 3 + 48);
    ck_assert_int_eq(count_tag(out, n, 9), 3);
    ck_assert_int_eq(TAG(out[0]), 9);
    ck_assert_int_eq(TAG(out[2]), 9);
    /* A busy first-tier source gets its slice first; the flood has the rest of the take... */
    now.len = 3 + 100;
    n = sl_intake_take(in, out, 64);
    ck_assert_int_eq(count_tag(out, n, 9), 32);
    ck_assert_int_eq(n, 64);
    /* ...and the flood's round-robin goes on where it stopped: every partition gets its turn. */
    now.len = now.pos;
    int seen[8] = {0};
    for (int k = 0; k < 8; k++) {
        n = sl_intake_take(in, out, 64);
        for (int i = 0; i < n; i++)
            seen[TAG(out[i])]++;
    }
    for (int i = 0; i < 8; i++)
        ck_assert_int_gt(seen[i], 0);
    sl_intake_free(in);
}
END_TEST

static int fake_pending(void *src)
{
    fake_t *f = src;
    return f->len - f->pos;
}

/* Held back (ingest: its batch takes fill the flight, or their share of the time is spent), the
 * later topic gives nothing while the first tier is still taken at once, and a wait does not
 * count what the later topic holds (it would return at once and the caller would spin); resumed,
 * the later topic goes on where it was. */
START_TEST(a_paused_later_topic_is_neither_taken_nor_waited_for)
{
    sl_intake_opts_t o = {32, 64, fake_take, fake_release, fake_pending};
    sl_intake_t *in = NULL;
    ck_assert_int_eq(sl_intake_new(&o, &in), SL_OK);
    ck_assert_int_eq(sl_intake_later(in, "sluice.requests.batch", 32), SL_OK);
    fake_t flood, now;
    add_on(in, "sluice.requests.batch", &flood, 1, 1000);
    add_on(in, "sluice.requests", &now, 9, 0);
    void *out[64];
    sl_intake_pause_later(in, 1);
    ck_assert_int_eq(sl_intake_take(in, out, 64), 0);
    double t0 = sl_mono_ms();
    sl_intake_wait(in, 50); /* not attached: a short sleep when nothing counts as pending */
    ck_assert_double_ge(sl_mono_ms() - t0, 4.0);
    now.len = 2;
    int n = sl_intake_take(in, out, 64);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(count_tag(out, n, 9), 2);
    sl_intake_pause_later(in, 0);
    n = sl_intake_take(in, out, 64);
    ck_assert_int_eq(n, 32);
    ck_assert_int_eq(TAG(out[0]), 1);
    ck_assert_int_eq(SEQ(out[0]), 0);
    sl_intake_free(in);
}
END_TEST

START_TEST(bad_options_are_refused)
{
    sl_intake_t *in = NULL;
    sl_intake_opts_t o = {0, 10, fake_take, NULL, NULL};
    ck_assert_int_eq(sl_intake_new(&o, &in), SL_EINVAL);
    o = (sl_intake_opts_t){4, 0, fake_take, NULL, NULL};
    ck_assert_int_eq(sl_intake_new(&o, &in), SL_EINVAL);
    o = (sl_intake_opts_t){4, 10, NULL, NULL, NULL};
    ck_assert_int_eq(sl_intake_new(&o, &in), SL_EINVAL);
    ck_assert_ptr_null(in);
}
END_TEST

static Suite *intake_suite(void)
{
    Suite *s = suite_create("intake");
    TCase *tc = tcase_create("round-robin");
    tcase_add_test(tc, flood_gives_one_slice_beside_the_other_partitions);
    tcase_add_test(tc, order_within_a_source_is_kept);
    tcase_add_test(tc, cap_cuts_a_take_and_the_next_resumes_there);
    tcase_add_test(tc, uncapped_takes_rotate_the_first_source);
    tcase_add_test(tc, add_replace_remove_and_clear_release_sources);
    tcase_add_test(tc, later_topic_gets_only_the_room_left);
    tcase_add_test(tc, a_paused_later_topic_is_neither_taken_nor_waited_for);
    tcase_add_test(tc, bad_options_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(intake_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
