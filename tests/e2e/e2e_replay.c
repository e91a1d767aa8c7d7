/* e2e_replay - a dispatch executes at most once, whoever writes it to the topic again. Two jobs
 * run through the real stack: one on a deployment with per-minute limits whose simulated call
 * takes 4 s (so its stale cutoff is short), one on a deployment without per-minute limits. The
 * test reads each job's signed dispatch from sluice.dispatch and produces it again, unchanged and
 * with its headers (the signature `sluice-sig` included), to the same partition: the first job's
 * once while its call runs, and both three times after their results. Asserts the simulator saw
 * exactly one call per job, each result says attempts 1, and the dispatcher counted every replay
 * in sluice_dispatcher_refused_total{reason="replay"} without answering any of them not_sent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "sign.h"
#include "util.h"

enum { SLOW_MS = 4000, LIVE_REPLAY_AFTER_MS = 1500, LATE_REPLAYS = 3 };

static char disp_url[64];

static const char *write_configs(int sim_port, char **sim_cfg)
{
    int pd = h_free_port();
    snprintf(disp_url, sizeof disp_url, "http://127.0.0.1:%d/metrics", pd);
    const char *dir = h_tmpdir();
    char hex[65];
    h_key_hash_hex("sk-e2e-replay-key", hex);
    char sim[1024];
    snprintf(sim, sizeof sim,
             "{\"deployments\": ["
             "{\"name\": \"sim-slow\", \"model\": \"gpt-4o-mini\", \"ttft_ms\": %d,"
             " \"ms_per_token\": 0, \"output_min\": 5, \"output_max\": 20},"
             "{\"name\": \"sim-open\", \"model\": \"gpt-4o-mini\", \"ttft_ms\": 50,"
             " \"ms_per_token\": 0, \"output_min\": 5, \"output_max\": 20}]}",
             SLOW_MS);
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "any-bearer-token\n"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\", \"lease_ms\": 30000,"
             "   \"max_attempts\": 5, \"metrics_listen\": \"\", \"admin_listen\": \"\"},"
             " \"ingest\": {\"metrics_listen\": \"\"},"
             " \"dispatcher\": {\"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": ["
             "  {\"name\": \"sim-slow\", \"base_url\": \"http://127.0.0.1:%d/sim-slow/v1\","
             "   \"model\": \"gpt-4o-mini\", \"api_key_file\": \"%s\","
             "   \"limits\": {\"rpm\": 6000, \"tpm\": 1000000}, \"slices_per_minute\": 60,"
             "   \"timeout_ms\": 20000},"
             "  {\"name\": \"sim-open\", \"base_url\": \"http://127.0.0.1:%d/sim-open/v1\","
             "   \"model\": \"gpt-4o-mini\", \"api_key_file\": \"%s\", \"timeout_ms\": 20000}],"
             " \"routes\": [{\"name\": \"slow\", \"deployments\": [\"sim-slow\"]},"
             "             {\"name\": \"open\", \"deployments\": [\"sim-open\"]}],"
             " \"tenants\": [{\"name\": \"solo\"}],"
             " \"keys\": [{\"id\": \"k\", \"tenant\": \"solo\", \"hash\": \"%s\"}]}",
             dir, dir, pd, dir, dir, sim_port, keyfile, sim_port, keyfile, hex);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

/* A copy of n bytes (exits when memory runs out: a test driver). */
static char *copy_bytes(const void *p, size_t n)
{
    char *c = malloc(n + 1);
    if (c == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    memcpy(c, p, n);
    c[n] = '\0';
    return c;
}

/* One dispatch message as read from the topic: enough to write it again unchanged. */
typedef struct {
    char deployment[64];
    char job_id[80];
    int32_t partition;
    char *key;
    size_t key_len;
    char *value;
    size_t len;
    rd_kafka_headers_t *headers;
    int has_sig;
} captured_t;

static void capture(captured_t *c, const rd_kafka_message_t *m, const json_t *doc)
{
    snprintf(c->deployment, sizeof c->deployment, "%s",
             json_string_value(json_object_get(doc, "deployment")));
    snprintf(c->job_id, sizeof c->job_id, "%s", json_string_value(json_object_get(doc, "job_id")));
    c->partition = m->partition;
    c->key = m->key_len > 0 ? copy_bytes(m->key, m->key_len) : NULL;
    c->key_len = m->key_len;
    c->value = copy_bytes(m->payload, m->len);
    c->len = m->len;
    rd_kafka_headers_t *hdrs = NULL;
    if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const void *sig = NULL;
        size_t sig_len = 0;
        c->has_sig = rd_kafka_header_get_last(hdrs, "sluice-sig", &sig, &sig_len) ==
                         RD_KAFKA_RESP_ERR_NO_ERROR &&
                     sig_len > 0;
        c->headers = rd_kafka_headers_copy(hdrs);
    }
}

