/* coord.c - capacity leases over Kafka: a shard's side and the coordinator's (see coord.h). */
#include "coord.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "kafka.h"
#include "log.h"
#include "util.h"

/* How often a shard reports and the coordinator answers: a 60th of a minute (tests shorten the
 * minute), from 100 to 500 ms. A demand that moves is followed within about two of these, and a
 * lease is renewed many times before it runs out. */
static double every_ms(const sl_config_t *cfg)
{
    double ms = (double)cfg->minute_ms / 60.0;
    return ms < 100 ? 100 : ms > 500 ? 500 : ms;
}
/* The messages read back at the start: the newest ones, enough for every grant a lease and the
 * longest window ago with dozens of shards reporting twice a second. */
#define READ_BACK 16384
/* Reports whose send time is remembered (to count a lease from the report its grant answers). */
#define SENT_RING 128
/* Capacity messages folded in one loop turn at most. */
#define FOLD_PER_STEP 512

struct sl_coord {
    rd_kafka_t *cons, *prod;
    sl_keyring_t *keyring;
    char *topic;
    char self[SL_GRANTS_ID_MAX];
    sl_grants_t *view;
    double *share;    /* the last grant taken: shares per bucket of the view; -1: not named */
    double *incoming; /* a grant as read, before it is taken */
    int have_grant;
    int64_t caught_up_at; /* the offset to have read before coordinating; -1: read */
    /* the shard's side */
    int64_t seq;
    int64_t sent_seq[SENT_RING];
    double sent_mono[SENT_RING];
    double next_report; /* mono ms */
    double lease_until; /* mono ms; 0: no lease */
    /* the coordinator's side */
    int coordinating;
    int64_t epoch; /* its own while coordinating */
    double next_round;
    double every; /* every_ms */
    /* counters */
    int64_t reports, tables, received, expiries;
    sl_metrics_t *metrics;
    int f_coord, f_epoch, f_live, f_msgs, f_expiries, f_lease;
    int64_t exported[4]; /* reports, tables, received, expiries: what the counters have */
    int f_refused;       /* sluice_scheduler_messages_refused_total (sl_auth_refuse) */
};

static sl_err_t view_new(sl_coord_t *c, const sl_config_t *cfg, sl_sched_t *sched, int64_t now_ms)
{
    int n = sl_sched_shared_buckets(sched, now_ms, NULL, NULL, 0);
    const char **ids = calloc((size_t)(n > 0 ? n : 1), sizeof *ids);
    int64_t *release = calloc((size_t)(n > 0 ? n : 1), sizeof *release);
    sl_err_t rc = SL_ENOMEM;
    if (ids != NULL && release != NULL) {
        sl_sched_shared_buckets(sched, now_ms, ids, release, n);
        c->view = sl_grants_new(ids, release, n, cfg->sched_capacity_lease_ms);
        c->share = calloc((size_t)(n > 0 ? n : 1), sizeof *c->share);
        c->incoming = calloc((size_t)(n > 0 ? n : 1), sizeof *c->incoming);
        if (c->view != NULL && c->share != NULL && c->incoming != NULL)
            rc = SL_OK;
    }
    free(ids);
    free(release);
    return rc;
}

