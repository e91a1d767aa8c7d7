/* sim.c - config, request decisions, OpenAI bodies and counters of the provider simulator
 * (see sim.h).
 *
 * Every response is allocated, with a fixed-size body buffer and header table, before any state
 * changes, so a failed sl_sim_handle leaves the simulator as it was. Names that end up in bodies
 * (deployment, model) are restricted by the config to characters that need no JSON escaping;
 * anything taken from the request is escaped.
 */
#include "sim.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "idem.h"
#include "limiter.h"
#include "log.h"

#define ORGANIZATION "org-sim"
#define RATE_LIMIT_HELP "Visit https://platform.openai.com/account/rate-limits to learn more."
#define CHAT_SUFFIX "/v1/chat/completions"
#define NAME_MAX_LEN 64
#define MODEL_MAX_LEN 128
#define IDEMPOTENCY_KEY_MAX_LEN 255
#define MAX_TOKENS_MAX 1000000000LL
#define BODY_CAP 4096
#define MAX_HEADERS 24
#define DAY_MS_DEFAULT 86400000LL
/* SDKs retry a 429 on their own; past this wait a daily quota tells them not to. */
#define SHOULD_NOT_RETRY_AFTER_MS 120000

/* ---- Configuration ---------------------------------------------------------------------- */

typedef struct {
    char *name;  /* URL segment: /<name>/v1/chat/completions */
    char *model; /* echoed in bodies */
    int64_t rpm; /* 0 = unlimited */
    int64_t tpm; /* 0 = unlimited */
    int64_t slices_per_minute;
    bool tpm_sum; /* charge prompt + max_tokens instead of their max */
    int64_t default_max_tokens;
    bool count_refused; /* refused requests still consume RPM */
    double ttft_ms;
    double ms_per_token;
    int64_t output_min;
    int64_t output_max;
    char *api_key;              /* NULL: any non-empty bearer token */
    int64_t itpm;               /* input tokens per minute, cache reads excluded; 0 = unlimited */
    int64_t otpm;               /* output tokens per minute; 0 = unlimited */
    bool otpm_max_tokens;       /* charge max_tokens up front, refund the unused part when sent */
    double cache_hit_share;     /* share of request bodies that hit the prompt cache */
    double cache_read_fraction; /* share of a hit's prompt that is read from the cache */
    int64_t rpd;                /* requests per day window; 0 = unlimited */
    int64_t day_ms;             /* length of a day window */
    bool anthropic_headers;     /* anthropic-ratelimit-* instead of x-ratelimit-* */
} dep_config_t;

struct sl_sim_config {
    int64_t minute_ms;
    int64_t max_pending;      /* in-flight 200s across deployments before 503 */
    int64_t idempotency_keys; /* keys remembered per deployment */
    size_t n_deps;
    dep_config_t *deps;
};

static const char *const top_keys[] = {"minute_ms", "deployments", "max_pending",
                                       "idempotency_keys", NULL};
static const char *const dep_keys[] = {"name",
                                       "model",
                                       "rpm",
                                       "tpm",
                                       "slices_per_minute",
                                       "tpm_counting",
                                       "default_max_tokens",
                                       "count_refused",
                                       "ttft_ms",
                                       "ms_per_token",
                                       "output_min",
                                       "output_max",
                                       "api_key",
                                       "itpm",
                                       "otpm",
                                       "otpm_counting",
                                       "cache_hit_share",
                                       "cache_read_fraction",
                                       "rpd",
                                       "day_ms",
                                       "headers",
                                       NULL};

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static bool check_keys(json_t *obj, const char *const *allowed, const char *where, char *err,
                       size_t errlen)
{
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val)
    {
        bool known = false;
        for (size_t i = 0; allowed[i] != NULL; i++) {
            if (strcmp(key, allowed[i]) == 0)
                known = true;
        }
        if (!known) {
            set_err(err, errlen, "%s: unknown key \"%s\"", where, key);
            return false;
        }
    }
    return true;
}

/* Reads an optional integer member (absent or null = def) within [min, max]. */
static bool get_int(json_t *obj, const char *key, int64_t def, int64_t min, int64_t max,
                    const char *where, int64_t *out, char *err, size_t errlen)
{
    json_t *val = json_object_get(obj, key);
    if (val == NULL || json_is_null(val)) {
        *out = def;
        return true;
    }
    if (!json_is_integer(val)) {
        set_err(err, errlen, "%s: \"%s\" must be an integer", where, key);
        return false;
    }
    json_int_t x = json_integer_value(val);
    if (x < 0) {
        set_err(err, errlen, "%s: \"%s\" must not be negative (got %lld)", where, key,
                (long long)x);
        return false;
    }
    if (x < min || x > max) {
        set_err(err, errlen, "%s: \"%s\" must be between %lld and %lld (got %lld)", where, key,
                (long long)min, (long long)max, (long long)x);
        return false;
    }
    *out = (int64_t)x;
    return true;
}

/* Reads an optional number member (integer or real; absent or null = def) within [0, max]. */
static bool get_number(json_t *obj, const char *key, double def, double max, const char *where,
                       double *out, char *err, size_t errlen)
{
    json_t *val = json_object_get(obj, key);
    if (val == NULL || json_is_null(val)) {
        *out = def;
        return true;
    }
    if (!json_is_number(val)) {
        set_err(err, errlen, "%s: \"%s\" must be a number", where, key);
        return false;
    }
    double x = json_number_value(val);
    if (x < 0) {
        set_err(err, errlen, "%s: \"%s\" must not be negative (got %g)", where, key, x);
        return false;
    }
    if (!(x <= max)) {
        set_err(err, errlen, "%s: \"%s\" must be at most %g (got %g)", where, key, max, x);
        return false;
    }
    *out = x;
    return true;
}

static bool get_bool(json_t *obj, const char *key, bool def, const char *where, bool *out,
                     char *err, size_t errlen)
{
    json_t *val = json_object_get(obj, key);
    if (val == NULL || json_is_null(val)) {
        *out = def;
        return true;
    }
    if (!json_is_boolean(val)) {
        set_err(err, errlen, "%s: \"%s\" must be true or false", where, key);
        return false;
    }
    *out = json_is_true(val);
    return true;
}

/* Characters allowed in names and models: they go into URLs and JSON bodies unescaped. */
static bool is_safe_name(const char *s, size_t max_len)
{
    size_t n = strlen(s);
    if (n == 0 || n > max_len)
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_' || c == '.' || c == ':';
        if (!ok)
            return false;
    }
    return true;
}

/* Reads an optional string member (absent or null: *out = NULL) into a malloc'd copy. */
static bool get_string(json_t *obj, const char *key, const char *where, char **out, char *err,
                       size_t errlen)
{
    *out = NULL;
    json_t *val = json_object_get(obj, key);
    if (val == NULL || json_is_null(val))
        return true;
    if (!json_is_string(val)) {
        set_err(err, errlen, "%s: \"%s\" must be a string", where, key);
        return false;
    }
    *out = strdup(json_string_value(val));
    if (*out == NULL) {
        set_err(err, errlen, "%s: out of memory", where);
        return false;
    }
    return true;
}

/* Reads an optional string member that must be one of choices (NULL-terminated; absent or null =
 * the first): *out gets its index. */
static bool get_choice(json_t *obj, const char *key, const char *const *choices, const char *where,
                       int *out, char *err, size_t errlen)
{
    *out = 0;
    json_t *val = json_object_get(obj, key);
    if (val == NULL || json_is_null(val))
        return true;
    for (int i = 0; json_is_string(val) && choices[i] != NULL; i++) {
        if (strcmp(json_string_value(val), choices[i]) == 0) {
            *out = i;
            return true;
        }
    }
    char list[128] = "";
    for (int i = 0; choices[i] != NULL; i++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s\"%s\"", i == 0 ? "" : " or ", choices[i]);
    }
    set_err(err, errlen, "%s: \"%s\" must be %s", where, key, list);
    return false;
}

