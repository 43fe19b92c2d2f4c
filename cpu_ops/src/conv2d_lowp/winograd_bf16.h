/* Winograd F(2x2, 3x3) at bf16 for 3x3 stride-1 dilation-1 groups-1 convs (included by
 * kernel.c, which supplies geometry, mk_bf16, epilogue, to_bf16, MR/NR; the transforms are
 * winograd_f23.h). The fp32 path (conv2d/winograd.h) runs F(4,3) in the same three steps.
 *
 * The 16 GEMMs of the transform domain at bf16:
 *   1. input transform in fp32, two channels at a time, each V value rounded to bf16 into the
 *      lanes of channel pair cl (channels 2cl, 2cl+1): V[p][cl][nt] (columns past the block 0);
 *   2. per MR block of output channels, M[p] (MR x nt, fp32) = U[p] (MR x cd lanes) * V[p] with
 *      mk_bf16 (vdpbf16ps where the CPU has it), U = G g G^T made in double, rounded to bf16 and
 *      packed once after the direct path's weights;
 *   3. output transform A^T M A in fp32, then the epilogue (bias, residual, activation).
 *      (Transforming each NR panel while its M is in L1 measured slower at 64 channels and at
 *      256^2: shorter epilogue rows.)
 * Numerics: only U and V are rounded to bf16 (relative 2^-8 each); products are exact and sums
 * fp32. The error is that of the direct path with |x| and |w| replaced by |V| and |U|, carried
 * through the 0/+-1 output transform: |dy| <= (2u + u^2) * |A^T| (sum_c |U_c| .* |V_c|) |A|.
 * Measured: RMS error 1.55-1.78x the direct bf16 path's per layer (tests/test_conv2d_lowp.py);
 * the bundled model 58.6 dB against fp32 (direct bf16 58.7; the guard is 45). F(4,3) was not
 * taken: simulated at bf16 (numpy, 32 -> 32 channels) its RMS error is 6-11x direct bf16's per
 * layer (16-21 dB), its transforms' 4, 5 and 8 amplifying the bf16 rounding of U and V.
 * 2.25x fewer multiplies than direct; the transforms cost the same as at fp32. */
#ifndef A2R_CONV2D_LOWP_WINOGRAD_BF16_H
#define A2R_CONV2D_LOWP_WINOGRAD_BF16_H

#include "winograd_f23.h"

/* V lanes per block within half of a 1 MB L2 (the fp32 path's budget), at most 8 NR panels. */
#define WINO_V_BYTES (512 * 1024)
#define WINO_MAX_PANELS 8
/* Tiles per fp32 staging chunk of the input transform: 2 x 16 x 64 floats = 8 KB stay in L1. */
#define WINO_CHUNK 64

typedef struct {
    int64_t tw, tiles, nt, cd, o_pad, v_lanes, slot; /* slot: bytes per thread */
} wino_geometry;

static wino_geometry wino_geometry_of(const a2r_conv2d_shape *s, const geometry *g) {
    wino_geometry wg;
    wg.tw = (g->ow + 1) / 2;
    wg.tiles = (g->oh + 1) / 2 * wg.tw;
    wg.cd = (s->c + 1) / 2;
    wg.o_pad = round_up(s->o, MR); /* always the full-height register tile */
    int64_t panels = WINO_V_BYTES / (4 * 16 * wg.cd * NR);
    panels = A2R_MAX(1, A2R_MIN(panels, WINO_MAX_PANELS));
    wg.nt = A2R_MIN(panels, (wg.tiles + NR - 1) / NR) * NR;
    wg.v_lanes = 16 * wg.cd * wg.nt;
    /* V lanes | M of one panel (16 x MR x NR floats) | cd lane-row offsets | the fp32 stage of
     * wino_in_lanes | two channels' 4 input rows split into 8 even/odd arrays of nt + 1 |
     * 2 output rows of 2*NR + 2 */
    wg.slot = round_up(4 * wg.v_lanes, ALIGN) + round_up(4 * 16 * MR * wg.nt, ALIGN) +
              round_up(4 * wg.cd, ALIGN) + 4 * 32 * WINO_CHUNK +
              4 * (16 * (wg.nt + 1) + 2 * (2 * wg.nt + 2)) + 2 * ALIGN;
    return wg;
}

/* Packed U, after the direct path's lanes: position p, block ob of MR output channels, cd
 * lane steps of MR lanes (channels past c and rows past o are zeros). */
