/* config.h - the one sluice configuration file (JSON), parsed and checked once.
 *
 * The config describes Kafka, the processes' settings, the provider deployments and their limits,
 * the routes (pools of deployments), the workload classes, tenants and API keys (stored hashed).
 * It is a plain, read-only description once loaded, so its structs are public: modules read it,
 * none writes it. Every string points into memory owned by the sl_config_t.
 */
#ifndef SL_CONFIG_H
#define SL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef enum {
    SL_CLASS_INTERACTIVE = 0,
    SL_CLASS_STANDARD,
    SL_CLASS_PARTNER,
    SL_CLASS_BATCH,
    SL_CLASS_COUNT
} sl_class_t;

/* How a deployment's token-per-minute limit counts a request at the time it is received,
 * mirroring the provider (PROVIDERS.md): OpenAI charges max(max_tokens, input estimate), an
 * older rule and Azure charge input estimate + max_tokens. */
typedef enum { SL_TPM_COUNT_MAX = 0, SL_TPM_COUNT_SUM } sl_tpm_counting_t;

typedef struct {
    const char *name;
    const char *provider; /* "openai" (the only adapter so far) */
    const char *base_url; /* e.g. "https://api.openai.com/v1"; the call goes to base_url + path */
    const char *model;    /* the provider's model name sent in the request */
    const char *api_key_env;  /* credential by reference: environment variable ... */
    const char *api_key_file; /* ... or a file; never the secret itself */
    int64_t rpm;              /* requests per minute; 0 = not limited */
    int64_t tpm;              /* tokens per minute; 0 = not limited */
    int64_t slices_per_minute; /* the provider enforces limit/slices per slice (burst) */
    double headroom;           /* fraction of the limit sluice plans to use, (0, 1] */
    double burst_fraction;     /* fraction of the provider's burst sluice may use at once */
    sl_tpm_counting_t tpm_counting;
    int64_t max_output_tokens; /* largest max_tokens the deployment accepts */
    int64_t timeout_ms;        /* provider call timeout */
} sl_deployment_cfg_t;

/* The most deployments one route (pool) may have. */
#define SL_ROUTE_MAX_DEPLOYMENTS 64

typedef struct {
    const char *name;
    int ndeployments;
    int *deployments; /* indexes into sl_config_t.deployments */
    int64_t default_max_tokens; /* set on requests that carry no max_tokens */
} sl_route_cfg_t;

typedef struct {
    int64_t deadline_ms;  /* default relative deadline */
    int64_t max_queue;    /* queued jobs of this class per tenant before ingest rejects */
    int64_t weight;       /* DRR weight */
} sl_class_cfg_t;

typedef struct {
    const char *name;
    int64_t weight;
    int64_t tokens_per_min; /* tenant budget in total tokens; 0 = not limited */
    int nroutes;            /* 0 = every route allowed */
    int *routes;
} sl_tenant_cfg_t;

typedef struct {
    const char *id;
    uint8_t hash[32]; /* sl_keyhash() of the secret key */
    int tenant;       /* index into tenants */
    const char *app;
    const char *env;
    int paused;
} sl_key_cfg_t;

typedef struct {
    const char *bootstrap_servers; /* "" = read bootstrap_file */
    const char *bootstrap_file;
    const char *topic_requests, *topic_jobs, *topic_dispatch, *topic_results, *topic_usage;
    int nprops;
    const char **prop_names; /* extra librdkafka properties for every client */
    const char **prop_values;
} sl_kafka_cfg_t;

typedef struct sl_config {
    const char *path;
    int64_t minute_ms; /* length of a "minute" for every per-minute limit (tests shorten it) */
    const char *schema_dir;
    sl_kafka_cfg_t kafka;
    /* ingest */
    int64_t max_request_bytes;
    /* scheduler */
    const char *db_path;
    int64_t lease_ms;
    int64_t max_attempts;
    int64_t drr_quantum_tokens;
    /* dispatcher */
    int64_t max_in_flight;
    /* signing of dispatch messages (Ed25519) */
    const char *signing_secret_key_file;
    const char *signing_public_key_file;

    sl_class_cfg_t classes[SL_CLASS_COUNT];
    int ndeployments;
    sl_deployment_cfg_t *deployments;
    int nroutes;
    sl_route_cfg_t *routes;
    int ntenants;
    sl_tenant_cfg_t *tenants;
    int nkeys;
    sl_key_cfg_t *keys;

    void *priv_; /* the parsed JSON the strings point into */
} sl_config_t;

/* Loads and checks a config file. On failure writes a one-line reason (naming the offending
 * key) into err and returns SL_ECONFIG/SL_EIO/SL_EPARSE; *out is set only on success and is
 * freed with sl_config_free. */
sl_err_t sl_config_load(const char *path, sl_config_t **out, char *err, size_t errlen);
void sl_config_free(sl_config_t *cfg);

/* Lookups by name; return the index or -1. */
int sl_config_route(const sl_config_t *cfg, const char *name);
int sl_config_tenant(const sl_config_t *cfg, const char *name);
int sl_config_deployment(const sl_config_t *cfg, const char *name);
/* Finds the key whose hash matches; returns its index or -1 (constant time per candidate). */
int sl_config_key_by_hash(const sl_config_t *cfg, const uint8_t hash[32]);
int sl_config_tenant_allows_route(const sl_config_t *cfg, int tenant, int route);

/* The tokens deployment d's TPM limit counts for a request at receipt, by its rule. */
int64_t sl_deployment_tpm_charge(const sl_deployment_cfg_t *d, int64_t input, int64_t max_tokens);
/* Whether deployment d can ever take such a request: max_tokens within its output ceiling and
 * its TPM charge within the whole per-minute limit. */
int sl_deployment_can_take(const sl_deployment_cfg_t *d, int64_t input, int64_t max_tokens);

/* How late a dispatch may reach the provider after the scheduler admitted it, for deployment d:
 * the part of the provider's burst the ledger keeps unused (the margin) lasts this long at the
 * planned rate. A dispatch older than this is not sent (its admission decision is stale: e.g.
 * it waited in Kafka while no dispatcher was consuming), so a backlog of old dispatches can never
 * reach the provider as one burst. INT64_MAX for a deployment without limits. */
int64_t sl_config_dispatch_max_age_ms(const sl_config_t *cfg, int d);

const char *sl_class_name(sl_class_t c);
int sl_class_parse(const char *name); /* -1 when unknown */

#endif
