/* intake.h - a consumer's input, taken a slice per partition at a time (the scheduler's
 * sluice.jobs and sluice.usage, ingest's requests topics).
 *
 * The one idea: every assigned partition has its own queue,
 * and one take hands out at most `slice` messages of each queue, round-robin, and at most `cap`
 * in all. A partition holding a flood then delays the messages of another partition by at most
 * one slice per loop iteration, and the scheduler ticks between takes instead of after the
 * whole flood. The partitions of a topic marked "later" (ingest's batch requests topic) are
 * taken only with the room the others leave in each take, so a flood there never delays a
 * message of the other topics by more than one take. Within a partition the order stays the
 * partition's order, so the offsets the consumer stores (and commits after the SQLite transaction)
 * stay correct.
 *
 * The round-robin works on opaque sources through a take function, so it is tested without
 * Kafka; sl_intake_rebalance and sl_intake_attach tie it to a librdkafka consumer: each assigned
 * partition's queue (sl_kafka_partition_queue) becomes a source before librdkafka fetches it,
 * and a revoked partition's queue is dropped. Single-threaded: the rebalance callback runs
 * inside rd_kafka_consumer_poll on the caller's thread.
 */
#ifndef SL_INTAKE_H
#define SL_INTAKE_H

#include <librdkafka/rdkafka.h>
#include <stdint.h>

#include "err.h"

typedef struct sl_intake sl_intake_t;

/* Takes the next item of src without waiting; NULL when src has none now. */
typedef void *(*sl_intake_take_fn)(void *src);
/* Drops the intake's reference to src (when it is removed or the intake is cleared). */
typedef void (*sl_intake_release_fn)(void *src);
/* How many items src holds now (0 when unknown); used only to decide whether to wait. */
typedef int (*sl_intake_pending_fn)(void *src);

typedef struct {
    int slice; /* at most this many items of one source per take (>= 1) */
    int cap;   /* at most this many items per take in all (>= 1) */
    sl_intake_take_fn take;
    sl_intake_release_fn release; /* may be NULL */
    sl_intake_pending_fn pending; /* may be NULL */
} sl_intake_opts_t;

/* A new intake with no sources. SL_EINVAL for a bad slice or cap, SL_ENOMEM. */
sl_err_t sl_intake_new(const sl_intake_opts_t *opts, sl_intake_t **out);

/* Marks topic as taken later: its sources get only what room the other sources leave in each
 * take, and at most cap items of them per take (so the take after is never far behind a
 * message of the other topics). Call before its sources are added (a source keeps the tier it
 * was added with). The smallest cap given applies to every later topic. SL_ENOMEM, SL_EINVAL
 * for cap < 1 or when four topics are already marked. */
sl_err_t sl_intake_later(sl_intake_t *in, const char *topic, int cap);

/* Pauses (paused = 1) or resumes the sources of "later" topics: while paused, a take hands out
 * none of their items and sl_intake_wait does not count what they hold, so a caller that holds
 * its batch input back (its outputs unacknowledged, its share of the time spent) still takes
 * the other topics at once and sleeps when only batch input waits. */
void sl_intake_pause_later(sl_intake_t *in, int paused);

/* Releases every source and frees in (NULL is a no-op). */
void sl_intake_free(sl_intake_t *in);

/* Adds src as the source of (topic, partition); a source already there for it is released and
 * replaced. SL_ENOMEM leaves in unchanged (src is not released). */
sl_err_t sl_intake_add(sl_intake_t *in, const char *topic, int32_t partition, void *src);

/* Removes and releases the source of (topic, partition); SL_ENOTFOUND when there is none. */
sl_err_t sl_intake_remove(sl_intake_t *in, const char *topic, int32_t partition);

/* Releases every source (the intake stays usable). */
void sl_intake_clear(sl_intake_t *in);

int sl_intake_sources(const sl_intake_t *in);

/* Fills out[0..) with up to min(cap, max) items: one pass over the sources, up to slice from
 * each, starting where the previous take left off (the source the cap cut short, else the one
 * after the previous start), so under the cap every source gets its turn; then, with what room
 * is left, the same over the sources of "later" topics. Returns how many. */
int sl_intake_take(sl_intake_t *in, void **out, int max);

/* ---- on a librdkafka consumer ---- */

/* librdkafka properties for a consumer read through an intake: the read-ahead limits apply per
 * partition queue, not to one shared queue (see intake.c). */
extern const char *const sl_intake_consumer_props[];

/* Options for Kafka partition queues: take with rd_kafka_consume_queue (no wait), release with
 * rd_kafka_queue_destroy, pending by rd_kafka_queue_length. */
sl_intake_opts_t sl_intake_kafka_opts(int slice, int cap);

/* The consumer's rebalance callback (sl_kafka_consumer_new_rebalance, opaque = the intake):
 * on assignment it makes each partition's queue a source first and then assigns, so no message
 * of it goes to the consumer queue; on revocation it unassigns and drops those sources. */
void sl_intake_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque);

/* Wakes sl_intake_wait when cons's own queue (rebalances, errors) gets an event. Call once
 * after creating the consumer; SL_EKAFKA when its queue cannot be had. */
sl_err_t sl_intake_attach(sl_intake_t *in, rd_kafka_t *cons);

/* Waits up to timeout_ms until a source or the consumer queue holds something (at once when
 * one already does). */
void sl_intake_wait(sl_intake_t *in, int timeout_ms);

/* Drops every queue reference (partition queues and the consumer's): call before closing the
 * consumer, as librdkafka requires. The rebalance callback can still run afterwards. */
void sl_intake_detach(sl_intake_t *in);

#endif
