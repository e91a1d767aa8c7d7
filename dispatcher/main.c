/* sluice-dispatcher: signed sluice.dispatch messages -> provider calls -> sluice.usage, and the
 * chunks of streamed answers -> sluice.stream.
 *
 * Offsets are committed, synchronously, before the calls of a batch start: a restarted
 * dispatcher never reads again a dispatch its predecessor may have sent, so no call runs twice
 * through a redelivery. What a dead dispatcher held is the scheduler's to settle: heartbeats
 * (heartbeat.h) tell it which attempts this incarnation took, and the first heartbeat of a
 * restarted one tells it this incarnation is gone. */
#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "batch.h"
#include "engine.h"
#include "heartbeat.h"
#include "kafka.h"
#include "log.h"
#include "proc.h"
#include "sign.h"
#include "util.h"

static const char usage_text[] =
    "usage: sluice-dispatcher [--config FILE] [--log-level debug|info|warn|error]\n"
    "       [--metrics-listen HOST:PORT] [--help]\n"
    "\n"
    "Consumes signed dispatch messages, calls the providers (many calls at once, libcurl\n"
    "multi, keep-alive), never retries by itself, and publishes one usage event per attempt\n"
    "(outcome, real usage, normalised rate-limit headers, latency, and the response on\n"
    "success). Streamed requests (\"stream\": true) also get each chunk of the answer\n"
    "published to kafka.topics.stream as it arrives. Acts only on dispatches signed by the\n"
    "scheduler (signing.public_key_file, and signing.next_public_key_file during a key\n"
    "rotation); others are counted in sluice_dispatcher_messages_refused_total{topic,reason}.\n"
    "Signs every usage event, heartbeat and stream chunk with\n"
    "signing.dispatcher_secret_key_file (the pair is created at start when missing). Every\n"
    "dispatcher.heartbeat_ms it tells the scheduler, on the usage topic, which attempts it\n"
    "holds, so that the calls of a dispatcher that died are settled as soon as its restart (or\n"
    "its silence) shows it. Offsets are committed before calls start: a restarted dispatcher\n"
    "never repeats its predecessor's calls. Several may share the dispatch topic as one\n"
    "consumer group (kafka.membership group), each under its own kafka.instance.\n";

typedef struct {
    rd_kafka_t *prod;
    const char *topic;
    sl_metrics_t *metrics;
    int m_outcomes; /* provider outcomes by deployment and outcome */
    int m_latency;  /* provider call durations by deployment */
    int m_ttfb;     /* provider times to first byte by deployment */
} emit_ctx_t;

/* From 10 ms (a cached or tiny answer) to 120 s (a long completion near its timeout). */
static const double latency_bounds_s[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                          2.5,  5,     10,   30,  60,   120};

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    (void)rk;
    (void)opaque;
    if (msg->err)
        sl_warn("usage event delivery failed: %s (the lease will expire and retry)",
                rd_kafka_err2str(msg->err));
}

/* A usage event, a provider batch's event or a result line's usage event (batch.h): all go to
 * the usage topic. */
static void emit_usage(const char *key, const char *value, void *arg)
{
    emit_ctx_t *ctx = arg;
    sl_kafka_produce(ctx->prod, ctx->topic, key, value, strlen(value), NULL, NULL);
}

/* Deployments come from the config, outcomes from a fixed list: the labels stay bounded. */
static void count_outcome(const char *deployment, const char *outcome, void *arg)
{
    emit_ctx_t *ctx = arg;
    const char *v[] = {deployment, outcome};
    if (deployment != NULL)
        sl_metrics_add(ctx->metrics, ctx->m_outcomes, v, 1);
}

typedef struct {
    rd_kafka_t *prod;
    const char *topic;
} chunk_ctx_t;

/* Heartbeats. The one naming calls just taken is acknowledged before they leave (the loop
 * flushes its producer), so it is one message, to the partition its key gives, through a
 * producer of its own. With sharded schedulers (scheduler.sharded) a periodic one goes to every
 * partition of the usage topic: each shard reads the partitions of its own tenants only, and
 * each must hear every dispatcher (its liveness, its window, the calls it holds). Those copies
 * go through the usage events' producer, which nothing waits on: on the dev broker a message to
 * each of 16 partitions took about 45 ms to be acknowledged, which the calls waiting on the
 * flush would have missed their age bound by. Without shards (nparts 0) it is one message. */
