/* batch.h - the dispatcher's side of provider batches: carrying out the scheduler's batch ops
 * (schema/batch-op.json) against a deployment's batch API and answering each with a batch event
 * (schema/batch-event.json), and every result line with its job's usage event.
 *
 * The idea to hold first: the scheduler owns a batch's life (scheduler/pbatch.h); a dispatcher
 * only takes one step at a time, holds nothing between steps, and may be any dispatcher. Each
 * step is safe to take twice: a create first looks for a provider batch labelled with the
 * batch's id (where the provider lets a batch carry a label), and a repeated collect reports
 * lines the scheduler has already settled, which it then ignores.
 *
 * The HTTP calls of a step can take long (an upload of many megabytes, a results file), so the
 * steps run on a thread of their own, one at a time, with blocking libcurl calls; the messages
 * they make are handed back to the dispatcher's loop (sl_batchx_drain), which produces them. The
 * wire formats are batchwire.h's.
 */
#ifndef SL_BATCH_H
#define SL_BATCH_H

#include <stddef.h>

#include "config.h"
#include "err.h"

typedef struct sl_batchx sl_batchx_t;

/* Starts the executor's thread for cfg (borrowed; it must outlive the executor): loads the
 * op schema and each batch twin's credential. SL_ECONFIG / SL_ENOMEM with err set. */
sl_err_t sl_batchx_new(const sl_config_t *cfg, sl_batchx_t **out, char *err, size_t errlen);
/* Stops the thread after the step it is taking and frees everything (NULL: a no-op). */
void sl_batchx_free(sl_batchx_t *bx);

/* Whether an authenticated message of the dispatch topic is a batch op rather than a dispatch
 * (the scheduler writes ops starting with {"v":1,"op":). */
int sl_batchx_is_op(const void *value, size_t len);

/* Queues an op (copied). SL_EBUSY when the queue is full: the op is dropped, and the scheduler
 * sends it again when it gets no answer. */
sl_err_t sl_batchx_submit(sl_batchx_t *bx, const void *value, size_t len);

/* Hands each message the steps made since the last call to produce(key, value, arg), on the
 * caller's thread, and returns how many. */
typedef void (*sl_batchx_produce_fn)(const char *key, const char *value, void *arg);
int sl_batchx_drain(sl_batchx_t *bx, sl_batchx_produce_fn produce, void *arg);

/* Ops taken, ops dropped because the queue was full, result lines reported. */
typedef struct {
    long long ops, dropped, lines;
} sl_batchx_stats_t;
void sl_batchx_stats(sl_batchx_t *bx, sl_batchx_stats_t *out);

#endif
