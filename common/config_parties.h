/* config_parties.h - how the config loader reads tenants, API keys and admin keys.
 *
 * Internal to the config loader (common/config*.c). Tenants name routes and their partner scope,
 * keys name tenants, admin keys name tenants and a partner scope: each is read after what it
 * names, in this order.
 */
#ifndef SL_CONFIG_PARTIES_H
#define SL_CONFIG_PARTIES_H

#include <jansson.h>

#include "config.h"
#include "config_read.h"

/* The "tenants" array arr (NULL: none) with their limits; the guarantees add up to 0.95 at most. */
void cfg_load_tenants(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr);
/* The "keys" array arr (NULL: none): ids and hashes are unique. */
void cfg_load_keys(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr);
/* The "admin_keys" array arr (NULL: none). "admin" sees and changes everything; "partner" reads
 * only its tenants, named in "tenants" or found under its "partner" scope (e.g. "partner:acme").
 * An admin key may not also be an API key. */
void cfg_load_admin_keys(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr);

#endif
