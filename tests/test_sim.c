/* test_sim.c - behaviour of the provider simulator (ops/sim): its limiter, request decisions,
 * OpenAI bodies and headers, idempotent replays, config validation, and the real HTTP server.
 *
 * Everything but the last test runs through sim.h / limiter.h / idem.h with explicit times, so
 * nothing sleeps. Configs and bodies are written with single quotes for readability; Q() turns
 * them into double quotes, so no test text may contain a literal apostrophe.
 */
#include <check.h>
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../ops/sim/http.h"
#include "../ops/sim/idem.h"
#include "../ops/sim/limiter.h"
#include "../ops/sim/sim.h"

/* ---- Helpers ---------------------------------------------------------------------------- */

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

static sl_sim_t *sim_from(const char *config_text)
{
    const char *text = Q(config_text);
    char err[256];
    sl_sim_config_t *cfg = NULL;
    sl_err_t rc = sl_sim_config_parse(text, strlen(text), &cfg, err, sizeof err);
    ck_assert_msg(rc == SL_OK, "config rejected: %s", err);
    sl_sim_t *sim = NULL;
    ck_assert_int_eq(sl_sim_new(cfg, 0, &sim), SL_OK);
    return sim;
}

/* Returns the error text for a config that must be rejected. */
static const char *config_error(const char *config_text)
{
    static char err[256];
    const char *text = Q(config_text);
    sl_sim_config_t *cfg = NULL;
    sl_err_t rc = sl_sim_config_parse(text, strlen(text), &cfg, err, sizeof err);
    ck_assert_msg(rc != SL_OK, "config accepted: %s", text);
    ck_assert_ptr_null(cfg);
    return err;
}

static sl_sim_response_t *request(sl_sim_t *sim, const char *method, const char *path,
                                  const char *auth, const char *key, const char *body,
                                  int64_t now_ms)
{
    sl_sim_request_t req = {
        .method = method,
        .path = path,
        .authorization = auth,
        .idempotency_key = key,
        .body = body,
        .body_len = body != NULL ? strlen(body) : 0,
    };
    sl_sim_response_t *resp = NULL;
    ck_assert_int_eq(sl_sim_handle(sim, &req, now_ms, &resp), SL_OK);
    ck_assert_ptr_nonnull(resp);
    return resp;
}

/* POSTs a chat body (single-quoted) to deployment dep with a valid bearer token. */
static sl_sim_response_t *chat(sl_sim_t *sim, const char *dep, const char *body, const char *key,
                               int64_t now_ms)
{
    char path[128];
    snprintf(path, sizeof path, "/%s/v1/chat/completions", dep);
    char *copy = strdup(Q(body));
    sl_sim_response_t *resp = request(sim, "POST", path, "Bearer test", key, copy, now_ms);
    free(copy);
    return resp;
}

/* Sends a chat request, checks its status, finishes and frees the response. */
static void chat_expect(sl_sim_t *sim, const char *dep, const char *body, int64_t now_ms,
                        int status)
{
    sl_sim_response_t *resp = chat(sim, dep, body, NULL, now_ms);
    ck_assert_msg(sl_sim_response_status(resp) == status, "t=%lld: want %d, got %d: %s",
                  (long long)now_ms, status, sl_sim_response_status(resp),
                  sl_sim_response_body(resp, NULL));
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
}

static long long header_ll(const sl_sim_response_t *resp, const char *name)
{
    const char *v = sl_sim_response_header_get(resp, name);
    ck_assert_msg(v != NULL, "missing header %s", name);
    return atoll(v);
}

static json_t *body_json(const sl_sim_response_t *resp)
{
    size_t len = 0;
    const char *body = sl_sim_response_body(resp, &len);
    json_error_t jerr;
    json_t *js = json_loadb(body, len, 0, &jerr);
    ck_assert_msg(js != NULL, "body is not JSON (%s): %s", jerr.text, body);
    return js;
}

/* One deployment counter from GET /stats. */
static long long stat(sl_sim_t *sim, const char *dep, const char *field)
{
    sl_sim_response_t *resp = request(sim, "GET", "/stats", NULL, NULL, NULL, 0);
    ck_assert_int_eq(sl_sim_response_status(resp), 200);
    json_t *js = body_json(resp);
    json_t *v = json_object_get(json_object_get(json_object_get(js, "deployments"), dep), field);
    ck_assert_msg(json_is_integer(v), "stats %s.%s is not an integer", dep, field);
    long long n = json_integer_value(v);
    json_decref(js);
    sl_sim_response_free(resp);
    return n;
}

