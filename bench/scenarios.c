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
 * binding limit (or, Anthropic-style, its input and output tokens per minute); every tenant uses
 * its one route. Scenarios:
 *   equal      4 tenants of equal weight, all backlogged: tokens served, Jain's index;
 *   weights    2 tenants weighted 3:1, both backlogged: token shares;
 *   noisy      a batch tenant with 100x the volume of 3 tenants sending interactive jobs at a
 *              few per second: interactive queue wait, expiries, pool utilisation;
 *   guarantee  a tenant with a 50 % guarantee arriving into a pool saturated by borrowers
 *              (skipped when the config does not know "guarantee");
 *   shapes     4 backlogged tenants whose jobs differ in shape (small jobs, long prompts, long
 *              outputs, a mix): shares of the tokens the provider charged, Jain's index;
 *   shapes_itpm  the same against separate input and output limits (ITPM, OTPM counting the
 *              generated output): each tenant's share of each limit, Jain over dominant shares;
 *   shapes_weights, shapes_weights_rev  2 tenants weighted 3:1 with different shapes (long
 *              prompts heavy and small jobs light, then the reverse): charged-token shares;
 *   noisy100, noisy1000  noisy with 6-second minutes of 60 slices, the flood 100x and 1000x:
 *              interactive queue wait over the whole run (the flood's arrival included).
 * Beside each interactive wait the report shows its parts it can see: the broker's
 * acknowledgement of the request (outside sluice) and the scheduler's own queued_ms.
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
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
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
    MAX_SHAPES = 3,
    GRACE_MS = 600,      /* after the measurement, for results of jobs still in flight */
    RESULT_CAP = 1 << 20 /* the most a child may report, in bytes */
};

/* What sluice plans to use of the limit (the deployment's default headroom), and the average
 * job's cost in TPM (prompt + max_tokens) of the default shape, to size backlogs. */
#define HEADROOM 0.97
#define AVG_JOB_TOKENS 930.0
#define DRR_QUANTUM_TOKENS 4096 /* the scheduler's default, left as it is */

/* The sizes of a tenant's jobs: uniform ranges of prompt characters (the simulator counts 4 a
 * token) and of max_tokens. */
typedef struct {
    int prompt_min, prompt_span;
    int maxtok_min, maxtok_span;
} job_shape_t;

static const job_shape_t DEFAULT_SHAPE = {PROMPT_CHARS_MIN, PROMPT_CHARS_SPAN, MAX_TOKENS_MIN,
                                          MAX_TOKENS_SPAN};
/* The shapes of the shapes scenarios: small jobs (prompts of 100 - 300 tokens, max_tokens
 * 50 - 150), long prompts (6,000 - 12,000 tokens, max_tokens 100 - 200), long outputs (prompts
 * of 100 - 300 tokens, max_tokens 2,000 - 4,000). */
#define SHAPE_SMALL                                                                                \
    {                                                                                              \
        400, 800, 50, 100                                                                          \
    }
#define SHAPE_PROMPT                                                                               \
    {                                                                                              \
        24000, 24000, 100, 100                                                                     \
    }
#define SHAPE_OUTPUT                                                                               \
    {                                                                                              \
        400, 800, 2000, 2000                                                                       \
    }
/* The simulator's reply length in the shapes scenarios: one range for every job (it is per
 * deployment), capped at each job's max_tokens, so small jobs and long prompts generate their
 * whole max_tokens and long-output jobs 1,500 - 4,000 tokens (about 80 % of theirs). */
#define SHAPES_OUTPUT_MIN 1500
#define SHAPES_OUTPUT_MAX 4000

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
    int nshapes;       /* each job takes one of shapes, at random; 0 = the default shape
                        * (prompts of 2,800 - 3,600 characters, max_tokens 100 - 160) */
    job_shape_t shapes[MAX_SHAPES];
} tenant_spec_t;

/* What a scenario measures beyond the common figures (see report). */
typedef enum {
    K_EQUAL,
    K_WEIGHTS,
    K_NOISY,
    K_GUARANTEE,
    K_SHAPES,
    K_SHAPES_ITPM,
    K_SHAPES_WEIGHTS
} kind_t;

typedef struct {
    const char *name;
    const char *what;
    kind_t kind;
    double measure_s, quick_measure_s;
    int minute_ms, slices_per_minute; /* 0: MINUTE_MS, SLICES_PER_MINUTE */
    int itpm, otpm;                   /* Anthropic-style limits instead of TPM; 0: TPM */
    int output_min, output_max;       /* the simulator's reply length; 0: 20 - 200 */
    double wait_p99_ms;               /* noisy: target of the interactive p99; 0: one slice */
    double util_target;               /* noisy: target of utilisation; 0: 95 % */
    int ntenants;
    tenant_spec_t tenants[MAX_TENANTS];
} scenario_t;

/* A backlogged tenant. */
#define BACKLOGGED(n, w, c, b)                                                                     \
    {                                                                                              \
        .name = n, .weight = w, .cls = c, .backlog = b                                             \
    }
/* A backlogged standard tenant whose jobs have one shape. */
#define SHAPED(n, w, shape)                                                                        \
    {                                                                                              \
        .name = n, .weight = w, .cls = "standard", .backlog = 4, .nshapes = 1, .shapes = { shape } \
    }
