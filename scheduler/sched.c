/* sched.c - the scheduler's core (see sched.h): where every input arrives and every step
 * starts. The rules themselves live in the modules below it (core.h lists them).
 *
 * Reading order: building and freeing the core (and a reload), taking job and cancel messages,
 * the DRR step of a route (all-or-nothing reservation, then the lease), reconciling usage
 * events, and the tick that expires leases and deadlines and runs the DRR steps.
 */
#include "sched.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buckets.h"
#include "calib.h"
#include "core.h"
#include "deadline.h"
#include "drr.h"
#include "flow.h"
#include "health.h"
#include "hmap.h"
#include "holders.h"
#include "job.h"
#include "jsonschema.h"
#include "lease.h"
#include "ledger.h"
#include "log.h"
#include "msg_heartbeat.h"
#include "msg_job.h"
#include "msg_usage.h"
#include "outbox.h"
#include "outcome.h"
#include "overrides.h"
#include "pbatch.h"
#include "reservation.h"
#include "restore.h"
#include "retry.h"
#include "route.h"
#include "shard.h"
#include "util.h"

enum { MAX_DISPATCH_PER_TICK = 2000, SCAN_EVERY_MS = 100, BUCKET_SAVE_EVERY_MS = 1000 };

/* ---- lifecycle ---- */

static sl_err_t load_schema(const sl_config_t *cfg, const char *name, sl_schema_t **out, char *err,
                            size_t errlen)
{
    char rel[1024], path[1024];
    snprintf(rel, sizeof rel, "%s/%s", cfg->schema_dir, name);
    sl_resolve_path(rel, path, sizeof path);
    return sl_schema_load_file(path, out, err, errlen);
}

/* Builds the core; exact: the store's bucket state was saved a moment ago (a reload). */
static sl_err_t sched_new(const sl_config_t *cfg, sl_store_t *store, int64_t now_ms, int exact,
                          sl_sched_t **out, char *err, size_t errlen)
{
    *out = NULL;
    sl_sched_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return SL_ENOMEM;
    s->cfg = cfg;
    s->store = store;
    sl_err_t rc = load_schema(cfg, "job.json", &s->job_schema, err, errlen);
    if (rc == SL_OK)
        rc = load_schema(cfg, "usage.json", &s->usage_schema, err, errlen);
    if (rc == SL_OK)
        rc = load_schema(cfg, "cancel.json", &s->cancel_schema, err, errlen);
    if (rc == SL_OK)
        rc = load_schema(cfg, "heartbeat.json", &s->heartbeat_schema, err, errlen);
    if (rc == SL_OK)
        rc = load_schema(cfg, "batch-event.json", &s->pbatch_schema, err, errlen);
    if (rc == SL_OK && (s->holders = sl_holders_new()) == NULL)
        rc = SL_ENOMEM;
    if (rc != SL_OK)
        goto fail;
    s->ledger = sl_ledger_new();
    s->calib = sl_calib_new(cfg->nroutes, SL_CLASS_COUNT);
    s->deps = calloc((size_t)cfg->ndeployments + 1, sizeof *s->deps);
    s->routes = calloc((size_t)cfg->nroutes + 1, sizeof *s->routes);
    s->tenant_paths = calloc((size_t)cfg->ntenants + 1, sizeof *s->tenant_paths);
    s->key_paths = calloc((size_t)cfg->nkeys + 1, sizeof *s->key_paths);
    s->key_index = sl_hmap_new();
    s->tenant_index = sl_hmap_new();
    s->jobs = sl_hmap_new_borrowed(); /* keyed by each job's own id (sl_job_track) */
    s->trt = calloc((size_t)cfg->ntenants + 1, sizeof *s->trt);
    s->key_paused = calloc((size_t)cfg->nkeys + 1, sizeof *s->key_paused);
    rc = SL_ENOMEM;
    if (s->ledger == NULL || s->calib == NULL || s->deps == NULL || s->routes == NULL ||
        s->tenant_paths == NULL || s->key_paths == NULL || s->key_index == NULL ||
        s->tenant_index == NULL || s->jobs == NULL || s->trt == NULL || s->key_paused == NULL)
        goto fail;
    for (int t = 0; t < cfg->ntenants; t++) {
        s->trt[t].weight = cfg->tenants[t].weight;
        s->trt[t].guarantee = cfg->tenants[t].guarantee;
    }
    for (int k = 0; k < cfg->nkeys; k++)
        s->key_paused[k] = (uint8_t)cfg->keys[k].paused;
    for (int k = 0; k < cfg->nkeys; k++) {
        if (sl_hmap_put(s->key_index, cfg->keys[k].id, (void *)(intptr_t)(k + 1)) != SL_OK)
            goto fail;
    }
    for (int t = 0; t < cfg->ntenants; t++) {
        if (sl_hmap_put(s->tenant_index, cfg->tenants[t].name, (void *)(intptr_t)(t + 1)) != SL_OK)
            goto fail;
    }
    for (int i = 0; i < cfg->nroutes; i++) {
        s->routes[i].drr = sl_drr_new();
        s->routes[i].use =
            calloc((size_t)cfg->ntenants * SL_CLASS_COUNT + 1, sizeof *s->routes[i].use);
        if (s->routes[i].drr == NULL || s->routes[i].use == NULL)
            goto fail;
    }
    err[0] = '\0';
    rc = sl_buckets_build(s, now_ms, err, errlen);
    if (rc == SL_OK)
        rc = sl_restore_buckets(s, exact, now_ms);
    if (rc == SL_OK)
        rc = sl_overrides_apply(s, now_ms);
    if (rc != SL_OK) {
        if (err[0] == '\0')
            snprintf(err, errlen, "building the ledger: %s", sl_strerror(rc));
        goto fail;
    }
    rc = sl_restore_jobs(s, now_ms, err, errlen);
    if (rc == SL_OK)
        rc = sl_pbatch_restore(s);
    if (rc == SL_OK && !exact)
        rc = sl_restore_resend_leases(s);
    if (rc != SL_OK)
        goto fail;
    s->last_bucket_save_ms = now_ms;
    *out = s;
    return SL_OK;
fail:
    sl_sched_free(s);
    return rc;
}

sl_err_t sl_sched_new(const sl_config_t *cfg, sl_store_t *store, int64_t now_ms, sl_sched_t **out,
                      char *err, size_t errlen)
{
    return sched_new(cfg, store, now_ms, 0, out, err, errlen);
}

sl_err_t sl_sched_save(sl_sched_t *s, int64_t now_ms)
{
    return sl_buckets_save(s, now_ms, 1 /*all*/);
}