static int starts_with(const char *s, const char *prefix)
{
    return s != NULL && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A body whose prompt estimate is `tokens` (4 ASCII characters per token). */
static char *body_with_prompt(int tokens, int max_tokens)
{
    size_t chars = (size_t)tokens * 4;
    char *body = malloc(chars + 128);
    ck_assert_ptr_nonnull(body);
    int n = sprintf(body, "{'messages':[{'role':'user','content':'");
    memset(body + n, 'x', chars);
    sprintf(body + n + chars, "'}],'max_tokens':%d}", max_tokens);
    return body;
}

/* ---- Limiter ---------------------------------------------------------------------------- */

START_TEST(bucket_refills_continuously)
{
    sl_sim_limiter_t *lim = NULL;
    /* 600 RPM over a 60 s minute in 60 slices: capacity 10, refill 0.01 per ms. */
    ck_assert_int_eq(sl_sim_limiter_new(600, 0, 60, 60000, 0, &lim), SL_OK);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(sl_sim_limiter_admit(lim, 0, 0, NULL, NULL), 1);
    ck_assert_int_eq(sl_sim_limiter_remaining(lim, SL_SIM_DIM_REQUESTS, 0), 0);
    ck_assert_double_eq_tol(sl_sim_limiter_level(lim, SL_SIM_DIM_REQUESTS, 50), 0.5, 1e-9);
    ck_assert_double_eq_tol(sl_sim_limiter_level(lim, SL_SIM_DIM_REQUESTS, 250), 2.5, 1e-9);
    ck_assert_int_eq(sl_sim_limiter_remaining(lim, SL_SIM_DIM_REQUESTS, 250), 2);
    ck_assert_int_eq(sl_sim_limiter_reset_ms(lim, SL_SIM_DIM_REQUESTS, 250), 750);
    /* Refill is exact however time is split: 100 steps of 1 ms give exactly one request. */
    for (int t = 1; t <= 99; t++)
        ck_assert_int_eq(sl_sim_limiter_admit(lim, 0, t, NULL, NULL), 0);
    ck_assert_int_eq(sl_sim_limiter_admit(lim, 0, 100, NULL, NULL), 1);
    /* It never fills past capacity after a long idle. */
    ck_assert_double_eq_tol(sl_sim_limiter_level(lim, SL_SIM_DIM_REQUESTS, 10000000), 10.0, 1e-9);
    ck_assert_int_eq(sl_sim_limiter_reset_ms(lim, SL_SIM_DIM_REQUESTS, 10000000), 0);
    sl_sim_limiter_free(lim);
}
END_TEST

START_TEST(burst_is_limit_over_slices)
{
    sl_sim_limiter_t *lim = NULL;
    ck_assert_int_eq(sl_sim_limiter_new(600, 60000, 60, 60000, 0, &lim), SL_OK);
    ck_assert_double_eq_tol(sl_sim_limiter_capacity(lim, SL_SIM_DIM_REQUESTS), 10.0, 1e-9);
    ck_assert_double_eq_tol(sl_sim_limiter_capacity(lim, SL_SIM_DIM_TOKENS), 1000.0, 1e-9);
    ck_assert_int_eq(sl_sim_limiter_remaining(lim, SL_SIM_DIM_TOKENS, 0), 1000);
    sl_sim_limiter_free(lim);

    /* One slice: the whole minute is the burst. */
    ck_assert_int_eq(sl_sim_limiter_new(600, 60000, 1, 60000, 0, &lim), SL_OK);
    ck_assert_double_eq_tol(sl_sim_limiter_capacity(lim, SL_SIM_DIM_TOKENS), 60000.0, 1e-9);
    sl_sim_limiter_free(lim);

    /* 30 RPM in 60 slices would be half a request: the burst is at least one. */
    ck_assert_int_eq(sl_sim_limiter_new(30, 20, 60, 60000, 0, &lim), SL_OK);
    ck_assert_double_eq_tol(sl_sim_limiter_capacity(lim, SL_SIM_DIM_REQUESTS), 1.0, 1e-9);
    ck_assert_double_eq_tol(sl_sim_limiter_capacity(lim, SL_SIM_DIM_TOKENS), 1.0, 1e-9);
    ck_assert_int_eq(sl_sim_limiter_admit(lim, 1, 0, NULL, NULL), 1);
    ck_assert_int_eq(sl_sim_limiter_admit(lim, 0, 0, NULL, NULL), 0);
    sl_sim_limiter_free(lim);

    /* A shortened minute keeps the same shape: 600 RPM in 3 s is 10 per 50 ms slice. */
    ck_assert_int_eq(sl_sim_limiter_new(600, 0, 60, 3000, 0, &lim), SL_OK);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(sl_sim_limiter_admit(lim, 0, 0, NULL, NULL), 1);
    ck_assert_int_eq(sl_sim_limiter_admit(lim, 0, 4, NULL, NULL), 0);
    ck_assert_int_eq(sl_sim_limiter_admit(lim, 0, 5, NULL, NULL), 1);
    sl_sim_limiter_free(lim);
}
END_TEST

START_TEST(oversize_request_passes_only_on_full_bucket)
{
    sl_sim_limiter_t *lim = NULL;
    /* 6000 TPM in 60 slices: burst 100 tokens, refill 0.1 per ms. */
    ck_assert_int_eq(sl_sim_limiter_new(0, 6000, 60, 60000, 0, &lim), SL_OK);
    ck_assert_int_eq(sl_sim_limiter_admit(lim, 250, 0, NULL, NULL), 1);
    ck_assert_double_eq_tol(sl_sim_limiter_level(lim, SL_SIM_DIM_TOKENS, 0), -150.0, 1e-9);
    ck_assert_int_eq(sl_sim_limiter_remaining(lim, SL_SIM_DIM_TOKENS, 0), 0);

    /* The debt is paid first: one token needs 151 tokens of refill. */
    sl_sim_dim_t dim = SL_SIM_DIM_REQUESTS;
    int64_t wait_ms = 0;
    ck_assert_int_eq(sl_sim_limiter_admit(lim, 1, 0, &dim, &wait_ms), 0);
    ck_assert_int_eq(dim, SL_SIM_DIM_TOKENS);
    ck_assert_int_eq(wait_ms, 1510);

    /* At 99 of 100 the big request still waits for a full bucket. */
    ck_assert_int_eq(sl_sim_limiter_admit(lim, 250, 2490, &dim, &wait_ms), 0);
    ck_assert_int_eq(wait_ms, 10);
    ck_assert_int_eq(sl_sim_limiter_admit(lim, 250, 2500, NULL, NULL), 1);
    sl_sim_limiter_free(lim);
}
END_TEST

START_TEST(refusal_charges_nothing)
{
    sl_sim_limiter_t *lim = NULL;
    /* Burst: 10 requests, 100 tokens. */
    ck_assert_int_eq(sl_sim_limiter_new(600, 6000, 60, 60000, 0, &lim), SL_OK);
    ck_assert_int_eq(sl_sim_limiter_admit(lim, 95, 0, NULL, NULL), 1);
    sl_sim_dim_t dim = SL_SIM_DIM_REQUESTS;
    int64_t wait_ms = 0;
    ck_assert_int_eq(sl_sim_limiter_admit(lim, 50, 0, &dim, &wait_ms), 0);
    ck_assert_int_eq(dim, SL_SIM_DIM_TOKENS);
    ck_assert_int_eq(wait_ms, 450);
    /* The request bucket passed but was not charged either. */
    ck_assert_double_eq_tol(sl_sim_limiter_level(lim, SL_SIM_DIM_REQUESTS, 0), 9.0, 1e-9);
    ck_assert_double_eq_tol(sl_sim_limiter_level(lim, SL_SIM_DIM_TOKENS, 0), 5.0, 1e-9);

    /* Explicitly counting a refused request touches only the request bucket. */
    sl_sim_limiter_charge_request(lim, 0);
    ck_assert_double_eq_tol(sl_sim_limiter_level(lim, SL_SIM_DIM_REQUESTS, 0), 8.0, 1e-9);
    ck_assert_double_eq_tol(sl_sim_limiter_level(lim, SL_SIM_DIM_TOKENS, 0), 5.0, 1e-9);
    sl_sim_limiter_free(lim);
}
END_TEST

START_TEST(refusal_reports_the_dimension_that_needs_longest)
{
    sl_sim_limiter_t *lim = NULL;
    ck_assert_int_eq(sl_sim_limiter_new(60, 6000, 60, 60000, 0, &lim), SL_OK);
    ck_assert_int_eq(sl_sim_limiter_admit(lim, 100, 0, NULL, NULL), 1);
    sl_sim_dim_t dim = SL_SIM_DIM_TOKENS;
    int64_t wait_ms = 0;
    /* Requests need 1000 ms for one more; tokens 10 ms for one more. */
    ck_assert_int_eq(sl_sim_limiter_admit(lim, 1, 0, &dim, &wait_ms), 0);
    ck_assert_int_eq(dim, SL_SIM_DIM_REQUESTS);
    ck_assert_int_eq(wait_ms, 1000);
    /* Tokens need 1000 ms for all 100 back; requests 1000 ms too; at 1000 both pass. */
    ck_assert_int_eq(sl_sim_limiter_admit(lim, 100, 999, NULL, NULL), 0);
    ck_assert_int_eq(sl_sim_limiter_admit(lim, 100, 1000, NULL, NULL), 1);
    sl_sim_limiter_free(lim);
}
END_TEST

START_TEST(unlimited_dimension_never_refuses)
{
    sl_sim_limiter_t *lim = NULL;
    ck_assert_int_eq(sl_sim_limiter_new(0, 0, 60, 60000, 0, &lim), SL_OK);
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(sl_sim_limiter_admit(lim, 1000000, 0, NULL, NULL), 1);
    ck_assert_int_eq(sl_sim_limiter_limit(lim, SL_SIM_DIM_TOKENS), 0);
    sl_sim_limiter_free(lim);
    ck_assert_int_eq(sl_sim_limiter_new(-1, 0, 60, 60000, 0, &lim), SL_EINVAL);
    ck_assert_int_eq(sl_sim_limiter_new(1, 0, 0, 60000, 0, &lim), SL_EINVAL);
    ck_assert_ptr_null(lim);
}
END_TEST

/* ---- Charging ---------------------------------------------------------------------------- */

static const char *const TOKENS_CONFIG =
    "{'minute_ms':60000,'deployments':[{'name':'sim-a','model':'gpt-4o-mini','tpm':60000,"
    "'slices_per_minute':1,'ttft_ms':20,'ms_per_token':0.5,'output_min':10,'output_max':200}]}";

START_TEST(tpm_counts_max_of_max_tokens_and_prompt)
{
    sl_sim_t *sim = sim_from(TOKENS_CONFIG);
    /* Prompt 100 tokens (400 characters), max_tokens 10: charged 100. */
    char *body = body_with_prompt(100, 10);
    sl_sim_response_t *resp = chat(sim, "sim-a", body, NULL, 0);
    ck_assert_int_eq(sl_sim_response_status(resp), 200);
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-remaining-tokens"), 60000 - 100);
    json_t *js = body_json(resp);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(js, "usage"), "prompt_tokens")), 100);
    json_decref(js);
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
    free(body);

    /* Prompt 100, max_tokens 500: charged 500. */
    body = body_with_prompt(100, 500);
    resp = chat(sim, "sim-a", body, NULL, 0);
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-remaining-tokens"), 60000 - 100 - 500);
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
    free(body);
    ck_assert_int_eq(stat(sim, "sim-a", "tokens_charged"), 600);
    sl_sim_free(sim);
}
END_TEST

START_TEST(tpm_sum_mode)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','tpm':60000,'slices_per_minute':1,"
                             "'tpm_counting':'sum'}]}");
    char *body = body_with_prompt(100, 10);
    sl_sim_response_t *resp = chat(sim, "s", body, NULL, 0);
    ck_assert_int_eq(sl_sim_response_status(resp), 200);
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-remaining-tokens"), 60000 - 110);
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
    free(body);
    sl_sim_free(sim);
}
END_TEST

START_TEST(default_max_tokens_applies_when_absent)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','tpm':60000,'slices_per_minute':1,"
                             "'default_max_tokens':700}]}");
    sl_sim_response_t *resp =
        chat(sim, "s", "{'messages':[{'role':'user','content':'hi'}]}", NULL, 0);
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-remaining-tokens"), 60000 - 700);
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
    /* max_completion_tokens, the newer name, is honoured too. */
    resp = chat(sim, "s", "{'messages':[{'role':'user','content':'hi'}],'max_completion_tokens':5}",
                NULL, 0);
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-remaining-tokens"), 60000 - 705);
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
    sl_sim_free(sim);
}
END_TEST

START_TEST(prompt_estimate_counts_text_parts_and_characters)
{
    /* 6 + 4 characters over a string and a text part; the image part does not count. */
    const char *body = Q("{'messages':[{'role':'system','content':'abcdef'},{'role':'user',"
                         "'content':[{'type':'text','text':'ghij'},{'type':'image_url',"
                         "'image_url':{'url':'http://x/very/long/url'}}]}]}");
    ck_assert_int_eq(sl_sim_prompt_estimate(body, strlen(body)), 3);
    /* Characters, not bytes: four two-byte letters are one token. */
    const char *utf8 = "{\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\xa9\xc3\xa9\xc3\xa9"
                       "\xc3\xa9\"}]}";
    ck_assert_int_eq(sl_sim_prompt_estimate(utf8, strlen(utf8)), 1);
    const char *none = "{\"messages\":[{\"role\":\"assistant\",\"content\":null}]}";
    ck_assert_int_eq(sl_sim_prompt_estimate(none, strlen(none)), 0);
    ck_assert_int_eq(sl_sim_prompt_estimate("{", 1), -1);
}
END_TEST

