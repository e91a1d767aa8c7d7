/* outcome.c - finishing a job and building its result (see outcome.h).
 */
#include "outcome.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buckets.h"
#include "capacity.h"
#include "job.h"
#include "outbox.h"
#include "store.h"

void sl_outcome_init(outcome_t *o, sl_status_t status)
{
    memset(o, 0, sizeof *o);
    o->status = status;
    o->retry_after_ms = -1;
}

void sl_outcome_error(outcome_t *o, sl_errtype_t type, sl_reason_t reason, sl_decision_t decision)
{
    o->has_error = 1;
    o->err_type = type;
    o->err_reason = reason;
    o->decision = decision;
}

/* The path and cost of a job the provider answered with usage: at its deployment's price
 * (the batch twin's is discounted), and what the same usage costs online. */
static void price_result(const sl_sched_t *s, const outcome_t *o, sl_msg_result_t *r)
{
    int d = o->deployment != NULL ? sl_config_deployment(s->cfg, o->deployment) : -1;
    if (d < 0)
        return;
    const sl_deployment_cfg_t *dc = &s->cfg->deployments[d];
    r->path = dc->batch_of >= 0 ? "batch" : "online";
    json_t *u = (json_t *)o->usage;
    if (!json_is_integer(json_object_get(u, "input")))
        return;
    const sl_price_cfg_t *online = &s->cfg->deployments[dc->batch_of >= 0 ? dc->batch_of : d].price;
    if (online->input_per_mtok <= 0 && online->output_per_mtok <= 0)
        return;
    int64_t in = json_integer_value(json_object_get(u, "input"));
    int64_t out = json_integer_value(json_object_get(u, "output"));
    int64_t cached = json_integer_value(json_object_get(u, "cached"));
    r->cost_usd = sl_capacity_spend_usd(&dc->price, in, cached, out);
    if (dc->batch_of >= 0)
        r->online_cost_usd = sl_capacity_spend_usd(online, in, cached, out);
}

sl_err_t sl_outcome_finish(sl_sched_t *s, job_t *j, const outcome_t *o, int64_t now_ms)
{
    json_t *meta = NULL;
    char *meta_json = NULL;
    if (sl_store_job_parts(s->store, j->id, NULL, &meta_json) == SL_OK && meta_json != NULL)
        meta = json_loads(meta_json, 0, NULL);
    free(meta_json);
    const sl_config_t *cfg = s->cfg;
    sl_msg_error_t e;
    sl_msg_result_t r;
    sl_msg_result_init(&r, j->id, o->status);
    r.idempotency_key = sl_job_idem(j);
    r.tenant = sl_job_orphan_tenant(j) ? sl_job_orphan_tenant(j) : cfg->tenants[j->tenant].name;
    /* A job of a tenant the config no longer knows goes to the shared topic, in the clear:
     * there is no key or topic of its own left to use. */
    int tenant = sl_job_orphan_tenant(j) ? -1 : j->tenant;
    const char *topic = sl_config_results_topic(cfg, tenant);
    r.seal_pk = sl_config_seal_key(cfg, tenant);
    r.route = sl_job_orphan_route(j)
                  ? sl_job_orphan_route(j)
                  : cfg->routes[j->home_route >= 0 ? j->home_route : j->route].name;
    r.cls = sl_class_name((sl_class_t)j->cls);
    r.attempts = j->attempts - j->not_sent;
    /* A degraded job was moved to its route's degrade_to: a fallback is a move beyond that. */
    int degraded = (j->flags & JF_DEGRADED) && j->home_route >= 0;
    r.fallback_used = j->route != j->home_route &&
                      !(degraded && j->route == cfg->routes[j->home_route].degrade_to);
    r.degraded_from = degraded ? cfg->routes[j->home_route].name : NULL;
    r.finished_ms = now_ms;
    r.deployment = o->deployment;
    price_result(s, o, &r);
    r.response = o->response;
    r.usage = o->usage;
    r.metadata = meta;
    r.has_timings = 1;
    int64_t dispatched_ms = sl_job_dispatched_ms(j);
    r.queued_ms = dispatched_ms > 0 ? (double)(dispatched_ms - j->submitted_ms) : 0;
    r.provider_ms = o->provider_ms;
    r.total_ms = (double)(now_ms - j->submitted_ms);
    if (o->has_error) {
        sl_msg_error_init(&e, o->err_type, o->err_reason, o->decision, o->err_message);
        e.retryable = o->retryable;
        /* sl_job_flags: a restored job's flags are read from its stored message when not known. */
        e.fallback_allowed = (sl_job_flags(s, j) & JF_FALLBACK) != 0;
        e.limiter = o->limiter;
        e.scope = o->scope;
        e.retry_after_ms = o->retry_after_ms;
        e.trace_id = j->id;
        r.error = &e;
    }
    json_t *res = sl_msg_result_json(&r);
    json_decref(meta);
    char *value = res != NULL ? json_dumps(res, JSON_COMPACT) : NULL;
    json_decref(res);
    if (value == NULL)
        return SL_ENOMEM;
    const char *status = sl_status_name(o->status);
    int64_t seq = 0;
    /* The topic is stored with the outbox row, so a restart produces it to the same place. */
    sl_err_t rc = sl_store_job_finish(s->store, j->id, status, value, topic, now_ms, &seq);
    if (rc != SL_OK) {
        free(value);
        return rc;
    }
    if (o->status == SL_STATUS_SUCCEEDED)
        s->st.succeeded++;
    else if (o->status == SL_STATUS_EXPIRED)
        s->st.expired++;
    else if (o->status == SL_STATUS_CANCELLED)
        s->st.cancelled++;
    else
        s->st.failed++;
    if (s->obs.finished != NULL)
        s->obs.finished(s->obs_arg, j->cls, status, j->attempts - j->not_sent);
    sl_job_unplace(s, j);
    sl_job_untrack(s, j);
    rc = sl_outbox_emit(s, SL_MSG_RESULT, topic, j->id, value, seq);
    sl_job_free(j);
    return rc;
}

