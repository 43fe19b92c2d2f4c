/* conv2d at bf16 and int8 (contract: a2r_kernels.h, a2r_conv2d_lowp). Compiled once per ISA
 * level; the register tile and the dot products (avx512_bf16: vdpbf16ps, vpdpbusd) come from
 * lowp_simd.h.
 *
 * Per group the convolution is the GEMM Y (og x P) = W (og x K) * B (K x P), K ordered
 * (channel lane, i, j): a 32-bit lane holds D = 2 (bf16) or 4 (int8) consecutive input channels
 * of one tap, so K has kd = ceil(cg / D) * kh * kw lane steps (missing channels are zero
 * weights). Weights are converted once (a2r_conv2d_lowp_pack); activations on the fly, per tile:
 *   - implicit GEMM (as the fp32 kernel): the tile's input rows are converted once into a
 *     zero-padded strip of lanes (cd, sh, sw, srows, wq): padded row r*sh + py goes to row r of
 *     phase py (columns likewise; stride 1 is one phase, wq = w + 2*pad_w). Output column
 *     q = oy*wq + ox reads tap (cl, i, j) at strip[off + q], off = (((cl*sh + dy%sh)*sw +
 *     dx%sw)*srows + dy/sh)*wq + dx/sw with dy = i*dil_h, dx = j*dil_w; columns ox >= ow are
 *     computed and dropped. Each input value is converted once per tile (plus the halo rows),
 *     not kh*kw times. Used when every phase is read by some tap.
 *   - otherwise (a 1x1 stride-2 conv, say) the tile's NR-pixel panels are gathered (im2col)
 *     tap by tap and converted.
 * The micro-kernel accumulates an MR x NR tile in registers (fp32 for bf16, int32 for int8);
 * at avx512_amx in AMX tiles instead (amx_blocks: two row blocks at once), where one tap's
 * channel lanes split into equal chunks of 4-16 lanes (kc): weights packed per (tap, chunk) as
 * mr x kc tiles, the B rows of a chunk one strip plane (or panel row block) apart;
 * the epilogue (dequantisation for int8, bias, residual, activation) writes y once per row block.
 * At bf16, 3x3 stride-1 convs with enough channels take Winograd F(2,3) instead
 * (winograd_bf16.h: 2.25x fewer multiplies, the same micro-kernel on transformed operands).
 *
 * int8 arithmetic: weights w ~ sw[o] * qw, qw in [-127, 127] per output channel; activations
 * x ~ sa * (qx - zp), qx in [0, A2R_U8_LEVELS] from the caller's range [lo, hi] (widened to hold
 * 0, so zero padding is exact); y = sa * sw[o] * (sum qw*qx - zp * sum qw) + bias. Values outside
 * [lo, hi] are clamped to it. Between two int8 layers the tensor can stay u8 (a2r_kernels.h):
 * the first writes its output's levels on the second's grid (epilogue: in AVX-512 registers, or
 * quantise after the float epilogue), the second interleaves those bytes into lanes
 * (u8_to_lanes) instead of quantising floats:
 * the bundled encoder's 16 -> 24 stride-2 conv at 512^2 spent 40% of its time quantising 16 MB
 * of float input (perf, 1 thread).
 *
 * Scratch: one slot per thread in the caller's workspace; nothing is allocated here. */
#include <string.h>

#include "a2r_math.h"
#include "conv_common.h"
#include "lowp_simd.h"

#define B_TILE_BYTES (192 * 1024) /* gathered panels stay in L2 next to the weights */
#define MAX_PANELS 8
#define STRIP_BYTES (256 * 1024)  /* lanes are 2-4x denser than floats: same pixels as fp32's */
#define MAX_STRIP_PANELS 64
#define MIN_STRIP_OUT_ROWS 4      /* thinner tiles re-convert the halo rows too often */
#define ALIGN 64
#ifdef LOWP_AMX
#define C_ROWS (2 * MR) /* the C tile holds two row blocks (amx_blocks) */
#else
#define C_ROWS MR
#endif

typedef struct {
    int64_t oh, ow, p, cg, og, d, cd, taps, kd, mr, og_pad, nt, q, wq, srows, phases;
    int64_t strip_lanes, slot; /* slot: bytes per thread */
    int64_t kc;       /* AMX: channel lanes per tile product (a divisor of cd), 0: no AMX */
    int64_t cl_lanes; /* lanes between the B rows of consecutive channel lanes of one tap */
    int implicit, int8;
} geometry;

/* The AMX chunk: the largest divisor of cd up to 16 lanes (a tile row is 64 bytes), so that
 * one tile configuration serves the call; none below 4 lanes (16 int8 or 8 bf16 channels): a
 * tile product's cost does not shrink with its K, so thinner ones do no more than vpdpbusd.
 * At 4 lanes it still pays on a Sapphire Rapids core, 3x3 at 256^2, 1 thread, against the
 * vector kernel (tools/compare_builds.py --conv 16,16,256,1,1,int8 --conv 8,8,256,1,1,bf16
 * with the build before this level): int8 16 -> 16 0.88 -> 0.80 ms, bf16 8 -> 8 0.82 -> 0.38. */
static int64_t amx_lanes(int64_t cd) {
#ifdef LOWP_AMX
    for (int64_t k = A2R_MIN(cd, 16); k >= 4; k--)
        if (cd % k == 0) return k;
#else
    (void)cd;
#endif
    return 0;
}

static geometry geometry_of(const a2r_conv2d_shape *s, int precision) {
    geometry g;
    g.int8 = precision == A2R_PREC_INT8;
    g.d = g.int8 ? 4 : 2;
    g.oh = (s->h + 2 * s->pad_h - s->dil_h * (s->kh - 1) - 1) / s->stride_h + 1;
    g.ow = (s->w + 2 * s->pad_w - s->dil_w * (s->kw - 1) - 1) / s->stride_w + 1;
    g.p = g.oh * g.ow;
    g.cg = s->c / s->groups;
    g.og = s->o / s->groups;
    g.cd = (g.cg + g.d - 1) / g.d;
    g.taps = s->kh * s->kw;
    g.kd = g.cd * g.taps;
    g.mr = g.og <= MR / 2 ? MR / 2 : MR; /* a 3-channel output layer: fewer zero rows */
    g.og_pad = round_up(g.og, g.mr);
    g.implicit = every_phase_read(s->kh, s->dil_h, s->stride_h) &&
                 every_phase_read(s->kw, s->dil_w, s->stride_w);
    g.phases = s->stride_h * s->stride_w;
    g.wq = g.ow + (s->kw - 1) * s->dil_w / s->stride_w; /* = w + 2*pad_w at stride 1 */
    int64_t panels;
    if (g.implicit) {
        g.q = g.oh * g.wq;
        const int64_t min_panels =
            A2R_MIN(MAX_STRIP_PANELS, (MIN_STRIP_OUT_ROWS * g.wq + NR - 1) / NR);
        panels = MAX_STRIP_PANELS;
        while (panels > min_panels &&
               4 * g.cd * g.phases * g.wq * strip_rows(s, g.wq, panels * NR) > STRIP_BYTES)
            panels--;
        panels = A2R_MIN(panels, (g.q + NR - 1) / NR);
        g.nt = panels * NR;
        g.srows = strip_rows(s, g.wq, g.nt);
        /* + NR: the last panel reads past its row */
        g.strip_lanes = g.cd * g.phases * g.srows * g.wq + NR;
        g.cl_lanes = g.phases * g.srows * g.wq;
    } else {
        g.q = g.p;
        panels = B_TILE_BYTES / (4 * g.kd * NR);
        panels = A2R_MAX(1, A2R_MIN(panels, MAX_PANELS));
        panels = A2R_MIN(panels, (g.p + NR - 1) / NR);
        g.nt = panels * NR;
        g.srows = 0;
        g.strip_lanes = g.kd * g.nt;
        g.cl_lanes = g.taps * NR;
    }
    g.kc = amx_lanes(g.cd);
    /* slot: B lanes | C tile (C_ROWS x nt, fp32 or int32) | tap offsets (kd int32) | D rows of
     * max(w, NR) floats (gathered rows; the implicit path's channels past cg) */
    g.slot = round_up(4 * g.strip_lanes, ALIGN) + round_up(4 * C_ROWS * g.nt, ALIGN) +
             round_up(4 * g.kd, ALIGN) +
             round_up(4 * g.d * A2R_MAX(A2R_MAX(s->w, g.wq), NR), ALIGN) + ALIGN;
    return g;
}

