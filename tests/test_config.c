/* test_config.c - behaviour of the config loader (common/config.h): the example config loads
 * with the values it states, defaults fill what a config leaves out, and every mistake an
 * operator can make (unknown key, wrong type, out-of-range number, dangling name, bad hash) is
 * refused with a message that names the offending key.
 *
 * Error cases start from examples/sluice.json, change one thing with jansson and load the result
 * from a temporary file, so each test shows exactly the one mistake it is about.
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/sign.h"

#define EXAMPLE "examples/sluice.json"
#define RESTRICTED "tests/fixtures/config/restricted_routes.json"
#define MINIMAL "tests/fixtures/config/minimal.json"

/* ---- Helpers ---------------------------------------------------------------------------- */

static json_t *load_json(const char *path)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    ck_assert_msg(root != NULL, "%s: %s", path, jerr.text);
    return root;
}

/* Writes root to a temporary file, loads it as a config and removes the file. Takes root. */
static sl_err_t load_doc(json_t *root, sl_config_t **out, char *err, size_t errlen)
{
    char path[] = "/tmp/sluice-test-config-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(json_dump_file(root, path, JSON_INDENT(1)), 0);
    json_decref(root);
    err[0] = '\0';
    sl_err_t rc = sl_config_load(path, out, err, errlen);
    unlink(path);
    return rc;
}

/* Writes text to a temporary file and loads it as a config. */
static sl_err_t load_text(const char *text, sl_config_t **out, char *err, size_t errlen)
{
    char path[] = "/tmp/sluice-test-config-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    err[0] = '\0';
    sl_err_t rc = sl_config_load(path, out, err, errlen);
    unlink(path);
    return rc;
}

/* Asserts that root (taken) is refused with SL_ECONFIG and an error naming every needle. */
static void expect_config_error(json_t *root, const char *needle1, const char *needle2)
{
    char err[512];
    sl_config_t *cfg = (sl_config_t *)0x1;
    sl_err_t rc = load_doc(root, &cfg, err, sizeof err);
    ck_assert_msg(rc == SL_ECONFIG, "expected SL_ECONFIG for (%s, %s), got %s; err: %s", needle1,
                  needle2 ? needle2 : "-", sl_errname(rc), err);
    ck_assert_ptr_null(cfg);
    ck_assert_msg(strchr(err, '\n') == NULL, "error is not one line: %s", err);
    ck_assert_msg(strstr(err, needle1) != NULL, "error does not name \"%s\": %s", needle1, err);
    if (needle2 != NULL)
        ck_assert_msg(strstr(err, needle2) != NULL, "error does not name \"%s\": %s", needle2, err);
}

static json_t *example(void)
{
    return load_json(EXAMPLE);
}

static json_t *at(json_t *root, const char *member, size_t index)
{
    json_t *v = json_array_get(json_object_get(root, member), index);
    ck_assert_ptr_nonnull(v);
    return v;
}

static sl_config_t *load_ok(const char *path)
{
    char err[512] = "";
    sl_config_t *cfg = NULL;
    sl_err_t rc = sl_config_load(path, &cfg, err, sizeof err);
    ck_assert_msg(rc == SL_OK, "%s rejected (%s): %s", path, sl_errname(rc), err);
    ck_assert_ptr_nonnull(cfg);
    return cfg;
}

/* ---- The example config ----------------------------------------------------------------- */

START_TEST(role_keys_default_beside_the_scheduler_key_and_can_be_named)
{
    json_t *root = example();
    json_t *sg = json_object_get(root, "signing");
    json_object_set_new(sg, "secret_key_file", json_string("/etc/sluice/keys/sched.key"));
    json_object_set_new(sg, "dispatcher_public_key_file", json_string("/d.pub"));
    json_object_set_new(sg, "ingest_next_public_key_file", json_string("/i-next.pub"));
    json_object_set_new(sg, "previous_secret_key_file", json_string("/old-sched.key"));
    sl_config_t *cfg = NULL;
    char err[512] = "";
    ck_assert_msg(load_doc(root, &cfg, err, sizeof err) == SL_OK, "%s", err);
    ck_assert_str_eq(cfg->signing_ingest_secret_key_file, "/etc/sluice/keys/ingest.key");
    ck_assert_str_eq(cfg->signing_job_id_key_file, "/etc/sluice/keys/job-id.key");
    ck_assert_str_eq(cfg->signing_dispatcher_public_key_file, "/d.pub");
    ck_assert_str_eq(cfg->signing_ingest_next_public_key_file, "/i-next.pub");
    ck_assert_str_eq(cfg->signing_dispatcher_next_public_key_file, "");
    ck_assert_str_eq(cfg->signing_previous_secret_key_file, "/old-sched.key");
    sl_config_free(cfg);
}
END_TEST

