/* outcome.h - finishing a job: its terminal state, its result and its place in memory.
 *
 * Every way a job ends (success, a provider's refusal, a local rejection, expiry, cancel)
 * fills an outcome_t and calls sl_outcome_finish, which builds the result message
 * (schema/result.json), writes it with the job's terminal state in the caller's transaction
 * (the outbox), hands it over and frees the job. Internal to the scheduler (core.h).
 */
#ifndef SL_OUTCOME_H
#define SL_OUTCOME_H

#include <jansson.h>
#include <stdint.h>

#include "core.h"
#include "msg_result.h"

/* How a job ended, as its result says it (has_error 0 = no error object). The codes come from
 * the result message's tables (common/msg_result.h). */
typedef struct {
    sl_status_t status;
    const char *deployment;
    const json_t *response; /* borrowed */
    const json_t *usage;    /* borrowed, canonical {input, output, cached, ...} */
    double provider_ms;
    int has_error;
    sl_errtype_t err_type;
    sl_reason_t err_reason;
    sl_decision_t decision;
    char err_message[512];
    const char *limiter, *scope;
    int64_t retry_after_ms; /* -1 = none */
    int retryable;
} outcome_t;

/* An outcome of this status with nothing else known (no error, no retry hint). */
void sl_outcome_init(outcome_t *o, sl_status_t status);
/* Gives o an error object of this type, reason and gateway decision. */
void sl_outcome_error(outcome_t *o, sl_errtype_t type, sl_reason_t reason,
                      sl_decision_t decision);

/* Writes the job's terminal state and result (outbox) in the caller's transaction, hands the
 * result over, takes the job out of its place and frees it (also on failure). The result's
 * "attempts" counts calls that reached a dispatcher's HTTP client: a lease the dispatcher
 * refused without calling (not_sent) is not an attempt. */
sl_err_t sl_outcome_finish(sl_sched_t *s, job_t *j, const outcome_t *o, int64_t now_ms);

/* Finishes j with status and an error of type, reason and gateway decision (result.json's
 * error object), naming the deployment of its last lease when it had one. */
sl_err_t sl_outcome_fail(sl_sched_t *s, job_t *j, sl_status_t status, sl_errtype_t type,
                         sl_reason_t reason, sl_decision_t decision, int retryable,
                         const char *message, int64_t now_ms);

/* Refuses a job that a quota keeps out until after its deadline: a clear, final answer naming
 * the quota, instead of waiting for the deadline or retrying. */
sl_err_t sl_outcome_fail_quota(sl_sched_t *s, job_t *j, int b, int64_t wait_ms, int64_t now_ms);

/* Refuses a job whose tenant or route the config does not know (see J_ORPHAN). A lease it
 * still held is closed as expired: the call may have happened. */
sl_err_t sl_outcome_fail_orphan(sl_sched_t *s, job_t *j, sl_status_t status, int64_t now_ms);

/* Fails every orphan (after a restart: jobs restored under names the config lost). */
sl_err_t sl_outcome_fail_orphans(sl_sched_t *s, int64_t now_ms);

#endif
