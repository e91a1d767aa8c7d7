/* api.c - the admin API's answers (see api.h and scheduler/ADMIN-API.md).
 *
 * Reading order: answers and errors, who may see what, the JSON of buckets and tenants, the
 * read endpoints, the changes, and the router.
 */
#include "api.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jsonstrict.h"
#include "log.h"
#include "sign.h"
#include "util.h"

enum { STATUS_MAX_TENANTS = 200, LIST_DEFAULT_LIMIT = 1000, LIST_MAX_LIMIT = 10000 };

typedef struct {
    sl_api_t *api;
    sl_sched_t *s;
    const sl_config_t *cfg;
    int64_t now;
    const sl_admin_key_cfg_t *key;
    sl_admin_resp_t *resp;
} ctx_t;

/* ---- answers ---- */

/* Capacity leases (scheduler/coord.h): the coordinator, this shard's lease, and the share of
 * each shared limit it enforces now. */
static json_t *leases_json(ctx_t *c)
{
    sl_coord_info_t in;
    sl_coord_info(c->api->coord, c->now, &in);
    enum { MAX_SHOWN = 64 };
    const char *ids[MAX_SHOWN];
    int64_t release[MAX_SHOWN];
    int n = sl_sched_shared_buckets(c->s, c->now, ids, release, MAX_SHOWN);
    if (n > MAX_SHOWN)
        n = MAX_SHOWN;
    sl_want_t d[MAX_SHOWN];
    json_t *granted = json_object();
    if (sl_sched_demand(c->s, c->now, ids, n, d) == SL_OK)
        for (int i = 0; i < n; i++)
            json_object_set_new(granted, ids[i], json_real(d[i].held));
    return json_pack("{s:b, s:I, s:i, s:I, s:I, s:o}", "coordinator", in.coordinator, "epoch",
                     (json_int_t)in.epoch, "shards_live", in.live, "lease_left_ms",
                     (json_int_t)in.lease_left_ms, "expiries", (json_int_t)in.expiries,
                     "granted", granted);
}

/* Answers with doc (taken). */
static void answer(ctx_t *c, int status, json_t *doc)
{
    c->resp->status = status;
    c->resp->body = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
    if (doc != NULL && c->resp->body == NULL)
        c->resp->status = 500;
    json_decref(doc);
}

static void fail(ctx_t *c, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void fail(ctx_t *c, int status, const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    answer(c, status, json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg));
}

/* ---- who may see what ---- */

static int is_admin(const ctx_t *c)
{
    return c->key->role == SL_ADMIN_ROLE_ADMIN;
}

static int sees_tenant(const ctx_t *c, int t)
{
    if (is_admin(c))
        return 1;
    for (int i = 0; i < c->key->ntenants; i++) {
        if (c->key->tenants[i] == t)
            return 1;
    }
    return 0;
}

/* Marks in vis (one byte per bucket) the buckets on the paths of the tenants c sees: their
 * own, their partner scopes', their keys' and apps'. */
static void mark_visible(const ctx_t *c, uint8_t *vis)
{
    for (int t = 0; t < c->cfg->ntenants; t++) {
        if (!sees_tenant(c, t))
            continue;
        int n;
        const int *b = sl_sched_tenant_path(c->s, t, &n);
        for (int i = 0; i < n; i++)
            vis[b[i]] = 1;
    }
    for (int k = 0; k < c->cfg->nkeys; k++) {
        if (!sees_tenant(c, c->cfg->keys[k].tenant))
            continue;
        int n;
        const int *b = sl_sched_key_path(c->s, k, &n);
        for (int i = 0; i < n; i++)
            vis[b[i]] = 1;
    }
}

static int sees_bucket(const ctx_t *c, int b)
{
    if (is_admin(c))
        return 1;
    uint8_t *vis = calloc((size_t)sl_sched_bucket_count(c->s) + 1, 1);
    if (vis == NULL)
        return 0;
    mark_visible(c, vis);
    int seen = vis[b];
    free(vis);
    return seen;
}

/* ---- JSON ---- */

static json_t *bucket_json(const ctx_t *c, int b)
{
    sl_sched_bucket_info_t bi;
    sl_sched_bucket_info(c->s, b, c->now, &bi);
    const char *colon = strrchr(bi.id, ':');
    size_t scope_len = colon != NULL ? (size_t)(colon - bi.id) : strlen(bi.id);
    double used = bi.capacity > 0 ? 1.0 - bi.level / bi.capacity : 0;
    used = used < 0 ? 0 : used > 1 ? 1 : used;
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(bi.id));
    json_object_set_new(o, "scope", json_stringn(bi.id, scope_len));
    json_object_set_new(o, "name", json_string(colon != NULL ? colon + 1 : bi.id));
    json_object_set_new(o, "dimension", json_string(sl_dimension_name(bi.limit->dimension)));
    json_object_set_new(o, "algorithm", json_string(sl_limit_alg_name(bi.limit->algorithm)));
    json_object_set_new(o, "strict", json_boolean(bi.limit->strict));
    json_object_set_new(o, "limit", json_real(bi.limit->capacity));
    json_object_set_new(o, "period_ms", json_integer(bi.limit->period_ms));
    json_object_set_new(o, "configured_limit", json_real(bi.configured->capacity));
    json_object_set_new(o, "override", json_boolean(bi.overridden));
    json_object_set_new(o, "capacity", json_real(bi.capacity));
    json_object_set_new(o, "level", json_real(bi.level));
    json_object_set_new(o, "used", json_real(used));
    json_object_set_new(o, "reset_ms", json_integer(bi.reset_ms));
    json_object_set_new(o, "reserved_total", json_real(bi.reserved_total));
    json_object_set_new(o, "charged_total", json_real(bi.charged_total));
    json_object_set_new(o, "clamped", json_boolean(bi.clamped));
    return o;
}

