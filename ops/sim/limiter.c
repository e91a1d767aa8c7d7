/* limiter.c - continuous token buckets for the provider simulator, each optionally with a rolling
 * minute (see limiter.h). */
#include "limiter.h"

#include <stdlib.h>

#include "rolling.h"

/* One bucket. All amounts are in "scaled units" = units * minute_ms, so that refill is exactly
 * `limit` scaled units per millisecond. */
typedef struct {
    int64_t limit;      /* per minute; 0 = unlimited */
    int64_t capacity_s; /* burst capacity, scaled */
    int64_t level_s;    /* current level, scaled; negative = debt */
    int64_t last_ms;    /* time of level_s */
} bucket_t;

/* The dimensions below SL_SIM_DIM_REQUESTS_DAY are buckets. */
#define N_BUCKETS SL_SIM_DIM_REQUESTS_DAY

/* Requests per day: a counter of the current window, aligned to origin_ms. */
typedef struct {
    int64_t limit; /* per window; 0 = unlimited (still counted) */
    int64_t day_ms;
    int64_t origin_ms;
    int64_t window; /* index of the window that count belongs to */
    int64_t count;
} day_counter_t;

struct sl_sim_limiter {
    int64_t minute_ms;
    bucket_t buckets[N_BUCKETS];
    sl_sim_rolling_t *rolling[N_BUCKETS]; /* NULL without rolling_minute or a limit */
    day_counter_t day;
};

static void bucket_init(bucket_t *b, int64_t limit, int64_t slices, int64_t minute_ms,
                        int64_t now_ms)
{
    b->limit = limit;
    /* limit * minute_ms <= 1e10 * 3.6e6, well inside int64_t. Rounding the capacity down to a
     * whole scaled unit is an error below 1/minute_ms of a unit. */
    b->capacity_s = limit * minute_ms / slices;
    if (b->capacity_s < minute_ms)
        b->capacity_s = minute_ms;
    b->level_s = b->capacity_s;
    b->last_ms = now_ms;
}

static int64_t ceil_div(int64_t num, int64_t den)
{
    return num <= 0 ? 0 : (num + den - 1) / den;
}

/* The level of b at now_ms without changing b. */
static int64_t bucket_level_at(const bucket_t *b, int64_t now_ms)
{
    if (b->level_s >= b->capacity_s || now_ms <= b->last_ms)
        return b->level_s;
    int64_t elapsed = now_ms - b->last_ms;
    /* Compare in milliseconds first so elapsed * limit cannot overflow after a long idle. */
    if (elapsed >= ceil_div(b->capacity_s - b->level_s, b->limit))
        return b->capacity_s;
    return b->level_s + elapsed * b->limit;
}

static void bucket_refill(bucket_t *b, int64_t now_ms)
{
    b->level_s = bucket_level_at(b, now_ms);
    if (now_ms > b->last_ms)
        b->last_ms = now_ms;
}

/* The index of the day window holding now_ms; never before the one already counted, so a time
 * earlier than the last one seen counts as no time here too. */
static int64_t day_window_at(const day_counter_t *day, int64_t now_ms)
{
    int64_t window = now_ms <= day->origin_ms ? 0 : (now_ms - day->origin_ms) / day->day_ms;
    return window > day->window ? window : day->window;
}

static int64_t day_count_at(const day_counter_t *day, int64_t now_ms)
{
    return day_window_at(day, now_ms) == day->window ? day->count : 0;
}

/* Milliseconds from now_ms to the start of the next day window (at least 1). */
static int64_t day_wait_ms(const day_counter_t *day, int64_t now_ms)
{
    int64_t next_ms = day->origin_ms + (day_window_at(day, now_ms) + 1) * day->day_ms;
    return next_ms - now_ms < 1 ? 1 : next_ms - now_ms;
}

