/* store.c - SQLite persistence for the scheduler (see store.h).
 *
 * Statements are prepared once; store_bind() takes a small format string so each query reads as one
 * line: 's' text, 'I' int64, 'i' int, 'd' double, 'n' NULL.
 *
 * The reservation row is written on every admission decision, so its path is kept short: the
 * charges are packed as JSON by hand, the table has no secondary index, and the number of open
 * reservations is a counter moved at commit (open_delta) instead of an index on state.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

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
    [Q_JOB_HAND_OVER] = "DELETE FROM jobs WHERE job_id = ? AND state <> 'done'",
    [Q_JOB_FINISH] = "UPDATE jobs SET state = 'done', status = ?, result_json = ?,"
                     " lease_expires_ms = NULL, updated_ms = ? WHERE job_id = ?",
    [Q_UNFINISHED] = "SELECT job_id, tenant, route, class, state, reservation_id, deployment,"
                     " attempts, submitted_ms, deadline_ms, not_before_ms, est_input, est_output,"
                     " est_total, COALESCE(lease_expires_ms, 0), idempotency_key, key_id,"
                     " length(CAST(job_json AS BLOB)) FROM jobs"
                     " WHERE state <> 'done' ORDER BY submitted_ms",
    [Q_RES_OPEN] = "INSERT INTO reservations (reservation_id, job_id, attempt, deployment,"
                   " est_input, est_output, created_ms, expires_ms, charges, state)"
                   " VALUES (?,?,?,?,?,?,?,?,?,'open')",
    [Q_RES_CLOSE] = "UPDATE reservations SET state = ?, actual_input = ?, actual_output = ?,"
                    " actual_cached = ?, outcome = ?, closed_ms = ?, settled = ?"
                    " WHERE reservation_id = ? AND state = 'open'",
    [Q_RES_CHARGES] = "SELECT charges FROM reservations WHERE reservation_id = ?",
    [Q_RES_REOPEN] = "UPDATE reservations SET state = 'open', expires_ms = ?, actual_input = NULL,"
                     " actual_output = NULL, actual_cached = NULL, outcome = NULL,"
                     " closed_ms = NULL, settled = NULL"
                     " WHERE reservation_id = ? AND state <> 'open'",
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
    [Q_JOB_TENANT] = "SELECT tenant FROM jobs WHERE job_id = ?",
    [Q_PBATCH_PUT] = "INSERT OR REPLACE INTO pbatches (batch_id, deployment, tenant, state,"
                     " provider_id, created_ms, updated_ms, jobs) VALUES (?,?,?,?,?,?,?,?)",
    [Q_PBATCH_STATE] = "UPDATE pbatches SET state = ?, provider_id = ?, updated_ms = ?"
                       " WHERE batch_id = ?",
    [Q_PBATCH_DEL] = "DELETE FROM pbatches WHERE batch_id = ?",
    [Q_PBATCH_EACH] = "SELECT batch_id, deployment, tenant, state, provider_id, created_ms,"
                      " updated_ms, jobs FROM pbatches ORDER BY created_ms, batch_id",
    [Q_META_GET] = "SELECT value FROM meta WHERE key = ?",
    [Q_META_PUT] = "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
    [Q_META_DEL] = "DELETE FROM meta WHERE key = ?",
    [Q_UNFINISHED_PAGE] = "SELECT rowid, tenant, job_json, job_id, submitted_ms FROM jobs"
                          " WHERE rowid > ? AND"
                          " (state <> 'done' OR job_id IN (SELECT msg_key FROM outbox))"
                          " ORDER BY rowid LIMIT ?",
};

sl_err_t store_db_err(sl_store_t *s, const char *what)
{
    sl_error("sqlite %s: %s", what, sqlite3_errmsg(s->db));
    store_note_fault(s, what);
    return SL_EDB;
}

/* Resets statement q and binds the arguments described by fmt. */
sqlite3_stmt *store_bind(sl_store_t *s, int q, const char *fmt, ...)
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
                 * the strings it bound go out of scope, and store_bind() clears old bindings. */
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
sl_err_t store_run(sl_store_t *s, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SL_OK : store_db_err(s, what);
}

sl_err_t store_exec_sql(sl_store_t *s, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        sl_error("sqlite: %s", msg != NULL ? msg : "?");
        sqlite3_free(msg);
        /* The statement names the fault well enough when it is one word (COMMIT, BEGIN). */
        store_note_fault(s, strlen(sql) < 24 ? sql : "statement");
        return SL_EDB;
    }
    return SL_OK;
}

