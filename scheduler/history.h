/* history.h - what the console charts: the last minutes of every deployment's buckets, and what
 * the queues looked like (scheduler/ADMIN-API.md: GET /v1/history and GET /v1/queues).
 *
 * Once a second the loop takes a sample of each deployment's provider-side buckets (what was
 * reserved, what it came to once reconciled, the limit, whether a provider's headers clamp it)
 * and of each deployment's answers, 429s and 5xx as the core counts them
 * (sl_sched_deployment_answers) and its pause, into a ring of
 * SL_HISTORY_SAMPLES. The core's hooks feed it the queue waits (a ring per route and class),
 * expiries and each tenant's admitted tokens per route (decayed over a minute: its share).
 * Memory is fixed by the config (rings, and a double per tenant and route); a reload starts
 * the history again. Everything runs on the loop's thread.
 */
#ifndef SL_HISTORY_H
#define SL_HISTORY_H

#include <jansson.h>
#include <stdint.h>

#include "config.h"
#include "sched.h"

#define SL_HISTORY_SAMPLES 300   /* five minutes at one a second */
#define SL_HISTORY_WAITS 1024    /* queue waits kept per route and class */
#define SL_HISTORY_MAX_BUCKETS 256

typedef struct sl_history sl_history_t;

sl_history_t *sl_history_new(void); /* NULL when out of memory */
void sl_history_free(sl_history_t *h); /* NULL is a no-op */
/* Forgets everything; the next sample starts again. The loop calls it before a reload: the
 * history names the old config, which the reload may free. */
void sl_history_reset(sl_history_t *h);

/* The hooks that feed it (arg: the history), for sl_exporter_chain or sl_sched_observe. */
const sl_sched_observer_t *sl_history_observer(void);

/* Takes one sample at now_ms (the loop calls it once a second). A config other than the one of
 * the last sample starts the history again. */
void sl_history_sample(sl_history_t *h, sl_sched_t *s, const sl_config_t *cfg, int64_t now_ms);

/* {"interval_ms", "t": [...], "buckets": [...], "deployments": [...]}: see ADMIN-API.md.
 * NULL when out of memory. */
json_t *sl_history_json(const sl_history_t *h);

/* {"routes": [...], "totals": {...}, "estimates": {...}}: queues per route and class (depth,
 * oldest wait, recent wait percentiles, expiries) and the tenants' shares of each route. */
json_t *sl_history_queues_json(const sl_history_t *h, sl_sched_t *s, const sl_config_t *cfg,
                               int64_t now_ms);

#endif