static json_t *classes_json(const int64_t *counts)
{
    json_t *o = json_object();
    for (int k = 0; k < SL_CLASS_COUNT; k++)
        json_object_set_new(o, sl_class_name((sl_class_t)k), json_integer(counts[k]));
    return o;
}

/* Appends to arr the buckets of path (n entries) not yet in it (seen: one byte per bucket). */
static void add_path(const ctx_t *c, json_t *arr, const int *path, int n, uint8_t *seen)
{
    for (int i = 0; i < n; i++) {
        if (seen[path[i]])
            continue;
        seen[path[i]] = 1;
        json_array_append_new(arr, bucket_json(c, path[i]));
    }
}

static json_t *tenant_json(const ctx_t *c, int t, const sl_sched_tenant_info_t *ti, int buckets)
{
    const sl_tenant_cfg_t *tc = &c->cfg->tenants[t];
    json_t *o = json_object();
    json_object_set_new(o, "tenant", json_string(tc->name));
    json_object_set_new(o, "weight", json_integer(ti->weight));
    json_object_set_new(o, "guarantee", json_real(ti->guarantee));
    json_object_set_new(o, "paused", json_boolean(ti->paused));
    json_object_set_new(o, "configured_weight", json_integer(tc->weight));
    json_object_set_new(o, "configured_guarantee", json_real(tc->guarantee));
    json_object_set_new(o, "queued", classes_json(ti->queued));
    json_object_set_new(o, "held", json_integer(ti->held));
    json_object_set_new(o, "delayed", json_integer(ti->delayed));
    json_object_set_new(o, "in_flight", json_integer(ti->in_flight));
    json_t *keys = json_array();
    for (int k = 0; k < c->cfg->nkeys; k++) {
        if (c->cfg->keys[k].tenant == t)
            json_array_append_new(keys, json_pack("{s:s, s:b}", "id", c->cfg->keys[k].id,
                                                  "paused", sl_sched_key_paused(c->s, k)));
    }
    json_object_set_new(o, "keys", keys);
    if (buckets) {
        json_t *arr = json_array();
        uint8_t *seen = calloc((size_t)sl_sched_bucket_count(c->s) + 1, 1);
        if (seen != NULL) {
            int n;
            const int *path = sl_sched_tenant_path(c->s, t, &n);
            add_path(c, arr, path, n, seen);
            for (int k = 0; k < c->cfg->nkeys; k++) {
                if (c->cfg->keys[k].tenant != t)
                    continue;
                path = sl_sched_key_path(c->s, k, &n);
                add_path(c, arr, path, n, seen);
            }
        }
        free(seen);
        json_object_set_new(o, "buckets", arr);
    }
    return o;
}

/* Every tenant's counters (caller frees); NULL when out of memory. */
static sl_sched_tenant_info_t *tenants_info(const ctx_t *c)
{
    sl_sched_tenant_info_t *ti = calloc((size_t)c->cfg->ntenants + 1, sizeof *ti);
    if (ti != NULL)
        sl_sched_tenants_info(c->s, ti);
    return ti;
}

static int64_t total_queued(const sl_sched_tenant_info_t *ti)
{
    int64_t n = ti->held + ti->delayed;
    for (int k = 0; k < SL_CLASS_COUNT; k++)
        n += ti->queued[k];
    return n;
}

/* ---- reads ---- */

static const sl_sched_tenant_info_t *sort_base;

