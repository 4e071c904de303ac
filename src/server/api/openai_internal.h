/* Private to src/server/api/openai*.c: the typed getters every field is read
 * through, and the parsers of each group of fields, one file a concern:
 *   openai.c           entry point, prompt and messages
 *   openai_fields.c    the allow-list: every field known per endpoint,
 *                      honoured, label or refused (unknown ones are a 400)
 *   openai_sampling.c  sampling, lengths, stops, logprobs, output options
 *   openai_format.c    constrained output: response_format, grammar,
 *                      regex, structured_outputs and the guided_* names
 *   openai_tools.c     tools, tool_choice, parallel_tool_calls
 *   openai_reason.c    reasoning output: reasoning_format, thinking budget
 *   openai_get.c       the getters and the error shape (everything above
 *                      calls down to it; openai.c calls the others)
 * Each parser reads only its own fields from the request object, fills r
 * and returns 0, or fills e (naming the field) and returns < 0.
 *
 * Not here: anything a caller outside these files needs (openai.h). */
#ifndef TPS_SERVER_OPENAI_INTERNAL_H
#define TPS_SERVER_OPENAI_INTERNAL_H

#include <jansson.h>

#include "server/api/openai.h"

/* ---- typed getters: 0 and *out set; 1 when absent or null; <0 with e
 * filled (the 400 names key). Null counts as absent, as in OpenAI's API. */
int oai_get_bool(json_t *o, const char *key, bool *out, oai_error *e);
int oai_get_num(json_t *o, const char *key, double *out, oai_error *e);
int oai_get_int(json_t *o, const char *key, json_int_t *out, oai_error *e);
int oai_get_float(json_t *o, const char *key, float *out, oai_error *e);
/* Any value at key, as it is: 0, or a 400 missing_required_parameter. */
int oai_get_required(json_t *o, const char *key, json_t **out, oai_error *e);
/* An array (object: an object) of at most max entries at key; the 400s
 * say "KEY must be <must_be>" and "KEY has N <units>; at most MAX". */
int oai_get_list(json_t *o, const char *key, bool object, const char *must_be, const char *units,
                 size_t max, json_t **out, oai_error *e);
/* The elements of the array arr as token ids (integers in [0, INT32_MAX])
 * into out (room for them all): 0, or a 400 "PARAM[i] must be <must_be>". */
int oai_token_ids(json_t *arr, const char *param, const char *must_be, int32_t *out, oai_error *e);
/* A 400 invalid_value for param; fmt has two %s: param and detail. */
int oai_bad(oai_error *e, const char *param, const char *fmt, const char *detail);
/* A 400 invalid_type for param: "PARAM must be <must_be>". */
int oai_bad_type(oai_error *e, const char *param, const char *must_be);
/* The 500 for a failed allocation. */
int oai_oom(oai_error *e);

/* openai_fields.c: every top-level key of the body (and of each message
 * and of stream_options) is known for this endpoint; refused ones ask for
 * nothing; unknown ones are a 400, or, under p->ignore_unknown, dropped
 * from the body and named in r->ignored. Run before the parsers. */
int oai_check_fields(json_t *root, oai_kind kind, const oai_policy *p, oai_request *r,
                     oai_error *e);

/* openai_sampling.c */
int oai_parse_n(json_t *o, oai_request *r, oai_error *e);
int oai_parse_sampling_fields(json_t *o, oai_request *r, oai_error *e);

/* openai_format.c */
int oai_parse_constraint(json_t *o, oai_request *r, oai_error *e);

/* openai_tools.c (chat) */
int oai_parse_tools(json_t *o, oai_request *r, oai_error *e);

/* openai_reason.c (chat) */
int oai_parse_reasoning(json_t *o, oai_request *r, oai_error *e);

#endif
