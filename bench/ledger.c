/* bench/ledger - admission decisions per second on one core: the ledger's all-or-nothing
 * reservation over a job's buckets (tenant budget + deployment RPM + TPM), alone and with its
 * durable write (the reservation and its charges in SQLite, committed every 1,000 decisions),
 * and in the same run the raw rate of SQLite inserts of the same records without the ledger.
 * Sizes: 10 to 100,000 tenants, 4 classes, 50 deployments. Usage:
 *   bench/ledger [--decisions N] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger.h"
#include "store.h"
#include "util.h"

enum { DEPLOYMENTS = 50, CLASSES = 4, BATCH = 1000 };

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The next random decision: which tenant, class and deployment. */
static void next_decision(int tenants, int *tenant, int *cls, int *dep)
{
    uint64_t r = next_rand();
    *tenant = (int)(r % (uint64_t)tenants);
    *cls = (int)((r >> 20) % CLASSES);
    *dep = (int)((r >> 32) % DEPLOYMENTS);
}

static const char *const class_names[CLASSES] = {"interactive", "standard", "partner", "batch"};

typedef struct {
    double ledger_only, durable, raw_insert; /* decisions (or inserts) per second */
    double admitted_share;
} result_t;

/* One reservation record as the scheduler writes it. */
static sl_err_t write_record(sl_store_t *st, const sl_ledger_t *l, int64_t n, int tenant,
                             int cls, int dep, const sl_charge_t *ch, int nch, int64_t now)
{
    char res_id[33], job_id[40], tname[32], dname[32];
    snprintf(res_id, sizeof res_id, "r%031lld", (long long)n);
    snprintf(job_id, sizeof job_id, "j%lld", (long long)n);
    snprintf(tname, sizeof tname, "t%d", tenant);
    snprintf(dname, sizeof dname, "d%d", dep);
    sl_store_res_t r = {.reservation_id = res_id,
                        .job_id = job_id,
                        .tenant = tname,
                        .route = "chat",
                        .cls = class_names[cls],
                        .deployment = dname,
                        .idempotency_key = job_id,
                        .attempt = 1,
                        .est_input = 200,
                        .est_output = 300,
                        .created_ms = now,
                        .expires_ms = now + 180000,
                        .queue_deadline_ms = now + 600000};
    const char *ids[3];
    double amounts[3];
    const char *rules[3] = {"actual_total", "keep", "keep"};
    for (int i = 0; i < nch; i++) {
        ids[i] = sl_ledger_id(l, ch[i].bucket);
        amounts[i] = ch[i].amount;
    }
    return sl_store_res_open(st, &r, nch, ids, amounts, rules);
}

