/* bench/takeover - how fast a scheduler that lost its machine is replaced: SIGKILL mid-run, its
 * database deleted, a new scheduler on an empty disk that rebuilds the queue from the changelog
 * topic. With --keep-db the database stays (a plain crash and restart), for comparison.
 *
 * N jobs from T tenants go in through ingest at once against one simulated deployment whose
 * token limit lets about RATE jobs a second through, so most of them wait in the scheduler. When
 * a quarter of the results is in, the scheduler is killed (and its database files deleted) and a
 * new one started on the same config. Measured from outside:
 *   - kill -> "restored N unfinished jobs from the changelog" in its log (reading the changelog
 *     back and taking the jobs in again), or "scheduler started" with --keep-db;
 *   - kill -> the first dispatch the new scheduler makes (the first message on the dispatch
 *     topic issued after the kill, by its issued_ms);
 *   - jobs without a result (must be 0), results delivered twice, calls the provider saw twice,
 *     and the simulator's 429s (the rebuilt buckets start as if just used: 0 expected).
 * Writes bench/results/takeover-<unix time>.json. */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hmap.h"
#include "opts.h"
#include "sign.h"
#include "util.h"

enum { MINUTE_MS = 3000, RATE = 400, TOKENS_PER_JOB = 120, TENANTS_MAX = 64 };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench/takeover [--jobs N] [--tenants T] [--keep-db] [--quick] [--keep]\n"
            "                      [--help]\n"
            "\n"
            "Sends N jobs (default 20,000) from T tenants (default 16) through ingest against a\n"
            "deployment that lets about %d a second through, SIGKILLs the scheduler when a\n"
            "quarter of the results is in, deletes its database (not with --keep-db), starts a\n"
            "new one, and reports kill -> queue restored and kill -> first dispatch, with jobs\n"
            "lost, results twice, calls twice and 429s. Writes\n"
            "bench/results/takeover-<unix time>.json.\n"
            "\n"
            "  --jobs N     jobs, 1000 - 200000 (default 20000)\n"
            "  --tenants T  tenants the jobs are spread over, 1 - %d (default 16)\n"
            "  --keep-db    keep the database: a plain crash and restart, for comparison\n"
            "  --quick      4,000 jobs (over --jobs)\n"
            "  --keep       keep the run's directory (logs, store)\n"
            "  -h, --help   this text\n",
            RATE, TENANTS_MAX);
}

static const char *write_config(int sim_port, int tenants, char **sim_cfg, char **db)
{
    const char *dir = h_tmpdir();
    static char dbpath[512];
    snprintf(dbpath, sizeof dbpath, "%s/sluice.db", dir);
    *db = dbpath;
    long tpm = (long)RATE * TOKENS_PER_JOB * 60000 / MINUTE_MS;
    char sim[1024];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"deployments\": [{\"name\": \"sim-a\", \"rpm\": 1000000,"
             " \"tpm\": %ld, \"slices_per_minute\": 10, \"ttft_ms\": 50, \"ms_per_token\": 0,"
             " \"output_min\": 20, \"output_max\": 40}]}",
             MINUTE_MS, tpm);
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "any-bearer-token\n"));
    size_t cap = 8192 + (size_t)tenants * 256;
    char *cfg = malloc(cap);
    int n = snprintf(cfg, cap,
                     "{\"minute_ms\": %d, \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
                     " \"scheduler\": {\"db\": \"%s\", \"lease_ms\": 5000,"
                     "                 \"admin_listen\": \"\", \"metrics_listen\": \"\"},"
                     " \"ingest\": {\"metrics_listen\": \"\"},"
                     " \"dispatcher\": {\"metrics_listen\": \"\"},"
                     " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
                     "               \"public_key_file\": \"%s/dispatch.pub\"},"
                     " \"deployments\": [{\"name\": \"sim-a\","
                     "   \"base_url\": \"http://127.0.0.1:%d/sim-a/v1\", \"model\": \"m\","
                     "   \"api_key_file\": \"%s\", \"limits\": {\"rpm\": 1000000, \"tpm\": %ld},"
                     "   \"slices_per_minute\": 10, \"timeout_ms\": 5000, \"idempotent\": true}],"
                     " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim-a\"]}],"
                     " \"tenants\": [",
                     MINUTE_MS, dir, dbpath, dir, dir, sim_port, keyfile, tpm);
    for (int t = 0; t < tenants; t++)
        n += snprintf(cfg + n, cap - (size_t)n, "%s{\"name\": \"t%02d\"}", t ? ", " : "", t);
    n += snprintf(cfg + n, cap - (size_t)n, "], \"keys\": [");
    for (int t = 0; t < tenants; t++) {
        char key[64], hex[65];
        snprintf(key, sizeof key, "sk-bench-takeover-%02d", t);
        h_key_hash_hex(key, hex);
        n += snprintf(cfg + n, cap - (size_t)n, "%s{\"id\": \"k%02d\", \"tenant\": \"t%02d\","
                      " \"hash\": \"%s\"}", t ? ", " : "", t, t, hex);
    }
    snprintf(cfg + n, cap - (size_t)n, "]}");
    const char *path = strdup(h_write("sluice.json", cfg));
    free(cfg);
    free(keyfile);
    return path;
}

