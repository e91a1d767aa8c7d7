/* admit.c - costs, limit refusals and the order of the admission decision (see admit.h). */
#include "admit.h"

#include <math.h>
#include <stdio.h>

#include "faults.h"
#include "log.h"
#include "request.h"
#include "respond.h"
#include "rng.h"
#include "stats.h"

/* SDKs retry a 429 on their own; past this wait a daily quota tells them not to. */
#define SHOULD_NOT_RETRY_AFTER_MS 120000

void sl_sim_admit_cost(const sl_sim_dep_config_t *dc, const sl_sim_request_t *req,
                       const sl_sim_ask_t *ask, sl_sim_chat_t *chat)
{
    chat->ask = *ask;
    chat->max_tokens = ask->max_tokens > 0 ? ask->max_tokens : dc->default_max_tokens;
    chat->prompt_tokens = ask->prompt_tokens;
    if (dc->tpm_sum)
        chat->cost_tokens = chat->prompt_tokens + chat->max_tokens;
    else
        chat->cost_tokens =
            chat->max_tokens > chat->prompt_tokens ? chat->max_tokens : chat->prompt_tokens;
    uint64_t body_hash = sl_sim_rng_fnv1a(req->body, req->body_len);
    uint64_t span = (uint64_t)(dc->output_max - dc->output_min) + 1;
    int64_t drawn = dc->output_min + (int64_t)(sl_sim_rng_mix64(body_hash) % span);
    chat->hit_max_tokens = drawn >= chat->max_tokens;
    chat->completion_tokens = chat->hit_max_tokens ? chat->max_tokens : drawn;
    chat->cached_tokens = 0;
    if (sl_sim_rng_body(body_hash, 0x9e3779b97f4a7c15ULL) < dc->cache_hit_share) {
        /* The epsilon keeps floor(100 * 0.29) at 29, not 28 from binary rounding. */
        chat->cached_tokens =
            (int64_t)floor((double)chat->prompt_tokens * dc->cache_read_fraction + 1e-9);
        if (chat->cached_tokens > chat->prompt_tokens)
            chat->cached_tokens = chat->prompt_tokens;
    }
    chat->input_tokens = chat->prompt_tokens - chat->cached_tokens;
    chat->output_tokens = dc->otpm_max_tokens ? chat->max_tokens : chat->completion_tokens;
    chat->tool_call = ask->tool_name[0] != '\0' &&
                      sl_sim_rng_body(body_hash, 0x5851f42d4c957f2dULL) < dc->tool_use_share;
}

/* Counts a refusal reported for dim (by its rolling minute when rolling) and applies
 * count_refused. Caller holds the lock. */
static void count_refusal(sl_sim_deployment_t *dep, sl_sim_dim_t dim, bool rolling, int64_t now_ms)
{
    dep->count.refused++;
    dep->count.refused_by[dim]++;
    dep->count.refused_rolling += rolling;
    if (dep->cfg->count_refused)
        sl_sim_limiter_charge_request(dep->lim, now_ms);
}

static bool is_token_dim(sl_sim_dim_t dim)
{
    return dim == SL_SIM_DIM_TOKENS || dim == SL_SIM_DIM_INPUT_TOKENS ||
           dim == SL_SIM_DIM_OUTPUT_TOKENS;
}

/* A 429 for a request that a limit has no room for yet: refusal names the dimension, the wait
 * until it would have room and the rule; cost[dim] is what the request asked of it. A rolling
 * minute's refusal reads like a bucket's. Caller holds the lock. */