static int by_backlog(const void *a, const void *b)
{
    int64_t qa = total_queued(&sort_base[*(const int *)a]);
    int64_t qb = total_queued(&sort_base[*(const int *)b]);
    if (qa != qb)
        return qa > qb ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

static void get_status(ctx_t *c)
{
    sl_sched_tenant_info_t *ti = tenants_info(c);
    int *order = calloc((size_t)c->cfg->ntenants + 1, sizeof *order);
    int *in_flight = calloc((size_t)c->cfg->ndeployments + 1, sizeof *in_flight);
    int64_t *paused = calloc((size_t)c->cfg->ndeployments + 1, sizeof *paused);
    if (ti == NULL || order == NULL || in_flight == NULL || paused == NULL) {
        fail(c, 500, "internal", "out of memory");
        goto out;
    }
    json_t *doc = json_object();
    json_object_set_new(doc, "now_ms", json_integer(c->now));
    json_object_set_new(doc, "role", json_string(is_admin(c) ? "admin" : "partner"));
    int64_t queued = 0, held = 0, delayed = 0, flying = 0;
    int n = 0, active = 0;
    for (int t = 0; t < c->cfg->ntenants; t++) {
        if (!sees_tenant(c, t))
            continue;
        for (int k = 0; k < SL_CLASS_COUNT; k++)
            queued += ti[t].queued[k];
        held += ti[t].held;
        delayed += ti[t].delayed;
        flying += ti[t].in_flight;
        int busy = total_queued(&ti[t]) > 0 || ti[t].in_flight > 0 || ti[t].paused;
        active += busy;
        /* Admin keys see the tenants with work or a pause; partners all of theirs. */
        if (busy || !is_admin(c))
            order[n++] = t;
    }
    json_object_set_new(doc, "totals",
                        json_pack("{s:I, s:I, s:I, s:I}", "queued", (json_int_t)queued, "held",
                                  (json_int_t)held, "delayed", (json_int_t)delayed, "in_flight",
                                  (json_int_t)flying));
    if (is_admin(c)) {
        sl_sched_deployments_info(c->s, c->now, in_flight, paused);
        json_t *pools = json_array();
        for (int r = 0; r < c->cfg->nroutes; r++) {
            const sl_route_cfg_t *rc = &c->cfg->routes[r];
            int64_t depth[SL_CLASS_COUNT];
            for (int k = 0; k < SL_CLASS_COUNT; k++)
                depth[k] = (int64_t)sl_sched_queue_depth(c->s, r, k);
            json_t *deps = json_array();
            for (int i = 0; i < rc->ndeployments; i++) {
                int d = rc->deployments[i];
                int np;
                const int *path = sl_sched_deployment_path(c->s, d, &np);
                json_t *bs = json_array();
                for (int k = 0; k < np; k++)
                    json_array_append_new(bs, bucket_json(c, path[k]));
                json_array_append_new(deps,
                                      json_pack("{s:s, s:i, s:I, s:o}", "name",
                                                c->cfg->deployments[d].name, "in_flight",
                                                in_flight[d], "paused_ms",
                                                (json_int_t)paused[d], "buckets", bs));
            }
            json_array_append_new(
                pools, json_pack("{s:s, s:o, s:I, s:o}", "route", rc->name, "queued",
                                 classes_json(depth), "blocked_ms",
                                 (json_int_t)sl_sched_route_blocked_ms(c->s, r, c->now),
                                 "deployments", deps));
        }
        json_object_set_new(doc, "pools", pools);
        /* One scheduler of several (scheduler.sharded): the partitions it schedules. */
        if (c->cfg->sched_sharded) {
            sl_sched_stats_t st;
            sl_sched_stats(c->s, &st);
            json_t *owned = json_array();
            for (int p = 0; p < st.partitions; p++)
                if (sl_sched_owns(c->s, p))
                    json_array_append_new(owned, json_integer(p));
            json_t *shard = json_pack("{s:I, s:o}", "partitions", (json_int_t)st.partitions,
                                      "owned", owned);
            if (c->api->coord == NULL)
                json_object_set_new(shard, "share",
                                    json_real((double)st.partitions_owned /
                                              (double)st.partitions));
            else
                json_object_set_new(shard, "leases", leases_json(c));
            json_object_set_new(doc, "shard", shard);
        }
    }
    sort_base = ti;
    qsort(order, (size_t)n, sizeof *order, by_backlog);
    json_t *tenants = json_array();
    for (int i = 0; i < n && i < STATUS_MAX_TENANTS; i++)
        json_array_append_new(tenants, tenant_json(c, order[i], &ti[order[i]], 0));
    json_object_set_new(doc, "tenants", tenants);
    json_object_set_new(doc, "tenants_active", json_integer(active));
    answer(c, 200, doc);
out:
    free(ti);
    free(order);
    free(in_flight);
    free(paused);
}

/* A query argument as a count in [0, max], or def when absent; -1 when malformed. */
static long long query_count(const sl_admin_req_t *req, const char *name, long long def,
                             long long max)
{
    const char *v = json_string_value(json_object_get(req->query, name));
    if (v == NULL)
        return def;
    long long n = sl_parse_count(v);
    return n < 0 ? -1 : n > max ? max : n;
}

/* The page asked for: ?offset=N&limit=M (defaults 0 and LIST_DEFAULT_LIMIT); 0 (answered 400)
 * when malformed. */
static int paging(ctx_t *c, const sl_admin_req_t *req, long long *offset, long long *limit)
{
    *offset = query_count(req, "offset", 0, INT32_MAX);
    *limit = query_count(req, "limit", LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT);
    if (*offset < 0 || *limit < 0) {
        fail(c, 400, "bad_request", "offset and limit must be non-negative integers");
        return 0;
    }
    return 1;
}

/* Answers {name: items (taken), "total", "next_offset": the next page's offset or null}. */
static void answer_page(ctx_t *c, const char *name, json_t *items, long long total,
                        long long offset, long long limit)
{
    json_t *doc = json_pack("{s:o, s:I}", name, items, "total", (json_int_t)total);
    json_object_set_new(doc, "next_offset",
                        offset + limit < total ? json_integer(offset + limit) : json_null());
    answer(c, 200, doc);
}

static void get_buckets(ctx_t *c, const sl_admin_req_t *req)
{
    const char *prefix = json_string_value(json_object_get(req->query, "prefix"));
    long long offset, limit;
    if (!paging(c, req, &offset, &limit))
        return;
    int nb = sl_sched_bucket_count(c->s);
    uint8_t *vis = NULL;
    if (!is_admin(c)) {
        vis = calloc((size_t)nb + 1, 1);
        if (vis == NULL) {
            fail(c, 500, "internal", "out of memory");
            return;
        }
        mark_visible(c, vis);
    }
    size_t plen = prefix != NULL ? strlen(prefix) : 0;
    json_t *arr = json_array();
    long long total = 0;
    for (int b = 0; b < nb; b++) {
        if (vis != NULL && !vis[b])
            continue;
        sl_sched_bucket_info_t bi;
        sl_sched_bucket_info(c->s, b, c->now, &bi);
        if (plen > 0 && strncmp(bi.id, prefix, plen) != 0)
            continue;
        if (total >= offset && total < offset + limit)
            json_array_append_new(arr, bucket_json(c, b));
        total++;
    }
    free(vis);
    answer_page(c, "buckets", arr, total, offset, limit);
}

static void get_tenants(ctx_t *c, const sl_admin_req_t *req)
{
    long long offset, limit;
    if (!paging(c, req, &offset, &limit))
        return;
    /* ?q=: the tenants whose name holds it (any case) */
    const char *q = json_string_value(json_object_get(req->query, "q"));
    if (q != NULL && q[0] == '\0')
        q = NULL;
    sl_sched_tenant_info_t *ti = tenants_info(c);
    if (ti == NULL) {
        fail(c, 500, "internal", "out of memory");
        return;
    }
    json_t *arr = json_array();
    long long total = 0;
    for (int t = 0; t < c->cfg->ntenants; t++) {
        if (!sees_tenant(c, t) || (q != NULL && strcasestr(c->cfg->tenants[t].name, q) == NULL))
            continue;
        if (total >= offset && total < offset + limit)
            json_array_append_new(arr, tenant_json(c, t, &ti[t], 0));
        total++;
    }
    free(ti);
    answer_page(c, "tenants", arr, total, offset, limit);
}

static void answer_tenant(ctx_t *c, int t, int buckets)
{
    sl_sched_tenant_info_t *ti = tenants_info(c);
    if (ti == NULL) {
        fail(c, 500, "internal", "out of memory");
        return;
    }
    answer(c, 200, tenant_json(c, t, &ti[t], buckets));
    free(ti);
}

/* The answer for a job id the caller may not see or that does not exist. A partner gets the
 * same status and body for both, so it cannot learn whether another tenant has a job of that
 * id; an operator sees every job, so a 403 for it would be a bug. */
static void no_job(ctx_t *c, const char *job_id)
{
    fail(c, 404, "not_found", "no job %s (finished jobs are kept in the store)", job_id);
}

static void get_job(ctx_t *c, const char *job_id)
{
    sl_sched_job_info_t ji;
    if (sl_sched_job_info(c->s, job_id, c->now, &ji)) {
        if (ji.tenant < 0 ? !is_admin(c) : !sees_tenant(c, ji.tenant)) {
            no_job(c, job_id);
            return;
        }
        json_t *o = json_object();
        json_object_set_new(o, "job_id", json_string(job_id));
        json_object_set_new(o, "tenant", ji.tenant >= 0
                                             ? json_string(c->cfg->tenants[ji.tenant].name)
                                             : json_null());
        json_object_set_new(o, "route", ji.route >= 0 ? json_string(c->cfg->routes[ji.route].name)
                                                      : json_null());
        json_object_set_new(o, "class", json_string(sl_class_name((sl_class_t)ji.cls)));
        json_object_set_new(o, "state", json_string(ji.state));
        json_object_set_new(o, "attempts", json_integer(ji.attempts));
        json_object_set_new(o, "submitted_ms", json_integer(ji.submitted_ms));
        json_object_set_new(o, "deadline_ms", json_integer(ji.deadline_ms));
        if (ji.limiter[0] != '\0')
            json_object_set_new(o, "waiting_for",
                                json_pack("{s:s, s:I}", "limiter", ji.limiter, "wait_ms",
                                          (json_int_t)(ji.wait_ms >= 0 ? ji.wait_ms : 0)));
        if (ji.deployment >= 0) {
            json_object_set_new(o, "deployment",
                                json_string(c->cfg->deployments[ji.deployment].name));
            json_object_set_new(o, "lease_expires_ms", json_integer(ji.lease_expires_ms));
        }
        if (ji.not_before_ms > 0)
            json_object_set_new(o, "not_before_ms", json_integer(ji.not_before_ms));
        answer(c, 200, o);
        return;
    }
    sl_store_job_info_t si;
    sl_err_t rc = sl_store_job_lookup(c->api->store, job_id, &si);
    if (rc == SL_ENOTFOUND) {
        no_job(c, job_id);
        return;
    }
    if (rc != SL_OK) {
        fail(c, 500, "internal", "reading the job: %s", sl_strerror(rc));
        return;
    }
    int t = sl_config_tenant(c->cfg, si.tenant);
    if (t < 0 ? !is_admin(c) : !sees_tenant(c, t)) {
        no_job(c, job_id);
        sl_store_job_info_free(&si);
        return;
    }
    json_t *o = json_object();
    json_object_set_new(o, "job_id", json_string(job_id));
    json_object_set_new(o, "tenant", json_string(si.tenant));
    json_object_set_new(o, "route", json_string(si.route));
    json_object_set_new(o, "class", json_string(si.cls));
    /* Not in memory but not done: taken by this loop's next transaction, or a restore gap. */
    json_object_set_new(o, "state", json_string(si.status != NULL ? si.status : si.state));
    json_object_set_new(o, "attempts", json_integer(si.attempts));
    json_object_set_new(o, "submitted_ms", json_integer(si.submitted_ms));
    json_object_set_new(o, "deadline_ms", json_integer(si.deadline_ms));
    if (si.deployment != NULL)
        json_object_set_new(o, "deployment", json_string(si.deployment));
    json_t *result = si.result_json != NULL ? json_loads(si.result_json, 0, NULL) : NULL;
    json_object_set_new(o, "result", result != NULL ? result : json_null());
    sl_store_job_info_free(&si);
    answer(c, 200, o);
}

/* ---- changes ---- */

/* Stores overrides in one transaction: n (target, field, value) with isnan(value) = remove. */
typedef struct {
    char target[300];
    const char *field;
    double value;
} change_t;

static sl_err_t store_changes(ctx_t *c, const change_t *ch, int n)
{
    sl_store_t *st = c->api->store;
    sl_err_t rc = sl_store_begin(st);
    for (int i = 0; rc == SL_OK && i < n; i++)
        rc = isnan(ch[i].value) ? sl_store_override_del(st, ch[i].target, ch[i].field)
                                : sl_store_override_put(st, ch[i].target, ch[i].field,
                                                        ch[i].value, c->now);
    if (rc == SL_OK)
        rc = sl_store_commit(st);
    else
        sl_store_rollback(st);
    return rc;
}

static json_t *parse_body(ctx_t *c, const sl_admin_req_t *req)
{
    json_error_t jerr;
    json_t *body = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (body == NULL || !json_is_object(body)) {
        fail(c, 400, "bad_request", "the body must be a JSON object%s%s",
             body == NULL ? ": " : "", body == NULL ? jerr.text : "");
        json_decref(body);
        return NULL;
    }
    return body;
}

/* A field that is a positive number, or null (NAN: back to the config), or absent (*set 0). */
static int positive_or_null(ctx_t *c, json_t *body, const char *name, double max, double *out,
                            int *set)
{
    json_t *v = json_object_get(body, name);
    *set = v != NULL;
    *out = NAN;
    if (v == NULL || json_is_null(v))
        return 1;
    double x = json_number_value(v);
    if (!json_is_number(v) || !(x > 0) || x > max) {
        fail(c, 400, "bad_request", "\"%s\" must be a number above 0 and at most %g, or null",
             name, max);
        return 0;
    }
    *out = x;
    return 1;
}

static void put_bucket(ctx_t *c, const sl_admin_req_t *req, int b)
{
    json_t *body = parse_body(c, req);
    if (body == NULL)
        return;
    static const char *const allowed[] = {"limit", NULL};
    const char *unknown = sl_jsonstrict_unknown_key(body, allowed);
    if (unknown != NULL) {
        fail(c, 400, "bad_request", "unknown field \"%.100s\" (a bucket takes \"limit\")",
             unknown);
        json_decref(body);
        return;
    }
    double limit;
    int set;
    int ok = positive_or_null(c, body, "limit", 1e15, &limit, &set);
    json_decref(body);
    if (!ok)
        return;
    if (!set) {
        fail(c, 400, "bad_request", "give \"limit\": a number, or null for the config's");
        return;
    }
    sl_sched_bucket_info_t before;
    sl_sched_bucket_info(c->s, b, c->now, &before);
    double old = before.overridden ? before.limit->capacity : NAN;
    if (sl_sched_set_limit(c->s, b, limit, c->now) != SL_OK) {
        fail(c, 400, "bad_request", "bucket %s cannot take limit %g", before.id, limit);
        return;
    }
    change_t ch = {.field = "limit", .value = limit};
    snprintf(ch.target, sizeof ch.target, "bucket:%s", before.id);
    if (store_changes(c, &ch, 1) != SL_OK) {
        sl_sched_set_limit(c->s, b, old, c->now);
        fail(c, 500, "internal", "the change could not be stored; nothing changed");
        return;
    }
    sl_info("admin %s: bucket %s limit %s%g", c->key->id, before.id,
            isnan(limit) ? "back to the config's " : "", isnan(limit) ? before.configured->capacity
                                                                     : limit);
    answer(c, 200, bucket_json(c, b));
}

/* The tenant's own bucket of dimension dim (its scope's, not its partner's), or -1. */
static int tenant_bucket(const ctx_t *c, int t, sl_dimension_t dim)
{
    int n;
    const int *path = sl_sched_tenant_path(c->s, t, &n);
    char scope[300];
    int len = snprintf(scope, sizeof scope, "tenant:%s:", c->cfg->tenants[t].name);
    for (int i = 0; i < n; i++) {
        sl_sched_bucket_info_t bi;
        sl_sched_bucket_info(c->s, path[i], c->now, &bi);
        if (bi.limit->dimension == dim && strncmp(bi.id, scope, (size_t)len) == 0)
            return path[i];
    }
    return -1;
}

static void put_tenant(ctx_t *c, const sl_admin_req_t *req, int t)
{
    static const char *const allowed[] = {"weight", "guarantee", "daily_requests", "daily_tokens",
                                          NULL};
    json_t *body = parse_body(c, req);
    if (body == NULL)
        return;
    const char *unknown = sl_jsonstrict_unknown_key(body, allowed);
    if (unknown != NULL) {
        fail(c, 400, "bad_request",
             "unknown field \"%.100s\" (a tenant takes weight, guarantee, daily_requests, "
             "daily_tokens)",
             unknown);
        json_decref(body);
        return;
    }
    const sl_tenant_cfg_t *tc = &c->cfg->tenants[t];
    double weight, daily[2];
    int set_weight, set_guarantee, set_daily[2];
    int ok = positive_or_null(c, body, "weight", 1e6, &weight, &set_weight) &&
             positive_or_null(c, body, "daily_requests", 1e15, &daily[0], &set_daily[0]) &&
             positive_or_null(c, body, "daily_tokens", 1e15, &daily[1], &set_daily[1]);
    json_t *g = json_object_get(body, "guarantee");
    set_guarantee = g != NULL;
    double guarantee = NAN;
    if (ok && g != NULL && !json_is_null(g)) {
        guarantee = json_number_value(g);
        if (!json_is_number(g) || !(guarantee >= 0) || guarantee > 0.95) {
            fail(c, 400, "bad_request", "\"guarantee\" must be a number in [0, 0.95], or null");
            ok = 0;
        }
    }
    json_decref(body);
    if (!ok)
        return;
    if (set_weight && !isnan(weight) && weight != floor(weight)) {
        fail(c, 400, "bad_request", "\"weight\" must be a whole number");
        return;
    }
    static const sl_dimension_t daily_dim[2] = {SL_DIM_REQUESTS_PER_DAY, SL_DIM_TOKENS_PER_DAY};
    static const char *const daily_name[2] = {"daily_requests", "daily_tokens"};
    int daily_bucket[2] = {-1, -1};
    for (int i = 0; i < 2; i++) {
        if (!set_daily[i])
            continue;
        daily_bucket[i] = tenant_bucket(c, t, daily_dim[i]);
        if (daily_bucket[i] < 0) {
            fail(c, 409, "conflict",
                 "tenant %s has no %s limit in the config to change; add one there "
                 "(\"buckets\": [{\"dimension\": \"%s\", ...}]) and reload",
                 tc->name, daily_name[i], sl_dimension_name(daily_dim[i]));
            return;
        }
    }
    sl_sched_tenant_info_t *ti = tenants_info(c);
    if (ti == NULL) {
        fail(c, 500, "internal", "out of memory");
        return;
    }
    int64_t new_weight = !set_weight ? ti[t].weight : isnan(weight) ? tc->weight : (int64_t)weight;
    double new_guarantee = !set_guarantee      ? ti[t].guarantee
                           : isnan(guarantee) ? tc->guarantee
                                              : guarantee;
    double others = 0;
    for (int o = 0; o < c->cfg->ntenants; o++)
        others += o != t ? ti[o].guarantee : 0;
    int64_t old_weight = ti[t].weight;
    double old_guarantee = ti[t].guarantee;
    free(ti);
    if (others + new_guarantee > 0.95 + 1e-9) {
        fail(c, 409, "conflict",
             "the guarantees would add up to %.3f; at most 0.95 can be promised (lower "
             "another tenant's first)",
             others + new_guarantee);
        return;
    }
    change_t ch[4];
    int n = 0;
    if (set_weight)
        ch[n++] = (change_t){.field = "weight", .value = weight};
    if (set_guarantee)
        ch[n++] = (change_t){.field = "guarantee", .value = guarantee};
    for (int i = 0; i < n; i++)
        snprintf(ch[i].target, sizeof ch[i].target, "tenant:%s", tc->name);
    for (int i = 0; i < 2; i++) {
        if (!set_daily[i])
            continue;
        ch[n] = (change_t){.field = "limit", .value = daily[i]};
        sl_sched_bucket_info_t bi;
        sl_sched_bucket_info(c->s, daily_bucket[i], c->now, &bi);
        snprintf(ch[n].target, sizeof ch[n].target, "bucket:%s", bi.id);
        n++;
    }
    /* Check every daily limit first: only then change anything. */
    double old_daily[2] = {NAN, NAN};
    for (int i = 0; i < 2; i++) {
        if (!set_daily[i])
            continue;
        sl_sched_bucket_info_t bi;
        sl_sched_bucket_info(c->s, daily_bucket[i], c->now, &bi);
        old_daily[i] = bi.overridden ? bi.limit->capacity : NAN;
        if (sl_sched_set_limit(c->s, daily_bucket[i], daily[i], c->now) != SL_OK) {
            for (int j = 0; j < i; j++) {
                if (set_daily[j])
                    sl_sched_set_limit(c->s, daily_bucket[j], old_daily[j], c->now);
            }
            fail(c, 400, "bad_request", "%s %g is not a valid limit", daily_name[i], daily[i]);
            return;
        }
    }
    sl_err_t rc = sl_sched_set_share(c->s, t, new_weight, new_guarantee);
    if (rc == SL_OK)
        rc = store_changes(c, ch, n);
    if (rc != SL_OK) {
        sl_sched_set_share(c->s, t, old_weight, old_guarantee);
        for (int i = 0; i < 2; i++) {
            if (set_daily[i])
                sl_sched_set_limit(c->s, daily_bucket[i], old_daily[i], c->now);
        }
        fail(c, 500, "internal", "the change could not be made or stored (%s); nothing changed",
             sl_strerror(rc));
        return;
    }
    sl_info("admin %s: tenant %s weight %lld guarantee %.3f%s", c->key->id, tc->name,
            (long long)new_weight, new_guarantee,
            set_daily[0] || set_daily[1] ? " (daily limits changed)" : "");
    answer_tenant(c, t, 1);
}

/* Pauses or resumes tenant t (>= 0) or key k. */
static void set_paused(ctx_t *c, int t, int k, int paused)
{
    change_t ch = {.field = "paused", .value = paused};
    if (t >= 0)
        snprintf(ch.target, sizeof ch.target, "tenant:%s", c->cfg->tenants[t].name);
    else
        snprintf(ch.target, sizeof ch.target, "key:%s", c->cfg->keys[k].id);
    int was;
    if (t >= 0) {
        sl_sched_tenant_info_t *ti = tenants_info(c);
        if (ti == NULL) {
            fail(c, 500, "internal", "out of memory");
            return;
        }
        was = ti[t].paused;
        free(ti);
    } else {
        was = sl_sched_key_paused(c->s, k);
    }
    sl_err_t rc = sl_sched_set_paused(c->s, t, k, paused);
    if (rc == SL_OK)
        rc = store_changes(c, &ch, 1);
    if (rc != SL_OK) {
        sl_sched_set_paused(c->s, t, k, was);
        fail(c, 500, "internal", "the change could not be made or stored (%s); nothing changed",
             sl_strerror(rc));
        return;
    }
    sl_info("admin %s: %s %s", c->key->id, paused ? "paused" : "resumed", ch.target);
    if (t >= 0) {
        answer_tenant(c, t, 0);
        return;
    }
    answer(c, 200, json_pack("{s:s, s:s, s:b}", "key", c->cfg->keys[k].id, "tenant",
                             c->cfg->tenants[c->cfg->keys[k].tenant].name, "paused",
                             sl_sched_key_paused(c->s, k)));
}

/* ---- routing ---- */

static int authenticate(ctx_t *c, const sl_admin_req_t *req)
{
    const char *auth = req->auth;
    if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0 || auth[7] == '\0') {
        fail(c, 401, "unauthorized", "send the admin key as \"Authorization: Bearer <key>\"");
        return 0;
    }
    uint8_t hash[32];
    const char *secret = auth + 7;
    sl_keyhash(secret, strlen(secret), hash);
    int k = sl_config_admin_key_by_hash(c->cfg, hash);
    if (k < 0) {
        fail(c, 401, "unauthorized", "unknown admin key");
        return 0;
    }
    c->key = &c->cfg->admin_keys[k];
    return 1;
}

