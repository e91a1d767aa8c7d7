/* sluice-scheduler: sluice.jobs + sluice.usage -> SQLite ledger -> signed sluice.dispatch, and
 * terminal results to sluice.results through the SQLite outbox.
 *
 * One loop: read a batch of messages, apply them and one scheduling step in one SQLite
 * transaction, commit it, commit the Kafka offsets, then produce what the step decided. A crash
 * at any point either redelivers input (de-duplicated by job id and reservation id) or leaves a
 * lease that expires; results wait in the outbox until the broker acknowledges them. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "api.h"
#include "kafka.h"
#include "log.h"
#include "metrics.h"
#include "outbox.h"
#include "proc.h"
#include "sched.h"
#include "sign.h"
#include "store.h"
#include "util.h"

enum { BATCH_MAX = 500, STATS_EVERY_MS = 10000 };

static const char usage_text[] =
    "usage: sluice-scheduler [--config FILE] [--log-level debug|info|warn|error]\n"
    "       [--metrics-listen HOST:PORT] [--help]\n"
    "\n"
    "Stores jobs from the jobs topic in SQLite (scheduler.db in the config), shares capacity\n"
    "between tenants by deficit round-robin, reserves every bucket of a job before it is sent,\n"
    "leases it to a dispatcher with a signed dispatch message, reconciles usage events, retries\n"
    "after 429s and expires jobs past their deadline. Run one scheduler per database: it takes\n"
    "a lock on the file. The signing key (signing.secret_key_file) is created on first start.\n"
    "\n"
    "The admin API (scheduler.admin_listen, default 127.0.0.1:9320; see scheduler/ADMIN-API.md)\n"
    "lists buckets and queues, pauses and resumes tenants and keys, and changes limits, weights\n"
    "and guarantees at run time (stored in the database; they survive restarts).\n"
    "\n"
    "SIGHUP reloads the config file: limits, quotas, weights, tenants and keys change without\n"
    "losing queued jobs (bucket levels and counters carry over; a lowered limit applies from\n"
    "the next admission). SIGTERM/SIGINT stop it cleanly.\n";

/* A delivery report: results carry their outbox row as opaque (dispatches NULL). */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    (void)rk;
    sl_outbox_t *ob = opaque;
    if (msg->_private == NULL) {
        if (msg->err)
            sl_warn("dispatch delivery failed: %s (the lease will expire and retry)",
                    rd_kafka_err2str(msg->err));
        return;
    }
    if (msg->err)
        sl_warn("result delivery failed: %s; will produce again", rd_kafka_err2str(msg->err));
    sl_outbox_delivered(ob, (int64_t)(intptr_t)msg->_private, msg->err == 0);
}

/* Produces one message; results carry their outbox row (seq > 0) as delivery opaque. */
static void produce(rd_kafka_t *prod, const char *topic, const char *key, const char *value,
                    const char *sig, int64_t seq, sl_outbox_t *ob)
{
    rd_kafka_headers_t *hdrs = NULL;
    if (sig != NULL && sig[0] != '\0') {
        hdrs = rd_kafka_headers_new(1);
        rd_kafka_header_add(hdrs, "sluice-sig", -1, sig, (ssize_t)strlen(sig));
    }
    sl_err_t rc = sl_kafka_produce(prod, topic, key, value, strlen(value), hdrs,
                                   (void *)(intptr_t)seq);
    if (seq > 0)
        sl_outbox_sent(ob, rc == SL_OK);
}

typedef struct {
    rd_kafka_t *prod;
    sl_outbox_t *ob;
} sweep_t;

static void produce_outbox_row(int64_t seq, const char *topic, const char *key, const char *value,
                               void *arg)
{
    sweep_t *sw = arg;
    produce(sw->prod, topic, key, value, NULL, seq, sw->ob);
}