static void refuse(sl_sim_t *sim, sl_sim_deployment_t *dep, const sl_sim_request_t *req,
                   sl_sim_response_t *resp, const int64_t cost[SL_SIM_DIM_COUNT_],
                   const sl_sim_refusal_t *refusal, int64_t now_ms)
{
    const sl_sim_dep_config_t *dc = dep->cfg;
    sl_sim_dim_t dim = refusal->dim;
    int64_t wait_ms = refusal->wait_ms;
    int64_t limit = sl_sim_limiter_limit(dep->lim, dim);
    int64_t used = limit - sl_sim_limiter_remaining(dep->lim, dim, now_ms);
    char dur[32];
    sl_sim_go_duration(wait_ms, dur, sizeof dur);
    sl_sim_error_t err;
    switch (dc->api) {
    case SL_SIM_API_OPENAI:
        sl_sim_respond_describe(
            &err, SL_SIM_ERR_RATE_LIMIT,
            "Rate limit reached for %s in organization " SL_SIM_ORGANIZATION " on %s: Limit %lld, "
            "Used %lld, Requested %lld. Please try again in %s. " SL_SIM_OPENAI_RATE_LIMIT_HELP,
            dc->model, sl_sim_dim_info[dim].what, (long long)limit, (long long)used,
            (long long)cost[dim], dur);
        err.type = sl_sim_dim_info[dim].error_type;
        err.code = "rate_limit_exceeded";
        break;
    case SL_SIM_API_AZURE:
        sl_sim_respond_describe(
            &err, SL_SIM_ERR_RATE_LIMIT,
            "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version "
            "%.32s have exceeded %s rate limit of your current OpenAI S0 pricing tier. "
            "Please retry after %lld seconds. Please go here: https://aka.ms/oai/quotaincrease "
            "if you would like to further increase the default rate limit.",
            sl_sim_request_azure_version(req), is_token_dim(dim) ? "token" : "call",
            (long long)((wait_ms + 999) / 1000));
        err.azure_code = "429";
        break;
    case SL_SIM_API_ANTHROPIC:
        sl_sim_respond_describe(
            &err, SL_SIM_ERR_RATE_LIMIT,
            "This request would exceed the rate limit for your organization (" SL_SIM_ORGANIZATION
            ") of %lld %s. " SL_SIM_ANTHROPIC_RATE_LIMIT_HELP,
            (long long)limit, sl_sim_dim_info[dim].per_minute);
        break;
    default: {
        char delay[32];
        sl_sim_wire_google_duration(wait_ms, delay, sizeof delay);
        sl_sim_respond_describe(&err, SL_SIM_ERR_RATE_LIMIT,
                                SL_SIM_GEMINI_QUOTA_HELP
                                " \n* Quota exceeded for metric: %s, limit: %lld\nPlease "
                                "retry in %s.",
                                sl_sim_dim_info[dim].quota_metric, (long long)limit, delay);
        err.quota_id = sl_sim_dim_info[dim].quota_id;
        err.quota_metric = sl_sim_dim_info[dim].quota_metric;
        err.quota_value = limit;
        err.retry_info = true;
        err.retry_delay_ms = wait_ms;
        break;
    }
    }
    sl_sim_respond_error(resp, dc->api, &err);
    count_refusal(dep, dim, refusal->rolling, now_ms);
    sl_sim_respond_limit_headers(sim, resp, dep, now_ms);
    sl_sim_respond_retry_headers(resp, dep, wait_ms);
    /* A client that retries within its SDK would wait for hours; tell it to give up instead. */
    if (dim == SL_SIM_DIM_REQUESTS_DAY && wait_ms > SHOULD_NOT_RETRY_AFTER_MS &&
        dc->headers != SL_SIM_HEADERS_NONE)
        sl_sim_respond_add_header(resp, "x-should-retry", "false");
    sl_sim_stats_note_retry_after(sim, dep, sl_sim_request_header(req, "idempotency-key"), now_ms,
                                  wait_ms, false);
    sl_logf(SL_LOG_DEBUG, "deployment", dc->name, "429 on %s, retry in %lld ms",
            sl_sim_dim_info[dim].log_name, (long long)wait_ms);
}

/* A 429 for a request that asks more of dim than its whole per-minute limit. Caller holds the
 * lock. */
static void refuse_too_large(sl_sim_t *sim, sl_sim_deployment_t *dep, sl_sim_response_t *resp,
                             const int64_t cost[SL_SIM_DIM_COUNT_], sl_sim_dim_t dim,
                             int64_t now_ms)
{
    const sl_sim_dep_config_t *dc = dep->cfg;
    int64_t limit = sl_sim_limiter_limit(dep->lim, dim);
    sl_sim_error_t err;
    switch (dc->api) {
    case SL_SIM_API_OPENAI:
    case SL_SIM_API_AZURE:
        sl_sim_respond_describe(
            &err, SL_SIM_ERR_RATE_LIMIT,
            "Request too large for %s in organization " SL_SIM_ORGANIZATION
            " on %s: Limit %lld, Requested %lld. The input or output tokens "
            "must be reduced in order to run successfully. " SL_SIM_OPENAI_RATE_LIMIT_HELP,
            dc->model, sl_sim_dim_info[dim].what, (long long)limit, (long long)cost[dim]);
        err.type = sl_sim_dim_info[dim].error_type;
        err.code = "rate_limit_exceeded";
        break;
    case SL_SIM_API_ANTHROPIC:
        sl_sim_respond_describe(
            &err, SL_SIM_ERR_RATE_LIMIT,
            "This request asks for %lld %s, more than the rate limit for your organization "
            "(" SL_SIM_ORGANIZATION ") of %lld %s allows at all. Please reduce the prompt length "
            "or the maximum tokens requested.",
            (long long)cost[dim], sl_sim_dim_info[dim].log_name, (long long)limit,
            sl_sim_dim_info[dim].per_minute);
        break;
    default:
        sl_sim_respond_describe(&err, SL_SIM_ERR_RATE_LIMIT, "%s", SL_SIM_GEMINI_QUOTA_HELP);
        err.quota_id = sl_sim_dim_info[dim].quota_id;
        err.quota_metric = sl_sim_dim_info[dim].quota_metric;
        err.quota_value = limit;
        break;
    }
    sl_sim_respond_error(resp, dc->api, &err);
    count_refusal(dep, dim, false /*rolling*/, now_ms);
    sl_sim_respond_limit_headers(sim, resp, dep, now_ms);
    /* Waiting cannot help, so there is no retry-after; OpenAI's and Anthropic's SDKs honour
     * this header. */
    if (dc->headers != SL_SIM_HEADERS_NONE)
        sl_sim_respond_add_header(resp, "x-should-retry", "false");
}

