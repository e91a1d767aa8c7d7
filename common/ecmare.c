/* ecmare.c - ECMA-262 regular expressions ("u" flag) on PCRE2 (see ecmare.h).
 *
 * The one idea: PCRE2 reads nearly all of ECMA-262 as ECMA-262 does; a small pass over the
 * pattern (ecma_to_pcre2) rewrites the few constructs it reads otherwise (".", "\s", "\S",
 * "\v") and refuses PCRE2-only syntax, then PCRE2 compiles the result (JIT where it can).
 * Matches are bounded in steps and memory.
 */
#include "ecmare.h"

#include <ctype.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "buf.h"

/* With these options PCRE2 reads nearly all of ECMA-262 ("u" flag) as ECMA-262 does: UTF
 * (code points, not bytes), DOLLAR_ENDONLY ("$" does not also match before a final "\n"),
 * ALLOW_EMPTY_CLASS ("[]" matches nothing, "[^]" anything), ALT_BSUX and EXTRA_ALT_BSUX
 * (\xHH, \uHHHH and \u{H...} as ECMA-262 spells them), MATCH_UNSET_BACKREF (a backreference to
 * a group that did not take part matches the empty string). PCRE2_UCP is deliberately not set:
 * it would make \d, \w and \b match non-ASCII digits and letters, and ECMA-262's do not. */
#define PATTERN_OPTIONS                                                                            \
    (PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALLOW_EMPTY_CLASS | PCRE2_ALT_BSUX |                 \
     PCRE2_MATCH_UNSET_BACKREF | PCRE2_NEVER_UCP | PCRE2_NEVER_BACKSLASH_C)

/* Bounds on one match, so that a pattern that backtracks exponentially costs at most about
 * 0.2 ms (1 ms without the JIT) and 8 MiB instead of running away. Legitimate patterns stay far
 * below them: a repeated group such as ^(?:a|b)*$ over a 100 KB string takes about 2,000 steps
 * under the JIT, and its stack, about 24 bytes a repetition, lets it cover some 350 KB (32 KB
 * with the interpreter, whose frames are bigger). */
#define MATCH_LIMIT 100000u      /* backtracking steps */
#define HEAP_LIMIT_KIB 8192u     /* the interpreter's backtracking frames, when there is no JIT */
#define JIT_STACK_MAX (8u << 20) /* the JIT's stack */

/* ECMA-262 WhiteSpace and LineTerminator as class members, and the complement of that set
 * (PCRE2's \s is ASCII-only without PCRE2_UCP, and Unicode's White_Space with it: neither is
 * ECMA-262's). */
#define ECMA_SPACE                                                                                 \
    "\\t\\n\\x0b\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
#define ECMA_NON_SPACE                                                                             \
    "\\x00-\\x08\\x0e-\\x1f\\x21-\\x9f\\u00a1-\\u167f\\u1681-\\u1fff\\u200b-\\u2027"               \
    "\\u202a-\\u202e\\u2030-\\u205e\\u2060-\\u2fff\\u3001-\\ufefe\\uff00-\\u{10ffff}"
/* ECMA-262's "." excludes exactly these four line terminators; no PCRE2 newline convention
 * excludes the same set. */
#define ECMA_DOT "[^\\n\\r\\u2028\\u2029]"

#define STR_(x) #x
#define STR(x) STR_(x)
#define MAX_NESTING_TEXT STR(SL_ECMARE_MAX_NESTING)

/* The rewritten pattern's cap: ECMA-262's \S becomes a class of about 150 bytes, so a pattern
 * of SL_ECMARE_MAX_LEN made only of them still fits. */
#define REWRITE_MAX ((size_t)SL_ECMARE_MAX_LEN * 160)

/* The rewriting of one ECMA-262 pattern into PCRE2 syntax (see ecma_to_pcre2). */
typedef struct {
    const char *src;
    size_t len;
    size_t i; /* next byte of src */
    sl_buf_t out;
    const char *reason; /* why the pattern is refused; NULL on failure: out of memory */
    size_t reason_at;   /* offset in src */
    unsigned depth;     /* groups open at src[i] */
    size_t find_out;    /* an offset into out whose source offset is wanted, or SIZE_MAX */
    size_t found_src;   /* the offset in src of the token that wrote out[find_out] */
} pat_t;

