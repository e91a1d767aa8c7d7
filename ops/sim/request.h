/* request.h - reading a received request: its headers and query arguments, and whether its
 * credential is the deployment's, checked the way the deployment's API expects it.
 *
 * The idea to hold first: an sl_sim_request_t is borrowed from the HTTP layer for one
 * sl_sim_handle call; nothing here keeps a pointer into it or changes any state.
 */
#ifndef SL_SIM_REQUEST_H
#define SL_SIM_REQUEST_H

#include <stdbool.h>

#include "sim_internal.h"

/* The value of request header name (case-insensitive), or NULL. */
const char *sl_sim_request_header(const sl_sim_request_t *req, const char *name);

/* The value of query argument name, or NULL ("" for an argument without a value). */
const char *sl_sim_request_query(const sl_sim_request_t *req, const char *name);

/* The Azure api-version of the request, for its messages. */
const char *sl_sim_request_azure_version(const sl_sim_request_t *req);

/* Checks the credential the way the deployment's API expects it; false with *err otherwise.
 * Unlike the providers, no message echoes any part of a key: test logs end up in CI output. */
bool sl_sim_request_authorize(const sl_sim_dep_config_t *dc, const sl_sim_request_t *req,
                              sl_sim_error_t *err);

/* Checks the API version the deployment's API requires (Azure's api-version query parameter,
 * Anthropic's anthropic-version header); false with *err otherwise. */
bool sl_sim_request_versioned(const sl_sim_dep_config_t *dc, const sl_sim_request_t *req,
                              sl_sim_error_t *err);

#endif
