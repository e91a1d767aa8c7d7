/* retry.c - backoff and pause policy, and the route's retry budget (see retry.h).
 */
#include "retry.h"

#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "flow.h"
#include "job.h"
#include "outcome.h"
#include "store.h"

/* Server-side failures in a row (no success between) that pause a deployment without a hint. */
enum { OVERLOAD_STREAK = 5 };

/* Decays a route's recent first attempts and retries to now. */
static void decay_retries(const sl_sched_t *s, route_t *route, int64_t now_ms)
{
    if (now_ms <= route->retry_ms)
        return;
    double keep = exp(-(double)(now_ms - route->retry_ms) / (double)s->cfg->minute_ms);
    route->recent_first *= keep;
    route->recent_retries *= keep;
    route->retry_ms = now_ms;
}

/* ms of a real (60 s) minute in the configured minute, at least 10 ms: waits that stand for
 * provider time shrink with shortened minutes like the limits do. */
static int64_t scaled_ms(const sl_sched_t *s, int64_t ms)
{
    int64_t v = ms * s->cfg->minute_ms / 60000;
    return v > 10 ? v : 10;
}

int64_t sl_retry_backoff_ms(const sl_sched_t *s, int attempts)
{
    int64_t cap = scaled_ms(s, 30000), base = scaled_ms(s, 500);
    int shift = attempts > 1 ? attempts - 1 : 0;
    int64_t ceiling = shift >= 16 ? cap : base << shift;
    if (ceiling > cap)
        ceiling = cap;
    return (int64_t)randombytes_uniform((uint32_t)ceiling + 1);
}

/* How long a 429 without a Retry-After pauses its deployment: a second of the configured
 * minute, at least 10 ms. */
static int64_t no_hint_pause_ms(const sl_sched_t *s)
{
    return scaled_ms(s, 1000);
}

int64_t sl_retry_rate_limit_pause_ms(const sl_sched_t *s, int64_t retry_after_ms)
{
    int64_t pause = retry_after_ms > 0 ? retry_after_ms : no_hint_pause_ms(s);
    pause += (int64_t)randombytes_uniform((uint32_t)(pause / 10 + 1));
    return pause;
}

int64_t sl_retry_overload_pause_ms(const sl_sched_t *s, int64_t retry_after_ms, int fail_streak)
{
    int64_t pause = 0;
    if (retry_after_ms > 0) {
        pause = retry_after_ms + (int64_t)randombytes_uniform((uint32_t)(retry_after_ms / 10 + 1));
    } else if (fail_streak >= OVERLOAD_STREAK) {
        int shift = fail_streak - OVERLOAD_STREAK;
        shift = shift < 4 ? shift : 4;
        int64_t ceiling = scaled_ms(s, 500) << shift;
        pause = 1 + (int64_t)randombytes_uniform((uint32_t)ceiling);
    }
    return pause;
}

void sl_retry_count_lease(sl_sched_t *s, const job_t *j, int64_t now_ms)
{
    if (j->pbatch)
        return; /* a provider batch's lines are outside the budget (sl_retry_or_fail) */
    route_t *rt = &s->routes[j->route];
    decay_retries(s, rt, now_ms);
    if (j->attempts - j->not_sent <= 1)
        rt->recent_first += 1;
}

sl_err_t sl_retry_or_fail(sl_sched_t *s, job_t *j, int64_t delay_ms, sl_reason_t reason,
                          const char *message, int64_t now_ms)
{
    sl_job_list_del(&s->leased, j);
    if (j->attempts - j->not_sent >= s->cfg->max_attempts)
        return sl_outcome_fail(s, j, SL_STATUS_FAILED, SL_ERRTYPE_PROVIDER, reason,
                               SL_DECISION_ATTEMPTS_EXHAUSTED, 0, message, now_ms);
    if (now_ms + delay_ms >= j->deadline_ms)
        return sl_outcome_fail(s, j, SL_STATUS_FAILED, SL_ERRTYPE_DEADLINE,
                               SL_REASON_DEADLINE_BEFORE_RETRY,
                               SL_DECISION_ADMITTED_PROVIDER_REJECTED, 0,
                               "the next safe attempt would miss the job's deadline", now_ms);
    /* The route's retry budget: retries at most max_retry_ratio of its recent first attempts
     * (with a floor of a few, so that a quiet route can still retry), so that a storm of
     * provider failures cannot multiply the traffic. Only what a provider answered counts: a
     * lease that was never sent, or that expired because one of sluice's own processes died,
     * is not the provider's storm (e2e_crash: a dispatcher killed with 400 leases out); nor is a
     * provider batch's failed line: its retry goes into a later batch, in the batch quota, and
     * a batch's errors all arrive at once, long after its first attempts (e2e_batch failed a
     * job so). max_attempts still bounds them. */
    route_t *rt = &s->routes[j->route];
    decay_retries(s, rt, now_ms);
    if (!j->pbatch &&
        (reason == SL_REASON_PROVIDER_RATE_LIMITED || reason == SL_REASON_PROVIDER_UNAVAILABLE)) {
        double allowed = s->cfg->routes[j->route].max_retry_ratio *
                         (rt->recent_first > 10 ? rt->recent_first : 10);
        if (rt->recent_retries >= allowed) {
            char msg[700];
            snprintf(msg, sizeof msg,
                     "%.400s; not retried: route %s's retries are over its budget "
                     "(routes[].max_retry_ratio %.2f of recent first attempts)",
                     message, s->cfg->routes[j->route].name,
                     s->cfg->routes[j->route].max_retry_ratio);
            return sl_outcome_fail(s, j, SL_STATUS_FAILED, SL_ERRTYPE_PROVIDER,
                                   SL_REASON_RETRY_BUDGET_EXHAUSTED,
                                   SL_DECISION_ADMITTED_PROVIDER_REJECTED, 1, msg, now_ms);
        }
        rt->recent_retries += 1;
    }
    s->st.retried++;
    j->not_before_ms = now_ms + delay_ms;
    if (j->lease != NULL)
        j->lease->res_id[0] = '\0';
    sl_err_t rc = sl_store_job_requeue(s->store, j->id, j->attempts, j->not_before_ms, now_ms);
    if (rc != SL_OK)
        return rc;
    if (delay_ms > 0) {
        j->state = J_DELAYED;
        return sl_job_list_add(&s->delayed, j);
    }
    return sl_flow_enqueue(s, j, 1 /*front: a retry keeps its place*/);
}