static int has_assignment(rd_kafka_t *cons)
{
    rd_kafka_topic_partition_list_t *parts = NULL;
    if (rd_kafka_assignment(cons, &parts) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return 0;
    int n = parts->cnt;
    rd_kafka_topic_partition_list_destroy(parts);
    return n > 0;
}

static void ensure_signing_key(const sl_config_t *cfg)
{
    char sk[1024], pk[1024];
    sl_resolve_path(cfg->signing_secret_key_file, sk, sizeof sk);
    sl_resolve_path(cfg->signing_public_key_file, pk, sizeof pk);
    FILE *f = fopen(sk, "r");
    if (f != NULL) {
        fclose(f);
        return;
    }
    if (sl_sign_keygen(sk, pk) != SL_OK) {
        fprintf(stderr, "sluice-scheduler: cannot create signing keys %s / %s\n", sk, pk);
        exit(2);
    }
    sl_info("created a dispatch signing key pair: %s (secret), %s (public)", sk, pk);
}

/* ---- metrics: the core's counters and gauges, exported once a second ---- */

static const struct {
    const char *name, *help;
    size_t offset; /* of the int64_t in sl_sched_stats_t */
} counters[] = {
    {"sluice_scheduler_jobs_received_total", "Job messages taken from the jobs topic.",
     offsetof(sl_sched_stats_t, jobs_received)},
    {"sluice_scheduler_jobs_duplicate_total", "Jobs received again (same job id).",
     offsetof(sl_sched_stats_t, jobs_duplicate)},
    {"sluice_scheduler_jobs_invalid_total", "Job messages that failed validation.",
     offsetof(sl_sched_stats_t, jobs_invalid)},
    {"sluice_scheduler_queue_full_total", "Jobs refused because their class queue was full.",
     offsetof(sl_sched_stats_t, queue_full)},
    {"sluice_scheduler_shed_total", "Queued jobs shed to make room for sooner ones.",
     offsetof(sl_sched_stats_t, shed)},
    {"sluice_scheduler_cancelled_total", "Queued jobs cancelled by their callers.",
     offsetof(sl_sched_stats_t, cancelled)},
    {"sluice_scheduler_dispatched_total", "Leases given to dispatchers (attempts).",
     offsetof(sl_sched_stats_t, dispatched)},
    {"sluice_scheduler_retried_total", "Attempts put back in line for another try.",
     offsetof(sl_sched_stats_t, retried)},
    {"sluice_scheduler_provider_429_total", "Provider answers 429 (rate limited).",
     offsetof(sl_sched_stats_t, provider_429)},
    {"sluice_scheduler_provider_unavailable_total",
     "Provider answers 5xx, timeouts and transport errors.",
     offsetof(sl_sched_stats_t, provider_5xx)},
    {"sluice_scheduler_leases_expired_total", "Leases that expired without a usage event.",
     offsetof(sl_sched_stats_t, lease_expired)},
    {"sluice_scheduler_tokens_reserved_total",
     "Tokens reserved on provider-side buckets settled at real use.",
     offsetof(sl_sched_stats_t, tokens_reserved)},
    {"sluice_scheduler_tokens_used_total", "What those reservations settled at.",
     offsetof(sl_sched_stats_t, tokens_settled)},
    {"sluice_scheduler_tokens_over_reserved_total",
     "Tokens reserved above real use: capacity held back for nothing until the call ended.",
     offsetof(sl_sched_stats_t, tokens_over_reserved)},
    {"sluice_scheduler_tokens_under_reserved_total",
     "Tokens used above the reservation, charged afterwards as debt.",
     offsetof(sl_sched_stats_t, tokens_under_reserved)},
    {"sluice_scheduler_provider_tokens_charged_total",
     "Tokens reserved on provider-side token buckets, every attempt.",
     offsetof(sl_sched_stats_t, provider_tokens_charged)},
    {"sluice_scheduler_provider_tokens_kept_total",
     "What those reservations settled at: refusals given back, real use, or the whole charge "
     "when the call may have counted. Above what the provider counted: capacity wasted.",
     offsetof(sl_sched_stats_t, provider_tokens_kept)},
};
enum { NCOUNTERS = sizeof counters / sizeof counters[0] };

typedef struct {
    sl_metrics_t *m;
    const sl_config_t **cfg;
    int counter[NCOUNTERS];
    int results, queue, leased, delayed, held, level, capacity, used;
    int admitted, admitted_tokens, refusals, provider, queue_wait, attempts, finished, fallbacks;
    sl_sched_stats_t last;
} exporter_t;

/* ---- metrics of decisions, from the core's hooks ---- */

static void on_leased(void *arg, int tenant, int route, int cls, int deployment, double tokens,
                      int64_t queue_wait_ms)
{
    exporter_t *x = arg;
    const sl_config_t *cfg = *x->cfg;
    const char *v[] = {cfg->tenants[tenant].name, cfg->routes[route].name,
                       cfg->deployments[deployment].name};
    sl_metrics_add(x->m, x->admitted, v, 1);
    sl_metrics_add(x->m, x->admitted_tokens, v, tokens);
    if (queue_wait_ms >= 0) {
        const char *c[] = {sl_class_name((sl_class_t)cls)};
        sl_metrics_observe(x->m, x->queue_wait, c, (double)queue_wait_ms / 1000.0);
    }
}

static void on_refused(void *arg, const char *bucket_id)
{
    exporter_t *x = arg;
    const char *v[] = {bucket_id};
    sl_metrics_add(x->m, x->refusals, v, 1);
}

static void on_provider(void *arg, const char *deployment, const char *outcome,
                        int http_status)
{
    exporter_t *x = arg;
    char status[16];
    snprintf(status, sizeof status, "%d", http_status);
    const char *v[] = {deployment != NULL ? deployment : "unknown", outcome, status};
    sl_metrics_add(x->m, x->provider, v, 1);
}

static void on_finished(void *arg, int cls, const char *status, int attempts)
{
    exporter_t *x = arg;
    const char *v[] = {sl_class_name((sl_class_t)cls), status};
    sl_metrics_observe(x->m, x->attempts, v, attempts);
    sl_metrics_add(x->m, x->finished, v, 1);
}

static void on_fallback(void *arg, int from_route, int to_route, const char *why)
{
    exporter_t *x = arg;
    const sl_config_t *cfg = *x->cfg;
    const char *v[] = {cfg->routes[from_route].name, cfg->routes[to_route].name, why};
    sl_metrics_add(x->m, x->fallbacks, v, 1);
}

static const sl_sched_observer_t observer = {on_leased, on_refused, on_provider, on_fallback,
                                             on_finished};

static int exporter_init(exporter_t *x, sl_metrics_t *m, const sl_config_t **cfg)
{
    static const char *const status_label[] = {"status", NULL};
    static const char *const queue_labels[] = {"route", "class", NULL};
    static const char *const bucket_label[] = {"bucket", NULL};
    static const char *const admit_labels[] = {"tenant", "route", "deployment", NULL};
    static const char *const provider_labels[] = {"deployment", "outcome", "status", NULL};
    static const char *const class_label[] = {"class", NULL};
    static const char *const finish_labels[] = {"class", "status", NULL};
    static const double wait_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1,  0.25, 0.5, 1,
                                         2.5,   5,    10,    30,   60,   300,  900, 3600};
    static const double attempt_bounds[] = {0, 1, 2, 3, 4, 5, 7, 10};
    memset(x, 0, sizeof *x);
    x->m = m;
    x->cfg = cfg;
    x->admitted = sl_metrics_family(
        m, SL_METRIC_COUNTER, "sluice_scheduler_reservations_admitted_total",
        "Reservations admitted (jobs leased), by tenant, route and deployment.", admit_labels,
        NULL, 0);
    x->admitted_tokens = sl_metrics_family(
        m, SL_METRIC_COUNTER, "sluice_scheduler_admitted_tokens_total",
        "Tokens reserved for admitted jobs, by tenant, route and deployment: a tenant's share "
        "of a route is its rate over the route's.",
        admit_labels, NULL, 0);
    x->refusals = sl_metrics_family(
        m, SL_METRIC_COUNTER, "sluice_scheduler_reservations_refused_total",
        "Admissions refused, by the bucket that had no room (the job waits or goes elsewhere).",
        bucket_label, NULL, 0);
    x->provider = sl_metrics_family(
        m, SL_METRIC_COUNTER, "sluice_scheduler_provider_responses_total",
        "Calls reconciled, by deployment, outcome (ok, rate_limited, overloaded, "
        "server_error, timeout, ...) and HTTP status (0: none).",
        provider_labels, NULL, 0);
    x->queue_wait = sl_metrics_family(
        m, SL_METRIC_HISTOGRAM, "sluice_scheduler_queue_wait_seconds",
        "Time from submission to the first dispatch, by class.", class_label, wait_bounds,
        (int)(sizeof wait_bounds / sizeof wait_bounds[0]));
    x->attempts = sl_metrics_family(
        m, SL_METRIC_HISTOGRAM, "sluice_scheduler_job_attempts",
        "Attempts (dispatches) per finished job, by class and status: retries per logical "
        "request are attempts - 1.",
        finish_labels, attempt_bounds, (int)(sizeof attempt_bounds / sizeof attempt_bounds[0]));
    static const char *const fallback_labels[] = {"from_route", "to_route", "reason", NULL};
    x->fallbacks = sl_metrics_family(
        m, SL_METRIC_COUNTER, "sluice_scheduler_fallbacks_total",
        "Jobs moved to a fallback route, by route and reason (no_capable_deployment, "
        "quota_exhausted, providers_paused).",
        fallback_labels, NULL, 0);
    x->finished = sl_metrics_family(
        m, SL_METRIC_COUNTER, "sluice_scheduler_jobs_finished_total",
        "Jobs finished, by class and status (succeeded, failed, rejected, expired: deadline "
        "expiries, cancelled).",
        finish_labels, NULL, 0);
    x->held = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_scheduler_jobs_held",
                                "Queued jobs held back because their tenant or key is paused.",
                                NULL, NULL, 0);
    x->used = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_bucket_used_ratio",
                                "Share of a ledger bucket in use now (1 - level/capacity, "
                                "clamped to [0, 1]); for gauges, concurrency saturation.",
                                bucket_label, NULL, 0);
    int bad = 0;
    for (int i = 0; i < NCOUNTERS; i++) {
        x->counter[i] = sl_metrics_family(m, SL_METRIC_COUNTER, counters[i].name,
                                          counters[i].help, NULL, NULL, 0);
        bad |= x->counter[i] < 0;
    }
    x->results = sl_metrics_family(m, SL_METRIC_COUNTER, "sluice_scheduler_results_total",
                                   "Terminal results written, by status.", status_label, NULL, 0);
    x->queue = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_scheduler_queue_depth",
                                 "Jobs waiting their turn, by route and class.", queue_labels,
                                 NULL, 0);
    x->leased = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_scheduler_leases_in_flight",
                                  "Jobs leased to dispatchers now.", NULL, NULL, 0);
    x->delayed = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_scheduler_jobs_delayed",
                                   "Jobs waiting for a retry backoff.", NULL, NULL, 0);
    x->level = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_bucket_level",
                                 "What a ledger bucket has left (negative: debt).", bucket_label,
                                 NULL, 0);
    x->capacity = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_bucket_capacity",
                                    "A ledger bucket's capacity (burst or window).", bucket_label,
                                    NULL, 0);
    /* Every status from the start, at 0, so that rate() sees the first expiry too. */
    static const char *const statuses[] = {"succeeded", "failed", "expired", "cancelled"};
    for (size_t i = 0; x->results >= 0 && i < sizeof statuses / sizeof statuses[0]; i++) {
        const char *v[] = {statuses[i]};
        sl_metrics_add(m, x->results, v, 0);
    }
    return bad || x->results < 0 || x->queue < 0 || x->leased < 0 || x->delayed < 0 ||
                   x->level < 0 || x->capacity < 0 || x->admitted < 0 ||
                   x->admitted_tokens < 0 || x->refusals < 0 || x->provider < 0 ||
                   x->queue_wait < 0 || x->attempts < 0 || x->held < 0 || x->used < 0 ||
                   x->finished < 0 || x->fallbacks < 0
               ? -1
               : 0;
}

