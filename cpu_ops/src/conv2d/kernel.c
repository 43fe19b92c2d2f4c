/* conv2d kernel body (contract: a2r_kernels.h). Compiled once per ISA level; the register tile
 * MR x NR and the vector ops come from simd.h.
 *
 * Per group g the convolution is the GEMM  Y_g (og x P) = W_g (og x K) * B (K x P),
 * K = cg*kh*kw, P = oh*ow, B = im2col(x). Implicit GEMM, no im2col: a tile's input rows are
 * copied once, zero-padded, into a strip (cg, srows, wq = w + 2*pad_w at stride 1); output
 * column q = oy*wq + ox then reads tap (ci, i, j) at strip[off_k + q], off_k = (ci*srows +
 * i*dil_h)*wq + j*dil_w, so the micro-kernel reads B rows straight from the strip through a
 * table of K offsets; columns ox >= ow are computed and dropped (2 of 258 at 256^2, 3x3).
 * Measured 1.5x faster than im2col at 32 channels (the copy was a third of the time). At stride
 * 1 without padding the strip would be x's own rows, so tiles read x in place when a panel
 * reads few rows of x (IN_PLACE_MAX_ROWS; the last tile of an image, whose last panel would
 * read past x's planes, still copies): 12 -> 3 channels 3x3 at 514^2, 1 thread, 2.4-2.7 ->
 * 1.7-1.9 ms on a shared Zen 4. Stride
 * s > 1 becomes stride 1 over polyphase planes: padded row yy = r*sh + py goes to row r of
 * phase py (columns likewise), so tap i (i*dil_h = a*sh + py) of output row oy reads row oy + a
 * of phase py: a constant offset again. The strip is (cg, sh, sw, srows, wq = ow + the widest
 * tap's phase column) and each input pixel is copied once, not kh*kw times as by im2col
 * (3x3 stride 2, 1 thread, CPU time on a shared Zen 4: 16 -> 24 channels at 512^2 9.5 -> 7.1-8.2
 * ms, 24 -> 32 at 256^2 4.2-5.3 -> 3.3-3.6 ms, 32 -> 64 at 128^2 unchanged). Used when every
 * phase is read by some tap (a 1x1 stride-2 conv would copy four planes to read one).
 * Otherwise it is
 * computed in tiles of NT output pixels:
 *   1. B's NT columns are im2col'ed straight into the micro-kernel layout: NT/NR panels, each
 *      K rows of NR consecutive pixels (pixels past P are zeros). A 1x1 stride-1 pad-0 conv
 *      reads x in place (B = x, row stride P); only a partial last panel is copied.
 *   2. Panel by panel, each block of mr <= MR rows of the packed weights (K steps of mr
 *      floats, made once by a2r_conv2d_pack) is multiplied by the panel.
 *   3. The epilogue adds bias and residual and applies the activation, writing y once: in
 *      registers, straight into y, for a panel of NR pixels of one output row (activation
 *      none, relu or leaky relu; 6 -> 12 channels 3x3 at 550^2, 1 thread, 5.3 -> 4.4-4.6 ms);
 *      else from an mr x NR C tile in L1, right after the block.
 * Work items = (image, group, pixel tile, block of output rows); rows are split only when there
 * are too few pixel tiles to feed every thread. Depthwise convs (cg = og = 1) skip the GEMM:
 * each output row is accumulated tap by tap in place, unit stride along x.
 *
 * Scratch: one slot per thread in the caller's workspace (B tile K*NT or the strip, C tile MR*NR
 * floats, the K tap offsets); nothing is allocated here. */
#include <string.h>

#include "a2r_math.h"
#include "conv_common.h"
#include "simd.h"

/* Path choice (a2r_conv2d_set_algo in runtime.c): A2R_CONV2D_AUTO, _DIRECT or _WINOGRAD. */
extern int a2r_conv2d_algo;

/* B tile budget: with the packed weights (<= 590 KB at C = O = 128, 3x3) it stays inside a 1-2 MB
 * L2; the tile never holds more than 8 panels (the panels are the outer loop, each through every
 * row block, so wider tiles only make fewer, larger work items). */
#define B_TILE_BYTES (192 * 1024)
#define MAX_PANELS 8
/* Floats of slack per slot to start each slot on a 64-byte line. */
#define ALIGN_FLOATS 16
/* Implicit path: the zero-padded input strip of one tile stays within half of a 1 MB
 * L2 (measured on Zen 4: 256 KB with thinner tiles was up to 1.3x slower at 64-128 channels);
 * 64 panels at most keep the tile count high enough to feed the threads on small maps. */
#define STRIP_BYTES (512 * 1024)
#define MAX_STRIP_PANELS 64
/* ... but a tile covers at least this many output rows (measured best of 1, 2, 4): the strip
 * also holds (kh-1)*dil_h halo rows, copied once per tile, so thinner tiles multiply the copy. */
#define MIN_STRIP_OUT_ROWS 4
/* ... and the implicit path is taken only while one thread's strip stays below 2^26 floats
 * (256 MiB): beyond it (kernels dilated or padded by tens of thousands of pixels, whose halo
 * rows the strip would hold) the im2col path needs K*nt floats whatever the dilation. The bound
 * also keeps the int32 tap offsets into the strip far from overflow. */
#define MAX_STRIP_FLOATS ((int64_t)1 << 26)
/* Reading x in place (stride 1, no padding) pays while a panel's taps read at most this many
 * rows of x (channels x kernel rows): 1 thread, Zen 4, 12 channels 3x3 at 514^2-1026^2 in
 * place 0.92-1.0x the strip's time, but 24 channels 3x3 at 518^2 1.55x (each tap row of a
 * wide map on its own pages: more than the L1 TLB holds). */
