/* render.c - the admin API's answers as the views print them (see render.h).
 *
 * The bucket cells (limit per period, level/capacity, used bar, reset time) come first: the
 * status view shows them compact and the bucket table exact. Then each view, top down.
 */
#include "render.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fields.h"
#include "format.h"

/* ---- Bucket cells ----------------------------------------------------------------------- */

/* "100000/min" (exact) or "100k/min" (compact); a limit without a period (a gauge) alone. */
static void fmt_limit(const json_t *bucket, int compact, char *out, size_t cap)
{
    json_t *limit = json_object_get(bucket, "limit");
    if (!json_is_number(limit)) {
        snprintf(out, cap, "-");
        return;
    }
    char num[32];
    if (compact)
        sl_cli_fmt_compact(json_number_value(limit), num, sizeof num);
    else
        sl_cli_fmt_exact(json_number_value(limit), num, sizeof num);
    int64_t period_ms = sl_cli_get_i64(bucket, "period_ms", 0);
    if (period_ms <= 0) {
        snprintf(out, cap, "%s", num);
        return;
    }
    char per[32];
    sl_cli_fmt_period(period_ms, per, sizeof per);
    snprintf(out, cap, "%s/%s", num, per);
}

static void fmt_level(const json_t *bucket, int compact, char *out, size_t cap)
{
    char level[32], capacity[32];
    void (*fmt)(double, char *, size_t) = compact ? sl_cli_fmt_compact : sl_cli_fmt_exact;
    fmt(sl_cli_get_num(bucket, "level", NAN), level, sizeof level);
    fmt(sl_cli_get_num(bucket, "capacity", NAN), capacity, sizeof capacity);
    snprintf(out, cap, "%s/%s", level, capacity);
}

/* `used` as a whole percentage, clamped to [0, 100] (the API clamps too; a fixture may not). */
static int used_pct(const json_t *bucket)
{
    double used = sl_cli_get_num(bucket, "used", 0);
    if (!(used > 0)) /* also NaN */
        return 0;
    if (used >= 1)
        return 100;
    return (int)lround(used * 100);
}

/* When the bucket is full again or its window restarts: "resets in 12.3s" (sentence) or
 * "12.3s" (table column); "full" when nothing is used, "resets now"/"now" when it is due. */
static void fmt_reset(const json_t *bucket, int64_t now_ms, int sentence, char *out, size_t cap)
{
    json_t *reset = json_object_get(bucket, "reset_ms");
    if (json_is_number(json_object_get(bucket, "used")) && sl_cli_get_num(bucket, "used", 0) <= 0) {
        snprintf(out, cap, "full");
    } else if (!json_is_number(reset)) {
        snprintf(out, cap, "-");
    } else {
        int64_t in_ms = sl_cli_get_i64(bucket, "reset_ms", 0) - now_ms;
        char dur[32];
        sl_cli_fmt_duration(in_ms, dur, sizeof dur);
        if (in_ms <= 0)
            snprintf(out, cap, "%s", sentence ? "resets now" : "now");
        else
            snprintf(out, cap, "%s%s", sentence ? "resets in " : "", dur);
    }
}

static void print_queued(const json_t *queued, FILE *out)
{
    for (int c = 0; c < SL_CLASS_COUNT; c++) {
        const char *name = sl_class_name((sl_class_t)c);
        fprintf(out, "%s%s %lld", c ? "  " : "", name, (long long)sl_cli_get_i64(queued, name, 0));
    }
}

static int64_t queued_total(const json_t *queued)
{
    int64_t n = 0;
    for (int c = 0; c < SL_CLASS_COUNT; c++)
        n += sl_cli_get_i64(queued, sl_class_name((sl_class_t)c), 0);
    return n;
}

/* ---- Renderers -------------------------------------------------------------------------- */

static void render_status_bucket(const json_t *bucket, FILE *out, int64_t now_ms)
{
    char clipped[32], bar[32], level[48], limit[48], reset[48];
    const char *name = sl_cli_get_str(bucket, "name", sl_cli_get_str(bucket, "id", "?"));
    sl_cli_fmt_bar(used_pct(bucket), bar, sizeof bar);
    fmt_level(bucket, 1 /*compact*/, level, sizeof level);
    fmt_limit(bucket, 1 /*compact*/, limit, sizeof limit);
    /* A run-time override is worth seeing at a glance: the limit is not the config's. */
    if (sl_cli_get_bool(bucket, "override"))
        strncat(limit, "*", sizeof limit - strlen(limit) - 1);
    fmt_reset(bucket, now_ms, 1 /*sentence*/, reset, sizeof reset);
    fprintf(out, "    %-14s %s  %-15s  %-12s  %s\n", sl_cli_clip(name, 14, clipped, sizeof clipped),
            bar, level, limit, reset);
}

