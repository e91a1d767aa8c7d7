/* drr.c - deficit round-robin (Shreedhar & Varghese) with token costs (see drr.h). */
#include "drr.h"

#include <stdlib.h>

typedef struct flow flow_t;

struct sl_drr_node {
    sl_drr_node_t *prev, *next;
    flow_t *flow;
    void *item;
    int64_t cost;
};

struct flow {
    int id;
    int64_t quantum;
    int64_t deficit;
    int visited; /* quantum already added on the current visit */
    int active;
    size_t len;
    sl_drr_node_t *head, *tail;
    flow_t *ring_prev, *ring_next;
};

struct sl_drr {
    flow_t **flows; /* indexed by flow id */
    int nflows;
    flow_t *cur; /* the flow being visited; NULL when the ring is empty */
    int active;
    size_t len;
};

sl_drr_t *sl_drr_new(void)
{
    return calloc(1, sizeof(sl_drr_t));
}

void sl_drr_free(sl_drr_t *d)
{
    if (d == NULL)
        return;
    for (int i = 0; i < d->nflows; i++) {
        flow_t *f = d->flows[i];
        if (f == NULL)
            continue;
        sl_drr_node_t *n = f->head;
        while (n != NULL) {
            sl_drr_node_t *next = n->next;
            free(n);
            n = next;
        }
        free(f);
    }
    free(d->flows);
    free(d);
}

static flow_t *get_flow(sl_drr_t *d, int id)
{
    if (id >= d->nflows) {
        int n = d->nflows ? d->nflows : 8;
        while (n <= id)
            n *= 2;
        flow_t **nf = realloc(d->flows, (size_t)n * sizeof *nf);
        if (nf == NULL)
            return NULL;
        for (int i = d->nflows; i < n; i++)
            nf[i] = NULL;
        d->flows = nf;
        d->nflows = n;
    }
    if (d->flows[id] == NULL) {
        flow_t *f = calloc(1, sizeof *f);
        if (f == NULL)
            return NULL;
        f->id = id;
        d->flows[id] = f;
    }
    return d->flows[id];
}

/* Joins the round just before the current flow, i.e. at the end of this round. */
static void activate(sl_drr_t *d, flow_t *f)
{
    f->active = 1;
    f->deficit = 0;
    f->visited = 0;
    d->active++;
    if (d->cur == NULL) {
        f->ring_prev = f->ring_next = f;
        d->cur = f;
        return;
    }
    f->ring_next = d->cur;
    f->ring_prev = d->cur->ring_prev;
    d->cur->ring_prev->ring_next = f;
    d->cur->ring_prev = f;
}

static void deactivate(sl_drr_t *d, flow_t *f)
{
    f->active = 0;
    f->deficit = 0;
    f->visited = 0;
    d->active--;
    if (f->ring_next == f) {
        d->cur = NULL;
    } else {
        f->ring_prev->ring_next = f->ring_next;
        f->ring_next->ring_prev = f->ring_prev;
        if (d->cur == f)
            d->cur = f->ring_next;
    }
    f->ring_next = f->ring_prev = NULL;
}

sl_drr_node_t *sl_drr_push(sl_drr_t *d, int flow, int64_t quantum, void *item, int64_t cost,
                           int front)
{
    if (flow < 0)
        return NULL;
    flow_t *f = get_flow(d, flow);
    sl_drr_node_t *n = calloc(1, sizeof *n);
    if (f == NULL || n == NULL) {
        free(n);
        return NULL;
    }
    f->quantum = quantum > 0 ? quantum : 1;
    n->flow = f;
    n->item = item;
    n->cost = cost > 0 ? cost : 1;
    if (f->head == NULL) {
        f->head = f->tail = n;
    } else if (front) {
        n->next = f->head;
        f->head->prev = n;
        f->head = n;
    } else {
        n->prev = f->tail;
        f->tail->next = n;
        f->tail = n;
    }
    f->len++;
    d->len++;
    if (!f->active)
        activate(d, f);
    return n;
}

static void advance(sl_drr_t *d)
{
    d->cur->visited = 0;
    d->cur = d->cur->ring_next;
}

void *sl_drr_peek(sl_drr_t *d, int64_t *cost, int *flow)
{
    /* Each pass round the ring adds a quantum to every flow, so the loop ends; the bound only
     * guards against a corrupted state. */
    for (long guard = 0; d->cur != NULL && guard < 100000000L; guard++) {
        flow_t *f = d->cur;
        if (!f->visited) {
            f->deficit += f->quantum;
            f->visited = 1;
        }
        if (f->head->cost <= f->deficit) {
            if (cost != NULL)
                *cost = f->head->cost;
            if (flow != NULL)
                *flow = f->id;
            return f->head->item;
        }
        advance(d);
    }
    return NULL;
}

static void unlink_node(sl_drr_t *d, sl_drr_node_t *n)
{
    flow_t *f = n->flow;
    if (n->prev != NULL)
        n->prev->next = n->next;
    else
        f->head = n->next;
    if (n->next != NULL)
        n->next->prev = n->prev;
    else
        f->tail = n->prev;
    f->len--;
    d->len--;
    free(n);
    if (f->head == NULL)
        deactivate(d, f);
}

void sl_drr_pop(sl_drr_t *d)
{
    flow_t *f = d->cur;
    if (f == NULL || f->head == NULL)
        return;
    f->deficit -= f->head->cost;
    unlink_node(d, f->head);
}

void sl_drr_skip(sl_drr_t *d)
{
    if (d->cur == NULL)
        return;
    d->cur->deficit = 0;
    advance(d);
}

void sl_drr_remove(sl_drr_t *d, sl_drr_node_t *node)
{
    if (node != NULL)
        unlink_node(d, node);
}

size_t sl_drr_len(const sl_drr_t *d)
{
    return d->len;
}

int sl_drr_active_flows(const sl_drr_t *d)
{
    return d->active;
}

size_t sl_drr_flow_len(const sl_drr_t *d, int flow)
{
    if (flow < 0 || flow >= d->nflows || d->flows[flow] == NULL)
        return 0;
    return d->flows[flow]->len;
}
