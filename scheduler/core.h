/* core.h - the scheduler core's internal types, shared by its modules; internal to scheduler/.
 *
 * Nothing outside scheduler/ includes this header: main.c, api.c and the tests use sched.h,
 * where sl_sched_t is opaque. The one idea a reader needs first: a job (job_t) is in exactly one
 * place at a time (job.h): queued in its route's DRR, held by a pause, delayed for a backoff,
 * leased to a dispatcher, or an orphan waiting to be failed; done jobs live only in the store.
 *
 * The modules, lowest first (a module calls only those below it):
 *   job, buckets, outbox   a job's place and flags; config -> ledger buckets; messages out
 *   reservation            charges, settling, provider-header clamps
 *   outcome                finishing a job and building its result
 *   flow                   enqueue, queue limits, shedding, pauses, batch yielding
 *   retry, health          backoff, pause lengths and the retry budget; a deployment's pause,
 *                          probe, failure streak and time to first token
 *   route, lease           deployment fit, strategy order, fallback, why a job waits; the
 *                          dispatch message and the lease's bookkeeping
 *   restore, overrides,    restart and reload replay; run-time changes (admin API);
 *   inspect                read-only views for metrics and the admin API
 *   sched                  lifecycle, messages in, the tick and the DRR step
 */
#ifndef SL_CORE_H
#define SL_CORE_H

#include <stdint.h>

#include "calib.h"
#include "config.h"
#include "drr.h"
#include "hmap.h"
#include "jsonschema.h"
#include "ledger.h"
#include "sched_types.h"
#include "store.h"

/* The most buckets one job's path may cross (callers' side and provider side together). */
enum { MAX_CHARGES = 16 };

/* J_ORPHAN: the config no longer knows the job's tenant or route; it is only ever finished.
 * J_HELD: queued, but its tenant or key is paused (admin API): kept out of the DRR. */
typedef enum { J_QUEUED = 0, J_DELAYED, J_LEASED, J_ORPHAN, J_HELD } jstate_t;

/* What one lease holds in the ledger: its charges, how each is settled, and each bucket's
 * reserved total just before it (to read provider headers against). Allocated at lease. */
typedef struct {
    int n;
    sl_charge_t ch[MAX_CHARGES];
    uint8_t rule[MAX_CHARGES];
    double before[MAX_CHARGES];
    int64_t charged_ms;
    int64_t est_input, est_output; /* what was reserved for input and output */
} held_t;

/* What a job's request needs from a deployment, read from its request body (JF_KNOWN once
 * read: jobs restored after a restart read it when first considered). */
enum {
    JF_KNOWN = 1,
    JF_TOOLS = 2,     /* it offers tools */
    JF_JSON = 4,      /* structured output (response_format) */
    JF_STREAM = 8,    /* streamed: output reserved at max_tokens until the end */
    JF_FALLBACK = 16, /* the caller allows a fallback route */
    JF_DEGRADE = 32,  /* the caller allows a cheaper route (classes.*.overload = degrade) */
    JF_DEGRADED = 64  /* not from the request: the job was moved to its route's degrade_to */
};

/* A job id's longest length (the schemas' maxLength of job_id). */
enum { SL_JOB_ID_MAX = 64 };

/* A job's current or last lease (lease.c): allocated at its first lease, or when a restored
 * row names one, and kept until the job is freed, so the queued jobs of a backlog carry none.
 * A job in J_LEASED always has one. */
typedef struct {
    char res_id[33]; /* the attempt's reservation; "" once it is settled for a retry */
    unsigned holder; /* the dispatcher incarnation that took the lease (holders.c); 0: unknown */
    held_t *held;    /* the lease's charges (sl_job_held); NULL once settled */
    int64_t lease_expires_ms, dispatched_ms;
} job_lease_t;

/* A job's token estimates are kept within this (a larger one fits no deployment either), so
 * that they and their sum fit 32 bits. */
enum { SL_JOB_EST_MAX = 1000000000 };

