/* store.c - SQLite persistence for the scheduler (see store.h).
 *
 * Statements are prepared once; bind() takes a small format string so each query reads as one
 * line: 's' text, 'I' int64, 'i' int, 'd' double, 'n' NULL.
 *
 * The reservation row is written on every admission decision, so its path is kept short: the
 * charges are packed as JSON by hand, the table has no secondary index, and the number of open
 * reservations is a counter moved at commit (open_delta) instead of an index on state.
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

enum {
    Q_JOB_INSERT,
    Q_JOB_EXISTING,
    Q_JOB_JSON,
    Q_JOB_PARTS,
    Q_JOB_LEASE,
    Q_JOB_REQUEUE,
    Q_JOB_FINISH,
    Q_JOB_FORGET,
    Q_UNFINISHED,
    Q_RES_OPEN,
    Q_RES_CLOSE,
    Q_RES_CHARGES,
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
    Q_COUNT_
};

static const char *const sql_text[Q_COUNT_] = {
    [Q_JOB_INSERT] = "INSERT INTO jobs (job_id, idempotency_key, tenant, app, env, key_id, route,"
                     " class, state, submitted_ms, deadline_ms, est_input, est_output, est_total,"
                     " job_json, request_json, metadata_json, updated_ms)"
                     " VALUES (?,?,?,?,?,?,?,?,'queued',?,?,?,?,?,?,?,?,?)"
                     " ON CONFLICT (job_id) DO NOTHING",
    [Q_JOB_EXISTING] = "SELECT state, result_json FROM jobs WHERE job_id = ?",
    [Q_JOB_JSON] = "SELECT job_json FROM jobs WHERE job_id = ?",
    [Q_JOB_PARTS] = "SELECT request_json, metadata_json FROM jobs WHERE job_id = ?",
    [Q_JOB_LEASE] = "UPDATE jobs SET state = 'leased', attempts = ?, lease_expires_ms = ?,"
                    " reservation_id = ?, deployment = ?, updated_ms = ?,"
                    " first_dispatch_ms = COALESCE(first_dispatch_ms, ?) WHERE job_id = ?",
    [Q_JOB_REQUEUE] = "UPDATE jobs SET state = 'queued', attempts = ?, not_before_ms = ?,"
                      " lease_expires_ms = NULL, reservation_id = NULL, updated_ms = ?"
                      " WHERE job_id = ?",
    [Q_JOB_FORGET] = "DELETE FROM jobs WHERE job_id = ? AND state = 'done'",
    [Q_JOB_FINISH] = "UPDATE jobs SET state = 'done', status = ?, result_json = ?,"
                     " lease_expires_ms = NULL, updated_ms = ? WHERE job_id = ?",
    [Q_UNFINISHED] = "SELECT job_id, tenant, route, class, state, reservation_id, deployment,"
                     " attempts, submitted_ms, deadline_ms, not_before_ms, est_input, est_output,"
                     " est_total, COALESCE(lease_expires_ms, 0), idempotency_key, key_id FROM jobs"
                     " WHERE state <> 'done' ORDER BY submitted_ms",
    [Q_RES_OPEN] = "INSERT INTO reservations (reservation_id, job_id, attempt, deployment,"
                   " est_input, est_output, created_ms, expires_ms, charges, state)"
                   " VALUES (?,?,?,?,?,?,?,?,?,'open')",
    [Q_RES_CLOSE] = "UPDATE reservations SET state = ?, actual_input = ?, actual_output = ?,"
                    " actual_cached = ?, outcome = ?, closed_ms = ?, settled = ?"
                    " WHERE reservation_id = ? AND state = 'open'",
    [Q_RES_CHARGES] = "SELECT charges FROM reservations WHERE reservation_id = ?",
    /* A range of the primary key: ids begin with their created_ms in hex (see res_open). */
    [Q_RES_SINCE] = "SELECT charges, settled, created_ms FROM reservations"
                    " WHERE reservation_id >= ? AND created_ms >= ? ORDER BY reservation_id",
    /* The oldest closed rows, by the time-sorted primary key. "state <> 'done'" repeats the
     * partial index's own condition so the leased jobs are read through jobs_state. */
    [Q_RES_PRUNE] = "DELETE FROM reservations WHERE reservation_id IN ("
                    "SELECT reservation_id FROM reservations WHERE reservation_id < ?"
                    " AND created_ms < ? AND state <> 'open' AND reservation_id NOT IN ("
                    "SELECT reservation_id FROM jobs WHERE state <> 'done' AND state = 'leased'"
                    " AND reservation_id IS NOT NULL)"
                    " ORDER BY reservation_id LIMIT ?)",
    [Q_BUCKET_PUT] = "INSERT OR REPLACE INTO buckets (bucket_id, scope, dimension, algorithm, unit,"
                     " source, capacity, rate_per_min, level, updated_ms, state)"
                     " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
    [Q_BUCKET_GET] = "SELECT level, updated_ms, state FROM buckets WHERE bucket_id = ?",
    [Q_OUTBOX_ADD] = "INSERT INTO outbox (topic, msg_key, value, created_ms) VALUES (?,?,?,?)",
    [Q_OUTBOX_DEL] = "DELETE FROM outbox WHERE seq = ?",
    [Q_OUTBOX_EACH] = "SELECT seq, topic, msg_key, value FROM outbox ORDER BY seq",
    [Q_ESTIMATE] = "INSERT INTO estimate_stats (route, class, deployment, n, est_input,"
                   " real_input, est_output, real_output) VALUES (?,?,?,1,?,?,?,?)"
                   " ON CONFLICT (route, class, deployment) DO UPDATE SET n = n + 1,"
                   " est_input = est_input + excluded.est_input,"
                   " real_input = real_input + excluded.real_input,"
                   " est_output = est_output + excluded.est_output,"
                   " real_output = real_output + excluded.real_output",
    [Q_COUNT_JOBS] = "SELECT COUNT(*) FROM jobs WHERE state = ?",
    [Q_COUNT_RES] = "SELECT n FROM counters WHERE name = 'open_reservations'",
    [Q_COUNTER_ADD] = "UPDATE counters SET n = n + ? WHERE name = 'open_reservations'",
    [Q_OVERRIDE_PUT] = "INSERT OR REPLACE INTO overrides (target, field, value, updated_ms)"
                       " VALUES (?,?,?,?)",
    [Q_OVERRIDE_DEL] = "DELETE FROM overrides WHERE target = ? AND field = ?",
    [Q_OVERRIDE_EACH] = "SELECT target, field, value FROM overrides ORDER BY target, field",
    [Q_JOB_LOOKUP] = "SELECT tenant, route, class, state, status, attempts, submitted_ms,"
                     " deadline_ms, deployment, result_json FROM jobs WHERE job_id = ?",
};

/* The files of a store, each by its suffix to the database path. */
enum { FILE_DB, FILE_WAL, FILE_SHM, FILE_LOCK, FILE_COUNT_ };
static const char *const file_suffix[FILE_COUNT_] = {"", "-wal", "-shm", ".lock"};

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

/* The checkpointer: a thread with its own connection that copies the WAL into the database
 * (PASSIVE: it never waits for or blocks the writer) every CKPT_EVERY_MS, and with it makes the
 * commits durable. SQLite's automatic checkpoint ran inside the commit that crossed its
 * threshold, on the writer's thread: with a flood being stored, a 40 - 200 ms stall of the
 * scheduling loop every few MB. And a synced commit (synchronous=FULL) is an fsync on that
 * thread at every commit, several a second per scheduling step. So the writer commits with
 * synchronous=NORMAL, and durability comes from the checkpoint, which syncs the WAL before it
 * copies it: every commit made before a checkpoint that ran is on disk when it returns. The
 * writer numbers its commits; the checkpointer publishes the number it made durable; the
 * scheduler commits its Kafka offsets only up to that (sl_store_durable_seq). */
enum { CKPT_EVERY_MS = 50 };

typedef struct {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    atomic_llong committed; /* commits of the writer */
    atomic_llong durable;   /* of those, the ones on disk */
    char path[4096];
} ckpt_t;

