/* openai.c - OpenAI dialect helpers (see openai.h). */
#include "openai.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void sl_ratelimit_init(sl_ratelimit_t *rl)
{
    rl->limit_requests = rl->limit_tokens = -1;
    rl->remaining_requests = rl->remaining_tokens = -1;
    rl->reset_requests_ms = rl->reset_tokens_ms = -1;
    rl->retry_after_ms = -1;
    rl->should_retry = -1;
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
#define IS(name) (nlen == sizeof(name) - 1 && strncasecmp(line, name, nlen) == 0)
    if (IS("retry-after-ms")) {
        int64_t ms = seconds_ms(v, vlen);
        if (ms >= 0)
            rl->retry_after_ms = ms / 1000; /* seconds_ms scaled by 1000 */
    } else if (IS("retry-after")) {
        /* retry-after-ms is more precise; keep it when it came first. */
        int64_t ms = seconds_ms(v, vlen);
        if (ms >= 0 && rl->retry_after_ms < 0)
            rl->retry_after_ms = ms;
    } else if (IS("x-ratelimit-limit-requests")) {
        rl->limit_requests = integer(v, vlen);
    } else if (IS("x-ratelimit-limit-tokens")) {
        rl->limit_tokens = integer(v, vlen);
    } else if (IS("x-ratelimit-remaining-requests")) {
        rl->remaining_requests = integer(v, vlen);
    } else if (IS("x-ratelimit-remaining-tokens")) {
        rl->remaining_tokens = integer(v, vlen);
    } else if (IS("x-ratelimit-reset-requests")) {
        rl->reset_requests_ms = sl_go_duration_ms(v, vlen);
    } else if (IS("x-ratelimit-reset-tokens")) {
        rl->reset_tokens_ms = sl_go_duration_ms(v, vlen);
    } else if (IS("x-should-retry")) {
        rl->should_retry = vlen == 4 && strncasecmp(v, "true", 4) == 0 ? 1 : 0;
    }
#undef IS
}

void sl_ratelimit_to_json(const sl_ratelimit_t *rl, json_t *obj)
{
    struct {
        const char *name;
        int64_t v;
    } f[] = {{"limit_requests", rl->limit_requests},
             {"limit_tokens", rl->limit_tokens},
             {"remaining_requests", rl->remaining_requests},
             {"remaining_tokens", rl->remaining_tokens},
             {"reset_requests_ms", rl->reset_requests_ms},
             {"reset_tokens_ms", rl->reset_tokens_ms},
             {"should_retry", rl->should_retry}};
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
