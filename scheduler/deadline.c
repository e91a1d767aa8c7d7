/* deadline.c - the deadline scan (see deadline.h). */
#include "deadline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "hmap.h"
#include "route.h"

typedef struct {
    sl_sched_t *s;
    int64_t now_ms;
    job_t **expired; /* past their deadline */
    size_t nexpired, capexpired;
    sl_deadline_late_t *late;
} scan_t;

static void collect(const char *key, void *value, void *arg)
{
    (void)key;
    scan_t *d = arg;
    job_t *j = value;
    size_t most = sl_hmap_len(d->s->jobs);
    if (j->state == J_LEASED)
        return;
    if (j->deadline_ms <= d->now_ms) {
        if (sl_grow((void **)&d->expired, sizeof *d->expired, &d->capexpired, d->nexpired + 1,
                    most) == SL_OK)
            d->expired[d->nexpired++] = j;
        return;
    }
    /* A job still queued this close to its deadline would expire before it is served, or
     * before the next scan: where its class degrades, the cheaper route may still serve it. */
    sl_deadline_late_t *late = d->late;
    if (j->state == J_QUEUED &&
        j->deadline_ms - d->now_ms <= SL_DEADLINE_SCAN_EVERY_MS + sl_route_deadline_margin_ms(j) &&
        d->s->cfg->classes[j->cls].overload == SL_OVERLOAD_DEGRADE &&
        sl_grow((void **)&late->id, sizeof *late->id, &late->cap, late->n + 1, most) == SL_OK)
        snprintf(late->id[late->n++], sizeof *late->id, "%s", j->id);
}

sl_err_t sl_deadline_scan(sl_sched_t *s, int64_t now_ms, sl_deadline_late_t *late)
{
    scan_t d = {s, now_ms, NULL, 0, 0, late};
    sl_hmap_each(s->jobs, collect, &d);
    sl_err_t rc = SL_OK;
    for (size_t i = 0; i < d.nexpired && rc == SL_OK; i++)
        rc = sl_route_expire_in_queue(s, d.expired[i], now_ms);
    free(d.expired);
    return rc;
}

sl_err_t sl_deadline_degrade_late(sl_sched_t *s, const sl_deadline_late_t *late)
{
    sl_err_t rc = SL_OK;
    for (size_t i = 0; i < late->n && rc == SL_OK; i++) {
        job_t *j = sl_hmap_get(s->jobs, late->id[i]);
        if (j == NULL || j->state != J_QUEUED)
            continue;
        int moved = 0;
        rc = sl_route_degrade(s, j, "deadline", &moved);
    }
    return rc;
}

void sl_deadline_late_free(sl_deadline_late_t *late)
{
    free(late->id);
    memset(late, 0, sizeof *late);
}
