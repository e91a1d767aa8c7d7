/* respond.c - the response object and how every answer of the simulator is spelled (see
 * respond.h).
 *
 * Names that end up in bodies (deployment, model, tool) are restricted by the config and the
 * wire parser to characters that need no JSON escaping; anything else taken from the request is
 * escaped by wire.c.
 */
#include "respond.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "rng.h"
#include "stats.h"

const sl_sim_dim_info_t sl_sim_dim_info[SL_SIM_DIM_COUNT_] = {
    [SL_SIM_DIM_REQUESTS] = {"requests per min (RPM)", "requests", "requests",
                             "requests per minute", "GenerateRequestsPerMinutePerProjectPerModel",
                             "generativelanguage.googleapis.com/generate_requests_per_model"},
    [SL_SIM_DIM_TOKENS] = {"tokens per min (TPM)", "tokens", "tokens", "tokens per minute",
                           "GenerateContentInputTokensPerModelPerMinute",
                           "generativelanguage.googleapis.com/generate_content_input_tokens"},
    [SL_SIM_DIM_INPUT_TOKENS] = {"input tokens per min (ITPM)", "tokens", "input tokens",
                                 "input tokens per minute",
                                 "GenerateContentInputTokensPerModelPerMinute",
                                 "generativelanguage.googleapis.com/"
                                 "generate_content_input_tokens"},
    [SL_SIM_DIM_OUTPUT_TOKENS] = {"output tokens per min (OTPM)", "tokens", "output tokens",
                                  "output tokens per minute",
                                  "GenerateContentOutputTokensPerModelPerMinute",
                                  "generativelanguage.googleapis.com/"
                                  "generate_content_output_tokens"},
    [SL_SIM_DIM_REQUESTS_DAY] = {"requests per day (RPD)", "requests", "requests per day",
                                 "requests per day", "GenerateRequestsPerDayPerProjectPerModel",
                                 "generativelanguage.googleapis.com/"
                                 "generate_requests_per_model_per_day"},
};

sl_sim_response_t *sl_sim_respond_new(void)
{
    sl_sim_response_t *resp = calloc(1, sizeof *resp);
    if (resp == NULL)
        return NULL;
    resp->body = malloc(SL_SIM_BODY_CAP);
    if (resp->body == NULL) {
        free(resp);
        return NULL;
    }
    resp->body[0] = '\0';
    resp->api = -1;
    return resp;
}

void sl_sim_respond_add_header(sl_sim_response_t *resp, const char *name, const char *fmt, ...)
{
    if (resp->n_headers == SL_SIM_MAX_HEADERS) {
        sl_error("sim: header table full, dropping %s", name);
        return;
    }
    sl_sim_header_t *h = &resp->headers[resp->n_headers++];
    snprintf(h->name, sizeof h->name, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->value, sizeof h->value, fmt, ap);
    va_end(ap);
}

void sl_sim_respond_set_body(sl_sim_response_t *resp, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(resp->body, SL_SIM_BODY_CAP, fmt, ap);
    va_end(ap);
    resp->body_len = n < 0 ? 0 : (size_t)n < SL_SIM_BODY_CAP ? (size_t)n : SL_SIM_BODY_CAP - 1;
}

void sl_sim_respond_take_body(sl_sim_response_t *resp, char *text)
{
    free(resp->body);
    resp->body = text;
    resp->body_len = strlen(text);
}

/* Takes a length returned by a wire writer into resp->body. */
static void set_body_len(sl_sim_response_t *resp, size_t n)
{
    if (n >= SL_SIM_BODY_CAP) {
        sl_error("sim: a response body of %zu bytes was cut to %d", n, SL_SIM_BODY_CAP - 1);
        n = SL_SIM_BODY_CAP - 1;
    }
    resp->body_len = n;
}

void sl_sim_respond_common_headers(sl_sim_response_t *resp, const char *content_type)
{
    sl_sim_respond_add_header(resp, "content-type", "%s", content_type);
    if (resp->api == SL_SIM_API_ANTHROPIC)
        sl_sim_respond_add_header(resp, "request-id", "%s", resp->request_id);
    else if (resp->api != SL_SIM_API_GEMINI)
        sl_sim_respond_add_header(resp, "x-request-id", "%s", resp->request_id);
    sl_sim_respond_add_header(resp, "x-sim-request-id", "%s", resp->request_id);
}

void sl_sim_respond_error(sl_sim_response_t *resp, sl_sim_api_t api, const sl_sim_error_t *err)
{
    resp->status = sl_sim_wire_error_status(api, err->kind);
    set_body_len(resp,
                 sl_sim_wire_error_body(api, err, resp->request_id, resp->body, SL_SIM_BODY_CAP));
}

