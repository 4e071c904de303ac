/* The tool-call syntaxes, one row each (tools_internal.h says what a
 * field means), the markers in each chat template's text that say which
 * row it writes, and the request's tools as the parser keeps them. The
 * next model's syntax is a row here and a line in DETECT.
 *
 * Where the rows come from: how each template writes earlier calls into
 * its history (tests/data/templates/corpus.json's tool round trip) and
 * llama.cpp's common/chat.cpp for the ones whose template does not
 * (Granite 3.3, LFM2). Not here: reading, writing or forcing calls. */
#include <stdlib.h>
#include <string.h>

#include "server/tools/tools_internal.h"

#define HERMES_RESULT .res_open = "<tool_response>\n", .res_close = "\n</tool_response>"
#define JSON_CALL     .args = TOOL_ARGS_CALL, .name_key = "name", .args_key = "arguments"
/* Mistral's two forms answer alike and share their markers */
#define MISTRAL_COMMON                                                                             \
    .list = TOOL_LIST_MISTRAL,                                                                     \
    .res_open = "[TOOL_RESULTS] {\"content\": ", .res_close = "}[/TOOL_RESULTS]",                  \
    .res_json = true, .specials = {MISTRAL_CALLS, MISTRAL_ARGS}
/* DeepSeek V3 and V3.1 differ inside a call, not around it */
#define DS_COMMON                                                                                  \
    .sec_open = DS_CALLS_BEGIN, .sec_close = DS_CALLS_END, .args = TOOL_ARGS_OBJECT,               \
    HERMES_RESULT, .specials = {DS_CALLS_BEGIN, DS_CALLS_END, DS_CALL_BEGIN, DS_CALL_END, DS_SEP}
/* Hermes's calls; generic (a template no row recognises) writes them too */
#define HERMES_CALLS                                                                               \
    .call_open = "<tool_call>\n", .call_sep = "\n", .call_close = "\n</tool_call>", JSON_CALL,     \
    HERMES_RESULT, .specials = {"<tool_call>", "</tool_call>"}
/* a JSON list of calls inside a section, ", " between them */
#define JSON_LIST(open, close)                                                                     \
    .sec_open = open, .sec_close = close, .call_sep = ", ", JSON_CALL, HERMES_RESULT

