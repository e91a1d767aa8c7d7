/* buckets.c - the config's limits as ledger buckets and the paths a job crosses (see buckets.h),
 * and saving the buckets' levels and counters to the store.
 */
#include "buckets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capacity.h"
#include "ledger.h"
#include "store.h"

enum { STATE_TEXT_MAX = 8192 };

sl_bucket_spec_t sl_buckets_spec(const sl_limit_cfg_t *lc, int provider_side)
{
    sl_bucket_spec_t spec = {.alg = (sl_alg_t)lc->algorithm, .strict = lc->strict};
    double slices = (double)lc->slices;
    switch (lc->algorithm) {
    case SL_LIMIT_TOKEN_BUCKET:
        spec.capacity = lc->capacity / slices;
        if (spec.capacity < 1 && !sl_dimension_is_tokens(lc->dimension) &&
            lc->dimension != SL_DIM_SPEND)
            spec.capacity = 1;
        spec.rate_per_ms = lc->capacity * lc->headroom / (double)lc->period_ms;
        spec.margin = spec.capacity * (1.0 - lc->burst_fraction);
        if (provider_side) {
            /* What the provider counts in any trailing period may not pass its limit. A
             * dispatch reaches it up to the stale cutoff after its admission, so every
             * provider window of period_ms is covered by a guard window that long more. */
            spec.guard_window_ms = lc->period_ms + sl_capacity_dispatch_delay_ms(lc);
            spec.guard_capacity = lc->capacity;
            spec.full_hold_ms = lc->full_hold_ms;
        }
        break;
    case SL_LIMIT_SLIDING_WINDOW:
        spec.capacity = lc->capacity * lc->headroom;
        spec.window_ms = lc->period_ms;
        spec.sub_windows = (int)lc->slices;
        spec.sub_capacity = lc->burst * spec.capacity / slices;
        break;
    case SL_LIMIT_ROLLING:
        spec.capacity = lc->capacity;
        spec.window_ms = lc->period_ms;
        spec.sub_windows = (int)lc->slices;
        break;
    case SL_LIMIT_CALENDAR:
        spec.capacity = lc->capacity;
        spec.window_ms = lc->period_ms;
        spec.tz = lc->reset_tz[0] != '\0' ? lc->reset_tz : NULL;
        break;
    case SL_LIMIT_RAMP:
        spec.capacity = lc->capacity;
        spec.window_ms = lc->period_ms;
        spec.growth = lc->growth;
        break;
    default: /* gauge */
        spec.capacity = lc->capacity;
        break;
    }
    return spec;
}

sl_bucket_spec_t sl_buckets_spec_whole(const sl_sched_t *s, int b)
{
    return sl_buckets_spec(s->binfo[b].limit, s->binfo[b].provider_side);
}

/* Adds the buckets of one scope's limits and appends them to path. */
static sl_err_t add_scope(sl_sched_t *s, const char *scope, const sl_limit_cfg_t *limits, int n,
                          int provider_side, path_t *path, int64_t now_ms, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        char id[512];
        snprintf(id, sizeof id, "%s:%s", scope, limits[i].name);
        int b = sl_ledger_find(s->ledger, id);
        if (b < 0) {
            sl_bucket_spec_t spec = sl_buckets_spec(&limits[i], provider_side);
            b = sl_ledger_add_spec(s->ledger, id, &spec, now_ms);
            if (b < 0) {
                snprintf(err, errlen, "bucket %s: invalid limit or out of memory", id);
                return SL_ECONFIG;
            }
            if (b >= s->nbinfo) {
                int ncap = s->nbinfo ? s->nbinfo * 2 : 64;
                while (ncap <= b)
                    ncap *= 2;
                binfo_t *nb = realloc(s->binfo, (size_t)ncap * sizeof *nb);
                if (nb == NULL)
                    return SL_ENOMEM;
                s->binfo = nb;
                s->nbinfo = ncap;
            }
            s->binfo[b].limit = &limits[i];
            s->binfo[b].configured = &limits[i];
            s->binfo[b].own = NULL;
            s->binfo[b].provider_side = provider_side;
            s->binfo[b].claim_route = -1;
            s->binfo[b].claim_amount = 0;
            s->binfo[b].claim_until_ms = 0;
            s->binfo[b].claim_since_ms = 0;
            /* A tenant's own buckets move with its partition; all others are shared. */
            s->binfo[b].shared = strncmp(scope, "tenant:", 7) != 0 &&
                                 strncmp(scope, "key:", 4) != 0 && strncmp(scope, "app:", 4) != 0;
            s->binfo[b].share = s->binfo[b].share_next = 1.0;
            s->binfo[b].share_at_ms = 0;
        }
        if (path->n >= MAX_CHARGES) {
            snprintf(err, errlen, "scope %s: more than %d limits on one path", scope, MAX_CHARGES);
            return SL_ECONFIG;
        }
        path->b[path->n++] = b;
    }
    return SL_OK;
}

