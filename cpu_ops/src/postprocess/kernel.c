/* postprocess kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * Bit-exact on every level: v = (x * s + m) * 255 with two roundings per step (the build has
 * -ffp-contract=off; no A2R_MADD here), NaN -> 0, clamp to [0, 255], round half to even by the
 * magic-number add, which is exact on [0, 255]. Each row goes in blocks of BLOCK pixels: three
 * unit-stride loops into byte planes on the stack, then one stride-3 interleave into BGR (a byte
 * shuffle: vectorised from SSSE3 up, scalar at the SSE2 baseline, which has no byte shuffle).
 * The same pass counts the inputs that are NaN or infinite (a network's broken result, which
 * the caller refuses rather than write as black or white pixels): no second read of x. */
#include "a2r_isa.h"
#include "a2r_math.h"

/* 256 pixels: a multiple of the widest byte vector (64), and the three planes (768 B) stay in L1. */
#define BLOCK 256
/* 255.0f as bits: 2^7 * (1 + 127/128) -> exponent 127 + 7 = 0x86, mantissa 0x7f0000. */
#define U8_MAX_BITS 0x437f0000u

/* The clamp works on the bit pattern and with a mask, not with two float selects: GCC does not
 * if-convert two chained float selects (their comparisons may trap), which left the loop scalar
 * below AVX-512. Non-negative floats (+inf included) order as their bits, so min() on the bits is
 * min(v, 255). The low byte of (c + 1.5 * 2^23) is rint(c) for c in [0, 255]: the magic constant's
 * low mantissa byte is 0 and its ulp is 1. */
static inline uint8_t to_u8(float x, float m, float s) {
    const float v = (x * s + m) * 255.0f;
    uint32_t u = a2r_float_to_bits(v) & (0u - (uint32_t)(v > 0.0f)); /* NaN, <= 0 -> +0.0 */
    u = u < U8_MAX_BITS ? u : U8_MAX_BITS;
    return (uint8_t)a2r_float_to_bits(a2r_bits_to_float(u) + A2R_ROUND_MAGIC);
}

/* x's exponent bits: all set (EXP_ALL) when x is NaN or +-inf. */
#define EXP_ALL 0x7f800000u
static inline uint32_t exponent_bits(float x) { return a2r_float_to_bits(x) & EXP_ALL; }

int64_t A2R_KERNEL(a2r_postprocess)(const float *restrict x, int64_t h, int64_t w,
                                    const float mean[3], const float stdv[3],
                                    uint8_t *restrict out) {
    const int64_t plane = h * w;
    const float mr = mean[0], mg = mean[1], mb = mean[2];
    const float sr = stdv[0], sg = stdv[1], sb = stdv[2];
    int64_t bad = 0;
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (plane > A2R_PAR_GRAIN) reduction(+ : bad)
    for (int64_t y = 0; y < h; y++) {
        uint8_t cr[BLOCK], cg[BLOCK], cb[BLOCK];
        const float *restrict r = x + y * w;
        const float *restrict g = r + plane;
        const float *restrict b = g + plane;
        uint8_t *restrict dst = out + y * w * 3;
        for (int64_t x0 = 0; x0 < w; x0 += BLOCK) {
            const int64_t n = A2R_MIN(w - x0, BLOCK);
            uint32_t top = 0; /* the largest exponent field: a max, which vectorises */
            for (int64_t i = 0; i < n; i++) {
                cr[i] = to_u8(r[x0 + i], mr, sr);
                cg[i] = to_u8(g[x0 + i], mg, sg);
                cb[i] = to_u8(b[x0 + i], mb, sb);
                const uint32_t e = A2R_MAX(exponent_bits(r[x0 + i]),
                                           A2R_MAX(exponent_bits(g[x0 + i]),
                                                   exponent_bits(b[x0 + i])));
                top = A2R_MAX(top, e);
            }
            if (top == EXP_ALL) /* rare: count this block's NaN and infinities */
                for (int64_t i = 0; i < n; i++)
                    bad += (exponent_bits(r[x0 + i]) == EXP_ALL) +
                           (exponent_bits(g[x0 + i]) == EXP_ALL) +
                           (exponent_bits(b[x0 + i]) == EXP_ALL);
            uint8_t *restrict d = dst + 3 * x0;
            for (int64_t i = 0; i < n; i++) {
                d[3 * i + 0] = cb[i];
                d[3 * i + 1] = cg[i];
                d[3 * i + 2] = cr[i];
            }
        }
    }
    return bad;
}
