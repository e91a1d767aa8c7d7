/* test_holders.c - what the scheduler does with dispatcher heartbeats (scheduler/holders.h):
 * a lease held by a dispatcher found dead is settled at once, charged, and its job goes again
 * (idempotent deployment) or fails as dispatcher_lost (not idempotent); a heartbeat of a
 * replaced incarnation, or one naming an old attempt, changes nothing. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../scheduler/holders.h"
#include "lib/sched_env.h"
#include "msg_heartbeat.h"
#include "sign.h"

static const char *const DEP_IDEM =
    "{'name': 'dep-i', 'base_url': 'http://127.0.0.1:9/i/v1', 'model': 'model-i',"
    " 'limits': {'rpm': 120, 'tpm': 12000}, 'slices_per_minute': 20, 'headroom': 0.9,"
    " 'idempotent': true}";

static const char *const INC_A = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char *const INC_B = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/* Feeds a heartbeat of dispatcher name, incarnation inc (started at started_ms), sent at
 * sent_ms, saying it runs max_in_flight calls at once (0: not said) and naming the given leases
 * (n of them). */
static void feed_beat(env_t *e, const char *name, const char *inc, int64_t started_ms,
                      int64_t sent_ms, int64_t max_in_flight, const lease_t *leases, int n,
                      int64_t now_ms)
{
    sl_msg_heartbeat_t h = {name, inc, started_ms, sent_ms, 1, max_in_flight};
    json_t *doc = sl_msg_heartbeat_json(&h);
    ck_assert_ptr_nonnull(doc);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(sl_msg_heartbeat_add(doc, leases[i].job, leases[i].res), SL_OK);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    feed_usage_text(e, text, now_ms);
    free(text);
}

/* A heartbeat sent now that does not say its capacity. */
static void feed_heartbeat(env_t *e, const char *name, const char *inc, int64_t started_ms,
                           const lease_t *leases, int n, int64_t now_ms)
{
    feed_beat(e, name, inc, started_ms, now_ms, 0, leases, n, now_ms);
}

/* Leases job-1 on a fresh core with the given route deployments; returns the lease. */
static lease_t lease_one(env_t *e, const opts_t *o)
{
    env_init(e, o, T0);
    feed_job(e, "job-1", "acme", T0);
    batch_t b = step(e, T0);
    json_t *d = find(&b, SL_MSG_DISPATCH, "job-1");
    ck_assert_ptr_nonnull(d);
    lease_t l = lease_of(d, T0);
    batch_free(&b);
    return l;
}

START_TEST(restarted_dispatcher_settles_its_predecessors_calls_and_idempotent_jobs_go_again)
{
    env_t e;
    opts_t o = {"'dep-i'", 0, 0, 0, 0, DEP_IDEM, NULL};
    lease_t l = lease_one(&e, &o);
    feed_heartbeat(&e, "disp-1", INC_A, T0 - 5000, &l, 1, T0 + 10);
    /* the lease runs for ten minutes; the restart is known at its first heartbeat */
    feed_heartbeat(&e, "disp-1", INC_B, T0 + 100, NULL, 0, T0 + 200);
    ck_assert_str_eq(peek_sql(&e, "SELECT state FROM reservations WHERE reservation_id = '%s'",
                              l.res),
                     "expired");
    batch_t b = step(&e, T0 + 210);
    json_t *d = find(&b, SL_MSG_DISPATCH, "job-1");
    ck_assert_msg(d != NULL, "job-1 was not dispatched again after its dispatcher died");
    lease_t again = lease_of(d, T0 + 210);
    ck_assert_int_eq(again.attempt, 2);
    ck_assert_str_ne(again.res, l.res);
    /* the same idempotency key goes out again: the provider runs the request once */
    ck_assert_str_eq(sget(d, "idempotency_key"), "idem-job-1");
    batch_free(&b);
    sl_sched_stats_t st;
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.dispatchers_lost, 1);
    ck_assert_int_eq(st.lost_redispatched, 1);
    ck_assert_int_eq(st.lost_failed, 0);
    ck_assert_int_eq(st.heartbeats, 2);
    ck_assert_int_eq(st.usage_invalid, 0);
    ck_assert_int_eq(st.lease_expired, 0);
    env_done(&e);
}
END_TEST

