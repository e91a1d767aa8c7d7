/* inflight.c - a ring of takes retired in order (see inflight.h). */
#include "inflight.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *topic; /* the config's topic name: lives as long as the process's config */
    char *key, *value;
} out_t;

typedef struct {
    char *topic; /* copied: a consumed message's topic name goes with the message */
    int32_t partition;
    int64_t next;
} pos_t;

struct sl_take {
    int pending; /* outputs produced and not yet reported */
    int failed;  /* reported failed (or never produced) since the last produce of the take */
    int nout, nin;
    int max_outs, max_ins;
    out_t *outs;
    pos_t *ins;
};

struct sl_inflight {
    sl_inflight_ops_t ops;
    int max_takes, max_outs, max_ins;
    sl_take_t *ring;
    int head, count;
};

sl_inflight_t *sl_inflight_new(int max_takes, int max_outs, int max_ins,
                               const sl_inflight_ops_t *ops)
{
    if (max_takes < 1 || max_outs < 1 || max_ins < 1 || ops == NULL)
        return NULL;
    sl_inflight_t *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    f->ops = *ops;
    f->max_takes = max_takes;
    f->max_outs = max_outs;
    f->max_ins = max_ins;
    f->ring = calloc((size_t)max_takes, sizeof *f->ring);
    int ok = f->ring != NULL;
    for (int i = 0; ok && i < max_takes; i++) {
        f->ring[i].outs = calloc((size_t)max_outs, sizeof *f->ring[i].outs);
        f->ring[i].ins = calloc((size_t)max_ins, sizeof *f->ring[i].ins);
        f->ring[i].max_outs = max_outs;
        f->ring[i].max_ins = max_ins;
        ok = f->ring[i].outs != NULL && f->ring[i].ins != NULL;
    }
    if (!ok) {
        sl_inflight_free(f);
        return NULL;
    }
    return f;
}

static void clear(sl_take_t *t)
{
    for (int i = 0; i < t->nout; i++) {
        free(t->outs[i].key);
        free(t->outs[i].value);
    }
    for (int i = 0; i < t->nin; i++)
        free(t->ins[i].topic);
    t->nout = t->nin = t->pending = t->failed = 0;
}

void sl_inflight_free(sl_inflight_t *f)
{
    if (f == NULL)
        return;
    for (int i = 0; f->ring != NULL && i < f->max_takes; i++) {
        clear(&f->ring[i]);
        free(f->ring[i].outs);
        free(f->ring[i].ins);
    }
    free(f->ring);
    free(f);
}

int sl_inflight_count(const sl_inflight_t *f)
{
    return f->count;
}

sl_take_t *sl_inflight_open(sl_inflight_t *f)
{
    /* A loop turn that took nothing leaves an empty take; the next turn uses it again rather
     * than holding a slot of the flight with it behind unacknowledged takes. */
    if (f->count > 0) {
        sl_take_t *tail = &f->ring[(f->head + f->count - 1) % f->max_takes];
        if (tail->nin == 0 && tail->nout == 0)
            return tail;
    }
    if (f->count == f->max_takes)
        return NULL;
    sl_take_t *t = &f->ring[(f->head + f->count) % f->max_takes];
    clear(t);
    f->count++;
    return t;
}

sl_err_t sl_take_input(sl_take_t *t, const char *topic, int32_t partition, int64_t offset)
{
    for (int i = 0; i < t->nin; i++) {
        if (t->ins[i].partition == partition && strcmp(t->ins[i].topic, topic) == 0) {
            if (offset + 1 > t->ins[i].next)
                t->ins[i].next = offset + 1;
            return SL_OK;
        }
    }
    if (t->nin == t->max_ins)
        return SL_EINVAL;
    char *copy = strdup(topic);
    if (copy == NULL)
        return SL_ENOMEM;
    t->ins[t->nin++] = (pos_t){copy, partition, offset + 1};
    return SL_OK;
}

static void produce_one(sl_inflight_t *f, sl_take_t *t, const out_t *o)
{
    if (f->ops.produce(f->ops.arg, t, o->topic, o->key, o->value) == 0)
        t->pending++;
    else
        t->failed++;
}

sl_err_t sl_take_output(sl_inflight_t *f, sl_take_t *t, const char *topic, char *key, char *value)
{
    if (t->nout == t->max_outs)
        return SL_EINVAL;
    t->outs[t->nout] = (out_t){topic, key, value};
    int failed = t->failed;
    produce_one(f, t, &t->outs[t->nout++]);
    return t->failed > failed ? SL_EKAFKA : SL_OK;
}

void sl_take_delivered(sl_take_t *t, int ok)
{
    if (t->pending > 0)
        t->pending--;
    if (!ok)
        t->failed++;
}

int sl_inflight_retire(sl_inflight_t *f)
{
    int retired = 0;
    while (f->count > 0) {
        sl_take_t *t = &f->ring[f->head];
        if (t->pending > 0)
            break;
        if (t->failed > 0) {
            /* Produced again whole; it holds back the takes behind it until it lands. */
            t->failed = 0;
            for (int i = 0; i < t->nout; i++)
                produce_one(f, t, &t->outs[i]);
            break;
        }
        for (int i = 0; i < t->nin; i++)
            f->ops.store(f->ops.arg, t->ins[i].topic, t->ins[i].partition, t->ins[i].next);
        clear(t);
        f->head = (f->head + 1) % f->max_takes;
        f->count--;
        retired++;
    }
    return retired;
}
