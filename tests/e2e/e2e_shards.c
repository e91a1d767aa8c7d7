/* e2e_shards - several schedulers share the jobs topic and the provider's limits.
 *
 * Three schedulers (scheduler.sharded, one consumer group), two dispatchers and two ingests run
 * 1,200 jobs of four tenants against one simulated deployment whose token limit binds; the shards
 * admit within capacity leases granted by a coordinator (scheduler/coord.h). At 5/12 of the
 * results a shard that is not the coordinator is killed with SIGKILL and its database deleted;
 * once the group gave its partitions to the others (which restore them from the changelog),
 * at 7/12 the coordinator's scheduler is killed the same way, and its role goes with partition
 * 0 to the last one. At 3/4 a fourth scheduler joins, and once it has scheduled it leaves
 * (SIGTERM): partitions move twice more.
 *
 * Asserts: every job gets exactly one terminal result after de-duplication by job id, all
 * succeeded, none conflicting; the simulator's own per-slice counts refused at most 0.1 % of
 * requests throughout (each shard admits within its grant, and the coordinator grants only what
 * no shard holds); each killed scheduler's partitions were taken over, a survivor became
 * coordinator with a newer epoch, and no shard's lease ran out; the joiner scheduled and left
 * cleanly; in the steady state before the kills the four tenants were served alike (Jain's
 * index of their results >= 0.99) and the binding limit was >= 90 % used; and provider calls
 * made twice are at most the jobs in flight at the kills plus those handed over in flight at
 * the rebalances and not taken over (all counted). Prints the takeover times and the
 * utilisation over the whole run (bench/shards measures the steady state). */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hmap.h"
#include "kafka.h"
#include "util.h"

enum { JOBS = 1200, TENANTS = 4, MINUTE_MS = 6000, TPM = 30000, PARTITIONS = 8 };
enum { SCHEDULERS = 4 /* three, then a fourth joins */, DISPATCHERS = 2, INGESTS = 2, KILLS = 2 };

static char key_hex[TENANTS][65];
static int sim_port;

/* One process's config (h_member_config): everything shared, but its own database, ports and
 * instance name. */
static char *write_config(const char *name)
{
    const char *dir = h_tmpdir();
    char body[4096];
    snprintf(body, sizeof body,
             "\"minute_ms\": %d,"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": [{\"name\": \"sim-a\","
             "   \"base_url\": \"http://127.0.0.1:%d/sim-a/v1\", \"model\": \"m\","
             "   \"api_key_file\": \"%s/provider.key\", \"limits\": {\"rpm\": 100000, \"tpm\": %d},"
             "   \"slices_per_minute\": 10, \"timeout_ms\": 2000, \"idempotent\": true}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim-a\"]}],"
             " \"tenants\": [{\"name\": \"gamma\"}, {\"name\": \"beta\"}, {\"name\": \"eta\"},"
             "               {\"name\": \"kappa\"}],"
             " \"keys\": [{\"id\": \"k0\", \"tenant\": \"gamma\", \"hash\": \"%s\"},"
             "          {\"id\": \"k1\", \"tenant\": \"beta\", \"hash\": \"%s\"},"
             "          {\"id\": \"k2\", \"tenant\": \"eta\", \"hash\": \"%s\"},"
             "          {\"id\": \"k3\", \"tenant\": \"kappa\", \"hash\": \"%s\"}]",
             MINUTE_MS, dir, dir, sim_port, dir, TPM, key_hex[0], key_hex[1], key_hex[2],
             key_hex[3]);
    /* A DRR turn of 400 tokens is four of these 100-token jobs. With the default 4096 a turn is
     * 41 jobs, over a second of the busiest shard's part, and the 9-s window the fairness is
     * measured over would count whole turns more for one tenant than another (Jain 0.987 -
     * 0.991 here with the default; one scheduler alone shows the same in bench/shards). */
    return h_member_config(name, body,
                           "\"lease_ms\": 3000, \"max_attempts\": 10,"
                           " \"drr_quantum_tokens\": 400,",
                           1);
}

