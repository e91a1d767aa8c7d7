/* test_engine.c - behaviour of the dispatcher engine (dispatcher/engine.h), end to end in one
 * process: the provider simulator's real HTTP server (ops/sim) on a free loopback port, a sluice
 * config in a temporary folder pointing at it, a fresh Ed25519 key pair, and signed dispatch
 * messages (schema/dispatch.json). Each usage event the engine emits is checked against
 * schema/usage.json; the simulator's GET /stats tells what actually reached the "provider".
 *
 * Each test starts its own simulator, so counters and buckets start clean.
 */
#include <check.h>
#include <curl/curl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
} event_t;

static struct {
    char dir[64];
    sl_sim_t *sim;
    sl_sim_server_t *server;
    uint16_t port;
    sl_config_t *cfg;
    sl_signer_t *signer;
    sl_verifier_t *verifier;
    sl_engine_t *engine;
    sl_schema_t *usage_schema;
    event_t events[MAX_EVENTS];
    int nevents;
} env;

static void on_event(const char *key, const char *value, void *arg)
{
    (void)arg;
    ck_assert_int_lt(env.nevents, MAX_EVENTS);
    event_t *ev = &env.events[env.nevents++];
    ev->key = strdup(key);
    ev->value = strdup(value);
    ev->json = json_loads(value, 0, NULL);
    ck_assert_msg(ev->json != NULL, "usage event is not JSON: %s", value);
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
             "{\"name\":\"sim-dead\",\"base_url\":\"http://127.0.0.1:1/v1\","
             "\"model\":\"gpt-4o-mini\",\"api_key_file\":\"%s\",\"timeout_ms\":2000}],"
             "\"routes\":[{\"name\":\"r\",\"deployments\":[\"sim-e\"]}],"
             "\"signing\":{\"secret_key_file\":\"%s\",\"public_key_file\":\"%s\"}}",
             env.port, key_path, env.port, bad_key_path, env.port, key_path, env.port, key_path,
             key_path, sk, pk);
    write_text(cfg_path, text);
    ck_assert_msg(sl_config_load(cfg_path, &env.cfg, err, sizeof err) == SL_OK, "config: %s", err);

    ck_assert_int_eq(sl_sign_keygen(sk, pk), SL_OK);
    ck_assert_int_eq(sl_signer_load(sk, &env.signer), SL_OK);
    ck_assert_int_eq(sl_verifier_load(pk, &env.verifier), SL_OK);
    ck_assert_msg(
        sl_engine_new(env.cfg, env.verifier, on_event, NULL, &env.engine, err, sizeof err) == SL_OK,
        "engine: %s", err);
    ck_assert_msg(sl_schema_load_file("schema/usage.json", &env.usage_schema, err, sizeof err) ==
                      SL_OK,
                  "%s", err);
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
    sl_sim_server_stop(env.server);
    sl_sim_free(env.sim);
    sl_signer_free(env.signer);
    sl_verifier_free(env.verifier);
    sl_config_free(env.cfg);
    sl_schema_free(env.usage_schema);
    for (int i = 0; i < env.nevents; i++) {
        free(env.events[i].key);
        free(env.events[i].value);
        json_decref(env.events[i].json);
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

static void submit_signed(const char *msg)
{
    char sig[SL_SIG_B64_LEN];
    sl_signer_sign(env.signer, msg, strlen(msg), sig);
    sl_engine_submit(env.engine, msg, strlen(msg), sig, strlen(sig), sl_now_ms());
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

START_TEST(signed_dispatch_yields_one_ok_usage_event)
{
    start_env(100, 20);
    char *msg = dispatch_msg("job-ok-1", 1, "sim-e", 30000, "Name three rivers in Europe.");
    submit_signed(msg);
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
    /* The simulator holds a 200 for ttft_ms (20) on a millisecond clock, so allow for its
     * rounding: the latency is real, not 0. */
    double total_ms =
        json_number_value(json_object_get(json_object_get(ev, "latency"), "total_ms"));
    ck_assert_msg(total_ms >= 18.0, "latency.total_ms %.3f", total_ms);

    sl_engine_stats_t st = stats();
    ck_assert_int_eq(st.accepted, 1);
    ck_assert_int_eq(st.completed, 1);
    ck_assert_int_eq(st.forged + st.malformed + st.not_sent, 0);
    expect_sim(1, 0, 0, 0);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(forged_or_unsigned_dispatch_makes_no_call)
{
    start_env(100, 20);
    char *msg = dispatch_msg("job-forged", 1, "sim-e", 30000, "hi");
    size_t len = strlen(msg);
    char sig[SL_SIG_B64_LEN];
    sl_signer_sign(env.signer, msg, len, sig);

    /* 1: no signature at all. */
    sl_engine_submit(env.engine, msg, len, NULL, 0, sl_now_ms());
    /* 2: a valid signature of other bytes (the message was changed after signing). */
    char *changed = strdup(msg);
    char *dep = strstr(changed, "sim-e");
    ck_assert_ptr_nonnull(dep);
    dep[4] = 'x';
    sl_engine_submit(env.engine, changed, len, sig, strlen(sig), sl_now_ms());
    /* 3: a signature from a key pair that is not the scheduler's. */
    char sk[128], pk[128];
    snprintf(sk, sizeof sk, "%s/other.key", env.dir);
    snprintf(pk, sizeof pk, "%s/other.pub", env.dir);
    ck_assert_int_eq(sl_sign_keygen(sk, pk), SL_OK);
    sl_signer_t *other = NULL;
    ck_assert_int_eq(sl_signer_load(sk, &other), SL_OK);
    char other_sig[SL_SIG_B64_LEN];
    sl_signer_sign(other, msg, len, other_sig);
    sl_engine_submit(env.engine, msg, len, other_sig, strlen(other_sig), sl_now_ms());
    /* 4: garbage in the signature header. */
    sl_engine_submit(env.engine, msg, len, "not-a-signature", 15, sl_now_ms());
    /* 5: an empty signature header. */
    sl_engine_submit(env.engine, msg, len, "", 0, sl_now_ms());

    ck_assert_int_eq(sl_engine_in_flight(env.engine), 0);
    drain();
    ck_assert_int_eq(env.nevents, 0);
    sl_engine_stats_t st = stats();
    ck_assert_int_eq(st.forged, 5);
    ck_assert_int_eq(st.accepted, 0);
    ck_assert_int_eq(st.not_sent, 0);
    expect_sim(0, 0, 0, 0);

    /* The genuine message still goes through afterwards. */
    sl_engine_submit(env.engine, msg, len, sig, strlen(sig), sl_now_ms());
    drain();
    ck_assert_int_eq(env.nevents, 1);
    event(0, "job-forged", 1, "sim-e", "ok");
    expect_sim(1, 0, 0, 0);
    sl_signer_free(other);
    free(changed);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(signed_but_malformed_dispatch_is_dropped)
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
        submit_signed(bad[i]);
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
    submit_signed(expired);
    /* A lease that ends before a call could reasonably finish is not used either. */
    char *nearly = dispatch_msg("job-nearly", 1, "sim-e", 100, "hi");
    submit_signed(nearly);
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
    submit_signed(msg);
    drain();
    ck_assert_int_eq(env.nevents, 1);
    event(0, "job-nowhere", 2, "sim-zzz", "not_sent");
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
    submit_signed(first);
    drain();
    submit_signed(second);
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
    submit_signed(a1);
    drain();
    expect_sim(1, 0, 0, 0);
    /* A second attempt of a job that already succeeded is answered as a replay. */
    submit_signed(a2);
    drain();
    expect_sim(1, 0, 1, 0);
    /* Another job with the same client key is a new call. */
    submit_signed(b1);
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
    submit_signed(msg);
    submit_signed(msg);
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
        submit_signed(msgs[i]);
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
    submit_signed(msg);
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
    submit_signed(msg);
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
    submit_signed(msg);
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
    submit_signed(msg);
    drain();
    double elapsed = sl_mono_ms() - t0;
    ck_assert_msg(elapsed < 1200, "the call ran %.0f ms, past its 1200 ms lease", elapsed);
    ck_assert_int_eq(env.nevents, 1);
    event(0, "job-lease", 1, "sim-slow-patient", "timeout");
    free(msg);
    stop_env();
}
END_TEST

START_TEST(engine_without_verifier_accepts_unsigned_messages)
{
    start_env(100, 20);
    sl_engine_t *open = NULL;
    char err[256] = "";
    ck_assert_msg(sl_engine_new(env.cfg, NULL, on_event, NULL, &open, err, sizeof err) == SL_OK,
                  "%s", err);
    char *msg = dispatch_msg("job-unsigned", 1, "sim-e", 30000, "hi");
    sl_engine_submit(open, msg, strlen(msg), NULL, 0, sl_now_ms());
    double deadline = sl_mono_ms() + 4000;
    do {
        sl_engine_run(open, -1, 20);
    } while (sl_engine_in_flight(open) > 0 && sl_mono_ms() < deadline);
    ck_assert_int_eq(env.nevents, 1);
    event(0, "job-unsigned", 1, "sim-e", "ok");
    sl_engine_free(open);
    free(msg);
    stop_env();
}
END_TEST

START_TEST(free_with_calls_in_flight_is_clean)
{
    start_env(100, 500);
    char *msg = dispatch_msg("job-abandoned", 1, "sim-e", 30000, "hi");
    submit_signed(msg);
    sl_engine_run(env.engine, -1, 20);
    ck_assert_int_eq(sl_engine_in_flight(env.engine), 1);
    /* stop_env frees the engine with the call still running: ASan reports any leak. */
    free(msg);
    stop_env();
}
END_TEST

static Suite *engine_suite(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("sim");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, signed_dispatch_yields_one_ok_usage_event);
    tcase_add_test(tc, forged_or_unsigned_dispatch_makes_no_call);
    tcase_add_test(tc, signed_but_malformed_dispatch_is_dropped);
    tcase_add_test(tc, expired_lease_is_not_sent);
    tcase_add_test(tc, unknown_deployment_is_not_sent);
    tcase_add_test(tc, dispatch_over_the_provider_limit_is_rate_limited);
    tcase_add_test(tc, idempotency_key_sent_is_the_job_id);
    tcase_add_test(tc, redelivered_dispatch_in_flight_is_not_sent_twice);
    tcase_add_test(tc, many_dispatches_run_concurrently);
    tcase_add_test(tc, wrong_credential_is_an_auth_error);
    tcase_add_test(tc, unreachable_provider_is_a_transport_failure);
    tcase_add_test(tc, slow_provider_times_out);
    tcase_add_test(tc, call_does_not_outlive_its_lease);
    tcase_add_test(tc, engine_without_verifier_accepts_unsigned_messages);
    tcase_add_test(tc, free_with_calls_in_flight_is_clean);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return 1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    sl_log_init("test_engine", SL_LOG_ERROR); /* the engine warns about every forged message */
    SRunner *sr = srunner_create(engine_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    curl_global_cleanup();
    return failed == 0 ? 0 : 1;
}
