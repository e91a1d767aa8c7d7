/* capacity.c - the counting rules of every limit (see capacity.h). */
#include "capacity.h"

#include <assert.h>
#include <string.h>

/* The stale-dispatch cutoff is at most this fraction of a limit's period (see below). */
#define DELAY_PERIOD_DIVISOR 120.0

static const char *const rule_names[] = {
#define X(name, text) text,
    SL_CHARGE_RULE_MAP(X)
#undef X
};

const char *sl_charge_rule_name(sl_charge_rule_t r)
{
    return (int)r >= 0 && r < SL_RULE_COUNT_ ? rule_names[r] : "unknown";
}

int sl_charge_rule_parse(const char *name)
{
    for (int i = 0; name != NULL && i < SL_RULE_COUNT_; i++) {
        if (strcmp(rule_names[i], name) == 0)
            return i;
    }
    return -1;
}

sl_demand_t sl_demand_cold(int64_t input, int64_t max_tokens)
{
    sl_demand_t dm = {.input_raw = input, .input = input, .max_tokens = max_tokens,
                      .output = max_tokens};
    return dm;
}

double sl_capacity_spend_usd(const sl_price_cfg_t *p, int64_t input, int64_t cached,
                             int64_t output)
{
    if (cached > input)
        cached = input;
    return ((double)(input - cached) * p->input_per_mtok +
            (double)cached * p->cached_input_per_mtok + (double)output * p->output_per_mtok) /
           1e6;
}

void sl_capacity_charge(const sl_limit_cfg_t *limit, int provider_side,
                        const sl_deployment_cfg_t *dc, const sl_demand_t *dm, double *amount,
                        sl_charge_rule_t *rule)
{
    sl_dimension_t dim = limit->dimension;
    if (dim == SL_DIM_RAMP)
        dim = limit->ramp_unit;
    switch (dim) {
    case SL_DIM_REQUESTS:
    case SL_DIM_REQUESTS_PER_DAY:
        *amount = 1;
        *rule = SL_RULE_KEEP;
        return;
    case SL_DIM_CONCURRENCY:
        *amount = 1;
        *rule = SL_RULE_RELEASE;
        return;
    case SL_DIM_ENQUEUED_TOKENS:
        /* What the provider counts as enqueued: the prompt, by ingest's conservative count. */
        *amount = (double)dm->input_raw;
        *rule = SL_RULE_RELEASE;
        return;
    case SL_DIM_INPUT_TOKENS:
        if (provider_side) {
            /* Counted at receipt from the real prompt: reserve ingest's conservative count. */
            *amount = (double)dm->input_raw;
            *rule = dc->input_counting == SL_INPUT_COUNT_EXCLUDE_CACHE_READS
                        ? SL_RULE_ACTUAL_INPUT_UNCACHED
                        : SL_RULE_ACTUAL_INPUT;
        } else {
            *amount = (double)dm->input;
            *rule = SL_RULE_ACTUAL_INPUT;
        }
        return;
    case SL_DIM_OUTPUT_TOKENS:
        *amount = (double)(provider_side && dc->output_counting == SL_OUTPUT_COUNT_MAX_TOKENS
                               ? dm->max_tokens
                               : dm->output);
        *rule = SL_RULE_ACTUAL_OUTPUT;
        return;
    case SL_DIM_SPEND:
        *amount = sl_capacity_spend_usd(&dc->price, dm->input, 0, dm->output);
        *rule = SL_RULE_ACTUAL_SPEND;
        return;
    default: /* total tokens, per minute or per day */
        /* Counted at receipt: the learned input estimate, not ingest's conservative count
         * (which held back 14 % of a prompt-heavy pool), settled upwards when the real input
         * shows the provider counted more. */
        if (provider_side && dc->tpm_counting == SL_TPM_COUNT_MAX) {
            *amount = (double)(dm->input > dm->max_tokens ? dm->input : dm->max_tokens);
            *rule = SL_RULE_RECEIPT_MAX;
        } else if (provider_side && dc->tpm_counting == SL_TPM_COUNT_SUM) {
            *amount = (double)(dm->input + dm->max_tokens);
            *rule = SL_RULE_RECEIPT_SUM;
        } else {
            *amount = (double)(dm->input + dm->output);
            *rule = SL_RULE_ACTUAL_TOTAL;
        }
        return;
    }
}