static int method_is(ctx_t *c, const sl_admin_req_t *req, const char *method)
{
    if (strcmp(req->method, method) == 0 ||
        (strcmp(method, "GET") == 0 && strcmp(req->method, "HEAD") == 0))
        return 1;
    fail(c, 405, "method_not_allowed", "%s %s: use %s", req->method, req->path, method);
    return 0;
}

static int admin_only(ctx_t *c)
{
    if (is_admin(c))
        return 1;
    fail(c, 403, "forbidden", "partner key %s may only read its own tenants", c->key->id);
    return 0;
}

/* The console's figures (history.c): GET /v1/history, GET /v1/queues. */
static void get_history(ctx_t *c, int queues)
{
    if (!admin_only(c))
        return;
    if (c->api->history == NULL) {
        fail(c, 404, "not_found", "this scheduler keeps no history");
        return;
    }
    json_t *doc = queues ? sl_history_queues_json(c->api->history, c->s, c->cfg, c->now)
                         : sl_history_json(c->api->history);
    if (doc == NULL)
        fail(c, 500, "internal", "out of memory");
    else
        answer(c, 200, doc);
}

/* Routes /v1/tenants/<name>[/pause|/resume]. */
static void route_tenant(ctx_t *c, const sl_admin_req_t *req, const char *rest)
{
    char name[256];
    const char *slash = strrchr(rest, '/');
    const char *action = NULL;
    if (slash != NULL && (strcmp(slash, "/pause") == 0 || strcmp(slash, "/resume") == 0)) {
        action = slash + 1;
        snprintf(name, sizeof name, "%.*s", (int)(slash - rest), rest);
    } else {
        snprintf(name, sizeof name, "%s", rest);
    }
    int t = sl_config_tenant(c->cfg, name);
    if (t < 0 || !sees_tenant(c, t)) {
        /* A partner learns nothing about tenants that are not its own, not even whether they
         * exist. */
        if (is_admin(c))
            fail(c, 404, "not_found", "no tenant %.200s", name);
        else
            fail(c, 403, "forbidden", "tenant %.200s is not one of partner key %s's", name,
                 c->key->id);
        return;
    }
    if (action != NULL) {
        if (method_is(c, req, "POST") && admin_only(c))
            set_paused(c, t, -1, strcmp(action, "pause") == 0);
    } else if (strcmp(req->method, "PUT") == 0) {
        if (admin_only(c))
            put_tenant(c, req, t);
    } else if (method_is(c, req, "GET")) {
        answer_tenant(c, t, 1);
    }
}

