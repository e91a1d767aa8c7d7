/* config_fleet.c - the provider side of the config: the deployments (endpoints with their
 * limits), the routes (pools of deployments and how a job picks one) and the workload classes;
 * and what a deployment's settings mean for a request (see config_fleet.h, config.h).
 */
#include "config_fleet.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_limits.h"

static const char *const class_names[SL_CLASS_COUNT] = {"interactive", "standard", "partner",
                                                        "batch"};

const char *sl_class_name(sl_class_t c)
{
    return (unsigned)c < SL_CLASS_COUNT ? class_names[c] : "unknown";
}

int sl_class_parse(const char *name)
{
    for (int i = 0; i < SL_CLASS_COUNT; i++) {
        if (strcmp(name, class_names[i]) == 0)
            return i;
    }
    return -1;
}

const char *sl_provider_name(sl_provider_t p)
{
    static const char *const names[SL_PROVIDER_COUNT] = {"openai", "azure", "anthropic", "gemini"};
    return (unsigned)p < SL_PROVIDER_COUNT ? names[p] : "unknown";
}

/* In the order of sl_strategy_t; a route's "strategy" is one of these. */
static const char *const strategy_names[] = {"spread", "waterfall", "latency", "cheapest",
                                             "weighted"};
#define NSTRATEGIES ((int)(sizeof strategy_names / sizeof strategy_names[0]))
_Static_assert(NSTRATEGIES == SL_STRATEGY_WEIGHTED + 1, "a name for every sl_strategy_t");

const char *sl_strategy_name(sl_strategy_t s)
{
    return (unsigned)s < NSTRATEGIES ? strategy_names[s] : "unknown";
}

