/* lease.c - the dispatch message and the lease's bookkeeping (see lease.h).
 */
#include "lease.h"

#include <stdlib.h>

#include "job.h"
#include "msg_dispatch.h"
#include "outbox.h"
#include "pbatch.h"
#include "reservation.h"
#include "retry.h"
#include "store.h"

/* The dispatch of j's current lease, issued at issued_ms, assembled as text around the stored
 * request body (common/msg_dispatch.h). The dispatcher sets the deployment's model itself. */
static sl_err_t build_dispatch(sl_sched_t *s, const job_t *j, int64_t issued_ms, int64_t send_at_ms,
                               const char *request_json, char **value)
{
    sl_msg_dispatch_t msg = {.job_id = j->id,
                             .attempt = j->attempts,
                             .reservation_id = j->lease->res_id,
                             .lease_expires_ms = j->lease->lease_expires_ms,
                             .issued_ms = issued_ms,
                             .send_at_ms = send_at_ms,
                             .deployment = s->cfg->deployments[j->deployment].name,
                             .idempotency_key = sl_job_idem(j),
                             .tenant = s->cfg->tenants[j->tenant].name};
    return sl_msg_dispatch_build(&msg, request_json, value);
}

sl_err_t sl_lease_resend(sl_sched_t *s, job_t *j)
{
    char *request_json = NULL;
    sl_err_t rc = sl_store_job_parts(s->store, j->id, &request_json, NULL);
    if (rc == SL_OK && request_json == NULL)
        rc = SL_EDB;
    char *value = NULL;
    if (rc == SL_OK)
        rc = build_dispatch(s, j, j->lease->dispatched_ms, 0, request_json, &value);
    free(request_json);
    if (rc != SL_OK)
        return rc;
    return sl_outbox_emit(s, SL_MSG_DISPATCH, s->cfg->kafka.topic_dispatch, j->id, value, 0);
}

/* j, leased to deployment d, goes into the leased list and is counted. */
static sl_err_t mark_leased(sl_sched_t *s, job_t *j, int d, int64_t now_ms)
{
    j->state = J_LEASED;
    sl_err_t rc = sl_job_list_add(&s->leased, j);
    if (rc != SL_OK)
        return rc;
    s->st.dispatched++;
    sl_retry_count_lease(s, j, now_ms);
    if (s->obs.leased != NULL)
        s->obs.leased(s->obs_arg, j->tenant, j->route, j->cls, d,
                      (double)(sl_job_held(j)->est_input + sl_job_held(j)->est_output),
                      j->attempts == 1 ? now_ms - j->submitted_ms : -1);
    return SL_OK;
}

sl_err_t sl_lease_grant(sl_sched_t *s, job_t *j, int d, int64_t now_ms)
{
    const sl_config_t *cfg = s->cfg;
    const sl_deployment_cfg_t *dc = &cfg->deployments[d];
    job_lease_t *l = sl_job_lease(j);
    if (l == NULL)
        return SL_ENOMEM;
    sl_reservation_new_id(s, now_ms, l->res_id);
    j->attempts++;
    j->deployment = d;
    j->pbatch = SL_IS_BATCH_DEPLOYMENT(cfg, d);
    j->cancel_asked = 0;
    /* A provider batch answers within its window: the batch's own steps (pbatch.c) end the
     * lease sooner when something goes wrong; this is the last resort. */
    l->lease_expires_ms =
        now_ms + (j->pbatch ? dc->batch.linger_ms + dc->batch.window_ms + 4 * dc->batch.answer_ms
                            : cfg->lease_ms);
    l->dispatched_ms = now_ms;
    l->holder = 0; /* until a dispatcher's heartbeat names this attempt */
    const held_t *h = sl_job_held(j);
    const char *bucket_ids[MAX_CHARGES];
    double amounts[MAX_CHARGES];
    const char *rules[MAX_CHARGES];
    for (int i = 0; i < h->n; i++) {
        bucket_ids[i] = sl_ledger_id(s->ledger, h->ch[i].bucket);
        amounts[i] = h->ch[i].amount;
        rules[i] = sl_charge_rule_name((sl_charge_rule_t)h->rule[i]);
    }
    sl_store_res_t res = {
        .reservation_id = l->res_id,
        .job_id = j->id,
        .tenant = cfg->tenants[j->tenant].name,
        .route = cfg->routes[j->route].name,
        .cls = sl_class_name((sl_class_t)j->cls),
        .deployment = dc->name,
        .idempotency_key = sl_job_idem(j),
        .attempt = j->attempts,
        .est_input = h->est_input,
        .est_output = h->est_output,
        .created_ms = now_ms,
        .expires_ms = l->lease_expires_ms,
        .queue_deadline_ms = j->deadline_ms,
    };
    sl_err_t rc = sl_store_res_open(s->store, &res, h->n, bucket_ids, amounts, rules);
    if (rc == SL_OK)
        rc = sl_store_job_lease(s->store, j->id, j->attempts, l->lease_expires_ms, l->res_id,
                                dc->name, now_ms);
    if (rc == SL_OK && j->pbatch) {
        /* Into the open batch of its twin and tenant instead of a dispatch of its own. */
        rc = mark_leased(s, j, d, now_ms);
        return rc == SL_OK ? sl_pbatch_add(s, j, d, now_ms) : rc;
    }
    char *request_json = NULL;
    if (rc == SL_OK)
        rc = sl_store_job_parts(s->store, j->id, &request_json, NULL);
    if (rc == SL_OK && request_json == NULL)
        rc = SL_EDB;
    if (rc != SL_OK)
        return rc;
    /* A request that needs a provider-side bucket's whole burst is paced
     * (sl_capacity_pace_ms), so that it reaches the provider as late after its admission as
     * the dispatch before it may have. */
    int whole = 0;
    for (int i = 0; i < h->n && !whole; i++) {
        int b = h->ch[i].bucket;
        whole = b >= 0 && s->binfo[b].provider_side &&
                sl_ledger_takes_whole(s->ledger, b, h->ch[i].amount);
    }
    int64_t pace = whole ? sl_capacity_pace_ms(cfg, d) : 0;
    char *value = NULL;
    rc = build_dispatch(s, j, now_ms, pace > 0 ? now_ms + pace : 0, request_json, &value);
    free(request_json);
    if (rc != SL_OK)
        return rc;
    rc = mark_leased(s, j, d, now_ms);
    if (rc != SL_OK) {
        free(value);
        return rc;
    }
    return sl_outbox_emit(s, SL_MSG_DISPATCH, cfg->kafka.topic_dispatch, j->id, value, 0);
}
