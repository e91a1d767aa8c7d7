/* request.c - header, query and credential checks of a received request (see request.h), and
 * sim.h's prompt estimate of a request body. */
#include "request.h"

#include <string.h>
#include <strings.h>

#include "respond.h"

const char *sl_sim_request_header(const sl_sim_request_t *req, const char *name)
{
    if (strcasecmp(name, "authorization") == 0 && req->authorization != NULL)
        return req->authorization;
    if (strcasecmp(name, "idempotency-key") == 0 && req->idempotency_key != NULL)
        return req->idempotency_key;
    for (const char *const *h = req->headers; h != NULL && h[0] != NULL; h += 2) {
        if (strcasecmp(h[0], name) == 0)
            return h[1] != NULL ? h[1] : "";
    }
    return NULL;
}

const char *sl_sim_request_query(const sl_sim_request_t *req, const char *name)
{
    for (const char *const *q = req->query; q != NULL && q[0] != NULL; q += 2) {
        if (strcmp(q[0], name) == 0)
            return q[1] != NULL ? q[1] : "";
    }
    return NULL;
}

const char *sl_sim_request_azure_version(const sl_sim_request_t *req)
{
    const char *v = sl_sim_request_query(req, "api-version");
    return v != NULL && v[0] != '\0' ? v : "2024-10-21";
}

/* Returns the bearer token of an Authorization header, or NULL; *len gets its length. */
static const char *bearer_token(const char *auth, size_t *len)
{
    if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0)
        return NULL;
    const char *tok = auth + 7;
    while (*tok == ' ')
        tok++;
    size_t n = strlen(tok);
    while (n > 0 && tok[n - 1] == ' ')
        n--;
    *len = n;
    return n == 0 ? NULL : tok;
}

/* Whether a present credential is the configured key (any non-empty one without api_key). */
static bool key_matches(const sl_sim_dep_config_t *dc, const char *tok, size_t len)
{
    return dc->api_key == NULL ||
           (len == strlen(dc->api_key) && memcmp(tok, dc->api_key, len) == 0);
}

bool sl_sim_request_authorize(const sl_sim_dep_config_t *dc, const sl_sim_request_t *req,
                              sl_sim_error_t *err)
{
    const char *key = NULL;
    size_t len = 0;
    switch (dc->api) {
    case SL_SIM_API_OPENAI:
        key = bearer_token(sl_sim_request_header(req, "authorization"), &len);
        if (key == NULL) {
            sl_sim_respond_describe(
                err, SL_SIM_ERR_AUTH,
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer "
                "YOUR_KEY).");
            return false;
        }
        if (!key_matches(dc, key, len)) {
            sl_sim_respond_describe(err, SL_SIM_ERR_AUTH, "Incorrect API key provided.");
            err->code = "invalid_api_key";
            return false;
        }
        return true;
    case SL_SIM_API_AZURE:
        key = sl_sim_request_header(req, "api-key");
        if (key == NULL || key[0] == '\0' || !key_matches(dc, key, strlen(key))) {
            sl_sim_respond_describe(
                err, SL_SIM_ERR_AUTH,
                "Access denied due to invalid subscription key or wrong API endpoint. Make "
                "sure to provide a valid key for an active subscription and use a correct "
                "regional API endpoint for your resource.");
            err->azure_code = "401";
            return false;
        }
        return true;
    case SL_SIM_API_ANTHROPIC:
        key = sl_sim_request_header(req, "x-api-key");
        if (key == NULL || key[0] == '\0') {
            sl_sim_respond_describe(err, SL_SIM_ERR_AUTH, "x-api-key header is required");
            return false;
        }
        if (!key_matches(dc, key, strlen(key))) {
            sl_sim_respond_describe(err, SL_SIM_ERR_AUTH, "invalid x-api-key");
            return false;
        }
        return true;
    default:
        /* Google takes the key in a header or the key= query argument. */
        key = sl_sim_request_header(req, "x-goog-api-key");
        if (key == NULL)
            key = sl_sim_request_query(req, "key");
        if (key == NULL || key[0] == '\0') {
            sl_sim_respond_describe(
                err, SL_SIM_ERR_PERMISSION,
                "Method doesn't allow unregistered callers (callers without established "
                "identity). Please use API Key or other form of API consumer identity to "
                "call this API.");
            return false;
        }
        if (!key_matches(dc, key, strlen(key))) {
            sl_sim_respond_describe(err, SL_SIM_ERR_INVALID,
                                    "API key not valid. Please pass a valid API key.");
            err->reason = "API_KEY_INVALID";
            return false;
        }
        return true;
    }
}

int64_t sl_sim_prompt_estimate(const char *body, size_t len)
{
    return sl_sim_wire_openai_estimate(body, len);
}

bool sl_sim_request_versioned(const sl_sim_dep_config_t *dc, const sl_sim_request_t *req,
                              sl_sim_error_t *err)
{
    if (dc->api == SL_SIM_API_AZURE) {
        const char *version = sl_sim_request_query(req, "api-version");
        if (version == NULL || version[0] == '\0') {
            sl_sim_respond_describe(err, SL_SIM_ERR_INVALID,
                                    "The api-version query parameter (?api-version=) is "
                                    "required for all requests.");
            err->azure_code = "MissingApiVersionParameter";
            return false;
        }
    }
    if (dc->api == SL_SIM_API_ANTHROPIC) {
        const char *version = sl_sim_request_header(req, "anthropic-version");
        if (version == NULL || version[0] == '\0') {
            sl_sim_respond_describe(err, SL_SIM_ERR_INVALID,
                                    "anthropic-version: header is required");
            return false;
        }
    }
    return true;
}