static void load_deployment(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr, size_t i,
                            sl_deployment_cfg_t *d)
{
    static const char *const keys[] = {
        "name",           "provider",          "base_url",       "model",
        "api_key_env",    "api_key_file",      "limits",         "slices_per_minute",
        "headroom",       "burst_fraction",    "full_hold_ms",   "tpm_counting",
        "input_counting", "output_counting",   "price",          "parent",
        "buckets",        "max_output_tokens", "timeout_ms",     "stream_idle_timeout_ms",
        "api_version",    "context_window",    "supports_tools", "supports_json",
        "region",         "idempotent",        "batch",          NULL};
    static const char *const limit_keys[] = {"rpm", "tpm", "itpm",          "otpm",
                                             "rpd", "tpd", "max_in_flight", NULL};
    static const char *const price_keys[] = {"input_per_mtok", "cached_input_per_mtok",
                                             "output_per_mtok", NULL};
    char where[64];
    d->batch_twin = -1;
    d->batch_of = -1;
    json_t *dj = cfg_array_object(c, arr, i, "deployments", keys, where, sizeof where);
    if (dj == NULL)
        return;
    d->name = cfg_get_str(c, dj, where, "name", NULL);
    d->provider = cfg_get_str(c, dj, where, "provider", "openai");
    d->api = SL_PROVIDER_COUNT;
    for (int p = 0; p < SL_PROVIDER_COUNT; p++) {
        if (strcmp(d->provider, sl_provider_name((sl_provider_t)p)) == 0)
            d->api = (sl_provider_t)p;
    }
    if (d->api == SL_PROVIDER_COUNT) {
        cfg_fail(c, "%s: provider must be \"openai\", \"azure\", \"anthropic\" or \"gemini\"",
                 where);
        d->api = SL_PROVIDER_OPENAI;
    }
    d->api_version = cfg_get_str(c, dj, where, "api_version",
                                 d->api == SL_PROVIDER_AZURE       ? "2024-10-21"
                                 : d->api == SL_PROVIDER_ANTHROPIC ? "2023-06-01"
                                                                   : "");
    d->context_window = cfg_get_int(c, dj, where, "context_window", 0, 0, 100000000);
    d->supports_tools = cfg_get_bool(c, dj, where, "supports_tools", 1);
    d->supports_json = cfg_get_bool(c, dj, where, "supports_json", 1);
    d->region = cfg_get_str(c, dj, where, "region", "");
    d->base_url = cfg_get_str(c, dj, where, "base_url", NULL);
    d->model = cfg_get_str(c, dj, where, "model", NULL);
    d->api_key_env = cfg_get_str(c, dj, where, "api_key_env", "");
    d->api_key_file = cfg_get_str(c, dj, where, "api_key_file", "");
    d->slices_per_minute = cfg_get_int(c, dj, where, "slices_per_minute", 60, 1, 256);
    d->headroom = cfg_get_real(c, dj, where, "headroom", 0.97, 0.01, 1.0);
    d->burst_fraction = cfg_get_real(c, dj, where, "burst_fraction", 0.5, 0.01, 1.0);
    d->full_hold_ms = cfg_get_int(c, dj, where, "full_hold_ms", 0, 0, 60000);
    const cfg_limit_defaults_t def = {.slices = d->slices_per_minute,
                                      .headroom = d->headroom,
                                      .burst_fraction = d->burst_fraction,
                                      .full_hold_ms = d->full_hold_ms};
    cfg_limits_t ls = {0};
    json_t *lj = cfg_get_obj(c, dj, where, "limits");
    if (lj != NULL) {
        cfg_check_keys(c, lj, where, limit_keys);
        d->rpm = cfg_get_int(c, lj, where, "rpm", 0, 0, CFG_I64MAX);
        d->tpm = cfg_get_int(c, lj, where, "tpm", 0, 0, CFG_I64MAX);
        cfg_add_shorthand(c, cfg, &ls, where, "rpm", SL_DIM_REQUESTS, (double)d->rpm, &def);
        cfg_add_shorthand(c, cfg, &ls, where, "tpm", SL_DIM_TOTAL_TOKENS, (double)d->tpm, &def);
        cfg_add_shorthand(c, cfg, &ls, where, "itpm", SL_DIM_INPUT_TOKENS,
                          (double)cfg_get_int(c, lj, where, "itpm", 0, 0, CFG_I64MAX), &def);
        cfg_add_shorthand(c, cfg, &ls, where, "otpm", SL_DIM_OUTPUT_TOKENS,
                          (double)cfg_get_int(c, lj, where, "otpm", 0, 0, CFG_I64MAX), &def);
        cfg_add_shorthand(c, cfg, &ls, where, "rpd", SL_DIM_REQUESTS_PER_DAY,
                          (double)cfg_get_int(c, lj, where, "rpd", 0, 0, CFG_I64MAX), &def);
        cfg_add_shorthand(c, cfg, &ls, where, "tpd", SL_DIM_TOKENS_PER_DAY,
                          (double)cfg_get_int(c, lj, where, "tpd", 0, 0, CFG_I64MAX), &def);
        cfg_add_shorthand(c, cfg, &ls, where, "max_in_flight", SL_DIM_CONCURRENCY,
                          (double)cfg_get_int(c, lj, where, "max_in_flight", 0, 0, CFG_I64MAX),
                          &def);
    }
    cfg_finish_limits(c, cfg, dj, where, &def, &ls, &d->limits, &d->nlimits);
    const char *counting = cfg_get_str(c, dj, where, "tpm_counting", "max");
    if (strcmp(counting, "max") == 0)
        d->tpm_counting = SL_TPM_COUNT_MAX;
    else if (strcmp(counting, "sum") == 0)
        d->tpm_counting = SL_TPM_COUNT_SUM;
    else if (strcmp(counting, "actual") == 0)
        d->tpm_counting = SL_TPM_COUNT_ACTUAL;
    else
        cfg_fail(c, "%s: tpm_counting must be \"max\", \"sum\" or \"actual\"", where);
    counting = cfg_get_str(c, dj, where, "input_counting", "all");
    if (strcmp(counting, "all") == 0)
        d->input_counting = SL_INPUT_COUNT_ALL;
    else if (strcmp(counting, "exclude_cache_reads") == 0)
        d->input_counting = SL_INPUT_COUNT_EXCLUDE_CACHE_READS;
    else
        cfg_fail(c, "%s: input_counting must be \"all\" or \"exclude_cache_reads\"", where);
    counting = cfg_get_str(c, dj, where, "output_counting", "generated");
    if (strcmp(counting, "generated") == 0)
        d->output_counting = SL_OUTPUT_COUNT_GENERATED;
    else if (strcmp(counting, "max_tokens") == 0)
        d->output_counting = SL_OUTPUT_COUNT_MAX_TOKENS;
    else
        cfg_fail(c, "%s: output_counting must be \"generated\" or \"max_tokens\"", where);
    json_t *pj = cfg_get_obj(c, dj, where, "price");
    if (pj != NULL) {
        cfg_check_keys(c, pj, where, price_keys);
        d->price.input_per_mtok = cfg_get_real(c, pj, where, "input_per_mtok", 0, 0, 1e6);
        d->price.output_per_mtok = cfg_get_real(c, pj, where, "output_per_mtok", 0, 0, 1e6);
        d->price.cached_input_per_mtok =
            cfg_get_real(c, pj, where, "cached_input_per_mtok", d->price.input_per_mtok, 0, 1e6);
    }
    const char *parent = cfg_get_str(c, dj, where, "parent", "");
    d->parent = parent[0] != '\0' ? sl_config_scope(cfg, parent) : -1;
    if (parent[0] != '\0' && d->parent < 0)
        cfg_fail(c, "%s: unknown parent scope \"%s\"", where, parent);
    d->max_output_tokens = cfg_get_int(c, dj, where, "max_output_tokens", 16384, 1, 10000000);
    d->timeout_ms = cfg_get_int(c, dj, where, "timeout_ms", 120000, 100, 3600000);
    d->stream_idle_timeout_ms =
        cfg_get_int(c, dj, where, "stream_idle_timeout_ms", 30000, 0, 3600000);
    d->idempotent = cfg_get_bool(c, dj, where, "idempotent", 0);
}

