/* openai.c - OpenAI dialect helpers (see openai.h). */
#include "openai.h"

#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "adapter_impl.h"
#include "util.h"

void sl_ratelimit_init(sl_ratelimit_t *rl)
{
    rl->limit_requests = rl->limit_tokens = -1;
    rl->limit_input_tokens = rl->limit_output_tokens = -1;
    rl->remaining_requests = rl->remaining_tokens = -1;
    rl->remaining_input_tokens = rl->remaining_output_tokens = -1;
    rl->reset_requests_ms = rl->reset_tokens_ms = -1;
    rl->reset_input_tokens_ms = rl->reset_output_tokens_ms = -1;
    rl->retry_after_ms = -1;
    rl->should_retry = -1;
    rl->now_ms = -1;
}

int64_t sl_go_duration_ms(const char *s, size_t len)
{
    double total = 0;
    size_t i = 0;
    if (len == 0)
        return -1;
    while (i < len) {
        char *end = NULL;
        char num[64];
        size_t j = i;
        while (j < len && (isdigit((unsigned char)s[j]) || s[j] == '.'))
            j++;
        if (j == i || j - i >= sizeof num)
            return -1;
        memcpy(num, s + i, j - i);
        num[j - i] = '\0';
        double v = strtod(num, &end);
        if (end == NULL || *end != '\0')
            return -1;
        i = j;
        double unit;
        if (i + 1 < len && s[i] == 'm' && s[i + 1] == 's') {
            unit = 1;
            i += 2;
        } else if (i + 1 < len && (s[i] == 'u' || s[i] == 'n') && s[i + 1] == 's') {
            unit = s[i] == 'u' ? 1e-3 : 1e-6;
            i += 2;
        } else if (i + 2 < len && (unsigned char)s[i] == 0xC2 && (unsigned char)s[i + 1] == 0xB5 &&
                   s[i + 2] == 's') {
            unit = 1e-3; /* "µs" with U+00B5 MICRO SIGN, as Go prints it */
            i += 3;
        } else if (i + 2 < len && (unsigned char)s[i] == 0xCE && (unsigned char)s[i + 1] == 0xBC &&
                   s[i + 2] == 's') {
            unit = 1e-3; /* "μs" with U+03BC GREEK SMALL LETTER MU */
            i += 3;
        } else if (i < len && s[i] == 'h') {
            unit = 3600000;
            i++;
        } else if (i < len && s[i] == 'm') {
            unit = 60000;
            i++;
        } else if (i < len && s[i] == 's') {
            unit = 1000;
            i++;
        } else {
            return -1;
        }
        total += v * unit;
    }
    return (int64_t)(total + 0.5);
}

/* Parses a non-negative decimal number of seconds (or an integer) into ms; -1 when not one.
 * (An HTTP-date Retry-After is not sent by these providers and is treated as absent.) */
static int64_t seconds_ms(const char *v, size_t len)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, v, len);
    buf[len] = '\0';
    char *end = NULL;
    double x = strtod(buf, &end);
    if (end == buf || *end != '\0' || x < 0)
        return -1;
    return (int64_t)(x * 1000 + 0.5);
}

static int64_t integer(const char *v, size_t len)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, v, len);
    buf[len] = '\0';
    char *end = NULL;
    long long x = strtoll(buf, &end, 10);
    return (end == buf || *end != '\0') ? -1 : (int64_t)x;
}