enum { ATOM_CHAR, ATOM_SET }; /* one code point (a range may start or end with it), or more */

static bool pat_put(pat_t *p, const char *s, size_t n)
{
    if (sl_buf_add(&p->out, s, n) == SL_OK)
        return true;
    p->reason = NULL;
    return false;
}

static bool pat_puts(pat_t *p, const char *s)
{
    return pat_put(p, s, strlen(s));
}

static bool pat_refuse(pat_t *p, size_t at, const char *reason)
{
    p->reason = reason;
    p->reason_at = at;
    return false;
}

static size_t utf8_seq_len(unsigned char lead)
{
    if (lead < 0x80)
        return 1;
    if ((lead & 0xe0) == 0xc0)
        return 2;
    if ((lead & 0xf0) == 0xe0)
        return 3;
    if ((lead & 0xf8) == 0xf0)
        return 4;
    return 1;
}

/* Copies the UTF-8 character at src[i] (jansson strings are valid UTF-8) and decodes it. */
static bool copy_char(pat_t *p, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)p->src + p->i;
    size_t n = utf8_seq_len(s[0]);
    if (p->i + n > p->len)
        n = p->len - p->i;
    static const unsigned char lead_mask[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
    uint32_t v = s[0] & lead_mask[n];
    for (size_t k = 1; k < n; k++)
        v = (v << 6) | (s[k] & 0x3f);
    *cp = v;
    p->i += n;
    return pat_put(p, (const char *)s, n);
}

/* Reads count hex digits at src[at]; false if there are fewer. */
static bool hex_at(const pat_t *p, size_t at, size_t count, uint32_t *value)
{
    uint32_t v = 0;
    for (size_t k = 0; k < count; k++) {
        if (at + k >= p->len || !isxdigit((unsigned char)p->src[at + k]))
            return false;
        char ch = p->src[at + k];
        v = v * 16 + (uint32_t)(ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10);
    }
    *value = v;
    return true;
}

/* \uHHHH or \u{H...} at src[at]; a surrogate pair written as two \uHHHH becomes one code point,
 * as with ECMA-262's "u" flag (PCRE2 refuses surrogates in UTF mode). */
