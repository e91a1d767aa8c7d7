/* workload.c - see workload.h. */
#include "workload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "request.h"
#include "stats.h"

enum { MAX_JOBS = 200000 }; /* a bound on the workload, so memory stays bounded */

static int cmp_due(const void *a, const void *b)
{
    const b_job_t *x = a, *y = b;
    if (x->due_ms != y->due_ms)
        return x->due_ms < y->due_ms ? -1 : 1;
    /* Same time (a backlog): keep the order they were made in (round-robin over tenants). */
    return x->submit_ms < y->submit_ms ? -1 : x->submit_ms > y->submit_ms;
}

int b_workload_make(b_run_t *run)
{
    const b_scenario_t *sc = run->sc;
    double jobs_per_ms = (double)B_TPM / b_scenario_avg_job_tokens(sc) / run->minute_ms;
    double burst0 = sc->burst_at * run->measure_ms;
    double burst1 = burst0 + sc->burst_minutes * run->minute_ms;
    double cap_d = 16;
    int backlog[B_MAX_TENANTS];
    for (int i = 0; i < sc->ntenants; i++) {
        const b_tenant_spec_t *t = &sc->tenants[i];
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
            run->jobs[n] = (b_job_t){.tenant = i, .due_ms = 0, .submit_ms = n};
            n++;
        }
        if (!any)
            break;
    }
    /* Poisson arrivals per tenant; the rate changes inside the burst window (the draw at the
     * edge is redone from the edge, which keeps the process memoryless). */
    for (int i = 0; i < sc->ntenants; i++) {
        const b_tenant_spec_t *t = &sc->tenants[i];
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
            run->jobs[n] = (b_job_t){.tenant = i, .due_ms = at, .submit_ms = n};
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
        b_job_t *job = &run->jobs[i];
        job->submit_ms = job->start_ms = job->end_ms = -1;
    }
    run->njobs = n;
    return 0;
}

/* qsort has no argument for its comparator: the jobs cmp_cancel indexes into. */
static const b_job_t *cancel_sort_jobs;

static int cmp_cancel(const void *a, const void *b)
{
    const b_job_t *x = &cancel_sort_jobs[*(const int *)a], *y = &cancel_sort_jobs[*(const int *)b];
    double tx = x->due_ms + x->cancel_after_ms, ty = y->due_ms + y->cancel_after_ms;
    return tx < ty ? -1 : tx > ty;
}

int *b_workload_cancel_order(const b_run_t *run, int *n)
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

int b_workload_write_requests(const b_run_t *run, char paths[][512])
{
    const b_scenario_t *sc = run->sc;
    FILE *f[B_MAX_TENANTS] = {0};
    int rc = 0;
    for (int t = 0; t < sc->ntenants && rc == 0; t++) {
        snprintf(paths[t], 512, "%s/requests-%s.jsonl", h_tmpdir(), sc->tenants[t].name);
        f[t] = fopen(paths[t], "w");
        if (f[t] == NULL)
            rc = -1;
    }
    static char body[B_REQUEST_CAP];
    for (int i = 0; i < run->njobs && rc == 0; i++) {
        const b_job_t *job = &run->jobs[i];
        if (job->due_ms >= run->measure_ms)
            break;
        char idem[32];
        b_job_key(i, idem, sizeof idem);
        b_request_body(body, sizeof body, idem, job->prompt_chars, job->max_tokens, 0);
        if (fprintf(f[job->tenant],
                    "{\"id\": \"%s\", \"class\": \"%s\", \"due_ms\": %.3f, \"body\": %s}\n", idem,
                    b_class_names[sc->tenants[job->tenant].cls], job->due_ms, body) < 0)
            rc = -1;
    }
    for (int t = 0; t < sc->ntenants; t++) {
        if (f[t] != NULL && fclose(f[t]) != 0)
            rc = -1;
    }
    return rc;
}
