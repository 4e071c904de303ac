/* Whether a JSON value is an instance of a JSON schema: the check of a
 * tool call's arguments against the tool's parameters when the call was
 * not forced by a grammar (tool_choice auto), as JSON Schema (draft
 * 2020-12, and draft 4's boolean exclusiveMinimum/Maximum) defines it, for
 * the keywords json_schema.h compiles: type, enum, const, anyOf, oneOf
 * (exactly one), $ref to "#" or "#/...", properties, required,
 * additionalProperties (absent: any other key, as the standard says, not
 * as the grammar narrows it), items, minItems, maxItems, minLength,
 * maxLength (in code points), minimum, maximum, exclusiveMinimum,
 * exclusiveMaximum. Any other keyword (pattern, format, allOf, ...) is
 * not checked: a value is never called invalid for it.
 *
 * Bounded: JSON_SCHEMA_MAX_DEPTH nested subschemas and a work budget (a
 * $ref cycle, an exponential anyOf) end the check undecided.
 *
 * Not here: compiling a schema to a grammar (json_schema.h). Pure: no
 * global state, no I/O. */
#ifndef TPS_SERVER_JSON_SCHEMA_CHECK_H
#define TPS_SERVER_JSON_SCHEMA_CHECK_H

#include <jansson.h>
#include <stddef.h>

typedef enum json_check {
    JSON_CHECK_VALID = 0,
    JSON_CHECK_INVALID = 1,
    JSON_CHECK_UNDECIDED = 2, /* past the depth or work bound */
} json_check;

/* Checks value against schema (both borrowed; schema NULL: any value).
 * On INVALID, why (cap bytes, may be NULL) names the JSON pointer of the
 * value and the keyword: "/days: maximum 7". */
json_check json_schema_check(const json_t *schema, const json_t *value, char *why, size_t cap);

#endif
