/* sluice-ingest: sluice.requests and sluice.requests.batch -> (validate, authenticate,
 * estimate) -> sluice.jobs or a `rejected` result on sluice.results. Offsets are committed only
 * after every output of a batch is acknowledged by the broker, so a crash redelivers rather than
 * loses; the scheduler de-duplicates by job id.
 *
 * Each partition is read through its own queue (common/intake.h), a slice at a time, and the
 * batch topic's partitions only with the room the requests topic leaves in a take: a batch flood
 * of any size delays an interactive request by at most one take (64 batch requests), not by
 * the flood. Batch requests are also held back while their takes fill half the flight (the
 * requests topic keeps the other half, so it never waits for the broker's acknowledgements of
 * batch work) and for as long again as their last take took (at most half of ingest's time on
 * batch work, so a flood never takes the machine's CPU from the latency path), and while the
 * schedulers are more than ingest.jobs_backlog_max_bytes behind on a partition of the batch jobs
 * topic (ingest/backlog.h), so a backfill waits in its own requests topic rather than outrun
 * them there, where a broker that keeps a partition by size would delete what they did not
 * read. */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "backlog.h"
#include "inflight.h"
#include "ingest.h"
#include "intake.h"
#include "kafka.h"
#include "kafka_io.h"
#include "log.h"
#include "proc.h"
#include "util.h"

/* A take: at most 32 requests of one partition and 256 in all, of which at most 32 batch ones.
 * A take of batch requests is then a few milliseconds of work (about 50 us a request), which
 * bounds how long a request of the other topic waits for it. Up to 16 takes are in flight, batch
 * requests taken only while fewer than LATER_TAKES_MAX are, and only LATER_DUTY_PERCENT of the
 * time (bench/scenarios noisy1000: see bench/README.md).
 * BATCH_MAX leaves room for what the consumer queue itself holds (a partition whose queue could
 * not be set up). Offsets are committed at most every COMMIT_MS. */
enum {
    INTAKE_SLICE = 32,
    INTAKE_CAP = 256,
    LATER_CAP = 32,
    BATCH_MAX = 1000,
    TAKES_MAX = 16,
    LATER_TAKES_MAX = 8,
    LATER_DUTY_PERCENT = 50,
    COMMIT_MS = 100
};

static const char usage_text[] =
    "usage: sluice-ingest [--config FILE] [--log-level debug|info|warn|error]\n"
    "       [--metrics-listen HOST:PORT] [--help]\n"
    "\n"
    "Consumes requests from the requests topic and the batch requests topic (read with the\n"
    "room the first leaves, so a batch flood never delays other requests), validates them\n"
    "against schema/request.json, authenticates the API key, resolves the tenant from it,\n"
    "estimates tokens and writes the canonical job to the jobs topic (keyed by tenant) or a\n"
    "`rejected` result with a reason code to the results topic. Everything it writes is\n"
    "signed with signing.ingest_secret_key_file, and job ids are keyed with\n"
    "signing.job_id_key_file (both created at start when missing).\n"
    "Config: $SLUICE_CONFIG or examples/sluice.json.\n";

/* The schedulers' backlog on the batch jobs topic, told of every job that lands
 * (ingest/backlog.h).
 * The delivery report callback is set when the producer is made, before the backlog can be. */
static sl_backlog_t *jobs_backlog;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    /* Only the takes' outputs (their take is the message's opaque) were counted as sent. */
    if (jobs_backlog != NULL && msg->_private != NULL)
        sl_backlog_landed(jobs_backlog, rd_kafka_topic_name(msg->rkt), msg->partition, msg->offset,
                          msg->len, msg->err == RD_KAFKA_RESP_ERR_NO_ERROR);
    sl_kafka_io_on_delivery(rk, msg, opaque);
}

static void on_sent(void *arg, const char *topic, size_t len)
{
    sl_backlog_sent(arg, topic, len);
}

