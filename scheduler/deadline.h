/* deadline.h - the deadline scan: every SL_DEADLINE_SCAN_EVERY_MS the scheduler expires the
 * jobs past their deadline that no call holds, and notes the queued jobs of a class that
 * degrades which are close to theirs; once the tick has leased what it could, those still
 * queued go to their route's cheaper route (route.h, sl_route_degrade).
 *
 * Internal to the scheduler (core.h).
 */
#ifndef SL_DEADLINE_H
#define SL_DEADLINE_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"

enum { SL_DEADLINE_SCAN_EVERY_MS = 500 };

/* Job ids, not pointers: a job named here may finish (and be freed) before they are read.
 * Zero-initialised it is empty. */
typedef struct {
    char (*id)[SL_JOB_ID_MAX + 1];
    size_t n, cap;
} sl_deadline_late_t;

/* Expires every job past its deadline that is not leased (sl_route_expire_in_queue), and adds
 * to *late the queued jobs of a degrading class due within the scan interval plus their
 * margin (sl_route_deadline_margin_ms). A job that finds no memory in the lists is left for
 * the next scan. */
sl_err_t sl_deadline_scan(sl_sched_t *s, int64_t now_ms, sl_deadline_late_t *late);

/* Degrades the jobs of late still queued (leased, finished or moved ones are left alone). */
sl_err_t sl_deadline_degrade_late(sl_sched_t *s, const sl_deadline_late_t *late);

/* Frees late's memory; it is empty afterwards. */
void sl_deadline_late_free(sl_deadline_late_t *late);

#endif
