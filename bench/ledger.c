/* bench/ledger - admission decisions per second on one core: the ledger's all-or-nothing
 * reservation over the six buckets on a job's path (key requests/min, tenant tokens/min, tenant
 * requests/day in a calendar window, deployment requests/min and tokens/min, provider project
 * tokens/min in a sliding window), alone and
 * with its durable write (the reservation row with its six charges in SQLite, committed every
 * 1,000 decisions), and in the same run the raw rate of SQLite inserts of the same records
 * without the ledger. Sizes: 10 to 100,000 tenants, 4 classes, 50 deployments in 10 projects.
 * Usage:
 *   bench/ledger [--decisions N] [--tenants T] [--batch B] [--trials K]
 * --tenants runs that one size instead of the four; --batch sets the decisions per transaction
 * (default 1,000), to see what smaller commits cost; each size runs K times (default 3) and the
 * median of each column is printed, since the machine is shared and noisy.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger.h"
#include "opts.h"
#include "store.h"
#include "util.h"

enum { DEPLOYMENTS = 50, PROJECTS = 10, CLASSES = 4, CHARGES = 6 };

/* Decisions per transaction (--batch). */
static int64_t batch = 1000;

static uint64_t rng;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static const char *const class_names[CLASSES] = {"interactive", "standard", "partner", "batch"};

/* The buckets: three per tenant (its key's requests/min, its tokens/min and requests/day), two
 * per deployment, and one per provider project (5 deployments each); and the tenant and
 * deployment names, which the scheduler has from its config. */
typedef struct {
    sl_ledger_t *ledger;
    int *key_rpm, *tenant_tpm, *tenant_rpd;
    int dep_rpm[DEPLOYMENTS], dep_tpm[DEPLOYMENTS], project_tpm[PROJECTS];
    char (*tenant_name)[16];
    char dep_name[DEPLOYMENTS][16];
} buckets_t;

/* One decision: which tenant, class and deployment, and what it charges. */
typedef struct {
    int tenant, cls, dep;
    sl_charge_t ch[CHARGES];
} decision_t;

/* Charge rules as the scheduler writes them: token charges on our own budgets are settled at
 * the real usage, requests and the provider's counters keep what they counted at receipt. */
static const char *const rules[CHARGES] = {"keep", "actual_total", "keep", "keep", "keep", "keep"};

static void next_decision(const buckets_t *b, int tenants, decision_t *d)
{
    uint64_t r = next_rand();
    d->tenant = (int)(r % (uint64_t)tenants);
    d->cls = (int)((r >> 20) % CLASSES);
    d->dep = (int)((r >> 32) % DEPLOYMENTS);
    d->ch[0] = (sl_charge_t){b->key_rpm[d->tenant], 1, 0};
    d->ch[1] = (sl_charge_t){b->tenant_tpm[d->tenant], 500, 0};
    d->ch[2] = (sl_charge_t){b->tenant_rpd[d->tenant], 1, 0};
    d->ch[3] = (sl_charge_t){b->dep_rpm[d->dep], 1, 0};
    d->ch[4] = (sl_charge_t){b->dep_tpm[d->dep], 500, 0};
    d->ch[5] = (sl_charge_t){b->project_tpm[d->dep % PROJECTS], 500, 0};
}

/* Adds a bucket with room for every decision of the run (the benchmark measures the cost of a
 * decision, not refusals), of the algorithm the scheduler would use: token buckets for
 * per-minute limits, a calendar window for a daily quota (local days in a time zone, as
 * "requests per day reset at midnight US Pacific"), a sliding window of 60 slots for a
 * project's tokens per minute. */
static int add_bucket(sl_ledger_t *l, const char *fmt, int n, int64_t now)
{
    char id[64];
    snprintf(id, sizeof id, fmt, n);
    sl_bucket_spec_t spec = {.alg = SL_ALG_TOKEN_BUCKET, .capacity = 1e12,
                             .rate_per_ms = 1e12 / 60000};
    if (strstr(fmt, ":rpd") != NULL)
        spec = (sl_bucket_spec_t){.alg = SL_ALG_CALENDAR, .capacity = 1e12,
                                  .tz = "America/Los_Angeles", .strict = 1};
    else if (strncmp(fmt, "project:", 8) == 0)
        spec = (sl_bucket_spec_t){.alg = SL_ALG_SLIDING_WINDOW, .capacity = 1e12,
                                  .window_ms = 60000, .sub_windows = 60};
    return sl_ledger_add_spec(l, id, &spec, now);
}

