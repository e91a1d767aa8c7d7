/* overrides.h - run-time changes over the config: a bucket's limit, a tenant's share, a tenant's
 * or key's pause (the admin API).
 *
 * The caller stores each change (store.h overrides) so that it survives restarts and reloads;
 * a core applies the stored ones when it is built, before its jobs are restored.
 */
#ifndef SL_OVERRIDES_H
#define SL_OVERRIDES_H

#include <stdint.h>

#include "err.h"
#include "sched_types.h"

/* Sets a bucket's limit (per period, in the config's terms, > 0), or back to the config's with
 * NAN; what the bucket admitted stays (a lower limit applies from the next admission).
 * SL_EINVAL for a bad bucket or limit. */
sl_err_t sl_sched_set_limit(sl_sched_t *s, int bucket, double limit, int64_t now_ms);
/* Sets a tenant's DRR weight (>= 1) and guarantee ([0, 0.95]); its queued jobs take them at
 * once. */
sl_err_t sl_sched_set_share(sl_sched_t *s, int tenant, int64_t weight, double guarantee);
/* Pauses or resumes a tenant (tenant >= 0) or a key (tenant < 0, key >= 0). A paused one's
 * queued jobs are held out of line (they still expire at their deadline), its new jobs are
 * refused (tenant_paused / key_paused), its calls in flight finish; resuming puts the held
 * jobs back in line. */
sl_err_t sl_sched_set_paused(sl_sched_t *s, int tenant, int key, int paused);

/* Inside the core: applies the store's changes over the config, before jobs are restored (so
 * that a paused tenant's jobs come back held). A change the config has no target for is logged
 * and skipped. */
sl_err_t sl_overrides_apply(sl_sched_t *s, int64_t now_ms);

#endif
