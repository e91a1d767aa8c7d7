/* test_pbatch.c - provider batches in the scheduler core (scheduler/pbatch.h): which jobs go to a
 * provider's batch API, how batches are cut, sent, polled and collected, what a restart, a
 * failed batch, a cancel and an out-of-place event do. Driven with the real store, ledger and
 * DRR and an explicit clock (tests/lib/sched_env.h). */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "lib/sched_env.h"
#include "sign.h"

/* dep-x has a batch API: its twin "dep-x/batch" takes at most 1,000 enqueued tokens (six jobs
 * of 150), three jobs a batch, and a window of ten minutes. */
static const char *const DEP_X =
    "{'name': 'dep-x', 'base_url': 'http://127.0.0.1:9/x/v1', 'model': 'model-x',"
    " 'limits': {'rpm': 120, 'tpm': 12000}, 'slices_per_minute': 20, 'headroom': 0.9,"
    " 'price': {'input_per_mtok': 2, 'output_per_mtok': 8},"
    " 'batch': {'enqueued_tokens': 1000, 'max_requests': 3, 'linger_ms': 500, 'poll_ms': 1000,"
    "           'answer_ms': 2000, 'window_ms': 720000, 'auto_min_left_ms': 600000}}";

static const opts_t OPTS = {"'dep-x'", 0, 0, 0, 0, NULL, NULL};

static void env_batch(env_t *e, const char *policy)
{
    static char extra[64];
    snprintf(extra, sizeof extra, "'batch': '%s',", policy);
    route_extra = extra;
    job_class = "batch";
    opts_t o = OPTS;
    o.extra_defs = DEP_X;
    o.deployments = "'dep-x'";
    env_init(e, &o, T0);
}

static void env_batch_done(env_t *e)
{
    env_done(e);
    route_extra = "";
    job_class = "standard";
}

static void feed_batch_job(env_t *e, const char *id, int64_t now_ms, int64_t deadline_ms)
{
    jobspec_t j = {id, "acme", NULL, now_ms, deadline_ms, 150, 100};
    feed_spec(e, &j, now_ms);
}

/* The ops (batch ops on the dispatch topic) of b named op, in order; returns how many. */
static int ops_of(const batch_t *b, const char *op, json_t **out, int max)
{
    int n = 0;
    for (int i = 0; i < b->n; i++) {
        const char *o = json_string_value(json_object_get(b->doc[i], "op"));
        if (b->m[i].kind == SL_MSG_DISPATCH && o != NULL && strcmp(o, op) == 0 && n < max)
            out[n++] = b->doc[i];
    }
    return n;
}

static void feed_event(env_t *e, const char *batch_id, const char *op, const char *state,
                       const char *pid, const char *missing_json, int64_t now_ms)
{
    json_t *ev = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:I}", "v", 1, "kind", "batch",
                           "batch_id", batch_id, "deployment", "dep-x/batch", "op", op, "state",
                           state, "sent_ms", (json_int_t)now_ms);
    if (pid != NULL)
        json_object_set_new(ev, "provider_batch_id", json_string(pid));
    if (missing_json != NULL)
        json_object_set_new(ev, "missing", json_loads(missing_json, 0, NULL));
    char *text = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    feed_usage_text(e, text, now_ms);
    free(text);
}

/* A job's entry in an op: its attempt and reservation. */
static json_t *op_job(json_t *op, const char *job_id)
{
    size_t k;
    json_t *v;
    json_array_foreach(json_object_get(op, "jobs"), k, v)
    {
        if (strcmp(sget(v, "job_id"), job_id) == 0)
            return v;
    }
    return NULL;
}

static void feed_line(env_t *e, json_t *op, const char *job_id, const usagespec_t *u,
                      int64_t now_ms)
{
    json_t *j = op_job(op, job_id);
    ck_assert_ptr_nonnull(j);
    feed_usage(e, job_id, (int)iget(j, "attempt"), sget(j, "reservation_id"), "dep-x/batch", u,
               now_ms);
}

static const usagespec_t NOT_SENT = {"not_sent", 0, -1, -1, -1, 0, NULL};

