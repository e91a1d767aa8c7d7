/* bench/store - what a durable commit costs: jobs inserted into the scheduler's store
 * (sl_store_job_insert, the row the scheduler writes for each job it takes in, with a 600-byte
 * job message) and committed every B jobs, for B = 1, 16 and 256 (the scheduler commits once
 * per loop turn, with up to 256 messages in it), with the schema's synchronous=FULL (a commit
 * is on disk when it returns) against the same schema with synchronous=NORMAL (WAL synced only
 * at checkpoints: a power loss can drop the last commits). Each configuration runs for a fixed
 * time on a fresh database; each runs K times, interleaved, and the medians are printed, since
 * the machine is shared and noisy.
 * Usage:
 *   bench/store [--seconds S] [--trials K] [--dir D]
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "opts.h"
#include "store.h"
#include "util.h"

enum { MODES = 2, BATCHES = 3, MAX_TRIALS = 99 };

static const char *const mode_names[MODES] = {"NORMAL", "FULL"};
static const int batch_sizes[BATCHES] = {1, 16, 256};

/* The schema file for mode m, written under dir; returns its path (static per mode). FULL is
 * schema/ledger.sql as it is; NORMAL the same with its synchronous statement changed. */
static const char *schema_for(int m, const char *dir)
{
    static const char full[] = "PRAGMA synchronous = FULL;";
    static char paths[MODES][700];
    char *text = NULL;
    if (sl_read_file("schema/ledger.sql", 1 << 20, &text, NULL) != SL_OK)
        return NULL;
    char *line = strstr(text, full);
    if (line == NULL) {
        fprintf(stderr, "schema/ledger.sql has no \"%s\"\n", full);
        free(text);
        return NULL;
    }
    snprintf(paths[m], sizeof paths[m], "%s/ledger-%s.sql", dir, mode_names[m]);
    FILE *f = fopen(paths[m], "w");
    if (f == NULL) {
        free(text);
        return NULL;
    }
    if (m == 0) {
        *line = '\0';
        fprintf(f, "%sPRAGMA synchronous = NORMAL;%s", text, line + sizeof full - 1);
    } else {
        fputs(text, f);
    }
    fclose(f);
    free(text);
    return paths[m];
}

/* Inserts and commits jobs, batch per transaction, for seconds; returns jobs per second (and
 * *commits_per_s), or -1. */
static double run_one(const char *dir, const char *sql, int batch, double seconds,
                      double *commits_per_s)
{
    char db[700], err[512];
    snprintf(db, sizeof db, "%s/store.db", dir);
    sl_store_t *st = NULL;
    if (sl_store_open(db, sql, &st, err, sizeof err) != SL_OK) {
        fprintf(stderr, "store: %s\n", err);
        return -1;
    }
    char job_json[640];
    memset(job_json, 'x', sizeof job_json - 1);
    job_json[sizeof job_json - 1] = '\0';
    memcpy(job_json, "{\"v\":1,\"note\":\"", 15);
    job_json[sizeof job_json - 3] = '"';
    job_json[sizeof job_json - 2] = '}';
    const char *request = "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a fact.\"}],"
                          "\"max_tokens\":100}";
    int64_t jobs = 0, commits = 0;
    double t0 = sl_mono_ms(), end = t0 + seconds * 1000;
    double rate = -1;
    while (sl_mono_ms() < end) {
        if (sl_store_begin(st) != SL_OK)
            goto out;
        for (int i = 0; i < batch; i++) {
            char id[32];
            snprintf(id, sizeof id, "job-%012lld", (long long)jobs);
            sl_store_job_t j = {.job_id = id, .idempotency_key = id, .tenant = "acme",
                                .app = "web", .env = "prod", .key_id = "k1", .route = "chat",
                                .cls = "standard", .submitted_ms = 1000, .deadline_ms = 61000,
                                .est_input = 12, .est_output = 100, .est_total = 112,
                                .job_json = job_json, .request_json = request};
            char *result = NULL;
            if (sl_store_job_insert(st, &j, 1000, &result) != SL_OK)
                goto out;
            jobs++;
        }
        if (sl_store_commit(st) != SL_OK)
            goto out;
        commits++;
    }
    double secs = (sl_mono_ms() - t0) / 1000.0;
    rate = (double)jobs / secs;
    *commits_per_s = (double)commits / secs;
out:
    sl_store_close(st);
    static const char *const suffixes[] = {"", "-wal", "-shm", ".lock"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        char path[720];
        snprintf(path, sizeof path, "%s%s", db, suffixes[i]);
        unlink(path);
    }
    return rate;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: store [--seconds S] [--trials K] [--dir D] [--help]\n"
            "What a durable commit costs: jobs inserted into the scheduler's SQLite store and\n"
            "committed every 1, 16 or 256 jobs, with synchronous=FULL (the schema's: a commit is\n"
            "on disk when it returns) and with synchronous=NORMAL (a power loss can drop the\n"
            "last commits). Prints inserts and commits per second, the median of K runs of each\n"
            "configuration (interleaved). Needs no stack.\n"
            "  --seconds S   each run's length, 0.2 - 600 (default 2)\n"
            "  --trials K    runs of each configuration, 1 - 99 (default 3)\n"
            "  --dir D       where the databases go (default /tmp: the file system measured)\n"
            "  -h, --help    this text\n");
}

int main(int argc, char **argv)
{
    double seconds = 2;
    int trials = 3;
    const char *where = "/tmp";
    const b_opt_t options[] = {
        {"seconds", B_OPT_NUM, &seconds, 0.2, 600},
        {"trials", B_OPT_INT, &trials, 1, MAX_TRIALS},
        {"dir", B_OPT_TEXT, &where, 0, 0},
        {NULL, B_OPT_FLAG, NULL, 0, 0},
    };
    int parsed = b_opt_parse("store", argc, argv, options, usage);
    if (parsed != 0)
        return parsed == 1 ? 0 : parsed;
    /* The store warns that NORMAL is below FULL: known here, it is what is measured. */
    sl_log_init("bench-store", SL_LOG_ERROR);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/sluice-store-bench-XXXXXX", where);
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    const char *sql[MODES];
    for (int m = 0; m < MODES; m++) {
        sql[m] = schema_for(m, dir);
        if (sql[m] == NULL)
            return 1;
    }
    static double jobs_s[MODES][BATCHES][MAX_TRIALS], commits_s[MODES][BATCHES][MAX_TRIALS];
    for (int k = 0; k < trials; k++) {
        for (int b = 0; b < BATCHES; b++) {
            for (int m = 0; m < MODES; m++) {
                jobs_s[m][b][k] =
                    run_one(dir, sql[m], batch_sizes[b], seconds, &commits_s[m][b][k]);
                if (jobs_s[m][b][k] < 0)
                    return 1;
            }
        }
    }
    printf("\nsluice store benchmark: job inserts committed every B jobs, %.1f s a run, median of"
           " %d runs, databases in %s\n",
           seconds, trials, where);
    printf("  %6s %16s %16s %8s %16s %16s\n", "B", "NORMAL jobs/s", "FULL jobs/s", "FULL/N",
           "NORMAL commits/s", "FULL commits/s");
    for (int b = 0; b < BATCHES; b++) {
        double j[MODES], c[MODES];
        for (int m = 0; m < MODES; m++) {
            j[m] = median(jobs_s[m][b], trials);
            c[m] = median(commits_s[m][b], trials);
        }
        printf("  %6d %16.0f %16.0f %7.1f%% %16.0f %16.0f\n", batch_sizes[b], j[0], j[1],
               100.0 * j[1] / j[0], c[0], c[1]);
    }
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return 0;
}
