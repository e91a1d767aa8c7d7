/* jsonschema_int.h - what the schema compiler (jsonschema.c) and the validator
 * (jsonschema_validate.c) share: the compiled node tree, JSON pointers, bounded messages and
 * exact numbers. Internal to those two files; the interface is jsonschema.h.
 */
#ifndef SL_JSONSCHEMA_INT_H
#define SL_JSONSCHEMA_INT_H

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "ecmare.h"
#include "jsonschema.h"

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

/* The names of the type bits, in the order messages list them. */
typedef struct {
    const char *name;
    unsigned bit;
} js_type_name_t;
extern const js_type_name_t js_type_names[7];

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
    sl_ecmare_t *re; /* the pattern, compiled */
    char *pattern;  /* as written in the schema, for messages */
    node_t **all_of, **any_of, **one_of;
    size_t nall_of, nany_of, none_of;
    node_t *not_schema;
    node_t *ref;
    int mark; /* cycle check state while compiling */
};

struct sl_schema {
    node_t *root;
    node_t *nodes; /* list through next_alloc */
    size_t nnodes; /* how many */
};

/* One step of a JSON pointer, linked towards the root; up == NULL for the root's children. */
typedef struct path {
    const struct path *up;
    const char *key; /* NULL: an array index */
    size_t len;      /* key length, or the index */
} path_t;

/* A bounded message: appends past cap are cut, never overflow. */
typedef struct {
    char *buf; /* NULL: discard everything */
    size_t cap;
    size_t len;
} msg_t;

void js_msg_init(msg_t *m, char *buf, size_t cap);
void js_msg_puts(msg_t *m, const char *s);
void js_msg_vprintf(msg_t *m, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
void js_msg_printf(msg_t *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0..n) as JSON text without quotes, or as a JSON pointer segment (~0, ~1) when in_pointer. */
void js_msg_put_escaped(msg_t *m, const char *s, size_t n, bool in_pointer);
/* The JSON pointer of p ("" for the root). */
void js_msg_put_path(msg_t *m, const path_t *p);

/* A JSON number as written (integers stay integers). */
num_t js_num_of(const json_t *v);
/* Property names in the order props[] is sorted in (memcmp, then length); 0 when equal. */
int js_name_cmp(const char *a, size_t alen, const char *b, size_t blen);
/* Whether d has no fractional part. */
bool js_real_is_integral(double d);

#endif
