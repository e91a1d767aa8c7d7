/* msg_result.h - the result message (schema/result.json, topic sluice.results): its C form,
 * the names of its statuses, error types, gateway decisions and reason codes, and its builder.
 *
 * The one idea: a job's terminal outcome is written in one place. ingest (rejections) and the
 * scheduler (everything else) fill an sl_msg_result_t and call sl_msg_result_json, so the
 * result has one shape whoever writes it, and every code on the wire comes from a table here.
 */
#ifndef SL_MSG_RESULT_H
#define SL_MSG_RESULT_H

#include <jansson.h>
#include <stdint.h>

#define SL_STATUS_MAP(X)                                                                           \
    X(SUCCEEDED, "succeeded")                                                                      \
    X(FAILED, "failed")                                                                            \
    X(REJECTED, "rejected")                                                                        \
    X(EXPIRED, "expired")                                                                          \
    X(CANCELLED, "cancelled")

#define SL_ERRTYPE_MAP(X)                                                                          \
    X(INVALID_REQUEST, "invalid_request")                                                          \
    X(AUTHENTICATION, "authentication")                                                            \
    X(PERMISSION, "permission")                                                                    \
    X(CAPACITY, "capacity")                                                                        \
    X(POLICY, "policy")                                                                            \
    X(PROVIDER, "provider")                                                                        \
    X(DEADLINE, "deadline")                                                                        \
    X(INTERNAL, "internal")

/* error.gateway_decision: who decided the outcome. */
#define SL_DECISION_MAP(X)                                                                         \
    X(REJECTED_LOCALLY, "rejected_locally")                                                        \
    X(ADMITTED_PROVIDER_REJECTED, "admitted_provider_rejected")                                    \
    X(EXPIRED_IN_QUEUE, "expired_in_queue")                                                        \
    X(ATTEMPTS_EXHAUSTED, "attempts_exhausted")

/* error.reason: the machine-readable why. Rejections at ingest first, then the scheduler's. */
#define SL_REASON_MAP(X)                                                                           \
    X(PAYLOAD_TOO_LARGE, "payload_too_large")                                                      \
    X(MALFORMED_JSON, "malformed_json")                                                            \
    X(SCHEMA_VIOLATION, "schema_violation")                                                        \
    X(UNKNOWN_API_KEY, "unknown_api_key")                                                          \
    X(KEY_PAUSED, "key_paused")                                                                    \
    X(UNKNOWN_ROUTE, "unknown_route")                                                              \
    X(ROUTE_NOT_ALLOWED, "route_not_allowed")                                                      \
    X(REQUEST_TOO_LARGE, "request_too_large")                                                      \
    X(TENANT_PAUSED, "tenant_paused")                                                              \
    X(QUEUE_FULL, "queue_full")                                                                    \
    X(SHED, "shed")                                                                                \
    X(CANCELLED, "cancelled")                                                                      \
    X(NOTHING_TO_CANCEL, "nothing_to_cancel")                                                      \
    X(IDEMPOTENCY_CONFLICT, "idempotency_conflict")                                                \
    X(QUOTA_EXHAUSTED, "quota_exhausted")                                                          \
    X(NO_CAPABLE_DEPLOYMENT, "no_capable_deployment")                                              \
    X(UNKNOWN_TENANT_OR_ROUTE, "unknown_tenant_or_route")                                          \
    X(DEADLINE_EXCEEDED, "deadline_exceeded")                                                      \
    X(DEADLINE_BEFORE_RETRY, "deadline_before_retry")                                              \
    X(NOT_SENT, "not_sent")                                                                        \
    X(LEASE_EXPIRED, "lease_expired")                                                              \
    X(DISPATCHER_LOST, "dispatcher_lost")                                                          \
    X(RETRY_BUDGET_EXHAUSTED, "retry_budget_exhausted")                                            \
    X(PROVIDER_RATE_LIMITED, "provider_rate_limited")                                              \
    X(PROVIDER_UNAVAILABLE, "provider_unavailable")                                                \
    X(PROVIDER_QUOTA_EXHAUSTED, "provider_quota_exhausted")                                        \
    X(PROVIDER_BAD_REQUEST, "provider_bad_request")                                                \
    X(PROVIDER_AUTH, "provider_auth")

