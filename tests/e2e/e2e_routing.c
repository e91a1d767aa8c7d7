/* e2e_routing - a pool of two deployments with the waterfall strategy, over real processes.
 *
 * "primary" takes 60 requests a 3-second minute (20 a second), "secondary" ten times more.
 * A burst of 300 jobs is more than the primary can take: the overflow goes to the secondary.
 * Then a trickle of 5 jobs a second, well within the primary's limit, goes back to it alone.
 * Asserts: every job succeeds; in the burst both deployments serve (the primary about its
 * limit's worth); in the trickle at least 95 % go to the primary; the simulator answers 429
 * zero times.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hmap.h"
#include "sign.h"
#include "util.h"

enum { MINUTE_MS = 3000, BURST = 300, TRICKLE = 30, TRICKLE_PER_S = 5 };

static const char *write_configs(int sim_port, char **sim_cfg)
{
    const char *dir = h_tmpdir();
    char h1[65];
    h_key_hash_hex("sk-e2e-routing", h1);
    char sim[1024];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"deployments\": ["
             " {\"name\": \"primary\", \"rpm\": 60, \"slices_per_minute\": 6, \"ttft_ms\": 10,"
             "  \"ms_per_token\": 0.1, \"api_key\": \"e2e-provider-key\"},"
             " {\"name\": \"secondary\", \"rpm\": 600, \"slices_per_minute\": 6, \"ttft_ms\": 10,"
             "  \"ms_per_token\": 0.1, \"api_key\": \"e2e-provider-key\"}]}",
             MINUTE_MS);
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "e2e-provider-key\n"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %d,"
             " \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\", \"lease_ms\": 20000,"
             "                 \"admin_listen\": \"\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": ["
             "  {\"name\": \"primary\", \"model\": \"m\", \"api_key_file\": \"%s\","
             "   \"base_url\": \"http://127.0.0.1:%d/primary/v1\", \"limits\": {\"rpm\": 60},"
             "   \"slices_per_minute\": 6},"
             "  {\"name\": \"secondary\", \"model\": \"m\", \"api_key_file\": \"%s\","
             "   \"base_url\": \"http://127.0.0.1:%d/secondary/v1\", \"limits\": {\"rpm\": 600},"
             "   \"slices_per_minute\": 6}],"
             " \"routes\": [{\"name\": \"pool\", \"strategy\": \"waterfall\","
             "   \"overflow_at\": 0.9, \"deployments\": [\"primary\", \"secondary\"]}],"
             " \"tenants\": [{\"name\": \"t1\"}],"
             " \"keys\": [{\"id\": \"k1\", \"tenant\": \"t1\", \"hash\": \"%s\"}]}",
             MINUTE_MS, dir, dir, dir, dir, keyfile, sim_port, keyfile, sim_port, h1);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

static void submit_one(rd_kafka_t *prod, const char *idem)
{
    char req[512];
    int n = snprintf(req, sizeof req,
                     "{\"idempotency_key\": \"%s\", \"api_key\": \"sk-e2e-routing\","
                     " \"route\": \"pool\", \"request\": {\"messages\": [{\"role\": \"user\","
                     " \"content\": \"hello\"}], \"max_tokens\": 10}}",
                     idem);
    h_produce(prod, "sluice.requests", idem, req, (size_t)n);
}

typedef struct {
    int ok, other, primary, secondary;
} tally_t;

/* Reads results of jobs whose key starts with prefix until want of them arrived. */
static void read_results(rd_kafka_t *cons, sl_hmap_t *seen, const char *prefix, int want,
                         int timeout_ms, tally_t *t)
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
        if (id != NULL && status != NULL && strncmp(id, prefix, strlen(prefix)) == 0 &&
            sl_hmap_get(seen, id) == NULL) {
            sl_hmap_put(seen, id, strdup(status));
            got++;
            if (strcmp(status, "succeeded") == 0)
                t->ok++;
            else
                t->other++;
            if (dep != NULL && strcmp(dep, "primary") == 0)
                t->primary++;
            else if (dep != NULL && strcmp(dep, "secondary") == 0)
                t->secondary++;
        }
        json_decref(r);
    }
}

int main(void)
{
    sl_crypto_init();
    printf("e2e routing: a waterfall pool overflows under a burst and comes back after\n");
    int sim_port = h_free_port();
    char *sim_cfg = NULL;
    const char *cfg = write_configs(sim_port, &sim_cfg);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    sl_hmap_t *seen = sl_hmap_new();

    /* warm-up: one job, so every process has joined its group before the burst */
    submit_one(prod, "warm-0");
    rd_kafka_flush(prod, 10000);
    tally_t warm = {0};
    read_results(cons, seen, "warm-", 1, 30000, &warm);
    h_check(warm.ok == 1, "warm-up job succeeded");

    double t0 = sl_mono_ms();
    for (int i = 0; i < BURST; i++) {
        char idem[32];
        snprintf(idem, sizeof idem, "burst-%03d", i);
        submit_one(prod, idem);
    }
    rd_kafka_flush(prod, 10000);
    tally_t burst = {0};
    read_results(cons, seen, "burst-", BURST, 60000, &burst);
    double burst_s = (sl_mono_ms() - t0) / 1000.0;
    h_check(burst.ok == BURST, "burst: every job succeeded (%d of %d, %d other)", burst.ok, BURST,
            burst.other);
    /* The primary takes 20 a second: over the burst's length it served about that many. */
    double primary_cap = 20.0 * burst_s + 10; /* + its burst */
    h_check(burst.primary > 0 && burst.secondary > 0 && burst.primary <= primary_cap,
            "burst: %d on the primary (limit allows about %.0f in %.1f s), %d overflowed to the "
            "secondary",
            burst.primary, primary_cap, burst_s, burst.secondary);

    /* Let the primary refill, then a trickle well within its limit. */
    usleep(MINUTE_MS * 1000);
    for (int i = 0; i < TRICKLE; i++) {
        char idem[32];
        snprintf(idem, sizeof idem, "trickle-%03d", i);
        submit_one(prod, idem);
        rd_kafka_flush(prod, 1000);
        usleep(1000000 / TRICKLE_PER_S);
    }
    tally_t trickle = {0};
    read_results(cons, seen, "trickle-", TRICKLE, 30000, &trickle);
    h_check(trickle.ok == TRICKLE, "trickle: every job succeeded (%d)", trickle.ok);
    h_check(trickle.primary * 100 >= TRICKLE * 95,
            "trickle: back on the primary (%d of %d; %d on the secondary)", trickle.primary,
            TRICKLE, trickle.secondary);
    json_t *stats = h_http_json(st.stats_url);
    h_check(stats != NULL && h_sim_total(stats, "refused") == 0,
            "the simulator answered 429 zero times (%lld)",
            (long long)h_sim_total(stats, "refused"));
    json_decref(stats);

    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    rd_kafka_destroy(prod);
    h_free_string_map(seen);
    int bad = h_stack_down(&st);
    h_check(bad == 0, "every process exited cleanly (%d did not)", bad);
    free(sim_cfg);
    free((char *)cfg);
    int rc = h_summary("routing");
    h_cleanup(rc != 0);
    return rc;
}