/* ---- conversions (plain C, vectorised by the compiler) ---- */

/* float -> bf16 bits, round to nearest even; NaN stays NaN (quiet). */
static inline uint32_t to_bf16(float f) {
    const uint32_t u = a2r_float_to_bits(f);
    const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : r;
}

/* dst[t] = the lane of (lo[t], hi[t]) rounded to bf16, lo in the low half, t < n (hi NULL: 0).
 * With AVX512_BF16: vcvtne2ps2bf16 (round to nearest even as to_bf16; like vdpbf16ps, which
 * reads these lanes, it takes denormals as 0) and one vpermw to interleave the halves, 16 lanes
 * per step instead of ~16 integer ops per pair; elsewhere to_bf16 lane by lane. */
static inline void bf16_pack2(const float *restrict lo, const float *restrict hi,
                              uint32_t *restrict dst, int64_t n) {
#ifdef LOWP_DOT
    static const uint16_t interleave[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22,
                                            7, 23, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28,
                                            13, 29, 14, 30, 15, 31};
    const __m512i idx = _mm512_loadu_si512((const void *)interleave);
    for (int64_t t = 0; t < n; t += 16) {
        const __mmask16 m = n - t >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - t)) - 1);
        const __m512 a = _mm512_maskz_loadu_ps(m, lo + t);
        const __m512 b = hi ? _mm512_maskz_loadu_ps(m, hi + t) : _mm512_setzero_ps();
        const __m512i halves = (__m512i)_mm512_cvtne2ps_pbh(b, a); /* a in 0..15, b in 16..31 */
        _mm512_mask_storeu_epi32(dst + t, m, _mm512_permutexvar_epi16(idx, halves));
    }
#else
    if (hi)
        for (int64_t t = 0; t < n; t++) dst[t] = to_bf16(lo[t]) | to_bf16(hi[t]) << 16;
    else
        for (int64_t t = 0; t < n; t++) dst[t] = to_bf16(lo[t]);
#endif
}

typedef struct {
    float inv, zp; /* qx = clamp(round(x * inv + zp), 0, A2R_U8_LEVELS) */
} act_quant;

static inline uint32_t to_u8(float x, act_quant aq) {
    float t = x * aq.inv + aq.zp;
    t = t > 0.0f ? t : 0.0f; /* also maps NaN to 0 */
    t = t < (float)A2R_U8_LEVELS ? t : (float)A2R_U8_LEVELS;
    return (uint32_t)(int32_t)(t + 0.5f);
}

#ifdef LOWP_X86
/* to_u8 of VL floats, the same roundings (maxps(x, 0) returns its second operand, 0, for a NaN
 * x). GCC's vectorisation of the scalar compares went through masked moves and blends: a
 * 32-channel int8 conv at 128^2 took 0.92 ms with it in to_lanes, 0.82 with this (Zen 4, 1
 * thread). */
static inline vi_t to_u8_v(vf_t x, vf_t inv, vf_t zp) {
    x = vf_add(vf_mul(x, inv), zp);
    x = vf_min(vf_max(x, vf_zero()), vf_set1((float)A2R_U8_LEVELS));
    return vf_cvtt(vf_add(x, vf_set1(0.5f)));
}
#endif

/* The u8 grid of a range {lo, hi} (widened to hold 0, so that zero padding is exact); *step
 * (when step is not NULL): the value of one level. The same rule for a layer's input and for
 * an output written as u8 on the next layer's grid, so that the two agree bit for bit. */
static act_quant quant_of(const float range[2], float *step) {
    const float lo = A2R_MIN(range[0], 0.0f), hi = A2R_MAX(range[1], 0.0f);
    const float sa = hi > lo ? (hi - lo) / (float)A2R_U8_LEVELS : 1.0f;
    const act_quant aq = {1.0f / sa, __builtin_roundf(-lo / sa)};
    if (step) *step = sa;
    return aq;
}

/* lanes[t], t < n, of int8 levels LEVEL(r0, t) .. LEVEL(r3, t) (rows r0..r3; missing rows,
 * nrows < 4, are zq, the level of 0). */
#define INT8_LANES(LEVEL)                                                                       \
    switch (nrows) {                                                                            \
    case 1:                                                                                     \
        for (int64_t t = 0; t < n; t++)                                                         \
            lanes[t] = LEVEL(r0, t) | zq << 8 | zq << 16 | zq << 24;                            \
        break;                                                                                  \
    case 2:                                                                                     \
        for (int64_t t = 0; t < n; t++)                                                         \
            lanes[t] = LEVEL(r0, t) | LEVEL(r1, t) << 8 | zq << 16 | zq << 24;                  \
        break;                                                                                  \
    case 3:                                                                                     \
        for (int64_t t = 0; t < n; t++)                                                         \
            lanes[t] = LEVEL(r0, t) | LEVEL(r1, t) << 8 | LEVEL(r2, t) << 16 | zq << 24;        \
        break;                                                                                  \
    default:                                                                                    \
        for (int64_t t = 0; t < n; t++)                                                         \
            lanes[t] = LEVEL(r0, t) | LEVEL(r1, t) << 8 | LEVEL(r2, t) << 16 |                  \
                       LEVEL(r3, t) << 24;                                                      \
    }