static void exporter_update(exporter_t *x, sl_sched_t *sched, const sl_config_t *cfg,
                            int64_t now_ms)
{
    sl_sched_stats_t st;
    sl_sched_stats(sched, &st);
    for (int i = 0; i < NCOUNTERS; i++) {
        int64_t cur, last;
        memcpy(&cur, (const char *)&st + counters[i].offset, sizeof cur);
        memcpy(&last, (const char *)&x->last + counters[i].offset, sizeof last);
        if (cur > last)
            sl_metrics_add(x->m, x->counter[i], NULL, (double)(cur - last));
    }
    const struct {
        const char *status;
        int64_t cur, last;
    } results[] = {{"succeeded", st.succeeded, x->last.succeeded},
                   {"failed", st.failed, x->last.failed},
                   {"expired", st.expired, x->last.expired},
                   {"cancelled", st.cancelled, x->last.cancelled}};
    for (size_t i = 0; i < sizeof results / sizeof results[0]; i++) {
        const char *v[] = {results[i].status};
        if (results[i].cur > results[i].last)
            sl_metrics_add(x->m, x->results, v, (double)(results[i].cur - results[i].last));
    }
    x->last = st;
    sl_metrics_set(x->m, x->leased, NULL, (double)st.leased);
    sl_metrics_set(x->m, x->delayed, NULL, (double)st.delayed);
    sl_metrics_set(x->m, x->held, NULL, (double)st.held);
    for (int r = 0; r < cfg->nroutes; r++) {
        for (int c = 0; c < SL_CLASS_COUNT; c++) {
            const char *v[] = {cfg->routes[r].name, sl_class_name((sl_class_t)c)};
            sl_metrics_set(x->m, x->queue, v, (double)sl_sched_queue_depth(sched, r, c));
        }
    }
    /* The registry keeps SL_METRICS_MAX_SERIES label sets a family: the first buckets (the
     * deployments' and their scopes' come first) are exported, and the rest not even looked
     * at, so that 100,000 tenants cost the loop nothing here. */
    int nbuckets = sl_sched_bucket_count(sched);
    if (nbuckets > SL_METRICS_MAX_SERIES)
        nbuckets = SL_METRICS_MAX_SERIES;
    for (int b = 0; b < nbuckets; b++) {
        const char *id;
        double level, capacity;
        sl_sched_bucket(sched, b, now_ms, &id, &level, &capacity);
        const char *v[] = {id};
        sl_metrics_set(x->m, x->level, v, level);
        sl_metrics_set(x->m, x->capacity, v, capacity);
        double used = capacity > 0 ? 1.0 - level / capacity : 0;
        sl_metrics_set(x->m, x->used, v, used < 0 ? 0 : used > 1 ? 1 : used);
    }
}

