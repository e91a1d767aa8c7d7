/* store.h - the scheduler's durable state in SQLite (WAL): jobs, reservations and their charges,
 * bucket levels, the results outbox and estimate statistics. The SQL schema lives in
 * schema/ledger.sql.
 *
 * Callers group changes in transactions (sl_store_begin/commit); Kafka offsets are committed
 * only after the transaction that made their effects durable. A commit is on disk when it
 * returns (synchronous=FULL), and before offsets are committed the scheduler checks that the
 * file it wrote is still the one at the path (sl_store_check). One scheduler owns a database
 * file: sl_store_open takes an exclusive lock on it. A store is used by one thread at a time
 * (its connection is opened without SQLite's mutexes).
 *
 * The files (the database, its -wal and -shm) are created mode 0600: they hold every tenant's
 * prompts and answers.
 */
#ifndef SL_STORE_H
#define SL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct sl_store sl_store_t;

/* The PRAGMA user_version that schema/ledger.sql sets, and the oldest version sl_store_open
 * migrates from (store.c lists the migrations). */
#define SL_STORE_SCHEMA_VERSION 4
#define SL_STORE_SCHEMA_OLDEST 2

/* The scheduler's exit status when its store cannot be trusted: sl_store_open refused the
 * file (SL_EDB), or the store met a fault (sl_store_fault). A supervisor can tell it from a
 * crash (1) and a bad config (2), and should not restart the scheduler in a loop: the log says
 * what happened and what to do. */
#define SL_STORE_EXIT_STATUS 3

/* Opens (creating if needed) the database at db_path and applies the SQL schema file.
 * *out set only on success; on failure err says why. Before using an existing file it checks
 * that it is a SQLite database whose header and pages are sound (PRAGMA quick_check) and that
 * it is a sluice database; it makes the files mode 0600 (with a warning when they were open to
 * others); and it migrates an older schema (SL_STORE_SCHEMA_OLDEST and later) in one
 * transaction. Fails with SL_EBUSY when another scheduler holds the file; with SL_EDB when the
 * file cannot be used: corrupted or not a sluice database, a schema newer than this binary (or
 * older than any migration), a failed migration (the file is left as it was), or a file that
 * cannot be opened or written; other codes for the schema file, the lock, or a path that cannot
 * be read or created (SL_EIO: a missing directory, permissions). */
sl_err_t sl_store_open(const char *db_path, const char *sql_path, sl_store_t **out, char *err,
                       size_t errlen);
/* Closes the store. After a SL_STORE_FAULT_MOVED fault the connection closes without writing
 * to the files at the path (no checkpoint, no removal of the -wal). */
void sl_store_close(sl_store_t *s);

/* Whether the WAL is checkpointed by the store's own thread (else by SQLite at commit). */
int sl_store_checkpointing(const sl_store_t *s);

/* Durability (store.c, the checkpointer). Commits are numbered from 1; sl_store_durable_seq is
 * the number of the last one known to be on disk. With the store's checkpointer the writer
 * commits with synchronous=NORMAL and a commit is durable once a checkpoint after it ran
 * (within about 50 ms); without it (its thread could not start) every commit is synced
 * (synchronous=FULL) and durable when it returns. Input whose offsets are committed to Kafka
 * must be in a durable commit. sl_store_sync makes every commit so far durable now (a FULL
 * checkpoint on the caller's thread), for a clean stop. */
int64_t sl_store_committed_seq(const sl_store_t *s);
int64_t sl_store_durable_seq(const sl_store_t *s);
sl_err_t sl_store_sync(sl_store_t *s);

/* Bytes of heap SQLite holds in this process: the page caches of the writer (at most the
 * schema's cache_size, 16 MiB) and of the checkpointer, and the prepared statements. Pages read
 * through the memory map are not in it (they count as file-backed memory). */
int64_t sl_store_memory_bytes(void);

/* Lets go of the pages read through the memory map (they stay in the kernel's page cache, but
 * leave this process's RSS): after reading every unfinished job at a start, which maps up to
 * the schema's mmap_size of the file. The map is made again as rows are read. */
void sl_store_release_map(sl_store_t *s);

/* What went wrong with the store's files, if anything. */
typedef enum {
    SL_STORE_FAULT_NONE = 0,
    SL_STORE_FAULT_MOVED,   /* the database, its -wal or the lock file was deleted or replaced */
    SL_STORE_FAULT_FULL,    /* the file could not grow: disk full, a quota, a size limit */
    SL_STORE_FAULT_IO,      /* a read or write of the file failed */
    SL_STORE_FAULT_CORRUPT, /* SQLite found the file corrupted */
} sl_store_fault_t;

