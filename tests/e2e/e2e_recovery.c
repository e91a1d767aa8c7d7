/* e2e_recovery - back in seconds after a crash. 5,000 jobs arrive at a steady rate against a
 * strict provider (TPM binding, over-limit calls refused with 429) while each daemon is killed
 * with SIGKILL twice and started again at once: dispatcher, scheduler, ingest, dispatcher,
 * scheduler, ingest, one kill every KILL_EVERY_MS.
 *
 * The offered load is about two thirds of the provider's limit, so the queue stays short and any
 * stall of the pipeline shows as a stretch without provider calls. The simulator's count of
 * admitted calls is sampled every few milliseconds; for each kill the figure is the longest
 * stretch without a new call that overlaps the RECOVERY_MS after it.
 *
 * The deployment is idempotent (the simulator runs a repeated Idempotency-Key once), so the calls
 * a killed dispatcher had under way are sent again as soon as its restarted successor's first
 * heartbeat shows it dead. The lease is the default 180 s: before heartbeats, those calls waited
 * for it and the run took about 200 s; the run must now end within MAX_RUN_MS.
 *
 * Asserts: 0 jobs lost (every job has a result), 0 conflicting results, every job succeeded,
 * no 429 from the provider, the run over within MAX_RUN_MS, and the longest stretch after each
 * kill <= MAX_GAP_MS. The calls the provider deduplicated by idempotency key (those a dead
 * dispatcher had made, sent again) are printed. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hmap.h"
#include "sign.h"
#include "util.h"

enum {
    JOBS = 5000,
    RATE = 125,       /* jobs a second offered */
    MINUTE_MS = 6000, /* a simulated minute */
    TPM = 70000,      /* about 1.5 x the offered tokens (60 a job) */
    KILL_FIRST_MS = 5000,
    KILL_EVERY_MS = 5500,
    KILLS = 6,
    RECOVERY_MS = 5000,
    MAX_GAP_MS = 5000,
    MAX_RUN_MS = 70000, /* 40 s of arrivals; a call left to its lease would add 180 s */
    MAX_SAMPLES = 1 << 16
};