static void dep_config_clear(dep_config_t *dep)
{
    free(dep->name);
    free(dep->model);
    free(dep->api_key);
}

static bool parse_deployment(json_t *obj, size_t index, dep_config_t *dep, char *err, size_t errlen)
{
    char where[NAME_MAX_LEN + 48];
    snprintf(where, sizeof where, "deployments[%zu]", index);
    if (!json_is_object(obj)) {
        set_err(err, errlen, "%s: must be an object", where);
        return false;
    }
    if (!get_string(obj, "name", where, &dep->name, err, errlen))
        return false;
    if (dep->name == NULL || !is_safe_name(dep->name, NAME_MAX_LEN)) {
        set_err(err, errlen,
                "%s: \"name\" is required: 1-%d characters of A-Z a-z 0-9 - _ . :", where,
                NAME_MAX_LEN);
        return false;
    }
    snprintf(where, sizeof where, "deployments[%zu] (%s)", index, dep->name);
    if (!check_keys(obj, dep_keys, where, err, errlen))
        return false;

    if (!get_string(obj, "model", where, &dep->model, err, errlen))
        return false;
    if (dep->model == NULL) {
        dep->model = strdup(dep->name);
        if (dep->model == NULL) {
            set_err(err, errlen, "%s: out of memory", where);
            return false;
        }
    }
    if (!is_safe_name(dep->model, MODEL_MAX_LEN)) {
        set_err(err, errlen, "%s: \"model\" must be 1-%d characters of A-Z a-z 0-9 - _ . :", where,
                MODEL_MAX_LEN);
        return false;
    }

    static const char *const tpm_counting[] = {"max", "sum", NULL};
    static const char *const otpm_counting[] = {"generated", "max_tokens", NULL};
    static const char *const headers[] = {"openai", "anthropic", NULL};
    int choice = 0;
    if (!get_choice(obj, "tpm_counting", tpm_counting, where, &choice, err, errlen))
        return false;
    dep->tpm_sum = choice == 1;
    if (!get_choice(obj, "otpm_counting", otpm_counting, where, &choice, err, errlen))
        return false;
    dep->otpm_max_tokens = choice == 1;
    if (!get_choice(obj, "headers", headers, where, &choice, err, errlen))
        return false;
    dep->anthropic_headers = choice == 1;

    json_t *key = json_object_get(obj, "api_key");
    if (key != NULL && !json_is_null(key) &&
        (!json_is_string(key) || json_string_length(key) == 0)) {
        set_err(err, errlen, "%s: \"api_key\" must be a non-empty string or null", where);
        return false;
    }
    if (!get_string(obj, "api_key", where, &dep->api_key, err, errlen))
        return false;

    if (!get_int(obj, "rpm", 0, 0, SL_SIM_LIMIT_MAX, where, &dep->rpm, err, errlen) ||
        !get_int(obj, "tpm", 0, 0, SL_SIM_LIMIT_MAX, where, &dep->tpm, err, errlen) ||
        !get_int(obj, "slices_per_minute", 60, 1, 1000000, where, &dep->slices_per_minute, err,
                 errlen) ||
        !get_int(obj, "default_max_tokens", 1024, 1, MAX_TOKENS_MAX, where,
                 &dep->default_max_tokens, err, errlen) ||
        !get_bool(obj, "count_refused", false, where, &dep->count_refused, err, errlen) ||
        !get_number(obj, "ttft_ms", 20.0, 3600000.0, where, &dep->ttft_ms, err, errlen) ||
        !get_number(obj, "ms_per_token", 0.5, 100000.0, where, &dep->ms_per_token, err, errlen) ||
        !get_int(obj, "output_min", 10, 0, MAX_TOKENS_MAX, where, &dep->output_min, err, errlen) ||
        !get_int(obj, "output_max", 200, 0, MAX_TOKENS_MAX, where, &dep->output_max, err, errlen) ||
        !get_int(obj, "itpm", 0, 0, SL_SIM_LIMIT_MAX, where, &dep->itpm, err, errlen) ||
        !get_int(obj, "otpm", 0, 0, SL_SIM_LIMIT_MAX, where, &dep->otpm, err, errlen) ||
        !get_number(obj, "cache_hit_share", 0.0, 1.0, where, &dep->cache_hit_share, err, errlen) ||
        !get_number(obj, "cache_read_fraction", 0.0, 1.0, where, &dep->cache_read_fraction, err,
                    errlen) ||
        !get_int(obj, "rpd", 0, 0, SL_SIM_LIMIT_MAX, where, &dep->rpd, err, errlen) ||
        !get_int(obj, "day_ms", DAY_MS_DEFAULT, 1, SL_SIM_DAY_MS_MAX, where, &dep->day_ms, err,
                 errlen))
        return false;
    if (dep->output_min > dep->output_max) {
        set_err(err, errlen, "%s: \"output_min\" (%lld) exceeds \"output_max\" (%lld)", where,
                (long long)dep->output_min, (long long)dep->output_max);
        return false;
    }
    return true;
}

sl_err_t sl_sim_config_parse(const char *text, size_t len, sl_sim_config_t **out, char *err,
                             size_t errlen)
{
    *out = NULL;
    set_err(err, errlen, "%s", "");
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        set_err(err, errlen, "not valid JSON (line %d, column %d): %s", jerr.line, jerr.column,
                jerr.text);
        return SL_EPARSE;
    }
    sl_err_t rc = SL_ECONFIG;
    sl_sim_config_t *cfg = calloc(1, sizeof *cfg);
    if (cfg == NULL) {
        rc = SL_ENOMEM;
        goto out;
    }
    if (!json_is_object(root)) {
        set_err(err, errlen, "the config must be a JSON object");
        goto out;
    }
    if (!check_keys(root, top_keys, "config", err, errlen) ||
        !get_int(root, "minute_ms", 60000, 1, SL_SIM_MINUTE_MS_MAX, "config", &cfg->minute_ms, err,
                 errlen) ||
        !get_int(root, "max_pending", 20000, 1, 1000000, "config", &cfg->max_pending, err,
                 errlen) ||
        !get_int(root, "idempotency_keys", 100000, 0, 10000000, "config", &cfg->idempotency_keys,
                 err, errlen))
        goto out;

    json_t *deps = json_object_get(root, "deployments");
    if (!json_is_array(deps) || json_array_size(deps) == 0) {
        set_err(err, errlen, "config: \"deployments\" must be a non-empty array");
        goto out;
    }
    cfg->deps = calloc(json_array_size(deps), sizeof *cfg->deps);
    if (cfg->deps == NULL) {
        rc = SL_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < json_array_size(deps); i++) {
        cfg->n_deps = i + 1; /* so a partly parsed entry is freed too */
        if (!parse_deployment(json_array_get(deps, i), i, &cfg->deps[i], err, errlen))
            goto out;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(cfg->deps[j].name, cfg->deps[i].name) == 0) {
                set_err(err, errlen, "deployments[%zu]: duplicate name \"%s\"", i,
                        cfg->deps[i].name);
                goto out;
            }
        }
    }
    rc = SL_OK;
    *out = cfg;
    cfg = NULL;
out:
    sl_sim_config_free(cfg);
    json_decref(root);
    return rc;
}

