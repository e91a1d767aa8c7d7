/* kafka.c - librdkafka client setup (see kafka.h). */
#include "kafka.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

sl_err_t sl_kafka_bootstrap(const sl_config_t *cfg, int wait_ms, char *out, size_t cap)
{
    const char *env = getenv("SLUICE_KAFKA_BOOTSTRAP");
    if (env != NULL && *env != '\0') {
        snprintf(out, cap, "%s", env);
        return SL_OK;
    }
    if (cfg->kafka.bootstrap_servers[0] != '\0') {
        snprintf(out, cap, "%s", cfg->kafka.bootstrap_servers);
        return SL_OK;
    }
    double until = sl_mono_ms() + wait_ms;
    for (;;) {
        char *text = NULL;
        if (sl_read_file(cfg->kafka.bootstrap_file, 4096, &text, NULL) == SL_OK) {
            text[strcspn(text, "\r\n")] = '\0';
            int ok = text[0] != '\0';
            snprintf(out, cap, "%s", text);
            free(text);
            if (ok)
                return SL_OK;
        }
        if (sl_mono_ms() >= until || sl_stop_requested())
            return SL_ENOTFOUND;
        usleep(100 * 1000);
    }
}

/* Input the broker no longer held when this process came to read it, per topic (see
 * sl_kafka_input_lost). Written from librdkafka's threads, read from the daemon's loop. */
enum { LOST_TOPICS_MAX = 32 };
static struct {
    char topic[SL_KAFKA_TOPIC_MAX];
    int64_t resets;
    int64_t exported; /* of resets, those sl_kafka_export_lost has counted */
} lost[LOST_TOPICS_MAX];
static int nlost;
static pthread_mutex_t lost_lock = PTHREAD_MUTEX_INITIALIZER;

/* Counts one offset reset for the topic that starts text ("<topic> [<partition>]: ..."). */
static void note_lost(const char *text)
{
    const char *end = strstr(text, " [");
    size_t len = end != NULL ? (size_t)(end - text) : 0;
    if (len == 0 || len >= SL_KAFKA_TOPIC_MAX)
        return;
    pthread_mutex_lock(&lost_lock);
    int i = 0;
    while (i < nlost && (strncmp(lost[i].topic, text, len) != 0 || lost[i].topic[len] != '\0'))
        i++;
    if (i == nlost && nlost < LOST_TOPICS_MAX) {
        memcpy(lost[i].topic, text, len);
        lost[i].topic[len] = '\0';
        nlost++;
    }
    if (i < nlost)
        lost[i].resets++;
    pthread_mutex_unlock(&lost_lock);
}