/* The partitions a scheduler's log last said it owns ("owns 0,3,5"), into owned[]. */
static void last_owned(const char *logname, uint8_t *owned, int nparts)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.log", h_tmpdir(), logname);
    char *text = NULL;
    size_t len = 0;
    memset(owned, 0, (size_t)nparts);
    if (sl_read_file(path, 256 << 20, &text, &len) != SL_OK)
        return;
    const char *last = NULL;
    for (const char *p = strstr(text, "; owns "); p != NULL; p = strstr(p + 1, "; owns "))
        last = p;
    for (const char *p = last != NULL ? last + 7 : NULL; p != NULL && *p >= '0' && *p <= '9';) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (v >= 0 && v < nparts)
            owned[v] = 1;
        p = *end == ',' ? end + 1 : NULL;
    }
    free(text);
}

/* The sum of the numbers found right after `needle` in a log, from byte `from` on; or, with
 * before, right before it ("3 calls ..."). */
static long sum_near(const char *logname, long from, const char *needle, int before)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.log", h_tmpdir(), logname);
    char *text = NULL;
    size_t len = 0;
    long sum = 0;
    if (sl_read_file(path, 256 << 20, &text, &len) != SL_OK)
        return 0;
    for (const char *p = (long)len > from ? strstr(text + from, needle) : NULL; p != NULL;
         p = strstr(p + 1, needle)) {
        const char *d = p;
        while (before && d > text && d[-1] >= '0' && d[-1] <= '9')
            d--;
        sum += !before ? strtol(p + strlen(needle), NULL, 10) : d < p ? strtol(d, NULL, 10) : 0;
    }
    free(text);
    return sum;
}

static long sum_after(const char *logname, long from, const char *needle)
{
    return sum_near(logname, from, needle, 0);
}

static long log_size(const char *logname)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.log", h_tmpdir(), logname);
    return h_file_size(path);
}

static double wait_log(const char *logname, long from, const char *needle, int timeout_ms)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.log", h_tmpdir(), logname);
    return h_wait_log(path, from, needle, timeout_ms);
}

/* A metric of a scheduler, from its /metrics (NAN if it cannot be read). */
static double sched_metric(const char *cfg_path, const char *series)
{
    json_t *c = json_load_file(cfg_path, 0, NULL);
    const char *listen =
        json_string_value(json_object_get(json_object_get(c, "scheduler"), "metrics_listen"));
    char url[128];
    snprintf(url, sizeof url, "http://%s/metrics", listen != NULL ? listen : "");
    json_decref(c);
    char *text = h_http_text(url);
    double v = text != NULL ? h_metrics_sample(text, series) : NAN;
    free(text);
    return v;
}

/* In partitions 1, 3, 5 and 7 of 8 (the default partitioner): every scheduler of the first
 * three schedules one, and the fourth is given two with their calls in flight (the range
 * strategy gives it the last partitions), which it hands back when it leaves. */
static const char *const tenant_names[TENANTS] = {"gamma", "beta", "eta", "kappa"};

/* One SIGKILL of a scheduler, its database deleted. */
typedef struct {
    int at;          /* results in when it comes */
    int victim;      /* the scheduler killed */
    int coordinator; /* it was the capacity coordinator */
    long log_at[3];  /* each scheduler's log size at the kill */
    long in_flight;  /* its calls in flight (leased, or ended but not acknowledged) */
    int tenant[TENANTS];
    double t_kill, t_taken, t_first;
} kill_t;

/* Kills the coordinator (coordinator != 0) or a shard that is not, preferring one that
 * schedules a tenant, so that its takeover shows in the results. */
