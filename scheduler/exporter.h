/* exporter.h - what the scheduler reports about itself: its metrics (the core's counters and
 * gauges once a second, its decisions through the core's hooks) and a stats line in the log.
 *
 * It reads the core only through sched.h, on the loop's thread.
 */
#ifndef SL_EXPORTER_H
#define SL_EXPORTER_H

#include <stdint.h>

#include "config.h"
#include "metrics.h"
#include "sched.h"

typedef struct sl_exporter sl_exporter_t;

/* Registers the scheduler's metric families in m. cfg points at the caller's config pointer,
 * read at every hook (a reload replaces the config); m and *cfg are borrowed and must outlive
 * the exporter. NULL when a family cannot be registered or out of memory. */
sl_exporter_t *sl_exporter_new(sl_metrics_t *m, const sl_config_t **cfg);
void sl_exporter_free(sl_exporter_t *x); /* NULL is a no-op */

/* Has the exporter's hooks call next's too (arg passed to them), after its own: the core has
 * one set of hooks. next is borrowed; NULL stops. */
void sl_exporter_chain(sl_exporter_t *x, const sl_sched_observer_t *next, void *arg);

/* Installs the exporter's hooks on the core (they carry over a reload). */
void sl_exporter_observe(sl_exporter_t *x, sl_sched_t *sched);

/* Brings the counters and gauges up to date with the core at now_ms (once a second). */
void sl_exporter_update(sl_exporter_t *x, sl_sched_t *sched, const sl_config_t *cfg,
                        int64_t now_ms);

/* Logs one line of the core's counters (every few seconds). */
void sl_exporter_log_stats(const sl_sched_t *sched);

#endif