int64_t sl_kafka_input_lost(const char *topic)
{
    int64_t n = 0;
    pthread_mutex_lock(&lost_lock);
    for (int i = 0; i < nlost; i++) {
        if (strcmp(lost[i].topic, topic) == 0)
            n = lost[i].resets;
    }
    pthread_mutex_unlock(&lost_lock);
    return n;
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    /* The offset to read next was out of the partition's range, so librdkafka went on from the
     * oldest message the broker still holds (auto.offset.reset): what lay between was dropped
     * by the broker's retention before this process read it, or the topic was made anew.
     * librdkafka says so only in this warning ("<topic> [<p>]: offset reset (at offset ...)
     * to offset BEGINNING ...: Broker: Offset out of range"); a group's first start, with no
     * committed offset, is no loss and is not logged as a warning. */
    const char *text = buf; /* "[thrd:main]: <topic> [<partition>]: ..." */
    if (strncmp(buf, "[thrd:", 6) == 0 && strstr(buf, "]: ") != NULL)
        text = strstr(buf, "]: ") + 3;
    if (level <= 4 && strcmp(fac, "OFFSET") == 0 && strstr(text, "offset reset") != NULL &&
        strcasestr(text, "out of range") != NULL) {
        note_lost(text);
        /* Every one is counted; the lines are limited, as a reader far behind meets one a
         * partition every fetch. */
        sl_log_every(
            SL_LOG_REPEAT_MS, SL_LOG_ERROR,
            "kafka: input lost on the broker: %s. The messages between that offset and the "
            "oldest the broker still holds were deleted before this process read them "
            "(the topic's retention is too short for the lag, or the topic was recreated); "
            "they are gone, and so are the jobs or events they carried",
            text);
        return;
    }
    sl_log(level <= 3   ? SL_LOG_ERROR
           : level <= 4 ? SL_LOG_WARN
                        : SL_LOG_DEBUG,
           "kafka %s: %s", fac, buf);
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk;
    (void)opaque;
    /* Transient broker errors are retried by librdkafka; they are logged, not fatal. */
    sl_warn("kafka error %s: %s", rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

static sl_err_t set(rd_kafka_conf_t *conf, const char *name, const char *value, char *err,
                    size_t errlen)
{
    if (rd_kafka_conf_set(conf, name, value, err, errlen) != RD_KAFKA_CONF_OK)
        return SL_ECONFIG;
    return SL_OK;
}

/* Applies the config's kafka.properties; called last, so an operator's setting wins. */
static sl_err_t apply_config_props(const sl_config_t *cfg, rd_kafka_conf_t *conf, char *err,
                                   size_t errlen)
{
    sl_err_t rc = SL_OK;
    for (int i = 0; rc == SL_OK && i < cfg->kafka.nprops; i++)
        rc = set(conf, cfg->kafka.prop_names[i], cfg->kafka.prop_values[i], err, errlen);
    return rc;
}

/* Whether the bootstrap comes from sluice-devkafka's file (the librdkafka mock cluster). */
static int uses_dev_broker(const sl_config_t *cfg)
{
    const char *env = getenv("SLUICE_KAFKA_BOOTSTRAP");
    return (env == NULL || *env == '\0') && cfg->kafka.bootstrap_servers[0] == '\0';
}

int sl_kafka_dev_broker(const sl_config_t *cfg)
{
    return uses_dev_broker(cfg);
}

int sl_kafka_consume_fatal(const rd_kafka_message_t *m)
{
    if (m->err == RD_KAFKA_RESP_ERR_INVALID_SESSION_TIMEOUT) {
        sl_error("kafka: the broker refuses this consumer group's session timeout (%s): set "
                 "kafka.properties session.timeout.ms within the brokers' "
                 "group.min.session.timeout.ms and group.max.session.timeout.ms (6000 and "
                 "1800000 by default), or widen those; stopping",
                 rd_kafka_message_errstr(m));
        return 1;
    }
    if (m->err == RD_KAFKA_RESP_ERR__FATAL) {
        sl_error("kafka: fatal consumer error: %s (is another process running with this "
                 "kafka.instance?); stopping",
                 rd_kafka_message_errstr(m));
        return 1;
    }
    return 0;
}

sl_err_t sl_kafka_topic_config(rd_kafka_t *rk, const char *topic, const char *const *names, int n,
                               char (*values)[SL_KAFKA_CONFIG_VALUE_MAX], int timeout_ms, char *err,
                               size_t errlen)
{
    for (int i = 0; i < n; i++)
        values[i][0] = '\0';
    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opt = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    char why[256] = "";
    sl_err_t rc = SL_EKAFKA;
    if (res == NULL || q == NULL || opt == NULL) {
        snprintf(err, errlen, "out of memory");
        rc = SL_ENOMEM;
        goto done;
    }
    rd_kafka_AdminOptions_set_request_timeout(opt, timeout_ms, why, sizeof why);
    rd_kafka_DescribeConfigs(rk, &res, 1, opt, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
    if (ev == NULL) {
        snprintf(err, errlen, "no answer from the broker in %d ms", timeout_ms);
        goto done;
    }
    const rd_kafka_DescribeConfigs_result_t *r = rd_kafka_event_DescribeConfigs_result(ev);
    size_t nres = 0;
    const rd_kafka_ConfigResource_t **rs =
        r != NULL ? rd_kafka_DescribeConfigs_result_resources(r, &nres) : NULL;
    if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR || nres != 1 ||
        rd_kafka_ConfigResource_error(rs[0]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char *e = rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR
                            ? rd_kafka_event_error_string(ev)
                        : nres == 1 ? rd_kafka_ConfigResource_error_string(rs[0])
                                    : "no such topic in the answer";
        snprintf(err, errlen, "%s", e != NULL ? e : "refused");
        rd_kafka_event_destroy(ev);
        goto done;
    }
    size_t nent = 0;
    const rd_kafka_ConfigEntry_t **ents = rd_kafka_ConfigResource_configs(rs[0], &nent);
    for (size_t e = 0; e < nent; e++) {
        const char *name = rd_kafka_ConfigEntry_name(ents[e]);
        const char *value = rd_kafka_ConfigEntry_value(ents[e]);
        for (int i = 0; name != NULL && value != NULL && i < n; i++)
            if (strcmp(name, names[i]) == 0)
                snprintf(values[i], SL_KAFKA_CONFIG_VALUE_MAX, "%s", value);
    }
    rd_kafka_event_destroy(ev);
    rc = SL_OK;
done:
    if (opt != NULL)
        rd_kafka_AdminOptions_destroy(opt);
    if (res != NULL)
        rd_kafka_ConfigResource_destroy(res);
    if (q != NULL)
        rd_kafka_queue_destroy(q);
    return rc;
}

int sl_kafka_static_membership(const sl_config_t *cfg)
{
    const char *m = cfg->kafka.membership != NULL ? cfg->kafka.membership : "auto";
    if (strcmp(m, "static") == 0)
        return 1;
    if (strcmp(m, "group") == 0)
        return 0;
    return uses_dev_broker(cfg);
}

const char *sl_kafka_instance_name(const sl_config_t *cfg)
{
    static char host[256];
    if (cfg->kafka.instance != NULL && cfg->kafka.instance[0] != '\0')
        return cfg->kafka.instance;
    if (host[0] == '\0' && gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "sluice");
    return host;
}

/* Static membership has one reader per role: a second one would read every partition again
 * (a dispatcher would repeat every call). An abstract Unix socket named after the role and
 * the broker is the lock: the kernel drops it when the process dies, even by SIGKILL. It
 * stays bound for the life of the process. It covers one host, which is where the dev broker
 * runs; on a cluster, static membership is the operator's promise of one process per role. */
static sl_err_t hold_role_lock(const sl_config_t *cfg, const char *group, char *err, size_t errlen)
{
    char bootstrap[1024];
    if (sl_kafka_bootstrap(cfg, 0, bootstrap, sizeof bootstrap) != SL_OK)
        bootstrap[0] = '\0';
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    /* sun_path[0] = 0: the abstract namespace (no file). */
    int n = snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "sluice/%s/%s", group, bootstrap);
    if (n < 0 || (size_t)n >= sizeof addr.sun_path - 1)
        n = (int)sizeof addr.sun_path - 2;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket for the static membership lock: %s", strerror(errno));
        return SL_EIO;
    }
    if (bind(fd, (struct sockaddr *)&addr,
             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)) != 0) {
        int e = errno;
        close(fd);
        if (e == EADDRINUSE) {
            snprintf(err, errlen,
                     "another %s already reads this broker's topics with static membership "
                     "(kafka.membership); it runs one process per role: stop the other one, or "
                     "set kafka.membership to \"group\" to run several",
                     group);
            return SL_ECONFIG;
        }
        snprintf(err, errlen, "static membership lock: %s", strerror(e));
        return SL_EIO;
    }
    return SL_OK; /* fd stays open until the process exits */
}

