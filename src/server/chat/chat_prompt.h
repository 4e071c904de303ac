/* The chat prompt: an OpenAI chat request rendered by the model's own Jinja
 * chat template (src/jinja/) the way Hugging Face transformers'
 * apply_chat_template renders it, after the request is turned into the
 * template's variables the way vLLM does:
 *   - messages: role; content as a string (null -> "", text parts joined
 *     with "\n"); reasoning_content, name and tool_call_id when given;
 *     tool_calls with each function's arguments parsed from the JSON
 *     string OpenAI clients send into the object templates expect;
 *   - tools: the request's tools as sent (None when there are none, or
 *     when tool_choice is "none"); documents: None;
 *   - add_generation_prompt, bos_token, eos_token, and every key of
 *     chat_template_kwargs (enable_thinking, ...).
 * continue_final_message leaves the last assistant message open (vLLM's
 * and transformers' rule: the rendered text ends where that message's
 * text ends, no generation prompt).
 *
 * Which template: the GGUF's tokenizer.chat_template (its named variant
 * tokenizer.chat_template.tool_use when tools are offered, as transformers
 * chooses), or a file (--chat-template-file), or a built-in by name
 * (--chat-template chatml, llama3, ...); a model file with no template
 * gets ChatML with a warning. A template that does not read `tools` gets
 * the tools written into its system message instead (tools.h), in the
 * tool-call syntax its text implies.
 *
 * Not here: HTTP, tokenizing, the tool-call parser (tools.h). */
#ifndef TPS_SERVER_CHAT_PROMPT_H
#define TPS_SERVER_CHAT_PROMPT_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "base/error.h"
#include "base/sbuf.h"
#include "jinja/jinja.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "server/tools/tools.h"

/* How a template's answers carry the model's thinking, from its text:
 * "</think>" blocks (Qwen3, QwQ, the DeepSeek-R1 distills, Kimi K2), or
 * gpt-oss's harmony channels ("<|channel|>analysis<|message|>..."). */
typedef enum chat_reasoning {
    CHAT_REASON_NONE = 0,
    CHAT_REASON_THINK,   /* <think> ... </think> (engine/sample/think.h) */
    CHAT_REASON_HARMONY, /* <|channel|>analysis / final / commentary (server/harmony.h) */
} chat_reasoning;

typedef enum chat_source {
    CHAT_SRC_GGUF = 0, /* tokenizer.chat_template of the model file */
    CHAT_SRC_FILE,     /* --chat-template-file */
    CHAT_SRC_NAMED,    /* --chat-template NAME: a built-in */
    CHAT_SRC_DEFAULT,  /* the file has none: ChatML */
} chat_source;

/* How a template that does not take OpenAI's shapes is fed: decided at
 * load by sample renders (chat_adapt.c), as llama.cpp's minja finds a
 * template's capabilities by rendering it, and applied by every render. */
typedef struct chat_adapt {
    bool system_in_user;   /* it refuses a system turn: a tool list tps writes opens the
                              first user turn instead (Gemma 2) */
    bool functions_var;    /* `tools` is None; `functions` is the tools as JSON text
                              (indent 2) and `datetime` the time (FireFunction v2) */
    bool tools_unrendered; /* it fails on tools in every shape: tps writes the list into
                              the messages, as for a template that never reads tools
                              (llama.cpp's own DeepSeek R1, written for minja) */
    bool args_text;        /* tool-call arguments stay the JSON text sent, not an object
                              (Functionary v3.2 concatenates them as a string) */
} chat_adapt;

/* The served templates, compiled once at startup; read-only after. */
typedef struct chat_prompt {
    jinja_tpl *main;
    jinja_tpl *tool_use; /* tokenizer.chat_template.tool_use; NULL: none */
    chat_source source;
    char name[128];           /* the file, the built-in's name, "tokenizer.chat_template" */
    char *bos, *eos;          /* the vocabulary's BOS / EOS text ("" when none) */
    bool strip_bos;           /* the tokenizer adds BOS: a leading BOS text is dropped */
    tool_format tools;        /* the tool-call syntax the template implies */
    bool template_tools;      /* the template that renders with tools (tool_use, else main)
                                 writes them itself: it reads `tools` */
    bool template_calls;      /* it writes earlier tool_calls itself */
    bool tools_known;         /* tps parses the calls it asks for (else tools are a 400) */
    const char *eot;          /* the end-of-turn text, a stop string or token */
    chat_reasoning reasoning; /* what the served template's text says of thinking */
    chat_adapt adapt;         /* how requests are fed to it (chat_adapt_detect) */
} chat_prompt;

