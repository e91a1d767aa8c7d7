/* bench/compare - sluice against the client-side baseline (bench/baseline, the OpenAI cookbook's
 * api_request_parallel_processor algorithm), side by side: the same simulated deployment, the
 * same jobs with the same arrival schedule and tenants, each system on a fresh simulator (and
 * sluice on a fresh stack), with shortened minutes.
 *
 * The idea to hold first: everything is measured from outside both systems, the same way. The
 * simulator's /stats, sampled through the run, gives what the provider admitted and refused;
 * each job's submit, start (sluice: its dispatch; the baseline: the start of its last attempt),
 * end and attempts give queue wait, latency and retries. Neither system reports on itself.
 *
 * Scenarios (one deployment whose TPM, counting prompt + max_tokens, is the binding limit):
 *   steady    4 tenants, Poisson arrivals at 1.25x what the limit serves, all the measurement;
 *   burst     4 tenants at 0.4x, and 10x that for 10 s scaled (a sixth of a minute) at 50 %;
 *   noisy     a batch tenant submits at once 100x the volume of each of 3 interactive tenants;
 *   storm     steady, with the simulator injecting 429s into 30 % of admitted requests (half of
 *             them with a Retry-After of 1 s scaled);
 *   storm503  steady, with 503s for 30 % of requests;
 *   longctx   steady with prompts of 8,000 - 20,000 tokens (3 - 4 fill a provider slice);
 *   maxout    steady with max_tokens 3,000 - 4,000 and replies that use most of it, slowly;
 *   daily     a daily request quota (the provider's RPD) that runs out halfway;
 *   stream    streamed jobs at 0.9x, 15 % of streams cut by the provider, 10 % of clients
 *             giving up (a cancel) soon after they submit; sluice only.
 * Systems: sluice, and the baseline at 50 %, 75 % and 100 % of the real limits, one client
 * process per tenant; "share" gives each client its share of the limits (limit x fraction /
 * tenants, the careful static split), "full" gives each the whole limit x fraction (what each
 * team reads on the provider's page).
 *
 * Each run happens in a child process (its own process group and temporary directory, as in
 * bench/scenarios); each scenario is written to bench/results/compare-<scenario>-<unix>.json,
 * with a PNG of admitted tokens per second and queue wait per class over time when gnuplot is
 * installed. The runner measures; it does not gate: it exits 1 only when a run could not be
 * measured. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "group.h"
#include "harness.h"
#include "result.h"
#include "sign.h"
#include "stats.h"
#include "util.h"

enum {
    DEFAULT_MINUTE_MS = 3000,
    TPM = 300000,            /* the binding limit */
    RPM = 600000,            /* far from binding */
    PROMPT_CHARS_MIN = 2800, /* by default 700 - 900 prompt tokens at the simulator's 4
                              * characters each */
    PROMPT_CHARS_SPAN = 800,
    PROMPT_CHARS_CAP = 100000, /* the longest prompt a scenario may ask for */
    MAX_TOKENS_MIN = 100,      /* by default max_tokens 100 - 160 */
    MAX_TOKENS_SPAN = 60,
    INTERACTIVE_DEADLINE_MS = 5000,
    WARM_JOBS = 10,
    MAX_TENANTS = 8,
    MAX_SYSTEMS = 8,
    NCLASSES = 3,
    RESULT_CAP = 4 << 20, /* the most a child may report, in bytes */
    MAX_JOBS = 200000,    /* a bound on the workload, so memory stays bounded */
};

/* The provider's enforcement slices a minute (--slices), for the simulator and sluice alike. */
static int slices_per_minute = 10;

/* The storm's share of injected 429s that carry a Retry-After (--storm-retry-after-share). */
static double storm_retry_after_share = 0.5;

static const char *const class_names[NCLASSES] = {"interactive", "standard", "batch"};

/* What the simulator injects (scenario_t.fault). */
enum { FAULT_NONE = 0, FAULT_429, FAULT_503, FAULT_CUT };

typedef struct {
    const char *name;
    int cls;           /* index into class_names */
    double rate;       /* Poisson arrivals, as a multiple of the jobs per second the limit serves */
    double burst_rate; /* the same during the burst window, instead of rate */
    double backlog;    /* jobs submitted at 0, as a multiple of what the limit serves in the
                        * whole measurement */
} tenant_spec_t;

typedef struct {
    const char *name;
    const char *what;
    double measure_min, quick_measure_min; /* measurement, in minutes */
    int ntenants;
    tenant_spec_t tenants[MAX_TENANTS];
    int fault;            /* FAULT_*: what the simulator injects */
    double burst_at;      /* start of the burst window, as a fraction of the measurement */
    double burst_minutes; /* its length */
    int jain_from;        /* Jain's index is over tenants[jain_from..]: those of equal demand */
    /* The jobs and the provider; 0 means the default of the scenarios above. */
    int prompt_min, prompt_span; /* prompt characters */
    int maxtok_min, maxtok_span; /* max_tokens */
    int output_min, output_max;  /* the simulator's reply length (20 - 200) */
    double ms_per_token;         /* the simulator's generation time (0.2 ms a token) */
    double grace_min;            /* time after the stop for the calls in flight (a fifth) */
    double rpd_share;            /* a daily request quota of this share of the jobs (0: none) */
    int stream;                  /* every job asks for a streamed answer */
    double cancel_share; /* share of jobs whose client gives up: a cancel 0 - 0.2 min later */
    int sluice_only;     /* the baseline has no counterpart (it does not stream) */
} scenario_t;

#define STEADY_TENANT(n, r)                                                                        \
    {                                                                                              \
        .name = n, .cls = 1, .rate = r                                                             \
    }
/* Four standard tenants a - d whose arrivals add up to total x what the limit serves. */
#define FOUR_STEADY_TENANTS(total)                                                                 \
    .ntenants = 4, .tenants = {STEADY_TENANT("a", (total) / 4), STEADY_TENANT("b", (total) / 4),   \
                               STEADY_TENANT("c", (total) / 4), STEADY_TENANT("d", (total) / 4)}
#define BURST_TENANT(n)                                                                            \
    {                                                                                              \
        .name = n, .cls = 1, .rate = 0.4 / 4, .burst_rate = 4.0 / 4                                \
    }

static const scenario_t scenarios[] = {
    {.name = "steady",
     .what = "4 tenants, arrivals at 1.25x the binding limit all the time",
     .measure_min = 7,
     .quick_measure_min = 3,
     FOUR_STEADY_TENANTS(1.25)},
    {.name = "burst",
     .what = "4 tenants at 0.4x the limit, 10x that for a sixth of a minute (10 s scaled)",
     .measure_min = 7,
     .quick_measure_min = 3,
     .ntenants = 4,
     .tenants = {BURST_TENANT("a"), BURST_TENANT("b"), BURST_TENANT("c"), BURST_TENANT("d")},
     .burst_at = 0.5,
     .burst_minutes = 10.0 / 60.0},
    {.name = "noisy",
     .what = "a batch tenant with 100x the volume of each of 3 interactive tenants",
     .measure_min = 7,
     .quick_measure_min = 3,
     .ntenants = 4,
     /* 3 % of the limit each (3 jobs/s at 3-second minutes), and the batch tenant 100x one
      * interactive tenant's volume (3x what the limit serves in the measurement), at once. */
     .tenants = {{.name = "bulk", .cls = 2, .backlog = 3.0},
                 {.name = "i1", .cls = 0, .rate = 0.03},
                 {.name = "i2", .cls = 0, .rate = 0.03},
                 {.name = "i3", .cls = 0, .rate = 0.03}},
     .jain_from = 1},
    {.name = "storm",
     .what = "steady, and 30 % of admitted requests get a 429 (half with Retry-After)",
     .measure_min = 7,
     .quick_measure_min = 3,
     FOUR_STEADY_TENANTS(1.25),
     .fault = FAULT_429},
    {.name = "storm503",
     .what = "steady, and 30 % of requests get a 503 (provider overloaded)",
     .measure_min = 7,
     .quick_measure_min = 3,
     FOUR_STEADY_TENANTS(1.25),
     .fault = FAULT_503},
    {.name = "longctx",
     .what = "steady with prompts of 8,000 - 20,000 tokens (3 - 4 fill a provider slice)",
     .measure_min = 7,
     .quick_measure_min = 3,
     FOUR_STEADY_TENANTS(1.25),
     .prompt_min = 32000,
     .prompt_span = 48000,
     .maxtok_min = 500,
     .maxtok_span = 500},
    {.name = "maxout",
     .what = "steady with max_tokens 3,000 - 4,000 and replies of 1,500 - 4,000 tokens",
     .measure_min = 7,
     .quick_measure_min = 3,
     FOUR_STEADY_TENANTS(1.25),
     .prompt_min = 400,
     .prompt_span = 400,
     .maxtok_min = 3000,
     .maxtok_span = 1000,
     .output_min = 1500,
     .output_max = 4000,
     /* 25 tokens a second at real minutes: a 4,000-token reply takes 2 s here (160 s real). */
     .ms_per_token = 0.5,
     .grace_min = 1.0},
    {.name = "daily",
     .what = "4 tenants at 0.8x the limit; the provider's daily request quota runs out halfway",
     .measure_min = 7,
     .quick_measure_min = 3,
     FOUR_STEADY_TENANTS(0.8),
     .rpd_share = 0.5},
    {.name = "stream",
     .what = "streamed jobs at 0.9x; 15 % of streams cut by the provider, 10 % of clients "
             "give up",
     .measure_min = 7,
     .quick_measure_min = 3,
     FOUR_STEADY_TENANTS(0.9),
     .fault = FAULT_CUT,
     .stream = 1,
     .cancel_share = 0.1,
     .sluice_only = 1},
};
enum { NSCENARIOS = sizeof scenarios / sizeof scenarios[0] };

typedef struct {
    int baseline;    /* 0: sluice */
    double fraction; /* of the real limits the baseline's clients are given */
    int full;        /* each client gets limit x fraction (else limit x fraction / tenants) */
    char label[32];
} system_t;

/* One job of the workload, and what became of it in one run. Times are milliseconds after the
 * start of the measurement; -1 when it did not happen. */
typedef struct {
    int tenant;
    int prompt_chars, max_tokens;
    double due_ms;
    double cancel_after_ms; /* the client gives up this long after its submit; -1: it does not */
    double submit_ms, start_ms, end_ms;
    b_status_t status;
    int attempts;
    int cancel_sent;      /* its client sent a cancel */
    int64_t usage_tokens; /* prompt + completion */
    int64_t usage_input;  /* prompt, as the provider counted it */
    int64_t est_tokens;   /* the baseline's estimate for one attempt */
    char *job_id;         /* sluice's id for it (streamed scenarios only, to match chunks) */
} job_t;