static const tool_syntax ROWS[TOOL_FMT_COUNT] = {
    [TOOL_FMT_HERMES] = {.name = "hermes", HERMES_CALLS, .list = TOOL_LIST_HERMES},
    [TOOL_FMT_GENERIC] = {.name = "generic", HERMES_CALLS, .list = TOOL_LIST_GENERIC},
    [TOOL_FMT_LLAMA3] = {.name = "llama3",
                         .args = TOOL_ARGS_CALL,
                         .name_key = "name",
                         .args_key = "parameters",
                         .one_call = true,
                         .at_start = true,
                         .list = TOOL_LIST_LLAMA3,
                         .res_role = "ipython"},
    [TOOL_FMT_MISTRAL] = {.name = "mistral",
                          .sec_open = MISTRAL_CALLS " [",
                          .sec_close = "]",
                          .call_sep = ", ",
                          JSON_CALL,
                          .also = TOOL_FMT_MISTRAL_V11,
                          MISTRAL_COMMON},
    [TOOL_FMT_MISTRAL_V11] = {.name = "mistral-v11",
                              .call_open = MISTRAL_CALLS,
                              .name_close = MISTRAL_ARGS,
                              .args = TOOL_ARGS_OBJECT,
                              .also = TOOL_FMT_MISTRAL,
                              MISTRAL_COMMON},
    [TOOL_FMT_APRIEL] = {.name = "apriel",
                         JSON_LIST(APRIEL_OPEN "[", "]" APRIEL_CLOSE),
                         .specials = {APRIEL_OPEN, APRIEL_CLOSE}},
    [TOOL_FMT_DEEPSEEK] = {.name = "deepseek",
                           DS_COMMON,
                           .call_open = DS_CALL_BEGIN "function" DS_SEP,
                           .call_sep = "\n",
                           .name_close = "\n```json\n",
                           .call_close = "\n```" DS_CALL_END,
                           .also = TOOL_FMT_DEEPSEEK_V31},
    [TOOL_FMT_DEEPSEEK_V31] = {.name = "deepseek-v3.1",
                               DS_COMMON,
                               .call_open = DS_CALL_BEGIN,
                               .name_close = DS_SEP,
                               .call_close = DS_CALL_END,
                               .also = TOOL_FMT_DEEPSEEK},
    /* the model writes the channel form; the template's history the role
     * form; the text read is what harmony.h hands on as calls */
    [TOOL_FMT_HARMONY] = {.name = "harmony",
                          .call_open = "<|channel|>commentary " HARMONY_TO_FN,
                          .name_close = " <|constrain|>json" HARMONY_MESSAGE,
                          .args = TOOL_ARGS_OBJECT,
                          .one_call = true,
                          .gbnf_lead = "(\"<|channel|>analysis" HARMONY_MESSAGE
                                       "\" thought \"<|end|><|start|>assistant\")? ",
                          .gbnf_extra = "thought ::= ([^<] | \"<\" [^|])*\n",
                          .hist_open = "<|start|>assistant " HARMONY_TO_FN,
                          .hist_name_close = "<|channel|>commentary json" HARMONY_MESSAGE,
                          HERMES_RESULT},
    [TOOL_FMT_KIMI] = {.name = "kimi-k2",
                       .sec_open = KIMI_SECTION_BEGIN,
                       .sec_close = KIMI_SECTION_END,
                       .call_open = KIMI_CALL_BEGIN "functions.",
                       .name_close = ":",
                       .indexed = true,
                       .args_open = KIMI_ARGS_BEGIN,
                       .call_close = KIMI_CALL_END,
                       .args = TOOL_ARGS_OBJECT,
                       HERMES_RESULT,
                       .specials = {KIMI_SECTION_BEGIN, KIMI_SECTION_END, KIMI_CALL_BEGIN,
                                    KIMI_ARGS_BEGIN, KIMI_CALL_END}},
    [TOOL_FMT_FUNCTIONARY] = {.name = "functionary-v3.1",
                              .call_open = FUNC_OPEN,
                              .name_close = ">",
                              .call_close = FUNC_CLOSE,
                              .args = TOOL_ARGS_OBJECT,
                              HERMES_RESULT},
    /* Qwen3-Coder, Qwen3.5, Nemotron 3, Step 3.5 */
    [TOOL_FMT_QWEN3_CODER] = {.name = "qwen3-coder",
                              .call_open = "<tool_call>\n<function=",
                              .name_close = ">\n",
                              .call_sep = "\n",
                              .call_close = "</function>\n</tool_call>",
                              .args = TOOL_ARGS_PARAMS,
                              .p_open = "<parameter=",
                              .p_mid = ">\n",
                              .p_close = "\n</parameter>\n",
                              HERMES_RESULT,
                              .specials = {"<tool_call>", "</tool_call>"}},
    [TOOL_FMT_SEED_OSS] = {.name = "seed-oss",
                           .call_open = "<seed:tool_call>\n<function=",
                           .name_close = ">\n",
                           .call_sep = "\n",
                           .call_close = "</function>\n</seed:tool_call>",
                           .args = TOOL_ARGS_PARAMS,
                           .p_open = "<parameter=",
                           .p_mid = ">",
                           .p_close = "</parameter>\n",
                           .res_role = "tool",
                           .specials = {"<seed:tool_call>", "</seed:tool_call>"}},
    /* GLM 4.5 to 4.7 (4.7 without the newlines: read either way) */
    [TOOL_FMT_GLM] = {.name = "glm",
                      .call_open = "<tool_call>",
                      .name_close = "\n",
                      .call_sep = "\n",
                      .call_close = "</tool_call>",
                      .args = TOOL_ARGS_PARAMS,
                      .p_open = "<arg_key>",
                      .p_mid = "</arg_key>\n<arg_value>",
                      .p_close = "</arg_value>\n",
                      HERMES_RESULT,
                      .specials = {"<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
                                   "<arg_value>", "</arg_value>"}},
    [TOOL_FMT_MINIMAX] = {.name = "minimax-m2",
                          .sec_open = "<minimax:tool_call>\n",
                          .sec_close = "</minimax:tool_call>",
                          .call_open = "<invoke name=\"",
                          .name_close = "\">\n",
                          .call_close = "</invoke>\n",
                          .args = TOOL_ARGS_PARAMS,
                          .p_open = "<parameter name=\"",
                          .p_mid = "\">",
                          .p_close = "</parameter>\n",
                          .res_open = "<response>",
                          .res_close = "</response>",
                          .specials = {"<minimax:tool_call>", "</minimax:tool_call>"}},
    [TOOL_FMT_DEEPSEEK_V32] = {.name = "deepseek-v3.2",
                               .sec_open = DSML "function_calls>\n",
                               .sec_close = "</｜DSML｜function_calls>",
                               .call_open = DSML "invoke name=\"",
                               .name_close = "\">\n",
                               .call_close = "</｜DSML｜invoke>\n",
                               .args = TOOL_ARGS_PARAMS,
                               .p_open = DSML "parameter name=\"",
                               .p_mid = "\" string=\"true\">",
                               .p_mid_json = "\" string=\"false\">",
                               .p_close = "</｜DSML｜parameter>\n",
                               .res_open = "<result>",
                               .res_close = "</result>"},
    [TOOL_FMT_NEMOTRON_V2] = {.name = "nemotron-nano-v2",
                              JSON_LIST("<TOOLCALL>[", "]</TOOLCALL>"),
                              .specials = {"<TOOLCALL>", "</TOOLCALL>"}},
    /* [{"NAME": {...}}, ...] */
    [TOOL_FMT_APERTUS] = {.name = "apertus",
                          .sec_open = "<|tools_prefix|>[",
                          .sec_close = "]<|tools_suffix|>",
                          .call_open = "{\"",
                          .name_close = "\": ",
                          .call_sep = ", ",
                          .call_close = "}",
                          .args = TOOL_ARGS_OBJECT,
                          .specials = {"<|tools_prefix|>", "<|tools_suffix|>"}},
    [TOOL_FMT_COMMAND_R7B] = {.name = "command-r7b",
                              .sec_open = "<|START_ACTION|>[\n    ",
                              .sec_close = "\n]<|END_ACTION|>",
                              .call_sep = ",\n    ",
                              .args = TOOL_ARGS_CALL,
                              .id_key = "tool_call_id",
                              .name_key = "tool_name",
                              .args_key = "parameters",
                              .specials = {"<|START_ACTION|>", "<|END_ACTION|>"}},
    [TOOL_FMT_COMMAND_R_PLUS] = {.name = "command-r-plus",
                                 .sec_open = "Action: ```json\n[\n",
                                 .sec_close = "\n]\n```",
                                 .call_sep = ",\n",
                                 .args = TOOL_ARGS_CALL,
                                 .name_key = "tool_name",
                                 .args_key = "parameters"},
    [TOOL_FMT_GRANITE] = {.name = "granite-3.3",
                          JSON_LIST("<|tool_call|>[", "]"),
                          .specials = {"<|tool_call|>"}},
    [TOOL_FMT_LFM2] = {.name = "lfm2",
                       JSON_LIST("<|tool_call_start|>[", "]<|tool_call_end|>"),
                       .specials = {"<|tool_call_start|>", "<|tool_call_end|>"}},
    [TOOL_FMT_GIGACHAT3] = {.name = "gigachat3",
                            .call_open = "<|message_sep|>\n\nfunction call<|role_sep|>\n",
                            JSON_CALL,
                            .one_call = true,
                            .specials = {"<|message_sep|>", "<|role_sep|>"}},
    [TOOL_FMT_GIGACHAT31] = {.name = "gigachat3.1",
                             .call_open = "<|function_call|>",
                             JSON_CALL,
                             .one_call = true,
                             .specials = {"<|function_call|>"}},
    [TOOL_FMT_SOLAR_OPEN] = {.name = "solar-open",
                             .sec_open = "<|tool_calls|>",
                             .sec_close = "<|calls|>",
                             .call_open = "<|tool_call:begin|>",
                             .id_close = "<|tool_call:name|>",
                             .name_close = "<|tool_call:args|>",
                             .call_close = "<|tool_call:end|>",
                             .args = TOOL_ARGS_OBJECT,
                             .specials = {"<|tool_calls|>", "<|calls|>", "<|tool_call:begin|>",
                                          "<|tool_call:name|>", "<|tool_call:args|>",
                                          "<|tool_call:end|>"}},
    /* the generation prompt ends with the first ">>>" */
    [TOOL_FMT_FUNCTIONARY_V32] = {.name = "functionary-v3.2",
                                  .call_open = ">>>",
                                  .name_close = "\n",
                                  .args = TOOL_ARGS_OBJECT,
                                  .res_role = "tool"},
    [TOOL_FMT_FIREFUNCTION] = {.name = "firefunction-v2", JSON_LIST(" functools[", "]")},
    /* call:NAME{key:<|"|>text<|"|>,n:1.5} */
    [TOOL_FMT_GEMMA4] = {.name = "gemma4",
                         .call_open = "<|tool_call>call:",
                         .name_close = "{",
                         .call_close = "}<tool_call|>",
                         .args = TOOL_ARGS_PARAMS,
                         .p_open = "",
                         .p_mid = ":",
                         .p_close = "",
                         .p_sep = ",",
                         .q_open = "<|\"|>",
                         .q_close = "<|\"|>",
                         .res_role = "tool",
                         .specials = {"<|tool_call>", "<tool_call|>", "<|\"|>"}},
};

