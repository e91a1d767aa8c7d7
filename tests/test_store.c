/* test_store.c - behaviour of the scheduler's SQLite store (scheduler/store.h): idempotent job
 * insert, the job state machine and its restore scan, reservations and their charges, the
 * open-reservation count and the replay of charges since a time, the outbox, bucket levels and
 * state, estimate statistics, transactions and the one-owner lock; and the store knowing when
 * it is not the truth: a database deleted or replaced while open, a corrupted file or one that
 * is not sluice's, durable commits, owner-only file modes, schema migration, pruning the
 * reservations a restart no longer needs, and a full disk.
 *
 * Each test opens a fresh database in its own mkdtemp() directory with the real schema
 * (schema/ledger.sql); tests run from the repository root. What the store has no reader for is
 * checked with a second, plain SQLite connection.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../scheduler/restore.h"
#include "../scheduler/sched.h"
#include "../scheduler/store.h"
#include "config.h"
#include "sign.h"
#include "util.h"

typedef struct {
    char dir[256];
    char db[300];
    char sql[1024];
    sl_store_t *store;
} env_t;

static void env_open(env_t *e)
{
    char err[512] = "";
    ck_assert_int_eq(sl_store_open(e->db, e->sql, &e->store, err, sizeof err), SL_OK);
    ck_assert_ptr_nonnull(e->store);
}

static void env_init(env_t *e)
{
    memset(e, 0, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/sluice-test-store-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(e->dir));
    snprintf(e->db, sizeof e->db, "%s/t.db", e->dir);
    sl_resolve_path("schema/ledger.sql", e->sql, sizeof e->sql);
    env_open(e);
}

/* Closes the store and removes the test directory with everything in it (rescued copies,
 * fixtures). */
static void env_done(env_t *e)
{
    sl_store_close(e->store);
    e->store = NULL;
    DIR *d = opendir(e->dir);
    struct dirent *ent;
    while (d != NULL && (ent = readdir(d)) != NULL) {
        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
            continue;
        char path[600];
        snprintf(path, sizeof path, "%s/%s", e->dir, ent->d_name);
        unlink(path);
    }
    if (d != NULL)
        closedir(d);
    rmdir(e->dir);
}

/* Runs a one-value query on a separate connection; returns the value as text (static) or
 * "NULL" / "<no row>". */
