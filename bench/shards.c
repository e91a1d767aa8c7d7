/* bench/shards - what several schedulers (scheduler.sharded) decide per second, against one.
 *
 * For each count of schedulers asked for (default 1, 2 and 4), a fresh stack: the dev broker
 * with 16 partitions a topic, the simulator with no limit, one ingest, one dispatcher and that
 * many sharded schedulers (one consumer group). N jobs of T tenants go in through ingest at
 * once; measured from the first result to the last: results a second (each result is one
 * scheduling decision carried out), and the CPU each scheduler used over the run
 * (/proc/<pid>/stat), per job summed over the schedulers. On a 2-core machine every process
 * shares the same two cores, so more schedulers cannot add CPU: what it shows is what sharding
 * costs per job and whether throughput holds.
 *
 * With --tpm the provider has that token limit a (6-s) minute instead, binding: then it reports
 * the utilisation of the limit from the first result to the last (the simulator's tokens over
 * what the limit allowed in that time) and the simulator's 429s, which is what the static split
 * of the limit between shards costs. "0" in the list is one scheduler that is not sharded (the
 * default setup), to compare with. Writes bench/results/shards-<unix time>.json. */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hmap.h"
#include "opts.h"
#include "stats.h"
#include "util.h"

enum { PARTITIONS = 16, MAX_SCHEDULERS = 8, TENANTS_MAX = 64, LIMITED_MINUTE_MS = 6000 };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench/shards [--jobs N] [--tenants T] [--schedulers LIST] [--tpm T]\n"
            "                    [--capped-tpm C] [--quick] [--keep] [--help]\n"
            "\n"
            "For each count of sharded schedulers in LIST (default \"1,2,4\"), starts a fresh\n"
            "stack (16 partitions, an unlimited simulated provider, one ingest, one dispatcher),\n"
            "sends N jobs (default 20,000) of T tenants (default 16) and reports results a second\n"
            "from the first result to the last, and the schedulers' CPU per job. Writes\n"
            "bench/results/shards-<unix time>.json.\n"
            "\n"
            "  --jobs N           jobs, 1000 - 200000 (default 20000)\n"
            "  --tenants T        tenants, 1 - %d (default 16)\n"
            "  --schedulers LIST  counts of schedulers, each 1 - %d (default 1,2,4); 0 is one\n"
            "                     scheduler that is not sharded\n"
            "  --tpm T            a binding token limit a 6-s minute (default 0: none); reports\n"
            "                     the utilisation of it and the 429s\n"
            "  --capped-tpm C     the first tenant's own limit, C tokens a minute (default 0:\n"
            "                     none): a shard held back by its tenants' limits\n"
            "  --quick            4,000 jobs (over --jobs)\n"
            "  --keep             keep each run's directory (logs, stores)\n"
            "  -h, --help         this text\n",
            TENANTS_MAX, MAX_SCHEDULERS);
}

typedef struct {
    int schedulers, results, twice;
    double seconds, per_s, cpu_us_per_job, assign_s;
    double utilisation;    /* with a limit: its share used from the first result to the last */
    double steady;         /* and from the 25th to the 75th percent of the results */
    double jain;           /* Jain's index over the tenants' results in that middle half */
    double capacity_per_s; /* capacity-topic messages a second over the run (leases) */
    long long refused;     /* the simulator's 429s */
} run_t;

/* One run in this process (its own temporary directory); the figures into *out. */
/* --capped-tpm: the first tenant's own token limit a minute (0: none). */
static long long capped_tpm;

