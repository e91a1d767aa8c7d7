/* grants.c - capacity leases between sharded schedulers (see grants.h). */
#include "grants.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"

/* The longest message folded: a report or table of every shared bucket fits far below. */
#define MAX_MESSAGE (1 << 20)
/* Grants sent and not yet acknowledged, kept as a decreasing run (see unacked_t). */
#define UNACKED 8
/* Weights above this are not believed (a tenant's weight is at most 10^6). */
#define MAX_WEIGHT 1e12

/* The grants a shard was sent after the last table it acknowledged, as the decreasing run of
 * their suffix maxima: x[0] is the largest grant it may be enforcing without having said so. */
typedef struct {
    int n;
    int64_t key[UNACKED];
    double x[UNACKED];
} unacked_t;

typedef struct {
    double weight, want, held, used; /* its newest report */
    double granted;                  /* the newest grant */
    unacked_t un;
    /* Learned from a table's "departed" part (a shard silent before this view heard it): it
     * holds `left` until until_ms. */
    double left;
    int64_t until_ms;
} slot_t;

typedef struct {
    char id[SL_GRANTS_ID_MAX];
    int64_t seq;      /* its newest report's */
    int64_t heard_ms; /* when it was sent (at most now) */
    int64_t ack;      /* the newest table it applied (table key) */
    int left;         /* it said it stopped: it enforces nothing from its last report on */
    slot_t *slot;     /* nb */
} shard_t;

struct sl_grants {
    int nb;
    char **ids;
    int64_t *release_ms;
    int64_t max_release_ms;
    sl_hmap_t *index; /* bucket id -> index + 1 */
    int64_t lease_ms;
    shard_t *shards[SL_GRANTS_MAX_SHARDS];
    int n;
    int64_t epoch, seq; /* the newest table's */
    int64_t self_ack;   /* the newest table this scheduler applied as a shard (table key) */
};

/* A table's place in the order of all tables: its epoch, then its sequence number. */
static int64_t table_key(int64_t epoch, int64_t seq)
{
    return epoch * ((int64_t)1 << 32) + (seq & 0xffffffff);
}

sl_grants_t *sl_grants_new(const char *const *ids, const int64_t *release_ms, int nb,
                           int64_t lease_ms)
{
    sl_grants_t *g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    g->nb = nb;
    g->lease_ms = lease_ms;
    g->self_ack = -1;
    g->ids = calloc((size_t)(nb > 0 ? nb : 1), sizeof *g->ids);
    g->release_ms = calloc((size_t)(nb > 0 ? nb : 1), sizeof *g->release_ms);
    g->index = sl_hmap_new_borrowed();
    if (g->ids == NULL || g->release_ms == NULL || g->index == NULL) {
        sl_grants_free(g);
        return NULL;
    }
    for (int b = 0; b < nb; b++) {
        g->ids[b] = strdup(ids[b]);
        g->release_ms[b] = release_ms[b] > 0 ? release_ms[b] : 0;
        if (g->release_ms[b] > g->max_release_ms)
            g->max_release_ms = g->release_ms[b];
        if (g->ids[b] == NULL ||
            sl_hmap_put(g->index, g->ids[b], (void *)(intptr_t)(b + 1)) != SL_OK) {
            sl_grants_free(g);
            return NULL;
        }
    }
    return g;
}

static void shard_free(shard_t *s)
{
    if (s != NULL)
        free(s->slot);
    free(s);
}

void sl_grants_free(sl_grants_t *g)
{
    if (g == NULL)
        return;
    for (int b = 0; g->ids != NULL && b < g->nb; b++)
        free(g->ids[b]);
    free(g->ids);
    free(g->release_ms);
    sl_hmap_free(g->index);
    for (int i = 0; i < g->n; i++)
        shard_free(g->shards[i]);
    free(g);
}

int sl_grants_count(const sl_grants_t *g)
{
    return g->nb;
}

const char *sl_grants_id(const sl_grants_t *g, int b)
{
    return g->ids[b];
}