static int buckets_init(buckets_t *b, int tenants, int64_t now)
{
    memset(b, 0, sizeof *b);
    b->ledger = sl_ledger_new();
    b->key_rpm = malloc((size_t)tenants * sizeof *b->key_rpm);
    b->tenant_tpm = malloc((size_t)tenants * sizeof *b->tenant_tpm);
    b->tenant_rpd = malloc((size_t)tenants * sizeof *b->tenant_rpd);
    b->tenant_name = malloc((size_t)tenants * sizeof *b->tenant_name);
    if (b->ledger == NULL || b->key_rpm == NULL || b->tenant_tpm == NULL || b->tenant_rpd == NULL ||
        b->tenant_name == NULL)
        return -1;
    for (int p = 0; p < PROJECTS; p++)
        b->project_tpm[p] = add_bucket(b->ledger, "project:p%d:tpm", p, now);
    for (int d = 0; d < DEPLOYMENTS; d++) {
        snprintf(b->dep_name[d], sizeof b->dep_name[d], "d%d", d);
        b->dep_rpm[d] = add_bucket(b->ledger, "deployment:d%d:rpm", d, now);
        b->dep_tpm[d] = add_bucket(b->ledger, "deployment:d%d:tpm", d, now);
    }
    for (int t = 0; t < tenants; t++) {
        snprintf(b->tenant_name[t], sizeof b->tenant_name[t], "t%d", t);
        b->key_rpm[t] = add_bucket(b->ledger, "key:t%d-main:rpm", t, now);
        b->tenant_tpm[t] = add_bucket(b->ledger, "tenant:t%d:tpm", t, now);
        b->tenant_rpd[t] = add_bucket(b->ledger, "tenant:t%d:rpd", t, now);
        if (b->key_rpm[t] < 0 || b->tenant_tpm[t] < 0 || b->tenant_rpd[t] < 0)
            return -1;
    }
    return 0;
}

static void buckets_free(buckets_t *b)
{
    sl_ledger_free(b->ledger);
    free(b->key_rpm);
    free(b->tenant_tpm);
    free(b->tenant_rpd);
    free(b->tenant_name);
}

/* One reservation record as the scheduler writes it, with an id made as the scheduler makes
 * them: 12 hex digits of the clock, 4 of a counter, 16 random. */
static sl_err_t write_record(sl_store_t *st, const buckets_t *b, int64_t n, const decision_t *d,
                             int64_t now)
{
    char res_id[33], job_id[40];
    snprintf(res_id, sizeof res_id, "%012llx%04x%016llx",
             (unsigned long long)now & 0xffffffffffffULL, (unsigned)(n & 0xffff),
             (unsigned long long)next_rand());
    snprintf(job_id, sizeof job_id, "job-%lld", (long long)n);
    sl_store_res_t r = {.reservation_id = res_id,
                        .job_id = job_id,
                        .tenant = b->tenant_name[d->tenant],
                        .route = "chat",
                        .cls = class_names[d->cls],
                        .deployment = b->dep_name[d->dep],
                        .idempotency_key = job_id,
                        .attempt = 1,
                        .est_input = 200,
                        .est_output = 300,
                        .created_ms = now,
                        .expires_ms = now + 180000,
                        .queue_deadline_ms = now + 600000};
    const char *ids[CHARGES];
    double amounts[CHARGES];
    for (int i = 0; i < CHARGES; i++) {
        ids[i] = sl_ledger_id(b->ledger, d->ch[i].bucket);
        amounts[i] = d->ch[i].amount;
    }
    return sl_store_res_open(st, &r, CHARGES, ids, amounts, rules);
}

typedef struct {
    double ledger_only, durable, raw_insert; /* decisions (or inserts) per second */
    double admitted_share;
} result_t;

/* Decisions (with their writes when `ledger` is set) or the same writes alone, from the same
 * random sequence; the clock advances 1 ms every 1,000 decisions. Returns decisions/s or -1. */
static double run_phase(buckets_t *b, int tenants, int64_t decisions, sl_store_t *st, int ledger,
                        int64_t t_start, int64_t *admitted)
{
    rng = 0x9E3779B97F4A7C15ULL;
    *admitted = 0;
    double t0 = sl_mono_ms();
    if (st != NULL && sl_store_begin(st) != SL_OK)
        return -1;
    for (int64_t i = 0; i < decisions; i++) {
        decision_t d;
        next_decision(b, tenants, &d);
        int64_t now = t_start + i / 1000;
        if (ledger && sl_ledger_reserve(b->ledger, d.ch, CHARGES, now, NULL) != SL_OK)
            continue;
        (*admitted)++;
        if (st != NULL && write_record(st, b, i, &d, now) != SL_OK)
            return -1;
        if (st != NULL && i % batch == batch - 1 &&
            (sl_store_commit(st) != SL_OK || sl_store_begin(st) != SL_OK))
            return -1;
    }
    if (st != NULL && sl_store_commit(st) != SL_OK)
        return -1;
    return (double)decisions / ((sl_mono_ms() - t0) / 1000.0);
}

static sl_store_t *open_store(const char *dir, const char *name)
{
    char db[160], err[256];
    snprintf(db, sizeof db, "%s/%s", dir, name);
    sl_store_t *st = NULL;
    if (sl_store_open(db, "schema/ledger.sql", &st, err, sizeof err) != SL_OK) {
        fprintf(stderr, "store: %s\n", err);
        return NULL;
    }
    return st;
}