/* The first fault this store met (it stays), and *text (may be NULL) what to tell the operator:
 * what happened, that the failed transaction's offsets were not committed, and what to do
 * ("" when none; valid until sl_store_close). Faults are noted where SQLite returns them
 * (SQLITE_FULL, SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_NOTADB) and by sl_store_check. */
sl_store_fault_t sl_store_fault(const sl_store_t *s, const char **text);

/* Whether the files at the database's path are still the ones this store writes: the database
 * (same device and inode as the file SQLite has open), its -wal and the lock file. A commit into
 * a deleted or replaced file is lost at the next start, so the scheduler calls this between
 * every store commit and the Kafka offset commit that follows it, and at least every second.
 * SL_OK when they are. Otherwise SL_EDB and the fault SL_STORE_FAULT_MOVED, after the store
 * saved its last committed state where the next start finds it, when it can: a deleted
 * database is written back at its path (a copy, 0600, synced); a replaced one is saved next to
 * it as <db>.rescued-<ms> and the replacement left alone; a deleted -wal is checkpointed into
 * the database. The fault's text says which, and where. The store must then not be used for
 * more work. SL_EDB also when an earlier fault is noted. Costs a few stat() calls. */
sl_err_t sl_store_check(sl_store_t *s);

/* The connection's PRAGMA synchronous: 2 (FULL) or 3 (EXTRA) make a commit durable when it
 * returns, 1 (NORMAL) loses the last commits on a power loss; -1 on error. The schema file sets
 * it; sl_store_open warns when it is below FULL. */
int sl_store_synchronous(sl_store_t *s);

sl_err_t sl_store_begin(sl_store_t *s);
sl_err_t sl_store_commit(sl_store_t *s);
void sl_store_rollback(sl_store_t *s);
/* Whether the database was created by this open (no earlier state to distrust). */
int sl_store_is_new(const sl_store_t *s);

typedef struct {
    const char *job_id, *idempotency_key, *tenant, *app, *env, *key_id, *route, *cls;
    int64_t submitted_ms, deadline_ms, est_input, est_output, est_total;
    const char *job_json;
    const char *request_json;  /* the request body alone (may be NULL: read from job_json) */
    const char *metadata_json; /* NULL when the job has none */
} sl_store_job_t;

/* Inserts a new queued job. When the job id exists: SL_EEXISTS, and if that job is finished,
 * *result_json (caller frees) holds its result so it can be sent again; else NULL. */
sl_err_t sl_store_job_insert(sl_store_t *s, const sl_store_job_t *job, int64_t now_ms,
                             char **result_json);
/* The result of a finished job (caller frees); SL_ENOTFOUND when the job is unknown or not
 * finished. */
sl_err_t sl_store_job_result(sl_store_t *s, const char *job_id, char **result_json);
/* The stored job message (caller frees). */
sl_err_t sl_store_job_json(sl_store_t *s, const char *job_id, char **json);
/* A note of the store's own (the meta table): its value into value (cap bytes), SL_ENOTFOUND
 * when there is none. sl_store_meta_put sets it, or deletes it when value is NULL; inside the
 * caller's transaction, or in one of its own. */
sl_err_t sl_store_meta_get(sl_store_t *s, const char *key, char *value, size_t cap);
sl_err_t sl_store_meta_put(sl_store_t *s, const char *key, const char *value);
/* The job's tenant into tenant (cap bytes); SL_ENOTFOUND when the job is not stored. */
sl_err_t sl_store_job_tenant(sl_store_t *s, const char *job_id, char *tenant, size_t cap);
/* Calls fn for at most limit jobs whose rowid is above after_rowid, in rowid order, with their
 * id, tenant, submission time and stored job message (valid during the call): those unfinished
 * (queued or leased) and those finished whose result is still in the outbox (not yet acknowledged
 * by the broker); *n gets how many. Paging by rowid lets a caller walk them a page per loop turn
 * while jobs come and go (the changelog's snapshot, where a finished job ends only once its result
 * is out). */
typedef struct {
    int64_t rowid, submitted_ms;
    const char *job_id, *tenant, *job_json;
    size_t len; /* of job_json */
} sl_store_page_row_t;
sl_err_t sl_store_unfinished_page(sl_store_t *s, int64_t after_rowid, int limit,
                                  void (*fn)(const sl_store_page_row_t *row, void *arg), void *arg,
                                  int *n);
/* The job's request body and metadata as stored (caller frees both; either comes back NULL
 * when absent). Pass NULL for a part that is not wanted. */
sl_err_t sl_store_job_parts(sl_store_t *s, const char *job_id, char **request_json,
                            char **metadata_json);
sl_err_t sl_store_job_lease(sl_store_t *s, const char *job_id, int attempts,
                            int64_t lease_expires_ms, const char *reservation_id,
                            const char *deployment, int64_t now_ms);
