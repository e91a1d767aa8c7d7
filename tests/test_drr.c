/* test_drr.c - behaviour of deficit round-robin with token costs (scheduler/drr.h): shares are
 * fair in tokens (not request counts) and follow the weights, big jobs are served without
 * starving others, idle flows bank nothing, and skip/remove/push-front keep the rotation sane.
 *
 * Items are small integers cast to pointers; an item's flow and cost are encoded in it where a
 * test needs them back.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../scheduler/drr.h"
#include "sign.h"

/* Offset so that item 0 is not a NULL pointer (NULL means "nothing queued"). */
#define ITEM(x) ((void *)(intptr_t)((x) + 1000000))
#define VAL(p) ((int)((intptr_t)(p)-1000000))

static sl_drr_t *new_drr(void)
{
    sl_drr_t *d = sl_drr_new();
    ck_assert_ptr_nonnull(d);
    return d;
}

static void push(sl_drr_t *d, int flow, int64_t quantum, int item, int64_t cost, int front)
{
    ck_assert_ptr_nonnull(sl_drr_push(d, flow, quantum, ITEM(item), cost, front));
}

/* Peeks and pops; returns the item and its flow/cost. */
static int serve(sl_drr_t *d, int *flow, int64_t *cost)
{
    int64_t c = -1;
    int f = -1;
    void *item = sl_drr_peek(d, &c, &f);
    ck_assert_ptr_nonnull(item);
    sl_drr_pop(d);
    if (flow != NULL)
        *flow = f;
    if (cost != NULL)
        *cost = c;
    return VAL(item);
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

/* Keeps nflows flows backlogged (a new job replaces each served one) and serves until `total`
 * tokens went out; tokens[f] gets each flow's share. cost_of(f) gives the next job's cost. */
static void run_backlogged(sl_drr_t *d, int nflows, const int64_t *quantum,
                           int64_t (*cost_of)(int flow), int64_t total, int64_t *tokens,
                           int64_t *count)
{
    for (int f = 0; f < nflows; f++) {
        tokens[f] = 0;
        count[f] = 0;
        for (int i = 0; i < 8; i++)
            push(d, f, quantum[f], f, cost_of(f), 0);
    }
    int64_t served = 0;
    while (served < total) {
        int flow = -1;
        int64_t cost = 0;
        int item = serve(d, &flow, &cost);
        ck_assert_int_eq(item, flow); /* items carry their flow */
        tokens[flow] += cost;
        count[flow]++;
        served += cost;
        push(d, flow, quantum[flow], flow, cost_of(flow), 0);
    }
}

static int64_t cost_a100_b1000(int flow)
{
    return flow == 0 ? 100 : 1000;
}

START_TEST(equal_quanta_give_equal_token_shares_not_equal_request_counts)
{
    sl_drr_t *d = new_drr();
    const int64_t quantum[2] = {500, 500};
    int64_t tokens[2], count[2];
    run_backlogged(d, 2, quantum, cost_a100_b1000, 1000000, tokens, count);
    double share_a = (double)tokens[0] / (double)(tokens[0] + tokens[1]);
    ck_assert_msg(fabs(share_a - 0.5) < 0.02, "token share of A %.4f", share_a);
    /* A sent about ten times as many requests as B */
    double ratio = (double)count[0] / (double)count[1];
    ck_assert_msg(ratio > 9 && ratio < 11, "request ratio %.3f", ratio);
    sl_drr_free(d);
}
END_TEST

static int64_t cost_random(int flow)
{
    (void)flow;
    return 50 + (int64_t)(rnd() % 451); /* 50..500 */
}

START_TEST(weights_3_to_1_give_75_25_token_shares)
{
    rng_state = 0x1234567;
    sl_drr_t *d = new_drr();
    const int64_t quantum[2] = {3 * 256, 256};
    int64_t tokens[2], count[2];
    run_backlogged(d, 2, quantum, cost_random, 2000000, tokens, count);
    double share = (double)tokens[0] / (double)(tokens[0] + tokens[1]);
    ck_assert_msg(fabs(share - 0.75) <= 0.03, "share of the weight-3 flow %.4f", share);
    sl_drr_free(d);
}
END_TEST

START_TEST(huge_job_is_served_without_starving_others)
{
    sl_drr_t *d = new_drr();
    push(d, 0, 100, -1, 10000, 0); /* 100 quanta */
    for (int i = 0; i < 1000; i++)
        push(d, 1, 100, i, 50, 0);
    int b_before = 0, pops = 0, huge_served = 0;
    while (!huge_served) {
        int flow = -1;
        int item = serve(d, &flow, NULL);
        pops++;
        ck_assert_int_lt(pops, 1000);
        if (item == -1)
            huge_served = 1;
        else
            b_before++;
    }
    /* B got its two jobs per round while A saved up for 100 rounds */
    ck_assert_int_ge(b_before, 190);
    ck_assert_int_le(b_before, 202);
    /* and B goes on afterwards */
    int flow = -1;
    serve(d, &flow, NULL);
    ck_assert_int_eq(flow, 1);
    ck_assert_int_eq(sl_drr_active_flows(d), 1);
    sl_drr_free(d);
}
END_TEST

START_TEST(emptied_flow_loses_its_deficit)
{
    sl_drr_t *d = new_drr();
    push(d, 0, 1000, 1, 100, 0);
    for (int i = 0; i < 10; i++)
        push(d, 1, 1000, 100 + i, 1000, 0);
    int flow = -1;
    ck_assert_int_eq(serve(d, &flow, NULL), 1); /* A had 1000, used 100, then emptied */
    ck_assert_int_eq(sl_drr_active_flows(d), 1);
    ck_assert_uint_eq(sl_drr_flow_len(d, 0), 0);
    /* A comes back with a 1500-token job: with 900 banked it would go after one B job; without,
     * it needs two visits (1000, then 2000), so two B jobs go first. */
    push(d, 0, 1000, 2, 1500, 0);
    ck_assert_int_eq(serve(d, &flow, NULL), 100);
    ck_assert_int_eq(serve(d, &flow, NULL), 101);
    ck_assert_int_eq(serve(d, &flow, NULL), 2);
    sl_drr_free(d);
}
END_TEST

START_TEST(skip_moves_on_and_resets_the_deficit)
{
    sl_drr_t *d = new_drr();
    for (int i = 0; i < 100; i++) {
        push(d, 0, 1000, i, 100, 0);
        push(d, 1, 1000, 1000 + i, 100, 0);
    }
    int64_t cost = 0;
    int flow = -1;
    ck_assert_ptr_nonnull(sl_drr_peek(d, &cost, &flow));
    ck_assert_int_eq(flow, 0);
    sl_drr_skip(d); /* A cannot be served now (its own limit): move on, bank nothing */
    ck_assert_int_eq(VAL(sl_drr_peek(d, &cost, &flow)), 1000);
    ck_assert_int_eq(flow, 1);
    sl_drr_pop(d);
    sl_drr_skip(d); /* B had 900 left: gone */
    /* A's next visit brings exactly one quantum: ten 100-token jobs, then B again */
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(serve(d, &flow, NULL), i);
        ck_assert_int_eq(flow, 0);
    }
    ck_assert_int_eq(serve(d, &flow, NULL), 1001);
    ck_assert_int_eq(flow, 1);
    /* B's deficit was reset by the skip: one quantum = ten jobs on this visit */
    for (int i = 2; i < 11; i++) {
        ck_assert_int_eq(serve(d, &flow, NULL), 1000 + i);
        ck_assert_int_eq(flow, 1);
    }
    ck_assert_int_eq(serve(d, &flow, NULL), 10);
    ck_assert_int_eq(flow, 0);
    /* skipping the only flow comes back to it; skip on an empty scheduler is harmless */
    sl_drr_t *e = new_drr();
    sl_drr_skip(e);
    push(e, 3, 10, 7, 5, 0);
    sl_drr_skip(e);
    ck_assert_int_eq(serve(e, &flow, NULL), 7);
    ck_assert_int_eq(flow, 3);
    sl_drr_free(e);
    sl_drr_free(d);
}
END_TEST

