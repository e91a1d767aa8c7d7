/* e2e_ledger - the capacity ledger against the simulator's provider-style limits, over real
 * processes and TCP (minutes shortened to 3 s):
 *   - an Anthropic-style deployment with separate input (ITPM) and output (OTPM) token limits,
 *     cache reads that do not count toward ITPM, and Anthropic rate-limit headers; outputs are
 *     drawn at random well below max_tokens, so the scheduler must learn them to use OTPM;
 *   - an OpenAI-style deployment (RPM, TPM counting max_tokens at receipt) whose daily request
 *     quota runs out mid-run.
 * Asserts: the simulator answers no 429; OTPM, the binding dimension, is used >= 95 % in steady
 * state; ITPM would have been exceeded had cache reads counted; the jobs beyond the daily quota
 * get a clear, final `rejected` naming the quota, without a single retry; nothing is left open. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hmap.h"
#include "sign.h"
#include "util.h"

enum {
    MINUTE_MS = 3000,
    AN_JOBS = 3000,
    OA_JOBS = 250,
    RPD = 150,
    OTPM = 60000,
    ITPM = 160000,
    MAX_TOKENS = 1000
};

static const char *write_configs(int sim_port, char **sim_cfg, char **db)
{
    const char *dir = h_tmpdir();
    char h1[65];
    h_key_hash_hex("sk-e2e-ledger", h1);
    static char dbpath[512];
    snprintf(dbpath, sizeof dbpath, "%s/sluice.db", dir);
    *db = dbpath;
    char sim[4096];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"deployments\": ["
             "{\"name\": \"sim-an\", \"model\": \"claude-sim\", \"rpm\": 60000, \"itpm\": %d,"
             " \"otpm\": %d, \"otpm_counting\": \"generated\", \"slices_per_minute\": 6,"
             " \"cache_hit_share\": 0.5, \"cache_read_fraction\": 0.6, \"headers\": \"anthropic\","
             " \"ttft_ms\": 20, \"ms_per_token\": 0.3, \"output_min\": 20, \"output_max\": 200,"
             " \"api_key\": \"e2e-provider-key\"},"
             "{\"name\": \"sim-oa\", \"model\": \"gpt-4o-mini\", \"rpm\": 60000, \"tpm\": 600000,"
             " \"rpd\": %d, \"day_ms\": 864000000, \"slices_per_minute\": 10, \"ttft_ms\": 20, \"ms_per_token\": 0.2,"
             " \"output_min\": 20, \"output_max\": 90, \"api_key\": \"e2e-provider-key\"}]}",
             MINUTE_MS, ITPM, OTPM, RPD);
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "e2e-provider-key\n"));
    char cfg[8192];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %d,"
             " \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s\", \"lease_ms\": 20000, \"max_attempts\": 5},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"scopes\": [{\"name\": \"org:anthropic-sim\", \"buckets\": ["
             "                {\"dimension\": \"requests_per_day\", \"capacity\": 1000000}]},"
             "              {\"name\": \"workspace:e2e\", \"parent\": \"org:anthropic-sim\"}],"
             " \"deployments\": ["
             "  {\"name\": \"sim-an\", \"base_url\": \"http://127.0.0.1:%d/sim-an/v1\","
             "   \"model\": \"claude-sim\", \"api_key_file\": \"%s\", \"parent\": \"workspace:e2e\","
             "   \"limits\": {\"rpm\": 60000, \"itpm\": %d, \"otpm\": %d},"
             "   \"input_counting\": \"exclude_cache_reads\", \"output_counting\": \"generated\","
             "   \"slices_per_minute\": 6, \"max_output_tokens\": 4096},"
             "  {\"name\": \"sim-oa\", \"base_url\": \"http://127.0.0.1:%d/sim-oa/v1\","
             "   \"model\": \"gpt-4o-mini\", \"api_key_file\": \"%s\","
             "   \"limits\": {\"rpm\": 60000, \"tpm\": 600000},"
             /* A "day" of 10 days, in fixed windows from the epoch, so that no run crosses a
              * reset (the simulator's window starts with it, sluice's at the epoch). */
             "   \"buckets\": [{\"name\": \"rpd\", \"dimension\": \"requests_per_day\","
             "                \"capacity\": %d, \"period_ms\": 864000000}],"
             "   \"slices_per_minute\": 10, \"max_output_tokens\": 4096}],"
             " \"routes\": [{\"name\": \"claude\", \"deployments\": [\"sim-an\"]},"
             "             {\"name\": \"gpt\", \"deployments\": [\"sim-oa\"]}],"
             " \"tenants\": [{\"name\": \"t1\"}],"
             " \"keys\": [{\"id\": \"k1\", \"tenant\": \"t1\", \"hash\": \"%s\","
             "            \"max_in_flight\": 200}]}",
             MINUTE_MS, dir, dbpath, dir, dir, sim_port, keyfile, ITPM, OTPM, sim_port, keyfile,
             RPD, h1);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

