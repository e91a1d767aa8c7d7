/* sched_env.c - the scheduler unit tests' environment (see sched_env.h). */
#include "sched_env.h"

#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* ---- environment -------------------------------------------------------------------------- */


const char *const DEP_A =
    "{'name': 'dep-a', 'base_url': 'http://127.0.0.1:9/a/v1', 'model': 'model-a',"
    " 'limits': {'rpm': 120, 'tpm': 12000}, 'slices_per_minute': 20, 'headroom': 0.9}";
const char *const DEP_B =
    "{'name': 'dep-b', 'base_url': 'http://127.0.0.1:9/b/v1', 'model': 'model-b',"
    " 'limits': {'rpm': 60, 'tpm': 6000}, 'slices_per_minute': 20, 'headroom': 0.9}";
const char *const DEP_OPEN =
    "{'name': 'dep-open', 'base_url': 'http://127.0.0.1:9/open/v1', 'model': 'model-open'}";
const char *const DEP_BIG =
    "{'name': 'dep-big', 'base_url': 'http://127.0.0.1:9/big/v1', 'model': 'model-big',"
    " 'limits': {'rpm': 6000, 'tpm': 600000}, 'burst_fraction': 1.0}";


/* Turns ' into " so configs read without escapes (no test text contains an apostrophe). */
static void unquote(char *s)
{
    for (; *s; s++) {
        if (*s == '\'')
            *s = '"';
    }
}

void open_core(env_t *e, int64_t now_ms)
{
    char err[512] = "";
    ck_assert_msg(sl_store_open(e->cfg->db_path, e->sql, &e->store, err, sizeof err) == SL_OK,
                  "store: %s", err);
    ck_assert_msg(sl_sched_new(e->cfg, e->store, now_ms, &e->sched, err, sizeof err) ==
                      SL_OK,
                  "sched: %s", err);
}

void close_core(env_t *e)
{
    sl_sched_free(e->sched);
    e->sched = NULL;
    sl_store_close(e->store);
    e->store = NULL;
}

/* The DRR quantum of the next configs written (0: the default, 4096 tokens). */
int64_t drr_quantum;
/* scheduler.max_queued of the next configs written (0: the default). */
int64_t max_queued;
/* scheduler.max_queued_bytes of the next configs written (0: the default). */
int64_t max_queued_bytes;
/* More members of route "chat" (e.g. "'strategy': 'waterfall',") and more routes (e.g.
 * ", {'name': 'chat-b', 'deployments': ['dep-b']}") in the next configs written. */
const char *route_extra = "";
const char *more_routes = "";
const char *acme_extra = "";

/* Writes the config for o into the test directory and loads it into e->cfg. */
void load_config(env_t *e, const opts_t *o)
{
    char text[8192];
    /* the route lists the deployments named in o->deployments, in that order */
    const char *names[4] = {"dep-a", "dep-b", "dep-big", "dep-open"};
    const char *defs[4] = {DEP_A, DEP_B, DEP_BIG, DEP_OPEN};
    char dep_defs[4096] = "";
    for (int i = 0; i < 4; i++) {
        if (strstr(o->deployments, names[i]) == NULL)
            continue;
        if (dep_defs[0] != '\0')
            strcat(dep_defs, ", ");
        strcat(dep_defs, defs[i]);
    }
    if (o->extra_defs != NULL) {
        if (dep_defs[0] != '\0')
            strcat(dep_defs, ", ");
        strcat(dep_defs, o->extra_defs);
    }
    char globex[128] = "";
    if (!o->drop_globex)
        snprintf(globex, sizeof globex, ", {'name': 'globex', 'weight': 1, 'tokens_per_min': %lld}",
                 (long long)o->globex_tokens_per_min);
    int n = snprintf(text, sizeof text,
                     "{'minute_ms': 60000, 'schema_dir': 'schema', %s"
                     " 'scheduler': {'db': '%s/t.db', 'lease_ms': %lld, 'max_attempts': %lld,"
                     "               'drr_quantum_tokens': %lld, 'max_queued': %lld,"
                     "               'max_queued_bytes': %lld},"
                     " 'deployments': [%s],"
                     " 'routes': [{'name': 'chat', %s 'deployments': [%s]}%s],"
                     " 'tenants': [{'name': 'acme', 'weight': 1%s}%s]}",
                     o->extra_top ? o->extra_top : "", e->dir,
                     (long long)(o->lease_ms ? o->lease_ms : 600000),
                     (long long)(o->max_attempts ? o->max_attempts : 5),
                     (long long)(drr_quantum ? drr_quantum : 4096),
                     (long long)(max_queued ? max_queued : 1000000),
                     (long long)(max_queued_bytes ? max_queued_bytes : 8LL << 30), dep_defs,
                     route_extra,
                     o->deployments, more_routes, acme_extra, globex);
    ck_assert_int_lt(n, (int)sizeof text);
    unquote(text);
    FILE *f = fopen(e->cfg_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    char err[512] = "";
    ck_assert_msg(sl_config_load(e->cfg_path, &e->cfg, err, sizeof err) == SL_OK, "config: %s",
                  err);
}

void env_init(env_t *e, const opts_t *o, int64_t now_ms)
{
    memset(e, 0, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/sluice-test-sched-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(e->dir));
    snprintf(e->cfg_path, sizeof e->cfg_path, "%s/config.json", e->dir);
    sl_resolve_path("schema/ledger.sql", e->sql, sizeof e->sql);
    load_config(e, o);
    char err[512] = "";
    ck_assert_int_eq(sl_schema_load_file("schema/dispatch.json", &e->dispatch_schema, err,
                                         sizeof err),
                     SL_OK);
    ck_assert_int_eq(sl_schema_load_file("schema/result.json", &e->result_schema, err,
                                         sizeof err),
                     SL_OK);
    ck_assert_int_eq(sl_schema_load_file("schema/batch-op.json", &e->batch_op_schema, err,
                                         sizeof err),
                     SL_OK);
    open_core(e, now_ms);
    ck_assert_int_eq(sl_store_is_new(e->store), 1);
}

void env_done(env_t *e)
{
    char path[400];
    close_core(e);
    static const char *const files[] = {"t.db", "t.db-wal", "t.db-shm", "t.db.lock",
                                        "t.db-journal", "config.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", e->dir, files[i]);
        unlink(path);
    }
    rmdir(e->dir);
    sl_schema_free(e->dispatch_schema);
    sl_schema_free(e->result_schema);
    sl_schema_free(e->batch_op_schema);
    sl_config_free(e->cfg);
}

