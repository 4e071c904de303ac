/* Chat template families (see chat_template.h): recognition by markers,
 * their end-of-turn text, and the built-in templates in Jinja. */
#include "server/chat/chat_template.h"

#include <string.h>
#include <strings.h>

/* Each family's name and the text that ends its turns, a row a family. */
static const struct {
    const char *name, *eot;
} families[CHAT_TMPL_COUNT] = {
    [CHAT_TMPL_UNKNOWN] = {"unknown", "<|im_end|>"},
    [CHAT_TMPL_CHATML] = {"chatml", "<|im_end|>"},
    [CHAT_TMPL_LLAMA2] = {"llama2", "</s>"},
    [CHAT_TMPL_LLAMA3] = {"llama3", "<|eot_id|>"},
    [CHAT_TMPL_MISTRAL] = {"mistral", "</s>"},
    [CHAT_TMPL_ZEPHYR] = {"zephyr", "</s>"},
    [CHAT_TMPL_GEMMA] = {"gemma", "<end_of_turn>"},
    [CHAT_TMPL_PHI3] = {"phi3", "<|end|>"},
    [CHAT_TMPL_MISTRAL_V7] = {"mistral-v7", "</s>"},
    [CHAT_TMPL_MISTRAL_V7_TEKKEN] = {"mistral-v7-tekken", "</s>"},
};

const char *chat_tmpl_name(chat_tmpl t) {
    return (unsigned)t < CHAT_TMPL_COUNT ? families[t].name : "unknown";
}

const char *chat_tmpl_eot(chat_tmpl t) {
    return families[(unsigned)t < CHAT_TMPL_COUNT ? t : CHAT_TMPL_CHATML].eot;
}

chat_tmpl chat_tmpl_from_name(const char *name) {
    static const struct {
        const char *alias;
        chat_tmpl t;
    } aliases[] = {
        {"llama-2", CHAT_TMPL_LLAMA2},     {"llama-3", CHAT_TMPL_LLAMA3}, {"phi-3", CHAT_TMPL_PHI3},
        {"mistral-v1", CHAT_TMPL_MISTRAL}, {"gemma2", CHAT_TMPL_GEMMA},
    };
    if (!name) return CHAT_TMPL_UNKNOWN;
    for (int t = 1; t < CHAT_TMPL_COUNT; t++)
        if (!strcasecmp(name, families[t].name)) return (chat_tmpl)t;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcasecmp(name, aliases[i].alias)) return aliases[i].t;
    return CHAT_TMPL_UNKNOWN;
}

static bool has(const char *text, size_t len, const char *needle) {
    return memmem(text, len, needle, strlen(needle)) != NULL;
}

chat_tmpl chat_tmpl_detect(const char *text, size_t len) {
    if (!text || !len) return CHAT_TMPL_UNKNOWN;
    /* Most specific markers first: Phi-3 and Zephyr share <|user|>. */
    if (has(text, len, "<|im_start|>")) return CHAT_TMPL_CHATML;
    if (has(text, len, "<|start_header_id|>") && has(text, len, "<|end_header_id|>"))
        return CHAT_TMPL_LLAMA3;
    if (has(text, len, "<start_of_turn>")) return CHAT_TMPL_GEMMA;
    if (has(text, len, "<|assistant|>") && has(text, len, "<|end|>")) return CHAT_TMPL_PHI3;
    if (has(text, len, "<|user|>") && has(text, len, "</s>")) return CHAT_TMPL_ZEPHYR;
    /* v7 puts a space after each opening marker; Mistral Small 3's
     * (v7-tekken, llama.cpp detects it as v7) does not */
    if (has(text, len, "[SYSTEM_PROMPT]"))
        return has(text, len, "[SYSTEM_PROMPT] ") || has(text, len, "[INST] ")
                   ? CHAT_TMPL_MISTRAL_V7
                   : CHAT_TMPL_MISTRAL_V7_TEKKEN;
    if (has(text, len, "[INST]"))
        return has(text, len, "<<SYS>>") ? CHAT_TMPL_LLAMA2 : CHAT_TMPL_MISTRAL;
    return CHAT_TMPL_UNKNOWN;
}

/* ---------------------------------------------------------------------------
 * The built-in templates, in Jinja (rendered by src/jinja like any other):
 * llama.cpp's llm_chat_apply_template for each family, without the BOS
 * (the tokenizer adds it).
 * ------------------------------------------------------------------------- */

static const char CHATML[] =
    "{%- for m in messages -%}{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' -}}"
    "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}";

static const char LLAMA3[] =
    "{%- for m in messages -%}{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\n\n' + "
    "m.content + '<|eot_id|>' -}}{%- endfor -%}{%- if add_generation_prompt -%}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}{%- endif -%}";

/* Llama 2: [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant}</s><s>[INST] ...
 * Mistral (v1): the same turns, the system text before the next user's. */
