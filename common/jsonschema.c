/* jsonschema.c - compile a JSON Schema subset once, validate many times (see jsonschema.h).
 *
 * The one idea: every schema object becomes a node_t whose keywords are already parsed into
 * plain fields. $ref targets ("#" and the root's $defs members) are allocated as empty nodes
 * before anything is compiled, so a reference, even a recursive one, is just a pointer to a node.
 * Validation walks the nodes and the document together and stops at the first violation. The
 * JSON pointer of a violation lives in a chain of stack frames (path_t) and is only formatted
 * when a violation is reported, so a passing validation formats nothing and allocates nothing.
 */
#include "jsonschema.h"

#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* Schemas are trusted, but a runaway nesting should still be an error, not a stack overflow. */
#define MAX_SCHEMA_NESTING 128

enum {
    T_NULL = 1u << 0,
    T_BOOLEAN = 1u << 1,
    T_OBJECT = 1u << 2,
    T_ARRAY = 1u << 3,
    T_NUMBER = 1u << 4,
    T_STRING = 1u << 5,
    T_INTEGER = 1u << 6,
};

static const struct {
    const char *name;
    unsigned bit;
} type_names[] = {
    {"object", T_OBJECT}, {"array", T_ARRAY},     {"string", T_STRING}, {"integer", T_INTEGER},
    {"number", T_NUMBER}, {"boolean", T_BOOLEAN}, {"null", T_NULL},
};

enum {
    N_FALSE = 1u << 0, /* the boolean schema false: no value matches */
    N_MIN = 1u << 1,
    N_MAX = 1u << 2,
    N_XMIN = 1u << 3,
    N_XMAX = 1u << 4,
};

/* A JSON number kept exactly as written: integers stay integers so that bounds near 2^63 compare
 * exactly. */
typedef struct {
    bool is_int;
    json_int_t i;
    double d;
} num_t;

typedef struct node node_t;

typedef struct {
    char *name;
    size_t len;
    node_t *schema;
} prop_t;

typedef struct {
    char *name;
    size_t len;
} name_t;

struct node {
    node_t *next_alloc; /* every node of a schema, for sl_schema_free */
    unsigned flags;     /* N_* */
    unsigned types;     /* T_* bits; 0 = any type */
    prop_t *props;      /* sorted by name (memcmp order) for binary search */
    size_t nprops;
    name_t *required;
    size_t nrequired;
    node_t *additional; /* NULL = additional properties are allowed */
    node_t *items;
    json_t *enum_vals; /* owned deep copy (an array), or NULL */
    json_t *const_val; /* owned deep copy, or NULL */
    num_t min, max, xmin, xmax;
    size_t min_len, max_len; /* code points */
    size_t min_items, max_items, min_props, max_props;
    pcre2_code *re; /* the pattern, compiled (and JIT-compiled where the JIT is available) */
    char *pattern;  /* as written in the schema, for messages */
    node_t **all_of, **any_of, **one_of;
    size_t nall_of, nany_of, none_of;
    node_t *not_schema;
    node_t *ref;
    int mark; /* cycle check state while compiling */
};

struct sl_schema {
    node_t *root;
    node_t *nodes;             /* list through next_alloc */
    pcre2_match_context *mctx; /* the match limits; NULL when there are no patterns. Shared
                                * read-only by every thread that validates. */
};

/* One step of a JSON pointer, linked towards the root; up == NULL for the root's children. */
typedef struct path {
    const struct path *up;
    const char *key; /* NULL: an array index */
    size_t len;      /* key length, or the index */
} path_t;

/* ---- bounded message buffer ------------------------------------------------------------- */

typedef struct {
    char *buf; /* NULL: discard everything */
    size_t cap;
    size_t len;
} msg_t;

static void msg_init(msg_t *m, char *buf, size_t cap)
{
    m->buf = cap > 0 ? buf : NULL;
    m->cap = cap;
    m->len = 0;
    if (m->buf)
        m->buf[0] = '\0';
}

static void msg_putn(msg_t *m, const char *s, size_t n)
{
    if (!m->buf || m->len + 1 >= m->cap)
        return;
    size_t room = m->cap - 1 - m->len;
    if (n > room)
        n = room;
    memcpy(m->buf + m->len, s, n);
    m->len += n;
    m->buf[m->len] = '\0';
}

static void msg_puts(msg_t *m, const char *s)
{
    msg_putn(m, s, strlen(s));
}

static void msg_vprintf(msg_t *m, const char *fmt, va_list ap)
{
    if (!m->buf || m->len + 1 >= m->cap)
        return;
    int n = vsnprintf(m->buf + m->len, m->cap - m->len, fmt, ap);
    if (n < 0)
        return;
    m->len += (size_t)n;
    if (m->len >= m->cap)
        m->len = m->cap - 1;
}

static void msg_printf(msg_t *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void msg_printf(msg_t *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    msg_vprintf(m, fmt, ap);
    va_end(ap);
}

/* Writes s; in_pointer escapes "~" and "/" as RFC 6901 does, otherwise '"' and '\' are
 * backslash-escaped for a quoted name. Control bytes become \u00XX either way so a message stays
 * one line. */
static void msg_put_escaped(msg_t *m, const char *s, size_t n, bool in_pointer)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char hex[8];
        if (in_pointer && ch == '~')
            esc = "~0";
        else if (in_pointer && ch == '/')
            esc = "~1";
        else if (!in_pointer && ch == '"')
            esc = "\\\"";
        else if (!in_pointer && ch == '\\')
            esc = "\\\\";
        else if (ch < 0x20 || ch == 0x7f) {
            snprintf(hex, sizeof hex, "\\u%04x", ch);
            esc = hex;
        }
        if (!esc)
            continue;
        msg_putn(m, s + run, i - run);
        msg_puts(m, esc);
        run = i + 1;
    }
    msg_putn(m, s + run, n - run);
}

static void msg_put_segments(msg_t *m, const path_t *p)
{
    if (p->up)
        msg_put_segments(m, p->up);
    msg_putn(m, "/", 1);
    if (p->key)
        msg_put_escaped(m, p->key, p->len, true);
    else
        msg_printf(m, "%zu", p->len);
}

/* The root is written "/" (not RFC 6901's empty string) so a message never starts with ':'. */
static void msg_put_path(msg_t *m, const path_t *p)
{
    if (p)
        msg_put_segments(m, p);
    else
        msg_putn(m, "/", 1);
}