struct sl_store {
    sqlite3 *db;
    ckpt_t *ckpt;
    int64_t commits; /* without a checkpointer: commits made (each synced) */
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

static void file_path(const sl_store_t *s, int f, char *out, size_t cap)
{
    snprintf(out, cap, "%s%s", s->path, file_suffix[f]);
}

static int same_file(const file_id_t *id, const struct stat *st)
{
    return id->dev == st->st_dev && id->ino == st->st_ino;
}

/* Notes the fault behind the connection's last error (the first one only: it is the cause,
 * what follows is its consequence). Errors that are not about the file (a constraint, a
 * programmer error) are no fault. */
static void note_fault(sl_store_t *s, const char *what)
{
    if (s->db == NULL || s->fault != SL_STORE_FAULT_NONE)
        return;
    const char *msg = sqlite3_errmsg(s->db);
    switch (sqlite3_errcode(s->db) & 0xff) {
    case SQLITE_FULL:
        s->fault = SL_STORE_FAULT_FULL;
        snprintf(s->fault_text, sizeof s->fault_text,
                 "the database %s is full: SQLite could not make it grow (%s: %s; a full disk, "
                 "a quota or a file size limit). The transaction was rolled back and its Kafka "
                 "offsets were not committed, so no job is lost: free space on its file system, "
                 "then start the scheduler again",
                 s->path, what, msg);
        break;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
        s->fault = SL_STORE_FAULT_IO;
        snprintf(s->fault_text, sizeof s->fault_text,
                 "a read or write of the database %s failed (%s: %s). The transaction was rolled "
                 "back and its Kafka offsets were not committed: check the disk (dmesg) and the "
                 "file before starting the scheduler again",
                 s->path, what, msg);
        break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        s->fault = SL_STORE_FAULT_CORRUPT;
        snprintf(s->fault_text, sizeof s->fault_text,
                 "the database %s is corrupted (%s: %s). The transaction was rolled back and its "
                 "Kafka offsets were not committed. Stop using the file: restore it from a "
                 "backup, or move it away (with its -wal and -shm) to start with an empty store",
                 s->path, what, msg);
        break;
    default:
        break;
    }
}

static sl_err_t db_err(sl_store_t *s, const char *what)
{
    sl_error("sqlite %s: %s", what, sqlite3_errmsg(s->db));
    note_fault(s, what);
    return SL_EDB;
}

/* Resets statement q and binds the arguments described by fmt. */
static sqlite3_stmt *bind(sl_store_t *s, int q, const char *fmt, ...)
{
    sqlite3_stmt *st = s->stmt[q];
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    va_list ap;
    va_start(ap, fmt);
    for (int i = 0; fmt[i] != '\0'; i++) {
        int col = i + 1;
        switch (fmt[i]) {
        case 's': {
            const char *v = va_arg(ap, const char *);
            if (v == NULL)
                sqlite3_bind_null(st, col);
            else
                /* SQLITE_STATIC, no copy: every caller steps and resets the statement before
                 * the strings it bound go out of scope, and bind() clears old bindings. */
                sqlite3_bind_text(st, col, v, -1, SQLITE_STATIC);
            break;
        }
        case 'I':
            sqlite3_bind_int64(st, col, va_arg(ap, int64_t));
            break;
        case 'i':
            sqlite3_bind_int(st, col, va_arg(ap, int));
            break;
        case 'd':
            sqlite3_bind_double(st, col, va_arg(ap, double));
            break;
        default:
            sqlite3_bind_null(st, col);
            break;
        }
    }
    va_end(ap);
    return st;
}

/* Runs a statement that returns no rows. */
static sl_err_t run(sl_store_t *s, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SL_OK : db_err(s, what);
}

static sl_err_t exec_sql(sl_store_t *s, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        sl_error("sqlite: %s", msg != NULL ? msg : "?");
        sqlite3_free(msg);
        /* The statement names the fault well enough when it is one word (COMMIT, BEGIN). */
        note_fault(s, strlen(sql) < 24 ? sql : "statement");
        return SL_EDB;
    }
    return SL_OK;
}

/* Runs a query that yields one integer into *v; returns SQLite's code (SQLITE_OK or the
 * error). */
static int query_int(sl_store_t *s, const char *sql, int64_t *v)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *v = sqlite3_column_int64(st, 0);
            rc = SQLITE_OK;
        } else if (rc == SQLITE_DONE) {
            rc = SQLITE_ERROR; /* no row: not what the query promises */
        }
    }
    sqlite3_finalize(st);
    return rc;
}

/* What every refusal of a damaged file tells the operator to do. */
#define CORRUPT_ADVICE                                                                        \
    "The scheduler will not use it: restore it from a backup, or move it away (with any -wal " \
    "and -shm next to it) to start with an empty store"

/* Checks the path before SQLite opens it, and creates a missing database file mode 0600 (SQLite
 * gives the -wal and -shm the database's mode). Refuses a file that does not begin with a SQLite
 * header, and a -wal whose database is missing: SQLite would apply that log to a new, empty
 * file. Sets *created. */
static sl_err_t prepare_file(sl_store_t *s, int *created, char *err, size_t errlen)
{
    char wal[PATH_CAP + 8];
    file_path(s, FILE_WAL, wal, sizeof wal);
    struct stat st;
    *created = 0;
    if (stat(s->path, &st) != 0) {
        struct stat ws;
        if (errno != ENOENT) {
            snprintf(err, errlen, "cannot open %s: %s", s->path, strerror(errno));
            return SL_EIO;
        }
        if (stat(wal, &ws) == 0 && ws.st_size > 0) {
            snprintf(err, errlen,
                     "%s is missing but its write-ahead log %s is there (%lld bytes of committed "
                     "transactions): the database was deleted or moved without its log. Put the "
                     "database back; or, to start with an empty store, move %s and %s-shm away",
                     s->path, wal, (long long)ws.st_size, wal, s->path);
            return SL_EDB;
        }
        int fd = open(s->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            snprintf(err, errlen, "cannot create %s: %s", s->path, strerror(errno));
            return SL_EIO;
        }
        close(fd);
        *created = 1;
        return SL_OK;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s is not a regular file", s->path);
        return SL_EIO;
    }
    if (st.st_size == 0)
        return SL_OK; /* SQLite takes an empty file for a new database */
    char head[100];
    ssize_t n = -1;
    int fd = open(s->path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = pread(fd, head, sizeof head, 0);
        /* No SQLite connection has the file open yet: closing this descriptor releases no
         * lock of SQLite's. */
        close(fd);
    }
    if (n < 0) {
        snprintf(err, errlen, "cannot read %s: %s", s->path, strerror(errno));
        return SL_EIO;
    }
    if (n < (ssize_t)sizeof head || memcmp(head, "SQLite format 3", 16) != 0) {
        snprintf(err, errlen,
                 "%s is corrupted or not a sluice database: it does not begin with a SQLite "
                 "header (%lld bytes). " CORRUPT_ADVICE,
                 s->path, (long long)st.st_size);
        return SL_EDB;
    }
    return SL_OK;
}

/* Makes the database, its -wal and its -shm readable and writable by their owner alone, with a
 * warning for each that was open to others. */
static void restrict_modes(const sl_store_t *s)
{
    for (int f = FILE_DB; f <= FILE_SHM; f++) {
        char path[PATH_CAP + 8];
        struct stat st;
        file_path(s, f, path, sizeof path);
        if (stat(path, &st) != 0 || (st.st_mode & 0077) == 0)
            continue;
        if (chmod(path, 0600) == 0)
            sl_warn("%s was mode %04o, open to other users, and holds every tenant's prompts "
                    "and answers: its mode is now 0600",
                    path, (unsigned)(st.st_mode & 07777));
        else
            sl_warn("%s is mode %04o, open to other users, and cannot be changed to 0600: %s",
                    path, (unsigned)(st.st_mode & 07777), strerror(errno));
    }
}

/* PRAGMA quick_check on an existing file: every page and B-tree is sound (it does not check
 * that indexes match their tables; that is integrity_check, too slow for every start). */
static sl_err_t check_pages(sl_store_t *s, char *err, size_t errlen)
{
    double t0 = sl_mono_ms();
    sqlite3_stmt *st = NULL;
    char found[256] = "";
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check(1)", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *v = sqlite3_column_text(st, 0);
        snprintf(found, sizeof found, "%s", v != NULL ? (const char *)v : "?");
    } else if ((rc & 0xff) == SQLITE_NOTADB || (rc & 0xff) == SQLITE_CORRUPT) {
        /* A header SQLite cannot use fails here, before any page is read. */
        snprintf(found, sizeof found, "%s", sqlite3_errmsg(s->db));
    } else {
        snprintf(err, errlen, "cannot read %s: %s", s->path, sqlite3_errmsg(s->db));
        sqlite3_finalize(st);
        return SL_EDB;
    }
    sqlite3_finalize(st);
    for (char *c = found; *c != '\0'; c++) {
        if (*c == '\n')
            *c = ' '; /* quick_check separates its findings by lines: the message is one */
    }
    if (strcmp(found, "ok") != 0) {
        snprintf(err, errlen,
                 "%s is corrupted or not a sluice database (quick_check: %s). " CORRUPT_ADVICE,
                 s->path, found);
        return SL_EDB;
    }
    double took_ms = sl_mono_ms() - t0;
    if (took_ms >= 1000)
        sl_info("%s: quick_check took %.1f s", s->path, took_ms / 1000);
    return SL_OK;
}

