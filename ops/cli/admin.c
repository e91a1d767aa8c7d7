/* admin.c - `sluice status|pause|resume|quota|jobs`: the scheduler's admin API from a terminal.
 *
 * Two halves that do not know each other. The renderers (sl_cli_render_*, admin.h) turn the
 * API's JSON objects (scheduler/ADMIN-API.md) into plain text and touch neither the network
 * nor the clock, so tests feed them fixtures. The commands parse arguments, make one HTTP call
 * per answer through libcurl, and hand the answer to a renderer, or print it with --json.
 */
#include "admin.h"

#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "util.h"

#define TIMEOUT_MS 10000L
#define ANSWER_MAX_BYTES ((size_t)32 << 20) /* a status of many thousands of tenants fits */
#define KEY_FILE_MAX_BYTES ((size_t)64 << 10)
#define BAR_WIDTH 10

/* ---- Reading the API's objects ---------------------------------------------------------- */

static int64_t get_i64(const json_t *obj, const char *key, int64_t dflt)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (json_is_real(v) && isfinite(json_real_value(v)) && fabs(json_real_value(v)) < 9e18)
        return (int64_t)llround(json_real_value(v));
    return dflt;
}

static double get_num(const json_t *obj, const char *key, double dflt)
{
    json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

static const char *get_str(const json_t *obj, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s != NULL ? s : dflt;
}

static int get_bool(const json_t *obj, const char *key)
{
    return json_is_true(json_object_get(obj, key));
}

/* ---- Formatting ------------------------------------------------------------------------- */

/* A number as an operator typed it: integers without decimals, others with one. */
static void fmt_exact(double v, char *out, size_t cap)
{
    if (!isfinite(v)) {
        snprintf(out, cap, "-");
        return;
    }
    double r = round(v) + 0.0; /* + 0.0 turns -0 into 0 */
    if (fabs(v - r) < 0.05)
        snprintf(out, cap, "%.0f", r);
    else
        snprintf(out, cap, "%.1f", v);
}

/* A number in at most 6 characters for the live view: 950, 12.5k, 100k, 1.2M. */
static void fmt_compact(double v, char *out, size_t cap)
{
    static const char *const units[] = {"", "k", "M", "G", "T"};
    int u = 0;
    while (u < 4 && fabs(v) >= 999.95) {
        v /= 1000;
        u++;
    }
    if (u == 0) {
        fmt_exact(v, out, cap);
        return;
    }
    char num[32];
    if (fabs(v) >= 99.95) {
        snprintf(num, sizeof num, "%.0f", v);
    } else {
        snprintf(num, sizeof num, "%.1f", v);
        size_t n = strlen(num);
        if (n > 2 && strcmp(num + n - 2, ".0") == 0)
            num[n - 2] = '\0';
    }
    snprintf(out, cap, "%s%s", num, units[u]);
}

void sl_cli_fmt_duration(int64_t ms, char *out, size_t cap)
{
    if (ms < 0)
        ms = ms == INT64_MIN ? INT64_MAX : -ms;
    if (ms > INT64_MAX / 2) /* keeps the rounding below from overflowing; far beyond a day */
        ms = INT64_MAX / 2;
    int64_t tenths = (ms + 50) / 100;
    if (tenths < 600) {
        snprintf(out, cap, "%lld.%llds", (long long)(tenths / 10), (long long)(tenths % 10));
        return;
    }
    long long s = (long long)((ms + 500) / 1000); /* rounded like the seconds above */
    if (s < 3600)
        snprintf(out, cap, "%lldm%02llds", s / 60, s % 60);
    else if (s < 86400)
        snprintf(out, cap, "%lldh%02lldm", s / 3600, s % 3600 / 60);
    else
        snprintf(out, cap, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
}

/* A limit's period: "s", "min", "h", "day", "week", or a multiple ("5min", "2d"). */
static void fmt_period(int64_t period_ms, char *out, size_t cap)
{
    static const struct {
        int64_t ms;
        const char *one, *many;
    } units[] = {{604800000, "week", "w"},
                 {86400000, "day", "d"},
                 {3600000, "h", "h"},
                 {60000, "min", "min"},
                 {1000, "s", "s"}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (period_ms % units[i].ms == 0) {
            long long n = (long long)(period_ms / units[i].ms);
            if (n == 1)
                snprintf(out, cap, "%s", units[i].one);
            else
                snprintf(out, cap, "%lld%s", n, units[i].many);
            return;
        }
    }
    snprintf(out, cap, "%lldms", (long long)period_ms);
}

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
        fmt_compact(json_number_value(limit), num, sizeof num);
    else
        fmt_exact(json_number_value(limit), num, sizeof num);
    int64_t period_ms = get_i64(bucket, "period_ms", 0);
    if (period_ms <= 0) {
        snprintf(out, cap, "%s", num);
        return;
    }
    char per[32];
    fmt_period(period_ms, per, sizeof per);
    snprintf(out, cap, "%s/%s", num, per);
}

static void fmt_level(const json_t *bucket, int compact, char *out, size_t cap)
{
    char level[32], capacity[32];
    void (*fmt)(double, char *, size_t) = compact ? fmt_compact : fmt_exact;
    fmt(get_num(bucket, "level", NAN), level, sizeof level);
    fmt(get_num(bucket, "capacity", NAN), capacity, sizeof capacity);
    snprintf(out, cap, "%s/%s", level, capacity);
}

/* `used` as a whole percentage, clamped to [0, 100] (the API clamps too; a fixture may not). */
static int used_pct(const json_t *bucket)
{
    double used = get_num(bucket, "used", 0);
    if (!(used > 0)) /* also NaN */
        return 0;
    if (used >= 1)
        return 100;
    return (int)lround(used * 100);
}

/* "[#####.....]  52%": one '#' per whole ten percent, so the bar is full only at 100%. */
static void fmt_bar(const json_t *bucket, char *out, size_t cap)
{
    int pct = used_pct(bucket);
    char bar[BAR_WIDTH + 1];
    for (int i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < pct * BAR_WIDTH / 100 ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    snprintf(out, cap, "[%s] %3d%%", bar, pct);
}

/* When the bucket is full again or its window restarts: "resets in 12.3s" (sentence) or
 * "12.3s" (table column); "full" when nothing is used, "resets now"/"now" when it is due. */
static void fmt_reset(const json_t *bucket, int64_t now_ms, int sentence, char *out, size_t cap)
{
    json_t *reset = json_object_get(bucket, "reset_ms");
    if (json_is_number(json_object_get(bucket, "used")) && get_num(bucket, "used", 0) <= 0) {
        snprintf(out, cap, "full");
    } else if (!json_is_number(reset)) {
        snprintf(out, cap, "-");
    } else {
        int64_t in_ms = get_i64(bucket, "reset_ms", 0) - now_ms;
        char dur[32];
        sl_cli_fmt_duration(in_ms, dur, sizeof dur);
        if (in_ms <= 0)
            snprintf(out, cap, "%s", sentence ? "resets now" : "now");
        else
            snprintf(out, cap, "%s%s", sentence ? "resets in " : "", dur);
    }
}

/* s itself when it fits in width columns, else its first width-1 characters and '~'. */
static const char *clip(const char *s, int width, char *buf, size_t cap)
{
    if ((int)strlen(s) <= width || cap < 2)
        return s;
    int n = width - 1 < (int)cap - 2 ? width - 1 : (int)cap - 2;
    snprintf(buf, cap, "%.*s~", n, s);
    return buf;
}

/* "YYYY-MM-DD HH:MM:SS" local time of an epoch-ms instant. */
static void fmt_clock(int64_t ms, char *out, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (localtime_r(&t, &tm) == NULL || strftime(out, cap, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(out, cap, "-");
}

/* "2m03s ago" or "in 57m57s", relative to now_ms. */
static void fmt_relative(int64_t at_ms, int64_t now_ms, char *out, size_t cap)
{
    char dur[32];
    sl_cli_fmt_duration(at_ms - now_ms, dur, sizeof dur);
    if (at_ms > now_ms)
        snprintf(out, cap, "in %s", dur);
    else
        snprintf(out, cap, "%s ago", dur);
}

static void print_queued(const json_t *queued, FILE *out)
{
    for (int c = 0; c < SL_CLASS_COUNT; c++) {
        const char *name = sl_class_name((sl_class_t)c);
        fprintf(out, "%s%s %lld", c ? "  " : "", name, (long long)get_i64(queued, name, 0));
    }
}

static int64_t queued_total(const json_t *queued)
{
    int64_t n = 0;
    for (int c = 0; c < SL_CLASS_COUNT; c++)
        n += get_i64(queued, sl_class_name((sl_class_t)c), 0);
    return n;
}

/* ---- Renderers -------------------------------------------------------------------------- */

static void render_status_bucket(const json_t *bucket, FILE *out, int64_t now_ms)
{
    char clipped[32], bar[32], level[48], limit[48], reset[48];
    const char *name = get_str(bucket, "name", get_str(bucket, "id", "?"));
    fmt_bar(bucket, bar, sizeof bar);
    fmt_level(bucket, 1 /*compact*/, level, sizeof level);
    fmt_limit(bucket, 1 /*compact*/, limit, sizeof limit);
    /* A run-time override is worth seeing at a glance: the limit is not the config's. */
    if (get_bool(bucket, "override"))
        strncat(limit, "*", sizeof limit - strlen(limit) - 1);
    fmt_reset(bucket, now_ms, 1 /*sentence*/, reset, sizeof reset);
    fprintf(out, "    %-14s %s  %-15s  %-12s  %s\n", clip(name, 14, clipped, sizeof clipped), bar,
            level, limit, reset);
}

static void render_pool(const json_t *pool, FILE *out, int64_t now_ms)
{
    char clipped[64], dur[32];
    fprintf(out,
            "pool %s  queued: ", clip(get_str(pool, "route", "?"), 24, clipped, sizeof clipped));
    print_queued(json_object_get(pool, "queued"), out);
    int64_t blocked_ms = get_i64(pool, "blocked_ms", 0);
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
                clip(get_str(dep, "name", "?"), 24, clipped, sizeof clipped),
                (long long)get_i64(dep, "in_flight", 0));
        int64_t paused_ms = get_i64(dep, "paused_ms", 0);
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
    return queued_total(json_object_get(tenant, "queued")) + get_i64(tenant, "held", 0) +
           get_i64(tenant, "delayed", 0);
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
    return strcmp(get_str(a, "tenant", ""), get_str(b, "tenant", ""));
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
        snprintf(guarantee, sizeof guarantee, "%.2f", get_num(t, "guarantee", 0));
        fprintf(out, "%-20s %6lld %5s %-6s",
                clip(get_str(t, "tenant", "?"), 20, clipped, sizeof clipped),
                (long long)get_i64(t, "weight", 0), guarantee,
                get_bool(t, "paused") ? "yes" : "no");
        for (int c = 0; c < SL_CLASS_COUNT; c++)
            fprintf(out, " %7lld", (long long)get_i64(queued, sl_class_name((sl_class_t)c), 0));
        fprintf(out, " %7lld %7lld %7lld\n", (long long)get_i64(t, "held", 0),
                (long long)get_i64(t, "delayed", 0), (long long)get_i64(t, "in_flight", 0));
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
    fmt_clock(now_ms, clock, sizeof clock);
    const json_t *totals = json_object_get(status, "totals");
    fprintf(out, "%s  role %s  queued %lld  held %lld  delayed %lld  in flight %lld\n", clock,
            get_str(status, "role", "?"), (long long)get_i64(totals, "queued", 0),
            (long long)get_i64(totals, "held", 0), (long long)get_i64(totals, "delayed", 0),
            (long long)get_i64(totals, "in_flight", 0));
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
        int len = (int)strlen(get_str(bucket, "id", "?"));
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
        if (get_bool(bucket, "override")) {
            char configured[32] = "none";
            json_t *cl = json_object_get(bucket, "configured_limit");
            if (json_is_number(cl))
                fmt_exact(json_number_value(cl), configured, sizeof configured);
            snprintf(override, sizeof override, "yes (config %s)", configured);
        }
        fprintf(out, "%-*s  %-16s  %-21s  %3d%%  %-9s  %s\n", id_width, get_str(bucket, "id", "?"),
                limit, level, used_pct(bucket), reset, override);
    }
    return 0;
}

/* "2 (config 1)" when a run-time change is in force, else "2"; with the given decimals. */
static void fmt_setting(const json_t *t, const char *key, const char *configured_key, int decimals,
                        char *out, size_t cap)
{
    double v = get_num(t, key, NAN);
    double configured = get_num(t, configured_key, v);
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
    fprintf(out, "tenant %s: weight %s, guarantee %s, %s\n", get_str(tenant, "tenant", "?"), weight,
            guarantee, get_bool(tenant, "paused") ? "PAUSED" : "not paused");
    fputs("  queued: ", out);
    print_queued(json_object_get(tenant, "queued"), out);
    fprintf(out, "\n  held %lld  delayed %lld  in flight %lld\n",
            (long long)get_i64(tenant, "held", 0), (long long)get_i64(tenant, "delayed", 0),
            (long long)get_i64(tenant, "in_flight", 0));
    const json_t *keys = json_object_get(tenant, "keys");
    if (json_array_size(keys) > 0) {
        fputs("  keys:", out);
        size_t i;
        json_t *key;
        json_array_foreach(keys, i, key)
            fprintf(out, "%s %s%s", i ? "," : "", get_str(key, "id", "?"),
                    get_bool(key, "paused") ? " (paused)" : "");
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
    const char *key = get_str(answer, "key", NULL);
    const char *tenant = get_str(answer, "tenant", NULL);
    int paused = get_bool(answer, "paused");
    if (key != NULL) {
        fprintf(out, "key %s (tenant %s) is %s\n", key, tenant != NULL ? tenant : "?",
                paused ? "paused: its queued jobs are held, new ones rejected"
                       : "not paused: its jobs are dispatched again");
    } else if (tenant != NULL) {
        if (paused)
            fprintf(out,
                    "tenant %s is paused: %lld queued jobs held, %lld calls in flight finish\n",
                    tenant, (long long)get_i64(answer, "held", 0),
                    (long long)get_i64(answer, "in_flight", 0));
        else
            fprintf(out, "tenant %s is not paused: %lld jobs queued, %lld still held by a key\n",
                    tenant, (long long)queued_total(json_object_get(answer, "queued")),
                    (long long)get_i64(answer, "held", 0));
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
    int64_t at_ms = get_i64(obj, key, 0);
    char rel[48], clock[32];
    fmt_relative(at_ms, now_ms, rel, sizeof rel);
    fmt_clock(at_ms, clock, sizeof clock);
    snprintf(out, cap, "%s (%s)", rel, clock);
}

/* Why a job is where it is: each reason the answer gives, one line each. */
static void render_job_why(const json_t *job, FILE *out, int64_t now_ms)
{
    const char *label = "why";
    const char *state = get_str(job, "state", "?");
    char when[96], dur[32];
    const json_t *waiting = json_object_get(job, "waiting_for");
    const json_t *result = json_object_get(job, "result");
    if (json_is_object(waiting)) {
        int64_t wait_ms = get_i64(waiting, "wait_ms", 0);
        sl_cli_fmt_duration(wait_ms, dur, sizeof dur);
        /* A pause has no room to wait for: the wait is 0 until it is lifted. */
        if (wait_ms > 0)
            job_row(out, label, "waiting for limiter %s: room in about %s",
                    get_str(waiting, "limiter", "?"), dur);
        else
            job_row(out, label, "waiting for limiter %s", get_str(waiting, "limiter", "?"));
        label = "";
    }
    if (get_str(job, "deployment", NULL) != NULL && strcmp(state, "leased") == 0) {
        fmt_when(job, "lease_expires_ms", now_ms, when, sizeof when);
        job_row(out, label, "leased to deployment %s; the lease expires %s",
                get_str(job, "deployment", "?"), when);
        label = "";
    }
    /* A retry time already past is no reason any more. */
    if (get_i64(job, "not_before_ms", 0) > now_ms) {
        fmt_when(job, "not_before_ms", now_ms, when, sizeof when);
        job_row(out, label, "waiting to retry: next attempt %s", when);
        label = "";
    }
    if (strcmp(state, "held") == 0) {
        job_row(out, label, "held: its tenant or its key is paused (sluice resume ...)");
        label = "";
    }
    if (json_is_object(result)) {
        const char *status = get_str(result, "status", "?");
        const json_t *error = json_object_get(result, "error");
        if (json_is_object(error)) {
            job_row(out, label, "%s: %s: %s", status, get_str(error, "reason", "?"),
                    get_str(error, "message", ""));
            label = "";
            if (get_str(error, "limiter", NULL) != NULL)
                job_row(out, label, "held back by %s", get_str(error, "limiter", "?"));
        } else {
            const json_t *usage = json_object_get(result, "usage");
            job_row(out, label, "%s on %s: tokens in %lld out %lld", status,
                    get_str(result, "deployment", "?"), (long long)get_i64(usage, "input", 0),
                    (long long)get_i64(usage, "output", 0));
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
    fprintf(out, "job %s\n", get_str(job, "job_id", "?"));
    job_row(out, "state", "%s", get_str(job, "state", "?"));
    job_row(out, "tenant", "%s  route %s  class %s", get_str(job, "tenant", "?"),
            get_str(job, "route", "?"), get_str(job, "class", "?"));
    job_row(out, "attempts", "%lld", (long long)get_i64(job, "attempts", 0));
    fmt_when(job, "submitted_ms", now_ms, when, sizeof when);
    job_row(out, "submitted", "%s", when);
    if (json_is_number(json_object_get(job, "deadline_ms"))) {
        int64_t deadline_ms = get_i64(job, "deadline_ms", 0);
        fmt_when(job, "deadline_ms", now_ms, when, sizeof when);
        job_row(out, "deadline", "%s%s", deadline_ms <= now_ms ? "passed " : "", when);
    } else {
        job_row(out, "deadline", "none");
    }
    render_job_why(job, out, now_ms);
    return 0;
}

/* ---- Request bodies and URLs ------------------------------------------------------------ */

/* A non-negative number, or null for "default"; NULL when s is neither. */
static json_t *parse_value(const char *s, int integer_only)
{
    if (strcmp(s, "default") == 0)
        return json_null();
    if (*s == '\0' || *s == '-' || *s == '+' || *s == ' ')
        return NULL;
    char *end = NULL;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (errno == 0 && *end == '\0')
        return json_integer((json_int_t)n);
    if (integer_only)
        return NULL;
    errno = 0;
    double d = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !isfinite(d) || d < 0)
        return NULL;
    return json_real(d);
}

json_t *sl_cli_quota_body(int tenant, int argc, char **argv, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        int integer_only;
    } fields[] = {{"weight", 1}, {"guarantee", 0}, {"daily_requests", 1}, {"daily_tokens", 1}};
    json_t *body = json_object();
    if (body == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!tenant) {
        json_t *v = argc == 1 ? parse_value(argv[0], 0) : NULL;
        if (v == NULL) {
            snprintf(err, errlen, "LIMIT must be a non-negative number or \"default\"");
            json_decref(body);
            return NULL;
        }
        json_object_set_new(body, "limit", v);
        return body;
    }
    for (int i = 0; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        size_t f = sizeof fields / sizeof fields[0];
        if (eq != NULL) {
            for (f = 0; f < sizeof fields / sizeof fields[0]; f++) {
                if (strlen(fields[f].name) == (size_t)(eq - argv[i]) &&
                    strncmp(argv[i], fields[f].name, (size_t)(eq - argv[i])) == 0)
                    break;
            }
        }
        if (f == sizeof fields / sizeof fields[0]) {
            snprintf(err, errlen,
                     "%s: expected KEY=VALUE with KEY weight, guarantee, daily_requests or "
                     "daily_tokens",
                     argv[i]);
            json_decref(body);
            return NULL;
        }
        if (json_object_get(body, fields[f].name) != NULL) {
            snprintf(err, errlen, "%s is given twice", fields[f].name);
            json_decref(body);
            return NULL;
        }
        json_t *v = parse_value(eq + 1, fields[f].integer_only);
        if (v == NULL) {
            snprintf(err, errlen, "%s must be %s or \"default\"", fields[f].name,
                     fields[f].integer_only ? "a non-negative integer" : "a non-negative number");
            json_decref(body);
            return NULL;
        }
        json_object_set_new(body, fields[f].name, v);
    }
    if (json_object_size(body) == 0) {
        snprintf(err, errlen,
                 "name at least one of weight=, guarantee=, daily_requests=, "
                 "daily_tokens=");
        json_decref(body);
        return NULL;
    }
    return body;
}

char *sl_cli_url_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(strlen(s) * 3 + 1);
    if (out == NULL)
        return NULL;
    char *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~:", *p) != NULL) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}

/* ---- HTTP ------------------------------------------------------------------------------- */

typedef struct {
    const char *prog; /* "sluice status": prefix of usage messages */
    char *base_url;   /* "http://host:port", no trailing slash */
    char *key;        /* the admin key; wiped when freed */
    int json;         /* --json: print answers as JSON */
    CURL *curl;
} admin_t;

typedef struct {
    char *data;
    size_t len;
    int toobig;
} answer_buf_t;

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    answer_buf_t *b = ud;
    size_t n = size * nmemb;
    if (b->len + n > ANSWER_MAX_BYTES) {
        b->toobig = 1;
        return 0;
    }
    char *bigger = realloc(b->data, b->len + n + 1);
    if (bigger == NULL)
        return 0;
    b->data = bigger;
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

/* Ctrl-C during a call ends it at once instead of after the timeout. */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)ud;
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    return sl_stop_requested() ? 1 : 0;
}

/* Appends one header line; on failure the list stays as it was (and is still freed). */
static int add_header(struct curl_slist **list, const char *line)
{
    struct curl_slist *longer = curl_slist_append(*list, line);
    if (longer == NULL)
        return 0;
    *list = longer;
    return 1;
}

/* Calls METHOD base_url+path (path already escaped) with body (NULL = none). On success returns
 * 0 and *answer is the parsed JSON (caller decrefs). Otherwise returns 1, *answer stays NULL,
 * and err holds one line saying why: the API's "code: message", or what the connection did. */
static int api_call(admin_t *a, const char *method, const char *path, const json_t *body,
                    json_t **answer, char *err, size_t errlen)
{
    *answer = NULL;
    int rc = 1;
    char url[2048];
    char curl_err[CURL_ERROR_SIZE] = "";
    char *auth = NULL;
    char *payload = NULL;
    struct curl_slist *headers = NULL;
    answer_buf_t buf = {NULL, 0, 0};
    snprintf(url, sizeof url, "%s%s", a->base_url, path);
    if (a->curl == NULL)
        a->curl = curl_easy_init();
    if (a->curl == NULL || asprintf(&auth, "Authorization: Bearer %s", a->key) < 0) {
        auth = NULL;
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    CURL *c = a->curl;
    curl_easy_reset(c);
    /* An empty POST gets an empty Content-Type: curl would label nothing as a form. */
    const char *content_type = body != NULL                 ? "Content-Type: application/json"
                               : strcmp(method, "GET") != 0 ? "Content-Type:"
                                                            : NULL;
    int ok = add_header(&headers, auth) && add_header(&headers, "Accept: application/json") &&
             (content_type == NULL || add_header(&headers, content_type));
    if (body != NULL)
        payload = json_dumps(body, JSON_COMPACT);
    if (!ok || (body != NULL && payload == NULL)) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "sluice-cli");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &buf);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    if (strcmp(method, "GET") != 0) {
        /* POST with an empty body for pause/resume; PUT carries the JSON body. */
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload != NULL ? payload : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)(payload != NULL ? strlen(payload) : 0));
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    CURLcode cc = curl_easy_perform(c);
    if (cc != CURLE_OK) {
        const char *detail = curl_err[0] != '\0' ? curl_err : curl_easy_strerror(cc);
        if (cc == CURLE_ABORTED_BY_CALLBACK)
            snprintf(err, errlen, "interrupted");
        else if (buf.toobig)
            snprintf(err, errlen, "%s: the answer is larger than %zu MiB", url,
                     ANSWER_MAX_BYTES >> 20);
        else if (cc == CURLE_COULDNT_CONNECT)
            snprintf(err, errlen,
                     "cannot connect to %s (%s); is the scheduler running? Its admin API may be "
                     "off (scheduler.admin_listen in its config), or use --admin URL",
                     url, detail);
        else if (cc == CURLE_OPERATION_TIMEDOUT)
            snprintf(err, errlen, "%s: no answer within %ld s", url, TIMEOUT_MS / 1000);
        else
            snprintf(err, errlen, "%s: %s", url, detail);
        goto out;
    }
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    json_t *doc = buf.data != NULL ? json_loadb(buf.data, buf.len, 0, NULL) : NULL;
    if (status >= 200 && status < 300 && doc != NULL) {
        *answer = doc;
        rc = 0;
        goto out;
    }
    const json_t *error = json_object_get(doc, "error");
    if (status >= 300 && json_is_string(json_object_get(error, "code")))
        snprintf(err, errlen, "%s: %s", get_str(error, "code", "?"), get_str(error, "message", ""));
    else if (status >= 300)
        snprintf(err, errlen, "%s answered HTTP %ld", url, status);
    else
        snprintf(err, errlen, "%s answered something that is not JSON", url);
    json_decref(doc);
out:
    curl_slist_free_all(headers);
    if (auth != NULL) {
        sodium_memzero(auth, strlen(auth));
        free(auth);
    }
    free(payload);
    free(buf.data);
    return rc;
}

