/* config_limits.c - the limits of a scope (its "buckets" and shorthands such as a deployment's
 * "rpm"), with the defaults each dimension and each side of the hierarchy gives them (see
 * config_limits.h).
 */
#include "config_limits.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "calendar.h"

static const char *const dimension_names[SL_DIM_COUNT] = {
    "requests", "input_tokens",     "output_tokens",  "total_tokens", "concurrency",
    "spend",    "requests_per_day", "tokens_per_day", "ramp", "enqueued_tokens"};
static const char *const limit_alg_names[SL_LIMIT_ALG_COUNT] = {
    "token_bucket", "sliding_window", "calendar", "gauge", "rolling", "ramp"};

const char *sl_dimension_name(sl_dimension_t d)
{
    return (unsigned)d < SL_DIM_COUNT ? dimension_names[d] : "unknown";
}

const char *sl_limit_alg_name(sl_limit_alg_t a)
{
    return (unsigned)a < SL_LIMIT_ALG_COUNT ? limit_alg_names[a] : "unknown";
}

int sl_dimension_is_tokens(sl_dimension_t d)
{
    return d == SL_DIM_INPUT_TOKENS || d == SL_DIM_OUTPUT_TOKENS || d == SL_DIM_TOTAL_TOKENS ||
           d == SL_DIM_TOKENS_PER_DAY;
}

static int name_index(const char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i], name) == 0)
            return i;
    }
    return -1;
}

const cfg_limit_defaults_t cfg_caller_defaults = {
    .slices = 1, .headroom = 1.0, .burst_fraction = 1.0};
const cfg_limit_defaults_t cfg_provider_defaults = {
    .slices = 60, .headroom = 0.97, .burst_fraction = 0.5};

/* Appends a zeroed limit named name to ls; NULL (and a failure) when ls has a limit of that
 * name already or memory runs out. */
static sl_limit_cfg_t *limits_push(cfg_ctx_t *c, cfg_limits_t *ls, const char *where,
                                   const char *name)
{
    for (int i = 0; i < ls->n; i++) {
        if (strcmp(ls->items[i].name, name) == 0) {
            cfg_fail(c, "%s: two limits named \"%s\"", where, name);
            return NULL;
        }
    }
    if (sl_grow((void **)&ls->items, sizeof *ls->items, &ls->cap, (size_t)ls->n + 1, INT_MAX) !=
        SL_OK) {
        cfg_fail(c, "out of memory");
        return NULL;
    }
    sl_limit_cfg_t *l = &ls->items[ls->n++];
    memset(l, 0, sizeof *l);
    l->name = name;
    return l;
}

/* Fills the defaults of a limit of dimension dim in a scope with defaults def. */
static void limit_defaults(const sl_config_t *cfg, sl_limit_cfg_t *l, sl_dimension_t dim,
                           const cfg_limit_defaults_t *def)
{
    l->dimension = dim;
    l->slices = def->slices;
    l->headroom = def->headroom;
    l->burst_fraction = def->burst_fraction;
    l->full_hold_ms = def->full_hold_ms;
    l->burst = 1.0;
    l->reset_tz = "";
    l->period_ms = cfg->minute_ms;
    l->ramp_unit = SL_DIM_REQUESTS;
    switch (dim) {
    case SL_DIM_CONCURRENCY:
    case SL_DIM_ENQUEUED_TOKENS:
        l->algorithm = SL_LIMIT_GAUGE;
        break;
    case SL_DIM_SPEND:
        l->algorithm = SL_LIMIT_ROLLING;
        l->period_ms = 30 * 1440 * cfg->minute_ms;
        l->slices = 30;
        l->strict = 1;
        break;
    case SL_DIM_REQUESTS_PER_DAY:
    case SL_DIM_TOKENS_PER_DAY:
        l->algorithm = SL_LIMIT_CALENDAR;
        l->period_ms = 86400000;
        l->reset_tz = "UTC";
        l->strict = 1;
        break;
    case SL_DIM_RAMP:
        l->algorithm = SL_LIMIT_RAMP;
        l->growth = 0.5;
        break;
    default:
        l->algorithm = SL_LIMIT_TOKEN_BUCKET;
        break;
    }
}

