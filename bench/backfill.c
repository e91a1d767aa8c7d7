/* bench/backfill - an overnight-style batch backfill of N jobs (default 100,000) from a JSONL
 * file through `sluice submit --file F --follow`, crashed midway and resumed, on the real
 * processes against sluice-sim with shortened minutes.
 *
 * The idea to hold first: everything is measured from outside, the way an operator would see
 * it. The client is the real CLI; the crash is SIGKILL of the scheduler, the dispatcher, ingest
 * and the CLI at one instant (devkafka and the simulator live on: the broker keeps everything in
 * memory); the resumption is the same three daemons on the same config, SQLite file and broker,
 * and the same command on the same file. The CLI names a line without an idempotency key
 * "<hash of the file>-<line>", so the second run resubmits the very same jobs, and the scheduler
 * must neither lose nor redo any of them. The verdict comes from the second run's output file
 * (one final result per job), the simulator's counters (every provider call) and the
 * scheduler's Prometheus counters (estimated against real tokens).
 *
 * One tenant, one route, one simulated deployment whose TPM (counting prompt/4 + max_tokens) is
 * the binding limit. The runner measures, it does not gate: a figure off target is reported and
 * exits 0 unless --check is given. Exit 1 only when the run could not be measured (a stack that
 * does not start, results that never come, the overall timeout). Usage: bench/backfill --help. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collect.h"
#include "group.h"
#include "harness.h"
#include "opts.h"
#include "sign.h"
#include "stats.h"
#include "util.h"

static const char usage[] =
    "usage: bench/backfill [--jobs N] [--quick] [--minute-ms N] [--crash-at F] [--tpm N]\n"
    "                      [--ttft-ms N] [--batch-api MS] [--timeout S] [--check] [--keep]\n"
    "                      [--help]\n"
    "\n"
    "Runs a batch backfill of N jobs (default 100,000) from a JSONL file through\n"
    "`sluice submit --file F --follow` on a fresh stack against sluice-sim, SIGKILLs the\n"
    "scheduler, dispatcher, ingest and the CLI when a fraction F of the results is in, restarts\n"
    "them on the same store and broker, re-runs the same command on the same file, and reports\n"
    "lost, duplicated and twice-executed jobs, 429s, wall times, TPM utilisation, peak RSS and\n"
    "the scheduler's token estimates. Writes bench/results/backfill-<unix time>.json.\n"
    "\n"
    "  --jobs N        jobs in the file, 100 - 10000000 (default 100000)\n"
    "  --quick         10,000 jobs (same limit, so a tenth of the time; over --jobs)\n"
    "  --minute-ms N   length of a simulated minute in ms, sluice and sim, 100 - 3600000\n"
    "                  (default 3000)\n"
    "  --crash-at F    crash when this fraction of the results is in (default 0.5; 0 = none)\n"
    "  --tpm N         the deployment's tokens per (simulated) minute, 0 (no limit) or 1000\n"
    "                  and more (default: %lld, which lets about %d jobs/s through at\n"
    "                  --minute-ms 3000)\n"
    "  --ttft-ms N     the simulator's time to first token, 0 - 60000 (default 20); with a slow\n"
    "                  provider the dispatcher, not the limit, bounds the rate\n"
    "  --batch-api MS  send the backfill through the provider's batch API (routes[].batch\n"
    "                  provider), which answers each batch MS real ms after it is created\n"
    "                  (1 - 3600000); reports its cost beside the same usage's online cost\n"
    "  --timeout S     overall limit in seconds, 20 - 86400 (default 60 + 1.2 per 1,000 jobs)\n"
    "  --check         exit 1 when a job has no final result, a job was executed twice more\n"
    "                  often than calls were in flight at the crash, or the simulator sent a 429\n"
    "  --keep          keep the temporary directory (logs, configs, outputs)\n"
    "  -h, --help      this text\n";

/* The workload: small prompts and small max_tokens, so the stack and not the payload is what
 * is measured. */
enum {
    PROMPT_CHARS_MIN = 200,
    PROMPT_CHARS_MAX = 400,
    MAX_TOKENS_MIN = 16,
    MAX_TOKENS_MAX = 32,
    SLICES_PER_MINUTE = 10,
    LEASE_MS = 10000,
    SAMPLE_MS = 250,
    MAX_SAMPLES = 4096,
};

/* The limit lets DEFAULT_JOBS_PER_S jobs of the mean size through per second of wall time at
 * the default minute, so 100,000 jobs take about 50 s at the limit. Measured on the 2-core
 * machine (bench/README.md): with no limit at all the stack admitted provider calls at about
 * 5,000 jobs/s, and at 2,000 jobs/s the limit, not the stack, binds (94-95 % of the TPM used in
 * the steady parts, against the scheduler's 97 % headroom). */
enum { DEFAULT_JOBS_PER_S = 2000, DEFAULT_MINUTE_MS = 3000 };
/* Mean simulator cost of a job: ceil(prompt characters / 4) + max_tokens. */
#define MEAN_TOKENS_PER_JOB                                                                        \
    ((PROMPT_CHARS_MIN + PROMPT_CHARS_MAX) / 8.0 + 0.5 + (MAX_TOKENS_MIN + MAX_TOKENS_MAX) / 2.0)
/* Tokens per simulated minute that let DEFAULT_JOBS_PER_S mean jobs through per real second. */
#define DEFAULT_TPM                                                                                \
    ((long long)(MEAN_TOKENS_PER_JOB * DEFAULT_JOBS_PER_S * DEFAULT_MINUTE_MS / 1000.0 + 0.5))

static const char api_key[] = "sk-backfill-0001";
static const char provider_key[] = "backfill-provider-key";

typedef struct {
    int njobs;
    int minute_ms;
    double crash_at;
    long long tpm;
    int timeout_s;
    int ttft_ms;  /* the simulator's time to first token */
    int batch_ms; /* > 0: through the provider's batch API, with this turnaround (real ms) */
    int check;
    int keep;
} opts_t;

/* One /stats sample. t_ms is wall time since the first submit started. */
typedef struct {
    double t_ms;
    b_sim_stats_t sim;
    long sched_rss_kb; /* the scheduler's resident memory now (VmRSS), -1 when unknown */
} sample_t;

/* The processes whose memory and CPU are reported. */
enum { P_SCHED, P_DISP, P_INGEST, P_KAFKA, P_SIM, P_CLI, NPROC };
static const char *const proc_names[NPROC] = {"scheduler", "dispatcher", "ingest",
                                              "devkafka",  "sim",        "cli"};