/* ---- Options every admin command takes -------------------------------------------------- */

typedef struct {
    int json;
    int help;
    const char *admin_url;
    const char *key_file;
    int nrest;
    char **rest; /* the command's own arguments, in order (points into argv) */
} common_opts_t;

/* Takes --json, --admin URL, --admin-key-file FILE and --help out of argv. Returns 0, or 2
 * (usage) with the reason printed. opts->rest is allocated (free it) even on failure. */
static int parse_common(const char *prog, int argc, char **argv, common_opts_t *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->rest = calloc((size_t)argc + 1, sizeof *opts->rest);
    if (opts->rest == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 2;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            opts->json = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            opts->help = 1;
        } else if (strcmp(a, "--admin") == 0 || strcmp(a, "--admin-key-file") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "%s: %s needs a value\n", prog, a);
                return 2;
            }
            if (strcmp(a, "--admin") == 0)
                opts->admin_url = argv[++i];
            else
                opts->key_file = argv[++i];
        } else {
            opts->rest[opts->nrest++] = argv[i];
        }
    }
    return 0;
}

/* The admin key: the first line of key_file, else $SLUICE_ADMIN_KEY. NULL with err set when
 * there is none (caller frees the key with free_key). */
static char *read_key(const char *key_file, char *err, size_t errlen)
{
    char *key = NULL;
    if (key_file != NULL) {
        char *data = NULL;
        size_t len = 0;
        sl_err_t rc = sl_read_file(key_file, KEY_FILE_MAX_BYTES, &data, &len);
        if (rc != SL_OK) {
            snprintf(err, errlen, "cannot read the admin key file %s: %s", key_file,
                     sl_strerror(rc));
            return NULL;
        }
        size_t start = strspn(data, " \t");
        size_t end = start + strcspn(data + start, "\r\n");
        while (end > start && (data[end - 1] == ' ' || data[end - 1] == '\t'))
            end--;
        if (end > start)
            key = strndup(data + start, end - start);
        sodium_memzero(data, len);
        free(data);
        if (key == NULL) {
            snprintf(err, errlen, "the first line of %s holds no admin key", key_file);
            return NULL;
        }
        return key;
    }
    const char *env = getenv("SLUICE_ADMIN_KEY");
    if (env == NULL || env[0] == '\0') {
        snprintf(err, errlen, "no admin key: give --admin-key-file FILE or set SLUICE_ADMIN_KEY");
        return NULL;
    }
    /* The key goes into a header line; a line break would forge headers. */
    if (strpbrk(env, "\r\n") != NULL) {
        snprintf(err, errlen, "SLUICE_ADMIN_KEY holds a line break");
        return NULL;
    }
    key = strdup(env);
    if (key == NULL)
        snprintf(err, errlen, "out of memory");
    return key;
}

