/* admin.h - the HTTP side of the scheduler's admin API (scheduler/ADMIN-API.md).
 *
 * libmicrohttpd reads each request (body up to SL_ADMIN_MAX_BODY bytes) on its own threads and
 * hands it to the scheduler's loop, which answers it between two scheduling rounds through
 * sl_admin_poll(): the core is single-threaded, so nothing here touches it, and every answer
 * sees a consistent state. A request the loop does not take within SL_ADMIN_WAIT_MS gets 503.
 */
#ifndef SL_ADMIN_H
#define SL_ADMIN_H

#include <jansson.h>
#include <stddef.h>

#include "err.h"

#define SL_ADMIN_MAX_BODY (64 * 1024)
#define SL_ADMIN_WAIT_MS 10000

typedef struct sl_admin sl_admin_t;

typedef struct {
    const char *method; /* "GET", "PUT", "POST", ... */
    const char *path;   /* decoded, without the query string */
    const char *auth;   /* the Authorization header, or NULL */
    json_t *query;      /* the query arguments as an object of strings (never NULL) */
    const char *body;   /* NUL-terminated ("" when none) */
    size_t body_len;
} sl_admin_req_t;

typedef struct {
    int status;
    char *body; /* JSON text, malloc'd (the server frees it); NULL answers {} */
} sl_admin_resp_t;

typedef void (*sl_admin_fn)(const sl_admin_req_t *req, sl_admin_resp_t *resp, void *arg);

/* Serves on listen ("HOST:PORT"; port 0 picks one, *port_out gets it; may be NULL).
 * SL_EINVAL for a bad address, SL_EIO when it cannot listen; err says why. */
sl_err_t sl_admin_start(const char *listen, sl_admin_t **out, int *port_out, char *err,
                        size_t errlen);
/* Answers every request waiting, calling fn for each on the caller's thread; returns how many. */
int sl_admin_poll(sl_admin_t *a, sl_admin_fn fn, void *arg);
/* Stops the server (waiting requests get 503) and frees it. NULL is a no-op. */
void sl_admin_stop(sl_admin_t *a);

#endif