const char *const *sl_grants_ids(const sl_grants_t *g)
{
    return (const char *const *)g->ids;
}

int sl_grants_find(const sl_grants_t *g, const char *id)
{
    intptr_t v = (intptr_t)sl_hmap_get(g->index, id);
    return v > 0 ? (int)(v - 1) : -1;
}

int64_t sl_grants_epoch(const sl_grants_t *g)
{
    return g->epoch;
}

/* ---- what a shard holds ---- */

static void unacked_add(unacked_t *u, int64_t key, double x)
{
    while (u->n > 0 && u->x[u->n - 1] <= x)
        u->n--;
    if (u->n == UNACKED) {
        /* The last two become one: the later key with the larger grant (it only overstates). */
        u->key[u->n - 2] = u->key[u->n - 1];
        u->n--;
    }
    u->key[u->n] = key;
    u->x[u->n] = x;
    u->n++;
}

static void unacked_ack(unacked_t *u, int64_t ack)
{
    int k = 0;
    while (k < u->n && u->key[k] <= ack)
        k++;
    if (k > 0) {
        memmove(u->key, u->key + k, (size_t)(u->n - k) * sizeof u->key[0]);
        memmove(u->x, u->x + k, (size_t)(u->n - k) * sizeof u->x[0]);
        u->n -= k;
    }
}

static double hold_of(const slot_t *sl)
{
    double h = sl->granted;
    if (sl->held > h)
        h = sl->held;
    if (sl->used > h)
        h = sl->used;
    if (sl->un.n > 0 && sl->un.x[0] > h)
        h = sl->un.x[0];
    if (sl->left > h)
        h = sl->left;
    return h;
}

static int live(const sl_grants_t *g, const shard_t *s, int64_t now_ms)
{
    return !s->left && s->heard_ms >= now_ms - g->lease_ms;
}

/* Whether a shard no longer live still holds bucket b: for its lease, then as long as the
 * bucket counts what it admitted. */
static int64_t counts_until(const sl_grants_t *g, const shard_t *s, int b)
{
    /* One that left enforced nothing from its last report: only its use still counts. */
    int64_t until = s->heard_ms + (s->left ? 0 : g->lease_ms) + g->release_ms[b];
    return s->slot[b].until_ms > until ? s->slot[b].until_ms : until;
}

static int counts(const sl_grants_t *g, const shard_t *s, int b, int64_t now_ms)
{
    return now_ms < counts_until(g, s, b);
}

int sl_grants_live(const sl_grants_t *g, int64_t now_ms)
{
    int n = 0;
    for (int i = 0; i < g->n; i++)
        n += live(g, g->shards[i], now_ms);
    return n;
}

double sl_grants_held(const sl_grants_t *g, int b, int64_t now_ms)
{
    double sum = 0;
    for (int i = 0; i < g->n; i++)
        if (counts(g, g->shards[i], b, now_ms))
            sum += hold_of(&g->shards[i]->slot[b]);
    return sum;
}

/* Shards gone for longer than any bucket counts them are forgotten. */
static void forget_gone(sl_grants_t *g, int64_t now_ms)
{
    int k = 0;
    for (int i = 0; i < g->n; i++) {
        shard_t *s = g->shards[i];
        int gone = now_ms >= s->heard_ms + g->lease_ms + g->max_release_ms;
        for (int b = 0; gone && b < g->nb; b++)
            gone = now_ms >= s->slot[b].until_ms;
        if (gone)
            shard_free(s);
        else
            g->shards[k++] = s;
    }
    g->n = k;
}

static shard_t *shard_find(sl_grants_t *g, const char *id, int create)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->shards[i]->id, id) == 0)
            return g->shards[i];
    if (!create || g->n == SL_GRANTS_MAX_SHARDS || strlen(id) >= SL_GRANTS_ID_MAX)
        return NULL;
    shard_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->slot = calloc((size_t)(g->nb > 0 ? g->nb : 1), sizeof *s->slot);
    if (s->slot == NULL) {
        free(s);
        return NULL;
    }
    snprintf(s->id, sizeof s->id, "%s", id);
    s->seq = -1;
    s->ack = -1;
    g->shards[g->n++] = s;
    return s;
}

