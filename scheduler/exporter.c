/* exporter.c - the scheduler's metrics and stats line (see exporter.h).
 */
#include "exporter.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store.h"

static const struct {
    const char *name, *help;
    size_t offset; /* of the int64_t in sl_sched_stats_t */
} counters[] = {
    {"sluice_scheduler_jobs_received_total", "Job messages taken from the jobs topic.",
     offsetof(sl_sched_stats_t, jobs_received)},
    {"sluice_scheduler_jobs_duplicate_total", "Jobs received again (same job id).",
     offsetof(sl_sched_stats_t, jobs_duplicate)},
    {"sluice_scheduler_jobs_invalid_total", "Job messages that failed validation.",
     offsetof(sl_sched_stats_t, jobs_invalid)},
    {"sluice_scheduler_queue_full_total", "Jobs refused because their class queue was full.",
     offsetof(sl_sched_stats_t, queue_full)},
    {"sluice_scheduler_shed_total", "Queued jobs shed to make room for sooner ones.",
     offsetof(sl_sched_stats_t, shed)},
    {"sluice_scheduler_degraded_total",
     "Jobs moved to their route's cheaper degrade_to route (classes.*.overload = degrade); "
     "sluice_scheduler_fallbacks_total has them by route, reason degrade_queue_full or "
     "degrade_deadline.",
     offsetof(sl_sched_stats_t, degraded)},
    {"sluice_scheduler_cancelled_total", "Queued jobs cancelled by their callers.",
     offsetof(sl_sched_stats_t, cancelled)},
    {"sluice_scheduler_dispatched_total", "Leases given to dispatchers (attempts).",
     offsetof(sl_sched_stats_t, dispatched)},
    {"sluice_scheduler_retried_total", "Attempts put back in line for another try.",
     offsetof(sl_sched_stats_t, retried)},
    {"sluice_scheduler_provider_429_total", "Provider answers 429 (rate limited).",
     offsetof(sl_sched_stats_t, provider_429)},
    {"sluice_scheduler_provider_unavailable_total",
     "Provider answers 5xx, timeouts and transport errors.",
     offsetof(sl_sched_stats_t, provider_5xx)},
    {"sluice_scheduler_leases_expired_total", "Leases that expired without a usage event.",
     offsetof(sl_sched_stats_t, lease_expired)},
    {"sluice_scheduler_usage_invalid_total", "Usage events that failed validation (ignored).",
     offsetof(sl_sched_stats_t, usage_invalid)},
    {"sluice_scheduler_usage_stale_total",
     "Usage events that match no current lease: late, repeated, or naming an unknown job.",
     offsetof(sl_sched_stats_t, usage_stale)},
    {"sluice_scheduler_cancels_unmatched_total",
     "Cancels that found no job of the caller's waiting or in flight (unknown, finished, or "
     "another tenant's).",
     offsetof(sl_sched_stats_t, cancels_unmatched)},
    {"sluice_scheduler_heartbeats_total", "Dispatcher heartbeats taken.",
     offsetof(sl_sched_stats_t, heartbeats)},
    {"sluice_scheduler_heartbeats_refused_total",
     "Dispatcher heartbeats refused: invalid, of a replaced incarnation, or beyond the "
     "dispatchers tracked.",
     offsetof(sl_sched_stats_t, heartbeats_refused)},
    {"sluice_scheduler_dispatchers_lost_total",
     "Dispatcher incarnations found dead (a newer one spoke, or silent for dispatcher_dead_ms).",
     offsetof(sl_sched_stats_t, dispatchers_lost)},
    {"sluice_scheduler_lost_redispatched_total",
     "Leases of dead dispatchers dispatched again at once (idempotent deployments).",
     offsetof(sl_sched_stats_t, lost_redispatched)},
    {"sluice_scheduler_lost_failed_total",
     "Leases of dead dispatchers failed as dispatcher_lost (deployments that are not "
     "idempotent: a second call could run the request twice).",
     offsetof(sl_sched_stats_t, lost_failed)},
    {"sluice_scheduler_jobs_handed_over_total",
     "Unfinished jobs handed over with their partition to another scheduler shard, which takes "
     "them from the changelog.",
     offsetof(sl_sched_stats_t, handed_over)},
    {"sluice_scheduler_jobs_handed_over_in_flight_total",
     "Of the jobs handed over, those in flight then. At a revocation their leases go to the "
     "changelog and the new owner takes them over; after a crash it runs them again.",
     offsetof(sl_sched_stats_t, handed_over_in_flight)},
    {"sluice_scheduler_leases_adopted_total",
     "Calls in flight of a partition gained that this scheduler took over from the changelog's "
     "lease records: settled by their usage event here, not made again.",
     offsetof(sl_sched_stats_t, leases_adopted)},
    {"sluice_scheduler_jobs_not_owned_total",
     "Messages of a partition this scheduler does not own, not taken (read after their "
     "partition was revoked, or produced with another partitioner than librdkafka's default).",
     offsetof(sl_sched_stats_t, not_owned)},
    {"sluice_scheduler_dispatch_window_cuts_total",
     "Times the dispatch window was cut because dispatches were not sent (they reached a "
     "dispatcher too late): the path to the dispatchers is slower than the leases out allowed.",
     offsetof(sl_sched_stats_t, window_cuts)},
    {"sluice_scheduler_tokens_reserved_total",
     "Tokens reserved on provider-side buckets settled at real use.",
     offsetof(sl_sched_stats_t, tokens_reserved)},
    {"sluice_scheduler_tokens_used_total", "What those reservations settled at.",
     offsetof(sl_sched_stats_t, tokens_settled)},
    {"sluice_scheduler_tokens_over_reserved_total",
     "Tokens reserved above real use: capacity held back for nothing until the call ended.",
     offsetof(sl_sched_stats_t, tokens_over_reserved)},
    {"sluice_scheduler_tokens_under_reserved_total",
     "Tokens used above the reservation, charged afterwards as debt.",
     offsetof(sl_sched_stats_t, tokens_under_reserved)},
    {"sluice_scheduler_provider_tokens_charged_total",
     "Tokens reserved on provider-side token buckets, every attempt.",
     offsetof(sl_sched_stats_t, provider_tokens_charged)},
    {"sluice_scheduler_provider_tokens_kept_total",
     "What those reservations settled at: refusals given back, real use, or the whole charge "
     "when the call may have counted. Above what the provider counted: capacity wasted.",
     offsetof(sl_sched_stats_t, provider_tokens_kept)},
    {"sluice_scheduler_provider_batches_sent_total",
     "Provider batches handed to a dispatcher to create at a provider's batch API.",
     offsetof(sl_sched_stats_t, pbatches_sent)},
    {"sluice_scheduler_provider_batch_jobs_total", "Jobs sent in provider batches.",
     offsetof(sl_sched_stats_t, pbatch_jobs)},
    {"sluice_scheduler_provider_batches_failed_total",
     "Provider batches the provider failed without running a line (their jobs ran again).",
     offsetof(sl_sched_stats_t, pbatches_failed)},
    {"sluice_scheduler_provider_batches_collected_total",
     "Provider batches whose results were all reported.",
     offsetof(sl_sched_stats_t, pbatches_done)},
};
enum { NCOUNTERS = sizeof counters / sizeof counters[0] };

