/* idem.h - a bounded table of recently seen idempotency keys for the provider simulator.
 *
 * Maps a key string to a fixed-size value chosen at creation. When the table holds `capacity`
 * keys, adding one evicts the oldest (first in, first out), so memory stays bounded however many
 * keys clients send. Lookups and inserts are O(1) on average (chained hash over a ring).
 *
 * Not thread-safe: the caller serialises all calls on one table.
 */
#ifndef SL_SIM_IDEM_H
#define SL_SIM_IDEM_H

#include <stddef.h>

#include "err.h"

typedef struct sl_sim_idem sl_sim_idem_t;

/* Creates an empty table for up to `capacity` keys (0 = remember nothing) holding values of
 * value_size bytes (>= 1). Returns SL_EINVAL, SL_ENOMEM; *out is set only on success and is
 * freed with sl_sim_idem_free. */
sl_err_t sl_sim_idem_new(size_t capacity, size_t value_size, sl_sim_idem_t **out);

/* Frees the table and every key; NULL is a no-op. */
void sl_sim_idem_free(sl_sim_idem_t *idem);

/* Returns the value stored for key, or NULL. The pointer stays valid until the next
 * sl_sim_idem_put or sl_sim_idem_free; the table keeps ownership. */
const void *sl_sim_idem_get(const sl_sim_idem_t *idem, const char *key);

/* Stores a copy of key and of value_size bytes at value, replacing the value of an existing key
 * (which keeps its age) or evicting the oldest key when full. Returns SL_OK, or SL_ENOMEM with the
 * table unchanged. */
sl_err_t sl_sim_idem_put(sl_sim_idem_t *idem, const char *key, const void *value);

/* Number of keys held. */
size_t sl_sim_idem_count(const sl_sim_idem_t *idem);

#endif
