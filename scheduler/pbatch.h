/* pbatch.h - provider batches: batch-class jobs sent to a provider's batch API (half the price,
 * limits of its own) instead of online, with each job reconciled and answered as if it had
 * been an online call.
 *
 * The idea to hold first: a provider batch is a lease of many jobs at once. The DRR serves a
 * batch job as any other, to its route deployment's batch twin (config.h, sl_batch_cfg_t), whose
 * only limit is the provider's enqueued tokens; lease.c then puts the job in the open batch of
 * its twin and tenant (one tenant per batch, so a tenant can be paused or cancelled alone)
 * instead of dispatching it. The scheduler owns the batch's life and the dispatchers only carry
 * out its steps, each an op on the dispatch topic (schema/batch-op.json) answered by a batch
 * event on the usage topic (schema/batch-event.json):
 *
 *   open -> create (sent when full or after linger_ms) -> running (the provider's id known;
 *   polled every poll_ms) -> collecting (the provider says ended: a dispatcher reads the results
 *   and reports every line as the job's usage event) -> gone.
 *
 * Durable: a batch is written to the store (pbatches) when it is sent, with its jobs in order,
 * and its jobs' leases and reservations are stored as for any call. After a restart each batch
 * takes its step again (a create finds the provider's batch by its marker before creating one,
 * so none is created twice); a job leased to an open batch that was never sent is not_sent and
 * runs again. Every op is repeated after answer_ms without an answer; an event that does not fit
 * the batch's state (late, repeated, or for a batch already gone) changes nothing.
 *
 * Internal to the scheduler (core.h).
 */
#ifndef SL_PBATCH_H
#define SL_PBATCH_H

#include <jansson.h>
#include <stdint.h>

#include "core.h"

/* Puts j, just leased to batch twin d with its charges held, into the open batch of d and j's
 * tenant (opening one), and sends the batch when it is full (the twin's max_requests or
 * max_bytes). In the caller's transaction. */
sl_err_t sl_pbatch_add(sl_sched_t *s, job_t *j, int d, int64_t now_ms);

/* Takes each batch's step that is due: sends open batches whose linger is over, repeats ops
 * that got no answer, polls running batches; after a restart first fails as not_sent the
 * leases of batches that were never sent. *next_ms is lowered to when the next step is due. In
 * the caller's transaction. */
sl_err_t sl_pbatch_tick(sl_sched_t *s, int64_t now_ms, int64_t *next_ms);

/* Whether doc (a message of the usage topic) is a batch event. */
int sl_pbatch_is_event(const json_t *doc);
/* Takes a batch event (validated here against schema/batch-event.json; an invalid one is
 * counted and ignored). In the caller's transaction. */
sl_err_t sl_pbatch_on_event(sl_sched_t *s, json_t *doc, int64_t now_ms);

/* A cancel of j, leased to a provider batch: a job of a batch not sent yet leaves it and is
 * cancelled (*done = 1); otherwise the provider cancels only whole batches, so when every job
 * of j's batch has asked, the batch is cancelled at the provider (its lines then come back
 * cancelled and those jobs end as cancelled), and until then j runs on (*done = 0). */
sl_err_t sl_pbatch_cancel(sl_sched_t *s, job_t *j, int64_t now_ms, int *done);

/* j, leased to a provider batch that was never sent or that the provider cancelled, ends as
 * cancelled: its charges come back and its result is written (counted by sl_outcome_finish). */
sl_err_t sl_pbatch_cancelled(sl_sched_t *s, job_t *j, int64_t now_ms);

/* Reads the provider batches from the store into s (after the jobs were restored). A batch
 * being created asks again answer_ms after it was sent (an answer read after the restart may
 * settle it first); the others take their step at once. */
sl_err_t sl_pbatch_restore(sl_sched_t *s);

/* Frees every batch in memory (the core's end). */
void sl_pbatch_free_all(sl_sched_t *s);

/* How many batches there are in each state (open, creating, running, collecting). */
void sl_pbatch_counts(const sl_sched_t *s, int64_t counts[4]);

#endif