sl_err_t sl_sim_config_load(const char *path, sl_sim_config_t **out, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        set_err(err, errlen, "cannot open %s", path);
        return SL_EIO;
    }
    /* A config is a few kilobytes; 1 MiB is a generous cap, not a limit anyone should meet. */
    size_t cap = 1u << 20;
    char *text = malloc(cap);
    if (text == NULL) {
        fclose(f);
        return SL_ENOMEM;
    }
    size_t len = fread(text, 1, cap, f);
    bool failed = ferror(f) != 0;
    bool too_big = len == cap;
    fclose(f);
    sl_err_t rc;
    if (failed) {
        set_err(err, errlen, "cannot read %s", path);
        rc = SL_EIO;
    } else if (too_big) {
        set_err(err, errlen, "%s is larger than %zu bytes", path, cap);
        rc = SL_ETOOBIG;
    } else {
        rc = sl_sim_config_parse(text, len, out, err, errlen);
    }
    free(text);
    return rc;
}

void sl_sim_config_free(sl_sim_config_t *cfg)
{
    if (cfg == NULL)
        return;
    for (size_t i = 0; i < cfg->n_deps; i++)
        dep_config_clear(&cfg->deps[i]);
    free(cfg->deps);
    free(cfg);
}

sl_err_t sl_sim_config_set_minute_ms(sl_sim_config_t *cfg, int64_t minute_ms)
{
    if (minute_ms < 1 || minute_ms > SL_SIM_MINUTE_MS_MAX)
        return SL_EINVAL;
    cfg->minute_ms = minute_ms;
    return SL_OK;
}

int64_t sl_sim_config_minute_ms(const sl_sim_config_t *cfg)
{
    return cfg->minute_ms;
}

size_t sl_sim_config_deployment_count(const sl_sim_config_t *cfg)
{
    return cfg->n_deps;
}

/* ---- Simulator state -------------------------------------------------------------------- */

typedef struct {
    int64_t admitted;
    int64_t refused;
    int64_t refused_by[SL_SIM_DIM_COUNT_]; /* the dimension each refusal reported */
    int64_t replayed;
    int64_t errors;
    int64_t tokens_charged;
    int64_t input_tokens_charged;  /* what ITPM is charged: prompt minus cache reads */
    int64_t output_tokens_charged; /* what OTPM is charged, net of refunds */
    int64_t prompt_tokens;
    int64_t completion_tokens;
    int64_t cached_tokens;
    int64_t first_admit_ms; /* -1 = none since the last reset */
    int64_t last_admit_ms;
} counters_t;

/* How each dimension appears in 429 messages, error types, /stats and logs. */
typedef struct {
    const char *what;        /* "... in organization org-sim on <what>: Limit ..." */
    const char *error_type;  /* OpenAI's error.type */
    const char *stats_field; /* its refused_*_dim counter */
    const char *log_name;
} dim_info_t;

static const dim_info_t dim_info[SL_SIM_DIM_COUNT_] = {
    [SL_SIM_DIM_REQUESTS] = {"requests per min (RPM)", "requests", "refused_requests_dim",
                             "requests"},
    [SL_SIM_DIM_TOKENS] = {"tokens per min (TPM)", "tokens", "refused_tokens_dim", "tokens"},
    [SL_SIM_DIM_INPUT_TOKENS] = {"input tokens per min (ITPM)", "tokens", "refused_itpm_dim",
                                 "input tokens"},
    [SL_SIM_DIM_OUTPUT_TOKENS] = {"output tokens per min (OTPM)", "tokens", "refused_otpm_dim",
                                  "output tokens"},
    [SL_SIM_DIM_REQUESTS_DAY] = {"requests per day (RPD)", "requests", "refused_rpd_dim",
                                 "requests per day"},
};

typedef struct {
    const dep_config_t *cfg;
    sl_sim_limiter_t *lim;
    sl_sim_idem_t *idem;
    counters_t count;
    int64_t in_flight;
} deployment_t;

/* What an admitted completion was: enough to rebuild its body exactly for a replay. */
typedef struct {
    uint64_t seq; /* the completion id derives from it */
    int64_t created_s;
    int64_t prompt_tokens;
    int64_t completion_tokens;
    int64_t cached_tokens;
    int64_t processing_ms;
    bool hit_max_tokens;
} completion_t;

struct sl_sim {
    sl_sim_config_t *cfg;
    deployment_t *deps;
    pthread_mutex_t lock;
    int64_t in_flight;    /* across deployments; under lock */
    uint64_t seq;         /* completions so far; under lock */
    uint64_t stats_epoch; /* POST /stats/reset calls so far; under lock */
    atomic_uint_fast64_t request_seq;
    uint64_t salt; /* makes ids differ between runs */
    int64_t origin_ms;
    int64_t origin_unix_s;
    int64_t origin_unix_ms; /* the wall clock at origin_ms, for Anthropic's reset times */
};

typedef struct {
    char name[48]; /* fits anthropic-ratelimit-output-tokens-remaining */
    char value[64];
} header_t;

struct sl_sim_response {
    int status;
    char *body; /* BODY_CAP bytes unless replaced by a larger /stats body */
    size_t body_len;
    header_t headers[MAX_HEADERS];
    size_t n_headers;
    int64_t delay_ms;
    deployment_t *in_flight_on; /* set while this 200 counts as in flight */
    int64_t output_refund;      /* OTPM tokens to give back when it is finished */
    uint64_t stats_epoch;       /* of the counters its charges went to */
};

static void counters_reset(counters_t *count)
{
    memset(count, 0, sizeof *count);
    count->first_admit_ms = -1;
    count->last_admit_ms = -1;
}

/* splitmix64's finaliser: spreads any 64-bit input over all 64 bits. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* FNV-1a; mixed differently for each thing derived from a body, so those are independent. */
static uint64_t fnv1a(const char *data, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)data[i];
        h *= 1099511628211ULL;
    }
    return h;
}

sl_err_t sl_sim_new(sl_sim_config_t *cfg, int64_t now_ms, sl_sim_t **out)
{
    *out = NULL;
    if (cfg == NULL || cfg->n_deps == 0)
        return SL_EINVAL;
    sl_sim_t *sim = calloc(1, sizeof *sim);
    if (sim == NULL)
        return SL_ENOMEM;
    sim->deps = calloc(cfg->n_deps, sizeof *sim->deps);
    if (sim->deps == NULL) {
        free(sim);
        return SL_ENOMEM;
    }
    sl_err_t rc = SL_OK;
    for (size_t i = 0; i < cfg->n_deps && rc == SL_OK; i++) {
        const dep_config_t *dc = &cfg->deps[i];
        deployment_t *dep = &sim->deps[i];
        dep->cfg = dc;
        counters_reset(&dep->count);
        sl_sim_limits_t limits = {
            .limit =
                {
                    [SL_SIM_DIM_REQUESTS] = dc->rpm,
                    [SL_SIM_DIM_TOKENS] = dc->tpm,
                    [SL_SIM_DIM_INPUT_TOKENS] = dc->itpm,
                    [SL_SIM_DIM_OUTPUT_TOKENS] = dc->otpm,
                    [SL_SIM_DIM_REQUESTS_DAY] = dc->rpd,
                },
            .slices_per_minute = dc->slices_per_minute,
            .minute_ms = cfg->minute_ms,
            .day_ms = dc->day_ms,
        };
        rc = sl_sim_limiter_new_limits(&limits, now_ms, &dep->lim);
        if (rc == SL_OK)
            rc = sl_sim_idem_new((size_t)cfg->idempotency_keys, sizeof(completion_t), &dep->idem);
    }
    if (rc == SL_OK && pthread_mutex_init(&sim->lock, NULL) != 0)
        rc = SL_ENOMEM;
    if (rc != SL_OK) {
        for (size_t i = 0; i < cfg->n_deps; i++) {
            sl_sim_limiter_free(sim->deps[i].lim);
            sl_sim_idem_free(sim->deps[i].idem);
        }
        free(sim->deps);
        free(sim);
        return rc;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    sim->cfg = cfg;
    sim->origin_ms = now_ms;
    sim->origin_unix_s = (int64_t)ts.tv_sec;
    sim->origin_unix_ms = (int64_t)ts.tv_sec * 1000 + (int64_t)ts.tv_nsec / 1000000;
    sim->salt = mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid());
    atomic_init(&sim->request_seq, 0);
    *out = sim;
    return SL_OK;
}

