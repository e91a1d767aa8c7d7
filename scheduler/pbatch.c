/* pbatch.c - provider batches (see pbatch.h).
 */
#include "pbatch.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "hmap.h"
#include "job.h"
#include "jsonschema.h"
#include "log.h"
#include "outbox.h"
#include "outcome.h"
#include "reservation.h"
#include "retry.h"
#include "store.h"
#include "util.h"

typedef enum { PB_OPEN = 0, PB_CREATING, PB_RUNNING, PB_COLLECTING, PB_STATES } pb_state_t;

static const char *const state_names[PB_STATES] = {"open", "creating", "running", "collecting"};

/* The largest op message: the broker's message size (common/kafka.c sets 16 MB). */
enum { OP_MAX_BYTES = 16 * 1000 * 1000 };

/* A job of a batch: its id and the reservation of the lease that put it there. A job whose
 * lease expired and that was leased again (into another batch, or online) is no longer this
 * batch's, even though its id is still listed. */
typedef struct {
    char *id;
    char res[33];
} pb_entry_t;

struct pbatch {
    char id[48];     /* sluice's batch id: the marker the provider's batch carries */
    int dep, tenant; /* the batch twin; the tenant of every job */
    pb_state_t state;
    char provider_id[128];      /* "" until a dispatcher reports it */
    int64_t opened_ms, next_ms; /* next_ms: when its next step is due */
    int64_t bytes;              /* its jobs' message bytes */
    int cancelling;             /* every job asked to be cancelled: the provider was asked */
    int refused;                /* its last step was refused: the next one is a planned retry */
    int n;
    size_t cap;
    pb_entry_t *jobs; /* in the order they joined (and were sent) */
};

static void pb_free(pbatch_t *b)
{
    if (b == NULL)
        return;
    for (int i = 0; i < b->n; i++)
        free(b->jobs[i].id);
    free(b->jobs);
    free(b);
}

void sl_pbatch_free_all(sl_sched_t *s)
{
    for (int i = 0; i < s->npb; i++)
        pb_free(s->pb[i]);
    free(s->pb);
    s->pb = NULL;
    s->npb = 0;
    s->cappb = 0;
}

void sl_pbatch_counts(const sl_sched_t *s, int64_t counts[4])
{
    for (int k = 0; k < 4; k++)
        counts[k] = 0;
    for (int i = 0; i < s->npb; i++)
        counts[s->pb[i]->state]++;
}

static sl_err_t pb_push_job(pbatch_t *b, const char *id, const char *res)
{
    if (sl_grow((void **)&b->jobs, sizeof *b->jobs, &b->cap, (size_t)b->n + 1, 1000000) != SL_OK)
        return SL_ENOMEM;
    if ((b->jobs[b->n].id = strdup(id)) == NULL)
        return SL_ENOMEM;
    snprintf(b->jobs[b->n].res, sizeof b->jobs[b->n].res, "%s", res);
    b->n++;
    return SL_OK;
}

static pbatch_t *pb_new(sl_sched_t *s, int dep, int tenant, int64_t now_ms)
{
    if (sl_grow((void **)&s->pb, sizeof *s->pb, &s->cappb, (size_t)s->npb + 1, 1000000) != SL_OK)
        return NULL;
    pbatch_t *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    /* Time first, so the provider's lists (newest first) and the store read in order. */
    snprintf(b->id, sizeof b->id, "pb-%llx-%08x", (unsigned long long)now_ms,
             (unsigned)randombytes_random());
    b->dep = dep;
    b->tenant = tenant;
    b->opened_ms = now_ms;
    b->next_ms = now_ms + s->cfg->deployments[dep].batch.linger_ms;
    s->pb[s->npb++] = b;
    return b;
}

/* Takes b out of s and frees it. */
static void pb_drop(sl_sched_t *s, pbatch_t *b)
{
    for (int i = 0; i < s->npb; i++) {
        if (s->pb[i] == b) {
            s->pb[i] = s->pb[--s->npb];
            break;
        }
    }
    pb_free(b);
}

static pbatch_t *pb_find(const sl_sched_t *s, const char *id)
{
    for (int i = 0; i < s->npb; i++) {
        if (strcmp(s->pb[i]->id, id) == 0)
            return s->pb[i];
    }
    return NULL;
}