/* SIGHUP: applies the config file again without losing queued work (quotas, weights, limits,
 * tenants, keys). Kafka, database and signing settings need a restart: a change there is refused
 * and the running config stays. */
static void reload(sl_config_t **cfgp, sl_store_t *store,
                   sl_sched_t **sched)
{
    sl_config_t *old = *cfgp, *fresh = NULL;
    char err[512] = "";
    if (sl_config_load(old->path, &fresh, err, sizeof err) != SL_OK) {
        sl_error("reload refused, keeping the running config: %s", err);
        return;
    }
    if (strcmp(fresh->db_path, old->db_path) != 0 ||
        strcmp(fresh->kafka.topic_jobs, old->kafka.topic_jobs) != 0 ||
        strcmp(fresh->kafka.topic_usage, old->kafka.topic_usage) != 0 ||
        strcmp(fresh->kafka.topic_dispatch, old->kafka.topic_dispatch) != 0 ||
        strcmp(fresh->kafka.topic_results, old->kafka.topic_results) != 0 ||
        strcmp(fresh->signing_secret_key_file, old->signing_secret_key_file) != 0 ||
        strcmp(fresh->schema_dir, old->schema_dir) != 0) {
        sl_error("reload refused: the database, topics, schema or signing key changed; those "
                 "need a restart");
        sl_config_free(fresh);
        return;
    }
    int64_t now = sl_now_ms();
    sl_err_t rc = sl_store_begin(store);
    if (rc == SL_OK)
        rc = sl_sched_save(*sched, now);
    if (rc == SL_OK)
        rc = sl_store_commit(store);
    else
        sl_store_rollback(store);
    if (rc == SL_OK)
        rc = sl_sched_reload(sched, fresh, now, err, sizeof err);
    if (rc != SL_OK) {
        sl_error("reload failed, keeping the running config: %s",
                 err[0] != '\0' ? err : sl_strerror(rc));
        sl_config_free(fresh);
        return;
    }
    *cfgp = fresh;
    sl_config_free(old);
    sl_info("config reloaded from %s: %d deployments, %d routes, %d tenants", fresh->path,
            fresh->ndeployments, fresh->nroutes, fresh->ntenants);
}