sl_err_t sl_sched_reload(sl_sched_t **sp, const sl_config_t *cfg, int64_t now_ms, char *err,
                         size_t errlen)
{
    sl_sched_t *old = *sp;
    sl_sched_t *fresh = NULL;
    if (old->nout > 0) {
        /* Their topics point into the old config. */
        snprintf(err, errlen, "messages not yet taken (sl_sched_take first)");
        return SL_EBUSY;
    }
    sl_err_t rc = sched_new(cfg, old->store, now_ms, 1 /*exact*/, &fresh, err, errlen);
    if (rc != SL_OK)
        return rc;
    /* What only lived in memory carries over by name: provider pauses after a 429, counters. */
    for (int d = 0; d < old->cfg->ndeployments; d++) {
        int nd = sl_config_deployment(cfg, old->cfg->deployments[d].name);
        if (nd >= 0)
            fresh->deps[nd].paused_until_ms = old->deps[d].paused_until_ms;
    }
    fresh->st = old->st;
    fresh->st.queued = fresh->st.delayed = fresh->st.leased = 0;
    fresh->obs = old->obs;
    fresh->obs_arg = old->obs_arg;
    fresh->res_counter = old->res_counter;
    rc = sl_shard_carry(fresh, old, now_ms);
    if (rc != SL_OK) {
        snprintf(err, errlen, "carrying the shard's partitions over: %s", sl_strerror(rc));
        sl_sched_free(fresh);
        return rc;
    }
    sl_sched_free(old);
    *sp = fresh;
    return SL_OK;
}

static void free_job_entry(const char *key, void *value, void *arg)
{
    (void)key;
    (void)arg;
    sl_job_free(value);
}

void sl_sched_free(sl_sched_t *s)
{
    if (s == NULL)
        return;
    /* The DRRs first: their lines run through the jobs (each job holds its own node). */
    for (int i = 0; s->routes != NULL && i < s->cfg->nroutes; i++) {
        sl_drr_free(s->routes[i].drr);
        free(s->routes[i].use);
    }
    if (s->jobs != NULL) {
        sl_hmap_each(s->jobs, free_job_entry, NULL);
        sl_hmap_free(s->jobs);
    }
    free(s->routes);
    for (int i = 0; s->deps != NULL && i < s->cfg->ndeployments; i++)
        free(s->deps[i].path.b);
    free(s->deps);
    for (int i = 0; s->tenant_paths != NULL && i < s->cfg->ntenants; i++)
        free(s->tenant_paths[i].b);
    free(s->tenant_paths);
    for (int i = 0; s->key_paths != NULL && i < s->cfg->nkeys; i++)
        free(s->key_paths[i].b);
    free(s->key_paths);
    sl_hmap_free(s->key_index);
    sl_hmap_free(s->tenant_index);
    free(s->owned);
    for (int b = 0; s->binfo != NULL && s->ledger != NULL && b < sl_ledger_count(s->ledger); b++)
        free(s->binfo[b].own);
    free(s->binfo);
    free(s->trt);
    free(s->key_paused);
    free(s->held.items);
    sl_calib_free(s->calib);
    free(s->delayed.items);
    free(s->leased.items);
    free(s->orphans.items);
    sl_ledger_free(s->ledger);
    sl_schema_free(s->job_schema);
    sl_schema_free(s->usage_schema);
    sl_schema_free(s->heartbeat_schema);
    sl_schema_free(s->pbatch_schema);
    sl_pbatch_free_all(s);
    sl_holders_free(s->holders);
    sl_schema_free(s->cancel_schema);
    sl_sched_msgs_free(s->out, s->nout);
    free(s);
}

/* ---- taking jobs ---- */

/* A `rejected` result the scheduler decides without a job of its own (an answer to a message):
 * under job_id and the caller's key and tenant, sent through the outbox like every result. */
static sl_err_t reject_message(sl_sched_t *s, const char *job_id, const char *idem,
                               const char *tenant, sl_reason_t reason, const char *message,
                               int64_t now_ms)
{
    sl_msg_error_t e;
    sl_msg_result_t r;
    sl_msg_result_rejected(&r, &e, job_id, idem, tenant, SL_ERRTYPE_INVALID_REQUEST, reason,
                           message, now_ms);
    json_t *res = sl_msg_result_json(&r);
    char *value = res != NULL ? json_dumps(res, JSON_COMPACT) : NULL;
    json_decref(res);
    if (value == NULL)
        return SL_ENOMEM;
    return sl_outbox_resend(s, job_id, value, now_ms);
}

/* The answer to a cancel that names no job of the caller's still to run: the finished job's
 * own result again, else a `rejected` result, reason nothing_to_cancel, under the caller's
 * idempotency key (the same answer whether or not another tenant has a job of that key: job
 * ids are made of the tenant and the key, so the caller's id is never another's job). A cancel
 * whose job id is another tenant's job cannot come from ingest; it gets no answer, so no result
 * under that job's id ever comes from it. */
static sl_err_t answer_cancel(sl_sched_t *s, const sl_msg_cancel_t *cancel, int64_t now_ms)
{
    char *stored = NULL;
    if (sl_store_job_result(s->store, cancel->job_id, &stored) == SL_OK) {
        json_t *doc = json_loads(stored, 0, NULL);
        const char *tenant = json_string_value(json_object_get(doc, "tenant"));
        int mine = tenant != NULL && strcmp(tenant, cancel->tenant) == 0;
        json_decref(doc);
        if (mine)
            return sl_outbox_resend(s, cancel->job_id, stored, now_ms);
        free(stored);
        sl_logf(SL_LOG_DEBUG, "job", cancel->job_id, "cancel names another tenant's job");
        return SL_OK;
    }
    return reject_message(s, cancel->job_id, cancel->idempotency_key, cancel->tenant,
                          SL_REASON_NOTHING_TO_CANCEL,
                          "no job of yours with this idempotency key is waiting to run", now_ms);
}

/* Whether job id's stored request differs from request (a key reused for another body). */
static int conflicts(sl_sched_t *s, const char *id, const json_t *request)
{
    char *stored = NULL;
    int differs = 0;
    if (sl_store_job_parts(s->store, id, &stored, NULL) == SL_OK && stored != NULL) {
        json_t *a = json_loads(stored, 0, NULL);
        differs = a != NULL && !json_equal(a, request);
        json_decref(a);
    }
    free(stored);
    return differs;
}

/* A cancel message (schema/cancel.json): a queued or delayed job is removed with a
 * `cancelled` result; a job in flight is reconciled normally (its own result answers); any
 * other gets answer_cancel's answer. */
