/* The request allow-list and the typed getters every field is read with.
 * Each field a client may send is a row: the endpoints that take it,
 * whether tps acts on it (honoured), accepts it as a label that changes no
 * output, or refuses it unless its value asks for nothing, and the peer
 * that defines it. A key no row names is a 400 naming it (code
 * unknown_parameter); a refused one that asks for something is a 400
 * naming it with the reason (unsupported_parameter). So no field is ever
 * dropped without a word. docs/api.md prints the same table, and
 * tests/test_request_fields.c checks that it does.
 *
 * Not here: reading the honoured fields' values (the other openai_*.c). */
#include "server/api/openai_internal.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * The table
 * ------------------------------------------------------------------------- */

#define C   OAI_COMPLETION
#define H   OAI_CHAT
#define B   (OAI_COMPLETION | OAI_CHAT)
#define HON OAI_FIELD_HONOURED
#define LAB OAI_FIELD_LABEL
#define REF OAI_FIELD_REFUSED

#define OAI  "OpenAI"
#define VL   "vLLM"
#define LS   "llama-server"
#define VLS  "vLLM, llama-server"
#define OVL  "OpenAI, vLLM, llama-server"
#define TMPL "honoured through the chat template"

/* Sorted by name within each group only for reading; lookups scan. */
static const oai_field FIELDS[] = {
    /* OpenAI */
    {"model", B, LAB, OVL, NULL, "one model is served; responses carry its id"},
    {"prompt", C, HON, OVL, NULL, NULL},
    {"messages", H, HON, OVL, NULL, NULL},
    {"max_tokens", B, HON, OVL, NULL, NULL},
    {"max_completion_tokens", B, HON, OVL, NULL, NULL},
    {"temperature", B, HON, OVL, NULL, NULL},
    {"top_p", B, HON, OVL, NULL, NULL},
    {"n", B, HON, OVL, NULL, NULL},
    {"seed", B, HON, OVL, NULL, NULL},
    {"stop", B, HON, OVL, NULL, NULL},
    {"stream", B, HON, OVL, NULL, NULL},
    {"stream_options", B, HON, OVL, NULL, NULL},
    {"logit_bias", B, HON, OVL, NULL, NULL},
    {"logprobs", B, HON, OVL, NULL, NULL},
    {"top_logprobs", H, HON, OVL, NULL, NULL},
    {"frequency_penalty", B, HON, OVL, NULL, NULL},
    {"presence_penalty", B, HON, OVL, NULL, NULL},
    {"response_format", B, HON, OVL, "{\"type\":\"text\"}", NULL},
    {"tools", H, HON, OVL, NULL, NULL},
    {"tool_choice", H, HON, OVL, "\"none\"", NULL},
    {"parallel_tool_calls", H, HON, "OpenAI, vLLM", NULL, NULL},
    {"best_of", C, REF, "OpenAI, vLLM", "1",
     "best_of above n is not supported: choices are not ranked (use n)"},
    {"echo", B, REF, "OpenAI, vLLM", NULL,
     "echo (the prompt repeated in the output) is not supported"},
    {"suffix", C, REF, OAI, NULL,
     "suffix needs an insertion (fill-in-the-middle) model; none is served"},
    {"user", B, LAB, OAI, NULL, NULL},
    {"metadata", B, LAB, OAI, NULL, NULL},
    {"store", B, LAB, OAI, NULL, "tps stores no completion and has no endpoint to fetch one"},
    {"service_tier", B, LAB, OAI, NULL, NULL},
    {"prompt_cache_key", B, LAB, OAI, NULL, "prefix caching is automatic, keyed by tokens"},
    {"safety_identifier", B, LAB, OAI, NULL, NULL},
    {"functions", H, REF, OAI, NULL, "functions (the deprecated form) is not supported: use tools"},
    {"function_call", H, REF, OAI, "\"none\"",
     "function_call (the deprecated form) is not supported: use tool_choice"},
    {"audio", H, REF, OAI, NULL, "audio output is not supported"},
    {"modalities", H, REF, OAI, "[\"text\"]", "only text output is supported (modalities)"},
    {"prediction", H, REF, OAI, NULL, "predicted outputs are not supported"},
    {"verbosity", H, REF, OAI, NULL,
     "verbosity is not supported: ask for brevity in the prompt or bound max_tokens"},
    {"reasoning_effort", H, HON, "OpenAI, vLLM", NULL,
     "honoured through a chat template that reads it (gpt-oss's); else a 400"},
    {"web_search_options", H, REF, OAI, NULL, "web search is not supported"},
    /* vLLM */
    {"top_k", B, HON, VLS, NULL, NULL},
    {"min_p", B, HON, VLS, NULL, NULL},
    {"repetition_penalty", B, HON, VL, NULL, NULL},
    {"ignore_eos", B, HON, VLS, NULL, NULL},
    {"stop_token_ids", B, HON, VL, NULL, NULL},
    {"min_tokens", B, HON, VL, NULL, NULL},
    {"include_stop_str_in_output", B, HON, VL, NULL, NULL},
    {"skip_special_tokens", B, HON, VL, NULL, NULL},
    {"spaces_between_special_tokens", B, HON, VL, NULL, NULL},
    {"structured_outputs", B, HON, VL, NULL, NULL},
    {"guided_json", B, HON, VL, NULL, NULL},
    {"guided_regex", B, HON, VL, NULL, NULL},
    {"guided_choice", B, HON, VL, NULL, NULL},
    {"guided_grammar", B, HON, VL, NULL, NULL},
    {"guided_decoding_backend", B, LAB, VL, NULL, "tps has one grammar engine"},
    {"include_reasoning", H, HON, VL, NULL, NULL},
    {"thinking_token_budget", H, HON, VL, NULL, NULL},
    {"chat_template_kwargs", H, HON, VLS, NULL, TMPL},
    {"add_generation_prompt", H, HON, VLS, NULL, TMPL},
    {"continue_final_message", H, HON, VL, NULL, TMPL},
    {"request_id", B, LAB, VL, NULL, "responses carry tps's own id"},
    {"session_id", B, LAB, VL, NULL, NULL},
    {"conversation_id", B, LAB, "vLLM's multi-turn benchmark, LiteLLM, Open WebUI (issue 49)", NULL,
     "labels a turn of a conversation; the prefix cache finds the earlier turns"},
    {"add_special_tokens", B, REF, VL, NULL,
     "add_special_tokens is not supported: the prompt gets the special tokens the vocabulary "
     "(and chat template) ask for"},
    {"use_beam_search", B, REF, VL, NULL, "beam search is not supported"},
    {"length_penalty", B, REF, VL, "1",
     "length_penalty applies to beam search, which is not supported"},
    {"truncate_prompt_tokens", B, REF, VL, NULL,
     "truncate_prompt_tokens is not supported: a prompt too long is a 400"},
    {"truncation_side", B, REF, VL, NULL, "prompts are never truncated"},
    {"prompt_logprobs", B, REF, VL, NULL, "prompt_logprobs is not supported"},
    {"allowed_token_ids", B, REF, VL, NULL,
     "allowed_token_ids is not supported: use logit_bias (-100 bans a token) or a grammar"},
    {"bad_words", B, REF, VL, NULL, "bad_words is not supported: use logit_bias to ban tokens"},
    {"logprob_token_ids", B, REF, VL, NULL, "logprob_token_ids is not supported: use top_logprobs"},
    {"guided_whitespace_pattern", B, REF, VL, NULL, "guided_whitespace_pattern is not supported"},
    {"documents", H, REF, VL, NULL, "documents are not passed to the chat template"},
    {"chat_template", H, REF, VL, NULL,
     "a per-request chat template is not accepted: the server's is used"},
    {"mm_processor_kwargs", H, REF, VL, NULL, "only text input is supported"},
    {"media_io_kwargs", H, REF, VL, NULL, "only text input is supported"},
    {"priority", B, REF, VL, NULL,
     "priority scheduling is not supported: requests run first come, first served"},
    {"cache_salt", B, REF, VL, NULL,
     "cache_salt is not supported: the prefix cache is shared by every request"},
    {"return_tokens_as_token_ids", B, REF, VL, NULL, "return_tokens_as_token_ids is not supported"},
    {"return_token_ids", B, REF, VL, NULL,
     "return_token_ids is not supported: streamed chunks carry token_ids"},
    {"kv_transfer_params", B, REF, VL, NULL, "disaggregated serving is not supported"},
    {"vllm_xargs", B, REF, VL, NULL, "vllm_xargs is not supported"},
    {"logits_processors", B, REF, VL, NULL, "custom logits processors are not supported"},
    /* llama-server */
    {"n_predict", B, HON, LS, NULL, NULL},
    {"typical_p", B, HON, LS, NULL, NULL},
    {"repeat_penalty", B, HON, LS, NULL, NULL},
    {"repeat_last_n", B, HON, LS, NULL, NULL},
    {"grammar", B, HON, LS, NULL, NULL},
    {"json_schema", B, HON, LS, NULL, NULL},
    {"regex", B, HON, "tps", NULL, NULL},
    {"reasoning_format", H, HON, LS, NULL, NULL},
    {"thinking_budget_tokens", H, HON, LS, NULL, NULL},
    {"cache_prompt", B, LAB, LS, NULL, "the prefix cache is always on; the output is the same"},
    {"id_slot", B, REF, LS, "-1", "slots cannot be chosen"},
    {"n_probs", B, REF, LS, NULL, "n_probs is not supported: use logprobs / top_logprobs"},
    {"n_keep", B, REF, LS, NULL, "context shifting is not supported: a prompt too long is a 400"},
    {"n_discard", B, REF, LS, NULL, "context shifting is not supported"},
    {"n_indent", B, REF, LS, NULL, "n_indent is not supported"},
    {"n_cmpl", B, REF, LS, "1", "n_cmpl is not supported: use n"},
    {"min_keep", B, REF, LS, "0|1", "min_keep above 1 is not supported"},
    {"samplers", B, REF, LS, NULL, "the sampler order is fixed (docs/api.md)"},
    {"top_n_sigma", B, REF, LS, "-1", "top_n_sigma is not supported"},
    {"xtc_probability", B, REF, LS, NULL, "XTC sampling is not supported"},
    {"xtc_threshold", B, REF, LS, "0.1", "XTC sampling is not supported"},
    {"dynatemp_range", B, REF, LS, NULL, "dynamic temperature is not supported"},
    {"dynatemp_exponent", B, REF, LS, "1", "dynamic temperature is not supported"},
    {"dry_multiplier", B, REF, LS, NULL, "DRY sampling is not supported"},
    {"dry_base", B, REF, LS, "1.75", "DRY sampling is not supported"},
    {"dry_allowed_length", B, REF, LS, "2", "DRY sampling is not supported"},
    {"dry_penalty_last_n", B, REF, LS, "-1", "DRY sampling is not supported"},
    {"dry_sequence_breakers", B, REF, LS, NULL, "DRY sampling is not supported"},
    {"mirostat", B, REF, LS, NULL, "mirostat is not supported"},
    {"mirostat_tau", B, REF, LS, "5", "mirostat is not supported"},
    {"mirostat_eta", B, REF, LS, "0.1", "mirostat is not supported"},
    {"post_sampling_probs", B, REF, LS, NULL,
     "post_sampling_probs is not supported: logprobs are the raw model's"},
    {"timings_per_token", B, REF, LS, NULL, "timings come with each choice's last chunk only"},
    {"return_progress", B, REF, LS, NULL, "return_progress is not supported"},
    {"return_tokens", B, REF, LS, NULL,
     "return_tokens is not supported: streamed chunks carry token_ids"},
    {"response_fields", B, REF, LS, NULL, "response_fields is not supported"},
    {"lora", B, REF, LS, NULL, "LoRA adapters are not supported"},
    {"t_max_predict_ms", B, REF, LS, NULL, "t_max_predict_ms is not supported: bound max_tokens"},
    {"grammar_lazy", B, REF, LS, NULL, "lazy grammars are not supported"},
    {"grammar_triggers", B, REF, LS, NULL, "lazy grammars are not supported"},
    {"preserved_tokens", B, REF, LS, NULL, "preserved_tokens is not supported"},
};

