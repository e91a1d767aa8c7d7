/* ledger.h - the capacity ledger: buckets, and all-or-nothing reservations across them.
 *
 * A bucket is a continuous token bucket that mirrors one limit of one scope (a deployment's
 * requests or tokens per minute, a tenant's token budget). Its level is what is left; it refills
 * at rate_per_ms up to capacity and may go negative (debt, from overage found at reconciliation),
 * which delays later admissions rather than being forgotten.
 *
 * An amount fits when level >= min(amount + margin, capacity). The margin keeps part of the
 * provider's burst unused, for the jitter between our decision and the provider's receipt; the
 * min() lets a request larger than the burst through when the bucket is full (it then goes into
 * debt), so a small limit never refuses its first request (LiteLLM #29193).
 *
 * Single-threaded: the scheduler's loop owns its ledger. Times are caller-supplied ms.
 */
#ifndef SL_LEDGER_H
#define SL_LEDGER_H

#include <stdint.h>

#include "err.h"

typedef struct sl_ledger sl_ledger_t;

typedef struct {
    int bucket;
    double amount;
} sl_charge_t;

typedef struct {
    int bucket;      /* the bucket that refused (the one with the longest wait) */
    int64_t wait_ms; /* when it will have room for its charge; INT64_MAX = never */
} sl_refusal_t;

/* Creates an empty ledger; NULL when out of memory. Free with sl_ledger_free. */
sl_ledger_t *sl_ledger_new(void);
void sl_ledger_free(sl_ledger_t *l);

/* Adds a bucket; id is copied (e.g. "deployment:sim-a:tpm"). capacity > 0, rate_per_ms >= 0,
 * 0 <= margin < capacity. It starts at level `level` as of now_ms. Returns its index, or -1 when
 * out of memory or the id exists. */
int sl_ledger_add(sl_ledger_t *l, const char *id, double capacity, double rate_per_ms,
                  double margin, double level, int64_t now_ms);
int sl_ledger_find(const sl_ledger_t *l, const char *id);
int sl_ledger_count(const sl_ledger_t *l);
const char *sl_ledger_id(const sl_ledger_t *l, int bucket);
double sl_ledger_capacity(const sl_ledger_t *l, int bucket);

/* Changes a bucket's limits at run time, keeping its level (clamped to the new capacity). */
void sl_ledger_set_limits(sl_ledger_t *l, int bucket, double capacity, double rate_per_ms,
                          double margin, int64_t now_ms);

/* The level of a bucket at now_ms (after refill). */
double sl_ledger_level(sl_ledger_t *l, int bucket, int64_t now_ms);
/* Sets a bucket's level (restore after restart, provider header clamps). */
void sl_ledger_set_level(sl_ledger_t *l, int bucket, double level, int64_t now_ms);

/* Milliseconds until amount fits in bucket (0 = now; INT64_MAX = never). */
int64_t sl_ledger_wait_ms(sl_ledger_t *l, int bucket, double amount, int64_t now_ms);

/* Reserves every charge or none. On SL_ENOROOM no bucket changed and *refusal (may be NULL)
 * names the bucket that refused with the longest wait. Charges naming the same bucket twice are
 * not supported (SL_EINVAL, nothing changed). */
sl_err_t sl_ledger_reserve(sl_ledger_t *l, const sl_charge_t *charges, int n, int64_t now_ms,
                           sl_refusal_t *refusal);

/* Gives back (amount > 0) or charges more (amount < 0) on one bucket, e.g. at reconciliation.
 * The level never rises above capacity. */
void sl_ledger_credit(sl_ledger_t *l, int bucket, double amount, int64_t now_ms);

#endif