static sl_err_t on_cancel(sl_sched_t *s, const sl_msg_cancel_t *cancel, int64_t now_ms)
{
    const char *id = cancel->job_id;
    const char *tenant = cancel->tenant;
    job_t *j = sl_hmap_get(s->jobs, id);
    if (j != NULL &&
        (sl_job_orphan_tenant(j) != NULL || strcmp(s->cfg->tenants[j->tenant].name, tenant) != 0)) {
        s->st.cancels_unmatched++;
        sl_logf_every(SL_LOG_REPEAT_MS, SL_LOG_INFO, "job", id,
                      "cancel names another tenant's job");
        return SL_OK;
    }
    if (j == NULL) {
        s->st.cancels_unmatched++;
        sl_logf_every(SL_LOG_REPEAT_MS, SL_LOG_INFO, "job", id,
                      "cancel of job %s: not queued (unknown or finished)", id);
        return answer_cancel(s, cancel, now_ms);
    }
    if (j->state == J_LEASED && j->pbatch) {
        int done = 0;
        return sl_pbatch_cancel(s, j, now_ms, &done);
    }
    if (j->state == J_LEASED) {
        sl_logf(SL_LOG_INFO, "job", id,
                "cancel of job %s: already sent to a provider; it finishes normally", id);
        return SL_OK;
    }
    outcome_t o;
    sl_outcome_init(&o, SL_STATUS_CANCELLED);
    return sl_outcome_finish(s, j, &o, now_ms);
}

/* A job the scheduler holds after taking it in (queued, delayed or degraded; not one refused at
 * the door) goes to the changelog as the message it came in, keyed by its tenant so that it
 * lands in the partition its job did (changelog.h). */
static sl_err_t log_taken(sl_sched_t *s, const char *job_id, int tenant, const char *json,
                          size_t len)
{
    const job_t *j = sl_hmap_get(s->jobs, job_id);
    if (j == NULL || s->unlogged)
        return SL_OK;
    char *value = strndup(json, len);
    if (value == NULL)
        return SL_ENOMEM;
    return sl_outbox_emit_taken(s, s->cfg->tenants[tenant].name, job_id, j->submitted_ms, value);
}

sl_err_t sl_sched_on_job(sl_sched_t *s, const char *json, size_t len, int64_t now_ms)
{
    char why[512];
    json_t *doc = json_loadb(json, len, 0, NULL);
    if (doc != NULL && sl_msg_jobs_kind(doc) == SL_JOBS_CANCEL) {
        sl_err_t rc = SL_OK;
        sl_msg_cancel_t cancel;
        if (sl_schema_validate(s->cancel_schema, doc, why, sizeof why) != SL_OK ||
            sl_msg_cancel_read(doc, &cancel) != SL_OK) {
            s->st.jobs_invalid++;
            sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN, "invalid cancel message ignored: %s", why);
        } else if (!sl_sched_owns(s, sl_sched_partition(s, cancel.tenant))) {
            s->st.not_owned++; /* another shard's tenant: that shard answers it */
        } else {
            rc = on_cancel(s, &cancel, now_ms);
        }
        json_decref(doc);
        return rc;
    }
    sl_msg_job_t msg;
    if (doc == NULL || sl_schema_validate(s->job_schema, doc, why, sizeof why) != SL_OK ||
        sl_msg_job_read(doc, &msg) != SL_OK) {
        s->st.jobs_invalid++;
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN, "invalid job message ignored: %s",
                     doc == NULL ? "malformed JSON" : why);
        json_decref(doc);
        return SL_OK;
    }
    if (!sl_sched_owns(s, sl_sched_partition(s, msg.tenant))) {
        /* Another shard's tenant (a producer with another partitioner): that shard has it. */
        s->st.not_owned++;
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN,
                     "job of tenant %s ignored: its partition is another scheduler shard's (do "
                     "all producers of the jobs topic use librdkafka's default partitioner?)",
                     msg.tenant);
        json_decref(doc);
        return SL_OK;
    }
    s->st.jobs_received++;
    const char *id = msg.job_id;
    const char *tenant_name = msg.tenant;
    const char *route_name = msg.route;
    const char *cls_name = msg.cls;
    sl_store_job_t row = {
        .job_id = id,
        .idempotency_key = msg.idempotency_key,
        .tenant = tenant_name,
        .app = msg.app,
        .env = msg.env,
        .key_id = msg.key_id,
        .route = route_name,
        .cls = cls_name,
        .submitted_ms = msg.submitted_ms,
        .deadline_ms = msg.deadline_ms,
        .est_input = msg.est_input,
        .est_output = msg.est_output,
        .est_total = msg.est_total,
    };
    /* The request body and metadata are kept as text of their own, so dispatching and
     * finishing the job never parse the whole job again. */
    char *text = strndup(json, len);
    char *request_json = json_dumps(msg.request, JSON_COMPACT);
    const json_t *meta = msg.metadata;
    char *metadata_json = meta != NULL ? json_dumps(meta, JSON_COMPACT) : NULL;
    row.job_json = text;
    row.request_json = request_json;
    row.metadata_json = metadata_json;
    char *old_result = NULL;
    sl_err_t rc = text != NULL && request_json != NULL && (meta == NULL || metadata_json != NULL)
                      ? sl_store_job_insert(s->store, &row, now_ms, &old_result)
                      : SL_ENOMEM;
    free(text);
    free(request_json);
    free(metadata_json);
    if (rc == SL_EEXISTS) {
        /* A redelivery or a resubmission: never run twice; a finished job's result is sent
         * again so a client re-running after a crash gets it. The same key with another
         * request is answered that the first one stands. */
        s->st.jobs_duplicate++;
        if (conflicts(s, id, msg.request)) {
            free(old_result);
            sl_logf(SL_LOG_DEBUG, "job", id, "idempotency key reused with another request");
            rc = reject_message(s, id, msg.idempotency_key, tenant_name,
                                SL_REASON_IDEMPOTENCY_CONFLICT,
                                "this idempotency key was used before with another request; "
                                "the first one stands",
                                now_ms);
        } else if (old_result != NULL) {
            rc = sl_outbox_resend(s, id, old_result, now_ms);
        } else {
            /* Redelivered while unfinished: its offset was not committed, which may be because
             * its changelog record never reached the broker; written again. */
            char again[SL_JOB_ID_MAX + 1];
            snprintf(again, sizeof again, "%s", id);
            int t = sl_job_tenant_index(s, tenant_name);
            rc = t >= 0 ? log_taken(s, again, t, json, len) : SL_OK;
        }
        json_decref(doc);
        return rc;
    }
    if (rc != SL_OK) {
        json_decref(doc);
        return rc;
    }
    job_t *j = sl_job_new(id, row.idempotency_key);
    if (j == NULL) {
        json_decref(doc);
        return SL_ENOMEM;
    }
    j->tenant = sl_job_tenant_index(s, tenant_name);
    j->route = sl_config_route(s->cfg, route_name);
    j->cls = sl_class_parse(cls_name);
    j->key = sl_job_key_index(s, row.key_id, j->tenant);
    j->home_route = j->route;
    j->flags = sl_job_doc_flags(doc);
    j->bytes = len < UINT32_MAX ? (uint32_t)len : UINT32_MAX;
    j->submitted_ms = row.submitted_ms;
    j->deadline_ms = row.deadline_ms;
    j->est_input = sl_job_est(row.est_input);
    j->est_output = sl_job_est(row.est_output);
    j->est_total = row.est_total > 0 ? sl_job_est(row.est_total) : 1;
    int orphan = j->tenant < 0 || j->route < 0;
    /* The job's message goes to the changelog once the job is taken (below). */
    char job_id[SL_JOB_ID_MAX + 1];
    snprintf(job_id, sizeof job_id, "%s", j->id);
    int tenant = j->tenant;
    if (orphan) {
        /* Ingest and scheduler disagree about the config (a change in between): the job is
         * refused under its own names, never run as another tenant or route. */
        if (sl_job_set_orphan(j, tenant_name, route_name) != SL_OK) {
            json_decref(doc);
            sl_job_free(j);
            return SL_ENOMEM;
        }
        j->state = J_ORPHAN;
    }
    json_decref(doc);
    rc = sl_job_track(s, j);
    if (rc != SL_OK) {
        sl_job_free(j);
        return rc;
    }
    if (orphan)
        return sl_outcome_fail_orphan(s, j, SL_STATUS_REJECTED, now_ms);
    if (!sl_flow_is_paused(s, j) && !sl_flow_scheduler_full(s) && sl_route_can_degrade(s, j)) {
        /* Degrade: a cheaper route rather than a refusal, or a wait past the deadline, for
         * jobs that allow it. */
        const char *reason = sl_flow_queue_full(s, j)                     ? "queue_full"
                             : sl_route_would_miss_deadline(s, j, now_ms) ? "deadline"
                                                                          : NULL;
        int moved = 0;
        rc = reason != NULL ? sl_route_degrade(s, j, reason, &moved) : SL_OK;
        if (rc != SL_OK || moved)
            return rc == SL_OK ? log_taken(s, job_id, tenant, json, len) : rc;
    }
    rc = sl_flow_admit(s, j, now_ms);
    return rc == SL_OK ? log_taken(s, job_id, tenant, json, len) : rc;
}