/* Schema migrations. migration_sql[v] turns a database of version v into version v + 1; it is
 * run with the version bump (PRAGMA user_version, itself part of the transaction) in one
 * transaction, steps chained from the file's version up to SL_STORE_SCHEMA_VERSION, so a
 * failure leaves the file at its old version, unchanged. Each step is frozen: it must produce
 * exactly what schema/ledger.sql made at version v + 1, even after ledger.sql has moved on
 * (schema/ledger.sql is applied after the migration with CREATE ... IF NOT EXISTS only).
 *
 * To add version 4: make the change in schema/ledger.sql and set its user_version to 4, set
 * SL_STORE_SCHEMA_VERSION to 4, write here the SQL that turns a version 3 file into what
 * ledger.sql now creates (tables are rebuilt with CREATE new / INSERT SELECT / DROP / ALTER
 * RENAME when a column's constraint or a table's kind changes; ADD COLUMN is enough for a new
 * nullable column), and extend the test that migrates a file of every known version
 * (tests/test_store.c: *_migrates_*). */
static const char *const migration_sql[SL_STORE_SCHEMA_VERSION] = {
    /* 2 -> 3: the CHECKs compare with = instead of IN (...) (same meaning, cheaper inserts);
     * buckets get their algorithm's state; reservations lose the fields their job has, become
     * WITHOUT ROWID keyed by their time-sorted id (version 2 made its ids that way already)
     * without the partial index on state; and the open ones are counted in counters. */
    [2] = "CREATE TABLE jobs_v3 ("
          " job_id TEXT PRIMARY KEY, idempotency_key TEXT NOT NULL, tenant TEXT NOT NULL,"
          " app TEXT NOT NULL, env TEXT NOT NULL, key_id TEXT NOT NULL, route TEXT NOT NULL,"
          " class TEXT NOT NULL,"
          " state TEXT NOT NULL CHECK (state = 'queued' OR state = 'leased' OR state = 'done'),"
          " status TEXT CHECK (status = 'succeeded' OR status = 'failed' OR status = 'rejected'"
          "   OR status = 'expired' OR status = 'cancelled'),"
          " attempts INTEGER NOT NULL DEFAULT 0, submitted_ms INTEGER NOT NULL,"
          " deadline_ms INTEGER NOT NULL, not_before_ms INTEGER NOT NULL DEFAULT 0,"
          " est_input INTEGER NOT NULL, est_output INTEGER NOT NULL, est_total INTEGER NOT NULL,"
          " lease_expires_ms INTEGER, reservation_id TEXT, deployment TEXT,"
          " first_dispatch_ms INTEGER, job_json TEXT NOT NULL, request_json TEXT,"
          " metadata_json TEXT, result_json TEXT, updated_ms INTEGER NOT NULL);"
          "INSERT INTO jobs_v3 (job_id, idempotency_key, tenant, app, env, key_id, route, class,"
          " state, status, attempts, submitted_ms, deadline_ms, not_before_ms, est_input,"
          " est_output, est_total, lease_expires_ms, reservation_id, deployment,"
          " first_dispatch_ms, job_json, request_json, metadata_json, result_json, updated_ms)"
          " SELECT job_id, idempotency_key, tenant, app, env, key_id, route, class, state,"
          " status, attempts, submitted_ms, deadline_ms, not_before_ms, est_input, est_output,"
          " est_total, lease_expires_ms, reservation_id, deployment, first_dispatch_ms,"
          " job_json, request_json, metadata_json, result_json, updated_ms FROM jobs;"
          "DROP TABLE jobs;"
          "ALTER TABLE jobs_v3 RENAME TO jobs;"
          "CREATE INDEX jobs_state ON jobs (state) WHERE state <> 'done';"
          "ALTER TABLE buckets ADD COLUMN state TEXT;"
          "CREATE TABLE reservations_v3 ("
          " reservation_id TEXT PRIMARY KEY, job_id TEXT NOT NULL, attempt INTEGER NOT NULL,"
          " deployment TEXT NOT NULL, est_input INTEGER NOT NULL, est_output INTEGER NOT NULL,"
          " created_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL, charges TEXT NOT NULL,"
          " state TEXT NOT NULL CHECK (state = 'open' OR state = 'reconciled'"
          "   OR state = 'expired'),"
          " settled TEXT, actual_input INTEGER, actual_output INTEGER, actual_cached INTEGER,"
          " outcome TEXT, closed_ms INTEGER) WITHOUT ROWID;"
          "INSERT INTO reservations_v3 (reservation_id, job_id, attempt, deployment, est_input,"
          " est_output, created_ms, expires_ms, charges, state, settled, actual_input,"
          " actual_output, actual_cached, outcome, closed_ms)"
          " SELECT reservation_id, job_id, attempt, deployment, est_input, est_output,"
          " created_ms, expires_ms, charges, state, settled, actual_input, actual_output,"
          " actual_cached, outcome, closed_ms FROM reservations;"
          "DROP TABLE reservations;"
          "ALTER TABLE reservations_v3 RENAME TO reservations;"
          "CREATE TABLE counters (name TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;"
          "INSERT INTO counters (name, n) SELECT 'open_reservations', COUNT(*)"
          " FROM reservations WHERE state = 'open';",
};

static sl_err_t migrate(sl_store_t *s, int from, char *err, size_t errlen)
{
    sl_info("%s has schema version %d: migrating it to %d in one transaction", s->path, from,
            SL_STORE_SCHEMA_VERSION);
    sl_err_t rc = exec_sql(s, "BEGIN IMMEDIATE");
    int v = from;
    for (; rc == SL_OK && v < SL_STORE_SCHEMA_VERSION; v++) {
        char bump[64];
        snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v + 1);
        rc = migration_sql[v] != NULL ? exec_sql(s, migration_sql[v]) : SL_EINVAL;
        if (rc == SL_OK)
            rc = exec_sql(s, bump);
        if (rc != SL_OK)
            break;
    }
    if (rc == SL_OK)
        rc = exec_sql(s, "COMMIT");
    if (rc != SL_OK) {
        snprintf(err, errlen,
                 "%s: migrating schema version %d to %d failed at step %d -> %d (%s); the file "
                 "is left at version %d, as it was",
                 s->path, from, SL_STORE_SCHEMA_VERSION, v, v + 1, sqlite3_errmsg(s->db), from);
        exec_sql(s, "ROLLBACK");
        return SL_EDB;
    }
    sl_info("%s migrated to schema version %d", s->path, SL_STORE_SCHEMA_VERSION);
    return SL_OK;
}

/* Reads what the existing file is, and migrates an older schema. A file with no table at all,
 * or only the beginning of sluice's (an open that failed while applying the schema), is as
 * good as new. */
static sl_err_t check_schema(sl_store_t *s, char *err, size_t errlen)
{
    int64_t version = 0, app_id = 0, tables = 0, jobs = 0;
    if (query_int(s, "PRAGMA user_version", &version) != SQLITE_OK ||
        query_int(s, "PRAGMA application_id", &app_id) != SQLITE_OK ||
        query_int(s, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'", &tables) !=
            SQLITE_OK ||
        query_int(s, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'jobs'",
                  &jobs) != SQLITE_OK) {
        snprintf(err, errlen, "%s is corrupted or not a sluice database (%s). " CORRUPT_ADVICE,
                 s->path, sqlite3_errmsg(s->db));
        return SL_EDB;
    }
    if (app_id != 0 && app_id != SLUICE_APPLICATION_ID) {
        snprintf(err, errlen,
                 "%s is not a sluice database: it belongs to another application (SQLite "
                 "application_id 0x%08llx). Set scheduler.db to sluice's own file",
                 s->path, (unsigned long long)app_id);
        return SL_EDB;
    }
    if (jobs == 0) {
        if (tables == 0 || app_id == SLUICE_APPLICATION_ID) {
            s->is_new = 1;
            return SL_OK;
        }
        snprintf(err, errlen,
                 "%s is not a sluice database: a SQLite file with %lld tables and no jobs table "
                 "(schema version %lld). Set scheduler.db to sluice's own file",
                 s->path, (long long)tables, (long long)version);
        return SL_EDB;
    }
    if (version > SL_STORE_SCHEMA_VERSION) {
        snprintf(err, errlen,
                 "%s has schema version %lld, newer than this scheduler knows (%d): a newer "
                 "sluice wrote it. Run that release (or a later one) on it, or restore a backup "
                 "made by this one; the file is left as it is",
                 s->path, (long long)version, SL_STORE_SCHEMA_VERSION);
        return SL_EDB;
    }
    if (version < SL_STORE_SCHEMA_OLDEST) {
        snprintf(err, errlen,
                 "%s has schema version %lld, older than any this scheduler migrates (%d to "
                 "%d): open it once with a sluice release of that time to migrate it, or move "
                 "it away to start with an empty store; the file is left as it is",
                 s->path, (long long)version, SL_STORE_SCHEMA_OLDEST, SL_STORE_SCHEMA_VERSION);
        return SL_EDB;
    }
    if (version < SL_STORE_SCHEMA_VERSION)
        return migrate(s, (int)version, err, errlen);
    return SL_OK;
}

/* After the schema file ran: its version is the one this binary is built for, and the
 * durability it asks for is what the offsets rely on. */
static sl_err_t check_applied(sl_store_t *s, const char *sql_path, char *err, size_t errlen)
{
    int64_t version = -1, sync = -1;
    if (query_int(s, "PRAGMA user_version", &version) != SQLITE_OK ||
        version != SL_STORE_SCHEMA_VERSION) {
        snprintf(err, errlen,
                 "the SQL schema %s sets version %lld, this scheduler is built for %d: use the "
                 "schema directory of the same release",
                 sql_path, (long long)version, SL_STORE_SCHEMA_VERSION);
        return SL_EDB;
    }
    sync = sl_store_synchronous(s);
    if (sync < 2)
        sl_warn("%s: synchronous is %lld (the SQL schema %s sets it), below FULL: a power loss "
                "can lose committed jobs whose Kafka offsets were committed",
                s->path, (long long)sync, sql_path);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "PRAGMA journal_mode", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        const char *mode = (const char *)sqlite3_column_text(st, 0);
        if (mode == NULL || strcmp(mode, "wal") != 0)
            sl_warn("%s: journal_mode is %s, not wal (a file system without shared memory?)",
                    s->path, mode != NULL ? mode : "?");
    }
    sqlite3_finalize(st);
    return SL_OK;
}