/* What the runner saw on sluice.stream for one job id. */
typedef struct {
    double first_ms; /* first chunk received, after the start of the measurement */
    int chunks;      /* every chunk of every attempt */
    int cut;         /* attempts that ended with a done chunk without finish_reason */
    int finished;    /* attempts that ended with a finish_reason */
} stream_seen_t;

/* One /stats sample of the simulator. */
typedef struct {
    double t_ms;   /* after the start of the measurement (wall clock) */
    double sim_ms; /* the simulator's clock */
    int64_t tokens, admitted, refused, fault_429, fault_503, errors, replayed, dropped;
} sample_t;

typedef struct {
    const scenario_t *sc;
    const system_t *sys;
    int quick;
    double minute_ms, measure_ms, grace_ms, sample_ms;
    double win0_ms, win1_ms; /* the steady window of the measurement */
    job_t *jobs;
    int njobs;
    sample_t *samples;
    int nsamples, samples_cap;
    double t0_wall;   /* wall clock at the start of the measurement */
    int metrics_port; /* the scheduler's /metrics (sluice) */
    int warm_done, duplicates;
    json_t *extra;      /* per-system details (client summaries, RSS) */
    json_t *reasons;    /* error reasons of the jobs that did not succeed, counted */
    sl_hmap_t *streams; /* job id -> stream_seen_t (streamed scenarios) */
    int stream_bad;     /* chunks that did not parse */
} run_t;

/* ---- small helpers ---- */