static const char *peek_sql(const env_t *e, const char *sql)
{
    static char out[512];
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open_v2(e->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    if (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *v = sqlite3_column_text(st, 0);
        snprintf(out, sizeof out, "%s", v != NULL ? (const char *)v : "NULL");
    } else {
        snprintf(out, sizeof out, "<no row>");
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

static sl_store_job_t job_row(const char *id, const char *tenant, int64_t submitted_ms)
{
    sl_store_job_t j = {
        .job_id = id,
        .idempotency_key = "idem-1",
        .tenant = tenant,
        .app = "web",
        .env = "prod",
        .key_id = "k1",
        .route = "chat",
        .cls = "standard",
        .submitted_ms = submitted_ms,
        .deadline_ms = submitted_ms + 60000,
        .est_input = 120,
        .est_output = 80,
        .est_total = 200,
        .job_json = "{\"job_id\":\"x\"}",
    };
    return j;
}

/* ---- provider batches --------------------------------------------------------------------- */

typedef struct {
    int n;
    char seen[4][200];
} pbatch_seen_t;

static void collect_pbatch(const sl_store_pbatch_t *b, void *arg)
{
    pbatch_seen_t *p = arg;
    if (p->n < 4)
        snprintf(p->seen[p->n], sizeof p->seen[0], "%s %s %s %s %s %lld %lld %s", b->batch_id,
                 b->deployment, b->tenant, b->state, b->provider_id, (long long)b->created_ms,
                 (long long)b->updated_ms, b->jobs);
    p->n++;
}

START_TEST(pbatch_rows_round_trip_oldest_first)
{
    env_t e;
    env_init(&e);
    sl_store_pbatch_t b2 = {"pb-2", "gpt/batch", "acme", "creating", "", 2000, 2000, "[\"j3\"]"};
    sl_store_pbatch_t b1 = {"pb-1", "gpt/batch", "beta", "creating", "", 1000, 1000,
                            "[\"j1\",\"j2\"]"};
    ck_assert_int_eq(sl_store_pbatch_put(e.store, &b2), SL_OK);
    ck_assert_int_eq(sl_store_pbatch_put(e.store, &b1), SL_OK);
    ck_assert_int_eq(sl_store_pbatch_state(e.store, "pb-1", "running", "batch_abc", 1500), SL_OK);
    pbatch_seen_t seen = {0};
    ck_assert_int_eq(sl_store_pbatch_each(e.store, collect_pbatch, &seen), SL_OK);
    ck_assert_int_eq(seen.n, 2);
    ck_assert_str_eq(seen.seen[0], "pb-1 gpt/batch beta running batch_abc 1000 1500 [\"j1\",\"j2\"]");
    ck_assert_str_eq(seen.seen[1], "pb-2 gpt/batch acme creating  2000 2000 [\"j3\"]");
    ck_assert_int_eq(sl_store_pbatch_del(e.store, "pb-1"), SL_OK);
    seen.n = 0;
    ck_assert_int_eq(sl_store_pbatch_each(e.store, collect_pbatch, &seen), SL_OK);
    ck_assert_int_eq(seen.n, 1);
    env_done(&e);
}
END_TEST

/* ---- jobs --------------------------------------------------------------------------------- */

START_TEST(duplicate_insert_returns_the_result_only_once_finished)
{
    env_t e;
    env_init(&e);
    ck_assert_int_eq(sl_store_is_new(e.store), 1);
    sl_store_job_t j = job_row("job-1", "acme", 1000);
    char *result = (char *)"garbage";
    ck_assert_int_eq(sl_store_job_insert(e.store, &j, 1000, &result), SL_OK);
    ck_assert_ptr_null(result);
    ck_assert_int_eq(sl_store_count_jobs(e.store, "queued"), 1);
    /* while unfinished: exists, nothing to re-send */
    result = (char *)"garbage";
    ck_assert_int_eq(sl_store_job_insert(e.store, &j, 1001, &result), SL_EEXISTS);
    ck_assert_ptr_null(result);
    ck_assert_int_eq(sl_store_job_lease(e.store, "job-1", 1, 5000, "res-1", "dep-a", 1002), SL_OK);
    result = (char *)"garbage";
    ck_assert_int_eq(sl_store_job_insert(e.store, &j, 1003, &result), SL_EEXISTS);
    ck_assert_ptr_null(result);
    /* the duplicate did not overwrite anything */
    ck_assert_str_eq(peek_sql(&e, "SELECT state FROM jobs WHERE job_id = 'job-1'"), "leased");
    ck_assert_str_eq(peek_sql(&e, "SELECT updated_ms FROM jobs WHERE job_id = 'job-1'"), "1002");
    /* once finished: the stored result comes back */
    int64_t seq = -1;
    const char *res_json = "{\"job_id\":\"job-1\",\"status\":\"succeeded\"}";
    ck_assert_int_eq(sl_store_job_finish(e.store, "job-1", "succeeded", res_json, "sluice.results",
                                         1004, &seq),
                     SL_OK);
    ck_assert_int_gt(seq, 0);
    ck_assert_int_eq(sl_store_job_insert(e.store, &j, 1005, &result), SL_EEXISTS);
    ck_assert_ptr_nonnull(result);
    ck_assert_str_eq(result, res_json);
    free(result);
    ck_assert_int_eq(sl_store_count_jobs(e.store, "done"), 1);
    ck_assert_int_eq(sl_store_count_jobs(e.store, "queued"), 0);
    env_done(&e);
}
END_TEST

typedef struct {
    int n;
    char ids[8][32];
    sl_store_row_t rows[8];
    char strs[8][8][64]; /* copies of the row's strings (they die after the callback) */
} rows_t;

static void copy_str(char *dst, const char *src)
{
    snprintf(dst, 64, "%s", src != NULL ? src : "(null)");
}

static void collect_row(const sl_store_row_t *row, void *arg)
{
    rows_t *r = arg;
    ck_assert_int_lt(r->n, 8);
    int i = r->n++;
    r->rows[i] = *row;
    copy_str(r->ids[i], row->job_id);
    copy_str(r->strs[i][0], row->tenant);
    copy_str(r->strs[i][1], row->route);
    copy_str(r->strs[i][2], row->cls);
    copy_str(r->strs[i][3], row->state);
    copy_str(r->strs[i][4], row->reservation_id);
    copy_str(r->strs[i][5], row->deployment);
    copy_str(r->strs[i][6], row->idempotency_key);
    copy_str(r->strs[i][7], row->key_id);
}

START_TEST(lease_requeue_finish_and_each_unfinished_restores_fields)
{
    env_t e;
    env_init(&e);
    char *result = NULL;
    sl_store_job_t j1 = job_row("job-1", "acme", 1000);
    sl_store_job_t j2 = job_row("job-2", "globex", 900); /* older: comes first */
    sl_store_job_t j3 = job_row("job-3", "acme", 1100);
    j2.cls = "batch";
    j2.est_input = 7;
    j2.est_output = 8;
    j2.est_total = 15;
    j2.job_json = "{\"job_id\":\"job-2\",\"idempotency_key\":\"i2\"}";
    ck_assert_int_eq(sl_store_job_insert(e.store, &j1, 1000, &result), SL_OK);
    ck_assert_int_eq(sl_store_job_insert(e.store, &j2, 1000, &result), SL_OK);
    ck_assert_int_eq(sl_store_job_insert(e.store, &j3, 1000, &result), SL_OK);
    char *json = NULL;
    ck_assert_int_eq(sl_store_job_json(e.store, "job-2", &json), SL_OK);
    ck_assert_str_eq(json, j2.job_json);
    free(json);
    json = (char *)"garbage";
    ck_assert_int_eq(sl_store_job_json(e.store, "nope", &json), SL_ENOTFOUND);
    ck_assert_ptr_null(json);

    ck_assert_int_eq(sl_store_job_lease(e.store, "job-1", 1, 61000, "res-a", "dep-a", 1010), SL_OK);
    ck_assert_int_eq(sl_store_count_jobs(e.store, "leased"), 1);
    rows_t r = {0};
    ck_assert_int_eq(sl_store_each_unfinished(e.store, collect_row, &r), SL_OK);
    ck_assert_int_eq(r.n, 3);
    ck_assert_str_eq(r.ids[0], "job-2");
    ck_assert_str_eq(r.ids[1], "job-1");
    ck_assert_str_eq(r.ids[2], "job-3");
    /* every field comes back */
    ck_assert_str_eq(r.strs[0][0], "globex");
    ck_assert_str_eq(r.strs[0][1], "chat");
    ck_assert_str_eq(r.strs[0][2], "batch");
    ck_assert_str_eq(r.strs[0][3], "queued");
    ck_assert_str_eq(r.strs[0][4], "(null)");
    ck_assert_str_eq(r.strs[0][6], "idem-1");
    ck_assert_str_eq(r.strs[0][7], "k1");
    ck_assert_int_eq(r.rows[0].attempts, 0);
    ck_assert_int_eq(r.rows[0].submitted_ms, 900);
    ck_assert_int_eq(r.rows[0].deadline_ms, 60900);
    ck_assert_int_eq(r.rows[0].not_before_ms, 0);
    ck_assert_int_eq(r.rows[0].est_input, 7);
    ck_assert_int_eq(r.rows[0].est_output, 8);
    ck_assert_int_eq(r.rows[0].est_total, 15);
    ck_assert_str_eq(r.strs[1][3], "leased");
    ck_assert_str_eq(r.strs[1][4], "res-a");
    ck_assert_str_eq(r.strs[1][5], "dep-a");
    ck_assert_int_eq(r.rows[1].attempts, 1);
    ck_assert_int_eq(r.rows[1].lease_expires_ms, 61000);

    /* a retry: queued again with its attempt count and backoff, no reservation */
    ck_assert_int_eq(sl_store_job_requeue(e.store, "job-1", 1, 3000, 1020), SL_OK);
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(sl_store_each_unfinished(e.store, collect_row, &r), SL_OK);
    ck_assert_int_eq(r.n, 3);
    ck_assert_str_eq(r.ids[1], "job-1");
    ck_assert_str_eq(r.strs[1][3], "queued");
    ck_assert_str_eq(r.strs[1][4], "(null)");
    ck_assert_int_eq(r.rows[1].attempts, 1);
    ck_assert_int_eq(r.rows[1].not_before_ms, 3000);
    ck_assert_int_eq(r.rows[1].lease_expires_ms, 0);
    ck_assert_int_eq(sl_store_count_jobs(e.store, "leased"), 0);
    ck_assert_int_eq(sl_store_count_jobs(e.store, "queued"), 3);

    /* second attempt, then done: it leaves the scan and its result is in the outbox */
    ck_assert_int_eq(sl_store_job_lease(e.store, "job-1", 2, 62000, "res-b", "dep-b", 3000), SL_OK);
    ck_assert_str_eq(peek_sql(&e, "SELECT first_dispatch_ms FROM jobs WHERE job_id = 'job-1'"),
                     "1010");
    int64_t seq = 0;
    ck_assert_int_eq(sl_store_job_finish(e.store, "job-1", "failed", "{\"r\":1}", "results", 3100,
                                         &seq),
                     SL_OK);
    ck_assert_str_eq(peek_sql(&e, "SELECT status FROM jobs WHERE job_id = 'job-1'"), "failed");
    ck_assert_str_eq(peek_sql(&e, "SELECT attempts FROM jobs WHERE job_id = 'job-1'"), "2");
    ck_assert_str_eq(peek_sql(&e, "SELECT lease_expires_ms FROM jobs WHERE job_id = 'job-1'"),
                     "NULL");
    ck_assert_str_eq(peek_sql(&e, "SELECT value FROM outbox WHERE msg_key = 'job-1'"),
                     "{\"r\":1}");
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(sl_store_each_unfinished(e.store, collect_row, &r), SL_OK);
    ck_assert_int_eq(r.n, 2);
    ck_assert_str_eq(r.ids[0], "job-2");
    ck_assert_str_eq(r.ids[1], "job-3");
    ck_assert_int_eq(sl_store_count_jobs(e.store, "done"), 1);

    /* the state survives a reopen */
    sl_store_close(e.store);
    env_open(&e);
    ck_assert_int_eq(sl_store_is_new(e.store), 0);
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(sl_store_each_unfinished(e.store, collect_row, &r), SL_OK);
    ck_assert_int_eq(r.n, 2);
    ck_assert_int_eq(sl_store_count_jobs(e.store, "done"), 1);
    env_done(&e);
}
END_TEST

START_TEST(job_parts_come_back_as_stored)
{
    env_t e;
    env_init(&e);
    char *result = NULL;
    sl_store_job_t j1 = job_row("job-1", "acme", 1000);
    j1.request_json = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    j1.metadata_json = "{\"ticket\":7}";
    sl_store_job_t j2 = job_row("job-2", "acme", 1000); /* no request text, no metadata */
    ck_assert_int_eq(sl_store_job_insert(e.store, &j1, 1000, &result), SL_OK);
    ck_assert_int_eq(sl_store_job_insert(e.store, &j2, 1000, &result), SL_OK);
    char *req = NULL, *meta = NULL;
    ck_assert_int_eq(sl_store_job_parts(e.store, "job-1", &req, &meta), SL_OK);
    ck_assert_str_eq(req, j1.request_json);
    ck_assert_str_eq(meta, j1.metadata_json);
    free(req);
    free(meta);
    ck_assert_int_eq(sl_store_job_parts(e.store, "job-1", NULL, &meta), SL_OK);
    ck_assert_str_eq(meta, j1.metadata_json);
    free(meta);
    req = meta = (char *)"garbage";
    ck_assert_int_eq(sl_store_job_parts(e.store, "job-2", &req, &meta), SL_OK);
    ck_assert_ptr_null(meta);
    free(req);
    req = meta = (char *)"garbage";
    ck_assert_int_eq(sl_store_job_parts(e.store, "nope", &req, &meta), SL_ENOTFOUND);
    ck_assert_ptr_null(req);
    ck_assert_ptr_null(meta);
    env_done(&e);
}
END_TEST

START_TEST(database_of_another_schema_version_is_refused)
{
    env_t e;
    env_init(&e);
    sl_store_close(e.store);
    e.store = NULL;
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(e.db, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    char err[512] = "";
    sl_store_t *s = (sl_store_t *)&e;
    ck_assert_int_eq(sl_store_open(e.db, e.sql, &s, err, sizeof err), SL_EDB);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err, "99") != NULL && strstr(err, "newer") != NULL, "err: %s", err);
    /* the refused database was left alone */
    ck_assert_str_eq(peek_sql(&e, "PRAGMA user_version"), "99");
    env_done(&e);
}
END_TEST

/* ---- reservations ------------------------------------------------------------------------- */

/* Reservation ids as the scheduler makes them: 12 hex digits of the creation ms, 4 of a counter,
 * 16 random. RES_Q's is 0 ms, the others' 1000 ms (0x3e8). */
#define RES_Q "0000000000000000aaaaaaaaaaaaaaaa"
#define RES_0 "0000000003e80000bbbbbbbbbbbbbbbb"
#define RES_1 "0000000003e80001cccccccccccccccc"
#define RES_2 "0000000003e80002dddddddddddddddd"

typedef struct {
    int n;
    char bucket[4][64];
    double amount[4];
    char rule[4][32];
} charges_t;

static void collect_charge(const char *bucket_id, double amount, const char *rule, void *arg)
{
    charges_t *c = arg;
    ck_assert_int_lt(c->n, 4);
    snprintf(c->bucket[c->n], sizeof c->bucket[0], "%s", bucket_id);
    c->amount[c->n] = amount;
    snprintf(c->rule[c->n], sizeof c->rule[0], "%s", rule);
    c->n++;
}

static int charge_index(const charges_t *c, const char *bucket)
{
    for (int i = 0; i < c->n; i++) {
        if (strcmp(c->bucket[i], bucket) == 0)
            return i;
    }
    return -1;
}

/* Bucket ids come from the config (deployment and tenant names): any character must survive
 * the trip through the packed charges. */
START_TEST(charges_with_quotes_and_backslashes_round_trip)
{
    env_t e;
    env_init(&e);
    sl_store_res_t res = {.reservation_id = RES_Q,
                          .job_id = "job-q",
                          .tenant = "t",
                          .route = "r",
                          .cls = "batch",
                          .deployment = "d",
                          .idempotency_key = "k",
                          .attempt = 1};
    const char *buckets[2] = {"tenant:we\"ird\\name:tokens", "deployment:tab\there:rpm"};
    const double amounts[2] = {12.25, 1};
    const char *rules[2] = {"actual_total", "keep"};
    ck_assert_int_eq(sl_store_res_open(e.store, &res, 2, buckets, amounts, rules), SL_OK);
    charges_t c = {0};
    ck_assert_int_eq(sl_store_res_charges(e.store, RES_Q, collect_charge, &c), SL_OK);
    ck_assert_int_eq(c.n, 2);
    ck_assert_int_eq(charge_index(&c, buckets[0]), 0);
    ck_assert_int_eq(charge_index(&c, buckets[1]), 1);
    ck_assert_double_eq(c.amount[0], 12.25);
    env_done(&e);
}
END_TEST

START_TEST(reservation_open_charges_settle_and_close)
{
    env_t e;
    env_init(&e);
    sl_store_res_t res = {
        .reservation_id = RES_1,
        .job_id = "job-1",
        .tenant = "acme",
        .route = "chat",
        .cls = "standard",
        .deployment = "dep-a",
        .idempotency_key = "idem-1",
        .attempt = 1,
        .est_input = 100,
        .est_output = 50,
        .created_ms = 1000,
        .expires_ms = 61000,
        .queue_deadline_ms = 90000,
    };
    const char *buckets[3] = {"tenant:acme:tokens", "deployment:dep-a:rpm",
                              "deployment:dep-a:tpm"};
    const double amounts[3] = {150, 1, 100.5};
    const char *rules[3] = {"actual_total", "keep", "keep"};
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 0);
    ck_assert_int_eq(sl_store_res_open(e.store, &res, 3, buckets, amounts, rules), SL_OK);
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 1);
    /* a reservation id is unique */
    ck_assert_int_ne(sl_store_res_open(e.store, &res, 3, buckets, amounts, rules), SL_OK);
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 1);
    /* a job whose path has no limits at all still has its reservation record (regression: it
     * was refused, and the scheduler retried the same failing step forever) */
    sl_store_res_t unlimited = res;
    unlimited.reservation_id = RES_0;
    ck_assert_int_eq(sl_store_res_open(e.store, &unlimited, 0, NULL, NULL, NULL), SL_OK);
    ck_assert_str_eq(peek_sql(&e, "SELECT charges FROM reservations WHERE reservation_id ="
                                  " '" RES_0 "'"),
                     "[]");
    ck_assert_int_eq(sl_store_res_close(e.store, RES_0, "reconciled", 1, 1, 0, "ok", 1500, NULL, 0),
                     SL_OK);
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 1);

    charges_t c = {0};
    ck_assert_int_eq(sl_store_res_charges(e.store, RES_1, collect_charge, &c), SL_OK);
    ck_assert_int_eq(c.n, 3);
    for (int i = 0; i < 3; i++) {
        /* charges come back in the order they were opened (settlements refer to it) */
        ck_assert_int_eq(charge_index(&c, buckets[i]), i);
        ck_assert_double_eq(c.amount[i], amounts[i]);
        ck_assert_str_eq(c.rule[i], rules[i]);
    }
    memset(&c, 0, sizeof c);
    ck_assert_int_eq(sl_store_res_charges(e.store, "nope", collect_charge, &c), SL_OK);
    ck_assert_int_eq(c.n, 0);

    ck_assert_str_eq(peek_sql(&e, "SELECT settled FROM reservations WHERE reservation_id ="
                                  " '" RES_1 "'"),
                     "NULL");
    const double settled[3] = {120, 1, NAN};
    ck_assert_int_eq(
        sl_store_res_close(e.store, RES_1, "reconciled", 90, 30, -1, "ok", 2000, settled, 3),
        SL_OK);
    ck_assert_str_eq(peek_sql(&e, "SELECT settled FROM reservations WHERE reservation_id ="
                                  " '" RES_1 "'"),
                     "[120,1,null]");
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 0);
    ck_assert_str_eq(peek_sql(&e, "SELECT state || ',' || actual_input || ',' || actual_output"
                                  " || ',' || outcome || ',' || closed_ms FROM reservations"
                                  " WHERE reservation_id = '" RES_1 "'"),
                     "reconciled,90,30,ok,2000");
    ck_assert_str_eq(
        peek_sql(&e, "SELECT actual_cached FROM reservations WHERE reservation_id = '" RES_1 "'"),
        "NULL");
    /* a closed reservation stays closed: a late second close changes nothing */
    ck_assert_int_eq(
        sl_store_res_close(e.store, RES_1, "expired", -1, -1, -1, "late", 3000, NULL, 0), SL_OK);
    ck_assert_str_eq(peek_sql(&e, "SELECT state || ',' || closed_ms FROM reservations WHERE"
                                  " reservation_id = '" RES_1 "'"),
                     "reconciled,2000");

    /* expiry with unknown usage */
    res.reservation_id = RES_2;
    res.attempt = 2;
    ck_assert_int_eq(sl_store_res_open(e.store, &res, 1, buckets + 1, amounts + 1, rules + 1),
                     SL_OK);
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 1);
    ck_assert_int_eq(
        sl_store_res_close(e.store, RES_2, "expired", -1, -1, -1, "lease_expired", 4000, NULL, 0),
        SL_OK);
    ck_assert_str_eq(peek_sql(&e, "SELECT settled FROM reservations WHERE reservation_id ="
                                  " '" RES_2 "'"),
                     "NULL");
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 0);
    ck_assert_str_eq(
        peek_sql(&e, "SELECT state FROM reservations WHERE reservation_id = '" RES_2 "'"),
        "expired");
    ck_assert_str_eq(peek_sql(&e, "SELECT actual_input FROM reservations WHERE reservation_id ="
                                  " '" RES_2 "'"),
                     "NULL");
    env_done(&e);
}
END_TEST

/* The store relies on ids that begin with their creation time (the range in res_each_since):
 * an id that does not is a caller's bug, refused before anything is written. */