/* Records the device and inode of the database, -wal and -shm as they are now that SQLite has
 * them open, and of the lock file by its descriptor. */
static sl_err_t note_identity(sl_store_t *s, char *err, size_t errlen)
{
    int moved = 0;
    if (sqlite3_file_control(s->db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) != SQLITE_OK)
        moved = 0;
    for (int f = FILE_DB; f <= FILE_SHM; f++) {
        char path[PATH_CAP + 8];
        struct stat st;
        file_path(s, f, path, sizeof path);
        if (stat(path, &st) == 0) {
            s->id[f] = (file_id_t){1, st.st_dev, st.st_ino};
        } else if (f == FILE_DB) {
            moved = 1;
        }
    }
    struct stat st;
    if (fstat(s->lock_fd, &st) == 0)
        s->id[FILE_LOCK] = (file_id_t){1, st.st_dev, st.st_ino};
    if (moved) {
        snprintf(err, errlen, "%s was deleted or replaced while it was being opened", s->path);
        return SL_EDB;
    }
    return SL_OK;
}

static void *ckpt_main(void *arg)
{
    ckpt_t *c = arg;
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(c->path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        sl_warn("store: the checkpointer cannot open %s; the WAL grows until the next start",
                c->path);
        sqlite3_close(db);
        return NULL;
    }
    /* Never checkpoint into, or delete, the files at the path on close: the writer does that,
     * and only when they are still its own. */
    sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    sqlite3_exec(db, "PRAGMA synchronous = FULL", NULL, NULL, NULL);
    atomic_store(&c->durable, -1); /* ready */
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += (long)CKPT_EVERY_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&c->cv, &c->mu, &until);
        if (c->stop)
            break;
        pthread_mutex_unlock(&c->mu);
        long long seq = atomic_load(&c->committed);
        if (seq > atomic_load(&c->durable)) {
            int nlog = 0, nckpt = 0;
            if (sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &nlog, &nckpt) ==
                SQLITE_OK)
                atomic_store(&c->durable, seq);
        }
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    sqlite3_close(db);
    return NULL;
}

/* Turns SQLite's automatic checkpoint off on the writer and starts the checkpointer; without
 * one (no thread), the automatic checkpoint stays on. */
static void start_checkpointer(sl_store_t *s)
{
    ckpt_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return;
    snprintf(c->path, sizeof c->path, "%s", s->path);
    atomic_init(&c->committed, 0);
    atomic_init(&c->durable, -2); /* not ready */
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (pthread_create(&c->thread, NULL, ckpt_main, c) != 0) {
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
        free(c);
        return;
    }
    /* Wait until its connection is open (or it gave up): the writer's settings depend on it. */
    while (atomic_load(&c->durable) == -2) {
        struct timespec t = {0, 1000000};
        nanosleep(&t, NULL);
        if (pthread_tryjoin_np(c->thread, NULL) == 0) {
            pthread_mutex_destroy(&c->mu);
            pthread_cond_destroy(&c->cv);
            free(c);
            return; /* it could not open the file: SQLite checkpoints, commits stay FULL */
        }
    }
    atomic_store(&c->durable, 0);
    s->ckpt = c;
    sqlite3_exec(s->db, "PRAGMA wal_autocheckpoint = 0", NULL, NULL, NULL);
    sqlite3_exec(s->db, "PRAGMA synchronous = NORMAL", NULL, NULL, NULL);
}

static void stop_checkpointer(sl_store_t *s)
{
    ckpt_t *c = s->ckpt;
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
    s->ckpt = NULL;
}

int sl_store_checkpointing(const sl_store_t *s)
{
    return s->ckpt != NULL;
}

int64_t sl_store_committed_seq(const sl_store_t *s)
{
    return s->ckpt != NULL ? (int64_t)atomic_load(&s->ckpt->committed) : s->commits;
}

int64_t sl_store_durable_seq(const sl_store_t *s)
{
    /* Without the checkpointer every commit is synced (synchronous=FULL). */
    return s->ckpt != NULL ? (int64_t)atomic_load(&s->ckpt->durable) : s->commits;
}

sl_err_t sl_store_sync(sl_store_t *s)
{
    if (s->ckpt == NULL)
        return SL_OK;
    long long seq = atomic_load(&s->ckpt->committed);
    int nlog = 0, nckpt = 0;
    if (sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_FULL, &nlog, &nckpt) !=
        SQLITE_OK)
        return SL_EDB;
    atomic_store(&s->ckpt->durable, seq);
    return SL_OK;
}

sl_err_t sl_store_open(const char *db_path, const char *sql_path, sl_store_t **out, char *err,
                       size_t errlen)
{
    *out = NULL;
    err[0] = '\0';
    sl_store_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return SL_ENOMEM;
    s->lock_fd = -1;
    sl_err_t rc = SL_OK;
    char *schema = NULL;
    char lock_path[PATH_CAP + 8];
    if (strlen(db_path) >= sizeof s->path) {
        snprintf(err, errlen, "database path too long (%zu bytes)", strlen(db_path));
        rc = SL_ETOOBIG;
        goto fail;
    }
    snprintf(s->path, sizeof s->path, "%s", db_path);
    file_path(s, FILE_LOCK, lock_path, sizeof lock_path);
    s->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (s->lock_fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", lock_path, strerror(errno));
        rc = SL_EIO;
        goto fail;
    }
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, errlen,
                 "%s is in use by another scheduler: one scheduler owns a capacity domain",
                 db_path);
        rc = SL_EBUSY;
        goto fail;
    }
    rc = sl_read_file(sql_path, 1 << 20, &schema, NULL);
    if (rc != SL_OK) {
        snprintf(err, errlen, "cannot read SQL schema %s: %s", sql_path, sl_strerror(rc));
        goto fail;
    }
    int created = 0;
    rc = prepare_file(s, &created, err, errlen);
    if (rc != SL_OK)
        goto fail;
    s->is_new = created;
    /* NOMUTEX: one thread uses a store (store.h), so SQLite's per-call locking is pure cost. */
    if (sqlite3_open_v2(db_path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        snprintf(err, errlen, "cannot open %s: %s", db_path,
                 s->db ? sqlite3_errmsg(s->db) : "out of memory");
        rc = SL_EDB;
        goto fail;
    }
    sqlite3_busy_timeout(s->db, 5000);
    if (!s->is_new) {
        rc = check_pages(s, err, errlen);
        if (rc == SL_OK)
            rc = check_schema(s, err, errlen);
        if (rc != SL_OK)
            goto fail;
        /* Only a file known to be sluice's (another application's is left as it is). */
        restrict_modes(s);
    }
    if (exec_sql(s, schema) != SL_OK) {
        snprintf(err, errlen, "cannot apply SQL schema %s to %s: %s", sql_path, db_path,
                 sqlite3_errmsg(s->db));
        rc = SL_EDB;
        goto fail;
    }
    rc = check_applied(s, sql_path, err, errlen);
    if (rc != SL_OK)
        goto fail;
    for (int q = 0; q < Q_COUNT_; q++) {
        if (sqlite3_prepare_v3(s->db, sql_text[q], -1, SQLITE_PREPARE_PERSISTENT, &s->stmt[q],
                               NULL) != SQLITE_OK) {
            snprintf(err, errlen, "prepare: %s", sqlite3_errmsg(s->db));
            rc = SL_EDB;
            goto fail;
        }
    }
    rc = note_identity(s, err, errlen);
    if (rc != SL_OK)
        goto fail;
    start_checkpointer(s);
    free(schema);
    *out = s;
    return SL_OK;
fail:
    free(schema);
    sl_store_close(s);
    return rc;
}