static void free_key(char *key)
{
    if (key != NULL) {
        sodium_memzero(key, strlen(key));
        free(key);
    }
}

/* The API's base URL: --admin, else $SLUICE_ADMIN_URL, else http:// + the config's
 * scheduler.admin_listen (a wildcard host becomes the loopback). NULL with err set when the
 * config turns the API off. Caller frees. */
static char *resolve_url(const sl_config_t *cfg, const char *flag, char *err, size_t errlen)
{
    const char *url = flag;
    const char *env = getenv("SLUICE_ADMIN_URL");
    if (url == NULL && env != NULL && env[0] != '\0')
        url = env;
    char buf[1024];
    if (url == NULL) {
        const char *listen = cfg != NULL ? cfg->admin_listen : NULL;
        if (listen == NULL || listen[0] == '\0') {
            snprintf(err, errlen,
                     "the config turns the admin API off (scheduler.admin_listen is \"\"); "
                     "give --admin URL or set SLUICE_ADMIN_URL");
            return NULL;
        }
        if (strncmp(listen, "0.0.0.0:", 8) == 0)
            snprintf(buf, sizeof buf, "http://127.0.0.1:%s", listen + 8);
        else if (strncmp(listen, "[::]:", 5) == 0)
            snprintf(buf, sizeof buf, "http://[::1]:%s", listen + 5);
        else
            snprintf(buf, sizeof buf, "http://%s", listen);
    } else if (strstr(url, "://") == NULL) {
        snprintf(buf, sizeof buf, "http://%s", url);
    } else {
        snprintf(buf, sizeof buf, "%s", url);
    }
    size_t n = strlen(buf);
    while (n > 0 && buf[n - 1] == '/')
        buf[--n] = '\0';
    char *out = strdup(buf);
    if (out == NULL)
        snprintf(err, errlen, "out of memory");
    return out;
}

