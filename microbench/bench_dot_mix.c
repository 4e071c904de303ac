/* What the Q8_0 / Q4_0 prefill tile's instruction mix allows on this CPU:
 * the rate of vpdpbusd alone (the int8 peak `tps machine` measures) beside
 * the same 96 vpdpbusd per step with the other vector work of one block
 * of r8_tile_z (r8_tile_zmm.h; 3 pairs of groups x 4 activation rows):
 * its float epilogue (a cvtdq2ps, a mulps and an fma per accumulator and
 * block: acc = fma(float(isum), d_w * d_x, acc), the order every tier and
 * the reference keep) and the 24 inserts that build pair vectors from two
 * groups. Registers only, no memory, so the figures are the ceiling of the
 * mix, not of the caches. Read bench_kernels' q8_0r figure against the
 * fourth line ("+ both"): the tile's gap to it is loads, broadcasts and the
 * loop. Two memory loops follow (the Q4_K tile before its sums were
 * paired). Then which instructions take vpdpbusd's execution units: 96
 * vpdpbusd beside 24 of another, independent instruction; one that slows
 * the step by 24/96 shares vpdpbusd's units, one that does not runs beside it (on
 * the Zen 5: vpmulld, vpmaddwd, vpdpwssd and FMAs share; vpaddd, cvt,
 * logic and shuffles run beside). The K-quant tiles as they are now
 * (kquant_x8_zmm.h) come last, a superblock of 16 weight rows by 4
 * activation rows a step: each sharing instruction beside their 256
 * vpdpbusd is a vpdpbusd not done, which bounds each type below the peak
 * whatever its loads and caches do.
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
/* The older Q4_K loops' scale step: a vpmulld in place. */
#define MUL(r) "vpmulld %%zmm22, %%zmm" #r ", %%zmm" #r "\n\t"
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

/* The Q4_K tile on unpacked quants as it ran before its sub-block sums
 * were paired (2026-12-06; kquant_x8_zmm.h, zk_q4_k_paired, now): per
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

/* 24 of one instruction a step beside DP96, into zmm12-17 (independent
 * of the vpdpbusd chains; 4 to a register a step, far from its latency). */
#define X8(X)       X(12) X(13) X(14) X(15) X(16) X(17) X(12) X(13)
#define X24(X)      X8(X) X8(X) X8(X)
#define I_MULLD(r)  "vpmulld %%zmm22, %%zmm23, %%zmm" #r "\n\t"
#define I_MADDWD(r) "vpmaddwd %%zmm22, %%zmm23, %%zmm" #r "\n\t"
#define I_DPWSSD(r) "vpdpwssd %%zmm22, %%zmm23, %%zmm" #r "\n\t"
#define I_FMA(r)    "vfmadd231ps %%zmm23, %%zmm24, %%zmm" #r "\n\t"
#define I_MULPS(r)  "vmulps %%zmm23, %%zmm24, %%zmm" #r "\n\t"
#define I_ADDD(r)   "vpaddd %%zmm22, %%zmm23, %%zmm" #r "\n\t"
#define I_CVT(r)    "vcvtdq2ps %%zmm22, %%zmm" #r "\n\t"
#define I_AND(r)    "vpandd %%zmm22, %%zmm23, %%zmm" #r "\n\t"
#define I_PACK(r)   "vpackssdw %%zmm22, %%zmm23, %%zmm" #r "\n\t"
#define I_SHUF(r)   "vpshufd $0x55, %%zmm22, %%zmm" #r "\n\t"
#define WITH(name, I)                                                                              \
    static void with_##name(long n) {                                                              \
        LOOP(DP96 X24(I));                                                                         \
    }
WITH(mulld, I_MULLD)
WITH(maddwd, I_MADDWD)
WITH(dpwssd, I_DPWSSD)
WITH(fma, I_FMA)
WITH(mulps, I_MULPS)
WITH(addd, I_ADDD)
WITH(cvt, I_CVT)
WITH(and, I_AND)
WITH(pack, I_PACK)
WITH(shuf, I_SHUF)

/* A superblock of the unpacked K-quant tiles, 16 weight rows x 4
 * activation rows (256 vpdpbusd over 8 chains), with their other vector
 * work counted from kquant_x8_zmm.h, registers only. Q4_K (zk_q4_k_paired
 * and q4_K_x8_tile_z): per row 8 vpackssdw + 8 vpdpwssd (the sub-block
 * scales), the mins (4 vpmaddwd, 3 vpaddd) and the float epilogue (2 cvt,
 * 2 mul, 2 fma); per superblock its scales unpacked (about 40 logic ops).
 * Q6_K (q6_K_x8_tile_z): per row 16 vpmulld + 16 vpaddd (16-element
 * sub-blocks), the offset (8 vpmaddwd, 8 vpaddd, a shift and a sub) and
 * the epilogue (cvt, mul, fma); per superblock 16 scale extractions (a
 * shift pair each) and 8 inserts. */
#define DP8     DP(0) DP(1) DP(2) DP(3) DP(4) DP(5) DP(6) DP(7)
#define DP64    DP8 DP8 DP8 DP8 DP8 DP8 DP8 DP8
#define DP256   DP64 DP64 DP64 DP64
#define X4(X)   X(12) X(13) X(14) X(15)
#define X2(X)   X(16) X(17)
#define LOGIC40 X24(I_AND) X8(I_AND) X8(I_AND)
#define Q4_ROW                                                                                     \
    X8(I_PACK) X8(I_DPWSSD) X4(I_MADDWD) X2(I_ADDD) I_ADDD(12) X2(I_CVT) X2(I_MULPS) X2(I_FMA)
#define Q6_TAIL I_AND(14) I_ADDD(15) I_CVT(16) I_MULPS(17) I_FMA(12)
#define Q6_ROW  X8(I_MULLD) X8(I_MULLD) X8(I_ADDD) X8(I_ADDD) X8(I_MADDWD) X8(I_ADDD) Q6_TAIL
#define Q6_SB   X24(I_AND) X8(I_AND) INS8
static void q4_K_superblock(long n) {
    LOOP(DP256 Q4_ROW Q4_ROW Q4_ROW Q4_ROW LOGIC40);
}
static void q6_K_superblock(long n) {
    LOOP(DP256 Q6_ROW Q6_ROW Q6_ROW Q6_ROW Q6_SB);
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
        {"Q4_K vpmulld tile with its loads, broadcasts", q4_K_one_pair, 96},
        {"the same over two pairs: a broadcast per 2", q4_K_two_pairs, 192},
        {"beside 24 vpmulld", with_mulld, 96},
        {"beside 24 vpmaddwd", with_maddwd, 96},
        {"beside 24 vpdpwssd", with_dpwssd, 96},
        {"beside 24 vfmadd231ps", with_fma, 96},
        {"beside 24 vmulps", with_mulps, 96},
        {"beside 24 vpaddd", with_addd, 96},
        {"beside 24 vcvtdq2ps", with_cvt, 96},
        {"beside 24 vpandd", with_and, 96},
        {"beside 24 vpackssdw", with_pack, 96},
        {"beside 24 vpshufd", with_shuf, 96},
        {"Q4_K superblock now (16 x 4, registers)", q4_K_superblock, 256},
        {"Q6_K superblock now (16 x 4, registers)", q6_K_superblock, 256},
    };
    double base = 0;
    printf("one thread; ns per 96 vpdpbusd zmm (6144 int8 mul-adds) of each loop\n");
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
