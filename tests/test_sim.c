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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../ops/sim/http.h"
#include "../ops/sim/idem.h"
#include "../ops/sim/limiter.h"
#include "../ops/sim/rolling.h"
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

/* ---- Provider APIs ------------------------------------------------------------------------ */

static const char *const AZ_HDRS[] = {"api-key", "k", NULL};
static const char *const AZ_QUERY[] = {"api-version", "2024-10-21", NULL};
static const char *const AN_HDRS[] = {"x-api-key", "k", "anthropic-version", "2023-06-01", NULL};
static const char *const GE_HDRS[] = {"x-goog-api-key", "k", NULL};
static const char *const SSE_QUERY[] = {"alt", "sse", NULL};

/* POSTs body (single-quoted, may be NULL) to path with the given headers and query. */
static sl_sim_response_t *call(sl_sim_t *sim, const char *path, const char *const *headers,
                               const char *const *query, const char *body, int64_t now_ms)
{
    char *copy = body != NULL ? strdup(Q(body)) : NULL;
    sl_sim_request_t req = {
        .method = "POST",
        .path = path,
        .headers = headers,
        .query = query,
        .body = copy,
        .body_len = copy != NULL ? strlen(copy) : 0,
    };
    sl_sim_response_t *resp = NULL;
    ck_assert_int_eq(sl_sim_handle(sim, &req, now_ms, &resp), SL_OK);
    ck_assert_ptr_nonnull(resp);
    free(copy);
    return resp;
}

static sl_sim_response_t *azure(sl_sim_t *sim, const char *dep, const char *body, int64_t now_ms)
{
    char path[160];
    snprintf(path, sizeof path, "/%s/openai/deployments/%s/chat/completions", dep, dep);
    return call(sim, path, AZ_HDRS, AZ_QUERY, body, now_ms);
}

static sl_sim_response_t *anthropic(sl_sim_t *sim, const char *dep, const char *body,
                                    int64_t now_ms)
{
    char path[160];
    snprintf(path, sizeof path, "/%s/v1/messages", dep);
    return call(sim, path, AN_HDRS, NULL, body, now_ms);
}

static sl_sim_response_t *gemini(sl_sim_t *sim, const char *dep, int stream, const char *body,
                                 int64_t now_ms)
{
    char path[160];
    snprintf(path, sizeof path, "/%s/v1beta/models/gemini-2.0-flash:%s", dep,
             stream ? "streamGenerateContent" : "generateContent");
    return call(sim, path, GE_HDRS, stream ? SSE_QUERY : NULL, body, now_ms);
}

/* Frees a response after finishing it. */
static void done_with(sl_sim_t *sim, sl_sim_response_t *resp)
{
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
}

static void expect_status(const sl_sim_response_t *resp, int status)
{
    ck_assert_msg(sl_sim_response_status(resp) == status, "want %d, got %d: %s", status,
                  sl_sim_response_status(resp), sl_sim_response_body(resp, NULL));
}

/* A string member at a path of object keys (NULL-terminated), or NULL. */
static const char *str_at(json_t *js, ...)
{
    va_list ap;
    va_start(ap, js);
    for (const char *key = va_arg(ap, const char *); key != NULL && js != NULL;
         key = va_arg(ap, const char *))
        js = json_object_get(js, key);
    va_end(ap);
    return json_string_value(js);
}

static long long int_at(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    ck_assert_msg(json_is_integer(v), "%s is not an integer", key);
    return json_integer_value(v);
}

static int ends_with_text(const char *s, const char *suffix)
{
    size_t n = strlen(s);
    size_t m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int has_header_prefix(const sl_sim_response_t *resp, const char *prefix)
{
    for (size_t i = 0; i < sl_sim_response_header_count(resp); i++) {
        const char *value;
        if (starts_with(sl_sim_response_header(resp, i, &value), prefix))
            return 1;
    }
    return 0;
}

/* ---- Streams: the produced SSE text, parsed ---------------------------------------------- */

typedef struct {
    char name[32]; /* the event: field, "" without one */
    json_t *data;  /* the data: JSON, NULL for [DONE] */
    int done;      /* data: [DONE] */
} sse_event_t;

#define MAX_SSE 128

/* The whole stream of resp (every chunk, in order), malloc'd. */
static char *stream_text(const sl_sim_response_t *resp)
{
    size_t total = 0;
    for (size_t i = 0; i < sl_sim_response_chunk_count(resp); i++) {
        size_t len = 0;
        sl_sim_response_chunk(resp, i, &len, NULL);
        total += len;
    }
    char *text = malloc(total + 1);
    ck_assert_ptr_nonnull(text);
    size_t used = 0;
    for (size_t i = 0; i < sl_sim_response_chunk_count(resp); i++) {
        size_t len = 0;
        const char *chunk = sl_sim_response_chunk(resp, i, &len, NULL);
        memcpy(text + used, chunk, len);
        used += len;
    }
    text[used] = '\0';
    return text;
}

/* Parses SSE text into events (blocks separated by a blank line, LF or CRLF). */
static size_t parse_sse(const char *text, sse_event_t *events)
{
    size_t n = 0;
    const char *p = text;
    while (*p) {
        const char *end = strstr(p, "\n\n");
        const char *crlf = strstr(p, "\r\n\r\n");
        size_t sep = 2;
        if (crlf != NULL && (end == NULL || crlf < end)) {
            end = crlf;
            sep = 4;
        }
        ck_assert_msg(end != NULL, "an SSE event does not end in a blank line: %s", p);
        ck_assert_uint_lt(n, MAX_SSE);
        sse_event_t *ev = &events[n++];
        memset(ev, 0, sizeof *ev);
        char *block = strndup(p, (size_t)(end - p));
        char *save = NULL;
        for (char *line = strtok_r(block, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            size_t len = strlen(line);
            if (len > 0 && line[len - 1] == '\r')
                line[len - 1] = '\0';
            if (starts_with(line, "event: ")) {
                snprintf(ev->name, sizeof ev->name, "%s", line + 7);
            } else if (starts_with(line, "data: ")) {
                if (strcmp(line + 6, "[DONE]") == 0) {
                    ev->done = 1;
                } else {
                    json_error_t jerr;
                    ev->data = json_loads(line + 6, 0, &jerr);
                    ck_assert_msg(ev->data != NULL, "data is not JSON (%s): %s", jerr.text,
                                  line + 6);
                }
            }
        }
        free(block);
        p = end + sep;
    }
    return n;
}

static void free_sse(sse_event_t *events, size_t n)
{
    for (size_t i = 0; i < n; i++)
        json_decref(events[i].data);
}

/* Checks that event times never go back, start at first_ms and end at last_ms. */
static void expect_times(const sl_sim_response_t *resp, int64_t first_ms, int64_t last_ms)
{
    size_t n = sl_sim_response_chunk_count(resp);
    int64_t prev = -1;
    for (size_t i = 0; i < n; i++) {
        int64_t at = -1;
        sl_sim_response_chunk(resp, i, NULL, &at);
        ck_assert_msg(at >= prev, "event %zu at %lld before %lld", i, (long long)at,
                      (long long)prev);
        if (i == 0)
            ck_assert_int_eq(at, first_ms);
        prev = at;
    }
    ck_assert_int_eq(prev, last_ms);
}

/* ---- Azure --------------------------------------------------------------------------------- */

#define AZURE_CONFIG                                                                               \
    "{'deployments':[{'name':'az','model':'gpt-4o','api':'azure','rpm':60,'tpm':60000,"            \
    "'api_key':'k','output_min':30,'output_max':30,'ttft_ms':10,'ms_per_token':1}]}"

START_TEST(azure_success_has_openai_body_and_azure_headers)
{
    sl_sim_t *sim = sim_from(AZURE_CONFIG);
    sl_sim_response_t *resp =
        azure(sim, "az", "{'messages':[{'role':'user','content':'hello'}],'max_tokens':100}", 0);
    expect_status(resp, 200);
    json_t *js = body_json(resp);
    ck_assert_str_eq(str_at(js, "object", NULL), "chat.completion");
    ck_assert_str_eq(str_at(js, "model", NULL), "gpt-4o");
    json_t *choice = json_array_get(json_object_get(js, "choices"), 0);
    ck_assert_str_eq(str_at(choice, "message", "content", NULL),
                     "Simulated reply from az (30 completion tokens).");
    ck_assert_str_eq(str_at(choice, "finish_reason", NULL), "stop");
    json_t *usage = json_object_get(js, "usage");
    ck_assert_int_eq(int_at(usage, "prompt_tokens"), 2);
    ck_assert_int_eq(int_at(usage, "completion_tokens"), 30);
    ck_assert_int_eq(int_at(usage, "total_tokens"), 32);
    ck_assert(json_is_array(json_object_get(js, "prompt_filter_results")));
    json_decref(js);
    ck_assert_int_eq(sl_sim_response_delay_ms(resp), 40);
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-limit-requests"), 60);
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-limit-tokens"), 60000);
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-remaining-requests"), 0);
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-remaining-tokens"), 900);
    /* Azure sends no reset headers. */
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "x-ratelimit-reset-requests"));
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "x-ratelimit-reset-tokens"));
    const char *id = sl_sim_response_header_get(resp, "x-request-id");
    ck_assert(starts_with(id, "req_"));
    ck_assert_str_eq(sl_sim_response_header_get(resp, "x-sim-request-id"), id);
    done_with(sim, resp);

    /* The burst of one request is used: Azure's 429, with both retry headers. */
    resp = azure(sim, "az", "{'messages':[{'role':'user','content':'hello'}]}", 0);
    expect_status(resp, 429);
    js = body_json(resp);
    ck_assert_str_eq(str_at(js, "error", "code", NULL), "429");
    const char *msg = str_at(js, "error", "message", NULL);
    ck_assert_msg(starts_with(msg, "Requests to the ChatCompletions_Create Operation under Azure "
                                   "OpenAI API version 2024-10-21 have exceeded call rate limit") &&
                      strstr(msg, "Please retry after 1 seconds.") != NULL,
                  "%s", msg);
    json_decref(js);
    ck_assert_int_eq(header_ll(resp, "retry-after-ms"), 1000);
    ck_assert_int_eq(header_ll(resp, "retry-after"), 1);
    sl_sim_response_free(resp);
    ck_assert_int_eq(stat(sim, "az", "refused_requests_dim"), 1);
    sl_sim_free(sim);
}
END_TEST

START_TEST(azure_errors_have_azure_shapes)
{
    sl_sim_t *sim = sim_from(AZURE_CONFIG);
    const char *body = "{'messages':[{'role':'user','content':'x'}]}";
    const char *path = "/az/openai/deployments/az/chat/completions";
    /* No api-version. */
    sl_sim_response_t *resp = call(sim, path, AZ_HDRS, NULL, body, 0);
    expect_status(resp, 400);
    json_t *js = body_json(resp);
    ck_assert_str_eq(str_at(js, "error", "code", NULL), "MissingApiVersionParameter");
    json_decref(js);
    sl_sim_response_free(resp);
    /* No api-key, a wrong one, or OpenAI's bearer token instead. */
    static const char *const wrong[] = {"api-key", "nope", NULL};
    static const char *const bearer[] = {"authorization", "Bearer k", NULL};
    const char *const *bad_auth[] = {NULL, wrong, bearer};
    for (size_t i = 0; i < 3; i++) {
        resp = call(sim, path, bad_auth[i], AZ_QUERY, body, 0);
        expect_status(resp, 401);
        js = body_json(resp);
        ck_assert_str_eq(str_at(js, "error", "code", NULL), "401");
        ck_assert(starts_with(str_at(js, "error", "message", NULL), "Access denied"));
        json_decref(js);
        sl_sim_response_free(resp);
    }
    /* Another deployment name in the path. */
    resp = call(sim, "/az/openai/deployments/other/chat/completions", AZ_HDRS, AZ_QUERY, body, 0);
    expect_status(resp, 404);
    js = body_json(resp);
    ck_assert_str_eq(str_at(js, "error", "code", NULL), "DeploymentNotFound");
    json_decref(js);
    sl_sim_response_free(resp);
    /* OpenAI's path is not served by an Azure deployment. */
    resp = call(sim, "/az/v1/chat/completions", AZ_HDRS, AZ_QUERY, body, 0);
    expect_status(resp, 404);
    sl_sim_response_free(resp);
    /* A bad body is OpenAI-shaped, as Azure passes validation errors through. */
    resp = call(sim, path, AZ_HDRS, AZ_QUERY, "{'messages':[]}", 0);
    expect_status(resp, 400);
    js = body_json(resp);
    ck_assert_str_eq(str_at(js, "error", "type", NULL), "invalid_request_error");
    ck_assert_str_eq(str_at(js, "error", "code", NULL), "empty_array");
    json_decref(js);
    sl_sim_response_free(resp);
    ck_assert_int_eq(stat(sim, "az", "errors"), 5);
    ck_assert_int_eq(stat(sim, "az", "admitted"), 0);
    sl_sim_free(sim);
}
END_TEST

