/* Winograd F(4x4, 3x3) for 3x3 stride-1 dilation-1 groups-1 convs (included by kernel.c, which
 * supplies geometry, micro_kernel, epilogue, MR/NR, v_zero_n; the transforms are
 * winograd_f43.h).
 *
 * Output tiles of 4x4 pixels, read from 6x6 input patches at stride 4 (Lavin & Gray 2016):
 *   Y = A^T [ (G g G^T) .* (B^T d B) ] A, 36 products per tile instead of 144 (4x fewer).
 * Per block of nt tiles (flattened (ty, tx) order, one image):
 *   1. input transform: V[p][c][t] = (B^T d_ct B)[p] for the 36 positions p (layout: p, C rows of
 *      vb >= nt columns, i.e. 36 micro-kernel B matrices with ldb = vb; columns past the block
 *      are 0);
 *   2. for each MR block of output channels, 36 GEMMs  M[p] (MR x nt) = U[p] (MR x C) * V[p],
 *      U = G g G^T packed once (after the direct packing) in the micro-kernel's A layout;
 *   3. output transform of those MR rows (A^T M A) into four output row segments per tile row,
 *      then the usual epilogue (bias, residual, activation) into y.
 * F(2,3) (2.25x fewer products, exact transforms) ran here before: F(4,3) takes 0.61-0.66 of
 * its time at 16-64 channels (docs/architecture.md, "fp32 Winograd F(4,3)"). The bf16 path
 * keeps F(2,3) (conv2d_lowp/winograd_bf16.h): F(4,3)'s larger rounding there costs 16-21 dB
 * per layer. */
#ifndef A2R_CONV2D_WINOGRAD_H
#define A2R_CONV2D_WINOGRAD_H

#include "winograd_f43.h"

/* V tile budget: WINO_POS * C * nt floats within half of a 1 MB L2 (the same budget as the direct
 * path's strip); at C = 32 that is two NR panels at AVX-512, four at AVX2 (NR 24), at C = 128
 * one. With F(2,3), 256 KB and 1 MB measured the same within noise (geomean of the bench shapes,
 * 1 thread, AVX-512 and AVX2). */
#define WINO_V_BYTES (512 * 1024)
#define WINO_MAX_PANELS 8

typedef struct {
    int64_t th, tw, tiles, nt, slot;
    /* V row stride (ldb of the GEMMs), split-row and output-row lengths: the transforms run whole
     * vectors past a row segment's end (winograd_f43.h), so each leaves A2R_VEC_FLOATS slack */
    int64_t vb, eb, yb;
} wino_geometry;

static wino_geometry wino_geometry_of(const a2r_conv2d_shape *s, const geometry *g) {
    wino_geometry wg;
    wg.th = (g->oh + WINO_M - 1) / WINO_M;
    wg.tw = (g->ow + WINO_M - 1) / WINO_M;
    wg.tiles = wg.th * wg.tw;
    int64_t panels = WINO_V_BYTES / ((int64_t)sizeof(float) * WINO_POS * s->c * NR);
    panels = A2R_MAX(1, A2R_MIN(panels, WINO_MAX_PANELS));
    panels = A2R_MIN(panels, (wg.tiles + NR - 1) / NR);
    wg.nt = panels * NR;
    wg.vb = wg.nt + A2R_VEC_FLOATS;
    wg.eb = wg.nt + 1 + A2R_VEC_FLOATS;
    wg.yb = WINO_M * (wg.nt + A2R_VEC_FLOATS);
    /* V (WINO_POS x C rows of vb), M (WINO_POS x MR x nt, then slack), 6 input rows split into 4
     * phase arrays of eb, 4 output rows of yb */
    wg.slot = WINO_POS * s->c * wg.vb + WINO_POS * MR * wg.nt + A2R_VEC_FLOATS +
              WINO_T * 4 * wg.eb + WINO_M * wg.yb + 4 * ALIGN_FLOATS;
    return wg;
}

/* Output channels padded to whole MR blocks: Winograd always uses the full-height tile (the
 * direct path's g->og_pad may count shorter blocks). */
static inline int64_t wino_o_pad(const a2r_conv2d_shape *s) {
    return (s->o + MR - 1) / MR * MR;
}

