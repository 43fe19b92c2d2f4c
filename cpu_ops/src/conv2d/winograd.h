/* Winograd F(2x2, 3x3) for 3x3 stride-1 dilation-1 groups-1 convs (included by kernel.c, which
 * supplies geometry, micro_kernel, epilogue, MR/NR, v_zero_n; the transforms are
 * common/winograd_f23.h, shared with the bf16 path conv2d_lowp/winograd_bf16.h).
 *
 * Output tiles of 2x2 pixels, read from 4x4 input patches at stride 2 (Lavin & Gray 2016):
 *   Y = A^T [ (G g G^T) .* (B^T d B) ] A, 16 products per tile instead of 36 (2.25x fewer).
 * Per block of nt tiles (flattened (ty, tx) order, one image):
 *   1. input transform: V[p][c][t] = (B^T d_ct B)[p] for the 16 positions p (layout: p, C rows of
 *      nt columns, i.e. 16 micro-kernel B matrices with ldb = nt; columns past the block are 0);
 *   2. for each MR block of output channels, 16 GEMMs  M[p] (MR x nt) = U[p] (MR x C) * V[p],
 *      U = G g G^T packed once (after the direct packing) in the micro-kernel's A layout;
 *   3. output transform of those MR rows (A^T M A) into two output row segments per tile row,
 *      then the usual epilogue (bias, residual, activation) into y.
 * Numerics: B^T and A^T are 0/+-1 (exact adds), G has 1/2 (exact scaling); the error is the
 * GEMM's float sum plus a few adds, inside REDUCTION at the tested sizes. F(4,3) (4x fewer
 * products) was not taken: its transforms carry 1/4..1/6 factors and larger cancellation. */
#ifndef A2R_CONV2D_WINOGRAD_H
#define A2R_CONV2D_WINOGRAD_H

#include "winograd_f23.h"

/* V tile budget: 16 * C * nt floats within half of a 1 MB L2 (the same budget as the direct
 * path's strip); at C = 128 that is one NR panel, at C = 32 five (AVX-512). 256 KB and 1 MB
 * measured the same within noise (geomean of the bench shapes, 1 thread, AVX-512 and AVX2). */
#define WINO_V_BYTES (512 * 1024)
#define WINO_MAX_PANELS 8

typedef struct {
    int64_t th, tw, tiles, nt, slot;
} wino_geometry;

static wino_geometry wino_geometry_of(const a2r_conv2d_shape *s, const geometry *g) {
    wino_geometry wg;
    wg.th = (g->oh + 1) / 2;
    wg.tw = (g->ow + 1) / 2;
    wg.tiles = wg.th * wg.tw;
    int64_t panels = WINO_V_BYTES / ((int64_t)sizeof(float) * 16 * s->c * NR);
    panels = A2R_MAX(1, A2R_MIN(panels, WINO_MAX_PANELS));
    panels = A2R_MIN(panels, (wg.tiles + NR - 1) / NR);
    wg.nt = panels * NR;
    /* V, M (16 x MR x nt), 4 input rows split into 8 zero-padded even/odd arrays of nt + 1,
     * 2 output rows of <= 2*nt + 2 floats */
    wg.slot = 16 * s->c * wg.nt + 16 * MR * wg.nt + 8 * (wg.nt + 1) + 2 * (2 * wg.nt + 2) +
              4 * ALIGN_FLOATS;
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
            float u[16] = {0};
            if (o < s->o) wino_filter(w + (o * c + ci) * 9, u);
            for (int p = 0; p < 16; p++)
                packed[((p * blocks + o / MR) * c + ci) * MR + o % MR] = u[p];
        }
}

/* V for tiles [t0, t0 + ntile) of image xi (C, h, w); columns [ntile, npan*NR) zeroed.
 * Tile k of a row segment reads patch columns d0..d3 = e[k], o[k], e[k+1], o[k+1] of each of
 * its 4 rows (split into even/odd arrays first), so the transform loop is unit stride in k and
 * vectorises: 16 loads, 16 stores per vector of tiles. eo: 4 rows x (even, odd) x (nt + 1). */