/* ---- numbers and equality --------------------------------------------------------------- */

static num_t num_of(const json_t *v)
{
    num_t num = {0};
    if (json_is_integer(v)) {
        num.is_int = true;
        num.i = json_integer_value(v);
        num.d = (double)num.i;
    } else {
        num.d = json_real_value(v);
    }
    return num;
}

/* Compares an integer with a double exactly (a plain cast would round above 2^53). */
static int cmp_int_real(json_int_t i, double d)
{
    if (d >= 9223372036854775808.0)
        return -1;
    if (d < -9223372036854775808.0)
        return 1;
    /* d is now within the range of json_int_t, so truncating it is exact. */
    json_int_t t = (json_int_t)d;
    if (i != t)
        return i < t ? -1 : 1;
    double frac = d - (double)t;
    if (frac > 0)
        return -1;
    if (frac < 0)
        return 1;
    return 0;
}

static int num_cmp(num_t a, num_t b)
{
    if (a.is_int && b.is_int)
        return (a.i > b.i) - (a.i < b.i);
    if (a.is_int)
        return cmp_int_real(a.i, b.d);
    if (b.is_int)
        return -cmp_int_real(b.i, a.d);
    return (a.d > b.d) - (a.d < b.d);
}

static bool real_is_integral(double d)
{
    /* Every double of magnitude 2^52 or more is an integer; below that a cast is exact. */
    if (d >= 4503599627370496.0 || d <= -4503599627370496.0)
        return true;
    return (double)(long long)d == d;
}

static void msg_put_num(msg_t *m, num_t num)
{
    if (num.is_int) {
        msg_printf(m, "%" JSON_INTEGER_FORMAT, num.i);
        return;
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%.15g", num.d);
    if (strtod(buf, NULL) != num.d)
        snprintf(buf, sizeof buf, "%.17g", num.d);
    msg_puts(m, buf);
}

/* JSON Schema equality: numbers by value (1 == 1.0), objects regardless of key order. */
static bool values_equal(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return num_cmp(num_of(a), num_of(b)) == 0;
    if (json_typeof(a) != json_typeof(b))
        return false;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++) {
            if (!values_equal(json_array_get(a, i), json_array_get(b, i)))
                return false;
        }
        return true;
    case JSON_OBJECT:
        if (json_object_size(a) != json_object_size(b))
            return false;
        /* Iteration does not modify the object; jansson just lacks a const iterator. */
        for (void *it = json_object_iter((json_t *)a); it;
             it = json_object_iter_next((json_t *)a, it)) {
            const json_t *bv =
                json_object_getn(b, json_object_iter_key(it), json_object_iter_key_len(it));
            if (!bv || !values_equal(json_object_iter_value(it), bv))
                return false;
        }
        return true;
    default:
        return true; /* true, false and null: equal types are equal values */
    }
}

/* ---- patterns: ECMA-262 on PCRE2 -------------------------------------------------------- */

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

typedef struct {
    char *buf;
    size_t len, cap;
} sbuf_t;

static bool sb_putn(sbuf_t *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->buf, cap);
        if (!p)
            return false;
        b->buf = p;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = '\0';
    return true;
}

/* The rewriting of one ECMA-262 pattern into PCRE2 syntax (see ecma_to_pcre2). */
typedef struct {
    const char *src;
    size_t len;
    size_t i; /* next byte of src */
    sbuf_t out;
    const char *reason; /* why the pattern is refused; NULL on failure: out of memory */
    size_t reason_at;   /* offset in src */
    size_t find_out;    /* an offset into out whose source offset is wanted, or SIZE_MAX */
    size_t found_src;   /* the offset in src of the token that wrote out[find_out] */
} pat_t;

enum { ATOM_CHAR, ATOM_SET }; /* one code point (a range may start or end with it), or more */

