/* heartbeat.h - the dispatcher's heartbeats (schema/heartbeat.json): it is alive, and which
 * attempts it holds, so that the scheduler can settle them as soon as this incarnation is known
 * dead instead of at lease expiry (scheduler/holders.h).
 *
 * One goes out when the dispatcher starts (a full, empty list: a restarted dispatcher's first
 * word tells the scheduler its predecessor is gone), one as soon as new attempts were taken
 * (those only: the dispatcher waits for the broker to have it before their calls go out, so the
 * scheduler knows who holds every call that may have reached a provider), and one at least every
 * period; every SL_HEARTBEAT_FULL_EVERY-th periodic one lists every attempt held, so a restarted scheduler learns them
 * all. A list longer than SL_HEARTBEAT_MAX_ATTEMPTS goes in several messages.
 */
#ifndef SL_HEARTBEAT_H
#define SL_HEARTBEAT_H

#include <stdint.h>

#include "engine.h"
#include "err.h"

enum {
    SL_HEARTBEAT_FULL_EVERY = 5,
    SL_HEARTBEAT_MAX_ATTEMPTS = 4096 /* schema/heartbeat.json's maxItems */
};

typedef struct sl_heartbeat sl_heartbeat_t;

/* A heartbeat source for dispatcher `name`, with a fresh random incarnation, for a dispatcher
 * that runs up to max_in_flight calls at once (every heartbeat says so: the scheduler leases no
 * more than its live dispatchers can take); NULL when out of memory. */
sl_heartbeat_t *sl_heartbeat_new(const char *name, int64_t period_ms, int64_t max_in_flight,
                                 int64_t now_ms);
void sl_heartbeat_free(sl_heartbeat_t *hb);

/* The incarnation drawn at sl_heartbeat_new (hex). */
const char *sl_heartbeat_incarnation(const sl_heartbeat_t *hb);

/* Whether the next sl_heartbeat_run at now_ms sends a periodic heartbeat (every scheduler shard
 * must hear those: the dispatcher sends them to every partition of the usage topic), rather
 * than nothing or only the attempts just taken. */
int sl_heartbeat_periodic_due(const sl_heartbeat_t *hb, int64_t now_ms);

/* Sends what is due at now_ms through emit (key, value): nothing, the attempts the engine took
 * since the last heartbeat, or a periodic one. Returns SL_ENOMEM when a message could not be
 * built (the next call tries again). */
sl_err_t sl_heartbeat_run(sl_heartbeat_t *hb, sl_engine_t *e, int64_t now_ms,
                          sl_engine_emit_fn emit, void *arg);

#endif