sl_err_t sl_sched_on_restored_job(sl_sched_t *s, const char *json, size_t len, int64_t now_ms)
{
    s->unlogged = 1;
    sl_err_t rc = sl_sched_on_job(s, json, len, now_ms);
    s->unlogged = 0;
    return rc;
}

/* ---- scheduling ---- */

/* Head of line. Within a route the job whose DRR turn it is holds the whole route until it
 * fits, so room accumulates for it however small the jobs behind it are. Across routes that
 * share a deployment, smaller jobs of another route could still take each refill first; so a
 * route whose head job waits for room on a provider bucket claims that room: until the claim
 * ends (the job's wait plus CLAIM_GRACE_MS), jobs of other routes leave it on that bucket (as
 * a reserve, sl_charge_t.keep), and routes holding a claim are served first in a tick. The
 * claimant then always fits first: what it needs is less than what the others need beside its
 * claim (or, at a full bucket, equal, and it comes first). Of two routes waiting on a bucket
 * the one whose head job has waited longer holds the claim, so a route of small jobs, whose
 * head changes with every refill, cannot keep it from a large job. The claim is at most the
 * job's charge there and at most a burst; it ends when the job is leased or lapses when nobody
 * comes back for it; other routes use whatever is above it, so the pool stays
 * work-conserving. */
enum { CLAIM_GRACE_MS = 50 };

static void apply_claims(const sl_sched_t *s, int r, held_t *h, int64_t now_ms)
{
    for (int k = 0; k < h->n; k++) {
        int b = h->ch[k].bucket;
        if (b < 0)
            continue;
        const binfo_t *bi = &s->binfo[b];
        if (bi->claim_route >= 0 && bi->claim_route != r && bi->claim_until_ms > now_ms &&
            bi->claim_amount > h->ch[k].keep)
            h->ch[k].keep = bi->claim_amount;
    }
}

static void claim_room(sl_sched_t *s, int r, int b, double amount, int64_t until_ms, int64_t now_ms)
{
    binfo_t *bi = &s->binfo[b];
    int64_t since = s->routes[r].head_waits_since_ms;
    if (bi->claim_route >= 0 && bi->claim_route != r && bi->claim_until_ms > now_ms &&
        bi->claim_since_ms <= since)
        return;
    double cap = sl_ledger_capacity(s->ledger, b);
    bi->claim_route = r;
    bi->claim_since_ms = since;
    bi->claim_amount = amount < cap ? amount : cap;
    bi->claim_until_ms = until_ms;
    if (until_ms > s->routes[r].claim_until_ms)
        s->routes[r].claim_until_ms = until_ms;
}

static void release_claims(sl_sched_t *s, int r, const held_t *h)
{
    for (int k = 0; k < h->n; k++) {
        int b = h->ch[k].bucket;
        if (b >= 0 && s->binfo[b].claim_route == r)
            s->binfo[b].claim_route = -1;
    }
    s->routes[r].claim_until_ms = 0;
    s->routes[r].head_waits_since_ms = 0;
}

/* What one attempt to admit a job on its candidate deployments found. */
typedef struct {
    int leased;
    int64_t min_wait;
    int caller_blocked, quota_out, quota_bucket, paused;
    int64_t quota_wait;
    int nclaim; /* the provider buckets that refused it, and what it needs there */
    int claim_b[SL_ROUTE_MAX_DEPLOYMENTS];
    double claim_amount[SL_ROUTE_MAX_DEPLOYMENTS];
    int kept; /* it left room for other work on some bucket */
} attempt_t;

/* Tries to reserve j's charges on its candidate deployments order[0..n) in turn (all or
 * nothing on each). On success (a->leased) *h holds the charges taken on deployment *d and the
 * caller leases the job; otherwise a says why not. */