/* One unfinished job in memory (finished jobs live only in the store). A million may be
 * queued, so its fields are laid out to keep it small: pointers, then 64-bit times, its DRR
 * node, 32-bit fields, bytes (bench/queued measures the memory a queued job costs). */
typedef struct job {
    char *orphan; /* "tenant\0route": its own names when the config lacks them (sl_job_orphan_*) */
    job_lease_t *lease; /* NULL until its first lease */
    int64_t submitted_ms, deadline_ms, not_before_ms;
    int64_t drr_cost;       /* what its flow was charged when it was last served; 0 = not known */
    sl_drr_node_t node;     /* its place in its route's DRR (sl_drr_queued: when queued there) */
    int tenant, route, key; /* key: -1 when the config no longer knows it */
    int home_route;         /* the route it was submitted to (route differs after fallback) */
    int attempts;           /* leases so far: numbers each attempt */
    int not_sent;   /* leases a dispatcher refused without calling: not charged to the budget */
    int list_idx;   /* index in its joblist (delayed, leased, orphans, held), else -1 */
    int deployment; /* of the current lease */
    uint32_t bytes; /* its job message's length (ingest caps it far below 4 GiB) */
    /* from ingest, each at most SL_JOB_EST_MAX (sl_job_est): est_output is max_tokens */
    int32_t est_input, est_output, est_total;
    uint8_t cls;
    uint8_t state;  /* a jstate_t */
    uint8_t flags;  /* JF_* */
    uint8_t pbatch; /* leased to a provider batch (a batch twin); changes only out of any list */
    uint8_t cancel_asked; /* in a provider batch, its cancel was asked (pbatch.c) */
    /* Last: the id and then the idempotency key (sl_job_idem), each as long as it is (sl_job_new),
     * so a queued job holds neither a fixed 65-byte id nor a second allocation for its key. */
    char id[];
} job_t;

/* The buckets on one side of a job's path, narrowest scope first. */
typedef struct {
    int n;
    int *b;
} path_t;

/* Per bucket: the limit it enforces (the config's, or an owned copy with a run-time limit) and
 * on which side of the path it sits. */
typedef struct {
    const sl_limit_cfg_t *limit;
    const sl_limit_cfg_t *configured;
    sl_limit_cfg_t *own; /* set by sl_sched_set_limit; limit points to it */
    int provider_side;
    /* The head-of-line claim (sched.c, claim_room): the route whose head job waits for room
     * here, how much it needs, and until when other routes leave it that much. */
    int claim_route; /* -1: none */
    double claim_amount;
    int64_t claim_until_ms;
    int64_t claim_since_ms; /* since when the claimant's head job has waited */
    /* Sharded schedulers (shard.h): whether all shards share it, the share enforced now, and
     * a larger one due at share_at_ms (share_next == share: none pending). */
    int shared;
    double share, share_next;
    int64_t share_at_ms;
} binfo_t;

/* What the admin API can change about a tenant at run time. */
typedef struct {
    int64_t weight;
    double guarantee;
    int paused;
} tenant_rt_t;

/* Provider rate-limit headers name four dimensions; each maps to the deployment's own
 * per-minute bucket of that dimension. */
enum { HDR_REQUESTS = 0, HDR_TOKENS, HDR_INPUT, HDR_OUTPUT, HDR_COUNT };

typedef struct {
    path_t path;                  /* the deployment's limits, then its parent scopes' */
    int header_bucket[HDR_COUNT]; /* -1 when there is none */
    int64_t paused_until_ms;
    double ttft_ms;  /* rolling time to first token (latency strategy); 0 = none seen yet */
    int fail_streak; /* overloaded / server errors in a row, for its pause */
    /* Half-open after a pause: when the pause ends, one call goes first (a probe) and the
     * rest wait for its answer (at most PROBE_WAIT_MS), so a deployment that is still
     * refusing is not met by every waiting job at once. */
    int probing;
    int64_t probe_sent_ms; /* 0 = the probe has not gone yet */
    /* Answers since the core was built, counted where the totals are (provider_429, _5xx). */
    int64_t answered, rate_limited, unavailable;
} dep_t;