START_TEST(reservation_id_must_begin_with_its_creation_time)
{
    env_t e;
    env_init(&e);
    sl_store_res_t res = {.job_id = "job-1",
                          .deployment = "dep-a",
                          .attempt = 1,
                          .created_ms = 1000,
                          .expires_ms = 61000};
    const char *buckets[1] = {"deployment:dep-a:rpm"};
    const double amounts[1] = {1};
    const char *rules[1] = {"keep"};
    static const char *const bad[] = {
        "res-1",                            /* no time at all */
        "0000000003e90001cccccccccccccccc", /* 1001 ms */
        "0000000003E80001CCCCCCCCCCCCCCCC", /* upper case sorts before lower case */
        "0000000003e",                      /* too short */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        res.reservation_id = bad[i];
        ck_assert_int_eq(sl_store_res_open(e.store, &res, 1, buckets, amounts, rules), SL_EINVAL);
    }
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM reservations"), "0");
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 0);
    res.reservation_id = RES_1;
    ck_assert_int_eq(sl_store_res_open(e.store, &res, 1, buckets, amounts, rules), SL_OK);
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 1);
    env_done(&e);
}
END_TEST

static const char *const COUNTER_SQL = "SELECT n FROM counters WHERE name = 'open_reservations'";

/* Open reservations are counted by a counter written with the rows (there is no index on state
 * to count them): it follows commits, rollbacks, failed and repeated changes and reopening, and
 * always equals the rows in state 'open'. */
START_TEST(open_count_follows_commit_rollback_and_reopen)
{
    env_t e;
    env_init(&e);
    sl_store_res_t res = {.job_id = "job-1",
                          .deployment = "dep-a",
                          .attempt = 1,
                          .created_ms = 1000,
                          .expires_ms = 61000};
    const char *buckets[1] = {"deployment:dep-a:rpm"};
    const double amounts[1] = {1};
    const char *rules[1] = {"keep"};
    /* in a transaction: counted at once, written at commit */
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    res.reservation_id = RES_0;
    ck_assert_int_eq(sl_store_res_open(e.store, &res, 1, buckets, amounts, rules), SL_OK);
    res.reservation_id = RES_1;
    ck_assert_int_eq(sl_store_res_open(e.store, &res, 1, buckets, amounts, rules), SL_OK);
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 2);
    ck_assert_str_eq(peek_sql(&e, COUNTER_SQL), "0");
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    ck_assert_str_eq(peek_sql(&e, COUNTER_SQL), "2");
    /* a rolled-back transaction takes its changes to the count along */
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    ck_assert_int_eq(sl_store_res_close(e.store, RES_0, "reconciled", 1, 1, 0, "ok", 2000, NULL, 0),
                     SL_OK);
    res.reservation_id = RES_2;
    ck_assert_int_eq(sl_store_res_open(e.store, &res, 1, buckets, amounts, rules), SL_OK);
    ck_assert_int_eq(sl_store_res_close(e.store, RES_2, "expired", -1, -1, -1, "x", 2000, NULL, 0),
                     SL_OK);
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 1);
    sl_store_rollback(e.store);
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 2);
    ck_assert_str_eq(peek_sql(&e, COUNTER_SQL), "2");
    /* outside a transaction each change commits with its count; closing a closed reservation,
     * or opening an id twice, changes nothing */
    ck_assert_int_eq(sl_store_res_close(e.store, RES_0, "reconciled", 1, 1, 0, "ok", 3000, NULL, 0),
                     SL_OK);
    ck_assert_str_eq(peek_sql(&e, COUNTER_SQL), "1");
    ck_assert_int_eq(
        sl_store_res_close(e.store, RES_0, "expired", -1, -1, -1, "late", 3001, NULL, 0), SL_OK);
    res.reservation_id = RES_1;
    ck_assert_int_ne(sl_store_res_open(e.store, &res, 1, buckets, amounts, rules), SL_OK);
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    ck_assert_int_ne(sl_store_res_open(e.store, &res, 1, buckets, amounts, rules), SL_OK);
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 1);
    /* reopened, the count is what was committed, and matches the rows */
    sl_store_close(e.store);
    env_open(&e);
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 1);
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM reservations WHERE state = 'open'"), "1");
    env_done(&e);
}
END_TEST

typedef struct {
    int n;
    char bucket[16][64];
    double amount[16];
    int64_t created_ms[16];
} replay_t;

static void collect_replay(const char *bucket_id, double amount, int64_t created_ms, void *arg)
{
    replay_t *r = arg;
    ck_assert_int_lt(r->n, 16);
    snprintf(r->bucket[r->n], sizeof r->bucket[0], "%s", bucket_id);
    r->amount[r->n] = amount;
    r->created_ms[r->n] = created_ms;
    r->n++;
}

static replay_t replay_since(env_t *e, int64_t since_ms)
{
    replay_t r;
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(sl_store_res_each_since(e->store, since_ms, collect_replay, &r), SL_OK);
    return r;
}

/* After a restart the ledger replays what was admitted since a bucket's last save: every charge
 * of the reservations created at or after a time, oldest first, at the settled amount when
 * there is one. The ids' hex time must order correctly across digit boundaries (255 = 0xff ms
 * before 256 = 0x100 ms) and at today's clock. */
START_TEST(each_since_replays_charges_from_a_time_on_oldest_first)
{
    env_t e;
    env_init(&e);
    /* opened out of time order: the replay follows creation time, not insertion */
    static const int64_t created[] = {4096, 255, 1800000000000LL, 256, 256};
    char ids[5][33];
    const char *buckets[2] = {"tenant:acme:tpm", "deployment:dep-a:rpm"};
    const char *rules[2] = {"actual_total", "keep"};
    for (int i = 0; i < 5; i++) {
        snprintf(ids[i], sizeof ids[i], "%012llx%04x%016x", (unsigned long long)created[i], i,
                 0xabcdefu);
        sl_store_res_t res = {.reservation_id = ids[i],
                              .job_id = "job-1",
                              .deployment = "dep-a",
                              .attempt = 1,
                              .created_ms = created[i],
                              .expires_ms = 61000};
        const double amounts[2] = {100.0 + i, 1};
        ck_assert_int_eq(sl_store_res_open(e.store, &res, 2, buckets, amounts, rules), SL_OK);
    }
    /* ids[3] (256 ms) settled at 40 tokens, its request kept as charged; ids[0] expired */
    const double settled[2] = {40, NAN};
    ck_assert_int_eq(
        sl_store_res_close(e.store, ids[3], "reconciled", 30, 10, 0, "ok", 900, settled, 2), SL_OK);
    ck_assert_int_eq(
        sl_store_res_close(e.store, ids[0], "expired", -1, -1, -1, "lease_expired", 5000, NULL, 0),
        SL_OK);

    replay_t r = replay_since(&e, 256);
    ck_assert_int_eq(r.n, 8);
    static const int64_t want_ms[] = {
        256, 256, 256, 256, 4096, 4096, 1800000000000LL, 1800000000000LL};
    static const double want_amount[] = {40, 1, 104, 1, 100, 1, 102, 1};
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(r.created_ms[i], want_ms[i]);
        ck_assert_double_eq(r.amount[i], want_amount[i]);
        ck_assert_str_eq(r.bucket[i], buckets[i % 2]);
    }
    r = replay_since(&e, 0);
    ck_assert_int_eq(r.n, 10);
    ck_assert_int_eq(r.created_ms[0], 255);
    ck_assert_double_eq(r.amount[0], 101);
    r = replay_since(&e, 257);
    ck_assert_int_eq(r.n, 4);
    ck_assert_int_eq(r.created_ms[0], 4096);
    r = replay_since(&e, 1800000000000LL);
    ck_assert_int_eq(r.n, 2);
    r = replay_since(&e, 1800000000001LL);
    ck_assert_int_eq(r.n, 0);
    env_done(&e);
}
END_TEST

/* The schema's CHECKs are written with = instead of IN (...) for speed: they must still refuse
 * an unknown state and accept every known one. */
START_TEST(state_checks_refuse_unknown_states)
{
    env_t e;
    env_init(&e);
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(e.db, &db), SQLITE_OK);
    static const char *const refused[] = {
        "INSERT INTO reservations (reservation_id, job_id, attempt, deployment, est_input,"
        " est_output, created_ms, expires_ms, charges, state) VALUES ('x', 'j', 1, 'd', 0, 0,"
        " 0, 0, '[]', 'closed')",
        "INSERT INTO jobs (job_id, idempotency_key, tenant, app, env, key_id, route, class,"
        " state, submitted_ms, deadline_ms, est_input, est_output, est_total, job_json,"
        " updated_ms) VALUES ('j', 'i', 't', 'a', 'e', 'k', 'r', 'c', 'running', 0, 0, 0, 0, 0,"
        " '{}', 0)",
        "INSERT INTO jobs (job_id, idempotency_key, tenant, app, env, key_id, route, class,"
        " state, status, submitted_ms, deadline_ms, est_input, est_output, est_total, job_json,"
        " updated_ms) VALUES ('j', 'i', 't', 'a', 'e', 'k', 'r', 'c', 'done', 'ok', 0, 0, 0, 0,"
        " 0, '{}', 0)",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        ck_assert_int_eq(sqlite3_exec(db, refused[i], NULL, NULL, NULL), SQLITE_CONSTRAINT);
    static const char *const states[] = {"open", "reconciled", "expired"};
    for (int i = 0; i < 3; i++) {
        char sql[512];
        snprintf(sql, sizeof sql,
                 "INSERT INTO reservations (reservation_id, job_id, attempt, deployment,"
                 " est_input, est_output, created_ms, expires_ms, charges, state) VALUES"
                 " ('r%d', 'j', 1, 'd', 0, 0, 0, 0, '[]', '%s')",
                 i, states[i]);
        ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    }
    static const char *const statuses[] = {"succeeded", "failed", "rejected", "expired",
                                           "cancelled"};
    for (int i = 0; i < 5; i++) {
        char sql[512];
        snprintf(sql, sizeof sql,
                 "INSERT INTO jobs (job_id, idempotency_key, tenant, app, env, key_id, route,"
                 " class, state, status, submitted_ms, deadline_ms, est_input, est_output,"
                 " est_total, job_json, updated_ms) VALUES ('j%d', 'i', 't', 'a', 'e', 'k', 'r',"
                 " 'c', '%s', %s%s%s, 0, 0, 0, 0, 0, '{}', 0)",
                 i,
                 i < 3    ? "done"
                 : i == 3 ? "queued"
                          : "leased",
                 i == 4 ? "" : "'", i == 4 ? "NULL" : statuses[i], i == 4 ? "" : "'");
        ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s", sql);
    }
    sqlite3_close(db);
    env_done(&e);
}
END_TEST

/* ---- outbox ------------------------------------------------------------------------------- */

typedef struct {
    int n;
    int64_t seq[8];
    char text[8][128];
} outbox_rows_t;

static void collect_outbox(int64_t seq, const char *topic, const char *key, const char *value,
                           void *arg)
{
    outbox_rows_t *o = arg;
    ck_assert_int_lt(o->n, 8);
    o->seq[o->n] = seq;
    snprintf(o->text[o->n], sizeof o->text[0], "%s|%s|%s", topic, key, value);
    o->n++;
}

START_TEST(outbox_add_each_delete)
{
    env_t e;
    env_init(&e);
    int64_t s1 = 0, s2 = 0, s3 = 0;
    ck_assert_int_eq(sl_store_outbox_add(e.store, "sluice.results", "j1", "{\"a\":1}", 10, &s1),
                     SL_OK);
    ck_assert_int_eq(sl_store_outbox_add(e.store, "sluice.results", "j2", "{\"a\":2}", 11, &s2),
                     SL_OK);
    ck_assert_int_eq(sl_store_outbox_add(e.store, "other", "j3", "{\"a\":3}", 12, &s3), SL_OK);
    ck_assert_int_eq(sl_store_outbox_add(e.store, "other", "j4", "{}", 13, NULL), SL_OK);
    ck_assert_int_lt(s1, s2);
    ck_assert_int_lt(s2, s3);
    outbox_rows_t o = {0};
    ck_assert_int_eq(sl_store_outbox_each(e.store, collect_outbox, &o), SL_OK);
    ck_assert_int_eq(o.n, 4);
    ck_assert_int_eq(o.seq[0], s1);
    ck_assert_str_eq(o.text[0], "sluice.results|j1|{\"a\":1}");
    ck_assert_str_eq(o.text[2], "other|j3|{\"a\":3}");
    ck_assert_int_eq(sl_store_outbox_delete(e.store, s2), SL_OK);
    ck_assert_int_eq(sl_store_outbox_delete(e.store, s2), SL_OK); /* idempotent ack */
    memset(&o, 0, sizeof o);
    ck_assert_int_eq(sl_store_outbox_each(e.store, collect_outbox, &o), SL_OK);
    ck_assert_int_eq(o.n, 3);
    ck_assert_int_eq(o.seq[0], s1);
    ck_assert_int_eq(o.seq[1], s3);
    /* sequence numbers are never reused, even after the newest row was deleted */
    ck_assert_int_eq(sl_store_outbox_delete(e.store, o.seq[2]), SL_OK);
    int64_t s5 = 0;
    ck_assert_int_eq(sl_store_outbox_add(e.store, "t", "j5", "{}", 14, &s5), SL_OK);
    ck_assert_int_gt(s5, o.seq[2]);
    env_done(&e);
}
END_TEST

