/* limiter.h - the simulator's rate limiter: one continuous token bucket per per-minute dimension,
 * plus a calendar counter of requests per day.
 *
 * The idea to hold first: a limit of L per minute is a bucket that refills at L / minute_ms per
 * millisecond up to a burst capacity C = L / slices_per_minute (at least one unit) and starts
 * full. A request of cost c passes iff every limited bucket holds at least min(c, C); it is then
 * charged c in full. So a request bigger than the burst passes only on a full bucket and drives
 * it negative, and that debt must refill before anything else passes. This is how OpenAI says it
 * enforces per-minute limits over shorter slices ("60,000 RPM may be enforced as 1,000 requests
 * per second"); Anthropic describes its ITPM/OTPM limits the same way.
 *
 * Four bucket dimensions: requests (RPM, cost 1 per request), tokens (TPM), input tokens (ITPM)
 * and output tokens (OTPM). A fifth, requests per day (RPD), is not a bucket but a counter that
 * starts again at 0 at the start of every day window; windows are day_ms long and aligned to the
 * limiter's creation. A limit of 0 means unlimited and that dimension always passes. Admission
 * is all-or-nothing across every dimension.
 *
 * Levels are exact integers in units of 1/minute_ms of a request or token, so refill over any
 * split of time is exact and a decision never flips on a rounding error.
 *
 * A stricter provider also enforces each per-minute limit over a rolling minute
 * (sl_sim_limits_t.rolling_minute): a request passes only if, in every limited bucket dimension
 * d, the costs admitted in (now_ms - minute_ms, now_ms] plus cost[d] are at most limit[d], in
 * addition to its bucket (a cost above the whole limit passes only an empty window). Those costs
 * are counted at receipt, as admitted: a later refund or an uncharged refusal
 * (sl_sim_limiter_charge_request) changes the bucket only. Each dimension keeps its admitted
 * charges exactly (rolling.h), within SL_SIM_ROLLING_ENTRIES_MAX entries; a request that would
 * need more is refused by the rolling rule until the oldest one expires. The level, remaining and
 * reset accessors report the buckets either way.
 *
 * Not thread-safe: the caller serialises all calls on one limiter. Times are caller-supplied
 * milliseconds on any monotonic clock; a time earlier than the last one seen counts as no time.
 */
#ifndef SL_SIM_LIMITER_H
#define SL_SIM_LIMITER_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

typedef enum {
    SL_SIM_DIM_REQUESTS = 0,      /* requests per minute (RPM) */
    SL_SIM_DIM_TOKENS = 1,        /* tokens per minute (TPM) */
    SL_SIM_DIM_INPUT_TOKENS = 2,  /* input tokens per minute (ITPM) */
    SL_SIM_DIM_OUTPUT_TOKENS = 3, /* output tokens per minute (OTPM) */
    SL_SIM_DIM_REQUESTS_DAY = 4,  /* requests per day window (RPD): a counter, not a bucket */
    SL_SIM_DIM_COUNT_
} sl_sim_dim_t;

typedef struct sl_sim_limiter sl_sim_limiter_t;

/* Largest per-minute limit and minute length accepted; together they keep every level within
 * int64_t. For the same reason a cost above the whole per-minute limit is charged as limit + 1;
 * the simulator refuses such requests before asking ("Request too large"). */
#define SL_SIM_LIMIT_MAX 10000000000LL  /* 1e10 per minute */
#define SL_SIM_MINUTE_MS_MAX 3600000LL  /* one hour */
#define SL_SIM_DAY_MS_MAX 31622400000LL /* 366 days */

/* Everything a limiter is configured with. A plain argument bundle, read only by
 * sl_sim_limiter_new_limits. */
typedef struct {
    int64_t limit[SL_SIM_DIM_COUNT_]; /* per minute, per day window for RPD; 0 = unlimited */
    int64_t slices_per_minute;        /* >= 1 */
    int64_t minute_ms;                /* 1..SL_SIM_MINUTE_MS_MAX */
    int64_t day_ms;                   /* 1..SL_SIM_DAY_MS_MAX: the length of an RPD window */
    bool rolling_minute;              /* also enforce each per-minute limit over a rolling minute */
} sl_sim_limits_t;

/* Why a request was refused: the dimension that needs the longest wait, that wait, and which rule
 * of that dimension asked for it. */
typedef struct {
    sl_sim_dim_t dim;
    int64_t wait_ms; /* >= 1 */
    bool rolling;    /* the rolling minute, not the bucket (or the day counter) */
} sl_sim_refusal_t;

/* Creates a limiter with every bucket full at now_ms, and the first day window starting there.
 * Limits must be within 0..SL_SIM_LIMIT_MAX. Returns SL_EINVAL for out-of-range limits, SL_ENOMEM;
 * *out is set only on success and is freed with sl_sim_limiter_free. */
sl_err_t sl_sim_limiter_new_limits(const sl_sim_limits_t *limits, int64_t now_ms,
                                   sl_sim_limiter_t **out);

/* Shorthand for a limiter of RPM and TPM only (the other limits 0, one-day windows). rpm/tpm:
 * per-minute limits, 0 = unlimited; slices_per_minute >= 1; minute_ms >= 1 (the length of a
 * simulated minute). Errors and ownership as sl_sim_limiter_new_limits. */
