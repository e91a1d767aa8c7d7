/* config.c - sluice-sim's JSON config reader (see sim.h for the functions, config.h for what
 * they fill in).
 *
 * The reader is strict: an unknown key, a wrong type or an out-of-range number is an error that
 * names the key, so a typo in a test's config fails loudly instead of silently meaning a default.
 */
#include "config.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonstrict.h"
#include "limiter.h"

#define NAME_MAX_LEN 64
#define MODEL_MAX_LEN 128
#define MAX_TOKENS_MAX 1000000000LL
#define DAY_MS_DEFAULT 86400000LL
#define MAX_WINDOWS 64
#define STREAM_CHUNKS_MAX 64

static const char *const top_keys[] = {"minute_ms",        "deployments", "max_pending",
                                       "idempotency_keys", "seed",        NULL};

static const char *const dep_keys[] = {"name",
                                       "model",
                                       "api",
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
                                       "tool_use_share",
                                       "stream_chunks",
                                       "rolling_minute",
                                       "faults",
                                       "batch",
                                       NULL};

static const char *const fault_keys[] = {"rate_limit_share",
                                         "retry_after_share",
                                         "retry_after_ms",
                                         "unavailable",
                                         "unavailable_origin",
                                         "overloaded_share",
                                         "slow_share",
                                         "slow_ms",
                                         "drop_share",
                                         "stream_cut_share",
                                         "stream_stall_share",
                                         "stream_stall_ms",
                                         "spend_limit_after",
                                         "acceleration",
                                         "seed",
                                         NULL};

static const char *const window_keys[] = {"from_ms", "to_ms", NULL};