static bool pat_put(pat_t *p, const char *s, size_t n)
{
    if (sb_putn(&p->out, s, n))
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
    (void)ecma_to_pcre2(&p);
    free(p.out.buf);
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

/* ---- compilation ------------------------------------------------------------------------ */

typedef struct {
    const char *name; /* points into the schema JSON, valid while compiling */
    size_t len;
    node_t *node;
} def_t;

typedef struct {
    sl_schema_t *schema;
    def_t *defs; /* the root's $defs, allocated before compiling so $ref can point at them */
    size_t ndefs;
    pcre2_compile_context *pcre; /* created with the first pattern */
    msg_t err;
} cctx_t;

static sl_err_t cfail(cctx_t *c, const path_t *p, sl_err_t rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static sl_err_t cfail(cctx_t *c, const path_t *p, sl_err_t rc, const char *fmt, ...)
{
    va_list ap;
    if (rc == SL_ENOMEM) {
        msg_puts(&c->err, "out of memory");
        return rc;
    }
    msg_put_path(&c->err, p);
    msg_puts(&c->err, ": ");
    va_start(ap, fmt);
    msg_vprintf(&c->err, fmt, ap);
    va_end(ap);
    return rc;
}

static sl_err_t new_node(cctx_t *c, node_t **out)
{
    node_t *n = calloc(1, sizeof *n);
    if (!n)
        return cfail(c, NULL, SL_ENOMEM, "out of memory");
    n->max_len = SIZE_MAX;
    n->max_items = SIZE_MAX;
    n->max_props = SIZE_MAX;
    n->next_alloc = c->schema->nodes;
    c->schema->nodes = n;
    *out = n;
    return SL_OK;
}

static void free_node(node_t *n)
{
    for (size_t i = 0; i < n->nprops; i++)
        free(n->props[i].name);
    free(n->props);
    for (size_t i = 0; i < n->nrequired; i++)
        free(n->required[i].name);
    free(n->required);
    json_decref(n->enum_vals);
    json_decref(n->const_val);
    pcre2_code_free(n->re);
    free(n->pattern);
    free(n->all_of);
    free(n->any_of);
    free(n->one_of);
    free(n);
}

static char *dup_bytes(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static int name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int r = memcmp(a, b, alen < blen ? alen : blen);
    if (r != 0)
        return r;
    return (alen > blen) - (alen < blen);
}

static int prop_cmp(const void *a, const void *b)
{
    const prop_t *pa = a;
    const prop_t *pb = b;
    return name_cmp(pa->name, pa->len, pb->name, pb->len);
}

static sl_err_t compile_node(cctx_t *c, const json_t *js, const path_t *p, unsigned nesting,
                             node_t *n);

static sl_err_t compile_sub(cctx_t *c, const json_t *js, const path_t *p, unsigned nesting,
                            node_t **out)
{
    node_t *n = NULL;
    sl_err_t rc = new_node(c, &n);
    if (rc != SL_OK)
        return rc;
    *out = n;
    return compile_node(c, js, p, nesting, n);
}

typedef sl_err_t (*kw_fn)(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                          unsigned nesting);

static sl_err_t kw_type(cctx_t *c, node_t *n, const json_t *val, const path_t *kp, unsigned nesting)
{
    (void)nesting;
    size_t count = json_is_array(val) ? json_array_size(val) : 1;
    if (!json_is_string(val) && (!json_is_array(val) || count == 0))
        return cfail(c, kp, SL_ESCHEMA, "must be a type name or a non-empty array of type names");
    for (size_t i = 0; i < count; i++) {
        const json_t *name = json_is_array(val) ? json_array_get(val, i) : val;
        unsigned bit = 0;
        for (size_t t = 0; json_is_string(name) && t < sizeof type_names / sizeof *type_names;
             t++) {
            if (strcmp(json_string_value(name), type_names[t].name) == 0 &&
                json_string_length(name) == strlen(type_names[t].name))
                bit = type_names[t].bit;
        }
        if (bit == 0)
            return cfail(c, kp, SL_ESCHEMA,
                         "unknown type (expected object, array, string, integer, number, boolean "
                         "or null)");
        if (n->types & bit)
            return cfail(c, kp, SL_ESCHEMA, "type names must be unique");
        n->types |= bit;
    }
    return SL_OK;
}

static sl_err_t kw_properties(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                              unsigned nesting)
{
    if (!json_is_object(val))
        return cfail(c, kp, SL_ESCHEMA, "must be an object of schemas");
    n->props = calloc(json_object_size(val) + 1, sizeof *n->props);
    if (!n->props)
        return cfail(c, kp, SL_ENOMEM, "out of memory");
    for (void *it = json_object_iter((json_t *)val); it;
         it = json_object_iter_next((json_t *)val, it)) {
        const char *key = json_object_iter_key(it);
        size_t key_len = json_object_iter_key_len(it);
        path_t sub = {kp, key, key_len};
        prop_t *prop = &n->props[n->nprops];
        prop->name = dup_bytes(key, key_len);
        if (!prop->name)
            return cfail(c, kp, SL_ENOMEM, "out of memory");
        prop->len = key_len;
        n->nprops++;
        sl_err_t rc = compile_sub(c, json_object_iter_value(it), &sub, nesting + 1, &prop->schema);
        if (rc != SL_OK)
            return rc;
    }
    qsort(n->props, n->nprops, sizeof *n->props, prop_cmp);
    return SL_OK;
}

static sl_err_t kw_required(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                            unsigned nesting)
{
    (void)nesting;
    if (!json_is_array(val))
        return cfail(c, kp, SL_ESCHEMA, "must be an array of property names");
    n->required = calloc(json_array_size(val) + 1, sizeof *n->required);
    if (!n->required)
        return cfail(c, kp, SL_ENOMEM, "out of memory");
    for (size_t i = 0; i < json_array_size(val); i++) {
        const json_t *name = json_array_get(val, i);
        if (!json_is_string(name))
            return cfail(c, kp, SL_ESCHEMA, "must be an array of property names");
        const char *s = json_string_value(name);
        size_t len = json_string_length(name);
        for (size_t j = 0; j < n->nrequired; j++) {
            if (name_cmp(n->required[j].name, n->required[j].len, s, len) == 0)
                return cfail(c, kp, SL_ESCHEMA, "property names must be unique");
        }
        n->required[n->nrequired].name = dup_bytes(s, len);
        if (!n->required[n->nrequired].name)
            return cfail(c, kp, SL_ENOMEM, "out of memory");
        n->required[n->nrequired].len = len;
        n->nrequired++;
    }
    return SL_OK;
}

static sl_err_t kw_additional(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                              unsigned nesting)
{
    return compile_sub(c, val, kp, nesting + 1, &n->additional);
}

static sl_err_t kw_items(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                         unsigned nesting)
{
    if (json_is_array(val))
        return cfail(c, kp, SL_ESCHEMA,
                     "must be one schema (the array form of items is not supported)");
    return compile_sub(c, val, kp, nesting + 1, &n->items);
}

static sl_err_t kw_not(cctx_t *c, node_t *n, const json_t *val, const path_t *kp, unsigned nesting)
{
    return compile_sub(c, val, kp, nesting + 1, &n->not_schema);
}

static sl_err_t compile_list(cctx_t *c, const json_t *val, const path_t *kp, unsigned nesting,
                             node_t ***list, size_t *count)
{
    if (!json_is_array(val) || json_array_size(val) == 0)
        return cfail(c, kp, SL_ESCHEMA, "must be a non-empty array of schemas");
    *list = calloc(json_array_size(val), sizeof **list);
    if (!*list)
        return cfail(c, kp, SL_ENOMEM, "out of memory");
    for (size_t i = 0; i < json_array_size(val); i++) {
        path_t sub = {kp, NULL, i};
        sl_err_t rc = compile_sub(c, json_array_get(val, i), &sub, nesting + 1, &(*list)[i]);
        if (rc != SL_OK)
            return rc;
        (*count)++;
    }
    return SL_OK;
}

static sl_err_t kw_all_of(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                          unsigned nesting)
{
    return compile_list(c, val, kp, nesting, &n->all_of, &n->nall_of);
}

static sl_err_t kw_any_of(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                          unsigned nesting)
{
    return compile_list(c, val, kp, nesting, &n->any_of, &n->nany_of);
}

static sl_err_t kw_one_of(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                          unsigned nesting)
{
    return compile_list(c, val, kp, nesting, &n->one_of, &n->none_of);
}

static sl_err_t kw_enum(cctx_t *c, node_t *n, const json_t *val, const path_t *kp, unsigned nesting)
{
    (void)nesting;
    if (!json_is_array(val))
        return cfail(c, kp, SL_ESCHEMA, "must be an array");
    n->enum_vals = json_deep_copy(val);
    if (!n->enum_vals)
        return cfail(c, kp, SL_ENOMEM, "out of memory");
    return SL_OK;
}

static sl_err_t kw_const(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                         unsigned nesting)
{
    (void)nesting;
    n->const_val = json_deep_copy(val);
    if (!n->const_val)
        return cfail(c, kp, SL_ENOMEM, "out of memory");
    return SL_OK;
}

static sl_err_t bound(cctx_t *c, node_t *n, const json_t *val, const path_t *kp, unsigned flag,
                      num_t *dst)
{
    if (!json_is_number(val))
        return cfail(c, kp, SL_ESCHEMA, "must be a number");
    *dst = num_of(val);
    n->flags |= flag;
    return SL_OK;
}

static sl_err_t kw_minimum(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                           unsigned nesting)
{
    (void)nesting;
    return bound(c, n, val, kp, N_MIN, &n->min);
}

static sl_err_t kw_maximum(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                           unsigned nesting)
{
    (void)nesting;
    return bound(c, n, val, kp, N_MAX, &n->max);
}

static sl_err_t kw_xmin(cctx_t *c, node_t *n, const json_t *val, const path_t *kp, unsigned nesting)
{
    (void)nesting;
    if (json_is_boolean(val))
        return cfail(c, kp, SL_ESCHEMA,
                     "must be a number (the draft-04 boolean form is not supported)");
    return bound(c, n, val, kp, N_XMIN, &n->xmin);
}

static sl_err_t kw_xmax(cctx_t *c, node_t *n, const json_t *val, const path_t *kp, unsigned nesting)
{
    (void)nesting;
    if (json_is_boolean(val))
        return cfail(c, kp, SL_ESCHEMA,
                     "must be a number (the draft-04 boolean form is not supported)");
    return bound(c, n, val, kp, N_XMAX, &n->xmax);
}

/* Reads a non-negative integer; 2020-12 also allows an integral real such as 3.0. */
static sl_err_t parse_count(cctx_t *c, const json_t *val, const path_t *kp, size_t *dst)
{
    if (json_is_integer(val) && json_integer_value(val) >= 0) {
        *dst = (size_t)json_integer_value(val);
        return SL_OK;
    }
    if (json_is_real(val) && json_real_value(val) >= 0 && real_is_integral(json_real_value(val))) {
        double d = json_real_value(val);
        *dst = d >= (double)SIZE_MAX ? SIZE_MAX : (size_t)d;
        return SL_OK;
    }
    return cfail(c, kp, SL_ESCHEMA, "must be a non-negative integer");
}

#define COUNT_KEYWORD(fn, field)                                                                   \
    static sl_err_t fn(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,                  \
                       unsigned nesting)                                                           \
    {                                                                                              \
        (void)nesting;                                                                             \
        return parse_count(c, val, kp, &n->field);                                                 \
    }
COUNT_KEYWORD(kw_min_length, min_len)
COUNT_KEYWORD(kw_max_length, max_len)
COUNT_KEYWORD(kw_min_items, min_items)
COUNT_KEYWORD(kw_max_items, max_items)
COUNT_KEYWORD(kw_min_props, min_props)
COUNT_KEYWORD(kw_max_props, max_props)

/* The contexts every pattern of a compilation shares: PCRE2's compile options that are not
 * flags, and the schema's match limits. */
static sl_err_t pattern_contexts(cctx_t *c)
{
    if (!c->pcre) {
        c->pcre = pcre2_compile_context_create(NULL);
        if (!c->pcre || pcre2_set_compile_extra_options(c->pcre, PCRE2_EXTRA_ALT_BSUX) != 0)
            return SL_ENOMEM;
    }
    if (!c->schema->mctx) {
        pcre2_match_context *m = pcre2_match_context_create(NULL);
        if (!m)
            return SL_ENOMEM;
        pcre2_set_match_limit(m, MATCH_LIMIT);
        pcre2_set_heap_limit(m, HEAP_LIMIT_KIB);
        pcre2_jit_stack_assign(m, thread_jit_stack, NULL);
        c->schema->mctx = m;
    }
    return SL_OK;
}

static sl_err_t kw_pattern(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                           unsigned nesting)
{
    (void)nesting;
    if (!json_is_string(val))
        return cfail(c, kp, SL_ESCHEMA, "must be a string");
    const char *src = json_string_value(val);
    size_t len = json_string_length(val);
    if (len > SL_SCHEMA_MAX_PATTERN_LEN)
        return cfail(c, kp, SL_ESCHEMA, "pattern is longer than %d bytes",
                     SL_SCHEMA_MAX_PATTERN_LEN);
    if (pattern_contexts(c) != SL_OK)
        return cfail(c, kp, SL_ENOMEM, "out of memory");

    sl_err_t rc = SL_OK;
    pat_t pat = {.src = src, .len = len, .find_out = SIZE_MAX, .found_src = SIZE_MAX};
    if (!ecma_to_pcre2(&pat)) {
        if (!pat.reason)
            rc = cfail(c, kp, SL_ENOMEM, "out of memory");
        else
            rc = cfail(c, kp, SL_ESCHEMA, "%s at offset %zu", pat.reason, pat.reason_at);
        goto out;
    }
    int code;
    PCRE2_SIZE at;
    n->re =
        pcre2_compile((PCRE2_SPTR)pat.out.buf, pat.out.len, PATTERN_OPTIONS, &code, &at, c->pcre);
    if (!n->re) {
        PCRE2_UCHAR text[128];
        pcre2_get_error_message(code, text, sizeof text);
        if (code == PCRE2_ERROR_HEAP_FAILED)
            rc = cfail(c, kp, SL_ENOMEM, "out of memory");
        else
            rc = cfail(c, kp, SL_ESCHEMA, "invalid pattern: %s at offset %zu", (char *)text,
                       source_offset(src, len, at));
        goto out;
    }
    /* Without the JIT (not built for this CPU, or no executable memory) PCRE2 interprets the
     * pattern: slower, equally correct, and bounded by the heap limit instead. */
    (void)pcre2_jit_compile(n->re, PCRE2_JIT_COMPLETE);
    n->pattern = dup_bytes(src, len);
    if (!n->pattern)
        rc = cfail(c, kp, SL_ENOMEM, "out of memory");
out:
    free(pat.out.buf);
    return rc;
}

/* Resolves "#" or "#/$defs/<name>" (name JSON-pointer-escaped) against the root. */
static sl_err_t kw_ref(cctx_t *c, node_t *n, const json_t *val, const path_t *kp, unsigned nesting)
{
    (void)nesting;
    static const char prefix[] = "#/$defs/";
    sl_err_t rc = SL_OK;
    char *name = NULL;
    size_t len = 0;

    if (!json_is_string(val))
        return cfail(c, kp, SL_ESCHEMA, "must be a string");
    const char *ref = json_string_value(val);
    size_t ref_len = json_string_length(val);
    if (ref_len == 1 && ref[0] == '#') {
        n->ref = c->schema->root;
        return SL_OK;
    }
    if (ref_len <= sizeof prefix - 1 || memcmp(ref, prefix, sizeof prefix - 1) != 0)
        return cfail(c, kp, SL_ESCHEMA,
                     "unsupported $ref (only \"#\" and \"#/$defs/<name>\" are supported)");
    name = malloc(ref_len);
    if (!name)
        return cfail(c, kp, SL_ENOMEM, "out of memory");
    for (size_t i = sizeof prefix - 1; i < ref_len; i++) {
        char ch = ref[i];
        if (ch == '~' && i + 1 < ref_len && (ref[i + 1] == '0' || ref[i + 1] == '1')) {
            ch = ref[i + 1] == '0' ? '~' : '/';
            i++;
        } else if (ch == '~' || ch == '/' || ch == '%') {
            rc = cfail(c, kp, SL_ESCHEMA,
                       "unsupported $ref (only \"#\" and \"#/$defs/<name>\" are supported)");
            goto out;
        }
        name[len++] = ch;
    }
    for (size_t i = 0; i < c->ndefs; i++) {
        if (name_cmp(c->defs[i].name, c->defs[i].len, name, len) == 0)
            n->ref = c->defs[i].node;
    }
    if (!n->ref)
        rc = cfail(c, kp, SL_ESCHEMA, "unresolvable $ref (no such member of the root's $defs)");
out:
    free(name);
    return rc;
}

static sl_err_t kw_defs(cctx_t *c, node_t *n, const json_t *val, const path_t *kp, unsigned nesting)
{
    if (!json_is_object(val))
        return cfail(c, kp, SL_ESCHEMA, "must be an object of schemas");
    for (void *it = json_object_iter((json_t *)val); it;
         it = json_object_iter_next((json_t *)val, it)) {
        const char *key = json_object_iter_key(it);
        size_t key_len = json_object_iter_key_len(it);
        path_t sub = {kp, key, key_len};
        node_t *target = NULL;
        sl_err_t rc;
        /* The root's members were allocated up front so $ref could point at them; nested
         * $defs cannot be referenced but are still compiled, so they are still checked. */
        for (size_t i = 0; n == c->schema->root && i < c->ndefs; i++) {
            if (name_cmp(c->defs[i].name, c->defs[i].len, key, key_len) == 0)
                target = c->defs[i].node;
        }
        if (target)
            rc = compile_node(c, json_object_iter_value(it), &sub, nesting + 1, target);
        else
            rc = compile_sub(c, json_object_iter_value(it), &sub, nesting + 1, &target);
        if (rc != SL_OK)
            return rc;
    }
    return SL_OK;
}

static sl_err_t kw_id(cctx_t *c, node_t *n, const json_t *val, const path_t *kp, unsigned nesting)
{
    (void)nesting;
    if (!json_is_string(val))
        return cfail(c, kp, SL_ESCHEMA, "must be a string");
    if (n != c->schema->root)
        return cfail(c, kp, SL_ESCHEMA,
                     "$id is only supported at the root (an embedded resource would change what "
                     "$ref means)");
    return SL_OK;
}

static sl_err_t kw_string_annotation(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                                     unsigned nesting)
{
    (void)n;
    (void)nesting;
    if (!json_is_string(val))
        return cfail(c, kp, SL_ESCHEMA, "must be a string");
    return SL_OK;
}

static sl_err_t kw_bool_annotation(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                                   unsigned nesting)
{
    (void)n;
    (void)nesting;
    if (!json_is_boolean(val))
        return cfail(c, kp, SL_ESCHEMA, "must be a boolean");
    return SL_OK;
}

static sl_err_t kw_examples(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                            unsigned nesting)
{
    (void)n;
    (void)nesting;
    if (!json_is_array(val))
        return cfail(c, kp, SL_ESCHEMA, "must be an array");
    return SL_OK;
}

static sl_err_t kw_default(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                           unsigned nesting)
{
    (void)c;
    (void)n;
    (void)val;
    (void)kp;
    (void)nesting;
    return SL_OK;
}

static const struct {
    const char *name;
    kw_fn fn;
} keywords[] = {
    {"type", kw_type},
    {"properties", kw_properties},
    {"required", kw_required},
    {"additionalProperties", kw_additional},
    {"items", kw_items},
    {"enum", kw_enum},
    {"const", kw_const},
    {"minimum", kw_minimum},
    {"maximum", kw_maximum},
    {"exclusiveMinimum", kw_xmin},
    {"exclusiveMaximum", kw_xmax},
    {"minLength", kw_min_length},
    {"maxLength", kw_max_length},
    {"minItems", kw_min_items},
    {"maxItems", kw_max_items},
    {"minProperties", kw_min_props},
    {"maxProperties", kw_max_props},
    {"pattern", kw_pattern},
    {"anyOf", kw_any_of},
    {"oneOf", kw_one_of},
    {"allOf", kw_all_of},
    {"not", kw_not},
    {"$ref", kw_ref},
    {"$defs", kw_defs},
    {"$id", kw_id},
    {"$schema", kw_string_annotation},
    {"$comment", kw_string_annotation},
    {"title", kw_string_annotation},
    {"description", kw_string_annotation},
    {"format", kw_string_annotation},
    {"examples", kw_examples},
    {"default", kw_default},
    {"readOnly", kw_bool_annotation},
    {"writeOnly", kw_bool_annotation},
    {"deprecated", kw_bool_annotation},
};

/* Compiles js into the already allocated node n; p is n's place in the schema, for messages. */
static sl_err_t compile_node(cctx_t *c, const json_t *js, const path_t *p, unsigned nesting,
                             node_t *n)
{
    if (json_is_true(js))
        return SL_OK;
    if (json_is_false(js)) {
        n->flags |= N_FALSE;
        return SL_OK;
    }
    if (!json_is_object(js))
        return cfail(c, p, SL_ESCHEMA, "a schema must be an object or a boolean");
    if (nesting > MAX_SCHEMA_NESTING)
        return cfail(c, p, SL_ESCHEMA, "schema nested more than %d levels deep",
                     MAX_SCHEMA_NESTING);
    for (void *it = json_object_iter((json_t *)js); it;
         it = json_object_iter_next((json_t *)js, it)) {
        const char *key = json_object_iter_key(it);
        size_t key_len = json_object_iter_key_len(it);
        kw_fn fn = NULL;
        for (size_t i = 0; i < sizeof keywords / sizeof *keywords; i++) {
            if (strlen(keywords[i].name) == key_len && memcmp(keywords[i].name, key, key_len) == 0)
                fn = keywords[i].fn;
        }
        if (!fn) {
            cfail(c, p, SL_ESCHEMA, "unsupported keyword \"");
            msg_put_escaped(&c->err, key, key_len, false);
            msg_puts(&c->err, "\"");
            return SL_ESCHEMA;
        }
        path_t kp = {p, key, key_len};
        sl_err_t rc = fn(c, n, json_object_iter_value(it), &kp, nesting);
        if (rc != SL_OK)
            return rc;
    }
    return SL_OK;
}

/* A chain of frames on the C stack, to walk back along the current DFS path. */
typedef struct dfs_frame {
    const struct dfs_frame *up;
    const node_t *node;
} dfs_frame_t;

static const def_t *def_of(const cctx_t *c, const node_t *n)
{
    for (size_t i = 0; i < c->ndefs; i++) {
        if (c->defs[i].node == n)
            return &c->defs[i];
    }
    return NULL;
}

/* Finds a cycle of in-place applicators ($ref, allOf, anyOf, oneOf, not): following one never
 * moves into the document, so validation would loop forever. Every such cycle passes through a
 * $ref target (the root or a $defs member), which names it in the message. */
static sl_err_t find_cycle(cctx_t *c, node_t *n, const dfs_frame_t *up)
{
    enum { UNSEEN = 0, ON_PATH = 1, DONE = 2 };
    if (n->mark == DONE)
        return SL_OK;
    if (n->mark == ON_PATH) {
        const def_t *def = NULL;
        for (const dfs_frame_t *f = up; f && !def && f->node != n; f = f->up)
            def = def_of(c, f->node);
        if (!def)
            def = def_of(c, n);
        path_t defs_path = {NULL, "$defs", 5};
        path_t def_path = {&defs_path, def ? def->name : NULL, def ? def->len : 0};
        return cfail(c, def ? &def_path : NULL, SL_ESCHEMA,
                     "$ref cycle that never descends into the document");
    }
    n->mark = ON_PATH;
    dfs_frame_t here = {up, n};
    sl_err_t rc = SL_OK;
    if (n->ref)
        rc = find_cycle(c, n->ref, &here);
    for (size_t i = 0; rc == SL_OK && i < n->nall_of; i++)
        rc = find_cycle(c, n->all_of[i], &here);
    for (size_t i = 0; rc == SL_OK && i < n->nany_of; i++)
        rc = find_cycle(c, n->any_of[i], &here);
    for (size_t i = 0; rc == SL_OK && i < n->none_of; i++)
        rc = find_cycle(c, n->one_of[i], &here);
    if (rc == SL_OK && n->not_schema)
        rc = find_cycle(c, n->not_schema, &here);
    n->mark = DONE;
    return rc;
}

sl_err_t sl_schema_compile(const json_t *schema, sl_schema_t **out, char *err, size_t errlen)
{
    sl_err_t rc = SL_OK;
    cctx_t c = {0};
    const json_t *defs = NULL;

    msg_init(&c.err, err, errlen);
    if (!out || !schema) {
        msg_puts(&c.err, "schema and out are required");
        return SL_EINVAL;
    }
    *out = NULL;
    c.schema = calloc(1, sizeof *c.schema);
    if (!c.schema) {
        rc = cfail(&c, NULL, SL_ENOMEM, "out of memory");
        goto out;
    }
    rc = new_node(&c, &c.schema->root);
    if (rc != SL_OK)
        goto out;

    defs = json_is_object(schema) ? json_object_get(schema, "$defs") : NULL;
    if (defs && json_is_object(defs)) {
        c.defs = calloc(json_object_size(defs) + 1, sizeof *c.defs);
        if (!c.defs) {
            rc = cfail(&c, NULL, SL_ENOMEM, "out of memory");
            goto out;
        }
        for (void *it = json_object_iter((json_t *)defs); it;
             it = json_object_iter_next((json_t *)defs, it)) {
            def_t *def = &c.defs[c.ndefs];
            def->name = json_object_iter_key(it);
            def->len = json_object_iter_key_len(it);
            rc = new_node(&c, &def->node);
            if (rc != SL_OK)
                goto out;
            c.ndefs++;
        }
    }
    rc = compile_node(&c, schema, NULL, 0, c.schema->root);
    if (rc != SL_OK)
        goto out;
    for (node_t *n = c.schema->nodes; n && rc == SL_OK; n = n->next_alloc)
        rc = find_cycle(&c, n, NULL);
    if (rc != SL_OK)
        goto out;
    *out = c.schema;
    c.schema = NULL;
out:
    free(c.defs);
    pcre2_compile_context_free(c.pcre);
    sl_schema_free(c.schema);
    return rc;
}

sl_err_t sl_schema_load_file(const char *path, sl_schema_t **out, char *err, size_t errlen)
{
    json_error_t jerr;
    msg_t msg;
    json_t *js = NULL;
    sl_err_t rc = SL_OK;

    msg_init(&msg, err, errlen);
    if (!path || !out) {
        msg_puts(&msg, "path and out are required");
        return SL_EINVAL;
    }
    *out = NULL;
    /* A duplicate key would make the schema mean whichever copy jansson kept. */
    js = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!js) {
        enum json_error_code code = json_error_code(&jerr);
        if (code == json_error_cannot_open_file) {
            msg_printf(&msg, "%s: %s", path, jerr.text);
            return SL_EIO;
        }
        if (code == json_error_out_of_memory) {
            msg_printf(&msg, "%s: out of memory", path);
            return SL_ENOMEM;
        }
        msg_printf(&msg, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
        return SL_EPARSE;
    }
    msg_printf(&msg, "%s: ", path);
    if (msg.buf)
        rc = sl_schema_compile(js, out, msg.buf + msg.len, msg.cap - msg.len);
    else
        rc = sl_schema_compile(js, out, NULL, 0);
    if (rc == SL_OK && msg.buf)
        msg.buf[0] = '\0';
    json_decref(js);
    return rc;
}

void sl_schema_free(sl_schema_t *schema)
{
    if (!schema)
        return;
    node_t *n = schema->nodes;
    while (n) {
        node_t *next = n->next_alloc;
        free_node(n);
        n = next;
    }
    pcre2_match_context_free(schema->mctx);
    free(schema);
}

/* ---- validation ------------------------------------------------------------------------- */

typedef struct {
    const sl_schema_t *schema;
    msg_t why;
    unsigned quiet; /* > 0 inside anyOf/oneOf/not, whose branches may fail without a message */
    bool fatal;     /* too deep: stop everything, even a "not" must not turn this into a pass */
} vctx_t;

static bool vfail(vctx_t *v, const path_t *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool vfail(vctx_t *v, const path_t *p, const char *fmt, ...)
{
    va_list ap;
    if (v->quiet > 0 || v->fatal)
        return false;
    msg_put_path(&v->why, p);
    msg_puts(&v->why, ": ");
    va_start(ap, fmt);
    msg_vprintf(&v->why, fmt, ap);
    va_end(ap);
    return false;
}

static bool check(vctx_t *v, const node_t *n, const json_t *doc, const path_t *p, unsigned depth);

static const char *doc_type_name(const json_t *doc)
{
    switch (json_typeof(doc)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    default:
        return "null";
    }
}

static unsigned doc_types(const json_t *doc)
{
    switch (json_typeof(doc)) {
    case JSON_OBJECT:
        return T_OBJECT;
    case JSON_ARRAY:
        return T_ARRAY;
    case JSON_STRING:
        return T_STRING;
    case JSON_INTEGER:
        return T_INTEGER | T_NUMBER;
    case JSON_REAL:
        return real_is_integral(json_real_value(doc)) ? T_INTEGER | T_NUMBER : T_NUMBER;
    case JSON_TRUE:
    case JSON_FALSE:
        return T_BOOLEAN;
    default:
        return T_NULL;
    }
}

static bool type_fail(vctx_t *v, const node_t *n, const json_t *doc, const path_t *p)
{
    if (v->quiet > 0 || v->fatal)
        return false;
    msg_put_path(&v->why, p);
    msg_puts(&v->why, ": expected ");
    size_t total = 0, done = 0;
    for (size_t t = 0; t < sizeof type_names / sizeof *type_names; t++)
        total += (n->types & type_names[t].bit) != 0;
    for (size_t t = 0; t < sizeof type_names / sizeof *type_names; t++) {
        if (!(n->types & type_names[t].bit))
            continue;
        if (done > 0)
            msg_puts(&v->why, done + 1 == total ? " or " : ", ");
        msg_puts(&v->why, type_names[t].name);
        done++;
    }
    msg_printf(&v->why, ", got %s", doc_type_name(doc));
    return false;
}

static bool check_number(vctx_t *v, const node_t *n, const json_t *doc, const path_t *p)
{
    num_t num = num_of(doc);
    const char *what = NULL;
    num_t limit;
    if ((n->flags & N_MIN) && num_cmp(num, n->min) < 0) {
        what = "less than the minimum";
        limit = n->min;
    } else if ((n->flags & N_MAX) && num_cmp(num, n->max) > 0) {
        what = "greater than the maximum";
        limit = n->max;
    } else if ((n->flags & N_XMIN) && num_cmp(num, n->xmin) <= 0) {
        what = "not greater than the exclusive minimum";
        limit = n->xmin;
    } else if ((n->flags & N_XMAX) && num_cmp(num, n->xmax) >= 0) {
        what = "not less than the exclusive maximum";
        limit = n->xmax;
    }
    if (!what)
        return true;
    if (v->quiet > 0 || v->fatal)
        return false;
    vfail(v, p, "value is %s ", what);
    msg_put_num(&v->why, limit);
    return false;
}

static size_t utf8_code_points(const char *s, size_t len)
{
    size_t count = 0;
    for (size_t i = 0; i < len; i++)
        count += ((unsigned char)s[i] & 0xc0) != 0x80;
    return count;
}

/* A match that stopped at a limit (or could not start) is neither a match nor a mismatch: the
 * document is refused, and not even a "not" may turn that into a pass. */
static bool match_gave_up(vctx_t *v, const node_t *n, const path_t *p, int code)
{
    if (!v->fatal) {
        PCRE2_UCHAR text[128];
        pcre2_get_error_message(code, text, sizeof text);
        v->fatal = true;
        msg_put_path(&v->why, p);
        msg_puts(&v->why, ": could not match the pattern \"");
        msg_put_escaped(&v->why, n->pattern, strlen(n->pattern), false);
        msg_printf(&v->why, "\" within its limits: %s", (char *)text);
    }
    return false;
}

static bool check_string(vctx_t *v, const node_t *n, const json_t *doc, const path_t *p)
{
    const char *s = json_string_value(doc);
    size_t len = json_string_length(doc);
    /* Bytes bound code points from above, so counting is needed only near a limit. */
    if ((n->min_len > 0 && len >= n->min_len) || (n->max_len < len)) {
        size_t points = utf8_code_points(s, len);
        if (points < n->min_len)
            return vfail(v, p, "string is shorter than %zu characters", n->min_len);
        if (points > n->max_len)
            return vfail(v, p, "string is longer than %zu characters", n->max_len);
    } else if (len < n->min_len) {
        return vfail(v, p, "string is shorter than %zu characters", n->min_len);
    }
    if (n->re) {
        const scratch_t *scratch = thread_scratch();
        if (!scratch)
            return match_gave_up(v, n, p, PCRE2_ERROR_NOMEMORY);
        int rc = pcre2_match(n->re, (PCRE2_SPTR)s, len, 0, 0, scratch->match, v->schema->mctx);
        /* 0 is a match too: the pattern has groups and the match block keeps only one pair. */
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (v->quiet > 0 || v->fatal)
                return false;
            vfail(v, p, "string does not match the pattern \"");
            msg_put_escaped(&v->why, n->pattern, strlen(n->pattern), false);
            msg_puts(&v->why, "\"");
            return false;
        }
        if (rc < 0)
            return match_gave_up(v, n, p, rc);
    }
    return true;
}

static const prop_t *find_prop(const node_t *n, const char *key, size_t len)
{
    size_t lo = 0, hi = n->nprops;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = name_cmp(n->props[mid].name, n->props[mid].len, key, len);
        if (r == 0)
            return &n->props[mid];
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static bool check_object(vctx_t *v, const node_t *n, const json_t *doc, const path_t *p,
                         unsigned depth)
{
    for (size_t i = 0; i < n->nrequired; i++) {
        if (!json_object_getn(doc, n->required[i].name, n->required[i].len)) {
            if (v->quiet > 0 || v->fatal)
                return false;
            vfail(v, p, "missing required property \"");
            msg_put_escaped(&v->why, n->required[i].name, n->required[i].len, false);
            msg_puts(&v->why, "\"");
            return false;
        }
    }
    size_t size = json_object_size(doc);
    if (size < n->min_props)
        return vfail(v, p, "object has fewer than %zu properties", n->min_props);
    if (size > n->max_props)
        return vfail(v, p, "object has more than %zu properties", n->max_props);
    if (n->nprops == 0 && !n->additional)
        return true;
    /* Iteration does not modify the object; jansson just lacks a const iterator. */
    for (void *it = json_object_iter((json_t *)doc); it;
         it = json_object_iter_next((json_t *)doc, it)) {
        const char *key = json_object_iter_key(it);
        size_t key_len = json_object_iter_key_len(it);
        path_t sub = {p, key, key_len};
        const prop_t *prop = find_prop(n, key, key_len);
        const node_t *child = prop ? prop->schema : n->additional;
        if (!child)
            continue;
        if (!prop && (child->flags & N_FALSE))
            return vfail(v, &sub, "property is not allowed");
        if (!check(v, child, json_object_iter_value(it), &sub, depth + 1))
            return false;
    }
    return true;
}

static bool check_array(vctx_t *v, const node_t *n, const json_t *doc, const path_t *p,
                        unsigned depth)
{
    size_t size = json_array_size(doc);
    if (size < n->min_items)
        return vfail(v, p, "array has fewer than %zu items", n->min_items);
    if (size > n->max_items)
        return vfail(v, p, "array has more than %zu items", n->max_items);
    if (!n->items)
        return true;
    for (size_t i = 0; i < size; i++) {
        path_t sub = {p, NULL, i};
        if (!check(v, n->items, json_array_get(doc, i), &sub, depth + 1))
            return false;
    }
    return true;
}

/* Runs a branch whose failure is not itself a violation (anyOf, oneOf, not). */
static bool try_branch(vctx_t *v, const node_t *n, const json_t *doc, const path_t *p,
                       unsigned depth)
{
    v->quiet++;
    bool ok = check(v, n, doc, p, depth);
    v->quiet--;
    return ok;
}

static bool check_applicators(vctx_t *v, const node_t *n, const json_t *doc, const path_t *p,
                              unsigned depth)
{
    if (n->ref && !check(v, n->ref, doc, p, depth))
        return false;
    for (size_t i = 0; i < n->nall_of; i++) {
        if (!check(v, n->all_of[i], doc, p, depth))
            return false;
    }
    if (n->nany_of > 0) {
        bool any = false;
        for (size_t i = 0; i < n->nany_of && !any; i++) {
            any = try_branch(v, n->any_of[i], doc, p, depth);
            if (v->fatal)
                return false;
        }
        if (!any)
            return vfail(v, p, "value does not match any of the anyOf schemas");
    }
    if (n->none_of > 0) {
        size_t matches = 0;
        for (size_t i = 0; i < n->none_of && matches < 2; i++) {
            matches += try_branch(v, n->one_of[i], doc, p, depth);
            if (v->fatal)
                return false;
        }
        if (matches == 0)
            return vfail(v, p, "value does not match any of the oneOf schemas");
        if (matches > 1)
            return vfail(v, p, "value matches more than one of the oneOf schemas");
    }
    if (n->not_schema) {
        bool matched = try_branch(v, n->not_schema, doc, p, depth);
        if (v->fatal)
            return false;
        if (matched)
            return vfail(v, p, "value matches the schema in \"not\"");
    }
    return true;
}

static bool check(vctx_t *v, const node_t *n, const json_t *doc, const path_t *p, unsigned depth)
{
    if (depth > SL_SCHEMA_MAX_DEPTH) {
        if (!v->fatal) {
            v->fatal = true;
            msg_put_path(&v->why, p);
            msg_puts(&v->why, ": document nested too deeply");
        }
        return false;
    }
    if (n->flags & N_FALSE)
        return vfail(v, p, "no value is allowed here (the schema is false)");
    if (n->types && !(n->types & doc_types(doc)))
        return type_fail(v, n, doc, p);
    if (n->enum_vals) {
        bool found = false;
        for (size_t i = 0; i < json_array_size(n->enum_vals) && !found; i++)
            found = values_equal(doc, json_array_get(n->enum_vals, i));
        if (!found)
            return vfail(v, p, "value is not one of the allowed values");
    }
    if (n->const_val && !values_equal(doc, n->const_val))
        return vfail(v, p, "value is not the required constant");
    switch (json_typeof(doc)) {
    case JSON_OBJECT:
        if (!check_object(v, n, doc, p, depth))
            return false;
        break;
    case JSON_ARRAY:
        if (!check_array(v, n, doc, p, depth))
            return false;
        break;
    case JSON_STRING:
        if (!check_string(v, n, doc, p))
            return false;
        break;
    case JSON_INTEGER:
    case JSON_REAL:
        if (!check_number(v, n, doc, p))
            return false;
        break;
    default:
        break;
    }
    return check_applicators(v, n, doc, p, depth);
}

sl_err_t sl_schema_validate(const sl_schema_t *schema, const json_t *doc, char *why, size_t whylen)
{
    vctx_t v = {0};
    msg_init(&v.why, why, whylen);
    if (!schema || !doc) {
        msg_puts(&v.why, "/: schema and document are required");
        return SL_EINVAL;
    }
    v.schema = schema;
    return check(&v, schema->root, doc, NULL, 0) ? SL_OK : SL_ESCHEMA;
}
