/* restore.c - rebuilding the core's buckets and jobs from the store (see restore.h), and
 * pruning the reservations no rebuild would read again.
 */
#include "restore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buckets.h"
#include "flow.h"
#include "hmap.h"
#include "job.h"
#include "lease.h"
#include "ledger.h"
#include "log.h"
#include "outcome.h"
#include "reservation.h"
#include "store.h"

typedef struct {
    sl_sched_t *s;
    job_t *job;
    int64_t now_ms;
    sl_err_t rc;
} restore_t;

static void restore_charge(const char *bucket_id, double amount, const char *rule, void *arg)
{
    restore_t *r = arg;
    held_t *h = sl_job_held(r->job);
    if (h == NULL || h->n >= MAX_CHARGES)
        return;
    /* A bucket removed from the config stays as a placeholder (bucket -1), so the charges keep
     * the order they were stored in. */
    int b = sl_ledger_find(r->s->ledger, bucket_id);
    h->ch[h->n] = (sl_charge_t){.bucket = b, .amount = amount};
    int parsed = sl_charge_rule_parse(rule);
    h->rule[h->n] = (uint8_t)(parsed >= 0 ? parsed : SL_RULE_KEEP);
    h->before[h->n] = b >= 0 ? sl_ledger_reserved_total(r->s->ledger, b) : 0;
    /* A call in flight holds its gauge slot again. */
    if (b >= 0 && h->rule[h->n] == SL_RULE_RELEASE)
        sl_ledger_settle(r->s->ledger, b, -amount, r->now_ms, r->now_ms);
    h->n++;
}

typedef struct {
    sl_sched_t *s;
    int64_t now_ms;
    const uint8_t *replay; /* per bucket: replay charges made after its last save */
    const int64_t *since;  /* per bucket: that save's time */
} replay_t;

static void replay_charge(const char *bucket_id, double amount, int64_t created_ms, void *arg)
{
    replay_t *r = arg;
    int b = sl_ledger_find(r->s->ledger, bucket_id);
    if (b < 0 || !(amount > 0))
        return;
    if (r->replay[b] && created_ms >= r->since[b])
        sl_ledger_settle(r->s->ledger, b, -amount, created_ms, r->now_ms);
    /* A guarded bucket's trailing window: what the provider may still be counting. */
    int64_t window = sl_ledger_spec(r->s->ledger, b)->guard_window_ms;
    if (window > 0 && created_ms > r->now_ms - window)
        sl_ledger_guard_note(r->s->ledger, b, amount, created_ms, r->now_ms);
}

static sl_err_t restore_buckets(sl_sched_t *s, int exact, int64_t now_ms);

sl_err_t sl_restore_buckets(sl_sched_t *s, int exact, int64_t now_ms)
{
    if (!exact && sl_store_is_new(s->store))
        return SL_OK;
    return restore_buckets(s, exact, now_ms);
}

sl_err_t sl_restore_assume_worst(sl_sched_t *s, int64_t now_ms)
{
    /* A restart's rules on a store that saved nothing: token buckets empty, the others as
     * sl_ledger_assume_worst leaves them. */
    return restore_buckets(s, 0, now_ms);
}

static sl_err_t restore_buckets(sl_sched_t *s, int exact, int64_t now_ms)
{
    int n = sl_ledger_count(s->ledger);
    uint8_t *replay = calloc((size_t)n + 1, 1);
    int64_t *since = calloc((size_t)n + 1, sizeof *since);
    if (replay == NULL || since == NULL) {
        free(replay);
        free(since);
        return SL_ENOMEM;
    }
    int64_t oldest = INT64_MAX;
    sl_err_t rc = SL_OK;
    for (int b = 0; b < n && rc == SL_OK; b++) {
        double level = 0;
        int64_t updated = 0;
        char *state = NULL;
        sl_err_t got =
            sl_store_bucket_get(s->store, sl_ledger_id(s->ledger, b), &level, &updated, &state);
        sl_alg_t alg = sl_ledger_alg(s->ledger, b);
        if (got != SL_OK && got != SL_ENOTFOUND) {
            rc = got;
        } else if (sl_buckets_is_quota(s, b)) {
            if (got == SL_OK && sl_ledger_state_load(s->ledger, b, state, now_ms) != SL_OK)
                sl_warn("bucket %s: saved counters unreadable; replaying its window",
                        sl_ledger_id(s->ledger, b));
            /* Without a save, replay the whole window (at most one period back). */
            since[b] = got == SL_OK ? updated : now_ms - s->binfo[b].limit->period_ms;
            if (!exact) {
                replay[b] = 1;
                if (since[b] < oldest)
                    oldest = since[b];
            }
        }
        /* Every guard starts empty: the reservations of its window are replayed below, after
         * a restart and after a reload alike (the guard's slots are not saved). */
        int64_t window = sl_ledger_spec(s->ledger, b)->guard_window_ms;
        if (rc == SL_OK && window > 0 && now_ms - window < oldest)
            oldest = now_ms - window;
        if (rc != SL_OK || sl_buckets_is_quota(s, b)) {
            /* done above */
        } else if (alg == SL_ALG_GAUGE) {
            /* rebuilt from the leases */
        } else if (exact && got == SL_OK) {
            if (alg == SL_ALG_TOKEN_BUCKET) {
                sl_ledger_set_level(s->ledger, b, level, updated);
            } else {
                sl_ledger_state_load(s->ledger, b, state, now_ms);
            }
        } else if (alg == SL_ALG_TOKEN_BUCKET) {
            /* Empty at this start, less what was admitted after the last save: those calls
             * may still be reaching the provider in its current slice (a restart that left
             * them out got 429s, e2e_recovery). */
            sl_ledger_set_level(s->ledger, b, got == SL_OK && level < 0 ? level : 0, now_ms);
            if (got == SL_OK) {
                replay[b] = 1;
                since[b] = updated;
                if (updated < oldest)
                    oldest = updated;
            }
        } else {
            sl_ledger_assume_worst(s->ledger, b, now_ms);
        }
        free(state);
    }
    if (rc == SL_OK && oldest != INT64_MAX) {
        replay_t r = {s, now_ms, replay, since};
        rc = sl_store_res_each_since(s->store, oldest, replay_charge, &r);
    }
    free(replay);
    free(since);
    return rc;
}

