/* run.h - one run of bench/compare: one system (sluice, or the cookbook baseline at a fraction
 * of the limits) on one scenario: the jobs of the workload and what became of each, and the
 * simulator's counters sampled through the run.
 *
 * The idea to hold first: the run record is the benchmark's data, not an object. The workload
 * (workload.h) makes the jobs, a runner (run_sluice.h, run_baseline.h) fills in what happened
 * to them and the samples, and the figures (figures.h) are computed from it; so its fields
 * are public. A run happens in a child process of its own (b_run_child), so that a stack that
 * does not start, hangs or leaks stays in it. */
#ifndef SL_BENCH_RUN_H
#define SL_BENCH_RUN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "collect.h"
#include "hmap.h"
#include "pool.h"
#include "result.h"
#include "scenario.h"

/* A system measured: sluice, or the baseline with its clients' share of the limits. */
typedef struct {
    int baseline;    /* 0: sluice */
    double fraction; /* of the real limits the baseline's clients are given */
    int full;        /* each client gets limit x fraction (else limit x fraction / tenants) */
    char label[32];
} b_system_t;

/* What every run of one invocation shares: compare's options. */
typedef struct {
    int quick;                      /* the quick measurement (quick_measure_min) */
    double minute_ms;               /* a simulated minute */
    int slices_per_minute;          /* the provider's enforcement slices, simulator and sluice */
    double storm_retry_after_share; /* the storm's share of injected 429s with a Retry-After */
} b_setup_t;

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
} b_job_t;

/* What the runner saw on sluice.stream for one job id. */
typedef struct {
    double first_ms; /* first chunk received, after the start of the measurement */
    int chunks;      /* every chunk of every attempt */
    int cut;         /* attempts that ended with a done chunk without finish_reason */
    int finished;    /* attempts that ended with a finish_reason */
} b_stream_seen_t;

/* One sample of the simulator's counters. */
typedef struct {
    double t_ms; /* after the start of the measurement (wall clock) */
    b_sim_stats_t sim;
} b_sample_t;

typedef struct {
    const b_scenario_t *sc; /* with its defaults filled in */
    const b_system_t *sys;
    const b_setup_t *setup;
    double minute_ms, measure_ms, grace_ms, sample_ms;
    double win0_ms, win1_ms; /* the steady window of the measurement */
    b_job_t *jobs;
    int njobs;
    b_sample_t *samples;
    int nsamples, samples_cap;
    double t0_wall;   /* wall clock at the start of the measurement */
    int metrics_port; /* the scheduler's /metrics (sluice) */
    int duplicates;
    json_t *extra;      /* per-system details (client summaries, RSS) */
    json_t *reasons;    /* error reasons of the jobs that did not succeed, counted */
    sl_hmap_t *streams; /* job id -> b_stream_seen_t (streamed scenarios) */
    int stream_bad;     /* chunks that did not parse */
} b_run_t;

/* Measures sys on sc (its table entry) in this process, on a fresh stack or simulator in the
 * harness's temporary directory, and adds to out: "status" ("ok" or "broken", with a
 * "reason"), the measurement and window, "jobs", "samples", "figures" and "details". The
 * caller owns out. */
void b_run_measure(const b_scenario_t *sc, const b_system_t *sys, const b_setup_t *setup,
                   json_t *out);

/* Runs b_run_measure in a child process (its own process group, stopped after timeout_s) and
 * returns its report with "system", "baseline", "fraction", "full" and "duration_s"; status
 * "broken" when the child did not report. parent_state is the caller's JSON at the fork (may
 * be NULL), which the child releases before it exits, so that a leak check in the child sees
 * only its own. The caller frees the result. */
json_t *b_run_child(const b_scenario_t *sc, const b_system_t *sys, const b_setup_t *setup,
                    int timeout_s, json_t *parent_state);

/* Counts one job that did not succeed under "<status> <reason>" in run->reasons. */
void b_run_count_reason(b_run_t *run, const char *status, const char *reason);

/* Takes one sample of the simulator at stats_url, at t_ms; a simulator that does not answer,
 * or a full sample array, leaves no sample. */
void b_run_sample(b_run_t *run, const char *stats_url, double t_ms);

/* The configs of the run's simulator and sluice: the scenario's faults, replies, daily quota
 * and rolling minute, the setup's minute, the scenario's slices (else the setup's), the
 * scenario's tenants. */
b_pool_t b_run_pool(const b_run_t *run, int sim_port);

/* The provider's enforcement slices a minute in this run: the scenario's, else the setup's. */
int b_run_slices(const b_run_t *run);

#endif