/* The job of b's entry i when the lease that put it in b is still its lease, else NULL. */
static job_t *pb_job(sl_sched_t *s, const pbatch_t *b, int i)
{
    job_t *j = sl_hmap_get(s->jobs, b->jobs[i].id);
    if (j == NULL || j->state != J_LEASED || !j->pbatch || j->deployment != b->dep ||
        strcmp(j->lease->res_id, b->jobs[i].res) != 0)
        return NULL;
    return j;
}

/* The batch that holds j's current lease, or NULL. */
static pbatch_t *pb_of_job(const sl_sched_t *s, const job_t *j)
{
    for (int i = 0; i < s->npb; i++) {
        pbatch_t *b = s->pb[i];
        if (b->dep != j->deployment || b->tenant != j->tenant)
            continue;
        for (int k = 0; k < b->n; k++) {
            if (strcmp(b->jobs[k].id, j->id) == 0 && strcmp(b->jobs[k].res, j->lease->res_id) == 0)
                return b;
        }
    }
    return NULL;
}

/* j's lease ended without a call the provider ran: its charges come back and it goes back in
 * line after delay_ms (a later batch, or online when its deadline is near: routes[].batch). */
static sl_err_t unsent(sl_sched_t *s, job_t *j, int64_t delay_ms, const char *why, int64_t now_ms)
{
    j->not_sent++;
    sl_err_t rc = sl_reservation_settle(s, j, END_NOT_SENT, "reconciled", -1, -1, -1, "not_sent",
                                        now_ms, NULL);
    if (rc == SL_OK)
        rc = sl_retry_or_fail(s, j, delay_ms, SL_REASON_NOT_SENT, why, now_ms);
    return rc;
}

/* j, in a batch not sent or cancelled at the provider, ends as cancelled. */
sl_err_t sl_pbatch_cancelled(sl_sched_t *s, job_t *j, int64_t now_ms)
{
    sl_err_t rc = sl_reservation_settle(s, j, END_NOT_SENT, "reconciled", -1, -1, -1, "cancelled",
                                        now_ms, NULL);
    if (rc != SL_OK)
        return rc;
    outcome_t o;
    sl_outcome_init(&o, SL_STATUS_CANCELLED);
    return sl_outcome_finish(s, j, &o, now_ms);
}

/* ---- ops ---------------------------------------------------------------------------------- */

/* Appends s as a JSON string. */
static sl_err_t add_json_str(sl_buf_t *out, const char *s)
{
    json_t *v = json_string(s);
    char *text = v != NULL ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
    json_decref(v);
    if (text == NULL)
        return SL_ENOMEM;
    sl_err_t rc = sl_buf_adds(out, text);
    free(text);
    return rc;
}

/* Builds and emits op of b. create and collect list the batch's jobs still leased to it (create
 * with each stored request, as is); *njobs gets how many (an op with none is not sent). */
static sl_err_t emit_op(sl_sched_t *s, pbatch_t *b, const char *op, int64_t now_ms, int *njobs)
{
    const sl_config_t *cfg = s->cfg;
    int with_jobs = strcmp(op, "create") == 0 || strcmp(op, "collect") == 0;
    int with_request = strcmp(op, "create") == 0;
    sl_buf_t out;
    sl_buf_init(&out, OP_MAX_BYTES);
    sl_err_t rc =
        sl_buf_addf(&out, "{\"v\":1,\"op\":\"%s\",\"batch_id\":\"%s\",\"deployment\":", op, b->id);
    if (rc == SL_OK)
        rc = add_json_str(&out, cfg->deployments[b->dep].name);
    if (rc == SL_OK)
        rc = sl_buf_adds(&out, ",\"tenant\":");
    if (rc == SL_OK)
        rc = add_json_str(&out, cfg->tenants[b->tenant].name);
    if (rc == SL_OK)
        rc = sl_buf_addf(&out, ",\"issued_ms\":%lld", (long long)now_ms);
    if (rc == SL_OK && b->provider_id[0] != '\0') {
        rc = sl_buf_adds(&out, ",\"provider_batch_id\":");
        if (rc == SL_OK)
            rc = add_json_str(&out, b->provider_id);
    }
    int n = 0;
    if (rc == SL_OK && with_jobs)
        rc = sl_buf_adds(&out, ",\"jobs\":[");
    for (int i = 0; rc == SL_OK && with_jobs && i < b->n; i++) {
        job_t *j = pb_job(s, b, i);
        if (j == NULL)
            continue;
        rc = sl_buf_addf(&out, "%s{\"job_id\":\"%s\",\"attempt\":%d,\"reservation_id\":\"%s\"",
                         n > 0 ? "," : "", j->id, j->attempts, j->lease->res_id);
        if (rc == SL_OK && with_request) {
            char *request = NULL;
            rc = sl_store_job_parts(s->store, j->id, &request, NULL);
            if (rc == SL_OK && request == NULL)
                rc = SL_EDB;
            if (rc == SL_OK)
                rc = sl_buf_adds(&out, ",\"request\":");
            if (rc == SL_OK)
                rc = sl_buf_adds(&out, request);
            free(request);
        }
        if (rc == SL_OK)
            rc = sl_buf_adds(&out, "}");
        n++;
    }
    if (rc == SL_OK && with_jobs)
        rc = sl_buf_adds(&out, "]");
    if (rc == SL_OK)
        rc = sl_buf_adds(&out, "}");
    *njobs = n;
    if (rc != SL_OK || (with_jobs && n == 0)) {
        sl_buf_free(&out);
        return rc;
    }
    char *value = sl_buf_take(&out, NULL);
    if (value == NULL)
        return SL_ENOMEM;
    return sl_outbox_emit(s, SL_MSG_DISPATCH, cfg->kafka.topic_dispatch, b->id, value, 0);
}