/* The batch API's default base URL: the online one, except Azure's, whose batches live at the
 * resource ("…/openai"), not under "/deployments/NAME". Kept in the config's own JSON (so it
 * lives as long as the config); NULL when out of memory. */
static const char *batch_base_default(json_t *bj, const sl_deployment_cfg_t *d)
{
    char url[1024];
    snprintf(url, sizeof url, "%s", d->base_url != NULL ? d->base_url : "");
    if (d->api == SL_PROVIDER_AZURE) {
        char *cut = strstr(url, "/deployments/");
        if (cut != NULL)
            *cut = '\0';
    }
    if (json_object_set_new(bj, "_base_url", json_string(url)) != 0)
        return NULL;
    return json_string_value(json_object_get(bj, "_base_url"));
}

/* Deployment i's "batch" object, if it has one, as its batch twin at index k (see
 * sl_batch_cfg_t): a copy of the deployment that speaks to its batch API, named
 * "<name>/batch", priced at the discount, limited only by the enqueued tokens. */
static void load_batch_twin(cfg_ctx_t *c, sl_config_t *cfg, json_t *dj, int i, int k)
{
    static const char *const keys[] = {
        "base_url", "model",     "window_ms", "max_requests",    "max_bytes",        "linger_ms",
        "poll_ms",  "answer_ms", "discount",  "enqueued_tokens", "auto_min_left_ms", NULL};
    sl_deployment_cfg_t *d = &cfg->deployments[i];
    char where[96];
    snprintf(where, sizeof where, "deployments[%d].batch", i);
    json_t *bj = json_object_get(dj, "batch");
    cfg_check_keys(c, bj, where, keys);
    sl_deployment_cfg_t *t = &cfg->deployments[k];
    *t = *d;
    t->limits = NULL;
    t->nlimits = 0;
    t->parent = -1; /* a provider's batch limits are its own, not the online ones above it */
    t->rpm = t->tpm = 0;
    t->idempotent = 0;
    t->batch_twin = -1;
    t->batch_of = i;
    d->batch_twin = k;
    sl_batch_cfg_t *b = &t->batch;
    b->base_url = json_object_get(bj, "base_url") != NULL
                      ? cfg_get_str(c, bj, where, "base_url", NULL)
                      : batch_base_default(bj, d);
    if (b->base_url == NULL && !c->failed)
        cfg_fail(c, "%s: out of memory", where);
    b->model =
        json_object_get(bj, "model") != NULL ? cfg_get_str(c, bj, where, "model", NULL) : d->model;
    t->model = b->model;
    b->window_ms = cfg_get_int(c, bj, where, "window_ms", 86400000, 1000, 7 * INT64_C(86400000));
    b->auto_min_left_ms = cfg_get_int(c, bj, where, "auto_min_left_ms", b->window_ms / 6 * 5, 0,
                                      30 * INT64_C(86400000));
    /* The providers' own limits on one batch: Anthropic 100,000 requests, the others 50,000. */
    int64_t most = d->api == SL_PROVIDER_ANTHROPIC ? 100000 : 50000;
    b->max_requests = cfg_get_int(c, bj, where, "max_requests", most, 1, most);
    b->max_bytes = cfg_get_int(c, bj, where, "max_bytes", 1000000, 1000, 15000000);
    b->linger_ms = cfg_get_int(c, bj, where, "linger_ms", 2000, 0, 3600000);
    b->poll_ms = cfg_get_int(c, bj, where, "poll_ms", 30000, 100, 3600000);
    b->answer_ms = cfg_get_int(c, bj, where, "answer_ms", 60000, 100, 3600000);
    b->discount = cfg_get_real(c, bj, where, "discount", 0.5, 0.0, 1.0);
    b->enqueued_tokens = cfg_get_int(c, bj, where, "enqueued_tokens", 0, 0, CFG_I64MAX);
    t->price.input_per_mtok *= b->discount;
    t->price.cached_input_per_mtok *= b->discount;
    t->price.output_per_mtok *= b->discount;
    char name[256];
    snprintf(name, sizeof name, "%s/batch", d->name != NULL ? d->name : "");
    if (json_object_set_new(bj, "_name", json_string(name)) != 0) {
        cfg_fail(c, "out of memory");
        return;
    }
    t->name = json_string_value(json_object_get(bj, "_name"));
    const cfg_limit_defaults_t def = {.slices = 1, .headroom = 1.0, .burst_fraction = 1.0};
    cfg_limits_t ls = {0};
    cfg_add_shorthand(c, cfg, &ls, where, "enqueued_tokens", SL_DIM_ENQUEUED_TOKENS,
                      (double)b->enqueued_tokens, &def);
    t->limits = ls.items;
    t->nlimits = ls.n;
}