START_TEST(request_too_large_is_refused_at_once)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','model':'gpt-4o','tpm':1000}]}");
    sl_sim_response_t *resp =
        chat(sim, "s", "{'messages':[{'role':'user','content':'x'}],'max_tokens':1001}", NULL, 0);
    ck_assert_int_eq(sl_sim_response_status(resp), 429);
    json_t *js = body_json(resp);
    json_t *err = json_object_get(js, "error");
    ck_assert_str_eq(json_string_value(json_object_get(err, "code")), "rate_limit_exceeded");
    ck_assert_str_eq(json_string_value(json_object_get(err, "type")), "tokens");
    const char *msg = json_string_value(json_object_get(err, "message"));
    ck_assert_msg(starts_with(msg, "Request too large for gpt-4o in organization org-sim on "
                                   "tokens per min (TPM): Limit 1000, Requested 1001. "),
                  "message: %s", msg);
    json_decref(js);
    /* Waiting cannot help: no retry-after, and nothing charged. */
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "retry-after"));
    ck_assert_str_eq(sl_sim_response_header_get(resp, "x-should-retry"), "false");
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-remaining-tokens"), 16);
    sl_sim_response_free(resp);
    ck_assert_int_eq(stat(sim, "s", "refused_tokens_dim"), 1);
    sl_sim_free(sim);
}
END_TEST

START_TEST(count_refused_charges_the_request_dimension)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','rpm':600,'tpm':600,"
                             "'count_refused':true}]}");
    /* Burst: 10 requests, 10 tokens. A 10-token request empties the token bucket. */
    chat_expect(sim, "s", "{'messages':[{'role':'user','content':'x'}],'max_tokens':10}", 0, 200);
    chat_expect(sim, "s", "{'messages':[{'role':'user','content':'x'}],'max_tokens':1}", 0, 429);
    chat_expect(sim, "s", "{'messages':[{'role':'user','content':'x'}],'max_tokens':1}", 0, 429);
    sl_sim_response_t *resp =
        chat(sim, "s", "{'messages':[{'role':'user','content':'x'}],'max_tokens':1}", NULL, 0);
    /* Three refusals and one admission have used four requests; tokens untouched by refusals. */
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-remaining-requests"), 6);
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-remaining-tokens"), 0);
    sl_sim_response_free(resp);
    sl_sim_free(sim);
}
END_TEST

/* ---- Responses --------------------------------------------------------------------------- */

START_TEST(go_duration_format)
{
    static const struct {
        int64_t ms;
        const char *text;
    } cases[] = {{0, "0s"},          {-5, "0s"},          {1, "1ms"},
                 {12, "12ms"},       {999, "999ms"},      {1000, "1s"},
                 {1500, "1.5s"},     {1250, "1.25s"},     {1001, "1.001s"},
                 {59999, "59.999s"}, {60000, "1m0s"},     {61500, "1m1.5s"},
                 {360000, "6m0s"},   {3600000, "1h0m0s"}, {3723004, "1h2m3.004s"}};
    char buf[32];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = sl_sim_go_duration(cases[i].ms, buf, sizeof buf);
        ck_assert_str_eq(buf, cases[i].text);
        ck_assert_uint_eq(n, strlen(cases[i].text));
    }
    /* Truncates like snprintf and reports the full length. */
    ck_assert_uint_eq(sl_sim_go_duration(360000, buf, 3), 4);
    ck_assert_str_eq(buf, "6m");
}
END_TEST

START_TEST(retry_after_is_time_until_room)
{
    /* 60 RPM, 6000 TPM in 60 slices: burst 1 request, 100 tokens. */
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','model':'gpt-4o-mini','rpm':6000,"
                             "'tpm':6000}]}");
    const char *big = "{'messages':[{'role':'user','content':'x'}],'max_tokens':90}";
    chat_expect(sim, "s", big, 0, 200);
    /* At 100 ms the bucket holds 10 + 10 tokens; 90 needs 70 more at 0.1 per ms = 700 ms. */
    sl_sim_response_t *resp = chat(sim, "s", big, NULL, 100);
    ck_assert_int_eq(sl_sim_response_status(resp), 429);
    ck_assert_int_eq(sl_sim_response_delay_ms(resp), 0);
    ck_assert_int_eq(header_ll(resp, "retry-after-ms"), 700);
    ck_assert_int_eq(header_ll(resp, "retry-after"), 1);
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-remaining-tokens"), 20);
    ck_assert_str_eq(sl_sim_response_header_get(resp, "x-ratelimit-reset-tokens"), "800ms");

    json_t *js = body_json(resp);
    json_t *err = json_object_get(js, "error");
    ck_assert_str_eq(json_string_value(json_object_get(err, "type")), "tokens");
    ck_assert_str_eq(json_string_value(json_object_get(err, "code")), "rate_limit_exceeded");
    ck_assert(json_is_null(json_object_get(err, "param")));
    ck_assert_str_eq(json_string_value(json_object_get(err, "message")),
                     "Rate limit reached for gpt-4o-mini in organization org-sim on tokens per "
                     "min (TPM): Limit 6000, Used 5980, Requested 90. Please try again in 700ms. "
                     "Visit https://platform.openai.com/account/rate-limits to learn more.");
    json_decref(js);
    sl_sim_response_free(resp);

    /* The wait is exact: one millisecond early is still refused. */
    chat_expect(sim, "s", big, 799, 429);
    chat_expect(sim, "s", big, 800, 200);
    sl_sim_free(sim);
}
END_TEST

START_TEST(requests_dimension_refusal_names_rpm)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','model':'m1','rpm':60}]}");
    chat_expect(sim, "s", "{'messages':[{'role':'user','content':'x'}]}", 0, 200);
    sl_sim_response_t *resp =
        chat(sim, "s", "{'messages':[{'role':'user','content':'x'}]}", NULL, 0);
    ck_assert_int_eq(sl_sim_response_status(resp), 429);
    ck_assert_int_eq(header_ll(resp, "retry-after-ms"), 1000);
    ck_assert_int_eq(header_ll(resp, "retry-after"), 1);
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "x-ratelimit-limit-tokens"));
    json_t *js = body_json(resp);
    json_t *err = json_object_get(js, "error");
    ck_assert_str_eq(json_string_value(json_object_get(err, "type")), "requests");
    ck_assert_msg(strstr(json_string_value(json_object_get(err, "message")),
                         "on requests per min (RPM): Limit 60, Used 60, Requested 1. Please try "
                         "again in 1s.") != NULL,
                  "%s", json_string_value(json_object_get(err, "message")));
    json_decref(js);
    sl_sim_response_free(resp);
    ck_assert_int_eq(stat(sim, "s", "refused_requests_dim"), 1);
    ck_assert_int_eq(stat(sim, "s", "refused"), 1);
    sl_sim_free(sim);
}
END_TEST

START_TEST(success_has_openai_body_headers_and_delay)
{
    sl_sim_t *sim = sim_from(TOKENS_CONFIG);
    const char *body = "{'messages':[{'role':'user','content':'hello'}],'max_tokens':1000}";
    sl_sim_response_t *resp = chat(sim, "sim-a", body, NULL, 0);
    ck_assert_int_eq(sl_sim_response_status(resp), 200);
    json_t *js = body_json(resp);
    ck_assert(strncmp(json_string_value(json_object_get(js, "id")), "chatcmpl-", 9) == 0);
    ck_assert_str_eq(json_string_value(json_object_get(js, "object")), "chat.completion");
    ck_assert_str_eq(json_string_value(json_object_get(js, "model")), "gpt-4o-mini");
    ck_assert(json_is_integer(json_object_get(js, "created")));
    json_t *choice = json_array_get(json_object_get(js, "choices"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(choice, "index")), 0);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(choice, "message"), "role")),
                     "assistant");
    ck_assert_str_eq(json_string_value(json_object_get(choice, "finish_reason")), "stop");
    json_t *usage = json_object_get(js, "usage");
    long long prompt = json_integer_value(json_object_get(usage, "prompt_tokens"));
    long long completion = json_integer_value(json_object_get(usage, "completion_tokens"));
    ck_assert_int_eq(prompt, 2);
    ck_assert(completion >= 10 && completion <= 200);
    ck_assert_int_eq(json_integer_value(json_object_get(usage, "total_tokens")),
                     prompt + completion);
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(usage, "prompt_tokens_details"), "cached_tokens")),
                     0);
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(usage, "completion_tokens_details"), "reasoning_tokens")),
                     0);
    json_decref(js);

    /* Held for ttft + ms_per_token * completion tokens. */
    ck_assert_int_eq(sl_sim_response_delay_ms(resp), llround(20 + 0.5 * (double)completion));
    ck_assert_int_eq(header_ll(resp, "openai-processing-ms"), sl_sim_response_delay_ms(resp));
    ck_assert(strncmp(sl_sim_response_header_get(resp, "x-request-id"), "req_", 4) == 0);
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-limit-tokens"), 60000);
    ck_assert_str_eq(sl_sim_response_header_get(resp, "x-ratelimit-reset-tokens"), "1s");
    /* Unlimited requests: no request headers at all. */
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "x-ratelimit-limit-requests"));
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "x-ratelimit-remaining-requests"));
    ck_assert_str_eq(sl_sim_response_header_get(resp, "content-type"), "application/json");
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
    sl_sim_free(sim);
}
END_TEST

START_TEST(completion_length_is_deterministic_and_capped)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','output_min':10,'output_max':500}]}");
    const char *body = "{'messages':[{'role':'user','content':'same question'}]}";
    long long first = -1;
    for (int i = 0; i < 3; i++) {
        sl_sim_response_t *resp = chat(sim, "s", body, NULL, i);
        json_t *js = body_json(resp);
        long long n =
            json_integer_value(json_object_get(json_object_get(js, "usage"), "completion_tokens"));
        if (first < 0)
            first = n;
        ck_assert_int_eq(n, first);
        json_decref(js);
        sl_sim_finish(sim, resp);
        sl_sim_response_free(resp);
    }
    /* Below output_min, max_tokens wins and the completion stops for length. */
    sl_sim_response_t *resp =
        chat(sim, "s", "{'messages':[{'role':'user','content':'x'}],'max_tokens':5}", NULL, 0);
    json_t *js = body_json(resp);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(js, "usage"), "completion_tokens")), 5);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(js, "choices"), 0), "finish_reason")),
                     "length");
    json_decref(js);
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
    sl_sim_free(sim);
}
END_TEST

