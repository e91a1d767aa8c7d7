/* fields.c - lenient reads of the admin API's JSON (see fields.h). */
#include "fields.h"

#include <math.h>

int64_t sl_cli_get_i64(const json_t *obj, const char *key, int64_t dflt)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (json_is_real(v) && isfinite(json_real_value(v)) && fabs(json_real_value(v)) < 9e18)
        return (int64_t)llround(json_real_value(v));
    return dflt;
}

double sl_cli_get_num(const json_t *obj, const char *key, double dflt)
{
    json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

const char *sl_cli_get_str(const json_t *obj, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s != NULL ? s : dflt;
}

int sl_cli_get_bool(const json_t *obj, const char *key)
{
    return json_is_true(json_object_get(obj, key));
}
