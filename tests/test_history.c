/* test_history.c - what the console charts (scheduler/history.h): the samples of each
 * deployment's provider-side buckets and answers, the ring of the last five minutes, the queue
 * waits' percentiles, expiries, the tenants' shares, and a fresh start after a reload; fed by
 * the real core's hooks on the scheduler unit tests' environment (tests/lib/sched_env.h).
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../scheduler/history.h"
#include "lib/sched_env.h"
#include "sign.h"

static const opts_t TWO = {"'dep-a', 'dep-b'", 0, 0, 0, 0, NULL, NULL};

static sl_history_t *watch(env_t *e)
{
    sl_history_t *h = sl_history_new();
    ck_assert_ptr_nonnull(h);
    sl_sched_observe(e->sched, sl_history_observer(), h);
    return h;
}

static json_t *named(json_t *arr, const char *key, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o) {
        if (strcmp(sget(o, key), name) == 0)
            return o;
    }
    ck_abort_msg("no %s %s", key, name);
    return NULL;
}

/* The last value of series key of o. */
static double last(json_t *o, const char *key)
{
    json_t *a = json_object_get(o, key);
    ck_assert_uint_gt(json_array_size(a), 0);
    return json_number_value(json_array_get(a, json_array_size(a) - 1));
}

/* The route "chat", class "standard" of a /v1/queues answer. */
static json_t *standard_queue(json_t *queues)
{
    json_t *chat = named(json_object_get(queues, "routes"), "route", "chat");
    return named(json_object_get(chat, "classes"), "class", "standard");
}

START_TEST(samples_follow_reservations_reconciliation_and_provider_answers)
{
    env_t e;
    env_init(&e, &TWO, T0);
    sl_history_t *h = watch(&e);
    sl_history_sample(h, e.sched, e.cfg, T0);
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "job-%d", i);
        feed_job(&e, id, "acme", T0);
    }
    /* a cold start: dep-a takes two, dep-b one (sched_env.h) */
    batch_t b = step(&e, T0 + 10);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 3);
    lease_t l[3];
    for (int i = 0; i < 3; i++)
        l[i] = lease_of(b.doc[i], T0 + 10);
    batch_free(&b);
    sl_history_sample(h, e.sched, e.cfg, T0 + 1000);
    json_t *doc = sl_history_json(h);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "interval_ms")), 1000);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "t")), 2);
    json_t *rpm_a = named(json_object_get(doc, "buckets"), "id", "deployment:dep-a:rpm");
    ck_assert_str_eq(sget(rpm_a, "deployment"), "dep-a");
    ck_assert_double_eq(json_number_value(json_array_get(json_object_get(rpm_a, "reserved"), 0)),
                        0);
    ck_assert_double_eq_tol(last(rpm_a, "reserved"), 2, 1e-9);
    /* until a call is reconciled, its reservation is what it is charged */
    ck_assert_double_eq_tol(last(rpm_a, "charged"), 2, 1e-9);
    json_t *tpm_a = named(json_object_get(doc, "buckets"), "id", "deployment:dep-a:tpm");
    ck_assert_double_eq_tol(last(tpm_a, "reserved"), 300, 1e-9);
    ck_assert_double_eq_tol(last(tpm_a, "charged"), 300, 1e-9);
    json_decref(doc);
    /* one answer each: ok, a 429, a 503 */
    usagespec_t limited = {"rate_limited", 429, -1, 0, 5000, 0, NULL};
    usagespec_t down = {"overloaded", 503, -1, 0, 2000, 0, NULL};
    const usagespec_t *answers[3] = {&OK_USAGE, &limited, &down};
    for (int i = 0; i < 3; i++)
        feed_usage(&e, l[i].job, 1, l[i].res, l[i].dep, answers[i], T0 + 1100);
    sl_history_sample(h, e.sched, e.cfg, T0 + 2000);
    doc = sl_history_json(h);
    json_t *deps = json_object_get(doc, "deployments");
    double calls = 0, limited_n = 0, down_n = 0;
    size_t i;
    json_t *d;
    json_array_foreach(deps, i, d) {
        calls += last(d, "calls");
        limited_n += last(d, "rate_limited");
        down_n += last(d, "unavailable");
        /* the answers came after the second sample */
        ck_assert_double_eq(json_number_value(json_array_get(json_object_get(d, "calls"), 1)),
                            0);
    }
    ck_assert_double_eq(calls, 3);
    ck_assert_double_eq(limited_n, 1);
    ck_assert_double_eq(down_n, 1);
    /* the deployments that answered 429 and 503 are paused in the last sample */
    json_t *dl = named(deps, "name", l[1].dep);
    ck_assert_double_eq(last(dl, "paused"), 1);
    /* a request is charged once answered, whatever the answer */
    rpm_a = named(json_object_get(doc, "buckets"), "id", "deployment:dep-a:rpm");
    ck_assert_double_eq_tol(last(rpm_a, "charged"), 2, 1e-9);
    /* the 429 and the 503 give their tokens back; the answered call keeps its charge of 150
     * (sched_env.h) */
    double tpm_reserved = 0, tpm_charged = 0;
    json_t *bk;
    json_array_foreach(json_object_get(doc, "buckets"), i, bk) {
        if (strstr(sget(bk, "id"), ":tpm") != NULL) {
            tpm_reserved += last(bk, "reserved");
            tpm_charged += last(bk, "charged");
        }
    }
    ck_assert_double_eq_tol(tpm_reserved, 450, 1e-9);
    ck_assert_double_eq_tol(tpm_charged, 150, 1e-9);
    json_decref(doc);
    sl_sched_observe(e.sched, NULL, NULL);
    sl_history_free(h);
    env_done(&e);
}
END_TEST