/* ---- the division ---- */

void sl_grants_divide(int n, const double *w, const double *want, const double *hold, double others,
                      double *out)
{
    /* Weighted max-min: every shard not yet at its want gets its weight's part of what is
     * left; those a part would take past their want get their want, and the rest is divided
     * again. out holds the targets first. */
    double left = others < 1.0 ? 1.0 - others : 0.0;
    int open = 0;
    for (int i = 0; i < n; i++) {
        out[i] = 0;
        open += want[i] > 0;
    }
    int *done = calloc((size_t)(n > 0 ? n : 1), sizeof *done);
    if (done == NULL) {
        /* No memory: nobody gets more than it holds. */
        for (int i = 0; i < n; i++)
            out[i] = 0;
        return;
    }
    for (int i = 0; i < n; i++)
        done[i] = !(want[i] > 0);
    while (open > 0 && left > 1e-12) {
        double wsum = 0;
        for (int i = 0; i < n; i++)
            if (!done[i])
                wsum += w[i];
        int capped = 0;
        for (int i = 0; i < n; i++) {
            if (done[i] || out[i] + left * w[i] / wsum < want[i])
                continue;
            left -= want[i] - out[i];
            out[i] = want[i];
            done[i] = 1;
            open--;
            capped++;
        }
        if (capped == 0) {
            for (int i = 0; i < n; i++)
                if (!done[i])
                    out[i] += left * w[i] / wsum;
            break;
        }
    }
    free(done);
    /* Then what may be granted now: down to the target at once; up from the hold only out of
     * what nobody holds. */
    double free_share = 1.0 - others, lack = 0;
    for (int i = 0; i < n; i++) {
        free_share -= hold[i];
        if (out[i] > hold[i])
            lack += out[i] - hold[i];
    }
    double k = lack > 0 && free_share < lack ? (free_share > 0 ? free_share / lack : 0) : 1;
    for (int i = 0; i < n; i++)
        if (out[i] > hold[i])
            out[i] = hold[i] + (out[i] - hold[i]) * k;
}