static void route_key(ctx_t *c, const sl_admin_req_t *req, const char *rest)
{
    const char *slash = strrchr(rest, '/');
    if (slash == NULL || (strcmp(slash, "/pause") != 0 && strcmp(slash, "/resume") != 0)) {
        fail(c, 404, "not_found", "keys are paused and resumed: POST /v1/keys/<id>/pause");
        return;
    }
    if (!admin_only(c) || !method_is(c, req, "POST"))
        return;
    char id[256];
    snprintf(id, sizeof id, "%.*s", (int)(slash - rest), rest);
    int k = -1;
    for (int i = 0; i < c->cfg->nkeys; i++) {
        if (strcmp(c->cfg->keys[i].id, id) == 0)
            k = i;
    }
    if (k < 0) {
        fail(c, 404, "not_found", "no key %.200s", id);
        return;
    }
    set_paused(c, -1, k, strcmp(slash, "/pause") == 0);
}

static void route_bucket(ctx_t *c, const sl_admin_req_t *req, const char *id)
{
    int b = sl_sched_bucket_find(c->s, id);
    if (b < 0 || !sees_bucket(c, b)) {
        if (is_admin(c))
            fail(c, 404, "not_found", "no bucket %.200s", id);
        else
            fail(c, 403, "forbidden", "bucket %.200s is not one of partner key %s's tenants'",
                 id, c->key->id);
        return;
    }
    if (strcmp(req->method, "PUT") == 0) {
        if (admin_only(c))
            put_bucket(c, req, b);
    } else if (method_is(c, req, "GET")) {
        answer(c, 200, bucket_json(c, b));
    }
}

