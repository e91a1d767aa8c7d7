/* config.h - the one sluice configuration file (JSON), parsed and checked once.
 *
 * The config describes Kafka, the processes' settings, the provider deployments and their limits,
 * the routes (pools of deployments), the workload classes, tenants and API keys (stored hashed).
 * It is a plain, read-only description once loaded, so its structs are public: modules read it,
 * none writes it. Every string points into memory owned by the sl_config_t.
 *
 * The loader is cut by section: config.c reads the top level and the processes' settings, frees
 * and looks up; config_fleet.c the deployments, routes and classes; config_parties.c tenants,
 * API keys and admin keys; config_scopes.c the scope hierarchy; config_limits.c the limits of
 * every scope; config_read.c holds the strict, typed readers they share.
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
 * mirroring the provider (docs/providers.md): OpenAI charges max(max_tokens, input estimate), an
 * older rule and Azure charge input estimate + max_tokens. */
typedef enum { SL_TPM_COUNT_MAX = 0, SL_TPM_COUNT_SUM, SL_TPM_COUNT_ACTUAL } sl_tpm_counting_t;
/* What an input-token limit counts: all input, or (Anthropic ITPM) input without cache reads. */
typedef enum { SL_INPUT_COUNT_ALL = 0, SL_INPUT_COUNT_EXCLUDE_CACHE_READS } sl_input_counting_t;
/* What an output-token limit counts: tokens generated (reserved at the learned estimate, settled
 * at the real count) or max_tokens at receipt (settled at the real count at the end). */
typedef enum { SL_OUTPUT_COUNT_GENERATED = 0, SL_OUTPUT_COUNT_MAX_TOKENS } sl_output_counting_t;

/* What a limit counts (README.md, "buckets"). */
typedef enum {
    SL_DIM_REQUESTS = 0,
    SL_DIM_INPUT_TOKENS,
    SL_DIM_OUTPUT_TOKENS,
    SL_DIM_TOTAL_TOKENS,
    SL_DIM_CONCURRENCY,
    SL_DIM_SPEND, /* USD */
    SL_DIM_REQUESTS_PER_DAY,
    SL_DIM_TOKENS_PER_DAY,
    SL_DIM_RAMP,
    /* tokens of requests waiting in a provider's batches (OpenAI's enqueued-token limit): held
     * while a job is in a provider batch, a gauge */
    SL_DIM_ENQUEUED_TOKENS,
    SL_DIM_COUNT
} sl_dimension_t;

/* How a limit turns what was admitted back into room; the same order as the ledger's sl_alg_t
 * (scheduler/ledger.h explains each). */
typedef enum {
    SL_LIMIT_TOKEN_BUCKET = 0,
    SL_LIMIT_SLIDING_WINDOW,
    SL_LIMIT_CALENDAR,
    SL_LIMIT_GAUGE,
    SL_LIMIT_ROLLING,
    SL_LIMIT_RAMP,
    SL_LIMIT_ALG_COUNT
} sl_limit_alg_t;

/* One limit of one scope; the scheduler makes a ledger bucket "<scope>:<name>" of it. */
typedef struct {
    const char *name; /* unique in its scope; default: the dimension's name */
    sl_dimension_t dimension;
    sl_limit_alg_t algorithm;
    double capacity;          /* per period; in flight (concurrency); ramp: starting allowance */
    int64_t period_ms;        /* real ms: "minute" is minute_ms long */
    int64_t slices;           /* token bucket: burst = capacity / slices; windows: slots */
    double burst;             /* sliding window: one slot may take burst x capacity / slices */
    double headroom;          /* share of the limit sluice plans to use, (0, 1] */
    double burst_fraction;    /* token bucket: share of the burst usable at once */
    const char *reset_tz;     /* calendar: local days in this zone; "" = windows of period_ms */
    double growth;            /* ramp: growth allowed per period */
    sl_dimension_t ramp_unit; /* ramp: requests or total tokens */
    int strict;               /* a quota: never admits more than it holds, even when unused */
    int64_t full_hold_ms;     /* token bucket: a request needing the whole burst waits until the
                               * bucket has been full this long (dispatch jitter); 0 = not */
} sl_limit_cfg_t;

/* A node of the scope hierarchy that is not a deployment, tenant or key: a provider workspace,
 * project or organisation above deployments, a partner above tenants, or an app/env under a
 * tenant ("app:<tenant>/<app>/<env>"). */
