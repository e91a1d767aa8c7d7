/* config_parties.c - the callers' side of the config: tenants, their API keys (stored hashed)
 * and the admin API's keys (see config_parties.h).
 */
#include "config_parties.h"

#include <stdlib.h>
#include <string.h>

#include "config_limits.h"
#include "seal.h"
#include "util.h"

/* Whether name is a topic name Kafka accepts: 1 to 249 of [A-Za-z0-9._-], not "." or "..". */
static int topic_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 249 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return 0;
    return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

/* A tenant's own topic (key "results_topic" or "stream_topic"): NULL when absent. It may be the
 * shared topic of its kind (the same as leaving it out), never another kind's topic, where
 * the results would be read as requests, jobs or usage. */
static const char *own_topic(cfg_ctx_t *c, const sl_config_t *cfg, json_t *tj, const char *where,
                             const char *key)
{
    const char *topic = cfg_get_str(c, tj, where, key, "");
    if (topic[0] == '\0')
        return NULL;
    const sl_kafka_cfg_t *k = &cfg->kafka;
    const char *const internal[] = {k->topic_requests,
                                    k->topic_requests_batch,
                                    k->topic_jobs,
                                    k->topic_jobs_batch,
                                    k->topic_dispatch,
                                    k->topic_usage,
                                    k->topic_changelog,
                                    k->topic_capacity,
                                    strcmp(key, "results_topic") == 0 ? k->topic_stream
                                                                      : k->topic_results};
    if (!topic_name_ok(topic)) {
        cfg_fail(c, "%s: %s \"%s\" is not a Kafka topic name (1 to 249 of A-Z a-z 0-9 . _ -)",
                 where, key, topic);
        return NULL;
    }
    for (size_t i = 0; i < sizeof internal / sizeof internal[0]; i++) {
        if (internal[i] != NULL && strcmp(internal[i], topic) == 0)
            cfg_fail(c, "%s: %s \"%s\" is already another of sluice's topics", where, key, topic);
    }
    return topic;
}

/* A tenant's result topics and result public key. */
static void load_isolation(cfg_ctx_t *c, const sl_config_t *cfg, json_t *tj, const char *where,
                           sl_tenant_cfg_t *t)
{
    t->results_topic = own_topic(c, cfg, tj, where, "results_topic");
    t->stream_topic = own_topic(c, cfg, tj, where, "stream_topic");
    if (t->results_topic != NULL && t->stream_topic != NULL &&
        strcmp(t->results_topic, t->stream_topic) == 0)
        cfg_fail(c, "%s: results_topic and stream_topic must differ", where);
    const char *hex = cfg_get_str(c, tj, where, "result_public_key", "");
    const char *file = cfg_get_str(c, tj, where, "result_public_key_file", "");
    if (hex[0] != '\0' && file[0] != '\0') {
        cfg_fail(c, "%s: give result_public_key or result_public_key_file, not both", where);
    } else if (hex[0] != '\0') {
        if (sl_hex_decode(hex, t->result_pk, sizeof t->result_pk) != SL_OK)
            cfg_fail(c, "%s: result_public_key must be 64 hex digits (see `sluice keygen --box`)",
                     where);
        t->sealed = 1;
    } else if (file[0] != '\0') {
        char path[1024];
        sl_resolve_path(file, path, sizeof path);
        sl_err_t rc = sl_seal_read_key(path, t->result_pk);
        if (rc != SL_OK)
            cfg_fail(c, "%s: result_public_key_file \"%s\": %s", where, file,
                     rc == SL_EIO ? "cannot read it" : "it must hold 64 hex digits");
        t->sealed = 1;
    }
}

void cfg_load_tenants(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr)
{
    static const char *const keys[] = {"name",
                                       "weight",
                                       "tokens_per_min",
                                       "routes",
                                       "parent",
                                       "buckets",
                                       "guarantee",
                                       "max_in_flight",
                                       "regions",
                                       "results_topic",
                                       "stream_topic",
                                       "result_public_key",
                                       "result_public_key_file",
                                       NULL};
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
        load_isolation(c, cfg, tj, where, t);
    }
    if (guarantees > 0.95)
        cfg_fail(c, "tenants: the guarantees add up to %.2f; at most 0.95 can be promised",
                 guarantees);
}

/* kj's required "hash", the hex of a key's sl_keyhash(), decoded into out; returns the hex, or
 * NULL when it is missing. */
static const char *read_hash(cfg_ctx_t *c, json_t *kj, const char *where, uint8_t out[32])
{
    const char *hash = cfg_get_str(c, kj, where, "hash", NULL);
    if (hash != NULL && sl_hex_decode(hash, out, 32) != SL_OK)
        cfg_fail(c, "%s: hash must be 64 hex digits (see `sluice hash-key`)", where);
    return hash;
}

void cfg_load_keys(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr)
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
        read_hash(c, kj, where, k->hash);
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

void cfg_load_admin_keys(cfg_ctx_t *c, sl_config_t *cfg, json_t *arr)
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
        const char *hash = read_hash(c, kj, where, k->hash);
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
