/* e2e_batch - a backfill through the providers' batch APIs (routes[].batch auto) on all four
 * provider APIs of the simulator, with interactive traffic on the same deployments, and the
 * scheduler SIGKILLed while batches are in progress.
 *
 * Four deployments (oa: OpenAI, az: Azure, an: Anthropic, ge: Gemini), each with a batch API in
 * the simulator: a 2 s turnaround, an enqueued-token limit that binds (sluice plans with 80 % of
 * it), 2 % of lines answered with a server error and 2 % expired, and at most 30 batch creates
 * a minute (a 429 past that). Two tenants submit the backfill (E2E_BATCH_JOBS jobs, 2,000 by
 * default, 500 under the sanitizers, 20,000 for the volume) across the four routes;
 * meanwhile one interactive job every 20 ms goes to the same deployments online. The scheduler is
 * SIGKILLed once two fifths of the backfill is answered, and restarted.
 *
 * Asserts: every job has exactly one terminal result, and succeeded; every backfill job was
 * served by a batch API (path batch, deployment "<name>/batch", cost half its online cost);
 * every interactive one online; the interactive p99 queue wait of the jobs answered while the
 * backfill ran (before the kill) stays within 250 ms, and is printed beside the same traffic's
 * alone, for the backfill's tenants and for a third tenant with interactive jobs only, whose
 * partition of the jobs topic is not theirs (a tenant's jobs share its partition, so the
 * backfill's tenants wait behind what ingest let of their batch work ahead of them; another
 * tenant does not); the simulator never held more enqueued
 * tokens than its limit and failed no batch for it; no line ran twice (lines_duplicate 0 on
 * every deployment, across the crash); no online 429; the scheduler counted batches collected.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hmap.h"
#include "kafka.h"
#include "sign.h"
#include "util.h"

enum { MINUTE_MS = 60000, SIM_ENQUEUED = 6000, INTERACTIVE_EVERY_MS = 20, BASE_INTERACTIVE = 150 };

static const char *const DEPS[4] = {"oa", "az", "an", "ge"};
/* The tenant with interactive jobs only (key 3): the first of t3, t4, ... whose partition of
 * the jobs topic (16 partitions, as the harness starts the broker) is neither t1's nor t2's. */
static char other_tenant[16];

static void pick_other_tenant(void)
{
    int p1 = sl_kafka_key_partition("t1", 16), p2 = sl_kafka_key_partition("t2", 16);
    for (int n = 3; n < 100; n++) {
        snprintf(other_tenant, sizeof other_tenant, "t%d", n);
        int p = sl_kafka_key_partition(other_tenant, 16);
        if (p != p1 && p != p2)
            return;
    }
}
static int g_killed; /* the scheduler was killed: results taken now are not "before the kill" */

