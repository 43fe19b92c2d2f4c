/* a2r_math.h - inline float math written so the auto-vectoriser keeps it in vector registers
 * (no libm calls, no float->int conversions, branches as selects). */
#ifndef A2R_MATH_H
#define A2R_MATH_H

#include <stdint.h>
#include <string.h>

#include "a2r_isa.h"
#include "a2r_kernels.h"

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

/* SiLU, x * sigmoid(x) = x / (1 + e^-x), scalar (a2r_silu1) and on one vector register
 * (a2r_vsilu). GCC 12 vectorises such scalar code at AVX-512 but leaves it scalar at AVX2 (the
 * float <-> bits moves and the selects defeat its cost model), so the vector loops call
 * a2r_vsilu. Both do the same operations in the same order, A2R_VMADD fusing exactly where
 * A2R_MADD does: a vector body and its scalar tail agree bit for bit.
 *
 * e^-x: x is clamped to [A2R_SILU_LO, A2R_SILU_HI], n = rint(-x log2 e) by the magic-number add,
 * e^-x = 2^n e^-r with r = x + n ln2, |r| <= ln2/2, e^-r by a degree-5 polynomial (minimax for
 * relative error on [-ln2/2, ln2/2]: 1.5e-7), 2^n from the bits of the rounding sum: 14 vector
 * operations and one of them a division, where the Cephes exp (degree 7, a two-part ln2 also
 * with FMA, a two-factor 2^n, special cases as selects) took 23. Relative error of the result
 * < 5e-7 where it is a normal float (tests/test_activations.py).
 *
 * Special values, as numpy's x / (1 + exp(-x)) in float32: at the low clamp n = 128, whose bits
 * 2^n are +inf's, so e^-x = inf there and x / inf = -0 (x <= -88.4; the true value is below
 * 4e-37), -inf / inf = NaN; at the high clamp e^-x ~ 1e-38 and 1 + e^-x = 1, so y = x, +inf too;
 * NaN stays NaN (the clamp keeps it: min/max return their second operand when one is NaN). */
#define A2R_SILU_LO (-88.5f) /* -x log2 e = 127.7: n = 128 -> 2^n = +inf (n = 129 would wrap) */
#define A2R_SILU_HI 87.3f    /* n = -126: 2^n the smallest normal float */
/* 1.5 * 2^23 + 127: t = -x log2 e + this rounds to an integer, and the low mantissa bits of t
 * hold n + 127, so (bits(t) << 23) is 2^n's bit pattern (the upper bits shift out). */
#define A2R_SILU_MAGIC (A2R_ROUND_MAGIC + 127.0f)
#define A2R_LOG2E 1.44269504088896341f
/* With a fused multiply-add n*ln2 + x is one rounding and ln2 as one float (error 1.9e-9, times
 * |n| <= 128) costs 2.4e-7 relative; without FMA n*ln2 alone would round by up to 3.8e-6, so
 * ln2 comes in two parts (Cody-Waite: n * 0.693359375 is exact). */
#if defined(__FMA__)
#define A2R_LN2_PARTS(r, madd, n, x) r = madd(n, A2R_S(0.693147180559945f), x)
#else
#define A2R_LN2_PARTS(r, madd, n, x) \
    r = madd(n, A2R_S(0.693359375f), x); r = madd(n, A2R_S(-2.12194440e-4f), r)
#endif
/* e^-r = 1 - r + r^2/2 - ...: the minimax coefficients, highest first. */
#define A2R_EXPM_POLY(p, madd, r)                                                              \
    p = madd(A2R_S(-8.290272206e-3f), r, A2R_S(4.189816117e-2f));                              \
    p = madd(p, r, A2R_S(-1.666763872e-1f));                                                   \
    p = madd(p, r, A2R_S(4.999914765e-1f));                                                    \
    p = madd(p, r, A2R_S(-9.999997020e-1f));                                                   \
    p = madd(p, r, A2R_S(1.0f))