static double jget(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static double limit_tokens_per_ms(const run_t *run)
{
    return (double)TPM / run->minute_ms;
}

/* The scenario with its defaults filled in. */
static scenario_t with_defaults(const scenario_t *sc)
{
    scenario_t e = *sc;
    if (e.prompt_min == 0) {
        e.prompt_min = PROMPT_CHARS_MIN;
        e.prompt_span = PROMPT_CHARS_SPAN;
    }
    if (e.maxtok_min == 0) {
        e.maxtok_min = MAX_TOKENS_MIN;
        e.maxtok_span = MAX_TOKENS_SPAN;
    }
    if (e.output_max == 0) {
        e.output_min = 20;
        e.output_max = 200;
    }
    if (e.ms_per_token == 0)
        e.ms_per_token = 0.2;
    if (e.grace_min == 0)
        e.grace_min = 0.2;
    return e;
}

/* The average job's cost in TPM (prompt + "Job jNNNNNNN: " + max_tokens): sizes the arrival
 * rates, which are given as multiples of what the limit serves. */
static double avg_job_tokens(const scenario_t *sc)
{
    return (sc->prompt_min + sc->prompt_span / 2.0 + 14) / 4.0 + sc->maxtok_min +
           sc->maxtok_span / 2.0;
}

/* ---- the workload ---- */

static int cmp_due(const void *a, const void *b)
{
    const job_t *x = a, *y = b;
    if (x->due_ms != y->due_ms)
        return x->due_ms < y->due_ms ? -1 : 1;
    /* Same time (a backlog): keep the order they were made in (round-robin over tenants). */
    return x->submit_ms < y->submit_ms ? -1 : x->submit_ms > y->submit_ms;
}

/* Makes every job of the scenario, sorted by due time; the same for every system. */
static int make_jobs(run_t *run)
{
    const scenario_t *sc = run->sc;
    double jobs_per_ms = (double)TPM / avg_job_tokens(sc) / run->minute_ms;
    double burst0 = sc->burst_at * run->measure_ms;
    double burst1 = burst0 + sc->burst_minutes * run->minute_ms;
    double cap_d = 16;
    int backlog[MAX_TENANTS];
    for (int i = 0; i < sc->ntenants; i++) {
        const tenant_spec_t *t = &sc->tenants[i];
        backlog[i] = (int)ceil(t->backlog * jobs_per_ms * run->measure_ms);
        double rate = fmax(t->rate, t->burst_rate);
        cap_d += backlog[i] + 2.0 * rate * jobs_per_ms * run->measure_ms + 64;
    }
    if (cap_d > MAX_JOBS) {
        fprintf(stderr, "compare: the workload would exceed %d jobs\n", MAX_JOBS);
        return -1;
    }
    int cap = (int)cap_d;
    run->jobs = calloc((size_t)cap, sizeof *run->jobs);
    if (run->jobs == NULL)
        return -1;
    int n = 0;
    /* Backlogs first, round-robin over the tenants; submit_ms holds the making order until
     * the sort. */
    for (int k = 0;; k++) {
        int any = 0;
        for (int i = 0; i < sc->ntenants && n < cap; i++) {
            if (k >= backlog[i])
                continue;
            any = 1;
            run->jobs[n] = (job_t){.tenant = i, .due_ms = 0, .submit_ms = n};
            n++;
        }
        if (!any)
            break;
    }
    /* Poisson arrivals per tenant; the rate changes inside the burst window (the draw at the
     * edge is redone from the edge, which keeps the process memoryless). */
    for (int i = 0; i < sc->ntenants; i++) {
        const tenant_spec_t *t = &sc->tenants[i];
        if (t->rate <= 0 && t->burst_rate <= 0)
            continue;
        double at = 0;
        while (n < cap) {
            int in_burst = t->burst_rate > 0 && at >= burst0 && at < burst1;
            double rate = (in_burst ? t->burst_rate : t->rate) * jobs_per_ms;
            double edge = at < burst0 ? burst0 : at < burst1 ? burst1 : INFINITY;
            if (t->burst_rate <= 0)
                edge = INFINITY;
            double next = rate > 0 ? at - log(1.0 - b_rng_uniform()) / rate : INFINITY;
            if (next >= edge) {
                at = edge;
                continue;
            }
            at = next;
            if (at >= run->measure_ms)
                break;
            run->jobs[n] = (job_t){.tenant = i, .due_ms = at, .submit_ms = n};
            n++;
        }
    }
    for (int i = 0; i < n; i++) {
        run->jobs[i].prompt_chars = sc->prompt_min + (int)(b_rng_uniform() * sc->prompt_span);
        run->jobs[i].max_tokens = sc->maxtok_min + (int)(b_rng_uniform() * sc->maxtok_span);
        run->jobs[i].cancel_after_ms = -1;
        if (sc->cancel_share > 0) {
            double give_up = b_rng_uniform(), after = b_rng_uniform();
            if (give_up < sc->cancel_share)
                run->jobs[i].cancel_after_ms = after * run->minute_ms * 0.2;
        }
    }
    qsort(run->jobs, (size_t)n, sizeof *run->jobs, cmp_due);
    for (int i = 0; i < n; i++) {
        job_t *job = &run->jobs[i];
        job->submit_ms = job->start_ms = job->end_ms = -1;
    }
    run->njobs = n;
    return 0;
}

static const char *filler(void)
{
    static char text[PROMPT_CHARS_CAP + 1];
    if (text[0] == '\0') {
        const char *words = "the quick brown fox jumps over the lazy dog while counting tokens ";
        size_t wl = strlen(words);
        for (size_t k = 0; k < sizeof text - 1; k++)
            text[k] = words[k % wl];
    }
    return text;
}

/* The chat completions body of job i (the same bytes for both systems). */
static int job_body(char *buf, size_t cap, const char *idem, int prompt_chars, int max_tokens,
                    int stream)
{
    return snprintf(buf, cap,
                    "{\"messages\": [{\"role\": \"user\", \"content\": \"Job %s: %.*s\"}],"
                    " \"max_tokens\": %d%s}",
                    idem, prompt_chars, filler(), max_tokens, stream ? ", \"stream\": true" : "");
}

/* ---- configs ---- */

static void api_key_of(const char *tenant, char *out, size_t cap)
{
    snprintf(out, cap, "sk-compare-%s", tenant);
}

/* The daily request quota of a run, or 0: a share of the workload, plus the warm-up jobs when
 * sluice runs (the baseline has none), so both get the same number of workload calls. */
static long rpd_of(const run_t *run)
{
    if (run->sc->rpd_share <= 0)
        return 0;
    return (long)(run->sc->rpd_share * run->njobs) + (run->sys->baseline ? 0 : WARM_JOBS);
}

/* Writes the simulator's config into the temporary directory; returns its path (caller frees). */
static char *write_sim_config(const run_t *run)
{
    const scenario_t *sc = run->sc;
    char faults[256] = "", rpd[64] = "";
    if (sc->fault == FAULT_429) {
        /* A Retry-After of 1 s, scaled like everything else to the shortened minute. */
        snprintf(faults, sizeof faults,
                 ", \"faults\": {\"rate_limit_share\": 0.3, \"retry_after_share\": %.3f,"
                 " \"retry_after_ms\": %.0f, \"seed\": 7}",
                 storm_retry_after_share, 1000.0 * run->minute_ms / 60000.0);
    } else if (sc->fault == FAULT_503) {
        snprintf(faults, sizeof faults, ", \"faults\": {\"overloaded_share\": 0.3, \"seed\": 7}");
    } else if (sc->fault == FAULT_CUT) {
        snprintf(faults, sizeof faults, ", \"faults\": {\"stream_cut_share\": 0.15, \"seed\": 7}");
    }
    if (rpd_of(run) > 0)
        snprintf(rpd, sizeof rpd, ", \"rpd\": %ld", rpd_of(run));
    char sim[1024];
    snprintf(
        sim, sizeof sim,
        "{\"minute_ms\": %.0f, \"deployments\": [{\"name\": \"pool\", \"model\": "
        "\"gpt-4o-mini\", \"rpm\": %d, \"tpm\": %d, \"tpm_counting\": \"sum\","
        " \"slices_per_minute\": %d, \"ttft_ms\": 20, \"ms_per_token\": %.3f,"
        " \"output_min\": %d, \"output_max\": %d, \"api_key\": \"compare-provider-key\"%s%s}]}",
        run->minute_ms, RPM, TPM, slices_per_minute, sc->ms_per_token, sc->output_min,
        sc->output_max, rpd, faults);
    return strdup(h_write("sim.json", sim));
}

/* Writes sluice's config (the scheduler's metrics on run->metrics_port, the other daemons' on
 * free ports, so runs side by side do not collide); returns its path (caller frees). */
static char *write_sluice_config(const run_t *run, int sim_port)
{
    const scenario_t *sc = run->sc;
    const char *dir = h_tmpdir();
    char *keyfile = strdup(h_write("provider.key", "compare-provider-key\n"));
    char tenants[2048] = "", keys[4096] = "";
    size_t tl = 0, kl = 0;
    for (int i = 0; i <= sc->ntenants; i++) {
        const char *name = i < sc->ntenants ? sc->tenants[i].name : "warm";
        char key[64], hex[65];
        api_key_of(name, key, sizeof key);
        h_key_hash_hex(key, hex);
        tl += (size_t)snprintf(tenants + tl, sizeof tenants - tl,
                               "%s{\"name\": \"%s\", \"weight\": 1}", i ? ", " : "", name);
        kl += (size_t)snprintf(keys + kl, sizeof keys - kl,
                               "%s{\"id\": \"k-%s\", \"tenant\": \"%s\", \"hash\": \"%s\"}",
                               i ? ", " : "", name, name, hex);
    }
    char rpd[64] = "";
    if (rpd_of(run) > 0)
        snprintf(rpd, sizeof rpd, ", \"rpd\": %ld", rpd_of(run));
    char cfg[8192];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %.0f,"
             " \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\", \"lease_ms\": 20000,"
             "               \"max_attempts\": 5, \"metrics_listen\": \"127.0.0.1:%d\","
             "               \"admin_listen\": \"\"},"
             " \"ingest\": {\"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"dispatcher\": {\"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"classes\": {\"interactive\": {\"deadline_ms\": %d, \"max_queue\": 100000},"
             "               \"standard\": {\"max_queue\": 1000000},"
             "               \"batch\": {\"max_queue\": 1000000}},"
             " \"deployments\": [{\"name\": \"pool\","
             "   \"base_url\": \"http://127.0.0.1:%d/pool/v1\", \"model\": \"gpt-4o-mini\","
             "   \"api_key_file\": \"%s\", \"limits\": {\"rpm\": %d, \"tpm\": %d%s},"
             "   \"tpm_counting\": \"sum\", \"slices_per_minute\": %d,"
             "   \"max_output_tokens\": 4096}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"pool\"]}],"
             " \"tenants\": [%s],"
             " \"keys\": [%s]}",
             run->minute_ms, dir, dir, run->metrics_port, h_free_port(), h_free_port(), dir, dir,
             INTERACTIVE_DEADLINE_MS, sim_port, keyfile, RPM, TPM, rpd, slices_per_minute, tenants,
             keys);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

/* ---- sampling the simulator ---- */

static int64_t total(json_t *stats, const char *field)
{
    return h_sim_total(stats, field);
}

/* Takes one /stats sample at t_ms; a simulator that does not answer leaves no sample. */
static void sample(run_t *run, const char *stats_url, double t_ms)
{
    if (run->nsamples >= run->samples_cap)
        return;
    json_t *s = h_http_json(stats_url);
    if (s == NULL)
        return;
    sample_t *smp = &run->samples[run->nsamples++];
    smp->t_ms = t_ms;
    smp->sim_ms = (double)json_integer_value(json_object_get(s, "now_ms"));
    smp->tokens = total(s, "tokens_charged");
    smp->admitted = total(s, "admitted");
    smp->refused = total(s, "refused");
    smp->fault_429 = total(s, "fault_429");
    smp->fault_503 = total(s, "fault_503");
    smp->errors = total(s, "errors");
    smp->replayed = total(s, "replayed");
    smp->dropped = total(s, "dropped");
    json_decref(s);
}

static int alloc_samples(run_t *run)
{
    run->samples_cap = (int)((run->measure_ms + run->grace_ms + 60000) / run->sample_ms) + 16;
    run->samples = calloc((size_t)run->samples_cap, sizeof *run->samples);
    return run->samples != NULL ? 0 : -1;
}

/* ---- sluice ---- */

static void count_reason(run_t *run, const char *status, const char *reason)
{
    char key[128];
    snprintf(key, sizeof key, "%s%s%s", status, reason != NULL ? " " : "",
             reason != NULL ? reason : "");
    json_t *v = json_object_get(run->reasons, key);
    json_object_set_new(run->reasons, key, json_integer(json_integer_value(v) + 1));
}

static void on_result(run_t *run, const rd_kafka_message_t *m)
{
    double now = h_wall_ms() - run->t0_wall;
    b_result_t r;
    if (m->err || b_result_parse(m->payload, m->len, &r) != 0)
        return;
    int i = b_job_index(r.idem, run->njobs);
    if (r.idem[0] == 'w') {
        run->warm_done++;
    } else if (i >= 0 && run->jobs[i].status != B_NONE) {
        run->duplicates++; /* delivery is at least once */
    } else if (i >= 0) {
        job_t *job = &run->jobs[i];
        job->status = b_status_parse(r.status);
        job->end_ms = now;
        job->usage_input = r.input;
        job->usage_tokens = r.input + r.output;
        if (job->status != B_SUCCEEDED)
            count_reason(run, r.status, r.reason);
        if (run->sc->stream && r.job_id != NULL)
            job->job_id = strdup(r.job_id);
        job->attempts = r.attempts;
        if (r.dispatch_ms >= 0)
            job->start_ms = r.dispatch_ms - run->t0_wall;
    }
    b_result_free(&r);
}

static void poll_results(rd_kafka_t *cons, run_t *run, int wait_ms)
{
    rd_kafka_message_t *m = rd_kafka_consumer_poll(cons, wait_ms);
    while (m != NULL) {
        on_result(run, m);
        rd_kafka_message_destroy(m);
        m = rd_kafka_consumer_poll(cons, 0);
    }
}

/* One chunk from sluice.stream: counted under its job id. */
static void on_chunk(run_t *run, const rd_kafka_message_t *m)
{
    double now = h_wall_ms() - run->t0_wall;
    json_t *c = m->err ? NULL : json_loadb(m->payload, m->len, 0, NULL);
    const char *job_id = json_string_value(json_object_get(c, "job_id"));
    if (job_id == NULL) {
        run->stream_bad++;
        json_decref(c);
        return;
    }
    stream_seen_t *seen = sl_hmap_get(run->streams, job_id);
    if (seen == NULL) {
        seen = calloc(1, sizeof *seen);
        if (seen == NULL || sl_hmap_put(run->streams, job_id, seen) != SL_OK) {
            free(seen);
            json_decref(c);
            return;
        }
        seen->first_ms = now;
    }
    seen->chunks++;
    if (json_is_true(json_object_get(c, "done"))) {
        if (json_is_string(json_object_get(c, "finish_reason")))
            seen->finished++;
        else
            seen->cut++;
    }
    json_decref(c);
}

static void poll_chunks(rd_kafka_t *cons, run_t *run)
{
    rd_kafka_message_t *m;
    while (cons != NULL && (m = rd_kafka_consumer_poll(cons, 0)) != NULL) {
        on_chunk(run, m);
        rd_kafka_message_destroy(m);
    }
}

static void free_seen(const char *key, void *value, void *arg)
{
    (void)key;
    (void)arg;
    free(value);
}

/* The client of job i gives up: a cancel request naming its idempotency key. */
static void produce_cancel(rd_kafka_t *prod, run_t *run, int i)
{
    char idem[32], key[64], msg[256];
    snprintf(idem, sizeof idem, "j%07d", i);
    api_key_of(run->sc->tenants[run->jobs[i].tenant].name, key, sizeof key);
    int len = snprintf(msg, sizeof msg, "{\"api_key\": \"%s\", \"cancel\": \"%s\"}", key, idem);
    run->jobs[i].cancel_sent = 1;
    h_produce(prod, "sluice.requests", idem, msg, (size_t)len);
}

static void produce_job(rd_kafka_t *prod, run_t *run, int i)
{
    static char body[PROMPT_CHARS_CAP + 512];
    static char msg[sizeof body + 512];
    job_t *job = &run->jobs[i];
    const tenant_spec_t *t = &run->sc->tenants[job->tenant];
    char idem[32], key[64];
    snprintf(idem, sizeof idem, "j%07d", i);
    api_key_of(t->name, key, sizeof key);
    job_body(body, sizeof body, idem, job->prompt_chars, job->max_tokens, run->sc->stream);
    int len = snprintf(msg, sizeof msg,
                       "{\"idempotency_key\": \"%s\", \"api_key\": \"%s\", \"route\": \"chat\","
                       " \"class\": \"%s\", \"request\": %s}",
                       idem, key, class_names[t->cls], body);
    job->submit_ms = h_wall_ms() - run->t0_wall;
    h_produce(prod, "sluice.requests", idem, msg, (size_t)len);
}

static void add_rss(json_t *rss, const char *name, long kb)
{
    json_object_set_new(rss, name, json_integer(kb));
}

static const job_t *cancel_sort_jobs;

static int cmp_cancel(const void *a, const void *b)
{
    const job_t *x = &cancel_sort_jobs[*(const int *)a], *y = &cancel_sort_jobs[*(const int *)b];
    double tx = x->due_ms + x->cancel_after_ms, ty = y->due_ms + y->cancel_after_ms;
    return tx < ty ? -1 : tx > ty;
}

/* The jobs whose clients give up, in the order of their cancels; *n gets their number. */
static int *cancel_order(const run_t *run, int *n)
{
    int *idx = malloc(((size_t)run->njobs + 1) * sizeof *idx);
    *n = 0;
    for (int i = 0; idx != NULL && i < run->njobs; i++) {
        if (run->jobs[i].cancel_after_ms >= 0 && run->jobs[i].due_ms < run->measure_ms)
            idx[(*n)++] = i;
    }
    cancel_sort_jobs = run->jobs;
    if (idx != NULL)
        qsort(idx, (size_t)*n, sizeof *idx, cmp_cancel);
    return idx;
}

/* What the scheduler says it reserved and settled, from its /metrics (before it stops). */
static void scrape_scheduler(run_t *run)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", run->metrics_port);
    char *text = h_http_text(url);
    if (text == NULL)
        return;
    static const char *const names[][2] = {
        {"provider_tokens_charged", "sluice_scheduler_provider_tokens_charged_total"},
        {"provider_tokens_kept", "sluice_scheduler_provider_tokens_kept_total"},
        {"tokens_reserved", "sluice_scheduler_tokens_reserved_total"},
        {"tokens_settled", "sluice_scheduler_tokens_used_total"},
        {"tokens_over_reserved", "sluice_scheduler_tokens_over_reserved_total"},
        {"tokens_under_reserved", "sluice_scheduler_tokens_under_reserved_total"},
        {"provider_429", "sluice_scheduler_provider_429_total"},
        {"provider_5xx", "sluice_scheduler_provider_unavailable_total"},
        {"cancelled", "sluice_scheduler_cancelled_total"},
        {"retried", "sluice_scheduler_retried_total"},
    };
    json_t *o = json_object();
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        json_object_set_new(o, names[k][0], b_jnum(b_metric_sum(text, names[k][1])));
    json_object_set_new(run->extra, "scheduler_metrics", o);
    free(text);
}

