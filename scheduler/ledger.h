/* ledger.h - the capacity ledger: buckets of every kind, and all-or-nothing reservations across
 * them.
 *
 * A bucket mirrors one limit of one scope (a deployment's tokens per minute, a project's daily
 * requests, a tenant's monthly spend, a key's calls in flight). Each has an algorithm that says
 * how what was admitted turns back into room:
 *
 *   token bucket    level refills continuously at rate_per_ms up to capacity (the burst);
 *   sliding window  at most capacity in any window_ms, counted in sub_windows slots, and at most
 *                   sub_capacity in one slot (providers enforce per-minute limits over slices);
 *   calendar        at most capacity per calendar window: fixed windows of window_ms aligned to
 *                   the epoch, or local days in a time zone (a daily quota resetting at midnight
 *                   US Pacific); the count starts again at each reset;
 *   gauge           at most capacity in flight; room comes back only when a call ends;
 *   rolling         at most capacity in any trailing window_ms (spend over 30 days);
 *   ramp            admitted per window_ms at most max(capacity, previous window x (1 + growth)):
 *                   caps how fast the admitted rate may grow (new deployments, acceleration
 *                   limits); after an idle window it starts again from capacity.
 *
 * An amount fits a bucket when what is left covers it (and, for a token bucket with a guard,
 * when the guard's trailing window has room for it too). A non-strict bucket (provider rate limits)
 * also lets one request larger than what it can ever hold through when it is entirely unused, so
 * that a small limit never refuses its first request (LiteLLM #29193); a strict one (quotas and
 * spend caps) never does. Token buckets keep `margin` of their burst unused for the jitter between
 * a decision and the provider's receipt.
 *
 * Reconciliation gives back what was not used, or charges overage, against the slot where the
 * amount was charged (charged_at_ms): a bucket may go into debt, which delays later admissions
 * rather than being forgotten. Amounts whose window has passed are dropped, as the provider drops
 * them.
 *
 * Provider headers clamp a bucket with the provider's own view of its bucket (sl_ledger_clamp). A
 * clamp only ever restricts; it never raises the room the configured model gives.
 *
 * Single-threaded: the scheduler's loop owns its ledger. Times are caller-supplied ms.
 */
#ifndef SL_LEDGER_H
#define SL_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct sl_ledger sl_ledger_t;

typedef enum {
    SL_ALG_TOKEN_BUCKET = 0,
    SL_ALG_SLIDING_WINDOW,
    SL_ALG_CALENDAR,
    SL_ALG_GAUGE,
    SL_ALG_ROLLING,
    SL_ALG_RAMP,
    SL_ALG_COUNT_
} sl_alg_t;

/* The most slots a sliding or rolling window keeps. */
#define SL_LEDGER_MAX_SUBWINDOWS 256

typedef struct {
    sl_alg_t alg;
    double capacity;     /* burst (token bucket), per window, in flight (gauge), floor (ramp) */
    double rate_per_ms;  /* token bucket: refill */
    double margin;       /* token bucket: part of the burst kept unused, < capacity */
    int64_t window_ms;   /* sliding, rolling, ramp, and calendar without tz */
    int sub_windows;     /* sliding, rolling: slots, 1..SL_LEDGER_MAX_SUBWINDOWS */
    double sub_capacity; /* sliding: at most this in one slot; 0 = capacity / sub_windows */
    const char *tz;      /* calendar: local days in this zone (copied); NULL = fixed windows */
    double growth;       /* ramp: allowed growth per window, e.g. 0.5 = +50 % */
    int strict;          /* no oversize admission when unused (quotas, spend caps) */
    /* token bucket: a guard over the trailing guard_window_ms, which may hold at most
     * guard_capacity of what was charged (0 ms = no guard). A bucket that mirrors a provider's
     * per-minute limit has one: its refill alone keeps the average under the limit, but one
     * request larger than the burst, let through a full bucket into debt, could take the
     * trailing minute past the limit the provider counts (see sl_ledger_reserve). */
    int64_t guard_window_ms;
    double guard_capacity;
    /* token bucket: a request that needs the whole burst (amount + margin > capacity) waits
     * until the bucket has been full this long (0 = not at all): the margin covers the
     * dispatch jitter of smaller requests, and this covers it for the large ones. */
    int64_t full_hold_ms;
} sl_bucket_spec_t;

