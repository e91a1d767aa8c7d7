/* e2e_isolation - results readable only by their tenant, over real processes. Three tenants:
 * "sealed" registers a box public key (its results and stream chunks on the shared topics,
 * sealed), "own" has a results topic and a stream topic of its own (in the clear), "plain"
 * has neither (the control: its answers are readable on the shared topic, so the checks that
 * the others' are not can fail). Each submits answered jobs, one streamed, and one request on
 * a route that does not exist (an ingest rejection). Asserts: on the shared results topic the
 * raw bytes of the sealed tenant's results hold no answer text, usage or error message while
 * plain's hold its answers; no result of "own" is on the shared topic and every one of its
 * results is on its own; the streamed job's chunks are sealed, or on the tenant's stream
 * topic; `sluice results --secret-key` shows the sealed answers, and refuses clearly without
 * the key or with another tenant's key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "seal.h"
#include "sign.h"
#include "util.h"

enum { JOBS = 4 }; /* answered jobs per tenant; the last one is streamed */
#define ANSWER "Simulated reply"
static const char *const TENANTS[] = {"sealed", "own", "plain"};

static const char *write_configs(int sim_port, char **sim_cfg, const char *box_pub)
{
    const char *dir = h_tmpdir();
    char h[3][65];
    for (int i = 0; i < 3; i++) {
        char key[64];
        snprintf(key, sizeof key, "sk-e2e-iso-%s", TENANTS[i]);
        h_key_hash_hex(key, h[i]);
    }
    char sim[512];
    snprintf(sim, sizeof sim,
             "{\"deployments\": [{\"name\": \"sim\", \"ttft_ms\": 5, \"ms_per_token\": 0.5,"
             " \"api_key\": \"e2e-provider-key\"}]}");
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "e2e-provider-key\n"));
    char cfg[16384];
    snprintf(cfg, sizeof cfg,
             "{\"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": [{\"name\": \"sim\", \"model\": \"m\", \"api_key_file\": \"%s\","
             "   \"base_url\": \"http://127.0.0.1:%d/sim/v1\"}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim\"]}],"
             " \"tenants\": [{\"name\": \"sealed\", \"result_public_key_file\": \"%s\"},"
             "   {\"name\": \"own\", \"results_topic\": \"sluice.results.own\","
             "    \"stream_topic\": \"sluice.stream.own\"},"
             "   {\"name\": \"plain\"}],"
             " \"keys\": [{\"id\": \"k-sealed\", \"tenant\": \"sealed\", \"hash\": \"%s\"},"
             "   {\"id\": \"k-own\", \"tenant\": \"own\", \"hash\": \"%s\"},"
             "   {\"id\": \"k-plain\", \"tenant\": \"plain\", \"hash\": \"%s\"}]}",
             dir, dir, dir, dir, keyfile, sim_port, box_pub, h[0], h[1], h[2]);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

/* What one topic held, read raw from the beginning until `want` results of interest came or
 * the deadline passed. */
typedef struct {
    int results[3];       /* per tenant (TENANTS order) */
    int answers_clear[3]; /* results whose raw bytes hold the answer text */
    int sealed[3];        /* results with a sealed part and null response and usage */
    int leaked_message;   /* sealed results whose error message is not empty */
} topic_view_t;

static int tenant_index(const char *name)
{
    for (int i = 0; name != NULL && i < 3; i++) {
        if (strcmp(name, TENANTS[i]) == 0)
            return i;
    }
    return -1;
}

static void read_results(const char *bootstrap, const char *topic, int want, topic_view_t *v,
                         char ids[3][JOBS + 1][40])
{
    memset(v, 0, sizeof *v);
    rd_kafka_t *cons = h_consumer_from_start(bootstrap, topic);
    int got = 0;
    double deadline = sl_mono_ms() + 40000, idle_since = sl_mono_ms();
    while (sl_mono_ms() < deadline && (got < want || sl_mono_ms() - idle_since < 1000)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(cons, 200);
        if (m == NULL)
            continue;
        idle_since = sl_mono_ms();
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            json_t *doc = json_loadb(m->payload, m->len, 0, NULL);
            int t = tenant_index(json_string_value(json_object_get(doc, "tenant")));
            if (t >= 0) {
                int n = v->results[t]++;
                got++;
                const char *id = json_string_value(json_object_get(doc, "job_id"));
                const char *idem = json_string_value(json_object_get(doc, "idempotency_key"));
                /* The streamed job's id, for reading its chunks. */
                if (ids != NULL && id != NULL && idem != NULL && strstr(idem, "-stream") != NULL)
                    snprintf(ids[t][JOBS], sizeof ids[t][JOBS], "%s", id);
                if (ids != NULL && id != NULL && n < JOBS)
                    snprintf(ids[t][n], sizeof ids[t][n], "%s", id);
                v->answers_clear[t] += memmem(m->payload, m->len, ANSWER, strlen(ANSWER)) != NULL;
                int sealed = sl_seal_is_sealed(doc) &&
                             json_is_null(json_object_get(doc, "response")) &&
                             json_is_null(json_object_get(doc, "usage"));
                v->sealed[t] += sealed;
                const char *msg = json_string_value(
                    json_object_get(json_object_get(doc, "error"), "message"));
                v->leaked_message += sealed && msg != NULL && msg[0] != '\0';
            }
            json_decref(doc);
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
}

/* The chunks of job_id on topic: how many, how many sealed (no text in the clear), and
 * whether the answer text appears in the raw bytes or the deltas joined. */
typedef struct {
    int chunks, sealed, done, raw_answer;
    char text[4096];
} chunks_view_t;

static void read_chunks(const char *bootstrap, const char *topic, const char *job_id,
                        chunks_view_t *v)
{
    memset(v, 0, sizeof *v);
    rd_kafka_t *cons = h_consumer_from_start(bootstrap, topic);
    double deadline = sl_mono_ms() + 10000, idle_since = sl_mono_ms();
    while (sl_mono_ms() < deadline && sl_mono_ms() - idle_since < 1500) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(cons, 200);
        if (m == NULL)
            continue;
        idle_since = sl_mono_ms();
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->key_len == strlen(job_id) &&
            memcmp(m->key, job_id, m->key_len) == 0) {
            json_t *doc = json_loadb(m->payload, m->len, 0, NULL);
            v->chunks++;
            const char *delta = json_string_value(json_object_get(doc, "delta"));
            v->sealed += sl_seal_is_sealed(doc) && delta != NULL && delta[0] == '\0' &&
                         json_is_null(json_object_get(doc, "usage"));
            v->done += json_is_true(json_object_get(doc, "done"));
            v->raw_answer += memmem(m->payload, m->len, "Simulated", 9) != NULL;
            if (delta != NULL && strlen(v->text) + strlen(delta) < sizeof v->text)
                strcat(v->text, delta);
            json_decref(doc);
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
}

/* Runs `sluice results ARGS...`; returns its exit status and its output (caller frees). */
static int run_results(const char *cfg, const char *logname, const char *const *args,
                       char **output)
{
    int rc = h_run("sluice", logname, cfg, args, 30000);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.log", h_tmpdir(), logname);
    *output = NULL;
    if (sl_read_file(path, 16 << 20, output, NULL) != SL_OK)
        *output = strdup("");
    return rc;
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

int main(void)
{
    sl_crypto_init();
    printf("e2e isolation: %d jobs each for a sealed tenant, one with its own topics and one "
           "plain\n",
           JOBS);
    const char *dir = h_tmpdir();
    char box_key[4096], box_pub[4096], other_key[4096], other_pub[4096];
    snprintf(box_key, sizeof box_key, "%s/box.key", dir);
    snprintf(box_pub, sizeof box_pub, "%s/box.pub", dir);
    snprintf(other_key, sizeof other_key, "%s/other.key", dir);
    snprintf(other_pub, sizeof other_pub, "%s/other.pub", dir);
    const char *kg1[] = {"keygen", "--box", box_key, box_pub, NULL};
    const char *kg2[] = {"keygen", "--box", other_key, other_pub, NULL};
    h_check(h_run("sluice", "keygen", NULL, kg1, 10000) == 0 &&
                h_run("sluice", "keygen2", NULL, kg2, 10000) == 0,
            "sluice keygen --box made two key pairs");
    int sim_port = h_free_port();
    char *sim_cfg = NULL;
    const char *cfg = write_configs(sim_port, &sim_cfg, box_pub);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    for (int t = 0; t < 3; t++) {
        for (int i = 0; i <= JOBS; i++) {
            char idem[48], req[512];
            int stream = i == JOBS - 1;
            int bad = i == JOBS; /* a route that does not exist: rejected by ingest */
            snprintf(idem, sizeof idem, "%s-%d%s", TENANTS[t], i,
                     stream ? "-stream" : bad ? "-bad" : "");
            int n = snprintf(req, sizeof req,
                             "{\"idempotency_key\": \"%s\", \"api_key\": \"sk-e2e-iso-%s\","
                             " \"route\": \"%s\", \"request\": {\"messages\": [{\"role\":"
                             " \"user\", \"content\": \"question %d\"}], \"max_tokens\": 16%s}}",
                             idem, TENANTS[t], bad ? "no-such-route" : "chat", i,
                             stream ? ", \"stream\": true" : "");
            h_produce(prod, "sluice.requests", idem, req, (size_t)n);
        }
    }
    rd_kafka_flush(prod, 30000);

    char ids[3][JOBS + 1][40];
    memset(ids, 0, sizeof ids);
    topic_view_t shared, own;
    read_results(st.bootstrap, "sluice.results.own", JOBS + 1, &own, ids);
    read_results(st.bootstrap, "sluice.results", 2 * (JOBS + 1), &shared, ids);
    h_check(shared.results[0] == JOBS + 1 && shared.results[2] == JOBS + 1,
            "the shared results topic holds every result of sealed and plain (%d, %d of %d)",
            shared.results[0], shared.results[2], JOBS + 1);
    h_check(shared.sealed[0] == JOBS + 1 && shared.answers_clear[0] == 0 &&
                shared.leaked_message == 0,
            "there every result of sealed is sealed: no answer text, usage or error message in "
            "its bytes (%d sealed, %d with the answer, %d with a message)",
            shared.sealed[0], shared.answers_clear[0], shared.leaked_message);
    h_check(shared.answers_clear[2] == JOBS && shared.sealed[2] == 0,
            "while plain's answers are readable there (%d of %d): the check above can fail",
            shared.answers_clear[2], JOBS);
    h_check(shared.results[1] == 0, "no result of own is on the shared topic (%d)",
            shared.results[1]);
    h_check(own.results[1] == JOBS + 1 && own.results[0] == 0 && own.results[2] == 0 &&
                own.answers_clear[1] == JOBS,
            "own's results, its rejection included, are all on its topic, and only its (%d of "
            "%d; %d and %d of the others)",
            own.results[1], JOBS + 1, own.results[0], own.results[2]);

    chunks_view_t sc, oc, leak;
    read_chunks(st.bootstrap, "sluice.stream", ids[0][JOBS], &sc);
    h_check(sc.chunks > 1 && sc.sealed == sc.chunks && sc.raw_answer == 0 && sc.done == 1,
            "the sealed tenant's stream chunks are sealed on the shared stream topic (%d of %d)",
            sc.sealed, sc.chunks);
    read_chunks(st.bootstrap, "sluice.stream.own", ids[1][JOBS], &oc);
    read_chunks(st.bootstrap, "sluice.stream", ids[1][JOBS], &leak);
    h_check(oc.chunks > 1 && oc.done == 1 && strstr(oc.text, ANSWER) != NULL && leak.chunks == 0,
            "own's stream chunks are on its stream topic, readable (%d), none on the shared one "
            "(%d)",
            oc.chunks, leak.chunks);

    /* The CLI opens the sealed results with the tenant's key, and only with it. */
    const char *a_key[] = {"results",   "--tenant", "sealed", "--secret-key", box_key,
                           "sealed-0",  "sealed-1", "sealed-2", "sealed-3-stream",
                           "sealed-4-bad", NULL};
    char *out = NULL;
    int rc = run_results(cfg, "cli-results-key", a_key, &out);
    h_check(rc == 0 && count_of(out, ANSWER) == JOBS && count_of(out, "\"sealed\":") == 0 &&
                strstr(out, "no-such-route") != NULL,
            "sluice results --secret-key shows the %d answers and the rejection's message "
            "(exit %d, %d answers)",
            JOBS, rc, count_of(out, ANSWER));
    free(out);
    const char *a_none[] = {"results", "--tenant", "sealed", "sealed-0", NULL};
    rc = run_results(cfg, "cli-results-nokey", a_none, &out);
    h_check(rc == 1 && strstr(out, "give --secret-key") != NULL && strstr(out, ANSWER) == NULL,
            "without --secret-key it says the result is sealed and shows no answer (exit %d)",
            rc);
    free(out);
    const char *a_wrong[] = {"results", "--tenant", "sealed", "--secret-key", other_key,
                             "sealed-0", NULL};
    rc = run_results(cfg, "cli-results-wrong", a_wrong, &out);
    h_check(rc == 1 && strstr(out, "does not open") != NULL && strstr(out, ANSWER) == NULL,
            "with another key it says the result does not open (exit %d)", rc);
    free(out);
    const char *a_own[] = {"results", "--api-key", "sk-e2e-iso-own", "own-0", "own-4-bad",
                           NULL};
    rc = run_results(cfg, "cli-results-own", a_own, &out);
    h_check(rc == 0 && count_of(out, ANSWER) == 1 && strstr(out, "unknown_route") != NULL,
            "sluice results --api-key reads the tenant's own topic (exit %d)", rc);
    free(out);

    rd_kafka_destroy(prod);
    int unclean = h_stack_down(&st);
    h_check(unclean == 0, "every process stopped cleanly on SIGTERM (%d did not)", unclean);
    free(sim_cfg);
    free((char *)cfg);
    int status = h_summary("isolation");
    h_cleanup(status != 0);
    return status;
}
