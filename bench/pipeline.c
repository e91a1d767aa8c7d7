/* bench/pipeline - end-to-end figures of the pipeline on one machine, with an unlimited
 * simulated provider (so sluice itself is what is measured):
 *   1. throughput: N jobs produced at once, jobs/s from the first produce to the last result;
 *   2. the raw one-hop Kafka rate of the same messages through the same broker (the ceiling);
 *   3. added latency at a fixed arrival rate: submit -> result minus the provider's own time.
 * Writes bench/results/pipeline-<time>.json and prints a table. Usage: bench/pipeline --help. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hmap.h"
#include "opts.h"
#include "sign.h"
#include "stats.h"
#include "util.h"

static const char *write_configs(int sim_port, char **sim_cfg)
{
    const char *dir = h_tmpdir();
    char hex[65];
    h_key_hash_hex("sk-bench-key-0001", hex);
    *sim_cfg =
        strdup(h_write("sim.json", "{\"minute_ms\": 60000, \"deployments\": [{\"name\": \"open\","
                                   " \"ttft_ms\": 5, \"ms_per_token\": 0, \"output_min\": 10,"
                                   " \"output_max\": 10}]}"));
    char *keyfile = strdup(h_write("provider.key", "bench\n"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\"},"
             " \"dispatcher\": {\"max_in_flight\": 512},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": [{\"name\": \"open\","
             "   \"base_url\": \"http://127.0.0.1:%d/open/v1\", \"model\": \"m\","
             "   \"api_key_file\": \"%s\"}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"open\"]}],"
             " \"tenants\": [{\"name\": \"a\"}, {\"name\": \"b\"}],"
             " \"keys\": [{\"id\": \"k\", \"tenant\": \"a\", \"hash\": \"%s\"}]}",
             dir, dir, dir, dir, sim_port, keyfile, hex);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

static int request(char *buf, size_t cap, const char *idem, double submit_ms)
{
    return snprintf(buf, cap,
                    "{\"idempotency_key\": \"%s\", \"api_key\": \"sk-bench-key-0001\","
                    " \"route\": \"chat\", \"metadata\": {\"t\": %.3f}, \"request\":"
                    " {\"messages\": [{\"role\": \"user\", \"content\": \"Benchmark request "
                    "%s: a short question of ordinary length for a chat model.\"}],"
                    " \"max_tokens\": 16}}",
                    idem, submit_ms, idem);
}

/* Latency samples (ms) per result: added = end to end minus the provider's time, split into
 * the edge hops (client -> ingest and scheduler -> client), ingest -> dispatch decision, and
 * dispatch -> provider -> usage back at the scheduler minus the provider's time. */
typedef struct {
    double *added, *edge, *to_dispatch, *round_trip;
    int n;
} lat_t;

/* Consumes results until `want` arrived; records latency samples when lat != NULL. */
static int collect(rd_kafka_t *cons, int want, double timeout_ms, lat_t *lat, double *last_ms)
{
    int got = 0;
    double until = sl_mono_ms() + timeout_ms;
    while (got < want && sl_mono_ms() < until) {
        /* At least 1 ms: a poll of 0 would spin, and on two cores a spinning client takes a
         * core from the daemons it measures. */
        double left = until - sl_mono_ms();
        int wait_ms = left > 100 ? 100 : left < 1 ? 1 : (int)left;
        rd_kafka_message_t *m = rd_kafka_consumer_poll(cons, wait_ms);
        if (m == NULL)
            continue;
        double now = h_wall_ms();
        if (!m->err) {
            json_t *r = json_loadb(m->payload, m->len, 0, NULL);
            if (json_is_string(json_object_get(r, "status"))) {
                got++;
                *last_ms = sl_mono_ms();
                json_t *t = json_object_get(json_object_get(r, "metadata"), "t");
                json_t *tm = json_object_get(r, "timings");
                double provider = json_number_value(json_object_get(tm, "provider_ms"));
                double total = json_number_value(json_object_get(tm, "total_ms"));
                double queued = json_number_value(json_object_get(tm, "queued_ms"));
                if (lat != NULL && json_is_number(t)) {
                    double all = now - json_number_value(t);
                    lat->added[lat->n] = all - provider;
                    lat->edge[lat->n] = all - total;
                    lat->to_dispatch[lat->n] = queued;
                    lat->round_trip[lat->n] = total - queued - provider;
                    lat->n++;
                }
            }
            json_decref(r);
        }
        rd_kafka_message_destroy(m);
    }
    return got;
}