/* ---- Idempotency ------------------------------------------------------------------------- */

START_TEST(idempotent_replay_is_not_charged)
{
    /* Burst: 1 request. */
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','rpm':60,'tpm':60000}]}");
    const char *body = "{'messages':[{'role':'user','content':'x'}],'max_tokens':50}";
    sl_sim_response_t *first = chat(sim, "s", body, "job-1", 0);
    ck_assert_int_eq(sl_sim_response_status(first), 200);
    sl_sim_finish(sim, first);

    /* The bucket is empty, yet the retry gets the same answer, at once, uncharged. */
    sl_sim_response_t *again = chat(sim, "s", body, "job-1", 10);
    ck_assert_int_eq(sl_sim_response_status(again), 200);
    ck_assert_str_eq(sl_sim_response_body(again, NULL), sl_sim_response_body(first, NULL));
    ck_assert_int_eq(sl_sim_response_delay_ms(again), 0);
    /* 1000 tokens of burst, 50 charged once, 10 ms of refill at 1 token per ms. */
    ck_assert_int_eq(header_ll(again, "x-ratelimit-remaining-tokens"), 1000 - 50 + 10);
    sl_sim_finish(sim, again);
    sl_sim_response_free(again);
    sl_sim_response_free(first);

    /* Another key is a new call and is refused. */
    chat_expect(sim, "s", body, 10, 429);
    ck_assert_int_eq(stat(sim, "s", "admitted"), 1);
    ck_assert_int_eq(stat(sim, "s", "replayed"), 1);
    ck_assert_int_eq(stat(sim, "s", "tokens_charged"), 50);
    sl_sim_free(sim);
}
END_TEST

START_TEST(refused_call_is_not_remembered)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','rpm':60}]}");
    const char *body = "{'messages':[{'role':'user','content':'x'}]}";
    chat_expect(sim, "s", body, 0, 200);
    sl_sim_response_t *resp = chat(sim, "s", body, "job-2", 10);
    ck_assert_int_eq(sl_sim_response_status(resp), 429);
    sl_sim_response_free(resp);
    /* A 429 was never charged, so its retry is decided afresh. */
    resp = chat(sim, "s", body, "job-2", 1000);
    ck_assert_int_eq(sl_sim_response_status(resp), 200);
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
    ck_assert_int_eq(stat(sim, "s", "replayed"), 0);
    ck_assert_int_eq(stat(sim, "s", "admitted"), 2);
    sl_sim_free(sim);
}
END_TEST

START_TEST(idempotency_table_is_bounded)
{
    sl_sim_idem_t *idem = NULL;
    ck_assert_int_eq(sl_sim_idem_new(3, sizeof(int), &idem), SL_OK);
    char key[16];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "k%d", i);
        ck_assert_int_eq(sl_sim_idem_put(idem, key, &i), SL_OK);
        ck_assert_uint_le(sl_sim_idem_count(idem), 3);
    }
    /* The oldest went first: k7..k9 remain. */
    ck_assert_ptr_null(sl_sim_idem_get(idem, "k6"));
    for (int i = 7; i < 10; i++) {
        snprintf(key, sizeof key, "k%d", i);
        const int *v = sl_sim_idem_get(idem, key);
        ck_assert_ptr_nonnull(v);
        ck_assert_int_eq(*v, i);
    }
    sl_sim_idem_free(idem);

    /* Many keys through a bigger table, across several growths and full cycles. */
    ck_assert_int_eq(sl_sim_idem_new(1000, sizeof(int), &idem), SL_OK);
    for (int i = 0; i < 5500; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        ck_assert_int_eq(sl_sim_idem_put(idem, key, &i), SL_OK);
    }
    ck_assert_uint_eq(sl_sim_idem_count(idem), 1000);
    ck_assert_ptr_null(sl_sim_idem_get(idem, "key-4499"));
    ck_assert_int_eq(*(const int *)sl_sim_idem_get(idem, "key-4500"), 4500);
    ck_assert_int_eq(*(const int *)sl_sim_idem_get(idem, "key-5499"), 5499);
    sl_sim_idem_free(idem);
}
END_TEST

/* ---- Errors and bookkeeping -------------------------------------------------------------- */

static void expect_error(sl_sim_response_t *resp, int status, const char *type)
{
    ck_assert_msg(sl_sim_response_status(resp) == status, "want %d, got %d: %s", status,
                  sl_sim_response_status(resp), sl_sim_response_body(resp, NULL));
    json_t *js = body_json(resp);
    json_t *err = json_object_get(js, "error");
    ck_assert(json_is_string(json_object_get(err, "message")));
    ck_assert_str_eq(json_string_value(json_object_get(err, "type")), type);
    ck_assert_ptr_nonnull(json_object_get(err, "param"));
    ck_assert_ptr_nonnull(json_object_get(err, "code"));
    json_decref(js);
    ck_assert_int_eq(sl_sim_response_delay_ms(resp), 0);
    sl_sim_response_free(resp);
}

START_TEST(bad_requests_get_openai_errors_and_are_not_charged)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','rpm':60,'api_key':'k1'}]}");
    const char *path = "/s/v1/chat/completions";
    const char *ok = Q("{'messages':[{'role':'user','content':'x'}]}");
    char *ok_body = strdup(ok);
    expect_error(request(sim, "POST", path, NULL, NULL, ok_body, 0), 401, "invalid_request_error");
    expect_error(request(sim, "POST", path, "Bearer k2", NULL, ok_body, 0), 401,
                 "invalid_request_error");
    expect_error(request(sim, "POST", path, "Basic k1", NULL, ok_body, 0), 401,
                 "invalid_request_error");
    expect_error(request(sim, "POST", path, "Bearer k1", NULL, "{not json", 0), 400,
                 "invalid_request_error");
    expect_error(request(sim, "POST", path, "Bearer k1", NULL, "{}", 0), 400,
                 "invalid_request_error");
    expect_error(request(sim, "POST", path, "Bearer k1", NULL, "{\"messages\":[]}", 0), 400,
                 "invalid_request_error");
    expect_error(request(sim, "POST", path, "Bearer k1", NULL,
                         "{\"messages\":[{\"content\":\"x\"}],\"max_tokens\":0}", 0),
                 400, "invalid_request_error");
    expect_error(request(sim, "GET", path, "Bearer k1", NULL, NULL, 0), 405,
                 "invalid_request_error");
    expect_error(request(sim, "POST", "/nope/v1/chat/completions", "Bearer k1", NULL, ok_body, 0),
                 404, "invalid_request_error");
    expect_error(request(sim, "POST", "/s/v1/embeddings", "Bearer k1", NULL, ok_body, 0), 404,
                 "invalid_request_error");
    sl_sim_request_t big = {
        .method = "POST", .path = path, .authorization = "Bearer k1", .body_too_large = 1};
    sl_sim_response_t *resp = NULL;
    ck_assert_int_eq(sl_sim_handle(sim, &big, 0, &resp), SL_OK);
    expect_error(resp, 413, "invalid_request_error");
    ck_assert_int_eq(stat(sim, "s", "errors"), 9);

    /* None of that used the one request of the burst. */
    resp = request(sim, "POST", path, "Bearer k1", NULL, ok_body, 0);
    ck_assert_int_eq(sl_sim_response_status(resp), 200);
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
    free(ok_body);
    sl_sim_free(sim);
}
END_TEST

START_TEST(any_bearer_token_passes_without_api_key)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s'}]}");
    const char *body = "{\"messages\":[{\"content\":\"x\"}]}";
    sl_sim_response_t *resp =
        request(sim, "POST", "/s/v1/chat/completions", "Bearer anything", NULL, body, 0);
    ck_assert_int_eq(sl_sim_response_status(resp), 200);
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
    expect_error(request(sim, "POST", "/s/v1/chat/completions", "Bearer ", NULL, body, 0), 401,
                 "invalid_request_error");
    sl_sim_free(sim);
}
END_TEST

START_TEST(pending_responses_are_capped)
{
    sl_sim_t *sim = sim_from("{'max_pending':2,'deployments':[{'name':'s'}]}");
    const char *body = "{'messages':[{'role':'user','content':'x'}]}";
    sl_sim_response_t *a = chat(sim, "s", body, NULL, 0);
    sl_sim_response_t *b = chat(sim, "s", body, NULL, 0);
    ck_assert_int_eq(stat(sim, "s", "in_flight"), 2);
    sl_sim_response_t *c = chat(sim, "s", body, NULL, 0);
    expect_error(c, 503, "server_error");
    sl_sim_finish(sim, a);
    sl_sim_finish(sim, a); /* twice is harmless */
    ck_assert_int_eq(stat(sim, "s", "in_flight"), 1);
    chat_expect(sim, "s", body, 0, 200);
    sl_sim_finish(sim, b);
    ck_assert_int_eq(stat(sim, "s", "in_flight"), 0);
    sl_sim_response_free(a);
    sl_sim_response_free(b);
    sl_sim_free(sim);
}
END_TEST