/* Reads exactly n decimal digits at s (no sign); -1 when any is not a digit. */
static int digits(const char *s, size_t n)
{
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* Days from 1970-01-01 to the proleptic Gregorian date y-m-d (m 1..12); Howard Hinnant's
 * days_from_civil, exact for every year of four digits. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

int64_t sl_rfc3339_ms(const char *s, size_t len)
{
    /* "YYYY-MM-DDTHH:MM:SS" is 19 bytes; a fraction and a zone follow. */
    if (s == NULL || len < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
        s[13] != ':' || s[16] != ':')
        return -1;
    int year = digits(s, 4);
    int mon = digits(s + 5, 2);
    int day = digits(s + 8, 2);
    int hour = digits(s + 11, 2);
    int min = digits(s + 14, 2);
    int sec = digits(s + 17, 2);
    /* Second 60 is a leap second; it counts as the next minute's first second. */
    if (year < 0 || mon < 1 || mon > 12 || day < 1 || day > days_in_month(year, mon) || hour < 0 ||
        hour > 23 || min < 0 || min > 59 || sec < 0 || sec > 60)
        return -1;
    size_t i = 19;
    int64_t frac_ms = 0;
    if (s[i] == '.') {
        size_t first = ++i;
        while (i < len && isdigit((unsigned char)s[i])) {
            if (i - first < 3)
                frac_ms = frac_ms * 10 + (s[i] - '0');
            i++;
        }
        if (i == first)
            return -1;
        for (size_t n = i - first; n < 3; n++)
            frac_ms *= 10;
    }
    int64_t offset_s;
    if (i + 1 == len && (s[i] == 'Z' || s[i] == 'z')) {
        offset_s = 0;
    } else if (i + 6 == len && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
        int oh = digits(s + i + 1, 2);
        int om = digits(s + i + 4, 2);
        if (oh < 0 || oh > 23 || om < 0 || om > 59)
            return -1;
        offset_s = (s[i] == '-' ? -1 : 1) * (int64_t)(oh * 3600 + om * 60);
    } else {
        return -1;
    }
    int64_t epoch_s =
        days_from_civil(year, mon, day) * 86400 + hour * 3600 + min * 60 + sec - offset_s;
    if (epoch_s < 0)
        return -1;
    return epoch_s * 1000 + frac_ms;
}

/* How a rate-limit header's value is read. */
typedef enum {
    VALUE_COUNT,       /* a non-negative integer */
    VALUE_GO_DURATION, /* OpenAI's reset: time until restored, "6m0s" */
    VALUE_RFC3339,     /* Anthropic's reset: the instant it is restored */
} value_kind_t;

#define FIELD(member) offsetof(sl_ratelimit_t, member)

static const struct {
    const char *name;
    value_kind_t kind;
    size_t field; /* offset of the int64_t member */
} ratelimit_headers[] = {
    {"x-ratelimit-limit-requests", VALUE_COUNT, FIELD(limit_requests)},
    {"x-ratelimit-limit-tokens", VALUE_COUNT, FIELD(limit_tokens)},
    {"x-ratelimit-remaining-requests", VALUE_COUNT, FIELD(remaining_requests)},
    {"x-ratelimit-remaining-tokens", VALUE_COUNT, FIELD(remaining_tokens)},
    {"x-ratelimit-reset-requests", VALUE_GO_DURATION, FIELD(reset_requests_ms)},
    {"x-ratelimit-reset-tokens", VALUE_GO_DURATION, FIELD(reset_tokens_ms)},
    {"anthropic-ratelimit-requests-limit", VALUE_COUNT, FIELD(limit_requests)},
    {"anthropic-ratelimit-requests-remaining", VALUE_COUNT, FIELD(remaining_requests)},
    {"anthropic-ratelimit-requests-reset", VALUE_RFC3339, FIELD(reset_requests_ms)},
    {"anthropic-ratelimit-tokens-limit", VALUE_COUNT, FIELD(limit_tokens)},
    {"anthropic-ratelimit-tokens-remaining", VALUE_COUNT, FIELD(remaining_tokens)},
    {"anthropic-ratelimit-tokens-reset", VALUE_RFC3339, FIELD(reset_tokens_ms)},
    {"anthropic-ratelimit-input-tokens-limit", VALUE_COUNT, FIELD(limit_input_tokens)},
    {"anthropic-ratelimit-input-tokens-remaining", VALUE_COUNT, FIELD(remaining_input_tokens)},
    {"anthropic-ratelimit-input-tokens-reset", VALUE_RFC3339, FIELD(reset_input_tokens_ms)},
    {"anthropic-ratelimit-output-tokens-limit", VALUE_COUNT, FIELD(limit_output_tokens)},
    {"anthropic-ratelimit-output-tokens-remaining", VALUE_COUNT, FIELD(remaining_output_tokens)},
    {"anthropic-ratelimit-output-tokens-reset", VALUE_RFC3339, FIELD(reset_output_tokens_ms)},
};

#undef FIELD

/* Reads one rate-limit value; -1 when malformed or negative. Azure OpenAI sends -1 for a
 * remaining count it does not track: that is "not reported", like any other negative. */
static int64_t ratelimit_value(const sl_ratelimit_t *rl, value_kind_t kind, const char *v,
                               size_t vlen)
{
    switch (kind) {
    case VALUE_COUNT: {
        int64_t n = integer(v, vlen);
        return n >= 0 ? n : -1;
    }
    case VALUE_GO_DURATION:
        return sl_go_duration_ms(v, vlen);
    case VALUE_RFC3339: {
        int64_t at_ms = sl_rfc3339_ms(v, vlen);
        if (at_ms < 0)
            return -1;
        int64_t now_ms = rl->now_ms >= 0 ? rl->now_ms : sl_now_ms();
        /* A reset already behind us (clock skew, a slow response) means "restored now". */
        return at_ms > now_ms ? at_ms - now_ms : 0;
    }
    }
    return -1;
}

void sl_openai_header(sl_ratelimit_t *rl, const char *line, size_t len)
{
    const char *colon = memchr(line, ':', len);
    if (colon == NULL)
        return;
    size_t nlen = (size_t)(colon - line);
    const char *v = colon + 1;
    size_t vlen = len - nlen - 1;
    while (vlen > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        vlen--;
    }
    while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
        vlen--;
#define IS(name) (nlen == strlen(name) && strncasecmp(line, name, nlen) == 0)
    if (IS("retry-after-ms")) {
        int64_t ms = seconds_ms(v, vlen);
        if (ms >= 0)
            rl->retry_after_ms = ms / 1000; /* seconds_ms scaled by 1000 */
        return;
    }
    if (IS("retry-after")) {
        /* retry-after-ms is more precise; keep it when it came first. */
        int64_t ms = seconds_ms(v, vlen);
        if (ms >= 0 && rl->retry_after_ms < 0)
            rl->retry_after_ms = ms;
        return;
    }
    if (IS("x-should-retry")) {
        rl->should_retry = vlen == 4 && strncasecmp(v, "true", 4) == 0 ? 1 : 0;
        return;
    }
    for (size_t i = 0; i < sizeof ratelimit_headers / sizeof ratelimit_headers[0]; i++) {
        if (IS(ratelimit_headers[i].name)) {
            int64_t x = ratelimit_value(rl, ratelimit_headers[i].kind, v, vlen);
            if (x >= 0)
                *(int64_t *)((char *)rl + ratelimit_headers[i].field) = x;
            return;
        }
    }
#undef IS
}

/* Azure OpenAI reports remaining -1 or 0 on some APIs where it tracks nothing (PROVIDERS.md);
 * -1 never reaches the struct (see ratelimit_value). A 0 is only believed when the same response
 * also reported a positive limit for that dimension: a real exhausted bucket comes with its
 * limit (OpenAI and Anthropic send both), while a lone 0 would make the scheduler stop
 * sending to a deployment that has capacity. Applied here rather than at parse time so that the
 * order of the headers does not matter. */
static int64_t reported_remaining(int64_t remaining, int64_t limit)
{
    if (remaining > 0)
        return remaining;
    return remaining == 0 && limit > 0 ? 0 : -1;
}

void sl_ratelimit_to_json(const sl_ratelimit_t *rl, json_t *obj)
{
    struct {
        const char *name;
        int64_t v;
    } f[] = {
        {"limit_requests", rl->limit_requests},
        {"limit_tokens", rl->limit_tokens},
        {"limit_input_tokens", rl->limit_input_tokens},
        {"limit_output_tokens", rl->limit_output_tokens},
        {"remaining_requests", reported_remaining(rl->remaining_requests, rl->limit_requests)},
        {"remaining_tokens", reported_remaining(rl->remaining_tokens, rl->limit_tokens)},
        {"remaining_input_tokens",
         reported_remaining(rl->remaining_input_tokens, rl->limit_input_tokens)},
        {"remaining_output_tokens",
         reported_remaining(rl->remaining_output_tokens, rl->limit_output_tokens)},
        {"reset_requests_ms", rl->reset_requests_ms},
        {"reset_tokens_ms", rl->reset_tokens_ms},
        {"reset_input_tokens_ms", rl->reset_input_tokens_ms},
        {"reset_output_tokens_ms", rl->reset_output_tokens_ms},
        {"should_retry", rl->should_retry},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].v >= 0)
            json_object_set_new(obj, f[i].name, json_integer(f[i].v));
    }
}