/* The leases of b's jobs last a whole window from now (stored too): until a batch is created,
 * a create the provider keeps refusing (a create storm's 429s) must not let them expire, or a
 * job would be leased again into another batch and then run in both; once it is created, the
 * provider answers within its window. Called when b is sent, at each create again, when the
 * provider has it (from now), and when a create is refused (from the planned retry). */
static sl_err_t hold_leases(sl_sched_t *s, const pbatch_t *b, int64_t from_ms, int64_t now_ms)
{
    const sl_deployment_cfg_t *dc = &s->cfg->deployments[b->dep];
    int64_t until = from_ms + dc->batch.window_ms + 4 * dc->batch.answer_ms;
    for (int i = 0; i < b->n; i++) {
        job_t *j = pb_job(s, b, i);
        if (j == NULL || j->lease->lease_expires_ms >= until)
            continue;
        j->lease->lease_expires_ms = until;
        sl_err_t rc = sl_store_job_lease(s->store, j->id, j->attempts, until, j->lease->res_id,
                                         dc->name, now_ms);
        if (rc != SL_OK)
            return rc;
    }
    return SL_OK;
}

/* The store's row of b: its state, and its jobs (written when it is sent). */
static sl_err_t save(sl_sched_t *s, const pbatch_t *b, int64_t now_ms)
{
    json_t *ids = json_array();
    for (int i = 0; ids != NULL && i < b->n; i++) {
        if (json_array_append_new(ids, json_pack("[s,s]", b->jobs[i].id, b->jobs[i].res)) != 0) {
            json_decref(ids);
            ids = NULL;
        }
    }
    char *text = ids != NULL ? json_dumps(ids, JSON_COMPACT) : NULL;
    json_decref(ids);
    if (text == NULL)
        return SL_ENOMEM;
    sl_store_pbatch_t row = {.batch_id = b->id,
                             .deployment = s->cfg->deployments[b->dep].name,
                             .tenant = s->cfg->tenants[b->tenant].name,
                             .state = state_names[b->state],
                             .provider_id = b->provider_id,
                             .created_ms = b->opened_ms,
                             .updated_ms = now_ms,
                             .jobs = text};
    sl_err_t rc = sl_store_pbatch_put(s->store, &row);
    free(text);
    return rc;
}

/* Sends an open batch: stored with its jobs, then the create op. A batch whose jobs all left
 * it (cancelled) is dropped. */
static sl_err_t send_batch(sl_sched_t *s, pbatch_t *b, int64_t now_ms)
{
    b->state = PB_CREATING;
    b->next_ms = now_ms + s->cfg->deployments[b->dep].batch.answer_ms;
    int n = 0;
    sl_err_t rc = emit_op(s, b, "create", now_ms, &n);
    if (rc != SL_OK)
        return rc;
    if (n == 0) {
        pb_drop(s, b);
        return SL_OK;
    }
    rc = hold_leases(s, b, now_ms, now_ms);
    if (rc != SL_OK)
        return rc;
    s->st.pbatches_sent++;
    s->st.pbatch_jobs += n;
    sl_logf(SL_LOG_INFO, "batch", b->id, "provider batch %s of %d job(s) sent to %s", b->id, n,
            s->cfg->deployments[b->dep].name);
    return save(s, b, now_ms);
}