void sl_store_close(sl_store_t *s)
{
    if (s == NULL)
        return;
    stop_checkpointer(s); /* first: the writer's close is then the last, and checkpoints */
    for (int q = 0; q < Q_COUNT_; q++)
        sqlite3_finalize(s->stmt[q]);
    /* The files at the path are no longer this connection's: closing must not checkpoint into
     * them or delete the -wal by its name (it may be another database's now). */
    if (s->db != NULL && s->fault == SL_STORE_FAULT_MOVED)
        sqlite3_db_config(s->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    sqlite3_close(s->db);
    if (s->lock_fd >= 0)
        close(s->lock_fd);
    free(s);
}

int sl_store_is_new(const sl_store_t *s)
{
    return s->is_new;
}

int sl_store_synchronous(sl_store_t *s)
{
    int64_t v = -1;
    return query_int(s, "PRAGMA synchronous", &v) == SQLITE_OK ? (int)v : -1;
}

sl_store_fault_t sl_store_fault(const sl_store_t *s, const char **text)
{
    if (text != NULL)
        *text = s->fault_text;
    return s->fault;
}

sl_err_t sl_store_begin(sl_store_t *s)
{
    sl_err_t rc = exec_sql(s, "BEGIN IMMEDIATE");
    if (rc == SL_OK)
        s->open_delta = 0; /* left by a transaction SQLite rolled back by itself */
    return rc;
}

/* Writes the open-reservations counter before COMMIT, in the same transaction as the rows it
 * counts. Once written the delta is cleared: a failed COMMIT leaves the transaction to the
 * caller's rollback, which undoes the counter with the rows. */
sl_err_t sl_store_commit(sl_store_t *s)
{
    if (sqlite3_get_autocommit(s->db))
        s->open_delta = 0;
    if (s->open_delta != 0) {
        sl_err_t rc = run(s, bind(s, Q_COUNTER_ADD, "I", s->open_delta), "open count");
        if (rc != SL_OK)
            return rc;
        s->open_delta = 0;
    }
    sl_err_t rc = exec_sql(s, "COMMIT");
    if (rc == SL_OK) {
        s->commits++;
        if (s->ckpt != NULL)
            atomic_fetch_add(&s->ckpt->committed, 1);
    }
    return rc;
}

void sl_store_rollback(sl_store_t *s)
{
    /* SQLite may have rolled the transaction back by itself (a full disk, an I/O error). */
    if (!sqlite3_get_autocommit(s->db))
        exec_sql(s, "ROLLBACK");
    s->open_delta = 0;
}

/* ---- the files at the path ----------------------------------------------------------------- */

/* fsyncs the directory holding path, so a link or rename in it survives a power loss. */
static void sync_dir_of(const char *path)
{
    char dir[PATH_CAP + 8];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Writes the connection's last committed state (the database as this connection sees it, its
 * -wal included) to a new file at path, mode 0600, synced. On failure the new file is removed
 * and why says what went wrong. */
static sl_err_t save_copy(sl_store_t *s, const char *path, char *why, size_t whylen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, whylen, "cannot create %s: %s", path, strerror(errno));
        return SL_EIO;
    }
    close(fd);
    /* VACUUM INTO fills an empty file: it keeps the 0600 it was created with. */
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "VACUUM INTO ?", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        snprintf(why, whylen, "cannot write %s: %s", path, sqlite3_errmsg(s->db));
        unlink(path);
        return SL_EDB;
    }
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        snprintf(why, whylen, "cannot sync %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        unlink(path);
        return SL_EIO;
    }
    close(fd);
    sync_dir_of(path);
    return SL_OK;
}

/* Removes the -wal and -shm at the path when they are this connection's: they belong to the
 * file it has open, which is no longer the one at the path, and SQLite would apply that log to
 * whatever database stands there next. Returns the suffix of one that is not ours (left alone),
 * or NULL. */
static const char *remove_our_sidecars(const sl_store_t *s)
{
    const char *foreign = NULL;
    for (int f = FILE_WAL; f <= FILE_SHM; f++) {
        char path[PATH_CAP + 8];
        struct stat st;
        file_path(s, f, path, sizeof path);
        if (stat(path, &st) != 0)
            continue;
        if (s->id[f].known && same_file(&s->id[f], &st))
            unlink(path);
        else if (foreign == NULL)
            foreign = file_suffix[f];
    }
    return foreign;
}

/* The database was deleted: its last committed state goes back to the path, so the next start
 * finds every job whose offsets were committed. The -wal and -shm left at the path are this
 * connection's, of the deleted file: they go first (remove_our_sidecars). Anything at the path
 * that is not ours is left alone, and the copy stays next to it. */
static void rescue_deleted(sl_store_t *s, int64_t now_ms, const char *what)
{
    char copy[PATH_CAP + 64], why[PATH_CAP + 256] = "";
    snprintf(copy, sizeof copy, "%s.rescue-%lld.tmp", s->path, (long long)now_ms);
    if (save_copy(s, copy, why, sizeof why) != SL_OK) {
        snprintf(s->fault_text, sizeof s->fault_text,
                 "%s while the scheduler had it open, and its last committed state could not "
                 "be saved (%s). Offsets of the work since the deletion were not committed; "
                 "jobs committed before it are only in the deleted file",
                 what, why);
        return;
    }
    const char *blocker = remove_our_sidecars(s);
    if (blocker == NULL && link(copy, s->path) == 0) {
        unlink(copy);
        sync_dir_of(s->path);
        snprintf(s->fault_text, sizeof s->fault_text,
                 "%s while the scheduler had it open. Its last committed state was written back "
                 "to %s (mode 0600); the offsets of what came after were not committed, so "
                 "Kafka delivers that again and no job is lost. Start the scheduler again (stop "
                 "it first to retire a database: a file deleted while open is put back)",
                 what, s->path);
        return;
    }
    char kept[PATH_CAP + 64];
    snprintf(kept, sizeof kept, "%s.rescued-%lld", s->path, (long long)now_ms);
    if (rename(copy, kept) != 0)
        snprintf(kept, sizeof kept, "%s", copy);
    snprintf(s->fault_text, sizeof s->fault_text,
             "%s while the scheduler had it open, and another file now stands at %s%s. Its last "
             "committed state is saved in %s (the offsets of what came after were not "
             "committed): with the scheduler stopped, move that file to %s (without any -wal or "
             "-shm there) to keep every job",
             what, s->path, blocker != NULL ? blocker : "", kept, s->path);
}

/* The database at the path is another file now: the one this connection wrote is saved next to
 * it, and the replacement is left alone (it may be a backup put back on purpose), but for the
 * -wal and -shm of ours beside it (remove_our_sidecars). */
static void rescue_replaced(sl_store_t *s, int64_t now_ms)
{
    char kept[PATH_CAP + 64], why[PATH_CAP + 256] = "";
    snprintf(kept, sizeof kept, "%s.rescued-%lld", s->path, (long long)now_ms);
    if (save_copy(s, kept, why, sizeof why) != SL_OK) {
        snprintf(s->fault_text, sizeof s->fault_text,
                 "%s was replaced by another file while the scheduler had it open, and the "
                 "scheduler's last committed state could not be saved (%s). Offsets of the work "
                 "since were not committed",
                 s->path, why);
        return;
    }
    remove_our_sidecars(s);
    snprintf(s->fault_text, sizeof s->fault_text,
             "%s was replaced by another file while the scheduler had it open. The scheduler's "
             "last committed state is saved in %s; the offsets of what came after were not "
             "committed. If the replacement was not meant, stop the scheduler and move %s to %s "
             "(without the -wal and -shm there) to keep every job",
             s->path, kept, kept, s->path);
}

/* The -wal was deleted or replaced and the database is in place: the transactions in this
 * connection's log are checkpointed into the database, so the next start has them without it. */
static void rescue_wal(sl_store_t *s, const char *what)
{
    int64_t busy = -1; /* the first of the checkpoint's three columns */
    int rc = query_int(s, "PRAGMA wal_checkpoint(TRUNCATE)", &busy);
    if (rc == SQLITE_OK && busy == 0) {
        snprintf(s->fault_text, sizeof s->fault_text,
                 "the write-ahead log %s-wal %s while the scheduler had it open. Its committed "
                 "transactions were checkpointed into %s, and the offsets of what came after "
                 "were not committed, so no job is lost: start the scheduler again",
                 s->path, what, s->path);
        return;
    }
    snprintf(s->fault_text, sizeof s->fault_text,
             "the write-ahead log %s-wal %s while the scheduler had it open, and its committed "
             "transactions could not be checkpointed into %s (%s): the offsets of what came "
             "after were not committed, but jobs committed since the last checkpoint may be lost",
             s->path, what, s->path, rc == SQLITE_OK ? "busy" : sqlite3_errmsg(s->db));
}

