/* faults.c - the fault draws, windows, acceleration limit and the faults' own answers (see
 * faults.h). */
#include "faults.h"

#include <stdio.h>

#include "request.h"
#include "respond.h"
#include "rng.h"
#include "stats.h"

sl_sim_draws_t sl_sim_faults_draw(sl_sim_deployment_t *dep)
{
    sl_sim_draws_t d;
    d.overloaded = sl_sim_rng_next(&dep->rng);
    d.rate_limit = sl_sim_rng_next(&dep->rng);
    d.retry_after = sl_sim_rng_next(&dep->rng);
    d.slow = sl_sim_rng_next(&dep->rng);
    d.drop = sl_sim_rng_next(&dep->rng);
    d.cut_at = sl_sim_rng_next(&dep->rng);
    return d;
}

bool sl_sim_faults_unavailable(const sl_sim_t *sim, sl_sim_deployment_t *dep, int64_t now_ms)
{
    const sl_sim_faults_t *f = &dep->cfg->faults;
    if (dep->first_request_ms < 0)
        dep->first_request_ms = now_ms;
    int64_t window_origin_ms = f->windows_from_first ? dep->first_request_ms : sim->origin_ms;
    int64_t since_start_ms = now_ms - window_origin_ms;
    for (size_t i = 0; i < f->n_windows; i++) {
        if (since_start_ms >= f->windows[i].from_ms && since_start_ms < f->windows[i].to_ms)
            return true;
    }
    return false;
}

bool sl_sim_faults_acceleration_admits(sl_sim_deployment_t *dep, int64_t now_ms)
{
    const sl_sim_faults_t *faults = &dep->cfg->faults;
    if (faults->accel_window_ms <= 0)
        return true;
    int64_t w = faults->accel_window_ms;
    int64_t elapsed = now_ms - dep->accel_window_start_ms;
    if (dep->accel_window_start_ms == 0 || elapsed >= 2 * w) {
        /* first use, or a whole idle window: start cold */
        dep->accel_prev = 0;
        dep->accel_cur = 0;
        dep->accel_window_start_ms = now_ms;
    } else if (elapsed >= w) {
        dep->accel_prev = dep->accel_cur;
        dep->accel_cur = 0;
        dep->accel_window_start_ms += w;
    }
    double allowed = (double)dep->accel_prev * (1.0 + faults->accel_growth);
    if (allowed < (double)faults->accel_floor)
        allowed = (double)faults->accel_floor;
    if ((double)(dep->accel_cur + 1) > allowed)
        return false;
    dep->accel_cur++;
    return true;
}

void sl_sim_faults_inject_429(sl_sim_t *sim, sl_sim_deployment_t *dep, const sl_sim_request_t *req,
                              sl_sim_response_t *resp, bool with_retry, int64_t now_ms,
                              int64_t *counter)
{
    const sl_sim_dep_config_t *dc = dep->cfg;
    int64_t wait_ms = dc->faults.retry_after_ms;
    int64_t rpm = sl_sim_limiter_limit(dep->lim, SL_SIM_DIM_REQUESTS);
    char dur[32];
    sl_sim_go_duration(wait_ms, dur, sizeof dur);
    char again[64] = "later";
    if (with_retry)
        snprintf(again, sizeof again, "in %s", dur);
    sl_sim_error_t err;
    switch (dc->api) {
    case SL_SIM_API_OPENAI:
        sl_sim_respond_describe(
            &err, SL_SIM_ERR_RATE_LIMIT,
            "Rate limit reached for %s in organization " SL_SIM_ORGANIZATION " on %s: Limit %lld, "
            "Used %lld, Requested 1. Please try again %s. " SL_SIM_OPENAI_RATE_LIMIT_HELP,
            dc->model, sl_sim_dim_info[SL_SIM_DIM_REQUESTS].what, (long long)rpm, (long long)rpm,
            again);
        err.type = "requests";
        err.code = "rate_limit_exceeded";
        break;
    case SL_SIM_API_AZURE:
        if (with_retry)
            snprintf(again, sizeof again, "Please retry after %lld seconds. ",
                     (long long)((wait_ms + 999) / 1000));
        else
            again[0] = '\0';
        sl_sim_respond_describe(
            &err, SL_SIM_ERR_RATE_LIMIT,
            "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version "
            "%.32s have exceeded token rate limit of your current OpenAI S0 pricing tier. "
            "%sPlease go here: https://aka.ms/oai/quotaincrease if you would like to "
            "further increase the default rate limit.",
            sl_sim_request_azure_version(req), again);
        err.azure_code = "429";
        break;
    case SL_SIM_API_ANTHROPIC:
        sl_sim_respond_describe(
            &err, SL_SIM_ERR_RATE_LIMIT,
            "This request would exceed the rate limit for your organization (" SL_SIM_ORGANIZATION
            ") of %lld requests per minute. " SL_SIM_ANTHROPIC_RATE_LIMIT_HELP,
            (long long)rpm);
        break;
    default:
        sl_sim_respond_describe(&err, SL_SIM_ERR_RATE_LIMIT, "%s", SL_SIM_GEMINI_QUOTA_HELP);
        err.quota_id = sl_sim_dim_info[SL_SIM_DIM_REQUESTS].quota_id;
        err.quota_metric = sl_sim_dim_info[SL_SIM_DIM_REQUESTS].quota_metric;
        err.quota_value = rpm;
        err.retry_info = with_retry;
        err.retry_delay_ms = wait_ms;
        break;
    }
    sl_sim_respond_error(resp, dc->api, &err);
    sl_sim_respond_limit_headers(sim, resp, dep, now_ms);
    (*counter)++;
    if (with_retry) {
        if (counter == &dep->count.fault_429)
            dep->count.fault_429_retry_after++;
        sl_sim_respond_retry_headers(resp, dep, wait_ms);
        sl_sim_stats_note_retry_after(sim, dep, sl_sim_request_header(req, "idempotency-key"),
                                      now_ms, wait_ms, true);
    }
}

void sl_sim_faults_refuse_spend(sl_sim_t *sim, sl_sim_deployment_t *dep, sl_sim_response_t *resp,
                                int64_t now_ms)
{
    const sl_sim_dep_config_t *dc = dep->cfg;
    sl_sim_error_t err;
    switch (dc->api) {
    case SL_SIM_API_OPENAI:
    case SL_SIM_API_AZURE:
        sl_sim_respond_describe(
            &err, SL_SIM_ERR_QUOTA,
            "You exceeded your current quota, please check your plan and billing details. "
            "For more information on this error, read the docs: "
            "https://platform.openai.com/docs/guides/error-codes/api-errors.");
        err.code = "insufficient_quota";
        break;
    case SL_SIM_API_ANTHROPIC:
        sl_sim_respond_describe(
            &err, SL_SIM_ERR_QUOTA,
            "This request would exceed your account's monthly spend limit. Please try again "
            "later.");
        err.spend_limit = true;
        break;
    default:
        sl_sim_respond_describe(&err, SL_SIM_ERR_QUOTA, "%s", SL_SIM_GEMINI_QUOTA_HELP);
        err.quota_id = "GenerateRequestsPerDayPerProjectPerModel-FreeTier";
        err.quota_metric = sl_sim_dim_info[SL_SIM_DIM_REQUESTS_DAY].quota_metric;
        break;
    }
    sl_sim_respond_error(resp, dc->api, &err);
    sl_sim_respond_limit_headers(sim, resp, dep, now_ms);
    dep->count.fault_spend_limit++;
}