#define IN_PLACE_MAX_ROWS 36

typedef struct {
    int64_t oh, ow, p, cg, og, k, mr, og_pad, nt, slot;
    int direct, depthwise, implicit, in_place;
    /* implicit path: strip row width, phase planes per channel, strip rows per phase plane,
     * pixel columns q */
    int64_t wq, phases, srows, q;
} geometry;

static geometry geometry_of(const a2r_conv2d_shape *s) {
    geometry g;
    g.oh = (s->h + 2 * s->pad_h - s->dil_h * (s->kh - 1) - 1) / s->stride_h + 1;
    g.ow = (s->w + 2 * s->pad_w - s->dil_w * (s->kw - 1) - 1) / s->stride_w + 1;
    g.p = g.oh * g.ow;
    g.cg = s->c / s->groups;
    g.og = s->o / s->groups;
    g.k = g.cg * s->kh * s->kw;
    /* Rows per weight block: the fewest blocks of at most MR rows, split evenly, so that few
     * output channels are not padded with zero rows (12 channels on AVX-512: two blocks of 6,
     * not 8 + 4 real rows of 16; a 3-channel RGB output layer: one block of 3). */
    const int64_t blocks = (g.og + MR - 1) / MR;
    g.mr = (g.og + blocks - 1) / blocks;
    g.og_pad = round_up(g.og, g.mr);
    g.direct = s->kh == 1 && s->kw == 1 && s->stride_h == 1 && s->stride_w == 1 &&
               s->pad_h == 0 && s->pad_w == 0;
    g.depthwise = g.cg == 1 && g.og == 1;
    g.implicit = !g.direct && !g.depthwise &&
                 every_phase_read(s->kh, s->dil_h, s->stride_h) &&
                 every_phase_read(s->kw, s->dil_w, s->stride_w);
    g.phases = s->stride_h * s->stride_w;
    g.wq = g.ow + (s->kw - 1) * s->dil_w / s->stride_w; /* = w + 2*pad_w at stride 1 */
    const int64_t min_panels = A2R_MIN(MAX_STRIP_PANELS, (MIN_STRIP_OUT_ROWS * g.wq + NR - 1) / NR);
    if (g.implicit && (double)g.cg * (double)g.phases * (double)g.wq *
                              (double)strip_rows(s, g.wq, min_panels * NR) > MAX_STRIP_FLOATS)
        g.implicit = 0;
    if (g.implicit) {
        /* Output computed at every strip column: q = oy*wq + ox, ox < ow kept. Tile: as many
         * panels as keep the zero-padded strip within STRIP_BYTES. */
        g.q = g.oh * g.wq;
        int64_t panels = MAX_STRIP_PANELS;
        while (panels > min_panels && (int64_t)sizeof(float) * g.cg * g.phases * g.wq *
                                              strip_rows(s, g.wq, panels * NR) > STRIP_BYTES)
            panels--;
        panels = A2R_MIN(panels, (g.q + NR - 1) / NR);
        g.nt = panels * NR;
        g.srows = strip_rows(s, g.wq, g.nt);
        /* Stride 1 without padding: the strip would be x's own rows (wq = w), so a tile reads
         * x in place through a second offset table (int32: x's planes below 2^31 floats), when
         * a panel reads few rows of x (each row its own pages on wide maps). */
        g.in_place = g.phases == 1 && s->pad_h == 0 && s->pad_w == 0 &&
                     g.cg * s->kh <= IN_PLACE_MAX_ROWS && g.cg * s->h * s->w < ((int64_t)1 << 31);
        g.slot = g.cg * g.phases * g.srows * g.wq + NR + MR * NR + 2 * g.k + 2 * ALIGN_FLOATS;
        return g;
    }
    g.q = g.p;
    g.srows = 0;
    g.in_place = 0;
    int64_t panels = B_TILE_BYTES / ((int64_t)sizeof(float) * g.k * NR);
    panels = A2R_MAX(1, A2R_MIN(panels, MAX_PANELS));
    panels = A2R_MIN(panels, (g.p + NR - 1) / NR);
    g.nt = panels * NR;
    g.slot = g.depthwise ? 0 : g.k * g.nt + MR * NR + 2 * ALIGN_FLOATS;
    return g;
}


/* Where a micro-kernel call that writes y itself stores: rows i < rows of the block at y + i*ld
 * (NR consecutive output pixels of one output row), y = act(sum + bias[i] + res[i*ld + j]) as
 * the epilogue computes it, bit for bit (bias and res may be NULL; act none, relu or leaky). */
typedef struct {
    const float *bias, *res;
    float *y;
    int64_t ld, rows;
    int act;
    float alpha;
} tile_out;

/* Epilogue of one register row (nv vectors) into y: FUSED_ROW(ACT) with ACT an expression of t. */
#define FUSED_ROW(ACT)                                                                         \
    do {                                                                                       \
        for (int v = 0; v < nv; v++) {                                                         \
            v_t t = v_add(acc[i][v], bv);                                                      \
            if (o->res) t = v_add(t, v_load(o->res + i * o->ld + v * VL));                    \
            t = ACT;                                                                           \
            v_store(o->y + i * o->ld + v * VL, t);                                             \
        }                                                                                      \
    } while (0)

