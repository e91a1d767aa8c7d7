/* bench/queued - what queued jobs cost the scheduler: resident memory per queued job, and how
 * long a restart takes before the queue is back in memory, ready to schedule.
 *
 * A stack on the dev broker whose one deployment takes one request an hour, so every job but
 * the first stays queued. N batch
 * jobs (signed as ingest signs them, about 600 bytes each) go straight onto sluice.jobs in
 * waves, each wave waiting until the scheduler has taken in all but one wave before it (the dev
 * broker keeps only about 5 MB a partition, so a producer far ahead of the reader would lose
 * jobs; the scheduler's sluice_kafka_input_lost_total must stay 0). The scheduler's RSS is read
 * from /proc at the start and once each checkpoint's jobs are all queued
 * (sluice_scheduler_queue_depth);
 * per queued job is (RSS - RSS at the start) / jobs, and it is split into the pages mapped
 * from the store's file (RssFile: read through SQLite's memory map, the kernel's to drop),
 * SQLite's heap (its page cache, at most 16 MiB for the writer: the scheduler's
 * sluice_scheduler_store_memory_bytes) and the rest, the jobs' own structures in the scheduler.
 * Then the scheduler is stopped with SIGTERM
 * and started again on the same store: the figure is the time from its start to its log's
 * "restored N unfinished jobs" line (the jobs are in memory and the loop begins), and to its
 * metrics showing them all queued. Writes bench/results/queued-<unix time>.json.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "opts.h"
#include "sign.h"
#include "util.h"

enum { WAVE = 5000, KEYS = 64, CHECKPOINTS_MAX = 8 };

/* The scheduler's memory at one moment, in bytes: resident, of it mapped from files, and of
 * the rest SQLite's heap. */
typedef struct {
    double rss, file, sqlite;
} mem_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench/queued [--jobs N] [--quick] [--keep] [--help]\n"
            "\n"
            "Queues N batch jobs (default 1,000,000) behind a deployment that takes one request\n"
            "an hour, on a fresh stack, and\n"
            "reports the scheduler's resident memory per queued job at 100,000 and at N, then\n"
            "restarts the scheduler on the same store and reports how long until the jobs are\n"
            "restored (its log) and all queued again (its metrics). Writes\n"
            "bench/results/queued-<unix time>.json.\n"
            "\n"
            "  --jobs N   jobs to queue, 1000 - 5000000 (default 1000000)\n"
            "  --quick    100,000 jobs (over --jobs)\n"
            "  --keep     keep the run's directory (logs, store)\n"
            "  -h, --help this text\n");
}

static char metrics_url[64];

static const char *write_config(int sim_port, int metrics_port, char **sim_cfg)
{
    const char *dir = h_tmpdir();
    char hex[65];
    h_key_hash_hex("sk-bench-queued", hex);
    char sim[512];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": 60000, \"deployments\": [{\"name\": \"sim-a\", \"rpm\": 100000,"
             " \"tpm\": 10000000}]}");
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "any-bearer-token\n"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": 3600000, \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\", \"admin_listen\": \"\","
             "   \"metrics_listen\": \"127.0.0.1:%d\", \"max_queued\": 10000000},"
             " \"ingest\": {\"metrics_listen\": \"\"}, \"dispatcher\": {\"metrics_listen\": \"\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"classes\": {\"batch\": {\"max_queue\": 10000000}},"
             " \"deployments\": [{\"name\": \"sim-a\","
             "   \"base_url\": \"http://127.0.0.1:%d/sim-a/v1\", \"model\": \"m\","
             "   \"api_key_file\": \"%s\", \"limits\": {\"rpm\": 1},"
             "   \"slices_per_minute\": 1}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim-a\"]}],"
             " \"tenants\": [{\"name\": \"bulk\"}],"
             " \"keys\": [{\"id\": \"k\", \"tenant\": \"bulk\", \"hash\": \"%s\"}]}",
             dir, dir, metrics_port, dir, dir, sim_port, keyfile, hex);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

/* A series' value in the scheduler's metrics, or -1 when it cannot be read. */
static double metric(const char *series)
{
    char *text = h_http_text(metrics_url);
    double v = h_metrics_sample(text, series);
    free(text);
    return v;
}

/* Waits until the scheduler has taken in at least n jobs (queued, or the one leased) up to
 * timeout_ms; returns how many it has. */
static double wait_held(double n, int timeout_ms)
{
    double held = -1;
    for (double until = sl_mono_ms() + timeout_ms; sl_mono_ms() < until; usleep(100 * 1000)) {
        double queued = metric("sluice_scheduler_queue_depth{route=\"chat\",class=\"batch\"}");
        double leased = metric("sluice_scheduler_leases_in_flight");
        double done = metric("sluice_scheduler_results_total{status=\"succeeded\"}");
        held = queued >= 0 ? queued + (leased > 0 ? leased : 0) + (done > 0 ? done : 0) : -1;
        if (held >= n)
            break;
    }
    return held;
}

