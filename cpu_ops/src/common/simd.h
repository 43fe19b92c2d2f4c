/* simd.h - the few vector operations the conv2d micro-kernel needs, per ISA level, so that its
 * body is written once. Intrinsics because GCC does not keep a plain-C MR x NR accumulator tile in
 * registers (it reloads and spills), and the build's -ffp-contract=off forbids a*b+c fusing.
 *
 * Register tile per level (MR output channels x NR = NV*VL output pixels):
 *   AVX-512  8 x 48: 24 zmm accumulators + 3 B vectors, A broadcast as a memory operand = 27 of
 *            32 zmm; MR = 8 divides the usual channel counts and a k step makes 11 loads for
 *            24 FMAs (12x32 makes 14 for 24). Other counts run in even blocks of fewer rows
 *            (12 = 6 + 6; conv2d/kernel.c).
 *   AVX2     4 x 24: 12 ymm accumulators + 3 B vectors + 1 broadcast = 16 of 16 ymm; a k step
 *            makes 7 loads for 12 FMAs (6 x 16 made 8), and 16, 24 and 32 channels fill whole
 *            blocks (6 x 16 padded 16 and 32 to 18 and 36 rows). Zen 3, 1 thread, against 6 x 16
 *            (tools/compare_builds.py, 4 rounds): 3 -> 16 at 512^2 4.37 -> 3.87 ms, 24 -> 32
 *            stride 2 at 256^2 4.20 -> 3.67, 32 -> 3 at 256^2 2.65 -> 2.17, Winograd 32 -> 32 at
 *            128^2 3.21 -> 2.85, 64 -> 64 9.92 -> 9.44; the bundled model's 512^2 conversion
 *            88.1 -> 82.6 ms (2 threads 47.4 -> 43.5).
 *   NEON     8 x 12 (aarch64): 24 of the 32 q registers accumulate, + 3 B + 1 broadcast (ld1r)
 *            = 28; fused as A2R_MADD is there, so the sums are those of the plain C tile.
 *   SSE2     4 x 8: 8 xmm accumulators + 2 B + 1 broadcast + 1 product (no FMA) = 12 of 16.
 *   other    4 x 8 scalar (plain C, A2R_MADD).
 * v_load/v_store are unaligned: panels are 64-byte aligned anyway where the caller can. */
#ifndef A2R_CONV2D_SIMD_H
#define A2R_CONV2D_SIMD_H

#include "a2r_isa.h"

#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 v_t;
#define VL 16
#define MR 8
#define NV 3
#define v_zero() _mm512_setzero_ps()
#define v_load(p) _mm512_loadu_ps(p)
#define v_store(p, v) _mm512_storeu_ps((p), (v))
#define v_set1(s) _mm512_set1_ps(s)
#define v_fma(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define v_add(a, b) _mm512_add_ps((a), (b))
/* v > 0 ? v : 0 and v >= 0 ? v : s * v per lane, NaN as the scalar forms (conv_common.h
 * activate): max returns its second operand (0) for NaN; the ordered compare is false. */
#define v_relu(v) _mm512_max_ps((v), _mm512_setzero_ps())
#define v_leaky(v, s)                                                                          \
    _mm512_mask_blend_ps(_mm512_cmp_ps_mask((v), _mm512_setzero_ps(), _CMP_GE_OQ),            \
                         _mm512_mul_ps((s), (v)), (v))
/* First r < VL lanes; the other lanes are neither read nor written (no fault past the end). */
#define v_load_part(p, r) _mm512_maskz_loadu_ps((__mmask16)((1u << (r)) - 1), (p))
#define v_store_part(p, v, r) _mm512_mask_storeu_ps((p), (__mmask16)((1u << (r)) - 1), (v))
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 v_t;
#define VL 8
#define MR 4
#define NV 3
#define v_zero() _mm256_setzero_ps()
#define v_load(p) _mm256_loadu_ps(p)
#define v_store(p, v) _mm256_storeu_ps((p), (v))
#define v_set1(s) _mm256_set1_ps(s)
#define v_fma(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define v_add(a, b) _mm256_add_ps((a), (b))
#define v_relu(v) _mm256_max_ps((v), _mm256_setzero_ps())
#define v_leaky(v, s)                                                                          \
    _mm256_blendv_ps(_mm256_mul_ps((s), (v)), (v),                                            \
                     _mm256_cmp_ps((v), _mm256_setzero_ps(), _CMP_GE_OQ))