typedef struct {
    const char *name;  /* "<kind>:<name>", e.g. "project:openai-main" */
    int parent;        /* index into scopes, or -1 */
    int provider_side; /* 1: above deployments; 0: on the callers' side */
    int nlimits;
    sl_limit_cfg_t *limits;
} sl_scope_cfg_t;

/* The provider API a deployment speaks (dispatcher/adapter.h has one adapter each). */
typedef enum {
    SL_PROVIDER_OPENAI = 0, /* chat completions */
    SL_PROVIDER_AZURE,      /* Azure OpenAI: deployment URL, api-key header, api-version */
    SL_PROVIDER_ANTHROPIC,  /* messages */
    SL_PROVIDER_GEMINI,     /* generateContent */
    SL_PROVIDER_COUNT
} sl_provider_t;

/* Prices of a deployment, USD per million tokens, for spend limits. */
typedef struct {
    double input_per_mtok, cached_input_per_mtok, output_per_mtok;
} sl_price_cfg_t;

/* A deployment's provider batch API (its "batch" object; docs/provider-batch.md). The config
 * loader adds, for each deployment that has one, a deployment "<name>/batch" of its own (its
 * batch twin: batch_of names the online one), with the discounted prices and the enqueued-token
 * limit as its only limit, so the ledger, the DRR and the results treat the batch path like
 * any other deployment. */
typedef struct {
    const char *base_url; /* the batch API's base; default: derived from the online base_url */
    const char *model;    /* the model (Azure: the Global Batch deployment) batch lines name */
    int64_t window_ms;    /* the provider's completion window (24 h) */
    /* routes[].batch auto: a job goes to the batch API while its deadline is at least this far
     * (default five sixths of the window: a batch class deadline of 24 h leaves 20 h) */
    int64_t auto_min_left_ms;
    int64_t max_requests;    /* lines per batch (the provider's limit, or less) */
    int64_t max_bytes;       /* request bytes per batch: the batch travels to a dispatcher as one
                              * Kafka message, so this stays well under the broker's message size */
    int64_t linger_ms;       /* how long a batch stays open for more jobs before it is sent */
    int64_t poll_ms;         /* how often a running batch's status is asked for */
    int64_t answer_ms;       /* how long to wait for a dispatcher's answer before asking again */
    double discount;         /* price factor of the batch path (0.5: half the online price) */
    int64_t enqueued_tokens; /* the provider's enqueued-token limit; 0 = not limited */
} sl_batch_cfg_t;

typedef struct {
    const char *name;
    const char *provider; /* "openai", "azure", "anthropic" or "gemini" */
    sl_provider_t api;    /* the same, parsed */
    /* OpenAI: "https://api.openai.com/v1" (+ /chat/completions); Azure:
     * "https://RES.openai.azure.com/openai/deployments/DEP" (+ /chat/completions?api-version=);
     * Anthropic: "https://api.anthropic.com/v1" (+ /messages); Gemini:
     * "https://generativelanguage.googleapis.com/v1beta" (+ /models/MODEL:generateContent) */
    const char *base_url;
    const char *api_version;   /* Azure's api-version; Anthropic's anthropic-version */
    const char *model;         /* the provider's model name sent in the request */
    const char *api_key_env;   /* credential by reference: environment variable ... */
    const char *api_key_file;  /* ... or a file; never the secret itself */
    int64_t rpm;               /* requests per minute; 0 = not limited */
    int64_t tpm;               /* tokens per minute; 0 = not limited */
    int64_t slices_per_minute; /* the provider enforces limit/slices per slice (burst) */
    double headroom;           /* fraction of the limit sluice plans to use, (0, 1] */
    double burst_fraction;     /* fraction of the provider's burst sluice may use at once */
    int64_t full_hold_ms;      /* default of its limits' full_hold_ms */
    sl_tpm_counting_t tpm_counting;
    sl_input_counting_t input_counting;
    sl_output_counting_t output_counting;
    sl_price_cfg_t price;
    int64_t max_output_tokens;         /* largest max_tokens the deployment accepts */
    int64_t context_window;            /* input + output tokens it can take; 0 = not checked */
    int supports_tools, supports_json; /* tool use; structured output (response_format) */
    const char *region;                /* where it runs, for residency rules; "" = not stated */
    int64_t timeout_ms;                /* provider call timeout */
    /* A streamed call whose provider sends no byte for this long, once its response began, is
     * cut as timed out; 0 = never (only timeout_ms ends it). */
    int64_t stream_idle_timeout_ms;
    /* The provider runs a repeated Idempotency-Key once: a call a dead dispatcher may have made
     * can be sent again. Otherwise such a job fails as dispatcher_lost. */
    int idempotent;
    int parent;  /* its workspace/project/org scope (index into scopes), or -1 */
    int nlimits; /* every limit of the deployment, shorthands included */
    sl_limit_cfg_t *limits;
    /* Provider batches: batch_twin is the index of this deployment's batch twin (-1: none);
     * on a twin, batch_of is the online deployment it belongs to (-1 on every other) and batch
     * its settings. */
    int batch_twin, batch_of;
    sl_batch_cfg_t batch;
} sl_deployment_cfg_t;