void sl_sim_respond_describe(sl_sim_error_t *err, sl_sim_err_kind_t kind, const char *fmt, ...)
{
    memset(err, 0, sizeof *err);
    err->kind = kind;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

void sl_sim_respond_openai_error(sl_sim_response_t *resp, int status, const char *type,
                                 const char *param, const char *code, const char *message)
{
    sl_sim_error_t err;
    sl_sim_respond_describe(&err, SL_SIM_ERR_INVALID, "%s", message);
    err.type = type;
    err.param = param;
    err.code = code;
    set_body_len(
        resp, sl_sim_wire_error_body(SL_SIM_API_OPENAI, &err, NULL, resp->body, SL_SIM_BODY_CAP));
    resp->status = status;
}

/* OpenAI's x-ratelimit-* headers for RPM and TPM (Azure's: without the reset ones); a
 * dimension without a limit has none. */
static void openai_limit_headers(sl_sim_response_t *resp, const sl_sim_deployment_t *dep,
                                 int64_t now_ms, bool with_reset)
{
    enum { N_OPENAI_DIMS = 2 };
    static const char *const suffix[N_OPENAI_DIMS] = {"requests", "tokens"};
    char name[32];
    char dur[32];
    for (int d = 0; d < N_OPENAI_DIMS; d++) {
        int64_t limit = sl_sim_limiter_limit(dep->lim, (sl_sim_dim_t)d);
        if (limit == 0)
            continue;
        snprintf(name, sizeof name, "x-ratelimit-limit-%s", suffix[d]);
        sl_sim_respond_add_header(resp, name, "%lld", (long long)limit);
    }
    for (int d = 0; d < N_OPENAI_DIMS; d++) {
        if (sl_sim_limiter_limit(dep->lim, (sl_sim_dim_t)d) == 0)
            continue;
        snprintf(name, sizeof name, "x-ratelimit-remaining-%s", suffix[d]);
        sl_sim_respond_add_header(
            resp, name, "%lld",
            (long long)sl_sim_limiter_remaining(dep->lim, (sl_sim_dim_t)d, now_ms));
    }
    for (int d = 0; d < N_OPENAI_DIMS && with_reset; d++) {
        if (sl_sim_limiter_limit(dep->lim, (sl_sim_dim_t)d) == 0)
            continue;
        snprintf(name, sizeof name, "x-ratelimit-reset-%s", suffix[d]);
        sl_sim_go_duration(sl_sim_limiter_reset_ms(dep->lim, (sl_sim_dim_t)d, now_ms), dur,
                           sizeof dur);
        sl_sim_respond_add_header(resp, name, "%s", dur);
    }
}

/* Anthropic's anthropic-ratelimit-{requests,input-tokens,output-tokens}-{limit,remaining,reset}
 * for RPM, ITPM and OTPM; a dimension without a limit has none. */
static void anthropic_limit_headers(sl_sim_t *sim, sl_sim_response_t *resp,
                                    const sl_sim_deployment_t *dep, int64_t now_ms)
{
    static const struct {
        sl_sim_dim_t dim;
        const char *group;
    } groups[] = {{SL_SIM_DIM_REQUESTS, "requests"},
                  {SL_SIM_DIM_INPUT_TOKENS, "input-tokens"},
                  {SL_SIM_DIM_OUTPUT_TOKENS, "output-tokens"}};
    char name[48];
    char reset[32];
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        sl_sim_dim_t dim = groups[i].dim;
        int64_t limit = sl_sim_limiter_limit(dep->lim, dim);
        if (limit == 0)
            continue;
        int64_t remaining = sl_sim_limiter_remaining(dep->lim, dim, now_ms);
        /* Anthropic rounds token counts to the nearest thousand; rounding down instead means
         * the simulator never promises more than the bucket holds. */
        if (dim != SL_SIM_DIM_REQUESTS && remaining >= 1000)
            remaining = remaining / 1000 * 1000;
        int64_t full_ms =
            sl_sim_unix_ms(sim, now_ms) + sl_sim_limiter_reset_ms(dep->lim, dim, now_ms);
        sl_sim_rfc3339(full_ms, reset, sizeof reset);
        snprintf(name, sizeof name, "anthropic-ratelimit-%s-limit", groups[i].group);
        sl_sim_respond_add_header(resp, name, "%lld", (long long)limit);
        snprintf(name, sizeof name, "anthropic-ratelimit-%s-remaining", groups[i].group);
        sl_sim_respond_add_header(resp, name, "%lld", (long long)remaining);
        snprintf(name, sizeof name, "anthropic-ratelimit-%s-reset", groups[i].group);
        sl_sim_respond_add_header(resp, name, "%s", reset);
    }
}