static const char *write_configs(int sim_port, int metrics_port, char **sim_cfg)
{
    const char *dir = h_tmpdir();
    char h1[65], h2[65], h3[65];
    h_key_hash_hex("sk-e2e-batch-1", h1);
    h_key_hash_hex("sk-e2e-batch-2", h2);
    h_key_hash_hex("sk-e2e-batch-3", h3);
    static const char *const apis[4] = {"openai", "azure", "anthropic", "gemini"};
    char sim[4096] = "";
    int n = snprintf(sim, sizeof sim, "{\"minute_ms\": %d, \"deployments\": [", MINUTE_MS);
    for (int i = 0; i < 4; i++)
        n += snprintf(sim + n, sizeof sim - (size_t)n,
                      "%s{\"name\": \"%s\", \"api\": \"%s\", \"rpm\": 30000, \"tpm\": 30000000,"
                      " \"ttft_ms\": 5, \"ms_per_token\": 0.05, \"api_key\": \"key-%s\","
                      " \"batch\": {\"turnaround_ms\": 2000, \"enqueued_tokens\": %d,"
                      " \"line_error_share\": 0.02, \"expire_share\": 0.02,"
                      " \"creates_per_minute\": 30}}",
                      i ? ", " : "", DEPS[i], apis[i], DEPS[i], SIM_ENQUEUED);
    snprintf(sim + n, sizeof sim - (size_t)n, "]}");
    *sim_cfg = strdup(h_write("sim.json", sim));
    char deps[8192] = "", routes[2048] = "";
    int dn = 0, rn = 0;
    static const char *const urls[4] = {"%s/oa/v1", "%s/az/openai/deployments/az", "%s/an/v1",
                                        "%s/ge/v1beta"};
    for (int i = 0; i < 4; i++) {
        char base[128], url[256], key[600];
        snprintf(base, sizeof base, "http://127.0.0.1:%d", sim_port);
        snprintf(url, sizeof url, urls[i], base);
        char kname[32], kval[32];
        snprintf(kname, sizeof kname, "provider-%s.key", DEPS[i]);
        snprintf(kval, sizeof kval, "key-%s\n", DEPS[i]);
        snprintf(key, sizeof key, "%s", h_write(kname, kval));
        dn += snprintf(deps + dn, sizeof deps - (size_t)dn,
                       "%s{\"name\": \"%s\", \"provider\": \"%s\", \"model\": \"m-%s\","
                       " \"base_url\": \"%s\", \"api_key_file\": \"%s\","
                       " \"limits\": {\"rpm\": 30000, \"tpm\": 30000000},"
                       " \"price\": {\"input_per_mtok\": 2.0, \"output_per_mtok\": 8.0},"
                       " \"batch\": {\"enqueued_tokens\": %d, \"max_requests\": 150,"
                       "  \"linger_ms\": 300, \"poll_ms\": 400, \"answer_ms\": 4000,"
                       "  \"window_ms\": 60000, \"auto_min_left_ms\": 30000}}",
                       i ? ", " : "", DEPS[i], apis[i], DEPS[i], url, key, SIM_ENQUEUED * 8 / 10);
        rn += snprintf(routes + rn, sizeof routes - (size_t)rn,
                       "%s{\"name\": \"r-%s\", \"deployments\": [\"%s\"], \"batch\": \"auto\"}",
                       i ? ", " : "", DEPS[i], DEPS[i]);
    }
    char cfg[16384];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %d,"
             " \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\", \"lease_ms\": 20000,"
             "                 \"admin_listen\": \"\", \"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"classes\": {\"batch\": {\"deadline_ms\": 600000, \"max_queue\": 100000}},"
             " \"deployments\": [%s], \"routes\": [%s],"
             " \"tenants\": [{\"name\": \"t1\"}, {\"name\": \"t2\"}, {\"name\": \"%s\"}],"
             " \"keys\": [{\"id\": \"k1\", \"tenant\": \"t1\", \"hash\": \"%s\"},"
             "            {\"id\": \"k2\", \"tenant\": \"t2\", \"hash\": \"%s\"},"
             "            {\"id\": \"k3\", \"tenant\": \"%s\", \"hash\": \"%s\"}]}",
             MINUTE_MS, dir, dir, metrics_port, dir, dir, deps, routes, other_tenant, h1, h2,
             other_tenant, h3);
    return strdup(h_write("sluice.json", cfg));
}

static void submit(rd_kafka_t *prod, const char *idem, int tenant, int dep, int batch)
{
    char req[600];
    int n = snprintf(req, sizeof req,
                     "{\"idempotency_key\": \"%s\", \"api_key\": \"sk-e2e-batch-%d\","
                     " \"route\": \"r-%s\", \"class\": \"%s\","
                     " \"request\": {\"messages\": [{\"role\": \"user\","
                     " \"content\": \"summarise record %s of the backfill\"}],"
                     " \"max_tokens\": 20}}",
                     idem, tenant, DEPS[dep], batch ? "batch" : "interactive", idem);
    h_produce(prod, batch ? "sluice.requests.batch" : "sluice.requests", idem, req, (size_t)n);
}

typedef struct tally {
    int results, duplicates, ok, bad_path, bad_cost, online;
    double waits[100000];
    int nwaits;
    struct tally *pre; /* where the waits of jobs submitted before the kill also go */
} tally_t;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double p99(tally_t *t)
{
    if (t->nwaits == 0)
        return 0;
    qsort(t->waits, (size_t)t->nwaits, sizeof t->waits[0], cmp_double);
    return t->waits[(int)((t->nwaits - 1) * 0.99)];
}

/* One result: counted in the tally of its kind (backfill keys start "bf-", interactive "ia-";
 * the other tenant's interactive "io-", counted in ia too and in io). */
