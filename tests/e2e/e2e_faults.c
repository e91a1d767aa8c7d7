/* e2e_faults - a 429 storm and a 503 burst over real processes.
 *
 * Two simulated deployments in one pool answer 30 % of requests with a 429 anyway (half with
 * a Retry-After of 500 ms, half with none), and deployment "a" answers 503 to everything for
 * two seconds. Asserts:
 *   - every job ends, succeeded or with a clear reason (error type, reason, message), before
 *     its deadline;
 *   - no job was attempted more than max_attempts times (the retry budget per job);
 *   - after the scheduler heard a 429 from a deployment, it sent that deployment nothing until
 *     the Retry-After (or, without one, its own 1 s default) had passed;
 *   - the 503 burst was met (the simulator sent 503s) and its jobs were served elsewhere or
 *     later.
 *   - after every pause, one call (a probe) goes to the deployment first, alone, and the
 *     rest wait for its answer, so a deployment still refusing is not met by a wave.
 * Reports the wait between a 429 and the job's next attempt (min / median / max, and how many
 * share their millisecond: those released together once the probe came back).
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hmap.h"
#include "sign.h"
#include "util.h"

/* DEFAULT_PAUSE_MS: the scheduler's pause after a 429 without Retry-After, a second of the
 * configured minute (minute_ms / 60). */
enum { MINUTE_MS = 3000, JOBS = 200, MAX_ATTEMPTS = 6, RETRY_AFTER_MS = 500,
       DEFAULT_PAUSE_MS = MINUTE_MS / 60, DEADLINE_MS = 60000 };

static char dbpath[4200];

static const char *write_configs(int sim_port, char **sim_cfg)
{
    const char *dir = h_tmpdir();
    char h1[65];
    h_key_hash_hex("sk-e2e-faults", h1);
    char sim[2048];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"seed\": 7, \"deployments\": ["
             " {\"name\": \"a\", \"rpm\": 6000, \"slices_per_minute\": 6, \"ttft_ms\": 10,"
             "  \"ms_per_token\": 0.1, \"api_key\": \"e2e-provider-key\","
             "  \"faults\": {\"rate_limit_share\": 0.3, \"retry_after_share\": 0.5,"
             "   \"retry_after_ms\": %d, \"unavailable_origin\": \"first_request\","
             "   \"unavailable\": [{\"from_ms\": 1500, \"to_ms\": 3500}]}},"
             " {\"name\": \"b\", \"rpm\": 6000, \"slices_per_minute\": 6, \"ttft_ms\": 10,"
             "  \"ms_per_token\": 0.1, \"api_key\": \"e2e-provider-key\","
             "  \"faults\": {\"rate_limit_share\": 0.3, \"retry_after_share\": 0.5,"
             "   \"retry_after_ms\": %d}}]}",
             MINUTE_MS, RETRY_AFTER_MS, RETRY_AFTER_MS);
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "e2e-provider-key\n"));
    snprintf(dbpath, sizeof dbpath, "%s/sluice.db", dir);
    char cfg[16384];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %d,"
             " \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s\", \"lease_ms\": 20000, \"max_attempts\": %d,"
             "                 \"admin_listen\": \"\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"classes\": {\"standard\": {\"deadline_ms\": %d}},"
             " \"deployments\": ["
             "  {\"name\": \"a\", \"model\": \"m\", \"api_key_file\": \"%s\","
             "   \"base_url\": \"http://127.0.0.1:%d/a/v1\", \"limits\": {\"rpm\": 6000},"
             "   \"slices_per_minute\": 6},"
             "  {\"name\": \"b\", \"model\": \"m\", \"api_key_file\": \"%s\","
             "   \"base_url\": \"http://127.0.0.1:%d/b/v1\", \"limits\": {\"rpm\": 6000},"
             "   \"slices_per_minute\": 6}],"
             " \"routes\": [{\"name\": \"pool\", \"max_retry_ratio\": 2.0,"
             "   \"deployments\": [\"a\", \"b\"]}],"
             " \"tenants\": [{\"name\": \"t1\"}],"
             " \"keys\": [{\"id\": \"k1\", \"tenant\": \"t1\", \"hash\": \"%s\"}]}",
             MINUTE_MS, dir, dbpath, MAX_ATTEMPTS, dir, dir, DEADLINE_MS, keyfile, sim_port,
             keyfile, sim_port, h1);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* For each 429: how many dispatches went to the deployment in the millisecond of its first
 * dispatch after the pause (1 = the probe went alone). */
