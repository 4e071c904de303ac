/* Engine benchmarks' models and prompts (see bench_models.h). */
#include "support/bench_models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/core/engine.h"
#include "model/model_make.h"

const char *bench_dir(void) {
    const char *dir = getenv("TPS_BENCH_DIR") ? getenv("TPS_BENCH_DIR") : "/tmp/tps-bench";
    mkdir(dir, 0755);
    return dir;
}

int bench_ensure_model(const char *path, const char *preset, uint32_t type) {
    struct stat st;
    if (stat(path, &st) == 0) return 0;
    model_make_opts o = {
        .preset = model_preset_find(preset), .type = type, .seed = 1, .out_path = path};
    tps_err err = {0};
    if (model_make(&o, &err)) {
        fprintf(stderr, "bench: cannot make %s: %s\n", path, err.msg);
        return -1;
    }
    return 0;
}

int bench_load(bench_model *l, const char *path) {
    tps_err err = {0};
    l->m = NULL;
    l->tok = NULL;
    const char *rp = getenv("TPS_REPACK");
    const llama_load_opts opts = {.no_repack = rp && strcmp(rp, "0") == 0};
    if (llama_model_load_opts(&l->m, path, &opts, &err) ||
        tokenizer_load(&l->tok, l->m->file, &err)) {
        fprintf(stderr, "bench: %s: %s\n", path, err.msg);
        tokenizer_free(l->tok);
        llama_model_free(l->m);
        return -1;
    }
    return 0;
}

void bench_unload(bench_model *l) {
    tokenizer_free(l->tok);
    llama_model_free(l->m);
}

int bench_model_list(char models[][BENCH_PATH_MAX]) {
    const char *list = getenv("TPS_BENCH_MODELS");
    if (!list || !*list) return 0;
    char buf[BENCH_MAX_MODELS * BENCH_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", list);
    int n = 0;
    for (char *t = strtok(buf, ","); t && n < BENCH_MAX_MODELS; t = strtok(NULL, ","))
        snprintf(models[n++], BENCH_PATH_MAX, "%s", t);
    return n;
}

const char *bench_model_name(const char *path) {
    return strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
}

void bench_prompt(int32_t *ids, size_t n, uint32_t vocab, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 12345u;
    ids[0] = 1;
    for (size_t i = 1; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        ids[i] = (int32_t)(3 + (s >> 8) % (vocab - 3));
    }
}

void bench_wait_kv_warm(struct engine *e) {
    engine_stats st = {0};
    for (int i = 0; i < 6000 && !st.kv_pool_warm; i++) {
        usleep(10000);
        engine_get_stats(e, &st);
    }
}

void bench_engine_params(engine_params *ep, const bench_model *l, int threads) {
    engine_params_default(ep);
    ep->model = l->m;
    ep->tok = l->tok;
    ep->n_threads = threads;
}
