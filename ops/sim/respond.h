/* respond.h - building the simulator's responses: the response object, its headers and body,
 * each API's error bodies and rate-limit headers, and the 200 of a completion (a body or a
 * stream of timed events).
 *
 * The idea to hold first: this module spells, it does not decide. Admission (admit.h), faults
 * (faults.h) and the endpoints (sl_sim_handle) choose the answer and call these to write it.
 * A response is allocated whole by sl_sim_respond_new before any decision, so filling it in
 * never fails: a header table that is full or a body that does not fit is reported and cut.
 * Functions that read a deployment's limiter need the simulator's lock; the others touch only
 * the response.
 */
#ifndef SL_SIM_RESPOND_H
#define SL_SIM_RESPOND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim_internal.h"

/* Text shared by the 429s of admission and of faults. */
#define SL_SIM_ORGANIZATION "org-sim"
#define SL_SIM_OPENAI_RATE_LIMIT_HELP                                                              \
    "Visit https://platform.openai.com/account/rate-limits to learn more."
#define SL_SIM_ANTHROPIC_RATE_LIMIT_HELP                                                           \
    "For details, refer to: https://docs.anthropic.com/en/api/rate-limits. You can see the "       \
    "response headers for current usage. Please reduce the prompt length or the maximum "          \
    "tokens requested, or try again later."
#define SL_SIM_GEMINI_QUOTA_HELP                                                                   \
    "You exceeded your current quota, please check your plan and billing details. For more "       \
    "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."

/* How each dimension appears in 429 messages, error types and logs. */
typedef struct {
    const char *what;       /* "... in organization org-sim on <what>: Limit ..." */
    const char *error_type; /* OpenAI's error.type */
    const char *log_name;
    const char *per_minute;   /* Anthropic: "... of N <per_minute>" */
    const char *quota_id;     /* Gemini: QuotaFailure quotaId */
    const char *quota_metric; /* Gemini: quotaMetric */
} sl_sim_dim_info_t;

/* Indexed by sl_sim_dim_t. */
extern const sl_sim_dim_info_t sl_sim_dim_info[SL_SIM_DIM_COUNT_];

/* A new response: status 0, an empty body with room for SL_SIM_BODY_CAP bytes, no headers, not
 * a deployment's (api -1). NULL without memory; freed with sl_sim_response_free. */
sl_sim_response_t *sl_sim_respond_new(void);

/* Adds a header. The table is sized for the most headers any response carries; running out is
 * a programming error, reported and otherwise ignored rather than fatal for a daemon. */
void sl_sim_respond_add_header(sl_sim_response_t *resp, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Formats the body into the fixed buffer. Every body format is far below SL_SIM_BODY_CAP (names are
 * bounded by the config, messages by the error buffer), so truncation cannot happen in
 * practice. */
void sl_sim_respond_set_body(sl_sim_response_t *resp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Replaces the body with text (NUL-terminated, malloc'd), which resp then owns. */
void sl_sim_respond_take_body(sl_sim_response_t *resp, char *text);

/* The content type and request-id headers every response starts with: x-request-id (OpenAI's
 * and Azure's), request-id (Anthropic's) or none (Gemini's), and always x-sim-request-id. */
void sl_sim_respond_common_headers(sl_sim_response_t *resp, const char *content_type);

/* Writes err as the body of the response in api's format, with its status. */
void sl_sim_respond_error(sl_sim_response_t *resp, sl_sim_api_t api, const sl_sim_error_t *err);

/* Starts an error description of kind with a message. */
void sl_sim_respond_describe(sl_sim_error_t *err, sl_sim_err_kind_t kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* OpenAI's error shape, for the simulator's own endpoints and OpenAI deployments. message is
 * plain text (escaped here); param and code may be NULL. */
void sl_sim_respond_openai_error(sl_sim_response_t *resp, int status, const char *type,
                                 const char *param, const char *code, const char *message);

/* The rate-limit headers of the deployment's style. Caller holds the lock. */
void sl_sim_respond_limit_headers(sl_sim_t *sim, sl_sim_response_t *resp,
                                  const sl_sim_deployment_t *dep, int64_t now_ms);

/* The Retry-After headers of the deployment's style for a wait of wait_ms: retry-after in whole
 * seconds (rounded up) unless the style has no headers, plus retry-after-ms for OpenAI and
 * Azure (Anthropic sends only retry-after; Gemini puts the wait in its body). */
void sl_sim_respond_retry_headers(sl_sim_response_t *resp, const sl_sim_deployment_t *dep,
                                  int64_t wait_ms);

/* Replaces the value of header name, or adds it. */
void sl_sim_respond_set_header(sl_sim_response_t *resp, const char *name, const char *value);

/* A 503 (Anthropic: 529) for an overloaded or unavailable service. Caller holds the lock. */
void sl_sim_respond_overloaded(sl_sim_t *sim, sl_sim_deployment_t *dep, sl_sim_response_t *resp,
                               int64_t now_ms);

/* Builds the 200 of a completion: a body, or a stream's events each at its time (all at once
 * for a replay: instant), cut after a share cut_at (< 0: not cut) of them, or silent for
 * stall_ms after a share stall_at (< 0: no stall) of them and then the rest; either way at
 * least one event goes first and never the last. extra_ms delays the whole answer (slow
 * faults). Caller holds the lock (streams are registered for /stats). */
void sl_sim_respond_answer(sl_sim_t *sim, sl_sim_deployment_t *dep, sl_sim_response_t *resp,
                           const sl_sim_completion_t *done, const sl_sim_ask_t *ask,
                           double extra_ms, bool instant, double cut_at, double stall_at,
                           int64_t stall_ms);

#endif
