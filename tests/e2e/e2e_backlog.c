/* e2e_backlog - ingest holds batch requests back while the scheduler lags on the batch jobs
 * topic (ingest/backlog.h), over real processes on the dev broker.
 *
 * The scheduler is stopped (SIGSTOP) and JOBS batch requests of about 3.5 KB each are
 * submitted for one tenant, whose jobs all go to one partition of the batch jobs topic
 * (sluice.jobs.batch): 10 MB, twice
 * what the dev broker keeps of a partition. Before ingest held batch work back, it wrote them
 * all at once and the broker deleted the oldest before the scheduler read them (bench/backfill
 * lost 16,480 of 100,000 this way). Asserts, while the scheduler is stopped: ingest holds the
 * jobs partition's unread bytes near ingest.jobs_backlog_max_bytes (its default, 2 MiB) and
 * says so in its metrics, and interactive requests are still turned into jobs; after SIGCONT:
 * every batch and interactive job has exactly one result, all succeeded, and the scheduler
 * found no input deleted under it. */
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
    JOBS = 3000,
    INTERACTIVE = 20,
    PROMPT_CHARS = 3000,
    BACKLOG_MAX = 2 << 20, /* ingest.jobs_backlog_max_bytes's default */
    /* What ingest may write past the bound before it hears of it: the takes in flight (8 of
     * batch work, 32 requests each) and 100 ms between answers, at most 256 jobs of 4 KB. */
    OVERSHOOT = 256 * 4096,
};

typedef struct {
    int ingest, sched;
} ports_t;