/* ---- ownership, buckets, estimates, transactions ------------------------------------------ */

typedef struct {
    char ids[8][32];
    char tenants[8][32];
    int64_t last_rowid;
    int n;
} page_t;

static void page_row(const sl_store_page_row_t *row, void *arg)
{
    page_t *p = arg;
    ck_assert_int_gt(row->rowid, p->last_rowid);
    ck_assert_uint_eq(row->len, strlen(row->job_json));
    ck_assert_ptr_nonnull(strstr(row->job_json, row->job_id));
    ck_assert_int_ge(row->submitted_ms, 1000);
    ck_assert_int_lt(p->n, 8);
    p->last_rowid = row->rowid;
    snprintf(p->tenants[p->n], sizeof p->tenants[0], "%s", row->tenant);
    snprintf(p->ids[p->n++], sizeof p->ids[0], "%s", row->job_json);
}

/* Walks the changelog snapshot's rows a page at a time; returns how many in all. */
static int walk_pages(env_t *e, int limit, page_t *all)
{
    memset(all, 0, sizeof *all);
    for (;;) {
        page_t p = {.last_rowid = all->last_rowid};
        int n = 0;
        ck_assert_int_eq(
            sl_store_unfinished_page(e->store, all->last_rowid, limit, page_row, &p, &n), SL_OK);
        ck_assert_int_eq(n, p.n);
        for (int i = 0; i < p.n; i++) {
            memcpy(all->ids[all->n], p.ids[i], sizeof p.ids[i]);
            memcpy(all->tenants[all->n++], p.tenants[i], sizeof p.tenants[i]);
        }
        all->last_rowid = p.last_rowid;
        if (n < limit)
            return all->n;
    }
}

/* The changelog's snapshot takes every unfinished job, and a finished one until its result has
 * left the outbox: a job finished with its result still unacknowledged ends in the changelog only
 * once the broker has the result, so a snapshot that left it out lost it with the disk (its
 * job record before the snapshot is not read). */
START_TEST(unfinished_page_walks_unfinished_jobs_and_those_with_a_result_in_the_outbox)
{
    env_t e;
    env_init(&e);
    const char *ids[] = {"job-a", "job-b", "job-c", "job-d"};
    for (int i = 0; i < 4; i++) {
        sl_store_job_t j = job_row(ids[i], i == 2 ? "beta" : "acme", 1000 + i);
        char text[64];
        snprintf(text, sizeof text, "{\"job_id\":\"%s\"}", ids[i]);
        j.job_json = text;
        char *result = NULL;
        ck_assert_int_eq(sl_store_job_insert(e.store, &j, 1000, &result), SL_OK);
    }
    ck_assert_int_eq(sl_store_job_lease(e.store, "job-c", 1, 5000, "res-1", "dep-a", 1010), SL_OK);
    int64_t seq_b = 0, seq_d = 0;
    ck_assert_int_eq(
        sl_store_job_finish(e.store, "job-b", "succeeded", "{}", "sluice.results", 1020, &seq_b),
        SL_OK);
    ck_assert_int_eq(
        sl_store_job_finish(e.store, "job-d", "failed", "{}", "sluice.results", 1021, &seq_d),
        SL_OK);
    ck_assert_int_eq(sl_store_outbox_delete(e.store, seq_d), SL_OK); /* d's result is out */
    page_t all;
    for (int limit = 1; limit <= 5; limit += 2) {
        ck_assert_int_eq(walk_pages(&e, limit, &all), 3);
        ck_assert_str_eq(all.ids[0], "{\"job_id\":\"job-a\"}");
        ck_assert_str_eq(all.ids[1], "{\"job_id\":\"job-b\"}");
        ck_assert_str_eq(all.ids[2], "{\"job_id\":\"job-c\"}");
        ck_assert_str_eq(all.tenants[2], "beta");
    }
    ck_assert_int_eq(sl_store_outbox_delete(e.store, seq_b), SL_OK);
    ck_assert_int_eq(walk_pages(&e, 2, &all), 2);
    char tenant[32];
    ck_assert_int_eq(sl_store_job_tenant(e.store, "job-c", tenant, sizeof tenant), SL_OK);
    ck_assert_str_eq(tenant, "beta");
    ck_assert_int_eq(sl_store_job_tenant(e.store, "job-x", tenant, sizeof tenant),
                     SL_ENOTFOUND);
    ck_assert_str_eq(tenant, "");
    /* the store's own notes (a restore from the changelog not yet finished) */
    char note[16];
    ck_assert_int_eq(sl_store_meta_get(e.store, "changelog_restore", note, sizeof note),
                     SL_ENOTFOUND);
    ck_assert_int_eq(sl_store_meta_put(e.store, "changelog_restore", "taking jobs in"), SL_OK);
    ck_assert_int_eq(sl_store_meta_get(e.store, "changelog_restore", note, sizeof note), SL_OK);
    ck_assert_str_eq(note, "taking jobs in");
    char small[8];
    ck_assert_int_eq(sl_store_meta_get(e.store, "changelog_restore", small, sizeof small), SL_OK);
    ck_assert_str_eq(small, "taking "); /* cut to the room given */
    ck_assert_int_eq(sl_store_meta_put(e.store, "changelog_restore", NULL), SL_OK);
    ck_assert_int_eq(sl_store_meta_get(e.store, "changelog_restore", note, sizeof note),
                     SL_ENOTFOUND);
    env_done(&e);
}
END_TEST

START_TEST(second_open_of_the_same_db_is_ebusy)
{
    env_t e;
    env_init(&e);
    char err[512] = "";
    sl_store_t *other = (sl_store_t *)&e; /* must be reset to NULL */
    ck_assert_int_eq(sl_store_open(e.db, e.sql, &other, err, sizeof err), SL_EBUSY);
    ck_assert_ptr_null(other);
    ck_assert_msg(strlen(err) > 0, "no reason given");
    /* the first owner is unaffected */
    sl_store_job_t j = job_row("job-1", "acme", 1000);
    char *result = NULL;
    ck_assert_int_eq(sl_store_job_insert(e.store, &j, 1000, &result), SL_OK);
    /* once it closes, the file can be taken over */
    sl_store_close(e.store);
    e.store = NULL;
    ck_assert_int_eq(sl_store_open(e.db, e.sql, &other, err, sizeof err), SL_OK);
    ck_assert_int_eq(sl_store_count_jobs(other, "queued"), 1);
    e.store = other;
    env_done(&e);
}
END_TEST

START_TEST(open_with_a_missing_schema_fails_cleanly)
{
    env_t e;
    env_init(&e);
    char db2[400], err[512] = "";
    snprintf(db2, sizeof db2, "%s/u.db", e.dir);
    sl_store_t *s = (sl_store_t *)&e;
    ck_assert_int_ne(sl_store_open(db2, "/nonexistent/ledger.sql", &s, err, sizeof err), SL_OK);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err, "ledger.sql") != NULL, "err: %s", err);
    /* the failed open released its lock, and left nothing that blocks the next open (it may
     * have created an empty database file) */
    ck_assert_msg(sl_store_open(db2, e.sql, &s, err, sizeof err) == SL_OK, "reopen: %s", err);
    sl_store_close(s);
    sl_store_close(NULL);
    char path[450];
    static const char *const suffixes[] = {"", "-wal", "-shm", ".lock"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s%s", db2, suffixes[i]);
        unlink(path);
    }
    env_done(&e);
}
END_TEST

/* A token bucket's row: absent at first, then its level and time; written again, it is one row
 * with the new limits, and debt (a negative level) is kept. */
START_TEST(bucket_save_and_load)
{
    env_t e;
    env_init(&e);
    double level = 123;
    int64_t updated = 456;
    ck_assert_int_eq(sl_store_bucket_get(e.store, "deployment:a:tpm", &level, &updated, NULL),
                     SL_ENOTFOUND);
    sl_store_bucket_t b = {.bucket_id = "deployment:a:tpm", .scope = "deployment:a",
                           .dimension = "tpm", .algorithm = "token_bucket", .unit = "tokens",
                           .source = "config", .capacity = 1000, .rate_per_min = 60000,
                           .level = 512.25, .updated_ms = 7000};
    ck_assert_int_eq(sl_store_bucket_put(e.store, &b), SL_OK);
    ck_assert_int_eq(sl_store_bucket_get(e.store, "deployment:a:tpm", &level, &updated, NULL),
                     SL_OK);
    ck_assert_double_eq(level, 512.25);
    ck_assert_int_eq(updated, 7000);
    /* saving again updates the row; debt (negative) is kept */
    b.capacity = 2000;
    b.rate_per_min = 120000;
    b.level = -42.5;
    b.updated_ms = 8000;
    ck_assert_int_eq(sl_store_bucket_put(e.store, &b), SL_OK);
    ck_assert_int_eq(sl_store_bucket_get(e.store, "deployment:a:tpm", &level, &updated, NULL),
                     SL_OK);
    ck_assert_double_eq(level, -42.5);
    ck_assert_int_eq(updated, 8000);
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM buckets"), "1");
    ck_assert_str_eq(peek_sql(&e, "SELECT capacity FROM buckets"), "2000.0");
    env_done(&e);
}
END_TEST

/* A bucket's full row with the state its algorithm keeps (window counters), read back after a
 * restart. */
START_TEST(bucket_put_and_get_keep_the_state)
{
    env_t e;
    env_init(&e);
    sl_store_bucket_t b = {.bucket_id = "tenant:acme:rpd",
                           .scope = "tenant:acme",
                           .dimension = "requests",
                           .algorithm = "sliding_window",
                           .unit = "requests",
                           .source = "config",
                           .capacity = 1000,
                           .rate_per_min = 1000.0 / 1440,
                           .level = 250.5,
                           .updated_ms = 9000,
                           .state = "{\"windows\":[3,4]}"};
    double level = 1;
    int64_t updated = 2;
    char *state = (char *)"garbage";
    ck_assert_int_eq(sl_store_bucket_get(e.store, b.bucket_id, &level, &updated, &state),
                     SL_ENOTFOUND);
    ck_assert_ptr_null(state);
    ck_assert_double_eq(level, 1);
    ck_assert_int_eq(updated, 2);

    ck_assert_int_eq(sl_store_bucket_put(e.store, &b), SL_OK);
    ck_assert_int_eq(sl_store_bucket_get(e.store, b.bucket_id, &level, &updated, &state), SL_OK);
    ck_assert_double_eq(level, 250.5);
    ck_assert_int_eq(updated, 9000);
    ck_assert_str_eq(state, "{\"windows\":[3,4]}");
    free(state);
    ck_assert_str_eq(peek_sql(&e, "SELECT algorithm || ',' || unit || ',' || source FROM buckets"),
                     "sliding_window,requests,config");

    /* get without the state (state = NULL) reads the same row */
    level = 0;
    ck_assert_int_eq(sl_store_bucket_get(e.store, b.bucket_id, &level, &updated, NULL), SL_OK);
    ck_assert_double_eq(level, 250.5);
    ck_assert_int_eq(updated, 9000);

    /* put replaces the whole row: no state now */
    b.state = NULL;
    b.level = -7.25;
    ck_assert_int_eq(sl_store_bucket_put(e.store, &b), SL_OK);
    state = (char *)"garbage";
    ck_assert_int_eq(sl_store_bucket_get(e.store, b.bucket_id, &level, &updated, &state), SL_OK);
    ck_assert_ptr_null(state);
    ck_assert_double_eq(level, -7.25);
    ck_assert_str_eq(peek_sql(&e, "SELECT capacity FROM buckets"), "1000.0");
    /* a row without its strings is refused */
    b.algorithm = NULL;
    ck_assert_int_eq(sl_store_bucket_put(e.store, &b), SL_EINVAL);
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM buckets"), "1");
    env_done(&e);
}
END_TEST