void sl_sim_free(sl_sim_t *sim)
{
    if (sim == NULL)
        return;
    for (size_t i = 0; i < sim->cfg->n_deps; i++) {
        sl_sim_limiter_free(sim->deps[i].lim);
        sl_sim_idem_free(sim->deps[i].idem);
    }
    free(sim->deps);
    pthread_mutex_destroy(&sim->lock);
    sl_sim_config_free(sim->cfg);
    free(sim);
}

/* ---- Response building ------------------------------------------------------------------ */

static sl_sim_response_t *response_new(void)
{
    sl_sim_response_t *resp = calloc(1, sizeof *resp);
    if (resp == NULL)
        return NULL;
    resp->body = malloc(BODY_CAP);
    if (resp->body == NULL) {
        free(resp);
        return NULL;
    }
    resp->body[0] = '\0';
    return resp;
}

static void add_header(sl_sim_response_t *resp, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Adds a header. The table is sized for the most headers any response carries; running out is
 * a programming error, reported and otherwise ignored rather than fatal for a daemon. */
static void add_header(sl_sim_response_t *resp, const char *name, const char *fmt, ...)
{
    if (resp->n_headers == MAX_HEADERS) {
        sl_error("sim: header table full, dropping %s", name);
        return;
    }
    header_t *h = &resp->headers[resp->n_headers++];
    snprintf(h->name, sizeof h->name, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->value, sizeof h->value, fmt, ap);
    va_end(ap);
}

static void set_body(sl_sim_response_t *resp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Formats the body into the fixed buffer. Every body format is far below BODY_CAP (names are
 * bounded by the config, messages by escape_into), so truncation cannot happen in practice. */
static void set_body(sl_sim_response_t *resp, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(resp->body, BODY_CAP, fmt, ap);
    va_end(ap);
    resp->body_len = n < 0 ? 0 : (size_t)n < BODY_CAP ? (size_t)n : BODY_CAP - 1;
}

/* Writes s as JSON string content (no quotes) into dst (cap bytes, NUL-terminated), stopping
 * early rather than splitting an escape. */
static void escape_into(char *dst, size_t cap, const char *s)
{
    size_t len = 0;
    for (; *s && len + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            dst[len++] = '\\';
            dst[len++] = (char)c;
        } else if (c < 0x20) {
            len += (size_t)snprintf(dst + len, cap - len, "\\u%04x", c);
        } else {
            dst[len++] = (char)c;
        }
    }
    dst[len] = '\0';
}

static void common_headers(sl_sim_t *sim, sl_sim_response_t *resp, const char *content_type)
{
    uint64_t n = atomic_fetch_add(&sim->request_seq, 1);
    add_header(resp, "content-type", "%s", content_type);
    add_header(resp, "x-request-id", "req_%016llx%016llx",
               (unsigned long long)mix64(sim->salt ^ (n * 2 + 1)),
               (unsigned long long)mix64(~sim->salt ^ (n * 2)));
}

/* OpenAI's error shape. message is plain text (escaped here); param and code may be NULL. */
static void error_body(sl_sim_response_t *resp, int status, const char *type, const char *param,
                       const char *code, const char *message)
{
    char esc[1024];
    escape_into(esc, sizeof esc, message);
    char param_json[64] = "null";
    char code_json[64] = "null";
    if (param != NULL)
        snprintf(param_json, sizeof param_json, "\"%s\"", param);
    if (code != NULL)
        snprintf(code_json, sizeof code_json, "\"%s\"", code);
    resp->status = status;
    set_body(resp, "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"param\":%s,\"code\":%s}}", esc,
             type, param_json, code_json);
}

/* OpenAI's x-ratelimit-* headers for RPM and TPM; a dimension without a limit has none. */
static void openai_limit_headers(sl_sim_response_t *resp, const deployment_t *dep, int64_t now_ms)
{
    enum { N_OPENAI_DIMS = 2 };
    static const char *const suffix[N_OPENAI_DIMS] = {"requests", "tokens"};
    char name[32];
    char dur[32];
    for (int d = 0; d < N_OPENAI_DIMS; d++) {
        int64_t limit = sl_sim_limiter_limit(dep->lim, (sl_sim_dim_t)d);
        if (limit == 0)
            continue;
        snprintf(name, sizeof name, "x-ratelimit-limit-%s", suffix[d]);
        add_header(resp, name, "%lld", (long long)limit);
    }
    for (int d = 0; d < N_OPENAI_DIMS; d++) {
        if (sl_sim_limiter_limit(dep->lim, (sl_sim_dim_t)d) == 0)
            continue;
        snprintf(name, sizeof name, "x-ratelimit-remaining-%s", suffix[d]);
        add_header(resp, name, "%lld",
                   (long long)sl_sim_limiter_remaining(dep->lim, (sl_sim_dim_t)d, now_ms));
    }
    for (int d = 0; d < N_OPENAI_DIMS; d++) {
        if (sl_sim_limiter_limit(dep->lim, (sl_sim_dim_t)d) == 0)
            continue;
        snprintf(name, sizeof name, "x-ratelimit-reset-%s", suffix[d]);
        sl_sim_go_duration(sl_sim_limiter_reset_ms(dep->lim, (sl_sim_dim_t)d, now_ms), dur,
                           sizeof dur);
        add_header(resp, name, "%s", dur);
    }
}

/* Anthropic's anthropic-ratelimit-{requests,input-tokens,output-tokens}-{limit,remaining,reset}
 * for RPM, ITPM and OTPM; a dimension without a limit has none. */
static void anthropic_limit_headers(sl_sim_t *sim, sl_sim_response_t *resp, const deployment_t *dep,
                                    int64_t now_ms)
{
    static const struct {
        sl_sim_dim_t dim;
        const char *group;
    } groups[] = {{SL_SIM_DIM_REQUESTS, "requests"},
                  {SL_SIM_DIM_INPUT_TOKENS, "input-tokens"},
                  {SL_SIM_DIM_OUTPUT_TOKENS, "output-tokens"}};
    char name[48];
    char reset[32];
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        sl_sim_dim_t dim = groups[i].dim;
        int64_t limit = sl_sim_limiter_limit(dep->lim, dim);
        if (limit == 0)
            continue;
        int64_t remaining = sl_sim_limiter_remaining(dep->lim, dim, now_ms);
        /* Anthropic rounds token counts to the nearest thousand; rounding down instead means
         * the simulator never promises more than the bucket holds. */
        if (dim != SL_SIM_DIM_REQUESTS && remaining >= 1000)
            remaining = remaining / 1000 * 1000;
        int64_t full_ms = sim->origin_unix_ms + (now_ms - sim->origin_ms) +
                          sl_sim_limiter_reset_ms(dep->lim, dim, now_ms);
        sl_sim_rfc3339(full_ms, reset, sizeof reset);
        snprintf(name, sizeof name, "anthropic-ratelimit-%s-limit", groups[i].group);
        add_header(resp, name, "%lld", (long long)limit);
        snprintf(name, sizeof name, "anthropic-ratelimit-%s-remaining", groups[i].group);
        add_header(resp, name, "%lld", (long long)remaining);
        snprintf(name, sizeof name, "anthropic-ratelimit-%s-reset", groups[i].group);
        add_header(resp, name, "%s", reset);
    }
}

/* The rate-limit headers of the deployment's style. Caller holds the lock. */
static void limit_headers(sl_sim_t *sim, sl_sim_response_t *resp, const deployment_t *dep,
                          int64_t now_ms)
{
    if (dep->cfg->anthropic_headers)
        anthropic_limit_headers(sim, resp, dep, now_ms);
    else
        openai_limit_headers(resp, dep, now_ms);
}

