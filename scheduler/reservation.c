/* reservation.c - building a job's charges, reservation ids, settling and provider-header
 * clamps (see reservation.h).
 */
#include "reservation.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "buckets.h"
#include "calib.h"
#include "capacity.h"
#include "job.h"
#include "ledger.h"
#include "store.h"
#include "util.h"

sl_demand_t sl_reservation_demand(const sl_sched_t *s, const job_t *j)
{
    sl_demand_t dm;
    dm.input_raw = j->est_input;
    dm.input = sl_calib_input(s->calib, j->route, j->est_input);
    dm.max_tokens = j->est_output;
    /* A stream is charged as it goes and may be cut: it holds max_tokens until it ends. */
    dm.output = (j->flags & JF_STREAM) ? j->est_output
                                       : sl_calib_output(s->calib, j->route, j->cls, j->est_output);
    return dm;
}

/* Whether a provider-side limit is one the DRR shares: a per-minute rate of requests or tokens
 * (daily quotas, spend and concurrency are not what the pool's fair shares are of). */
static int shared_limit(const sl_limit_cfg_t *lc)
{
    if (lc->algorithm != SL_LIMIT_TOKEN_BUCKET && lc->algorithm != SL_LIMIT_SLIDING_WINDOW)
        return 0;
    if (lc->capacity <= 0 || lc->period_ms <= 0)
        return 0;
    return lc->dimension == SL_DIM_REQUESTS || sl_dimension_is_tokens(lc->dimension);
}

/* The job's shares of the per-minute limits its charges touch: v[d] is the longest time, in
 * ms of a limit's rate, that a charge of dimension d takes (amount / rate); *fastest the
 * fastest token rate among them (0: none). Returns whether any limit is shared. */
static int share_vector(const sl_sched_t *s, const sl_charge_t *ch, const double *amount, int n,
                        double v[SL_DIM_TOTAL_TOKENS + 1], double *fastest)
{
    int any = 0;
    *fastest = 0;
    memset(v, 0, (SL_DIM_TOTAL_TOKENS + 1) * sizeof *v);
    for (int i = 0; i < n; i++) {
        int b = ch[i].bucket;
        if (b < 0 || !s->binfo[b].provider_side || !shared_limit(s->binfo[b].limit))
            continue;
        const sl_limit_cfg_t *lc = s->binfo[b].limit;
        double rate = lc->capacity / (double)lc->period_ms;
        double a = amount != NULL ? amount[i] : ch[i].amount;
        int d = lc->dimension <= SL_DIM_TOTAL_TOKENS ? (int)lc->dimension : SL_DIM_TOTAL_TOKENS;
        if (a / rate > v[d])
            v[d] = a / rate;
        if (lc->dimension != SL_DIM_REQUESTS && rate > *fastest)
            *fastest = rate;
        any = 1;
    }
    return any;
}

static double vmax(const double *v)
{
    double m = 0;
    for (int d = 0; d <= SL_DIM_TOTAL_TOKENS; d++)
        m = v[d] > m ? v[d] : m;
    return m;
}

double sl_reservation_share_cost(const sl_sched_t *s, const sl_charge_t *ch, const double *amount,
                                 int n)
{
    double v[SL_DIM_TOTAL_TOKENS + 1], fastest;
    share_vector(s, ch, amount, n, v, &fastest);
    return fastest > 0 ? vmax(v) * fastest : -1;
}

int sl_reservation_time_split(const sl_sched_t *s, const sl_charge_t *ch, int n, const int *blocked,
                              int nblocked, double *on, double *beside)
{
    *on = *beside = 0;
    for (int k = 0; k < nblocked; k++) {
        const binfo_t *bi = &s->binfo[blocked[k]];
        if (!bi->provider_side || !shared_limit(bi->limit) ||
            !sl_dimension_is_tokens(bi->limit->dimension))
            return 0;
    }
    for (int i = 0; i < n; i++) {
        int b = ch[i].bucket;
        if (b < 0 || !s->binfo[b].provider_side || !shared_limit(s->binfo[b].limit) ||
            !sl_dimension_is_tokens(s->binfo[b].limit->dimension))
            continue;
        const sl_limit_cfg_t *lc = s->binfo[b].limit;
        double t = ch[i].amount / (lc->capacity / (double)lc->period_ms);
        int is_blocked = 0;
        for (int k = 0; k < nblocked && !is_blocked; k++)
            is_blocked = blocked[k] == b;
        double *slot = is_blocked ? on : beside;
        if (t > *slot)
            *slot = t;
    }
    return 1;
}