/* Packed U: position p, block ob of MR output channels, C steps of MR floats (zero rows past o). */
static void wino_pack(const a2r_conv2d_shape *s, const float *restrict w,
                      float *restrict packed) {
    const int64_t c = s->c, blocks = wino_o_pad(s) / MR;
    for (int64_t o = 0; o < wino_o_pad(s); o++)
        for (int64_t ci = 0; ci < c; ci++) {
            float u[WINO_POS] = {0};
            if (o < s->o) wino_filter(w + (o * c + ci) * 9, u);
            for (int p = 0; p < WINO_POS; p++)
                packed[((p * blocks + o / MR) * c + ci) * MR + o % MR] = u[p];
        }
}

/* Columns the GEMMs compute for a block of ntile tiles: whole NR panels, then a last one of 1, 2
 * or NV vectors (the widths wino_gemm instantiates), the fewest that hold the rest rounded up to
 * A2R_VEC_FLOATS (the output transform's step). Whole panels only would make a small map's few
 * tiles pay for up to NR - 1 zero columns: 16 tiles at 16^2 took 48 at AVX-512, 3x the GEMM. */
static inline int64_t wino_cols(int64_t ntile) {
    const int64_t last = ntile - (ntile - 1) / NR * NR; /* 1..NR */
    const int64_t need = ((last + A2R_VEC_FLOATS - 1) / A2R_VEC_FLOATS * A2R_VEC_FLOATS + VL - 1) /
                         VL;
    return ntile - last + (need <= 1 ? 1 : need <= 2 ? 2 : NV) * VL;
}

/* M (MR x cols) = U (MR x C) * V for one position, panel by panel; the last may be narrower. */
static inline void wino_gemm(int64_t c, const float *restrict u, const float *restrict v,
                             int64_t vb, float *restrict m, int64_t ldm, int64_t cols) {
    for (int64_t j = 0; j < cols; j += NR) {
        switch (A2R_MIN(NR, cols - j) / VL) {
        case 1: micro_kernel(MR, 1, c, u, v + j, NULL, vb, m + j, ldm, NULL); break;
#if NV > 2
        case 2: micro_kernel(MR, 2, c, u, v + j, NULL, vb, m + j, ldm, NULL); break;
#endif
        default: micro_kernel(MR, NV, c, u, v + j, NULL, vb, m + j, ldm, NULL); break;
        }
    }
}

/* V for tiles [t0, t0 + ntile) of image xi (C, h, w); columns [ntile, cols) zeroed.
 * Tile k of a row segment reads patch columns p0[k], p1[k], p2[k], p3[k], p0[k+1], p1[k+1] of
 * each of its 6 rows (split into 4 phase arrays first), so the transform loop is unit stride in
 * k. Segments are transformed in order: each overwrites what the previous one's last vector
 * wrote past its end. eo: 6 rows x 4 phases x eb. */
static void wino_input(const a2r_conv2d_shape *s, const wino_geometry *wg,
                       const float *restrict xi, int64_t t0, int64_t ntile, int64_t cols,
                       float *restrict vt, float *restrict eo) {
    const int64_t c = s->c, vb = wg->vb, ps = c * vb, eb = wg->eb;
    for (int64_t ci = 0; ci < c; ci++) {
        const float *plane = xi + ci * s->h * s->w;
        for (int64_t col = 0, t = t0; col < ntile;) {
            const int64_t ty = t / wg->tw, tx = t % wg->tw;
            const int64_t len = A2R_MIN(wg->tw - tx, ntile - col);
            const int64_t ix0 = WINO_M * tx - s->pad_w;
            for (int r = 0; r < WINO_T; r++)
                wino_split_row(plane, s->h, s->w, WINO_M * ty - s->pad_h + r, ix0, len, WINO_M,
                               eo + 4 * r * eb, eb);
            wino_in_tiles(eo, eb, len, vt + ci * vb + col, ps);
            col += len;
            t += len;
        }
        for (int p = 0; p < WINO_POS; p++)
            v_zero_n(vt + p * ps + ci * vb + ntile, cols - ntile);
    }
}

/* Output transform of channel o's M rows (m + p*MR*nt) for the block's tiles (all at once: the
 * rows of a tile row segment are contiguous in obuf), epilogue into y per segment. */