int sl_kafka_key_partition(const char *key, int nparts)
{
    if (key == NULL || key[0] == '\0' || nparts <= 0)
        return 0;
    /* With a key it only hashes: the topic handle is not read. */
    return rd_kafka_msg_partitioner_consistent_random(NULL, key, strlen(key), nparts, NULL, NULL);
}

int sl_kafka_partition_count(rd_kafka_t *rk, const char *topic, int wait_ms)
{
    int count = 0;
    for (double until = sl_mono_ms() + wait_ms; count == 0;) {
        rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
        const struct rd_kafka_metadata *md = NULL;
        if (t != NULL && rd_kafka_metadata(rk, 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
            if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR)
                count = md->topics[0].partition_cnt;
            rd_kafka_metadata_destroy(md);
        }
        if (t != NULL)
            rd_kafka_topic_destroy(t);
        if (count > 0 || sl_mono_ms() >= until || sl_stop_requested())
            break;
        usleep(200 * 1000);
    }
    return count;
}

/* Static membership: every partition of the topics, read from the group's committed offsets
 * (librdkafka fetches them for partitions assigned without an offset), with no group to join.
 * The partition lists come from the broker's metadata, waiting up to 30 s for topics that do
 * not exist yet. The rebalance callback, when given, sees the assignment as a group member
 * would. */
static sl_err_t assign_every_partition(rd_kafka_t *rk, const char *const *topics, int ntopics,
                                       sl_kafka_rebalance_fn rebalance, void *opaque, char *err,
                                       size_t errlen)
{
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(ntopics * 16);
    for (int i = 0; i < ntopics; i++) {
        int count = sl_kafka_partition_count(rk, topics[i], 30000);
        if (count == 0) {
            snprintf(err, errlen, "topic %s has no partitions on the broker (does it exist?)",
                     topics[i]);
            rd_kafka_topic_partition_list_destroy(parts);
            return SL_EKAFKA;
        }
        for (int p = 0; p < count; p++)
            rd_kafka_topic_partition_list_add(parts, topics[i], p);
    }
    sl_err_t rc = SL_OK;
    if (rebalance != NULL) {
        rebalance(rk, RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS, parts, opaque);
    } else if (rd_kafka_assign(rk, parts) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "cannot assign the partitions of %s", topics[0]);
        rc = SL_EKAFKA;
    }
    rd_kafka_topic_partition_list_destroy(parts);
    return rc;
}

