/* job.h - a job of the scheduler core: its place, its lists and what its request needs.
 *
 * A job is in exactly one place (sched.h): queued in its route's DRR (J_QUEUED, node set),
 * or in one of the core's lists (delayed, leased, orphans, held: list_idx set), and in the
 * core's job map until it finishes. The list functions assert it (a programmer error
 * otherwise). Internal to the scheduler (core.h).
 */
#ifndef SL_JOB_H
#define SL_JOB_H

#include <jansson.h>

#include <string.h>

#include "core.h"

/* A new job with the given id (at most SL_JOB_ID_MAX characters; longer is cut) and
 * idempotency key (NULL: the id), in no place yet (its DRR node in no line, list_idx -1, no
 * deployment); the
 * caller fills in the rest and frees it with sl_job_free. NULL when out of memory. */
job_t *sl_job_new(const char *id, const char *idem);
/* The job's lease record, made at its first lease (NULL when out of memory). */
job_lease_t *sl_job_lease(job_t *j);
/* Of the current or last lease: the reservation id ("" when none) and when it was
 * dispatched (0 when never). */
static inline const char *sl_job_res_id(const job_t *j)
{
    return j->lease != NULL ? j->lease->res_id : "";
}
static inline int64_t sl_job_dispatched_ms(const job_t *j)
{
    return j->lease != NULL ? j->lease->dispatched_ms : 0;
}
/* The current lease's charges, or NULL. */
static inline held_t *sl_job_held(const job_t *j)
{
    return j->lease != NULL ? j->lease->held : NULL;
}
/* Replaces them with h (taken; NULL: none), in the job's lease record, made when it has none.
 * SL_ENOMEM: h is freed and the job keeps what it had. */
sl_err_t sl_job_set_held(job_t *j, held_t *h);
/* Its idempotency key: kept after its id, in the same allocation (sl_job_new). */
static inline const char *sl_job_idem(const job_t *j)
{
    return j->id + strlen(j->id) + 1;
}
/* A job whose tenant or route the config does not know keeps their names (else NULL). */
static inline const char *sl_job_orphan_tenant(const job_t *j)
{
    return j->orphan;
}
static inline const char *sl_job_orphan_route(const job_t *j)
{
    return j->orphan != NULL ? j->orphan + strlen(j->orphan) + 1 : NULL;
}
/* An estimate as a job keeps it: within [0, SL_JOB_EST_MAX]. */
static inline int32_t sl_job_est(int64_t v)
{
    return (int32_t)(v < 0 ? 0 : v > SL_JOB_EST_MAX ? SL_JOB_EST_MAX : v);
}
/* Makes j an orphan of those names (on tenant 0, route 0, where it must never run): SL_ENOMEM
 * leaves it as it was. */
sl_err_t sl_job_set_orphan(job_t *j, const char *tenant, const char *route);

/* Frees a job and what it owns (its held charges, names); NULL is a no-op. The job must be
 * out of every place (sl_job_unplace) and out of the core's job map. */
void sl_job_free(job_t *j);

/* Puts j into the core's job map (the unfinished jobs) and counts its bytes; SL_ENOMEM leaves
 * both as they were. The job must not be in the map already. */
sl_err_t sl_job_track(sl_sched_t *s, job_t *j);
/* Takes j out of the core's job map, and its bytes out of the count; a no-op when the map
 * holds another job (or none) under its id. j is not freed. */
void sl_job_untrack(sl_sched_t *s, job_t *j);

/* Appends j to l. j must be in no list and not queued in a DRR (asserted). SL_ENOMEM leaves
 * both as they were. */
sl_err_t sl_job_list_add(joblist_t *l, job_t *j);
/* Removes j from l; a no-op when j is not in l. Moves l's last job into the hole, so a walk
 * over l that deletes must go down, or not advance past the hole. */
void sl_job_list_del(joblist_t *l, job_t *j);
/* Takes a job out of whatever in-memory place holds it (the DRR or its state's list); it
 * stays in the job map. */
void sl_job_unplace(sl_sched_t *s, job_t *j);
/* The name of a state, as the admin API shows it: queued, delayed, leased, orphan, held. */
const char *sl_job_state_name(jstate_t state);

/* The config's index of a tenant, or -1 when the config does not know it. */
int sl_job_tenant_index(const sl_sched_t *s, const char *name);
/* The config's index of a job's key, or -1 when the config no longer knows it or gives it to
 * another tenant (the job then runs on its tenant's path only). */
int sl_job_key_index(const sl_sched_t *s, const char *key_id, int tenant);

/* What a job message (schema/job.json) needs from a deployment, and whether it allows a
 * fallback: JF_* with JF_KNOWN set. doc may be NULL (nothing special). */
unsigned sl_job_doc_flags(json_t *doc);
/* The job's flags, reading its stored message once when they are not known yet (restored
 * jobs). A job whose message cannot be read is treated as needing nothing special. */
unsigned sl_job_flags(sl_sched_t *s, job_t *j);

#endif
