/* store_schema.c - the store's schema versions (see store_int.h): the checks of a file's
 * version before and after schema/ledger.sql runs, and the migrations from older versions.
 */
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "store_int.h"
#include "util.h"

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
    /* 3 -> 4: provider batches (pbatches); nothing else changes. */
    [3] = "CREATE TABLE pbatches ("
          " batch_id TEXT PRIMARY KEY, deployment TEXT NOT NULL, tenant TEXT NOT NULL,"
          " state TEXT NOT NULL CHECK (state = 'creating' OR state = 'running'"
          "   OR state = 'collecting'),"
          " provider_id TEXT NOT NULL DEFAULT '', created_ms INTEGER NOT NULL,"
          " updated_ms INTEGER NOT NULL, jobs TEXT NOT NULL) WITHOUT ROWID;",
};

static sl_err_t migrate(sl_store_t *s, int from, char *err, size_t errlen)
{
    sl_info("%s has schema version %d: migrating it to %d in one transaction", s->path, from,
            SL_STORE_SCHEMA_VERSION);
    sl_err_t rc = store_exec_sql(s, "BEGIN IMMEDIATE");
    int v = from;
    for (; rc == SL_OK && v < SL_STORE_SCHEMA_VERSION; v++) {
        char bump[64];
        snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v + 1);
        rc = migration_sql[v] != NULL ? store_exec_sql(s, migration_sql[v]) : SL_EINVAL;
        if (rc == SL_OK)
            rc = store_exec_sql(s, bump);
        if (rc != SL_OK)
            break;
    }
    if (rc == SL_OK)
        rc = store_exec_sql(s, "COMMIT");
    if (rc != SL_OK) {
        snprintf(err, errlen,
                 "%s: migrating schema version %d to %d failed at step %d -> %d (%s); the file "
                 "is left at version %d, as it was",
                 s->path, from, SL_STORE_SCHEMA_VERSION, v, v + 1, sqlite3_errmsg(s->db), from);
        store_exec_sql(s, "ROLLBACK");
        return SL_EDB;
    }
    sl_info("%s migrated to schema version %d", s->path, SL_STORE_SCHEMA_VERSION);
    return SL_OK;
}

/* Reads what the existing file is, and migrates an older schema. A file with no table at all,
 * or only the beginning of sluice's (an open that failed while applying the schema), is as
 * good as new. */
sl_err_t store_check_schema(sl_store_t *s, char *err, size_t errlen)
{
    int64_t version = 0, app_id = 0, tables = 0, jobs = 0;
    if (store_query_int(s, "PRAGMA user_version", &version) != SQLITE_OK ||
        store_query_int(s, "PRAGMA application_id", &app_id) != SQLITE_OK ||
        store_query_int(s, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'", &tables) !=
            SQLITE_OK ||
        store_query_int(s,
                        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'jobs'",
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
sl_err_t store_check_applied(sl_store_t *s, const char *sql_path, char *err, size_t errlen)
{
    int64_t version = -1, sync = -1;
    if (store_query_int(s, "PRAGMA user_version", &version) != SQLITE_OK ||
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