/* ---- Anthropic ----------------------------------------------------------------------------- */

#define ANTHROPIC_CONFIG                                                                           \
    "{'deployments':[{'name':'an','model':'claude-sonnet-4','api':'anthropic','rpm':60,"           \
    "'itpm':60000,'otpm':60000,'api_key':'k','output_min':40,'output_max':40,'ttft_ms':10,"        \
    "'ms_per_token':1,'cache_hit_share':1,'cache_read_fraction':0.5}]}"

START_TEST(anthropic_success_has_messages_body_and_cache_reads)
{
    sl_sim_t *sim = sim_from(ANTHROPIC_CONFIG);
    /* 100 characters of system, 300 of text blocks, 80 of a tool result: 120 tokens. */
    char body[2048];
    snprintf(body, sizeof body,
             "{'model':'claude-sonnet-4','max_tokens':1000,'system':'%0100d',"
             "'messages':[{'role':'user','content':[{'type':'text','text':'%0300d'}]},"
             "{'role':'assistant','content':[{'type':'tool_use','id':'t1','name':'f','input':{}}]},"
             "{'role':'user','content':[{'type':'tool_result','tool_use_id':'t1','content':"
             "'%080d'}]}]}",
             0, 0, 0);
    sl_sim_response_t *resp = anthropic(sim, "an", body, 0);
    expect_status(resp, 200);
    json_t *js = body_json(resp);
    ck_assert(starts_with(str_at(js, "id", NULL), "msg_"));
    ck_assert_str_eq(str_at(js, "type", NULL), "message");
    ck_assert_str_eq(str_at(js, "role", NULL), "assistant");
    ck_assert_str_eq(str_at(js, "model", NULL), "claude-sonnet-4");
    json_t *block = json_array_get(json_object_get(js, "content"), 0);
    ck_assert_str_eq(str_at(block, "type", NULL), "text");
    ck_assert_str_eq(str_at(block, "text", NULL),
                     "Simulated reply from an (40 completion tokens).");
    ck_assert_str_eq(str_at(js, "stop_reason", NULL), "end_turn");
    json_t *usage = json_object_get(js, "usage");
    /* Every body hits the cache: half of the 120 prompt tokens are read from it, and
     * input_tokens leaves them out as Anthropic does. */
    ck_assert_int_eq(int_at(usage, "input_tokens"), 60);
    ck_assert_int_eq(int_at(usage, "cache_read_input_tokens"), 60);
    ck_assert_int_eq(int_at(usage, "cache_creation_input_tokens"), 0);
    ck_assert_int_eq(int_at(usage, "output_tokens"), 40);
    json_decref(js);
    ck_assert(starts_with(sl_sim_response_header_get(resp, "request-id"), "req_"));
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "x-request-id"));
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "openai-processing-ms"));
    ck_assert_int_eq(header_ll(resp, "anthropic-ratelimit-requests-limit"), 60);
    ck_assert_ptr_nonnull(
        sl_sim_response_header_get(resp, "anthropic-ratelimit-input-tokens-reset"));
    ck_assert(!has_header_prefix(resp, "x-ratelimit-"));
    ck_assert_int_eq(sl_sim_response_delay_ms(resp), 50);
    done_with(sim, resp);
    ck_assert_int_eq(stat(sim, "an", "input_tokens_charged"), 60);
    ck_assert_int_eq(stat(sim, "an", "cached_tokens"), 60);

    /* Capped at max_tokens (a new simulator: the burst of one request is used). */
    sl_sim_free(sim);
    sim = sim_from(ANTHROPIC_CONFIG);
    resp = anthropic(sim, "an",
                     "{'model':'m','max_tokens':7,'messages':[{'role':'user','content':'x'}]}", 0);
    js = body_json(resp);
    ck_assert_str_eq(str_at(js, "stop_reason", NULL), "max_tokens");
    ck_assert_int_eq(int_at(json_object_get(js, "usage"), "output_tokens"), 7);
    json_decref(js);
    done_with(sim, resp);
    sl_sim_free(sim);
}
END_TEST

/* Checks an Anthropic error body: status, error type, request_id matching the header. */
static void expect_anthropic_error(sl_sim_response_t *resp, int status, const char *type,
                                   const char *message)
{
    expect_status(resp, status);
    json_t *js = body_json(resp);
    ck_assert_str_eq(str_at(js, "type", NULL), "error");
    ck_assert_str_eq(str_at(js, "error", "type", NULL), type);
    const char *msg = str_at(js, "error", "message", NULL);
    ck_assert_msg(msg != NULL && (message == NULL || strstr(msg, message) != NULL), "%s", msg);
    ck_assert_str_eq(str_at(js, "request_id", NULL),
                     sl_sim_response_header_get(resp, "request-id"));
    json_decref(js);
    sl_sim_response_free(resp);
}

START_TEST(anthropic_errors_have_anthropic_shapes)
{
    sl_sim_t *sim = sim_from(ANTHROPIC_CONFIG);
    const char *ok = "{'model':'m','max_tokens':10,'messages':[{'role':'user','content':'x'}]}";
    static const char *const no_version[] = {"x-api-key", "k", NULL};
    static const char *const wrong_key[] = {"x-api-key", "j", "anthropic-version", "2023-06-01",
                                            NULL};
    static const char *const no_key[] = {"anthropic-version", "2023-06-01", NULL};
    expect_anthropic_error(call(sim, "/an/v1/messages", no_key, NULL, ok, 0), 401,
                           "authentication_error", "x-api-key");
    expect_anthropic_error(call(sim, "/an/v1/messages", wrong_key, NULL, ok, 0), 401,
                           "authentication_error", "invalid x-api-key");
    expect_anthropic_error(call(sim, "/an/v1/messages", no_version, NULL, ok, 0), 400,
                           "invalid_request_error", "anthropic-version");
    expect_anthropic_error(
        anthropic(sim, "an", "{'model':'m','messages':[{'role':'user','content':'x'}]}", 0), 400,
        "invalid_request_error", "max_tokens: Field required");
    expect_anthropic_error(anthropic(sim, "an", "{'model':'m','max_tokens':10}", 0), 400,
                           "invalid_request_error", "messages: Field required");
    expect_anthropic_error(
        anthropic(sim, "an",
                  "{'model':'m','max_tokens':10,'messages':[{'role':'system','content':'x'}]}", 0),
        400, "invalid_request_error", "messages.0.role");
    expect_anthropic_error(
        anthropic(sim, "an",
                  "{'model':'m','max_tokens':10,'n':2,'messages':[{'role':'user','content':'x'}]}",
                  0),
        400, "invalid_request_error", "n: Extra inputs are not permitted");
    expect_anthropic_error(anthropic(sim, "an",
                                     "{'model':'m','max_tokens':10,'tools':[{'name':'f'}],"
                                     "'messages':[{'role':'user','content':'x'}]}",
                                     0),
                           400, "invalid_request_error", "tools.0.input_schema: Field required");
    expect_anthropic_error(call(sim, "/an/v1/chat/completions", AN_HDRS, NULL, ok, 0), 404,
                           "not_found_error", NULL);
    ck_assert_int_eq(stat(sim, "an", "errors"), 8);

    /* The one request of the burst, then Anthropic's 429: retry-after in seconds only. */
    done_with(sim, anthropic(sim, "an", ok, 0));
    sl_sim_response_t *resp = anthropic(sim, "an", ok, 0);
    ck_assert_int_eq(header_ll(resp, "retry-after"), 1);
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "retry-after-ms"));
    ck_assert_int_eq(header_ll(resp, "anthropic-ratelimit-requests-remaining"), 0);
    expect_anthropic_error(resp, 429, "rate_limit_error",
                           "would exceed the rate limit for your organization (org-sim) of 60 "
                           "requests per minute");
    sl_sim_free(sim);
}
END_TEST

START_TEST(anthropic_tool_use_follows_the_share)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'an','api':'anthropic','tool_use_share':0.5,"
                             "'output_min':20,'output_max':20}]}");
    char body[512];
    int tool_uses = 0;
    for (int i = 0; i < 400; i++) {
        snprintf(body, sizeof body,
                 "{'model':'m','max_tokens':100,'tools':[{'type':'web_search_20250305',"
                 "'name':'web_search'},{'name':'get_weather','description':'d','input_schema':"
                 "{'type':'object'}}],'messages':[{'role':'user','content':'question %d'}]}",
                 i);
        sl_sim_response_t *resp = anthropic(sim, "an", body, 0);
        expect_status(resp, 200);
        json_t *js = body_json(resp);
        json_t *block = json_array_get(json_object_get(js, "content"), 0);
        if (strcmp(str_at(block, "type", NULL), "tool_use") == 0) {
            tool_uses++;
            /* The first client tool is called; server tools are not. */
            ck_assert_str_eq(str_at(block, "name", NULL), "get_weather");
            ck_assert(starts_with(str_at(block, "id", NULL), "toolu_"));
            ck_assert(json_is_object(json_object_get(block, "input")));
            ck_assert_str_eq(str_at(js, "stop_reason", NULL), "tool_use");
        } else {
            ck_assert_str_eq(str_at(js, "stop_reason", NULL), "end_turn");
        }
        json_decref(js);
        done_with(sim, resp);
    }
    ck_assert_msg(tool_uses > 150 && tool_uses < 250, "%d tool uses", tool_uses);
    ck_assert_int_eq(stat(sim, "an", "tool_calls"), tool_uses);

    /* Without tools, or with tool_choice none, never. */
    for (int i = 0; i < 50; i++) {
        snprintf(body, sizeof body,
                 "{'model':'m','max_tokens':100,'tool_choice':{'type':'none'},'tools':[{'name':"
                 "'f','input_schema':{}}],'messages':[{'role':'user','content':'question %d'}]}",
                 i);
        sl_sim_response_t *resp = anthropic(sim, "an", body, 0);
        json_t *js = body_json(resp);
        ck_assert_str_eq(str_at(js, "stop_reason", NULL), "end_turn");
        json_decref(js);
        done_with(sim, resp);
    }
    ck_assert_int_eq(stat(sim, "an", "tool_calls"), tool_uses);
    sl_sim_free(sim);
}
END_TEST

START_TEST(spend_limit_refuses_in_each_format_without_retry_after)
{
    static const char *const apis[] = {"openai", "azure", "anthropic", "gemini"};
    for (int a = 0; a < 4; a++) {
        char cfg[256];
        snprintf(cfg, sizeof cfg,
                 "{'deployments':[{'name':'d','api':'%s','faults':{'spend_limit_after':2}}]}",
                 apis[a]);
        sl_sim_t *sim = sim_from(cfg);
        for (int i = 0; i < 3; i++) {
            sl_sim_response_t *resp =
                a == 0   ? chat(sim, "d", "{'messages':[{'role':'user','content':'x'}]}", NULL, i)
                : a == 1 ? azure(sim, "d", "{'messages':[{'role':'user','content':'x'}]}", i)
                : a == 2 ? anthropic(sim, "d",
                                     "{'model':'m','max_tokens':5,'messages':[{'role':'user',"
                                     "'content':'x'}]}",
                                     i)
                         : gemini(sim, "d", 0, "{'contents':[{'parts':[{'text':'x'}]}]}", i);
            expect_status(resp, i < 2 ? 200 : 429);
            if (i == 2) {
                ck_assert_ptr_null(sl_sim_response_header_get(resp, "retry-after"));
                json_t *js = body_json(resp);
                if (a < 2) {
                    ck_assert_str_eq(str_at(js, "error", "code", NULL), "insufficient_quota");
                    ck_assert_str_eq(str_at(js, "error", "type", NULL), "insufficient_quota");
                } else if (a == 2) {
                    ck_assert_str_eq(str_at(js, "error", "type", NULL), "rate_limit_error");
                    ck_assert_str_eq(str_at(js, "error", "details", "error_code", NULL),
                                     "enforced_spend_limit_reached");
                } else {
                    json_t *details = json_object_get(json_object_get(js, "error"), "details");
                    ck_assert_uint_eq(json_array_size(details), 1);
                    json_t *violation = json_array_get(
                        json_object_get(json_array_get(details, 0), "violations"), 0);
                    ck_assert(strstr(str_at(violation, "quotaId", NULL), "PerDay") != NULL);
                }
                json_decref(js);
            }
            done_with(sim, resp);
        }
        ck_assert_int_eq(stat(sim, "d", "fault_spend_limit"), 1);
        ck_assert_int_eq(stat(sim, "d", "admitted"), 2);
        sl_sim_free(sim);
    }
}
END_TEST