/* C[i*ldc + j] = sum_k A[k*mr + i] * B[row_k + j], i < mr, j < nv*VL (nv <= NV vectors: NR
 * columns unless a short last panel asks fewer), the whole tile in registers;
 * row_k = off[k] (implicit GEMM: per-tap offsets into the padded input) or k*ldb when off is
 * NULL. With o, the sums go through the epilogue into y instead (no C tile round trip).
 * Called with constant mr and nv (block_kernel, wino_gemm). GCC clones it rather than inlining
 * every call, and its clone for mr = 8 takes nv as an argument (a branch per vector in the k
 * loop, one accumulator on the stack: perf annotate); forcing it inline measured no faster
 * (direct 64 -> 64 and 16 -> 24 stride 2, Winograd 64 -> 64, AVX-512, alternating processes)
 * and made the library 10% larger. GCC unswitches the off test out of the k loop. */
static inline void micro_kernel(const int mr, const int nv, int64_t kk, const float *restrict a,
                                const float *restrict b, const int32_t *restrict off,
                                int64_t ldb, float *restrict c, int64_t ldc,
                                const tile_out *o) {
    v_t acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) acc[i][v] = v_zero();
    for (int64_t k = 0; k < kk; k++, a += mr) {
        const float *bk = off ? b + off[k] : b + k * ldb;
        v_t bv[NV];
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) bv[v] = v_load(bk + v * VL);
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++) {
            v_t av = v_set1(a[i]);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) acc[i][v] = v_fma(av, bv[v], acc[i][v]);
        }
    }
    if (!o) {
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++)
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) v_store(c + i * ldc + v * VL, acc[i][v]);
        return;
    }
    const v_t slope = v_set1(o->alpha);
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++) {
        if (i >= o->rows) break;
        const v_t bv = v_set1(o->bias ? o->bias[i] : 0.0f);
        switch (o->act) {
        case A2R_ACT_RELU: FUSED_ROW(v_relu(t)); break;
        case A2R_ACT_LEAKY_RELU: FUSED_ROW(v_leaky(t, slope)); break;
        default: FUSED_ROW(t); break;
        }
    }
}
#undef FUSED_ROW

/* micro_kernel for a block of g->mr rows (1..MR, each a constant with its own code). */
static inline void block_kernel(const geometry *g, const float *restrict a,
                                const float *restrict b, const int32_t *restrict off,
                                int64_t ldb, float *restrict c, int64_t ldc, const tile_out *o) {
    switch (g->mr) {
#define A2R_MR_CASE(m)                                                                     \
    case m: micro_kernel(m, NV, g->k, a, b, off, ldb, c, ldc, o); break;
#if MR >= 8
        A2R_MR_CASE(8)
        A2R_MR_CASE(7)
        A2R_MR_CASE(6)
        A2R_MR_CASE(5)
#endif
        A2R_MR_CASE(4)
        A2R_MR_CASE(3)
        A2R_MR_CASE(2)
        default: micro_kernel(1, NV, g->k, a, b, off, ldb, c, ldc, o); break;
#undef A2R_MR_CASE
    }
}

/* Valid output-x range [x0, x1) of each kernel column j (input x inside the image), computed
 * once per call: divisions per packed row would cost more than the copy itself. */
#define KW_MAX 32 /* wider kernels fall back to computing the range per row */
static inline void valid_x(const a2r_conv2d_shape *s, int64_t j, int64_t *x0, int64_t *x1) {
    const int64_t offx = j * s->dil_w - s->pad_w;
    *x0 = first_valid(offx, s->stride_w);
    *x1 = first_valid(offx - s->w, s->stride_w);
}

/* im2col of pixels [p0, p0 + np) of one image-group xg (cg, h, w) into npan panels of K x NR. */
static void pack_b(const a2r_conv2d_shape *s, const geometry *g, const float *restrict xg,
                   int64_t p0, int64_t np, int64_t npan, float *restrict bt) {
    const int64_t sh = s->stride_h, sw = s->stride_w, h = s->h, w = s->w, ow = g->ow;
    int64_t xr[2 * KW_MAX];
    for (int64_t j = 0; j < A2R_MIN(s->kw, KW_MAX); j++) valid_x(s, j, &xr[2 * j], &xr[2 * j + 1]);
    for (int64_t pan = 0; pan < npan; pan++) {
        const int64_t pa = p0 + pan * NR, len_pan = A2R_MAX(0, A2R_MIN(NR, p0 + np - pa));
        const int64_t oy0 = pa / ow, ox0 = pa % ow;
        float *restrict d = bt + pan * g->k * NR;
        for (int64_t ci = 0; ci < g->cg; ci++) {
            const float *plane = xg + ci * h * w;
            for (int64_t i = 0; i < s->kh; i++) {
                const int64_t offy = i * s->dil_h - s->pad_h;
                for (int64_t j = 0; j < s->kw; j++, d += NR) {
                    const int64_t offx = j * s->dil_w - s->pad_w;
                    int64_t x0, x1;
                    if (j < KW_MAX) {
                        x0 = xr[2 * j];
                        x1 = xr[2 * j + 1];
                    } else {
                        valid_x(s, j, &x0, &x1);
                    }
                    int64_t q = 0, oy = oy0, ox = ox0;
                    while (q < len_pan) {
                        const int64_t len = A2R_MIN(ow - ox, len_pan - q);
                        const int64_t iy = oy * sh + offy;
                        if (iy < 0 || iy >= h) {
                            v_zero_n(d + q, len);
                        } else {
                            const int64_t a = A2R_MAX(0, A2R_MIN(x0 - ox, len));
                            const int64_t e = A2R_MAX(a, A2R_MIN(x1 - ox, len));
                            const float *src = plane + iy * w + (ox + a) * sw + offx;
                            v_zero_n(d + q, a);
                            if (sw == 1)
                                v_copy_n(d + q + a, src, e - a);
                            else
                                every_nth32(d + q + a, src, e - a, sw);
                            v_zero_n(d + q + e, len - e);
                        }
                        q += len;
                        oy++;
                        ox = 0;
                    }
                    v_zero_n(d + len_pan, NR - len_pan);
                }
            }
        }
    }
}