START_TEST(stats_report_and_reset_counters_not_buckets)
{
    /* 20 RPM over a 3 s minute: a burst of 1 request, refilled every 150 ms. */
    sl_sim_t *sim = sim_from("{'minute_ms':3000,'deployments':[{'name':'a','model':'m','rpm':20,"
                             "'tpm':1000},{'name':'b'}]}");
    const char *body = "{'messages':[{'role':'user','content':'12345678'}],'max_tokens':7}";
    chat_expect(sim, "a", body, 100, 200);
    chat_expect(sim, "a", body, 250, 200);

    sl_sim_response_t *resp = request(sim, "GET", "/stats", NULL, NULL, NULL, 300);
    json_t *js = body_json(resp);
    ck_assert_int_eq(json_integer_value(json_object_get(js, "now_ms")), 300);
    ck_assert_int_eq(json_integer_value(json_object_get(js, "minute_ms")), 3000);
    json_t *a = json_object_get(json_object_get(js, "deployments"), "a");
    static const char *const fields[] = {"rpm",
                                         "tpm",
                                         "admitted",
                                         "refused",
                                         "refused_requests_dim",
                                         "refused_tokens_dim",
                                         "replayed",
                                         "errors",
                                         "tokens_charged",
                                         "prompt_tokens",
                                         "completion_tokens",
                                         "in_flight",
                                         "first_admit_ms",
                                         "last_admit_ms"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        ck_assert_msg(json_is_integer(json_object_get(a, fields[i])), "field %s", fields[i]);
    ck_assert_str_eq(json_string_value(json_object_get(a, "model")), "m");
    ck_assert_int_eq(json_integer_value(json_object_get(a, "admitted")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "tokens_charged")), 14);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "prompt_tokens")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "completion_tokens")), 14);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "first_admit_ms")), 100);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "last_admit_ms")), 250);
    json_t *b = json_object_get(json_object_get(js, "deployments"), "b");
    ck_assert(json_is_null(json_object_get(b, "first_admit_ms")));
    ck_assert(json_is_null(json_object_get(b, "last_admit_ms")));
    ck_assert_int_eq(json_integer_value(json_object_get(b, "rpm")), 0);
    json_decref(js);
    sl_sim_response_free(resp);

    resp = request(sim, "POST", "/stats/reset", NULL, NULL, NULL, 300);
    ck_assert_int_eq(sl_sim_response_status(resp), 200);
    sl_sim_response_free(resp);
    expect_error(request(sim, "GET", "/stats/reset", NULL, NULL, NULL, 300), 405,
                 "invalid_request_error");
    ck_assert_int_eq(stat(sim, "a", "admitted"), 0);
    ck_assert_int_eq(stat(sim, "a", "tokens_charged"), 0);
    ck_assert_int_eq(stat(sim, "a", "errors"), 0);

    /* The buckets kept their levels: the request bucket, emptied at 250 ms, is refused until
     * 400 ms. */
    chat_expect(sim, "a", body, 300, 429);
    chat_expect(sim, "a", body, 400, 200);

    resp = request(sim, "GET", "/healthz", NULL, NULL, NULL, 0);
    ck_assert_int_eq(sl_sim_response_status(resp), 200);
    ck_assert_str_eq(sl_sim_response_body(resp, NULL), "ok");
    sl_sim_response_free(resp);
    sl_sim_free(sim);
}
END_TEST

/* ---- Anthropic-style limits, cache reads and the daily quota ------------------------------ */

/* usage.prompt_tokens_details.cached_tokens of a 200. */
static long long cached_tokens_of(const sl_sim_response_t *resp)
{
    json_t *js = body_json(resp);
    json_t *details = json_object_get(json_object_get(js, "usage"), "prompt_tokens_details");
    json_t *cached = json_object_get(details, "cached_tokens");
    ck_assert_msg(json_is_integer(cached), "no cached_tokens: %s",
                  sl_sim_response_body(resp, NULL));
    long long n = json_integer_value(cached);
    json_decref(js);
    return n;
}

/* Checks that resp is a 429 of error type `type` whose message contains `text`. */
static void expect_rate_limited(const sl_sim_response_t *resp, const char *type, const char *text)
{
    ck_assert_msg(sl_sim_response_status(resp) == 429, "want 429, got %d: %s",
                  sl_sim_response_status(resp), sl_sim_response_body(resp, NULL));
    json_t *js = body_json(resp);
    json_t *err = json_object_get(js, "error");
    ck_assert_str_eq(json_string_value(json_object_get(err, "type")), type);
    ck_assert_str_eq(json_string_value(json_object_get(err, "code")), "rate_limit_exceeded");
    const char *msg = json_string_value(json_object_get(err, "message"));
    ck_assert_msg(msg != NULL && strstr(msg, text) != NULL, "message: %s", msg);
    json_decref(js);
}

START_TEST(itpm_excludes_cache_reads)
{
    /* ITPM burst 100 tokens; "hit" reads half of every prompt from the cache, "miss" none. */
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'hit','model':'claude','itpm':100,"
                             "'slices_per_minute':1,'cache_hit_share':1,'cache_read_fraction':0.5},"
                             "{'name':'miss','model':'claude','itpm':100,'slices_per_minute':1}]}");
    char *body = body_with_prompt(80, 10);

    /* Charged 40 of 80 each time, so a second 80-token prompt still fits in the 100. */
    for (int i = 0; i < 2; i++) {
        sl_sim_response_t *resp = chat(sim, "hit", body, NULL, 0);
        ck_assert_int_eq(sl_sim_response_status(resp), 200);
        ck_assert_int_eq(cached_tokens_of(resp), 40);
        sl_sim_finish(sim, resp);
        sl_sim_response_free(resp);
    }
    ck_assert_int_eq(stat(sim, "hit", "input_tokens_charged"), 80);
    ck_assert_int_eq(stat(sim, "hit", "cached_tokens"), 80);
    ck_assert_int_eq(stat(sim, "hit", "prompt_tokens"), 160);

    /* Without cache reads the same second request exceeds ITPM: 60 more tokens at 100 per
     * 60000 ms is 36 s. */
    sl_sim_response_t *resp = chat(sim, "miss", body, NULL, 0);
    ck_assert_int_eq(sl_sim_response_status(resp), 200);
    ck_assert_int_eq(cached_tokens_of(resp), 0);
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
    resp = chat(sim, "miss", body, NULL, 0);
    expect_rate_limited(resp, "tokens",
                        "Rate limit reached for claude in organization org-sim on input tokens "
                        "per min (ITPM): Limit 100, Used 80, Requested 80. Please try again in "
                        "36s.");
    ck_assert_int_eq(header_ll(resp, "retry-after-ms"), 36000);
    ck_assert_int_eq(header_ll(resp, "retry-after"), 36);
    sl_sim_response_free(resp);
    ck_assert_int_eq(stat(sim, "miss", "refused_itpm_dim"), 1);
    ck_assert_int_eq(stat(sim, "miss", "input_tokens_charged"), 80);
    free(body);
    sl_sim_free(sim);
}
END_TEST

START_TEST(cache_hits_are_deterministic_and_follow_the_share)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','cache_hit_share':0.25,"
                             "'cache_read_fraction':0.5}]}");
    char body[512];
    int hits = 0;
    for (int i = 0; i < 400; i++) {
        /* Prompts of 101 tokens: a hit reads floor(50.5) = 50 of them. */
        snprintf(body, sizeof body, "{'messages':[{'role':'user','content':'%03d%0401d'}]}", i, 0);
        long long first = -1;
        for (int again = 0; again < 2; again++) {
            sl_sim_response_t *resp = chat(sim, "s", body, NULL, 0);
            long long cached = cached_tokens_of(resp);
            ck_assert_msg(cached == 0 || cached == 50, "cached %lld", cached);
            if (first < 0)
                first = cached;
            ck_assert_int_eq(cached, first);
            sl_sim_finish(sim, resp);
            sl_sim_response_free(resp);
        }
        hits += first > 0;
    }
    /* A quarter of 400 is 100; a fair draw stays well inside 60..140. */
    ck_assert_msg(hits > 60 && hits < 140, "%d hits", hits);
    sl_sim_free(sim);
}
END_TEST

START_TEST(otpm_generated_charges_completion_tokens_and_refuses_when_empty)
{
    /* Every completion is 100 tokens; OTPM burst 250. max_tokens (1000) does not matter. */
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','model':'claude','otpm':250,"
                             "'slices_per_minute':1,'output_min':100,'output_max':100}]}");
    const char *body = "{'messages':[{'role':'user','content':'x'}],'max_tokens':1000}";
    chat_expect(sim, "s", body, 0, 200);
    chat_expect(sim, "s", body, 0, 200);
    ck_assert_int_eq(stat(sim, "s", "output_tokens_charged"), 200);

    /* 50 left, 100 needed: 50 more at 250 per 60000 ms is 12 s. */
    sl_sim_response_t *resp = chat(sim, "s", body, NULL, 0);
    expect_rate_limited(resp, "tokens",
                        "on output tokens per min (OTPM): Limit 250, Used 200, Requested 100. "
                        "Please try again in 12s.");
    ck_assert_int_eq(header_ll(resp, "retry-after-ms"), 12000);
    sl_sim_response_free(resp);
    chat_expect(sim, "s", body, 11999, 429);
    chat_expect(sim, "s", body, 12000, 200);
    ck_assert_int_eq(stat(sim, "s", "refused_otpm_dim"), 2);
    ck_assert_int_eq(stat(sim, "s", "output_tokens_charged"), 300);
    sl_sim_free(sim);
}
END_TEST