/* ---- taking jobs in --------------------------------------------------------------------- */

sl_err_t sl_pbatch_add(sl_sched_t *s, job_t *j, int d, int64_t now_ms)
{
    pbatch_t *b = NULL;
    for (int i = 0; i < s->npb && b == NULL; i++) {
        pbatch_t *x = s->pb[i];
        if (x->state == PB_OPEN && x->dep == d && x->tenant == j->tenant)
            b = x;
    }
    if (b == NULL && (b = pb_new(s, d, j->tenant, now_ms)) == NULL)
        return SL_ENOMEM;
    sl_err_t rc = pb_push_job(b, j->id, j->lease->res_id);
    if (rc != SL_OK)
        return rc;
    b->bytes += j->bytes;
    const sl_batch_cfg_t *bc = &s->cfg->deployments[d].batch;
    if (b->n >= bc->max_requests || b->bytes >= bc->max_bytes)
        return send_batch(s, b, now_ms);
    return SL_OK;
}

/* A batch none of whose jobs is still its own (each ended or was leased again elsewhere):
 * nothing is left to collect. */
static sl_err_t drop_empty(sl_sched_t *s, pbatch_t *b)
{
    sl_logf(SL_LOG_INFO, "batch", b->id,
            "provider batch %s: none of its jobs waits for it any more", b->id);
    sl_err_t rc = sl_store_pbatch_del(s->store, b->id);
    if (rc == SL_OK)
        pb_drop(s, b);
    return rc;
}

/* ---- the tick --------------------------------------------------------------------------- */

/* After a restart: a lease to a batch twin that no stored batch holds was in a batch never
 * sent; it goes back in line. The stored batches' entries are looked up by job id (one pass
 * over them, not one per lease: a restart may find 100,000 jobs in batches). */
static sl_err_t release_unsent(sl_sched_t *s, int64_t now_ms)
{
    /* job id -> the entry of a stored batch that its current lease put there (an older entry
     * of the same job, in a batch its lease left, is not the job's) */
    sl_hmap_t *held = sl_hmap_new_borrowed();
    if (held == NULL)
        return SL_ENOMEM;
    sl_err_t rc = SL_OK;
    for (int i = 0; rc == SL_OK && i < s->npb; i++) {
        for (int k = 0; rc == SL_OK && k < s->pb[i]->n; k++) {
            if (pb_job(s, s->pb[i], k) != NULL)
                rc = sl_hmap_put(held, s->pb[i]->jobs[k].id, &s->pb[i]->jobs[k]);
        }
    }
    for (int i = s->leased.n - 1; rc == SL_OK && i >= 0; i--) {
        if (i >= s->leased.n)
            continue;
        job_t *j = s->leased.items[i];
        if (!j->pbatch || sl_hmap_get(held, j->id) != NULL)
            continue;
        rc = unsent(s, j, 0, "its provider batch was never sent (restart)", now_ms);
    }
    sl_hmap_free(held);
    return rc;
}

