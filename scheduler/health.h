/* health.h - what the scheduler knows of each deployment's health: a provider's pause, the
 * probe after it, the run of server-side failures, and the time to first token.
 *
 * After a pause a deployment is half-open: one call goes first (the probe) and the rest wait
 * for its answer (at most PROBE_WAIT_MS), so a deployment that is still refusing is not met by
 * every waiting job at once. How long pauses last is retry.h's policy. Internal to the
 * scheduler (core.h).
 */
#ifndef SL_HEALTH_H
#define SL_HEALTH_H

#include <jansson.h>
#include <stdint.h>

#include "core.h"
#include "msg_usage.h"

/* Whether deployment d must not be tried now: paused, or its probe is out and unanswered;
 * *wait_ms gets how long to wait before trying again. */
int sl_health_holds(const sl_sched_t *s, int d, int64_t now_ms, int64_t *wait_ms);
/* A call was leased to d: when d is half-open, it is the probe. */
void sl_health_probe_sent(sl_sched_t *s, int d, int64_t now_ms);

/* A call of j (leased to a deployment still in the config) was answered with outcome: a success
 * updates d's time to first token (ttft_ms, the usage event's) and ends its failure streak;
 * an answer to the probe, or to a call sent after it, opens d again or lets the next call probe
 * again. */
void sl_health_answered(sl_sched_t *s, const job_t *j, sl_outcome_t outcome, double ttft_ms);
/* Pauses d for pause_ms (never shortening a longer pause; 0 = no pause) and makes it half-open
 * afterwards. */
void sl_health_pause(sl_sched_t *s, int d, int64_t pause_ms, int64_t now_ms);
/* d failed on the server side (overloaded, server_error): one more in its failure streak, and
 * the pause sl_retry_overload_pause_ms says. */
void sl_health_server_failed(sl_sched_t *s, int d, int64_t retry_after_ms, int64_t now_ms);
/* d's provider says its quota is used up: d is left alone for a minute. */
void sl_health_quota_exhausted(sl_sched_t *s, int d, int64_t now_ms);

#endif