static void completion_body(sl_sim_t *sim, sl_sim_response_t *resp, const deployment_t *dep,
                            const completion_t *done)
{
    resp->status = 200;
    set_body(resp,
             "{\"id\":\"chatcmpl-sim%016llx\",\"object\":\"chat.completion\",\"created\":%lld,"
             "\"model\":\"%s\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
             "\"content\":\"Simulated reply from %s (%lld completion tokens).\","
             "\"refusal\":null,\"annotations\":[]},\"logprobs\":null,\"finish_reason\":\"%s\"}],"
             "\"usage\":{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,"
             "\"total_tokens\":%lld,\"prompt_tokens_details\":{\"cached_tokens\":%lld,"
             "\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0,"
             "\"audio_tokens\":0,\"accepted_prediction_tokens\":0,"
             "\"rejected_prediction_tokens\":0}},\"service_tier\":\"default\","
             "\"system_fingerprint\":\"fp_sluice_sim\"}",
             (unsigned long long)mix64(mix64(sim->salt) + done->seq), (long long)done->created_s,
             dep->cfg->model, dep->cfg->name, (long long)done->completion_tokens,
             done->hit_max_tokens ? "length" : "stop", (long long)done->prompt_tokens,
             (long long)done->completion_tokens,
             (long long)(done->prompt_tokens + done->completion_tokens),
             (long long)done->cached_tokens);
}

/* ---- Request parsing -------------------------------------------------------------------- */

static int64_t utf8_chars(const char *s, size_t len)
{
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            n++;
    }
    return n;
}

/* ceil(characters / 4) over all message contents; messages must be an array. */
static int64_t estimate_messages(json_t *messages)
{
    int64_t chars = 0;
    size_t i;
    json_t *msg;
    json_array_foreach(messages, i, msg)
    {
        json_t *content = json_object_get(msg, "content");
        if (json_is_string(content)) {
            chars += utf8_chars(json_string_value(content), json_string_length(content));
        } else if (json_is_array(content)) {
            size_t j;
            json_t *part;
            json_array_foreach(content, j, part)
            {
                json_t *text = json_object_get(part, "text");
                if (json_is_string(json_object_get(part, "type")) &&
                    strcmp(json_string_value(json_object_get(part, "type")), "text") == 0 &&
                    json_is_string(text))
                    chars += utf8_chars(json_string_value(text), json_string_length(text));
            }
        }
    }
    return (chars + 3) / 4;
}

int64_t sl_sim_prompt_estimate(const char *body, size_t len)
{
    json_t *root = json_loadb(body, len, 0, NULL);
    json_t *messages = json_object_get(root, "messages");
    int64_t est = json_is_array(messages) ? estimate_messages(messages) : -1;
    json_decref(root);
    return est;
}

/* What a chat request asks for, once validated. */
typedef struct {
    int64_t max_tokens; /* effective: the request's or the deployment default */
    int64_t prompt_tokens;
    int64_t cost_tokens;   /* what TPM is charged */
    int64_t cached_tokens; /* prompt tokens read from the cache */
    int64_t input_tokens;  /* what ITPM is charged: the prompt without its cache reads */
    int64_t output_tokens; /* what OTPM is charged at receipt */
    int64_t completion_tokens;
    bool hit_max_tokens;
    int64_t delay_ms;
} chat_t;

/* Validates a chat body the way OpenAI does (the parts that matter here). On failure writes a
 * 400 into resp and returns false. */
static bool parse_chat(const dep_config_t *dc, const sl_sim_request_t *req, sl_sim_response_t *resp,
                       chat_t *chat)
{
    json_t *root = NULL;
    if (req->body != NULL && req->body_len > 0)
        root = json_loadb(req->body, req->body_len, 0, NULL);
    if (!json_is_object(root)) {
        json_decref(root);
        error_body(resp, 400, "invalid_request_error", NULL, NULL,
                   "We could not parse the JSON body of your request. (HINT: This likely means "
                   "you aren't using your HTTP library correctly. The OpenAI API expects a JSON "
                   "payload, but what was sent was not valid JSON.)");
        return false;
    }
    bool ok = false;
    char msg[256];
    json_t *messages = json_object_get(root, "messages");
    if (messages == NULL) {
        error_body(resp, 400, "invalid_request_error", "messages", "missing_required_parameter",
                   "Missing required parameter: 'messages'.");
        goto out;
    }
    if (!json_is_array(messages)) {
        error_body(resp, 400, "invalid_request_error", "messages", "invalid_type",
                   "Invalid type for 'messages': expected an array.");
        goto out;
    }
    if (json_array_size(messages) == 0) {
        error_body(resp, 400, "invalid_request_error", "messages", "empty_array",
                   "Invalid 'messages': empty array. Expected an array with minimum length 1, "
                   "but got an empty array instead.");
        goto out;
    }
    for (size_t i = 0; i < json_array_size(messages); i++) {
        if (!json_is_object(json_array_get(messages, i))) {
            snprintf(msg, sizeof msg, "Invalid type for 'messages[%zu]': expected an object.", i);
            error_body(resp, 400, "invalid_request_error", "messages", "invalid_type", msg);
            goto out;
        }
    }
    if (json_is_true(json_object_get(root, "stream"))) {
        error_body(resp, 400, "invalid_request_error", "stream", "unsupported_value",
                   "sluice-sim does not simulate streaming; send \"stream\": false.");
        goto out;
    }
    /* max_completion_tokens replaced max_tokens in OpenAI's API; honour either. */
    const char *param = "max_completion_tokens";
    json_t *mt = json_object_get(root, param);
    if (mt == NULL || json_is_null(mt)) {
        param = "max_tokens";
        mt = json_object_get(root, param);
    }
    chat->max_tokens = dc->default_max_tokens;
    if (mt != NULL && !json_is_null(mt)) {
        if (!json_is_integer(mt)) {
            snprintf(msg, sizeof msg, "Invalid type for '%s': expected an integer.", param);
            error_body(resp, 400, "invalid_request_error", param, "invalid_type", msg);
            goto out;
        }
        json_int_t v = json_integer_value(mt);
        if (v < 1 || v > MAX_TOKENS_MAX) {
            snprintf(msg, sizeof msg,
                     "Invalid '%s': integer out of range. Expected a value between 1 and %lld, "
                     "but got %lld instead.",
                     param, MAX_TOKENS_MAX, (long long)v);
            error_body(resp, 400, "invalid_request_error", param,
                       v < 1 ? "integer_below_min_value" : "integer_above_max_value", msg);
            goto out;
        }
        chat->max_tokens = (int64_t)v;
    }
    chat->prompt_tokens = estimate_messages(messages);
    if (dc->tpm_sum)
        chat->cost_tokens = chat->prompt_tokens + chat->max_tokens;
    else
        chat->cost_tokens =
            chat->max_tokens > chat->prompt_tokens ? chat->max_tokens : chat->prompt_tokens;

    /* The same body always yields the same completion length and cache outcome, so runs are
     * reproducible; the two come from differently mixed hashes, so they are independent. */
    uint64_t body_hash = fnv1a(req->body, req->body_len);
    uint64_t span = (uint64_t)(dc->output_max - dc->output_min) + 1;
    int64_t drawn = dc->output_min + (int64_t)(mix64(body_hash) % span);
    chat->hit_max_tokens = drawn >= chat->max_tokens;
    chat->completion_tokens = chat->hit_max_tokens ? chat->max_tokens : drawn;
    double cache_draw = (double)(mix64(body_hash ^ 0x9e3779b97f4a7c15ULL) >> 11) * 0x1p-53;
    chat->cached_tokens = 0;
    if (cache_draw < dc->cache_hit_share) {
        /* The epsilon keeps floor(100 * 0.29) at 29, not 28 from binary rounding. */
        chat->cached_tokens =
            (int64_t)floor((double)chat->prompt_tokens * dc->cache_read_fraction + 1e-9);
        if (chat->cached_tokens > chat->prompt_tokens)
            chat->cached_tokens = chat->prompt_tokens;
    }
    chat->input_tokens = chat->prompt_tokens - chat->cached_tokens;
    chat->output_tokens = dc->otpm_max_tokens ? chat->max_tokens : chat->completion_tokens;
    chat->delay_ms = llround(dc->ttft_ms + dc->ms_per_token * (double)chat->completion_tokens);
    ok = true;
out:
    json_decref(root);
    return ok;
}