/* Parses one entry of a scope's "buckets" array into ls. */
static void load_limit(cfg_ctx_t *c, const sl_config_t *cfg, json_t *arr, size_t i,
                       const char *owner, const cfg_limit_defaults_t *def, cfg_limits_t *ls)
{
    static const char *const keys[] = {"name",     "dimension",      "algorithm", "capacity",
                                       "period",   "period_ms",      "slices",    "burst",
                                       "headroom", "burst_fraction", "reset_tz",  "growth",
                                       "unit",     "strict",         "full_hold_ms", NULL};
    char section[128], where[160];
    snprintf(section, sizeof section, "%s.buckets", owner);
    json_t *lj = cfg_array_object(c, arr, i, section, keys, where, sizeof where);
    if (lj == NULL)
        return;
    const char *dim_name = cfg_get_str(c, lj, where, "dimension", NULL);
    int dim = dim_name != NULL ? name_index(dimension_names, SL_DIM_COUNT, dim_name) : -1;
    if (dim < 0) {
        cfg_fail(c,
                 "%s: \"dimension\" must be one of requests, input_tokens, output_tokens, "
                 "total_tokens, concurrency, spend, requests_per_day, tokens_per_day, ramp, "
                 "enqueued_tokens",
                 where);
        return;
    }
    sl_limit_cfg_t *l = limits_push(c, ls, where, cfg_get_str(c, lj, where, "name", dim_name));
    if (l == NULL)
        return;
    limit_defaults(cfg, l, (sl_dimension_t)dim, def);
    const char *alg = cfg_get_str(c, lj, where, "algorithm", limit_alg_names[l->algorithm]);
    int a = name_index(limit_alg_names, SL_LIMIT_ALG_COUNT, alg);
    if (a < 0)
        cfg_fail(c, "%s: unknown algorithm \"%s\"", where, alg);
    else
        l->algorithm = (sl_limit_alg_t)a;
    int held = l->dimension == SL_DIM_CONCURRENCY || l->dimension == SL_DIM_ENQUEUED_TOKENS;
    if ((l->algorithm == SL_LIMIT_GAUGE) != held)
        cfg_fail(c,
                 "%s: concurrency and enqueued_tokens are counted by a gauge, and a gauge "
                 "counts only those",
                 where);
    if ((l->algorithm == SL_LIMIT_RAMP) != (l->dimension == SL_DIM_RAMP))
        cfg_fail(c, "%s: a ramp limit needs dimension \"ramp\" and algorithm \"ramp\"", where);
    l->capacity = cfg_get_real(c, lj, where, "capacity", -1, 0, 1e15);
    if (!(l->capacity > 0))
        cfg_fail(c, "%s: needs a \"capacity\" > 0", where);
    const char *period = cfg_get_str(c, lj, where, "period", "");
    static const char *const periods[] = {"second", "minute", "hour", "day", "month"};
    int p = period[0] != '\0' ? name_index(periods, 5, period) : -2;
    const int64_t scaled[] = {cfg->minute_ms / 60, cfg->minute_ms, 60 * cfg->minute_ms,
                              1440 * cfg->minute_ms, 30 * 1440 * cfg->minute_ms};
    if (p == -1)
        cfg_fail(c, "%s: \"period\" must be second, minute, hour, day or month", where);
    else if (p >= 0)
        l->period_ms = scaled[p] > 0 ? scaled[p] : 1;
    /* A calendar "day" is a real local day in reset_tz (a daily quota resets at midnight there,
     * however long a test's minute is); other calendar periods are fixed windows from the epoch. */
    if (l->algorithm == SL_LIMIT_CALENDAR && p != -2 && p != 3)
        l->reset_tz = "";
    l->period_ms = cfg_get_int(c, lj, where, "period_ms", l->period_ms, 1, CFG_I64MAX);
    if (l->algorithm == SL_LIMIT_CALENDAR && json_object_get(lj, "period_ms") != NULL)
        l->reset_tz = "";
    l->reset_tz = cfg_get_str(c, lj, where, "reset_tz", l->reset_tz);
    if (l->reset_tz[0] != '\0' && l->algorithm != SL_LIMIT_CALENDAR)
        cfg_fail(c, "%s: \"reset_tz\" is for calendar limits", where);
    if (l->reset_tz[0] != '\0' && !sl_calendar_zone_ok(l->reset_tz))
        cfg_fail(c, "%s: unknown time zone \"%s\" (install tzdata?)", where, l->reset_tz);
    l->slices = cfg_get_int(c, lj, where, "slices", l->slices, 1, 256);
    if ((l->algorithm == SL_LIMIT_SLIDING_WINDOW || l->algorithm == SL_LIMIT_ROLLING) &&
        l->period_ms < l->slices)
        cfg_fail(c, "%s: a period of %lld ms cannot hold %lld slices", where,
                 (long long)l->period_ms, (long long)l->slices);
    l->burst = cfg_get_real(c, lj, where, "burst", l->burst, 1.0, 1e6);
    l->headroom = cfg_get_real(c, lj, where, "headroom", l->headroom, 0.01, 1.0);
    l->burst_fraction = cfg_get_real(c, lj, where, "burst_fraction", l->burst_fraction, 0.01, 1.0);
    l->full_hold_ms = cfg_get_int(c, lj, where, "full_hold_ms", l->full_hold_ms, 0, 60000);
    l->growth = cfg_get_real(c, lj, where, "growth", l->growth, 0, 100);
    const char *unit = cfg_get_str(c, lj, where, "unit", "requests");
    if (strcmp(unit, "requests") == 0)
        l->ramp_unit = SL_DIM_REQUESTS;
    else if (strcmp(unit, "tokens") == 0)
        l->ramp_unit = SL_DIM_TOTAL_TOKENS;
    else
        cfg_fail(c, "%s: \"unit\" must be \"requests\" or \"tokens\"", where);
    json_t *st = json_object_get(lj, "strict");
    if (st != NULL && !json_is_boolean(st))
        cfg_fail(c, "%s: \"strict\" must be true or false", where);
    else if (st != NULL)
        l->strict = json_is_true(st);
}

void cfg_add_shorthand(cfg_ctx_t *c, const sl_config_t *cfg, cfg_limits_t *ls, const char *where,
                       const char *name, sl_dimension_t dim, double capacity,
                       const cfg_limit_defaults_t *def)
{
    if (!(capacity > 0))
        return;
    sl_limit_cfg_t *l = limits_push(c, ls, where, name);
    if (l == NULL)
        return;
    limit_defaults(cfg, l, dim, def);
    l->capacity = capacity;
}

void cfg_finish_limits(cfg_ctx_t *c, const sl_config_t *cfg, json_t *obj, const char *where,
                       const cfg_limit_defaults_t *def, cfg_limits_t *ls, sl_limit_cfg_t **out,
                       int *n)
{
    json_t *arr = cfg_get_arr(c, obj, where, "buckets");
    for (size_t i = 0; i < json_array_size(arr); i++)
        load_limit(c, cfg, arr, i, where, def, ls);
    *out = ls->items;
    *n = ls->n;
}
