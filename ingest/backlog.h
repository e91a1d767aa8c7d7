/* backlog.h - how far the schedulers are behind on the jobs topic, as ingest sees it, so that
 * batch requests wait in their own topic instead of piling up unread on a jobs partition.
 *
 * The one idea: ingest learns the offset of every job it writes (its delivery reports), and the
 * schedulers' consumer group commits the offset of what it has stored; the difference on a
 * partition is the jobs written there and not yet taken in. Jobs are keyed by tenant, so one
 * tenant's backfill lands on one partition, and a broker that keeps a partition by size (the dev
 * broker keeps about 5 MB) drops the oldest unread jobs when a backfill gets far ahead of the
 * scheduler. Ingest holds batch requests back while the largest backlog is over a bound; the
 * requests topic, keyed by request, spreads them over all its partitions meanwhile.
 *
 * The committed offsets are asked for with the admin API (ListConsumerGroupOffsets) on the
 * producer's handle and answered on a queue of their own that sl_backlog_step polls without
 * waiting, at most one question in flight: the latency path never waits for the answer. An
 * answer older than SL_BACKLOG_STALE_MS (the broker does not answer, or refuses) counts as
 * unknown, and an unknown backlog holds nothing back: ingest then behaves as it did without
 * this, and says so in its log once.
 *
 * Single-threaded: call sl_backlog_written from the delivery report callback (which runs in
 * rd_kafka_poll on the caller's thread) and the rest from the same thread.
 */
#ifndef SL_BACKLOG_H
#define SL_BACKLOG_H

#include <librdkafka/rdkafka.h>
#include <stdint.h>

enum {
    SL_BACKLOG_REFRESH_MS = 100, /* at most one question this often */
    SL_BACKLOG_TIMEOUT_MS = 5000,
    SL_BACKLOG_STALE_MS = 10000,
    SL_BACKLOG_MAX_PARTITIONS = 4096,
};

typedef struct sl_backlog sl_backlog_t;

/* A backlog of topic as read by group, asked through rk (borrowed: it must outlive the
 * backlog). NULL when out of memory. */
sl_backlog_t *sl_backlog_new(rd_kafka_t *rk, const char *topic, const char *group);
/* Frees b (NULL is a no-op); an answer still in flight is dropped with its queue. */
void sl_backlog_free(sl_backlog_t *b);

/* Notes that a message landed at offset on partition of the topic (other topics, negative or
 * out-of-range partitions are ignored). */
void sl_backlog_written(sl_backlog_t *b, const char *topic, int32_t partition, int64_t offset);

/* Reads an answer that arrived, and asks again when none is in flight and the last question
 * is SL_BACKLOG_REFRESH_MS old. now_ms is monotonic. Never waits. */
void sl_backlog_step(sl_backlog_t *b, int64_t now_ms);

/* The largest backlog over the partitions written to, from the last answer: written and not
 * yet committed by the group (a partition the group never committed counts from its first
 * offset, 0). -1 when unknown (no answer yet, or the last is older than SL_BACKLOG_STALE_MS). */
int64_t sl_backlog_max(const sl_backlog_t *b, int64_t now_ms);

/* The pure rule, for the tests: the largest of written[p] + 1 - committed[p] over the n
 * partitions written to (written[p] >= 0), where committed[p] < 0 means none; 0 when none is
 * behind. */
int64_t sl_backlog_compute(const int64_t *written, const int64_t *committed, int n);

#endif
