/* e2e_providers - every provider adapter against sluice-sim in that provider's mode, over the
 * real processes: OpenAI, Azure OpenAI, Anthropic and Gemini, plain, with tools and streamed;
 * plus a deployment whose every stream is cut, and one whose every stream falls silent.
 *
 * Asserts, per provider: every job succeeds on its deployment with a canonical answer (text or
 * tool calls) and usage (input and output > 0); streamed jobs' chunks reach sluice.stream in
 * order, the last one done with its usage, and the first one within 50 ms of the simulator
 * sending it; the simulator answers 429 zero times. For streams cut by the simulator: the cut
 * attempt is reconciled as a transport failure and its chunks end with a done chunk without
 * finish_reason; the job ends (its retry is answered from the simulator's idempotency replay,
 * or it fails with a reason); no reservation stays open and the deployment's in-flight gauge
 * is back to empty. For streams that fall silent for 30 s after a few events: the dispatcher
 * cuts each after the deployment's stream_idle_timeout_ms (300 ms), the attempt is reconciled
 * as a timeout, its chunks end with a done chunk without finish_reason, and the job ends within
 * a few seconds, long before the silence or the call's timeout would have ended it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hmap.h"
#include "sign.h"
#include "util.h"

enum {
    MINUTE_MS = 3000,
    PLAIN = 4,
    CUT_JOBS = 3,
    FIRST_CHUNK_MAX_MS = 50,
    STALL_JOBS = 2,
    STALL_MS = 30000,
    IDLE_MS = 300,
    STALL_END_MAX_MS = 10000
};

static const char *const ADMIN_KEY = "admin-e2e-providers";
static const char *const DEPS[4] = {"oa", "az", "an", "ge"};
static char dbpath[4200];
static int admin_port;

static const char *write_configs(int sim_port, char **sim_cfg)
{
    const char *dir = h_tmpdir();
    char h1[65], ha[65];
    h_key_hash_hex("sk-e2e-providers", h1);
    h_key_hash_hex(ADMIN_KEY, ha);
    char sim[4096];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"seed\": 3, \"deployments\": ["
             " {\"name\": \"oa\", \"api\": \"openai\", \"rpm\": 6000, \"tpm\": 6000000,"
             "  \"ttft_ms\": 30, \"ms_per_token\": 1, \"tool_use_share\": 1,"
             "  \"api_key\": \"key-oa\"},"
             " {\"name\": \"az\", \"api\": \"azure\", \"rpm\": 6000, \"tpm\": 6000000,"
             "  \"ttft_ms\": 30, \"ms_per_token\": 1, \"tool_use_share\": 1,"
             "  \"api_key\": \"key-az\"},"
             " {\"name\": \"an\", \"api\": \"anthropic\", \"rpm\": 6000, \"itpm\": 6000000,"
             "  \"otpm\": 6000000, \"ttft_ms\": 30, \"ms_per_token\": 1, \"tool_use_share\": 1,"
             "  \"api_key\": \"key-an\"},"
             " {\"name\": \"ge\", \"api\": \"gemini\", \"rpm\": 6000, \"tpm\": 6000000,"
             "  \"ttft_ms\": 30, \"ms_per_token\": 1, \"tool_use_share\": 1,"
             "  \"api_key\": \"key-ge\"},"
             " {\"name\": \"cut\", \"api\": \"openai\", \"rpm\": 6000, \"ttft_ms\": 20,"
             "  \"ms_per_token\": 1, \"api_key\": \"key-cut\", \"stream_chunks\": 8,"
             "  \"faults\": {\"stream_cut_share\": 1}},"
             " {\"name\": \"stall\", \"api\": \"openai\", \"rpm\": 6000, \"ttft_ms\": 20,"
             "  \"ms_per_token\": 1, \"api_key\": \"key-stall\", \"stream_chunks\": 8,"
             "  \"faults\": {\"stream_stall_share\": 1, \"stream_stall_ms\": %d}}]}",
             MINUTE_MS, STALL_MS);
    *sim_cfg = strdup(h_write("sim.json", sim));
    char kf[6][4200];
    const char *names[6] = {"oa", "az", "an", "ge", "cut", "stall"};
    for (int i = 0; i < 6; i++) {
        char file[32], text[32];
        snprintf(file, sizeof file, "key-%s.txt", names[i]);
        snprintf(text, sizeof text, "key-%s\n", names[i]);
        snprintf(kf[i], sizeof kf[i], "%s", h_write(file, text));
    }
    snprintf(dbpath, sizeof dbpath, "%s/sluice.db", dir);
    char cfg[32768];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %d,"
             " \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s\", \"lease_ms\": 20000, \"max_attempts\": 2,"
             "                 \"admin_listen\": \"127.0.0.1:%d\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": ["
             "  {\"name\": \"oa\", \"provider\": \"openai\", \"model\": \"gpt-sim\","
             "   \"base_url\": \"http://127.0.0.1:%d/oa/v1\", \"api_key_file\": \"%s\","
             "   \"limits\": {\"rpm\": 6000}},"
             "  {\"name\": \"az\", \"provider\": \"azure\", \"model\": \"gpt-sim\","
             "   \"base_url\": \"http://127.0.0.1:%d/az/openai/deployments/az\","
             "   \"api_key_file\": \"%s\", \"limits\": {\"rpm\": 6000}},"
             "  {\"name\": \"an\", \"provider\": \"anthropic\", \"model\": \"claude-sim\","
             "   \"base_url\": \"http://127.0.0.1:%d/an/v1\", \"api_key_file\": \"%s\","
             "   \"limits\": {\"rpm\": 6000}},"
             "  {\"name\": \"ge\", \"provider\": \"gemini\", \"model\": \"gemini-sim\","
             "   \"base_url\": \"http://127.0.0.1:%d/ge/v1beta\", \"api_key_file\": \"%s\","
             "   \"limits\": {\"rpm\": 6000}},"
             "  {\"name\": \"cut\", \"provider\": \"openai\", \"model\": \"gpt-sim\","
             "   \"base_url\": \"http://127.0.0.1:%d/cut/v1\", \"api_key_file\": \"%s\","
             "   \"limits\": {\"rpm\": 6000, \"max_in_flight\": 4}},"
             "  {\"name\": \"stall\", \"provider\": \"openai\", \"model\": \"gpt-sim\","
             "   \"base_url\": \"http://127.0.0.1:%d/stall/v1\", \"api_key_file\": \"%s\","
             "   \"stream_idle_timeout_ms\": %d, \"limits\": {\"rpm\": 6000}}],"
             " \"routes\": [{\"name\": \"oa\", \"deployments\": [\"oa\"]},"
             "   {\"name\": \"az\", \"deployments\": [\"az\"]},"
             "   {\"name\": \"an\", \"deployments\": [\"an\"]},"
             "   {\"name\": \"ge\", \"deployments\": [\"ge\"]},"
             "   {\"name\": \"cut\", \"deployments\": [\"cut\"]},"
             "   {\"name\": \"stall\", \"deployments\": [\"stall\"]}],"
             " \"tenants\": [{\"name\": \"t1\"}],"
             " \"keys\": [{\"id\": \"k1\", \"tenant\": \"t1\", \"hash\": \"%s\"}],"
             " \"admin_keys\": [{\"id\": \"ops\", \"hash\": \"%s\"}]}",
             MINUTE_MS, dir, dbpath, admin_port, dir, dir, sim_port, kf[0], sim_port, kf[1],
             sim_port, kf[2], sim_port, kf[3], sim_port, kf[4], sim_port, kf[5], IDLE_MS, h1, ha);
    return strdup(h_write("sluice.json", cfg));
}

/* kind: 0 plain, 1 with tools, 2 streamed. */
static void submit(rd_kafka_t *prod, const char *idem, const char *route, int kind)
{
    char req[1024];
    const char *extra = kind == 1 ? ", \"tools\": [{\"type\": \"function\", \"function\": "
                                    "{\"name\": \"lookup\", \"description\": \"look up\", "
                                    "\"parameters\": {\"type\": \"object\", \"properties\": "
                                    "{\"q\": {\"type\": \"string\"}}}}}]"
                        : kind == 2 ? ", \"stream\": true"
                                    : "";
    int n = snprintf(req, sizeof req,
                     "{\"idempotency_key\": \"%s\", \"api_key\": \"sk-e2e-providers\","
                     " \"route\": \"%s\", \"fallback\": false, \"request\": {\"messages\": ["
                     "{\"role\": \"system\", \"content\": \"Be brief.\"},"
                     "{\"role\": \"user\", \"content\": \"Tell me about rivers.\"}],"
                     " \"max_tokens\": 40%s}}",
                     idem, route, extra);
    h_produce(prod, "sluice.requests", idem, req, (size_t)n);
    rd_kafka_flush(prod, 5000);
}

