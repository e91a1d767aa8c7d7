/* kafka.h - librdkafka clients configured the sluice way.
 *
 * Producers are idempotent with acks=all, so "acknowledged" means durable on the broker;
 * consumers never auto-commit: each process commits its input offsets only after the work the
 * input caused is durable (produced and acknowledged, or stored in SQLite).
 */
#ifndef SL_KAFKA_H
#define SL_KAFKA_H

#include <librdkafka/rdkafka.h>
#include <stdint.h>

#include "config.h"
#include "err.h"
#include "metrics.h"
#include "sign.h"

/* Finds the bootstrap servers: $SLUICE_KAFKA_BOOTSTRAP, else kafka.bootstrap_servers, else the
 * contents of kafka.bootstrap_file (written by sluice-devkafka), waiting up to wait_ms for that
 * file to appear. */
sl_err_t sl_kafka_bootstrap(const sl_config_t *cfg, int wait_ms, char *out, size_t cap);

/* Creates a producer. dr_cb (may be NULL) receives each delivery report; opaque is passed to it
 * as rd_kafka_opaque. *out set only on success; destroy with rd_kafka_destroy after flushing. */
sl_err_t sl_kafka_producer_new(const sl_config_t *cfg, const char *client_id,
                               void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                               void *opaque, rd_kafka_t **out, char *err, size_t errlen);

/* The same with extra_props (name, value pairs, NULL-terminated, may be NULL) over the defaults
 * (the config's kafka.properties still come last). */
sl_err_t sl_kafka_producer_new_props(const sl_config_t *cfg, const char *client_id,
                                     void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *,
                                                   void *),
                                     void *opaque, const char *const *extra_props, rd_kafka_t **out,
                                     char *err, size_t errlen);

/* Creates a consumer in group, subscribed to the ntopics topics (none: the caller assigns), with
 * auto-commit off and reading from the earliest offset when the group has none. Under static
 * membership (sl_kafka_static_membership) it is assigned every partition of the topics at once
 * instead, and a second process of the same group on this host is refused (SL_ECONFIG). extra_props
 * (name, value pairs, NULL-terminated, may be NULL) override defaults. */
sl_err_t sl_kafka_consumer_new(const sl_config_t *cfg, const char *group, const char *client_id,
                               const char *const *topics, int ntopics,
                               const char *const *extra_props, rd_kafka_t **out, char *err,
                               size_t errlen);

/* Whether consumers use static membership (kafka.membership; "auto": on the dev broker): each
 * role is one process that assigns itself every partition of its topics and resumes from its
 * group's committed offsets, with no group to join, so a restarted process reads on at once.
 * On the dev broker a restarted group member waits for the dead one's session to time out and
 * for a rebalance: 10 - 30 s. Otherwise consumers join a group with static membership
 * (group.instance.id = "<group>.<kafka.instance or host name>") and cooperative rebalancing. */
int sl_kafka_static_membership(const sl_config_t *cfg);

/* The number of partitions of topic in rk's metadata, waiting up to wait_ms for a topic that
 * does not exist yet; 0 when it has none. */
int sl_kafka_partition_count(rd_kafka_t *rk, const char *topic, int wait_ms);

/* The partition of nparts (> 0) that a message keyed by key (non-empty) goes to under
 * librdkafka's default partitioner (consistent_random: CRC32 of the key), the one every sluice
 * producer uses: where ingest puts a tenant's jobs, and a dispatcher its usage events. */
int sl_kafka_key_partition(const char *key, int nparts);

/* Whether the processes use the dev broker (no kafka.bootstrap_servers, no
 * $SLUICE_KAFKA_BOOTSTRAP). */
int sl_kafka_dev_broker(const sl_config_t *cfg);

/* Whether a consumer's error message is one no retry cures, so the daemon should stop (exit
 * status 2) rather than wait for partitions it will never get: the group coordinator refused
 * the member's session timeout (outside the broker's group.min/max.session.timeout.ms), or
 * librdkafka raised a fatal error (another live member holds this group.instance.id). Logs it
 * at error level with what to change. */