START_TEST(estimate_record_accumulates)
{
    env_t e;
    env_init(&e);
    ck_assert_int_eq(sl_store_estimate_record(e.store, "chat", "standard", "dep-a", 100, 90, 50, 70),
                     SL_OK);
    ck_assert_int_eq(sl_store_estimate_record(e.store, "chat", "standard", "dep-a", 200, 210, 60, 20),
                     SL_OK);
    ck_assert_int_eq(sl_store_estimate_record(e.store, "chat", "batch", "dep-a", 1, 2, 3, 4), SL_OK);
    ck_assert_str_eq(peek_sql(&e, "SELECT n || ',' || est_input || ',' || real_input || ',' ||"
                                  " est_output || ',' || real_output FROM estimate_stats WHERE"
                                  " class = 'standard'"),
                     "2,300,300,110,90");
    ck_assert_str_eq(peek_sql(&e, "SELECT n || ',' || est_input || ',' || real_output FROM"
                                  " estimate_stats WHERE class = 'batch'"),
                     "1,1,4");
    env_done(&e);
}
END_TEST

START_TEST(rollback_discards_and_commit_keeps)
{
    env_t e;
    env_init(&e);
    char *result = NULL;
    sl_store_job_t j1 = job_row("job-1", "acme", 1000);
    sl_store_job_t j2 = job_row("job-2", "acme", 1000);
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    ck_assert_int_eq(sl_store_job_insert(e.store, &j1, 1000, &result), SL_OK);
    ck_assert_int_eq(sl_store_outbox_add(e.store, "t", "k", "v", 1000, NULL), SL_OK);
    sl_store_rollback(e.store);
    ck_assert_int_eq(sl_store_count_jobs(e.store, "queued"), 0);
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM outbox"), "0");
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    ck_assert_int_eq(sl_store_job_insert(e.store, &j2, 1000, &result), SL_OK);
    /* uncommitted work is invisible to other connections */
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM jobs"), "0");
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM jobs"), "1");
    sl_store_close(e.store);
    env_open(&e);
    ck_assert_int_eq(sl_store_count_jobs(e.store, "queued"), 1);
    env_done(&e);
}
END_TEST

/* ---- the files: deleted or replaced while open -------------------------------------------- */