START_TEST(example_config_loads_with_its_deployments_routes_tenants_and_keys)
{
    sl_config_t *cfg = load_ok(EXAMPLE);
    ck_assert_str_eq(cfg->path, EXAMPLE);
    ck_assert_int_eq(cfg->minute_ms, 60000);
    ck_assert_str_eq(cfg->kafka.bootstrap_servers, "");
    ck_assert_str_eq(cfg->kafka.bootstrap_file, "var/devkafka.bootstrap");
    ck_assert_int_eq(cfg->max_request_bytes, 262144);
    ck_assert_str_eq(cfg->db_path, "var/sluice.db");
    ck_assert_int_eq(cfg->lease_ms, 150000);
    ck_assert_int_eq(cfg->max_attempts, 5);
    ck_assert_int_eq(cfg->max_in_flight, 256);
    ck_assert_str_eq(cfg->signing_secret_key_file, "var/dispatch.key");
    ck_assert_str_eq(cfg->signing_public_key_file, "var/dispatch.pub");
    /* The other roles' keys sit beside the scheduler's; no rotation under way. */
    ck_assert_str_eq(cfg->signing_ingest_secret_key_file, "var/ingest.key");
    ck_assert_str_eq(cfg->signing_ingest_public_key_file, "var/ingest.pub");
    ck_assert_str_eq(cfg->signing_dispatcher_secret_key_file, "var/dispatcher.key");
    ck_assert_str_eq(cfg->signing_dispatcher_public_key_file, "var/dispatcher.pub");
    ck_assert_str_eq(cfg->signing_job_id_key_file, "var/job-id.key");
    ck_assert_str_eq(cfg->signing_next_public_key_file, "");
    ck_assert_str_eq(cfg->signing_previous_secret_key_file, "");

    ck_assert_int_eq(cfg->classes[SL_CLASS_INTERACTIVE].deadline_ms, 30000);
    ck_assert_int_eq(cfg->classes[SL_CLASS_INTERACTIVE].weight, 8);
    ck_assert_int_eq(cfg->classes[SL_CLASS_STANDARD].deadline_ms, 600000);
    ck_assert_int_eq(cfg->classes[SL_CLASS_PARTNER].weight, 4);
    ck_assert_int_eq(cfg->classes[SL_CLASS_BATCH].deadline_ms, 86400000);
    ck_assert_int_eq(cfg->classes[SL_CLASS_BATCH].weight, 1);

    ck_assert_int_eq(cfg->ndeployments, 2);
    const sl_deployment_cfg_t *a = &cfg->deployments[0];
    ck_assert_str_eq(a->name, "sim-a");
    ck_assert_str_eq(a->provider, "openai");
    ck_assert_str_eq(a->base_url, "http://127.0.0.1:8089/sim-a/v1");
    ck_assert_str_eq(a->model, "gpt-4o-mini");
    ck_assert_str_eq(a->api_key_file, "examples/sim-api-key.txt");
    ck_assert_str_eq(a->api_key_env, "");
    ck_assert_int_eq(a->rpm, 600);
    ck_assert_int_eq(a->tpm, 60000);
    ck_assert_int_eq(a->slices_per_minute, 60);
    ck_assert_int_eq(a->tpm_counting, SL_TPM_COUNT_MAX);
    ck_assert_int_eq(a->max_output_tokens, 4096);
    ck_assert_int_eq(a->timeout_ms, 120000);
    ck_assert_int_eq(a->stream_idle_timeout_ms, 30000);
    ck_assert_str_eq(cfg->deployments[1].name, "sim-b");
    ck_assert_int_eq(cfg->deployments[1].rpm, 300);
    ck_assert_int_eq(cfg->deployments[1].tpm, 30000);

    ck_assert_int_eq(cfg->nroutes, 1);
    ck_assert_str_eq(cfg->routes[0].name, "chat-small");
    ck_assert_int_eq(cfg->routes[0].ndeployments, 2);
    ck_assert_int_eq(cfg->routes[0].deployments[0], 0);
    ck_assert_int_eq(cfg->routes[0].deployments[1], 1);
    ck_assert_int_eq(cfg->routes[0].default_max_tokens, 256);

    ck_assert_int_eq(cfg->ntenants, 2);
    ck_assert_str_eq(cfg->tenants[0].name, "acme");
    ck_assert_int_eq(cfg->tenants[0].nroutes, 0);
    ck_assert_int_eq(cfg->tenants[0].tokens_per_min, 0);
    ck_assert_str_eq(cfg->tenants[1].name, "globex");
    ck_assert_int_eq(cfg->tenants[1].tokens_per_min, 20000);
    ck_assert_int_eq(cfg->tenants[1].nroutes, 1);
    ck_assert_int_eq(cfg->tenants[1].routes[0], 0);

    ck_assert_int_eq(cfg->nkeys, 2);
    ck_assert_str_eq(cfg->keys[0].id, "acme-web");
    ck_assert_int_eq(cfg->keys[0].tenant, 0);
    ck_assert_str_eq(cfg->keys[0].app, "web");
    ck_assert_str_eq(cfg->keys[0].env, "prod");
    ck_assert_int_eq(cfg->keys[0].paused, 0);
    ck_assert_str_eq(cfg->keys[1].id, "globex-batch");
    ck_assert_int_eq(cfg->keys[1].tenant, 1);
    ck_assert_str_eq(cfg->keys[1].app, "backfill");
    sl_config_free(cfg);
}
END_TEST

START_TEST(api_key_is_found_by_its_hash)
{
    sl_config_t *cfg = load_ok(EXAMPLE);
    uint8_t hash[32];
    const char *acme = "sk-acme-demo-0001";
    sl_keyhash(acme, strlen(acme), hash);
    int k = sl_config_key_by_hash(cfg, hash);
    ck_assert_int_ge(k, 0);
    ck_assert_str_eq(cfg->keys[k].id, "acme-web");
    ck_assert_str_eq(cfg->tenants[cfg->keys[k].tenant].name, "acme");

    const char *globex = "sk-globex-demo-0001";
    sl_keyhash(globex, strlen(globex), hash);
    k = sl_config_key_by_hash(cfg, hash);
    ck_assert_int_ge(k, 0);
    ck_assert_str_eq(cfg->keys[k].id, "globex-batch");

    const char *nobody = "sk-nobody-0000";
    sl_keyhash(nobody, strlen(nobody), hash);
    ck_assert_int_eq(sl_config_key_by_hash(cfg, hash), -1);
    /* The hash of a prefix of a real key is another key. */
    sl_keyhash(acme, strlen(acme) - 1, hash);
    ck_assert_int_eq(sl_config_key_by_hash(cfg, hash), -1);
    sl_config_free(cfg);
}
END_TEST

START_TEST(lookups_by_name_return_index_or_minus_one)
{
    sl_config_t *cfg = load_ok(RESTRICTED);
    ck_assert_int_eq(sl_config_route(cfg, "chat-small"), 0);
    ck_assert_int_eq(sl_config_route(cfg, "chat-large"), 1);
    ck_assert_int_eq(sl_config_route(cfg, "chat-medium"), -1);
    ck_assert_int_eq(sl_config_route(cfg, ""), -1);
    ck_assert_int_eq(sl_config_tenant(cfg, "acme"), 0);
    ck_assert_int_eq(sl_config_tenant(cfg, "globex"), 1);
    ck_assert_int_eq(sl_config_tenant(cfg, "Acme"), -1);
    ck_assert_int_eq(sl_config_deployment(cfg, "small-a"), 0);
    ck_assert_int_eq(sl_config_deployment(cfg, "large-a"), 1);
    ck_assert_int_eq(sl_config_deployment(cfg, "small"), -1);

    ck_assert_int_eq(sl_class_parse("interactive"), SL_CLASS_INTERACTIVE);
    ck_assert_int_eq(sl_class_parse("standard"), SL_CLASS_STANDARD);
    ck_assert_int_eq(sl_class_parse("partner"), SL_CLASS_PARTNER);
    ck_assert_int_eq(sl_class_parse("batch"), SL_CLASS_BATCH);
    ck_assert_int_eq(sl_class_parse("express"), -1);
    ck_assert_int_eq(sl_class_parse(""), -1);
    for (int c = 0; c < SL_CLASS_COUNT; c++)
        ck_assert_int_eq(sl_class_parse(sl_class_name((sl_class_t)c)), c);
    ck_assert_str_eq(sl_class_name(SL_CLASS_COUNT), "unknown");
    sl_config_free(cfg);
}
END_TEST

START_TEST(tenant_route_allow_list_limits_routes)
{
    sl_config_t *cfg = load_ok(RESTRICTED);
    int acme = sl_config_tenant(cfg, "acme");
    int globex = sl_config_tenant(cfg, "globex");
    int small = sl_config_route(cfg, "chat-small");
    int large = sl_config_route(cfg, "chat-large");
    /* No list: every route. */
    ck_assert(sl_config_tenant_allows_route(cfg, acme, small));
    ck_assert(sl_config_tenant_allows_route(cfg, acme, large));
    /* A list: only what it names. */
    ck_assert(sl_config_tenant_allows_route(cfg, globex, small));
    ck_assert(!sl_config_tenant_allows_route(cfg, globex, large));
    sl_config_free(cfg);
}
END_TEST