/* Resolves URL and key into a. Returns 0, or 2 with the reason printed. */
static int admin_open(const sl_config_t *cfg, const char *prog, const common_opts_t *opts,
                      admin_t *a)
{
    char err[512] = "";
    memset(a, 0, sizeof *a);
    a->prog = prog;
    a->json = opts->json;
    a->base_url = resolve_url(cfg, opts->admin_url, err, sizeof err);
    if (a->base_url != NULL)
        a->key = read_key(opts->key_file, err, sizeof err);
    if (a->base_url == NULL || a->key == NULL) {
        fprintf(stderr, "%s: %s\n", prog, err);
        free(a->base_url);
        a->base_url = NULL;
        return 2;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "%s: libcurl failed to initialise\n", prog);
        free(a->base_url);
        free_key(a->key);
        memset(a, 0, sizeof *a);
        return 2;
    }
    return 0;
}

static void admin_close(admin_t *a)
{
    if (a->base_url == NULL)
        return;
    if (a->curl != NULL)
        curl_easy_cleanup(a->curl);
    curl_global_cleanup();
    free(a->base_url);
    free_key(a->key);
    memset(a, 0, sizeof *a);
}

/* One call whose failure ends the command: prints "sluice: why" and returns 1. */
static int call_or_report(admin_t *a, const char *method, const char *path, const json_t *body,
                          json_t **answer)
{
    char err[4096] = "";
    if (api_call(a, method, path, body, answer, err, sizeof err) != 0) {
        fprintf(stderr, "sluice: %s\n", err);
        return 1;
    }
    return 0;
}

