/* inflight.h - ingest's takes in flight: produced, not yet acknowledged, offsets not yet stored.
 *
 * The one idea: ingest does not wait for the broker's acknowledgements of one take before it
 * reads the next (a wait of 1 - 80 ms per take under load, during which a request of the
 * requests topic would sit behind batch work), yet an input offset is stored for commit only
 * once every output of its take and of every earlier take is acknowledged. Takes retire in the
 * order they were opened; a take with a failed delivery is produced again, whole, and retires
 * only when all of it landed (downstream de-duplicates by job id). Single-threaded: delivery
 * reports arrive through rd_kafka_poll on the caller's thread.
 */
#ifndef SL_INFLIGHT_H
#define SL_INFLIGHT_H

#include <stdint.h>

#include "err.h"

typedef struct sl_inflight sl_inflight_t;
typedef struct sl_take sl_take_t;

/* What to do with a take: produce each of its outputs again (produce), and store the offsets
 * after its inputs (store). */
typedef struct {
    /* Produces output i of take t (topic, key, value) with t as the delivery's opaque; 0 ok. */
    int (*produce)(void *arg, sl_take_t *t, const char *topic, const char *key, const char *value);
    /* Stores next_offset as the position of (topic, partition). */
    void (*store)(void *arg, const char *topic, int32_t partition, int64_t next_offset);
    void *arg;
} sl_inflight_ops_t;

/* At most max_takes in flight, each of at most max_outs outputs and max_ins input partitions.
 * NULL when out of memory or a bound is < 1. */
sl_inflight_t *sl_inflight_new(int max_takes, int max_outs, int max_ins,
                               const sl_inflight_ops_t *ops);
void sl_inflight_free(sl_inflight_t *f);

int sl_inflight_count(const sl_inflight_t *f);

/* A new, empty take at the tail (the tail itself when nothing went into it yet, so idle turns
 * do not fill the flight); NULL when max_takes are in flight. */
sl_take_t *sl_inflight_open(sl_inflight_t *f);

/* Notes that input (topic, partition, offset) belongs to t: its partition's position will be
 * offset + 1 when t retires. SL_EINVAL when t already has max_ins other partitions. */
sl_err_t sl_take_input(sl_take_t *t, const char *topic, int32_t partition, int64_t offset);

/* Adds an output to t and produces it; t owns key and value from now on (freed when t retires).
 * SL_EINVAL when t is full, SL_EKAFKA when the produce failed (t keeps the output and produces
 * it again with the rest if any delivery fails; a failed produce counts as a failed delivery). */
sl_err_t sl_take_output(sl_inflight_t *f, sl_take_t *t, const char *topic, char *key, char *value);

/* A delivery report of one output of t. */
void sl_take_delivered(sl_take_t *t, int ok);

/* Retires the takes at the head whose outputs all landed (storing their offsets), and produces
 * again the first one with a failure. Returns how many retired. */
int sl_inflight_retire(sl_inflight_t *f);

#endif
