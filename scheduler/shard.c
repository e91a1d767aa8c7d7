/* shard.c - the partitions a scheduler owns and its share of the shared limits (see shard.h). */
#include "shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buckets.h"
#include "grants.h"
#include "hmap.h"
#include "job.h"
#include "kafka.h"
#include "ledger.h"
#include "log.h"
#include "reservation.h"
#include "store.h"

/* A bucket's capacity must stay above 0: a shard that owns nothing keeps this much of each
 * shared limit (it has no job to admit anyway). */
#define SHARE_FLOOR 1e-6
/* The store's note of a bucket's share: "share:<bucket id>". */
#define SHARE_NOTE "share:"

int sl_shard_owned_count(const sl_sched_t *s)
{
    if (s->nparts <= 0)
        return 1;
    int n = 0;
    for (int p = 0; p < s->nparts; p++)
        n += s->owned[p] != 0;
    return n;
}

double sl_shard_target(const sl_sched_t *s)
{
    if (s->nparts <= 0)
        return 1.0;
    if (s->lease_shares) {
        /* The largest share granted: the traffic this shard may send at most. */
        double most = -1;
        for (int b = 0; b < s->nbinfo; b++)
            if (s->binfo[b].shared && s->binfo[b].share > most)
                most = s->binfo[b].share;
        if (most >= 0)
            return most;
    }
    return (double)sl_shard_owned_count(s) / s->nparts;
}

int sl_sched_partition(const sl_sched_t *s, const char *tenant)
{
    return s->nparts > 0 ? sl_kafka_key_partition(tenant, s->nparts) : 0;
}

int sl_sched_owns(const sl_sched_t *s, int p)
{
    return s->nparts <= 0 || (p >= 0 && p < s->nparts && s->owned[p]);
}

sl_bucket_spec_t sl_shard_spec(const sl_sched_t *s, int b, const sl_bucket_spec_t *whole)
{
    sl_bucket_spec_t spec = *whole;
    if (b < 0 || b >= s->nbinfo || !s->binfo[b].shared || s->binfo[b].share >= 1.0)
        return spec;
    double f = s->binfo[b].share > SHARE_FLOOR ? s->binfo[b].share : SHARE_FLOOR;
    /* With no share, not even one request larger than the bucket may go (sl_ledger_reserve lets
     * one through an unused bucket that is not strict). With some, the provider side's guard
     * still caps what one shard admits in the trailing period at its share. */
    if (s->binfo[b].share <= 0)
        spec.strict = 1;
    spec.capacity *= f;
    spec.rate_per_ms *= f;
    spec.margin *= f;
    spec.sub_capacity *= f;
    spec.guard_capacity *= f;
    return spec;
}

/* Enforces bucket b's current share, and notes it in the store. */
static sl_err_t apply(sl_sched_t *s, int b, int64_t now_ms)
{
    binfo_t *bi = &s->binfo[b];
    sl_bucket_spec_t whole = sl_buckets_spec_whole(s, b);
    sl_bucket_spec_t spec = sl_shard_spec(s, b, &whole);
    sl_err_t rc = sl_ledger_set_spec(s->ledger, b, &spec, now_ms);
    if (rc != SL_OK)
        return rc;
    char key[600], value[32];
    snprintf(key, sizeof key, SHARE_NOTE "%s", sl_ledger_id(s->ledger, b));
    snprintf(value, sizeof value, "%.17g", bi->share);
    return sl_store_meta_put(s->store, key, value);
}

/* How long the old owner's use of a share may still count where bucket b counts it. */
static int64_t raise_delay(const sl_sched_t *s, int b, int64_t now_ms)
{
    const sl_bucket_spec_t *sp = sl_ledger_spec(s->ledger, b);
    int64_t d = 0;
    switch (sp->alg) {
    case SL_ALG_TOKEN_BUCKET:
        /* The trailing period the provider counts (the guard's), and a whole refill. */
        d = sp->guard_window_ms > 0 ? sp->guard_window_ms : 60000;
        if (sp->rate_per_ms > 0 && sp->capacity / sp->rate_per_ms > (double)d)
            d = (int64_t)(sp->capacity / sp->rate_per_ms) + 1;
        break;
    case SL_ALG_SLIDING_WINDOW:
    case SL_ALG_ROLLING:
    case SL_ALG_RAMP:
        d = sp->window_ms;
        break;
    case SL_ALG_CALENDAR:
        d = sl_ledger_reset_ms(s->ledger, b, now_ms) - now_ms;
        break;
    case SL_ALG_GAUGE:
    default:
        /* A call the old owner leased ends by its lease's end. */
        d = s->cfg->lease_ms;
        break;
    }
    return d > 0 ? d : 0;
}

