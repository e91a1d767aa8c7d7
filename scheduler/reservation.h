/* reservation.h - what an admission reserves on a job's path, and how it is settled.
 *
 * A lease holds one charge per bucket of the job's path (held_t), each with the rule that
 * settles it when the call ends (rule_t): what the provider counted at receipt stays, real use
 * replaces an estimate, a gauge's slot comes back. Settling also clamps the deployment's
 * buckets to what the provider's rate-limit headers say it had left. Internal to the scheduler
 * (core.h).
 */
#ifndef SL_RESERVATION_H
#define SL_RESERVATION_H

#include <jansson.h>
#include <stdint.h>

#include "core.h"

/* How reconciliation settles a charge, by what the limit counts:
 *   KEEP: the provider counted the reserved amount at receipt (OpenAI-style TPM, requests), so
 *         it stays whatever the call used;
 *   ACTUAL_*: what was really used replaces the estimate: unused tokens come back, overage
 *         becomes debt (total, input, input without cache reads, output, spend in USD);
 *   RELEASE: a gauge's slot comes back when the call ends;
 *   RECEIPT_MAX / RECEIPT_SUM: the provider counted max(input, max_tokens) or input +
 *         max_tokens at receipt (OpenAI, Azure): reserved with the learned input estimate and
 *         kept, or raised to what the real input shows the provider counted (debt). */
typedef enum {
    RULE_KEEP = 0,
    RULE_ACTUAL_TOTAL,
    RULE_ACTUAL_INPUT,
    RULE_ACTUAL_INPUT_UNCACHED,
    RULE_ACTUAL_OUTPUT,
    RULE_ACTUAL_SPEND,
    RULE_RELEASE,
    RULE_RECEIPT_MAX,
    RULE_RECEIPT_SUM,
    RULE_COUNT_
} rule_t;

/* The rule's name as the store keeps it ("keep", "actual_total", ...). */
const char *sl_reservation_rule_name(rule_t rule);
/* The rule of a stored name; RULE_KEEP for a name it does not know. */
rule_t sl_reservation_rule_parse(const char *name);

/* What a job asks for, as the ledger reserves it: the deterministic estimates from ingest, and
 * what the scheduler learned (calib.h). */
typedef struct {
    int64_t input_raw;  /* ingest's count: what a provider counting at receipt sees */
    int64_t input;      /* corrected by what real inputs of the route looked like */
    int64_t max_tokens; /* the request's max_tokens */
    int64_t output;     /* min(max_tokens, p95 of recent outputs) */
} demand_t;

/* How an attempt ended, for settling its charges. */
typedef enum {
    END_USAGE = 0, /* the provider reported real usage */
    END_NO_USAGE,  /* it failed without usage: the call may still have counted */
    END_REFUSED,   /* the provider refused it (429, 503, 529) without processing it */
    END_NOT_SENT,  /* the dispatcher never called */
    END_EXPIRED    /* nobody reported back: the call may have happened */
} end_t;

/* What job j asks for now, as the ledger would reserve it. */
demand_t sl_reservation_demand(const sl_sched_t *s, const job_t *j);

/* What a job costs in the DRR: the tokens it will reserve as learned so far. */
int64_t sl_reservation_cost(const sl_sched_t *s, const job_t *j);

/* What a call costs at price p, in USD (cached: cache reads among the input tokens). */
double sl_reservation_spend_usd(const sl_price_cfg_t *p, int64_t input, int64_t cached,
                                int64_t output);

/* The amount and settlement rule of one bucket for a job going to deployment dc, by what the
 * bucket counts and on which side it sits. Provider-side buckets count the way the provider
 * does; the callers' budgets count the learned estimate, settled at real use. */
void sl_reservation_charge(const binfo_t *bi, const sl_deployment_cfg_t *dc, const demand_t *dm,
                           double *amount, rule_t *rule);

/* Every charge of job j on deployment d, callers' side first. */
void sl_reservation_build(sl_sched_t *s, const job_t *j, int d, held_t *h);

/* A reservation id (32 hex digits) that sorts by creation: 12 digits of the clock, 4 of a
 * counter, 16 random. New rows then land at the end of the reservations table's B-tree
 * instead of at random places in it, which keeps the one write per admission cheap. */
void sl_reservation_new_id(sl_sched_t *s, int64_t now_ms, char out[33]);

/* Settles every charge j holds and closes its reservation as `state` ("reconciled" or
 * "expired") in one write; counts what over-reservation held back (tokens reserved above real
 * use, on buckets settled at real use) and what it missed (overage). j's held charges are
 * freed whatever the store says, and its route unblocked: what came back may let work in. */
sl_err_t sl_reservation_settle(sl_sched_t *s, job_t *j, end_t end, const char *state, int64_t in,
                               int64_t out, int64_t cached, const char *outcome, int64_t now_ms);

/* Provider headers of a response clamp the deployment's own per-minute buckets to what the
 * provider said it had left when it received the request (never raising them). */
void sl_reservation_clamp(sl_sched_t *s, job_t *j, json_t *ratelimit, int64_t now_ms);

#endif