static int run_size(int tenants, int64_t decisions, result_t *out)
{
    char dir[] = "/tmp/sluice-ledger-bench-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return -1;
    int64_t now = 1800000000000LL, admitted;
    buckets_t b;
    int rc = -1;
    sl_store_t *st = NULL;
    if (buckets_init(&b, tenants, now) != 0)
        goto out;
    out->ledger_only = run_phase(&b, tenants, decisions, NULL, 1, now, &admitted);
    out->admitted_share = (double)admitted / (double)decisions;
    /* Decisions with their durable write, later on the same ledger. */
    st = open_store(dir, "ledger.db");
    if (st == NULL)
        goto out;
    out->durable = run_phase(&b, tenants, decisions, st, 1, now + 3600000, &admitted);
    sl_store_close(st);
    /* The same records inserted without the ledger: the storage ceiling. */
    st = open_store(dir, "raw.db");
    if (st == NULL)
        goto out;
    out->raw_insert = run_phase(&b, tenants, decisions, st, 0, now + 3600000, &admitted);
    sl_store_close(st);
    rc = out->durable > 0 && out->raw_insert > 0 ? 0 : -1;
out:
    buckets_free(&b);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of one column (the double at offset) of n results. */
static double median_of(const result_t *runs, int n, size_t offset)
{
    double v[99];
    for (int i = 0; i < n; i++)
        memcpy(&v[i], (const char *)&runs[i] + offset, sizeof v[i]);
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ledger [--decisions N] [--tenants T] [--batch B] [--trials K] [--help]\n"
            "Admission decisions per second on one core: the ledger's all-or-nothing reservation\n"
            "over the six buckets on a job's path (key requests/min, tenant tokens/min, tenant\n"
            "requests/day in a calendar window, deployment requests/min and tokens/min, provider\n"
            "project tokens/min in a sliding window), 50 deployments in 10 projects, 4 classes.\n"
            "Measured three ways in the same run: the ledger alone in memory; with its durable\n"
            "write (one reservation row with its six charges in SQLite); and the same rows\n"
            "inserted without the ledger (the storage ceiling). Each size runs K times and the\n"
            "median of each column is printed. Needs no stack; prints a table.\n"
            "  --decisions N   decisions per size, 1000 - 100000000 (default 200000)\n"
            "  --tenants T     one size of T tenants instead of 10, 1000, 10000 and 100000\n"
            "                  (0, the default: those four)\n"
            "  --batch B       decisions per SQLite transaction, 1 - 100000000 (default 1000)\n"
            "  --trials K      runs of each size, 1 - 99 (default 3)\n"
            "  -h, --help      this text\n");
}

int main(int argc, char **argv)
{
    long long decisions = 200000, batch_opt = batch;
    int only_tenants = 0, trials = 3;
    const b_opt_t options[] = {
        {"decisions", B_OPT_LONG, &decisions, 1000, 100000000},
        {"tenants", B_OPT_INT, &only_tenants, 0, 10000000},
        {"batch", B_OPT_LONG, &batch_opt, 1, 100000000},
        {"trials", B_OPT_INT, &trials, 1, 99},
        {NULL, B_OPT_FLAG, NULL, 0, 0},
    };
    int parsed = b_opt_parse("ledger", argc, argv, options, usage);
    if (parsed != 0)
        return parsed == 1 ? 0 : parsed;
    batch = batch_opt;
    static const int all_sizes[] = {10, 1000, 10000, 100000};
    const int *sizes = all_sizes;
    size_t nsizes = sizeof all_sizes / sizeof all_sizes[0];
    if (only_tenants > 0) {
        sizes = &only_tenants;
        nsizes = 1;
    }
    printf("\nsluice ledger benchmark: %lld decisions per size, one core, 6 buckets per decision,"
           " 50 deployments, 4 classes, %lld decisions per commit; median of %d trials\n",
           (long long)decisions, (long long)batch, trials);
    printf("  %8s %16s %16s %16s %8s %9s\n", "tenants", "ledger only/s", "with writes/s",
           "raw inserts/s", "ratio", "admitted");
    for (size_t i = 0; i < nsizes; i++) {
        result_t r, runs[99];
        for (int k = 0; k < trials; k++) {
            if (run_size(sizes[i], decisions, &runs[k]) != 0)
                return 1;
        }
        r.ledger_only = median_of(runs, trials, offsetof(result_t, ledger_only));
        r.durable = median_of(runs, trials, offsetof(result_t, durable));
        r.raw_insert = median_of(runs, trials, offsetof(result_t, raw_insert));
        r.admitted_share = runs[0].admitted_share;
        printf("  %8d %16.0f %16.0f %16.0f %7.1f%% %8.0f%%\n", sizes[i], r.ledger_only,
               r.durable, r.raw_insert, 100.0 * r.durable / r.raw_insert,
               100.0 * r.admitted_share);
    }
    return 0;
}
