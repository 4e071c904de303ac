/* The repacked weights' file pages are given back after the load (they
 * are never read again), the model still computes the same tokens as one
 * loaded without repacking, and a repacked model's mapping holds little
 * of the file resident. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>

#include "kernels/matmul.h"
#include "model/llama_model.h"
#include "model/model_make.h"
#include "support/engine_env.h"

/* Bytes of the model file's mapping this process holds (its Rss line in
 * /proc/self/smaps; the page cache may hold more, for whoever reads it). */
static size_t resident_bytes(const gguf_file *f) {
    FILE *fp = fopen("/proc/self/smaps", "r");
    cr_assert_not_null(fp);
    char line[512], want[32];
    snprintf(want, sizeof want, "%lx-", (unsigned long)(uintptr_t)f->map);
    bool in = false;
    size_t kb = (size_t)-1;
    while (fgets(line, sizeof line, fp)) {
        if (strchr(line, '-') && strchr(line, ' ') && line[0] != ' ' &&
            strchr("0123456789abcdef", line[0]) && strncmp(line, "Rss", 3))
            in = !strncmp(line, want, strlen(want));
        if (in && sscanf(line, "Rss: %zu kB", &kb) == 1) break;
    }
    fclose(fp);
    cr_assert_neq(kb, (size_t)-1, "the model's mapping is in /proc/self/smaps");
    return kb * 1024;
}

static void greedy(env *v, int32_t *out, size_t n) {
    engine *e = env_engine(v, 1, 64, 0, GGML_TYPE_F16, true);
    int32_t prompt[] = {1, 17, 99, 230, 5};
    result res[1] = {0};
    engine_request rq = env_greedy_request(prompt, 5, (uint32_t)n, res);
    env_submit(e, &rq);
    drain(e, 1);
    cr_assert_eq(res[0].n, n);
    memcpy(out, res[0].tokens, n * sizeof *out);
    engine_destroy(e);
}

/* The model at path loaded in file layout (--no-repack), with its tokenizer. */
static void open_unrepacked(env *plain, const char *path) {
    *plain = (env){0};
    llama_load_opts lo = {.no_repack = true};
    tps_err err = {0};
    cr_assert_eq(llama_model_load_opts(&plain->m, path, &lo, &err), 0, "%s", err.msg);
    cr_assert_eq(tokenizer_load(&plain->tok, plain->m->file, &err), 0, "%s", err.msg);
}

/* A model of shape pre in type (env_open_made's: a GGML type or a
 * MODEL_MAKE_ mix; seeded) made at path (a "...XXXXXX" template) and
 * loaded into packed, its matrices repacked; its weights. */
static const llama_weights *open_repacked(env *packed, char *path, const model_preset *pre,
                                          uint32_t type, uint64_t seed) {
    env_open_made(packed, path, pre, type, seed);
    const llama_weights *w = &packed->m->w;
    cr_assert_not_null(w->packed, "the matrices of a type %u model are repacked", type);
    return w;
}

/* The first 16 greedy tokens of a and b are equal. */
static void expect_same_greedy(env *a, env *b, const char *differ) {
    int32_t ta[16], tb[16];
    greedy(a, ta, 16);
    greedy(b, tb, 16);
    cr_expect_eq(memcmp(ta, tb, sizeof ta), 0, "%s", differ);
}

/* The seven matrices of each of w's n_layers layers, in order, into ms
 * (room for cap); how many. */
static size_t layer_mats(const llama_weights *w, uint32_t n_layers, const llama_mat **ms,
                         size_t cap) {
    cr_assert_leq((size_t)n_layers * 7, cap);
    size_t n = 0;
    for (uint32_t l = 0; l < n_layers; l++) {
        const llama_layer *L = &w->layers[l];
        const llama_mat *lm[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t k = 0; k < 7; k++)
            ms[n++] = lm[k];
    }
    return n;
}

/* w gave back every file page of the n_mats repacked matrices (mats bytes
 * in all) but the page fragments at each one's two ends. */
static void expect_released(const llama_weights *w, size_t mats, size_t n_mats) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    cr_expect_geq(w->released_bytes, mats - 2 * page * (n_mats + 1),
                  "%zu bytes given back of %zu in repacked matrices", w->released_bytes, mats);
}

Test(model_memory, repacked_matrices_file_pages_are_given_back_and_tokens_do_not_change) {
    char path[] = "/tmp/tps-test-mem-XXXXXX";
    const model_preset pre = {"mem", "test", 256, 2, 4, 4, 768, 512, 256, 10000.0f};
    env packed;
    const llama_weights *w = open_repacked(&packed, path, &pre, GGML_TYPE_Q8_0, 3);
    /* every matrix but the page fragments at its two ends */
    const llama_mat *ms[4 * 7];
    const size_t n_mats = layer_mats(w, pre.n_layers, ms, sizeof ms / sizeof ms[0]);
    size_t mats = 0;
    for (size_t i = 0; i < n_mats; i++)
        mats += (size_t)ms[i]->rows * kernel_row_bytes(ms[i]->type, ms[i]->cols);
    expect_released(w, mats, n_mats);
    size_t resident = resident_bytes(packed.m->file);
    cr_expect_lt(resident, packed.m->file->size - mats / 2,
                 "%zu of the file's %zu bytes stay resident", resident, packed.m->file->size);

    env plain;
    open_unrepacked(&plain, path);
    cr_expect_eq(plain.m->w.released_bytes, 0, "nothing is given back without copies");
    expect_same_greedy(&packed, &plain, "repacked and file-layout weights give other tokens");
    env_close(&packed);
    env_close(&plain);
    unlink(path);
}

/* A Q4_K_M model: its Q4_K and Q6_K matrices (output.weight included) are
 * repacked into 8-row groups, all their file pages but the fragments at
 * each matrix's ends are given back, and greedy tokens equal those of the
 * same file loaded without repacking. */
Test(model_memory, q4_K_m_model_repacks_its_q4_K_and_q6_K_matrices_and_tokens_do_not_change) {
    char path[] = "/tmp/tps-test-mem-XXXXXX";
    const model_preset pre = {"memk", "test", 256, 2, 4, 4, 512, 512, 256, 10000.0f};
    env packed;
    const llama_weights *w = open_repacked(&packed, path, &pre, MODEL_MAKE_Q4_K_M, 4);
    const llama_mat *ms[4 * 7 + 1];
    size_t n_mats = layer_mats(w, pre.n_layers, ms, sizeof ms / sizeof ms[0]);
    ms[n_mats++] = &w->output; /* untied in this preset */
    size_t n_of[2] = {0, 0}, mats = 0;
    for (size_t i = 0; i < n_mats; i++) {
        const uint32_t t = ms[i]->type;
        cr_assert(t == GGML_TYPE_Q4_K || t == GGML_TYPE_Q6_K, "matrix %zu: type %u", i, t);
        n_of[t == GGML_TYPE_Q6_K]++;
        cr_expect_not_null(ms[i]->packed, "matrix %zu of type %u not repacked", i, t);
        mats += (size_t)ms[i]->rows * kernel_row_bytes(t, ms[i]->cols);
    }
    cr_assert_gt(n_of[0], 0, "the mix has Q4_K matrices");
    cr_assert_gt(n_of[1], 1, "the mix has Q6_K matrices beside output.weight");
    expect_released(w, mats, n_mats);

    env plain;
    open_unrepacked(&plain, path);
    expect_same_greedy(&packed, &plain, "repacked and file-layout K-quants give other tokens");
    env_close(&packed);
    env_close(&plain);
    unlink(path);
}
