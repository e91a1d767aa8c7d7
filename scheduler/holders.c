/* holders.c - dispatcher incarnations and the leases they hold (see holders.h). */
#include "holders.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "jsonschema.h"
#include "log.h"
#include "msg_heartbeat.h"
#include "outcome.h"
#include "reservation.h"
#include "retry.h"
#include "shard.h"

typedef struct {
    char name[129];
    char incarnation[SL_INCARNATION_HEX + 1];
    int64_t started_ms;    /* the incarnation's own start, as it says */
    int64_t sent_ms;       /* the newest sent_ms taken from it */
    int64_t heard_ms;      /* the scheduler's clock at its latest heartbeat */
    int64_t max_in_flight; /* the calls it runs at once, as it says (0: not said) */
    unsigned id;           /* what job_t.holder holds for it; never 0 */
    int dead;              /* found silent and settled; kept so that its heartbeats stay refused */
} holder_t;

struct sl_holders {
    holder_t *h;
    int n, cap;
    unsigned next_id;
    int64_t cut;       /* the window's cut (sl_holders_on_not_sent); 0: none */
    int64_t cut_at_ms; /* when it was last cut */
    int64_t answers;   /* answered calls since the cut last grew */
};

struct sl_holders *sl_holders_new(void)
{
    return calloc(1, sizeof(struct sl_holders));
}

void sl_holders_free(struct sl_holders *h)
{
    if (h == NULL)
        return;
    free(h->h);
    free(h);
}

int sl_holders_count(const sl_sched_t *s)
{
    int live = 0;
    for (int i = 0; s->holders != NULL && i < s->holders->n; i++)
        live += !s->holders->h[i].dead;
    return live;
}

/* The window the dispatchers' heartbeats give, before any cut. */
static int64_t heard_window(const sl_sched_t *s)
{
    int64_t sum = 0;
    int live = 0;
    for (int i = 0; s->holders != NULL && i < s->holders->n; i++) {
        const holder_t *h = &s->holders->h[i];
        if (h->dead)
            continue;
        live++;
        sum += h->max_in_flight > 0 ? h->max_in_flight : s->cfg->max_in_flight;
    }
    return live > 0 ? sum : s->cfg->max_in_flight;
}

int64_t sl_holders_window(const sl_sched_t *s)
{
    int64_t w = heard_window(s);
    /* Several scheduler shards share the dispatchers as they share the limits (shard.h). */
    double share = sl_shard_target(s);
    if (share < 1.0)
        w = share > 0 ? (int64_t)ceil((double)w * share) : 0;
    int64_t cut = s->holders != NULL ? s->holders->cut : 0;
    return cut > 0 && cut < w ? cut : w;
}

void sl_holders_on_not_sent(sl_sched_t *s, int64_t now_ms)
{
    struct sl_holders *hs = s->holders;
    if (hs->cut_at_ms != 0 && now_ms - hs->cut_at_ms < SL_WINDOW_CUT_EVERY_MS)
        return;
    int64_t cut = (s->leased.n - s->leased.npbatch) / 2; /* the calls at the dispatchers */
    if (cut < SL_WINDOW_MIN)
        cut = SL_WINDOW_MIN;
    if (hs->cut == 0 || cut < hs->cut)
        hs->cut = cut;
    hs->cut_at_ms = now_ms;
    hs->answers = 0;
    s->st.window_cuts++;
}

void sl_holders_on_answer(sl_sched_t *s)
{
    struct sl_holders *hs = s->holders;
    if (hs->cut == 0 || ++hs->answers < hs->cut)
        return;
    hs->answers = 0;
    if (++hs->cut >= heard_window(s))
        hs->cut = 0;
}

/* Settles one lease of a dead incarnation: its charges stay (the call may have counted at the
 * provider), and the job goes again or fails, as holders.h says. */