START_TEST(config_adds_a_batch_twin_with_the_discount_and_the_enqueued_token_limit)
{
    env_t e;
    env_batch(&e, "auto");
    int x = sl_config_deployment(e.cfg, "dep-x");
    int t = sl_config_deployment(e.cfg, "dep-x/batch");
    ck_assert_int_ge(t, 0);
    ck_assert_int_eq(e.cfg->deployments[x].batch_twin, t);
    ck_assert_int_eq(e.cfg->deployments[t].batch_of, x);
    ck_assert_int_eq(e.cfg->deployments[x].batch_of, -1);
    ck_assert(e.cfg->deployments[t].price.input_per_mtok == 1.0);
    ck_assert(e.cfg->deployments[t].price.output_per_mtok == 4.0);
    ck_assert_int_eq(e.cfg->deployments[t].nlimits, 1);
    ck_assert_int_eq(e.cfg->deployments[t].limits[0].dimension, SL_DIM_ENQUEUED_TOKENS);
    ck_assert_str_eq(e.cfg->deployments[t].batch.base_url, "http://127.0.0.1:9/x/v1");
    ck_assert_int_eq(e.cfg->routes[0].batch_policy, SL_BATCH_AUTO);
    env_batch_done(&e);
}
END_TEST

/* auto: a batch job whose deadline leaves the window goes to the batch API; one whose deadline
 * is nearer, and a job of another class, go online. */
START_TEST(auto_sends_only_batch_jobs_with_time_for_the_window_to_the_batch_api)
{
    env_t e;
    env_batch(&e, "auto");
    feed_batch_job(&e, "far", T0, T0 + HOUR);
    feed_batch_job(&e, "near", T0, T0 + 60000);
    job_class = "standard";
    feed_job(&e, "std", "acme", T0);
    job_class = "batch";
    batch_t b = step(&e, T0);
    ck_assert_ptr_nonnull(find(&b, SL_MSG_DISPATCH, "near"));
    ck_assert_ptr_nonnull(find(&b, SL_MSG_DISPATCH, "std"));
    ck_assert_str_eq(sget(find(&b, SL_MSG_DISPATCH, "near"), "deployment"), "dep-x");
    ck_assert_ptr_null(find(&b, SL_MSG_DISPATCH, "far")); /* in an open batch */
    json_t *ops[4];
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 0);
    batch_free(&b);
    b = step(&e, T0 + 500); /* the linger is over */
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 1);
    ck_assert_str_eq(sget(ops[0], "deployment"), "dep-x/batch");
    ck_assert_str_eq(sget(ops[0], "tenant"), "acme");
    ck_assert_int_eq(json_array_size(json_object_get(ops[0], "jobs")), 1);
    json_t *far = op_job(ops[0], "far");
    ck_assert_ptr_nonnull(far);
    /* the request goes as it was submitted */
    ck_assert_str_eq(sget(json_object_get(far, "request"), "model"), "chat");
    batch_free(&b);
    env_batch_done(&e);
}
END_TEST

/* A batch's whole life: cut at max_requests, sent, running, polled, ended, collected; each line
 * settles its job like an online answer, at the batch price; a job without a line runs again. */
