/* The OpenAI request and error shapes: a POST body of /v1/completions or
 * /v1/chat/completions -> a validated oai_request (every field checked for
 * type and range, the sampling parameters through sampler_params_validate),
 * and the {"error": {message, type, param, code}} body every failure is
 * answered with. Every field of a body is on the endpoint's allow-list
 * (oai_fields: honoured, a label, or refused unless it asks for nothing);
 * any other is a 400 naming it. Pure functions of their input: no
 * tokenizer, no engine, no I/O, so the fuzzer and unit tests drive them
 * directly.
 *
 * Not here: tokenizing the prompt or rendering chat messages (the server
 * does that with the model's tokenizer and chat_prompt.h), HTTP. */
#ifndef TPS_SERVER_OPENAI_H
#define TPS_SERVER_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/sample/logprobs.h"
#include "engine/sample/sampler.h"
#include "server/chat/chat_prompt.h"
#include "server/chat/chat_template.h"
#include "base/sbuf.h"
#include "server/tools/tools.h"

#define OAI_MAX_STOP     16 /* stop strings per request (OpenAI allows 4) */
#define OAI_MAX_STOP_IDS 16 /* stop_token_ids per request */

typedef enum oai_kind { OAI_COMPLETION = 1, OAI_CHAT = 2 } oai_kind;

/* The API a chat request came in through: each is parsed into the same
 * oai_request (api_responses.h, api_messages.h) and answered in its own
 * shapes (api_write.h). */
typedef enum oai_dialect {
    OAI_DIALECT_CHAT = 0,  /* /v1/chat/completions (and /v1/completions) */
    OAI_DIALECT_RESPONSES, /* /v1/responses (OpenAI) */
    OAI_DIALECT_MESSAGES,  /* /v1/messages (Anthropic) */
} oai_dialect;

/* What a parse does with a field no row names (tps serve --unknown-fields):
 * refuse it (400, the default) or drop it, named in oai_request.ignored. */
typedef struct oai_policy {
    bool ignore_unknown;
} oai_policy;

#define OAI_IGNORED_MAX 256 /* bytes of ignored field names kept ("a,b,..."); more are counted */

/* How the thinking of a reasoning model is returned (chat). */
typedef enum oai_reasoning {
    OAI_REASONING_SPLIT =
        0,                /* reasoning_content apart from content (default; "auto", "deepseek") */
    OAI_REASONING_NONE,   /* inline in content, markers included ("none") */
    OAI_REASONING_HIDDEN, /* split, and the reasoning dropped (include_reasoning false) */
} oai_reasoning;

/* The allow-list: one row per field a body may carry. */
typedef enum oai_field_kind {
    OAI_FIELD_HONOURED = 0, /* acted on (some through the chat template) */
    OAI_FIELD_LABEL,        /* accepted; labels the request, changes no output */
    OAI_FIELD_REFUSED,      /* a 400 unless its value asks for nothing (neutral) */
} oai_field_kind;

typedef struct oai_field {
    const char *name;
    unsigned endpoints; /* OAI_COMPLETION | OAI_CHAT */
    oai_field_kind kind;
    const char *peer;    /* who defines it: "OpenAI", "vLLM", "llama-server" */
    const char *neutral; /* refused: the JSON values that ask for nothing, '|' between
                            them; NULL: null, false, 0, "", [] and {} */
    const char *why;     /* refused: the reason given in the 400 */
} oai_field;

/* The table (static); *n gets its length. */
const oai_field *oai_fields(size_t *n);

/* A parsed request. Strings are borrowed from the parsed JSON the request
 * owns (or from its own storage): valid until oai_request_free. */