/* Runs SQL on db with a plain connection (read-write, no store). */
static void exec_plain(const char *db, const char *sql)
{
    sqlite3 *conn = NULL;
    ck_assert_int_eq(sqlite3_open(db, &conn), SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(conn, sql, NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, msg != NULL ? msg : "?");
    sqlite3_close(conn);
}

/* A one-integer query on any SQLite file (read-only); -1 when it fails. */
static int64_t count_in(const char *db, const char *sql)
{
    sqlite3 *conn = NULL;
    sqlite3_stmt *st = NULL;
    int64_t n = -1;
    if (sqlite3_open_v2(db, &conn, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(conn, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(conn);
    return n;
}

static void unlink_suffix(const env_t *e, const char *suffix)
{
    char path[400];
    snprintf(path, sizeof path, "%s%s", e->db, suffix);
    unlink(path);
}

static void insert_job(env_t *e, const char *id)
{
    sl_store_job_t j = job_row(id, "acme", 1000);
    char *result = NULL;
    ck_assert_int_eq(sl_store_job_insert(e->store, &j, 1000, &result), SL_OK);
}

/* The first file in the test directory whose name contains part; "" when none. */
static const char *find_in_dir(const env_t *e, const char *part)
{
    static char found[600];
    found[0] = '\0';
    DIR *d = opendir(e->dir);
    struct dirent *ent;
    while (d != NULL && (ent = readdir(d)) != NULL) {
        if (strstr(ent->d_name, part) != NULL) {
            snprintf(found, sizeof found, "%s/%s", e->dir, ent->d_name);
            break;
        }
    }
    if (d != NULL)
        closedir(d);
    return found;
}

static unsigned file_mode(const char *path)
{
    struct stat st;
    ck_assert_msg(stat(path, &st) == 0, "no %s", path);
    return (unsigned)(st.st_mode & 07777);
}

START_TEST(untouched_files_pass_the_check_across_commits_and_checkpoints)
{
    env_t e;
    env_init(&e);
    ck_assert_int_eq(sl_store_check(e.store), SL_OK);
    insert_job(&e, "job-1");
    ck_assert_int_eq(sl_store_check(e.store), SL_OK);
    /* another connection's checkpoint truncates the -wal in place: the same file */
    exec_plain(e.db, "PRAGMA wal_checkpoint(TRUNCATE)");
    insert_job(&e, "job-2");
    ck_assert_int_eq(sl_store_check(e.store), SL_OK);
    ck_assert_int_eq(sl_store_fault(e.store, NULL), SL_STORE_FAULT_NONE);
    env_done(&e);
}
END_TEST

/* The WAL is copied into the database by the store's own thread, not inside a commit: after
 * 3,000 jobs in 300 commits and a pause, the next commit starts the WAL over (a few frames in
 * it), although SQLite's own checkpoint is off on the writer. */
START_TEST(the_wal_is_checkpointed_beside_the_writer)
{
    env_t e;
    env_init(&e);
    ck_assert_int_eq(sl_store_checkpointing(e.store), 1);
    char id[32];
    for (int t = 0; t < 300; t++) {
        ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
        for (int i = 0; i < 10; i++) {
            snprintf(id, sizeof id, "job-%d-%d", t, i);
            insert_job(&e, id);
        }
        ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    }
    usleep(600 * 1000);
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    insert_job(&e, "job-last");
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open_v2(e.db, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA wal_checkpoint(PASSIVE)", -1, &st, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    int frames = sqlite3_column_int(st, 1); /* busy, frames in the WAL, frames checkpointed */
    sqlite3_finalize(st);
    sqlite3_close(db);
    ck_assert_msg(frames >= 0 && frames < 50, "%d frames in the WAL", frames);
    env_done(&e);
}
END_TEST

/* rm sluice.db sluice.db-wal sluice.db-shm while the scheduler runs: SQLite goes on committing
 * into the unlinked files and nothing says so. The check notices, and the last committed state,
 * the commit made after the deletion included, is back at the path for the next start. */
START_TEST(deleted_database_is_noticed_and_written_back_at_its_path)
{
    env_t e;
    env_init(&e);
    insert_job(&e, "job-1");
    int64_t seq = 0;
    ck_assert_int_eq(sl_store_job_finish(e.store, "job-1", "succeeded", "{\"r\":1}",
                                         "sluice.results", 1001, &seq),
                     SL_OK);
    ck_assert_int_eq(sl_store_check(e.store), SL_OK);
    unlink_suffix(&e, "");
    unlink_suffix(&e, "-wal");
    unlink_suffix(&e, "-shm");
    /* the commit succeeds, into the deleted file */
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    insert_job(&e, "job-2");
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    ck_assert_int_eq(sl_store_check(e.store), SL_EDB);
    const char *text = NULL;
    ck_assert_int_eq(sl_store_fault(e.store, &text), SL_STORE_FAULT_MOVED);
    ck_assert_msg(strstr(text, "was deleted") != NULL && strstr(text, "written back") != NULL,
                  "text: %s", text);
    /* the fault stays */
    ck_assert_int_eq(sl_store_check(e.store), SL_EDB);
    sl_store_close(e.store);
    e.store = NULL;
    ck_assert_uint_eq(file_mode(e.db), 0600);
    env_open(&e);
    ck_assert_int_eq(sl_store_is_new(e.store), 0);
    ck_assert_int_eq(sl_store_count_jobs(e.store, "queued"), 1);
    ck_assert_int_eq(sl_store_count_jobs(e.store, "done"), 1);
    /* the idempotency history came back with it: job-1 is answered from its stored result */
    sl_store_job_t j = job_row("job-1", "acme", 1000);
    char *result = NULL;
    ck_assert_int_eq(sl_store_job_insert(e.store, &j, 2000, &result), SL_EEXISTS);
    ck_assert_ptr_nonnull(result);
    ck_assert_str_eq(result, "{\"r\":1}");
    free(result);
    ck_assert_int_eq(sl_store_check(e.store), SL_OK);
    env_done(&e);
}
END_TEST

/* Another file put in its place (a backup restored over a running scheduler): the replacement is
 * left alone, and what the scheduler had committed is saved next to it. */
START_TEST(replaced_database_is_saved_aside_and_the_replacement_left_alone)
{
    env_t e;
    env_init(&e);
    insert_job(&e, "job-1");
    char other[400];
    snprintf(other, sizeof other, "%s/other.db", e.dir);
    exec_plain(other, "CREATE TABLE marker (x); INSERT INTO marker VALUES (42)");
    ck_assert_int_eq(rename(other, e.db), 0);
    ck_assert_int_eq(sl_store_check(e.store), SL_EDB);
    const char *text = NULL;
    ck_assert_int_eq(sl_store_fault(e.store, &text), SL_STORE_FAULT_MOVED);
    ck_assert_msg(strstr(text, "was replaced") != NULL, "text: %s", text);
    const char *rescued = find_in_dir(&e, ".rescued-");
    ck_assert_msg(rescued[0] != '\0', "no rescued copy; text: %s", text);
    ck_assert_msg(strstr(text, rescued) != NULL, "the text names %s: %s", rescued, text);
    char copy[600];
    snprintf(copy, sizeof copy, "%s", rescued);
    ck_assert_uint_eq(file_mode(copy), 0600);
    ck_assert_int_eq(count_in(copy, "SELECT COUNT(*) FROM jobs WHERE job_id = 'job-1'"), 1);
    sl_store_close(e.store);
    e.store = NULL;
    /* our -wal went with us: SQLite would have applied it to the replacement */
    char wal[400];
    snprintf(wal, sizeof wal, "%s-wal", e.db);
    ck_assert_int_ne(access(wal, F_OK), 0);
    ck_assert_int_eq(count_in(e.db, "SELECT x FROM marker"), 42);
    env_done(&e);
}
END_TEST

/* The -wal alone deleted: the database file at the path is the right one but lacks what the log
 * held. The log's transactions are checkpointed into it. */
START_TEST(deleted_wal_is_checkpointed_into_the_database)
{
    env_t e;
    env_init(&e);
    insert_job(&e, "job-1");
    insert_job(&e, "job-2");
    unlink_suffix(&e, "-wal");
    ck_assert_int_eq(sl_store_check(e.store), SL_EDB);
    const char *text = NULL;
    ck_assert_int_eq(sl_store_fault(e.store, &text), SL_STORE_FAULT_MOVED);
    ck_assert_msg(strstr(text, "-wal was deleted") != NULL && strstr(text, "checkpointed") != NULL,
                  "text: %s", text);
    sl_store_close(e.store);
    e.store = NULL;
    env_open(&e);
    ck_assert_int_eq(sl_store_count_jobs(e.store, "queued"), 2);
    env_done(&e);
}
END_TEST

/* Without its lock file a second scheduler could open the same database. */
START_TEST(deleted_lock_file_is_noticed)
{
    env_t e;
    env_init(&e);
    insert_job(&e, "job-1");
    unlink_suffix(&e, ".lock");
    ck_assert_int_eq(sl_store_check(e.store), SL_EDB);
    const char *text = NULL;
    ck_assert_int_eq(sl_store_fault(e.store, &text), SL_STORE_FAULT_MOVED);
    ck_assert_msg(strstr(text, "lock file") != NULL, "text: %s", text);
    sl_store_close(e.store);
    e.store = NULL;
    env_open(&e);
    ck_assert_int_eq(sl_store_count_jobs(e.store, "queued"), 1);
    env_done(&e);
}
END_TEST

/* ---- the files at start: corrupted, not sluice's ------------------------------------------ */

static void write_at(const char *path, long offset, const void *bytes, size_t n)
{
    int fd = open(path, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, bytes, n, offset), (ssize_t)n);
    close(fd);
}

/* Opening must fail with SL_EDB, a message that names the file as corrupted or not sluice's and
 * never as a schema version, and leave the file as it was. */
static void assert_refused_as_corrupt(env_t *e, const char *db, const char *expect)
{
    struct stat before, after;
    ck_assert_int_eq(stat(db, &before), 0);
    char err[2048] = "";
    sl_store_t *s = (sl_store_t *)e;
    ck_assert_int_eq(sl_store_open(db, e->sql, &s, err, sizeof err), SL_EDB);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err, expect) != NULL, "expected \"%s\" in: %s", expect, err);
    ck_assert_msg(strstr(err, "schema version -1") == NULL, "err: %s", err);
    ck_assert_int_eq(stat(db, &after), 0);
    ck_assert_int_eq(after.st_size, before.st_size);
}

START_TEST(corrupted_header_is_called_corrupted_not_a_schema_version)
{
    env_t e;
    env_init(&e);
    insert_job(&e, "job-1");
    sl_store_close(e.store);
    e.store = NULL;
    write_at(e.db, 0, "NOT A DATABASE!!", 16);
    assert_refused_as_corrupt(&e, e.db, "corrupted or not a sluice database");
    /* the magic intact, a page size SQLite cannot have */
    write_at(e.db, 0, "SQLite format 3\0\x00\x03", 18);
    assert_refused_as_corrupt(&e, e.db, "corrupted or not a sluice database");
    /* a text file */
    char text[400];
    snprintf(text, sizeof text, "%s/notes.txt", e.dir);
    FILE *f = fopen(text, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 20; i++)
        fputs("these are not the jobs you are looking for\n", f);
    fclose(f);
    assert_refused_as_corrupt(&e, text, "corrupted or not a sluice database");
    env_done(&e);
}
END_TEST

/* A damaged page inside a file with a sound header: today's first insert would meet it
 * ("database disk image is malformed") and the scheduler would loop under a supervisor. */
START_TEST(corrupted_page_is_found_at_open)
{
    env_t e;
    env_init(&e);
    char json[2048];
    memset(json, 'x', sizeof json - 1);
    json[sizeof json - 1] = '\0';
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    for (int i = 0; i < 200; i++) {
        char id[32];
        snprintf(id, sizeof id, "job-%03d", i);
        sl_store_job_t j = job_row(id, "acme", 1000);
        j.job_json = json;
        char *result = NULL;
        ck_assert_int_eq(sl_store_job_insert(e.store, &j, 1000, &result), SL_OK);
    }
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    sl_store_close(e.store); /* checkpoints the -wal into the file */
    e.store = NULL;
    int64_t root = count_in(e.db, "SELECT rootpage FROM sqlite_master WHERE name = 'jobs'");
    int64_t page = count_in(e.db, "PRAGMA page_size");
    ck_assert_int_gt(root, 1);
    unsigned char junk[64];
    memset(junk, 0xa5, sizeof junk);
    write_at(e.db, (long)((root - 1) * page), junk, sizeof junk);
    assert_refused_as_corrupt(&e, e.db, "quick_check");
    assert_refused_as_corrupt(&e, e.db, "corrupted or not a sluice database");
    env_done(&e);
}
END_TEST

START_TEST(another_applications_sqlite_file_is_not_taken_over)
{
    env_t e;
    env_init(&e);
    char other[400];
    snprintf(other, sizeof other, "%s/other.db", e.dir);
    exec_plain(other, "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)");
    ck_assert_int_eq(chmod(other, 0644), 0);
    assert_refused_as_corrupt(&e, other, "not a sluice database");
    ck_assert_uint_eq(file_mode(other), 0644); /* not ours to change */
    ck_assert_int_eq(count_in(other, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'jobs'"), 0);
    /* one that says whose it is, jobs table or not */
    exec_plain(other, "PRAGMA application_id = 42; CREATE TABLE jobs (x)");
    assert_refused_as_corrupt(&e, other, "another application");
    env_done(&e);
}
END_TEST

/* A -wal left without its database: SQLite would apply the log to a new empty file. */
START_TEST(wal_without_its_database_is_refused)
{
    env_t e;
    env_init(&e);
    char db2[400], wal[420];
    snprintf(db2, sizeof db2, "%s/gone.db", e.dir);
    snprintf(wal, sizeof wal, "%s-wal", db2);
    FILE *f = fopen(wal, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 100; i++)
        fputs("committed transactions of a deleted database\n", f);
    fclose(f);
    char err[2048] = "";
    sl_store_t *s = (sl_store_t *)&e;
    ck_assert_int_eq(sl_store_open(db2, e.sql, &s, err, sizeof err), SL_EDB);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err, "write-ahead log") != NULL, "err: %s", err);
    ck_assert_int_ne(access(db2, F_OK), 0);
    env_done(&e);
}
END_TEST

/* ---- durability and file modes ------------------------------------------------------------ */

/* The writer commits unsynced (NORMAL) and the checkpointer's next run, which syncs the WAL,
 * makes the commits before it durable: the number it publishes reaches the last commit within
 * a few of its 50 ms rounds; sl_store_sync does it at once. */
START_TEST(commits_are_durable_after_the_next_checkpoint)
{
    env_t e;
    env_init(&e);
    ck_assert_str_eq(peek_sql(&e, "PRAGMA journal_mode"), "wal");
    ck_assert_int_eq(sl_store_checkpointing(e.store), 1);
    ck_assert_int_eq(sl_store_synchronous(e.store), 1); /* NORMAL: the checkpoint syncs */
    int64_t before = sl_store_committed_seq(e.store);
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    insert_job(&e, "job-1");
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    int64_t seq = sl_store_committed_seq(e.store);
    ck_assert_int_eq(seq, before + 1);
    int waited = 0;
    while (sl_store_durable_seq(e.store) < seq && waited < 2000) {
        usleep(5000);
        waited += 5;
    }
    ck_assert_msg(sl_store_durable_seq(e.store) >= seq, "not durable after %d ms", waited);
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    insert_job(&e, "job-2");
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    ck_assert_int_eq(sl_store_sync(e.store), SL_OK);
    ck_assert_int_eq(sl_store_durable_seq(e.store), sl_store_committed_seq(e.store));
    env_done(&e);
}
END_TEST

/* The files hold every tenant's prompts and answers. */
START_TEST(files_are_created_for_the_owner_only)
{
    mode_t old_mask = umask(022);
    env_t e;
    env_init(&e);
    insert_job(&e, "job-1");
    char path[400];
    ck_assert_uint_eq(file_mode(e.db), 0600);
    snprintf(path, sizeof path, "%s-wal", e.db);
    ck_assert_uint_eq(file_mode(path), 0600);
    snprintf(path, sizeof path, "%s-shm", e.db);
    ck_assert_uint_eq(file_mode(path), 0600);
    snprintf(path, sizeof path, "%s.lock", e.db);
    ck_assert_uint_eq(file_mode(path), 0600);
    env_done(&e);
    umask(old_mask);
}
END_TEST

START_TEST(existing_files_open_to_others_are_made_owner_only)
{
    env_t e;
    env_init(&e);
    insert_job(&e, "job-1");
    sl_store_close(e.store);
    e.store = NULL;
    ck_assert_int_eq(chmod(e.db, 0644), 0);
    env_open(&e);
    ck_assert_uint_eq(file_mode(e.db), 0600);
    char wal[400];
    snprintf(wal, sizeof wal, "%s-wal", e.db);
    ck_assert_uint_eq(file_mode(wal), 0600);
    ck_assert_int_eq(sl_store_count_jobs(e.store, "queued"), 1);
    env_done(&e);
}
END_TEST

/* ---- schema migration ------------------------------------------------------------------------ */

/* Makes a version 2 database at db from the frozen version 2 schema, with: a queued job, a
 * leased job and its open reservation, a finished job with its result, a reconciled
 * reservation, a bucket, a result in the outbox and estimate statistics. */
static void make_v2_database(const char *db)
{
    char *schema = NULL;
    ck_assert_int_eq(sl_read_file("tests/fixtures/store/ledger-v2.sql", 1 << 20, &schema, NULL),
                     SL_OK);
    exec_plain(db, schema);
    free(schema);
    exec_plain(
        db,
        "INSERT INTO jobs (job_id, idempotency_key, tenant, app, env, key_id, route, class,"
        " state, status, attempts, submitted_ms, deadline_ms, est_input, est_output, est_total,"
        " lease_expires_ms, reservation_id, deployment, job_json, request_json, result_json,"
        " updated_ms) VALUES"
        " ('job-q', 'idem-q', 'acme', 'web', 'prod', 'k1', 'chat', 'standard', 'queued', NULL, 0,"
        "  1000, 61000, 120, 80, 200, NULL, NULL, NULL, '{\"job_id\":\"job-q\"}', '{}', NULL,"
        "  1000),"
        " ('job-l', 'idem-l', 'acme', 'web', 'prod', 'k1', 'chat', 'batch', 'leased', NULL, 1,"
        "  1000, 61000, 120, 80, 200, 9000, '" RES_0 "', 'dep-a', '{\"job_id\":\"job-l\"}', '{}',"
        "  NULL, 1000),"
        " ('job-d', 'idem-d', 'acme', 'web', 'prod', 'k1', 'chat', 'standard', 'done',"
        "  'succeeded', 1, 0, 60000, 120, 80, 200, NULL, '" RES_Q "', 'dep-a',"
        "  '{\"job_id\":\"job-d\"}', '{}', '{\"status\":\"succeeded\"}', 900);"
        "INSERT INTO reservations (reservation_id, job_id, attempt, tenant, route, class,"
        " deployment, idempotency_key, est_input, est_output, created_ms, expires_ms,"
        " queue_deadline_ms, charges, settled, state, actual_input, actual_output, outcome,"
        " closed_ms) VALUES"
        " ('" RES_Q "', 'job-d', 1, 'acme', 'chat', 'standard', 'dep-a', 'idem-d', 120, 80, 0,"
        "  180000, 60000, '[[\"deployment:dep-a:tpm\",200,\"keep\"]]', '[190]', 'reconciled', 100,"
        "  90, 'ok', 800),"
        " ('" RES_0 "', 'job-l', 1, 'acme', 'chat', 'batch', 'dep-a', 'idem-l', 120, 80, 1000,"
        "  9000, 61000, '[[\"deployment:dep-a:tpm\",200,\"keep\"],[\"tenant:acme:tpm\",200,"
        "\"actual_total\"]]', NULL, 'open', NULL, NULL, NULL, NULL);"
        "INSERT INTO buckets VALUES ('deployment:dep-a:tpm', 'deployment:dep-a', 'tokens',"
        " 'token_bucket', 'tokens', 'config', 1000, 58200, 600, 1000);"
        "INSERT INTO outbox (topic, msg_key, value, created_ms) VALUES ('sluice.results',"
        " 'job-d', '{\"status\":\"succeeded\"}', 900);"
        "INSERT INTO estimate_stats VALUES ('chat', 'standard', 'dep-a', 1, 120, 100, 80, 90);");
    ck_assert_int_eq(count_in(db, "PRAGMA user_version"), 2);
}

static void count_row(const sl_store_row_t *row, void *arg)
{
    (void)row;
    (*(int *)arg)++;
}

typedef struct {
    int n;
    double sum;
} since_t;

static void sum_since(const char *bucket_id, double amount, int64_t created_ms, void *arg)
{
    (void)bucket_id;
    (void)created_ms;
    since_t *t = arg;
    t->n++;
    t->sum += amount;
}

START_TEST(version_2_database_migrates_with_its_jobs_reservations_and_results)
{
    env_t e;
    env_init(&e);
    sl_store_close(e.store);
    e.store = NULL;
    unlink_suffix(&e, "");
    make_v2_database(e.db);
    env_open(&e);
    ck_assert_int_eq(sl_store_is_new(e.store), 0);
    ck_assert_str_eq(peek_sql(&e, "PRAGMA user_version"), "4");
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM pbatches"), "0");
    /* the jobs, in their states */
    int unfinished = 0;
    ck_assert_int_eq(sl_store_each_unfinished(e.store, count_row, &unfinished), SL_OK);
    ck_assert_int_eq(unfinished, 2);
    ck_assert_int_eq(sl_store_count_jobs(e.store, "done"), 1);
    sl_store_job_t j = job_row("job-d", "acme", 1000);
    char *result = NULL;
    ck_assert_int_eq(sl_store_job_insert(e.store, &j, 2000, &result), SL_EEXISTS);
    ck_assert_str_eq(result, "{\"status\":\"succeeded\"}");
    free(result);
    /* the open reservation is counted, and its charges come back */
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 1);
    charges_t c = {0};
    ck_assert_int_eq(sl_store_res_charges(e.store, RES_0, collect_charge, &c), SL_OK);
    ck_assert_int_eq(c.n, 2);
    ck_assert_str_eq(c.rule[1], "actual_total");
    /* both replay from time 0: the reconciled one at its settled amount */
    since_t t = {0};
    ck_assert_int_eq(sl_store_res_each_since(e.store, 0, sum_since, &t), SL_OK);
    ck_assert_int_eq(t.n, 3);
    ck_assert_double_eq(t.sum, 190 + 200 + 200);
    /* buckets have a state now; the outbox and statistics are as they were */
    double level = 0;
    int64_t updated = 0;
    char *state = (char *)"garbage";
    ck_assert_int_eq(sl_store_bucket_get(e.store, "deployment:dep-a:tpm", &level, &updated, &state),
                     SL_OK);
    ck_assert_double_eq(level, 600);
    ck_assert_ptr_null(state);
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM outbox"), "1");
    ck_assert_str_eq(peek_sql(&e, "SELECT real_output FROM estimate_stats"), "90");
    /* and the migrated file takes new work: a reservation closes and the count follows */
    ck_assert_int_eq(
        sl_store_res_close(e.store, RES_0, "reconciled", 100, 50, 0, "ok", 5000, NULL, 0), SL_OK);
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 0);
    ck_assert_int_eq(sl_store_check(e.store), SL_OK);
    env_done(&e);
}
END_TEST