START_TEST(job_of_a_dead_dispatcher_on_a_deployment_that_is_not_idempotent_fails)
{
    env_t e;
    opts_t o = {"'dep-a'", 0, 0, 0, 0, NULL, NULL};
    lease_t l = lease_one(&e, &o);
    feed_heartbeat(&e, "disp-1", INC_A, T0 - 5000, &l, 1, T0 + 10);
    feed_heartbeat(&e, "disp-1", INC_B, T0 + 100, NULL, 0, T0 + 200);
    batch_t b = take(&e);
    json_t *r = find(&b, SL_MSG_RESULT, "job-1");
    ck_assert_msg(r != NULL, "no result for the lost call");
    ck_assert_str_eq(sget(r, "status"), "failed");
    ck_assert_str_eq(sget(json_object_get(r, "error"), "reason"), "dispatcher_lost");
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 0);
    batch_free(&b);
    /* charged in full: the call may have reached the provider */
    ck_assert_str_eq(peek_sql(&e, "SELECT state FROM reservations WHERE reservation_id = '%s'",
                              l.res),
                     "expired");
    b = step(&e, T0 + 5000);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 0);
    batch_free(&b);
    sl_sched_stats_t st;
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.lost_failed, 1);
    ck_assert_int_eq(st.lost_redispatched, 0);
    env_done(&e);
}
END_TEST

START_TEST(silent_dispatcher_is_dead_after_dispatcher_dead_ms)
{
    env_t e;
    opts_t o = {"'dep-i'", 0, 0, 0, 0, DEP_IDEM, NULL};
    lease_t l = lease_one(&e, &o);
    feed_heartbeat(&e, "disp-1", INC_A, T0 - 5000, &l, 1, T0 + 10);
    int64_t dead_ms = e.cfg->dispatcher_dead_ms;
    batch_t b = step(&e, T0 + 10 + dead_ms - 1);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 0);
    batch_free(&b);
    sl_sched_stats_t st;
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.dispatchers_lost, 0);
    /* found at the next scan of the leases (every 100 ms) */
    b = step(&e, T0 + 10 + dead_ms + 100);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 1);
    batch_free(&b);
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.dispatchers_lost, 1);
    ck_assert_int_eq(st.lost_redispatched, 1);
    ck_assert_int_eq(sl_holders_count(e.sched), 0);
    env_done(&e);
}
END_TEST

START_TEST(heartbeat_of_a_replaced_incarnation_changes_nothing)
{
    env_t e;
    opts_t o = {"'dep-i'", 0, 0, 0, 0, DEP_IDEM, NULL};
    env_init(&e, &o, T0);
    feed_heartbeat(&e, "disp-1", INC_A, T0 - 5000, NULL, 0, T0);
    feed_heartbeat(&e, "disp-1", INC_B, T0 - 100, NULL, 0, T0);
    feed_job(&e, "job-1", "acme", T0);
    batch_t b = step(&e, T0);
    lease_t l = lease_of(find(&b, SL_MSG_DISPATCH, "job-1"), T0);
    batch_free(&b);
    feed_heartbeat(&e, "disp-1", INC_B, T0 - 100, &l, 1, T0 + 10);
    /* a late (or replayed) heartbeat of the incarnation B replaced: refused, B keeps the job */
    feed_heartbeat(&e, "disp-1", INC_A, T0 - 5000, &l, 1, T0 + 20);
    b = step(&e, T0 + 30);
    ck_assert_int_eq(b.n, 0);
    batch_free(&b);
    sl_sched_stats_t st;
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.heartbeats_refused, 1);
    ck_assert_int_eq(st.dispatchers_lost, 1); /* A, when B spoke */
    ck_assert_str_eq(peek_sql(&e, "SELECT state FROM reservations WHERE reservation_id = '%s'",
                              l.res),
                     "open");
    /* the job is still B's: B's call reports as usual */
    feed_usage(&e, "job-1", 1, l.res, l.dep, &OK_USAGE, T0 + 40);
    b = take(&e);
    ck_assert_str_eq(sget(find(&b, SL_MSG_RESULT, "job-1"), "status"), "succeeded");
    batch_free(&b);
    env_done(&e);
}
END_TEST

