/* `tps model info` and `tps model make`: argument parsing and printing only;
 * the GGUF and Llama logic lives in src/model. */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opt.h"
#include "model/gguf.h"
#include "model/llama_config.h"
#include "model/quant_mix.h"
#include "server/chat/chat_prompt.h"

typedef struct info_cli {
    const char *file_buf[2]; /* one file; a second is reported, not taken */
    opt_list files;
    bool json;
} info_cli;

static const opt_row info_rows[] = {
    {"--json", .kind = OPT_FLAG, .off = offsetof(info_cli, json),
     .help = "print one JSON object instead of the table"},
    {.kind = OPT_REST, .off = offsetof(info_cli, files)},
    {0},
};

static const opt_cmd info_cmd = {
    .prog = "tps model info",
    .usage = "usage: tps model info FILE.gguf [--json]\n"
             "\n"
             "Prints a GGUF file's architecture, parameter count, file size, llama.cpp file\n"
             "type (q4_k_m, ...), bits per weight, its mix of tensor types (count, bytes,\n"
             "parameters and bits per weight of each), context length, embedding and FFN sizes, "
             "layers,\n"
             "heads and KV heads, RoPE base, tokenizer model and vocabulary size, BOS/EOS\n"
             "ids and whether it carries a chat template.\n"
             "\n",
    .rows = info_rows,
};

/* Token-id keys store u32; 4294967295 (-1) means "none". */
static json_t *token_id_json(const gguf_file *f, const char *key) {
    int64_t v;
    if (gguf_get_i64(f, key, &v) != 0 || v < 0 || v >= 0xffffffffLL) return json_null();
    return json_integer(v);
}

static json_t *str_json(const gguf_file *f, const char *key) {
    gguf_str s;
    if (gguf_get_str(f, key, &s) != 0) return json_null();
    return json_stringn(s.ptr, s.len);
}

static void add_int(json_t *o, const char *key, json_int_t v) {
    json_object_set_new(o, key, json_integer(json_integer_value(json_object_get(o, key)) + v));
}

/* general.file_type by llama.cpp's name for it ("q5_k_m"), the number when
 * tps does not know it, null when absent. */
static json_t *file_type_json(const gguf_file *f) {
    int64_t ft;
    if (gguf_get_i64(f, "general.file_type", &ft) != 0 || ft < 0 || ft > 0xffff) return json_null();
    const quant_ftype *q = quant_ftype_by_number((uint32_t)ft);
    return q ? json_string(q->name) : json_integer(ft);
}

/* Per tensor type: tensors, bytes, parameters and bits per weight; the
 * totals of parameters and bytes into *params and *bytes. */
static json_t *tensor_types_json(const gguf_file *f, uint64_t *params, uint64_t *bytes) {
    json_t *types = json_object();
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        *params += t->n_elements;
        const char *tn = ggml_type_get(t->type)->name;
        json_t *e = json_object_get(types, tn);
        if (!e) {
            e = json_object();
            json_object_set_new(e, "tensors", json_integer(0));
            json_object_set_new(e, "bytes", json_integer(0));
            json_object_set_new(e, "parameters", json_integer(0));
            json_object_set_new(types, tn, e);
        }
        add_int(e, "tensors", 1);
        add_int(e, "bytes", (json_int_t)t->nbytes);
        add_int(e, "parameters", (json_int_t)t->n_elements);
        *bytes += t->nbytes;
    }
    const char *tn;
    json_t *e;
    json_object_foreach(types, tn, e) {
        const double n = (double)json_integer_value(json_object_get(e, "parameters"));
        json_object_set_new(
            e, "bits_per_weight",
            json_real(n > 0 ? 8.0 * (double)json_integer_value(json_object_get(e, "bytes")) / n
                            : 0));
    }
    return types;
}

/* KV bytes a token adds (F16 cache, tps's default: K and V of every layer
 * that stores them, or latent attention's one latent row, beside what its
 * decompressed heads would take), and a hybrid stack's linear layers, their
 * per-sequence state, and the MTP blocks it carries. */