/* OpenAI says "do not retry" for quota and spend caps with a 429 status. */
static int is_quota_error(const json_t *body)
{
    static const char *const codes[] = {"insufficient_quota", "credit_balance_exhausted",
                                        "organization_spend_limit_exceeded",
                                        "project_spend_limit_exceeded", NULL};
    const json_t *err = json_object_get(body, "error");
    const char *code = json_string_value(json_object_get(err, "code"));
    const char *type = json_string_value(json_object_get(err, "type"));
    for (int i = 0; codes[i] != NULL; i++) {
        if ((code != NULL && strcmp(code, codes[i]) == 0) ||
            (type != NULL && strcmp(type, codes[i]) == 0))
            return 1;
    }
    return 0;
}

const char *sl_openai_classify(int transport_error, long http_status, const json_t *body)
{
    if (transport_error == 2)
        return "timeout";
    if (transport_error != 0)
        return "transport";
    if (http_status >= 200 && http_status < 300)
        return json_is_object(body) && json_is_object(json_object_get(body, "usage"))
                   ? "ok"
                   : "bad_response";
    if (http_status == 429)
        return is_quota_error(body) ? "quota_exhausted" : "rate_limited";
    if (http_status == 401 || http_status == 403)
        return "auth_error";
    if (http_status == 408 || http_status == 409)
        return "server_error";
    if (http_status == 503 || http_status == 529)
        return "overloaded";
    if (http_status == 504)
        return "timeout";
    if (http_status >= 500)
        return "server_error";
    return "client_error";
}

