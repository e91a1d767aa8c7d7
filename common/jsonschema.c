/* jsonschema.c - compile a JSON Schema subset once (see jsonschema.h); validating is in
 * jsonschema_validate.c, patterns in ecmare.c.
 *
 * The one idea: every schema object becomes a node_t whose keywords are already parsed into
 * plain fields. $ref targets ("#" and the root's $defs members) are allocated as empty nodes
 * before anything is compiled, so a reference, even a recursive one, is just a pointer to a node.
 */
#include "jsonschema.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonschema_int.h"

const js_type_name_t js_type_names[7] = {
    {"object", T_OBJECT}, {"array", T_ARRAY},     {"string", T_STRING}, {"integer", T_INTEGER},
    {"number", T_NUMBER}, {"boolean", T_BOOLEAN}, {"null", T_NULL},
};

/* ---- bounded message buffer ------------------------------------------------------------- */

void js_msg_init(msg_t *m, char *buf, size_t cap)
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

void js_msg_puts(msg_t *m, const char *s)
{
    msg_putn(m, s, strlen(s));
}

void js_msg_vprintf(msg_t *m, const char *fmt, va_list ap)
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

void js_msg_printf(msg_t *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    js_msg_vprintf(m, fmt, ap);
    va_end(ap);
}

/* Writes s; in_pointer escapes "~" and "/" as RFC 6901 does, otherwise '"' and '\' are
 * backslash-escaped for a quoted name. Control bytes become \u00XX either way so a message stays
 * one line. */
void js_msg_put_escaped(msg_t *m, const char *s, size_t n, bool in_pointer)
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
        js_msg_puts(m, esc);
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
        js_msg_put_escaped(m, p->key, p->len, true);
    else
        js_msg_printf(m, "%zu", p->len);
}

/* The root is written "/" (not RFC 6901's empty string) so a message never starts with ':'. */
void js_msg_put_path(msg_t *m, const path_t *p)
{
    if (p)
        msg_put_segments(m, p);
    else
        msg_putn(m, "/", 1);
}

/* ---- numbers ---------------------------------------------------------------------------- */

num_t js_num_of(const json_t *v)
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

bool js_real_is_integral(double d)
{
    /* Every double of magnitude 2^52 or more is an integer; below that a cast is exact. */
    if (d >= 4503599627370496.0 || d <= -4503599627370496.0)
        return true;
    return (double)(long long)d == d;
}

/* ---- names ---------------------------------------------------------------------------- */

int js_name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int r = memcmp(a, b, alen < blen ? alen : blen);
    if (r != 0)
        return r;
    return (alen > blen) - (alen < blen);
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
        js_msg_puts(&c->err, "out of memory");
        return rc;
    }
    js_msg_put_path(&c->err, p);
    js_msg_puts(&c->err, ": ");
    va_start(ap, fmt);
    js_msg_vprintf(&c->err, fmt, ap);
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
    c->schema->nnodes++;
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
    sl_ecmare_free(n->re);
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


static int prop_cmp(const void *a, const void *b)
{
    const prop_t *pa = a;
    const prop_t *pb = b;
    return js_name_cmp(pa->name, pa->len, pb->name, pb->len);
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
        for (size_t t = 0; json_is_string(name) && t < sizeof js_type_names / sizeof *js_type_names;
             t++) {
            if (strcmp(json_string_value(name), js_type_names[t].name) == 0 &&
                json_string_length(name) == strlen(js_type_names[t].name))
                bit = js_type_names[t].bit;
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
            if (js_name_cmp(n->required[j].name, n->required[j].len, s, len) == 0)
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
    *dst = js_num_of(val);
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
    if (json_is_real(val) && json_real_value(val) >= 0 && js_real_is_integral(json_real_value(val))) {
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
    char why[256];
    sl_err_t rc = sl_ecmare_compile(src, len, &n->re, why, sizeof why);
    if (rc != SL_OK)
        return cfail(c, kp, rc, "%s", rc == SL_ENOMEM ? "out of memory" : why);
    n->pattern = dup_bytes(src, len);
    if (!n->pattern)
        return cfail(c, kp, SL_ENOMEM, "out of memory");
    return SL_OK;
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
        if (js_name_cmp(c->defs[i].name, c->defs[i].len, name, len) == 0)
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
            if (js_name_cmp(c->defs[i].name, c->defs[i].len, key, key_len) == 0)
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
            js_msg_put_escaped(&c->err, key, key_len, false);
            js_msg_puts(&c->err, "\"");
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

    js_msg_init(&c.err, err, errlen);
    if (!out || !schema) {
        js_msg_puts(&c.err, "schema and out are required");
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

    js_msg_init(&msg, err, errlen);
    if (!path || !out) {
        js_msg_puts(&msg, "path and out are required");
        return SL_EINVAL;
    }
    *out = NULL;
    /* A duplicate key would make the schema mean whichever copy jansson kept. */
    js = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!js) {
        enum json_error_code code = json_error_code(&jerr);
        if (code == json_error_cannot_open_file) {
            js_msg_printf(&msg, "%s: %s", path, jerr.text);
            return SL_EIO;
        }
        if (code == json_error_out_of_memory) {
            js_msg_printf(&msg, "%s: out of memory", path);
            return SL_ENOMEM;
        }
        js_msg_printf(&msg, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
        return SL_EPARSE;
    }
    js_msg_printf(&msg, "%s: ", path);
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
    free(schema);
}