/* Whether deployment d is a batch twin (a provider's batch API). */
#define SL_IS_BATCH_DEPLOYMENT(cfg, d) ((cfg)->deployments[(d)].batch_of >= 0)

/* How a route's batch-class jobs reach a provider: online (on leftover online capacity, as
 * other classes do), provider (always through the provider's batch API), or auto (the batch
 * API when the job's deadline leaves the provider's whole window, online otherwise). Streamed
 * jobs always go online. */
typedef enum { SL_BATCH_ONLINE = 0, SL_BATCH_PROVIDER, SL_BATCH_AUTO } sl_batch_policy_t;

/* The most deployments one route (pool) may have. */
#define SL_ROUTE_MAX_DEPLOYMENTS 64

/* How a route picks among its deployments that can take a job (all of them have room):
 *   SPREAD     the one with the most free capacity (share of its tightest provider bucket);
 *   WATERFALL  in the listed order: the first until it is overflow_at used, then the next;
 *   LATENCY    the lowest rolling time to first token;
 *   CHEAPEST   the lowest price for the job's estimated tokens;
 *   WEIGHTED   a random order, each deployment first in proportion to its limits (its TPM,
 *              else its RPM). */
typedef enum {
    SL_STRATEGY_SPREAD = 0,
    SL_STRATEGY_WATERFALL,
    SL_STRATEGY_LATENCY,
    SL_STRATEGY_CHEAPEST,
    SL_STRATEGY_WEIGHTED
} sl_strategy_t;

typedef struct {
    const char *name;
    int ndeployments;
    int *deployments;           /* indexes into sl_config_t.deployments */
    int64_t default_max_tokens; /* set on requests that carry no max_tokens */
    sl_strategy_t strategy;
    double overflow_at; /* waterfall: share of a deployment's capacity used before overflow */
    int nfallbacks;     /* routes to try, in order, when none of this one's deployments can
                         * take a job in time and the job allows fallback */
    int *fallbacks;
    /* the cheaper route a class with overload "degrade" sends its overflow to, for jobs that
     * allow it; -1 = none */
    int degrade_to;
    double max_retry_ratio; /* retries at most this share of first attempts (recent), so a storm
                             * cannot multiply the traffic */
    sl_batch_policy_t batch_policy; /* how its batch-class jobs travel */
} sl_route_cfg_t;

/* What a class does when a tenant's queue of it is full: refuse the new job (with a
 * retry-after), shed the queued job with the latest deadline to take the new one, or degrade:
 * serve the new job on its route's degrade_to route when the job allows it (also when its
 * queue's recent pace says it would wait past its deadline), refusing it otherwise. */
typedef enum { SL_OVERLOAD_REJECT = 0, SL_OVERLOAD_SHED, SL_OVERLOAD_DEGRADE } sl_overload_t;

typedef struct {
    int64_t deadline_ms; /* default relative deadline */
    int64_t max_queue;   /* queued jobs of this class per tenant before new ones are refused */
    int64_t weight;      /* DRR weight */
    sl_overload_t overload;
    /* Leftover capacity only: while the other classes have queued work and took at least this
     * share of the route's recent admissions, this class waits. 0 = never (default for all
     * but batch, whose default is 0.5). */
    double yield_above;
} sl_class_cfg_t;

typedef struct {
    const char *name;
    int64_t weight;
    int64_t tokens_per_min; /* tenant budget in total tokens; 0 = not limited */
    double guarantee;       /* share of every pool it uses while it has work queued; 0 = none */
    int nroutes;            /* 0 = every route allowed */
    int *routes;
    int parent;   /* its partner scope (index into scopes), or -1 */
    int nregions; /* data residency: only deployments in these regions; 0 = any */
    const char **regions;
    int nlimits; /* every limit of the tenant, tokens_per_min included */
    sl_limit_cfg_t *limits;
    /* Where its results (ingest's rejections of its requests included) and its stream chunks
     * go, so Kafka ACLs can keep them to it (docs/topic-acls.md); NULL = the shared topics. */
    const char *results_topic, *stream_topic;
    /* A box public key (result_public_key, hex, or result_public_key_file): its results' and
     * chunks' content is sealed to it (common/seal.h). */
    int sealed;
    uint8_t result_pk[32];
} sl_tenant_cfg_t;