static int64_t jint(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (int64_t)json_integer_value(v) : 0;
}

json_t *sl_openai_usage(const json_t *body)
{
    const json_t *u = json_object_get(body, "usage");
    if (!json_is_object(u))
        return NULL;
    int64_t in = jint(u, "prompt_tokens");
    int64_t out = jint(u, "completion_tokens");
    int64_t cached = jint(json_object_get(u, "prompt_tokens_details"), "cached_tokens");
    int64_t reasoning = jint(json_object_get(u, "completion_tokens_details"), "reasoning_tokens");
    int64_t total = jint(u, "total_tokens");
    if (total < in + out)
        total = in + out;
    return json_pack("{s:I, s:I, s:I, s:I, s:I}", "input", (json_int_t)in, "output",
                     (json_int_t)out, "cached", (json_int_t)cached, "reasoning",
                     (json_int_t)reasoning, "total", (json_int_t)total);
}

/* ---- The openai and azure adapters (adapter.h) ---------------------------------------------
 *
 * Both speak chat completions, so the canonical body goes out almost as it is and the answer is
 * already canonical. They differ in the URL, the credential header and the model: Azure names
 * the model by the deployment in the URL and takes none in the body. */

/* base_url + suffix, without doubling a '/'. */
static char *join_url(const char *base, const char *suffix)
{
    size_t n = strlen(base);
    while (n > 0 && base[n - 1] == '/')
        n--;
    return sl_strdupf("%.*s%s", (int)n, base, suffix);
}

/* The canonical body with streaming usage requested: without include_usage, OpenAI sends no
 * usage in a stream, and the ledger could not settle it. */
