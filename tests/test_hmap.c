/* test_hmap.c - behaviour of the string-keyed hash map (common/hmap.h): insert, replace,
 * lookup, delete with backward shift, growth, iteration. The randomised test drives the map and
 * a plain reference array with the same operations and compares them after every step.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hmap.h"
#include "../common/sign.h"

/* Values are small integers smuggled in pointers; 0 would read as "absent". */
#define V(n) ((void *)(uintptr_t)(n))
#define N(p) ((uintptr_t)(p))

START_TEST(put_then_get_returns_the_value)
{
    sl_hmap_t *m = sl_hmap_new();
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(sl_hmap_len(m), 0);
    ck_assert_ptr_null(sl_hmap_get(m, "job-1"));
    ck_assert_int_eq(sl_hmap_put(m, "job-1", V(1)), SL_OK);
    ck_assert_int_eq(sl_hmap_put(m, "job-2", V(2)), SL_OK);
    ck_assert_int_eq(sl_hmap_put(m, "", V(3)), SL_OK); /* the empty string is a key too */
    ck_assert_uint_eq(sl_hmap_len(m), 3);
    ck_assert_ptr_eq(sl_hmap_get(m, "job-1"), V(1));
    ck_assert_ptr_eq(sl_hmap_get(m, "job-2"), V(2));
    ck_assert_ptr_eq(sl_hmap_get(m, ""), V(3));
    ck_assert_ptr_null(sl_hmap_get(m, "job-3"));
    ck_assert_ptr_null(sl_hmap_get(m, "job-"));
    sl_hmap_free(m);
}
END_TEST

START_TEST(keys_are_copied)
{
    sl_hmap_t *m = sl_hmap_new();
    char key[16];
    snprintf(key, sizeof key, "%s", "tenant-a");
    ck_assert_int_eq(sl_hmap_put(m, key, V(7)), SL_OK);
    snprintf(key, sizeof key, "%s", "tenant-b");
    ck_assert_ptr_eq(sl_hmap_get(m, "tenant-a"), V(7));
    ck_assert_ptr_null(sl_hmap_get(m, "tenant-b"));
    sl_hmap_free(m);
}
END_TEST

START_TEST(put_replaces_the_value_of_an_existing_key)
{
    sl_hmap_t *m = sl_hmap_new();
    ck_assert_int_eq(sl_hmap_put(m, "k", V(1)), SL_OK);
    ck_assert_int_eq(sl_hmap_put(m, "k", V(2)), SL_OK);
    ck_assert_uint_eq(sl_hmap_len(m), 1);
    ck_assert_ptr_eq(sl_hmap_get(m, "k"), V(2));
    /* Replacing many times must not grow the map or add entries. */
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(sl_hmap_put(m, "k", V(i + 10)), SL_OK);
    ck_assert_uint_eq(sl_hmap_len(m), 1);
    ck_assert_ptr_eq(sl_hmap_get(m, "k"), V(1009));
    sl_hmap_free(m);
}
END_TEST

START_TEST(del_returns_the_value_and_removes_the_key)
{
    sl_hmap_t *m = sl_hmap_new();
    ck_assert_int_eq(sl_hmap_put(m, "a", V(1)), SL_OK);
    ck_assert_int_eq(sl_hmap_put(m, "b", V(2)), SL_OK);
    ck_assert_ptr_eq(sl_hmap_del(m, "a"), V(1));
    ck_assert_uint_eq(sl_hmap_len(m), 1);
    ck_assert_ptr_null(sl_hmap_get(m, "a"));
    ck_assert_ptr_eq(sl_hmap_get(m, "b"), V(2));
    ck_assert_ptr_null(sl_hmap_del(m, "a")); /* already gone */
    ck_assert_ptr_null(sl_hmap_del(m, "zzz"));
    ck_assert_uint_eq(sl_hmap_len(m), 1);
    /* A deleted key can come back. */
    ck_assert_int_eq(sl_hmap_put(m, "a", V(3)), SL_OK);
    ck_assert_ptr_eq(sl_hmap_get(m, "a"), V(3));
    ck_assert_uint_eq(sl_hmap_len(m), 2);
    sl_hmap_free(m);
}
END_TEST

START_TEST(grows_past_many_thousands_of_keys)
{
    enum { COUNT = 100000 };
    sl_hmap_t *m = sl_hmap_new();
    char key[32];
    for (int i = 0; i < COUNT; i++) {
        snprintf(key, sizeof key, "job-%d", i);
        ck_assert_int_eq(sl_hmap_put(m, key, V(i + 1)), SL_OK);
    }
    ck_assert_uint_eq(sl_hmap_len(m), COUNT);
    for (int i = 0; i < COUNT; i++) {
        snprintf(key, sizeof key, "job-%d", i);
        void *v = sl_hmap_get(m, key);
        if (v != V(i + 1))
            ck_abort_msg("%s -> %lu, expected %d", key, (unsigned long)N(v), i + 1);
    }
    snprintf(key, sizeof key, "job-%d", COUNT);
    ck_assert_ptr_null(sl_hmap_get(m, key));
    /* Delete every other key: the rest stay findable. */
    for (int i = 0; i < COUNT; i += 2) {
        snprintf(key, sizeof key, "job-%d", i);
        ck_assert_ptr_eq(sl_hmap_del(m, key), V(i + 1));
    }
    ck_assert_uint_eq(sl_hmap_len(m), COUNT / 2);
    for (int i = 0; i < COUNT; i++) {
        snprintf(key, sizeof key, "job-%d", i);
        void *v = sl_hmap_get(m, key);
        void *want = i % 2 == 0 ? NULL : V(i + 1);
        if (v != want)
            ck_abort_msg("after deletes %s -> %lu, expected %lu", key, (unsigned long)N(v),
                         (unsigned long)N(want));
    }
    sl_hmap_free(m);
}
END_TEST

