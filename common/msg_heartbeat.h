/* msg_heartbeat.h - the dispatcher heartbeat (schema/heartbeat.json, topic sluice.usage): which
 * dispatcher, which incarnation of it, how many calls it runs at once, and the attempts it holds.
 *
 * The dispatcher fills an sl_msg_heartbeat_t and calls sl_msg_heartbeat_json; the scheduler,
 * after validating the message against its schema, reads it back with sl_msg_heartbeat_read.
 * A usage-topic message is a heartbeat when its "kind" is "heartbeat" (sl_msg_is_heartbeat);
 * usage events have no kind.
 */
#ifndef SL_MSG_HEARTBEAT_H
#define SL_MSG_HEARTBEAT_H

#include <jansson.h>
#include <stdint.h>

#include "err.h"

/* An incarnation: 16 random bytes in hex, drawn when the dispatcher starts. */
enum { SL_INCARNATION_HEX = 32 };

/* The Kafka key of a heartbeat: "dispatcher:" and the dispatcher's name. */
#define SL_HEARTBEAT_KEY_PREFIX "dispatcher:"

typedef struct {
    const char *dispatcher;  /* its stable name (kafka.instance or the host name) */
    const char *incarnation; /* SL_INCARNATION_HEX hex digits */
    int64_t started_ms, sent_ms;
    int full; /* attempts lists every attempt held; otherwise only those taken since the last */
    int64_t max_in_flight; /* the calls it runs at once (dispatcher.max_in_flight); 0: not said */
} sl_msg_heartbeat_t;

/* A new heartbeat document with an empty attempts list; NULL when out of memory. */
json_t *sl_msg_heartbeat_json(const sl_msg_heartbeat_t *h);
/* Appends an attempt to a heartbeat built by sl_msg_heartbeat_json. */
sl_err_t sl_msg_heartbeat_add(json_t *doc, const char *job_id, const char *reservation_id);

/* Whether a usage-topic document is a heartbeat rather than a usage event. */
int sl_msg_is_heartbeat(const json_t *doc);

/* Reads a heartbeat that passed schema/heartbeat.json; the strings point into doc.
 * *attempts is its attempts array (each {job_id, reservation_id}). */
sl_err_t sl_msg_heartbeat_read(const json_t *doc, sl_msg_heartbeat_t *h, const json_t **attempts);

#endif