/* e^-x for x already clamped to [A2R_SILU_LO, A2R_SILU_HI] (a2r_vexpneg: the vector form). */
static inline float a2r_expneg1(float xc) {
#define A2R_S(c) (c)
    const float t = A2R_MADD(xc, -A2R_LOG2E, A2R_SILU_MAGIC);
    const float n = t - A2R_SILU_MAGIC;
    float r, p;
    A2R_LN2_PARTS(r, A2R_MADD, n, xc);
    A2R_EXPM_POLY(p, A2R_MADD, r);
#undef A2R_S
    return p * a2r_bits_to_float(a2r_float_to_bits(t) << 23);
}

/* e^-d for d >= 0 (NaN kept), exactly 0 once d > A2R_SILU_HI (the true value is below
 * 1e-38): erfc's tail, softmax's far scores (a -inf score weighs 0). */
static inline float a2r_expneg0(float d) {
    return d > A2R_SILU_HI ? 0.0f : a2r_expneg1(d < A2R_SILU_LO ? A2R_SILU_LO : d);
}

static inline float a2r_silu1(float x) {
    const float xc = x < A2R_SILU_LO ? A2R_SILU_LO : (x > A2R_SILU_HI ? A2R_SILU_HI : x);
    return x / (1.0f + a2r_expneg1(xc));
}

/* tanh, scalar (a2r_tanh1) and on one vector register (a2r_vtanh), the same operations in the
 * same order (a vector body and its scalar tail agree bit for bit). On a = |x| clamped to
 * A2R_TANH_MAX: a P(a^2) / Q(a^2), a rational fitted here for relative error on [0, 9] (least
 * squares in float64, reweighted towards the worst error; P(0) = Q(0) = 1, so a tiny x gives
 * x); above A2R_TANH_MAX 1 (float32 tanh 9 is 1 - 6e-8); then the sign bit of x, so -0 stays -0
 * and NaN stays NaN. Relative error below 1e-6 (measured 8.5e-7, tests/test_activations.py),
 * in about 20 vector operations, one a division (an exp-based form took about 30: 0.74x
 * onnxruntime's Tanh at AVX2). numpy's float32 tanh is libm's, one value at a time below
 * AVX-512. */
#define A2R_TANH_MAX 9.0f
#define A2R_TANH_P(p, madd, a2)                                                                \
    p = madd(a2, A2R_S(-5.095537770e-09f), A2R_S(6.550525995e-06f));                           \
    p = madd(p, a2, A2R_S(2.612670418e-03f));                                                  \
    p = madd(p, a2, A2R_S(1.262947619e-01f));                                                  \
    p = madd(p, a2, A2R_S(1.0f))
#define A2R_TANH_Q(q, madd, a2)                                                                \
    q = madd(a2, A2R_S(1.861023047e-04f), A2R_S(2.249191329e-02f));                            \
    q = madd(q, a2, A2R_S(4.596253335e-01f));                                                  \
    q = madd(q, a2, A2R_S(1.0f))

static inline float a2r_tanh1(float x) {
#define A2R_S(c) (c)
    const uint32_t sign = a2r_float_to_bits(x) & 0x80000000u;
    const float a = a2r_bits_to_float(a2r_float_to_bits(x) & 0x7fffffffu);
    const float ac = a > A2R_TANH_MAX ? A2R_TANH_MAX : a, a2 = ac * ac; /* NaN kept */
    float p, q;
    A2R_TANH_P(p, A2R_MADD, a2);
    A2R_TANH_Q(q, A2R_MADD, a2);
#undef A2R_S
    const float t = a > A2R_TANH_MAX ? 1.0f : ac * p / q;
    return a2r_bits_to_float(a2r_float_to_bits(t) | sign);
}

