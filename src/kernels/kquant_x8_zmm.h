/* 512-bit tiles of the Q4_K / Q6_K 8-row group kernels, for CPUs with
 * AVX-512 VNNI (included by dot_kquant_x8_avx2.c only, after its ymm
 * helpers). As in r8_tile_zmm.h: with several activation rows a zmm holds
 * two groups (lanes 0-7 group g's rows, lanes 8-15 group g + 1's) against
 * the same broadcast activation word (one activation row takes the ymm
 * tile: r8_tile_zmm.h says why). Every lane runs the ymm tile's
 * VNNI integers and float steps in the same order, so the bits are the
 * same whichever tile computed an element. */
#ifndef TPS_KERNELS_KQUANT_X8_ZMM_H
#define TPS_KERNELS_KQUANT_X8_ZMM_H

#include <stddef.h>

#include "kernels/r8_tile_zmm.h"
#include "kernels/zmm_bcast.h"

#if R8_ZMM && K8_VNNI

/* chain_pin (vnni.h) for zmm: without it GCC defers the tiles' scale
 * products to the end of a superblock (integer adds reassociate), keeping
 * every sub-block sum live at once and spilling them to the stack: 1.2x
 * (Q4_K) and 1.35x (Q6_K) slower on 512 activation rows of 2048 x 5632
 * (thread CPU time, 2026-12-05). */
ALWAYS_INLINE __m512i zk_pin(__m512i v) {
    KEEP_IN_REGISTER(v);
    return v;
}

/* k8_scales for two groups. */
ALWAYS_INLINE void zk_scales(const uint8_t *g0, size_t gs, __m512i s[4]) {
    const size_t off = offsetof(block_q4_Kx8, scales);
    const __m512i u0 = z_pair(g0, gs, off), u1 = z_pair(g0, gs, off + 32);
    const __m512i u2 = z_pair(g0, gs, off + 64);
    const __m512i lo6 = _mm512_set1_epi8(0x3f), lo4 = _mm512_set1_epi8(0x0f);
    const __m512i top2 = _mm512_set1_epi8(0x03);
    s[0] = _mm512_and_si512(u0, lo6);
    s[1] = _mm512_or_si512(_mm512_and_si512(u2, lo4),
                           _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), top2), 4));
    s[2] = _mm512_and_si512(u1, lo6);
    s[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), lo4),
                           _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), top2), 4));
}

ALWAYS_INLINE __m512i zk_byte(__m512i v, const int t) {
    return _mm512_and_si512(_mm512_srli_epi32(v, 8 * t), _mm512_set1_epi32(0xff));
}

/* The activation block's paired 32-element sums (kernel_act_k_side.q4) in 16 lanes. */
ALWAYS_INLINE void zk_bsum_pairs(const kernel_act_k_side *restrict sd, __m512i p[4]) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        p[i] = _mm512_set1_epi32(sd->q4[i]);
}

/* k8_quants for groups g, g + 1 (gp, gp + gs). */
ALWAYS_INLINE __m512i zk_quants(const uint8_t *restrict gp, size_t gs, const int is_q5, const int k,
                                const int h, const int c) {
    const __m512i v = z_pair(gp, gs, k8_qs_off(is_q5) + (size_t)(8 * k + c) * 32);
    const __m512i q = _mm512_and_si512(h ? _mm512_srli_epi16(v, 4) : v, _mm512_set1_epi8(0x0f));
    if (!is_q5) return q;
    const __m512i qh = z_pair(gp, gs, offsetof(block_q5_Kx8, qh) + (size_t)c * 32);
    const __m512i hb = h ? _mm512_srli_epi32(qh, k) : _mm512_slli_epi32(qh, 4 - k);
    return _mm512_or_si512(q, _mm512_and_si512(hb, _mm512_set1_epi8(0x10)));
}