/* The CREATE statements of db (tables and indexes, by name), normalised: comments, quotes,
 * "IF NOT EXISTS" and spacing removed, so a migrated table reads like a freshly made one. */
static char *schema_text(const char *db)
{
    sqlite3 *conn = NULL;
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_open_v2(db, &conn, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(conn,
                                        "SELECT type, name, sql FROM sqlite_master WHERE sql IS"
                                        " NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type,"
                                        " name",
                                        -1, &st, NULL),
                     SQLITE_OK);
    size_t cap = 65536, len = 0;
    char *out = calloc(1, cap);
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *sql = (const char *)sqlite3_column_text(st, 2);
        len += (size_t)snprintf(out + len, cap - len, "%s %s: ", sqlite3_column_text(st, 0),
                                sqlite3_column_text(st, 1));
        int space = 0;
        for (const char *p = sql; *p != '\0' && len + 4 < cap; p++) {
            if (p[0] == '-' && p[1] == '-') {
                while (*p != '\0' && *p != '\n')
                    p++;
                if (*p == '\0')
                    break;
            }
            if (strncmp(p, "IF NOT EXISTS ", 14) == 0) {
                p += 13;
                continue;
            }
            if (*p == '"')
                continue;
            if (*p == ' ' || *p == '\n' || *p == '\t') {
                space = 1;
                continue;
            }
            int tight = *p == '(' || *p == ')' || *p == ',' ||
                        (len > 0 && (out[len - 1] == '(' || out[len - 1] == ','));
            if (space && !tight)
                out[len++] = ' ';
            space = 0;
            out[len++] = *p;
        }
        out[len++] = '\n';
    }
    sqlite3_finalize(st);
    sqlite3_close(conn);
    return out;
}

START_TEST(migrated_schema_matches_a_fresh_one)
{
    env_t e;
    env_init(&e);
    sl_store_close(e.store);
    e.store = NULL;
    char *fresh = schema_text(e.db);
    unlink_suffix(&e, "");
    make_v2_database(e.db);
    env_open(&e);
    sl_store_close(e.store);
    e.store = NULL;
    char *migrated = schema_text(e.db);
    ck_assert_msg(strcmp(fresh, migrated) == 0, "fresh:\n%s\nmigrated:\n%s", fresh, migrated);
    ck_assert_int_gt(strlen(fresh), 1000);
    free(fresh);
    free(migrated);
    env_done(&e);
}
END_TEST

/* A migration that cannot finish leaves the file at its version, with its rows. */
START_TEST(failed_migration_leaves_the_file_as_it_was)
{
    env_t e;
    env_init(&e);
    sl_store_close(e.store);
    e.store = NULL;
    unlink_suffix(&e, "");
    make_v2_database(e.db);
    /* the migration makes reservations_v3 after rebuilding jobs: a table of that name makes
     * it fail half way */
    exec_plain(e.db, "CREATE TABLE reservations_v3 (x)");
    char err[2048] = "";
    sl_store_t *s = (sl_store_t *)&e;
    ck_assert_int_eq(sl_store_open(e.db, e.sql, &s, err, sizeof err), SL_EDB);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err, "left at version 2") != NULL, "err: %s", err);
    ck_assert_int_eq(count_in(e.db, "PRAGMA user_version"), 2);
    ck_assert_int_eq(count_in(e.db, "SELECT COUNT(*) FROM jobs"), 3);
    ck_assert_int_eq(count_in(e.db, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'jobs_v3'"),
                     0);
    ck_assert_int_eq(count_in(e.db, "SELECT COUNT(*) FROM reservations WHERE tenant = 'acme'"), 2);
    env_done(&e);
}
END_TEST

START_TEST(versions_older_than_the_migrations_are_refused_clearly)
{
    env_t e;
    env_init(&e);
    sl_store_close(e.store);
    e.store = NULL;
    unlink_suffix(&e, "");
    make_v2_database(e.db);
    exec_plain(e.db, "PRAGMA user_version = 1");
    char err[2048] = "";
    sl_store_t *s = (sl_store_t *)&e;
    ck_assert_int_eq(sl_store_open(e.db, e.sql, &s, err, sizeof err), SL_EDB);
    ck_assert_msg(strstr(err, "version 1, older than any") != NULL, "err: %s", err);
    ck_assert_int_eq(count_in(e.db, "PRAGMA user_version"), 1);
    env_done(&e);
}
END_TEST

/* ---- pruning reservations ---------------------------------------------------------------- */

static void open_res(env_t *e, const char *id, const char *job, int64_t created_ms)
{
    const char *bucket = "deployment:dep-a:rpm";
    double one = 1;
    const char *rule = "keep";
    sl_store_res_t r = {.reservation_id = id, .job_id = job, .deployment = "dep-a",
                        .attempt = 1, .created_ms = created_ms, .expires_ms = created_ms + 60000};
    ck_assert_int_eq(sl_store_res_open(e->store, &r, 1, &bucket, &one, &rule), SL_OK);
}

START_TEST(prune_deletes_old_closed_reservations_a_bounded_batch_at_a_time)
{
    env_t e;
    env_init(&e);
    /* ids: 12 hex digits of the creation ms */
    open_res(&e, "0000000003e8aaaa", "j1", 1000);
    open_res(&e, "0000000005dcaaaa", "j2", 1500);
    open_res(&e, "0000000007d0aaaa", "j3", 2000);
    open_res(&e, "000000000bb8aaaa", "j4", 3000);
    open_res(&e, "000000000fa0aaaa", "j5", 4000);
    open_res(&e, "0000000013880aaa", "j6", 5000);
    for (int i = 0; i < 6; i++) {
        static const char *const ids[] = {"0000000003e8aaaa", "0000000005dcaaaa", NULL,
                                          "000000000bb8aaaa", "000000000fa0aaaa",
                                          "0000000013880aaa"};
        if (ids[i] != NULL)
            ck_assert_int_eq(sl_store_res_close(e.store, ids[i], i % 2 ? "expired" : "reconciled",
                                                1, 1, 0, "ok", 6000, NULL, 0),
                             SL_OK);
    }
    /* j2's closed reservation is still named by its leased job: kept */
    insert_job(&e, "j2");
    ck_assert_int_eq(sl_store_job_lease(e.store, "j2", 1, 9000, "0000000005dcaaaa", "dep-a", 1500),
                     SL_OK);
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 1);
    int deleted = -1;
    ck_assert_int_eq(sl_store_res_prune(e.store, 4500, 2, &deleted), SL_OK);
    ck_assert_int_eq(deleted, 2); /* 1000 and 3000, oldest first */
    ck_assert_int_eq(sl_store_res_prune(e.store, 4500, 2, &deleted), SL_OK);
    ck_assert_int_eq(deleted, 1); /* 4000 */
    ck_assert_int_eq(sl_store_res_prune(e.store, 4500, 2, &deleted), SL_OK);
    ck_assert_int_eq(deleted, 0);
    /* left: the leased job's (1500), the open one (2000), the recent one (5000) */
    ck_assert_str_eq(peek_sql(&e, "SELECT group_concat(created_ms) FROM (SELECT created_ms FROM"
                                  " reservations ORDER BY reservation_id)"),
                     "1500,2000,5000");
    ck_assert_int_eq(sl_store_count_open_reservations(e.store), 1);
    /* in a transaction it rolls back with it */
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    ck_assert_int_eq(sl_store_res_prune(e.store, 6000, 10, &deleted), SL_OK);
    ck_assert_int_eq(deleted, 1);
    sl_store_rollback(e.store);
    ck_assert_str_eq(peek_sql(&e, "SELECT COUNT(*) FROM reservations"), "3");
    env_done(&e);
}
END_TEST

/* A daily quota is exact after a restart from a pruned table: the restart replays what was
 * charged after the quota's last save, so pruning may take what came before that save and
 * nothing after it. With the scheduler core, its real buckets and an explicit clock. */

#define T0 ((int64_t)1000000000) /* 1970-01-12 13:46:40 UTC: the day lasts past the test */

typedef struct {
    env_t env;
    char cfg_path[400];
    sl_config_t *cfg;
    sl_sched_t *sched;
} core_env_t;

static void core_open(core_env_t *c, int64_t now_ms)
{
    char err[512] = "";
    env_open(&c->env);
    ck_assert_msg(sl_sched_new(c->cfg, c->env.store, now_ms, &c->sched, err, sizeof err) ==
                      SL_OK,
                  "sched: %s", err);
}

static void core_close(core_env_t *c)
{
    sl_sched_free(c->sched);
    c->sched = NULL;
    sl_store_close(c->env.store);
    c->env.store = NULL;
}