/* Builds a conf with bootstrap, client id and logging. */
static sl_err_t base_conf(const sl_config_t *cfg, const char *client_id, rd_kafka_conf_t **out,
                          char *err, size_t errlen)
{
    char bootstrap[1024];
    *out = NULL;
    if (sl_kafka_bootstrap(cfg, 30000, bootstrap, sizeof bootstrap) != SL_OK) {
        snprintf(err, errlen,
                 "no Kafka bootstrap servers: set kafka.bootstrap_servers, "
                 "$SLUICE_KAFKA_BOOTSTRAP, or start sluice-devkafka (it writes %s)",
                 cfg->kafka.bootstrap_file);
        return SL_EKAFKA;
    }
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    sl_err_t rc = set(conf, "bootstrap.servers", bootstrap, err, errlen);
    if (rc == SL_OK)
        rc = set(conf, "client.id", client_id, err, errlen);
    if (rc != SL_OK) {
        rd_kafka_conf_destroy(conf);
        return rc;
    }
    rd_kafka_conf_set_log_cb(conf, log_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    *out = conf;
    return SL_OK;
}

sl_err_t sl_kafka_producer_new(const sl_config_t *cfg, const char *client_id,
                               void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                               void *opaque, rd_kafka_t **out, char *err, size_t errlen)
{
    return sl_kafka_producer_new_props(cfg, client_id, dr_cb, opaque, NULL, out, err, errlen);
}

sl_err_t sl_kafka_producer_new_props(const sl_config_t *cfg, const char *client_id,
                                     void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *,
                                                   void *),
                                     void *opaque, const char *const *extra_props, rd_kafka_t **out,
                                     char *err, size_t errlen)
{
    *out = NULL;
    rd_kafka_conf_t *conf = NULL;
    sl_err_t rc = base_conf(cfg, client_id, &conf, err, errlen);
    if (rc != SL_OK)
        return rc;
    /* linger.ms 0: each hop sends at once (messages that queue up while a request is in
     * flight still travel together). Against 1 ms it cut the added p50 from 17 to 13 ms for
     * 6 % less peak throughput, which is far above what provider limits let through. */
    static const char *const defaults[] = {"enable.idempotence",
                                           "true",
                                           "acks",
                                           "all",
                                           "linger.ms",
                                           "0",
                                           "compression.type",
                                           "lz4",
                                           "message.max.bytes",
                                           "16777216",
                                           NULL};
    for (int i = 0; rc == SL_OK && defaults[i] != NULL; i += 2)
        rc = set(conf, defaults[i], defaults[i + 1], err, errlen);
    for (int i = 0; rc == SL_OK && extra_props != NULL && extra_props[i] != NULL; i += 2)
        rc = set(conf, extra_props[i], extra_props[i + 1], err, errlen);
    if (rc == SL_OK)
        rc = apply_config_props(cfg, conf, err, errlen);
    if (rc != SL_OK) {
        rd_kafka_conf_destroy(conf);
        return rc;
    }
    if (dr_cb != NULL)
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_opaque(conf, opaque);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, errlen);
    if (rk == NULL) {
        rd_kafka_conf_destroy(conf);
        return SL_EKAFKA;
    }
    *out = rk;
    return SL_OK;
}

sl_err_t sl_kafka_consumer_new(const sl_config_t *cfg, const char *group, const char *client_id,
                               const char *const *topics, int ntopics,
                               const char *const *extra_props, rd_kafka_t **out, char *err,
                               size_t errlen)
{
    return sl_kafka_consumer_new_rebalance(cfg, group, client_id, topics, ntopics, extra_props,
                                           NULL, NULL, out, err, errlen);
}