sl_err_t sl_sim_limiter_new(int64_t rpm, int64_t tpm, int64_t slices_per_minute, int64_t minute_ms,
                            int64_t now_ms, sl_sim_limiter_t **out);

/* Frees lim; NULL is a no-op. */
void sl_sim_limiter_free(sl_sim_limiter_t *lim);

/* Tries to admit one request at now_ms whose cost in dimension d is cost[d] (>= 0; a request
 * costs 1 in SL_SIM_DIM_REQUESTS and SL_SIM_DIM_REQUESTS_DAY). A bucket passes when it holds at
 * least min(cost, capacity); the day counter passes when it has room for min(cost, limit) more;
 * with rolling_minute, a dimension's rolling minute passes as the header comment says.
 * Returns 1 when admitted: every dimension is charged its cost (the day counter counts even when
 * unlimited, see sl_sim_limiter_day_count).
 * Returns 0 when refused: nothing is charged; *refused_dim is the dimension that refused (when
 * several do, the one that needs longest; on a tie a bucket before a rolling minute) and *wait_ms
 * (>= 1) the milliseconds until it has room for this request (for RPD: until the next day
 * window; for a rolling minute: until enough of its charges have expired). Either output pointer
 * may be NULL. */
int sl_sim_limiter_admit_all(sl_sim_limiter_t *lim, const int64_t cost[SL_SIM_DIM_COUNT_],
                             int64_t now_ms, sl_sim_dim_t *refused_dim, int64_t *wait_ms);

/* Whether sl_sim_limiter_admit_all would admit cost at now_ms, with the same outputs, but
 * charging nothing: a dry run, for refusals decided after the limits (injected faults). */
int sl_sim_limiter_check_all(sl_sim_limiter_t *lim, const int64_t cost[SL_SIM_DIM_COUNT_],
                             int64_t now_ms, sl_sim_dim_t *refused_dim, int64_t *wait_ms);

/* sl_sim_limiter_check_all that also says which rule refused: on a refusal *refusal (not NULL)
 * gets the dimension, the wait and the rule; on admission it is left alone. */
int sl_sim_limiter_check_refusal(sl_sim_limiter_t *lim, const int64_t cost[SL_SIM_DIM_COUNT_],
                                 int64_t now_ms, sl_sim_refusal_t *refusal);

/* sl_sim_limiter_admit_all for one request costing `tokens` (>= 0) in SL_SIM_DIM_TOKENS and
 * nothing in the other token dimensions. */
int sl_sim_limiter_admit(sl_sim_limiter_t *lim, int64_t tokens, int64_t now_ms,
                         sl_sim_dim_t *refused_dim, int64_t *wait_ms);

/* Gives `units` (>= 0) back to the bucket of dim, never filling it past its capacity: for charges
 * made up front and settled later. It takes no time because it needs none: the refund is applied
 * at the time the bucket was last brought up to date (never before the charge it settles), and
 * since refill and refund both only add up to the same capacity, the level that results equals
 * the one of a refund at any later time. A no-op for an
 * unlimited dimension and for SL_SIM_DIM_REQUESTS_DAY. The rolling minute keeps the charge as
 * admitted. */
void sl_sim_limiter_refund(sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t units);

/* Charges one request to the requests bucket without any check (it may go negative). Used when
 * refused requests are configured to count against RPM, as OpenAI documents. The rolling minute
 * counts admitted requests only, so it is not charged. */
void sl_sim_limiter_charge_request(sl_sim_limiter_t *lim, int64_t now_ms);

/* The limit of dim (per minute, or per day window for RPD); 0 = unlimited. */
int64_t sl_sim_limiter_limit(const sl_sim_limiter_t *lim, sl_sim_dim_t dim);

/* Whole units left in dim's bucket at now_ms: floor of the level, never below 0 (for RPD: the
 * limit minus the requests of the current day window). 0 when unlimited. */
int64_t sl_sim_limiter_remaining(const sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t now_ms);

/* Milliseconds (rounded up) until dim's bucket is full again at now_ms; 0 when full or
 * unlimited. For RPD: until the next day window, 0 when nothing was counted in this one. */
int64_t sl_sim_limiter_reset_ms(const sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t now_ms);

/* The exact level of dim's bucket at now_ms in units (may be negative: debt); for tests and
 * diagnostics. 0 when unlimited. */
double sl_sim_limiter_level(const sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t now_ms);

/* The burst capacity of dim's bucket in units (limit / slices, at least 1; the limit for RPD);
 * 0 when unlimited. */
double sl_sim_limiter_capacity(const sl_sim_limiter_t *lim, sl_sim_dim_t dim);

/* Requests admitted in the day window that holds now_ms, whether RPD is limited or not. */
int64_t sl_sim_limiter_day_count(const sl_sim_limiter_t *lim, int64_t now_ms);

/* The costs of dim admitted in the rolling minute (now_ms - minute_ms, now_ms]; 0 without
 * rolling_minute, for an unlimited dimension and for SL_SIM_DIM_REQUESTS_DAY. */
int64_t sl_sim_limiter_rolling_used(const sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t now_ms);

#endif
