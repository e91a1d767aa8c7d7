/* jsonstrict.c - refusing JSON objects with keys the reader does not know (see jsonstrict.h). */
#include "jsonstrict.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

static int is_allowed(const char *key, const char *const *allowed)
{
    for (size_t i = 0; allowed[i] != NULL; i++) {
        if (strcmp(key, allowed[i]) == 0)
            return 1;
    }
    return 0;
}

const char *sl_jsonstrict_unknown_key(json_t *obj, const char *const *allowed)
{
    assert(json_is_object(obj) && allowed != NULL);
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val)
    {
        if (!is_allowed(key, allowed))
            return key;
    }
    return NULL;
}

sl_err_t sl_jsonstrict_check(json_t *json, const char *const *allowed, const char *where, char *err,
                             size_t errlen)
{
    int is_object = json_is_object(json);
    const char *key = is_object ? sl_jsonstrict_unknown_key(json, allowed) : NULL;
    if (is_object && key == NULL)
        return SL_OK;
    if (err != NULL && errlen > 0) {
        if (!is_object)
            snprintf(err, errlen, "%s: must be an object", where);
        else
            snprintf(err, errlen, "%s: unknown key \"%s\"", where, key);
    }
    return SL_ESCHEMA;
}
