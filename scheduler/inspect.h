/* inspect.h - read-only views of the scheduler core, for metrics, the admin API and tests.
 *
 * Nothing here changes the core; the pointers handed out (bucket ids, limits, paths) live
 * until the core is freed or reloaded.
 */
#ifndef SL_INSPECT_H
#define SL_INSPECT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "sched_types.h"

/* The core's counters, and its gauges (queued, delayed, leased, held) now. */
void sl_sched_stats(const sl_sched_t *s, sl_sched_stats_t *out);

/* Jobs queued on route r of class cls (waiting their turn, not delayed for a retry). */
size_t sl_sched_queue_depth(const sl_sched_t *s, int route, int cls);

/* The ledger's buckets, for inspection and tests: id, level and capacity at now_ms. */
int sl_sched_bucket_count(const sl_sched_t *s);
void sl_sched_bucket(sl_sched_t *s, int i, int64_t now_ms, const char **id, double *level,
                     double *capacity);

typedef struct {
    const char *id;
    const sl_limit_cfg_t *limit;      /* in force (a run-time change, or the config's) */
    const sl_limit_cfg_t *configured; /* the config's */
    int overridden, provider_side;
    double level, capacity; /* the ledger's: what is left, and the burst or window */
    int64_t reset_ms;       /* when it is full again or its window starts again */
    /* Since the core was built: everything reserved, and what it came to once reconciled
     * (sl_ledger_charged_total). clamped: a provider's rate-limit headers restrict it now. */
    double reserved_total, charged_total;
    int clamped;
} sl_sched_bucket_info_t;

int sl_sched_bucket_find(const sl_sched_t *s, const char *id); /* -1 when unknown */
void sl_sched_bucket_info(sl_sched_t *s, int bucket, int64_t now_ms, sl_sched_bucket_info_t *out);
/* A tenant's, key's or deployment's buckets (narrowest scope first, its parents' after). */
const int *sl_sched_tenant_path(const sl_sched_t *s, int tenant, int *n);
const int *sl_sched_key_path(const sl_sched_t *s, int key, int *n);
const int *sl_sched_deployment_path(const sl_sched_t *s, int d, int *n);

typedef struct {
    int64_t weight;
    double guarantee;
    int paused;
    int64_t queued[SL_CLASS_COUNT];   /* waiting their turn, every route */
    int64_t held, delayed, in_flight; /* held by a pause, waiting for a retry, leased */
} sl_sched_tenant_info_t;

/* Fills out[t] for every tenant of the config (one pass over the jobs). */
void sl_sched_tenants_info(const sl_sched_t *s, sl_sched_tenant_info_t *out);
/* When the oldest job queued on each route and class was submitted: oldest[route *
 * SL_CLASS_COUNT + class], 0 when none (one pass over the jobs). */
void sl_sched_oldest_queued(const sl_sched_t *s, int64_t *oldest);
int sl_sched_key_paused(const sl_sched_t *s, int key);
/* Per deployment: leases in flight, and how long it stays paused after a provider's 429. */
void sl_sched_deployments_info(const sl_sched_t *s, int64_t now_ms, int *in_flight,
                               int64_t *paused_ms);
/* Deployment d's answers since the core was built: all of them, 429s, and the server-side or
 * transport failures (the split of the totals provider_429 and provider_5xx). */
void sl_sched_deployment_answers(const sl_sched_t *s, int d, int64_t *answered,
                                 int64_t *rate_limited, int64_t *unavailable);
/* How long the route waits for capacity before trying again (0 = not blocked). */
int64_t sl_sched_route_blocked_ms(const sl_sched_t *s, int route, int64_t now_ms);

typedef struct {
    const char *state;        /* queued, held, delayed, leased, orphan */
    int tenant, route, cls;   /* -1: the config does not know the job's tenant or route */
    int attempts, deployment; /* deployment: while leased, else -1 */
    int64_t submitted_ms, deadline_ms, not_before_ms, lease_expires_ms;
    char limiter[200]; /* queued: what holds it back ("" = waiting its turn); held: the pause */
    int64_t wait_ms;   /* queued: until the limiter has room, else -1 */
} sl_sched_job_info_t;

/* An unfinished job's place; 0 when the job is not in memory (finished, or unknown). */
int sl_sched_job_info(sl_sched_t *s, const char *job_id, int64_t now_ms, sl_sched_job_info_t *out);

#endif