START_TEST(lease_no_heartbeat_named_waits_for_its_expiry)
{
    env_t e;
    opts_t o = {"'dep-a'", 0, 0, 0, 0, NULL, NULL};
    lease_t l = lease_one(&e, &o);
    /* A never named the lease (it died before it took the dispatch): nothing is settled, and
     * a successor that reads the dispatch will run it */
    feed_heartbeat(&e, "disp-1", INC_A, T0 - 5000, NULL, 0, T0 + 10);
    feed_heartbeat(&e, "disp-1", INC_B, T0 + 100, NULL, 0, T0 + 200);
    /* an attempt id that is not the current lease's tags nothing */
    lease_t other = l;
    snprintf(other.res, sizeof other.res, "not-the-lease");
    feed_heartbeat(&e, "disp-2", INC_A, T0 + 100, &other, 1, T0 + 210);
    feed_heartbeat(&e, "disp-2", INC_B, T0 + 300, NULL, 0, T0 + 310);
    batch_t b = step(&e, T0 + 400);
    ck_assert_int_eq(b.n, 0);
    batch_free(&b);
    ck_assert_str_eq(peek_sql(&e, "SELECT state FROM reservations WHERE reservation_id = '%s'",
                              l.res),
                     "open");
    env_done(&e);
}
END_TEST

START_TEST(invalid_heartbeat_is_refused_and_counted)
{
    env_t e;
    opts_t o = {"'dep-a'", 0, 0, 0, 0, NULL, NULL};
    env_init(&e, &o, T0);
    static const char *const bad[] = {
        "{\"v\":1,\"kind\":\"heartbeat\"}",
        "{\"v\":1,\"kind\":\"heartbeat\",\"dispatcher\":\"d\",\"incarnation\":\"short\","
        "\"started_ms\":1,\"sent_ms\":1,\"full\":true,\"attempts\":[]}",
        "{\"v\":1,\"kind\":\"heartbeat\",\"dispatcher\":\"d\",\"incarnation\":"
        "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"started_ms\":1,\"sent_ms\":1,\"full\":true,"
        "\"attempts\":[[\"job\",\"res\"]]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        feed_usage_text(&e, bad[i], T0);
    }
    sl_sched_stats_t st;
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.heartbeats_refused, 3);
    ck_assert_int_eq(st.heartbeats, 0);
    ck_assert_int_eq(sl_holders_count(e.sched), 0);
    env_done(&e);
}
END_TEST

START_TEST(restart_sends_again_the_dispatch_of_a_restored_lease_on_an_idempotent_deployment)
{
    env_t e;
    opts_t o = {"'dep-i', 'dep-a'", 0, 0, 0, 0, DEP_IDEM, NULL};
    env_init(&e, &o, T0);
    feed_job(&e, "job-1", "acme", T0);
    feed_job(&e, "job-2", "acme", T0);
    batch_t b = step(&e, T0);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 2);
    lease_t l1 = lease_of(find(&b, SL_MSG_DISPATCH, "job-1"), T0);
    lease_t l2 = lease_of(find(&b, SL_MSG_DISPATCH, "job-2"), T0);
    json_t *first = json_deep_copy(find(&b, SL_MSG_DISPATCH,
                                        strcmp(l1.dep, "dep-i") == 0 ? "job-1" : "job-2"));
    ck_assert_msg(strcmp(l1.dep, l2.dep) != 0, "both jobs went to %s", l1.dep);
    batch_free(&b);
    /* the scheduler dies before the broker had the dispatches; it comes back */
    restart_with(&e, &o, T0 + 500);
    b = take(&e);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 1);
    json_t *again = find(&b, SL_MSG_DISPATCH, NULL);
    ck_assert_str_eq(sget(again, "deployment"), "dep-i");
    /* the same attempt, issued when it was: a dispatcher that has it drops it as a replay */
    ck_assert(json_equal(json_object_get(again, "reservation_id"),
                         json_object_get(first, "reservation_id")));
    ck_assert_int_eq(iget(again, "attempt"), iget(first, "attempt"));
    ck_assert_int_eq(iget(again, "issued_ms"), iget(first, "issued_ms"));
    ck_assert_int_eq(iget(again, "lease_expires_ms"), iget(first, "lease_expires_ms"));
    json_decref(first);
    batch_free(&b);
    env_done(&e);
}
END_TEST