/* Whether the queue depth reached n within timeout_ms. */
static mem_t mem_of(pid_t pid)
{
    double sq = metric("sluice_scheduler_store_memory_bytes");
    return (mem_t){.rss = h_rss_kb(pid) * 1024.0,
                   .file = h_rss_file_kb(pid) * 1024.0,
                   .sqlite = sq > 0 ? sq : 0};
}

/* Per queued job, from m0 to m: {resident, file-backed, SQLite's heap, the rest}. */
static void per_job(mem_t m0, mem_t m, double jobs, double out[4])
{
    out[0] = (m.rss - m0.rss) / jobs;
    out[1] = (m.file - m0.file) / jobs;
    out[2] = (m.sqlite - m0.sqlite) / jobs;
    out[3] = out[0] - out[1] - out[2];
}

static void print_mem(const char *what, mem_t m0, mem_t m, double jobs)
{
    double pj[4];
    per_job(m0, m, jobs, pj);
    printf("  %s: scheduler RSS %.1f MiB, %.0f B a queued job: %.0f B mapped from the store's "
           "file, %.0f B SQLite's heap (%.1f MiB now), %.0f B the scheduler's own\n",
           what, m.rss / 1048576.0, pj[0], pj[1], pj[2], m.sqlite / 1048576.0, pj[3]);
}

static json_t *mem_json(mem_t m0, mem_t m, double jobs)
{
    double pj[4];
    per_job(m0, m, jobs, pj);
    return json_pack("{s:f, s:f, s:f, s:f, s:f}", "rss_mib", m.rss / 1048576.0,
                     "bytes_per_queued_job", pj[0], "file_bytes_per_queued_job", pj[1],
                     "sqlite_bytes_per_queued_job", pj[2], "own_bytes_per_queued_job", pj[3]);
}

static int queued_metric_at_least(double n, int timeout_ms)
{
    for (double until = sl_mono_ms() + timeout_ms; sl_mono_ms() < until; usleep(50 * 1000)) {
        if (metric("sluice_scheduler_queue_depth{route=\"chat\",class=\"batch\"}") >= n)
            return 1;
    }
    return 0;
}

static void produce_jobs(rd_kafka_t *prod, long long from, long long to)
{
    char msg[1024], key[32];
    long long now = (long long)sl_now_ms();
    for (long long i = from; i < to; i++) {
        int len = snprintf(
            msg, sizeof msg,
            "{\"v\": 1, \"job_id\": \"queued-%lld\", \"idempotency_key\": \"queued-%lld\","
            " \"tenant\": \"bulk\", \"app\": \"default\", \"env\": \"prod\", \"key_id\": \"k\","
            " \"route\": \"chat\", \"class\": \"batch\", \"submitted_ms\": %lld,"
            " \"deadline_ms\": %lld, \"estimate\": {\"input\": 40, \"output\": 200, \"total\": "
            "240},"
            " \"request\": {\"messages\": [{\"role\": \"user\", \"content\": \"Summarise record "
            "%lld"
            " of the nightly backfill in three sentences, naming its customer, its region and the"
            " anomaly it was flagged for.\"}], \"max_tokens\": 200}}",
            i, i, now, now + 86400000LL, i);
        /* Spread over KEYS message keys (so partitions): the scheduler does not read the key. */
        snprintf(key, sizeof key, "bulk-%lld", i % KEYS);
        h_produce_as(prod, "ingest", "sluice.jobs", key, msg, (size_t)len);
    }
    rd_kafka_flush(prod, 60000);
}