/* The reference: key "k<i>" is present when live[i], with value vals[i]. */
typedef struct {
    uintptr_t *vals;
    int *live;
    int universe;
} ref_t;

static void check_against_ref(const sl_hmap_t *m, const ref_t *r, int step)
{
    size_t live = 0;
    for (int i = 0; i < r->universe; i++)
        live += r->live[i] != 0;
    if (sl_hmap_len(m) != live)
        ck_abort_msg("step %d: len %zu, reference %zu", step, sl_hmap_len(m), live);
    char key[16];
    for (int i = 0; i < r->universe; i++) {
        snprintf(key, sizeof key, "k%d", i);
        uintptr_t want = r->live[i] ? r->vals[i] : 0;
        uintptr_t got = N(sl_hmap_get(m, key));
        if (got != want)
            ck_abort_msg("step %d: %s -> %lu, reference %lu", step, key, (unsigned long)got,
                         (unsigned long)want);
    }
}

START_TEST(random_operations_match_a_reference)
{
    /* A small key universe keeps clusters dense, so deletions shift long runs, wrap around the
     * end of the table and cross growth boundaries. */
    enum { UNIVERSE = 300, STEPS = 20000 };
    ref_t r = {calloc(UNIVERSE, sizeof *r.vals), calloc(UNIVERSE, sizeof *r.live), UNIVERSE};
    ck_assert_ptr_nonnull(r.vals);
    ck_assert_ptr_nonnull(r.live);
    sl_hmap_t *m = sl_hmap_new();
    unsigned seed = 12345;
    uintptr_t next_value = 1;
    char key[16];
    for (int step = 0; step < STEPS; step++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 8) % UNIVERSE);
        /* Puts outnumber deletes early and deletes win later, so the map fills and empties. */
        int put = (int)((seed >> 24) % 10) < (step < STEPS / 2 ? 7 : 3);
        snprintf(key, sizeof key, "k%d", k);
        if (put) {
            uintptr_t v = next_value++;
            ck_assert_int_eq(sl_hmap_put(m, key, V(v)), SL_OK);
            r.vals[k] = v;
            r.live[k] = 1;
        } else {
            uintptr_t got = N(sl_hmap_del(m, key));
            uintptr_t want = r.live[k] ? r.vals[k] : 0;
            if (got != want)
                ck_abort_msg("step %d: del %s -> %lu, reference %lu", step, key, (unsigned long)got,
                             (unsigned long)want);
            r.live[k] = 0;
        }
        if (step % 25 == 0 || step == STEPS - 1)
            check_against_ref(m, &r, step);
    }
    /* Empty it completely: nothing is left behind. */
    for (int k = 0; k < UNIVERSE; k++) {
        snprintf(key, sizeof key, "k%d", k);
        sl_hmap_del(m, key);
        r.live[k] = 0;
    }
    check_against_ref(m, &r, STEPS);
    ck_assert_uint_eq(sl_hmap_len(m), 0);
    sl_hmap_free(m);
    free(r.vals);
    free(r.live);
}
END_TEST

START_TEST(deleting_from_a_colliding_cluster_keeps_the_rest_findable)
{
    /* Fill the initial table to just under its growth point so probes collide, then delete
     * from the middle of clusters in several orders. */
    for (int order = 0; order < 3; order++) {
        sl_hmap_t *m = sl_hmap_new();
        char key[16];
        enum { COUNT = 47 };
        for (int i = 0; i < COUNT; i++) {
            snprintf(key, sizeof key, "c%d", i);
            ck_assert_int_eq(sl_hmap_put(m, key, V(i + 1)), SL_OK);
        }
        int deleted[COUNT] = {0};
        for (int n = 0; n < COUNT; n++) {
            int i = order == 0 ? n : order == 1 ? COUNT - 1 - n : (n * 17) % COUNT;
            snprintf(key, sizeof key, "c%d", i);
            ck_assert_ptr_eq(sl_hmap_del(m, key), V(i + 1));
            deleted[i] = 1;
            for (int j = 0; j < COUNT; j++) {
                snprintf(key, sizeof key, "c%d", j);
                void *want = deleted[j] ? NULL : V(j + 1);
                if (sl_hmap_get(m, key) != want)
                    ck_abort_msg("order %d: after deleting c%d, c%d is wrong", order, i, j);
            }
        }
        ck_assert_uint_eq(sl_hmap_len(m), 0);
        sl_hmap_free(m);
    }
}
END_TEST

