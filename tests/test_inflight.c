/* test_inflight.c - ingest's takes in flight (ingest/inflight.h): an input offset is stored only
 * when its take and every earlier take landed, a later take that lands first waits for the
 * earlier one, a take with a failed delivery (or a produce that failed at once) is produced again
 * whole and holds back the takes behind it, the ring refuses a take beyond its bound, and what a
 * take owns is freed when it retires.
 *
 * The produce and store operations are fakes that record what they were asked; deliveries are
 * reported by the test, as librdkafka's delivery callback would.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ingest/inflight.h"

typedef struct {
    int produced;        /* produce calls */
    int fail_next;       /* this many next produce calls fail at once */
    sl_take_t *last[64]; /* the take of each produce call, in order */
    struct {
        char topic[32];
        int32_t partition;
        int64_t next;
    } stored[64];
    int nstored;
} fake_t;

static int fake_produce(void *arg, sl_take_t *t, const char *topic, const char *key,
                        const char *value)
{
    (void)topic;
    (void)key;
    (void)value;
    fake_t *f = arg;
    if (f->fail_next > 0) {
        f->fail_next--;
        return -1;
    }
    if (f->produced < 64)
        f->last[f->produced] = t;
    f->produced++;
    return 0;
}

static void fake_store(void *arg, const char *topic, int32_t partition, int64_t next)
{
    fake_t *f = arg;
    ck_assert_int_lt(f->nstored, 64);
    snprintf(f->stored[f->nstored].topic, sizeof f->stored[0].topic, "%s", topic);
    f->stored[f->nstored].partition = partition;
    f->stored[f->nstored].next = next;
    f->nstored++;
}

static fake_t fk;
static sl_inflight_t *fl;

static void setup(void)
{
    memset(&fk, 0, sizeof fk);
    sl_inflight_ops_t ops = {fake_produce, fake_store, &fk};
    fl = sl_inflight_new(3, 4, 2, &ops);
    ck_assert_ptr_nonnull(fl);
}

static void teardown(void)
{
    sl_inflight_free(fl);
}

/* A take of one input (topic, partition, offset) and one output. */
static sl_take_t *take_one(int32_t partition, int64_t offset)
{
    sl_take_t *t = sl_inflight_open(fl);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(sl_take_input(t, "sluice.requests", partition, offset), SL_OK);
    ck_assert_int_eq(sl_take_output(fl, t, "sluice.jobs", strdup("k"), strdup("v")), SL_OK);
    return t;
}

START_TEST(offsets_are_stored_only_in_order)
{
    sl_take_t *a = take_one(0, 10);
    sl_take_t *b = take_one(0, 11);
    ck_assert_int_eq(sl_inflight_count(fl), 2);
    /* The later take lands first: nothing is stored, the earlier one is still out. */
    sl_take_delivered(b, 1);
    ck_assert_int_eq(sl_inflight_retire(fl), 0);
    ck_assert_int_eq(fk.nstored, 0);
    /* The earlier one lands: both retire, offsets in order, the last one after offset 11. */
    sl_take_delivered(a, 1);
    ck_assert_int_eq(sl_inflight_retire(fl), 2);
    ck_assert_int_eq(fk.nstored, 2);
    ck_assert_int_eq(fk.stored[0].next, 11);
    ck_assert_int_eq(fk.stored[1].next, 12);
    ck_assert_int_eq(sl_inflight_count(fl), 0);
}
END_TEST

START_TEST(a_take_stores_the_position_after_its_last_input_per_partition)
{
    sl_take_t *t = sl_inflight_open(fl);
    ck_assert_int_eq(sl_take_input(t, "sluice.requests", 4, 7), SL_OK);
    ck_assert_int_eq(sl_take_input(t, "sluice.requests", 4, 9), SL_OK);
    ck_assert_int_eq(sl_take_input(t, "sluice.requests.batch", 4, 100), SL_OK);
    /* Bound: two partitions per take in this ring. */
    ck_assert_int_eq(sl_take_input(t, "sluice.requests", 5, 1), SL_EINVAL);
    ck_assert_int_eq(sl_inflight_retire(fl), 1); /* no outputs: lands at once */
    ck_assert_int_eq(fk.nstored, 2);
    ck_assert_str_eq(fk.stored[0].topic, "sluice.requests");
    ck_assert_int_eq(fk.stored[0].next, 10);
    ck_assert_str_eq(fk.stored[1].topic, "sluice.requests.batch");
    ck_assert_int_eq(fk.stored[1].next, 101);
}
END_TEST

