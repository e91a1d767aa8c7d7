/* hmap.h - a string-keyed hash map of pointers (open addressing, linear probing).
 *
 * Keys are copied (or, in a map made by sl_hmap_new_borrowed, borrowed); values are borrowed
 * (the map never frees them). Not thread-safe.
 */
#ifndef SL_HMAP_H
#define SL_HMAP_H

#include <stddef.h>

#include "err.h"

typedef struct sl_hmap sl_hmap_t;

sl_hmap_t *sl_hmap_new(void);
/* A map that keeps the caller's key pointers instead of copies: each key must stay unchanged
 * and alive until its entry is removed or replaced (a replacing put takes the new pointer), so
 * it suits keys stored in the values themselves. Saves a copy per entry. */
sl_hmap_t *sl_hmap_new_borrowed(void);
/* Frees the map and its key copies, not the values. NULL is a no-op. */
void sl_hmap_free(sl_hmap_t *m);
/* Inserts or replaces. SL_ENOMEM leaves the map as it was. */
sl_err_t sl_hmap_put(sl_hmap_t *m, const char *key, void *value);
void *sl_hmap_get(const sl_hmap_t *m, const char *key);
/* Removes key; returns its value or NULL. */
void *sl_hmap_del(sl_hmap_t *m, const char *key);
size_t sl_hmap_len(const sl_hmap_t *m);
/* Calls fn for every entry (do not modify the map inside). */
void sl_hmap_each(const sl_hmap_t *m, void (*fn)(const char *key, void *value, void *arg),
                  void *arg);

#endif