static void wino_output(const geometry *g, const wino_geometry *wg,
                        const float *restrict m, int64_t t0, int64_t ntile, float bo,
                        const float *residual, int act, float alpha, float *y,
                        float *restrict obuf) {
    const int64_t ow = g->ow, yb = wg->yb;
    wino_out_tiles(m, MR * wg->nt, ntile, obuf, yb);
    for (int64_t col = 0, t = t0; col < ntile;) {
        const int64_t ty = t / wg->tw, tx = t % wg->tw;
        const int64_t len = A2R_MIN(wg->tw - tx, ntile - col);
        const int64_t oy = WINO_M * ty, ox = WINO_M * tx, n = A2R_MIN(WINO_M * len, ow - ox);
        for (int64_t r = 0; r < WINO_M && oy + r < g->oh; r++) {
            const int64_t at = (oy + r) * ow + ox;
            epilogue(obuf + r * yb + WINO_M * col, bo, residual ? residual + at : NULL, act,
                     alpha, y + at, n);
        }
        col += len;
        t += len;
    }
}

static void wino_conv(const a2r_conv2d_shape *s, const geometry *g, const float *restrict x,
                      const float *restrict packed, const float *bias, const float *residual,
                      int act, float alpha, float *workspace, int64_t workspace_floats,
                      float *restrict y) {
    const wino_geometry wg = wino_geometry_of(s, g);
    const int64_t blocks = wino_o_pad(s) / MR, tblocks = (wg.tiles + wg.nt - 1) / wg.nt;
    int nthr = (int)A2R_MAX(1, A2R_MIN(a2r_num_threads(), workspace_floats / wg.slot));
    const int64_t per_chunk = rows_per_item(blocks, s->n * tblocks, nthr);
    const int64_t chunks = (blocks + per_chunk - 1) / per_chunk;
    const int64_t items = s->n * tblocks * chunks;
    if (items * wg.nt * wino_o_pad(s) * s->c * WINO_POS < A2R_PAR_GRAIN * 16) nthr = 1;
    #pragma omp parallel num_threads(nthr)
    {
        float *slot = thread_slot(workspace, A2R_THREAD_ID(), wg.slot);
        float *vt = slot;                                      /* WINO_POS * C * vb */
        float *mt = vt + WINO_POS * s->c * wg.vb;              /* WINO_POS * MR * nt + slack */
        float *eo = mt + WINO_POS * MR * wg.nt + A2R_VEC_FLOATS;   /* 6 rows x 4 phases */
        float *obuf = eo + WINO_T * 4 * wg.eb;                 /* 4 output rows */
        /* the slack lanes are computed and dropped: start them at 0, not at stale bits (NaN or
         * subnormal lanes would be right but could be slow) */
        memset(mt + WINO_POS * MR * wg.nt, 0, (size_t)(A2R_VEC_FLOATS + WINO_T * 4 * wg.eb) *
                                                 sizeof(float));
        #pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            const int64_t chunk = it % chunks, tb = (it / chunks) % tblocks;
            const int64_t ni = it / (chunks * tblocks);
            const int64_t t0 = tb * wg.nt, ntile = A2R_MIN(wg.nt, wg.tiles - t0);
            const int64_t cols = wino_cols(ntile);
            const int64_t b0 = chunk * per_chunk, b1 = A2R_MIN(blocks, b0 + per_chunk);
            wino_input(s, &wg, x + ni * s->c * s->h * s->w, t0, ntile, cols, vt, eo);
            for (int64_t ob = b0; ob < b1; ob++) {
                for (int p = 0; p < WINO_POS; p++)
                    wino_gemm(s->c, packed + (p * blocks + ob) * s->c * MR,
                              vt + p * s->c * wg.vb, wg.vb, mt + p * MR * wg.nt, wg.nt, cols);
                const int64_t o1 = A2R_MIN((ob + 1) * MR, s->o);
                for (int64_t o = ob * MR; o < o1; o++) {
                    const int64_t plane = (ni * s->o + o) * g->p;
                    wino_output(g, &wg, mt + (o - ob * MR) * wg.nt, t0, ntile,
                                bias ? bias[o] : 0.0f, residual ? residual + plane : NULL, act,
                                alpha, y + plane, obuf);
                }
            }
        }
    }
}

#endif