sl_err_t sl_pbatch_tick(sl_sched_t *s, int64_t now_ms, int64_t *next_ms)
{
    sl_err_t rc = SL_OK;
    if (!s->pb_restored) {
        rc = release_unsent(s, now_ms);
        if (rc != SL_OK)
            return rc;
        s->pb_restored = 1;
    }
    for (int i = s->npb - 1; rc == SL_OK && i >= 0; i--) {
        if (i >= s->npb)
            continue;
        pbatch_t *b = s->pb[i];
        const sl_batch_cfg_t *bc = &s->cfg->deployments[b->dep].batch;
        if (b->next_ms > now_ms) {
            if (b->next_ms < *next_ms)
                *next_ms = b->next_ms;
            continue;
        }
        int n = 0;
        switch (b->state) {
        case PB_OPEN:
            rc = send_batch(s, b, now_ms);
            continue; /* b may be gone */
        case PB_CREATING:
            if (b->refused)
                sl_logf(SL_LOG_INFO, "batch", b->id, "provider batch %s: its create again", b->id);
            else
                sl_logf(SL_LOG_WARN, "batch", b->id,
                        "provider batch %s: no dispatcher answered its create; sent again", b->id);
            b->refused = 0;
            rc = emit_op(s, b, "create", now_ms, &n);
            if (rc == SL_OK && n == 0) {
                rc = drop_empty(s, b);
                continue; /* b is gone */
            }
            if (rc == SL_OK)
                rc = hold_leases(s, b, now_ms, now_ms);
            b->next_ms = now_ms + bc->answer_ms;
            break;
        case PB_RUNNING:
            rc = emit_op(s, b, b->cancelling ? "cancel" : "poll", now_ms, &n);
            b->next_ms = now_ms + bc->poll_ms;
            break;
        default:
            sl_logf(SL_LOG_WARN, "batch", b->id,
                    "provider batch %s: no dispatcher answered its collect; sent again", b->id);
            rc = emit_op(s, b, "collect", now_ms, &n);
            b->next_ms = now_ms + bc->answer_ms;
            if (rc == SL_OK && n == 0) {
                rc = drop_empty(s, b);
                continue; /* b is gone */
            }
            break;
        }
        if (rc == SL_OK && b->next_ms < *next_ms)
            *next_ms = b->next_ms;
    }
    return rc;
}

/* ---- events ----------------------------------------------------------------------------- */

int sl_pbatch_is_event(const json_t *doc)
{
    const char *kind = json_string_value(json_object_get(doc, "kind"));
    return kind != NULL && strcmp(kind, "batch") == 0;
}

/* Every job of b still leased to it goes back in line (the provider ran none of them). */
static sl_err_t all_unsent(sl_sched_t *s, pbatch_t *b, int64_t delay_ms, const char *why,
                           int64_t now_ms)
{
    for (int i = 0; i < b->n; i++) {
        job_t *j = pb_job(s, b, i);
        if (j == NULL)
            continue;
        sl_err_t rc =
            b->cancelling ? sl_pbatch_cancelled(s, j, now_ms) : unsent(s, j, delay_ms, why, now_ms);
        if (rc != SL_OK)
            return rc;
    }
    return SL_OK;
}

/* The batch's results were reported: the jobs without a line run again; the others' lines
 * (usage events, which may come after this event: they travel on other partitions) settle
 * them, or their leases expire answer_ms from now. */
static sl_err_t collected(sl_sched_t *s, pbatch_t *b, const json_t *missing, int64_t now_ms)
{
    size_t k;
    json_t *v;
    json_array_foreach(missing, k, v)
    {
        const char *id = json_string_value(v);
        for (int i = 0; id != NULL && i < b->n; i++) {
            if (strcmp(b->jobs[i].id, id) != 0)
                continue;
            job_t *j = pb_job(s, b, i);
            sl_err_t rc = SL_OK;
            if (j != NULL)
                rc = b->cancelling
                         ? sl_pbatch_cancelled(s, j, now_ms)
                         : unsent(s, j, 0, "the provider batch had no result for it", now_ms);
            if (rc != SL_OK)
                return rc;
            break;
        }
    }
    int64_t until = now_ms + s->cfg->deployments[b->dep].batch.answer_ms;
    for (int i = 0; i < b->n; i++) {
        job_t *j = pb_job(s, b, i);
        if (j != NULL && j->lease->lease_expires_ms > until)
            j->lease->lease_expires_ms = until;
    }
    return SL_OK;
}

