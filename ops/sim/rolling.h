/* rolling.h - one dimension's rolling minute: the costs admitted in the trailing window, kept
 * exactly, so that a limit can be enforced over any window of that length and not just per slice.
 *
 * The idea to hold first: a charge admitted at time t counts at every time in [t, t + window_ms)
 * and no longer. The window keeps each admitted (time, cost) pair of the last window_ms in a
 * growable ring, oldest first, and drops pairs lazily as time passes; charges at the same
 * millisecond share one entry. The ring never holds more than SL_SIM_ROLLING_ENTRIES_MAX entries:
 * past that a cost is refused until the oldest entry expires, rather than the ring growing without
 * bound.
 *
 * Not thread-safe: the caller serialises all calls on one window. Times are caller-supplied
 * milliseconds on any monotonic clock; a time earlier than the last one seen counts as no time.
 */
#ifndef SL_SIM_ROLLING_H
#define SL_SIM_ROLLING_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct sl_sim_rolling sl_sim_rolling_t;

/* The most entries a window holds (16 bytes each): 16 MB at the most per limited dimension. Only
 * requests admitted at more than this many distinct milliseconds of one window reach it. */
#define SL_SIM_ROLLING_ENTRIES_MAX 1000000

/* Creates an empty window of window_ms (>= 1) for a limit of `limit` (>= 1) per window, with
 * now_ms as the last time seen. Returns SL_EINVAL for a bad argument, SL_ENOMEM; *out is set only
 * on success and is freed with sl_sim_rolling_free. */
sl_err_t sl_sim_rolling_new(int64_t limit, int64_t window_ms, int64_t now_ms,
                            sl_sim_rolling_t **out);

/* Frees win; NULL is a no-op. */
void sl_sim_rolling_free(sl_sim_rolling_t *win);

/* 0 when a charge of cost (>= 0; a cost above the limit is taken as the limit, so it fits only an
 * empty window) fits the window at now_ms: when the costs held plus cost are at most the limit and
 * there is room for its entry. Otherwise the milliseconds (>= 1) until enough of the window has
 * expired for it. Drops what has expired and makes room for the entry (growing the ring within
 * its bound), neither of which is a decision: the outcome at now_ms is the same without them. */
int64_t sl_sim_rolling_wait_ms(sl_sim_rolling_t *win, int64_t cost, int64_t now_ms);

/* Records a charge of cost (>= 0) at now_ms. Meant to follow a wait of 0 for the same cost at the
 * same time, which guarantees its entry a place; without one, a charge that finds the ring full is
 * added to the newest entry instead, which only makes it count for longer. */
void sl_sim_rolling_add(sl_sim_rolling_t *win, int64_t cost, int64_t now_ms);

/* The sum of the costs charged in (now_ms - window_ms, now_ms]. */
int64_t sl_sim_rolling_sum(const sl_sim_rolling_t *win, int64_t now_ms);

/* The entries the ring holds now, expired ones not yet dropped included; for tests. */
size_t sl_sim_rolling_entries(const sl_sim_rolling_t *win);

#endif