START_TEST(otpm_max_tokens_refunds_the_unused_part)
{
    /* OTPM burst 1000, charged max_tokens up front; every completion is 100 tokens. */
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','otpm':1000,'slices_per_minute':1,"
                             "'otpm_counting':'max_tokens','output_min':100,'output_max':100}]}");
    sl_sim_response_t *first =
        chat(sim, "s", "{'messages':[{'role':'user','content':'x'}],'max_tokens':400}", NULL, 0);
    ck_assert_int_eq(sl_sim_response_status(first), 200);
    ck_assert_int_eq(stat(sim, "s", "output_tokens_charged"), 400);

    /* While the first is in flight its 400 are held: 700 more do not fit in the 600 left. */
    const char *big = "{'messages':[{'role':'user','content':'y'}],'max_tokens':700}";
    chat_expect(sim, "s", big, 0, 429);

    /* Sending it gives back the 300 it did not generate, so now they do. */
    sl_sim_finish(sim, first);
    sl_sim_finish(sim, first); /* only once */
    sl_sim_response_free(first);
    ck_assert_int_eq(stat(sim, "s", "output_tokens_charged"), 100);
    sl_sim_response_t *second = chat(sim, "s", big, NULL, 0);
    ck_assert_int_eq(sl_sim_response_status(second), 200);
    ck_assert_int_eq(stat(sim, "s", "output_tokens_charged"), 800);
    sl_sim_finish(sim, second);
    sl_sim_response_free(second);
    ck_assert_int_eq(stat(sim, "s", "output_tokens_charged"), 200);

    /* 1000 - 100 - 100 = 800 held now: exactly room for 800 more, not 801. */
    chat_expect(sim, "s", "{'messages':[{'role':'user','content':'z'}],'max_tokens':801}", 0, 429);
    chat_expect(sim, "s", "{'messages':[{'role':'user','content':'z'}],'max_tokens':800}", 0, 200);
    sl_sim_free(sim);
}
END_TEST

START_TEST(token_costs_above_a_whole_limit_are_too_large)
{
    sl_sim_t *sim =
        sim_from("{'deployments':[{'name':'i','model':'claude','itpm':100},"
                 "{'name':'o','model':'claude','otpm':100,'otpm_counting':'max_tokens'}]}");
    char *body = body_with_prompt(101, 10);
    sl_sim_response_t *resp = chat(sim, "i", body, NULL, 0);
    expect_rate_limited(resp, "tokens",
                        "Request too large for claude in organization org-sim on input tokens "
                        "per min (ITPM): Limit 100, Requested 101.");
    ck_assert_str_eq(sl_sim_response_header_get(resp, "x-should-retry"), "false");
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "retry-after"));
    sl_sim_response_free(resp);
    free(body);
    resp = chat(sim, "o", "{'messages':[{'role':'user','content':'x'}],'max_tokens':101}", NULL, 0);
    expect_rate_limited(resp, "tokens",
                        "on output tokens per min (OTPM): Limit 100, Requested 101");
    sl_sim_response_free(resp);
    ck_assert_int_eq(stat(sim, "i", "refused_itpm_dim"), 1);
    ck_assert_int_eq(stat(sim, "o", "refused_otpm_dim"), 1);
    ck_assert_int_eq(stat(sim, "o", "output_tokens_charged"), 0);
    sl_sim_free(sim);
}
END_TEST

START_TEST(rpd_refuses_past_the_quota_until_the_next_day_window)
{
    /* Three requests per 10 s "day"; the windows start when the simulator does. */
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','model':'claude','rpd':3,"
                             "'day_ms':10000}]}");
    const char *body = "{'messages':[{'role':'user','content':'x'}]}";
    for (int t = 0; t < 3; t++)
        chat_expect(sim, "s", body, t, 200);
    sl_sim_response_t *resp = chat(sim, "s", body, NULL, 1000);
    expect_rate_limited(resp, "requests",
                        "Rate limit reached for claude in organization org-sim on requests per "
                        "day (RPD): Limit 3, Used 3, Requested 1. Please try again in 9s. ");
    ck_assert_int_eq(header_ll(resp, "retry-after-ms"), 9000);
    ck_assert_int_eq(header_ll(resp, "retry-after"), 9);
    /* The reset is near, so the SDK may retry on its own. */
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "x-should-retry"));
    sl_sim_response_free(resp);

    resp = chat(sim, "s", body, NULL, 9999);
    ck_assert_int_eq(header_ll(resp, "retry-after-ms"), 1);
    sl_sim_response_free(resp);
    ck_assert_int_eq(stat(sim, "s", "refused_rpd_dim"), 2);

    /* A new window: three more, then refused until 20000. */
    for (int t = 10000; t < 10003; t++)
        chat_expect(sim, "s", body, t, 200);
    resp = chat(sim, "s", body, NULL, 15000);
    ck_assert_int_eq(header_ll(resp, "retry-after-ms"), 5000);
    sl_sim_response_free(resp);
    ck_assert_int_eq(stat(sim, "s", "admitted"), 6);
    sl_sim_free(sim);

    /* A real day: the reset is hours away, so the refusal says not to retry. */
    sim = sim_from("{'deployments':[{'name':'s','rpd':1}]}");
    chat_expect(sim, "s", body, 0, 200);
    resp = chat(sim, "s", body, NULL, 0);
    expect_rate_limited(resp, "requests",
                        "Limit 1, Used 1, Requested 1. Please try again in "
                        "24h0m0s.");
    ck_assert_int_eq(header_ll(resp, "retry-after-ms"), 86400000);
    ck_assert_int_eq(header_ll(resp, "retry-after"), 86400);
    ck_assert_str_eq(sl_sim_response_header_get(resp, "x-should-retry"), "false");
    sl_sim_response_free(resp);
    sl_sim_free(sim);
}
END_TEST

START_TEST(limits_are_all_or_nothing)
{
    /* Bursts: 10 requests, 100 tokens, 100 input tokens, 50 output tokens; 5 requests a day.
     * Every completion is 40 tokens (unless max_tokens is lower). */
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','rpm':600,'tpm':6000,'itpm':6000,"
                             "'otpm':3000,'rpd':5,'output_min':40,'output_max':40,"
                             "'headers':'anthropic'}]}");
    /* Prompt 10 tokens, max_tokens 50: TPM 50, ITPM 10, OTPM 40. */
    char *body = body_with_prompt(10, 50);
    chat_expect(sim, "s", body, 0, 200);

    /* OTPM has 10 left and refuses the same again; nothing else is charged. */
    sl_sim_response_t *resp = chat(sim, "s", body, NULL, 0);
    expect_rate_limited(resp, "tokens",
                        "on output tokens per min (OTPM): Limit 3000, Used 2990, "
                        "Requested 40. Please try again in 600ms.");
    ck_assert_int_eq(header_ll(resp, "anthropic-ratelimit-requests-remaining"), 9);
    ck_assert_int_eq(header_ll(resp, "anthropic-ratelimit-input-tokens-remaining"), 90);
    ck_assert_int_eq(header_ll(resp, "anthropic-ratelimit-output-tokens-remaining"), 10);
    sl_sim_response_free(resp);
    ck_assert_int_eq(stat(sim, "s", "requests_today"), 1);
    ck_assert_int_eq(stat(sim, "s", "tokens_charged"), 50);
    ck_assert_int_eq(stat(sim, "s", "input_tokens_charged"), 10);

    /* Had the refusal charged its 50 TPM, this one (TPM 10, OTPM 5) would not fit. */
    free(body);
    body = body_with_prompt(10, 5);
    chat_expect(sim, "s", body, 0, 200);
    ck_assert_int_eq(stat(sim, "s", "requests_today"), 2);
    ck_assert_int_eq(stat(sim, "s", "refused"), 1);
    free(body);
    sl_sim_free(sim);
}
END_TEST