struct sl_exporter {
    sl_metrics_t *m;
    const sl_config_t **cfg;
    int counter[NCOUNTERS];
    int results, queue, leased, delayed, held, level, capacity, used, window, dispatchers;
    int parts_owned, parts; /* a shard's partitions (shard.h) */
    int unfinished, unfinished_bytes, store_memory;
    int admitted, admitted_tokens, refusals, provider, queue_wait, attempts, finished, fallbacks;
    sl_sched_stats_t last;
    const sl_sched_observer_t *next; /* hooks that hear the same (sl_exporter_chain), or NULL */
    void *next_arg;
};

#define NEXT(x, hook, ...)                                                                         \
    do {                                                                                           \
        if ((x)->next != NULL && (x)->next->hook != NULL)                                          \
            (x)->next->hook((x)->next_arg, __VA_ARGS__);                                           \
    } while (0)

/* ---- metrics of decisions, from the core's hooks ---- */

static void on_leased(void *arg, int tenant, int route, int cls, int deployment, double tokens,
                      int64_t queue_wait_ms)
{
    sl_exporter_t *x = arg;
    const sl_config_t *cfg = *x->cfg;
    const char *v[] = {cfg->tenants[tenant].name, cfg->routes[route].name,
                       cfg->deployments[deployment].name};
    sl_metrics_add(x->m, x->admitted, v, 1);
    sl_metrics_add(x->m, x->admitted_tokens, v, tokens);
    if (queue_wait_ms >= 0) {
        const char *c[] = {sl_class_name((sl_class_t)cls)};
        sl_metrics_observe(x->m, x->queue_wait, c, (double)queue_wait_ms / 1000.0);
    }
    NEXT(x, leased, tenant, route, cls, deployment, tokens, queue_wait_ms);
}

