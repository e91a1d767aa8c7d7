/* store_int.h - what the parts of the scheduler's store share (store.h is its interface).
 *
 * The store is one SQLite connection and the files at its path, in four files, one concept each:
 *   store.c         the connection's life, its statements, and the rows (jobs, reservations,
 *                   buckets, outbox, overrides);
 *   store_file.c    the files at the path: their identity, the checks before and while they are
 *                   used, modes, faults, and saving what was committed when they go away;
 *   store_schema.c  schema versions: the checks and the migrations;
 *   store_ckpt.c    the checkpointer thread, which makes commits durable.
 */
#ifndef SL_STORE_INT_H
#define SL_STORE_INT_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "store.h"

enum {
    Q_JOB_INSERT,
    Q_JOB_EXISTING,
    Q_JOB_JSON,
    Q_JOB_PARTS,
    Q_JOB_LEASE,
    Q_JOB_REQUEUE,
    Q_JOB_FINISH,
    Q_JOB_FORGET,
    Q_JOB_HAND_OVER,
    Q_UNFINISHED,
    Q_RES_OPEN,
    Q_RES_CLOSE,
    Q_RES_CHARGES,
    Q_RES_REOPEN,
    Q_RES_SINCE,
    Q_RES_PRUNE,
    Q_BUCKET_PUT,
    Q_BUCKET_GET,
    Q_OUTBOX_ADD,
    Q_OUTBOX_DEL,
    Q_OUTBOX_EACH,
    Q_ESTIMATE,
    Q_COUNT_JOBS,
    Q_COUNT_RES,
    Q_COUNTER_ADD,
    Q_OVERRIDE_PUT,
    Q_OVERRIDE_DEL,
    Q_OVERRIDE_EACH,
    Q_JOB_LOOKUP,
    Q_JOB_TENANT,
    Q_UNFINISHED_PAGE,
    Q_META_GET,
    Q_META_PUT,
    Q_META_DEL,
    Q_PBATCH_PUT,
    Q_PBATCH_STATE,
    Q_PBATCH_DEL,
    Q_PBATCH_EACH,
    Q_COUNT_
};

/* The files of a store, each by its suffix to the database path. */
enum { FILE_DB, FILE_WAL, FILE_SHM, FILE_LOCK, FILE_COUNT_ };

enum { PATH_CAP = 1024, FAULT_TEXT_MAX = 8192 };

/* A file as open, by device and inode: what its path must still lead to. */
typedef struct {
    int known;
    dev_t dev;
    ino_t ino;
} file_id_t;

/* What schema/ledger.sql sets as PRAGMA application_id ('slce'): the file is sluice's. Files
 * made before it was set have 0. */
#define SLUICE_APPLICATION_ID 0x736c6365

typedef struct store_ckpt store_ckpt_t;

struct sl_store {
    sqlite3 *db;
    store_ckpt_t *ckpt; /* the checkpointer (store_ckpt.c); NULL: none */
    int64_t commits;    /* without a checkpointer: commits made (each synced) */
    sqlite3_stmt *stmt[Q_COUNT_];
    int lock_fd;
    int is_new;
    /* Reservations opened minus closed by the current transaction, added to the counter at
     * commit. Meaningful only while a transaction is open: SQLite rolls one back by itself on
     * some errors (full disk, I/O), so whenever none is open the delta is dropped. */
    int64_t open_delta;
    char path[PATH_CAP];
    file_id_t id[FILE_COUNT_];
    sl_store_fault_t fault;
    char fault_text[FAULT_TEXT_MAX];
};

/* What every refusal of a damaged file tells the operator to do. */
#define CORRUPT_ADVICE                                                                             \
    "The scheduler will not use it: restore it from a backup, or move it away (with any -wal "     \
    "and -shm next to it) to start with an empty store"

/* ---- store.c: statements ---- */

/* Resets statement q and binds the arguments described by fmt ('s' text, 'I' int64, 'i' int,
 * 'd' double, 'n' NULL). */
sqlite3_stmt *store_bind(sl_store_t *s, int q, const char *fmt, ...);
/* Steps st to its end; SL_EDB (logged, the fault noted) on an error. */
sl_err_t store_run(sl_store_t *s, sqlite3_stmt *st, const char *what);
sl_err_t store_exec_sql(sl_store_t *s, const char *sql);
/* Runs a query that yields one integer into *v; returns SQLite's code. */
int store_query_int(sl_store_t *s, const char *sql, int64_t *v);
/* Logs the connection's last error for what, notes its fault; SL_EDB. */
sl_err_t store_db_err(sl_store_t *s, const char *what);

/* ---- store_file.c: the files at the path ---- */

void store_file_path(const sl_store_t *s, int f, char *out, size_t cap);
void store_note_fault(sl_store_t *s, const char *what);
sl_err_t store_prepare_file(sl_store_t *s, int *created, char *err, size_t errlen);
void store_restrict_modes(const sl_store_t *s);
sl_err_t store_check_pages(sl_store_t *s, char *err, size_t errlen);
sl_err_t store_note_identity(sl_store_t *s, char *err, size_t errlen);

/* ---- store_schema.c ---- */

sl_err_t store_check_schema(sl_store_t *s, char *err, size_t errlen);
sl_err_t store_check_applied(sl_store_t *s, const char *sql_path, char *err, size_t errlen);

/* ---- store_ckpt.c ---- */

/* Starts the checkpointer (the writer then commits with synchronous=NORMAL); without a thread
 * s->ckpt stays NULL and SQLite checkpoints, commits staying FULL. */
void store_start_checkpointer(sl_store_t *s);
void store_stop_checkpointer(sl_store_t *s);
/* Counts a commit of the writer (for the durable number). */
void store_ckpt_committed(sl_store_t *s);

#endif