/* Runs a query that yields one integer into *v; returns SQLite's code (SQLITE_OK or the
 * error). */
int store_query_int(sl_store_t *s, const char *sql, int64_t *v)
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
    store_file_path(s, FILE_LOCK, lock_path, sizeof lock_path);
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
    rc = store_prepare_file(s, &created, err, errlen);
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
        rc = store_check_pages(s, err, errlen);
        if (rc == SL_OK)
            rc = store_check_schema(s, err, errlen);
        if (rc != SL_OK)
            goto fail;
        /* Only a file known to be sluice's (another application's is left as it is). */
        store_restrict_modes(s);
    }
    if (store_exec_sql(s, schema) != SL_OK) {
        snprintf(err, errlen, "cannot apply SQL schema %s to %s: %s", sql_path, db_path,
                 sqlite3_errmsg(s->db));
        rc = SL_EDB;
        goto fail;
    }
    rc = store_check_applied(s, sql_path, err, errlen);
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
    rc = store_note_identity(s, err, errlen);
    if (rc != SL_OK)
        goto fail;
    store_start_checkpointer(s);
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
    store_stop_checkpointer(s); /* first: the writer's close is then the last, and checkpoints */
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

int64_t sl_store_memory_bytes(void)
{
    return (int64_t)sqlite3_memory_used();
}

void sl_store_release_map(sl_store_t *s)
{
    int64_t size = 0;
    if (store_query_int(s, "PRAGMA mmap_size", &size) != SQLITE_OK || size <= 0)
        return;
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA mmap_size = %lld", (long long)size);
    /* Reduced to nothing, SQLite unmaps the file at once; the size comes back for what follows. */
    if (sqlite3_exec(s->db, "PRAGMA mmap_size = 0", NULL, NULL, NULL) == SQLITE_OK)
        sqlite3_exec(s->db, sql, NULL, NULL, NULL);
}

int sl_store_synchronous(sl_store_t *s)
{
    int64_t v = -1;
    return store_query_int(s, "PRAGMA synchronous", &v) == SQLITE_OK ? (int)v : -1;
}

sl_store_fault_t sl_store_fault(const sl_store_t *s, const char **text)
{
    if (text != NULL)
        *text = s->fault_text;
    return s->fault;
}

sl_err_t sl_store_begin(sl_store_t *s)
{
    sl_err_t rc = store_exec_sql(s, "BEGIN IMMEDIATE");
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
        sl_err_t rc = store_run(s, store_bind(s, Q_COUNTER_ADD, "I", s->open_delta), "open count");
        if (rc != SL_OK)
            return rc;
        s->open_delta = 0;
    }
    sl_err_t rc = store_exec_sql(s, "COMMIT");
    if (rc == SL_OK) {
        s->commits++;
        store_ckpt_committed(s);
    }
    return rc;
}

void sl_store_rollback(sl_store_t *s)
{
    /* SQLite may have rolled the transaction back by itself (a full disk, an I/O error). */
    if (!sqlite3_get_autocommit(s->db))
        store_exec_sql(s, "ROLLBACK");
    s->open_delta = 0;
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
    sqlite3_stmt *st = store_bind(
        s, Q_JOB_INSERT, "ssssssssIIIIIsssI", j->job_id, j->idempotency_key, j->tenant, j->app,
        j->env, j->key_id, j->route, j->cls, j->submitted_ms, j->deadline_ms, j->est_input,
        j->est_output, j->est_total, j->job_json, j->request_json, j->metadata_json, now_ms);
    sl_err_t rc = store_run(s, st, "job insert");
    if (rc != SL_OK)
        return rc;
    if (sqlite3_changes(s->db) == 1)
        return SL_OK;
    st = store_bind(s, Q_JOB_EXISTING, "s", j->job_id);
    if (sqlite3_step(st) == SQLITE_ROW &&
        strcmp((const char *)sqlite3_column_text(st, 0), "done") == 0)
        *result_json = column_dup(st, 1);
    sqlite3_reset(st);
    return SL_EEXISTS;
}

