/* ledger.c - continuous token buckets with all-or-nothing reservations (see ledger.h). */
#include "ledger.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"

typedef struct {
    char *id;
    double capacity;
    double rate_per_ms;
    double margin;
    double level;
    int64_t updated_ms;
} bucket_t;

struct sl_ledger {
    bucket_t *buckets;
    int n, cap;
    sl_hmap_t *index; /* id -> bucket index + 1, so lookups stay O(1) at 100,000 tenants */
};

sl_ledger_t *sl_ledger_new(void)
{
    sl_ledger_t *l = calloc(1, sizeof *l);
    if (l == NULL)
        return NULL;
    l->index = sl_hmap_new();
    if (l->index == NULL) {
        free(l);
        return NULL;
    }
    return l;
}

void sl_ledger_free(sl_ledger_t *l)
{
    if (l == NULL)
        return;
    for (int i = 0; i < l->n; i++)
        free(l->buckets[i].id);
    free(l->buckets);
    sl_hmap_free(l->index);
    free(l);
}

int sl_ledger_find(const sl_ledger_t *l, const char *id)
{
    intptr_t v = (intptr_t)sl_hmap_get(l->index, id);
    return v > 0 ? (int)(v - 1) : -1;
}

int sl_ledger_add(sl_ledger_t *l, const char *id, double capacity, double rate_per_ms,
                  double margin, double level, int64_t now_ms)
{
    if (capacity <= 0 || rate_per_ms < 0 || margin < 0 || margin >= capacity ||
        sl_ledger_find(l, id) >= 0)
        return -1;
    if (l->n == l->cap) {
        int ncap = l->cap ? l->cap * 2 : 16;
        bucket_t *nb = realloc(l->buckets, (size_t)ncap * sizeof *nb);
        if (nb == NULL)
            return -1;
        l->buckets = nb;
        l->cap = ncap;
    }
    char *copy = strdup(id);
    if (copy == NULL || sl_hmap_put(l->index, id, (void *)(intptr_t)(l->n + 1)) != SL_OK) {
        free(copy);
        return -1;
    }
    bucket_t *b = &l->buckets[l->n];
    b->id = copy;
    b->capacity = capacity;
    b->rate_per_ms = rate_per_ms;
    b->margin = margin;
    b->level = level > capacity ? capacity : level;
    b->updated_ms = now_ms;
    return l->n++;
}

int sl_ledger_count(const sl_ledger_t *l)
{
    return l->n;
}

const char *sl_ledger_id(const sl_ledger_t *l, int bucket)
{
    return l->buckets[bucket].id;
}

double sl_ledger_capacity(const sl_ledger_t *l, int bucket)
{
    return l->buckets[bucket].capacity;
}

/* Brings a bucket's level up to now. A clock that steps back refills nothing. */
static void refill(bucket_t *b, int64_t now_ms)
{
    if (now_ms <= b->updated_ms)
        return;
    b->level += (double)(now_ms - b->updated_ms) * b->rate_per_ms;
    if (b->level > b->capacity)
        b->level = b->capacity;
    b->updated_ms = now_ms;
}

void sl_ledger_set_limits(sl_ledger_t *l, int bucket, double capacity, double rate_per_ms,
                          double margin, int64_t now_ms)
{
    bucket_t *b = &l->buckets[bucket];
    refill(b, now_ms);
    b->capacity = capacity;
    b->rate_per_ms = rate_per_ms;
    b->margin = margin < capacity ? margin : 0;
    if (b->level > capacity)
        b->level = capacity;
}

double sl_ledger_level(sl_ledger_t *l, int bucket, int64_t now_ms)
{
    refill(&l->buckets[bucket], now_ms);
    return l->buckets[bucket].level;
}

void sl_ledger_set_level(sl_ledger_t *l, int bucket, double level, int64_t now_ms)
{
    bucket_t *b = &l->buckets[bucket];
    b->level = level > b->capacity ? b->capacity : level;
    b->updated_ms = now_ms;
}

/* The level an amount needs (see ledger.h). */
static double needed(const bucket_t *b, double amount)
{
    double want = amount + b->margin;
    return want < b->capacity ? want : b->capacity;
}

int64_t sl_ledger_wait_ms(sl_ledger_t *l, int bucket, double amount, int64_t now_ms)
{
    bucket_t *b = &l->buckets[bucket];
    refill(b, now_ms);
    double missing = needed(b, amount) - b->level;
    if (missing <= 0)
        return 0;
    if (b->rate_per_ms <= 0)
        return INT64_MAX;
    double ms = missing / b->rate_per_ms;
    return ms >= 9e15 ? INT64_MAX : (int64_t)ms + 1;
}

sl_err_t sl_ledger_reserve(sl_ledger_t *l, const sl_charge_t *charges, int n, int64_t now_ms,
                           sl_refusal_t *refusal)
{
    /* First pass decides; nothing is written until every bucket said yes. */
    int64_t worst_wait = 0;
    int worst = -1;
    for (int i = 0; i < n; i++) {
        const sl_charge_t *c = &charges[i];
        if (c->bucket < 0 || c->bucket >= l->n || c->amount < 0)
            return SL_EINVAL;
        for (int j = 0; j < i; j++) {
            if (charges[j].bucket == c->bucket)
                return SL_EINVAL;
        }
        int64_t wait = sl_ledger_wait_ms(l, c->bucket, c->amount, now_ms);
        if (wait > 0 && (worst < 0 || wait > worst_wait)) {
            worst = c->bucket;
            worst_wait = wait;
        }
    }
    if (worst >= 0) {
        if (refusal != NULL) {
            refusal->bucket = worst;
            refusal->wait_ms = worst_wait;
        }
        return SL_ENOROOM;
    }
    for (int i = 0; i < n; i++)
        l->buckets[charges[i].bucket].level -= charges[i].amount;
    return SL_OK;
}

void sl_ledger_credit(sl_ledger_t *l, int bucket, double amount, int64_t now_ms)
{
    bucket_t *b = &l->buckets[bucket];
    refill(b, now_ms);
    b->level += amount;
    if (b->level > b->capacity)
        b->level = b->capacity;
}