const tool_syntax *tools_row(tool_format f) {
    return &ROWS[(unsigned)f < TOOL_FMT_COUNT ? f : TOOL_FMT_HERMES];
}

const char *tools_format_name(tool_format f) {
    return tools_row(f)->name;
}

const char *const *tools_marker_texts(tool_format f) {
    return tools_row(f)->specials;
}

/* Which row a template writes: the first line whose every need is in its
 * text and no veto is. Order matters where one syntax holds another's
 * markers (Seed-OSS's <function= inside <seed:tool_call>, Qwen3-Coder's
 * inside <tool_call>). */
static const struct {
    tool_format f;
    const char *need[3], *veto[2];
} DETECT[] = {
    {TOOL_FMT_HARMONY, {"<|channel|>", "<|message|>"}, {NULL}},
    {TOOL_FMT_KIMI, {"<|tool_call_begin|>"}, {NULL}},
    {TOOL_FMT_DEEPSEEK_V32, {"｜DSML｜"}, {NULL}},
    {TOOL_FMT_DEEPSEEK, {DS_CALLS_BEGIN, "```json"}, {NULL}},
    {TOOL_FMT_DEEPSEEK_V31, {DS_CALLS_BEGIN}, {NULL}},
    {TOOL_FMT_SEED_OSS, {"<seed:tool_call>"}, {NULL}},
    {TOOL_FMT_QWEN3_CODER, {"<tool_call>", "<function=", "<parameter="}, {NULL}},
    {TOOL_FMT_GLM, {"<tool_call>", "<arg_key>"}, {NULL}},
    {TOOL_FMT_MINIMAX, {"<minimax:tool_call>"}, {NULL}},
    {TOOL_FMT_GEMMA4, {"<|tool_call>"}, {NULL}},
    {TOOL_FMT_APRIEL, {"<tool_calls>["}, {NULL}},
    {TOOL_FMT_HERMES, {"<tool_call>"}, {NULL}},
    {TOOL_FMT_FUNCTIONARY, {"<function="}, {NULL}},
    {TOOL_FMT_MISTRAL_V11, {MISTRAL_CALLS, MISTRAL_ARGS}, {NULL}},
    {TOOL_FMT_MISTRAL, {MISTRAL_CALLS}, {NULL}},
    {TOOL_FMT_NEMOTRON_V2, {"<TOOLCALL>"}, {NULL}},
    {TOOL_FMT_APERTUS, {"<|tools_prefix|>"}, {NULL}},
    {TOOL_FMT_COMMAND_R7B, {"<|START_ACTION|>"}, {NULL}},
    {TOOL_FMT_COMMAND_R_PLUS, {"directly-answer", "Action:"}, {NULL}},
    {TOOL_FMT_GRANITE, {"<|tool_call|>"}, {NULL}},
    {TOOL_FMT_LFM2, {"List of tools:"}, {NULL}},
    {TOOL_FMT_GIGACHAT31, {"<|function_call|>"}, {NULL}},
    {TOOL_FMT_GIGACHAT3, {"'function call'", "<|role_sep|>"}, {NULL}},
    {TOOL_FMT_SOLAR_OPEN, {"<|tool_call:begin|>"}, {NULL}},
    {TOOL_FMT_FUNCTIONARY_V32, {">>>", "recipient"}, {NULL}},
    {TOOL_FMT_FIREFUNCTION, {"functools["}, {NULL}},
    {TOOL_FMT_LLAMA3, {"<|python_tag|>"}, {NULL}},
    {TOOL_FMT_LLAMA3, {"<|start_header_id|>", "\"parameters\""}, {NULL}},
};