START_TEST(peek_without_pop_keeps_the_place)
{
    sl_drr_t *d = new_drr();
    push(d, 0, 100, 1, 250, 0);
    push(d, 1, 100, 2, 100, 0);
    /* A needs three visits; B fits on its first */
    int64_t cost = 0;
    int flow = -1;
    ck_assert_int_eq(VAL(sl_drr_peek(d, &cost, &flow)), 2);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(VAL(sl_drr_peek(d, &cost, &flow)), 2); /* no quantum added again */
        ck_assert_int_eq(cost, 100);
        ck_assert_int_eq(flow, 1);
    }
    sl_drr_pop(d);
    ck_assert_int_eq(VAL(sl_drr_peek(d, &cost, &flow)), 1);
    ck_assert_int_eq(cost, 250);
    sl_drr_free(d);
}
END_TEST

/* Nodes kept in the items (sl_drr_push_node): served and removed like allocated ones, left out
 * of any line afterwards so they can queue again, refused while queued, and never freed by DRR
 * (ASan would report a free of this stack array). */
START_TEST(nodes_kept_in_the_items_queue_and_leave_like_allocated_ones)
{
    sl_drr_t *d = new_drr();
    sl_drr_node_t nodes[4];
    for (int i = 0; i < 4; i++)
        sl_drr_node_init(&nodes[i]);
    ck_assert(!sl_drr_queued(&nodes[0]));
    sl_drr_place_t a = {.group = 0, .group_quantum = 1, .flow = 0, .quantum = 300, .cost = 100};
    sl_drr_place_t b = a;
    b.flow = 1;
    ck_assert_int_eq(sl_drr_push_node(d, &a, &nodes[0], ITEM(0), 0), 0);
    ck_assert_int_eq(sl_drr_push_node(d, &a, &nodes[1], ITEM(1), 0), 0);
    ck_assert_int_eq(sl_drr_push_node(d, &b, &nodes[2], ITEM(2), 0), 0);
    push(d, 1, 300, 3, 100, 0); /* an allocated node in the same line */
    ck_assert(sl_drr_queued(&nodes[0]));
    /* a node already in a line is refused, and the line is unchanged */
    ck_assert_int_eq(sl_drr_push_node(d, &b, &nodes[0], ITEM(0), 0), -1);
    ck_assert_uint_eq(sl_drr_len(d), 4);
    int flow = -1;
    ck_assert_int_eq(serve(d, &flow, NULL), 0);
    ck_assert(!sl_drr_queued(&nodes[0]));
    sl_drr_remove(d, &nodes[1]);
    ck_assert(!sl_drr_queued(&nodes[1]));
    sl_drr_remove(d, &nodes[1]); /* not queued: nothing happens */
    ck_assert_uint_eq(sl_drr_len(d), 2);
    /* out of the line, a node queues again */
    ck_assert_int_eq(sl_drr_push_node(d, &a, &nodes[0], ITEM(0), 1), 0);
    ck_assert_uint_eq(sl_drr_len(d), 3);
    ck_assert_uint_eq(sl_drr_flow_len(d, 0), 1);
    /* freed with caller's nodes still queued: DRR frees only its own */
    sl_drr_free(d);
}
END_TEST