/* A restart with another config: the core and store go away without finishing anything,
 * the config is reloaded from o, and both come back at now_ms. */
void restart_with(env_t *e, const opts_t *o, int64_t now_ms)
{
    close_core(e);
    sl_config_free(e->cfg);
    e->cfg = NULL;
    load_config(e, o);
    open_core(e, now_ms);
}

/* Runs a one-value query on a second connection (committed state only). */
const char *peek_sql(const env_t *e, const char *fmt, const char *arg)
{
    static char out[512];
    char sql[512];
    snprintf(sql, sizeof sql, fmt, arg);
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open_v2(e->cfg->db_path, &db, SQLITE_OPEN_READONLY, NULL),
                     SQLITE_OK);
    sqlite3_stmt *st = NULL;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s", sql);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != NULL)
        snprintf(out, sizeof out, "%s", (const char *)sqlite3_column_text(st, 0));
    else
        snprintf(out, sizeof out, "<none>");
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

/* ---- messages in ---------------------------------------------------------------------------- */


/* The class of the next jobs job_text writes. */
const char *job_class = "standard";

char *job_text(const jobspec_t *j)
{
    char idem[96];
    snprintf(idem, sizeof idem, "idem-%s", j->id);
    json_t *doc = json_pack(
        "{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:{s:I, s:I, s:I},"
        " s:{s:s, s:[{s:s, s:s}], s:I}, s:{s:s}}",
        "v", 1, "job_id", j->id, "idempotency_key", idem, "tenant", j->tenant ? j->tenant : "acme",
        "app", "web", "env", "prod", "key_id", "key-1", "route", j->route ? j->route : "chat",
        "class", job_class, "submitted_ms", (json_int_t)j->submitted_ms, "deadline_ms",
        (json_int_t)j->deadline_ms, "estimate", "input", (json_int_t)j->input, "output",
        (json_int_t)j->output, "total", (json_int_t)(j->input + j->output), "request", "model",
        "chat", "messages", "role", "user", "content", "hello", "max_tokens",
        (json_int_t)j->output, "metadata", "ticket", j->id);
    ck_assert_ptr_nonnull(doc);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    ck_assert_ptr_nonnull(text);
    return text;
}

/* Feeds one job message inside a transaction. */
void feed_text(env_t *e, const char *text, int64_t now_ms)
{
    ck_assert_int_eq(sl_store_begin(e->store), SL_OK);
    ck_assert_int_eq(sl_sched_on_job(e->sched, text, strlen(text), now_ms), SL_OK);
    ck_assert_int_eq(sl_store_commit(e->store), SL_OK);
}

