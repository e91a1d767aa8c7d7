/* config_scopes.c - the scope hierarchy: workspaces, projects and organisations above
 * deployments, partners and apps above or under tenants (see config_scopes.h).
 *
 * A scope is on the provider's side when a deployment is under it, else on the callers' side; a
 * scope on both sides is refused. The side decides the defaults of its limits, so they are read
 * once deployments and tenants have named their parents.
 */
#include "config_scopes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_limits.h"

void cfg_load_scopes(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr)
{
    static const char *const keys[] = {"name", "parent", "buckets", NULL};
    size_t n = json_array_size(arr);
    cfg->scopes = calloc(n + 1, sizeof *cfg->scopes);
    if (cfg->scopes == NULL) {
        cfg_fail(c, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char where[64];
        json_t *sj = cfg_array_object(c, arr, i, "scopes", keys, where, sizeof where);
        sl_scope_cfg_t *sc = &cfg->scopes[cfg->nscopes];
        sc->parent = -1;
        sc->name = sj != NULL ? cfg_get_str(c, sj, where, "name", NULL) : NULL;
        if (sc->name == NULL)
            continue;
        const char *colon = strchr(sc->name, ':');
        if (colon == NULL || colon == sc->name || colon[1] == '\0')
            cfg_fail(c, "%s: a scope is named \"<kind>:<name>\", e.g. \"project:main\"", where);
        static const char *const reserved[] = {"deployment:", "tenant:", "key:"};
        for (int r = 0; r < 3; r++) {
            if (strncmp(sc->name, reserved[r], strlen(reserved[r])) == 0)
                cfg_fail(c, "%s: \"%s\" scopes are configured in their own section", where,
                         reserved[r]);
        }
        if (sl_config_scope(cfg, sc->name) >= 0)
            cfg_fail(c, "%s: duplicate scope \"%s\"", where, sc->name);
        cfg->nscopes++;
    }
    for (int i = 0; i < cfg->nscopes; i++) {
        char where[64];
        snprintf(where, sizeof where, "scopes[%d]", i);
        const char *parent = cfg_get_str(c, json_array_get(arr, (size_t)i), where, "parent", "");
        if (parent[0] == '\0')
            continue;
        cfg->scopes[i].parent = sl_config_scope(cfg, parent);
        if (cfg->scopes[i].parent < 0)
            cfg_fail(c, "%s: unknown parent scope \"%s\"", where, parent);
    }
    for (int i = 0; i < cfg->nscopes; i++) {
        int p = cfg->scopes[i].parent, steps = 0;
        while (p >= 0 && steps++ <= cfg->nscopes)
            p = cfg->scopes[p].parent;
        if (p >= 0)
            cfg_fail(c, "scopes: \"%s\" is its own ancestor", cfg->scopes[i].name);
    }
}

void cfg_load_scope_limits(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr)
{
    for (int d = 0; d < cfg->ndeployments; d++) {
        for (int p = cfg->deployments[d].parent, steps = 0; p >= 0 && steps < cfg->nscopes;
             p = cfg->scopes[p].parent, steps++)
            cfg->scopes[p].provider_side = 1;
    }
    for (int t = 0; t < cfg->ntenants; t++) {
        for (int p = cfg->tenants[t].parent, steps = 0; p >= 0 && steps < cfg->nscopes;
             p = cfg->scopes[p].parent, steps++) {
            if (cfg->scopes[p].provider_side)
                cfg_fail(c, "scopes: \"%s\" is above both a deployment and a tenant",
                         cfg->scopes[p].name);
        }
    }
    for (int i = 0; i < cfg->nscopes; i++) {
        sl_scope_cfg_t *sc = &cfg->scopes[i];
        if (sc->provider_side && strncmp(sc->name, "app:", 4) == 0)
            cfg_fail(c, "scopes: \"%s\": app scopes are on the callers' side", sc->name);
        char where[64];
        snprintf(where, sizeof where, "scopes[%d]", i);
        cfg_limits_t ls = {0};
        cfg_finish_limits(c, cfg, json_array_get(arr, (size_t)i), where,
                          sc->provider_side ? &cfg_provider_defaults : &cfg_caller_defaults, &ls,
                          &sc->limits, &sc->nlimits);
    }
}
