/* What the Q8_0 / Q4_0 prefill tile's instruction mix allows on this CPU:
 * the rate of vpdpbusd alone (the int8 peak `tps machine` measures) beside
 * the same 96 vpdpbusd per step with the other vector work of one block
 * of r8_tile_z (r8_tile_zmm.h; 3 pairs of groups x 4 activation rows):
 * its float epilogue (a cvtdq2ps, a mulps and an fma per accumulator and
 * block: acc = fma(float(isum), d_w * d_x, acc), the order every tier and
 * the reference keep) and the 24 inserts that build pair vectors from two
 * groups. Registers only, no memory, so the figures are the ceiling of the
 * mix, not of the caches. Read bench_kernels' q8_0r figure against the
 * last line: the tile's gap to it is loads, broadcasts and the loop.
 * Numbers, not pass/fail; AVX-512 VNNI only (elsewhere it says so).
 *
 * usage: bench_dot_mix [steps (default 4000000)] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__AVX512F__) && defined(__AVX512VNNI__) && defined(__x86_64__)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 12 independent accumulators (zmm0-11), as the tile's 3 x 4. */
#define DP(r) "vpdpbusd %%zmm20, %%zmm21, %%zmm" #r "\n\t"
#define DP12  DP(0) DP(1) DP(2) DP(3) DP(4) DP(5) DP(6) DP(7) DP(8) DP(9) DP(10) DP(11)
#define DP96  DP12 DP12 DP12 DP12 DP12 DP12 DP12 DP12
#define EPI(r)                                                                                     \
    "vcvtdq2ps %%zmm22, %%zmm" #r "\n\t"                                                           \
    "vmulps %%zmm23, %%zmm24, %%zmm" #r "\n\t"                                                     \
    "vfmadd231ps %%zmm23, %%zmm24, %%zmm" #r "\n\t"
#define EPI12                                                                                      \
    EPI(12) EPI(13) EPI(14) EPI(15) EPI(16) EPI(17) EPI(12) EPI(13) EPI(14) EPI(15) EPI(16) EPI(17)
#define INS(r) "vinserti64x4 $1, %%ymm25, %%zmm26, %%zmm" #r "\n\t"
#define INS8   INS(18) INS(19) INS(18) INS(19) INS(18) INS(19) INS(18) INS(19)
#define INS24  INS8 INS8 INS8
/* The K-quant tiles' (kquant_x8_zmm.h) work beside their vpdpbusd, per 96:
 * a vpmulld and a vpaddd per sub-block sum (one per 8 vpdpbusd for Q4_K,
 * per 4 for Q6_K), then per superblock and row the mins (vpmaddwd, vpaddd)
 * and the float epilogue. */
#define MUL(r) "vpmulld %%zmm22, %%zmm" #r ", %%zmm" #r "\n\t"
#define ADD(r) "vpaddd %%zmm22, %%zmm" #r ", %%zmm" #r "\n\t"
#define SC6    MUL(12) ADD(13) MUL(14) ADD(15) MUL(16) ADD(17)
#define SC12   SC6 SC6
#define SC24   SC12 SC12
#define MINS   "vpmaddwd %%zmm22, %%zmm26, %%zmm18\n\t" ADD(18) ADD(19)
#define KEPI   EPI(12) EPI(13) EPI(14) MINS MINS MINS
#define CLOBBERS                                                                                   \
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",       \
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20",  \
        "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26"
#define ZERO_SOURCES                                                                               \
    "vpxord %%zmm20, %%zmm20, %%zmm20\n\tvpxord %%zmm21, %%zmm21, %%zmm21\n\t"                     \
    "vpxord %%zmm22, %%zmm22, %%zmm22\n\tvxorps %%zmm23, %%zmm23, %%zmm23\n\t"                     \
    "vxorps %%zmm24, %%zmm24, %%zmm24\n\tvpxord %%zmm26, %%zmm26, %%zmm26\n\t"
#define LOOP(body)                                                                                 \
    __asm__ volatile(ZERO_SOURCES "1:\n\t" body "dec %0\n\tjnz 1b" : "+r"(n) : : CLOBBERS, "cc")

static void dp_only(long n) {
    LOOP(DP96);
}
static void dp_epilogue(long n) {
    LOOP(DP96 EPI12);
}
static void dp_inserts(long n) {
    LOOP(DP96 INS24);
}
static void dp_tile_mix(long n) {
    LOOP(DP96 EPI12 INS24);
}

static void dp_q4_K(long n) {
    LOOP(DP96 SC12 KEPI);
}
static void dp_q6_K(long n) {
    LOOP(DP96 SC24 KEPI);
}

/* The Q4_K tile on unpacked quants as it runs (kquant_x8_zmm.h): per
 * sub-block and activation row a fresh sum (vpxord), 8 vpdpbusd into it,
 * each taking its activation word as a {1to16} broadcast from memory (L1)
 * and a zmm of quants loaded per 4 of them (4 rows), then a vpmulld and a
 * vpaddd into the row's superblock sum. SUB_PAIRS2: two pairs of groups,
 * one vpbroadcastd serving two vpdpbusd. */
