/* drr.h - hierarchical deficit round-robin over groups and flows, with costs in tokens.
 *
 * One sl_drr_t per provider pool. A flow is a queue of items (jobs) of one tenant and class,
 * identified by a small non-negative int; it belongs to one group (its workload class). Groups
 * take turns by their quanta (class weights), and within a group its flows by theirs (tenant
 * weights): each visit adds the quantum to the deficit, and an item is served while its cost
 * fits both its flow's and its group's deficit. Shares therefore hold in tokens, not in request
 * counts (LiteLLM PR #35422), and ten batch tenants do not outweigh one interactive one: the
 * classes share first. Within a flow, items are served by ascending key (earliest deadline
 * first). An emptied flow or group leaves its round and loses its deficit, so idle ones cannot
 * bank credit.
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

/* An item's place in its flow's line. sl_drr_push_at allocates one; a caller that queues many
 * items keeps it inside each item instead (sl_drr_push_node), so that a queued item costs DRR
 * no allocation of its own (48 bytes and the allocator's share, a queued job's largest part
 * after the job itself). */
struct sl_drr_node {
    sl_drr_node_t *prev, *next;
    void *item;
    int64_t cost;
    int64_t key;   /* served in ascending key order within the flow (deadlines) */
    int32_t flow;  /* its flow's id while queued, else -1 */
    uint8_t owned; /* allocated by sl_drr_push_at: freed when it leaves the line */
};

sl_drr_t *sl_drr_new(void);
/* Frees the scheduler and the nodes it allocated, not the items (nor nodes kept in them, which
 * it does not touch: free it before such items). NULL is a no-op. */
void sl_drr_free(sl_drr_t *d);

/* Where an item goes: its group and flow (>= 0; a flow stays in the group it was first pushed
 * to), their current quanta (> 0; the latest push sets them, so weights change at run time),
 * its cost (> 0 tokens) and its key (order within the flow, e.g. its deadline). */
typedef struct {
    int group;
    int64_t group_quantum;
    int flow;
    int64_t quantum;
    double share; /* the flow's guaranteed share of the pool while it has items, [0, 0.99]; 0 =
                   * none. Its visits then get quantum enough for that share of its group,
                   * and its group enough for the sum of its flows' shares of the pool. */
    int64_t cost;
    int64_t key;
} sl_drr_place_t;

/* Queues item at p; front = 1 puts it at the head of its flow whatever its key (a retry keeps
 * its place). Returns the node (for sl_drr_remove), or NULL when out of memory or the flow
 * belongs to another group. */
sl_drr_node_t *sl_drr_push_at(sl_drr_t *d, const sl_drr_place_t *p, void *item, int front);
/* sl_drr_push_at into node, the caller's (not in any line: sl_drr_node_init, or taken out of
 * one by a pop or sl_drr_remove); DRR neither allocates nor frees it. Returns 0, or -1 when out
 * of memory or the flow belongs to another group. */
int sl_drr_push_node(sl_drr_t *d, const sl_drr_place_t *p, sl_drr_node_t *node, void *item,
                     int front);
/* A node in no line (sl_drr_queued is 0). */
void sl_drr_node_init(sl_drr_node_t *node);
/* Whether node is in a flow's line. */
int sl_drr_queued(const sl_drr_node_t *node);
/* sl_drr_push_at in group 0 with key 0 (one level, arrival order). */
sl_drr_node_t *sl_drr_push(sl_drr_t *d, int flow, int64_t quantum, void *item, int64_t cost,
                           int front);

/* Returns the item DRR serves next (and its cost and flow), or NULL when nothing is queued. */
void *sl_drr_peek(sl_drr_t *d, int64_t *cost, int *flow);
/* Serves the item the last peek returned: removes it and charges its cost to the flow. */
void sl_drr_pop(sl_drr_t *d);
/* Moves on without serving the current flow: its deficit is reset so a flow blocked by its own
 * limit does not bank credit, and its group's turn ends (keeping at most one quantum), so a
 * blocked flow never holds up the other groups. */
void sl_drr_skip(sl_drr_t *d);
/* Ends the current group's turn without touching its flows (a class that must wait, e.g.
 * batch yielding to busier classes); it keeps at most one quantum of credit. */
void sl_drr_skip_group(sl_drr_t *d);
/* Queued items of one group. */
size_t sl_drr_group_len(const sl_drr_t *d, int group);
/* The last item of a flow (the latest key), or NULL: what shedding drops first. */
void *sl_drr_flow_last(const sl_drr_t *d, int flow);
/* Charges a flow (and its group) amount more (< 0: less) than the cost it was served at: the
 * cost was an estimate, and this is what its limits really counted less that. Only a flow with
 * items still queued is charged (an emptied flow starts afresh anyway); its deficit is kept
 * within DRR_MAX_DEBT_QUANTA quanta either way, so a correction is paid (or given back) over
 * a few rounds. A refund must not be capped at one quantum: a flow whose jobs cost more than
 * a quantum holds more than one while it waits for its turn, and lost every refund
 * (bench/scenarios shapes_itpm: the long-output tenant got 21 % of a four-way share). */
void sl_drr_charge(sl_drr_t *d, int flow, int64_t amount);
enum { DRR_MAX_DEBT_QUANTA = 16 };
/* Serving beside the current flow. When the item DRR serves next must wait for a resource
 * that the other flows' items barely use (one of two limits is full, the other has room), the
 * caller may serve those items meanwhile without moving DRR's place: the current flow keeps
 * its turn and its deficit, so it still gets the room it waits for as soon as there is enough,
 * and each item served beside it is charged to its own flow (and group) at once, so a flow
 * served ahead of its turn pays for it in the rounds that follow and the shares still hold. A
 * flow may run at most DRR_BESIDE_DEBT_QUANTA quanta ahead of its turn this way, as far as a
 * correction may put it behind (4 quanta left one limit at its cap more often: bench/scenarios
 * shapes_itpm in simulated time, 94.4 % of the fuller limit used on average over 5 runs against
 * 96.3 %; 32 quanta let one flow's share drift 3 points). */
enum { DRR_BESIDE_DEBT_QUANTA = 16 };
/* Fills flows[] with the ids of up to max flows of the current group other than the current
 * flow, in the order DRR visits them next; returns how many. */
int sl_drr_beside(const sl_drr_t *d, int *flows, int max);
/* The head item of flow (and its cost) when it may be served beside the current flow: flow is
 * another flow of the current group, and its deficit less the cost stays within
 * DRR_BESIDE_DEBT_QUANTA quanta of debt. NULL otherwise. */
void *sl_drr_peek_beside(const sl_drr_t *d, int flow, int64_t *cost);
/* Serves the item sl_drr_peek_beside(d, flow) returned: removes it and charges its cost to its
 * flow and group. The current flow and DRR's place are left as they were. */
void sl_drr_pop_beside(sl_drr_t *d, int flow);
/* Removes a queued item (expiry, cancellation) without charging its flow. An allocated node is
 * freed; a caller's is left out of any line. */
void sl_drr_remove(sl_drr_t *d, sl_drr_node_t *node);

size_t sl_drr_len(const sl_drr_t *d);
int sl_drr_active_flows(const sl_drr_t *d);
/* Queued items of one flow. */
size_t sl_drr_flow_len(const sl_drr_t *d, int flow);

#endif