/* A standard job of acme (150 + 100 tokens) submitted at now, due in an hour. */
void feed_job(env_t *e, const char *id, const char *tenant, int64_t now_ms)
{
    jobspec_t j = {id, tenant, NULL, now_ms, now_ms + HOUR, 150, 100};
    char *text = job_text(&j);
    feed_text(e, text, now_ms);
    free(text);
}

void feed_spec(env_t *e, const jobspec_t *j, int64_t now_ms)
{
    char *text = job_text(j);
    feed_text(e, text, now_ms);
    free(text);
}


/* The time to first token the next usage events report (ms). */
double usage_ttft_ms = 10.0;

void feed_usage(env_t *e, const char *job_id, int attempt, const char *res_id,
                       const char *deployment, const usagespec_t *u, int64_t now_ms)
{
    json_t *doc = json_pack("{s:i, s:s, s:i, s:s, s:s, s:s, s:i, s:I, s:I, s:{s:f, s:f}}", "v", 1,
                            "job_id", job_id, "attempt", attempt, "reservation_id", res_id,
                            "deployment", deployment, "outcome", u->outcome, "http_status",
                            u->http_status, "started_ms", (json_int_t)(now_ms - 50),
                            "finished_ms", (json_int_t)now_ms, "latency", "ttft_ms", usage_ttft_ms,
                            "total_ms", 50.0);
    ck_assert_ptr_nonnull(doc);
    if (u->input >= 0)
        json_object_set_new(doc, "usage",
                            json_pack("{s:I, s:I, s:I}", "input", (json_int_t)u->input, "output",
                                      (json_int_t)u->output, "cached", (json_int_t)u->cached));
    else
        json_object_set_new(doc, "usage", json_null());
    if (u->ratelimit != NULL)
        json_object_set_new(doc, "ratelimit", json_loads(u->ratelimit, 0, NULL));
    if (u->retry_after_ms >= 0)
        json_object_set_new(doc, "retry_after_ms", json_integer(u->retry_after_ms));
    if (strcmp(u->outcome, "ok") == 0)
        json_object_set_new(doc, "response",
                            json_pack("{s:s, s:s, s:[{s:i, s:{s:s, s:s}}]}", "id", "cmpl-1",
                                      "object", "chat.completion", "choices", "index", 0,
                                      "message", "role", "assistant", "content", "hi there"));
    else
        json_object_set_new(doc, "error",
                            json_pack("{s:s, s:s}", "type", "provider", "message", "no luck"));
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    feed_usage_text(e, text, now_ms);
    free(text);
}

void feed_usage_text(env_t *e, const char *text, int64_t now_ms)
{
    ck_assert_ptr_nonnull(text);
    ck_assert_int_eq(sl_store_begin(e->store), SL_OK);
    ck_assert_int_eq(sl_sched_on_usage(e->sched, text, strlen(text), now_ms), SL_OK);
    ck_assert_int_eq(sl_store_commit(e->store), SL_OK);
}

/* ---- messages out --------------------------------------------------------------------------- */