const oai_field *oai_fields(size_t *n) {
    *n = sizeof FIELDS / sizeof FIELDS[0];
    return FIELDS;
}

/* Keys a message may carry (chat). name, tool_call_id and reasoning_content
 * reach the model through the chat template; the rest of an answer echoed
 * back (refusal, annotations, audio, function_call) only when empty. */
static const oai_field MESSAGE_FIELDS[] = {
    {"role", H, HON, OAI, NULL, NULL},
    {"content", H, HON, OAI, NULL, NULL},
    {"tool_calls", H, HON, OAI, NULL, NULL},
    {"name", H, HON, OAI, NULL, TMPL},
    {"tool_call_id", H, HON, OAI, NULL, TMPL},
    {"reasoning_content", H, HON, VLS, NULL, TMPL},
    {"reasoning", H, HON, VL, NULL, "vLLM's name for reasoning_content (opencode sends it back)"},
    {"refusal", H, REF, OAI, NULL,
     "a refusal in an earlier answer is not rendered: send it as content"},
    {"annotations", H, REF, OAI, NULL, "annotations are not rendered"},
    {"audio", H, REF, OAI, NULL, "audio is not supported"},
    {"function_call", H, REF, OAI, NULL,
     "function_call (the deprecated form) is not supported: use tool_calls"},
};