sl_err_t sl_store_job_requeue(sl_store_t *s, const char *job_id, int attempts,
                              int64_t not_before_ms, int64_t now_ms);
/* Marks the job done with status and result, and queues the result in the outbox; *seq gets the
 * outbox row. */
sl_err_t sl_store_job_finish(sl_store_t *s, const char *job_id, const char *status,
                             const char *result_json, const char *topic, int64_t now_ms,
                             int64_t *seq);

/* Deletes a finished job's row, so that the same job id may be submitted again (a job refused
 * because its queue was full is not remembered: the client is told to retry). Its result stays
 * in the outbox until delivered. */
sl_err_t sl_store_job_forget(sl_store_t *s, const char *job_id);
/* Deletes an unfinished job's row: another scheduler took its partition over (shard.h). */
sl_err_t sl_store_job_hand_over(sl_store_t *s, const char *job_id);

typedef struct {
    const char *job_id, *tenant, *route, *cls, *state, *reservation_id, *deployment;
    const char *idempotency_key, *key_id;
    int attempts;
    int64_t submitted_ms, deadline_ms, not_before_ms, est_input, est_output, est_total;
    int64_t lease_expires_ms;
    int64_t job_bytes; /* the stored job message's length in bytes */
} sl_store_row_t;

/* Calls fn for each job not yet done (queued or leased), oldest first. */
sl_err_t sl_store_each_unfinished(sl_store_t *s, void (*fn)(const sl_store_row_t *row, void *arg),
                                  void *arg);

/* One attempt of one job. reservation_id begins with created_ms as 12 lowercase hex digits
 * ("%012llx" of created_ms & 0xffffffffffff; the scheduler adds a counter and random digits),
 * so ids sort by creation time. tenant, route, cls, idempotency_key and queue_deadline_ms are
 * the job's own: they are not stored again (the job's row has them). */
typedef struct {
    const char *reservation_id, *job_id, *tenant, *route, *cls, *deployment, *idempotency_key;
    int attempt;
    int64_t est_input, est_output, created_ms, expires_ms, queue_deadline_ms;
} sl_store_res_t;

/* Records an open reservation with its charges (bucket id, amount and rule each) in one row.
 * ncharges is 0..16 (0: nothing on the job's path is limited). SL_EINVAL when the id does not
 * begin with its created_ms as above; SL_EDB when the id exists. Outside a transaction it runs
 * in one of its own. */
sl_err_t sl_store_res_open(sl_store_t *s, const sl_store_res_t *res, int ncharges,
                           const char *const *bucket_ids, const double *amounts,
                           const char *const *rules);
/* Closes an open reservation as "reconciled" or "expired" with the real usage (-1 = unknown)
 * and, when settled is not NULL, what each charge was settled at (nsettled values in the order
 * the charges were opened; NAN = not settled). A closed reservation is left as it is. Outside a
 * transaction it runs in one of its own. */
sl_err_t sl_store_res_close(sl_store_t *s, const char *reservation_id, const char *state,
                            int64_t input, int64_t output, int64_t cached, const char *outcome,
                            int64_t now_ms, const double *settled, int nsettled);
/* Whether a reservation of this id is stored (open or closed). */
sl_err_t sl_store_res_exists(sl_store_t *s, const char *reservation_id, int *exists);
/* Opens again a closed reservation, with a new expiry (a call in flight this shard had leased,
 * handed over with its partition, comes back with it): *reopened is 0 when there is no such
 * closed row. Its charges stay as they were recorded. Inside the caller's transaction. */
sl_err_t sl_store_res_reopen(sl_store_t *s, const char *reservation_id, int64_t expires_ms,
                             int *reopened);
/* Calls fn for each charge of a reservation, in the order they were opened. */
sl_err_t sl_store_res_charges(sl_store_t *s, const char *reservation_id,
                              void (*fn)(const char *bucket_id, double amount, const char *rule,
                                         void *arg),
                              void *arg);

/* Deletes at most max_rows closed reservations (reconciled or expired) created before
 * before_ms, oldest first, and sets *deleted (may be NULL) to how many it deleted. Open
 * reservations, and any a leased job still names, are never deleted. What it reads is bounded
 * too: the oldest part of the time-sorted ids, up to max_rows closed rows. For the restart
 * replay's horizon see restore.h (sl_restore_prune). Outside a transaction it runs in one of
 * its own. */
sl_err_t sl_store_res_prune(sl_store_t *s, int64_t before_ms, int max_rows, int *deleted);

/* Calls fn for every charge of every reservation created at or after since_ms (any state),
 * oldest first: the bucket id, the amount as settled when the reservation was settled (the
 * "settled" array value, when not null), else the amount charged, and the reservation's
 * created_ms. Used after a restart to replay what was admitted after a bucket's last save.
 * Reads only the reservations since since_ms (a range of the time-sorted ids). The strings
 * passed to fn live until fn returns. SL_EDB when a row cannot be read (the others are still
 * replayed). */