/* The scheduler's estimate counters and its dispatches, summed over its lives. */
enum { M_RESERVED, M_USED, M_OVER, M_UNDER, M_DISPATCHED, NMETRIC };
static const char *const metric_names[NMETRIC] = {
    "sluice_scheduler_tokens_reserved_total", "sluice_scheduler_tokens_used_total",
    "sluice_scheduler_tokens_over_reserved_total", "sluice_scheduler_tokens_under_reserved_total",
    "sluice_scheduler_dispatched_total"};

/* A job's final status as read from an output file; one byte per job. */
enum { ST_NONE, ST_SUCCEEDED, ST_FAILED, ST_REJECTED, ST_EXPIRED, ST_OTHER, NSTATUS };
static const char *const status_names[NSTATUS] = {"none",     "succeeded", "failed",
                                                  "rejected", "expired",   "other"};

typedef struct {
    opts_t o;
    int sim_port, metrics_port, admin_port;
    char *sim_cfg, *cfg, *db, *input, *out1, *out2;
    int64_t expected_tokens; /* what the simulator charges for the whole file, by its rule */
    h_stack_t st;
    double t0_ms; /* wall time (h_wall_ms) when the first submit started */
    sample_t *samples;
    int nsamples;
    /* Per job: its status in the first and the second output, and a hash of its first result
     * (a job re-sent has the same result text; a job redone would not). */
    uint8_t *st1, *st2;
    uint32_t *sig1;
    json_t *report;
} run_t;

/* ---- small helpers ---- */

static uint32_t fnv1a(const char *p, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)p[i];
        h *= 16777619u;
    }
    return h;
}

static int status_of(const char *s)
{
    for (int i = ST_SUCCEEDED; i < ST_OTHER; i++) {
        if (strcmp(s, status_names[i]) == 0)
            return i;
    }
    return ST_OTHER;
}

/* The job index of an idempotency key "<run>-<line>" (lines count from 1); -1 when it is not
 * one of ours. */
static int job_of_key(const char *key, int njobs)
{
    const char *dash = strrchr(key, '-');
    if (dash == NULL || dash[1] == '\0')
        return -1;
    char *end = NULL;
    long line = strtol(dash + 1, &end, 10);
    if (*end != '\0' || line < 1 || line > njobs)
        return -1;
    return (int)line - 1;
}

/* Scrapes the scheduler's estimate counters into m (-1 each when it does not answer). */
static void scrape_metrics(const run_t *run, double m[NMETRIC])
{
    b_metrics_scrape(run->metrics_port, metric_names, NMETRIC, m);
    for (int i = 0; i < NMETRIC; i++)
        m[i] = isnan(m[i]) ? -1 : m[i];
}

/* Lines (newlines) appended to path since *off; *off advances. */
static long count_new_lines(const char *path, long *off)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    long n = 0;
    char buf[65536];
    if (fseek(f, *off, SEEK_SET) == 0) {
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
            for (size_t i = 0; i < got; i++)
                n += buf[i] == '\n';
            *off += (long)got;
        }
    }
    fclose(f);
    return n;
}

static void take_sample(run_t *run)
{
    if (run->nsamples >= MAX_SAMPLES)
        return;
    sample_t *smp = &run->samples[run->nsamples];
    if (b_sim_stats_read(run->st.stats_url, &smp->sim) != 0)
        return;
    smp->t_ms = h_wall_ms() - run->t0_ms;
    smp->sched_rss_kb = h_rss_kb(run->st.sched);
    run->nsamples++;
}

/* Utilisation of the TPM limit over the samples [from, to): tokens charged over what the
 * limit allowed in that simulated time; NAN when the window is too short to say. */
static double utilisation(const run_t *run, int from, int to)
{
    if (from < 0 || to - 1 <= from || run->o.tpm == 0)
        return NAN;
    const sample_t *a = &run->samples[from], *b = &run->samples[to - 1];
    double sim_min = (b->sim.sim_ms - a->sim.sim_ms) / run->o.minute_ms;
    if (b->t_ms - a->t_ms < 1000 || sim_min <= 0)
        return NAN;
    return (double)(b->sim.tokens - a->sim.tokens) / ((double)run->o.tpm * sim_min);
}

/* First sample index in [from, to) with admitted >= level; -1 when none. */
static int sample_reaching(const run_t *run, int from, int to, int64_t level)
{
    for (int i = from; i < to; i++) {
        if (run->samples[i].sim.admitted >= level)
            return i;
    }
    return -1;
}

/* Peak RSS in KiB of a process we have not reaped, and its CPU seconds. */
static void proc_figures(pid_t pid, long *rss_kb, double *cpu_s)
{
    *rss_kb = pid > 0 ? h_peak_rss_kb(pid) : -1;
    *cpu_s = pid > 0 ? h_cpu_seconds(pid) : -1;
}

/* Reaps pid if it has ended: returns 1 and sets *status (exit status or 128 + signal) and
 * *maxrss_kb; 0 while it runs. */
static int reap(pid_t pid, int *status, long *maxrss_kb)
{
    int ws = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    if (wait4(pid, &ws, WNOHANG, &ru) != pid)
        return 0;
    *status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    *maxrss_kb = ru.ru_maxrss;
    return 1;
}

/* ---- the workload and the configs ---- */

/* Writes the input file; returns 0, or -1 on a write error. The prompt text is ASCII, so the
 * simulator's estimate ceil(code points / 4) is computed here exactly. */
static int write_input(run_t *run)
{
    static const char words[] =
        "the quarterly ledger entry for this customer account lists an invoice a refund and a "
        "note from support please summarise it in one line for the archive index and flag any "
        "amount that looks inconsistent with the previous period or the contract terms ";
    char path[4096];
    snprintf(path, sizeof path, "%s/backfill.jsonl", h_tmpdir());
    run->input = strdup(path);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    b_rng_seed(20261202);
    int64_t tokens = 0;
    int rc = 0;
    for (int i = 0; i < run->o.njobs && rc == 0; i++) {
        int chars =
            PROMPT_CHARS_MIN + (int)(b_rng_uniform() * (PROMPT_CHARS_MAX - PROMPT_CHARS_MIN + 1));
        int max_tokens =
            MAX_TOKENS_MIN + (int)(b_rng_uniform() * (MAX_TOKENS_MAX - MAX_TOKENS_MIN + 1));
        char head[64];
        int hl = snprintf(head, sizeof head, "Backfill row %d: ", i + 1);
        char text[PROMPT_CHARS_MAX + 64];
        int tl = hl;
        memcpy(text, head, (size_t)hl);
        int off = i % 50; /* rows do not all read alike */
        while (tl < chars) {
            text[tl++] = words[off++ % (sizeof words - 1)];
        }
        text[tl] = '\0';
        tokens += (tl + 3) / 4 + max_tokens;
        if (fprintf(f,
                    "{\"api_key\": \"%s\", \"route\": \"bulk\", \"class\": \"batch\","
                    " \"request\": {\"messages\": [{\"role\": \"user\", \"content\": \"%s\"}],"
                    " \"max_tokens\": %d}}\n",
                    api_key, text, max_tokens) < 0)
            rc = -1;
    }
    if (fclose(f) != 0)
        rc = -1;
    run->expected_tokens = tokens;
    return rc;
}