/* Produces the captured message again: same partition, key, value and headers. */
static void replay(rd_kafka_t *prod, const captured_t *c)
{
    rd_kafka_headers_t *hdrs = c->headers != NULL ? rd_kafka_headers_copy(c->headers) : NULL;
    rd_kafka_resp_err_t err = rd_kafka_producev(
        prod, RD_KAFKA_V_TOPIC("sluice.dispatch"), RD_KAFKA_V_PARTITION(c->partition),
        RD_KAFKA_V_KEY(c->key, c->key_len), RD_KAFKA_V_VALUE(c->value, c->len),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_headers_destroy(hdrs); /* ownership passes only on success */
        fprintf(stderr, "replay: %s\n", rd_kafka_err2str(err));
        exit(2);
    }
    rd_kafka_flush(prod, 10000);
}

/* What the results topic said about one job. */
typedef struct {
    int results;
    int succeeded;
    int64_t attempts;
} outcome_t;

static void read_results(rd_kafka_t *cons, captured_t *caps, outcome_t *outs, int n, int wait_ms)
{
    double until = sl_mono_ms() + wait_ms;
    while (sl_mono_ms() < until) {
        json_t *r = NULL;
        if (!h_poll_json(cons, 100, &r))
            continue;
        const char *id = json_string_value(json_object_get(r, "job_id"));
        for (int i = 0; id != NULL && i < n; i++) {
            if (strcmp(id, caps[i].job_id) != 0)
                continue;
            outs[i].results++;
            const char *status = json_string_value(json_object_get(r, "status"));
            outs[i].succeeded += status != NULL && strcmp(status, "succeeded") == 0;
            outs[i].attempts = json_integer_value(json_object_get(r, "attempts"));
        }
        json_decref(r);
    }
}

static int64_t sim_calls(const char *stats_url, const char *deployment)
{
    json_t *s = h_http_json(stats_url);
    json_t *d = json_object_get(json_object_get(s, "deployments"), deployment);
    int64_t calls = d == NULL ? -1
                              : json_integer_value(json_object_get(d, "admitted")) +
                                    json_integer_value(json_object_get(d, "replayed")) +
                                    json_integer_value(json_object_get(d, "refused"));
    json_decref(s);
    return calls;
}

static int64_t sim_in_flight(const char *stats_url, const char *deployment)
{
    json_t *s = h_http_json(stats_url);
    json_t *d = json_object_get(json_object_get(s, "deployments"), deployment);
    int64_t n = d == NULL ? -1 : json_integer_value(json_object_get(d, "in_flight"));
    json_decref(s);
    return n;
}