static int print_json(const json_t *doc)
{
    char *text = json_dumps(doc, JSON_INDENT(2));
    if (text == NULL)
        return 1;
    puts(text);
    free(text);
    return 0;
}

/* The answer is not the object the spec promises: the scheduler is older or newer. */
static int unexpected(const char *prog)
{
    fprintf(stderr, "%s: the scheduler's answer is not what this sluice expects (try --json)\n",
            prog);
    return 1;
}

#define COMMON_HELP                                                                                \
    "\n"                                                                                           \
    "Every admin command takes:\n"                                                                 \
    "  --json                 print the API's JSON answer instead of text\n"                       \
    "  --admin URL            the scheduler's admin API (default $SLUICE_ADMIN_URL, else\n"        \
    "                         http:// + scheduler.admin_listen from the config)\n"                 \
    "  --admin-key-file FILE  the admin key, on the first line of FILE (default\n"                 \
    "                         $SLUICE_ADMIN_KEY)\n"                                                \
    "Exit status: 0 done, 1 the API refused or could not be reached, 2 bad usage.\n"

/* ---- sluice status ---------------------------------------------------------------------- */

static const char status_usage[] =
    "usage: sluice status [--once] [--interval SECONDS] [--json] [--admin URL]\n"
    "                     [--admin-key-file FILE]\n"
    "\n"
    "Shows the scheduler's queues, each deployment's buckets (how full, when they reset) and\n"
    "the busiest tenants. On a terminal it redraws every --interval seconds (default 1) until\n"
    "Ctrl-C; with --once, --json or when the output is not a terminal it prints one snapshot.\n"
    "Bars show how much of a bucket is used; a '*' after a limit marks a run-time "
    "override.\n" COMMON_HELP;