sl_err_t sl_pbatch_on_event(sl_sched_t *s, json_t *doc, int64_t now_ms)
{
    char why[512];
    if (s->pbatch_schema == NULL ||
        sl_schema_validate(s->pbatch_schema, doc, why, sizeof why) != SL_OK) {
        s->st.usage_invalid++;
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN, "invalid batch event ignored: %s", why);
        return SL_OK;
    }
    const char *id = json_string_value(json_object_get(doc, "batch_id"));
    const char *dep = json_string_value(json_object_get(doc, "deployment"));
    const char *state = json_string_value(json_object_get(doc, "state"));
    const char *pid = json_string_value(json_object_get(doc, "provider_batch_id"));
    const char *error = json_string_value(json_object_get(doc, "error"));
    pbatch_t *b = pb_find(s, id);
    if (b == NULL || strcmp(s->cfg->deployments[b->dep].name, dep) != 0 || b->state == PB_OPEN) {
        s->st.usage_stale++;
        return SL_OK;
    }
    const sl_batch_cfg_t *bc = &s->cfg->deployments[b->dep].batch;
    int64_t retry_after = json_integer_value(json_object_get(doc, "retry_after_ms"));
    if (pid != NULL && b->provider_id[0] != '\0' && strcmp(pid, b->provider_id) != 0) {
        /* Another provider batch under our marker: it can only be a copy made by a create
         * whose answer was lost where the provider offers no label to find it by. */
        sl_logf(SL_LOG_WARN, "batch", b->id,
                "provider batch %s: an event names provider batch %s, not %s; ignored", b->id, pid,
                b->provider_id);
        s->st.usage_stale++;
        return SL_OK;
    }
    sl_err_t rc = SL_OK;
    if (strcmp(state, "refused") == 0) {
        /* Tried again at its next step; a create refused (a create storm's 429, or the
         * provider unreachable) waits at least what the provider asked. */
        int64_t wait = retry_after > bc->answer_ms / 4 ? retry_after : bc->answer_ms / 4;
        if (b->state == PB_CREATING) {
            b->next_ms = now_ms + (wait > 0 ? wait : 1);
            b->refused = 1;
            sl_err_t hrc = hold_leases(s, b, b->next_ms, now_ms);
            if (hrc != SL_OK)
                return hrc;
        }
        sl_logf(SL_LOG_INFO, "batch", b->id, "provider batch %s: %s refused (%s); again in %lld ms",
                b->id, json_string_value(json_object_get(doc, "op")), error ? error : "",
                (long long)(b->next_ms - now_ms));
        return SL_OK;
    }
    if (strcmp(state, "failed") == 0) {
        if (b->state != PB_CREATING && b->state != PB_RUNNING) {
            s->st.usage_stale++;
            return SL_OK;
        }
        s->st.pbatches_failed++;
        sl_logf(SL_LOG_WARN, "batch", b->id,
                "provider batch %s failed at the provider (%s): its %d job(s) run again", b->id,
                error ? error : "no reason given", b->n);
        rc = all_unsent(s, b, bc->answer_ms, "the provider batch failed", now_ms);
        if (rc == SL_OK)
            rc = sl_store_pbatch_del(s->store, b->id);
        if (rc == SL_OK)
            pb_drop(s, b);
        return rc;
    }
    if (strcmp(state, "running") == 0 || strcmp(state, "ended") == 0) {
        if (pid == NULL || (b->state != PB_CREATING && b->state != PB_RUNNING)) {
            s->st.usage_stale++;
            return SL_OK;
        }
        snprintf(b->provider_id, sizeof b->provider_id, "%s", pid);
        if (b->state == PB_CREATING && (rc = hold_leases(s, b, now_ms, now_ms)) != SL_OK)
            return rc;
        if (strcmp(state, "running") == 0) {
            if (b->state == PB_CREATING)
                sl_logf(SL_LOG_INFO, "batch", b->id, "provider batch %s is %s at the provider",
                        b->id, pid);
            b->state = PB_RUNNING;
            b->next_ms = now_ms + bc->poll_ms;
            return sl_store_pbatch_state(s->store, b->id, "running", b->provider_id, now_ms);
        }
        b->state = PB_COLLECTING;
        b->next_ms = now_ms + bc->answer_ms;
        int n = 0;
        rc = emit_op(s, b, "collect", now_ms, &n);
        if (rc == SL_OK && n == 0)
            return drop_empty(s, b);
        if (rc == SL_OK)
            rc = sl_store_pbatch_state(s->store, b->id, "collecting", b->provider_id, now_ms);
        return rc;
    }
    /* collected */
    if (b->state != PB_COLLECTING) {
        s->st.usage_stale++;
        return SL_OK;
    }
    rc = collected(s, b, json_object_get(doc, "missing"), now_ms);
    if (rc == SL_OK)
        rc = sl_store_pbatch_del(s->store, b->id);
    if (rc == SL_OK) {
        s->st.pbatches_done++;
        sl_logf(SL_LOG_INFO, "batch", b->id, "provider batch %s: results collected", b->id);
        pb_drop(s, b);
    }
    return rc;
}

/* ---- cancels ---------------------------------------------------------------------------- */