int sl_kafka_consume_fatal(const rd_kafka_message_t *m);

/* The broker's settings names[0..n) of topic (DescribeConfigs) into values ("" for one not in
 * the answer). SL_EKAFKA (err says) when the broker does not answer in time or refuses (no
 * DESCRIBE_CONFIGS right, an unknown topic, a broker without the API such as the dev broker). */
enum { SL_KAFKA_CONFIG_VALUE_MAX = 128 };
sl_err_t sl_kafka_topic_config(rd_kafka_t *rk, const char *topic, const char *const *names, int n,
                               char (*values)[SL_KAFKA_CONFIG_VALUE_MAX], int timeout_ms, char *err,
                               size_t errlen);

/* This process's stable name: kafka.instance, or the host name. */
const char *sl_kafka_instance_name(const sl_config_t *cfg);

/* Called from the consumer's poll when partitions are assigned (err
 * RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) or revoked/lost (any other err); it must apply the change
 * with sl_kafka_rebalance_apply. */
typedef void (*sl_kafka_rebalance_fn)(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                      rd_kafka_topic_partition_list_t *parts, void *opaque);

/* sl_kafka_consumer_new with a rebalance callback (opaque is passed to it), so the caller can
 * set up each assigned partition (e.g. its own queue) before librdkafka starts fetching it. */
sl_err_t sl_kafka_consumer_new_rebalance(const sl_config_t *cfg, const char *group,
                                         const char *client_id, const char *const *topics,
                                         int ntopics, const char *const *extra_props,
                                         sl_kafka_rebalance_fn rebalance, void *opaque,
                                         rd_kafka_t **out, char *err, size_t errlen);

/* Applies a rebalance event as librdkafka would without a callback: assigns parts, or drops
 * them (all of them under the eager protocol, only parts under the cooperative one). */
sl_err_t sl_kafka_rebalance_apply(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                  rd_kafka_topic_partition_list_t *parts);

/* The partition's own message queue, no longer forwarded to the consumer queue, so its
 * messages are taken with rd_kafka_consume_queue on it and not by rd_kafka_consumer_poll. When
 * wake_fd >= 0, librdkafka writes a byte to it whenever the queue turns non-empty. Taking a
 * message from it stores its offset like rd_kafka_consumer_poll does (enable.auto.offset.store),
 * so rd_kafka_commit(rk, NULL, ...) still commits up to the last message taken. The prefetch
 * limit queued.max.messages.kbytes then applies per partition. NULL when the partition is
 * unknown. Destroy with rd_kafka_queue_destroy before closing the consumer. */
rd_kafka_queue_t *sl_kafka_partition_queue(rd_kafka_t *rk, const char *topic, int32_t partition,
                                           int wake_fd);

/* Produces a copy of value to topic with an optional key, headers and delivery opaque; while
 * the local queue is full it serves delivery reports and tries again, so it never drops a
 * message for back-pressure. On success hdrs (may be NULL) belong to the message; on failure
 * they are destroyed and SL_EKAFKA is returned (logged). */
sl_err_t sl_kafka_produce(rd_kafka_t *rk, const char *topic, const char *key, const void *value,
                          size_t len, rd_kafka_headers_t *hdrs, void *opaque);

/* sl_kafka_produce to one partition (RD_KAFKA_PARTITION_UA: the partitioner's choice). */
sl_err_t sl_kafka_produce_to(rd_kafka_t *rk, const char *topic, int32_t partition, const char *key,
                             const void *value, size_t len, rd_kafka_headers_t *hdrs, void *opaque);

/* sl_kafka_produce of one message to each of the topic's nparts partitions (signed once: a
 * signature covers topic, key and value, not the partition), for what every reader of a
 * partitioned topic must hear (a dispatcher's heartbeats reach every scheduler shard).
 * nparts <= 0: one copy, where the partitioner puts it. */