sl_err_t sl_store_job_result(sl_store_t *s, const char *job_id, char **result_json)
{
    *result_json = NULL;
    sqlite3_stmt *st = store_bind(s, Q_JOB_EXISTING, "s", job_id);
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
    sqlite3_stmt *st = store_bind(s, Q_JOB_JSON, "s", job_id);
    sl_err_t rc = SL_ENOTFOUND;
    if (sqlite3_step(st) == SQLITE_ROW) {
        *json = column_dup(st, 0);
        rc = *json != NULL ? SL_OK : SL_ENOMEM;
    }
    sqlite3_reset(st);
    return rc;
}

/* The one text column of query q's row for key into out (cap bytes; "" when none):
 * SL_ENOTFOUND without a row. */
static sl_err_t select_text(sl_store_t *s, int q, const char *key, char *out, size_t cap,
                            const char *what)
{
    out[0] = '\0';
    sqlite3_stmt *st = store_bind(s, q, "s", key);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        snprintf(out, cap, "%s", v != NULL ? v : "");
    }
    sqlite3_reset(st);
    if (rc == SQLITE_ROW)
        return SL_OK;
    return rc == SQLITE_DONE ? SL_ENOTFOUND : store_db_err(s, what);
}

sl_err_t sl_store_job_tenant(sl_store_t *s, const char *job_id, char *tenant, size_t cap)
{
    return select_text(s, Q_JOB_TENANT, job_id, tenant, cap, "job tenant");
}

sl_err_t sl_store_meta_get(sl_store_t *s, const char *key, char *value, size_t cap)
{
    return select_text(s, Q_META_GET, key, value, cap, "meta");
}

sl_err_t sl_store_meta_put(sl_store_t *s, const char *key, const char *value)
{
    if (value == NULL)
        return store_run(s, store_bind(s, Q_META_DEL, "s", key), "meta");
    return store_run(s, store_bind(s, Q_META_PUT, "ss", key, value), "meta");
}

sl_err_t sl_store_unfinished_page(sl_store_t *s, int64_t after_rowid, int limit,
                                  void (*fn)(const sl_store_page_row_t *row, void *arg), void *arg,
                                  int *n)
{
    *n = 0;
    sqlite3_stmt *st = store_bind(s, Q_UNFINISHED_PAGE, "Ii", after_rowid, limit);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *json = (const char *)sqlite3_column_text(st, 2);
        sl_store_page_row_t row = {
            .rowid = sqlite3_column_int64(st, 0),
            .tenant = (const char *)sqlite3_column_text(st, 1),
            .job_json = json != NULL ? json : "",
            .len = (size_t)sqlite3_column_bytes(st, 2),
            .job_id = (const char *)sqlite3_column_text(st, 3),
            .submitted_ms = sqlite3_column_int64(st, 4),
        };
        fn(&row, arg);
        (*n)++;
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SL_OK : store_db_err(s, "unfinished jobs page");
}

sl_err_t sl_store_job_parts(sl_store_t *s, const char *job_id, char **request_json,
                            char **metadata_json)
{
    if (request_json != NULL)
        *request_json = NULL;
    if (metadata_json != NULL)
        *metadata_json = NULL;
    sqlite3_stmt *st = store_bind(s, Q_JOB_PARTS, "s", job_id);
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
    return store_run(s,
                     store_bind(s, Q_JOB_LEASE, "iIssIIs", attempts, lease_expires_ms,
                                reservation_id, deployment, now_ms, now_ms, job_id),
                     "job lease");
}

sl_err_t sl_store_job_requeue(sl_store_t *s, const char *job_id, int attempts,
                              int64_t not_before_ms, int64_t now_ms)
{
    return store_run(s,
                     store_bind(s, Q_JOB_REQUEUE, "iIIs", attempts, not_before_ms, now_ms, job_id),
                     "job requeue");
}

sl_err_t sl_store_job_forget(sl_store_t *s, const char *job_id)
{
    return store_run(s, store_bind(s, Q_JOB_FORGET, "s", job_id), "job forget");
}

sl_err_t sl_store_job_hand_over(sl_store_t *s, const char *job_id)
{
    return store_run(s, store_bind(s, Q_JOB_HAND_OVER, "s", job_id), "job hand over");
}

sl_err_t sl_store_job_finish(sl_store_t *s, const char *job_id, const char *status,
                             const char *result_json, const char *topic, int64_t now_ms,
                             int64_t *seq)
{
    sl_err_t rc = store_run(
        s, store_bind(s, Q_JOB_FINISH, "ssIs", status, result_json, now_ms, job_id), "job finish");
    if (rc != SL_OK)
        return rc;
    return sl_store_outbox_add(s, topic, job_id, result_json, now_ms, seq);
}