/* erf, and GELU built on it, scalar (a2r_gelu1) and on one vector register (a2r_vgelu), the
 * same operations in the same order. Coefficients fitted here (float64 least squares reweighted
 * towards the worst relative error, against scipy's erf / erfcx):
 *   erfc(z) = e^(-z^2) R(1 / (1 + z)) for z = |v| in [0, 10], R of degree 9 (relative error
 *   3.2e-7, 6.2e-7 evaluated in float32); z^2's rounding error (FMA: exact) is applied as the
 *   factor 1 - lo; e^(-z^2) is a2r_expneg1's, and erfc is 0 once z^2 > A2R_SILU_HI (the true
 *   value is below 1e-38);
 *   erf alone: below A2R_ERF_SPLIT v S(v^2), S of degree 5 (relative error 9e-9), so that tiny
 *   values keep their digits; above, 1 - erfc.
 * form: A2R_GELU_ERF y = erf(x); A2R_GELU_EXACT y = x/2 (1 + erf(x / sqrt 2)) = x/2 erfc(-x /
 * sqrt 2), from erfc on both sides (1 + erf is erfc of -v: no cancellation on the negative
 * side, and no second branch); A2R_GELU_TANH y = x/2 (1 + tanh u) = x / (1 + e^(-2u)), u =
 * sqrt(2/pi) (x + 0.044715 x^3), by a2r_expneg1 (no cancellation where tanh u is near -1).
 * Measured errors: tests/test_activations.py. */
#define A2R_ERF_SPLIT 0.875f
#define A2R_SQRT1_2 0.707106781186547524f
#define A2R_GELU_K 0.797884560802865356f /* sqrt(2 / pi) */
#define A2R_ERF_S(p, madd, z2)                                                                 \
    p = madd(z2, A2R_S(-6.203749323e-04f), A2R_S(5.032285942e-03f));                           \
    p = madd(p, z2, A2R_S(-2.679154358e-02f));                                                 \
    p = madd(p, z2, A2R_S(1.128245804e-01f));                                                  \
    p = madd(p, z2, A2R_S(-3.761255084e-01f));                                                 \
    p = madd(p, z2, A2R_S(1.128379158e+00f))
#define A2R_ERFCX_R(p, madd, t)                                                                \
    p = madd(t, A2R_S(-3.345332618e-01f), A2R_S(1.821180723e+00f));                            \
    p = madd(p, t, A2R_S(-4.154235719e+00f));                                                  \
    p = madd(p, t, A2R_S(4.939899914e+00f));                                                   \
    p = madd(p, t, A2R_S(-2.866521443e+00f));                                                  \
    p = madd(p, t, A2R_S(2.591916137e-01f));                                                   \
    p = madd(p, t, A2R_S(1.995776622e-01f));                                                   \
    p = madd(p, t, A2R_S(5.715968376e-01f));                                                   \
    p = madd(p, t, A2R_S(5.638366285e-01f));                                                   \
    p = madd(p, t, A2R_S(6.725129253e-06f))

static inline float a2r_gelu1(float x, int form) {
    if (form == A2R_GELU_TANH) {
        const float u = x * A2R_MADD(x * x, 2.0f * A2R_GELU_K * 0.044715f, 2.0f * A2R_GELU_K);
        const float uc = u < A2R_SILU_LO ? A2R_SILU_LO : (u > A2R_SILU_HI ? A2R_SILU_HI : u);
        return x / (1.0f + a2r_expneg1(uc));
    }
    const int exact = form == A2R_GELU_EXACT;
    const float half = exact ? 0.5f : 1.0f, v = exact ? x * A2R_SQRT1_2 : x;
    const uint32_t sign = a2r_float_to_bits(v) & 0x80000000u;
    const float z = a2r_bits_to_float(a2r_float_to_bits(v) & 0x7fffffffu);
    const float x2 = x * x, z2 = x2 * half, lo = A2R_MADD(x, x, -x2) * half;
#define A2R_S(c) (c)
    float r;
    A2R_ERFCX_R(r, A2R_MADD, 1.0f / (1.0f + z));
#undef A2R_S
    /* zeroed after the product: at |x| = inf, lo is NaN */
    const float c = z2 > A2R_SILU_HI ? 0.0f : a2r_expneg1(z2) * A2R_MADD(-lo, r, r);
    if (exact)
        return 0.5f * x * (sign ? c : 2.0f - c);
    if (z >= A2R_ERF_SPLIT)
        return a2r_bits_to_float(a2r_float_to_bits(1.0f - c) | sign);
#define A2R_S(c) (c)
    float s;
    A2R_ERF_S(s, A2R_MADD, z2);
#undef A2R_S
    return v * s;
}