sl_err_t sl_sim_limiter_new_limits(const sl_sim_limits_t *limits, int64_t now_ms,
                                   sl_sim_limiter_t **out)
{
    *out = NULL;
    for (int d = 0; d < SL_SIM_DIM_COUNT_; d++) {
        if (limits->limit[d] < 0 || limits->limit[d] > SL_SIM_LIMIT_MAX)
            return SL_EINVAL;
    }
    if (limits->slices_per_minute < 1 || limits->minute_ms < 1 ||
        limits->minute_ms > SL_SIM_MINUTE_MS_MAX || limits->day_ms < 1 ||
        limits->day_ms > SL_SIM_DAY_MS_MAX)
        return SL_EINVAL;
    sl_sim_limiter_t *lim = calloc(1, sizeof *lim);
    if (lim == NULL)
        return SL_ENOMEM;
    lim->minute_ms = limits->minute_ms;
    sl_err_t rc = SL_OK;
    for (int d = 0; d < N_BUCKETS; d++) {
        bucket_init(&lim->buckets[d], limits->limit[d], limits->slices_per_minute,
                    limits->minute_ms, now_ms);
        if (limits->rolling_minute && limits->limit[d] != 0 && rc == SL_OK)
            rc = sl_sim_rolling_new(limits->limit[d], limits->minute_ms, now_ms, &lim->rolling[d]);
    }
    lim->day.limit = limits->limit[SL_SIM_DIM_REQUESTS_DAY];
    lim->day.day_ms = limits->day_ms;
    lim->day.origin_ms = now_ms;
    if (rc != SL_OK) {
        sl_sim_limiter_free(lim);
        return rc;
    }
    *out = lim;
    return SL_OK;
}

sl_err_t sl_sim_limiter_new(int64_t rpm, int64_t tpm, int64_t slices_per_minute, int64_t minute_ms,
                            int64_t now_ms, sl_sim_limiter_t **out)
{
    sl_sim_limits_t limits = {
        .limit = {[SL_SIM_DIM_REQUESTS] = rpm, [SL_SIM_DIM_TOKENS] = tpm},
        .slices_per_minute = slices_per_minute,
        .minute_ms = minute_ms,
        .day_ms = 86400000,
    };
    return sl_sim_limiter_new_limits(&limits, now_ms, out);
}

void sl_sim_limiter_free(sl_sim_limiter_t *lim)
{
    if (lim == NULL)
        return;
    for (int d = 0; d < N_BUCKETS; d++)
        sl_sim_rolling_free(lim->rolling[d]);
    free(lim);
}

/* Notes a wait of dim's rule in worst when it is longer than the longest so far. */
static void note_wait(sl_sim_refusal_t *worst, sl_sim_dim_t dim, bool rolling, int64_t wait_ms)
{
    if (wait_ms > worst->wait_ms) {
        worst->dim = dim;
        worst->wait_ms = wait_ms;
        worst->rolling = rolling;
    }
}

/* Brings every bucket and rolling minute up to now_ms and works out whether cost fits: the longest
 * wait goes to worst (wait_ms 0 = it fits) with the dimension and rule that need it. cost_s gets
 * each bucket's charge in scaled units. Changes nothing a decision depends on (a refill, an
 * expiry or room made in a rolling minute is no decision). */
