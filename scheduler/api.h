/* api.h - the admin API's answers (scheduler/ADMIN-API.md), computed on the scheduler's loop.
 *
 * sl_api_handle() authenticates the request (admin keys, hashed like API keys), routes it, reads
 * or changes the core, stores changes (overrides table) and writes the JSON answer. It runs
 * between two scheduling rounds, outside the loop's transaction, and opens its own when it
 * stores a change. Kept apart from the HTTP server so tests can drive it directly.
 */
#ifndef SL_API_H
#define SL_API_H

#include <stdint.h>

#include "admin.h"
#include "config.h"
#include "coord.h"
#include "history.h"
#include "sched.h"
#include "store.h"

typedef struct {
    sl_sched_t **sched;        /* the loop's core (a reload replaces it) */
    const sl_config_t **cfg;   /* the loop's config (a reload replaces it) */
    sl_store_t *store;
    int64_t (*now_ms)(void);   /* the clock (tests set their own) */
    sl_history_t *history;     /* what /v1/history and /v1/queues show; NULL: not kept */
    const sl_coord_t *coord;   /* capacity leases (sharded schedulers); NULL: none */
} sl_api_t;

/* An sl_admin_fn: arg is an sl_api_t. */
void sl_api_handle(const sl_admin_req_t *req, sl_admin_resp_t *resp, void *arg);

#endif
