/* e2e_admin - the scheduler's admin API over real processes (ADMIN-API.md), against a simulated
 * deployment of 120 requests a 3-second minute.
 *
 * Asserts:
 *   - keys: no or an unknown key gets 401; a partner key reads its own tenant (buckets,
 *     queues, status without pools) and gets 403 on another tenant, on the deployment's
 *     buckets and on every change;
 *   - a tenant's daily limit lowered at run time (1,000,000 -> 10) is respected from the next
 *     admission: of 20 jobs exactly 10 run, 10 are rejected quota_exhausted naming it;
 *   - pausing a tenant stops its dispatches from the next round: no reservation of it is made
 *     after the pause answered, its queued jobs are held (GET /v1/jobs says why), a new job is
 *     rejected tenant_paused, and after resume every held job succeeds;
 *   - a deployment's rate limit lowered at run time (120 -> 30 a minute) holds from then on:
 *     at most 30 + one slice admitted in a minute, and the simulator answers 429 zero times;
 *   - run-time changes survive a scheduler restart.
 */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hmap.h"
#include "sign.h"
#include "util.h"

enum { MINUTE_MS = 3000, RPM = 120, LOWER_RPM = 30, SLICES = 6, T1_JOBS = 80, T2_JOBS = 20,
       T2_DAILY = 10, LATE_JOBS = 60 };

static const char *const ADMIN_KEY = "admin-e2e-secret";
static const char *const PARTNER_KEY = "partner-e2e-secret";
static char base[64]; /* http://127.0.0.1:PORT */
static char dbpath[4200];

static const char *write_configs(int sim_port, int admin_port, char **sim_cfg)
{
    const char *dir = h_tmpdir();
    char h1[65], h2[65], ha[65], hp[65];
    h_key_hash_hex("sk-e2e-admin-1", h1);
    h_key_hash_hex("sk-e2e-admin-2", h2);
    h_key_hash_hex(ADMIN_KEY, ha);
    h_key_hash_hex(PARTNER_KEY, hp);
    char sim[1024];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"deployments\": [{\"name\": \"sim\", \"rpm\": %d,"
             " \"slices_per_minute\": %d, \"ttft_ms\": 10, \"ms_per_token\": 0.1,"
             " \"api_key\": \"e2e-provider-key\"}]}",
             MINUTE_MS, RPM, SLICES);
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "e2e-provider-key\n"));
    snprintf(dbpath, sizeof dbpath, "%s/sluice.db", dir);
    char cfg[8192];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %d,"
             " \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s\", \"lease_ms\": 20000,"
             "                 \"admin_listen\": \"127.0.0.1:%d\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": [{\"name\": \"sim\", \"model\": \"m\", \"api_key_file\": \"%s\","
             "   \"base_url\": \"http://127.0.0.1:%d/sim/v1\", \"limits\": {\"rpm\": %d},"
             "   \"slices_per_minute\": %d}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim\"]}],"
             " \"tenants\": [{\"name\": \"t1\", \"tokens_per_min\": 10000000},"
             "   {\"name\": \"t2\", \"buckets\": [{\"name\": \"rpd\","
             "     \"dimension\": \"requests_per_day\", \"capacity\": 1000000,"
             "     \"period_ms\": 864000000}]}],"
             " \"keys\": [{\"id\": \"k1\", \"tenant\": \"t1\", \"hash\": \"%s\"},"
             "            {\"id\": \"k2\", \"tenant\": \"t2\", \"hash\": \"%s\"}],"
             " \"admin_keys\": [{\"id\": \"ops\", \"hash\": \"%s\", \"role\": \"admin\"},"
             "   {\"id\": \"p1\", \"hash\": \"%s\", \"role\": \"partner\", \"tenants\": [\"t1\"]}]}",
             MINUTE_MS, dir, dbpath, admin_port, dir, dir, keyfile, sim_port, RPM, SLICES, h1, h2,
             ha, hp);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

/* Calls the admin API; returns the answer (caller frees) and its status. */
static json_t *api(const char *method, const char *path, const char *key, const char *body,
                   long *status)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", base, path);
    return h_http_call(method, url, key, body, status);
}