sl_err_t sl_sched_shard(sl_sched_t *s, int nparts, int64_t now_ms)
{
    if (nparts <= 0)
        return SL_EINVAL;
    uint8_t *owned = calloc((size_t)nparts, 1);
    if (owned == NULL)
        return SL_ENOMEM;
    free(s->owned);
    s->owned = owned;
    s->nparts = nparts;
    /* A database that was never sharded counted everything: its share was the whole. */
    int fresh = sl_store_is_new(s->store);
    for (int b = 0; b < sl_ledger_count(s->ledger); b++) {
        binfo_t *bi = &s->binfo[b];
        if (!bi->shared)
            continue;
        char key[600], value[32];
        snprintf(key, sizeof key, SHARE_NOTE "%s", sl_ledger_id(s->ledger, b));
        double share = fresh ? 0.0 : 1.0;
        if (s->lease_shares)
            share = 0.0; /* a lease does not outlive the process it was granted to */
        else if (sl_store_meta_get(s->store, key, value, sizeof value) == SL_OK)
            share = strtod(value, NULL);
        if (!(share >= 0.0) || share > 1.0)
            share = 0.0;
        bi->share = bi->share_next = share;
        bi->share_at_ms = 0;
        sl_err_t rc = apply(s, b, now_ms);
        if (rc != SL_OK)
            return rc;
    }
    return SL_OK;
}

/* A tenant's own buckets on path (its limits, its keys', its app/env's), after its partition
 * came from another shard: what that shard admitted under them is not known here, so the
 * per-minute ones start as if just used (sl_ledger_assume_worst; quotas are left as they are). */
static void assume_worst_own(sl_sched_t *s, const path_t *path, int64_t now_ms)
{
    for (int i = 0; i < path->n; i++)
        if (!s->binfo[path->b[i]].shared)
            sl_ledger_assume_worst(s->ledger, path->b[i], now_ms);
}

static void taken_over(sl_sched_t *s, const uint8_t *gained, int64_t now_ms)
{
    const sl_config_t *cfg = s->cfg;
    for (int t = 0; t < cfg->ntenants; t++)
        if (gained[sl_sched_partition(s, cfg->tenants[t].name)])
            assume_worst_own(s, &s->tenant_paths[t], now_ms);
    for (int k = 0; k < cfg->nkeys; k++)
        if (gained[sl_sched_partition(s, cfg->tenants[cfg->keys[k].tenant].name)])
            assume_worst_own(s, &s->key_paths[k], now_ms);
}

sl_err_t sl_sched_set_owned(sl_sched_t *s, const uint8_t *owned, int64_t now_ms)
{
    if (s->nparts <= 0)
        return SL_OK;
    uint8_t *gained = calloc((size_t)s->nparts, 1);
    if (gained == NULL)
        return SL_ENOMEM;
    int any = 0;
    for (int p = 0; p < s->nparts; p++)
        any |= gained[p] = owned[p] && !s->owned[p];
    if (any)
        taken_over(s, gained, now_ms);
    free(gained);
    if (owned != s->owned)
        memcpy(s->owned, owned, (size_t)s->nparts);
    if (s->lease_shares)
        return SL_OK; /* the coordinator's grants set the shares */
    double target = sl_shard_target(s);
    for (int b = 0; b < sl_ledger_count(s->ledger); b++) {
        binfo_t *bi = &s->binfo[b];
        if (!bi->shared)
            continue;
        if (target <= bi->share) {
            int changed = target < bi->share;
            bi->share = bi->share_next = target;
            bi->share_at_ms = 0;
            if (changed) {
                sl_err_t rc = apply(s, b, now_ms);
                if (rc != SL_OK)
                    return rc;
            }
        } else if (target != bi->share_next) {
            /* A later gain waits at least as long as the one already pending. */
            int64_t at = now_ms + raise_delay(s, b, now_ms);
            if (bi->share_next > bi->share && bi->share_at_ms > at)
                at = bi->share_at_ms;
            bi->share_next = target;
            bi->share_at_ms = at;
        }
    }
    return SL_OK;
}