START_TEST(a_batch_is_cut_sent_polled_collected_and_each_line_settles_its_job)
{
    env_t e;
    env_batch(&e, "provider");
    for (int i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof id, "j%d", i);
        feed_batch_job(&e, id, T0, T0 + HOUR);
    }
    batch_t b = step(&e, T0);
    json_t *ops[4];
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 1); /* full at three */
    ck_assert_int_eq(json_array_size(json_object_get(ops[0], "jobs")), 3);
    char id1[64];
    snprintf(id1, sizeof id1, "%s", sget(ops[0], "batch_id"));
    batch_free(&b);
    ck_assert_str_eq(peek_sql(&e, "SELECT state FROM pbatches WHERE batch_id = '%s'", id1),
                     "creating");
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM jobs WHERE state = '%s'", "leased"), "4");
    /* the enqueued tokens are held: four jobs of 150 */
    ck_assert(bucket_level(&e, "deployment:dep-x/batch:enqueued_tokens", T0) == 1000 - 600);
    feed_event(&e, id1, "create", "running", "batch_1", NULL, T0 + 100);
    ck_assert_str_eq(peek_sql(&e, "SELECT provider_id FROM pbatches WHERE batch_id = '%s'", id1),
                     "batch_1");
    b = step(&e, T0 + 600);
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 1); /* the second, with j3 */
    ck_assert_int_eq(json_array_size(json_object_get(ops[0], "jobs")), 1);
    batch_free(&b);
    b = step(&e, T0 + 1100); /* poll_ms after the running event */
    ck_assert_int_eq(ops_of(&b, "poll", ops, 4), 1);
    ck_assert_str_eq(sget(ops[0], "provider_batch_id"), "batch_1");
    batch_free(&b);
    feed_event(&e, id1, "poll", "ended", "batch_1", NULL, T0 + 1200);
    b = take(&e);
    ck_assert_int_eq(ops_of(&b, "collect", ops, 4), 1);
    json_t *collect = json_deep_copy(ops[0]);
    ck_assert_int_eq(json_array_size(json_object_get(collect, "jobs")), 3);
    ck_assert_ptr_null(json_object_get(op_job(collect, "j0"), "request"));
    batch_free(&b);
    ck_assert_str_eq(peek_sql(&e, "SELECT state FROM pbatches WHERE batch_id = '%s'", id1),
                     "collecting");
    feed_line(&e, collect, "j0", &OK_USAGE, T0 + 1300);
    feed_line(&e, collect, "j1", &OK_USAGE, T0 + 1300);
    b = take(&e);
    json_t *r0 = find(&b, SL_MSG_RESULT, "j0");
    ck_assert_ptr_nonnull(r0);
    ck_assert_str_eq(sget(r0, "status"), "succeeded");
    ck_assert_str_eq(sget(r0, "deployment"), "dep-x/batch");
    /* at the batch price (half), beside what it would have cost online */
    ck_assert_str_eq(sget(r0, "path"), "batch");
    double cost = json_real_value(json_object_get(r0, "cost_usd"));
    double online = json_real_value(json_object_get(r0, "online_cost_usd"));
    ck_assert_msg(cost > 0 && fabs(online - 2 * cost) < 1e-12, "cost %g online %g", cost, online);
    batch_free(&b);
    /* j2 had no line: it runs again, in a new batch */
    feed_event(&e, id1, "collect", "collected", "batch_1", "[\"j2\"]", T0 + 1400);
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM pbatches WHERE batch_id = '%s'", id1), "0");
    b = step(&e, T0 + 1400);
    batch_free(&b);
    b = step(&e, T0 + 2000);
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 1);
    ck_assert_ptr_nonnull(op_job(ops[0], "j2"));
    ck_assert_int_eq(iget(op_job(ops[0], "j2"), "attempt"), 2);
    batch_free(&b);
    /* a replayed collected event for the gone batch changes nothing */
    feed_event(&e, id1, "collect", "collected", "batch_1", "[\"j0\"]", T0 + 2100);
    sl_sched_stats_t st;
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.succeeded, 2);
    ck_assert_int_eq(st.pbatches_done, 1);
    ck_assert_int_ge(st.usage_stale, 1);
    json_decref(collect);
    env_batch_done(&e);
}
END_TEST

/* A provider that fails the batch (its input refused): every job goes back in line, after
 * answer_ms, and the enqueued tokens come back. */
START_TEST(a_failed_batch_puts_its_jobs_back_in_line)
{
    env_t e;
    env_batch(&e, "provider");
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "j%d", i);
        feed_batch_job(&e, id, T0, T0 + HOUR);
    }
    batch_t b = step(&e, T0);
    json_t *ops[4];
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 1);
    char id1[64];
    snprintf(id1, sizeof id1, "%s", sget(ops[0], "batch_id"));
    batch_free(&b);
    feed_event(&e, id1, "create", "failed", NULL, NULL, T0 + 100);
    ck_assert(bucket_level(&e, "deployment:dep-x/batch:enqueued_tokens", T0 + 100) == 1000);
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM jobs WHERE state = '%s'", "queued"), "3");
    b = step(&e, T0 + 1000); /* still waiting out answer_ms */
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 0);
    batch_free(&b);
    b = step(&e, T0 + 2200); /* back in line, and a full batch again at once */
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 1);
    ck_assert_str_ne(sget(ops[0], "batch_id"), id1);
    batch_free(&b);
    env_batch_done(&e);
}
END_TEST