/* Returns the bearer token of an Authorization header, or NULL; *len gets its length. */
static const char *bearer_token(const char *auth, size_t *len)
{
    if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0)
        return NULL;
    const char *tok = auth + 7;
    while (*tok == ' ')
        tok++;
    size_t n = strlen(tok);
    while (n > 0 && tok[n - 1] == ' ')
        n--;
    *len = n;
    return n == 0 ? NULL : tok;
}

/* ---- Request handling ------------------------------------------------------------------- */

/* Finishes a non-200 answer of a deployment: counts it as an error, adds the limit headers. */
static void finish_error(sl_sim_t *sim, deployment_t *dep, sl_sim_response_t *resp, int64_t now_ms)
{
    pthread_mutex_lock(&sim->lock);
    dep->count.errors++;
    limit_headers(sim, resp, dep, now_ms);
    pthread_mutex_unlock(&sim->lock);
}

/* Counts a refusal reported for dim and applies count_refused. Caller holds the lock. */
static void count_refusal(deployment_t *dep, sl_sim_dim_t dim, int64_t now_ms)
{
    dep->count.refused++;
    dep->count.refused_by[dim]++;
    if (dep->cfg->count_refused)
        sl_sim_limiter_charge_request(dep->lim, now_ms);
}

/* A 429 for a request that dim has no room for yet; cost[dim] is what it asked of dim and
 * wait_ms how long until it would have room. Caller holds the lock. */
static void refuse(sl_sim_t *sim, deployment_t *dep, sl_sim_response_t *resp,
                   const int64_t cost[SL_SIM_DIM_COUNT_], sl_sim_dim_t dim, int64_t wait_ms,
                   int64_t now_ms)
{
    const dep_config_t *dc = dep->cfg;
    int64_t limit = sl_sim_limiter_limit(dep->lim, dim);
    int64_t used = limit - sl_sim_limiter_remaining(dep->lim, dim, now_ms);
    char dur[32];
    char msg[512];
    sl_sim_go_duration(wait_ms, dur, sizeof dur);
    snprintf(msg, sizeof msg,
             "Rate limit reached for %s in organization " ORGANIZATION " on %s: Limit %lld, "
             "Used %lld, Requested %lld. Please try again in %s. " RATE_LIMIT_HELP,
             dc->model, dim_info[dim].what, (long long)limit, (long long)used, (long long)cost[dim],
             dur);
    error_body(resp, 429, dim_info[dim].error_type, NULL, "rate_limit_exceeded", msg);
    count_refusal(dep, dim, now_ms);
    limit_headers(sim, resp, dep, now_ms);
    add_header(resp, "retry-after", "%lld", (long long)((wait_ms + 999) / 1000));
    /* Anthropic sends only retry-after. */
    if (!dc->anthropic_headers)
        add_header(resp, "retry-after-ms", "%lld", (long long)wait_ms);
    /* A client that retries within its SDK would wait for hours; tell it to give up instead. */
    if (dim == SL_SIM_DIM_REQUESTS_DAY && wait_ms > SHOULD_NOT_RETRY_AFTER_MS)
        add_header(resp, "x-should-retry", "false");
    sl_logf(SL_LOG_DEBUG, "deployment", dc->name, "429 on %s, retry in %lld ms",
            dim_info[dim].log_name, (long long)wait_ms);
}

/* A 429 for a request that asks more of dim than its whole per-minute limit. Caller holds the
 * lock. */
static void refuse_too_large(sl_sim_t *sim, deployment_t *dep, sl_sim_response_t *resp,
                             const int64_t cost[SL_SIM_DIM_COUNT_], sl_sim_dim_t dim,
                             int64_t now_ms)
{
    const dep_config_t *dc = dep->cfg;
    char msg[512];
    snprintf(msg, sizeof msg,
             "Request too large for %s in organization " ORGANIZATION
             " on %s: Limit %lld, Requested %lld. The input or output tokens "
             "must be reduced in order to run successfully. " RATE_LIMIT_HELP,
             dc->model, dim_info[dim].what, (long long)sl_sim_limiter_limit(dep->lim, dim),
             (long long)cost[dim]);
    error_body(resp, 429, dim_info[dim].error_type, NULL, "rate_limit_exceeded", msg);
    count_refusal(dep, dim, now_ms);
    limit_headers(sim, resp, dep, now_ms);
    /* Waiting cannot help, so there is no retry-after; OpenAI's SDKs honour this header. */
    add_header(resp, "x-should-retry", "false");
}