sl_err_t sl_kafka_consumer_new_rebalance(const sl_config_t *cfg, const char *group,
                                         const char *client_id, const char *const *topics,
                                         int ntopics, const char *const *extra_props,
                                         sl_kafka_rebalance_fn rebalance, void *opaque,
                                         rd_kafka_t **out, char *err, size_t errlen)
{
    *out = NULL;
    rd_kafka_conf_t *conf = NULL;
    sl_err_t rc = base_conf(cfg, client_id, &conf, err, errlen);
    if (rc != SL_OK)
        return rc;
    static const char *const defaults[] = {"enable.auto.commit", "false", "auto.offset.reset",
                                           "earliest", "enable.partition.eof", "false",
                                           /* A crashed member's partitions move on within
                                            * seconds, not the 45 s default. */
                                           "session.timeout.ms", "6000", "heartbeat.interval.ms",
                                           "1000", NULL};
    rc = set(conf, "group.id", group, err, errlen);
    for (int i = 0; rc == SL_OK && defaults[i] != NULL; i += 2)
        rc = set(conf, defaults[i], defaults[i + 1], err, errlen);
    /* librdkafka's mock cluster answers a fetch only when fetch.wait.max.ms has run out, even
     * when data is waiting; a real broker answers at once. So the dev broker gets 1 ms (it
     * cut the added latency from 29 to 12 ms), a real cluster keeps librdkafka's default. */
    if (rc == SL_OK && uses_dev_broker(cfg))
        rc = set(conf, "fetch.wait.max.ms", "1", err, errlen);
    int fixed = sl_kafka_static_membership(cfg);
    char instance_id[512];
    if (rc == SL_OK && !fixed && !uses_dev_broker(cfg)) {
        /* Static membership (KIP-345): a member that comes back under its instance id within
         * the session timeout gets its partitions again without a rebalance. The dev broker
         * does not implement it (and would then wait a session timeout for every close). */
        snprintf(instance_id, sizeof instance_id, "%s.%s", group, sl_kafka_instance_name(cfg));
        rc = set(conf, "group.instance.id", instance_id, err, errlen);
        /* Cooperative: a rebalance moves only the partitions that change owner; the others
         * are read on meanwhile. */
        if (rc == SL_OK)
            rc = set(conf, "partition.assignment.strategy", "cooperative-sticky", err, errlen);
    }
    for (int i = 0; rc == SL_OK && extra_props != NULL && extra_props[i] != NULL; i += 2)
        rc = set(conf, extra_props[i], extra_props[i + 1], err, errlen);
    if (rc == SL_OK)
        rc = apply_config_props(cfg, conf, err, errlen);
    if (rc != SL_OK) {
        rd_kafka_conf_destroy(conf);
        return rc;
    }
    if (rebalance != NULL) {
        rd_kafka_conf_set_rebalance_cb(conf, rebalance);
        rd_kafka_conf_set_opaque(conf, opaque);
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, errlen);
    if (rk == NULL) {
        rd_kafka_conf_destroy(conf);
        return SL_EKAFKA;
    }
    rd_kafka_poll_set_consumer(rk);
    if (ntopics == 0) {
        *out = rk; /* the caller assigns partitions itself */
        return SL_OK;
    }
    if (fixed) {
        rc = hold_role_lock(cfg, group, err, errlen);
        if (rc == SL_OK)
            rc = assign_every_partition(rk, topics, ntopics, rebalance, opaque, err, errlen);
        if (rc != SL_OK) {
            rd_kafka_destroy(rk);
            return rc;
        }
        *out = rk;
        return SL_OK;
    }
    rd_kafka_topic_partition_list_t *subs = rd_kafka_topic_partition_list_new(ntopics);
    for (int i = 0; i < ntopics; i++)
        rd_kafka_topic_partition_list_add(subs, topics[i], RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t kerr = rd_kafka_subscribe(rk, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    if (kerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "subscribe: %s", rd_kafka_err2str(kerr));
        rd_kafka_destroy(rk);
        return SL_EKAFKA;
    }
    *out = rk;
    return SL_OK;
}

sl_err_t sl_kafka_rebalance_apply(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                  rd_kafka_topic_partition_list_t *parts)
{
    const char *proto = rd_kafka_rebalance_protocol(rk);
    int assign = err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
    if (proto != NULL && strcmp(proto, "COOPERATIVE") == 0) {
        rd_kafka_error_t *e = assign ? rd_kafka_incremental_assign(rk, parts)
                                     : rd_kafka_incremental_unassign(rk, parts);
        if (e == NULL)
            return SL_OK;
        sl_warn("kafka %s: %s", assign ? "assign" : "unassign", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        return SL_EKAFKA;
    }
    rd_kafka_resp_err_t kerr = rd_kafka_assign(rk, assign ? parts : NULL);
    if (kerr == RD_KAFKA_RESP_ERR_NO_ERROR)
        return SL_OK;
    sl_warn("kafka %s: %s", assign ? "assign" : "unassign", rd_kafka_err2str(kerr));
    return SL_EKAFKA;
}

rd_kafka_queue_t *sl_kafka_partition_queue(rd_kafka_t *rk, const char *topic, int32_t partition,
                                           int wake_fd)
{
    rd_kafka_queue_t *q = rd_kafka_queue_get_partition(rk, topic, partition);
    if (q == NULL)
        return NULL;
    /* Forwarding removed: librdkafka keeps it so across later fetch starts of the partition. */
    rd_kafka_queue_forward(q, NULL);
    if (wake_fd >= 0)
        rd_kafka_queue_io_event_enable(q, wake_fd, "1", 1);
    return q;
}

/* The one place a daemon's messages are signed: every message it produces goes through
 * sl_kafka_produce, so a new kind of message on any topic is signed without more code. */
static const sl_signer_t *sign_signer;
static sl_role_t sign_role;

void sl_kafka_sign_as(const sl_signer_t *s, sl_role_t role)
{
    sign_signer = s;
    sign_role = role;
}

/* The topics (one role reads them all) this process writes with a pair MAC, and the keys of
 * that role. */
static char mac_topics[2][256];
static int nmac_topics;
static sl_keyring_t *mac_readers;
static sl_role_t mac_reader;

static int is_mac_topic(const char *topic)
{
    for (int i = 0; mac_readers != NULL && i < nmac_topics; i++) {
        if (strcmp(topic, mac_topics[i]) == 0)
            return 1;
    }
    return 0;
}

void sl_kafka_mac_topics(const char *topic, const char *also, sl_keyring_t *readers,
                         sl_role_t reader)
{
    nmac_topics = 0;
    const char *const given[2] = {topic, also};
    for (int i = 0; topic != NULL && i < 2; i++) {
        if (given[i] != NULL)
            snprintf(mac_topics[nmac_topics++], sizeof mac_topics[0], "%s", given[i]);
    }
    mac_readers = topic != NULL ? readers : NULL;
    mac_reader = reader;
}

/* Replaces the authentication headers of hdrs by this process's for (topic, key, value): a
 * pair MAC on the MAC topic while its reader's key is there, a signature otherwise. */
static void auth_headers(rd_kafka_headers_t *hdrs, const char *topic, const void *key,
                         size_t key_len, const void *value, size_t len)
{
    uint8_t pair[SL_MAC_KEY_BYTES];
    if (is_mac_topic(topic) &&
        sl_keyring_writer_key(mac_readers, sign_signer, mac_reader, pair) == SL_OK) {
        uint8_t mac[SL_MAC_BYTES];
        sl_mac(pair, topic, key, key_len, value, len, mac);
        rd_kafka_header_remove(hdrs, SL_SIG_HEADER);
        rd_kafka_header_remove(hdrs, SL_MAC_HEADER);
        rd_kafka_header_remove(hdrs, SL_SIGNER_HEADER);
        rd_kafka_header_add(hdrs, SL_MAC_HEADER, -1, mac, sizeof mac);
        rd_kafka_header_add(hdrs, SL_SIGNER_HEADER, -1, sl_role_name(sign_role), -1);
        return;
    }
    rd_kafka_header_remove(hdrs, SL_MAC_HEADER);
    sl_kafka_sign_headers(hdrs, sign_signer, sign_role, topic, key, key_len, value, len);
}

void sl_kafka_sign_headers(rd_kafka_headers_t *hdrs, const sl_signer_t *s, sl_role_t role,
                           const char *topic, const void *key, size_t key_len, const void *value,
                           size_t len)
{
    char sig[SL_SIG_B64_LEN];
    sl_msg_sign(s, role, topic, key, key_len, value, len, sig);
    rd_kafka_header_remove(hdrs, SL_SIG_HEADER);
    rd_kafka_header_remove(hdrs, SL_SIGNER_HEADER);
    rd_kafka_header_add(hdrs, SL_SIG_HEADER, -1, sig, (ssize_t)strlen(sig));
    rd_kafka_header_add(hdrs, SL_SIGNER_HEADER, -1, sl_role_name(role), -1);
}

sl_auth_t sl_kafka_verify(sl_keyring_t *kr, unsigned roles, const rd_kafka_message_t *msg)
{
    const char *sig = NULL, *signer = NULL, *mac = NULL;
    size_t sig_len = 0, signer_len = 0, mac_len = 0;
    sl_kafka_header(msg, SL_SIG_HEADER, &sig, &sig_len);
    sl_kafka_header(msg, SL_SIGNER_HEADER, &signer, &signer_len);
    if (sig == NULL && sl_kafka_header(msg, SL_MAC_HEADER, &mac, &mac_len) == SL_OK)
        return sl_keyring_check_mac(kr, roles, rd_kafka_topic_name(msg->rkt), msg->key,
                                    msg->key_len, msg->payload, msg->len, signer, signer_len, mac,
                                    mac_len);
    const char *proof = NULL;
    size_t proof_len = 0;
    if (sig != NULL && sl_kafka_header(msg, SL_BATCH_HEADER, &proof, &proof_len) == SL_OK)
        return sl_keyring_check_batch(kr, roles, rd_kafka_topic_name(msg->rkt), msg->key,
                                      msg->key_len, msg->payload, msg->len, signer, signer_len, sig,
                                      sig_len, proof, proof_len);
    return sl_keyring_check(kr, roles, rd_kafka_topic_name(msg->rkt), msg->key, msg->key_len,
                            msg->payload, msg->len, signer, signer_len, sig, sig_len);
}

sl_err_t sl_kafka_produce(rd_kafka_t *rk, const char *topic, const char *key, const void *value,
                          size_t len, rd_kafka_headers_t *hdrs, void *opaque)
{
    return sl_kafka_produce_to(rk, topic, RD_KAFKA_PARTITION_UA, key, value, len, hdrs, opaque);
}

static sl_err_t produce_raw(rd_kafka_t *rk, const char *topic, int32_t partition, const char *key,
                            size_t key_len, const void *value, size_t len, rd_kafka_headers_t *hdrs,
                            void *opaque);

sl_err_t sl_kafka_produce_to(rd_kafka_t *rk, const char *topic, int32_t partition, const char *key,
                             const void *value, size_t len, rd_kafka_headers_t *hdrs, void *opaque)
{
    size_t key_len = key != NULL ? strlen(key) : 0;
    if (sign_signer != NULL) {
        if (hdrs == NULL)
            hdrs = rd_kafka_headers_new(2);
        auth_headers(hdrs, topic, key, key_len, value, len);
    }
    return produce_raw(rk, topic, partition, key, key_len, value, len, hdrs, opaque);
}

sl_err_t sl_kafka_produce_every(rd_kafka_t *rk, const char *topic, int nparts, const char *key,
                                const void *value, size_t len)
{
    if (nparts <= 0)
        return sl_kafka_produce(rk, topic, key, value, len, NULL, NULL);
    size_t key_len = key != NULL ? strlen(key) : 0;
    rd_kafka_headers_t *signed_hdrs = rd_kafka_headers_new(2);
    if (sign_signer != NULL)
        auth_headers(signed_hdrs, topic, key, key_len, value, len);
    sl_err_t rc = SL_OK;
    for (int p = 0; p < nparts; p++) {
        sl_err_t one = produce_raw(rk, topic, p, key, key_len, value, len,
                                   rd_kafka_headers_copy(signed_hdrs), NULL);
        if (one != SL_OK)
            rc = one;
    }
    rd_kafka_headers_destroy(signed_hdrs);
    return rc;
}

int sl_kafka_produce_batch(rd_kafka_t *rk, const char *topic, const sl_kafka_msg_t *msgs, int n,
                           int *signatures)
{
    int refused = 0, signed_ = 0;
    /* A MAC is cheaper than a share of a signature; without a signer there is nothing to share. */
    int batch = sign_signer != NULL && !is_mac_topic(topic);
    for (int done = 0; done < n;) {
        int m = n - done < SL_BATCH_MAX ? n - done : SL_BATCH_MAX;
        const sl_kafka_msg_t *part = msgs + done;
        sl_batch_t *b = batch && m >= 2 ? sl_batch_new(m) : NULL;
        if (b == NULL) {
            for (int i = done; i < n; i++)
                refused += sl_kafka_produce(rk, topic, msgs[i].key, msgs[i].value, msgs[i].len,
                                            NULL, NULL) != SL_OK;
            signed_ += batch ? n - done : 0; /* each signed alone (none: no signer, or MACs) */
            break;
        }
        for (int i = 0; i < m; i++)
            sl_batch_add(b, sign_role, topic, part[i].key,
                         part[i].key != NULL ? strlen(part[i].key) : 0, part[i].value, part[i].len);
        char sig[SL_SIG_B64_LEN];
        sl_batch_sign(b, sign_signer, sign_role, sig);
        signed_++;
        for (int i = 0; i < m; i++) {
            uint8_t proof[SL_BATCH_PROOF_MAX];
            size_t proof_len = sl_batch_proof(b, i, proof);
            rd_kafka_headers_t *hdrs = rd_kafka_headers_new(3);
            rd_kafka_header_add(hdrs, SL_SIG_HEADER, -1, sig, (ssize_t)strlen(sig));
            rd_kafka_header_add(hdrs, SL_SIGNER_HEADER, -1, sl_role_name(sign_role), -1);
            rd_kafka_header_add(hdrs, SL_BATCH_HEADER, -1, proof, (ssize_t)proof_len);
            refused += produce_raw(rk, topic, RD_KAFKA_PARTITION_UA, part[i].key,
                                   part[i].key != NULL ? strlen(part[i].key) : 0, part[i].value,
                                   part[i].len, hdrs, NULL) != SL_OK;
        }
        sl_batch_free(b);
        done += m;
    }
    if (signatures != NULL)
        *signatures = signed_;
    return refused;
}

sl_err_t sl_kafka_produce_mac(rd_kafka_t *rk, const char *topic, int32_t partition, const char *key,
                              const void *value, size_t len,
                              const uint8_t mac_key[SL_MAC_KEY_BYTES], void *opaque)
{
    size_t key_len = key != NULL ? strlen(key) : 0;
    uint8_t mac[SL_MAC_BYTES];
    sl_mac(mac_key, topic, key, key_len, value, len, mac);
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(1);
    rd_kafka_header_add(hdrs, SL_MAC_HEADER, -1, mac, sizeof mac);
    return produce_raw(rk, topic, partition, key, key_len, value, len, hdrs, opaque);
}

sl_auth_t sl_kafka_verify_mac(const uint8_t mac_key[SL_MAC_KEY_BYTES],
                              const rd_kafka_message_t *msg)
{
    const char *mac = NULL;
    size_t mac_len = 0;
    if (sl_kafka_header(msg, SL_MAC_HEADER, &mac, &mac_len) != SL_OK || mac == NULL)
        return SL_AUTH_UNSIGNED;
    if (mac_len != SL_MAC_BYTES ||
        !sl_mac_check(mac_key, rd_kafka_topic_name(msg->rkt), msg->key, msg->key_len, msg->payload,
                      msg->len, (const uint8_t *)mac))
        return SL_AUTH_BAD_SIGNATURE;
    return SL_AUTH_OK;
}

static sl_err_t produce_raw(rd_kafka_t *rk, const char *topic, int32_t partition, const char *key,
                            size_t key_len, const void *value, size_t len, rd_kafka_headers_t *hdrs,
                            void *opaque)
{
    for (;;) {
        rd_kafka_resp_err_t err =
            rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                              RD_KAFKA_V_KEY(key, key_len), RD_KAFKA_V_VALUE((void *)value, len),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(opaque),
                              RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
            return SL_OK;
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            /* Refused locally (too large, unknown topic, a fatal producer error), which can
             * be every message from now on: rate limited. */
            sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_ERROR, "produce to %s: %s", topic,
                         rd_kafka_err2str(err));
            if (hdrs != NULL)
                rd_kafka_headers_destroy(hdrs);
            return SL_EKAFKA;
        }
        rd_kafka_poll(rk, 10);
    }
}