static void restore_job(const sl_store_row_t *row, void *arg)
{
    restore_t *r = arg;
    sl_sched_t *s = r->s;
    if (r->rc != SL_OK)
        return;
    int tenant = sl_job_tenant_index(s, row->tenant);
    int route = sl_config_route(s->cfg, row->route);
    int cls = sl_class_parse(row->cls);
    job_t *j = sl_job_new(row->job_id, row->idempotency_key);
    if (j == NULL) {
        r->rc = SL_ENOMEM;
        return;
    }
    j->tenant = tenant;
    j->route = route;
    j->cls = cls < 0 ? SL_CLASS_STANDARD : cls;
    j->attempts = row->attempts;
    j->submitted_ms = row->submitted_ms;
    j->deadline_ms = row->deadline_ms;
    j->not_before_ms = row->not_before_ms;
    j->est_input = sl_job_est(row->est_input);
    j->est_output = sl_job_est(row->est_output);
    j->est_total = sl_job_est(row->est_total);
    j->key = sl_job_key_index(s, row->key_id, tenant);
    j->home_route = route;
    int orphan = tenant < 0 || route < 0;
    if (orphan) {
        /* The config no longer knows its tenant or route: it must not run as anyone else. It is
         * failed once restoring is over (sl_sched_new). */
        sl_logf(SL_LOG_WARN, "job", j->id,
                "restored job %s has tenant \"%s\" or route \"%s\" unknown to the config", j->id,
                row->tenant, row->route);
        if (sl_job_set_orphan(j, row->tenant, row->route) != SL_OK) {
            sl_job_free(j);
            r->rc = SL_ENOMEM;
            return;
        }
    }
    j->bytes = row->job_bytes < UINT32_MAX ? (uint32_t)row->job_bytes : UINT32_MAX;
    sl_err_t rc = sl_job_track(s, j);
    if (rc != SL_OK) {
        sl_job_free(j);
        r->rc = rc;
        return;
    }
    if (orphan) {
        if (strcmp(row->state, "leased") == 0 && row->reservation_id != NULL) {
            if (sl_job_lease(j) == NULL) {
                r->rc = SL_ENOMEM;
                return;
            }
            snprintf(j->lease->res_id, sizeof j->lease->res_id, "%s", row->reservation_id);
        }
        j->state = J_ORPHAN;
        r->rc = sl_job_list_add(&s->orphans, j);
    } else if (strcmp(row->state, "leased") == 0 && row->reservation_id != NULL) {
        /* sl_job_set_held makes the lease record, and frees h when it cannot. */
        held_t *h = calloc(1, sizeof *h);
        if (h == NULL || sl_job_set_held(j, h) != SL_OK) {
            r->rc = SL_ENOMEM;
            return;
        }
        job_lease_t *l = j->lease;
        snprintf(l->res_id, sizeof l->res_id, "%s", row->reservation_id);
        j->deployment = row->deployment ? sl_config_deployment(s->cfg, row->deployment) : -1;
        l->lease_expires_ms = row->lease_expires_ms;
        l->dispatched_ms = row->lease_expires_ms - s->cfg->lease_ms;
        j->state = J_LEASED;
        r->job = j;
        h->charged_ms = l->dispatched_ms;
        h->est_input = j->est_input;
        h->est_output = j->est_output;
        sl_store_res_charges(s->store, l->res_id, restore_charge, r);
        j->pbatch = j->deployment >= 0 && SL_IS_BATCH_DEPLOYMENT(s->cfg, j->deployment);
        r->rc = sl_job_list_add(&s->leased, j);
    } else if (row->not_before_ms > r->now_ms) {
        j->state = J_DELAYED;
        r->rc = sl_job_list_add(&s->delayed, j);
    } else {
        r->rc = sl_flow_enqueue(s, j, 0);
    }
}

