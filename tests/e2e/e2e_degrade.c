/* e2e_degrade - the `degrade` overload action over real processes: a burst past an interactive
 * route's capacity is served by its cheaper route instead of waiting past its deadline.
 *
 * Route "premium" (deployment "premium", 60 requests a 3-second minute: 20 a second) degrades
 * to route "economy" (deployment "economy", a hundred times more). The interactive class has
 * overload "degrade" and a 4 s deadline. A burst of 200 interactive jobs that allow it
 * ("degrade": true) and 40 that do not comes at once: premium can serve about 80 of them in
 * time.
 *
 * Asserts: every job that allows degrade succeeds, none expires, the premium deployment serving
 * about its limit's worth and the economy one the rest, each of those with degraded_from
 * "premium"; the jobs that do not allow it are never served by economy (they wait on premium,
 * and may expire there); the simulator answers 429 zero times; the scheduler's
 * sluice_scheduler_degraded_total counts the degraded ones exactly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hmap.h"
#include "sign.h"
#include "util.h"

enum { MINUTE_MS = 3000, ALLOWING = 200, STRICT = 40, QUEUE = 250, DEADLINE_MS = 4000 };

static const char *write_configs(int sim_port, int metrics_port, char **sim_cfg)
{
    const char *dir = h_tmpdir();
    char h1[65];
    h_key_hash_hex("sk-e2e-degrade", h1);
    char sim[1024];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"deployments\": ["
             " {\"name\": \"premium\", \"rpm\": 60, \"slices_per_minute\": 6, \"ttft_ms\": 10,"
             "  \"ms_per_token\": 0.1, \"api_key\": \"e2e-provider-key\"},"
             " {\"name\": \"economy\", \"rpm\": 6000, \"slices_per_minute\": 6, \"ttft_ms\": 10,"
             "  \"ms_per_token\": 0.1, \"api_key\": \"e2e-provider-key\"}]}",
             MINUTE_MS);
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "e2e-provider-key\n"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %d,"
             " \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\", \"lease_ms\": 20000,"
             "                 \"admin_listen\": \"\", \"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"classes\": {\"interactive\": {\"max_queue\": %d, \"overload\": \"degrade\","
             "               \"deadline_ms\": %d}},"
             " \"deployments\": ["
             "  {\"name\": \"premium\", \"model\": \"m\", \"api_key_file\": \"%s\","
             "   \"base_url\": \"http://127.0.0.1:%d/premium/v1\", \"limits\": {\"rpm\": 60},"
             "   \"slices_per_minute\": 6},"
             "  {\"name\": \"economy\", \"model\": \"m\", \"api_key_file\": \"%s\","
             "   \"base_url\": \"http://127.0.0.1:%d/economy/v1\", \"limits\": {\"rpm\": 6000},"
             "   \"slices_per_minute\": 6}],"
             " \"routes\": [{\"name\": \"premium\", \"deployments\": [\"premium\"],"
             "               \"degrade_to\": \"economy\"},"
             "              {\"name\": \"economy\", \"deployments\": [\"economy\"]}],"
             " \"tenants\": [{\"name\": \"t1\"}],"
             " \"keys\": [{\"id\": \"k1\", \"tenant\": \"t1\", \"hash\": \"%s\"}]}",
             MINUTE_MS, dir, dir, metrics_port, dir, dir, QUEUE, DEADLINE_MS, keyfile, sim_port,
             keyfile, sim_port, h1);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

static void submit_one(rd_kafka_t *prod, const char *idem, int degrade)
{
    char req[512];
    int n = snprintf(req, sizeof req,
                     "{\"idempotency_key\": \"%s\", \"api_key\": \"sk-e2e-degrade\","
                     " \"route\": \"premium\", \"class\": \"interactive\", %s"
                     " \"request\": {\"messages\": [{\"role\": \"user\","
                     " \"content\": \"hello\"}], \"max_tokens\": 10}}",
                     idem, degrade ? "\"degrade\": true," : "");
    h_produce(prod, "sluice.requests", idem, req, (size_t)n);
}

typedef struct {
    int ok, queue_full, expired, other;
    int premium, economy;
    int degraded;     /* results with degraded_from "premium" */
    int bad_degraded; /* degraded_from on a job served by premium, or naming another route */
} tally_t;

/* Reads results until want of the jobs whose key starts with "allow-" or "strict-" arrived,
 * counting each in its own tally. */
static void read_results(rd_kafka_t *cons, sl_hmap_t *seen, int want, int timeout_ms,
                         tally_t *allow, tally_t *strict)
{
    int got = 0;
    double deadline = sl_mono_ms() + timeout_ms;
    while (got < want && sl_mono_ms() < deadline) {
        json_t *r = NULL;
        if (!h_poll_json(cons, 200, &r))
            continue;
        const char *id = json_string_value(json_object_get(r, "idempotency_key"));
        const char *status = json_string_value(json_object_get(r, "status"));
        const char *dep = json_string_value(json_object_get(r, "deployment"));
        const char *from = json_string_value(json_object_get(r, "degraded_from"));
        const char *reason =
            json_string_value(json_object_get(json_object_get(r, "error"), "reason"));
        tally_t *t = id == NULL                         ? NULL
                     : strncmp(id, "allow-", 6) == 0   ? allow
                     : strncmp(id, "strict-", 7) == 0 ? strict
                                                       : NULL;
        if (t != NULL && status != NULL && sl_hmap_get(seen, id) == NULL) {
            sl_hmap_put(seen, id, strdup(status));
            got++;
            if (strcmp(status, "succeeded") == 0)
                t->ok++;
            else if (strcmp(status, "expired") == 0)
                t->expired++;
            else if (reason != NULL && strcmp(reason, "queue_full") == 0)
                t->queue_full++;
            else
                t->other++;
            int on_economy = dep != NULL && strcmp(dep, "economy") == 0;
            t->premium += dep != NULL && strcmp(dep, "premium") == 0;
            t->economy += on_economy;
            if (from != NULL && strcmp(from, "premium") == 0 && on_economy)
                t->degraded++;
            else if (from != NULL)
                t->bad_degraded++;
        }
        json_decref(r);
    }
}