sl_err_t sl_kafka_header(const rd_kafka_message_t *msg, const char *name, const char **val,
                         size_t *len)
{
    rd_kafka_headers_t *hdrs = NULL;
    *val = NULL;
    *len = 0;
    if (rd_kafka_message_headers(msg, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return SL_ENOTFOUND;
    const void *v = NULL;
    size_t n = 0;
    if (rd_kafka_header_get_last(hdrs, name, &v, &n) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return SL_ENOTFOUND;
    *val = v;
    *len = n;
    return SL_OK;
}

void sl_kafka_consumer_close(rd_kafka_t *rk)
{
    if (rk == NULL)
        return;
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

enum { LAG_EXPORT_MAX_TOPICS = 32 };

/* The entry of topic in out[0..*n), appended when there is room; NULL when there is none. */
static sl_kafka_lag_t *lag_entry(sl_kafka_lag_t *out, int *n, int max, const char *topic)
{
    for (int i = 0; i < *n; i++) {
        if (strcmp(out[i].topic, topic) == 0)
            return &out[i];
    }
    if (*n >= max)
        return NULL;
    sl_kafka_lag_t *t = &out[(*n)++];
    memset(t, 0, sizeof *t);
    snprintf(t->topic, sizeof t->topic, "%s", topic);
    return t;
}

int sl_kafka_lag(rd_kafka_t *cons, sl_kafka_lag_t *out, int max)
{
    int n = 0;
    rd_kafka_topic_partition_list_t *subs = NULL;
    /* Subscribed topics first, so a topic whose partitions all went to other group members
     * still shows (with lag 0) rather than keeping its last value. */
    if (rd_kafka_subscription(cons, &subs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (int i = 0; i < subs->cnt; i++) {
            if (subs->elems[i].topic[0] != '^')
                lag_entry(out, &n, max, subs->elems[i].topic);
        }
        rd_kafka_topic_partition_list_destroy(subs);
    }
    rd_kafka_topic_partition_list_t *parts = NULL;
    if (rd_kafka_assignment(cons, &parts) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return -1;
    /* Fills each element's offset (or err) from librdkafka's cache: the application's
     * position, RD_KAFKA_OFFSET_INVALID before its first message. */
    rd_kafka_resp_err_t kerr = rd_kafka_position(cons, parts);
    for (int i = 0; i < parts->cnt; i++) {
        const rd_kafka_topic_partition_t *p = &parts->elems[i];
        sl_kafka_lag_t *t = lag_entry(out, &n, max, p->topic);
        if (t == NULL)
            continue;
        t->partitions++;
        if (kerr != RD_KAFKA_RESP_ERR_NO_ERROR || p->err != RD_KAFKA_RESP_ERR_NO_ERROR ||
            p->offset < 0)
            continue;
        int64_t low = 0, high = 0;
        /* The cached watermarks, not rd_kafka_query_watermark_offsets: that one asks the
         * broker and blocks. high is RD_KAFKA_OFFSET_INVALID until the first fetch answer. */
        if (rd_kafka_get_watermark_offsets(cons, p->topic, p->partition, &low, &high) !=
                RD_KAFKA_RESP_ERR_NO_ERROR ||
            high < 0)
            continue;
        t->partitions_known++;
        /* A message is taken only after the fetch answer that brought it (and its watermark)
         * arrived, so the position does not pass the cached watermark; the test is a guard
         * against a broker answering with an older watermark after a leader change. */
        if (high > p->offset)
            t->lag += high - p->offset;
    }
    rd_kafka_topic_partition_list_destroy(parts);
    return n;
}

int sl_kafka_lag_family(sl_metrics_t *m)
{
    static const char *const labels[] = {"topic", NULL};
    return sl_metrics_family(m, SL_METRIC_GAUGE, SL_KAFKA_LAG_METRIC,
                             "Messages in the topic not yet consumed by this daemon's group "
                             "member, summed over its assigned partitions.",
                             labels, NULL, 0);
}

void sl_kafka_export_lag(rd_kafka_t *cons, sl_metrics_t *m, int family)
{
    sl_kafka_lag_t lag[LAG_EXPORT_MAX_TOPICS];
    int n = sl_kafka_lag(cons, lag, LAG_EXPORT_MAX_TOPICS);
    for (int i = 0; i < n; i++) {
        const char *v[] = {lag[i].topic};
        sl_metrics_set(m, family, v, (double)lag[i].lag);
    }
}

int sl_kafka_lost_family(sl_metrics_t *m)
{
    static const char *const labels[] = {"topic", NULL};
    return sl_metrics_family(m, SL_METRIC_COUNTER, SL_KAFKA_LOST_METRIC,
                             "Times this process found the offset it was to read next already "
                             "deleted by the broker (retention) and went on from the oldest "
                             "message left: the messages between were lost unread.",
                             labels, NULL, 0);
}

void sl_kafka_export_lost(sl_metrics_t *m, int family)
{
    pthread_mutex_lock(&lost_lock);
    for (int i = 0; i < nlost; i++) {
        const char *v[] = {lost[i].topic};
        sl_metrics_add(m, family, v, (double)(lost[i].resets - lost[i].exported));
        lost[i].exported = lost[i].resets;
    }
    pthread_mutex_unlock(&lost_lock);
}
