/* run.c - see run.h. */
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "figures.h"
#include "group.h"
#include "harness.h"
#include "run_baseline.h"
#include "run_sluice.h"
#include "sign.h"
#include "stats.h"
#include "util.h"
#include "warmup.h"
#include "workload.h"

enum { RESULT_CAP = 4 << 20 }; /* the most a child may report, in bytes */

void b_run_count_reason(b_run_t *run, const char *status, const char *reason)
{
    char key[128];
    snprintf(key, sizeof key, "%s%s%s", status, reason != NULL ? " " : "",
             reason != NULL ? reason : "");
    json_t *v = json_object_get(run->reasons, key);
    json_object_set_new(run->reasons, key, json_integer(json_integer_value(v) + 1));
}

void b_run_sample(b_run_t *run, const char *stats_url, double t_ms)
{
    if (run->nsamples >= run->samples_cap)
        return;
    b_sample_t *smp = &run->samples[run->nsamples];
    if (b_sim_stats_read(stats_url, &smp->sim) != 0)
        return;
    smp->t_ms = t_ms;
    run->nsamples++;
}

static int alloc_samples(b_run_t *run)
{
    run->samples_cap = (int)((run->measure_ms + run->grace_ms + 60000) / run->sample_ms) + 16;
    run->samples = calloc((size_t)run->samples_cap, sizeof *run->samples);
    return run->samples != NULL ? 0 : -1;
}

/* The daily request quota of a run, or 0: a share of the workload, plus the warm-up jobs when
 * sluice runs (the baseline has none), so both get the same number of workload calls. */
static long rpd_of(const b_run_t *run)
{
    if (run->sc->rpd_share <= 0)
        return 0;
    return (long)(run->sc->rpd_share * run->njobs) + (run->sys->baseline ? 0 : B_WARM_JOBS);
}

int b_run_slices(const b_run_t *run)
{
    return run->sc->slices_per_minute > 0 ? run->sc->slices_per_minute
                                          : run->setup->slices_per_minute;
}

b_pool_t b_run_pool(const b_run_t *run, int sim_port)
{
    const b_scenario_t *sc = run->sc;
    b_pool_t pool = {.bench = "compare",
                     .minute_ms = run->minute_ms,
                     .rpm = B_RPM,
                     .tpm = B_TPM,
                     .slices_per_minute = b_run_slices(run),
                     .rpd = rpd_of(run),
                     .rolling_minute = sc->rolling_minute,
                     .ms_per_token = sc->ms_per_token,
                     .output_min = sc->output_min,
                     .output_max = sc->output_max,
                     .sim_port = sim_port,
                     .interactive_deadline_ms = B_INTERACTIVE_DEADLINE_MS,
                     .metrics_port = run->metrics_port,
                     .ntenants = sc->ntenants};
    for (int i = 0; i < sc->ntenants; i++)
        pool.tenants[i] = (b_pool_tenant_t){.name = sc->tenants[i].name, .weight = 1};
    if (sc->fault == B_FAULT_429) {
        /* A Retry-After of 1 s, scaled like everything else to the shortened minute. */
        snprintf(pool.faults, sizeof pool.faults,
                 "{\"rate_limit_share\": 0.3, \"retry_after_share\": %.3f,"
                 " \"retry_after_ms\": %.0f, \"seed\": 7}",
                 run->setup->storm_retry_after_share, 1000.0 * run->minute_ms / 60000.0);
    } else if (sc->fault == B_FAULT_503) {
        snprintf(pool.faults, sizeof pool.faults, "{\"overloaded_share\": 0.3, \"seed\": 7}");
    } else if (sc->fault == B_FAULT_CUT) {
        snprintf(pool.faults, sizeof pool.faults, "{\"stream_cut_share\": 0.15, \"seed\": 7}");
    }
    return pool;
}

static void free_seen(const char *key, void *value, void *arg)
{
    (void)key;
    (void)arg;
    free(value);
}

void b_run_measure(const b_scenario_t *sc, const b_system_t *sys, const b_setup_t *setup,
                   json_t *out)
{
    b_scenario_t eff = b_scenario_with_defaults(sc);
    double minute_ms = setup->minute_ms;
    b_run_t run = {.sc = &eff, .sys = sys, .setup = setup, .minute_ms = minute_ms};
    run.measure_ms = minute_ms * (setup->quick ? sc->quick_measure_min : sc->measure_min);
    run.grace_ms = minute_ms * eff.grace_min;
    /* The steady window starts once the baseline's initial stock (its buckets start with a
     * whole minute of capacity) is spent: 3 minutes in the full run, 40 % of the quick one. */
    run.win0_ms = setup->quick ? 0.4 * run.measure_ms : 3 * minute_ms;
    run.win1_ms = run.measure_ms - minute_ms / 2;
    run.sample_ms = minute_ms / 12;
    run.extra = json_object();
    run.reasons = json_object();
    run.streams = eff.stream ? sl_hmap_new() : NULL;
    b_rng_seed(0x5eed0000u + (uint64_t)b_scenario_index(sc));
    json_object_set_new(out, "measure_s", json_real(run.measure_ms / 1000.0));
    json_object_set_new(out, "window_s",
                        json_pack("[f, f]", run.win0_ms / 1000.0, run.win1_ms / 1000.0));
    const char *broken = NULL;
    if (b_workload_make(&run) != 0 || alloc_samples(&run) != 0)
        broken = "out of memory";
    if (broken == NULL)
        broken = sys->baseline ? b_run_baseline(&run) : b_run_sluice(&run);
    json_object_set_new(out, "status", json_string(broken ? "broken" : "ok"));
    if (broken != NULL)
        json_object_set_new(out, "reason", json_string(broken));
    json_object_set_new(out, "jobs", json_integer(run.njobs));
    json_object_set_new(out, "samples", json_integer(run.nsamples));
    json_t *fig = run.njobs > 0 ? b_figures(&run) : NULL;
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

/* What the child of one run is given. */
typedef struct {
    const b_scenario_t *sc;
    const b_system_t *sys;
    const b_setup_t *setup;
} child_arg_t;

static void child_run(void *arg, json_t *report)
{
    const child_arg_t *a = arg;
    sl_crypto_init();
    b_run_measure(a->sc, a->sys, a->setup, report);
}

json_t *b_run_child(const b_scenario_t *sc, const b_system_t *sys, const b_setup_t *setup,
                    int timeout_s, json_t *parent_state)
{
    double started_ms = sl_mono_ms();
    child_arg_t arg = {.sc = sc, .sys = sys, .setup = setup};
    json_t *head = json_pack("{s:s, s:b, s:f, s:b}", "system", sys->label, "baseline",
                             sys->baseline, "fraction", sys->fraction, "full", sys->full);
    json_t *res =
        b_run_in_child(child_run, &arg, head, parent_state, sys->label, timeout_s, RESULT_CAP);
    json_decref(head);
    if (json_object_get(res, "duration_s") == NULL)
        json_object_set_new(res, "duration_s", json_real((sl_mono_ms() - started_ms) / 1000.0));
    return res;
}
