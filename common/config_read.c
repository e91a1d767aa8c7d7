/* config_read.c - the config loader's typed, strict readers and its error context (see
 * config_read.h).
 */
#include "config_read.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "jsonstrict.h"

void cfg_fail(cfg_ctx_t *c, const char *fmt, ...)
{
    if (c->failed)
        return;
    c->failed = 1;
    if (c->err == NULL || c->errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
}

void cfg_check_keys(cfg_ctx_t *c, json_t *obj, const char *where, const char *const *allowed)
{
    /* Like cfg_fail(), only the first failure of a load is reported. */
    if (c->failed)
        return;
    if (sl_jsonstrict_check(obj, allowed, where, c->err, c->errlen) != SL_OK)
        c->failed = 1;
}

const char *cfg_get_str(cfg_ctx_t *c, json_t *obj, const char *where, const char *key,
                        const char *def)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL || json_is_null(v)) {
        if (def == NULL)
            cfg_fail(c, "%s: missing string \"%s\"", where, key);
        return def;
    }
    if (!json_is_string(v)) {
        cfg_fail(c, "%s: \"%s\" must be a string", where, key);
        return def != NULL ? def : "";
    }
    return json_string_value(v);
}

int64_t cfg_get_int(cfg_ctx_t *c, json_t *obj, const char *where, const char *key, int64_t def,
                    int64_t min, int64_t max)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL || json_is_null(v))
        return def;
    if (!json_is_integer(v)) {
        cfg_fail(c, "%s: \"%s\" must be an integer", where, key);
        return def;
    }
    int64_t x = (int64_t)json_integer_value(v);
    if (x < min || x > max) {
        cfg_fail(c, "%s: \"%s\" = %lld is outside [%lld, %lld]", where, key, (long long)x,
                 (long long)min, (long long)max);
        return def;
    }
    return x;
}

double cfg_get_real(cfg_ctx_t *c, json_t *obj, const char *where, const char *key, double def,
                    double min, double max)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL || json_is_null(v))
        return def;
    if (!json_is_number(v)) {
        cfg_fail(c, "%s: \"%s\" must be a number", where, key);
        return def;
    }
    double x = json_number_value(v);
    if (x < min || x > max) {
        cfg_fail(c, "%s: \"%s\" = %g is outside [%g, %g]", where, key, x, min, max);
        return def;
    }
    return x;
}

int cfg_get_bool(cfg_ctx_t *c, json_t *obj, const char *where, const char *key, int def)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL || json_is_null(v))
        return def;
    if (!json_is_boolean(v)) {
        cfg_fail(c, "%s: \"%s\" must be true or false", where, key);
        return def;
    }
    return json_is_true(v);
}

/* obj[key] when it is of type type; NULL when absent, and a failure ("must be <what>") when it is
 * anything else. */
static json_t *get_typed(cfg_ctx_t *c, json_t *obj, const char *where, const char *key,
                         json_type type, const char *what)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL)
        return NULL;
    if (json_typeof(v) != type) {
        cfg_fail(c, "%s: \"%s\" must be %s", where, key, what);
        return NULL;
    }
    return v;
}

json_t *cfg_get_obj(cfg_ctx_t *c, json_t *obj, const char *where, const char *key)
{
    return get_typed(c, obj, where, key, JSON_OBJECT, "an object");
}

json_t *cfg_get_arr(cfg_ctx_t *c, json_t *obj, const char *where, const char *key)
{
    return get_typed(c, obj, where, key, JSON_ARRAY, "an array");
}

json_t *cfg_array_object(cfg_ctx_t *c, json_t *arr, size_t i, const char *section,
                         const char *const *keys, char *where, size_t wherecap)
{
    json_t *obj = json_array_get(arr, i);
    snprintf(where, wherecap, "%s[%zu]", section, i);
    if (!json_is_object(obj)) {
        cfg_fail(c, "%s must be an object", where);
        return NULL;
    }
    cfg_check_keys(c, obj, where, keys);
    return obj;
}

void cfg_resolve_names(cfg_ctx_t *c, const sl_config_t *cfg, json_t *obj, const char *where,
                       const char *key, const char *what,
                       int (*lookup)(const sl_config_t *, const char *), int **out, int *n)
{
    json_t *arr = cfg_get_arr(c, obj, where, key);
    size_t len = json_array_size(arr);
    *n = 0;
    *out = calloc(len + 1, sizeof **out);
    if (*out == NULL) {
        cfg_fail(c, "out of memory");
        return;
    }
    for (size_t j = 0; j < len; j++) {
        json_t *name = json_array_get(arr, j);
        int idx = json_is_string(name) ? lookup(cfg, json_string_value(name)) : -1;
        if (idx < 0)
            cfg_fail(c, "%s: unknown %s at %s[%zu]", where, what, key, j);
        else
            (*out)[(*n)++] = idx;
    }
}