static int run_size(int tenants, int64_t decisions, result_t *out)
{
    char dir[] = "/tmp/sluice-ledger-bench-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return -1;
    char db[128], cmd[160];
    int64_t now = 1800000000000LL;
    sl_ledger_t *l = sl_ledger_new();
    int *tb = malloc((size_t)tenants * sizeof *tb);
    int rpm[DEPLOYMENTS], tpm[DEPLOYMENTS];
    char id[64];
    for (int d = 0; d < DEPLOYMENTS; d++) {
        snprintf(id, sizeof id, "deployment:d%d:rpm", d);
        rpm[d] = sl_ledger_add(l, id, 10000, 10000.0 / 60000, 0, 10000, now);
        snprintf(id, sizeof id, "deployment:d%d:tpm", d);
        tpm[d] = sl_ledger_add(l, id, 2e7, 2e7 / 60000, 0, 2e7, now);
    }
    for (int t = 0; t < tenants; t++) {
        snprintf(id, sizeof id, "tenant:t%d:tokens", t);
        tb[t] = sl_ledger_add(l, id, 1e9, 1e9 / 60000, 0, 1e9, now);
    }
    /* The decisions: random tenant, class and deployment; the clock advances 1 us each. */
    int64_t admitted = 0;
    double t0 = sl_mono_ms();
    for (int64_t i = 0; i < decisions; i++) {
        int tenant, cls, dep;
        next_decision(tenants, &tenant, &cls, &dep);
        sl_charge_t ch[3] = {{tb[tenant], 500}, {rpm[dep], 1}, {tpm[dep], 300}};
        if (sl_ledger_reserve(l, ch, 3, now + i / 1000, NULL) == SL_OK)
            admitted++;
    }
    out->ledger_only = (double)decisions / ((sl_mono_ms() - t0) / 1000.0);
    out->admitted_share = (double)admitted / (double)decisions;

    /* Decisions with their durable write. */
    snprintf(db, sizeof db, "%s/ledger.db", dir);
    sl_store_t *st = NULL;
    char err[256];
    if (sl_store_open(db, "schema/ledger.sql", &st, err, sizeof err) != SL_OK) {
        fprintf(stderr, "store: %s\n", err);
        return -1;
    }
    int64_t base = now + decisions;
    t0 = sl_mono_ms();
    sl_store_begin(st);
    for (int64_t i = 0; i < decisions; i++) {
        int tenant, cls, dep;
        next_decision(tenants, &tenant, &cls, &dep);
        sl_charge_t ch[3] = {{tb[tenant], 500}, {rpm[dep], 1}, {tpm[dep], 300}};
        if (sl_ledger_reserve(l, ch, 3, base + i / 1000, NULL) == SL_OK)
            write_record(st, l, i, tenant, cls, dep, ch, 3, base + i / 1000);
        if (i % BATCH == BATCH - 1) {
            sl_store_commit(st);
            sl_store_begin(st);
        }
    }
    sl_store_commit(st);
    out->durable = (double)decisions / ((sl_mono_ms() - t0) / 1000.0);
    sl_store_close(st);

    /* The same records inserted without the ledger: the storage ceiling. */
    snprintf(db, sizeof db, "%s/raw.db", dir);
    if (sl_store_open(db, "schema/ledger.sql", &st, err, sizeof err) != SL_OK)
        return -1;
    t0 = sl_mono_ms();
    sl_store_begin(st);
    for (int64_t i = 0; i < decisions; i++) {
        int tenant, cls, dep;
        next_decision(tenants, &tenant, &cls, &dep);
        sl_charge_t ch[3] = {{tb[tenant], 500}, {rpm[dep], 1}, {tpm[dep], 300}};
        write_record(st, l, i, tenant, cls, dep, ch, 3, now);
        if (i % BATCH == BATCH - 1) {
            sl_store_commit(st);
            sl_store_begin(st);
        }
    }
    sl_store_commit(st);
    out->raw_insert = (double)decisions / ((sl_mono_ms() - t0) / 1000.0);
    sl_store_close(st);
    sl_ledger_free(l);
    free(tb);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return 0;
}

int main(int argc, char **argv)
{
    int64_t decisions = 200000;
    if (argc == 3 && strcmp(argv[1], "--decisions") == 0)
        decisions = atoll(argv[2]);
    if (decisions < 1000) {
        fprintf(stderr, "usage: ledger [--decisions N (>= 1000)]\n");
        return 2;
    }
    static const int sizes[] = {10, 1000, 10000, 100000};
    printf("\nsluice ledger benchmark: %lld decisions per size, one core, 50 deployments,"
           " 4 classes\n",
           (long long)decisions);
    printf("  %8s %16s %16s %16s %8s %9s\n", "tenants", "ledger only/s", "with writes/s",
           "raw inserts/s", "ratio", "admitted");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        result_t r;
        if (run_size(sizes[i], decisions, &r) != 0)
            return 1;
        printf("  %8d %16.0f %16.0f %16.0f %7.1f%% %8.0f%%\n", sizes[i], r.ledger_only,
               r.durable, r.raw_insert, 100.0 * r.durable / r.raw_insert,
               100.0 * r.admitted_share);
    }
    return 0;
}
