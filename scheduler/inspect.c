/* inspect.c - read-only views of the scheduler core (see inspect.h).
 */
#include "inspect.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "drr.h"
#include "hmap.h"
#include "holders.h"
#include "job.h"
#include "ledger.h"
#include "route.h"
#include "shard.h"

void sl_sched_stats(const sl_sched_t *s, sl_sched_stats_t *out)
{
    *out = s->st;
    out->leased = s->leased.n;
    out->delayed = s->delayed.n;
    out->held = s->held.n;
    out->unfinished = (int64_t)sl_hmap_len(s->jobs);
    out->unfinished_bytes = s->jobs_bytes;
    out->dispatchers_live = sl_holders_count(s);
    out->dispatch_window = sl_holders_window(s);
    out->partitions = s->nparts > 0 ? s->nparts : 1;
    out->partitions_owned = sl_shard_owned_count(s);
    size_t queued = 0;
    for (int r = 0; r < s->cfg->nroutes; r++)
        queued += sl_drr_len(s->routes[r].drr);
    out->queued = (int64_t)queued;
}

size_t sl_sched_queue_depth(const sl_sched_t *s, int route, int cls)
{
    if (route < 0 || route >= s->cfg->nroutes)
        return 0;
    return sl_drr_group_len(s->routes[route].drr, cls);
}

int sl_sched_bucket_count(const sl_sched_t *s)
{
    return sl_ledger_count(s->ledger);
}

void sl_sched_bucket(sl_sched_t *s, int i, int64_t now_ms, const char **id, double *level,
                     double *capacity)
{
    *id = sl_ledger_id(s->ledger, i);
    *level = sl_ledger_level(s->ledger, i, now_ms);
    *capacity = sl_ledger_capacity(s->ledger, i);
}

int sl_sched_bucket_find(const sl_sched_t *s, const char *id)
{
    return sl_ledger_find(s->ledger, id);
}

void sl_sched_bucket_info(sl_sched_t *s, int b, int64_t now_ms, sl_sched_bucket_info_t *out)
{
    memset(out, 0, sizeof *out);
    out->id = sl_ledger_id(s->ledger, b);
    out->limit = s->binfo[b].limit;
    out->configured = s->binfo[b].configured;
    out->overridden = s->binfo[b].own != NULL;
    out->provider_side = s->binfo[b].provider_side;
    out->level = sl_ledger_level(s->ledger, b, now_ms);
    out->capacity = sl_ledger_capacity(s->ledger, b);
    out->reset_ms = sl_ledger_reset_ms(s->ledger, b, now_ms);
    out->reserved_total = sl_ledger_reserved_total(s->ledger, b);
    out->charged_total = sl_ledger_charged_total(s->ledger, b);
    out->clamped = isfinite(sl_ledger_clamp_allowance(s->ledger, b, now_ms));
}

const int *sl_sched_tenant_path(const sl_sched_t *s, int tenant, int *n)
{
    *n = s->tenant_paths[tenant].n;
    return s->tenant_paths[tenant].b;
}

const int *sl_sched_key_path(const sl_sched_t *s, int key, int *n)
{
    *n = s->key_paths[key].n;
    return s->key_paths[key].b;
}

const int *sl_sched_deployment_path(const sl_sched_t *s, int d, int *n)
{
    *n = s->deps[d].path.n;
    return s->deps[d].path.b;
}

void sl_sched_tenants_info(const sl_sched_t *s, sl_sched_tenant_info_t *out)
{
    const sl_config_t *cfg = s->cfg;
    for (int t = 0; t < cfg->ntenants; t++) {
        sl_sched_tenant_info_t *ti = &out[t];
        memset(ti, 0, sizeof *ti);
        ti->weight = s->trt[t].weight;
        ti->guarantee = s->trt[t].guarantee;
        ti->paused = s->trt[t].paused;
        for (int c = 0; c < SL_CLASS_COUNT; c++) {
            for (int r = 0; r < cfg->nroutes; r++)
                ti->queued[c] += (int64_t)sl_drr_flow_len(s->routes[r].drr, t * SL_CLASS_COUNT + c);
        }
    }
    const joblist_t *lists[] = {&s->held, &s->delayed, &s->leased};
    for (int l = 0; l < 3; l++) {
        for (int i = 0; i < lists[l]->n; i++) {
            const job_t *j = lists[l]->items[i];
            if (sl_job_orphan_tenant(j) != NULL)
                continue;
            if (l == 0)
                out[j->tenant].held++;
            else if (l == 1)
                out[j->tenant].delayed++;
            else
                out[j->tenant].in_flight++;
        }
    }
}

