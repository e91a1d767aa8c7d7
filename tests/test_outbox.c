/* test_outbox.c - delivery tracking of the results outbox (scheduler/outbox.h): acknowledged
 * rows leave the outbox once the transaction that deletes them commits, and a failed or
 * refused delivery has the whole outbox produced again once nothing is in flight.
 *
 * Each test opens a fresh store in its own mkdtemp() directory with the real schema
 * (schema/ledger.sql); tests run from the repository root. The producer is a stub that
 * records what it was given, so nothing here needs Kafka.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../scheduler/outbox.h"
#include "../scheduler/store.h"
#include "util.h"

typedef struct {
    char dir[256];
    char db[300];
    sl_store_t *store;
    sl_outbox_t *ob;
} env_t;

static void env_init(env_t *e)
{
    char sql[1024], err[512] = "";
    memset(e, 0, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/sluice-test-outbox-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(e->dir));
    snprintf(e->db, sizeof e->db, "%s/t.db", e->dir);
    sl_resolve_path("schema/ledger.sql", sql, sizeof sql);
    ck_assert_int_eq(sl_store_open(e->db, sql, &e->store, err, sizeof err), SL_OK);
    e->ob = sl_outbox_new();
    ck_assert_ptr_nonnull(e->ob);
}

static void env_done(env_t *e)
{
    sl_outbox_free(e->ob);
    sl_store_close(e->store);
    static const char *const suffixes[] = {"", "-wal", "-shm", ".lock", "-journal"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        char path[400];
        snprintf(path, sizeof path, "%s%s", e->db, suffixes[i]);
        unlink(path);
    }
    rmdir(e->dir);
}

/* What the stub producer was handed; it reports each row to the tracker as sent (ok). */
typedef struct {
    sl_outbox_t *ob;
    int n;
    int64_t seq[8];
} produced_t;

static void produce(int64_t seq, const char *topic, const char *key, const char *value, void *arg)
{
    (void)topic;
    (void)key;
    (void)value;
    produced_t *p = arg;
    ck_assert_int_lt(p->n, 8);
    p->seq[p->n++] = seq;
    sl_outbox_sent(p->ob, 1);
}

static int64_t add_row(env_t *e, const char *key)
{
    int64_t seq = 0;
    ck_assert_int_eq(sl_store_outbox_add(e->store, "sluice.results", key, "{}", 10, &seq), SL_OK);
    return seq;
}

/* The rows still in the outbox (produced through a second tracker, so e's stays as it is). */
static int rows_left(env_t *e)
{
    sl_outbox_t *other = sl_outbox_new();
    ck_assert_ptr_nonnull(other);
    produced_t p = {other, 0, {0}};
    sl_outbox_sweep(other, e->store, 1 /*all*/, produce, &p);
    sl_outbox_free(other);
    return p.n;
}

START_TEST(acknowledged_results_leave_the_outbox_once_committed)
{
    env_t e;
    env_init(&e);
    int64_t s1 = add_row(&e, "j1"), s2 = add_row(&e, "j2");
    add_row(&e, "j3");
    produced_t p = {e.ob, 0, {0}};
    sl_outbox_sweep(e.ob, e.store, 1 /*all: at start*/, produce, &p);
    ck_assert_int_eq(p.n, 3);
    sl_outbox_delivered(e.ob, s1, 1);
    sl_outbox_delivered(e.ob, s2, 1);
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    ck_assert_int_eq(sl_outbox_forget_delivered(e.ob, e.store), SL_OK);
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    sl_outbox_committed(e.ob);
    ck_assert_int_eq(rows_left(&e), 1);
    /* nothing failed: no sweep, and nothing acknowledged is deleted twice */
    p.n = 0;
    sl_outbox_sweep(e.ob, e.store, 0, produce, &p);
    ck_assert_int_eq(p.n, 0);
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    ck_assert_int_eq(sl_outbox_forget_delivered(e.ob, e.store), SL_OK);
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    ck_assert_int_eq(rows_left(&e), 1);
    env_done(&e);
}
END_TEST

START_TEST(failed_delivery_sweeps_again_once_nothing_is_in_flight)
{
    env_t e;
    env_init(&e);
    int64_t s1 = add_row(&e, "j1"), s2 = add_row(&e, "j2");
    produced_t p = {e.ob, 0, {0}};
    sl_outbox_sweep(e.ob, e.store, 1, produce, &p);
    ck_assert_int_eq(p.n, 2);
    sl_outbox_delivered(e.ob, s1, 0 /*failed*/);
    p.n = 0;
    sl_outbox_sweep(e.ob, e.store, 0, produce, &p);
    ck_assert_int_eq(p.n, 0); /* j2 is still in flight */
    sl_outbox_delivered(e.ob, s2, 1);
    sl_outbox_sweep(e.ob, e.store, 0, produce, &p);
    ck_assert_int_eq(p.n, 2); /* every row again: j2's is deleted only at the next commit */
    ck_assert_int_eq(p.seq[0], s1);
    p.n = 0;
    sl_outbox_sweep(e.ob, e.store, 0, produce, &p);
    ck_assert_int_eq(p.n, 0); /* once per failure */
    env_done(&e);
}
END_TEST

START_TEST(refused_produce_sweeps_again)
{
    env_t e;
    env_init(&e);
    add_row(&e, "j1");
    sl_outbox_sent(e.ob, 0 /*the producer refused it*/);
    produced_t p = {e.ob, 0, {0}};
    sl_outbox_sweep(e.ob, e.store, 0, produce, &p);
    ck_assert_int_eq(p.n, 1);
    env_done(&e);
}
END_TEST

START_TEST(close_deletes_the_acknowledged_rows)
{
    env_t e;
    env_init(&e);
    int64_t s1 = add_row(&e, "j1");
    add_row(&e, "j2");
    produced_t p = {e.ob, 0, {0}};
    sl_outbox_sweep(e.ob, e.store, 1, produce, &p);
    sl_outbox_delivered(e.ob, s1, 1);
    sl_outbox_close(e.ob, e.store);
    ck_assert_int_eq(rows_left(&e), 1); /* j2 was not acknowledged: it goes out next start */
    env_done(&e);
}
END_TEST

static Suite *outbox_suite(void)
{
    Suite *s = suite_create("outbox");
    TCase *tc = tcase_create("delivery");
    tcase_add_test(tc, acknowledged_results_leave_the_outbox_once_committed);
    tcase_add_test(tc, failed_delivery_sweeps_again_once_nothing_is_in_flight);
    tcase_add_test(tc, refused_produce_sweeps_again);
    tcase_add_test(tc, close_deletes_the_acknowledged_rows);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(outbox_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