/* What sluice.stream carried for one job. */
typedef struct {
    int64_t first_rx_ms; /* when seq 0 was read here (epoch ms) */
    int next_seq, in_order, chunks;
    int done_cut; /* done chunks without a finish_reason: attempts whose stream was cut */
    json_t *done; /* the done chunk */
} chunks_t;

static sl_hmap_t *results_seen; /* idempotency key -> result (json_t *) */
static sl_hmap_t *chunks_seen;  /* job id -> chunks_t * */

/* Reads whatever the two topics have now, without waiting: chunks are stamped the moment they
 * are read, so the results and chunks consumers must both be drained all the time. */
static int pump(rd_kafka_t *cons, rd_kafka_t *scons)
{
    int n = 0;
    rd_kafka_message_t *m;
    while ((m = rd_kafka_consumer_poll(scons, 0)) != NULL) {
        int64_t rx = sl_now_ms();
        json_t *c = m->err ? NULL : json_loadb(m->payload, m->len, 0, NULL);
        rd_kafka_message_destroy(m);
        n++;
        const char *jid = json_string_value(json_object_get(c, "job_id"));
        if (jid == NULL) {
            json_decref(c);
            continue;
        }
        chunks_t *ch = sl_hmap_get(chunks_seen, jid);
        if (ch == NULL) {
            ch = calloc(1, sizeof *ch);
            ch->in_order = 1;
            sl_hmap_put(chunks_seen, jid, ch);
        }
        int64_t seq = json_integer_value(json_object_get(c, "seq"));
        if (seq == 0 && ch->first_rx_ms == 0)
            ch->first_rx_ms = rx;
        /* a retried stream starts again at 0 with its next attempt */
        if (seq != 0 && seq != ch->next_seq)
            ch->in_order = 0;
        ch->next_seq = (int)seq + 1;
        ch->chunks++;
        if (json_is_true(json_object_get(c, "done"))) {
            ch->done_cut += json_is_null(json_object_get(c, "finish_reason"));
            json_decref(ch->done);
            ch->done = c;
        } else {
            json_decref(c);
        }
    }
    while ((m = rd_kafka_consumer_poll(cons, 0)) != NULL) {
        json_t *r = m->err ? NULL : json_loadb(m->payload, m->len, 0, NULL);
        rd_kafka_message_destroy(m);
        n++;
        const char *id = json_string_value(json_object_get(r, "idempotency_key"));
        if (id != NULL && sl_hmap_get(results_seen, id) == NULL)
            sl_hmap_put(results_seen, id, r);
        else
            json_decref(r);
    }
    return n;
}