/* Runs the workload through a fresh sluice stack. Returns NULL, or why it could not measure. */
static const char *run_sluice(run_t *run)
{
    int sim_port = h_free_port();
    run->metrics_port = h_free_port();
    char *sim_cfg = write_sim_config(run);
    char *cfg = write_sluice_config(run, sim_port);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    rd_kafka_t *chunks =
        run->sc->stream ? h_consumer_from_start(st.bootstrap, "sluice.stream") : NULL;
    int ncancels = 0, next_cancel = 0;
    int *cancels = cancel_order(run, &ncancels);
    const char *broken = cancels == NULL ? "out of memory" : NULL;

    /* Warm-up: the measurement starts once every consumer group has settled. */
    static char msg[2048];
    for (int i = 0; i < WARM_JOBS; i++) {
        char idem[32], key[64], body[1024];
        snprintf(idem, sizeof idem, "w%03d", i);
        api_key_of("warm", key, sizeof key);
        job_body(body, sizeof body, idem, 400, 16, 0);
        int len = snprintf(msg, sizeof msg,
                           "{\"idempotency_key\": \"%s\", \"api_key\": \"%s\", \"route\": "
                           "\"chat\", \"class\": \"standard\", \"request\": %s}",
                           idem, key, body);
        h_produce(prod, "sluice.requests", idem, msg, (size_t)len);
    }
    rd_kafka_flush(prod, 10000);
    double until = sl_mono_ms() + 60000;
    while (run->warm_done < WARM_JOBS && sl_mono_ms() < until)
        poll_results(cons, run, 100);
    if (run->warm_done < WARM_JOBS)
        broken = "the warm-up jobs got no results within 60 s";
    /* Let the simulator's bucket fill again after the warm-up, as the baseline finds it. */
    usleep((useconds_t)(run->minute_ms / slices_per_minute * 1000));

    run->t0_wall = h_wall_ms();
    double mono0 = sl_mono_ms(), next_sample = 0;
    int next = 0;
    while (broken == NULL) {
        double elapsed = sl_mono_ms() - mono0;
        if (elapsed >= run->measure_ms + run->grace_ms)
            break;
        while (next < run->njobs && run->jobs[next].due_ms <= elapsed &&
               run->jobs[next].due_ms < run->measure_ms)
            produce_job(prod, run, next++);
        while (next_cancel < ncancels) {
            const job_t *job = &run->jobs[cancels[next_cancel]];
            if (job->submit_ms < 0 || job->due_ms + job->cancel_after_ms > elapsed)
                break;
            produce_cancel(prod, run, cancels[next_cancel++]);
        }
        rd_kafka_poll(prod, 0);
        poll_chunks(chunks, run);
        if (elapsed >= next_sample) {
            sample(run, st.stats_url, h_wall_ms() - run->t0_wall);
            next_sample += run->sample_ms;
        }
        double now = sl_mono_ms() - mono0;
        double wait = next_sample - now;
        if (next < run->njobs && run->jobs[next].due_ms - now < wait)
            wait = run->jobs[next].due_ms - now;
        poll_results(cons, run, wait < 1 ? 0 : wait > 5 ? 5 : (int)wait);
    }
    sample(run, st.stats_url, h_wall_ms() - run->t0_wall);
    poll_chunks(chunks, run);
    if (broken == NULL && run->nsamples < 3)
        broken = "the simulator's /stats did not answer";
    scrape_scheduler(run);
    json_t *rss = json_object();
    add_rss(rss, "scheduler", h_peak_rss_kb(st.sched));
    add_rss(rss, "dispatcher", h_peak_rss_kb(st.disp));
    add_rss(rss, "ingest", h_peak_rss_kb(st.ingest));
    add_rss(rss, "devkafka", h_peak_rss_kb(st.kafka));
    add_rss(rss, "sim", h_peak_rss_kb(st.sim));
    json_object_set_new(run->extra, "peak_rss_kb", rss);
    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    if (chunks != NULL) {
        rd_kafka_consumer_close(chunks);
        rd_kafka_destroy(chunks);
    }
    free(cancels);
    int unclean = h_stack_down(&st);
    json_object_set_new(run->extra, "processes_not_stopped_cleanly", json_integer(unclean));
    json_object_set_new(run->extra, "duplicate_results", json_integer(run->duplicates));
    free(sim_cfg);
    free(cfg);
    return broken;
}

/* ---- the baseline ---- */

/* Writes each tenant's requests file (its jobs in due order); returns -1 on a write error. */
static int write_request_files(const run_t *run, char paths[][512])
{
    const scenario_t *sc = run->sc;
    FILE *f[MAX_TENANTS] = {0};
    int rc = 0;
    for (int t = 0; t < sc->ntenants && rc == 0; t++) {
        snprintf(paths[t], 512, "%s/requests-%s.jsonl", h_tmpdir(), sc->tenants[t].name);
        f[t] = fopen(paths[t], "w");
        if (f[t] == NULL)
            rc = -1;
    }
    static char body[PROMPT_CHARS_CAP + 512];
    for (int i = 0; i < run->njobs && rc == 0; i++) {
        const job_t *job = &run->jobs[i];
        if (job->due_ms >= run->measure_ms)
            break;
        char idem[32];
        snprintf(idem, sizeof idem, "j%07d", i);
        job_body(body, sizeof body, idem, job->prompt_chars, job->max_tokens, 0);
        if (fprintf(f[job->tenant],
                    "{\"id\": \"%s\", \"class\": \"%s\", \"due_ms\": %.3f, \"body\": %s}\n", idem,
                    class_names[sc->tenants[job->tenant].cls], job->due_ms, body) < 0)
            rc = -1;
    }
    for (int t = 0; t < sc->ntenants; t++) {
        if (f[t] != NULL && fclose(f[t]) != 0)
            rc = -1;
    }
    return rc;
}

/* Reads one client's output into the jobs; returns the records read, -1 when unreadable. */
static int read_client_output(run_t *run, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *r = json_loads(line, 0, NULL);
        const char *id = json_string_value(json_object_get(r, "id"));
        const char *status = json_string_value(json_object_get(r, "status"));
        int i = id != NULL && id[0] == 'j' ? atoi(id + 1) : -1;
        if (r == NULL || status == NULL || i < 0 || i >= run->njobs) {
            json_decref(r);
            continue;
        }
        job_t *job = &run->jobs[i];
        job->submit_ms = jget(r, "submit_ms");
        job->start_ms = jget(r, "start_ms");
        job->attempts = (int)json_integer_value(json_object_get(r, "attempts"));
        job->est_tokens = json_integer_value(json_object_get(r, "tokens_estimate"));
        if (strcmp(status, "unfinished") != 0) {
            job->status = b_status_parse(status);
            if (job->status != B_SUCCEEDED) {
                char why[32];
                snprintf(why, sizeof why, "HTTP %lld",
                         (long long)json_integer_value(json_object_get(r, "http_status")));
                count_reason(run, status, why);
            }
            job->end_ms = jget(r, "end_ms");
            job->usage_input = json_integer_value(json_object_get(r, "prompt_tokens"));
            job->usage_tokens =
                job->usage_input + json_integer_value(json_object_get(r, "completion_tokens"));
        }
        n++;
        json_decref(r);
    }
    free(line);
    fclose(f);
    return n;
}

/* The last line of a client's log: its JSON summary, or NULL. */
static json_t *client_summary(const char *logname)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.log", h_tmpdir(), logname);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    char line[1024], last[1024] = "";
    while (fgets(line, sizeof line, f) != NULL) {
        if (line[0] == '{')
            snprintf(last, sizeof last, "%s", line);
    }
    fclose(f);
    return last[0] != '\0' ? json_loads(last, 0, NULL) : NULL;
}

/* Runs the workload through one baseline client per tenant against a fresh simulator.
 * Returns NULL, or why it could not measure. */
