/* flow.c - how jobs wait in line (see flow.h): the DRR placement, queue limits and shedding,
 * pauses, and classes that yield to busier ones.
 */
#include "flow.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drr.h"
#include "hmap.h"
#include "job.h"
#include "ledger.h"
#include "outcome.h"
#include "reservation.h"
#include "store.h"

static int flow_of(const job_t *j)
{
    return j->tenant * SL_CLASS_COUNT + j->cls;
}

int sl_flow_is_paused(const sl_sched_t *s, const job_t *j)
{
    return s->trt[j->tenant].paused || (j->key >= 0 && s->key_paused[j->key]);
}

sl_err_t sl_flow_enqueue(sl_sched_t *s, job_t *j, int front)
{
    const sl_config_t *cfg = s->cfg;
    if (sl_flow_is_paused(s, j)) {
        j->state = J_HELD;
        return sl_job_list_add(&s->held, j);
    }
    sl_drr_place_t p = {
        .group = j->cls,
        .group_quantum = cfg->drr_quantum_tokens * cfg->classes[j->cls].weight,
        .flow = flow_of(j),
        .quantum = cfg->drr_quantum_tokens * s->trt[j->tenant].weight,
        .share = s->trt[j->tenant].guarantee,
        .cost = sl_reservation_cost(s, j),
        .key = j->deadline_ms,
    };
    /* A job is in exactly one place: not in a list, not queued already. */
    assert(j->list_idx < 0 && !sl_drr_queued(&j->node));
    j->state = J_QUEUED;
    return sl_drr_push_node(s->routes[j->route].drr, &p, &j->node, j, front) == 0 ? SL_OK
                                                                                  : SL_ENOMEM;
}

void sl_flow_charge(sl_sched_t *s, const job_t *j, int64_t cost_delta)
{
    if (j->route >= 0 && j->route < s->cfg->nroutes)
        sl_drr_charge(s->routes[j->route].drr, flow_of(j), cost_delta);
}

size_t sl_flow_len_on(const sl_sched_t *s, const job_t *j, int r)
{
    return sl_drr_flow_len(s->routes[r].drr, flow_of(j));
}

/* Whether j's tenant already has its class's maximum of jobs queued: on every route, or, for a
 * class that degrades, on j's route (its overflow goes to another route, which has a queue of
 * its own). */
static int queue_full(const sl_sched_t *s, const job_t *j)
{
    const sl_class_cfg_t *cc = &s->cfg->classes[j->cls];
    if (cc->overload == SL_OVERLOAD_DEGRADE)
        return (int64_t)sl_flow_len_on(s, j, j->route) >= cc->max_queue;
    size_t queued = 0;
    for (int r = 0; r < s->cfg->nroutes; r++)
        queued += sl_flow_len_on(s, j, r);
    return (int64_t)queued >= cc->max_queue;
}

/* Which of the scheduler's own bounds its unfinished jobs (j among them) are past: more than
 * scheduler.max_queued jobs (its memory) or more than scheduler.max_queued_bytes of job
 * messages (its store's disk), whatever the tenants' own limits add up to. */
typedef enum { NOT_FULL, FULL_JOBS, FULL_BYTES } full_t;

static full_t scheduler_full(const sl_sched_t *s)
{
    if ((int64_t)sl_hmap_len(s->jobs) > s->cfg->max_queued)
        return FULL_JOBS;
    return s->jobs_bytes > s->cfg->max_queued_bytes ? FULL_BYTES : NOT_FULL;
}

/* Refuses j because its tenant's queue of its class is full, or (global, a full_t) the
 * scheduler's (reason queue_full, or shed for a queued job that made room): retryable, about
 * one window later (a hint, not a promise). The limiter names the bound: queue:TENANT:CLASS,
 * queue:scheduler (jobs) or queue:scheduler:bytes. */
static sl_err_t refuse_for_queue(sl_sched_t *s, job_t *j, sl_reason_t reason, full_t global,
                                 int64_t now_ms)
{
    char limiter[256], scope[200];
    const char *tenant = s->cfg->tenants[j->tenant].name;
    const char *cls = sl_class_name((sl_class_t)j->cls);
    if (global == FULL_BYTES)
        snprintf(limiter, sizeof limiter, "queue:scheduler:bytes");
    else if (global == FULL_JOBS)
        snprintf(limiter, sizeof limiter, "queue:scheduler");
    else
        snprintf(limiter, sizeof limiter, "queue:%s:%s", tenant, cls);
    snprintf(scope, sizeof scope, global ? "scheduler" : "tenant:%s", tenant);
    outcome_t o;
    sl_outcome_init(&o, SL_STATUS_REJECTED);
    sl_outcome_error(&o, SL_ERRTYPE_CAPACITY, reason, SL_DECISION_REJECTED_LOCALLY);
    o.limiter = limiter;
    o.scope = scope;
    o.retryable = 1;
    o.retry_after_ms = s->cfg->minute_ms;
    if (reason == SL_REASON_SHED) {
        snprintf(o.err_message, sizeof o.err_message,
                 "the %s queue was full (classes.%s.overload = shed): this job, due last, made "
                 "room for one due sooner",
                 cls, cls);
        s->st.shed++;
    } else if (global == FULL_JOBS) {
        snprintf(o.err_message, sizeof o.err_message,
                 "the scheduler already holds %lld unfinished jobs (scheduler.max_queued); retry "
                 "later",
                 (long long)s->cfg->max_queued);
        s->st.queue_full++;
    } else if (global == FULL_BYTES) {
        snprintf(o.err_message, sizeof o.err_message,
                 "the scheduler already holds %lld bytes of unfinished jobs "
                 "(scheduler.max_queued_bytes); retry later",
                 (long long)s->cfg->max_queued_bytes);
        s->st.queue_full++;
    } else {
        snprintf(o.err_message, sizeof o.err_message,
                 "tenant %s already has %lld %s jobs queued (classes.%s.max_queue); retry later",
                 tenant, (long long)s->cfg->classes[j->cls].max_queue, cls, cls);
        s->st.queue_full++;
    }
    return sl_outcome_finish(s, j, &o, now_ms);
}