/* Takes what the core produced, checking every message against its schema. */
batch_t take(env_t *e)
{
    batch_t b = {0};
    int n = sl_sched_take(e->sched, &b.m);
    /* Changelog messages: the job as it came, keyed by a configured tenant's name. */
    for (int i = 0; i < n; i++) {
        if (b.m[i].kind != SL_MSG_CHANGELOG) {
            b.m[b.n++] = b.m[i];
            continue;
        }
        ck_assert_str_eq(b.m[i].topic, e->cfg->kafka.topic_changelog);
        ck_assert_int_ge(sl_config_tenant(e->cfg, b.m[i].key), 0);
        json_t *job = json_loads(b.m[i].value, 0, NULL);
        ck_assert_ptr_nonnull(job);
        ck_assert_str_eq(json_string_value(json_object_get(job, "tenant")), b.m[i].key);
        ck_assert_ptr_nonnull(b.m[i].job_id);
        ck_assert_str_eq(json_string_value(json_object_get(job, "job_id")), b.m[i].job_id);
        ck_assert_int_eq(json_integer_value(json_object_get(job, "submitted_ms")),
                         b.m[i].submitted_ms);
        json_decref(job);
        free(b.m[i].key);
        free(b.m[i].value);
        free(b.m[i].job_id);
        b.nlogged++;
    }
    b.doc = calloc((size_t)b.n + 1, sizeof *b.doc);
    for (int i = 0; i < b.n; i++) {
        json_error_t jerr;
        b.doc[i] = json_loads(b.m[i].value, 0, &jerr);
        ck_assert_msg(b.doc[i] != NULL, "message is not JSON: %s", b.m[i].value);
        char why[512] = "";
        if (b.m[i].kind == SL_MSG_DISPATCH && json_object_get(b.doc[i], "op") != NULL) {
            /* A provider batch op (scheduler/pbatch.h), keyed by its batch id. */
            ck_assert_str_eq(b.m[i].topic, e->cfg->kafka.topic_dispatch);
            ck_assert_str_eq(b.m[i].key, json_string_value(json_object_get(b.doc[i], "batch_id")));
            ck_assert_msg(sl_schema_validate(e->batch_op_schema, b.doc[i], why, sizeof why) ==
                              SL_OK,
                          "batch op invalid (%s): %s", why, b.m[i].value);
            continue;
        }
        const char *jid = json_string_value(json_object_get(b.doc[i], "job_id"));
        ck_assert_ptr_nonnull(jid);
        ck_assert_str_eq(b.m[i].key, jid);
        if (b.m[i].kind == SL_MSG_DISPATCH) {
            ck_assert_str_eq(b.m[i].topic, e->cfg->kafka.topic_dispatch);
            ck_assert_msg(sl_schema_validate(e->dispatch_schema, b.doc[i], why, sizeof why) ==
                              SL_OK,
                          "dispatch invalid (%s): %s", why, b.m[i].value);
        } else {
            ck_assert_int_eq(b.m[i].kind, SL_MSG_RESULT);
            const char *tenant = json_string_value(json_object_get(b.doc[i], "tenant"));
            int t = tenant != NULL ? sl_config_tenant(e->cfg, tenant) : -1;
            ck_assert_str_eq(b.m[i].topic, sl_config_results_topic(e->cfg, t));
            ck_assert_int_gt(b.m[i].seq, 0);
            ck_assert_msg(sl_schema_validate(e->result_schema, b.doc[i], why, sizeof why) ==
                              SL_OK,
                          "result invalid (%s): %s", why, b.m[i].value);
        }
    }
    return b;
}

void batch_free(batch_t *b)
{
    for (int i = 0; i < b->n; i++)
        json_decref(b->doc[i]);
    free(b->doc);
    sl_sched_msgs_free(b->m, b->n);
    memset(b, 0, sizeof *b);
}

/* One scheduler turn: tick inside a transaction, then take the output. */
batch_t step(env_t *e, int64_t now_ms)
{
    ck_assert_int_eq(sl_store_begin(e->store), SL_OK);
    int64_t next = 0;
    ck_assert_int_eq(sl_sched_tick(e->sched, now_ms, &next), SL_OK);
    ck_assert_int_ge(next, 1);
    ck_assert_int_eq(sl_store_commit(e->store), SL_OK);
    return take(e);
}

int count_kind(const batch_t *b, sl_msg_kind_t kind)
{
    int n = 0;
    for (int i = 0; i < b->n; i++)
        n += b->m[i].kind == kind;
    return n;
}

/* The first message of a kind (for a job, or any job when job_id is NULL). */
json_t *find(const batch_t *b, sl_msg_kind_t kind, const char *job_id)
{
    for (int i = 0; i < b->n; i++) {
        if (b->m[i].kind == kind && (job_id == NULL || strcmp(b->m[i].key, job_id) == 0))
            return b->doc[i];
    }
    return NULL;
}

const char *sget(json_t *obj, const char *key)
{
    const char *v = json_string_value(json_object_get(obj, key));
    return v != NULL ? v : "<none>";
}

int64_t iget(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    ck_assert_msg(json_is_integer(v), "%s is not an integer", key);
    return (int64_t)json_integer_value(v);
}


lease_t lease_of(json_t *dispatch, int64_t now_ms)
{
    lease_t l;
    ck_assert_ptr_nonnull(dispatch);
    snprintf(l.job, sizeof l.job, "%s", sget(dispatch, "job_id"));
    snprintf(l.res, sizeof l.res, "%s", sget(dispatch, "reservation_id"));
    snprintf(l.dep, sizeof l.dep, "%s", sget(dispatch, "deployment"));
    l.attempt = (int)iget(dispatch, "attempt");
    l.at_ms = now_ms;
    return l;
}

double bucket_level(env_t *e, const char *id, int64_t now_ms)
{
    for (int i = 0; i < sl_sched_bucket_count(e->sched); i++) {
        const char *bid;
        double level, cap;
        sl_sched_bucket(e->sched, i, now_ms, &bid, &level, &cap);
        if (strcmp(bid, id) == 0)
            return level;
    }
    ck_abort_msg("no bucket %s", id);
    return 0;
}

const usagespec_t OK_USAGE = {"ok", 200, 120, 40, -1, 0, NULL};