static void handle_chat(sl_sim_t *sim, deployment_t *dep, const sl_sim_request_t *req,
                        int64_t now_ms, sl_sim_response_t *resp)
{
    const dep_config_t *dc = dep->cfg;
    common_headers(sim, resp, "application/json");
    if (strcmp(req->method, "POST") != 0) {
        char msg[256];
        char method[32];
        snprintf(method, sizeof method, "%s", req->method);
        snprintf(msg, sizeof msg, "Invalid method for URL (%s /%s" CHAT_SUFFIX ").", method,
                 dc->name);
        error_body(resp, 405, "invalid_request_error", NULL, NULL, msg);
        add_header(resp, "allow", "POST");
        finish_error(sim, dep, resp, now_ms);
        return;
    }
    size_t tok_len = 0;
    const char *tok = bearer_token(req->authorization, &tok_len);
    if (tok == NULL) {
        error_body(resp, 401, "invalid_request_error", NULL, NULL,
                   "You didn't provide an API key. You need to provide your API key in an "
                   "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).");
        finish_error(sim, dep, resp, now_ms);
        return;
    }
    if (dc->api_key != NULL &&
        (tok_len != strlen(dc->api_key) || memcmp(tok, dc->api_key, tok_len) != 0)) {
        /* Unlike OpenAI, do not echo any part of the key: logs of tests end up in CI output. */
        error_body(resp, 401, "invalid_request_error", NULL, "invalid_api_key",
                   "Incorrect API key provided.");
        finish_error(sim, dep, resp, now_ms);
        return;
    }
    if (req->body_too_large || req->body_len > SL_SIM_MAX_BODY_BYTES) {
        error_body(resp, 413, "invalid_request_error", NULL, "request_too_large",
                   "Request body too large: the limit is 4194304 bytes.");
        finish_error(sim, dep, resp, now_ms);
        return;
    }
    const char *key = req->idempotency_key;
    if (key != NULL && (key[0] == '\0' || strlen(key) > IDEMPOTENCY_KEY_MAX_LEN)) {
        error_body(resp, 400, "invalid_request_error", NULL, "invalid_idempotency_key",
                   "Invalid Idempotency-Key: expected 1 to 255 characters.");
        finish_error(sim, dep, resp, now_ms);
        return;
    }
    chat_t chat;
    if (!parse_chat(dc, req, resp, &chat)) {
        finish_error(sim, dep, resp, now_ms);
        return;
    }

    pthread_mutex_lock(&sim->lock);
    const completion_t *seen = key != NULL ? sl_sim_idem_get(dep->idem, key) : NULL;
    if (seen != NULL) {
        /* A retry of a call already charged: same answer, no charge, no wait. */
        dep->count.replayed++;
        completion_body(sim, resp, dep, seen);
        limit_headers(sim, resp, dep, now_ms);
        add_header(resp, "openai-processing-ms", "%lld", (long long)seen->processing_ms);
        pthread_mutex_unlock(&sim->lock);
        return;
    }
    if (sim->in_flight >= sim->cfg->max_pending) {
        error_body(resp, 503, "server_error", NULL, NULL,
                   "The server is overloaded or not ready yet.");
        dep->count.errors++;
        limit_headers(sim, resp, dep, now_ms);
        add_header(resp, "retry-after", "1");
        pthread_mutex_unlock(&sim->lock);
        return;
    }
    int64_t cost[SL_SIM_DIM_COUNT_] = {
        [SL_SIM_DIM_REQUESTS] = 1,
        [SL_SIM_DIM_TOKENS] = chat.cost_tokens,
        [SL_SIM_DIM_INPUT_TOKENS] = chat.input_tokens,
        [SL_SIM_DIM_OUTPUT_TOKENS] = chat.output_tokens,
        [SL_SIM_DIM_REQUESTS_DAY] = 1,
    };
    /* Token costs above a whole per-minute limit can never pass (and the limiter expects them
     * to be refused before it is asked). */
    static const sl_sim_dim_t token_dims[] = {SL_SIM_DIM_TOKENS, SL_SIM_DIM_INPUT_TOKENS,
                                              SL_SIM_DIM_OUTPUT_TOKENS};
    for (size_t i = 0; i < sizeof token_dims / sizeof token_dims[0]; i++) {
        int64_t limit = sl_sim_limiter_limit(dep->lim, token_dims[i]);
        if (limit > 0 && cost[token_dims[i]] > limit) {
            refuse_too_large(sim, dep, resp, cost, token_dims[i], now_ms);
            pthread_mutex_unlock(&sim->lock);
            return;
        }
    }
    sl_sim_dim_t dim = SL_SIM_DIM_REQUESTS;
    int64_t wait_ms = 0;
    if (!sl_sim_limiter_admit_all(dep->lim, cost, now_ms, &dim, &wait_ms)) {
        refuse(sim, dep, resp, cost, dim, wait_ms, now_ms);
        pthread_mutex_unlock(&sim->lock);
        return;
    }
    completion_t done = {
        .seq = ++sim->seq,
        .created_s = sim->origin_unix_s + (now_ms - sim->origin_ms) / 1000,
        .prompt_tokens = chat.prompt_tokens,
        .completion_tokens = chat.completion_tokens,
        .cached_tokens = chat.cached_tokens,
        .processing_ms = chat.delay_ms,
        .hit_max_tokens = chat.hit_max_tokens,
    };
    /* Losing a key only weakens replay protection for that one call: report and go on. */
    if (key != NULL && sl_sim_idem_put(dep->idem, key, &done) != SL_OK)
        sl_logf(SL_LOG_WARN, "deployment", dc->name, "out of memory storing an idempotency key");
    counters_t *count = &dep->count;
    count->admitted++;
    count->tokens_charged += chat.cost_tokens;
    count->input_tokens_charged += chat.input_tokens;
    count->output_tokens_charged += chat.output_tokens;
    count->prompt_tokens += chat.prompt_tokens;
    count->completion_tokens += chat.completion_tokens;
    count->cached_tokens += chat.cached_tokens;
    if (count->first_admit_ms < 0)
        count->first_admit_ms = now_ms - sim->origin_ms;
    count->last_admit_ms = now_ms - sim->origin_ms;
    dep->in_flight++;
    sim->in_flight++;
    resp->in_flight_on = dep;
    resp->output_refund = chat.output_tokens - chat.completion_tokens;
    resp->stats_epoch = sim->stats_epoch;
    resp->delay_ms = chat.delay_ms;
    completion_body(sim, resp, dep, &done);
    limit_headers(sim, resp, dep, now_ms);
    add_header(resp, "openai-processing-ms", "%lld", (long long)chat.delay_ms);
    pthread_mutex_unlock(&sim->lock);
}

static void method_not_allowed(sl_sim_t *sim, sl_sim_response_t *resp, const char *allow,
                               const char *method, const char *path)
{
    char msg[256];
    char safe_method[32];
    snprintf(safe_method, sizeof safe_method, "%s", method);
    snprintf(msg, sizeof msg, "Invalid method for URL (%s %s).", safe_method, path);
    common_headers(sim, resp, "application/json");
    error_body(resp, 405, "invalid_request_error", NULL, NULL, msg);
    add_header(resp, "allow", "%s", allow);
}

static sl_err_t stats_body(sl_sim_t *sim, sl_sim_response_t *resp, int64_t now_ms)
{
    json_t *deps = json_object();
    json_t *root = json_pack("{s:I, s:I, s:o}", "now_ms", (json_int_t)(now_ms - sim->origin_ms),
                             "minute_ms", (json_int_t)sim->cfg->minute_ms, "deployments", deps);
    if (root == NULL)
        return SL_ENOMEM;
    bool ok = true;
    pthread_mutex_lock(&sim->lock);
    for (size_t i = 0; i < sim->cfg->n_deps && ok; i++) {
        const deployment_t *dep = &sim->deps[i];
        const counters_t *c = &dep->count;
        const dep_config_t *dc = dep->cfg;
        const struct {
            const char *name;
            int64_t value;
        } fields[] = {
            {"rpm", dc->rpm},
            {"tpm", dc->tpm},
            {"itpm", dc->itpm},
            {"otpm", dc->otpm},
            {"rpd", dc->rpd},
            {"admitted", c->admitted},
            {"refused", c->refused},
            {dim_info[SL_SIM_DIM_REQUESTS].stats_field, c->refused_by[SL_SIM_DIM_REQUESTS]},
            {dim_info[SL_SIM_DIM_TOKENS].stats_field, c->refused_by[SL_SIM_DIM_TOKENS]},
            {dim_info[SL_SIM_DIM_INPUT_TOKENS].stats_field, c->refused_by[SL_SIM_DIM_INPUT_TOKENS]},
            {dim_info[SL_SIM_DIM_OUTPUT_TOKENS].stats_field,
             c->refused_by[SL_SIM_DIM_OUTPUT_TOKENS]},
            {dim_info[SL_SIM_DIM_REQUESTS_DAY].stats_field, c->refused_by[SL_SIM_DIM_REQUESTS_DAY]},
            {"replayed", c->replayed},
            {"errors", c->errors},
            {"tokens_charged", c->tokens_charged},
            {"input_tokens_charged", c->input_tokens_charged},
            {"output_tokens_charged", c->output_tokens_charged},
            {"prompt_tokens", c->prompt_tokens},
            {"completion_tokens", c->completion_tokens},
            {"cached_tokens", c->cached_tokens},
            {"in_flight", dep->in_flight},
            {"requests_today", sl_sim_limiter_day_count(dep->lim, now_ms)},
        };
        json_t *one = json_pack("{s:s}", "model", dc->model);
        for (size_t f = 0; one != NULL && f < sizeof fields / sizeof fields[0]; f++) {
            if (json_object_set_new(one, fields[f].name, json_integer(fields[f].value)) != 0) {
                json_decref(one);
                one = NULL;
            }
        }
        json_t *first = c->first_admit_ms < 0 ? json_null() : json_integer(c->first_admit_ms);
        json_t *last = c->last_admit_ms < 0 ? json_null() : json_integer(c->last_admit_ms);
        if (one != NULL && (json_object_set_new(one, "first_admit_ms", first) != 0 ||
                            json_object_set_new(one, "last_admit_ms", last) != 0)) {
            json_decref(one);
            one = NULL;
        }
        ok = one != NULL && json_object_set_new(deps, dep->cfg->name, one) == 0;
    }
    pthread_mutex_unlock(&sim->lock);
    char *text = ok ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (text == NULL)
        return SL_ENOMEM;
    free(resp->body);
    resp->body = text;
    resp->body_len = strlen(text);
    resp->status = 200;
    common_headers(sim, resp, "application/json");
    return SL_OK;
}