void sl_api_handle(const sl_admin_req_t *req, sl_admin_resp_t *resp, void *arg)
{
    sl_api_t *api = arg;
    ctx_t c = {api, *api->sched, *api->cfg, api->now_ms(), NULL, resp};
    resp->status = 200;
    resp->body = NULL;
    if (!authenticate(&c, req))
        return;
    const char *p = req->path;
    if (strncmp(p, "/v1/", 4) != 0) {
        fail(&c, 404, "not_found", "the admin API lives under /v1/ (see ADMIN-API.md)");
        return;
    }
    p += 4;
    if (strcmp(p, "status") == 0) {
        if (method_is(&c, req, "GET"))
            get_status(&c);
    } else if (strcmp(p, "buckets") == 0) {
        if (method_is(&c, req, "GET"))
            get_buckets(&c, req);
    } else if (strncmp(p, "buckets/", 8) == 0 && p[8] != '\0') {
        route_bucket(&c, req, p + 8);
    } else if (strcmp(p, "tenants") == 0) {
        if (method_is(&c, req, "GET"))
            get_tenants(&c, req);
    } else if (strncmp(p, "tenants/", 8) == 0 && p[8] != '\0') {
        route_tenant(&c, req, p + 8);
    } else if (strncmp(p, "keys/", 5) == 0 && p[5] != '\0') {
        route_key(&c, req, p + 5);
    } else if (strncmp(p, "jobs/", 5) == 0 && p[5] != '\0') {
        if (method_is(&c, req, "GET"))
            get_job(&c, p + 5);
    } else if (strcmp(p, "history") == 0 || strcmp(p, "queues") == 0) {
        if (method_is(&c, req, "GET"))
            get_history(&c, p[0] == 'q');
    } else {
        fail(&c, 404, "not_found", "no endpoint %.200s", req->path);
    }
}
