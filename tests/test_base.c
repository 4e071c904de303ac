/* base/: the array doubling every module grows with, UTF-8 well-formedness
 * (against Python's decoder), and the seeded
 * generator checked against the published splitmix64 sequence. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "base/huge_map.h"
#include "base/error.h"
#include "base/grow.h"
#include "base/rng.h"

Test(base_grow, doubles_from_first_and_keeps_contents) {
    int *v = NULL;
    size_t cap = 0;
    for (int i = 0; i < 1000; i++) {
        cr_assert_eq(TPS_GROW(v, cap, (size_t)i + 1, 16), 0);
        v[i] = i;
    }
    cr_assert_eq(cap, 1024);
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(v[i], i);
    free(v);
}

Test(base_grow, overflow_fails_and_leaves_the_array_alone) {
    uint64_t *v = NULL;
    size_t cap = 0;
    cr_assert_eq(TPS_GROW(v, cap, 3, 4), 0);
    uint64_t *before = v;
    cr_assert_eq(TPS_GROW(v, cap, SIZE_MAX / 4, 4), TPS_ENOMEM);
    cr_assert_eq(v, before);
    cr_assert_eq(cap, 4);
    free(v);
}

/* splitmix64 seeded with 1234567 (Vigna's reference splitmix64.c). */
Test(base_rng, splitmix64_matches_the_reference) {
    uint64_t s = 1234567;
    const uint64_t want[] = {6457827717110365317ull, 3203168211198807973ull, 9817491932198370423ull,
                             4593380528125082431ull, 16408922859458223821ull};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert_eq(tps_splitmix64(&s), want[i], "draw %zu", i);
}

Test(base_rng, uniform_stays_in_range) {
    tps_rng r;
    tps_rng_seed(&r, 7);
    for (int i = 0; i < 10000; i++) {
        double u = tps_rng_uniform(&r), o = tps_rng_uniform_open(&r);
        cr_assert(u >= 0.0 && u < 1.0);
        cr_assert(o > 0.0 && o < 1.0);
    }
}

/* The kernels' block structs are the format's sizes (one table, base/). */
#include "kernels/quant.h"

Test(base_ggml_type, block_structs_match_the_type_table) {
    cr_assert_eq(ggml_type_get(GGML_TYPE_Q8_0)->type_size, sizeof(block_q8_0));
    cr_assert_eq(ggml_type_get(GGML_TYPE_Q4_0)->type_size, sizeof(block_q4_0));
    cr_assert_eq(ggml_type_get(GGML_TYPE_Q4_K)->type_size, sizeof(block_q4_K));
    cr_assert_eq(ggml_type_get(GGML_TYPE_Q6_K)->type_size, sizeof(block_q6_K));
    cr_assert_eq(ggml_type_get(GGML_TYPE_Q8_K)->type_size, sizeof(block_q8_K));
    cr_assert_eq(ggml_type_get(GGML_TYPE_Q8_0)->block_size, QK8_0);
    cr_assert_eq(ggml_type_get(GGML_TYPE_Q4_K)->block_size, QK_K);
    cr_assert_eq(ggml_type_from_name("Q8_0"), GGML_TYPE_Q8_0);
    cr_assert_null(ggml_type_get(GGML_TYPE_COUNT_MAX));
}

Test(huge_map, gives_zeroed_writable_memory_on_a_2_mib_boundary) {
    const size_t sizes[] = {1, 4096, (size_t)3 << 20, ((size_t)5 << 20) + 123};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t *p = huge_map(sizes[i]);
        cr_assert_not_null(p, "%zu bytes", sizes[i]);
        cr_assert_eq((uintptr_t)p % ((uintptr_t)2 << 20), 0, "%p is not 2 MiB-aligned", (void *)p);
        cr_assert_eq(p[0], 0);
        cr_assert_eq(p[sizes[i] - 1], 0);
        memset(p, 0xab, sizes[i]); /* every byte is mapped and writable */
        huge_unmap(p, sizes[i]);
    }
    cr_assert_null(huge_map(0));
    cr_assert_null(huge_map(SIZE_MAX));
}

/* Unicode's table 3-7 at its edges, judged as Python's bytes.decode judges
 * them (the values below are Python 3.11's): the smallest and largest of
 * each length, overlong forms, surrogates and past U+10FFFF refused. */
Test(base_utf8, well_formed_sequences_are_those_python_decodes) {
    static const struct {
        const char *bytes;
        size_t n;
        uint32_t cp; /* 0: ill formed */
    } cases[] = {
        {"\x41", 1, 0x41},
        {"\xC2\x80", 2, 0x80},
        {"\xDF\xBF", 2, 0x7FF},
        {"\xE0\xA0\x80", 3, 0x800},
        {"\xEE\x80\x80", 3, 0xE000},
        {"\xF0\x90\x80\x80", 4, 0x10000},
        {"\xF4\x8F\xBF\xBF", 4, 0x10FFFF},
        {"\xC0\xAF", 2, 0},
        {"\xE0\x80\xAF", 3, 0},
        {"\xED\xA0\x80", 3, 0},
        {"\xED\xBF\xBF", 3, 0},
        {"\xF4\x90\x80\x80", 4, 0},
        {"\xDF", 1, 0},
        {"\xE0\xA0", 2, 0},
        {"\xF0\x90\x80", 3, 0},
        {"\x80", 1, 0},
        {"\xF5\x80\x80\x80", 4, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const unsigned char *s = (const unsigned char *)cases[i].bytes;
        uint32_t cp = 0;
        const size_t len = utf8_decode(s, cases[i].n, &cp);
        cr_expect_eq(len, cases[i].cp ? cases[i].n : 0, "case %zu", i);
        if (cases[i].cp) cr_expect_eq(cp, cases[i].cp, "case %zu", i);
        cr_expect_eq(utf8_len(s, cases[i].n), len, "case %zu", i);
    }
}

/* The maximal subparts one U+FFFD replaces: Unicode's own example (3.9,
 * U+FFFD substitution), which Python decodes to a, 3 x U+FFFD, b, U+FFFD,
 * c, 2 x U+FFFD, d. */
Test(base_utf8, bad_bytes_are_replaced_by_maximal_subparts) {
    const unsigned char s[] = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
    const size_t n = sizeof s - 1;
    char out[32] = "";
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_len(s + i, n - i);
        out[o++] = k ? (char)s[i] : '?';
        i += k ? k : utf8_bad_len(s + i, n - i);
    }
    cr_expect_str_eq(out, "a???b?c??d");
    cr_expect_eq(utf8_valid_prefix(s, n), 1);
    cr_expect_eq(utf8_valid_prefix(s, 1), 1);
}

/* A stream holds back a character begun and not finished, never bytes
 * that can no longer become one. */
Test(base_utf8, an_incomplete_tail_is_held_back_and_a_bad_one_is_not) {
    cr_expect_eq(utf8_incomplete_tail((const unsigned char *)"ab\xE2\x82", 4), 2);
    cr_expect_eq(utf8_incomplete_tail((const unsigned char *)"ab\xF0", 3), 1);
    cr_expect_eq(utf8_incomplete_tail((const unsigned char *)"ab\xE2\x82\xAC", 5), 0);
    cr_expect_eq(utf8_incomplete_tail((const unsigned char *)"ab", 2), 0);
    cr_expect_eq(utf8_incomplete_tail((const unsigned char *)"ab\xED\xA0", 4), 0);
    cr_expect_eq(utf8_incomplete_tail((const unsigned char *)"ab\xC0", 3), 0);
}