/* Refuses a new job of a paused tenant or key (admin API): retryable once resumed. */
static sl_err_t refuse_paused(sl_sched_t *s, job_t *j, int64_t now_ms)
{
    int tenant_paused = s->trt[j->tenant].paused;
    const char *tenant = s->cfg->tenants[j->tenant].name;
    char limiter[320], scope[256];
    if (tenant_paused) {
        snprintf(scope, sizeof scope, "tenant:%s", tenant);
    } else {
        snprintf(scope, sizeof scope, "key:%s", s->cfg->keys[j->key].id);
    }
    snprintf(limiter, sizeof limiter, "%s:paused", scope);
    outcome_t o;
    sl_outcome_init(&o, SL_STATUS_REJECTED);
    sl_outcome_error(&o, SL_ERRTYPE_POLICY,
                     tenant_paused ? SL_REASON_TENANT_PAUSED : SL_REASON_KEY_PAUSED,
                     SL_DECISION_REJECTED_LOCALLY);
    o.limiter = limiter;
    o.scope = scope;
    o.retryable = 1;
    snprintf(o.err_message, sizeof o.err_message,
             "%s is paused by an operator: no new jobs are taken until it is resumed", scope);
    return sl_outcome_finish(s, j, &o, now_ms);
}

/* Finishes a new job refused at the door (by refuse_for_queue when the queue is full, or
 * refuse_paused) and forgets it, the store's row too: the client is told to retry, and the same
 * job may come again. */
static sl_err_t refuse_new(sl_sched_t *s, job_t *j, int queue_full, int64_t now_ms)
{
    char job_id[SL_JOB_ID_MAX + 1];
    snprintf(job_id, sizeof job_id, "%s", j->id);
    full_t global = scheduler_full(s);
    sl_job_untrack(s, j);
    sl_err_t rc = queue_full ? refuse_for_queue(s, j, SL_REASON_QUEUE_FULL, global, now_ms)
                             : refuse_paused(s, j, now_ms); /* frees j */
    return rc == SL_OK ? sl_store_job_forget(s->store, job_id) : rc;
}

int sl_flow_queue_full(const sl_sched_t *s, const job_t *j)
{
    return queue_full(s, j);
}

int sl_flow_scheduler_full(const sl_sched_t *s)
{
    return scheduler_full(s) != NOT_FULL;
}

sl_err_t sl_flow_admit(sl_sched_t *s, job_t *j, int64_t now_ms)
{
    sl_err_t rc = SL_OK;
    if (sl_flow_is_paused(s, j)) {
        /* Forgotten like a full queue's refusal, so the same job may come again once resumed. */
        return refuse_new(s, j, 0 /*paused*/, now_ms);
    }
    if (queue_full(s, j) && s->cfg->classes[j->cls].overload == SL_OVERLOAD_SHED) {
        /* Shed: the queued job of this tenant and class with the latest deadline makes room,
         * when it is due later than the new one. */
        job_t *last = sl_drr_flow_last(s->routes[j->route].drr, flow_of(j));
        if (last != NULL && last->deadline_ms > j->deadline_ms) {
            rc = refuse_for_queue(s, last, SL_REASON_SHED, NOT_FULL, now_ms);
            if (rc != SL_OK)
                return rc;
        }
    }
    if (queue_full(s, j) || scheduler_full(s) != NOT_FULL) {
        /* Backpressure: answered at once instead of letting the queue grow without bound. The
         * job is not remembered, so the client may submit it again after retry_after_ms. */
        return refuse_new(s, j, 1 /*queue full*/, now_ms);
    }
    return sl_flow_enqueue(s, j, 0);
}

/* Decays a route's recent admissions per class to now (time constant: one minute). */
static void decay_recent(const sl_sched_t *s, route_t *route, int64_t now_ms)
{
    if (now_ms <= route->recent_ms)
        return;
    double keep = exp(-(double)(now_ms - route->recent_ms) / (double)s->cfg->minute_ms);
    for (int c = 0; c < SL_CLASS_COUNT; c++) {
        route->recent[c] *= keep;
        route->recent_jobs[c] *= keep;
    }
    route->recent_ms = now_ms;
}