static const char *write_configs(int sim_port, char **sim_cfg, char **db)
{
    const char *dir = h_tmpdir();
    char hex[65];
    h_key_hash_hex("sk-e2e-recovery", hex);
    static char dbpath[512];
    snprintf(dbpath, sizeof dbpath, "%s/sluice.db", dir);
    *db = dbpath;
    char sim[1024];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"deployments\": [{\"name\": \"sim-a\", \"rpm\": 100000,"
             " \"tpm\": %d, \"slices_per_minute\": 60, \"ttft_ms\": 100, \"ms_per_token\": 2,"
             " \"output_min\": 20, \"output_max\": 50}]}",
             MINUTE_MS, TPM);
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "any-bearer-token\n"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %d, \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s\", \"admin_listen\": \"\", \"metrics_listen\": \"\"},"
             " \"ingest\": {\"metrics_listen\": \"\"},"
             " \"dispatcher\": {\"metrics_listen\": \"\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": [{\"name\": \"sim-a\","
             "   \"base_url\": \"http://127.0.0.1:%d/sim-a/v1\", \"model\": \"m\","
             "   \"api_key_file\": \"%s\", \"limits\": {\"rpm\": 100000, \"tpm\": %d},"
             "   \"slices_per_minute\": 60, \"timeout_ms\": 5000, \"idempotent\": true}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim-a\"]}],"
             " \"tenants\": [{\"name\": \"solo\"}],"
             " \"keys\": [{\"id\": \"k\", \"tenant\": \"solo\", \"hash\": \"%s\"}]}",
             MINUTE_MS, dir, dbpath, dir, dir, sim_port, keyfile, TPM, hex);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

/* When the simulator's admitted count was seen to rise: one entry per rise. */
typedef struct {
    double at_ms[MAX_SAMPLES];
    int n;
    int64_t last;
} calls_t;

static void sample(calls_t *c, const char *stats_url, double now)
{
    json_t *s = h_http_json(stats_url);
    if (s == NULL)
        return;
    int64_t admitted = h_sim_total(s, "admitted");
    json_decref(s);
    if (admitted > c->last && c->n < MAX_SAMPLES)
        c->at_ms[c->n++] = now;
    if (admitted > c->last)
        c->last = admitted;
}

/* The longest stretch between two observed calls that overlaps [from, from + RECOVERY_MS]. */
static double longest_gap(const calls_t *c, double from, double end)
{
    double worst = 0, prev = -1;
    for (int i = 0; i < c->n; i++) {
        double t = c->at_ms[i];
        if (prev >= 0 && t >= from && prev <= from + RECOVERY_MS && t - prev > worst)
            worst = t - prev;
        prev = t;
    }
    /* No call since: the stretch runs to the end of the run. */
    if (prev >= 0 && prev <= from + RECOVERY_MS && end - prev > worst)
        worst = end - prev;
    return worst;
}

static pid_t *victim(h_stack_t *st, int k, const char **name, const char **prog)
{
    static const char *const names[] = {"dispatcher", "scheduler", "ingest"};
    static const char *const progs[] = {"sluice-dispatcher", "sluice-scheduler", "sluice-ingest"};
    *name = names[k % 3];
    *prog = progs[k % 3];
    return k % 3 == 0 ? &st->disp : k % 3 == 1 ? &st->sched : &st->ingest;
}

int main(void)
{
    sl_crypto_init();
    printf("e2e recovery: %d jobs at %d/s; SIGKILL each daemon twice, restarted at once\n", JOBS,
           RATE);
    int sim_port = h_free_port();
    char *sim_cfg = NULL, *db = NULL;
    const char *cfg = write_configs(sim_port, &sim_cfg, &db);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");

    /* Warm up: the first job's result means every daemon is up and in its groups. */
    static calls_t calls;
    h_results_t res;
    h_results_init(&res);
    int sent = 0, done = 0, kills = 0;
    double kill_at[KILLS];
    const char *kill_name[KILLS];
    double start = -1, deadline = sl_mono_ms() + 240000;
    while (done < JOBS && sl_mono_ms() < deadline) {
        double now = sl_mono_ms();
        int due = start < 0 ? 1 : (int)((now - start) * RATE / 1000.0) + 1;
        while (sent < JOBS && sent < due) {
            char req[512], idem[32];
            snprintf(idem, sizeof idem, "rec-%05d", sent);
            int n = snprintf(req, sizeof req,
                             "{\"idempotency_key\": \"%s\", \"api_key\": \"sk-e2e-recovery\","
                             " \"route\": \"chat\", \"request\": {\"messages\": [{\"role\":"
                             " \"user\", \"content\": \"Fact %d.\"}], \"max_tokens\": 50}}",
                             idem, sent);
            h_produce(prod, "sluice.requests", idem, req, (size_t)n);
            sent++;
        }
        rd_kafka_poll(prod, 0);
        if (start >= 0 && kills < KILLS && now - start >= KILL_FIRST_MS + kills * KILL_EVERY_MS) {
            const char *name = NULL, *prog = NULL;
            pid_t *pid = victim(&st, kills, &name, &prog);
            h_stop(*pid, SIGKILL, 5000);
            kill_at[kills] = sl_mono_ms();
            kill_name[kills] = name;
            *pid = h_spawn(prog, name, cfg, NULL);
            printf("  %.1f s: %s killed and started again (%d/%d results)\n",
                   (kill_at[kills] - start) / 1000, name, done, JOBS);
            kills++;
        }
        if (start >= 0)
            sample(&calls, st.stats_url, sl_mono_ms());
        json_t *r = NULL;
        if (!h_poll_json(cons, 5, &r))
            continue;
        do {
            if (h_results_take(&res, r) && res.done - res.ok <= 5 &&
                strcmp(json_string_value(json_object_get(r, "status")), "succeeded") != 0)
                printf("  job %s: %s\n", json_string_value(json_object_get(r, "job_id")),
                       json_string_value(json_object_get(r, "status")));
            done = res.done;
            json_decref(r);
            r = NULL;
            if (start < 0) {
                start = sl_mono_ms();
                printf("  first result: the stack is up; the run starts\n");
            }
        } while (h_poll_json(cons, 0, &r));
    }
    double end = sl_mono_ms();
    json_t *stats = h_http_json(st.stats_url);
    printf("  %d results in %.1f s\n", done, (end - start) / 1000);
    h_check(kills == KILLS, "each daemon was killed twice (%d kills)", kills);
    h_check(end - start <= MAX_RUN_MS,
            "the run ended in %.1f s (bar %.0f s): no call waited for its 180 s lease",
            (end - start) / 1000, MAX_RUN_MS / 1000.0);
    for (int k = 0; k < kills; k++) {
        double gap = longest_gap(&calls, kill_at[k], end);
        h_check(gap <= MAX_GAP_MS,
                "after the %s's kill at %.1f s: longest stretch without a provider call %.0f ms"
                " (bar %d ms)",
                kill_name[k], (kill_at[k] - start) / 1000, gap, MAX_GAP_MS);
    }
    h_check(done == JOBS, "no job lost: %d/%d have a result", done, JOBS);
    h_check(res.ok == JOBS, "every job succeeded (%d/%d)", res.ok, JOBS);
    h_check(res.conflicting == 0, "no job has conflicting results (%d)", res.conflicting);
    printf("  duplicate result deliveries (at-least-once, same status): %d\n", res.duplicates);
    int64_t refused = h_sim_total(stats, "refused");
    /* A restarted scheduler starts its token buckets empty, less what it admitted after their
     * last save (those calls may reach the provider in its current slice): before that, 3 - 5
     * calls were refused after its restarts in some runs. The 1 - 2 refusals seen later on a
     * loaded machine came from the simulator itself stalling (it now runs uninstrumented in
     * the sanitizer phase) and from calls held up in the dispatcher past the stale cutoff
     * (now stopped before they leave). */
    h_check(stats != NULL && refused == 0, "the provider answered %lld calls with 429 (bar 0)",
            (long long)refused);
    if (refused > 0)
        printf("  refused by: tokens %lld, requests %lld, the rolling minute %lld\n",
               (long long)h_sim_total(stats, "refused_tokens_dim"),
               (long long)h_sim_total(stats, "refused_requests_dim"),
               (long long)h_sim_total(stats, "refused_rolling"));
    printf("  simulator: admitted %lld, repeated calls deduplicated by idempotency key %lld\n",
           (long long)h_sim_total(stats, "admitted"), (long long)h_sim_total(stats, "replayed"));
    json_decref(stats);
    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    int unclean = h_stack_down(&st);
    h_check(unclean == 0, "every process stopped cleanly on SIGTERM (%d did not)", unclean);
    h_results_free(&res);
    free(sim_cfg);
    free((char *)cfg);
    int rc = h_summary("recovery");
    h_cleanup(rc != 0);
    return rc;
}