void cfg_load_deployments(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr)
{
    size_t nd = json_array_size(arr);
    /* Room for a batch twin of each (load_batch_twin), after all the configured ones. */
    cfg->deployments = calloc(2 * nd + 1, sizeof *cfg->deployments);
    if (cfg->deployments == NULL) {
        cfg_fail(c, "out of memory");
        return;
    }
    for (size_t i = 0; i < nd; i++) {
        load_deployment(c, cfg, arr, i, &cfg->deployments[i]);
        cfg->ndeployments++;
        if (!c->failed && sl_config_deployment(cfg, cfg->deployments[i].name) != (int)i)
            cfg_fail(c, "deployments[%zu]: duplicate name \"%s\"", i, cfg->deployments[i].name);
    }
    for (size_t i = 0; i < nd && !c->failed; i++) {
        json_t *dj = json_array_get(arr, i);
        if (json_object_get(dj, "batch") == NULL)
            continue;
        if (!json_is_object(json_object_get(dj, "batch"))) {
            cfg_fail(c, "deployments[%zu].batch: must be an object", i);
            return;
        }
        int k = cfg->ndeployments++;
        load_batch_twin(c, cfg, dj, (int)i, k);
        if (!c->failed && sl_config_deployment(cfg, cfg->deployments[k].name) != k)
            cfg_fail(c, "deployments[%zu]: its batch twin's name \"%s\" is taken", i,
                     cfg->deployments[k].name);
    }
}