/* The four tenants of the shapes scenarios: one per shape, and one mixing the three. */
#define FOUR_SHAPES                                                                                \
    .ntenants = 4, .output_min = SHAPES_OUTPUT_MIN, .output_max = SHAPES_OUTPUT_MAX,               \
    .tenants = {SHAPED("small", 1, SHAPE_SMALL),                                                   \
                SHAPED("prompt", 1, SHAPE_PROMPT),                                                 \
                SHAPED("output", 1, SHAPE_OUTPUT),                                                 \
                {.name = "mixed",                                                                  \
                 .weight = 1,                                                                      \
                 .cls = "standard",                                                                \
                 .backlog = 4,                                                                     \
                 .nshapes = 3,                                                                     \
                 .shapes = {SHAPE_SMALL, SHAPE_PROMPT, SHAPE_OUTPUT}}}
/* A batch tenant flooding at once x times the volume of each of 3 interactive tenants sending
 * 3 jobs a second. */
#define FLOOD(x)                                                                                   \
    .ntenants = 4,                                                                                 \
    .tenants = {{.name = "bulk", .weight = 1, .cls = "batch", .backlog_jobs = -(x)},               \
                {.name = "i1", .weight = 1, .cls = "interactive", .rate_per_s = 3},                \
                {.name = "i2", .weight = 1, .cls = "interactive", .rate_per_s = 3},                \
                {.name = "i3", .weight = 1, .cls = "interactive", .rate_per_s = 3}}