static void render_pool(const json_t *pool, FILE *out, int64_t now_ms)
{
    char clipped[64], dur[32];
    fprintf(out, "pool %s  queued: ",
            sl_cli_clip(sl_cli_get_str(pool, "route", "?"), 24, clipped, sizeof clipped));
    print_queued(json_object_get(pool, "queued"), out);
    int64_t blocked_ms = sl_cli_get_i64(pool, "blocked_ms", 0);
    if (blocked_ms >= 50) { /* what rounds to "0.0s" is noise */
        sl_cli_fmt_duration(blocked_ms, dur, sizeof dur);
        fprintf(out, "  blocked %s", dur);
    }
    fputc('\n', out);
    json_t *deps = json_object_get(pool, "deployments");
    size_t i;
    json_t *dep;
    json_array_foreach(deps, i, dep)
    {
        fprintf(out, "  %-24s in flight %lld  ",
                sl_cli_clip(sl_cli_get_str(dep, "name", "?"), 24, clipped, sizeof clipped),
                (long long)sl_cli_get_i64(dep, "in_flight", 0));
        int64_t paused_ms = sl_cli_get_i64(dep, "paused_ms", 0);
        if (paused_ms > 0) {
            sl_cli_fmt_duration(paused_ms, dur, sizeof dur);
            fprintf(out, "paused for %s\n", dur);
        } else {
            fputs("not paused\n", out);
        }
        size_t j;
        json_t *bucket;
        json_array_foreach(json_object_get(dep, "buckets"), j, bucket)
            render_status_bucket(bucket, out, now_ms);
    }
}

/* Every job a tenant has waiting: queued in each class, plus those held by a pause and those
 * delayed for a retry (still queued, just not eligible now). */
static int64_t backlog(const json_t *tenant)
{
    return queued_total(json_object_get(tenant, "queued")) + sl_cli_get_i64(tenant, "held", 0) +
           sl_cli_get_i64(tenant, "delayed", 0);
}

/* Busiest first (the whole backlog, so a paused tenant does not sink), then by name so the
 * order is stable. */
static int by_queued_desc(const void *pa, const void *pb)
{
    const json_t *a = *(const json_t *const *)pa;
    const json_t *b = *(const json_t *const *)pb;
    int64_t qa = backlog(a);
    int64_t qb = backlog(b);
    if (qa != qb)
        return qa > qb ? -1 : 1;
    return strcmp(sl_cli_get_str(a, "tenant", ""), sl_cli_get_str(b, "tenant", ""));
}

static void render_tenant_table(const json_t *tenants, FILE *out)
{
    size_t n = json_array_size(tenants);
    if (n == 0) {
        fputs("no tenants listed\n", out);
        return;
    }
    const json_t **rows = calloc(n, sizeof *rows);
    if (rows == NULL) {
        fputs("(out of memory listing the tenants)\n", out);
        return;
    }
    for (size_t i = 0; i < n; i++)
        rows[i] = json_array_get(tenants, i);
    qsort(rows, n, sizeof *rows, by_queued_desc);
    fprintf(out, "%-20s %6s %5s %-6s %7s %7s %7s %7s %7s %7s %7s\n", "TENANT", "WEIGHT", "GUAR",
            "PAUSED", "INTER", "STD", "PARTNER", "BATCH", "HELD", "DELAYED", "FLIGHT");
    size_t shown = n < SL_CLI_STATUS_TENANTS ? n : SL_CLI_STATUS_TENANTS;
    for (size_t i = 0; i < shown; i++) {
        const json_t *t = rows[i];
        const json_t *queued = json_object_get(t, "queued");
        char clipped[32], guarantee[16];
        snprintf(guarantee, sizeof guarantee, "%.2f", sl_cli_get_num(t, "guarantee", 0));
        fprintf(out, "%-20s %6lld %5s %-6s",
                sl_cli_clip(sl_cli_get_str(t, "tenant", "?"), 20, clipped, sizeof clipped),
                (long long)sl_cli_get_i64(t, "weight", 0), guarantee,
                sl_cli_get_bool(t, "paused") ? "yes" : "no");
        for (int c = 0; c < SL_CLASS_COUNT; c++)
            fprintf(out, " %7lld",
                    (long long)sl_cli_get_i64(queued, sl_class_name((sl_class_t)c), 0));
        fprintf(out, " %7lld %7lld %7lld\n", (long long)sl_cli_get_i64(t, "held", 0),
                (long long)sl_cli_get_i64(t, "delayed", 0),
                (long long)sl_cli_get_i64(t, "in_flight", 0));
    }
    if (n > shown)
        fprintf(out, "... and %zu more\n", n - shown);
    free(rows);
}

