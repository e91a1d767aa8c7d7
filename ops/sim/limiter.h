/* limiter.h - the simulator's rate limiter: one continuous token bucket per dimension.
 *
 * The idea to hold first: a limit of L per minute is a bucket that refills at L / minute_ms per
 * millisecond up to a burst capacity C = L / slices_per_minute (at least one unit) and starts
 * full. A request of cost c passes iff every limited bucket holds at least min(c, C); it is then
 * charged c in full. So a request bigger than the burst passes only on a full bucket and drives
 * it negative, and that debt must refill before anything else passes. This is how OpenAI says it
 * enforces per-minute limits over shorter slices ("60,000 RPM may be enforced as 1,000 requests
 * per second").
 *
 * Two dimensions, requests (cost 1 per request) and tokens; a limit of 0 means unlimited and that
 * bucket always passes. Admission is all-or-nothing across both.
 *
 * Levels are exact integers in units of 1/minute_ms of a request or token, so refill over any
 * split of time is exact and a decision never flips on a rounding error.
 *
 * Not thread-safe: the caller serialises all calls on one limiter. Times are caller-supplied
 * milliseconds on any monotonic clock; a time earlier than the last one seen counts as no time.
 */
#ifndef SL_SIM_LIMITER_H
#define SL_SIM_LIMITER_H

#include <stdint.h>

#include "err.h"

typedef enum { SL_SIM_DIM_REQUESTS = 0, SL_SIM_DIM_TOKENS = 1, SL_SIM_DIM_COUNT_ } sl_sim_dim_t;

typedef struct sl_sim_limiter sl_sim_limiter_t;

/* Largest per-minute limit and minute length accepted; together they keep every level within
 * int64_t. For the same reason a cost above the whole per-minute limit is charged as limit + 1;
 * the simulator refuses such requests before asking ("Request too large"). */
#define SL_SIM_LIMIT_MAX 10000000000LL /* 1e10 per minute */
#define SL_SIM_MINUTE_MS_MAX 3600000LL /* one hour */

/* Creates a limiter with both buckets full at now_ms. rpm/tpm: per-minute limits, 0 = unlimited;
 * slices_per_minute >= 1; minute_ms >= 1 (the length of a simulated minute).
 * Returns SL_EINVAL for out-of-range arguments, SL_ENOMEM; *out is set only on success and is
 * freed with sl_sim_limiter_free. */
sl_err_t sl_sim_limiter_new(int64_t rpm, int64_t tpm, int64_t slices_per_minute, int64_t minute_ms,
                            int64_t now_ms, sl_sim_limiter_t **out);

/* Frees lim; NULL is a no-op. */
void sl_sim_limiter_free(sl_sim_limiter_t *lim);

/* Tries to admit one request costing `tokens` (>= 0) tokens at now_ms.
 * Returns 1 when admitted: both buckets are charged (1 request, `tokens` tokens).
 * Returns 0 when refused: nothing is charged; *refused_dim is the dimension that refused (when
 * both do, the one that needs longer) and *wait_ms (>= 1) the milliseconds until that bucket
 * holds enough for this request. Either output pointer may be NULL. */
int sl_sim_limiter_admit(sl_sim_limiter_t *lim, int64_t tokens, int64_t now_ms,
                         sl_sim_dim_t *refused_dim, int64_t *wait_ms);

/* Charges one request to the requests bucket without any check (it may go negative). Used when
 * refused requests are configured to count against RPM, as OpenAI documents. */
void sl_sim_limiter_charge_request(sl_sim_limiter_t *lim, int64_t now_ms);

/* The per-minute limit of dim; 0 = unlimited. */
int64_t sl_sim_limiter_limit(const sl_sim_limiter_t *lim, sl_sim_dim_t dim);

/* Whole units left in dim's bucket at now_ms: floor of the level, never below 0. 0 when
 * unlimited. */
int64_t sl_sim_limiter_remaining(const sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t now_ms);

/* Milliseconds (rounded up) until dim's bucket is full again at now_ms; 0 when full or
 * unlimited. */
int64_t sl_sim_limiter_reset_ms(const sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t now_ms);

/* The exact level of dim's bucket at now_ms in units (may be negative: debt); for tests and
 * diagnostics. 0 when unlimited. */
double sl_sim_limiter_level(const sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t now_ms);

/* The burst capacity of dim's bucket in units (limit / slices, at least 1); 0 when unlimited. */
double sl_sim_limiter_capacity(const sl_sim_limiter_t *lim, sl_sim_dim_t dim);

#endif
