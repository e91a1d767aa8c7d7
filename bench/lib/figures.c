/* figures.c - see figures.h. */
#include "figures.h"

#include <math.h>
#include <stdlib.h>

#include "stats.h"

static double limit_tokens_per_ms(const b_run_t *run)
{
    return (double)B_TPM / run->minute_ms;
}

/* The sample taken first at or after t_ms; NULL when there is none. */
static const b_sample_t *sample_at(const b_run_t *run, double t_ms)
{
    for (int i = 0; i < run->nsamples; i++) {
        if (run->samples[i].t_ms >= t_ms)
            return &run->samples[i];
    }
    return NULL;
}

static int64_t sim_requests(const b_sample_t *s)
{
    return s->sim.admitted + s->sim.refused + s->sim.fault_429 + s->sim.fault_503 + s->sim.errors;
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

/* The queue waits (submit to start) of class c's jobs submitted in [from_ms, to_ms) into vals
 * (njobs + 1 doubles); returns how many started, and *not_started the others. */
static int class_waits(const b_run_t *run, int c, double from_ms, double to_ms, double *vals,
                       int *not_started)
{
    int n = 0;
    *not_started = 0;
    for (int i = 0; i < run->njobs; i++) {
        const b_job_t *job = &run->jobs[i];
        if (job->submit_ms < 0 || job->submit_ms < from_ms || job->submit_ms >= to_ms ||
            run->sc->tenants[job->tenant].cls != c)
            continue;
        if (job->start_ms >= 0)
            vals[n++] = fmax(0, job->start_ms - job->submit_ms);
        else
            (*not_started)++;
    }
    return n;
}

/* Estimated against real tokens, and the capacity wasted by over-reservation, over the whole
 * run. estimated: what each system took from its own token limit for every attempt before
 * the call (sluice: its reservations on the deployment's token buckets; the baseline: its
 * estimate, taken from its token bucket at every attempt). kept: what its own accounting
 * finally counted (sluice settles each reservation: a refusal is given back, a call that may
 * have counted keeps it; the baseline never gives anything back). real: what the provider's
 * B_TPM counted (the simulator's tokens_charged: prompt + max_tokens of every call it admitted).
 * Wasted: kept above real, capacity of the system's own limit spent on nothing. */
static json_t *token_figures(const b_run_t *run)
{
    double est = 0, kept = 0;
    if (!run->sys->baseline) {
        json_t *m = json_object_get(run->extra, "scheduler_metrics");
        est = b_jget(m, "provider_tokens_charged");
        kept = b_jget(m, "provider_tokens_kept");
    } else {
        for (int i = 0; i < run->njobs; i++) {
            const b_job_t *job = &run->jobs[i];
            if (job->attempts > 0)
                est += (double)job->attempts * (double)job->est_tokens;
        }
        kept = est;
    }
    double real = run->nsamples > 0 ? (double)run->samples[run->nsamples - 1].sim.tokens : NAN;
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "estimated", b_jnum(est), "kept",
                     b_jnum(kept), "real", b_jnum(real), "wasted", b_jnum(fmax(0, kept - real)),
                     "estimated_over_real", b_jnum(real > 0 ? est / real : NAN), "wasted_share",
                     b_jnum(kept > 0 ? fmax(0, kept - real) / kept : NAN));
}

/* What the runner saw of the streams: time to the first chunk, cut attempts, and whether every
 * succeeded job's stream ended with a finish_reason. vals is scratch of njobs + 1 doubles. */