void cfg_load_classes(cfg_ctx_t *c, sl_config_t *cfg, json_t *root)
{
    static const char *const keys[] = {"deadline_ms", "max_queue",   "weight",
                                       "overload",    "yield_above", NULL};
    /* Fields not set here are 0: overload "reject", and yield_above 0 (never waits). */
    static const sl_class_cfg_t defaults[SL_CLASS_COUNT] = {
        [SL_CLASS_INTERACTIVE] = {.deadline_ms = 30000, .max_queue = 1000, .weight = 8},
        [SL_CLASS_STANDARD] = {.deadline_ms = 600000, .max_queue = 100000, .weight = 4},
        [SL_CLASS_PARTNER] = {.deadline_ms = 600000, .max_queue = 100000, .weight = 4},
        [SL_CLASS_BATCH] = {.deadline_ms = 86400000,
                            .max_queue = 1000000,
                            .weight = 1,
                            .yield_above = 0.5},
    };
    json_t *cj = cfg_get_obj(c, root, "config", "classes");
    for (int i = 0; i < SL_CLASS_COUNT; i++)
        cfg->classes[i] = defaults[i];
    if (cj == NULL)
        return;
    const char *name;
    json_t *val;
    json_object_foreach(cj, name, val)
    {
        int cls = sl_class_parse(name);
        char where[64];
        snprintf(where, sizeof where, "classes.%s", name);
        if (cls < 0 || !json_is_object(val)) {
            cfg_fail(c, "%s: unknown class or not an object", where);
            continue;
        }
        cfg_check_keys(c, val, where, keys);
        sl_class_cfg_t *k = &cfg->classes[cls];
        k->deadline_ms = cfg_get_int(c, val, where, "deadline_ms", k->deadline_ms, 1, CFG_I64MAX);
        k->max_queue = cfg_get_int(c, val, where, "max_queue", k->max_queue, 1, CFG_I64MAX);
        k->weight = cfg_get_int(c, val, where, "weight", k->weight, 1, 1000000);
        const char *overload = cfg_get_str(c, val, where, "overload", "reject");
        if (strcmp(overload, "reject") == 0)
            k->overload = SL_OVERLOAD_REJECT;
        else if (strcmp(overload, "shed") == 0)
            k->overload = SL_OVERLOAD_SHED;
        else if (strcmp(overload, "degrade") == 0)
            k->overload = SL_OVERLOAD_DEGRADE;
        else
            cfg_fail(c, "%s: \"overload\" must be \"reject\", \"shed\" or \"degrade\"", where);
        k->yield_above = cfg_get_real(c, val, where, "yield_above", k->yield_above, 0, 1);
    }
}