static void on_refused(void *arg, const char *bucket_id)
{
    sl_exporter_t *x = arg;
    const char *v[] = {bucket_id};
    sl_metrics_add(x->m, x->refusals, v, 1);
    NEXT(x, refused, bucket_id);
}

static void on_provider(void *arg, const char *deployment, const char *outcome, int http_status)
{
    sl_exporter_t *x = arg;
    char status[16];
    snprintf(status, sizeof status, "%d", http_status);
    const char *v[] = {deployment != NULL ? deployment : "unknown", outcome, status};
    sl_metrics_add(x->m, x->provider, v, 1);
    NEXT(x, provider, deployment, outcome, http_status);
}

static void on_finished(void *arg, int cls, const char *status, int attempts)
{
    sl_exporter_t *x = arg;
    const char *v[] = {sl_class_name((sl_class_t)cls), status};
    sl_metrics_observe(x->m, x->attempts, v, attempts);
    sl_metrics_add(x->m, x->finished, v, 1);
    NEXT(x, finished, cls, status, attempts);
}

static void on_fallback(void *arg, int from_route, int to_route, const char *why)
{
    sl_exporter_t *x = arg;
    const sl_config_t *cfg = *x->cfg;
    const char *v[] = {cfg->routes[from_route].name, cfg->routes[to_route].name, why};
    sl_metrics_add(x->m, x->fallbacks, v, 1);
    NEXT(x, fallback, from_route, to_route, why);
}

static const sl_sched_observer_t observer = {on_leased, on_refused, on_provider, on_fallback,
                                             on_finished};

