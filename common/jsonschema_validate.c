/* jsonschema_validate.c - validating a document against a compiled schema (see jsonschema.h).
 *
 * Validation walks the nodes and the document together and stops at the first violation. The
 * JSON pointer of a violation lives in a chain of stack frames (path_t) and is only formatted
 * when a violation is reported, so a passing validation formats nothing and allocates nothing.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "jsonschema_int.h"

/* ---- numbers and equality --------------------------------------------------------------- */


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


static void msg_put_num(msg_t *m, num_t num)
{
    if (num.is_int) {
        js_msg_printf(m, "%" JSON_INTEGER_FORMAT, num.i);
        return;
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%.15g", num.d);
    if (strtod(buf, NULL) != num.d)
        snprintf(buf, sizeof buf, "%.17g", num.d);
    js_msg_puts(m, buf);
}

/* JSON Schema equality: numbers by value (1 == 1.0), objects regardless of key order. */
static bool values_equal(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return num_cmp(js_num_of(a), js_num_of(b)) == 0;
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

/* ---- validation ------------------------------------------------------------------------- */

typedef struct {
    const sl_schema_t *schema;
    msg_t why;
    unsigned quiet; /* > 0 inside anyOf/oneOf/not, whose branches may fail without a message */
    bool fatal;     /* too deep or too long: stop everything, even a "not" must not turn this
                     * into a pass */
    size_t steps, max_steps; /* schema nodes applied so far, and the budget (see max_steps) */
} vctx_t;

/* Stops a validation for a reason that no branch may turn into a pass. */
static bool vfatal(vctx_t *v, const path_t *p, const char *what)
{
    if (!v->fatal) {
        v->fatal = true;
        js_msg_put_path(&v->why, p);
        js_msg_puts(&v->why, what);
    }
    return false;
}

/* Values of doc down to the deepest level a validation reads. */
static size_t count_values(const json_t *doc, unsigned depth)
{
    size_t n = 1;
    if (depth >= SL_SCHEMA_MAX_DEPTH)
        return n;
    const char *key;
    const json_t *value;
    size_t i;
    if (json_is_object(doc)) {
        json_object_foreach((json_t *)doc, key, value)
        {
            n += count_values(value, depth + 1);
        }
    } else if (json_is_array(doc)) {
        json_array_foreach(doc, i, value)
        {
            n += count_values(value, depth + 1);
        }
    }
    return n;
}

/* The step budget of one validation. A schema whose nodes each apply once to each value needs
 * at most nodes x values steps; a few times that leaves room for anyOf/oneOf branches that read
 * the same values again. A hostile schema whose $refs fan out (a0: anyOf[a1, a1], a1: anyOf[a2,
 * a2], ...) would need 2^depth steps: it stops at this budget instead of running for ever. */
static size_t max_steps(const sl_schema_t *schema, const json_t *doc)
{
    return (SL_SCHEMA_STEPS_PER_NODE * schema->nnodes + 64) * count_values(doc, 0);
}

static bool vfail(vctx_t *v, const path_t *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool vfail(vctx_t *v, const path_t *p, const char *fmt, ...)
{
    va_list ap;
    if (v->quiet > 0 || v->fatal)
        return false;
    js_msg_put_path(&v->why, p);
    js_msg_puts(&v->why, ": ");
    va_start(ap, fmt);
    js_msg_vprintf(&v->why, fmt, ap);
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
        return js_real_is_integral(json_real_value(doc)) ? T_INTEGER | T_NUMBER : T_NUMBER;
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
    js_msg_put_path(&v->why, p);
    js_msg_puts(&v->why, ": expected ");
    size_t total = 0, done = 0;
    for (size_t t = 0; t < sizeof js_type_names / sizeof *js_type_names; t++)
        total += (n->types & js_type_names[t].bit) != 0;
    for (size_t t = 0; t < sizeof js_type_names / sizeof *js_type_names; t++) {
        if (!(n->types & js_type_names[t].bit))
            continue;
        if (done > 0)
            js_msg_puts(&v->why, done + 1 == total ? " or " : ", ");
        js_msg_puts(&v->why, js_type_names[t].name);
        done++;
    }
    js_msg_printf(&v->why, ", got %s", doc_type_name(doc));
    return false;
}

static bool check_number(vctx_t *v, const node_t *n, const json_t *doc, const path_t *p)
{
    num_t num = js_num_of(doc);
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
static bool match_gave_up(vctx_t *v, const node_t *n, const path_t *p, const char *why)
{
    if (!v->fatal) {
        v->fatal = true;
        js_msg_put_path(&v->why, p);
        js_msg_puts(&v->why, ": could not match the pattern \"");
        js_msg_put_escaped(&v->why, n->pattern, strlen(n->pattern), false);
        js_msg_printf(&v->why, "\" within its limits: %s", why);
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
        char why[128];
        int rc = sl_ecmare_match(n->re, s, len, why, sizeof why);
        if (rc == 0) {
            if (v->quiet > 0 || v->fatal)
                return false;
            vfail(v, p, "string does not match the pattern \"");
            js_msg_put_escaped(&v->why, n->pattern, strlen(n->pattern), false);
            js_msg_puts(&v->why, "\"");
            return false;
        }
        if (rc < 0)
            return match_gave_up(v, n, p, why);
    }
    return true;
}

static const prop_t *find_prop(const node_t *n, const char *key, size_t len)
{
    size_t lo = 0, hi = n->nprops;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = js_name_cmp(n->props[mid].name, n->props[mid].len, key, len);
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
            js_msg_put_escaped(&v->why, n->required[i].name, n->required[i].len, false);
            js_msg_puts(&v->why, "\"");
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
    if (depth > SL_SCHEMA_MAX_DEPTH)
        return vfatal(v, p, ": document nested too deeply");
    if (++v->steps > v->max_steps)
        return vfatal(v, p,
                      ": validation gave up: the schema's combinators apply to the same "
                      "values too many times");
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
    js_msg_init(&v.why, why, whylen);
    if (!schema || !doc) {
        js_msg_puts(&v.why, "/: schema and document are required");
        return SL_EINVAL;
    }
    v.schema = schema;
    v.max_steps = max_steps(schema, doc);
    return check(&v, schema->root, doc, NULL, 0) ? SL_OK : SL_ESCHEMA;
}
