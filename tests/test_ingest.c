/* test_ingest.c - behaviour of the ingest decision (ingest/ingest.h): a valid request becomes
 * one canonical job on the jobs topic, keyed by tenant, with the identity taken from the API key;
 * anything else becomes one `rejected` result with a reason code. Every output is checked
 * against its JSON Schema in schema/ (job.json, result.json), so the contract has one home.
 *
 * Requests are written with single quotes for readability; Q() turns them into double quotes,
 * so no request text may contain a literal apostrophe.
 */
#include <check.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/jsonschema.h"
#include "../common/seal.h"
#include "../common/sign.h"
#include "../common/util.h"
#include "../ingest/ingest.h"

#define EXAMPLE "examples/sluice.json"
#define RESTRICTED "tests/fixtures/config/restricted_routes.json"
#define ACME_KEY "sk-acme-demo-0001"
#define GLOBEX_KEY "sk-globex-demo-0001"
#define PAUSED_KEY "sk-paused-demo-0001"

static const int64_t NOW = 1760000000000; /* a fixed wall clock, ms */

static sl_config_t *cfg;
static sl_ingest_t *ing;
static sl_schema_t *job_schema;
static sl_schema_t *result_schema;
static const sl_ingest_source_t SRC = {"sluice.requests", 3, 1234};

/* ---- Fixtures and helpers --------------------------------------------------------------- */

/* A job-id key of the tests' own, made once per process (ingest refuses to start without). */
static const char *job_id_key_path(void)
{
    static char path[64];
    if (path[0] == '\0') {
        char dir[] = "/tmp/sluice-test-ingest-XXXXXX";
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/job-id.key", dir);
        ck_assert_int_eq(sl_job_id_keygen(path), SL_OK);
    }
    return path;
}

static void open_with(const char *config_path)
{
    char err[512] = "";
    ck_assert_msg(sl_config_load(config_path, &cfg, err, sizeof err) == SL_OK, "%s: %s",
                  config_path, err);
    cfg->signing_job_id_key_file = job_id_key_path();
    ck_assert_msg(sl_ingest_new(cfg, &ing, err, sizeof err) == SL_OK, "ingest: %s", err);
    ck_assert_msg(sl_schema_load_file("schema/job.json", &job_schema, err, sizeof err) == SL_OK,
                  "%s", err);
    ck_assert_msg(sl_schema_load_file("schema/result.json", &result_schema, err, sizeof err) ==
                      SL_OK,
                  "%s", err);
}

static void setup_example(void)
{
    open_with(EXAMPLE);
}

static void setup_restricted(void)
{
    open_with(RESTRICTED);
}

static void setup_provider_limits(void)
{
    open_with("tests/fixtures/config/provider_limits.json");
}

static void teardown(void)
{
    sl_schema_free(job_schema);
    sl_schema_free(result_schema);
    sl_ingest_free(ing);
    sl_config_free(cfg);
    job_schema = result_schema = NULL;
    ing = NULL;
    cfg = NULL;
}

/* Returns a static copy of text with ' turned into ". */
static const char *Q(const char *text)
{
    static char buf[8192];
    ck_assert_uint_lt(strlen(text), sizeof buf);
    size_t i = 0;
    for (; text[i]; i++)
        buf[i] = text[i] == '\'' ? '"' : text[i];
    buf[i] = '\0';
    return buf;
}

/* A request with a user message of n characters ("abcd " repeated) on route, with max_tokens;
 * the caller frees it. */
static char *long_request(const char *idem, const char *route, size_t n, int max_tokens)
{
    char *text = malloc(n + 512);
    ck_assert_ptr_nonnull(text);
    int head = snprintf(text, 512,
                        "{\"idempotency_key\":\"%s\",\"api_key\":\"" ACME_KEY "\","
                        "\"route\":\"%s\",\"request\":{\"messages\":[{\"role\":"
                        "\"user\",\"content\":\"",
                        idem, route);
    for (size_t i = 0; i < n; i++)
        text[head + (int)i] = "abcd "[i % 5];
    snprintf(text + head + n, 64, "\"}],\"max_tokens\":%d}}", max_tokens);
    return text;
}

static void process_bytes(const void *payload, size_t len, const sl_ingest_source_t *src,
                          sl_ingest_out_t *out)
{
    ck_assert_int_eq(sl_ingest_process(ing, payload, len, NOW, src, out), SL_OK);
    ck_assert_ptr_nonnull(out->key);
    ck_assert_ptr_nonnull(out->value);
    ck_assert_ptr_nonnull(out->topic);
}

/* Processes a single-quoted request and returns its parsed output value (caller decrefs). */
static json_t *process(const char *request, sl_ingest_out_t *out)
{
    const char *text = Q(request);
    process_bytes(text, strlen(text), &SRC, out);
    json_t *value = json_loads(out->value, 0, NULL);
    ck_assert_msg(value != NULL, "output is not JSON: %s", out->value);
    return value;
}

/* No output carries an api_key field or any API key a test sends. */
static void assert_no_secret(const char *value)
{
    static const char *const secrets[] = {ACME_KEY, GLOBEX_KEY, PAUSED_KEY, "sk-nobody-0000",
                                          "sk-other"};
    ck_assert_msg(strstr(value, "\"api_key\"") == NULL, "output carries api_key: %s", value);
    for (size_t i = 0; i < sizeof secrets / sizeof secrets[0]; i++)
        ck_assert_msg(strstr(value, secrets[i]) == NULL, "output carries %s: %s", secrets[i],
                      value);
}

/* Processes a request that must become a job; returns the job (caller decrefs). */
static json_t *expect_job(const char *request, sl_ingest_out_t *out)
{
    json_t *job = process(request, out);
    ck_assert_msg(out->kind == SL_INGEST_JOB, "rejected (%s): %s", out->reason ? out->reason : "-",
                  out->value);
    ck_assert_ptr_null(out->reason);
    /* Batch jobs have a topic of their own (read after the other), so a tenant's other jobs do
     * not wait behind its backfill in their partition. */
    const char *cls = json_string_value(json_object_get(job, "class"));
    ck_assert_str_eq(out->topic, cls != NULL && strcmp(cls, "batch") == 0
                                     ? cfg->kafka.topic_jobs_batch
                                     : cfg->kafka.topic_jobs);
    char why[512] = "";
    ck_assert_msg(sl_schema_validate(job_schema, job, why, sizeof why) == SL_OK,
                  "job does not match schema/job.json: %s; job %s", why, out->value);
    ck_assert_str_eq(out->key, json_string_value(json_object_get(job, "tenant")));
    assert_no_secret(out->value);
    return job;
}

static const char *str(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    ck_assert_msg(s != NULL, "\"%s\" is missing or not a string", key);
    return s;
}