/* clang-format off */
#define Z(r)       "vpxord %%zmm" #r ", %%zmm" #r ", %%zmm" #r "\n\t"
#define FOLD(r, t) "vpaddd %%zmm" #r ", %%zmm" #t ", %%zmm" #t "\n\t"
#define DB(r, o)   "vpdpbusd " #o "(%1)%{1to16%}, %%zmm21, %%zmm" #r "\n\t"
#define LQ(o)      "vmovdqu64 " #o "(%2), %%zmm21\n\t"
#define DB4(o)     LQ(o) DB(0, o) DB(1, o + 4) DB(2, o + 8) DB(3, o + 12)
#define SUB_PAIR(o)                                                                                \
    Z(0) Z(1) Z(2) Z(3)                                                                            \
    DB4(o) DB4(o + 16) DB4(o + 32) DB4(o + 48) DB4(o + 64) DB4(o + 80) DB4(o + 96) DB4(o + 112)    \
    MUL(0) MUL(1) MUL(2) MUL(3) FOLD(0, 12) FOLD(1, 13) FOLD(2, 14) FOLD(3, 15)
#define LQ2(o)     "vmovdqu64 " #o "(%2), %%zmm21\n\tvmovdqu64 " #o "+64(%2), %%zmm28\n\t"
#define BC(o)      "vpbroadcastd " #o "(%1), %%zmm27\n\t"
#define D2(a, b)   "vpdpbusd %%zmm27, %%zmm21, %%zmm" #a "\n\tvpdpbusd %%zmm27, %%zmm28, %%zmm" #b "\n\t"
#define P2(o)      LQ2(o) BC(o) D2(0, 4) BC(o + 4) D2(1, 5) BC(o + 8) D2(2, 6) BC(o + 12) D2(3, 7)
#define SUB_PAIRS2(o)                                                                              \
    Z(0) Z(1) Z(2) Z(3) Z(4) Z(5) Z(6) Z(7)                                                        \
    P2(o) P2(o + 16) P2(o + 32) P2(o + 48) P2(o + 64) P2(o + 80) P2(o + 96) P2(o + 112)            \
    MUL(0) MUL(1) MUL(2) MUL(3) MUL(4) MUL(5) MUL(6) MUL(7)                                        \
    FOLD(0, 12) FOLD(1, 13) FOLD(2, 14) FOLD(3, 15) FOLD(4, 16) FOLD(5, 17) FOLD(6, 18) FOLD(7, 19)
/* clang-format on */
#define LOOP_MEM(body)                                                                             \
    static int8_t x[2048] __attribute__((aligned(64))), q[2048] __attribute__((aligned(64)));      \
    __asm__ volatile(ZERO_SOURCES "1:\n\t" body "dec %0\n\tjnz 1b"                                 \
                     : "+r"(n)                                                                     \
                     : "r"(x), "r"(q)                                                              \
                     : CLOBBERS, "xmm27", "xmm28", "cc", "memory")

static void q4_K_one_pair(long n) {
    LOOP_MEM(SUB_PAIR(0) SUB_PAIR(128) SUB_PAIR(256));
}
static void q4_K_two_pairs(long n) {
    LOOP_MEM(SUB_PAIRS2(0) SUB_PAIRS2(128) SUB_PAIRS2(256));
}

/* Best ns per step of 5 rounds (another process can only slow one). */
static double ns_per_step(void (*fn)(long), long steps) {
    double best = 1e30;
    fn(steps / 10);
    for (int r = 0; r < 5; r++) {
        const double t0 = now_s();
        fn(steps);
        const double ns = (now_s() - t0) / (double)steps * 1e9;
        if (ns < best) best = ns;
    }
    return best;
}

int main(int argc, char **argv) {
    const long steps = argc > 1 ? atol(argv[1]) : 4000000;
    if (steps < 10) {
        fprintf(stderr, "bench_dot_mix: steps must be at least 10\n");
        return 2;
    }
    static const struct {
        const char *name;
        void (*fn)(long);
        int dp; /* vpdpbusd a step */
    } mixes[] = {
        {"vpdpbusd only", dp_only, 96},
        {"+ the block epilogue (12 cvt, 12 mul, 12 fma)", dp_epilogue, 96},
        {"+ the pair inserts (24)", dp_inserts, 96},
        {"+ both: the tile's vector work", dp_tile_mix, 96},
        {"Q4_K tile: + 12 vpmulld, 12 vpaddd, epilogue", dp_q4_K, 96},
        {"Q6_K tile: + 24 vpmulld, 24 vpaddd, epilogue", dp_q6_K, 96},
        {"Q4_K tile as it runs: its loads, broadcasts", q4_K_one_pair, 96},
        {"the same over two pairs: a broadcast per 2", q4_K_two_pairs, 192},
    };
    double base = 0;
    printf("one thread, 96 vpdpbusd zmm a step (6144 int8 mul-adds)\n");
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++) {
        const double ns = ns_per_step(mixes[i].fn, steps) * 96 / mixes[i].dp;
        if (i == 0) base = ns;
        printf("%-48s %7.2f ns  %6.1f G mul-add/s  %5.1f%% of vpdpbusd only\n", mixes[i].name, ns,
               6144.0 / ns, 100.0 * base / ns);
    }
    return 0;
}

#else

int main(void) {
    printf("bench_dot_mix: needs AVX-512 VNNI (the zmm tile's mix); this build has none\n");
    return 0;
}

#endif