/* ---- capacity leases (grants.h) ---- */

/* The share a shard with no backlog on a bucket asks for: a first job there gets some room at
 * once, without the others giving theirs back first. What it admitted before still counts as
 * its own until it leaves the window (the coordinator holds it for it), and a shard whose jobs
 * wait asks for everything and gets its flows' part. */
#define IDLE_WANT 0.02

void sl_sched_lease_shares(sl_sched_t *s)
{
    s->lease_shares = 1;
}

int sl_sched_shared_buckets(sl_sched_t *s, int64_t now_ms, const char **ids, int64_t *release_ms,
                            int max)
{
    int n = 0;
    for (int b = 0; b < sl_ledger_count(s->ledger); b++) {
        if (!s->binfo[b].shared)
            continue;
        if (n < max) {
            ids[n] = sl_ledger_id(s->ledger, b);
            release_ms[n] = raise_delay(s, b, now_ms);
        }
        n++;
    }
    return n;
}

/* What bucket b still counts of this shard's admissions, as a share of the whole limit. A
 * token bucket that mirrors a provider's per-minute limit has a guard over the trailing window
 * the provider counts, which says exactly that (its level does not: a bucket raised from a
 * smaller share starts at the level it had). Any other bucket: what is missing from it. */
static double counted_share(sl_sched_t *s, int b, int64_t now_ms)
{
    sl_bucket_spec_t whole = sl_buckets_spec_whole(s, b);
    const sl_bucket_spec_t *cur = sl_ledger_spec(s->ledger, b);
    double used = 0;
    if (whole.alg == SL_ALG_TOKEN_BUCKET && whole.guard_window_ms > 0 && whole.guard_capacity > 0)
        used = sl_ledger_guard_used(s->ledger, b, now_ms) / whole.guard_capacity;
    else if (whole.capacity > 0)
        used = (cur->capacity - sl_ledger_level(s->ledger, b, now_ms)) / whole.capacity;
    return used > 0 ? used : 0;
}

/* The rate a bucket lets through on average, per ms; < 0 for one that is not a rate (a gauge,
 * a calendar budget, a ramp). */
static double average_rate(const sl_bucket_spec_t *sp)
{
    switch (sp->alg) {
    case SL_ALG_TOKEN_BUCKET:
        return sp->rate_per_ms;
    case SL_ALG_SLIDING_WINDOW:
    case SL_ALG_ROLLING:
        return sp->window_ms > 0 ? sp->capacity / (double)sp->window_ms : -1;
    default:
        return -1;
    }
}

/* Whether one of tenant t's own quotas (a daily quota, a budget over a calendar or rolling
 * period) is spent: until it resets the tenant can be served nothing. */
static int tenant_spent(sl_sched_t *s, int t, int64_t now_ms)
{
    const path_t *tp = &s->tenant_paths[t];
    for (int i = 0; i < tp->n; i++) {
        int ob = tp->b[i];
        const sl_bucket_spec_t *os = sl_ledger_spec(s->ledger, ob);
        if (!s->binfo[ob].shared && (os->alg == SL_ALG_CALENDAR || os->alg == SL_ALG_ROLLING) &&
            sl_ledger_level(s->ledger, ob, now_ms) <= 0)
            return 1;
    }
    return 0;
}

/* As a share of shared bucket b (whose whole limit lets whole_rate through a ms), the most
 * tenant t can be served through it: the slowest of its own rate limits of b's dimension, or
 * < 0 when none holds it below b's. Its own limits are its shard's alone. A tenant held back by
 * them cannot use more of b, so its shard does not ask the coordinator for what the other
 * shards could use. */
static double tenant_cap(sl_sched_t *s, int t, int b, double whole_rate)
{
    if (!(whole_rate > 0))
        return -1;
    sl_dimension_t dim = s->binfo[b].limit->dimension;
    double cap = -1;
    const path_t *tp = &s->tenant_paths[t];
    for (int i = 0; i < tp->n; i++) {
        int ob = tp->b[i];
        if (s->binfo[ob].shared || s->binfo[ob].limit->dimension != dim)
            continue;
        double r = average_rate(sl_ledger_spec(s->ledger, ob));
        if (r >= 0 && (cap < 0 || r / whole_rate < cap))
            cap = r / whole_rate;
    }
    return cap >= 1 ? -1 : cap;
}