static bool has(const char *text, size_t len, const char *needle) {
    return text && memmem(text, len, needle, strlen(needle)) != NULL;
}

tool_format tools_detect(const char *text, size_t len, bool *known) {
    *known = true;
    for (size_t i = 0; i < sizeof DETECT / sizeof DETECT[0]; i++) {
        bool ok = true;
        for (size_t k = 0; k < 3 && DETECT[i].need[k] && ok; k++)
            ok = has(text, len, DETECT[i].need[k]);
        for (size_t k = 0; k < 2 && DETECT[i].veto[k] && ok; k++)
            ok = !has(text, len, DETECT[i].veto[k]);
        if (ok) return DETECT[i].f;
    }
    *known = false;
    return TOOL_FMT_GENERIC;
}

/* ---------------------------------------------------------------------------
 * The request's tools, kept for the parser
 * ------------------------------------------------------------------------- */

struct tool_set {
    size_t n;
    char **names;
    json_t **params; /* each tool's parameters schema (a reference), or NULL */
};

tool_set *tools_set_new(const oai_tool *tools, size_t n) {
    tool_set *ts = calloc(1, sizeof *ts);
    if (!ts) return NULL;
    ts->names = calloc(n + 1, sizeof *ts->names);
    ts->params = calloc(n + 1, sizeof *ts->params);
    if (!ts->names || !ts->params) goto fail;
    for (; ts->n < n; ts->n++) {
        ts->names[ts->n] = strdup(tools[ts->n].name ? tools[ts->n].name : "");
        if (!ts->names[ts->n]) goto fail;
        ts->params[ts->n] =
            tools[ts->n].parameters ? json_deep_copy(tools[ts->n].parameters) : NULL;
    }
    return ts;
fail:
    tools_set_free(ts);
    return NULL;
}

