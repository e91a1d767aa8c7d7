/* ratelimit.c - every provider's rate-limit headers into one record (see ratelimit.h). */
#include "ratelimit.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "timefmt.h"
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
        int64_t n;
        return sl_parse_uint(v, vlen, INT64_MAX, &n) == 0 ? n : -1;
    }
    case VALUE_GO_DURATION:
        return sl_timefmt_go_duration_ms(v, vlen);
    case VALUE_RFC3339: {
        int64_t at_ms = sl_timefmt_rfc3339_ms(v, vlen);
        if (at_ms < 0)
            return -1;
        int64_t now_ms = rl->now_ms >= 0 ? rl->now_ms : sl_now_ms();
        /* A reset already behind us (clock skew, a slow response) means "restored now". */
        return at_ms > now_ms ? at_ms - now_ms : 0;
    }
    }
    return -1;
}

void sl_ratelimit_header(sl_ratelimit_t *rl, const char *line, size_t len)
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
        int64_t ms = sl_timefmt_ms(v, vlen);
        if (ms >= 0)
            rl->retry_after_ms = ms;
        return;
    }
    if (IS("retry-after")) {
        /* retry-after-ms is more precise; keep it when it came first. */
        int64_t ms = sl_timefmt_seconds_ms(v, vlen);
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

/* Azure OpenAI reports remaining -1 or 0 on some APIs where it tracks nothing;
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
