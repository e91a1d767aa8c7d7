/* heartbeat.c - the dispatcher's heartbeats (see heartbeat.h). */
#include "heartbeat.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg_heartbeat.h"

struct sl_heartbeat {
    char name[129];
    char key[160];
    char incarnation[SL_INCARNATION_HEX + 1];
    int64_t started_ms, period_ms, last_ms; /* last_ms: the last periodic one */
    int64_t max_in_flight;
    int64_t accepted_seen; /* the engine's accepted count at the last heartbeat */
    int sent;              /* heartbeats sent; -1 before the first */
};

sl_heartbeat_t *sl_heartbeat_new(const char *name, int64_t period_ms, int64_t max_in_flight,
                                 int64_t now_ms)
{
    sl_heartbeat_t *hb = calloc(1, sizeof *hb);
    if (hb == NULL || sodium_init() < 0) {
        free(hb);
        return NULL;
    }
    snprintf(hb->name, sizeof hb->name, "%s", name);
    snprintf(hb->key, sizeof hb->key, "%s%s", SL_HEARTBEAT_KEY_PREFIX, hb->name);
    unsigned char rnd[SL_INCARNATION_HEX / 2];
    randombytes_buf(rnd, sizeof rnd);
    sodium_bin2hex(hb->incarnation, sizeof hb->incarnation, rnd, sizeof rnd);
    hb->started_ms = now_ms;
    hb->period_ms = period_ms;
    hb->max_in_flight = max_in_flight;
    hb->sent = -1;
    return hb;
}

void sl_heartbeat_free(sl_heartbeat_t *hb)
{
    free(hb);
}

const char *sl_heartbeat_incarnation(const sl_heartbeat_t *hb)
{
    return hb->incarnation;
}

typedef struct {
    sl_heartbeat_t *hb;
    int64_t now_ms;
    int full;
    sl_engine_emit_fn emit;
    void *arg;
    json_t *doc; /* the message being filled */
    int n;       /* attempts in it */
    sl_err_t rc;
} fill_t;

static json_t *start(const fill_t *f)
{
    sl_msg_heartbeat_t m = {f->hb->name,   f->hb->incarnation, f->hb->started_ms,
                            f->now_ms,     f->full,            f->hb->max_in_flight};
    return sl_msg_heartbeat_json(&m);
}

static void flush(fill_t *f)
{
    char *value = f->doc != NULL ? json_dumps(f->doc, JSON_COMPACT) : NULL;
    if (value == NULL)
        f->rc = SL_ENOMEM;
    else
        f->emit(f->hb->key, value, f->arg);
    free(value);
    json_decref(f->doc);
    f->doc = NULL;
    f->n = 0;
}

static void add(const char *job_id, const char *reservation_id, void *arg)
{
    fill_t *f = arg;
    if (f->n == SL_HEARTBEAT_MAX_ATTEMPTS)
        flush(f);
    if (f->doc == NULL)
        f->doc = start(f);
    if (f->doc == NULL || sl_msg_heartbeat_add(f->doc, job_id, reservation_id) != SL_OK) {
        f->rc = SL_ENOMEM;
        return;
    }
    f->n++;
}

int sl_heartbeat_periodic_due(const sl_heartbeat_t *hb, int64_t now_ms)
{
    return hb->sent < 0 || now_ms - hb->last_ms >= hb->period_ms;
}

sl_err_t sl_heartbeat_run(sl_heartbeat_t *hb, sl_engine_t *e, int64_t now_ms,
                          sl_engine_emit_fn emit, void *arg)
{
    sl_engine_stats_t st;
    sl_engine_stats(e, &st);
    int took = st.accepted != hb->accepted_seen;
    int periodic = sl_heartbeat_periodic_due(hb, now_ms);
    if (!periodic && !took)
        return SL_OK;
    fill_t f = {hb, now_ms, 0, emit, arg, NULL, 0, SL_OK};
    f.full = hb->sent < 0 || (periodic && (hb->sent + 1) % SL_HEARTBEAT_FULL_EVERY == 0);
    f.doc = start(&f);
    sl_engine_each_attempt(e, !f.full, add, &f);
    flush(&f);
    if (f.rc != SL_OK)
        return f.rc;
    hb->accepted_seen = st.accepted;
    /* Only a periodic heartbeat resets the period: the ones naming calls just taken reach one
     * partition, and every scheduler shard must hear this dispatcher every period. */
    if (periodic)
        hb->last_ms = now_ms;
    hb->sent++;
    return SL_OK;
}