START_TEST(anthropic_headers_replace_openai_ones)
{
    time_t before = time(NULL);
    /* Bursts of a whole minute: 2 requests, 100000 input and 1500 output tokens. */
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','rpm':2,'tpm':1000000,'itpm':100000,"
                             "'otpm':1500,'slices_per_minute':1,'output_min':600,'output_max':600,"
                             "'headers':'anthropic'}]}");
    time_t after = time(NULL);
    char *body = body_with_prompt(1234, 1000);
    sl_sim_response_t *resp = chat(sim, "s", body, NULL, 0);
    ck_assert_int_eq(sl_sim_response_status(resp), 200);
    ck_assert_int_eq(header_ll(resp, "anthropic-ratelimit-requests-limit"), 2);
    ck_assert_int_eq(header_ll(resp, "anthropic-ratelimit-requests-remaining"), 1);
    ck_assert_int_eq(header_ll(resp, "anthropic-ratelimit-input-tokens-limit"), 100000);
    /* 98766 left is reported as 98000; below 1000 the count is exact. */
    ck_assert_int_eq(header_ll(resp, "anthropic-ratelimit-input-tokens-remaining"), 98000);
    ck_assert_int_eq(header_ll(resp, "anthropic-ratelimit-output-tokens-limit"), 1500);
    ck_assert_int_eq(header_ll(resp, "anthropic-ratelimit-output-tokens-remaining"), 900);

    /* The request bucket is full again in 30 s (one of 2 per minute): an RFC 3339 UTC time. */
    const char *reset = sl_sim_response_header_get(resp, "anthropic-ratelimit-requests-reset");
    ck_assert_ptr_nonnull(reset);
    ck_assert_uint_eq(strlen(reset), strlen("2026-12-02T12:40:59Z"));
    struct tm tm = {0};
    const char *end = strptime(reset, "%Y-%m-%dT%H:%M:%SZ", &tm);
    ck_assert_msg(end != NULL && *end == '\0', "reset %s", reset);
    time_t reset_s = timegm(&tm);
    ck_assert_msg(reset_s >= before + 30 && reset_s <= after + 31, "reset %s", reset);
    ck_assert_ptr_nonnull(
        sl_sim_response_header_get(resp, "anthropic-ratelimit-input-tokens-reset"));
    ck_assert_ptr_nonnull(
        sl_sim_response_header_get(resp, "anthropic-ratelimit-output-tokens-reset"));
    for (size_t i = 0; i < sl_sim_response_header_count(resp); i++) {
        const char *value;
        const char *name = sl_sim_response_header(resp, i, &value);
        ck_assert_msg(!starts_with(name, "x-ratelimit-"), "%s: %s", name, value);
    }
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
    free(body);

    /* A 429 carries retry-after in seconds, and no OpenAI headers. */
    const char *small = "{'messages':[{'role':'user','content':'x'}],'max_tokens':1}";
    chat_expect(sim, "s", small, 0, 200);
    resp = chat(sim, "s", small, NULL, 0);
    expect_rate_limited(resp, "requests", "on requests per min (RPM)");
    ck_assert_int_eq(header_ll(resp, "retry-after"), 30);
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "retry-after-ms"));
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "x-ratelimit-remaining-requests"));
    ck_assert_int_eq(header_ll(resp, "anthropic-ratelimit-requests-remaining"), 0);
    sl_sim_response_free(resp);

    /* TPM has no Anthropic header. */
    resp = chat(sim, "s", small, NULL, 0);
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "anthropic-ratelimit-tokens-limit"));
    sl_sim_response_free(resp);
    sl_sim_free(sim);
}
END_TEST

START_TEST(rfc3339_rounds_up_to_whole_seconds)
{
    char buf[32];
    ck_assert_uint_eq(sl_sim_rfc3339(1796215259000LL, buf, sizeof buf), 20);
    ck_assert_str_eq(buf, "2026-12-02T12:40:59Z");
    sl_sim_rfc3339(1796215258001LL, buf, sizeof buf);
    ck_assert_str_eq(buf, "2026-12-02T12:40:59Z");
    sl_sim_rfc3339(0, buf, sizeof buf);
    ck_assert_str_eq(buf, "1970-01-01T00:00:00Z");
}
END_TEST

START_TEST(stats_count_new_limits_and_reset_keeps_the_day)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','rpm':600,'itpm':60,'otpm':6000,"
                             "'rpd':4,'otpm_counting':'max_tokens','output_min':5,"
                             "'output_max':5,'cache_hit_share':1,'cache_read_fraction':0.5}]}");
    /* Bursts: 10 requests, 1 input token (60 / 60 slices, one more per second), 100 output
     * tokens. This prompt is 2 tokens, 1 of them cached: ITPM 1, OTPM 60 up front. */
    const char *body = "{'messages':[{'role':'user','content':'12345678'}],'max_tokens':60}";
    sl_sim_response_t *held = chat(sim, "s", body, NULL, 0);
    ck_assert_int_eq(sl_sim_response_status(held), 200);
    chat_expect(sim, "s", body, 0, 429); /* ITPM: its one token is spent */
    /* An empty prompt costs no ITPM, but 50 output tokens do not fit in the 40 left. */
    chat_expect(sim, "s", "{'messages':[{'role':'user','content':''}],'max_tokens':50}", 0, 429);
    chat_expect(sim, "s", body, 1000, 200);
    chat_expect(sim, "s", body, 2000, 200);
    chat_expect(sim, "s", body, 3000, 200);
    chat_expect(sim, "s", body, 4000, 429); /* RPD */

    sl_sim_response_t *resp = request(sim, "GET", "/stats", NULL, NULL, NULL, 4000);
    json_t *js = body_json(resp);
    json_t *s = json_object_get(json_object_get(js, "deployments"), "s");
    ck_assert_int_eq(json_integer_value(json_object_get(s, "itpm")), 60);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "otpm")), 6000);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "rpd")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "admitted")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "refused")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "refused_itpm_dim")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "refused_otpm_dim")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "refused_rpd_dim")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "refused_requests_dim")) +
                         json_integer_value(json_object_get(s, "refused_tokens_dim")),
                     0);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "input_tokens_charged")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "cached_tokens")), 4);
    /* Three sent (5 each, net), one still holding its 60. */
    ck_assert_int_eq(json_integer_value(json_object_get(s, "output_tokens_charged")), 60 + 15);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "requests_today")), 4);
    json_decref(js);
    sl_sim_response_free(resp);

    /* Reset zeroes the counters, not the day: the quota is still spent. A refund that settles
     * a charge from before the reset does not drive the new counters negative. */
    resp = request(sim, "POST", "/stats/reset", NULL, NULL, NULL, 4000);
    sl_sim_response_free(resp);
    sl_sim_finish(sim, held);
    sl_sim_response_free(held);
    ck_assert_int_eq(stat(sim, "s", "output_tokens_charged"), 0);
    ck_assert_int_eq(stat(sim, "s", "refused_rpd_dim"), 0);
    ck_assert_int_eq(stat(sim, "s", "cached_tokens"), 0);
    ck_assert_int_eq(stat(sim, "s", "requests_today"), 4);
    chat_expect(sim, "s", body, 6000, 429);
    ck_assert_int_eq(stat(sim, "s", "refused_rpd_dim"), 1);
    sl_sim_free(sim);
}
END_TEST

/* ---- Config ------------------------------------------------------------------------------ */

START_TEST(unknown_config_key_is_rejected)
{
    const char *err = config_error("{'deployments':[{'name':'s','rpm':1,'tpmm':5}]}");
    ck_assert_msg(strstr(err, "unknown key \"tpmm\"") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "deployments[0] (s)") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s'}],'minutes':1}");
    ck_assert_msg(strstr(err, "unknown key \"minutes\"") != NULL, "%s", err);
}
END_TEST

