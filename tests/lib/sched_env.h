/* sched_env.h - the scheduler unit tests' environment: a small config in a mkdtemp()
 * directory, the real store, ledger and DRR, hand-made job messages and usage events, and an
 * explicit clock. Every input and every tick runs inside a store transaction, the way
 * scheduler/main.c drives the core; every dispatch taken is validated against
 * schema/dispatch.json and every result against schema/result.json. Tests run from the
 * repository root ("schema" is relative to it).
 *
 * The default deployments (slices_per_minute 20, headroom 0.9, burst_fraction 0.5) and job
 * (150 input + 100 output tokens, so a "max" TPM charge of 150) give:
 *   dep-a: rpm 120 -> bucket 6, margin 3;  tpm 12000 -> bucket 600, margin 300, 0.18 tokens/ms
 *   dep-b: rpm  60 -> bucket 3, margin 1.5; tpm 6000 -> bucket 300, margin 150, 0.09 tokens/ms
 * so at a cold start dep-a takes two jobs (600 -> 450 -> 300) and dep-b one (300 -> 150).
 */
#ifndef SL_TEST_SCHED_ENV_H
#define SL_TEST_SCHED_ENV_H

#include <jansson.h>
#include <stdint.h>

#include "../../scheduler/sched.h"
#include "../../scheduler/store.h"
#include "config.h"
#include "jsonschema.h"

#define T0 ((int64_t)1000000000) /* the tests' clock origin (ms) */
#define HOUR ((int64_t)3600000)

typedef struct {
    const char *deployments; /* route "chat" uses these, in this order */
    int64_t globex_tokens_per_min;
    int64_t lease_ms;
    int64_t max_attempts;
    int drop_globex; /* leave tenant globex out of the config */
    const char *extra_defs; /* more deployment definitions (route them via deployments) */
    const char *extra_top;  /* more top-level members, e.g. "'scopes': [...]," */
} opts_t;

typedef struct {
    char dir[256];
    char cfg_path[300];
    char sql[1024];
    sl_config_t *cfg;
    sl_store_t *store;
    sl_sched_t *sched;
    sl_schema_t *dispatch_schema, *result_schema, *batch_op_schema;
} env_t;

typedef struct {
    const char *id, *tenant, *route;
    int64_t submitted_ms, deadline_ms, input, output;
} jobspec_t;

typedef struct {
    const char *outcome;
    int http_status;
    int64_t input, output; /* input < 0: no usage object */
    int64_t retry_after_ms; /* < 0: none */
    int64_t cached;         /* cache reads among the input tokens */
    const char *ratelimit;  /* the event's normalised headers (JSON text), or NULL */
} usagespec_t;

typedef struct {
    int n; /* dispatches and results */
    sl_sched_msg_t *m;
    json_t **doc;
    int nlogged; /* jobs taken in, handed over for the changelog (checked, then dropped) */
} batch_t;

/* A copy of a dispatch's reservation id / deployment (the batch dies before use). */
typedef struct {
    char job[65], res[65], dep[32];
    int attempt;
    int64_t at_ms;
} lease_t;

extern const char *const DEP_A;
extern const char *const DEP_B;
extern const char *const DEP_OPEN;
extern const char *const DEP_BIG;
extern int64_t drr_quantum;
extern int64_t max_queued;
extern int64_t max_queued_bytes;
extern const char *route_extra;
extern const char *more_routes;
/* More members of tenant acme (e.g. ", 'results_topic': 'r.acme'") in the next configs written. */
extern const char *acme_extra;
extern const char *job_class;
extern double usage_ttft_ms;
extern const usagespec_t OK_USAGE;

void open_core(env_t *e, int64_t now_ms);
void close_core(env_t *e);
void load_config(env_t *e, const opts_t *o);
void env_init(env_t *e, const opts_t *o, int64_t now_ms);
void env_done(env_t *e);
void restart_with(env_t *e, const opts_t *o, int64_t now_ms);
const char *peek_sql(const env_t *e, const char *fmt, const char *arg);
char *job_text(const jobspec_t *j);
void feed_text(env_t *e, const char *text, int64_t now_ms);
void feed_job(env_t *e, const char *id, const char *tenant, int64_t now_ms);
void feed_spec(env_t *e, const jobspec_t *j, int64_t now_ms);
void feed_usage(env_t *e, const char *job_id, int attempt, const char *res_id,
                       const char *deployment, const usagespec_t *u, int64_t now_ms);
/* Feeds one usage-topic message (a usage event or a heartbeat) inside a transaction. */
void feed_usage_text(env_t *e, const char *text, int64_t now_ms);
batch_t take(env_t *e);
void batch_free(batch_t *b);
batch_t step(env_t *e, int64_t now_ms);
int count_kind(const batch_t *b, sl_msg_kind_t kind);
json_t *find(const batch_t *b, sl_msg_kind_t kind, const char *job_id);
const char *sget(json_t *obj, const char *key);
int64_t iget(json_t *obj, const char *key);
lease_t lease_of(json_t *dispatch, int64_t now_ms);
double bucket_level(env_t *e, const char *id, int64_t now_ms);

#endif