/* How the path of file f no longer leads to the file this store has open: NULL when it does,
 * else "was deleted" or "was replaced". */
static const char *file_moved(const sl_store_t *s, int f)
{
    char path[PATH_CAP + 8];
    struct stat st;
    file_path(s, f, path, sizeof path);
    if (!s->id[f].known)
        return NULL;
    if (stat(path, &st) != 0)
        return errno == ENOENT || errno == ENOTDIR ? "was deleted" : NULL;
    return same_file(&s->id[f], &st) ? NULL : "was replaced";
}

sl_err_t sl_store_check(sl_store_t *s)
{
    if (s->fault != SL_STORE_FAULT_NONE)
        return SL_EDB;
    /* SQLite compares the path with the descriptor it writes (SQLITE_FCNTL_HAS_MOVED: deleted,
     * renamed or replaced), and the device and inode noted at open catch the rest. The link
     * count of the open file needs no check of its own: a file with none has no path, and its
     * path then fails or leads to another inode. */
    int moved = 0;
    if (sqlite3_file_control(s->db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) != SQLITE_OK)
        moved = 0;
    const char *db_how = file_moved(s, FILE_DB);
    if (moved && db_how == NULL)
        db_how = "was deleted or replaced";
    const char *wal_how = db_how == NULL ? file_moved(s, FILE_WAL) : NULL;
    const char *lock_how = NULL;
    struct stat st;
    if (db_how == NULL && wal_how == NULL) {
        if (fstat(s->lock_fd, &st) == 0 && st.st_nlink == 0)
            lock_how = "was deleted";
        else
            lock_how = file_moved(s, FILE_LOCK);
    }
    if (db_how == NULL && wal_how == NULL && lock_how == NULL)
        return SL_OK;
    s->fault = SL_STORE_FAULT_MOVED;
    int64_t now_ms = sl_now_ms();
    if (db_how != NULL) {
        char what[PATH_CAP + 64];
        snprintf(what, sizeof what, "the database %s %s", s->path, db_how);
        if (stat(s->path, &st) != 0)
            rescue_deleted(s, now_ms, what);
        else
            rescue_replaced(s, now_ms);
    } else if (wal_how != NULL) {
        rescue_wal(s, wal_how);
    } else {
        snprintf(s->fault_text, sizeof s->fault_text,
                 "the lock file %s.lock %s while the scheduler held it, so a second scheduler "
                 "could open %s at the same time; the scheduler stops (the database is intact, "
                 "and the offsets of the last work were not committed): start it again",
                 s->path, lock_how, s->path);
    }
    return SL_EDB;
}

static char *column_dup(sqlite3_stmt *st, int col)
{
    const unsigned char *v = sqlite3_column_text(st, col);
    return v != NULL ? strdup((const char *)v) : NULL;
}

sl_err_t sl_store_job_insert(sl_store_t *s, const sl_store_job_t *j, int64_t now_ms,
                             char **result_json)
{
    *result_json = NULL;
    sqlite3_stmt *st = bind(s, Q_JOB_INSERT, "ssssssssIIIIIsssI", j->job_id,
                            j->idempotency_key, j->tenant, j->app, j->env, j->key_id, j->route,
                            j->cls, j->submitted_ms, j->deadline_ms, j->est_input, j->est_output,
                            j->est_total, j->job_json, j->request_json, j->metadata_json, now_ms);
    sl_err_t rc = run(s, st, "job insert");
    if (rc != SL_OK)
        return rc;
    if (sqlite3_changes(s->db) == 1)
        return SL_OK;
    st = bind(s, Q_JOB_EXISTING, "s", j->job_id);
    if (sqlite3_step(st) == SQLITE_ROW &&
        strcmp((const char *)sqlite3_column_text(st, 0), "done") == 0)
        *result_json = column_dup(st, 1);
    sqlite3_reset(st);
    return SL_EEXISTS;
}

sl_err_t sl_store_job_result(sl_store_t *s, const char *job_id, char **result_json)
{
    *result_json = NULL;
    sqlite3_stmt *st = bind(s, Q_JOB_EXISTING, "s", job_id);
    sl_err_t rc = SL_ENOTFOUND;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != NULL &&
        strcmp((const char *)sqlite3_column_text(st, 0), "done") == 0 &&
        sqlite3_column_text(st, 1) != NULL) {
        *result_json = column_dup(st, 1);
        rc = *result_json != NULL ? SL_OK : SL_ENOMEM;
    }
    sqlite3_reset(st);
    return rc;
}

sl_err_t sl_store_job_json(sl_store_t *s, const char *job_id, char **json)
{
    *json = NULL;
    sqlite3_stmt *st = bind(s, Q_JOB_JSON, "s", job_id);
    sl_err_t rc = SL_ENOTFOUND;
    if (sqlite3_step(st) == SQLITE_ROW) {
        *json = column_dup(st, 0);
        rc = *json != NULL ? SL_OK : SL_ENOMEM;
    }
    sqlite3_reset(st);
    return rc;
}

sl_err_t sl_store_job_parts(sl_store_t *s, const char *job_id, char **request_json,
                            char **metadata_json)
{
    if (request_json != NULL)
        *request_json = NULL;
    if (metadata_json != NULL)
        *metadata_json = NULL;
    sqlite3_stmt *st = bind(s, Q_JOB_PARTS, "s", job_id);
    sl_err_t rc = SL_ENOTFOUND;
    if (sqlite3_step(st) == SQLITE_ROW) {
        rc = SL_OK;
        if (request_json != NULL)
            *request_json = column_dup(st, 0);
        if (metadata_json != NULL)
            *metadata_json = column_dup(st, 1);
    }
    sqlite3_reset(st);
    return rc;
}

sl_err_t sl_store_job_lease(sl_store_t *s, const char *job_id, int attempts,
                            int64_t lease_expires_ms, const char *reservation_id,
                            const char *deployment, int64_t now_ms)
{
    return run(s,
               bind(s, Q_JOB_LEASE, "iIssIIs", attempts, lease_expires_ms, reservation_id,
                    deployment, now_ms, now_ms, job_id),
               "job lease");
}

sl_err_t sl_store_job_requeue(sl_store_t *s, const char *job_id, int attempts,
                              int64_t not_before_ms, int64_t now_ms)
{
    return run(s, bind(s, Q_JOB_REQUEUE, "iIIs", attempts, not_before_ms, now_ms, job_id),
               "job requeue");
}

sl_err_t sl_store_job_forget(sl_store_t *s, const char *job_id)
{
    return run(s, bind(s, Q_JOB_FORGET, "s", job_id), "job forget");
}

sl_err_t sl_store_job_finish(sl_store_t *s, const char *job_id, const char *status,
                             const char *result_json, const char *topic, int64_t now_ms,
                             int64_t *seq)
{
    sl_err_t rc = run(s, bind(s, Q_JOB_FINISH, "ssIs", status, result_json, now_ms, job_id),
                      "job finish");
    if (rc != SL_OK)
        return rc;
    return sl_store_outbox_add(s, topic, job_id, result_json, now_ms, seq);
}

sl_err_t sl_store_each_unfinished(sl_store_t *s,
                                  void (*fn)(const sl_store_row_t *row, void *arg), void *arg)
{
    sqlite3_stmt *st = bind(s, Q_UNFINISHED, "");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        sl_store_row_t row;
        row.job_id = (const char *)sqlite3_column_text(st, 0);
        row.tenant = (const char *)sqlite3_column_text(st, 1);
        row.route = (const char *)sqlite3_column_text(st, 2);
        row.cls = (const char *)sqlite3_column_text(st, 3);
        row.state = (const char *)sqlite3_column_text(st, 4);
        row.reservation_id = (const char *)sqlite3_column_text(st, 5);
        row.deployment = (const char *)sqlite3_column_text(st, 6);
        row.attempts = sqlite3_column_int(st, 7);
        row.submitted_ms = sqlite3_column_int64(st, 8);
        row.deadline_ms = sqlite3_column_int64(st, 9);
        row.not_before_ms = sqlite3_column_int64(st, 10);
        row.est_input = sqlite3_column_int64(st, 11);
        row.est_output = sqlite3_column_int64(st, 12);
        row.est_total = sqlite3_column_int64(st, 13);
        row.lease_expires_ms = sqlite3_column_int64(st, 14);
        row.idempotency_key = (const char *)sqlite3_column_text(st, 15);
        row.key_id = (const char *)sqlite3_column_text(st, 16);
        fn(&row, arg);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SL_OK : db_err(s, "unfinished jobs");
}

