/* retry.h - how long things wait after a provider said no, and whether a job gets another try.
 *
 * The policy in one place: a job's backoff without a provider hint, how long a 429 or a run of
 * server-side failures pauses a deployment (health.h keeps the pause), and the route's retry
 * budget, which keeps a storm of failures from multiplying the traffic. Waits that stand for
 * provider time scale with the configured minute like the limits do. Internal to the scheduler
 * (core.h).
 */
#ifndef SL_RETRY_H
#define SL_RETRY_H

#include <stdint.h>

#include "core.h"
#include "msg_result.h"

/* Backoff of a job without a provider hint: capped exponential with full jitter. */
int64_t sl_retry_backoff_ms(const sl_sched_t *s, int attempts);

/* How long a 429 pauses its deployment. Retry-After is a lower bound: the deployment pauses at
 * least that long, plus up to 10 % jitter so paused work does not come back in one
 * synchronised wave. Without one, a second of the configured minute (providers enforce
 * per-minute limits over slices of about that; a fixed second would be 20 s of a test's
 * 3-second minute). */
int64_t sl_retry_rate_limit_pause_ms(const sl_sched_t *s, int64_t retry_after_ms);

/* How long a server-side failure (overloaded, server_error) pauses its deployment, the
 * fail_streak-th in a row; 0 = not at all. A deployment that asks for a pause (a hint,
 * retry_after_ms > 0) gets it, plus up to 10 % jitter. Without a hint, one failure says little
 * (a provider answering 503 to a share of its calls still serves the rest): the deployment is
 * paused only once OVERLOAD_STREAK server-side failures came in a row, with no success between
 * them, which is what an outage looks like; then for a backoff that doubles with each further
 * failure (full jitter, base and cap scaled to the configured minute). Pausing at every 503 cut
 * a 30 % random-503 provider to 6 % of its limit (bench/compare storm503). */
int64_t sl_retry_overload_pause_ms(const sl_sched_t *s, int64_t retry_after_ms, int fail_streak);

/* Counts a lease of j toward its route's retry budget (first attempts are what retries are
 * measured against). */
void sl_retry_count_lease(sl_sched_t *s, const job_t *j, int64_t now_ms);

/* Puts a leased job back in line (retry) after delay_ms (0: at the front of its flow now), or
 * fails it when its attempts, the route's retry budget (for provider refusals) or its deadline
 * are spent. j is taken out of the leased list either way. */
sl_err_t sl_retry_or_fail(sl_sched_t *s, job_t *j, int64_t delay_ms, sl_reason_t reason,
                          const char *message, int64_t now_ms);

#endif
