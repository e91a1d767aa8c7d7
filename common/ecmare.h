/* ecmare.h - ECMA-262 regular expressions, as JSON Schema's "pattern" means them.
 *
 * A pattern is read as ECMA-262 with the "u" flag and matched anywhere in a string (unanchored),
 * by PCRE2, JIT-compiled where available. Constructs PCRE2 reads otherwise (".", "\s", "\S",
 * "\v") are rewritten to ECMA-262's meaning; PCRE2-only syntax is refused. jsonschema.h lists
 * what is and is not supported. A pattern is bounded in length (SL_ECMARE_MAX_LEN) and group
 * nesting (SL_ECMARE_MAX_NESTING), a match in backtracking steps and memory: a pattern that runs
 * away gives up instead of hanging or exhausting the stack.
 *
 * Thread safety: a compiled pattern is read-only and may be matched from any number of threads
 * at once; each thread gets its own match block and JIT stack on its first match, freed when it
 * exits.
 */
#ifndef SL_ECMARE_H
#define SL_ECMARE_H

#include <stddef.h>

#include "err.h"

/* Longest pattern accepted, in bytes. */
#define SL_ECMARE_MAX_LEN 4096
/* Deepest nesting of groups accepted ("((a))" is 2): PCRE2 compiles nested groups recursively,
 * so a hostile schema must not choose the depth. */
#define SL_ECMARE_MAX_NESTING 32

typedef struct sl_ecmare sl_ecmare_t;

/* Compiles src[0..len). On SL_ESCHEMA, why gets the problem and its byte offset in src ("...
 * at offset N"); SL_ENOMEM when memory runs out. *out is set only on success; free it with
 * sl_ecmare_free. */
sl_err_t sl_ecmare_compile(const char *src, size_t len, sl_ecmare_t **out, char *why,
                           size_t whylen);

/* 1 when re matches somewhere in s[0..len) (UTF-8), 0 when it does not, -1 when the match gave
 * up (a limit, or no memory): why then says which, and the answer is neither. */
int sl_ecmare_match(const sl_ecmare_t *re, const char *s, size_t len, char *why, size_t whylen);

/* Frees re; NULL is a no-op. */
void sl_ecmare_free(sl_ecmare_t *re);

#endif
