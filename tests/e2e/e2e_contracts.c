/* e2e_contracts - workload contracts over real processes: a tenant submits more standard jobs
 * than its class queue holds and cancels some with `sluice cancel` while they wait, against a
 * slow simulated deployment (10 requests/s). Asserts: every job has exactly one result; jobs
 * past the queue's depth are rejected at once with queue_full (retryable, a retry-after);
 * the cancelled ones end `cancelled` and never reach the provider; the rest succeed; the
 * simulator refuses nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hmap.h"
#include "sign.h"
#include "util.h"

enum { JOBS = 60, MAX_QUEUE = 40, CANCELS = 15, MINUTE_MS = 3000 };

static const char *write_configs(int sim_port, char **sim_cfg)
{
    const char *dir = h_tmpdir();
    char h1[65];
    h_key_hash_hex("sk-e2e-contracts", h1);
    char sim[1024];
    /* 30 requests a 3-second minute: 10 a second, so the queue lasts a few seconds */
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"deployments\": [{\"name\": \"slow\", \"rpm\": 30,"
             " \"slices_per_minute\": 6, \"ttft_ms\": 10, \"ms_per_token\": 0.1,"
             " \"api_key\": \"e2e-provider-key\"}]}",
             MINUTE_MS);
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "e2e-provider-key\n"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %d,"
             " \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\", \"lease_ms\": 20000},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"classes\": {\"standard\": {\"max_queue\": %d}},"
             " \"deployments\": [{\"name\": \"slow\", \"model\": \"m\", \"api_key_file\": \"%s\","
             "   \"base_url\": \"http://127.0.0.1:%d/slow/v1\", \"limits\": {\"rpm\": 30},"
             "   \"slices_per_minute\": 6}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"slow\"]}],"
             " \"tenants\": [{\"name\": \"t1\"}],"
             " \"keys\": [{\"id\": \"k1\", \"tenant\": \"t1\", \"hash\": \"%s\"}]}",
             MINUTE_MS, dir, dir, dir, dir, MAX_QUEUE, keyfile, sim_port, h1);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

int main(void)
{
    sl_crypto_init();
    printf("e2e contracts: %d jobs into a queue of %d, %d cancelled while they wait\n", JOBS,
           MAX_QUEUE, CANCELS);
    int sim_port = h_free_port();
    char *sim_cfg = NULL;
    const char *cfg = write_configs(sim_port, &sim_cfg);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    for (int i = 0; i < JOBS; i++) {
        char idem[32], req[512];
        snprintf(idem, sizeof idem, "c-%03d", i);
        int n = snprintf(req, sizeof req,
                         "{\"idempotency_key\": \"%s\", \"api_key\": \"sk-e2e-contracts\","
                         " \"route\": \"chat\", \"request\": {\"messages\": [{\"role\": \"user\","
                         " \"content\": \"question %d\"}], \"max_tokens\": 20}}",
                         idem, i);
        h_produce(prod, "sluice.requests", idem, req, (size_t)n);
    }
    rd_kafka_flush(prod, 30000);
    /* Cancel the last queued jobs (c-025..c-039) while the first ones are being served. */
    const char *args[CANCELS + 4];
    char keys[CANCELS][16];
    int a = 0;
    args[a++] = "cancel";
    args[a++] = "--api-key";
    args[a++] = "sk-e2e-contracts";
    for (int i = 0; i < CANCELS; i++) {
        snprintf(keys[i], sizeof keys[i], "c-%03d", MAX_QUEUE - CANCELS + i);
        args[a++] = keys[i];
    }
    args[a] = NULL;
    int rc = h_run("sluice", "cli-cancel", cfg, args, 30000);
    h_check(rc == 0, "sluice cancel sent its requests (exit %d)", rc);

    sl_hmap_t *seen = sl_hmap_new();
    int results = 0, ok = 0, cancelled = 0, full = 0, full_clear = 0, other = 0, dup = 0;
    int answered_again = 0;
    int cancelled_right = 0, target_other = 0;
    double deadline = sl_mono_ms() + 60000;
    while (results < JOBS && sl_mono_ms() < deadline) {
        json_t *r = NULL;
        if (!h_poll_json(cons, 200, &r))
            continue;
        const char *id = json_string_value(json_object_get(r, "job_id"));
        const char *idem = json_string_value(json_object_get(r, "idempotency_key"));
        const char *status = json_string_value(json_object_get(r, "status"));
        json_t *err = json_object_get(r, "error");
        const char *reason = json_string_value(json_object_get(err, "reason"));
        if (id == NULL || idem == NULL || status == NULL) {
            json_decref(r);
            continue;
        }
        const char *first = sl_hmap_get(seen, id);
        if (first != NULL) {
            /* A cancel of a job that had already finished is answered with its result again:
             * the same outcome, never another. */
            int target = atoi(idem + 2) >= MAX_QUEUE - CANCELS && atoi(idem + 2) < MAX_QUEUE;
            if (!target || strcmp(first, status) != 0)
                dup++;
            else
                answered_again++;
            json_decref(r);
            continue;
        }
        sl_hmap_put(seen, id, strdup(status));
        results++;
        int n = atoi(idem + 2);
        int target = n >= MAX_QUEUE - CANCELS && n < MAX_QUEUE;
        target_other += target && strcmp(status, "cancelled") != 0;
        if (strcmp(status, "succeeded") == 0) {
            ok++;
        } else if (strcmp(status, "cancelled") == 0) {
            cancelled++;
            cancelled_right += target;
        } else if (reason != NULL && strcmp(reason, "queue_full") == 0) {
            full++;
            full_clear += json_is_true(json_object_get(err, "retryable")) &&
                          json_integer_value(json_object_get(err, "retry_after_ms")) > 0;
        } else {
            other++;
            printf("  %s: %s %s\n", idem, status, reason ? reason : "");
        }
        json_decref(r);
    }
    json_t *stats = h_http_json(st.stats_url);
    int64_t admitted = h_sim_total(stats, "admitted");
    h_check(results == JOBS && dup == 0,
            "every job has exactly one outcome (%d, %d repeated; %d cancels of finished jobs "
            "answered with the same result again)",
            results, dup, answered_again);
    /* Jobs reach the scheduler in partition order, not submission order, and the first ones
     * are served while the rest arrive: which ones find the queue full varies, not that some
     * do. */
    h_check(full > 0 && full <= JOBS - MAX_QUEUE && full_clear == full,
            "jobs past the queue's depth were refused at once with queue_full, retryable with "
            "a retry-after (%d, %d clear)",
            full, full_clear);
    /* Only the jobs named were cancelled; a cancel misses a job only when it was refused
     * (queue full) or already sent, and the queue lasts seconds here. */
    h_check(cancelled_right == cancelled && cancelled + target_other == CANCELS &&
                cancelled >= CANCELS / 3,
            "the jobs cancelled while queued ended cancelled (%d of %d named; the others were "
            "refused or already sent)",
            cancelled, CANCELS);
    h_check(other == 0 && ok + cancelled + full == JOBS, "the rest succeeded (%d)", ok);
    h_check(admitted == ok, "the provider saw exactly the succeeded jobs (%lld)",
            (long long)admitted);
    h_check(h_sim_total(stats, "refused") == 0, "the simulator refused nothing");
    json_decref(stats);
    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    int unclean = h_stack_down(&st);
    h_check(unclean == 0, "every process stopped cleanly on SIGTERM (%d did not)", unclean);
    h_free_string_map(seen);
    free(sim_cfg);
    free((char *)cfg);
    int status = h_summary("contracts");
    h_cleanup(status != 0);
    return status;
}
