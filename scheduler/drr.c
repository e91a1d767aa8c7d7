/* drr.c - hierarchical deficit round-robin (Shreedhar & Varghese) with token costs (see drr.h).
 *
 * Two rings of the same algorithm: groups (workload classes) take turns by their quanta, and
 * within the group being visited, its flows (tenants) take turns by theirs. An item is served
 * when its cost fits both its flow's and its group's deficit. */
#include "drr.h"

#include <stdlib.h>

typedef struct flow flow_t;
typedef struct ring ring_t;

/* A member of a ring: a flow in its group's ring, or a group in the top ring. */
typedef struct member member_t;
struct member {
    int64_t quantum;
    double share; /* guaranteed share of its ring while active, [0, 1) */
    int64_t deficit;
    int visited; /* quantum already added on the current visit */
    int active;
    member_t *ring_prev, *ring_next;
};

struct ring {
    member_t *cur; /* the member being visited; NULL when the ring is empty */
    int active;
    int64_t quanta; /* the sum of the active members' quanta */
    double shares;  /* the sum of the active members' guaranteed shares */
};

typedef struct group {
    member_t m; /* first: a member_t * of the top ring is its group */
    ring_t flows;
    size_t len;
} group_t;

struct flow {
    member_t m; /* first: a member_t * of a group's ring is its flow */
    int id;
    group_t *group;
    size_t len;
    sl_drr_node_t *head, *tail;
};

struct sl_drr {
    flow_t **flows; /* indexed by flow id */
    int nflows;
    group_t **groups; /* indexed by group id */
    int ngroups;
    ring_t top;
    int active; /* flows with items */
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
            if (n->owned)
                free(n);
            n = next;
        }
        free(f);
    }
    for (int i = 0; i < d->ngroups; i++)
        free(d->groups[i]);
    free(d->flows);
    free(d->groups);
    free(d);
}

/* Grows an array of pointers indexed by id so that id fits; NULL-fills the new slots. */
static int fit_index(void ***arr, int *n, int id)
{
    if (id < *n)
        return 0;
    int nn = *n ? *n : 8;
    while (nn <= id)
        nn *= 2;
    void **na = realloc(*arr, (size_t)nn * sizeof *na);
    if (na == NULL)
        return -1;
    for (int i = *n; i < nn; i++)
        na[i] = NULL;
    *arr = na;
    *n = nn;
    return 0;
}

static group_t *get_group(sl_drr_t *d, int id)
{
    if (fit_index((void ***)&d->groups, &d->ngroups, id) != 0)
        return NULL;
    if (d->groups[id] == NULL)
        d->groups[id] = calloc(1, sizeof(group_t));
    return d->groups[id];
}

static flow_t *get_flow(sl_drr_t *d, int id, group_t *g)
{
    if (fit_index((void ***)&d->flows, &d->nflows, id) != 0)
        return NULL;
    if (d->flows[id] == NULL) {
        flow_t *f = calloc(1, sizeof *f);
        if (f == NULL)
            return NULL;
        f->id = id;
        f->group = g;
        d->flows[id] = f;
    }
    return d->flows[id];
}

/* Joins the ring just before the current member, i.e. at the end of this round. */
static void activate(ring_t *r, member_t *m)
{
    m->active = 1;
    m->deficit = 0;
    m->visited = 0;
    r->active++;
    r->quanta += m->quantum;
    r->shares += m->share;
    if (r->cur == NULL) {
        m->ring_prev = m->ring_next = m;
        r->cur = m;
        return;
    }
    m->ring_next = r->cur;
    m->ring_prev = r->cur->ring_prev;
    r->cur->ring_prev->ring_next = m;
    r->cur->ring_prev = m;
}

static void deactivate(ring_t *r, member_t *m)
{
    m->active = 0;
    m->deficit = 0;
    m->visited = 0;
    r->active--;
    r->quanta -= m->quantum;
    r->shares -= m->share;
    if (m->ring_next == m) {
        r->cur = NULL;
    } else {
        m->ring_prev->ring_next = m->ring_next;
        m->ring_next->ring_prev = m->ring_prev;
        if (r->cur == m)
            r->cur = m->ring_next;
    }
    m->ring_next = m->ring_prev = NULL;
}

/* Sets a member's quantum and share, keeping its ring's sums. */
static void set_weights(ring_t *r, member_t *m, int64_t quantum, double share)
{
    if (m->active) {
        r->quanta += quantum - m->quantum;
        r->shares += share - m->share;
    }
    m->quantum = quantum;
    m->share = share;
}

/* The quantum a member gets on its visit: its own, or more when it has a guaranteed share, so
 * that while it is backlogged it gets at least that share of the ring:
 * q / (q + others) >= share  <=>  q >= share / (1 - share) x others. */
static int64_t visit_quantum(const ring_t *r, const member_t *m)
{
    if (m->share <= 0)
        return m->quantum;
    double others = (double)(r->quanta - m->quantum);
    double need = m->share / (1.0 - m->share) * others;
    return need > (double)m->quantum ? (int64_t)need + 1 : m->quantum;
}

