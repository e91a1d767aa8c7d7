/* fields.h - reading the admin API's JSON leniently.
 *
 * The views print whatever the scheduler answers, older or newer than this sluice: a field
 * that is missing or of another type reads as the caller's default instead of failing.
 */
#ifndef SL_CLI_FIELDS_H
#define SL_CLI_FIELDS_H

#include <jansson.h>
#include <stdint.h>

/* obj[key] as an integer: an integer as it is, a finite real rounded, anything else dflt. */
int64_t sl_cli_get_i64(const json_t *obj, const char *key, int64_t dflt);

/* obj[key] as a number (integer or real), else dflt. */
double sl_cli_get_num(const json_t *obj, const char *key, double dflt);

/* obj[key] when it is a string (owned by obj), else dflt. */
const char *sl_cli_get_str(const json_t *obj, const char *key, const char *dflt);

/* 1 when obj[key] is true, else 0. */
int sl_cli_get_bool(const json_t *obj, const char *key);

#endif