void tools_set_free(tool_set *ts) {
    if (!ts) return;
    for (size_t i = 0; i < ts->n; i++) {
        free(ts->names[i]);
        json_decref(ts->params[i]);
    }
    free(ts->names);
    free(ts->params);
    free(ts);
}

const json_t *tools_set_params(const tool_set *ts, const char *fn, size_t fn_len, bool *offered) {
    *offered = false;
    for (size_t i = 0; ts && i < ts->n; i++)
        if (strlen(ts->names[i]) == fn_len && !memcmp(ts->names[i], fn, fn_len)) {
            *offered = true;
            return ts->params[i];
        }
    return NULL;
}

int tools_set_param_kind(const tool_set *ts, const char *fn, size_t fn_len, const char *key,
                         size_t key_len) {
    for (size_t i = 0; ts && i < ts->n; i++) {
        if (strlen(ts->names[i]) != fn_len || memcmp(ts->names[i], fn, fn_len)) continue;
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(ts->params[i], "properties"), k, v) {
            if (strlen(k) != key_len || memcmp(k, key, key_len)) continue;
            json_t *type = json_object_get(v, "type");
            if (json_is_string(type)) return !strcmp(json_string_value(type), "string");
            if (json_object_get(v, "enum") || json_object_get(v, "const")) return -1;
            return 0;
        }
    }
    return -1;
}