int sl_capacity_within(const sl_limit_cfg_t *limit, double amount)
{
    return limit->algorithm == SL_LIMIT_RAMP || amount <= limit->capacity;
}

/* The limits of step k of deployment d's provider-side path: k = 0 its own, k = 1 its parent
 * scope's, and so on up. 0 past the top. Scopes form a tree (the loader refuses cycles); the
 * bound on k is only a guard. */
static int path_limits(const sl_config_t *cfg, int d, int k, const sl_limit_cfg_t **limits,
                       int *n)
{
    const sl_deployment_cfg_t *dc = &cfg->deployments[d];
    if (k == 0) {
        *limits = dc->limits;
        *n = dc->nlimits;
        return 1;
    }
    int p = dc->parent;
    for (int step = 1; step < k && p >= 0; step++)
        p = cfg->scopes[p].parent;
    if (p < 0 || k > cfg->nscopes)
        return 0;
    *limits = cfg->scopes[p].limits;
    *n = cfg->scopes[p].nlimits;
    return 1;
}

/* Whether every limit in limits[0..n) could hold the request. */
static int limits_fit(const sl_limit_cfg_t *limits, int n, const sl_deployment_cfg_t *dc,
                      const sl_demand_t *dm)
{
    for (int i = 0; i < n; i++) {
        double amount;
        sl_charge_rule_t rule;
        sl_capacity_charge(&limits[i], 1 /*provider side*/, dc, dm, &amount, &rule);
        if (!sl_capacity_within(&limits[i], amount))
            return 0;
    }
    return 1;
}

int sl_capacity_deployment_fits(const sl_config_t *cfg, int d, const sl_demand_t *dm)
{
    const sl_deployment_cfg_t *dc = &cfg->deployments[d];
    if (dm->max_tokens > dc->max_output_tokens)
        return 0;
    const sl_limit_cfg_t *limits;
    int n;
    for (int k = 0; path_limits(cfg, d, k, &limits, &n); k++) {
        if (!limits_fit(limits, n, dc, dm))
            return 0;
    }
    return 1;
}

int64_t sl_capacity_dispatch_delay_ms(const sl_limit_cfg_t *limit)
{
    if (limit->algorithm != SL_LIMIT_TOKEN_BUCKET && limit->algorithm != SL_LIMIT_SLIDING_WINDOW)
        return -1;
    /* The loader keeps these in range; the division relies on it. */
    assert(limit->slices > 0 && limit->headroom > 0);
    double slice_ms = (double)limit->period_ms / (double)limit->slices;
    double ms = slice_ms * (1.0 - limit->burst_fraction) / limit->headroom;
    /* The trailing-minute guard counts this much longer than the period: a longer cutoff (few
     * slices, a small burst_fraction) would cost its share of the whole limit. */
    double share = (double)limit->period_ms / DELAY_PERIOD_DIVISOR;
    if (ms > share)
        ms = share;
    return ms < 50 ? 50 : (int64_t)ms;
}

/* The shortest dispatch delay of limits[0..n), or INT64_MAX when none is per-minute. */
static int64_t shortest_delay(const sl_limit_cfg_t *limits, int n, int64_t best)
{
    for (int i = 0; i < n; i++) {
        int64_t ms = sl_capacity_dispatch_delay_ms(&limits[i]);
        if (ms >= 0 && ms < best)
            best = ms;
    }
    return best;
}

int64_t sl_capacity_pace_ms(const sl_config_t *cfg, int d)
{
    int64_t cutoff = sl_capacity_dispatch_max_age_ms(cfg, d);
    if (cutoff == INT64_MAX)
        return 0;
    return cutoff < SL_CAPACITY_PACE_MAX_MS ? cutoff : SL_CAPACITY_PACE_MAX_MS;
}

int64_t sl_capacity_dispatch_max_age_ms(const sl_config_t *cfg, int d)
{
    assert(d >= 0 && d < cfg->ndeployments);
    int64_t best = INT64_MAX;
    const sl_limit_cfg_t *limits;
    int n;
    for (int k = 0; path_limits(cfg, d, k, &limits, &n); k++)
        best = shortest_delay(limits, n, best);
    return best;
}