static json_t *wait_result(rd_kafka_t *cons, rd_kafka_t *scons, const char *idem,
                           int timeout_ms)
{
    double deadline = sl_mono_ms() + timeout_ms;
    json_t *r;
    while ((r = sl_hmap_get(results_seen, idem)) == NULL && sl_mono_ms() < deadline) {
        if (pump(cons, scons) == 0)
            usleep(500);
    }
    return r;
}

/* The chunks of job_id, once its done chunk arrived (or after timeout_ms: maybe NULL). */
static chunks_t *wait_chunks(rd_kafka_t *cons, rd_kafka_t *scons, const char *job_id,
                             int timeout_ms)
{
    double deadline = sl_mono_ms() + timeout_ms;
    chunks_t *ch;
    while (((ch = sl_hmap_get(chunks_seen, job_id)) == NULL || ch->done == NULL) &&
           sl_mono_ms() < deadline) {
        if (pump(cons, scons) == 0)
            usleep(500);
    }
    return ch;
}

static const char *job_id_of(json_t *r)
{
    const char *id = json_string_value(json_object_get(r, "job_id"));
    return id != NULL ? id : "";
}

static void free_result(const char *key, void *value, void *arg)
{
    (void)key;
    (void)arg;
    json_decref(value);
}

static void free_chunks(const char *key, void *value, void *arg)
{
    (void)key;
    (void)arg;
    chunks_t *ch = value;
    json_decref(ch->done);
    free(ch);
}

