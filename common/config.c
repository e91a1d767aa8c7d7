/* config.c - loading and checking the sluice config file (see config.h).
 *
 * Unknown keys are errors: a typo in a limit must not silently leave a provider unprotected.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_fleet.h"
#include "config_parties.h"
#include "config_read.h"
#include "config_scopes.h"

/* parent[key]: an optional object whose keys must be among keys (where names it in messages).
 * NULL when absent, which the readers take as an object without members, so every setting of
 * the section gets its default. */
static json_t *section(cfg_ctx_t *c, json_t *parent, const char *parent_where, const char *key,
                       const char *where, const char *const *keys)
{
    json_t *obj = cfg_get_obj(c, parent, parent_where, key);
    if (obj != NULL)
        cfg_check_keys(c, obj, where, keys);
    return obj;
}

static void load_kafka(cfg_ctx_t *c, sl_config_t *cfg, json_t *root)
{
    static const char *const keys[] = {
        "bootstrap_servers", "bootstrap_file", "topics", "properties",
        "membership",        "instance",       NULL};
    static const char *const topic_keys[] = {"requests",  "requests_batch", "jobs",  "jobs_batch",
                                             "dispatch",  "results",        "usage", "stream",
                                             "changelog", "capacity",       NULL};
    sl_kafka_cfg_t *k = &cfg->kafka;
    json_t *kj = section(c, root, "config", "kafka", "kafka", keys);
    k->bootstrap_servers = cfg_get_str(c, kj, "kafka", "bootstrap_servers", "");
    k->bootstrap_file = cfg_get_str(c, kj, "kafka", "bootstrap_file", "var/devkafka.bootstrap");
    k->membership = cfg_get_str(c, kj, "kafka", "membership", "auto");
    if (strcmp(k->membership, "auto") != 0 && strcmp(k->membership, "static") != 0 &&
        strcmp(k->membership, "group") != 0)
        cfg_fail(c, "kafka.membership must be \"auto\", \"static\" or \"group\", not \"%s\"",
                 k->membership);
    k->instance = cfg_get_str(c, kj, "kafka", "instance", "");
    if (strlen(k->instance) > 200)
        cfg_fail(c, "kafka.instance: at most 200 characters");
    json_t *tj = section(c, kj, "kafka", "topics", "kafka.topics", topic_keys);
    k->topic_requests = cfg_get_str(c, tj, "kafka.topics", "requests", "sluice.requests");
    k->topic_requests_batch =
        cfg_get_str(c, tj, "kafka.topics", "requests_batch", "sluice.requests.batch");
    if (strcmp(k->topic_requests_batch, k->topic_requests) == 0)
        cfg_fail(c, "kafka.topics: \"requests_batch\" must differ from \"requests\"");
    k->topic_jobs = cfg_get_str(c, tj, "kafka.topics", "jobs", "sluice.jobs");
    k->topic_jobs_batch = cfg_get_str(c, tj, "kafka.topics", "jobs_batch", "sluice.jobs.batch");
    if (strcmp(k->topic_jobs_batch, k->topic_jobs) == 0)
        cfg_fail(c, "kafka.topics: \"jobs_batch\" must differ from \"jobs\"");
    k->topic_dispatch = cfg_get_str(c, tj, "kafka.topics", "dispatch", "sluice.dispatch");
    k->topic_results = cfg_get_str(c, tj, "kafka.topics", "results", "sluice.results");
    k->topic_usage = cfg_get_str(c, tj, "kafka.topics", "usage", "sluice.usage");
    k->topic_stream = cfg_get_str(c, tj, "kafka.topics", "stream", "sluice.stream");
    k->topic_changelog = cfg_get_str(c, tj, "kafka.topics", "changelog", "sluice.changelog");
    k->topic_capacity = cfg_get_str(c, tj, "kafka.topics", "capacity", "sluice.capacity");
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
}

