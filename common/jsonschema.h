/* jsonschema.h - a small, strict JSON Schema (draft 2020-12 subset) validator.
 *
 * The one idea: a schema is compiled once into an internal tree (keywords parsed, $refs resolved,
 * patterns compiled) and every validation walks that tree, so validating a message never looks at
 * schema JSON again. Compilation is strict: any keyword outside the supported set is an error,
 * so a constraint written in a schema is never silently skipped.
 *
 * Supported keywords
 *   type (a name or an array of names: object, array, string, integer, number, boolean, null;
 *        "integer" also accepts a real with no fractional part, e.g. 2.0),
 *   properties, required, additionalProperties (boolean or schema), items (one schema),
 *   enum, const (numbers compare by value: 1 equals 1.0),
 *   minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers),
 *   minLength, maxLength (Unicode code points of the UTF-8 string, not bytes),
 *   minItems, maxItems, minProperties, maxProperties,
 *   pattern, anyOf, oneOf, allOf, not,
 *   $ref to "#" or "#/$defs/<name>" (name JSON-pointer-escaped) of the root schema only.
 * Accepted and ignored (annotations): $schema, $id (root only), $comment, title, description,
 *   examples, default, format (NOT checked), readOnly, writeOnly, deprecated, and $defs as a
 *   container (its members are compiled, so they are checked too). Boolean schemas true/false.
 *
 * pattern: ECMA-262 patterns are translated to POSIX extended regular expressions (<regex.h>) at
 * compile time and matched anywhere in the string (unanchored). Non-ASCII strings are matched in
 * the C.UTF-8 locale so that "." and bracket expressions match whole code points (all-ASCII
 * strings use a faster byte-wise copy of the expression, which is exact for them). Only the
 * ERE-compatible subset is supported: literals, ".", "^", "$", "|", groups "(...)" and "(?:...)",
 * quantifiers * + ? {n} {n,} {n,m} (a lazy "?" suffix is accepted: it cannot change whether a
 * string matches), bracket expressions with ranges, escapes \d \D \w \W \s \S \t \n \r \f \v and
 * escaped syntax characters. Anything whose meaning would differ (lookaround, backreferences, \b,
 * \uXXXX, \p{..}, named groups, negated class escapes inside [...], non-ASCII ranges) is a compile
 * error.
 *
 * $ref cycles that never descend into the document (e.g. {"$ref": "#"} at the root) are rejected
 * at compile time; recursion that does descend is bounded at validation by
 * SL_SCHEMA_MAX_DEPTH levels of document nesting.
 */
#ifndef SL_JSONSCHEMA_H
#define SL_JSONSCHEMA_H

#include <stddef.h>

#include <jansson.h>

#include "err.h"

/* Deepest document nesting a validation descends into; the root value is at depth 0. Deeper
 * values fail with "document nested too deeply". */
#define SL_SCHEMA_MAX_DEPTH 64

typedef struct sl_schema sl_schema_t;

/* Reads a schema from the JSON file at path and compiles it (see sl_schema_compile).
 * Errors: SL_EINVAL (NULL path/out), SL_EIO (cannot open/read), SL_EPARSE (not JSON, or a
 * duplicate key), SL_ESCHEMA (unsupported or malformed keyword), SL_ENOMEM.
 * On failure writes a one-line reason prefixed with the path into err (may be NULL; truncated to
 * errlen). *out is set to NULL on entry and to the schema only on success; the caller frees it
 * with sl_schema_free. */
sl_err_t sl_schema_load_file(const char *path, sl_schema_t **out, char *err, size_t errlen);

/* Compiles schema (an object or a boolean). The result does not reference schema: the caller
 * keeps ownership of it and may free it right away. schema is not modified.
 * Errors: SL_EINVAL (NULL schema/out), SL_ESCHEMA (unsupported keyword, malformed keyword value,
 * unresolvable $ref, $ref cycle without progress, bad pattern), SL_ENOMEM.
 * On failure writes "<schema json-pointer>: <reason>" into err (may be NULL), e.g.
 * "/properties/model: unsupported keyword \"uniqueItems\"". *out is set to NULL on entry and to
 * the schema only on success; the caller frees it with sl_schema_free. */
sl_err_t sl_schema_compile(const json_t *schema, sl_schema_t **out, char *err, size_t errlen);

/* Validates doc against schema. Returns SL_OK, SL_ESCHEMA when doc does not match, or SL_EINVAL
 * for NULL arguments. On SL_ESCHEMA writes the FIRST violation found into why (may be NULL;
 * truncated to whylen, always NUL-terminated when whylen > 0) as "<json-pointer>: <reason>",
 * e.g. "/messages/0/role: value is not one of the allowed values" or
 * "/: missing required property \"api_key\"". The document root is shown as "/"; "~" and "/"
 * in property names are escaped as "~0" and "~1" (RFC 6901), and control characters as \u00XX
 * so the reason stays on one line.
 * Never modifies doc (not even its reference count) and allocates nothing. Thread-safe: any
 * number of threads may validate against one compiled schema at once (glibc serialises
 * concurrent matches of the same compiled pattern internally). */
sl_err_t sl_schema_validate(const sl_schema_t *schema, const json_t *doc, char *why, size_t whylen);

/* Frees a compiled schema. NULL is a no-op. No validation may be running on it. */
void sl_schema_free(sl_schema_t *schema);

#endif