sl_err_t sl_kafka_produce_every(rd_kafka_t *rk, const char *topic, int nparts, const char *key,
                                const void *value, size_t len);

/* One message of sl_kafka_produce_batch: key (NULL: none), and value of len bytes (copied). */
typedef struct {
    const char *key;
    const void *value;
    size_t len;
} sl_kafka_msg_t;

/* Produces the n msgs to topic under one batch signature of this process's role (sign.h:
 * sl_batch_*) per SL_BATCH_MAX of them, so a writer of many messages at once pays one Ed25519
 * signature and each reader about one check per batch. One message, no signer set, or the
 * pair-MAC topic: each as sl_kafka_produce would. Returns how many were refused (as
 * sl_kafka_produce refuses); *signatures (may be NULL) is set to the Ed25519 signatures made. */
int sl_kafka_produce_batch(rd_kafka_t *rk, const char *topic, const sl_kafka_msg_t *msgs, int n,
                           int *signatures);

/* Produces to topic (partition, or RD_KAFKA_PARTITION_UA) with a MAC header (sign.h: sl_mac)
 * under mac_key instead of this process's signature, for a topic its one writer role also reads
 * alone. As sl_kafka_produce otherwise. */
sl_err_t sl_kafka_produce_mac(rd_kafka_t *rk, const char *topic, int32_t partition, const char *key,
                              const void *value, size_t len,
                              const uint8_t mac_key[SL_MAC_KEY_BYTES], void *opaque);
/* SL_AUTH_OK when msg carries a MAC of its topic, key and value under mac_key; SL_AUTH_UNSIGNED
 * without one, SL_AUTH_BAD_SIGNATURE for a wrong one. */
sl_auth_t sl_kafka_verify_mac(const uint8_t mac_key[SL_MAC_KEY_BYTES],
                              const rd_kafka_message_t *msg);

/* Makes every later sl_kafka_produce of this process sign its message as role with s
 * (headers SL_SIG_HEADER and SL_SIGNER_HEADER, over role, topic, key and value: sign.h),
 * replacing such headers the caller gave. s is borrowed and must outlive the producing; NULL
 * stops signing. One role per process: call it once at start, before producing. */
void sl_kafka_sign_as(const sl_signer_t *s, sl_role_t role);

/* Makes every later sl_kafka_produce of this process to topic (and to also, when not NULL)
 * carry a pair MAC (sign.h: sl_pair_key) instead of a signature: for topics that reader's role
 * alone reads, whose public keys readers (borrowed) holds. While sl_keyring_writer_key has no
 * key (the reader's key file not there yet, or its rotation under way) the message is signed
 * as before. Call once at start, after sl_kafka_sign_as; one reader per process; topic NULL:
 * none. */
void sl_kafka_mac_topics(const char *topic, const char *also, sl_keyring_t *readers,
                         sl_role_t reader);

/* Checks msg's signature headers against kr: roles is the mask of the roles that may write its
 * topic (sign.h). A message with a MAC header and no signature is checked as a pair MAC
 * (sl_keyring_check_mac). SL_AUTH_OK when it may be acted on. */
sl_auth_t sl_kafka_verify(sl_keyring_t *kr, unsigned roles, const rd_kafka_message_t *msg);

/* Adds the signature headers of (topic, key, value) signed by s as role to hdrs. */
void sl_kafka_sign_headers(rd_kafka_headers_t *hdrs, const sl_signer_t *s, sl_role_t role,
                           const char *topic, const void *key, size_t key_len, const void *value,
                           size_t len);

/* Finds header name on msg; returns SL_ENOTFOUND when absent. The value is not NUL-terminated
 * and lives as long as msg. */
sl_err_t sl_kafka_header(const rd_kafka_message_t *msg, const char *name, const char **val,
                         size_t *len);

/* Closes and destroys a consumer (NULL is a no-op). */
void sl_kafka_consumer_close(rd_kafka_t *rk);