/* y[j] = act(c[j] + b + r[j]) for j < n in one pass; r may be NULL; y may equal c. */
#define EPILOGUE_PASS(ACT)                                                                   \
    do {                                                                                     \
        if (r)                                                                               \
            for (int64_t j = 0; j < n; j++) y[j] = activate(c[j] + b + r[j], ACT, alpha);   \
        else                                                                                 \
            for (int64_t j = 0; j < n; j++) y[j] = activate(c[j] + b, ACT, alpha);          \
    } while (0)
/* The silu pass in whole vectors (a2r_vsilu: the vectoriser leaves a2r_silu1 scalar at AVX2),
 * the tail as EPILOGUE_PASS would do it, with the same result bit for bit. */
static inline void silu_epilogue(const float *c, float b, const float *restrict r, float *y,
                                 int64_t n) {
    const a2r_vf bv = a2r_vsplat(b);
    int64_t j = 0;
    if (r) {
        for (; j + A2R_VEC_FLOATS <= n; j += A2R_VEC_FLOATS)
            a2r_vstore(y + j, a2r_vsilu(a2r_vload(c + j) + bv + a2r_vload(r + j)));
        for (; j < n; j++) y[j] = a2r_silu1(c[j] + b + r[j]);
    } else {
        for (; j + A2R_VEC_FLOATS <= n; j += A2R_VEC_FLOATS)
            a2r_vstore(y + j, a2r_vsilu(a2r_vload(c + j) + bv));
        for (; j < n; j++) y[j] = a2r_silu1(c[j] + b);
    }
}

static inline void epilogue(const float *c, float b, const float *restrict r, int act,
                            float alpha, float *y, int64_t n) {
    switch (act) {
    case A2R_ACT_RELU: EPILOGUE_PASS(A2R_ACT_RELU); break;
    case A2R_ACT_LEAKY_RELU: EPILOGUE_PASS(A2R_ACT_LEAKY_RELU); break;
    case A2R_ACT_SILU: silu_epilogue(c, b, r, y, n); break;
    default: EPILOGUE_PASS(A2R_ACT_NONE); break;
    }
}
#undef EPILOGUE_PASS

/* d[t] for t in [t0, t1): the nine taps of a 3x3 kernel k9 over rows r0, r1, r2 (columns t,
 * t + dil, t + 2*dil), in one pass that writes d once. */
static inline void nine_taps(const float *restrict r0, const float *restrict r1,
                             const float *restrict r2, int64_t dil, const float *restrict k9,
                             float *restrict d, int64_t t0, int64_t t1) {
    const int64_t d1 = dil, d2 = 2 * dil;
    for (int64_t t = t0; t < t1; t++) {
        float v = k9[0] * r0[t];
        v = A2R_MADD(k9[1], r0[t + d1], v);
        v = A2R_MADD(k9[2], r0[t + d2], v);
        v = A2R_MADD(k9[3], r1[t], v);
        v = A2R_MADD(k9[4], r1[t + d1], v);
        v = A2R_MADD(k9[5], r1[t + d2], v);
        v = A2R_MADD(k9[6], r2[t], v);
        v = A2R_MADD(k9[7], r2[t + d1], v);
        d[t] = A2R_MADD(k9[8], r2[t + d2], v);
    }
}

/* One output column of a 3x3 stride-1 kernel over rows[0..2] whose first tap column is ix0:
 * the taps inside [0, w) only, summed row by row, tap by tap (the generic path's order). */
static inline float border_taps(const float *const rows[3], const float *k9, int64_t ix0,
                                int64_t dil, int64_t w) {
    float v = 0.0f;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            const int64_t ix = ix0 + j * dil;
            if (ix >= 0 && ix < w) v = A2R_MADD(k9[i * 3 + j], rows[i][ix], v);
        }
    return v;
}

/* Output row oy of one depthwise plane, tap by tap into yr (zeroed by the caller): any kernel,
 * stride and dilation; a 3-tap stride-1 row takes its inner columns [xa3, xb3) in one pass. */
