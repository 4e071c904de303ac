/* GGUF reader/writer: real files from ../shared, a write/read round trip, and
 * a corruption sweep (truncation at every offset, byte flips over the
 * header, metadata and tensor infos) that must never crash or read out of
 * bounds. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/llama_config.h"
#include "support/model_run.h"
#include "support/test_support.h"

Test(gguf, stories260K_reads_as_a_5_layer_llama) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char *path = shared_path("models/stories260K.gguf");
    gguf_file *f;
    tps_err err = {0};
    cr_assert_eq(gguf_open(&f, path, &err), 0, "%s", err.msg);
    llama_config cfg;
    cr_assert_eq(llama_config_read(&cfg, f, &err), 0, "%s", err.msg);
    cr_expect_str_eq(cfg.arch, "llama");
    cr_expect_eq(cfg.n_layers, 5);
    cr_expect_eq(cfg.dim, 64);
    cr_expect_eq(cfg.n_heads, 8);
    cr_expect_eq(cfg.n_kv_heads, 4);
    cr_expect_eq(cfg.n_vocab, 512);
    cr_expect_eq(cfg.ffn_dim, 172);
    cr_expect_eq(cfg.ctx_len, 512);
    cr_expect_eq(f->n_tensors, 48);
    for (uint64_t i = 0; i < f->n_tensors; i++)
        cr_expect_eq(f->tensors[i].type, GGML_TYPE_F32);
    gguf_value toks;
    cr_assert_eq(gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks), 0);
    cr_expect_eq(toks.arr.n, 512);
    gguf_str *strs = calloc(toks.arr.n, sizeof *strs);
    cr_assert_eq(gguf_array_strings(&toks, strs), 0);
    cr_expect(gguf_str_eq(strs[1], "<s>"), "token 1 is <s>, got %.*s", (int)strs[1].len,
              strs[1].ptr);
    free(strs);
    uint64_t bos;
    cr_expect_eq(gguf_get_u64(f, "tokenizer.ggml.bos_token_id", &bos), 0);
    cr_expect_eq(bos, 1);
    gguf_close(f);
    free(path);
}

Test(gguf, every_shared_vocab_file_parses) {
    const char *files[] = {"models/vocab/ggml-vocab-llama-spm.gguf",
                           "models/vocab/ggml-vocab-gpt-2.gguf"};
    const uint64_t n_tokens[] = {32000, 50257};
    for (size_t k = 0; k < 2; k++) {
        REQUIRE_SHARED(files[k]);
        char *path = shared_path(files[k]);
        gguf_file *f;
        tps_err err = {0};
        cr_assert_eq(gguf_open(&f, path, &err), 0, "%s: %s", files[k], err.msg);
        gguf_value toks;
        cr_assert_eq(gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks), 0);
        cr_expect_eq(toks.arr.n, n_tokens[k]);
        gguf_str *strs = calloc(toks.arr.n, sizeof *strs);
        cr_expect_eq(gguf_array_strings(&toks, strs), 0);
        free(strs);
        gguf_close(f);
        free(path);
    }
}

Test(gguf, missing_file_is_a_clear_error) {
    gguf_file *f;
    tps_err err = {0};
    cr_assert_neq(gguf_open(&f, "/nonexistent/model.gguf", &err), 0);
    cr_expect_null(f);
    cr_expect(strstr(err.msg, "/nonexistent/model.gguf") != NULL, "%s", err.msg);
}

/* A small file exercising every value type, a nested array and three tensors. */
static float tensor_a[4 * 3];
static uint16_t tensor_b[64];
static uint8_t tensor_c[34 * 2];

static gguf_writer *build_sample(void) {
    for (int i = 0; i < 12; i++)
        tensor_a[i] = (float)i * 0.5f - 2.0f;
    for (int i = 0; i < 64; i++)
        tensor_b[i] = (uint16_t)(i * 977);
    for (int i = 0; i < 68; i++)
        tensor_c[i] = (uint8_t)(i * 31 + 7);
    gguf_writer *w = gguf_writer_create();
    gguf_writer_set_str(w, "general.architecture", "llama");
    gguf_writer_set_u32(w, "test.u32", 4000000000u);
    gguf_writer_set_i32(w, "test.i32", -5);
    gguf_writer_set_u64(w, "test.u64", 1ull << 40);
    gguf_writer_set_f32(w, "test.f32", 0.25f);
    gguf_writer_set_bool(w, "test.bool", true);
    int32_t ints[] = {1, -2, 3};
    gguf_writer_set_array(w, "test.ints", GGUF_TYPE_INT32, ints, 3);
    float floats[] = {1.5f, -0.5f};
    gguf_writer_set_array(w, "test.floats", GGUF_TYPE_FLOAT32, floats, 2);
    const char *strs[] = {"a", "", "héllo"};
    size_t lens[] = {1, 0, strlen("héllo")};
    gguf_writer_set_str_array(w, "test.strs", strs, lens, 3);
    uint64_t ne_a[] = {4, 3}, ne_b[] = {64}, ne_c[] = {64};
    gguf_writer_add_tensor(w, "a", GGML_TYPE_F32, 2, ne_a, tensor_a);
    gguf_writer_add_tensor(w, "b", GGML_TYPE_F16, 1, ne_b, tensor_b);
    gguf_writer_add_tensor(w, "c", GGML_TYPE_Q8_0, 1, ne_c, tensor_c);
    return w;
}

