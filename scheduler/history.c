/* history.c - the console's last minutes and queue figures (see history.h).
 *
 * Reading order: the state and its (re)start, the core's hooks, the sample, the two answers.
 */
#include "history.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    SHARE_TAU_MS = 60000,
    SHARES_SHOWN = 20,
    SHARE_CELLS_MAX = 1 << 22,
    SL_HISTORY_ID_MAX = 160
};

struct sl_history {
    const sl_config_t *cfg; /* the config the history was started for; NULL = not yet */
    int n, head;            /* samples held (<= SL_HISTORY_SAMPLES), where the next goes */
    int64_t t[SL_HISTORY_SAMPLES];
    /* tracked buckets: ledger index, deployment, and per sample (bucket-major) */
    int nb, bucket[SL_HISTORY_MAX_BUCKETS], bdep[SL_HISTORY_MAX_BUCKETS];
    char (*ids)[SL_HISTORY_ID_MAX];
    double *reserved, *charged;
    uint8_t *clamped;
    /* per deployment and sample: the core's counts of answers, 429s and 5xx, and its pause;
     * and room for what sl_sched_deployments_info fills in */
    int nd;
    int64_t *scalls, *s429, *s5xx;
    uint8_t *paused;
    int *in_flight;
    int64_t *paused_ms;
    /* per route and class: the last queue waits (ms), how many were seen, expiries */
    int32_t *waits;
    int64_t *nwaits;
    int64_t expired[SL_CLASS_COUNT];
    /* per route and tenant: admitted tokens, decayed with SHARE_TAU_MS; and per route */
    double *share, *share_sum;
    int64_t decayed_ms;
    int nroutes, ntenants; /* of cfg, kept here so that the hooks never read a freed config */
};

static void drop(sl_history_t *h)
{
    free(h->ids);
    free(h->reserved);
    free(h->charged);
    free(h->clamped);
    free(h->scalls);
    free(h->s429);
    free(h->s5xx);
    free(h->paused);
    free(h->in_flight);
    free(h->paused_ms);
    free(h->waits);
    free(h->nwaits);
    free(h->share);
    free(h->share_sum);
    memset(h, 0, sizeof *h);
}

sl_history_t *sl_history_new(void)
{
    return calloc(1, sizeof(sl_history_t));
}

void sl_history_reset(sl_history_t *h)
{
    if (h != NULL)
        drop(h);
}

void sl_history_free(sl_history_t *h)
{
    if (h == NULL)
        return;
    drop(h);
    free(h);
}

/* Starts again for cfg: finds the buckets to track and sizes everything; 0 when out of memory
 * (the history then stays empty until the next try). */
static int restart(sl_history_t *h, sl_sched_t *s, const sl_config_t *cfg, int64_t now_ms)
{
    drop(h);
    h->ids = calloc(SL_HISTORY_MAX_BUCKETS, sizeof *h->ids);
    if (h->ids == NULL)
        return 0;
    for (int d = 0; d < cfg->ndeployments; d++) {
        int np;
        const int *path = sl_sched_deployment_path(s, d, &np);
        for (int k = 0; k < np && h->nb < SL_HISTORY_MAX_BUCKETS; k++) {
            sl_sched_bucket_info_t bi;
            sl_sched_bucket_info(s, path[k], now_ms, &bi);
            int seen = 0;
            for (int i = 0; i < h->nb; i++)
                seen |= h->bucket[i] == path[k];
            if (bi.provider_side && !seen) {
                snprintf(h->ids[h->nb], sizeof h->ids[h->nb], "%s", bi.id);
                h->bucket[h->nb] = path[k];
                h->bdep[h->nb++] = d;
            }
        }
    }
    size_t ns = SL_HISTORY_SAMPLES, nb = (size_t)h->nb + 1, nd = (size_t)cfg->ndeployments + 1;
    size_t nq = (size_t)cfg->nroutes * SL_CLASS_COUNT + 1;
    size_t cells = (size_t)cfg->nroutes * (size_t)cfg->ntenants;
    h->reserved = calloc(nb * ns, sizeof *h->reserved);
    h->charged = calloc(nb * ns, sizeof *h->charged);
    h->clamped = calloc(nb * ns, 1);
    h->scalls = calloc(nd * ns, sizeof *h->scalls);
    h->s429 = calloc(nd * ns, sizeof *h->s429);
    h->s5xx = calloc(nd * ns, sizeof *h->s5xx);
    h->paused = calloc(nd * ns, 1);
    h->in_flight = calloc(nd, sizeof *h->in_flight);
    h->paused_ms = calloc(nd, sizeof *h->paused_ms);
    h->waits = calloc(nq * SL_HISTORY_WAITS, sizeof *h->waits);
    h->nwaits = calloc(nq, sizeof *h->nwaits);
    if (cells <= SHARE_CELLS_MAX) {
        h->share = calloc(cells + 1, sizeof *h->share);
        h->share_sum = calloc((size_t)cfg->nroutes + 1, sizeof *h->share_sum);
    }
    if (h->reserved == NULL || h->charged == NULL || h->clamped == NULL || h->scalls == NULL ||
        h->s429 == NULL || h->s5xx == NULL || h->paused == NULL || h->in_flight == NULL ||
        h->paused_ms == NULL || h->waits == NULL || h->nwaits == NULL ||
        (cells <= SHARE_CELLS_MAX && (h->share == NULL || h->share_sum == NULL))) {
        drop(h);
        return 0;
    }
    h->nd = cfg->ndeployments;
    h->nroutes = cfg->nroutes;
    h->ntenants = cfg->ntenants;
    h->cfg = cfg;
    h->decayed_ms = now_ms;
    return 1;
}

