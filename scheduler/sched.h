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
 *
 * The whole interface is this header with the ones it includes: sched_types.h (the handle,
 * messages, counters and hooks), outbox.h (taking the messages out), overrides.h (run-time
 * changes) and inspect.h (read-only views). Inside, sched.c takes the inputs and runs the tick;
 * the rules live in modules below it that share core.h, which nothing outside scheduler/ uses.
 */
#ifndef SL_SCHED_H
#define SL_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "err.h"
#include "grants.h"    /* capacity leases: sl_want_t */
#include "inspect.h"   /* read-only views: sl_sched_stats, sl_sched_bucket_info, ... */
#include "outbox.h"    /* the messages out: sl_sched_take */
#include "overrides.h" /* run-time changes: sl_sched_set_limit, _share, _paused */
#include "sched_types.h"
#include "store.h"

/* Creates the core: builds buckets from cfg, restores bucket levels and unfinished jobs from
 * store (after a restart every deployment bucket starts empty: the worst case). cfg and store
 * are borrowed and must outlive the core. Its messages are signed when the process produces
 * them (sl_kafka_produce). *out set only on success. */
sl_err_t sl_sched_new(const sl_config_t *cfg, sl_store_t *store, int64_t now_ms, sl_sched_t **out, char *err, size_t errlen);
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
/* sl_sched_on_job for a job read back from the changelog: taken in the same way, but not handed
 * over for the changelog again (it is there; the snapshot after the restore writes it anew). */
sl_err_t sl_sched_on_restored_job(sl_sched_t *s, const char *json, size_t len, int64_t now_ms);

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

/* ---- sharded schedulers (shard.c: one scheduler among several, each owning partitions of the
 * jobs topic and a share of the limits they all share) ---- */

/* Sharded from now on, over nparts partitions, owning none yet: every shared bucket starts at
 * the share stored with it (none on a new database; all of it on a database of a scheduler
 * that was not sharded). */
sl_err_t sl_sched_shard(sl_sched_t *s, int nparts, int64_t now_ms);

/* Sets the partitions owned (owned[p] != 0, nparts entries): the shared buckets' shares follow
 * (smaller at once, larger when due), and the own per-minute buckets of the tenants of a
 * partition just gained start as if just used (their previous owner's use is not known). */
sl_err_t sl_sched_set_owned(sl_sched_t *s, const uint8_t *owned, int64_t now_ms);

/* Capacity leases (scheduler.capacity_leases; grants.h): call before sl_sched_shard. The shares
 * of the shared buckets then come from the coordinator's grants alone (sl_sched_grant_share), and
 * start at none whatever the store says (a lease does not outlive its process). */
void sl_sched_lease_shares(sl_sched_t *s);

/* The shared buckets (at most max): ids[i] and how long each counts an admission after it was
 * made (release_ms[i]). Returns how many there are (may be more than max). */
int sl_sched_shared_buckets(sl_sched_t *s, int64_t now_ms, const char **ids, int64_t *release_ms,
                            int max);

/* What this shard would report of the n shared buckets named in ids: the weights of its
 * backlogged flows that use each, the share it could use, the share it enforces, and what
 * each still counts of its admissions, as a share of the whole limit. SL_ENOMEM. */
sl_err_t sl_sched_demand(sl_sched_t *s, int64_t now_ms, const char *const *ids, int n,
                         sl_want_t *out);

/* Enforces share (0..1) of the shared bucket named id from now on; SL_ENOTFOUND when there is
 * no such shared bucket. Inside the caller's transaction (the share is noted in the store). */
sl_err_t sl_sched_grant_share(sl_sched_t *s, const char *id, double share, int64_t now_ms);

/* The partition of a tenant's jobs; 0 when not sharded. */
int sl_sched_partition(const sl_sched_t *s, const char *tenant);
/* Whether this scheduler owns partition p (always when not sharded). */
int sl_sched_owns(const sl_sched_t *s, int p);

/* Hands over every job of partition p: its lease, if any, ends with its charges kept (the call
 * may still count at the provider), and the job leaves the core and the store without a
 * result: its new owner takes it from the changelog. Inside the caller's transaction. *n (may
 * be NULL) gets how many jobs left. */
sl_err_t sl_sched_hand_over(sl_sched_t *s, int p, int64_t now_ms, int *n);

/* Calls fn for each lease in flight (a call a dispatcher may be making): its tenant, job,
 * attempt, reservation id, deployment and expiry. For the changelog's lease records at a
 * revocation (sl_sched_lease_fn: sched_types.h). */
void sl_sched_each_lease(const sl_sched_t *s, sl_sched_lease_fn fn, void *arg);

/* Takes over the lease of a job just restored from a partition gained: the job, queued, becomes
 * leased under the given attempt, reservation id and expiry on deployment, so the call its
 * previous owner made is settled by its usage event here instead of being made again. Nothing
 * is charged (the previous owner kept its charge). *adopted is 0 when the job is not a queued
 * one of a known deployment, or the lease is over: then it runs again as before. Inside the
 * caller's transaction. */
sl_err_t sl_sched_adopt_lease(sl_sched_t *s, const char *job_id, int attempt, const char *res_id,
                              const char *deployment, int64_t expires_ms, int64_t now_ms,
                              int *adopted);

/* Installs the metrics hooks (sl_sched_observer_t; copied, NULL removes them); they carry over a
 * reload. */
void sl_sched_observe(sl_sched_t *s, const sl_sched_observer_t *obs, void *arg);

#endif