/* The consumer's properties: the intake's read-ahead limits, and offsets stored only when a
 * take retires (never by librdkafka on consume). */
static const char **consumer_props(void)
{
    static const char *props[16];
    int n = 0;
    for (const char *const *p = sl_intake_consumer_props; *p != NULL && n < 12; p++)
        props[n++] = *p;
    props[n++] = "enable.auto.offset.store";
    props[n++] = "false";
    props[n] = NULL;
    return props;
}

/* Waits up to timeout_ms for every take in flight to land (and retire); how many are left. */
static int drain(sl_inflight_t *flight, rd_kafka_t *prod, int64_t timeout_ms)
{
    for (int64_t until = sl_now_ms() + timeout_ms;
         sl_inflight_count(flight) > 0 && sl_now_ms() < until;) {
        rd_kafka_poll(prod, 10);
        sl_inflight_retire(flight);
    }
    return sl_inflight_count(flight);
}

/* SIGHUP: loads the config again and, when it is valid and names the same topics, swaps it in
 * with a new ingest (keys, tenants, routes, pauses take effect for the next request). The takes
 * in flight name topics of the running config, so they land first. Anything else is refused
 * with the running config kept. */
static void reload(sl_config_t **cfgp, sl_ingest_t **ingp, sl_inflight_t *flight, rd_kafka_t *prod)
{
    sl_config_t *old = *cfgp, *fresh = NULL;
    char err[512] = "";
    if (sl_config_load(old->path, &fresh, err, sizeof err) != SL_OK) {
        sl_error("reload refused, keeping the running config: %s", err);
        return;
    }
    const sl_kafka_cfg_t *a = &old->kafka, *b = &fresh->kafka;
    if (strcmp(a->topic_requests, b->topic_requests) != 0 ||
        strcmp(a->topic_requests_batch, b->topic_requests_batch) != 0 ||
        strcmp(a->topic_jobs, b->topic_jobs) != 0 ||
        strcmp(a->topic_jobs_batch, b->topic_jobs_batch) != 0 ||
        strcmp(a->topic_results, b->topic_results) != 0 ||
        strcmp(old->schema_dir, fresh->schema_dir) != 0) {
        sl_error("reload refused: the topics or the schema directory changed; those need a "
                 "restart");
        sl_config_free(fresh);
        return;
    }
    sl_ingest_t *ing = NULL;
    if (sl_ingest_new(fresh, &ing, err, sizeof err) != SL_OK) {
        sl_error("reload refused, keeping the running config: %s", err);
        sl_config_free(fresh);
        return;
    }
    if (drain(flight, prod, 10000) > 0) {
        sl_error("reload refused: outputs still unacknowledged after 10 s; try again");
        sl_ingest_free(ing);
        sl_config_free(fresh);
        return;
    }
    sl_ingest_free(*ingp);
    sl_config_free(old);
    *ingp = ing;
    *cfgp = fresh;
    sl_info("config reloaded from %s: %d tenants, %d keys, %d routes", fresh->path, fresh->ntenants,
            fresh->nkeys, fresh->nroutes);
}