#undef C
#undef H
#undef B

/* ---------------------------------------------------------------------------
 * Checking a body against it
 * ------------------------------------------------------------------------- */

static bool falsy(json_t *v) {
    return json_is_null(v) || json_is_false(v) ||
           (json_is_number(v) && json_number_value(v) == 0.0) ||
           (json_is_string(v) && json_string_length(v) == 0) ||
           (json_is_array(v) && json_array_size(v) == 0) ||
           (json_is_object(v) && json_object_size(v) == 0);
}

/* v asks for nothing: null, or one of the row's neutral values (compared
 * as JSON; numbers by value), or falsy when the row names none. */
static bool neutral(const oai_field *f, json_t *v) {
    if (json_is_null(v)) return true;
    if (!f->neutral) return falsy(v);
    for (const char *p = f->neutral; *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        json_t *x = json_loadb(p, n, JSON_DECODE_ANY, NULL);
        bool same = x && (json_equal(v, x) || (json_is_number(v) && json_is_number(x) &&
                                               json_number_value(v) == json_number_value(x)));
        json_decref(x);
        if (same) return true;
        p += n + (bar ? 1 : 0);
    }
    return false;
}

static const oai_field *find(const oai_field *t, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) return &t[i];
    return NULL;
}

static const char *endpoint_of(oai_kind k) {
    return k == OAI_CHAT ? "/v1/chat/completions" : "/v1/completions";
}

