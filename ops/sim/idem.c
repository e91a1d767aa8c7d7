/* idem.c - bounded FIFO table of idempotency keys (see idem.h).
 *
 * Entries live in slots 0..capacity-1, filled in order and then reused in the same order, so the
 * next slot to reuse is always the oldest key. Each slot is also on a singly linked chain of its
 * hash bucket (indices, not pointers, so the slot arrays can grow with realloc).
 */
#include "idem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NO_SLOT UINT32_MAX

struct sl_sim_idem {
    size_t capacity;
    size_t value_size;
    size_t count;     /* slots in use: 0..count-1 */
    size_t allocated; /* slots allocated (grows up to capacity) */
    size_t oldest;    /* once full, the slot to reuse next */
    uint32_t *heads;  /* per hash bucket: first slot or NO_SLOT */
    size_t mask;      /* bucket count - 1 */
    char **keys;
    uint64_t *hashes;
    uint32_t *next;
    unsigned char *values;
};

/* FNV-1a: short keys, no adversary worth a keyed hash in a test simulator. */
static uint64_t hash_key(const char *key)
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        h ^= *p;
        h *= 1099511628211ULL;
    }
    return h;
}

sl_err_t sl_sim_idem_new(size_t capacity, size_t value_size, sl_sim_idem_t **out)
{
    *out = NULL;
    if (value_size == 0 || capacity >= NO_SLOT)
        return SL_EINVAL;
    sl_sim_idem_t *idem = calloc(1, sizeof *idem);
    if (idem == NULL)
        return SL_ENOMEM;
    idem->capacity = capacity;
    idem->value_size = value_size;
    size_t buckets = 16;
    while (buckets < capacity)
        buckets *= 2;
    idem->mask = buckets - 1;
    idem->heads = malloc(buckets * sizeof *idem->heads);
    if (idem->heads == NULL) {
        free(idem);
        return SL_ENOMEM;
    }
    for (size_t i = 0; i < buckets; i++)
        idem->heads[i] = NO_SLOT;
    *out = idem;
    return SL_OK;
}

void sl_sim_idem_free(sl_sim_idem_t *idem)
{
    if (idem == NULL)
        return;
    for (size_t i = 0; i < idem->count; i++)
        free(idem->keys[i]);
    free(idem->keys);
    free(idem->hashes);
    free(idem->next);
    free(idem->values);
    free(idem->heads);
    free(idem);
}

static size_t find_slot(const sl_sim_idem_t *idem, const char *key, uint64_t hash)
{
    for (uint32_t s = idem->heads[hash & idem->mask]; s != NO_SLOT; s = idem->next[s]) {
        if (idem->hashes[s] == hash && strcmp(idem->keys[s], key) == 0)
            return s;
    }
    return NO_SLOT;
}

const void *sl_sim_idem_get(const sl_sim_idem_t *idem, const char *key)
{
    size_t s = find_slot(idem, key, hash_key(key));
    return s == NO_SLOT ? NULL : idem->values + s * idem->value_size;
}

/* Grows the slot arrays to hold at least one more slot. Leaves the table as it was on failure. */
static sl_err_t grow(sl_sim_idem_t *idem)
{
    size_t want = idem->allocated == 0 ? 64 : idem->allocated * 2;
    if (want > idem->capacity)
        want = idem->capacity;
    /* Each realloc that succeeds is kept even if a later one fails: the arrays are only ever
     * bigger than `allocated` says, never inconsistent. */
    char **keys = realloc(idem->keys, want * sizeof *keys);
    if (keys == NULL)
        return SL_ENOMEM;
    idem->keys = keys;
    uint64_t *hashes = realloc(idem->hashes, want * sizeof *hashes);
    if (hashes == NULL)
        return SL_ENOMEM;
    idem->hashes = hashes;
    uint32_t *next = realloc(idem->next, want * sizeof *next);
    if (next == NULL)
        return SL_ENOMEM;
    idem->next = next;
    unsigned char *values = realloc(idem->values, want * idem->value_size);
    if (values == NULL)
        return SL_ENOMEM;
    idem->values = values;
    idem->allocated = want;
    return SL_OK;
}

static void unlink_slot(sl_sim_idem_t *idem, size_t slot)
{
    uint32_t *link = &idem->heads[idem->hashes[slot] & idem->mask];
    while (*link != slot)
        link = &idem->next[*link];
    *link = idem->next[slot];
}

sl_err_t sl_sim_idem_put(sl_sim_idem_t *idem, const char *key, const void *value)
{
    if (idem->capacity == 0)
        return SL_OK;
    uint64_t hash = hash_key(key);
    size_t slot = find_slot(idem, key, hash);
    if (slot != NO_SLOT) {
        memcpy(idem->values + slot * idem->value_size, value, idem->value_size);
        return SL_OK;
    }
    char *copy = strdup(key);
    if (copy == NULL)
        return SL_ENOMEM;
    if (idem->count < idem->capacity) {
        if (idem->count == idem->allocated && grow(idem) != SL_OK) {
            free(copy);
            return SL_ENOMEM;
        }
        slot = idem->count++;
    } else {
        slot = idem->oldest;
        idem->oldest = (idem->oldest + 1) % idem->capacity;
        unlink_slot(idem, slot);
        free(idem->keys[slot]);
    }
    idem->keys[slot] = copy;
    idem->hashes[slot] = hash;
    memcpy(idem->values + slot * idem->value_size, value, idem->value_size);
    uint32_t *head = &idem->heads[hash & idem->mask];
    idem->next[slot] = *head;
    *head = (uint32_t)slot;
    return SL_OK;
}

size_t sl_sim_idem_count(const sl_sim_idem_t *idem)
{
    return idem->count;
}
