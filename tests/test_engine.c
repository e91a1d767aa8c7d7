/* test_engine.c - behaviour of the dispatcher engine (dispatcher/engine.h), end to end in one
 * process: the provider simulator's real HTTP server (ops/sim) on a free loopback port, a sluice
 * config in a temporary folder pointing at it, a fresh Ed25519 key pair, and signed dispatch
 * messages (schema/dispatch.json). Each usage event the engine emits is checked against
 * schema/usage.json; the simulator's GET /stats tells what actually reached the "provider".
 *
 * The provider adapters and streaming are tested against a scripted server instead (see "A
 * scripted provider" below): it answers with recorded bytes from tests/fixtures/providers/, in
 * pieces and at the moments a test chooses, can cut a stream, and records the request it got.
 *
 * Each test starts its own simulator or script, so counters and buckets start clean.
 */
#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <ftw.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/jsonschema.h"
#include "../common/log.h"
#include "../common/sign.h"
#include "../common/util.h"
#include "../dispatcher/engine.h"
#include "../ops/sim/http.h"
#include "../ops/sim/sim.h"

#define SIM_KEY "sim-test-key-0123456789"
#define MAX_EVENTS 64

/* ---- The environment: simulator, config, keys, engine ----------------------------------- */

typedef struct {
    char *key;
    char *value;
    json_t *json;
    double at_ms; /* sl_mono_ms when it was emitted */
} event_t;

/* ---- A scripted provider: one answer, sent in timed pieces ------------------------------- */

#define MAX_PARTS 32

typedef struct {
    int listen_fd;
    uint16_t port;
    pthread_t thread;
    volatile int running;
    /* The answer: status line and headers (CRLF-separated, no blank line at the end), then each
     * part as one HTTP chunk after pause_ms. cut: close without ending the body; stall_ms: wait
     * that long before ending it. */
    char head[2048];
    char *parts[MAX_PARTS];
    int pause_ms[MAX_PARTS];
    int nparts;
    int cut;
    int stall_ms;
    int head_pause_ms; /* waited before the status line */
    /* What happened. */
    volatile int requests;
    char request[65536]; /* the last request, head and body */
    double sent_ms[MAX_PARTS];
} script_t;

static void sleep_unless_stopped(script_t *sc, int ms)
{
    for (int waited = 0; waited < ms && sc->running; waited += 5)
        usleep(5000);
}

static void send_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n <= 0)
            return; /* the client went away (a timeout): the rest is not needed */
        data += n;
        len -= (size_t)n;
    }
}

