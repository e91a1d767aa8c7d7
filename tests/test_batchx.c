/* test_batchx.c - the dispatcher's batch executor (dispatcher/batch.h) against the provider
 * simulator's batch APIs (ops/sim) over real HTTP on loopback, one deployment of each provider:
 * a create answered with the provider's id, a create repeated (in the same process, and by a
 * new one that finds the batch by its label) that makes no second batch, a poll before and
 * after the turnaround, and a collect that reports every line as its job's usage event, valid
 * against schema/usage.json, and then the batch event naming no missing job. */
#include <check.h>
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/buf.h"
#include "../common/config.h"
#include "../common/jsonschema.h"
#include "../common/sign.h"
#include "../common/util.h"
#include "../dispatcher/batch.h"
#include "../ops/sim/http.h"
#include "../ops/sim/sim.h"

#define SIM_KEY "sim-batch-key-0123456789"
enum { MAX_MSGS = 256, TURNAROUND_MS = 300 };

static const char *const DEPS[4] = {"oa", "az", "an", "ge"};

static struct {
    char dir[64];
    sl_sim_t *sim;
    sl_sim_server_t *server;
    uint16_t port;
    sl_config_t *cfg;
    sl_schema_t *usage_schema, *event_schema;
    json_t *msgs[MAX_MSGS];
    int nmsgs;
} env;

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void start_env(void)
{
    memset(&env, 0, sizeof env);
    snprintf(env.dir, sizeof env.dir, "/tmp/sluice-test-batchx-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(env.dir));
    static const char *const apis[4] = {"openai", "azure", "anthropic", "gemini"};
    char text[8192];
    int n = snprintf(text, sizeof text, "{\"minute_ms\":60000,\"deployments\":[");
    for (int i = 0; i < 4; i++)
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "%s{\"name\":\"%s\",\"api\":\"%s\",\"model\":\"m\",\"api_key\":\"" SIM_KEY
                      "\",\"batch\":{\"turnaround_ms\":%d}}",
                      i ? "," : "", DEPS[i], apis[i], TURNAROUND_MS);
    snprintf(text + n, sizeof text - (size_t)n, "]}");
    char err[512] = "";
    sl_sim_config_t *scfg = NULL;
    ck_assert_msg(sl_sim_config_parse(text, strlen(text), &scfg, err, sizeof err) == SL_OK,
                  "sim config: %s", err);
    ck_assert_int_eq(sl_sim_new(scfg, 0, &env.sim), SL_OK);
    ck_assert_int_eq(sl_sim_server_start(env.sim, "127.0.0.1", 0, &env.server), SL_OK);
    env.port = sl_sim_server_port(env.server);
    char key_path[128], cfg_path[128];
    snprintf(key_path, sizeof key_path, "%s/sim.key", env.dir);
    snprintf(cfg_path, sizeof cfg_path, "%s/sluice.json", env.dir);
    write_text(key_path, SIM_KEY "\n");
    static const char *const urls[4] = {"/oa/v1", "/az/openai/deployments/az", "/an/v1",
                                        "/ge/v1beta"};
    n = snprintf(text, sizeof text, "{\"deployments\":[");
    for (int i = 0; i < 4; i++)
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "%s{\"name\":\"%s\",\"provider\":\"%s\",\"model\":\"m\","
                      "\"base_url\":\"http://127.0.0.1:%u%s\",\"api_key_file\":\"%s\","
                      "\"timeout_ms\":5000,\"batch\":{}}",
                      i ? "," : "", DEPS[i], apis[i], env.port, urls[i], key_path);
    snprintf(text + n, sizeof text - (size_t)n,
             "],\"routes\":[{\"name\":\"r\",\"deployments\":[\"oa\"]}]}");
    write_text(cfg_path, text);
    ck_assert_msg(sl_config_load(cfg_path, &env.cfg, err, sizeof err) == SL_OK, "config: %s", err);
    ck_assert_int_eq(sl_schema_load_file("schema/usage.json", &env.usage_schema, err, sizeof err),
                     SL_OK);
    ck_assert_int_eq(
        sl_schema_load_file("schema/batch-event.json", &env.event_schema, err, sizeof err), SL_OK);
}