static void depthwise_row(const a2r_conv2d_shape *s, const float *restrict xp,
                          const float *restrict wc, int64_t oy, int64_t ow, int64_t xa3,
                          int64_t xb3, float *restrict yr) {
    const int64_t h = s->h, w = s->w, sw = s->stride_w;
    for (int64_t i = 0; i < s->kh; i++) {
        const int64_t iy = oy * s->stride_h - s->pad_h + i * s->dil_h;
        if (iy < 0 || iy >= h) continue;
        const float *xrow = xp + iy * w;
        const float *wr = wc + i * s->kw;
        /* Common 3-tap stride-1 row: the pixels where all three taps are inside the image
         * take all three in one pass (one load and store of y instead of three). */
        int64_t xa = 0, xb = 0;
        if (s->kw == 3 && sw == 1) {
            xa = xa3;
            xb = xb3;
            const int64_t d1 = s->dil_w, d2 = 2 * s->dil_w;
            const float w0 = wr[0], w1 = wr[1], w2 = wr[2];
            const float *restrict src = xrow + xa - s->pad_w;
            float *restrict d = yr + xa;
            for (int64_t t = 0; t < xb - xa; t++)
                d[t] = A2R_MADD(w2, src[t + d2], A2R_MADD(w1, src[t + d1],
                                                          A2R_MADD(w0, src[t], d[t])));
        }
        for (int64_t j = 0; j < s->kw; j++) {
            const int64_t offx = j * s->dil_w - s->pad_w;
            const int64_t x0 = A2R_MIN(first_valid(offx, sw), ow);
            const int64_t x1 = A2R_MAX(x0, A2R_MIN(ow, first_valid(offx - w, sw)));
            /* the pieces of [x0, x1) left of and right of the fused range [xa, xb) */
            const int64_t ranges[2][2] = {{x0, A2R_MIN(x1, xa)}, {A2R_MAX(x0, xb), x1}};
            for (int rg = 0; rg < 2; rg++) {
                const int64_t r0 = ranges[rg][0], n = ranges[rg][1] - r0;
                if (n <= 0) continue;
                const float wv = wr[j];
                const float *restrict src = xrow + r0 * sw + offx;
                float *restrict d = yr + r0;
                if (sw == 1) {
                    for (int64_t t = 0; t < n; t++) d[t] = A2R_MADD(wv, src[t], d[t]);
                } else if (sw == 2) {
                    for (int64_t t = 0; t < n; t++) d[t] = A2R_MADD(wv, src[2 * t], d[t]);
                } else {
                    for (int64_t t = 0; t < n; t++) d[t] = A2R_MADD(wv, src[t * sw], d[t]);
                }
            }
        }
    }
}

static void depthwise(const a2r_conv2d_shape *s, const geometry *g, const float *restrict x,
                      const float *restrict wt, const float *bias, const float *residual,
                      int act, float alpha, float *restrict y) {
    const int64_t rows = s->n * s->c * g->oh, ow = g->ow, h = s->h, w = s->w, sw = s->stride_w;
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (rows * ow * s->kh * s->kw > A2R_PAR_GRAIN)
    for (int64_t row = 0; row < rows; row++) {
        const int64_t oy = row % g->oh, plane = row / g->oh, ch = plane % s->c;
        const float *xp = x + plane * h * w, *wc = wt + ch * s->kh * s->kw;
        float *restrict yr = y + row * ow;
        /* 3x3 stride 1 with all three input rows inside the image (every row but the borders):
         * the columns where all nine taps are inside take them in one pass that writes y once
         * (one store instead of a clear and three read-modify-write passes); the border columns below. */
        const int64_t iy0 = oy - s->pad_h;
        const int full3 = s->kh == 3 && s->kw == 3 && sw == 1 && s->stride_h == 1 && iy0 >= 0 &&
                          iy0 + 2 * s->dil_h < h;
        const int64_t xa3 = A2R_MIN(A2R_MAX(0, s->pad_w), ow);
        const int64_t xb3 = A2R_MAX(xa3, A2R_MIN(ow, w + s->pad_w - 2 * s->dil_w));
        if (full3) {
            const int64_t dr = s->dil_h * w, n = xb3 - xa3, nv = n / A2R_VEC_FLOATS * A2R_VEC_FLOATS;
            const float *rows3[3] = {xp + iy0 * w, xp + iy0 * w + dr, xp + iy0 * w + 2 * dr};
            const float *r0 = rows3[0] + xa3 - s->pad_w; /* tap (0, 0) of column xa3 */
            nine_taps(r0, r0 + dr, r0 + 2 * dr, s->dil_w, wc, yr + xa3, 0, nv);
            /* the last n - nv columns as one whole vector ending at n, overlapping columns
             * already written with the same values: a scalar tail of up to 15 columns cost
             * more than the 126 vector ones of a 128-wide row */
            nine_taps(r0, r0 + dr, r0 + 2 * dr, s->dil_w, wc, yr + xa3,
                      n >= A2R_VEC_FLOATS ? n - A2R_VEC_FLOATS : nv, n);
            /* the border columns (a tap outside the image) one by one, in the same tap order:
             * the generic row loop below costs more per row than a narrow row's interior */
            for (int64_t ox = 0; ox < xa3; ox++)
                yr[ox] = border_taps(rows3, wc, ox - s->pad_w, s->dil_w, w);
            for (int64_t ox = xb3; ox < ow; ox++)
                yr[ox] = border_taps(rows3, wc, ox - s->pad_w, s->dil_w, w);
        } else {
            memset(yr, 0, (size_t)ow * sizeof *yr);
            depthwise_row(s, xp, wc, oy, ow, xa3, xb3, yr);
        }
        epilogue(yr, bias ? bias[ch] : 0.0f, residual ? residual + row * ow : NULL, act, alpha,
                 yr, ow);
    }
}

/* Implicit path: phase rows [r0, r0 + srows) of every channel of xg (cg, h, w) into the strip
 * (cg, sh, sw, srows, wq): element (ci, py, px, r, u) = padded x[ci][(r0 + r)*sh + py][u*sw +
 * px], zero where that lies outside the image, plus NR zero floats of slack for the last
 * panel's reads past the strip. */