/* The enqueued-token limit holds: a seventh job of 150 waits until lines settle. */
START_TEST(the_enqueued_token_limit_keeps_jobs_waiting)
{
    env_t e;
    env_batch(&e, "provider");
    for (int i = 0; i < 7; i++) {
        char id[16];
        snprintf(id, sizeof id, "j%d", i);
        feed_batch_job(&e, id, T0, T0 + HOUR);
    }
    batch_t b = step(&e, T0);
    json_t *ops[4];
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 2);
    json_t *first = json_deep_copy(ops[0]);
    batch_free(&b);
    b = step(&e, T0 + 600);
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 0);
    batch_free(&b);
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM jobs WHERE state = '%s'", "queued"), "1");
    const char *bid = sget(first, "batch_id");
    feed_event(&e, bid, "create", "ended", "batch_1", NULL, T0 + 700);
    b = take(&e);
    batch_free(&b);
    json_t *j = json_array_get(json_object_get(first, "jobs"), 0);
    feed_line(&e, first, sget(j, "job_id"), &OK_USAGE, T0 + 800);
    b = step(&e, T0 + 1800); /* j6 has room now: into a new open batch */
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 0);
    batch_free(&b);
    /* its create, and the second batch's create again (no dispatcher answered it) */
    b = step(&e, T0 + 2400);
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 2);
    int with_j6 = op_job(ops[0], "j6") != NULL ? 0 : op_job(ops[1], "j6") != NULL ? 1 : -1;
    ck_assert_int_ge(with_j6, 0);
    ck_assert_int_eq(json_array_size(json_object_get(ops[with_j6], "jobs")), 1);
    ck_assert_int_eq(json_array_size(json_object_get(ops[1 - with_j6], "jobs")), 3);
    batch_free(&b);
    json_decref(first);
    env_batch_done(&e);
}
END_TEST

/* A restart: a sent batch takes its step again under the same id (its create repeated: the
 * dispatcher finds the provider's batch by it); a job of a batch never sent runs again. */
START_TEST(after_a_restart_each_batch_takes_its_step_again_and_unsent_jobs_rerun)
{
    env_t e;
    env_batch(&e, "provider");
    for (int i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof id, "j%d", i);
        feed_batch_job(&e, id, T0, T0 + HOUR);
    }
    batch_t b = step(&e, T0);
    json_t *ops[4];
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 1);
    char id1[64];
    snprintf(id1, sizeof id1, "%s", sget(ops[0], "batch_id"));
    int has_j3 = op_job(ops[0], "j3") != NULL;
    batch_free(&b);
    ck_assert(!has_j3); /* j3 is in the open batch, lost with the process */
    opts_t o = OPTS;
    o.extra_defs = DEP_X;
    restart_with(&e, &o, T0 + 100);
    b = step(&e, T0 + 100);
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 0);
    batch_free(&b);
    /* j3 was put back in line and into a new open batch, as its second attempt */
    ck_assert_str_eq(peek_sql(&e, "SELECT attempts FROM jobs WHERE job_id = '%s'", "j3"), "2");
    /* the gauge holds the four leases again, no more */
    ck_assert(bucket_level(&e, "deployment:dep-x/batch:enqueued_tokens", T0 + 100) == 1000 - 600);
    b = step(&e, T0 + 700);
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 1);
    ck_assert_ptr_nonnull(op_job(ops[0], "j3"));
    ck_assert_int_eq(iget(op_job(ops[0], "j3"), "attempt"), 2);
    batch_free(&b);
    /* the sent batch's create again, answer_ms after it was sent: no answer was read */
    b = step(&e, T0 + 2000);
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 1);
    ck_assert_str_eq(sget(ops[0], "batch_id"), id1);
    ck_assert_int_eq(json_array_size(json_object_get(ops[0], "jobs")), 3);
    batch_free(&b);
    env_batch_done(&e);
}
END_TEST

/* A cancel: a job of a batch not sent yet leaves it cancelled; in a sent batch it runs on
 * until every job of the batch asked, and then the batch is cancelled at the provider and its
 * not_sent lines end the jobs as cancelled. */