/* lanes[t] for t < n from D rows of floats rows[r*ld + t] (missing rows: nrows < D are zeros). */
static void to_lanes(const geometry *g, const float *restrict rows, int64_t ld, int64_t nrows,
                     act_quant aq, uint32_t *restrict lanes, int64_t n) {
    const float *r0 = rows, *r1 = rows + ld, *r2 = rows + 2 * ld, *r3 = rows + 3 * ld;
    if (!g->int8) {
        bf16_pack2(r0, nrows >= 2 ? r1 : NULL, lanes, n);
        return;
    }
    const uint32_t zq = to_u8(0.0f, aq);
    int64_t done = 0;
#ifdef LOWP_X86
    const vf_t inv = vf_set1(aq.inv), zp = vf_set1(aq.zp);
    const vi_t zv = vi_set1(zq);
    for (; done + VL <= n; done += VL) {
        vi_t v = to_u8_v(vf_load(r0 + done), inv, zp);
        v = vi_or_shl(v, nrows > 1 ? to_u8_v(vf_load(r1 + done), inv, zp) : zv, 8);
        v = vi_or_shl(v, nrows > 2 ? to_u8_v(vf_load(r2 + done), inv, zp) : zv, 16);
        v = vi_or_shl(v, nrows > 3 ? to_u8_v(vf_load(r3 + done), inv, zp) : zv, 24);
        vi_store(lanes + done, v);
    }
#endif
    r0 += done, r1 += done, r2 += done, r3 += done, lanes += done, n -= done;
#define QUANTISED(r, t) to_u8((r)[t], aq)
    INT8_LANES(QUANTISED)
#undef QUANTISED
}

/* to_lanes from D rows of u8 levels already on this layer's grid (x_u8): interleaved only. */
static void u8_to_lanes(const uint8_t *restrict rows, int64_t ld, int64_t nrows, uint32_t zq,
                        uint32_t *restrict lanes, int64_t n) {
    const uint8_t *r0 = rows, *r1 = rows + ld, *r2 = rows + 2 * ld, *r3 = rows + 3 * ld;
#define GIVEN(r, t) ((uint32_t)(r)[t])
    INT8_LANES(GIVEN)
#undef GIVEN
}
#undef INT8_LANES

/* The activations, float or (x_u8) u8 levels: lanes of the D rows from element at. */
typedef struct {
    const void *base;
    int x_u8;
} source;

static inline void source_lanes(const geometry *g, source x, int64_t at, int64_t ld,
                                int64_t nrows, act_quant aq, uint32_t *restrict lanes,
                                int64_t n) {
    if (x.x_u8)
        u8_to_lanes((const uint8_t *)x.base + at, ld, nrows, to_u8(0.0f, aq), lanes, n);
    else
        to_lanes(g, (const float *)x.base + at, ld, nrows, aq, lanes, n);
}

/* The lane of value 0 (zero padding): 0 for bf16, zp in every byte for int8. */
static inline uint32_t zero_lane(const geometry *g, act_quant aq) {
    const uint32_t zq = g->int8 ? to_u8(0.0f, aq) : 0u;
    return zq | zq << 8 | zq << 16 | zq << 24;
}

/* ---- activations into B lanes ---- */

/* Implicit path: strip[((cl*sh + py)*sw + px)*srows + r)*wq + col] = lane of channels D*cl..
 * at padded row (r0 + r)*sh + py, padded column col*sw + px (zero outside the image).
 * Each source row is converted to lanes once and then dealt to its sw column phases; converting
 * per phase read every float twice, strided (int8 16 -> 24 stride 2 at 512^2, 1 thread, on a
 * Sapphire Rapids core: 3.80 -> 2.30 ms, tools/compare_builds.py --conv 16,24,512,2,1,int8).
 * x: the image's activations from element xg; tmp: D*max(w, wq) floats, here w lanes. */
static void fill_strip(const a2r_conv2d_shape *s, const geometry *g, source x, int64_t xg,
                       int64_t r0, act_quant aq, float *restrict tmp, uint32_t *restrict strip) {
    const uint32_t zl = zero_lane(g, aq);
    const int64_t wq = g->wq, hw = s->h * s->w, sh = s->stride_h, sw = s->stride_w;
    uint32_t *restrict lanes = (uint32_t *)tmp;
    const int64_t elem = x.x_u8 ? 1 : sizeof(float);
    for (int64_t cl = 0; cl < g->cd; cl++) {
        const int64_t c0 = cl * g->d, nrows = A2R_MIN(g->d, g->cg - c0);
        for (int64_t r = 0; r < g->srows; r++)   /* x's rows in order: one stream a plane */
            for (int64_t py = 0; py < sh; py++) {
                const int64_t iy = (r0 + r) * sh + py - s->pad_h;
                const int valid = iy >= 0 && iy < s->h;
                const int64_t src = xg + c0 * hw + iy * s->w;
                prefetch_row(s, (const char *)x.base + xg * elem, g->srows, r0,
                             (cl * g->srows + r) * sh + py + PREFETCH_ROWS, g->d, elem);
                uint32_t *dst = strip + ((cl * sh + py) * sw * g->srows + r) * wq;
                if (!valid || sw > 1) {
                    if (valid) source_lanes(g, x, src, hw, nrows, aq, lanes, s->w);
                    deal_phases(dst, g->srows * wq, valid ? lanes : NULL, s->w, s->pad_w, wq, sw,
                                zl);
                } else { /* D channel rows at stride hw: converted in place, between the pads */
                    int64_t a, e;
                    phase_span(0, 1, s->pad_w, s->w, wq, &a, &e);
                    for (int64_t t = 0; t < a; t++) dst[t] = zl;
                    if (e > a)
                        source_lanes(g, x, src + a - s->pad_w, hw, nrows, aq, dst + a, e - a);
                    for (int64_t t = e; t < wq; t++) dst[t] = zl;
                }
            }
    }
}

/* dst[t], t < n: channel ci at tap (i, j) for output pixels p0.. (im2col of one row). */
static void gather_row(const a2r_conv2d_shape *s, const geometry *g, const float *restrict xg,
                       int64_t ci, int64_t i, int64_t j, int64_t p0, int64_t n,
                       float *restrict dst) {
    const float *plane = xg + ci * s->h * s->w;
    const int64_t offy = i * s->dil_h - s->pad_h, offx = j * s->dil_w - s->pad_w;
    const int64_t sw = s->stride_w;
    const int64_t x0 = first_valid(offx, sw), x1 = first_valid(offx - s->w, sw);
    int64_t q = 0, oy = p0 / g->ow, ox = p0 % g->ow;
    while (q < n) {
        const int64_t len = A2R_MIN(g->ow - ox, n - q);
        const int64_t iy = oy * s->stride_h + offy;
        float *d = dst + q;
        if (iy < 0 || iy >= s->h) {
            for (int64_t t = 0; t < len; t++) d[t] = 0.0f;
        } else {
            const int64_t a = A2R_MAX(0, A2R_MIN(x0 - ox, len));
            const int64_t e = A2R_MAX(a, A2R_MIN(x1 - ox, len));
            const float *src = plane + iy * s->w + (ox + a) * sw + offx;
            for (int64_t t = 0; t < a; t++) d[t] = 0.0f;
            for (int64_t t = a; t < e; t++) d[t] = src[(t - a) * sw];
            for (int64_t t = e; t < len; t++) d[t] = 0.0f;
        }
        q += len;
        oy++;
        ox = 0;
    }
}