/* ---- Gemini -------------------------------------------------------------------------------- */

#define GEMINI_CONFIG                                                                              \
    "{'deployments':[{'name':'ge','model':'gemini-2.0-flash','api':'gemini','rpm':60,"             \
    "'api_key':'k','output_min':40,'output_max':40,'ttft_ms':10,'ms_per_token':1,"                 \
    "'cache_hit_share':1,'cache_read_fraction':0.25}]}"

/* The details[] entry of a Gemini error with @type ending in suffix, or NULL. */
static json_t *google_detail(json_t *js, const char *suffix)
{
    json_t *details = json_object_get(json_object_get(js, "error"), "details");
    size_t i;
    json_t *d;
    json_array_foreach(details, i, d)
    {
        const char *type = str_at(d, "@type", NULL);
        if (type != NULL && strstr(type, suffix) != NULL)
            return d;
    }
    return NULL;
}

START_TEST(gemini_success_has_generate_content_body_and_no_limit_headers)
{
    sl_sim_t *sim = sim_from(GEMINI_CONFIG);
    /* 40 characters of system instruction and 360 of text: 100 tokens, a quarter cached. */
    char body[1024];
    snprintf(body, sizeof body,
             "{'systemInstruction':{'parts':[{'text':'%040d'}]},'contents':[{'role':'user',"
             "'parts':[{'text':'%0160d'}]},{'role':'model','parts':[{'text':'%0100d'}]},"
             "{'role':'user','parts':[{'text':'%0100d'}]}],'generationConfig':"
             "{'maxOutputTokens':100,'temperature':0.5}}",
             0, 0, 0, 0);
    sl_sim_response_t *resp = gemini(sim, "ge", 0, body, 0);
    expect_status(resp, 200);
    json_t *js = body_json(resp);
    json_t *cand = json_array_get(json_object_get(js, "candidates"), 0);
    ck_assert_str_eq(str_at(cand, "content", "role", NULL), "model");
    json_t *part = json_array_get(json_object_get(json_object_get(cand, "content"), "parts"), 0);
    ck_assert_str_eq(str_at(part, "text", NULL), "Simulated reply from ge (40 completion tokens).");
    ck_assert_str_eq(str_at(cand, "finishReason", NULL), "STOP");
    json_t *usage = json_object_get(js, "usageMetadata");
    ck_assert_int_eq(int_at(usage, "promptTokenCount"), 100); /* cached included */
    ck_assert_int_eq(int_at(usage, "cachedContentTokenCount"), 25);
    ck_assert_int_eq(int_at(usage, "candidatesTokenCount"), 40);
    ck_assert_int_eq(int_at(usage, "thoughtsTokenCount"), 0);
    ck_assert_int_eq(int_at(usage, "totalTokenCount"), 140);
    ck_assert_str_eq(str_at(js, "modelVersion", NULL), "gemini-2.0-flash");
    json_decref(js);
    ck_assert(!has_header_prefix(resp, "x-ratelimit-"));
    ck_assert(!has_header_prefix(resp, "anthropic-ratelimit-"));
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "x-request-id"));
    ck_assert(starts_with(sl_sim_response_header_get(resp, "x-sim-request-id"), "req_"));
    done_with(sim, resp);

    /* maxOutputTokens caps the output: MAX_TOKENS. The key may come as ?key= too. */
    static const char *const key_query[] = {"key", "k", NULL};
    resp = call(sim, "/ge/v1beta/models/gemini-2.0-flash:generateContent", NULL, key_query,
                "{'contents':[{'parts':[{'text':'x'}]}],'generationConfig':{'maxOutputTokens':5}}",
                1000);
    expect_status(resp, 200);
    js = body_json(resp);
    cand = json_array_get(json_object_get(js, "candidates"), 0);
    ck_assert_str_eq(str_at(cand, "finishReason", NULL), "MAX_TOKENS");
    ck_assert_int_eq(int_at(json_object_get(js, "usageMetadata"), "candidatesTokenCount"), 5);
    json_decref(js);
    done_with(sim, resp);
    ck_assert_int_eq(stat(sim, "ge", "admitted"), 2);
    sl_sim_free(sim);
}
END_TEST

static void expect_google_error(sl_sim_response_t *resp, int status, const char *google_status)
{
    expect_status(resp, status);
    json_t *js = body_json(resp);
    ck_assert_int_eq(int_at(json_object_get(js, "error"), "code"), status);
    ck_assert_str_eq(str_at(js, "error", "status", NULL), google_status);
    ck_assert(json_is_string(json_object_get(json_object_get(js, "error"), "message")));
    json_decref(js);
    sl_sim_response_free(resp);
}

START_TEST(gemini_errors_have_google_shapes)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'ge','api':'gemini','rpm':60,'rpd':2,"
                             "'api_key':'k'}]}");
    const char *ok = "{'contents':[{'parts':[{'text':'x'}]}]}";
    const char *path = "/ge/v1beta/models/gemini-2.0-flash:generateContent";
    expect_google_error(call(sim, path, NULL, NULL, ok, 0), 403, "PERMISSION_DENIED");
    static const char *const wrong[] = {"x-goog-api-key", "j", NULL};
    sl_sim_response_t *resp = call(sim, path, wrong, NULL, ok, 0);
    json_t *js = body_json(resp);
    ck_assert_str_eq(str_at(google_detail(js, "ErrorInfo"), "reason", NULL), "API_KEY_INVALID");
    json_decref(js);
    expect_google_error(resp, 400, "INVALID_ARGUMENT");
    expect_google_error(gemini(sim, "ge", 0, "{'generationConfig':{}}", 0), 400,
                        "INVALID_ARGUMENT");
    expect_google_error(
        gemini(sim, "ge", 0, "{'contents':[{'role':'bot','parts':[{'text':'x'}]}]}", 0), 400,
        "INVALID_ARGUMENT");
    expect_google_error(gemini(sim, "ge", 0, "{'contents':[{'parts':[]}]}", 0), 400,
                        "INVALID_ARGUMENT");
    expect_google_error(gemini(sim, "ge", 0, "{'contents':[{'parts':[{'text':'x'}]}],'n':1}", 0),
                        400, "INVALID_ARGUMENT");
    expect_google_error(
        call(sim, "/ge/v1beta/models/gemini-2.0-flash:countTokens", GE_HDRS, NULL, ok, 0), 404,
        "NOT_FOUND");

    /* The RPM burst is one request: RESOURCE_EXHAUSTED with the quota and the wait. */
    done_with(sim, gemini(sim, "ge", 0, ok, 0));
    resp = gemini(sim, "ge", 0, ok, 0);
    expect_status(resp, 429);
    js = body_json(resp);
    ck_assert_str_eq(str_at(js, "error", "status", NULL), "RESOURCE_EXHAUSTED");
    json_t *violation =
        json_array_get(json_object_get(google_detail(js, "QuotaFailure"), "violations"), 0);
    ck_assert_str_eq(str_at(violation, "quotaId", NULL),
                     "GenerateRequestsPerMinutePerProjectPerModel");
    ck_assert_str_eq(str_at(google_detail(js, "RetryInfo"), "retryDelay", NULL), "1s");
    ck_assert_msg(strstr(str_at(js, "error", "message", NULL), "Please retry in 1s.") != NULL, "%s",
                  str_at(js, "error", "message", NULL));
    json_decref(js);
    ck_assert_ptr_null(sl_sim_response_header_get(resp, "retry-after"));
    sl_sim_response_free(resp);

    /* The daily quota of 2 runs out: a PerDay quotaId. */
    done_with(sim, gemini(sim, "ge", 0, ok, 1000));
    resp = gemini(sim, "ge", 0, ok, 2000);
    expect_status(resp, 429);
    js = body_json(resp);
    violation = json_array_get(json_object_get(google_detail(js, "QuotaFailure"), "violations"), 0);
    ck_assert_str_eq(str_at(violation, "quotaId", NULL),
                     "GenerateRequestsPerDayPerProjectPerModel");
    json_decref(js);
    sl_sim_response_free(resp);
    ck_assert_int_eq(stat(sim, "ge", "refused_rpd_dim"), 1);
    sl_sim_free(sim);
}
END_TEST

/* ---- Streams ------------------------------------------------------------------------------- */

START_TEST(openai_stream_sends_chunks_usage_and_done)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','model':'gpt-4o-mini','output_min':40,"
                             "'output_max':40,'ttft_ms':100,'ms_per_token':5,'stream_chunks':4}]}");
    sl_sim_response_t *resp = chat(sim, "s",
                                   "{'messages':[{'role':'user','content':'x'}],'stream':true,"
                                   "'stream_options':{'include_usage':true}}",
                                   NULL, 0);
    expect_status(resp, 200);
    ck_assert_str_eq(sl_sim_response_header_get(resp, "content-type"),
                     "text/event-stream; charset=utf-8");
    ck_assert_int_eq(sl_sim_response_delay_ms(resp), 0);
    /* 4 content chunks, the finish chunk, the usage chunk, [DONE]. */
    ck_assert_uint_eq(sl_sim_response_chunk_count(resp), 7);
    ck_assert(!sl_sim_response_dropped(resp));
    /* First at ttft, then 10 tokens (50 ms) apart, the end at ttft + 40 tokens. */
    expect_times(resp, 100, 300);
    int64_t at = 0;
    sl_sim_response_chunk(resp, 1, NULL, &at);
    ck_assert_int_eq(at, 150);
    char *text = stream_text(resp);
    sse_event_t ev[MAX_SSE];
    size_t n = parse_sse(text, ev);
    ck_assert_uint_eq(n, 7);
    char content[256] = "";
    for (size_t i = 0; i < 4; i++) {
        ck_assert_str_eq(str_at(ev[i].data, "object", NULL), "chat.completion.chunk");
        json_t *choice = json_array_get(json_object_get(ev[i].data, "choices"), 0);
        ck_assert(json_is_null(json_object_get(choice, "finish_reason")));
        if (i == 0)
            ck_assert_str_eq(str_at(choice, "delta", "role", NULL), "assistant");
        strcat(content, str_at(choice, "delta", "content", NULL));
        /* Every chunk but the usage one says usage: null. */
        ck_assert(json_is_null(json_object_get(ev[i].data, "usage")));
    }
    ck_assert_str_eq(content, "Simulated reply from s (40 completion tokens).");
    json_t *last = json_array_get(json_object_get(ev[4].data, "choices"), 0);
    ck_assert_str_eq(str_at(last, "finish_reason", NULL), "stop");
    ck_assert_uint_eq(json_array_size(json_object_get(ev[5].data, "choices")), 0);
    json_t *usage = json_object_get(ev[5].data, "usage");
    ck_assert_int_eq(int_at(usage, "prompt_tokens"), 1);
    ck_assert_int_eq(int_at(usage, "completion_tokens"), 40);
    ck_assert_int_eq(int_at(usage, "total_tokens"), 41);
    ck_assert(ev[6].done);
    free_sse(ev, n);
    free(text);
    done_with(sim, resp);
    ck_assert_int_eq(stat(sim, "s", "streams"), 1);

    /* Without include_usage: no usage chunk. stream_options without stream: 400. */
    resp = chat(sim, "s", "{'messages':[{'role':'user','content':'y'}],'stream':true}", NULL, 0);
    ck_assert_uint_eq(sl_sim_response_chunk_count(resp), 6);
    text = stream_text(resp);
    ck_assert_ptr_null(strstr(text, "\"usage\""));
    free(text);
    done_with(sim, resp);
    resp = chat(sim, "s",
                "{'messages':[{'role':'user','content':'y'}],'stream_options':"
                "{'include_usage':true}}",
                NULL, 0);
    expect_status(resp, 400);
    ck_assert_uint_eq(sl_sim_response_chunk_count(resp), 0);
    sl_sim_response_free(resp);
    sl_sim_free(sim);
}
END_TEST