typedef uint32_t a2r_vu __attribute__((vector_size(4 * A2R_VEC_FLOATS)));

/* v in every lane, -0 included (v - +0 is v for every v; +0 + v would turn -0 into +0). */
static inline a2r_vf a2r_vsplat(float v) { return v - (a2r_vf){0.0f}; }

/* x < lo ? lo : (x > hi ? hi : x) per lane, NaN kept: min/max return their second operand when
 * one is NaN, so x goes second. */
static inline a2r_vf a2r_vclamp(a2r_vf x, a2r_vf lo, a2r_vf hi) {
#if defined(__AVX512F__)
    return (a2r_vf)_mm512_min_ps((__m512)hi, _mm512_max_ps((__m512)lo, (__m512)x));
#elif defined(__AVX2__)
    return (a2r_vf)_mm256_min_ps((__m256)hi, _mm256_max_ps((__m256)lo, (__m256)x));
#else
    const a2r_vu below = (a2r_vu)(x < lo), above = (a2r_vu)(x > hi);
    const a2r_vf y = (a2r_vf)(((a2r_vu)hi & above) | ((a2r_vu)x & ~above));
    return (a2r_vf)(((a2r_vu)lo & below) | ((a2r_vu)y & ~below));
#endif
}

static inline a2r_vf a2r_vexpneg(a2r_vf xc) {
#define A2R_S(c) a2r_vsplat(c)
    const a2r_vf t = A2R_VMADD(xc, A2R_S(-A2R_LOG2E), A2R_S(A2R_SILU_MAGIC));
    const a2r_vf n = t - A2R_SILU_MAGIC;
    a2r_vf r, p;
    A2R_LN2_PARTS(r, A2R_VMADD, n, xc);
    A2R_EXPM_POLY(p, A2R_VMADD, r);
#undef A2R_S
    return p * (a2r_vf)((a2r_vu)t << 23);
}

/* a2r_expneg0 on one vector register. */
static inline a2r_vf a2r_vexpneg0(a2r_vf d) {
    const a2r_vf e = a2r_vexpneg(a2r_vclamp(d, a2r_vsplat(A2R_SILU_LO), a2r_vsplat(A2R_SILU_HI)));
    return (a2r_vf)((a2r_vu)e & ~(a2r_vu)(d > A2R_SILU_HI));
}

static inline a2r_vf a2r_vsilu(a2r_vf x) {
    const a2r_vf xc = a2r_vclamp(x, a2r_vsplat(A2R_SILU_LO), a2r_vsplat(A2R_SILU_HI));
    return x / (1.0f + a2r_vexpneg(xc));
}

static inline a2r_vf a2r_vtanh(a2r_vf x) {
#define A2R_S(c) a2r_vsplat(c)
    const a2r_vu sign = (a2r_vu)x & 0x80000000u;
    const a2r_vf a = (a2r_vf)((a2r_vu)x & 0x7fffffffu);
    const a2r_vf ac = a2r_vclamp(a, A2R_S(0.0f), A2R_S(A2R_TANH_MAX)), a2 = ac * ac;
    a2r_vf p, q;
    A2R_TANH_P(p, A2R_VMADD, a2);
    A2R_TANH_Q(q, A2R_VMADD, a2);
    const a2r_vu big = (a2r_vu)(a > A2R_TANH_MAX); /* all ones where a is above */
    const a2r_vu t = ((a2r_vu)A2R_S(1.0f) & big) | ((a2r_vu)(ac * p / q) & ~big);
#undef A2R_S
    return (a2r_vf)(t | sign);
}