/* What one DRR flow (tenant x class) of a route was really counted lately, per dimension of
 * the per-minute limits: minutes of each limit's rate (amount / rate), decaying with a time
 * constant of one minute (reservation.c, sl_reservation_settle). */
typedef struct {
    double use[SL_DIM_TOTAL_TOKENS + 1];
    int64_t at_ms;
} flow_use_t;

typedef struct {
    sl_drr_t *drr;
    flow_use_t *use; /* per flow (tenant * SL_CLASS_COUNT + class) */
    int64_t blocked_until_ms;
    /* A class whose head job waits only for the room it leaves others (sl_flow_keep_reserve)
     * waits alone: the route's other classes go on meanwhile. */
    int64_t cls_blocked_until_ms[SL_CLASS_COUNT];
    /* Until when this route holds a head-of-line claim on some bucket (0: none); such routes
     * are served first in a tick (sched.c, claim_room). Since when its head job has waited for
     * room (0: it has not). */
    int64_t claim_until_ms;
    int64_t head_waits_since_ms;
    /* First attempts and retries leased recently, decaying with a time constant of one minute:
     * the retry ratio budget (routes[].max_retry_ratio). */
    double recent_first, recent_retries;
    int64_t retry_ms;
    /* Tokens admitted per class, decaying with a time constant of one minute: what each class
     * took of the route recently (for classes that yield, classes.yield_above). */
    double recent[SL_CLASS_COUNT];
    double recent_jobs[SL_CLASS_COUNT]; /* the jobs those tokens were of, decaying alike */
    int64_t recent_ms;
} route_t;

/* The jobs out of the DRR in one state (delayed, leased, orphans, held), in no order;
 * npbatch of them are in provider batches (job_t.pbatch). */
typedef struct {
    job_t **items;
    int n, cap;
    int npbatch;
} joblist_t;

typedef struct pbatch pbatch_t; /* pbatch.c */

struct sl_sched {
    const sl_config_t *cfg;
    sl_store_t *store;
    sl_schema_t *job_schema, *usage_schema, *cancel_schema, *heartbeat_schema, *pbatch_schema;
    sl_ledger_t *ledger;
    binfo_t *binfo;
    int nbinfo;
    sl_calib_t *calib;
    dep_t *deps;
    route_t *routes;
    path_t *tenant_paths;    /* the tenant's limits, then its partner's */
    path_t *key_paths;       /* the key's, its app/env's, then its tenant's path */
    sl_hmap_t *key_index;    /* key id -> index + 1 (a job names its key by id) */
    sl_hmap_t *tenant_index; /* tenant name -> index + 1: every job is looked up by it */
    sl_hmap_t *jobs;         /* id -> job_t*, every unfinished job (sl_job_track) */
    int unlogged;            /* jobs taken in now are not handed over for the changelog */
    int64_t jobs_bytes;      /* the sum of their bytes */
    joblist_t delayed, leased, orphans, held;
    tenant_rt_t *trt;    /* per tenant */
    uint8_t *key_paused; /* per key */
    sl_sched_observer_t obs;
    void *obs_arg;
    int64_t last_scan_ms, last_deadline_scan_ms, last_bucket_save_ms;
    sl_sched_msg_t *out;
    int nout, capout;
    unsigned res_counter;
    struct sl_holders *holders; /* the dispatchers heard from (holders.c) */
    int64_t dispatch_window;    /* sl_holders_window at the current tick (backpressure) */
    /* Sharded (shard.h): the jobs topic's partitions and which this scheduler owns; nparts 0
     * when not sharded (it owns them all). */
    int nparts;
    uint8_t *owned;
    int lease_shares; /* shares come from the coordinator's grants (grants.h), not partitions */
    /* Provider batches (pbatch.h): open, being created, running or being collected. */
    pbatch_t **pb;
    int npb;
    size_t cappb;
    int pb_restored; /* the restored leases of provider batches were matched to their batches */
    sl_sched_stats_t st;
};

#endif