typedef struct {
    rd_kafka_t *flushed, *bulk;
    const char *topic;
    int nparts;
    int every; /* this turn's heartbeat is periodic: to every partition */
} beat_ctx_t;

static void emit_beat(const char *key, const char *value, void *arg)
{
    beat_ctx_t *ctx = arg;
    if (ctx->every)
        sl_kafka_produce_every(ctx->bulk, ctx->topic, ctx->nparts, key, value, strlen(value));
    else
        sl_kafka_produce(ctx->flushed, ctx->topic, key, value, strlen(value), NULL, NULL);
}

static sl_err_t beat(sl_heartbeat_t *hb, sl_engine_t *engine, beat_ctx_t *beats)
{
    int64_t now = sl_now_ms();
    beats->every = sl_heartbeat_periodic_due(hb, now);
    return sl_heartbeat_run(hb, engine, now, emit_beat, beats);
}

/* A stream chunk goes to the topic the engine names: its tenant's stream topic, or the shared
 * one. */
static void emit_stream_chunk(const char *topic, const char *key, const char *value, void *arg)
{
    chunk_ctx_t *ctx = arg;
    sl_kafka_produce(ctx->prod, topic, key, value, strlen(value), NULL, NULL);
}

/* At most this many dispatch messages are taken (and committed) at once. */
enum { TAKE_MAX = 256 };

/* How often, at most, offsets of batches that started no call are committed. */
enum { COMMIT_IDLE_MS = 200 };

/* How long the dispatcher waits for the broker to acknowledge the heartbeat naming new calls. */
enum { HEARTBEAT_FLUSH_MS = 1000 };

/* Commits the offsets stored so far, waiting for the broker unless async. Returns 0 when it
 * failed: the calls still start (this incarnation never repeats them), but a successor could
 * read them again. */
static int commit_taken(rd_kafka_t *cons, sl_metrics_t *metrics, int family, int async)
{
    rd_kafka_resp_err_t err = rd_kafka_commit(cons, NULL, async);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR__NO_OFFSET)
        return 1;
    sl_metrics_add(metrics, family, NULL, 1);
    sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN,
                 "commit before starting calls failed: %s; starting them anyway (a restarted "
                 "dispatcher may read them again)",
                 rd_kafka_err2str(err));
    return 0;
}

static void on_chunk_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    (void)rk;
    (void)opaque;
    if (msg->err)
        sl_warn("stream chunk delivery failed: %s", rd_kafka_err2str(msg->err));
}

static void kafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    sl_log(level <= 3   ? SL_LOG_ERROR
           : level <= 4 ? SL_LOG_WARN
                        : SL_LOG_DEBUG,
           "kafka %s: %s", fac, buf);
}

/* The producer of stream chunks. Like sluice's other producers (idempotent, so the chunks of
 * one job stay in order; acks=all), but linger.ms is 0 whatever kafka.properties say: a consumer
 * is waiting for each chunk, and the broker must see it the moment it is produced. *out is set
 * only on success. */
static sl_err_t stream_producer_new(const sl_config_t *cfg, rd_kafka_t **out, char *err,
                                    size_t errlen)
{
    *out = NULL;
    char bootstrap[1024];
    if (sl_kafka_bootstrap(cfg, 30000, bootstrap, sizeof bootstrap) != SL_OK) {
        snprintf(err, errlen, "no Kafka bootstrap servers for the stream producer");
        return SL_EKAFKA;
    }
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *const before[] = {
        "bootstrap.servers",  bootstrap,  "client.id", "sluice-dispatcher-stream",
        "enable.idempotence", "true",     "acks",      "all",
        "message.max.bytes",  "16777216", NULL};
    const char *const after[] = {"linger.ms", "0", NULL};
    int ok = 1;
    for (int i = 0; ok && before[i] != NULL; i += 2)
        ok = rd_kafka_conf_set(conf, before[i], before[i + 1], err, errlen) == RD_KAFKA_CONF_OK;
    for (int i = 0; ok && i < cfg->kafka.nprops; i++)
        ok = rd_kafka_conf_set(conf, cfg->kafka.prop_names[i], cfg->kafka.prop_values[i], err,
                               errlen) == RD_KAFKA_CONF_OK;
    for (int i = 0; ok && after[i] != NULL; i += 2)
        ok = rd_kafka_conf_set(conf, after[i], after[i + 1], err, errlen) == RD_KAFKA_CONF_OK;
    if (!ok) {
        rd_kafka_conf_destroy(conf);
        return SL_ECONFIG;
    }
    rd_kafka_conf_set_log_cb(conf, kafka_log);
    rd_kafka_conf_set_dr_msg_cb(conf, on_chunk_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, errlen);
    if (rk == NULL) {
        rd_kafka_conf_destroy(conf);
        return SL_EKAFKA;
    }
    *out = rk;
    return SL_OK;
}

