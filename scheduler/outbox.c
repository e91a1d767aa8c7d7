/* outbox.c - the messages the core hands over, and the results outbox until the broker has
 * them (see outbox.h).
 */
#include "outbox.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

sl_err_t sl_outbox_emit(sl_sched_t *s, sl_msg_kind_t kind, const char *topic, const char *key,
                        char *value, int64_t seq)
{
    if (s->nout == s->capout) {
        int ncap = s->capout ? s->capout * 2 : 256;
        sl_sched_msg_t *no = realloc(s->out, (size_t)ncap * sizeof *no);
        if (no == NULL) {
            free(value);
            return SL_ENOMEM;
        }
        s->out = no;
        s->capout = ncap;
    }
    sl_sched_msg_t *m = &s->out[s->nout];
    memset(m, 0, sizeof *m);
    m->kind = kind;
    m->topic = topic;
    m->key = strdup(key);
    m->value = value;
    m->seq = seq;
    if (m->key == NULL) {
        free(value);
        return SL_ENOMEM;
    }
    s->nout++;
    return SL_OK;
}

sl_err_t sl_outbox_emit_taken(sl_sched_t *s, const char *tenant, const char *job_id,
                              int64_t submitted_ms, char *job_json)
{
    char *id = strdup(job_id);
    if (id == NULL) {
        free(job_json);
        return SL_ENOMEM;
    }
    sl_err_t rc = sl_outbox_emit(s, SL_MSG_CHANGELOG, s->cfg->kafka.topic_changelog, tenant,
                                 job_json, 0);
    if (rc != SL_OK) {
        free(id);
        return rc;
    }
    s->out[s->nout - 1].job_id = id;
    s->out[s->nout - 1].submitted_ms = submitted_ms;
    return SL_OK;
}

/* The topic of a result: its tenant's (read from the result itself, which every writer fills),
 * else the shared one. */
static const char *result_topic(const sl_sched_t *s, const char *result_json)
{
    json_t *doc = json_loads(result_json, 0, NULL);
    const char *name = json_string_value(json_object_get(doc, "tenant"));
    int tenant = name != NULL ? sl_config_tenant(s->cfg, name) : -1;
    json_decref(doc);
    return sl_config_results_topic(s->cfg, tenant);
}

sl_err_t sl_outbox_resend(sl_sched_t *s, const char *job_id, char *result_json, int64_t now_ms)
{
    int64_t seq = 0;
    const char *topic = result_topic(s, result_json);
    sl_err_t rc = sl_store_outbox_add(s->store, topic, job_id, result_json, now_ms, &seq);
    if (rc != SL_OK) {
        free(result_json);
        return rc;
    }
    return sl_outbox_emit(s, SL_MSG_RESULT, topic, job_id, result_json, seq);
}

int sl_sched_take(sl_sched_t *s, sl_sched_msg_t **msgs)
{
    *msgs = s->out;
    int n = s->nout;
    s->out = NULL;
    s->nout = s->capout = 0;
    return n;
}

void sl_sched_msgs_free(sl_sched_msg_t *msgs, int n)
{
    for (int i = 0; i < n; i++) {
        free(msgs[i].key);
        free(msgs[i].value);
        free(msgs[i].job_id);
    }
    free(msgs);
}

/* ---- delivery tracking ---- */

/* Outbox rows whose delivery is acknowledged, to delete in the next transaction. */
struct sl_outbox {
    int64_t *acked;
    int nacked, cap;
    int inflight;
    int resweep; /* a delivery failed: produce the outbox again once nothing is in flight */
};

sl_outbox_t *sl_outbox_new(void)
{
    return calloc(1, sizeof(sl_outbox_t));
}

void sl_outbox_free(sl_outbox_t *ob)
{
    if (ob == NULL)
        return;
    free(ob->acked);
    free(ob);
}

void sl_outbox_sent(sl_outbox_t *ob, int ok)
{
    if (ok)
        ob->inflight++;
    else
        ob->resweep = 1;
}

void sl_outbox_delivered(sl_outbox_t *ob, int64_t seq, int ok)
{
    ob->inflight--;
    if (!ok) {
        ob->resweep = 1;
        return;
    }
    if (ob->nacked == ob->cap) {
        int ncap = ob->cap ? ob->cap * 2 : 1024;
        int64_t *na = realloc(ob->acked, (size_t)ncap * sizeof *na);
        if (na == NULL) {
            ob->resweep = 1; /* the row stays; a duplicate result is better than none */
            return;
        }
        ob->acked = na;
        ob->cap = ncap;
    }
    ob->acked[ob->nacked++] = seq;
}

sl_err_t sl_outbox_forget_delivered(sl_outbox_t *ob, sl_store_t *store)
{
    sl_err_t rc = SL_OK;
    for (int i = 0; rc == SL_OK && i < ob->nacked; i++)
        rc = sl_store_outbox_delete(store, ob->acked[i]);
    return rc;
}

void sl_outbox_committed(sl_outbox_t *ob)
{
    ob->nacked = 0;
}

void sl_outbox_sweep(sl_outbox_t *ob, sl_store_t *store, int all, sl_outbox_produce_fn produce,
                     void *arg)
{
    if (!all && !(ob->resweep && ob->inflight == 0))
        return;
    ob->resweep = 0;
    sl_store_outbox_each(store, produce, arg);
}

void sl_outbox_close(sl_outbox_t *ob, sl_store_t *store)
{
    if (ob->nacked > 0 && sl_store_begin(store) == SL_OK) {
        for (int i = 0; i < ob->nacked; i++)
            sl_store_outbox_delete(store, ob->acked[i]);
        sl_store_commit(store);
    }
    ob->nacked = 0;
}