static void write_configs(run_t *run)
{
    const char *dir = h_tmpdir();
    char sim[1024];
    /* RPM far above what the TPM lets through: TPM alone binds. The simulator remembers twice
     * as many idempotency keys as there are jobs, so a call re-sent after the crash is always
     * recognised (replayed), never charged again because the key was forgotten. */
    long long rpm = 100LL * run->o.tpm / 40;
    /* --tpm 0: no limit on either side (how fast the stack itself drains the file). */
    char limits[128] = "", sim_limits[128] = "";
    if (run->o.tpm > 0) {
        snprintf(limits, sizeof limits, "\"limits\": {\"rpm\": %lld, \"tpm\": %lld},", rpm,
                 run->o.tpm);
        snprintf(sim_limits, sizeof sim_limits, "\"rpm\": %lld, \"tpm\": %lld,", rpm, run->o.tpm);
    }
    /* --batch-api: the deployment's batch API answers every batch after the turnaround, with
     * no limit of its own (the online limit stays, unused); sluice sends the whole backfill
     * there (routes[].batch "provider"). Both sides price the tokens as gpt-4o-mini. */
    char sim_batch[128] = "", batch[512] = "", policy[64] = "";
    if (run->o.batch_ms > 0) {
        snprintf(sim_batch, sizeof sim_batch,
                 " \"batch\": {\"turnaround_ms\": %d, \"max_batches\": 100000},", run->o.batch_ms);
        snprintf(batch, sizeof batch,
                 " \"batch\": {\"max_requests\": 5000, \"max_bytes\": 1000000,"
                 " \"linger_ms\": 1000, \"poll_ms\": %d, \"answer_ms\": %d,"
                 " \"window_ms\": 86400000},",
                 run->o.batch_ms / 4 > 100 ? run->o.batch_ms / 4 : 100, 10 * run->o.batch_ms);
        snprintf(policy, sizeof policy, ", \"batch\": \"provider\"");
    }
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"idempotency_keys\": %d, \"deployments\": [{\"name\": "
             "\"bulk\", \"model\": \"gpt-4o-mini\", %s%s"
             " \"tpm_counting\": \"sum\", \"slices_per_minute\": %d, \"ttft_ms\": %d,"
             " \"ms_per_token\": 0.2, \"output_min\": 8, \"output_max\": %d,"
             " \"api_key\": \"%s\"}]}",
             run->o.minute_ms, 2 * run->o.njobs > 100000 ? 2 * run->o.njobs : 100000, sim_limits,
             sim_batch, SLICES_PER_MINUTE, run->o.ttft_ms, MAX_TOKENS_MAX, provider_key);
    run->sim_cfg = strdup(h_write("sim.json", sim));
    char prov[128];
    snprintf(prov, sizeof prov, "%s\n", provider_key);
    char *keyfile = strdup(h_write("provider.key", prov));
    char hex[65];
    h_key_hash_hex(api_key, hex);
    char db[4096];
    snprintf(db, sizeof db, "%s/sluice.db", dir);
    run->db = strdup(db);
    int ingest_port = h_free_port(), disp_port = h_free_port();
    char cfg[8192];
    /* Every listening port is a free one, so a parallel benchmark's stack cannot collide. */
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %d,"
             " \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"ingest\": {\"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"scheduler\": {\"db\": \"%s\", \"lease_ms\": %d, \"max_attempts\": 5,"
             "   \"metrics_listen\": \"127.0.0.1:%d\", \"admin_listen\": \"127.0.0.1:%d\"},"
             " \"dispatcher\": {\"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "   \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"classes\": {\"batch\": {\"max_queue\": 1000000, \"deadline_ms\": 86400000}},"
             " \"deployments\": [{\"name\": \"bulk\", \"base_url\": "
             "   \"http://127.0.0.1:%d/bulk/v1\", \"model\": \"gpt-4o-mini\","
             "   \"api_key_file\": \"%s\", %s%s"
             "   \"price\": {\"input_per_mtok\": 0.15, \"output_per_mtok\": 0.6},"
             "   \"tpm_counting\": \"sum\", \"slices_per_minute\": %d,"
             "   \"max_output_tokens\": 4096}],"
             " \"routes\": [{\"name\": \"bulk\", \"deployments\": [\"bulk\"]%s}],"
             " \"tenants\": [{\"name\": \"backfill\", \"weight\": 1}],"
             " \"keys\": [{\"id\": \"k-backfill\", \"tenant\": \"backfill\", \"hash\": \"%s\"}]}",
             run->o.minute_ms, dir, ingest_port, db, LEASE_MS, run->metrics_port, run->admin_port,
             disp_port, dir, dir, run->sim_port, keyfile, limits, batch, SLICES_PER_MINUTE, policy,
             hex);
    free(keyfile);
    run->cfg = strdup(h_write("sluice.json", cfg));
}

static pid_t spawn_submit(const run_t *run, const char *out, const char *logname)
{
    char timeout[32];
    snprintf(timeout, sizeof timeout, "%d", run->o.timeout_s);
    const char *args[] = {"submit", "--file",    run->input, "--follow", "--out",
                          out,      "--timeout", timeout,    NULL};
    return h_spawn("sluice", logname, run->cfg, args);
}

/* ---- reading the outputs ---- */

typedef struct {
    long lines, ours, foreign, unparsed, duplicates, changed;
    long by_status[NSTATUS];
    long by_batch;            /* final results served by the batch API (path "batch") */
    double cost, online_cost; /* sum of cost_usd; of what the same usage costs online */
} tally_t;

/* Reads an output file of `sluice submit`: each result's status into st (and, for the first
 * file, a hash of its text into sig; for the second, compares with it). A torn last line (the
 * CLI was killed mid-write) counts as unparsed. Returns -1 when the file cannot be read. */