int sl_cli_render_status(const json_t *status, FILE *out, int64_t now_ms)
{
    if (!json_is_object(status))
        return -1;
    char clock[32];
    sl_cli_fmt_clock(now_ms, clock, sizeof clock);
    const json_t *totals = json_object_get(status, "totals");
    fprintf(out, "%s  role %s  queued %lld  held %lld  delayed %lld  in flight %lld\n", clock,
            sl_cli_get_str(status, "role", "?"), (long long)sl_cli_get_i64(totals, "queued", 0),
            (long long)sl_cli_get_i64(totals, "held", 0),
            (long long)sl_cli_get_i64(totals, "delayed", 0),
            (long long)sl_cli_get_i64(totals, "in_flight", 0));
    /* One scheduler of several: which partitions this one schedules. */
    const json_t *shard = json_object_get(status, "shard");
    if (json_is_object(shard)) {
        fprintf(out, "shard: %zu of %lld partitions (",
                json_array_size(json_object_get(shard, "owned")),
                (long long)sl_cli_get_i64(shard, "partitions", 0));
        size_t k;
        json_t *p;
        json_array_foreach(json_object_get(shard, "owned"), k, p)
        {
            if (k >= 16) {
                fputs(", ...", out);
                break;
            }
            fprintf(out, "%s%lld", k ? ", " : "", (long long)json_integer_value(p));
        }
        const json_t *leases = json_object_get(shard, "leases");
        if (!json_is_object(leases)) {
            fprintf(out, "), share of the shared limits %.3f\n",
                    json_real_value(json_object_get(shard, "share")));
        } else {
            fprintf(out, "); capacity leases: %s epoch %lld, %lld shards live, lease %.1f s left",
                    json_is_true(json_object_get(leases, "coordinator")) ? "coordinator of"
                                                                         : "coordinated in",
                    (long long)sl_cli_get_i64(leases, "epoch", 0),
                    (long long)sl_cli_get_i64(leases, "shards_live", 0),
                    (double)sl_cli_get_i64(leases, "lease_left_ms", 0) / 1000.0);
            long long expiries = (long long)sl_cli_get_i64(leases, "expiries", 0);
            if (expiries > 0)
                fprintf(out, " (ran out %lld times)", expiries);
            fputc('\n', out);
            const char *id;
            json_t *v;
            int k2 = 0;
            json_object_foreach((json_t *)json_object_get(leases, "granted"), id, v)
            {
                if (k2++ >= 8) {
                    fputs("  ...\n", out);
                    break;
                }
                fprintf(out, "  granted %.3f of %s\n", json_number_value(v), id);
            }
        }
    }
    /* Partner keys get no pools: the deployments are the operator's business. */
    size_t i;
    json_t *pool;
    json_array_foreach(json_object_get(status, "pools"), i, pool)
    {
        fputc('\n', out);
        render_pool(pool, out, now_ms);
    }
    fputc('\n', out);
    render_tenant_table(json_object_get(status, "tenants"), out);
    return 0;
}

int sl_cli_render_buckets(const json_t *buckets, FILE *out, int64_t now_ms)
{
    if (!json_is_array(buckets))
        return -1;
    if (json_array_size(buckets) == 0) {
        fputs("no buckets\n", out);
        return 0;
    }
    /* Ids are never clipped (they are what `quota set` takes): the column fits the longest. */
    int id_width = 6;
    size_t i;
    json_t *bucket;
    json_array_foreach(buckets, i, bucket)
    {
        int len = (int)strlen(sl_cli_get_str(bucket, "id", "?"));
        if (len > id_width)
            id_width = len;
    }
    fprintf(out, "%-*s  %-16s  %-21s  %4s  %-9s  %s\n", id_width, "BUCKET", "LIMIT",
            "LEVEL/CAPACITY", "USED", "RESET IN", "OVERRIDE");
    json_array_foreach(buckets, i, bucket)
    {
        char limit[64], level[64], reset[48], override[64] = "no";
        fmt_limit(bucket, 0 /*exact*/, limit, sizeof limit);
        fmt_level(bucket, 0 /*exact*/, level, sizeof level);
        fmt_reset(bucket, now_ms, 0 /*column*/, reset, sizeof reset);
        if (sl_cli_get_bool(bucket, "override")) {
            char configured[32] = "none";
            json_t *cl = json_object_get(bucket, "configured_limit");
            if (json_is_number(cl))
                sl_cli_fmt_exact(json_number_value(cl), configured, sizeof configured);
            snprintf(override, sizeof override, "yes (config %s)", configured);
        }
        fprintf(out, "%-*s  %-16s  %-21s  %3d%%  %-9s  %s\n", id_width,
                sl_cli_get_str(bucket, "id", "?"), limit, level, used_pct(bucket), reset, override);
    }
    return 0;
}

