/* config_fleet.h - how the config loader reads the deployments, routes and classes.
 *
 * Internal to the config loader (common/config*.c); the public questions about a deployment
 * (which limits exist, what they count) are in config.h and capacity.h. Deployments name their parent scope, so the
 * scopes are read first; routes name deployments, so deployments come before routes.
 */
#ifndef SL_CONFIG_FLEET_H
#define SL_CONFIG_FLEET_H

#include <jansson.h>

#include "config.h"
#include "config_read.h"

/* The "classes" object of root: each class's defaults, overridden by the classes it names. */
void cfg_load_classes(cfg_ctx_t *c, sl_config_t *cfg, json_t *root);
/* The "deployments" array arr (NULL: none) with their limits; names are unique. */
void cfg_load_deployments(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr);
/* The "routes" array arr (NULL: none): each names 1 to SL_ROUTE_MAX_DEPLOYMENTS deployments and
 * may fall back to other routes, named in any order. */
void cfg_load_routes(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr);

#endif
