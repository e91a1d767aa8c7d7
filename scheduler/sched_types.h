/* sched_types.h - the value types of the scheduler core's public interface (sched.h): the
 * core's handle, the messages it hands over, its counters and its metrics hooks.
 *
 * They have a header of their own so that the modules inside the scheduler (core.h) can use
 * them without including sched.h, which sits above those modules.
 */
#ifndef SL_SCHED_TYPES_H
#define SL_SCHED_TYPES_H

#include <stdint.h>


typedef struct sl_sched sl_sched_t;

/* A changelog message is a job the core took in: key its tenant, value the job message as it
 * came (the caller wraps it in a changelog record: changelog.h). */
typedef enum { SL_MSG_DISPATCH = 0, SL_MSG_RESULT, SL_MSG_CHANGELOG } sl_msg_kind_t;

typedef struct {
    sl_msg_kind_t kind;
    const char *topic; /* not owned */
    char *key;
    char *value;
    int64_t seq; /* results: outbox row to delete once acknowledged */
    /* changelog: the job's id and submission time (the record's header) */
    char *job_id;
    int64_t submitted_ms;
} sl_sched_msg_t;

typedef struct {
    int64_t jobs_received, jobs_duplicate, jobs_invalid, queue_full, shed, cancelled;
    int64_t degraded; /* jobs moved to their route's degrade_to (classes.*.overload = degrade) */
    int64_t dispatched, succeeded, failed, expired, retried;
    int64_t provider_429, provider_5xx, lease_expired, usage_stale;
    /* Input refused or matching nothing: usage events that failed validation, and cancels
     * that found no job of the caller's waiting or in flight (unknown, finished, or another
     * tenant's). */
    int64_t usage_invalid, cancels_unmatched;
    /* Dispatcher heartbeats (holders.c): those taken, those refused (invalid, or of an
     * incarnation already replaced), incarnations found dead, and the leases they held:
     * dispatched again (idempotent deployments) or failed as dispatcher_lost. */
    int64_t heartbeats, heartbeats_refused, dispatchers_lost, lost_redispatched, lost_failed;
    int64_t queued, delayed, leased, held;
    int64_t unfinished, unfinished_bytes; /* jobs the scheduler holds, and their messages' bytes */
    /* Backpressure (holders.h): the dispatchers alive, the calls they run at once (less a
     * cut), and the cuts made. */
    int64_t dispatchers_live, dispatch_window, window_cuts;
    /* Tokens on provider-side buckets settled at real use: reserved, what they settled at,
     * and the difference either way. over_reserved is the capacity over-reservation held
     * back for nothing (until the call ended); under_reserved became debt. */
    int64_t tokens_reserved, tokens_settled, tokens_over_reserved, tokens_under_reserved;
    /* Every attempt's charges on provider-side token buckets, and what they settled at
     * (refusals given back, real use, or kept whole when the call may have counted). */
    int64_t provider_tokens_charged, provider_tokens_kept;
    /* Sharded (shard.h): jobs handed over with their partition to another scheduler (of them,
     * those in flight then: their new owner runs them again), and jobs
     * of a partition this one does not own that reached it (a producer with another
     * partitioner, or a message read after its partition was revoked): not taken. */
    int64_t handed_over, handed_over_in_flight, not_owned;
    int64_t leases_adopted; /* calls in flight of a partition gained, settled here */
    /* Provider batches (pbatch.h): sent to a dispatcher (and the jobs in them), failed at the
     * provider (their jobs ran again), and collected. */
    int64_t pbatches_sent, pbatch_jobs, pbatches_failed, pbatches_done;
    int64_t partitions, partitions_owned; /* 1 and 1 when not sharded */
} sl_sched_stats_t;

/* One lease in flight (sl_sched_each_lease). */
typedef void (*sl_sched_lease_fn)(const char *tenant, const char *job_id, int attempt,
                                  const char *res_id, const char *deployment, int64_t expires_ms,
                                  void *arg);

/* Hooks for metrics, called from inside the core (the same thread). Any may be NULL. */
typedef struct {
    /* A job was leased: tokens reserved for it, and (first attempts; else -1) how long it
     * waited since it was submitted. */
    void (*leased)(void *arg, int tenant, int route, int cls, int deployment, double tokens,
                   int64_t queue_wait_ms);
    /* An admission was refused by this bucket (the one that had to wait longest). */
    void (*refused)(void *arg, const char *bucket_id);
    /* A provider answered (the usage event's outcome: ok, rate_limited, server_error, ...,
     * and its HTTP status, 0 when there was none). */
    void (*provider)(void *arg, const char *deployment, const char *outcome, int http_status);
    /* A job moved from one route to a fallback route (why: no_capable_deployment,
     * quota_exhausted, providers_paused). */
    void (*fallback)(void *arg, int from_route, int to_route, const char *why);
    /* A job finished with this status after this many attempts. */
    void (*finished)(void *arg, int cls, const char *status, int attempts);
} sl_sched_observer_t;

#endif