static sl_err_t add_parents(sl_sched_t *s, int parent, int provider_side, path_t *path,
                            int64_t now_ms, char *err, size_t errlen)
{
    sl_err_t rc = SL_OK;
    for (int p = parent, steps = 0; rc == SL_OK && p >= 0 && steps < s->cfg->nscopes;
         p = s->cfg->scopes[p].parent, steps++) {
        const sl_scope_cfg_t *sc = &s->cfg->scopes[p];
        rc = add_scope(s, sc->name, sc->limits, sc->nlimits, provider_side, path, now_ms, err,
                       errlen);
    }
    return rc;
}

static sl_err_t path_alloc(path_t *p)
{
    p->b = calloc(MAX_CHARGES, sizeof *p->b);
    p->n = 0;
    return p->b != NULL ? SL_OK : SL_ENOMEM;
}

sl_err_t sl_buckets_build(sl_sched_t *s, int64_t now_ms, char *err, size_t errlen)
{
    const sl_config_t *cfg = s->cfg;
    char scope[512];
    sl_err_t rc = SL_OK;
    int longest_dep = 0, longest_key = 0;
    for (int i = 0; rc == SL_OK && i < cfg->ndeployments; i++) {
        const sl_deployment_cfg_t *d = &cfg->deployments[i];
        dep_t *dep = &s->deps[i];
        for (int h = 0; h < HDR_COUNT; h++)
            dep->header_bucket[h] = -1;
        snprintf(scope, sizeof scope, "deployment:%s", d->name);
        rc = path_alloc(&dep->path);
        if (rc == SL_OK)
            rc = add_scope(s, scope, d->limits, d->nlimits, 1, &dep->path, now_ms, err, errlen);
        /* Headers describe the deployment's per-minute limits (its own buckets). */
        for (int k = 0; rc == SL_OK && k < d->nlimits; k++) {
            const sl_limit_cfg_t *lc = &d->limits[k];
            int h = lc->dimension == SL_DIM_REQUESTS        ? HDR_REQUESTS
                    : lc->dimension == SL_DIM_TOTAL_TOKENS  ? HDR_TOKENS
                    : lc->dimension == SL_DIM_INPUT_TOKENS  ? HDR_INPUT
                    : lc->dimension == SL_DIM_OUTPUT_TOKENS ? HDR_OUTPUT
                                                            : -1;
            if (h >= 0 && dep->header_bucket[h] < 0 &&
                (lc->algorithm == SL_LIMIT_TOKEN_BUCKET ||
                 lc->algorithm == SL_LIMIT_SLIDING_WINDOW))
                dep->header_bucket[h] = dep->path.b[k];
            /* What its headers say is read for the arrival of a paced request. */
            if (rc == SL_OK && lc->algorithm == SL_LIMIT_TOKEN_BUCKET)
                sl_ledger_set_lead(s->ledger, dep->path.b[k], sl_capacity_pace_ms(cfg, i));
        }
        if (rc == SL_OK)
            rc = add_parents(s, d->parent, 1, &dep->path, now_ms, err, errlen);
        if (dep->path.n > longest_dep)
            longest_dep = dep->path.n;
    }
    for (int i = 0; rc == SL_OK && i < cfg->ntenants; i++) {
        const sl_tenant_cfg_t *t = &cfg->tenants[i];
        snprintf(scope, sizeof scope, "tenant:%s", t->name);
        rc = path_alloc(&s->tenant_paths[i]);
        if (rc == SL_OK)
            rc = add_scope(s, scope, t->limits, t->nlimits, 0, &s->tenant_paths[i], now_ms, err,
                           errlen);
        if (rc == SL_OK)
            rc = add_parents(s, t->parent, 0, &s->tenant_paths[i], now_ms, err, errlen);
    }
    for (int i = 0; rc == SL_OK && i < cfg->nkeys; i++) {
        const sl_key_cfg_t *k = &cfg->keys[i];
        path_t *path = &s->key_paths[i];
        snprintf(scope, sizeof scope, "key:%s", k->id);
        rc = path_alloc(path);
        if (rc == SL_OK)
            rc = add_scope(s, scope, k->limits, k->nlimits, 0, path, now_ms, err, errlen);
        snprintf(scope, sizeof scope, "app:%s/%s/%s", cfg->tenants[k->tenant].name, k->app, k->env);
        int app = sl_config_scope(cfg, scope);
        if (rc == SL_OK && app >= 0)
            rc = add_scope(s, scope, cfg->scopes[app].limits, cfg->scopes[app].nlimits, 0, path,
                           now_ms, err, errlen);
        const path_t *tp = &s->tenant_paths[k->tenant];
        for (int j = 0; rc == SL_OK && j < tp->n; j++) {
            if (path->n >= MAX_CHARGES) {
                snprintf(err, errlen, "key %s: more than %d limits on its path", k->id,
                         MAX_CHARGES);
                rc = SL_ECONFIG;
            } else {
                path->b[path->n++] = tp->b[j];
            }
        }
        if (path->n > longest_key)
            longest_key = path->n;
    }
    for (int i = 0; i < cfg->ntenants; i++) {
        if (s->tenant_paths[i].n > longest_key)
            longest_key = s->tenant_paths[i].n;
    }
    if (rc == SL_OK && longest_dep + longest_key > MAX_CHARGES) {
        snprintf(err, errlen,
                 "a job's path could cross %d limits (%d on the callers' side, %d on the "
                 "provider side); at most %d are supported",
                 longest_dep + longest_key, longest_key, longest_dep, MAX_CHARGES);
        rc = SL_ECONFIG;
    }
    return rc;
}