/* "2 (config 1)" when a run-time change is in force, else "2"; with the given decimals. */
static void fmt_setting(const json_t *t, const char *key, const char *configured_key, int decimals,
                        char *out, size_t cap)
{
    double v = sl_cli_get_num(t, key, NAN);
    double configured = sl_cli_get_num(t, configured_key, v);
    if (!isfinite(v)) {
        snprintf(out, cap, "-");
        return;
    }
    if (fabs(v - configured) > 1e-9)
        snprintf(out, cap, "%.*f (config %.*f)", decimals, v, decimals, configured);
    else
        snprintf(out, cap, "%.*f", decimals, v);
}

int sl_cli_render_tenant(const json_t *tenant, FILE *out, int64_t now_ms)
{
    if (!json_is_object(tenant))
        return -1;
    char weight[64], guarantee[64];
    fmt_setting(tenant, "weight", "configured_weight", 0, weight, sizeof weight);
    fmt_setting(tenant, "guarantee", "configured_guarantee", 2, guarantee, sizeof guarantee);
    fprintf(out, "tenant %s: weight %s, guarantee %s, %s\n", sl_cli_get_str(tenant, "tenant", "?"),
            weight, guarantee, sl_cli_get_bool(tenant, "paused") ? "PAUSED" : "not paused");
    fputs("  queued: ", out);
    print_queued(json_object_get(tenant, "queued"), out);
    fprintf(out, "\n  held %lld  delayed %lld  in flight %lld\n",
            (long long)sl_cli_get_i64(tenant, "held", 0),
            (long long)sl_cli_get_i64(tenant, "delayed", 0),
            (long long)sl_cli_get_i64(tenant, "in_flight", 0));
    const json_t *keys = json_object_get(tenant, "keys");
    if (json_array_size(keys) > 0) {
        fputs("  keys:", out);
        size_t i;
        json_t *key;
        json_array_foreach(keys, i, key)
            fprintf(out, "%s %s%s", i ? "," : "", sl_cli_get_str(key, "id", "?"),
                    sl_cli_get_bool(key, "paused") ? " (paused)" : "");
        fputc('\n', out);
    }
    const json_t *buckets = json_object_get(tenant, "buckets");
    if (json_is_array(buckets)) {
        fputc('\n', out);
        sl_cli_render_buckets(buckets, out, now_ms);
    }
    return 0;
}

int sl_cli_render_pause(const json_t *answer, FILE *out)
{
    if (!json_is_object(answer))
        return -1;
    const char *key = sl_cli_get_str(answer, "key", NULL);
    const char *tenant = sl_cli_get_str(answer, "tenant", NULL);
    int paused = sl_cli_get_bool(answer, "paused");
    if (key != NULL) {
        fprintf(out, "key %s (tenant %s) is %s\n", key, tenant != NULL ? tenant : "?",
                paused ? "paused: its queued jobs are held, new ones rejected"
                       : "not paused: its jobs are dispatched again");
    } else if (tenant != NULL) {
        if (paused)
            fprintf(out,
                    "tenant %s is paused: %lld queued jobs held, %lld calls in flight finish\n",
                    tenant, (long long)sl_cli_get_i64(answer, "held", 0),
                    (long long)sl_cli_get_i64(answer, "in_flight", 0));
        else
            fprintf(out, "tenant %s is not paused: %lld jobs queued, %lld still held by a key\n",
                    tenant, (long long)queued_total(json_object_get(answer, "queued")),
                    (long long)sl_cli_get_i64(answer, "held", 0));
    } else {
        return -1;
    }
    return 0;
}

