/* Constrained-decoding mask cost (issue 16): what computing the allowed
 * tokens costs per decode step, at the vocabulary sizes of the models we
 * serve: stories/Llama 2 SentencePiece (32k) and Qwen3 byte-level BPE (151k).
 *
 * For each vocabulary: the trie build once, then walks of a JSON schema
 * grammar (an object with a free string, an integer, a bounded array of
 * enum strings, a nested object) that take, at each step, a seeded random
 * allowed token; every step's constraint_mask + constraint_accept is timed.
 * A step whose state was seen before is a cache hit (one lookup); a miss
 * walks the trie. Reported: mean, p50, p99 and max per step, the miss
 * share, and the walk of the hardest state (inside a free JSON string,
 * where nearly every token is allowed) uncached.
 * Numbers, not pass/fail.
 *
 * usage: bench_constraint [shared dir (default ../shared beside the source)]
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "constrain/constraint.h"
#include "base/clock.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "constrain/json_schema.h"

#define WALKS     20
#define MAX_STEPS 400

static const char *SCHEMA =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"maxLength\":40},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",\"blue\"]},"
    "\"maxItems\":4},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
    "\"zip\":{\"type\":\"string\",\"format\":\"uuid\"}},\"required\":[\"city\"]}},"
    "\"required\":[\"name\",\"age\",\"tags\",\"address\"],\"additionalProperties\":false}";

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

static void run(const char *path, const char *gbnf) {
    gguf_file *f;
    tps_err err = {{0}};
    if (gguf_open(&f, path, &err)) {
        printf("%s: skipped (%s)\n", path, err.msg);
        return;
    }
    tokenizer *tok;
    int rc = tokenizer_load(&tok, f, &err);
    gguf_close(f);
    if (rc) {
        printf("%s: %s\n", path, err.msg);
        return;
    }
    uint32_t nv = tokenizer_n_vocab(tok);
    uint64_t t0 = tps_now_ns();
    vocab_trie *vt;
    if (vocab_trie_build(&vt, tok, nv, &err)) {
        printf("%s: %s\n", path, err.msg);
        tokenizer_free(tok);
        return;
    }
    double build_ms = (double)(tps_now_ns() - t0) / 1e6;
    int32_t eos = tokenizer_eos(tok);
    double *us = malloc(sizeof(double) * WALKS * MAX_STEPS);
    size_t n_steps = 0, misses = 0;
    double miss_sum = 0, sum = 0;
    for (uint64_t w = 1; w <= WALKS; w++) {
        constraint *c;
        if (constraint_create(&c, gbnf, strlen(gbnf), vt, &eos, 1, &err)) {
            printf("%s\n", err.msg);
            break;
        }
        uint64_t seed = w;
        size_t before = constraint_cache_bytes(c);
        for (int step = 0; step < MAX_STEPS && !constraint_finished(c); step++) {
            uint64_t a = tps_now_ns();
            size_t n;
            const uint8_t *m = constraint_mask(c, &n);
            uint64_t b = tps_now_ns();
            if (n == 0) break;
            int32_t pick = -1;
            for (int tries = 0; tries < 256 && pick < 0; tries++) {
                int32_t id = (int32_t)(lcg(&seed) % nv);
                if ((m[id >> 3] >> (id & 7) & 1) && id != eos) pick = id;
            }
            for (int32_t id = 0; pick < 0 && id < (int32_t)nv; id++)
                if ((m[id >> 3] >> (id & 7) & 1) && id != eos) pick = id;
            if (pick < 0) break;
            uint64_t a2 = tps_now_ns();
            constraint_accept(c, pick);
            uint64_t b2 = tps_now_ns();
            double t = (double)(b - a + b2 - a2) / 1e3;
            us[n_steps++] = t;
            sum += t;
            size_t after = constraint_cache_bytes(c);
            if (t > 50.0 || after != before) misses++, miss_sum += t;
            before = after;
        }
        constraint_free(c);
    }
    /* the hardest state, uncached: just after the opening quote of "name" */
    constraint *c;
    double string_ms = 0;
    if (!constraint_create(&c, gbnf, strlen(gbnf), vt, &eos, 1, &err)) {
        const char *pre = "{\"name\":\"";
        for (const char *p = pre; *p; p++) {
            int32_t id = tokenizer_find(tok, p, 1);
            if (id < 0) {
                char bt[8];
                snprintf(bt, sizeof bt, "<0x%02X>", (unsigned char)*p);
                id = tokenizer_find(tok, bt, strlen(bt));
            }
            if (id < 0) {
                char g[4] = {*p, 0};
                id = tokenizer_find(tok, g, 1);
            }
            if (id >= 0) constraint_accept(c, id);
        }
        size_t n;
        uint64_t a = tps_now_ns();
        constraint_mask(c, &n);
        string_ms = (double)(tps_now_ns() - a) / 1e6;
        printf("  inside a JSON string: %zu of %u tokens allowed, uncached mask %.2f ms\n", n, nv,
               string_ms);
        constraint_free(c);
    }
    qsort(us, n_steps, sizeof *us, cmp_d);
    printf("%s: vocab %u, trie %u nodes built in %.1f ms\n", path, nv, vocab_trie_nodes(vt),
           build_ms);
    if (n_steps)
        printf("  per step (mask + accept), %zu steps over %d walks: mean %.1f us, p50 %.1f us, "
               "p99 %.1f us, max %.1f us; %zu steps (%.0f%%) grew the caches, mean %.1f us\n",
               n_steps, WALKS, sum / (double)n_steps, us[n_steps / 2], us[n_steps * 99 / 100],
               us[n_steps - 1], misses, 100.0 * (double)misses / (double)n_steps,
               misses ? miss_sum / (double)misses : 0.0);
    free(us);
    vocab_trie_free(vt);
    tokenizer_free(tok);
}

int main(int argc, char **argv) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", argc > 1 ? argv[1] : TPS_BENCH_SHARED);
    json_t *schema = json_loads(SCHEMA, 0, NULL);
    sbuf gb;
    sbuf_init(&gb);
    tps_err err = {{0}};
    if (!schema || json_schema_to_gbnf(schema, &gb, &err)) {
        fprintf(stderr, "bench_constraint: %s\n", err.msg);
        return 1;
    }
    static const char *const vocabs[] = {"models/stories260K.gguf",
                                         "models/vocab/ggml-vocab-llama-spm.gguf",
                                         "models/vocab/ggml-vocab-qwen3.gguf"};
    for (size_t i = 0; i < 3; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, vocabs[i]);
        run(path, gb.p);
    }
    sbuf_free(&gb);
    json_decref(schema);
    return 0;
}