/* Gathered path: npan panels of kd x NR lanes for pixels [p0, p0 + np). rows: D*NR floats. */
static void gather_panels(const a2r_conv2d_shape *s, const geometry *g, const float *restrict xg,
                          int64_t p0, int64_t np, int64_t npan, act_quant aq,
                          float *restrict rows, uint32_t *restrict bt) {
    const uint32_t zl = zero_lane(g, aq);
    for (int64_t pan = 0; pan < npan; pan++) {
        const int64_t pa = p0 + pan * NR, len = A2R_MIN(NR, p0 + np - pa);
        uint32_t *d = bt + pan * g->kd * NR;
        for (int64_t cl = 0; cl < g->cd; cl++) {
            const int64_t c0 = cl * g->d, nrows = A2R_MIN(g->d, g->cg - c0);
            for (int64_t i = 0; i < s->kh; i++)
                for (int64_t j = 0; j < s->kw; j++, d += NR) {
                    for (int64_t r = 0; r < nrows; r++)
                        gather_row(s, g, xg, c0 + r, i, j, pa, len, rows + r * NR);
                    to_lanes(g, rows, NR, nrows, aq, d, len);
                    for (int64_t t = len; t < NR; t++) d[t] = zl;
                }
        }
    }
}

/* ---- micro-kernels: C[i*ldc + t] = sum_k A[k*mr + i] . B[row_k + t], i < mr, t < NR ----
 * row_k = off[k] (implicit strip) or k*NR (panel). Inlined with constant mr. */

static inline void mk_bf16(const int mr, int64_t kd, const uint32_t *restrict a,
                           const uint32_t *restrict b, const int32_t *restrict off,
                           float *restrict c, int64_t ldc) {
#ifdef LOWP_SCALAR
    float acc[MR][NR];
    for (int i = 0; i < mr; i++)
        for (int t = 0; t < NR; t++) acc[i][t] = 0.0f;
    for (int64_t k = 0; k < kd; k++, a += mr) {
        const uint32_t *bk = off ? b + off[k] : b + k * NR;
        for (int i = 0; i < mr; i++) {
            const float ae = a2r_bits_to_float(a[i] << 16);
            const float ao = a2r_bits_to_float(a[i] & 0xffff0000u);
            for (int t = 0; t < NR; t++) {
                acc[i][t] = A2R_MADD(ao, a2r_bits_to_float(bk[t] & 0xffff0000u), acc[i][t]);
                acc[i][t] = A2R_MADD(ae, a2r_bits_to_float(bk[t] << 16), acc[i][t]);
            }
        }
    }
    for (int i = 0; i < mr; i++)
        for (int t = 0; t < NR; t++) c[i * ldc + t] = acc[i][t];
#else
    vf_t acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) acc[i][v] = vf_zero();
    for (int64_t k = 0; k < kd; k++, a += mr) {
        const uint32_t *bk = off ? b + off[k] : b + k * NR;
        vi_t bv[NV];
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) bv[v] = vi_load(bk + v * VL);
#ifdef LOWP_DOT
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++) {
            const vi_t av = vi_set1(a[i]);
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[i][v] = bf16_dot(acc[i][v], av, bv[v]);
        }
#else /* widen: odd channel then even, as vdpbf16ps orders them */
        vf_t bw[NV];
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) bw[v] = bf16_hi(bv[v]);
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++) {
            const vf_t av = vf_set1(a2r_bits_to_float(a[i] & 0xffff0000u));
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[i][v] = vf_fma(av, bw[v], acc[i][v]);
        }
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) bw[v] = bf16_lo(bv[v]);
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++) {
            const vf_t av = vf_set1(a2r_bits_to_float(a[i] << 16));
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[i][v] = vf_fma(av, bw[v], acc[i][v]);
        }
#endif
    }
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) vf_store(c + i * ldc + v * VL, acc[i][v]);
#endif
}

static inline void mk_int8(const int mr, int64_t kd, const uint32_t *restrict a,
                           const uint32_t *restrict b, const int32_t *restrict off,
                           int32_t *restrict c, int64_t ldc) {
#ifdef LOWP_SCALAR
    int32_t acc[MR][NR];
    for (int i = 0; i < mr; i++)
        for (int t = 0; t < NR; t++) acc[i][t] = 0;
    for (int64_t k = 0; k < kd; k++, a += mr) {
        const uint32_t *bk = off ? b + off[k] : b + k * NR;
        for (int i = 0; i < mr; i++)
            for (int t = 0; t < NR; t++)
                for (int byte = 0; byte < 4; byte++)
                    acc[i][t] += (int32_t)((bk[t] >> (8 * byte)) & 0xffu) *
                                 (int32_t)(int8_t)(a[i] >> (8 * byte));
    }
    for (int i = 0; i < mr; i++)
        for (int t = 0; t < NR; t++) c[i * ldc + t] = acc[i][t];
#else
    vi_t acc[MR][NV];
    const vi_t ones = vi_ones16();
    (void)ones;
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) acc[i][v] = vi_zero();
    for (int64_t k = 0; k < kd; k++, a += mr) {
        const uint32_t *bk = off ? b + off[k] : b + k * NR;
        vi_t bv[NV];
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) bv[v] = vi_load(bk + v * VL);
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++) {
            const vi_t av = vi_set1(a[i]);
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[i][v] = u8s8_dot(acc[i][v], bv[v], av, ones);
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) vi_store(c + i * ldc + v * VL, acc[i][v]);
#endif
}

#ifdef LOWP_AMX
_Static_assert(NR == 32, "amx_blocks covers a panel with two 16-pixel C tiles");

/* Tiles: 0-1 C of the first row block, 2-3 of the second (mr x 16 pixels each, int32 or
 * fp32), 4-5 A (mr output channels x kc weight lanes, one per row block), 6-7 B (kc channel
 * lanes x 16 pixels). Four independent accumulators, each A and B tile used twice. Loaded
 * once per thread and call, released after. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;

static void amx_configure(const geometry *g) {
    amx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = (uint8_t)(t >= 6 ? g->kc : g->mr);
        cfg.colsb[t] = (uint16_t)(t == 4 || t == 5 ? 4 * g->kc : 64);
    }
    _tile_loadconfig(&cfg);
}

/* C tile c += A tile a . B tile b (tile numbers: immediates): int8 s8 x u8, or bf16 pairs. */
#define TILE_DOT(int8, c, a, b)                                                                 \
    do {                                                                                        \
        if (int8) _tile_dpbsud(c, a, b);                                                        \
        else _tile_dpbf16ps(c, a, b);                                                           \
    } while (0)

/* C[i*ldc + t] (i < nb*mr: nb = 1 or 2 consecutive row blocks, t < NR) = sum over taps and
 * chunks of A . B as block_kernel: s8 weights x u8 activations (tdpbsud) or bf16 pairs
 * (tdpbf16ps). a: the first row block's weights, (tap, chunk) after (tap, chunk), each mr x kc
 * lanes; the second block's follow mr*kd lanes later. */
