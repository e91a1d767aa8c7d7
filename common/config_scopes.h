/* config_scopes.h - how the config loader reads the scope hierarchy.
 *
 * Internal to the config loader (common/config*.c). Reading is in two steps because deployments
 * and tenants name their parent scopes, and a scope's side (above deployments or not) is known
 * only once they have.
 */
#ifndef SL_CONFIG_SCOPES_H
#define SL_CONFIG_SCOPES_H

#include <jansson.h>

#include "config.h"
#include "config_read.h"

/* The "scopes" array arr (NULL: none) without their limits. Names first, so parents may be named
 * in any order; then parents, checked for cycles. Names are "<kind>:<name>" and unique. */
void cfg_load_scopes(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr);
/* Once deployments and tenants are read (and nothing failed): marks the scopes above deployments
 * as provider-side, checks no scope is on both sides, and parses every scope's limits from the
 * same arr with its side's defaults. */
void cfg_load_scope_limits(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr);

#endif