int sl_flow_must_yield(const sl_sched_t *s, route_t *route, int cls, int64_t now_ms)
{
    double above = s->cfg->classes[cls].yield_above;
    if (above <= 0)
        return 0;
    size_t others_queued = sl_drr_len(route->drr) - sl_drr_group_len(route->drr, cls);
    if (others_queued == 0)
        return 0;
    decay_recent(s, route, now_ms);
    double total = 0, others = 0;
    for (int c = 0; c < SL_CLASS_COUNT; c++) {
        total += route->recent[c];
        if (c != cls)
            others += route->recent[c];
    }
    return total > 0 && others >= above * total;
}

void sl_flow_count_admitted(const sl_sched_t *s, route_t *route, int cls, double tokens,
                            int64_t now_ms)
{
    decay_recent(s, route, now_ms);
    route->recent[cls] += tokens;
    route->recent_jobs[cls] += 1;
}

void sl_flow_keep_reserve(const sl_sched_t *s, route_t *route, const job_t *j, held_t *h,
                          int64_t now_ms)
{
    if (j->cls == SL_CLASS_INTERACTIVE || s->cfg->classes[j->cls].yield_above <= 0)
        return;
    decay_recent(s, route, now_ms);
    double total = 0;
    for (int c = 0; c < SL_CLASS_COUNT; c++)
        total += route->recent[c];
    double inter = route->recent[SL_CLASS_INTERACTIVE];
    double jobs = route->recent_jobs[SL_CLASS_INTERACTIVE];
    /* Nothing interactive admitted here for a few minutes: nothing is kept (work-conserving). */
    if (!(inter > 1e-6 * total) || !(jobs > 0.01))
        return;
    double share = inter / total, job = inter / jobs;
    for (int k = 0; k < h->n; k++) {
        int b = h->ch[k].bucket;
        if (b < 0 || !s->binfo[b].provider_side)
            continue;
        const sl_limit_cfg_t *lc = s->binfo[b].limit;
        if (lc->algorithm != SL_LIMIT_TOKEN_BUCKET || !sl_dimension_is_tokens(lc->dimension))
            continue;
        const sl_bucket_spec_t *spec = sl_ledger_spec(s->ledger, b);
        double burst = spec->capacity; /* a token bucket holds one burst */
        double keep = 2.0 * share * burst + job;
        if (keep > RESERVE_MAX_SHARE * burst)
            keep = RESERVE_MAX_SHARE * burst;
        /* The job waits for its charge, the margin and the reserve; the level it waits for
         * stays RESERVE_TICK_SLACK_MS of refill short of the burst. */
        double room = burst - spec->margin - h->ch[k].amount -
                      spec->rate_per_ms * (double)RESERVE_TICK_SLACK_MS;
        if (keep > room)
            keep = room > 0 ? room : 0;
        h->ch[k].keep = keep;
    }
}

typedef struct {
    int tenant, key; /* the jobs to find: of this tenant, or (tenant < 0) of this key */
    jstate_t state;
    job_t **found;
    int n, cap;
    sl_err_t rc;
} find_t;

static void find_jobs(const char *id, void *value, void *arg)
{
    (void)id;
    find_t *f = arg;
    job_t *j = value;
    if (j->state != f->state || sl_job_orphan_tenant(j) != NULL ||
        (f->tenant >= 0 ? j->tenant != f->tenant : j->key != f->key))
        return;
    if (f->n == f->cap) {
        int ncap = f->cap ? f->cap * 2 : 64;
        job_t **nf = realloc(f->found, (size_t)ncap * sizeof *nf);
        if (nf == NULL) {
            f->rc = SL_ENOMEM;
            return;
        }
        f->found = nf;
        f->cap = ncap;
    }
    f->found[f->n++] = j;
}

sl_err_t sl_flow_requeue(sl_sched_t *s, int tenant, int key)
{
    find_t f = {tenant, key, J_QUEUED, NULL, 0, 0, SL_OK};
    sl_hmap_each(s->jobs, find_jobs, &f);
    sl_err_t rc = f.rc;
    for (int i = 0; rc == SL_OK && i < f.n; i++) {
        sl_job_unplace(s, f.found[i]);
        rc = sl_flow_enqueue(s, f.found[i], 0);
    }
    free(f.found);
    return rc;
}

sl_err_t sl_flow_release_held(sl_sched_t *s)
{
    /* Held jobs that nothing pauses any more go back in line (by deadline within their flow,
     * so the order they come back in does not matter). Walking down keeps the walk valid:
     * sl_job_list_del moves the last item, already seen, into the hole. */
    for (int i = s->held.n - 1; i >= 0; i--) {
        job_t *j = s->held.items[i];
        if (sl_flow_is_paused(s, j))
            continue;
        sl_job_list_del(&s->held, j);
        sl_err_t rc = sl_flow_enqueue(s, j, 0);
        if (rc != SL_OK)
            return rc;
    }
    return SL_OK;
}
