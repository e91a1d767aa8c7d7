/* openai.h - the OpenAI chat-completions dialect: rate-limit headers, error classification and
 * usage normalisation. Pure functions over bytes and JSON, tested against recorded responses.
 * The openai and azure adapters (adapter.h) are built on them, in openai.c.
 *
 * The rate-limit header parser also understands the two dialects that share the dispatcher's
 * ratelimit object: Azure OpenAI (OpenAI's names plus retry-after-ms, with -1/0 quirks) and
 * Anthropic (anthropic-ratelimit-*, absolute RFC 3339 reset times turned into "ms from now").
 */
#ifndef SL_OPENAI_H
#define SL_OPENAI_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Normalised rate-limit information from one response; -1 = not reported. The *_tokens fields
 * are OpenAI's TPM and Anthropic's "tightest token limit now"; *_input_tokens and
 * *_output_tokens are Anthropic's ITPM and OTPM. reset_*_ms is the time from the response until
 * the limit is fully restored. */
typedef struct {
    int64_t limit_requests, limit_tokens, limit_input_tokens, limit_output_tokens;
    int64_t remaining_requests, remaining_tokens, remaining_input_tokens, remaining_output_tokens;
    int64_t reset_requests_ms, reset_tokens_ms, reset_input_tokens_ms, reset_output_tokens_ms;
    int64_t retry_after_ms;
    int should_retry; /* x-should-retry: -1 absent, 0 false, 1 true */
    /* The wall clock (epoch ms) against which absolute reset times are turned into durations.
     * sl_ratelimit_init sets -1, which means "read the real clock as each header is parsed";
     * tests set a fixed value. */
    int64_t now_ms;
} sl_ratelimit_t;

/* Marks every field "not reported" and selects the real clock. */
void sl_ratelimit_init(sl_ratelimit_t *rl);

/* Feeds one raw header line ("name: value\r\n"); unknown headers are ignored, and so is a value
 * that is malformed or negative (the field keeps what it had). Understands:
 *   x-ratelimit-{limit|remaining}-{requests|tokens}: counts (OpenAI, Azure OpenAI);
 *   x-ratelimit-reset-{requests|tokens}: Go durations ("6m0s");
 *   anthropic-ratelimit-{requests|tokens|input-tokens|output-tokens}-{limit|remaining|reset}:
 *     counts, and RFC 3339 reset times converted to ms after rl->now_ms (0 when already past);
 *   retry-after (seconds, integer or decimal) and retry-after-ms: retry-after-ms wins when both
 *     are present; x-should-retry. */
void sl_openai_header(sl_ratelimit_t *rl, const char *line, size_t len);

/* Parses an RFC 3339 date-time ("2025-08-21T12:40:59Z", "...T12:40:59.123456Z",
 * "...T14:40:59+02:00"; 'T' and 'Z' may be lower case) into epoch milliseconds, truncating
 * fractions below a millisecond. Reads exactly len bytes. Returns -1 when malformed, out of
 * range (e.g. February 30th), or before 1970. */
int64_t sl_rfc3339_ms(const char *s, size_t len);

/* Parses a Go duration as OpenAI sends in x-ratelimit-reset-*: "12ms", "1.5s", "6m0s", "1h2m".
 * Returns milliseconds, or -1 when malformed. */
int64_t sl_go_duration_ms(const char *s, size_t len);

/* Adds the rate-limit fields that were reported to obj (as the usage event's "ratelimit"): keys
 * limit_X, remaining_X and reset_X_ms for X in requests, tokens, input_tokens, output_tokens,
 * plus should_retry; all integers. A remaining of 0 is only kept when a positive limit for the
 * same dimension was reported too (see openai.c for why). */
void sl_ratelimit_to_json(const sl_ratelimit_t *rl, json_t *obj);

/* Classifies a finished call into a usage-event outcome (schema/usage.json):
 * transport_error: 0 = the HTTP exchange completed, 1 = transport failure, 2 = timeout.
 * body may be NULL. Returns a static string. */
const char *sl_openai_classify(int transport_error, long http_status, const json_t *body);

/* Extracts the canonical usage {input, output, cached, reasoning, total} from a chat-completion
 * body; NULL when the body has no usable usage object. Caller owns the result. */
json_t *sl_openai_usage(const json_t *body);

#endif
