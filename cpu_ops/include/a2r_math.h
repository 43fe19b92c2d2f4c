/* a2r_math.h - inline float math written so the auto-vectoriser keeps it in vector registers
 * (no libm calls, no float->int conversions, branches as selects). */
#ifndef A2R_MATH_H
#define A2R_MATH_H

#include <stdint.h>
#include <string.h>

#include "a2r_isa.h"

/* 1.5 * 2^23: adding and subtracting it rounds a float with |v| < 2^22 to the nearest integer,
 * ties to even, exactly (needs -ffp-contract=off and no -ffast-math, which the build ensures). */
#define A2R_ROUND_MAGIC 12582912.0f

static inline float a2r_bits_to_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t a2r_float_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* e^x within 2 ulp on [-87.3, 88.7]; +inf above, 0 below, NaN stays NaN.
 * Cephes-style: x = n*ln2 + r with |r| <= ln2/2, e^r by a degree-6 polynomial, 2^n from bits. */
static inline float a2r_expf(float x) {
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    float xc = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
    float t = A2R_MADD(xc, log2e, A2R_ROUND_MAGIC);
    float n = t - A2R_ROUND_MAGIC;
    uint32_t ni = a2r_float_to_bits(t) - a2r_float_to_bits(A2R_ROUND_MAGIC); /* n as an integer */
    float r = A2R_MADD(n, -ln2_hi, xc);
    r = A2R_MADD(n, -ln2_lo, r);
    float p = 1.9875691500e-4f;
    p = A2R_MADD(p, r, 1.3981999507e-3f);
    p = A2R_MADD(p, r, 8.3334519073e-3f);
    p = A2R_MADD(p, r, 4.1665795894e-2f);
    p = A2R_MADD(p, r, 1.6666665459e-1f);
    p = A2R_MADD(p, r, 5.0000001201e-1f);
    p = A2R_MADD(p, r * r, r + 1.0f);
    /* 2^n split in two factors so that n = 128 (x near 88.7) does not overflow the exponent. */
    float s1 = a2r_bits_to_float((ni + 126u) << 23);
    float y = p * s1 * 2.0f;
    y = x > 88.72f ? __builtin_inff() : y;
    y = x < -103.9f ? 0.0f : y;
    return y;
}

/* x * sigmoid(x) = x / (1 + e^-x); -inf -> NaN and NaN -> NaN, as numpy's x / (1 + exp(-x)). */
static inline float a2r_silu1(float x) { return x / (1.0f + a2r_expf(-x)); }

/* --- the same on one vector register (a2r_vf) ------------------------------------------------
 * GCC 12 vectorises a2r_expf at AVX-512 but leaves it scalar at AVX2 (the float <-> bits moves
 * and the selects defeat its cost model), so the loops that need e^x call these instead. Each
 * lane does a2r_expf's operations in the same order, A2R_VMADD fusing exactly where A2R_MADD
 * does: a vector body and its scalar tail agree bit for bit. */
typedef uint32_t a2r_vu __attribute__((vector_size(4 * A2R_VEC_FLOATS)));

static inline a2r_vf a2r_vsplat(float v) { return (a2r_vf){0.0f} + v; }

/* m ? a : b per lane, m from a vector comparison (all ones or all zeros). AVX2: one blend (GCC
 * keeps the and/andnot/or form); AVX-512: GCC makes the generic form one vpternlogd. */
static inline a2r_vf a2r_vselect(a2r_vu m, a2r_vf a, a2r_vf b) {
#if defined(__AVX2__) && !defined(__AVX512F__)
    return (a2r_vf)_mm256_blendv_ps((__m256)b, (__m256)a, (__m256)m);
#else
    return (a2r_vf)(((a2r_vu)a & m) | ((a2r_vu)b & ~m));
#endif
}

/* x < lo ? lo : (x > hi ? hi : x) per lane, NaN kept: min/max return their second operand when
 * one is NaN, so x goes second. */
static inline a2r_vf a2r_vclamp(a2r_vf x, a2r_vf lo, a2r_vf hi) {
#if defined(__AVX512F__)
    return (a2r_vf)_mm512_min_ps((__m512)hi, _mm512_max_ps((__m512)lo, (__m512)x));
#elif defined(__AVX2__)
    return (a2r_vf)_mm256_min_ps((__m256)hi, _mm256_max_ps((__m256)lo, (__m256)x));
#else
    return a2r_vselect((a2r_vu)(x < lo), lo, a2r_vselect((a2r_vu)(x > hi), hi, x));
#endif
}

/* e^x of a2r_expf's clamped argument, without its two special cases (the callers add those
 * they need). */
static inline a2r_vf a2r_vexpf_clamped(a2r_vf x) {
    const a2r_vf magic = a2r_vsplat(A2R_ROUND_MAGIC);
    const a2r_vf xc = a2r_vclamp(x, a2r_vsplat(-87.3f), a2r_vsplat(88.7f));
    const a2r_vf t = A2R_VMADD(xc, a2r_vsplat(1.44269504088896341f), magic);
    const a2r_vf n = t - magic;
    const a2r_vu ni = (a2r_vu)t - (a2r_vu)magic;
    a2r_vf r = A2R_VMADD(n, a2r_vsplat(-0.693359375f), xc);
    r = A2R_VMADD(n, a2r_vsplat(2.12194440e-4f), r);
    a2r_vf p = a2r_vsplat(1.9875691500e-4f);
    p = A2R_VMADD(p, r, a2r_vsplat(1.3981999507e-3f));
    p = A2R_VMADD(p, r, a2r_vsplat(8.3334519073e-3f));
    p = A2R_VMADD(p, r, a2r_vsplat(4.1665795894e-2f));
    p = A2R_VMADD(p, r, a2r_vsplat(1.6666665459e-1f));
    p = A2R_VMADD(p, r, a2r_vsplat(5.0000001201e-1f));
    p = A2R_VMADD(p, r * r, r + 1.0f);
    const a2r_vf s1 = (a2r_vf)((ni + 126u) << 23);
    return p * s1 * 2.0f;
}

/* a2r_expf, lane by lane. */
static inline a2r_vf a2r_vexpf(a2r_vf x) {
    a2r_vf y = a2r_vexpf_clamped(x);
    y = a2r_vselect((a2r_vu)(x > a2r_vsplat(88.72f)), a2r_vsplat(__builtin_inff()), y);
    return a2r_vselect((a2r_vu)(x < a2r_vsplat(-103.9f)), a2r_vsplat(0.0f), y);
}

/* a2r_silu1, lane by lane. The underflow case of e^-x (x > 103.9) is left out: there e^-x is
 * 0 or, clamped, 1.2e-38, and 1 + either rounds to 1, so x / 1 = x all the same. */
static inline a2r_vf a2r_vsilu(a2r_vf x) {
    const a2r_vf e = a2r_vexpf_clamped(-x);
    return x / (1.0f + a2r_vselect((a2r_vu)(x < a2r_vsplat(-88.72f)),
                                   a2r_vsplat(__builtin_inff()), e));
}

#endif