static const char *write_configs(int sim_port, const ports_t *p, char **sim_cfg)
{
    const char *dir = h_tmpdir();
    char h1[65];
    h_key_hash_hex("sk-e2e-backlog", h1);
    *sim_cfg = strdup(h_write("sim.json", "{\"deployments\": [{\"name\": \"sim\", \"ttft_ms\": 2,"
                                          " \"ms_per_token\": 0.01,"
                                          " \"api_key\": \"e2e-provider-key\"}]}"));
    char *keyfile = strdup(h_write("provider.key", "e2e-provider-key\n"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"ingest\": {\"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\", \"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": [{\"name\": \"sim\", \"model\": \"m\", \"api_key_file\": \"%s\","
             "   \"base_url\": \"http://127.0.0.1:%d/sim/v1\"}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim\"]}],"
             " \"tenants\": [{\"name\": \"t1\"}],"
             " \"keys\": [{\"id\": \"k1\", \"tenant\": \"t1\", \"hash\": \"%s\"}]}",
             dir, p->ingest, dir, p->sched, dir, dir, keyfile, sim_port, h1);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

static void submit(rd_kafka_t *prod, const char *topic, const char *cls, const char *idem,
                   const char *prompt)
{
    static char req[PROMPT_CHARS + 512];
    int n = snprintf(req, sizeof req,
                     "{\"idempotency_key\": \"%s\", \"api_key\": \"sk-e2e-backlog\","
                     " \"route\": \"chat\", \"class\": \"%s\", \"request\": {\"messages\":"
                     " [{\"role\": \"user\", \"content\": \"%s\"}], \"max_tokens\": 4}}",
                     idem, cls, prompt);
    h_produce(prod, topic, idem, req, (size_t)n);
}

/* A series of a daemon's /metrics (absent: 0); -1 when it did not answer. */
static double metric(int port, const char *series)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", port);
    char *text = h_http_text(url);
    if (text == NULL)
        return -1;
    double v = h_metrics_sample(text, series);
    free(text);
    return v < 0 ? 0 : v;
}

int main(void)
{
    sl_crypto_init();
    printf("e2e backlog: %d batch jobs of about %d bytes for one tenant while the scheduler is "
           "stopped, %d interactive among them\n",
           JOBS, PROMPT_CHARS + 500, INTERACTIVE);
    int sim_port = h_free_port();
    ports_t ports = {h_free_port(), h_free_port()};
    char *sim_cfg = NULL;
    const char *cfg = write_configs(sim_port, &ports, &sim_cfg);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");

    /* One job through first, so the scheduler has joined its group and committed. */
    static char prompt[PROMPT_CHARS + 1];
    submit(prod, "sluice.requests", "interactive", "warm", "hello");
    rd_kafka_flush(prod, 10000);
    json_t *r = NULL;
    double until = sl_mono_ms() + 60000;
    while (r == NULL && sl_mono_ms() < until)
        h_poll_json(cons, 200, &r);
    h_check(r != NULL, "the warm-up job has its result");
    json_decref(r);

    h_check(kill(st.sched, SIGSTOP) == 0, "the scheduler is stopped");
    char idem[32];
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < JOBS; i++) {
        snprintf(idem, sizeof idem, "b-%04d", i);
        /* Letters no compression can shrink much (the producers compress their batches). */
        for (int c = 0; c < PROMPT_CHARS; c++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            prompt[c] = (char)('a' + x % 26);
        }
        submit(prod, "sluice.requests.batch", "batch", idem, prompt);
    }
    rd_kafka_flush(prod, 30000);
    /* Ingest holds on: a second of holding, then what it wrote is near the bound. */
    double held = 0, jobs = 0, backlog = 0;
    until = sl_mono_ms() + 60000;
    while (held < 1.0 && sl_mono_ms() < until) {
        usleep(100 * 1000);
        held = metric(ports.ingest, "sluice_ingest_batch_held_seconds_total");
    }
    jobs = metric(ports.ingest, "sluice_ingest_jobs_total");
    backlog = metric(ports.ingest, "sluice_ingest_jobs_backlog_bytes");
    h_check(held >= 1.0,
            "ingest held batch requests back while the scheduler was stopped "
            "(%.1f s)",
            held);
    h_check(jobs >= BACKLOG_MAX / (PROMPT_CHARS + 1024) && jobs < JOBS / 2,
            "ingest wrote %.0f of %d batch jobs, up to the bound", jobs, JOBS);
    h_check(backlog > BACKLOG_MAX && backlog <= BACKLOG_MAX + OVERSHOOT,
            "the jobs partition's unread bytes stayed near the bound (%.0f, bound %d)", backlog,
            BACKLOG_MAX);
    /* Other requests are never held. */
    for (int i = 0; i < INTERACTIVE; i++) {
        snprintf(idem, sizeof idem, "i-%04d", i);
        submit(prod, "sluice.requests", "interactive", idem, "a short question");
    }
    rd_kafka_flush(prod, 10000);
    double more = jobs;
    until = sl_mono_ms() + 30000;
    while (more < jobs + INTERACTIVE && sl_mono_ms() < until) {
        usleep(100 * 1000);
        more = metric(ports.ingest, "sluice_ingest_jobs_total");
    }
    h_check(more == jobs + INTERACTIVE,
            "the interactive requests became jobs while batch work was held (%.0f of %d)",
            more - jobs, INTERACTIVE);

    h_check(kill(st.sched, SIGCONT) == 0, "the scheduler goes on");
    h_results_t res;
    h_results_init(&res);
    until = sl_mono_ms() + (h_sanitizers() ? 300000 : 120000);
    while (res.done < JOBS + INTERACTIVE && sl_mono_ms() < until) {
        if (!h_poll_json(cons, 200, &r))
            continue;
        const char *key = json_string_value(json_object_get(r, "idempotency_key"));
        if (key != NULL && (key[0] == 'b' || key[0] == 'i') && key[1] == '-')
            h_results_take(&res, r);
        json_decref(r);
    }
    h_check(res.done == JOBS + INTERACTIVE && res.duplicates == 0,
            "every job has one result (%d of %d, %d repeated)", res.done, JOBS + INTERACTIVE,
            res.duplicates);
    h_check(res.ok == res.done, "all succeeded (%d of %d)", res.ok, res.done);
    double lost = metric(ports.sched, "sluice_kafka_input_lost_total{topic=\"sluice.jobs.batch\"}");
    h_check(lost == 0, "the scheduler found no jobs deleted before it read them (%.0f)", lost);
    held = metric(ports.ingest, "sluice_ingest_batch_held_seconds_total");
    printf("  ingest held batch requests back for %.1f s in all\n", held);

    h_results_free(&res);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    rd_kafka_destroy(prod);
    int unclean = h_stack_down(&st);
    h_check(unclean == 0, "every process stopped cleanly on SIGTERM (%d did not)", unclean);
    free(sim_cfg);
    free((char *)cfg);
    int status = h_summary("backlog");
    h_cleanup(status != 0);
    return status;
}