START_TEST(the_ring_keeps_the_last_five_minutes)
{
    env_t e;
    env_init(&e, &TWO, T0);
    sl_history_t *h = watch(&e);
    for (int k = 0; k < SL_HISTORY_SAMPLES + 17; k++)
        sl_history_sample(h, e.sched, e.cfg, T0 + 1000 * (int64_t)k);
    json_t *doc = sl_history_json(h);
    json_t *t = json_object_get(doc, "t");
    ck_assert_int_eq(json_array_size(t), SL_HISTORY_SAMPLES);
    ck_assert_int_eq(json_integer_value(json_array_get(t, 0)), T0 + 17000);
    ck_assert_int_eq(json_integer_value(json_array_get(t, SL_HISTORY_SAMPLES - 1)),
                     T0 + 1000 * (SL_HISTORY_SAMPLES + 16));
    json_t *b = json_array_get(json_object_get(doc, "buckets"), 0);
    ck_assert_int_eq(json_array_size(json_object_get(b, "reserved")), SL_HISTORY_SAMPLES);
    json_decref(doc);
    /* a reset (a reload) forgets it all; the next sample starts again */
    sl_history_reset(h);
    doc = sl_history_json(h);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "t")), 0);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "buckets")), 0);
    json_decref(doc);
    sl_history_sample(h, e.sched, e.cfg, T0 + 999000);
    doc = sl_history_json(h);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "t")), 1);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "buckets")), 4);
    json_decref(doc);
    sl_sched_observe(e.sched, NULL, NULL);
    sl_history_free(h);
    env_done(&e);
}
END_TEST