static void take(sl_hmap_t *seen, json_t *r, tally_t *bf, tally_t *ia, tally_t *io)
{
    const char *id = json_string_value(json_object_get(r, "idempotency_key"));
    const char *status = json_string_value(json_object_get(r, "status"));
    if (id == NULL || status == NULL)
        return;
    int other = strncmp(id, "io-", 3) == 0;
    tally_t *t = strncmp(id, "bf-", 3) == 0 ? bf : strncmp(id, "ia-", 3) == 0 || other ? ia : NULL;
    /* Interactive jobs answered before the scheduler was killed: their waits are the
     * backfill's effect alone, not the restart's (a job in flight at the kill can wait for its
     * lease to expire). */
    tally_t *pre = t != ia ? NULL : other && io != NULL ? io : ia->pre;
    if (pre != NULL && !g_killed && pre->nwaits < (int)(sizeof pre->waits / sizeof pre->waits[0])) {
        json_t *timings = json_object_get(r, "timings");
        pre->waits[pre->nwaits++] = json_number_value(json_object_get(timings, "queued_ms"));
    }
    if (t == NULL)
        return;
    if (sl_hmap_get(seen, id) != NULL) {
        t->duplicates++;
        return;
    }
    sl_hmap_put(seen, id, strdup(status));
    t->results++;
    if (strcmp(status, "succeeded") != 0) {
        fprintf(stderr, "  %s: %s (%s)\n", id, status,
                json_string_value(json_object_get(json_object_get(r, "error"), "message")));
        return;
    }
    t->ok++;
    const char *path = json_string_value(json_object_get(r, "path"));
    const char *dep = json_string_value(json_object_get(r, "deployment"));
    int by_batch =
        path != NULL && strcmp(path, "batch") == 0 && dep != NULL && strstr(dep, "/batch") != NULL;
    t->online += path != NULL && strcmp(path, "online") == 0;
    if (t == bf) {
        t->bad_path += !by_batch;
        double cost = json_number_value(json_object_get(r, "cost_usd"));
        double online = json_number_value(json_object_get(r, "online_cost_usd"));
        t->bad_cost += !(cost > 0 && fabs(online - 2 * cost) < 1e-9);
    } else {
        t->bad_path += by_batch;
        json_t *timings = json_object_get(r, "timings");
        if (t->nwaits < (int)(sizeof t->waits / sizeof t->waits[0]))
            t->waits[t->nwaits++] = json_number_value(json_object_get(timings, "queued_ms"));
    }
}