static sl_err_t try_reserve(sl_sched_t *s, int r, job_t *j, const int *order, int n, int64_t now_ms,
                            attempt_t *a, held_t *h, int *d_out)
{
    route_t *route = &s->routes[r];
    memset(a, 0, sizeof *a);
    a->min_wait = INT64_MAX;
    a->quota_bucket = -1;
    for (int i = 0; i < n && !a->caller_blocked; i++) {
        int d = order[i];
        int64_t w = 0;
        if (sl_health_holds(s, d, now_ms, &w)) {
            /* Paused by its provider, or its probe is out (usage events unblock the route). */
            a->min_wait = w < a->min_wait ? w : a->min_wait;
            a->paused++;
            continue;
        }
        sl_reservation_build(s, j, d, h);
        sl_flow_keep_reserve(s, route, j, h, now_ms);
        for (int k = 0; k < h->n; k++) {
            a->kept |= h->ch[k].keep > 0; /* its own reserve, not another route's claim */
            h->before[k] = sl_ledger_reserved_total(s->ledger, h->ch[k].bucket);
        }
        apply_claims(s, r, h, now_ms);
        sl_refusal_t why;
        sl_err_t rc = sl_ledger_reserve(s->ledger, h->ch, h->n, now_ms, &why);
        if (rc == SL_OK) {
            h->charged_ms = now_ms;
            *d_out = d;
            a->leased = 1;
            return SL_OK;
        }
        if (rc != SL_ENOROOM)
            return rc;
        if (s->obs.refused != NULL)
            s->obs.refused(s->obs_arg, sl_ledger_id(s->ledger, why.bucket));
        int quota_beyond = sl_buckets_is_quota(s, why.bucket) &&
                           (why.wait_ms == INT64_MAX || now_ms + why.wait_ms > j->deadline_ms);
        if (quota_beyond) {
            a->quota_out++;
            if (a->quota_bucket < 0) {
                a->quota_bucket = why.bucket;
                a->quota_wait = why.wait_ms;
            }
        }
        if (!s->binfo[why.bucket].provider_side) {
            a->caller_blocked = 1;
        } else if (!quota_beyond) {
            a->min_wait = why.wait_ms < a->min_wait ? why.wait_ms : a->min_wait;
            for (int k = 0; k < h->n; k++) {
                if (h->ch[k].bucket == why.bucket && a->nclaim < SL_ROUTE_MAX_DEPLOYMENTS) {
                    a->claim_b[a->nclaim] = why.bucket;
                    a->claim_amount[a->nclaim++] = (double)h->ch[k].amount;
                    break;
                }
            }
        }
    }
    return SL_OK;
}

/* Leases j with the charges h taken on deployment d; the DRR has already served it at cost. */
static sl_err_t lease(sl_sched_t *s, int r, job_t *j, int d, const held_t *h, int64_t cost,
                      int64_t now_ms)
{
    held_t *copy = malloc(sizeof *copy);
    if (copy == NULL)
        return SL_ENOMEM;
    *copy = *h;
    if (sl_job_set_held(j, copy) != SL_OK)
        return SL_ENOMEM;
    j->drr_cost = cost;
    sl_err_t rc = sl_lease_grant(s, j, d, now_ms);
    if (rc != SL_OK)
        return rc;
    if (!j->pbatch)
        sl_health_probe_sent(s, d, now_ms);
    sl_flow_count_admitted(s, &s->routes[r], j->cls, (double)(h->est_input + h->est_output),
                           now_ms);
    return SL_OK;
}

/* Backpressure from the dispatchers (holders.h): the leases out stop at what the live
 * dispatchers run at once. Batch work stops at that window; the other classes may go a quarter
 * beyond it, and at least SL_WINDOW_MIN (a window cut small still leaves them room), so a job
 * someone waits for does not queue behind a window full of backfill (its dispatch then waits
 * in the topic until a call ends). */
enum { WINDOW_SLACK_DIV = 4 };

static int window_full(const sl_sched_t *s, int cls)
{
    int64_t w = s->dispatch_window;
    if (cls != SL_CLASS_BATCH)
        w += w / WINDOW_SLACK_DIV > SL_WINDOW_MIN ? w / WINDOW_SLACK_DIV : SL_WINDOW_MIN;
    /* Jobs in provider batches are not calls at the dispatchers. */
    return s->leased.n - s->leased.npbatch >= w;
}

/* Beside a waiting head. The job whose DRR turn it is waits for room on the provider buckets
 * head_a->claim_b. When those are token limits and its charges touch another token limit too
 * (ITPM and OTPM apart), the jobs of the other flows of its class that weigh on that other
 * limit much more than on the full one (a long-output job while ITPM is full, a long-prompt
 * job while OTPM is) are served meanwhile, in DRR order, each charged its cost to its own flow
 * at once (sl_drr_pop_beside, at most DRR_BESIDE_DEBT_QUANTA ahead), so the shares hold; they
 * take little of the room the head waits for (their time on the full limit is at most
 * BESIDE_RATIO of their time on the other) and the head keeps its turn. Without this the
 * other limit idled while the head waited (bench/scenarios shapes_itpm: 87 % of the fuller
 * limit used). With one token limit nothing passes: every job would take the room the head
 * waits for, and the order of such waits would decide the shares instead of the DRR (letting
 * every job pass, tried before, broke the guarantee and the weights). *wait_ms is lowered to
 * when a job that could run beside has room. */
#define BESIDE_RATIO 0.25
enum { BESIDE_MAX_FLOWS = 64 };

static sl_err_t serve_beside(sl_sched_t *s, int r, const held_t *head_h, const attempt_t *head_a,
                             int64_t now_ms, int *budget, int64_t *wait_ms)
{
    route_t *route = &s->routes[r];
    double on = 0, beside = 0;
    if (head_a->nclaim == 0 ||
        !sl_reservation_time_split(s, head_h->ch, head_h->n, head_a->claim_b, head_a->nclaim, &on,
                                   &beside) ||
        beside <= 0)
        return SL_OK; /* one token limit (or one waited on that every job needs alike) */
    int flows[BESIDE_MAX_FLOWS];
    int nflows = sl_drr_beside(route->drr, flows, BESIDE_MAX_FLOWS);
    for (int f = 0; *budget > 0 && f < nflows; f++) {
        int64_t cost = 0;
        job_t *j;
        while (*budget > 0 && (j = sl_drr_peek_beside(route->drr, flows[f], &cost)) != NULL) {
            if (j->deadline_ms <= now_ms)
                break; /* expired: the DRR's own turn or the deadline scan takes it out */
            if (window_full(s, j->cls))
                break;
            int order[SL_ROUTE_MAX_DEPLOYMENTS];
            int incapable = 0;
            int n = sl_route_candidates(s, j, order, &incapable, now_ms);
            if (n == 0)
                break;
            held_t h;
            sl_reservation_build(s, j, order[0], &h);
            if (!sl_reservation_time_split(s, h.ch, h.n, head_a->claim_b, head_a->nclaim, &on,
                                           &beside) ||
                beside <= 0 || on > BESIDE_RATIO * beside)
                break;
            attempt_t a;
            int d = -1;
            sl_err_t rc = try_reserve(s, r, j, order, n, now_ms, &a, &h, &d);
            if (rc != SL_OK)
                return rc;
            if (!a.leased) {
                if (!a.caller_blocked && !a.kept && a.min_wait < *wait_ms)
                    *wait_ms = a.min_wait > 0 ? a.min_wait : 1;
                break;
            }
            sl_drr_pop_beside(route->drr, flows[f]);
            rc = lease(s, r, j, d, &h, cost, now_ms);
            if (rc != SL_OK)
                return rc;
            (*budget)--;
        }
    }
    return SL_OK;
}

