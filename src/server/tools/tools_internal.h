/* Private to src/server/tools/tools*.c: the tool-call syntaxes as a table of
 * rows (tools_table.c), and the helpers the files share. A syntax is
 * data: where the calls of an answer open and close, how each call
 * opens, how its name and arguments are written, what closes it. tools.c
 * renders a row and hands its markers to constrain/tool_grammar.h for the
 * forced-call grammar, tools_scan.c reads calls back by a row (whole or
 * as they stream), tools_stream.c turns the reads of a growing answer
 * into events.
 *
 * Not here: which template implies which row (tools_table.c's need/veto
 * lists), HTTP. */
#ifndef TPS_SERVER_TOOLS_INTERNAL_H
#define TPS_SERVER_TOOLS_INTERNAL_H

#include <string.h>

#include "server/tools/tools.h"
#include "constrain/tool_grammar.h" /* tool_args, a row's grammar */

/* DeepSeek R1 / V3.1 */
#define DS_CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define DS_CALLS_END   "<｜tool▁calls▁end｜>"
#define DS_CALL_BEGIN  "<｜tool▁call▁begin｜>"
#define DS_CALL_END    "<｜tool▁call▁end｜>"
#define DS_SEP         "<｜tool▁sep｜>"
/* Kimi K2 */
#define KIMI_SECTION_BEGIN "<|tool_calls_section_begin|>"
#define KIMI_SECTION_END   "<|tool_calls_section_end|>"
#define KIMI_CALL_BEGIN    "<|tool_call_begin|>"
#define KIMI_ARGS_BEGIN    "<|tool_call_argument_begin|>"
#define KIMI_CALL_END      "<|tool_call_end|>"
/* gpt-oss harmony */
#define HARMONY_TO_FN   "to=functions."
#define HARMONY_MESSAGE "<|message|>"
/* Mistral */
#define MISTRAL_CALLS "[TOOL_CALLS]"
#define MISTRAL_ARGS  "[ARGS]"
/* Apriel */
#define APRIEL_OPEN  "<tool_calls>"
#define APRIEL_CLOSE "</tool_calls>"
/* Functionary v3.1 */
#define FUNC_OPEN  "<function="
#define FUNC_CLOSE "</function>"
/* DeepSeek V3.2's DSML */
#define DSML "<｜DSML｜"

/* How the tool list is written for a template that does not write it. */
typedef enum tool_list_style {
    TOOL_LIST_EXAMPLE = 0, /* the tools as JSON lines and one example call */
    TOOL_LIST_HERMES,      /* Qwen's <tools></tools> wording */
    TOOL_LIST_GENERIC,     /* terse: "Tools: [...]" and how to call */
    TOOL_LIST_LLAMA3,      /* Llama 3.1's ipython wording */
    TOOL_LIST_MISTRAL,     /* [AVAILABLE_TOOLS] before the last user turn */
} tool_list_style;

/* One syntax. Markers are written as the row says (rendering, grammar);
 * read back, a blank run in a marker matches any blank run, none
 * included, and blanks before a marker are skipped. */
typedef struct tool_syntax {
    const char *name;
    /* detection from the template's text: every need, no veto */
    const char *need[3], *veto[3];
    const char *sec_open, *sec_close;              /* around the calls ("" none) */
    const char *call_open, *call_sep, *call_close; /* each call; between two calls */
    const char *id_close; /* an id follows call_open, ended by this (Solar Open) */
    const char *name_close;
    bool indexed;          /* the call's index follows name_close (Kimi K2) */
    const char *args_open; /* after name_close (and the index) */
    tool_args args;
    const char *name_key, *args_key, *id_key;                  /* TOOL_ARGS_CALL */
    const char *p_open, *p_mid, *p_mid_json, *p_close, *p_sep; /* TOOL_ARGS_PARAMS */
    const char *q_open, *q_close;
    bool one_call;    /* one call an answer (Llama 3.1, gpt-oss) */
    bool at_start;    /* no marker: the call is the answer (Llama 3.1) */
    tool_format also; /* read too when this row finds no call (0: none) */
    /* gpt-oss: the grammar's lead and its rules; history's call head */
    const char *gbnf_lead, *gbnf_extra, *hist_open, *hist_name_close;
    tool_list_style list;
    /* a tool result: res_open content res_close (content as a JSON string
     * when res_json), in a turn of role res_role */
    const char *res_open, *res_close, *res_role;
    bool res_json;
    const char *specials[8]; /* marker texts a vocabulary may hold as control tokens */
} tool_syntax;

const tool_syntax *tools_row(tool_format f);

static inline const char *tools_find(const char *s, size_t n, const char *needle) {
    return memmem(s, n, needle, strlen(needle));
}

static inline bool tools_blank(char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

static inline bool tools_name_char(char c) {
    return c == '_' || c == '-' || c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9');
}

/* ---------------------------------------------------------------------------
 * tools_scan.c: the calls of an answer read by a row
 * ------------------------------------------------------------------------- */

/* One call as far as it was read: its name in the text, its arguments as
 * the JSON text OpenAI carries (in the scan's args buffer; a prefix of the
 * final text while the call is open). */
typedef struct tool_scan_call {
    size_t name_off, name_len;
    size_t args_off, args_len;
    bool named;    /* the name is whole */
    bool args_raw; /* the arguments are the model's JSON text as written */
    bool complete; /* the call is closed and its arguments parse */
} tool_scan_call;

typedef struct tool_scan {
    size_t content; /* bytes of text that are surely content */
    bool begun;     /* a call's marker was seen */
    size_t n;       /* calls read (the last may be open when partial) */
    tool_scan_call calls[TOOLS_MAX_CALLS];
    sbuf args; /* every call's arguments text, one after another */
} tool_scan;

/* Reads text[0..n) by format f, with the string parameters of ts (NULL:
 * a value that parses as JSON is JSON). partial: the text may grow (an
 * open call is reported; content stops before anything that may become a
 * marker); else only complete calls count, and without any the whole text
 * is content. */
void tools_scan(tool_format f, const tool_set *ts, const char *text, size_t n, bool partial,
                tool_scan *out);

/* The parameters schema of the function named fn[0..fn_len) (borrowed
 * from ts; NULL: it takes any object), *offered whether the request
 * offered it. */
const json_t *tools_set_params(const tool_set *ts, const char *fn, size_t fn_len, bool *offered);

/* Whether parameter key of function fn is a string by ts (true: unknown
 * parameters and tools read as raw text unless they parse as JSON). */
int tools_set_param_kind(const tool_set *ts, const char *fn, size_t fn_len, const char *key,
                         size_t key_len);

#endif