/* Small fetches per partition interleave the tenants' partitions finely, so that an
 * interactive job is read less far behind another tenant's backlog (bench/scenarios noisy: p99
 * queue wait 343 ms with librdkafka's 1 MB, 267 ms with 64 KB). Shortening the read-ahead
 * (queued.min.messages 500) made it far worse (1.3 s): the usage events starved. */
static const char *const consumer_props[] = {"max.partition.fetch.bytes", "65536", NULL};

int main(int argc, char **argv)
{
    sl_proc_opts_t opts;
    sl_proc_parse_daemon(argc, argv, "sluice-scheduler", usage_text, &opts);
    sl_config_t *cfg = sl_proc_start("scheduler", &opts);
    char err[512] = "";
    ensure_signing_key(cfg);
    sl_signer_t *signer = NULL;
    char path[1024];
    sl_resolve_path(cfg->signing_secret_key_file, path, sizeof path);
    if (sl_signer_load(path, &signer) != SL_OK) {
        fprintf(stderr, "sluice-scheduler: cannot load signing key %s\n", path);
        return 2;
    }
    char sql_rel[1024], sql_path[1024];
    snprintf(sql_rel, sizeof sql_rel, "%s/ledger.sql", cfg->schema_dir);
    sl_resolve_path(sql_rel, sql_path, sizeof sql_path);
    sl_store_t *store = NULL;
    if (sl_store_open(cfg->db_path, sql_path, &store, err, sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-scheduler: %s\n", err);
        return 2;
    }
    sl_sched_t *sched = NULL;
    if (sl_sched_new(cfg, store, signer, sl_now_ms(), &sched, err, sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-scheduler: %s\n", err);
        return 2;
    }
    sl_outbox_t *ob = sl_outbox_new();
    if (ob == NULL) {
        fprintf(stderr, "sluice-scheduler: out of memory\n");
        return 2;
    }
    rd_kafka_t *prod = NULL, *cons = NULL;
    const char *topics[] = {cfg->kafka.topic_jobs, cfg->kafka.topic_usage};
    if (sl_kafka_producer_new(cfg, "sluice-scheduler", on_delivery, ob, &prod, err,
                              sizeof err) != SL_OK ||
        sl_kafka_consumer_new(cfg, "sluice-scheduler", "sluice-scheduler", topics, 2,
                              consumer_props, &cons, err, sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-scheduler: kafka: %s\n", err);
        return 2;
    }
    /* Results left in the outbox by a previous run go out first. */
    sweep_t sw = {prod, ob};
    sl_outbox_sweep(ob, store, 1 /*all*/, produce_outbox_row, &sw);
    sl_info("scheduler started: db %s, %d deployments, %d routes, %d tenants", cfg->db_path,
            cfg->ndeployments, cfg->nroutes, cfg->ntenants);

    sl_metrics_t *metrics = sl_proc_metrics(&opts, cfg->sched_metrics_listen);
    exporter_t exporter;
    if (metrics == NULL || exporter_init(&exporter, metrics, (const sl_config_t **)&cfg) != 0) {
        fprintf(stderr, "sluice-scheduler: cannot set up metrics\n");
        return 1;
    }
    sl_sched_observe(sched, &observer, &exporter);
    int lag_family = sl_kafka_lag_family(metrics);
    if (lag_family < 0) {
        fprintf(stderr, "sluice-scheduler: cannot set up metrics\n");
        return 1;
    }
    sl_admin_t *admin = NULL;
    sl_api_t api = {&sched, (const sl_config_t **)&cfg, store, sl_now_ms};
    if (cfg->admin_listen[0] != '\0') {
        int port = 0;
        if (sl_admin_start(cfg->admin_listen, &admin, &port, err, sizeof err) != SL_OK)
            sl_warn("admin API not served: %s", err);
        else
            sl_info("admin API on http://%s/v1/ (port %d)%s", cfg->admin_listen, port,
                    cfg->nadmin_keys == 0 ? "; no admin_keys in the config: every request "
                                            "is refused"
                                          : "");
    }
    int64_t last_export = 0;
    int64_t next_wait = 1;
    int64_t deaf_since = 0;
    int64_t last_stats = sl_now_ms();
    int exit_code = 0;
    rd_kafka_message_t **batch = calloc(BATCH_MAX, sizeof *batch);
    while (!sl_stop_requested()) {
        int timeout = (int)(next_wait < 50 ? next_wait : 50);
        int n = 0;
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(cons, timeout);
        while (msg != NULL) {
            batch[n++] = msg;
            msg = n < BATCH_MAX ? rd_kafka_consumer_poll(cons, 0) : NULL;
        }
        int64_t now = sl_now_ms();
        sl_err_t rc = sl_store_begin(store);
        if (rc == SL_OK)
            rc = sl_outbox_forget_delivered(ob, store);
        for (int i = 0; rc == SL_OK && i < n; i++) {
            rd_kafka_message_t *m = batch[i];
            if (m->err) {
                sl_warn("consume: %s", rd_kafka_message_errstr(m));
                continue;
            }
            const char *topic = rd_kafka_topic_name(m->rkt);
            if (strcmp(topic, cfg->kafka.topic_jobs) == 0)
                rc = sl_sched_on_job(sched, m->payload, m->len, now);
            else
                rc = sl_sched_on_usage(sched, m->payload, m->len, now);
        }
        /* Without partitions the scheduler hears no usage events: it then neither leases nor
         * lets leases expire, and the silent time is added to the leases afterwards. */
        int assigned = has_assignment(cons);
        if (!assigned && deaf_since == 0)
            deaf_since = now;
        if (assigned && deaf_since != 0) {
            sl_sched_extend_leases(sched, now - deaf_since);
            deaf_since = 0;
        }
        if (rc == SL_OK && assigned)
            rc = sl_sched_tick(sched, now, &next_wait);
        else
            next_wait = 50;
        if (rc == SL_OK)
            rc = sl_store_commit(store);
        if (rc != SL_OK) {
            /* The transaction could not be completed (database, memory): stop without
             * committing offsets, so the input is redelivered to the next run, which rebuilds
             * the core from the store. */
            sl_error("transaction failed (%s); stopping", sl_strerror(rc));
            sl_store_rollback(store);
            exit_code = 1;
            for (int i = 0; i < n; i++)
                rd_kafka_message_destroy(batch[i]);
            break;
        }
        sl_outbox_committed(ob);
        for (int i = 0; i < n; i++)
            rd_kafka_message_destroy(batch[i]);
        if (n > 0) {
            rd_kafka_resp_err_t cerr = rd_kafka_commit(cons, NULL, 1 /*async*/);
            if (cerr != RD_KAFKA_RESP_ERR_NO_ERROR && cerr != RD_KAFKA_RESP_ERR__NO_OFFSET)
                sl_warn("offset commit: %s", rd_kafka_err2str(cerr));
        }
        sl_sched_msg_t *out = NULL;
        int nout = sl_sched_take(sched, &out);
        for (int i = 0; i < nout; i++)
            produce(prod, out[i].topic, out[i].key, out[i].value,
                    out[i].kind == SL_MSG_DISPATCH ? out[i].sig : NULL,
                    out[i].kind == SL_MSG_RESULT ? out[i].seq : 0, ob);
        sl_sched_msgs_free(out, nout);
        rd_kafka_poll(prod, 0);
        sl_outbox_sweep(ob, store, 0, produce_outbox_row, &sw);
        if (sl_reload_requested())
            reload(&cfg, store, &sched);
        sl_admin_poll(admin, sl_api_handle, &api);
        if (now - last_export >= 1000) {
            exporter_update(&exporter, sched, cfg, now);
            sl_kafka_export_lag(cons, metrics, lag_family);
            last_export = now;
        }
        if (now - last_stats >= STATS_EVERY_MS) {
            sl_sched_stats_t st;
            sl_sched_stats(sched, &st);
            sl_info("jobs in %lld (dup %lld, invalid %lld) | queued %lld delayed %lld leased %lld |"
                    " dispatched %lld succeeded %lld failed %lld expired %lld retried %lld |"
                    " provider 429 %lld 5xx %lld | leases expired %lld | tokens reserved %lld,"
                    " used %lld, over-reserved %lld, under-reserved %lld",
                    (long long)st.jobs_received, (long long)st.jobs_duplicate,
                    (long long)st.jobs_invalid, (long long)st.queued, (long long)st.delayed,
                    (long long)st.leased, (long long)st.dispatched, (long long)st.succeeded,
                    (long long)st.failed, (long long)st.expired, (long long)st.retried,
                    (long long)st.provider_429, (long long)st.provider_5xx,
                    (long long)st.lease_expired, (long long)st.tokens_reserved,
                    (long long)st.tokens_settled, (long long)st.tokens_over_reserved,
                    (long long)st.tokens_under_reserved);
            last_stats = now;
        }
    }
    sl_info("scheduler stopping");
    sl_admin_stop(admin);
    rd_kafka_flush(prod, 10000);
    /* Acknowledged results can leave the outbox now; unacknowledged ones go out next start. */
    sl_outbox_close(ob, store);
    sl_kafka_consumer_close(cons);
    rd_kafka_destroy(prod);
    free(batch);
    sl_outbox_free(ob);
    sl_metrics_free(metrics);
    sl_sched_free(sched);
    sl_store_close(store);
    sl_signer_free(signer);
    sl_config_free(cfg);
    free(opts.rest);
    return exit_code;
}
