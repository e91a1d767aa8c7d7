/* sluice-ingest: sluice.requests -> (validate, authenticate, estimate) -> sluice.jobs or a
 * `rejected` result on sluice.results. Offsets are committed only after every output of a batch
 * is acknowledged by the broker, so a crash redelivers rather than loses; the scheduler
 * de-duplicates by job id. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.h"
#include "kafka.h"
#include "log.h"
#include "proc.h"
#include "util.h"

enum { BATCH_MAX = 1000 };

static const char usage_text[] =
    "usage: sluice-ingest [--config FILE] [--log-level debug|info|warn|error]\n"
    "       [--metrics-listen HOST:PORT] [--help]\n"
    "\n"
    "Consumes requests from the requests topic, validates them against schema/request.json,\n"
    "authenticates the API key, resolves the tenant from it, estimates tokens and writes the\n"
    "canonical job to the jobs topic (keyed by tenant) or a `rejected` result with a reason\n"
    "code to the results topic. Config: $SLUICE_CONFIG or examples/sluice.json.\n";

/* Delivery bookkeeping for one batch: how many are still unacknowledged, and copies of the
 * failed ones to produce again. */
typedef struct {
    int pending;
    int failed;
} batch_t;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    (void)rk;
    (void)opaque;
    batch_t *b = msg->_private;
    if (b == NULL)
        return;
    b->pending--;
    if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        b->failed++;
        sl_warn("delivery to %s failed: %s; will retry", rd_kafka_topic_name(msg->rkt),
                rd_kafka_err2str(msg->err));
    }
}

/* Produces value to topic, counted in the batch b. */
static int produce(rd_kafka_t *prod, const char *topic, const char *key, const char *value,
                   batch_t *b)
{
    if (sl_kafka_produce(prod, topic, key, value, strlen(value), NULL, b) != SL_OK)
        return -1;
    b->pending++;
    return 0;
}

typedef struct {
    const char *topic;
    char *key;
    char *value;
} outmsg_t;

int main(int argc, char **argv)
{
    sl_proc_opts_t opts;
    sl_proc_parse_daemon(argc, argv, "sluice-ingest", usage_text, &opts);
    sl_config_t *cfg = sl_proc_start("ingest", &opts);
    char err[512] = "";
    sl_ingest_t *ing = NULL;
    if (sl_ingest_new(cfg, &ing, err, sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-ingest: cannot load request schema: %s\n", err);
        return 2;
    }
    rd_kafka_t *prod = NULL, *cons = NULL;
    const char *topics[] = {cfg->kafka.topic_requests};
    if (sl_kafka_producer_new(cfg, "sluice-ingest", on_delivery, NULL, &prod, err, sizeof err) !=
            SL_OK ||
        sl_kafka_consumer_new(cfg, "sluice-ingest", "sluice-ingest", topics, 1, NULL, &cons, err,
                              sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-ingest: kafka: %s\n", err);
        return 2;
    }
    sl_info("ingest started: %s -> %s | %s", cfg->kafka.topic_requests, cfg->kafka.topic_jobs,
            cfg->kafka.topic_results);

    static const char *const reason_label[] = {"reason", NULL};
    sl_metrics_t *metrics = sl_proc_metrics(&opts, cfg->ingest_metrics_listen);
    int m_jobs = sl_metrics_family(metrics, SL_METRIC_COUNTER, "sluice_ingest_jobs_total",
                                   "Requests turned into jobs (or cancel messages).", NULL,
                                   NULL, 0);
    int m_rejected = sl_metrics_family(metrics, SL_METRIC_COUNTER,
                                       "sluice_ingest_rejected_total",
                                       "Requests rejected, by reason.", reason_label, NULL, 0);
    int m_lag = sl_kafka_lag_family(metrics);
    if (metrics == NULL || m_jobs < 0 || m_rejected < 0 || m_lag < 0) {
        fprintf(stderr, "sluice-ingest: cannot set up metrics\n");
        return 1;
    }
    outmsg_t *outs = calloc(BATCH_MAX, sizeof *outs);
    long long n_jobs = 0, n_rejected = 0;
    int64_t last_stats = sl_now_ms();
    int64_t last_lag = 0;
    int exit_code = 0;
    while (!sl_stop_requested()) {
        int64_t now = sl_now_ms();
        if (now - last_lag >= 1000) {
            sl_kafka_export_lag(cons, metrics, m_lag);
            last_lag = now;
        }
        int n = 0;
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(cons, 100);
        while (msg != NULL) {
            if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
                sl_warn("consume: %s", rd_kafka_message_errstr(msg));
            } else {
                sl_ingest_source_t src = {rd_kafka_topic_name(msg->rkt), msg->partition,
                                          msg->offset};
                sl_ingest_out_t out;
                if (sl_ingest_process(ing, msg->payload, msg->len, sl_now_ms(), &src, &out) !=
                    SL_OK) {
                    sl_error("out of memory processing a request; stopping without commit");
                    rd_kafka_message_destroy(msg);
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
                outs[n].topic = out.topic;
                outs[n].key = out.key;
                outs[n].value = out.value;
                n++;
            }
            rd_kafka_message_destroy(msg);
            msg = n < BATCH_MAX ? rd_kafka_consumer_poll(cons, 0) : NULL;
        }
        if (n == 0)
            continue;
        /* Produce the batch until every message is acknowledged, then commit the input. */
        batch_t b = {0, 0};
        for (int i = 0; i < n; i++) {
            if (produce(prod, outs[i].topic, outs[i].key, outs[i].value, &b) != 0) {
                exit_code = 1;
                goto stop;
            }
        }
        while (b.pending > 0)
            rd_kafka_poll(prod, 50);
        if (b.failed > 0) {
            /* Idempotent producer failures are rare (timeouts); re-produce the whole batch:
             * downstream de-duplicates by job id, and nothing is committed until it lands. */
            sl_warn("%d deliveries failed; producing the batch again", b.failed);
            int ok = 0;
            while (!ok && !sl_stop_requested()) {
                batch_t again = {0, 0};
                for (int i = 0; i < n; i++)
                    produce(prod, outs[i].topic, outs[i].key, outs[i].value, &again);
                while (again.pending > 0)
                    rd_kafka_poll(prod, 50);
                ok = again.failed == 0;
            }
            if (!ok)
                goto stop;
        }
        rd_kafka_resp_err_t cerr = rd_kafka_commit(cons, NULL, 1 /*async*/);
        if (cerr != RD_KAFKA_RESP_ERR_NO_ERROR && cerr != RD_KAFKA_RESP_ERR__NO_OFFSET)
            sl_warn("commit: %s", rd_kafka_err2str(cerr));
        for (int i = 0; i < n; i++) {
            free(outs[i].key);
            free(outs[i].value);
        }
        now = sl_now_ms();
        if (now - last_stats >= 10000) {
            sl_info("jobs %lld, rejected %lld", n_jobs, n_rejected);
            last_stats = now;
        }
    }
stop:
    sl_info("ingest stopping: %lld jobs, %lld rejected", n_jobs, n_rejected);
    rd_kafka_flush(prod, 10000);
    sl_kafka_consumer_close(cons);
    rd_kafka_destroy(prod);
    free(outs);
    free(opts.rest);
    sl_metrics_free(metrics);
    sl_ingest_free(ing);
    sl_config_free(cfg);
    return exit_code;
}