static inline void amx_blocks(const geometry *g, int nb, const uint32_t *a,
                              const uint32_t *b, const int32_t *off, void *c, int64_t ldc) {
    const int64_t chunks = g->cd / g->kc, stride = 4 * g->cl_lanes, step = g->mr * g->kc;
    const uint32_t *a2 = a + g->mr * g->kd;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t tap = 0; tap < g->taps; tap++)
        for (int64_t ch = 0; ch < chunks; ch++, a += step, a2 += step) {
            const int64_t k = ch * g->kc * g->taps + tap; /* K is (channel lane, tap) */
            const uint32_t *bk = off ? b + off[k] : b + k * NR;
            _tile_loadd(6, bk, stride);
            _tile_loadd(7, bk + 16, stride);
            _tile_loadd(4, a, 4 * g->kc);
            TILE_DOT(g->int8, 0, 4, 6);
            TILE_DOT(g->int8, 1, 4, 7);
            if (nb == 2) {
                _tile_loadd(5, a2, 4 * g->kc);
                TILE_DOT(g->int8, 2, 5, 6);
                TILE_DOT(g->int8, 3, 5, 7);
            }
        }
    char *c1 = (char *)c + 4 * g->mr * ldc;
    _tile_stored(0, c, 4 * ldc);
    _tile_stored(1, (char *)c + 64, 4 * ldc);
    if (nb == 2) {
        _tile_stored(2, c1, 4 * ldc);
        _tile_stored(3, c1 + 64, 4 * ldc);
    }
}
#endif

/* One panel of one row block: the vector kernel for precision and g->mr. */
static inline void block_kernel(const geometry *g, const uint32_t *a, const uint32_t *b,
                                const int32_t *off, void *c, int64_t ldc) {
    if (g->int8) {
        if (g->mr == MR) mk_int8(MR, g->kd, a, b, off, (int32_t *)c, ldc);
        else mk_int8(MR / 2, g->kd, a, b, off, (int32_t *)c, ldc);
    } else {
        if (g->mr == MR) mk_bf16(MR, g->kd, a, b, off, (float *)c, ldc);
        else mk_bf16(MR / 2, g->kd, a, b, off, (float *)c, ldc);
    }
}

/* ---- epilogue ---- */

/* y[t] = act(c[t] * scale + shift + r[t]), t < n; c is fp32 (bf16) or int32 (int8: c - cz,
 * cz = zp * sum qw exact in int32, times the dequantisation factor). r may be NULL. */
#define EPILOGUE_PASS(ACT, CVAL)                                                              \
    do {                                                                                      \
        if (r)                                                                                \
            for (int64_t t = 0; t < n; t++)                                                   \
                y[t] = activate(A2R_MADD(CVAL, scale, shift) + r[t], ACT, alpha);             \
        else                                                                                  \
            for (int64_t t = 0; t < n; t++)                                                   \
                y[t] = activate(A2R_MADD(CVAL, scale, shift), ACT, alpha);                    \
    } while (0)
#define EPILOGUE_ACTS(CVAL)                                                                   \
    switch (act) {                                                                            \
    case A2R_ACT_RELU: EPILOGUE_PASS(A2R_ACT_RELU, CVAL); break;                              \
    case A2R_ACT_LEAKY_RELU: EPILOGUE_PASS(A2R_ACT_LEAKY_RELU, CVAL); break;                  \
    case A2R_ACT_SILU: EPILOGUE_PASS(A2R_ACT_SILU, CVAL); break;                              \
    default: EPILOGUE_PASS(A2R_ACT_NONE, CVAL); break;                                        \
    }
static void float_epilogue(const geometry *g, const void *c, int32_t cz, float scale,
                           float shift, const float *restrict r, int act, float alpha,
                           float *restrict y, int64_t n) {
    if (g->int8) {
        const int32_t *ci = (const int32_t *)c;
        EPILOGUE_ACTS((float)(ci[t] - cz))
    } else {
        const float *cf = (const float *)c;
        EPILOGUE_ACTS(cf[t])
    }
}
#undef EPILOGUE_ACTS
#undef EPILOGUE_PASS

#ifndef __AVX512F__
/* dst[t] = to_u8(v[t], q), t < n: the levels below AVX-512 (there the epilogue quantises in
 * registers, u8_epilogue_avx512).
 * Written out for AVX2: the auto-vectoriser, led by the byte stores to 32 lanes per step,
 * juggled masks and ran slower than the float stores it replaces. maxps(x, 0) returns 0 for a
 * NaN x, as to_u8 does. */
static void quantise(const float *restrict v, int64_t n, act_quant q, uint8_t *restrict dst) {
    int64_t t = 0;
#ifdef LOWP_X86 /* (AVX2 here) */
    const __m256 inv = _mm256_set1_ps(q.inv), zp = _mm256_set1_ps(q.zp);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7); /* undo the packs' lanes */
    for (; t + 32 <= n; t += 32) {
        __m256i k[4];
        for (int j = 0; j < 4; j++) /* 0..255: packs never clip */
            k[j] = to_u8_v(_mm256_loadu_ps(v + t + 8 * j), inv, zp);
        const __m256i w = _mm256_packus_epi16(_mm256_packus_epi32(k[0], k[1]),
                                              _mm256_packus_epi32(k[2], k[3]));
        _mm256_storeu_si256((__m256i *)(dst + t), _mm256_permutevar8x32_epi32(w, order));
    }
#endif
    for (; t < n; t++) dst[t] = (uint8_t)to_u8(v[t], q);
}
#endif

#ifdef __AVX512F__
/* 16 int32 sums to u8 levels: what float_epilogue then to_u8 compute, bit for bit (one fma,
 * the activation, to_u8's clamps as maxps/minps). */
static inline __m128i u8_levels_avx512(__m512i c, __m512 r, int act, __m512i z, __m512 sc,
                                       __m512 sh, __m512 al, __m512 inv, __m512 zp) {
    const __m512 zero = _mm512_setzero_ps();
    __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(c, z)), sc, sh);
    v = _mm512_add_ps(v, r); /* r: the residual, or -0 (x + -0 is x, -0 included) */
    if (act == A2R_ACT_RELU) /* v > 0 ? v : 0 */
        v = _mm512_max_ps(v, zero);
    else if (act == A2R_ACT_LEAKY_RELU) /* v >= 0 ? v : alpha * v */
        v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, zero, _CMP_GE_OQ), _mm512_mul_ps(v, al),
                                 v);
    else if (act == A2R_ACT_SILU) /* a2r_vsilu: a2r_silu1's operations, vector-wide */
        v = (__m512)a2r_vsilu((a2r_vf)v);
    return _mm512_cvtepi32_epi8(to_u8_v(v, inv, zp));
}

/* The int8 epilogue straight to u8 levels in registers, every activation (SiLU through
 * a2r_vsilu). On the bundled encoder (1 thread) the two passes (float_epilogue, then the
 * quantising) were a fifth of its time. */