sl_err_t sl_store_res_each_since(sl_store_t *s, int64_t since_ms,
                                 void (*fn)(const char *bucket_id, double amount,
                                            int64_t created_ms, void *arg),
                                 void *arg);

/* One bucket's durable state. state is opaque text (JSON) with the algorithm's window counters;
 * NULL when the algorithm keeps none. */
typedef struct {
    const char *bucket_id, *scope, *dimension, *algorithm, *unit, *source;
    double capacity, rate_per_min, level;
    int64_t updated_ms;
    const char *state;
} sl_store_bucket_t;

/* Inserts or replaces the bucket's row (every column, state included). SL_EINVAL when one of
 * the strings other than state is NULL. */
sl_err_t sl_store_bucket_put(sl_store_t *s, const sl_store_bucket_t *b);
/* Reads a bucket's saved level, time and state (*state: caller frees; NULL when none; pass
 * state = NULL when it is not wanted). SL_ENOTFOUND when the bucket was never saved; the outputs
 * are assigned only on success (*state is NULL on entry). */
sl_err_t sl_store_bucket_get(sl_store_t *s, const char *bucket_id, double *level,
                             int64_t *updated_ms, char **state);

/* The results outbox's rows: add (*seq gets the row, may be NULL), delete (no error when
 * absent), each (oldest first; strings live until fn returns). outbox.c owns the outbox and is
 * their one user in the scheduler (outbox.h). */
sl_err_t sl_store_outbox_add(sl_store_t *s, const char *topic, const char *key, const char *value,
                             int64_t now_ms, int64_t *seq);
sl_err_t sl_store_outbox_delete(sl_store_t *s, int64_t seq);
sl_err_t sl_store_outbox_each(sl_store_t *s,
                              void (*fn)(int64_t seq, const char *topic, const char *key,
                                         const char *value, void *arg),
                              void *arg);

sl_err_t sl_store_estimate_record(sl_store_t *s, const char *route, const char *cls,
                                  const char *deployment, int64_t est_input, int64_t real_input,
                                  int64_t est_output, int64_t real_output);

/* Counts of jobs by state ("queued", "leased", "done") and open reservations (the latter kept
 * as a counter, including this transaction's changes: no table scan); -1 on error. */
int64_t sl_store_count_jobs(sl_store_t *s, const char *state);
int64_t sl_store_count_open_reservations(sl_store_t *s);

/* Run-time changes from the admin API (schema/ledger.sql, table overrides): put replaces,
 * del removes (no error when absent), each calls fn for every row (strings live until fn
 * returns). */
sl_err_t sl_store_override_put(sl_store_t *s, const char *target, const char *field, double value,
                               int64_t now_ms);
sl_err_t sl_store_override_del(sl_store_t *s, const char *target, const char *field);
sl_err_t sl_store_override_each(sl_store_t *s,
                                void (*fn)(const char *target, const char *field, double value,
                                           void *arg),
                                void *arg);

/* A job's row as the admin API shows it; strings owned (free with sl_store_job_info_free);
 * status, deployment and result_json may be NULL. */
typedef struct {
    char *tenant, *route, *cls, *state, *status, *deployment, *result_json;
    int attempts;
    int64_t submitted_ms, deadline_ms;
} sl_store_job_info_t;

/* SL_ENOTFOUND when the job is not in the store. */
/* ---- provider batches (table pbatches, scheduler/pbatch.c) ---- */

typedef struct {
    const char *batch_id, *deployment, *tenant, *state, *provider_id;
    int64_t created_ms, updated_ms;
    const char *jobs; /* JSON array of [job id, reservation id] pairs, in the order sent */
} sl_store_pbatch_t;

/* Writes the row (inserted or replaced) in the caller's transaction. */
sl_err_t sl_store_pbatch_put(sl_store_t *s, const sl_store_pbatch_t *b);
/* Updates the state and provider id of a row. */
sl_err_t sl_store_pbatch_state(sl_store_t *s, const char *batch_id, const char *state,
                               const char *provider_id, int64_t now_ms);
sl_err_t sl_store_pbatch_del(sl_store_t *s, const char *batch_id);
/* Calls fn for every row (strings borrowed for the call), oldest first. */
sl_err_t sl_store_pbatch_each(sl_store_t *s, void (*fn)(const sl_store_pbatch_t *b, void *arg),
                              void *arg);

sl_err_t sl_store_job_lookup(sl_store_t *s, const char *job_id, sl_store_job_info_t *info);
void sl_store_job_info_free(sl_store_job_info_t *info);

#endif