/* Appends a nested array (array of 2 arrays of u8) by hand-building bytes,
 * since the writer's API only makes flat arrays: then copies it with
 * copy_kv, which is the path vocab copying uses. */
static void add_nested(gguf_writer *w) {
    uint8_t raw[12 + 2 * (12 + 2)];
    size_t at = 0;
    uint32_t et = GGUF_TYPE_ARRAY, inner = GGUF_TYPE_UINT8;
    uint64_t n = 2, m = 2;
    memcpy(raw + at, &et, 4), at += 4;
    memcpy(raw + at, &n, 8), at += 8;
    for (int k = 0; k < 2; k++) {
        memcpy(raw + at, &inner, 4), at += 4;
        memcpy(raw + at, &m, 8), at += 8;
        raw[at++] = (uint8_t)(10 + k);
        raw[at++] = (uint8_t)(20 + k);
    }
    gguf_kv kv = {.key = {"test.nested", 11}, .val = {.type = GGUF_TYPE_ARRAY}};
    kv.val.arr.type = GGUF_TYPE_ARRAY;
    kv.val.arr.n = 2;
    kv.val.arr.data = raw + 12;
    kv.val.arr.bytes = sizeof raw - 12;
    cr_assert_eq(gguf_writer_copy_kv(w, &kv), 0);
}

static void write_sample(uint8_t **buf, size_t *size) {
    gguf_writer *w = build_sample();
    add_nested(w);
    tps_err err = {0};
    cr_assert_eq(gguf_writer_write_mem(w, buf, size, &err), 0, "%s", err.msg);
    gguf_writer_free(w);
}

/* The sample written to *buf (malloc'ed, *size bytes) and opened from it,
 * asserted to succeed. */
static gguf_file *open_sample(uint8_t **buf, size_t *size) {
    write_sample(buf, size);
    gguf_file *f;
    tps_err err = {0};
    cr_assert_eq(gguf_open_memory(&f, *buf, *size, &err), 0, "%s", err.msg);
    return f;
}

