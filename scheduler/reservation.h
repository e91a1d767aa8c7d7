/* reservation.h - what an admission reserves on a job's path, and how it is settled.
 *
 * A lease holds one charge per bucket of the job's path (held_t), each with the rule that
 * settles it when the call ends (sl_charge_rule_t): what the provider counted at receipt stays, real use
 * replaces an estimate, a gauge's slot comes back. Settling also clamps the deployment's
 * buckets to what the provider's rate-limit headers say it had left. Internal to the scheduler
 * (core.h).
 */
#ifndef SL_RESERVATION_H
#define SL_RESERVATION_H

#include <jansson.h>
#include <stdint.h>

#include "capacity.h"
#include "core.h"

/* A charge's rule (sl_charge_rule_t) and what a job asks for (sl_demand_t) are the one rule
 * ingest and the scheduler share: common/capacity.h. */

/* How an attempt ended, for settling its charges. */
typedef enum {
    END_USAGE = 0, /* the provider reported real usage */
    END_NO_USAGE,  /* it failed without usage: the call may still have counted */
    END_REFUSED,   /* the provider refused it (429, 503, 529) without processing it */
    END_NOT_SENT,  /* the dispatcher never called */
    END_EXPIRED    /* nobody reported back: the call may have happened */
} end_t;

/* What job j asks for now, as the ledger would reserve it. */
sl_demand_t sl_reservation_demand(const sl_sched_t *s, const job_t *j);

/* What charges cost in the DRR: their dominant share of the per-minute request and token
 * limits on the provider side that they touch (each limit counts the way its provider counts:
 * prompt + max_tokens at receipt, input and output apart, ...), as the time each limit needs to
 * serve its charge; that time is given in tokens of the fastest token limit, so a job on a pool
 * with one TPM limit costs exactly its TPM charge. amount[i] replaces ch[i].amount when not
 * NULL (what was really counted). -1 when no such limit is touched. */
double sl_reservation_share_cost(const sl_sched_t *s, const sl_charge_t *ch, const double *amount,
                                 int n);

/* How much the charges ch (amount[i] replacing ch[i].amount when not NULL) raise the dominant
 * share of j's flow: the flow's use per dimension (minutes of each limit's rate, decaying over
 * a minute) before and after adding them, in tokens of the fastest token limit like
 * sl_reservation_share_cost; the use is updated. A flow whose jobs each weigh on one limit
 * pays each job's own share; one whose jobs weigh on different limits in turn pays about its
 * largest total, not the sum of each job's largest (multi-resource fairness per flow rather
 * than per job). -1 when no shared limit is touched. */
double sl_reservation_marginal_cost(sl_sched_t *s, const job_t *j, const sl_charge_t *ch,
                                    const double *amount, int n, int64_t now_ms);

/* How long charges ch weigh on the provider-side per-minute token limits of the buckets in
 * blocked[0..nblocked) (*on, the longest of them) and on the other such limits they touch
 * (*beside), each as amount / rate of its limit, in ms. Returns 0 (and both 0) when a blocked
 * bucket is not such a limit (requests, gauges, quotas: every job needs their room alike). */
int sl_reservation_time_split(const sl_sched_t *s, const sl_charge_t *ch, int n, const int *blocked,
                              int nblocked, double *on, double *beside);

/* What job j costs in the DRR now: sl_reservation_share_cost of its charges on its route's
 * first deployment, with what was learned so far; its input + output tokens when the route
 * has no such limit. At least 1. */
int64_t sl_reservation_cost(sl_sched_t *s, const job_t *j);

/* Every charge of job j on deployment d, callers' side first. */
void sl_reservation_build(sl_sched_t *s, const job_t *j, int d, held_t *h);

/* A reservation id (32 hex digits) that sorts by creation: 12 digits of the clock, 4 of a
 * counter, 16 random. New rows then land at the end of the reservations table's B-tree
 * instead of at random places in it, which keeps the one write per admission cheap. */
void sl_reservation_new_id(sl_sched_t *s, int64_t now_ms, char out[33]);
/* The creation time (epoch ms) a reservation id begins with; -1 when it does not begin with 12
 * lower-case hex digits. */
int64_t sl_reservation_id_ms(const char *id);

/* Settles every charge j holds and closes its reservation as `state` ("reconciled" or
 * "expired") in one write; counts what over-reservation held back (tokens reserved above real
 * use, on buckets settled at real use) and what it missed (overage). j's held charges are
 * freed whatever the store says, and its route unblocked: what came back may let work in.
 * With real usage (END_USAGE), *cost_delta (when not NULL) gets what the limits really counted,
 * in DRR cost (sl_reservation_marginal_cost), less what the DRR charged when it served j
 * (j->drr_cost): what the job's flow still owes (or is owed); 0 otherwise. */
sl_err_t sl_reservation_settle(sl_sched_t *s, job_t *j, end_t end, const char *state, int64_t in,
                               int64_t out, int64_t cached, const char *outcome, int64_t now_ms,
                               int64_t *cost_delta);

/* Provider headers of a response clamp the deployment's own per-minute buckets to what the
 * provider said it had left when it received the request (never raising them). */
void sl_reservation_clamp(sl_sched_t *s, job_t *j, json_t *ratelimit, int64_t now_ms);

#endif