static void core_init(core_env_t *c)
{
    memset(c, 0, sizeof *c);
    env_init(&c->env);
    sl_store_close(c->env.store);
    c->env.store = NULL;
    unlink_suffix(&c->env, "");
    snprintf(c->cfg_path, sizeof c->cfg_path, "%s/config.json", c->env.dir);
    char text[2048];
    snprintf(text, sizeof text,
             "{\"minute_ms\": 60000, \"schema_dir\": \"schema\","
             " \"scheduler\": {\"db\": \"%s\", \"lease_ms\": 600000},"
             " \"deployments\": [{\"name\": \"dep-q\", \"base_url\": \"http://127.0.0.1:9/q/v1\","
             "   \"model\": \"model-q\","
             "   \"limits\": {\"rpm\": 6000, \"tpm\": 600000, \"rpd\": 3}}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"dep-q\"]}],"
             " \"tenants\": [{\"name\": \"acme\"}]}",
             c->env.db);
    FILE *f = fopen(c->cfg_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    char err[512] = "";
    ck_assert_msg(sl_config_load(c->cfg_path, &c->cfg, err, sizeof err) == SL_OK, "config: %s",
                  err);
    core_open(c, T0);
}

static void core_done(core_env_t *c)
{
    sl_sched_free(c->sched);
    c->sched = NULL;
    env_done(&c->env);
    sl_config_free(c->cfg);
}

static void core_job(core_env_t *c, const char *id, int64_t now_ms)
{
    json_t *doc = json_pack(
        "{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:{s:I, s:I, s:I},"
        " s:{s:s, s:[{s:s, s:s}], s:I}}",
        "v", 1, "job_id", id, "idempotency_key", id, "tenant", "acme", "app", "web", "env",
        "prod", "key_id", "key-1", "route", "chat", "class", "standard", "submitted_ms",
        (json_int_t)now_ms, "deadline_ms", (json_int_t)(now_ms + 3600000), "estimate", "input",
        (json_int_t)150, "output", (json_int_t)100, "total", (json_int_t)250, "request", "model",
        "chat", "messages", "role", "user", "content", "hello", "max_tokens", (json_int_t)100);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    ck_assert_int_eq(sl_store_begin(c->env.store), SL_OK);
    ck_assert_int_eq(sl_sched_on_job(c->sched, text, strlen(text), now_ms), SL_OK);
    ck_assert_int_eq(sl_store_commit(c->env.store), SL_OK);
    free(text);
}

/* One tick; returns how many dispatches and, in res/ids, their reservation and job ids. */
static int core_tick(core_env_t *c, int64_t now_ms, char res[][80], char ids[][80], int max,
                     int *results)
{
    int64_t next = 0;
    ck_assert_int_eq(sl_store_begin(c->env.store), SL_OK);
    ck_assert_int_eq(sl_sched_tick(c->sched, now_ms, &next), SL_OK);
    ck_assert_int_eq(sl_store_commit(c->env.store), SL_OK);
    sl_sched_msg_t *out = NULL;
    int n = sl_sched_take(c->sched, &out), nd = 0;
    *results = 0;
    for (int i = 0; i < n; i++) {
        if (out[i].kind == SL_MSG_RESULT) {
            (*results)++;
            continue;
        }
        if (out[i].kind == SL_MSG_CHANGELOG)
            continue;
        json_t *doc = json_loads(out[i].value, 0, NULL);
        ck_assert_ptr_nonnull(doc);
        if (nd < max) {
            snprintf(res[nd], 80, "%s", json_string_value(json_object_get(doc, "reservation_id")));
            snprintf(ids[nd], 80, "%s", json_string_value(json_object_get(doc, "job_id")));
        }
        nd++;
        json_decref(doc);
    }
    sl_sched_msgs_free(out, n);
    return nd;
}

static void core_usage_ok(core_env_t *c, const char *job_id, const char *res_id, int64_t now_ms)
{
    json_t *doc = json_pack(
        "{s:i, s:s, s:i, s:s, s:s, s:s, s:i, s:I, s:I, s:{s:f, s:f}, s:{s:I, s:I, s:I},"
        " s:{s:s, s:s, s:[{s:i, s:{s:s, s:s}}]}}",
        "v", 1, "job_id", job_id, "attempt", 1, "reservation_id", res_id, "deployment", "dep-q",
        "outcome", "ok", "http_status", 200, "started_ms", (json_int_t)(now_ms - 50),
        "finished_ms", (json_int_t)now_ms, "latency", "ttft_ms", 10.0, "total_ms", 50.0, "usage",
        "input", (json_int_t)120, "output", (json_int_t)40, "cached", (json_int_t)0, "response",
        "id", "cmpl-1", "object", "chat.completion", "choices", "index", 0, "message", "role",
        "assistant", "content", "hi");
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    ck_assert_int_eq(sl_store_begin(c->env.store), SL_OK);
    ck_assert_int_eq(sl_sched_on_usage(c->sched, text, strlen(text), now_ms), SL_OK);
    ck_assert_int_eq(sl_store_commit(c->env.store), SL_OK);
    free(text);
}

START_TEST(pruned_reservations_leave_a_daily_quota_exact_after_a_restart)
{
    core_env_t c;
    core_init(&c);
    char res[4][80], ids[4][80];
    int results = 0;
    /* two jobs use two of the day's three requests; a tick a second later saves the buckets */
    core_job(&c, "job-1", T0);
    core_job(&c, "job-2", T0);
    ck_assert_int_eq(core_tick(&c, T0, res, ids, 4, &results), 2);
    for (int i = 0; i < 2; i++)
        core_usage_ok(&c, ids[i], res[i], T0 + 100);
    ck_assert_int_eq(core_tick(&c, T0 + 1500, res, ids, 4, &results), 0);
    /* five minutes later a third uses the last request, and is reconciled, with no save after */
    int64_t t1 = T0 + 300000;
    core_job(&c, "job-3", t1);
    ck_assert_int_eq(core_tick(&c, t1, res, ids, 4, &results), 1);
    core_usage_ok(&c, ids[0], res[0], t1 + 100);
    ck_assert_str_eq(peek_sql(&c.env, "SELECT COUNT(*) FROM reservations"), "3");
    /* half a minute after the save, the trailing-minute guard of the deployment's tpm (its
     * window, the stale-dispatch cutoff and a minute's slack for the clock) reaches further */
    int64_t horizon = 0;
    ck_assert_int_eq(sl_restore_horizon(c.sched, T0 + 31500, &horizon), SL_OK);
    ck_assert_int_le(horizon, T0 + 31500 - 60000 - 60000);
    /* ten minutes on, past every guard window: only what came before the quota's save goes */
    int64_t now = t1 + 600000;
    ck_assert_int_eq(sl_restore_horizon(c.sched, now, &horizon), SL_OK);
    ck_assert_int_gt(horizon, T0);
    ck_assert_int_le(horizon, t1);
    sl_restore_pruner_t pruner = {0};
    ck_assert_int_eq(sl_store_begin(c.env.store), SL_OK);
    ck_assert_int_eq(sl_restore_prune(c.sched, &pruner, now), SL_OK);
    ck_assert_int_eq(sl_store_commit(c.env.store), SL_OK);
    ck_assert_int_eq(pruner.pruned, 2);
    ck_assert_str_eq(peek_sql(&c.env, "SELECT COUNT(*) FROM reservations"), "1");
    /* a restart: the saved count (2) plus the replay of job-3: the day is used up */
    core_close(&c);
    core_open(&c, now + 10);
    core_job(&c, "job-4", now + 10);
    ck_assert_int_eq(core_tick(&c, now + 10, res, ids, 4, &results), 0);
    ck_assert_int_eq(results, 1); /* rejected: quota_exhausted */
    core_done(&c);
}
END_TEST

/* ---- a full disk -------------------------------------------------------------------------- */

/* The real schema plus a page limit (per connection, like the rest of its pragmas): the file
 * cannot grow past max_pages, as on a full disk. Returns the schema file's path (static). */
static const char *small_schema(const env_t *e, int max_pages)
{
    static char path[400];
    char *schema = NULL;
    ck_assert_int_eq(sl_read_file(e->sql, 1 << 20, &schema, NULL), SL_OK);
    snprintf(path, sizeof path, "%s/ledger-small.sql", e->dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s\nPRAGMA max_page_count = %d;\n", schema, max_pages);
    fclose(f);
    free(schema);
    return path;
}

START_TEST(full_database_is_a_fault_that_loses_no_committed_job)
{
    env_t e;
    env_init(&e);
    sl_store_close(e.store);
    e.store = NULL;
    unlink_suffix(&e, "");
    char err[512] = "";
    const char *sql = small_schema(&e, 60);
    ck_assert_msg(sl_store_open(e.db, sql, &e.store, err, sizeof err) == SL_OK, "%s", err);
    char json[3000];
    memset(json, 'x', sizeof json - 1);
    json[sizeof json - 1] = '\0';
    int committed = 0;
    sl_err_t rc = SL_OK;
    while (rc == SL_OK && committed < 1000) {
        /* two jobs a transaction, as a scheduler turn takes several messages */
        ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
        for (int k = 0; k < 2 && rc == SL_OK; k++) {
            char id[32];
            snprintf(id, sizeof id, "job-%04d", committed + k);
            sl_store_job_t j = job_row(id, "acme", 1000);
            j.job_json = json;
            char *result = NULL;
            rc = sl_store_job_insert(e.store, &j, 1000, &result);
        }
        if (rc == SL_OK)
            rc = sl_store_commit(e.store);
        if (rc == SL_OK)
            committed += 2;
        else
            sl_store_rollback(e.store);
    }
    ck_assert_int_eq(rc, SL_EDB);
    ck_assert_int_gt(committed, 10);
    const char *text = NULL;
    ck_assert_int_eq(sl_store_fault(e.store, &text), SL_STORE_FAULT_FULL);
    ck_assert_msg(strstr(text, "is full") != NULL && strstr(text, "not committed") != NULL,
                  "text: %s", text);
    ck_assert_int_eq(sl_store_check(e.store), SL_EDB);
    /* every committed job is there, none of the failed transaction's */
    ck_assert_int_eq(sl_store_count_jobs(e.store, "queued"), committed);
    sl_store_close(e.store);
    e.store = NULL;
    env_open(&e); /* room again: the schema without the limit */
    ck_assert_int_eq(sl_store_count_jobs(e.store, "queued"), committed);
    insert_job(&e, "after");
    ck_assert_int_eq(sl_store_count_jobs(e.store, "queued"), committed + 1);
    env_done(&e);
}
END_TEST

static Suite *store_suite(void)
{
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, duplicate_insert_returns_the_result_only_once_finished);
    tcase_add_test(tc, lease_requeue_finish_and_each_unfinished_restores_fields);
    tcase_add_test(tc, job_parts_come_back_as_stored);
    tcase_add_test(tc, database_of_another_schema_version_is_refused);
    tcase_add_test(tc, reservation_open_charges_settle_and_close);
    tcase_add_test(tc, charges_with_quotes_and_backslashes_round_trip);
    tcase_add_test(tc, reservation_id_must_begin_with_its_creation_time);
    tcase_add_test(tc, open_count_follows_commit_rollback_and_reopen);
    tcase_add_test(tc, each_since_replays_charges_from_a_time_on_oldest_first);
    tcase_add_test(tc, state_checks_refuse_unknown_states);
    tcase_add_test(tc, outbox_add_each_delete);
    tcase_add_test(tc, unfinished_page_walks_unfinished_jobs_and_those_with_a_result_in_the_outbox);
    tcase_add_test(tc, second_open_of_the_same_db_is_ebusy);
    tcase_add_test(tc, open_with_a_missing_schema_fails_cleanly);
    tcase_add_test(tc, bucket_save_and_load);
    tcase_add_test(tc, bucket_put_and_get_keep_the_state);
    tcase_add_test(tc, estimate_record_accumulates);
    tcase_add_test(tc, pbatch_rows_round_trip_oldest_first);
    tcase_add_test(tc, rollback_discards_and_commit_keeps);
    suite_add_tcase(s, tc);
    /* the store knowing when it is not the truth */
    TCase *tf = tcase_create("files");
    tcase_set_timeout(tf, 30);
    tcase_add_test(tf, untouched_files_pass_the_check_across_commits_and_checkpoints);
    tcase_add_test(tf, the_wal_is_checkpointed_beside_the_writer);
    tcase_add_test(tf, deleted_database_is_noticed_and_written_back_at_its_path);
    tcase_add_test(tf, replaced_database_is_saved_aside_and_the_replacement_left_alone);
    tcase_add_test(tf, deleted_wal_is_checkpointed_into_the_database);
    tcase_add_test(tf, deleted_lock_file_is_noticed);
    tcase_add_test(tf, corrupted_header_is_called_corrupted_not_a_schema_version);
    tcase_add_test(tf, corrupted_page_is_found_at_open);
    tcase_add_test(tf, another_applications_sqlite_file_is_not_taken_over);
    tcase_add_test(tf, wal_without_its_database_is_refused);
    tcase_add_test(tf, commits_are_durable_after_the_next_checkpoint);
    tcase_add_test(tf, files_are_created_for_the_owner_only);
    tcase_add_test(tf, existing_files_open_to_others_are_made_owner_only);
    tcase_add_test(tf, full_database_is_a_fault_that_loses_no_committed_job);
    suite_add_tcase(s, tf);
    TCase *tm = tcase_create("migration");
    tcase_set_timeout(tm, 30);
    tcase_add_test(tm, version_2_database_migrates_with_its_jobs_reservations_and_results);
    tcase_add_test(tm, migrated_schema_matches_a_fresh_one);
    tcase_add_test(tm, failed_migration_leaves_the_file_as_it_was);
    tcase_add_test(tm, versions_older_than_the_migrations_are_refused_clearly);
    suite_add_tcase(s, tm);
    TCase *tp = tcase_create("prune");
    tcase_set_timeout(tp, 30);
    tcase_add_test(tp, prune_deletes_old_closed_reservations_a_bounded_batch_at_a_time);
    tcase_add_test(tp, pruned_reservations_leave_a_daily_quota_exact_after_a_restart);
    suite_add_tcase(s, tp);
    return s;
}

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return 1;
    SRunner *sr = srunner_create(store_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