void sl_sim_admit_decide(sl_sim_t *sim, sl_sim_deployment_t *dep, const sl_sim_request_t *req,
                         const sl_sim_chat_t *chat, int64_t now_ms, sl_sim_response_t *resp)
{
    const sl_sim_dep_config_t *dc = dep->cfg;
    const sl_sim_faults_t *faults = &dc->faults;
    const char *key = sl_sim_request_header(req, "idempotency-key");
    bool openai_like = dc->api == SL_SIM_API_OPENAI || dc->api == SL_SIM_API_AZURE;
    sl_sim_draws_t u = sl_sim_faults_draw(dep);

    if (key != NULL) {
        const int64_t *until_ms = sl_sim_idem_get(dep->retry_keys, key);
        if (until_ms != NULL && now_ms < *until_ms)
            dep->count.early_retries++;
    }
    if (sl_sim_faults_unavailable(sim, dep, now_ms)) {
        sl_sim_respond_overloaded(sim, dep, resp, now_ms);
        dep->count.fault_503++;
        return;
    }
    const sl_sim_completion_t *seen = key != NULL ? sl_sim_idem_get(dep->idem, key) : NULL;
    if (seen != NULL) {
        /* A retry of a call already charged: same answer, no charge, no wait. */
        dep->count.replayed++;
        sl_sim_respond_answer(sim, dep, resp, seen, &chat->ask, 0, true /*instant*/, -1, -1, 0);
        sl_sim_respond_limit_headers(sim, resp, dep, now_ms);
        if (openai_like)
            sl_sim_respond_add_header(resp, "openai-processing-ms", "%lld",
                                      (long long)seen->processing_ms);
        return;
    }
    if (sim->in_flight >= sim->cfg->max_pending) {
        sl_sim_respond_overloaded(sim, dep, resp, now_ms);
        dep->count.errors++;
        if (dc->headers != SL_SIM_HEADERS_NONE)
            sl_sim_respond_add_header(resp, "retry-after", "1");
        return;
    }
    if (faults->spend_limit_after >= 0 && dep->admitted_total >= faults->spend_limit_after) {
        sl_sim_faults_refuse_spend(sim, dep, resp, now_ms);
        return;
    }
    if (u.overloaded < faults->overloaded_share) {
        sl_sim_respond_overloaded(sim, dep, resp, now_ms);
        dep->count.fault_503++;
        return;
    }
    int64_t cost[SL_SIM_DIM_COUNT_] = {
        [SL_SIM_DIM_REQUESTS] = 1,
        [SL_SIM_DIM_TOKENS] = chat->cost_tokens,
        [SL_SIM_DIM_INPUT_TOKENS] = chat->input_tokens,
        [SL_SIM_DIM_OUTPUT_TOKENS] = chat->output_tokens,
        [SL_SIM_DIM_REQUESTS_DAY] = 1,
    };
    /* Token costs above a whole per-minute limit can never pass (and the limiter expects them
     * to be refused before it is asked). */
    static const sl_sim_dim_t token_dims[] = {SL_SIM_DIM_TOKENS, SL_SIM_DIM_INPUT_TOKENS,
                                              SL_SIM_DIM_OUTPUT_TOKENS};
    for (size_t i = 0; i < sizeof token_dims / sizeof token_dims[0]; i++) {
        int64_t limit = sl_sim_limiter_limit(dep->lim, token_dims[i]);
        if (limit > 0 && cost[token_dims[i]] > limit) {
            refuse_too_large(sim, dep, resp, cost, token_dims[i], now_ms);
            return;
        }
    }
    /* Left alone when the limits admit, so the unexpected refusal below reports a bucket. */
    sl_sim_refusal_t refusal = {.dim = SL_SIM_DIM_REQUESTS, .rolling = false};
    if (!sl_sim_limiter_check_refusal(dep->lim, cost, now_ms, &refusal)) {
        refuse(sim, dep, req, resp, cost, &refusal, now_ms);
        return;
    }
    if (u.rate_limit < faults->rate_limit_share) {
        sl_sim_faults_inject_429(sim, dep, req, resp, u.retry_after < faults->retry_after_share,
                                 now_ms, &dep->count.fault_429);
        return;
    }
    if (!sl_sim_faults_acceleration_admits(dep, now_ms)) {
        sl_sim_faults_inject_429(sim, dep, req, resp, u.retry_after < faults->retry_after_share,
                                 now_ms, &dep->count.fault_acceleration);
        return;
    }
    if (!sl_sim_limiter_admit_all(dep->lim, cost, now_ms, &refusal.dim, &refusal.wait_ms)) {
        /* Cannot happen: the same request at the same time just passed the dry run. */
        sl_error("sim: %s: admission disagreed with its dry run", dc->name);
        refuse(sim, dep, req, resp, cost, &refusal, now_ms);
        return;
    }
    bool slow = u.slow < faults->slow_share;
    double extra_ms = slow ? (double)faults->slow_ms : 0.0;
    int64_t delay_ms =
        llround(dc->ttft_ms + extra_ms + dc->ms_per_token * (double)chat->completion_tokens);
    sl_sim_completion_t done = {
        .seq = ++sim->seq,
        .created_s = sim->origin_unix_s + (now_ms - sim->origin_ms) / 1000,
        .prompt_tokens = chat->prompt_tokens,
        .completion_tokens = chat->completion_tokens,
        .cached_tokens = chat->cached_tokens,
        .processing_ms = delay_ms,
        .hit_max_tokens = chat->hit_max_tokens,
        .tool_name = "",
    };
    if (chat->tool_call)
        snprintf(done.tool_name, sizeof done.tool_name, "%s", chat->ask.tool_name);
    /* Losing a key only weakens replay protection for that one call: report and go on. */
    if (key != NULL && sl_sim_idem_put(dep->idem, key, &done) != SL_OK)
        sl_logf(SL_LOG_WARN, "deployment", dc->name, "out of memory storing an idempotency key");
    sl_sim_counters_t *count = &dep->count;
    count->admitted++;
    dep->admitted_total++;
    count->tokens_charged += chat->cost_tokens;
    count->input_tokens_charged += chat->input_tokens;
    count->output_tokens_charged += chat->output_tokens;
    count->prompt_tokens += chat->prompt_tokens;
    count->completion_tokens += chat->completion_tokens;
    count->cached_tokens += chat->cached_tokens;
    count->streams += chat->ask.stream;
    count->tool_calls += chat->tool_call;
    count->slow += slow;
    if (count->first_admit_ms < 0)
        count->first_admit_ms = now_ms - sim->origin_ms;
    count->last_admit_ms = now_ms - sim->origin_ms;
    dep->in_flight++;
    sim->in_flight++;
    resp->in_flight_on = dep;
    resp->output_refund = chat->output_tokens - chat->completion_tokens;
    resp->stats_epoch = sim->stats_epoch;
    double share = chat->ask.stream ? faults->stream_cut_share : faults->drop_share;
    bool drop = u.drop < share;
    /* A stall takes the range of the same draw after the cuts', so a stream is cut or stalled,
     * never both, and the draws (and every other fault) of a config without stalls stay what
     * they were. */
    bool stall = chat->ask.stream && !drop && u.drop < share + faults->stream_stall_share;
    count->dropped += drop;
    count->stalled += stall;
    sl_sim_respond_answer(sim, dep, resp, &done, &chat->ask, extra_ms, false, drop ? u.cut_at : -1,
                          stall ? u.cut_at : -1, faults->stream_stall_ms);
    if (resp->events == NULL) {
        resp->delay_ms = delay_ms;
        resp->dropped = drop;
    }
    sl_sim_respond_limit_headers(sim, resp, dep, now_ms);
    if (openai_like)
        sl_sim_respond_add_header(
            resp, "openai-processing-ms", "%lld",
            (long long)(resp->n_events > 0 ? resp->event_at_ms[0] : delay_ms));
}
