/* route.c - deployment fit, strategy ordering, fallback routes and why a job waits (see
 * route.h).
 */
#include "route.h"

#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "buckets.h"
#include "drr.h"
#include "flow.h"
#include "job.h"
#include "ledger.h"
#include "log.h"
#include "outcome.h"
#include "reservation.h"

/* The share of the tightest bucket on a deployment's side of the path (its own limits and its
 * parent scopes') that is free now, for choosing where to go. */
static double free_fraction(sl_sched_t *s, int d, int64_t now_ms)
{
    double f = 1.0;
    const path_t *p = &s->deps[d].path;
    for (int i = 0; i < p->n; i++) {
        double x =
            sl_ledger_level(s->ledger, p->b[i], now_ms) / sl_ledger_capacity(s->ledger, p->b[i]);
        if (x < f)
            f = x;
    }
    return f;
}

fit_t sl_route_fit(sl_sched_t *s, job_t *j, int d)
{
    const sl_deployment_cfg_t *dc = &s->cfg->deployments[d];
    unsigned f = sl_job_flags(s, j);
    if (dc->context_window > 0 && j->est_input + j->est_output > dc->context_window)
        return FIT_INCAPABLE;
    if (((f & JF_TOOLS) && !dc->supports_tools) || ((f & JF_JSON) && !dc->supports_json))
        return FIT_INCAPABLE;
    const sl_tenant_cfg_t *tc = &s->cfg->tenants[j->tenant];
    if (tc->nregions > 0) {
        int ok = 0;
        for (int i = 0; i < tc->nregions; i++)
            ok |= strcmp(tc->regions[i], dc->region) == 0;
        if (!ok)
            return FIT_INCAPABLE;
    }
    if (j->est_output > dc->max_output_tokens)
        return FIT_TOO_LARGE;
    sl_demand_t dm = sl_reservation_demand(s, j);
    const path_t *p = &s->deps[d].path;
    for (int i = 0; i < p->n; i++) {
        const binfo_t *bi = &s->binfo[p->b[i]];
        double amount;
        sl_charge_rule_t rule;
        sl_capacity_charge(bi->limit, bi->provider_side, dc, &dm, &amount, &rule);
        if (!sl_capacity_within(bi->limit, amount))
            return FIT_TOO_LARGE;
    }
    return FIT_OK;
}

int sl_route_can_take(sl_sched_t *s, job_t *j, int d)
{
    return sl_route_fit(s, j, d) == FIT_OK;
}

void sl_route_order(sl_sched_t *s, const sl_route_cfg_t *rc, job_t *j, int *order, int n,
                    int64_t now_ms)
{
    double key[SL_ROUTE_MAX_DEPLOYMENTS]; /* lower first */
    sl_demand_t dm = sl_reservation_demand(s, j);
    for (int i = 0; i < n; i++) {
        int d = order[i];
        const sl_deployment_cfg_t *dc = &s->cfg->deployments[d];
        switch (rc->strategy) {
        case SL_STRATEGY_WATERFALL:
            /* The listed order, but a deployment used past overflow_at goes after those that
             * are not (and back first as soon as it has room again). */
            key[i] = (1.0 - free_fraction(s, d, now_ms) >= rc->overflow_at ? 1000.0 : 0.0) + i;
            break;
        case SL_STRATEGY_LATENCY:
            /* Unmeasured deployments first, so each gets measured. */
            key[i] = s->deps[d].ttft_ms;
            break;
        case SL_STRATEGY_CHEAPEST:
            key[i] = sl_capacity_spend_usd(&dc->price, dm.input, 0, dm.output);
            break;
        case SL_STRATEGY_WEIGHTED: {
            /* A weighted random order (Efraimidis-Spirakis: the largest u^(1/w) first, i.e.
             * the smallest -ln(u)/w), so each deployment comes first in proportion to its
             * limit. */
            double w = (double)(dc->tpm > 0 ? dc->tpm : dc->rpm > 0 ? dc->rpm : 1);
            double u = ((double)randombytes_uniform(1000000) + 1.0) / 1000001.0;
            key[i] = -log(u) / w;
            break;
        }
        default: /* spread: the most free capacity first */
            key[i] = -free_fraction(s, d, now_ms);
            break;
        }
    }
    for (int i = 1; i < n; i++) {
        for (int k = i; k > 0 && key[k] < key[k - 1]; k--) {
            double tk = key[k];
            key[k] = key[k - 1];
            key[k - 1] = tk;
            int td = order[k];
            order[k] = order[k - 1];
            order[k - 1] = td;
        }
    }
}