static void advance(ring_t *r)
{
    r->cur->visited = 0;
    r->cur = r->cur->ring_next;
}

void sl_drr_node_init(sl_drr_node_t *node)
{
    *node = (sl_drr_node_t){.flow = -1};
}

int sl_drr_queued(const sl_drr_node_t *node)
{
    return node->flow >= 0;
}

sl_drr_node_t *sl_drr_push_at(sl_drr_t *d, const sl_drr_place_t *p, void *item, int front)
{
    sl_drr_node_t *n = malloc(sizeof *n);
    if (n == NULL)
        return NULL;
    sl_drr_node_init(n);
    if (sl_drr_push_node(d, p, n, item, front) != 0) {
        free(n);
        return NULL;
    }
    n->owned = 1;
    return n;
}

int sl_drr_push_node(sl_drr_t *d, const sl_drr_place_t *p, sl_drr_node_t *n, void *item, int front)
{
    if (p->flow < 0 || p->group < 0 || sl_drr_queued(n))
        return -1;
    group_t *g = get_group(d, p->group);
    flow_t *f = g != NULL ? get_flow(d, p->flow, g) : NULL;
    if (f == NULL || f->group != g)
        return -1; /* a flow belongs to one group for its whole life */
    double share = p->share > 0 ? (p->share < 0.99 ? p->share : 0.99) : 0;
    set_weights(&g->flows, &f->m, p->quantum > 0 ? p->quantum : 1, share);
    /* A group is guaranteed what its active flows are guaranteed (groups are classes: a
     * guaranteed tenant keeps its share whatever class its work runs in). */
    double group_share = g->flows.shares + (f->m.active ? 0 : share);
    set_weights(&d->top, &g->m, p->group_quantum > 0 ? p->group_quantum : 1,
                group_share < 0.99 ? group_share : 0.99);
    n->prev = n->next = NULL;
    n->flow = f->id;
    n->item = item;
    n->cost = p->cost > 0 ? p->cost : 1;
    n->key = p->key;
    if (f->head == NULL) {
        f->head = f->tail = n;
    } else if (front || n->key < f->head->key) {
        n->next = f->head;
        f->head->prev = n;
        f->head = n;
    } else {
        /* Earliest key first; equal keys keep their arrival order. Arrivals mostly come in
         * key order, so the walk from the tail is short. */
        sl_drr_node_t *after = f->tail;
        while (after->key > n->key)
            after = after->prev;
        n->prev = after;
        n->next = after->next;
        if (after->next != NULL)
            after->next->prev = n;
        else
            f->tail = n;
        after->next = n;
    }
    f->len++;
    g->len++;
    d->len++;
    if (!f->m.active) {
        activate(&g->flows, &f->m);
        d->active++;
    }
    if (!g->m.active)
        activate(&d->top, &g->m);
    return 0;
}

sl_drr_node_t *sl_drr_push(sl_drr_t *d, int flow, int64_t quantum, void *item, int64_t cost,
                           int front)
{
    sl_drr_place_t p = {.group = 0,
                        .group_quantum = 1,
                        .flow = flow,
                        .quantum = quantum,
                        .share = 0,
                        .cost = cost,
                        .key = 0};
    return sl_drr_push_at(d, &p, item, front);
}

/* The flow of group g whose head is served next within g (adding quanta as flows are
 * visited); NULL when g is empty. */
static flow_t *group_peek(group_t *g)
{
    ring_t *r = &g->flows;
    for (long guard = 0; r->cur != NULL && guard < 100000000L; guard++) {
        flow_t *f = (flow_t *)r->cur;
        if (!f->m.visited) {
            f->m.deficit += visit_quantum(r, &f->m);
            f->m.visited = 1;
        }
        if (f->head->cost <= f->m.deficit)
            return f;
        advance(r);
    }
    return NULL;
}

void *sl_drr_peek(sl_drr_t *d, int64_t *cost, int *flow)
{
    /* Each pass round a ring adds a quantum to every member, so the loops end; the bounds only
     * guard against a corrupted state. */
    for (long guard = 0; d->top.cur != NULL && guard < 100000000L; guard++) {
        group_t *g = (group_t *)d->top.cur;
        /* A group alone has nothing to share with: its deficit does not hold it back. */
        int alone = d->top.active == 1;
        if (alone)
            g->m.deficit = 0;
        else if (!g->m.visited) {
            g->m.deficit += visit_quantum(&d->top, &g->m);
            g->m.visited = 1;
        }
        flow_t *f = group_peek(g);
        if (f != NULL && (alone || f->head->cost <= g->m.deficit)) {
            if (cost != NULL)
                *cost = f->head->cost;
            if (flow != NULL)
                *flow = f->id;
            return f->head->item;
        }
        advance(&d->top);
    }
    return NULL;
}