static int read_output(const run_t *run, const char *path, uint8_t *st, uint32_t *sig, int compare,
                       tally_t *t)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        t->lines++;
        if (line[len - 1] == '\n')
            line[--len] = '\0';
        json_t *res = json_loadb(line, (size_t)len, 0, NULL);
        const char *key = json_string_value(json_object_get(res, "idempotency_key"));
        const char *status = json_string_value(json_object_get(res, "status"));
        if (key == NULL || status == NULL) {
            t->unparsed++;
            json_decref(res);
            continue;
        }
        int i = job_of_key(key, run->o.njobs);
        if (i < 0) {
            t->foreign++;
        } else if (st[i] != ST_NONE) {
            t->duplicates++;
        } else {
            t->ours++;
            const char *how = json_string_value(json_object_get(res, "path"));
            double cost = json_number_value(json_object_get(res, "cost_usd"));
            json_t *online = json_object_get(res, "online_cost_usd");
            t->by_batch += how != NULL && strcmp(how, "batch") == 0;
            t->cost += cost;
            t->online_cost += json_is_number(online) ? json_number_value(online) : cost;
            st[i] = (uint8_t)status_of(status);
            t->by_status[st[i]]++;
            uint32_t h = fnv1a(line, (size_t)len);
            if (!compare)
                sig[i] = h;
            else if (run->st1[i] != ST_NONE && sig[i] != h)
                t->changed++;
        }
        json_decref(res);
    }
    free(line);
    fclose(f);
    return 0;
}

/* ---- the run ---- */

static json_t *rss_json(const long kb[NPROC])
{
    json_t *o = json_object();
    for (int i = 0; i < NPROC; i++)
        json_object_set_new(o, proc_names[i], kb[i] >= 0 ? json_integer(kb[i]) : json_null());
    return o;
}

static json_t *cpu_json(const double s[NPROC])
{
    json_t *o = json_object();
    for (int i = 0; i < NPROC; i++)
        json_object_set_new(o, proc_names[i], s[i] >= 0 ? json_real(s[i]) : json_null());
    return o;
}

static void fmt_ms(char *buf, size_t cap, double ms)
{
    if (isfinite(ms) && ms >= 0)
        snprintf(buf, cap, "%.1f s", ms / 1000.0);
    else
        snprintf(buf, cap, "-");
}

static void fmt_pct(char *buf, size_t cap, double x)
{
    if (isfinite(x))
        snprintf(buf, cap, "%.1f %%", 100.0 * x);
    else
        snprintf(buf, cap, "-");
}

/* Runs the whole backfill on a fresh stack; returns NULL, or why it could not be measured.
 * Fills run->report. */
