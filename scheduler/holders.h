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
 * heartbeat named still waits for its expiry.
 *
 * A dead incarnation stays known (a tombstone) so that a replay of its heartbeats cannot make
 * it alive again; a heartbeat older than the newest one taken from its incarnation is refused
 * too, and a dispatcher not tracked yet must have sent its heartbeat within dispatcher_dead_ms
 * by the scheduler's clock (the dispatch age bound already needs the clocks close).
 *
 * Backpressure: each heartbeat says how many calls its dispatcher runs at once; the scheduler
 * leases no more than the live ones can take (sl_holders_window), so a backlog waits in the
 * scheduler's queue, in DRR order, rather than in the dispatch topic, where it would outlive
 * its lease or its age bound and be leased again. Internal to the scheduler (core.h).
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

/* How many dispatchers are alive (for tests and metrics). */
int sl_holders_count(const sl_sched_t *s);

/* The window: the calls the live dispatchers run at once, i.e. the sum of the max_in_flight
 * each says (this config's dispatcher.max_in_flight for one that does not say), or
 * dispatcher.max_in_flight before any is heard (one dispatcher's worth, as at a scheduler's
 * start); less while it is cut (below). */
int64_t sl_holders_window(const sl_sched_t *s);

/* The window's cut, as TCP's congestion window: a dispatch the dispatcher did not send (it
 * reached it later than its age bound, or after its lease) says the path to the dispatchers is
 * slower than the leases out allow; re-leasing at once would only feed it more (bench/backfill
 * with a per-minute limit far above what a slow provider lets the dispatcher send: 275,000
 * dispatches and no result in 200 s before the window, 6,195 re-sent of 10,000 with the window
 * alone). So the window is cut to half the leases out (at least SL_WINDOW_MIN), at most once
 * every SL_WINDOW_CUT_EVERY_MS (a burst of refusals is one event), and grows by one for every
 * window's worth of answered calls (additive increase: growing by one per answer doubled it
 * within a round trip, and the refusals came straight back) until it is whole again. */
enum { SL_WINDOW_MIN = 8, SL_WINDOW_CUT_EVERY_MS = 250 };
void sl_holders_on_not_sent(sl_sched_t *s, int64_t now_ms);
void sl_holders_on_answer(sl_sched_t *s);

#endif