/* The margin over what a shard's tenants' own limits let through that it still asks for: its
 * estimates and its tenants' buckets differ a little from moment to moment. */
#define CAPPED_WANT_MARGIN 1.1

sl_err_t sl_sched_demand(sl_sched_t *s, int64_t now_ms, const char *const *ids, int n,
                         sl_want_t *out)
{
    const sl_config_t *cfg = s->cfg;
    int nb = sl_ledger_count(s->ledger);
    size_t nz = (size_t)(nb > 0 ? nb : 1);
    double *w = calloc(nz, sizeof *w), *cap = calloc(nz, sizeof *cap);
    double *whole = malloc(nz * sizeof *whole); /* a shared bucket's whole rate a ms */
    int *seen = malloc(nz * sizeof *seen), *tseen = malloc(nz * sizeof *tseen);
    uint8_t *uncapped = calloc(nz, 1); /* a waiting tenant no own limit holds back */
    if (w == NULL || cap == NULL || whole == NULL || seen == NULL || tseen == NULL ||
        uncapped == NULL) {
        free(w);
        free(cap);
        free(whole);
        free(seen);
        free(tseen);
        free(uncapped);
        return SL_ENOMEM;
    }
    for (int b = 0; b < nb; b++) {
        seen[b] = tseen[b] = -1;
        sl_bucket_spec_t bs = s->binfo[b].shared ? sl_buckets_spec_whole(s, b)
                                                 : (sl_bucket_spec_t){.alg = SL_ALG_GAUGE};
        whole[b] = average_rate(&bs);
    }
    /* Each route a tenant has jobs waiting on weighs, by the tenant's weight for each of its
     * waiting flows (classes), on every shared bucket the route's deployments cross; and the
     * tenant can take of each such bucket what its own limits let through (once a bucket). */
    int stamp = 0;
    for (int t = 0; t < cfg->ntenants; t++) {
        int spent = -1; /* tenant_spent, once it has jobs waiting */
        for (int r = 0; r < cfg->nroutes; r++) {
            const sl_drr_t *drr = s->routes[r].drr;
            int flows = 0;
            for (int c = 0; c < SL_CLASS_COUNT && sl_drr_len(drr) > 0; c++)
                flows += sl_drr_flow_len(drr, t * SL_CLASS_COUNT + c) > 0;
            if (flows == 0)
                continue;
            if (spent < 0)
                spent = tenant_spent(s, t, now_ms);
            stamp++;
            for (int k = 0; k < cfg->routes[r].ndeployments; k++) {
                const path_t *p = &s->deps[cfg->routes[r].deployments[k]].path;
                for (int i = 0; i < p->n; i++) {
                    int b = p->b[i];
                    if (!s->binfo[b].shared || seen[b] == stamp)
                        continue;
                    seen[b] = stamp;
                    w[b] += flows * (double)s->trt[t].weight;
                    if (tseen[b] == t)
                        continue;
                    tseen[b] = t;
                    double c = spent ? 0 : tenant_cap(s, t, b, whole[b]);
                    if (c < 0)
                        uncapped[b] = 1;
                    else
                        cap[b] += c;
                }
            }
        }
    }
    for (int i = 0; i < n; i++) {
        int b = sl_ledger_find(s->ledger, ids[i]);
        memset(&out[i], 0, sizeof out[i]);
        if (b < 0 || !s->binfo[b].shared)
            continue;
        out[i].weight = w[b];
        out[i].held = s->binfo[b].share;
        out[i].used = counted_share(s, b, now_ms);
        double want = uncapped[b] ? 1.0 : CAPPED_WANT_MARGIN * cap[b];
        out[i].want = w[b] > 0 ? (want > 1 ? 1 : want < IDLE_WANT ? IDLE_WANT : want) : IDLE_WANT;
    }
    free(w);
    free(cap);
    free(whole);
    free(seen);
    free(tseen);
    free(uncapped);
    return SL_OK;
}

sl_err_t sl_sched_grant_share(sl_sched_t *s, const char *id, double share, int64_t now_ms)
{
    int b = sl_ledger_find(s->ledger, id);
    if (b < 0 || !s->binfo[b].shared)
        return SL_ENOTFOUND;
    if (!(share >= 0))
        share = 0;
    if (share > 1)
        share = 1;
    binfo_t *bi = &s->binfo[b];
    if (bi->share == share && bi->share_next == share)
        return SL_OK;
    bi->share = bi->share_next = share;
    bi->share_at_ms = 0;
    return apply(s, b, now_ms);
}