/* ---- prefill: a pair's quants unpacked once to bytes ----------------------
 *
 * Beside many activation rows each weight tile is read once per 4 of them,
 * and every read spent more on getting the quants out of the packed group
 * (two loads and an insert per pair, nibble or 2-bit shifts, Q6_K's fourth
 * chunk rebuilt from three) than on the dpbusd they feed. A rows kernel
 * given enough activation rows (ZK_UNPACK_ROWS) unpacks each pair once into
 * thread scratch, a K chunk of superblocks at a time (ZK_KC in the rows
 * kernel): per superblock b of the chunk and chunk m of b (its elements
 * 4m .. 4m + 3), 64 bytes at U + (64 b + m) * 64, group g's 8 rows (4
 * bytes each, the packed lane order) then group g + 1's, as the packed
 * tiles' z_pair vectors were (Q4_K's chunks interleaved in pairs instead:
 * zk_q4_k_paired). The tiles then load one zmm per chunk and compute the
 * same integers and float steps, so the bits do not change. */
#define ZK_UNPACK_ROWS 16

/* acc += dpbusd(u, the int32 at p in every lane), the broadcast folded into
 * the instruction's memory operand ({1to16}): GCC loads it into a register
 * with vpbroadcastd first. */
ALWAYS_INLINE __m512i zk_dpbusd_b(__m512i acc, __m512i u, const int8_t *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const int32_t *)p));
    return acc;
}

/* The Q6_K and Q5_K tiles' last activation row (ZK_SHUF_ROWS of them)
 * takes its words from one zmm load per 64 bytes, each broadcast by two
 * shuffles, not by a {1to16} operand each: the tile is bound by its loads
 * (two a cycle here), and the shuffles run beside vpdpbusd (16 vpdpbusd
 * and 8 vpshufd: 8.2 cycles, 8.1 alone). One row so: 1.06x on L1-resident
 * data (the Q4_K tile then); two rows 1.03x, four 0.9x. bench_kernels 2048
 * x 5632, 512 rows, 6 A B pairs (Zen 5, 2026-12-06): Q4_K 1.035x on one
 * thread, 1.02x on two; Q6_K 1.02x. Q4_K's unpacked tile now halves its
 * broadcasts instead (zk_q4_k_paired). */
#define ZK_SHUF_ROWS 1

/* acc += dpbusd(u, word w of the activation's 64 bytes a). */
ALWAYS_INLINE __m512i zk_dpbusd_r(__m512i acc, __m512i u, __m512i a, const int w) {
    return _mm512_dpbusd_epi32(acc, u, zmm_bcast_epi32(a, w));
}

/* A tile's float sums at its start: zero, or (cont) the sums it stored
 * over the superblocks before: a K chunk's tile continues its elements'
 * sequence (the same float steps in the same order, so the same bits). */
ALWAYS_INLINE void zk_acc_start(__m512 acc[4], const float *restrict out, size_t ld_out,
                                const int MX, const int cont) {
#pragma GCC unroll 4
    for (int j = 0; j < MX; j++)
        acc[j] = cont ? _mm512_loadu_ps(out + (size_t)j * ld_out) : _mm512_setzero_ps();
}

ALWAYS_INLINE __m512i zk_unpacked(const uint8_t *restrict U, size_t b, const int m) {
    return _mm512_loadu_si512((const void *)(U + (64 * b + (size_t)m) * 64));
}

/* Q4_K's unpacked chunks go in pairs (m even): chunk m holds the
 * unpacklo_epi32 of K steps m and m + 1, chunk m + 1 their unpackhi, so
 * lanes 4L .. 4L + 3 of the two hold rows 4L, 4L + 1 (chunk m) and
 * 4L + 2, 4L + 3 (chunk m + 1), each at both steps. Beside them one 8-byte
 * activation broadcast serves both chunks' vpdpbusd (half the broadcast
 * loads), and a lane's sum covers 16 of a sub-block's 32 products:
 * |sum| <= 16 * 15 * 128 fits int16, so vpackssdw lays the two halves of
 * each row side by side, in row order, and one vpdpwssd by the scale in
 * both halves adds sum * scale to is: the integers of vpmulld and vpaddd,
 * one instruction on the vpdpbusd ports, not vpmulld's more. Same bits;
 * the tile 1.07x on L1-resident data (2026-12-06, Zen 5; with no scale
 * step at all it would be 1.18x); bench_kernels q4_Kr, 512 rows, 4 A B
 * rounds: 2048x5632 1.06x on one thread, 1.055x on two, 5632x2048 1.0x /
 * 1.05x. Q5_K's sums (quants to 31) and Q6_K's (16-element sub-blocks,
 * quants to 63) do not fit int16. */