char *sl_grants_round(sl_grants_t *g, const char *self, int64_t epoch, int64_t now_ms,
                      sl_grant_t *mine, int *is_mine)
{
    if (is_mine != NULL)
        *is_mine = 0;
    forget_gone(g, now_ms);
    shard_t *lv[SL_GRANTS_MAX_SHARDS];
    int n = 0;
    for (int i = 0; i < g->n; i++)
        if (live(g, g->shards[i], now_ms))
            lv[n++] = g->shards[i];
    if (n == 0)
        return NULL;
    if (epoch != g->epoch)
        g->seq = 0;
    g->epoch = epoch;
    g->seq++;
    int64_t key = table_key(epoch, g->seq);
    double w[SL_GRANTS_MAX_SHARDS], want[SL_GRANTS_MAX_SHARDS], hold[SL_GRANTS_MAX_SHARDS],
        out[SL_GRANTS_MAX_SHARDS];
    json_t *root = json_object(), *shards = json_object();
    json_t *per[SL_GRANTS_MAX_SHARDS];
    int oom = root == NULL || shards == NULL;
    for (int i = 0; i < n; i++) {
        per[i] = json_object();
        oom |= per[i] == NULL;
    }
    for (int b = 0; !oom && b < g->nb; b++) {
        double others = 0;
        for (int i = 0; i < g->n; i++)
            if (!live(g, g->shards[i], now_ms) && counts(g, g->shards[i], b, now_ms))
                others += hold_of(&g->shards[i]->slot[b]);
        for (int i = 0; i < n; i++) {
            const slot_t *sl = &lv[i]->slot[b];
            w[i] = sl->weight > 0 ? sl->weight : 1.0;
            want[i] = sl->want;
            hold[i] = hold_of(sl);
        }
        sl_grants_divide(n, w, want, hold, others, out);
        for (int i = 0; i < n; i++) {
            slot_t *sl = &lv[i]->slot[b];
            sl->granted = out[i];
            unacked_add(&sl->un, key, out[i]);
            if (mine != NULL && strcmp(lv[i]->id, self) == 0)
                mine->share[b] = out[i];
            oom |= json_object_set_new(per[i], g->ids[b], json_real(out[i])) != 0;
        }
    }
    for (int i = 0; !oom && mine != NULL && i < n; i++) {
        if (strcmp(lv[i]->id, self) != 0)
            continue;
        /* The coordinator is a shard too: its own grant applies now. */
        mine->epoch = epoch;
        mine->echo = lv[i]->seq;
        mine->lease_ms = g->lease_ms;
        g->self_ack = key;
        if (is_mine != NULL)
            *is_mine = 1;
    }
    for (int i = 0; !oom && i < n; i++) {
        json_t *e = json_pack("{s:I, s:o}", "echo", (json_int_t)lv[i]->seq, "b", per[i]);
        per[i] = NULL;
        oom |= e == NULL || json_object_set_new(shards, lv[i]->id, e) != 0;
    }
    for (int i = 0; i < n; i++)
        json_decref(per[i]);
    /* What silent shards still hold, and until when: a scheduler that reads only the newest
     * tables (a new coordinator started long after a shard died) still counts it. */
    json_t *departed = json_object();
    oom |= departed == NULL;
    for (int i = 0; !oom && i < g->n; i++) {
        shard_t *s = g->shards[i];
        if (live(g, s, now_ms))
            continue;
        json_t *b = json_object();
        oom |= b == NULL;
        for (int k = 0; !oom && k < g->nb; k++)
            if (counts(g, s, k, now_ms))
                oom |= json_object_set_new(b, g->ids[k],
                                           json_pack("[f,I]", hold_of(&s->slot[k]),
                                                     (json_int_t)counts_until(g, s, k))) != 0;
        if (!oom && json_object_size(b) > 0)
            oom |= json_object_set_new(departed, s->id, json_pack("{s:o}", "b", b)) != 0;
        else
            json_decref(b);
    }
    char *text = NULL;
    if (!oom) {
        oom |= json_object_set_new(root, "v", json_integer(1)) != 0;
        oom |= json_object_set_new(root, "type", json_string("grants")) != 0;
        oom |= json_object_set_new(root, "coordinator", json_string(self)) != 0;
        oom |= json_object_set_new(root, "epoch", json_integer(epoch)) != 0;
        oom |= json_object_set_new(root, "seq", json_integer(g->seq)) != 0;
        oom |= json_object_set_new(root, "at", json_integer(now_ms)) != 0;
        oom |= json_object_set_new(root, "lease_ms", json_integer(g->lease_ms)) != 0;
        oom |= json_object_set(root, "shards", shards) != 0;
        oom |= json_object_set(root, "departed", departed) != 0;
        if (!oom)
            text = json_dumps(root, JSON_COMPACT);
    }
    json_decref(departed);
    json_decref(shards);
    json_decref(root);
    return text;
}

