/* admit.h - the admission decision: what a validated request costs in each limit, and whether it
 * is admitted, refused by a limit, or answered by a fault.
 *
 * The idea to hold first: the decision is made once, at receipt, in a fixed order (see
 * sl_sim_admit_decide), and charges every limit all or nothing; nothing is decided later. A 200
 * leaves the response counted in flight until sl_sim_finish.
 */
#ifndef SL_SIM_ADMIT_H
#define SL_SIM_ADMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "sim_internal.h"

/* What a chat request asks for, once validated, in the deployment's terms. */
typedef struct {
    sl_sim_ask_t ask;
    int64_t max_tokens; /* effective: the request's or the deployment default */
    int64_t prompt_tokens;
    int64_t cost_tokens;   /* what TPM is charged */
    int64_t cached_tokens; /* prompt tokens read from the cache */
    int64_t input_tokens;  /* what ITPM is charged: the prompt without its cache reads */
    int64_t output_tokens; /* what OTPM is charged at receipt */
    int64_t completion_tokens;
    bool hit_max_tokens;
    bool tool_call; /* answer with a call of ask.tool_name */
} sl_sim_chat_t;

/* Costs, completion length, cache reads and tool use of a validated request. The same body
 * always yields the same completion length, cache outcome and tool decision, so runs are
 * reproducible; each comes from a differently mixed hash, so they are independent. */
void sl_sim_admit_cost(const sl_sim_dep_config_t *dc, const sl_sim_request_t *req,
                       const sl_sim_ask_t *ask, sl_sim_chat_t *chat);

/* The decision for a validated request, in this order: early-retry bookkeeping, unavailable
 * windows, idempotent replay, max_pending, spend cap, random overload, too large, the limits,
 * injected 429, then admission (with slow and drop faults). Caller holds the lock. */
void sl_sim_admit_decide(sl_sim_t *sim, sl_sim_deployment_t *dep, const sl_sim_request_t *req,
                         const sl_sim_chat_t *chat, int64_t now_ms, sl_sim_response_t *resp);

#endif