sl_err_t sl_route_fallback(sl_sched_t *s, job_t *j, const char *why, int64_t now_ms, int *moved)
{
    (void)now_ms;
    *moved = 0;
    if (!(sl_job_flags(s, j) & JF_FALLBACK))
        return SL_OK;
    const sl_route_cfg_t *from = &s->cfg->routes[j->route];
    for (int i = 0; i < from->nfallbacks; i++) {
        int r = from->fallbacks[i];
        if (r == j->home_route || !sl_config_tenant_allows_route(s->cfg, j->tenant, r))
            continue;
        int from_route = j->route;
        j->route = r;
        int able = 0;
        for (int k = 0; k < s->cfg->routes[r].ndeployments && !able; k++)
            able = sl_route_can_take(s, j, s->cfg->routes[r].deployments[k]);
        if (!able) {
            j->route = from_route;
            continue;
        }
        sl_logf(SL_LOG_INFO, "job", j->id, "job %s falls back from route %s to %s (%s)", j->id,
                s->cfg->routes[from_route].name, s->cfg->routes[r].name, why);
        if (s->obs.fallback != NULL)
            s->obs.fallback(s->obs_arg, from_route, r, why);
        *moved = 1;
        return sl_flow_enqueue(s, j, 1);
    }
    return SL_OK;
}

int sl_route_by_batch(sl_sched_t *s, job_t *j, int64_t now_ms)
{
    const sl_route_cfg_t *rc = &s->cfg->routes[j->route];
    if (rc->batch_policy == SL_BATCH_ONLINE || j->cls != SL_CLASS_BATCH ||
        (sl_job_flags(s, j) & JF_STREAM))
        return 0;
    if (rc->batch_policy == SL_BATCH_PROVIDER)
        return 1;
    for (int i = 0; i < rc->ndeployments; i++) {
        int t = s->cfg->deployments[rc->deployments[i]].batch_twin;
        if (t >= 0)
            return j->deadline_ms - now_ms >= s->cfg->deployments[t].batch.auto_min_left_ms;
    }
    return 0;
}

int sl_route_candidates(sl_sched_t *s, job_t *j, int *order, int *incapable, int64_t now_ms)
{
    const sl_route_cfg_t *rc_cfg = &s->cfg->routes[j->route];
    int n = 0;
    *incapable = 0;
    int by_batch = sl_route_by_batch(s, j, now_ms);
    for (int i = 0; i < rc_cfg->ndeployments; i++) {
        int d = rc_cfg->deployments[i];
        if (by_batch && (d = s->cfg->deployments[d].batch_twin) < 0)
            continue;
        fit_t fit = sl_route_fit(s, j, d);
        if (fit == FIT_OK)
            order[n++] = d;
        *incapable += fit == FIT_INCAPABLE;
    }
    if (n > 0)
        sl_route_order(s, rc_cfg, j, order, n, now_ms);
    return n;
}