static void fill_strip(const a2r_conv2d_shape *s, const geometry *g, const float *restrict xg,
                       int64_t r0, float *restrict st) {
    const int64_t h = s->h, w = s->w, wq = g->wq, sh = s->stride_h, sw = s->stride_w;
    const int64_t plane = g->srows * wq;
    /* x's rows in order (phase rows py inside r: the prefetcher sees one stream per channel),
     * and the phase columns px of a row one after the other, so that the later ones read the
     * row from L1. */
    for (int64_t ci = 0; ci < g->cg; ci++)
        for (int64_t r = 0; r < g->srows; r++)
            for (int64_t py = 0; py < sh; py++) {
                const int64_t iy = (r0 + r) * sh + py - s->pad_h;
                prefetch_row(s, xg, g->srows, r0, (ci * g->srows + r) * sh + py + PREFETCH_ROWS,
                             1, sizeof(float));
                float *restrict d0 = st + (ci * sh + py) * sw * plane + r * wq;
                deal_phases(d0, plane, iy >= 0 && iy < h ? xg + (ci * h + iy) * w : NULL, w,
                            s->pad_w, wq, sw, 0);
            }
    v_zero_n(st + g->cg * sh * sw * plane, NR);
}

/* y offset (oy*ow + ox) of the NR columns from q0 when they are NR kept output pixels of one
 * row, all before the tile's end q_end; else -1 (the panel goes through the C tile). */
static inline int64_t panel_in_row(const geometry *g, int64_t q0, int64_t q_end) {
    if (q0 + NR > q_end) return -1;
    if (!g->implicit) return q0;
    const int64_t oy = q0 / g->wq, ox = q0 - oy * g->wq;
    return ox + NR <= g->ow ? oy * g->ow + ox : -1;
}

/* Output-row blocks per work item: all ``blocks`` in one item, unless ``units`` (image x tile)
 * items are too few for ``nthr`` threads; then the rows are split too, about 4 items per
 * thread so that uneven items still balance. */
static inline int64_t rows_per_item(int64_t blocks, int64_t units, int nthr) {
    if (units >= 4 * nthr) return blocks;
    const int64_t chunks = A2R_MIN(blocks, (4 * nthr + units - 1) / units);
    return (blocks + chunks - 1) / chunks;
}

/* Thread ``tid``'s slot of ``slot_floats`` in the workspace, aligned up to ALIGN_FLOATS (the
 * workspace query leaves room for it). */
static inline float *thread_slot(float *workspace, int tid, int64_t slot_floats) {
    float *slot = workspace + tid * slot_floats;
    return slot + (ALIGN_FLOATS - ((uintptr_t)slot / sizeof(float)) % ALIGN_FLOATS) % ALIGN_FLOATS;
}

#include "winograd.h"

/* Winograd where it can run and was measured to pay: enough channels that the 36 GEMMs outweigh
 * the transforms, and maps of enough tiles a side (a tile row shorter than a vector wastes the
 * rest of it in every transform). F(4,3) forced against forced direct, 1 / 2 threads (`python -m
 * pytest -s -c benchmarks/pytest.ini benchmarks/bench_precision.py -k "winograd_rule and fp32"`):
 * - Zen 2, AVX2: 3 -> 16 at 256^2 1.07x / 1.13x, 8 -> 8 1.12x / 1.05x, 32 -> 8 1.18x / 1.13x,
 *   16 -> 16 1.65x / 1.69x, 24 -> 32 1.94x / 2.01x (128^2); but 1 -> 16 0.78x / 0.81x, 4 -> 4
 *   0.83x / 0.76x, 32 -> 3 1.04x / 1.01x (an MR block mostly padding, or one input channel);
 *   32 -> 32 at 8^2 0.68x / 0.61x, 12^2 0.96x / 0.72x, 16^2 1.25x / 0.95x, 64 -> 64 at 16^2
 *   1.18x / 1.10x.
 * - Sapphire Rapids, AVX-512 (16-lane vectors: a tile row of a 16^2 map fills a quarter of
 *   one): 8 -> 16 at 256^2 1.24x / 1.15x, 32 -> 8 1.19x / 1.15x, 16 -> 16 1.43x / 1.18x
 *   (128^2); but 8 -> 8 0.89x / 0.85x, 3 -> 16 0.86x / 0.87x, 32 -> 3 0.75x / 0.74x. Maps:
 *   32 -> 32 at 32^2 0.66x / 0.70x, 48^2 1.43x / 0.80x, 64^2 1.49x / 1.54x; 16 -> 16 at 64^2
 *   0.99x / 1.03x; 64 -> 64 at 32^2 1.36x / 0.93x, 48^2 1.64x / 1.29x; 128 -> 128 at 16^2
 *   0.88x / 0.58x, 32^2 1.79x / 1.36x.
 * - Zen 4, AVX-512 (one run, the rule unchanged): it agrees but at its edges: 8 -> 16 at 256^2
 *   0.85x / 1.26x (taken), 32 -> 32 at 48^2 1.42x / 0.99x and 8 -> 8 at 128^2 1.09x / 1.03x
 *   (left direct); 32 -> 32 at 32^2 0.75x / 0.79x, 64^2 1.52x / 1.64x; 16 -> 16 at 64^2 1.10x /
 *   1.40x; 64 -> 64 at 32^2 1.67x / 1.06x; 128 -> 128 at 16^2 0.95x / 0.66x, 32^2 2.07x /
 *   1.36x.
 * - Zen 3, AVX2 (2026-12-07, one run, the same bench; 1 / 2 threads): Winograd loses where Zen 2's
 *   rule took it: 3 -> 16 at 256^2 0.73x / 0.74x, 8 -> 8 0.76x / 0.74x, 32 -> 32 at 16^2 0.89x /
 *   0.74x, 24^2 0.92x / 0.67x, 32^2 1.06x / 0.80x, 48^2 0.82x / 0.84x; it pays at 16 -> 16 (128^2)
 *   1.12x / 1.13x, 24 -> 32 1.34x / 1.50x, 64 -> 64 at 32^2 1.59x / 1.22x, 128 -> 128 at 32^2
 *   2.29x / 1.73x. So AVX2 takes the AVX-512 rule. On Zen 2 (the figures above) that costs 5-13% on
 *   3- and 8-channel convs and up to 20% on 32 -> 32 and 64 -> 64 at 16^2, now direct, where Zen
 *   3 gains 30-37%. The #else rule below, derived from Zen 2's AVX2, now serves only the SSE2
 *   and NEON levels, where it was not measured. */
