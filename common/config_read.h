/* config_read.h - the config loader's typed, strict readers and the context of one load.
 *
 * Internal to the config loader (common/config*.c); the rest of sluice includes config.h. A
 * reader reads one member of a JSON object with its type, default and range. A mistake is
 * recorded in the load's context as a one-line reason naming where it is ("routes[2]") and the
 * key; only the first mistake of a load is kept, so loaders go on after a failure and look at
 * c->failed only where going on would be wrong (an index that does not exist, say).
 */
#ifndef SL_CONFIG_READ_H
#define SL_CONFIG_READ_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* The bound of integer members that have no tighter one. */
#define CFG_I64MAX INT64_C(9000000000000000000)

/* One load's error state. */
typedef struct {
    char *err; /* the caller's buffer for the reason; NULL or errlen 0: none is written */
    size_t errlen;
    int failed; /* set by the first failure, whose reason is the one kept */
} cfg_ctx_t;

/* Records a failure with a printf-style reason, unless the load has failed already. */
void cfg_fail(cfg_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Fails when obj (an object) has a key not in the NULL-terminated list allowed, naming the
 * first: "<where>: unknown key \"<key>\"". */
void cfg_check_keys(cfg_ctx_t *c, json_t *obj, const char *where, const char *const *allowed);

/* The readers of obj[key]. Absent or null gives def; a value of the wrong type, or outside
 * [min, max], is a failure and gives def too. Strings point into obj; a NULL def makes a string
 * required ("missing string"), and a wrong type then gives "". A NULL obj (an optional section
 * that is absent) reads as an object without members. */
const char *cfg_get_str(cfg_ctx_t *c, json_t *obj, const char *where, const char *key,
                        const char *def);
int64_t cfg_get_int(cfg_ctx_t *c, json_t *obj, const char *where, const char *key, int64_t def,
                    int64_t min, int64_t max);
/* Integers and reals alike. */
double cfg_get_real(cfg_ctx_t *c, json_t *obj, const char *where, const char *key, double def,
                    double min, double max);
/* 1 for true, 0 for false. */
int cfg_get_bool(cfg_ctx_t *c, json_t *obj, const char *where, const char *key, int def);
/* obj[key] when it is an object (cfg_get_obj) or an array (cfg_get_arr), borrowed from obj;
 * NULL when absent. Any other value, null included, is a failure and gives NULL. */
json_t *cfg_get_obj(cfg_ctx_t *c, json_t *obj, const char *where, const char *key);
json_t *cfg_get_arr(cfg_ctx_t *c, json_t *obj, const char *where, const char *key);

/* Element i of a config array, which must be an object with only the allowed keys; writes its
 * label ("routes[2]") into where. NULL (and a failure recorded) when it is not an object. */
json_t *cfg_array_object(cfg_ctx_t *c, json_t *arr, size_t i, const char *section,
                         const char *const *keys, char *where, size_t wherecap);
/* Resolves obj[key], an array of names, into indexes with lookup (names of `what` it does not
 * know are failures). *out gets a malloc'd array (freed with the config; NULL and a failure when
 * out of memory), *n its length. */
void cfg_resolve_names(cfg_ctx_t *c, const sl_config_t *cfg, json_t *obj, const char *where,
                       const char *key, const char *what,
                       int (*lookup)(const sl_config_t *, const char *), int **out, int *n);

#endif