sl_err_t sl_route_refuse_unfit(sl_sched_t *s, job_t *j, int incapable, int64_t now_ms)
{
    sl_job_unplace(s, j);
    int moved = 0;
    sl_err_t rc = sl_route_fallback(
        s, j, incapable > 0 ? "no_capable_deployment" : "request_too_large", now_ms, &moved);
    if (rc == SL_OK && !moved && incapable == 0)
        rc = sl_outcome_fail(s, j, SL_STATUS_REJECTED, SL_ERRTYPE_CAPACITY,
                             SL_REASON_REQUEST_TOO_LARGE, SL_DECISION_REJECTED_LOCALLY, 0,
                             "no deployment of the route can take a request this large", now_ms);
    else if (rc == SL_OK && !moved)
        rc = sl_outcome_fail(s, j, SL_STATUS_REJECTED, SL_ERRTYPE_INVALID_REQUEST,
                             SL_REASON_NO_CAPABLE_DEPLOYMENT, SL_DECISION_REJECTED_LOCALLY, 0,
                             "no deployment of the route can serve this request (context "
                             "window, tools, structured output or the tenant's regions)",
                             now_ms);
    return rc;
}

int64_t sl_route_why_waiting(sl_sched_t *s, job_t *j, int64_t now_ms, char *limiter, size_t cap)
{
    const sl_route_cfg_t *r = &s->cfg->routes[j->route];
    int64_t best = INT64_MAX;
    limiter[0] = '\0';
    for (int i = 0; i < r->ndeployments; i++) {
        int d = r->deployments[i];
        const sl_deployment_cfg_t *dc = &s->cfg->deployments[d];
        if (!sl_route_can_take(s, j, d))
            continue;
        int64_t worst = 0;
        char label[200] = "";
        if (s->deps[d].paused_until_ms > now_ms) {
            worst = s->deps[d].paused_until_ms - now_ms;
            snprintf(label, sizeof label, "deployment:%s:paused", dc->name);
        }
        held_t h;
        sl_reservation_build(s, j, d, &h);
        for (int k = 0; k < h.n; k++) {
            int64_t w = sl_ledger_wait_ms(s->ledger, h.ch[k].bucket, h.ch[k].amount, now_ms);
            if (w > worst || (w == worst && w > 0 && label[0] == '\0')) {
                worst = w;
                snprintf(label, sizeof label, "%s", sl_ledger_id(s->ledger, h.ch[k].bucket));
            }
        }
        if (worst < best) {
            best = worst;
            snprintf(limiter, cap, "%s", label);
        }
    }
    return limiter[0] != '\0' ? best : -1;
}

sl_err_t sl_route_expire_in_queue(sl_sched_t *s, job_t *j, int64_t now_ms)
{
    char limiter[200], scope[200];
    int64_t wait = sl_route_why_waiting(s, j, now_ms, limiter, sizeof limiter);
    outcome_t o;
    sl_outcome_init(&o, SL_STATUS_EXPIRED);
    sl_outcome_error(&o, SL_ERRTYPE_DEADLINE, SL_REASON_DEADLINE_EXCEEDED,
                     SL_DECISION_EXPIRED_IN_QUEUE);
    if (wait >= 0) {
        const char *name; /* the scope is the id without its last part: "deployment:sim-a" */
        sl_buckets_split_id(limiter, scope, sizeof scope, &name);
        o.limiter = limiter;
        o.scope = scope;
        o.retry_after_ms = wait;
        snprintf(o.err_message, sizeof o.err_message,
                 "the job's deadline passed while it waited for capacity (held back by %s)",
                 limiter);
    } else {
        snprintf(o.err_message, sizeof o.err_message,
                 "the job's deadline passed while it waited for its turn");
    }
    return sl_outcome_finish(s, j, &o, now_ms);
}

/* ---- degrade (classes.*.overload = degrade) ---- */

int sl_route_can_degrade(sl_sched_t *s, job_t *j)
{
    const sl_config_t *cfg = s->cfg;
    int to = cfg->routes[j->route].degrade_to;
    return cfg->classes[j->cls].overload == SL_OVERLOAD_DEGRADE && to >= 0 &&
           j->route == j->home_route && (sl_job_flags(s, j) & JF_DEGRADE) &&
           sl_config_tenant_allows_route(cfg, j->tenant, to) &&
           (int64_t)sl_flow_len_on(s, j, to) < cfg->classes[j->cls].max_queue;
}

