/* route.h - where a job can go on its route: which deployments fit it, in what order the
 * route's strategy tries them, the fallback routes, the cheaper route its class may degrade to,
 * and what a waiting job waits for.
 *
 * Internal to the scheduler (core.h).
 */
#ifndef SL_ROUTE_H
#define SL_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"

/* Whether deployment d could ever take job j: FIT_INCAPABLE when it lacks what the request
 * needs, FIT_TOO_LARGE when its max_tokens is above the deployment's output ceiling or a
 * provider-side charge above what its limit allows in a whole period (a request above a whole
 * limit is "too large" at the provider, whatever the wait). */
typedef enum { FIT_OK = 0, FIT_TOO_LARGE, FIT_INCAPABLE } fit_t;

/* Whether deployment d can serve j at all: its capabilities (context window, tools,
 * structured output, the tenant's regions), then limits that could ever hold the request. */
fit_t sl_route_fit(sl_sched_t *s, job_t *j, int d);

/* sl_route_fit(s, j, d) == FIT_OK. */
int sl_route_can_take(sl_sched_t *s, job_t *j, int d);

/* Orders a route's candidate deployments for job j by the route's strategy (sl_strategy_t);
 * every one of them can take j, and the first whose buckets have room gets it. */
void sl_route_order(sl_sched_t *s, const sl_route_cfg_t *rc, job_t *j, int *order, int n,
                    int64_t now_ms);

/* Whether j goes to a provider's batch API rather than online (routes[].batch): a batch-class,
 * unstreamed job on a route whose policy is provider, or auto with a deadline at least
 * auto_min_left_ms from now (that of the route's first deployment with a batch API). */
int sl_route_by_batch(sl_sched_t *s, job_t *j, int64_t now_ms);

/* Fills order (room for SL_ROUTE_MAX_DEPLOYMENTS) with the deployments of j's route that fit
 * j, in the order of the route's strategy, and returns how many; *incapable gets how many
 * lacked what the request needs (FIT_INCAPABLE). A job that goes by batch
 * (sl_route_by_batch) gets the batch twins of the route's deployments instead. */
int sl_route_candidates(sl_sched_t *s, job_t *j, int *order, int *incapable, int64_t now_ms);
/* j fits no deployment of its route: takes it out of line, moves it to a fallback route when
 * it may, and refuses it otherwise: no_capable_deployment when a deployment lacked what it
 * needs (incapable > 0), else request_too_large. */
sl_err_t sl_route_refuse_unfit(sl_sched_t *s, job_t *j, int incapable, int64_t now_ms);

/* Moves j (taken out of its route's line) to the first fallback route of its route that its
 * tenant may use and that has a deployment able to take it, when the job allows it. *moved
 * says whether it did; otherwise j is left out of line for the caller to finish. */
sl_err_t sl_route_fallback(sl_sched_t *s, job_t *j, const char *why, int64_t now_ms, int *moved);

/* Names what a queued job is waiting for: among the deployments that could take it, the one
 * that frees up first, and on it the bucket (or the pause) that holds the job back longest.
 * Writes the bucket id (e.g. "deployment:sim-a:tpm", or "deployment:sim-a:paused") into
 * limiter and returns the wait in ms (-1 when nothing limits it). */
int64_t sl_route_why_waiting(sl_sched_t *s, job_t *j, int64_t now_ms, char *limiter, size_t cap);

/* Expires a job whose deadline passed while it was queued, naming what held it back. */
sl_err_t sl_route_expire_in_queue(sl_sched_t *s, job_t *j, int64_t now_ms);

/* Whether j may be degraded (classes.*.overload = degrade): its class degrades, j allows it
 * ("degrade": true), it is still on the route it asked for, and that route has a degrade_to
 * route its tenant may use, where the tenant's queue of j's class holds fewer than max_queue
 * jobs. */
int sl_route_can_degrade(sl_sched_t *s, job_t *j);
/* Whether j, queued now behind the jobs of its class on its route, would wait past its
 * deadline, less its margin (sl_route_deadline_margin_ms), at the pace its route's provider-side rate
 * limits allow for jobs like it, after the room they have now (other classes' share of the
 * route is not counted). 0 when the pace is not known (no rate limit) or nothing is queued. */
int sl_route_would_miss_deadline(sl_sched_t *s, job_t *j, int64_t now_ms);
/* The part of j's time that degrading keeps in hand before its deadline: a tenth of it. */
int64_t sl_route_deadline_margin_ms(const job_t *j);
/* Degrades j: when sl_route_can_degrade, j is taken out of its route's line (a new job is in
 * none yet), queued on the degrade_to route (at the back), and *moved is set; why
 * ("queue_full", "deadline") is logged and counted. Otherwise nothing changes. j must be new or
 * queued (J_QUEUED). */
sl_err_t sl_route_degrade(sl_sched_t *s, job_t *j, const char *why, int *moved);

#endif