START_TEST(azure_stream_is_openai_shaped)
{
    sl_sim_t *sim = sim_from(AZURE_CONFIG);
    sl_sim_response_t *resp =
        azure(sim, "az", "{'messages':[{'role':'user','content':'x'}],'stream':true}", 0);
    expect_status(resp, 200);
    char *text = stream_text(resp);
    sse_event_t ev[MAX_SSE];
    size_t n = parse_sse(text, ev);
    ck_assert_uint_ge(n, 3);
    ck_assert_str_eq(str_at(ev[0].data, "object", NULL), "chat.completion.chunk");
    ck_assert(ev[n - 1].done);
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-remaining-requests"), 0);
    free_sse(ev, n);
    free(text);
    done_with(sim, resp);
    sl_sim_free(sim);
}
END_TEST

START_TEST(anthropic_stream_sends_the_event_sequence)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'an','model':'claude','api':'anthropic',"
                             "'output_min':30,'output_max':30,'ttft_ms':50,'ms_per_token':2,"
                             "'cache_hit_share':1,'cache_read_fraction':0.5,'tool_use_share':1}]}");
    sl_sim_response_t *resp = anthropic(sim, "an",
                                        "{'model':'m','max_tokens':100,'stream':true,'messages':"
                                        "[{'role':'user','content':'12345678'}]}",
                                        0);
    expect_status(resp, 200);
    expect_times(resp, 50, 110);
    char *text = stream_text(resp);
    sse_event_t ev[MAX_SSE];
    size_t n = parse_sse(text, ev);
    static const char *const head[] = {"message_start", "content_block_start", "ping"};
    static const char *const tail[] = {"content_block_stop", "message_delta", "message_stop"};
    ck_assert_uint_ge(n, 7);
    for (size_t i = 0; i < 3; i++) {
        ck_assert_str_eq(ev[i].name, head[i]);
        ck_assert_str_eq(ev[n - 3 + i].name, tail[i]);
    }
    char content[256] = "";
    for (size_t i = 3; i < n - 3; i++) {
        ck_assert_str_eq(ev[i].name, "content_block_delta");
        ck_assert_str_eq(str_at(ev[i].data, "delta", "type", NULL), "text_delta");
        strcat(content, str_at(ev[i].data, "delta", "text", NULL));
    }
    ck_assert_str_eq(content, "Simulated reply from an (30 completion tokens).");
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(str_at(ev[i].data, "type", NULL), ev[i].name);
    json_t *start_usage = json_object_get(json_object_get(ev[0].data, "message"), "usage");
    ck_assert_int_eq(int_at(start_usage, "input_tokens"), 1);
    ck_assert_int_eq(int_at(start_usage, "cache_read_input_tokens"), 1);
    ck_assert_str_eq(str_at(ev[n - 2].data, "delta", "stop_reason", NULL), "end_turn");
    ck_assert_int_eq(int_at(json_object_get(ev[n - 2].data, "usage"), "output_tokens"), 30);
    free_sse(ev, n);
    free(text);
    done_with(sim, resp);

    /* With tools and a tool_use_share of 1: a tool_use block with its JSON input. */
    resp =
        anthropic(sim, "an",
                  "{'model':'m','max_tokens':100,'stream':true,'tools':[{'name':'lookup',"
                  "'input_schema':{'type':'object'}}],'messages':[{'role':'user','content':'x'}]}",
                  0);
    text = stream_text(resp);
    n = parse_sse(text, ev);
    ck_assert_str_eq(str_at(ev[1].data, "content_block", "type", NULL), "tool_use");
    ck_assert_str_eq(str_at(ev[1].data, "content_block", "name", NULL), "lookup");
    ck_assert_str_eq(str_at(ev[3].data, "delta", "type", NULL), "input_json_delta");
    ck_assert_str_eq(str_at(ev[n - 2].data, "delta", "stop_reason", NULL), "tool_use");
    ck_assert_str_eq(ev[n - 1].name, "message_stop");
    free_sse(ev, n);
    free(text);
    done_with(sim, resp);
    sl_sim_free(sim);
}
END_TEST

START_TEST(gemini_stream_sends_responses_with_usage_on_the_last)
{
    sl_sim_t *sim = sim_from(GEMINI_CONFIG);
    const char *body = "{'contents':[{'parts':[{'text':'12345678'}]}]}";
    sl_sim_response_t *resp = gemini(sim, "ge", 1, body, 0);
    expect_status(resp, 200);
    ck_assert_str_eq(sl_sim_response_header_get(resp, "content-type"), "text/event-stream");
    expect_times(resp, 10, 50);
    char *text = stream_text(resp);
    /* Google ends each event with CRLF CRLF. */
    ck_assert_ptr_nonnull(strstr(text, "}\r\n\r\ndata: "));
    sse_event_t ev[MAX_SSE];
    size_t n = parse_sse(text, ev);
    ck_assert_uint_eq(n, 5);
    char content[256] = "";
    long long candidates = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *cand = json_array_get(json_object_get(ev[i].data, "candidates"), 0);
        json_t *part =
            json_array_get(json_object_get(json_object_get(cand, "content"), "parts"), 0);
        strcat(content, str_at(part, "text", NULL));
        ck_assert((i == n - 1) == (json_object_get(cand, "finishReason") != NULL));
        long long now =
            int_at(json_object_get(ev[i].data, "usageMetadata"), "candidatesTokenCount");
        ck_assert_int_ge(now, candidates);
        candidates = now;
    }
    ck_assert_str_eq(content, "Simulated reply from ge (40 completion tokens).");
    json_t *usage = json_object_get(ev[n - 1].data, "usageMetadata");
    ck_assert_int_eq(int_at(usage, "candidatesTokenCount"), 40);
    ck_assert_int_eq(int_at(usage, "promptTokenCount"), 2);
    ck_assert_int_eq(int_at(usage, "totalTokenCount"), 42);
    free_sse(ev, n);
    free(text);
    done_with(sim, resp);

    /* Without alt=sse: one JSON array, sent piece by piece. */
    resp = call(sim, "/ge/v1beta/models/gemini-2.0-flash:streamGenerateContent", GE_HDRS, NULL,
                body, 1000);
    expect_status(resp, 200);
    ck_assert_uint_gt(sl_sim_response_chunk_count(resp), 2);
    text = stream_text(resp);
    json_t *array = json_loads(text, 0, NULL);
    ck_assert_msg(json_is_array(array), "%s", text);
    ck_assert_uint_eq(json_array_size(array), sl_sim_response_chunk_count(resp) - 1);
    json_decref(array);
    free(text);
    done_with(sim, resp);
    ck_assert_int_eq(stat(sim, "ge", "streams"), 2);
    sl_sim_free(sim);
}
END_TEST

START_TEST(stream_replay_is_instant_and_stats_record_first_chunks)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','ttft_ms':30}]}");
    static const char *const key[] = {"Idempotency-Key", "job-1", "Authorization", "Bearer x",
                                      NULL};
    const char *body = "{'messages':[{'role':'user','content':'x'}],'stream':true}";
    sl_sim_response_t *resp = call(sim, "/s/v1/chat/completions", key, NULL, body, 0);
    const char *id = sl_sim_response_header_get(resp, "x-sim-request-id");
    ck_assert_ptr_nonnull(id);
    char request_id[64];
    snprintf(request_id, sizeof request_id, "%s", id);
    /* The HTTP layer reports when each event left; only the first one's time is kept. */
    for (size_t i = 0; i < sl_sim_response_chunk_count(resp); i++)
        sl_sim_chunk_sent(sim, resp, i, 30 + (int64_t)i);
    done_with(sim, resp);

    sl_sim_response_t *stats = request(sim, "GET", "/stats", NULL, NULL, NULL, 0);
    json_t *js = body_json(stats);
    long long origin = int_at(js, "origin_unix_ms");
    json_t *streams = json_object_get(js, "recent_streams");
    ck_assert_uint_eq(json_array_size(streams), 1);
    json_t *entry = json_array_get(streams, 0);
    ck_assert_str_eq(str_at(entry, "request_id", NULL), request_id);
    ck_assert_str_eq(str_at(entry, "deployment", NULL), "s");
    ck_assert_int_eq(int_at(entry, "first_chunk_ms"), origin + 30);
    ck_assert_int_eq(int_at(entry, "chunks"), 7);
    ck_assert(json_is_false(json_object_get(entry, "cut")));
    json_t *dep = json_object_get(json_object_get(js, "deployments"), "s");
    ck_assert_int_eq(int_at(dep, "last_first_chunk_ms"), origin + 30);
    json_decref(js);
    sl_sim_response_free(stats);

    /* The same key again: the same stream, every event due at once, not charged. */
    resp = call(sim, "/s/v1/chat/completions", key, NULL, body, 10);
    ck_assert_uint_eq(sl_sim_response_chunk_count(resp), 7);
    expect_times(resp, 0, 0);
    done_with(sim, resp);
    ck_assert_int_eq(stat(sim, "s", "replayed"), 1);
    ck_assert_int_eq(stat(sim, "s", "admitted"), 1);

    /* The ring holds the last 100 streams. */
    for (int i = 0; i < 120; i++)
        done_with(sim, chat(sim, "s", body, NULL, 20));
    stats = request(sim, "GET", "/stats", NULL, NULL, NULL, 0);
    js = body_json(stats);
    ck_assert_uint_eq(json_array_size(json_object_get(js, "recent_streams")), 100);
    json_decref(js);
    sl_sim_response_free(stats);
    sl_sim_free(sim);
}
END_TEST

/* ---- Faults -------------------------------------------------------------------------------- */

/* Counts outcomes of n distinct requests to deployment "f" of sim (OpenAI API). */
typedef struct {
    int ok, r429, r429_retry, r503, dropped, slow;
} outcomes_t;

static outcomes_t run_requests(sl_sim_t *sim, int n, int stream)
{
    outcomes_t o = {0, 0, 0, 0, 0, 0};
    char body[256];
    for (int i = 0; i < n; i++) {
        snprintf(body, sizeof body, "{'messages':[{'role':'user','content':'q%d'}],'stream':%s}", i,
                 stream ? "true" : "false");
        sl_sim_response_t *resp = chat(sim, "f", body, NULL, i);
        int status = sl_sim_response_status(resp);
        if (status == 200) {
            o.ok++;
            o.dropped += sl_sim_response_dropped(resp) != 0;
            o.slow += !stream && sl_sim_response_delay_ms(resp) >= 1000;
        } else if (status == 429) {
            o.r429++;
            o.r429_retry += sl_sim_response_header_get(resp, "retry-after") != NULL;
        } else if (status == 503) {
            o.r503++;
        }
        done_with(sim, resp);
    }
    return o;
}

#define FAULTS_CONFIG                                                                              \
    "{'seed':%d,'deployments':[{'name':'f','tpm':100000000,"                                       \
    "'faults':{'rate_limit_share':0.3,'retry_after_share':0.5,"                                    \
    "'retry_after_ms':2500,'overloaded_share':0.1,'slow_share':0.2,"                               \
    "'slow_ms':1000,'drop_share':0.05}}]}"

START_TEST(fault_shares_hold_over_2000_requests)
{
    char cfg[512];
    snprintf(cfg, sizeof cfg, FAULTS_CONFIG, 7);
    sl_sim_t *sim = sim_from(cfg);
    outcomes_t o = run_requests(sim, 2000, 0);
    /* 10 % overloaded: 200 of 2000; of the other 1800, 30 % refused: 540; half of those with a
     * Retry-After; of the 1260 admitted, 20 % slow and 5 % dropped. Tolerances are about 4
     * standard deviations. */
    ck_assert_msg(o.r503 > 150 && o.r503 < 250, "503: %d", o.r503);
    ck_assert_msg(o.r429 > 460 && o.r429 < 620, "429: %d", o.r429);
    ck_assert_msg(o.r429_retry > o.r429 * 0.4 && o.r429_retry < o.r429 * 0.6, "with retry: %d/%d",
                  o.r429_retry, o.r429);
    ck_assert_msg(o.slow > 0.15 * o.ok && o.slow < 0.25 * o.ok, "slow %d of %d", o.slow, o.ok);
    ck_assert_msg(o.dropped > 0.02 * o.ok && o.dropped < 0.08 * o.ok, "dropped %d of %d", o.dropped,
                  o.ok);
    ck_assert_int_eq(o.ok + o.r429 + o.r503, 2000);
    ck_assert_int_eq(stat(sim, "f", "fault_429"), o.r429);
    ck_assert_int_eq(stat(sim, "f", "fault_429_retry_after"), o.r429_retry);
    ck_assert_int_eq(stat(sim, "f", "fault_503"), o.r503);
    ck_assert_int_eq(stat(sim, "f", "slow"), o.slow);
    ck_assert_int_eq(stat(sim, "f", "dropped"), o.dropped);
    ck_assert_int_eq(stat(sim, "f", "admitted"), o.ok);
    /* Refused by a fault costs nothing: only the admitted were charged (1024 tokens each). */
    ck_assert_int_eq(stat(sim, "f", "tokens_charged"), 1024LL * o.ok);
    ck_assert_int_eq(stat(sim, "f", "refused"), 0);
    sl_sim_free(sim);

    /* The same seed gives the same run; another seed another one. */
    sim = sim_from(cfg);
    outcomes_t again = run_requests(sim, 2000, 0);
    sl_sim_free(sim);
    ck_assert_int_eq(again.r429, o.r429);
    ck_assert_int_eq(again.r503, o.r503);
    ck_assert_int_eq(again.slow, o.slow);
    ck_assert_int_eq(again.dropped, o.dropped);
    snprintf(cfg, sizeof cfg, FAULTS_CONFIG, 8);
    sim = sim_from(cfg);
    outcomes_t other = run_requests(sim, 2000, 0);
    sl_sim_free(sim);
    ck_assert(other.r429 != o.r429 || other.r503 != o.r503 || other.slow != o.slow);
}
END_TEST

