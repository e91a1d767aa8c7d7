/* holders.h - which dispatcher holds each lease, and what happens to its leases when it dies.
 *
 * Every dispatcher sends heartbeats on the usage topic (schema/heartbeat.json): its name, the
 * incarnation it drew when it started, and the attempts it took. The scheduler tags each lease
 * with the incarnation that took it (job_t.holder). An incarnation is dead when a newer one of
 * the same name speaks (a restart: known at once) or when it was silent for
 * scheduler.dispatcher_dead_ms. Its leases are settled then, not at their expiry: charged in
 * full (the call may have reached the provider), and the job is dispatched again where the
 * deployment is idempotent (the provider runs a repeated Idempotency-Key once), or fails as
 * dispatcher_lost where it is not (a second call could run the request twice). A lease no
 * heartbeat named still waits for its expiry. Internal to the scheduler (core.h).
 */
#ifndef SL_HOLDERS_H
#define SL_HOLDERS_H

#include <jansson.h>
#include <stdint.h>

#include "core.h"

/* At most this many dispatchers are tracked at once; heartbeats of further names are refused
 * (their leases wait for expiry as before). */
enum { SL_HOLDERS_MAX = 1024 };

struct sl_holders *sl_holders_new(void);
void sl_holders_free(struct sl_holders *h);

/* Takes a heartbeat (a usage-topic document whose kind is "heartbeat"): validates it, marks
 * its sender alive, declares a replaced incarnation dead and tags the leases it names. Invalid
 * or stale heartbeats are counted and change nothing. */
sl_err_t sl_holders_on_heartbeat(sl_sched_t *s, json_t *doc, int64_t now_ms);

/* Declares dead the incarnations silent for dispatcher_dead_ms and settles their leases. */
sl_err_t sl_holders_tick(sl_sched_t *s, int64_t now_ms);

/* Adds gap_ms to every dispatcher's last heartbeat: time the scheduler could not hear them
 * (see sl_sched_extend_leases). */
void sl_holders_extend(sl_sched_t *s, int64_t gap_ms);

/* How many dispatchers are tracked (for tests and metrics). */
int sl_holders_count(const sl_sched_t *s);

#endif