typedef struct {
    const char *id;
    uint8_t hash[32]; /* sl_keyhash() of the secret key */
    int tenant;       /* index into tenants */
    const char *app;
    const char *env;
    int paused;
    int nlimits;
    sl_limit_cfg_t *limits;
} sl_key_cfg_t;

/* Who may use the scheduler's admin API: an operator (everything) or a partner (read-only, and
 * only the tenants listed, or under its partner scope). */
typedef enum { SL_ADMIN_ROLE_ADMIN = 0, SL_ADMIN_ROLE_PARTNER } sl_admin_role_t;

typedef struct {
    const char *id;
    uint8_t hash[32]; /* sl_keyhash() of the secret admin key */
    sl_admin_role_t role;
    int ntenants; /* partner: the tenants it may see (indexes into tenants) */
    int *tenants;
} sl_admin_key_cfg_t;

typedef struct {
    const char *bootstrap_servers; /* "" = read bootstrap_file */
    const char *bootstrap_file;
    const char *topic_requests, *topic_jobs, *topic_dispatch, *topic_results, *topic_usage;
    const char *topic_requests_batch; /* batch requests: ingest reads them after the others */
    /* jobs of the batch class and every cancel, keyed and partitioned as topic_jobs (so a
     * partition number is one tenant set's on both): the scheduler reads them after the
     * others, so a tenant's interactive jobs never queue behind its backfill */
    const char *topic_jobs_batch;
    const char *topic_stream; /* chunks of streamed answers, keyed by job id */
    /* the schedulers' own record of their queued jobs, partitioned as topic_jobs
     * (scheduler/changelog.h) */
    const char *topic_changelog;
    /* the sharded schedulers' capacity leases: demand reports and grant tables, all on
     * partition 0 (scheduler/coord.h) */
    const char *topic_capacity;
    /* How ingest, the scheduler and the dispatcher own their input partitions (sl_kafka.h):
     * "static" (each role one process that assigns itself every partition: a restart reads on
     * at once, no group to rejoin), "group" (a consumer group; static membership through
     * group.instance.id = instance), or "auto": static on the dev broker, group otherwise. */
    const char *membership;
    const char *instance; /* this process's stable name in its group; "" = the host name */
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
    /* batch requests wait while a jobs partition holds more than these bytes of jobs the
     * schedulers have not committed (ingest/backlog.h); 0 never holds them back */
    int64_t jobs_backlog_max_bytes;
    /* where each daemon serves GET /metrics and /healthz ("HOST:PORT"; "" = not served) */
    const char *ingest_metrics_listen, *sched_metrics_listen, *disp_metrics_listen;
    /* scheduler */
    const char *db_path;
    int64_t lease_ms;
    int64_t max_queued;       /* unfinished jobs the scheduler holds, every tenant and class */
    int64_t max_queued_bytes; /* and the bytes of their job messages (what its store keeps) */
    int64_t max_attempts;
    int64_t drr_quantum_tokens;
    const char *admin_listen; /* the admin API ("HOST:PORT"; "" = not served) */
    /* a dispatcher silent this long is dead: the calls it held are settled (scheduler/holders.c) */
    int64_t dispatcher_dead_ms;
    /* what the broker keeps of a changelog partition (retention.bytes; 0 = unbounded): the
     * scheduler writes a fresh snapshot of its queued jobs before older records can go */
    int64_t changelog_retention_bytes;
    /* and writes one at least this often (0: only by size), for time-based retention */
    int64_t changelog_snapshot_ms;
    /* one scheduler of several (scheduler/shard.h): they share the jobs topic's partitions
     * through a consumer group (kafka.membership must not be "static") */
    int sched_sharded;
    /* shards admit within leased grants of the shared limits (scheduler/coord.h; default on
     * when sharded) rather than fixed shares by partitions owned; a lease lasts this long
     * unrenewed */
    int sched_capacity_leases;
    int64_t sched_capacity_lease_ms;
    /* dispatcher */
    int64_t max_in_flight;
    int64_t heartbeat_ms; /* how often it tells the scheduler which attempts it holds */
    /* Message signing (Ed25519), one key pair per role (sign.h). The scheduler's pair keeps
     * its old names; the others default to files beside its secret key. next_* are the keys
     * verifiers also accept during a rotation ("" = none). */
    const char *signing_secret_key_file; /* scheduler */
    const char *signing_public_key_file;
    const char *signing_next_public_key_file;
    /* The scheduler's secret key before its rotation ("" = none): it still checks the pair
     * MACs ingest and the dispatchers made with its old public key (docs/security.md). */
    const char *signing_previous_secret_key_file;
    const char *signing_ingest_secret_key_file;
    const char *signing_ingest_public_key_file;
    const char *signing_ingest_next_public_key_file;
    const char *signing_dispatcher_secret_key_file;
    const char *signing_dispatcher_public_key_file;
    const char *signing_dispatcher_next_public_key_file;
    const char *signing_job_id_key_file; /* ingest's secret for keyed job ids */
    char signing_derived[5][1024];       /* storage of the defaults derived above */

    sl_class_cfg_t classes[SL_CLASS_COUNT];
    int ndeployments;
    sl_deployment_cfg_t *deployments;
    int nroutes;
    sl_route_cfg_t *routes;
    int ntenants;
    sl_tenant_cfg_t *tenants;
    int nkeys;
    sl_key_cfg_t *keys;
    int nscopes;
    sl_scope_cfg_t *scopes;
    int nadmin_keys;
    sl_admin_key_cfg_t *admin_keys;

    void *priv_; /* the parsed JSON the strings point into */
} sl_config_t;