START_TEST(remove_takes_out_a_queued_item_without_charging)
{
    sl_drr_t *d = new_drr();
    sl_drr_node_t *n1 = sl_drr_push(d, 0, 300, ITEM(1), 100, 0);
    sl_drr_node_t *n2 = sl_drr_push(d, 0, 300, ITEM(2), 100, 0);
    sl_drr_node_t *n3 = sl_drr_push(d, 0, 300, ITEM(3), 100, 0);
    sl_drr_node_t *b1 = sl_drr_push(d, 1, 300, ITEM(10), 100, 0);
    ck_assert_ptr_nonnull(n1);
    ck_assert_ptr_nonnull(n3);
    ck_assert_uint_eq(sl_drr_len(d), 4);
    sl_drr_remove(d, n2);
    ck_assert_uint_eq(sl_drr_len(d), 3);
    ck_assert_uint_eq(sl_drr_flow_len(d, 0), 2);
    int flow = -1;
    ck_assert_int_eq(serve(d, &flow, NULL), 1);
    /* removing did not charge A: 300 - 100 left, so 3 still goes before B */
    ck_assert_int_eq(serve(d, &flow, NULL), 3);
    ck_assert_int_eq(sl_drr_active_flows(d), 1);
    /* removing a flow's last item takes the flow out of the round */
    sl_drr_remove(d, b1);
    ck_assert_int_eq(sl_drr_active_flows(d), 0);
    ck_assert_uint_eq(sl_drr_len(d), 0);
    ck_assert_ptr_null(sl_drr_peek(d, NULL, NULL));
    sl_drr_remove(d, NULL);
    /* removing the head of the flow being visited, between peek and pop */
    push(d, 0, 300, 4, 100, 0);
    sl_drr_node_t *n5 = sl_drr_push(d, 1, 300, ITEM(5), 100, 0);
    push(d, 1, 300, 6, 100, 0);
    ck_assert_int_eq(VAL(sl_drr_peek(d, NULL, NULL)), 4);
    sl_drr_pop(d);
    ck_assert_int_eq(VAL(sl_drr_peek(d, NULL, &flow)), 5);
    sl_drr_remove(d, n5);
    ck_assert_int_eq(VAL(sl_drr_peek(d, NULL, &flow)), 6);
    sl_drr_pop(d);
    ck_assert_uint_eq(sl_drr_len(d), 0);
    sl_drr_free(d);
}
END_TEST

START_TEST(push_front_puts_a_retry_at_the_head_of_its_flow)
{
    sl_drr_t *d = new_drr();
    push(d, 0, 1000, 1, 100, 0);
    push(d, 0, 1000, 2, 100, 0);
    push(d, 0, 1000, 9, 100, 1 /*front*/);
    push(d, 1, 1000, 20, 100, 0);
    push(d, 1, 1000, 21, 100, 1 /*front*/);
    int flow = -1;
    ck_assert_int_eq(serve(d, &flow, NULL), 9);
    ck_assert_int_eq(serve(d, &flow, NULL), 1);
    ck_assert_int_eq(serve(d, &flow, NULL), 2);
    ck_assert_int_eq(serve(d, &flow, NULL), 21);
    ck_assert_int_eq(serve(d, &flow, NULL), 20);
    /* front on an empty flow just queues it */
    push(d, 2, 1000, 30, 100, 1);
    ck_assert_int_eq(serve(d, &flow, NULL), 30);
    ck_assert_int_eq(flow, 2);
    ck_assert_ptr_null(sl_drr_peek(d, NULL, NULL));
    sl_drr_free(d);
}
END_TEST

