/* faults.h - seeded fault injection: unavailable windows, random overloads, injected 429s with
 * or without Retry-After, the acceleration limit, the spend cap, slow answers, dropped
 * connections and cut streams.
 *
 * The idea to hold first: every request takes the same six draws from its deployment's seeded
 * sequence (sl_sim_faults_draw), used or not, so the fault a request meets depends only on the
 * seed and on how many requests came before it. Admission (admit.c) decides where in its order
 * each fault applies; this module draws, checks the time-based faults and writes the faults'
 * answers. All of it needs the simulator's lock.
 */
#ifndef SL_SIM_FAULTS_H
#define SL_SIM_FAULTS_H

#include <stdbool.h>
#include <stdint.h>

#include "sim_internal.h"

/* The draws of one request from the deployment's fault sequence: always all of them, in this
 * order, so the sequence does not depend on which ones are used. */
typedef struct {
    double overloaded, rate_limit, retry_after, slow, drop, cut_at;
} sl_sim_draws_t;

/* Takes the draws of one request from dep's sequence. Caller holds the lock. */
sl_sim_draws_t sl_sim_faults_draw(sl_sim_deployment_t *dep);

/* Whether now_ms falls in one of the deployment's unavailable windows. The first call also
 * notes the time of the deployment's first validated request, which windows may count from.
 * Caller holds the lock. */
bool sl_sim_faults_unavailable(const sl_sim_t *sim, sl_sim_deployment_t *dep, int64_t now_ms);

/* The acceleration limit (Anthropic's "sharp increases" 429s): whether it lets one more request
 * through at now_ms, which it then counts; always true when the limit is off. Caller holds the
 * lock. */
bool sl_sim_faults_acceleration_admits(sl_sim_deployment_t *dep, int64_t now_ms);

/* An injected 429 (rate_limit_share, or the acceleration limit: counted in *counter), with or
 * without a Retry-After of retry_after_ms. Nothing is charged. Caller holds the lock. */
void sl_sim_faults_inject_429(sl_sim_t *sim, sl_sim_deployment_t *dep, const sl_sim_request_t *req,
                              sl_sim_response_t *resp, bool with_retry, int64_t now_ms,
                              int64_t *counter);

/* The spend cap or quota is exhausted (spend_limit_after): a 429 that is not worth retrying,
 * with no Retry-After. Caller holds the lock. */
void sl_sim_faults_refuse_spend(sl_sim_t *sim, sl_sim_deployment_t *dep, sl_sim_response_t *resp,
                                int64_t now_ms);

#endif