START_TEST(cancels_take_a_job_out_of_an_open_batch_and_a_whole_sent_batch_when_all_ask)
{
    env_t e;
    env_batch(&e, "provider");
    for (int i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof id, "j%d", i);
        feed_batch_job(&e, id, T0, T0 + HOUR);
    }
    batch_t b = step(&e, T0);
    json_t *ops[4];
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 1);
    json_t *sent = json_deep_copy(ops[0]);
    batch_free(&b);
    char cancel[256];
    snprintf(cancel, sizeof cancel,
             "{\"v\":1,\"type\":\"cancel\",\"job_id\":\"j3\",\"idempotency_key\":\"idem-j3\","
             "\"tenant\":\"acme\",\"requested_ms\":%lld}",
             (long long)T0 + 10);
    feed_text(&e, cancel, T0 + 10);
    b = take(&e);
    ck_assert_str_eq(sget(find(&b, SL_MSG_RESULT, "j3"), "status"), "cancelled");
    batch_free(&b);
    const char *bid = sget(sent, "batch_id");
    feed_event(&e, bid, "create", "running", "batch_1", NULL, T0 + 20);
    for (int i = 0; i < 3; i++) {
        snprintf(cancel, sizeof cancel,
                 "{\"v\":1,\"type\":\"cancel\",\"job_id\":\"j%d\",\"idempotency_key\":\"idem-j%d\","
                 "\"tenant\":\"acme\",\"requested_ms\":%lld}",
                 i, i, (long long)T0 + 30);
        feed_text(&e, cancel, T0 + 30);
    }
    b = step(&e, T0 + 40);
    ck_assert_int_eq(ops_of(&b, "cancel", ops, 4), 1);
    ck_assert_str_eq(sget(ops[0], "provider_batch_id"), "batch_1");
    batch_free(&b);
    feed_line(&e, sent, "j0", &NOT_SENT, T0 + 50);
    b = take(&e);
    ck_assert_str_eq(sget(find(&b, SL_MSG_RESULT, "j0"), "status"), "cancelled");
    batch_free(&b);
    /* j3 and j0: each counted once */
    sl_sched_stats_t st;
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.cancelled, 2);
    json_decref(sent);
    env_batch_done(&e);
}
END_TEST

/* Events that do not fit: unknown batch, another deployment, a provider id other than the one
 * known, ended before running with no id: none changes anything. */
START_TEST(events_that_do_not_fit_the_batch_change_nothing)
{
    env_t e;
    env_batch(&e, "provider");
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "j%d", i);
        feed_batch_job(&e, id, T0, T0 + HOUR);
    }
    batch_t b = step(&e, T0);
    json_t *ops[4];
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 1);
    char id1[64];
    snprintf(id1, sizeof id1, "%s", sget(ops[0], "batch_id"));
    batch_free(&b);
    feed_event(&e, "pb-unknown", "create", "failed", NULL, NULL, T0 + 10);
    feed_event(&e, id1, "create", "collected", "batch_1", "[\"j0\"]", T0 + 10);
    feed_event(&e, id1, "create", "ended", NULL, NULL, T0 + 10);
    feed_usage_text(&e, "{\"v\":1,\"kind\":\"batch\",\"batch_id\":\"BAD ID\"}", T0 + 10);
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM jobs WHERE state = '%s'", "leased"), "3");
    ck_assert_str_eq(peek_sql(&e, "SELECT state FROM pbatches WHERE batch_id = '%s'", id1),
                     "creating");
    feed_event(&e, id1, "create", "running", "batch_1", NULL, T0 + 20);
    feed_event(&e, id1, "poll", "ended", "batch_other", NULL, T0 + 30);
    ck_assert_str_eq(peek_sql(&e, "SELECT state FROM pbatches WHERE batch_id = '%s'", id1),
                     "running");
    sl_sched_stats_t st;
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.usage_invalid, 1);
    ck_assert_int_ge(st.usage_stale, 4);
    env_batch_done(&e);
}
END_TEST

/* Lines that failed (server errors, a 429) put their jobs back in line but neither pause the
 * batch twin nor open a probe: the batch ran long ago, in its own quota, and a probe would let
 * one job at a time into a batch (seen in e2e_batch: 53 batches of one job, one every 2 s). */