int main(void)
{
    sl_crypto_init();
    const char *env = getenv("E2E_BATCH_JOBS");
    /* Under the sanitizers a quarter of the volume: that phase is for memory errors. */
    int jobs = env != NULL && atoi(env) > 0 ? atoi(env) : h_sanitizers() ? 500 : 2000;
    printf("e2e batch: %d backfill jobs through the four providers' batch APIs (auto), with "
           "interactive traffic, and a scheduler SIGKILL midway\n",
           jobs);
    int sim_port = h_free_port();
    int metrics_port = h_free_port();
    char *sim_cfg = NULL;
    pick_other_tenant();
    const char *cfg = write_configs(sim_port, metrics_port, &sim_cfg);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    sl_hmap_t *seen = sl_hmap_new();
    static tally_t bf, ia, base, ia_pre, io_pre;
    ia.pre = &ia_pre;

    /* Warm-up: every process has joined its group before anything is measured. */
    static tally_t warm;
    for (int i = 0; i < 8; i++) {
        char idem[32];
        snprintf(idem, sizeof idem, "ia-warm-%d", i);
        submit(prod, idem, 1 + i % 2, i % 4, 0);
    }
    rd_kafka_flush(prod, 10000);
    for (double w = sl_mono_ms() + 30000; warm.results < 8 && sl_mono_ms() < w;) {
        json_t *r = NULL;
        if (h_poll_json(cons, 200, &r)) {
            take(seen, r, &bf, &warm, NULL);
            json_decref(r);
        }
    }
    h_check(warm.ok == 8, "warm-up: 8 interactive jobs succeeded (%d)", warm.ok);
    /* The interactive traffic alone first: its queue wait without the backfill. */
    for (int i = 0; i < BASE_INTERACTIVE; i++) {
        char idem[32];
        snprintf(idem, sizeof idem, "ia-base-%04d", i);
        submit(prod, idem, 1 + i % 2, i % 4, 0);
        rd_kafka_poll(prod, 0);
        usleep(INTERACTIVE_EVERY_MS * 1000);
        json_t *r = NULL;
        while (h_poll_json(cons, 0, &r)) {
            take(seen, r, &bf, &base, NULL);
            json_decref(r);
        }
    }
    double until = sl_mono_ms() + 20000;
    while (base.results < BASE_INTERACTIVE && sl_mono_ms() < until) {
        json_t *r = NULL;
        if (h_poll_json(cons, 200, &r)) {
            take(seen, r, &bf, &base, NULL);
            json_decref(r);
        }
    }
    double base_p99 = p99(&base);
    printf("  interactive alone: %d/%d succeeded, queue wait p99 %.1f ms\n", base.ok,
           BASE_INTERACTIVE, base_p99);

    /* The backfill, and the interactive traffic beside it until the backfill is answered. */
    double t0 = sl_mono_ms();
    for (int i = 0; i < jobs; i++) {
        char idem[32];
        snprintf(idem, sizeof idem, "bf-%06d", i);
        submit(prod, idem, 1 + i % 2, (i / 2) % 4, 1);
        if (i % 1000 == 999)
            rd_kafka_poll(prod, 0);
    }
    rd_kafka_flush(prod, 30000);
    int submitted_ia = 0, killed = 0;
    double next_ia = sl_mono_ms();
    double deadline = sl_mono_ms() + 120000 + (double)jobs * 20;
    while ((bf.results < jobs || ia.results < submitted_ia) && sl_mono_ms() < deadline) {
        if (bf.results < jobs && sl_mono_ms() >= next_ia) {
            char idem[32];
            int tenant = 1 + submitted_ia % 3;
            snprintf(idem, sizeof idem, "%s-%06d", tenant == 3 ? "io" : "ia", submitted_ia);
            submit(prod, idem, tenant, submitted_ia % 4, 0);
            rd_kafka_poll(prod, 0);
            submitted_ia++;
            next_ia += INTERACTIVE_EVERY_MS;
        }
        if (!killed && bf.results >= jobs * 2 / 5) {
            g_killed = 1;
            h_stop(st.sched, SIGKILL, 5000);
            json_t *s = h_http_json(st.stats_url);
            long long created = 0;
            for (int i = 0; s != NULL && i < 4; i++)
                created += json_integer_value(json_object_get(
                    json_object_get(json_object_get(json_object_get(s, "deployments"), DEPS[i]),
                                    "batch"),
                    "batches_created"));
            printf("  scheduler killed at %d/%d backfill results (%lld provider batches created "
                   "so far)\n",
                   bf.results, jobs, created);
            json_decref(s);
            usleep(300 * 1000);
            st.sched = h_spawn("sluice-scheduler", "scheduler-2", cfg, NULL);
            killed = 1;
        }
        json_t *r = NULL;
        if (h_poll_json(cons, 5, &r)) {
            take(seen, r, &bf, &ia, &io_pre);
            json_decref(r);
        }
    }
    double wall_s = (sl_mono_ms() - t0) / 1000.0;
    /* late duplicates (a result re-sent after the restart) */
    until = sl_mono_ms() + 2000;
    while (sl_mono_ms() < until) {
        json_t *r = NULL;
        if (h_poll_json(cons, 100, &r)) {
            take(seen, r, &bf, &ia, &io_pre);
            json_decref(r);
        }
    }
    double ia_p99 = p99(&ia), pre_p99 = p99(&ia_pre), other_p99 = p99(&io_pre);
    printf("  backfill: %d/%d results, %d succeeded, %d not by a batch API, %d mispriced, in "
           "%.1f s\n",
           bf.results, jobs, bf.ok, bf.bad_path, bf.bad_cost, wall_s);
    printf("  interactive beside it: %d/%d results, %d succeeded online; the backfill's "
           "tenants' queue wait p99 %.1f ms of those answered before the kill (n = %d); all "
           "of them %.1f ms over the whole run, the restart included (alone %.1f ms)\n",
           ia.results, submitted_ia, ia.online, pre_p99, ia_pre.nwaits, ia_p99, base_p99);
    printf("  of them, tenant %s's (no backfill, another partition): queue wait p99 %.1f ms "
           "before the kill (n = %d)\n",
           other_tenant, other_p99, io_pre.nwaits);

    h_check(killed, "the scheduler was SIGKILLed and restarted midway");
    h_check(bf.results == jobs && bf.ok == jobs,
            "every backfill job has one result, and succeeded (%d results, %d succeeded of %d)",
            bf.results, bf.ok, jobs);
    h_check(bf.bad_path == 0, "every backfill job was served by a batch API (%d were not)",
            bf.bad_path);
    h_check(bf.bad_cost == 0, "each at half its online cost (%d not)", bf.bad_cost);
    h_check(ia.results == submitted_ia && ia.ok == submitted_ia && ia.online == submitted_ia &&
                base.ok == BASE_INTERACTIVE,
            "every interactive job succeeded online (%d of %d beside the backfill, %d of %d "
            "alone)",
            ia.online, submitted_ia, base.ok, BASE_INTERACTIVE);
    /* The interactive jobs use no batch capacity and none of theirs goes to the backfill; what
     * they share is this machine's two cores with the backfill's intake and Kafka traffic
     * (about 50 ms at the p99 here, against 2 - 3 ms alone). The bar is the interactive target
     * the scenarios hold (250 ms), or three times the wait alone when that is more. */
    double bar = base_p99 * 3 + 50 > 250 ? base_p99 * 3 + 50 : 250;
    if (!h_sanitizers())
        h_check(
            ia_pre.nwaits >= 20 && pre_p99 <= bar,
            "the backfill's tenants' interactive queue wait p99 %.1f ms beside it (n = %d), within "
            "%.1f ms (alone: %.1f ms)",
            pre_p99, ia_pre.nwaits, bar, base_p99);
    if (!h_sanitizers())
        h_check(io_pre.nwaits >= 10 && other_p99 <= bar,
                "tenant %s's interactive queue wait p99 %.1f ms beside the others' backfill "
                "(n = %d), within %.1f ms",
                other_tenant, other_p99, io_pre.nwaits, bar);
    else /* instrumented, the scheduler's loop takes the backfill in several times slower: that
          * phase is for memory errors (seen: 61 - 429 ms) */
        printf("  interactive queue wait p99 %.1f ms (no bar under the sanitizers)\n", pre_p99);

    json_t *stats = h_http_json(st.stats_url);
    int64_t over = 0, failed_limit = 0, dup = 0, created = 0, refused = 0, errored = 0, expired = 0;
    for (int i = 0; i < 4; i++) {
        json_t *b = json_object_get(json_object_get(json_object_get(stats, "deployments"), DEPS[i]),
                                    "batch");
        int64_t peak = json_integer_value(json_object_get(b, "enqueued_tokens_peak"));
        over += peak > SIM_ENQUEUED;
        failed_limit += json_integer_value(json_object_get(b, "failed_token_limit"));
        dup += json_integer_value(json_object_get(b, "lines_duplicate"));
        created += json_integer_value(json_object_get(b, "batches_created"));
        refused += json_integer_value(json_object_get(b, "creates_refused"));
        errored += json_integer_value(json_object_get(b, "lines_errored"));
        expired += json_integer_value(json_object_get(b, "lines_expired"));
        printf("  %s: %lld batches, peak %lld of %d enqueued tokens, %lld lines (%lld errored, "
               "%lld expired, %lld run twice), %lld creates refused\n",
               DEPS[i], (long long)json_integer_value(json_object_get(b, "batches_created")),
               (long long)peak, SIM_ENQUEUED,
               (long long)json_integer_value(json_object_get(b, "lines")),
               (long long)json_integer_value(json_object_get(b, "lines_errored")),
               (long long)json_integer_value(json_object_get(b, "lines_expired")),
               (long long)json_integer_value(json_object_get(b, "lines_duplicate")),
               (long long)json_integer_value(json_object_get(b, "creates_refused")));
    }
    h_check(stats != NULL && over == 0 && failed_limit == 0,
            "the enqueued-token limit was never exceeded (%lld deployments over, %lld batches "
            "failed for it)",
            (long long)over, (long long)failed_limit);
    h_check(stats != NULL && dup == 0, "no line ran twice (%lld duplicates)", (long long)dup);
    h_check(created > 0 && errored > 0 && expired > 0,
            "the simulator's batches had errored (%lld) and expired (%lld) lines, which ran "
            "again",
            (long long)errored, (long long)expired);
    h_check(stats != NULL && h_sim_total(stats, "refused") == 0,
            "no online 429 (%lld); batch creates refused by the storm limit: %lld",
            (long long)h_sim_total(stats, "refused"), (long long)refused);
    json_decref(stats);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", metrics_port);
    char *metrics = h_http_text(url);
    double collected =
        metrics ? h_metrics_sample(metrics, "sluice_scheduler_provider_batches_collected_total")
                : -1;
    h_check(collected > 0, "the restarted scheduler collected provider batches (%.0f)", collected);
    free(metrics);

    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    rd_kafka_destroy(prod);
    h_free_string_map(seen);
    int bad = h_stack_down(&st);
    h_check(bad == 0, "every process exited cleanly (%d did not)", bad);
    free(sim_cfg);
    free((char *)cfg);
    int rc = h_summary("batch");
    h_cleanup(rc != 0);
    return rc;
}