typedef struct {
    int count;
    uintptr_t sum;
    int saw_b;
} each_acc_t;

static void accumulate(const char *key, void *value, void *arg)
{
    each_acc_t *acc = arg;
    acc->count++;
    acc->sum += N(value);
    if (strcmp(key, "b") == 0)
        acc->saw_b++;
}

START_TEST(each_visits_every_entry_once)
{
    sl_hmap_t *m = sl_hmap_new();
    each_acc_t acc = {0, 0, 0};
    sl_hmap_each(m, accumulate, &acc);
    ck_assert_int_eq(acc.count, 0);
    char key[16];
    uintptr_t want = 0;
    for (int i = 0; i < 500; i++) {
        snprintf(key, sizeof key, "e%d", i);
        ck_assert_int_eq(sl_hmap_put(m, key, V(i + 1)), SL_OK);
        want += (uintptr_t)(i + 1);
    }
    ck_assert_int_eq(sl_hmap_put(m, "b", V(1000)), SL_OK);
    ck_assert_ptr_eq(sl_hmap_del(m, "e0"), V(1));
    want += 1000 - 1;
    sl_hmap_each(m, accumulate, &acc);
    ck_assert_int_eq(acc.count, 500);
    ck_assert_uint_eq(acc.sum, want);
    ck_assert_int_eq(acc.saw_b, 1);
    sl_hmap_free(m);
}
END_TEST

typedef struct {
    const char **seen;
    const char *want;
} key_probe_t;

/* sl_hmap_each: the key pointer of the entry whose key is arg->want. */
static void remember_key_of(const char *key, void *value, void *arg)
{
    (void)value;
    key_probe_t *a = arg;
    if (strcmp(key, a->want) == 0)
        *a->seen = key;
}

/* A borrowing map keeps the caller's pointer: what it finds is the caller's own string, a
 * replacing put takes the new owner's pointer (the old one may be freed with its value), and
 * removing or freeing the map leaves the keys alone (ASan would report a double free). */
START_TEST(a_borrowing_map_keeps_the_callers_keys)
{
    sl_hmap_t *m = sl_hmap_new_borrowed();
    ck_assert_ptr_nonnull(m);
    char *a = strdup("job-1"), *b = strdup("job-1"), *c = strdup("job-2");
    ck_assert_int_eq(sl_hmap_put(m, a, a), SL_OK);
    ck_assert_int_eq(sl_hmap_put(m, c, c), SL_OK);
    ck_assert_ptr_eq(sl_hmap_get(m, "job-1"), a);
    ck_assert_int_eq(sl_hmap_put(m, b, b), SL_OK); /* b replaces a, under b's own pointer */
    memset(a, 'x', 5);
    free(a);
    ck_assert_ptr_eq(sl_hmap_get(m, "job-1"), b);
    const char *seen = NULL;
    key_probe_t arg = {&seen, "job-1"};
    sl_hmap_each(m, remember_key_of, &arg);
    ck_assert_ptr_eq(seen, b);
    ck_assert_ptr_eq(sl_hmap_del(m, "job-2"), c);
    ck_assert_str_eq(c, "job-2"); /* not freed by the map */
    ck_assert_uint_eq(sl_hmap_len(m), 1);
    sl_hmap_free(m);
    ck_assert_str_eq(b, "job-1");
    free(b);
    free(c);
}
END_TEST

START_TEST(values_are_borrowed_not_freed)
{
    /* The map frees its key copies only; ASan would report a double free otherwise. */
    sl_hmap_t *m = sl_hmap_new();
    char *owned = strdup("value owned by the caller");
    ck_assert_int_eq(sl_hmap_put(m, "k", owned), SL_OK);
    ck_assert_ptr_eq(sl_hmap_del(m, "k"), owned);
    ck_assert_int_eq(sl_hmap_put(m, "k2", owned), SL_OK);
    sl_hmap_free(m);
    ck_assert_str_eq(owned, "value owned by the caller");
    free(owned);
    sl_hmap_free(NULL);
}
END_TEST

static Suite *hmap_suite(void)
{
    Suite *s = suite_create("hmap");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, put_then_get_returns_the_value);
    tcase_add_test(tc, keys_are_copied);
    tcase_add_test(tc, put_replaces_the_value_of_an_existing_key);
    tcase_add_test(tc, del_returns_the_value_and_removes_the_key);
    tcase_add_test(tc, grows_past_many_thousands_of_keys);
    tcase_add_test(tc, random_operations_match_a_reference);
    tcase_add_test(tc, deleting_from_a_colliding_cluster_keeps_the_rest_findable);
    tcase_add_test(tc, each_visits_every_entry_once);
    tcase_add_test(tc, values_are_borrowed_not_freed);
    tcase_add_test(tc, a_borrowing_map_keeps_the_callers_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return 1;
    SRunner *sr = srunner_create(hmap_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