static int exporter_init(sl_exporter_t *x, sl_metrics_t *m, const sl_config_t **cfg)
{
    static const char *const status_label[] = {"status", NULL};
    static const char *const queue_labels[] = {"route", "class", NULL};
    static const char *const bucket_label[] = {"bucket", NULL};
    static const char *const admit_labels[] = {"tenant", "route", "deployment", NULL};
    static const char *const provider_labels[] = {"deployment", "outcome", "status", NULL};
    static const char *const class_label[] = {"class", NULL};
    static const char *const finish_labels[] = {"class", "status", NULL};
    static const double wait_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                         2.5,   5,    10,    30,   60,  300,  900, 3600};
    static const double attempt_bounds[] = {0, 1, 2, 3, 4, 5, 7, 10};
    memset(x, 0, sizeof *x);
    x->m = m;
    x->cfg = cfg;
    x->admitted =
        sl_metrics_family(m, SL_METRIC_COUNTER, "sluice_scheduler_reservations_admitted_total",
                          "Reservations admitted (jobs leased), by tenant, route and deployment.",
                          admit_labels, NULL, 0);
    x->admitted_tokens = sl_metrics_family(
        m, SL_METRIC_COUNTER, "sluice_scheduler_admitted_tokens_total",
        "Tokens reserved for admitted jobs, by tenant, route and deployment: a tenant's share "
        "of a route is its rate over the route's.",
        admit_labels, NULL, 0);
    x->refusals = sl_metrics_family(
        m, SL_METRIC_COUNTER, "sluice_scheduler_reservations_refused_total",
        "Admissions refused, by the bucket that had no room (the job waits or goes elsewhere).",
        bucket_label, NULL, 0);
    x->provider =
        sl_metrics_family(m, SL_METRIC_COUNTER, "sluice_scheduler_provider_responses_total",
                          "Calls reconciled, by deployment, outcome (ok, rate_limited, overloaded, "
                          "server_error, timeout, ...) and HTTP status (0: none).",
                          provider_labels, NULL, 0);
    x->queue_wait =
        sl_metrics_family(m, SL_METRIC_HISTOGRAM, "sluice_scheduler_queue_wait_seconds",
                          "Time from submission to the first dispatch, by class.", class_label,
                          wait_bounds, (int)(sizeof wait_bounds / sizeof wait_bounds[0]));
    x->attempts = sl_metrics_family(
        m, SL_METRIC_HISTOGRAM, "sluice_scheduler_job_attempts",
        "Attempts (dispatches) per finished job, by class and status: retries per logical "
        "request are attempts - 1.",
        finish_labels, attempt_bounds, (int)(sizeof attempt_bounds / sizeof attempt_bounds[0]));
    static const char *const fallback_labels[] = {"from_route", "to_route", "reason", NULL};
    x->fallbacks = sl_metrics_family(
        m, SL_METRIC_COUNTER, "sluice_scheduler_fallbacks_total",
        "Jobs moved to a fallback route, by route and reason (no_capable_deployment, "
        "quota_exhausted, providers_paused).",
        fallback_labels, NULL, 0);
    x->finished = sl_metrics_family(
        m, SL_METRIC_COUNTER, "sluice_scheduler_jobs_finished_total",
        "Jobs finished, by class and status (succeeded, failed, rejected, expired: deadline "
        "expiries, cancelled).",
        finish_labels, NULL, 0);
    x->held = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_scheduler_jobs_held",
                                "Queued jobs held back because their tenant or key is paused.",
                                NULL, NULL, 0);
    x->used = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_bucket_used_ratio",
                                "Share of a ledger bucket in use now (1 - level/capacity, "
                                "clamped to [0, 1]); for gauges, concurrency saturation.",
                                bucket_label, NULL, 0);
    int bad = 0;
    for (int i = 0; i < NCOUNTERS; i++) {
        x->counter[i] = sl_metrics_family(m, SL_METRIC_COUNTER, counters[i].name, counters[i].help,
                                          NULL, NULL, 0);
        bad |= x->counter[i] < 0;
    }
    x->results = sl_metrics_family(m, SL_METRIC_COUNTER, "sluice_scheduler_results_total",
                                   "Terminal results written, by status.", status_label, NULL, 0);
    x->queue =
        sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_scheduler_queue_depth",
                          "Jobs waiting their turn, by route and class.", queue_labels, NULL, 0);
    x->leased = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_scheduler_leases_in_flight",
                                  "Jobs leased to dispatchers now.", NULL, NULL, 0);
    x->delayed = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_scheduler_jobs_delayed",
                                   "Jobs waiting for a retry backoff.", NULL, NULL, 0);
    x->window = sl_metrics_family(
        m, SL_METRIC_GAUGE, "sluice_scheduler_dispatch_window",
        "Calls the live dispatchers run at once, as their heartbeats say: batch leases stop "
        "there, the other classes a quarter beyond it (at least 8).",
        NULL, NULL, 0);
    x->parts_owned = sl_metrics_family(
        m, SL_METRIC_GAUGE, "sluice_scheduler_partitions_owned",
        "Partitions of the jobs topic this scheduler schedules (all of them unless sharded); its "
        "share of the limits all shards share is these over sluice_scheduler_partitions.",
        NULL, NULL, 0);
    x->parts = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_scheduler_partitions",
                                 "Partitions of the jobs topic (1 when not sharded).", NULL, NULL,
                                 0);
    x->dispatchers = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_scheduler_dispatchers_live",
                                       "Dispatcher incarnations heard from and not found dead.",
                                       NULL, NULL, 0);
    x->unfinished = sl_metrics_family(
        m, SL_METRIC_GAUGE, "sluice_scheduler_jobs_unfinished",
        "Jobs the scheduler holds, every state (bounded by scheduler.max_queued).", NULL, NULL, 0);
    x->unfinished_bytes = sl_metrics_family(
        m, SL_METRIC_GAUGE, "sluice_scheduler_jobs_unfinished_bytes",
        "Bytes of the job messages the scheduler holds (bounded by scheduler.max_queued_bytes).",
        NULL, NULL, 0);
    x->store_memory = sl_metrics_family(
        m, SL_METRIC_GAUGE, "sluice_scheduler_store_memory_bytes",
        "Heap the store's SQLite holds: its page caches (the writer's at most 16 MiB) and "
        "statements; pages read through its memory map are file-backed and not counted.",
        NULL, NULL, 0);
    x->level =
        sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_bucket_level",
                          "What a ledger bucket has left (negative: debt).", bucket_label, NULL, 0);
    x->capacity =
        sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_bucket_capacity",
                          "A ledger bucket's capacity (burst or window).", bucket_label, NULL, 0);
    /* Every status from the start, at 0, so that rate() sees the first expiry too. */
    static const char *const statuses[] = {"succeeded", "failed", "expired", "cancelled"};
    for (size_t i = 0; x->results >= 0 && i < sizeof statuses / sizeof statuses[0]; i++) {
        const char *v[] = {statuses[i]};
        sl_metrics_add(m, x->results, v, 0);
    }
    return bad || x->results < 0 || x->queue < 0 || x->leased < 0 || x->delayed < 0 ||
                   x->window < 0 || x->dispatchers < 0 || x->parts_owned < 0 || x->parts < 0 || x->unfinished < 0 ||
                   x->unfinished_bytes < 0 || x->store_memory < 0 ||
                   x->level < 0 || x->capacity < 0 || x->admitted < 0 || x->admitted_tokens < 0 ||
                   x->refusals < 0 || x->provider < 0 || x->queue_wait < 0 || x->attempts < 0 ||
                   x->held < 0 || x->used < 0 || x->finished < 0 || x->fallbacks < 0
               ? -1
               : 0;
}

