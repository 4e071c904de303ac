/* Internal to the vector tiers' float-weight kernels (dot_avx2.c,
 * dot_f16_neon.c): the loop over weight and activation rows that both run
 * around their own tile, so that each file holds only its tile. Include
 * after the file's target pragma and intrinsics header. Not here: the
 * tiles, the tables, threading (matmul.c). */
#ifndef TPS_KERNELS_F_ROWS_H
#define TPS_KERNELS_F_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h" /* ALWAYS_INLINE */

/* MW weight rows from W (w_row_bytes apart, type wt) x MX activation rows
 * from x (rows of n_in floats) -> out[j ld_out + i], i < MW, j < MX; MW
 * and MX constants. */
typedef void f_tile_fn(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                       size_t w_row_bytes, const float *restrict x, size_t n_in, const int wt,
                       const int MW, const int MX);

/* Weight rows [o0, o1) x MX activation rows from x: MW rows per tile
 * while they last, then one. */
ALWAYS_INLINE void f_cols(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                          size_t w_row_bytes, size_t o0, size_t o1, const float *restrict x,
                          size_t n_in, const int wt, const int MW, const int MX, f_tile_fn *tile) {
    size_t o = o0;
    for (; o + MW <= o1; o += MW)
        tile(out + o, ld_out, W + o * w_row_bytes, w_row_bytes, x, n_in, wt, MW, MX);
    for (; o < o1; o++)
        tile(out + o, ld_out, W + o * w_row_bytes, w_row_bytes, x, n_in, wt, 1, MX);
}

/* Weight rows [o0, o1) x n_rows_x activation rows (act: F32 rows of n_in):
 * 4 activation rows x 2 weight rows per tile while they last, then each
 * row left x 4 weight rows. The tile is inlined (a known function in an
 * always-inline body). */
ALWAYS_INLINE void f_rows(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                          size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                          size_t n_rows_x, size_t n_in, const int wt, f_tile_fn *tile) {
    const float *x = (const float *)act;
    size_t r = 0;
    for (; r + 4 <= n_rows_x; r += 4)
        f_cols(out + r * ld_out, ld_out, W, w_row_bytes, o0, o1, x + r * n_in, n_in, wt, 2, 4,
               tile);
    for (; r < n_rows_x; r++)
        f_cols(out + r * ld_out, ld_out, W, w_row_bytes, o0, o1, x + r * n_in, n_in, wt, 4, 1,
               tile);
}

#endif