/* The scheduler's clock when the answer has it: reset times then do not suffer clock skew. */
static int64_t answer_now_ms(const json_t *answer)
{
    return get_i64(answer, "now_ms", sl_now_ms());
}

static int terminal_rows(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0)
        return ws.ws_row;
    return 0;
}

/* Redraws the screen in place: home, each line then clear-to-end-of-line, then clear below,
 * so the view does not flicker. Lines past the window's height are cut (the footer stays). */
static void draw(const char *text, const char *footer)
{
    int rows = terminal_rows();
    int max_lines = rows > 3 ? rows - 2 : 1 << 30;
    int total = 0;
    for (const char *p = text; *p != '\0'; p++)
        total += *p == '\n';
    fputs("\033[H", stdout);
    const char *line = text;
    for (int n = 0; *line != '\0'; n++) {
        const char *nl = strchr(line, '\n');
        size_t len = nl != NULL ? (size_t)(nl - line) : strlen(line);
        if (total > max_lines && n == max_lines - 1) {
            printf("... %d more lines: enlarge the window, or use --once\033[K\n", total - n);
            break;
        }
        fwrite(line, 1, len, stdout);
        fputs("\033[K\n", stdout);
        line += len + (nl != NULL);
    }
    printf("\033[K\n%s\033[K\033[J", footer);
    fflush(stdout);
}