START_TEST(injected_429s_follow_each_format)
{
    static const char *const apis[] = {"openai", "azure", "anthropic", "gemini"};
    for (int a = 0; a < 4; a++) {
        for (int with_retry = 0; with_retry < 2; with_retry++) {
            char cfg[256];
            snprintf(cfg, sizeof cfg,
                     "{'deployments':[{'name':'d','api':'%s','rpm':600,'faults':{"
                     "'rate_limit_share':1,'retry_after_share':%d,'retry_after_ms':1500}}]}",
                     apis[a], with_retry);
            sl_sim_t *sim = sim_from(cfg);
            sl_sim_response_t *resp =
                a == 0   ? chat(sim, "d", "{'messages':[{'role':'user','content':'x'}]}", NULL, 0)
                : a == 1 ? azure(sim, "d", "{'messages':[{'role':'user','content':'x'}]}", 0)
                : a == 2 ? anthropic(sim, "d",
                                     "{'model':'m','max_tokens':5,'messages':[{'role':'user',"
                                     "'content':'x'}]}",
                                     0)
                         : gemini(sim, "d", 0, "{'contents':[{'parts':[{'text':'x'}]}]}", 0);
            expect_status(resp, 429);
            json_t *js = body_json(resp);
            const char *ra = sl_sim_response_header_get(resp, "retry-after");
            const char *ra_ms = sl_sim_response_header_get(resp, "retry-after-ms");
            if (a < 2) {
                if (with_retry) {
                    ck_assert_ptr_nonnull(ra);
                    ck_assert_ptr_nonnull(ra_ms);
                    ck_assert_int_eq(atoll(ra), 2);
                    ck_assert_int_eq(atoll(ra_ms), 1500);
                } else {
                    ck_assert_ptr_null(ra);
                    ck_assert_ptr_null(ra_ms);
                }
                if (a == 0)
                    ck_assert_str_eq(str_at(js, "error", "code", NULL), "rate_limit_exceeded");
                else
                    ck_assert_str_eq(str_at(js, "error", "code", NULL), "429");
            } else if (a == 2) {
                ck_assert(with_retry ? ra != NULL && atoll(ra) == 2 : ra == NULL);
                ck_assert_ptr_null(ra_ms);
                ck_assert_str_eq(str_at(js, "error", "type", NULL), "rate_limit_error");
            } else {
                ck_assert_ptr_null(ra);
                json_t *retry = google_detail(js, "RetryInfo");
                ck_assert(with_retry ? retry != NULL : retry == NULL);
                if (with_retry)
                    ck_assert_str_eq(str_at(retry, "retryDelay", NULL), "1.5s");
                ck_assert_ptr_nonnull(google_detail(js, "QuotaFailure"));
            }
            json_decref(js);
            sl_sim_response_free(resp);
            ck_assert_int_eq(stat(sim, "d", "fault_429"), 1);
            ck_assert_int_eq(stat(sim, "d", "fault_429_retry_after"), with_retry);
            ck_assert_int_eq(stat(sim, "d", "refused"), 0);
            sl_sim_free(sim);
        }
    }
}
END_TEST

START_TEST(unavailable_windows_refuse_exactly_inside)
{
    static const char *const apis[] = {"openai", "anthropic", "gemini"};
    static const int statuses[] = {503, 529, 503};
    for (int a = 0; a < 3; a++) {
        char cfg[256];
        snprintf(cfg, sizeof cfg,
                 "{'deployments':[{'name':'d','api':'%s','faults':{'unavailable':["
                 "{'from_ms':1000,'to_ms':2000},{'from_ms':5000,'to_ms':5001}]}}]}",
                 apis[a]);
        sl_sim_t *sim = sim_from(cfg);
        static const int64_t times[] = {0, 999, 1000, 1500, 1999, 2000, 4999, 5000, 5001};
        static const int inside[] = {0, 0, 1, 1, 1, 0, 0, 1, 0};
        for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
            sl_sim_response_t *resp =
                a == 0
                    ? chat(sim, "d", "{'messages':[{'role':'user','content':'x'}]}", NULL, times[i])
                : a == 1 ? anthropic(sim, "d",
                                     "{'model':'m','max_tokens':5,'messages':[{'role':'user',"
                                     "'content':'x'}]}",
                                     times[i])
                         : gemini(sim, "d", 0, "{'contents':[{'parts':[{'text':'x'}]}]}", times[i]);
            expect_status(resp, inside[i] ? statuses[a] : 200);
            if (inside[i]) {
                json_t *js = body_json(resp);
                if (a == 0)
                    ck_assert_str_eq(str_at(js, "error", "type", NULL), "server_error");
                else if (a == 1)
                    ck_assert_str_eq(str_at(js, "error", "type", NULL), "overloaded_error");
                else
                    ck_assert_str_eq(str_at(js, "error", "status", NULL), "UNAVAILABLE");
                json_decref(js);
            }
            done_with(sim, resp);
        }
        ck_assert_int_eq(stat(sim, "d", "fault_503"), 4);
        ck_assert_int_eq(stat(sim, "d", "admitted"), 5);
        sl_sim_free(sim);
    }

    /* Counted from the first request instead: that one arrives at 7000. */
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'d','faults':{'unavailable_origin':"
                             "'first_request','unavailable':[{'from_ms':1000,'to_ms':2000}]}}]}");
    static const int64_t times[] = {7000, 7999, 8000, 8999, 9000};
    static const int want[] = {200, 200, 503, 503, 200};
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        sl_sim_response_t *resp =
            chat(sim, "d", "{'messages':[{'role':'user','content':'x'}]}", NULL, times[i]);
        expect_status(resp, want[i]);
        done_with(sim, resp);
    }
    sl_sim_free(sim);
    const char *err =
        config_error("{'deployments':[{'name':'d','faults':{'unavailable_origin':'boot'}}]}");
    ck_assert_msg(strstr(err, "\"unavailable_origin\" must be \"start\" or \"first_request\"") !=
                      NULL,
                  "%s", err);
}
END_TEST

START_TEST(stalled_streams_go_quiet_then_send_the_rest)
{
    /* The same seed and share as the cut streams above: the same streams stall instead. */
    sl_sim_t *sim = sim_from("{'seed':3,'deployments':[{'name':'f','stream_chunks':8,"
                             "'ttft_ms':0,'ms_per_token':0,"
                             "'faults':{'stream_stall_share':0.5,'stream_stall_ms':4000}}]}");
    char body[256];
    int stalled = 0;
    for (int i = 0; i < 200; i++) {
        snprintf(body, sizeof body,
                 "{'messages':[{'role':'user','content':'q%d'}],'stream':true,"
                 "'stream_options':{'include_usage':true}}",
                 i);
        sl_sim_response_t *resp = chat(sim, "f", body, NULL, i);
        expect_status(resp, 200);
        /* Never cut: every event, [DONE] included, on a connection that stays open. */
        ck_assert(!sl_sim_response_dropped(resp));
        size_t n = sl_sim_response_chunk_count(resp);
        ck_assert_uint_eq(n, 11);
        char *text = stream_text(resp);
        ck_assert_ptr_nonnull(strstr(text, "data: [DONE]"));
        free(text);
        /* The first event at once; then either none waits or, from one on, all wait 4 s. */
        int64_t at = -1;
        size_t quiet_from = 0;
        sl_sim_response_chunk(resp, 0, NULL, &at);
        ck_assert_int_eq(at, 0);
        for (size_t e = 1; e < n; e++) {
            sl_sim_response_chunk(resp, e, NULL, &at);
            ck_assert(at == 0 || at == 4000);
            if (at == 4000 && quiet_from == 0)
                quiet_from = e;
            if (quiet_from > 0)
                ck_assert_int_eq(at, 4000);
        }
        stalled += quiet_from > 0;
        done_with(sim, resp);
    }
    ck_assert_msg(stalled > 70 && stalled < 130, "%d stalled", stalled);
    ck_assert_int_eq(stat(sim, "f", "stalled"), stalled);
    ck_assert_int_eq(stat(sim, "f", "dropped"), 0);
    sl_sim_free(sim);
    /* Plain requests never stall. */
    sim = sim_from("{'deployments':[{'name':'f','faults':{'stream_stall_share':1}}]}");
    outcomes_t o = run_requests(sim, 20, 0);
    ck_assert_int_eq(o.ok, 20);
    ck_assert_int_eq(stat(sim, "f", "stalled"), 0);
    sl_sim_free(sim);
}
END_TEST

START_TEST(cut_streams_stop_before_their_end)
{
    sl_sim_t *sim = sim_from("{'seed':3,'deployments':[{'name':'f','stream_chunks':8,"
                             "'faults':{'stream_cut_share':0.5}}]}");
    char body[256];
    int cut = 0;
    for (int i = 0; i < 200; i++) {
        snprintf(body, sizeof body,
                 "{'messages':[{'role':'user','content':'q%d'}],'stream':true,"
                 "'stream_options':{'include_usage':true}}",
                 i);
        sl_sim_response_t *resp = chat(sim, "f", body, NULL, i);
        expect_status(resp, 200);
        size_t n = sl_sim_response_chunk_count(resp);
        char *text = stream_text(resp);
        if (sl_sim_response_dropped(resp)) {
            cut++;
            /* At least one event, never the closing [DONE]. */
            ck_assert_uint_ge(n, 1);
            ck_assert_uint_lt(n, 11);
            ck_assert_ptr_null(strstr(text, "[DONE]"));
        } else {
            ck_assert_uint_eq(n, 11);
            ck_assert_ptr_nonnull(strstr(text, "data: [DONE]"));
        }
        free(text);
        done_with(sim, resp);
    }
    ck_assert_msg(cut > 70 && cut < 130, "%d cut", cut);
    ck_assert_int_eq(stat(sim, "f", "dropped"), cut);
    /* drop_share does not apply to streams once stream_cut_share is set. */
    sl_sim_free(sim);
    sim = sim_from("{'deployments':[{'name':'f','faults':{'drop_share':1,"
                   "'stream_cut_share':0}}]}");
    outcomes_t o = run_requests(sim, 20, 1);
    ck_assert_int_eq(o.dropped, 0);
    o = run_requests(sim, 20, 0);
    ck_assert_int_eq(o.dropped, 20);
    sl_sim_free(sim);
}
END_TEST