static const char *run_baseline(run_t *run)
{
    const scenario_t *sc = run->sc;
    const system_t *sys = run->sys;
    char req_paths[MAX_TENANTS][512], out_paths[MAX_TENANTS][512];
    if (write_request_files(run, req_paths) != 0)
        return "cannot write the requests files";
    int sim_port = h_free_port();
    char *sim_cfg = write_sim_config(run);
    char port[16], stats_url[64], url[128];
    snprintf(port, sizeof port, "%d", sim_port);
    snprintf(stats_url, sizeof stats_url, "http://127.0.0.1:%d/stats", sim_port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/pool/v1/chat/completions", sim_port);
    const char *sim_args[] = {"--config", sim_cfg, "--port", port, NULL};
    pid_t sim = h_spawn("sluice-sim", "sim", NULL, sim_args);
    json_t *probe = NULL;
    for (int i = 0; i < 200 && probe == NULL; i++) {
        usleep(50 * 1000);
        probe = h_http_json(stats_url);
    }
    json_decref(probe);
    if (probe == NULL) {
        h_stop(sim, SIGTERM, 5000);
        free(sim_cfg);
        return "sluice-sim did not start";
    }

    /* Each client's limits: a share of the real ones, or the whole of them. */
    double split = sys->full ? 1.0 : (double)sc->ntenants;
    char rpm[32], tpm[32], minute[32], start[32], stop[32], grace[32];
    snprintf(rpm, sizeof rpm, "%.0f", sys->fraction * RPM / split);
    snprintf(tpm, sizeof tpm, "%.0f", sys->fraction * TPM / split);
    snprintf(minute, sizeof minute, "%.0f", run->minute_ms);
    snprintf(stop, sizeof stop, "%.0f", run->measure_ms);
    snprintf(grace, sizeof grace, "%.0f", run->grace_ms);
    run->t0_wall = h_wall_ms() + 300; /* every client starts at the same instant */
    snprintf(start, sizeof start, "%.3f", run->t0_wall);
    pid_t clients[MAX_TENANTS];
    int exited[MAX_TENANTS] = {0};
    long rss_kb[MAX_TENANTS];
    for (int t = 0; t < sc->ntenants; t++) {
        char logname[64];
        snprintf(out_paths[t], sizeof out_paths[t], "%s/out-%s.jsonl", h_tmpdir(),
                 sc->tenants[t].name);
        snprintf(logname, sizeof logname, "client-%s", sc->tenants[t].name);
        const char *args[] = {"--url",       url,          "--api-key",  "compare-provider-key",
                              "--requests",  req_paths[t], "--out",      out_paths[t],
                              "--rpm",       rpm,          "--tpm",      tpm,
                              "--minute-ms", minute,       "--start-ms", start,
                              "--stop-ms",   stop,         "--grace-ms", grace,
                              NULL};
        clients[t] = h_spawn("bench/baseline", logname, NULL, args);
        rss_kb[t] = -1;
    }
    while (h_wall_ms() < run->t0_wall)
        usleep(1000);
    double next_sample = 0, deadline = run->measure_ms + run->grace_ms + 30000;
    int running = sc->ntenants;
    const char *broken = NULL;
    for (;;) {
        double now = h_wall_ms() - run->t0_wall;
        if (now >= next_sample) {
            sample(run, stats_url, now);
            next_sample += run->sample_ms;
        }
        for (int t = 0; t < sc->ntenants; t++) {
            if (exited[t])
                continue;
            int status = 0;
            struct rusage ru;
            pid_t got = wait4(clients[t], &status, WNOHANG, &ru);
            if (got == clients[t]) {
                exited[t] = 1;
                running--;
                rss_kb[t] = ru.ru_maxrss;
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                    broken = "a baseline client failed (see its log)";
            }
        }
        if (running == 0)
            break;
        if (now >= deadline) {
            for (int t = 0; t < sc->ntenants; t++) {
                if (!exited[t])
                    h_stop(clients[t], SIGKILL, 1000);
            }
            broken = "the baseline clients did not stop in time";
            break;
        }
        double wait = next_sample - (h_wall_ms() - run->t0_wall);
        usleep((useconds_t)(wait < 1 ? 1000 : wait > 20 ? 20000 : wait * 1000));
    }
    sample(run, stats_url, h_wall_ms() - run->t0_wall);
    json_t *rss = json_object();
    add_rss(rss, "sim", h_peak_rss_kb(sim));
    json_t *summaries = json_object();
    for (int t = 0; t < sc->ntenants; t++) {
        char name[64];
        snprintf(name, sizeof name, "client-%s", sc->tenants[t].name);
        add_rss(rss, name, rss_kb[t]);
        json_t *s = client_summary(name);
        json_object_set_new(summaries, sc->tenants[t].name, s != NULL ? s : json_null());
        if (read_client_output(run, out_paths[t]) < 0 && broken == NULL)
            broken = "a baseline client wrote no output";
    }
    json_object_set_new(run->extra, "peak_rss_kb", rss);
    json_object_set_new(run->extra, "clients", summaries);
    json_object_set_new(run->extra, "client_limits",
                        json_pack("{s:f, s:f, s:f, s:s}", "rpm", sys->fraction * RPM / split, "tpm",
                                  sys->fraction * TPM / split, "pause_ms",
                                  run->minute_ms * 15.0 / 60.0, "split",
                                  sys->full ? "full" : "share"));
    if (h_stop(sim, SIGTERM, 10000) != 0 && broken == NULL)
        broken = "sluice-sim did not stop cleanly";
    /* Jobs due before the stop that no client read were submitted and never started. */
    for (int i = 0; i < run->njobs; i++) {
        job_t *job = &run->jobs[i];
        if (job->submit_ms < 0 && job->due_ms < run->measure_ms)
            job->submit_ms = job->due_ms;
    }
    free(sim_cfg);
    return broken;
}

/* ---- figures ---- */

/* The sample taken first at or after t_ms; NULL when there is none. */
static const sample_t *sample_at(const run_t *run, double t_ms)
{
    for (int i = 0; i < run->nsamples; i++) {
        if (run->samples[i].t_ms >= t_ms)
            return &run->samples[i];
    }
    return NULL;
}

static int64_t sim_requests(const sample_t *s)
{
    return s->admitted + s->refused + s->fault_429 + s->fault_503 + s->errors;
}

static json_t *pcts(double *v, int n, int extra_key_n, const char *extra_key)
{
    qsort(v, (size_t)n, sizeof *v, b_cmp_double);
    json_t *o = json_object();
    json_object_set_new(o, "p50", b_jnum(b_pct(v, n, 0.5)));
    json_object_set_new(o, "p99", b_jnum(b_pct(v, n, 0.99)));
    json_object_set_new(o, "max", b_jnum(b_pct(v, n, 1.0)));
    json_object_set_new(o, "n", json_integer(n));
    if (extra_key != NULL)
        json_object_set_new(o, extra_key, json_integer(extra_key_n));
    return o;
}

/* Estimated against real tokens, and the capacity wasted by over-reservation, over the whole
 * run. estimated: what each system took from its own token limit for every attempt before
 * the call (sluice: its reservations on the deployment's token buckets; the baseline: its
 * estimate, taken from its token bucket at every attempt). kept: what its own accounting
 * finally counted (sluice settles each reservation: a refusal is given back, a call that may
 * have counted keeps it; the baseline never gives anything back). real: what the provider's
 * TPM counted (the simulator's tokens_charged: prompt + max_tokens of every call it admitted).
 * Wasted: kept above real, capacity of the system's own limit spent on nothing. */
static json_t *token_figures(const run_t *run)
{
    double est = 0, kept = 0;
    if (!run->sys->baseline) {
        json_t *m = json_object_get(run->extra, "scheduler_metrics");
        est = jget(m, "provider_tokens_charged");
        kept = jget(m, "provider_tokens_kept");
    } else {
        for (int i = 0; i < run->njobs; i++) {
            const job_t *job = &run->jobs[i];
            if (job->attempts > 0)
                est += (double)job->attempts * (double)job->est_tokens;
        }
        kept = est;
    }
    double real = run->nsamples > 0 ? (double)run->samples[run->nsamples - 1].tokens : NAN;
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "estimated", b_jnum(est), "kept",
                     b_jnum(kept), "real", b_jnum(real), "wasted", b_jnum(fmax(0, kept - real)),
                     "estimated_over_real", b_jnum(real > 0 ? est / real : NAN), "wasted_share",
                     b_jnum(kept > 0 ? fmax(0, kept - real) / kept : NAN));
}

/* What the runner saw of the streams: time to the first chunk, cut attempts, and whether every
 * succeeded job's stream ended with a finish_reason. vals is scratch of njobs + 1 doubles. */
static json_t *stream_figures(const run_t *run, double *vals)
{
    int n = 0, succeeded = 0, complete = 0, without_chunks = 0;
    long chunks = 0, cut = 0;
    for (int i = 0; i < run->njobs; i++) {
        const job_t *job = &run->jobs[i];
        const stream_seen_t *seen =
            job->job_id != NULL ? sl_hmap_get(run->streams, job->job_id) : NULL;
        if (seen != NULL) {
            chunks += seen->chunks;
            cut += seen->cut;
        }
        if (job->status != B_SUCCEEDED)
            continue;
        succeeded++;
        if (seen == NULL) {
            without_chunks++;
            continue;
        }
        complete += seen->finished > 0;
        vals[n++] = seen->first_ms - job->submit_ms;
    }
    json_t *o = json_object();
    json_object_set_new(o, "first_chunk_ms", pcts(vals, n, 0, NULL));
    json_object_set_new(o, "chunks", json_integer(chunks));
    json_object_set_new(o, "cut_attempts", json_integer(cut));
    json_object_set_new(o, "succeeded", json_integer(succeeded));
    json_object_set_new(o, "succeeded_with_finished_stream", json_integer(complete));
    json_object_set_new(o, "succeeded_without_chunks", json_integer(without_chunks));
    json_object_set_new(o, "unparsed_chunks", json_integer(run->stream_bad));
    return o;
}