START_TEST(a_failed_delivery_produces_the_take_again_and_holds_back_the_next)
{
    sl_take_t *a = take_one(1, 5);
    sl_take_t *b = take_one(1, 6);
    sl_take_delivered(a, 0); /* the broker refused it */
    sl_take_delivered(b, 1);
    ck_assert_int_eq(fk.produced, 2);
    ck_assert_int_eq(sl_inflight_retire(fl), 0);
    ck_assert_int_eq(fk.produced, 3); /* a, again */
    ck_assert_ptr_eq(fk.last[2], a);
    ck_assert_int_eq(fk.nstored, 0);
    ck_assert_int_eq(sl_inflight_retire(fl), 0); /* still out: not produced a third time */
    ck_assert_int_eq(fk.produced, 3);
    sl_take_delivered(a, 1);
    ck_assert_int_eq(sl_inflight_retire(fl), 2);
    ck_assert_int_eq(fk.stored[0].next, 6);
    ck_assert_int_eq(fk.stored[1].next, 7);
}
END_TEST

START_TEST(a_produce_that_fails_at_once_counts_as_a_failed_delivery)
{
    sl_take_t *t = sl_inflight_open(fl);
    ck_assert_int_eq(sl_take_input(t, "sluice.requests", 2, 3), SL_OK);
    fk.fail_next = 1;
    ck_assert_int_eq(sl_take_output(fl, t, "sluice.jobs", strdup("k"), strdup("v")), SL_EKAFKA);
    ck_assert_int_eq(sl_inflight_retire(fl), 0); /* produced again instead of stored */
    ck_assert_int_eq(fk.produced, 1);
    ck_assert_int_eq(fk.nstored, 0);
    sl_take_delivered(t, 1);
    ck_assert_int_eq(sl_inflight_retire(fl), 1);
    ck_assert_int_eq(fk.stored[0].next, 4);
}
END_TEST

START_TEST(the_ring_is_bounded_and_a_take_is_bounded)
{
    sl_take_t *t[3];
    for (int i = 0; i < 3; i++)
        t[i] = take_one(0, i);
    ck_assert_ptr_null(sl_inflight_open(fl));
    for (int i = 0; i < 3; i++) /* up to 4 outputs in this ring's takes */
        ck_assert_int_eq(sl_take_output(fl, t[2], "sluice.jobs", strdup("k"), strdup("v")), SL_OK);
    char *k = strdup("k"), *v = strdup("v");
    ck_assert_int_eq(sl_take_output(fl, t[2], "sluice.jobs", k, v), SL_EINVAL);
    free(k); /* refused: still the caller's */
    free(v);
    for (int i = 0; i < fk.produced; i++)
        sl_take_delivered(fk.last[i], 1);
    ck_assert_int_eq(sl_inflight_retire(fl), 3);
    ck_assert_ptr_nonnull(sl_inflight_open(fl)); /* room again */
}
END_TEST

/* The loop opens a take every turn, before it knows whether anything arrives. A turn that took
 * nothing must not keep a slot: behind a take still waiting for its acknowledgements, empty
 * takes used to fill the ring, and ingest then stopped reading the requests topic until the
 * broker answered (hundreds of ms under a batch flood on the dev broker). */
START_TEST(a_take_that_took_nothing_holds_no_slot)
{
    sl_take_t *a = take_one(0, 10); /* produced, not yet acknowledged */
    for (int turn = 0; turn < 10; turn++) {
        sl_take_t *idle = sl_inflight_open(fl);
        ck_assert_msg(idle != NULL, "idle turn %d found the ring full", turn);
        ck_assert_ptr_ne(idle, a);
    }
    ck_assert_int_le(sl_inflight_count(fl), 2);
    /* The empty take is used by the turn that does take something, and both retire in order. */
    sl_take_t *b = take_one(0, 11);
    ck_assert_int_eq(sl_inflight_count(fl), 2);
    sl_take_delivered(a, 1);
    sl_take_delivered(b, 1);
    ck_assert_int_eq(sl_inflight_retire(fl), 2);
    ck_assert_int_eq(fk.nstored, 2);
    ck_assert_int_eq(fk.stored[1].next, 12);
}
END_TEST

START_TEST(bad_bounds_are_refused)
{
    sl_inflight_ops_t ops = {fake_produce, fake_store, &fk};
    ck_assert_ptr_null(sl_inflight_new(0, 1, 1, &ops));
    ck_assert_ptr_null(sl_inflight_new(1, 0, 1, &ops));
    ck_assert_ptr_null(sl_inflight_new(1, 1, 0, &ops));
    ck_assert_ptr_null(sl_inflight_new(1, 1, 1, NULL));
}
END_TEST

static Suite *inflight_suite(void)
{
    Suite *s = suite_create("inflight");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, offsets_are_stored_only_in_order);
    tcase_add_test(tc, a_take_stores_the_position_after_its_last_input_per_partition);
    tcase_add_test(tc, a_failed_delivery_produces_the_take_again_and_holds_back_the_next);
    tcase_add_test(tc, a_produce_that_fails_at_once_counts_as_a_failed_delivery);
    tcase_add_test(tc, the_ring_is_bounded_and_a_take_is_bounded);
    tcase_add_test(tc, a_take_that_took_nothing_holds_no_slot);
    tcase_add_test(tc, bad_bounds_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(inflight_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