/* What one render takes: the request's parts (borrowed JSON). */
typedef struct chat_request {
    const json_t *messages; /* the OpenAI messages array (checked by openai.c) */
    const json_t *tools;    /* array, or NULL */
    const json_t *kwargs;   /* chat_template_kwargs object, or NULL */
    bool add_generation_prompt;
    bool continue_final_message;
    const char *reasoning_effort; /* the request's, or NULL: a template that reads
                                     reasoning_effort gets it (kwargs win), another refuses it */
    time_t now;                   /* strftime_now's time; 0: the current time */
    const atomic_bool *cancel;    /* set by another thread: the render is abandoned
                                     (jinja_set_cancel); NULL: never */
    const chat_adapt *adapt;      /* the template's adapters (chat_prompt_render sets them);
                                     NULL: OpenAI's shapes as vLLM passes them */
} chat_request;

/* Compiles src as the main template (source and name say where it came
 * from); tool_use_src may be NULL. TPS_EINVAL/TPS_EUNSUP naming the
 * construct and line of a template that does not compile. Then renders a
 * sample chat (system, user, assistant, user; again with one tool when
 * the template reads tools) under the render limits: TPS_EINVAL naming
 * the bound when that render exceeds one (its own errors and
 * raise_exception do not count). */
int chat_prompt_init(chat_prompt *p, const char *src, size_t len, const char *tool_use_src,
                     size_t tool_use_len, chat_source source, const char *name, tps_err *err);
/* A built-in by name (chatml, llama2, llama3, mistral, mistral-v7,
 * mistral-v7-tekken, zephyr, gemma, phi3); TPS_EINVAL listing them for
 * another name. */
int chat_prompt_builtin(chat_prompt *p, const char *name, chat_source source, tps_err *err);
void chat_prompt_free(chat_prompt *p);
/* The template tps serve uses for a model file without
 * --chat-template-file: the built-in `name` when given, else the file's
 * own (with its tool_use variant), else ChatML (source CHAT_SRC_DEFAULT:
 * the caller warns); then chat_prompt_vocab. tps plan tokenizes chat
 * bodies through it, as the server does. */
int chat_prompt_for_model(chat_prompt *p, const gguf_file *f, const tokenizer *tok,
                          const char *name, tps_err *err);
/* The vocabulary's BOS and EOS texts and whether the tokenizer adds BOS,
 * which every render reads. */
int chat_prompt_vocab(chat_prompt *p, const tokenizer *tok, tps_err *err);
/* "GGUF tokenizer.chat_template", "file x.jinja", "built-in llama3",
 * "ChatML (the model file has no template)" */
const char *chat_prompt_describe(const chat_prompt *p, char *buf, size_t cap);

/* The tool-call syntax a template's text implies (markers), and whether
 * it is one tps parses. */
tool_format chat_tool_format(const char *text, size_t len, bool *known);

/* The reasoning syntax a template's text implies: harmony when it writes
 * "<|channel|>" and "<|message|>", thinking blocks when it writes
 * "</think>", else none. */
chat_reasoning chat_reasoning_of(const char *text, size_t len);

/* Memory one render may take (jinja_limits.max_memory); its other limits
 * are jinja_limits_default's. */
#define CHAT_RENDER_MAX_MEMORY (32u << 20)

/* Renders the prompt text into out. On failure 400-class errors fill
 * err: a template's raise_exception is its message as it is; status 500
 * only for TPS_ENOMEM. */
typedef struct chat_error {
    int status;
    const char *param; /* "messages", "chat_template_kwargs", ... */
    const char *code;  /* OpenAI's error code: "invalid_value" or "unsupported_parameter" */
    char msg[512];
} chat_error;
int chat_prompt_render(const chat_prompt *p, const chat_request *rq, sbuf *out, chat_error *err);

/* The pieces, for tests: a JSON value as a template value (objects keep
 * their key order, integers stay integers); and every variable of a
 * render set on r. */
jinja_val chat_json_value(jinja_run *r, const json_t *j);
/* chat_vars.c: e's status, param and message (fmt with a and b); TPS_EINVAL,
 * or TPS_ENOMEM for a status of 500 and over. */
int chat_fail(chat_error *e, int status, const char *param, const char *fmt, const char *a,
              const char *b);
int chat_request_vars(jinja_run *r, const chat_request *rq, const char *bos, const char *eos,
                      chat_error *err);

/* Sets p->adapt by sample renders of p's templates (and p->template_tools
 * where an adapter changes who writes the tool list); called once by
 * chat_prompt_init. */
void chat_adapt_detect(chat_prompt *p);

#endif