sl_err_t sl_pbatch_cancel(sl_sched_t *s, job_t *j, int64_t now_ms, int *done)
{
    *done = 0;
    pbatch_t *b = pb_of_job(s, j);
    if (b == NULL)
        return SL_OK;
    if (b->state == PB_OPEN) {
        for (int i = 0; i < b->n; i++) {
            if (strcmp(b->jobs[i].id, j->id) == 0) {
                free(b->jobs[i].id);
                b->jobs[i] = b->jobs[--b->n];
                break;
            }
        }
        *done = 1;
        return sl_pbatch_cancelled(s, j, now_ms);
    }
    j->cancel_asked = 1;
    int asked = 0, live = 0;
    for (int i = 0; i < b->n; i++) {
        job_t *x = pb_job(s, b, i);
        live += x != NULL;
        asked += x != NULL && x->cancel_asked;
    }
    if (asked < live || b->cancelling) {
        sl_logf(SL_LOG_INFO, "job", j->id,
                "cancel of job %s: it is in provider batch %s, which a provider cancels only "
                "whole (%d of its %d jobs asked); it finishes normally unless all do",
                j->id, b->id, asked, live);
        return SL_OK;
    }
    b->cancelling = 1;
    sl_logf(SL_LOG_INFO, "batch", b->id,
            "every job of provider batch %s asked to be cancelled: cancelling it at the provider",
            b->id);
    if (b->state == PB_RUNNING)
        b->next_ms = now_ms; /* the cancel op goes at the next tick */
    return SL_OK;
}

/* ---- restart ---------------------------------------------------------------------------- */

typedef struct {
    sl_sched_t *s;
    sl_err_t rc;
} restore_arg_t;

static void restore_row(const sl_store_pbatch_t *row, void *arg)
{
    restore_arg_t *r = arg;
    sl_sched_t *s = r->s;
    if (r->rc != SL_OK)
        return;
    int dep = sl_config_deployment(s->cfg, row->deployment);
    int tenant = sl_config_tenant(s->cfg, row->tenant);
    json_t *ids = json_loads(row->jobs, 0, NULL);
    if (dep < 0 || !SL_IS_BATCH_DEPLOYMENT(s->cfg, dep) || tenant < 0 || !json_is_array(ids)) {
        /* Its jobs' leases then belong to no batch: they run again at once (release_unsent),
         * though the provider may still run this one: a twin removed from the config while its
         * batches run can run their jobs twice. */
        sl_warn("provider batch %s (%s, %s) is no longer in the config; its jobs run again (the "
                "provider may still run them too)",
                row->batch_id, row->deployment, row->tenant);
        json_decref(ids);
        return;
    }
    pbatch_t *b = pb_new(s, dep, tenant, row->created_ms);
    if (b == NULL) {
        json_decref(ids);
        r->rc = SL_ENOMEM;
        return;
    }
    snprintf(b->id, sizeof b->id, "%s", row->batch_id);
    snprintf(b->provider_id, sizeof b->provider_id, "%s", row->provider_id);
    b->state = strcmp(row->state, "running") == 0      ? PB_RUNNING
               : strcmp(row->state, "collecting") == 0 ? PB_COLLECTING
                                                       : PB_CREATING;
    /* Its step is taken again: a create only answer_ms after it was sent, so that an answer
     * already on its way (read after the restart) comes first: a provider whose batches carry
     * no label (Anthropic) would otherwise get it twice. The other steps at once. */
    b->next_ms =
        b->state == PB_CREATING ? row->updated_ms + s->cfg->deployments[dep].batch.answer_ms : 0;
    size_t k;
    json_t *v;
    json_array_foreach(ids, k, v)
    {
        const char *id = json_string_value(json_array_get(v, 0));
        const char *res = json_string_value(json_array_get(v, 1));
        if (r->rc == SL_OK && id != NULL && res != NULL)
            r->rc = pb_push_job(b, id, res);
    }
    json_decref(ids);
}

sl_err_t sl_pbatch_restore(sl_sched_t *s)
{
    restore_arg_t r = {s, SL_OK};
    sl_err_t rc = sl_store_pbatch_each(s->store, restore_row, &r);
    if (rc == SL_OK)
        rc = r.rc;
    if (rc == SL_OK && s->npb > 0)
        sl_info("restored %d provider batch(es); each takes its step again", s->npb);
    return rc;
}