ALWAYS_INLINE void zk_q4_k_paired(__m512i is[4], const uint8_t *restrict U, size_t b, const int k,
                                  const block_q8_K *const x[4], const __m512i sm[4], const int MX) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m512i s[2][4] = {{{0}}};
#pragma GCC unroll 4
        for (int cp = 0; cp < 4; cp++) {
            const int m = 16 * k + 8 * h + 2 * cp;
            const __m512i w0 = zk_unpacked(U, b, m), w1 = zk_unpacked(U, b, m + 1);
#pragma GCC unroll 4
            for (int j = 0; j < MX; j++) {
                int64_t v;
                memcpy(&v, x[j][b].qs + 64 * k + 32 * h + 8 * cp, sizeof v);
                const __m512i a = _mm512_set1_epi64(v);
                s[0][j] = _mm512_dpbusd_epi32(s[0][j], w0, a);
                s[1][j] = _mm512_dpbusd_epi32(s[1][j], w1, a);
            }
        }
        const __m512i sc = zk_byte(sm[k / 2], 2 * (k % 2) + h);
        const __m512i sc2 = _mm512_or_si512(sc, _mm512_slli_epi32(sc, 16));
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++)
            is[j] = zk_pin(_mm512_dpwssd_epi32(is[j], _mm512_packs_epi32(s[0][j], s[1][j]), sc2));
    }
}

/* q4_K_x8_tile for groups g, g + 1 (G, G + gs) x MX activation rows. */
ALWAYS_INLINE void q4_K_x8_tile_z(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                                  size_t gs, const uint8_t *restrict act, size_t act_row_bytes,
                                  size_t nb, const int MX, const int is_q5,
                                  const uint8_t *restrict U, const int cont, size_t soff) {
    const size_t GB = k8_gb(is_q5);
    const block_q8_K *x[4];
    const kernel_act_k_side *sd[4];
    x8_act_q8_K_side(x, sd, act, act_row_bytes, soff, MX);
    __m512 acc[4];
    zk_acc_start(acc, out, ld_out, MX, cont);
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *gp = G + b * GB;
        __m512i sm[4], is[4] = {{0}};
        zk_scales(gp, gs, sm);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            if (U && !is_q5) {
                zk_q4_k_paired(is, U, b, k, x, sm, MX);
                continue;
            }
            __m512i s[2][4] = {{{0}}}, a[4] = {{0}};
#pragma GCC unroll 4
            for (int j = MX - ZK_SHUF_ROWS; U && j < MX; j++)
                a[j] = _mm512_loadu_si512((const void *)(x[j][b].qs + 64 * k));
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                if (!U) {
                    _mm_prefetch((const char *)(gp + 2 * GB) + GB / 32 * (8 * k + c), _MM_HINT_T0);
                    _mm_prefetch((const char *)(gp + gs + 2 * GB) + GB / 32 * (8 * k + c),
                                 _MM_HINT_T0);
                }
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    const __m512i q = U ? zk_unpacked(U, b, 16 * k + 8 * h + c)
                                        : zk_quants(gp, gs, is_q5, k, h, c);
#pragma GCC unroll 4
                    for (int j = 0; j < MX; j++)
                        s[h][j] =
                            U && j >= MX - ZK_SHUF_ROWS
                                ? zk_dpbusd_r(s[h][j], q, a[j], 8 * h + c)
                                : zk_dpbusd_b(s[h][j], q, x[j][b].qs + 64 * k + 32 * h + 4 * c);
                }
            }
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m512i sc = zk_byte(sm[k / 2], 2 * (k % 2) + h);
#pragma GCC unroll 4
                for (int j = 0; j < MX; j++)
                    is[j] = zk_pin(_mm512_add_epi32(is[j], _mm512_mullo_epi32(s[h][j], sc)));
            }
        }
        __m512i bp[4][4];
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++)
            zk_bsum_pairs(&sd[j][b], bp[j]);
        const __m512i even = _mm512_set1_epi32(0x00ff00ff);
        const __m512i mp[4] = {
            _mm512_and_si512(sm[2], even), _mm512_and_si512(_mm512_srli_epi32(sm[2], 8), even),
            _mm512_and_si512(sm[3], even), _mm512_and_si512(_mm512_srli_epi32(sm[3], 8), even)};
        const __m512 dw = z_half_pair(gp, gs, offsetof(block_q4_Kx8, d));
        const __m512 dm = _mm512_castsi512_ps(
            _mm512_xor_si512(_mm512_castps_si512(z_half_pair(gp, gs, offsetof(block_q4_Kx8, dmin))),
                             _mm512_castps_si512(_mm512_set1_ps(-0.0f))));
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++) {
            const __m512i im =
                _mm512_add_epi32(_mm512_add_epi32(_mm512_madd_epi16(mp[0], bp[j][0]),
                                                  _mm512_madd_epi16(mp[1], bp[j][1])),
                                 _mm512_add_epi32(_mm512_madd_epi16(mp[2], bp[j][2]),
                                                  _mm512_madd_epi16(mp[3], bp[j][3])));
            const __m512 dx = _mm512_set1_ps(x[j][b].d);
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[j]), _mm512_mul_ps(dw, dx), acc[j]);
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(im), _mm512_mul_ps(dm, dx), acc[j]);
        }
    }
    z_store_tile(out, ld_out, &acc, 16, 1, MX);
}