static json_t *chat_body(const json_t *chat, int *stream)
{
    json_t *body = json_deep_copy(chat);
    if (body == NULL)
        return NULL;
    *stream = json_is_true(json_object_get(body, "stream"));
    if (*stream) {
        json_t *opts = json_object_get(body, "stream_options");
        if (!json_is_object(opts)) {
            opts = json_object();
            json_object_set_new(body, "stream_options", opts);
        }
        json_object_set_new(opts, "include_usage", json_true());
    } else {
        /* "stream_options" is only allowed with "stream": true. */
        json_object_del(body, "stream_options");
    }
    return body;
}

static sl_err_t request_openai(const sl_deployment_cfg_t *dep, const json_t *chat,
                               sl_adapter_request_t *out, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    json_t *body = chat_body(chat, &out->stream);
    if (body == NULL)
        return SL_ENOMEM;
    /* The deployment's own model name goes to the provider, whatever the caller asked for:
     * the route decided where the job runs. */
    json_object_set_new(body, "model", json_string(dep->model));
    sl_err_t rc = sl_adapter_set_body(out, body);
    json_decref(body);
    out->url = join_url(dep->base_url, "/chat/completions");
    return rc == SL_OK && out->url == NULL ? SL_ENOMEM : rc;
}

static sl_err_t request_azure(const sl_deployment_cfg_t *dep, const json_t *chat,
                              sl_adapter_request_t *out, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    json_t *body = chat_body(chat, &out->stream);
    if (body == NULL)
        return SL_ENOMEM;
    json_object_del(body, "model"); /* the deployment in the URL is the model */
    sl_err_t rc = sl_adapter_set_body(out, body);
    json_decref(body);
    char *suffix = sl_strdupf("/chat/completions?api-version=%s", dep->api_version);
    out->url = suffix != NULL ? join_url(dep->base_url, suffix) : NULL;
    free(suffix);
    return rc == SL_OK && out->url == NULL ? SL_ENOMEM : rc;
}

/* What an error object means when it arrives without a telling status: inside a stream (HTTP
 * 200 already sent) or in a 2xx body. */
static const char *openai_error_outcome(const json_t *body)
{
    if (is_quota_error(body))
        return "quota_exhausted";
    const json_t *err = json_object_get(body, "error");
    const char *code = json_string_value(json_object_get(err, "code"));
    const char *type = json_string_value(json_object_get(err, "type"));
    if (code != NULL && strcmp(code, "rate_limit_exceeded") == 0)
        return "rate_limited";
    if (type != NULL && strcmp(type, "invalid_request_error") == 0)
        return "client_error";
    return "server_error";
}

static const char *classify_openai(long http_status, const json_t *body)
{
    if (http_status >= 200 && http_status < 300 && json_is_object(json_object_get(body, "error")))
        return openai_error_outcome(body);
    return sl_openai_classify(0, http_status, body);
}

static json_t *response_openai(const json_t *body, const char *model)
{
    (void)model;
    if (!json_is_object(body) || !json_is_array(json_object_get(body, "choices")))
        return NULL;
    return json_deep_copy(body); /* already canonical */
}

static int usage_openai(const json_t *body, sl_usage_t *u)
{
    const json_t *us = json_object_get(body, "usage");
    if (!json_is_object(us))
        return 0;
    u->input = jint(us, "prompt_tokens");
    u->output = jint(us, "completion_tokens");
    u->cached = jint(json_object_get(us, "prompt_tokens_details"), "cached_tokens");
    u->reasoning = jint(json_object_get(us, "completion_tokens_details"), "reasoning_tokens");
    u->total = jint(us, "total_tokens");
    return 1;
}

static json_t *error_openai(const json_t *body)
{
    /* Keep the provider's own error text (never headers, never credentials). Azure sends a
     * code ("429") and no type. */
    const json_t *perr = json_object_get(body, "error");
    if (!json_is_object(perr))
        return NULL;
    json_t *e = json_object();
    const char *type = json_string_value(json_object_get(perr, "type"));
    const char *code = json_string_value(json_object_get(perr, "code"));
    const char *msg = json_string_value(json_object_get(perr, "message"));
    if (type != NULL)
        json_object_set_new(e, "type", json_string(type));
    json_object_set_new(e, "code", code != NULL ? json_string(code) : json_null());
    if (msg != NULL)
        json_object_set_new(e, "message", json_string(msg));
    return e;
}