START_TEST(fixture_values_override_defaults)
{
    sl_config_t *cfg = load_ok(RESTRICTED);
    const sl_deployment_cfg_t *large = &cfg->deployments[1];
    ck_assert_int_eq(large->tpm_counting, SL_TPM_COUNT_SUM);
    ck_assert_int_eq(large->max_output_tokens, 16384);
    ck_assert_double_eq_tol(large->headroom, 0.9, 1e-9);
    ck_assert_double_eq_tol(large->burst_fraction, 0.25, 1e-9);
    ck_assert_int_eq(large->slices_per_minute, 6);
    ck_assert_int_eq(large->timeout_ms, 30000);
    ck_assert_int_eq(large->stream_idle_timeout_ms, 0);
    ck_assert_str_eq(large->api_key_env, "SLUICE_TEST_NO_SUCH_KEY");
    ck_assert_str_eq(large->api_key_file, "");
    ck_assert_int_eq(cfg->routes[0].default_max_tokens, 128);
    ck_assert_int_eq(cfg->max_request_bytes, 65536);
    /* A class that is named keeps the defaults for what it does not set. */
    ck_assert_int_eq(cfg->classes[SL_CLASS_INTERACTIVE].deadline_ms, 20000);
    ck_assert_int_eq(cfg->classes[SL_CLASS_INTERACTIVE].max_queue, 50);
    ck_assert_int_eq(cfg->classes[SL_CLASS_BATCH].deadline_ms, 3600000);
    ck_assert_int_eq(cfg->classes[SL_CLASS_BATCH].weight, 1);
    ck_assert_int_eq(cfg->tenants[0].weight, 2);
    ck_assert_int_eq(cfg->keys[2].paused, 1);
    ck_assert_str_eq(cfg->keys[2].app, "default");
    ck_assert_int_eq(cfg->keys[0].paused, 0);
    ck_assert_str_eq(cfg->keys[1].env, "staging");
    sl_config_free(cfg);
}
END_TEST

START_TEST(defaults_are_applied_to_a_minimal_config)
{
    sl_config_t *cfg = load_ok(MINIMAL);
    ck_assert_int_eq(cfg->minute_ms, 60000);
    ck_assert_str_eq(cfg->schema_dir, "schema");
    ck_assert_str_eq(cfg->kafka.bootstrap_servers, "");
    ck_assert_str_eq(cfg->kafka.bootstrap_file, "var/devkafka.bootstrap");
    ck_assert_str_eq(cfg->kafka.topic_requests, "sluice.requests");
    ck_assert_str_eq(cfg->kafka.topic_jobs, "sluice.jobs");
    ck_assert_str_eq(cfg->kafka.topic_jobs_batch, "sluice.jobs.batch");
    ck_assert_str_eq(cfg->kafka.topic_dispatch, "sluice.dispatch");
    ck_assert_str_eq(cfg->kafka.topic_results, "sluice.results");
    ck_assert_str_eq(cfg->kafka.topic_usage, "sluice.usage");
    ck_assert_str_eq(cfg->kafka.topic_changelog, "sluice.changelog");
    ck_assert_str_eq(cfg->kafka.topic_capacity, "sluice.capacity");
    ck_assert_int_eq(cfg->sched_sharded, 0);
    ck_assert_int_eq(cfg->sched_capacity_leases, 0);
    ck_assert_int_eq(cfg->sched_capacity_lease_ms, 10000);
    ck_assert_int_eq(cfg->changelog_retention_bytes, 5 << 20);
    ck_assert_int_eq(cfg->changelog_snapshot_ms, 3600000);
    ck_assert_int_eq(cfg->kafka.nprops, 0);
    ck_assert_int_eq(cfg->max_request_bytes, 1 << 20);
    ck_assert_str_eq(cfg->db_path, "var/sluice.db");
    ck_assert_int_eq(cfg->lease_ms, 180000);
    ck_assert_int_eq(cfg->max_attempts, 5);
    ck_assert_int_eq(cfg->drr_quantum_tokens, 4096);
    ck_assert_int_eq(cfg->max_in_flight, 256);
    ck_assert_str_eq(cfg->signing_secret_key_file, "var/dispatch.key");
    ck_assert_str_eq(cfg->signing_public_key_file, "var/dispatch.pub");
    ck_assert_int_eq(cfg->classes[SL_CLASS_INTERACTIVE].deadline_ms, 30000);
    ck_assert_int_eq(cfg->classes[SL_CLASS_STANDARD].deadline_ms, 600000);
    ck_assert_int_eq(cfg->classes[SL_CLASS_PARTNER].deadline_ms, 600000);
    ck_assert_int_eq(cfg->classes[SL_CLASS_BATCH].deadline_ms, 86400000);
    ck_assert_int_eq(cfg->classes[SL_CLASS_INTERACTIVE].weight, 8);
    ck_assert_int_eq(cfg->classes[SL_CLASS_BATCH].weight, 1);
    ck_assert_int_gt(cfg->classes[SL_CLASS_BATCH].max_queue,
                     cfg->classes[SL_CLASS_INTERACTIVE].max_queue);

    ck_assert_int_eq(cfg->ndeployments, 1);
    const sl_deployment_cfg_t *d = &cfg->deployments[0];
    ck_assert_str_eq(d->provider, "openai");
    ck_assert_str_eq(d->api_key_env, "");
    ck_assert_str_eq(d->api_key_file, "");
    ck_assert_int_eq(d->rpm, 0);
    ck_assert_int_eq(d->tpm, 0);
    ck_assert_int_eq(d->slices_per_minute, 60);
    ck_assert_double_eq_tol(d->headroom, 0.97, 1e-9);
    ck_assert_double_eq_tol(d->burst_fraction, 0.5, 1e-9);
    ck_assert_int_eq(d->tpm_counting, SL_TPM_COUNT_MAX);
    ck_assert_int_eq(d->max_output_tokens, 16384);
    ck_assert_int_eq(d->timeout_ms, 120000);
    ck_assert_int_eq(cfg->routes[0].default_max_tokens, 1024);
    ck_assert_int_eq(cfg->ntenants, 0);
    ck_assert_int_eq(cfg->nkeys, 0);
    sl_config_free(cfg);
}
END_TEST

START_TEST(kafka_topics_and_properties_are_read)
{
    json_t *root = example();
    json_object_set_new(root, "kafka",
                        json_pack("{s:s, s:{s:s, s:s}, s:{s:s, s:s}}", "bootstrap_servers",
                                  "broker1:9092", "topics", "jobs", "t.jobs", "usage", "t.usage",
                                  "properties", "acks", "all", "linger.ms", "5"));
    char err[512];
    sl_config_t *cfg = NULL;
    sl_err_t rc = load_doc(root, &cfg, err, sizeof err);
    ck_assert_msg(rc == SL_OK, "rejected: %s", err);
    ck_assert_str_eq(cfg->kafka.bootstrap_servers, "broker1:9092");
    ck_assert_str_eq(cfg->kafka.topic_jobs, "t.jobs");
    ck_assert_str_eq(cfg->kafka.topic_usage, "t.usage");
    ck_assert_str_eq(cfg->kafka.topic_requests, "sluice.requests");
    ck_assert_int_eq(cfg->kafka.nprops, 2);
    int seen = 0;
    for (int i = 0; i < cfg->kafka.nprops; i++) {
        if (strcmp(cfg->kafka.prop_names[i], "acks") == 0) {
            ck_assert_str_eq(cfg->kafka.prop_values[i], "all");
            seen |= 1;
        } else if (strcmp(cfg->kafka.prop_names[i], "linger.ms") == 0) {
            ck_assert_str_eq(cfg->kafka.prop_values[i], "5");
            seen |= 2;
        }
    }
    ck_assert_int_eq(seen, 3);
    sl_config_free(cfg);
}
END_TEST