static const int32_t v_mask_table[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
#define v_mask(r) _mm256_loadu_si256((const __m256i *)(v_mask_table + 8 - (r)))
#define v_load_part(p, r) _mm256_maskload_ps((p), v_mask(r))
#define v_store_part(p, v, r) _mm256_maskstore_ps((p), v_mask(r), (v))
#elif defined(__aarch64__)
#include <arm_neon.h>
typedef float32x4_t v_t;
#define VL 4
#define MR 8
#define NV 3
#define v_zero() vdupq_n_f32(0.0f)
#define v_load(p) vld1q_f32(p)
#define v_store(p, v) vst1q_f32((p), (v))
#define v_set1(s) vdupq_n_f32(s)
#define v_fma(a, b, c) vfmaq_f32((c), (a), (b))
#define v_add(a, b) vaddq_f32((a), (b))
/* selects on ordered compares: NaN and -0 give what the scalar forms give (0, +0) */
#define v_relu(v) vbslq_f32(vcgtq_f32((v), vdupq_n_f32(0.0f)), (v), vdupq_n_f32(0.0f))
#define v_leaky(v, s) vbslq_f32(vcgeq_f32((v), vdupq_n_f32(0.0f)), (v), vmulq_f32((s), (v)))
#elif defined(__SSE2__)
#include <emmintrin.h>
typedef __m128 v_t;
#define VL 4
#define MR 4
#define NV 2
#define v_zero() _mm_setzero_ps()
#define v_load(p) _mm_loadu_ps(p)
#define v_store(p, v) _mm_storeu_ps((p), (v))
#define v_set1(s) _mm_set1_ps(s)
#define v_fma(a, b, c) _mm_add_ps(_mm_mul_ps((a), (b)), (c))
#define v_add(a, b) _mm_add_ps((a), (b))
#define v_relu(v) _mm_max_ps((v), _mm_setzero_ps())
static inline __m128 v_leaky(__m128 v, __m128 s) {
    const __m128 ge = _mm_cmpge_ps(v, _mm_setzero_ps());
    return _mm_or_ps(_mm_and_ps(ge, v), _mm_andnot_ps(ge, _mm_mul_ps(s, v)));
}
#else
typedef float v_t;
#define VL 1
#define MR 4
#define NV 8
#define v_zero() 0.0f
#define v_load(p) (*(p))
#define v_store(p, v) (*(p) = (v))
#define v_set1(s) (s)
#define v_fma(a, b, c) A2R_MADD((a), (b), (c))
#define v_add(a, b) ((a) + (b))
#define v_relu(v) ((v) > 0.0f ? (v) : 0.0f)
#define v_leaky(v, s) ((v) >= 0.0f ? (v) : (s) * (v))
#endif

#define NR (NV * VL)

/* d[t] = s[t] for t < n, whole vectors and one partial one: no library call for the short runs
 * (one image row inside one panel) that im2col packing is made of. */
static inline void v_copy_n(float *restrict d, const float *restrict s, int64_t n) {
    int64_t t = 0;
    for (; t + VL <= n; t += VL) v_store(d + t, v_load(s + t));
#ifdef v_load_part
    if (t < n) v_store_part(d + t, v_load_part(s + t, n - t), n - t);
#else
    for (; t < n; t++) d[t] = s[t];
#endif
}

static inline void v_zero_n(float *d, int64_t n) {
    int64_t t = 0;
    for (; t + VL <= n; t += VL) v_store(d + t, v_zero());
#ifdef v_load_part
    if (t < n) v_store_part(d + t, v_zero(), n - t);
#else
    for (; t < n; t++) d[t] = 0.0f;
#endif
}

#endif