typedef struct {
    int bucket;
    double amount;
    double keep; /* token buckets: room to leave beyond the margin, for other work (a reserve);
                  * given up when only a full bucket can take the charge. 0 = none */
} sl_charge_t;

typedef struct {
    int bucket;      /* the bucket that refused (the one with the longest wait) */
    int64_t wait_ms; /* when it will have room for its charge; INT64_MAX = not by time alone
                      * (a gauge waits for a call to end; an amount a strict bucket can never
                      * hold) */
} sl_refusal_t;

/* Creates an empty ledger; NULL when out of memory. Free with sl_ledger_free. */
sl_ledger_t *sl_ledger_new(void);
void sl_ledger_free(sl_ledger_t *l);

/* Adds a bucket (id copied, e.g. "deployment:sim-a:tpm"), unused as of now_ms. Returns its index,
 * or -1 when out of memory, the id exists, or the spec is invalid (capacity <= 0, a window of
 * 0 ms, sub_windows out of range, an unknown time zone, ...). */
int sl_ledger_add_spec(sl_ledger_t *l, const char *id, const sl_bucket_spec_t *spec,
                       int64_t now_ms);
/* A token bucket (the common case): capacity > 0, rate_per_ms >= 0, 0 <= margin < capacity, at
 * level `level` as of now_ms. */
int sl_ledger_add(sl_ledger_t *l, const char *id, double capacity, double rate_per_ms,
                  double margin, double level, int64_t now_ms);

int sl_ledger_find(const sl_ledger_t *l, const char *id);
int sl_ledger_count(const sl_ledger_t *l);
const char *sl_ledger_id(const sl_ledger_t *l, int bucket);
sl_alg_t sl_ledger_alg(const sl_ledger_t *l, int bucket);
const char *sl_ledger_alg_name(sl_alg_t alg);
double sl_ledger_capacity(const sl_ledger_t *l, int bucket);
const sl_bucket_spec_t *sl_ledger_spec(const sl_ledger_t *l, int bucket);

/* Changes a bucket's limits at run time (same algorithm), keeping what was admitted: a lower
 * capacity applies from the next admission. SL_EINVAL (nothing changed) for an invalid spec or
 * another algorithm. */
sl_err_t sl_ledger_set_spec(sl_ledger_t *l, int bucket, const sl_bucket_spec_t *spec,
                            int64_t now_ms);
/* Token buckets: changes capacity, rate and margin, keeping the level (clamped). */
void sl_ledger_set_limits(sl_ledger_t *l, int bucket, double capacity, double rate_per_ms,
                          double margin, int64_t now_ms);

/* What is left at now_ms: capacity minus what counts now (negative = debt). For a ramp, what is
 * left of this window's allowance. */
double sl_ledger_level(sl_ledger_t *l, int bucket, int64_t now_ms);
/* Token buckets: sets the level (restore after a restart). */
void sl_ledger_set_level(sl_ledger_t *l, int bucket, double level, int64_t now_ms);
/* When the bucket's current window (calendar, ramp) or slot ends, or the token bucket is full
 * again: epoch ms; for gauges, now_ms. */
int64_t sl_ledger_reset_ms(sl_ledger_t *l, int bucket, int64_t now_ms);

/* Milliseconds until amount fits in bucket (0 = now; INT64_MAX = not by time alone). */
int64_t sl_ledger_wait_ms(sl_ledger_t *l, int bucket, double amount, int64_t now_ms);
/* Whether a charge of amount needs the whole burst of a token bucket (it is larger than the
 * burst less the margin): it goes only when the bucket is full, into debt. */
int sl_ledger_takes_whole(const sl_ledger_t *l, int bucket, double amount);
/* Token buckets: a charge that takes the whole burst reaches the provider lead_ms after its
 * admission (it is paced, sl_capacity_pace_ms): the provider's clamp is read for then. */
void sl_ledger_set_lead(sl_ledger_t *l, int bucket, int64_t lead_ms);

/* Reserves every charge or none. On SL_ENOROOM no bucket changed and *refusal (may be NULL)
 * names the bucket that refused with the longest wait. Charges naming the same bucket twice or
 * a negative amount: SL_EINVAL, nothing changed. */