static const char *run_backfill(run_t *run)
{
    const opts_t *o = &run->o;
    const char *broken = NULL;
    json_t *rep = run->report;
    double deadline = sl_mono_ms() + 1000.0 * o->timeout_s - 15000; /* room to stop and write */

    run->sim_port = h_free_port();
    run->metrics_port = h_free_port();
    run->admin_port = h_free_port();
    printf("backfill: %d jobs, minute %d ms, TPM %lld (sum counting), provider TTFT %d ms, crash"
           " at %.0f %% of the results; files in %s\n",
           o->njobs, o->minute_ms, o->tpm, o->ttft_ms, 100 * o->crash_at, h_tmpdir());
    fflush(stdout);
    if (write_input(run) != 0)
        return "cannot write the input file";
    write_configs(run);
    char path[4096];
    snprintf(path, sizeof path, "%s/results-1.jsonl", h_tmpdir());
    run->out1 = strdup(path);
    snprintf(path, sizeof path, "%s/results-2.jsonl", h_tmpdir());
    run->out2 = strdup(path);
    double at_limit_s =
        o->tpm > 0 ? (double)run->expected_tokens / (double)o->tpm * o->minute_ms / 1000.0 : 0;
    if (o->tpm > 0)
        printf("  the file asks for %lld tokens: %.1f s at the limit (%.0f jobs/s)\n",
               (long long)run->expected_tokens, at_limit_s, o->njobs / at_limit_s);
    else
        printf("  the file asks for %lld tokens; no limit\n", (long long)run->expected_tokens);

    double up0 = sl_mono_ms();
    h_stack_up(&run->st, run->cfg, run->sim_cfg, run->sim_port);
    double stack_up_ms = sl_mono_ms() - up0;
    h_stack_t *st = &run->st;

    /* ---- phase 1: submit and follow until the crash ---- */
    run->t0_ms = h_wall_ms();
    double mono0 = sl_mono_ms();
    pid_t cli = spawn_submit(run, run->out1, "submit-1");
    long crash_lines = o->crash_at > 0 ? (long)ceil(o->crash_at * o->njobs) : -1;
    long lines1 = 0, off1 = 0;
    double first1_ms = NAN, next_sample = 0;
    int cli1_status = -1;
    long cli1_rss_kb = -1, cli1_hwm_kb = -1;
    int crashed = 0;
    long rss_before[NPROC], rss_after[NPROC];
    double cpu_before[NPROC], cpu_after[NPROC];
    double m_life1[NMETRIC] = {-1, -1, -1, -1}, m_life2[NMETRIC] = {-1, -1, -1, -1};
    for (int i = 0; i < NPROC; i++) {
        rss_before[i] = rss_after[i] = -1;
        cpu_before[i] = cpu_after[i] = -1;
    }
    int64_t inflight_pre = -1, admitted_pre = -1, admitted_post = -1;
    double crash_ms = NAN;
    int crash_sample = -1;
    while (broken == NULL) {
        double now = sl_mono_ms() - mono0;
        if (now >= next_sample) {
            take_sample(run);
            next_sample += SAMPLE_MS;
            long hwm = h_peak_rss_kb(cli);
            cli1_hwm_kb = hwm > cli1_hwm_kb ? hwm : cli1_hwm_kb;
        }
        long got = count_new_lines(run->out1, &off1);
        if (got > 0 && lines1 == 0)
            first1_ms = h_wall_ms() - run->t0_ms;
        lines1 += got;
        if (crash_lines > 0 && lines1 >= crash_lines)
            break;
        if (reap(cli, &cli1_status, &cli1_rss_kb)) {
            cli = -1;
            if (crash_lines > 0)
                broken = "the first submit ended before the crash point";
            break;
        }
        if (sl_mono_ms() > deadline)
            broken = "timeout before the crash point";
        usleep(20 * 1000);
    }

    int cli2_status = -1;
    long cli2_rss_kb = -1;
    double restart_ms = NAN, first2_ms = NAN, first_admit2_ms = NAN, end_ms = NAN;
    long lines2 = 0;
    if (broken == NULL && crash_lines > 0) {
        /* ---- the crash ---- */
        pid_t procs[NPROC] = {st->sched, st->disp, st->ingest, st->kafka, st->sim, cli};
        for (int i = 0; i < NPROC; i++)
            proc_figures(procs[i], &rss_before[i], &cpu_before[i]);
        cli1_hwm_kb = rss_before[P_CLI] > cli1_hwm_kb ? rss_before[P_CLI] : cli1_hwm_kb;
        rss_before[P_CLI] = cli1_hwm_kb;
        scrape_metrics(run, m_life1);
        b_sim_stats_t s = {0}; /* all 0 when the simulator does not answer */
        b_sim_stats_read(st->stats_url, &s);
        inflight_pre = s.in_flight;
        admitted_pre = s.admitted;
        /* The four at one instant: the signals go out back to back, then we reap. */
        kill(st->sched, SIGKILL);
        kill(st->disp, SIGKILL);
        kill(st->ingest, SIGKILL);
        kill(cli, SIGKILL);
        crash_ms = h_wall_ms() - run->t0_ms;
        h_stop(st->sched, SIGKILL, 5000);
        h_stop(st->disp, SIGKILL, 5000);
        h_stop(st->ingest, SIGKILL, 5000);
        h_stop(cli, SIGKILL, 5000);
        crashed = 1;
        lines1 += count_new_lines(run->out1, &off1);
        /* Calls sent just before the kill may reach the simulator just after: wait a little
         * and count them too, as calls that were in flight at the crash. */
        usleep(300 * 1000);
        take_sample(run);
        crash_sample = run->nsamples - 1;
        admitted_post = run->samples[crash_sample].sim.admitted;
        printf("  crash at %.1f s: %ld results in, %lld calls in flight at the simulator,"
               " %lld more arrived after the kill\n",
               crash_ms / 1000.0, lines1, (long long)inflight_pre,
               (long long)(admitted_post - admitted_pre));
        fflush(stdout);

        /* ---- the restart: same config, store and broker; the same command again ---- */
        st->sched = h_spawn("sluice-scheduler", "scheduler", run->cfg, NULL);
        st->ingest = h_spawn("sluice-ingest", "ingest", run->cfg, NULL);
        st->disp = h_spawn("sluice-dispatcher", "dispatcher", run->cfg, NULL);
        restart_ms = h_wall_ms() - run->t0_ms;
        cli = spawn_submit(run, run->out2, "submit-2");
        long off2 = 0, cli2_hwm_kb = -1;
        while (broken == NULL) {
            double now = sl_mono_ms() - mono0;
            if (now >= next_sample) {
                take_sample(run);
                next_sample = now + SAMPLE_MS;
                long hwm = h_peak_rss_kb(cli);
                cli2_hwm_kb = hwm > cli2_hwm_kb ? hwm : cli2_hwm_kb;
                const sample_t *smp = &run->samples[run->nsamples - 1];
                if (isnan(first_admit2_ms) && smp->sim.admitted > admitted_post)
                    first_admit2_ms = smp->t_ms;
            }
            long got = count_new_lines(run->out2, &off2);
            if (got > 0 && lines2 == 0)
                first2_ms = h_wall_ms() - run->t0_ms;
            lines2 += got;
            if (reap(cli, &cli2_status, &cli2_rss_kb)) {
                cli = -1;
                end_ms = h_wall_ms() - run->t0_ms;
                break;
            }
            if (sl_mono_ms() > deadline)
                broken = "timeout: the second submit did not get every result";
            usleep(20 * 1000);
        }
        lines2 += count_new_lines(run->out2, &off2);
        if (cli2_rss_kb < cli2_hwm_kb)
            cli2_rss_kb = cli2_hwm_kb;
    } else if (broken == NULL) {
        end_ms = h_wall_ms() - run->t0_ms; /* no crash: the first submit is the whole run */
    }
    if (cli > 0) {
        h_stop(cli, SIGKILL, 5000);
        cli = -1;
    }

    /* ---- after the run: the last figures while everything still runs ---- */
    usleep(500 * 1000); /* late calls (re-sent after a lease) show at the simulator */
    take_sample(run);
    pid_t procs[NPROC] = {st->sched, st->disp, st->ingest, st->kafka, st->sim, -1};
    for (int i = 0; i < NPROC; i++)
        proc_figures(procs[i], &rss_after[i], &cpu_after[i]);
    rss_after[P_CLI] = crashed ? cli2_rss_kb : cli1_rss_kb;
    if (!crashed)
        rss_before[P_CLI] = -1;
    scrape_metrics(run, m_life2);
    b_sim_stats_t final_stats = {0};
    int final_answered = b_sim_stats_read(st->stats_url, &final_stats) == 0;
    int unclean = h_stack_down(st);
    int64_t open_jobs = h_sql_count(run->db, "SELECT COUNT(*) FROM jobs WHERE state <> 'done'");
    int64_t stored_jobs = h_sql_count(run->db, "SELECT COUNT(*) FROM jobs");
    int64_t open_res =
        h_sql_count(run->db, "SELECT COUNT(*) FROM reservations WHERE state = 'open'");
    if (broken == NULL && !final_answered)
        broken = "the simulator's /stats did not answer at the end";

    /* ---- verdict from the outputs ---- */
    run->st1 = calloc((size_t)o->njobs, 1);
    run->st2 = calloc((size_t)o->njobs, 1);
    run->sig1 = calloc((size_t)o->njobs, sizeof *run->sig1);
    tally_t t1, t2;
    memset(&t2, 0, sizeof t2);
    if (run->st1 == NULL || run->st2 == NULL || run->sig1 == NULL)
        return "out of memory";
    if (read_output(run, run->out1, run->st1, run->sig1, 0, &t1) != 0 && broken == NULL)
        broken = "cannot read the first output";
    const tally_t *fin = &t1;
    uint8_t *fin_st = run->st1;
    if (crashed) {
        if (read_output(run, run->out2, run->st2, run->sig1, 1, &t2) != 0 && broken == NULL)
            broken = "cannot read the second output";
        fin = &t2;
        fin_st = run->st2;
    }
    long no_result = 0;
    for (int i = 0; i < o->njobs; i++)
        no_result += fin_st[i] == ST_NONE;
    if (broken == NULL && fin->ours == 0)
        broken = "no result came";

    /* Through the batch API, a line that succeeded is the call; one of a job that had already
     * succeeded is a job executed twice. */
    int64_t admitted = final_stats.admitted + final_stats.batch_lines_ok;
    int64_t replayed = final_stats.replayed;
    int64_t refused = final_stats.refused;
    int64_t errors = final_stats.errors;
    int64_t tokens_charged = final_stats.tokens;
    int64_t inflight_at_crash = crashed ? inflight_pre + (admitted_post - admitted_pre) : 0;
    int64_t twice = admitted - o->njobs;

    /* Utilisation in the steady parts: before the crash from 5 % of the jobs admitted to the
     * crash; after it from 5 % more admitted than at the crash to 97 % of all. */
    int n = run->nsamples;
    int p1_end = crashed ? crash_sample : n;
    int64_t five = o->njobs / 20;
    int u1_from = sample_reaching(run, 0, p1_end, five);
    int u1_to = crashed ? crash_sample - 1 : sample_reaching(run, 0, n, o->njobs * 97 / 100);
    double util1 = utilisation(run, u1_from, u1_to);
    double util2 = NAN;
    if (crashed) {
        int u2_from = sample_reaching(run, crash_sample, n, admitted_post + five);
        int u2_to = sample_reaching(run, crash_sample, n, o->njobs * 97 / 100);
        util2 = utilisation(run, u2_from, u2_to);
    }

    double total_ms = end_ms;
    double before_ms = crashed ? crash_ms : NAN;
    double recovery_ms = crashed ? first2_ms - restart_ms : NAN;
    double recovery_admit_ms = crashed ? first_admit2_ms - restart_ms : NAN;
    double after_ms = crashed ? end_ms - restart_ms : NAN;
    long done_before = crashed ? t1.ours : 0;
    double jps_all = 1000.0 * (double)fin->ours / total_ms;
    double jps_before = crashed ? 1000.0 * (double)t1.ours / crash_ms : NAN;
    double jps_after = crashed ? 1000.0 * (double)(o->njobs - done_before) / after_ms : NAN;

    double est[NMETRIC];
    for (int i = 0; i < NMETRIC; i++) {
        est[i] = (m_life1[i] > 0 ? m_life1[i] : 0) + (m_life2[i] > 0 ? m_life2[i] : 0);
        if (m_life1[i] < 0 && m_life2[i] < 0)
            est[i] = NAN;
    }

    /* Dispatches beyond one per job that got a result: leases that went stale or expired
     * before a dispatcher took them, calls re-sent after the crash, retries. */
    double resent = isfinite(est[M_DISPATCHED]) ? est[M_DISPATCHED] - (double)fin->ours : NAN;
    if (resent < 0)
        resent = 0;

    /* ---- the table ---- */
    char a[32], b[32], c[32], d[32];
    printf("\nbackfill: %d batch jobs from a file, crash at %.0f %% of the results, minute %d"
           " ms\n",
           o->njobs, 100 * o->crash_at, o->minute_ms);
    printf("  stack start                   %.1f s\n", stack_up_ms / 1000.0);
    fmt_ms(a, sizeof a, total_ms);
    fmt_ms(b, sizeof b, before_ms);
    fmt_ms(c, sizeof c, recovery_ms);
    fmt_ms(d, sizeof d, after_ms);
    printf("  wall time                     total %s | before the crash %s | restart -> first"
           " result %s | after the restart %s\n",
           a, b, c, d);
    fmt_ms(a, sizeof a, recovery_admit_ms);
    fmt_ms(b, sizeof b, first1_ms);
    printf("  restart -> first provider call %s (first result of the first run: %s)\n", a, b);
    printf("  at the limit the file takes   %.1f s\n", at_limit_s);
    if (crashed)
        printf("  jobs/s                        overall %.0f | before the crash %.0f | after the"
               " restart %.0f\n",
               jps_all, jps_before, jps_after);
    else
        printf("  jobs/s                        overall %.0f\n", jps_all);
    fmt_pct(a, sizeof a, util1);
    fmt_pct(b, sizeof b, util2);
    printf("  TPM utilisation (steady)      before the crash %s | after the restart %s\n", a, b);
    printf("  final results                 %ld/%d: succeeded %ld failed %ld rejected %ld"
           " expired %ld other %ld | no result %ld | duplicates in the output %ld\n",
           fin->ours, o->njobs, fin->by_status[ST_SUCCEEDED], fin->by_status[ST_FAILED],
           fin->by_status[ST_REJECTED], fin->by_status[ST_EXPIRED], fin->by_status[ST_OTHER],
           no_result, fin->duplicates);
    if (crashed)
        printf("  first run's output            %ld results (%ld torn lines); results that"
               " differ in the second run %ld\n",
               t1.ours, t1.unparsed, t2.changed);
    printf("  provider calls                admitted %lld (= N %+lld: jobs executed twice),"
           " replayed %lld, refused (429) %lld, errors %lld\n",
           (long long)admitted, (long long)twice, (long long)replayed, (long long)refused,
           (long long)errors);
    printf("  calls in flight at the crash  %lld\n", (long long)inflight_at_crash);
    printf("  cost                          $%.4f for %ld results, %ld by the batch API (%lld "
           "batches, %lld lines run twice); the same usage online $%.4f (%.1f %% saved)\n",
           fin->cost, fin->ours, fin->by_batch, (long long)final_stats.batches,
           (long long)final_stats.batch_lines_duplicate, fin->online_cost,
           fin->online_cost > 0 ? 100.0 * (1 - fin->cost / fin->online_cost) : 0.0);
    printf("  dispatches                    %.0f for %ld results: %.0f re-sent (%.2f %%)\n",
           est[M_DISPATCHED], fin->ours, resent,
           fin->ours > 0 ? 100.0 * resent / (double)fin->ours : NAN);
    printf("  tokens charged                %lld (the file asks for %lld)\n",
           (long long)tokens_charged, (long long)run->expected_tokens);
    if (isfinite(est[M_USED]) && est[M_USED] > 0)
        printf("  scheduler estimate            reserved %.0f, used %.0f (%.3fx), over %.0f,"
               " under %.0f\n",
               est[M_RESERVED], est[M_USED], est[M_RESERVED] / est[M_USED], est[M_OVER],
               est[M_UNDER]);
    if (crashed) {
        printf("  peak RSS before the crash MiB ");
        for (int i = 0; i < NPROC; i++)
            printf(" %s %.0f", proc_names[i], rss_before[i] / 1024.0);
        printf("\n");
    }
    printf("  peak RSS at the end MiB       ");
    for (int i = 0; i < NPROC; i++)
        printf(" %s %.0f", proc_names[i], rss_after[i] / 1024.0);
    printf("\n  store at the end              %lld jobs, %lld not done, %lld reservations"
           " open; %d processes did not stop cleanly\n",
           (long long)stored_jobs, (long long)open_jobs, (long long)open_res, unclean);

    /* ---- the report ---- */
    json_object_set_new(
        rep, "setup",
        json_pack("{s:i, s:i, s:f, s:I, s:s, s:i, s:i, s:[i,i], s:[i,i], s:I, s:f, s:i, s:s,"
                  " s:s, s:i, s:i}",
                  "jobs", o->njobs, "minute_ms", o->minute_ms, "crash_at", o->crash_at, "tpm",
                  (json_int_t)o->tpm, "tpm_counting", "sum", "slices_per_minute", SLICES_PER_MINUTE,
                  "lease_ms", LEASE_MS, "prompt_chars", PROMPT_CHARS_MIN, PROMPT_CHARS_MAX,
                  "max_tokens", MAX_TOKENS_MIN, MAX_TOKENS_MAX, "expected_tokens",
                  (json_int_t)run->expected_tokens, "at_limit_s", at_limit_s, "tenants", 1, "class",
                  "batch", "client", "sluice submit --file F --follow --out O", "timeout_s",
                  o->timeout_s, "ttft_ms", o->ttft_ms));
    json_object_set_new(
        rep, "cost",
        json_pack("{s:s, s:i, s:o, s:o, s:I, s:I, s:I}", "path",
                  o->batch_ms > 0 ? "batch" : "online", "batch_turnaround_ms", o->batch_ms, "usd",
                  b_jnum(fin->cost), "online_usd", b_jnum(fin->online_cost), "by_batch",
                  (json_int_t)fin->by_batch, "batches", (json_int_t)final_stats.batches,
                  "batch_lines_run_twice", (json_int_t)final_stats.batch_lines_duplicate));
    json_t *times = json_object();
    json_object_set_new(times, "stack_start_s", json_real(stack_up_ms / 1000.0));
    json_object_set_new(times, "total_s", b_jnum(total_ms / 1000.0));
    json_object_set_new(times, "first_result_s", b_jnum(first1_ms / 1000.0));
    json_object_set_new(times, "before_crash_s", b_jnum(before_ms / 1000.0));
    json_object_set_new(times, "recovery_first_result_s", b_jnum(recovery_ms / 1000.0));
    json_object_set_new(times, "recovery_first_call_s", b_jnum(recovery_admit_ms / 1000.0));
    json_object_set_new(times, "after_restart_s", b_jnum(after_ms / 1000.0));
    json_object_set_new(rep, "wall", times);
    json_object_set_new(rep, "jobs_per_s",
                        json_pack("{s:o, s:o, s:o}", "overall", b_jnum(jps_all), "before_crash",
                                  b_jnum(jps_before), "after_restart", b_jnum(jps_after)));
    json_object_set_new(
        rep, "tpm_utilisation",
        json_pack("{s:o, s:o}", "before_crash", b_jnum(util1), "after_restart", b_jnum(util2)));
    json_t *res = json_object();
    for (int i = ST_SUCCEEDED; i < NSTATUS; i++)
        json_object_set_new(res, status_names[i], json_integer(fin->by_status[i]));
    json_object_set_new(res, "jobs_with_final_result", json_integer(fin->ours));
    json_object_set_new(res, "jobs_without_result", json_integer(no_result));
    json_object_set_new(res, "duplicate_results_in_output", json_integer(fin->duplicates));
    json_object_set_new(res, "foreign_or_unparsed_lines",
                        json_integer(fin->foreign + fin->unparsed));
    json_object_set_new(res, "results_before_crash", json_integer(crashed ? t1.ours : -1));
    json_object_set_new(res, "torn_lines_first_output", json_integer(t1.unparsed));
    json_object_set_new(res, "results_changed_after_restart", json_integer(t2.changed));
    json_object_set_new(res, "submit_exit_status",
                        json_pack("[i,i]", crashed ? 128 + SIGKILL : cli1_status, cli2_status));
    json_object_set_new(rep, "results", res);
    json_object_set_new(
        rep, "provider",
        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "admitted", (json_int_t)admitted,
                  "replayed", (json_int_t)replayed, "refused_429", (json_int_t)refused, "errors",
                  (json_int_t)errors, "calls", (json_int_t)(admitted + replayed + refused),
                  "jobs_executed_twice", (json_int_t)twice, "in_flight_at_crash",
                  (json_int_t)inflight_at_crash, "tokens_charged", (json_int_t)tokens_charged));
    json_object_set_new(rep, "dispatches",
                        json_pack("{s:o, s:o, s:o}", "total", b_jnum(est[M_DISPATCHED]), "resent",
                                  b_jnum(resent), "resent_share",
                                  b_jnum(fin->ours > 0 ? resent / (double)fin->ours : NAN)));
    json_t *estj = json_object();
    for (int i = 0; i < NMETRIC; i++) {
        json_object_set_new(estj, metric_names[i],
                            json_pack("{s:o, s:o, s:o}", "life1", b_jnum(m_life1[i]), "life2",
                                      b_jnum(m_life2[i]), "sum", b_jnum(est[i])));
    }
    json_object_set_new(estj, "reserved_over_used",
                        b_jnum(est[M_USED] > 0 ? est[M_RESERVED] / est[M_USED] : NAN));
    json_object_set_new(rep, "scheduler_estimates", estj);
    json_object_set_new(
        rep, "peak_rss_kib",
        json_pack("{s:o, s:o}", "before_crash", rss_json(rss_before), "end", rss_json(rss_after)));
    json_object_set_new(rep, "cpu_s",
                        json_pack("{s:o, s:o}", "first_life", cpu_json(cpu_before),
                                  "end_cumulative_kafka_sim", cpu_json(cpu_after)));
    json_object_set_new(rep, "store",
                        json_pack("{s:I, s:I, s:I}", "jobs", (json_int_t)stored_jobs, "not_done",
                                  (json_int_t)open_jobs, "open_reservations",
                                  (json_int_t)open_res));
    json_object_set_new(rep, "processes_not_stopped_cleanly", json_integer(unclean));
    json_t *series = json_array();
    for (int i = 0; i < run->nsamples; i++) {
        const sample_t *smp = &run->samples[i];
        json_array_append_new(
            series, json_pack("[f,I,I,I,I]", smp->t_ms / 1000.0, (json_int_t)smp->sim.sim_ms,
                              (json_int_t)smp->sim.admitted, (json_int_t)smp->sim.tokens,
                              (json_int_t)smp->sched_rss_kb));
    }
    json_object_set_new(rep, "samples_t_s_sim_ms_admitted_tokens_sched_rss_kib", series);

    /* --check: the gate's conditions. */
    json_t *fails = json_array();
    if (no_result > 0)
        json_array_append_new(fails, json_string("a job has no final result"));
    if (open_jobs > 0)
        json_array_append_new(fails, json_string("the store has jobs not done"));
    if (twice > inflight_at_crash)
        json_array_append_new(fails, json_string("more jobs executed twice than calls in flight"));
    if (refused > 0)
        json_array_append_new(fails, json_string("the simulator sent 429s"));
    if (final_stats.batch_lines_duplicate > 0)
        json_array_append_new(fails, json_string("a batch line of a job that had succeeded ran"));
    if (t2.changed > 0)
        json_array_append_new(fails, json_string("a finished job's result changed"));
    if (fin->duplicates > 0)
        json_array_append_new(fails, json_string("a duplicate final result"));
    if (unclean > 0)
        json_array_append_new(fails, json_string("a process did not stop cleanly"));
    json_object_set_new(rep, "check_failures", fails);
    return broken;
}

