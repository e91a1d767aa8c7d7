/* changelog.h - the scheduler's queued jobs kept in Kafka, so a lost database loses none.
 *
 * The SQLite file is the scheduler's working copy; the changelog topic (kafka.topics.changelog,
 * as many partitions as the jobs topic, written and read by the scheduler role only) is the copy
 * that outlives the machine. Each record carries a MAC under a key derived from the scheduler's
 * secret signing key (sign.h: sl_signer_derive, SL_CHANGELOG_MAC_CONTEXT): the scheduler is its
 * only writer and only reader, so no other role needs to check it, and a MAC costs about a
 * microsecond where a signature costs tens. A record without a valid MAC is never read.
 *
 * Records (JSON, one per message, keyed by tenant so that partition p of the changelog holds the
 * jobs of partition p of the jobs topic):
 *   {"v":1,"t":"job","seq":S,"id":"...","sub":T,"job":{...}}
 *                                                a job taken in (id, submitted_ms), its job
 *                                                message as it came; this exact shape, so a
 *                                                restore reads the header without parsing the
 *                                                message
 *   {"v":1,"t":"end","seq":S,"id":"..."}         its result was acknowledged by the broker
 *   {"v":1,"t":"begin","seq":S,"epoch":E}        a snapshot starts in this partition
 *   {"v":1,"t":"close","seq":S,"epoch":E}        every job unfinished at its begin was written
 *   {"v":1,"t":"lease","seq":S,"id":"...","att":N,"res":"...","dep":"...","exp":T}
 *                                                its call in flight as a sharded scheduler gave
 *                                                its partitions up: the next owner takes the
 *                                                lease over instead of calling again
 * seq grows in each partition (max(last + 1, wall-clock microseconds)), so a copy of an older
 * record put back into the topic is refused at restore: it cannot bring a finished job back.
 *
 * Order of things: a job's record is produced after the store commit that took it in, and the
 * jobs topic's offsets are committed only once the records of that commit are acknowledged
 * (sl_changelog_safe); an end record only after the broker acknowledged the job's result. A
 * crash in between leaves a job that runs again (its result is de-duplicated by job id), never
 * a lost one.
 *
 * Retention: a snapshot (begin, every unfinished job, close) is written at a start on a new
 * database, every scheduler.changelog_snapshot_ms, and whenever a partition received a quarter
 * of scheduler.changelog_retention_bytes since its last snapshot began, so the records a restore
 * needs stay in the newest half of what the broker keeps. A partition whose unfinished jobs alone
 * take more than half of that cannot be kept: it is reported (a warning, and the metric
 * sluice_scheduler_changelog_partitions_at_risk), and a restore there refuses to guess. A
 * restore replays each partition from the begin of its newest closed snapshot (or from its first
 * record when nothing was ever deleted), and refuses to guess when neither is there.
 */
#ifndef SL_CHANGELOG_H
#define SL_CHANGELOG_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "core.h"
#include "err.h"
#include "metrics.h"
#include "sign.h"
#include "store.h"

/* The context of the changelog's MAC key. */
#define SL_CHANGELOG_MAC_CONTEXT "sluice scheduler changelog v1"

/* ---- records ---- */

typedef enum { SL_CL_JOB = 1, SL_CL_END, SL_CL_BEGIN, SL_CL_CLOSE, SL_CL_LEASE } sl_cl_kind_t;

/* A lease (an attempt in flight) as a lease record carries it. */
typedef struct {
    int attempt;
    char res_id[33];
    char deployment[128];
    int64_t expires_ms;
} sl_cl_lease_t;

typedef struct {
    sl_cl_kind_t kind;
    int64_t seq, epoch;              /* epoch: begin and close */
    char job_id[SL_JOB_ID_MAX + 1];  /* job and end */
    char *job;                       /* job: the job message (owned; NULL otherwise) */
    size_t job_len;
    int64_t submitted_ms;            /* job: its submitted_ms (0 when it has none) */
    sl_cl_lease_t lease;             /* lease */
} sl_cl_rec_t;

/* The record's text (caller frees), *len its length; NULL when out of memory or, for a job or
 * end record, when job_id is not a job id. job is the job message and submitted_ms its
 * submission time (job records). */
char *sl_cl_encode(sl_cl_kind_t kind, int64_t seq, int64_t epoch, const char *job_id,
                   int64_t submitted_ms, const char *job, size_t job_len, size_t *len);