static int64_t wino_packed_lanes(const a2r_conv2d_shape *s) {
    return 16 * round_up(s->o, MR) * ((s->c + 1) / 2);
}

static void wino_pack(const a2r_conv2d_shape *s, const float *restrict w,
                      uint32_t *restrict packed) {
    const int64_t c = s->c, cd = (c + 1) / 2, o_pad = round_up(s->o, MR), blocks = o_pad / MR;
    for (int64_t i = 0; i < 16 * o_pad * cd; i++) packed[i] = 0;
    for (int64_t o = 0; o < s->o; o++)
        for (int64_t ci = 0; ci < c; ci++) {
            float u[16];
            wino_filter(w + (o * c + ci) * 9, u);
            for (int p = 0; p < 16; p++)
                packed[((p * blocks + o / MR) * cd + ci / 2) * MR + o % MR] |=
                    to_bf16(u[p]) << (16 * (ci % 2));
        }
}

/* wino_in_tiles of two channels (split rows at eo0, eo1; eo1 NULL: zeros) for tiles k < len,
 * staged in fp32 by chunks that stay in L1 (stage: 2 x 16 x WINO_CHUNK floats), rounded to bf16
 * and packed into lanes v[p*ps + k] (channel of eo0 in the low half). */
static void wino_in_lanes(const float *eo0, const float *eo1, int64_t eb, int64_t len,
                          uint32_t *restrict v, int64_t ps, float *restrict stage) {
    float *stage1 = stage + 16 * WINO_CHUNK;
    for (int64_t k0 = 0; k0 < len; k0 += WINO_CHUNK) {
        const int64_t n = A2R_MIN(WINO_CHUNK, len - k0);
        wino_in_tiles(eo0 + k0, eb, n, stage, WINO_CHUNK);
        if (eo1) wino_in_tiles(eo1 + k0, eb, n, stage1, WINO_CHUNK);
        for (int p = 0; p < 16; p++)
            bf16_pack2(stage + p * WINO_CHUNK, eo1 ? stage1 + p * WINO_CHUNK : NULL,
                       v + p * ps + k0, n);
    }
}

/* V lanes of tiles [t0, t0 + ntile) of image xi (C, h, w): vt[(p*cd + cl)*nt + tile], channel
 * pair cl = channels 2cl, 2cl+1 (a missing odd channel is zeros); columns [ntile, npan*NR)
 * zeroed. eo: 2 channels x 4 rows x (even, odd) x (nt + 1) floats; stage: wino_in_lanes'. */
static void wino_input(const a2r_conv2d_shape *s, const wino_geometry *wg,
                       const float *restrict xi, int64_t t0, int64_t ntile, int64_t npan,
                       uint32_t *restrict vt, float *restrict eo, float *restrict stage) {
    const int64_t nt = wg->nt, eb = nt + 1, ps = wg->cd * nt;
    for (int64_t cl = 0; cl < wg->cd; cl++) {
        const int pair = 2 * cl + 1 < s->c; /* else channel 2cl + 1 is the zero padding */
        for (int64_t col = 0, t = t0; col < ntile;) {
            const int64_t ty = t / wg->tw, tx = t % wg->tw;
            const int64_t len = A2R_MIN(wg->tw - tx, ntile - col);
            const int64_t ix0 = 2 * tx - s->pad_w;
            for (int64_t r = 0; r < 1 + pair; r++) {
                const float *plane = xi + (2 * cl + r) * s->h * s->w;
                float *e = eo + 8 * r * eb;
                for (int rr = 0; rr < 4; rr++)
                    wino_split_row(plane, s->h, s->w, 2 * ty - s->pad_h + rr, ix0, len, 2,
                                   e + 2 * rr * eb, eb);
            }
            wino_in_lanes(eo, pair ? eo + 8 * eb : NULL, eb, len, vt + cl * nt + col, ps, stage);
            col += len;
            t += len;
        }
        for (int p = 0; p < 16; p++)
            for (int64_t t = ntile; t < npan * NR; t++) vt[p * ps + cl * nt + t] = 0;
    }
}

/* Output transform of one channel's M rows (m + p*ps) for tiles [t0, t0 + ntile), epilogue into
 * its output plane y. obuf: 2 rows of 2*nt + 2 floats. */