Test(gguf, written_file_reads_back_with_every_value) {
    uint8_t *buf;
    size_t size;
    gguf_file *f = open_sample(&buf, &size);
    cr_expect_eq(f->version, 3);
    uint64_t u;
    int64_t i;
    double d;
    bool b;
    cr_expect_eq(gguf_get_u64(f, "test.u32", &u), 0);
    cr_expect_eq(u, 4000000000u);
    cr_expect_eq(gguf_get_i64(f, "test.i32", &i), 0);
    cr_expect_eq(i, -5);
    cr_expect_eq(gguf_get_u64(f, "test.i32", &u), TPS_EINVAL, "negative i32 is not a u64");
    cr_expect_eq(gguf_get_i64(f, "test.u32", &i), 0, "u32 is readable as i64");
    cr_expect_eq(gguf_get_u64(f, "test.u64", &u), 0);
    cr_expect_eq(u, 1ull << 40);
    cr_expect_eq(gguf_get_f64(f, "test.f32", &d), 0);
    cr_expect_float_eq(d, 0.25, 0);
    cr_expect_eq(gguf_get_bool(f, "test.bool", &b), 0);
    cr_expect(b);
    cr_expect_eq(gguf_get_u64(f, "test.absent", &u), TPS_ENOENT);
    gguf_value arr, e;
    cr_assert_eq(gguf_get_array(f, "test.ints", GGUF_TYPE_INT32, &arr), 0);
    cr_expect_eq(gguf_array_i64(&arr, 1, &i), 0);
    cr_expect_eq(i, -2);
    cr_expect_eq(gguf_array_i64(&arr, 3, &i), TPS_ERANGE);
    cr_assert_eq(gguf_get_array(f, "test.floats", GGUF_TYPE_FLOAT32, &arr), 0);
    cr_expect_eq(gguf_array_f64(&arr, 0, &d), 0);
    cr_expect_float_eq(d, 1.5, 0);
    cr_assert_eq(gguf_get_array(f, "test.strs", GGUF_TYPE_STRING, &arr), 0);
    gguf_str s[3];
    cr_assert_eq(gguf_array_strings(&arr, s), 0);
    cr_expect(gguf_str_eq(s[2], "héllo"));
    cr_expect(gguf_str_eq(s[1], ""));
    cr_assert_eq(gguf_get_array(f, "test.nested", GGUF_TYPE_ARRAY, &arr), 0);
    cr_assert_eq(gguf_array_elem(&arr, 1, &e), 0);
    cr_expect_eq(e.arr.n, 2);
    cr_expect_eq(gguf_array_i64(&e, 1, &i), 0);
    cr_expect_eq(i, 21);
    const gguf_tensor *t = gguf_find_tensor(f, "a");
    cr_assert_not_null(t);
    cr_expect_eq(t->ne[0], 4);
    cr_expect_eq(t->ne[1], 3);
    cr_expect_eq(memcmp(t->data, tensor_a, sizeof tensor_a), 0);
    t = gguf_find_tensor(f, "c");
    cr_assert_not_null(t);
    cr_expect_eq(t->nbytes, 68);
    cr_expect_eq(memcmp(t->data, tensor_c, 68), 0);
    cr_expect_eq((uintptr_t)((const uint8_t *)t->data - buf) % 32, 0, "data is aligned");
    gguf_close(f);
    free(buf);
}

Test(gguf, copying_a_read_file_writes_identical_bytes) {
    uint8_t *buf, *buf2;
    size_t size, size2;
    gguf_file *f = open_sample(&buf, &size);
    gguf_writer *w = test_gguf_copy(f, NULL);
    tps_err err = {0};
    cr_assert_eq(gguf_writer_write_mem(w, &buf2, &size2, &err), 0, "%s", err.msg);
    cr_expect_eq(size2, size);
    cr_expect_eq(memcmp(buf, buf2, size), 0, "round trip is byte-identical");
    gguf_writer_free(w);
    gguf_close(f);
    free(buf);
    free(buf2);
}

/* After a successful open every view must lie inside the buffer: walk them. */
static void touch_everything(const gguf_file *f, const uint8_t *buf, size_t size) {
    volatile uint64_t sink = 0;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        cr_assert((const uint8_t *)kv->key.ptr >= buf &&
                  (const uint8_t *)kv->key.ptr + kv->key.len <= buf + size);
        if (kv->val.type == GGUF_TYPE_ARRAY) {
            cr_assert(kv->val.arr.data >= buf &&
                      kv->val.arr.data + kv->val.arr.bytes <= buf + size);
            uint64_t n = kv->val.arr.n < 64 ? kv->val.arr.n : 64;
            for (uint64_t k = 0; k < n; k++) {
                gguf_value e;
                if (gguf_array_elem(&kv->val, k, &e) == 0) sink += e.type;
            }
        }
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        const uint8_t *d = t->data;
        cr_assert(d >= buf && d + t->nbytes <= buf + size, "tensor data inside the buffer");
        if (t->nbytes) sink += d[0] + d[t->nbytes - 1];
    }
    (void)sink;
}

Test(gguf, truncation_at_every_offset_is_a_clean_error) {
    uint8_t *buf;
    size_t size;
    /* The trailing alignment padding after the last tensor is not needed:
     * cutting into it still leaves a whole file. */
    gguf_file *f0 = open_sample(&buf, &size);
    size_t needed = 0;
    for (uint64_t i = 0; i < f0->n_tensors; i++) {
        size_t end = f0->data_offset + f0->tensors[i].offset + f0->tensors[i].nbytes;
        if (end > needed) needed = end;
    }
    gguf_close(f0);
    cr_assert_lt(needed, size);
    for (size_t cut = 0; cut < needed; cut++) {
        /* A fresh allocation of exactly `cut` bytes, so ASan sees any overread. */
        uint8_t *part = malloc(cut ? cut : 1);
        memcpy(part, buf, cut);
        gguf_file *f;
        tps_err err = {0};
        int rc = gguf_open_memory(&f, part, cut, &err);
        cr_assert_neq(rc, 0, "truncated at %zu of %zu still opened", cut, size);
        cr_assert_null(f);
        cr_assert(err.msg[0] != 0, "error message at cut %zu", cut);
        free(part);
    }
    free(buf);
}