START_TEST(a_flow_can_appear_and_vanish)
{
    sl_drr_t *d = new_drr();
    for (int i = 0; i < 50; i++) {
        push(d, 0, 200, 0, 100, 0);
        push(d, 1, 200, 1, 100, 0);
    }
    ck_assert_int_eq(sl_drr_active_flows(d), 2);
    int served[64] = {0};
    int flow = -1;
    for (int i = 0; i < 8; i++)
        served[serve(d, &flow, NULL)]++;
    /* a high flow id appears mid-round, gets its turn, and leaves when empty */
    push(d, 40, 200, 40, 100, 0);
    push(d, 40, 200, 40, 100, 0);
    ck_assert_int_eq(sl_drr_active_flows(d), 3);
    ck_assert_uint_eq(sl_drr_flow_len(d, 40), 2);
    int pops = 0;
    while (sl_drr_flow_len(d, 40) > 0) {
        served[serve(d, &flow, NULL)]++;
        ck_assert_int_lt(++pops, 10);
    }
    ck_assert_int_eq(served[40], 2);
    ck_assert_int_eq(sl_drr_active_flows(d), 2);
    /* the others go on, alternating fairly */
    for (int i = 0; i < 40; i++)
        served[serve(d, &flow, NULL)]++;
    ck_assert_int_le(abs(served[0] - served[1]), 2);
    /* and it can come back */
    push(d, 40, 200, 40, 100, 0);
    pops = 0;
    while (sl_drr_flow_len(d, 40) > 0) {
        serve(d, &flow, NULL);
        ck_assert_int_lt(++pops, 10);
    }
    ck_assert_uint_eq(sl_drr_flow_len(d, 99), 0); /* never seen */
    ck_assert_uint_eq(sl_drr_flow_len(d, -1), 0);
    ck_assert_ptr_null(sl_drr_push(d, -1, 100, ITEM(1), 1, 0));
    sl_drr_free(d);
}
END_TEST

START_TEST(peek_on_empty_returns_null)
{
    sl_drr_t *d = new_drr();
    int64_t cost = 77;
    int flow = 77;
    ck_assert_ptr_null(sl_drr_peek(d, &cost, &flow));
    sl_drr_pop(d); /* harmless */
    ck_assert_uint_eq(sl_drr_len(d), 0);
    ck_assert_int_eq(sl_drr_active_flows(d), 0);
    push(d, 0, 10, 5, 30, 0);
    ck_assert_int_eq(serve(d, &flow, &cost), 5);
    ck_assert_int_eq(cost, 30);
    ck_assert_ptr_null(sl_drr_peek(d, &cost, &flow));
    ck_assert_uint_eq(sl_drr_len(d), 0);
    sl_drr_free(d);
    sl_drr_free(NULL);
}
END_TEST

static int64_t cost_wide(int flow)
{
    (void)flow;
    return 1 + (int64_t)(rnd() % 2000);
}

START_TEST(four_equal_flows_have_jain_index_at_least_0_99)
{
    rng_state = 0xfeedface;
    sl_drr_t *d = new_drr();
    const int64_t quantum[4] = {1024, 1024, 1024, 1024};
    int64_t tokens[4], count[4];
    run_backlogged(d, 4, quantum, cost_wide, 4000000, tokens, count);
    double sum = 0, sq = 0;
    for (int f = 0; f < 4; f++) {
        sum += (double)tokens[f];
        sq += (double)tokens[f] * (double)tokens[f];
    }
    double jain = sum * sum / (4 * sq);
    ck_assert_msg(jain >= 0.99, "Jain index %.5f", jain);
    /* ... and each flow's share is close to a quarter */
    for (int f = 0; f < 4; f++)
        ck_assert_double_le(fabs((double)tokens[f] / sum - 0.25), 0.02);
    sl_drr_free(d);
}
END_TEST


/* Classes share first: one interactive tenant (class weight 8) against ten batch tenants (class
 * weight 1), all backlogged, gets 8/9 of the tokens; the ten batch tenants split the rest
 * evenly. A flat ring would have given the interactive tenant 8/18. */
