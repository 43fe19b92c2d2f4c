/* winograd_f43.h - the transforms of Winograd F(4x4, 3x3) (Lavin & Gray 2016; points 0, +-1,
 * +-2, inf) for the fp32 conv (conv2d/winograd.h brings the GEMM and the epilogue).
 *
 *   Y = A^T [ (G g G^T) .* (B^T d B) ] A: a 4x4 output tile from a 6x6 input patch at stride 4,
 *   36 products instead of 144 (4x fewer multiplies; F(2,3): 2.25x).
 *   B^T = [4  0 -5  0  1  0]   G = [ 1/4     0     0]   A^T = [1  1  1  1  1  0]
 *         [0 -4 -4  1  1  0]       [-1/6  -1/6  -1/6]         [0  1 -1  2 -2  0]
 *         [0  4 -4 -1  1  0]       [-1/6   1/6  -1/6]         [0  1  1  4  4  0]
 *         [0 -2 -1  2  1  0]       [1/24  1/12   1/6]         [0  1 -1  8 -8  1]
 *         [0  2 -1 -2  1  0]       [1/24 -1/12   1/6]
 *         [0  4  0 -5  0  1]       [   0     0     1]
 * Numerics: U = G g G^T is made in double and rounded once; B^T and A^T have small integer
 * entries (4, 5, 8), so unlike F(2,3) the transforms round: on zero-mean data about 4e-6 of the
 * output's scale, 8x the direct sum's error; a common offset cancels (every row of B^T sums to
 * 0). tests/test_conv2d.py measures both. fp32 throughout; the tile loops run along tiles, unit
 * stride, in a2r_vf vectors. */
#ifndef A2R_CONV2D_WINOGRAD_F43_H
#define A2R_CONV2D_WINOGRAD_F43_H

#include "a2r_isa.h"
#include "a2r_math.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#define WINO_M 4                          /* output tile side */
#define WINO_T (WINO_M + 2)               /* input patch side */
#define WINO_POS (WINO_T * WINO_T)        /* transform positions: GEMMs per block */