int sl_buckets_is_quota(const sl_sched_t *s, int b)
{
    sl_alg_t alg = sl_ledger_alg(s->ledger, b);
    return alg == SL_ALG_CALENDAR || alg == SL_ALG_ROLLING;
}

void sl_buckets_split_id(const char *id, char *scope, size_t cap, const char **name)
{
    snprintf(scope, cap, "%s", id);
    char *last = strrchr(scope, ':');
    *name = "";
    if (last != NULL) {
        *last = '\0';
        *name = id + (last - scope) + 1;
    }
}

sl_err_t sl_buckets_save(sl_sched_t *s, int64_t now_ms, int all)
{
    char state[STATE_TEXT_MAX];
    for (int b = 0; b < sl_ledger_count(s->ledger); b++) {
        if (!all && !sl_ledger_dirty(s->ledger, b))
            continue;
        const char *id = sl_ledger_id(s->ledger, b);
        const sl_limit_cfg_t *lc = s->binfo[b].limit;
        char scope[512];
        const char *name;
        sl_buckets_split_id(id, scope, sizeof scope, &name);
        if (sl_ledger_state_save(s->ledger, b, now_ms, state, sizeof state) != SL_OK)
            state[0] = '\0';
        sl_store_bucket_t row = {
            .bucket_id = id,
            .scope = scope,
            .dimension = sl_dimension_name(lc->dimension),
            .algorithm = sl_limit_alg_name(lc->algorithm),
            .unit = lc->dimension == SL_DIM_SPEND           ? "usd"
                    : lc->dimension == SL_DIM_CONCURRENCY   ? "calls"
                    : sl_dimension_is_tokens(lc->dimension) ? "tokens"
                                                            : "requests",
            .source = "config",
            .capacity = sl_ledger_capacity(s->ledger, b),
            .rate_per_min =
                lc->capacity * lc->headroom * (double)s->cfg->minute_ms / (double)lc->period_ms,
            .level = sl_ledger_level(s->ledger, b, now_ms),
            .updated_ms = now_ms,
            .state = state[0] != '\0' ? state : NULL,
        };
        sl_err_t rc = sl_store_bucket_put(s->store, &row);
        if (rc != SL_OK)
            return rc;
        sl_ledger_clear_dirty(s->ledger, b);
    }
    return SL_OK;
}

const path_t *sl_buckets_caller_path(const sl_sched_t *s, const job_t *j)
{
    return j->key >= 0 ? &s->key_paths[j->key] : &s->tenant_paths[j->tenant];
}
