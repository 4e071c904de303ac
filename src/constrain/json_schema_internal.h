/* Private to src/constrain/json_schema*.c: the generator's state and the
 * helpers json_schema_gen.c gives the walk in json_schema.c (calls go one
 * way: json_schema.c -> json_schema_gen.c). */
#ifndef TPS_CONSTRAIN_JSON_SCHEMA_INTERNAL_H
#define TPS_CONSTRAIN_JSON_SCHEMA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "constrain/json_schema.h"

typedef struct jrule {
    char *name;
    char *body; /* NULL while reserved */
} jrule;

typedef struct jref {
    char *ref;
    const char *name; /* borrowed from rules */
} jref;

typedef struct gen {
    const json_t *root;
    jrule *rules;
    size_t n_rules, cap_rules;
    jref *refs;
    size_t n_refs, cap_refs;
    char path[512]; /* JSON pointer of the subschema being visited */
    size_t plen;
    int depth;
    const char *prefix; /* NULL, or every rule but the primitives is named "<prefix>-<hint>" */
    tps_err *err;
} gen;

/* JSON types as bits; js_type_names[i] names bit 1 << i. */
enum { T_OBJ = 1, T_ARR = 2, T_STR = 4, T_INT = 8, T_NUM = 16, T_BOOL = 32, T_NULL = 64 };
extern const char *const js_type_names[7];

/* A refusal naming the path being visited (TPS_EINVAL); out of memory. */
int js_gfail(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int js_goom(gen *g);
/* Appends "/seg" (escaped as a JSON pointer) to the path; returns the old
 * length for js_path_pop. A path too long to hold ends in "...". */
size_t js_path_push(gen *g, const char *seg);
void js_path_pop(gen *g, size_t old);
jrule *js_rule_find(gen *g, const char *name);
/* Adds a rule named after hint (characters outside [a-zA-Z0-9] become '-',
 * a "-N" suffix makes it unique) with body (copied; NULL reserves the name).
 * Returns the name, owned by g, or NULL when out of memory. */
const char *js_rule_add(gen *g, const char *hint, const char *body);
/* Adds primitive rule name and what it uses, once. Returns 0 or ENOMEM. */
int js_prim_use(gen *g, const char *name);
/* A primitive as the result of a visit. */
int js_prim_result(gen *g, const char *name, const char **out);
/* Finishes a visit: adds body (built in b, freed here) as a rule named
 * after hint. */
int js_body_result(gen *g, sbuf *b, const char *hint, const char **out);

/* The bit of a JSON type name; 0 for none. */
int js_type_bit(const char *name);
/* Every key of schema must be an annotation, in extra[0..n_extra), or a
 * typed keyword for one of the types in mask. */
int js_check_keys(gen *g, const json_t *schema, int mask, const char *const *extra, size_t n_extra);
/* A non-negative integer keyword, at most max; *v untouched when absent. */
int js_get_count(gen *g, const json_t *schema, const char *key, uint64_t max, uint64_t *v,
                 bool *present);
/* A GBNF string literal matching the bytes s[0..n) exactly. */
void js_gbnf_lit(sbuf *b, const char *s, size_t n);

/* Unsigned decimal numbers lo..hi without leading zeros, as a group. */
void js_uint_range(sbuf *b, uint64_t lo, uint64_t hi);
/* Unsigned numbers >= lo with at most 16 digits (integral-part's limit). */
void js_uint_at_least(sbuf *b, uint64_t lo);
/* An integer bound: minimum/maximum (inclusive) or exclusive*; *v set. */
int js_get_bound(gen *g, const json_t *schema, bool upper, int64_t *v, bool *present);

#endif