/* An unknown key under --unknown-fields ignore: named in r->ignored (cut
 * with "..." when full) and counted. */
static void note_ignored(oai_request *r, const char *param) {
    size_t used = strlen(r->ignored), n = strlen(param);
    r->n_ignored++;
    if (used && !strcmp(r->ignored + used - 3, "...")) return;
    if (used + n + 2 + 3 < sizeof r->ignored) {
        snprintf(r->ignored + used, sizeof r->ignored - used, "%s%s", used ? "," : "", param);
        for (char *c = r->ignored + used; *c; c++) /* a header value: printable ASCII only */
            if (*c < 0x21 || *c > 0x7e) *c = '?';
    } else
        snprintf(r->ignored + used, sizeof r->ignored - used, "%s...", used ? "," : "");
}

/* One key of an object checked against table t; param is its name in a
 * 400 (the key, or "messages[3].foo"). kind 0: a dialect's table (every
 * row is its endpoint's). 1: an unknown key to drop (ignore_unknown). */
static int check_key(const oai_field *t, size_t n, const char *key, json_t *v, oai_kind kind,
                     const char *endpoint, const char *param, const oai_policy *p, oai_request *r,
                     oai_error *e) {
    const oai_field *f = find(t, n, key);
    if (!f && p && p->ignore_unknown && r) {
        note_ignored(r, param);
        return 1;
    }
    if (!f)
        return oai_error_set(e, 400, "invalid_request_error", param, "unknown_parameter",
                             "%s is not a field %s takes: tps refuses what it does not know "
                             "rather than ignore it (docs/api.md lists every field; tps serve "
                             "--unknown-fields ignore drops such fields)",
                             param, endpoint);
    if (kind && !(f->endpoints & kind) && !neutral(f, v))
        return oai_error_set(e, 400, "invalid_request_error", param, "unsupported_parameter",
                             "%s is a %s feature: use %s", param,
                             kind == OAI_CHAT ? "completions" : "chat",
                             endpoint_of(kind == OAI_CHAT ? OAI_COMPLETION : OAI_CHAT));
    if (f->kind == OAI_FIELD_REFUSED && !neutral(f, v))
        return oai_error_set(e, 400, "invalid_request_error", param, "unsupported_parameter", "%s",
                             f->why);
    return 0;
}