/* Raw one-hop Kafka rate: produce n messages like the jobs to a scratch topic, consume them. */
static double raw_kafka_rate(const char *bootstrap, const char *topic, int n)
{
    rd_kafka_t *p = h_producer(bootstrap);
    char buf[1024];
    /* The topic and the consumer's assignment exist before the clock starts. */
    h_produce(p, topic, "init", "{}", 2);
    rd_kafka_flush(p, 10000);
    rd_kafka_t *c = h_consumer_from_start(bootstrap, topic);
    int got = -1; /* the init message */
    rd_kafka_message_t *first = NULL;
    for (int i = 0; i < 100 && first == NULL; i++)
        first = rd_kafka_consumer_poll(c, 100);
    if (first != NULL) {
        got = 0;
        rd_kafka_message_destroy(first);
    }
    double t0 = sl_mono_ms();
    for (int i = 0; i < n; i++) {
        char idem[32];
        snprintf(idem, sizeof idem, "raw-%07d", i);
        int len = request(buf, sizeof buf, idem, 0);
        h_produce(p, topic, idem, buf, (size_t)len);
    }
    rd_kafka_flush(p, 60000);
    rd_kafka_destroy(p);
    double until = sl_mono_ms() + 60000;
    while (got < n && sl_mono_ms() < until) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 100);
        if (m != NULL) {
            got += m->err == 0;
            rd_kafka_message_destroy(m);
        }
    }
    double secs = (sl_mono_ms() - t0) / 1000.0;
    rd_kafka_consumer_close(c);
    rd_kafka_destroy(c);
    return got / secs;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pipeline [--jobs N] [--rate JOBS_PER_S] [--seconds S] [--trials N] [--help]\n"
            "Starts the five real processes on a fresh stack with one unlimited simulated\n"
            "deployment that answers after 5 ms, so that sluice and not a provider is measured:\n"
            "  1. throughput: N jobs produced at once, jobs/s from the first produce to the last\n"
            "     result (the median of the trials);\n"
            "  2. the raw one-hop Kafka rate of the same messages through the same broker;\n"
            "  3. added latency at a fixed arrival rate: submit -> result minus the provider's\n"
            "     own time, p50 and p99, and where it goes (run first, on the fresh stack),\n"
            "     with each process's CPU per job at that rate;\n"
            "  4. CPU share and CPU per job of each process during the last throughput run,\n"
            "     and peak RSS.\n"
            "Prints a table and writes bench/results/pipeline-<unix time>.json.\n"
            "  --jobs N        jobs per throughput trial, 1 - 10000000 (default 20000)\n"
            "  --rate R        arrivals per second in the latency phase, 1 - 100000 (default 500)\n"
            "  --seconds S     length of the latency phase, 1 - 3600 (default 10)\n"
            "  --trials N      throughput and raw-rate trials, 1 - 15 (default 3)\n"
            "  -h, --help      this text\n");
}