static sl_err_t settle_lost(sl_sched_t *s, job_t *j, const char *who, int64_t now_ms)
{
    int dep = j->deployment;
    const char *dep_name = dep >= 0 ? s->cfg->deployments[dep].name : "(removed)";
    sl_err_t rc = sl_reservation_settle(s, j, END_EXPIRED, "expired", -1, -1, -1,
                                        "dispatcher_lost", now_ms, NULL);
    if (rc != SL_OK)
        return rc;
    char message[512];
    if (dep >= 0 && s->cfg->deployments[dep].idempotent) {
        s->st.lost_redispatched++;
        snprintf(message, sizeof message,
                 "dispatcher %s died during the call; deployment %s is idempotent, so the job "
                 "is sent again under the same Idempotency-Key",
                 who, dep_name);
        return sl_retry_or_fail(s, j, 0, SL_REASON_DISPATCHER_LOST, message, now_ms);
    }
    s->st.lost_failed++;
    snprintf(message, sizeof message,
             "dispatcher %s died during the call: the provider may have run it, and deployment "
             "%s is not idempotent, so it is not sent again (resubmit under a new idempotency "
             "key if a second run is acceptable)",
             who, dep_name);
    sl_logf(SL_LOG_WARN, "job", j->id, "job %s failed: %s", j->id, message);
    sl_job_list_del(&s->leased, j);
    return sl_outcome_fail(s, j, SL_STATUS_FAILED, SL_ERRTYPE_PROVIDER, SL_REASON_DISPATCHER_LOST,
                           SL_DECISION_ADMITTED_PROVIDER_REJECTED, 0, message, now_ms);
}

/* Declares incarnation h dead and settles the leases it held. */
static sl_err_t declare_dead(sl_sched_t *s, const holder_t *h, const char *why, int64_t now_ms)
{
    s->st.dispatchers_lost++;
    int held = 0;
    for (int i = 0; i < s->leased.n; i++)
        held += s->leased.items[i]->lease->holder == h->id;
    sl_warn("dispatcher %s (incarnation %.8s) is dead: %s; settling the %d call(s) it held",
            h->name, h->incarnation, why, held);
    char who[160];
    snprintf(who, sizeof who, "%s (incarnation %.8s)", h->name, h->incarnation);
    for (int i = 0; i < s->leased.n;) {
        job_t *j = s->leased.items[i];
        if (j->lease->holder != h->id) {
            i++;
            continue;
        }
        sl_err_t rc = settle_lost(s, j, who, now_ms);
        if (rc != SL_OK)
            return rc;
        /* j left the leased list, so index i now holds another job */
    }
    return SL_OK;
}

static holder_t *find(struct sl_holders *hs, const char *name)
{
    for (int i = 0; i < hs->n; i++)
        if (strcmp(hs->h[i].name, name) == 0)
            return &hs->h[i];
    return NULL;
}

/* A slot for a name not tracked yet: a new one, or the tombstone heard from longest ago when
 * SL_HOLDERS_MAX are tracked (a tombstone only refuses replays, and a replay as old as that
 * one's last heartbeat is refused as stale anyway); NULL when every slot is a live dispatcher
 * or memory ran out (*rc says which). */
static holder_t *new_slot(struct sl_holders *hs, sl_err_t *rc)
{
    *rc = SL_OK;
    if (hs->n == SL_HOLDERS_MAX) {
        holder_t *oldest = NULL;
        for (int i = 0; i < hs->n; i++)
            if (hs->h[i].dead && (oldest == NULL || hs->h[i].heard_ms < oldest->heard_ms))
                oldest = &hs->h[i];
        return oldest;
    }
    if (hs->n == hs->cap) {
        int ncap = hs->cap ? 2 * hs->cap : 8;
        holder_t *nh = realloc(hs->h, (size_t)ncap * sizeof *nh);
        if (nh == NULL) {
            *rc = SL_ENOMEM;
            return NULL;
        }
        hs->h = nh;
        hs->cap = ncap;
    }
    return &hs->h[hs->n++];
}

static void take(struct sl_holders *hs, holder_t *h, const sl_msg_heartbeat_t *m, int64_t now_ms)
{
    snprintf(h->name, sizeof h->name, "%s", m->dispatcher);
    snprintf(h->incarnation, sizeof h->incarnation, "%s", m->incarnation);
    h->started_ms = m->started_ms;
    h->sent_ms = m->sent_ms;
    h->heard_ms = now_ms;
    h->max_in_flight = m->max_in_flight;
    h->dead = 0;
    if (++hs->next_id == 0)
        hs->next_id = 1;
    h->id = hs->next_id;
}