/* Serves one route by DRR until capacity or the per-tick budget runs out. */
static sl_err_t schedule_route(sl_sched_t *s, int r, int64_t now_ms, int *budget)
{
    route_t *route = &s->routes[r];
    const sl_route_cfg_t *rc_cfg = &s->cfg->routes[r];
    if (route->blocked_until_ms > now_ms)
        return SL_OK;
    int skips = 0;
    while (*budget > 0) {
        int64_t cost = 0;
        int flow = 0;
        job_t *j = sl_drr_peek(route->drr, &cost, &flow);
        if (j == NULL)
            return SL_OK;
        if (j->deadline_ms <= now_ms) {
            sl_err_t rc = sl_route_expire_in_queue(s, j, now_ms);
            if (rc != SL_OK)
                return rc;
            continue;
        }
        /* A job for a provider's batch API takes none of the online capacity the others use,
         * and is not a call at the dispatchers: it neither yields nor waits for the window. */
        int by_batch = sl_route_by_batch(s, j, now_ms);
        if (route->cls_blocked_until_ms[j->cls] > now_ms ||
            (!by_batch &&
             (window_full(s, j->cls) || sl_flow_must_yield(s, route, j->cls, now_ms)))) {
            sl_drr_skip_group(route->drr);
            if (++skips > sl_drr_active_flows(route->drr))
                return SL_OK;
            continue;
        }
        int order[SL_ROUTE_MAX_DEPLOYMENTS];
        int incapable = 0;
        int n = sl_route_candidates(s, j, order, &incapable, now_ms);
        if (n == 0) {
            sl_err_t rc = sl_route_refuse_unfit(s, j, incapable, now_ms);
            if (rc != SL_OK)
                return rc;
            continue;
        }
        attempt_t a;
        held_t h;
        int d = -1;
        sl_err_t rc = try_reserve(s, r, j, order, n, now_ms, &a, &h, &d);
        if (rc != SL_OK)
            return rc;
        if (a.leased) {
            sl_drr_pop(route->drr);
            release_claims(s, r, &h);
            rc = lease(s, r, j, d, &h, cost, now_ms);
            if (rc != SL_OK)
                return rc;
            (*budget)--;
            skips = 0;
            continue;
        }
        int64_t min_wait = a.min_wait;
        if (a.quota_out > 0 && (a.caller_blocked || a.quota_out == n)) {
            /* A quota on the callers' side, or on every deployment that could take the job,
             * is spent past the job's deadline: another route may still serve it (not when the
             * caller's own quota is spent: that would follow it there). */
            int moved = 0;
            sl_job_unplace(s, j);
            rc = a.caller_blocked ? SL_OK
                                  : sl_route_fallback(s, j, "quota_exhausted", now_ms, &moved);
            if (rc == SL_OK && !moved)
                rc = sl_outcome_fail_quota(s, j, a.quota_bucket, a.quota_wait, now_ms);
            if (rc != SL_OK)
                return rc;
            continue;
        }
        if (a.paused == n && min_wait != INT64_MAX && now_ms + min_wait > j->deadline_ms &&
            (sl_job_flags(s, j) & JF_FALLBACK) && rc_cfg->nfallbacks > 0) {
            /* Every deployment is paused by its provider past the job's deadline. */
            int moved = 0;
            sl_job_unplace(s, j);
            rc = sl_route_fallback(s, j, "providers_paused", now_ms, &moved);
            if (rc == SL_OK && !moved)
                rc = sl_flow_enqueue(s, j, 1);
            if (rc != SL_OK)
                return rc;
            if (!moved) {
                route->blocked_until_ms = now_ms + min_wait;
                return SL_OK;
            }
            continue;
        }
        if (!a.caller_blocked && min_wait != INT64_MAX && now_ms + min_wait > j->deadline_ms) {
            /* The job would wait for room past its deadline: where its class degrades, a
             * cheaper route serves it rather than letting it expire. */
            int moved = 0;
            rc = sl_route_degrade(s, j, "deadline", &moved);
            if (rc != SL_OK)
                return rc;
            if (moved)
                continue;
        }
        if (a.caller_blocked) {
            /* This caller's own budget is spent: serve the others meanwhile. */
            sl_drr_skip(route->drr);
            if (++skips > sl_drr_active_flows(route->drr))
                return SL_OK;
            continue;
        }
        /* The pool is full: wait until the earliest bucket has room, keeping DRR's place. A
         * gauge has room again when a call ends (usage events unblock the route), so its wait
         * is only a fallback poll. */
        if (min_wait == INT64_MAX)
            min_wait = 1000;
        int64_t until = now_ms + (min_wait > 0 ? min_wait : 1);
        if (a.kept || by_batch) {
            /* It may be waiting only for the room it leaves interactive work: its class waits,
             * the others go on. */
            route->cls_blocked_until_ms[j->cls] = until;
            sl_drr_skip_group(route->drr);
            if (++skips > sl_drr_active_flows(route->drr))
                return SL_OK;
            continue;
        }
        if (route->head_waits_since_ms == 0)
            route->head_waits_since_ms = now_ms;
        for (int i = 0; i < a.nclaim; i++)
            claim_room(s, r, a.claim_b[i], a.claim_amount[i], until + CLAIM_GRACE_MS, now_ms);
        int64_t wait = until - now_ms;
        rc = serve_beside(s, r, &h, &a, now_ms, budget, &wait);
        route->blocked_until_ms = now_ms + wait;
        return rc;
    }
    return SL_OK;
}

/* ---- reconciliation ---- */