sl_err_t sl_restore_jobs(sl_sched_t *s, int64_t now_ms, char *err, size_t errlen)
{
    restore_t r = {s, NULL, now_ms, SL_OK};
    sl_err_t rc = sl_store_each_unfinished(s->store, restore_job, &r);
    /* Reading every row mapped up to 256 MiB of the file into RSS (269 B a queued job at a
     * million, bench/queued); the queue needs none of it now. */
    sl_store_release_map(s->store);
    if (rc == SL_OK)
        rc = r.rc;
    if (rc != SL_OK) {
        snprintf(err, errlen, "restoring unfinished jobs: %s", sl_strerror(rc));
        return rc;
    }
    if (sl_hmap_len(s->jobs) > 0)
        sl_info("restored %zu unfinished jobs (%d leased)", sl_hmap_len(s->jobs), s->leased.n);
    rc = sl_outcome_fail_orphans(s, now_ms);
    if (rc != SL_OK)
        snprintf(err, errlen, "failing jobs the config no longer knows: %s", sl_strerror(rc));
    return rc;
}

sl_err_t sl_restore_resend_leases(sl_sched_t *s)
{
    int n = 0;
    for (int i = 0; i < s->leased.n; i++) {
        job_t *j = s->leased.items[i];
        if (j->deployment < 0 || !s->cfg->deployments[j->deployment].idempotent)
            continue;
        sl_err_t rc = sl_lease_resend(s, j);
        if (rc != SL_OK)
            return rc;
        n++;
    }
    if (n > 0)
        sl_info("dispatched again %d restored lease(s) of idempotent deployments, in case the "
                "broker never had them",
                n);
    return SL_OK;
}

/* The guard term's allowance for a wall clock that steps back between a prune and a restart. */
enum { PRUNE_CLOCK_SLACK_MS = 60000, HORIZON_EVERY_MS = 10000, PRUNE_EVERY_MS = 1000 };

sl_err_t sl_restore_horizon(sl_sched_t *s, int64_t now_ms, int64_t *horizon_ms)
{
    int64_t horizon = now_ms;
    for (int b = 0; b < sl_ledger_count(s->ledger); b++) {
        int64_t window = sl_ledger_spec(s->ledger, b)->guard_window_ms;
        if (window > 0 && now_ms - window - PRUNE_CLOCK_SLACK_MS < horizon)
            horizon = now_ms - window - PRUNE_CLOCK_SLACK_MS;
        if (!sl_buckets_is_quota(s, b))
            continue;
        /* As sl_restore_buckets reads it: the saved time, or the whole period back. The save
         * time needs no slack: a reservation made after it (by any clock) is kept, and one made
         * before it was counted in the saved state. */
        double level = 0;
        int64_t saved_ms = 0;
        sl_err_t rc =
            sl_store_bucket_get(s->store, sl_ledger_id(s->ledger, b), &level, &saved_ms, NULL);
        if (rc == SL_ENOTFOUND)
            saved_ms = now_ms - s->binfo[b].limit->period_ms;
        else if (rc != SL_OK)
            return rc;
        if (saved_ms < horizon)
            horizon = saved_ms;
    }
    *horizon_ms = horizon;
    return SL_OK;
}

sl_err_t sl_restore_prune(sl_sched_t *s, sl_restore_pruner_t *p, int64_t now_ms)
{
    if (!p->behind && now_ms < p->next_prune_ms)
        return SL_OK;
    p->next_prune_ms = now_ms + PRUNE_EVERY_MS;
    if (now_ms >= p->next_horizon_ms) {
        sl_err_t rc = sl_restore_horizon(s, now_ms, &p->horizon_ms);
        if (rc != SL_OK)
            return rc;
        p->next_horizon_ms = now_ms + HORIZON_EVERY_MS;
    }
    int deleted = 0;
    sl_err_t rc = sl_store_res_prune(s->store, p->horizon_ms, SL_RESTORE_PRUNE_ROWS, &deleted);
    if (rc != SL_OK)
        return rc;
    p->behind = deleted == SL_RESTORE_PRUNE_ROWS;
    p->pruned += deleted;
    return SL_OK;
}
