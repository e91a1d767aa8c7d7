/* bench/scenarios - fair shares and workload contracts, measured on the real processes against
 * sluice-sim with shortened minutes. Each named scenario runs on a fresh stack (its own configs,
 * database and broker in a temporary directory), prints its figures against the targets of the
 * issue "Fair shares and workload contracts", and the whole run is written to
 * bench/results/scenarios-<unix time>.json.
 *
 * The idea to hold first: the runner measures, it does not gate. A missed target is a FAIL in
 * the table and exit status 0; only a run that could not measure (a stack that does not start,
 * results that never come) exits 1.
 *
 * One simulated deployment whose tokens per minute (TPM, counting prompt + max_tokens) is the
 * binding limit; every tenant uses its one route. Scenarios:
 *   equal      4 tenants of equal weight, all backlogged: tokens served, Jain's index;
 *   weights    2 tenants weighted 3:1, both backlogged: token shares;
 *   noisy      a batch tenant with 100x the volume of 3 tenants sending interactive jobs at a
 *              few per second: interactive queue wait, expiries, pool utilisation;
 *   guarantee  a tenant with a 50 % guarantee arriving into a pool saturated by borrowers
 *              (skipped when the config does not know "guarantee").
 *
 * Each scenario runs in a child process (its own process group): the harness keeps one
 * temporary directory per process and exits the process when a stack does not start, and the
 * parent can then stop whatever that stack left running.
 *
 * Usage: bench/scenarios --help. --check makes a missed target an exit status of 1 (for a
 * gate). */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "group.h"
#include "harness.h"
#include "opts.h"
#include "pool.h"
#include "request.h"
#include "result.h"
#include "sign.h"
#include "stats.h"
#include "util.h"
#include "warmup.h"

enum {
    MINUTE_MS = 3000,
    TPM = 300000, /* the binding limit: 100,000 tokens a second */
    RPM = 600000, /* far from binding */
    SLICES_PER_MINUTE = 10,
    PROMPT_CHARS_MIN = 2800, /* 700 - 900 prompt tokens at the simulator's 4 characters each */
    PROMPT_CHARS_SPAN = 800,
    MAX_TOKENS_MIN = 100, /* max_tokens 100 - 160 */
    MAX_TOKENS_SPAN = 60,
    INTERACTIVE_DEADLINE_MS = 5000,
    MAX_TENANTS = 8,
    GRACE_MS = 600,      /* after the measurement, for results of jobs still in flight */
    RESULT_CAP = 1 << 20 /* the most a child may report, in bytes */
};

/* What sluice plans to use of the limit (the deployment's default headroom), and the average
 * job's cost in TPM (prompt + max_tokens), to size backlogs. */
#define HEADROOM 0.97
#define AVG_JOB_TOKENS 930.0
#define JOBS_PER_S ((double)TPM / MINUTE_MS * 1000.0 * HEADROOM / AVG_JOB_TOKENS)
#define DRR_QUANTUM_TOKENS 4096 /* the scheduler's default, left as it is */

typedef struct {
    const char *name;
    int64_t weight;
    double guarantee;  /* share of the pool guaranteed; 0 = none (the key is not written) */
    const char *cls;   /* class of its jobs */
    double backlog;    /* jobs submitted at once on arrival, in fair shares of the measurement
                        * (1 = what its share of the pool serves in the whole measurement) */
    int backlog_jobs;  /* or a fixed count (used when > 0), or when < 0 that many times the
                        * expected volume of the scenario's busiest trickle tenant */
    double rate_per_s; /* then jobs at this Poisson rate until the end; 0 = none */
    double arrive;     /* arrival, as a fraction of the measurement time */
} tenant_spec_t;

typedef struct {
    const char *name;
    const char *what;
    double measure_s, quick_measure_s;
    int ntenants;
    tenant_spec_t tenants[MAX_TENANTS];
} scenario_t;

/* A backlogged tenant. */
#define BACKLOGGED(n, w, c, b)                                                                     \
    {                                                                                              \
        .name = n, .weight = w, .cls = c, .backlog = b                                             \
    }