START_TEST(classes_share_by_weight_before_tenants)
{
    sl_drr_t *d = new_drr();
    enum { BATCH = 10, COST = 300 };
    int64_t tokens[BATCH + 1] = {0};
    for (int f = 0; f <= BATCH; f++) {
        for (int k = 0; k < 4; k++) {
            sl_drr_place_t p = {.group = f == 0 ? 0 : 3, .group_quantum = f == 0 ? 8000 : 1000,
                                .flow = f, .quantum = 1000, .cost = COST, .key = 0};
            ck_assert_ptr_nonnull(sl_drr_push_at(d, &p, ITEM(f), 0));
        }
    }
    for (int i = 0; i < 30000; i++) {
        int flow = -1;
        int64_t cost = 0;
        serve(d, &flow, &cost);
        tokens[flow] += cost;
        sl_drr_place_t p = {.group = flow == 0 ? 0 : 3, .group_quantum = flow == 0 ? 8000 : 1000,
                            .flow = flow, .quantum = 1000, .cost = COST, .key = 0};
        ck_assert_ptr_nonnull(sl_drr_push_at(d, &p, ITEM(flow), 0));
    }
    double total = 0;
    for (int f = 0; f <= BATCH; f++)
        total += (double)tokens[f];
    ck_assert_double_eq_tol((double)tokens[0] / total, 8.0 / 9.0, 0.01);
    for (int f = 1; f <= BATCH; f++)
        ck_assert_double_eq_tol((double)tokens[f] / total, 1.0 / 90.0, 0.003);
    sl_drr_free(d);
}
END_TEST

/* Within a flow, the earliest key goes first; equal keys keep their arrival order; a push to
 * the front (a retry) goes first whatever its key. */
START_TEST(earliest_key_first_within_a_flow)
{
    sl_drr_t *d = new_drr();
    const int64_t keys[] = {50, 10, 30, 30, 20};
    for (int i = 0; i < 5; i++) {
        sl_drr_place_t p = {.group = 0, .group_quantum = 1000, .flow = 1, .quantum = 1000,
                            .cost = 10, .key = keys[i]};
        ck_assert_ptr_nonnull(sl_drr_push_at(d, &p, ITEM(i), 0));
    }
    sl_drr_place_t retry = {.group = 0, .group_quantum = 1000, .flow = 1, .quantum = 1000,
                            .cost = 10, .key = 99};
    ck_assert_ptr_nonnull(sl_drr_push_at(d, &retry, ITEM(9), 1));
    const int order[] = {9, 1, 4, 2, 3, 0};
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(serve(d, NULL, NULL), order[i]);
    ck_assert_ptr_null(sl_drr_peek(d, NULL, NULL));
    sl_drr_free(d);
}
END_TEST

/* A flow blocked by its own limit (skipped) must not keep the other classes waiting. */
START_TEST(skip_ends_the_group_turn)
{
    sl_drr_t *d = new_drr();
    sl_drr_place_t a = {.group = 0, .group_quantum = 8000, .flow = 0, .quantum = 1000,
                        .cost = 100, .key = 0};
    sl_drr_place_t b = {.group = 3, .group_quantum = 1000, .flow = 7, .quantum = 1000,
                        .cost = 100, .key = 0};
    ck_assert_ptr_nonnull(sl_drr_push_at(d, &a, ITEM(0), 0));
    ck_assert_ptr_nonnull(sl_drr_push_at(d, &b, ITEM(7), 0));
    int flow = -1;
    ck_assert_ptr_nonnull(sl_drr_peek(d, NULL, &flow));
    ck_assert_int_eq(flow, 0);
    sl_drr_skip(d);
    ck_assert_ptr_nonnull(sl_drr_peek(d, NULL, &flow));
    ck_assert_int_eq(flow, 7);
    ck_assert_int_eq(sl_drr_active_flows(d), 2);
    /* a flow stays in the group it was first pushed to */
    sl_drr_place_t wrong = b;
    wrong.group = 1;
    ck_assert_ptr_null(sl_drr_push_at(d, &wrong, ITEM(8), 0));
    sl_drr_free(d);
}
END_TEST


/* Serves n items from a backlogged set of flows (each served item is replaced) and returns
 * each flow's token share. place[f] describes flow f. */
static void backlogged_shares(sl_drr_t *d, const sl_drr_place_t *place, int nflows, int n,
                              double *share)
{
    int64_t tokens[32] = {0};
    for (int f = 0; f < nflows; f++) {
        for (int k = 0; k < 3; k++)
            ck_assert_ptr_nonnull(sl_drr_push_at(d, &place[f], ITEM(f), 0));
    }
    for (int i = 0; i < n; i++) {
        int flow = -1;
        int64_t cost = 0;
        serve(d, &flow, &cost);
        tokens[flow] += cost;
        ck_assert_ptr_nonnull(sl_drr_push_at(d, &place[flow], ITEM(flow), 0));
    }
    double total = 0;
    for (int f = 0; f < nflows; f++)
        total += (double)tokens[f];
    for (int f = 0; f < nflows; f++)
        share[f] = (double)tokens[f] / total;
}