sl_err_t sl_sched_on_usage(sl_sched_t *s, const char *json, size_t len, int64_t now_ms)
{
    char why[512];
    json_t *doc = json_loadb(json, len, 0, NULL);
    if (doc != NULL && sl_msg_is_heartbeat(doc)) {
        sl_err_t hrc = sl_holders_on_heartbeat(s, doc, now_ms);
        json_decref(doc);
        return hrc;
    }
    if (doc != NULL && sl_pbatch_is_event(doc)) {
        sl_err_t brc = sl_pbatch_on_event(s, doc, now_ms);
        json_decref(doc);
        return brc;
    }
    if (doc == NULL || sl_schema_validate(s->usage_schema, doc, why, sizeof why) != SL_OK) {
        s->st.usage_invalid++;
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN, "invalid usage event ignored: %s",
                     doc == NULL ? "malformed JSON" : why);
        json_decref(doc);
        return SL_OK;
    }
    sl_err_t rc = SL_OK;
    sl_msg_usage_t u;
    sl_msg_tokens_t tok;
    if (sl_msg_usage_read(doc, &u, &tok) != SL_OK) {
        s->st.usage_invalid++;
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN,
                     "invalid usage event ignored: a required field is missing");
        json_decref(doc);
        return SL_OK;
    }
    const char *outcome = sl_outcome_name(u.outcome);
    job_t *j = sl_hmap_get(s->jobs, u.job_id);
    int current =
        j != NULL && j->state == J_LEASED && strcmp(j->lease->res_id, u.reservation_id) == 0;
    int ok = u.outcome == SL_OUTCOME_OK;
    int64_t in = tok.input, out = tok.output, cached = tok.cached;

    if (!current) {
        /* A late or repeated event: its reservation already expired (charged in full, since the
         * call may have happened) or was reconciled. A late success still completes a job that
         * is waiting for another attempt. */
        s->st.usage_stale++;
        if (j != NULL && ok) {
            if (j->state == J_LEASED) {
                rc = sl_reservation_settle(s, j, END_EXPIRED, "expired", -1, -1, -1, "superseded",
                                           now_ms, NULL);
                if (rc != SL_OK)
                    goto out;
            }
            outcome_t o;
            sl_outcome_init(&o, SL_STATUS_SUCCEEDED);
            o.deployment = u.deployment;
            o.response = u.response;
            o.usage = u.usage;
            o.provider_ms = u.total_ms;
            rc = sl_outcome_finish(s, j, &o, now_ms);
        }
        goto out;
    }

    /* A lease restored after its deployment left the config is still reconciled; only the
     * deployment's own state (pauses) has nowhere to go. */
    int dep = j->deployment;
    const char *dep_name = dep >= 0 ? s->cfg->deployments[dep].name : u.deployment;
    if (u.outcome == SL_OUTCOME_NOT_SENT) {
        /* The dispatcher refused the lease (stale, expired, or an unknown deployment): no call
         * was made, so our own budgets get everything back. The provider-mirror buckets keep
         * the charge: giving it back at once would let a fresh burst join dispatches that are
         * still on their way (admitted just before, delayed by the same outage), and the
         * provider would see both at once. */
        j->not_sent++;
        if (j->pbatch && j->cancel_asked) {
            /* Its provider batch was cancelled because every job in it asked. */
            rc = sl_pbatch_cancelled(s, j, now_ms);
            goto out;
        }
        if (!j->pbatch)
            sl_holders_on_not_sent(s, now_ms);
        rc = sl_reservation_settle(s, j, END_NOT_SENT, "reconciled", in, out, cached, outcome,
                                   now_ms, NULL);
        if (rc == SL_OK)
            rc = sl_retry_or_fail(s, j, 0, SL_REASON_NOT_SENT,
                                  j->pbatch ? "its provider batch did not run it (expired, "
                                              "cancelled, or no result)"
                                            : "the dispatcher could not send the request",
                                  now_ms);
        goto out;
    }
    if (!j->pbatch)
        sl_holders_on_answer(s);
    sl_reservation_clamp(s, j, (json_t *)u.ratelimit, now_ms);
    if (s->obs.provider != NULL)
        s->obs.provider(s->obs_arg, dep_name, outcome, u.http_status);
    if (dep >= 0)
        s->deps[dep].answered++;
    const held_t *held = sl_job_held(j);
    int64_t reserved_input = held != NULL ? held->est_input : j->est_input;
    int64_t reserved_output = held != NULL ? held->est_output : j->est_output;
    int64_t status = u.http_status;
    int refused =
        sl_outcome_is_refusal(u.outcome) && (status == 429 || status == 503 || status == 529);
    end_t end = in >= 0 ? END_USAGE : refused ? END_REFUSED : END_NO_USAGE;
    int64_t cost_delta = 0;
    rc = sl_reservation_settle(s, j, end, "reconciled", in, out, cached, outcome, now_ms,
                               &cost_delta);
    if (rc != SL_OK)
        goto out;
    /* The DRR was charged an estimate: the flow pays (or gets back) the difference. */
    sl_flow_charge(s, j, cost_delta);
    /* Only a finished call's usage is the provider's count: a failed one's is partial, or the
     * dispatcher's own estimate (a cut stream without the provider's count carries ingest's
     * input estimate), and learning from it pulled the learned input up to ingest's
     * conservative count (bench/compare stream: 8 % more reserved a call). */
    if (in >= 0 && ok) {
        sl_calib_observe(s->calib, j->route, j->cls, j->est_input, in, j->est_output, out);
        rc = sl_store_estimate_record(s->store, s->cfg->routes[j->route].name,
                                      sl_class_name((sl_class_t)j->cls), dep_name, reserved_input,
                                      in, reserved_output, out);
    }
    if (rc != SL_OK)
        goto out;

    int64_t retry_after = u.retry_after_ms;
    const char *perr = json_string_value(json_object_get(u.error, "message"));
    char message[512];
    snprintf(message, sizeof message, "%s (HTTP %lld from %s): %.300s", outcome,
             (long long)u.http_status, dep_name, perr ? perr : "");
    /* A provider batch's line says nothing about the provider's state now (it ran hours ago,
     * in the batch's own quota): it neither pauses the twin nor opens a probe. */
    int live = dep >= 0 && !j->pbatch;
    if (live)
        sl_health_answered(s, j, u.outcome, u.ttft_ms);
    if (ok) {
        outcome_t o;
        sl_outcome_init(&o, SL_STATUS_SUCCEEDED);
        o.deployment = dep_name;
        o.response = u.response;
        o.usage = u.usage;
        o.provider_ms = u.total_ms;
        sl_job_list_del(&s->leased, j);
        rc = sl_outcome_finish(s, j, &o, now_ms);
    } else if (u.outcome == SL_OUTCOME_RATE_LIMITED) {
        /* Retry-After is a lower bound (sl_retry_rate_limit_pause_ms); the job goes back in
         * line at once, for another deployment or after the pause. */
        s->st.provider_429++;
        if (dep >= 0)
            s->deps[dep].rate_limited++;
        int64_t pause = sl_retry_rate_limit_pause_ms(s, retry_after);
        if (live) {
            sl_health_pause(s, dep, pause, now_ms);
            sl_warn("deployment %s answered 429; paused %lld ms", dep_name, (long long)pause);
        }
        rc = sl_retry_or_fail(s, j, 0, SL_REASON_PROVIDER_RATE_LIMITED, message, now_ms);
    } else if (u.outcome == SL_OUTCOME_QUOTA_EXHAUSTED) {
        if (dep >= 0)
            sl_health_quota_exhausted(s, dep, now_ms);
        sl_job_list_del(&s->leased, j);
        rc = sl_outcome_fail(s, j, SL_STATUS_FAILED, SL_ERRTYPE_POLICY,
                             SL_REASON_PROVIDER_QUOTA_EXHAUSTED,
                             SL_DECISION_ADMITTED_PROVIDER_REJECTED, 0, message, now_ms);
    } else if (u.outcome == SL_OUTCOME_CLIENT_ERROR || u.outcome == SL_OUTCOME_AUTH_ERROR) {
        int auth = u.outcome == SL_OUTCOME_AUTH_ERROR;
        sl_job_list_del(&s->leased, j);
        rc = sl_outcome_fail(s, j, SL_STATUS_FAILED,
                             auth ? SL_ERRTYPE_AUTHENTICATION : SL_ERRTYPE_INVALID_REQUEST,
                             auth ? SL_REASON_PROVIDER_AUTH : SL_REASON_PROVIDER_BAD_REQUEST,
                             SL_DECISION_ADMITTED_PROVIDER_REJECTED, 0, message, now_ms);
    } else {
        /* overloaded, server_error, timeout, transport, bad_response: retryable with backoff,
         * or after the provider's hint when it gave one. A server-side failure may also pause
         * the deployment (sl_retry_overload_pause_ms says when and how long). */
        s->st.provider_5xx++;
        if (dep >= 0)
            s->deps[dep].unavailable++;
        int64_t delay = retry_after > 0 ? retry_after : sl_retry_backoff_ms(s, j->attempts);
        int server_side =
            u.outcome == SL_OUTCOME_OVERLOADED || u.outcome == SL_OUTCOME_SERVER_ERROR;
        if (live && server_side)
            sl_health_server_failed(s, dep, retry_after, now_ms);
        rc = sl_retry_or_fail(s, j, delay, SL_REASON_PROVIDER_UNAVAILABLE, message, now_ms);
    }