static const scenario_t scenarios[] = {
    {.name = "equal",
     .what = "4 tenants, equal weights, all backlogged",
     .measure_s = 30,
     .quick_measure_s = 6,
     .ntenants = 4,
     .tenants = {BACKLOGGED("a", 1, "standard", 2.5), BACKLOGGED("b", 1, "standard", 2.5),
                 BACKLOGGED("c", 1, "standard", 2.5), BACKLOGGED("d", 1, "standard", 2.5)}},
    {.name = "weights",
     .what = "2 tenants weighted 3:1, both backlogged",
     .measure_s = 30,
     .quick_measure_s = 6,
     .ntenants = 2,
     .tenants = {BACKLOGGED("heavy", 3, "standard", 2.5), BACKLOGGED("light", 1, "standard", 2.5)}},
    {.name = "noisy",
     .what = "a batch tenant with 100x the volume of 3 interactive tenants",
     .measure_s = 30,
     .quick_measure_s = 6,
     .ntenants = 4,
     /* backlog_jobs -100: 100x the volume of one interactive tenant, at once. */
     .tenants = {{.name = "bulk", .weight = 1, .cls = "batch", .backlog_jobs = -100},
                 {.name = "i1", .weight = 1, .cls = "interactive", .rate_per_s = 3},
                 {.name = "i2", .weight = 1, .cls = "interactive", .rate_per_s = 3},
                 {.name = "i3", .weight = 1, .cls = "interactive", .rate_per_s = 3}}},
    {.name = "guarantee",
     .what = "a tenant with a 50 % guarantee arrives into a pool saturated by borrowers",
     .measure_s = 30,
     .quick_measure_s = 6,
     .ntenants = 4,
     .tenants = {BACKLOGGED("b1", 1, "standard", 3),
                 BACKLOGGED("b2", 1, "standard", 3),
                 BACKLOGGED("b3", 1, "standard", 3),
                 {.name = "late",
                  .weight = 1,
                  .guarantee = 0.5,
                  .cls = "standard",
                  .backlog = 4,
                  .arrive = 0.25}}},
};
enum { NSCENARIOS = sizeof scenarios / sizeof scenarios[0] };

/* One job of the run: what was sent, and what its result said. */
typedef struct {
    int tenant;
    int prompt_chars, max_tokens;
    int trickle;            /* produced at its own time (must get a result) */
    double due_ms;          /* when to produce it, from the start of the measurement */
    double sent_ms;         /* wall clock when produced */
    b_status_t status;      /* B_NONE until its result arrived */
    double dispatch_ms;     /* wall clock of its (last) dispatch; 0 = never dispatched */
    double queued_ms;       /* the result's timings.queued_ms */
    int64_t usage_tokens;   /* usage input + output */
    int64_t charged_tokens; /* usage input + max_tokens: what TPM counts, and DRR's cost */
} job_t;

typedef struct {
    const scenario_t *sc;
    int quick;
    double measure_ms;
    job_t *jobs;
    int njobs;
    int results, duplicates;
    char fail_kind[8][64]; /* "<status> <reason>" of jobs that did not succeed, and counts */
    int fail_count[8];
    int nfail_kinds, failed_total;
} run_t;

/* ---- small helpers ---- */

static double stat_num(json_t *stats, const char *field)
{
    return (double)json_integer_value(json_object_get(stats, field));
}

/* Tokens the simulator charged per minute between two /stats snapshots, over the limit. */
static double utilisation(json_t *s1, json_t *s2)
{
    if (s1 == NULL || s2 == NULL)
        return NAN;
    double dt_ms = stat_num(s2, "now_ms") - stat_num(s1, "now_ms");
    double tokens = (double)(h_sim_total(s2, "tokens_charged") - h_sim_total(s1, "tokens_charged"));
    return dt_ms > 0 ? tokens / ((double)TPM * dt_ms / MINUTE_MS) : NAN;
}

/* ---- configs ---- */

/* Writes the simulator's and sluice's configs into the temporary directory; returns the path
 * of sluice's (caller frees) and sets *sim_cfg (caller frees). */
static char *write_configs(const scenario_t *sc, int sim_port, char **sim_cfg)
{
    b_pool_t pool = {.bench = "scenario",
                     .minute_ms = MINUTE_MS,
                     .rpm = RPM,
                     .tpm = TPM,
                     .slices_per_minute = SLICES_PER_MINUTE,
                     .ms_per_token = 0.2,
                     .output_min = 20,
                     .output_max = 200,
                     .sim_port = sim_port,
                     .interactive_deadline_ms = INTERACTIVE_DEADLINE_MS,
                     .ntenants = sc->ntenants};
    for (int i = 0; i < sc->ntenants; i++) {
        const tenant_spec_t *t = &sc->tenants[i];
        pool.tenants[i] =
            (b_pool_tenant_t){.name = t->name, .weight = t->weight, .guarantee = t->guarantee};
    }
    *sim_cfg = b_pool_sim_config(&pool);
    return b_pool_sluice_config(&pool);
}

/* ---- the jobs ---- */

static int cmp_due(const void *a, const void *b)
{
    const job_t *x = a, *y = b;
    if (x->due_ms != y->due_ms)
        return x->due_ms < y->due_ms ? -1 : 1;
    /* Same time (a backlog): keep the round-robin order they were made in. */
    return x->sent_ms < y->sent_ms ? -1 : x->sent_ms > y->sent_ms;
}