/* ---- the watchdog: the run in a child process group, so it can never hang ---- */

static int write_report(json_t *rep)
{
    mkdir("bench/results", 0755);
    char path[256];
    snprintf(path, sizeof path, "bench/results/backfill-%lld.json", (long long)time(NULL));
    if (json_dump_file(rep, path, JSON_INDENT(1)) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        return -1;
    }
    printf("  written to %s\n", path);
    return 0;
}

/* The child: runs and reports; exit 0, 1 (broken, or --check failed). */
static int child_main(const opts_t *o)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows as it happens, even in a pipe */
    sl_crypto_init();
    run_t run;
    memset(&run, 0, sizeof run);
    run.o = *o;
    run.samples = calloc(MAX_SAMPLES, sizeof *run.samples);
    run.report = json_object();
    const char *broken = run.samples != NULL ? run_backfill(&run) : "out of memory";
    json_t *rep = run.report;
    json_object_set_new(rep, "benchmark", json_string("backfill"));
    json_object_set_new(rep, "status", json_string(broken == NULL ? "ok" : "broken"));
    json_object_set_new(rep, "reason", broken != NULL ? json_string(broken) : json_null());
    json_object_set_new(rep, "tmpdir", json_string(h_tmpdir()));
    size_t nfail = json_array_size(json_object_get(rep, "check_failures"));
    if (broken != NULL)
        printf("  BROKEN: %s\n", broken);
    for (size_t i = 0; i < nfail; i++)
        printf("  %s: %s\n", o->check ? "CHECK FAILED" : "off target",
               json_string_value(json_array_get(json_object_get(rep, "check_failures"), i)));
    write_report(rep);
    json_decref(rep);
    int rc = broken != NULL || (o->check && nfail > 0) ? 1 : 0;
    h_cleanup(rc != 0 || o->keep);
    free(run.samples);
    free(run.st1);
    free(run.st2);
    free(run.sig1);
    free(run.sim_cfg);
    free(run.cfg);
    free(run.db);
    free(run.input);
    free(run.out1);
    free(run.out2);
    return rc;
}