Test(gguf, byte_flips_give_an_error_or_a_valid_file) {
    uint8_t *buf;
    size_t size;
    gguf_file *f0 = open_sample(&buf, &size);
    size_t header_end = f0->data_offset;
    gguf_close(f0);
    const uint8_t flips[] = {0xff, 0x01, 0x80, 0x7f};
    uint8_t *copy = malloc(size);
    for (size_t at = 0; at < header_end; at++) {
        for (size_t k = 0; k < sizeof flips; k++) {
            memcpy(copy, buf, size);
            copy[at] ^= flips[k];
            gguf_file *f;
            tps_err err = {0};
            if (gguf_open_memory(&f, copy, size, &err) == 0) {
                touch_everything(f, copy, size);
                gguf_close(f);
            } else {
                cr_assert(err.msg[0] != 0);
            }
        }
    }
    free(copy);
    free(buf);
}

Test(gguf, hostile_counts_and_lengths_are_rejected_without_allocating) {
    uint8_t buf[64] = {0};
    uint32_t magic = GGUF_MAGIC, ver = 3;
    memcpy(buf, &magic, 4);
    memcpy(buf + 4, &ver, 4);
    uint64_t huge = UINT64_MAX / 2;
    gguf_file *f;
    tps_err err = {0};
    memcpy(buf + 8, &huge, 8); /* tensor count */
    cr_expect_neq(gguf_open_memory(&f, buf, sizeof buf, &err), 0);
    cr_expect(strstr(err.msg, "tensor count") != NULL, "%s", err.msg);
    memset(buf + 8, 0, 8);
    memcpy(buf + 16, &huge, 8); /* kv count */
    cr_expect_neq(gguf_open_memory(&f, buf, sizeof buf, &err), 0);
    cr_expect(strstr(err.msg, "metadata count") != NULL, "%s", err.msg);
    uint64_t one = 1;
    memcpy(buf + 16, &one, 8);
    memcpy(buf + 24, &huge, 8); /* key length */
    cr_expect_neq(gguf_open_memory(&f, buf, sizeof buf, &err), 0);
    cr_expect(strstr(err.msg, "byte offset 24") != NULL, "%s", err.msg);
    ver = 0x03000000; /* big-endian version field */
    memcpy(buf + 4, &ver, 4);
    cr_expect_neq(gguf_open_memory(&f, buf, sizeof buf, &err), 0);
    cr_expect(strstr(err.msg, "big-endian") != NULL, "%s", err.msg);
    memcpy(buf, "GGML", 4);
    cr_expect_neq(gguf_open_memory(&f, buf, sizeof buf, &err), 0);
    cr_expect(strstr(err.msg, "not a GGUF file") != NULL, "%s", err.msg);
}

Test(gguf, type_table_knows_common_and_k_quant_types) {
    cr_expect_str_eq(ggml_type_get(GGML_TYPE_Q4_K)->name, "q4_k");
    cr_expect_eq(ggml_type_get(GGML_TYPE_Q6_K)->type_size, 210);
    cr_expect_eq(ggml_type_get(GGML_TYPE_Q8_0)->block_size, 32);
    cr_expect_eq(ggml_type_get(GGML_TYPE_BF16)->type_size, 2);
    cr_expect_null(ggml_type_get(4), "type 4 (removed Q4_2) is unknown");
    cr_expect_eq(ggml_type_from_name("Q8_0"), GGML_TYPE_Q8_0);
    cr_expect_eq(ggml_type_from_name("nope"), -1);
    uint64_t ne[] = {33, 2};
    cr_expect_eq(ggml_tensor_nbytes(GGML_TYPE_Q8_0, 2, ne), 0, "33 is not whole q8_0 blocks");
}

/* A one-tensor file (4096 bytes of data) whose tensor info is rewritten to
 * say `type`, ne0 elements a row and `rows` rows: what a hostile or broken
 * file of that type looks like to the reader. */
static uint8_t *retyped_file(uint32_t type, uint64_t ne0, uint64_t rows, size_t *size) {
    static float data[1024];
    gguf_writer *w = gguf_writer_create();
    const uint64_t ne[] = {1024, 1};
    cr_assert_eq(gguf_writer_add_tensor(w, "hostile.weight", GGML_TYPE_F32, 2, ne, data), 0);
    uint8_t *buf;
    tps_err err = {0};
    cr_assert_eq(gguf_writer_write_mem(w, &buf, size, &err), 0, "%s", err.msg);
    gguf_writer_free(w);
    uint8_t *p = memmem(buf, *size, "hostile.weight", 14);
    cr_assert_not_null(p);
    p += 14 + 4; /* the name, then n_dims (u32): ne[0], ne[1] (u64), type (u32) */
    memcpy(p, &ne0, 8);
    memcpy(p + 8, &rows, 8);
    memcpy(p + 16, &type, 4);
    return buf;
}