/* A tenant guaranteed half the pool gets half against nine borrowers of the same weight, who
 * split the rest evenly; without the guarantee it would get a tenth. */
START_TEST(guaranteed_share_holds_against_many_borrowers)
{
    sl_drr_t *d = new_drr();
    sl_drr_place_t place[10];
    for (int f = 0; f < 10; f++)
        place[f] = (sl_drr_place_t){.group = 1, .group_quantum = 4000, .flow = f,
                                    .quantum = 1000, .share = f == 0 ? 0.5 : 0, .cost = 250};
    double share[10];
    backlogged_shares(d, place, 10, 40000, share);
    ck_assert_double_eq_tol(share[0], 0.5, 0.02);
    for (int f = 1; f < 10; f++)
        ck_assert_double_eq_tol(share[f], 0.5 / 9, 0.01);
    sl_drr_free(d);
}
END_TEST

/* The guarantee holds across classes: the guaranteed tenant's batch work (class weight 1)
 * against borrowers' standard work (class weight 4). */
START_TEST(guaranteed_share_holds_across_classes)
{
    sl_drr_t *d = new_drr();
    sl_drr_place_t place[4];
    place[0] = (sl_drr_place_t){.group = 3, .group_quantum = 1000, .flow = 0, .quantum = 1000,
                                .share = 0.5, .cost = 250};
    for (int f = 1; f < 4; f++)
        place[f] = (sl_drr_place_t){.group = 1, .group_quantum = 4000, .flow = f,
                                    .quantum = 1000, .share = 0, .cost = 250};
    double share[4];
    backlogged_shares(d, place, 4, 40000, share);
    ck_assert_double_eq_tol(share[0], 0.5, 0.02);
    sl_drr_free(d);
}
END_TEST

/* A guarantee only counts while its tenant has work: once its flow empties, the others share
 * the pool by their weights again. */
START_TEST(guarantee_lapses_when_its_flow_empties)
{
    sl_drr_t *d = new_drr();
    sl_drr_place_t g = {.group = 3, .group_quantum = 1000, .flow = 0, .quantum = 1000,
                        .share = 0.5, .cost = 250};
    ck_assert_ptr_nonnull(sl_drr_push_at(d, &g, ITEM(0), 0));
    ck_assert_int_eq(serve(d, NULL, NULL), 0);
    sl_drr_place_t place[2];
    for (int f = 0; f < 2; f++)
        place[f] = (sl_drr_place_t){.group = 1, .group_quantum = 4000, .flow = f + 1,
                                    .quantum = f == 0 ? 3000 : 1000, .cost = 250};
    double share[2];
    /* flows 1 and 2 at 3:1; backlogged_shares indexes flows 0..n-1, so shift by hand */
    int64_t tokens[3] = {0};
    for (int f = 0; f < 2; f++)
        for (int k = 0; k < 3; k++)
            ck_assert_ptr_nonnull(sl_drr_push_at(d, &place[f], ITEM(f + 1), 0));
    for (int i = 0; i < 8000; i++) {
        int flow = -1;
        int64_t cost = 0;
        serve(d, &flow, &cost);
        tokens[flow] += cost;
        ck_assert_ptr_nonnull(sl_drr_push_at(d, &place[flow - 1], ITEM(flow), 0));
    }
    share[0] = (double)tokens[1] / (double)(tokens[1] + tokens[2]);
    ck_assert_double_eq_tol(share[0], 0.75, 0.02);
    sl_drr_free(d);
}
END_TEST

/* A quantum of zero is taken as the smallest one: the flow is still served, never starved,
 * and peek does not spin. */
START_TEST(zero_weight_is_served_at_the_smallest_quantum)
{
    sl_drr_t *d = new_drr();
    sl_drr_place_t place[2] = {
        {.group = 1, .group_quantum = 1000, .flow = 0, .quantum = 0, .cost = 50},
        {.group = 1, .group_quantum = 1000, .flow = 1, .quantum = 1000, .cost = 50}};
    double share[2];
    backlogged_shares(d, place, 2, 20000, share);
    ck_assert_double_gt(share[0], 0);
    ck_assert_double_lt(share[0], 0.01);
    sl_drr_free(d);
}
END_TEST

/* Two backlogged flows of equal weight whose jobs both really cost 300: A's are estimated at
 * 100, B's at 300. Each served job's real cost is known some jobs later (its call ends) and,
 * with correct = 1, charged to its flow as the difference. Returns A's share of the real
 * cost served. */