static void kill_one(kill_t *k, int coordinator, pid_t *sched, char **cfgs, int *alive)
{
    int pick = -1;
    for (int i = 0; i < 3 && pick < 0; i++)
        if (alive[i] && coordinator &&
            sched_metric(cfgs[i], "sluice_scheduler_capacity_coordinator") == 1)
            pick = i;
    for (int pass = 0; pass < 2 && !coordinator && pick < 0; pass++)
        for (int i = 0; i < 3 && pick < 0; i++) {
            if (!alive[i] || sched_metric(cfgs[i], "sluice_scheduler_capacity_coordinator") != 0)
                continue;
            char name[32];
            uint8_t owned[PARTITIONS];
            snprintf(name, sizeof name, "sched-%d", i);
            last_owned(name, owned, PARTITIONS);
            int tenants = 0;
            for (int t = 0; t < TENANTS; t++)
                tenants += owned[sl_kafka_key_partition(tenant_names[t], PARTITIONS)];
            if (tenants > 0 || pass == 1)
                pick = i;
        }
    h_check(pick >= 0, "found a live scheduler that %s the capacity coordinator to kill",
            coordinator ? "is" : "is not");
    for (int i = 0; i < 3 && pick < 0; i++)
        if (alive[i])
            pick = i;
    k->victim = pick;
    k->coordinator = coordinator;
    char name[32], db[4200];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "sched-%d", i);
        k->log_at[i] = log_size(name);
    }
    h_stop(sched[pick], SIGKILL, 5000);
    alive[pick] = 0;
    uint8_t owned[PARTITIONS];
    snprintf(name, sizeof name, "sched-%d", pick);
    last_owned(name, owned, PARTITIONS);
    for (int t = 0; t < TENANTS; t++)
        k->tenant[t] = owned[sl_kafka_key_partition(tenant_names[t], PARTITIONS)];
    /* What it had in flight: the most its successors can run again. */
    snprintf(db, sizeof db, "%s/sched-%d.db", h_tmpdir(), pick);
    k->in_flight = (long)h_sql_count(db, "SELECT COUNT(*) FROM jobs WHERE state = 'leased'") +
                   (long)h_sql_count(db, "SELECT COUNT(*) FROM outbox");
    const char *suffix[] = {"", "-wal", "-shm", ".lock"};
    for (int i = 0; i < 4; i++) {
        char path[4300];
        snprintf(path, sizeof path, "%s%s", db, suffix[i]);
        unlink(path);
    }
    k->t_kill = sl_mono_ms();
    printf("  scheduler %d (%s) killed at %d results (%ld in flight); its database deleted\n", pick,
           coordinator ? "the coordinator" : "a shard", k->at, k->in_flight);
}

/* The survivors' next assignment after a kill is its takeover. */
static void watch_takeover(kill_t *k, const int *alive)
{
    for (int i = 0; k->t_taken == 0 && i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "sched-%d", i);
        if (alive[i] && wait_log(name, k->log_at[i], "partitions kept", 1) >= 0) {
            k->t_taken = sl_mono_ms();
            printf("  the survivors were given scheduler %d's partitions %.1f s after the kill\n",
                   k->victim, (k->t_taken - k->t_kill) / 1000.0);
        }
    }
}

/* Kill -> the first result of one of its tenants once the survivors have its partitions
 * (results read before were the dead scheduler's own, still on their way): at most a call
 * more than kill -> first dispatch of a taken-over job. */
