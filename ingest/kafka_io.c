/* kafka_io.c - ingest's side of Kafka (see kafka_io.h). */
#include "kafka_io.h"

#include <stdlib.h>
#include <string.h>

#include "kafka.h"
#include "log.h"

struct sl_kafka_io {
    rd_kafka_t *prod, *cons;
    int stored; /* offsets stored since the last commit */
    sl_kafka_io_sent_fn sent;
    void *sent_arg;
};

void sl_kafka_io_on_sent(sl_kafka_io_t *io, sl_kafka_io_sent_fn fn, void *arg)
{
    io->sent = fn;
    io->sent_arg = arg;
}

sl_kafka_io_t *sl_kafka_io_new(rd_kafka_t *prod, rd_kafka_t *cons)
{
    sl_kafka_io_t *io = calloc(1, sizeof *io);
    if (io == NULL)
        return NULL;
    io->prod = prod;
    io->cons = cons;
    return io;
}

void sl_kafka_io_free(sl_kafka_io_t *io)
{
    free(io);
}

void sl_kafka_io_on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    (void)rk;
    (void)opaque;
    sl_take_t *t = msg->_private;
    if (t == NULL)
        return;
    int ok = msg->err == RD_KAFKA_RESP_ERR_NO_ERROR;
    /* A broker away for message.timeout.ms fails every message in flight at once. */
    if (!ok)
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN, "delivery to %s failed: %s; will retry",
                     rd_kafka_topic_name(msg->rkt), rd_kafka_err2str(msg->err));
    sl_take_delivered(t, ok);
}

static int produce_out(void *arg, sl_take_t *t, const char *topic, const char *key,
                       const char *value)
{
    sl_kafka_io_t *io = arg;
    size_t len = strlen(value);
    if (sl_kafka_produce(io->prod, topic, key, value, len, NULL, t) != SL_OK)
        return -1;
    if (io->sent != NULL)
        io->sent(io->sent_arg, topic, len);
    return 0;
}

static void store_offset(void *arg, const char *topic, int32_t partition, int64_t next)
{
    sl_kafka_io_t *io = arg;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    if (l == NULL)
        return; /* not stored: redelivered after a restart, de-duplicated downstream */
    rd_kafka_topic_partition_list_add(l, topic, partition)->offset = next;
    rd_kafka_resp_err_t err = rd_kafka_offsets_store(io->cons, l);
    /* A partition revoked meanwhile is the new owner's: its messages come again there. */
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
        io->stored++;
    rd_kafka_topic_partition_list_destroy(l);
}

sl_inflight_ops_t sl_kafka_io_ops(sl_kafka_io_t *io)
{
    sl_inflight_ops_t ops = {produce_out, store_offset, io};
    return ops;
}

void sl_kafka_io_commit(sl_kafka_io_t *io, int async)
{
    if (io->stored == 0)
        return;
    rd_kafka_resp_err_t cerr = rd_kafka_commit(io->cons, NULL, async);
    if (cerr != RD_KAFKA_RESP_ERR_NO_ERROR && cerr != RD_KAFKA_RESP_ERR__NO_OFFSET)
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN, "commit: %s", rd_kafka_err2str(cerr));
    io->stored = 0;
}

int sl_kafka_io_stored(const sl_kafka_io_t *io)
{
    return io->stored;
}

void sl_kafka_io_consume_error(const rd_kafka_message_t *msg)
{
    /* Handed over on every poll while a broker is unreachable. */
    sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN, "consume: %s", rd_kafka_message_errstr(msg));
}