static bool unicode_escape(pat_t *p, size_t at, uint32_t *cp)
{
    static const char bad[] = "\\u must be followed by four hex digits or {a code point}";
    size_t j = at + 2;
    if (j < p->len && p->src[j] == '{') {
        size_t k = j + 1;
        uint32_t v = 0, digit;
        while (k < p->len && k - j <= 8 && hex_at(p, k, 1, &digit)) {
            v = v * 16 + digit;
            k++;
        }
        if (k == j + 1 || k >= p->len || p->src[k] != '}' || v > 0x10ffff)
            return pat_refuse(p, at, bad);
        *cp = v;
        p->i = k + 1;
        return pat_put(p, p->src + at, p->i - at);
    }
    uint32_t hi, lo;
    if (!hex_at(p, j, 4, &hi))
        return pat_refuse(p, at, bad);
    p->i = j + 4;
    if (hi >= 0xd800 && hi <= 0xdbff && p->i + 1 < p->len && p->src[p->i] == '\\' &&
        p->src[p->i + 1] == 'u' && hex_at(p, p->i + 2, 4, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
        char pair[16];
        *cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
        p->i += 6;
        snprintf(pair, sizeof pair, "\\u{%x}", (unsigned)*cp);
        return pat_puts(p, pair);
    }
    *cp = hi;
    return pat_put(p, p->src + at, p->i - at);
}

/* Reads the escape at src[i] == '\\'; in a class when in_class. Refuses escapes ECMA-262 does
 * not have, whatever PCRE2 would make of them (\h, \A, \Q, octal, ...). */
static bool read_escape(pat_t *p, bool in_class, int *kind, uint32_t *cp)
{
    static const char unsupported[] = "unsupported escape (not ECMA-262)";
    size_t at = p->i;
    if (at + 1 >= p->len)
        return pat_refuse(p, at, "pattern ends with a backslash");
    char e = p->src[at + 1];
    const char *copy = p->src + at;
    p->i = at + 2;
    *kind = ATOM_CHAR;
    *cp = (unsigned char)e;
    switch (e) {
    case 's':
        *kind = ATOM_SET;
        return pat_puts(p, in_class ? ECMA_SPACE : "[" ECMA_SPACE "]");
    case 'S':
        *kind = ATOM_SET;
        return pat_puts(p, in_class ? ECMA_NON_SPACE : "[^" ECMA_SPACE "]");
    case 'd':
    case 'D':
    case 'w':
    case 'W':
        *kind = ATOM_SET;
        return pat_put(p, copy, 2);
    case 'b':
        if (in_class) {
            *cp = '\b'; /* inside a class, \b is a backspace, as in PCRE2 */
            return pat_put(p, copy, 2);
        }
        *kind = ATOM_SET;
        return pat_put(p, copy, 2);
    case 'B':
        if (in_class)
            return pat_refuse(p, at, unsupported);
        *kind = ATOM_SET;
        return pat_put(p, copy, 2);
    case 't':
    case 'n':
    case 'r':
    case 'f':
        *cp = e == 't' ? '\t' : e == 'n' ? '\n' : e == 'r' ? '\r' : '\f';
        return pat_put(p, copy, 2);
    case 'v':
        *cp = '\v';
        return pat_puts(p, "\\x0b"); /* PCRE2's \v is any vertical space */
    case '0':
        if (p->i < p->len && isdigit((unsigned char)p->src[p->i]))
            return pat_refuse(p, at, "octal escapes are not ECMA-262");
        *cp = 0;
        return pat_puts(p, "\\x00");
    case 'c':
        if (p->i >= p->len || !isalpha((unsigned char)p->src[p->i]))
            return pat_refuse(p, at, "\\c must be followed by a letter");
        *cp = (unsigned char)p->src[p->i] % 32;
        p->i++;
        return pat_put(p, copy, 3);
    case 'x':
        if (!hex_at(p, p->i, 2, cp))
            return pat_refuse(p, at, "\\x must be followed by two hex digits");
        p->i += 2;
        return pat_put(p, copy, 4);
    case 'u':
        return unicode_escape(p, at, cp);
    case 'p':
    case 'P': {
        /* PCRE2 checks the property's name. */
        const char *close =
            p->i < p->len && p->src[p->i] == '{' ? memchr(p->src + p->i, '}', p->len - p->i) : NULL;
        if (!close)
            return pat_refuse(p, at, "\\p and \\P must be followed by {property}");
        *kind = ATOM_SET;
        p->i = (size_t)(close - p->src) + 1;
        return pat_put(p, copy, p->i - at);
    }
    case 'k':
        if (in_class || p->i >= p->len || p->src[p->i] != '<')
            return pat_refuse(p, at, "\\k must be followed by <name>, outside [...]");
        *kind = ATOM_SET; /* the name and ">" follow as literals, which PCRE2 reads alike */
        return pat_put(p, copy, 2);
    default:
        break;
    }
    if (e >= '1' && e <= '9') {
        if (in_class)
            return pat_refuse(p, at, "backreferences cannot appear inside [...]");
        /* \g{N} is always a backreference in PCRE2; a bare \N of 10 or more may be octal. */
        size_t end = p->i;
        while (end < p->len && isdigit((unsigned char)p->src[end]))
            end++;
        *kind = ATOM_SET;
        p->i = end;
        return pat_puts(p, "\\g{") && pat_put(p, copy + 1, end - at - 1) && pat_puts(p, "}");
    }
    /* Escaped syntax characters, and "\-" (outside [...] too, as before). */
    if (e != '\0' && strchr("^$\\.*+?()[]{}|/-", e) != NULL)
        return pat_put(p, copy, 2);
    return pat_refuse(p, at, unsupported);
}

static bool class_atom(pat_t *p, int *kind, uint32_t *cp)
{
    if (p->src[p->i] == '\\')
        return read_escape(p, true, kind, cp);
    *kind = ATOM_CHAR;
    if (p->src[p->i] == '[') {
        /* Escaped, or PCRE2 would read "[:alpha:]" as a POSIX class. */
        *cp = '[';
        p->i++;
        return pat_puts(p, "\\[");
    }
    return copy_char(p, cp);
}

/* The class at src[i] == '['. ECMA-262 and PCRE2 (with PCRE2_ALLOW_EMPTY_CLASS) end a class at
 * the first unescaped "]", even right after "[" or "[^". */
static bool read_class(pat_t *p)
{
    size_t start = p->i;
    p->i++;
    if (!pat_puts(p, "["))
        return false;
    if (p->i < p->len && p->src[p->i] == '^') {
        p->i++;
        if (!pat_puts(p, "^"))
            return false;
    }
    for (;;) {
        int lo_kind, hi_kind;
        uint32_t lo, hi;
        if (p->i >= p->len)
            return pat_refuse(p, start, "unterminated [...] in pattern");
        if (p->src[p->i] == ']') {
            p->i++;
            return pat_puts(p, "]");
        }
        size_t atom_at = p->i;
        if (!class_atom(p, &lo_kind, &lo))
            return false;
        if (!(p->i + 1 < p->len && p->src[p->i] == '-' && p->src[p->i + 1] != ']'))
            continue;
        p->i++;
        if (!pat_puts(p, "-") || !class_atom(p, &hi_kind, &hi))
            return false;
        if (lo_kind != ATOM_CHAR || hi_kind != ATOM_CHAR)
            return pat_refuse(p, atom_at, "a class escape cannot start or end a range");
        if (lo > hi)
            return pat_refuse(p, atom_at, "range out of order in [...]");
    }
}

/* The group opening at src[i] == '('. Only ECMA-262's kinds of group pass: PCRE2 has many more
 * ("(?i)", "(?>", "(?|", "(*VERB)", ...) with meanings ECMA-262 does not have. */
static bool read_group(pat_t *p)
{
    static const char *const kinds[] = {"(?:", "(?=", "(?!", "(?<=", "(?<!"};
    size_t at = p->i, rest = p->len - at;
    if (++p->depth > SL_ECMARE_MAX_NESTING)
        return pat_refuse(p, at, "groups are nested more than " MAX_NESTING_TEXT " deep");
    if (rest > 1 && p->src[at + 1] == '*')
        return pat_refuse(p, at, "nothing to repeat after (");
    if (rest < 2 || p->src[at + 1] != '?') {
        p->i++;
        return pat_puts(p, "(");
    }
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        size_t n = strlen(kinds[k]);
        if (rest >= n && memcmp(p->src + at, kinds[k], n) == 0) {
            p->i += n;
            return pat_put(p, kinds[k], n);
        }
    }
    if (rest > 3 && p->src[at + 2] == '<') {
        p->i += 3; /* a named group: PCRE2 checks the name */
        return pat_puts(p, "(?<");
    }
    return pat_refuse(p, at, "unsupported group (ECMA-262 has (?: (?= (?! (?<= (?<! and (?<name>)");
}