START_TEST(invalid_config_values_are_rejected)
{
    const char *err = config_error("{'deployments':[{'name':'s','rpm':-1}]}");
    ck_assert_msg(strstr(err, "\"rpm\" must not be negative") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','ttft_ms':-0.5}]}");
    ck_assert_msg(strstr(err, "\"ttft_ms\" must not be negative") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','tpm':1.5}]}");
    ck_assert_msg(strstr(err, "\"tpm\" must be an integer") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','tpm_counting':'avg'}]}");
    ck_assert_msg(strstr(err, "tpm_counting") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','slices_per_minute':0}]}");
    ck_assert_msg(strstr(err, "slices_per_minute") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','output_min':9,'output_max':3}]}");
    ck_assert_msg(strstr(err, "output_min") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','count_refused':1}]}");
    ck_assert_msg(strstr(err, "count_refused") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s'},{'name':'s'}]}");
    ck_assert_msg(strstr(err, "duplicate") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'a b'}]}");
    ck_assert_msg(strstr(err, "name") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','api_key':''}]}");
    ck_assert_msg(strstr(err, "api_key") != NULL, "%s", err);
    err = config_error("{'minute_ms':0,'deployments':[{'name':'s'}]}");
    ck_assert_msg(strstr(err, "minute_ms") != NULL, "%s", err);
    config_error("{'deployments':[]}");
    config_error("{'deployments':[{'name':'s'}]");
    config_error("{'deployments':[{'name':'s','rpm':1,'rpm':2}]}");
}
END_TEST

START_TEST(anthropic_config_keys_are_validated)
{
    const char *err = config_error("{'deployments':[{'name':'s','otpm_counting':'all'}]}");
    ck_assert_msg(strstr(err, "\"otpm_counting\" must be \"generated\" or \"max_tokens\"") != NULL,
                  "%s", err);
    err = config_error("{'deployments':[{'name':'s','headers':'gemini'}]}");
    ck_assert_msg(strstr(err, "\"headers\" must be \"openai\" or \"anthropic\"") != NULL, "%s",
                  err);
    err = config_error("{'deployments':[{'name':'s','cache_hit_share':1.5}]}");
    ck_assert_msg(strstr(err, "cache_hit_share") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','cache_read_fraction':-0.1}]}");
    ck_assert_msg(strstr(err, "cache_read_fraction") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','day_ms':0}]}");
    ck_assert_msg(strstr(err, "day_ms") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','itpm':-1}]}");
    ck_assert_msg(strstr(err, "\"itpm\" must not be negative") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','otpm':'many'}]}");
    ck_assert_msg(strstr(err, "\"otpm\" must be an integer") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','rpd':1.5}]}");
    ck_assert_msg(strstr(err, "\"rpd\" must be an integer") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','itpmm':1}]}");
    ck_assert_msg(strstr(err, "unknown key \"itpmm\"") != NULL, "%s", err);
}
END_TEST

START_TEST(config_defaults_and_minute_override)
{
    const char *text = Q("{'deployments':[{'name':'s'}]}");
    sl_sim_config_t *cfg = NULL;
    char err[128];
    ck_assert_int_eq(sl_sim_config_parse(text, strlen(text), &cfg, err, sizeof err), SL_OK);
    ck_assert_int_eq(sl_sim_config_minute_ms(cfg), 60000);
    ck_assert_uint_eq(sl_sim_config_deployment_count(cfg), 1);
    ck_assert_int_eq(sl_sim_config_set_minute_ms(cfg, 0), SL_EINVAL);
    ck_assert_int_eq(sl_sim_config_set_minute_ms(cfg, 3000), SL_OK);
    ck_assert_int_eq(sl_sim_config_minute_ms(cfg), 3000);
    sl_sim_t *sim = NULL;
    ck_assert_int_eq(sl_sim_new(cfg, 0, &sim), SL_OK);
    /* The model defaults to the name; a body without max_tokens falls back to 1024. */
    sl_sim_response_t *resp =
        chat(sim, "s", "{'messages':[{'role':'user','content':'x'}]}", NULL, 0);
    json_t *js = body_json(resp);
    ck_assert_str_eq(json_string_value(json_object_get(js, "model")), "s");
    json_decref(js);
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
    ck_assert_int_eq(stat(sim, "s", "tokens_charged"), 1024);
    sl_sim_free(sim);
    ck_assert_int_eq(sl_sim_config_load("/nonexistent/sim.json", &cfg, err, sizeof err), SL_EIO);
}
END_TEST

/* ---- The real server ---------------------------------------------------------------------- */

typedef struct {
    char data[8192];
    size_t len;
} buf_t;

static size_t collect(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    buf_t *buf = userdata;
    size_t n = size * nmemb;
    if (n > sizeof buf->data - 1 - buf->len)
        n = sizeof buf->data - 1 - buf->len;
    memcpy(buf->data + buf->len, ptr, n);
    buf->len += n;
    buf->data[buf->len] = '\0';
    return size * nmemb;
}

/* Makes one HTTP request; returns the status, fills headers (lower-cased) and body. */
static long http_call(uint16_t port, const char *method, const char *path, const char *body,
                      buf_t *headers, buf_t *out)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
    CURL *curl = curl_easy_init();
    ck_assert_ptr_nonnull(curl);
    struct curl_slist *hdrs = NULL;
    hdrs = curl_slist_append(hdrs, "Authorization: Bearer test-key");
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    memset(headers, 0, sizeof *headers);
    memset(out, 0, sizeof *out);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
    if (body != NULL)
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 5L);
    CURLcode cc = curl_easy_perform(curl);
    ck_assert_msg(cc == CURLE_OK, "curl: %s", curl_easy_strerror(cc));
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(curl);
    for (char *c = headers->data; *c; c++) {
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    }
    return status;
}

START_TEST(http_server_serves_completions_limits_and_stats)
{
    /* 1 request per simulated minute of 60 s: the second call is refused. */
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'sim-a','model':'gpt-4o-mini','rpm':1,"
                             "'tpm':100000,'ttft_ms':50,'ms_per_token':0.1}]}");
    sl_sim_server_t *server = NULL;
    ck_assert_int_eq(sl_sim_server_start(sim, "127.0.0.1", 0, &server), SL_OK);
    uint16_t port = sl_sim_server_port(server);
    ck_assert_uint_gt(port, 0);

    buf_t headers;
    buf_t body;
    const char *chat_body = "{\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}],"
                            "\"max_tokens\":64}";
    ck_assert_int_eq(http_call(port, "GET", "/healthz", NULL, &headers, &body), 200);
    ck_assert_str_eq(body.data, "ok");

    int64_t t0 = sl_sim_server_now_ms(server);
    long status = http_call(port, "POST", "/sim-a/v1/chat/completions", chat_body, &headers, &body);
    int64_t elapsed_ms = sl_sim_server_now_ms(server) - t0;
    ck_assert_int_eq(status, 200);
    ck_assert_msg(elapsed_ms >= 50, "answered after %lld ms, before ttft", (long long)elapsed_ms);
    json_t *js = json_loads(body.data, 0, NULL);
    ck_assert_ptr_nonnull(js);
    json_t *usage = json_object_get(js, "usage");
    ck_assert_int_eq(json_integer_value(json_object_get(usage, "prompt_tokens")), 2);
    ck_assert_int_gt(json_integer_value(json_object_get(usage, "completion_tokens")), 0);
    json_decref(js);
    ck_assert_ptr_nonnull(strstr(headers.data, "x-ratelimit-remaining-requests: 0\r\n"));
    ck_assert_ptr_nonnull(strstr(headers.data, "x-ratelimit-limit-tokens: 100000\r\n"));
    ck_assert_ptr_nonnull(strstr(headers.data, "x-request-id: req_"));

    status = http_call(port, "POST", "/sim-a/v1/chat/completions", chat_body, &headers, &body);
    ck_assert_int_eq(status, 429);
    js = json_loads(body.data, 0, NULL);
    ck_assert_ptr_nonnull(js);
    json_t *err = json_object_get(js, "error");
    ck_assert_str_eq(json_string_value(json_object_get(err, "code")), "rate_limit_exceeded");
    ck_assert_str_eq(json_string_value(json_object_get(err, "type")), "requests");
    ck_assert(json_is_null(json_object_get(err, "param")));
    const char *msg = json_string_value(json_object_get(err, "message"));
    ck_assert_msg(starts_with(msg, "Rate limit reached for gpt-4o-mini in organization org-sim "
                                   "on requests per min (RPM): Limit 1, Used 1, Requested 1. "
                                   "Please try again in "),
                  "message: %s", msg);
    json_decref(js);
    const char *ra = strstr(headers.data, "retry-after: ");
    const char *ra_ms = strstr(headers.data, "retry-after-ms: ");
    ck_assert_ptr_nonnull(ra);
    ck_assert_ptr_nonnull(ra_ms);
    long long wait_ms = atoll(ra_ms + strlen("retry-after-ms: "));
    ck_assert(wait_ms > 55000 && wait_ms <= 60000);
    ck_assert_int_eq(atoll(ra + strlen("retry-after: ")), (wait_ms + 999) / 1000);

    ck_assert_int_eq(http_call(port, "GET", "/stats", NULL, &headers, &body), 200);
    js = json_loads(body.data, 0, NULL);
    ck_assert_ptr_nonnull(js);
    json_t *dep = json_object_get(json_object_get(js, "deployments"), "sim-a");
    ck_assert_int_eq(json_integer_value(json_object_get(dep, "admitted")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(dep, "refused")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(dep, "refused_requests_dim")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(dep, "in_flight")), 0);
    json_decref(js);

    ck_assert_int_eq(http_call(port, "GET", "/nowhere", NULL, &headers, &body), 404);
    sl_sim_server_stop(server);
    sl_sim_free(sim);
}
END_TEST

static Suite *sim_suite(void)
{
    Suite *s = suite_create("sim");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, bucket_refills_continuously);
    tcase_add_test(tc, burst_is_limit_over_slices);
    tcase_add_test(tc, oversize_request_passes_only_on_full_bucket);
    tcase_add_test(tc, refusal_charges_nothing);
    tcase_add_test(tc, refusal_reports_the_dimension_that_needs_longest);
    tcase_add_test(tc, unlimited_dimension_never_refuses);
    tcase_add_test(tc, tpm_counts_max_of_max_tokens_and_prompt);
    tcase_add_test(tc, tpm_sum_mode);
    tcase_add_test(tc, default_max_tokens_applies_when_absent);
    tcase_add_test(tc, prompt_estimate_counts_text_parts_and_characters);
    tcase_add_test(tc, request_too_large_is_refused_at_once);
    tcase_add_test(tc, count_refused_charges_the_request_dimension);
    tcase_add_test(tc, go_duration_format);
    tcase_add_test(tc, retry_after_is_time_until_room);
    tcase_add_test(tc, requests_dimension_refusal_names_rpm);
    tcase_add_test(tc, success_has_openai_body_headers_and_delay);
    tcase_add_test(tc, completion_length_is_deterministic_and_capped);
    tcase_add_test(tc, idempotent_replay_is_not_charged);
    tcase_add_test(tc, refused_call_is_not_remembered);
    tcase_add_test(tc, idempotency_table_is_bounded);
    tcase_add_test(tc, bad_requests_get_openai_errors_and_are_not_charged);
    tcase_add_test(tc, any_bearer_token_passes_without_api_key);
    tcase_add_test(tc, pending_responses_are_capped);
    tcase_add_test(tc, stats_report_and_reset_counters_not_buckets);
    tcase_add_test(tc, itpm_excludes_cache_reads);
    tcase_add_test(tc, cache_hits_are_deterministic_and_follow_the_share);
    tcase_add_test(tc, otpm_generated_charges_completion_tokens_and_refuses_when_empty);
    tcase_add_test(tc, otpm_max_tokens_refunds_the_unused_part);
    tcase_add_test(tc, token_costs_above_a_whole_limit_are_too_large);
    tcase_add_test(tc, rpd_refuses_past_the_quota_until_the_next_day_window);
    tcase_add_test(tc, limits_are_all_or_nothing);
    tcase_add_test(tc, anthropic_headers_replace_openai_ones);
    tcase_add_test(tc, rfc3339_rounds_up_to_whole_seconds);
    tcase_add_test(tc, stats_count_new_limits_and_reset_keeps_the_day);
    tcase_add_test(tc, unknown_config_key_is_rejected);
    tcase_add_test(tc, invalid_config_values_are_rejected);
    tcase_add_test(tc, anthropic_config_keys_are_validated);
    tcase_add_test(tc, config_defaults_and_minute_override);
    suite_add_tcase(s, tc);

    TCase *http = tcase_create("http");
    tcase_set_timeout(http, 20);
    tcase_add_test(http, http_server_serves_completions_limits_and_stats);
    suite_add_tcase(s, http);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    SRunner *runner = srunner_create(sim_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    curl_global_cleanup();
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