static const char *finish_openai(const char *reason, int has_tool_calls)
{
    (void)has_tool_calls;
    if (strcmp(reason, "length") == 0)
        return "length";
    if (strcmp(reason, "tool_calls") == 0 || strcmp(reason, "function_call") == 0)
        return "tool_calls";
    if (strcmp(reason, "content_filter") == 0)
        return "content_filter";
    return "stop";
}

static sl_err_t stream_event_openai(sl_stream_t *st, const char *event, const char *data,
                                    size_t len)
{
    (void)event;
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        sl_stream_done(st);
        return SL_OK;
    }
    json_t *j = json_loadb(data, len, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return SL_EPARSE;
    }
    sl_err_t rc = SL_OK;
    if (json_is_object(json_object_get(j, "error"))) {
        sl_stream_fail(st, j, openai_error_outcome(j));
        goto out;
    }
    sl_stream_meta(st, json_string_value(json_object_get(j, "id")),
                   json_string_value(json_object_get(j, "model")),
                   json_integer_value(json_object_get(j, "created")));
    sl_usage_t u = {0, 0, 0, 0, 0};
    if (usage_openai(j, &u))
        sl_stream_set_usage(st, &u, 1, 1);
    /* n is 1 (schema/request.json), so only choice 0 exists; Azure's first chunk has none. */
    const json_t *choice = json_array_get(json_object_get(j, "choices"), 0);
    const json_t *delta = json_object_get(choice, "delta");
    const json_t *content = json_object_get(delta, "content");
    if (json_is_string(content))
        rc = sl_stream_text(st, json_string_value(content), json_string_length(content));
    static const char *const reasoning_keys[] = {"reasoning_content", "reasoning", NULL};
    for (int i = 0; reasoning_keys[i] != NULL; i++) {
        const json_t *r = json_object_get(delta, reasoning_keys[i]);
        if (json_is_string(r))
            sl_stream_reasoning_text(st, json_string_value(r), json_string_length(r));
    }
    size_t i;
    const json_t *tc;
    json_array_foreach(json_object_get(delta, "tool_calls"), i, tc)
    {
        if (rc != SL_OK)
            break;
        const json_t *fn = json_object_get(tc, "function");
        const json_t *idx = json_object_get(tc, "index");
        const json_t *args = json_object_get(fn, "arguments");
        rc = sl_stream_tool(st, json_is_integer(idx) ? json_integer_value(idx) : (json_int_t)i,
                            json_string_value(json_object_get(tc, "id")),
                            json_string_value(json_object_get(fn, "name")), json_string_value(args),
                            json_is_string(args) ? json_string_length(args) : 0);
    }
    const char *fr = json_string_value(json_object_get(choice, "finish_reason"));
    if (rc == SL_OK && fr != NULL)
        sl_stream_finish(st, finish_openai(fr, sl_stream_tool_count(st) > 0));
out:
    json_decref(j);
    return rc;
}

const sl_adapter_t sl_adapter_openai = {
    .api = SL_PROVIDER_OPENAI,
    .name = "openai",
    .auth_prefix = "Authorization: Bearer ",
    .request = request_openai,
    .classify = classify_openai,
    .response = response_openai,
    .usage = usage_openai,
    .error = error_openai,
    .retry_hint_ms = NULL,
    .finish_reason = finish_openai,
    .stream_event = stream_event_openai,
    .complete_at_eof = 0,
};

const sl_adapter_t sl_adapter_azure = {
    .api = SL_PROVIDER_AZURE,
    .name = "azure",
    .auth_prefix = "api-key: ",
    .request = request_azure,
    .classify = classify_openai,
    .response = response_openai,
    .usage = usage_openai,
    .error = error_openai,
    .retry_hint_ms = NULL,
    .finish_reason = finish_openai,
    .stream_event = stream_event_openai,
    .complete_at_eof = 0,
};
