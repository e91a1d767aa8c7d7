/* lease.h - leasing a job to a dispatcher: the reservation and lease made durable, and the
 * signed dispatch message (schema/dispatch.json).
 *
 * A lease is one attempt: its reservation id names the charges it holds (reserved all or
 * nothing before the dispatch is produced), and it expires at lease_expires_ms unless a usage
 * event reconciles it first. Internal to the scheduler (core.h).
 */
#ifndef SL_LEASE_H
#define SL_LEASE_H

#include <stdint.h>

#include "core.h"

/* Leases job j (out of the DRR) to deployment d with the charges in j->held already reserved:
 * persists the reservation and the lease in the caller's transaction, puts j in the leased
 * list and emits the signed dispatch. */
sl_err_t sl_lease_grant(sl_sched_t *s, job_t *j, int d, int64_t now_ms);

/* Produces again the dispatch of j's current lease (restored after a restart), exactly as it was
 * issued: the scheduler may have died after the lease was stored and before the broker had the
 * message. A dispatcher that has the attempt already drops the copy as a replay; one that gets
 * it after its maximum age answers not_sent, and the job is dispatched anew. For idempotent
 * deployments only (sl_restore_resend_leases): a dispatcher restarted since could run a copy
 * of a call its predecessor made. */
sl_err_t sl_lease_resend(sl_sched_t *s, job_t *j);

#endif