sl_err_t sl_coord_new(const sl_config_t *cfg, sl_sched_t *sched, sl_keyring_t *keyring,
                      sl_coord_t **out, char *err, size_t errlen)
{
    *out = NULL;
    sl_coord_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return SL_ENOMEM;
    c->keyring = keyring;
    c->topic = strdup(cfg->kafka.topic_capacity);
    if (c->topic == NULL) {
        free(c);
        return SL_ENOMEM;
    }
    c->f_coord = c->f_epoch = c->f_live = c->f_msgs = c->f_expiries = c->f_lease = -1;
    /* A name of its own for every process: a restarted scheduler is a new shard, and the
     * one it replaces keeps what it held until its lease and window are over. */
    char rnd[17];
    sl_random_id(rnd, 8);
    snprintf(c->self, sizeof c->self, "%.40s-%s", sl_kafka_instance_name(cfg), rnd);
    c->every = every_ms(cfg);
    sl_err_t rc = view_new(c, cfg, sched, sl_now_ms());
    if (rc == SL_OK)
        rc = sl_kafka_producer_new(cfg, "sluice-scheduler-capacity", NULL, NULL, &c->prod, err,
                                   errlen);
    if (rc == SL_OK)
        rc = sl_kafka_consumer_new(cfg, "sluice-scheduler-capacity", "sluice-scheduler", NULL, 0,
                                   NULL, &c->cons, err, errlen);
    int64_t low = 0, high = 0;
    if (rc == SL_OK) {
        rd_kafka_resp_err_t kerr =
            rd_kafka_query_watermark_offsets(c->cons, c->topic, 0, &low, &high, 10000);
        if (kerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
            snprintf(err, errlen, "%s [0]: offsets: %s (does the topic exist?)", c->topic,
                     rd_kafka_err2str(kerr));
            rc = SL_EKAFKA;
        }
    }
    if (rc == SL_OK) {
        rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(1);
        int64_t from = high - READ_BACK > low ? high - READ_BACK : low;
        rd_kafka_topic_partition_list_add(parts, c->topic, 0)->offset = from;
        if (rd_kafka_assign(c->cons, parts) != RD_KAFKA_RESP_ERR_NO_ERROR) {
            snprintf(err, errlen, "%s: cannot assign partition 0", c->topic);
            rc = SL_EKAFKA;
        }
        rd_kafka_topic_partition_list_destroy(parts);
        c->caught_up_at = high > from ? high - 1 : -1;
    }
    if (rc != SL_OK) {
        sl_coord_free(c);
        return rc;
    }
    sl_info("capacity leases: shard %s; reading %s from %lld messages back; leases of %lld ms",
            c->self, c->topic, (long long)(high - low < READ_BACK ? high - low : READ_BACK),
            (long long)cfg->sched_capacity_lease_ms);
    *out = c;
    return SL_OK;
}

void sl_coord_free(sl_coord_t *c)
{
    if (c == NULL)
        return;
    if (c->prod != NULL) {
        rd_kafka_flush(c->prod, 2000);
        rd_kafka_destroy(c->prod);
    }
    if (c->cons != NULL)
        sl_kafka_consumer_close(c->cons);
    sl_grants_free(c->view);
    free(c->share);
    free(c->incoming);
    free(c->topic);
    free(c);
}

static void send_text(sl_coord_t *c, char *text)
{
    if (text == NULL)
        return;
    if (sl_kafka_produce_to(c->prod, c->topic, 0, c->self, text, strlen(text), NULL, NULL) != SL_OK)
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN,
                     "capacity: cannot produce to %s (the lease is renewed by the next)", c->topic);
    free(text);
}

/* Enforces the last grant's shares (a bucket it does not name: none). */
static sl_err_t apply_grant(sl_coord_t *c, sl_sched_t *sched, int64_t now_ms)
{
    sl_err_t rc = SL_OK;
    for (int b = 0; rc == SL_OK && b < sl_grants_count(c->view); b++) {
        double share = c->have_grant && c->share[b] > 0 ? c->share[b] : 0;
        rc = sl_sched_grant_share(sched, sl_grants_id(c->view, b), share, now_ms);
        if (rc == SL_ENOTFOUND)
            rc = SL_OK; /* a limit a reload removed */
    }
    return rc;
}

/* A grant for this shard: its lease counts from the report it answers. */
static sl_err_t take_grant(sl_coord_t *c, sl_sched_t *sched, const sl_grant_t *g, int64_t now_ms)
{
    int slot = (int)(g->echo % SENT_RING);
    if (g->echo <= 0 || c->sent_seq[slot] != g->echo)
        return SL_OK; /* it answers no report this process remembers sending */
    double sent = c->sent_mono[slot];
    double until = sent + (double)g->lease_ms;
    if (until <= sl_mono_ms())
        return SL_OK;
    if (until > c->lease_until)
        c->lease_until = until;
    memcpy(c->share, g->share, (size_t)sl_grants_count(c->view) * sizeof *c->share);
    c->have_grant = 1;
    char line[512];
    size_t k = 0;
    line[0] = '\0';
    for (int b = 0; b < sl_grants_count(c->view) && k + 100 < sizeof line; b++)
        k += (size_t)snprintf(line + k, sizeof line - k, " %.60s %.3f", sl_grants_id(c->view, b),
                              c->share[b]);
    sl_debug("capacity: granted (epoch %lld):%s%s", (long long)g->epoch, line,
             k + 100 >= sizeof line ? " ..." : "");
    return apply_grant(c, sched, now_ms);
}