static void wino_input(const a2r_conv2d_shape *s, const wino_geometry *wg,
                       const float *restrict xi, int64_t t0, int64_t ntile, int64_t npan,
                       float *restrict vt, float *restrict eo) {
    const int64_t c = s->c, nt = wg->nt, ps = c * nt, eb = nt + 1;
    for (int64_t ci = 0; ci < c; ci++) {
        const float *plane = xi + ci * s->h * s->w;
        for (int64_t col = 0, t = t0; col < ntile;) {
            const int64_t ty = t / wg->tw, tx = t % wg->tw;
            const int64_t len = A2R_MIN(wg->tw - tx, ntile - col);
            const int64_t ix0 = 2 * tx - s->pad_w;
            for (int r = 0; r < 4; r++)
                wino_split_row(plane, s->h, s->w, 2 * ty - s->pad_h + r, ix0, len,
                               eo + (2 * r) * eb, eo + (2 * r + 1) * eb);
            wino_in_tiles(eo, eb, len, vt + ci * nt + col, ps);
            col += len;
            t += len;
        }
        for (int p = 0; p < 16; p++) v_zero_n(vt + p * ps + ci * nt + ntile, npan * NR - ntile);
    }
}

/* Output transform of channel o's M rows (m + p*MR*nt) for the block's tiles, epilogue into y. */
static void wino_output(const geometry *g, const wino_geometry *wg,
                        const float *restrict m, int64_t t0, int64_t ntile, float bo,
                        const float *residual, int act, float alpha, float *y,
                        float *restrict obuf) {
    const int64_t nt = wg->nt, ps = MR * nt, ow = g->ow;
    float *restrict y0 = obuf, *restrict y1 = obuf + 2 * nt + 2;
    for (int64_t col = 0, t = t0; col < ntile;) {
        const int64_t ty = t / wg->tw, tx = t % wg->tw;
        const int64_t len = A2R_MIN(wg->tw - tx, ntile - col);
        wino_out_tiles(m + col, ps, len, y0, y1);
        const int64_t oy = 2 * ty, ox = 2 * tx, n = A2R_MIN(2 * len, ow - ox);
        const int64_t at = oy * ow + ox;
        epilogue(y0, bo, residual ? residual + at : NULL, act, alpha, y + at, n);
        if (oy + 1 < g->oh)
            epilogue(y1, bo, residual ? residual + at + ow : NULL, act, alpha, y + at + ow, n);
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
    if (items * wg.nt * wino_o_pad(s) * s->c * 16 < A2R_PAR_GRAIN * 16) nthr = 1;
    #pragma omp parallel num_threads(nthr)
    {
        float *slot = thread_slot(workspace, A2R_THREAD_ID(), wg.slot);
        float *vt = slot;                          /* 16 * C * nt */
        float *mt = vt + 16 * s->c * wg.nt;        /* 16 * MR * nt */
        float *eo = mt + 16 * MR * wg.nt;          /* 4 input rows split even/odd */
        float *obuf = eo + 8 * (wg.nt + 1);        /* 2 output rows */
        #pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            const int64_t chunk = it % chunks, tb = (it / chunks) % tblocks;
            const int64_t ni = it / (chunks * tblocks);
            const int64_t t0 = tb * wg.nt, ntile = A2R_MIN(wg.nt, wg.tiles - t0);
            const int64_t npan = (ntile + NR - 1) / NR;
            const int64_t b0 = chunk * per_chunk, b1 = A2R_MIN(blocks, b0 + per_chunk);
            wino_input(s, &wg, x + ni * s->c * s->h * s->w, t0, ntile, npan, vt, eo);
            for (int64_t ob = b0; ob < b1; ob++) {
                for (int p = 0; p < 16; p++) {
                    const float *wa = packed + (p * blocks + ob) * s->c * MR;
                    for (int64_t pan = 0; pan < npan; pan++)
                        micro_kernel(MR, s->c, wa, vt + p * s->c * wg.nt + pan * NR, NULL,
                                     wg.nt, mt + p * MR * wg.nt + pan * NR, wg.nt, NULL);
                }
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