static json_t *stream_figures(const b_run_t *run, double *vals)
{
    int n = 0, succeeded = 0, complete = 0, without_chunks = 0;
    long chunks = 0, cut = 0;
    for (int i = 0; i < run->njobs; i++) {
        const b_job_t *job = &run->jobs[i];
        const b_stream_seen_t *seen =
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

json_t *b_figures(const b_run_t *run)
{
    const b_scenario_t *sc = run->sc;
    json_t *fig = json_object();
    double m = run->measure_ms, w0 = run->win0_ms, w1 = run->win1_ms;
    const b_sample_t *s0 = run->nsamples > 0 ? &run->samples[0] : NULL;
    const b_sample_t *slo = sample_at(run, w0), *shi = sample_at(run, w1);
    const b_sample_t *send = run->nsamples > 0 ? &run->samples[run->nsamples - 1] : NULL;

    /* Utilisation of the binding limit (B_TPM) in the steady middle, on the simulator's clock. */
    double util = NAN;
    if (slo != NULL && shi != NULL && shi->sim.sim_ms > slo->sim.sim_ms)
        util = (double)(shi->sim.tokens - slo->sim.tokens) / (shi->sim.sim_ms - slo->sim.sim_ms) /
               limit_tokens_per_ms(run);
    json_object_set_new(fig, "utilisation", b_jnum(util));
    if (s0 != NULL && send != NULL) {
        int64_t req = sim_requests(send) - sim_requests(s0);
        int64_t refused = send->sim.refused - s0->sim.refused;
        json_t *sim = json_pack(
            "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "requests", (json_int_t)req, "admitted",
            (json_int_t)(send->sim.admitted - s0->sim.admitted), "limit_429", (json_int_t)refused,
            "fault_429", (json_int_t)(send->sim.fault_429 - s0->sim.fault_429), "fault_503",
            (json_int_t)(send->sim.fault_503 - s0->sim.fault_503), "replayed",
            (json_int_t)(send->sim.replayed - s0->sim.replayed), "dropped",
            (json_int_t)(send->sim.dropped - s0->sim.dropped), "limit_429_share",
            b_jnum(req > 0 ? (double)refused / (double)req : NAN));
        if (slo != NULL && shi != NULL) {
            int64_t wreq = sim_requests(shi) - sim_requests(slo);
            json_object_set_new(sim, "limit_429_window",
                                json_integer((json_int_t)(shi->sim.refused - slo->sim.refused)));
            json_object_set_new(
                sim, "limit_429_share_window",
                b_jnum(wreq > 0 ? (double)(shi->sim.refused - slo->sim.refused) / (double)wreq
                                : NAN));
        }
        json_object_set_new(
            sim, "limit_429_rolling",
            json_integer((json_int_t)(send->sim.refused_rolling - s0->sim.refused_rolling)));
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
    double tenant_tokens[B_MAX_TENANTS] = {0}, tokens_in_window = 0;
    for (int i = 0; i < run->njobs; i++) {
        const b_job_t *job = &run->jobs[i];
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
    for (int c = 0; c < B_NCLASSES; c++) {
        int present = 0;
        for (int t = 0; t < sc->ntenants; t++)
            present |= sc->tenants[t].cls == c;
        if (!present)
            continue;
        int not_started = 0;
        int n = class_waits(run, c, 0, INFINITY, vals, &not_started);
        json_object_set_new(waits, b_class_names[c], pcts(vals, n, not_started, "not_started"));
        /* The same over the jobs submitted in the steady window (a backlog taken in at the
         * start weighs on the figure above). */
        n = class_waits(run, c, w0, w1, vals, &not_started);
        json_object_set_new(waits_w, b_class_names[c], pcts(vals, n, not_started, "not_started"));
        n = 0;
        for (int i = 0; i < run->njobs; i++) {
            const b_job_t *job = &run->jobs[i];
            if (job->submit_ms >= 0 && sc->tenants[job->tenant].cls == c &&
                job->status == B_SUCCEEDED)
                vals[n++] = job->end_ms - job->submit_ms;
        }
        json_object_set_new(lat, b_class_names[c], pcts(vals, n, 0, NULL));
    }
    json_object_set_new(fig, "queue_wait_ms", waits);
    json_object_set_new(fig, "queue_wait_ms_window", waits_w);
    if (sc->burst_minutes > 0) {
        /* How long after the burst window the last job submitted in it started (NAN when one
         * never started). */
        double b0 = sc->burst_at * m, b1 = b0 + sc->burst_minutes * run->minute_ms, last = -1;
        int never = 0, nb = 0;
        for (int i = 0; i < run->njobs; i++) {
            const b_job_t *job = &run->jobs[i];
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
        const b_sample_t *a = &run->samples[i - 1], *b = &run->samples[i];
        double dt = b->sim.sim_ms - a->sim.sim_ms;
        if (dt <= 0)
            continue;
        json_array_append_new(t_s, json_real((a->t_ms + b->t_ms) / 2000.0));
        json_array_append_new(tok,
                              json_real((double)(b->sim.tokens - a->sim.tokens) / dt * 1000.0));
        json_array_append_new(l429,
                              json_real((double)(b->sim.refused - a->sim.refused) / dt * 1000.0));
        json_array_append_new(
            f429, json_real((double)(b->sim.fault_429 - a->sim.fault_429) / dt * 1000.0));
    }
    json_object_set_new(ser, "t_s", t_s);
    json_object_set_new(ser, "tokens_per_s", tok);
    json_object_set_new(ser, "limit_429_per_s", l429);
    json_object_set_new(ser, "fault_429_per_s", f429);
    double bin_ms = run->minute_ms / 10.0;
    int nbins = (int)ceil((m + run->grace_ms) / bin_ms);
    json_t *wbins = json_object();
    for (int c = 0; c < B_NCLASSES; c++) {
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
                const b_job_t *job = &run->jobs[i];
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
        json_object_set_new(wbins, b_class_names[c], rows);
    }
    json_object_set_new(ser, "wait_bin_s", json_real(bin_ms / 1000.0));
    json_object_set_new(ser, "queue_wait_ms", wbins);
    json_object_set_new(fig, "series", ser);
    free(vals);
    return fig;
}
