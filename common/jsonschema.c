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

#include <limits.h>
#include <locale.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    regex_t *re_ascii; /* compiled in the C locale: exact, and fast, for all-ASCII strings */
    regex_t *re_utf8;  /* compiled in C.UTF-8: "." and [...] match whole code points */
    char *pattern;     /* as written in the schema, for messages */
    node_t **all_of, **any_of, **one_of;
    size_t nall_of, nany_of, none_of;
    node_t *not_schema;
    node_t *ref;
    int mark; /* cycle check state while compiling */
};

struct sl_schema {
    node_t *root;
    node_t *nodes;  /* list through next_alloc */
    locale_t c_loc; /* "C" and "C.UTF-8" for patterns; (locale_t)0 when there are none */
    locale_t utf8;
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

/* ---- pattern translation (ECMA-262 subset -> POSIX ERE) --------------------------------- */

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

static bool sb_puts(sbuf_t *b, const char *s)
{
    return sb_putn(b, s, strlen(s));
}

/* ECMA-262 WhiteSpace and LineTerminator, spelled out in UTF-8 because [:space:] differs. */
#define ECMA_SPACES                                                                                \
    "\t\n\v\f\r \xc2\xa0\xe1\x9a\x80\xe2\x80\x80\xe2\x80\x81\xe2\x80\x82\xe2\x80\x83"              \
    "\xe2\x80\x84\xe2\x80\x85\xe2\x80\x86\xe2\x80\x87\xe2\x80\x88\xe2\x80\x89\xe2\x80\x8a"         \
    "\xe2\x80\xa8\xe2\x80\xa9\xe2\x80\xaf\xe2\x81\x9f\xe3\x80\x80\xef\xbb\xbf"
/* ECMA "." matches anything but a line terminator; POSIX "." (without REG_NEWLINE) also
 * matches "\n", and REG_NEWLINE would change what ^ and $ mean. */
#define ECMA_DOT "[^\n\r\xe2\x80\xa8\xe2\x80\xa9]"

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

static const char *control_escape(char e)
{
    switch (e) {
    case 't':
        return "\t";
    case 'n':
        return "\n";
    case 'r':
        return "\r";
    case 'f':
        return "\f";
    case 'v':
        return "\v";
    default:
        return NULL;
    }
}

static bool is_syntax_char(char e)
{
    return e != '\0' && strchr("^$\\.*+?()[]{}|/-", e) != NULL;
}

typedef struct {
    char bytes[5];
    size_t n;          /* 0 when this atom is a class escape */
    const char *klass; /* bracket-expression body of \d \w \s */
} class_atom_t;

/* Reads one atom of a [...] class at src[*i]. */
static bool class_atom(const char *src, size_t len, size_t *i, class_atom_t *atom,
                       const char **reason)
{
    memset(atom, 0, sizeof *atom);
    if (src[*i] != '\\') {
        size_t n = utf8_seq_len((unsigned char)src[*i]);
        if (*i + n > len)
            n = len - *i;
        memcpy(atom->bytes, src + *i, n);
        atom->n = n;
        *i += n;
        return true;
    }
    if (*i + 1 >= len) {
        *reason = "pattern ends with a backslash";
        return false;
    }
    char e = src[*i + 1];
    *i += 2;
    const char *ctl = control_escape(e);
    if (e == 'd') {
        atom->klass = "0-9";
    } else if (e == 'w') {
        atom->klass = "A-Za-z0-9_";
    } else if (e == 's') {
        atom->klass = ECMA_SPACES;
    } else if (e == 'b') {
        atom->bytes[0] = '\b'; /* inside a class, \b is a backspace */
        atom->n = 1;
    } else if (ctl) {
        atom->bytes[0] = ctl[0];
        atom->n = 1;
    } else if (is_syntax_char(e)) {
        atom->bytes[0] = e;
        atom->n = 1;
    } else if (e == 'D' || e == 'W' || e == 'S') {
        *reason = "negated class escapes (\\D \\W \\S) inside [...] are not supported";
        return false;
    } else {
        *reason = "unsupported escape inside [...] (only \\d \\w \\s \\t \\n \\r \\f \\v \\b and "
                  "escaped syntax characters)";
        return false;
    }
    return true;
}

static bool atom_is(const class_atom_t *atom, char ch)
{
    return atom->n == 1 && atom->bytes[0] == ch;
}

/* Translates the class starting at src[*i] == '['. POSIX brackets have no escapes, so special
 * members are placed where POSIX reads them literally: ']' first, '-' last, '^' not first. */
static bool translate_class(const char *src, size_t len, size_t *i, sbuf_t *out,
                            const char **reason)
{
    sbuf_t body = {0};
    bool neg = false, rbracket = false, dash = false, caret = false, lbracket = false;
    bool ok = false;

    (*i)++;
    if (*i < len && src[*i] == '^') {
        neg = true;
        (*i)++;
    }
    if (*i < len && src[*i] == ']') {
        *reason = "empty classes [] and [^] are not supported";
        goto out;
    }
    for (;;) {
        class_atom_t a, b;
        if (*i >= len) {
            *reason = "unterminated [...] in pattern";
            goto out;
        }
        if (src[*i] == ']') {
            (*i)++;
            break;
        }
        if (!class_atom(src, len, i, &a, reason))
            goto out;
        bool range = *i + 1 < len && src[*i] == '-' && src[*i + 1] != ']';
        if (a.klass) {
            if (range) {
                *reason = "a class escape cannot start a range";
                goto out;
            }
            if (!sb_puts(&body, a.klass))
                goto nomem;
            continue;
        }
        if (range) {
            (*i)++;
            if (!class_atom(src, len, i, &b, reason))
                goto out;
            if (b.klass) {
                *reason = "a class escape cannot end a range";
                goto out;
            }
            if (a.n != 1 || b.n != 1 || (unsigned char)a.bytes[0] >= 0x80 ||
                (unsigned char)b.bytes[0] >= 0x80) {
                *reason = "ranges of non-ASCII characters are not supported";
                goto out;
            }
            if (strchr("]-^[", a.bytes[0]) || strchr("]-^[", b.bytes[0])) {
                *reason = "ranges starting or ending with ] - ^ [ are not supported";
                goto out;
            }
            if ((unsigned char)a.bytes[0] > (unsigned char)b.bytes[0]) {
                *reason = "range out of order in [...]";
                goto out;
            }
            if (!sb_putn(&body, a.bytes, 1) || !sb_putn(&body, "-", 1) ||
                !sb_putn(&body, b.bytes, 1))
                goto nomem;
            continue;
        }
        if (atom_is(&a, ']'))
            rbracket = true;
        else if (atom_is(&a, '-'))
            dash = true;
        else if (atom_is(&a, '^'))
            caret = true;
        else if (atom_is(&a, '['))
            lbracket = true; /* placed late so it can never form "[:" "[." "[=" */
        else if (!sb_putn(&body, a.bytes, a.n))
            goto nomem;
    }

    if (!neg && !rbracket && body.len == 0 && !lbracket && caret) {
        /* A leading '^' would negate; "[-^]" or a plain escaped caret says the same thing. */
        ok = sb_puts(out, dash ? "[-^]" : "\\^");
        if (!ok)
            goto nomem;
        goto out;
    }
    ok = sb_puts(out, neg ? "[^" : "[") && (!rbracket || sb_puts(out, "]")) &&
         (body.len == 0 || sb_putn(out, body.buf, body.len)) && (!lbracket || sb_puts(out, "[")) &&
         (!caret || sb_puts(out, "^")) && (!dash || sb_puts(out, "-")) && sb_puts(out, "]");
    if (!ok)
        goto nomem;
    goto out;
nomem:
    ok = false;
    *reason = NULL; /* NULL reason = out of memory */
out:
    free(body.buf);
    return ok;
}

/* Translates an ECMA-262 pattern into an equivalent POSIX ERE, or fails with a reason (NULL
 * reason = out of memory). On success *out is a malloc'd string the caller frees. */
static bool translate_pattern(const char *src, size_t len, char **out, const char **reason)
{
    sbuf_t ere = {0};
    bool after_quantifier = false;
    size_t i = 0;

    *out = NULL;
    if (!sb_puts(&ere, ""))
        goto nomem;
    while (i < len) {
        char ch = src[i];
        bool quantifier = false;
        if (ch == '\\') {
            if (i + 1 >= len) {
                *reason = "pattern ends with a backslash";
                goto fail;
            }
            char e = src[i + 1];
            const char *ctl = control_escape(e);
            const char *rep = NULL;
            char lit[3] = {'\\', e, '\0'};
            i += 2;
            if (e == 'd')
                rep = "[0-9]";
            else if (e == 'D')
                rep = "[^0-9]";
            else if (e == 'w')
                rep = "[A-Za-z0-9_]";
            else if (e == 'W')
                rep = "[^A-Za-z0-9_]";
            else if (e == 's')
                rep = "[" ECMA_SPACES "]";
            else if (e == 'S')
                rep = "[^" ECMA_SPACES "]";
            else if (ctl)
                rep = ctl;
            else if (e == '/' || e == '-')
                rep = lit + 1;
            else if (is_syntax_char(e))
                rep = lit;
            if (!rep) {
                *reason = "unsupported escape in pattern (\\b, backreferences, \\u, \\x, \\p "
                          "and the like have no POSIX equivalent)";
                goto fail;
            }
            if (!sb_puts(&ere, rep))
                goto nomem;
        } else if (ch == '(') {
            if (i + 1 < len && src[i + 1] == '?') {
                if (i + 2 >= len || src[i + 2] != ':') {
                    *reason = "lookaround and named groups are not supported in patterns";
                    goto fail;
                }
                i += 2; /* (?: is a plain group: nothing here depends on captures */
            }
            i++;
            if (!sb_puts(&ere, "("))
                goto nomem;
        } else if (ch == '.') {
            i++;
            if (!sb_puts(&ere, ECMA_DOT))
                goto nomem;
        } else if (ch == '*' || ch == '+' || ch == '?') {
            i++;
            if (ch == '?' && after_quantifier) {
                /* A lazy quantifier matches the same strings as the greedy one; only what it
                 * captures differs, and nothing here captures. */
                after_quantifier = false;
                continue;
            }
            quantifier = true;
            if (!sb_putn(&ere, &ch, 1))
                goto nomem;
        } else if (ch == '{') {
            size_t j = i + 1;
            size_t digits = 0;
            while (j < len && src[j] >= '0' && src[j] <= '9') {
                j++;
                digits++;
            }
            if (digits > 0 && j < len && src[j] == ',') {
                j++;
                while (j < len && src[j] >= '0' && src[j] <= '9')
                    j++;
            }
            if (digits == 0 || j >= len || src[j] != '}') {
                *reason = "a literal { must be escaped as \\{ in patterns";
                goto fail;
            }
            j++;
            if (!sb_putn(&ere, src + i, j - i))
                goto nomem;
            i = j;
            quantifier = true;
        } else if (ch == '}') {
            i++;
            if (!sb_puts(&ere, "\\}"))
                goto nomem;
        } else if (ch == '[') {
            if (!translate_class(src, len, &i, &ere, reason))
                goto fail;
        } else {
            /* Literals, ^ $ | ) and a lone ], which both dialects read alike. A non-ASCII
             * character is grouped so that a quantifier after it repeats all of its bytes
             * when the expression is compiled for byte-wise matching. */
            size_t n = utf8_seq_len((unsigned char)ch);
            if (i + n > len)
                n = len - i;
            bool group = n > 1;
            if ((group && !sb_puts(&ere, "(")) || !sb_putn(&ere, src + i, n) ||
                (group && !sb_puts(&ere, ")")))
                goto nomem;
            i += n;
        }
        after_quantifier = quantifier;
    }
    *out = ere.buf;
    return true;
nomem:
    *reason = NULL;
fail:
    free(ere.buf);
    return false;
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
    if (n->re_ascii) {
        regfree(n->re_ascii);
        free(n->re_ascii);
    }
    if (n->re_utf8) {
        regfree(n->re_utf8);
        free(n->re_utf8);
    }
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

/* Compiles ere under loc into *out (malloc'd); on failure writes regcomp's reason into text. */
static sl_err_t compile_regex(locale_t loc, const char *ere, regex_t **out, char *text,
                              size_t textlen)
{
    regex_t *re = calloc(1, sizeof *re);
    if (!re)
        return SL_ENOMEM;
    /* regcomp records the current locale's multibyte rules in the compiled expression. */
    locale_t prev = uselocale(loc);
    int rc = regcomp(re, ere, REG_EXTENDED | REG_NOSUB);
    uselocale(prev);
    if (rc != 0) {
        regerror(rc, re, text, textlen);
        free(re);
        return rc == REG_ESPACE ? SL_ENOMEM : SL_ESCHEMA;
    }
    *out = re;
    return SL_OK;
}

static sl_err_t kw_pattern(cctx_t *c, node_t *n, const json_t *val, const path_t *kp,
                           unsigned nesting)
{
    (void)nesting;
    sl_err_t rc = SL_OK;
    char *ere = NULL;
    const char *reason = NULL;
    char text[128];

    if (!json_is_string(val))
        return cfail(c, kp, SL_ESCHEMA, "must be a string");
    if (!c->schema->c_loc) {
        c->schema->c_loc = newlocale(LC_CTYPE_MASK, "C", (locale_t)0);
        if (!c->schema->c_loc)
            return cfail(c, kp, SL_ENOMEM, "out of memory");
    }
    if (!c->schema->utf8) {
        c->schema->utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
        if (!c->schema->utf8)
            return cfail(c, kp, SL_ESCHEMA, "patterns need the C.UTF-8 locale, which is missing");
    }
    if (!translate_pattern(json_string_value(val), json_string_length(val), &ere, &reason)) {
        if (!reason)
            return cfail(c, kp, SL_ENOMEM, "out of memory");
        return cfail(c, kp, SL_ESCHEMA, "%s", reason);
    }
    n->pattern = dup_bytes(json_string_value(val), json_string_length(val));
    if (!n->pattern) {
        rc = cfail(c, kp, SL_ENOMEM, "out of memory");
        goto out;
    }
    /* Two compilations of one expression. glibc matches much faster in the C locale (about 6x
     * for a bounded repeat like {8,64}), and on a string of ASCII only the byte-wise match is
     * exact: every ASCII byte is a whole character, and the translation groups each non-ASCII
     * literal so a quantifier never applies to a lone byte of it. */
    rc = compile_regex(c->schema->utf8, ere, &n->re_utf8, text, sizeof text);
    if (rc == SL_OK)
        rc = compile_regex(c->schema->c_loc, ere, &n->re_ascii, text, sizeof text);
    if (rc != SL_OK)
        rc = cfail(c, kp, rc, "invalid pattern: %s", text);
out:
    free(ere);
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
    if (schema->c_loc)
        freelocale(schema->c_loc);
    if (schema->utf8)
        freelocale(schema->utf8);
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

static bool is_ascii(const char *s, size_t len)
{
    unsigned char any = 0;
    for (size_t i = 0; i < len; i++)
        any |= (unsigned char)s[i];
    return any < 0x80;
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
    if (n->re_utf8) {
        if (len > INT_MAX)
            return vfail(v, p, "string too long to match a pattern");
        regmatch_t span = {.rm_so = 0, .rm_eo = (regoff_t)len};
        int rc;
        /* REG_STARTEND bounds the match by length, so an embedded NUL cannot cut it short. */
        if (is_ascii(s, len)) {
            /* A C-locale expression matches bytes by tables built at compile time; it does not
             * depend on the thread's locale. */
            rc = regexec(n->re_ascii, s, 1, &span, REG_STARTEND);
        } else {
            /* The UTF-8 expression decodes the string with mbrtowc, which follows the
             * thread's locale, so it is switched for this one call. */
            locale_t prev = uselocale(v->schema->utf8);
            rc = regexec(n->re_utf8, s, 1, &span, REG_STARTEND);
            uselocale(prev);
        }
        if (rc != 0) {
            if (v->quiet > 0 || v->fatal)
                return false;
            vfail(v, p, "string does not match the pattern \"");
            msg_put_escaped(&v->why, n->pattern, strlen(n->pattern), false);
            msg_puts(&v->why, "\"");
            return false;
        }
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