enum { MAX_CHARGES_PER_RESERVATION = 16, CHARGES_TEXT_MAX = 8192 };

/* Appends str to buf as a JSON string literal; returns 0, or -1 when buf (cap) is too small.
 * Runs of characters that need no escape are copied at once: bucket ids rarely have any. */
static int append_json_string(char *buf, size_t *len, size_t cap, const char *str)
{
    size_t n = *len;
    if (n + 2 >= cap)
        return -1;
    buf[n++] = '"';
    for (const char *p = str; *p != '\0';) {
        size_t run = 0;
        while (p[run] != '\0' && p[run] != '"' && p[run] != '\\' && (unsigned char)p[run] >= 0x20)
            run++;
        if (n + run + 8 >= cap)
            return -1;
        memcpy(buf + n, p, run);
        n += run;
        p += run;
        if (*p == '\0')
            break;
        if (*p == '"' || *p == '\\') {
            buf[n++] = '\\';
            buf[n++] = *p;
        } else {
            n += (size_t)snprintf(buf + n, cap - n, "\\u%04x", (unsigned char)*p);
        }
        p++;
    }
    buf[n++] = '"';
    *len = n;
    return 0;
}

/* Appends a number as JSON: whole amounts (token and request counts, nearly all of them) as
 * integers written by hand, the rest with %.17g so they read back exactly. Returns 0, or -1
 * when buf (cap) is too small. snprintf's floating-point path was a tenth of a reservation's
 * write. */
static int append_json_number(char *buf, size_t *len, size_t cap, double v)
{
    if (cap - *len < 32)
        return -1;
    if (v == v && v > -1e15 && v < 1e15 && v == (double)(int64_t)v) {
        int64_t x = (int64_t)v;
        uint64_t u = x < 0 ? (uint64_t)-x : (uint64_t)x;
        char digits[24];
        int nd = 0;
        do {
            digits[nd++] = (char)('0' + u % 10);
            u /= 10;
        } while (u != 0);
        if (x < 0)
            buf[(*len)++] = '-';
        while (nd > 0)
            buf[(*len)++] = digits[--nd];
        return 0;
    }
    int w = snprintf(buf + *len, cap - *len, "%.17g", v);
    if (w < 0 || (size_t)w >= cap - *len)
        return -1;
    *len += (size_t)w;
    return 0;
}

/* Whether id begins with ms as 12 lowercase hex digits, as sl_store_res_t requires: what keeps
 * the reservations sorted by time and lets res_each_since read a range of the primary key. */
static int id_begins_with_ms(const char *id, int64_t ms)
{
    static const char hex[] = "0123456789abcdef";
    if (id == NULL || strnlen(id, 12) < 12)
        return 0;
    uint64_t v = (uint64_t)ms & 0xffffffffffffULL;
    for (int i = 11; i >= 0; i--) {
        if (id[i] != hex[v & 15])
            return 0;
        v >>= 4;
    }
    return 1;
}

/* Runs st, a change to one reservation, and moves the open count by delta when it changed a
 * row. In the caller's transaction the count is written at commit; outside one, the change and
 * the count get a transaction of their own. On failure nothing changed. */
static sl_err_t change_reservation(sl_store_t *s, sqlite3_stmt *st, int delta, const char *what)
{
    int own = sqlite3_get_autocommit(s->db);
    if (own) {
        /* st is bound already; BEGIN is a statement of its own and leaves it as it is. */
        sl_err_t rc = sl_store_begin(s);
        if (rc != SL_OK)
            return rc;
    }
    sl_err_t rc = run(s, st, what);
    if (rc == SL_OK && sqlite3_changes(s->db) == 1)
        s->open_delta += delta;
    if (own) {
        if (rc == SL_OK)
            rc = sl_store_commit(s);
        if (rc != SL_OK)
            sl_store_rollback(s);
    }
    return rc;
}

sl_err_t sl_store_res_open(sl_store_t *s, const sl_store_res_t *r, int ncharges,
                           const char *const *bucket_ids, const double *amounts,
                           const char *const *rules)
{
    if (ncharges < 0 || ncharges > MAX_CHARGES_PER_RESERVATION ||
        !id_begins_with_ms(r->reservation_id, r->created_ms))
        return SL_EINVAL;
    /* [["<bucket>", amount, "<rule>"], ...], built by hand: this runs on every admission. */
    char text[CHARGES_TEXT_MAX];
    size_t len = 0;
    text[len++] = '[';
    for (int i = 0; i < ncharges; i++) {
        if (len + 2 >= sizeof text)
            return SL_ETOOBIG;
        if (i > 0)
            text[len++] = ',';
        text[len++] = '[';
        if (append_json_string(text, &len, sizeof text, bucket_ids[i]) != 0)
            return SL_ETOOBIG;
        text[len++] = ',';
        if (append_json_number(text, &len, sizeof text, amounts[i]) != 0)
            return SL_ETOOBIG;
        text[len++] = ',';
        if (append_json_string(text, &len, sizeof text, rules[i]) != 0 || len + 3 >= sizeof text)
            return SL_ETOOBIG;
        text[len++] = ']';
    }
    text[len++] = ']';
    text[len] = '\0';
    sqlite3_stmt *st =
        bind(s, Q_RES_OPEN, "ssisIIIIs", r->reservation_id, r->job_id, r->attempt, r->deployment,
             r->est_input, r->est_output, r->created_ms, r->expires_ms, text);
    return change_reservation(s, st, +1, "reservation open");
}

sl_err_t sl_store_res_close(sl_store_t *s, const char *reservation_id, const char *state,
                            int64_t input, int64_t output, int64_t cached, const char *outcome,
                            int64_t now_ms, const double *settled, int nsettled)
{
    char text[64 * MAX_CHARGES_PER_RESERVATION];
    const char *settled_text = NULL;
    if (settled != NULL && nsettled > 0 && nsettled <= MAX_CHARGES_PER_RESERVATION) {
        size_t len = 0;
        text[len++] = '[';
        for (int i = 0; i < nsettled; i++) {
            if (i > 0)
                text[len++] = ',';
            if (isnan(settled[i])) {
                memcpy(text + len, "null", 4);
                len += 4;
            } else if (append_json_number(text, &len, sizeof text, settled[i]) != 0) {
                return SL_ETOOBIG; /* cannot happen: 16 numbers of at most 32 characters */
            }
        }
        text[len++] = ']';
        text[len] = '\0';
        settled_text = text;
    }
    sqlite3_stmt *st = bind(s, Q_RES_CLOSE, "sIIIsIss", state, input, output, cached, outcome,
                            now_ms, settled_text, reservation_id);
    if (input < 0)
        sqlite3_bind_null(st, 2);
    if (output < 0)
        sqlite3_bind_null(st, 3);
    if (cached < 0)
        sqlite3_bind_null(st, 4);
    /* Closing "as open" would leave the row open: the count moves only when the state does. */
    int delta = state != NULL && strcmp(state, "open") != 0 ? -1 : 0;
    return change_reservation(s, st, delta, "reservation close");
}

sl_err_t sl_store_res_charges(sl_store_t *s, const char *reservation_id,
                              void (*fn)(const char *bucket_id, double amount, const char *rule,
                                         void *arg),
                              void *arg)
{
    sqlite3_stmt *st = bind(s, Q_RES_CHARGES, "s", reservation_id);
    sl_err_t rc = SL_OK;
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        /* Read only at restart, so jansson is fine here. */
        json_t *charges = json_loads((const char *)sqlite3_column_text(st, 0), 0, NULL);
        size_t i;
        json_t *c;
        json_array_foreach(charges, i, c)
        {
            const char *bucket = json_string_value(json_array_get(c, 0));
            const char *rule = json_string_value(json_array_get(c, 2));
            if (bucket != NULL && rule != NULL)
                fn(bucket, json_number_value(json_array_get(c, 1)), rule, arg);
        }
        if (charges == NULL)
            rc = db_err(s, "reservation charges are not valid JSON");
        json_decref(charges);
    } else if (step != SQLITE_DONE) {
        rc = db_err(s, "reservation charges");
    }
    sqlite3_reset(st);
    return rc;
}

