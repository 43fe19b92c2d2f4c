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

#endif
