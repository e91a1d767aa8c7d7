/* flow.h - how jobs wait in line: queueing in a route's DRR, queue limits, shedding, pauses
 * and classes that yield.
 *
 * A route's DRR shares its capacity by class weight between classes and by tenant weight within
 * a class (a flow is one tenant's jobs of one class); each job costs the tokens it will reserve,
 * earliest deadline first within a flow. A job of a paused tenant or key waits out of line
 * (held). Internal to the scheduler (core.h).
 */
#ifndef SL_FLOW_H
#define SL_FLOW_H

#include <stdint.h>

#include "core.h"

/* Whether j's tenant or key is paused (admin API). */
int sl_flow_is_paused(const sl_sched_t *s, const job_t *j);
/* Queues j (in no place, asserted) in its route's DRR, at the front of its flow for a retry
 * (front) or by deadline; held instead when its tenant or key is paused. */
sl_err_t sl_flow_enqueue(sl_sched_t *s, job_t *j, int front);
/* Puts a new job (in the job map, in no place) in line. It is refused at once, finished and
 * forgotten (so that it may be submitted again) when its tenant or key is paused or its
 * tenant's queue of its class is full; a class that sheds first refuses the queued job due
 * last when that one is due later than j. */
sl_err_t sl_flow_admit(sl_sched_t *s, job_t *j, int64_t now_ms);
/* Jobs of j's tenant and class queued on route r. */
size_t sl_flow_len_on(const sl_sched_t *s, const job_t *j, int r);
/* Whether j's tenant has its class's max_queue of jobs queued: on every route, or, for a class
 * whose overload is degrade, on j's route. */
int sl_flow_queue_full(const sl_sched_t *s, const job_t *j);
/* Whether the scheduler holds more than scheduler.max_queued jobs or max_queued_bytes. */
int sl_flow_scheduler_full(const sl_sched_t *s);

/* Charges j's flow on its route what its limits really counted beyond what the DRR charged
 * when it was served (cost_delta from sl_reservation_settle; < 0 gives back). */
void sl_flow_charge(sl_sched_t *s, const job_t *j, int64_t cost_delta);

/* Whether class cls must wait on this route: it runs on leftover capacity (yield_above > 0),
 * other classes have work queued here, and they took at least yield_above of what the route
 * admitted recently. */
int sl_flow_must_yield(const sl_sched_t *s, route_t *route, int cls, int64_t now_ms);
/* Counts tokens admitted for class cls on the route (what sl_flow_must_yield weighs). */
void sl_flow_count_admitted(const sl_sched_t *s, route_t *route, int cls, double tokens,
                            int64_t now_ms);

/* Interactive work arriving into a slice that leftover-capacity work has filled would wait
 * for the next slice. So a job of a class that runs on leftover capacity (yield_above > 0)
 * leaves room in each provider-side token bucket it is charged to (sl_charge_t.keep): twice
 * the share of the route's recent admissions that was interactive, of a burst, plus one
 * interactive job of the recent average size, at most RESERVE_MAX_SHARE of the burst; nothing
 * when no interactive work was admitted on the route in the last minutes (the counts decay
 * with a time constant of a minute). The level such a job waits for (its charge, the bucket's
 * margin, the reserve) stays RESERVE_TICK_SLACK_MS of refill below the burst: a job that waited
 * for a full bucket left the refill to be lost whenever the next tick came a little late, and
 * while the scheduler takes a flood in its ticks come 10 - 75 ms apart (with 100-ms slices
 * 1 - 2 % of the limit was lost that way). With one-second slices the slack is 2 % of a burst. */
enum { RESERVE_MAX_SHARE_PERCENT = 25, RESERVE_TICK_SLACK_MS = 20 };
#define RESERVE_MAX_SHARE (RESERVE_MAX_SHARE_PERCENT / 100.0)
void sl_flow_keep_reserve(const sl_sched_t *s, route_t *route, const job_t *j, held_t *h,
                          int64_t now_ms);

/* Takes the queued jobs of a tenant (or, tenant < 0, of a key) out of line and queues them
 * again: held when paused, in the DRR with the tenant's current weights otherwise. */
sl_err_t sl_flow_requeue(sl_sched_t *s, int tenant, int key);
/* Puts back in line every held job that nothing pauses any more. */
sl_err_t sl_flow_release_held(sl_sched_t *s);

#endif
