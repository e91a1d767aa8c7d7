/* run_sluice.c - see run_sluice.h. */
#include "run_sluice.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "request.h"
#include "stats.h"
#include "util.h"
#include "warmup.h"
#include "workload.h"

static void on_result(void *arg, const b_result_t *r)
{
    b_run_t *run = arg;
    double now = h_wall_ms() - run->t0_wall;
    int i = b_job_index(r->idem, run->njobs);
    if (i < 0)
        return; /* not a job of the workload: a warm-up job's, delivered again */
    b_job_t *job = &run->jobs[i];
    if (job->status != B_NONE) {
        run->duplicates++; /* delivery is at least once */
        return;
    }
    job->status = b_status_parse(r->status);
    job->end_ms = now;
    job->usage_input = r->input;
    job->usage_tokens = r->input + r->output;
    if (job->status != B_SUCCEEDED)
        b_run_count_reason(run, r->status, r->reason);
    if (run->sc->stream && r->job_id != NULL)
        job->job_id = strdup(r->job_id);
    job->attempts = r->attempts;
    if (r->dispatch_ms >= 0)
        job->start_ms = r->dispatch_ms - run->t0_wall;
}

/* One chunk from sluice.stream: counted under its job id. */
static void on_chunk(b_run_t *run, const rd_kafka_message_t *m)
{
    double now = h_wall_ms() - run->t0_wall;
    json_t *c = m->err ? NULL : json_loadb(m->payload, m->len, 0, NULL);
    const char *job_id = json_string_value(json_object_get(c, "job_id"));
    if (job_id == NULL) {
        run->stream_bad++;
        json_decref(c);
        return;
    }
    b_stream_seen_t *seen = sl_hmap_get(run->streams, job_id);
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

static void poll_chunks(rd_kafka_t *cons, b_run_t *run)
{
    rd_kafka_message_t *m;
    while (cons != NULL && (m = rd_kafka_consumer_poll(cons, 0)) != NULL) {
        on_chunk(run, m);
        rd_kafka_message_destroy(m);
    }
}

/* The client of job i gives up: a cancel request naming its idempotency key. */
static void produce_cancel(rd_kafka_t *prod, b_run_t *run, int i)
{
    char idem[32], key[64], msg[256];
    b_job_key(i, idem, sizeof idem);
    b_request_api_key("compare", run->sc->tenants[run->jobs[i].tenant].name, key, sizeof key);
    int len = b_request_cancel(msg, sizeof msg, key, idem);
    run->jobs[i].cancel_sent = 1;
    h_produce(prod, "sluice.requests", idem, msg, (size_t)len);
}

static void produce_job(rd_kafka_t *prod, b_run_t *run, int i)
{
    b_job_t *job = &run->jobs[i];
    const b_tenant_spec_t *t = &run->sc->tenants[job->tenant];
    char idem[32];
    b_job_key(i, idem, sizeof idem);
    job->submit_ms = h_wall_ms() - run->t0_wall;
    b_request_produce(prod, "compare", t->name, idem, b_class_names[t->cls], job->prompt_chars,
                      job->max_tokens, run->sc->stream);
}

static void add_rss(json_t *rss, const char *name, long kb)
{
    json_object_set_new(rss, name, json_integer(kb));
}

/* What the scheduler says it reserved and settled, from its /metrics (before it stops). */
static void scrape_scheduler(b_run_t *run)
{
    static const char *const keys[] = {
        "provider_tokens_charged",
        "provider_tokens_kept",
        "tokens_reserved",
        "tokens_settled",
        "tokens_over_reserved",
        "tokens_under_reserved",
        "provider_429",
        "provider_5xx",
        "cancelled",
        "retried",
    };
    static const char *const names[] = {
        "sluice_scheduler_provider_tokens_charged_total",
        "sluice_scheduler_provider_tokens_kept_total",
        "sluice_scheduler_tokens_reserved_total",
        "sluice_scheduler_tokens_used_total",
        "sluice_scheduler_tokens_over_reserved_total",
        "sluice_scheduler_tokens_under_reserved_total",
        "sluice_scheduler_provider_429_total",
        "sluice_scheduler_provider_unavailable_total",
        "sluice_scheduler_cancelled_total",
        "sluice_scheduler_retried_total",
    };
    enum { N = sizeof names / sizeof names[0] };
    double v[N];
    if (b_metrics_scrape(run->metrics_port, names, N, v) != 0)
        return;
    json_t *o = json_object();
    for (int k = 0; k < N; k++)
        json_object_set_new(o, keys[k], b_jnum(v[k]));
    json_object_set_new(run->extra, "scheduler_metrics", o);
}

const char *b_run_sluice(b_run_t *run)
{
    int sim_port = h_free_port();
    run->metrics_port = h_free_port();
    b_pool_t pool = b_run_pool(run, sim_port);
    char *sim_cfg = b_pool_sim_config(&pool);
    char *cfg = b_pool_sluice_config(&pool);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    rd_kafka_t *chunks =
        run->sc->stream ? h_consumer_from_start(st.bootstrap, "sluice.stream") : NULL;
    int ncancels = 0, next_cancel = 0;
    int *cancels = b_workload_cancel_order(run, &ncancels);
    const char *broken = cancels == NULL ? "out of memory" : NULL;

    /* Warm-up: the measurement starts once every consumer group has settled. */
    if (b_warm_up(prod, cons, "compare", 60000) != 0)
        broken = "the warm-up jobs got no results within 60 s";
    /* Let the simulator's bucket fill again after the warm-up, as the baseline finds it. */
    usleep((useconds_t)(run->minute_ms / b_run_slices(run) * 1000));

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
            const b_job_t *job = &run->jobs[cancels[next_cancel]];
            if (job->submit_ms < 0 || job->due_ms + job->cancel_after_ms > elapsed)
                break;
            produce_cancel(prod, run, cancels[next_cancel++]);
        }
        rd_kafka_poll(prod, 0);
        poll_chunks(chunks, run);
        if (elapsed >= next_sample) {
            b_run_sample(run, st.stats_url, h_wall_ms() - run->t0_wall);
            next_sample += run->sample_ms;
        }
        double now = sl_mono_ms() - mono0;
        double wait = next_sample - now;
        if (next < run->njobs && run->jobs[next].due_ms - now < wait)
            wait = run->jobs[next].due_ms - now;
        b_result_poll(cons, wait < 1 ? 0 : wait > 5 ? 5 : (int)wait, on_result, run);
    }
    b_run_sample(run, st.stats_url, h_wall_ms() - run->t0_wall);
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