void cfg_load_routes(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr)
{
    static const char *const keys[] = {
        "name",     "deployments",     "default_max_tokens", "strategy", "overflow_at",
        "fallback", "max_retry_ratio", "degrade_to",         "batch",    NULL};
    size_t n = json_array_size(arr);
    cfg->routes = calloc(n + 1, sizeof *cfg->routes);
    if (cfg->routes == NULL) {
        cfg_fail(c, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char where[64];
        json_t *rj = cfg_array_object(c, arr, i, "routes", keys, where, sizeof where);
        if (rj == NULL)
            continue;
        sl_route_cfg_t *r = &cfg->routes[cfg->nroutes];
        r->name = cfg_get_str(c, rj, where, "name", NULL);
        if (r->name != NULL && sl_config_route(cfg, r->name) >= 0)
            cfg_fail(c, "%s: duplicate route name \"%s\"", where, r->name);
        cfg->nroutes++;
        r->default_max_tokens = cfg_get_int(c, rj, where, "default_max_tokens", 1024, 1, 10000000);
        cfg_resolve_names(c, cfg, rj, where, "deployments", "deployment", sl_config_deployment,
                          &r->deployments, &r->ndeployments);
        if (r->ndeployments == 0 || r->ndeployments > SL_ROUTE_MAX_DEPLOYMENTS)
            cfg_fail(c, "%s: needs at least one deployment and at most %d", where,
                     SL_ROUTE_MAX_DEPLOYMENTS);
        const char *strategy = cfg_get_str(c, rj, where, "strategy", "spread");
        int found = -1;
        for (int k = 0; k < NSTRATEGIES; k++) {
            if (strcmp(strategy, strategy_names[k]) == 0)
                found = k;
        }
        if (found < 0)
            cfg_fail(c,
                     "%s: strategy must be \"spread\", \"waterfall\", \"latency\", "
                     "\"cheapest\" or \"weighted\"",
                     where);
        r->strategy = found < 0 ? SL_STRATEGY_SPREAD : (sl_strategy_t)found;
        r->overflow_at = cfg_get_real(c, rj, where, "overflow_at", 0.9, 0.01, 1.0);
        r->max_retry_ratio = cfg_get_real(c, rj, where, "max_retry_ratio", 0.5, 0.0, 10.0);
        const char *policy = cfg_get_str(c, rj, where, "batch", "online");
        r->batch_policy = strcmp(policy, "provider") == 0 ? SL_BATCH_PROVIDER
                          : strcmp(policy, "auto") == 0   ? SL_BATCH_AUTO
                                                          : SL_BATCH_ONLINE;
        if (strcmp(policy, "online") != 0 && r->batch_policy == SL_BATCH_ONLINE)
            cfg_fail(c, "%s: batch must be \"online\", \"provider\" or \"auto\"", where);
        int twins = 0;
        for (int k = 0; k < r->ndeployments; k++) {
            int d = r->deployments[k];
            twins += cfg->deployments[d].batch_twin >= 0;
            if (cfg->deployments[d].batch_of >= 0)
                cfg_fail(c, "%s: \"%s\" is a batch API: name its online deployment instead", where,
                         cfg->deployments[d].name);
        }
        if (r->batch_policy != SL_BATCH_ONLINE && twins == 0 && !c->failed)
            cfg_fail(c, "%s: batch \"%s\" needs a deployment with a \"batch\" object", where,
                     policy);
    }
    /* Fallbacks name other routes, in any order: resolved once every route is known. */
    for (int i = 0; i < cfg->nroutes && !c->failed; i++) {
        char where[64];
        snprintf(where, sizeof where, "routes[%d]", i);
        json_t *rj = json_array_get(arr, (size_t)i);
        cfg_resolve_names(c, cfg, rj, where, "fallback", "route", sl_config_route,
                          &cfg->routes[i].fallbacks, &cfg->routes[i].nfallbacks);
        for (int k = 0; k < cfg->routes[i].nfallbacks; k++) {
            if (cfg->routes[i].fallbacks[k] == i)
                cfg_fail(c, "%s: a route cannot fall back to itself", where);
        }
        const char *to = cfg_get_str(c, rj, where, "degrade_to", "");
        cfg->routes[i].degrade_to = to[0] != '\0' ? sl_config_route(cfg, to) : -1;
        if (to[0] != '\0' && cfg->routes[i].degrade_to < 0)
            cfg_fail(c, "%s: unknown route \"%s\" at degrade_to", where, to);
        if (cfg->routes[i].degrade_to == i)
            cfg_fail(c, "%s: a route cannot degrade to itself", where);
    }
}
