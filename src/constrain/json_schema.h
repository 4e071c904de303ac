/* JSON schema -> GBNF: compiles the schema of a response_format
 * ({"type": "json_schema"}) or a tool's parameters into grammar text that
 * grammar.h parses, so that constrained decoding can only produce
 * JSON instances of the schema. {"type": "object"} is any JSON object
 * (response_format json_object).
 *
 * Supported (anything else is an error naming the keyword and its JSON
 * pointer: "json_schema: /properties/age: keyword 'multipleOf' is not
 * supported"; never silently ignored):
 *   type (a name or a list of names), enum, const, anyOf, oneOf (as anyOf),
 *   $ref to "#" or "#/..." (local: $defs, definitions, any pointer),
 *   object: properties (emitted in declared order; optional ones may be
 *     left out), required, additionalProperties (absent or false: no other
 *     keys, as llama.cpp does; true or a schema only when there are no
 *     properties: a map with string keys),
 *   array: items, minItems, maxItems,
 *   string: minLength, maxLength, format (date, time, date-time, uuid),
 *     pattern only when it matches everything (".*", "^.*$"),
 *   integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers),
 *     exact for any bounds within +-10^15 (not for type "number"),
 *   number, boolean, null, and true / {} for any JSON value.
 * Annotations are accepted and ignored: title, description, $schema, $id,
 * $comment, examples, default, deprecated, readOnly, writeOnly, $defs,
 * definitions.
 *
 * The grammar: whitespace after each token is "" | " " | "\n" plus up to 20
 * blanks (llama.cpp's `space`); object keys and enum/const values in
 * jansson's compact form; integers and the integral part of numbers have at
 * most 16 digits, fractions at most 16.
 *
 * Not here: regex patterns, format email/uri/..., minimum on numbers,
 * multipleOf, allOf, not, if/then/else, patternProperties, prefixItems,
 * uniqueItems, minProperties; the token-level automaton. Pure functions: no
 * global state, no I/O. */
#ifndef TPS_CONSTRAIN_JSON_SCHEMA_H
#define TPS_CONSTRAIN_JSON_SCHEMA_H

#include <jansson.h>

#include "constrain/grammar.h"
#include "base/sbuf.h"
#include "base/error.h"

#define JSON_SCHEMA_MAX_DEPTH 64                 /* nesting of subschemas */
#define JSON_SCHEMA_MAX_INT   1000000000000000LL /* |minimum|, |maximum|: 10^15 */

/* Appends the GBNF text for schema to out (one rule a line, "root" first).
 * Returns 0, or TPS_EINVAL with err naming the JSON pointer and the keyword
 * ("json_schema: /items/properties/x: ..."; "/" is the whole schema), or
 * TPS_ENOMEM. On failure out holds a partial text. schema is borrowed. */
int json_schema_to_gbnf(const json_t *schema, sbuf *out, tps_err *err);

/* The same with the schema's rules named "<name>" (its top) and
 * "<name>-..." (name: [a-zA-Z0-9-]), and the shared primitives ("space",
 * "string", ...) under their own names, always with the same text: the
 * grammars of several schemas go together in one GBNF text once each
 * primitive line is kept once (tool_grammar.h's calls, one schema per tool). */
int json_schema_to_gbnf_named(const json_t *schema, const char *name, sbuf *out, tps_err *err);

/* json_schema_to_gbnf, then grammar_parse: *out owns a new grammar (free
 * with grammar_free), NULL on failure. A schema whose $refs loop without
 * consuming input (a left-recursive grammar) is refused here. */
int json_schema_compile(grammar **out, const json_t *schema, tps_err *err);

#endif
