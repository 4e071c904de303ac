/* Chat templates: a list of {role, content} messages -> the prompt text a
 * chat model was trained on. The common templates are recognised from the
 * Jinja text in a GGUF's tokenizer.chat_template by marker strings (the way
 * llama.cpp does it) and rendered by hand-written C, never by a Jinja
 * interpreter. The rendered text carries no BOS: the caller tokenizes it
 * with TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL, which adds BOS when
 * the vocabulary asks for it and turns "<|im_end|>"-style markers into their
 * control tokens.
 *
 * Not here: tokenizing, tools/function calling, multimodal content. */
#ifndef TPS_SERVER_CHAT_TEMPLATE_H
#define TPS_SERVER_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/sbuf.h"
#include "base/error.h"

typedef enum chat_tmpl {
    CHAT_TMPL_UNKNOWN = 0,
    CHAT_TMPL_CHATML,
    CHAT_TMPL_LLAMA2,
    CHAT_TMPL_LLAMA3,
    CHAT_TMPL_MISTRAL,
    CHAT_TMPL_ZEPHYR,
    CHAT_TMPL_GEMMA,
    CHAT_TMPL_PHI3,
    CHAT_TMPL_MISTRAL_V7, /* [SYSTEM_PROMPT] ... [/SYSTEM_PROMPT][INST] ... [/INST]: Mistral Large
                             2411 */
    CHAT_TMPL_MISTRAL_V7_TEKKEN, /* the same without the space after each opening: Mistral Small 3
                                  */
    CHAT_TMPL_COUNT
} chat_tmpl;

typedef struct chat_msg {
    const char *role; /* "system", "user", "assistant" (others render as given) */
    const char *content;
    size_t content_len;
} chat_msg;

/* The template whose markers the Jinja text contains; CHAT_TMPL_UNKNOWN
 * when text is NULL, empty or unrecognised. */
chat_tmpl chat_tmpl_detect(const char *text, size_t len);
/* By name ("chatml", "llama2", "llama3", "mistral", "mistral-v7", "zephyr",
 * "gemma", "phi3"; a few aliases such as "llama-3"); CHAT_TMPL_UNKNOWN if none. */
chat_tmpl chat_tmpl_from_name(const char *name);
const char *chat_tmpl_name(chat_tmpl t);
/* The text that ends an assistant turn ("<|im_end|>", "<|eot_id|>", "</s>"):
 * a stop string when the vocabulary has no single token for it. */
const char *chat_tmpl_eot(chat_tmpl t);

/* Appends the prompt for msgs[0..n) to out, ending with the assistant's
 * opening when add_assistant. TPS_EINVAL (with the message's index) for a
 * role the template cannot place; CHAT_TMPL_UNKNOWN renders as ChatML. */
int chat_tmpl_render(chat_tmpl t, const chat_msg *msgs, size_t n, bool add_assistant, sbuf *out,
                     tps_err *err);

#endif