sl_err_t sl_store_res_each_since(sl_store_t *s, int64_t since_ms,
                                 void (*fn)(const char *bucket_id, double amount,
                                            int64_t created_ms, void *arg),
                                 void *arg)
{
    /* The smallest id created at since_ms: its 12 hex digits of time. Every id sorts after a
     * prefix of itself, and "" before all of them. */
    char lower[16] = "";
    if (since_ms > (int64_t)0xffffffffffffLL)
        return SL_OK; /* after the year 10889: nothing yet */
    if (since_ms > 0)
        snprintf(lower, sizeof lower, "%012llx", (unsigned long long)since_ms);
    sqlite3_stmt *st = bind(s, Q_RES_SINCE, "sI", lower, since_ms);
    sl_err_t rc = SL_OK;
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        /* Read only at restart, so jansson is fine here. */
        json_t *charges = json_loads((const char *)sqlite3_column_text(st, 0), 0, NULL);
        const char *settled_text = (const char *)sqlite3_column_text(st, 1);
        json_t *settled = settled_text != NULL ? json_loads(settled_text, 0, NULL) : NULL;
        int64_t created_ms = sqlite3_column_int64(st, 2);
        if (charges == NULL || (settled_text != NULL && settled == NULL)) {
            /* Reported, and the replay goes on: the other rows are still worth counting. */
            sl_error("reservation created at %lld: charges or settled are not valid JSON",
                     (long long)created_ms);
            rc = SL_EDB;
        }
        size_t i;
        json_t *c;
        json_array_foreach(charges, i, c)
        {
            const char *bucket = json_string_value(json_array_get(c, 0));
            json_t *amount = json_array_get(settled, i);
            if (!json_is_number(amount))
                amount = json_array_get(c, 1);
            if (bucket != NULL)
                fn(bucket, json_number_value(amount), created_ms, arg);
        }
        json_decref(charges);
        json_decref(settled);
    }
    if (step != SQLITE_DONE)
        rc = db_err(s, "reservations since");
    sqlite3_reset(st);
    return rc;
}

sl_err_t sl_store_res_prune(sl_store_t *s, int64_t before_ms, int max_rows, int *deleted)
{
    if (deleted != NULL)
        *deleted = 0;
    if (max_rows <= 0 || before_ms <= 0)
        return SL_OK;
    /* Every id created before before_ms sorts before its 12 hex digits of time. */
    char upper[16];
    int64_t ms = before_ms > (int64_t)0xffffffffffffLL ? (int64_t)0xffffffffffffLL : before_ms;
    snprintf(upper, sizeof upper, "%012llx", (unsigned long long)ms);
    sl_err_t rc = run(s, bind(s, Q_RES_PRUNE, "sIi", upper, before_ms, max_rows),
                      "reservations prune");
    if (rc == SL_OK && deleted != NULL)
        *deleted = sqlite3_changes(s->db);
    return rc;
}

sl_err_t sl_store_bucket_put(sl_store_t *s, const sl_store_bucket_t *b)
{
    if (b->bucket_id == NULL || b->scope == NULL || b->dimension == NULL || b->algorithm == NULL ||
        b->unit == NULL || b->source == NULL)
        return SL_EINVAL;
    return run(s,
               bind(s, Q_BUCKET_PUT, "ssssssdddIs", b->bucket_id, b->scope, b->dimension,
                    b->algorithm, b->unit, b->source, b->capacity, b->rate_per_min, b->level,
                    b->updated_ms, b->state),
               "bucket put");
}

sl_err_t sl_store_bucket_get(sl_store_t *s, const char *bucket_id, double *level,
                             int64_t *updated_ms, char **state)
{
    if (state != NULL)
        *state = NULL;
    sqlite3_stmt *st = bind(s, Q_BUCKET_GET, "s", bucket_id);
    sl_err_t rc = SL_ENOTFOUND;
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        char *text = NULL;
        rc = SL_OK;
        if (state != NULL && sqlite3_column_type(st, 2) != SQLITE_NULL) {
            text = column_dup(st, 2);
            if (text == NULL)
                rc = SL_ENOMEM;
        }
        if (rc == SL_OK) {
            *level = sqlite3_column_double(st, 0);
            *updated_ms = sqlite3_column_int64(st, 1);
            if (state != NULL)
                *state = text;
        }
    } else if (step != SQLITE_DONE) {
        rc = db_err(s, "bucket get");
    }
    sqlite3_reset(st);
    return rc;
}

sl_err_t sl_store_outbox_add(sl_store_t *s, const char *topic, const char *key,
                             const char *value, int64_t now_ms, int64_t *seq)
{
    sl_err_t rc = run(s, bind(s, Q_OUTBOX_ADD, "sssI", topic, key, value, now_ms), "outbox add");
    if (rc == SL_OK && seq != NULL)
        *seq = sqlite3_last_insert_rowid(s->db);
    return rc;
}

sl_err_t sl_store_outbox_delete(sl_store_t *s, int64_t seq)
{
    return run(s, bind(s, Q_OUTBOX_DEL, "I", seq), "outbox delete");
}

sl_err_t sl_store_outbox_each(sl_store_t *s,
                              void (*fn)(int64_t seq, const char *topic, const char *key,
                                         const char *value, void *arg),
                              void *arg)
{
    sqlite3_stmt *st = bind(s, Q_OUTBOX_EACH, "");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        fn(sqlite3_column_int64(st, 0), (const char *)sqlite3_column_text(st, 1),
           (const char *)sqlite3_column_text(st, 2), (const char *)sqlite3_column_text(st, 3),
           arg);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SL_OK : db_err(s, "outbox scan");
}

sl_err_t sl_store_estimate_record(sl_store_t *s, const char *route, const char *cls,
                                  const char *deployment, int64_t est_input, int64_t real_input,
                                  int64_t est_output, int64_t real_output)
{
    return run(s,
               bind(s, Q_ESTIMATE, "sssIIII", route, cls, deployment, est_input, real_input,
                    est_output, real_output),
               "estimate record");
}

static int64_t count(sqlite3_stmt *st)
{
    int64_t n = -1;
    if (sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return n;
}

int64_t sl_store_count_jobs(sl_store_t *s, const char *state)
{
    return count(bind(s, Q_COUNT_JOBS, "s", state));
}

int64_t sl_store_count_open_reservations(sl_store_t *s)
{
    int64_t n = count(bind(s, Q_COUNT_RES, ""));
    if (n >= 0 && !sqlite3_get_autocommit(s->db))
        n += s->open_delta; /* this transaction's, written at commit */
    return n;
}

sl_err_t sl_store_override_put(sl_store_t *s, const char *target, const char *field,
                               double value, int64_t now_ms)
{
    return run(s, bind(s, Q_OVERRIDE_PUT, "ssdI", target, field, value, now_ms), "override put");
}

sl_err_t sl_store_override_del(sl_store_t *s, const char *target, const char *field)
{
    return run(s, bind(s, Q_OVERRIDE_DEL, "ss", target, field), "override delete");
}

sl_err_t sl_store_override_each(sl_store_t *s,
                                void (*fn)(const char *target, const char *field, double value,
                                           void *arg),
                                void *arg)
{
    sqlite3_stmt *st = bind(s, Q_OVERRIDE_EACH, "");
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW)
        fn((const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1),
           sqlite3_column_double(st, 2), arg);
    sl_err_t rc = step == SQLITE_DONE ? SL_OK : db_err(s, "override each");
    sqlite3_reset(st);
    return rc;
}

void sl_store_job_info_free(sl_store_job_info_t *info)
{
    free(info->tenant);
    free(info->route);
    free(info->cls);
    free(info->state);
    free(info->status);
    free(info->deployment);
    free(info->result_json);
    memset(info, 0, sizeof *info);
}

sl_err_t sl_store_job_lookup(sl_store_t *s, const char *job_id, sl_store_job_info_t *info)
{
    memset(info, 0, sizeof *info);
    sqlite3_stmt *st = bind(s, Q_JOB_LOOKUP, "s", job_id);
    int step = sqlite3_step(st);
    sl_err_t rc = SL_ENOTFOUND;
    if (step == SQLITE_ROW) {
        info->tenant = column_dup(st, 0);
        info->route = column_dup(st, 1);
        info->cls = column_dup(st, 2);
        info->state = column_dup(st, 3);
        info->status = sqlite3_column_type(st, 4) != SQLITE_NULL ? column_dup(st, 4) : NULL;
        info->attempts = sqlite3_column_int(st, 5);
        info->submitted_ms = sqlite3_column_int64(st, 6);
        info->deadline_ms = sqlite3_column_int64(st, 7);
        info->deployment = sqlite3_column_type(st, 8) != SQLITE_NULL ? column_dup(st, 8) : NULL;
        info->result_json = sqlite3_column_type(st, 9) != SQLITE_NULL ? column_dup(st, 9) : NULL;
        rc = info->tenant != NULL && info->route != NULL && info->cls != NULL &&
                     info->state != NULL
                 ? SL_OK
                 : SL_ENOMEM;
        if (rc != SL_OK)
            sl_store_job_info_free(info);
    } else if (step != SQLITE_DONE) {
        rc = db_err(s, "job lookup");
    }
    sqlite3_reset(st);
    return rc;
}
