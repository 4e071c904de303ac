/* See model_run.h. */
#include "support/model_run.h"
#include "engine/core/engine_setup.h"
#include "model/model_make.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void test_model_make_arch(char *path, const char *preset, const char *arch, uint32_t type,
                          uint64_t seed) {
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0, "%s", path);
    close(fd);
    model_make_opts o = {.preset = model_preset_find(preset),
                         .arch = model_arch_find(arch),
                         .type = type,
                         .seed = seed,
                         .out_path = path};
    cr_assert_not_null(o.preset, "preset %s", preset);
    cr_assert_not_null(o.arch, "arch %s", arch);
    tps_err err = {0};
    cr_assert_eq(model_make(&o, &err), 0, "%s", err.msg);
}

void test_model_make_chat(const char *path, const model_preset *pre, const char *arch,
                          const char *vocab_path, const char *tmpl) {
    model_make_opts o = {.preset = pre,
                         .arch = model_arch_find(arch),
                         .type = GGML_TYPE_Q8_0,
                         .vocab_path = vocab_path,
                         .chat_template = tmpl,
                         .seed = 1,
                         .out_path = path};
    cr_assert_not_null(o.arch, "arch %s", arch);
    tps_err err = {0};
    cr_assert_eq(model_make(&o, &err), 0, "%s: %s", path, err.msg);
}

gguf_writer *test_gguf_copy_each(const gguf_file *f, test_gguf_tensor_fn fn, void *arg) {
    gguf_writer *w = gguf_writer_create();
    cr_assert_not_null(w);
    for (uint64_t i = 0; i < f->n_kv; i++)
        cr_assert_eq(gguf_writer_copy_kv(w, &f->kv[i]), 0);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        char name[TEST_GGUF_NAME_CAP];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        if (fn && fn(w, t, name, arg)) continue;
        cr_assert_eq(gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data), 0);
    }
    return w;
}

/* Drops the tensor named arg. */
static bool skip_named(gguf_writer *w, const gguf_tensor *t, char *name, void *arg) {
    (void)w, (void)t;
    return arg && !strcmp(name, arg);
}

gguf_writer *test_gguf_copy(const gguf_file *f, const char *skip) {
    return test_gguf_copy_each(f, skip_named, (void *)skip);
}

void test_greedy_run(fwd_state *s, const llama_model *m, kv_cache *kv, const int32_t *prompt,
                     size_t np, size_t ng, model_step_fn fn, void *arg) {
    kv_seq seq = {0};
    cr_assert_eq(kv_seq_init(&seq, kv_blocks_for(kv, (uint32_t)(np + ng))), 0);
    cr_assert_eq(kv_seq_reserve(kv, &seq, (uint32_t)(np + ng)), 0);
    const kv_seq *seqs[] = {&seq};
    fwd_row *rows = calloc(np ? np : 1, sizeof *rows);
    cr_assert_not_null(rows);
    for (size_t i = 0; i < np; i++)
        rows[i] = (fwd_row){.token = prompt[i], .pos = (uint32_t)i, .want_logits = i + 1 == np};
    fwd_batch b = {.n_rows = np, .rows = rows, .seqs = seqs};
    for (size_t k = 0; k < ng; k++) {
        const float *logits;
        size_t nl;
        tps_err err = {0};
        cr_assert_eq(llama_forward(s, m, kv, &b, &logits, &nl, &err), 0, "%s", err.msg);
        cr_assert_eq(nl, 1);
        const int32_t next = fn(logits, k, arg);
        rows[0] = (fwd_row){.token = next, .pos = (uint32_t)(np + k), .want_logits = 1};
        b.n_rows = 1;
    }
    free(rows);
    kv_seq_release(kv, &seq);
    kv_seq_destroy(&seq);
}

kv_cache *test_kv_create(const kv_cache_params *p) {
    kv_cache *kv;
    tps_err err = {0};
    cr_assert_eq(kv_cache_create(&kv, p, &err), 0, "%s", err.msg);
    return kv;
}

kv_cache_params test_kv_params(const llama_config *c, uint32_t block_tokens, uint32_t kv_type,
                               uint32_t n_blocks) {
    return (kv_cache_params){.n_layers = c->n_layers,
                             .kv_dim = c->n_kv_heads * c->head_dim,
                             .head_dim = c->head_dim,
                             .block_tokens = block_tokens,
                             .kv_type = kv_type,
                             .n_blocks = n_blocks};
}

kv_cache *test_kv_for(const llama_model *m, uint32_t block_tokens, uint32_t kv_type,
                      uint32_t n_blocks) {
    const llama_config *c = &m->cfg;
    uint8_t *recurrent = calloc(3 * (size_t)c->n_layers, 1), *local = recurrent + c->n_layers;
    uint8_t *shared = local + c->n_layers;
    cr_assert_not_null(recurrent);
    const uint32_t n_rec = engine_recurrent_layers(c, recurrent);
    for (uint32_t l = 0; l < c->n_layers; l++) {
        local[l] = (uint8_t)llama_config_is_swa(c, l);
        shared[l] = (uint8_t)(!recurrent[l] && !llama_config_stores_kv(c, l));
    }
    kv_cache_params p = test_kv_params(c, block_tokens, kv_type, n_blocks);
    p.recurrent_layers = recurrent;
    p.n_state_slots = n_rec ? 16 : 0;
    p.state_bytes = engine_state_bytes(c);
    p.k_only = c->kv_lora_rank != 0;
    if (c->arch_info && c->arch_info->gemma4) { /* sliding layers of their own head shape */
        p.local_layers = local;
        p.window = c->n_swa;
        p.local_kv_dim = c->n_kv_heads_swa * c->head_dim_swa;
        p.local_head_dim = c->head_dim_swa;
        p.shared_layers = shared;
    }
    kv_cache *kv = test_kv_create(&p);
    free(recurrent);
    return kv;
}