static void add_memory_shape(json_t *o, const llama_config *c, const gguf_file *f) {
    uint32_t n_rec = 0;
    for (uint32_t l = 0; l < c->n_layers; l++)
        n_rec += (uint32_t)llama_config_is_recurrent(c, l);
    /* F16: 2 bytes an element; Gemma 4's shared layers store none */
    json_object_set_new(o, "kv_bytes_per_token",
                        json_integer((json_int_t)(2ull * llama_config_kv_elems(c))));
    if (c->n_kv_shared) json_object_set_new(o, "kv_shared_layers", json_integer(c->n_kv_shared));
    if (c->arch_info->gemma4) { /* the sliding layers' own heads */
        json_object_set_new(o, "head_dim_swa", json_integer(c->head_dim_swa));
        json_object_set_new(o, "kv_heads_swa", json_integer(c->n_kv_heads_swa));
    }
    if (c->kv_lora_rank) {
        json_object_set_new(o, "kv_lora_rank", json_integer(c->kv_lora_rank));
        json_object_set_new(o, "q_lora_rank", json_integer(c->q_lora_rank));
        json_object_set_new(
            o, "kv_bytes_per_token_decompressed",
            json_integer((json_int_t)(2ull * c->n_heads * (c->mla_k + c->mla_v) * c->n_layers)));
    }
    if (!c->arch_info->hybrid && !c->n_nextn) return;
    if (c->arch_info->hybrid) {
        json_object_set_new(o, "linear_attention_layers", json_integer(n_rec));
        json_object_set_new(
            o, "state_bytes_per_sequence",
            json_integer((json_int_t)(n_rec * llama_config_state_floats(c) * sizeof(float))));
    }
    uint64_t mtp = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        const uint32_t layer = llama_tensor_block(t->name.ptr, t->name.len);
        if (layer != UINT32_MAX && layer >= c->n_layers) mtp += t->nbytes;
    }
    json_object_set_new(o, "mtp_blocks", json_integer(c->n_nextn));
    json_object_set_new(o, "mtp_bytes", json_integer((json_int_t)mtp));
}

/* A mixture of experts: its experts, how many a token uses, their width,
 * and the parameters one token uses (all but the experts it skips). */
static void add_experts(json_t *o, const llama_config *c, const gguf_file *f) {
    if (!c->n_expert) return;
    uint64_t all = 0, experts = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        all += t->n_elements;
        if (memmem(t->name.ptr, t->name.len, "_exps.", 6)) experts += t->n_elements;
    }
    json_object_set_new(o, "experts", json_integer(c->n_expert));
    json_object_set_new(o, "experts_used", json_integer(c->n_expert_used));
    json_object_set_new(o, "expert_feed_forward_length", json_integer(c->expert_ffn));
    if (c->shexp_ffn) {
        json_object_set_new(o, "expert_shared_feed_forward_length", json_integer(c->shexp_ffn));
        json_object_set_new(o, "expert_shared_gated", json_boolean(c->arch_info->shexp));
    }
    if (c->n_dense_lead)
        json_object_set_new(o, "leading_dense_layers", json_integer(c->n_dense_lead));
    if (c->dense_with_experts) /* Gemma 4: every token runs it too */
        json_object_set_new(o, "dense_ffn_beside_experts", json_integer(c->ffn_dim));
    json_object_set_new(
        o, "parameters_active",
        json_integer((json_int_t)(all - experts + experts / c->n_expert * c->n_expert_used)));
}

/* Which template tps serve renders chat with (it compiles it, as the
 * server does at startup: one that does not compile says why), and the
 * tool-call syntax it parses. */