/* Every key of obj against t; unknown ones dropped under the policy. */
static int check_object(json_t *obj, const oai_field *t, size_t n, oai_kind kind,
                        const char *endpoint, const char *prefix, const oai_policy *p,
                        oai_request *r, oai_error *e) {
    const char *key;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(obj, tmp, key, v) {
        if (kind == OAI_COMPLETION && !*prefix && !strcmp(key, "best_of")) continue; /* vs n */
        char param[128];
        snprintf(param, sizeof param, "%s%.64s", prefix, key);
        int rc = check_key(t, n, key, v, kind, endpoint, param, p, r, e);
        if (rc < 0) return rc;
        if (rc == 1) json_object_del(obj, key);
    }
    return 0;
}

int oai_check_table(json_t *obj, const oai_field *t, size_t n, const char *endpoint,
                    const char *prefix, const oai_policy *p, oai_request *r, oai_error *e) {
    return check_object(obj, t, n, 0, endpoint, prefix, p, r, e);
}

static int check_messages(json_t *msgs, const oai_policy *p, oai_request *r, oai_error *e) {
    const size_t nm = sizeof MESSAGE_FIELDS / sizeof MESSAGE_FIELDS[0];
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m)) continue; /* parse_messages names it */
        char prefix[48];
        snprintf(prefix, sizeof prefix, "messages[%zu].", i);
        int rc =
            check_object(m, MESSAGE_FIELDS, nm, OAI_CHAT, endpoint_of(OAI_CHAT), prefix, p, r, e);
        if (rc) return rc;
    }
    return 0;
}

/* stream_options: include_usage (honoured); vLLM's continuous_usage_stats
 * only when false. */
static int check_stream_options(json_t *so, oai_error *e) {
    const char *key;
    json_t *v;
    json_object_foreach(so, key, v) {
        if (!strcmp(key, "include_usage")) continue;
        if (!strcmp(key, "continuous_usage_stats") && falsy(v)) continue;
        char param[96];
        snprintf(param, sizeof param, "stream_options.%.64s", key);
        return oai_error_set(e, 400, "invalid_request_error", param, "unsupported_parameter",
                             "%s is not supported: usage comes once, before [DONE] "
                             "(include_usage)",
                             param);
    }
    return 0;
}

/* best_of 1 (the default many clients send) or equal to n asks for
 * nothing to rank; above n it does. */
static int check_best_of(json_t *root, oai_error *e) {
    json_int_t best = 1, n = 1;
    int rc;
    if ((rc = oai_get_int(root, "best_of", &best, e)) < 0) return rc;
    if (rc == 1 || best == 1) return 0;
    if ((rc = oai_get_int(root, "n", &n, e)) < 0) return rc;
    if (best < n)
        return oai_error_set(e, 400, "invalid_request_error", "best_of", "invalid_value",
                             "best_of (%lld) must be at least n (%lld)", (long long)best,
                             (long long)n);
    if (best > n)
        return oai_error_set(e, 400, "invalid_request_error", "best_of", "unsupported_parameter",
                             "best_of above n is not supported: choices are not ranked (use n)");
    return 0;
}

int oai_check_fields(json_t *root, oai_kind kind, const oai_policy *p, oai_request *r,
                     oai_error *e) {
    int rc = check_object(root, FIELDS, sizeof FIELDS / sizeof FIELDS[0], kind, endpoint_of(kind),
                          "", p, r, e);
    if (rc) return rc;
    if (kind == OAI_COMPLETION && (rc = check_best_of(root, e))) return rc;
    json_t *msgs = json_object_get(root, "messages");
    if (kind == OAI_CHAT && json_is_array(msgs) && (rc = check_messages(msgs, p, r, e))) return rc;
    json_t *so = json_object_get(root, "stream_options");
    if (json_is_object(so) && (rc = check_stream_options(so, e))) return rc;
    return 0;
}