/* ---- Refusals --------------------------------------------------------------------------- */

START_TEST(unknown_key_anywhere_is_refused_and_named)
{
    json_t *root = example();
    json_object_set_new(root, "minute_msec", json_integer(1));
    expect_config_error(root, "minute_msec", NULL);

    root = example();
    json_object_set_new(json_object_get(root, "kafka"), "bootstrap", json_string("x"));
    expect_config_error(root, "bootstrap", "kafka");

    root = example();
    json_object_set_new(json_object_get(root, "kafka"), "topics", json_pack("{s:s}", "job", "x"));
    expect_config_error(root, "\"job\"", "kafka.topics");

    root = example();
    json_object_set_new(json_object_get(root, "kafka"), "topics",
                        json_pack("{s:s, s:s}", "jobs", "j", "jobs_batch", "j"));
    expect_config_error(root, "\"jobs_batch\" must differ", "kafka.topics");

    root = example();
    json_object_set_new(json_object_get(root, "ingest"), "max_bytes", json_integer(1000));
    expect_config_error(root, "max_bytes", "ingest");

    root = example();
    json_object_set_new(json_object_get(root, "scheduler"), "lease", json_integer(1000));
    expect_config_error(root, "\"lease\"", "scheduler");

    root = example();
    json_object_set_new(json_object_get(root, "dispatcher"), "max_inflight", json_integer(1));
    expect_config_error(root, "max_inflight", "dispatcher");

    root = example();
    json_object_set_new(json_object_get(root, "signing"), "key_file", json_string("k"));
    expect_config_error(root, "key_file", "signing");

    root = example();
    json_object_set_new(json_object_get(json_object_get(root, "classes"), "batch"), "deadline",
                        json_integer(1));
    expect_config_error(root, "\"deadline\"", "classes.batch");

    root = example();
    json_object_set_new(at(root, "deployments", 1), "rate", json_integer(1));
    expect_config_error(root, "\"rate\"", "deployments[1]");

    root = example();
    json_object_set_new(json_object_get(at(root, "deployments", 0), "limits"), "rph",
                        json_integer(1));
    expect_config_error(root, "rph", "deployments[0]");

    root = example();
    json_object_set_new(at(root, "routes", 0), "strategy_name", json_string("waterfall"));
    expect_config_error(root, "strategy_name", "routes[0]");

    root = example();
    json_object_set_new(at(root, "tenants", 1), "quota", json_integer(1));
    expect_config_error(root, "quota", "tenants[1]");

    root = example();
    json_object_set_new(at(root, "keys", 0), "secret", json_string("sk-acme-demo-0001"));
    expect_config_error(root, "secret", "keys[0]");
}
END_TEST

START_TEST(unknown_class_is_refused_and_named)
{
    json_t *root = example();
    json_object_set_new(json_object_get(root, "classes"), "express",
                        json_pack("{s:i}", "deadline_ms", 1000));
    expect_config_error(root, "express", NULL);
}
END_TEST

START_TEST(wrong_types_are_refused_and_named)
{
    json_t *root = example();
    json_object_set_new(root, "minute_ms", json_string("60000"));
    expect_config_error(root, "minute_ms", "integer");

    root = example();
    json_object_set_new(root, "minute_ms", json_real(60000.5));
    expect_config_error(root, "minute_ms", NULL);

    root = example();
    json_object_set_new(json_object_get(at(root, "deployments", 0), "limits"), "tpm",
                        json_string("60k"));
    expect_config_error(root, "tpm", "deployments[0]");

    root = example();
    json_object_set_new(at(root, "deployments", 0), "headroom", json_string("high"));
    expect_config_error(root, "headroom", "number");

    root = example();
    json_object_set_new(at(root, "deployments", 0), "base_url", json_integer(8089));
    expect_config_error(root, "base_url", "string");

    root = example();
    json_object_set_new(at(root, "deployments", 0), "limits", json_integer(600));
    expect_config_error(root, "limits", "object");

    root = example();
    json_object_set_new(root, "deployments", json_object());
    expect_config_error(root, "deployments", "array");

    root = example();
    json_object_set_new(at(root, "routes", 0), "deployments", json_string("sim-a"));
    expect_config_error(root, "deployments", "routes[0]");

    root = example();
    json_object_set_new(at(root, "tenants", 1), "routes", json_string("chat-small"));
    expect_config_error(root, "routes", "tenants[1]");

    root = example();
    json_object_set_new(root, "ingest", json_integer(5));
    expect_config_error(root, "ingest", "object");

    root = example();
    json_object_set_new(json_object_get(root, "kafka"), "properties",
                        json_pack("{s:i}", "linger.ms", 5));
    expect_config_error(root, "linger.ms", "string");

    root = example();
    json_object_set_new(at(root, "deployments", 0), "tpm_counting", json_string("min"));
    expect_config_error(root, "tpm_counting", NULL);

    root = example();
    json_array_set_new(json_object_get(root, "keys"), 0, json_string("acme-web"));
    expect_config_error(root, "keys[0]", "object");
}
END_TEST

START_TEST(paused_must_be_a_boolean)
{
    /* "paused": "yes" read as "not paused" would leave a key an operator meant to stop in use. */
    json_t *root = example();
    json_object_set_new(at(root, "keys", 0), "paused", json_string("yes"));
    expect_config_error(root, "paused", "keys[0]");

    root = example();
    json_object_set_new(at(root, "keys", 0), "paused", json_integer(1));
    expect_config_error(root, "paused", "keys[0]");
}
END_TEST

