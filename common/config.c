/* config.c - loading and checking the sluice config file (see config.h).
 *
 * Unknown keys are errors: a typo in a limit must not silently leave a provider unprotected.
 */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_fleet.h"
#include "config_limits.h"
#include "config_read.h"
#include "util.h"

static void load_kafka(cfg_ctx_t *c, sl_config_t *cfg, json_t *root)
{
    static const char *const keys[] = {"bootstrap_servers", "bootstrap_file", "topics",
                                       "properties", NULL};
    static const char *const topic_keys[] = {"requests", "jobs",   "dispatch", "results",
                                             "usage",    "stream", NULL};
    sl_kafka_cfg_t *k = &cfg->kafka;
    json_t *kj = cfg_get_obj(c, root, "config", "kafka");
    json_t *empty = json_object();
    if (kj == NULL)
        kj = empty;
    cfg_check_keys(c, kj, "kafka", keys);
    k->bootstrap_servers = cfg_get_str(c, kj, "kafka", "bootstrap_servers", "");
    k->bootstrap_file = cfg_get_str(c, kj, "kafka", "bootstrap_file", "var/devkafka.bootstrap");
    json_t *tj = cfg_get_obj(c, kj, "kafka", "topics");
    if (tj == NULL)
        tj = empty;
    cfg_check_keys(c, tj, "kafka.topics", topic_keys);
    k->topic_requests = cfg_get_str(c, tj, "kafka.topics", "requests", "sluice.requests");
    k->topic_jobs = cfg_get_str(c, tj, "kafka.topics", "jobs", "sluice.jobs");
    k->topic_dispatch = cfg_get_str(c, tj, "kafka.topics", "dispatch", "sluice.dispatch");
    k->topic_results = cfg_get_str(c, tj, "kafka.topics", "results", "sluice.results");
    k->topic_usage = cfg_get_str(c, tj, "kafka.topics", "usage", "sluice.usage");
    k->topic_stream = cfg_get_str(c, tj, "kafka.topics", "stream", "sluice.stream");
    json_t *pj = cfg_get_obj(c, kj, "kafka", "properties");
    if (pj != NULL) {
        size_t n = json_object_size(pj);
        k->prop_names = calloc(n + 1, sizeof *k->prop_names);
        k->prop_values = calloc(n + 1, sizeof *k->prop_values);
        const char *name;
        json_t *val;
        json_object_foreach(pj, name, val)
        {
            if (!json_is_string(val)) {
                cfg_fail(c, "kafka.properties: \"%s\" must be a string", name);
                continue;
            }
            k->prop_names[k->nprops] = name;
            k->prop_values[k->nprops] = json_string_value(val);
            k->nprops++;
        }
    }
    json_decref(empty);
}

static void load_tenants(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr)
{
    static const char *const keys[] = {"name",    "weight",  "tokens_per_min", "routes",
                                       "parent",  "buckets", "guarantee",      "max_in_flight",
                                       "regions", NULL};
    size_t n = json_array_size(arr);
    cfg->tenants = calloc(n + 1, sizeof *cfg->tenants);
    if (cfg->tenants == NULL) {
        cfg_fail(c, "out of memory");
        return;
    }
    double guarantees = 0;
    for (size_t i = 0; i < n; i++) {
        char where[64];
        json_t *tj = cfg_array_object(c, arr, i, "tenants", keys, where, sizeof where);
        if (tj == NULL)
            continue;
        sl_tenant_cfg_t *t = &cfg->tenants[cfg->ntenants];
        t->name = cfg_get_str(c, tj, where, "name", NULL);
        if (t->name != NULL && sl_config_tenant(cfg, t->name) >= 0)
            cfg_fail(c, "%s: duplicate tenant name \"%s\"", where, t->name);
        cfg->ntenants++;
        t->weight = cfg_get_int(c, tj, where, "weight", 1, 1, 1000000);
        t->tokens_per_min = cfg_get_int(c, tj, where, "tokens_per_min", 0, 0, CFG_I64MAX);
        t->guarantee = cfg_get_real(c, tj, where, "guarantee", 0, 0, 0.95);
        json_t *regions = cfg_get_arr(c, tj, where, "regions");
        t->regions = calloc(json_array_size(regions) + 1, sizeof *t->regions);
        for (size_t k = 0; t->regions != NULL && k < json_array_size(regions); k++) {
            const char *reg = json_string_value(json_array_get(regions, k));
            if (reg == NULL || reg[0] == '\0')
                cfg_fail(c, "%s: regions[%zu] must be a non-empty string", where, k);
            else
                t->regions[t->nregions++] = reg;
        }
        guarantees += t->guarantee;
        cfg_limits_t ls = {0};
        cfg_add_shorthand(c, cfg, &ls, where, "tokens", SL_DIM_TOTAL_TOKENS,
                          (double)t->tokens_per_min, &cfg_caller_defaults);
        cfg_add_shorthand(c, cfg, &ls, where, "max_in_flight", SL_DIM_CONCURRENCY,
                          (double)cfg_get_int(c, tj, where, "max_in_flight", 0, 0, CFG_I64MAX),
                          &cfg_caller_defaults);
        cfg_finish_limits(c, cfg, tj, where, &cfg_caller_defaults, &ls, &t->limits, &t->nlimits);
        const char *parent = cfg_get_str(c, tj, where, "parent", "");
        t->parent = parent[0] != '\0' ? sl_config_scope(cfg, parent) : -1;
        if (parent[0] != '\0' && t->parent < 0)
            cfg_fail(c, "%s: unknown parent scope \"%s\"", where, parent);
        cfg_resolve_names(c, cfg, tj, where, "routes", "route", sl_config_route, &t->routes,
                          &t->nroutes);
    }
    if (guarantees > 0.95)
        cfg_fail(c, "tenants: the guarantees add up to %.2f; at most 0.95 can be promised",
                 guarantees);
}