static double corrected_share(int correct)
{
    sl_drr_t *d = new_drr();
    enum { LAG = 6 };
    int pending_flow[LAG];
    int64_t pending_delta[LAG];
    int np = 0;
    for (int f = 0; f < 2; f++)
        for (int i = 0; i < 8; i++)
            push(d, f, 500, f, f == 0 ? 100 : 300, 0);
    double real[2] = {0, 0};
    for (int n = 0; n < 20000; n++) {
        int flow = -1;
        int64_t cost = 0;
        serve(d, &flow, &cost);
        real[flow] += 300;
        push(d, flow, 500, flow, flow == 0 ? 100 : 300, 0);
        if (np == LAG) {
            if (correct)
                sl_drr_charge(d, pending_flow[0], pending_delta[0]);
            memmove(pending_flow, pending_flow + 1, (LAG - 1) * sizeof *pending_flow);
            memmove(pending_delta, pending_delta + 1, (LAG - 1) * sizeof *pending_delta);
            np--;
        }
        pending_flow[np] = flow;
        pending_delta[np] = 300 - cost;
        np++;
    }
    sl_drr_free(d);
    return real[0] / (real[0] + real[1]);
}

START_TEST(charging_the_real_cost_evens_out_underestimated_jobs)
{
    /* Without the correction, the flow whose jobs are underestimated 3x gets 3/4 of what the
     * limit really counts; with it, half. */
    double uncorrected = corrected_share(0), corrected = corrected_share(1);
    ck_assert_msg(uncorrected > 0.7, "uncorrected share %.3f", uncorrected);
    ck_assert_msg(fabs(corrected - 0.5) < 0.02, "corrected share %.3f", corrected);
}
END_TEST

START_TEST(charge_is_bounded_and_skips_idle_flows)
{
    sl_drr_t *d = new_drr();
    push(d, 0, 100, 0, 50, 0);
    push(d, 0, 100, 1, 50, 0);
    push(d, 1, 100, 2, 50, 0);
    int flow = -1;
    serve(d, &flow, NULL);
    ck_assert_int_eq(flow, 0);
    /* a huge debt is capped at DRR_MAX_DEBT_QUANTA quanta: flow 1 is served that many rounds
     * ahead, then flow 0 again */
    sl_drr_charge(d, 0, 1000000);
    for (int i = 0; i < 8; i++)
        push(d, 1, 100, 2, 50, 0);
    int ones = 0;
    for (;;) {
        serve(d, &flow, NULL);
        if (flow == 0)
            break;
        ones++;
        push(d, 1, 100, 2, 50, 0);
        ck_assert_int_lt(ones, 10000);
    }
    /* 16 quanta of debt less the remaining deficit take about 17 of flow 0's visits, in each
     * of which flow 1 is served twice */
    ck_assert_int_ge(ones, 2 * DRR_MAX_DEBT_QUANTA);
    ck_assert_int_le(ones, 2 * (DRR_MAX_DEBT_QUANTA + 2) + 1);
    /* a flow with nothing queued is not charged (it starts afresh), nor an unknown one */
    sl_drr_charge(d, 0, 1000000);
    sl_drr_charge(d, 7, 5);
    sl_drr_charge(d, -1, 5);
    push(d, 0, 100, 0, 50, 0);
    int served0 = 0;
    for (int i = 0; i < 4 && !served0; i++) {
        serve(d, &flow, NULL);
        served0 = flow == 0;
        if (!served0)
            push(d, 1, 100, 2, 50, 0);
    }
    ck_assert(served0);
    sl_drr_free(d);
}
END_TEST

/* Serving beside the current flow keeps DRR's place: the current flow stays current, the
 * others are charged at once and go at most DRR_BESIDE_DEBT_QUANTA quanta ahead, and over
 * many rounds the token shares come out as if nothing had been served out of turn. */