static int run_once(int nsched, long jobs, int tenants, long long tpm, int keep, run_t *out)
{
    memset(out, 0, sizeof *out);
    out->schedulers = nsched;
    int sharded = nsched > 0;
    if (nsched == 0)
        nsched = 1;
    const char *dir = h_tmpdir();
    int sim_port = h_free_port();
    char sim[512], minute[64] = "", limits[128] = "";
    if (tpm > 0) {
        snprintf(minute, sizeof minute, "\"minute_ms\": %d,", LIMITED_MINUTE_MS);
        snprintf(limits, sizeof limits,
                 " \"limits\": {\"rpm\": 100000000, \"tpm\": %lld}, \"slices_per_minute\": 10,",
                 tpm);
    }
    snprintf(sim, sizeof sim,
             "{%s \"deployments\": [{\"name\": \"sim-a\", \"rpm\": 100000000, \"tpm\": %lld,"
             " \"slices_per_minute\": 10, \"ttft_ms\": 1, \"ms_per_token\": 0,"
             " \"output_min\": 5, \"output_max\": 20}]}",
             minute, tpm > 0 ? tpm : 1000000000LL);
    char *sim_cfg = strdup(h_write("sim.json", sim));
    h_write("provider.key", "any-bearer-token\n");
    size_t cap = 4096 + (size_t)tenants * 256;
    char *body = malloc(cap), *tj = malloc(cap), *kj = malloc(cap);
    if (body == NULL || tj == NULL || kj == NULL)
        return 2;
    size_t tl = 0, kl = 0;
    for (int t = 0; t < tenants; t++) {
        char key[64], hex[65];
        snprintf(key, sizeof key, "sk-bench-shards-%d", t);
        h_key_hash_hex(key, hex);
        char own[64] = "";
        if (t == 0 && capped_tpm > 0)
            snprintf(own, sizeof own, ", \"tokens_per_min\": %lld", capped_tpm);
        tl +=
            (size_t)snprintf(tj + tl, cap - tl, "%s{\"name\": \"t%02d\"%s}", t ? "," : "", t, own);
        kl += (size_t)snprintf(kj + kl, cap - kl,
                               "%s{\"id\": \"k%02d\", \"tenant\": \"t%02d\", \"hash\": \"%s\"}",
                               t ? "," : "", t, t, hex);
    }
    snprintf(body, cap,
             "%s \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "              \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": [{\"name\": \"sim-a\","
             "   \"base_url\": \"http://127.0.0.1:%d/sim-a/v1\", \"model\": \"m\",%s"
             "   \"api_key_file\": \"%s/provider.key\", \"timeout_ms\": 10000}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim-a\"]}],"
             " \"tenants\": [%s], \"keys\": [%s]",
             minute, dir, dir, sim_port, limits, dir, tj, kj);
    char *sched_cfg[MAX_SCHEDULERS], name[32];
    for (int i = 0; i < nsched; i++) {
        snprintf(name, sizeof name, "sched-%d", i);
        sched_cfg[i] = h_member_config(name, body, "", sharded);
    }
    char *disp_cfg = h_member_config("disp", body, "", sharded);
    char *ingest_cfg = h_member_config("ingest", body, "", sharded);
    free(body);
    free(tj);
    free(kj);
    char bootstrap[256];
    pid_t kafka = h_devkafka(sched_cfg[0], PARTITIONS, bootstrap, sizeof bootstrap);
    char port[16];
    snprintf(port, sizeof port, "%d", sim_port);
    const char *sim_args[] = {"--config", sim_cfg, "--port", port, NULL};
    pid_t simp = h_spawn("sluice-sim", "sim", NULL, sim_args);
    pid_t sched[MAX_SCHEDULERS];
    sched[0] = h_spawn("sluice-scheduler", "sched-0", sched_cfg[0], NULL);
    char pub[4200];
    snprintf(pub, sizeof pub, "%s/dispatch.pub", dir);
    h_wait_file(pub, 20000);
    for (int i = 1; i < nsched; i++) {
        snprintf(name, sizeof name, "sched-%d", i);
        sched[i] = h_spawn("sluice-scheduler", name, sched_cfg[i], NULL);
    }
    pid_t disp = h_spawn("sluice-dispatcher", "disp", disp_cfg, NULL);
    pid_t ingest = h_spawn("sluice-ingest", "ingest", ingest_cfg, NULL);
    /* Every scheduler has its partitions (and the group is settled) before the jobs come. */
    double t0 = sl_mono_ms();
    int settled = 0;
    while (settled < nsched && sl_mono_ms() - t0 < 60000) {
        settled = 0;
        for (int i = 0; i < nsched; i++) {
            char log[4300];
            snprintf(log, sizeof log, "%s/sched-%d.log", dir, i);
            settled +=
                h_wait_log(log, 0, sharded ? "partitions kept" : "partitions assigned", 1) >= 0;
        }
        usleep(100 * 1000);
    }
    sleep(2); /* a member that joined last makes the others rebalance once more */
    out->assign_s = (sl_mono_ms() - t0) / 1000.0;
    char stats_url[64];
    snprintf(stats_url, sizeof stats_url, "http://127.0.0.1:%d/stats", sim_port);
    double cpu0[MAX_SCHEDULERS];
    for (int i = 0; i < nsched; i++)
        cpu0[i] = h_cpu_seconds(sched[i]);
    rd_kafka_t *prod = h_producer(bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(bootstrap, "sluice.results");
    int64_t cap_lo = 0, cap0 = 0, cap1 = 0;
    double cap_t0 = sl_mono_ms();
    if (sharded)
        rd_kafka_query_watermark_offsets(prod, "sluice.capacity", 0, &cap_lo, &cap0, 5000);
    for (long i = 0; i < jobs; i++) {
        char idem[32], key[64];
        snprintf(idem, sizeof idem, "shards-%06ld", i);
        snprintf(key, sizeof key, "sk-bench-shards-%ld", i % tenants);
        h_request_fact(prod, idem, key, i, 20);
    }
    rd_kafka_flush(prod, 60000);
    sl_hmap_t *seen = sl_hmap_new();
    double first = 0, last = 0, deadline = sl_mono_ms() + 900000;
    int64_t tokens_first = 0;
    /* The middle half of the results: the steady state, without the start and the end. */
    long mid_from = jobs / 4, mid_to = jobs * 3 / 4;
    double t_mid_from = 0, t_mid_to = 0;
    int64_t tokens_mid_from = 0, tokens_mid_to = 0;
    double per_tenant[TENANTS_MAX] = {0};
    while (out->results < jobs && sl_mono_ms() < deadline) {
        json_t *r = NULL;
        if (!h_poll_json(cons, 200, &r))
            continue;
        const char *id = json_string_value(json_object_get(r, "job_id"));
        if (id != NULL && sl_hmap_get(seen, id) == NULL) {
            sl_hmap_put(seen, id, (void *)1);
            out->results++;
            last = sl_mono_ms();
            if (first == 0) {
                first = last;
                json_t *st = tpm > 0 ? h_http_json(stats_url) : NULL;
                tokens_first = h_sim_total(st, "tokens_charged");
                json_decref(st);
            }
            if (out->results == mid_from || out->results == mid_to) {
                json_t *st = tpm > 0 ? h_http_json(stats_url) : NULL;
                *(out->results == mid_from ? &tokens_mid_from : &tokens_mid_to) =
                    h_sim_total(st, "tokens_charged");
                *(out->results == mid_from ? &t_mid_from : &t_mid_to) = last;
                json_decref(st);
            }
            const char *tn = json_string_value(json_object_get(r, "tenant"));
            if (out->results > mid_from && out->results <= mid_to && tn != NULL &&
                strncmp(tn, "t", 1) == 0) {
                long t = strtol(tn + 1, NULL, 10);
                if (t >= 0 && t < TENANTS_MAX)
                    per_tenant[t] += 1;
            }
        } else if (id != NULL) {
            out->twice++;
        }
        json_decref(r);
    }
    if (sharded &&
        rd_kafka_query_watermark_offsets(prod, "sluice.capacity", 0, &cap_lo, &cap1, 5000) ==
            RD_KAFKA_RESP_ERR_NO_ERROR &&
        sl_mono_ms() > cap_t0)
        out->capacity_per_s = (double)(cap1 - cap0) / ((sl_mono_ms() - cap_t0) / 1000.0);
    json_t *st = h_http_json(stats_url);
    out->refused = (long long)h_sim_total(st, "refused");
    if (tpm > 0 && last > first)
        out->utilisation = (double)(h_sim_total(st, "tokens_charged") - tokens_first) /
                           ((last - first) / LIMITED_MINUTE_MS * (double)tpm);
    if (tpm > 0 && t_mid_to > t_mid_from)
        out->steady = (double)(tokens_mid_to - tokens_mid_from) /
                      ((t_mid_to - t_mid_from) / LIMITED_MINUTE_MS * (double)tpm);
    out->jain = b_jain(per_tenant, tenants);
    json_decref(st);
    double cpu = 0;
    for (int i = 0; i < nsched; i++)
        cpu += h_cpu_seconds(sched[i]) - cpu0[i];
    out->seconds = (last - first) / 1000.0;
    out->per_s = out->seconds > 0 ? (out->results - 1) / out->seconds : 0;
    out->cpu_us_per_job = out->results > 0 ? cpu * 1e6 / out->results : 0;
    sl_hmap_free(seen);
    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    h_stop(ingest, SIGTERM, 20000);
    h_stop(disp, SIGTERM, 20000);
    for (int i = 0; i < nsched; i++) {
        h_stop(sched[i], SIGTERM, 20000);
        free(sched_cfg[i]);
    }
    h_stop(simp, SIGTERM, 5000);
    h_stop(kafka, SIGTERM, 5000);
    free(disp_cfg);
    free(ingest_cfg);
    free(sim_cfg);
    h_cleanup(keep);
    return out->results == jobs ? 0 : 1;
}

int main(int argc, char **argv)
{
    long long jobs = 20000;
    int tenants = 16, quick = 0, keep = 0;
    const char *list = "1,2,4";
    long long tpm = 0;
    const b_opt_t opts[] = {{"jobs", B_OPT_LONG, &jobs, 1000, 200000},
                            {"tenants", B_OPT_INT, &tenants, 1, TENANTS_MAX},
                            {"schedulers", B_OPT_TEXT, &list, 0, 0},
                            {"tpm", B_OPT_LONG, &tpm, 0, 1e9},
                            {"capped-tpm", B_OPT_LONG, &capped_tpm, 0, 1e9},
                            {"quick", B_OPT_FLAG, &quick, 0, 0},
                            {"keep", B_OPT_FLAG, &keep, 0, 0},
                            {NULL, 0, NULL, 0, 0}};
    int prc = b_opt_parse("shards", argc, argv, opts, usage);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if (quick)
        jobs = 4000;
    int counts[MAX_SCHEDULERS], ncounts = 0;
    for (const char *p = list; *p != '\0' && ncounts < MAX_SCHEDULERS;) {
        char *end = NULL;
        long n = strtol(p, &end, 10);
        if (end == p || n < 0 || n > MAX_SCHEDULERS || (*end != ',' && *end != '\0'))
            return b_opt_refuse("shards", "--schedulers", list,
                                "counts of schedulers 0 - 8 (0: one, not sharded), separated "
                                "by commas");
        counts[ncounts++] = (int)n;
        p = *end == ',' ? end + 1 : end;
    }
    if (tpm > 0)
        printf("bench/shards: %lld jobs of %d tenants, %d partitions, a limit of %lld tokens a "
               "%d-ms minute\n",
               jobs, tenants, PARTITIONS, tpm, LIMITED_MINUTE_MS);
    else
        printf("bench/shards: %lld jobs of %d tenants, %d partitions, an unlimited provider\n",
               jobs, tenants, PARTITIONS);
    json_t *runs = json_array();
    int failed = 0;
    for (int k = 0; k < ncounts; k++) {
        /* Each run in a child of its own: its own temporary directory and stack. */
        int fds[2];
        if (pipe(fds) != 0)
            return 2;
        fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
            close(fds[0]);
            run_t r;
            int rc = run_once(counts[k], (long)jobs, tenants, tpm, keep, &r);
            if (write(fds[1], &r, sizeof r) != (ssize_t)sizeof r)
                rc = 2;
            _exit(rc);
        }
        close(fds[1]);
        run_t r;
        int got = read(fds[0], &r, sizeof r) == (ssize_t)sizeof r;
        close(fds[0]);
        int status = 0;
        waitpid(child, &status, 0);
        if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            printf("  %d scheduler(s): the run failed (%s)\n", counts[k],
                   got ? "not every job got a result" : "no figures");
            failed = 1;
            if (!got)
                continue;
        }
        char what[32];
        snprintf(what, sizeof what, r.schedulers > 0 ? "%d sharded" : "1 not sharded",
                 r.schedulers);
        printf("  %s: %d results in %.2f s: %.0f a second; schedulers' CPU %.0f us a job "
               "(summed); %d delivered twice; group settled in %.1f s",
               what, r.results, r.seconds, r.per_s, r.cpu_us_per_job, r.twice, r.assign_s);
        if (r.schedulers > 0)
            printf("; %.1f capacity messages a second", r.capacity_per_s);
        if (tpm > 0)
            printf("; %.1f %% of the limit used (%.1f %% in the middle half of the results, "
                   "Jain %.4f over the tenants there), %lld x 429",
                   100.0 * r.utilisation, 100.0 * r.steady, r.jain, r.refused);
        printf("\n");
        json_array_append_new(
            runs,
            json_pack("{s:i, s:b, s:i, s:f, s:f, s:f, s:i, s:f, s:f, s:f, s:f, s:I}", "schedulers",
                      r.schedulers > 0 ? r.schedulers : 1, "sharded", r.schedulers > 0, "results",
                      r.results, "seconds", r.seconds, "per_second", r.per_s,
                      "scheduler_cpu_us_per_job", r.cpu_us_per_job, "twice", r.twice, "utilisation",
                      r.utilisation, "steady_utilisation", r.steady, "jain_middle",
                      isnan(r.jain) ? 0.0 : r.jain, "capacity_messages_per_second",
                      r.capacity_per_s, "refused", (json_int_t)r.refused));
    }
    json_t *out = json_pack("{s:I, s:i, s:i, s:I, s:I, s:o}", "jobs", (json_int_t)jobs, "tenants",
                            tenants, "partitions", PARTITIONS, "tpm", (json_int_t)tpm, "capped_tpm",
                            (json_int_t)capped_tpm, "runs", runs);
    char path[128];
    snprintf(path, sizeof path, "bench/results/shards-%lld.json", (long long)time(NULL));
    if (json_dump_file(out, path, JSON_INDENT(2)) == 0)
        printf("  written to %s\n", path);
    json_decref(out);
    return failed;
}