static void print_usage(FILE *f)
{
    fprintf(f, usage, DEFAULT_TPM, DEFAULT_JOBS_PER_S);
}

/* Reads the options into o. Returns 0, or what b_opt_parse returns: 1 when --help was
 * answered, 2 when an option was refused (said on stderr). */
static int parse_options(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.njobs = 100000,
                  .minute_ms = DEFAULT_MINUTE_MS,
                  .crash_at = 0.5,
                  .tpm = -1,
                  .timeout_s = 0,
                  .ttft_ms = 20,
                  .check = 0,
                  .keep = 0};
    int quick = 0;
    const b_opt_t options[] = {
        {"jobs", B_OPT_INT, &o->njobs, 100, 10000000},
        {"quick", B_OPT_FLAG, &quick, 0, 0},
        {"minute-ms", B_OPT_INT, &o->minute_ms, 100, 3600000},
        {"crash-at", B_OPT_NUM, &o->crash_at, 0, 1},
        {"tpm", B_OPT_LONG, &o->tpm, 0, 1e12},
        {"ttft-ms", B_OPT_INT, &o->ttft_ms, 0, 60000},
        {"batch-api", B_OPT_INT, &o->batch_ms, 0, 3600000},
        {"timeout", B_OPT_INT, &o->timeout_s, 20, 86400},
        {"check", B_OPT_FLAG, &o->check, 0, 0},
        {"keep", B_OPT_FLAG, &o->keep, 0, 0},
        {NULL, B_OPT_FLAG, NULL, 0, 0},
    };
    int rc = b_opt_parse("backfill", argc, argv, options, print_usage);
    if (rc != 0)
        return rc;
    if (o->crash_at >= 1) {
        char v[32];
        snprintf(v, sizeof v, "%g", o->crash_at);
        return b_opt_refuse("backfill", "--crash-at", v, "a fraction below 1");
    }
    if (o->tpm > 0 && o->tpm < 1000) {
        char v[32];
        snprintf(v, sizeof v, "%lld", o->tpm);
        return b_opt_refuse("backfill", "--tpm", v, "0 (no limit) or 1000 and more");
    }
    if (quick)
        o->njobs = 10000;
    if (o->tpm < 0)
        o->tpm = (long long)((double)DEFAULT_TPM * o->minute_ms / DEFAULT_MINUTE_MS + 0.5);
    if (o->timeout_s == 0)
        o->timeout_s = 60 + (int)(1.2 * o->njobs / 1000);
    return 0;
}

