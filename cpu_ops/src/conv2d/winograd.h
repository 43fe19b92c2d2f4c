/* Winograd F(2x2, 3x3) for 3x3 stride-1 dilation-1 groups-1 convs (included by kernel.c, which
 * supplies geometry, micro_kernel, epilogue, MR/NR, v_zero_n/v_copy_n).
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

/* V tile budget: 16 * C * nt floats within half of a 1 MB L2 (the same budget as the direct
 * path's strip); at C = 128 that is one NR panel, at C = 32 five (AVX-512). 256 KB and 1 MB
 * measured the same within noise (geomean of the bench shapes, 1 thread, AVX-512 and AVX2). */
#define WINO_V_BYTES (512 * 1024)
#define WINO_MAX_PANELS 8

typedef struct {
    int64_t th, tw, tiles, nt, slot;
} wino_geometry;

/* 3x3, stride 1, dilation 1, one group, not depthwise: where the Winograd path can run. */
static int wino_able(const a2r_conv2d_shape *s) {
    return s->kh == 3 && s->kw == 3 && s->stride_h == 1 && s->stride_w == 1 && s->dil_h == 1 &&
           s->dil_w == 1 && s->groups == 1 && !(s->c == 1 && s->o == 1);
}

static wino_geometry wino_geometry_of(const a2r_conv2d_shape *s, const geometry *g) {
    wino_geometry wg;
    wg.th = (g->oh + 1) / 2;
    wg.tw = (g->ow + 1) / 2;
    wg.tiles = wg.th * wg.tw;
    int64_t panels = WINO_V_BYTES / ((int64_t)sizeof(float) * 16 * s->c * NR);
    panels = A2R_MAX(1, A2R_MIN(panels, WINO_MAX_PANELS));
    panels = A2R_MIN(panels, (wg.tiles + NR - 1) / NR);
    wg.nt = panels * NR;
    /* V, M (16 x MR x nt), 4 zero-padded input rows and 2 output rows of <= 2*nt + 2 floats,
     * the input rows split into 8 even/odd arrays of nt + 1 */
    wg.slot = 16 * s->c * wg.nt + 16 * MR * wg.nt + 6 * (2 * wg.nt + 2) + 8 * (wg.nt + 1) +
              4 * ALIGN_FLOATS;
    return wg;
}

/* U[p] = (G g G^T)[p] of one 3x3 filter, in double (rounded once). G rows: (1,0,0),
 * (1/2,1/2,1/2), (1/2,-1/2,1/2), (0,0,1). */
static void wino_filter(const float *g9, float u[16]) {
    double t[4][3], r[4][4];
    for (int j = 0; j < 3; j++) {
        const double a = g9[j], b = g9[3 + j], c = g9[6 + j];
        t[0][j] = a;
        t[1][j] = 0.5 * (a + b + c);
        t[2][j] = 0.5 * (a - b + c);
        t[3][j] = c;
    }
    for (int i = 0; i < 4; i++) {
        const double a = t[i][0], b = t[i][1], c = t[i][2];
        r[i][0] = a;
        r[i][1] = 0.5 * (a + b + c);
        r[i][2] = 0.5 * (a - b + c);
        r[i][3] = c;
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) u[i * 4 + j] = (float)r[i][j];
}

/* Output channels padded to whole MR blocks: Winograd always uses the full-height tile (the
 * direct path's g->og_pad may count half-height blocks). */
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

/* Row pointer for input row iy, columns [ix0, ix0 + n) of plane: in place when inside the image,
 * else a zero-padded copy in buf. */
static inline const float *wino_row(const float *plane, int64_t h, int64_t w, int64_t iy,
                                    int64_t ix0, int64_t n, float *buf) {
    if (iy >= 0 && iy < h && ix0 >= 0 && ix0 + n <= w) return plane + iy * w + ix0;
    if (iy < 0 || iy >= h) {
        v_zero_n(buf, n);
        return buf;
    }
    const int64_t a = A2R_MIN(n, A2R_MAX(0, -ix0)), e = A2R_MAX(a, A2R_MIN(n, w - ix0));
    v_zero_n(buf, a);
    v_copy_n(buf + a, plane + iy * w + ix0 + a, e - a);
    v_zero_n(buf + e, n - e);
    return buf;
}

/* even[k] = r[2k], odd[k] = r[2k+1], k <= len: the stride-2 patch columns as unit-stride arrays. */
static inline void wino_split(const float *restrict r, int64_t len, float *restrict even,
                              float *restrict odd) {
    for (int64_t k = 0; k <= len; k++) {
        even[k] = r[2 * k];
        odd[k] = r[2 * k + 1];
    }
}

/* The 16 V values of len tiles from the split rows (e_r, o_r at eo + (2r, 2r+1)*eb) into
 * v[p*ps + k]. */
