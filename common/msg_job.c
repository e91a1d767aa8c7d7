/* msg_job.c - the job and cancel messages (see msg_job.h). */
#include "msg_job.h"

#include <string.h>

sl_jobs_kind_t sl_msg_jobs_kind(const json_t *doc)
{
    const json_t *type = json_object_get(doc, "type");
    return json_is_string(type) && strcmp(json_string_value(type), "cancel") == 0
               ? SL_JOBS_CANCEL
               : SL_JOBS_JOB;
}

json_t *sl_msg_job_json(const sl_msg_job_t *job)
{
    if (job->job_id == NULL || job->idempotency_key == NULL || job->tenant == NULL ||
        job->app == NULL || job->env == NULL || job->key_id == NULL || job->route == NULL ||
        job->cls == NULL || job->request == NULL)
        return NULL;
    json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, "
                          "s:{s:I, s:I, s:I}, s:O}",
                          "v", 1, "job_id", job->job_id, "idempotency_key",
                          job->idempotency_key, "tenant", job->tenant, "app", job->app, "env",
                          job->env, "key_id", job->key_id, "route", job->route, "class",
                          job->cls, "submitted_ms", (json_int_t)job->submitted_ms,
                          "deadline_ms", (json_int_t)job->deadline_ms, "estimate", "input",
                          (json_int_t)job->est_input, "output", (json_int_t)job->est_output,
                          "total", (json_int_t)job->est_total, "request", job->request);
    if (o == NULL)
        return NULL;
    int bad = 0;
    if (job->metadata != NULL)
        bad |= json_object_set(o, "metadata", (json_t *)job->metadata);
    if (job->fallback >= 0)
        bad |= json_object_set_new(o, "fallback", json_boolean(job->fallback));
    if (job->degrade >= 0)
        bad |= json_object_set_new(o, "degrade", json_boolean(job->degrade));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static const char *str(const json_t *doc, const char *key)
{
    return json_string_value(json_object_get(doc, key));
}

static int64_t num(const json_t *doc, const char *key)
{
    return json_integer_value(json_object_get(doc, key));
}

sl_err_t sl_msg_job_read(const json_t *doc, sl_msg_job_t *job)
{
    memset(job, 0, sizeof *job);
    job->job_id = str(doc, "job_id");
    job->idempotency_key = str(doc, "idempotency_key");
    job->tenant = str(doc, "tenant");
    job->app = str(doc, "app");
    job->env = str(doc, "env");
    job->key_id = str(doc, "key_id");
    job->route = str(doc, "route");
    job->cls = str(doc, "class");
    job->submitted_ms = num(doc, "submitted_ms");
    job->deadline_ms = num(doc, "deadline_ms");
    const json_t *est = json_object_get(doc, "estimate");
    job->est_input = num(est, "input");
    job->est_output = num(est, "output");
    job->est_total = num(est, "total");
    const json_t *fb = json_object_get(doc, "fallback");
    job->fallback = json_is_boolean(fb) ? json_is_true(fb) : -1;
    const json_t *dg = json_object_get(doc, "degrade");
    job->degrade = json_is_boolean(dg) ? json_is_true(dg) : -1;
    job->metadata = json_object_get(doc, "metadata");
    job->request = json_object_get(doc, "request");
    if (job->job_id == NULL || job->idempotency_key == NULL || job->tenant == NULL ||
        job->route == NULL || job->cls == NULL || !json_is_object(job->request))
        return SL_EPARSE;
    return SL_OK;
}

json_t *sl_msg_cancel_json(const sl_msg_cancel_t *c)
{
    if (c->job_id == NULL || c->idempotency_key == NULL || c->tenant == NULL)
        return NULL;
    json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s?, s:I}", "v", 1, "type", "cancel",
                          "job_id", c->job_id, "idempotency_key", c->idempotency_key, "tenant",
                          c->tenant, "key_id", c->key_id, "requested_ms",
                          (json_int_t)c->requested_ms);
    return o;
}

sl_err_t sl_msg_cancel_read(const json_t *doc, sl_msg_cancel_t *c)
{
    memset(c, 0, sizeof *c);
    c->job_id = str(doc, "job_id");
    c->idempotency_key = str(doc, "idempotency_key");
    c->tenant = str(doc, "tenant");
    c->key_id = str(doc, "key_id");
    c->requested_ms = num(doc, "requested_ms");
    if (c->job_id == NULL || c->idempotency_key == NULL || c->tenant == NULL)
        return SL_EPARSE;
    return SL_OK;
}
