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

/* Restores every unfinished job of the store into its place (queued, held, delayed, or leased
 * with its charges held again), then fails the jobs whose tenant or route the config no longer
 * knows. On failure err says why. */
sl_err_t sl_restore_jobs(sl_sched_t *s, int64_t now_ms, char *err, size_t errlen);

#endif