static void stop_env(void)
{
    for (int i = 0; i < env.nmsgs; i++)
        json_decref(env.msgs[i]);
    sl_schema_free(env.usage_schema);
    sl_schema_free(env.event_schema);
    sl_config_free(env.cfg);
    sl_sim_server_stop(env.server);
    sl_sim_free(env.sim);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", env.dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Every message is valid against its schema: a batch event or a usage event. */
static void on_msg(const char *key, const char *value, void *arg)
{
    (void)arg;
    ck_assert_str_eq(key, "acme");
    ck_assert_int_lt(env.nmsgs, MAX_MSGS);
    json_t *doc = json_loads(value, 0, NULL);
    ck_assert_msg(doc != NULL, "not JSON: %s", value);
    char why[512] = "";
    int event = json_object_get(doc, "kind") != NULL;
    ck_assert_msg(sl_schema_validate(event ? env.event_schema : env.usage_schema, doc, why,
                                     sizeof why) == SL_OK,
                  "invalid %s (%s): %s", event ? "batch event" : "usage event", why, value);
    env.msgs[env.nmsgs++] = doc;
}

/* Drains bx until a batch event came (or 10 s); returns it (owned by env). */
static json_t *wait_event(sl_batchx_t *bx)
{
    for (double until = sl_mono_ms() + 10000; sl_mono_ms() < until;) {
        int from = env.nmsgs;
        sl_batchx_drain(bx, on_msg, NULL);
        for (int i = from; i < env.nmsgs; i++) {
            if (json_object_get(env.msgs[i], "kind") != NULL)
                return env.msgs[i];
        }
        usleep(10000);
    }
    ck_abort_msg("no batch event within 10 s");
    return NULL;
}

static void submit(sl_batchx_t *bx, const char *op)
{
    ck_assert_int_eq(sl_batchx_submit(bx, op, strlen(op)), SL_OK);
}

static void op_text(char *buf, size_t cap, const char *op, const char *dep, const char *pid,
                    int with_jobs, int with_request)
{
    int n =
        snprintf(buf, cap,
                 "{\"v\":1,\"op\":\"%s\",\"batch_id\":\"pb-test-%s\",\"deployment\":\"%s/batch\","
                 "\"tenant\":\"acme\",\"issued_ms\":1",
                 op, dep, dep);
    if (pid != NULL)
        n += snprintf(buf + n, cap - (size_t)n, ",\"provider_batch_id\":\"%s\"", pid);
    if (with_jobs) {
        n += snprintf(buf + n, cap - (size_t)n, ",\"jobs\":[");
        for (int k = 0; k < 3; k++) {
            n += snprintf(buf + n, cap - (size_t)n,
                          "%s{\"job_id\":\"job-%s-%d\",\"attempt\":1,\"reservation_id\":\"a%d\"",
                          k ? "," : "", dep, k, k);
            if (with_request)
                n += snprintf(buf + n, cap - (size_t)n,
                              ",\"request\":{\"model\":\"chat\",\"messages\":[{\"role\":\"user\","
                              "\"content\":\"hello %d\"}],\"max_tokens\":20}",
                              k);
            n += snprintf(buf + n, cap - (size_t)n, "}");
        }
        n += snprintf(buf + n, cap - (size_t)n, "]");
    }
    snprintf(buf + n, cap - (size_t)n, "}");
}

static size_t collect_body(char *data, size_t size, size_t n, void *arg)
{
    return sl_buf_add(arg, data, size * n) == SL_OK ? size * n : 0;
}

/* The batches the simulator created for deployment dep (GET /stats). */
static int64_t sim_batches(const char *dep)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/stats", env.port);
    sl_buf_t b;
    sl_buf_init(&b, 1 << 24);
    CURL *c = curl_easy_init();
    ck_assert_ptr_nonnull(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
    ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
    curl_easy_cleanup(c);
    json_t *root = json_loadb(b.ptr, b.len, 0, NULL);
    sl_buf_free(&b);
    ck_assert_ptr_nonnull(root);
    json_t *bj =
        json_object_get(json_object_get(json_object_get(root, "deployments"), dep), "batch");
    int64_t v = json_integer_value(json_object_get(bj, "batches_created"));
    json_decref(root);
    return v;
}

START_TEST(each_provider_create_repeat_poll_collect)
{
    start_env();
    char err[256] = "", op[4096];
    sl_batchx_t *bx = NULL;
    ck_assert_msg(sl_batchx_new(env.cfg, &bx, err, sizeof err) == SL_OK, "%s", err);
    for (int i = 0; i < 4; i++) {
        const char *dep = DEPS[i];
        op_text(op, sizeof op, "create", dep, NULL, 1, 1);
        submit(bx, op);
        json_t *ev = wait_event(bx);
        ck_assert_str_eq(json_string_value(json_object_get(ev, "state")), "running");
        char pid[128];
        snprintf(pid, sizeof pid, "%s",
                 json_string_value(json_object_get(ev, "provider_batch_id")));
        ck_assert_int_gt(strlen(pid), 0);
        ck_assert_int_eq(sim_batches(dep), 1);
        /* the same create again: the same provider batch, none made */
        submit(bx, op);
        ev = wait_event(bx);
        ck_assert_str_eq(json_string_value(json_object_get(ev, "provider_batch_id")), pid);
        ck_assert_int_eq(sim_batches(dep), 1);
        /* after the turnaround it ended; the collect reports each line, then the event */
        usleep((TURNAROUND_MS + 100) * 1000);
        op_text(op, sizeof op, "poll", dep, pid, 0, 0);
        submit(bx, op);
        ev = wait_event(bx);
        ck_assert_str_eq(json_string_value(json_object_get(ev, "state")), "ended");
        int from = env.nmsgs;
        op_text(op, sizeof op, "collect", dep, pid, 1, 0);
        submit(bx, op);
        ev = wait_event(bx);
        ck_assert_str_eq(json_string_value(json_object_get(ev, "state")), "collected");
        ck_assert_int_eq(json_array_size(json_object_get(ev, "missing")), 0);
        ck_assert_int_eq(json_integer_value(json_object_get(ev, "lines")), 3);
        int lines = 0;
        for (int m = from; m < env.nmsgs; m++) {
            json_t *u = env.msgs[m];
            if (json_object_get(u, "kind") != NULL)
                continue;
            lines++;
            ck_assert_str_eq(json_string_value(json_object_get(u, "outcome")), "ok");
            char want[32];
            snprintf(want, sizeof want, "%s/batch", dep);
            ck_assert_str_eq(json_string_value(json_object_get(u, "deployment")), want);
            ck_assert_int_eq(json_integer_value(json_object_get(u, "attempt")), 1);
            ck_assert(json_integer_value(json_object_get(json_object_get(u, "usage"), "input")) >
                      0);
        }
        ck_assert_int_eq(lines, 3);
    }
    sl_batchx_free(bx);
    /* A new dispatcher (no memory of them): a repeated create finds the batch by its label where
     * the provider gives one (all but Anthropic). */
    ck_assert_int_eq(sl_batchx_new(env.cfg, &bx, err, sizeof err), SL_OK);
    for (int i = 0; i < 4; i++) {
        if (strcmp(DEPS[i], "an") == 0)
            continue;
        op_text(op, sizeof op, "create", DEPS[i], NULL, 1, 1);
        submit(bx, op);
        json_t *ev = wait_event(bx);
        ck_assert_msg(json_object_get(ev, "provider_batch_id") != NULL, "%s", json_dumps(ev, 0));
        ck_assert_int_eq(sim_batches(DEPS[i]), 1);
    }
    sl_batchx_free(bx);
    stop_env();
}
END_TEST

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return 1;
    Suite *s = suite_create("batchx");
    TCase *tc = tcase_create("sim");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, each_provider_create_repeat_poll_collect);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