static void wino_output(const geometry *g, const wino_geometry *wg, const float *restrict m,
                        int64_t ps, int64_t t0, int64_t ntile, float bo, const float *residual,
                        int act, float alpha, float *y, float *restrict obuf) {
    const int64_t ow = g->ow;
    float *restrict y0 = obuf, *restrict y1 = obuf + 2 * wg->nt + 2;
    for (int64_t col = 0, t = t0; col < ntile;) {
        const int64_t ty = t / wg->tw, tx = t % wg->tw;
        const int64_t len = A2R_MIN(wg->tw - tx, ntile - col);
        wino_out_tiles(m + col, ps, len, y0, y1);
        const int64_t oy = 2 * ty, ox = 2 * tx, n = A2R_MIN(2 * len, ow - ox);
        const int64_t at = oy * ow + ox;
        const act_quant none = {1.0f, 0.0f};
        epilogue(g, y0, 0, 1.0f, bo, residual ? residual + at : NULL, act, alpha, y + at, NULL,
                 none, n);
        if (oy + 1 < g->oh)
            epilogue(g, y1, 0, 1.0f, bo, residual ? residual + at + ow : NULL, act, alpha,
                     y + at + ow, NULL, none, n);
        col += len;
        t += len;
    }
}

static void wino_conv(const a2r_conv2d_shape *s, const geometry *g, const float *restrict x,
                      const uint32_t *restrict packed, const float *bias, const float *residual,
                      int act, float alpha, void *workspace, int64_t workspace_bytes,
                      float *restrict y) {
    const wino_geometry wg = wino_geometry_of(s, g);
    const int64_t blocks = wg.o_pad / MR, tblocks = (wg.tiles + wg.nt - 1) / wg.nt;
    int nthr = (int)A2R_MAX(1, A2R_MIN(a2r_num_threads(), workspace_bytes / wg.slot));
    const int64_t per_item = blocks_per_item(blocks, s->n * tblocks, nthr);
    const int64_t chunks = (blocks + per_item - 1) / per_item;
    const int64_t items = s->n * tblocks * chunks;
    if (items * wg.nt * wg.o_pad * wg.cd * 32 < A2R_PAR_GRAIN * 16) nthr = 1;
    #pragma omp parallel num_threads(nthr)
    {
        char *slot = (char *)workspace + (int64_t)A2R_THREAD_ID() * wg.slot;
        slot += (ALIGN - (uintptr_t)slot % ALIGN) % ALIGN;
        uint32_t *vt = (uint32_t *)slot;
        float *mt = (float *)(slot + round_up(4 * wg.v_lanes, ALIGN));
        int32_t *off = (int32_t *)(mt + round_up(16 * MR * wg.nt, ALIGN / 4));
        float *stage = (float *)(off + round_up(wg.cd, ALIGN / 4));
        float *eo = stage + 32 * WINO_CHUNK;
        float *obuf = eo + 16 * (wg.nt + 1);
        for (int64_t k = 0; k < wg.cd; k++) off[k] = (int32_t)(k * wg.nt); /* V row k */
        #pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            const int64_t chunk = it % chunks, tb = (it / chunks) % tblocks;
            const int64_t ni = it / (chunks * tblocks);
            const int64_t t0 = tb * wg.nt, ntile = A2R_MIN(wg.nt, wg.tiles - t0);
            const int64_t npan = (ntile + NR - 1) / NR;
            const int64_t b0 = chunk * per_item, b1 = A2R_MIN(blocks, b0 + per_item);
            wino_input(s, &wg, x + ni * s->c * s->h * s->w, t0, ntile, npan, vt, eo, stage);
            for (int64_t ob = b0; ob < b1; ob++) {
                for (int p = 0; p < 16; p++)
                    for (int64_t pan = 0; pan < npan; pan++)
                        mk_bf16(MR, wg.cd, packed + (p * blocks + ob) * wg.cd * MR,
                                vt + p * wg.cd * wg.nt + pan * NR, off,
                                mt + p * MR * wg.nt + pan * NR, wg.nt);
                const int64_t o1 = A2R_MIN((ob + 1) * MR, s->o);
                for (int64_t o = ob * MR; o < o1; o++) {
                    const int64_t plane = (ni * s->o + o) * g->p;
                    wino_output(g, &wg, mt + (o - ob * MR) * wg.nt, MR * wg.nt, t0, ntile,
                                bias ? bias[o] : 0.0f, residual ? residual + plane : NULL,
                                act, alpha, y + plane, obuf);
                }
            }
        }
    }
}

#endif
