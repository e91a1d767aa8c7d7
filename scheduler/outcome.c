/* outcome.c - finishing a job and building its result (see outcome.h).
 */
#include "outcome.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buckets.h"
#include "job.h"
#include "outbox.h"
#include "store.h"

void sl_outcome_init(outcome_t *o, const char *status)
{
    memset(o, 0, sizeof *o);
    o->status = status;
    o->retry_after_ms = -1;
}

sl_err_t sl_outcome_finish(sl_sched_t *s, job_t *j, const outcome_t *o, int64_t now_ms)
{
    json_t *meta = NULL;
    char *meta_json = NULL;
    if (sl_store_job_parts(s->store, j->id, NULL, &meta_json) == SL_OK && meta_json != NULL)
        meta = json_loads(meta_json, 0, NULL);
    free(meta_json);
    const sl_config_t *cfg = s->cfg;
    json_t *res =
        json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:b, s:I}", "v", 1, "job_id", j->id,
                  "idempotency_key", j->idem ? j->idem : j->id, "tenant",
                  j->orphan_tenant ? j->orphan_tenant : cfg->tenants[j->tenant].name, "route",
                  j->orphan_route ? j->orphan_route
                                  : cfg->routes[j->home_route >= 0 ? j->home_route : j->route].name,
                  "class", sl_class_name((sl_class_t)j->cls), "status", o->status, "attempts",
                  j->attempts - j->not_sent, "fallback_used", j->route != j->home_route,
                  "finished_ms", (json_int_t)now_ms);
    if (res == NULL) {
        json_decref(meta);
        return SL_ENOMEM;
    }
    json_object_set_new(res, "deployment",
                        o->deployment ? json_string(o->deployment) : json_null());
    json_object_set(res, "response", o->response ? o->response : json_null());
    json_object_set(res, "usage", o->usage ? o->usage : json_null());
    json_object_set_new(res, "metadata", meta ? meta : json_null());
    double queued = j->dispatched_ms > 0 ? (double)(j->dispatched_ms - j->submitted_ms) : 0;
    json_object_set_new(res, "timings",
                        json_pack("{s:f, s:f, s:f}", "queued_ms", queued, "provider_ms",
                                  o->provider_ms, "total_ms", (double)(now_ms - j->submitted_ms)));
    if (o->err_type != NULL) {
        /* sl_job_flags: a restored job's flags are read from its stored message when not known. */
        int fallback_allowed = (sl_job_flags(s, j) & JF_FALLBACK) != 0;
        json_t *e =
            json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "type", o->err_type, "reason",
                      o->err_reason, "message", o->err_message, "gateway_decision", o->decision,
                      "retryable", o->retryable, "fallback_allowed", fallback_allowed);
        json_object_set_new(e, "limiter", o->limiter ? json_string(o->limiter) : json_null());
        json_object_set_new(e, "scope", o->scope ? json_string(o->scope) : json_null());
        json_object_set_new(e, "retry_after_ms",
                            o->retry_after_ms >= 0 ? json_integer(o->retry_after_ms) : json_null());
        json_object_set_new(e, "trace_id", json_string(j->id));
        json_object_set_new(res, "error", e);
    } else {
        json_object_set_new(res, "error", json_null());
    }
    char *value = json_dumps(res, JSON_COMPACT);
    json_decref(res);
    if (value == NULL)
        return SL_ENOMEM;
    int64_t seq = 0;
    sl_err_t rc = sl_store_job_finish(s->store, j->id, o->status, value, cfg->kafka.topic_results,
                                      now_ms, &seq);
    if (rc != SL_OK) {
        free(value);
        return rc;
    }
    if (strcmp(o->status, "succeeded") == 0)
        s->st.succeeded++;
    else if (strcmp(o->status, "expired") == 0)
        s->st.expired++;
    else if (strcmp(o->status, "cancelled") == 0)
        s->st.cancelled++;
    else
        s->st.failed++;
    if (s->obs.finished != NULL)
        s->obs.finished(s->obs_arg, j->cls, o->status, j->attempts - j->not_sent);
    sl_job_unplace(s, j);
    if (sl_hmap_get(s->jobs, j->id) == j)
        sl_hmap_del(s->jobs, j->id);
    rc = sl_outbox_emit(s, SL_MSG_RESULT, cfg->kafka.topic_results, j->id, value, seq);
    sl_job_free(j);
    return rc;
}

sl_err_t sl_outcome_fail(sl_sched_t *s, job_t *j, const char *status, const char *type,
                         const char *reason, const char *decision, int retryable,
                         const char *message, int64_t now_ms)
{
    outcome_t o;
    sl_outcome_init(&o, status);
    o.err_type = type;
    o.err_reason = reason;
    o.decision = decision;
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
    sl_outcome_init(&o, "rejected");
    o.err_type = "policy";
    o.err_reason = "quota_exhausted";
    o.decision = "rejected_locally";
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

sl_err_t sl_outcome_fail_orphan(sl_sched_t *s, job_t *j, const char *status, int64_t now_ms)
{
    if (j->res_id[0] != '\0') {
        sl_err_t rc = sl_store_res_close(s->store, j->res_id, "expired", -1, -1, -1,
                                         "config_changed", now_ms, NULL, 0);
        if (rc != SL_OK)
            return rc;
    }
    outcome_t o;
    sl_outcome_init(&o, status);
    o.err_type = "invalid_request";
    o.err_reason = "unknown_tenant_or_route";
    o.decision = "rejected_locally";
    snprintf(o.err_message, sizeof o.err_message,
             "the scheduler's config does not know tenant \"%.100s\" or route \"%.100s\"",
             j->orphan_tenant ? j->orphan_tenant : "?", j->orphan_route ? j->orphan_route : "?");
    return sl_outcome_finish(s, j, &o, now_ms);
}

sl_err_t sl_outcome_fail_orphans(sl_sched_t *s, int64_t now_ms)
{
    sl_err_t rc = SL_OK;
    while (rc == SL_OK && s->orphans.n > 0)
        rc = sl_outcome_fail_orphan(s, s->orphans.items[s->orphans.n - 1], "failed", now_ms);
    return rc;
}