START_TEST(serving_beside_keeps_the_turn_and_the_shares)
{
    sl_drr_t *d = new_drr();
    for (int f = 0; f < 3; f++)
        for (int i = 0; i < 2 * DRR_BESIDE_DEBT_QUANTA; i++)
            push(d, f, 100, f, 100, 0);
    int cur = -1;
    ck_assert_ptr_nonnull(sl_drr_peek(d, NULL, &cur));
    ck_assert_int_eq(cur, 0);
    ck_assert_ptr_null(sl_drr_peek_beside(d, cur, NULL)); /* not the current flow */
    int flows[8];
    ck_assert_int_eq(sl_drr_beside(d, flows, 8), 2);
    ck_assert_int_eq(flows[0], 1);
    ck_assert_int_eq(flows[1], 2);
    int beside = 0;
    int64_t cost = 0;
    while (sl_drr_peek_beside(d, 1, &cost) != NULL) {
        ck_assert_int_eq(cost, 100);
        sl_drr_pop_beside(d, 1);
        beside++;
    }
    ck_assert_int_eq(beside, DRR_BESIDE_DEBT_QUANTA);
    ck_assert_uint_eq(sl_drr_flow_len(d, 1), (size_t)DRR_BESIDE_DEBT_QUANTA);
    /* The current flow kept its turn; flow 1 then waits out the rounds it ran ahead. */
    int f = -1;
    ck_assert_int_eq(serve(d, &f, NULL), 0);
    int64_t tokens[3] = {100, (int64_t)beside * 100, 0};
    for (int k = 0; k < 4; k++) {
        serve(d, &f, &cost);
        ck_assert_int_ne(f, 1);
        tokens[f] += cost;
        push(d, f, 100, f, 100, 0);
    }
    sl_drr_free(d);

    /* Many rounds, flow 1 served beside whenever it may be: shares stay equal. */
    d = new_drr();
    for (f = 0; f < 3; f++) {
        tokens[f] = 0;
        for (int i = 0; i < 8; i++)
            push(d, f, 100, f, 100, 0);
    }
    for (int k = 0; k < 30000; k++) {
        int flow = -1;
        ck_assert_ptr_nonnull(sl_drr_peek(d, &cost, &flow));
        if (flow != 1 && sl_drr_peek_beside(d, 1, &cost) != NULL) {
            sl_drr_pop_beside(d, 1);
            flow = 1;
        } else {
            sl_drr_pop(d);
        }
        tokens[flow] += cost;
        push(d, flow, 100, flow, 100, 0);
    }
    for (f = 0; f < 3; f++)
        ck_assert_msg(fabs((double)tokens[f] / 3e6 - 1.0 / 3) < 0.01, "flow %d: %lld tokens",
                      f, (long long)tokens[f]);
    sl_drr_free(d);
}
END_TEST

/* Only flows of the current group may be served beside it (classes share first). */
START_TEST(serving_beside_stays_in_the_current_group)
{
    sl_drr_t *d = new_drr();
    sl_drr_place_t a = {.group = 0, .group_quantum = 100, .flow = 0, .quantum = 100, .cost = 50};
    sl_drr_place_t b = {.group = 1, .group_quantum = 100, .flow = 1, .quantum = 100, .cost = 50};
    ck_assert_ptr_nonnull(sl_drr_push_at(d, &a, ITEM(0), 0));
    ck_assert_ptr_nonnull(sl_drr_push_at(d, &b, ITEM(1), 0));
    int cur = -1;
    ck_assert_ptr_nonnull(sl_drr_peek(d, NULL, &cur));
    int flows[4];
    ck_assert_int_eq(sl_drr_beside(d, flows, 4), 0);
    ck_assert_ptr_null(sl_drr_peek_beside(d, 1 - cur, NULL));
    sl_drr_pop_beside(d, 1 - cur); /* a no-op */
    ck_assert_uint_eq(sl_drr_len(d), 2);
    sl_drr_free(d);
}
END_TEST

static Suite *drr_suite(void)
{
    Suite *s = suite_create("drr");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, equal_quanta_give_equal_token_shares_not_equal_request_counts);
    tcase_add_test(tc, nodes_kept_in_the_items_queue_and_leave_like_allocated_ones);
    tcase_add_test(tc, weights_3_to_1_give_75_25_token_shares);
    tcase_add_test(tc, huge_job_is_served_without_starving_others);
    tcase_add_test(tc, emptied_flow_loses_its_deficit);
    tcase_add_test(tc, skip_moves_on_and_resets_the_deficit);
    tcase_add_test(tc, peek_without_pop_keeps_the_place);
    tcase_add_test(tc, remove_takes_out_a_queued_item_without_charging);
    tcase_add_test(tc, push_front_puts_a_retry_at_the_head_of_its_flow);
    tcase_add_test(tc, a_flow_can_appear_and_vanish);
    tcase_add_test(tc, peek_on_empty_returns_null);
    tcase_add_test(tc, four_equal_flows_have_jain_index_at_least_0_99);
    tcase_add_test(tc, classes_share_by_weight_before_tenants);
    tcase_add_test(tc, earliest_key_first_within_a_flow);
    tcase_add_test(tc, skip_ends_the_group_turn);
    tcase_add_test(tc, guaranteed_share_holds_against_many_borrowers);
    tcase_add_test(tc, guaranteed_share_holds_across_classes);
    tcase_add_test(tc, guarantee_lapses_when_its_flow_empties);
    tcase_add_test(tc, zero_weight_is_served_at_the_smallest_quantum);
    tcase_add_test(tc, charging_the_real_cost_evens_out_underestimated_jobs);
    tcase_add_test(tc, charge_is_bounded_and_skips_idle_flows);
    tcase_add_test(tc, serving_beside_keeps_the_turn_and_the_shares);
    tcase_add_test(tc, serving_beside_stays_in_the_current_group);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return 1;
    SRunner *sr = srunner_create(drr_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