/* j's flow's use, decayed to now with a time constant of one (configured) minute. */
static flow_use_t *flow_use(sl_sched_t *s, const job_t *j, int64_t now_ms)
{
    if (j->route < 0 || j->route >= s->cfg->nroutes || j->tenant < 0 ||
        j->tenant >= s->cfg->ntenants)
        return NULL;
    flow_use_t *u = &s->routes[j->route].use[j->tenant * SL_CLASS_COUNT + j->cls];
    if (now_ms > u->at_ms) {
        double k = u->at_ms > 0 ? exp(-(double)(now_ms - u->at_ms) / (double)s->cfg->minute_ms) : 0;
        for (int d = 0; d <= SL_DIM_TOTAL_TOKENS; d++)
            u->use[d] *= k;
        u->at_ms = now_ms;
    }
    return u;
}

double sl_reservation_marginal_cost(sl_sched_t *s, const job_t *j, const sl_charge_t *ch,
                                    const double *amount, int n, int64_t now_ms)
{
    double v[SL_DIM_TOTAL_TOKENS + 1], fastest;
    share_vector(s, ch, amount, n, v, &fastest);
    flow_use_t *u = flow_use(s, j, now_ms);
    if (fastest <= 0)
        return -1;
    if (u == NULL)
        return vmax(v) * fastest;
    double before = vmax(u->use);
    for (int d = 0; d <= SL_DIM_TOTAL_TOKENS; d++)
        u->use[d] += v[d];
    return (vmax(u->use) - before) * fastest;
}

int64_t sl_reservation_cost(sl_sched_t *s, const job_t *j)
{
    const sl_route_cfg_t *rc = &s->cfg->routes[j->route];
    double cost = -1;
    if (rc->ndeployments > 0) {
        held_t h;
        sl_reservation_build(s, j, rc->deployments[0], &h);
        cost = sl_reservation_share_cost(s, h.ch, NULL, h.n);
    }
    if (cost < 0) {
        sl_demand_t dm = sl_reservation_demand(s, j);
        cost = (double)(dm.input + dm.output);
    }
    return cost >= 1 ? (int64_t)ceil(cost) : 1;
}

void sl_reservation_build(sl_sched_t *s, const job_t *j, int d, held_t *h)
{
    const sl_deployment_cfg_t *dc = &s->cfg->deployments[d];
    sl_demand_t dm = sl_reservation_demand(s, j);
    const path_t *sides[2] = {sl_buckets_caller_path(s, j), &s->deps[d].path};
    h->n = 0;
    h->est_input = dm.input;
    h->est_output = dm.output;
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < sides[k]->n && h->n < MAX_CHARGES; i++) {
            int b = sides[k]->b[i];
            double amount;
            sl_charge_rule_t rule;
            sl_capacity_charge(s->binfo[b].limit, s->binfo[b].provider_side, dc, &dm, &amount,
                               &rule);
            h->ch[h->n] = (sl_charge_t){.bucket = b, .amount = amount};
            h->rule[h->n] = (uint8_t)rule;
            h->n++;
        }
    }
}

void sl_reservation_new_id(sl_sched_t *s, int64_t now_ms, char out[33])
{
    char rnd[17];
    sl_random_id(rnd, 8);
    snprintf(out, 33, "%012llx%04x%s", (unsigned long long)now_ms & 0xffffffffffffULL,
             (unsigned)(s->res_counter++ & 0xffff), rnd);
}

