/* capacity.h - what one request costs in each limit, by the limit's counting rule, and whether
 * a limit could ever hold it.
 *
 * The one idea: ingest (which rejects a request no deployment could ever take) and the
 * scheduler (which reserves every bucket of a job's path) decide with the same rule, so a
 * request is refused at ingest exactly when the scheduler could never admit it with what it
 * knows before any call (its cold-start estimates).
 */
#ifndef SL_CAPACITY_H
#define SL_CAPACITY_H

#include <stdint.h>

#include "config.h"

/* How reconciliation settles a charge, by what the limit counts:
 *   KEEP: the provider counted the reserved amount at receipt (requests), so it stays whatever
 *         the call used;
 *   ACTUAL_*: what was really used replaces the estimate: unused tokens come back, overage
 *         becomes debt (total, input, input without cache reads, output, spend in USD);
 *   RELEASE: a gauge's slot comes back when the call ends;
 *   RECEIPT_MAX / RECEIPT_SUM: the provider counted max(input, max_tokens) or input +
 *         max_tokens at receipt (OpenAI, Azure): reserved with the learned input estimate and
 *         kept, or raised to what the real input shows the provider counted (debt).
 * The names are stored with each reservation row, so they must never change. */
#define SL_CHARGE_RULE_MAP(X)                                                                  \
    X(KEEP, "keep")                                                                            \
    X(ACTUAL_TOTAL, "actual_total")                                                            \
    X(ACTUAL_INPUT, "actual_input")                                                            \
    X(ACTUAL_INPUT_UNCACHED, "actual_input_uncached")                                          \
    X(ACTUAL_OUTPUT, "actual_output")                                                          \
    X(ACTUAL_SPEND, "actual_spend")                                                            \
    X(RELEASE, "release")                                                                      \
    X(RECEIPT_MAX, "receipt_max")                                                              \
    X(RECEIPT_SUM, "receipt_sum")

typedef enum {
#define X(name, text) SL_RULE_##name,
    SL_CHARGE_RULE_MAP(X)
#undef X
        SL_RULE_COUNT_
} sl_charge_rule_t;

/* The stored name of a rule (never NULL; "unknown" outside the enum); the rule of a name, or -1. */
const char *sl_charge_rule_name(sl_charge_rule_t r);
int sl_charge_rule_parse(const char *name);

/* What a request is expected to use, in tokens:
 *   input_raw  ingest's conservative count of the prompt (what a provider counting the real
 *              prompt at receipt may see);
 *   input      the estimate the callers' budgets are charged (the scheduler corrects it with
 *              what it learned; before that it equals input_raw);
 *   max_tokens the request's output ceiling;
 *   output     the expected output (learned; before that max_tokens). */
typedef struct {
    int64_t input_raw, input, max_tokens, output;
} sl_demand_t;

/* The demand before anything was learned: what the scheduler reserves for a new route. */
sl_demand_t sl_demand_cold(int64_t input, int64_t max_tokens);

/* The amount and settlement rule of one limit for a request going to deployment dc, by what
 * the limit counts and on which side of the path it sits (provider_side: the deployment and
 * its parent scopes count the way the provider does; the callers' budgets count the estimate,
 * settled at real use). A ramp limit counts its ramp unit. */
void sl_capacity_charge(const sl_limit_cfg_t *limit, int provider_side,
                        const sl_deployment_cfg_t *dc, const sl_demand_t *dm, double *amount,
                        sl_charge_rule_t *rule);

/* Whether a charge of amount could ever be admitted by limit: every limit but a ramp holds at
 * most its capacity per period (a ramp's allowance grows). */
int sl_capacity_within(const sl_limit_cfg_t *limit, double amount);

/* Spend in USD of so many tokens at dc's prices (cached input at its own price). */
double sl_capacity_spend_usd(const sl_price_cfg_t *p, int64_t input, int64_t cached,
                             int64_t output);

/* Whether deployment d of cfg could ever take a request of demand dm by its configured
 * limits: max_tokens within its output ceiling, and the charge of each limit of the
 * deployment and of its parent scopes within that limit. */
int sl_capacity_deployment_fits(const sl_config_t *cfg, int d, const sl_demand_t *dm);

/* How late a dispatch under this per-minute limit (token bucket or sliding window) may reach
 * the provider after it was admitted: the part of a slice the ledger keeps unused
 * (1 - burst_fraction) lasts this long at the planned rate (headroom x the limit), but at most
 * 1/120 of the period, since the trailing-minute guard counts a period plus this delay; never
 * less than 50 ms. -1 for a limit of another kind. */
int64_t sl_capacity_dispatch_delay_ms(const sl_limit_cfg_t *limit);

/* How late a dispatch to deployment d may reach the provider after the scheduler admitted it:
 * the shortest sl_capacity_dispatch_delay_ms of the per-minute limits of d and of its parent
 * scopes. A dispatch older than this is not sent (its admission decision is stale: e.g. it
 * waited in Kafka while no dispatcher was consuming), so a backlog of old dispatches can never
 * reach the provider as one burst; the ledger's trailing-minute guard covers exactly this
 * delay. INT64_MAX for a deployment without per-minute limits on its path. */
int64_t sl_capacity_dispatch_max_age_ms(const sl_config_t *cfg, int d);

/* How long after its admission a request that needs a whole burst of one of d's per-minute
 * buckets is sent (sl_msg_dispatch_t.send_at_ms): the dispatch cutoff
 * (sl_capacity_dispatch_max_age_ms), at most SL_CAPACITY_PACE_MAX_MS; 0 without per-minute
 * limits. Such a request relies on the provider's bucket being full when it arrives, which
 * holds while the dispatch before it took no longer than this plus what the refill headroom
 * leaves (about 3 % of the refill time of that dispatch's charge); sent at once, it arrived
 * early by the dispatch path's jitter. With the pace at the cutoff no dispatch can take
 * longer (a later one is not sent), so the rule holds whatever the jitter; the guard covers
 * the delay, which is within the cutoff. */
enum { SL_CAPACITY_PACE_MAX_MS = 100 };
int64_t sl_capacity_pace_ms(const sl_config_t *cfg, int d);

#endif
