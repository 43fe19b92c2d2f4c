/* conv_common.h - the tiling geometry and activation helpers shared by the convolution kernels
 * (conv2d at fp32, conv2d_lowp at bf16/int8, im2col), so each rule is written once. All static
 * inline: each kernel's translation unit, compiled once per ISA level, gets its own copy. */
#ifndef A2R_CONV_COMMON_H
#define A2R_CONV_COMMON_H

#include "a2r_math.h"

/* v rounded up to a multiple of m (v >= 0, m > 0). */
static inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* First o >= 0 with o*stride + offset >= 0, i.e. ceil(-offset / stride) (stride > 0). */
static inline int64_t first_valid(int64_t offset, int64_t stride) {
    return offset >= 0 ? 0 : (-offset + stride - 1) / stride;
}

/* Implicit GEMM's polyphase strip: rows per phase plane one tile of nt output columns reads,
 * strip rows wq wide. The tile starts anywhere inside a row (wq - 1), spans nt - 1 more columns,
 * and a tap reaches (kw-1)*dil_w/sw phase columns right and (kh-1)*dil_h/sh phase rows down. */
static inline int64_t strip_rows(const a2r_conv2d_shape *s, int64_t wq, int64_t nt) {
    return (wq - 1 + nt - 1 + (s->kw - 1) * s->dil_w / s->stride_w) / wq + 1 +
           (s->kh - 1) * s->dil_h / s->stride_h;
}

/* 1 when every phase 0..stride-1 is read by some tap t*dil % stride, t < taps; else the
 * polyphase strip would copy planes nobody reads (a 1x1 stride-2 conv reads one of four). */
static inline int every_phase_read(int64_t taps, int64_t dil, int64_t stride) {
    if (stride > taps) return 0;
    for (int64_t ph = 0; ph < stride; ph++) {
        int hit = 0;
        for (int64_t t = 0; t < taps && !hit; t++) hit = t * dil % stride == ph;
        if (!hit) return 0;
    }
    return 1;
}

/* Implicit GEMM's tap offsets: off[(c*kh + i)*kw + j] for c < channels (input channels, or
 * channel lanes) is where tap (c, i, j) of column q reads, at strip[off + q], in a strip of
 * (channels, sh, sw, srows, wq): dy = i*dil_h, dx = j*dil_w lie in phase plane
 * (dy % sh, dx % sw) at row dy / sh, column dx / sw. */
static inline void strip_tap_offsets(const a2r_conv2d_shape *s, int64_t channels, int64_t srows,
                                     int64_t wq, int32_t *off) {
    for (int64_t c = 0, kk = 0; c < channels; c++)
        for (int64_t i = 0; i < s->kh; i++)
            for (int64_t j = 0; j < s->kw; j++, kk++) {
                const int64_t dy = i * s->dil_h, dx = j * s->dil_w;
                const int64_t plane = (c * s->stride_h + dy % s->stride_h) * s->stride_w +
                                      dx % s->stride_w;
                off[kk] = (int32_t)((plane * srows + dy / s->stride_h) * wq + dx / s->stride_w);
            }
}

/* act(v) (A2R_ACT_*; alpha: leaky relu's slope) for an activation known where it is inlined,
 * so each epilogue loop gets its own branch-free body. */
static inline float activate(float v, const int act, float alpha) {
    switch (act) {
    case A2R_ACT_RELU: return v > 0.0f ? v : 0.0f;
    case A2R_ACT_LEAKY_RELU: return v >= 0.0f ? v : alpha * v;
    case A2R_ACT_SILU: return a2r_silu1(v);
    default: return v;
    }
}

#endif
