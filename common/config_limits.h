/* config_limits.h - how the config loader reads the limits of one scope.
 *
 * Internal to the config loader (common/config*.c). A scope's limits are its shorthands (a
 * deployment's "rpm", a tenant's "tokens_per_min", ...) followed by the entries of its "buckets"
 * array, collected in a cfg_limits_t and handed to the scope's sl_*_cfg_t at the end. What a
 * limit does not state comes from its dimension (a spend limit is a strict rolling month) and
 * from the side of the hierarchy the scope is on (cfg_limit_defaults_t).
 */
#ifndef SL_CONFIG_LIMITS_H
#define SL_CONFIG_LIMITS_H

#include <jansson.h>
#include <stdint.h>

#include "config.h"
#include "config_read.h"

/* Defaults a scope gives its limits: deployments plan with their own slices, headroom and burst
 * share; callers' budgets (tenants, keys) are plain budgets: the whole limit, usable at once. */
typedef struct {
    int64_t slices;
    double headroom, burst_fraction;
    int64_t full_hold_ms;
} cfg_limit_defaults_t;

/* Tenants, keys and the scopes on the callers' side. */
extern const cfg_limit_defaults_t cfg_caller_defaults;
/* Scopes above deployments (a deployment's own are its slices_per_minute, headroom, burst). */
extern const cfg_limit_defaults_t cfg_provider_defaults;

/* A growable list of limits while a scope is parsed; start it zeroed. */
typedef struct {
    sl_limit_cfg_t *items;
    int n;
    size_t cap;
} cfg_limits_t;

/* Appends a shorthand limit named name: dimension dim with capacity per minute (or the
 * dimension's own period) and the defaults def. Nothing when capacity is not > 0; a failure when
 * ls already has a limit of that name. */
void cfg_add_shorthand(cfg_ctx_t *c, const sl_config_t *cfg, cfg_limits_t *ls, const char *where,
                       const char *name, sl_dimension_t dim, double capacity,
                       const cfg_limit_defaults_t *def);
/* Parses obj["buckets"] into ls (after any shorthands already there) and hands the list over:
 * *out (freed with the config) and *n. Each mistake in an entry is a failure naming
 * "<where>.buckets[i]". */
void cfg_finish_limits(cfg_ctx_t *c, const sl_config_t *cfg, json_t *obj, const char *where,
                       const cfg_limit_defaults_t *def, cfg_limits_t *ls, sl_limit_cfg_t **out,
                       int *n);

#endif