/* At most one log line per kind of submit error in this long; the metric counts every one. */
#define SUBMIT_ERROR_LOG_MS 10000

/* Dispatch messages the engine could not take (sl_engine_submit failed): counted by error kind,
 * and logged at most once per kind every SUBMIT_ERROR_LOG_MS: an out-of-memory storm must not
 * flood the log. */
typedef struct {
    sl_metrics_t *metrics;
    int family;
    int64_t unlogged[SL_E_COUNT_];  /* failures of that kind since its last log line */
    int64_t logged_ms[SL_E_COUNT_]; /* when that kind was last logged; 0: never */
} submit_errors_t;

static void submit_failed(submit_errors_t *se, sl_err_t rc, int64_t now_ms)
{
    const char *v[] = {sl_errname(rc)};
    sl_metrics_add(se->metrics, se->family, v, 1);
    if ((unsigned)rc >= (unsigned)SL_E_COUNT_)
        return;
    se->unlogged[rc]++;
    if (se->logged_ms[rc] != 0 && now_ms - se->logged_ms[rc] < SUBMIT_ERROR_LOG_MS)
        return;
    sl_error("%lld dispatch message(s) not taken: %s; no call was made, the scheduler dispatches "
             "them again when their lease expires",
             (long long)se->unlogged[rc], sl_strerror(rc));
    se->unlogged[rc] = 0;
    se->logged_ms[rc] = now_ms;
}

static void on_timing(const sl_engine_timing_t *timing, void *arg)
{
    emit_ctx_t *ctx = arg;
    const char *v[] = {timing->deployment};
    sl_metrics_observe(ctx->metrics, ctx->m_latency, v, timing->response_s);
    sl_metrics_observe(ctx->metrics, ctx->m_ttfb, v, timing->ttfb_s);
}

