/* winograd_f23.h - the transforms of Winograd F(2x2, 3x3) (Lavin & Gray 2016) for the bf16 conv
 * (winograd_bf16.h brings the GEMM of the transform domain and the epilogue; the fp32 conv runs
 * F(4,3), conv2d/winograd_f43.h).
 *
 *   Y = A^T [ (G g G^T) .* (B^T d B) ] A: a 2x2 output tile from a 4x4 input patch d at stride 2,
 *   16 products instead of 36 (2.25x fewer multiplies).
 * Exactness: B^T and A^T are 0/+-1 (adds only), G has 1/2 (exact scaling); U = G g G^T is made
 * in double and rounded once. All plain C, fp32 throughout, written for the auto-vectoriser. */
#ifndef A2R_WINOGRAD_F23_H
#define A2R_WINOGRAD_F23_H

#include "a2r_math.h"

/* U[p] = (G g G^T)[p] of one 3x3 filter, in double (rounded once). G rows: (1,0,0),
 * (1/2,1/2,1/2), (1/2,-1/2,1/2), (0,0,1). */
static inline void wino_filter(const float *g9, float u[16]) {
    double t[4][3], r[4][4];
    for (int j = 0; j < 3; j++) {
        const double a = g9[j], b = g9[3 + j], c = g9[6 + j];
        t[0][j] = a;
        t[1][j] = 0.5 * (a + b + c);
        t[2][j] = 0.5 * (a - b + c);
        t[3][j] = c;
    }
    for (int i = 0; i < 4; i++) {
        const double a = t[i][0], b = t[i][1], c = t[i][2];
        r[i][0] = a;
        r[i][1] = 0.5 * (a + b + c);
        r[i][2] = 0.5 * (a - b + c);
        r[i][3] = c;
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) u[i * 4 + j] = (float)r[i][j];
}

/* The 16 V values (B^T d B) of tile k from the split rows (e_r, o_r at eo + (2r, 2r+1)*eb):
 * patch columns d0..d3 of row r are e_r[k], o_r[k], e_r[k+1], o_r[k+1]. */
static inline void wino_in_tile(const float *restrict eo, int64_t eb, int64_t k, float v[16]) {
    float h[4][4];
    for (int r = 0; r < 4; r++) {
        const float *e = eo + 2 * r * eb, *o = eo + (2 * r + 1) * eb;
        /* h[r][j] = (d_r B)[j]: d0 - d2, d1 + d2, d2 - d1, d1 - d3 */
        h[r][0] = e[k] - e[k + 1];
        h[r][1] = o[k] + e[k + 1];
        h[r][2] = e[k + 1] - o[k];
        h[r][3] = o[k] - o[k + 1];
    }
    /* rows: B^T along y: h0 - h2, h1 + h2, h2 - h1, h1 - h3 */
    for (int j = 0; j < 4; j++) {
        v[j] = h[0][j] - h[2][j];
        v[4 + j] = h[1][j] + h[2][j];
        v[8 + j] = h[2][j] - h[1][j];
        v[12 + j] = h[1][j] - h[3][j];
    }
}

/* wino_in_tile for tiles k < len into v[p*ps + k] (the 16 output rows never overlap: ps >= len). */
static inline void wino_in_tiles(const float *restrict eo, int64_t eb, int64_t len,
                                 float *restrict v, int64_t ps) {
#pragma GCC ivdep
    for (int64_t k = 0; k < len; k++) {
        float t[16];
        wino_in_tile(eo, eb, k, t);
#pragma GCC unroll 16
        for (int p = 0; p < 16; p++) v[p * ps + k] = t[p];
    }
}

/* A^T M A of len tiles: M position p of tile k at m[p*ps + k]; the tiles' two output rows go to
 * y0[2k, 2k+1] and y1[2k, 2k+1]. */
static inline void wino_out_tiles(const float *restrict m, int64_t ps, int64_t len,
                                  float *restrict y0, float *restrict y1) {
    for (int64_t k = 0; k < len; k++) {
        float s0[4], s1[4];
        for (int j = 0; j < 4; j++) {
            const float a = m[j * ps + k], b = m[(4 + j) * ps + k], c = m[(8 + j) * ps + k],
                        d = m[(12 + j) * ps + k];
            s0[j] = a + b + c;
            s1[j] = b - c - d;
        }
        y0[2 * k] = s0[0] + s0[1] + s0[2];
        y0[2 * k + 1] = s0[1] - s0[2] - s0[3];
        y1[2 * k] = s1[0] + s1[1] + s1[2];
        y1[2 * k + 1] = s1[1] - s1[2] - s1[3];
    }
}

#endif