static const char *const batch_keys[] = {"turnaround_ms",
                                         "enqueued_tokens",
                                         "creates_per_minute",
                                         "line_error_share",
                                         "expire_share",
                                         "max_batches",
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

/* The one strict reader of sluice (common/jsonstrict.h): a misspelt key is an error. */
static bool check_keys(json_t *obj, const char *const *allowed, const char *where, char *err,
                       size_t errlen)
{
    return sl_jsonstrict_check(obj, allowed, where, err, errlen) == SL_OK;
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

static void dep_config_clear(sl_sim_dep_config_t *dep)
{
    free(dep->name);
    free(dep->model);
    free(dep->api_key);
    free(dep->faults.windows);
}

/* Times in the config: up to ten years of milliseconds. */
#define CONFIG_MS_MAX 315360000000LL

static bool parse_faults(json_t *obj, const char *dep_where, sl_sim_faults_t *f, char *err,
                         size_t errlen)
{
    f->spend_limit_after = -1;
    f->retry_after_share = 1.0;
    f->retry_after_ms = 1000;
    f->slow_ms = 1000;
    f->stream_stall_ms = 60000;
    if (obj == NULL || json_is_null(obj))
        return true;
    char where[NAME_MAX_LEN + 64];
    snprintf(where, sizeof where, "%s.faults", dep_where);
    if (!json_is_object(obj)) {
        set_err(err, errlen, "%s: must be an object", where);
        return false;
    }
    if (!check_keys(obj, fault_keys, where, err, errlen))
        return false;
    int64_t spend = -1;
    int64_t seed = 0;
    if (!get_number(obj, "rate_limit_share", 0.0, 1.0, where, &f->rate_limit_share, err, errlen) ||
        !get_number(obj, "retry_after_share", 1.0, 1.0, where, &f->retry_after_share, err,
                    errlen) ||
        !get_int(obj, "retry_after_ms", 1000, 0, DAY_MS_DEFAULT, where, &f->retry_after_ms, err,
                 errlen) ||
        !get_number(obj, "overloaded_share", 0.0, 1.0, where, &f->overloaded_share, err, errlen) ||
        !get_number(obj, "slow_share", 0.0, 1.0, where, &f->slow_share, err, errlen) ||
        !get_int(obj, "slow_ms", 1000, 0, 3600000, where, &f->slow_ms, err, errlen) ||
        !get_number(obj, "drop_share", 0.0, 1.0, where, &f->drop_share, err, errlen) ||
        !get_number(obj, "stream_cut_share", f->drop_share, 1.0, where, &f->stream_cut_share, err,
                    errlen) ||
        !get_number(obj, "stream_stall_share", 0.0, 1.0, where, &f->stream_stall_share, err,
                    errlen) ||
        !get_int(obj, "stream_stall_ms", 60000, 0, 3600000, where, &f->stream_stall_ms, err,
                 errlen) ||
        !get_int(obj, "spend_limit_after", -1, 0, CONFIG_MS_MAX, where, &spend, err, errlen) ||
        !get_int(obj, "seed", 0, 0, INT64_MAX, where, &seed, err, errlen))
        return false;
    json_t *accel = json_object_get(obj, "acceleration");
    if (accel != NULL && !json_is_null(accel)) {
        static const char *const accel_keys[] = {"window_ms", "growth", "floor", NULL};
        char awhere[NAME_MAX_LEN + 96];
        snprintf(awhere, sizeof awhere, "%s.acceleration", where);
        if (!json_is_object(accel)) {
            set_err(err, errlen, "%s: must be an object", awhere);
            return false;
        }
        if (!check_keys(accel, accel_keys, awhere, err, errlen) ||
            !get_int(accel, "window_ms", 1000, 10, 3600000, awhere, &f->accel_window_ms, err,
                     errlen) ||
            !get_number(accel, "growth", 0.5, 100.0, awhere, &f->accel_growth, err, errlen) ||
            !get_int(accel, "floor", 10, 1, INT64_MAX / 4, awhere, &f->accel_floor, err, errlen))
            return false;
    }
    /* stream_cut_share defaults to drop_share, which is read just before it. */
    f->spend_limit_after = spend;
    json_t *seed_val = json_object_get(obj, "seed");
    f->has_seed = seed_val != NULL && !json_is_null(seed_val);
    f->seed = (uint64_t)seed;

    static const char *const origins[] = {"start", "first_request", NULL};
    int origin = 0;
    if (!get_choice(obj, "unavailable_origin", origins, where, &origin, err, errlen))
        return false;
    f->windows_from_first = origin == 1;
    json_t *windows = json_object_get(obj, "unavailable");
    if (windows == NULL || json_is_null(windows))
        return true;
    if (!json_is_array(windows) || json_array_size(windows) > MAX_WINDOWS) {
        set_err(err, errlen, "%s: \"unavailable\" must be an array of at most %d windows", where,
                MAX_WINDOWS);
        return false;
    }
    f->windows = calloc(json_array_size(windows) + 1, sizeof *f->windows);
    if (f->windows == NULL) {
        set_err(err, errlen, "%s: out of memory", where);
        return false;
    }
    size_t i;
    json_t *win;
    json_array_foreach(windows, i, win)
    {
        char wwhere[sizeof where + 48];
        snprintf(wwhere, sizeof wwhere, "%s.unavailable[%zu]", where, i);
        if (!json_is_object(win)) {
            set_err(err, errlen, "%s: must be an object", wwhere);
            return false;
        }
        sl_sim_window_t *w = &f->windows[i];
        if (!check_keys(win, window_keys, wwhere, err, errlen) ||
            !get_int(win, "from_ms", -1, 0, CONFIG_MS_MAX, wwhere, &w->from_ms, err, errlen) ||
            !get_int(win, "to_ms", -1, 0, CONFIG_MS_MAX, wwhere, &w->to_ms, err, errlen))
            return false;
        if (w->from_ms < 0 || w->to_ms < 0 || w->from_ms >= w->to_ms) {
            set_err(err, errlen, "%s: needs \"from_ms\" < \"to_ms\"", wwhere);
            return false;
        }
        f->n_windows = i + 1;
    }
    return true;
}

/* The optional "batch" object: how the deployment's batch APIs behave. */
static bool parse_batch(json_t *obj, const char *dep_where, sl_sim_batch_config_t *b, char *err,
                        size_t errlen)
{
    b->turnaround_ms = 5000;
    b->max_batches = 1000;
    if (obj == NULL || json_is_null(obj))
        return true;
    char where[NAME_MAX_LEN + 64];
    snprintf(where, sizeof where, "%s.batch", dep_where);
    if (!json_is_object(obj)) {
        set_err(err, errlen, "%s: must be an object", where);
        return false;
    }
    return check_keys(obj, batch_keys, where, err, errlen) &&
           get_int(obj, "turnaround_ms", 5000, 0, CONFIG_MS_MAX, where, &b->turnaround_ms, err,
                   errlen) &&
           get_int(obj, "enqueued_tokens", 0, 0, SL_SIM_LIMIT_MAX, where, &b->enqueued_tokens, err,
                   errlen) &&
           get_int(obj, "creates_per_minute", 0, 0, 1000000, where, &b->creates_per_minute, err,
                   errlen) &&
           get_number(obj, "line_error_share", 0.0, 1.0, where, &b->line_error_share, err,
                      errlen) &&
           get_number(obj, "expire_share", 0.0, 1.0, where, &b->expire_share, err, errlen) &&
           get_int(obj, "max_batches", 1000, 1, 100000, where, &b->max_batches, err, errlen);
}

static bool parse_deployment(json_t *obj, size_t index, sl_sim_dep_config_t *dep, char *err,
                             size_t errlen)
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

    static const char *const apis[] = {"openai", "azure", "anthropic", "gemini", NULL};
    static const char *const tpm_counting[] = {"max", "sum", NULL};
    static const char *const otpm_counting[] = {"generated", "max_tokens", NULL};
    static const char *const headers[] = {"openai", "anthropic", "azure", "none", NULL};
    /* Each API's own headers unless the config says otherwise. */
    static const sl_sim_header_style_t api_headers[SL_SIM_API_COUNT_] = {
        [SL_SIM_API_OPENAI] = SL_SIM_HEADERS_OPENAI,
        [SL_SIM_API_AZURE] = SL_SIM_HEADERS_AZURE,
        [SL_SIM_API_ANTHROPIC] = SL_SIM_HEADERS_ANTHROPIC,
        [SL_SIM_API_GEMINI] = SL_SIM_HEADERS_NONE,
    };
    int choice = 0;
    if (!get_choice(obj, "api", apis, where, &choice, err, errlen))
        return false;
    dep->api = (sl_sim_api_t)choice;
    if (!get_choice(obj, "tpm_counting", tpm_counting, where, &choice, err, errlen))
        return false;
    dep->tpm_sum = choice == 1;
    if (!get_choice(obj, "otpm_counting", otpm_counting, where, &choice, err, errlen))
        return false;
    dep->otpm_max_tokens = choice == 1;
    if (!get_choice(obj, "headers", headers, where, &choice, err, errlen))
        return false;
    json_t *style = json_object_get(obj, "headers");
    dep->headers = style == NULL || json_is_null(style) ? api_headers[dep->api]
                                                        : (sl_sim_header_style_t)choice;

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
                 errlen) ||
        !get_number(obj, "tool_use_share", 0.0, 1.0, where, &dep->tool_use_share, err, errlen) ||
        !get_int(obj, "stream_chunks", 5, 1, STREAM_CHUNKS_MAX, where, &dep->stream_chunks, err,
                 errlen) ||
        !get_bool(obj, "rolling_minute", false, where, &dep->rolling_minute, err, errlen))
        return false;
    if (dep->output_min > dep->output_max) {
        set_err(err, errlen, "%s: \"output_min\" (%lld) exceeds \"output_max\" (%lld)", where,
                (long long)dep->output_min, (long long)dep->output_max);
        return false;
    }
    return parse_faults(json_object_get(obj, "faults"), where, &dep->faults, err, errlen) &&
           parse_batch(json_object_get(obj, "batch"), where, &dep->batch, err, errlen);
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
    int64_t seed = 0;
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
                 err, errlen) ||
        !get_int(root, "seed", 0, 0, INT64_MAX, "config", &seed, err, errlen))
        goto out;
    cfg->seed = (uint64_t)seed;

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