/* m ? a : b per lane (m all ones or all zeros). */
static inline a2r_vf a2r_vselect(a2r_vu m, a2r_vf a, a2r_vf b) {
    return (a2r_vf)(((a2r_vu)a & m) | ((a2r_vu)b & ~m));
}

/* Lane-rotation masks by half, quarter, ... of a register: a2r_vhsum / a2r_vhmax fold the
 * register onto itself log2(lanes) times (every lane ends with the total; lane 0 is read). */
#if A2R_VEC_FLOATS == 16
#define A2R_FOLDS                                                                              \
    {(a2r_vu){8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7},                           \
     (a2r_vu){4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11},                           \
     (a2r_vu){2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13},                           \
     (a2r_vu){1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14}}
#elif A2R_VEC_FLOATS == 8
#define A2R_FOLDS                                                                              \
    {(a2r_vu){4, 5, 6, 7, 0, 1, 2, 3}, (a2r_vu){2, 3, 0, 1, 6, 7, 4, 5},                       \
     (a2r_vu){1, 0, 3, 2, 5, 4, 7, 6}}
#else
#define A2R_FOLDS {(a2r_vu){2, 3, 0, 1}, (a2r_vu){1, 0, 3, 2}}
#endif

/* The sum of the lanes (a fixed order for a given level). */
static inline float a2r_vhsum(a2r_vf v) {
    const a2r_vu folds[] = A2R_FOLDS;
    for (unsigned k = 0; k < sizeof folds / sizeof folds[0]; k++)
        v += __builtin_shuffle(v, folds[k]);
    return v[0];
}

/* The largest lane (a NaN lane may be passed over or returned). */
static inline float a2r_vhmax(a2r_vf v) {
    const a2r_vu folds[] = A2R_FOLDS;
    for (unsigned k = 0; k < sizeof folds / sizeof folds[0]; k++) {
        const a2r_vf w = __builtin_shuffle(v, folds[k]);
        v = a2r_vselect((a2r_vu)(w > v), w, v);
    }
    return v[0];
}

static inline a2r_vf a2r_vgelu(a2r_vf x, int form) {
#define A2R_S(c) a2r_vsplat(c)
    if (form == A2R_GELU_TANH) {
        const a2r_vf u = x * A2R_VMADD(x * x, A2R_S(2.0f * A2R_GELU_K * 0.044715f),
                                       A2R_S(2.0f * A2R_GELU_K));
        return x / (1.0f + a2r_vexpneg(a2r_vclamp(u, A2R_S(A2R_SILU_LO), A2R_S(A2R_SILU_HI))));
    }
    const int exact = form == A2R_GELU_EXACT;
    const float half = exact ? 0.5f : 1.0f;
    const a2r_vf v = exact ? x * A2R_SQRT1_2 : x;
    const a2r_vu sign = (a2r_vu)v & 0x80000000u;
    const a2r_vf z = (a2r_vf)((a2r_vu)v & 0x7fffffffu);
    const a2r_vf x2 = x * x, z2 = x2 * half, lo = A2R_VMADD(x, x, -x2) * half;
    a2r_vf r;
    A2R_ERFCX_R(r, A2R_VMADD, 1.0f / (1.0f + z));
    const a2r_vf e = a2r_vexpneg(a2r_vclamp(z2, A2R_S(0.0f), A2R_S(A2R_SILU_HI)));
    const a2r_vf c = (a2r_vf)((a2r_vu)(e * A2R_VMADD(-lo, r, r)) & ~(a2r_vu)(z2 > A2R_SILU_HI));
    if (exact)
        return 0.5f * x * a2r_vselect((a2r_vu)(sign != 0), c, 2.0f - c);
    a2r_vf s;
    A2R_ERF_S(s, A2R_VMADD, z2);
#undef A2R_S
    return a2r_vselect((a2r_vu)(z >= A2R_ERF_SPLIT), (a2r_vf)((a2r_vu)(1.0f - c) | sign),
                       v * s);
}

#endif