static void load_keys(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr)
{
    static const char *const keys[] = {"id",     "hash",          "tenant",  "app", "env",
                                       "paused", "max_in_flight", "buckets", NULL};
    size_t n = json_array_size(arr);
    cfg->keys = calloc(n + 1, sizeof *cfg->keys);
    if (cfg->keys == NULL) {
        cfg_fail(c, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char where[64];
        json_t *kj = cfg_array_object(c, arr, i, "keys", keys, where, sizeof where);
        if (kj == NULL)
            continue;
        sl_key_cfg_t *k = &cfg->keys[cfg->nkeys++];
        k->id = cfg_get_str(c, kj, where, "id", NULL);
        const char *hash = cfg_get_str(c, kj, where, "hash", NULL);
        if (hash != NULL && sl_hex_decode(hash, k->hash, sizeof k->hash) != SL_OK)
            cfg_fail(c, "%s: hash must be 64 hex digits (see `sluice hash-key`)", where);
        const char *tenant = cfg_get_str(c, kj, where, "tenant", NULL);
        k->tenant = tenant != NULL ? sl_config_tenant(cfg, tenant) : -1;
        if (tenant != NULL && k->tenant < 0)
            cfg_fail(c, "%s: unknown tenant \"%s\"", where, tenant);
        for (int j = 0; j < cfg->nkeys - 1 && k->id != NULL; j++) {
            if (cfg->keys[j].id != NULL && strcmp(cfg->keys[j].id, k->id) == 0)
                cfg_fail(c, "%s: duplicate key id \"%s\"", where, k->id);
            else if (memcmp(cfg->keys[j].hash, k->hash, sizeof k->hash) == 0)
                cfg_fail(c, "%s: duplicate key hash (ids \"%s\" and \"%s\" have the same key)",
                         where, cfg->keys[j].id ? cfg->keys[j].id : "?", k->id);
        }
        k->app = cfg_get_str(c, kj, where, "app", "default");
        k->env = cfg_get_str(c, kj, where, "env", "prod");
        json_t *p = json_object_get(kj, "paused");
        if (p != NULL && !json_is_boolean(p))
            cfg_fail(c, "%s: \"paused\" must be true or false", where);
        k->paused = p != NULL && json_is_true(p);
        cfg_limits_t ls = {0};
        cfg_add_shorthand(c, cfg, &ls, where, "max_in_flight", SL_DIM_CONCURRENCY,
                          (double)cfg_get_int(c, kj, where, "max_in_flight", 0, 0, CFG_I64MAX),
                          &cfg_caller_defaults);
        cfg_finish_limits(c, cfg, kj, where, &cfg_caller_defaults, &ls, &k->limits, &k->nlimits);
    }
}

/* Whether scope (an index into scopes) is tenant t's partner scope or above it. */
static int tenant_under_scope(const sl_config_t *cfg, int t, int scope)
{
    for (int p = cfg->tenants[t].parent, steps = 0; p >= 0 && steps <= cfg->nscopes;
         p = cfg->scopes[p].parent, steps++) {
        if (p == scope)
            return 1;
    }
    return 0;
}

/* Admin API keys: "admin" sees and changes everything; "partner" reads only its tenants, named
 * in "tenants" or found under its "partner" scope (e.g. "partner:acme"). */
static void load_admin_keys(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr)
{
    static const char *const keys[] = {"id", "hash", "role", "tenants", "partner", NULL};
    size_t n = json_array_size(arr);
    cfg->admin_keys = calloc(n + 1, sizeof *cfg->admin_keys);
    if (cfg->admin_keys == NULL) {
        cfg_fail(c, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char where[64];
        json_t *kj = cfg_array_object(c, arr, i, "admin_keys", keys, where, sizeof where);
        if (kj == NULL)
            continue;
        sl_admin_key_cfg_t *k = &cfg->admin_keys[cfg->nadmin_keys++];
        k->id = cfg_get_str(c, kj, where, "id", NULL);
        const char *hash = cfg_get_str(c, kj, where, "hash", NULL);
        if (hash != NULL && sl_hex_decode(hash, k->hash, sizeof k->hash) != SL_OK)
            cfg_fail(c, "%s: hash must be 64 hex digits (see `sluice hash-key`)", where);
        for (int j = 0; j < cfg->nadmin_keys - 1 && k->id != NULL; j++) {
            if (cfg->admin_keys[j].id != NULL && strcmp(cfg->admin_keys[j].id, k->id) == 0)
                cfg_fail(c, "%s: duplicate admin key id \"%s\"", where, k->id);
            else if (memcmp(cfg->admin_keys[j].hash, k->hash, sizeof k->hash) == 0)
                cfg_fail(c, "%s: duplicate admin key hash", where);
        }
        for (int j = 0; j < cfg->nkeys && hash != NULL; j++) {
            if (memcmp(cfg->keys[j].hash, k->hash, sizeof k->hash) == 0)
                cfg_fail(c, "%s: the same key is also API key \"%s\"; use separate keys", where,
                         cfg->keys[j].id);
        }
        const char *role = cfg_get_str(c, kj, where, "role", "admin");
        if (strcmp(role, "admin") == 0) {
            k->role = SL_ADMIN_ROLE_ADMIN;
            if (json_object_get(kj, "tenants") != NULL || json_object_get(kj, "partner") != NULL)
                cfg_fail(c,
                         "%s: an admin key sees every tenant; \"tenants\" and \"partner\" are "
                         "for role \"partner\"",
                         where);
            continue;
        }
        if (strcmp(role, "partner") != 0) {
            cfg_fail(c, "%s: role must be \"admin\" or \"partner\"", where);
            continue;
        }
        k->role = SL_ADMIN_ROLE_PARTNER;
        cfg_resolve_names(c, cfg, kj, where, "tenants", "tenant", sl_config_tenant, &k->tenants,
                          &k->ntenants);
        const char *partner = cfg_get_str(c, kj, where, "partner", "");
        int scope = partner[0] != '\0' ? sl_config_scope(cfg, partner) : -1;
        if (partner[0] != '\0' && scope < 0)
            cfg_fail(c, "%s: unknown partner scope \"%s\"", where, partner);
        for (int t = 0; scope >= 0 && k->tenants != NULL && t < cfg->ntenants; t++) {
            int have = 0;
            for (int j = 0; j < k->ntenants; j++)
                have |= k->tenants[j] == t;
            if (have || !tenant_under_scope(cfg, t, scope))
                continue;
            int *nt = realloc(k->tenants, (size_t)(k->ntenants + 2) * sizeof *nt);
            if (nt == NULL) {
                cfg_fail(c, "out of memory");
                break;
            }
            k->tenants = nt;
            k->tenants[k->ntenants++] = t;
        }
        if (!c->failed && k->ntenants == 0)
            cfg_fail(c, "%s: a partner key needs \"tenants\" or a \"partner\" scope with tenants",
                     where);
    }
}

/* The scope hierarchy above deployments and tenants. Names first, so parents may be named in any
 * order; then parents, checked for cycles; then limits, with provider-side defaults for scopes
 * above deployments. */
static void load_scopes(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr)
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

/* Marks the scopes above deployments as provider-side, checks no scope is on both sides, and
 * parses every scope's limits with its side's defaults. */
static void load_scope_limits(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr)
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

sl_err_t sl_config_load(const char *path, sl_config_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"minute_ms", "schema_dir",  "kafka",    "ingest",
                                       "scheduler", "dispatcher",  "signing",  "classes",
                                       "scopes",    "deployments", "routes",   "tenants",
                                       "keys",      "admin_keys",  "$comment", NULL};
    static const char *const ingest_keys[] = {"max_request_bytes", "metrics_listen", NULL};
    static const char *const sched_keys[] = {
        "db",           "lease_ms", "max_attempts", "drr_quantum_tokens", "metrics_listen",
        "admin_listen", NULL};
    static const char *const disp_keys[] = {"max_in_flight", "metrics_listen", NULL};
    static const char *const sign_keys[] = {"secret_key_file", "public_key_file", NULL};
    *out = NULL;
    cfg_ctx_t c = {err, errlen, 0};
    json_error_t jerr;
    FILE *probe = fopen(path, "r");
    if (probe == NULL) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return SL_EIO;
    }
    fclose(probe);
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        snprintf(err, errlen, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
        return SL_EPARSE;
    }
    sl_config_t *cfg = calloc(1, sizeof *cfg);
    if (cfg == NULL) {
        json_decref(root);
        return SL_ENOMEM;
    }
    cfg->priv_ = root;
    if (!json_is_object(root)) {
        cfg_fail(&c, "top level must be an object");
        goto out;
    }
    cfg_check_keys(&c, root, "config", keys);
    cfg->path = strdup(path);
    cfg->minute_ms = cfg_get_int(&c, root, "config", "minute_ms", 60000, 10, 86400000);
    cfg->schema_dir = cfg_get_str(&c, root, "config", "schema_dir", "schema");
    load_kafka(&c, cfg, root);

    json_t *empty = json_object();
    json_t *ij = cfg_get_obj(&c, root, "config", "ingest");
    ij = ij != NULL ? ij : empty;
    cfg_check_keys(&c, ij, "ingest", ingest_keys);
    cfg->max_request_bytes =
        cfg_get_int(&c, ij, "ingest", "max_request_bytes", 1 << 20, 256, 64 << 20);
    cfg->ingest_metrics_listen = cfg_get_str(&c, ij, "ingest", "metrics_listen", "127.0.0.1:9310");

    json_t *sj = cfg_get_obj(&c, root, "config", "scheduler");
    sj = sj != NULL ? sj : empty;
    cfg_check_keys(&c, sj, "scheduler", sched_keys);
    cfg->db_path = cfg_get_str(&c, sj, "scheduler", "db", "var/sluice.db");
    cfg->lease_ms = cfg_get_int(&c, sj, "scheduler", "lease_ms", 180000, 100, 86400000);
    cfg->max_attempts = cfg_get_int(&c, sj, "scheduler", "max_attempts", 5, 1, 100);
    cfg->drr_quantum_tokens =
        cfg_get_int(&c, sj, "scheduler", "drr_quantum_tokens", 4096, 1, 100000000);
    cfg->sched_metrics_listen =
        cfg_get_str(&c, sj, "scheduler", "metrics_listen", "127.0.0.1:9311");
    cfg->admin_listen = cfg_get_str(&c, sj, "scheduler", "admin_listen", "127.0.0.1:9320");

    json_t *dj = cfg_get_obj(&c, root, "config", "dispatcher");
    dj = dj != NULL ? dj : empty;
    cfg_check_keys(&c, dj, "dispatcher", disp_keys);
    cfg->max_in_flight = cfg_get_int(&c, dj, "dispatcher", "max_in_flight", 256, 1, 100000);
    cfg->disp_metrics_listen =
        cfg_get_str(&c, dj, "dispatcher", "metrics_listen", "127.0.0.1:9312");

    json_t *gj = cfg_get_obj(&c, root, "config", "signing");
    gj = gj != NULL ? gj : empty;
    cfg_check_keys(&c, gj, "signing", sign_keys);
    cfg->signing_secret_key_file =
        cfg_get_str(&c, gj, "signing", "secret_key_file", "var/dispatch.key");
    cfg->signing_public_key_file =
        cfg_get_str(&c, gj, "signing", "public_key_file", "var/dispatch.pub");
    json_decref(empty);

    cfg_load_classes(&c, cfg, root);
    json_t *scopes = cfg_get_arr(&c, root, "config", "scopes");
    load_scopes(&c, cfg, scopes);
    cfg_load_deployments(&c, cfg, cfg_get_arr(&c, root, "config", "deployments"));
    cfg_load_routes(&c, cfg, cfg_get_arr(&c, root, "config", "routes"));
    load_tenants(&c, cfg, cfg_get_arr(&c, root, "config", "tenants"));
    load_keys(&c, cfg, cfg_get_arr(&c, root, "config", "keys"));
    load_admin_keys(&c, cfg, cfg_get_arr(&c, root, "config", "admin_keys"));
    if (!c.failed)
        load_scope_limits(&c, cfg, scopes);
    if (!c.failed && cfg->nroutes == 0)
        cfg_fail(&c, "config: at least one route is needed");
out:
    if (c.failed) {
        sl_config_free(cfg);
        return SL_ECONFIG;
    }
    *out = cfg;
    return SL_OK;
}