/* ---- the core's hooks ---- */

static void on_leased(void *arg, int tenant, int route, int cls, int deployment, double tokens,
                      int64_t queue_wait_ms)
{
    (void)deployment;
    sl_history_t *h = arg;
    if (h->cfg == NULL || route < 0 || route >= h->nroutes || cls < 0 || cls >= SL_CLASS_COUNT)
        return;
    if (queue_wait_ms >= 0) {
        int q = route * SL_CLASS_COUNT + cls;
        int32_t w = queue_wait_ms > INT32_MAX ? INT32_MAX : (int32_t)queue_wait_ms;
        h->waits[(size_t)q * SL_HISTORY_WAITS + (size_t)(h->nwaits[q] % SL_HISTORY_WAITS)] = w;
        h->nwaits[q]++;
    }
    if (h->share != NULL && tenant >= 0 && tenant < h->ntenants && tokens > 0 && isfinite(tokens)) {
        h->share[(size_t)route * (size_t)h->ntenants + (size_t)tenant] += tokens;
        h->share_sum[route] += tokens;
    }
}

static void on_finished(void *arg, int cls, const char *status, int attempts)
{
    (void)attempts;
    sl_history_t *h = arg;
    if (cls >= 0 && cls < SL_CLASS_COUNT && strcmp(status, "expired") == 0)
        h->expired[cls]++;
}

static const sl_sched_observer_t observer = {on_leased, NULL, NULL, NULL, on_finished};

const sl_sched_observer_t *sl_history_observer(void)
{
    return &observer;
}

/* ---- the sample ---- */

void sl_history_sample(sl_history_t *h, sl_sched_t *s, const sl_config_t *cfg, int64_t now_ms)
{
    if (h->cfg != cfg && !restart(h, s, cfg, now_ms))
        return;
    size_t i = (size_t)h->head;
    h->t[i] = now_ms;
    for (int k = 0; k < h->nb; k++) {
        sl_sched_bucket_info_t bi;
        sl_sched_bucket_info(s, h->bucket[k], now_ms, &bi);
        size_t at = (size_t)k * SL_HISTORY_SAMPLES + i;
        h->reserved[at] = bi.reserved_total;
        h->charged[at] = bi.charged_total;
        h->clamped[at] = (uint8_t)bi.clamped;
    }
    sl_sched_deployments_info(s, now_ms, h->in_flight, h->paused_ms);
    for (int d = 0; d < h->nd; d++) {
        size_t at = (size_t)d * SL_HISTORY_SAMPLES + i;
        sl_sched_deployment_answers(s, d, &h->scalls[at], &h->s429[at], &h->s5xx[at]);
        h->paused[at] = h->paused_ms[d] > 0;
    }
    h->head = (h->head + 1) % SL_HISTORY_SAMPLES;
    if (h->n < SL_HISTORY_SAMPLES)
        h->n++;
    /* The shares forget with a minute's time constant. */
    if (h->share != NULL && now_ms > h->decayed_ms) {
        double keep = exp(-(double)(now_ms - h->decayed_ms) / SHARE_TAU_MS);
        size_t cells = (size_t)h->nroutes * (size_t)h->ntenants;
        for (size_t c = 0; c < cells; c++)
            h->share[c] *= keep;
        for (int r = 0; r < h->nroutes; r++)
            h->share_sum[r] *= keep;
        h->decayed_ms = now_ms;
    }
}