#define INST_TEMPLATE(NAME, SYSTEM)                                                                \
    "{%- set ns = namespace(inst=false, sys=false) -%}{%- for m in messages -%}"                   \
    "{%- if m.role == 'system' -%}{%- if not ns.inst -%}{{- '[INST] ' -}}{%- endif -%}"            \
    "{%- set ns.inst = true -%}{%- set ns.sys = true -%}{{- " SYSTEM " -}}"                        \
    "{%- elif m.role == 'user' -%}{%- if not ns.inst -%}{{- '[INST] ' -}}{%- endif -%}"            \
    "{%- set ns.inst = false -%}{%- set ns.sys = false -%}{{- m.content + ' [/INST]' -}}"          \
    "{%- elif m.role == 'assistant' -%}{%- if ns.inst -%}{{- raise_exception('messages[' ~ "       \
    "loop.index0 ~ ']: an assistant message cannot follow a system message directly in the " NAME  \
    " template') -}}{%- endif -%}{{- ' ' + m.content + '</s>' -}}"                                 \
    "{%- if not loop.last -%}{{- '<s>' -}}{%- endif -%}"                                           \
    "{%- else -%}{{- raise_exception('messages[' ~ loop.index0 ~ '].role \\'' ~ m.role ~ "         \
    "'\\' is not supported by the " NAME " template') -}}{%- endif -%}{%- endfor -%}"              \
    "{%- if ns.sys -%}{{- ' [/INST]' -}}{%- endif -%}"

static const char LLAMA2[] = INST_TEMPLATE("llama2", "'<<SYS>>\n' + m.content + '\n<</SYS>>\n\n'");
static const char MISTRAL[] = INST_TEMPLATE("mistral", "m.content + '\n\n'");

/* Zephyr and Phi-3: <|role|>\n{content}{end}\n */
#define TAG_TEMPLATE(END)                                                                          \
    "{%- for m in messages -%}{{- '<|' + m.role + '|>\n' + m.content + '" END "\n' -}}"            \
    "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|assistant|>\n' -}}{%- endif -%}"

static const char ZEPHYR[] = TAG_TEMPLATE("</s>");
static const char PHI3[] = TAG_TEMPLATE("<|end|>");

/* Gemma has no system role: the system messages since the last user turn
 * are joined and open the next user turn (llama.cpp does the same). */
static const char GEMMA[] =
    "{%- set ns = namespace(sys='', has=false) -%}{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}{%- set ns.sys = ns.sys + m.content -%}{%- set ns.has = true -%}"
    "{%- else -%}{{- '<start_of_turn>' + ('model' if m.role == 'assistant' else m.role) + '\n' -}}"
    "{%- if m.role != 'assistant' -%}{%- if ns.has -%}{{- ns.sys + '\n\n' -}}{%- endif -%}"
    "{%- set ns.sys = '' -%}{%- set ns.has = false -%}{%- endif -%}"
    "{{- m.content + '<end_of_turn>\n' -}}{%- endif -%}{%- endfor -%}"
    "{%- if ns.has -%}{{- '<start_of_turn>user\n' + ns.sys + '<end_of_turn>\n' -}}{%- endif -%}"
    "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}";

/* Mistral's v7: every turn keeps its own markers, with the one space
 * llama.cpp's "mistral-v7" puts after each opening (SP " ") or none
 * ("mistral-v7-tekken": Mistral Small 3's own template). */
#define V7_TEMPLATE(SP)                                                                            \
    "{%- for m in messages -%}{%- if m.role == 'system' -%}"                                       \
    "{{- '[SYSTEM_PROMPT]" SP "' + m.content + '[/SYSTEM_PROMPT]' -}}"                             \
    "{%- elif m.role == 'user' -%}{{- '[INST]" SP "' + m.content + '[/INST]' -}}"                  \
    "{%- else -%}{{- '" SP "' + m.content + '</s>' -}}{%- endif -%}{%- endfor -%}"

static const char MISTRAL_V7[] = V7_TEMPLATE(" ");
static const char MISTRAL_V7_TEKKEN[] = V7_TEMPLATE("");

const char *chat_tmpl_source(chat_tmpl t) {
    static const char *const src[CHAT_TMPL_COUNT] = {
        [CHAT_TMPL_UNKNOWN] = CHATML,        [CHAT_TMPL_CHATML] = CHATML,
        [CHAT_TMPL_LLAMA2] = LLAMA2,         [CHAT_TMPL_LLAMA3] = LLAMA3,
        [CHAT_TMPL_MISTRAL] = MISTRAL,       [CHAT_TMPL_ZEPHYR] = ZEPHYR,
        [CHAT_TMPL_GEMMA] = GEMMA,           [CHAT_TMPL_PHI3] = PHI3,
        [CHAT_TMPL_MISTRAL_V7] = MISTRAL_V7, [CHAT_TMPL_MISTRAL_V7_TEKKEN] = MISTRAL_V7_TEKKEN,
    };
    return (unsigned)t < CHAT_TMPL_COUNT ? src[t] : CHATML;
}