static long api_status(const char *method, const char *path, const char *key, const char *body)
{
    long status = 0;
    json_decref(api(method, path, key, body, &status));
    return status;
}

static void submit(rd_kafka_t *prod, const char *prefix, int from, int n, const char *api_key)
{
    for (int i = from; i < from + n; i++) {
        char idem[48], req[512];
        snprintf(idem, sizeof idem, "%s-%03d", prefix, i);
        int len = snprintf(req, sizeof req,
                           "{\"idempotency_key\": \"%s\", \"api_key\": \"%s\","
                           " \"route\": \"chat\", \"request\": {\"messages\": [{\"role\":"
                           " \"user\", \"content\": \"question %d\"}], \"max_tokens\": 20}}",
                           idem, api_key, i);
        h_produce(prod, "sluice.requests", idem, req, (size_t)len);
    }
    rd_kafka_flush(prod, 30000);
}

/* Results so far, by the idempotency key's prefix. */
typedef struct {
    int ok, quota, paused, other, dup;
    int t1, t2, t1_new, late; /* results of each group */
    char quota_limiter[128];
} tally_t;

typedef int (*done_fn)(const tally_t *t);

static int phase1_done(const tally_t *t)
{
    return t->t2 == T2_JOBS && t->t1_new == 1;
}

static int phase2_done(const tally_t *t)
{
    return t->t1 == T1_JOBS;
}

static int phase3_done(const tally_t *t)
{
    return t->late == LATE_JOBS;
}

/* Reads results until done(t) (or timeout_ms); counts them in t. */
static void read_results(rd_kafka_t *cons, sl_hmap_t *seen, done_fn done, int timeout_ms,
                         tally_t *t)
{
    double deadline = sl_mono_ms() + timeout_ms;
    while (!done(t) && sl_mono_ms() < deadline) {
        json_t *r = NULL;
        if (!h_poll_json(cons, 200, &r))
            continue;
        const char *id = json_string_value(json_object_get(r, "idempotency_key"));
        const char *status = json_string_value(json_object_get(r, "status"));
        json_t *err = json_object_get(r, "error");
        const char *reason = json_string_value(json_object_get(err, "reason"));
        if (id == NULL || status == NULL) {
            json_decref(r);
            continue;
        }
        if (sl_hmap_get(seen, id) != NULL) {
            t->dup++;
            json_decref(r);
            continue;
        }
        sl_hmap_put(seen, id, strdup(status));
        if (strncmp(id, "t1-new-", 7) == 0)
            t->t1_new++;
        else if (strncmp(id, "t1-", 3) == 0)
            t->t1++;
        else if (strncmp(id, "t2-", 3) == 0)
            t->t2++;
        else if (strncmp(id, "late-", 5) == 0)
            t->late++;
        if (strcmp(status, "succeeded") == 0) {
            t->ok++;
        } else if (reason != NULL && strcmp(reason, "quota_exhausted") == 0) {
            t->quota++;
            const char *lim = json_string_value(json_object_get(err, "limiter"));
            snprintf(t->quota_limiter, sizeof t->quota_limiter, "%s", lim ? lim : "");
        } else if (reason != NULL && strcmp(reason, "tenant_paused") == 0) {
            t->paused++;
        } else {
            t->other++;
            printf("  unexpected result for %s: %s %s\n", id, status, reason ? reason : "");
        }
        json_decref(r);
    }
}

