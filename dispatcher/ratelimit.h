/* ratelimit.h - the normalised rate-limit record of one provider response, read from its headers,
 * and its JSON form (the usage event's "ratelimit").
 *
 * The idea to hold first: one record and one header parser serve every provider. Each API's
 * headers have their own names, so a response fills only the fields its provider reports and
 * the rest stay "not reported" (-1). The dialects understood:
 *   OpenAI: x-ratelimit-{limit|remaining}-{requests|tokens} counts and
 *     x-ratelimit-reset-{requests|tokens} Go durations ("6m0s"); retry-after; x-should-retry;
 *   Azure OpenAI: OpenAI's names plus retry-after-ms, with its -1 and 0 quirks for remaining
 *     counts it does not track;
 *   Anthropic: anthropic-ratelimit-{requests|tokens|input-tokens|output-tokens}-
 *     {limit|remaining|reset}, the resets absolute RFC 3339 times turned into "ms from now";
 *   Gemini: sends none (its retry hint is in the error body, see adapter.h).
 */
#ifndef SL_RATELIMIT_H
#define SL_RATELIMIT_H

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

/* Feeds one raw header line ("name: value\r\n", len bytes, as libcurl hands it over); names are
 * case-insensitive; unknown headers are ignored, and so is a value that is malformed or negative
 * (the field keeps what it had). Understands:
 *   x-ratelimit-{limit|remaining}-{requests|tokens}: counts (OpenAI, Azure OpenAI);
 *   x-ratelimit-reset-{requests|tokens}: Go durations ("6m0s");
 *   anthropic-ratelimit-{requests|tokens|input-tokens|output-tokens}-{limit|remaining|reset}:
 *     counts, and RFC 3339 reset times converted to ms after rl->now_ms (0 when already past);
 *   retry-after (seconds, integer or decimal) and retry-after-ms: retry-after-ms wins when both
 *     are present; x-should-retry. */
void sl_ratelimit_header(sl_ratelimit_t *rl, const char *line, size_t len);

/* Adds the rate-limit fields that were reported to obj (as the usage event's "ratelimit"): keys
 * limit_X, remaining_X and reset_X_ms for X in requests, tokens, input_tokens, output_tokens,
 * plus should_retry; all integers. A remaining of 0 is only kept when a positive limit for the
 * same dimension was reported too (see ratelimit.c for why). */
void sl_ratelimit_to_json(const sl_ratelimit_t *rl, json_t *obj);

#endif