/* True when src[at] == '{' starts a quantifier {n}, {n,} or {n,m}; *end is then past it. */
static bool is_brace_quantifier(const pat_t *p, size_t at, size_t *end)
{
    size_t j = at + 1, digits = 0;
    while (j < p->len && isdigit((unsigned char)p->src[j])) {
        j++;
        digits++;
    }
    if (digits > 0 && j < p->len && p->src[j] == ',') {
        j++;
        while (j < p->len && isdigit((unsigned char)p->src[j]))
            j++;
    }
    if (digits == 0 || j >= p->len || p->src[j] != '}')
        return false;
    *end = j + 1;
    return true;
}

/* Checks an ECMA-262 pattern and writes the PCRE2 pattern that means the same into p->out.
 * PCRE2 does the parsing and the matching; this pass only (1) refuses syntax that ECMA-262 (with
 * the "u" flag) does not have but PCRE2 would accept with a meaning of its own, and (2) rewrites
 * what PCRE2 reads differently and has no option for: ".", \s, \S, \v, \N backreferences,
 * surrogate pairs, and "[" inside a class. Returns false with p->reason (NULL: out of memory). */
static bool ecma_to_pcre2(pat_t *p)
{
    enum { PLAIN, QUANTIFIED, LAZY } state = PLAIN;
    if (!pat_puts(p, ""))
        return false;
    while (p->i < p->len) {
        size_t tok = p->i;
        char ch = p->src[tok];
        int kind;
        uint32_t cp;
        bool ok;
        int next = PLAIN;
        if (ch == '?' && state == QUANTIFIED) {
            p->i++;
            ok = pat_puts(p, "?"); /* lazy */
            next = LAZY;
        } else if (ch != '\0' && strchr("*+?{", ch)) {
            size_t end = tok + 1;
            if (state != PLAIN)
                return pat_refuse(p, tok, "a quantifier cannot follow another quantifier");
            if (ch == '{' && !is_brace_quantifier(p, tok, &end))
                return pat_refuse(p, tok, "a literal { must be escaped as \\{ in patterns");
            p->i = end;
            ok = pat_put(p, p->src + tok, end - tok);
            next = QUANTIFIED;
        } else if (ch == '\\') {
            ok = read_escape(p, false, &kind, &cp);
        } else if (ch == '[') {
            ok = read_class(p);
        } else if (ch == '(') {
            ok = read_group(p);
        } else if (ch == '.') {
            p->i++;
            ok = pat_puts(p, ECMA_DOT);
        } else if (ch == ')') {
            p->depth -= p->depth > 0; /* an unbalanced ")" is PCRE2's to refuse */
            ok = copy_char(p, &cp);
        } else {
            ok = copy_char(p, &cp); /* literals, and ^ $ | ) } ] which both read alike */
        }
        if (!ok)
            return false;
        if (p->out.len > p->find_out && p->found_src == SIZE_MAX)
            p->found_src = tok;
        state = next;
    }
    return true;
}