static void sleep_unless_stopped(double seconds)
{
    double until = sl_mono_ms() + seconds * 1000.0;
    while (!sl_stop_requested() && sl_mono_ms() < until) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static int status_live(admin_t *a, double interval_s)
{
    char *last = NULL; /* the last view that rendered, kept on screen while the API fails */
    int first = 1;
    while (!sl_stop_requested()) {
        json_t *status = NULL;
        char err[4096] = "";
        char footer[4352], clock[32];
        int failed = api_call(a, "GET", "/v1/status", NULL, &status, err, sizeof err);
        if (sl_stop_requested()) {
            json_decref(status);
            break;
        }
        if (failed && first) {
            fprintf(stderr, "sluice: %s\n", err);
            return 1;
        }
        if (first)
            fputs("\033[?25l\033[2J", stdout); /* hide the cursor, clear the screen */
        first = 0;
        fmt_clock(sl_now_ms(), clock, sizeof clock);
        if (failed) {
            snprintf(footer, sizeof footer, "%s: update failed: %s; retrying", clock, err);
        } else {
            char *text = NULL;
            size_t len = 0;
            FILE *mem = open_memstream(&text, &len);
            if (mem != NULL) {
                if (sl_cli_render_status(status, mem, answer_now_ms(status)) != 0)
                    fputs("the scheduler's answer is not a status object (try --json)\n", mem);
                fclose(mem);
                free(last);
                last = text;
            }
            snprintf(footer, sizeof footer, "%s every %gs, Ctrl-C quits", a->base_url, interval_s);
        }
        json_decref(status);
        draw(last != NULL ? last : "", footer);
        sleep_unless_stopped(interval_s);
    }
    if (!first) {
        fputs("\033[?25h\n", stdout); /* show the cursor again; the prompt on its own line */
        fflush(stdout);
    }
    free(last);
    return 0;
}

int sl_cli_status(const sl_config_t *cfg, int argc, char **argv)
{
    const char *prog = "sluice status";
    common_opts_t opts;
    int rc = parse_common(prog, argc, argv, &opts);
    int once = 0;
    double interval_s = 1.0;
    for (int i = 0; rc == 0 && !opts.help && i < opts.nrest; i++) {
        const char *arg = opts.rest[i];
        if (strcmp(arg, "--once") == 0) {
            once = 1;
        } else if (strcmp(arg, "--interval") == 0 && i + 1 < opts.nrest) {
            char *end = NULL;
            interval_s = strtod(opts.rest[++i], &end);
            if (*end != '\0' || !(interval_s >= 0.1 && interval_s <= 3600)) {
                fprintf(stderr, "%s: --interval takes seconds, 0.1 to 3600\n", prog);
                rc = 2;
            }
        } else {
            fprintf(stderr, "%s: unknown argument %s\n%s", prog, arg, status_usage);
            rc = 2;
        }
    }
    if (rc != 0 || opts.help) {
        if (opts.help && rc == 0)
            fputs(status_usage, stdout);
        free(opts.rest);
        return rc;
    }
    free(opts.rest);
    admin_t a;
    rc = admin_open(cfg, prog, &opts, &a);
    if (rc != 0)
        return rc;
    if (!once && !a.json && isatty(STDOUT_FILENO)) {
        rc = status_live(&a, interval_s);
    } else {
        json_t *status = NULL;
        rc = call_or_report(&a, "GET", "/v1/status", NULL, &status);
        if (rc == 0 && a.json)
            rc = print_json(status);
        else if (rc == 0 && sl_cli_render_status(status, stdout, answer_now_ms(status)) != 0)
            rc = unexpected(prog);
        json_decref(status);
    }
    admin_close(&a);
    return rc;
}

/* ---- sluice pause / resume -------------------------------------------------------------- */

static const char pause_usage[] =
    "usage: sluice pause tenant NAME | key ID     [--json] [--admin URL] [--admin-key-file F]\n"
    "       sluice resume tenant NAME | key ID\n"
    "\n"
    "Pauses a tenant or an API key from the next scheduling round on: its queued jobs are held\n"
    "(they keep their place and still expire), calls in flight finish, new jobs are rejected\n"
    "(tenant_paused, key_paused; retryable). Resume puts the held jobs back in line.\n" COMMON_HELP;

int sl_cli_pause(const sl_config_t *cfg, int resume, int argc, char **argv)
{
    const char *prog = resume ? "sluice resume" : "sluice pause";
    common_opts_t opts;
    int rc = parse_common(prog, argc, argv, &opts);
    if (rc == 0 && opts.help) {
        fputs(pause_usage, stdout);
        free(opts.rest);
        return 0;
    }
    int is_key = opts.nrest == 2 && strcmp(opts.rest[0], "key") == 0;
    int is_tenant = opts.nrest == 2 && strcmp(opts.rest[0], "tenant") == 0;
    if (rc == 0 && ((!is_key && !is_tenant) || opts.rest[1][0] == '\0' || opts.rest[1][0] == '-')) {
        fprintf(stderr, "%s: name a tenant or a key\n%s", prog, pause_usage);
        rc = 2;
    }
    char *name = rc == 0 ? sl_cli_url_escape(opts.rest[1]) : NULL;
    free(opts.rest);
    if (rc != 0)
        return rc;
    if (name == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    admin_t a;
    rc = admin_open(cfg, prog, &opts, &a);
    if (rc != 0) {
        free(name);
        return rc;
    }
    char path[1024];
    snprintf(path, sizeof path, "/v1/%s/%s/%s", is_key ? "keys" : "tenants", name,
             resume ? "resume" : "pause");
    json_t *answer = NULL;
    rc = call_or_report(&a, "POST", path, NULL, &answer);
    if (rc == 0 && a.json)
        rc = print_json(answer);
    else if (rc == 0 && sl_cli_render_pause(answer, stdout) != 0)
        rc = unexpected(prog);
    json_decref(answer);
    free(name);
    admin_close(&a);
    return rc;
}

/* ---- sluice quota ----------------------------------------------------------------------- */

static const char quota_usage[] =
    "usage: sluice quota get [BUCKET_ID | --tenant NAME | --prefix P]\n"
    "       sluice quota set BUCKET_ID LIMIT|default\n"
    "       sluice quota set --tenant NAME [weight=N] [guarantee=F] [daily_requests=N]\n"
    "                                      [daily_tokens=N]\n"
    "\n"
    "get prints buckets: one by id (e.g. deployment:sim-a:tpm), a tenant's (with its weight and\n"
    "guarantee), those whose id starts with P, or all. Columns: the limit per period, the\n"
    "ledger's level/capacity, how much is used, when it is full again or its window restarts,\n"
    "and whether a run-time override is in force.\n"
    "set changes a bucket's limit (per its period) or a tenant's settings at run time; they are\n"
    "stored by the scheduler and win over the config until set back to `default`.\n" COMMON_HELP;

/* Every bucket whose id starts with prefix (NULL = all), page after page. Returns 0 with a new
 * {"buckets": [...], "total": N, "next_offset": null} in *out (caller decrefs), else 1. */
static int list_buckets(admin_t *a, const char *prefix, json_t **out)
{
    *out = NULL;
    char *esc = prefix != NULL ? sl_cli_url_escape(prefix) : NULL;
    json_t *all = json_array();
    int rc = (all == NULL || (prefix != NULL && esc == NULL)) ? 1 : 0;
    int64_t offset = 0, total = 0;
    while (rc == 0) {
        char path[2048];
        snprintf(path, sizeof path, "/v1/buckets?offset=%lld%s%s", (long long)offset,
                 esc != NULL ? "&prefix=" : "", esc != NULL ? esc : "");
        json_t *page = NULL;
        rc = call_or_report(a, "GET", path, NULL, &page);
        if (rc != 0)
            break;
        json_t *buckets = json_object_get(page, "buckets");
        json_t *next = json_object_get(page, "next_offset");
        total = get_i64(page, "total", total);
        if (!json_is_array(buckets)) {
            rc = unexpected(a->prog);
        } else {
            json_array_extend(all, buckets);
            if (!json_is_integer(next)) {
                json_decref(page);
                break; /* null: the last page */
            }
            /* A next_offset that does not move on would page forever. */
            if (json_integer_value(next) <= offset) {
                fprintf(stderr, "%s: the scheduler's next_offset does not advance\n", a->prog);
                rc = 1;
            }
            offset = json_integer_value(next);
        }
        json_decref(page);
    }
    free(esc);
    if (rc == 0) {
        *out =
            json_pack("{s:o, s:I, s:n}", "buckets", all, "total", (json_int_t)total, "next_offset");
        if (*out != NULL)
            return 0;
        rc = 1;
    } else {
        json_decref(all);
    }
    return rc;
}

static int quota_get(admin_t *a, const char *bucket_id, const char *tenant, const char *prefix)
{
    json_t *answer = NULL;
    int rc;
    if (bucket_id != NULL || tenant != NULL) {
        char *esc = sl_cli_url_escape(bucket_id != NULL ? bucket_id : tenant);
        if (esc == NULL)
            return 1;
        char path[2048];
        snprintf(path, sizeof path, "/v1/%s/%s", bucket_id != NULL ? "buckets" : "tenants", esc);
        free(esc);
        rc = call_or_report(a, "GET", path, NULL, &answer);
    } else {
        rc = list_buckets(a, prefix, &answer);
    }
    if (rc != 0)
        return rc;
    if (a->json) {
        rc = print_json(answer);
    } else {
        int64_t now_ms = sl_now_ms();
        int bad;
        if (tenant != NULL) {
            bad = sl_cli_render_tenant(answer, stdout, now_ms);
        } else if (bucket_id != NULL) {
            json_t *one = json_is_object(answer) ? json_pack("[O]", answer) : NULL;
            bad = sl_cli_render_buckets(one, stdout, now_ms);
            json_decref(one);
        } else {
            bad = sl_cli_render_buckets(json_object_get(answer, "buckets"), stdout, now_ms);
        }
        if (bad != 0)
            rc = unexpected(a->prog);
    }
    json_decref(answer);
    return rc;
}

static int quota_set(admin_t *a, const char *bucket_id, const char *tenant, json_t *body)
{
    char *esc = sl_cli_url_escape(bucket_id != NULL ? bucket_id : tenant);
    if (esc == NULL)
        return 1;
    char path[2048];
    snprintf(path, sizeof path, "/v1/%s/%s", bucket_id != NULL ? "buckets" : "tenants", esc);
    free(esc);
    json_t *answer = NULL;
    int rc = call_or_report(a, "PUT", path, body, &answer);
    if (rc == 0 && a->json) {
        rc = print_json(answer);
    } else if (rc == 0) {
        int bad;
        if (tenant != NULL) {
            bad = sl_cli_render_tenant(answer, stdout, sl_now_ms());
        } else {
            json_t *one = json_is_object(answer) ? json_pack("[O]", answer) : NULL;
            bad = sl_cli_render_buckets(one, stdout, sl_now_ms());
            json_decref(one);
        }
        if (bad != 0)
            rc = unexpected(a->prog);
    }
    json_decref(answer);
    return rc;
}

int sl_cli_quota(const sl_config_t *cfg, int argc, char **argv)
{
    const char *prog = "sluice quota";
    common_opts_t opts;
    int rc = parse_common(prog, argc, argv, &opts);
    if (rc == 0 && opts.help) {
        fputs(quota_usage, stdout);
        free(opts.rest);
        return 0;
    }
    const char *verb = opts.nrest > 0 ? opts.rest[0] : "";
    int set = strcmp(verb, "set") == 0;
    if (rc == 0 && !set && strcmp(verb, "get") != 0) {
        fprintf(stderr, "%s: say get or set\n%s", prog, quota_usage);
        rc = 2;
    }
    /* Split the verb's arguments into --tenant/--prefix and the positional ones. */
    const char *tenant = NULL, *prefix = NULL;
    char **pos = calloc((size_t)opts.nrest + 1, sizeof *pos);
    int npos = 0;
    if (rc == 0 && pos == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        rc = 1;
    }
    for (int i = 1; rc == 0 && i < opts.nrest; i++) {
        const char *arg = opts.rest[i];
        if (strcmp(arg, "--tenant") == 0 && i + 1 < opts.nrest) {
            tenant = opts.rest[++i];
        } else if (!set && strcmp(arg, "--prefix") == 0 && i + 1 < opts.nrest) {
            prefix = opts.rest[++i];
        } else if (arg[0] == '-' && arg[1] == '-') {
            fprintf(stderr, "%s: unknown argument %s\n%s", prog, arg, quota_usage);
            rc = 2;
        } else {
            pos[npos++] = opts.rest[i];
        }
    }
    const char *bucket_id = NULL;
    json_t *body = NULL;
    if (rc == 0 && !set) {
        if ((tenant != NULL) + (prefix != NULL) + (npos > 0) > 1 || npos > 1) {
            fprintf(stderr, "%s: give one of BUCKET_ID, --tenant or --prefix\n", prog);
            rc = 2;
        } else if (npos == 1) {
            bucket_id = pos[0];
        }
    } else if (rc == 0) {
        char err[256] = "";
        if (tenant == NULL && npos >= 1)
            bucket_id = pos[0];
        if (tenant == NULL && npos != 2) {
            fprintf(stderr, "%s: set takes BUCKET_ID LIMIT, or --tenant NAME KEY=VALUE...\n", prog);
            rc = 2;
        } else {
            body = tenant != NULL ? sl_cli_quota_body(1, npos, pos, err, sizeof err)
                                  : sl_cli_quota_body(0, 1, pos + 1, err, sizeof err);
            if (body == NULL) {
                fprintf(stderr, "%s: %s\n", prog, err);
                rc = 2;
            }
        }
    }
    free(opts.rest);
    free(pos);
    admin_t a;
    if (rc == 0)
        rc = admin_open(cfg, prog, &opts, &a);
    if (rc != 0) {
        json_decref(body);
        return rc;
    }
    rc = set ? quota_set(&a, bucket_id, tenant, body) : quota_get(&a, bucket_id, tenant, prefix);
    json_decref(body);
    admin_close(&a);
    return rc;
}

/* ---- sluice jobs ------------------------------------------------------------------------ */

static const char jobs_usage[] =
    "usage: sluice jobs JOB_ID [--json] [--admin URL] [--admin-key-file FILE]\n"
    "\n"
    "Describes a job: its state, tenant, route and class, attempts, when it was submitted and\n"
    "its deadline, and why it is where it is: the limit it waits for, the deployment it is\n"
    "leased to, or its result.\n" COMMON_HELP;

int sl_cli_jobs(const sl_config_t *cfg, int argc, char **argv)
{
    const char *prog = "sluice jobs";
    common_opts_t opts;
    int rc = parse_common(prog, argc, argv, &opts);
    if (rc == 0 && opts.help) {
        fputs(jobs_usage, stdout);
        free(opts.rest);
        return 0;
    }
    if (rc == 0 && (opts.nrest != 1 || opts.rest[0][0] == '-')) {
        fprintf(stderr, "%s: name one job id\n%s", prog, jobs_usage);
        rc = 2;
    }
    char *esc = rc == 0 ? sl_cli_url_escape(opts.rest[0]) : NULL;
    free(opts.rest);
    if (rc != 0)
        return rc;
    if (esc == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    admin_t a;
    rc = admin_open(cfg, prog, &opts, &a);
    if (rc != 0) {
        free(esc);
        return rc;
    }
    char path[2048];
    snprintf(path, sizeof path, "/v1/jobs/%s", esc);
    free(esc);
    json_t *job = NULL;
    rc = call_or_report(&a, "GET", path, NULL, &job);
    if (rc == 0 && a.json)
        rc = print_json(job);
    else if (rc == 0 && sl_cli_render_job(job, stdout, sl_now_ms()) != 0)
        rc = unexpected(prog);
    json_decref(job);
    admin_close(&a);
    return rc;
}