static sl_err_t report(sl_coord_t *c, sl_sched_t *sched, int64_t now_ms, int left)
{
    int nb = sl_grants_count(c->view);
    sl_want_t *d = calloc((size_t)(nb > 0 ? nb : 1), sizeof *d);
    sl_err_t rc = d != NULL ? SL_OK : SL_ENOMEM;
    if (rc == SL_OK)
        rc = sl_sched_demand(sched, now_ms, sl_grants_ids(c->view), nb, d);
    if (rc == SL_OK) {
        c->seq++;
        int slot = (int)(c->seq % SENT_RING);
        c->sent_seq[slot] = c->seq;
        c->sent_mono[slot] = sl_mono_ms();
        char *text = sl_grants_report(c->view, c->self, c->seq, now_ms, d, left);
        rc = text != NULL ? SL_OK : SL_ENOMEM;
        send_text(c, text);
        c->reports++;
    }
    free(d);
    return rc;
}

sl_err_t sl_coord_step(sl_coord_t *c, sl_sched_t *sched, int coordinate, int64_t now_ms)
{
    sl_grant_t mine = {.share = c->incoming};
    sl_err_t rc = SL_OK;
    rd_kafka_message_t *m;
    for (int i = 0;
         rc == SL_OK && i < FOLD_PER_STEP && (m = rd_kafka_consumer_poll(c->cons, 0)) != NULL;
         i++) {
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            rd_kafka_message_destroy(m);
            continue;
        }
        if (m->err) {
            sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN, "capacity: %s", rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
            continue;
        }
        if (c->caught_up_at >= 0 && m->offset >= c->caught_up_at) {
            c->caught_up_at = -1;
            sl_info("capacity: read %s up to where it was at the start", c->topic);
        }
        sl_auth_t auth = sl_kafka_verify(c->keyring, SL_ROLE_BIT(SL_ROLE_SCHEDULER), m);
        int is_mine = 0;
        if (auth == SL_AUTH_OK &&
            sl_grants_fold(c->view, m->payload, m->len, now_ms, c->self, &mine, &is_mine) > 0)
            c->received++;
        else if (auth != SL_AUTH_OK)
            sl_auth_refuse(c->metrics, c->f_refused, c->topic, auth);
        rd_kafka_message_destroy(m);
        if (is_mine)
            rc = take_grant(c, sched, &mine, now_ms);
    }
    if (rc != SL_OK)
        return rc;
    double mono = sl_mono_ms();
    if (c->lease_until > 0 && mono >= c->lease_until) {
        /* No grant renewed the lease: nothing of the shared limits is this shard's any more. */
        c->lease_until = 0;
        c->have_grant = 0;
        c->expiries++;
        sl_warn("capacity: this shard's lease ran out unrenewed; it admits nothing under the "
                "shared limits until the coordinator grants again");
        rc = apply_grant(c, sched, now_ms);
    }
    if (rc == SL_OK && mono >= c->next_report) {
        c->next_report = mono + c->every;
        rc = report(c, sched, now_ms, 0);
    }
    /* The coordinator: elected by owning partition 0 of the jobs topic, and only once it knows
     * every grant the topic holds. */
    int64_t seen = sl_grants_epoch(c->view);
    if (c->coordinating && (!coordinate || seen > c->epoch)) {
        sl_info("capacity: no longer the coordinator (epoch %lld%s)", (long long)c->epoch,
                seen > c->epoch ? ": a newer one took over" : "");
        c->coordinating = 0;
    }
    if (!c->coordinating && coordinate && c->caught_up_at < 0) {
        c->coordinating = 1;
        c->epoch = seen + 1;
        c->next_round = 0;
        sl_info("capacity: coordinating, epoch %lld (%d shards live)", (long long)c->epoch,
                sl_grants_live(c->view, now_ms));
    }
    if (rc == SL_OK && c->coordinating && mono >= c->next_round) {
        c->next_round = mono + c->every;
        int is_mine = 0;
        char *text = sl_grants_round(c->view, c->self, c->epoch, now_ms, &mine, &is_mine);
        if (text != NULL)
            c->tables++;
        send_text(c, text);
        if (is_mine)
            rc = take_grant(c, sched, &mine, now_ms);
    }
    rd_kafka_poll(c->prod, 0);
    return rc;
}