/* Where in the pattern as written PCRE2's error offset (into the rewritten pattern) lies. */
static size_t source_offset(const char *src, size_t len, size_t out_offset)
{
    pat_t p = {.src = src, .len = len, .find_out = out_offset, .found_src = SIZE_MAX};
    sl_buf_init(&p.out, REWRITE_MAX);
    (void)ecma_to_pcre2(&p);
    sl_buf_free(&p.out);
    return p.found_src == SIZE_MAX ? len : p.found_src;
}

/* What a thread needs to match: a match block (one pair of offsets: nothing reads captures) and
 * a JIT stack. Kept per thread, not per pattern, because any number of threads may validate
 * against one schema at once; created on the thread's first match, freed when it exits. */
typedef struct {
    pcre2_match_data *match;
    pcre2_jit_stack *jit_stack;
} scratch_t;

static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static pthread_key_t scratch_key;
static bool scratch_key_ok;

static void scratch_free(void *arg)
{
    scratch_t *s = arg;
    pcre2_match_data_free(s->match);
    pcre2_jit_stack_free(s->jit_stack);
    free(s);
}

static void scratch_key_create(void)
{
    scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
}

/* This thread's scratch, or NULL when out of memory. */
static scratch_t *thread_scratch(void)
{
    pthread_once(&scratch_once, scratch_key_create);
    if (!scratch_key_ok)
        return NULL;
    scratch_t *s = pthread_getspecific(scratch_key);
    if (s)
        return s;
    s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->match = pcre2_match_data_create(1, NULL);
    s->jit_stack = pcre2_jit_stack_create(32 * 1024, JIT_STACK_MAX, NULL);
    if (!s->match || !s->jit_stack || pthread_setspecific(scratch_key, s) != 0) {
        scratch_free(s);
        return NULL;
    }
    return s;
}

/* PCRE2 asks for the JIT stack during a match, on the matching thread. */
static pcre2_jit_stack *thread_jit_stack(void *unused)
{
    (void)unused;
    const scratch_t *s = pthread_getspecific(scratch_key);
    return s ? s->jit_stack : NULL;
}

/* ---- the process-wide contexts ------------------------------------------------------------ */

/* PCRE2's compile options that are not flags, and the match limits; created once, read-only
 * afterwards and shared by every thread (they live as long as the process). */