sl_exporter_t *sl_exporter_new(sl_metrics_t *m, const sl_config_t **cfg)
{
    sl_exporter_t *x = malloc(sizeof *x);
    if (x != NULL && exporter_init(x, m, cfg) != 0) {
        free(x);
        x = NULL;
    }
    return x;
}

void sl_exporter_chain(sl_exporter_t *x, const sl_sched_observer_t *next, void *arg)
{
    x->next = next;
    x->next_arg = arg;
}

void sl_exporter_free(sl_exporter_t *x)
{
    free(x);
}

void sl_exporter_observe(sl_exporter_t *x, sl_sched_t *sched)
{
    sl_sched_observe(sched, &observer, x);
}

void sl_exporter_update(sl_exporter_t *x, sl_sched_t *sched, const sl_config_t *cfg, int64_t now_ms)
{
    sl_sched_stats_t st;
    sl_sched_stats(sched, &st);
    for (int i = 0; i < NCOUNTERS; i++) {
        int64_t cur, last;
        memcpy(&cur, (const char *)&st + counters[i].offset, sizeof cur);
        memcpy(&last, (const char *)&x->last + counters[i].offset, sizeof last);
        if (cur > last)
            sl_metrics_add(x->m, x->counter[i], NULL, (double)(cur - last));
    }
    const struct {
        const char *status;
        int64_t cur, last;
    } results[] = {{"succeeded", st.succeeded, x->last.succeeded},
                   {"failed", st.failed, x->last.failed},
                   {"expired", st.expired, x->last.expired},
                   {"cancelled", st.cancelled, x->last.cancelled}};
    for (size_t i = 0; i < sizeof results / sizeof results[0]; i++) {
        const char *v[] = {results[i].status};
        if (results[i].cur > results[i].last)
            sl_metrics_add(x->m, x->results, v, (double)(results[i].cur - results[i].last));
    }
    x->last = st;
    sl_metrics_set(x->m, x->leased, NULL, (double)st.leased);
    sl_metrics_set(x->m, x->delayed, NULL, (double)st.delayed);
    sl_metrics_set(x->m, x->window, NULL, (double)st.dispatch_window);
    sl_metrics_set(x->m, x->parts_owned, NULL, (double)st.partitions_owned);
    sl_metrics_set(x->m, x->parts, NULL, (double)st.partitions);
    sl_metrics_set(x->m, x->dispatchers, NULL, (double)st.dispatchers_live);
    sl_metrics_set(x->m, x->unfinished, NULL, (double)st.unfinished);
    sl_metrics_set(x->m, x->unfinished_bytes, NULL, (double)st.unfinished_bytes);
    sl_metrics_set(x->m, x->store_memory, NULL, (double)sl_store_memory_bytes());
    sl_metrics_set(x->m, x->held, NULL, (double)st.held);
    for (int r = 0; r < cfg->nroutes; r++) {
        for (int c = 0; c < SL_CLASS_COUNT; c++) {
            const char *v[] = {cfg->routes[r].name, sl_class_name((sl_class_t)c)};
            sl_metrics_set(x->m, x->queue, v, (double)sl_sched_queue_depth(sched, r, c));
        }
    }
    /* The registry keeps SL_METRICS_MAX_SERIES label sets a family: the first buckets (the
     * deployments' and their scopes' come first) are exported, and the rest not even looked
     * at, so that 100,000 tenants cost the loop nothing here. */
    int nbuckets = sl_sched_bucket_count(sched);
    if (nbuckets > SL_METRICS_MAX_SERIES)
        nbuckets = SL_METRICS_MAX_SERIES;
    for (int b = 0; b < nbuckets; b++) {
        const char *id;
        double level, capacity;
        sl_sched_bucket(sched, b, now_ms, &id, &level, &capacity);
        const char *v[] = {id};
        sl_metrics_set(x->m, x->level, v, level);
        sl_metrics_set(x->m, x->capacity, v, capacity);
        double used = capacity > 0 ? 1.0 - level / capacity : 0;
        sl_metrics_set(x->m, x->used, v, used < 0 ? 0 : used > 1 ? 1 : used);
    }
}

void sl_exporter_log_stats(const sl_sched_t *sched)
{
    sl_sched_stats_t st;
    sl_sched_stats(sched, &st);
    sl_info("jobs in %lld (dup %lld, invalid %lld) | queued %lld delayed %lld leased %lld |"
            " dispatched %lld succeeded %lld failed %lld expired %lld retried %lld |"
            " provider 429 %lld 5xx %lld | leases expired %lld | tokens reserved %lld,"
            " used %lld, over-reserved %lld, under-reserved %lld",
            (long long)st.jobs_received, (long long)st.jobs_duplicate, (long long)st.jobs_invalid,
            (long long)st.queued, (long long)st.delayed, (long long)st.leased,
            (long long)st.dispatched, (long long)st.succeeded, (long long)st.failed,
            (long long)st.expired, (long long)st.retried, (long long)st.provider_429,
            (long long)st.provider_5xx, (long long)st.lease_expired, (long long)st.tokens_reserved,
            (long long)st.tokens_settled, (long long)st.tokens_over_reserved,
            (long long)st.tokens_under_reserved);
}