static void u8_epilogue_avx512(const int32_t *restrict c, int32_t cz, float scale, float shift,
                               const float *restrict r, int act, float alpha,
                               uint8_t *restrict yq, act_quant oq, int64_t n) {
    const __m512i z = _mm512_set1_epi32(cz);
    const __m512 sc = _mm512_set1_ps(scale), sh = _mm512_set1_ps(shift);
    const __m512 al = _mm512_set1_ps(alpha), inv = _mm512_set1_ps(oq.inv);
    const __m512 zp = _mm512_set1_ps(oq.zp);
    const __m512 none = _mm512_set1_ps(-0.0f);
    int64_t t = 0;
    /* whole vectors unmasked (a masked vpmovdb to memory was the bottleneck), then the tail */
    for (; t + 16 <= n; t += 16)
        _mm_storeu_si128((__m128i *)(yq + t),
                         u8_levels_avx512(_mm512_loadu_si512(c + t),
                                          r ? _mm512_loadu_ps(r + t) : none,
                                          act, z, sc, sh, al, inv, zp));
    if (t < n) {
        const __mmask16 m = (__mmask16)((1u << (n - t)) - 1);
        _mm_mask_storeu_epi8(yq + t, m,
                             u8_levels_avx512(_mm512_maskz_loadu_epi32(m, c + t),
                                              r ? _mm512_maskz_loadu_ps(m, r + t) : none,
                                              act, z, sc, sh, al, inv, zp));
    }
}
#endif

/* float_epilogue into y, or with yq (int8 only) as u8 levels on the grid oq instead (quant_of
 * of the next layer's range: what that layer's to_lanes would make of y), y unused. */
static void epilogue(const geometry *g, const void *c, int32_t cz, float scale, float shift,
                     const float *restrict r, int act, float alpha, float *restrict y,
                     uint8_t *restrict yq, act_quant oq, int64_t n) {
    if (!yq) {
        float_epilogue(g, c, cz, scale, shift, r, act, alpha, y, n);
        return;
    }
#ifdef __AVX512F__
    u8_epilogue_avx512((const int32_t *)c, cz, scale, shift, r, act, alpha, yq, oq, n);
    (void)g;
#else
    float v[256]; /* the values pass through L1 */
    for (int64_t t = 0; t < n; t += 256) {
        const int64_t len = A2R_MIN(256, n - t);
        float_epilogue(g, (const char *)c + 4 * t, cz, scale, shift, r ? r + t : NULL, act,
                       alpha, v, len);
        quantise(v, len, oq, yq + t);
    }
#endif
}

/* Row blocks per work item: all of them, unless (image, tile) items are too few for the
 * threads; then blocks are split so each thread gets about two items. */
static int64_t blocks_per_item(int64_t blocks, int64_t units, int nthr) {
    if (units >= 2 * nthr) return blocks;
    const int64_t split = A2R_MIN(blocks, (2 * nthr + units - 1) / units);
    return (blocks + split - 1) / split;
}

/* ---- Winograd F(2,3) at bf16 ---- */

#include "winograd_bf16.h"

/* Path choice (a2r_conv2d_set_algo in runtime.c, shared with the fp32 conv): A2R_CONV2D_AUTO,
 * _DIRECT or _WINOGRAD. int8 always runs direct. */
extern int a2r_conv2d_algo;

/* bf16 Winograd where it can run and was measured to pay. With the dot-product unit the bf16
 * GEMM is twice as fast as the fp32 one but the transforms cost the same, so it pays later than
 * at fp32. Forced-path CPU times, 1 thread, Zen 4 avx512_bf16, Winograd vs direct at 128^2
 * (C -> O), on a loaded box: 16 -> 16 0.49 vs 0.40 ms, 32 -> 16 0.93 vs 0.76, 16 -> 32 0.77 vs
 * 0.77, 32 -> 24 1.16 vs 1.12, 24 -> 32 0.99 vs 1.13, 32 -> 32 1.42 vs 1.48 (64^2 0.38 vs 0.38,
 * 256^2 6.9 vs 6.8), 24 -> 48 1.41 vs 1.73, 64 -> 64 4.4 vs 6.3; 48 -> 48 at 64^2 0.63 vs 0.81.
 * Later, on a quiet VM, `python -m pytest -q -s -c benchmarks/pytest.ini
 * benchmarks/bench_precision.py -k winograd_rule` (Winograd / direct, two runs, 1 thread / 2
 * threads): 24 -> 32 1.12-1.14x / 1.17-1.18x, 32 -> 24 0.96-1.04x / 1.10-1.13x, 32 -> 32 at
 * 128^2 1.07-1.13x / 1.23x, 24 -> 48 at 256^2 1.13-1.15x / 1.08-1.16x; 16 -> 16, 16 -> 24 and
 * 32 -> 16 0.78-1.04x, 16 -> 32 0.99-1.10x, 24 -> 24 0.98-1.14x. So C, O >= 24 with
 * C*O >= 768. One loss remains in it: 32 -> 32 at 64^2 on 2 threads, 0.84-0.93x (1.00-1.06x on
 * 1), a few hundredths of a millisecond, left to the rule rather than a size exception.
 * Without the unit (bf16 widened to fp32, the GEMM the bottleneck) Winograd wins from 16
 * channels: avx2 16 -> 16 0.85 vs 1.00, 16 -> 24 1.15 vs 1.50, 32 -> 32 2.43 vs 4.08;
 * avx512 16 -> 16 0.70 vs 0.74, 32 -> 32 1.98 vs 3.08. With AMX tiles the direct path is
 * taken wherever they run (auto). */
#ifdef LOWP_DOT
#define WINO_MIN_C 24
#define WINO_MIN_O 24
#define WINO_MIN_CO 768
#else
#define WINO_MIN_C 16
#define WINO_MIN_O 16
#define WINO_MIN_CO 256
#endif
static int use_winograd(const a2r_conv2d_shape *s, const geometry *g, int precision) {
    if (precision != A2R_PREC_BF16 || !wino_able(s) || a2r_conv2d_algo == A2R_CONV2D_DIRECT)
        return 0;
    return a2r_conv2d_algo == A2R_CONV2D_WINOGRAD ||
           (!g->kc && s->c >= WINO_MIN_C && s->o >= WINO_MIN_O && s->c * s->o >= WINO_MIN_CO);
}

/* ---- entry points ---- */

/* Packed: per group, og_pad/mr blocks of kd steps of mr lanes (with AMX tiles: of taps x cd/kc
 * chunks of mr x kc lanes); bf16 then appends Winograd's U
 * where it can run (either path can be chosen at run time from the same packing); int8 appends
 * sw[o] (float) and sum qw[o] (int32) for the s->o output channels. */
int64_t A2R_KERNEL(a2r_conv2d_lowp_packed_size)(const a2r_conv2d_shape *s, int precision) {
    const geometry g = geometry_of(s, precision);
    const int64_t wino = !g.int8 && wino_able(s) ? wino_packed_lanes(s) : 0;
    return 4 * (s->groups * g.og_pad * g.kd + wino) + (g.int8 ? 8 * s->o : 0);
}

int64_t A2R_KERNEL(a2r_conv2d_lowp_workspace_size)(const a2r_conv2d_shape *s, int precision) {
    const geometry g = geometry_of(s, precision);
    int64_t slot = g.slot;
    if (!g.int8 && wino_able(s)) slot = A2R_MAX(slot, wino_geometry_of(s, &g).slot);
    return slot * a2r_num_threads();
}

