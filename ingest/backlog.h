/* backlog.h - how far the schedulers are behind on a jobs topic (the batch jobs topic), as ingest
 * sees it, so that batch requests wait in their own topic instead of piling up unread on a jobs
 * partition.
 *
 * The one idea: ingest learns the offset of every job it writes (its delivery reports), and the
 * schedulers' consumer group commits the offset of what it has stored; the difference on a
 * partition is the jobs written there and not yet taken in. The jobs still in the producer's
 * queue count too: they are ahead of the next job in line as surely as the unread ones. Jobs are
 * keyed by tenant, so one tenant's backfill lands on one partition, and a broker that keeps a
 * partition by size (the dev broker keeps about 5 MB) drops the oldest unread jobs when a backfill
 * gets far ahead of the scheduler. Ingest holds batch requests back while the largest backlog, in
 * bytes of the jobs it wrote, is over a bound; the requests topic, keyed by request, spreads them
 * over all its partitions meanwhile. Each ingest counts what it wrote itself, so N ingest processes
 * may leave N times the bound unread on a partition.
 *
 * The committed offsets are asked for with the admin API (ListConsumerGroupOffsets) on the
 * producer's handle and answered on a queue of their own that sl_backlog_step polls without
 * waiting, at most one question in flight: the latency path never waits for the answer. An
 * answer older than SL_BACKLOG_STALE_MS (the broker does not answer, or refuses) counts as
 * unknown, and an unknown backlog holds nothing back: ingest then behaves as it did without
 * this, and says so in its log once.
 *
 * Single-threaded: call sl_backlog_landed from the delivery report callback (which runs in
 * rd_kafka_poll on the caller's thread) and the rest from the same thread.
 */
#ifndef SL_BACKLOG_H
#define SL_BACKLOG_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

enum {
    SL_BACKLOG_REFRESH_MS = 100, /* at most one question this often */
    SL_BACKLOG_TIMEOUT_MS = 5000,
    SL_BACKLOG_STALE_MS = 10000,
    SL_BACKLOG_MAX_PARTITIONS = 4096,
    /* Jobs remembered per partition (12 bytes each): 2 MiB of jobs of 128 bytes. Past it the
     * oldest are counted until a commit passes the last of them (holding back longer, never
     * less). */
    SL_BACKLOG_RING_MAX = 16384,
};

typedef struct sl_backlog sl_backlog_t;

/* A backlog of topic as read by group, asked through rk (borrowed: it must outlive the
 * backlog; NULL in the tests, which then answer with sl_backlog_answer). NULL when out of
 * memory. */
sl_backlog_t *sl_backlog_new(rd_kafka_t *rk, const char *topic, const char *group);
/* Frees b (NULL is a no-op); an answer still in flight is dropped with its queue. */
void sl_backlog_free(sl_backlog_t *b);

/* Notes that a message of `bytes` (its value) was handed to the producer for topic (other
 * topics are ignored): it counts as behind from now, on whatever partition it lands. */
void sl_backlog_sent(sl_backlog_t *b, const char *topic, size_t bytes);

/* Notes the delivery report of a message sent: it landed (ok) at offset on partition, or
 * failed (not ok; it is sent again, and told again, or given up). Negative or out-of-range
 * partitions and offsets count as landed nowhere. */
void sl_backlog_landed(sl_backlog_t *b, const char *topic, int32_t partition, int64_t offset,
                       size_t bytes, int ok);

/* Reads an answer that arrived, and asks again when none is in flight and the last question
 * is SL_BACKLOG_REFRESH_MS old. now_ms is monotonic. Never waits. */
void sl_backlog_step(sl_backlog_t *b, int64_t now_ms);

/* The largest backlog in bytes over the partitions written to, from the last answer: the
 * bytes of the jobs this ingest wrote and the group has not committed (a partition the group
 * never committed counts all of them), plus the bytes of every job still on its way to the
 * broker (their partition is not known yet). 0 when there are none; -1 when some landed
 * unread and no answer is known (none yet, or the last is older than SL_BACKLOG_STALE_MS). */
int64_t sl_backlog_max(const sl_backlog_t *b, int64_t now_ms);

/* Whether batch requests wait (stepping b first): while its backlog is known and over max
 * bytes. Never for a NULL b (no backlog kept) or a max of 0 (the bound off; a reload of the
 * config may set it so). */
int sl_backlog_holds(sl_backlog_t *b, int64_t max, int64_t now_ms);

/* Applies an answer (what sl_backlog_step does with the broker's): committed[p] is the group's
 * committed offset of partition p, -1 none, for p < n. Exposed for the tests. */
void sl_backlog_answer(sl_backlog_t *b, const int64_t *committed, int n, int64_t now_ms);

#endif