static int64_t num(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    ck_assert_msg(json_is_integer(v), "\"%s\" is missing or not an integer", key);
    return (int64_t)json_integer_value(v);
}

/* Checks a rejection: kind, topic, reason, schema, the error object and the echoed source.
 * idem is the idempotency key that must be echoed, or NULL when none can be. Returns the result
 * (caller decrefs). */
static json_t *check_rejection(sl_ingest_out_t *out, const char *reason, const char *type,
                               const char *idem, const sl_ingest_source_t *src)
{
    json_t *res = json_loads(out->value, 0, NULL);
    ck_assert_msg(res != NULL, "output is not JSON: %s", out->value);
    ck_assert_msg(out->kind == SL_INGEST_REJECT, "expected a %s rejection, got a job: %s", reason,
                  out->value);
    ck_assert_str_eq(out->topic, cfg->kafka.topic_results);
    ck_assert_ptr_nonnull(out->reason);
    ck_assert_str_eq(out->reason, reason);
    char why[512] = "";
    ck_assert_msg(sl_schema_validate(result_schema, res, why, sizeof why) == SL_OK,
                  "result does not match schema/result.json: %s; result %s", why, out->value);
    ck_assert_str_eq(str(res, "status"), "rejected");
    ck_assert_str_eq(out->key, str(res, "job_id"));
    ck_assert(json_is_integer(json_object_get(res, "finished_ms"))); /* value: its own test */
    json_t *err = json_object_get(res, "error");
    ck_assert_msg(json_is_object(err), "no error object: %s", out->value);
    ck_assert_str_eq(str(err, "reason"), reason);
    ck_assert_str_eq(str(err, "type"), type);
    ck_assert_str_eq(str(err, "gateway_decision"), "rejected_locally");
    ck_assert(json_is_false(json_object_get(err, "retryable")));
    ck_assert_str_ne(str(err, "message"), "");
    if (idem != NULL)
        ck_assert_str_eq(str(res, "idempotency_key"), idem);
    else
        ck_assert(!json_is_string(json_object_get(res, "idempotency_key")));
    json_t *source = json_object_get(res, "source");
    if (src != NULL) {
        ck_assert_msg(json_is_object(source), "no source: %s", out->value);
        ck_assert_str_eq(str(source, "topic"), src->topic);
        ck_assert_int_eq(num(source, "partition"), src->partition);
        ck_assert_int_eq(num(source, "offset"), src->offset);
    } else {
        ck_assert_ptr_null(source);
    }
    assert_no_secret(out->value);
    return res;
}

static json_t *expect_reject(const char *request, const char *reason, const char *type,
                             const char *idem, sl_ingest_out_t *out)
{
    const char *text = Q(request);
    process_bytes(text, strlen(text), &SRC, out);
    return check_rejection(out, reason, type, idem, &SRC);
}

/* ---- Jobs ------------------------------------------------------------------------------- */

START_TEST(valid_request_becomes_a_job_keyed_by_tenant)
{
    sl_ingest_out_t out;
    json_t *job = expect_job("{'idempotency_key':'demo-1','api_key':'" ACME_KEY "',"
                             "'route':'chat-small','class':'interactive','request':{'messages':"
                             "[{'role':'system','content':'You are terse.'},{'role':'user',"
                             "'content':'Name three rivers in Europe.'}],'max_tokens':64}}",
                             &out);
    ck_assert_str_eq(out.topic, "sluice.jobs");
    ck_assert_str_eq(out.key, "acme");
    ck_assert_int_eq(num(job, "v"), 1);
    ck_assert_str_eq(str(job, "tenant"), "acme");
    ck_assert_str_eq(str(job, "app"), "web");
    ck_assert_str_eq(str(job, "env"), "prod");
    ck_assert_str_eq(str(job, "key_id"), "acme-web");
    ck_assert_str_eq(str(job, "route"), "chat-small");
    ck_assert_str_eq(str(job, "class"), "interactive");
    ck_assert_str_eq(str(job, "idempotency_key"), "demo-1");
    char id[33];
    sl_ingest_job_id(ing, "acme", "demo-1", id);
    ck_assert_str_eq(str(job, "job_id"), id);
    ck_assert_int_eq(num(job, "submitted_ms"), NOW);
    ck_assert_int_eq(num(job, "deadline_ms"), NOW + 30000);
    json_t *estimate = json_object_get(job, "estimate");
    ck_assert_int_gt(num(estimate, "input"), 0);
    ck_assert_int_eq(num(estimate, "output"), 64);
    ck_assert_int_eq(num(estimate, "total"), num(estimate, "input") + 64);
    json_t *request = json_object_get(job, "request");
    ck_assert_int_eq(num(request, "max_tokens"), 64);
    ck_assert_uint_eq(json_array_size(json_object_get(request, "messages")), 2);
    ck_assert_str_eq(str(json_array_get(json_object_get(request, "messages"), 1), "content"),
                     "Name three rivers in Europe.");
    json_decref(job);
    sl_ingest_out_clear(&out);
    ck_assert_ptr_null(out.key);
    ck_assert_ptr_null(out.value);
}
END_TEST