typedef struct oai_request {
    oai_kind kind;
    const char *model; /* NULL when absent */
    /* Completions: the prompt as text, or as token ids when prompt_is_ids. */
    bool prompt_is_ids;
    const char *prompt;
    size_t prompt_len;
    int32_t *prompt_ids; /* owned */
    size_t n_prompt_ids;
    /* Chat: the messages (content parts of type "text" joined). */
    chat_msg *msgs; /* owned */
    size_t n_msgs;
    /* per message: an assistant message's tool_calls (a json_t array,
     * borrowed from the body; checked: each {id, type "function",
     * function {name, arguments (a string)}}), NULL for none */
    const void **msg_tool_calls; /* owned array (n_msgs,) */
    /* tools (chat): the functions, tool_choice (default auto with tools,
     * none without), the named function, parallel_tool_calls (default true) */
    oai_tool *tools; /* owned array; strings borrowed */
    size_t n_tools;
    tool_choice tool_choice;
    const char *tool_name;
    bool parallel_tool_calls;
    /* Chat template inputs (chat_prompt.h): chat_template_kwargs (a json_t
     * object borrowed from the body; NULL when absent), add_generation_prompt
     * (default true; false when continue_final_message), and
     * continue_final_message (vLLM's: the last message is left open) */
    const void *template_kwargs;
    bool add_generation_prompt;
    bool continue_final_message;
    /* max_tokens / max_completion_tokens / n_predict; 0 when absent (the
     * server picks). */
    uint32_t max_tokens;
    /* Choices to sample (n; 1 when absent). Only its range is checked
     * here; the server's ceiling (--max-n) is the server's. */
    uint32_t n;
    sampler_params sampling;
    sampler_bias *logit_bias; /* owned; ids not yet checked against the vocabulary */
    size_t n_logit_bias;
    bool logprobs;         /* per-token logprobs asked for */
    uint32_t top_logprobs; /* alternatives per token, 0..LOGPROBS_MAX_TOP */
    /* Constrained output: GBNF text (owned) from response_format
     * (json_object, json_schema), grammar, regex, or the json_schema /
     * guided_json / guided_regex / guided_grammar extensions; NULL: free
     * text. Not yet parsed: the server compiles it (grammar_cache.h) and
     * answers its errors with oai_constraint_error naming grammar_param,
     * the field it came from (a static string). */
    char *grammar;
    size_t grammar_len;
    const char *grammar_param;
    const char *stop[OAI_MAX_STOP];
    size_t n_stop;
    int32_t stop_ids[OAI_MAX_STOP_IDS]; /* stop_token_ids; not yet checked against the vocabulary */
    size_t n_stop_ids;
    /* vLLM's output options (engine.h) */
    uint32_t min_tokens;
    bool include_stop_str; /* include_stop_str_in_output */
    bool skip_special;     /* skip_special_tokens (default true) */
    bool seeded;           /* seed was given; else the server draws one */
    /* Reasoning (chat): how thinking is returned, and the thinking budget
     * (thinking_token_budget / thinking_budget_tokens; -1: none). */
    oai_reasoning reasoning;
    int32_t think_budget;
    /* reasoning_effort ("low", "medium", "high"; borrowed; NULL: absent):
     * passed to a chat template that reads it (gpt-oss's), else refused */
    const char *reasoning_effort;
    bool stream;
    bool include_usage; /* stream_options.include_usage */
    /* The dialect (chat for oai_parse), and what only its answer needs:
     * Responses' store (keep the answer for previous_response_id), the
     * conversation as chat messages without the instructions (a json_t
     * array, owned; stored with the answer), and the request's settings as
     * the response object echoes them (JSON members, owned; NULL: none).
     * Messages' thinking asked for (thinking blocks returned). */
    oai_dialect dialect;
    bool store;
    bool reasoning_summary; /* Responses' reasoning.summary: the reasoning item's summary */
    void *history;
    char *echo;
    /* Unknown fields dropped under oai_policy.ignore_unknown: their names,
     * comma-separated (cut at OAI_IGNORED_MAX with "..."), and their count. */
    char ignored[OAI_IGNORED_MAX];
    uint32_t n_ignored;
    /* private */
    void *json;  /* json_t *: the parsed body the strings borrow from */
    char *parts; /* joined content parts */
} oai_request;

/* An HTTP error in OpenAI's shape. */
typedef struct oai_error {
    int status;       /* HTTP status */
    const char *type; /* "invalid_request_error", "authentication_error", ... (static) */
    char param[64];   /* the field at fault; "" for none (rendered as null) */
    char code[48];    /* machine-readable code; "" for none (rendered as null) */
    char message[512];
} oai_error;

/* Parses and validates body[0..len). On failure returns TPS_EINVAL with *e
 * filled (status 400; malformed JSON names line and column; a wrong type or
 * value names the field in e->param; a field the endpoint does not know is
 * code unknown_parameter, a known one asking for a behaviour tps lacks is
 * unsupported_parameter) and r left empty. */
int oai_parse(oai_request *r, oai_kind kind, const char *body, size_t len, oai_error *e);
/* The same under a policy for unknown fields (NULL: refuse them). */
int oai_parse_ex(oai_request *r, oai_kind kind, const char *body, size_t len, const oai_policy *p,
                 oai_error *e);
/* A chat request already parsed as JSON (a chat-shaped object a dialect
 * built: api_responses.c, api_messages.c; an object), which r takes (freed
 * on failure too). r->dialect is left for the caller to set. */
struct json_t;
int oai_parse_root(oai_request *r, struct json_t *root, const oai_policy *p, oai_error *e);
void oai_request_free(oai_request *r);
/* One object's keys checked against a dialect's allow-list t (n rows;
 * their endpoints not read), as oai_parse checks a body: unknown is a 400
 * (or, under p->ignore_unknown, dropped from obj and named in r->ignored),
 * refused asks for nothing. endpoint names the API in a 400; prefix (""
 * or "input[2].") goes before each key named. */
int oai_check_table(struct json_t *obj, const oai_field *t, size_t n, const char *endpoint,
                    const char *prefix, const oai_policy *p, oai_request *r, oai_error *e);
/* A chat request as its template's inputs (chat_prompt.h): messages, the
 * tools (none under tool_choice "none"), chat_template_kwargs, the
 * generation prompt. Borrowed from r. */
chat_request oai_chat_inputs(const oai_request *r);

/* body[0..len) parsed as one JSON object: a new reference, or NULL with e
 * a 400 invalid_json (malformed JSON names line and column). */
struct json_t *oai_body_object(const char *body, size_t len, oai_error *e);
/* Fills e; param and code may be NULL. Returns TPS_EINVAL. */
int oai_error_set(oai_error *e, int status, const char *type, const char *param, const char *code,
                  const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* A constraint's compile error: 400 naming param (500 when out of memory,
 * rc TPS_ENOMEM), the message prefixed with param unless it starts with it
 * already. Returns TPS_EINVAL. */
int oai_constraint_error(oai_error *e, int rc, const char *param, const char *msg);
/* Appends {"error":{"message":...,"type":...,"param":...,"code":...}}. */
void oai_error_json(const oai_error *e, sbuf *out);

#endif
