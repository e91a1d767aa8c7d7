/* batchwire_int.h - what batchwire.c shares with batchresults.c, internal to them: reading
 * untrusted JSON answers of the providers' batch APIs.
 */
#ifndef SL_BATCHWIRE_INT_H
#define SL_BATCHWIRE_INT_H

#include <jansson.h>
#include <stddef.h>

/* obj[key] when it is a string, else NULL. */
const char *bw_jstr(const json_t *obj, const char *key);

/* Parses an untrusted JSON object: NULL when it is longer than max bytes, nested too deep, not
 * JSON or not an object. */
json_t *bw_parse_object(const char *text, size_t len, size_t max);

#endif