/* One row of the job view: a label column, then the text. */
static void job_row(FILE *out, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void job_row(FILE *out, const char *label, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(out, "  %-10s ", label);
    vfprintf(out, fmt, ap);
    fputc('\n', out);
    va_end(ap);
}

/* "2m03s ago (2026-05-01 12:00:00)"; "-" when the field is missing. */
static void fmt_when(const json_t *obj, const char *key, int64_t now_ms, char *out, size_t cap)
{
    if (!json_is_number(json_object_get(obj, key))) {
        snprintf(out, cap, "-");
        return;
    }
    int64_t at_ms = sl_cli_get_i64(obj, key, 0);
    char rel[48], clock[32];
    sl_cli_fmt_relative(at_ms, now_ms, rel, sizeof rel);
    sl_cli_fmt_clock(at_ms, clock, sizeof clock);
    snprintf(out, cap, "%s (%s)", rel, clock);
}

/* Why a job is where it is: each reason the answer gives, one line each. */
static void render_job_why(const json_t *job, FILE *out, int64_t now_ms)
{
    const char *label = "why";
    const char *state = sl_cli_get_str(job, "state", "?");
    char when[96], dur[32];
    const json_t *waiting = json_object_get(job, "waiting_for");
    const json_t *result = json_object_get(job, "result");
    if (json_is_object(waiting)) {
        int64_t wait_ms = sl_cli_get_i64(waiting, "wait_ms", 0);
        sl_cli_fmt_duration(wait_ms, dur, sizeof dur);
        /* A pause has no room to wait for: the wait is 0 until it is lifted. */
        if (wait_ms > 0)
            job_row(out, label, "waiting for limiter %s: room in about %s",
                    sl_cli_get_str(waiting, "limiter", "?"), dur);
        else
            job_row(out, label, "waiting for limiter %s", sl_cli_get_str(waiting, "limiter", "?"));
        label = "";
    }
    if (sl_cli_get_str(job, "deployment", NULL) != NULL && strcmp(state, "leased") == 0) {
        fmt_when(job, "lease_expires_ms", now_ms, when, sizeof when);
        job_row(out, label, "leased to deployment %s; the lease expires %s",
                sl_cli_get_str(job, "deployment", "?"), when);
        label = "";
    }
    /* A retry time already past is no reason any more. */
    if (sl_cli_get_i64(job, "not_before_ms", 0) > now_ms) {
        fmt_when(job, "not_before_ms", now_ms, when, sizeof when);
        job_row(out, label, "waiting to retry: next attempt %s", when);
        label = "";
    }
    if (strcmp(state, "held") == 0) {
        job_row(out, label, "held: its tenant or its key is paused (sluice resume ...)");
        label = "";
    }
    if (json_is_object(result)) {
        const char *status = sl_cli_get_str(result, "status", "?");
        const json_t *error = json_object_get(result, "error");
        if (json_is_object(error)) {
            job_row(out, label, "%s: %s: %s", status, sl_cli_get_str(error, "reason", "?"),
                    sl_cli_get_str(error, "message", ""));
            label = "";
            if (sl_cli_get_str(error, "limiter", NULL) != NULL)
                job_row(out, label, "held back by %s", sl_cli_get_str(error, "limiter", "?"));
        } else {
            const json_t *usage = json_object_get(result, "usage");
            job_row(out, label, "%s on %s: tokens in %lld out %lld", status,
                    sl_cli_get_str(result, "deployment", "?"),
                    (long long)sl_cli_get_i64(usage, "input", 0),
                    (long long)sl_cli_get_i64(usage, "output", 0));
        }
        label = "";
    }
    if (label[0] != '\0') {
        if (strcmp(state, "queued") == 0)
            job_row(out, label, "queued: no limit holds it back; waiting for its turn");
        else
            job_row(out, label, "-");
    }
}

int sl_cli_render_job(const json_t *job, FILE *out, int64_t now_ms)
{
    if (!json_is_object(job))
        return -1;
    char when[96];
    fprintf(out, "job %s\n", sl_cli_get_str(job, "job_id", "?"));
    job_row(out, "state", "%s", sl_cli_get_str(job, "state", "?"));
    job_row(out, "tenant", "%s  route %s  class %s", sl_cli_get_str(job, "tenant", "?"),
            sl_cli_get_str(job, "route", "?"), sl_cli_get_str(job, "class", "?"));
    job_row(out, "attempts", "%lld", (long long)sl_cli_get_i64(job, "attempts", 0));
    fmt_when(job, "submitted_ms", now_ms, when, sizeof when);
    job_row(out, "submitted", "%s", when);
    if (json_is_number(json_object_get(job, "deadline_ms"))) {
        int64_t deadline_ms = sl_cli_get_i64(job, "deadline_ms", 0);
        fmt_when(job, "deadline_ms", now_ms, when, sizeof when);
        job_row(out, "deadline", "%s%s", deadline_ms <= now_ms ? "passed " : "", when);
    } else {
        job_row(out, "deadline", "none");
    }
    render_job_why(job, out, now_ms);
    return 0;
}