/* A request of about 1,400 characters (350 tokens at the simulator's 4 characters a token). */
static int make_request(char *buf, size_t cap, const char *idem, const char *route, int i)
{
    static char filler[1401];
    if (filler[0] == '\0') {
        const char *words = "the quick brown fox jumps over the lazy dog while counting tokens ";
        size_t wl = strlen(words);
        for (size_t k = 0; k < sizeof filler - 1; k++)
            filler[k] = words[k % wl];
    }
    return snprintf(buf, cap,
                    "{\"idempotency_key\": \"%s\", \"api_key\": \"sk-e2e-ledger\", \"route\": "
                    "\"%s\", \"request\": {\"messages\": [{\"role\": \"user\", \"content\": "
                    "\"Question %d: %s\"}], \"max_tokens\": %d}}",
                    idem, route, i, filler, MAX_TOKENS);
}

static int64_t dep_stat(json_t *stats, const char *dep, const char *field)
{
    json_t *d = json_object_get(json_object_get(stats, "deployments"), dep);
    return json_integer_value(json_object_get(d, field));
}

int main(void)
{
    sl_crypto_init();
    printf("e2e ledger: %d jobs on Anthropic-style ITPM/OTPM limits, %d on an OpenAI-style "
           "deployment with a daily quota of %d requests\n",
           AN_JOBS, OA_JOBS, RPD);
    int sim_port = h_free_port();
    char *sim_cfg = NULL, *db = NULL;
    const char *cfg = write_configs(sim_port, &sim_cfg, &db);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);

    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    static char req[4096];
    for (int i = 0; i < AN_JOBS || i < OA_JOBS; i++) {
        char idem[32];
        if (i < AN_JOBS) {
            snprintf(idem, sizeof idem, "an-%05d", i);
            int n = make_request(req, sizeof req, idem, "claude", i);
            h_produce(prod, "sluice.requests", idem, req, (size_t)n);
        }
        if (i < OA_JOBS) {
            snprintf(idem, sizeof idem, "oa-%05d", i);
            int n = make_request(req, sizeof req, idem, "gpt", i);
            h_produce(prod, "sluice.requests", idem, req, (size_t)n);
        }
    }
    rd_kafka_flush(prod, 30000);
    printf("  submitted %d + %d requests\n", AN_JOBS, OA_JOBS);

    sl_hmap_t *seen = sl_hmap_new(); /* job id -> status */
    int an_done = 0, an_ok = 0, oa_done = 0, oa_ok = 0, oa_quota = 0, oa_quota_clear = 0;
    int other = 0;
    json_t *s1 = NULL, *s2 = NULL;
    double deadline = sl_mono_ms() + 180000;
    while ((an_done < AN_JOBS || oa_done < OA_JOBS) && sl_mono_ms() < deadline) {
        json_t *r = NULL;
        if (!h_poll_json(cons, 200, &r))
            continue;
        const char *id = json_string_value(json_object_get(r, "job_id"));
        const char *idem = json_string_value(json_object_get(r, "idempotency_key"));
        const char *status = json_string_value(json_object_get(r, "status"));
        json_t *err = json_object_get(r, "error");
        const char *reason = json_string_value(json_object_get(err, "reason"));
        const char *limiter = json_string_value(json_object_get(err, "limiter"));
        if (id == NULL || idem == NULL || status == NULL || sl_hmap_get(seen, id) != NULL) {
            json_decref(r);
            continue;
        }
        sl_hmap_put(seen, id, strdup(status));
        int ok = strcmp(status, "succeeded") == 0;
        if (strncmp(idem, "an-", 3) == 0) {
            an_done++;
            an_ok += ok;
            if (!ok && other++ < 5)
                printf("  job %s: %s %s\n", idem, status, reason ? reason : "");
            if (an_done == AN_JOBS / 5)
                s1 = h_http_json(st.stats_url);
            if (an_done == AN_JOBS * 4 / 5)
                s2 = h_http_json(st.stats_url);
        } else {
            oa_done++;
            oa_ok += ok;
            if (!ok && reason != NULL && strcmp(reason, "quota_exhausted") == 0) {
                oa_quota++;
                /* Clear and final: rejected locally, names the quota, not retryable, and the
                 * job never reached the provider. */
                oa_quota_clear +=
                    strcmp(status, "rejected") == 0 && limiter != NULL &&
                    strcmp(limiter, "deployment:sim-oa:rpd") == 0 &&
                    json_is_false(json_object_get(err, "retryable")) &&
                    json_integer_value(json_object_get(r, "attempts")) == 0 &&
                    strcmp(json_string_value(json_object_get(err, "gateway_decision")),
                           "rejected_locally") == 0;
            } else if (!ok && other++ < 5) {
                printf("  job %s: %s %s\n", idem, status, reason ? reason : "");
            }
        }
        json_decref(r);
    }
    json_t *s3 = h_http_json(st.stats_url);

    h_check(an_done == AN_JOBS && an_ok == AN_JOBS,
            "every job on the Anthropic-style deployment succeeded (%d/%d, %d results)", an_ok,
            AN_JOBS, an_done);
    int64_t refused = h_sim_total(s3, "refused");
    h_check(s3 != NULL && refused == 0,
            "the simulator answered no 429 (refused %lld: ITPM %lld, OTPM %lld, RPD %lld)",
            (long long)refused, (long long)h_sim_total(s3, "refused_itpm_dim"),
            (long long)h_sim_total(s3, "refused_otpm_dim"),
            (long long)h_sim_total(s3, "refused_rpd_dim"));
    double otpm_util = 0, itpm_util = 0, itpm_if_cached = 0;
    if (s1 != NULL && s2 != NULL) {
        double dt = (double)(json_integer_value(json_object_get(s2, "now_ms")) -
                             json_integer_value(json_object_get(s1, "now_ms")));
        double minutes = dt / MINUTE_MS;
        double out = (double)(dep_stat(s2, "sim-an", "output_tokens_charged") -
                              dep_stat(s1, "sim-an", "output_tokens_charged"));
        double in = (double)(dep_stat(s2, "sim-an", "input_tokens_charged") -
                             dep_stat(s1, "sim-an", "input_tokens_charged"));
        double cached = (double)(dep_stat(s2, "sim-an", "cached_tokens") -
                                 dep_stat(s1, "sim-an", "cached_tokens"));
        otpm_util = out / (OTPM * minutes);
        itpm_util = in / (ITPM * minutes);
        itpm_if_cached = (in + cached) / (ITPM * minutes);
        printf("  steady state (20-80 %% of the jobs, %.1f minutes): OTPM %.1f %%, ITPM %.1f %% "
               "(%.1f %% if cache reads counted)\n",
               minutes, otpm_util * 100, itpm_util * 100, itpm_if_cached * 100);
    }
    h_check(otpm_util >= 0.95, "OTPM (the binding dimension) used %.1f %% in steady state",
            otpm_util * 100);
    h_check(itpm_util < 1.0 && itpm_if_cached > 1.0,
            "cache reads were not charged to ITPM: %.1f %% used, %.1f %% had they counted",
            itpm_util * 100, itpm_if_cached * 100);

    h_check(oa_done == OA_JOBS, "every job on the quota deployment has a result (%d/%d)",
            oa_done, OA_JOBS);
    h_check(oa_ok == RPD, "exactly the daily quota succeeded (%d of %d)", oa_ok, RPD);
    h_check(oa_quota == OA_JOBS - RPD && oa_quota_clear == oa_quota,
            "the rest got a final rejected/quota_exhausted naming deployment:sim-oa:rpd, "
            "not retryable, never sent (%d of %d, %d clear)",
            oa_quota, OA_JOBS - RPD, oa_quota_clear);
    h_check(dep_stat(s3, "sim-oa", "admitted") == RPD,
            "the provider saw exactly the quota (%lld requests)",
            (long long)dep_stat(s3, "sim-oa", "admitted"));

    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    int unclean = h_stack_down(&st);
    h_check(unclean == 0, "every process stopped cleanly on SIGTERM (%d did not)", unclean);
    int64_t open_res = h_sql_count(db, "SELECT COUNT(*) FROM reservations WHERE state = 'open'");
    int64_t open_jobs = h_sql_count(db, "SELECT COUNT(*) FROM jobs WHERE state <> 'done'");
    h_check(open_res == 0 && open_jobs == 0, "nothing left open (reservations %lld, jobs %lld)",
            (long long)open_res, (long long)open_jobs);
    int64_t est_out = h_sql_count(
        db, "SELECT SUM(est_output) FROM estimate_stats WHERE route = 'claude'");
    int64_t real_out = h_sql_count(
        db, "SELECT SUM(real_output) FROM estimate_stats WHERE route = 'claude'");
    if (real_out > 0)
        printf("  output tokens reserved %lld for %lld generated (%.2fx; max_tokens would be "
               "%.2fx)\n",
               (long long)est_out, (long long)real_out, (double)est_out / (double)real_out,
               (double)AN_JOBS * MAX_TOKENS / (double)real_out);
    json_decref(s1);
    json_decref(s2);
    json_decref(s3);
    h_free_string_map(seen);
    free(sim_cfg);
    free((char *)cfg);
    int rc = h_summary("ledger");
    h_cleanup(rc != 0);
    return rc;
}