typedef struct {
    const sl_config_t *cfg;
    int64_t *oldest;
} oldest_t;

static void note_oldest(const char *key, void *value, void *arg)
{
    (void)key;
    const job_t *j = value;
    oldest_t *o = arg;
    if (j->state != J_QUEUED || sl_job_orphan_tenant(j) != NULL || j->route < 0 ||
        j->route >= o->cfg->nroutes)
        return;
    int64_t *slot = &o->oldest[j->route * SL_CLASS_COUNT + j->cls];
    if (*slot == 0 || j->submitted_ms < *slot)
        *slot = j->submitted_ms;
}

void sl_sched_oldest_queued(const sl_sched_t *s, int64_t *oldest)
{
    memset(oldest, 0, (size_t)s->cfg->nroutes * SL_CLASS_COUNT * sizeof *oldest);
    oldest_t o = {s->cfg, oldest};
    sl_hmap_each(s->jobs, note_oldest, &o);
}

int sl_sched_key_paused(const sl_sched_t *s, int key)
{
    return key >= 0 && key < s->cfg->nkeys && s->key_paused[key];
}

void sl_sched_deployments_info(const sl_sched_t *s, int64_t now_ms, int *in_flight,
                               int64_t *paused_ms)
{
    for (int d = 0; d < s->cfg->ndeployments; d++) {
        in_flight[d] = 0;
        int64_t p = s->deps[d].paused_until_ms - now_ms;
        paused_ms[d] = p > 0 ? p : 0;
    }
    for (int i = 0; i < s->leased.n; i++) {
        int d = s->leased.items[i]->deployment;
        if (d >= 0 && d < s->cfg->ndeployments)
            in_flight[d]++;
    }
}

void sl_sched_deployment_answers(const sl_sched_t *s, int d, int64_t *answered,
                                 int64_t *rate_limited, int64_t *unavailable)
{
    *answered = s->deps[d].answered;
    *rate_limited = s->deps[d].rate_limited;
    *unavailable = s->deps[d].unavailable;
}

int64_t sl_sched_route_blocked_ms(const sl_sched_t *s, int route, int64_t now_ms)
{
    int64_t b = s->routes[route].blocked_until_ms - now_ms;
    return b > 0 && sl_drr_len(s->routes[route].drr) > 0 ? b : 0;
}

int sl_sched_job_info(sl_sched_t *s, const char *job_id, int64_t now_ms, sl_sched_job_info_t *out)
{
    memset(out, 0, sizeof *out);
    out->wait_ms = -1;
    out->deployment = -1;
    job_t *j = sl_hmap_get(s->jobs, job_id);
    if (j == NULL)
        return 0;
    out->state = sl_job_state_name(j->state);
    out->tenant = sl_job_orphan_tenant(j) != NULL ? -1 : j->tenant;
    out->route = sl_job_orphan_route(j) != NULL ? -1 : j->route;
    out->cls = j->cls;
    out->attempts = j->attempts;
    out->submitted_ms = j->submitted_ms;
    out->deadline_ms = j->deadline_ms;
    if (j->state == J_DELAYED)
        out->not_before_ms = j->not_before_ms;
    if (j->state == J_LEASED) {
        out->deployment = j->deployment;
        out->lease_expires_ms = j->lease->lease_expires_ms;
    }
    if (j->state == J_QUEUED)
        out->wait_ms = sl_route_why_waiting(s, j, now_ms, out->limiter, sizeof out->limiter);
    if (j->state == J_HELD) {
        if (s->trt[j->tenant].paused)
            snprintf(out->limiter, sizeof out->limiter, "tenant:%s:paused",
                     s->cfg->tenants[j->tenant].name);
        else if (j->key >= 0)
            snprintf(out->limiter, sizeof out->limiter, "key:%s:paused", s->cfg->keys[j->key].id);
    }
    return 1;
}