int64_t sl_reservation_id_ms(const char *id)
{
    int64_t v = 0;
    for (int i = 0; i < 12; i++) {
        char c = id[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* What charge i of h settles at (see sl_charge_rule_t): the real use where known; a provider-side
 * charge stays whole when the provider may have counted it; the callers' budgets get back what no
 * provider processed; gauges always come back. */
static double settled_amount(const sl_sched_t *s, const held_t *h, int i, end_t end,
                             const sl_deployment_cfg_t *dc, int64_t in, int64_t out, int64_t cached,
                             int64_t max_tokens)
{
    double charged = h->ch[i].amount;
    sl_charge_rule_t rule = (sl_charge_rule_t)h->rule[i];
    int b = h->ch[i].bucket;
    int provider_side = b >= 0 && s->binfo[b].provider_side;
    if (rule == SL_RULE_RELEASE)
        return 0;
    if (end == END_EXPIRED)
        return charged;
    if (end == END_NOT_SENT || end == END_NO_USAGE || end == END_REFUSED) {
        /* A quota (requests or tokens per day, spend) never saw a request that was not sent;
         * per-minute buckets keep it (see sl_sched_on_usage on not_sent). */
        if (provider_side && end == END_NOT_SENT && sl_buckets_is_quota(s, b))
            return 0;
        /* A refusal processed nothing: its tokens and spend come back (kept, 30 % of 503s
         * held 30 % of the limit for nothing: bench/compare storm503); the request itself may
         * count (some providers count refused requests). */
        if (provider_side && end == END_REFUSED)
            return rule == SL_RULE_KEEP ? charged : 0;
        if (provider_side)
            return charged;
        /* A request the provider refused still counts as a request for the caller. */
        return end != END_NOT_SENT && rule == SL_RULE_KEEP ? charged : 0;
    }
    if (cached < 0)
        cached = 0;
    switch (rule) {
    case SL_RULE_ACTUAL_TOTAL:
        return (double)(in + out);
    case SL_RULE_ACTUAL_INPUT:
        return (double)in;
    case SL_RULE_ACTUAL_INPUT_UNCACHED:
        return (double)(in > cached ? in - cached : 0);
    case SL_RULE_ACTUAL_OUTPUT:
        return (double)out;
    case SL_RULE_ACTUAL_SPEND:
        return dc != NULL ? sl_capacity_spend_usd(&dc->price, in, cached, out) : charged;
    case SL_RULE_RECEIPT_MAX: {
        double counted = (double)(in > max_tokens ? in : max_tokens);
        return counted > charged ? counted : charged;
    }
    case SL_RULE_RECEIPT_SUM: {
        double counted = (double)(in + max_tokens);
        return counted > charged ? counted : charged;
    }
    default:
        return charged;
    }
}

sl_err_t sl_reservation_settle(sl_sched_t *s, job_t *j, end_t end, const char *state, int64_t in,
                               int64_t out, int64_t cached, const char *outcome, int64_t now_ms,
                               int64_t *cost_delta)
{
    held_t *h = sl_job_held(j);
    if (cost_delta != NULL)
        *cost_delta = 0;
    double settled[MAX_CHARGES];
    int n = h != NULL ? h->n : 0;
    const sl_deployment_cfg_t *dc = j->deployment >= 0 ? &s->cfg->deployments[j->deployment] : NULL;
    for (int i = 0; i < n; i++) {
        settled[i] = settled_amount(s, h, i, end, dc, in, out, cached, j->est_output);
        int b = h->ch[i].bucket;
        /* b < 0: restored after its bucket left the config; nothing to give back to. */
        if (b < 0)
            continue;
        double diff = h->ch[i].amount - settled[i];
        if (diff != 0)
            sl_ledger_settle(s->ledger, b, diff, h->charged_ms, now_ms);
        sl_charge_rule_t rule = (sl_charge_rule_t)h->rule[i];
        if (!s->binfo[b].provider_side || rule == SL_RULE_KEEP || rule == SL_RULE_RELEASE ||
            rule == SL_RULE_ACTUAL_SPEND)
            continue; /* the counters below are of provider-side tokens */
        s->st.provider_tokens_charged += (int64_t)h->ch[i].amount;
        s->st.provider_tokens_kept += (int64_t)settled[i];
        if (end == END_USAGE) {
            s->st.tokens_reserved += (int64_t)h->ch[i].amount;
            s->st.tokens_settled += (int64_t)settled[i];
            if (diff > 0)
                s->st.tokens_over_reserved += (int64_t)diff;
            else
                s->st.tokens_under_reserved += (int64_t)-diff;
        }
    }
    if (cost_delta != NULL && end == END_USAGE && n > 0 && j->drr_cost > 0) {
        /* What the limits really counted, against what the DRR charged when it served the job
         * (its estimate then, which may have been made long before the reservation's): by how
         * much the job raised its flow's dominant share, so a flow whose jobs weigh on
         * different limits in turn pays for the limit it uses most, not each job's own. */
        double real = sl_reservation_marginal_cost(s, j, h->ch, settled, n, now_ms);
        if (real >= 0)
            *cost_delta = (int64_t)llround(real - (double)j->drr_cost);
    }
    sl_err_t rc = sl_store_res_close(s->store, sl_job_res_id(j), state, in, out, cached, outcome,
                                     now_ms, n > 0 ? settled : NULL, n);
    sl_job_set_held(j, NULL);
    /* A gauge slot or refund may let queued work of the route in. */
    s->routes[j->route].blocked_until_ms = 0;
    memset(s->routes[j->route].cls_blocked_until_ms, 0,
           sizeof s->routes[j->route].cls_blocked_until_ms);
    return rc;
}

void sl_reservation_clamp(sl_sched_t *s, job_t *j, json_t *ratelimit, int64_t now_ms)
{
    static const struct {
        const char *remaining, *limit, *reset;
    } names[HDR_COUNT] = {
        [HDR_REQUESTS] = {"remaining_requests", "limit_requests", "reset_requests_ms"},
        [HDR_TOKENS] = {"remaining_tokens", "limit_tokens", "reset_tokens_ms"},
        [HDR_INPUT] = {"remaining_input_tokens", "limit_input_tokens", "reset_input_tokens_ms"},
        [HDR_OUTPUT] = {"remaining_output_tokens", "limit_output_tokens", "reset_output_tokens_ms"},
    };
    const held_t *h = sl_job_held(j);
    if (!json_is_object(ratelimit) || h == NULL || j->deployment < 0)
        return;
    for (int k = 0; k < HDR_COUNT; k++) {
        int b = s->deps[j->deployment].header_bucket[k];
        json_t *rem = json_object_get(ratelimit, names[k].remaining);
        json_t *reset = json_object_get(ratelimit, names[k].reset);
        if (b < 0 || !json_is_integer(rem) || !json_is_integer(reset))
            continue;
        int i = 0;
        while (i < h->n && h->ch[i].bucket != b)
            i++;
        if (i == h->n)
            continue;
        /* A request that took a whole burst left the provider's bucket empty, which the ledger
         * knows; it was paced, so the report was made later than the charge it is read
         * against, and clamping by it held full buckets back (5 % of a deployment's TPM). */
        if (sl_ledger_takes_whole(s->ledger, b, h->ch[i].amount))
            continue;
        const sl_limit_cfg_t *lc = s->binfo[b].limit;
        double limit = json_is_integer(json_object_get(ratelimit, names[k].limit))
                           ? (double)json_integer_value(json_object_get(ratelimit, names[k].limit))
                           : lc->capacity;
        sl_clamp_t c = {
            .remaining = (double)json_integer_value(rem),
            .limit = limit,
            .rate_per_ms = limit / (double)lc->period_ms,
            .observed_ms = h->charged_ms,
            .reserved_before = h->before[i] + h->ch[i].amount,
            .until_ms = now_ms + json_integer_value(reset),
        };
        sl_ledger_clamp(s->ledger, b, &c, now_ms);
    }
}