/* Jobs per tenant when it arrives (its backlog). */
static int backlog_of(const scenario_t *sc, const tenant_spec_t *t, double measure_ms)
{
    if (t->backlog_jobs > 0)
        return t->backlog_jobs;
    if (t->backlog_jobs < 0) {
        /* A multiple of the expected volume of the scenario's busiest trickle tenant. */
        double rate = 0;
        for (int i = 0; i < sc->ntenants; i++)
            rate = sc->tenants[i].rate_per_s > rate ? sc->tenants[i].rate_per_s : rate;
        return (int)(-t->backlog_jobs * rate * measure_ms / 1000.0);
    }
    int64_t wsum = 0;
    for (int i = 0; i < sc->ntenants; i++)
        wsum += sc->tenants[i].weight;
    double share = (double)t->weight / (double)wsum;
    return (int)ceil(t->backlog * share * JOBS_PER_S * measure_ms / 1000.0 * (1.0 - t->arrive));
}

/* Makes every job of the run, sorted by the time it is due. */
static int make_jobs(run_t *run)
{
    const scenario_t *sc = run->sc;
    int cap = 0, backlog[MAX_TENANTS];
    for (int i = 0; i < sc->ntenants; i++) {
        backlog[i] = backlog_of(sc, &sc->tenants[i], run->measure_ms);
        /* Poisson arrivals: the mean plus a wide margin. */
        cap += backlog[i] + (int)(sc->tenants[i].rate_per_s * run->measure_ms / 1000.0 * 2) + 16;
    }
    run->jobs = calloc((size_t)cap, sizeof *run->jobs);
    if (run->jobs == NULL)
        return -1;
    int n = 0;
    /* Backlogs round-robin over the tenants, so no tenant's jobs all reach the scheduler
     * first. sent_ms holds the making order until the sort. */
    for (int k = 0;; k++) {
        int any = 0;
        for (int i = 0; i < sc->ntenants; i++) {
            if (k >= backlog[i])
                continue;
            any = 1;
            run->jobs[n] = (job_t){
                .tenant = i, .due_ms = sc->tenants[i].arrive * run->measure_ms, .sent_ms = n};
            n++;
        }
        if (!any)
            break;
    }
    for (int i = 0; i < sc->ntenants; i++) {
        const tenant_spec_t *t = &sc->tenants[i];
        if (t->rate_per_s <= 0)
            continue;
        double at_ms = t->arrive * run->measure_ms;
        for (;;) {
            at_ms += -log(1.0 - b_rng_uniform()) * 1000.0 / t->rate_per_s;
            if (at_ms >= run->measure_ms || n >= cap)
                break;
            run->jobs[n] = (job_t){.tenant = i, .due_ms = at_ms, .sent_ms = n, .trickle = 1};
            n++;
        }
    }
    for (int i = 0; i < n; i++) {
        run->jobs[i].prompt_chars = PROMPT_CHARS_MIN + (int)(b_rng_uniform() * PROMPT_CHARS_SPAN);
        run->jobs[i].max_tokens = MAX_TOKENS_MIN + (int)(b_rng_uniform() * MAX_TOKENS_SPAN);
    }
    qsort(run->jobs, (size_t)n, sizeof *run->jobs, cmp_due);
    for (int i = 0; i < n; i++)
        run->jobs[i].sent_ms = 0;
    run->njobs = n;
    return 0;
}

static void produce_job(rd_kafka_t *prod, run_t *run, int i)
{
    job_t *job = &run->jobs[i];
    const tenant_spec_t *t = &run->sc->tenants[job->tenant];
    char idem[32];
    b_job_key(i, idem, sizeof idem);
    job->sent_ms = h_wall_ms();
    b_request_produce(prod, "scenario", t->name, idem, t->cls, job->prompt_chars, job->max_tokens,
                      0);
}

/* ---- results ---- */

static void note_failure(run_t *run, const char *status, const char *reason)
{
    char kind[64];
    snprintf(kind, sizeof kind, "%s %s", status, reason != NULL ? reason : "-");
    run->failed_total++;
    for (int i = 0; i < run->nfail_kinds; i++) {
        if (strcmp(run->fail_kind[i], kind) == 0) {
            run->fail_count[i]++;
            return;
        }
    }
    if (run->nfail_kinds < 8) {
        snprintf(run->fail_kind[run->nfail_kinds], sizeof run->fail_kind[0], "%s", kind);
        run->fail_count[run->nfail_kinds++] = 1;
    }
}

static void on_result(void *arg, const b_result_t *r)
{
    run_t *run = arg;
    int i = b_job_index(r->idem, run->njobs);
    if (i < 0)
        return; /* not a job of the workload: a warm-up job's, delivered again */
    job_t *job = &run->jobs[i];
    if (job->status != B_NONE) {
        run->duplicates++; /* delivery is at least once */
        return;
    }
    run->results++;
    job->status = b_status_parse(r->status);
    job->usage_tokens = r->input + r->output;
    job->charged_tokens = r->input + job->max_tokens;
    job->queued_ms = r->queued_ms;
    if (r->dispatch_ms >= 0)
        job->dispatch_ms = r->dispatch_ms;
    if (job->status != B_SUCCEEDED)
        note_failure(run, r->status, r->reason);
}

