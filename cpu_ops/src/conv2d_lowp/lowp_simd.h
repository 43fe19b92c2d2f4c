/* lowp_simd.h - the vector layer of the low-precision conv2d micro-kernels (kernel.c), per ISA
 * level.
 *
 * Operands travel in 32-bit lanes: a bf16 lane holds 2 consecutive K values (k even in the low
 * half), an int8 lane 4 (k % 4 = byte index). A B row is NR lanes of consecutive output pixels;
 * an A step is mr lanes, one per output channel, broadcast to every pixel lane.
 *
 * Register tile (MR output channels x NR = NV*VL pixels):
 *   avx512_amx  two row blocks at once, 2 x (8 x 32) as four 8 x 16 C tiles (kernel.c
 *               amx_blocks) where a tap has at least 4 channel lanes; otherwise 8 x 32 as
 *               avx512_bf16.
 *   avx512_bf16 8 x 48: 24 zmm accumulators + 3 B + 1 broadcast. bf16: vdpbf16ps (2 MACs per
 *               lane per instruction, fp32 accumulation); int8: vpdpbusd (u8 x s8, 4 MACs per
 *               lane, int32 accumulation). Compiled with -mavx512bf16 -mavx512vnni.
 *   avx512      8 x 48 without those units: bf16 widened to fp32 (shift, and) + 2 FMAs; int8
 *               vpmaddubsw + vpmaddwd(1) + vpaddd: 24 + 3 + broadcast + product + ones = 30 of 32.
 *   avx2        4 x 16: 8 ymm accumulators + 2 B + broadcast + product + ones = 13 of 16 (the
 *               fp32 kernel's 12 accumulators would spill with the int8 temporaries).
 *   neon_dot    8 x 12 (aarch64 with the Armv8.2 dot products): 24 q accumulators + 3 B +
 *               broadcast = 28 of 32. int8: sdot (s8 x s8, 4 MACs per lane, int32 sums) on
 *               activations of 0..127, whose bytes read as s8 are the same values; bf16
 *               widened to fp32 (shift, and) + 2 fused multiply-adds, as at avx2.
 *   other       4 x 8 plain C (the same arithmetic, lane by lane).
 * vpmaddubsw adds two u8 x s8 products into a saturating int16: 255 * 127 * 2 overflows it, so
 * the levels without VNNI quantise activations to 0..127 (A2R_U8_LEVELS), 127 * 127 * 2 = 32258
 * fits; VNNI and plain C use 0..255; neon_dot 0..127 (sdot's operands are signed). */
#ifndef A2R_CONV2D_LOWP_SIMD_H
#define A2R_CONV2D_LOWP_SIMD_H

#include "a2r_isa.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#define VL 16
#define MR 8
#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AMX_BF16__)
#define NV 2 /* 32 pixels: two 16-pixel C tiles per row block (kernel.c amx_blocks) */
#else
#define NV 3
#endif
typedef __m512 vf_t;
typedef __m512i vi_t;
#define vf_zero() _mm512_setzero_ps()
#define vf_set1(s) _mm512_set1_ps(s)
#define vi_zero() _mm512_setzero_si512()
#define vi_load(p) _mm512_loadu_si512((const void *)(p))
#define vi_set1(s) _mm512_set1_epi32((int)(s))
#define vf_store(p, v) _mm512_storeu_ps((p), (v))
#define vi_store(p, v) _mm512_storeu_si512((void *)(p), (v))
#define vf_fma(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define bf16_lo(v) _mm512_castsi512_ps(_mm512_slli_epi32((v), 16))
#define bf16_hi(v) _mm512_castsi512_ps(_mm512_and_si512((v), _mm512_set1_epi32((int)0xffff0000u)))
#if defined(__AVX512BF16__) && defined(__AVX512VNNI__)
#define LOWP_DOT 1
#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AMX_BF16__)
#define LOWP_AMX 1 /* kernel.c: the tile products where a tap has enough channel lanes */
#endif
#define bf16_dot(acc, a, b) _mm512_dpbf16_ps((acc), (__m512bh)(a), (__m512bh)(b))
#define u8s8_dot(acc, b, a, ones) _mm512_dpbusd_epi32((acc), (b), (a))
#else
#define u8s8_dot(acc, b, a, ones) \
    _mm512_add_epi32((acc), _mm512_madd_epi16(_mm512_maddubs_epi16((b), (a)), (ones)))