void sl_sim_respond_limit_headers(sl_sim_t *sim, sl_sim_response_t *resp,
                                  const sl_sim_deployment_t *dep, int64_t now_ms)
{
    switch (dep->cfg->headers) {
    case SL_SIM_HEADERS_OPENAI:
        openai_limit_headers(resp, dep, now_ms, true);
        break;
    case SL_SIM_HEADERS_AZURE:
        openai_limit_headers(resp, dep, now_ms, false);
        break;
    case SL_SIM_HEADERS_ANTHROPIC:
        anthropic_limit_headers(sim, resp, dep, now_ms);
        break;
    case SL_SIM_HEADERS_NONE:
        break;
    }
}

void sl_sim_respond_retry_headers(sl_sim_response_t *resp, const sl_sim_deployment_t *dep,
                                  int64_t wait_ms)
{
    sl_sim_header_style_t style = dep->cfg->headers;
    if (style == SL_SIM_HEADERS_NONE)
        return;
    sl_sim_respond_add_header(resp, "retry-after", "%lld", (long long)((wait_ms + 999) / 1000));
    if (style == SL_SIM_HEADERS_OPENAI || style == SL_SIM_HEADERS_AZURE)
        sl_sim_respond_add_header(resp, "retry-after-ms", "%lld", (long long)wait_ms);
}

void sl_sim_respond_set_header(sl_sim_response_t *resp, const char *name, const char *value)
{
    for (size_t i = 0; i < resp->n_headers; i++) {
        if (strcasecmp(resp->headers[i].name, name) == 0) {
            snprintf(resp->headers[i].value, sizeof resp->headers[i].value, "%s", value);
            return;
        }
    }
    sl_sim_respond_add_header(resp, name, "%s", value);
}

void sl_sim_respond_overloaded(sl_sim_t *sim, sl_sim_deployment_t *dep, sl_sim_response_t *resp,
                               int64_t now_ms)
{
    const sl_sim_dep_config_t *dc = dep->cfg;
    sl_sim_error_t err;
    switch (dc->api) {
    case SL_SIM_API_OPENAI:
        sl_sim_respond_describe(&err, SL_SIM_ERR_OVERLOADED,
                                "The server is overloaded or not ready yet.");
        break;
    case SL_SIM_API_AZURE:
        sl_sim_respond_describe(
            &err, SL_SIM_ERR_OVERLOADED,
            "The service is temporarily unable to process your request. Please try again "
            "later.");
        err.azure_code = "ServiceUnavailable";
        break;
    case SL_SIM_API_ANTHROPIC:
        sl_sim_respond_describe(&err, SL_SIM_ERR_OVERLOADED, "Overloaded");
        break;
    default:
        sl_sim_respond_describe(&err, SL_SIM_ERR_OVERLOADED,
                                "The model is overloaded. Please try again later.");
        break;
    }
    sl_sim_respond_error(resp, dc->api, &err);
    sl_sim_respond_limit_headers(sim, resp, dep, now_ms);
}

void sl_sim_respond_answer(sl_sim_t *sim, sl_sim_deployment_t *dep, sl_sim_response_t *resp,
                           const sl_sim_completion_t *done, const sl_sim_ask_t *ask,
                           double extra_ms, bool instant, double cut_at, double stall_at,
                           int64_t stall_ms)
{
    const sl_sim_dep_config_t *dc = dep->cfg;
    sl_sim_reply_t reply = {
        .api = dc->api,
        .id = sl_sim_rng_mix64(sim->salt) + done->seq,
        .created_s = done->created_s,
        .model = dc->model,
        .deployment = dc->name,
        .prompt_tokens = done->prompt_tokens,
        .cached_tokens = done->cached_tokens,
        .completion_tokens = done->completion_tokens,
        .hit_max_tokens = done->hit_max_tokens,
        .tool_name = done->tool_name,
        .include_usage = ask->include_usage,
        .sse = ask->sse,
    };
    resp->status = 200;
    if (resp->events == NULL) {
        set_body_len(resp, sl_sim_wire_body(&reply, resp->body, SL_SIM_BODY_CAP));
        return;
    }
    size_t n = sl_sim_wire_stream(&reply, (size_t)dc->stream_chunks, resp->events);
    if (n == 0)
        sl_error("sim: a stream event of %s did not fit its buffer", dc->name);
    for (size_t i = 0; i < n; i++) {
        double at =
            dc->ttft_ms + extra_ms + dc->ms_per_token * (double)resp->events[i].tokens_before;
        resp->event_at_ms[i] = instant ? 0 : llround(at);
    }
    resp->n_events = n;
    if (cut_at >= 0 && n > 1) {
        /* At least one event goes out, and never the last. */
        resp->n_events = 1 + (size_t)(cut_at * (double)(n - 1));
        resp->dropped = true;
    } else if (stall_at >= 0 && n > 1) {
        /* The connection stays open and quiet: every event from the stall on comes later. */
        for (size_t i = 1 + (size_t)(stall_at * (double)(n - 1)); i < n; i++)
            resp->event_at_ms[i] += stall_ms;
    }
    bool sse = dc->api != SL_SIM_API_GEMINI || ask->sse;
    sl_sim_respond_set_header(resp, "content-type",
                              !sse                           ? "application/json; charset=UTF-8"
                              : dc->api == SL_SIM_API_GEMINI ? "text/event-stream"
                                                             : "text/event-stream; charset=utf-8");
    sl_sim_respond_add_header(resp, "cache-control", "no-cache");
    sl_sim_stats_open_stream(sim, dep, resp);
}

