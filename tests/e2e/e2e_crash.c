/* e2e_crash - nothing is lost when processes die, and no call runs twice. 1,200 jobs run through
 * the real stack; the dispatcher is killed with SIGKILL a third of the way in (with calls in
 * flight) and started again, then the scheduler is killed with SIGKILL two thirds in and started
 * again. The deployment is not idempotent (sluice may not count on the provider to run a
 * repeated Idempotency-Key once), so the calls the killed dispatcher held fail as
 * dispatcher_lost as soon as its successor's heartbeat shows it dead, rather than being sent
 * again. Asserts every job ends succeeded or failed as dispatcher_lost, some did (the kill came
 * with calls in flight), the provider saw no request twice, no job has conflicting results, the
 * simulator refused nothing, and no reservation is left open. Duplicate deliveries of a result
 * (at-least-once) are counted. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hmap.h"
#include "sign.h"
#include "util.h"

enum { JOBS = 1200, MINUTE_MS = 3000, TPM = 60000 };

static const char *write_configs(int sim_port, char **sim_cfg, char **db)
{
    const char *dir = h_tmpdir();
    char hex[65];
    h_key_hash_hex("sk-e2e-crash-key", hex);
    static char dbpath[512];
    snprintf(dbpath, sizeof dbpath, "%s/sluice.db", dir);
    *db = dbpath;
    char sim[1024];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"deployments\": [{\"name\": \"sim-a\", \"rpm\": 100000,"
             " \"tpm\": %d, \"slices_per_minute\": 10, \"ttft_ms\": 150, \"ms_per_token\": 1,"
             " \"output_min\": 20, \"output_max\": 80}]}",
             MINUTE_MS, TPM);
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "any-bearer-token\n"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %d, \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s\", \"lease_ms\": 3000, \"max_attempts\": 10},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": [{\"name\": \"sim-a\","
             "   \"base_url\": \"http://127.0.0.1:%d/sim-a/v1\", \"model\": \"m\","
             "   \"api_key_file\": \"%s\", \"limits\": {\"rpm\": 100000, \"tpm\": %d},"
             "   \"slices_per_minute\": 10, \"timeout_ms\": 2000}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim-a\"]}],"
             " \"tenants\": [{\"name\": \"solo\"}],"
             " \"keys\": [{\"id\": \"k\", \"tenant\": \"solo\", \"hash\": \"%s\"}]}",
             MINUTE_MS, dir, dbpath, dir, dir, sim_port, keyfile, TPM, hex);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

int main(void)
{
    sl_crypto_init();
    printf("e2e crash: %d jobs; SIGKILL the dispatcher, then the scheduler, mid-run\n", JOBS);
    int sim_port = h_free_port();
    char *sim_cfg = NULL, *db = NULL;
    const char *cfg = write_configs(sim_port, &sim_cfg, &db);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);

    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    for (int i = 0; i < JOBS; i++) {
        char idem[32];
        snprintf(idem, sizeof idem, "crash-%05d", i);
        h_request_fact(prod, idem, "sk-e2e-crash-key", i, 100);
    }
    rd_kafka_flush(prod, 30000);

    h_results_t res;
    h_results_init(&res);
    int done = 0, lost = 0;
    int killed_disp = 0, killed_sched = 0, inflight_at_kill = -1;
    double deadline = sl_mono_ms() + 240000;
    while (done < JOBS && sl_mono_ms() < deadline) {
        if (!killed_disp && done >= JOBS / 3) {
            json_t *s = h_http_json(st.stats_url);
            inflight_at_kill = (int)h_sim_total(s, "in_flight");
            json_decref(s);
            kill(st.disp, SIGKILL);
            h_stop(st.disp, SIGKILL, 5000);
            printf("  dispatcher killed at %d/%d results (%d calls in flight at the simulator)\n",
                   done, JOBS, inflight_at_kill);
            usleep(500 * 1000);
            st.disp = h_spawn("sluice-dispatcher", "dispatcher", cfg, NULL);
            killed_disp = 1;
        }
        if (!killed_sched && done >= 2 * JOBS / 3) {
            h_stop(st.sched, SIGKILL, 5000);
            printf("  scheduler killed at %d/%d results\n", done, JOBS);
            usleep(500 * 1000);
            st.sched = h_spawn("sluice-scheduler", "scheduler", cfg, NULL);
            killed_sched = 1;
        }
        json_t *r = NULL;
        if (!h_poll_json(cons, 200, &r))
            continue;
        if (h_results_take(&res, r)) {
            const char *reason =
                json_string_value(json_object_get(json_object_get(r, "error"), "reason"));
            lost += reason != NULL && strcmp(reason, "dispatcher_lost") == 0;
        }
        done = res.done;
        json_decref(r);
    }
    json_t *stats = h_http_json(st.stats_url);
    h_check(killed_disp && inflight_at_kill > 0,
            "the dispatcher was killed with calls in flight (%d)", inflight_at_kill);
    h_check(killed_sched, "the scheduler was killed and restarted");
    h_check(done == JOBS, "no job lost: %d/%d have a result", done, JOBS);
    h_check(res.ok + lost == JOBS,
            "every job succeeded (%d) or failed as dispatcher_lost (%d) of %d", res.ok, lost,
            JOBS);
    h_check(lost > 0, "the calls the killed dispatcher held failed as dispatcher_lost (%d)", lost);
    h_check(res.conflicting == 0, "no job has conflicting results (%d)", res.conflicting);
    printf("  duplicate result deliveries (at-least-once, same status): %d\n", res.duplicates);
    int64_t refused = h_sim_total(stats, "refused");
    h_check(stats != NULL && refused == 0, "the simulator refused zero requests (%lld)",
            (long long)refused);
    int64_t replayed = h_sim_total(stats, "replayed");
    h_check(stats != NULL && replayed == 0,
            "the provider saw no request twice (%lld repeated idempotency keys; %lld admitted)",
            (long long)replayed, (long long)h_sim_total(stats, "admitted"));
    json_decref(stats);
    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    int unclean = h_stack_down(&st);
    h_check(unclean == 0, "every process stopped cleanly on SIGTERM (%d did not)", unclean);
    int64_t open_res = h_sql_count(db, "SELECT COUNT(*) FROM reservations WHERE state = 'open'");
    int64_t open_jobs = h_sql_count(db, "SELECT COUNT(*) FROM jobs WHERE state <> 'done'");
    h_check(open_res == 0, "no reservation left open (%lld)", (long long)open_res);
    h_check(open_jobs == 0, "no job left unfinished in the store (%lld)", (long long)open_jobs);
    h_results_free(&res);
    free(sim_cfg);
    free((char *)cfg);
    int rc = h_summary("crash");
    h_cleanup(rc != 0);
    return rc;
}