#endif
#define vi_ones16() _mm512_set1_epi16(1)
#define LOWP_X86 1 /* the x86 levels' float <-> int helpers below (kernel.c to_u8_v) */
#define vf_load(p) _mm512_loadu_ps(p)
#define vf_add(a, b) _mm512_add_ps((a), (b))
#define vf_mul(a, b) _mm512_mul_ps((a), (b))
#define vf_max(a, b) _mm512_max_ps((a), (b))
#define vf_min(a, b) _mm512_min_ps((a), (b))
#define vf_cvtt(v) _mm512_cvttps_epi32(v)
#define vi_or_shl(a, b, k) _mm512_or_si512((a), _mm512_slli_epi32((b), (k)))
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define VL 8
#define MR 4
#define NV 2
typedef __m256 vf_t;
typedef __m256i vi_t;
#define vf_zero() _mm256_setzero_ps()
#define vf_set1(s) _mm256_set1_ps(s)
#define vi_zero() _mm256_setzero_si256()
#define vi_load(p) _mm256_loadu_si256((const __m256i *)(p))
#define vi_set1(s) _mm256_set1_epi32((int)(s))
#define vf_store(p, v) _mm256_storeu_ps((p), (v))
#define vi_store(p, v) _mm256_storeu_si256((__m256i *)(p), (v))
#define vf_fma(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define bf16_lo(v) _mm256_castsi256_ps(_mm256_slli_epi32((v), 16))
#define bf16_hi(v) _mm256_castsi256_ps(_mm256_and_si256((v), _mm256_set1_epi32((int)0xffff0000u)))
#define u8s8_dot(acc, b, a, ones) \
    _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((b), (a)), (ones)))
#define vi_ones16() _mm256_set1_epi16(1)
#define LOWP_X86 1
#define vf_load(p) _mm256_loadu_ps(p)
#define vf_add(a, b) _mm256_add_ps((a), (b))
#define vf_mul(a, b) _mm256_mul_ps((a), (b))
#define vf_max(a, b) _mm256_max_ps((a), (b))
#define vf_min(a, b) _mm256_min_ps((a), (b))
#define vf_cvtt(v) _mm256_cvttps_epi32(v)
#define vi_or_shl(a, b, k) _mm256_or_si256((a), _mm256_slli_epi32((b), (k)))
#elif defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>
#define VL 4
#define MR 8
#define NV 3
typedef float32x4_t vf_t;
typedef int32x4_t vi_t;
#define vf_zero() vdupq_n_f32(0.0f)
#define vf_set1(s) vdupq_n_f32(s)
#define vi_zero() vdupq_n_s32(0)
#define vi_load(p) vld1q_s32((const int32_t *)(p))
#define vi_set1(s) vdupq_n_s32((int32_t)(s))
#define vf_store(p, v) vst1q_f32((p), (v))
#define vi_store(p, v) vst1q_s32((int32_t *)(p), (v))
#define vf_fma(a, b, c) vfmaq_f32((c), (a), (b))
#define bf16_lo(v) vreinterpretq_f32_s32(vshlq_n_s32((v), 16))
#define bf16_hi(v) vreinterpretq_f32_s32(vandq_s32((v), vdupq_n_s32((int32_t)0xffff0000u)))
#define u8s8_dot(acc, b, a, ones) \
    vdotq_s32((acc), vreinterpretq_s8_s32(b), vreinterpretq_s8_s32(a))
#define vi_ones16() vdupq_n_s32(0) /* unused: sdot needs no pair sums */
#else
#define VL 1
#define MR 4
#define NV 8
#define LOWP_SCALAR 1
#endif

#define NR (NV * VL)

#if defined(LOWP_DOT) || defined(LOWP_SCALAR)
#define A2R_U8_LEVELS 255
#else
#define A2R_U8_LEVELS 127
#endif

#endif