typedef enum {
#define X(name, text) SL_STATUS_##name,
    SL_STATUS_MAP(X)
#undef X
        SL_STATUS_COUNT_
} sl_status_t;
typedef enum {
#define X(name, text) SL_ERRTYPE_##name,
    SL_ERRTYPE_MAP(X)
#undef X
        SL_ERRTYPE_COUNT_
} sl_errtype_t;
typedef enum {
#define X(name, text) SL_DECISION_##name,
    SL_DECISION_MAP(X)
#undef X
        SL_DECISION_COUNT_
} sl_decision_t;
typedef enum {
#define X(name, text) SL_REASON_##name,
    SL_REASON_MAP(X)
#undef X
        SL_REASON_COUNT_
} sl_reason_t;

/* The wire names (never NULL; "unknown" for a value outside the enum). */
const char *sl_status_name(sl_status_t s);
const char *sl_errtype_name(sl_errtype_t t);
const char *sl_decision_name(sl_decision_t d);
const char *sl_reason_name(sl_reason_t r);
/* The enum value of a wire name, or -1 when it is none. */
int sl_status_parse(const char *name);
int sl_reason_parse(const char *name);

/* A result's error object. */
typedef struct {
    sl_errtype_t type;
    sl_reason_t reason;
    const char *message;
    sl_decision_t decision;
    int retryable;
    int fallback_allowed;
    const char *limiter, *scope; /* NULL = null */
    int64_t retry_after_ms;      /* -1 = null */
    const char *trace_id;        /* NULL = null */
} sl_msg_error_t;

/* A result. Strings are borrowed; NULL writes JSON null. JSON values are borrowed (NULL = null).
 * has_source: where ingest read a rejected request; has_timings: the scheduler's timings. */
typedef struct {
    const char *job_id; /* required */
    const char *idempotency_key, *tenant, *route, *cls;
    sl_status_t status;
    int attempts;
    const char *deployment;
    int fallback_used;
    const char *degraded_from; /* the route asked for, when a cheaper one served; NULL = absent */
    /* Which way the provider was called: "online" or "batch" (a provider's batch API); NULL =
     * absent (never called). What its usage cost at the deployment's price, and, on the batch
     * path, what it would have cost online; < 0 = absent (not priced, or sealed: the cost
     * would tell the usage). */
    const char *path;
    double cost_usd, online_cost_usd;
    const json_t *response, *usage, *metadata;
    int has_timings;
    double queued_ms, provider_ms, total_ms;
    int has_source;
    const char *source_topic;
    int source_partition;
    int64_t source_offset;
    int64_t finished_ms;
    const sl_msg_error_t *error; /* NULL = no error (null) */
    /* The tenant's box public key (32 bytes, borrowed): the content (response, usage,
     * metadata, the error's message) is sealed to it (common/seal.h); NULL = in the clear. */
    const uint8_t *seal_pk;
} sl_msg_result_t;

/* Fills r with an empty result of the given status (no error, retry_after_ms -1 where used). */
void sl_msg_result_init(sl_msg_result_t *r, const char *job_id, sl_status_t status);
/* Fills e (retry_after_ms -1, every optional field NULL). */
void sl_msg_error_init(sl_msg_error_t *e, sl_errtype_t type, sl_reason_t reason,
                       sl_decision_t decision, const char *message);

/* Fills r and e with a result `rejected` locally (before any provider call) under job_id and the
 * caller's idempotency key and tenant, r->error pointing to e: what ingest and the scheduler
 * answer a message with when there is no job of its own to finish. */
void sl_msg_result_rejected(sl_msg_result_t *r, sl_msg_error_t *e, const char *job_id,
                            const char *idem, const char *tenant, sl_errtype_t type,
                            sl_reason_t reason, const char *message, int64_t now_ms);

/* The result as a JSON object (caller owns the reference), sealed when r->seal_pk is set; NULL
 * when out of memory. */
json_t *sl_msg_result_json(const sl_msg_result_t *r);

#endif