static void unlink_node(sl_drr_t *d, sl_drr_node_t *n)
{
    flow_t *f = d->flows[n->flow];
    group_t *g = f->group;
    if (n->prev != NULL)
        n->prev->next = n->next;
    else
        f->head = n->next;
    if (n->next != NULL)
        n->next->prev = n->prev;
    else
        f->tail = n->prev;
    f->len--;
    g->len--;
    d->len--;
    if (n->owned)
        free(n);
    else
        sl_drr_node_init(n);
    if (f->head == NULL) {
        deactivate(&g->flows, &f->m);
        d->active--;
    }
    if (g->len == 0) {
        deactivate(&d->top, &g->m);
        g->flows.shares = 0; /* no drift from summing doubles */
    } else if (g->m.share != g->flows.shares) {
        set_weights(&d->top, &g->m, g->m.quantum,
                    g->flows.shares < 0.99 ? (g->flows.shares > 0 ? g->flows.shares : 0) : 0.99);
    }
}

void sl_drr_pop(sl_drr_t *d)
{
    if (d->top.cur == NULL)
        return;
    group_t *g = (group_t *)d->top.cur;
    flow_t *f = (flow_t *)g->flows.cur;
    if (f == NULL || f->head == NULL)
        return;
    f->m.deficit -= f->head->cost;
    g->m.deficit -= f->head->cost;
    unlink_node(d, f->head);
}

int sl_drr_beside(const sl_drr_t *d, int *flows, int max)
{
    if (d->top.cur == NULL)
        return 0;
    const ring_t *r = &((const group_t *)d->top.cur)->flows;
    int n = 0;
    for (const member_t *m = r->cur != NULL ? r->cur->ring_next : NULL;
         m != NULL && m != r->cur && n < max; m = m->ring_next)
        flows[n++] = ((const flow_t *)m)->id;
    return n;
}

/* flow's flow when it may be served beside the current flow (sl_drr_peek_beside), else NULL. */
static flow_t *beside_flow(const sl_drr_t *d, int flow)
{
    if (d->top.cur == NULL || flow < 0 || flow >= d->nflows || d->flows[flow] == NULL)
        return NULL;
    flow_t *f = d->flows[flow];
    const group_t *g = (const group_t *)d->top.cur;
    if (!f->m.active || f->group != g || &f->m == g->flows.cur || f->head == NULL)
        return NULL;
    if (f->m.deficit - f->head->cost < -DRR_BESIDE_DEBT_QUANTA * f->m.quantum)
        return NULL;
    return f;
}

void *sl_drr_peek_beside(const sl_drr_t *d, int flow, int64_t *cost)
{
    flow_t *f = beside_flow(d, flow);
    if (f == NULL)
        return NULL;
    if (cost != NULL)
        *cost = f->head->cost;
    return f->head->item;
}

void sl_drr_pop_beside(sl_drr_t *d, int flow)
{
    flow_t *f = beside_flow(d, flow);
    if (f == NULL)
        return;
    f->m.deficit -= f->head->cost;
    f->group->m.deficit -= f->head->cost;
    unlink_node(d, f->head);
}

/* Takes amount off m's deficit, within DRR_MAX_DEBT_QUANTA quanta either way. */
static void charge_member(member_t *m, int64_t amount)
{
    int64_t lo = -DRR_MAX_DEBT_QUANTA * m->quantum, hi = DRR_MAX_DEBT_QUANTA * m->quantum;
    int64_t v = m->deficit - amount;
    if (amount > 0 && v < lo)
        v = m->deficit < lo ? m->deficit : lo;
    if (amount < 0 && v > hi)
        v = m->deficit > hi ? m->deficit : hi;
    m->deficit = v;
}

void sl_drr_charge(sl_drr_t *d, int flow, int64_t amount)
{
    if (flow < 0 || flow >= d->nflows || d->flows[flow] == NULL || amount == 0)
        return;
    flow_t *f = d->flows[flow];
    if (!f->m.active)
        return;
    charge_member(&f->m, amount);
    if (f->group->m.active)
        charge_member(&f->group->m, amount);
}

void sl_drr_skip_group(sl_drr_t *d)
{
    if (d->top.cur == NULL)
        return;
    /* It keeps at most one quantum of credit for its next turn, so it cannot bank. */
    group_t *g = (group_t *)d->top.cur;
    if (g->m.deficit > g->m.quantum)
        g->m.deficit = g->m.quantum;
    advance(&d->top);
}

void sl_drr_skip(sl_drr_t *d)
{
    if (d->top.cur == NULL)
        return;
    group_t *g = (group_t *)d->top.cur;
    if (g->flows.cur != NULL) {
        g->flows.cur->deficit = 0;
        advance(&g->flows);
    }
    /* The group's turn ends too, so that a blocked flow cannot hold every other group up. */
    sl_drr_skip_group(d);
}

size_t sl_drr_group_len(const sl_drr_t *d, int group)
{
    if (group < 0 || group >= d->ngroups || d->groups[group] == NULL)
        return 0;
    return d->groups[group]->len;
}

void *sl_drr_flow_last(const sl_drr_t *d, int flow)
{
    if (flow < 0 || flow >= d->nflows || d->flows[flow] == NULL || d->flows[flow]->tail == NULL)
        return NULL;
    return d->flows[flow]->tail->item;
}

void sl_drr_remove(sl_drr_t *d, sl_drr_node_t *node)
{
    if (node != NULL && sl_drr_queued(node))
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