int main(void)
{
    sl_crypto_init();
    printf("e2e providers: OpenAI, Azure, Anthropic and Gemini adapters against the simulator\n");
    int sim_port = h_free_port();
    admin_port = h_free_port();
    char *sim_cfg = NULL;
    const char *cfg = write_configs(sim_port, &sim_cfg);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    rd_kafka_t *scons = h_consumer_from_start(st.bootstrap, "sluice.stream");
    results_seen = sl_hmap_new();
    chunks_seen = sl_hmap_new();

    /* warm-up through the first route, so every process has joined its group */
    submit(prod, "warm", "oa", 0);
    json_t *w = wait_result(cons, scons, "warm", 30000);
    h_check(w != NULL, "warm-up job answered");

    for (int d = 0; d < 4; d++) {
        const char *dep = DEPS[d];
        int ok = 0, canonical = 0, tools = 0;
        for (int i = 0; i < PLAIN + 1; i++) {
            char idem[32];
            snprintf(idem, sizeof idem, "%s-%d", dep, i);
            submit(prod, idem, dep, i == PLAIN ? 1 : 0);
        }
        for (int i = 0; i < PLAIN + 1; i++) {
            char idem[32];
            snprintf(idem, sizeof idem, "%s-%d", dep, i);
            json_t *r = wait_result(cons, scons, idem, 20000);
            const char *status = json_string_value(json_object_get(r, "status"));
            const char *served = json_string_value(json_object_get(r, "deployment"));
            json_t *choices = json_object_get(json_object_get(r, "response"), "choices");
            json_t *msg = json_object_get(json_array_get(choices, 0), "message");
            json_t *usage = json_object_get(r, "usage");
            ok += status != NULL && strcmp(status, "succeeded") == 0 && served != NULL &&
                  strcmp(served, dep) == 0;
            int text = json_is_string(json_object_get(msg, "content")) &&
                       json_string_length(json_object_get(msg, "content")) > 0;
            int calls = json_array_size(json_object_get(msg, "tool_calls")) > 0;
            canonical += (text || calls) && json_integer_value(json_object_get(usage, "input")) > 0 &&
                         json_integer_value(json_object_get(usage, "output")) > 0;
            tools += i == PLAIN && calls;
            if (status == NULL || strcmp(status, "succeeded") != 0)
                printf("  %s: %s %s\n", idem, status ? status : "no result",
                       json_string_value(json_object_get(json_object_get(r, "error"), "message"))
                           ?: "");
        }
        h_check(ok == PLAIN + 1 && canonical == PLAIN + 1,
                "%s: %d of %d succeeded on it with a canonical answer and usage (%d)", dep, ok,
                PLAIN + 1, canonical);
        h_check(tools == 1, "%s: a request with tools got a tool call back", dep);

        /* one streamed job at a time, so the simulator's last first chunk is this one's */
        char idem[32];
        snprintf(idem, sizeof idem, "%s-stream", dep);
        submit(prod, idem, dep, 2);
        json_t *r = wait_result(cons, scons, idem, 20000);
        chunks_t *ch = wait_chunks(cons, scons, job_id_of(r), 10000);
        int64_t first_rx = ch != NULL ? ch->first_rx_ms : 0;
        json_t *done = ch != NULL ? ch->done : NULL;
        int in_order = ch != NULL && ch->in_order;
        int n = ch != NULL ? ch->chunks : 0;
        json_t *stats = h_http_json(st.stats_url);
        json_t *ds = json_object_get(json_object_get(stats, "deployments"), dep);
        int64_t sent = json_integer_value(json_object_get(ds, "last_first_chunk_ms"));
        json_decref(stats);
        int64_t lag = first_rx - sent;
        json_t *du = json_object_get(done, "usage");
        h_check(r != NULL && strcmp(json_string_value(json_object_get(r, "status")) ?: "",
                                    "succeeded") == 0 &&
                    n >= 2 && in_order && done != NULL &&
                    json_integer_value(json_object_get(du, "output")) > 0,
                "%s: streamed job succeeded, %d chunks in order, the last done with usage", dep,
                n);
        h_check(sent > 0 && first_rx > 0 && lag <= FIRST_CHUNK_MAX_MS,
                "%s: first chunk seen %lld ms after the simulator sent it (<= %d)", dep,
                (long long)lag, FIRST_CHUNK_MAX_MS);
    }

    /* streams that are always cut */
    int ended = 0, done_unfinished = 0;
    for (int i = 0; i < CUT_JOBS; i++) {
        char idem[32];
        snprintf(idem, sizeof idem, "cut-%d", i);
        submit(prod, idem, "cut", 2);
    }
    for (int i = 0; i < CUT_JOBS; i++) {
        char idem[32];
        snprintf(idem, sizeof idem, "cut-%d", i);
        json_t *r = wait_result(cons, scons, idem, 30000);
        const char *status = json_string_value(json_object_get(r, "status"));
        const char *reason =
            json_string_value(json_object_get(json_object_get(r, "error"), "reason"));
        ended += status != NULL && (strcmp(status, "succeeded") == 0 ||
                                    (reason != NULL && reason[0] != '\0'));
        chunks_t *ch = wait_chunks(cons, scons, job_id_of(r), 5000);
        done_unfinished += ch != NULL && ch->done_cut > 0;
    }
    int64_t cut_calls = h_sql_count(dbpath, "SELECT COUNT(*) FROM reservations r JOIN jobs j ON"
                                            " j.job_id = r.job_id WHERE j.route = 'cut' AND"
                                            " r.outcome = 'transport'");
    h_check(ended == CUT_JOBS && cut_calls >= CUT_JOBS,
            "cut streams: %lld attempts reconciled as transport failures, every job ended "
            "succeeded or with a reason (%d)",
            (long long)cut_calls, ended);
    h_check(done_unfinished == CUT_JOBS,
            "cut streams: each ended on sluice.stream with a done chunk without finish_reason (%d)",
            done_unfinished);
    usleep(300 * 1000);
    int64_t open = h_sql_count(dbpath, "SELECT n FROM counters WHERE name = 'open_reservations'");
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/buckets/deployment:cut:max_in_flight",
             admin_port);
    long status = 0;
    json_t *gauge = h_http_call("GET", url, ADMIN_KEY, NULL, &status);
    double level = json_number_value(json_object_get(gauge, "level"));
    double capacity = json_number_value(json_object_get(gauge, "capacity"));
    json_decref(gauge);
    h_check(open == 0 && status == 200 && level == capacity && capacity == 4,
            "after cut streams: no reservation open (%lld), in-flight gauge empty (%g of %g)",
            (long long)open, level, capacity);

    /* streams that fall silent: cut by the idle timeout, not by the silence's end */
    double stall_t0 = sl_mono_ms();
    for (int i = 0; i < STALL_JOBS; i++) {
        char idem[32];
        snprintf(idem, sizeof idem, "stall-%d", i);
        submit(prod, idem, "stall", 2);
    }
    int stall_ended = 0, stall_unfinished = 0;
    for (int i = 0; i < STALL_JOBS; i++) {
        char idem[32];
        snprintf(idem, sizeof idem, "stall-%d", i);
        json_t *r = wait_result(cons, scons, idem, STALL_MS);
        const char *rstatus = json_string_value(json_object_get(r, "status"));
        const char *reason =
            json_string_value(json_object_get(json_object_get(r, "error"), "reason"));
        stall_ended += rstatus != NULL &&
                       (strcmp(rstatus, "succeeded") == 0 || (reason != NULL && reason[0] != '\0'));
        chunks_t *ch = wait_chunks(cons, scons, job_id_of(r), 5000);
        stall_unfinished += ch != NULL && ch->done_cut > 0;
    }
    double stall_elapsed = sl_mono_ms() - stall_t0;
    int64_t idle_cuts = h_sql_count(dbpath, "SELECT COUNT(*) FROM reservations r JOIN jobs j ON"
                                            " j.job_id = r.job_id WHERE j.route = 'stall' AND"
                                            " r.outcome = 'timeout'");
    json_t *stall_stats = h_http_json(st.stats_url);
    int64_t stalled = json_integer_value(json_object_get(
        json_object_get(json_object_get(stall_stats, "deployments"), "stall"), "stalled"));
    json_decref(stall_stats);
    h_check(stall_ended == STALL_JOBS && stalled >= STALL_JOBS && idle_cuts >= STALL_JOBS &&
                stall_elapsed < STALL_END_MAX_MS,
            "silent streams: %lld stalled by the simulator, %lld attempts cut and reconciled as "
            "timeouts, every job ended (%d) in %.1f s (< %d s; the silence lasts %d s)",
            (long long)stalled, (long long)idle_cuts, stall_ended, stall_elapsed / 1000.0,
            STALL_END_MAX_MS / 1000, STALL_MS / 1000);
    h_check(stall_unfinished == STALL_JOBS,
            "silent streams: each ended on sluice.stream with a done chunk without finish_reason "
            "(%d)",
            stall_unfinished);
    usleep(300 * 1000);
    open = h_sql_count(dbpath, "SELECT n FROM counters WHERE name = 'open_reservations'");
    h_check(open == 0, "after silent streams: no reservation open (%lld)", (long long)open);

    json_t *stats = h_http_json(st.stats_url);
    h_check(stats != NULL && h_sim_total(stats, "refused") == 0,
            "the simulator answered 429 zero times (%lld)",
            (long long)h_sim_total(stats, "refused"));
    json_decref(stats);

    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    rd_kafka_consumer_close(scons);
    rd_kafka_destroy(scons);
    rd_kafka_destroy(prod);
    sl_hmap_each(results_seen, free_result, NULL);
    sl_hmap_free(results_seen);
    sl_hmap_each(chunks_seen, free_chunks, NULL);
    sl_hmap_free(chunks_seen);
    int bad = h_stack_down(&st);
    h_check(bad == 0, "every process exited cleanly (%d did not)", bad);
    free(sim_cfg);
    free((char *)cfg);
    int rc = h_summary("providers");
    h_cleanup(rc != 0);
    return rc;
}
