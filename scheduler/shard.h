/* shard.h - one scheduler among several: the partitions it owns, and its share of the limits
 * every shard shares.
 *
 * Several schedulers split the jobs topic's partitions between them (a Kafka consumer group);
 * a tenant's jobs, usage events and changelog records are keyed by tenant, so all of a tenant
 * lives in one partition, and that partition's owner alone schedules it. Buckets of one
 * tenant (its own limits, its keys', its app/env's) therefore belong to that owner whole.
 * Every other bucket (a deployment's limits and its parents', a scope several tenants share)
 * is shared: each shard admits within its share of it, the partitions it owns over all of
 * them, so the shares of all shards never add up to more than the limit.
 *
 * A smaller share applies at once. A larger one applies only when what the partitions' last
 * owner may have admitted under it has left the window the limit counts (a per-minute limit's
 * minute, a calendar quota's reset, a rolling window, the longest lease for calls in flight):
 * until then the old owner's use could still be counted by the provider. Each bucket's share
 * is kept in the store, so a restart on the same database starts from the share its counts were
 * made under; a new database starts from none.
 *
 * A scheduler that is not sharded (static membership: it reads every partition) owns them all
 * and never changes its share, as before. The functions main calls are in sched.h
 * (sl_sched_shard, sl_sched_set_owned, sl_sched_hand_over, ...); these are the core's own.
 */
#ifndef SL_SHARD_H
#define SL_SHARD_H

#include <stdint.h>

#include "core.h"

/* Applies the larger shares that are due; inside the loop's transaction (it stores them). */
sl_err_t sl_shard_tick(sl_sched_t *s, int64_t now_ms);

/* The spec of bucket b as this shard enforces it: the configured one, scaled by its share when
 * the bucket is shared. */
sl_bucket_spec_t sl_shard_spec(const sl_sched_t *s, int b, const sl_bucket_spec_t *whole);

/* What was carried from old into fresh at a reload (ownership and shares, by bucket id). */
sl_err_t sl_shard_carry(sl_sched_t *fresh, const sl_sched_t *old, int64_t now_ms);

/* The partitions owned (1 when not sharded: the one "partition" of everything). */
int sl_shard_owned_count(const sl_sched_t *s);

/* The share of the shared buckets that the partitions owned give (owned / all; 1 when not
 * sharded), whether or not it applies yet. */
double sl_shard_target(const sl_sched_t *s);

#endif