START_TEST(restart_charges_token_buckets_with_what_was_admitted_after_their_last_save)
{
    env_t e;
    opts_t o = {"'dep-a'", 0, 0, 0, 0, NULL, NULL};
    env_init(&e, &o, T0);
    batch_t b = step(&e, T0 + 1000); /* the buckets are saved every second: here */
    batch_free(&b);
    feed_job(&e, "job-1", "acme", T0 + 1100);
    b = step(&e, T0 + 1100);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 1);
    batch_free(&b);
    /* the scheduler dies before the next save; the call may reach the provider after it is back */
    close_core(&e);
    open_core(&e, T0 + 1200);
    /* empty at the restart, less the 150 tokens admitted after the save */
    ck_assert_double_eq_tol(bucket_level(&e, "deployment:dep-a:tpm", T0 + 1200), -150, 1e-6);
    env_done(&e);
}
END_TEST

/* ---- backpressure: the scheduler leases no more than its dispatchers run at once ---- */

static const char *const INC_C = "cccccccccccccccccccccccccccccccc";
static const char *const SMALL_DISPATCHER = "'dispatcher': {'max_in_flight': 4},";

static void feed_jobs(env_t *e, const char *prefix, int n, int64_t now_ms)
{
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof id, "%s-%d", prefix, i);
        feed_job(e, id, "acme", now_ms);
    }
}

static int64_t window_now(env_t *e)
{
    sl_sched_stats_t st;
    sl_sched_stats(e->sched, &st);
    return st.dispatch_window;
}

START_TEST(scheduler_leases_no_more_than_the_live_dispatchers_run_at_once)
{
    env_t e;
    /* no limit anywhere: only the dispatchers' capacity can hold the backlog back */
    opts_t o = {"'dep-open'", 0, 0, 0, 0, NULL, SMALL_DISPATCHER};
    env_init(&e, &o, T0);
    job_class = "batch";
    feed_jobs(&e, "b", 30, T0);
    /* before any heartbeat: one dispatcher of this config's max_in_flight */
    batch_t b = step(&e, T0);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 4);
    lease_t first = lease_of(b.doc[0], T0);
    batch_free(&b);
    /* a dispatcher that runs 6 at once, then a second one */
    feed_beat(&e, "disp-1", INC_A, T0 - 1000, T0 + 1, 6, NULL, 0, T0 + 1);
    b = step(&e, T0 + 2);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 2);
    batch_free(&b);
    feed_beat(&e, "disp-2", INC_B, T0 - 1000, T0 + 3, 6, NULL, 0, T0 + 3);
    b = step(&e, T0 + 4);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 6);
    batch_free(&b);
    ck_assert_int_eq(window_now(&e), 12);
    b = step(&e, T0 + 5);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 0);
    batch_free(&b);
    /* a call ends: one more goes out */
    feed_usage(&e, first.job, first.attempt, first.res, first.dep, &OK_USAGE, T0 + 6);
    b = step(&e, T0 + 7);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 1);
    batch_free(&b);
    /* work someone waits for may go beyond the window, by a quarter of it and at least
     * SL_WINDOW_MIN (here 8 > 12 / 4); batch may not */
    job_class = "interactive";
    feed_jobs(&e, "i", 10, T0 + 8);
    b = step(&e, T0 + 9);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), SL_WINDOW_MIN);
    for (int i = 0; i < b.n; i++)
        ck_assert(strncmp(sget(b.doc[i], "job_id"), "i-", 2) == 0);
    batch_free(&b);
    sl_sched_stats_t st;
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.leased, 12 + SL_WINDOW_MIN);
    ck_assert_int_eq(st.dispatchers_live, 2);
    ck_assert_int_eq(st.queued, (30 - 13) + (10 - SL_WINDOW_MIN));
    job_class = "standard";
    env_done(&e);
}
END_TEST