/* Tokens of tenant's succeeded jobs dispatched in [from_ms, to_ms) (wall clock). */
static double tokens_in(const run_t *run, int tenant, double from_ms, double to_ms, int charged)
{
    double sum = 0;
    for (int i = 0; i < run->njobs; i++) {
        const job_t *job = &run->jobs[i];
        if (job->tenant == tenant && job->status == B_SUCCEEDED && job->dispatch_ms >= from_ms &&
            job->dispatch_ms < to_ms)
            sum += (double)(charged ? job->charged_tokens : job->usage_tokens);
    }
    return sum;
}

/* ---- the report of one scenario ---- */

/* Adds a row to the scenario's table: a figure, its value as printed, and when there is a
 * target, the target as printed and whether it was met. */
static void row(json_t *rows, const char *figure, const char *target, int pass, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));
static void row(json_t *rows, const char *figure, const char *target, int pass, const char *fmt,
                ...)
{
    char value[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    json_t *r = json_pack("{s:s, s:s}", "figure", figure, "value", value);
    if (target != NULL) {
        json_object_set_new(r, "target", json_string(target));
        json_object_set_new(r, "result", json_string(pass ? "PASS" : "FAIL"));
    }
    json_array_append_new(rows, r);
}

static void fmt_tokens(char *out, size_t cap, double tokens)
{
    if (tokens >= 1e6)
        snprintf(out, cap, "%.2fM", tokens / 1e6);
    else
        snprintf(out, cap, "%.0fk", tokens / 1e3);
}

/* Per-tenant figures common to every scenario, and the figures of each scenario. */
static void report(const run_t *run, double t0_ms, json_t *s_lo, json_t *s_hi, json_t *s_end,
                   json_t *out)
{
    const scenario_t *sc = run->sc;
    double m = run->measure_ms;
    double w0 = t0_ms + 0.2 * m, w1 = t0_ms + 0.8 * m;
    json_t *rows = json_array(), *metrics = json_object(), *tenants = json_array();
    double usage[MAX_TENANTS], charged[MAX_TENANTS], usum = 0, csum = 0;
    for (int t = 0; t < sc->ntenants; t++) {
        usage[t] = tokens_in(run, t, w0, w1, 0);
        charged[t] = tokens_in(run, t, w0, w1, 1);
        usum += usage[t];
        csum += charged[t];
    }
    for (int t = 0; t < sc->ntenants; t++) {
        int submitted = 0, results = 0, ok = 0, expired = 0;
        for (int i = 0; i < run->njobs; i++) {
            const job_t *job = &run->jobs[i];
            if (job->tenant != t)
                continue;
            submitted += job->sent_ms > 0;
            results += job->status != B_NONE;
            ok += job->status == B_SUCCEEDED;
            expired += job->status == B_EXPIRED;
        }
        const tenant_spec_t *ts = &sc->tenants[t];
        json_t *tj = json_pack(
            "{s:s, s:I, s:s, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f}", "name", ts->name, "weight",
            (json_int_t)ts->weight, "class", ts->cls, "submitted", submitted, "results", results,
            "succeeded", ok, "expired", expired, "usage_tokens_window", usage[t],
            "charged_tokens_window", charged[t], "share_usage", usum > 0 ? usage[t] / usum : 0,
            "share_charged", csum > 0 ? charged[t] / csum : 0);
        if (ts->guarantee > 0)
            json_object_set_new(tj, "guarantee", json_real(ts->guarantee));
        json_array_append_new(tenants, tj);
    }

    char buf[256];
    size_t bl = 0;
    buf[0] = '\0';
    for (int t = 0; t < sc->ntenants; t++) {
        char tok[32];
        fmt_tokens(tok, sizeof tok, usage[t]);
        bl += (size_t)snprintf(buf + bl, sizeof buf - bl, "%s%s %s", t ? ", " : "",
                               sc->tenants[t].name, tok);
    }
    row(rows, "tokens served, 20-80 % window", NULL, 0, "%s", buf);

    if (strcmp(sc->name, "equal") == 0) {
        double j_usage = b_jain(usage, sc->ntenants), j_charged = b_jain(charged, sc->ntenants);
        json_object_set_new(metrics, "jain_usage", json_real(j_usage));
        json_object_set_new(metrics, "jain_charged", json_real(j_charged));
        row(rows, "Jain's index, usage tokens", ">= 0.99", j_usage >= 0.99, "%.4f", j_usage);
        row(rows, "Jain's index, prompt + max_tokens", NULL, 0, "%.4f", j_charged);
    } else if (strcmp(sc->name, "weights") == 0) {
        double share = usum > 0 ? usage[0] / usum : NAN;
        double share_c = csum > 0 ? charged[0] / csum : NAN;
        json_object_set_new(metrics, "share_heavy_usage", json_real(share));
        json_object_set_new(metrics, "share_heavy_charged", json_real(share_c));
        row(rows, "share heavy/light, usage tokens", "75/25 +- 3", fabs(share - 0.75) <= 0.03,
            "%.1f/%.1f", 100 * share, 100 * (1 - share));
        row(rows, "share heavy/light, prompt + max_tokens", NULL, 0, "%.1f/%.1f", 100 * share_c,
            100 * (1 - share_c));
    } else if (strcmp(sc->name, "noisy") == 0) {
        /* All interactive jobs, and those sent in the steady window: the batch tenant's
         * backlog arrives at once at the start, and the scheduler stores it meanwhile. */
        double *waits = calloc(2 * ((size_t)run->njobs + 1), sizeof *waits);
        double *steady = waits != NULL ? waits + run->njobs + 1 : NULL;
        int nw = 0, ns = 0, n_int = 0, expired = 0, missing = 0;
        for (int i = 0; i < run->njobs && waits != NULL; i++) {
            const job_t *job = &run->jobs[i];
            if (strcmp(sc->tenants[job->tenant].cls, "interactive") != 0 || job->sent_ms == 0)
                continue;
            n_int++;
            expired += job->status == B_EXPIRED;
            missing += job->status == B_NONE;
            if (job->status != B_SUCCEEDED)
                continue;
            waits[nw++] = job->queued_ms;
            if (job->sent_ms >= w0 && job->sent_ms < w1)
                steady[ns++] = job->queued_ms;
        }
        qsort(waits, (size_t)nw, sizeof *waits, b_cmp_double);
        qsort(steady, (size_t)ns, sizeof *steady, b_cmp_double);
        double p50 = b_pct(waits, nw, 0.5), p99 = b_pct(waits, nw, 0.99), max = b_pct(waits, nw, 1);
        double s50 = b_pct(steady, ns, 0.5), s99 = b_pct(steady, ns, 0.99);
        double util = utilisation(s_lo, s_hi);
        json_object_set_new(metrics, "interactive_jobs", json_integer(n_int));
        json_object_set_new(
            metrics, "interactive_queue_wait_ms",
            json_pack("{s:f, s:f, s:f, s:i}", "p50", p50, "p99", p99, "max", max, "n", nw));
        json_object_set_new(metrics, "interactive_queue_wait_ms_steady_window",
                            json_pack("{s:f, s:f, s:f, s:i}", "p50", s50, "p99", s99, "max",
                                      b_pct(steady, ns, 1), "n", ns));
        json_object_set_new(metrics, "interactive_expired", json_integer(expired));
        json_object_set_new(metrics, "interactive_missing", json_integer(missing));
        json_object_set_new(metrics, "utilisation", json_real(util));
        row(rows, "interactive queue wait p50", NULL, 0, "%.1f ms (n=%d)", p50, nw);
        row(rows, "interactive queue wait p99", "<= 250 ms", p99 <= 250, "%.1f ms (max %.1f)", p99,
            max);
        row(rows, "  sent in the 20-80 % window, p50 / p99", NULL, 0, "%.1f / %.1f ms (n=%d)", s50,
            s99, ns);
        row(rows, "interactive jobs expired", "0", expired == 0, "%d of %d", expired, n_int);
        row(rows, "pool utilisation (TPM), 20-80 %", ">= 90 %", util >= 0.90, "%.1f %%",
            100 * util);
        free(waits);
    } else if (strcmp(sc->name, "guarantee") == 0) {
        int late = sc->ntenants - 1;
        double arrive = INFINITY;
        for (int i = 0; i < run->njobs; i++) {
            if (run->jobs[i].tenant == late && run->jobs[i].sent_ms > 0 &&
                run->jobs[i].sent_ms < arrive)
                arrive = run->jobs[i].sent_ms;
        }
        double first[2] = {0, 0}, steady[2] = {0, 0};
        for (int t = 0; t < sc->ntenants; t++) {
            double f = tokens_in(run, t, arrive, arrive + MINUTE_MS, 0);
            double s = tokens_in(run, t, arrive + MINUTE_MS, t0_ms + m, 0);
            first[t == late] += f;
            steady[t == late] += s;
        }
        double g = sc->tenants[late].guarantee;
        double share1 = first[1] / (first[0] + first[1]);
        double share2 = steady[1] / (steady[0] + steady[1]);
        json_object_set_new(metrics, "late_share_first_minute", json_real(share1));
        json_object_set_new(metrics, "late_share_steady", json_real(share2));
        char target[32];
        snprintf(target, sizeof target, ">= %.0f - 3", 100 * g);
        row(rows, "late tenant's share, first minute", target, share1 >= g - 0.03, "%.1f %%",
            100 * share1);
        row(rows, "late tenant's share, after it", target, share2 >= g - 0.03, "%.1f %%",
            100 * share2);
    }
    if (strcmp(sc->name, "noisy") != 0) {
        double util = utilisation(s_lo, s_hi);
        json_object_set_new(metrics, "utilisation", json_real(util));
        row(rows, "pool utilisation (TPM), 20-80 %", NULL, 0, "%.1f %%", 100 * util);
    }
    int64_t refused = s_end != NULL ? h_sim_total(s_end, "refused") : -1;
    json_object_set_new(metrics, "sim_429s", json_integer(refused));
    row(rows, "simulator 429s", "0", refused == 0, "%lld", (long long)refused);
    bl = 0;
    buf[0] = '\0';
    for (int i = 0; i < run->nfail_kinds; i++)
        bl += (size_t)snprintf(buf + bl, sizeof buf - bl, "; %d %s", run->fail_count[i],
                               run->fail_kind[i]);
    int unfinished = 0;
    for (int i = 0; i < run->njobs; i++)
        unfinished += run->jobs[i].sent_ms > 0 && run->jobs[i].status == B_NONE;
    json_object_set_new(metrics, "not_succeeded", json_integer(run->failed_total));
    json_object_set_new(metrics, "still_queued_at_stop", json_integer(unfinished));
    json_object_set_new(metrics, "duplicate_results", json_integer(run->duplicates));
    row(rows, "jobs that did not succeed", "0", run->failed_total == 0, "%d%s", run->failed_total,
        buf);
    row(rows, "backlog still queued at the stop", NULL, 0, "%d of %d", unfinished, run->njobs);
    json_object_set_new(out, "tenants", tenants);
    json_object_set_new(out, "metrics", metrics);
    json_object_set_new(out, "rows", rows);
}

/* ---- one scenario, in the child ---- */

/* Whether the config accepts every key the scenario writes. Returns 1 when it does, 0 when it
 * refuses "guarantee" (the key is not there yet), -1 on any other error (message in err). */
static int config_accepts(const char *cfg_path, char *err, size_t errlen)
{
    sl_config_t *cfg = NULL;
    sl_err_t rc = sl_config_load(cfg_path, &cfg, err, errlen);
    if (rc == SL_OK) {
        sl_config_free(cfg);
        return 1;
    }
    return strstr(err, "\"guarantee\"") != NULL ? 0 : -1;
}

/* Runs one scenario on a fresh stack; fills out (status "ok", "skipped" or "broken"). */
static void run_scenario(const scenario_t *sc, int quick, json_t *out)
{
    run_t run = {.sc = sc, .quick = quick};
    run.measure_ms = 1000.0 * (quick ? sc->quick_measure_s : sc->measure_s);
    b_rng_seed(0x5eed0000u + (uint64_t)(sc - scenarios));
    json_object_set_new(out, "measure_s", json_real(run.measure_ms / 1000.0));
    int sim_port = h_free_port();
    char *sim_cfg = NULL;
    char *cfg = write_configs(sc, sim_port, &sim_cfg);
    int needs_guarantee = 0;
    for (int i = 0; i < sc->ntenants; i++)
        needs_guarantee |= sc->tenants[i].guarantee > 0;
    char err[512] = "";
    int accepts = config_accepts(cfg, err, sizeof err);
    if (accepts <= 0) {
        const char *status = accepts == 0 && needs_guarantee ? "skipped" : "broken";
        json_object_set_new(out, "status", json_string(status));
        json_object_set_new(out, "reason",
                            json_string(strcmp(status, "skipped") == 0
                                            ? "not supported by this build: the config does "
                                              "not accept \"guarantee\""
                                            : err));
        if (strcmp(status, "skipped") == 0)
            printf("%s: skipped (not supported by this build)\n", sc->name);
        else
            printf("%s: broken: the config does not load: %s\n", sc->name, err);
        free(sim_cfg);
        free(cfg);
        h_cleanup(accepts != 0);
        return;
    }
    if (make_jobs(&run) != 0) {
        json_object_set_new(out, "status", json_string("broken"));
        json_object_set_new(out, "reason", json_string("out of memory"));
        free(sim_cfg);
        free(cfg);
        h_cleanup(0);
        return;
    }
    double up0 = sl_mono_ms();
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    const char *broken = NULL;

    /* Warm-up: the measurement starts once every consumer group has settled. */
    if (b_warm_up(prod, cons, "scenario", 60000) != 0)
        broken = "the warm-up jobs got no results within 60 s";

    json_object_set_new(out, "startup_s", json_real((sl_mono_ms() - up0) / 1000.0));

    /* The measurement: produce each job when due, read results, and take the simulator's
     * /stats at 20 % and 80 % of the measurement time. */
    json_t *s_lo = NULL, *s_hi = NULL, *s_end = NULL;
    double t0_ms = h_wall_ms(), mono0 = sl_mono_ms();
    int next = 0;
    while (broken == NULL) {
        double elapsed = sl_mono_ms() - mono0;
        if (elapsed >= run.measure_ms + GRACE_MS)
            break;
        while (next < run.njobs && run.jobs[next].due_ms <= elapsed)
            produce_job(prod, &run, next++);
        rd_kafka_poll(prod, 0);
        if (s_lo == NULL && elapsed >= 0.2 * run.measure_ms)
            s_lo = h_http_json(st.stats_url);
        if (s_hi == NULL && elapsed >= 0.8 * run.measure_ms)
            s_hi = h_http_json(st.stats_url);
        double wait = next < run.njobs ? run.jobs[next].due_ms - (sl_mono_ms() - mono0) : 5;
        b_result_poll(cons, wait < 1 ? 0 : wait > 5 ? 5 : (int)wait, on_result, &run);
    }
    /* Jobs produced at their own time must all have a result (success or not). */
    double until = sl_mono_ms() + INTERACTIVE_DEADLINE_MS + 5000;
    for (;;) {
        int missing = 0;
        for (int i = 0; i < run.njobs; i++)
            missing +=
                run.jobs[i].trickle && run.jobs[i].sent_ms > 0 && run.jobs[i].status == B_NONE;
        if (missing == 0 || broken != NULL)
            break;
        if (sl_mono_ms() >= until) {
            broken = "jobs produced during the run got no result in time";
            break;
        }
        b_result_poll(cons, 100, on_result, &run);
    }
    s_end = h_http_json(st.stats_url);
    if (broken == NULL && (s_lo == NULL || s_hi == NULL || s_end == NULL))
        broken = "the simulator's /stats did not answer";
    if (broken == NULL && run.results == 0)
        broken = "no result arrived during the measurement";
    double down0 = sl_mono_ms();
    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    int unclean = h_stack_down(&st);
    json_object_set_new(out, "stop_s", json_real((sl_mono_ms() - down0) / 1000.0));

    json_object_set_new(out, "status", json_string(broken ? "broken" : "ok"));
    if (broken != NULL)
        json_object_set_new(out, "reason", json_string(broken));
    json_object_set_new(out, "processes_not_stopped_cleanly", json_integer(unclean));
    json_object_set_new(out, "jobs", json_integer(run.njobs));
    report(&run, t0_ms, s_lo, s_hi, s_end, out);
    json_decref(s_lo);
    json_decref(s_hi);
    json_decref(s_end);
    free(run.jobs);
    free(sim_cfg);
    free(cfg);
    h_cleanup(broken != NULL);
}

/* ---- the parent: one child per scenario ---- */

/* What the child of one scenario is given. */
typedef struct {
    const scenario_t *sc;
    int quick;
} child_arg_t;

static void child_run(void *arg, json_t *report)
{
    const child_arg_t *a = arg;
    sl_crypto_init();
    run_scenario(a->sc, a->quick, report);
}

/* Runs sc in a child process; returns its report (caller frees), status "broken" when the
 * child did not report. */
static json_t *run_child(const scenario_t *sc, int quick, int timeout_s)
{
    child_arg_t arg = {.sc = sc, .quick = quick};
    json_t *head = json_pack("{s:s, s:s}", "name", sc->name, "what", sc->what);
    json_t *res = b_run_in_child(child_run, &arg, head, NULL, sc->name, timeout_s, RESULT_CAP);
    json_decref(head);
    return res;
}

static void print_table(json_t *all)
{
    printf("\n%-10s %-40s %-44s %-12s %s\n", "scenario", "figure", "value", "target", "");
    size_t i;
    json_t *sc;
    json_array_foreach(all, i, sc)
    {
        const char *name = json_string_value(json_object_get(sc, "name"));
        const char *status = json_string_value(json_object_get(sc, "status"));
        double secs = json_number_value(json_object_get(sc, "duration_s"));
        if (strcmp(status, "ok") != 0) {
            printf("%-10s %s: %s\n", name, status,
                   json_string_value(json_object_get(sc, "reason")));
            if (strcmp(status, "broken") != 0)
                continue;
        }
        size_t k;
        json_t *r;
        json_array_foreach(json_object_get(sc, "rows"), k, r)
        {
            const char *target = json_string_value(json_object_get(r, "target"));
            const char *result = json_string_value(json_object_get(r, "result"));
            printf("%-10s %-40s %-44s %-12s %s\n", k == 0 ? name : "",
                   json_string_value(json_object_get(r, "figure")),
                   json_string_value(json_object_get(r, "value")), target ? target : "",
                   result ? result : "");
        }
        if (json_object_get(sc, "rows") != NULL)
            printf("%-10s %-40s %.1f s (measurement %.0f s)\n", "", "wall time, stack included",
                   secs, json_number_value(json_object_get(sc, "measure_s")));
    }
}

/* The figures whose target was missed, over every scenario's rows. */
static int count_missed(json_t *all)
{
    int missed = 0;
    size_t i, k;
    json_t *sc, *r;
    json_array_foreach(all, i, sc)
    {
        json_array_foreach(json_object_get(sc, "rows"), k, r)
        {
            const char *result = json_string_value(json_object_get(r, "result"));
            missed += result != NULL && strcmp(result, "FAIL") == 0;
        }
    }
    return missed;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: scenarios [--scenario NAME] [--quick] [--check] [--help]\n"
            "Fair shares and workload contracts on the real processes against sluice-sim (one\n"
            "deployment, TPM %d counting prompt + max_tokens, %d ms minutes), each scenario on\n"
            "a fresh stack: tokens served per tenant, Jain's index, weighted shares, interactive\n"
            "queue wait beside a batch backlog, a guaranteed share, pool utilisation and the\n"
            "simulator's 429s, each against its target. Prints a table and writes\n"
            "bench/results/scenarios-<unix time>.json.\n"
            "  --scenario NAME  one of:",
            TPM, MINUTE_MS);
    for (int i = 0; i < NSCENARIOS; i++)
        fprintf(f, " %s", scenarios[i].name);
    fprintf(f, " (default: all)\n"
               "  --quick          6 s of measurement per scenario instead of 30\n"
               "  --check          exit 1 when a target is missed (else a miss is only a FAIL in\n"
               "                   the table)\n"
               "  -h, --help       this text\n");
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    int quick = 0, check = 0;
    const b_opt_t options[] = {
        {"scenario", B_OPT_TEXT, &only, 0, 0},
        {"quick", B_OPT_FLAG, &quick, 0, 0},
        {"check", B_OPT_FLAG, &check, 0, 0},
        {NULL, B_OPT_FLAG, NULL, 0, 0},
    };
    int parsed = b_opt_parse("scenarios", argc, argv, options, usage);
    if (parsed != 0)
        return parsed == 1 ? 0 : parsed;
    int found = only == NULL;
    for (int i = 0; i < NSCENARIOS && !found; i++)
        found = strcmp(scenarios[i].name, only) == 0;
    if (!found) {
        return b_opt_refuse("scenarios", "--scenario", only, "the name of a scenario");
    }
    b_forward_signals(SIGTERM);
    printf("sluice scenarios%s: one deployment, TPM %d (prompt + max_tokens), %d ms minutes\n",
           quick ? " (quick)" : "", TPM, MINUTE_MS);
    long long started = (long long)time(NULL);
    json_t *all = json_array();
    int broken = 0;
    for (int i = 0; i < NSCENARIOS; i++) {
        const scenario_t *sc = &scenarios[i];
        if (only != NULL && strcmp(sc->name, only) != 0)
            continue;
        printf("%s: %s ...\n", sc->name, sc->what);
        double t0 = sl_mono_ms();
        json_t *res = run_child(sc, quick, quick ? 60 : 180);
        if (json_object_get(res, "duration_s") == NULL)
            json_object_set_new(res, "duration_s", json_real((sl_mono_ms() - t0) / 1000.0));
        const char *status = json_string_value(json_object_get(res, "status"));
        broken += strcmp(status, "broken") == 0;
        printf("%s: %s in %.1f s\n", sc->name, status,
               json_number_value(json_object_get(res, "duration_s")));
        json_array_append_new(all, res);
    }
    print_table(all);

    json_t *doc = json_pack(
        "{s:I, s:b, s:{s:i, s:i, s:i, s:s, s:i, s:f, s:i, s:s, s:i}, s:o}", "started_unix",
        (json_int_t)started, "quick", quick, "setup", "minute_ms", MINUTE_MS, "tpm", TPM, "rpm",
        RPM, "tpm_counting", "sum", "slices_per_minute", SLICES_PER_MINUTE, "headroom", HEADROOM,
        "drr_quantum_tokens", DRR_QUANTUM_TOKENS, "steady_window", "20-80 % of the measurement",
        "interactive_deadline_ms", INTERACTIVE_DEADLINE_MS, "scenarios", all);
    mkdir("bench/results", 0755);
    char path[256];
    snprintf(path, sizeof path, "bench/results/scenarios-%lld.json", started);
    if (doc == NULL || json_dump_file(doc, path, JSON_INDENT(1)) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        broken++;
    } else {
        printf("\nwritten to %s\n", path);
    }
    int missed = count_missed(all);
    if (missed > 0)
        printf("%d target%s missed\n", missed, missed == 1 ? "" : "s");
    json_decref(doc);
    return broken > 0 || (check && missed > 0) ? 1 : 0;
}
