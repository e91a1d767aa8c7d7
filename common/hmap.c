/* hmap.c - open-addressing string map with backward-shift deletion (see hmap.h). */
#include "hmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Two pointers and no stored hash: a slot is 16 bytes, not 24, which at a million queued jobs
 * (the scheduler's jobs map, two million slots) is 16 MB. A probe compares the key itself (ids
 * and names, short); growing and deleting hash the keys they move again. */
typedef struct {
    char *key; /* NULL = empty slot */
    void *value;
} slot_t;

struct sl_hmap {
    slot_t *slots;
    size_t cap; /* power of two */
    size_t len;
    int borrowed; /* keys are the caller's (sl_hmap_new_borrowed), not copies */
};

/* FNV-1a, 64-bit: keys here are ids and names, short and not attacker-chosen in bulk. */
static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

sl_hmap_t *sl_hmap_new(void)
{
    sl_hmap_t *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->cap = 64;
    m->slots = calloc(m->cap, sizeof *m->slots);
    if (m->slots == NULL) {
        free(m);
        return NULL;
    }
    return m;
}

sl_hmap_t *sl_hmap_new_borrowed(void)
{
    sl_hmap_t *m = sl_hmap_new();
    if (m != NULL)
        m->borrowed = 1;
    return m;
}

void sl_hmap_free(sl_hmap_t *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->cap && !m->borrowed; i++)
        free(m->slots[i].key);
    free(m->slots);
    free(m);
}

static size_t find_slot(const sl_hmap_t *m, const char *key, uint64_t h)
{
    size_t mask = m->cap - 1;
    size_t i = (size_t)h & mask;
    while (m->slots[i].key != NULL && strcmp(m->slots[i].key, key) != 0)
        i = (i + 1) & mask;
    return i;
}

static sl_err_t grow(sl_hmap_t *m)
{
    size_t ncap = m->cap * 2;
    slot_t *ns = calloc(ncap, sizeof *ns);
    if (ns == NULL)
        return SL_ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].key == NULL)
            continue;
        size_t j = (size_t)hash_str(m->slots[i].key) & (ncap - 1);
        while (ns[j].key != NULL)
            j = (j + 1) & (ncap - 1);
        ns[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return SL_OK;
}

sl_err_t sl_hmap_put(sl_hmap_t *m, const char *key, void *value)
{
    if ((m->len + 1) * 4 > m->cap * 3 && grow(m) != SL_OK)
        return SL_ENOMEM;
    uint64_t h = hash_str(key);
    size_t i = find_slot(m, key, h);
    if (m->slots[i].key != NULL) {
        m->slots[i].value = value;
        if (m->borrowed)
            m->slots[i].key = (char *)key; /* the old key may go with the old value */
        return SL_OK;
    }
    char *copy = m->borrowed ? (char *)key : strdup(key);
    if (copy == NULL)
        return SL_ENOMEM;
    m->slots[i].key = copy;
    m->slots[i].value = value;
    m->len++;
    return SL_OK;
}

void *sl_hmap_get(const sl_hmap_t *m, const char *key)
{
    size_t i = find_slot(m, key, hash_str(key));
    return m->slots[i].key != NULL ? m->slots[i].value : NULL;
}

void *sl_hmap_del(sl_hmap_t *m, const char *key)
{
    size_t mask = m->cap - 1;
    size_t i = find_slot(m, key, hash_str(key));
    if (m->slots[i].key == NULL)
        return NULL;
    void *value = m->slots[i].value;
    if (!m->borrowed)
        free(m->slots[i].key);
    m->slots[i].key = NULL;
    m->len--;
    /* Backward-shift the following cluster so lookups never stop at the hole. */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (m->slots[j].key == NULL)
            break;
        size_t home = (size_t)hash_str(m->slots[j].key) & mask;
        /* Move slot j into the hole i when its home is not in the cyclic range (i, j]. */
        int in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!in_range) {
            m->slots[i] = m->slots[j];
            m->slots[j].key = NULL;
            i = j;
        }
    }
    return value;
}

size_t sl_hmap_len(const sl_hmap_t *m)
{
    return m->len;
}

void sl_hmap_each(const sl_hmap_t *m, void (*fn)(const char *key, void *value, void *arg),
                  void *arg)
{
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].key != NULL)
            fn(m->slots[i].key, m->slots[i].value, arg);
    }
}
