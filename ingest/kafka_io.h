/* kafka_io.h - ingest's side of Kafka: producing the outputs of a take, their delivery reports,
 * storing and committing input offsets, and the errors the consumer hands over as messages.
 *
 * The one idea: each of these can fail once per message or once per turn of the loop while
 * the broker is away or overloaded, so every failure is logged rate limited (common/log.h): a
 * broker outage writes a few lines that count what they held back, not a line per message. The
 * daemon's loop calls sl_log_flush_limited so that a count is not lost once the failures stop.
 * Single-threaded, like the takes (ingest/inflight.h): delivery reports arrive through
 * rd_kafka_poll on the caller's thread.
 */
#ifndef SL_KAFKA_IO_H
#define SL_KAFKA_IO_H

#include <librdkafka/rdkafka.h>

#include "inflight.h"

typedef struct sl_kafka_io sl_kafka_io_t;

/* prod produces the outputs, cons is the consumer whose offsets are stored and committed; both
 * borrowed (they must outlive the io). NULL when out of memory. */
sl_kafka_io_t *sl_kafka_io_new(rd_kafka_t *prod, rd_kafka_t *cons);
void sl_kafka_io_free(sl_kafka_io_t *io);

/* Told of every output handed to the producer (its topic and the bytes of its value), the
 * first time and each time it is produced again. */
typedef void (*sl_kafka_io_sent_fn)(void *arg, const char *topic, size_t len);
void sl_kafka_io_on_sent(sl_kafka_io_t *io, sl_kafka_io_sent_fn fn, void *arg);

/* The operations the takes in flight use (sl_inflight_new): produce an output with its take as
 * the delivery's opaque, store an input offset. */
sl_inflight_ops_t sl_kafka_io_ops(sl_kafka_io_t *io);

/* The producer's delivery report callback (sl_kafka_producer_new): tells the output's take
 * (the message's opaque; a message without one is ignored) whether it landed. */
void sl_kafka_io_on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque);

/* Commits the offsets stored since the last commit (none: no-op); async 0 waits for the
 * broker's answer (at stop). A failure is logged; the offsets stay stored in the consumer, and
 * the next commit (once more are stored) carries them. */
void sl_kafka_io_commit(sl_kafka_io_t *io, int async);

/* Offsets stored since the last commit. */
int sl_kafka_io_stored(const sl_kafka_io_t *io);

/* Reports a message the consumer handed over as an error (msg->err set). The caller still
 * destroys msg. */
void sl_kafka_io_consume_error(const rd_kafka_message_t *msg);

#endif