static void serve_one(script_t *sc, int fd)
{
    size_t len = 0;
    char *req = sc->request;
    size_t cap = sizeof sc->request - 1;
    char *body = NULL;
    size_t want = 0;
    while (len < cap) {
        ssize_t n = recv(fd, req + len, cap - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        req[len] = '\0';
        if (body == NULL && (body = strstr(req, "\r\n\r\n")) != NULL) {
            body += 4;
            const char *cl = strcasestr(req, "content-length:");
            want = cl != NULL ? (size_t)strtoul(cl + 15, NULL, 10) : 0;
        }
        if (body != NULL && len - (size_t)(body - req) >= want)
            break;
    }
    sc->requests++;
    sleep_unless_stopped(sc, sc->head_pause_ms);
    char head[2200];
    int hn = snprintf(head, sizeof head,
                      "%s\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n", sc->head);
    send_all(fd, head, (size_t)hn);
    for (int i = 0; i < sc->nparts && sc->running; i++) {
        sleep_unless_stopped(sc, sc->pause_ms[i]);
        char size[32];
        int sn = snprintf(size, sizeof size, "%zx\r\n", strlen(sc->parts[i]));
        send_all(fd, size, (size_t)sn);
        send_all(fd, sc->parts[i], strlen(sc->parts[i]));
        send_all(fd, "\r\n", 2);
        sc->sent_ms[i] = sl_mono_ms();
    }
    sleep_unless_stopped(sc, sc->stall_ms);
    if (!sc->cut)
        send_all(fd, "0\r\n\r\n", 5);
    close(fd);
}

static void *script_main(void *arg)
{
    script_t *sc = arg;
    while (sc->running) {
        struct pollfd p = {sc->listen_fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int fd = accept(sc->listen_fd, NULL, NULL);
        if (fd >= 0)
            serve_one(sc, fd);
    }
    return NULL;
}

static void script_start(script_t *sc)
{
    memset(sc, 0, sizeof *sc);
    sc->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(sc->listen_fd, 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof addr;
    ck_assert_int_eq(bind(sc->listen_fd, (struct sockaddr *)&addr, sizeof addr), 0);
    ck_assert_int_eq(listen(sc->listen_fd, 8), 0);
    ck_assert_int_eq(getsockname(sc->listen_fd, (struct sockaddr *)&addr, &alen), 0);
    sc->port = ntohs(addr.sin_port);
    sc->running = 1;
    ck_assert_int_eq(pthread_create(&sc->thread, NULL, script_main, sc), 0);
}

static void script_stop(script_t *sc)
{
    if (!sc->running)
        return;
    sc->running = 0;
    pthread_join(sc->thread, NULL);
    close(sc->listen_fd);
    for (int i = 0; i < sc->nparts; i++)
        free(sc->parts[i]);
    sc->nparts = 0;
}

static void script_part(script_t *sc, const char *text, size_t len, int pause_ms)
{
    ck_assert_int_lt(sc->nparts, MAX_PARTS);
    sc->parts[sc->nparts] = strndup(text, len);
    sc->pause_ms[sc->nparts] = pause_ms;
    sc->nparts++;
}

static struct {
    char dir[64];
    sl_sim_t *sim;
    sl_sim_server_t *server;
    uint16_t port;
    sl_config_t *cfg;
    sl_engine_t *engine;
    sl_schema_t *usage_schema;
    event_t events[MAX_EVENTS];
    int nevents;
    sl_schema_t *stream_schema;
    event_t chunks[MAX_EVENTS];
    int nchunks;
    char outcomes[8][96]; /* the outcome callback's first calls: "deployment outcome" */
    int noutcomes;
    script_t script;
} env;

static void on_event(const char *key, const char *value, void *arg)
{
    (void)arg;
    ck_assert_int_lt(env.nevents, MAX_EVENTS);
    event_t *ev = &env.events[env.nevents++];
    ev->key = strdup(key);
    ev->value = strdup(value);
    ev->json = json_loads(value, 0, NULL);
    ev->at_ms = sl_mono_ms();
    ck_assert_msg(ev->json != NULL, "usage event is not JSON: %s", value);
}

/* Keeps what the outcome callback said (the dispatcher's calls_total labels). */
static void on_outcome(const char *deployment, const char *outcome, void *arg)
{
    (void)arg;
    if (env.noutcomes < 8)
        snprintf(env.outcomes[env.noutcomes], sizeof env.outcomes[0], "%s %s",
                 deployment != NULL ? deployment : "(none)", outcome);
    env.noutcomes++;
}

/* Keeps a stream chunk, checked against schema/stream.json. */
static void on_chunk(const char *topic, const char *key, const char *value, void *arg)
{
    (void)arg;
    ck_assert_str_eq(topic, env.cfg->kafka.topic_stream);
    double now = sl_mono_ms();
    ck_assert_int_lt(env.nchunks, MAX_EVENTS);
    event_t *ch = &env.chunks[env.nchunks++];
    ch->key = strdup(key);
    ch->value = strdup(value);
    ch->json = json_loads(value, 0, NULL);
    ch->at_ms = now;
    ck_assert_msg(ch->json != NULL, "chunk is not JSON: %s", value);
    char why[512] = "";
    ck_assert_msg(sl_schema_validate(env.stream_schema, ch->json, why, sizeof why) == SL_OK,
                  "chunk does not match schema/stream.json: %s; %s", why, value);
    ck_assert_ptr_null(strstr(value, SIM_KEY));
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* Starts the simulator with deployments "sim-e" (rpm requests a minute, all as one burst) and
 * "sim-slow" (answers after 3 s), writes a sluice config with deployments:
 *   sim-e       -> the simulator's sim-e, right credential
 *   sim-badkey  -> the simulator's sim-e, wrong credential
 *   sim-slow    -> the simulator's sim-slow, timeout_ms 300
 *   sim-slow-patient -> the simulator's sim-slow, timeout_ms 60000
 *   sim-slow-limited -> the same, with a per-minute limit (so a short stale-dispatch cutoff)
 *   sim-dead    -> a closed port
 * and creates an engine verifying with a fresh key pair. */
static void start_env(int rpm, int ttft_ms)
{
    memset(&env, 0, sizeof env);
    snprintf(env.dir, sizeof env.dir, "/tmp/sluice-test-engine-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(env.dir));

    char text[4096];
    snprintf(text, sizeof text,
             "{\"minute_ms\":60000,\"deployments\":["
             "{\"name\":\"sim-e\",\"model\":\"gpt-4o-mini\",\"rpm\":%d,\"tpm\":1000000,"
             "\"slices_per_minute\":1,\"ttft_ms\":%d,\"ms_per_token\":0,\"output_min\":5,"
             "\"output_max\":20,\"api_key\":\"" SIM_KEY "\"},"
             "{\"name\":\"sim-slow\",\"model\":\"gpt-4o-mini\",\"ttft_ms\":3000,"
             "\"api_key\":\"" SIM_KEY "\"}]}",
             rpm, ttft_ms);
    char err[512] = "";
    sl_sim_config_t *scfg = NULL;
    ck_assert_msg(sl_sim_config_parse(text, strlen(text), &scfg, err, sizeof err) == SL_OK,
                  "sim config: %s", err);
    ck_assert_int_eq(sl_sim_new(scfg, 0, &env.sim), SL_OK);
    ck_assert_int_eq(sl_sim_server_start(env.sim, "127.0.0.1", 0, &env.server), SL_OK);
    env.port = sl_sim_server_port(env.server);
    ck_assert_uint_gt(env.port, 0);

    char key_path[128], bad_key_path[128], cfg_path[128], sk[128], pk[128];
    snprintf(key_path, sizeof key_path, "%s/sim.key", env.dir);
    snprintf(bad_key_path, sizeof bad_key_path, "%s/wrong.key", env.dir);
    snprintf(cfg_path, sizeof cfg_path, "%s/sluice.json", env.dir);
    snprintf(sk, sizeof sk, "%s/dispatch.key", env.dir);
    snprintf(pk, sizeof pk, "%s/dispatch.pub", env.dir);
    write_text(key_path, SIM_KEY "\n");
    write_text(bad_key_path, "not-the-sim-key\n");
    snprintf(text, sizeof text,
             "{\"deployments\":["
             "{\"name\":\"sim-e\",\"base_url\":\"http://127.0.0.1:%u/sim-e/v1\","
             "\"model\":\"gpt-4o-mini\",\"api_key_file\":\"%s\",\"timeout_ms\":5000},"
             "{\"name\":\"sim-badkey\",\"base_url\":\"http://127.0.0.1:%u/sim-e/v1\","
             "\"model\":\"gpt-4o-mini\",\"api_key_file\":\"%s\",\"timeout_ms\":5000},"
             "{\"name\":\"sim-slow\",\"base_url\":\"http://127.0.0.1:%u/sim-slow/v1\","
             "\"model\":\"gpt-4o-mini\",\"api_key_file\":\"%s\",\"timeout_ms\":300},"
             "{\"name\":\"sim-slow-patient\",\"base_url\":\"http://127.0.0.1:%u/sim-slow/v1\","
             "\"model\":\"gpt-4o-mini\",\"api_key_file\":\"%s\",\"timeout_ms\":60000},"
             "{\"name\":\"sim-slow-limited\",\"base_url\":\"http://127.0.0.1:%u/sim-slow/v1\","
             "\"model\":\"gpt-4o-mini\",\"api_key_file\":\"%s\",\"timeout_ms\":60000,"
             "\"limits\":{\"rpm\":600}},"
             "{\"name\":\"sim-dead\",\"base_url\":\"http://127.0.0.1:1/v1\","
             "\"model\":\"gpt-4o-mini\",\"api_key_file\":\"%s\",\"timeout_ms\":2000}],"
             "\"routes\":[{\"name\":\"r\",\"deployments\":[\"sim-e\"]}],"
             "\"signing\":{\"secret_key_file\":\"%s\",\"public_key_file\":\"%s\"}}",
             env.port, key_path, env.port, bad_key_path, env.port, key_path, env.port, key_path,
             env.port, key_path, key_path, sk, pk);
    write_text(cfg_path, text);
    ck_assert_msg(sl_config_load(cfg_path, &env.cfg, err, sizeof err) == SL_OK, "config: %s", err);

    ck_assert_int_eq(sl_sign_keygen(sk, pk), SL_OK);
    ck_assert_msg(sl_engine_new(env.cfg, on_event, NULL, &env.engine, err, sizeof err) == SL_OK,
                  "engine: %s", err);
    ck_assert_msg(sl_schema_load_file("schema/usage.json", &env.usage_schema, err, sizeof err) ==
                      SL_OK,
                  "%s", err);
    ck_assert_msg(sl_schema_load_file("schema/stream.json", &env.stream_schema, err, sizeof err) ==
                      SL_OK,
                  "%s", err);
    sl_engine_on_chunk(env.engine, on_chunk, NULL);
    sl_engine_on_outcome(env.engine, on_outcome, NULL);
}

/* Starts the scripted provider (its answer is set by the test before it submits) and an engine
 * whose config has one deployment of each API on it, all with the same credential:
 *   p-openai     openai     http://127.0.0.1:PORT/v1
 *   p-azure      azure      http://127.0.0.1:PORT/openai/deployments/dep1
 *   p-anthropic  anthropic  http://127.0.0.1:PORT/v1
 *   p-gemini     gemini     http://127.0.0.1:PORT/v1beta (timeout_ms 500)
 *   p-idle       openai     http://127.0.0.1:PORT/v1 (timeout_ms 5000, stream idle 300 ms)
 */
static void start_script_env(void)
{
    memset(&env, 0, sizeof env);
    snprintf(env.dir, sizeof env.dir, "/tmp/sluice-test-engine-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(env.dir));
    script_start(&env.script);
    char key_path[128], cfg_path[128], sk[128], pk[128], text[4096];
    snprintf(key_path, sizeof key_path, "%s/provider.key", env.dir);
    snprintf(cfg_path, sizeof cfg_path, "%s/sluice.json", env.dir);
    snprintf(sk, sizeof sk, "%s/dispatch.key", env.dir);
    snprintf(pk, sizeof pk, "%s/dispatch.pub", env.dir);
    write_text(key_path, SIM_KEY "\n");
    unsigned port = env.script.port;
    snprintf(text, sizeof text,
             "{\"deployments\":["
             "{\"name\":\"p-openai\",\"provider\":\"openai\",\"base_url\":"
             "\"http://127.0.0.1:%u/v1\",\"model\":\"gpt-4o-mini\",\"api_key_file\":\"%s\","
             "\"timeout_ms\":5000},"
             "{\"name\":\"p-azure\",\"provider\":\"azure\",\"base_url\":"
             "\"http://127.0.0.1:%u/openai/deployments/dep1\",\"model\":\"gpt-4o\","
             "\"api_key_file\":\"%s\",\"timeout_ms\":5000},"
             "{\"name\":\"p-anthropic\",\"provider\":\"anthropic\",\"base_url\":"
             "\"http://127.0.0.1:%u/v1\",\"model\":\"claude-sonnet-4-5\",\"api_key_file\":"
             "\"%s\",\"timeout_ms\":5000},"
             "{\"name\":\"p-gemini\",\"provider\":\"gemini\",\"base_url\":"
             "\"http://127.0.0.1:%u/v1beta\",\"model\":\"gemini-2.5-flash\",\"api_key_file\":"
             "\"%s\",\"timeout_ms\":500},"
             "{\"name\":\"p-idle\",\"provider\":\"openai\",\"base_url\":"
             "\"http://127.0.0.1:%u/v1\",\"model\":\"gpt-4o-mini\",\"api_key_file\":\"%s\","
             "\"timeout_ms\":5000,\"stream_idle_timeout_ms\":300}],"
             "\"routes\":[{\"name\":\"r\",\"deployments\":[\"p-openai\"]}],"
             "\"signing\":{\"secret_key_file\":\"%s\",\"public_key_file\":\"%s\"}}",
             port, key_path, port, key_path, port, key_path, port, key_path, port, key_path, sk,
             pk);
    write_text(cfg_path, text);
    char err[512] = "";
    ck_assert_msg(sl_config_load(cfg_path, &env.cfg, err, sizeof err) == SL_OK, "config: %s", err);
    ck_assert_int_eq(sl_sign_keygen(sk, pk), SL_OK);
    ck_assert_msg(sl_engine_new(env.cfg, on_event, NULL, &env.engine, err, sizeof err) == SL_OK,
                  "engine: %s", err);
    ck_assert_msg(sl_schema_load_file("schema/usage.json", &env.usage_schema, err, sizeof err) ==
                      SL_OK,
                  "%s", err);
    ck_assert_msg(sl_schema_load_file("schema/stream.json", &env.stream_schema, err, sizeof err) ==
                      SL_OK,
                  "%s", err);
    sl_engine_on_chunk(env.engine, on_chunk, NULL);
}

/* The script answers with status line and headers head, then the recorded body fixture split
 * into its SSE events, one part each, all at once except the second, which waits
 * pause_second_ms; keep is how many events to send (0: all). */
static void script_events(const char *head, const char *fixture, int keep, int pause_second_ms)
{
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/providers/%s", fixture);
    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(sl_read_file(path, 1 << 20, &text, &len), SL_OK);
    snprintf(env.script.head, sizeof env.script.head, "%s", head);
    int sent = 0;
    for (char *at = text; *at != '\0' && (keep == 0 || sent < keep);) {
        char *end = strstr(at, "\r\n\r\n");
        size_t sep = 4;
        char *lf = strstr(at, "\n\n");
        if (end == NULL || (lf != NULL && lf < end)) {
            end = lf;
            sep = 2;
        }
        size_t n = end != NULL ? (size_t)(end - at) + sep : strlen(at);
        script_part(&env.script, at, n, sent == 1 ? pause_second_ms : 0);
        sent++;
        at += n;
    }
    free(text);
}

/* The script answers with status line and headers head and the body of a recorded .http file. */
static void script_whole(const char *head, const char *fixture)
{
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/providers/%s", fixture);
    char *text = NULL;
    ck_assert_int_eq(sl_read_file(path, 1 << 20, &text, NULL), SL_OK);
    const char *body = strstr(text, "\r\n\r\n");
    ck_assert_ptr_nonnull(body);
    snprintf(env.script.head, sizeof env.script.head, "%s", head);
    script_part(&env.script, body + 4, strlen(body + 4), 0);
    free(text);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void stop_env(void)
{
    sl_engine_free(env.engine);
    script_stop(&env.script);
    sl_sim_server_stop(env.server);
    sl_sim_free(env.sim);
    sl_config_free(env.cfg);
    sl_schema_free(env.usage_schema);
    sl_schema_free(env.stream_schema);
    for (int i = 0; i < env.nevents; i++) {
        free(env.events[i].key);
        free(env.events[i].value);
        json_decref(env.events[i].json);
    }
    for (int i = 0; i < env.nchunks; i++) {
        free(env.chunks[i].key);
        free(env.chunks[i].value);
        json_decref(env.chunks[i].json);
    }
    nftw(env.dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    memset(&env, 0, sizeof env);
}

/* ---- Dispatch messages ------------------------------------------------------------------ */

/* Builds a dispatch message (caller frees). lease_ms is relative to now. */
static char *dispatch_msg(const char *job_id, int attempt, const char *deployment, int64_t lease_ms,
                          const char *content)
{
    int64_t now = sl_now_ms();
    char res_id[64];
    snprintf(res_id, sizeof res_id, "res-%s-%d", job_id, attempt);
    json_t *msg = json_pack("{s:i, s:s, s:i, s:s, s:I, s:I, s:s, s:s, s:{s:s, s:[{s:s, s:s}], "
                            "s:i}}",
                            "v", 1, "job_id", job_id, "attempt", attempt, "reservation_id", res_id,
                            "lease_expires_ms", (json_int_t)(now + lease_ms), "issued_ms",
                            (json_int_t)now, "deployment", deployment, "idempotency_key",
                            "the-same-client-key", "request", "model", "gpt-4o-mini", "messages",
                            "role", "user", "content", content, "max_tokens", 16);
    ck_assert_ptr_nonnull(msg);
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    ck_assert_ptr_nonnull(text);
    return text;
}

/* Builds a dispatch message carrying request (JSON text); caller frees. */
static char *dispatch_with(const char *job_id, const char *deployment, const char *request)
{
    int64_t now = sl_now_ms();
    char res_id[64];
    snprintf(res_id, sizeof res_id, "res-%s-%d", job_id, 1);
    json_t *req = json_loads(request, 0, NULL);
    ck_assert_ptr_nonnull(req);
    json_t *msg = json_pack("{s:i, s:s, s:i, s:s, s:I, s:I, s:s, s:s, s:o}", "v", 1, "job_id",
                            job_id, "attempt", 1, "reservation_id", res_id, "lease_expires_ms",
                            (json_int_t)(now + 30000), "issued_ms", (json_int_t)now, "deployment",
                            deployment, "idempotency_key", "k", "request", req);
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    return text;
}

static void submit(const char *msg)
{
    sl_engine_submit(env.engine, msg, strlen(msg), sl_now_ms());
}

/* Submits msg as if it reached the dispatcher at now_ms. */
static sl_err_t submit_at(const char *msg, int64_t now_ms)
{
    return sl_engine_submit(env.engine, msg, strlen(msg), now_ms);
}

/* Runs the engine until nothing is in flight (at most 4 s). */
static void drain(void)
{
    double deadline = sl_mono_ms() + 4000;
    do {
        sl_engine_run(env.engine, -1, 20);
    } while (sl_engine_in_flight(env.engine) > 0 && sl_mono_ms() < deadline);
    ck_assert_int_eq(sl_engine_in_flight(env.engine), 0);
}

/* Checks event i against schema/usage.json and the dispatch it answers; returns it. */
static json_t *event(int i, const char *job_id, int attempt, const char *deployment,
                     const char *outcome)
{
    ck_assert_int_lt(i, env.nevents);
    event_t *ev = &env.events[i];
    char why[512] = "";
    ck_assert_msg(sl_schema_validate(env.usage_schema, ev->json, why, sizeof why) == SL_OK,
                  "usage event does not match schema/usage.json: %s; %s", why, ev->value);
    ck_assert_str_eq(ev->key, job_id);
    json_t *js = ev->json;
    ck_assert_str_eq(json_string_value(json_object_get(js, "job_id")), job_id);
    ck_assert_int_eq(json_integer_value(json_object_get(js, "attempt")), attempt);
    char res_id[64];
    snprintf(res_id, sizeof res_id, "res-%s-%d", job_id, attempt);
    ck_assert_str_eq(json_string_value(json_object_get(js, "reservation_id")), res_id);
    ck_assert_str_eq(json_string_value(json_object_get(js, "deployment")), deployment);
    const char *got = json_string_value(json_object_get(js, "outcome"));
    ck_assert_msg(strcmp(got, outcome) == 0, "outcome %s, expected %s: %s", got, outcome,
                  ev->value);
    ck_assert_int_le(json_integer_value(json_object_get(js, "started_ms")),
                     json_integer_value(json_object_get(js, "finished_ms")));
    /* Credentials never travel in an event. */
    ck_assert_ptr_null(strstr(ev->value, SIM_KEY));
    ck_assert_ptr_null(strstr(ev->value, "Bearer"));
    return js;
}

static int64_t jint(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    ck_assert_msg(json_is_integer(v), "\"%s\" is missing or not an integer", key);
    return (int64_t)json_integer_value(v);
}

/* ---- The simulator's view --------------------------------------------------------------- */

typedef struct {
    char *data;
    size_t len;
} buf_t;

static size_t collect(char *ptr, size_t size, size_t nmemb, void *arg)
{
    buf_t *b = arg;
    size_t n = size * nmemb;
    char *grown = realloc(b->data, b->len + n + 1);
    if (grown == NULL)
        return 0;
    b->data = grown;
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

/* GET /stats and return the counters of one deployment (caller decrefs the returned root via
 * *root). */
static json_t *sim_stats(const char *deployment, json_t **root)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/stats", env.port);
    CURL *curl = curl_easy_init();
    ck_assert_ptr_nonnull(curl);
    buf_t b = {NULL, 0};
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 5L);
    CURLcode cc = curl_easy_perform(curl);
    ck_assert_msg(cc == CURLE_OK, "GET /stats: %s", curl_easy_strerror(cc));
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(curl);
    ck_assert_int_eq(status, 200);
    *root = json_loads(b.data, 0, NULL);
    ck_assert_msg(*root != NULL, "stats are not JSON: %s", b.data);
    free(b.data);
    json_t *dep = json_object_get(json_object_get(*root, "deployments"), deployment);
    ck_assert_ptr_nonnull(dep);
    return dep;
}

/* Asserts the simulator's counters for sim-e. */
static void expect_sim(int64_t admitted, int64_t refused, int64_t replayed, int64_t errors)
{
    json_t *root = NULL;
    json_t *dep = sim_stats("sim-e", &root);
    ck_assert_int_eq(jint(dep, "admitted"), admitted);
    ck_assert_int_eq(jint(dep, "refused"), refused);
    ck_assert_int_eq(jint(dep, "replayed"), replayed);
    ck_assert_int_eq(jint(dep, "errors"), errors);
    json_decref(root);
}

static sl_engine_stats_t stats(void)
{
    sl_engine_stats_t st;
    sl_engine_stats(env.engine, &st);
    return st;
}

/* ---- Tests ------------------------------------------------------------------------------ */

START_TEST(dispatch_yields_one_ok_usage_event)
{
    start_env(100, 20);
    char *msg = dispatch_msg("job-ok-1", 1, "sim-e", 30000, "Name three rivers in Europe.");
    submit(msg);
    ck_assert_int_eq(sl_engine_in_flight(env.engine), 1);
    drain();
    ck_assert_int_eq(env.nevents, 1);
    json_t *ev = event(0, "job-ok-1", 1, "sim-e", "ok");
    ck_assert_int_eq(jint(ev, "http_status"), 200);
    json_t *usage = json_object_get(ev, "usage");
    ck_assert_int_eq(jint(usage, "input"), 7); /* the simulator: ceil(28 chars / 4) */
    ck_assert_int_gt(jint(usage, "output"), 0);
    ck_assert_int_le(jint(usage, "output"), 16);
    ck_assert_int_eq(jint(usage, "total"), jint(usage, "input") + jint(usage, "output"));
    json_t *response = json_object_get(ev, "response");
    ck_assert_str_eq(json_string_value(json_object_get(response, "object")), "chat.completion");
    ck_assert_uint_eq(json_array_size(json_object_get(response, "choices")), 1);
    json_t *rl = json_object_get(ev, "ratelimit");
    ck_assert_int_eq(jint(rl, "limit_requests"), 100);
    ck_assert_int_eq(jint(rl, "remaining_requests"), 99);
    ck_assert_int_eq(jint(rl, "limit_tokens"), 1000000);
    ck_assert(json_is_null(json_object_get(ev, "retry_after_ms")));
    ck_assert(json_is_null(json_object_get(ev, "error")));
    /* The metrics hear the same deployment and outcome, once. */
    ck_assert_int_eq(env.noutcomes, 1);
    ck_assert_str_eq(env.outcomes[0], "sim-e ok");
    /* The simulator holds a 200 for ttft_ms (20) on a millisecond clock, so allow for its
     * rounding: the latency is real, not 0. */
    double total_ms =
        json_number_value(json_object_get(json_object_get(ev, "latency"), "total_ms"));
    ck_assert_msg(total_ms >= 18.0, "latency.total_ms %.3f", total_ms);

    sl_engine_stats_t st = stats();
    ck_assert_int_eq(st.accepted, 1);
    ck_assert_int_eq(st.completed, 1);
    ck_assert_int_eq(st.malformed + st.not_sent, 0);
    expect_sim(1, 0, 0, 0);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(paced_dispatch_goes_out_at_its_time_and_once)
{
    start_env(100, 20);
    char *plain = dispatch_msg("job-paced", 1, "sim-e", 30000, "Name three rivers in Europe.");
    json_t *doc = json_loads(plain, 0, NULL);
    int64_t send_at = sl_now_ms() + 15;
    json_object_set_new(doc, "send_at_ms", json_integer(send_at));
    char *msg = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    submit(msg);
    /* held, counted in flight; a redelivery meanwhile is not a second call */
    ck_assert_int_eq(sl_engine_in_flight(env.engine), 1);
    submit(msg);
    ck_assert_int_eq(sl_engine_in_flight(env.engine), 1);
    drain();
    ck_assert_int_eq(env.nevents, 1);
    json_t *ev = event(0, "job-paced", 1, "sim-e", "ok");
    ck_assert_int_ge(jint(ev, "started_ms"), send_at);
    expect_sim(1, 0, 0, 0);
    free(plain);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(malformed_dispatch_is_dropped)
{
    start_env(100, 20);
    const char *bad[] = {
        "{not json",
        "{\"v\":1,\"job_id\":\"j\",\"attempt\":1}", /* lease, deployment, request missing */
        "{\"v\":2,\"job_id\":\"j\",\"attempt\":1,\"reservation_id\":\"r\",\"lease_expires_ms\":"
        "99999999999999,\"issued_ms\":1,\"deployment\":\"sim-e\",\"idempotency_key\":\"k\","
        "\"request\":{\"messages\":[]}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        submit(bad[i]);
    drain();
    ck_assert_int_eq(env.nevents, 0);
    sl_engine_stats_t st = stats();
    ck_assert_int_eq(st.malformed, 3);
    ck_assert_int_eq(st.accepted, 0);
    expect_sim(0, 0, 0, 0);
    stop_env();
}
END_TEST

START_TEST(expired_lease_is_not_sent)
{
    start_env(100, 20);
    char *expired = dispatch_msg("job-late", 1, "sim-e", -1000, "hi");
    submit(expired);
    /* A lease that ends before a call could reasonably finish is not used either. */
    char *nearly = dispatch_msg("job-nearly", 1, "sim-e", 100, "hi");
    submit(nearly);
    ck_assert_int_eq(sl_engine_in_flight(env.engine), 0);
    drain();
    ck_assert_int_eq(env.nevents, 2);
    json_t *ev = event(0, "job-late", 1, "sim-e", "not_sent");
    ck_assert_int_eq(jint(ev, "http_status"), 0);
    ck_assert(json_is_null(json_object_get(ev, "usage")));
    ck_assert(json_is_null(json_object_get(ev, "response")));
    event(1, "job-nearly", 1, "sim-e", "not_sent");
    sl_engine_stats_t st = stats();
    ck_assert_int_eq(st.not_sent, 2);
    ck_assert_int_eq(st.accepted, 0);
    expect_sim(0, 0, 0, 0);
    free(expired);
    free(nearly);
    stop_env();
}
END_TEST

START_TEST(unknown_deployment_is_not_sent)
{
    start_env(100, 20);
    char *msg = dispatch_msg("job-nowhere", 2, "sim-zzz", 30000, "hi");
    submit(msg);
    drain();
    ck_assert_int_eq(env.nevents, 1);
    event(0, "job-nowhere", 2, "sim-zzz", "not_sent");
    ck_assert_int_eq(env.noutcomes, 1);
    ck_assert_str_eq(env.outcomes[0], "sim-zzz not_sent");
    ck_assert_int_eq(stats().not_sent, 1);
    expect_sim(0, 0, 0, 0);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(dispatch_over_the_provider_limit_is_rate_limited)
{
    start_env(1, 20); /* one request a minute */
    char *first = dispatch_msg("job-rl-1", 1, "sim-e", 30000, "hi");
    char *second = dispatch_msg("job-rl-2", 1, "sim-e", 30000, "hello");
    submit(first);
    drain();
    submit(second);
    drain();
    ck_assert_int_eq(env.nevents, 2);
    event(0, "job-rl-1", 1, "sim-e", "ok");
    json_t *ev = event(1, "job-rl-2", 1, "sim-e", "rate_limited");
    ck_assert_int_eq(jint(ev, "http_status"), 429);
    int64_t retry = jint(ev, "retry_after_ms");
    ck_assert_msg(retry > 50000 && retry <= 60000, "retry_after_ms %lld", (long long)retry);
    json_t *rl = json_object_get(ev, "ratelimit");
    ck_assert_int_eq(jint(rl, "limit_requests"), 1);
    ck_assert_int_eq(jint(rl, "remaining_requests"), 0);
    ck_assert_int_gt(jint(rl, "reset_requests_ms"), 50000);
    ck_assert(json_is_null(json_object_get(ev, "usage")));
    ck_assert(json_is_null(json_object_get(ev, "response")));
    json_t *err = json_object_get(ev, "error");
    ck_assert_str_eq(json_string_value(json_object_get(err, "code")), "rate_limit_exceeded");
    ck_assert_str_eq(json_string_value(json_object_get(err, "type")), "requests");
    ck_assert_ptr_nonnull(
        strstr(json_string_value(json_object_get(err, "message")), "Rate limit reached"));
    expect_sim(1, 1, 0, 0);
    free(first);
    free(second);
    stop_env();
}
END_TEST

START_TEST(idempotency_key_sent_is_the_job_id)
{
    start_env(100, 20);
    /* Both jobs carry the same client idempotency key; only the job id tells them apart. */
    char *a1 = dispatch_msg("job-idem-a", 1, "sim-e", 30000, "first question");
    char *a2 = dispatch_msg("job-idem-a", 2, "sim-e", 30000, "first question");
    char *b1 = dispatch_msg("job-idem-b", 1, "sim-e", 30000, "first question");
    submit(a1);
    drain();
    expect_sim(1, 0, 0, 0);
    /* A second attempt of a job that already succeeded is answered as a replay. */
    submit(a2);
    drain();
    expect_sim(1, 0, 1, 0);
    /* Another job with the same client key is a new call. */
    submit(b1);
    drain();
    expect_sim(2, 0, 1, 0);

    ck_assert_int_eq(env.nevents, 3);
    json_t *e1 = event(0, "job-idem-a", 1, "sim-e", "ok");
    json_t *e2 = event(1, "job-idem-a", 2, "sim-e", "ok");
    json_t *e3 = event(2, "job-idem-b", 1, "sim-e", "ok");
    const char *id1 = json_string_value(json_object_get(json_object_get(e1, "response"), "id"));
    const char *id2 = json_string_value(json_object_get(json_object_get(e2, "response"), "id"));
    const char *id3 = json_string_value(json_object_get(json_object_get(e3, "response"), "id"));
    ck_assert_ptr_nonnull(id1);
    ck_assert_str_eq(id1, id2);
    ck_assert_str_ne(id1, id3);
    free(a1);
    free(a2);
    free(b1);
    stop_env();
}
END_TEST

START_TEST(redelivered_dispatch_in_flight_is_not_sent_twice)
{
    start_env(100, 200);
    char *msg = dispatch_msg("job-dup", 1, "sim-e", 30000, "hi");
    submit(msg);
    submit(msg);
    ck_assert_int_eq(sl_engine_in_flight(env.engine), 1);
    drain();
    ck_assert_int_eq(env.nevents, 1);
    event(0, "job-dup", 1, "sim-e", "ok");
    ck_assert_int_eq(stats().accepted, 1);
    expect_sim(1, 0, 0, 0);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(replay_during_the_call_is_dropped_without_an_event)
{
    start_env(100, 20);
    int d = sl_config_deployment(env.cfg, "sim-slow-limited");
    ck_assert_int_ge(d, 0);
    ck_assert_int_lt(sl_engine_dispatch_max_age_ms(env.cfg, d), 1000);
    char *msg = dispatch_msg("job-replay-live", 1, "sim-slow-limited", 30000, "hi");
    submit(msg);
    ck_assert_int_eq(sl_engine_in_flight(env.engine), 1);
    /* The same signed message again, 1.5 s later, while the 3 s call runs: by then it is older
     * than the deployment's stale cutoff. Were it answered not_sent, the scheduler would free
     * the running call's budgets and dispatch the job a second time. */
    sl_engine_run(env.engine, -1, 50);
    ck_assert_int_eq(submit_at(msg, sl_now_ms() + 1500), SL_OK);
    ck_assert_int_eq(env.nevents, 0);
    ck_assert_int_eq(sl_engine_in_flight(env.engine), 1);
    drain();
    ck_assert_int_eq(env.nevents, 1);
    event(0, "job-replay-live", 1, "sim-slow-limited", "ok");
    sl_engine_stats_t st = stats();
    ck_assert_int_eq(st.accepted, 1);
    ck_assert_int_eq(st.replayed, 1);
    ck_assert_int_eq(st.not_sent, 0);
    json_t *root = NULL;
    json_t *dep = sim_stats("sim-slow", &root);
    ck_assert_int_eq(jint(dep, "admitted"), 1);
    ck_assert_int_eq(jint(dep, "replayed"), 0);
    json_decref(root);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(replay_after_completion_is_dropped)
{
    start_env(100, 20);
    /* sim-e has no per-minute limit: before the age bound, any replay within the lease made a
     * new call. */
    char *msg = dispatch_msg("job-replay-done", 1, "sim-e", 60000, "hi");
    submit(msg);
    drain();
    ck_assert_int_eq(env.nevents, 1);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(submit_at(msg, sl_now_ms() + 1000 * i), SL_OK);
        ck_assert_int_eq(sl_engine_in_flight(env.engine), 0);
    }
    /* Even once it is older than the age bound it is still known as executed: a not_sent for
     * an attempt that ran would give back budgets the provider counted. */
    ck_assert_int_eq(submit_at(msg, sl_now_ms() + SL_ENGINE_DISPATCH_MAX_AGE_MS + 1000), SL_OK);
    drain();
    ck_assert_int_eq(env.nevents, 1);
    event(0, "job-replay-done", 1, "sim-e", "ok");
    sl_engine_stats_t st = stats();
    ck_assert_int_eq(st.accepted, 1);
    ck_assert_int_eq(st.replayed, 4);
    ck_assert_int_eq(st.not_sent, 0);
    expect_sim(1, 0, 0, 0);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(replay_of_a_refused_dispatch_is_not_reported_again)
{
    start_env(100, 20);
    char *msg = dispatch_msg("job-replay-refused", 1, "sim-zzz", 30000, "hi");
    submit(msg);
    submit(msg);
    drain();
    ck_assert_int_eq(env.nevents, 1);
    event(0, "job-replay-refused", 1, "sim-zzz", "not_sent");
    ck_assert_int_eq(stats().replayed, 1);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(another_attempt_or_reservation_is_no_replay)
{
    start_env(100, 20);
    char *a1 = dispatch_msg("job-replay-other", 1, "sim-e", 30000, "hi");
    submit(a1);
    drain();
    /* The same job and attempt under another reservation is another lease. */
    json_t *doc = json_loads(a1, 0, NULL);
    json_object_set_new(doc, "reservation_id", json_string("res-job-replay-other-1b"));
    char *other = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    submit(other);
    drain();
    ck_assert_int_eq(env.nevents, 2);
    ck_assert_int_eq(stats().replayed, 0);
    ck_assert_int_eq(stats().accepted, 2);
    free(a1);
    free(other);
    stop_env();
}
END_TEST

START_TEST(dispatch_older_than_the_age_bound_is_not_sent_on_every_deployment)
{
    start_env(100, 20);
    int d = sl_config_deployment(env.cfg, "sim-e");
    ck_assert_int_eq(sl_engine_dispatch_max_age_ms(env.cfg, d), SL_ENGINE_DISPATCH_MAX_AGE_MS);
    char *msg = dispatch_msg("job-old", 1, "sim-e", 120000, "hi");
    ck_assert_int_eq(submit_at(msg, sl_now_ms() + SL_ENGINE_DISPATCH_MAX_AGE_MS + 1), SL_OK);
    drain();
    ck_assert_int_eq(env.nevents, 1);
    event(0, "job-old", 1, "sim-e", "not_sent");
    ck_assert_int_eq(stats().not_sent, 1);
    expect_sim(0, 0, 0, 0);
    free(msg);
    stop_env();
}
END_TEST

/* The age bound holds when the request leaves, not only when the dispatch arrives: a call held
 * up between the two (the offset commit, the heartbeat, a loaded machine) past its deployment's
 * cutoff would reach the provider later than the ledger's margin covers. On the old engine this
 * call was made. */
START_TEST(dispatch_that_cannot_leave_within_the_age_bound_is_not_sent)
{
    start_env(100, 20);
    int d = sl_config_deployment(env.cfg, "sim-slow-limited");
    int64_t max_age = sl_engine_dispatch_max_age_ms(env.cfg, d);
    ck_assert_int_lt(max_age, 2000);
    char *msg = dispatch_msg("job-stuck", 1, "sim-slow-limited", 60000, "hi");
    submit(msg); /* fresh on arrival: taken */
    ck_assert_int_eq(stats().accepted, 1);
    ck_assert_int_eq(stats().not_sent, 0);
    usleep((useconds_t)(max_age + 50) * 1000);
    drain();
    ck_assert_int_eq(env.nevents, 1);
    json_t *ev = event(0, "job-stuck", 1, "sim-slow-limited", "not_sent");
    ck_assert(json_is_null(json_object_get(ev, "usage")));
    ck_assert(json_is_null(json_object_get(ev, "response")));
    ck_assert_int_eq(stats().not_sent, 1);
    ck_assert_int_eq(stats().completed, 0);
    json_t *root = NULL;
    ck_assert_int_eq(jint(sim_stats("sim-slow", &root), "admitted"), 0);
    json_decref(root);
    /* Answered: a redelivery of it is a replay, not a second chance. */
    submit(msg);
    ck_assert_int_eq(stats().replayed, 1);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(many_dispatches_run_concurrently)
{
    enum { JOBS = 20 };
    start_env(1000, 200);
    char *msgs[JOBS];
    double t0 = sl_mono_ms();
    for (int i = 0; i < JOBS; i++) {
        char job[32], content[32];
        snprintf(job, sizeof job, "job-many-%02d", i);
        snprintf(content, sizeof content, "question %d", i);
        msgs[i] = dispatch_msg(job, 1, "sim-e", 30000, content);
        submit(msgs[i]);
    }
    ck_assert_int_eq(sl_engine_in_flight(env.engine), JOBS);
    drain();
    double elapsed = sl_mono_ms() - t0;
    /* One after another would take at least JOBS * 200 ms. */
    ck_assert_msg(elapsed < JOBS * 200 / 2, "took %.0f ms", elapsed);
    ck_assert_int_eq(env.nevents, JOBS);
    int seen[JOBS] = {0};
    for (int i = 0; i < JOBS; i++) {
        int n = -1;
        ck_assert_int_eq(sscanf(env.events[i].key, "job-many-%d", &n), 1);
        ck_assert(n >= 0 && n < JOBS);
        seen[n]++;
        event(i, env.events[i].key, 1, "sim-e", "ok");
    }
    for (int i = 0; i < JOBS; i++)
        ck_assert_int_eq(seen[i], 1);
    expect_sim(JOBS, 0, 0, 0);
    for (int i = 0; i < JOBS; i++)
        free(msgs[i]);
    stop_env();
}
END_TEST

START_TEST(wrong_credential_is_an_auth_error)
{
    start_env(100, 20);
    char *msg = dispatch_msg("job-auth", 1, "sim-badkey", 30000, "hi");
    submit(msg);
    drain();
    ck_assert_int_eq(env.nevents, 1);
    json_t *ev = event(0, "job-auth", 1, "sim-badkey", "auth_error");
    ck_assert_int_eq(jint(ev, "http_status"), 401);
    ck_assert_ptr_null(strstr(env.events[0].value, "not-the-sim-key"));
    expect_sim(0, 0, 0, 1);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(unreachable_provider_is_a_transport_failure)
{
    start_env(100, 20);
    char *msg = dispatch_msg("job-dead", 1, "sim-dead", 30000, "hi");
    submit(msg);
    drain();
    ck_assert_int_eq(env.nevents, 1);
    json_t *ev = event(0, "job-dead", 1, "sim-dead", "transport");
    ck_assert_int_eq(jint(ev, "http_status"), 0);
    ck_assert(json_is_null(json_object_get(ev, "usage")));
    ck_assert_int_eq(stats().completed, 1);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(slow_provider_times_out)
{
    start_env(100, 20);
    /* sim-slow answers after 3 s; the deployment's timeout is 300 ms. */
    char *msg = dispatch_msg("job-slow", 1, "sim-slow", 30000, "hi");
    double t0 = sl_mono_ms();
    submit(msg);
    drain();
    double elapsed = sl_mono_ms() - t0;
    ck_assert_msg(elapsed < 2000, "took %.0f ms", elapsed);
    ck_assert_int_eq(env.nevents, 1);
    json_t *ev = event(0, "job-slow", 1, "sim-slow", "timeout");
    ck_assert(json_is_null(json_object_get(ev, "usage")));
    free(msg);
    stop_env();
}
END_TEST

START_TEST(call_does_not_outlive_its_lease)
{
    start_env(100, 20);
    /* The provider answers after 3 s and the deployment would wait 60 s, but the scheduler
     * counts on this call for only 1.2 s: it must be over by then. */
    char *msg = dispatch_msg("job-lease", 1, "sim-slow-patient", 1200, "hi");
    double t0 = sl_mono_ms();
    submit(msg);
    drain();
    double elapsed = sl_mono_ms() - t0;
    ck_assert_msg(elapsed < 1200, "the call ran %.0f ms, past its 1200 ms lease", elapsed);
    ck_assert_int_eq(env.nevents, 1);
    event(0, "job-lease", 1, "sim-slow-patient", "timeout");
    free(msg);
    stop_env();
}
END_TEST

START_TEST(free_with_calls_in_flight_is_clean)
{
    start_env(100, 500);
    char *msg = dispatch_msg("job-abandoned", 1, "sim-e", 30000, "hi");
    submit(msg);
    sl_engine_run(env.engine, -1, 20);
    ck_assert_int_eq(sl_engine_in_flight(env.engine), 1);
    /* stop_env frees the engine with the call still running: ASan reports any leak. */
    free(msg);
    stop_env();
}
END_TEST

/* jansson's allocator for the allocation-failure test: counts allocations, and fails the one
 * fail_countdown allocations from now (0: the next one), once; -1: none. */
static long fail_countdown = -1;
static int fail_happened;
static long allocations;

static void *failing_malloc(size_t n)
{
    allocations++;
    if (fail_countdown == 0) {
        fail_countdown = -1;
        fail_happened = 1;
        return NULL;
    }
    if (fail_countdown > 0)
        fail_countdown--;
    return malloc(n);
}

START_TEST(dispatch_the_engine_cannot_take_is_reported)
{
    start_env(1000, 20);
    json_set_alloc_funcs(failing_malloc, free);
    static const char streamed[] =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":8,\"stream\":true}";
    char *msgs[] = {dispatch_msg("job-oom", 1, "sim-e", 30000, "hi"),
                    dispatch_with("job-oom-stream", "sim-e", streamed)};
    for (size_t m = 0; m < sizeof msgs / sizeof msgs[0]; m++) {
        /* jansson's own parser does not survive a failed allocation (its lexer ignores a buffer
         * that could not grow), so the failures start after the engine parsed the message, which
         * is its first use of jansson. */
        allocations = 0;
        json_decref(json_loadb(msgs[m], strlen(msgs[m]), 0, NULL));
        long parse_allocations = allocations;
        int reported = 0;
        /* Fails each later allocation of the submission in turn, until one goes through
         * untouched. */
        for (long n = parse_allocations;; n++) {
            sl_engine_t *e = NULL;
            char err[256] = "";
            ck_assert_msg(sl_engine_new(env.cfg, on_event, NULL, &e, err, sizeof err) == SL_OK,
                          "%s", err);
            int events_before = env.nevents;
            fail_countdown = n;
            fail_happened = 0;
            sl_err_t rc = sl_engine_submit(e, msgs[m], strlen(msgs[m]), sl_now_ms());
            fail_countdown = -1;
            sl_engine_stats_t st;
            sl_engine_stats(e, &st);
            int in_flight = sl_engine_in_flight(e);
            sl_engine_free(e);
            if (!fail_happened) {
                ck_assert_int_eq(rc, SL_OK);
                ck_assert_int_eq(in_flight, 1);
                break;
            }
            /* Running out of memory is not the sender's fault. */
            ck_assert_msg(st.malformed == 0, "message %zu, allocation %ld: counted as malformed", m,
                          n);
            if (rc != SL_OK) {
                ck_assert_int_eq(rc, SL_ENOMEM);
                ck_assert_int_eq(in_flight, 0);
                reported++;
            } else {
                ck_assert_msg(in_flight == 1 || env.nevents > events_before,
                              "message %zu, allocation %ld failed and the dispatch was lost "
                              "without a word",
                              m, n);
            }
        }
        ck_assert_int_gt(reported, 0);
        free(msgs[m]);
    }
    json_set_alloc_funcs(malloc, free);
    stop_env();
}
END_TEST

/* ---- Provider APIs and streaming, against the scripted provider ------------------------ */

static const char stream_request[] =
    "{\"model\":\"x\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":\"Name three rivers in Europe.\"}],\"max_tokens\":64,"
    "\"stream\":true}";

/* Checks the chunks of job_id: seq 0..n-1, the last one (only) done; returns it. */
static json_t *chunk_sequence(const char *job_id, int expected)
{
    ck_assert_msg(env.nchunks == expected, "%d chunks, expected %d", env.nchunks, expected);
    for (int i = 0; i < env.nchunks; i++) {
        ck_assert_str_eq(env.chunks[i].key, job_id);
        json_t *c = env.chunks[i].json;
        ck_assert_str_eq(json_string_value(json_object_get(c, "job_id")), job_id);
        ck_assert_int_eq(jint(c, "seq"), i);
        ck_assert_int_eq(json_is_true(json_object_get(c, "done")), i == env.nchunks - 1);
    }
    return env.chunks[env.nchunks - 1].json;
}

START_TEST(stream_chunks_are_published_as_the_provider_sends_them)
{
    start_script_env();
    /* The role chunk, then 300 ms of silence, then the rest of the answer. */
    script_events("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
                  "x-ratelimit-limit-requests: 500\r\nx-ratelimit-remaining-requests: 499",
                  "openai/stream.sse", 0, 300);
    char *msg = dispatch_with("job-stream", "p-openai", stream_request);
    submit(msg);
    drain();
    ck_assert_int_eq(env.script.requests, 1);
    json_t *last = chunk_sequence("job-stream", 9);
    /* The first chunk went out as soon as its event arrived, not with the rest. */
    double lag = env.chunks[0].at_ms - env.script.sent_ms[0];
    ck_assert_msg(lag >= 0 && lag < 50, "first chunk %.1f ms after the provider sent it", lag);
    ck_assert_msg(env.chunks[0].at_ms < env.script.sent_ms[1], "first chunk waited for the rest");
    ck_assert_str_eq(json_string_value(json_object_get(last, "finish_reason")), "stop");
    json_t *cu = json_object_get(last, "usage");
    ck_assert_int_eq(jint(cu, "input"), 19);
    ck_assert_int_eq(jint(cu, "output"), 10);
    /* One usage event, as for any call, with the assembled answer. */
    ck_assert_int_eq(env.nevents, 1);
    ck_assert(env.events[0].at_ms >= env.chunks[env.nchunks - 1].at_ms);
    json_t *ev = event(0, "job-stream", 1, "p-openai", "ok");
    ck_assert_int_eq(jint(ev, "http_status"), 200);
    json_t *usage = json_object_get(ev, "usage");
    ck_assert(json_equal(usage, cu));
    json_t *choice = json_array_get(json_object_get(json_object_get(ev, "response"), "choices"), 0);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(choice, "message"), "content")),
        "The Danube, the Rhine and the Loire.");
    ck_assert_int_eq(jint(json_object_get(ev, "ratelimit"), "limit_requests"), 500);
    double ttft = json_number_value(json_object_get(json_object_get(ev, "latency"), "ttft_ms"));
    ck_assert_msg(ttft > 0 && ttft < 250, "ttft_ms %.1f", ttft);
    /* What went out: OpenAI's URL and credential header, the deployment's model, usage asked. */
    const char *req = env.script.request;
    ck_assert_ptr_nonnull(strstr(req, "POST /v1/chat/completions HTTP/1.1\r\n"));
    ck_assert_ptr_nonnull(strcasestr(req, "\r\nAuthorization: Bearer " SIM_KEY "\r\n"));
    ck_assert_ptr_nonnull(strstr(req, "\"model\":\"gpt-4o-mini\""));
    ck_assert_ptr_nonnull(strstr(req, "\"stream_options\":{\"include_usage\":true}"));
    ck_assert_int_eq(stats().chunks, 9);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(cut_stream_is_charged_what_was_consumed)
{
    start_script_env();
    /* message_start, a content block, a ping and two text deltas; then the connection drops in
     * the middle of the chunked body. */
    script_events("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream", "anthropic/stream.sse", 5,
                  0);
    env.script.cut = 1;
    char *msg = dispatch_with("job-cut", "p-anthropic", stream_request);
    submit(msg);
    drain();
    json_t *last = chunk_sequence("job-cut", 4);
    ck_assert(json_is_null(json_object_get(last, "finish_reason")));
    ck_assert_int_eq(env.nevents, 1);
    json_t *ev = event(0, "job-cut", 1, "p-anthropic", "transport");
    ck_assert_int_eq(jint(ev, "http_status"), 200);
    ck_assert(json_is_null(json_object_get(ev, "response")));
    /* Input from message_start (25 + 100 cache writes + 2000 cache reads); output from the 21
     * characters seen. */
    json_t *usage = json_object_get(ev, "usage");
    ck_assert_int_eq(jint(usage, "input"), 2125);
    ck_assert_int_eq(jint(usage, "cached"), 2000);
    ck_assert_int_eq(jint(usage, "output"), 6);
    ck_assert(json_equal(usage, json_object_get(last, "usage")));
    const char *message =
        json_string_value(json_object_get(json_object_get(ev, "error"), "message"));
    ck_assert_ptr_nonnull(strstr(message, "cut"));
    /* The Messages API's URL and headers; the system prompt at the top. */
    const char *req = env.script.request;
    ck_assert_ptr_nonnull(strstr(req, "POST /v1/messages HTTP/1.1\r\n"));
    ck_assert_ptr_nonnull(strcasestr(req, "\r\nx-api-key: " SIM_KEY "\r\n"));
    ck_assert_ptr_nonnull(strcasestr(req, "\r\nanthropic-version: 2023-06-01\r\n"));
    ck_assert_ptr_null(strcasestr(req, "Authorization:"));
    ck_assert_ptr_nonnull(strstr(req, "\"system\":\"Be brief.\""));
    ck_assert_ptr_nonnull(strstr(req, "\"model\":\"claude-sonnet-4-5\""));
    free(msg);
    stop_env();
}
END_TEST

START_TEST(stream_that_stalls_past_its_timeout_is_a_timeout)
{
    start_script_env();
    /* The first event, then silence past the deployment's 500 ms timeout. */
    script_events("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream", "gemini/stream.sse", 1, 0);
    env.script.stall_ms = 3000;
    char *msg = dispatch_with("job-stall", "p-gemini", stream_request);
    double t0 = sl_mono_ms();
    submit(msg);
    drain();
    ck_assert_msg(sl_mono_ms() - t0 < 2000, "took %.0f ms", sl_mono_ms() - t0);
    json_t *last = chunk_sequence("job-stall", 2);
    ck_assert_str_eq(json_string_value(json_object_get(env.chunks[0].json, "delta")), "The Danube");
    ck_assert(json_is_null(json_object_get(last, "finish_reason")));
    json_t *ev = event(0, "job-stall", 1, "p-gemini", "timeout");
    json_t *usage = json_object_get(ev, "usage");
    ck_assert_int_eq(jint(usage, "input"), 12);
    ck_assert_int_eq(jint(usage, "output"), 3);
    const char *req = env.script.request;
    ck_assert_ptr_nonnull(strstr(
        req, "POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse HTTP/1.1\r\n"));
    ck_assert_ptr_nonnull(strcasestr(req, "\r\nx-goog-api-key: " SIM_KEY "\r\n"));
    ck_assert_ptr_nonnull(
        strstr(req, "\"systemInstruction\":{\"parts\":[{\"text\":\"Be brief.\"}]}"));
    ck_assert_ptr_nonnull(strstr(req, "\"maxOutputTokens\":64"));
    free(msg);
    stop_env();
}
END_TEST

START_TEST(silent_stream_is_cut_after_its_idle_timeout)
{
    start_script_env();
    /* Three events, then 3 s of silence on an open connection: p-idle allows 300 ms of it,
     * its overall timeout 5 s. */
    script_events("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream", "openai/stream.sse", 3, 0);
    env.script.stall_ms = 3000;
    char *msg = dispatch_with("job-idle", "p-idle", stream_request);
    double t0 = sl_mono_ms();
    submit(msg);
    drain();
    ck_assert_msg(sl_mono_ms() - t0 < 1500, "took %.0f ms", sl_mono_ms() - t0);
    json_t *last = chunk_sequence("job-idle", 4);
    ck_assert_str_eq(json_string_value(json_object_get(env.chunks[2].json, "delta")), " Danube");
    /* Cut the idle timeout after the last byte, to within a few engine turns. */
    double silent = env.chunks[3].at_ms - env.script.sent_ms[2];
    ck_assert_msg(silent >= 300 && silent < 450, "cut after %.0f ms of silence", silent);
    ck_assert(json_is_null(json_object_get(last, "finish_reason")));
    ck_assert_int_eq(env.nevents, 1);
    json_t *ev = event(0, "job-idle", 1, "p-idle", "timeout");
    ck_assert(json_is_null(json_object_get(ev, "response")));
    /* Charged what was consumed: the estimate of the input, the 10 characters seen. */
    json_t *usage = json_object_get(ev, "usage");
    ck_assert_int_gt(jint(usage, "input"), 0);
    ck_assert_int_gt(jint(usage, "output"), 0);
    ck_assert(json_equal(usage, json_object_get(last, "usage")));
    const char *message =
        json_string_value(json_object_get(json_object_get(ev, "error"), "message"));
    ck_assert_ptr_nonnull(strstr(message, "nothing for 300 ms"));
    double total = json_number_value(json_object_get(json_object_get(ev, "latency"), "total_ms"));
    ck_assert_msg(total >= 300 && total < 1000, "total_ms %.1f", total);
    ck_assert_int_eq(stats().completed, 1);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(stream_that_keeps_sending_slowly_is_not_cut)
{
    start_script_env();
    /* Every event 200 ms after the one before: 1.6 s in all, never 300 ms of silence. */
    script_events("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream", "openai/stream.sse", 0, 0);
    for (int i = 1; i < env.script.nparts; i++)
        env.script.pause_ms[i] = 200;
    char *msg = dispatch_with("job-slowly", "p-idle", stream_request);
    double t0 = sl_mono_ms();
    submit(msg);
    drain();
    ck_assert_msg(sl_mono_ms() - t0 >= 1600, "took only %.0f ms", sl_mono_ms() - t0);
    json_t *last = chunk_sequence("job-slowly", 9);
    ck_assert_str_eq(json_string_value(json_object_get(last, "finish_reason")), "stop");
    json_t *ev = event(0, "job-slowly", 1, "p-idle", "ok");
    ck_assert_int_eq(jint(json_object_get(ev, "usage"), "output"), 10);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(idle_clock_starts_when_the_response_does)
{
    start_script_env();
    /* 600 ms before the provider answers at all, then the whole stream: the wait for the
     * first byte is the overall timeout's, not the idle timeout's. */
    script_events("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream", "openai/stream.sse", 0, 0);
    env.script.head_pause_ms = 600;
    char *msg = dispatch_with("job-late", "p-idle", stream_request);
    submit(msg);
    drain();
    chunk_sequence("job-late", 9);
    event(0, "job-late", 1, "p-idle", "ok");
    free(msg);
    stop_env();
}
END_TEST

START_TEST(refused_stream_request_reports_the_retry_hint_and_ends_its_stream)
{
    start_script_env();
    script_whole("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json; charset=UTF-8",
                 "gemini/429_per_minute.http");
    char *msg = dispatch_with("job-429", "p-gemini", stream_request);
    submit(msg);
    drain();
    json_t *last = chunk_sequence("job-429", 1);
    ck_assert(json_is_null(json_object_get(last, "usage")));
    ck_assert(json_is_null(json_object_get(last, "finish_reason")));
    json_t *ev = event(0, "job-429", 1, "p-gemini", "rate_limited");
    ck_assert_int_eq(jint(ev, "http_status"), 429);
    ck_assert_int_eq(jint(ev, "retry_after_ms"), 23000); /* google.rpc.RetryInfo */
    json_t *err = json_object_get(ev, "error");
    ck_assert_str_eq(json_string_value(json_object_get(err, "type")), "RESOURCE_EXHAUSTED");
    ck_assert_str_eq(json_string_value(json_object_get(err, "code")),
                     "GenerateRequestsPerMinutePerProjectPerModel-FreeTier");
    free(msg);
    stop_env();
}
END_TEST

START_TEST(credential_quoted_by_the_provider_never_reaches_an_event)
{
    start_script_env();
    snprintf(env.script.head, sizeof env.script.head,
             "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json");
    const char *body = "{\"error\":{\"code\":\"401\",\"message\":\"Access denied: the key "
                       "'" SIM_KEY "' is not valid for this resource.\"}}";
    script_part(&env.script, body, strlen(body), 0);
    char *msg = dispatch_with("job-leak", "p-azure",
                              "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    submit(msg);
    drain();
    ck_assert_int_eq(env.nevents, 1);
    json_t *ev = event(0, "job-leak", 1, "p-azure", "auth_error"); /* asserts the key is absent */
    ck_assert_ptr_null(strstr(env.events[0].value, SIM_KEY));
    const char *message =
        json_string_value(json_object_get(json_object_get(ev, "error"), "message"));
    ck_assert_ptr_nonnull(strstr(message, "Access denied: the key '****"));
    ck_assert_int_eq(env.nchunks, 0); /* not a stream request */
    /* Azure's URL and header; no model in the body (the deployment is the model). */
    const char *req = env.script.request;
    ck_assert_ptr_nonnull(strstr(
        req, "POST /openai/deployments/dep1/chat/completions?api-version=2024-10-21 HTTP/1.1\r\n"));
    ck_assert_ptr_nonnull(strcasestr(req, "\r\napi-key: " SIM_KEY "\r\n"));
    ck_assert_ptr_null(strcasestr(req, "Authorization:"));
    ck_assert_ptr_null(strstr(req, "\"model\""));
    free(msg);
    stop_env();
}
END_TEST

START_TEST(anthropic_answer_is_canonical_in_the_usage_event)
{
    start_script_env();
    script_whole("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 "anthropic-ratelimit-input-tokens-limit: 400000\r\n"
                 "anthropic-ratelimit-input-tokens-remaining: 398000",
                 "anthropic/200_message.http");
    char *msg = dispatch_with("job-claude", "p-anthropic",
                              "{\"messages\":[{\"role\":\"user\",\"content\":\"Rivers?\"}],"
                              "\"max_tokens\":32}");
    submit(msg);
    drain();
    json_t *ev = event(0, "job-claude", 1, "p-anthropic", "ok");
    json_t *usage = json_object_get(ev, "usage");
    ck_assert_int_eq(jint(usage, "input"), 1233);
    ck_assert_int_eq(jint(usage, "cached"), 1024);
    ck_assert_int_eq(jint(usage, "output"), 14);
    ck_assert_int_eq(jint(usage, "total"), 1247);
    json_t *resp = json_object_get(ev, "response");
    ck_assert_str_eq(json_string_value(json_object_get(resp, "object")), "chat.completion");
    json_t *choice = json_array_get(json_object_get(resp, "choices"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(choice, "finish_reason")), "stop");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(choice, "message"), "content")),
        "The Danube, the Rhine and the Loire.");
    ck_assert_int_eq(jint(json_object_get(ev, "ratelimit"), "limit_input_tokens"), 400000);
    ck_assert_int_eq(jint(json_object_get(ev, "ratelimit"), "remaining_input_tokens"), 398000);
    ck_assert_int_eq(env.nchunks, 0);
    ck_assert_ptr_nonnull(strstr(env.script.request, "\"max_tokens\":32"));
    free(msg);
    stop_env();
}
END_TEST

START_TEST(request_the_api_cannot_express_is_a_client_error_without_a_call)
{
    start_script_env();
    char *msg = dispatch_with(
        "job-bad-args", "p-anthropic",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\","
        "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
        "\"arguments\":\"{broken\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":"
        "\"x\"}],\"stream\":true}");
    submit(msg);
    ck_assert_int_eq(sl_engine_in_flight(env.engine), 0);
    drain();
    ck_assert_int_eq(env.script.requests, 0);
    json_t *ev = event(0, "job-bad-args", 1, "p-anthropic", "client_error");
    json_t *usage = json_object_get(ev, "usage");
    ck_assert_int_eq(jint(usage, "input"), 0);
    ck_assert_int_eq(jint(usage, "output"), 0);
    const char *message =
        json_string_value(json_object_get(json_object_get(ev, "error"), "message"));
    ck_assert_ptr_nonnull(strstr(message, "arguments are not a JSON object"));
    chunk_sequence("job-bad-args", 1);
    ck_assert_int_eq(stats().untranslatable, 1);
    ck_assert_int_eq(stats().accepted, 0);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(tool_call_without_arguments_reaches_the_client_as_an_empty_object)
{
    start_script_env();
    /* get_time takes no arguments: Anthropic streams them as one partial_json of "". */
    script_events("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream",
                  "anthropic/stream_tool_use_no_args.sse", 0, 0);
    char *msg = dispatch_with("job-noargs", "p-anthropic", stream_request);
    submit(msg);
    drain();
    json_t *ev = event(0, "job-noargs", 1, "p-anthropic", "ok");
    json_t *choice = json_array_get(json_object_get(json_object_get(ev, "response"), "choices"), 0);
    json_t *calls = json_object_get(json_object_get(choice, "message"), "tool_calls");
    json_t *fn = json_object_get(json_array_get(calls, 0), "function");
    ck_assert_str_eq(json_string_value(json_object_get(fn, "name")), "get_time");
    ck_assert_str_eq(json_string_value(json_object_get(fn, "arguments")), "{}");
    /* The chunks, joined as a client joins them, carry the same arguments. */
    char joined[64] = "";
    for (int i = 0; i < env.nchunks; i++) {
        size_t k;
        json_t *d;
        json_array_foreach(json_object_get(env.chunks[i].json, "tool_calls"), k, d)
        {
            const char *args =
                json_string_value(json_object_get(json_object_get(d, "function"), "arguments"));
            if (jint(d, "index") == 0 && args != NULL)
                strncat(joined, args, sizeof joined - strlen(joined) - 1);
        }
    }
    ck_assert_str_eq(joined, "{}");
    free(msg);
    stop_env();
}
END_TEST

static Suite *engine_suite(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("sim");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, dispatch_yields_one_ok_usage_event);
    tcase_add_test(tc, paced_dispatch_goes_out_at_its_time_and_once);
    tcase_add_test(tc, malformed_dispatch_is_dropped);
    tcase_add_test(tc, expired_lease_is_not_sent);
    tcase_add_test(tc, unknown_deployment_is_not_sent);
    tcase_add_test(tc, dispatch_over_the_provider_limit_is_rate_limited);
    tcase_add_test(tc, idempotency_key_sent_is_the_job_id);
    tcase_add_test(tc, redelivered_dispatch_in_flight_is_not_sent_twice);
    tcase_add_test(tc, replay_during_the_call_is_dropped_without_an_event);
    tcase_add_test(tc, replay_after_completion_is_dropped);
    tcase_add_test(tc, replay_of_a_refused_dispatch_is_not_reported_again);
    tcase_add_test(tc, another_attempt_or_reservation_is_no_replay);
    tcase_add_test(tc, dispatch_older_than_the_age_bound_is_not_sent_on_every_deployment);
    tcase_add_test(tc, dispatch_that_cannot_leave_within_the_age_bound_is_not_sent);
    tcase_add_test(tc, many_dispatches_run_concurrently);
    tcase_add_test(tc, wrong_credential_is_an_auth_error);
    tcase_add_test(tc, unreachable_provider_is_a_transport_failure);
    tcase_add_test(tc, slow_provider_times_out);
    tcase_add_test(tc, call_does_not_outlive_its_lease);
    tcase_add_test(tc, free_with_calls_in_flight_is_clean);
    tcase_add_test(tc, dispatch_the_engine_cannot_take_is_reported);
    suite_add_tcase(s, tc);
    TCase *ta = tcase_create("adapters");
    tcase_set_timeout(ta, 30);
    tcase_add_test(ta, stream_chunks_are_published_as_the_provider_sends_them);
    tcase_add_test(ta, cut_stream_is_charged_what_was_consumed);
    tcase_add_test(ta, stream_that_stalls_past_its_timeout_is_a_timeout);
    tcase_add_test(ta, silent_stream_is_cut_after_its_idle_timeout);
    tcase_add_test(ta, stream_that_keeps_sending_slowly_is_not_cut);
    tcase_add_test(ta, idle_clock_starts_when_the_response_does);
    tcase_add_test(ta, refused_stream_request_reports_the_retry_hint_and_ends_its_stream);
    tcase_add_test(ta, credential_quoted_by_the_provider_never_reaches_an_event);
    tcase_add_test(ta, anthropic_answer_is_canonical_in_the_usage_event);
    tcase_add_test(ta, request_the_api_cannot_express_is_a_client_error_without_a_call);
    tcase_add_test(ta, tool_call_without_arguments_reaches_the_client_as_an_empty_object);
    suite_add_tcase(s, ta);
    return s;
}

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return 1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    sl_log_init("test_engine", SL_LOG_ERROR); /* the engine warns about every malformed message */
    SRunner *sr = srunner_create(engine_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    curl_global_cleanup();
    return failed == 0 ? 0 : 1;
}