sl_err_t sl_ledger_reserve(sl_ledger_t *l, const sl_charge_t *charges, int n, int64_t now_ms,
                           sl_refusal_t *refusal);

/* Settles part of a charge made at charged_at_ms: amount > 0 gives room back, amount < 0 charges
 * more (overage, debt). Applied to the slot or window where it was charged; dropped when that
 * window has passed. A gauge releases amount. Never fails. */
void sl_ledger_settle(sl_ledger_t *l, int bucket, double amount, int64_t charged_at_ms,
                      int64_t now_ms);
/* sl_ledger_settle with charged_at_ms = now_ms. */
void sl_ledger_credit(sl_ledger_t *l, int bucket, double amount, int64_t now_ms);

/* The sum of every amount ever reserved in the bucket: what was reserved between two moments is
 * the difference of two readings. */
double sl_ledger_reserved_total(const sl_ledger_t *l, int bucket);
/* The same less what settlements gave back since (plus what they charged more): what the
 * bucket's charges came to once reconciled, for calls still in flight their reservation. */
double sl_ledger_charged_total(const sl_ledger_t *l, int bucket);

/* What a provider reported about its own bucket behind ours (rate-limit headers of a response). */
typedef struct {
    double remaining;       /* what it had left when it received the request */
    double limit;           /* its capacity; 0 = unknown (the clamp then ends at until_ms only) */
    double rate_per_ms;     /* how fast it refills */
    int64_t observed_ms;    /* when the request was sent (an upper bound on what it had seen) */
    double reserved_before; /* sl_ledger_reserved_total when the request was sent */
    int64_t until_ms;       /* when it is full again (its reset); the clamp ends then */
} sl_clamp_t;

/* Clamps the bucket to the provider's view: while the clamp lasts, an amount fits only if it is
 * within what the provider had left, plus its refill since, minus everything reserved here since
 * the request was sent. Of two clamps in force, the one observed last is kept (an older report
 * arriving late is ignored). A clamp only restricts: it never raises the room the bucket itself
 * gives. */
void sl_ledger_clamp(sl_ledger_t *l, int bucket, const sl_clamp_t *clamp, int64_t now_ms);
/* The clamp's allowance at now_ms (INFINITY when no clamp is in force). */
double sl_ledger_clamp_allowance(sl_ledger_t *l, int bucket, int64_t now_ms);

/* After a restart, when nothing tells what was admitted just before: assume the worst for the
 * rest of the current window (token bucket: empty, keeping debt; sliding window: full for one
 * window; ramp: cold start). Calendar, rolling and gauge buckets are left alone: their state is
 * restored exactly (saved state plus replayed reservations, calls in flight). */
void sl_ledger_assume_worst(sl_ledger_t *l, int bucket, int64_t now_ms);

/* Token buckets with a guard: counts amount, charged at at_ms, in the guard's trailing window
 * only (the level is left alone). After a restart the reservations of the last guard window
 * are replayed through this, so the guard knows what the provider may still be counting. */
void sl_ledger_guard_note(sl_ledger_t *l, int bucket, double amount, int64_t at_ms,
                          int64_t now_ms);
/* What the guard's trailing window holds now (0 without a guard). */
double sl_ledger_guard_used(sl_ledger_t *l, int bucket, int64_t now_ms);

/* Whether the bucket changed since the last sl_ledger_clear_dirty (for saving only what moved). */
int sl_ledger_dirty(const sl_ledger_t *l, int bucket);
void sl_ledger_clear_dirty(sl_ledger_t *l, int bucket);

/* The algorithm's counters as JSON text (the window and its slots), for the store; NULL-free:
 * writes "" for a bucket without counters. SL_ETOOBIG when cap is too small. */
sl_err_t sl_ledger_state_save(sl_ledger_t *l, int bucket, int64_t now_ms, char *buf, size_t cap);
/* Restores counters saved by sl_ledger_state_save (same algorithm and window). Windows that have
 * passed since are dropped. SL_EPARSE (nothing changed) for text it cannot use. */
sl_err_t sl_ledger_state_load(sl_ledger_t *l, int bucket, const char *text, int64_t now_ms);

#endif