sl_err_t sl_holders_on_heartbeat(sl_sched_t *s, json_t *doc, int64_t now_ms)
{
    struct sl_holders *hs = s->holders;
    char why[256];
    sl_msg_heartbeat_t m;
    const json_t *attempts = NULL;
    if (sl_schema_validate(s->heartbeat_schema, doc, why, sizeof why) != SL_OK ||
        sl_msg_heartbeat_read(doc, &m, &attempts) != SL_OK) {
        s->st.heartbeats_refused++;
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN, "invalid dispatcher heartbeat ignored: %s",
                     why);
        return SL_OK;
    }
    holder_t *h = find(hs, m.dispatcher);
    if (h != NULL && strcmp(h->incarnation, m.incarnation) != 0) {
        if (m.started_ms <= h->started_ms) {
            /* An incarnation already replaced (a late heartbeat, or a replay): its leases were
             * settled when its successor spoke. */
            s->st.heartbeats_refused++;
            sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_INFO,
                         "heartbeat of a replaced incarnation of dispatcher %s ignored",
                         m.dispatcher);
            return SL_OK;
        }
        if (!h->dead) {
            sl_err_t rc = declare_dead(s, h, "a newer incarnation started", now_ms);
            if (rc != SL_OK)
                return rc;
        }
        take(hs, h, &m, now_ms);
    } else if (h != NULL) {
        if (h->dead) {
            /* Its leases were settled when it fell silent: a late or replayed heartbeat may
             * not make it alive again, count its capacity, or claim leases. */
            s->st.heartbeats_refused++;
            sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN,
                         "heartbeat of dispatcher %s (incarnation %.8s) ignored: it was found "
                         "dead and its calls were settled; restart it",
                         h->name, h->incarnation);
            return SL_OK;
        }
        /* One older than the newest taken (its copies reach a sharded scheduler through
         * several partitions, in any order; or a replay) or a repeat of it tags its attempts
         * (only a current lease's reservation id matches, so a replay tags nothing) but does
         * not keep a silent dispatcher alive. */
        if (m.sent_ms > h->sent_ms) {
            h->sent_ms = m.sent_ms;
            h->heard_ms = now_ms;
        }
    } else {
        if (m.sent_ms < now_ms - s->cfg->dispatcher_dead_ms) {
            /* A dispatcher not tracked must speak now: an old heartbeat of one found dead long
             * ago (a replay) would otherwise make it alive and count its capacity again. */
            s->st.heartbeats_refused++;
            sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN,
                         "heartbeat of dispatcher %s ignored: sent %lld ms ago by this "
                         "scheduler's clock, more than dispatcher_dead_ms (a replay, an old "
                         "backlog, or clocks apart)",
                         m.dispatcher, (long long)(now_ms - m.sent_ms));
            return SL_OK;
        }
        sl_err_t rc;
        h = new_slot(hs, &rc);
        if (rc != SL_OK)
            return rc;
        if (h == NULL) {
            s->st.heartbeats_refused++;
            sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN,
                         "heartbeat of dispatcher %s ignored: %d dispatchers are tracked "
                         "already; its calls wait for their leases",
                         m.dispatcher, SL_HOLDERS_MAX);
            return SL_OK;
        }
        take(hs, h, &m, now_ms);
        sl_info("dispatcher %s (incarnation %.8s) heard from; it runs up to %lld calls at once",
                h->name, h->incarnation,
                (long long)(h->max_in_flight > 0 ? h->max_in_flight : s->cfg->max_in_flight));
    }
    s->st.heartbeats++;
    size_t i;
    const json_t *a;
    json_array_foreach(attempts, i, a)
    {
        const char *job_id = json_string_value(json_object_get(a, "job_id"));
        const char *res_id = json_string_value(json_object_get(a, "reservation_id"));
        job_t *j = sl_hmap_get(s->jobs, job_id);
        /* Only the current lease: an older attempt's holder says nothing of this one. */
        if (j != NULL && j->state == J_LEASED && strcmp(j->lease->res_id, res_id) == 0)
            j->lease->holder = h->id;
    }
    return SL_OK;
}

sl_err_t sl_holders_tick(sl_sched_t *s, int64_t now_ms)
{
    struct sl_holders *hs = s->holders;
    for (int i = 0; i < hs->n; i++) {
        holder_t *h = &hs->h[i];
        if (h->dead || now_ms - h->heard_ms < s->cfg->dispatcher_dead_ms)
            continue;
        h->dead = 1;
        char why[96];
        snprintf(why, sizeof why, "no heartbeat for %lld ms", (long long)(now_ms - h->heard_ms));
        sl_err_t rc = declare_dead(s, h, why, now_ms);
        if (rc != SL_OK)
            return rc;
    }
    return SL_OK;
}

void sl_holders_extend(sl_sched_t *s, int64_t gap_ms)
{
    for (int i = 0; i < s->holders->n; i++)
        s->holders->h[i].heard_ms += gap_ms;
}
