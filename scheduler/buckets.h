/* buckets.h - the config's limits as ledger buckets, and the paths of buckets a job crosses.
 *
 * Every limit of a deployment, tenant, key, app/env or parent scope is one ledger bucket named
 * "<scope>:<limit>" (e.g. "deployment:sim-a:tpm"), built once per config. A job's path is its
 * callers' side (key, app/env, tenant and their parents) and the provider side of the
 * deployment it goes to (its own limits and its parents'), narrowest scope first; an
 * admission reserves on every bucket of both at once. Internal to the scheduler (core.h).
 */
#ifndef SL_BUCKETS_H
#define SL_BUCKETS_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"

/* The ledger spec of a configured limit. Per-minute provider limits are planned at headroom x
 * the limit; a token bucket's burst is the provider's slice (limit / slices), part of which is
 * kept unused (burst_fraction) for the jitter between our decision and the provider's receipt.
 * On the provider side (provider_side) a token bucket also has a guard: what it admitted in any
 * trailing period plus the stale-dispatch cutoff stays within the published limit, so no
 * trailing period the provider counts can pass it, whatever requests above the burst let
 * through into debt; and full_hold_ms for requests that need the whole burst. */
sl_bucket_spec_t sl_buckets_spec(const sl_limit_cfg_t *lc, int provider_side);

/* Bucket b's spec for its whole limit (the config's, or a run-time one), before a shard's share
 * (shard.h) scales it. */
sl_bucket_spec_t sl_buckets_spec_whole(const sl_sched_t *s, int b);

/* Builds every bucket of the config and each deployment's, tenant's and key's path. */
sl_err_t sl_buckets_build(sl_sched_t *s, int64_t now_ms, char *err, size_t errlen);

/* Whether a bucket is a quota: a count that only comes back at a reset (daily requests or
 * tokens, spend), so waiting for it past a job's deadline is pointless, and its
 * counters are restored exactly after a restart. */
int sl_buckets_is_quota(const sl_sched_t *s, int b);

/* "<scope>:<name>" -> scope and name (the part after the last colon). */
void sl_buckets_split_id(const char *id, char *scope, size_t cap, const char **name);

/* Writes the buckets that changed since the last save: level (token buckets) and counters. */
sl_err_t sl_buckets_save(sl_sched_t *s, int64_t now_ms, int all);

/* The callers' side of j's path: its key's (with app/env and tenant), or its tenant's when the
 * config no longer knows the key. */
const path_t *sl_buckets_caller_path(const sl_sched_t *s, const job_t *j);

#endif