/* Every figure of one run, and the series for the plots. */
static json_t *figures(const run_t *run)
{
    const scenario_t *sc = run->sc;
    json_t *fig = json_object();
    double m = run->measure_ms, w0 = run->win0_ms, w1 = run->win1_ms;
    const sample_t *s0 = run->nsamples > 0 ? &run->samples[0] : NULL;
    const sample_t *slo = sample_at(run, w0), *shi = sample_at(run, w1);
    const sample_t *send = run->nsamples > 0 ? &run->samples[run->nsamples - 1] : NULL;

    /* Utilisation of the binding limit (TPM) in the steady middle, on the simulator's clock. */
    double util = NAN;
    if (slo != NULL && shi != NULL && shi->sim_ms > slo->sim_ms)
        util = (double)(shi->tokens - slo->tokens) / (shi->sim_ms - slo->sim_ms) /
               limit_tokens_per_ms(run);
    json_object_set_new(fig, "utilisation", b_jnum(util));
    if (s0 != NULL && send != NULL) {
        int64_t req = sim_requests(send) - sim_requests(s0);
        int64_t refused = send->refused - s0->refused;
        json_t *sim = json_pack(
            "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "requests", (json_int_t)req, "admitted",
            (json_int_t)(send->admitted - s0->admitted), "limit_429", (json_int_t)refused,
            "fault_429", (json_int_t)(send->fault_429 - s0->fault_429), "fault_503",
            (json_int_t)(send->fault_503 - s0->fault_503), "replayed",
            (json_int_t)(send->replayed - s0->replayed), "dropped",
            (json_int_t)(send->dropped - s0->dropped), "limit_429_share",
            b_jnum(req > 0 ? (double)refused / (double)req : NAN));
        if (slo != NULL && shi != NULL) {
            int64_t wreq = sim_requests(shi) - sim_requests(slo);
            json_object_set_new(sim, "limit_429_window",
                                json_integer((json_int_t)(shi->refused - slo->refused)));
            json_object_set_new(
                sim, "limit_429_share_window",
                b_jnum(wreq > 0 ? (double)(shi->refused - slo->refused) / (double)wreq : NAN));
        }
        json_object_set_new(fig, "sim", sim);
    }

    /* Per job: outcomes, retries, waits and latencies per class, tokens per tenant. */
    double *vals = calloc((size_t)run->njobs + 1, sizeof *vals);
    if (vals == NULL) {
        json_decref(fig);
        return NULL;
    }
    int submitted = 0, succeeded = 0, failed = 0, expired = 0, rejected = 0, cancelled = 0;
    int other = 0, unfinished = 0, cancels_sent = 0, done_after_cancel = 0;
    int finished = 0, retries = 0, done_in_window = 0;
    double tenant_tokens[MAX_TENANTS] = {0}, tokens_in_window = 0;
    for (int i = 0; i < run->njobs; i++) {
        const job_t *job = &run->jobs[i];
        if (job->submit_ms < 0)
            continue;
        submitted++;
        succeeded += job->status == B_SUCCEEDED;
        failed += job->status == B_FAILED;
        expired += job->status == B_EXPIRED;
        rejected += job->status == B_REJECTED;
        cancelled += job->status == B_CANCELLED;
        other += job->status == B_OTHER;
        cancels_sent += job->cancel_sent;
        done_after_cancel += job->cancel_sent && job->status == B_SUCCEEDED;
        unfinished += job->status == B_NONE;
        if (job->status == B_SUCCEEDED || job->status == B_FAILED) {
            finished++;
            retries += job->attempts > 1 ? job->attempts - 1 : 0;
        }
        if (job->status == B_SUCCEEDED && job->end_ms >= w0 && job->end_ms < w1) {
            done_in_window++;
            tokens_in_window += (double)job->usage_tokens;
            tenant_tokens[job->tenant] += (double)job->usage_tokens;
        }
    }
    double wsec = (w1 - w0) / 1000.0;
    json_object_set_new(fig, "submitted", json_integer(submitted));
    json_object_set_new(fig, "succeeded", json_integer(succeeded));
    json_object_set_new(fig, "failed", json_integer(failed));
    json_object_set_new(fig, "expired", json_integer(expired));
    json_object_set_new(fig, "rejected", json_integer(rejected));
    json_object_set_new(fig, "other_status", json_integer(other));
    json_object_set_new(fig, "reasons", json_deep_copy(run->reasons));
    if (sc->cancel_share > 0) {
        /* A cancel removes a queued job; one already sent runs to its end (and is charged). */
        json_object_set_new(fig, "cancels",
                            json_pack("{s:i, s:i, s:i}", "sent", cancels_sent, "cancelled",
                                      cancelled, "succeeded_anyway", done_after_cancel));
    }
    json_object_set_new(fig, "tokens", token_figures(run));
    if (run->streams != NULL)
        json_object_set_new(fig, "stream", stream_figures(run, vals));
    json_object_set_new(fig, "unfinished_at_stop", json_integer(unfinished));
    json_object_set_new(fig, "retries_per_request",
                        b_jnum(finished > 0 ? (double)retries / finished : NAN));
    json_object_set_new(fig, "jobs_per_s", json_real(done_in_window / wsec));
    json_object_set_new(fig, "tokens_per_s", json_real(tokens_in_window / wsec));
    json_object_set_new(
        fig, "jain", b_jnum(b_jain(tenant_tokens + sc->jain_from, sc->ntenants - sc->jain_from)));
    json_t *tt = json_object();
    for (int t = 0; t < sc->ntenants; t++)
        json_object_set_new(tt, sc->tenants[t].name, json_real(tenant_tokens[t]));
    json_object_set_new(fig, "tenant_tokens_window", tt);

    json_t *waits = json_object(), *waits_w = json_object(), *lat = json_object();
    for (int c = 0; c < NCLASSES; c++) {
        int present = 0;
        for (int t = 0; t < sc->ntenants; t++)
            present |= sc->tenants[t].cls == c;
        if (!present)
            continue;
        int n = 0, not_started = 0;
        for (int i = 0; i < run->njobs; i++) {
            const job_t *job = &run->jobs[i];
            if (job->submit_ms < 0 || sc->tenants[job->tenant].cls != c)
                continue;
            if (job->start_ms >= 0)
                vals[n++] = fmax(0, job->start_ms - job->submit_ms);
            else
                not_started++;
        }
        json_object_set_new(waits, class_names[c], pcts(vals, n, not_started, "not_started"));
        /* The same over the jobs submitted in the steady window (a backlog taken in at the
         * start weighs on the figure above). */
        n = 0;
        not_started = 0;
        for (int i = 0; i < run->njobs; i++) {
            const job_t *job = &run->jobs[i];
            if (job->submit_ms < w0 || job->submit_ms >= w1 || sc->tenants[job->tenant].cls != c)
                continue;
            if (job->start_ms >= 0)
                vals[n++] = fmax(0, job->start_ms - job->submit_ms);
            else
                not_started++;
        }
        json_object_set_new(waits_w, class_names[c], pcts(vals, n, not_started, "not_started"));
        n = 0;
        for (int i = 0; i < run->njobs; i++) {
            const job_t *job = &run->jobs[i];
            if (job->submit_ms >= 0 && sc->tenants[job->tenant].cls == c &&
                job->status == B_SUCCEEDED)
                vals[n++] = job->end_ms - job->submit_ms;
        }
        json_object_set_new(lat, class_names[c], pcts(vals, n, 0, NULL));
    }
    json_object_set_new(fig, "queue_wait_ms", waits);
    json_object_set_new(fig, "queue_wait_ms_window", waits_w);
    if (sc->burst_minutes > 0) {
        /* How long after the burst window the last job submitted in it started (NAN when one
         * never started). */
        double b0 = sc->burst_at * m, b1 = b0 + sc->burst_minutes * run->minute_ms, last = -1;
        int never = 0, nb = 0;
        for (int i = 0; i < run->njobs; i++) {
            const job_t *job = &run->jobs[i];
            if (job->submit_ms < b0 || job->submit_ms >= b1)
                continue;
            nb++;
            if (job->start_ms < 0)
                never++;
            else
                last = fmax(last, job->start_ms);
        }
        json_object_set_new(fig, "burst_jobs", json_integer(nb));
        json_object_set_new(fig, "burst_drain_s",
                            b_jnum(never == 0 && last >= 0 ? (last - b1) / 1000.0 : NAN));
    }
    json_object_set_new(fig, "latency_ms", lat);

    /* Series: admitted tokens/s and 429s/s between samples; queue wait per class in bins of a
     * tenth of a minute of start time. */
    json_t *ser = json_object(), *t_s = json_array(), *tok = json_array(), *l429 = json_array(),
           *f429 = json_array();
    for (int i = 1; i < run->nsamples; i++) {
        const sample_t *a = &run->samples[i - 1], *b = &run->samples[i];
        double dt = b->sim_ms - a->sim_ms;
        if (dt <= 0)
            continue;
        json_array_append_new(t_s, json_real((a->t_ms + b->t_ms) / 2000.0));
        json_array_append_new(tok, json_real((double)(b->tokens - a->tokens) / dt * 1000.0));
        json_array_append_new(l429, json_real((double)(b->refused - a->refused) / dt * 1000.0));
        json_array_append_new(f429, json_real((double)(b->fault_429 - a->fault_429) / dt * 1000.0));
    }
    json_object_set_new(ser, "t_s", t_s);
    json_object_set_new(ser, "tokens_per_s", tok);
    json_object_set_new(ser, "limit_429_per_s", l429);
    json_object_set_new(ser, "fault_429_per_s", f429);
    double bin_ms = run->minute_ms / 10.0;
    int nbins = (int)ceil((m + run->grace_ms) / bin_ms);
    json_t *wbins = json_object();
    for (int c = 0; c < NCLASSES; c++) {
        int present = 0;
        for (int t = 0; t < sc->ntenants; t++)
            present |= sc->tenants[t].cls == c;
        if (!present)
            continue;
        /* By start time: the wait of the jobs that started then (a backlog submitted at once
         * shows as a rising line, an arrival stream as its current wait). */
        json_t *rows = json_array();
        for (int b = 0; b < nbins; b++) {
            int n = 0;
            for (int i = 0; i < run->njobs; i++) {
                const job_t *job = &run->jobs[i];
                if (job->submit_ms < 0 || job->start_ms < b * bin_ms ||
                    job->start_ms >= (b + 1) * bin_ms || sc->tenants[job->tenant].cls != c)
                    continue;
                vals[n++] = fmax(0, job->start_ms - job->submit_ms);
            }
            if (n == 0)
                continue;
            qsort(vals, (size_t)n, sizeof *vals, b_cmp_double);
            json_array_append_new(rows, json_pack("[f, o, o, i]", (b + 0.5) * bin_ms / 1000.0,
                                                  b_jnum(b_pct(vals, n, 0.5)),
                                                  b_jnum(b_pct(vals, n, 0.99)), n));
        }
        json_object_set_new(wbins, class_names[c], rows);
    }
    json_object_set_new(ser, "wait_bin_s", json_real(bin_ms / 1000.0));
    json_object_set_new(ser, "queue_wait_ms", wbins);
    json_object_set_new(fig, "series", ser);
    free(vals);
    return fig;
}

/* ---- one run, in the child ---- */

static void run_one(const scenario_t *sc, const system_t *sys, int quick, double minute_ms,
                    json_t *out)
{
    scenario_t eff = with_defaults(sc);
    run_t run = {.sc = &eff, .sys = sys, .quick = quick, .minute_ms = minute_ms};
    run.measure_ms = minute_ms * (quick ? sc->quick_measure_min : sc->measure_min);
    run.grace_ms = minute_ms * eff.grace_min;
    /* The steady window starts once the baseline's initial stock (its buckets start with a
     * whole minute of capacity) is spent: 3 minutes in the full run, 40 % of the quick one. */
    run.win0_ms = quick ? 0.4 * run.measure_ms : 3 * minute_ms;
    run.win1_ms = run.measure_ms - minute_ms / 2;
    run.sample_ms = minute_ms / 12;
    run.extra = json_object();
    run.reasons = json_object();
    run.streams = eff.stream ? sl_hmap_new() : NULL;
    b_rng_seed(0x5eed0000u + (uint64_t)(sc - scenarios));
    json_object_set_new(out, "measure_s", json_real(run.measure_ms / 1000.0));
    json_object_set_new(out, "window_s",
                        json_pack("[f, f]", run.win0_ms / 1000.0, run.win1_ms / 1000.0));
    const char *broken = NULL;
    if (make_jobs(&run) != 0 || alloc_samples(&run) != 0)
        broken = "out of memory";
    if (broken == NULL)
        broken = sys->baseline ? run_baseline(&run) : run_sluice(&run);
    json_object_set_new(out, "status", json_string(broken ? "broken" : "ok"));
    if (broken != NULL)
        json_object_set_new(out, "reason", json_string(broken));
    json_object_set_new(out, "jobs", json_integer(run.njobs));
    json_object_set_new(out, "samples", json_integer(run.nsamples));
    json_t *fig = run.njobs > 0 ? figures(&run) : NULL;
    if (fig != NULL)
        json_object_set_new(out, "figures", fig);
    json_object_set_new(out, "details", run.extra);
    json_decref(run.reasons);
    if (run.streams != NULL) {
        sl_hmap_each(run.streams, free_seen, NULL);
        sl_hmap_free(run.streams);
    }
    for (int i = 0; i < run.njobs; i++)
        free(run.jobs[i].job_id);
    free(run.jobs);
    free(run.samples);
    h_cleanup(broken != NULL);
}

/* ---- the parent: one child per run ---- */

/* What the child of one run is given. */
typedef struct {
    const scenario_t *sc;
    const system_t *sys;
    int quick;
    double minute_ms;
} child_arg_t;

static void child_run(void *arg, json_t *report)
{
    const child_arg_t *a = arg;
    sl_crypto_init();
    run_one(a->sc, a->sys, a->quick, a->minute_ms, report);
}

/* Runs one system on one scenario in a child process; returns its report (caller frees),
 * status "broken" when the child did not report. parent_state is the parent's JSON at the fork,
 * which the child releases before it exits (so a leak check in the child sees only its own). */
static json_t *run_child(const scenario_t *sc, const system_t *sys, int quick, double minute_ms,
                         int timeout_s, json_t *parent_state)
{
    double started_ms = sl_mono_ms();
    child_arg_t arg = {.sc = sc, .sys = sys, .quick = quick, .minute_ms = minute_ms};
    json_t *head = json_pack("{s:s, s:b, s:f, s:b}", "system", sys->label, "baseline",
                             sys->baseline, "fraction", sys->fraction, "full", sys->full);
    json_t *res =
        b_run_in_child(child_run, &arg, head, parent_state, sys->label, timeout_s, RESULT_CAP);
    json_decref(head);
    if (json_object_get(res, "duration_s") == NULL)
        json_object_set_new(res, "duration_s", json_real((sl_mono_ms() - started_ms) / 1000.0));
    return res;
}