/* Parses a record; SL_EINVAL (rec cleared) when it is not one. Free with sl_cl_rec_clear. */
sl_err_t sl_cl_decode(const char *buf, size_t len, sl_cl_rec_t *rec);
void sl_cl_rec_clear(sl_cl_rec_t *rec);
/* A lease record's text (caller frees); NULL when a field is not what a record may carry. */
char *sl_cl_encode_lease(int64_t seq, const char *job_id, const sl_cl_lease_t *lease,
                         size_t *len);

/* ---- replay: which jobs were unfinished, from the records of every partition ---- */

typedef struct sl_cl_replay sl_cl_replay_t;

sl_cl_replay_t *sl_cl_replay_new(int nparts);
void sl_cl_replay_free(sl_cl_replay_t *r);
/* Adds the record at offset of partition part (in offset order within a partition); takes rec's
 * contents. Returns 1, or 0 when refused because its seq is not above the partition's last (a
 * replayed copy): then rec is cleared. */
int sl_cl_replay_add(sl_cl_replay_t *r, int part, int64_t offset, sl_cl_rec_t *rec);
/* Applies partition part's records once all are added: from the begin of its newest closed
 * snapshot, or from its first record when low (its first retained offset) is 0. SL_EDB (err
 * says) when neither: older records were deleted and no snapshot is whole. */
sl_err_t sl_cl_replay_apply(sl_cl_replay_t *r, int part, int64_t low, char *err, size_t errlen);
/* An unfinished job found by the replay; the strings are the replay's. */
typedef struct {
    const char *job_id, *job;
    size_t len;
    int64_t submitted_ms, first_seq;
    const sl_cl_lease_t *lease; /* its call in flight, from a lease record after its job record;
                                 * NULL: none */
} sl_cl_live_t;
/* The unfinished jobs after sl_cl_replay_apply of every partition, in the order to take them in
 * again: those with a lease to take over first, then by submission, then by their first record
 * (*out: caller frees the array, not the strings, and uses it while r lives). */
sl_err_t sl_cl_replay_sorted(const sl_cl_replay_t *r, sl_cl_live_t **out, size_t *n);
size_t sl_cl_replay_live(const sl_cl_replay_t *r);
/* The highest seq seen in partition part (0 when none), and how many records were refused. */
int64_t sl_cl_replay_last_seq(const sl_cl_replay_t *r, int part);
int64_t sl_cl_replay_refused(const sl_cl_replay_t *r);
/* How many records were accepted (0: nothing was ever written, a first start). */
int64_t sl_cl_replay_records(const sl_cl_replay_t *r);

/* ---- reading it back from Kafka ---- */

/* Reads every partition of the changelog topic from its first retained record to its end,
 * checking each record's MAC under mac_key and dropping those
 * that fail or do not parse (*refused counts them). *out (on success) holds the replay with
 * sl_cl_replay_apply done for every partition. SL_EDB when a partition cannot be restored
 * safely, SL_EKAFKA when the broker cannot be read; err says which. tail_only reads only each
 * partition's last record, for its seq (nothing is applied). */
sl_err_t sl_changelog_read(const sl_config_t *cfg, const uint8_t mac_key[SL_MAC_KEY_BYTES],
                           int tail_only,
                           sl_cl_replay_t **out, int64_t *refused, char *err, size_t errlen);

/* ---- the topic's settings ---- */

/* Whether a changelog topic with these settings (retention_ms, retention_bytes: -1 or 0 for
 * unbounded) keeps a whole snapshot under cfg's changelog_retention_bytes and
 * changelog_snapshot_ms. SL_ECONFIG (err says what to change) for a compacted topic, a
 * retention.bytes below the setting (or the setting unbounded), or a retention.ms below twice
 * the snapshot interval (or none by time). sl_changelog_open checks the broker's settings with
 * it (the dev broker's known 5 MB a partition; a broker that does not say is warned about). */
sl_err_t sl_cl_check_retention(const sl_config_t *cfg, const char *cleanup_policy,
                               int64_t retention_ms, int64_t retention_bytes, char *err,
                               size_t errlen);

/* ---- writing it ---- */

typedef struct sl_changelog sl_changelog_t;

/* A writer with a producer of its own; checks that the changelog topic has as many partitions as
 * the jobs topic and settings that keep a whole snapshot (SL_ECONFIG otherwise, err says).
 * last_seq (may be NULL) is what was read back (sl_changelog_read), so new records follow every
 * seq there even if the clock stepped back.
 * snapshot_now (a first start on a new database), or a changelog with no records read back,
 * starts with a whole snapshot. */