static void evaluate(sl_sim_limiter_t *lim, const int64_t cost[SL_SIM_DIM_COUNT_], int64_t now_ms,
                     int64_t cost_s[N_BUCKETS], sl_sim_refusal_t *worst)
{
    *worst = (sl_sim_refusal_t){.dim = SL_SIM_DIM_REQUESTS};
    for (int d = 0; d < N_BUCKETS; d++) {
        bucket_t *b = &lim->buckets[d];
        cost_s[d] = 0;
        if (b->limit == 0)
            continue;
        bucket_refill(b, now_ms);
        /* Clamping a cost above the whole limit keeps cost * minute_ms inside int64_t; such a
         * request needs a full bucket either way. */
        int64_t c = cost[d] < 0 ? 0 : cost[d] > b->limit ? b->limit + 1 : cost[d];
        cost_s[d] = c * lim->minute_ms;
        int64_t need_s = cost_s[d] < b->capacity_s ? cost_s[d] : b->capacity_s;
        if (b->level_s < need_s)
            note_wait(worst, (sl_sim_dim_t)d, false, ceil_div(need_s - b->level_s, b->limit));
    }
    const day_counter_t *day = &lim->day;
    int64_t day_cost = cost[SL_SIM_DIM_REQUESTS_DAY] < 0 ? 0 : cost[SL_SIM_DIM_REQUESTS_DAY];
    if (day->limit != 0) {
        int64_t need = day_cost < day->limit ? day_cost : day->limit;
        if (day_count_at(day, now_ms) > day->limit - need)
            note_wait(worst, SL_SIM_DIM_REQUESTS_DAY, false, day_wait_ms(day, now_ms));
    }
    /* After the buckets, so that on a tie the bucket is the rule reported. */
    for (int d = 0; d < N_BUCKETS; d++) {
        if (lim->rolling[d] != NULL)
            note_wait(worst, (sl_sim_dim_t)d, true,
                      sl_sim_rolling_wait_ms(lim->rolling[d], cost[d], now_ms));
    }
}

/* Copies a refusal to the outputs of sl_sim_limiter_check_all and sl_sim_limiter_admit_all. */
static void report(const sl_sim_refusal_t *refusal, sl_sim_dim_t *refused_dim, int64_t *wait_ms)
{
    if (refused_dim != NULL)
        *refused_dim = refusal->dim;
    if (wait_ms != NULL)
        *wait_ms = refusal->wait_ms;
}

int sl_sim_limiter_check_refusal(sl_sim_limiter_t *lim, const int64_t cost[SL_SIM_DIM_COUNT_],
                                 int64_t now_ms, sl_sim_refusal_t *refusal)
{
    int64_t cost_s[N_BUCKETS];
    sl_sim_refusal_t worst;
    evaluate(lim, cost, now_ms, cost_s, &worst);
    if (worst.wait_ms == 0)
        return 1;
    *refusal = worst;
    return 0;
}

int sl_sim_limiter_check_all(sl_sim_limiter_t *lim, const int64_t cost[SL_SIM_DIM_COUNT_],
                             int64_t now_ms, sl_sim_dim_t *refused_dim, int64_t *wait_ms)
{
    sl_sim_refusal_t refusal;
    if (sl_sim_limiter_check_refusal(lim, cost, now_ms, &refusal))
        return 1;
    report(&refusal, refused_dim, wait_ms);
    return 0;
}

int sl_sim_limiter_admit_all(sl_sim_limiter_t *lim, const int64_t cost[SL_SIM_DIM_COUNT_],
                             int64_t now_ms, sl_sim_dim_t *refused_dim, int64_t *wait_ms)
{
    int64_t cost_s[N_BUCKETS];
    sl_sim_refusal_t worst;
    evaluate(lim, cost, now_ms, cost_s, &worst);
    if (worst.wait_ms > 0) {
        report(&worst, refused_dim, wait_ms);
        return 0;
    }
    for (int d = 0; d < N_BUCKETS; d++) {
        if (lim->buckets[d].limit != 0)
            lim->buckets[d].level_s -= cost_s[d];
        if (lim->rolling[d] != NULL)
            sl_sim_rolling_add(lim->rolling[d], cost[d], now_ms);
    }
    day_counter_t *day = &lim->day;
    int64_t day_cost = cost[SL_SIM_DIM_REQUESTS_DAY] < 0 ? 0 : cost[SL_SIM_DIM_REQUESTS_DAY];
    day->count = day_count_at(day, now_ms) + day_cost;
    day->window = day_window_at(day, now_ms);
    return 1;
}