START_TEST(identity_comes_from_the_key)
{
    sl_ingest_out_t out;
    json_t *job = expect_job("{'idempotency_key':'g-1','api_key':'" GLOBEX_KEY "',"
                             "'route':'chat-small','class':'batch','request':{'messages':"
                             "[{'role':'user','content':'hi'}]}}",
                             &out);
    ck_assert_str_eq(out.key, "globex");
    ck_assert_str_eq(str(job, "tenant"), "globex");
    ck_assert_str_eq(str(job, "app"), "backfill");
    ck_assert_str_eq(str(job, "key_id"), "globex-batch");
    ck_assert_int_eq(num(job, "deadline_ms"), NOW + 86400000);
    json_decref(job);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(job_never_carries_the_api_key)
{
    sl_ingest_out_t out;
    json_t *job = expect_job("{'api_key':'" ACME_KEY "','route':'chat-small','metadata':"
                             "{'ticket':'T-1042','team':'search'},'request':{'messages':"
                             "[{'role':'user','content':'hello'}],'max_tokens':10}}",
                             &out);
    ck_assert_ptr_null(json_object_get(job, "api_key"));
    ck_assert_ptr_null(json_object_get(json_object_get(job, "request"), "api_key"));
    ck_assert_ptr_null(strstr(out.value, ACME_KEY));
    ck_assert_ptr_null(strstr(out.key, ACME_KEY));
    json_decref(job);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(class_defaults_to_standard_with_its_deadline)
{
    sl_ingest_out_t out;
    json_t *job = expect_job("{'idempotency_key':'std','api_key':'" ACME_KEY "',"
                             "'route':'chat-small','request':{'messages':[{'role':'user',"
                             "'content':'hi'}],'max_tokens':8}}",
                             &out);
    ck_assert_str_eq(str(job, "class"), "standard");
    ck_assert_int_eq(num(job, "deadline_ms"), NOW + 600000);
    json_decref(job);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(explicit_deadline_is_relative_to_receipt)
{
    sl_ingest_out_t out;
    json_t *job = expect_job("{'api_key':'" ACME_KEY "','route':'chat-small','class':'batch',"
                             "'deadline_ms':5000,'request':{'messages':[{'role':'user',"
                             "'content':'hi'}],'max_tokens':8}}",
                             &out);
    ck_assert_int_eq(num(job, "deadline_ms"), NOW + 5000);
    json_decref(job);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(max_tokens_is_injected_from_the_route_default)
{
    sl_ingest_out_t out;
    json_t *job = expect_job("{'api_key':'" ACME_KEY "','route':'chat-small','request':"
                             "{'messages':[{'role':'user','content':'hi'}]}}",
                             &out);
    ck_assert_int_eq(num(json_object_get(job, "request"), "max_tokens"), 256);
    ck_assert_int_eq(num(json_object_get(job, "estimate"), "output"), 256);
    json_decref(job);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(max_completion_tokens_bounds_the_output)
{
    /* The newer OpenAI name for the same bound: the job must still have its ceiling and match
     * schema/job.json. */
    sl_ingest_out_t out;
    json_t *job = expect_job("{'api_key':'" ACME_KEY "','route':'chat-small','request':"
                             "{'messages':[{'role':'user','content':'hi'}],"
                             "'max_completion_tokens':100}}",
                             &out);
    ck_assert_int_eq(num(json_object_get(job, "estimate"), "output"), 100);
    json_decref(job);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(metadata_and_fallback_are_carried)
{
    sl_ingest_out_t out;
    json_t *job = expect_job("{'api_key':'" ACME_KEY "','route':'chat-small','fallback':true,"
                             "'metadata':{'ticket':'T-1042','n':3,'ok':false,'none':null},"
                             "'request':{'messages':[{'role':'user','content':'hi'}],"
                             "'max_tokens':8,'temperature':0.7}}",
                             &out);
    ck_assert(json_is_true(json_object_get(job, "fallback")));
    json_t *meta = json_object_get(job, "metadata");
    ck_assert_str_eq(str(meta, "ticket"), "T-1042");
    ck_assert_int_eq(num(meta, "n"), 3);
    ck_assert_double_eq_tol(
        json_number_value(json_object_get(json_object_get(job, "request"), "temperature")), 0.7,
        1e-9);
    json_decref(job);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(estimate_input_grows_with_the_prompt)
{
    sl_ingest_out_t out;
    json_t *small = expect_job("{'api_key':'" ACME_KEY "','route':'chat-small','request':"
                               "{'messages':[{'role':'user','content':'hi'}],'max_tokens':8}}",
                               &out);
    int64_t small_in = num(json_object_get(small, "estimate"), "input");
    sl_ingest_out_clear(&out);
    char request[4096];
    char text[2001];
    memset(text, 'x', 2000);
    text[2000] = '\0';
    snprintf(request, sizeof request,
             "{'api_key':'" ACME_KEY "','route':'chat-small','request':{'messages':[{'role':"
             "'user','content':'%s'}],'max_tokens':8}}",
             text);
    json_t *big = expect_job(request, &out);
    int64_t big_in = num(json_object_get(big, "estimate"), "input");
    ck_assert_int_ge(big_in, 500); /* never below OpenAI's ceil(chars / 4) */
    ck_assert_int_gt(big_in, small_in);
    json_decref(small);
    json_decref(big);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(job_id_is_stable_per_tenant_and_idempotency_key)
{
    const char *acme_req = "{'idempotency_key':'same-key','api_key':'" ACME_KEY "',"
                           "'route':'chat-small','request':{'messages':[{'role':'user',"
                           "'content':'hi'}]}}";
    sl_ingest_out_t out;
    json_t *first = expect_job(acme_req, &out);
    sl_ingest_out_clear(&out);
    json_t *again = expect_job(acme_req, &out);
    sl_ingest_out_clear(&out);
    ck_assert_str_eq(str(first, "job_id"), str(again, "job_id"));

    json_t *other_tenant = expect_job("{'idempotency_key':'same-key','api_key':'" GLOBEX_KEY "',"
                                      "'route':'chat-small','request':{'messages':[{'role':"
                                      "'user','content':'hi'}]}}",
                                      &out);
    sl_ingest_out_clear(&out);
    ck_assert_str_ne(str(first, "job_id"), str(other_tenant, "job_id"));

    json_t *other_key = expect_job("{'idempotency_key':'same-key-2','api_key':'" ACME_KEY "',"
                                   "'route':'chat-small','request':{'messages':[{'role':'user',"
                                   "'content':'hi'}]}}",
                                   &out);
    sl_ingest_out_clear(&out);
    ck_assert_str_ne(str(first, "job_id"), str(other_key, "job_id"));
    json_decref(first);
    json_decref(again);
    json_decref(other_tenant);
    json_decref(other_key);

    /* The function itself: 32 hex digits, and tenant and key cannot bleed into each other. */
    char a[33], b[33];
    sl_ingest_job_id(ing, "acme", "x", a);
    ck_assert_uint_eq(strlen(a), 32);
    ck_assert_uint_eq(strspn(a, "0123456789abcdef"), 32);
    sl_ingest_job_id(ing, "acm", "ex", b);
    ck_assert_str_ne(a, b);
    sl_ingest_job_id(ing, "acme", "x", b);
    ck_assert_str_eq(a, b);
}
END_TEST

/* The job id as it was derived before it was keyed: an unkeyed BLAKE2b anyone can compute. */
static void unkeyed_job_id(const char *tenant, const char *idem, char out[33])
{
    uint8_t digest[16];
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, sizeof digest);
    crypto_generichash_update(&st, (const unsigned char *)tenant, strlen(tenant) + 1);
    crypto_generichash_update(&st, (const unsigned char *)idem, strlen(idem));
    crypto_generichash_final(&st, digest, sizeof digest);
    sl_hex_encode(digest, sizeof digest, out);
}

START_TEST(job_id_cannot_be_computed_without_the_secret_key)
{
    sl_ingest_out_t out;
    json_t *job = expect_job("{'idempotency_key':'victim-1','api_key':'" ACME_KEY "',"
                             "'route':'chat-small','request':{'messages':[{'role':'user',"
                             "'content':'hi'}]}}",
                             &out);
    sl_ingest_out_clear(&out);
    char guess[33];
    unkeyed_job_id("acme", "victim-1", guess);
    ck_assert_str_ne(str(job, "job_id"), guess);
    /* Another key gives other ids; the same key the same ids (a resubmission is one job). */
    uint8_t k1[SL_JOB_ID_KEY_BYTES], k2[SL_JOB_ID_KEY_BYTES];
    memset(k1, 1, sizeof k1);
    memset(k2, 2, sizeof k2);
    char a[33], b[33], c[33];
    sl_job_id(k1, "acme", "victim-1", a);
    sl_job_id(k2, "acme", "victim-1", b);
    sl_job_id(k1, "acme", "victim-1", c);
    ck_assert_str_ne(a, b);
    ck_assert_str_eq(a, c);
    json_decref(job);
}
END_TEST

START_TEST(ingest_does_not_start_without_its_job_id_key)
{
    const char *kept = cfg->signing_job_id_key_file;
    cfg->signing_job_id_key_file = "/nonexistent/job-id.key";
    sl_ingest_t *other = NULL;
    char err[512] = "";
    ck_assert_int_ne(sl_ingest_new(cfg, &other, err, sizeof err), SL_OK);
    ck_assert_ptr_null(other);
    ck_assert_ptr_nonnull(strstr(err, "job id key"));
    cfg->signing_job_id_key_file = kept;
}
END_TEST

START_TEST(job_id_is_stable_for_a_long_non_ascii_idempotency_key)
{
    /* 150 code points (300 bytes of UTF-8): within the schema's maxLength of 200 characters,
     * so it is the job's key, and a resubmission is the same job. */
    char idem[512] = "";
    for (int i = 0; i < 150; i++)
        strcat(idem, "\xc3\xa9");
    char request[1024];
    snprintf(request, sizeof request,
             "{'idempotency_key':'%s','api_key':'" ACME_KEY "','route':'chat-small','request':"
             "{'messages':[{'role':'user','content':'hi'}]}}",
             idem);
    sl_ingest_out_t out;
    json_t *first = expect_job(request, &out);
    sl_ingest_out_clear(&out);
    json_t *again = expect_job(request, &out);
    sl_ingest_out_clear(&out);
    ck_assert_str_eq(str(first, "idempotency_key"), idem);
    ck_assert_str_eq(str(first, "job_id"), str(again, "job_id"));
    char id[33];
    sl_ingest_job_id(ing, "acme", idem, id);
    ck_assert_str_eq(str(first, "job_id"), id);
    json_decref(first);
    json_decref(again);
}
END_TEST

START_TEST(request_without_idempotency_key_gets_a_fresh_one)
{
    const char *req = "{'api_key':'" ACME_KEY "','route':'chat-small','request':{'messages':"
                      "[{'role':'user','content':'hi'}]}}";
    sl_ingest_out_t out;
    json_t *a = expect_job(req, &out);
    sl_ingest_out_clear(&out);
    json_t *b = expect_job(req, &out);
    sl_ingest_out_clear(&out);
    ck_assert_str_ne(str(a, "idempotency_key"), "");
    ck_assert_str_ne(str(a, "job_id"), str(b, "job_id"));
    char id[33];
    sl_ingest_job_id(ing, "acme", str(a, "idempotency_key"), id);
    ck_assert_str_eq(str(a, "job_id"), id);
    json_decref(a);
    json_decref(b);
}
END_TEST

/* Streamed requests go through: the job keeps stream and stream_options in its request. */
START_TEST(stream_true_is_accepted)
{
    sl_ingest_out_t out;
    json_t *job = expect_job("{'api_key':'" ACME_KEY "','route':'chat-small','request':"
                             "{'messages':[{'role':'user','content':'hi'}],'stream':true,"
                             "'stream_options':{'include_usage':true}}}",
                             &out);
    ck_assert(json_is_true(json_object_get(json_object_get(job, "request"), "stream")));
    json_decref(job);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(stream_false_is_accepted)
{
    sl_ingest_out_t out;
    json_t *job = expect_job("{'api_key':'" ACME_KEY "','route':'chat-small','request':"
                             "{'messages':[{'role':'user','content':'hi'}],'stream':false}}",
                             &out);
    json_decref(job);
    sl_ingest_out_clear(&out);
}
END_TEST

/* ---- Rejections ------------------------------------------------------------------------- */

START_TEST(oversized_payload_is_rejected)
{
    /* Valid JSON, well formed, but larger than ingest.max_request_bytes (262144). */
    size_t n = 300000;
    char *text = malloc(n + 512);
    ck_assert_ptr_nonnull(text);
    int head = snprintf(text, 512,
                        "{\"idempotency_key\":\"big-1\",\"api_key\":\"" ACME_KEY "\","
                        "\"route\":\"chat-small\",\"request\":{\"messages\":[{\"role\":\"user\","
                        "\"content\":\"");
    memset(text + head, 'a', n);
    strcpy(text + head + n, "\"}]}}");
    sl_ingest_out_t out;
    process_bytes(text, strlen(text), &SRC, &out);
    json_t *res = check_rejection(&out, "payload_too_large", "invalid_request", NULL, &SRC);
    json_decref(res);
    sl_ingest_out_clear(&out);
    free(text);
}
END_TEST

START_TEST(malformed_json_is_rejected)
{
    static const char *const bad[] = {"{not json", "", "{\"api_key\": \"x\",}", "null",
                                      "{\"a\":1,\"a\":2}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sl_ingest_out_t out;
        process_bytes(bad[i], strlen(bad[i]), &SRC, &out);
        json_t *res = check_rejection(&out, "malformed_json", "invalid_request", NULL, &SRC);
        json_decref(res);
        sl_ingest_out_clear(&out);
    }
    /* Bytes that are not UTF-8 are malformed too. */
    const char bytes[] = "{\"idempotency_key\":\"\xff\xfe\"}";
    sl_ingest_out_t out;
    process_bytes(bytes, sizeof bytes - 1, &SRC, &out);
    json_t *res = check_rejection(&out, "malformed_json", "invalid_request", NULL, &SRC);
    json_decref(res);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(caller_set_tenant_is_a_schema_violation)
{
    /* Identity comes from the key, never from fields the caller sets. */
    sl_ingest_out_t out;
    json_t *res = expect_reject("{'idempotency_key':'demo-bad-schema','api_key':'" ACME_KEY "',"
                                "'route':'chat-small','tenant':'globex','request':{'messages':"
                                "[{'role':'user','content':'hi'}]}}",
                                "schema_violation", "invalid_request", "demo-bad-schema", &out);
    ck_assert_ptr_nonnull(strstr(str(json_object_get(res, "error"), "message"), "tenant"));
    ck_assert(!json_is_string(json_object_get(res, "tenant")));
    json_decref(res);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(schema_violations_are_rejected)
{
    static const struct {
        const char *request;
        const char *needle; /* in the error message */
    } cases[] = {
        {"{'idempotency_key':'sv','api_key':'" ACME_KEY "','route':'chat-small','request':"
         "{'messages':[{'role':'robot','content':'hi'}]}}",
         "role"},
        {"{'idempotency_key':'sv','api_key':'" ACME_KEY "','route':'chat-small','request':"
         "{'max_tokens':10}}",
         "messages"},
        {"{'idempotency_key':'sv','api_key':'" ACME_KEY "','route':'chat-small','request':"
         "{'messages':[]}}",
         "messages"},
        {"{'idempotency_key':'sv','route':'chat-small','request':{'messages':[{'role':'user',"
         "'content':'hi'}]}}",
         "api_key"},
        {"{'idempotency_key':'sv','api_key':'" ACME_KEY "','request':{'messages':[{'role':"
         "'user','content':'hi'}]}}",
         "route"},
        {"{'idempotency_key':'sv','api_key':'" ACME_KEY "','route':'chat-small','class':"
         "'express','request':{'messages':[{'role':'user','content':'hi'}]}}",
         "class"},
        {"{'idempotency_key':'sv','api_key':'" ACME_KEY "','route':'chat-small','request':"
         "{'messages':[{'role':'user','content':'hi'}],'max_tokens':0}}",
         "max_tokens"},
        {"{'idempotency_key':'sv','api_key':'" ACME_KEY "','route':'chat-small','request':"
         "{'messages':[{'role':'user','content':'hi'}],'api_key':'sk-other'}}",
         "api_key"},
        {"{'idempotency_key':'sv','api_key':'" ACME_KEY "','route':'chat-small','app':'web',"
         "'request':{'messages':[{'role':'user','content':'hi'}]}}",
         "app"},
        {"{'idempotency_key':'sv','api_key':'short','route':'chat-small','request':"
         "{'messages':[{'role':'user','content':'hi'}]}}",
         "api_key"},
        {"{'idempotency_key':'sv','api_key':'" ACME_KEY "','route':'chat-small','deadline_ms':0,"
         "'request':{'messages':[{'role':'user','content':'hi'}]}}",
         "deadline_ms"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_ingest_out_t out;
        json_t *res =
            expect_reject(cases[i].request, "schema_violation", "invalid_request", "sv", &out);
        const char *msg = str(json_object_get(res, "error"), "message");
        ck_assert_msg(strstr(msg, cases[i].needle) != NULL, "case %zu: \"%s\" not in: %s", i,
                      cases[i].needle, msg);
        json_decref(res);
        sl_ingest_out_clear(&out);
    }
}
END_TEST

START_TEST(unusable_idempotency_key_is_not_echoed)
{
    sl_ingest_out_t out;
    json_t *res = expect_reject("{'idempotency_key':42,'api_key':'" ACME_KEY "','route':"
                                "'chat-small','request':{'messages':[{'role':'user','content':"
                                "'hi'}]}}",
                                "schema_violation", "invalid_request", NULL, &out);
    json_decref(res);
    sl_ingest_out_clear(&out);
    /* A top-level array is JSON, but not a request. */
    res = expect_reject("[1, 2]", "schema_violation", "invalid_request", NULL, &out);
    json_decref(res);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(unknown_api_key_is_rejected)
{
    sl_ingest_out_t out;
    json_t *res = expect_reject("{'idempotency_key':'demo-bad-key','api_key':'sk-nobody-0000',"
                                "'route':'chat-small','request':{'messages':[{'role':'user',"
                                "'content':'hi'}]}}",
                                "unknown_api_key", "authentication", "demo-bad-key", &out);
    ck_assert_ptr_null(strstr(out.value, "sk-nobody-0000"));
    ck_assert(!json_is_string(json_object_get(res, "tenant")));
    json_decref(res);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(unknown_route_is_rejected)
{
    sl_ingest_out_t out;
    json_t *res = expect_reject("{'idempotency_key':'demo-bad-route','api_key':'" ACME_KEY "',"
                                "'route':'no-such-route','request':{'messages':[{'role':'user',"
                                "'content':'hi'}]}}",
                                "unknown_route", "invalid_request", "demo-bad-route", &out);
    ck_assert_ptr_nonnull(strstr(str(json_object_get(res, "error"), "message"), "no-such-route"));
    /* Once the tenant is known, a rejection has the job's own stable id. */
    char id[33];
    sl_ingest_job_id(ing, "acme", "demo-bad-route", id);
    ck_assert_str_eq(str(res, "job_id"), id);
    json_decref(res);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(request_beyond_every_deployment_limit_is_rejected)
{
    /* max_tokens above every deployment's max_output_tokens (4096). */
    sl_ingest_out_t out;
    json_t *res = expect_reject("{'idempotency_key':'too-big','api_key':'" ACME_KEY "',"
                                "'route':'chat-small','request':{'messages':[{'role':'user',"
                                "'content':'hi'}],'max_tokens':5000}}",
                                "request_too_large", "capacity", "too-big", &out);
    json_decref(res);
    sl_ingest_out_clear(&out);

    /* At the limit it is fine. */
    json_t *job = expect_job("{'api_key':'" ACME_KEY "','route':'chat-small','request':"
                             "{'messages':[{'role':'user','content':'hi'}],'max_tokens':4096}}",
                             &out);
    json_decref(job);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(prompt_beyond_every_tpm_limit_is_rejected)
{
    /* About 250,000 characters: more than 60,000 tokens, the largest TPM on the route, yet
     * under max_request_bytes. */
    char *text = long_request("long", "chat-small", 250000, 16);
    ck_assert_int_lt((long)strlen(text), (long)cfg->max_request_bytes);
    sl_ingest_out_t out;
    process_bytes(text, strlen(text), &SRC, &out);
    json_t *res = check_rejection(&out, "request_too_large", "capacity", "long", &SRC);
    json_decref(res);
    sl_ingest_out_clear(&out);
    free(text);
}
END_TEST

START_TEST(request_beyond_the_tenant_budget_is_rejected)
{
    /* globex has tokens_per_min 20000: 80,000 characters (~20,000+ tokens) cannot ever fit. */
    size_t n = 80000;
    char *text = malloc(n + 512);
    int head = snprintf(text, 512,
                        "{\"idempotency_key\":\"g-long\",\"api_key\":\"" GLOBEX_KEY "\","
                        "\"route\":\"chat-small\",\"request\":{\"messages\":[{\"role\":\"user\","
                        "\"content\":\"");
    memset(text + head, 'q', n);
    strcpy(text + head + n, "\"}],\"max_tokens\":1000}}");
    sl_ingest_out_t out;
    process_bytes(text, strlen(text), &SRC, &out);
    json_t *res = check_rejection(&out, "request_too_large", "capacity", "g-long", &SRC);
    json_decref(res);
    sl_ingest_out_clear(&out);
    free(text);
}
END_TEST

/* Regression: ingest used to check only TPM and max_tokens, so a request that an ITPM, an OTPM
 * counted at max_tokens, or a daily quota on the deployment or its scope could never hold was
 * queued and only refused by the scheduler. */
START_TEST(request_beyond_itpm_otpm_or_a_daily_quota_is_rejected)
{
    sl_ingest_out_t out;
    /* max_tokens 1500 > OTPM 1000 (counted at max_tokens). */
    json_t *res = expect_reject("{'idempotency_key':'otpm','api_key':'" ACME_KEY "',"
                                "'route':'claude','request':{'messages':[{'role':'user',"
                                "'content':'hi'}],'max_tokens':1500}}",
                                "request_too_large", "capacity", "otpm", &out);
    json_decref(res);
    sl_ingest_out_clear(&out);
    /* About 10,000 characters: more input than ITPM 2000. */
    char *text = long_request("itpm", "claude", 10000, 16);
    process_bytes(text, strlen(text), &SRC, &out);
    res = check_rejection(&out, "request_too_large", "capacity", "itpm", &SRC);
    json_decref(res);
    sl_ingest_out_clear(&out);
    free(text);
    /* max_tokens 600 > the deployment's own 500 tokens a day. */
    res = expect_reject("{'idempotency_key':'tpd','api_key':'" ACME_KEY "',"
                        "'route':'daily','request':{'messages':[{'role':'user',"
                        "'content':'hi'}],'max_tokens':600}}",
                        "request_too_large", "capacity", "tpd", &out);
    json_decref(res);
    sl_ingest_out_clear(&out);
    /* Within every limit it is a job. */
    json_t *job = expect_job("{'api_key':'" ACME_KEY "','route':'claude','request':"
                             "{'messages':[{'role':'user','content':'hi'}],'max_tokens':900}}",
                             &out);
    json_decref(job);
    sl_ingest_out_clear(&out);
    job = expect_job("{'api_key':'" ACME_KEY "','route':'daily','request':"
                     "{'messages':[{'role':'user','content':'hi'}],'max_tokens':400}}",
                     &out);
    json_decref(job);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(request_beyond_a_parent_scope_quota_is_rejected)
{
    /* A prompt within ITPM (2000) but above the project's 1,500 tokens a day, which counts
     * max(input, max_tokens) at receipt: refused by the scope above the deployment. */
    sl_ingest_out_t out;
    char *text = long_request("scope", "claude", 5500, 16); /* about 1,730 tokens */
    process_bytes(text, strlen(text), &SRC, &out);
    json_t *res = check_rejection(&out, "request_too_large", "capacity", "scope", &SRC);
    json_decref(res);
    sl_ingest_out_clear(&out);
    free(text);
}
END_TEST

START_TEST(rejection_without_a_source_has_none)
{
    const char *text = "{not json";
    sl_ingest_out_t out;
    process_bytes(text, strlen(text), NULL, &out);
    json_t *res = check_rejection(&out, "malformed_json", "invalid_request", NULL, NULL);
    json_decref(res);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(rejection_is_finished_at_the_time_of_processing)
{
    /* A wall-clock time in ms needs 64 bits: it must not be truncated to an int. */
    sl_ingest_out_t out;
    json_t *res = expect_reject("{'idempotency_key':'t-1','api_key':'" ACME_KEY "','route':"
                                "'no-such-route','request':{'messages':[{'role':'user','content':"
                                "'hi'}]}}",
                                "unknown_route", "invalid_request", "t-1", &out);
    ck_assert_int_eq(num(res, "finished_ms"), NOW);
    json_decref(res);
    sl_ingest_out_clear(&out);
    process_bytes("{not json", 9, &SRC, &out);
    res = check_rejection(&out, "malformed_json", "invalid_request", NULL, &SRC);
    ck_assert_int_eq(num(res, "finished_ms"), NOW);
    json_decref(res);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(rejections_of_unidentified_messages_get_distinct_ids)
{
    sl_ingest_out_t a, b;
    process_bytes("{not json", 9, &SRC, &a);
    process_bytes("{not json", 9, &SRC, &b);
    ck_assert_str_ne(a.key, b.key);
    sl_ingest_out_clear(&a);
    sl_ingest_out_clear(&b);
}
END_TEST

START_TEST(every_example_job_yields_exactly_one_valid_output)
{
    FILE *f = fopen("examples/jobs.jsonl", "r");
    ck_assert_ptr_nonnull(f);
    char line[16384];
    int jobs = 0, rejects = 0;
    int64_t offset = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        size_t len = strcspn(line, "\n");
        if (len == 0)
            continue;
        sl_ingest_source_t src = {"sluice.requests", 0, offset++};
        sl_ingest_out_t out;
        process_bytes(line, len, &src, &out);
        json_t *value = json_loads(out.value, 0, NULL);
        ck_assert_ptr_nonnull(value);
        char why[512] = "";
        const sl_schema_t *schema = out.kind == SL_INGEST_JOB ? job_schema : result_schema;
        ck_assert_msg(sl_schema_validate(schema, value, why, sizeof why) == SL_OK,
                      "line %lld: %s; %s", (long long)offset, why, out.value);
        assert_no_secret(out.value);
        if (out.kind == SL_INGEST_JOB)
            jobs++;
        else
            rejects++;
        json_decref(value);
        sl_ingest_out_clear(&out);
    }
    fclose(f);
    ck_assert_int_gt(jobs, 0);
    ck_assert_int_gt(rejects, 0);
}
END_TEST

/* ---- With the restricted config fixture ------------------------------------------------- */

START_TEST(route_outside_the_tenant_allow_list_is_rejected)
{
    sl_ingest_out_t out;
    json_t *res = expect_reject("{'idempotency_key':'nope','api_key':'" GLOBEX_KEY "','route':"
                                "'chat-large','request':{'messages':[{'role':'user','content':"
                                "'hi'}]}}",
                                "route_not_allowed", "permission", "nope", &out);
    ck_assert_str_eq(str(res, "tenant"), "globex");
    json_decref(res);
    sl_ingest_out_clear(&out);

    /* The allowed route works for globex; acme, with no list, may use both. */
    json_t *job = expect_job("{'api_key':'" GLOBEX_KEY "','route':'chat-small','request':"
                             "{'messages':[{'role':'user','content':'hi'}]}}",
                             &out);
    ck_assert_int_eq(num(json_object_get(job, "request"), "max_tokens"), 128);
    ck_assert_str_eq(str(job, "env"), "staging");
    json_decref(job);
    sl_ingest_out_clear(&out);
    job = expect_job("{'api_key':'" ACME_KEY "','route':'chat-large','request':"
                     "{'messages':[{'role':'user','content':'hi'}],'max_tokens':10000}}",
                     &out);
    ck_assert_int_eq(num(json_object_get(job, "estimate"), "output"), 10000);
    json_decref(job);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(paused_key_is_rejected)
{
    sl_ingest_out_t out;
    json_t *res = expect_reject("{'idempotency_key':'p-1','api_key':'" PAUSED_KEY "','route':"
                                "'chat-small','request':{'messages':[{'role':'user','content':"
                                "'hi'}]}}",
                                "key_paused", "policy", "p-1", &out);
    json_decref(res);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(class_deadline_comes_from_the_config)
{
    sl_ingest_out_t out;
    json_t *job = expect_job("{'api_key':'" ACME_KEY "','route':'chat-small','class':"
                             "'interactive','request':{'messages':[{'role':'user','content':"
                             "'hi'}]}}",
                             &out);
    ck_assert_int_eq(num(job, "deadline_ms"), NOW + 20000);
    json_decref(job);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(batch_jobs_go_to_the_batch_jobs_topic_keyed_by_tenant)
{
    sl_ingest_out_t out;
    json_t *job = expect_job("{'api_key':'" ACME_KEY "','route':'chat-small','class':"
                             "'batch','request':{'messages':[{'role':'user','content':"
                             "'hi'}]}}",
                             &out);
    ck_assert_str_eq(out.topic, "sluice.jobs.batch");
    ck_assert_str_eq(out.key, "acme");
    json_decref(job);
    sl_ingest_out_clear(&out);
    job = expect_job("{'api_key':'" ACME_KEY "','route':'chat-small','class':"
                     "'interactive','request':{'messages':[{'role':'user','content':"
                     "'hi'}]}}",
                     &out);
    ck_assert_str_eq(out.topic, "sluice.jobs");
    json_decref(job);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(payload_limit_comes_from_the_config)
{
    /* This config allows 65536 bytes. */
    size_t n = 70000;
    char *text = malloc(n + 512);
    int head = snprintf(text, 512,
                        "{\"api_key\":\"" ACME_KEY "\",\"route\":\"chat-small\",\"request\":"
                        "{\"messages\":[{\"role\":\"user\",\"content\":\"");
    memset(text + head, 'a', n);
    strcpy(text + head + n, "\"}]}}");
    sl_ingest_out_t out;
    process_bytes(text, strlen(text), &SRC, &out);
    json_t *res = check_rejection(&out, "payload_too_large", "invalid_request", NULL, &SRC);
    json_decref(res);
    sl_ingest_out_clear(&out);
    free(text);
}
END_TEST

/* ---- Cancellation ----------------------------------------------------------------------- */

START_TEST(cancel_names_the_callers_own_job_on_the_batch_jobs_topic)
{
    sl_ingest_out_t out;
    json_t *job = expect_job("{'idempotency_key': 'order-7', 'api_key': '" ACME_KEY "',"
                             " 'route': 'chat-small', 'request': {'messages': [{'role': 'user',"
                             " 'content': 'hi'}]}}",
                             &out);
    char job_id[65];
    snprintf(job_id, sizeof job_id, "%s", str(job, "job_id"));
    json_decref(job);
    sl_ingest_out_clear(&out);
    json_t *c = process("{'api_key': '" ACME_KEY "', 'cancel': 'order-7'}", &out);
    ck_assert_int_eq(out.kind, SL_INGEST_JOB);
    /* Where batch jobs go, keyed as the jobs: a batch job's cancel never overtakes it. */
    ck_assert_str_eq(out.topic, cfg->kafka.topic_jobs_batch);
    ck_assert_str_eq(out.key, "acme");
    sl_schema_t *cancel_schema = NULL;
    char err[512] = "";
    ck_assert_int_eq(sl_schema_load_file("schema/cancel.json", &cancel_schema, err, sizeof err),
                     SL_OK);
    ck_assert_msg(sl_schema_validate(cancel_schema, c, err, sizeof err) == SL_OK, "%s", err);
    sl_schema_free(cancel_schema);
    ck_assert_str_eq(str(c, "type"), "cancel");
    ck_assert_str_eq(str(c, "job_id"), job_id);
    ck_assert_str_eq(str(c, "tenant"), "acme");
    assert_no_secret(out.value);
    json_decref(c);
    sl_ingest_out_clear(&out);
    /* the same idempotency key from another tenant names another job */
    c = process("{'api_key': '" GLOBEX_KEY "', 'cancel': 'order-7'}", &out);
    ck_assert_str_ne(str(c, "job_id"), job_id);
    ck_assert_str_eq(str(c, "tenant"), "globex");
    json_decref(c);
    sl_ingest_out_clear(&out);
}
END_TEST

START_TEST(bad_cancel_requests_are_rejected)
{
    sl_ingest_out_t out;
    json_t *r = expect_reject("{'api_key': 'sk-nobody-0000', 'cancel': 'order-7'}",
                              "unknown_api_key", "authentication", "order-7", &out);
    json_decref(r);
    sl_ingest_out_clear(&out);
    r = expect_reject("{'api_key': '" ACME_KEY "', 'cancel': 7}", "schema_violation",
                      "invalid_request", NULL, &out);
    json_decref(r);
    sl_ingest_out_clear(&out);
    r = expect_reject("{'api_key': '" ACME_KEY "', 'cancel': 'x', 'route': 'chat-small'}",
                      "schema_violation", "invalid_request", "x", &out);
    json_decref(r);
    sl_ingest_out_clear(&out);
}
END_TEST

/* ---- Per-tenant results topics and sealed rejections ------------------------------------- */

static uint8_t acme_pk[32], acme_sk[32];

/* The example config with acme's results on a topic of its own, sealed to a fresh key. */
static void setup_isolated(void)
{
    ck_assert_int_ge(sodium_init(), 0);
    crypto_box_keypair(acme_pk, acme_sk);
    char hex[65];
    sl_hex_encode(acme_pk, sizeof acme_pk, hex);
    json_error_t jerr;
    json_t *root = json_load_file(EXAMPLE, 0, &jerr);
    ck_assert_ptr_nonnull(root);
    json_t *acme = json_array_get(json_object_get(root, "tenants"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(acme, "name")), "acme");
    json_object_set_new(acme, "results_topic", json_string("sluice.results.acme"));
    json_object_set_new(acme, "result_public_key", json_string(hex));
    char path[] = "/tmp/sluice-test-ingest-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(json_dump_file(root, path, 0), 0);
    json_decref(root);
    open_with(path);
    unlink(path);
}

/* A rejection of acme's request goes to acme's topic with its message sealed; one of globex's
 * (no topic or key of its own) and one that names no tenant go to the shared topic in the
 * clear; acme's valid job still goes to the jobs topic. */
START_TEST(rejections_go_to_their_tenants_topic_sealed)
{
    sl_ingest_out_t out;
    json_t *res = process("{'idempotency_key':'r-1','api_key':'" ACME_KEY "','route':"
                          "'no-such-route','request':{'messages':[{'role':'user','content':"
                          "'hi'}]}}",
                          &out);
    ck_assert_int_eq(out.kind, SL_INGEST_REJECT);
    ck_assert_str_eq(out.topic, "sluice.results.acme");
    char why[512] = "";
    ck_assert_msg(sl_schema_validate(result_schema, res, why, sizeof why) == SL_OK, "%s", why);
    ck_assert_ptr_null(strstr(out.value, "no-such-route"));
    ck_assert_str_eq(str(json_object_get(res, "error"), "reason"), "unknown_route");
    ck_assert_str_eq(str(json_object_get(res, "error"), "message"), "");
    ck_assert_int_eq(sl_seal_open(res, acme_pk, acme_sk), SL_OK);
    ck_assert_ptr_nonnull(strstr(str(json_object_get(res, "error"), "message"), "no-such-route"));
    json_decref(res);
    sl_ingest_out_clear(&out);

    res = process("{'idempotency_key':'r-2','api_key':'" GLOBEX_KEY "','route':"
                  "'no-such-route','request':{'messages':[{'role':'user','content':'hi'}]}}",
                  &out);
    ck_assert_str_eq(out.topic, "sluice.results");
    ck_assert(!sl_seal_is_sealed(res));
    json_decref(res);
    sl_ingest_out_clear(&out);

    res = process("{'idempotency_key':'r-3','api_key':'sk-nobody-0000000','route':"
                  "'chat-small','request':{'messages':[{'role':'user','content':'hi'}]}}",
                  &out);
    ck_assert_str_eq(str(json_object_get(res, "error"), "reason"), "unknown_api_key");
    ck_assert_str_eq(out.topic, "sluice.results");
    json_decref(res);
    sl_ingest_out_clear(&out);

    res = process("{'idempotency_key':'r-4','api_key':'" ACME_KEY "','route':'chat-small',"
                  "'request':{'messages':[{'role':'user','content':'hi'}]}}",
                  &out);
    ck_assert_int_eq(out.kind, SL_INGEST_JOB);
    ck_assert_str_eq(out.topic, cfg->kafka.topic_jobs);
    json_decref(res);
    sl_ingest_out_clear(&out);
}
END_TEST

static Suite *ingest_suite(void)
{
    Suite *s = suite_create("ingest");
    TCase *jobs = tcase_create("jobs");
    tcase_add_checked_fixture(jobs, setup_example, teardown);
    tcase_add_test(jobs, valid_request_becomes_a_job_keyed_by_tenant);
    tcase_add_test(jobs, job_id_cannot_be_computed_without_the_secret_key);
    tcase_add_test(jobs, ingest_does_not_start_without_its_job_id_key);
    tcase_add_test(jobs, cancel_names_the_callers_own_job_on_the_batch_jobs_topic);
    tcase_add_test(jobs, batch_jobs_go_to_the_batch_jobs_topic_keyed_by_tenant);
    tcase_add_test(jobs, bad_cancel_requests_are_rejected);
    tcase_add_test(jobs, identity_comes_from_the_key);
    tcase_add_test(jobs, job_never_carries_the_api_key);
    tcase_add_test(jobs, class_defaults_to_standard_with_its_deadline);
    tcase_add_test(jobs, explicit_deadline_is_relative_to_receipt);
    tcase_add_test(jobs, max_tokens_is_injected_from_the_route_default);
    tcase_add_test(jobs, max_completion_tokens_bounds_the_output);
    tcase_add_test(jobs, metadata_and_fallback_are_carried);
    tcase_add_test(jobs, estimate_input_grows_with_the_prompt);
    tcase_add_test(jobs, job_id_is_stable_per_tenant_and_idempotency_key);
    tcase_add_test(jobs, job_id_is_stable_for_a_long_non_ascii_idempotency_key);
    tcase_add_test(jobs, request_without_idempotency_key_gets_a_fresh_one);
    tcase_add_test(jobs, stream_false_is_accepted);
    tcase_add_test(jobs, stream_true_is_accepted);
    tcase_add_test(jobs, every_example_job_yields_exactly_one_valid_output);
    suite_add_tcase(s, jobs);

    TCase *rej = tcase_create("rejections");
    tcase_add_checked_fixture(rej, setup_example, teardown);
    tcase_add_test(rej, oversized_payload_is_rejected);
    tcase_add_test(rej, malformed_json_is_rejected);
    tcase_add_test(rej, caller_set_tenant_is_a_schema_violation);
    tcase_add_test(rej, schema_violations_are_rejected);
    tcase_add_test(rej, unusable_idempotency_key_is_not_echoed);
    tcase_add_test(rej, unknown_api_key_is_rejected);
    tcase_add_test(rej, unknown_route_is_rejected);
    tcase_add_test(rej, request_beyond_every_deployment_limit_is_rejected);
    tcase_add_test(rej, prompt_beyond_every_tpm_limit_is_rejected);
    tcase_add_test(rej, request_beyond_the_tenant_budget_is_rejected);
    tcase_add_test(rej, rejection_without_a_source_has_none);
    tcase_add_test(rej, rejection_is_finished_at_the_time_of_processing);
    tcase_add_test(rej, rejections_of_unidentified_messages_get_distinct_ids);
    suite_add_tcase(s, rej);

    TCase *isolated = tcase_create("isolated-config");
    tcase_add_checked_fixture(isolated, setup_isolated, teardown);
    tcase_add_test(isolated, rejections_go_to_their_tenants_topic_sealed);
    suite_add_tcase(s, isolated);

    TCase *limits = tcase_create("provider-limits-config");
    tcase_add_checked_fixture(limits, setup_provider_limits, teardown);
    tcase_add_test(limits, request_beyond_itpm_otpm_or_a_daily_quota_is_rejected);
    tcase_add_test(limits, request_beyond_a_parent_scope_quota_is_rejected);
    suite_add_tcase(s, limits);

    TCase *restricted = tcase_create("restricted-config");
    tcase_add_checked_fixture(restricted, setup_restricted, teardown);
    tcase_add_test(restricted, route_outside_the_tenant_allow_list_is_rejected);
    tcase_add_test(restricted, paused_key_is_rejected);
    tcase_add_test(restricted, class_deadline_comes_from_the_config);
    tcase_add_test(restricted, payload_limit_comes_from_the_config);
    suite_add_tcase(s, restricted);
    return s;
}

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return 1;
    SRunner *sr = srunner_create(ingest_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