/* Loads and checks a config file (path and out are not NULL). On failure writes a one-line
 * reason (naming the offending key) into err and returns SL_ECONFIG/SL_EIO/SL_EPARSE; *out is set
 * only on success and is freed with sl_config_free. */
sl_err_t sl_config_load(const char *path, sl_config_t **out, char *err, size_t errlen);
void sl_config_free(sl_config_t *cfg);

/* Lookups by name; return the index or -1. */
int sl_config_route(const sl_config_t *cfg, const char *name);
int sl_config_tenant(const sl_config_t *cfg, const char *name);
int sl_config_deployment(const sl_config_t *cfg, const char *name);
/* Finds the key whose hash matches; returns its index or -1 (constant time per candidate). */
int sl_config_key_by_hash(const sl_config_t *cfg, const uint8_t hash[32]);
/* The admin key whose hash matches, or -1 (constant time per candidate). */
int sl_config_admin_key_by_hash(const sl_config_t *cfg, const uint8_t hash[32]);
/* The topic of tenant's results and of its stream chunks (an index into tenants, or -1 for a
 * result of no known tenant): its own when it names one, else the shared topic. */
const char *sl_config_results_topic(const sl_config_t *cfg, int tenant);
const char *sl_config_stream_topic(const sl_config_t *cfg, int tenant);
/* Tenant's result public key, or NULL when its results are not sealed (or tenant is -1). */
const uint8_t *sl_config_seal_key(const sl_config_t *cfg, int tenant);
/* Whether tenant (an index into tenants) may use route: any route when it names none. */
int sl_config_tenant_allows_route(const sl_config_t *cfg, int tenant, int route);

/* What a request costs in each limit, and whether a deployment could ever take it, is one rule
 * for ingest and the scheduler: common/capacity.h. */

int sl_config_scope(const sl_config_t *cfg, const char *name);

const char *sl_provider_name(sl_provider_t p);
const char *sl_strategy_name(sl_strategy_t s);

const char *sl_dimension_name(sl_dimension_t d);
const char *sl_limit_alg_name(sl_limit_alg_t a);
/* Whether a dimension counts tokens (input, output, total, per day). */
int sl_dimension_is_tokens(sl_dimension_t d);

const char *sl_class_name(sl_class_t c);
/* The topic a request of class cls (a name, NULL: the default) belongs on: the batch requests
 * topic for batch, the requests topic for the rest. */
const char *sl_requests_topic(const sl_kafka_cfg_t *k, const char *cls);
/* Whether topic is one of the two jobs topics (the jobs topic, the batch jobs topic): ingest
 * writes both, the scheduler reads both the same way. */
int sl_is_jobs_topic(const sl_kafka_cfg_t *k, const char *topic);
int sl_class_parse(const char *name); /* -1 when unknown */

#endif
