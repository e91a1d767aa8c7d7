/* endpoints.c - which path does what: sl_sim_handle (sim.h) routes GET /healthz, GET /stats,
 * POST /stats/reset and each deployment's completion endpoint, and takes a request to a
 * deployment from its method, credential and body checks to the admission decision.
 *
 * The idea to hold first: every response is allocated, with a fixed-size body buffer, header
 * table and (for a stream) its event buffers, before any state changes, so a failed
 * sl_sim_handle leaves the simulator as it was. This module has no header of its own: its one
 * entry point is sl_sim_handle in sim.h.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "batch.h"
#include "request.h"
#include "respond.h"
#include "rng.h"
#include "sim_internal.h"
#include "stats.h"

#define IDEMPOTENCY_KEY_MAX_LEN 255

/* Where a path leads. */
typedef struct {
    sl_sim_deployment_t *dep; /* NULL: no deployment of that name */
    bool endpoint;            /* the path is the deployment's completion endpoint */
    bool wrong_deployment;    /* Azure: another deployment named after /openai/deployments/ */
    bool gemini_stream;       /* Gemini: :streamGenerateContent */
    const char *rest;         /* the path after "/<name>" */
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
    route_t r = {NULL, false, false, false, NULL};
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
    r.rest = rest;
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

/* Finishes a non-200 answer of a deployment: counts it as an error, adds the limit headers. */
static void finish_error(sl_sim_t *sim, sl_sim_deployment_t *dep, sl_sim_response_t *resp,
                         int64_t now_ms)
{
    pthread_mutex_lock(&sim->lock);
    dep->count.errors++;
    sl_sim_respond_limit_headers(sim, resp, dep, now_ms);
    pthread_mutex_unlock(&sim->lock);
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
    if (!sl_sim_request_versioned(dc, req, &err)) {
        deny(sim, dep, resp, &err, now_ms);
        return SL_OK;
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

size_t sl_sim_body_limit(sl_sim_t *sim, const char *path)
{
    route_t route =
        path != NULL ? route_path(sim, path) : (route_t){NULL, false, false, false, NULL};
    size_t limit = route.dep != NULL && !route.endpoint
                       ? sl_sim_batch_body_limit(route.dep->cfg->api, route.rest)
                       : 0;
    return limit > SL_SIM_MAX_BODY_BYTES ? limit : SL_SIM_MAX_BODY_BYTES;
}

void sl_sim_set_host(sl_sim_t *sim, const char *host)
{
    pthread_mutex_lock(&sim->lock);
    snprintf(sim->host, sizeof sim->host, "%s", host != NULL ? host : "");
    pthread_mutex_unlock(&sim->lock);
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
            /* Batches end when a request sees them due: settle them all for the counts. */
            pthread_mutex_lock(&sim->lock);
            for (size_t i = 0; i < sim->cfg->n_deps; i++)
                sl_sim_batch_settle(sim, &sim->deps[i], now_ms);
            pthread_mutex_unlock(&sim->lock);
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
            bool batch = false;
            if (route.endpoint) {
                if (handle_endpoint(sim, &route, &r, now_ms, resp) != SL_OK) {
                    sl_sim_response_free(resp);
                    return SL_ENOMEM;
                }
                sl_sim_stats_note_arrival(sim, route.dep,
                                          sl_sim_request_header(&r, "idempotency-key"),
                                          resp->status, now_ms);
            } else if (sl_sim_batch_handle(sim, route.dep, &r, route.rest, now_ms, resp, &batch) !=
                       SL_OK) {
                sl_sim_response_free(resp);
                return SL_ENOMEM;
            } else if (!batch) {
                not_found(resp, &route, &r);
            }
            /* Batch requests count in their own "batch" stats, not as online arrivals. */
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