/* ---- Accessors (sim.h) ------------------------------------------------------------------ */

int sl_sim_response_status(const sl_sim_response_t *resp)
{
    return resp->status;
}

const char *sl_sim_response_body(const sl_sim_response_t *resp, size_t *len)
{
    if (len != NULL)
        *len = resp->body_len;
    return resp->body;
}

int64_t sl_sim_response_delay_ms(const sl_sim_response_t *resp)
{
    return resp->delay_ms;
}

size_t sl_sim_response_chunk_count(const sl_sim_response_t *resp)
{
    return resp->n_events;
}

const char *sl_sim_response_chunk(const sl_sim_response_t *resp, size_t i, size_t *len,
                                  int64_t *at_ms)
{
    if (len != NULL)
        *len = resp->events[i].len;
    if (at_ms != NULL)
        *at_ms = resp->event_at_ms[i];
    return resp->events[i].text;
}

int sl_sim_response_dropped(const sl_sim_response_t *resp)
{
    return resp->dropped;
}

size_t sl_sim_response_header_count(const sl_sim_response_t *resp)
{
    return resp->n_headers;
}

const char *sl_sim_response_header(const sl_sim_response_t *resp, size_t i, const char **value)
{
    *value = resp->headers[i].value;
    return resp->headers[i].name;
}

const char *sl_sim_response_header_get(const sl_sim_response_t *resp, const char *name)
{
    for (size_t i = 0; i < resp->n_headers; i++) {
        if (strcasecmp(resp->headers[i].name, name) == 0)
            return resp->headers[i].value;
    }
    return NULL;
}

void sl_sim_response_free(sl_sim_response_t *resp)
{
    if (resp == NULL)
        return;
    free(resp->events);
    free(resp->event_at_ms);
    free(resp->body);
    free(resp);
}

/* ---- Header value formats (sim.h) ------------------------------------------------------- */

size_t sl_sim_go_duration(int64_t ms, char *buf, size_t len)
{
    char tmp[64];
    int n;
    if (ms <= 0) {
        n = snprintf(tmp, sizeof tmp, "0s");
    } else if (ms < 1000) {
        n = snprintf(tmp, sizeof tmp, "%lldms", (long long)ms);
    } else {
        /* Go prints h and m only when non-zero from the largest unit down, then seconds with
         * their fraction, trailing zeros trimmed: 1.5s, 1m0s, 6m0.25s, 1h0m0s. */
        long long h = (long long)(ms / 3600000);
        long long m = (long long)(ms / 60000 % 60);
        long long s = (long long)(ms / 1000 % 60);
        long long frac = (long long)(ms % 1000);
        char sec[24];
        if (frac == 0) {
            snprintf(sec, sizeof sec, "%llds", s);
        } else {
            char digits[8];
            snprintf(digits, sizeof digits, "%03lld", frac);
            for (int i = 2; i > 0 && digits[i] == '0'; i--)
                digits[i] = '\0';
            snprintf(sec, sizeof sec, "%lld.%ss", s, digits);
        }
        if (h > 0)
            n = snprintf(tmp, sizeof tmp, "%lldh%lldm%s", h, m, sec);
        else if (m > 0)
            n = snprintf(tmp, sizeof tmp, "%lldm%s", m, sec);
        else
            n = snprintf(tmp, sizeof tmp, "%s", sec);
    }
    if (len > 0)
        snprintf(buf, len, "%s", tmp);
    return n < 0 ? 0 : (size_t)n;
}

size_t sl_sim_rfc3339(int64_t unix_ms, char *buf, size_t len)
{
    char tmp[64] = "";
    int64_t unix_s = unix_ms / 1000 + (unix_ms % 1000 > 0 ? 1 : 0);
    time_t t = (time_t)unix_s;
    struct tm tm;
    size_t n = 0;
    if ((int64_t)t == unix_s && gmtime_r(&t, &tm) != NULL)
        n = strftime(tmp, sizeof tmp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (len > 0)
        snprintf(buf, len, "%s", tmp);
    return n;
}
