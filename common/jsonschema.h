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
 * pattern: an ECMA-262 regular expression, read as with the "u" flag (as JSON Schema recommends)
 * and matched anywhere in the string (unanchored), by PCRE2 (JIT-compiled where available).
 * Supported with ECMA-262's meaning: code points, not bytes; "." excludes exactly \n \r U+2028
 * U+2029; \d \w \b are ASCII; \s is ECMA-262's Unicode white space, in classes too; "$" matches
 * only at the end; [] and [^]; \xHH, \uHHHH, \u{H...} (surrogate pairs combine), \cX, \0;
 * \p{...} with PCRE2's property names (\p{Lu}, \p{Script=Greek}; not \p{Letter}); lookahead;
 * lookbehind of bounded length; backreferences (\1, \k<name>; one to a group that did not take
 * part matches ""); named groups; lazy quantifiers.
 * Compile errors: lookbehind of unbounded length, and PCRE2-only syntax whose meaning ECMA-262
 * does not share: escapes such as \h \A \Q, octal escapes, inline flags "(?i)", "(?>",
 * "(*VERB)", possessive quantifiers "a++", and a literal "{" (write \{). A lone "]" or "}" is a
 * literal, as it was before PCRE2 (ECMA-262's "u" flag refuses it). A compile error names the
 * problem and its byte offset in the pattern. A pattern is at most SL_SCHEMA_MAX_PATTERN_LEN
 * bytes. One match is bounded (100,000 backtracking steps; 8 MiB of stack or backtracking
 * memory, enough for a repeated group over about 350 KB with the JIT, 32 KB without): a string
 * on which a pattern gives up fails validation with "could not match the pattern ... within its
 * limits", and nothing (not even "not") turns that into a pass.
 *
 * $ref cycles that never descend into the document (e.g. {"$ref": "#"} at the root) are rejected
 * at compile time; recursion that does descend is bounded at validation by
 * SL_SCHEMA_MAX_DEPTH levels of document nesting, and the whole validation by a step budget
 * (SL_SCHEMA_STEPS_PER_NODE). Groups in a pattern nest at most SL_ECMARE_MAX_NESTING deep.
 */
#ifndef SL_JSONSCHEMA_H
#define SL_JSONSCHEMA_H

#include <stddef.h>

#include <jansson.h>

#include "ecmare.h"
#include "err.h"

/* Deepest document nesting a validation descends into; the root value is at depth 0. Deeper
 * values fail with "document nested too deeply". */
#define SL_SCHEMA_MAX_DEPTH 64

/* A validation applies at most (SL_SCHEMA_STEPS_PER_NODE x nodes + 64) x values schema nodes,
 * nodes those of the compiled schema and values those of the document: a schema whose $refs fan
 * out (anyOf: [{$ref: a1}, {$ref: a1}], a1 the same, 40 deep) would otherwise take 2^40 steps.
 * One past the budget fails with "validation gave up", which nothing (not even "not") turns into
 * a pass. Schemas that apply each node once per value stay far below it. */
#define SL_SCHEMA_STEPS_PER_NODE 4

/* Longest "pattern" accepted, in bytes; longer ones are a compile error. */
#define SL_SCHEMA_MAX_PATTERN_LEN SL_ECMARE_MAX_LEN

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
 * Never modifies doc (not even its reference count). Allocates nothing, except on a thread's
 * first pattern match: a match block and a JIT stack for that thread, reused by every later
 * match on it and freed when the thread exits (without the JIT, the match block may also grow
 * up to the 8 MiB backtracking bound). Thread-safe: any number of threads may validate against
 * one compiled schema at once. */
sl_err_t sl_schema_validate(const sl_schema_t *schema, const json_t *doc, char *why, size_t whylen);

/* Frees a compiled schema. NULL is a no-op. No validation may be running on it. */
void sl_schema_free(sl_schema_t *schema);

#endif
