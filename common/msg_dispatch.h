/* msg_dispatch.h - the dispatch message (schema/dispatch.json, topic sluice.dispatch): a lease
 * of one attempt to a dispatcher, in C.
 *
 * The scheduler builds it as text around the request body it stored (the body is never parsed
 * again on the way out); the dispatcher, after checking the signature and the schema, reads it
 * back with sl_msg_dispatch_read.
 */
#ifndef SL_MSG_DISPATCH_H
#define SL_MSG_DISPATCH_H

#include <jansson.h>
#include <stdint.h>

#include "err.h"

typedef struct {
    const char *job_id;         /* [A-Za-z0-9_-], as job.json requires */
    int attempt;                /* 1, 2, ... */
    const char *reservation_id; /* hex */
    int64_t lease_expires_ms, issued_ms;
    int64_t send_at_ms; /* not before this (ms since the epoch); 0 = at once */
    const char *deployment;
    const char *idempotency_key;
    const char *tenant;    /* NULL: not written (an older scheduler's dispatch reads as NULL) */
    const json_t *request; /* when read: borrowed from the document */
} sl_msg_dispatch_t;

/* Builds the dispatch as compact JSON text around request_json (a JSON object, inserted as
 * is). *out is set only on success and freed by the caller; SL_EINVAL when job_id or
 * reservation_id hold characters that would need escaping, SL_ENOMEM when memory runs out. */
sl_err_t sl_msg_dispatch_build(const sl_msg_dispatch_t *d, const char *request_json, char **out);

/* Reads a dispatch that was validated against schema/dispatch.json; *d borrows from doc.
 * SL_EPARSE when a required field is missing. */
sl_err_t sl_msg_dispatch_read(const json_t *doc, sl_msg_dispatch_t *d);

#endif