/* The settings of each process: "ingest", "scheduler", "dispatcher" and "signing". */
static void load_processes(cfg_ctx_t *c, sl_config_t *cfg, json_t *root)
{
    static const char *const ingest_keys[] = {"max_request_bytes", "metrics_listen",
                                              "jobs_backlog_max_bytes", NULL};
    static const char *const sched_keys[] = {"db",
                                             "lease_ms",
                                             "max_attempts",
                                             "drr_quantum_tokens",
                                             "metrics_listen",
                                             "admin_listen",
                                             "max_queued",
                                             "max_queued_bytes",
                                             "dispatcher_dead_ms",
                                             "changelog_retention_bytes",
                                             "changelog_snapshot_ms",
                                             "sharded",
                                             "capacity_leases",
                                             "capacity_lease_ms",
                                             NULL};
    static const char *const disp_keys[] = {"max_in_flight", "metrics_listen", "heartbeat_ms",
                                            NULL};
    static const char *const sign_keys[] = {"secret_key_file",
                                            "public_key_file",
                                            "next_public_key_file",
                                            "previous_secret_key_file",
                                            "ingest_secret_key_file",
                                            "ingest_public_key_file",
                                            "ingest_next_public_key_file",
                                            "dispatcher_secret_key_file",
                                            "dispatcher_public_key_file",
                                            "dispatcher_next_public_key_file",
                                            "job_id_key_file",
                                            NULL};

    json_t *ij = section(c, root, "config", "ingest", "ingest", ingest_keys);
    cfg->max_request_bytes =
        cfg_get_int(c, ij, "ingest", "max_request_bytes", 1 << 20, 256, 64 << 20);
    cfg->ingest_metrics_listen = cfg_get_str(c, ij, "ingest", "metrics_listen", "127.0.0.1:9310");
    cfg->jobs_backlog_max_bytes =
        cfg_get_int(c, ij, "ingest", "jobs_backlog_max_bytes", 2 << 20, 0, 1LL << 40);

    json_t *sj = section(c, root, "config", "scheduler", "scheduler", sched_keys);
    cfg->db_path = cfg_get_str(c, sj, "scheduler", "db", "var/sluice.db");
    cfg->lease_ms = cfg_get_int(c, sj, "scheduler", "lease_ms", 180000, 100, 86400000);
    cfg->max_attempts = cfg_get_int(c, sj, "scheduler", "max_attempts", 5, 1, 100);
    cfg->max_queued = cfg_get_int(c, sj, "scheduler", "max_queued", 1000000, 1, 100000000);
    cfg->max_queued_bytes =
        cfg_get_int(c, sj, "scheduler", "max_queued_bytes", 8LL << 30, 1024, 1LL << 50);
    cfg->drr_quantum_tokens =
        cfg_get_int(c, sj, "scheduler", "drr_quantum_tokens", 4096, 1, 100000000);
    cfg->sched_metrics_listen = cfg_get_str(c, sj, "scheduler", "metrics_listen", "127.0.0.1:9311");
    cfg->admin_listen = cfg_get_str(c, sj, "scheduler", "admin_listen", "127.0.0.1:9320");
    cfg->dispatcher_dead_ms =
        cfg_get_int(c, sj, "scheduler", "dispatcher_dead_ms", 15000, 1000, 86400000);
    /* The dev broker keeps about 5 MB a partition (docs/dev-kafka.md); 0 = unbounded. */
    cfg->changelog_retention_bytes =
        cfg_get_int(c, sj, "scheduler", "changelog_retention_bytes", 5LL << 20, 0, 1LL << 50);
    cfg->changelog_snapshot_ms =
        cfg_get_int(c, sj, "scheduler", "changelog_snapshot_ms", 3600000, 0, 30LL * 86400000);
    if (!c->failed && cfg->changelog_retention_bytes > 0 &&
        cfg->changelog_retention_bytes < 64 << 10)
        cfg_fail(c, "scheduler.changelog_retention_bytes: 0 (unbounded) or at least 65536");
    cfg->sched_sharded = cfg_get_bool(c, sj, "scheduler", "sharded", 0);
    cfg->sched_capacity_leases =
        cfg_get_bool(c, sj, "scheduler", "capacity_leases", cfg->sched_sharded);
    cfg->sched_capacity_lease_ms =
        cfg_get_int(c, sj, "scheduler", "capacity_lease_ms", 10000, 2000, 600000);
    if (!c->failed && cfg->sched_capacity_leases && !cfg->sched_sharded)
        cfg_fail(c, "scheduler.capacity_leases needs scheduler.sharded: one scheduler holds "
                    "every limit whole");

    json_t *dj = section(c, root, "config", "dispatcher", "dispatcher", disp_keys);
    cfg->max_in_flight = cfg_get_int(c, dj, "dispatcher", "max_in_flight", 256, 1, 100000);
    cfg->disp_metrics_listen = cfg_get_str(c, dj, "dispatcher", "metrics_listen", "127.0.0.1:9312");
    cfg->heartbeat_ms = cfg_get_int(c, dj, "dispatcher", "heartbeat_ms", 1000, 50, 60000);
    if (!c->failed && cfg->dispatcher_dead_ms < 3 * cfg->heartbeat_ms)
        cfg_fail(c,
                 "scheduler.dispatcher_dead_ms (%lld) must be at least three "
                 "dispatcher.heartbeat_ms (%lld): a late heartbeat would declare a live "
                 "dispatcher dead",
                 (long long)cfg->dispatcher_dead_ms, (long long)cfg->heartbeat_ms);

    json_t *gj = section(c, root, "config", "signing", "signing", sign_keys);
    cfg->signing_secret_key_file =
        cfg_get_str(c, gj, "signing", "secret_key_file", "var/dispatch.key");
    cfg->signing_public_key_file =
        cfg_get_str(c, gj, "signing", "public_key_file", "var/dispatch.pub");
    cfg->signing_next_public_key_file = cfg_get_str(c, gj, "signing", "next_public_key_file", "");
    cfg->signing_previous_secret_key_file =
        cfg_get_str(c, gj, "signing", "previous_secret_key_file", "");
    /* The other roles' files default to the scheduler's secret key's folder, so a config that
     * names only the scheduler's pair (every older one) gets a full set of keys there. */
    static const char *const derived_keys[5] = {"ingest_secret_key_file", "ingest_public_key_file",
                                                "dispatcher_secret_key_file",
                                                "dispatcher_public_key_file", "job_id_key_file"};
    static const char *const derived_names[5] = {"ingest.key", "ingest.pub", "dispatcher.key",
                                                 "dispatcher.pub", "job-id.key"};
    const char *sk = cfg->signing_secret_key_file != NULL ? cfg->signing_secret_key_file : "";
    const char *slash = strrchr(sk, '/');
    int dir_len = slash != NULL ? (int)(slash - sk) + 1 : 0;
    const char *set[5];
    for (int i = 0; i < 5; i++) {
        snprintf(cfg->signing_derived[i], sizeof cfg->signing_derived[i], "%.*s%s", dir_len, sk,
                 derived_names[i]);
        set[i] = cfg_get_str(c, gj, "signing", derived_keys[i], cfg->signing_derived[i]);
    }
    cfg->signing_ingest_secret_key_file = set[0];
    cfg->signing_ingest_public_key_file = set[1];
    cfg->signing_dispatcher_secret_key_file = set[2];
    cfg->signing_dispatcher_public_key_file = set[3];
    cfg->signing_job_id_key_file = set[4];
    cfg->signing_ingest_next_public_key_file =
        cfg_get_str(c, gj, "signing", "ingest_next_public_key_file", "");
    cfg->signing_dispatcher_next_public_key_file =
        cfg_get_str(c, gj, "signing", "dispatcher_next_public_key_file", "");
}