START_TEST(failed_lines_do_not_pause_the_batch_twin)
{
    env_t e;
    env_batch(&e, "provider");
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "j%d", i);
        feed_batch_job(&e, id, T0, T0 + HOUR);
    }
    batch_t b = step(&e, T0);
    json_t *ops[4];
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 1);
    char id1[64];
    snprintf(id1, sizeof id1, "%s", sget(ops[0], "batch_id"));
    batch_free(&b);
    feed_event(&e, id1, "create", "ended", "batch_1", NULL, T0 + 100);
    b = take(&e);
    ck_assert_int_eq(ops_of(&b, "collect", ops, 4), 1);
    json_t *collect = json_deep_copy(ops[0]);
    batch_free(&b);
    const usagespec_t err5xx = {"server_error", 500, -1, -1, -1, 0, NULL};
    const usagespec_t err429 = {"rate_limited", 429, -1, -1, 30000, 0, NULL};
    feed_line(&e, collect, "j0", &err5xx, T0 + 200);
    feed_line(&e, collect, "j1", &err5xx, T0 + 200);
    feed_line(&e, collect, "j2", &err429, T0 + 200);
    int in_flight[4] = {0};
    int64_t paused[4] = {0};
    sl_sched_deployments_info(e.sched, T0 + 300, in_flight, paused);
    int t = sl_config_deployment(e.cfg, "dep-x/batch");
    ck_assert_int_eq(paused[t], 0);
    /* j2, back in line at once (a 429 is retried at once, elsewhere or after the pause), is
     * in a new batch after the linger, not after the provider's 30 s */
    int64_t first = 0;
    for (int64_t now = T0 + 300; now < T0 + 40000 && first == 0; now += 100) {
        b = step(&e, now);
        if (ops_of(&b, "create", ops, 4) > 0)
            first = now;
        batch_free(&b);
    }
    ck_assert_msg(first > 0 && first <= T0 + 1500, "first create at +%lld ms",
                  (long long)(first - T0));
    json_decref(collect);
    env_batch_done(&e);
}
END_TEST

/* A create the provider keeps refusing (a create storm's 429 with a long retry-after) keeps its
 * jobs' leases: they must not expire and be leased again into another batch, which would run
 * them twice once both batches are created (seen in e2e_batch at 20,000 jobs: 11 lines twice). */
static void feed_refused(env_t *e, const char *batch_id, int64_t retry_after_ms, int64_t now_ms)
{
    char text[512];
    snprintf(text, sizeof text,
             "{\"v\":1,\"kind\":\"batch\",\"batch_id\":\"%s\",\"deployment\":\"dep-x/batch\","
             "\"op\":\"create\",\"state\":\"refused\",\"sent_ms\":%lld,"
             "\"retry_after_ms\":%lld,\"error\":\"429\"}",
             batch_id, (long long)now_ms, (long long)retry_after_ms);
    feed_usage_text(e, text, now_ms);
}

START_TEST(a_refused_create_keeps_its_jobs_leases_until_it_is_tried_again)
{
    env_t e;
    env_batch(&e, "provider");
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "j%d", i);
        feed_batch_job(&e, id, T0, T0 + 10 * HOUR);
    }
    batch_t b = step(&e, T0);
    json_t *ops[4];
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 1);
    char id1[64];
    snprintf(id1, sizeof id1, "%s", sget(ops[0], "batch_id"));
    batch_free(&b);
    /* the leases would end at T0 + 500 + 720000 + 8000; the retry is later than that */
    feed_refused(&e, id1, 900000, T0 + 100);
    for (int64_t now = T0 + 1000; now < T0 + 900000; now += 50000) {
        b = step(&e, now);
        ck_assert_int_eq(ops_of(&b, "create", ops, 4), 0);
        batch_free(&b);
    }
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM jobs WHERE state = '%s'", "leased"), "3");
    b = step(&e, T0 + 900200);
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 1);
    ck_assert_str_eq(sget(ops[0], "batch_id"), id1);
    ck_assert_int_eq(json_array_size(json_object_get(ops[0], "jobs")), 3);
    batch_free(&b);
    sl_sched_stats_t st;
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.lease_expired, 0);
    env_batch_done(&e);
}
END_TEST

/* A job whose lease ended anyway (a batch that never answers) and that was leased again into
 * another batch is no longer the first batch's: its collect leaves the job out, and with no job
 * left the batch is dropped. */