START_TEST(early_retries_and_rings_record_retry_afters)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'f','faults':{'rate_limit_share':1,"
                             "'retry_after_ms':1000}}]}");
    static const char *const key[] = {"Idempotency-Key", "job-7", "Authorization", "Bearer x",
                                      NULL};
    const char *body = "{'messages':[{'role':'user','content':'x'}]}";
    const char *path = "/f/v1/chat/completions";
    /* Every answer is a 429 with a wait of 1000 ms from its own time: back at 400 (early),
     * 1399 (early: the 429 at 400 said 1400), 2399 (on time). */
    static const int64_t times[] = {0, 400, 1399, 2399};
    for (size_t i = 0; i < 4; i++) {
        sl_sim_response_t *resp = call(sim, path, key, NULL, body, times[i]);
        expect_status(resp, 429);
        sl_sim_response_free(resp);
    }
    /* Another key, or none, is never early. */
    done_with(sim, chat(sim, "f", body, "job-8", 500));
    done_with(sim, chat(sim, "f", body, NULL, 500));
    ck_assert_int_eq(stat(sim, "f", "early_retries"), 2);

    sl_sim_response_t *stats = request(sim, "GET", "/stats", NULL, NULL, NULL, 0);
    json_t *js = body_json(stats);
    long long origin = int_at(js, "origin_unix_ms");
    json_t *dep = json_object_get(json_object_get(js, "deployments"), "f");
    json_t *retries = json_object_get(dep, "retry_after_429s");
    ck_assert_uint_eq(json_array_size(retries), 6);
    json_t *first = json_array_get(retries, 0);
    ck_assert_int_eq(int_at(first, "sent_ms"), origin);
    ck_assert_int_eq(int_at(first, "retry_after_ms"), 1000);
    ck_assert(json_is_true(json_object_get(first, "fault")));
    ck_assert_str_eq(str_at(first, "idempotency_key", NULL), "job-7");
    ck_assert(json_is_null(json_object_get(json_array_get(retries, 5), "idempotency_key")));
    json_t *arrivals = json_object_get(dep, "arrivals");
    ck_assert_uint_eq(json_array_size(arrivals), 6);
    ck_assert_int_eq(int_at(json_array_get(arrivals, 1), "at_ms"), origin + 400);
    ck_assert_int_eq(int_at(json_array_get(arrivals, 1), "status"), 429);
    json_decref(js);
    sl_sim_response_free(stats);

    /* A reset empties the rings and counters. */
    sl_sim_response_free(request(sim, "POST", "/stats/reset", NULL, NULL, NULL, 0));
    ck_assert_int_eq(stat(sim, "f", "early_retries"), 0);
    ck_assert_int_eq(stat(sim, "f", "fault_429"), 0);
    stats = request(sim, "GET", "/stats", NULL, NULL, NULL, 0);
    js = body_json(stats);
    dep = json_object_get(json_object_get(js, "deployments"), "f");
    ck_assert_uint_eq(json_array_size(json_object_get(dep, "retry_after_429s")), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(dep, "arrivals")), 0);
    json_decref(js);
    sl_sim_response_free(stats);

    /* The ring keeps the last 1000. */
    for (int i = 0; i < 1100; i++)
        sl_sim_response_free(chat(sim, "f", body, NULL, 2000 + i));
    stats = request(sim, "GET", "/stats", NULL, NULL, NULL, 0);
    js = body_json(stats);
    dep = json_object_get(json_object_get(js, "deployments"), "f");
    retries = json_object_get(dep, "retry_after_429s");
    ck_assert_uint_eq(json_array_size(retries), 1000);
    ck_assert_int_eq(int_at(json_array_get(retries, 0), "sent_ms"), origin + 2100);
    json_decref(js);
    sl_sim_response_free(stats);
    sl_sim_free(sim);
}
END_TEST

/* An acceleration limit: at most max(floor, previous window x (1 + growth)) a window. */
START_TEST(acceleration_limit_caps_growth_per_window)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'d','rpm':1000000,'faults':"
                             "{'acceleration':{'window_ms':1000,'growth':0.5,'floor':4}}}]}");
    int ok[3] = {0, 0, 0};
    /* 20 requests in each of three windows: 4 pass (the floor), then 6, then 9 */
    for (int w = 0; w < 3; w++) {
        for (int i = 0; i < 20; i++) {
            sl_sim_response_t *resp =
                chat(sim, "d", "{'messages':[{'role':'user','content':'x'}]}", NULL,
                     1000 + w * 1000 + i);
            ok[w] += sl_sim_response_status(resp) == 200;
            done_with(sim, resp);
        }
    }
    ck_assert_int_eq(ok[0], 4);
    ck_assert_int_eq(ok[1], 6);
    ck_assert_int_eq(ok[2], 9);
    ck_assert_int_eq(stat(sim, "d", "fault_acceleration"), 60 - 19);
    ck_assert_int_eq(stat(sim, "d", "fault_429"), 0);
    /* after an idle window it starts again from the floor */
    int again = 0;
    for (int i = 0; i < 10; i++) {
        sl_sim_response_t *resp =
            chat(sim, "d", "{'messages':[{'role':'user','content':'x'}]}", NULL, 9000 + i);
        again += sl_sim_response_status(resp) == 200;
        done_with(sim, resp);
    }
    ck_assert_int_eq(again, 4);
    sl_sim_free(sim);
}
END_TEST

START_TEST(fault_and_api_config_keys_are_validated)
{
    const char *err = config_error("{'deployments':[{'name':'s','api':'bedrock'}]}");
    ck_assert_msg(strstr(err, "\"api\" must be \"openai\" or \"azure\" or \"anthropic\" or "
                              "\"gemini\"") != NULL,
                  "%s", err);
    err = config_error("{'deployments':[{'name':'s','faults':{'rate_limit':0.1}}]}");
    ck_assert_msg(strstr(err, "faults: unknown key \"rate_limit\"") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','faults':{'drop_share':1.5}}]}");
    ck_assert_msg(strstr(err, "drop_share") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','faults':{'unavailable':[{'from_ms':5,"
                       "'to_ms':5}]}}]}");
    ck_assert_msg(strstr(err, "unavailable[0]: needs \"from_ms\" < \"to_ms\"") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','faults':{'unavailable':[{'from_ms':5,"
                       "'to_ms':9,'why':1}]}}]}");
    ck_assert_msg(strstr(err, "unknown key \"why\"") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','faults':{'slow_ms':-1}}]}");
    ck_assert_msg(strstr(err, "slow_ms") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','faults':[]}]}");
    ck_assert_msg(strstr(err, "faults: must be an object") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','stream_chunks':0}]}");
    ck_assert_msg(strstr(err, "stream_chunks") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','tool_use_share':2}]}");
    ck_assert_msg(strstr(err, "tool_use_share") != NULL, "%s", err);
    err = config_error("{'seed':-1,'deployments':[{'name':'s'}]}");
    ck_assert_msg(strstr(err, "seed") != NULL, "%s", err);

    /* Accepted: every key, and explicit header styles. */
    sl_sim_t *sim =
        sim_from("{'seed':1,'deployments':[{'name':'s','api':'gemini','headers':'openai','rpm':5,"
                 "'faults':{'rate_limit_share':0,'retry_after_share':1,'retry_after_ms':10,"
                 "'unavailable':[],'unavailable_origin':'start','overloaded_share':0,'slow_share':"
                 "0,'slow_ms':5,'drop_share':0,"
                 "'stream_cut_share':0,'spend_limit_after':10,'seed':4}}]}");
    sl_sim_response_t *resp = gemini(sim, "s", 0, "{'contents':[{'parts':[{'text':'x'}]}]}", 0);
    expect_status(resp, 200);
    /* A Gemini deployment with OpenAI-style headers sends them. */
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-limit-requests"), 5);
    done_with(sim, resp);
    sl_sim_free(sim);
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

/* What a client saw of one streamed exchange: when each piece arrived (on the server's clock)
 * and the bytes. */
typedef struct {
    sl_sim_server_t *server;
    int64_t arrival_ms[256];
    size_t n;
    buf_t data;
} stream_rec_t;

static size_t record_stream(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    stream_rec_t *rec = userdata;
    if (rec->n < sizeof rec->arrival_ms / sizeof rec->arrival_ms[0])
        rec->arrival_ms[rec->n++] = sl_sim_server_now_ms(rec->server);
    return collect(ptr, size, nmemb, &rec->data);
}

/* POSTs body to path with the given extra header lines; returns curl's result, the status in
 * *status and the response headers (lower-cased) in hdrs. */
static CURLcode http_stream(uint16_t port, const char *path, const char *const *lines,
                            const char *body, stream_rec_t *rec, buf_t *hdrs, long *status)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
    CURL *curl = curl_easy_init();
    ck_assert_ptr_nonnull(curl);
    struct curl_slist *list = curl_slist_append(NULL, "Content-Type: application/json");
    for (size_t i = 0; lines != NULL && lines[i] != NULL; i++)
        list = curl_slist_append(list, lines[i]);
    memset(hdrs, 0, sizeof *hdrs);
    memset(&rec->data, 0, sizeof rec->data);
    rec->n = 0;
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, hdrs);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, record_stream);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, rec);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 5L);
    CURLcode cc = curl_easy_perform(curl);
    *status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(list);
    curl_easy_cleanup(curl);
    for (char *c = hdrs->data; *c; c++) {
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    }
    return cc;
}

/* The value of a response header line "name: value\r\n" in lower-cased headers, copied. */
static void header_value(const buf_t *hdrs, const char *name, char *out, size_t cap)
{
    char want[64];
    snprintf(want, sizeof want, "%s: ", name);
    const char *at = strstr(hdrs->data, want);
    ck_assert_msg(at != NULL, "no header %s in %s", name, hdrs->data);
    at += strlen(want);
    size_t n = strcspn(at, "\r\n");
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), at);
}

START_TEST(http_streams_each_event_when_it_is_due)
{
    sl_sim_t *sim = sim_from(
        "{'deployments':[{'name':'oa','rpm':6000,'output_min':40,'output_max':40,'ttft_ms':100,"
        "'ms_per_token':5,'stream_chunks':4},{'name':'an','api':'anthropic','api_key':'k',"
        "'output_min':40,'output_max':40,'ttft_ms':100,'ms_per_token':5,'stream_chunks':4},"
        "{'name':'ge','api':'gemini','output_min':40,'output_max':40,'ttft_ms':100,"
        "'ms_per_token':5,'stream_chunks':4}]}");
    sl_sim_server_t *server = NULL;
    ck_assert_int_eq(sl_sim_server_start(sim, "127.0.0.1", 0, &server), SL_OK);
    uint16_t port = sl_sim_server_port(server);
    stream_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.server = server;
    buf_t hdrs;
    long status = 0;

    static const char *const oa_lines[] = {"Authorization: Bearer k", NULL};
    static const char *const an_lines[] = {"x-api-key: k", "anthropic-version: 2023-06-01", NULL};
    static const char *const ge_lines[] = {"x-goog-api-key: k", NULL};
    const struct {
        const char *path;
        const char *const *lines;
        const char *body;
        const char *last;
    } cases[] = {
        {"/oa/v1/chat/completions", oa_lines,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true}",
         "data: [DONE]\n\n"},
        {"/an/v1/messages", an_lines,
         "{\"model\":\"m\",\"max_tokens\":100,\"stream\":true,\"messages\":[{\"role\":\"user\","
         "\"content\":\"hi\"}]}",
         "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
        {"/ge/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse", ge_lines,
         "{\"contents\":[{\"parts\":[{\"text\":\"hi\"}]}]}", "\r\n\r\n"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t t0 = sl_sim_server_now_ms(server);
        CURLcode cc =
            http_stream(port, cases[c].path, cases[c].lines, cases[c].body, &rec, &hdrs, &status);
        ck_assert_msg(cc == CURLE_OK, "%s: curl: %s", cases[c].path, curl_easy_strerror(cc));
        ck_assert_int_eq(status, 200);
        ck_assert_ptr_nonnull(strstr(hdrs.data, "content-type: text/event-stream"));
        ck_assert_msg(ends_with_text(rec.data.data, cases[c].last), "%s ends %s", cases[c].path,
                      rec.data.data);
        /* The first event at ttft (100 ms), the last at 100 + 5 * 40 = 300 ms, and pieces in
         * between, as they were due, not all at once. */
        ck_assert_uint_ge(rec.n, 3);
        int64_t first = rec.arrival_ms[0] - t0;
        int64_t last = rec.arrival_ms[rec.n - 1] - t0;
        ck_assert_msg(first >= 95 && first < 250, "%s: first piece after %lld ms", cases[c].path,
                      (long long)first);
        ck_assert_msg(last >= 295 && last - first >= 150, "%s: last piece after %lld ms",
                      cases[c].path, (long long)last);

        /* /stats says when the first event left; the client saw it within 50 ms. */
        char id[64];
        header_value(&hdrs, "x-sim-request-id", id, sizeof id);
        sl_sim_response_t *stats = request(sim, "GET", "/stats", NULL, NULL, NULL, 0);
        json_t *js = body_json(stats);
        long long origin = int_at(js, "origin_unix_ms");
        json_t *streams = json_object_get(js, "recent_streams");
        json_t *entry = json_array_get(streams, json_array_size(streams) - 1);
        ck_assert_str_eq(str_at(entry, "request_id", NULL), id);
        long long sent = int_at(entry, "first_chunk_ms") - origin;
        ck_assert_msg(rec.arrival_ms[0] >= sent - 1 && rec.arrival_ms[0] - sent <= 50,
                      "sent at %lld, seen at %lld", sent, (long long)rec.arrival_ms[0]);
        ck_assert(json_is_false(json_object_get(entry, "cut")));
        json_decref(js);
        sl_sim_response_free(stats);
    }
    /* Every stream has finished: nothing is in flight. */
    ck_assert_int_eq(stat(sim, "oa", "in_flight"), 0);
    ck_assert_int_eq(stat(sim, "an", "in_flight"), 0);
    sl_sim_server_stop(server);
    sl_sim_free(sim);
}
END_TEST

START_TEST(http_drops_close_the_connection_early)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'d','ttft_ms':20,'ms_per_token':0.1,"
                             "'faults':{'drop_share':1,'stream_cut_share':1}}]}");
    sl_sim_server_t *server = NULL;
    ck_assert_int_eq(sl_sim_server_start(sim, "127.0.0.1", 0, &server), SL_OK);
    uint16_t port = sl_sim_server_port(server);
    stream_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.server = server;
    buf_t hdrs;
    long status = 0;
    static const char *const lines[] = {"Authorization: Bearer k", NULL};
    /* A plain answer: nothing at all comes back. */
    CURLcode cc = http_stream(port, "/d/v1/chat/completions", lines,
                              "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &rec,
                              &hdrs, &status);
    ck_assert_msg(cc == CURLE_GOT_NOTHING, "curl: %s", curl_easy_strerror(cc));
    /* A stream: some events, then the transfer is cut without [DONE]. */
    cc = http_stream(port, "/d/v1/chat/completions", lines,
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true}",
                     &rec, &hdrs, &status);
    ck_assert_msg(cc != CURLE_OK, "a cut stream completed");
    ck_assert_int_eq(status, 200);
    ck_assert_ptr_nonnull(strstr(rec.data.data, "data: {"));
    ck_assert_ptr_null(strstr(rec.data.data, "[DONE]"));
    ck_assert_int_eq(stat(sim, "d", "dropped"), 2);
    /* Both were finished when their connections closed. */
    for (int i = 0; i < 100 && stat(sim, "d", "in_flight") != 0; i++)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    ck_assert_int_eq(stat(sim, "d", "in_flight"), 0);
    sl_sim_server_stop(server);
    sl_sim_free(sim);
}
END_TEST