int main(int argc, char **argv)
{
    sl_proc_opts_t opts;
    sl_proc_parse_daemon(argc, argv, "sluice-dispatcher", usage_text, &opts);
    sl_config_t *cfg = sl_proc_start("dispatcher", &opts);
    char err[512] = "";
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "sluice-dispatcher: libcurl failed to initialise\n");
        return 2;
    }
    sl_signer_t *signer = NULL;
    sl_keyring_t *keyring = NULL;
    if (sl_auth_signer(cfg, SL_ROLE_DISPATCHER, &signer, err, sizeof err) != SL_OK ||
        sl_auth_keyring(cfg, SL_ROLE_BIT(SL_ROLE_SCHEDULER), &keyring, err, sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-dispatcher: %s\n", err);
        return 2;
    }
    /* The scheduler's public key appears when it first starts; wait a little for it. */
    for (int i = 0; i < 300 && !sl_keyring_has(keyring, SL_ROLE_SCHEDULER); i++) {
        if (sl_stop_requested())
            return 0;
        usleep(100 * 1000);
    }
    if (!sl_keyring_has(keyring, SL_ROLE_SCHEDULER)) {
        char pk[1024];
        sl_resolve_path(cfg->signing_public_key_file, pk, sizeof pk);
        fprintf(stderr, "sluice-dispatcher: cannot load the dispatch public key %s\n", pk);
        return 2;
    }
    /* Usage events and heartbeats, which the scheduler alone reads, carry the MAC of the key
     * the dispatchers share with it; stream chunks, read by tenants, are signed. */
    sl_kafka_mac_topics(cfg->kafka.topic_usage, NULL, keyring, SL_ROLE_SCHEDULER);
    rd_kafka_t *prod = NULL, *cons = NULL, *stream_prod = NULL, *hb_prod = NULL;
    static const char *const outcome_labels[] = {"deployment", "outcome", NULL};
    static const char *const deployment_label[] = {"deployment", NULL};
    const int nbounds = (int)(sizeof latency_bounds_s / sizeof latency_bounds_s[0]);
    emit_ctx_t ctx = {
        NULL, cfg->kafka.topic_usage, sl_proc_metrics(&opts, cfg->disp_metrics_listen), -1, -1, -1};
    ctx.m_outcomes =
        sl_metrics_family(ctx.metrics, SL_METRIC_COUNTER, "sluice_dispatcher_calls_total",
                          "Attempts reported, by deployment and outcome (ok, "
                          "rate_limited, overloaded, not_sent, ...).",
                          outcome_labels, NULL, 0);
    int m_in_flight =
        sl_metrics_family(ctx.metrics, SL_METRIC_GAUGE, "sluice_dispatcher_calls_in_flight",
                          "Provider calls under way.", NULL, NULL, 0);
    int m_refused = sl_metrics_family(
        ctx.metrics, SL_METRIC_COUNTER, "sluice_dispatcher_dispatches_refused_total",
        "Dispatch messages refused: forged or malformed.", NULL, NULL, 0);
    static const char *const reason_label[] = {"reason", NULL};
    int m_refused_by = sl_metrics_family(
        ctx.metrics, SL_METRIC_COUNTER, "sluice_dispatcher_refused_total",
        "Dispatch messages dropped without a call or a usage event, by reason: forged (no valid "
        "signature), malformed, replay (its attempt was running or already answered here).",
        reason_label, NULL, 0);
    ctx.m_latency = sl_metrics_family(ctx.metrics, SL_METRIC_HISTOGRAM,
                                      "sluice_dispatcher_provider_latency_seconds",
                                      "Provider calls that got a complete HTTP response (any "
                                      "status), by deployment: seconds from sending the "
                                      "request to the end of the response. Timeouts and "
                                      "transport errors are not observed.",
                                      deployment_label, latency_bounds_s, nbounds);
    ctx.m_ttfb = sl_metrics_family(ctx.metrics, SL_METRIC_HISTOGRAM,
                                   "sluice_dispatcher_provider_ttfb_seconds",
                                   "The same calls, by deployment: seconds from sending the "
                                   "request to the first byte of the response.",
                                   deployment_label, latency_bounds_s, nbounds);
    static const char *const error_label[] = {"error", NULL};
    submit_errors_t submit_errors = {ctx.metrics, -1, {0}, {0}};
    submit_errors.family = sl_metrics_family(
        ctx.metrics, SL_METRIC_COUNTER, "sluice_dispatcher_submit_errors_total",
        "Dispatch messages the dispatcher could not take (no call made; the lease expires and "
        "the job is dispatched again), by error (NOMEM, ...).",
        error_label, NULL, 0);
    int m_lag = sl_kafka_lag_family(ctx.metrics);
    int m_lost = sl_kafka_lost_family(ctx.metrics);
    int m_commit_errors = sl_metrics_family(
        ctx.metrics, SL_METRIC_COUNTER, "sluice_dispatcher_commit_errors_total",
        "Batches of dispatches whose offsets could not be committed before their calls "
        "started (the calls started anyway).",
        NULL, NULL, 0);
    int m_auth = sl_auth_refused_family(ctx.metrics, "sluice_dispatcher");
    if (ctx.metrics == NULL || ctx.m_outcomes < 0 || m_in_flight < 0 || m_refused < 0 ||
        m_refused_by < 0 || ctx.m_latency < 0 || ctx.m_ttfb < 0 || submit_errors.family < 0 ||
        m_lag < 0 || m_commit_errors < 0 || m_auth < 0) {
        fprintf(stderr, "sluice-dispatcher: cannot set up metrics\n");
        return 1;
    }
    int64_t refused_seen = 0, forged = 0;
    /* The engine's counts already added to sluice_dispatcher_refused_total. */
    sl_engine_stats_t counted = {0};
    const char *topics[] = {cfg->kafka.topic_dispatch};
    const char *const cons_props[] = {"enable.auto.commit", "false", "enable.auto.offset.store",
                                      "false", NULL};
    /* Heartbeats have a producer of their own: waiting for one to be acknowledged must not wait
     * for the usage events queued before it. */
    if (sl_kafka_producer_new(cfg, "sluice-dispatcher", on_delivery, NULL, &prod, err,
                              sizeof err) != SL_OK ||
        sl_kafka_producer_new(cfg, "sluice-dispatcher-heartbeat", on_delivery, NULL, &hb_prod, err,
                              sizeof err) != SL_OK ||
        stream_producer_new(cfg, &stream_prod, err, sizeof err) != SL_OK ||
        sl_kafka_consumer_new(cfg, "sluice-dispatcher", "sluice-dispatcher", topics, 1, cons_props,
                              &cons, err, sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-dispatcher: kafka: %s\n", err);
        return 2;
    }
    ctx.prod = prod;
    /* Only sharded schedulers need a copy in every partition (the config is the fleet's); one
     * scheduler reads them all, and copies would only fill the topic. */
    beat_ctx_t beats = {
        hb_prod, prod, cfg->kafka.topic_usage,
        cfg->sched_sharded ? sl_kafka_partition_count(hb_prod, cfg->kafka.topic_usage, 30000) : 0,
        0};
    if (cfg->sched_sharded && beats.nparts <= 0) {
        fprintf(stderr, "sluice-dispatcher: kafka: cannot read the partitions of %s\n",
                cfg->kafka.topic_usage);
        return 2;
    }
    sl_heartbeat_t *hb = sl_heartbeat_new(sl_kafka_instance_name(cfg), cfg->heartbeat_ms,
                                          cfg->max_in_flight, sl_now_ms());
    if (hb == NULL) {
        fprintf(stderr, "sluice-dispatcher: out of memory\n");
        return 2;
    }
    sl_engine_t *engine = NULL;
    /* Signatures are checked here, before the engine (sl_kafka_verify), over the topic, key and
     * value; the engine gets no verifier. */
    if (sl_engine_new(cfg, emit_usage, &ctx, &engine, err, sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-dispatcher: %s\n", err);
        return 2;
    }
    sl_engine_on_timing(engine, on_timing, &ctx);
    /* Provider batches: their steps run on a thread of their own (batch.h). */
    sl_batchx_t *batches = NULL;
    if (sl_batchx_new(cfg, &batches, err, sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-dispatcher: %s\n", err);
        return 2;
    }
    chunk_ctx_t chunks = {stream_prod, cfg->kafka.topic_stream};
    sl_engine_on_chunk(engine, emit_stream_chunk, &chunks);
    sl_engine_on_outcome(engine, count_outcome, &ctx);
    /* Learn the stream topic's partitions and leaders now, so the first chunk of the first
     * stream does not wait for a metadata round trip. Holding the handle keeps them fresh. */
    rd_kafka_topic_t *stream_topic = rd_kafka_topic_new(stream_prod, cfg->kafka.topic_stream, NULL);
    const struct rd_kafka_metadata *md = NULL;
    if (stream_topic != NULL &&
        rd_kafka_metadata(stream_prod, 0, stream_topic, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR)
        rd_kafka_metadata_destroy(md);
    else
        sl_warn("no metadata yet for %s; the first stream chunk may be slower",
                cfg->kafka.topic_stream);
    /* librdkafka writes to this pipe when the consumer queue gets messages, so one poll waits
     * for both provider sockets and Kafka. */
    int pipefd[2];
    if (pipe2(pipefd, O_NONBLOCK | O_CLOEXEC) != 0) {
        fprintf(stderr, "sluice-dispatcher: pipe failed\n");
        return 2;
    }
    rd_kafka_queue_t *queue = rd_kafka_queue_get_consumer(cons);
    rd_kafka_queue_io_event_enable(queue, pipefd[1], "1", 1);
    sl_info("dispatcher %s (incarnation %.8s) started: %s -> providers -> %s (max %lld calls in "
            "flight)",
            sl_kafka_instance_name(cfg), sl_heartbeat_incarnation(hb), cfg->kafka.topic_dispatch,
            cfg->kafka.topic_usage, (long long)cfg->max_in_flight);

    int64_t last_stats = sl_now_ms();
    int64_t last_lag = 0;
    double last_commit = sl_mono_ms();
    int uncommitted = 0, group_refused = 0;
    while (!sl_stop_requested() && !group_refused) {
        /* Take a batch, commit it, then start its calls (see the top of this file). */
        rd_kafka_message_t *taken[TAKE_MAX];
        int ntaken = 0;
        int room = (int)(cfg->max_in_flight - sl_engine_in_flight(engine));
        while (ntaken < room && ntaken < TAKE_MAX) {
            rd_kafka_message_t *msg = rd_kafka_consume_queue(queue, 0);
            if (msg == NULL)
                break;
            if (msg->err) {
                if (sl_kafka_consume_fatal(msg))
                    group_refused = 1;
                else
                    sl_warn("consume: %s", rd_kafka_message_errstr(msg));
                rd_kafka_message_destroy(msg);
                continue;
            }
            rd_kafka_offset_store(msg->rkt, msg->partition, msg->offset);
            taken[ntaken++] = msg;
        }
        /* The engine only queues the calls it accepts (they leave in sl_engine_run), so the
         * batch is submitted first and committed synchronously only when it holds calls. */
        sl_engine_stats_t before;
        sl_engine_stats(engine, &before);
        for (int i = 0; i < ntaken; i++) {
            rd_kafka_message_t *msg = taken[i];
            const char *topic = rd_kafka_topic_name(msg->rkt);
            sl_auth_t auth = sl_kafka_verify(keyring, sl_auth_writers(cfg, topic), msg);
            if (auth != SL_AUTH_OK) {
                /* Also a "forged" dispatch in the counters that were there first. */
                sl_auth_refuse(ctx.metrics, m_auth, topic, auth);
                const char *v[] = {"forged"};
                sl_metrics_add(ctx.metrics, m_refused_by, v, 1);
                sl_metrics_add(ctx.metrics, m_refused, NULL, 1);
                forged++;
            } else if (sl_batchx_is_op(msg->payload, msg->len)) {
                if (sl_batchx_submit(batches, msg->payload, msg->len) != SL_OK)
                    sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN,
                                 "a provider batch op was dropped: too many waiting (the "
                                 "scheduler sends it again)");
            } else {
                sl_err_t rc = sl_engine_submit(engine, msg->payload, msg->len, sl_now_ms());
                if (rc != SL_OK)
                    submit_failed(&submit_errors, rc, sl_now_ms());
            }
            rd_kafka_message_destroy(msg);
        }
        sl_engine_stats_t after;
        sl_engine_stats(engine, &after);
        int started = after.accepted > before.accepted;
        if (ntaken > 0)
            uncommitted = 1;
        /* A batch of refused or stale dispatches starts nothing: its offsets go out in the
         * background, at most every COMMIT_IDLE_MS, so that a flood of them costs no round trip
         * each. */
        if (started || (uncommitted && sl_mono_ms() - last_commit >= COMMIT_IDLE_MS)) {
            commit_taken(cons, ctx.metrics, m_commit_errors, started ? 0 : 1);
            uncommitted = 0;
            last_commit = sl_mono_ms();
        }
        if (beat(hb, engine, &beats) != SL_OK)
            sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN, "heartbeat not sent: out of memory");
        /* The calls just taken leave only in sl_engine_run (libcurl sends nothing before): the
         * heartbeat naming them reaches the broker first, so that if this process dies, the
         * scheduler knows which calls may have reached a provider. */
        if (started && rd_kafka_flush(hb_prod, HEARTBEAT_FLUSH_MS) != RD_KAFKA_RESP_ERR_NO_ERROR)
            sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN,
                         "the heartbeat naming new calls was not acknowledged within %d ms; "
                         "starting them anyway",
                         HEARTBEAT_FLUSH_MS);
        /* A full batch may have left messages in the queue, and the queue signals the pipe only
         * when it turns non-empty: then the calls are advanced without waiting. */
        sl_engine_run(engine, pipefd[0], ntaken == TAKE_MAX ? 0 : 100);
        char drain[64];
        while (read(pipefd[0], drain, sizeof drain) > 0) {
        }
        sl_batchx_drain(batches, emit_usage, &ctx);
        rd_kafka_poll(prod, 0);
        rd_kafka_poll(hb_prod, 0);
        rd_kafka_poll(stream_prod, 0);
        int64_t now = sl_now_ms();
        sl_metrics_set(ctx.metrics, m_in_flight, NULL, (double)sl_engine_in_flight(engine));
        sl_engine_stats_t est;
        sl_engine_stats(engine, &est);
        if (est.malformed > refused_seen) {
            sl_metrics_add(ctx.metrics, m_refused, NULL, (double)(est.malformed - refused_seen));
            refused_seen = est.malformed;
        }
        const struct {
            const char *reason;
            int64_t now, *seen;
        } refusals[] = {{"malformed", est.malformed, &counted.malformed},
                        {"replay", est.replayed, &counted.replayed}};
        for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
            if (refusals[i].now == *refusals[i].seen)
                continue;
            const char *v[] = {refusals[i].reason};
            sl_metrics_add(ctx.metrics, m_refused_by, v,
                           (double)(refusals[i].now - *refusals[i].seen));
            *refusals[i].seen = refusals[i].now;
        }
        if (now - last_lag >= 1000) {
            sl_kafka_export_lag(cons, ctx.metrics, m_lag);
            sl_kafka_export_lost(ctx.metrics, m_lost);
            last_lag = now;
            /* A flood that stopped still reports how many lines it held back. */
            sl_log_flush_limited();
        }
        if (now - last_stats >= 10000) {
            sl_engine_stats_t st;
            sl_engine_stats(engine, &st);
            sl_info("calls accepted %lld completed %lld in flight %d | not sent %lld |"
                    " untranslatable %lld | forged %lld malformed %lld replayed %lld |"
                    " stream chunks %lld",
                    (long long)st.accepted, (long long)st.completed, sl_engine_in_flight(engine),
                    (long long)st.not_sent, (long long)st.untranslatable, (long long)forged,
                    (long long)st.malformed, (long long)st.replayed, (long long)st.chunks);
            last_stats = now;
        }
    }
    /* Let the calls under way finish and report: their leases are still counted on. */
    sl_info("dispatcher stopping; finishing %d calls in flight", sl_engine_in_flight(engine));
    double until = sl_mono_ms() + 30000;
    while (sl_engine_in_flight(engine) > 0 && sl_mono_ms() < until) {
        sl_engine_run(engine, -1, 100);
        rd_kafka_poll(stream_prod, 0);
        /* Still alive: the scheduler must not settle these calls as a dead dispatcher's. */
        beat(hb, engine, &beats);
        rd_kafka_poll(hb_prod, 0);
    }
    sl_batchx_free(batches); /* after the step under way; its messages go out below */
    rd_kafka_flush(stream_prod, 10000);
    rd_kafka_flush(prod, 10000);
    rd_kafka_flush(hb_prod, 10000);
    if (uncommitted)
        commit_taken(cons, ctx.metrics, m_commit_errors, 0);
    rd_kafka_queue_destroy(queue);
    sl_kafka_consumer_close(cons);
    rd_kafka_destroy(prod);
    rd_kafka_destroy(hb_prod);
    if (stream_topic != NULL)
        rd_kafka_topic_destroy(stream_topic);
    rd_kafka_destroy(stream_prod);
    sl_engine_free(engine);
    sl_heartbeat_free(hb);
    sl_metrics_free(ctx.metrics);
    sl_kafka_sign_as(NULL, SL_ROLE_DISPATCHER);
    sl_kafka_mac_topics(NULL, NULL, NULL, SL_ROLE_SCHEDULER);
    sl_signer_free(signer);
    sl_keyring_free(keyring);
    close(pipefd[0]);
    close(pipefd[1]);
    curl_global_cleanup();
    sl_config_free(cfg);
    free(opts.rest);
    return group_refused ? 2 : 0; /* 2: a setting to change, retrying would wait forever */
}