START_TEST(dead_dispatchers_capacity_leaves_the_window_and_replays_do_not_bring_it_back)
{
    env_t e;
    opts_t o = {"'dep-open'", 0, 0, 0, 0, NULL, SMALL_DISPATCHER};
    env_init(&e, &o, T0);
    int64_t dead_ms = e.cfg->dispatcher_dead_ms;
    feed_beat(&e, "disp-1", INC_A, T0 - 1000, T0, 10, NULL, 0, T0);
    feed_beat(&e, "disp-2", INC_B, T0 - 1000, T0, 10, NULL, 0, T0);
    ck_assert_int_eq(window_now(&e), 20);
    /* disp-2 keeps talking, disp-1 falls silent */
    feed_beat(&e, "disp-2", INC_B, T0 - 1000, T0 + dead_ms - 10, 10, NULL, 0,
              T0 + dead_ms - 10);
    batch_t b = step(&e, T0 + dead_ms + 100);
    batch_free(&b);
    ck_assert_int_eq(sl_holders_count(e.sched), 1);
    ck_assert_int_eq(window_now(&e), 10);
    sl_sched_stats_t st;
    sl_sched_stats(e.sched, &st);
    int64_t refused = st.heartbeats_refused;
    /* disp-1's own last heartbeat, replayed: it stays dead */
    feed_beat(&e, "disp-1", INC_A, T0 - 1000, T0, 10, NULL, 0, T0 + dead_ms + 200);
    ck_assert_int_eq(sl_holders_count(e.sched), 1);
    ck_assert_int_eq(window_now(&e), 10);
    /* an older heartbeat of disp-2 than one taken (a copy read late from another partition,
     * or a replay): its attempts may be tagged, but it does not count as hearing disp-2 */
    feed_beat(&e, "disp-2", INC_B, T0 - 1000, T0, 10, NULL, 0, T0 + dead_ms + 210);
    /* a dispatcher never heard from, in a heartbeat older than dispatcher_dead_ms: refused */
    feed_beat(&e, "disp-3", INC_C, T0 - 1000, T0 + 150, 10, NULL, 0, T0 + dead_ms + 220);
    ck_assert_int_eq(sl_holders_count(e.sched), 1);
    ck_assert_int_eq(window_now(&e), 10);
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.heartbeats_refused, refused + 2);
    /* disp-1 restarted: a new incarnation counts again */
    feed_beat(&e, "disp-1", INC_C, T0 + dead_ms + 250, T0 + dead_ms + 260, 7, NULL, 0,
              T0 + dead_ms + 260);
    ck_assert_int_eq(sl_holders_count(e.sched), 2);
    ck_assert_int_eq(window_now(&e), 17);
    /* all dead: back to one dispatcher of this config */
    b = step(&e, T0 + 3 * dead_ms);
    batch_free(&b);
    ck_assert_int_eq(sl_holders_count(e.sched), 0);
    ck_assert_int_eq(window_now(&e), 4);
    env_done(&e);
}
END_TEST

/* A dispatch not sent cuts the window to half the leases out, once per cut interval; then it
 * grows by one for every window's worth of answered calls (additive increase), until whole. */