/* Finds the deployment of a "/<name>/v1/chat/completions" path; NULL when there is none. */
static deployment_t *route_chat(sl_sim_t *sim, const char *path)
{
    if (path[0] != '/')
        return NULL;
    const char *name = path + 1;
    const char *slash = strchr(name, '/');
    if (slash == NULL || strcmp(slash, CHAT_SUFFIX) != 0)
        return NULL;
    size_t len = (size_t)(slash - name);
    for (size_t i = 0; i < sim->cfg->n_deps; i++) {
        const char *dep_name = sim->deps[i].cfg->name;
        if (strlen(dep_name) == len && memcmp(dep_name, name, len) == 0)
            return &sim->deps[i];
    }
    return NULL;
}

static bool is_get(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}

sl_err_t sl_sim_handle(sl_sim_t *sim, const sl_sim_request_t *req, int64_t now_ms,
                       sl_sim_response_t **out)
{
    *out = NULL;
    sl_sim_response_t *resp = response_new();
    if (resp == NULL)
        return SL_ENOMEM;
    sl_sim_request_t r = *req;
    if (r.method == NULL)
        r.method = "";
    if (r.path == NULL)
        r.path = "";
    /* Paths only go into error messages; a bounded copy keeps them short. */
    char path[160];
    snprintf(path, sizeof path, "%s", r.path);

    if (strcmp(r.path, "/healthz") == 0) {
        if (is_get(r.method)) {
            common_headers(sim, resp, "text/plain; charset=utf-8");
            resp->status = 200;
            set_body(resp, "ok");
        } else {
            method_not_allowed(sim, resp, "GET", r.method, path);
        }
    } else if (strcmp(r.path, "/stats") == 0) {
        if (!is_get(r.method)) {
            method_not_allowed(sim, resp, "GET", r.method, path);
        } else if (stats_body(sim, resp, now_ms) != SL_OK) {
            sl_sim_response_free(resp);
            return SL_ENOMEM;
        }
    } else if (strcmp(r.path, "/stats/reset") == 0) {
        if (strcmp(r.method, "POST") != 0) {
            method_not_allowed(sim, resp, "POST", r.method, path);
        } else {
            pthread_mutex_lock(&sim->lock);
            for (size_t i = 0; i < sim->cfg->n_deps; i++)
                counters_reset(&sim->deps[i].count);
            sim->stats_epoch++;
            pthread_mutex_unlock(&sim->lock);
            common_headers(sim, resp, "application/json");
            resp->status = 200;
            set_body(resp, "{\"reset\":true}");
        }
    } else {
        deployment_t *dep = route_chat(sim, r.path);
        if (dep != NULL) {
            handle_chat(sim, dep, &r, now_ms, resp);
        } else {
            char msg[256];
            char method[32];
            snprintf(method, sizeof method, "%s", r.method);
            snprintf(msg, sizeof msg, "Invalid URL (%s %s): no such deployment or endpoint.",
                     method, path);
            common_headers(sim, resp, "application/json");
            error_body(resp, 404, "invalid_request_error", NULL, NULL, msg);
        }
    }
    if (!resp->in_flight_on)
        resp->delay_ms = 0;
    if (sl_sim_response_header_get(resp, "openai-processing-ms") == NULL)
        add_header(resp, "openai-processing-ms", "0");
    *out = resp;
    return SL_OK;
}

void sl_sim_finish(sl_sim_t *sim, sl_sim_response_t *resp)
{
    if (resp == NULL || resp->in_flight_on == NULL)
        return;
    pthread_mutex_lock(&sim->lock);
    deployment_t *dep = resp->in_flight_on;
    dep->in_flight--;
    sim->in_flight--;
    if (resp->output_refund > 0) {
        sl_sim_limiter_refund(dep->lim, SL_SIM_DIM_OUTPUT_TOKENS, resp->output_refund);
        /* A refund for a charge made before POST /stats/reset belongs to the zeroed counters. */
        if (resp->stats_epoch == sim->stats_epoch)
            dep->count.output_tokens_charged -= resp->output_refund;
    }
    pthread_mutex_unlock(&sim->lock);
    resp->in_flight_on = NULL;
}

/* ---- Response accessors ----------------------------------------------------------------- */

int sl_sim_response_status(const sl_sim_response_t *resp)
{
    return resp->status;
}

const char *sl_sim_response_body(const sl_sim_response_t *resp, size_t *len)
{
    if (len != NULL)
        *len = resp->body_len;
    return resp->body;
}

int64_t sl_sim_response_delay_ms(const sl_sim_response_t *resp)
{
    return resp->delay_ms;
}

size_t sl_sim_response_header_count(const sl_sim_response_t *resp)
{
    return resp->n_headers;
}

const char *sl_sim_response_header(const sl_sim_response_t *resp, size_t i, const char **value)
{
    *value = resp->headers[i].value;
    return resp->headers[i].name;
}

const char *sl_sim_response_header_get(const sl_sim_response_t *resp, const char *name)
{
    for (size_t i = 0; i < resp->n_headers; i++) {
        if (strcasecmp(resp->headers[i].name, name) == 0)
            return resp->headers[i].value;
    }
    return NULL;
}

void sl_sim_response_free(sl_sim_response_t *resp)
{
    if (resp == NULL)
        return;
    free(resp->body);
    free(resp);
}

/* ---- Helpers ---------------------------------------------------------------------------- */

size_t sl_sim_go_duration(int64_t ms, char *buf, size_t len)
{
    char tmp[64];
    int n;
    if (ms <= 0) {
        n = snprintf(tmp, sizeof tmp, "0s");
    } else if (ms < 1000) {
        n = snprintf(tmp, sizeof tmp, "%lldms", (long long)ms);
    } else {
        /* Go prints h and m only when non-zero from the largest unit down, then seconds with
         * their fraction, trailing zeros trimmed: 1.5s, 1m0s, 6m0.25s, 1h0m0s. */
        long long h = (long long)(ms / 3600000);
        long long m = (long long)(ms / 60000 % 60);
        long long s = (long long)(ms / 1000 % 60);
        long long frac = (long long)(ms % 1000);
        char sec[24];
        if (frac == 0) {
            snprintf(sec, sizeof sec, "%llds", s);
        } else {
            char digits[8];
            snprintf(digits, sizeof digits, "%03lld", frac);
            for (int i = 2; i > 0 && digits[i] == '0'; i--)
                digits[i] = '\0';
            snprintf(sec, sizeof sec, "%lld.%ss", s, digits);
        }
        if (h > 0)
            n = snprintf(tmp, sizeof tmp, "%lldh%lldm%s", h, m, sec);
        else if (m > 0)
            n = snprintf(tmp, sizeof tmp, "%lldm%s", m, sec);
        else
            n = snprintf(tmp, sizeof tmp, "%s", sec);
    }
    if (len > 0)
        snprintf(buf, len, "%s", tmp);
    return n < 0 ? 0 : (size_t)n;
}

size_t sl_sim_rfc3339(int64_t unix_ms, char *buf, size_t len)
{
    char tmp[64] = "";
    int64_t unix_s = unix_ms / 1000 + (unix_ms % 1000 > 0 ? 1 : 0);
    time_t t = (time_t)unix_s;
    struct tm tm;
    size_t n = 0;
    if ((int64_t)t == unix_s && gmtime_r(&t, &tm) != NULL)
        n = strftime(tmp, sizeof tmp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (len > 0)
        snprintf(buf, len, "%s", tmp);
    return n;
}
