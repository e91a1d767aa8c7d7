/* kafka.h - librdkafka clients configured the sluice way.
 *
 * Producers are idempotent with acks=all, so "acknowledged" means durable on the broker;
 * consumers never auto-commit: each process commits its input offsets only after the work the
 * input caused is durable (produced and acknowledged, or stored in SQLite).
 */
#ifndef SL_KAFKA_H
#define SL_KAFKA_H

#include <librdkafka/rdkafka.h>

#include "config.h"
#include "err.h"

/* Finds the bootstrap servers: $SLUICE_KAFKA_BOOTSTRAP, else kafka.bootstrap_servers, else the
 * contents of kafka.bootstrap_file (written by sluice-devkafka), waiting up to wait_ms for that
 * file to appear. */
sl_err_t sl_kafka_bootstrap(const sl_config_t *cfg, int wait_ms, char *out, size_t cap);

/* Creates a producer. dr_cb (may be NULL) receives each delivery report; opaque is passed to it
 * as rd_kafka_opaque. *out set only on success; destroy with rd_kafka_destroy after flushing. */
sl_err_t sl_kafka_producer_new(const sl_config_t *cfg, const char *client_id,
                               void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                               void *opaque, rd_kafka_t **out, char *err, size_t errlen);

/* Creates a consumer in group, subscribed to the ntopics topics (none: the caller assigns), with auto-commit off and
 * reading from the earliest offset when the group has none. extra_props (name, value pairs,
 * NULL-terminated, may be NULL) override defaults. */
sl_err_t sl_kafka_consumer_new(const sl_config_t *cfg, const char *group, const char *client_id,
                               const char *const *topics, int ntopics,
                               const char *const *extra_props, rd_kafka_t **out, char *err,
                               size_t errlen);

/* Produces a copy of value to topic with an optional key, headers and delivery opaque; while
 * the local queue is full it serves delivery reports and tries again, so it never drops a
 * message for back-pressure. On success hdrs (may be NULL) belong to the message; on failure
 * they are destroyed and SL_EKAFKA is returned (logged). */
sl_err_t sl_kafka_produce(rd_kafka_t *rk, const char *topic, const char *key, const void *value,
                          size_t len, rd_kafka_headers_t *hdrs, void *opaque);

/* Finds header name on msg; returns SL_ENOTFOUND when absent. The value is not NUL-terminated
 * and lives as long as msg. */
sl_err_t sl_kafka_header(const rd_kafka_message_t *msg, const char *name, const char **val,
                         size_t *len);

/* Closes and destroys a consumer (NULL is a no-op). */
void sl_kafka_consumer_close(rd_kafka_t *rk);

#endif