int main(int argc, char **argv)
{
    int jobs = 20000, rate = 500, seconds = 10, trials = 3;
    const b_opt_t options[] = {
        {"jobs", B_OPT_INT, &jobs, 1, 10000000},
        {"rate", B_OPT_INT, &rate, 1, 100000},
        {"seconds", B_OPT_INT, &seconds, 1, 3600},
        {"trials", B_OPT_INT, &trials, 1, 15},
        {NULL, B_OPT_FLAG, NULL, 0, 0},
    };
    int parsed = b_opt_parse("pipeline", argc, argv, options, usage);
    if (parsed != 0)
        return parsed == 1 ? 0 : parsed;
    sl_crypto_init();
    int sim_port = h_free_port();
    char *sim_cfg = NULL;
    const char *cfg = write_configs(sim_port, &sim_cfg);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    char buf[1024];

    /* Warm-up: let every consumer group settle before measuring. */
    for (int i = 0; i < 200; i++) {
        char idem[32];
        snprintf(idem, sizeof idem, "warm-%d", i);
        int len = request(buf, sizeof buf, idem, (double)sl_now_ms());
        h_produce(prod, "sluice.requests", idem, buf, (size_t)len);
    }
    rd_kafka_flush(prod, 10000);
    double last = 0;
    int warm = collect(cons, 200, 60000, NULL, &last);

    pid_t procs[5] = {st.kafka, st.sim, st.sched, st.ingest, st.disp};
    /* 3. Added latency at a fixed rate. It runs first, on a fresh stack: the dev broker's own
     * CPU per job at 500 jobs/s was 1.4 times as much after the throughput runs' 60,000 jobs,
     * and the latency then measured the broker's slowing, not sluice. */
    int n_lat_jobs = rate * seconds;
    lat_t lat = {calloc((size_t)n_lat_jobs + 1, sizeof(double)),
                 calloc((size_t)n_lat_jobs + 1, sizeof(double)),
                 calloc((size_t)n_lat_jobs + 1, sizeof(double)),
                 calloc((size_t)n_lat_jobs + 1, sizeof(double)), 0};
    double lcpu0[5], lcpu1[5];
    for (int i = 0; i < 5; i++)
        lcpu0[i] = h_cpu_seconds(procs[i]);
    double start = sl_mono_ms();
    int sent = 0, got_lat = 0;
    while (sent < n_lat_jobs) {
        double due = start + sent * 1000.0 / rate;
        for (double now = sl_mono_ms(); now < due; now = sl_mono_ms())
            got_lat += collect(cons, 1, due - now, &lat, &last);
        char idem[32];
        snprintf(idem, sizeof idem, "lat-%07d", sent);
        int len = request(buf, sizeof buf, idem, h_wall_ms());
        h_produce(prod, "sluice.requests", idem, buf, (size_t)len);
        rd_kafka_poll(prod, 0);
        sent++;
    }
    rd_kafka_flush(prod, 10000);
    got_lat += collect(cons, n_lat_jobs - got_lat, 60000, &lat, &last);
    /* CPU per job at the fixed rate, idle polling included: what a job costs at that load. */
    double lus[5];
    for (int i = 0; i < 5; i++) {
        lcpu1[i] = h_cpu_seconds(procs[i]);
        lus[i] = got_lat > 0 ? 1e6 * (lcpu1[i] - lcpu0[i]) / got_lat : 0;
    }
    double *series[4] = {lat.added, lat.edge, lat.to_dispatch, lat.round_trip};
    for (int i = 0; i < 4; i++)
        qsort(series[i], (size_t)lat.n, sizeof(double), b_cmp_double);
    int nlat = lat.n;

    /* 1. Throughput with a backlog, `trials` times; the median is reported. */
    double cpu0[5], cpu1[5];
    double tps[16];
    int got = 0, all_got = 1;
    double wall_s = 0;
    for (int t = 0; t < trials; t++) {
        for (int i = 0; i < 5; i++)
            cpu0[i] = h_cpu_seconds(procs[i]);
        double t0 = sl_mono_ms();
        for (int i = 0; i < jobs; i++) {
            char idem[32];
            snprintf(idem, sizeof idem, "tp%d-%07d", t, i);
            int len = request(buf, sizeof buf, idem, (double)sl_now_ms());
            h_produce(prod, "sluice.requests", idem, buf, (size_t)len);
        }
        rd_kafka_flush(prod, 60000);
        got = collect(cons, jobs, 120000, NULL, &last);
        all_got = all_got && got == jobs;
        wall_s = (last - t0) / 1000.0;
        tps[t] = got / wall_s;
        for (int i = 0; i < 5; i++)
            cpu1[i] = h_cpu_seconds(procs[i]);
    }
    qsort(tps, (size_t)trials, sizeof *tps, b_cmp_double);
    double tp = tps[trials / 2];
    /* How many dispatches shared a signature (the scheduler signs a loop turn's together). */
    char *sched_metrics = h_http_text("http://127.0.0.1:9311/metrics");
    double dispatched = h_metrics_sample(sched_metrics, "sluice_scheduler_dispatched_total");
    double signatures =
        h_metrics_sample(sched_metrics, "sluice_scheduler_dispatch_signatures_total");
    free(sched_metrics);
    double per_sig = signatures > 0 ? dispatched / signatures : 0;

    long rss[5] = {h_peak_rss_kb(st.kafka), h_peak_rss_kb(st.sim), h_peak_rss_kb(st.sched),
                   h_peak_rss_kb(st.ingest), h_peak_rss_kb(st.disp)};
    /* 2. The ceiling: raw produce -> consume through the same broker, median of the trials. */
    double raws[16];
    for (int t = 0; t < trials; t++) {
        char topic[32];
        snprintf(topic, sizeof topic, "bench.raw%d", t);
        raws[t] = raw_kafka_rate(st.bootstrap, topic, jobs);
    }
    qsort(raws, (size_t)trials, sizeof *raws, b_cmp_double);
    double raw = raws[trials / 2];

    printf("\nsluice pipeline benchmark (unlimited simulated provider, 5 ms provider time)\n");
    printf("  warm-up results              %d/200\n", warm);
    printf("  end-to-end throughput        %.0f jobs/s (median of %d runs of %d jobs;"
           " min %.0f, max %.0f)\n",
           tp, trials, jobs, tps[0], tps[trials - 1]);
    printf("  raw one-hop Kafka rate       %.0f msgs/s (same messages, same broker; median)\n",
           raw);
    printf("  ratio sluice / raw           %.1f %%\n", 100.0 * tp / raw);
    printf("  added latency at %d jobs/s  p50 %.1f ms  p99 %.1f ms  (n=%d)\n", rate,
           b_pct(lat.added, nlat, 0.5), b_pct(lat.added, nlat, 0.99), nlat);
    printf("    of which (p50)             client->ingest + scheduler->client %.1f ms,"
           " ingest->dispatch %.1f ms, dispatch->usage back minus provider %.1f ms\n",
           b_pct(lat.edge, nlat, 0.5), b_pct(lat.to_dispatch, nlat, 0.5),
           b_pct(lat.round_trip, nlat, 0.5));
    printf(
        "  CPU share during the last run devkafka %.0f%% sim %.0f%% scheduler %.0f%% ingest %.0f%%"
        " dispatcher %.0f%% (of one core)\n",
        100 * (cpu1[0] - cpu0[0]) / wall_s, 100 * (cpu1[1] - cpu0[1]) / wall_s,
        100 * (cpu1[2] - cpu0[2]) / wall_s, 100 * (cpu1[3] - cpu0[3]) / wall_s,
        100 * (cpu1[4] - cpu0[4]) / wall_s);
    /* CPU time per job of sluice's own daemons over the last throughput run (its jobs only:
     * nothing else runs then). */
    double us[5];
    for (int i = 0; i < 5; i++)
        us[i] = got > 0 ? 1e6 * (cpu1[i] - cpu0[i]) / got : 0;
    printf("  CPU per job, last run (us)   scheduler %.0f ingest %.0f dispatcher %.0f;"
           " the three %.0f\n",
           us[2], us[3], us[4], us[2] + us[3] + us[4]);
    printf("  CPU per job at %d jobs/s (us) scheduler %.0f ingest %.0f dispatcher %.0f;"
           " the three %.0f (devkafka %.0f, sim %.0f)\n",
           rate, lus[2], lus[3], lus[4], lus[2] + lus[3] + lus[4], lus[0], lus[1]);
    printf("  dispatches per signature     %.1f (the whole run)\n", per_sig);
    printf("  peak RSS (MiB)               devkafka %.0f sim %.0f scheduler %.0f ingest %.0f"
           " dispatcher %.0f\n",
           rss[0] / 1024.0, rss[1] / 1024.0, rss[2] / 1024.0, rss[3] / 1024.0, rss[4] / 1024.0);

    mkdir("bench/results", 0755);
    char path[256];
    snprintf(path, sizeof path, "bench/results/pipeline-%lld.json", (long long)time(NULL));
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fprintf(f,
                "{\"jobs\": %d, \"throughput_jobs_per_s\": %.1f, \"raw_kafka_msgs_per_s\": %.1f,"
                " \"ratio\": %.4f, \"latency_rate_jobs_per_s\": %d, \"added_latency_ms\":"
                " {\"p50\": %.2f, \"p99\": %.2f, \"n\": %d}, \"peak_rss_kib\": {\"devkafka\": %ld,"
                " \"sim\": %ld, \"scheduler\": %ld, \"ingest\": %ld, \"dispatcher\": %ld},"
                " \"cpu_us_per_job\": {\"scheduler\": %.1f, \"ingest\": %.1f,"
                " \"dispatcher\": %.1f}, \"cpu_us_per_job_at_rate\": {\"scheduler\": %.1f,"
                " \"ingest\": %.1f, \"dispatcher\": %.1f, \"devkafka\": %.1f, \"sim\": %.1f},"
                " \"dispatches_per_signature\": %.2f}\n",
                jobs, tp, raw, tp / raw, rate, b_pct(lat.added, nlat, 0.5),
                b_pct(lat.added, nlat, 0.99), nlat, rss[0], rss[1], rss[2], rss[3], rss[4], us[2],
                us[3], us[4], lus[2], lus[3], lus[4], lus[0], lus[1], per_sig);
        fclose(f);
        printf("  written to %s\n", path);
    }
    for (int i = 0; i < 4; i++)
        free(series[i]);
    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    if (h_stack_down(&st) != 0)
        printf("  some process did not stop cleanly\n");
    h_cleanup(0);
    return all_got ? 0 : 1;
}