sl_err_t sl_store_each_unfinished(sl_store_t *s, void (*fn)(const sl_store_row_t *row, void *arg),
                                  void *arg)
{
    sqlite3_stmt *st = store_bind(s, Q_UNFINISHED, "");
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
        row.job_bytes = sqlite3_column_int64(st, 17);
        fn(&row, arg);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SL_OK : store_db_err(s, "unfinished jobs");
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
    sl_err_t rc = store_run(s, st, what);
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
        store_bind(s, Q_RES_OPEN, "ssisIIIIs", r->reservation_id, r->job_id, r->attempt,
                   r->deployment, r->est_input, r->est_output, r->created_ms, r->expires_ms, text);
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
    sqlite3_stmt *st = store_bind(s, Q_RES_CLOSE, "sIIIsIss", state, input, output, cached, outcome,
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

sl_err_t sl_store_res_exists(sl_store_t *s, const char *reservation_id, int *exists)
{
    sqlite3_stmt *st = store_bind(s, Q_RES_CHARGES, "s", reservation_id);
    int step = sqlite3_step(st);
    *exists = step == SQLITE_ROW;
    sl_err_t rc =
        step == SQLITE_ROW || step == SQLITE_DONE ? SL_OK : store_db_err(s, "reservation lookup");
    sqlite3_reset(st);
    return rc;
}

sl_err_t sl_store_res_reopen(sl_store_t *s, const char *reservation_id, int64_t expires_ms,
                             int *reopened)
{
    sl_err_t rc = store_run(s, store_bind(s, Q_RES_REOPEN, "Is", expires_ms, reservation_id),
                            "reservation reopen");
    *reopened = rc == SL_OK && sqlite3_changes(s->db) == 1;
    if (*reopened)
        s->open_delta++; /* counted at the caller's commit */
    return rc;
}

sl_err_t sl_store_res_charges(sl_store_t *s, const char *reservation_id,
                              void (*fn)(const char *bucket_id, double amount, const char *rule,
                                         void *arg),
                              void *arg)
{
    sqlite3_stmt *st = store_bind(s, Q_RES_CHARGES, "s", reservation_id);
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
            rc = store_db_err(s, "reservation charges are not valid JSON");
        json_decref(charges);
    } else if (step != SQLITE_DONE) {
        rc = store_db_err(s, "reservation charges");
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
    sqlite3_stmt *st = store_bind(s, Q_RES_SINCE, "sI", lower, since_ms);
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
        rc = store_db_err(s, "reservations since");
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
    sl_err_t rc = store_run(s, store_bind(s, Q_RES_PRUNE, "sIi", upper, before_ms, max_rows),
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
    return store_run(s,
                     store_bind(s, Q_BUCKET_PUT, "ssssssdddIs", b->bucket_id, b->scope,
                                b->dimension, b->algorithm, b->unit, b->source, b->capacity,
                                b->rate_per_min, b->level, b->updated_ms, b->state),
                     "bucket put");
}

sl_err_t sl_store_bucket_get(sl_store_t *s, const char *bucket_id, double *level,
                             int64_t *updated_ms, char **state)
{
    if (state != NULL)
        *state = NULL;
    sqlite3_stmt *st = store_bind(s, Q_BUCKET_GET, "s", bucket_id);
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
        rc = store_db_err(s, "bucket get");
    }
    sqlite3_reset(st);
    return rc;
}

sl_err_t sl_store_outbox_add(sl_store_t *s, const char *topic, const char *key, const char *value,
                             int64_t now_ms, int64_t *seq)
{
    sl_err_t rc =
        store_run(s, store_bind(s, Q_OUTBOX_ADD, "sssI", topic, key, value, now_ms), "outbox add");
    if (rc == SL_OK && seq != NULL)
        *seq = sqlite3_last_insert_rowid(s->db);
    return rc;
}

sl_err_t sl_store_outbox_delete(sl_store_t *s, int64_t seq)
{
    return store_run(s, store_bind(s, Q_OUTBOX_DEL, "I", seq), "outbox delete");
}

sl_err_t sl_store_outbox_each(sl_store_t *s,
                              void (*fn)(int64_t seq, const char *topic, const char *key,
                                         const char *value, void *arg),
                              void *arg)
{
    sqlite3_stmt *st = store_bind(s, Q_OUTBOX_EACH, "");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        fn(sqlite3_column_int64(st, 0), (const char *)sqlite3_column_text(st, 1),
           (const char *)sqlite3_column_text(st, 2), (const char *)sqlite3_column_text(st, 3), arg);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SL_OK : store_db_err(s, "outbox scan");
}

sl_err_t sl_store_estimate_record(sl_store_t *s, const char *route, const char *cls,
                                  const char *deployment, int64_t est_input, int64_t real_input,
                                  int64_t est_output, int64_t real_output)
{
    return store_run(s,
                     store_bind(s, Q_ESTIMATE, "sssIIII", route, cls, deployment, est_input,
                                real_input, est_output, real_output),
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
    return count(store_bind(s, Q_COUNT_JOBS, "s", state));
}

int64_t sl_store_count_open_reservations(sl_store_t *s)
{
    int64_t n = count(store_bind(s, Q_COUNT_RES, ""));
    if (n >= 0 && !sqlite3_get_autocommit(s->db))
        n += s->open_delta; /* this transaction's, written at commit */
    return n;
}

sl_err_t sl_store_override_put(sl_store_t *s, const char *target, const char *field, double value,
                               int64_t now_ms)
{
    return store_run(s, store_bind(s, Q_OVERRIDE_PUT, "ssdI", target, field, value, now_ms),
                     "override put");
}

sl_err_t sl_store_override_del(sl_store_t *s, const char *target, const char *field)
{
    return store_run(s, store_bind(s, Q_OVERRIDE_DEL, "ss", target, field), "override delete");
}

sl_err_t sl_store_override_each(sl_store_t *s,
                                void (*fn)(const char *target, const char *field, double value,
                                           void *arg),
                                void *arg)
{
    sqlite3_stmt *st = store_bind(s, Q_OVERRIDE_EACH, "");
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW)
        fn((const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1),
           sqlite3_column_double(st, 2), arg);
    sl_err_t rc = step == SQLITE_DONE ? SL_OK : store_db_err(s, "override each");
    sqlite3_reset(st);
    return rc;
}

sl_err_t sl_store_pbatch_put(sl_store_t *s, const sl_store_pbatch_t *b)
{
    return store_run(s,
                     store_bind(s, Q_PBATCH_PUT, "sssssIIs", b->batch_id, b->deployment, b->tenant,
                                b->state, b->provider_id, b->created_ms, b->updated_ms, b->jobs),
                     "provider batch put");
}

sl_err_t sl_store_pbatch_state(sl_store_t *s, const char *batch_id, const char *state,
                               const char *provider_id, int64_t now_ms)
{
    return store_run(s, store_bind(s, Q_PBATCH_STATE, "ssIs", state, provider_id, now_ms, batch_id),
                     "provider batch state");
}

sl_err_t sl_store_pbatch_del(sl_store_t *s, const char *batch_id)
{
    return store_run(s, store_bind(s, Q_PBATCH_DEL, "s", batch_id), "provider batch delete");
}

sl_err_t sl_store_pbatch_each(sl_store_t *s, void (*fn)(const sl_store_pbatch_t *b, void *arg),
                              void *arg)
{
    sqlite3_stmt *st = store_bind(s, Q_PBATCH_EACH, "");
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        sl_store_pbatch_t b = {
            .batch_id = (const char *)sqlite3_column_text(st, 0),
            .deployment = (const char *)sqlite3_column_text(st, 1),
            .tenant = (const char *)sqlite3_column_text(st, 2),
            .state = (const char *)sqlite3_column_text(st, 3),
            .provider_id = (const char *)sqlite3_column_text(st, 4),
            .created_ms = sqlite3_column_int64(st, 5),
            .updated_ms = sqlite3_column_int64(st, 6),
            .jobs = (const char *)sqlite3_column_text(st, 7),
        };
        fn(&b, arg);
    }
    sl_err_t rc = step == SQLITE_DONE ? SL_OK : store_db_err(s, "provider batch each");
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
    sqlite3_stmt *st = store_bind(s, Q_JOB_LOOKUP, "s", job_id);
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
        rc = info->tenant != NULL && info->route != NULL && info->cls != NULL && info->state != NULL
                 ? SL_OK
                 : SL_ENOMEM;
        if (rc != SL_OK)
            sl_store_job_info_free(info);
    } else if (step != SQLITE_DONE) {
        rc = store_db_err(s, "job lookup");
    }
    sqlite3_reset(st);
    return rc;
}