static const scenario_t scenarios[] = {
    {.name = "equal",
     .what = "4 tenants, equal weights, all backlogged",
     .kind = K_EQUAL,
     .measure_s = 30,
     .quick_measure_s = 6,
     .ntenants = 4,
     .tenants = {BACKLOGGED("a", 1, "standard", 2.5), BACKLOGGED("b", 1, "standard", 2.5),
                 BACKLOGGED("c", 1, "standard", 2.5), BACKLOGGED("d", 1, "standard", 2.5)}},
    {.name = "weights",
     .what = "2 tenants weighted 3:1, both backlogged",
     .kind = K_WEIGHTS,
     .measure_s = 30,
     .quick_measure_s = 6,
     .ntenants = 2,
     .tenants = {BACKLOGGED("heavy", 3, "standard", 2.5), BACKLOGGED("light", 1, "standard", 2.5)}},
    {.name = "noisy",
     .what = "a batch tenant with 100x the volume of 3 interactive tenants",
     .kind = K_NOISY,
     .measure_s = 30,
     .quick_measure_s = 6,
     .wait_p99_ms = 250,
     .util_target = 0.90,
     /* backlog_jobs -100: 100x the volume of one interactive tenant, at once. */
     FLOOD(100)},
    {.name = "guarantee",
     .what = "a tenant with a 50 % guarantee arrives into a pool saturated by borrowers",
     .kind = K_GUARANTEE,
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
    {.name = "shapes",
     .what = "4 tenants, equal weights, backlogged, jobs of 4 shapes (TPM counts prompt + "
             "max_tokens)",
     .kind = K_SHAPES,
     .measure_s = 30,
     .quick_measure_s = 6,
     FOUR_SHAPES},
    /* ITPM and OTPM chosen so that both bind under dominant-resource fairness of these shapes
     * (computed from their average jobs: ITPM 100 %, OTPM 97 %). */
    {.name = "shapes_itpm",
     .what = "the 4 shapes against separate ITPM and OTPM (generated) limits, Anthropic-style",
     .kind = K_SHAPES_ITPM,
     .measure_s = 30,
     .quick_measure_s = 6,
     .itpm = 300000,
     .otpm = 120000,
     FOUR_SHAPES},
    {.name = "shapes_weights",
     .what = "2 tenants weighted 3:1: heavy sends long prompts, light small jobs",
     .kind = K_SHAPES_WEIGHTS,
     .measure_s = 30,
     .quick_measure_s = 6,
     .output_min = SHAPES_OUTPUT_MIN,
     .output_max = SHAPES_OUTPUT_MAX,
     .ntenants = 2,
     .tenants = {SHAPED("heavy", 3, SHAPE_PROMPT), SHAPED("light", 1, SHAPE_SMALL)}},
    {.name = "shapes_weights_rev",
     .what = "2 tenants weighted 3:1: heavy sends small jobs, light long prompts",
     .kind = K_SHAPES_WEIGHTS,
     .measure_s = 30,
     .quick_measure_s = 6,
     .output_min = SHAPES_OUTPUT_MIN,
     .output_max = SHAPES_OUTPUT_MAX,
     .ntenants = 2,
     .tenants = {SHAPED("heavy", 3, SHAPE_SMALL), SHAPED("light", 1, SHAPE_PROMPT)}},
    /* 6-second minutes of 60 slices: a slice is 100 ms, the target of the interactive p99. */
    {.name = "noisy100",
     .what = "a batch flood of 100x the volume of each of 3 interactive tenants, 100 ms slices",
     .kind = K_NOISY,
     .measure_s = 30,
     .quick_measure_s = 6,
     .minute_ms = 6000,
     .slices_per_minute = 60,
     FLOOD(100)},
    {.name = "noisy1000",
     .what = "a batch flood of 1000x the volume of each of 3 interactive tenants, 100 ms slices",
     .kind = K_NOISY,
     .measure_s = 30,
     .quick_measure_s = 6,
     .minute_ms = 6000,
     .slices_per_minute = 60,
     FLOOD(1000)},
};
enum { NSCENARIOS = sizeof scenarios / sizeof scenarios[0] };

/* One job of the run: what was sent, and what its result said. */
typedef struct {
    int tenant;
    int prompt_chars, max_tokens;
    int trickle;            /* produced at its own time (must get a result) */
    double due_ms;          /* when to produce it, from the start of the measurement */
    double sent_ms;         /* wall clock when produced */
    double acked_ms;        /* wall clock when the broker acknowledged it (interactive) */
    b_status_t status;      /* B_NONE until its result arrived */
    double dispatch_ms;     /* wall clock of its (last) dispatch; 0 = never dispatched */
    double queued_ms;       /* the result's timings.queued_ms */
    int64_t input, output;  /* usage: what ITPM and OTPM (generated) count */
    int64_t usage_tokens;   /* usage input + output */
    int64_t charged_tokens; /* usage input + max_tokens: what TPM counts */
} job_t;

/* Which tokens of a job a figure counts. */
typedef enum { TOK_USAGE, TOK_CHARGED, TOK_INPUT, TOK_OUTPUT } tokens_t;

typedef struct {
    const scenario_t *sc;
    int quick;
    double minute_ms; /* the scenario's simulated minute */
    int slices;       /* its enforcement slices a minute */
    double measure_ms;
    double t0_wall; /* wall clock at the start of the measurement */
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

static double minute_of(const scenario_t *sc)
{
    return sc->minute_ms > 0 ? sc->minute_ms : MINUTE_MS;
}

static int slices_of(const scenario_t *sc)
{
    return sc->slices_per_minute > 0 ? sc->slices_per_minute : SLICES_PER_MINUTE;
}

/* Tokens the simulator charged per minute (its counter field: tokens_charged, or
 * input_tokens_charged, output_tokens_charged) between two /stats snapshots, over limit. */
static double utilisation(const run_t *run, json_t *s1, json_t *s2, const char *field, int limit)
{
    if (s1 == NULL || s2 == NULL)
        return NAN;
    double dt_ms = stat_num(s2, "now_ms") - stat_num(s1, "now_ms");
    double tokens = (double)(h_sim_total(s2, field) - h_sim_total(s1, field));
    return dt_ms > 0 ? tokens / ((double)limit * dt_ms / run->minute_ms) : NAN;
}

/* ---- configs ---- */

/* Writes the simulator's and sluice's configs into the temporary directory; returns the path
 * of sluice's (caller frees) and sets *sim_cfg (caller frees). */
static char *write_configs(const scenario_t *sc, int sim_port, char **sim_cfg)
{
    b_pool_t pool = {.bench = "scenario",
                     .minute_ms = minute_of(sc),
                     .rpm = RPM,
                     .tpm = sc->itpm > 0 ? 0 : TPM,
                     .itpm = sc->itpm,
                     .otpm = sc->otpm,
                     .slices_per_minute = slices_of(sc),
                     .ms_per_token = 0.2,
                     .output_min = sc->output_max > 0 ? sc->output_min : 20,
                     .output_max = sc->output_max > 0 ? sc->output_max : 200,
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

static job_shape_t shape_of(const tenant_spec_t *t, int k)
{
    return t->nshapes > 0 ? t->shapes[k] : DEFAULT_SHAPE;
}

/* The jobs a second the whole pool would serve of t's average job, at the headroom: by TPM
 * (prompt + max_tokens), or by the fuller of ITPM and OTPM (generated output, about the
 * simulator's mean reply capped at max_tokens). */
static double pool_jobs_per_s(const scenario_t *sc, const tenant_spec_t *t)
{
    double per_s = 1000.0 / minute_of(sc) * HEADROOM;
    if (t->nshapes == 0 && sc->itpm == 0)
        return TPM * per_s / AVG_JOB_TOKENS;
    double in = 0, maxtok = 0, out = 0, mean_reply = (sc->output_min + sc->output_max) / 2.0;
    int n = t->nshapes > 0 ? t->nshapes : 1;
    for (int k = 0; k < n; k++) {
        job_shape_t sh = shape_of(t, k);
        double mt = sh.maxtok_min + sh.maxtok_span / 2.0;
        in += (sh.prompt_min + sh.prompt_span / 2.0 + 14) / 4.0 / n;
        maxtok += mt / n;
        out += fmin(mt, sc->output_max > 0 ? mean_reply : 110) / n;
    }
    if (sc->itpm == 0)
        return TPM * per_s / (in + maxtok);
    return per_s / fmax(in / sc->itpm, out / sc->otpm);
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
    return (int)ceil(t->backlog * share * pool_jobs_per_s(sc, t) * measure_ms / 1000.0 *
                     (1.0 - t->arrive));
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
        /* One draw for the shape when there is a choice, so the default shape's jobs are the
         * same as before shapes existed. */
        const tenant_spec_t *t = &sc->tenants[run->jobs[i].tenant];
        job_shape_t sh = shape_of(t, t->nshapes > 1 ? (int)(b_rng_uniform() * t->nshapes) : 0);
        run->jobs[i].prompt_chars = sh.prompt_min + (int)(b_rng_uniform() * sh.prompt_span);
        run->jobs[i].max_tokens = sh.maxtok_min + (int)(b_rng_uniform() * sh.maxtok_span);
    }
    qsort(run->jobs, (size_t)n, sizeof *run->jobs, cmp_due);
    for (int i = 0; i < n; i++)
        run->jobs[i].sent_ms = 0;
    run->njobs = n;
    return 0;
}

static int is_batch(const run_t *run, int i)
{
    return strcmp(run->sc->tenants[run->jobs[i].tenant].cls, "batch") == 0;
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

/* The interactive client's delivery reports: when the broker acknowledged each request, so the
 * report can tell time spent reaching the broker (outside sluice) from the rest. */
static void on_acked(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    run_t *run = opaque;
    char idem[128];
    if (m->err || m->key == NULL || m->key_len >= sizeof idem)
        return;
    memcpy(idem, m->key, m->key_len);
    idem[m->key_len] = '\0';
    int i = b_job_index(idem, run->njobs);
    if (i >= 0 && run->jobs[i].acked_ms == 0)
        run->jobs[i].acked_ms = h_wall_ms();
}

/* Batch tenants' jobs are produced by their own Kafka client on their own thread, as a separate
 * team would send them: produced from the main loop, a flood of 90,000 jobs blocks it on the
 * client's full queue for a second or more, and the interactive jobs due meanwhile would all
 * go out together when it ends. */
typedef struct {
    rd_kafka_t *prod;
    run_t *run;
    double mono0, end_ms;
    atomic_int stop; /* set when the measurement ends early */
    pthread_t thread;
    int started;
} flood_t;

static void *flood_main(void *arg)
{
    flood_t *f = arg;
    for (int i = 0; i < f->run->njobs; i++) {
        if (!is_batch(f->run, i))
            continue;
        for (;;) {
            double elapsed = sl_mono_ms() - f->mono0;
            if (elapsed >= f->end_ms || atomic_load(&f->stop))
                return NULL;
            if (f->run->jobs[i].due_ms <= elapsed)
                break;
            rd_kafka_poll(f->prod, 5);
        }
        produce_job(f->prod, f->run, i);
        rd_kafka_poll(f->prod, 0);
    }
    while (sl_mono_ms() - f->mono0 < f->end_ms && !atomic_load(&f->stop))
        rd_kafka_poll(f->prod, 50);
    return NULL;
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
    job->input = r->input;
    job->output = r->output;
    job->usage_tokens = r->input + r->output;
    job->charged_tokens = r->input + job->max_tokens;
    job->queued_ms = r->queued_ms;
    if (r->dispatch_ms >= 0)
        job->dispatch_ms = r->dispatch_ms;
    if (job->status != B_SUCCEEDED)
        note_failure(run, r->status, r->reason);
}

static int64_t tokens_of(const job_t *job, tokens_t what)
{
    switch (what) {
    case TOK_CHARGED:
        return job->charged_tokens;
    case TOK_INPUT:
        return job->input;
    case TOK_OUTPUT:
        return job->output;
    default:
        return job->usage_tokens;
    }
}

/* Tokens of tenant's succeeded jobs dispatched in [from_ms, to_ms) (wall clock). */
static double tokens_in(const run_t *run, int tenant, double from_ms, double to_ms, tokens_t what)
{
    double sum = 0;
    for (int i = 0; i < run->njobs; i++) {
        const job_t *job = &run->jobs[i];
        if (job->tenant == tenant && job->status == B_SUCCEEDED && job->dispatch_ms >= from_ms &&
            job->dispatch_ms < to_ms)
            sum += (double)tokens_of(job, what);
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

/* What the report of one scenario works from: the run, its steady window (wall clock), the
 * simulator's /stats at 20 %, 80 % and the end, each tenant's tokens in the window, and the
 * rows and metrics it adds to. */
typedef struct {
    const run_t *run;
    const scenario_t *sc;
    double t0_ms, w0, w1;
    json_t *s_lo, *s_hi, *s_end;
    json_t *rows, *metrics;
    double usage[MAX_TENANTS], charged[MAX_TENANTS], usum, csum;
} report_t;

/* "name value, name value, ..." of per-tenant values, each printed by fmt (a share in %, or
 * tokens when tokens is set). */
static void per_tenant(const report_t *rp, const double *v, int tokens, char *buf, size_t cap)
{
    size_t bl = 0;
    buf[0] = '\0';
    for (int t = 0; t < rp->sc->ntenants && bl < cap; t++) {
        char val[32];
        if (tokens)
            fmt_tokens(val, sizeof val, v[t]);
        else
            snprintf(val, sizeof val, "%.1f", 100 * v[t]);
        bl += (size_t)snprintf(buf + bl, cap - bl, "%s%s %s", t ? ", " : "",
                               rp->sc->tenants[t].name, val);
    }
}

static json_t *tenant_values(const report_t *rp, const double *v)
{
    json_t *o = json_object();
    for (int t = 0; t < rp->sc->ntenants; t++)
        json_object_set_new(o, rp->sc->tenants[t].name, json_real(v[t]));
    return o;
}

/* The utilisation row of the binding TPM limit, with a target when target > 0. */
static void util_row(const report_t *rp, double target)
{
    double util = utilisation(rp->run, rp->s_lo, rp->s_hi, "tokens_charged", TPM);
    json_object_set_new(rp->metrics, "utilisation", json_real(util));
    char t[16];
    snprintf(t, sizeof t, ">= %.0f %%", 100 * target);
    row(rp->rows, "pool utilisation (TPM), 20-80 %", target > 0 ? t : NULL, util >= target,
        "%.1f %%", 100 * util);
}

/* The rows of every scenario: the simulator's 429s, the jobs that did not succeed, and what
 * each tenant still had queued at the stop (a tenant with none ran out of work before it). */
static void report_end(report_t *rp, json_t *out, json_t *tenants)
{
    const run_t *run = rp->run;
    int64_t refused = rp->s_end != NULL ? h_sim_total(rp->s_end, "refused") : -1;
    json_object_set_new(rp->metrics, "sim_429s", json_integer(refused));
    char buf[256];
    size_t bl = 0;
    buf[0] = '\0';
    /* Which limit refused (the simulator names the one that needed the longest wait). */
    static const char *const dims[][2] = {{"refused_requests_dim", "RPM"},
                                          {"refused_tokens_dim", "TPM"},
                                          {"refused_itpm_dim", "ITPM"},
                                          {"refused_otpm_dim", "OTPM"}};
    for (size_t d = 0; refused > 0 && d < sizeof dims / sizeof dims[0] && bl < sizeof buf; d++) {
        int64_t k = h_sim_total(rp->s_end, dims[d][0]);
        json_object_set_new(rp->metrics, dims[d][0], json_integer(k));
        if (k > 0)
            bl += (size_t)snprintf(buf + bl, sizeof buf - bl, "%s%s %lld", bl ? ", " : " (",
                                   dims[d][1], (long long)k);
    }
    if (bl > 0 && bl < sizeof buf)
        snprintf(buf + bl, sizeof buf - bl, ")");
    row(rp->rows, "simulator 429s", "0", refused == 0, "%lld%s", (long long)refused, buf);
    bl = 0;
    buf[0] = '\0';
    for (int i = 0; i < run->nfail_kinds && bl < sizeof buf; i++)
        bl += (size_t)snprintf(buf + bl, sizeof buf - bl, "; %d %s", run->fail_count[i],
                               run->fail_kind[i]);
    double queued[MAX_TENANTS] = {0};
    int unfinished = 0;
    for (int i = 0; i < run->njobs; i++) {
        int left = run->jobs[i].sent_ms > 0 && run->jobs[i].status == B_NONE;
        unfinished += left;
        queued[run->jobs[i].tenant] += left;
    }
    json_object_set_new(rp->metrics, "not_succeeded", json_integer(run->failed_total));
    json_object_set_new(rp->metrics, "still_queued_at_stop", json_integer(unfinished));
    json_object_set_new(rp->metrics, "duplicate_results", json_integer(run->duplicates));
    row(rp->rows, "jobs that did not succeed", "0", run->failed_total == 0, "%d%s",
        run->failed_total, buf);
    row(rp->rows, "backlog still queued at the stop", NULL, 0, "%d of %d", unfinished, run->njobs);
    bl = 0;
    buf[0] = '\0';
    for (int t = 0; t < rp->sc->ntenants && bl < sizeof buf; t++)
        bl += (size_t)snprintf(buf + bl, sizeof buf - bl, "%s%s %.0f", t ? ", " : "",
                               rp->sc->tenants[t].name, queued[t]);
    row(rp->rows, "  per tenant", NULL, 0, "%s", buf);
    json_object_set_new(out, "tenants", tenants);
    json_object_set_new(out, "metrics", rp->metrics);
    json_object_set_new(out, "rows", rp->rows);
}

static void report_equal(const report_t *rp)
{
    int n = rp->sc->ntenants;
    double j_usage = b_jain(rp->usage, n), j_charged = b_jain(rp->charged, n);
    json_object_set_new(rp->metrics, "jain_usage", json_real(j_usage));
    json_object_set_new(rp->metrics, "jain_charged", json_real(j_charged));
    row(rp->rows, "Jain's index, usage tokens", ">= 0.99", j_usage >= 0.99, "%.4f", j_usage);
    row(rp->rows, "Jain's index, prompt + max_tokens", NULL, 0, "%.4f", j_charged);
    util_row(rp, 0);
}

static void report_weights(const report_t *rp)
{
    double share = rp->usum > 0 ? rp->usage[0] / rp->usum : NAN;
    double share_c = rp->csum > 0 ? rp->charged[0] / rp->csum : NAN;
    json_object_set_new(rp->metrics, "share_heavy_usage", json_real(share));
    json_object_set_new(rp->metrics, "share_heavy_charged", json_real(share_c));
    row(rp->rows, "share heavy/light, usage tokens", "75/25 +- 3", fabs(share - 0.75) <= 0.03,
        "%.1f/%.1f", 100 * share, 100 * (1 - share));
    row(rp->rows, "share heavy/light, prompt + max_tokens", NULL, 0, "%.1f/%.1f", 100 * share_c,
        100 * (1 - share_c));
    util_row(rp, 0);
}

/* Interactive waits of the whole run and of the jobs sent in the steady window, the expiries,
 * and utilisation. A wait is from the moment the job was produced to sluice.requests to its
 * (last) dispatch, so time spent in ingest counts; the scheduler's own timings.queued_ms (from
 * ingest's submit time) is shown beside it. The target of the p99 is the scenario's, else one
 * slice. The jobs that missed it are listed in the JSON (when they were sent, how long). */
static void report_noisy(const report_t *rp)
{
    const run_t *run = rp->run;
    const scenario_t *sc = rp->sc;
    double *waits = calloc(4 * ((size_t)run->njobs + 1), sizeof *waits);
    if (waits == NULL)
        return;
    double *steady = waits + run->njobs + 1;
    double *queued = steady + run->njobs + 1;
    double *acked = queued + run->njobs + 1;
    double target = sc->wait_p99_ms > 0 ? sc->wait_p99_ms : run->minute_ms / run->slices;
    json_t *late = json_array();
    int nw = 0, ns = 0, na = 0, n_int = 0, expired = 0, missing = 0;
    for (int i = 0; i < run->njobs; i++) {
        const job_t *job = &run->jobs[i];
        if (strcmp(sc->tenants[job->tenant].cls, "interactive") != 0 || job->sent_ms == 0)
            continue;
        n_int++;
        expired += job->status == B_EXPIRED;
        missing += job->status == B_NONE;
        if (job->status != B_SUCCEEDED || job->dispatch_ms == 0)
            continue;
        double wait = job->dispatch_ms - job->sent_ms;
        wait = wait > 0 ? wait : 0;
        queued[nw] = job->queued_ms;
        if (job->acked_ms > 0) /* a request whose delivery report never came is left out */
            acked[na++] = job->acked_ms > job->sent_ms ? job->acked_ms - job->sent_ms : 0;
        waits[nw++] = wait;
        if (job->sent_ms >= rp->w0 && job->sent_ms < rp->w1)
            steady[ns++] = wait;
        if (wait > target && json_array_size(late) < 200) {
            double ack = job->acked_ms > 0 ? job->acked_ms - job->sent_ms : -1.0;
            json_array_append_new(
                late, json_pack("{s:f, s:f, s:f, s:f}", "sent_s",
                                (job->sent_ms - run->t0_wall) / 1000.0, "wait_ms", wait,
                                "acked_ms", ack, "queued_ms", job->queued_ms));
        }
    }
    qsort(waits, (size_t)nw, sizeof *waits, b_cmp_double);
    qsort(steady, (size_t)ns, sizeof *steady, b_cmp_double);
    qsort(queued, (size_t)nw, sizeof *queued, b_cmp_double);
    qsort(acked, (size_t)na, sizeof *acked, b_cmp_double);
    double p50 = b_pct(waits, nw, 0.5), p99 = b_pct(waits, nw, 0.99), max = b_pct(waits, nw, 1);
    double s50 = b_pct(steady, ns, 0.5), s99 = b_pct(steady, ns, 0.99);
    double smax = b_pct(steady, ns, 1);
    double q50 = b_pct(queued, nw, 0.5), q99 = b_pct(queued, nw, 0.99);
    double a50 = b_pct(acked, na, 0.5), a99 = b_pct(acked, na, 0.99);
    json_object_set_new(rp->metrics, "interactive_jobs", json_integer(n_int));
    json_object_set_new(
        rp->metrics, "interactive_wait_ms",
        json_pack("{s:f, s:f, s:f, s:i}", "p50", p50, "p99", p99, "max", max, "n", nw));
    json_object_set_new(
        rp->metrics, "interactive_wait_ms_steady_window",
        json_pack("{s:f, s:f, s:f, s:i}", "p50", s50, "p99", s99, "max", smax, "n", ns));
    json_object_set_new(rp->metrics, "interactive_scheduler_queued_ms",
                        json_pack("{s:f, s:f}", "p50", q50, "p99", q99));
    json_object_set_new(rp->metrics, "interactive_broker_ack_ms",
                        json_pack("{s:f, s:f, s:i}", "p50", a50, "p99", a99, "n", na));
    json_object_set_new(rp->metrics, "interactive_wait_p99_target_ms", json_real(target));
    json_object_set_new(rp->metrics, "interactive_over_target", late);
    json_object_set_new(rp->metrics, "interactive_expired", json_integer(expired));
    json_object_set_new(rp->metrics, "interactive_missing", json_integer(missing));
    char t[32];
    snprintf(t, sizeof t, "<= %.0f ms", target);
    row(rp->rows, "interactive wait p50, whole run", NULL, 0, "%.1f ms (n=%d)", p50, nw);
    row(rp->rows, "interactive wait p99, whole run", t, p99 <= target, "%.1f ms (max %.1f)", p99,
        max);
    row(rp->rows, "  sent in the 20-80 % window, p50/p99/max", NULL, 0,
        "%.1f / %.1f / %.1f ms (n=%d)", s50, s99, smax, ns);
    row(rp->rows, "  in the scheduler only (queued_ms) p50/p99", NULL, 0, "%.1f / %.1f ms", q50,
        q99);
    row(rp->rows, "  the broker's ack of the request p50/p99", NULL, 0, "%.1f / %.1f ms (n=%d)",
        a50, a99, na);
    row(rp->rows, "interactive jobs expired", "0", expired == 0, "%d of %d", expired, n_int);
    util_row(rp, sc->util_target > 0 ? sc->util_target : 0.95);
    free(waits);
}

/* The late tenant's share in its first simulated minute and after it. */
static void report_guarantee(const report_t *rp)
{
    const run_t *run = rp->run;
    const scenario_t *sc = rp->sc;
    int late = sc->ntenants - 1;
    double arrive = INFINITY;
    for (int i = 0; i < run->njobs; i++) {
        if (run->jobs[i].tenant == late && run->jobs[i].sent_ms > 0 &&
            run->jobs[i].sent_ms < arrive)
            arrive = run->jobs[i].sent_ms;
    }
    double first[2] = {0, 0}, steady[2] = {0, 0}, end = rp->t0_ms + run->measure_ms;
    for (int t = 0; t < sc->ntenants; t++) {
        first[t == late] += tokens_in(run, t, arrive, arrive + run->minute_ms, TOK_USAGE);
        steady[t == late] += tokens_in(run, t, arrive + run->minute_ms, end, TOK_USAGE);
    }
    double g = sc->tenants[late].guarantee;
    double share1 = first[1] / (first[0] + first[1]);
    double share2 = steady[1] / (steady[0] + steady[1]);
    json_object_set_new(rp->metrics, "late_share_first_minute", json_real(share1));
    json_object_set_new(rp->metrics, "late_share_steady", json_real(share2));
    char target[32];
    snprintf(target, sizeof target, ">= %.0f - 3", 100 * g);
    row(rp->rows, "late tenant's share, first minute", target, share1 >= g - 0.03, "%.1f %%",
        100 * share1);
    row(rp->rows, "late tenant's share, after it", target, share2 >= g - 0.03, "%.1f %%",
        100 * share2);
    util_row(rp, 0);
}

/* Each tenant's share of the tokens the provider charged (prompt + max_tokens: what TPM
 * counts), and Jain's index over them. */
static void report_shapes(const report_t *rp)
{
    int n = rp->sc->ntenants;
    double share[MAX_TENANTS];
    for (int t = 0; t < n; t++)
        share[t] = rp->csum > 0 ? rp->charged[t] / rp->csum : NAN;
    char buf[256];
    per_tenant(rp, rp->charged, 1, buf, sizeof buf);
    row(rp->rows, "charged (prompt + max_tokens), 20-80 %", NULL, 0, "%s", buf);
    per_tenant(rp, share, 0, buf, sizeof buf);
    row(rp->rows, "share of charged tokens, %", NULL, 0, "%s", buf);
    double jain = b_jain(rp->charged, n);
    json_object_set_new(rp->metrics, "share_charged", tenant_values(rp, share));
    json_object_set_new(rp->metrics, "jain_charged", json_real(jain));
    json_object_set_new(rp->metrics, "jain_usage", json_real(b_jain(rp->usage, n)));
    row(rp->rows, "Jain's index, charged tokens", ">= 0.99", jain >= 0.99, "%.4f", jain);
    row(rp->rows, "Jain's index, usage tokens", NULL, 0, "%.4f", b_jain(rp->usage, n));
    util_row(rp, 0.95);
}

/* Each tenant's share of ITPM (its input tokens) and of OTPM (its generated output), each of
 * the limit's capacity over the window; its dominant share (the larger); Jain's index over
 * the dominant shares; the utilisation of each limit. */
static void report_shapes_itpm(const report_t *rp)
{
    const run_t *run = rp->run;
    const scenario_t *sc = rp->sc;
    int n = sc->ntenants;
    double minutes = (rp->w1 - rp->w0) / run->minute_ms;
    double in[MAX_TENANTS], out[MAX_TENANTS], dom[MAX_TENANTS];
    for (int t = 0; t < n; t++) {
        in[t] = tokens_in(run, t, rp->w0, rp->w1, TOK_INPUT) / (sc->itpm * minutes);
        out[t] = tokens_in(run, t, rp->w0, rp->w1, TOK_OUTPUT) / (sc->otpm * minutes);
        dom[t] = fmax(in[t], out[t]);
    }
    char buf[256];
    per_tenant(rp, in, 0, buf, sizeof buf);
    row(rp->rows, "share of ITPM (input), %", NULL, 0, "%s", buf);
    per_tenant(rp, out, 0, buf, sizeof buf);
    row(rp->rows, "share of OTPM (generated output), %", NULL, 0, "%s", buf);
    per_tenant(rp, dom, 0, buf, sizeof buf);
    row(rp->rows, "dominant share, %", NULL, 0, "%s", buf);
    double jain = b_jain(dom, n);
    double ui = utilisation(run, rp->s_lo, rp->s_hi, "input_tokens_charged", sc->itpm);
    double uo = utilisation(run, rp->s_lo, rp->s_hi, "output_tokens_charged", sc->otpm);
    json_object_set_new(rp->metrics, "share_itpm", tenant_values(rp, in));
    json_object_set_new(rp->metrics, "share_otpm", tenant_values(rp, out));
    json_object_set_new(rp->metrics, "dominant_share", tenant_values(rp, dom));
    json_object_set_new(rp->metrics, "jain_dominant", json_real(jain));
    json_object_set_new(rp->metrics, "utilisation_itpm", json_real(ui));
    json_object_set_new(rp->metrics, "utilisation_otpm", json_real(uo));
    row(rp->rows, "Jain's index, dominant shares", ">= 0.99", jain >= 0.99, "%.4f", jain);
    row(rp->rows, "utilisation ITPM / OTPM, 20-80 %", NULL, 0, "%.1f %% / %.1f %%", 100 * ui,
        100 * uo);
    row(rp->rows, "utilisation of the fuller limit", ">= 95 %", fmax(ui, uo) >= 0.95, "%.1f %%",
        100 * fmax(ui, uo));
}

/* Two tenants weighted 3:1 with different shapes: their shares of the charged tokens. */
static void report_shapes_weights(const report_t *rp)
{
    double share_c = rp->csum > 0 ? rp->charged[0] / rp->csum : NAN;
    double share = rp->usum > 0 ? rp->usage[0] / rp->usum : NAN;
    json_object_set_new(rp->metrics, "share_heavy_charged", json_real(share_c));
    json_object_set_new(rp->metrics, "share_heavy_usage", json_real(share));
    row(rp->rows, "share heavy/light, charged tokens", "75/25 +- 2", fabs(share_c - 0.75) <= 0.02,
        "%.1f/%.1f", 100 * share_c, 100 * (1 - share_c));
    row(rp->rows, "share heavy/light, usage tokens", NULL, 0, "%.1f/%.1f", 100 * share,
        100 * (1 - share));
    util_row(rp, 0.95);
}

/* Per-tenant figures common to every scenario, the figures of the scenario's kind, and the
 * 429s and failures of every scenario. */
static void report(const run_t *run, double t0_ms, json_t *s_lo, json_t *s_hi, json_t *s_end,
                   json_t *out)
{
    const scenario_t *sc = run->sc;
    double m = run->measure_ms;
    report_t rp = {.run = run,
                   .sc = sc,
                   .t0_ms = t0_ms,
                   .w0 = t0_ms + 0.2 * m,
                   .w1 = t0_ms + 0.8 * m,
                   .s_lo = s_lo,
                   .s_hi = s_hi,
                   .s_end = s_end,
                   .rows = json_array(),
                   .metrics = json_object()};
    json_t *tenants = json_array();
    for (int t = 0; t < sc->ntenants; t++) {
        rp.usage[t] = tokens_in(run, t, rp.w0, rp.w1, TOK_USAGE);
        rp.charged[t] = tokens_in(run, t, rp.w0, rp.w1, TOK_CHARGED);
        rp.usum += rp.usage[t];
        rp.csum += rp.charged[t];
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
        json_t *tj =
            json_pack("{s:s, s:I, s:s, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f}", "name",
                      ts->name, "weight", (json_int_t)ts->weight, "class", ts->cls, "submitted",
                      submitted, "results", results, "succeeded", ok, "expired", expired,
                      "usage_tokens_window", rp.usage[t], "charged_tokens_window", rp.charged[t],
                      "input_tokens_window", tokens_in(run, t, rp.w0, rp.w1, TOK_INPUT),
                      "output_tokens_window", tokens_in(run, t, rp.w0, rp.w1, TOK_OUTPUT),
                      "share_usage", rp.usum > 0 ? rp.usage[t] / rp.usum : 0, "share_charged",
                      rp.csum > 0 ? rp.charged[t] / rp.csum : 0);
        if (ts->guarantee > 0)
            json_object_set_new(tj, "guarantee", json_real(ts->guarantee));
        json_array_append_new(tenants, tj);
    }

    char buf[256];
    per_tenant(&rp, rp.usage, 1, buf, sizeof buf);
    row(rp.rows, "tokens served, 20-80 % window", NULL, 0, "%s", buf);
    switch (sc->kind) {
    case K_EQUAL:
        report_equal(&rp);
        break;
    case K_WEIGHTS:
        report_weights(&rp);
        break;
    case K_NOISY:
        report_noisy(&rp);
        break;
    case K_GUARANTEE:
        report_guarantee(&rp);
        break;
    case K_SHAPES:
        report_shapes(&rp);
        break;
    case K_SHAPES_ITPM:
        report_shapes_itpm(&rp);
        break;
    case K_SHAPES_WEIGHTS:
        report_shapes_weights(&rp);
        break;
    }
    report_end(&rp, out, tenants);
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
    run_t run = {.sc = sc, .quick = quick, .minute_ms = minute_of(sc), .slices = slices_of(sc)};
    run.measure_ms = 1000.0 * (quick ? sc->quick_measure_s : sc->measure_s);
    b_rng_seed(0x5eed0000u + (uint64_t)(sc - scenarios));
    json_object_set_new(out, "measure_s", json_real(run.measure_ms / 1000.0));
    json_object_set_new(out, "setup",
                        json_pack("{s:f, s:i, s:i, s:i, s:i, s:i, s:i}", "minute_ms", run.minute_ms,
                                  "slices_per_minute", run.slices, "tpm", sc->itpm > 0 ? 0 : TPM,
                                  "itpm", sc->itpm, "otpm", sc->otpm, "output_min",
                                  sc->output_max > 0 ? sc->output_min : 20, "output_max",
                                  sc->output_max > 0 ? sc->output_max : 200));
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
    rd_kafka_t *prod = h_producer_dr(st.bootstrap, on_acked, &run);
    rd_kafka_t *prod_batch = h_producer(st.bootstrap);
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
    run.t0_wall = t0_ms;
    flood_t flood = {
        .prod = prod_batch, .run = &run, .mono0 = mono0, .end_ms = run.measure_ms + GRACE_MS};
    atomic_init(&flood.stop, 0);
    flood.started = pthread_create(&flood.thread, NULL, flood_main, &flood) == 0;
    if (!flood.started)
        broken = "cannot start the batch tenants' thread";
    int next = 0;
    while (broken == NULL) {
        double elapsed = sl_mono_ms() - mono0;
        if (elapsed >= run.measure_ms + GRACE_MS)
            break;
        for (; next < run.njobs && run.jobs[next].due_ms <= elapsed; next++) {
            if (!is_batch(&run, next))
                produce_job(prod, &run, next);
        }
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
    atomic_store(&flood.stop, 1);
    if (flood.started)
        pthread_join(flood.thread, NULL);
    rd_kafka_destroy(prod);
    rd_kafka_destroy(prod_batch);
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
static json_t *run_child(const scenario_t *sc, int quick)
{
    child_arg_t arg = {.sc = sc, .quick = quick};
    /* The stack, the warm-up, the wait for the last interactive results and the stop around
     * the measurement take under a minute, more with a large flood to store and stop. */
    int timeout_s = (int)(quick ? sc->quick_measure_s : sc->measure_s) + (quick ? 84 : 150);
    json_t *head = json_pack("{s:s, s:s}", "name", sc->name, "what", sc->what);
    json_t *res = b_run_in_child(child_run, &arg, head, NULL, sc->name, timeout_s, RESULT_CAP);
    json_decref(head);
    return res;
}

static void print_table(json_t *all)
{
    printf("\n%-18s %-40s %-44s %-12s %s\n", "scenario", "figure", "value", "target", "");
    size_t i;
    json_t *sc;
    json_array_foreach(all, i, sc)
    {
        const char *name = json_string_value(json_object_get(sc, "name"));
        const char *status = json_string_value(json_object_get(sc, "status"));
        double secs = json_number_value(json_object_get(sc, "duration_s"));
        if (strcmp(status, "ok") != 0) {
            printf("%-18s %s: %s\n", name, status,
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
            printf("%-18s %-40s %-44s %-12s %s\n", k == 0 ? name : "",
                   json_string_value(json_object_get(r, "figure")),
                   json_string_value(json_object_get(r, "value")), target ? target : "",
                   result ? result : "");
        }
        if (json_object_get(sc, "rows") != NULL)
            printf("%-18s %-40s %.1f s (measurement %.0f s)\n", "", "wall time, stack included",
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
            "deployment, TPM %d counting prompt + max_tokens, %d ms minutes of %d slices;\n"
            "shapes_itpm: ITPM and OTPM instead; noisy100 and noisy1000: 6 s minutes of 60\n"
            "slices), each scenario on a fresh stack: tokens served and charged per tenant,\n"
            "Jain's index, weighted shares, shares of each limit for jobs of different shapes,\n"
            "interactive queue wait beside a batch flood, a guaranteed share, utilisation and\n"
            "the simulator's 429s, each against its target. Prints a table and writes\n"
            "bench/results/scenarios-<unix time>.json.\n"
            "  --scenario NAME  one of:",
            TPM, MINUTE_MS, SLICES_PER_MINUTE);
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
        json_t *res = run_child(sc, quick);
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