START_TEST(out_of_range_numbers_are_refused_and_named)
{
    static const struct {
        const char *where; /* "", "ingest", "scheduler", "dispatcher" or "deployments" */
        const char *key;
        double value;
        int real;
    } cases[] = {
        {"", "minute_ms", 5, 0},
        {"", "minute_ms", 0, 0},
        {"ingest", "max_request_bytes", 10, 0},
        {"scheduler", "lease_ms", 0, 0},
        {"scheduler", "max_attempts", 0, 0},
        {"scheduler", "max_attempts", 1000, 0},
        {"scheduler", "changelog_retention_bytes", -1, 0},
        {"scheduler", "changelog_snapshot_ms", -1, 0},
        {"scheduler", "capacity_lease_ms", 1000, 0},
        {"dispatcher", "max_in_flight", 0, 0},
        {"deployments", "slices_per_minute", 0, 0},
        {"deployments", "headroom", 0, 1},
        {"deployments", "headroom", 1.5, 1},
        {"deployments", "burst_fraction", -0.1, 1},
        {"deployments", "max_output_tokens", 0, 0},
        {"deployments", "timeout_ms", 50, 0},
        {"deployments", "stream_idle_timeout_ms", -1, 0},
        {"deployments", "stream_idle_timeout_ms", 3600001, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *root = example();
        json_t *obj = root;
        if (strcmp(cases[i].where, "deployments") == 0)
            obj = at(root, "deployments", 0);
        else if (cases[i].where[0] != '\0')
            obj = json_object_get(root, cases[i].where);
        ck_assert_ptr_nonnull(obj);
        json_object_set_new(obj, cases[i].key,
                            cases[i].real ? json_real(cases[i].value)
                                          : json_integer((json_int_t)cases[i].value));
        expect_config_error(root, cases[i].key, "outside");
    }

    json_t *root = example();
    json_object_set_new(json_object_get(at(root, "deployments", 0), "limits"), "rpm",
                        json_integer(-1));
    expect_config_error(root, "rpm", "outside");

    /* a retention too small for any snapshot: 0 (unbounded) or at least 64 KiB */
    root = example();
    json_object_set_new(json_object_get(root, "scheduler"), "changelog_retention_bytes",
                        json_integer(1000));
    expect_config_error(root, "changelog_retention_bytes", "65536");

    /* Capacity leases are the sharded schedulers' (and their default). */
    root = example();
    json_object_set_new(json_object_get(root, "scheduler"), "capacity_leases", json_true());
    expect_config_error(root, "capacity_leases", "scheduler.sharded");
    root = example();
    json_object_set_new(json_object_get(root, "scheduler"), "sharded", json_true());
    char lerr[512];
    sl_config_t *sharded = NULL;
    ck_assert_int_eq(load_doc(root, &sharded, lerr, sizeof lerr), SL_OK);
    ck_assert_int_eq(sharded->sched_capacity_leases, 1);
    sl_config_free(sharded);

    root = example();
    json_object_set_new(json_object_get(json_object_get(root, "classes"), "interactive"),
                        "deadline_ms", json_integer(0));
    expect_config_error(root, "deadline_ms", "classes.interactive");

    root = example();
    json_object_set_new(at(root, "tenants", 0), "weight", json_integer(0));
    expect_config_error(root, "weight", "tenants[0]");

    root = example();
    json_object_set_new(at(root, "routes", 0), "default_max_tokens", json_integer(0));
    expect_config_error(root, "default_max_tokens", "routes[0]");
}
END_TEST

START_TEST(route_naming_an_unknown_deployment_is_refused)
{
    json_t *root = example();
    json_array_append_new(json_object_get(at(root, "routes", 0), "deployments"),
                          json_string("sim-c"));
    expect_config_error(root, "routes[0]", "unknown deployment");

    root = example();
    json_object_set_new(at(root, "routes", 0), "deployments", json_array());
    expect_config_error(root, "routes[0]", "at least one deployment");
}
END_TEST

START_TEST(key_naming_an_unknown_tenant_is_refused)
{
    json_t *root = example();
    json_object_set_new(at(root, "keys", 1), "tenant", json_string("initech"));
    expect_config_error(root, "keys[1]", "initech");

    root = example();
    json_object_del(at(root, "keys", 1), "tenant");
    expect_config_error(root, "keys[1]", "tenant");
}
END_TEST

START_TEST(tenant_naming_an_unknown_route_is_refused)
{
    json_t *root = example();
    json_array_append_new(json_object_get(at(root, "tenants", 1), "routes"),
                          json_string("chat-huge"));
    expect_config_error(root, "tenants[1]", "unknown route");
}
END_TEST

START_TEST(bad_key_hash_is_refused)
{
    static const char *const bad[] = {
        "0bf58a7419d850b259631d1bb35e14e2b76da513abc6e8752118e9af0b2cb5",     /* 62 digits */
        "0bf58a7419d850b259631d1bb35e14e2b76da513abc6e8752118e9af0b2cb59200", /* 66 digits */
        "zbf58a7419d850b259631d1bb35e14e2b76da513abc6e8752118e9af0b2cb592",   /* not hex */
        "",
        "sk-acme-demo-0001", /* the secret itself is not a hash */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *root = example();
        json_object_set_new(at(root, "keys", 0), "hash", json_string(bad[i]));
        expect_config_error(root, "keys[0]", "hash");
    }
    json_t *root = example();
    json_object_del(at(root, "keys", 0), "hash");
    expect_config_error(root, "keys[0]", "hash");
}
END_TEST

START_TEST(missing_required_strings_are_refused_and_named)
{
    json_t *root = example();
    json_object_del(at(root, "deployments", 0), "model");
    expect_config_error(root, "deployments[0]", "model");

    root = example();
    json_object_del(at(root, "deployments", 1), "base_url");
    expect_config_error(root, "deployments[1]", "base_url");

    root = example();
    json_object_del(at(root, "routes", 0), "name");
    expect_config_error(root, "routes[0]", "name");

    root = example();
    json_object_del(at(root, "keys", 0), "id");
    expect_config_error(root, "keys[0]", "id");
}
END_TEST

START_TEST(unsupported_provider_is_refused)
{
    json_t *root = example();
    json_object_set_new(at(root, "deployments", 0), "provider", json_string("cohere"));
    expect_config_error(root, "provider", "deployments[0]");
}
END_TEST

START_TEST(providers_routes_and_regions_load)
{
    json_t *root = example();
    json_t *d0 = at(root, "deployments", 0);
    json_object_set_new(d0, "provider", json_string("azure"));
    json_object_set_new(d0, "region", json_string("eu-west"));
    json_object_set_new(d0, "context_window", json_integer(128000));
    json_object_set_new(d0, "supports_tools", json_false());
    json_object_set_new(at(root, "deployments", 1), "provider", json_string("anthropic"));
    json_t *r0 = at(root, "routes", 0);
    json_object_set_new(r0, "strategy", json_string("waterfall"));
    json_object_set_new(r0, "overflow_at", json_real(0.8));
    json_object_set_new(at(root, "tenants", 0), "regions", json_pack("[s]", "eu-west"));
    sl_config_t *cfg = NULL;
    char err[512];
    ck_assert_msg(load_doc(root, &cfg, err, sizeof err) == SL_OK, "%s", err);
    ck_assert_int_eq(cfg->deployments[0].api, SL_PROVIDER_AZURE);
    ck_assert_str_eq(cfg->deployments[0].api_version, "2024-10-21");
    ck_assert_str_eq(cfg->deployments[0].region, "eu-west");
    ck_assert_int_eq(cfg->deployments[0].context_window, 128000);
    ck_assert_int_eq(cfg->deployments[0].supports_tools, 0);
    ck_assert_int_eq(cfg->deployments[0].supports_json, 1);
    ck_assert_int_eq(cfg->deployments[1].api, SL_PROVIDER_ANTHROPIC);
    ck_assert_str_eq(cfg->deployments[1].api_version, "2023-06-01");
    ck_assert_int_eq(cfg->routes[0].strategy, SL_STRATEGY_WATERFALL);
    ck_assert_double_eq(cfg->routes[0].overflow_at, 0.8);
    ck_assert_double_eq(cfg->routes[0].max_retry_ratio, 0.5);
    ck_assert_int_eq(cfg->tenants[0].nregions, 1);
    ck_assert_str_eq(cfg->tenants[0].regions[0], "eu-west");
    sl_config_free(cfg);

    root = example();
    json_object_set_new(at(root, "routes", 0), "strategy", json_string("random"));
    expect_config_error(root, "routes[0]", "strategy");
    root = example();
    json_t *r = at(root, "routes", 0);
    json_object_set_new(r, "fallback",
                        json_pack("[s]", json_string_value(json_object_get(r, "name"))));
    expect_config_error(root, "routes[0]", "itself");
    root = example();
    json_object_set_new(at(root, "routes", 0), "fallback", json_pack("[s]", "nowhere"));
    expect_config_error(root, "routes[0]", "unknown route");
}
END_TEST

/* A route's degrade_to names another route; a class's overload may be "degrade". */
START_TEST(degrade_to_and_the_degrade_overload_load_and_are_checked)
{
    json_t *root = example();
    const char *dep = json_string_value(json_object_get(at(root, "deployments", 0), "name"));
    json_array_append_new(json_object_get(root, "routes"),
                          json_pack("{s:s, s:[s]}", "name", "chat-cheap", "deployments", dep));
    json_object_set_new(at(root, "routes", 0), "degrade_to", json_string("chat-cheap"));
    json_object_set_new(root, "classes",
                        json_pack("{s:{s:s}}", "interactive", "overload", "degrade"));
    sl_config_t *cfg = NULL;
    char err[512];
    ck_assert_msg(load_doc(root, &cfg, err, sizeof err) == SL_OK, "%s", err);
    ck_assert_int_eq(cfg->routes[0].degrade_to, sl_config_route(cfg, "chat-cheap"));
    ck_assert_int_eq(cfg->routes[sl_config_route(cfg, "chat-cheap")].degrade_to, -1);
    ck_assert_int_eq(cfg->classes[SL_CLASS_INTERACTIVE].overload, SL_OVERLOAD_DEGRADE);
    sl_config_free(cfg);

    root = example();
    json_t *r = at(root, "routes", 0);
    json_object_set_new(r, "degrade_to", json_copy(json_object_get(r, "name")));
    expect_config_error(root, "routes[0]", "itself");
    root = example();
    json_object_set_new(at(root, "routes", 0), "degrade_to", json_string("nowhere"));
    expect_config_error(root, "routes[0]", "degrade_to");
    root = example();
    json_object_set_new(root, "classes", json_pack("{s:{s:s}}", "batch", "overload", "demote"));
    expect_config_error(root, "classes.batch", "degrade");
}
END_TEST

START_TEST(config_without_routes_is_refused)
{
    json_t *root = example();
    json_object_set_new(root, "routes", json_array());
    expect_config_error(root, "route", NULL);
}
END_TEST

START_TEST(duplicate_deployment_names_are_refused)
{
    json_t *root = example();
    json_object_set_new(at(root, "deployments", 1), "name", json_string("sim-a"));
    expect_config_error(root, "duplicate", "sim-a");
}
END_TEST

/* A second route, tenant or key of the same name would be unreachable (lookups find the first
 * one) or, for keys, make the identity behind a request ambiguous. */
START_TEST(duplicate_route_names_are_refused)
{
    json_t *root = example();
    json_array_append(json_object_get(root, "routes"), at(root, "routes", 0));
    expect_config_error(root, "duplicate", "chat-small");
}
END_TEST

/* ---- Per-tenant result topics and sealed results ---------------------------------------- */

START_TEST(tenant_topics_and_result_key_are_read)
{
    json_t *root = example();
    json_t *acme = at(root, "tenants", 0);
    json_object_set_new(acme, "results_topic", json_string("sluice.results.acme"));
    json_object_set_new(acme, "stream_topic", json_string("sluice.stream.acme"));
    json_object_set_new(acme, "result_public_key",
                        json_string("00112233445566778899aabbccddeeff"
                                    "00112233445566778899aabbccddeeff"));
    char keyfile[] = "/tmp/sluice-test-boxkey-XXXXXX";
    int fd = mkstemp(keyfile);
    ck_assert_int_ge(fd, 0);
    const char *hex = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100\n";
    ck_assert_int_eq(write(fd, hex, strlen(hex)), (ssize_t)strlen(hex));
    close(fd);
    json_object_set_new(at(root, "tenants", 1), "result_public_key_file", json_string(keyfile));
    char err[512];
    sl_config_t *cfg = NULL;
    ck_assert_msg(load_doc(root, &cfg, err, sizeof err) == SL_OK, "%s", err);
    unlink(keyfile);
    int a = sl_config_tenant(cfg, "acme"), g = sl_config_tenant(cfg, "globex");
    ck_assert_str_eq(sl_config_results_topic(cfg, a), "sluice.results.acme");
    ck_assert_str_eq(sl_config_stream_topic(cfg, a), "sluice.stream.acme");
    ck_assert_str_eq(sl_config_results_topic(cfg, g), "sluice.results");
    ck_assert_str_eq(sl_config_stream_topic(cfg, g), "sluice.stream");
    ck_assert_str_eq(sl_config_results_topic(cfg, -1), "sluice.results");
    ck_assert_ptr_nonnull(sl_config_seal_key(cfg, a));
    ck_assert_int_eq(sl_config_seal_key(cfg, a)[1], 0x11);
    ck_assert_ptr_nonnull(sl_config_seal_key(cfg, g));
    ck_assert_int_eq(sl_config_seal_key(cfg, g)[0], 0xff);
    ck_assert_ptr_null(sl_config_seal_key(cfg, -1));
    sl_config_free(cfg);

    cfg = load_ok(EXAMPLE);
    ck_assert_ptr_null(sl_config_seal_key(cfg, 0));
    ck_assert_ptr_null(cfg->tenants[0].results_topic);
    sl_config_free(cfg);
}
END_TEST

/* Sets tenant 0's key to value (a string) and expects the load to fail naming both needles. */
static void expect_tenant_error(const char *key, const char *value, const char *needle)
{
    json_t *root = example();
    json_object_set_new(at(root, "tenants", 0), key, json_string(value));
    expect_config_error(root, "tenants[0]", needle);
}

START_TEST(bad_tenant_topics_and_keys_are_refused)
{
    expect_tenant_error("results_topic", "no spaces allowed", "not a Kafka topic name");
    expect_tenant_error("results_topic", "sluice.jobs", "another of sluice's topics");
    expect_tenant_error("results_topic", "sluice.jobs.batch", "another of sluice's topics");
    expect_tenant_error("results_topic", "sluice.stream", "another of sluice's topics");
    expect_tenant_error("stream_topic", "sluice.results", "another of sluice's topics");
    expect_tenant_error("stream_topic", "sluice.usage", "another of sluice's topics");
    expect_tenant_error("result_public_key", "abcd", "64 hex digits");
    expect_tenant_error("result_public_key_file", "/nonexistent/box.pub", "cannot read");

    json_t *root = example();
    json_object_set_new(at(root, "tenants", 0), "results_topic", json_string("t.acme"));
    json_object_set_new(at(root, "tenants", 0), "stream_topic", json_string("t.acme"));
    expect_config_error(root, "tenants[0]", "must differ");

    root = example();
    json_object_set_new(at(root, "tenants", 0), "result_public_key",
                        json_string("00112233445566778899aabbccddeeff"
                                    "00112233445566778899aabbccddeeff"));
    json_object_set_new(at(root, "tenants", 0), "result_public_key_file", json_string("x.pub"));
    expect_config_error(root, "tenants[0]", "not both");
}
END_TEST

START_TEST(duplicate_tenant_names_are_refused)
{
    json_t *root = example();
    json_array_append_new(json_object_get(root, "tenants"), json_pack("{s:s}", "name", "acme"));
    expect_config_error(root, "duplicate", "acme");
}
END_TEST

START_TEST(duplicate_key_ids_are_refused)
{
    json_t *root = example();
    json_object_set_new(at(root, "keys", 1), "id", json_string("acme-web"));
    expect_config_error(root, "duplicate", "acme-web");
}
END_TEST

START_TEST(duplicate_key_hashes_are_refused)
{
    json_t *root = example();
    json_object_set(at(root, "keys", 1), "hash", json_object_get(at(root, "keys", 0), "hash"));
    expect_config_error(root, "duplicate", "keys[1]");
}
END_TEST

START_TEST(missing_file_is_an_io_error)
{
    char err[512] = "";
    sl_config_t *cfg = (sl_config_t *)0x1;
    sl_err_t rc = sl_config_load("tests/fixtures/config/no-such-file.json", &cfg, err, sizeof err);
    ck_assert_msg(rc == SL_EIO, "a missing file gave %s (%s), expected SL_EIO", sl_errname(rc),
                  err);
    ck_assert_ptr_null(cfg);
    ck_assert_ptr_nonnull(strstr(err, "no-such-file.json"));
}
END_TEST

START_TEST(malformed_file_is_a_parse_error)
{
    char err[512] = "";
    sl_config_t *cfg = (sl_config_t *)0x1;
    sl_err_t rc = load_text("{\"minute_ms\": 60000,", &cfg, err, sizeof err);
    ck_assert_int_eq(rc, SL_EPARSE);
    ck_assert_ptr_null(cfg);
    ck_assert_str_ne(err, "");

    /* Two values for one key: which one wins would be a guess. */
    cfg = (sl_config_t *)0x1;
    rc = load_text("{\"minute_ms\": 60000, \"minute_ms\": 1000, \"routes\": []}", &cfg, err,
                   sizeof err);
    ck_assert_int_eq(rc, SL_EPARSE);
    ck_assert_ptr_null(cfg);

    cfg = (sl_config_t *)0x1;
    rc = load_text("[1, 2]", &cfg, err, sizeof err);
    ck_assert_int_eq(rc, SL_ECONFIG);
    ck_assert_ptr_null(cfg);
    ck_assert_ptr_nonnull(strstr(err, "object"));
}
END_TEST

START_TEST(error_text_is_truncated_to_the_buffer)
{
    json_t *root = example();
    json_object_set_new(root, "a_rather_long_unknown_key_name_for_the_test", json_integer(1));
    char err[8];
    memset(err, 'x', sizeof err);
    sl_config_t *cfg = NULL;
    ck_assert_int_eq(load_doc(root, &cfg, err, sizeof err), SL_ECONFIG);
    ck_assert_uint_eq(strlen(err), sizeof err - 1);
}
END_TEST

/* The capacity model and the workload contracts: a full hierarchy loads with its defaults, and
 * each new key is checked. */
START_TEST(limits_scopes_and_contracts_load_and_are_checked)
{
    json_t *root = example();
    char err[512] = "";
    sl_config_t *cfg = NULL;
    json_t *acme = at(root, "tenants", 0);
    json_object_set_new(acme, "guarantee", json_real(0.5));
    json_object_set_new(acme, "max_in_flight", json_integer(8));
    json_object_set_new(json_object_get(json_object_get(root, "classes"), "standard"), "overload",
                        json_string("shed"));
    ck_assert_msg(load_doc(root, &cfg, err, sizeof err) == SL_OK, "%s", err);
    ck_assert_double_eq(cfg->tenants[0].guarantee, 0.5);
    ck_assert_int_eq(cfg->classes[SL_CLASS_STANDARD].overload, SL_OVERLOAD_SHED);
    ck_assert_double_eq(cfg->classes[SL_CLASS_BATCH].yield_above, 0.5);
    ck_assert_double_eq(cfg->classes[SL_CLASS_INTERACTIVE].yield_above, 0);
    /* the example's scopes: deployments under project:sim-chat under org:sim */
    int project = sl_config_scope(cfg, "project:sim-chat");
    ck_assert_int_ge(project, 0);
    ck_assert_int_eq(cfg->deployments[0].parent, project);
    ck_assert_int_eq(cfg->scopes[project].parent, sl_config_scope(cfg, "org:sim"));
    ck_assert(cfg->scopes[project].provider_side);
    const sl_limit_cfg_t *rpd = &cfg->scopes[project].limits[0];
    ck_assert_int_eq(rpd->dimension, SL_DIM_REQUESTS_PER_DAY);
    ck_assert_int_eq(rpd->algorithm, SL_LIMIT_CALENDAR);
    ck_assert_str_eq(rpd->reset_tz, "America/Los_Angeles");
    ck_assert(rpd->strict);
    /* a tenant's shorthands become limits of its own */
    int found = 0;
    for (int i = 0; i < cfg->tenants[0].nlimits; i++)
        found += cfg->tenants[0].limits[i].dimension == SL_DIM_CONCURRENCY;
    ck_assert_int_eq(found, 1);
    sl_config_free(cfg);

    root = example(); /* load_doc took the last one */
    json_object_set_new(at(root, "tenants", 0), "guarantee", json_real(0.5));
    json_object_set_new(at(root, "tenants", 1), "guarantee", json_real(0.5));
    expect_config_error(root, "guarantees add up", NULL);

    root = example();
    json_object_set_new(json_object_get(json_object_get(root, "classes"), "batch"), "overload",
                        json_string("downgrade"));
    expect_config_error(root, "overload", "classes.batch");

    root = example();
    json_array_append_new(json_object_get(root, "scopes"),
                          json_pack("{s:s, s:s}", "name", "org:loop", "parent", "org:loop"));
    expect_config_error(root, "own ancestor", "org:loop");

    root = example();
    json_object_set_new(at(root, "tenants", 0), "parent", json_string("project:sim-chat"));
    expect_config_error(root, "both a deployment and a tenant", "project:sim-chat");

    root = example();
    json_object_set_new(at(root, "deployments", 0), "buckets",
                        json_pack("[{s:s, s:i, s:s}]", "dimension", "requests_per_day", "capacity",
                                  10, "reset_tz", "Mars/Olympus_Mons"));
    expect_config_error(root, "Mars/Olympus_Mons", "deployments[0]");

    root = example();
    json_object_set_new(at(root, "deployments", 0), "buckets",
                        json_pack("[{s:s, s:i, s:s}]", "dimension", "concurrency", "capacity", 3,
                                  "algorithm", "token_bucket"));
    expect_config_error(root, "gauge", "deployments[0]");
}
END_TEST

static json_t *admin_key(const char *id, const char *secret, const char *role)
{
    uint8_t h[32];
    char hex[65];
    sl_keyhash(secret, strlen(secret), h);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", h[i]);
    return json_pack("{s:s, s:s, s:s}", "id", id, "hash", hex, "role", role);
}

START_TEST(admin_keys_load_and_are_checked)
{
    /* a partner key by tenant name: loads, with the tenant's index */
    json_t *root = example();
    char tenant0[128]; /* root goes away with the first load */
    snprintf(tenant0, sizeof tenant0, "%s",
             json_string_value(json_object_get(at(root, "tenants", 0), "name")));
    json_t *keys = json_array();
    json_array_append_new(keys, admin_key("ops", "admin-secret-1", "admin"));
    json_t *pk = admin_key("p", "partner-secret-1", "partner");
    json_object_set_new(pk, "tenants", json_pack("[s]", tenant0));
    json_array_append_new(keys, pk);
    json_object_set_new(root, "admin_keys", keys);
    sl_config_t *cfg = NULL;
    char err[512];
    ck_assert_msg(load_doc(root, &cfg, err, sizeof err) == SL_OK, "%s", err);
    ck_assert_int_eq(cfg->nadmin_keys, 2);
    ck_assert_int_eq(cfg->admin_keys[0].role, SL_ADMIN_ROLE_ADMIN);
    ck_assert_int_eq(cfg->admin_keys[1].role, SL_ADMIN_ROLE_PARTNER);
    ck_assert_int_eq(cfg->admin_keys[1].ntenants, 1);
    ck_assert_int_eq(cfg->admin_keys[1].tenants[0], 0);
    ck_assert_str_eq(cfg->admin_listen, "127.0.0.1:9320");
    uint8_t h[32];
    sl_keyhash("partner-secret-1", 16, h);
    ck_assert_int_eq(sl_config_admin_key_by_hash(cfg, h), 1);
    sl_keyhash("unknown", 7, h);
    ck_assert_int_eq(sl_config_admin_key_by_hash(cfg, h), -1);
    sl_config_free(cfg);

    root = example();
    keys = json_array();
    json_array_append_new(keys, admin_key("x", "admin-secret-1", "root"));
    json_object_set_new(root, "admin_keys", keys);
    expect_config_error(root, "admin_keys[0]", "role");

    root = example();
    keys = json_array();
    pk = admin_key("p", "partner-secret-1", "partner");
    json_array_append_new(keys, pk);
    json_object_set_new(root, "admin_keys", keys);
    expect_config_error(root, "admin_keys[0]", "partner key needs");

    root = example();
    keys = json_array();
    pk = admin_key("p", "partner-secret-1", "partner");
    json_object_set_new(pk, "partner", json_string("partner:none"));
    json_array_append_new(keys, pk);
    json_object_set_new(root, "admin_keys", keys);
    expect_config_error(root, "admin_keys[0]", "partner:none");

    root = example();
    keys = json_array();
    json_t *ak = admin_key("ops", "admin-secret-1", "admin");
    json_object_set_new(ak, "tenants", json_pack("[s]", tenant0));
    json_array_append_new(keys, ak);
    json_object_set_new(root, "admin_keys", keys);
    expect_config_error(root, "admin_keys[0]", "role \"partner\"");

    root = example();
    keys = json_array();
    json_array_append_new(keys, admin_key("a", "admin-secret-1", "admin"));
    json_array_append_new(keys, admin_key("b", "admin-secret-1", "admin"));
    json_object_set_new(root, "admin_keys", keys);
    expect_config_error(root, "admin_keys[1]", "duplicate");
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("load");
    tcase_add_test(tc, example_config_loads_with_its_deployments_routes_tenants_and_keys);
    tcase_add_test(tc, role_keys_default_beside_the_scheduler_key_and_can_be_named);
    tcase_add_test(tc, api_key_is_found_by_its_hash);
    tcase_add_test(tc, lookups_by_name_return_index_or_minus_one);
    tcase_add_test(tc, tenant_route_allow_list_limits_routes);
    tcase_add_test(tc, fixture_values_override_defaults);
    tcase_add_test(tc, defaults_are_applied_to_a_minimal_config);
    tcase_add_test(tc, kafka_topics_and_properties_are_read);
    suite_add_tcase(s, tc);

    TCase *bad = tcase_create("refusals");
    tcase_add_test(bad, unknown_key_anywhere_is_refused_and_named);
    tcase_add_test(bad, unknown_class_is_refused_and_named);
    tcase_add_test(bad, wrong_types_are_refused_and_named);
    tcase_add_test(bad, paused_must_be_a_boolean);
    tcase_add_test(bad, out_of_range_numbers_are_refused_and_named);
    tcase_add_test(bad, route_naming_an_unknown_deployment_is_refused);
    tcase_add_test(bad, key_naming_an_unknown_tenant_is_refused);
    tcase_add_test(bad, tenant_naming_an_unknown_route_is_refused);
    tcase_add_test(bad, bad_key_hash_is_refused);
    tcase_add_test(bad, missing_required_strings_are_refused_and_named);
    tcase_add_test(bad, unsupported_provider_is_refused);
    tcase_add_test(bad, providers_routes_and_regions_load);
    tcase_add_test(bad, degrade_to_and_the_degrade_overload_load_and_are_checked);
    tcase_add_test(bad, config_without_routes_is_refused);
    tcase_add_test(bad, duplicate_deployment_names_are_refused);
    tcase_add_test(bad, duplicate_route_names_are_refused);
    tcase_add_test(bad, duplicate_tenant_names_are_refused);
    tcase_add_test(bad, tenant_topics_and_result_key_are_read);
    tcase_add_test(bad, bad_tenant_topics_and_keys_are_refused);
    tcase_add_test(bad, duplicate_key_ids_are_refused);
    tcase_add_test(bad, duplicate_key_hashes_are_refused);
    tcase_add_test(bad, missing_file_is_an_io_error);
    tcase_add_test(bad, malformed_file_is_a_parse_error);
    tcase_add_test(bad, error_text_is_truncated_to_the_buffer);
    tcase_add_test(bad, limits_scopes_and_contracts_load_and_are_checked);
    tcase_add_test(bad, admin_keys_load_and_are_checked);
    suite_add_tcase(s, bad);
    return s;
}

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return 1;
    SRunner *sr = srunner_create(config_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