sl_err_t sl_shard_tick(sl_sched_t *s, int64_t now_ms)
{
    if (s->nparts <= 0)
        return SL_OK;
    for (int b = 0; b < sl_ledger_count(s->ledger); b++) {
        binfo_t *bi = &s->binfo[b];
        if (!bi->shared || bi->share_next <= bi->share || now_ms < bi->share_at_ms)
            continue;
        bi->share = bi->share_next;
        bi->share_at_ms = 0;
        sl_err_t rc = apply(s, b, now_ms);
        if (rc != SL_OK)
            return rc;
    }
    return SL_OK;
}

typedef struct {
    const sl_sched_t *s;
    int p;
    job_t **v;
    int n, cap;
    int oom;
} pick_t;

static void pick(const char *key, void *value, void *arg)
{
    (void)key;
    pick_t *k = arg;
    job_t *j = value;
    const char *tenant =
        j->tenant >= 0 ? k->s->cfg->tenants[j->tenant].name : sl_job_orphan_tenant(j);
    if (k->oom || tenant == NULL || sl_sched_partition(k->s, tenant) != k->p)
        return;
    if (k->n == k->cap) {
        int cap = k->cap ? k->cap * 2 : 256;
        job_t **v = realloc(k->v, (size_t)cap * sizeof *v);
        if (v == NULL) {
            k->oom = 1;
            return;
        }
        k->v = v;
        k->cap = cap;
    }
    k->v[k->n++] = j;
}

sl_err_t sl_sched_hand_over(sl_sched_t *s, int p, int64_t now_ms, int *n)
{
    if (n != NULL)
        *n = 0;
    if (s->nparts <= 0)
        return SL_OK;
    pick_t k = {s, p, NULL, 0, 0, 0};
    sl_hmap_each(s->jobs, pick, &k);
    sl_err_t rc = k.oom ? SL_ENOMEM : SL_OK;
    for (int i = 0; rc == SL_OK && i < k.n; i++) {
        job_t *j = k.v[i];
        if (j->state == J_LEASED)
            s->st.handed_over_in_flight++;
        if (j->state == J_LEASED && sl_job_held(j) != NULL)
            rc = sl_reservation_settle(s, j, END_EXPIRED, "expired", -1, -1, -1, "handed_over",
                                       now_ms, NULL);
        if (rc == SL_OK)
            rc = sl_store_job_hand_over(s->store, j->id);
        if (rc != SL_OK)
            break;
        sl_job_unplace(s, j);
        sl_job_untrack(s, j);
        sl_job_free(j);
        s->st.handed_over++;
        if (n != NULL)
            (*n)++;
    }
    free(k.v);
    return rc;
}

/* ---- calls in flight when partitions move ---- */

void sl_sched_each_lease(const sl_sched_t *s, sl_sched_lease_fn fn, void *arg)
{
    const sl_config_t *cfg = s->cfg;
    for (int i = 0; i < s->leased.n; i++) {
        const job_t *j = s->leased.items[i];
        if (j->state != J_LEASED || j->lease == NULL || j->lease->res_id[0] == '\0' ||
            sl_job_orphan_tenant(j) != NULL || j->deployment < 0 ||
            j->deployment >= cfg->ndeployments)
            continue;
        fn(cfg->tenants[j->tenant].name, j->id, j->attempts, j->lease->res_id,
           cfg->deployments[j->deployment].name, j->lease->lease_expires_ms, arg);
    }
}

