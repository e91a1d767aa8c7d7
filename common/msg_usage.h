/* msg_usage.h - the usage event (schema/usage.json, topic sluice.usage): what a dispatcher
 * reports for every attempt, in C, with the names of its outcomes.
 *
 * The dispatcher fills an sl_msg_usage_t and calls sl_msg_usage_json; the scheduler, after
 * validating the message against its schema, reads it back with sl_msg_usage_read. Outcomes are
 * an enum here so neither side compares strings.
 */
#ifndef SL_MSG_USAGE_H
#define SL_MSG_USAGE_H

#include <jansson.h>
#include <stdint.h>

#include "err.h"

/* How one provider call ended. Inside the dispatcher and the scheduler an outcome is an
 * sl_outcome_t and is compared as one; only its name travels, and the names are exactly the
 * schema's strings.
 *
 * ok: the answer came whole. rate_limited: a rate limit, which passes by waiting;
 * quota_exhausted: a quota or spend cap, which does not (soon). overloaded, server_error,
 * timeout: the provider's trouble. client_error: the request itself is at fault (retrying will
 * not help); auth_error: the credential. transport: no complete HTTP exchange, or a cut stream.
 * bad_response: an answer sluice cannot read or carry. not_sent: the dispatcher did not call. */
#define SL_OUTCOME_MAP(X)                                                                      \
    X(OK, "ok")                                                                                \
    X(RATE_LIMITED, "rate_limited")       /* 429: capacity, retryable */                       \
    X(QUOTA_EXHAUSTED, "quota_exhausted") /* a quota or spend cap: not retryable */            \
    X(OVERLOADED, "overloaded")           /* 503, 529 */                                       \
    X(SERVER_ERROR, "server_error")       /* other 5xx */                                      \
    X(CLIENT_ERROR, "client_error")       /* 4xx: the request is at fault */                   \
    X(AUTH_ERROR, "auth_error")           /* 401, 403 */                                       \
    X(TIMEOUT, "timeout")                                                                      \
    X(TRANSPORT, "transport")             /* no HTTP answer */                                 \
    X(BAD_RESPONSE, "bad_response")       /* an answer that could not be read */               \
    X(NOT_SENT, "not_sent")               /* the dispatcher refused the lease without a call */

typedef enum {
#define X(name, text) SL_OUTCOME_##name,
    SL_OUTCOME_MAP(X)
#undef X
        SL_OUTCOME_COUNT_
} sl_outcome_t;

/* The wire name of an outcome (never NULL; "unknown" outside the enum). */
const char *sl_outcome_name(sl_outcome_t o);
/* The outcome of a wire name, or -1 when it is none. */
int sl_outcome_parse(const char *name);
/* Whether the provider refused for capacity or overload (the call may be retried elsewhere). */
int sl_outcome_is_refusal(sl_outcome_t o);

/* The longest wait a provider's retry hint (Retry-After, retry-after-ms, Gemini's retryDelay)
 * can impose: one hour. A longer hint (Azure can ask for a day) is read as this, so one
 * answer cannot take a deployment out of the pool for longer; the scheduler still adds its
 * jitter to it. The dispatcher reports the provider's own figure. */
#define SL_RETRY_AFTER_MAX_MS INT64_C(3600000)

/* Normalised token usage of one call; -1 = not reported. */
typedef struct {
    int64_t input, output, cached, reasoning, total;
} sl_msg_tokens_t;

/* One usage event. Strings and JSON values are borrowed: from the caller when building, from
 * the parsed document when read. */
typedef struct {
    const char *job_id;
    int attempt;
    const char *reservation_id;
    const char *deployment;
    sl_outcome_t outcome;
    int http_status;
    const json_t *usage;     /* {input, output, cached, ...} or NULL (null) */
    const json_t *ratelimit; /* normalised headers, or NULL ({}) */
    int64_t retry_after_ms;  /* -1 = null */
    double ttft_ms, total_ms;
    int64_t started_ms, finished_ms;
    const json_t *response; /* written only when the outcome is ok */
    const json_t *error;    /* written only when it is not */
} sl_msg_usage_t;

/* The event as a JSON object (caller owns it); NULL when out of memory. */
json_t *sl_msg_usage_json(const sl_msg_usage_t *u);

/* Reads a usage event that was validated against schema/usage.json; *u borrows from doc.
 * tokens gets the usage counts (-1 for each when usage is null). retry_after_ms is capped at
 * SL_RETRY_AFTER_MAX_MS: this is the one place the cap is applied. SL_EPARSE when a required
 * field is missing or the outcome is unknown. */
sl_err_t sl_msg_usage_read(const json_t *doc, sl_msg_usage_t *u, sl_msg_tokens_t *tokens);

#endif