static void watch_first_result(kill_t *k, const char *tenant)
{
    for (int t = 0; k->t_taken > 0 && k->t_first == 0 && tenant != NULL && t < TENANTS; t++)
        if (k->tenant[t] && strcmp(tenant, tenant_names[t]) == 0) {
            k->t_first = sl_mono_ms();
            printf("  the first result of a tenant of scheduler %d came %.1f s after its kill\n",
                   k->victim, (k->t_first - k->t_kill) / 1000.0);
        }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("e2e shards: %d jobs of %d tenants; 3 schedulers, 2 dispatchers, 2 ingests; kill a "
           "shard, then the coordinator (databases deleted); a fourth joins and leaves\n",
           JOBS, TENANTS);
    for (int t = 0; t < TENANTS; t++) {
        char key[64];
        snprintf(key, sizeof key, "sk-e2e-shards-key-%d", t);
        h_key_hash_hex(key, key_hex[t]);
    }
    sim_port = h_free_port();
    const char *dir = h_tmpdir();
    char sim[1024];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"deployments\": [{\"name\": \"sim-a\", \"rpm\": 100000,"
             " \"tpm\": %d, \"slices_per_minute\": 10, \"ttft_ms\": 150, \"ms_per_token\": 1,"
             " \"output_min\": 20, \"output_max\": 80}]}",
             MINUTE_MS, TPM);
    char *sim_cfg = strdup(h_write("sim.json", sim));
    h_write("provider.key", "any-bearer-token\n");
    char *sched_cfg[SCHEDULERS], *disp_cfg[DISPATCHERS], *ingest_cfg[INGESTS];
    char name[32];
    for (int i = 0; i < SCHEDULERS; i++) {
        snprintf(name, sizeof name, "sched-%d", i);
        sched_cfg[i] = write_config(name);
    }
    for (int i = 0; i < DISPATCHERS; i++) {
        snprintf(name, sizeof name, "disp-%d", i);
        disp_cfg[i] = write_config(name);
    }
    for (int i = 0; i < INGESTS; i++) {
        snprintf(name, sizeof name, "ingest-%d", i);
        ingest_cfg[i] = write_config(name);
    }

    char bootstrap[256] = "";
    pid_t kafka = h_devkafka(sched_cfg[0], PARTITIONS, bootstrap, sizeof bootstrap);
    char port[16], stats_url[64];
    snprintf(port, sizeof port, "%d", sim_port);
    const char *sim_args[] = {"--config", sim_cfg, "--port", port, NULL};
    pid_t simp = h_spawn("sluice-sim", "sim", NULL, sim_args);
    snprintf(stats_url, sizeof stats_url, "http://127.0.0.1:%d/stats", sim_port);
    json_t *probe = NULL;
    for (int i = 0; i < 200 && probe == NULL; i++) {
        usleep(50 * 1000);
        probe = h_http_json(stats_url);
    }
    json_decref(probe);

    pid_t sched[SCHEDULERS] = {0}, disp[DISPATCHERS], ingest[INGESTS];
    /* E2E_DEBUG=1: the schedulers log at debug level (each job's way through). */
    const char *debug_args[] = {"--log-level", "debug", NULL};
    const char *const *sched_args = getenv("E2E_DEBUG") != NULL ? debug_args : NULL;
    /* The first one makes the signing keys; the others start once they exist. */
    sched[0] = h_spawn("sluice-scheduler", "sched-0", sched_cfg[0], sched_args);
    char pub[4200];
    snprintf(pub, sizeof pub, "%s/dispatch.pub", dir);
    h_wait_file(pub, 20000);
    for (int i = 1; i < 3; i++) {
        snprintf(name, sizeof name, "sched-%d", i);
        sched[i] = h_spawn("sluice-scheduler", name, sched_cfg[i], sched_args);
    }
    for (int i = 0; i < DISPATCHERS; i++) {
        snprintf(name, sizeof name, "disp-%d", i);
        disp[i] = h_spawn("sluice-dispatcher", name, disp_cfg[i], NULL);
    }
    for (int i = 0; i < INGESTS; i++) {
        snprintf(name, sizeof name, "ingest-%d", i);
        ingest[i] = h_spawn("sluice-ingest", name, ingest_cfg[i], NULL);
    }
    /* Each scheduler has its partitions before the jobs come. */
    int settled = 1;
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "sched-%d", i);
        settled &= wait_log(name, 0, "shard: ", 30000) >= 0;
    }
    h_check(settled, "the three schedulers joined the group and were given partitions");

    rd_kafka_t *prod = h_producer(bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(bootstrap, "sluice.results");
    double t_start = sl_mono_ms();
    for (int i = 0; i < JOBS; i++) {
        char idem[32], key[64];
        snprintf(idem, sizeof idem, "shards-%05d", i);
        snprintf(key, sizeof key, "sk-e2e-shards-key-%d", i % TENANTS);
        h_request_fact(prod, idem, key, i, 100);
    }
    rd_kafka_flush(prod, 30000);

    h_results_t res;
    h_results_init(&res);
    const char *const *names = tenant_names;
    /* Two kills, each SIGKILL and the database deleted: first a shard that is not the capacity
     * coordinator, then, once its partitions were taken over, the coordinator's. */
    kill_t kills[KILLS] = {{.at = JOBS * 5 / 12, .victim = -1},
                           {.at = JOBS * 7 / 12, .victim = -1}};
    int nkilled = 0, alive[3] = {1, 1, 1};
    int joined = 0, left = 0, joiner_status = -1;
    double deadline = sl_mono_ms() + 300000, t_joined = 0;
    int done = 0;
    /* Results per tenant in the steady state before the first kill (from an eighth of the
     * results on: every tenant has jobs waiting, the first grants are made), and the tokens
     * admitted. */
    double before_kill[TENANTS] = {0};
    double t_steady = 0, t_steady_end = 0;
    int64_t tokens_steady = 0, tokens_steady_end = 0;
    while (done < JOBS && sl_mono_ms() < deadline) {
        kill_t *k = nkilled < KILLS ? &kills[nkilled] : NULL;
        /* The next kill comes once the last one's partitions were taken over. */
        if (k != NULL && done >= k->at && (nkilled == 0 || kills[nkilled - 1].t_taken > 0)) {
            kill_one(k, nkilled == KILLS - 1, sched, sched_cfg, alive);
            nkilled++;
        }
        for (int n = 0; n < nkilled; n++)
            watch_takeover(&kills[n], alive);
        if (nkilled == KILLS && kills[KILLS - 1].t_taken > 0 && !joined && done >= JOBS * 3 / 4) {
            sched[3] = h_spawn("sluice-scheduler", "sched-3", sched_cfg[3], sched_args);
            joined = 1;
            printf("  scheduler 3 joins at %d/%d results\n", done, JOBS);
        }
        if (joined && t_joined == 0 && wait_log("sched-3", 0, "partitions kept", 1) >= 0) {
            t_joined = sl_mono_ms();
            printf("  scheduler 3 was given partitions at %d/%d results\n", done, JOBS);
        }
        /* It schedules for two seconds, or until the end is near, then leaves. */
        if (t_joined > 0 && !left && (sl_mono_ms() - t_joined > 2000 || done >= JOBS * 7 / 8)) {
            joiner_status = h_stop(sched[3], SIGTERM, 20000);
            left = 1;
            printf("  scheduler 3 left at %d/%d results (exit status %d)\n", done, JOBS,
                   joiner_status);
        }
        json_t *r = NULL;
        if (!h_poll_json(cons, 200, &r))
            continue;
        int first = h_results_take(&res, r);
        if (first && res.done == JOBS / 8) {
            json_t *st = h_http_json(stats_url);
            tokens_steady = h_sim_total(st, "tokens_charged");
            t_steady = sl_mono_ms();
            json_decref(st);
        }
        if (first && res.done == kills[0].at && nkilled == 0) {
            json_t *st = h_http_json(stats_url);
            tokens_steady_end = h_sim_total(st, "tokens_charged");
            t_steady_end = sl_mono_ms();
            json_decref(st);
        }
        const char *tn = json_string_value(json_object_get(r, "tenant"));
        if (first && nkilled == 0 && res.done > JOBS / 8) {
            for (int t = 0; tn != NULL && t < TENANTS; t++)
                before_kill[t] += strcmp(tn, names[t]) == 0;
        }
        for (int n = 0; first && n < nkilled; n++)
            watch_first_result(&kills[n], tn);
        done = res.done;
        json_decref(r);
    }
    double elapsed_s = (sl_mono_ms() - t_start) / 1000.0;
    json_t *stats = h_http_json(stats_url);
    h_check(nkilled == KILLS,
            "a shard and then the coordinator were killed, their databases deleted (%d kills)",
            nkilled);
    h_check(res.done == JOBS, "no job lost: %d/%d have a result", res.done, JOBS);
    h_check(res.ok == JOBS, "every job succeeded (%d of %d)", res.ok, JOBS);
    h_check(res.conflicting == 0, "no job has conflicting results (%d; %d delivered twice)",
            res.conflicting, res.duplicates);
    long in_flight_at_kills = 0;
    for (int n = 0; n < nkilled; n++) {
        kill_t *k = &kills[n];
        in_flight_at_kills += k->in_flight;
        int taken = 0, recoordinated = 0;
        for (int i = 0; i < 3; i++) {
            if (i == k->victim || (n > 0 && i == kills[0].victim))
                continue;
            snprintf(name, sizeof name, "sched-%d", i);
            taken |= sum_after(name, k->log_at[i], "partitions kept, ") > 0;
            /* After the coordinator's death a survivor took its role with a newer epoch. */
            recoordinated |= sum_after(name, k->log_at[i], "capacity: coordinating, epoch ") >= 2;
        }
        h_check(taken, "kill %d: the killed scheduler's partitions were taken over by the others",
                n + 1);
        if (k->coordinator)
            h_check(recoordinated,
                    "kill %d: a survivor became the capacity coordinator with a "
                    "newer epoch",
                    n + 1);
    }
    /* No shard's lease ran out unrenewed, the killed ones' included (before their kill): the
     * coordinator's role moved soon enough. */
    int lapsed = 0;
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "sched-%d", i);
        lapsed += wait_log(name, 0, "lease ran out", 1) >= 0;
    }
    h_check(lapsed == 0, "no shard's capacity lease ran out (%d did)", lapsed);
    /* Demand-following grants: each shard's share follows its tenants, so every tenant was
     * served alike while all had jobs waiting (static shares by partitions gave 0.6 - 0.9 here). */
    double sum = 0, sq = 0;
    for (int t = 0; t < TENANTS; t++) {
        sum += before_kill[t];
        sq += before_kill[t] * before_kill[t];
    }
    double jain = sq > 0 ? sum * sum / (TENANTS * sq) : 0;
    double steady = t_steady_end > t_steady ? (double)(tokens_steady_end - tokens_steady) /
                                                  ((t_steady_end - t_steady) / MINUTE_MS * TPM)
                                            : 0;
    printf("  steady state before the kills (results %d to %d): %.1f %% of the limit used, "
           "Jain %.4f over the tenants (%.0f %.0f %.0f %.0f results)\n",
           JOBS / 8, kills[0].at, 100.0 * steady, jain, before_kill[0], before_kill[1],
           before_kill[2], before_kill[3]);
    h_check(jain >= 0.99, "the tenants were served alike in the steady state: Jain %.4f", jain);
    h_check(steady >= 0.90, "the steady state used %.1f %% of the binding limit (at least 90 %%)",
            100.0 * steady);
    /* Leaving cleanly, it said so, so its part went back without waiting for its lease. */
    h_check(left && wait_log("sched-3", 0, "capacity: left", 1) >= 0,
            "the fourth scheduler's last capacity report said it left");
    h_check(joined && t_joined > 0 && left && joiner_status == 0,
            "the fourth scheduler joined, was given partitions and left cleanly (status %d)",
            joiner_status);
    int64_t refused = h_sim_total(stats, "refused");
    int64_t requests = h_sim_total(stats, "admitted") + refused;
    /* The simulator refuses what its own count of a slice (a tenth of its minute) has no room
     * for: admissions stayed within the limit throughout, both kills and the hand-overs
     * included. */
    h_check(stats != NULL && refused * 1000 <= requests,
            "the simulator's per-slice counts refused at most 0.1 %% of requests (%lld of %lld)",
            (long long)refused, (long long)requests);
    /* Handed over in flight: of the partitions a shard lost at an assignment, and everything
     * the fourth scheduler had when it left (it has no assignment after). */
    long handed_in_flight = sum_near("sched-3", 0, " calls in flight written down for it", 1);
    for (int i = 0; i < SCHEDULERS; i++) {
        snprintf(name, sizeof name, "sched-%d", i);
        handed_in_flight += sum_after(name, 0, " jobs handed over, ");
    }
    /* Calls in flight at a clean hand-over were written down and taken over by the next owner;
     * only those of a hand-over it could not take (its lease over, the job not queued yet) and
     * those in flight at the kill run again. */
    long adopted = 0;
    for (int i = 0; i < SCHEDULERS; i++) {
        snprintf(name, sizeof name, "sched-%d", i);
        adopted += sum_after(name, 0, "calls in flight taken over: ");
    }
    int64_t twice = h_sim_total(stats, "replayed") + h_sim_total(stats, "admitted") - JOBS;
    printf("  calls in flight at the hand-overs: %ld, taken over by their next owner: %ld\n",
           handed_in_flight, adopted);
    h_check(stats != NULL && twice <= in_flight_at_kills + (handed_in_flight - adopted),
            "calls made twice (%lld) are at most those in flight at the kills (%ld) and those of "
            "the hand-overs not taken over (%ld)",
            (long long)twice, in_flight_at_kills, handed_in_flight - adopted);
    int64_t tokens = h_sim_total(stats, "tokens_charged");
    printf("  %.1f s for %d jobs; %lld tokens admitted: %.0f %% of the limit over the run "
           "(the start, the kills and the rebalances included)\n",
           elapsed_s, JOBS, (long long)tokens,
           100.0 * (double)tokens / (elapsed_s * 1000.0 / MINUTE_MS * TPM));
    json_decref(stats);
    /* What operators see: exactly one coordinator among the survivors, in a newer epoch. */
    int coordinators = 0, newer = 0, survivors = 0, metrics_ok = 1;
    for (int i = 0; i < 3; i++) {
        if (!alive[i])
            continue;
        survivors++;
        json_t *c = json_load_file(sched_cfg[i], 0, NULL);
        const char *listen =
            json_string_value(json_object_get(json_object_get(c, "scheduler"), "metrics_listen"));
        char url[128];
        snprintf(url, sizeof url, "http://%s/metrics", listen != NULL ? listen : "");
        char *text = h_http_text(url);
        coordinators += h_metrics_sample(text, "sluice_scheduler_capacity_coordinator") == 1;
        newer += h_metrics_sample(text, "sluice_scheduler_capacity_epoch") >= 2;
        metrics_ok &= text != NULL && h_promtool_check(text) == 0;
        free(text);
        json_decref(c);
    }
    h_check(coordinators == 1 && newer == survivors,
            "/metrics: one coordinator among the %d survivors (%d), each in a newer epoch (%d)",
            survivors, coordinators, newer);
    h_check(metrics_ok, "the survivors' /metrics pass promtool");
    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);

    int unclean = 0;
    for (int i = 0; i < INGESTS; i++)
        unclean += h_stop(ingest[i], SIGTERM, 20000) != 0;
    for (int i = 0; i < DISPATCHERS; i++)
        unclean += h_stop(disp[i], SIGTERM, 20000) != 0;
    for (int i = 0; i < 3; i++) {
        if (alive[i] && nkilled < KILLS)
            h_stop(sched[i], SIGKILL, 5000); /* it failed on the way: no time to lose */
        else if (alive[i])
            unclean += h_stop(sched[i], SIGTERM, 20000) != 0;
    }
    if (joined && !left)
        h_stop(sched[3], SIGKILL, 5000);
    h_stop(simp, SIGTERM, 5000);
    h_stop(kafka, SIGTERM, 5000);
    h_check(unclean == 0, "every remaining process stopped cleanly on SIGTERM (%d did not)",
            unclean);
    h_results_free(&res);
    for (int i = 0; i < SCHEDULERS; i++)
        free(sched_cfg[i]);
    for (int i = 0; i < DISPATCHERS; i++)
        free(disp_cfg[i]);
    for (int i = 0; i < INGESTS; i++)
        free(ingest_cfg[i]);
    free(sim_cfg);
    int rc = h_summary("shards");
    h_cleanup(rc != 0);
    return rc;
}