int A2R_KERNEL(a2r_conv2d_lowp_u8_levels)(void) { return A2R_U8_LEVELS; }

int A2R_KERNEL(a2r_conv2d_lowp_takes_u8)(const a2r_conv2d_shape *s, int precision) {
    return precision == A2R_PREC_INT8 && geometry_of(s, precision).implicit;
}

/* The packed lane of output channel oc (a padding row past the group's channels when !real:
 * zero), channel lane cl, tap: its D weights rounded (bf16) or quantised (int8, counted into
 * wsum[oc]). */
static uint32_t weight_lane(const geometry *g, const float *w, const float *wscale,
                            int32_t *wsum, int64_t oc, int real, int64_t cl, int64_t tap) {
    uint32_t lane = 0;
    for (int64_t r = 0; r < g->d && real; r++) {
        const int64_t ci = cl * g->d + r;
        if (ci >= g->cg) break;
        const float v = w[(oc * g->cg + ci) * g->taps + tap];
        if (g->int8) {
            float q = v / wscale[oc];
            q = q > 127.0f ? 127.0f : (q < -127.0f ? -127.0f : q);
            const int32_t qi = (int32_t)__builtin_roundf(q);
            wsum[oc] += qi;
            lane |= ((uint32_t)qi & 0xffu) << (8 * r);
        } else {
            lane |= to_bf16(v) << (16 * r);
        }
    }
    return lane;
}

void A2R_KERNEL(a2r_conv2d_lowp_pack)(const a2r_conv2d_shape *s, int precision,
                                      const float *restrict w, void *packed) {
    const geometry g = geometry_of(s, precision);
    uint32_t *lanes = (uint32_t *)packed;
    float *wscale = (float *)(lanes + s->groups * g.og_pad * g.kd);
    int32_t *wsum = (int32_t *)(wscale + s->o);
    const int64_t kfull = g.cg * g.taps; /* floats per output channel in w */
    if (g.int8)
        for (int64_t o = 0; o < s->o; o++) {
            float amax = 0.0f;
            for (int64_t k = 0; k < kfull; k++)
                amax = A2R_MAX(amax, __builtin_fabsf(w[o * kfull + k]));
            wscale[o] = amax > 0.0f ? amax / 127.0f : 1.0f;
            wsum[o] = 0;
        }
    for (int64_t gi = 0; gi < s->groups; gi++)
        for (int64_t ob = 0; ob < g.og_pad / g.mr; ob++) {
            const int64_t o0 = gi * g.og + ob * g.mr, orows = A2R_MIN(g.mr, g.og - ob * g.mr);
            if (g.kc) {
                for (int64_t tap = 0; tap < g.taps; tap++)
                    for (int64_t c0 = 0; c0 < g.cd; c0 += g.kc)
                        for (int64_t i = 0; i < g.mr; i++)
                            for (int64_t cl = c0; cl < c0 + g.kc; cl++)
                                *lanes++ = weight_lane(&g, w, wscale, wsum, o0 + i, i < orows,
                                                       cl, tap);
            } else {
                for (int64_t cl = 0; cl < g.cd; cl++)
                    for (int64_t tap = 0; tap < g.taps; tap++)
                        for (int64_t i = 0; i < g.mr; i++)
                            *lanes++ = weight_lane(&g, w, wscale, wsum, o0 + i, i < orows, cl,
                                                   tap);
            }
        }
    if (!g.int8 && wino_able(s)) wino_pack(s, w, lanes);
}

void A2R_KERNEL(a2r_conv2d_lowp)(const a2r_conv2d_shape *s, int precision, const void *x,
                                 int x_u8, const void *packed, const float x_range[2],
                                 const float *bias, const float *residual, int act,
                                 float alpha, void *workspace, int64_t workspace_bytes,
                                 void *y, const float *y_range) {
    const geometry g = geometry_of(s, precision);
    const uint32_t *wl = (const uint32_t *)packed;
    if (use_winograd(s, &g, precision)) { /* bf16: float in and out */
        wino_conv(s, &g, (const float *)x, wl + g.og_pad * g.kd, bias, residual, act, alpha,
                  workspace, workspace_bytes, (float *)y);
        return;
    }
    const float *wscale = (const float *)(wl + s->groups * g.og_pad * g.kd);
    const int32_t *wsum = (const int32_t *)(wscale + s->o);
    act_quant aq = {1.0f, 0.0f}, oq = {1.0f, 0.0f};
    float sa = 1.0f;
    if (g.int8) aq = quant_of(x_range, &sa);
    uint8_t *yq = g.int8 && y_range ? (uint8_t *)y : NULL; /* else yf */
    float *yf = yq ? NULL : (float *)y;
    if (yq) oq = quant_of(y_range, NULL);
    const source xs = {x, g.int8 && x_u8};
    const int64_t blocks = g.og_pad / g.mr, tiles = (g.q + g.nt - 1) / g.nt;
    const int64_t images = s->n * s->groups;
    int nthr = (int)A2R_MAX(1, A2R_MIN(a2r_num_threads(), workspace_bytes / g.slot));
    const int64_t per_item = blocks_per_item(blocks, images * tiles, nthr);
    const int64_t chunks = (blocks + per_item - 1) / per_item;
    const int64_t items = images * tiles * chunks;
    if (items * g.nt * g.og_pad * g.kd * g.d < A2R_PAR_GRAIN * 16) nthr = 1;
    #pragma omp parallel num_threads(nthr)
    {
        char *slot = (char *)workspace + (int64_t)A2R_THREAD_ID() * g.slot;
        slot += (ALIGN - (uintptr_t)slot % ALIGN) % ALIGN;
        uint32_t *bt = (uint32_t *)slot;
        void *ct = slot + round_up(4 * g.strip_lanes, ALIGN);
        int32_t *off = (int32_t *)((char *)ct + round_up(4 * C_ROWS * g.nt, ALIGN));
        float *rows = (float *)((char *)off + round_up(4 * g.kd, ALIGN));
        if (g.implicit) /* tap (cl, i, j) of column q reads strip[off + q] */
            strip_tap_offsets(s, g.cd, g.srows, g.wq, off);
#ifdef LOWP_AMX
        if (g.kc) amx_configure(&g);
#endif
        #pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            const int64_t chunk = it % chunks, tile = (it / chunks) % tiles;
            const int64_t img = it / (chunks * tiles), ni = img / s->groups, gi = img % s->groups;
            const int64_t p0 = tile * g.nt, np = A2R_MIN(g.nt, g.q - p0);
            const int64_t npan = (np + NR - 1) / NR;
            const int64_t b0 = chunk * per_item, b1 = A2R_MIN(blocks, b0 + per_item);
            const int64_t xg = (ni * s->c + gi * g.cg) * s->h * s->w;
            const uint32_t *wg = wl + gi * g.og_pad * g.kd;
            const uint32_t *strip0 = NULL;
            if (g.implicit) {
                const int64_t r0 = p0 / g.wq;
                fill_strip(s, &g, xs, xg, r0, aq, rows, bt);
                strip0 = bt + (p0 - r0 * g.wq);
            } else {
                gather_panels(s, &g, (const float *)x + xg, p0, np, npan, aq, rows, bt);
            }
            for (int64_t ob = b0, nb = 1; ob < b1; ob += nb) {
                const uint32_t *wb = wg + ob * g.mr * g.kd;
                nb = g.kc && ob + 1 < b1 ? 2 : 1; /* AMX: two row blocks share each B tile */
                for (int64_t pan = 0; pan < npan; pan++) {
                    void *cp = (char *)ct + 4 * pan * NR;
                    const uint32_t *b = g.implicit ? strip0 + pan * NR : bt + pan * g.kd * NR;
                    const int32_t *boff = g.implicit ? off : NULL;
#ifdef LOWP_AMX
                    if (g.kc) {
                        amx_blocks(&g, (int)nb, wb, b, boff, cp, g.nt);
                        continue;
                    }
#endif
                    block_kernel(&g, wb, b, boff, cp, g.nt);
                }
                const int64_t o1 = A2R_MIN((ob + nb) * g.mr, g.og);
                for (int64_t o = ob * g.mr; o < o1; o++) {
                    const int64_t oc = gi * g.og + o, plane = (ni * s->o + oc) * g.p;
                    const float bo = bias ? bias[oc] : 0.0f;
                    const float scale = g.int8 ? sa * wscale[oc] : 1.0f;
                    const int32_t cz = g.int8 ? (int32_t)aq.zp * wsum[oc] : 0;
                    const char *cr = (const char *)ct + 4 * (o - ob * g.mr) * g.nt;
                    if (!g.implicit) {
                        epilogue(&g, cr, cz, scale, bo, residual ? residual + plane + p0 : NULL,
                                 act, alpha, yf ? yf + plane + p0 : NULL,
                                 yq ? yq + plane + p0 : NULL, oq, np);
                        continue;
                    }
                    for (int64_t q = p0; q < p0 + np;) { /* keep columns ox < ow */
                        const int64_t oy = q / g.wq, ox = q % g.wq;
                        const int64_t len = A2R_MIN(g.wq - ox, p0 + np - q);
                        const int64_t keep = A2R_MAX(0, A2R_MIN(len, g.ow - ox));
                        const int64_t yo = plane + oy * g.ow + ox;
                        if (keep > 0)
                            epilogue(&g, cr + 4 * (q - p0), cz, scale, bo,
                                     residual ? residual + yo : NULL, act, alpha,
                                     yf ? yf + yo : NULL, yq ? yq + yo : NULL, oq, keep);
                        q += len;
                    }
                }
            }
        }
#ifdef LOWP_AMX
        if (g.kc) _tile_release();
#endif
    }
}