/* U[p] = (G g G^T)[p] of one 3x3 filter, in double (rounded once). */
static inline void wino_filter(const float *g9, float u[WINO_POS]) {
    static const double G[WINO_T][3] = {{1.0 / 4, 0, 0},
                                        {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                        {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                        {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                        {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                        {0, 0, 1}};
    double t[WINO_T][3];
    for (int i = 0; i < WINO_T; i++)
        for (int j = 0; j < 3; j++)
            t[i][j] = G[i][0] * g9[j] + G[i][1] * g9[3 + j] + G[i][2] * g9[6 + j];
    for (int i = 0; i < WINO_T; i++)
        for (int l = 0; l < WINO_T; l++)
            u[i * WINO_T + l] = (float)(t[i][0] * G[l][0] + t[i][1] * G[l][1] + t[i][2] * G[l][2]);
}

/* r = B^T d for one line of 6 values of type T: 14 adds and multiplies by 2, 4, 5. */
#define WINO_IN_1D(T, d0, d1, d2, d3, d4, d5, r)                                              \
    do {                                                                                      \
        const T a_ = (d4) - 4.0f * (d2), b_ = (d3) - 4.0f * (d1);                             \
        const T c_ = (d4) - (d2), e_ = 2.0f * ((d3) - (d1));                                  \
        (r)[0] = (4.0f * (d0) - 5.0f * (d2)) + (d4);                                          \
        (r)[1] = a_ + b_;                                                                     \
        (r)[2] = a_ - b_;                                                                     \
        (r)[3] = c_ + e_;                                                                     \
        (r)[4] = c_ - e_;                                                                     \
        (r)[5] = (4.0f * (d1) - 5.0f * (d3)) + (d5);                                          \
    } while (0)

/* r = A^T m for one line of 6 values of type T. */
#define WINO_OUT_1D(T, m0, m1, m2, m3, m4, m5, r)                                             \
    do {                                                                                      \
        const T a_ = (m1) + (m2), b_ = (m1) - (m2), c_ = (m3) + (m4), e_ = (m3) - (m4);       \
        (r)[0] = ((m0) + a_) + c_;                                                            \
        (r)[1] = b_ + 2.0f * e_;                                                              \
        (r)[2] = a_ + 4.0f * c_;                                                              \
        (r)[3] = (b_ + 8.0f * e_) + (m5);                                                     \
    } while (0)

/* V (B^T d B) of tiles k < len, whole vectors of A2R_VEC_FLOATS tiles, into v[p*ps + k]. Row r of
 * tile k's patch is, from the split rows (phase j of row r at ph + (4r + j)*eb): p0[k], p1[k],
 * p2[k], p3[k], p0[k+1], p1[k+1]. The last vector reads the split rows up to k = len + VL and
 * writes v up to k = len + VL - 1 (VL = A2R_VEC_FLOATS): the caller leaves that slack, and a
 * later segment or the zeroed columns overwrite what lands past len. The GCC auto-vectoriser
 * leaves this loop scalar (36 live values), hence the vector type. */
static inline void wino_in_tiles(const float *restrict ph, int64_t eb, int64_t len,
                                 float *restrict v, int64_t ps) {
    for (int64_t k = 0; k < len; k += A2R_VEC_FLOATS) {
        a2r_vf t[WINO_T][WINO_T], col[WINO_T];
        for (int r = 0; r < WINO_T; r++) {
            const float *q = ph + 4 * r * eb + k;
            WINO_IN_1D(a2r_vf, a2r_vload(q), a2r_vload(q + eb), a2r_vload(q + 2 * eb),
                       a2r_vload(q + 3 * eb), a2r_vload(q + 1), a2r_vload(q + eb + 1), t[r]);
        }
        for (int j = 0; j < WINO_T; j++) {
            WINO_IN_1D(a2r_vf, t[0][j], t[1][j], t[2][j], t[3][j], t[4][j], t[5][j], col);
            for (int i = 0; i < WINO_T; i++) a2r_vstore(v + (i * WINO_T + j) * ps + k, col[i]);
        }
    }
}

/* y[4k + i] = o[i][k] for k < A2R_VEC_FLOATS, i < 4: one output row of A2R_VEC_FLOATS tiles. */
static inline void wino_store4(const a2r_vf o[4], float *y) {
#if defined(__AVX512F__)
    const __m512 t0 = _mm512_unpacklo_ps((__m512)o[0], (__m512)o[1]),
                 t1 = _mm512_unpackhi_ps((__m512)o[0], (__m512)o[1]),
                 t2 = _mm512_unpacklo_ps((__m512)o[2], (__m512)o[3]),
                 t3 = _mm512_unpackhi_ps((__m512)o[2], (__m512)o[3]);
    /* u_j: tiles j, j + 4, j + 8, j + 12, one per 128-bit lane */
    const __m512 u0 = _mm512_shuffle_ps(t0, t2, 0x44), u1 = _mm512_shuffle_ps(t0, t2, 0xEE),
                 u2 = _mm512_shuffle_ps(t1, t3, 0x44), u3 = _mm512_shuffle_ps(t1, t3, 0xEE);
    const __m512 a = _mm512_shuffle_f32x4(u0, u1, 0x44), b = _mm512_shuffle_f32x4(u2, u3, 0x44),
                 c = _mm512_shuffle_f32x4(u0, u1, 0xEE), d = _mm512_shuffle_f32x4(u2, u3, 0xEE);
    _mm512_storeu_ps(y, _mm512_shuffle_f32x4(a, b, 0x88));
    _mm512_storeu_ps(y + 16, _mm512_shuffle_f32x4(a, b, 0xDD));
    _mm512_storeu_ps(y + 32, _mm512_shuffle_f32x4(c, d, 0x88));
    _mm512_storeu_ps(y + 48, _mm512_shuffle_f32x4(c, d, 0xDD));
#elif defined(__AVX2__)
    const __m256 t0 = _mm256_unpacklo_ps((__m256)o[0], (__m256)o[1]),
                 t1 = _mm256_unpackhi_ps((__m256)o[0], (__m256)o[1]),
                 t2 = _mm256_unpacklo_ps((__m256)o[2], (__m256)o[3]),
                 t3 = _mm256_unpackhi_ps((__m256)o[2], (__m256)o[3]);
    /* u_j: tiles j and j + 4, one per 128-bit lane */
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    _mm256_storeu_ps(y, _mm256_permute2f128_ps(u0, u1, 0x20));
    _mm256_storeu_ps(y + 8, _mm256_permute2f128_ps(u2, u3, 0x20));
    _mm256_storeu_ps(y + 16, _mm256_permute2f128_ps(u0, u1, 0x31));
    _mm256_storeu_ps(y + 24, _mm256_permute2f128_ps(u2, u3, 0x31));
#else
    for (int k = 0; k < A2R_VEC_FLOATS; k++)
        for (int i = 0; i < 4; i++) y[4 * k + i] = o[i][k];
#endif
}

/* A^T M A of tiles k < len, whole vectors of A2R_VEC_FLOATS tiles: M position p of tile k at
 * m[p*ps + k]; output row r of tile k goes to y + r*yb at [4k, 4k + 4). The last vector reads
 * m up to k = len + VL - 1 and writes y up to 4 (len + VL) (VL = A2R_VEC_FLOATS): the caller
 * leaves that slack. */
static inline void wino_out_tiles(const float *restrict m, int64_t ps, int64_t len,
                                  float *restrict y, int64_t yb) {
    for (int64_t k = 0; k < len; k += A2R_VEC_FLOATS) {
        a2r_vf s[WINO_T][WINO_M], o[WINO_M];
        for (int j = 0; j < WINO_T; j++) {
            const float *q = m + j * ps + k;
            WINO_OUT_1D(a2r_vf, a2r_vload(q), a2r_vload(q + WINO_T * ps),
                        a2r_vload(q + 2 * WINO_T * ps), a2r_vload(q + 3 * WINO_T * ps),
                        a2r_vload(q + 4 * WINO_T * ps), a2r_vload(q + 5 * WINO_T * ps), s[j]);
        }
        for (int r = 0; r < WINO_M; r++) {
            WINO_OUT_1D(a2r_vf, s[0][r], s[1][r], s[2][r], s[3][r], s[4][r], s[5][r], o);
            wino_store4(o, y + r * yb + 4 * k);
        }
    }
}

#endif