sl_err_t sl_sched_adopt_lease(sl_sched_t *s, const char *job_id, int attempt, const char *res_id,
                              const char *deployment, int64_t expires_ms, int64_t now_ms,
                              int *adopted)
{
    *adopted = 0;
    const sl_config_t *cfg = s->cfg;
    job_t *j = sl_hmap_get(s->jobs, job_id);
    int d = sl_config_deployment(cfg, deployment);
    int64_t created = sl_reservation_id_ms(res_id);
    /* Only a queued job of a known deployment, whose lease is not over: anything else is run
     * again as before (at least once). */
    const char *why = j == NULL                                                 ? "not restored"
                      : j->state != J_QUEUED || sl_job_orphan_tenant(j) != NULL ? "not queued"
                      : expires_ms <= now_ms ? "its lease is over"
                      : d < 0                ? "unknown deployment"
                      : created <= 0 || created > now_ms || attempt <= 0 || strlen(res_id) != 32
                          ? "malformed"
                          : NULL;
    /* The partition came back to a shard that had this attempt before (its reservation is
     * here, closed when the partition went): the reservation is opened again. One still open
     * here is not taken twice. */
    int exists = 0, reopened = 0;
    sl_err_t rc = why == NULL ? sl_store_res_exists(s->store, res_id, &exists) : SL_OK;
    if (rc == SL_OK && exists)
        rc = sl_store_res_reopen(s->store, res_id, expires_ms, &reopened);
    if (rc == SL_OK && exists && !reopened)
        why = "its reservation is open here";
    if (rc != SL_OK || why != NULL) {
        sl_debug("lease of job %.64s attempt %d not taken over (%s)", job_id, attempt,
                 why != NULL ? why : sl_strerror(rc));
        return rc;
    }
    job_lease_t *l = sl_job_lease(j);
    held_t *h = calloc(1, sizeof *h);
    if (l == NULL || h == NULL) {
        free(h);
        return SL_ENOMEM;
    }
    /* No charge here: the shard that leased it keeps what it charged (its use counts in the
     * limits' windows and in its capacity reports), so the usage event settles nothing in this
     * ledger. */
    h->charged_ms = created;
    h->est_input = j->est_input;
    h->est_output = j->est_output;
    sl_store_res_t res = {
        .reservation_id = res_id,
        .job_id = j->id,
        .tenant = cfg->tenants[j->tenant].name,
        .route = cfg->routes[j->route].name,
        .cls = sl_class_name((sl_class_t)j->cls),
        .deployment = deployment,
        .idempotency_key = sl_job_idem(j),
        .attempt = attempt,
        .est_input = j->est_input,
        .est_output = j->est_output,
        .created_ms = created,
        .expires_ms = expires_ms,
        .queue_deadline_ms = j->deadline_ms,
    };
    rc = reopened ? SL_OK : sl_store_res_open(s->store, &res, 0, NULL, NULL, NULL);
    if (rc == SL_OK)
        rc = sl_store_job_lease(s->store, j->id, attempt, expires_ms, res_id, deployment, now_ms);
    if (rc != SL_OK) {
        free(h);
        return rc;
    }
    sl_job_unplace(s, j);
    free(l->held);
    l->held = h;
    snprintf(l->res_id, sizeof l->res_id, "%s", res_id);
    l->lease_expires_ms = expires_ms;
    l->dispatched_ms = created;
    l->holder = 0; /* until a dispatcher's heartbeat names it */
    j->attempts = attempt;
    j->deployment = d;
    j->state = J_LEASED;
    j->pbatch = SL_IS_BATCH_DEPLOYMENT(s->cfg, d);
    rc = sl_job_list_add(&s->leased, j);
    if (rc == SL_OK) {
        s->st.leases_adopted++;
        *adopted = 1;
    }
    return rc;
}

sl_err_t sl_shard_carry(sl_sched_t *fresh, const sl_sched_t *old, int64_t now_ms)
{
    if (old->nparts <= 0)
        return SL_OK;
    fresh->lease_shares = old->lease_shares;
    uint8_t *owned = malloc((size_t)old->nparts);
    if (owned == NULL)
        return SL_ENOMEM;
    memcpy(owned, old->owned, (size_t)old->nparts);
    free(fresh->owned);
    fresh->owned = owned;
    fresh->nparts = old->nparts;
    for (int b = 0; b < sl_ledger_count(fresh->ledger); b++) {
        binfo_t *bi = &fresh->binfo[b];
        if (!bi->shared)
            continue;
        int ob = sl_ledger_find(old->ledger, sl_ledger_id(fresh->ledger, b));
        if (ob >= 0 && old->binfo[ob].shared) {
            bi->share = old->binfo[ob].share;
            bi->share_next = old->binfo[ob].share_next;
            bi->share_at_ms = old->binfo[ob].share_at_ms;
        } else {
            /* A limit the old config did not share: nothing was counted under it here. */
            bi->share = bi->share_next = 0.0;
            bi->share_at_ms = 0;
        }
        sl_err_t rc = apply(fresh, b, now_ms);
        if (rc != SL_OK)
            return rc;
    }
    return sl_sched_set_owned(fresh, owned, now_ms);
}
