/* Chat template families: the common formats (ChatML, Llama 2/3, Mistral,
 * Zephyr, Gemma, Phi-3, Mistral v7), recognised from a template's text by
 * marker strings (the way llama.cpp does it) for their end-of-turn text,
 * and as built-in templates (`--chat-template NAME`, and ChatML for a
 * model file with none): short Jinja sources rendered by src/jinja like
 * any model's template, without the BOS (the tokenizer adds it).
 *
 * Not here: rendering (chat_prompt.h), tokenizing, tools. */
#ifndef TPS_SERVER_CHAT_TEMPLATE_H
#define TPS_SERVER_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

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

/* The Jinja source of the built-in template of a family (ChatML for
 * CHAT_TMPL_UNKNOWN); static. */
const char *chat_tmpl_source(chat_tmpl t);

#endif