START_TEST(a_job_leased_again_elsewhere_is_not_in_its_old_batch)
{
    env_t e;
    env_batch(&e, "provider");
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "j%d", i);
        feed_batch_job(&e, id, T0, T0 + 10 * HOUR);
    }
    batch_t b = step(&e, T0);
    json_t *ops[4];
    ck_assert_int_eq(ops_of(&b, "create", ops, 4), 1);
    char id1[64];
    snprintf(id1, sizeof id1, "%s", sget(ops[0], "batch_id"));
    batch_free(&b);
    feed_event(&e, id1, "create", "running", "batch_1", NULL, T0 + 100);
    /* no poll is ever answered: the leases end after the window, the jobs go into a new batch */
    int64_t now = T0 + 200;
    int second = 0;
    for (; now < T0 + 800000 && !second; now += 1000) {
        b = step(&e, now);
        for (int k = 0, n = ops_of(&b, "create", ops, 4); k < n; k++)
            second |= strcmp(sget(ops[k], "batch_id"), id1) != 0;
        batch_free(&b);
    }
    ck_assert(second);
    /* a restart now finds j0 in both stored batches: the second one's lease is its own, and
     * it keeps it (it is not run again as a job of a batch never sent) */
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM pbatches WHERE jobs LIKE '%%%s%%'", "j0"),
                     "2");
    opts_t o = OPTS;
    o.extra_defs = DEP_X;
    restart_with(&e, &o, now);
    b = step(&e, now);
    batch_free(&b);
    ck_assert_str_eq(
        peek_sql(&e, "SELECT state || ' ' || attempts FROM jobs WHERE job_id = '%s'", "j0"),
        "leased 2");
    /* the first batch ends now: nothing of it is left to collect */
    feed_event(&e, id1, "poll", "ended", "batch_1", NULL, now);
    b = take(&e);
    ck_assert_int_eq(ops_of(&b, "collect", ops, 4), 0);
    batch_free(&b);
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM pbatches WHERE batch_id = '%s'", id1), "0");
    env_batch_done(&e);
}
END_TEST

/* A batch's failed lines come all at once, long after its first attempts: they are retried
 * (into a later batch) whatever the route's retry budget says, which is for live storms. Six
 * server errors of two batches of three, with max_retry_ratio 0.5 over a floor of 10, would
 * otherwise fail the sixth. */
START_TEST(failed_lines_are_retried_outside_the_route_retry_budget)
{
    env_t e;
    env_batch(&e, "provider");
    for (int i = 0; i < 6; i++) {
        char id[16];
        snprintf(id, sizeof id, "j%02d", i);
        feed_batch_job(&e, id, T0, T0 + 10 * HOUR);
    }
    batch_t b = step(&e, T0);
    batch_free(&b);
    b = step(&e, T0 + 600);
    batch_free(&b);
    /* two batches of three (the enqueued-token limit holds six); every line a server error */
    const usagespec_t err5xx = {"server_error", 500, -1, -1, -1, 0, NULL};
    json_t *ops[8];
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM pbatches WHERE state = '%s'", "creating"),
                     "2");
    for (int round = 0; round < 2; round++) {
        char bid[64];
        snprintf(bid, sizeof bid, "%s",
                 peek_sql(&e, "SELECT batch_id FROM pbatches WHERE state = '%s' ORDER BY batch_id",
                          "creating"));
        feed_event(&e, bid, "create", "ended", "batch_x", NULL, T0 + 1000);
        b = take(&e);
        ck_assert_int_eq(ops_of(&b, "collect", ops, 8), 1);
        json_t *collect = json_deep_copy(ops[0]);
        batch_free(&b);
        size_t k;
        json_t *v;
        json_array_foreach(json_object_get(collect, "jobs"), k, v)
            feed_line(&e, collect, sget(v, "job_id"), &err5xx, T0 + 1100);
        json_decref(collect);
    }
    sl_sched_stats_t st;
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.failed, 0);
    ck_assert_int_eq(st.retried, 6);
    env_batch_done(&e);
}
END_TEST

Suite *pbatch_suite(void)
{
    Suite *s = suite_create("pbatch");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, config_adds_a_batch_twin_with_the_discount_and_the_enqueued_token_limit);
    tcase_add_test(tc, auto_sends_only_batch_jobs_with_time_for_the_window_to_the_batch_api);
    tcase_add_test(tc, a_batch_is_cut_sent_polled_collected_and_each_line_settles_its_job);
    tcase_add_test(tc, a_failed_batch_puts_its_jobs_back_in_line);
    tcase_add_test(tc, the_enqueued_token_limit_keeps_jobs_waiting);
    tcase_add_test(tc, after_a_restart_each_batch_takes_its_step_again_and_unsent_jobs_rerun);
    tcase_add_test(tc, cancels_take_a_job_out_of_an_open_batch_and_a_whole_sent_batch_when_all_ask);
    tcase_add_test(tc, events_that_do_not_fit_the_batch_change_nothing);
    tcase_add_test(tc, failed_lines_do_not_pause_the_batch_twin);
    tcase_add_test(tc, a_refused_create_keeps_its_jobs_leases_until_it_is_tried_again);
    tcase_add_test(tc, a_job_leased_again_elsewhere_is_not_in_its_old_batch);
    tcase_add_test(tc, failed_lines_are_retried_outside_the_route_retry_budget);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return 1;
    SRunner *sr = srunner_create(pbatch_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