int sl_sim_limiter_admit(sl_sim_limiter_t *lim, int64_t tokens, int64_t now_ms,
                         sl_sim_dim_t *refused_dim, int64_t *wait_ms)
{
    int64_t cost[SL_SIM_DIM_COUNT_] = {
        [SL_SIM_DIM_REQUESTS] = 1,
        [SL_SIM_DIM_TOKENS] = tokens,
        [SL_SIM_DIM_REQUESTS_DAY] = 1,
    };
    return sl_sim_limiter_admit_all(lim, cost, now_ms, refused_dim, wait_ms);
}

void sl_sim_limiter_refund(sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t units)
{
    if (dim >= N_BUCKETS || units <= 0)
        return;
    bucket_t *b = &lim->buckets[dim];
    if (b->limit == 0)
        return;
    /* A bucket never holds more than its capacity, so a larger refund is the same as this one,
     * and the clamp keeps units * minute_ms inside int64_t. */
    int64_t room_s = b->capacity_s - b->level_s;
    if (room_s <= 0)
        return;
    int64_t max_units = room_s / lim->minute_ms + 1;
    int64_t refund_s = (units < max_units ? units : max_units) * lim->minute_ms;
    b->level_s = refund_s >= room_s ? b->capacity_s : b->level_s + refund_s;
}

void sl_sim_limiter_charge_request(sl_sim_limiter_t *lim, int64_t now_ms)
{
    bucket_t *b = &lim->buckets[SL_SIM_DIM_REQUESTS];
    if (b->limit == 0)
        return;
    bucket_refill(b, now_ms);
    b->level_s -= lim->minute_ms;
}

int64_t sl_sim_limiter_limit(const sl_sim_limiter_t *lim, sl_sim_dim_t dim)
{
    return dim == SL_SIM_DIM_REQUESTS_DAY ? lim->day.limit : lim->buckets[dim].limit;
}

int64_t sl_sim_limiter_remaining(const sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t now_ms)
{
    if (dim == SL_SIM_DIM_REQUESTS_DAY) {
        int64_t left = lim->day.limit - day_count_at(&lim->day, now_ms);
        return lim->day.limit == 0 || left < 0 ? 0 : left;
    }
    const bucket_t *b = &lim->buckets[dim];
    if (b->limit == 0)
        return 0;
    int64_t level_s = bucket_level_at(b, now_ms);
    return level_s <= 0 ? 0 : level_s / lim->minute_ms;
}

int64_t sl_sim_limiter_reset_ms(const sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t now_ms)
{
    if (dim == SL_SIM_DIM_REQUESTS_DAY) {
        if (lim->day.limit == 0 || day_count_at(&lim->day, now_ms) == 0)
            return 0;
        return day_wait_ms(&lim->day, now_ms);
    }
    const bucket_t *b = &lim->buckets[dim];
    if (b->limit == 0)
        return 0;
    return ceil_div(b->capacity_s - bucket_level_at(b, now_ms), b->limit);
}

double sl_sim_limiter_level(const sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t now_ms)
{
    if (dim == SL_SIM_DIM_REQUESTS_DAY)
        return (double)sl_sim_limiter_remaining(lim, dim, now_ms);
    const bucket_t *b = &lim->buckets[dim];
    if (b->limit == 0)
        return 0.0;
    return (double)bucket_level_at(b, now_ms) / (double)lim->minute_ms;
}

double sl_sim_limiter_capacity(const sl_sim_limiter_t *lim, sl_sim_dim_t dim)
{
    if (dim == SL_SIM_DIM_REQUESTS_DAY)
        return (double)lim->day.limit;
    const bucket_t *b = &lim->buckets[dim];
    if (b->limit == 0)
        return 0.0;
    return (double)b->capacity_s / (double)lim->minute_ms;
}

int64_t sl_sim_limiter_day_count(const sl_sim_limiter_t *lim, int64_t now_ms)
{
    return day_count_at(&lim->day, now_ms);
}

int64_t sl_sim_limiter_rolling_used(const sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t now_ms)
{
    if (dim >= N_BUCKETS || lim->rolling[dim] == NULL)
        return 0;
    return sl_sim_rolling_sum(lim->rolling[dim], now_ms);
}