int main(void)
{
    sl_crypto_init();
    printf("e2e degrade: a burst past the interactive route's capacity goes to its cheaper "
           "route\n");
    int sim_port = h_free_port();
    int metrics_port = h_free_port();
    char *sim_cfg = NULL;
    const char *cfg = write_configs(sim_port, metrics_port, &sim_cfg);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    sl_hmap_t *seen = sl_hmap_new();

    /* warm-up: one job, so every process has joined its group before the burst */
    submit_one(prod, "allow-warm", 1);
    rd_kafka_flush(prod, 10000);
    tally_t warm = {0};
    read_results(cons, seen, 1, 30000, &warm, &warm);
    h_check(warm.ok == 1 && warm.premium == 1, "warm-up job succeeded on premium");
    /* its call took one request of premium's first slice: let the minute pass */
    usleep(MINUTE_MS * 1000);

    double t0 = sl_mono_ms();
    for (int i = 0; i < ALLOWING + STRICT; i++) {
        char idem[32];
        /* the strict jobs are spread through the burst */
        int strict = i % ((ALLOWING + STRICT) / STRICT) == 0;
        snprintf(idem, sizeof idem, "%s-%03d", strict ? "strict" : "allow", i);
        submit_one(prod, idem, !strict);
    }
    rd_kafka_flush(prod, 10000);
    tally_t allow = {0}, strict = {0};
    read_results(cons, seen, ALLOWING + STRICT, 60000, &allow, &strict);
    double burst_s = (sl_mono_ms() - t0) / 1000.0;

    printf("  allowing degrade: %d succeeded (%d on premium, %d on economy, %d degraded), "
           "%d expired, %d queue_full, %d other, in %.1f s\n",
           allow.ok, allow.premium, allow.economy, allow.degraded, allow.expired,
           allow.queue_full, allow.other, burst_s);
    printf("  not allowing it: %d succeeded (%d on premium, %d on economy), %d queue_full, "
           "%d expired, %d other\n",
           strict.ok, strict.premium, strict.economy, strict.queue_full, strict.expired,
           strict.other);
    h_check(allow.ok == ALLOWING, "every job that allows degrade succeeded (%d of %d)", allow.ok,
            ALLOWING);
    /* Premium takes 20 a second, plus the slice it starts with. */
    double premium_cap = 20.0 * burst_s + 10;
    h_check(allow.premium + strict.premium <= premium_cap && allow.economy > 0,
            "premium served %d (its limit allows about %.0f in %.1f s), economy the other %d",
            allow.premium + strict.premium, premium_cap, burst_s, allow.economy);
    h_check(allow.degraded == allow.economy && allow.bad_degraded == 0 &&
                strict.bad_degraded == 0,
            "every job served by economy says degraded_from premium, and no other does (%d of "
            "%d; %d wrong)",
            allow.degraded, allow.economy, allow.bad_degraded + strict.bad_degraded);
    h_check(strict.economy == 0 && strict.ok + strict.expired == STRICT,
            "jobs that do not allow degrade stay on premium (%d succeeded, %d expired there, %d "
            "on economy)",
            strict.ok, strict.expired, strict.economy);
    h_check(allow.expired == 0, "no job that allows degrade expired (%d)", allow.expired);

    json_t *stats = h_http_json(st.stats_url);
    h_check(stats != NULL && h_sim_total(stats, "refused") == 0,
            "the simulator answered 429 zero times (%lld)",
            (long long)h_sim_total(stats, "refused"));
    json_decref(stats);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", metrics_port);
    /* the exporter refreshes once a second */
    double counted = -1;
    for (double until = sl_mono_ms() + 5000; counted != allow.degraded && sl_mono_ms() < until;) {
        char *metrics = h_http_text(url);
        counted = metrics != NULL ? h_metrics_sample(metrics, "sluice_scheduler_degraded_total")
                                  : -1;
        free(metrics);
        if (counted != allow.degraded)
            usleep(250 * 1000);
    }
    h_check(counted == allow.degraded, "sluice_scheduler_degraded_total says %.0f (%d degraded)",
            counted, allow.degraded);

    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    rd_kafka_destroy(prod);
    h_free_string_map(seen);
    int bad = h_stack_down(&st);
    h_check(bad == 0, "every process exited cleanly (%d did not)", bad);
    free(sim_cfg);
    free((char *)cfg);
    int rc = h_summary("degrade");
    h_cleanup(rc != 0);
    return rc;
}
