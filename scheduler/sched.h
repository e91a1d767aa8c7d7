/* sched.h - the scheduler's core: durable queue, ledger, DRR, leases and reconciliation.
 *
 * The caller (main.c) feeds it job messages and usage events inside a store transaction, calls
 * sl_sched_tick to expire and schedule, commits, and then produces the messages it takes out
 * (signed dispatches, and results from the outbox). Nothing here touches Kafka, so every rule
 * can be tested with an explicit clock.
 *
 * Invariants: a job is in exactly one place (queued in its route's DRR, delayed for backoff,
 * leased to a dispatcher, or done in the store); every lease has one open reservation that was
 * reserved all-or-nothing before the dispatch was produced; every reservation is closed by
 * reconciliation or expiry; every finished job has its result in the outbox in the same
 * transaction.
 */
#ifndef SL_SCHED_H
#define SL_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "err.h"
#include "sign.h"
#include "store.h"

typedef struct sl_sched sl_sched_t;

/* Creates the core: builds buckets from cfg, restores bucket levels and unfinished jobs from
 * store (after a restart every deployment bucket starts empty: the worst case). cfg, store and
 * signer are borrowed and must outlive the core; signer may be NULL in tests (dispatches are
 * then unsigned). *out set only on success. */
sl_err_t sl_sched_new(const sl_config_t *cfg, sl_store_t *store, const sl_signer_t *signer,
                      int64_t now_ms, sl_sched_t **out, char *err, size_t errlen);
void sl_sched_free(sl_sched_t *s);

/* Writes every bucket's level and counters to the store (inside the caller's transaction). */
sl_err_t sl_sched_save(sl_sched_t *s, int64_t now_ms);

/* Applies a new config at run time without losing queued work: the caller has saved the buckets
 * (sl_sched_save) and committed; a new core is built from cfg and the store, restoring bucket
 * levels and counters exactly as saved (a lowered limit applies from the next admission), every
 * unfinished job, and the providers' pauses by deployment name. Messages must have been taken
 * (sl_sched_take) before: SL_EBUSY otherwise. On success *s is replaced (the old core freed,
 * and the old config may be freed too); on failure *s is left as it was and err says why. cfg
 * must outlive the new core. */
sl_err_t sl_sched_reload(sl_sched_t **s, const sl_config_t *cfg, int64_t now_ms, char *err,
                         size_t errlen);

/* Takes one job message (JSON from sluice.jobs). Invalid jobs are logged and counted, never
 * fatal. Returns SL_EDB/SL_ENOMEM only when the transaction must be abandoned. */
sl_err_t sl_sched_on_job(sl_sched_t *s, const char *json, size_t len, int64_t now_ms);

/* Takes one usage event (JSON from sluice.usage): reconciles the reservation and decides the
 * job's fate (succeeded, retried, failed). Same error contract as sl_sched_on_job. */
sl_err_t sl_sched_on_usage(sl_sched_t *s, const char *json, size_t len, int64_t now_ms);

/* Expires leases and deadlines, releases delayed retries and schedules as many jobs as capacity
 * allows; *wait_ms gets how long until it next needs to run (>= 1). An error (SL_EDB,
 * SL_ENOMEM, ...) means the transaction must be abandoned and the core rebuilt from the store:
 * the in-memory state may be ahead of it. */
sl_err_t sl_sched_tick(sl_sched_t *s, int64_t now_ms, int64_t *wait_ms);

/* Moves every lease's expiry gap_ms later. The caller uses it after a time in which it could
 * not hear usage events (no Kafka partitions assigned, e.g. while a restarted scheduler waits
 * for its consumer group): leases must not expire for silence the scheduler caused itself,
 * or every call in flight would be sent a second time. */
void sl_sched_extend_leases(sl_sched_t *s, int64_t gap_ms);

typedef enum { SL_MSG_DISPATCH = 0, SL_MSG_RESULT } sl_msg_kind_t;

typedef struct {
    sl_msg_kind_t kind;
    const char *topic; /* not owned */
    char *key;
    char *value;
    char sig[SL_SIG_B64_LEN]; /* dispatches: base64 Ed25519 signature of value */
    int64_t seq;              /* results: outbox row to delete once acknowledged */
} sl_sched_msg_t;

/* Hands over the messages produced since the last call; the caller owns the array and each
 * key/value (free with sl_sched_msgs_free) and must produce them only after committing. */
int sl_sched_take(sl_sched_t *s, sl_sched_msg_t **msgs);
void sl_sched_msgs_free(sl_sched_msg_t *msgs, int n);

typedef struct {
    int64_t jobs_received, jobs_duplicate, jobs_invalid, queue_full, shed, cancelled;
    int64_t dispatched, succeeded, failed, expired, retried;
    int64_t provider_429, provider_5xx, lease_expired, usage_stale;
    int64_t queued, delayed, leased;
    /* Tokens on provider-side buckets settled at real use: reserved, what they settled at,
     * and the difference either way. over_reserved is the capacity over-reservation held
     * back for nothing (until the call ended); under_reserved became debt. */
    int64_t tokens_reserved, tokens_settled, tokens_over_reserved, tokens_under_reserved;
} sl_sched_stats_t;

void sl_sched_stats(const sl_sched_t *s, sl_sched_stats_t *out);

/* Jobs queued on route r of class cls (waiting their turn, not delayed for a retry). */
size_t sl_sched_queue_depth(const sl_sched_t *s, int route, int cls);

/* The ledger's buckets, for inspection and tests: id, level and capacity at now_ms. */
int sl_sched_bucket_count(const sl_sched_t *s);
void sl_sched_bucket(sl_sched_t *s, int i, int64_t now_ms, const char **id, double *level,
                     double *capacity);

#endif
