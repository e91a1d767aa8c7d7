/* outbox.h - what the scheduler sends out, and the results outbox until the broker has them.
 *
 * Inside a transaction the core decides messages: signed dispatches and results. A result is
 * written to the store's outbox table in the same transaction that finishes its job
 * (sl_store_job_finish), so it survives a crash; the core also hands it over in memory. The
 * caller takes the messages (sl_sched_take) and produces them only after committing; a result's
 * outbox row is deleted once the broker acknowledged it (sl_outbox_t tracks the deliveries), and
 * whatever is left is produced again after a failed delivery or at the next start. The rows
 * themselves stay SQL in store.c (sl_store_outbox_*), next to the job rows whose transactions
 * write them; only this module uses those functions.
 */
#ifndef SL_OUTBOX_H
#define SL_OUTBOX_H

#include <stdint.h>

#include "err.h"
#include "sched_types.h"
#include "store.h"

/* ---- the messages the core hands over (sched.h's callers) ---- */

/* Hands over the messages produced since the last call; the caller owns the array and each
 * key/value (free with sl_sched_msgs_free) and must produce them only after committing. */
int sl_sched_take(sl_sched_t *s, sl_sched_msg_t **msgs);
void sl_sched_msgs_free(sl_sched_msg_t *msgs, int n);

/* ---- inside the core ---- */

/* Appends a message to those sl_sched_take hands over: kind, topic (not copied: it lives in the
 * config), key (copied) and value (taken, freed on failure too); seq is a result's outbox row
 * (0 for dispatches). */
sl_err_t sl_outbox_emit(sl_sched_t *s, sl_msg_kind_t kind, const char *topic, const char *key,
                        char *value, int64_t seq);
/* Hands over a job the core took in, for the changelog: its tenant (the key), id, submission
 * time and message (job_json, taken; freed on failure too). */
sl_err_t sl_outbox_emit_taken(sl_sched_t *s, const char *tenant, const char *job_id,
                              int64_t submitted_ms, char *job_json);
/* Sends a finished job's stored result again (a redelivered or resubmitted job): a new outbox
 * row in the caller's transaction, and the message. result_json is taken (freed on failure). */
sl_err_t sl_outbox_resend(sl_sched_t *s, const char *job_id, char *result_json, int64_t now_ms);

/* ---- delivery tracking (the process that produces the messages) ---- */

typedef struct sl_outbox sl_outbox_t;

/* What produces one outbox row (the caller's producer); it reports with sl_outbox_sent. */
typedef void (*sl_outbox_produce_fn)(int64_t seq, const char *topic, const char *key,
                                     const char *value, void *arg);

/* A tracker with nothing in flight; NULL when out of memory. Free with sl_outbox_free (NULL is
 * a no-op). */
sl_outbox_t *sl_outbox_new(void);
void sl_outbox_free(sl_outbox_t *ob);
/* A result (outbox row seq > 0) was handed to the producer (ok), or the producer refused it:
 * then the whole outbox is produced again once nothing is in flight (sl_outbox_sweep). */
void sl_outbox_sent(sl_outbox_t *ob, int ok);
/* The broker's report on a result handed over: acknowledged (ok: its row is deleted in the next
 * transaction), or failed (the outbox is produced again). Called from the producer's delivery
 * callback, on the loop's thread. */
void sl_outbox_delivered(sl_outbox_t *ob, int64_t seq, int ok);
/* Deletes the acknowledged rows inside the caller's transaction; they are forgotten once it
 * commits (sl_outbox_committed). Stops at the first error, which it returns. */
sl_err_t sl_outbox_forget_delivered(sl_outbox_t *ob, sl_store_t *store);
/* The transaction of sl_outbox_forget_delivered committed. */
void sl_outbox_committed(sl_outbox_t *ob);
/* Produces every row of the outbox through produce: always when all is set (at start: what a
 * previous run left), else only when a delivery failed and nothing is in flight any more (a
 * duplicate result is better than none). */
void sl_outbox_sweep(sl_outbox_t *ob, sl_store_t *store, int all, sl_outbox_produce_fn produce,
                     void *arg);
/* At shutdown, after the producer flushed: deletes the acknowledged rows in a transaction of
 * its own; the unacknowledged ones go out at the next start. */
void sl_outbox_close(sl_outbox_t *ob, sl_store_t *store);

#endif
