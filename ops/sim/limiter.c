/* limiter.c - continuous token buckets for the provider simulator (see limiter.h). */
#include "limiter.h"

#include <stdlib.h>

/* One bucket. All amounts are in "scaled units" = units * minute_ms, so that refill is exactly
 * `limit` scaled units per millisecond. */
typedef struct {
    int64_t limit;      /* per minute; 0 = unlimited */
    int64_t capacity_s; /* burst capacity, scaled */
    int64_t level_s;    /* current level, scaled; negative = debt */
    int64_t last_ms;    /* time of level_s */
} bucket_t;

struct sl_sim_limiter {
    int64_t minute_ms;
    bucket_t buckets[SL_SIM_DIM_COUNT_];
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

sl_err_t sl_sim_limiter_new(int64_t rpm, int64_t tpm, int64_t slices_per_minute, int64_t minute_ms,
                            int64_t now_ms, sl_sim_limiter_t **out)
{
    *out = NULL;
    if (rpm < 0 || rpm > SL_SIM_LIMIT_MAX || tpm < 0 || tpm > SL_SIM_LIMIT_MAX ||
        slices_per_minute < 1 || minute_ms < 1 || minute_ms > SL_SIM_MINUTE_MS_MAX)
        return SL_EINVAL;
    sl_sim_limiter_t *lim = calloc(1, sizeof *lim);
    if (lim == NULL)
        return SL_ENOMEM;
    lim->minute_ms = minute_ms;
    bucket_init(&lim->buckets[SL_SIM_DIM_REQUESTS], rpm, slices_per_minute, minute_ms, now_ms);
    bucket_init(&lim->buckets[SL_SIM_DIM_TOKENS], tpm, slices_per_minute, minute_ms, now_ms);
    *out = lim;
    return SL_OK;
}

void sl_sim_limiter_free(sl_sim_limiter_t *lim)
{
    free(lim);
}

int sl_sim_limiter_admit(sl_sim_limiter_t *lim, int64_t tokens, int64_t now_ms,
                         sl_sim_dim_t *refused_dim, int64_t *wait_ms)
{
    int64_t cost[SL_SIM_DIM_COUNT_] = {1, tokens < 0 ? 0 : tokens};
    int64_t cost_s[SL_SIM_DIM_COUNT_] = {0, 0};
    int64_t worst_wait = 0;
    sl_sim_dim_t worst_dim = SL_SIM_DIM_REQUESTS;

    for (int d = 0; d < SL_SIM_DIM_COUNT_; d++) {
        bucket_t *b = &lim->buckets[d];
        if (b->limit == 0)
            continue;
        bucket_refill(b, now_ms);
        /* Clamping a cost above the whole limit keeps cost * minute_ms inside int64_t; such a
         * request needs a full bucket either way. */
        int64_t c = cost[d] > b->limit ? b->limit + 1 : cost[d];
        cost_s[d] = c * lim->minute_ms;
        int64_t need_s = cost_s[d] < b->capacity_s ? cost_s[d] : b->capacity_s;
        if (b->level_s < need_s) {
            int64_t wait = ceil_div(need_s - b->level_s, b->limit);
            if (wait > worst_wait) {
                worst_wait = wait;
                worst_dim = (sl_sim_dim_t)d;
            }
        }
    }
    if (worst_wait > 0) {
        if (refused_dim != NULL)
            *refused_dim = worst_dim;
        if (wait_ms != NULL)
            *wait_ms = worst_wait;
        return 0;
    }
    for (int d = 0; d < SL_SIM_DIM_COUNT_; d++) {
        if (lim->buckets[d].limit != 0)
            lim->buckets[d].level_s -= cost_s[d];
    }
    return 1;
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
    return lim->buckets[dim].limit;
}

int64_t sl_sim_limiter_remaining(const sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t now_ms)
{
    const bucket_t *b = &lim->buckets[dim];
    if (b->limit == 0)
        return 0;
    int64_t level_s = bucket_level_at(b, now_ms);
    return level_s <= 0 ? 0 : level_s / lim->minute_ms;
}

int64_t sl_sim_limiter_reset_ms(const sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t now_ms)
{
    const bucket_t *b = &lim->buckets[dim];
    if (b->limit == 0)
        return 0;
    return ceil_div(b->capacity_s - bucket_level_at(b, now_ms), b->limit);
}

double sl_sim_limiter_level(const sl_sim_limiter_t *lim, sl_sim_dim_t dim, int64_t now_ms)
{
    const bucket_t *b = &lim->buckets[dim];
    if (b->limit == 0)
        return 0.0;
    return (double)bucket_level_at(b, now_ms) / (double)lim->minute_ms;
}

double sl_sim_limiter_capacity(const sl_sim_limiter_t *lim, sl_sim_dim_t dim)
{
    const bucket_t *b = &lim->buckets[dim];
    if (b->limit == 0)
        return 0.0;
    return (double)b->capacity_s / (double)lim->minute_ms;
}
