/* msg_job.h - the two messages on topic sluice.jobs, in C: the job (schema/job.json) and the
 * cancel (schema/cancel.json), both keyed by tenant.
 *
 * ingest fills a struct and builds the message; the scheduler, after validating it against its
 * schema, reads it back (sl_msg_jobs_kind tells the two apart).
 */
#ifndef SL_MSG_JOB_H
#define SL_MSG_JOB_H

#include <jansson.h>
#include <stdint.h>

#include "err.h"

typedef struct {
    const char *job_id, *idempotency_key;
    const char *tenant, *app, *env, *key_id; /* the identity ingest resolved from the API key */
    const char *route, *cls;
    int64_t submitted_ms, deadline_ms;
    int64_t est_input, est_output, est_total;
    int fallback;            /* -1 = absent, else the caller's "fallback" */
    int degrade;             /* -1 = absent, else the caller's "degrade" */
    const json_t *metadata;  /* NULL = absent */
    const json_t *request;   /* the provider-neutral body (required) */
} sl_msg_job_t;

typedef struct {
    const char *job_id, *idempotency_key, *tenant;
    const char *key_id; /* NULL = absent */
    int64_t requested_ms;
} sl_msg_cancel_t;

typedef enum { SL_JOBS_JOB = 0, SL_JOBS_CANCEL } sl_jobs_kind_t;

/* Which message of the jobs topic doc is (a cancel says "type": "cancel"). */
sl_jobs_kind_t sl_msg_jobs_kind(const json_t *doc);

/* The job as a JSON object (caller owns it); NULL when out of memory or a required field is
 * NULL. */
json_t *sl_msg_job_json(const sl_msg_job_t *job);
/* Reads a job validated against schema/job.json; *job borrows from doc. SL_EPARSE when a
 * required field is missing. */
sl_err_t sl_msg_job_read(const json_t *doc, sl_msg_job_t *job);

json_t *sl_msg_cancel_json(const sl_msg_cancel_t *c);
sl_err_t sl_msg_cancel_read(const json_t *doc, sl_msg_cancel_t *c);

#endif