sl_err_t sl_outcome_fail(sl_sched_t *s, job_t *j, sl_status_t status, sl_errtype_t type,
                         sl_reason_t reason, sl_decision_t decision, int retryable,
                         const char *message, int64_t now_ms)
{
    outcome_t o;
    sl_outcome_init(&o, status);
    sl_outcome_error(&o, type, reason, decision);
    o.retryable = retryable;
    snprintf(o.err_message, sizeof o.err_message, "%s", message);
    if (j->deployment >= 0)
        o.deployment = s->cfg->deployments[j->deployment].name;
    return sl_outcome_finish(s, j, &o, now_ms);
}

sl_err_t sl_outcome_fail_quota(sl_sched_t *s, job_t *j, int b, int64_t wait_ms, int64_t now_ms)
{
    char scope[256];
    const char *name;
    sl_buckets_split_id(sl_ledger_id(s->ledger, b), scope, sizeof scope, &name);
    outcome_t o;
    sl_outcome_init(&o, SL_STATUS_REJECTED);
    sl_outcome_error(&o, SL_ERRTYPE_POLICY, SL_REASON_QUOTA_EXHAUSTED,
                     SL_DECISION_REJECTED_LOCALLY);
    o.limiter = sl_ledger_id(s->ledger, b);
    o.scope = scope;
    o.retry_after_ms = wait_ms != INT64_MAX ? wait_ms : -1;
    if (wait_ms != INT64_MAX)
        snprintf(o.err_message, sizeof o.err_message,
                 "quota %s is used up until it resets in %lld ms, after the job's deadline",
                 o.limiter, (long long)wait_ms);
    else
        snprintf(o.err_message, sizeof o.err_message,
                 "quota %s cannot hold this job before the job's deadline", o.limiter);
    return sl_outcome_finish(s, j, &o, now_ms);
}

sl_err_t sl_outcome_fail_orphan(sl_sched_t *s, job_t *j, sl_status_t status, int64_t now_ms)
{
    if (sl_job_res_id(j)[0] != '\0') {
        sl_err_t rc = sl_store_res_close(s->store, sl_job_res_id(j), "expired", -1, -1, -1,
                                         "config_changed", now_ms, NULL, 0);
        if (rc != SL_OK)
            return rc;
    }
    outcome_t o;
    sl_outcome_init(&o, status);
    sl_outcome_error(&o, SL_ERRTYPE_INVALID_REQUEST, SL_REASON_UNKNOWN_TENANT_OR_ROUTE,
                     SL_DECISION_REJECTED_LOCALLY);
    snprintf(o.err_message, sizeof o.err_message,
             "the scheduler's config does not know tenant \"%.100s\" or route \"%.100s\"",
             sl_job_orphan_tenant(j) ? sl_job_orphan_tenant(j) : "?",
             sl_job_orphan_route(j) ? sl_job_orphan_route(j) : "?");
    return sl_outcome_finish(s, j, &o, now_ms);
}

sl_err_t sl_outcome_fail_orphans(sl_sched_t *s, int64_t now_ms)
{
    sl_err_t rc = SL_OK;
    while (rc == SL_OK && s->orphans.n > 0)
        rc =
            sl_outcome_fail_orphan(s, s->orphans.items[s->orphans.n - 1], SL_STATUS_FAILED, now_ms);
    return rc;
}