/* q6_quants for two groups. */
ALWAYS_INLINE __m512i zk_q6_quants(const uint8_t *g0, size_t gs, const int h, const int t,
                                   const int c) {
    const __m512i lo6 = _mm512_set1_epi8(0x3f), top2 = _mm512_set1_epi8((char)0xc0);
    const size_t q = offsetof(block_q6_Kx8, q);
    const size_t o0 = q + (size_t)(24 * h + c) * 32, o1 = q + (size_t)(24 * h + 8 + c) * 32;
    const size_t o2 = q + (size_t)(24 * h + 16 + c) * 32;
    if (t < 3) return _mm512_and_si512(z_pair(g0, gs, t == 0 ? o0 : t == 1 ? o1 : o2), lo6);
    const __m512i a = _mm512_srli_epi16(_mm512_and_si512(z_pair(g0, gs, o0), top2), 6);
    const __m512i b = _mm512_srli_epi16(_mm512_and_si512(z_pair(g0, gs, o1), top2), 4);
    const __m512i d = _mm512_srli_epi16(_mm512_and_si512(z_pair(g0, gs, o2), top2), 2);
    return _mm512_or_si512(_mm512_or_si512(a, b), d);
}

/* Groups g, g + 1 (G, G + gs; superblocks gb bytes apart) of Q4_K, Q5_K
 * (is_q5) or Q6_K (is_q6), nb superblocks, into U (nb * 4096 bytes, the
 * layout above): chunk m of superblock b at U + (64 b + m) * 64; Q4_K's
 * chunks in pairs (zk_q4_k_paired). */
ALWAYS_INLINE void zk_unpack(uint8_t *restrict U, const uint8_t *restrict G, size_t gs, size_t gb,
                             size_t nb, const int is_q5, const int is_q6) {
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *gp = G + b * gb;
#pragma GCC unroll 32
        for (int m = 0; m < 64; m += 2) {
            __m512i q0, q1;
            if (is_q6) {
                q0 = zk_q6_quants(gp, gs, m / 32, m / 8 % 4, m % 8);
                q1 = zk_q6_quants(gp, gs, m / 32, m / 8 % 4, m % 8 + 1);
            } else {
                q0 = zk_quants(gp, gs, is_q5, m / 16, m / 8 % 2, m % 8);
                q1 = zk_quants(gp, gs, is_q5, m / 16, m / 8 % 2, m % 8 + 1);
                if (!is_q5) { /* zk_q4_k_paired's order */
                    const __m512i lo = _mm512_unpacklo_epi32(q0, q1);
                    q1 = _mm512_unpackhi_epi32(q0, q1);
                    q0 = lo;
                }
            }
            _mm512_storeu_si512((void *)(U + (64 * b + (size_t)m) * 64), q0);
            _mm512_storeu_si512((void *)(U + (64 * b + (size_t)m + 1) * 64), q1);
        }
    }
}