/* ---- the table and the plot ---- */

static double fig_num(json_t *fig, const char *a, const char *b, const char *c)
{
    json_t *v = json_object_get(fig, a);
    if (b != NULL)
        v = json_object_get(v, b);
    if (c != NULL)
        v = json_object_get(v, c);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void fmt_ms(char *out, size_t cap, double ms)
{
    if (!isfinite(ms))
        snprintf(out, cap, "-");
    else if (ms >= 10000)
        snprintf(out, cap, "%.0fs", ms / 1000);
    else if (ms >= 1000)
        snprintf(out, cap, "%.1fs", ms / 1000);
    else
        snprintf(out, cap, "%.0f", ms);
}

/* A second line for the figures some scenarios add: outcomes other than success, cancels,
 * streams, the simulator's 503s. */
static void print_details(json_t *fig)
{
    char line[1024] = "";
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(fig, "reasons"), k, v)
    {
        n += (size_t)snprintf(line + n, sizeof line - n, "%s%s %lld", n ? ", " : "", k,
                              (long long)json_integer_value(v));
        if (n >= sizeof line)
            n = sizeof line - 1;
    }
    double f503 = fig_num(fig, "sim", "fault_503", NULL);
    if (f503 > 0) {
        n += (size_t)snprintf(line + n, sizeof line - n, "%ssimulator 503s %.0f", n ? "; " : "",
                              f503);
        if (n >= sizeof line)
            n = sizeof line - 1;
    }
    json_t *c = json_object_get(fig, "cancels");
    if (c != NULL) {
        n += (size_t)snprintf(line + n, sizeof line - n,
                              "%scancels sent %.0f: cancelled %.0f, succeeded anyway %.0f",
                              n ? "; " : "", fig_num(fig, "cancels", "sent", NULL),
                              fig_num(fig, "cancels", "cancelled", NULL),
                              fig_num(fig, "cancels", "succeeded_anyway", NULL));
        if (n >= sizeof line)
            n = sizeof line - 1;
    }
    json_t *st = json_object_get(fig, "stream");
    if (st != NULL) {
        char a[16], b[16];
        fmt_ms(a, sizeof a, fig_num(fig, "stream", "first_chunk_ms", "p50"));
        fmt_ms(b, sizeof b, fig_num(fig, "stream", "first_chunk_ms", "p99"));
        n += (size_t)snprintf(line + n, sizeof line - n,
                              "%sfirst chunk p50/p99 %s/%s (ms unless s); %.0f chunks; %.0f "
                              "attempts cut; %.0f of %.0f "
                              "succeeded streams finished",
                              n ? "; " : "", a, b, fig_num(fig, "stream", "chunks", NULL),
                              fig_num(fig, "stream", "cut_attempts", NULL),
                              fig_num(fig, "stream", "succeeded_with_finished_stream", NULL),
                              fig_num(fig, "stream", "succeeded", NULL));
    }
    if (line[0] != '\0')
        printf("%-13s   %s\n", "", line);
}

static void print_table(const scenario_t *sc, json_t *runs)
{
    printf("\n%s: %s\n", sc->name, sc->what);
    printf("%-13s %6s %13s %6s %7s", "system", "util", "limit 429s", "inj429", "retry/j");
    int cls_present[NCLASSES] = {0};
    for (int t = 0; t < sc->ntenants; t++)
        cls_present[sc->tenants[t].cls] = 1;
    for (int c = 0; c < NCLASSES; c++) {
        if (cls_present[c]) {
            char head[40];
            snprintf(head, sizeof head, "wait %.5s p50/p99", class_names[c]);
            printf(" %17s", head);
            snprintf(head, sizeof head, "e2e %.5s p50/p99", class_names[c]);
            printf(" %17s", head);
        }
    }
    if (sc->burst_minutes > 0)
        printf(" %12s", "burst drain");
    printf(" %6s %7s %6s %5s %7s %8s %8s %6s\n", "jobs/s", "tok/s", "Jain", "fail", "queued",
           "RSS MiB", "est/real", "waste");
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r)
    {
        const char *label = json_string_value(json_object_get(r, "system"));
        const char *status = json_string_value(json_object_get(r, "status"));
        json_t *fig = json_object_get(r, "figures");
        if (strcmp(status, "ok") != 0 && fig == NULL) {
            printf("%-13s %s: %s\n", label, status,
                   json_string_value(json_object_get(r, "reason")));
            continue;
        }
        char lim[32];
        snprintf(lim, sizeof lim, "%.0f (%.2f%%)", fig_num(fig, "sim", "limit_429", NULL),
                 100 * fig_num(fig, "sim", "limit_429_share", NULL));
        printf("%-13s %5.1f%% %13s %6.0f %7.2f", label,
               100 * fig_num(fig, "utilisation", NULL, NULL), lim,
               fig_num(fig, "sim", "fault_429", NULL),
               fig_num(fig, "retries_per_request", NULL, NULL));
        for (int c = 0; c < NCLASSES; c++) {
            if (!cls_present[c])
                continue;
            char a[16], b[16], cell[40];
            fmt_ms(a, sizeof a, fig_num(fig, "queue_wait_ms", class_names[c], "p50"));
            fmt_ms(b, sizeof b, fig_num(fig, "queue_wait_ms", class_names[c], "p99"));
            snprintf(cell, sizeof cell, "%s/%s", a, b);
            printf(" %17s", cell);
            fmt_ms(a, sizeof a, fig_num(fig, "latency_ms", class_names[c], "p50"));
            fmt_ms(b, sizeof b, fig_num(fig, "latency_ms", class_names[c], "p99"));
            snprintf(cell, sizeof cell, "%s/%s", a, b);
            printf(" %17s", cell);
        }
        double rss = 0;
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(json_object_get(r, "details"), "peak_rss_kb"), k, v)
        {
            if (json_integer_value(v) > 0)
                rss += (double)json_integer_value(v);
        }
        if (sc->burst_minutes > 0) {
            double drain = fig_num(fig, "burst_drain_s", NULL, NULL);
            if (isfinite(drain))
                printf(" %11.1fs", drain);
            else
                printf(" %12s", "not drained");
        }
        printf(" %6.1f %7.0f %6.4f %5.0f %7.0f %8.0f %8.3f %5.1f%%%s\n",
               fig_num(fig, "jobs_per_s", NULL, NULL), fig_num(fig, "tokens_per_s", NULL, NULL),
               fig_num(fig, "jain", NULL, NULL),
               fig_num(fig, "failed", NULL, NULL) + fig_num(fig, "expired", NULL, NULL),
               fig_num(fig, "unfinished_at_stop", NULL, NULL), rss / 1024,
               fig_num(fig, "tokens", "estimated_over_real", NULL),
               100 * fig_num(fig, "tokens", "wasted_share", NULL),
               strcmp(status, "ok") == 0 ? "" : "  (broken)");
        print_details(fig);
    }
    printf("(util: tokens the simulator admitted per second over the TPM limit, in the steady "
           "window; limit 429s: the simulator's own refusals over the run and their share of its "
           "requests; inj429: injected; waits (submit to start) and e2e (submit to result) in "
           "ms, over the jobs that started / succeeded; jobs/s, tok/s: succeeded, steady window; "
           "burst drain: from the end of the burst window to the start of its last job; "
           "fail: failed + expired; queued: submitted and not finished at the stop; Jain: over "
           "the tenants of equal demand; RSS: peak, all processes of the run; est/real: tokens "
           "reserved (sluice) or taken by the estimate at every attempt (baseline) over what the "
           "provider's limit counted; waste: the share of what the system's own accounting kept "
           "that the provider did not count)\n");
}

/* Writes a gnuplot data file; returns 0 or -1. */
static int write_dat(const char *path, json_t *rows_or_null, json_t *t, json_t *y)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    size_t i;
    json_t *row;
    if (rows_or_null != NULL) {
        /* [t, p50, p99, n]; log scale: keep waits at 1 ms or more */
        json_array_foreach(rows_or_null, i, row)
        {
            json_t *a = json_array_get(row, 1), *b = json_array_get(row, 2);
            double p50 = json_is_number(a) ? fmax(1, json_number_value(a)) : NAN;
            double p99 = json_is_number(b) ? fmax(1, json_number_value(b)) : NAN;
            if (isfinite(p50))
                fprintf(f, "%.3f %.1f %.1f\n", json_number_value(json_array_get(row, 0)), p50, p99);
        }
    } else {
        json_array_foreach(t, i, row)
        {
            fprintf(f, "%.3f %.1f\n", json_number_value(row),
                    json_number_value(json_array_get(y, i)));
        }
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* Plots admitted tokens/s against the limit, and queue wait per class, one column per system.
 * Returns 0, or -1 (gnuplot missing or failing: said on stdout). */
static int plot(const scenario_t *sc, json_t *runs, double minute_ms, double xmax_s,
                const char *png)
{
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        printf("gnuplot is not installed: no plot (Debian package gnuplot-nox)\n");
        return -1;
    }
    char dir[] = "/tmp/sluice-compare-plot-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return -1;
    }
    char path[512], script_path[512];
    snprintf(script_path, sizeof script_path, "%s/plot.gp", dir);
    FILE *gp = fopen(script_path, "w");
    if (gp == NULL)
        return -1;
    int n = (int)json_array_size(runs);
    double limit = (double)TPM / minute_ms * 1000.0;
    fprintf(gp,
            "set terminal pngcairo size %d,760 font 'sans,9'\nset output '%s'\n"
            "set multiplot layout 2,%d title \"%s: %s (TPM %d over %.0f ms minutes)\"\n"
            "set grid\nset key top right\nset xrange [0:%.1f]\n",
            360 * (n < 2 ? 2 : n), png, n, sc->name, sc->what, TPM, minute_ms, xmax_s);
    int rc = 0;
    size_t i;
    json_t *r;
    /* Row 1: admitted tokens/s against the limit. */
    json_array_foreach(runs, i, r)
    {
        json_t *ser = json_object_get(json_object_get(r, "figures"), "series");
        json_t *t_s = json_object_get(ser, "t_s");
        fprintf(gp,
                "set title '%s'\nset xlabel 's'\nset ylabel 'admitted tokens/s'\n"
                "unset logscale y\nset yrange [0:%.0f]\n",
                json_string_value(json_object_get(r, "system")), limit * 2.0);
        if (json_array_size(t_s) == 0) {
            fprintf(gp, "plot %.0f with lines dt 2 lc rgb 'red' title 'limit (no data)'\n", limit);
            continue;
        }
        snprintf(path, sizeof path, "%s/tokens-%zu.dat", dir, i);
        rc |= write_dat(path, NULL, t_s, json_object_get(ser, "tokens_per_s"));
        fprintf(gp,
                "plot '%s' using 1:2 with lines lw 2 title 'admitted', %.0f with lines dt 2 lc "
                "rgb 'red' title 'limit'\n",
                path, limit);
    }
    /* Row 2: queue wait per class (p50 solid, p99 dashed), by submit time, log scale. */
    json_array_foreach(runs, i, r)
    {
        json_t *ser = json_object_get(json_object_get(r, "figures"), "series");
        json_t *w = json_object_get(ser, "queue_wait_ms");
        fprintf(gp,
                "set title '%s: queue wait of the jobs starting'\nset xlabel 's'\n"
                "set ylabel 'ms'\nset logscale y\nset yrange [1:*]\n",
                json_string_value(json_object_get(r, "system")));
        const char *cls;
        json_t *rows;
        int k = 0;
        char plotcmd[2048] = "plot ";
        size_t pl = strlen(plotcmd);
        json_object_foreach(w, cls, rows)
        {
            if (json_array_size(rows) == 0)
                continue;
            snprintf(path, sizeof path, "%s/wait-%zu-%s.dat", dir, i, cls);
            rc |= write_dat(path, rows, NULL, NULL);
            pl += (size_t)snprintf(plotcmd + pl, sizeof plotcmd - pl,
                                   "%s'%s' using 1:2 with linespoints lw 2 pt 7 ps 0.4 lc %d "
                                   "title '%s p50', '%s' using 1:3 with lines dt 2 lc %d "
                                   "title '%s p99'",
                                   k ? ", " : "", path, k + 1, cls, path, k + 1, cls);
            k++;
        }
        if (k == 0)
            fprintf(gp, "set yrange [1:10]\nplot 2 title 'no data'\n");
        else
            fprintf(gp, "%s\n", plotcmd);
    }
    fprintf(gp, "unset multiplot\n");
    if (fclose(gp) != 0)
        rc = -1;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "gnuplot '%s' > '%s/gnuplot.log' 2>&1", script_path, dir);
    if (rc == 0 && system(cmd) != 0) {
        printf("gnuplot failed: see %s/gnuplot.log\n", dir);
        return -1;
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}