void sl_config_free(sl_config_t *cfg)
{
    if (cfg == NULL)
        return;
    for (int i = 0; i < cfg->nroutes; i++) {
        free(cfg->routes[i].deployments);
        free(cfg->routes[i].fallbacks);
    }
    for (int i = 0; i < cfg->ntenants; i++) {
        free(cfg->tenants[i].routes);
        free(cfg->tenants[i].regions);
        free(cfg->tenants[i].limits);
    }
    for (int i = 0; i < cfg->ndeployments; i++)
        free(cfg->deployments[i].limits);
    for (int i = 0; i < cfg->nkeys; i++)
        free(cfg->keys[i].limits);
    for (int i = 0; i < cfg->nscopes; i++)
        free(cfg->scopes[i].limits);
    for (int i = 0; i < cfg->nadmin_keys; i++)
        free(cfg->admin_keys[i].tenants);
    free(cfg->admin_keys);
    free(cfg->scopes);
    free(cfg->routes);
    free(cfg->tenants);
    free(cfg->keys);
    free(cfg->deployments);
    free(cfg->kafka.prop_names);
    free(cfg->kafka.prop_values);
    json_decref((json_t *)cfg->priv_);
    free((char *)cfg->path);
    free(cfg);
}

int sl_config_route(const sl_config_t *cfg, const char *name)
{
    for (int i = 0; i < cfg->nroutes; i++) {
        if (cfg->routes[i].name != NULL && strcmp(cfg->routes[i].name, name) == 0)
            return i;
    }
    return -1;
}