/* The id of one job of tenant that is not done, or "" (a direct read of the store). */
static void some_unfinished_job(const char *tenant, char *out, size_t cap)
{
    out[0] = '\0';
    sqlite3 *h = NULL;
    if (sqlite3_open_v2(dbpath, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(h, "SELECT job_id FROM jobs WHERE tenant = ? AND state = 'queued'"
                               " LIMIT 1", -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
            if (sqlite3_step(st) == SQLITE_ROW)
                snprintf(out, cap, "%s", (const char *)sqlite3_column_text(st, 0));
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
}

static int64_t reservations_of(const char *tenant, int64_t since_ms, int64_t until_ms)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM reservations r JOIN jobs j ON j.job_id = r.job_id"
             " WHERE j.tenant = '%s' AND r.created_ms > %lld AND r.created_ms <= %lld",
             tenant, (long long)since_ms, (long long)until_ms);
    return h_sql_count(dbpath, sql);
}

static void check_partner(void)
{
    h_check(api_status("GET", "/v1/status", NULL, NULL) == 401, "no key: 401");
    h_check(api_status("GET", "/v1/status", "not-a-key", NULL) == 401, "unknown key: 401");
    long status = 0;
    json_t *t1 = api("GET", "/v1/tenants/t1", PARTNER_KEY, NULL, &status);
    int own_buckets = 0, foreign = 0;
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(t1, "buckets"), i, b) {
        const char *id = json_string_value(json_object_get(b, "id"));
        if (id != NULL && (strncmp(id, "tenant:t1:", 10) == 0 || strncmp(id, "key:k1:", 7) == 0))
            own_buckets++;
        else
            foreign++;
    }
    h_check(status == 200 && own_buckets > 0 && foreign == 0,
            "partner key reads its tenant t1: %ld, %d own buckets, %d others", status,
            own_buckets, foreign);
    json_decref(t1);
    h_check(api_status("GET", "/v1/tenants/t2", PARTNER_KEY, NULL) == 403,
            "partner key gets 403 on tenant t2");
    h_check(api_status("GET", "/v1/buckets/tenant:t2:rpd", PARTNER_KEY, NULL) == 403,
            "partner key gets 403 on t2's bucket");
    h_check(api_status("GET", "/v1/buckets/deployment:sim:rpm", PARTNER_KEY, NULL) == 403,
            "partner key gets 403 on the deployment's bucket");
    h_check(api_status("PUT", "/v1/tenants/t1", PARTNER_KEY, "{\"weight\": 5}") == 403,
            "partner key gets 403 changing its own tenant");
    h_check(api_status("POST", "/v1/tenants/t1/pause", PARTNER_KEY, NULL) == 403,
            "partner key gets 403 pausing");
    json_t *list = api("GET", "/v1/buckets", PARTNER_KEY, NULL, &status);
    int others = 0, n = 0;
    json_array_foreach(json_object_get(list, "buckets"), i, b) {
        const char *id = json_string_value(json_object_get(b, "id"));
        n++;
        others += id == NULL || (strncmp(id, "tenant:t1:", 10) != 0 && strncmp(id, "key:k1:", 7) != 0);
    }
    h_check(status == 200 && n > 0 && others == 0,
            "partner bucket list holds only t1's (%d, %d others)", n, others);
    json_decref(list);
    json_t *st = api("GET", "/v1/status", PARTNER_KEY, NULL, &status);
    h_check(status == 200 && json_object_get(st, "pools") == NULL &&
                json_array_size(json_object_get(st, "tenants")) == 1,
            "partner status: no pools, its one tenant");
    json_decref(st);
    st = api("GET", "/v1/status", ADMIN_KEY, NULL, &status);
    h_check(status == 200 && json_array_size(json_object_get(st, "pools")) == 1,
            "admin status has the pool");
    json_decref(st);
    h_check(api_status("GET", "/v1/tenants/nobody", ADMIN_KEY, NULL) == 404,
            "unknown tenant: 404 for admin");
    h_check(api_status("PUT", "/v1/buckets/deployment:sim:rpm", ADMIN_KEY, "{\"limit\": -3}") ==
                400,
            "a negative limit is refused: 400");
}