/* ---- the answers ---- */

/* The samples of one series, oldest first: doubles (d), counts (i) or flags (b); the others
 * NULL. */
static json_t *series(const sl_history_t *h, const double *d, const int64_t *i, const uint8_t *b)
{
    json_t *a = json_array();
    int first = (h->head - h->n + SL_HISTORY_SAMPLES) % SL_HISTORY_SAMPLES;
    for (int k = 0; k < h->n; k++) {
        int at = (first + k) % SL_HISTORY_SAMPLES;
        json_array_append_new(a, d != NULL   ? json_real(d[at])
                                 : i != NULL ? json_integer(i[at])
                                             : json_integer(b[at]));
    }
    return a;
}

#define SERIES_D(v) series(h, (v), NULL, NULL)
#define SERIES_I(v) series(h, NULL, (v), NULL)
#define SERIES_B(v) series(h, NULL, NULL, (v))

json_t *sl_history_json(const sl_history_t *h)
{
    json_t *doc = json_object();
    json_t *buckets = json_array(), *deps = json_array();
    json_object_set_new(doc, "interval_ms", json_integer(1000));
    json_object_set_new(doc, "t", SERIES_I(h->t));
    json_object_set_new(doc, "buckets", buckets);
    json_object_set_new(doc, "deployments", deps);
    for (int k = 0; h->cfg != NULL && k < h->nb; k++) {
        size_t at = (size_t)k * SL_HISTORY_SAMPLES;
        json_array_append_new(buckets, json_pack("{s:s, s:s, s:o, s:o, s:o}", "id", h->ids[k],
                                                 "deployment", h->cfg->deployments[h->bdep[k]].name,
                                                 "reserved", SERIES_D(h->reserved + at), "charged",
                                                 SERIES_D(h->charged + at), "clamped",
                                                 SERIES_B(h->clamped + at)));
    }
    for (int d = 0; h->cfg != NULL && d < h->nd; d++) {
        size_t at = (size_t)d * SL_HISTORY_SAMPLES;
        json_array_append_new(
            deps,
            json_pack("{s:s, s:o, s:o, s:o, s:o}", "name", h->cfg->deployments[d].name, "calls",
                      SERIES_I(h->scalls + at), "rate_limited", SERIES_I(h->s429 + at),
                      "unavailable", SERIES_I(h->s5xx + at), "paused", SERIES_B(h->paused + at)));
    }
    return doc;
}