/* ---- Rolling minute ----------------------------------------------------------------------- */

static const int64_t ONE_REQUEST[SL_SIM_DIM_COUNT_] = {
    [SL_SIM_DIM_REQUESTS] = 1,
    [SL_SIM_DIM_REQUESTS_DAY] = 1,
};

/* A limiter of limit in dim alone, with or without the rolling minute. */
static sl_sim_limiter_t *limiter_of(sl_sim_dim_t dim, int64_t limit, int64_t slices,
                                    int64_t minute_ms, bool rolling)
{
    sl_sim_limits_t limits = {
        .slices_per_minute = slices,
        .minute_ms = minute_ms,
        .day_ms = 86400000,
        .rolling_minute = rolling,
    };
    limits.limit[dim] = limit;
    sl_sim_limiter_t *lim = NULL;
    ck_assert_int_eq(sl_sim_limiter_new_limits(&limits, 0, &lim), SL_OK);
    return lim;
}

START_TEST(rolling_minute_refuses_what_the_bucket_would_admit)
{
    /* 6000 TPM in 60 slices: burst 100 tokens, refill 100 per second. */
    sl_sim_limiter_t *plain = limiter_of(SL_SIM_DIM_TOKENS, 6000, 60, 60000, false);
    sl_sim_limiter_t *rolling = limiter_of(SL_SIM_DIM_TOKENS, 6000, 60, 60000, true);
    /* A minute of steady traffic that the bucket always has room for: 50 tokens a second. */
    int64_t steady[SL_SIM_DIM_COUNT_] = {[SL_SIM_DIM_REQUESTS] = 1, [SL_SIM_DIM_TOKENS] = 50};
    for (int64_t t = 0; t < 60000; t += 1000) {
        ck_assert_int_eq(sl_sim_limiter_admit_all(plain, steady, t, NULL, NULL), 1);
        ck_assert_int_eq(sl_sim_limiter_admit_all(rolling, steady, t, NULL, NULL), 1);
    }
    /* At 60000 the bucket is full again, and the charges of 1000..59000 are in the window. */
    ck_assert_double_eq_tol(sl_sim_limiter_level(rolling, SL_SIM_DIM_TOKENS, 60000), 100.0, 1e-9);
    ck_assert_int_eq(sl_sim_limiter_rolling_used(rolling, SL_SIM_DIM_TOKENS, 60000), 59 * 50);
    ck_assert_int_eq(sl_sim_limiter_rolling_used(plain, SL_SIM_DIM_TOKENS, 60000), 0);

    /* 3500 tokens, more than the burst: a full bucket admits it, the rolling minute cannot
     * (2950 + 3500 > 6000) until the 450 tokens of 1000..9000 have expired, at 69000. */
    int64_t big[SL_SIM_DIM_COUNT_] = {[SL_SIM_DIM_REQUESTS] = 1, [SL_SIM_DIM_TOKENS] = 3500};
    sl_sim_refusal_t refusal = {.dim = SL_SIM_DIM_REQUESTS};
    ck_assert_int_eq(sl_sim_limiter_check_refusal(rolling, big, 60000, &refusal), 0);
    ck_assert_int_eq(refusal.dim, SL_SIM_DIM_TOKENS);
    ck_assert_int_eq(refusal.wait_ms, 9000);
    ck_assert(refusal.rolling);
    sl_sim_dim_t dim = SL_SIM_DIM_REQUESTS;
    int64_t wait_ms = 0;
    ck_assert_int_eq(sl_sim_limiter_check_all(rolling, big, 60000, &dim, &wait_ms), 0);
    ck_assert_int_eq(dim, SL_SIM_DIM_TOKENS);
    ck_assert_int_eq(wait_ms, 9000);
    ck_assert_int_eq(sl_sim_limiter_admit_all(rolling, big, 60000, &dim, &wait_ms), 0);
    ck_assert_int_eq(wait_ms, 9000);
    /* Refusals charge nothing, in the bucket or the window. */
    ck_assert_double_eq_tol(sl_sim_limiter_level(rolling, SL_SIM_DIM_TOKENS, 60000), 100.0, 1e-9);
    ck_assert_int_eq(sl_sim_limiter_rolling_used(rolling, SL_SIM_DIM_TOKENS, 60000), 59 * 50);

    ck_assert_int_eq(sl_sim_limiter_check_all(plain, big, 60000, NULL, NULL), 1);
    ck_assert_int_eq(sl_sim_limiter_admit_all(plain, big, 60000, NULL, NULL), 1);
    sl_sim_limiter_free(plain);
    sl_sim_limiter_free(rolling);
}
END_TEST

START_TEST(rolling_minute_frees_room_as_charges_age)
{
    /* 10 RPM in one slice: the bucket holds 10 and refills one every 6 s. */
    sl_sim_limiter_t *lim = limiter_of(SL_SIM_DIM_REQUESTS, 10, 1, 60000, true);
    for (int64_t t = 0; t < 10000; t += 1000)
        ck_assert_int_eq(sl_sim_limiter_admit_all(lim, ONE_REQUEST, t, NULL, NULL), 1);
    /* The bucket has a request again, the window has room when the charge of 0 expires. */
    ck_assert_int_eq(sl_sim_limiter_remaining(lim, SL_SIM_DIM_REQUESTS, 10000), 1);
    sl_sim_refusal_t refusal = {.dim = SL_SIM_DIM_TOKENS};
    ck_assert_int_eq(sl_sim_limiter_check_refusal(lim, ONE_REQUEST, 10000, &refusal), 0);
    ck_assert_int_eq(refusal.dim, SL_SIM_DIM_REQUESTS);
    ck_assert_int_eq(refusal.wait_ms, 50000);
    ck_assert(refusal.rolling);
    /* The wait is exact: one millisecond early is still refused. */
    sl_sim_dim_t dim = SL_SIM_DIM_TOKENS;
    int64_t wait_ms = 0;
    ck_assert_int_eq(sl_sim_limiter_admit_all(lim, ONE_REQUEST, 59999, &dim, &wait_ms), 0);
    ck_assert_int_eq(dim, SL_SIM_DIM_REQUESTS);
    ck_assert_int_eq(wait_ms, 1);
    ck_assert_int_eq(sl_sim_limiter_rolling_used(lim, SL_SIM_DIM_REQUESTS, 59999), 10);
    ck_assert_int_eq(sl_sim_limiter_admit_all(lim, ONE_REQUEST, 60000, NULL, NULL), 1);
    ck_assert_int_eq(sl_sim_limiter_rolling_used(lim, SL_SIM_DIM_REQUESTS, 60000), 10);
    /* The next room comes with the charge of 1000. */
    ck_assert_int_eq(sl_sim_limiter_admit_all(lim, ONE_REQUEST, 60000, &dim, &wait_ms), 0);
    ck_assert_int_eq(wait_ms, 1000);
    /* A time earlier than the last one seen counts as no time. */
    ck_assert_int_eq(sl_sim_limiter_admit_all(lim, ONE_REQUEST, 30000, &dim, &wait_ms), 0);
    ck_assert_int_eq(wait_ms, 1000);
    ck_assert_int_eq(sl_sim_limiter_rolling_used(lim, SL_SIM_DIM_REQUESTS, 30000), 10);
    ck_assert_int_eq(sl_sim_limiter_admit_all(lim, ONE_REQUEST, 61000, NULL, NULL), 1);
    sl_sim_limiter_free(lim);
}
END_TEST

START_TEST(rolling_minute_keeps_charges_as_admitted)
{
    /* 1000 OTPM in one slice. A refund gives the bucket room back, not the window. */
    sl_sim_limiter_t *lim = limiter_of(SL_SIM_DIM_OUTPUT_TOKENS, 1000, 1, 60000, true);
    int64_t cost[SL_SIM_DIM_COUNT_] = {[SL_SIM_DIM_OUTPUT_TOKENS] = 800};
    ck_assert_int_eq(sl_sim_limiter_admit_all(lim, cost, 0, NULL, NULL), 1);
    sl_sim_limiter_refund(lim, SL_SIM_DIM_OUTPUT_TOKENS, 700);
    ck_assert_double_eq_tol(sl_sim_limiter_level(lim, SL_SIM_DIM_OUTPUT_TOKENS, 0), 900.0, 1e-9);
    ck_assert_int_eq(sl_sim_limiter_rolling_used(lim, SL_SIM_DIM_OUTPUT_TOKENS, 0), 800);
    cost[SL_SIM_DIM_OUTPUT_TOKENS] = 500;
    sl_sim_refusal_t refusal = {.dim = SL_SIM_DIM_REQUESTS};
    ck_assert_int_eq(sl_sim_limiter_check_refusal(lim, cost, 0, &refusal), 0);
    ck_assert_int_eq(refusal.dim, SL_SIM_DIM_OUTPUT_TOKENS);
    ck_assert_int_eq(refusal.wait_ms, 60000);
    ck_assert(refusal.rolling);
    /* 200 still fit the window; a cost of 0 never needs room. */
    cost[SL_SIM_DIM_OUTPUT_TOKENS] = 200;
    ck_assert_int_eq(sl_sim_limiter_admit_all(lim, cost, 0, NULL, NULL), 1);
    cost[SL_SIM_DIM_OUTPUT_TOKENS] = 0;
    ck_assert_int_eq(sl_sim_limiter_admit_all(lim, cost, 0, NULL, NULL), 1);
    ck_assert_int_eq(sl_sim_limiter_rolling_used(lim, SL_SIM_DIM_OUTPUT_TOKENS, 0), 1000);
    sl_sim_limiter_free(lim);

    /* A refused request counted against RPM is not admitted, so the window does not count it. */
    lim = limiter_of(SL_SIM_DIM_REQUESTS, 10, 1, 60000, true);
    sl_sim_limiter_charge_request(lim, 0);
    ck_assert_double_eq_tol(sl_sim_limiter_level(lim, SL_SIM_DIM_REQUESTS, 0), 9.0, 1e-9);
    ck_assert_int_eq(sl_sim_limiter_rolling_used(lim, SL_SIM_DIM_REQUESTS, 0), 0);
    sl_sim_limiter_free(lim);
}
END_TEST