int main(void)
{
    sl_crypto_init();
    printf("e2e admin: partner scope, run-time daily limit, pause/resume, run-time rate limit\n");
    int sim_port = h_free_port();
    int admin_port = h_free_port();
    snprintf(base, sizeof base, "http://127.0.0.1:%d", admin_port);
    char *sim_cfg = NULL;
    const char *cfg = write_configs(sim_port, admin_port, &sim_cfg);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    char status_url[600];
    snprintf(status_url, sizeof status_url, "%s/v1/status", base);
    h_wait_http_ok(status_url, ADMIN_KEY, 20000);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    sl_hmap_t *seen = sl_hmap_new();

    check_partner();

    /* A daily limit lowered at run time, before t2's jobs arrive. */
    long status = 0;
    json_t *t2 = api("PUT", "/v1/tenants/t2", ADMIN_KEY, "{\"daily_requests\": 10}", &status);
    int overridden = 0;
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(t2, "buckets"), i, b) {
        if (strcmp(json_string_value(json_object_get(b, "id")), "tenant:t2:rpd") == 0)
            overridden = json_is_true(json_object_get(b, "override")) &&
                         json_number_value(json_object_get(b, "limit")) == T2_DAILY;
    }
    h_check(status == 200 && overridden, "t2's daily requests lowered to %d (%ld)", T2_DAILY,
            status);
    json_decref(t2);
    h_check(api_status("PUT", "/v1/tenants/t1", ADMIN_KEY, "{\"daily_tokens\": 5}") == 409,
            "a daily limit the tenant does not have: 409");

    submit(prod, "t2", 0, T2_JOBS, "sk-e2e-admin-2");
    submit(prod, "t1", 0, T1_JOBS, "sk-e2e-admin-1");

    /* Pause t1 once some of its jobs ran. */
    double wait_until = sl_mono_ms() + 20000;
    while (reservations_of("t1", 0, INT64_MAX) < 15 && sl_mono_ms() < wait_until)
        usleep(20 * 1000);
    json_t *paused = api("POST", "/v1/tenants/t1/pause", ADMIN_KEY, NULL, &status);
    int64_t paused_at = sl_now_ms();
    h_check(status == 200 && json_is_true(json_object_get(paused, "paused")),
            "t1 paused (%ld)", status);
    json_decref(paused);
    int64_t before = reservations_of("t1", 0, paused_at);
    usleep(1500 * 1000);
    int64_t after = reservations_of("t1", paused_at, INT64_MAX);
    json_t *t1 = api("GET", "/v1/tenants/t1", ADMIN_KEY, NULL, &status);
    int64_t held = json_integer_value(json_object_get(t1, "held"));
    int64_t queued = json_integer_value(json_object_get(json_object_get(t1, "queued"), "standard"));
    json_decref(t1);
    h_check(after == 0 && before < T1_JOBS,
            "no dispatch of t1 after the pause answered (%lld before, %lld after)",
            (long long)before, (long long)after);
    h_check(held > 0 && queued == 0, "t1's queued jobs are held (%lld held, %lld in line)",
            (long long)held, (long long)queued);
    char job_id[80];
    some_unfinished_job("t1", job_id, sizeof job_id);
    char path[160];
    snprintf(path, sizeof path, "/v1/jobs/%s", job_id);
    json_t *job = api("GET", path, ADMIN_KEY, NULL, &status);
    const char *why = json_string_value(json_object_get(json_object_get(job, "waiting_for"),
                                                        "limiter"));
    h_check(status == 200 && strcmp(json_string_value(json_object_get(job, "state")), "held") == 0 &&
                why != NULL && strcmp(why, "tenant:t1:paused") == 0,
            "GET /v1/jobs/%s: held, waiting for %s", job_id, why ? why : "?");
    json_decref(job);
    h_check(api_status("GET", path, PARTNER_KEY, NULL) == 200, "partner reads t1's job");
    submit(prod, "t1-new", 0, 1, "sk-e2e-admin-1");

    tally_t t = {0};
    /* t2's 20 and the paused tenant's new job answer while t1 waits. */
    read_results(cons, seen, phase1_done, 30000, &t);
    h_check(t.paused == 1, "a new job of the paused tenant: rejected tenant_paused (%d)",
            t.paused);
    h_check(t.quota == T2_JOBS - T2_DAILY && strcmp(t.quota_limiter, "tenant:t2:rpd") == 0,
            "t2: %d of %d rejected quota_exhausted by %s", t.quota, T2_JOBS, t.quota_limiter);

    json_t *resumed = api("POST", "/v1/tenants/t1/resume", ADMIN_KEY, NULL, &status);
    h_check(status == 200 && json_is_false(json_object_get(resumed, "paused")),
            "t1 resumed (%ld)", status);
    json_decref(resumed);
    read_results(cons, seen, phase2_done, 30000, &t);
    h_check(t.t1 == T1_JOBS && t.ok == T1_JOBS + T2_DAILY, "after resume every job ran: %d succeeded (want %d)",
            t.ok, T1_JOBS + T2_DAILY);

    /* A rate limit lowered at run time. */
    json_t *rpm = api("PUT", "/v1/buckets/deployment:sim:rpm", ADMIN_KEY, "{\"limit\": 30}",
                      &status);
    int64_t lowered_at = sl_now_ms();
    h_check(status == 200 && json_number_value(json_object_get(rpm, "limit")) == LOWER_RPM,
            "deployment:sim:rpm lowered to %d a minute (%ld)", LOWER_RPM, status);
    json_decref(rpm);
    submit(prod, "late", 0, LATE_JOBS, "sk-e2e-admin-1");
    read_results(cons, seen, phase3_done, 40000, &t);
    /* Over any minute after the change: at most the limit plus the one slice the bucket may
     * have held when it was lowered. */
    int64_t in_minute = reservations_of("t1", lowered_at + MINUTE_MS, lowered_at + 2 * MINUTE_MS);
    int64_t cap = LOWER_RPM + RPM / SLICES;
    h_check(in_minute <= cap && in_minute >= LOWER_RPM / 2,
            "in the second minute after the change %lld admitted (limit %d, at most %lld)",
            (long long)in_minute, LOWER_RPM, (long long)cap);
    h_check(t.ok == T1_JOBS + T2_DAILY + LATE_JOBS, "every late job succeeded (%d)", t.ok);
    json_t *stats = h_http_json(st.stats_url);
    h_check(h_sim_total(stats, "refused") == 0, "the simulator answered 429 zero times (%lld)",
            (long long)h_sim_total(stats, "refused"));
    json_decref(stats);
    h_check(t.other == 0 && t.dup == 0, "no other outcome (%d), no duplicate result (%d)",
            t.other, t.dup);

    /* Changes survive a restart. */
    int rc = h_stop(st.sched, SIGTERM, 15000);
    h_check(rc == 0, "scheduler stopped cleanly (%d)", rc);
    st.sched = h_spawn("sluice-scheduler", "scheduler-2", cfg, NULL);
    char bucket_url[600];
    snprintf(bucket_url, sizeof bucket_url, "%s/v1/buckets/deployment:sim:rpm", base);
    json_t *again = NULL;
    if (h_wait_http_ok(bucket_url, ADMIN_KEY, 20000))
        again = api("GET", "/v1/buckets/deployment:sim:rpm", ADMIN_KEY, NULL, &status);
    h_check(again != NULL && json_is_true(json_object_get(again, "override")) &&
                json_number_value(json_object_get(again, "limit")) == LOWER_RPM &&
                json_number_value(json_object_get(again, "configured_limit")) == RPM,
            "after a restart the run-time rate limit is still %d (config %d)", LOWER_RPM, RPM);
    json_decref(again);

    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    rd_kafka_destroy(prod);
    h_free_string_map(seen);
    int bad = h_stack_down(&st);
    h_check(bad == 0, "every process exited cleanly (%d did not)", bad);
    free(sim_cfg);
    free((char *)cfg);
    int status_code = h_summary("admin");
    h_cleanup(status_code != 0);
    return status_code;
}