/* ---- Consumer lag ---------------------------------------------------------------------------
 *
 * A partition's lag is its high watermark minus this consumer's position (the offset after the
 * last message the application took from librdkafka), so messages librdkafka has prefetched
 * but the daemon has not taken yet count as lag. Both numbers are read from librdkafka's cache:
 * no call here waits for the network, so a daemon can ask from its main loop.
 *
 * Limits, all of them underestimates:
 * - librdkafka learns a partition's high watermark from each fetch response (empty ones too),
 *   so it is as fresh as the last fetch; while the local queue is full (queued.min.messages,
 *   queued.max.messages.kbytes) the partition is not fetched and the watermark lags behind.
 * - A partition's position is unknown until the application took its first message since the
 *   partition was assigned. The committed offset would do instead, but librdkafka only gives
 *   it by asking the group coordinator (rd_kafka_committed blocks), so such a partition is
 *   left out of the sum and counted in neither lag nor partitions_known.
 * - The watermark is the high watermark, not the last stable offset: with transactional
 *   producers an open transaction shows as lag. sluice's producers are not transactional.
 */

#define SL_KAFKA_TOPIC_MAX 250 /* Kafka topic names have at most 249 bytes */

/* The lag of one topic, summed over the partitions of it assigned to this consumer. */
typedef struct {
    char topic[SL_KAFKA_TOPIC_MAX];
    int64_t lag;          /* messages not yet consumed, over partitions_known (>= 0) */
    int partitions;       /* partitions of the topic assigned to this consumer */
    int partitions_known; /* of those, the ones with a known position and high watermark */
} sl_kafka_lag_t;

/* Fills out[0..max) with the lag of each topic cons consumes: first every topic it subscribes
 * to (patterns "^..." aside), with partitions 0 while none is assigned, then any other topic of
 * its assignment (a consumer that assigns partitions itself). Topics past max are left out.
 * Returns how many entries it wrote, or -1 when librdkafka cannot tell the assignment (the
 * consumer is closing; out is then unspecified). Non-blocking; thread-safe like librdkafka. */
int sl_kafka_lag(rd_kafka_t *cons, sl_kafka_lag_t *out, int max);

/* The gauge family every consuming daemon exports, labelled by topic. */
#define SL_KAFKA_LAG_METRIC "sluice_kafka_consumer_lag"

/* Registers SL_KAFKA_LAG_METRIC{topic} on m; returns the family id, or -1 as
 * sl_metrics_family does (e.g. already registered on m). */
int sl_kafka_lag_family(sl_metrics_t *m);

/* Sets family's gauge of each topic sl_kafka_lag(cons) reports (up to 32 topics); does nothing
 * when it reports -1. A topic this consumer still subscribes to but no longer has partitions
 * of drops to 0. Meant to run about once a second from the daemon's loop:
 *     int m_lag = sl_kafka_lag_family(metrics);               // at start-up
 *     sl_kafka_export_lag(cons, metrics, m_lag);              // every second or so
 */
void sl_kafka_export_lag(rd_kafka_t *cons, sl_metrics_t *m, int family);

/* Input lost on the broker: the times a consumer of this process found the offset it was to
 * read next already gone from a partition of topic (deleted by the topic's retention while
 * unread, or the topic made anew) and librdkafka went on from the oldest message left
 * (auto.offset.reset). Each is logged as an error naming the partition and offset; the
 * messages in between are lost, and without this nothing would say so. librdkafka reports it
 * only as a log line, which this module's log callback recognises. Thread-safe. */
int64_t sl_kafka_input_lost(const char *topic);

#define SL_KAFKA_LOST_METRIC "sluice_kafka_input_lost_total"

/* Registers SL_KAFKA_LOST_METRIC{topic} on m (a counter of sl_kafka_input_lost per topic);
 * returns the family id as sl_metrics_family does. */
int sl_kafka_lost_family(sl_metrics_t *m);

/* Brings family up to date with sl_kafka_input_lost of every topic seen; next to
 * sl_kafka_export_lag in the daemon's loop. One metrics registry per process. */
void sl_kafka_export_lost(sl_metrics_t *m, int family);

#endif