#if defined(__AVX512F__) || defined(__AVX2__)
#define WINO_MIN_C 8
#define WINO_MIN_O 8
#define WINO_MIN_CO 128
#define WINO_MIN_SIDE 64
#define WINO_WIDE_CO 4096   /* from this many channel pairs ... */
#define WINO_WIDE_SIDE 32   /* ... maps this small pay too */
#else
#define WINO_MIN_C 3
#define WINO_MIN_O 8
#define WINO_MIN_CO 24
#define WINO_MIN_SIDE 16
#define WINO_WIDE_CO WINO_MIN_CO /* one map rule at these levels */
#define WINO_WIDE_SIDE WINO_MIN_SIDE
#endif
static int use_winograd(const a2r_conv2d_shape *s, const geometry *g) {
    if (!wino_able(s) || a2r_conv2d_algo == A2R_CONV2D_DIRECT) return 0;
    const int64_t co = s->c * s->o, side = A2R_MIN(g->oh, g->ow);
    return a2r_conv2d_algo == A2R_CONV2D_WINOGRAD ||
           (s->c >= WINO_MIN_C && s->o >= WINO_MIN_O && co >= WINO_MIN_CO &&
            side >= (co >= WINO_WIDE_CO ? WINO_WIDE_SIDE : WINO_MIN_SIDE));
}

/* Direct packing first; shapes Winograd can run also get U after it (either path can then be
 * chosen at run time from the same packing). */
int64_t A2R_KERNEL(a2r_conv2d_packed_size)(const a2r_conv2d_shape *s) {
    geometry g = geometry_of(s);
    if (g.depthwise) return s->o * s->kh * s->kw;
    return s->groups * g.og_pad * g.k + (wino_able(s) ? WINO_POS * wino_o_pad(s) * s->c : 0);
}

/* Depthwise: w as is. GEMM: per group, per block of mr output rows, K steps of mr floats
 * (rows past og are zeros, so the micro-kernel never branches on them). */
void A2R_KERNEL(a2r_conv2d_pack)(const a2r_conv2d_shape *s, const float *restrict w,
                                 float *restrict packed) {
    geometry g = geometry_of(s);
    if (g.depthwise) {
        memcpy(packed, w, (size_t)(s->o * s->kh * s->kw) * sizeof *w);
        return;
    }
    float *p = packed;
    for (int64_t gi = 0; gi < s->groups; gi++)
        for (int64_t ob = 0; ob < g.og_pad; ob += g.mr)
            for (int64_t kk = 0; kk < g.k; kk++)
                for (int64_t i = 0; i < g.mr; i++, p++) {
                    int64_t o = ob + i;
                    *p = o < g.og ? w[(gi * g.og + o) * g.k + kk] : 0.0f;
                }
    if (wino_able(s)) wino_pack(s, w, p);
}

/* Enough for either path, so the path can be switched without a new workspace. */
int64_t A2R_KERNEL(a2r_conv2d_workspace_size)(const a2r_conv2d_shape *s) {
    geometry g = geometry_of(s);
    if (g.depthwise) return 1;
    int64_t slot = g.slot;
    if (wino_able(s)) slot = A2R_MAX(slot, wino_geometry_of(s, &g).slot);
    return slot * a2r_num_threads();
}