START_TEST(queue_waits_expiries_and_shares)
{
    env_t e;
    opts_t o = {"'dep-a'", 0, 0, 0, 0, NULL, NULL};
    env_init(&e, &o, T0);
    sl_history_t *h = watch(&e);
    sl_history_sample(h, e.sched, e.cfg, T0);
    /* before any lease: no waits, and the queue's depth and oldest job as queued */
    feed_job(&e, "job-1", "acme", T0);
    feed_job(&e, "job-2", "globex", T0);
    feed_job(&e, "job-3", "globex", T0);
    json_t *q = sl_history_queues_json(h, e.sched, e.cfg, T0 + 5);
    json_t *std = standard_queue(q);
    ck_assert_int_eq(iget(std, "depth"), 3);
    ck_assert_int_eq(iget(std, "oldest_wait_ms"), 5);
    ck_assert_int_eq(iget(std, "waits_seen"), 0);
    ck_assert(json_is_null(json_object_get(std, "wait_p50_ms")));
    json_decref(q);
    /* dep-a takes two at T0 + 40: each waited 40 ms; acme and globex one each */
    batch_t b = step(&e, T0 + 40);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 2);
    batch_free(&b);
    q = sl_history_queues_json(h, e.sched, e.cfg, T0 + 50);
    std = standard_queue(q);
    ck_assert_int_eq(iget(std, "depth"), 1);
    ck_assert_int_eq(iget(std, "waits_seen"), 2);
    ck_assert_int_eq(iget(std, "wait_p50_ms"), 40);
    ck_assert_int_eq(iget(std, "wait_p99_ms"), 40);
    json_t *shares = json_object_get(named(json_object_get(q, "routes"), "route", "chat"),
                                     "shares");
    ck_assert_int_eq(json_array_size(shares), 2);
    double sum = 0;
    size_t i;
    json_t *s;
    json_array_foreach(shares, i, s) {
        sum += json_number_value(json_object_get(s, "share"));
        ck_assert_double_eq_tol(json_number_value(json_object_get(s, "share")), 0.5, 1e-9);
        ck_assert_int_eq(iget(s, "weight"), 1);
    }
    ck_assert_double_eq_tol(sum, 1, 1e-9);
    json_t *totals = json_object_get(q, "totals");
    ck_assert_int_eq(iget(totals, "received"), 3);
    ck_assert_int_eq(iget(totals, "dispatched"), 2);
    json_decref(q);
    /* a job whose deadline passes in the queue is counted against its class */
    jobspec_t dead = {"job-4", "acme", NULL, T0 - 2000, T0 + 60, 150, 100};
    feed_spec(&e, &dead, T0 + 50);
    for (int64_t t = T0 + 60; t <= T0 + 3000; t += 50) {
        b = step(&e, t);
        batch_free(&b);
    }
    q = sl_history_queues_json(h, e.sched, e.cfg, T0 + 3000);
    ck_assert_int_eq(iget(json_object_get(json_object_get(q, "totals"), "expired_by_class"),
                          "standard"),
                     1);
    json_decref(q);
    sl_sched_observe(e.sched, NULL, NULL);
    sl_history_free(h);
    env_done(&e);
}
END_TEST

START_TEST(percentiles_are_of_the_last_waits_only)
{
    env_t e;
    opts_t o = {"'dep-a'", 0, 0, 0, 0, NULL, NULL};
    env_init(&e, &o, T0);
    sl_history_t *h = watch(&e);
    sl_history_sample(h, e.sched, e.cfg, T0);
    const sl_sched_observer_t *obs = sl_history_observer();
    /* 1000 long waits, then the ring's worth of short ones: the long ones are gone */
    for (int k = 0; k < 1000; k++)
        obs->leased(h, 0, 0, SL_CLASS_STANDARD, 0, 10, 90000);
    for (int k = 1; k <= SL_HISTORY_WAITS; k++)
        obs->leased(h, 0, 0, SL_CLASS_STANDARD, 0, 10, k);
    /* out-of-range indices from a stale core are ignored */
    obs->leased(h, 0, 99, SL_CLASS_STANDARD, 0, 10, 5);
    obs->leased(h, 99, 0, SL_CLASS_STANDARD, 0, NAN, 5);
    json_t *q = sl_history_queues_json(h, e.sched, e.cfg, T0);
    json_t *std = standard_queue(q);
    ck_assert_int_eq(iget(std, "waits_seen"), 1000 + SL_HISTORY_WAITS + 1);
    int64_t p50 = iget(std, "wait_p50_ms"), p99 = iget(std, "wait_p99_ms");
    ck_assert_msg(p50 >= SL_HISTORY_WAITS / 2 - 2 && p50 <= SL_HISTORY_WAITS / 2 + 2,
                  "p50 %lld", (long long)p50);
    ck_assert_msg(p99 < 90000 && p99 >= SL_HISTORY_WAITS * 98 / 100, "p99 %lld",
                  (long long)p99);
    json_decref(q);
    sl_sched_observe(e.sched, NULL, NULL);
    sl_history_free(h);
    env_done(&e);
}
END_TEST

static Suite *history_suite(void)
{
    Suite *s = suite_create("history");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, samples_follow_reservations_reconciliation_and_provider_answers);
    tcase_add_test(tc, the_ring_keeps_the_last_five_minutes);
    tcase_add_test(tc, queue_waits_expiries_and_shares);
    tcase_add_test(tc, percentiles_are_of_the_last_waits_only);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return 1;
    SRunner *sr = srunner_create(history_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