START_TEST(not_sent_dispatches_cut_the_window_and_answers_restore_it)
{
    env_t e;
    opts_t o = {"'dep-open'", 0, 0, 0, 0, NULL, "'dispatcher': {'max_in_flight': 32},"};
    env_init(&e, &o, T0);
    job_class = "batch";
    feed_jobs(&e, "b", 80, T0);
    batch_t b = step(&e, T0);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 32);
    lease_t l[32];
    for (int i = 0; i < 32; i++)
        l[i] = lease_of(b.doc[i], T0);
    batch_free(&b);
    static const usagespec_t NOT_SENT = {"not_sent", 0, -1, -1, -1, 0, NULL};
    feed_usage(&e, l[0].job, l[0].attempt, l[0].res, l[0].dep, &NOT_SENT, T0 + 10);
    ck_assert_int_eq(window_now(&e), 16);
    /* a second refusal of the same burst: no second cut */
    feed_usage(&e, l[1].job, l[1].attempt, l[1].res, l[1].dep, &NOT_SENT, T0 + 15);
    ck_assert_int_eq(window_now(&e), 16);
    b = step(&e, T0 + 20);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 0); /* 30 out, 16 allowed */
    batch_free(&b);
    /* 14 answers: fewer than a window's worth, so it stays at 16, and 16 are out */
    for (int i = 2; i < 16; i++)
        feed_usage(&e, l[i].job, l[i].attempt, l[i].res, l[i].dep, &OK_USAGE, T0 + 30);
    ck_assert_int_eq(window_now(&e), 16);
    b = step(&e, T0 + 31);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 0);
    batch_free(&b);
    /* two more make 16: the window grows to 17, 14 are out, so 3 go */
    for (int i = 16; i < 18; i++)
        feed_usage(&e, l[i].job, l[i].attempt, l[i].res, l[i].dep, &OK_USAGE, T0 + 40);
    ck_assert_int_eq(window_now(&e), 17);
    b = step(&e, T0 + 41);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 3);
    batch_free(&b);
    /* 14 more answers (fewer than 17): still 17, 3 out, so 14 go */
    for (int i = 18; i < 32; i++)
        feed_usage(&e, l[i].job, l[i].attempt, l[i].res, l[i].dep, &OK_USAGE, T0 + 50);
    ck_assert_int_eq(window_now(&e), 17);
    b = step(&e, T0 + 51);
    ck_assert_int_eq(count_kind(&b, SL_MSG_DISPATCH), 14);
    int first = 0;
    while (b.m[first].kind != SL_MSG_DISPATCH)
        first++;
    lease_t late = lease_of(b.doc[first], T0 + 51);
    batch_free(&b);
    /* a refusal after the cut interval cuts again, from the leases out then (17) */
    feed_usage(&e, late.job, late.attempt, late.res, late.dep, &NOT_SENT,
               T0 + 10 + SL_WINDOW_CUT_EVERY_MS);
    ck_assert_int_eq(window_now(&e), SL_WINDOW_MIN);
    sl_sched_stats_t st;
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.window_cuts, 2);
    job_class = "standard";
    env_done(&e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("holders");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, restarted_dispatcher_settles_its_predecessors_calls_and_idempotent_jobs_go_again);
    tcase_add_test(tc, job_of_a_dead_dispatcher_on_a_deployment_that_is_not_idempotent_fails);
    tcase_add_test(tc, silent_dispatcher_is_dead_after_dispatcher_dead_ms);
    tcase_add_test(tc, heartbeat_of_a_replaced_incarnation_changes_nothing);
    tcase_add_test(tc, lease_no_heartbeat_named_waits_for_its_expiry);
    tcase_add_test(tc, invalid_heartbeat_is_refused_and_counted);
    tcase_add_test(tc, restart_charges_token_buckets_with_what_was_admitted_after_their_last_save);
    tcase_add_test(tc,
                   restart_sends_again_the_dispatch_of_a_restored_lease_on_an_idempotent_deployment);
    tcase_add_test(tc, scheduler_leases_no_more_than_the_live_dispatchers_run_at_once);
    tcase_add_test(tc,
                   dead_dispatchers_capacity_leaves_the_window_and_replays_do_not_bring_it_back);
    tcase_add_test(tc, not_sent_dispatches_cut_the_window_and_answers_restore_it);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return 1;
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