/* q6_bsum_dot for two groups. */
ALWAYS_INLINE __m512i zk_q6_bsum_dot(const uint8_t *g0, size_t gs, const int32_t bp[8]) {
    __m512i off = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int w = 0; w < 4; w++) {
        const __m512i sw = z_pair(g0, gs, offsetof(block_q6_Kx8, scales) + 32 * (size_t)w);
        const __m512i pe = _mm512_srai_epi16(_mm512_slli_epi16(sw, 8), 8);
        const __m512i po = _mm512_srai_epi16(sw, 8);
        off = _mm512_add_epi32(off, _mm512_madd_epi16(pe, _mm512_set1_epi32(bp[2 * w])));
        off = _mm512_add_epi32(off, _mm512_madd_epi16(po, _mm512_set1_epi32(bp[2 * w + 1])));
    }
    return off;
}

/* q6_K_x8_tile (VNNI form) for groups g, g + 1 x MX activation rows. */
ALWAYS_INLINE void q6_K_x8_tile_z(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                                  size_t gs, const uint8_t *restrict act, size_t act_row_bytes,
                                  size_t nb, const int MX, const uint8_t *restrict U,
                                  const int cont, size_t soff) {
    const block_q8_K *x[4];
    const kernel_act_k_side *sd[4];
    x8_act_q8_K_side(x, sd, act, act_row_bytes, soff, MX);
    __m512 acc[4];
    zk_acc_start(acc, out, ld_out, MX, cont);
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *gp = G + b * sizeof(block_q6_Kx8);
        __m512i is[4] = {{0}};
        __m512i ar[4] = {{0}}; /* set before use; GCC -O2 with TSan could not see that */
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++)
#pragma GCC unroll 2
                for (int s = 0; s < 2; s++) {
                    if (t % 2 == 0 && s == 0)
#pragma GCC unroll 4
                        for (int j = MX - ZK_SHUF_ROWS; U && j < MX; j++)
                            ar[j] = _mm512_loadu_si512(
                                (const void *)(x[j][b].qs + 128 * h + 64 * (t / 2)));
                    const __m512i sw = z_pair(
                        gp, gs, offsetof(block_q6_Kx8, scales) + 32 * (size_t)(2 * h + t / 2));
                    const int bt = 2 * (t % 2) + s;
                    const __m512i sc = _mm512_srai_epi32(_mm512_slli_epi32(sw, 24 - 8 * bt), 24);
                    __m512i a[4] = {{0}};
#pragma GCC unroll 4
                    for (int c = 0; c < 4; c++) {
                        const int cc = 4 * s + c;
                        const __m512i q = U ? zk_unpacked(U, b, 32 * h + 8 * t + cc)
                                            : zk_q6_quants(gp, gs, h, t, cc);
#pragma GCC unroll 4
                        for (int j = 0; j < MX; j++)
                            a[j] =
                                U && j >= MX - ZK_SHUF_ROWS
                                    ? zk_dpbusd_r(a[j], q, ar[j], 8 * (t % 2) + cc)
                                    : zk_dpbusd_b(a[j], q, x[j][b].qs + 128 * h + 32 * t + 4 * cc);
                    }
#pragma GCC unroll 4
                    for (int j = 0; j < MX; j++)
                        is[j] = zk_pin(_mm512_add_epi32(is[j], _mm512_mullo_epi32(a[j], sc)));
                }
        const __m512 dw = z_half_pair(gp, gs, offsetof(block_q6_Kx8, d));
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++) {
            const __m512i off = zk_q6_bsum_dot(gp, gs, sd[j][b].q6);
            const __m512i isum = _mm512_sub_epi32(is[j], _mm512_slli_epi32(off, 5));
            const __m512 dx = _mm512_set1_ps(x[j][b].d);
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, dx), acc[j]);
        }
    }
    z_store_tile(out, ld_out, &acc, 16, 1, MX);
}

#define KQ_ZMM 1
#else
#define KQ_ZMM 0
#endif

#endif
