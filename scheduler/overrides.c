/* overrides.c - run-time changes over the config (see overrides.h); sched.h's callers reach
 * them through sl_sched_set_limit, sl_sched_set_share and sl_sched_set_paused.
 */
#include "overrides.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buckets.h"
#include "core.h"
#include "flow.h"
#include "hmap.h"
#include "job.h"
#include "ledger.h"
#include "log.h"
#include "shard.h"
#include "store.h"

/* Sets bucket b's limit (per period, in the config's terms) to limit, or back to the config's
 * when limit is NAN, keeping what the bucket has admitted. */
static sl_err_t set_limit(sl_sched_t *s, int b, double limit, int64_t now_ms)
{
    binfo_t *bi = &s->binfo[b];
    const sl_limit_cfg_t *lc = bi->configured;
    sl_limit_cfg_t *own = NULL;
    if (!isnan(limit)) {
        if (!(limit > 0) || isinf(limit))
            return SL_EINVAL;
        own = malloc(sizeof *own);
        if (own == NULL)
            return SL_ENOMEM;
        *own = *bi->configured;
        own->capacity = limit;
        lc = own;
    }
    sl_bucket_spec_t whole = sl_buckets_spec(lc, s->binfo[b].provider_side);
    sl_bucket_spec_t spec = sl_shard_spec(s, b, &whole);
    sl_err_t rc = sl_ledger_set_spec(s->ledger, b, &spec, now_ms);
    if (rc != SL_OK) {
        free(own);
        return rc;
    }
    free(bi->own);
    bi->own = own;
    bi->limit = lc;
    return SL_OK;
}

typedef struct {
    sl_sched_t *s;
    int64_t now_ms;
    sl_err_t rc;
} override_t;

static void apply_override(const char *target, const char *field, double value, void *arg)
{
    override_t *o = arg;
    sl_sched_t *s = o->s;
    if (o->rc != SL_OK)
        return;
    if (strncmp(target, "bucket:", 7) == 0 && strcmp(field, "limit") == 0) {
        int b = sl_ledger_find(s->ledger, target + 7);
        if (b < 0)
            sl_warn("run-time limit of %s not applied: the config has no such bucket", target + 7);
        else if (set_limit(s, b, value, o->now_ms) != SL_OK)
            sl_warn("run-time limit %g of %s not applied: invalid", value, target + 7);
        return;
    }
    if (strncmp(target, "tenant:", 7) == 0) {
        int t = sl_job_tenant_index(s, target + 7);
        if (t < 0) {
            sl_warn("run-time %s of %s not applied: the config has no such tenant", field, target);
        } else if (strcmp(field, "weight") == 0 && value >= 1) {
            s->trt[t].weight = (int64_t)value;
        } else if (strcmp(field, "guarantee") == 0 && value >= 0 && value <= 0.95) {
            s->trt[t].guarantee = value;
        } else if (strcmp(field, "paused") == 0) {
            s->trt[t].paused = value != 0;
        }
        return;
    }
    if (strncmp(target, "key:", 4) == 0 && strcmp(field, "paused") == 0) {
        intptr_t k = (intptr_t)sl_hmap_get(s->key_index, target + 4) - 1;
        if (k < 0)
            sl_warn("run-time pause of %s not applied: the config has no such key", target);
        else
            s->key_paused[k] = value != 0;
    }
}

sl_err_t sl_overrides_apply(sl_sched_t *s, int64_t now_ms)
{
    override_t o = {s, now_ms, SL_OK};
    sl_err_t rc = sl_store_override_each(s->store, apply_override, &o);
    return rc != SL_OK ? rc : o.rc;
}

sl_err_t sl_sched_set_limit(sl_sched_t *s, int bucket, double limit, int64_t now_ms)
{
    if (bucket < 0 || bucket >= sl_ledger_count(s->ledger))
        return SL_EINVAL;
    return set_limit(s, bucket, limit, now_ms);
}

sl_err_t sl_sched_set_share(sl_sched_t *s, int tenant, int64_t weight, double guarantee)
{
    if (tenant < 0 || tenant >= s->cfg->ntenants || weight < 1 || !(guarantee >= 0) ||
        guarantee > 0.95)
        return SL_EINVAL;
    s->trt[tenant].weight = weight;
    s->trt[tenant].guarantee = guarantee;
    return sl_flow_requeue(s, tenant, -1);
}

sl_err_t sl_sched_set_paused(sl_sched_t *s, int tenant, int key, int paused)
{
    if (tenant >= s->cfg->ntenants || (tenant < 0 && (key < 0 || key >= s->cfg->nkeys)))
        return SL_EINVAL;
    if (tenant >= 0)
        s->trt[tenant].paused = paused != 0;
    else
        s->key_paused[key] = (uint8_t)(paused != 0);
    if (paused)
        return sl_flow_requeue(s, tenant, key);
    return sl_flow_release_held(s);
}