/* Opens the retyped file: 0, or the error's message in msg. */
static int open_retyped(uint32_t type, uint64_t ne0, uint64_t rows, char *msg, size_t cap) {
    size_t size;
    uint8_t *buf = retyped_file(type, ne0, rows, &size);
    gguf_file *f;
    tps_err err = {0};
    int rc = gguf_open_memory(&f, buf, size, &err);
    if (rc == 0) {
        const gguf_tensor *t = gguf_find_tensor(f, "hostile.weight");
        cr_assert_not_null(t);
        cr_expect_eq(t->type, type);
        cr_expect_eq(t->nbytes,
                     rows * ne0 / ggml_type_get(type)->block_size * ggml_type_get(type)->type_size);
        gguf_close(f);
    }
    snprintf(msg, cap, "%s", err.msg);
    free(buf);
    return rc;
}

/* The block types of issue 34: whole blocks open; a row that is not whole
 * blocks, or blocks past the end of the file, are refused by name. */
Test(gguf, newer_block_types_with_wrong_sizes_are_refused_by_name) {
    const uint32_t types[] = {GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_NL,
                              GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q5_K, GGML_TYPE_IQ4_XS};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const ggml_type_info *ti = ggml_type_get(types[k]);
        cr_assert_not_null(ti);
        const uint64_t b = ti->block_size, fit = 4096 / ti->type_size;
        char msg[512], want[96];
        cr_expect_eq(open_retyped(types[k], b, fit, msg, sizeof msg), 0, "%s: %s", ti->name, msg);
        /* half a block more than whole blocks */
        cr_expect_neq(open_retyped(types[k], b + b / 2, 1, msg, sizeof msg), 0, "%s", ti->name);
        snprintf(want, sizeof want, "not a whole number of %s blocks (%llu)", ti->name,
                 (unsigned long long)b);
        cr_expect(strstr(msg, want) && strstr(msg, "hostile.weight"), "%s: %s", ti->name, msg);
        /* one block row more than the data holds */
        cr_expect_neq(open_retyped(types[k], b, fit + 1, msg, sizeof msg), 0, "%s", ti->name);
        cr_expect(strstr(msg, "truncated file: tensor 'hostile.weight'"), "%s: %s", ti->name, msg);
    }
}

/* A file may set general.alignment to any power of two, 1 included, and
 * then a tensor's data can start at any byte. The kernels read an F32
 * weight as floats in place: data that is not 4-byte aligned is refused by
 * name (libFuzzer found the misaligned load). Padding the header one byte
 * at a time moves the data section through every remainder mod 4. */
Test(gguf, tensor_data_its_type_cannot_be_read_from_is_refused) {
    int opened = 0, refused = 0;
    for (int pad = 0; pad < 4; pad++) {
        static float data[8];
        char filler[4] = "";
        memset(filler, 'x', (size_t)pad);
        gguf_writer *w = gguf_writer_create();
        gguf_writer_set_u32(w, "general.alignment", 1);
        gguf_writer_set_str(w, "test.filler", filler);
        const uint64_t ne[] = {8};
        cr_assert_eq(gguf_writer_add_tensor(w, "odd.weight", GGML_TYPE_F32, 1, ne, data), 0);
        uint8_t *buf;
        size_t size;
        tps_err err = {0};
        cr_assert_eq(gguf_writer_write_mem(w, &buf, &size, &err), 0, "%s", err.msg);
        gguf_writer_free(w);
        const size_t at = size - sizeof data; /* alignment 1: the data ends the file */
        gguf_file *f;
        int rc = gguf_open_memory(&f, buf, size, &err);
        if (at % 4 == 0) {
            cr_expect_eq(rc, 0, "pad %d: %s", pad, err.msg);
            if (rc == 0) gguf_close(f);
            opened++;
        } else {
            cr_expect_neq(rc, 0, "pad %d: data at %zu opened", pad, at);
            cr_expect(strstr(err.msg, "odd.weight") && strstr(err.msg, "4 bytes"), "%s", err.msg);
            refused++;
        }
        free(buf);
    }
    cr_expect_eq(opened, 1);
    cr_expect_eq(refused, 3);
}