static int by_value(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The recent waits' percentiles of route r, class c (into o). */
static void add_waits(const sl_history_t *h, int q, json_t *o)
{
    int64_t seen = h->nwaits[q];
    int n = seen < SL_HISTORY_WAITS ? (int)seen : SL_HISTORY_WAITS;
    json_object_set_new(o, "waits_seen", json_integer(seen));
    if (n == 0) {
        json_object_set_new(o, "wait_p50_ms", json_null());
        json_object_set_new(o, "wait_p90_ms", json_null());
        json_object_set_new(o, "wait_p99_ms", json_null());
        return;
    }
    int32_t sorted[SL_HISTORY_WAITS];
    memcpy(sorted, h->waits + (size_t)q * SL_HISTORY_WAITS, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, by_value);
    json_object_set_new(o, "wait_p50_ms", json_integer(sorted[(n - 1) * 50 / 100]));
    json_object_set_new(o, "wait_p90_ms", json_integer(sorted[(n - 1) * 90 / 100]));
    json_object_set_new(o, "wait_p99_ms", json_integer(sorted[(n - 1) * 99 / 100]));
}

/* The tenants with the largest shares of route r, at most SHARES_SHOWN. */
static json_t *shares_json(const sl_history_t *h, const sl_sched_tenant_info_t *ti, int r)
{
    json_t *a = json_array();
    if (h->share == NULL || !(h->share_sum[r] > 0))
        return a;
    const double *row = h->share + (size_t)r * (size_t)h->cfg->ntenants;
    int top[SHARES_SHOWN], ntop = 0;
    for (int t = 0; t < h->cfg->ntenants; t++) {
        if (!(row[t] > 1e-9 * h->share_sum[r]))
            continue;
        int at = ntop < SHARES_SHOWN ? ntop++ : SHARES_SHOWN;
        if (at == SHARES_SHOWN && row[t] <= row[top[SHARES_SHOWN - 1]])
            continue;
        if (at == SHARES_SHOWN)
            at = SHARES_SHOWN - 1;
        while (at > 0 && row[top[at - 1]] < row[t]) {
            top[at] = top[at - 1];
            at--;
        }
        top[at] = t;
    }
    for (int i = 0; i < ntop; i++) {
        int t = top[i];
        json_array_append_new(a,
                              json_pack("{s:s, s:f, s:I, s:f}", "tenant", h->cfg->tenants[t].name,
                                        "share", row[t] / h->share_sum[r], "weight",
                                        (json_int_t)ti[t].weight, "guarantee", ti[t].guarantee));
    }
    return a;
}

json_t *sl_history_queues_json(const sl_history_t *h, sl_sched_t *s, const sl_config_t *cfg,
                               int64_t now_ms)
{
    int64_t *oldest = calloc((size_t)cfg->nroutes * SL_CLASS_COUNT + 1, sizeof *oldest);
    sl_sched_tenant_info_t *ti = calloc((size_t)cfg->ntenants + 1, sizeof *ti);
    if (oldest == NULL || ti == NULL) {
        free(oldest);
        free(ti);
        return NULL;
    }
    sl_sched_oldest_queued(s, oldest);
    sl_sched_tenants_info(s, ti);
    int current = h->cfg == cfg;
    json_t *routes = json_array();
    for (int r = 0; r < cfg->nroutes; r++) {
        json_t *classes = json_array();
        for (int c = 0; c < SL_CLASS_COUNT; c++) {
            int q = r * SL_CLASS_COUNT + c;
            json_t *o = json_pack("{s:s, s:I}", "class", sl_class_name((sl_class_t)c), "depth",
                                  (json_int_t)sl_sched_queue_depth(s, r, c));
            json_object_set_new(o, "oldest_wait_ms",
                                oldest[q] > 0 ? json_integer(now_ms - oldest[q]) : json_null());
            if (current)
                add_waits(h, q, o);
            json_array_append_new(classes, o);
        }
        json_array_append_new(
            routes, json_pack("{s:s, s:I, s:o, s:o}", "route", cfg->routes[r].name, "blocked_ms",
                              (json_int_t)sl_sched_route_blocked_ms(s, r, now_ms), "classes",
                              classes, "shares", current ? shares_json(h, ti, r) : json_array()));
    }
    sl_sched_stats_t st;
    sl_sched_stats(s, &st);
    json_t *expired = json_object();
    for (int c = 0; c < SL_CLASS_COUNT; c++)
        json_object_set_new(expired, sl_class_name((sl_class_t)c), json_integer(h->expired[c]));
    json_t *doc = json_pack(
        "{s:I, s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}, "
        "s:{s:I, s:I, s:I, s:I}}",
        "now_ms", (json_int_t)now_ms, "routes", routes, "totals", "received",
        (json_int_t)st.jobs_received, "dispatched", (json_int_t)st.dispatched, "succeeded",
        (json_int_t)st.succeeded, "failed", (json_int_t)st.failed, "expired",
        (json_int_t)st.expired, "cancelled", (json_int_t)st.cancelled, "shed", (json_int_t)st.shed,
        "queue_full", (json_int_t)st.queue_full, "retried", (json_int_t)st.retried, "rate_limited",
        (json_int_t)st.provider_429, "unavailable", (json_int_t)st.provider_5xx, "expired_by_class",
        expired, "estimates", "reserved", (json_int_t)st.tokens_reserved, "used",
        (json_int_t)st.tokens_settled, "over_reserved", (json_int_t)st.tokens_over_reserved,
        "under_reserved", (json_int_t)st.tokens_under_reserved);
    free(oldest);
    free(ti);
    return doc;
}