int main(int argc, char **argv)
{
    long long jobs = 20000, tenants = 16;
    int keep_db = 0, quick = 0, keep = 0;
    const b_opt_t opts[] = {{"jobs", B_OPT_LONG, &jobs, 1000, 200000},
                            {"tenants", B_OPT_LONG, &tenants, 1, TENANTS_MAX},
                            {"keep-db", B_OPT_FLAG, &keep_db, 0, 0},
                            {"quick", B_OPT_FLAG, &quick, 0, 0},
                            {"keep", B_OPT_FLAG, &keep, 0, 0},
                            {NULL, 0, NULL, 0, 0}};
    int prc = b_opt_parse("takeover", argc, argv, opts, usage);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if (quick)
        jobs = 4000;
    setvbuf(stdout, NULL, _IOLBF, 0);
    sl_crypto_init();
    int sim_port = h_free_port();
    char *sim_cfg = NULL, *db = NULL;
    const char *cfg = write_config(sim_port, (int)tenants, &sim_cfg, &db);
    printf("bench/takeover: %lld jobs from %lld tenants, about %d/s let through; the scheduler "
           "is killed at a quarter%s; files in %s\n",
           jobs, tenants, RATE, keep_db ? " (database kept)" : " and its database deleted",
           h_tmpdir());
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *results = h_consumer_from_start(st.bootstrap, "sluice.results");
    rd_kafka_t *dispatches = h_consumer_from_start(st.bootstrap, "sluice.dispatch");
    for (long long i = 0; i < jobs; i++) {
        char idem[32], key[64];
        snprintf(idem, sizeof idem, "takeover-%06lld", i);
        snprintf(key, sizeof key, "sk-bench-takeover-%02lld", i % tenants);
        h_request_fact(prod, idem, key, i, 64);
    }
    rd_kafka_flush(prod, 60000);

    sl_hmap_t *seen = sl_hmap_new();
    long long done = 0, twice = 0;
    int killed = 0;
    double kill_mono = -1, restored_mono = -1;
    int64_t kill_wall = 0, first_dispatch_wall = 0, admitted_at_kill = 0;
    double deadline = sl_mono_ms() + 60000 + 2.0 * (double)jobs;
    while (done < jobs && sl_mono_ms() < deadline) {
        if (!killed && done >= jobs / 4) {
            json_t *s = h_http_json(st.stats_url);
            admitted_at_kill = h_sim_total(s, "admitted");
            json_decref(s);
            char log[4200];
            snprintf(log, sizeof log, "%s/scheduler.log", h_tmpdir());
            long from = h_file_size(log);
            kill(st.sched, SIGKILL);
            kill_mono = sl_mono_ms();
            kill_wall = sl_now_ms();
            h_stop(st.sched, SIGKILL, 5000);
            if (!keep_db) {
                const char *suffix[] = {"", "-wal", "-shm", ".lock"};
                for (int i = 0; i < 4; i++) {
                    char path[600];
                    snprintf(path, sizeof path, "%s%s", db, suffix[i]);
                    unlink(path);
                }
            }
            st.sched = h_spawn("sluice-scheduler", "scheduler", cfg, NULL);
            killed = 1;
            restored_mono = h_wait_log(
                log, from, keep_db ? "scheduler started" : "restored from the changelog", 120000);
        }
        /* The first dispatch the new scheduler issued. */
        json_t *d = NULL;
        while (killed && first_dispatch_wall == 0 && h_poll_json(dispatches, 0, &d)) {
            int64_t issued = json_integer_value(json_object_get(d, "issued_ms"));
            if (issued >= kill_wall)
                first_dispatch_wall = issued;
            json_decref(d);
        }
        json_t *r = NULL;
        if (!h_poll_json(results, 100, &r))
            continue;
        const char *id = json_string_value(json_object_get(r, "job_id"));
        if (id != NULL) {
            if (sl_hmap_get(seen, id) != NULL) {
                twice++;
            } else {
                sl_hmap_put(seen, id, (void *)1);
                done++;
            }
        }
        json_decref(r);
    }
    json_t *stats = h_http_json(st.stats_url);
    int64_t admitted = h_sim_total(stats, "admitted"), replayed = h_sim_total(stats, "replayed");
    int64_t refused = h_sim_total(stats, "refused");
    json_decref(stats);
    double restored_s = restored_mono > 0 ? (restored_mono - kill_mono) / 1000.0 : -1;
    double first_s = first_dispatch_wall > 0 ? (double)(first_dispatch_wall - kill_wall) / 1000.0
                                             : -1;
    long long calls_twice = (long long)(replayed + admitted - jobs);
    printf("  kill -> %s: %.2f s; kill -> first dispatch of the new scheduler: %.2f s\n",
           keep_db ? "scheduler started" : "queue restored from the changelog", restored_s,
           first_s);
    printf("  jobs with a result %lld of %lld; results delivered twice %lld; calls the provider "
           "saw twice %lld; 429s %lld; calls before the kill %lld\n",
           done, jobs, twice, calls_twice, (long long)refused, (long long)admitted_at_kill);
    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(results);
    rd_kafka_destroy(results);
    rd_kafka_consumer_close(dispatches);
    rd_kafka_destroy(dispatches);
    int unclean = h_stack_down(&st);
    json_t *out = json_pack("{s:s, s:I, s:I, s:b, s:f, s:f, s:I, s:I, s:I, s:I, s:i}", "bench",
                            "takeover", "jobs", (json_int_t)jobs, "tenants",
                            (json_int_t)tenants, "database_kept", keep_db, "kill_to_restored_s",
                            restored_s, "kill_to_first_dispatch_s", first_s, "lost",
                            (json_int_t)(jobs - done), "results_twice", (json_int_t)twice,
                            "calls_twice", (json_int_t)calls_twice, "provider_429",
                            (json_int_t)refused, "unclean", unclean);
    char path[256];
    snprintf(path, sizeof path, "bench/results/takeover-%lld.json", (long long)time(NULL));
    if (json_dump_file(out, path, JSON_INDENT(2)) == 0)
        printf("  wrote %s\n", path);
    json_decref(out);
    sl_hmap_free(seen);
    free(sim_cfg);
    free((char *)cfg);
    h_cleanup(keep);
    return done == jobs && unclean == 0 && first_s >= 0 ? 0 : 1;
}