int main(void)
{
    sl_crypto_init();
    printf("e2e replay: signed dispatches produced again during and after their calls\n");
    int sim_port = h_free_port();
    char *sim_cfg = NULL;
    const char *cfg = write_configs(sim_port, &sim_cfg);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);

    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *dispatches = h_consumer_from_start(st.bootstrap, "sluice.dispatch");
    rd_kafka_t *results = h_consumer_from_start(st.bootstrap, "sluice.results");
    const char *routes[2] = {"slow", "open"};
    for (int i = 0; i < 2; i++) {
        char req[512], idem[32];
        snprintf(idem, sizeof idem, "replay-%s", routes[i]);
        int n = snprintf(req, sizeof req,
                         "{\"idempotency_key\": \"%s\", \"api_key\": \"sk-e2e-replay-key\","
                         " \"route\": \"%s\", \"request\": {\"messages\": [{\"role\": \"user\","
                         " \"content\": \"Say something.\"}], \"max_tokens\": 20}}",
                         idem, routes[i]);
        h_produce(prod, "sluice.requests", idem, req, (size_t)n);
    }
    rd_kafka_flush(prod, 10000);

    /* caps[0]: the slow deployment's dispatch, caps[1]: the open one's. */
    captured_t caps[2];
    memset(caps, 0, sizeof caps);
    double slow_seen_ms = 0;
    int ncaps = 0;
    double deadline = sl_mono_ms() + 60000;
    while (ncaps < 2 && sl_mono_ms() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(dispatches, 100);
        if (m == NULL)
            continue;
        json_t *doc = m->err ? NULL : json_loadb(m->payload, m->len, 0, NULL);
        const char *dep = json_string_value(json_object_get(doc, "deployment"));
        int i = dep == NULL ? -1 : strcmp(dep, "sim-slow") == 0 ? 0 : 1;
        if (i >= 0 && caps[i].value == NULL) {
            capture(&caps[i], m, doc);
            ncaps++;
            if (i == 0)
                slow_seen_ms = sl_mono_ms();
        }
        json_decref(doc);
        rd_kafka_message_destroy(m);
    }
    h_check(ncaps == 2, "both dispatches read from sluice.dispatch (%d)", ncaps);
    h_check(caps[0].has_sig && caps[1].has_sig, "each carries its sluice-sig header");
    if (ncaps < 2)
        goto done;

    /* While the 4 s call runs, 1.5 s after its dispatch: older than that deployment's stale
     * cutoff, so a dispatcher checking age first would answer it not_sent. */
    while (sl_mono_ms() < slow_seen_ms + LIVE_REPLAY_AFTER_MS)
        usleep(10 * 1000);
    int64_t running = sim_in_flight(st.stats_url, "sim-slow");
    /* What was answered not_sent before any replay: an original dispatch that reached a
     * dispatcher still starting (a slow sanitizer build) after its cutoff is answered so,
     * rightly, and dispatched again; only what the replays add counts below. */
    char *before_text = h_http_text(disp_url);
    double not_sent_before = h_metrics_sample(
        before_text, "sluice_dispatcher_calls_total{deployment=\"sim-slow\",outcome=\"not_sent\"}");
    free(before_text);
    if (not_sent_before < 0)
        not_sent_before = 0;
    replay(prod, &caps[0]);
    printf("  replayed the slow dispatch %.0f ms after it was read (%lld call running)\n",
           sl_mono_ms() - slow_seen_ms, (long long)running);
    h_check(running == 1, "the replay went out while the original call ran (%lld in flight)",
            (long long)running);

    outcome_t outs[2];
    memset(outs, 0, sizeof outs);
    deadline = sl_mono_ms() + 60000;
    while ((outs[0].results == 0 || outs[1].results == 0) && sl_mono_ms() < deadline)
        read_results(results, caps, outs, 2, 200);
    h_check(outs[0].results == 1 && outs[1].results == 1, "both jobs have a result (%d, %d)",
            outs[0].results, outs[1].results);
    for (int r = 0; r < LATE_REPLAYS; r++) {
        replay(prod, &caps[0]);
        replay(prod, &caps[1]);
    }
    printf("  replayed both dispatches %d more times after their results\n", LATE_REPLAYS);
    /* Time for a replay to make a call (the slow one would still be running) and report it. */
    read_results(results, caps, outs, 2, 3000);

    for (int i = 0; i < 2; i++) {
        h_check(outs[i].results == 1 && outs[i].succeeded == 1 && outs[i].attempts == 1,
                "%s: one result, succeeded, attempts 1 (results %d, attempts %lld)",
                caps[i].deployment, outs[i].results, (long long)outs[i].attempts);
        int64_t calls = sim_calls(st.stats_url, caps[i].deployment);
        h_check(calls == 1, "%s: the simulator saw exactly one call (%lld)", caps[i].deployment,
                (long long)calls);
    }
    char *text = h_http_text(disp_url);
    double replays = h_metrics_sample(text, "sluice_dispatcher_refused_total{reason=\"replay\"}");
    double not_sent = h_metrics_sample(
        text, "sluice_dispatcher_calls_total{deployment=\"sim-slow\",outcome=\"not_sent\"}");
    int expected = 1 + 2 * LATE_REPLAYS;
    h_check(replays == expected, "the dispatcher counted %d replays (%.0f)", expected, replays);
    if (not_sent < 0)
        not_sent = 0;
    h_check(not_sent - not_sent_before <= 0,
            "no replay was answered not_sent (%.0f, %.0f before the replays)",
            not_sent - not_sent_before, not_sent_before);
    free(text);

done:
    for (int i = 0; i < 2; i++) {
        free(caps[i].key);
        free(caps[i].value);
        if (caps[i].headers != NULL)
            rd_kafka_headers_destroy(caps[i].headers);
    }
    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(dispatches);
    rd_kafka_destroy(dispatches);
    rd_kafka_consumer_close(results);
    rd_kafka_destroy(results);
    int unclean = h_stack_down(&st);
    h_check(unclean == 0, "every process stopped cleanly on SIGTERM (%d did not)", unclean);
    free(sim_cfg);
    free((char *)cfg);
    int rc = h_summary("replay");
    h_cleanup(rc != 0);
    return rc;
}