START_TEST(rolling_window_shares_an_entry_per_millisecond)
{
    sl_sim_rolling_t *win = NULL;
    ck_assert_int_eq(sl_sim_rolling_new(0, 1000, 0, &win), SL_EINVAL);
    ck_assert_int_eq(sl_sim_rolling_new(100, 0, 0, &win), SL_EINVAL);
    ck_assert_ptr_null(win);
    ck_assert_int_eq(sl_sim_rolling_new(100, 1000, 0, &win), SL_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(sl_sim_rolling_wait_ms(win, 10, 0), 0);
        sl_sim_rolling_add(win, 10, 0);
    }
    ck_assert_uint_eq(sl_sim_rolling_entries(win), 1);
    sl_sim_rolling_add(win, 10, 500);
    ck_assert_uint_eq(sl_sim_rolling_entries(win), 2);
    /* A charge counts in [t, t + 1000). */
    ck_assert_int_eq(sl_sim_rolling_sum(win, 999), 40);
    ck_assert_int_eq(sl_sim_rolling_sum(win, 1000), 10);
    /* 10 + 95 > 100 until the charge of 500 expires; so for a cost above the whole limit,
     * which needs an empty window. */
    ck_assert_int_eq(sl_sim_rolling_wait_ms(win, 95, 1000), 500);
    ck_assert_int_eq(sl_sim_rolling_wait_ms(win, 150, 1000), 500);
    ck_assert_uint_eq(sl_sim_rolling_entries(win), 1);
    ck_assert_int_eq(sl_sim_rolling_wait_ms(win, 95, 200), 500);
    ck_assert_int_eq(sl_sim_rolling_wait_ms(win, 90, 1000), 0);
    ck_assert_int_eq(sl_sim_rolling_wait_ms(win, 0, 1000), 0);
    sl_sim_rolling_free(win);
    sl_sim_rolling_free(NULL);
}
END_TEST

START_TEST(rolling_minute_refuses_past_its_entry_bound)
{
    /* 2,000,000 RPM over an hour-long minute in one slice: neither the bucket nor the limit
     * refuses a request a millisecond, but the window holds charges of at most
     * SL_SIM_ROLLING_ENTRIES_MAX distinct milliseconds. */
    sl_sim_limiter_t *lim = limiter_of(SL_SIM_DIM_REQUESTS, 2000000, 1, 3600000, true);
    int64_t t = 0;
    for (; t < SL_SIM_ROLLING_ENTRIES_MAX; t++)
        ck_assert_int_eq(sl_sim_limiter_admit_all(lim, ONE_REQUEST, t, NULL, NULL), 1);
    /* A charge in the newest millisecond shares its entry. */
    ck_assert_int_eq(sl_sim_limiter_admit_all(lim, ONE_REQUEST, t - 1, NULL, NULL), 1);
    ck_assert_int_eq(sl_sim_limiter_rolling_used(lim, SL_SIM_DIM_REQUESTS, t),
                     SL_SIM_ROLLING_ENTRIES_MAX + 1);
    /* A new millisecond waits for the oldest entry, of 0, to expire. */
    sl_sim_refusal_t refusal = {.dim = SL_SIM_DIM_TOKENS};
    ck_assert_int_eq(sl_sim_limiter_check_refusal(lim, ONE_REQUEST, t, &refusal), 0);
    ck_assert_int_eq(refusal.dim, SL_SIM_DIM_REQUESTS);
    ck_assert_int_eq(refusal.wait_ms, 3600000 - t);
    ck_assert(refusal.rolling);
    ck_assert_int_gt(sl_sim_limiter_remaining(lim, SL_SIM_DIM_REQUESTS, t), 0);
    ck_assert_int_eq(sl_sim_limiter_admit_all(lim, ONE_REQUEST, 3599999, NULL, NULL), 0);
    ck_assert_int_eq(sl_sim_limiter_admit_all(lim, ONE_REQUEST, 3600000, NULL, NULL), 1);
    ck_assert_int_eq(sl_sim_limiter_rolling_used(lim, SL_SIM_DIM_REQUESTS, 3600000),
                     SL_SIM_ROLLING_ENTRIES_MAX + 1);
    sl_sim_limiter_free(lim);
}
END_TEST

START_TEST(rolling_minute_is_off_by_default)
{
    /* The shorthand and a limits bundle that does not ask for it keep the bucket alone. */
    sl_sim_limiter_t *lim = NULL;
    ck_assert_int_eq(sl_sim_limiter_new(10, 0, 1, 60000, 0, &lim), SL_OK);
    for (int64_t t = 0; t < 10000; t += 1000)
        ck_assert_int_eq(sl_sim_limiter_admit_all(lim, ONE_REQUEST, t, NULL, NULL), 1);
    ck_assert_int_eq(sl_sim_limiter_admit_all(lim, ONE_REQUEST, 10000, NULL, NULL), 1);
    ck_assert_int_eq(sl_sim_limiter_rolling_used(lim, SL_SIM_DIM_REQUESTS, 10000), 0);
    sl_sim_limiter_free(lim);

    /* A deployment without the key (or with false) admits what its bucket admits. */
    const char *const configs[] = {
        "{'deployments':[{'name':'s','rpm':10,'slices_per_minute':1}]}",
        "{'deployments':[{'name':'s','rpm':10,'slices_per_minute':1,'rolling_minute':false}]}",
        "{'deployments':[{'name':'s','rpm':10,'slices_per_minute':1,'rolling_minute':null}]}",
    };
    const char *body = "{'messages':[{'role':'user','content':'x'}]}";
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        sl_sim_t *sim = sim_from(configs[i]);
        for (int64_t t = 0; t < 10000; t += 1000)
            chat_expect(sim, "s", body, t, 200);
        chat_expect(sim, "s", body, 10000, 200);
        chat_expect(sim, "s", body, 10000, 429);
        ck_assert_int_eq(stat(sim, "s", "refused"), 1);
        ck_assert_int_eq(stat(sim, "s", "refused_rolling"), 0);
        sl_sim_free(sim);
    }
}
END_TEST

START_TEST(rolling_minute_refusals_are_limit_429s_counted_apart)
{
    /* 10 RPM in two slices: the bucket holds 5 and refills one every 6 s. */
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'s','model':'m1','rpm':10,"
                             "'slices_per_minute':2,'rolling_minute':true}]}");
    const char *body = "{'messages':[{'role':'user','content':'x'}]}";
    for (int i = 0; i < 5; i++)
        chat_expect(sim, "s", body, 0, 200);
    /* The bucket refuses (the window has room for 5 more). */
    sl_sim_response_t *resp = chat(sim, "s", body, NULL, 0);
    ck_assert_int_eq(sl_sim_response_status(resp), 429);
    ck_assert_int_eq(header_ll(resp, "retry-after-ms"), 6000);
    sl_sim_response_free(resp);
    ck_assert_int_eq(stat(sim, "s", "refused_requests_dim"), 1);
    ck_assert_int_eq(stat(sim, "s", "refused_rolling"), 0);

    /* Full again at 30000; after 5 more the window holds all 10 until 60000. */
    for (int i = 0; i < 5; i++)
        chat_expect(sim, "s", body, 30000, 200);
    resp = chat(sim, "s", body, NULL, 36000);
    ck_assert_int_eq(sl_sim_response_status(resp), 429);
    ck_assert_int_eq(header_ll(resp, "retry-after-ms"), 24000);
    ck_assert_int_eq(header_ll(resp, "retry-after"), 24);
    /* The headers report the bucket, which has a request again. */
    ck_assert_int_eq(header_ll(resp, "x-ratelimit-remaining-requests"), 1);
    json_t *js = body_json(resp);
    json_t *err = json_object_get(js, "error");
    ck_assert_str_eq(json_string_value(json_object_get(err, "type")), "requests");
    ck_assert_str_eq(json_string_value(json_object_get(err, "code")), "rate_limit_exceeded");
    ck_assert_msg(strstr(json_string_value(json_object_get(err, "message")),
                         "on requests per min (RPM): Limit 10, Used 9, Requested 1. Please try "
                         "again in 24s.") != NULL,
                  "%s", json_string_value(json_object_get(err, "message")));
    json_decref(js);
    sl_sim_response_free(resp);
    ck_assert_int_eq(stat(sim, "s", "refused"), 2);
    ck_assert_int_eq(stat(sim, "s", "refused_requests_dim"), 2);
    ck_assert_int_eq(stat(sim, "s", "refused_rolling"), 1);

    chat_expect(sim, "s", body, 59999, 429);
    chat_expect(sim, "s", body, 60000, 200);
    ck_assert_int_eq(stat(sim, "s", "refused_rolling"), 2);
    sl_sim_free(sim);
}
END_TEST

START_TEST(rolling_minute_config_must_be_boolean)
{
    const char *err = config_error("{'deployments':[{'name':'s','rpm':1,'rolling_minute':1}]}");
    ck_assert_msg(strstr(err, "deployments[0] (s): \"rolling_minute\" must be true or false") !=
                      NULL,
                  "%s", err);
    err = config_error("{'deployments':[{'name':'s','rolling_minute':'yes'}]}");
    ck_assert_msg(strstr(err, "\"rolling_minute\" must be true or false") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','rolling_minute':[true]}]}");
    ck_assert_msg(strstr(err, "\"rolling_minute\" must be true or false") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'s','rolling_minutes':true}]}");
    ck_assert_msg(strstr(err, "unknown key \"rolling_minutes\"") != NULL, "%s", err);
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
    tcase_add_test(tc, azure_success_has_openai_body_and_azure_headers);
    tcase_add_test(tc, azure_errors_have_azure_shapes);
    tcase_add_test(tc, anthropic_success_has_messages_body_and_cache_reads);
    tcase_add_test(tc, anthropic_errors_have_anthropic_shapes);
    tcase_add_test(tc, anthropic_tool_use_follows_the_share);
    tcase_add_test(tc, spend_limit_refuses_in_each_format_without_retry_after);
    tcase_add_test(tc, gemini_success_has_generate_content_body_and_no_limit_headers);
    tcase_add_test(tc, gemini_errors_have_google_shapes);
    tcase_add_test(tc, openai_stream_sends_chunks_usage_and_done);
    tcase_add_test(tc, azure_stream_is_openai_shaped);
    tcase_add_test(tc, anthropic_stream_sends_the_event_sequence);
    tcase_add_test(tc, gemini_stream_sends_responses_with_usage_on_the_last);
    tcase_add_test(tc, stream_replay_is_instant_and_stats_record_first_chunks);
    tcase_add_test(tc, fault_shares_hold_over_2000_requests);
    tcase_add_test(tc, acceleration_limit_caps_growth_per_window);
    tcase_add_test(tc, injected_429s_follow_each_format);
    tcase_add_test(tc, unavailable_windows_refuse_exactly_inside);
    tcase_add_test(tc, cut_streams_stop_before_their_end);
    tcase_add_test(tc, stalled_streams_go_quiet_then_send_the_rest);
    tcase_add_test(tc, early_retries_and_rings_record_retry_afters);
    tcase_add_test(tc, fault_and_api_config_keys_are_validated);
    tcase_add_test(tc, rolling_minute_refuses_what_the_bucket_would_admit);
    tcase_add_test(tc, rolling_minute_frees_room_as_charges_age);
    tcase_add_test(tc, rolling_minute_keeps_charges_as_admitted);
    tcase_add_test(tc, rolling_window_shares_an_entry_per_millisecond);
    tcase_add_test(tc, rolling_minute_is_off_by_default);
    tcase_add_test(tc, rolling_minute_refusals_are_limit_429s_counted_apart);
    tcase_add_test(tc, rolling_minute_config_must_be_boolean);
    suite_add_tcase(s, tc);

    /* A million admissions: longer than the default timeout allows under the sanitizers. */
    TCase *bound = tcase_create("rolling_bound");
    tcase_set_timeout(bound, 60);
    tcase_add_test(bound, rolling_minute_refuses_past_its_entry_bound);
    suite_add_tcase(s, bound);

    TCase *http = tcase_create("http");
    tcase_set_timeout(http, 20);
    tcase_add_test(http, http_server_serves_completions_limits_and_stats);
    tcase_add_test(http, http_streams_each_event_when_it_is_due);
    tcase_add_test(http, http_drops_close_the_connection_early);
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