static pcre2_compile_context *compile_ctx;
static pcre2_match_context *match_ctx;
static pthread_once_t contexts_once = PTHREAD_ONCE_INIT;

static void contexts_create(void)
{
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    if (!cc || !mc || pcre2_set_compile_extra_options(cc, PCRE2_EXTRA_ALT_BSUX) != 0) {
        pcre2_compile_context_free(cc);
        pcre2_match_context_free(mc);
        return;
    }
    /* The same bound as ecma_to_pcre2's, so PCRE2 never recurses deeper either. */
    pcre2_set_parens_nest_limit(cc, SL_ECMARE_MAX_NESTING);
    pcre2_set_match_limit(mc, MATCH_LIMIT);
    pcre2_set_heap_limit(mc, HEAP_LIMIT_KIB);
    pcre2_jit_stack_assign(mc, thread_jit_stack, NULL);
    compile_ctx = cc;
    match_ctx = mc;
}

/* ---- the interface ------------------------------------------------------------------------ */

struct sl_ecmare {
    pcre2_code *code; /* compiled, and JIT-compiled where the JIT is available */
};

sl_err_t sl_ecmare_compile(const char *src, size_t len, sl_ecmare_t **out, char *why,
                           size_t whylen)
{
    *out = NULL;
    if (whylen > 0)
        why[0] = '\0';
    if (len > SL_ECMARE_MAX_LEN) {
        snprintf(why, whylen, "pattern is longer than %d bytes", SL_ECMARE_MAX_LEN);
        return SL_ESCHEMA;
    }
    pthread_once(&contexts_once, contexts_create);
    if (!compile_ctx)
        return SL_ENOMEM;
    sl_err_t rc = SL_OK;
    sl_ecmare_t *re = NULL;
    pat_t pat = {.src = src, .len = len, .find_out = SIZE_MAX, .found_src = SIZE_MAX};
    sl_buf_init(&pat.out, REWRITE_MAX);
    if (!ecma_to_pcre2(&pat)) {
        rc = pat.reason ? SL_ESCHEMA : SL_ENOMEM;
        if (pat.reason)
            snprintf(why, whylen, "%s at offset %zu", pat.reason, pat.reason_at);
        goto out;
    }
    re = calloc(1, sizeof *re);
    if (!re) {
        rc = SL_ENOMEM;
        goto out;
    }
    int code;
    PCRE2_SIZE at;
    re->code = pcre2_compile((PCRE2_SPTR)pat.out.ptr, pat.out.len, PATTERN_OPTIONS, &code, &at,
                             compile_ctx);
    if (!re->code) {
        PCRE2_UCHAR text[128];
        pcre2_get_error_message(code, text, sizeof text);
        if (code == PCRE2_ERROR_HEAP_FAILED) {
            rc = SL_ENOMEM;
        } else {
            rc = SL_ESCHEMA;
            snprintf(why, whylen, "invalid pattern: %s at offset %zu", (char *)text,
                     source_offset(src, len, at));
        }
        goto out;
    }
    /* Without the JIT (not built for this CPU, or no executable memory) PCRE2 interprets the
     * pattern: slower, equally correct, and bounded by the heap limit instead. */
    (void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    *out = re;
    re = NULL;
out:
    sl_ecmare_free(re);
    sl_buf_free(&pat.out);
    return rc;
}

int sl_ecmare_match(const sl_ecmare_t *re, const char *s, size_t len, char *why, size_t whylen)
{
    const scratch_t *scratch = thread_scratch();
    int rc = scratch && match_ctx ? pcre2_match(re->code, (PCRE2_SPTR)s, len, 0, 0,
                                                scratch->match, match_ctx)
                                  : PCRE2_ERROR_NOMEMORY;
    /* 0 is a match too: the pattern has groups and the match block keeps only one pair. */
    if (rc >= 0)
        return 1;
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    PCRE2_UCHAR text[128];
    pcre2_get_error_message(rc, text, sizeof text);
    snprintf(why, whylen, "%s", (char *)text);
    return -1;
}

void sl_ecmare_free(sl_ecmare_t *re)
{
    if (re == NULL)
        return;
    pcre2_code_free(re->code);
    free(re);
}
