/* restore.h - rebuilding the core's memory from the store: after a restart, or a reload.
 *
 * The store is the truth; memory is rebuilt from it. Buckets come back as the algorithm allows
 * (exactly when saved a moment ago, quotas exactly after a restart, per-minute limits at the
 * worst case), unfinished jobs back in their places, leases with their charges. Internal to
 * the scheduler (core.h).
 */
#ifndef SL_RESTORE_H
#define SL_RESTORE_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"

/* Restores what the buckets had admitted before this start.
 *   exact (a config reload: everything was saved a moment ago): levels and counters as saved;
 *   after a restart, per algorithm: calendar and rolling counters (daily quotas, spend) exactly,
 *   as saved plus every reservation made after the save; gauges from the calls in flight
 *   (sl_restore_jobs); everything else as the worst case for the rest of its window, since
 *   nothing tells how much of a per-minute limit was used just before. A new database starts
 *   unused. */
sl_err_t sl_restore_buckets(sl_sched_t *s, int exact, int64_t now_ms);

/* A database rebuilt from the changelog knows nothing of what was admitted before: every
 * per-minute bucket starts as sl_restore_buckets starts it after a restart with nothing saved
 * (token buckets empty, windows full for one window, ramps cold). Calendar and rolling counters
 * (daily quotas, spend) are not in the changelog and start unused. For a new store only (on
 * another, sl_restore_buckets already ran: a second run would count its guards' windows twice). */
sl_err_t sl_restore_assume_worst(sl_sched_t *s, int64_t now_ms);

/* Restores every unfinished job of the store into its place (queued, held, delayed, or leased
 * with its charges held again), then fails the jobs whose tenant or route the config no longer
 * knows. On failure err says why. */
sl_err_t sl_restore_jobs(sl_sched_t *s, int64_t now_ms, char *err, size_t errlen);

/* After a restart: produces again the dispatch of every restored lease on an idempotent
 * deployment (sl_lease_resend), so that one the broker never had does not wait for its lease. */
sl_err_t sl_restore_resend_leases(sl_sched_t *s);

/* The creation time before which no restart or reload from the store as it is now would
 * replay a reservation (sl_restore_buckets): the oldest last save of a quota bucket (calendar
 * and rolling windows replay what was charged after their save; one never saved, its whole
 * period back), and every guarded bucket's window back from now_ms, less a minute for a clock
 * that steps back. Reads each quota bucket's row. *horizon_ms is set only on success. */
sl_err_t sl_restore_horizon(sl_sched_t *s, int64_t now_ms, int64_t *horizon_ms);

/* Keeps the reservations table bounded by what a restart needs: closed reservations created
 * before the horizon go, at most SL_RESTORE_PRUNE_ROWS a call. Call it in the loop's
 * transaction every turn; it works at most once a second (the horizon is read again every
 * 10 s), and on the next turn again while rows are left. Zero-initialise p once; it carries
 * over a reload. */
enum { SL_RESTORE_PRUNE_ROWS = 4096 };
typedef struct {
    int64_t horizon_ms, next_horizon_ms, next_prune_ms;
    int behind;     /* the last call deleted a full batch: go on next turn */
    int64_t pruned; /* rows deleted so far */
} sl_restore_pruner_t;
sl_err_t sl_restore_prune(sl_sched_t *s, sl_restore_pruner_t *p, int64_t now_ms);

#endif
