/* jsonstrict.h - strict reading of JSON objects: every key must be one the reader knows.
 *
 * A typo in a config key or an admin request field must be refused, not silently ignored (a
 * misspelt limit would leave a provider unprotected). Readers list the keys they take in a
 * NULL-terminated array and ask here for the first key that is not among them.
 */
#ifndef SL_JSONSTRICT_H
#define SL_JSONSTRICT_H

#include <jansson.h>
#include <stddef.h>

#include "err.h"

/* The first key of obj, in the object's order, that is not in allowed (a NULL-terminated list),
 * or NULL when every key is allowed. obj must be an object. The string returned is owned by obj
 * and lives as long as that key does. */
const char *sl_jsonstrict_unknown_key(json_t *obj, const char *const *allowed);

/* Checks that json is an object whose keys are all in allowed. Returns SL_OK, or SL_ESCHEMA with
 * a one-line reason in err (truncated to errlen; err may be NULL or errlen 0 for none):
 *   "<where>: must be an object"         when json is not an object (or is NULL),
 *   "<where>: unknown key \"<key>\""     for the first key not allowed.
 * json is only read. */
sl_err_t sl_jsonstrict_check(json_t *json, const char *const *allowed, const char *where, char *err,
                             size_t errlen);

#endif