static inline void wino_in_tiles(const float *restrict eo, int64_t eb, int64_t len,
                                 float *restrict v, int64_t ps) {
    const float *restrict e0 = eo, *restrict o0 = eo + eb, *restrict e1 = eo + 2 * eb,
                  *restrict o1 = eo + 3 * eb, *restrict e2 = eo + 4 * eb,
                  *restrict o2 = eo + 5 * eb, *restrict e3 = eo + 6 * eb,
                  *restrict o3 = eo + 7 * eb;
    /* the 16 output rows never overlap (ps >= len): no dependence between iterations */
#pragma GCC ivdep
    for (int64_t k = 0; k < len; k++) {
        /* h[r][j] = (d_r B)[j]: d0 - d2, d1 + d2, d2 - d1, d1 - d3 */
        const float h00 = e0[k] - e0[k + 1], h01 = o0[k] + e0[k + 1],
            h02 = e0[k + 1] - o0[k], h03 = o0[k] - o0[k + 1];
        const float h10 = e1[k] - e1[k + 1], h11 = o1[k] + e1[k + 1],
            h12 = e1[k + 1] - o1[k], h13 = o1[k] - o1[k + 1];
        const float h20 = e2[k] - e2[k + 1], h21 = o2[k] + e2[k + 1],
            h22 = e2[k + 1] - o2[k], h23 = o2[k] - o2[k + 1];
        const float h30 = e3[k] - e3[k + 1], h31 = o3[k] + e3[k + 1],
            h32 = e3[k + 1] - o3[k], h33 = o3[k] - o3[k + 1];
        /* rows: B^T along y: h0 - h2, h1 + h2, h2 - h1, h1 - h3 */
        v[0 * ps + k] = h00 - h20;
        v[1 * ps + k] = h01 - h21;
        v[2 * ps + k] = h02 - h22;
        v[3 * ps + k] = h03 - h23;
        v[4 * ps + k] = h10 + h20;
        v[5 * ps + k] = h11 + h21;
        v[6 * ps + k] = h12 + h22;
        v[7 * ps + k] = h13 + h23;
        v[8 * ps + k] = h20 - h10;
        v[9 * ps + k] = h21 - h11;
        v[10 * ps + k] = h22 - h12;
        v[11 * ps + k] = h23 - h13;
        v[12 * ps + k] = h10 - h30;
        v[13 * ps + k] = h11 - h31;
        v[14 * ps + k] = h12 - h32;
        v[15 * ps + k] = h13 - h33;
    }
}

/* V for tiles [t0, t0 + ntile) of image xi (C, h, w); columns [ntile, npan*NR) zeroed.
 * Tile k of a row segment reads patch columns d0..d3 = e[k], o[k], e[k+1], o[k+1] of each of
 * its 4 rows (split into even/odd arrays first), so the transform loop is unit stride in k and
 * vectorises: 16 loads, 16 stores per vector of tiles. */
static void wino_input(const a2r_conv2d_shape *s, const wino_geometry *wg,
                       const float *restrict xi, int64_t t0, int64_t ntile, int64_t npan,
                       float *restrict vt, float *restrict rowbuf) {
    const int64_t c = s->c, nt = wg->nt, rb = 2 * nt + 2, ps = c * nt;
    float *eo = rowbuf + 4 * rb; /* 4 rows x (even, odd) x (nt + 1) */
    const int64_t eb = nt + 1;
    for (int64_t ci = 0; ci < c; ci++) {
        const float *plane = xi + ci * s->h * s->w;
        for (int64_t col = 0, t = t0; col < ntile;) {
            const int64_t ty = t / wg->tw, tx = t % wg->tw;
            const int64_t len = A2R_MIN(wg->tw - tx, ntile - col);
            const int64_t ix0 = 2 * tx - s->pad_w, n = 2 * len + 2;
            for (int r = 0; r < 4; r++)
                wino_split(wino_row(plane, s->h, s->w, 2 * ty - s->pad_h + r, ix0, n,
                                    rowbuf + r * rb),
                           len, eo + (2 * r) * eb, eo + (2 * r + 1) * eb);
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
        const float *mc = m + col;
        for (int64_t k = 0; k < len; k++) {
            float s0[4], s1[4];
            for (int j = 0; j < 4; j++) {
                const float a = mc[j * ps + k], b = mc[(4 + j) * ps + k],
                            c = mc[(8 + j) * ps + k], d = mc[(12 + j) * ps + k];
                s0[j] = a + b + c;
                s1[j] = b - c - d;
            }
            y0[2 * k] = s0[0] + s0[1] + s0[2];
            y0[2 * k + 1] = s0[1] - s0[2] - s0[3];
            y1[2 * k] = s1[0] + s1[1] + s1[2];
            y1[2 * k + 1] = s1[1] - s1[2] - s1[3];
        }
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
        float *rowbuf = mt + 16 * MR * wg.nt;      /* 4 input rows */
        float *obuf = rowbuf + 4 * (2 * wg.nt + 2) + 8 * (wg.nt + 1); /* 2 output rows */
        #pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            const int64_t chunk = it % chunks, tb = (it / chunks) % tblocks;
            const int64_t ni = it / (chunks * tblocks);
            const int64_t t0 = tb * wg.nt, ntile = A2R_MIN(wg.nt, wg.tiles - t0);
            const int64_t npan = (ntile + NR - 1) / NR;
            const int64_t b0 = chunk * per_chunk, b1 = A2R_MIN(blocks, b0 + per_chunk);
            wino_input(s, &wg, x + ni * s->c * s->h * s->w, t0, ntile, npan, vt, rowbuf);
            for (int64_t ob = b0; ob < b1; ob++) {
                for (int p = 0; p < 16; p++) {
                    const float *wa = packed + (p * blocks + ob) * s->c * MR;
                    for (int64_t pan = 0; pan < npan; pan++)
                        micro_kernel(MR, s->c, wa, vt + p * s->c * wg.nt + pan * NR, NULL,
                                     wg.nt, mt + p * MR * wg.nt + pan * NR, wg.nt);
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