static void template_json(const gguf_file *f, json_t *o) {
    gguf_str jt = {0}, tu = {0};
    gguf_get_str(f, "tokenizer.chat_template", &jt);
    gguf_get_str(f, "tokenizer.chat_template.tool_use", &tu);
    chat_prompt p;
    tps_err err = {{0}};
    char d[600];
    int rc = jt.len
                 ? chat_prompt_init(&p, jt.ptr, (size_t)jt.len, tu.len ? tu.ptr : NULL,
                                    (size_t)tu.len, CHAT_SRC_GGUF, "tokenizer.chat_template", &err)
                 : chat_prompt_builtin(&p, "chatml", CHAT_SRC_DEFAULT, &err);
    if (rc) {
        snprintf(d, sizeof d, "none: %s", err.msg);
        json_object_set_new(o, "chat_template_served", json_string(d));
        return;
    }
    json_object_set_new(o, "chat_template_served",
                        json_string(chat_prompt_describe(&p, d, sizeof d)));
    json_object_set_new(o, "chat_template_tool_calls",
                        json_string(p.tools_known ? tools_format_name(p.tools) : "not parsed"));
    chat_prompt_free(&p);
}

/* The tokens the file suppresses (tokenizer.ggml.suppress_tokens, checked
 * by llama_config_read): their count and ids, 0 and [] when it has none. */
static void add_suppressed(json_t *o, const llama_config *c) {
    json_t *ids = json_array();
    for (uint32_t i = 0; i < c->n_suppress; i++)
        json_array_append_new(ids, json_integer(llama_config_suppressed(c, i)));
    json_object_set_new(o, "suppressed_tokens", json_integer(c->n_suppress));
    json_object_set_new(o, "suppressed_token_ids", ids);
}

/* Everything `model info` reports, as one JSON object; keys absent from the
 * file are null, so vocab-only files still describe themselves. */
static json_t *model_info_json(const gguf_file *f, const char *path, tps_err *cfg_err,
                               bool *cfg_ok) {
    json_t *o = json_object();
    json_object_set_new(o, "file", json_string(path));
    json_object_set_new(o, "file_bytes", json_integer((json_int_t)f->size));
    json_object_set_new(o, "gguf_version", json_integer(f->version));
    json_object_set_new(o, "architecture", str_json(f, "general.architecture"));
    json_object_set_new(o, "name", str_json(f, "general.name"));
    uint64_t params = 0, tensor_bytes = 0;
    json_t *types = tensor_types_json(f, &params, &tensor_bytes);
    json_object_set_new(o, "tensors", json_integer((json_int_t)f->n_tensors));
    json_object_set_new(o, "parameters", json_integer((json_int_t)params));
    json_object_set_new(o, "bits_per_weight",
                        json_real(params ? 8.0 * (double)tensor_bytes / (double)params : 0));
    json_object_set_new(o, "file_type", file_type_json(f));
    json_object_set_new(o, "tensor_types", types);

    llama_config cfg;
    *cfg_ok = llama_config_read(&cfg, f, cfg_err) == 0;
    if (*cfg_ok) {
        json_object_set_new(o, "architecture_specifics", json_string(cfg.arch_info->specifics));
        json_object_set_new(o, "rope_order",
                            json_string(cfg.arch_info->rope_neox ? "neox" : "adjacent pairs"));
        const gguf_tensor *rf = gguf_find_tensor(f, "rope_freqs.weight");
        json_object_set_new(o, "rope_freqs", json_boolean(rf != NULL));
        json_object_set_new(o, "tied_embeddings",
                            json_boolean(!gguf_find_tensor(f, "output.weight")));
        json_object_set_new(o, "qkv_bias", json_boolean(gguf_find_tensor(f, "blk.0.attn_q.bias")));
        json_object_set_new(o, "qk_norm", json_boolean(cfg.arch_info->qk_norm));
        uint32_t n_local = 0;
        for (uint32_t l = 0; l < cfg.n_layers; l++)
            n_local += (uint32_t)llama_config_is_swa(&cfg, l);
        json_object_set_new(o, "sliding_window", json_integer(cfg.n_swa));
        json_object_set_new(o, "rope_freq_base_swa", json_real(cfg.rope_base_swa));
        json_object_set_new(o, "sliding_window_layers", json_integer(n_local));
        json_object_set_new(o, "attn_softcap", json_real(cfg.attn_softcap));
        json_object_set_new(o, "final_softcap", json_real(cfg.final_softcap));
        json_object_set_new(o, "context_length", json_integer(cfg.ctx_len));
        json_object_set_new(o, "embedding_length", json_integer(cfg.dim));
        json_object_set_new(o, "feed_forward_length", json_integer(cfg.ffn_dim));
        json_object_set_new(o, "layers", json_integer(cfg.n_layers));
        json_object_set_new(o, "heads", json_integer(cfg.n_heads));
        json_object_set_new(o, "kv_heads", json_integer(cfg.n_kv_heads));
        json_object_set_new(o, "head_dim", json_integer(cfg.head_dim));
        json_object_set_new(o, "rope_freq_base", json_real(cfg.rope_base));
        json_object_set_new(o, "rms_norm_eps", json_real(cfg.rms_eps));
        json_object_set_new(o, "vocab_size", json_integer(cfg.n_vocab));
        add_experts(o, &cfg, f);
        add_memory_shape(o, &cfg, f);
        add_suppressed(o, &cfg);
    }
    json_object_set_new(o, "tokenizer_model", str_json(f, "tokenizer.ggml.model"));
    json_object_set_new(o, "tokenizer_pre", str_json(f, "tokenizer.ggml.pre"));
    gguf_value toks;
    json_object_set_new(o, "tokenizer_tokens",
                        gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks) == 0
                            ? json_integer((json_int_t)toks.arr.n)
                            : json_null());
    json_object_set_new(o, "bos_token_id", token_id_json(f, "tokenizer.ggml.bos_token_id"));
    json_object_set_new(o, "eos_token_id", token_id_json(f, "tokenizer.ggml.eos_token_id"));
    json_object_set_new(o, "chat_template", json_boolean(gguf_find(f, "tokenizer.chat_template")));
    template_json(f, o);
    return o;
}