int main(int argc, char **argv)
{
    long long jobs = 1000000;
    int quick = 0, keep = 0;
    const b_opt_t opts[] = {{"jobs", B_OPT_LONG, &jobs, 1000, 5000000},
                            {"quick", B_OPT_FLAG, &quick, 0, 0},
                            {"keep", B_OPT_FLAG, &keep, 0, 0},
                            {NULL, 0, NULL, 0, 0}};
    int prc = b_opt_parse("queued", argc, argv, opts, usage);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if (quick)
        jobs = 100000;
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress as it comes, also into a file */
    sl_crypto_init();
    int sim_port = h_free_port(), metrics_port = h_free_port();
    snprintf(metrics_url, sizeof metrics_url, "http://127.0.0.1:%d/metrics", metrics_port);
    char *sim_cfg = NULL;
    const char *cfg = write_config(sim_port, metrics_port, &sim_cfg);
    printf("bench/queued: %lld batch jobs, one request an hour; files in %s\n", jobs, h_tmpdir());
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    if (wait_held(0, 30000) < 0) {
        fprintf(stderr, "the scheduler's metrics did not answer\n");
        h_stack_down(&st);
        return 1;
    }
    usleep(1000 * 1000);
    mem_t m0 = mem_of(st.sched);

    long long checkpoints[CHECKPOINTS_MAX];
    int ncp = 0;
    if (jobs > 100000)
        checkpoints[ncp++] = 100000;
    checkpoints[ncp++] = jobs;
    mem_t mem_at[CHECKPOINTS_MAX];
    double fill_s[CHECKPOINTS_MAX];
    rd_kafka_t *prod = h_producer(st.bootstrap);
    double t0 = sl_mono_ms();
    long long sent = 0;
    int broken = 0;
    for (int c = 0; c < ncp && !broken; c++) {
        while (sent < checkpoints[c] && !broken) {
            long long next = sent + WAVE < checkpoints[c] ? sent + WAVE : checkpoints[c];
            produce_jobs(prod, sent, next);
            sent = next;
            /* All but the wave just sent are in before the next goes. */
            double want = (double)(sent - WAVE > 0 ? sent - WAVE : 0);
            if (wait_held(want, 120000) < want)
                broken = 1;
        }
        if (broken || wait_held((double)checkpoints[c], 120000) < (double)checkpoints[c]) {
            broken = 1;
            break;
        }
        fill_s[c] = (sl_mono_ms() - t0) / 1000.0;
        usleep(1000 * 1000); /* settle */
        mem_at[c] = mem_of(st.sched);
        char what[96];
        snprintf(what, sizeof what, "%lld queued after %.1f s", checkpoints[c], fill_s[c]);
        print_mem(what, m0, mem_at[c], (double)checkpoints[c]);
    }
    rd_kafka_destroy(prod);
    double lost = metric("sluice_kafka_input_lost_total{topic=\"sluice.jobs\"}");
    double held = wait_held(0, 1000);
    if (broken) {
        printf("  BROKEN: the scheduler holds %.0f of %lld jobs sent (input lost on the broker: "
               "%g)\n",
               held, sent, lost < 0 ? 0 : lost);
        h_stack_down(&st);
        h_cleanup(1);
        return 1;
    }

    /* Restart on the same store. */
    double queued_before = metric("sluice_scheduler_queue_depth{route=\"chat\",class=\"batch\"}");
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/scheduler.log", h_tmpdir());
    double stop0 = sl_mono_ms();
    int stopped = h_stop(st.sched, SIGTERM, 120000);
    double stop_s = (sl_mono_ms() - stop0) / 1000.0;
    long log_from = h_file_size(log);
    double start = sl_mono_ms();
    st.sched = h_spawn("sluice-scheduler", "scheduler", cfg, NULL);
    double restored = h_wait_log(log, log_from, "restored ", 300000);
    /* The jobs queued before the stop (the one sent, if it was, is not queued again). */
    double all_held = queued_metric_at_least(queued_before, 300000) ? sl_mono_ms() : -1;
    usleep(1000 * 1000);
    mem_t m_restart = mem_of(st.sched);
    double restored_s = restored > 0 ? (restored - start) / 1000.0 : -1;
    double held_s = all_held > 0 ? (all_held - start) / 1000.0 : -1;
    printf("  stop (SIGTERM) %.1f s (status %d); restart -> jobs restored %.2f s, -> all %.0f "
           "queued in its metrics %.2f s (metrics are refreshed once a second)\n",
           stop_s, stopped, restored_s, queued_before, held_s);
    print_mem("after the restart", m0, m_restart, (double)jobs);
    printf("  input lost on the broker: %g; scheduler RSS at the start %.1f MiB\n",
           lost < 0 ? 0 : lost, m0.rss / 1048576.0);
    int unclean = h_stack_down(&st);

    json_t *out = json_pack(
        "{s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:f}", "bench", "queued", "jobs",
        (json_int_t)jobs, "rss_start_mib", m0.rss / 1048576.0, "rss_end_mib",
        mem_at[ncp - 1].rss / 1048576.0, "bytes_per_queued_job",
        (mem_at[ncp - 1].rss - m0.rss) / (double)jobs, "restart_to_restored_s", restored_s,
        "restart_to_all_held_s", held_s, "stop_s", stop_s, "unclean", unclean, "input_lost",
        lost < 0 ? 0 : lost);
    json_t *cps = json_array();
    for (int c = 0; c < ncp; c++) {
        json_t *cp = mem_json(m0, mem_at[c], (double)checkpoints[c]);
        json_object_set_new(cp, "queued", json_integer((json_int_t)checkpoints[c]));
        json_object_set_new(cp, "fill_s", json_real(fill_s[c]));
        json_array_append_new(cps, cp);
    }
    json_object_set_new(out, "checkpoints", cps);
    json_object_set_new(out, "after_restart", mem_json(m0, m_restart, (double)jobs));
    char path[128];
    snprintf(path, sizeof path, "bench/results/queued-%lld.json", (long long)time(NULL));
    if (json_dump_file(out, path, JSON_INDENT(2)) == 0)
        printf("  written to %s\n", path);
    json_decref(out);
    free(sim_cfg);
    free((char *)cfg);
    h_cleanup(keep);
    return unclean == 0 && lost <= 0 && restored_s >= 0 ? 0 : 1;
}
