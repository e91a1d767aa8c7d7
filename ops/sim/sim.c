/* sim.c - config, request decisions, responses and counters of the provider simulator
 * (see sim.h; the four APIs' formats are in wire.c).
 *
 * Every response is allocated, with a fixed-size body buffer, header table and (for a stream)
 * its event buffers, before any state changes, so a failed sl_sim_handle leaves the simulator as
 * it was. Names that end up in bodies (deployment, model, tool) are restricted to characters
 * that need no JSON escaping; anything else taken from the request is escaped.
 */
#include "sim.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "idem.h"
#include "limiter.h"
#include "log.h"
#include "request.h"
#include "respond.h"
#include "rng.h"
#include "sim_internal.h"
#include "stats.h"
#include "wire.h"

#define IDEMPOTENCY_KEY_MAX_LEN 255
/* SDKs retry a 429 on their own; past this wait a daily quota tells them not to. */
#define SHOULD_NOT_RETRY_AFTER_MS 120000

/* ---- Configuration ---------------------------------------------------------------------- */

/* ---- Simulator state -------------------------------------------------------------------- */

static void deployment_free(sl_sim_deployment_t *dep)
{
    sl_sim_limiter_free(dep->lim);
    sl_sim_idem_free(dep->idem);
    sl_sim_idem_free(dep->retry_keys);
    free(dep->retries);
    free(dep->arrivals);
}

sl_err_t sl_sim_new(sl_sim_config_t *cfg, int64_t now_ms, sl_sim_t **out)
{
    *out = NULL;
    if (cfg == NULL || cfg->n_deps == 0)
        return SL_EINVAL;
    sl_sim_t *sim = calloc(1, sizeof *sim);
    if (sim == NULL)
        return SL_ENOMEM;
    sim->deps = calloc(cfg->n_deps, sizeof *sim->deps);
    if (sim->deps == NULL) {
        free(sim);
        return SL_ENOMEM;
    }
    sl_err_t rc = SL_OK;
    for (size_t i = 0; i < cfg->n_deps && rc == SL_OK; i++) {
        const sl_sim_dep_config_t *dc = &cfg->deps[i];
        sl_sim_deployment_t *dep = &sim->deps[i];
        dep->cfg = dc;
        sl_sim_stats_counters_reset(&dep->count);
        dep->first_request_ms = -1;
        /* A fixed sequence per deployment: the seed mixed with its name. */
        uint64_t seed = dc->faults.has_seed ? dc->faults.seed : cfg->seed;
        dep->rng =
            sl_sim_rng_mix64(seed ^ sl_sim_rng_mix64(sl_sim_rng_fnv1a(dc->name, strlen(dc->name))));
        sl_sim_limits_t limits = {
            .limit =
                {
                    [SL_SIM_DIM_REQUESTS] = dc->rpm,
                    [SL_SIM_DIM_TOKENS] = dc->tpm,
                    [SL_SIM_DIM_INPUT_TOKENS] = dc->itpm,
                    [SL_SIM_DIM_OUTPUT_TOKENS] = dc->otpm,
                    [SL_SIM_DIM_REQUESTS_DAY] = dc->rpd,
                },
            .slices_per_minute = dc->slices_per_minute,
            .minute_ms = cfg->minute_ms,
            .day_ms = dc->day_ms,
        };
        rc = sl_sim_limiter_new_limits(&limits, now_ms, &dep->lim);
        if (rc == SL_OK)
            rc = sl_sim_idem_new((size_t)cfg->idempotency_keys, sizeof(sl_sim_completion_t),
                                 &dep->idem);
        if (rc == SL_OK)
            rc = sl_sim_idem_new((size_t)cfg->idempotency_keys, sizeof(int64_t), &dep->retry_keys);
        if (rc == SL_OK) {
            dep->retries = calloc(SL_SIM_RING_CAP, sizeof *dep->retries);
            dep->arrivals = calloc(SL_SIM_RING_CAP, sizeof *dep->arrivals);
            if (dep->retries == NULL || dep->arrivals == NULL)
                rc = SL_ENOMEM;
        }
    }
    if (rc == SL_OK && pthread_mutex_init(&sim->lock, NULL) != 0)
        rc = SL_ENOMEM;
    if (rc != SL_OK) {
        for (size_t i = 0; i < cfg->n_deps; i++)
            deployment_free(&sim->deps[i]);
        free(sim->deps);
        free(sim);
        return rc;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    sim->cfg = cfg;
    sim->origin_ms = now_ms;
    sim->origin_unix_s = (int64_t)ts.tv_sec;
    sim->origin_unix_ms = (int64_t)ts.tv_sec * 1000 + (int64_t)ts.tv_nsec / 1000000;
    sim->salt =
        sl_sim_rng_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid());
    atomic_init(&sim->request_seq, 0);
    *out = sim;
    return SL_OK;
}