out:
    json_decref(doc);
    return rc;
}

/* ---- the tick ---- */

static sl_err_t expire_leases(sl_sched_t *s, int64_t now_ms)
{
    for (int i = 0; i < s->leased.n;) {
        job_t *j = s->leased.items[i];
        if (j->lease->lease_expires_ms > now_ms) {
            i++;
            continue;
        }
        /* The dispatcher died or lost the call: its reservation stays charged (the call may
         * have reached the provider) and the job goes back in line. */
        s->st.lease_expired++;
        sl_logf(SL_LOG_WARN, "job", j->id, "lease of job %s (attempt %d) expired", j->id,
                j->attempts);
        sl_err_t rc = sl_reservation_settle(s, j, END_EXPIRED, "expired", -1, -1, -1,
                                            "lease_expired", now_ms, NULL);
        if (rc == SL_OK)
            rc = sl_retry_or_fail(s, j, 0, SL_REASON_LEASE_EXPIRED,
                                  "the dispatcher holding the job did not report back in time",
                                  now_ms);
        if (rc != SL_OK)
            return rc;
        /* sl_retry_or_fail removed j from the list, so index i now holds another job */
    }
    return SL_OK;
}

static sl_err_t release_delayed(sl_sched_t *s, int64_t now_ms, int64_t *next_ms)
{
    for (int i = 0; i < s->delayed.n;) {
        job_t *j = s->delayed.items[i];
        if (j->not_before_ms > now_ms) {
            if (j->not_before_ms < *next_ms)
                *next_ms = j->not_before_ms;
            i++;
            continue;
        }
        sl_job_list_del(&s->delayed, j);
        sl_err_t rc = sl_flow_enqueue(s, j, 1);
        if (rc != SL_OK)
            return rc;
    }
    return SL_OK;
}

sl_err_t sl_sched_tick(sl_sched_t *s, int64_t now_ms, int64_t *wait_ms)
{
    int64_t next_ms = now_ms + SCAN_EVERY_MS;
    sl_err_t rc = SL_OK;
    if (now_ms - s->last_scan_ms >= SCAN_EVERY_MS || s->delayed.n > 0) {
        rc = sl_holders_tick(s, now_ms);
        if (rc == SL_OK)
            rc = sl_shard_tick(s, now_ms);
        if (rc == SL_OK)
            rc = expire_leases(s, now_ms);
        if (rc == SL_OK)
            rc = release_delayed(s, now_ms, &next_ms);
        s->last_scan_ms = now_ms;
    }
    if (rc == SL_OK)
        rc = sl_pbatch_tick(s, now_ms, &next_ms);
    sl_deadline_late_t late = {NULL, 0, 0};
    if (rc == SL_OK && now_ms - s->last_deadline_scan_ms >= SL_DEADLINE_SCAN_EVERY_MS) {
        rc = sl_deadline_scan(s, now_ms, &late);
        s->last_deadline_scan_ms = now_ms;
    }
    int budget = MAX_DISPATCH_PER_TICK;
    s->dispatch_window = sl_holders_window(s);
    /* Routes holding a head-of-line claim first (claim_room), then the others. */
    for (int k = 0; rc == SL_OK && k < 2 * s->cfg->nroutes; k++) {
        int r = k % s->cfg->nroutes, claimed = s->routes[r].claim_until_ms > now_ms;
        if (claimed != (k < s->cfg->nroutes))
            continue;
        rc = schedule_route(s, r, now_ms, &budget);
        route_t *route = &s->routes[r];
        if (sl_drr_len(route->drr) > 0 && route->blocked_until_ms > now_ms &&
            route->blocked_until_ms < next_ms)
            next_ms = route->blocked_until_ms;
        for (int c = 0; c < SL_CLASS_COUNT; c++) {
            int64_t until = route->cls_blocked_until_ms[c];
            if (until > now_ms && until < next_ms && sl_drr_group_len(route->drr, c) > 0)
                next_ms = until;
        }
    }
    if (budget == 0)
        next_ms = now_ms + 1;
    if (late.n > 0 && rc == SL_OK) {
        /* After this tick's leases: only the jobs still queued move. */
        rc = sl_deadline_degrade_late(s, &late);
        next_ms = now_ms + 1; /* the cheaper route's turn */
    }
    sl_deadline_late_free(&late);
    if (rc == SL_OK && now_ms - s->last_bucket_save_ms >= BUCKET_SAVE_EVERY_MS) {
        rc = sl_buckets_save(s, now_ms, 0);
        s->last_bucket_save_ms = now_ms;
    }
    if (rc != SL_OK) {
        sl_error("scheduling step failed: %s", sl_strerror(rc));
        *wait_ms = 1;
        return rc;
    }
    for (int i = 0; i < s->leased.n; i++) {
        if (s->leased.items[i]->lease->lease_expires_ms < next_ms)
            next_ms = s->leased.items[i]->lease->lease_expires_ms;
    }
    int64_t wait = next_ms - now_ms;
    *wait_ms = wait >= 1 ? wait : 1;
    return SL_OK;
}

void sl_sched_extend_leases(sl_sched_t *s, int64_t gap_ms)
{
    for (int i = 0; i < s->leased.n; i++)
        s->leased.items[i]->lease->lease_expires_ms += gap_ms;
    sl_holders_extend(s, gap_ms);
}

void sl_sched_observe(sl_sched_t *s, const sl_sched_observer_t *obs, void *arg)
{
    memset(&s->obs, 0, sizeof s->obs);
    if (obs != NULL)
        s->obs = *obs;
    s->obs_arg = arg;
}