static void print_field(const char *label, json_t *v) {
    printf("  %-22s ", label);
    if (json_is_null(v) || !v)
        printf("-");
    else if (json_is_integer(v))
        printf("%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        printf("%g", json_real_value(v));
    else if (json_is_string(v))
        printf("%s", json_string_value(v));
    else if (json_is_boolean(v))
        printf("%s", json_is_true(v) ? "yes" : "no");
    printf("\n");
}

/* KV bytes per token, a hybrid model's linear layers and MTP blocks. */
static void print_memory_shape(json_t *o) {
    json_t *kvb = json_object_get(o, "kv_bytes_per_token");
    if (kvb)
        printf("  %-22s %lld (F16 cache)\n", "KV bytes per token",
               (long long)json_integer_value(kvb));
    json_t *swa_hd = json_object_get(o, "head_dim_swa");
    if (swa_hd)
        printf("  %-22s %lld kv heads of %lld\n", "sliding layers' heads",
               (long long)json_integer_value(json_object_get(o, "kv_heads_swa")),
               (long long)json_integer_value(swa_hd));
    json_t *shared = json_object_get(o, "kv_shared_layers");
    if (shared)
        printf("  %-22s the last %lld read earlier layers' K/V and store none\n",
               "shared KV layers", (long long)json_integer_value(shared));
    json_t *dec = json_object_get(o, "kv_bytes_per_token_decompressed");
    if (dec)
        printf("  %-22s latent rank %lld (Q rank %lld): the cache holds the latent, not the "
               "%lld bytes a token of its decompressed heads would take\n",
               "latent attention",
               (long long)json_integer_value(json_object_get(o, "kv_lora_rank")),
               (long long)json_integer_value(json_object_get(o, "q_lora_rank")),
               (long long)json_integer_value(dec));
    json_t *lin = json_object_get(o, "linear_attention_layers");
    if (lin)
        printf("  %-22s %lld of %lld layers, a state of %.2f MiB per sequence (constant in its "
               "length)\n",
               "linear attention", (long long)json_integer_value(lin),
               (long long)json_integer_value(json_object_get(o, "layers")),
               (double)json_integer_value(json_object_get(o, "state_bytes_per_sequence")) /
                   1048576.0);
    json_t *mtp = json_object_get(o, "mtp_blocks");
    if (mtp && json_integer_value(mtp))
        printf("  %-22s %lld block(s), %.2f MiB: loaded and counted, not run (drafting with them, "
               "speculative decoding, is not built yet)\n",
               "MTP (next-token draft)", (long long)json_integer_value(mtp),
               (double)json_integer_value(json_object_get(o, "mtp_bytes")) / 1048576.0);
}

/* Only where the file suppresses tokens: how many, the first few ids. */
static void print_suppressed(json_t *o) {
    const json_int_t n = json_integer_value(json_object_get(o, "suppressed_tokens"));
    if (n <= 0) return;
    json_t *ids = json_object_get(o, "suppressed_token_ids");
    printf("  %-22s %lld (ids", "suppressed tokens", (long long)n);
    for (size_t i = 0; i < json_array_size(ids) && i < 8; i++)
        printf(" %lld", (long long)json_integer_value(json_array_get(ids, i)));
    printf("%s): logits -inf, never sampled\n", n > 8 ? " ..." : "");
}

static void print_human(json_t *o) {
    printf("%s\n", json_string_value(json_object_get(o, "file")));
    print_field("architecture", json_object_get(o, "architecture"));
    print_field("name", json_object_get(o, "name"));
    double mib = (double)json_integer_value(json_object_get(o, "file_bytes")) / (1024.0 * 1024.0);
    printf("  %-22s %.2f MiB (GGUF v%lld)\n", "file size", mib,
           (long long)json_integer_value(json_object_get(o, "gguf_version")));
    double params = (double)json_integer_value(json_object_get(o, "parameters"));
    printf("  %-22s %.0f (%.2f M)\n", "parameters", params, params / 1e6);
    print_field("file type", json_object_get(o, "file_type"));
    printf("  %-22s %.2f\n", "bits per weight",
           json_real_value(json_object_get(o, "bits_per_weight")));
    print_field("tensors", json_object_get(o, "tensors"));
    const char *tn;
    json_t *e;
    json_object_foreach(json_object_get(o, "tensor_types"), tn, e) {
        printf("    %-20s %lld tensors, %.2f MiB, %.2f M params, %.2f bits per weight\n", tn,
               (long long)json_integer_value(json_object_get(e, "tensors")),
               (double)json_integer_value(json_object_get(e, "bytes")) / (1024.0 * 1024.0),
               (double)json_integer_value(json_object_get(e, "parameters")) / 1e6,
               json_real_value(json_object_get(e, "bits_per_weight")));
    }
    print_field("context length", json_object_get(o, "context_length"));
    print_field("embedding length", json_object_get(o, "embedding_length"));
    print_field("feed-forward length", json_object_get(o, "feed_forward_length"));
    json_t *ex = json_object_get(o, "experts");
    if (ex)
        printf("  %-22s %lld a layer, %lld a token, of ffn %lld: %.2f M parameters active\n",
               "experts", (long long)json_integer_value(ex),
               (long long)json_integer_value(json_object_get(o, "experts_used")),
               (long long)json_integer_value(json_object_get(o, "expert_feed_forward_length")),
               (double)json_integer_value(json_object_get(o, "parameters_active")) / 1e6);
    json_t *sh = json_object_get(o, "expert_shared_feed_forward_length");
    if (sh)
        printf("  %-22s 1 a layer, of ffn %lld, run by every token%s\n", "shared expert",
               (long long)json_integer_value(sh),
               json_is_true(json_object_get(o, "expert_shared_gated"))
                   ? ", scaled by its sigmoid gate"
                   : "");
    json_t *dn = json_object_get(o, "dense_ffn_beside_experts");
    if (dn)
        printf("  %-22s of ffn %lld beside the experts, run by every token\n", "dense FFN",
               (long long)json_integer_value(dn));
    if (json_object_get(o, "leading_dense_layers"))
        print_field("leading dense layers", json_object_get(o, "leading_dense_layers"));
    print_field("layers", json_object_get(o, "layers"));
    print_field("heads", json_object_get(o, "heads"));
    print_field("kv heads", json_object_get(o, "kv_heads"));
    print_field("head dim", json_object_get(o, "head_dim"));
    print_field("rope freq base", json_object_get(o, "rope_freq_base"));
    print_field("rope order", json_object_get(o, "rope_order"));
    print_field("rope freq factors", json_object_get(o, "rope_freqs"));
    print_field("tied embeddings", json_object_get(o, "tied_embeddings"));
    print_field("q/k/v biases", json_object_get(o, "qkv_bias"));
    print_field("q/k norm", json_object_get(o, "qk_norm"));
    json_t *swa = json_object_get(o, "sliding_window");
    if (swa && json_integer_value(swa))
        printf("  %-22s %lld positions, %lld of %lld layers (RoPE base %g there)\n",
               "sliding window", (long long)json_integer_value(swa),
               (long long)json_integer_value(json_object_get(o, "sliding_window_layers")),
               (long long)json_integer_value(json_object_get(o, "layers")),
               json_real_value(json_object_get(o, "rope_freq_base_swa")));
    else if (swa)
        printf("  %-22s none\n", "sliding window");
    json_t *ac = json_object_get(o, "attn_softcap"), *fc = json_object_get(o, "final_softcap");
    if (ac && (json_real_value(ac) > 0 || json_real_value(fc) > 0))
        printf("  %-22s attention %g, final %g\n", "soft-capping", json_real_value(ac),
               json_real_value(fc));
    print_suppressed(o);
    print_field("arch specifics", json_object_get(o, "architecture_specifics"));
    print_memory_shape(o);
    print_field("rms norm eps", json_object_get(o, "rms_norm_eps"));
    print_field("tokenizer model", json_object_get(o, "tokenizer_model"));
    print_field("tokenizer pre", json_object_get(o, "tokenizer_pre"));
    print_field("vocabulary size", json_object_get(o, "tokenizer_tokens"));
    print_field("bos token id", json_object_get(o, "bos_token_id"));
    print_field("eos token id", json_object_get(o, "eos_token_id"));
    print_field("chat template", json_object_get(o, "chat_template_served"));
    print_field("tool calls", json_object_get(o, "chat_template_tool_calls"));
}

static int cmd_info(int argc, char **argv) {
    info_cli c = {0};
    c.files = OPT_LIST_OF(c.file_buf);
    int prc = opt_main(&info_cmd, &c, argc, argv);
    if (prc >= 0) return prc;
    if (c.files.n != 1) {
        fprintf(stderr, c.files.n ? "tps model info: one file at a time\n"
                                  : "tps model info: give a FILE.gguf (see --help)\n");
        return 2;
    }
    const char *path = c.files.v[0];
    const bool as_json = c.json;
    tps_err err = {0};
    gguf_file *f;
    if (gguf_open(&f, path, &err) != 0) {
        fprintf(stderr, "tps model info: %s\n", err.msg);
        return 1;
    }
    tps_err cfg_err = {0};
    bool cfg_ok;
    json_t *o = model_info_json(f, path, &cfg_err, &cfg_ok);
    if (as_json) {
        char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
        printf("%s\n", s);
        free(s);
    } else {
        print_human(o);
        if (!cfg_ok && f->n_tensors > 0)
            printf("  (not a runnable model: %s)\n", cfg_err.msg);
        else if (!cfg_ok)
            printf("  (no tensors: a vocabulary-only file)\n");
    }
    json_decref(o);
    gguf_close(f);
    return 0;
}

int cli_model(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: tps model info FILE.gguf [--json]\n"
                "       tps model make --preset P --type T [--vocab FILE.gguf] [--seed S] -o "
                "OUT.gguf\n");
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "make")) return cli_model_make(argc - 1, argv + 1);
    fprintf(stderr, "tps model: unknown subcommand '%s' (info, make)\n", argv[1]);
    return 2;
}