int sl_config_tenant(const sl_config_t *cfg, const char *name)
{
    for (int i = 0; i < cfg->ntenants; i++) {
        if (cfg->tenants[i].name != NULL && strcmp(cfg->tenants[i].name, name) == 0)
            return i;
    }
    return -1;
}

int sl_config_deployment(const sl_config_t *cfg, const char *name)
{
    for (int i = 0; i < cfg->ndeployments; i++) {
        if (cfg->deployments[i].name != NULL && strcmp(cfg->deployments[i].name, name) == 0)
            return i;
    }
    return -1;
}

int sl_config_scope(const sl_config_t *cfg, const char *name)
{
    for (int i = 0; i < cfg->nscopes; i++) {
        if (cfg->scopes[i].name != NULL && strcmp(cfg->scopes[i].name, name) == 0)
            return i;
    }
    return -1;
}

int sl_config_key_by_hash(const sl_config_t *cfg, const uint8_t hash[32])
{
    int found = -1;
    for (int i = 0; i < cfg->nkeys; i++) {
        if (sodium_memcmp(cfg->keys[i].hash, hash, 32) == 0)
            found = i;
    }
    return found;
}

int sl_config_admin_key_by_hash(const sl_config_t *cfg, const uint8_t hash[32])
{
    int found = -1;
    for (int i = 0; i < cfg->nadmin_keys; i++) {
        if (sodium_memcmp(cfg->admin_keys[i].hash, hash, 32) == 0)
            found = i;
    }
    return found;
}

int sl_config_tenant_allows_route(const sl_config_t *cfg, int tenant, int route)
{
    const sl_tenant_cfg_t *t = &cfg->tenants[tenant];
    if (t->nroutes == 0)
        return 1;
    for (int i = 0; i < t->nroutes; i++) {
        if (t->routes[i] == route)
            return 1;
    }
    return 0;
}