void sl_sim_free(sl_sim_t *sim)
{
    if (sim == NULL)
        return;
    for (size_t i = 0; i < sim->cfg->n_deps; i++)
        deployment_free(&sim->deps[i]);
    free(sim->deps);
    pthread_mutex_destroy(&sim->lock);
    sl_sim_config_free(sim->cfg);
    free(sim);
}

/* ---- Response building ------------------------------------------------------------------ */

/* ---- Requests --------------------------------------------------------------------------- */

/* Where a path leads. */
typedef struct {
    sl_sim_deployment_t *dep; /* NULL: no deployment of that name */
    bool endpoint;            /* the path is the deployment's completion endpoint */
    bool wrong_deployment;    /* Azure: another deployment named after /openai/deployments/ */
    bool gemini_stream;       /* Gemini: :streamGenerateContent */
} route_t;

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s);
    size_t m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Routes "/<name>/<the endpoint of the deployment's API>". */
static route_t route_path(sl_sim_t *sim, const char *path)
{
    route_t r = {NULL, false, false, false};
    if (path[0] != '/')
        return r;
    const char *name = path + 1;
    const char *rest = strchr(name, '/');
    if (rest == NULL)
        return r;
    size_t len = (size_t)(rest - name);
    for (size_t i = 0; i < sim->cfg->n_deps && r.dep == NULL; i++) {
        const char *dep_name = sim->deps[i].cfg->name;
        if (strlen(dep_name) == len && memcmp(dep_name, name, len) == 0)
            r.dep = &sim->deps[i];
    }
    if (r.dep == NULL)
        return r;
    const sl_sim_dep_config_t *dc = r.dep->cfg;
    static const char azure_prefix[] = "/openai/deployments/";
    static const char azure_suffix[] = "/chat/completions";
    static const char gemini_prefix[] = "/v1beta/models/";
    switch (dc->api) {
    case SL_SIM_API_OPENAI:
        r.endpoint = strcmp(rest, "/v1/chat/completions") == 0;
        break;
    case SL_SIM_API_AZURE:
        if (strncmp(rest, azure_prefix, sizeof azure_prefix - 1) == 0 &&
            ends_with(rest, azure_suffix) &&
            strlen(rest) > sizeof azure_prefix - 1 + sizeof azure_suffix - 1) {
            const char *az = rest + sizeof azure_prefix - 1;
            size_t az_len = strlen(az) - (sizeof azure_suffix - 1);
            if (az_len == strlen(dc->name) && memcmp(az, dc->name, az_len) == 0)
                r.endpoint = true;
            else if (memchr(az, '/', az_len) == NULL)
                r.wrong_deployment = true;
        }
        break;
    case SL_SIM_API_ANTHROPIC:
        r.endpoint = strcmp(rest, "/v1/messages") == 0;
        break;
    default:
        if (strncmp(rest, gemini_prefix, sizeof gemini_prefix - 1) == 0) {
            const char *model = rest + sizeof gemini_prefix - 1;
            const char *colon = strrchr(model, ':');
            bool model_ok = colon != NULL && colon > model &&
                            memchr(model, '/', (size_t)(colon - model)) == NULL;
            if (model_ok && strcmp(colon, ":generateContent") == 0) {
                r.endpoint = true;
            } else if (model_ok && strcmp(colon, ":streamGenerateContent") == 0) {
                r.endpoint = true;
                r.gemini_stream = true;
            }
        }
        break;
    }
    return r;
}

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
static void sl_sim_admit_cost(const sl_sim_dep_config_t *dc, const sl_sim_request_t *req,
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

/* ---- Decisions -------------------------------------------------------------------------- */

/* Finishes a non-200 answer of a deployment: counts it as an error, adds the limit headers. */
static void finish_error(sl_sim_t *sim, sl_sim_deployment_t *dep, sl_sim_response_t *resp,
                         int64_t now_ms)
{
    pthread_mutex_lock(&sim->lock);
    dep->count.errors++;
    sl_sim_respond_limit_headers(sim, resp, dep, now_ms);
    pthread_mutex_unlock(&sim->lock);
}

/* Counts a refusal reported for dim and applies count_refused. Caller holds the lock. */
static void count_refusal(sl_sim_deployment_t *dep, sl_sim_dim_t dim, int64_t now_ms)
{
    dep->count.refused++;
    dep->count.refused_by[dim]++;
    if (dep->cfg->count_refused)
        sl_sim_limiter_charge_request(dep->lim, now_ms);
}

static bool is_token_dim(sl_sim_dim_t dim)
{
    return dim == SL_SIM_DIM_TOKENS || dim == SL_SIM_DIM_INPUT_TOKENS ||
           dim == SL_SIM_DIM_OUTPUT_TOKENS;
}

/* A 429 for a request that dim has no room for yet; cost[dim] is what it asked of dim and
 * wait_ms how long until it would have room. Caller holds the lock. */
static void refuse(sl_sim_t *sim, sl_sim_deployment_t *dep, const sl_sim_request_t *req,
                   sl_sim_response_t *resp, const int64_t cost[SL_SIM_DIM_COUNT_], sl_sim_dim_t dim,
                   int64_t wait_ms, int64_t now_ms)
{
    const sl_sim_dep_config_t *dc = dep->cfg;
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
    count_refusal(dep, dim, now_ms);
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
    count_refusal(dep, dim, now_ms);
    sl_sim_respond_limit_headers(sim, resp, dep, now_ms);
    /* Waiting cannot help, so there is no retry-after; OpenAI's and Anthropic's SDKs honour
     * this header. */
    if (dc->headers != SL_SIM_HEADERS_NONE)
        sl_sim_respond_add_header(resp, "x-should-retry", "false");
}

/* An injected 429 (rate_limit_share, or the acceleration limit: counted in *counter), with or
 * without a Retry-After of retry_after_ms. Nothing is charged. Caller holds the lock. */
static void sl_sim_faults_inject_429(sl_sim_t *sim, sl_sim_deployment_t *dep,
                                     const sl_sim_request_t *req, sl_sim_response_t *resp,
                                     bool with_retry, int64_t now_ms, int64_t *counter)
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

/* The spend cap or quota is exhausted (spend_limit_after): a 429 that is not worth retrying,
 * with no Retry-After. Caller holds the lock. */
static void sl_sim_faults_refuse_spend(sl_sim_t *sim, sl_sim_deployment_t *dep,
                                       sl_sim_response_t *resp, int64_t now_ms)
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

/* The draws of one request from the deployment's fault sequence: always all of them, in this
 * order, so the sequence does not depend on which ones are used. */
typedef struct {
    double overloaded, rate_limit, retry_after, slow, drop, cut_at;
} sl_sim_draws_t;

static sl_sim_draws_t sl_sim_faults_draw(sl_sim_deployment_t *dep)
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

/* Whether now_ms falls in one of the deployment's unavailable windows. The first call also
 * notes the time of the deployment's first validated request, which windows may count from.
 * Caller holds the lock. */
static bool sl_sim_faults_unavailable(const sl_sim_t *sim, sl_sim_deployment_t *dep, int64_t now_ms)
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

/* The acceleration limit (Anthropic's "sharp increases" 429s): whether it lets one more request
 * through at now_ms, which it then counts; always true when the limit is off. Caller holds the
 * lock. */
static bool sl_sim_faults_acceleration_admits(sl_sim_deployment_t *dep, int64_t now_ms)
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

/* The decision for a validated request, in this order: early-retry bookkeeping, unavailable
 * windows, idempotent replay, max_pending, spend cap, random overload, too large, the limits,
 * injected 429, then admission (with slow and drop faults). Caller holds the lock. */
static void sl_sim_admit_decide(sl_sim_t *sim, sl_sim_deployment_t *dep,
                                const sl_sim_request_t *req, const sl_sim_chat_t *chat,
                                int64_t now_ms, sl_sim_response_t *resp)
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
        sl_sim_respond_answer(sim, dep, resp, seen, &chat->ask, 0, true /*instant*/, -1);
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
    sl_sim_dim_t dim = SL_SIM_DIM_REQUESTS;
    int64_t wait_ms = 0;
    if (!sl_sim_limiter_check_all(dep->lim, cost, now_ms, &dim, &wait_ms)) {
        refuse(sim, dep, req, resp, cost, dim, wait_ms, now_ms);
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
    if (!sl_sim_limiter_admit_all(dep->lim, cost, now_ms, &dim, &wait_ms)) {
        /* Cannot happen: the same request at the same time just passed the dry run. */
        sl_error("sim: %s: admission disagreed with its dry run", dc->name);
        refuse(sim, dep, req, resp, cost, dim, wait_ms, now_ms);
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
    count->dropped += drop;
    sl_sim_respond_answer(sim, dep, resp, &done, &chat->ask, extra_ms, false, drop ? u.cut_at : -1);
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

/* An error of the deployment's API, counted, with the limit headers. */
static void deny(sl_sim_t *sim, sl_sim_deployment_t *dep, sl_sim_response_t *resp,
                 const sl_sim_error_t *err, int64_t now_ms)
{
    sl_sim_respond_error(resp, dep->cfg->api, err);
    finish_error(sim, dep, resp, now_ms);
}

/* A request to a deployment's endpoint, from method checks to the decision. Returns SL_ENOMEM
 * (nothing charged or counted) or SL_OK with resp filled. */
static sl_err_t handle_endpoint(sl_sim_t *sim, const route_t *route, const sl_sim_request_t *req,
                                int64_t now_ms, sl_sim_response_t *resp)
{
    sl_sim_deployment_t *dep = route->dep;
    const sl_sim_dep_config_t *dc = dep->cfg;
    sl_sim_error_t err;
    if (strcmp(req->method, "POST") != 0) {
        char method[32];
        char path[160];
        snprintf(method, sizeof method, "%s", req->method);
        snprintf(path, sizeof path, "%s", req->path);
        sl_sim_respond_describe(&err, SL_SIM_ERR_METHOD, "Invalid method for URL (%s %s).", method,
                                path);
        deny(sim, dep, resp, &err, now_ms);
        if (dc->api != SL_SIM_API_GEMINI)
            sl_sim_respond_add_header(resp, "allow", "POST");
        return SL_OK;
    }
    if (!sl_sim_request_authorize(dc, req, &err)) {
        deny(sim, dep, resp, &err, now_ms);
        return SL_OK;
    }
    if (dc->api == SL_SIM_API_AZURE) {
        const char *version = sl_sim_request_query(req, "api-version");
        if (version == NULL || version[0] == '\0') {
            sl_sim_respond_describe(
                &err, SL_SIM_ERR_INVALID,
                "The api-version query parameter (?api-version=) is required for all "
                "requests.");
            err.azure_code = "MissingApiVersionParameter";
            deny(sim, dep, resp, &err, now_ms);
            return SL_OK;
        }
    }
    if (dc->api == SL_SIM_API_ANTHROPIC) {
        const char *version = sl_sim_request_header(req, "anthropic-version");
        if (version == NULL || version[0] == '\0') {
            sl_sim_respond_describe(&err, SL_SIM_ERR_INVALID,
                                    "anthropic-version: header is required");
            deny(sim, dep, resp, &err, now_ms);
            return SL_OK;
        }
    }
    if (req->body_too_large || req->body_len > SL_SIM_MAX_BODY_BYTES) {
        sl_sim_respond_describe(&err, SL_SIM_ERR_TOO_LARGE,
                                "Request body too large: the limit is 4194304 bytes.");
        err.code = "request_too_large";
        deny(sim, dep, resp, &err, now_ms);
        return SL_OK;
    }
    const char *key = sl_sim_request_header(req, "idempotency-key");
    if (key != NULL && (key[0] == '\0' || strlen(key) > IDEMPOTENCY_KEY_MAX_LEN)) {
        sl_sim_respond_describe(&err, SL_SIM_ERR_INVALID,
                                "Invalid Idempotency-Key: expected 1 to 255 characters.");
        err.code = "invalid_idempotency_key";
        deny(sim, dep, resp, &err, now_ms);
        return SL_OK;
    }
    sl_sim_ask_t ask;
    if (!sl_sim_wire_parse(dc->api, req->body, req->body_len, &ask, &err)) {
        deny(sim, dep, resp, &err, now_ms);
        return SL_OK;
    }
    if (dc->api == SL_SIM_API_GEMINI) {
        const char *alt = sl_sim_request_query(req, "alt");
        ask.stream = route->gemini_stream;
        ask.sse = alt != NULL && strcmp(alt, "sse") == 0;
    }
    sl_sim_chat_t chat;
    sl_sim_admit_cost(dc, req, &ask, &chat);
    if (ask.stream) {
        /* Allocated before any decision, so running out changes nothing. */
        size_t max = sl_sim_wire_stream_max((size_t)dc->stream_chunks);
        resp->events = malloc(max * sizeof *resp->events);
        resp->event_at_ms = malloc(max * sizeof *resp->event_at_ms);
        if (resp->events == NULL || resp->event_at_ms == NULL)
            return SL_ENOMEM;
    }
    pthread_mutex_lock(&sim->lock);
    sl_sim_admit_decide(sim, dep, req, &chat, now_ms, resp);
    pthread_mutex_unlock(&sim->lock);
    /* Only a 200 streams; a refusal is a plain body. */
    if (resp->status != 200 || resp->n_events == 0) {
        free(resp->events);
        free(resp->event_at_ms);
        resp->events = NULL;
        resp->event_at_ms = NULL;
        resp->n_events = 0;
    }
    return SL_OK;
}

/* A path under a deployment that is not its endpoint: the API's 404, not counted. */
static void not_found(sl_sim_response_t *resp, const route_t *route, const sl_sim_request_t *req)
{
    sl_sim_api_t api = route->dep->cfg->api;
    char method[32];
    char path[160];
    snprintf(method, sizeof method, "%s", req->method);
    snprintf(path, sizeof path, "%s", req->path);
    sl_sim_error_t err;
    sl_sim_respond_describe(&err, SL_SIM_ERR_NOT_FOUND,
                            "Invalid URL (%s %s): no such deployment or endpoint.", method, path);
    if (api == SL_SIM_API_AZURE && route->wrong_deployment) {
        sl_sim_respond_describe(
            &err, SL_SIM_ERR_NOT_FOUND,
            "The API deployment for this resource does not exist. If you created the "
            "deployment within the last 5 minutes, please wait a moment and try again.");
        err.azure_code = "DeploymentNotFound";
    } else if (api == SL_SIM_API_AZURE) {
        sl_sim_respond_describe(&err, SL_SIM_ERR_NOT_FOUND, "Resource not found");
        err.azure_code = "404";
    } else if (api == SL_SIM_API_ANTHROPIC) {
        sl_sim_respond_describe(&err, SL_SIM_ERR_NOT_FOUND, "Not Found");
    } else if (api == SL_SIM_API_GEMINI) {
        sl_sim_respond_describe(&err, SL_SIM_ERR_NOT_FOUND, "Requested entity was not found.");
    }
    sl_sim_respond_error(resp, api, &err);
}

static void method_not_allowed(sl_sim_response_t *resp, const char *allow, const char *method,
                               const char *path)
{
    char msg[256];
    char safe_method[32];
    snprintf(safe_method, sizeof safe_method, "%s", method);
    snprintf(msg, sizeof msg, "Invalid method for URL (%s %s).", safe_method, path);
    sl_sim_respond_common_headers(resp, "application/json");
    sl_sim_respond_openai_error(resp, 405, "invalid_request_error", NULL, NULL, msg);
    sl_sim_respond_add_header(resp, "allow", "%s", allow);
}

static bool is_get(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}

sl_err_t sl_sim_handle(sl_sim_t *sim, const sl_sim_request_t *req, int64_t now_ms,
                       sl_sim_response_t **out)
{
    *out = NULL;
    sl_sim_response_t *resp = sl_sim_respond_new();
    if (resp == NULL)
        return SL_ENOMEM;
    uint64_t n = atomic_fetch_add(&sim->request_seq, 1);
    snprintf(resp->request_id, sizeof resp->request_id, "req_%016llx%016llx",
             (unsigned long long)sl_sim_rng_mix64(sim->salt ^ (n * 2 + 1)),
             (unsigned long long)sl_sim_rng_mix64(~sim->salt ^ (n * 2)));
    sl_sim_request_t r = *req;
    if (r.method == NULL)
        r.method = "";
    if (r.path == NULL)
        r.path = "";
    /* Paths only go into error messages; a bounded copy keeps them short. */
    char path[160];
    snprintf(path, sizeof path, "%s", r.path);

    if (strcmp(r.path, "/healthz") == 0) {
        if (is_get(r.method)) {
            sl_sim_respond_common_headers(resp, "text/plain; charset=utf-8");
            resp->status = 200;
            sl_sim_respond_set_body(resp, "ok");
        } else {
            method_not_allowed(resp, "GET", r.method, path);
        }
    } else if (strcmp(r.path, "/stats") == 0) {
        if (!is_get(r.method)) {
            method_not_allowed(resp, "GET", r.method, path);
        } else {
            char *text = NULL;
            if (sl_sim_stats_json(sim, now_ms, &text) != SL_OK) {
                sl_sim_response_free(resp);
                return SL_ENOMEM;
            }
            sl_sim_respond_take_body(resp, text);
            resp->status = 200;
            sl_sim_respond_common_headers(resp, "application/json");
        }
    } else if (strcmp(r.path, "/stats/reset") == 0) {
        if (strcmp(r.method, "POST") != 0) {
            method_not_allowed(resp, "POST", r.method, path);
        } else {
            pthread_mutex_lock(&sim->lock);
            sl_sim_stats_reset(sim);
            pthread_mutex_unlock(&sim->lock);
            sl_sim_respond_common_headers(resp, "application/json");
            resp->status = 200;
            sl_sim_respond_set_body(resp, "{\"reset\":true}");
        }
    } else {
        route_t route = route_path(sim, r.path);
        if (route.dep != NULL) {
            resp->api = (int)route.dep->cfg->api;
            sl_sim_respond_common_headers(resp, "application/json");
            if (!route.endpoint) {
                not_found(resp, &route, &r);
            } else if (handle_endpoint(sim, &route, &r, now_ms, resp) != SL_OK) {
                sl_sim_response_free(resp);
                return SL_ENOMEM;
            } else {
                sl_sim_stats_note_arrival(sim, route.dep,
                                          sl_sim_request_header(&r, "idempotency-key"),
                                          resp->status, now_ms);
            }
        } else {
            char msg[256];
            char method[32];
            snprintf(method, sizeof method, "%s", r.method);
            snprintf(msg, sizeof msg, "Invalid URL (%s %s): no such deployment or endpoint.",
                     method, path);
            sl_sim_respond_common_headers(resp, "application/json");
            sl_sim_respond_openai_error(resp, 404, "invalid_request_error", NULL, NULL, msg);
        }
    }
    if (!resp->in_flight_on)
        resp->delay_ms = 0;
    bool openai_like =
        resp->api < 0 || resp->api == SL_SIM_API_OPENAI || resp->api == SL_SIM_API_AZURE;
    if (openai_like && sl_sim_response_header_get(resp, "openai-processing-ms") == NULL)
        sl_sim_respond_add_header(resp, "openai-processing-ms", "0");
    *out = resp;
    return SL_OK;
}

void sl_sim_finish(sl_sim_t *sim, sl_sim_response_t *resp)
{
    if (resp == NULL || resp->in_flight_on == NULL)
        return;
    pthread_mutex_lock(&sim->lock);
    sl_sim_deployment_t *dep = resp->in_flight_on;
    dep->in_flight--;
    sim->in_flight--;
    if (resp->output_refund > 0) {
        sl_sim_limiter_refund(dep->lim, SL_SIM_DIM_OUTPUT_TOKENS, resp->output_refund);
        /* A refund for a charge made before POST /stats/reset belongs to the zeroed counters. */
        if (resp->stats_epoch == sim->stats_epoch)
            dep->count.output_tokens_charged -= resp->output_refund;
    }
    pthread_mutex_unlock(&sim->lock);
    resp->in_flight_on = NULL;
}

/* ---- Response accessors ----------------------------------------------------------------- */

/* ---- Helpers ---------------------------------------------------------------------------- */