sl_err_t sl_config_load(const char *path, sl_config_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"minute_ms", "schema_dir",  "kafka",    "ingest",
                                       "scheduler", "dispatcher",  "signing",  "classes",
                                       "scopes",    "deployments", "routes",   "tenants",
                                       "keys",      "admin_keys",  "$comment", NULL};
    assert(path != NULL && out != NULL);
    *out = NULL;
    cfg_ctx_t c = {.err = err, .errlen = errlen, .failed = 0};
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
    load_processes(&c, cfg, root);

    /* Each section after what it names: deployments name scopes, routes name deployments,
     * tenants name routes and scopes, keys name tenants. A scope's limits come last, when its
     * side (above deployments or not) is known. */
    cfg_load_classes(&c, cfg, root);
    json_t *scopes = cfg_get_arr(&c, root, "config", "scopes");
    cfg_load_scopes(&c, cfg, scopes);
    cfg_load_deployments(&c, cfg, cfg_get_arr(&c, root, "config", "deployments"));
    cfg_load_routes(&c, cfg, cfg_get_arr(&c, root, "config", "routes"));
    cfg_load_tenants(&c, cfg, cfg_get_arr(&c, root, "config", "tenants"));
    cfg_load_keys(&c, cfg, cfg_get_arr(&c, root, "config", "keys"));
    cfg_load_admin_keys(&c, cfg, cfg_get_arr(&c, root, "config", "admin_keys"));
    if (!c.failed)
        cfg_load_scope_limits(&c, cfg, scopes);
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
    assert(tenant >= 0 && tenant < cfg->ntenants);
    const sl_tenant_cfg_t *t = &cfg->tenants[tenant];
    if (t->nroutes == 0)
        return 1;
    for (int i = 0; i < t->nroutes; i++) {
        if (t->routes[i] == route)
            return 1;
    }
    return 0;
}

const char *sl_requests_topic(const sl_kafka_cfg_t *k, const char *cls)
{
    return cls != NULL && sl_class_parse(cls) == SL_CLASS_BATCH ? k->topic_requests_batch
                                                                : k->topic_requests;
}

int sl_is_jobs_topic(const sl_kafka_cfg_t *k, const char *topic)
{
    return strcmp(topic, k->topic_jobs) == 0 || strcmp(topic, k->topic_jobs_batch) == 0;
}

const char *sl_config_results_topic(const sl_config_t *cfg, int tenant)
{
    if (tenant >= 0 && tenant < cfg->ntenants && cfg->tenants[tenant].results_topic != NULL)
        return cfg->tenants[tenant].results_topic;
    return cfg->kafka.topic_results;
}

const char *sl_config_stream_topic(const sl_config_t *cfg, int tenant)
{
    if (tenant >= 0 && tenant < cfg->ntenants && cfg->tenants[tenant].stream_topic != NULL)
        return cfg->tenants[tenant].stream_topic;
    return cfg->kafka.topic_stream;
}

const uint8_t *sl_config_seal_key(const sl_config_t *cfg, int tenant)
{
    if (tenant >= 0 && tenant < cfg->ntenants && cfg->tenants[tenant].sealed)
        return cfg->tenants[tenant].result_pk;
    return NULL;
}