static void probes(int *alone, int *total)
{
    sqlite3 *db = NULL;
    *alone = *total = 0;
    if (sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        return;
    sqlite3_stmt *st = NULL;
    const char *sql =
        "SELECT (SELECT COUNT(*) FROM reservations z WHERE z.deployment = r.deployment AND"
        "   z.created_ms = (SELECT MIN(x.created_ms) FROM reservations x"
        "     WHERE x.deployment = r.deployment AND x.created_ms > r.closed_ms))"
        " FROM reservations r WHERE r.outcome = 'rate_limited'";
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            int n = sqlite3_column_int(st, 0);
            if (n == 0)
                continue; /* nothing was sent there afterwards */
            (*total)++;
            *alone += n == 1;
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* For each 429 the simulator sent with a Retry-After (its ring in /stats: when, how long, to
 * which job): the reservation it answered, when the scheduler heard it, and whether anything
 * was sent to that deployment before the Retry-After had passed since. */
static void ra_violations(json_t *stats, int *checked, int *violations)
{
    sqlite3 *db = NULL;
    *checked = *violations = 0;
    if (sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        return;
    sqlite3_stmt *st = NULL;
    const char *sql =
        "SELECT (SELECT COUNT(*) FROM reservations x WHERE x.deployment = r.deployment"
        "   AND x.created_ms > r.closed_ms AND x.created_ms < r.closed_ms + ?)"
        " FROM reservations r WHERE r.job_id = ? AND r.outcome = 'rate_limited'"
        "   AND r.deployment = ? AND r.created_ms <= ? ORDER BY r.created_ms DESC LIMIT 1";
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        const char *dep;
        json_t *d;
        json_object_foreach(json_object_get(stats, "deployments"), dep, d) {
            size_t i;
            json_t *e;
            json_array_foreach(json_object_get(d, "retry_after_429s"), i, e) {
                const char *job = json_string_value(json_object_get(e, "idempotency_key"));
                if (job == NULL || !json_is_true(json_object_get(e, "fault")))
                    continue;
                sqlite3_reset(st);
                sqlite3_bind_int64(st, 1, json_integer_value(json_object_get(e, "retry_after_ms")));
                sqlite3_bind_text(st, 2, job, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(st, 3, dep, -1, SQLITE_TRANSIENT);
                sqlite3_bind_int64(st, 4, json_integer_value(json_object_get(e, "sent_ms")));
                if (sqlite3_step(st) == SQLITE_ROW) {
                    (*checked)++;
                    *violations += sqlite3_column_int(st, 0);
                }
            }
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* For each 429 the scheduler reconciled (reservation outcome rate_limited, closed at C on
 * deployment D): reservations on D created in (C, C + pause) are dispatches into a pause.
 * Also collects, per 429, the wait until the same job's next attempt. */
static void analyse(int *violations, int *pauses, int64_t *waits, int *nwaits)
{
    sqlite3 *db = NULL;
    *violations = *pauses = *nwaits = 0;
    if (sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        return;
    sqlite3_stmt *st = NULL;
    const char *sql =
        "SELECT r.deployment, r.closed_ms, r.job_id, r.attempt,"
        " (SELECT COUNT(*) FROM reservations x WHERE x.deployment = r.deployment"
        "   AND x.created_ms > r.closed_ms AND x.created_ms < r.closed_ms + ?),"
        " (SELECT MIN(y.created_ms) FROM reservations y WHERE y.job_id = r.job_id"
        "   AND y.attempt > r.attempt)"
        " FROM reservations r WHERE r.outcome = 'rate_limited'";
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        /* Every 429 pauses at least the default; those with a Retry-After are checked against
         * it in ra_violations. */
        sqlite3_bind_int(st, 1, DEFAULT_PAUSE_MS);
        while (sqlite3_step(st) == SQLITE_ROW) {
            (*pauses)++;
            *violations += sqlite3_column_int(st, 4);
            if (sqlite3_column_type(st, 5) != SQLITE_NULL && *nwaits < 4096)
                waits[(*nwaits)++] = sqlite3_column_int64(st, 5) - sqlite3_column_int64(st, 1);
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
}

int main(void)
{
    sl_crypto_init();
    printf("e2e faults: 30 %% 429s (half with Retry-After) and a 2 s 503 burst\n");
    int sim_port = h_free_port();
    char *sim_cfg = NULL;
    const char *cfg = write_configs(sim_port, &sim_cfg);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    /* A warm-up job first: the 503 window counts from a's first request, so the jobs must not
     * wait for the stack to settle and then all run at once, before the window opens. */
    const char *warm = "{\"idempotency_key\": \"warm-0\", \"api_key\": \"sk-e2e-faults\","
                       " \"route\": \"pool\", \"request\": {\"messages\": [{\"role\":"
                       " \"user\", \"content\": \"warm up\"}], \"max_tokens\": 5}}";
    h_produce(prod, "sluice.requests", "warm-0", warm, strlen(warm));
    rd_kafka_flush(prod, 10000);
    int warmed = 0;
    for (double until = sl_mono_ms() + 60000; !warmed && sl_mono_ms() < until;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(cons, 200);
        warmed = m != NULL && !m->err;
        if (m != NULL)
            rd_kafka_message_destroy(m);
    }
    h_check(warmed, "the warm-up job got its result");
    /* 200 jobs over about 4 s, so the 503 window (1.5 - 3.5 s after a's first request) falls
     * in the middle of the run. */
    for (int i = 0; i < JOBS; i++) {
        char idem[32], req[512];
        snprintf(idem, sizeof idem, "f-%03d", i);
        int n = snprintf(req, sizeof req,
                         "{\"idempotency_key\": \"%s\", \"api_key\": \"sk-e2e-faults\","
                         " \"route\": \"pool\", \"request\": {\"messages\": [{\"role\": \"user\","
                         " \"content\": \"question %d\"}], \"max_tokens\": 20}}",
                         idem, i);
        h_produce(prod, "sluice.requests", idem, req, (size_t)n);
        if (i % 10 == 9) {
            rd_kafka_flush(prod, 1000);
            usleep(200 * 1000);
        }
    }
    rd_kafka_flush(prod, 10000);

    sl_hmap_t *seen = sl_hmap_new();
    int results = 0, ok = 0, unclear = 0, late = 0, over_budget = 0, dup = 0;
    int max_attempts_seen = 0;
    double deadline = sl_mono_ms() + DEADLINE_MS + 30000;
    while (results < JOBS && sl_mono_ms() < deadline) {
        json_t *r = NULL;
        if (!h_poll_json(cons, 200, &r))
            continue;
        const char *id = json_string_value(json_object_get(r, "idempotency_key"));
        const char *status = json_string_value(json_object_get(r, "status"));
        if (id == NULL || status == NULL) {
            json_decref(r);
            continue;
        }
        if (sl_hmap_get(seen, id) != NULL) {
            dup++;
            json_decref(r);
            continue;
        }
        sl_hmap_put(seen, id, strdup(status));
        results++;
        int attempts = (int)json_integer_value(json_object_get(r, "attempts"));
        if (attempts > max_attempts_seen)
            max_attempts_seen = attempts;
        over_budget += attempts > MAX_ATTEMPTS;
        double total_ms =
            json_number_value(json_object_get(json_object_get(r, "timings"), "total_ms"));
        late += total_ms > DEADLINE_MS;
        if (strcmp(status, "succeeded") == 0) {
            ok++;
        } else {
            json_t *err = json_object_get(r, "error");
            const char *type = json_string_value(json_object_get(err, "type"));
            const char *reason = json_string_value(json_object_get(err, "reason"));
            const char *msg = json_string_value(json_object_get(err, "message"));
            if (type == NULL || reason == NULL || msg == NULL || msg[0] == '\0')
                unclear++;
            else
                printf("  %s: %s %s/%s: %.100s\n", id, status, type, reason, msg);
        }
        json_decref(r);
    }
    h_check(results == JOBS && dup == 0, "every job has exactly one result (%d of %d, %d dup)",
            results, JOBS, dup);
    h_check(unclear == 0, "every job not succeeded names its type, reason and message (%d not)",
            unclear);
    h_check(late == 0, "every job ended before its deadline (%d late)", late);
    h_check(over_budget == 0, "no job attempted more than %d times (most: %d)", MAX_ATTEMPTS,
            max_attempts_seen);
    printf("  %d of %d succeeded\n", ok, JOBS);
    h_check(ok * 100 >= JOBS * 90, "at least 90 %% succeeded despite the faults (%d)", ok);

    json_t *stats = h_http_json(st.stats_url);
    int64_t f429 = h_sim_total(stats, "fault_429");
    int64_t f429ra = h_sim_total(stats, "fault_429_retry_after");
    int64_t f503 = h_sim_total(stats, "fault_503");
    printf("  simulator: %lld injected 429s (%lld with Retry-After), %lld 503s\n",
           (long long)f429, (long long)f429ra, (long long)f503);
    h_check(f429 > 0 && f429ra > 0 && f429ra < f429 && f503 > 0,
            "the storm and the burst happened (429 %lld, with Retry-After %lld, 503 %lld)",
            (long long)f429, (long long)f429ra, (long long)f503);
    int ra_checked = 0, ra_bad = 0;
    ra_violations(stats, &ra_checked, &ra_bad);
    h_check(ra_checked > 0 && ra_bad == 0,
            "no dispatch to a deployment before a Retry-After it sent had passed since the "
            "scheduler heard it (%d 429s with Retry-After checked, %d dispatches too early)",
            ra_checked, ra_bad);
    json_decref(stats);

    int violations = 0, pauses = 0, nwaits = 0;
    static int64_t waits[4096];
    analyse(&violations, &pauses, waits, &nwaits);
    h_check(pauses > 0 && violations == 0,
            "no dispatch to a deployment within %d ms (a second of the minute) after the "
            "scheduler heard any 429 (%d 429s, %d dispatches into a pause)",
            DEFAULT_PAUSE_MS, pauses, violations);
    if (nwaits > 0) {
        qsort(waits, (size_t)nwaits, sizeof waits[0], cmp_i64);
        int64_t lo = waits[0], med = waits[nwaits / 2], hi = waits[nwaits - 1];
        int same = 0;
        for (int i = 1; i < nwaits; i++)
            same += waits[i] == waits[i - 1];
        printf("  wake-ups after a 429: %d retries, wait min %lld ms, median %lld ms, max %lld "
               "ms; %d share their wait to the millisecond with another\n",
               nwaits, (long long)lo, (long long)med, (long long)hi, same);
        int alone = 0, after = 0;
        probes(&alone, &after);
        h_check(after > 0 && alone == after,
                "after every pause one probe went first, alone (%d of %d)", alone, after);
    }

    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    rd_kafka_destroy(prod);
    h_free_string_map(seen);
    int bad = h_stack_down(&st);
    h_check(bad == 0, "every process exited cleanly (%d did not)", bad);
    free(sim_cfg);
    free((char *)cfg);
    int rc = h_summary("faults");
    h_cleanup(rc != 0);
    return rc;
}