void A2R_KERNEL(a2r_conv2d)(const a2r_conv2d_shape *s, const float *restrict x,
                            const float *restrict packed, const float *bias,
                            const float *residual, int act, float alpha, float *workspace,
                            int64_t workspace_floats, float *restrict y) {
    const geometry g = geometry_of(s);
    if (g.depthwise) {
        depthwise(s, &g, x, packed, bias, residual, act, alpha, y);
        return;
    }
    if (use_winograd(s, &g)) {
        wino_conv(s, &g, x, packed + g.og_pad * g.k, bias, residual, act, alpha, workspace,
                  workspace_floats, y);
        return;
    }
    const int64_t blocks = g.og_pad / g.mr, tiles = (g.q + g.nt - 1) / g.nt;
    const int64_t images = s->n * s->groups;
    int nthr = (int)A2R_MAX(1, A2R_MIN(a2r_num_threads(), workspace_floats / g.slot));
    const int64_t per_chunk = rows_per_item(blocks, images * tiles, nthr);
    const int64_t chunks = (blocks + per_chunk - 1) / per_chunk;
    const int64_t items = images * tiles * chunks;
    if (items * g.nt * g.og_pad * g.k < A2R_PAR_GRAIN * 16) nthr = 1; /* tiny: wake-up dominates */
    #pragma omp parallel num_threads(nthr)
    {
        float *slot = thread_slot(workspace, A2R_THREAD_ID(), g.slot);
        /* slot: B tile (im2col panels or implicit strip), then the MR x NR C tile (aligned),
         * then the implicit path's tap offsets */
        const int64_t bfloats = g.implicit ? g.cg * g.phases * g.srows * g.wq + NR : g.k * g.nt;
        float *bt = slot, *ct = slot + (bfloats + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
        int32_t *strip_off = (int32_t *)(ct + MR * NR), *x_off = strip_off + g.k;
        if (g.implicit) /* tap (ci, i, j) of column q reads strip[off + q] */
            strip_tap_offsets(s, g.cg, g.srows, g.wq, strip_off);
        if (g.in_place) /* ... or x[off + q]: x as a strip of all its h rows */
            strip_tap_offsets(s, g.cg, s->h, g.wq, x_off);
        /* in place, the last panel of a tile reads up to this far past its first column */
        const int64_t x_reach = g.in_place ? x_off[g.k - 1] + NR : 0;
        #pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            const int64_t chunk = it % chunks, tile = (it / chunks) % tiles;
            const int64_t img = it / (chunks * tiles), ni = img / s->groups, gi = img % s->groups;
            const int64_t p0 = tile * g.nt, np = A2R_MIN(g.nt, g.q - p0);
            const int64_t npan = (np + NR - 1) / NR;
            const int64_t b0 = chunk * per_chunk, b1 = A2R_MIN(blocks, b0 + per_chunk);
            const float *xg = x + (ni * s->c + gi * g.cg) * s->h * s->w;
            const float *wg = packed + gi * g.og_pad * g.k;
            const int64_t full = g.direct ? np / NR : 0; /* panels read in place */
            const float *strip0 = NULL; /* implicit: strip address of column p0 */
            const int32_t *off = strip_off;
            if (g.in_place && p0 + (npan - 1) * NR + x_reach <= g.cg * s->h * s->w) {
                strip0 = xg + p0; /* no read past this image-group's planes */
                off = x_off;
            } else if (g.implicit) {
                const int64_t r0 = p0 / g.wq;
                fill_strip(s, &g, xg, r0, bt);
                strip0 = bt + (p0 - r0 * g.wq);
            } else if (!g.direct) {
                pack_b(s, &g, xg, p0, np, npan, bt);
            } else if (full < npan) { /* partial last panel of a 1x1 conv: copy, zero-pad */
                const int64_t rest = np - full * NR;
                for (int64_t kk = 0; kk < g.k; kk++) {
                    memcpy(bt + kk * NR, xg + kk * g.p + p0 + full * NR, (size_t)rest * 4);
                    memset(bt + kk * NR + rest, 0, (size_t)(NR - rest) * 4);
                }
            }
            const int fusable = act == A2R_ACT_NONE || act == A2R_ACT_RELU ||
                                act == A2R_ACT_LEAKY_RELU;
            /* Panel by panel, every row block of it in turn: the panel's B lines (K rows of NR
             * floats, spread over the strip) are read from L1 by all blocks, not streamed from
             * L2 once per block. */
            for (int64_t pan = 0; pan < npan; pan++) {
                const int64_t q0 = p0 + pan * NR, q1 = A2R_MIN(q0 + NR, p0 + np);
                /* a panel of one output row's pixels goes through the epilogue in registers,
                 * straight into y; the others through the C tile (mr x NR) */
                const int64_t yo = fusable ? panel_in_row(&g, q0, p0 + np) : -1;
                const float *bp = g.implicit    ? strip0 + pan * NR
                                  : pan < full ? xg + q0
                                               : bt + (g.direct ? 0 : pan * g.k * NR);
                const int32_t *offp = g.implicit ? off : NULL;
                const int64_t ldb = g.implicit ? 0 : pan < full ? g.p : NR;
                for (int64_t ob = b0; ob < b1; ob++) {
                    const float *wb = wg + ob * g.mr * g.k;
                    const int64_t o0 = ob * g.mr, o1 = A2R_MIN(o0 + g.mr, g.og);
                    const int64_t plane0 = (ni * s->o + gi * g.og + o0) * g.p;
                    if (yo >= 0) {
                        const tile_out to = {bias ? bias + gi * g.og + o0 : NULL,
                                             residual ? residual + plane0 + yo : NULL,
                                             y + plane0 + yo, g.p, o1 - o0, act, alpha};
                        block_kernel(&g, wb, bp, offp, ldb, ct, NR, &to);
                        continue;
                    }
                    block_kernel(&g, wb, bp, offp, ldb, ct, NR, NULL);
                    for (int64_t o = o0; o < o1; o++) {
                        const int64_t oc = gi * g.og + o, plane = (ni * s->o + oc) * g.p;
                        const float bo = bias ? bias[oc] : 0.0f;
                        const float *cr = ct + (o - o0) * NR; /* column q at cr[q - q0] */
                        if (!g.implicit) {
                            epilogue(cr, bo, residual ? residual + plane + q0 : NULL, act,
                                     alpha, y + plane + q0, q1 - q0);
                            continue;
                        }
                        /* columns q = oy*wq + ox; keep ox < ow, row by row */
                        for (int64_t q = q0; q < q1;) {
                            const int64_t oy = q / g.wq, ox = q % g.wq;
                            const int64_t len = A2R_MIN(g.wq - ox, q1 - q);
                            const int64_t keep = A2R_MAX(0, A2R_MIN(len, g.ow - ox));
                            const int64_t yoff = plane + oy * g.ow + ox;
                            if (keep > 0)
                                epilogue(cr + (q - q0), bo, residual ? residual + yoff : NULL,
                                         act, alpha, y + yoff, keep);
                            q += len;
                        }
                    }
                }
            }
        }
    }
}