sl_err_t sl_coord_leave(sl_coord_t *c, sl_sched_t *sched, int64_t now_ms)
{
    /* Nothing more is admitted here; the report saying so (and acknowledging the newest table)
     * lets the coordinator grant this part away as its use leaves the window, rather than
     * after the lease. */
    c->have_grant = 0;
    c->lease_until = 0;
    sl_err_t rc = apply_grant(c, sched, now_ms);
    if (rc == SL_OK)
        rc = report(c, sched, now_ms, 1);
    if (rc == SL_OK && rd_kafka_flush(c->prod, 2000) != RD_KAFKA_RESP_ERR_NO_ERROR)
        rc = SL_EKAFKA;
    if (rc == SL_OK)
        sl_info("capacity: left; the coordinator grants this shard's part away as its use "
                "leaves the window");
    return rc;
}

sl_err_t sl_coord_reapply(sl_coord_t *c, sl_sched_t *sched, int64_t now_ms)
{
    return apply_grant(c, sched, now_ms);
}

void sl_coord_info(const sl_coord_t *c, int64_t now_ms, sl_coord_info_t *out)
{
    memset(out, 0, sizeof *out);
    if (c == NULL)
        return;
    out->coordinator = c->coordinating;
    out->epoch = sl_grants_epoch(c->view);
    out->live = sl_grants_live(c->view, now_ms);
    double left = c->lease_until - sl_mono_ms();
    out->lease_left_ms = c->lease_until > 0 && left > 0 ? (int64_t)left : 0;
    out->reports = c->reports;
    out->tables = c->tables;
    out->received = c->received;
    out->expiries = c->expiries;
}

int sl_coord_metrics(sl_coord_t *c, sl_metrics_t *m, int refused_family)
{
    c->metrics = m;
    c->f_refused = refused_family;
    c->f_coord =
        sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_scheduler_capacity_coordinator",
                          "1 while this scheduler is the capacity coordinator", NULL, NULL, 0);
    c->f_epoch = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_scheduler_capacity_epoch",
                                   "The newest coordinator epoch seen", NULL, NULL, 0);
    c->f_live = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_scheduler_capacity_shards_live",
                                  "Shards heard from within a lease", NULL, NULL, 0);
    c->f_lease =
        sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_scheduler_capacity_lease_left_seconds",
                          "What is left of this shard's capacity lease (0: none)", NULL, NULL, 0);
    static const char *const dir[] = {"kind", NULL};
    c->f_msgs =
        sl_metrics_family(m, SL_METRIC_COUNTER, "sluice_scheduler_capacity_messages_total",
                          "Capacity messages: reports and tables sent, all received", dir, NULL, 0);
    c->f_expiries =
        sl_metrics_family(m, SL_METRIC_COUNTER, "sluice_scheduler_capacity_lease_expiries_total",
                          "Leases of this shard that ran out unrenewed", NULL, NULL, 0);
    return c->f_coord < 0 || c->f_epoch < 0 || c->f_live < 0 || c->f_lease < 0 || c->f_msgs < 0 ||
                   c->f_expiries < 0
               ? -1
               : 0;
}

void sl_coord_export(sl_coord_t *c, int64_t now_ms)
{
    if (c == NULL || c->metrics == NULL)
        return;
    sl_coord_info_t in;
    sl_coord_info(c, now_ms, &in);
    sl_metrics_set(c->metrics, c->f_coord, NULL, in.coordinator);
    sl_metrics_set(c->metrics, c->f_epoch, NULL, (double)in.epoch);
    sl_metrics_set(c->metrics, c->f_live, NULL, in.live);
    sl_metrics_set(c->metrics, c->f_lease, NULL, (double)in.lease_left_ms / 1000.0);
    static const char *const kinds[] = {"report_sent", "table_sent", "received"};
    int64_t now[4] = {in.reports, in.tables, in.received, in.expiries};
    for (int i = 0; i < 3; i++) {
        const char *k[1] = {kinds[i]};
        sl_metrics_add(c->metrics, c->f_msgs, k, (double)(now[i] - c->exported[i]));
    }
    sl_metrics_add(c->metrics, c->f_expiries, NULL, (double)(now[3] - c->exported[3]));
    memcpy(c->exported, now, sizeof now);
}