sl_err_t sl_changelog_open(const sl_config_t *cfg, const uint8_t mac_key[SL_MAC_KEY_BYTES],
                           const sl_cl_replay_t *last_seq, int snapshot_now,
                           sl_changelog_t **out, char *err, size_t errlen);
/* A scheduler shard (scheduler/shard.h) writes only to the partitions it owns (owned: nparts
 * entries, copied; NULL: all, as at open). A change of ownership drops the snapshot under way
 * (its begin stays without a close, which a restore passes over) and makes a new one due;
 * job and end records of a partition not owned are not written (counted in not_owned: a
 * result acknowledged after its partition moved; the new owner has the job from the
 * changelog and finishes it again). */
void sl_changelog_set_owned(sl_changelog_t *cl, const uint8_t *owned);
/* Records follow every seq of r (a replay of partitions just taken over). */
void sl_changelog_adopt(sl_changelog_t *cl, const sl_cl_replay_t *r);
/* sl_changelog_read of the partitions p with only[p] != 0 (the writer's partition count of
 * entries), under the writer's own MAC key: a scheduler shard takes partitions over while it
 * runs. */
sl_err_t sl_changelog_read_partitions(const sl_changelog_t *cl, const sl_config_t *cfg,
                                      const uint8_t *only, sl_cl_replay_t **out,
                                      int64_t *refused, char *err, size_t errlen);

/* Flushes what is in flight (at most timeout_ms) and frees it; NULL is a no-op. */
void sl_changelog_close(sl_changelog_t *cl, int timeout_ms);

/* A job taken in by store commit number commit (its id, submission time and message as it came,
 * keyed by tenant): the jobs topic's offsets of that commit wait for this record
 * (sl_changelog_safe). */
void sl_changelog_job(sl_changelog_t *cl, const char *tenant, const char *job_id,
                      int64_t submitted_ms, const char *job, size_t len, int64_t commit);
/* A job's result was acknowledged: its end record. The tenant is read from the store. */
void sl_changelog_end(sl_changelog_t *cl, sl_store_t *store, const char *job_id);
/* A job's call in flight, as its partition is given up (a sharded scheduler's revocation): the
 * next owner takes the lease over (sl_sched_adopt_lease) instead of calling again. Nothing for
 * a tenant whose partition is not owned, or a lease a record cannot carry. */
void sl_changelog_lease(sl_changelog_t *cl, const char *tenant, const char *job_id,
                        const sl_cl_lease_t *lease);
/* Starts a snapshot when one is due, and writes the next page of a snapshot under way. Call once
 * a loop turn, outside a transaction. */
sl_err_t sl_changelog_step(sl_changelog_t *cl, sl_store_t *store);
/* While a restore takes jobs in again, no snapshot may start: one closed before the last of
 * them is stored would leave them out, and a later restore from it would not see their records
 * (written before its begin). sl_changelog_hold_snapshots holds them; sl_changelog_snapshot_soon
 * lets them go and makes a whole one due. */
void sl_changelog_hold_snapshots(sl_changelog_t *cl);
void sl_changelog_snapshot_soon(sl_changelog_t *cl);
/* Serves delivery reports. */
void sl_changelog_poll(sl_changelog_t *cl);
/* Waits up to timeout_ms for every record in flight to be delivered (a clean stop). */
void sl_changelog_flush(sl_changelog_t *cl, int timeout_ms);
/* The highest store commit number, at most committed, whose job records are all acknowledged. */
int64_t sl_changelog_safe(const sl_changelog_t *cl, int64_t committed);
/* Whether a record could not be delivered (the broker refused it, or it timed out): the caller
 * stops without committing more offsets. */
int sl_changelog_failed(const sl_changelog_t *cl);

/* What sl_changelog_export reports. */
typedef struct {
    int64_t records, bytes, snapshots, snapshot_jobs, in_flight, not_owned;
    int64_t at_risk; /* partitions whose snapshot takes over half of what the broker keeps */
} sl_changelog_stats_t;
/* Registers the sluice_scheduler_changelog_* families on m; -1 when it cannot. */
int sl_changelog_metrics(sl_changelog_t *cl, sl_metrics_t *m);
/* Brings them up to date (call about once a second). */
void sl_changelog_export(sl_changelog_t *cl);

#endif