/* How many jobs like j route r's deployments take per ms (*rate) and how many they have room
 * for now (*room), by the rate limits of their provider side: token buckets' refill and level,
 * windows' capacity per window and what is left of it. *rate is INFINITY when a deployment that
 * can take j has no such limit, 0 when none can take it. Quotas and concurrency are left out:
 * they say how much, not how fast. */
static void route_pace(sl_sched_t *s, job_t *j, int r, int64_t now_ms, double *rate, double *room)
{
    const sl_route_cfg_t *rc = &s->cfg->routes[r];
    *rate = 0;
    *room = 0;
    for (int i = 0; i < rc->ndeployments; i++) {
        int d = rc->deployments[i];
        if (!sl_route_can_take(s, j, d))
            continue;
        held_t h;
        sl_reservation_build(s, j, d, &h);
        double dep_rate = INFINITY, dep_room = INFINITY;
        for (int k = 0; k < h.n; k++) {
            int b = h.ch[k].bucket;
            double amount = h.ch[k].amount;
            if (b < 0 || !s->binfo[b].provider_side || amount <= 0)
                continue;
            const sl_bucket_spec_t *spec = sl_ledger_spec(s->ledger, b);
            double per_ms = INFINITY;
            if (spec->alg == SL_ALG_TOKEN_BUCKET)
                per_ms = spec->rate_per_ms;
            else if ((spec->alg == SL_ALG_SLIDING_WINDOW || spec->alg == SL_ALG_ROLLING) &&
                     spec->window_ms > 0)
                per_ms = spec->capacity / (double)spec->window_ms;
            if (isinf(per_ms))
                continue;
            dep_rate = fmin(dep_rate, per_ms / amount);
            dep_room =
                fmin(dep_room, floor(fmax(0, sl_ledger_level(s->ledger, b, now_ms)) / amount));
        }
        *rate += dep_rate;
        *room += isinf(dep_room) ? 0 : dep_room;
    }
}

int sl_route_would_miss_deadline(sl_sched_t *s, job_t *j, int64_t now_ms)
{
    size_t ahead = sl_drr_group_len(s->routes[j->route].drr, j->cls);
    if (ahead == 0)
        return 0;
    double rate, room;
    route_pace(s, j, j->route, now_ms, &rate, &room);
    if (!(rate > 0) || isinf(rate))
        return 0;
    double after_room = (double)ahead + 1 - room;
    return after_room > 0 && (double)now_ms + after_room / rate >
                                 (double)(j->deadline_ms - sl_route_deadline_margin_ms(j));
}

int64_t sl_route_deadline_margin_ms(const job_t *j)
{
    /* The pace is an average, the leases of one slice go out together, and other classes may
     * take their share. */
    return (j->deadline_ms - j->submitted_ms) / 10;
}

sl_err_t sl_route_degrade(sl_sched_t *s, job_t *j, const char *why, int *moved)
{
    *moved = 0;
    const sl_config_t *cfg = s->cfg;
    int to = cfg->routes[j->route].degrade_to;
    if (!sl_route_can_degrade(s, j))
        return SL_OK;
    int from = j->route;
    int queued = sl_drr_queued(&j->node); /* in its route's line (else new, in no place yet) */
    sl_job_unplace(s, j);
    j->route = to;
    j->flags |= JF_DEGRADED;
    sl_err_t rc = sl_flow_enqueue(s, j, 0);
    if (rc != SL_OK) {
        j->route = from;
        j->flags &= ~(unsigned)JF_DEGRADED;
        if (queued)
            sl_flow_enqueue(s, j, 1); /* back at the head of its own line, memory allowing */
        return rc;
    }
    *moved = 1;
    s->st.degraded++;
    sl_logf(SL_LOG_DEBUG, "job", j->id, "job %s degraded from route %s to %s (%s)", j->id,
            cfg->routes[from].name, cfg->routes[to].name, why);
    if (s->obs.fallback != NULL) {
        char reason[64];
        snprintf(reason, sizeof reason, "degrade_%s", why);
        s->obs.fallback(s->obs_arg, from, to, reason);
    }
    return SL_OK;
}