char *sl_grants_report(const sl_grants_t *g, const char *self, int64_t seq, int64_t now_ms,
                       const sl_want_t *d, int left)
{
    json_t *b = json_object();
    int oom = b == NULL;
    for (int i = 0; !oom && i < g->nb; i++)
        oom |= json_object_set_new(
                   b, g->ids[i],
                   json_pack("[f,f,f,f]", d[i].weight, d[i].want, d[i].held, d[i].used)) != 0;
    json_t *root = oom ? NULL
                       : json_pack("{s:i, s:s, s:s, s:I, s:I, s:I, s:o}", "v", 1, "type", "report",
                                   "shard", self, "seq", (json_int_t)seq, "at", (json_int_t)now_ms,
                                   "ack", (json_int_t)g->self_ack, "b", b);
    if (root == NULL) {
        json_decref(b);
        return NULL;
    }
    if (left && json_object_set_new(root, "left", json_true()) != 0) {
        json_decref(root);
        return NULL;
    }
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

/* ---- reading messages ---- */

/* A number in [lo, hi]; -1 (out untouched) for anything else. */
static int number(json_t *v, double lo, double hi, double *out)
{
    if (!json_is_number(v))
        return -1;
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

static int integer(json_t *obj, const char *key, int64_t lo, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo)
        return -1;
    *out = json_integer_value(v);
    return 0;
}

static int fold_report(sl_grants_t *g, json_t *root, int64_t now_ms)
{
    const char *id = json_string_value(json_object_get(root, "shard"));
    json_t *b = json_object_get(root, "b");
    int64_t seq, at, ack;
    if (id == NULL || id[0] == '\0' || !json_is_object(b) || integer(root, "seq", 0, &seq) != 0 ||
        integer(root, "at", 0, &at) != 0 || integer(root, "ack", -1, &ack) != 0)
        return 0;
    if (at > now_ms)
        at = now_ms;
    if (at < now_ms - g->lease_ms - g->max_release_ms)
        return 0; /* what it held counts nowhere any more */
    json_t *left = json_object_get(root, "left");
    if (left != NULL && !json_is_boolean(left))
        return 0;
    /* Checked whole before any of it is taken (or a place made for its shard). */
    const char *key;
    json_t *v;
    json_object_foreach(b, key, v)
    {
        double x;
        if (!json_is_array(v) || json_array_size(v) != 4)
            return 0;
        static const double hi[4] = {MAX_WEIGHT, 1, 1, 1e3};
        for (size_t i = 0; i < 4; i++)
            if (number(json_array_get(v, i), 0, hi[i], &x) != 0)
                return 0;
    }
    shard_t *s = shard_find(g, id, 1);
    if (s == NULL || seq <= s->seq || s->left)
        return 0;
    s->seq = seq;
    s->heard_ms = at;
    s->left = json_is_true(left);
    if (ack > s->ack)
        s->ack = ack;
    for (int i = 0; i < g->nb; i++) {
        /* A bucket the report does not name is one the shard does not share: it holds none. */
        slot_t *sl = &s->slot[i];
        sl->weight = sl->want = sl->held = sl->used = 0;
        unacked_ack(&sl->un, s->ack);
        if (s->left) {
            /* It applies no table from now on, whatever it was sent. */
            sl->un.n = 0;
            sl->granted = 0;
        }
    }
    json_object_foreach(b, key, v)
    {
        int i = sl_grants_find(g, key);
        if (i < 0)
            continue;
        slot_t *sl = &s->slot[i];
        number(json_array_get(v, 0), 0, MAX_WEIGHT, &sl->weight);
        number(json_array_get(v, 1), 0, 1, &sl->want);
        number(json_array_get(v, 2), 0, 1, &sl->held);
        number(json_array_get(v, 3), 0, 1e3, &sl->used);
        if (s->left)
            sl->weight = sl->want = sl->held = 0;
    }
    return 1;
}

static int fold_table(sl_grants_t *g, json_t *root, int64_t now_ms, const char *self,
                      sl_grant_t *mine, int *is_mine)
{
    json_t *shards = json_object_get(root, "shards");
    int64_t epoch, seq, at, lease_ms;
    if (!json_is_object(shards) || integer(root, "epoch", 1, &epoch) != 0 ||
        integer(root, "seq", 1, &seq) != 0 || integer(root, "at", 0, &at) != 0 ||
        integer(root, "lease_ms", 1, &lease_ms) != 0 || seq > 0xffffffff)
        return 0;
    if (table_key(epoch, seq) <= table_key(g->epoch, g->seq))
        return 0; /* an older coordinator's, or one already folded (its own, a replay) */
    if (at > now_ms)
        at = now_ms;
    const char *id;
    json_t *e;
    json_object_foreach(shards, id, e)
    {
        json_t *b = json_object_get(e, "b");
        int64_t echo;
        if (!json_is_object(b) || integer(e, "echo", -1, &echo) != 0)
            return 0;
        const char *key;
        json_t *v;
        double x;
        json_object_foreach(b, key, v) if (number(v, 0, 1, &x) != 0) return 0;
    }
    json_t *departed = json_object_get(root, "departed");
    if (departed != NULL && !json_is_object(departed))
        return 0;
    json_object_foreach(departed, id, e)
    {
        json_t *b = json_object_get(e, "b");
        if (!json_is_object(b))
            return 0;
        const char *key;
        json_t *v;
        double x;
        json_object_foreach(b, key, v)
        {
            if (!json_is_array(v) || json_array_size(v) != 2 ||
                number(json_array_get(v, 0), 0, 1e3, &x) != 0 ||
                !json_is_integer(json_array_get(v, 1)))
                return 0;
        }
    }
    g->epoch = epoch;
    g->seq = seq;
    int64_t tkey = table_key(epoch, seq);
    json_object_foreach(shards, id, e)
    {
        /* A shard never heard from here (reports read before this view began) holds its grant
         * from the table's time. */
        shard_t *s = shard_find(g, id, 1);
        if (s == NULL)
            continue;
        if (s->seq < 0 && s->heard_ms < at)
            s->heard_ms = at;
        json_t *b = json_object_get(e, "b");
        const char *key;
        json_t *v;
        json_object_foreach(b, key, v)
        {
            int i = sl_grants_find(g, key);
            if (i < 0)
                continue;
            double x = 0;
            number(v, 0, 1, &x);
            s->slot[i].granted = x;
            unacked_add(&s->slot[i].un, tkey, x);
        }
        if (self != NULL && strcmp(id, self) == 0 && mine != NULL && is_mine != NULL) {
            int64_t echo = -1;
            integer(e, "echo", -1, &echo);
            mine->epoch = epoch;
            mine->echo = echo;
            mine->lease_ms = lease_ms < g->lease_ms ? lease_ms : g->lease_ms;
            for (int i = 0; i < g->nb; i++) {
                json_t *v2 = json_object_get(b, g->ids[i]);
                mine->share[i] = -1;
                if (v2 != NULL)
                    number(v2, 0, 1, &mine->share[i]);
            }
            g->self_ack = tkey;
            *is_mine = 1;
        }
    }
    json_object_foreach(departed, id, e)
    {
        /* Not one this view hears from itself: what the table says it holds, until when. */
        shard_t *s = shard_find(g, id, 1);
        if (s == NULL || live(g, s, now_ms))
            continue;
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(e, "b"), key, v)
        {
            int i = sl_grants_find(g, key);
            if (i < 0)
                continue;
            double left = json_number_value(json_array_get(v, 0));
            int64_t until = json_integer_value(json_array_get(v, 1));
            /* At most as far ahead as the longest window: a table cannot pin capacity longer. */
            if (until > now_ms + g->lease_ms + g->release_ms[i])
                until = now_ms + g->lease_ms + g->release_ms[i];
            if (left > s->slot[i].left)
                s->slot[i].left = left;
            if (until > s->slot[i].until_ms)
                s->slot[i].until_ms = until;
        }
    }
    return 2;
}

int sl_grants_fold(sl_grants_t *g, const char *json, size_t len, int64_t now_ms, const char *self,
                   sl_grant_t *mine, int *is_mine)
{
    if (is_mine != NULL)
        *is_mine = 0;
    if (json == NULL || len == 0 || len > MAX_MESSAGE)
        return 0;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
    int kind = 0;
    if (json_is_object(root) && json_integer_value(json_object_get(root, "v")) == 1) {
        const char *type = json_string_value(json_object_get(root, "type"));
        if (type != NULL && strcmp(type, "report") == 0)
            kind = fold_report(g, root, now_ms);
        else if (type != NULL && strcmp(type, "grants") == 0)
            kind = fold_table(g, root, now_ms, self, mine, is_mine);
    }
    json_decref(root);
    return kind;
}