/* ---- main ---- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: compare [--scenario NAME] [--quick] [--minute-ms N] [--fractions LIST]\n"
            "               [--split share|full] [--slices N] [--storm-retry-after-share X]\n"
            "               [--no-sluice] [--no-baseline] [--no-plot]\n"
            "Runs sluice and the cookbook baseline (bench/baseline) on the same workload against\n"
            "sluice-sim, each on a fresh stack, and writes bench/results/compare-<scenario>-\n"
            "<unix>.json (and .png with gnuplot).\n"
            "  --scenario NAME  one of:");
    for (int i = 0; i < NSCENARIOS; i++)
        fprintf(f, " %s", scenarios[i].name);
    fprintf(f, " (default: all)\n"
               "  --quick          3 simulated minutes of measurement instead of 7\n"
               "  --minute-ms N    length of a simulated minute (default 3000)\n"
               "  --fractions L    the baseline's limits as fractions of the real ones\n"
               "                   (default 0.5,0.75,1)\n"
               "  --split S        share: each tenant's client gets limit x fraction / tenants\n"
               "                   (default); full: each gets limit x fraction\n"
               "  --slices N       the provider's enforcement slices a minute (default 10)\n"
               "  --storm-retry-after-share X  share of the storm's 429s with a Retry-After\n"
               "                   (default 0.5)\n"
               "  --no-sluice, --no-baseline: run one side only; --no-plot: no PNG\n");
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    int quick = 0, no_sluice = 0, no_baseline = 0, no_plot = 0, full = 0;
    double minute_ms = DEFAULT_MINUTE_MS;
    double fractions[MAX_SYSTEMS] = {0.5, 0.75, 1.0};
    int nfractions = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--quick") == 0) {
            quick = 1;
        } else if (strcmp(a, "--no-sluice") == 0) {
            no_sluice = 1;
        } else if (strcmp(a, "--no-baseline") == 0) {
            no_baseline = 1;
        } else if (strcmp(a, "--no-plot") == 0) {
            no_plot = 1;
        } else if (strcmp(a, "--scenario") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(a, "--split") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "full") != 0 && strcmp(v, "share") != 0) {
                fprintf(stderr, "compare: --split is share or full\n");
                return 2;
            }
            full = strcmp(v, "full") == 0;
        } else if (strcmp(a, "--storm-retry-after-share") == 0 && i + 1 < argc) {
            char *end = NULL;
            storm_retry_after_share = strtod(argv[++i], &end);
            if (end == NULL || *end != '\0' ||
                !(storm_retry_after_share >= 0 && storm_retry_after_share <= 1)) {
                fprintf(stderr, "compare: --storm-retry-after-share is 0 - 1\n");
                return 2;
            }
        } else if (strcmp(a, "--slices") == 0 && i + 1 < argc) {
            long long v = sl_parse_count(argv[++i]);
            if (v < 1 || v > 600) {
                fprintf(stderr, "compare: --slices is 1 - 600\n");
                return 2;
            }
            slices_per_minute = (int)v;
        } else if (strcmp(a, "--minute-ms") == 0 && i + 1 < argc) {
            char *end = NULL;
            minute_ms = strtod(argv[++i], &end);
            if (end == NULL || *end != '\0' || !(minute_ms >= 600 && minute_ms <= 60000)) {
                fprintf(stderr, "compare: --minute-ms is 600 - 60000\n");
                return 2;
            }
        } else if (strcmp(a, "--fractions") == 0 && i + 1 < argc) {
            nfractions = 0;
            char *s = argv[++i], *end = NULL;
            while (*s != '\0') {
                double v = strtod(s, &end);
                if (end == s || !(v > 0 && v <= 4) || nfractions >= MAX_SYSTEMS - 1) {
                    fprintf(stderr,
                            "compare: --fractions is a list like 0.5,0.75,1 (each 0-4, "
                            "at most %d)\n",
                            MAX_SYSTEMS - 1);
                    return 2;
                }
                fractions[nfractions++] = v;
                s = *end == ',' ? end + 1 : end;
                if (*end != ',' && *end != '\0') {
                    fprintf(stderr, "compare: bad --fractions\n");
                    return 2;
                }
            }
        } else {
            fprintf(stderr, "compare: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    int found = only == NULL;
    for (int i = 0; i < NSCENARIOS && !found; i++)
        found = strcmp(scenarios[i].name, only) == 0;
    if (!found) {
        fprintf(stderr, "compare: unknown scenario \"%s\"\n", only);
        usage(stderr);
        return 2;
    }
    system_t systems[MAX_SYSTEMS];
    int nsys = 0;
    if (!no_sluice)
        systems[nsys++] = (system_t){.baseline = 0, .fraction = 1, .full = 0, .label = "sluice"};
    for (int k = 0; k < nfractions && !no_baseline; k++) {
        system_t *s = &systems[nsys++];
        *s = (system_t){.baseline = 1, .fraction = fractions[k], .full = full, .label = ""};
        snprintf(s->label, sizeof s->label, "cookbook %.0f%%%s", 100 * fractions[k],
                 full ? " full" : "");
    }
    if (nsys == 0) {
        fprintf(stderr, "compare: nothing to run\n");
        return 2;
    }
    b_forward_signals(SIGTERM);
    mkdir("bench/results", 0755);
    printf("sluice vs the cookbook baseline%s: one deployment, TPM %d (prompt + max_tokens, %d "
           "slices a minute), %.0f ms minutes; baseline split: %s\n",
           quick ? " (quick)" : "", TPM, slices_per_minute, minute_ms, full ? "full" : "share");
    int broken = 0;
    for (int s = 0; s < NSCENARIOS; s++) {
        const scenario_t *sc = &scenarios[s];
        if (only != NULL && strcmp(sc->name, only) != 0)
            continue;
        long long started = (long long)time(NULL);
        json_t *runs = json_array();
        double t0 = sl_mono_ms();
        for (int k = 0; k < nsys; k++) {
            if (sc->sluice_only && systems[k].baseline)
                continue; /* the baseline has no counterpart */
            double measure_s =
                minute_ms / 1000.0 * (quick ? sc->quick_measure_min : sc->measure_min);
            int timeout_s = (int)measure_s + 120;
            printf("%s / %s ...", sc->name, systems[k].label);
            fflush(stdout);
            json_t *res = run_child(sc, &systems[k], quick, minute_ms, timeout_s, runs);
            const char *status = json_string_value(json_object_get(res, "status"));
            broken += strcmp(status, "ok") != 0;
            printf(" %s in %.1f s%s%s\n", status, jget(res, "duration_s"),
                   strcmp(status, "ok") != 0 ? ": " : "",
                   strcmp(status, "ok") != 0 ? json_string_value(json_object_get(res, "reason"))
                                             : "");
            json_array_append_new(runs, res);
        }
        print_table(sc, runs);
        char path[256], png[256];
        snprintf(path, sizeof path, "bench/results/compare-%s-%lld.json", sc->name, started);
        snprintf(png, sizeof png, "bench/results/compare-%s-%lld.png", sc->name, started);
        json_t *doc = json_pack(
            "{s:s, s:s, s:I, s:b, s:f, s:{s:i, s:i, s:i, s:s, s:i, s:f, s:s, s:f, s:f, s:s}, s:O}",
            "scenario", sc->name, "what", sc->what, "started_unix", (json_int_t)started, "quick",
            quick, "wall_s", (sl_mono_ms() - t0) / 1000.0, "setup", "tpm", TPM, "rpm", RPM,
            "slices_per_minute", slices_per_minute, "tpm_counting", "sum",
            "interactive_deadline_ms", INTERACTIVE_DEADLINE_MS, "minute_ms", minute_ms,
            "steady_window",
            quick ? "40 % of the measurement to half a minute before its end"
                  : "3 minutes to half a minute before the end",
            "storm_retry_after_share", storm_retry_after_share, "baseline_pause_ms",
            minute_ms * 15.0 / 60.0, "baseline_split", full ? "full" : "share", "runs", runs);
        if (doc == NULL || json_dump_file(doc, path, JSON_INDENT(1)) != 0) {
            fprintf(stderr, "cannot write %s\n", path);
            broken++;
        } else {
            printf("written to %s\n", path);
        }
        json_decref(doc);
        double xmax_s =
            minute_ms * (quick ? sc->quick_measure_min : sc->measure_min) / 1000.0 * 1.05;
        if (!no_plot && plot(sc, runs, minute_ms, xmax_s, png) == 0)
            printf("plot: %s\n", png);
        json_decref(runs);
    }
    return broken > 0 ? 1 : 0;
}
