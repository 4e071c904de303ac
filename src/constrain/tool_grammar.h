/* The grammar of forced tool calls: GBNF text whose sentences are an
 * answer made of calls only, each one of the offered tools' names with
 * arguments that are instances of its parameters schema (json_schema.h).
 * The server forces it under tool_choice "required" or a named function.
 *
 * A syntax is given as its markers (tool_grammar_syntax): where the calls
 * open and close, how a call, its name and its arguments are written. The
 * server fills one from its row of the format table (server/tools_table.c);
 * this module knows no format by name and no template.
 *
 * Not here: which syntax a template uses, rendering tools and calls into a
 * prompt, reading calls back from an answer (the server's tools*.c),
 * compiling the text (constrain.h). Pure: no global state, no I/O. */
#ifndef TPS_CONSTRAIN_TOOL_GRAMMAR_H
#define TPS_CONSTRAIN_TOOL_GRAMMAR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/sbuf.h"
#include "base/error.h"

/* How a call's arguments are written. */
typedef enum tool_args {
    /* one JSON object {name_key: N, args_key: {...}} holds the call */
    TOOL_ARGS_CALL = 0,
    /* the name stands before a JSON object of the arguments */
    TOOL_ARGS_OBJECT,
    /* the name, then one p_open K p_mid V p_close per argument (p_sep
     * between): V raw when the tool's schema says string (q_open/q_close
     * around it where the syntax quotes strings), JSON otherwise */
    TOOL_ARGS_PARAMS,
} tool_args;

/* The markers of one syntax, as its grammar writes them (NULL or "": none;
 * every string borrowed for the call). */
typedef struct tool_grammar_syntax {
    const char *sec_open, *sec_close;              /* around the calls */
    const char *call_open, *call_sep, *call_close; /* each call; between two calls */
    const char *id_close; /* an id "call_N" follows call_open, ended by this */
    const char *name_close;
    bool indexed;          /* the call's index follows name_close */
    const char *args_open; /* after name_close (and the index) */
    tool_args args;
    const char *name_key, *args_key, *id_key;                  /* TOOL_ARGS_CALL */
    const char *p_open, *p_mid, *p_mid_json, *p_close, *p_sep; /* TOOL_ARGS_PARAMS */
    const char *q_open, *q_close;
    bool one_call;                      /* one call an answer, parallel or not */
    const char *gbnf_lead, *gbnf_extra; /* GBNF before the calls; rules it uses */
} tool_grammar_syntax;

/* One offered function (borrowed). */
typedef struct tool_grammar_fn {
    const char *name;
    const json_t *parameters; /* a JSON schema object; NULL: no arguments ({}) */
} tool_grammar_fn;

/* Appends to gbnf the grammar of one call (parallel false, or the syntax
 * has one_call) or one or more, in syntax w, to the tools[0..n), only the
 * one called `only` when it is not NULL. TPS_EINVAL naming the tool when a
 * parameters schema cannot be compiled (json_schema.h's message) or `only`
 * is not offered; TPS_ENOMEM. */
int tool_grammar_gbnf(const tool_grammar_syntax *w, const tool_grammar_fn *tools, size_t n,
                      const char *only, bool parallel, sbuf *gbnf, tps_err *err);

#endif