int main(int argc, char **argv)
{
    opts_t o;
    int parsed = parse_options(argc, argv, &o);
    if (parsed != 0)
        return parsed == 1 ? 0 : parsed;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        exit(child_main(&o));
    }
    setpgid(pid, pid); /* also here, so the group exists before we might signal it */
    b_child_group = pid;
    b_forward_signals(SIGKILL);
    double deadline = sl_mono_ms() + 1000.0 * o.timeout_s;
    int ws = 0, ended = 0;
    while (!ended && sl_mono_ms() < deadline) {
        pid_t r = waitpid(pid, &ws, WNOHANG);
        if (r == pid)
            ended = 1;
        else if (r < 0 && errno != EINTR)
            break;
        else
            usleep(100 * 1000);
    }
    const char *why = NULL;
    char buf[96];
    if (!ended) {
        why = "timeout: the run did not finish in time";
        kill(-pid, SIGKILL);
        waitpid(pid, &ws, 0);
    } else if (!WIFEXITED(ws) || WEXITSTATUS(ws) > 1) {
        /* The harness exits 2 when a stack does not start: stop what that stack left. */
        snprintf(buf, sizeof buf, "the run's process ended with status %d (stack did not start?)",
                 WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
        why = buf;
        kill(-pid, SIGKILL);
    }
    b_child_group = 0;
    if (why == NULL)
        return WEXITSTATUS(ws);
    printf("  BROKEN: %s\n", why);
    json_t *rep =
        json_pack("{s:s, s:s, s:s, s:{s:i, s:i, s:f, s:I, s:i}}", "benchmark", "backfill", "status",
                  "broken", "reason", why, "setup", "jobs", o.njobs, "minute_ms", o.minute_ms,
                  "crash_at", o.crash_at, "tpm", (json_int_t)o.tpm, "timeout_s", o.timeout_s);
    write_report(rep);
    json_decref(rep);
    return 1;
}
