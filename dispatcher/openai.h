/* openai.h - the OpenAI chat-completions dialect: rate-limit headers, error classification and
 * usage normalisation. Pure functions over bytes and JSON, tested against recorded responses.
 */
#ifndef SL_OPENAI_H
#define SL_OPENAI_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Normalised rate-limit information from one response; -1 = not reported. */
typedef struct {
    int64_t limit_requests, limit_tokens;
    int64_t remaining_requests, remaining_tokens;
    int64_t reset_requests_ms, reset_tokens_ms;
    int64_t retry_after_ms;
    int should_retry; /* x-should-retry: -1 absent, 0 false, 1 true */
} sl_ratelimit_t;

void sl_ratelimit_init(sl_ratelimit_t *rl);

/* Feeds one raw header line ("name: value\r\n"); unknown headers are ignored. Retry-After in
 * seconds (integer or decimal) or retry-after-ms; retry-after-ms wins when both are present. */
void sl_openai_header(sl_ratelimit_t *rl, const char *line, size_t len);

/* Parses a Go duration as OpenAI sends in x-ratelimit-reset-*: "12ms", "1.5s", "6m0s", "1h2m".
 * Returns milliseconds, or -1 when malformed. */
int64_t sl_go_duration_ms(const char *s, size_t len);

/* Adds the rate-limit fields that were reported to obj (as the usage event's "ratelimit"). */
void sl_ratelimit_to_json(const sl_ratelimit_t *rl, json_t *obj);

/* Classifies a finished call into a usage-event outcome (schema/usage.json):
 * transport_error: 0 = the HTTP exchange completed, 1 = transport failure, 2 = timeout.
 * body may be NULL. Returns a static string. */
const char *sl_openai_classify(int transport_error, long http_status, const json_t *body);

/* Extracts the canonical usage {input, output, cached, reasoning, total} from a chat-completion
 * body; NULL when the body has no usable usage object. Caller owns the result. */
json_t *sl_openai_usage(const json_t *body);

#endif
