/* drr.h - deficit round-robin over flows, with costs in tokens.
 *
 * One sl_drr_t per provider pool. A flow is a queue of items (jobs) of one tenant and class,
 * identified by a small non-negative int. Each visit of a flow adds its quantum to its deficit;
 * the flow is served while its head item's cost fits in the deficit. Fairness therefore holds
 * in tokens, not in request counts (LiteLLM PR #35422). An emptied flow leaves the round and
 * loses its deficit, so idle flows cannot bank credit.
 *
 * Usage: peek the item DRR would serve; if the caller can serve it, pop; if the caller cannot
 * serve anything of this flow now (its own limit), skip; if the pool itself is out of capacity,
 * just stop and peek again later: the position and deficits are kept.
 */
#ifndef SL_DRR_H
#define SL_DRR_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl_drr sl_drr_t;
typedef struct sl_drr_node sl_drr_node_t;

sl_drr_t *sl_drr_new(void);
/* Frees the scheduler and its nodes, not the items. NULL is a no-op. */
void sl_drr_free(sl_drr_t *d);

/* Queues item on flow (>= 0) with cost (> 0 tokens); quantum (> 0) is the flow's current
 * quantum. front = 1 puts it at the head of its flow (a retry keeps its place). Returns the
 * node (for sl_drr_remove) or NULL when out of memory. */
sl_drr_node_t *sl_drr_push(sl_drr_t *d, int flow, int64_t quantum, void *item, int64_t cost,
                           int front);

/* Returns the item DRR serves next (and its cost and flow), or NULL when nothing is queued. */
void *sl_drr_peek(sl_drr_t *d, int64_t *cost, int *flow);
/* Serves the item the last peek returned: removes it and charges its cost to the flow. */
void sl_drr_pop(sl_drr_t *d);
/* Moves on to the next flow without serving the current one; its deficit is reset so a flow
 * blocked by its own limit does not bank credit. */
void sl_drr_skip(sl_drr_t *d);
/* Removes a queued item (expiry, cancellation) without charging its flow. */
void sl_drr_remove(sl_drr_t *d, sl_drr_node_t *node);

size_t sl_drr_len(const sl_drr_t *d);
int sl_drr_active_flows(const sl_drr_t *d);
/* Queued items of one flow. */
size_t sl_drr_flow_len(const sl_drr_t *d, int flow);

#endif