int main(int argc, char **argv)
{
    sl_proc_opts_t opts;
    sl_proc_parse_daemon(argc, argv, "sluice-ingest", usage_text, &opts);
    sl_config_t *cfg = sl_proc_start("ingest", &opts);
    char err[512] = "";
    /* Rejections are signed as ingest; jobs and cancels, which the scheduler alone reads, carry
     * the MAC of the key ingest shares with the scheduler (signed until the scheduler's public
     * key is there). Job ids are keyed with a secret. */
    sl_signer_t *signer = NULL;
    sl_keyring_t *sched_keys = NULL;
    uint8_t job_id_key[SL_JOB_ID_KEY_BYTES];
    if (sl_auth_signer(cfg, SL_ROLE_INGEST, &signer, err, sizeof err) != SL_OK ||
        sl_auth_keyring(cfg, SL_ROLE_BIT(SL_ROLE_SCHEDULER), &sched_keys, err, sizeof err) !=
            SL_OK ||
        sl_auth_job_id_key(cfg, 1 /*create*/, job_id_key, err, sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-ingest: %s\n", err);
        return 2;
    }
    sodium_memzero(job_id_key, sizeof job_id_key); /* loaded again by sl_ingest_new */
    sl_kafka_mac_topics(cfg->kafka.topic_jobs, cfg->kafka.topic_jobs_batch, sched_keys,
                        SL_ROLE_SCHEDULER);
    sl_ingest_t *ing = NULL;
    if (sl_ingest_new(cfg, &ing, err, sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-ingest: cannot load request schema: %s\n", err);
        return 2;
    }
    sl_intake_t *intake = NULL;
    sl_intake_opts_t iopts = sl_intake_kafka_opts(INTAKE_SLICE, INTAKE_CAP);
    if (sl_intake_new(&iopts, &intake) != SL_OK ||
        sl_intake_later(intake, cfg->kafka.topic_requests_batch, LATER_CAP) != SL_OK) {
        fprintf(stderr, "sluice-ingest: out of memory\n");
        return 2;
    }
    rd_kafka_t *prod = NULL, *cons = NULL;
    const char *topics[] = {cfg->kafka.topic_requests, cfg->kafka.topic_requests_batch};
    if (sl_kafka_producer_new(cfg, "sluice-ingest", on_delivery, NULL, &prod, err, sizeof err) !=
            SL_OK ||
        sl_kafka_consumer_new_rebalance(cfg, "sluice-ingest", "sluice-ingest", topics, 2,
                                        consumer_props(), sl_intake_rebalance, intake, &cons, err,
                                        sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-ingest: kafka: %s\n", err);
        return 2;
    }
    if (sl_intake_attach(intake, cons) != SL_OK) {
        fprintf(stderr, "sluice-ingest: kafka: no consumer queue\n");
        return 2;
    }
    sl_info("ingest started: %s, then %s -> %s, %s (batch jobs, cancels) | %s",
            cfg->kafka.topic_requests, cfg->kafka.topic_requests_batch, cfg->kafka.topic_jobs,
            cfg->kafka.topic_jobs_batch, cfg->kafka.topic_results);

    static const char *const reason_label[] = {"reason", NULL};
    sl_metrics_t *metrics = sl_proc_metrics(&opts, cfg->ingest_metrics_listen);
    int m_jobs =
        sl_metrics_family(metrics, SL_METRIC_COUNTER, "sluice_ingest_jobs_total",
                          "Requests turned into jobs (or cancel messages).", NULL, NULL, 0);
    int m_rejected = sl_metrics_family(metrics, SL_METRIC_COUNTER, "sluice_ingest_rejected_total",
                                       "Requests rejected, by reason.", reason_label, NULL, 0);
    int m_lag = sl_kafka_lag_family(metrics);
    int m_lost = sl_kafka_lost_family(metrics);
    if (metrics == NULL || m_jobs < 0 || m_rejected < 0 || m_lag < 0) {
        fprintf(stderr, "sluice-ingest: cannot set up metrics\n");
        return 1;
    }
    int m_backlog = sl_metrics_family(
        metrics, SL_METRIC_GAUGE, "sluice_ingest_jobs_backlog_bytes",
        "The most bytes of jobs on one partition of the batch jobs topic written and not yet "
        "committed by the schedulers (-1 unknown); batch requests wait while it is over "
        "ingest.jobs_backlog_max_bytes.",
        NULL, NULL, 0);
    int m_held =
        sl_metrics_family(metrics, SL_METRIC_COUNTER, "sluice_ingest_batch_held_seconds_total",
                          "Time batch requests waited for the schedulers' backlog.", NULL, NULL, 0);
    if (m_backlog < 0 || m_held < 0) {
        fprintf(stderr, "sluice-ingest: cannot set up metrics\n");
        return 1;
    }
    jobs_backlog = cfg->jobs_backlog_max_bytes > 0
                       ? sl_backlog_new(prod, cfg->kafka.topic_jobs_batch, "sluice-scheduler")
                       : NULL;
    if (cfg->jobs_backlog_max_bytes > 0 && jobs_backlog == NULL) {
        fprintf(stderr, "sluice-ingest: out of memory\n");
        return 2;
    }
    sl_kafka_io_t *io = sl_kafka_io_new(prod, cons);
    if (io != NULL && jobs_backlog != NULL)
        sl_kafka_io_on_sent(io, on_sent, jobs_backlog);
    sl_inflight_ops_t ops = io != NULL ? sl_kafka_io_ops(io) : (sl_inflight_ops_t){0};
    sl_inflight_t *flight =
        io != NULL ? sl_inflight_new(TAKES_MAX, BATCH_MAX, BATCH_MAX, &ops) : NULL;
    rd_kafka_message_t **in = calloc(BATCH_MAX, sizeof *in);
    if (flight == NULL || in == NULL) {
        fprintf(stderr, "sluice-ingest: out of memory\n");
        return 2;
    }
    long long n_jobs = 0, n_rejected = 0;
    int64_t last_stats = sl_now_ms(), last_lag = 0, last_commit = 0;
    double later_at = 0;   /* batch requests are not taken before this (sl_mono_ms) */
    double held_since = 0; /* batch requests held back for the backlog since (sl_mono_ms), not
                            * yet counted */
    int exit_code = 0, group_refused = 0;
    while (!sl_stop_requested() && !group_refused) {
        int64_t now = sl_now_ms();
        if (now - last_lag >= 1000) {
            sl_kafka_export_lag(cons, metrics, m_lag);
            if (jobs_backlog != NULL)
                sl_metrics_set(metrics, m_backlog, NULL,
                               (double)sl_backlog_max(jobs_backlog, (int64_t)sl_mono_ms()));
            sl_kafka_export_lost(metrics, m_lost);
            last_lag = now;
            /* Failures that stopped still report how many lines they held back. */
            sl_log_flush_limited();
        }
        if (now - last_stats >= 10000) {
            sl_info("jobs %lld, rejected %lld", n_jobs, n_rejected);
            last_stats = now;
        }
        if (sl_reload_requested())
            reload(&cfg, &ing, flight, prod);
        /* Delivery reports, then the takes that landed; commit what they stored. */
        rd_kafka_poll(prod, 0);
        sl_inflight_retire(flight);
        if (now - last_commit >= COMMIT_MS) {
            sl_kafka_io_commit(io, 1 /*async*/);
            last_commit = now;
        }
        sl_take_t *take = sl_inflight_open(flight);
        if (take == NULL) {
            rd_kafka_poll(prod, 5); /* every take is in flight: wait for the broker */
            continue;
        }
        /* Batch requests wait while their takes fill the flight or their share of the time
         * is spent; the requests topic is taken meanwhile. */
        double mono = sl_mono_ms();
        int in_flight = sl_inflight_count(flight);
        int held = sl_backlog_holds(jobs_backlog, cfg->jobs_backlog_max_bytes, (int64_t)mono);
        /* The time held goes to its counter as it passes, at most 100 ms late. */
        if (held_since != 0 && (!held || mono - held_since >= 100)) {
            sl_metrics_add(metrics, m_held, NULL, (mono - held_since) / 1000.0);
            held_since = 0;
        }
        if (held && held_since == 0)
            held_since = mono;
        sl_intake_pause_later(intake, held || in_flight >= LATER_TAKES_MAX || mono < later_at);
        int wait_ms = in_flight > 1 ? 2 : 100;
        if (mono < later_at && later_at - mono < wait_ms)
            wait_ms = (int)(later_at - mono) + 1;
        sl_intake_wait(intake, wait_ms);
        /* The consumer queue first: rebalances run inside this poll (and set up or drop the
         * partition queues), errors and messages of a partition without its own queue. */
        int nin = 0;
        rd_kafka_message_t *m = NULL;
        while (nin < BATCH_MAX - INTAKE_CAP && (m = rd_kafka_consumer_poll(cons, 0)) != NULL)
            in[nin++] = m;
        nin += sl_intake_take(intake, (void **)&in[nin], INTAKE_CAP);
        double work_from = sl_mono_ms();
        int nlater = 0;
        for (int k = 0; k < nin; k++) {
            rd_kafka_message_t *msg = in[k];
            if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
                if (sl_kafka_consume_fatal(msg))
                    group_refused = 1;
                else
                    sl_kafka_io_consume_error(msg);
                rd_kafka_message_destroy(msg);
                continue;
            }
            sl_ingest_source_t src = {rd_kafka_topic_name(msg->rkt), msg->partition, msg->offset};
            nlater += strcmp(src.topic, cfg->kafka.topic_requests_batch) == 0;
            sl_ingest_out_t out;
            sl_err_t rc = sl_ingest_process(ing, msg->payload, msg->len, sl_now_ms(), &src, &out);
            if (rc == SL_OK &&
                (rc = sl_take_input(take, src.topic, src.partition, src.offset)) != SL_OK) {
                free(out.key);
                free(out.value);
            }
            rd_kafka_message_destroy(msg);
            if (rc == SL_OK) {
                rc = sl_take_output(flight, take, out.topic, out.key, out.value);
                if (rc == SL_EKAFKA)
                    rc = SL_OK; /* produced again with its take */
            }
            if (rc != SL_OK) {
                sl_error("out of memory processing a request; stopping without commit");
                for (k++; k < nin; k++)
                    rd_kafka_message_destroy(in[k]);
                exit_code = 1;
                goto stop;
            }
            if (out.kind == SL_INGEST_REJECT) {
                n_rejected++;
                const char *reason[] = {out.reason};
                sl_metrics_add(metrics, m_rejected, reason, 1);
                /* Per message at debug only: a flood of bad input must not flood the log;
                 * the totals come every 10 s. */
                sl_logf(SL_LOG_DEBUG, "job", out.key, "rejected: %s", out.reason);
            } else {
                n_jobs++;
                sl_metrics_add(metrics, m_jobs, NULL, 1);
            }
        }
        if (nlater > 0) {
            /* This take's time, all of it counted as batch work (the other requests in it
             * are few), is matched by as much time without batch work. */
            double done = sl_mono_ms();
            later_at = done + (done - work_from) * (100 - LATER_DUTY_PERCENT) / LATER_DUTY_PERCENT;
        }
        rd_kafka_poll(prod, 0);
    }
    /* Stopping: what is in flight lands (or is redelivered after the restart), then the last
     * commit, synchronous. */
    drain(flight, prod, 10000);
    sl_kafka_io_commit(io, 0 /*sync*/);
    if (group_refused)
        exit_code = 2; /* a setting to change: retrying would wait forever */
stop:
    sl_info("ingest stopping: %lld jobs, %lld rejected", n_jobs, n_rejected);
    rd_kafka_flush(prod, 10000);
    sl_intake_detach(intake);
    sl_kafka_consumer_close(cons);
    sl_backlog_free(jobs_backlog); /* its queue is the producer's */
    jobs_backlog = NULL;
    rd_kafka_destroy(prod);
    sl_inflight_free(flight);
    sl_kafka_io_free(io);
    free(in);
    sl_intake_free(intake);
    free(opts.rest);
    sl_metrics_free(metrics);
    sl_ingest_free(ing);
    sl_kafka_sign_as(NULL, SL_ROLE_INGEST);
    sl_kafka_mac_topics(NULL, NULL, NULL, SL_ROLE_SCHEDULER);
    sl_signer_free(signer);
    sl_keyring_free(sched_keys);
    sl_config_free(cfg);
    return exit_code;
}
