/* Constrained decoding, the module's front door: what a request asks its
 * output to be (a GBNF grammar, a regex, a JSON schema, a choice of
 * strings, a tool list) in, a token mask out.
 *
 *   sources -> GBNF text     json_schema.h (schemas, json_object),
 *                            regex_gbnf.h (regexes), tool_grammar.h (forced
 *                            tool calls); GBNF given as such is the text
 *   GBNF -> compiled grammar constrain_compile below: the one compile path,
 *                            through the server's grammar_cache.h (by
 *                            content, within its limits and memory budget)
 *                            or, without a cache, compiled as it is
 *   compiled -> token mask   constraint.h: one cursor a choice over the
 *                            vocabulary's trie; the engine applies its mask
 *                            before sampling and feeds it each token
 *
 * Below the engine and the server, above model (the tokenizer's pieces make
 * the trie). Not here: HTTP fields and their error codes (the server names
 * the field a constraint came from), which format a template's tool calls
 * use (the server's tools_table.c), sampling (engine/sample/sampler.h). */
#ifndef TPS_CONSTRAIN_CONSTRAIN_H
#define TPS_CONSTRAIN_CONSTRAIN_H

#include <stdbool.h>
#include <stddef.h>

#include "constrain/constraint.h"
#include "constrain/grammar_cache.h"
#include "base/error.h"

/* The compiled form of gbnf[0..len). With gc: grammar_cache_acquire (the
 * cached one or compiled now within gc's limits, and reserve bytes of gc's
 * budget reserved; *hit whether it was cached). Without (gc NULL): compiled
 * now, without limits, nothing reserved, *hit false. *out holds one
 * reference; give it back with constrain_release and the same gc and
 * reserve. Errors as grammar_cache_acquire's (without gc, the compile's
 * only); nothing is held then. Any thread. */
int constrain_compile(grammar_cache *gc, const char *gbnf, size_t len, size_t reserve,
                      constraint_prog **out, bool *hit, tps_err *err);
/* Gives back what constrain_compile returned; p NULL is ignored. */
void constrain_release(grammar_cache *gc, constraint_prog *p, size_t reserve);

#endif