/* ---- roofline: the micro-kernel itself on operands in L1 ----
 * The ceiling of the conv's inner loop without the memory system: mk_bf16 / mk_int8 (their
 * full MR x NR tile) run over PEAK_KD lane steps of A (8 KB of weights) while every step reads
 * the same NR-lane B row (offset table of zeros), so A and B stay in L1; the C tile is written
 * once per PEAK_KD steps. At avx512_amx the tile products instead (amx_blocks). */
#define PEAK_KD 256

#ifndef LOWP_AMX
/* One precision per function, not inlined: with both kernels inlined into one OpenMP body GCC
 * spilled all but four of the int8 accumulators (measured 76 instead of ~400 Gop/s). */
__attribute__((noinline)) static float peak_rounds(int int8, int64_t rounds, const uint32_t *a,
                                                   const uint32_t *b, const int32_t *off,
                                                   float *c) {
    float total = 0.0f;
    for (int64_t r = 0; r < rounds; r++) {
        const int64_t at = r % (MR * NR); /* an int32 read as a float would be a denormal */
        if (int8) {
            mk_int8(MR, PEAK_KD, a, b, off, (int32_t *)c, NR);
            total += (float)((const int32_t *)c)[at];
        } else {
            mk_bf16(MR, PEAK_KD, a, b, off, c, NR);
            total += c[at];
        }
    }
    return total;
}
#endif

#ifdef LOWP_AMX
/* With AMX tiles: amx_blocks over two row blocks of PEAK_KD / 2 lanes in 16-lane chunks of one
 * tap, every chunk reading the same 16 B rows (offsets 0, rows NR lanes apart): as many
 * multiply-adds per round as the vector kernel's. */
__attribute__((noinline)) static float amx_peak_rounds(int int8, int64_t rounds,
                                                       const uint32_t *a, const uint32_t *b,
                                                       const int32_t *off, float *c) {
    geometry g;
    memset(&g, 0, sizeof g);
    g.int8 = int8;
    g.mr = MR;
    g.kc = 16;
    g.cd = g.kd = PEAK_KD / 2; /* two row blocks of PEAK_KD / 2 lanes: the same A bytes */
    g.taps = 1;
    g.cl_lanes = NR;
    amx_configure(&g);
    float total = 0.0f;
    for (int64_t r = 0; r < rounds; r++) {
        amx_blocks(&g, 2, a, b, off, c, NR);
        total += int8 ? (float)((const int32_t *)c)[r % (MR * NR)] : c[r % (MR * NR)];
    }
    _tile_release();
    return total;
}
#endif

double A2R_KERNEL(a2r_lowp_peak)(int precision, int64_t iters, float *sink) {
    const int nthr = a2r_num_threads(), int8 = precision == A2R_PREC_INT8;
    const int64_t rounds = (iters + PEAK_KD - 1) / PEAK_KD;
    float total = 0.0f;
    #pragma omp parallel num_threads(nthr) reduction(+ : total)
    {
        uint32_t a[PEAK_KD * MR] __attribute__((aligned(64)));
        uint32_t b[4 * NR] __attribute__((aligned(64)));
        int32_t off[PEAK_KD];
        float c[C_ROWS * NR] __attribute__((aligned(64)));
        /* bf16: about 1e-3 x 1 per product; int8: small bytes (no int32 overflow) */
        for (int i = 0; i < PEAK_KD * MR; i++) a[i] = int8 ? 0x01010101u : 0x3a833a83u;
        for (int t = 0; t < 4 * NR; t++) b[t] = int8 ? 0x01010101u : 0x3f803f80u;
        for (int k = 0; k < PEAK_KD; k++) off[k] = (int32_t)(k % 4 * NR);
#ifdef LOWP_AMX
        uint32_t bt[16 * NR] __attribute__((aligned(64)));
        for (int t = 0; t < 16 * NR; t++) bt[t] = b[t % (4 * NR)];
        for (int k = 0; k < PEAK_KD; k++) off[k] = 0;
        total += amx_peak_rounds(int8, rounds, a, bt, off, c);
#else
        total += peak_rounds(int8, rounds, a, b, off, c);
#endif
    }
    *sink = total;
    /* multiply-adds per lane per row and step: 2 (bf16 pair) or 4 (int8 quad); 2 ops each */
    return 2.0 * nthr * (double)(rounds * PEAK_KD) * MR * NR * (int8 ? 4 : 2);
}
