/* a2r_kernels.h - the whole C contract of the CPU kernel layer.
 *
 * Every entry point dispatches at run time to the best ISA variant of its op (see a2r_runtime.h).
 * Shared rules, checked by the Python callers (a2r_edge/ops.py), never here:
 *   - pointers are valid, non-NULL (unless said otherwise), C-contiguous, and do not alias unless
 *     the op says in-place is allowed;
 *   - sizes are > 0;
 *   - all functions are thread-safe and never touch Python: callers release the GIL.
 * Functions returning int return A2R_OK or an A2R_E* code; the rest cannot fail.
 */
#ifndef A2R_KERNELS_H
#define A2R_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define A2R_OK 0
#define A2R_ENOMEM 1 /* a scratch buffer could not be allocated */

/* Activations that a producer (conv2d, adain) fuses into its epilogue; v is the value before. */
#define A2R_ACT_NONE 0
#define A2R_ACT_SILU 1       /* v * sigmoid(v) */
#define A2R_ACT_RELU 2       /* v > 0 ? v : 0 */
#define A2R_ACT_LEAKY_RELU 3 /* v >= 0 ? v : alpha * v (the op's alpha argument) */

/* preprocess: BGR uint8 HWC -> RGB float32 planar (CHW), one pass.
 *   out[c*h*w + y*w + x] = img[(y*w + x)*3 + 2 - c] * scale[c] + bias[c]     c = R, G, B
 * The caller folds normalisation into scale/bias: scale = 1/(255*std), bias = -mean/std. */
void a2r_preprocess(const uint8_t *img, int64_t h, int64_t w,
                    const float scale[3], const float bias[3], float *out);

/* postprocess: RGB float32 planar (CHW) -> BGR uint8 HWC, bit-exact on every ISA.
 *   v = (x * stdv[c] + mean[c]) * 255 evaluated in float32 without contraction, NaN -> 0,
 *   clamped to [0, 255], rounded half to even. Returns how many x values are NaN or +-inf. */
int64_t a2r_postprocess(const float *x, int64_t h, int64_t w,
                        const float mean[3], const float stdv[3], uint8_t *out);

/* channel_stats: per-plane mean and std = sqrt(biased var + eps) of nc planes of hw floats.
 * Accurate for large offsets: float lane sums over blocks around running-mean pivots, the blocks
 * Chan-merged in double (cpu_ops/src/common/moments.h). */
void a2r_channel_stats(const float *x, int64_t nc, int64_t hw, float eps,
                       float *mean, float *stdv);

/* adain: y = (x - mu) / sigma * style_std + style_mean per plane, plus residual (nc*hw values,
 * NULL: none: a following Add fused), then the fused activation (A2R_ACT_*; alpha is the leaky
 * slope, ignored by the others).
 *   content_mean/content_std: per-plane mu and sigma (sigma already includes eps), or both NULL to
 *   compute them here with the channel_stats rule (each plane's stats and apply share the cache).
 *   style_mean/style_std: nc values (the caller broadcasts (C,) to (N, C)). y may equal x or
 *   residual. */
void a2r_adain(const float *x, int64_t nc, int64_t hw,
               const float *style_mean, const float *style_std,
               const float *content_mean, const float *content_std,
               float eps, int activation, float alpha, const float *residual, float *y);

/* adalin: U-GAT-IT's adaptive layer-instance normalisation (AdaLIN, ILN) of x (n, c, hw), then
 * the fused activation (A2R_ACT_*), per plane p = (sample s, channel k):
 *   y = act(gamma[p] * (in_weight[k] * (x - mu_p) / sqrt(var_p + in_eps)
 *                       + ln_weight[k] * (x - mu_s) / sqrt(var_s + ln_eps)) + beta[p])
 * mu_p, var_p: the plane's mean and biased variance; mu_s, var_s: those of its whole sample (c*hw
 * values), merged from the planes' (same accuracy rule as channel_stats). in_weight, ln_weight:
 * c values (rho and 1 - rho, any unbiased-variance factor folded in); gamma, beta: n*c values
 * (the caller broadcasts). moments: 2*n*c doubles of scratch. y may equal x. */
void a2r_adalin(const float *x, int64_t n, int64_t c, int64_t hw, const float *in_weight,
                const float *ln_weight, const float *gamma, const float *beta, float in_eps,
                float ln_eps, int activation, float alpha, double *moments, float *y);

/* silu: y = x * sigmoid(x), n floats; y may equal x. */
void a2r_silu(const float *x, float *y, int64_t n);

/* tanh: y = out_scale * tanh(in_scale * x) + out_shift (one fused multiply-add), n floats;
 * tanh's relative error below 1e-6, -0, +-inf and NaN as tanh has them (out_shift -0 keeps a
 * -0; 0.5, 0.5, 0.5 give sigmoid); y may equal x. */
void a2r_tanh(const float *x, float *y, int64_t n, float in_scale, float out_scale,
              float out_shift);

/* gelu: n floats by form (y may equal x); erf's absolute error below 2e-7, GELU's relative
 * error below 5e-6 (the tanh form's 2e-5: its float32 cubic) where the result is a normal
 * float (tests/test_activations.py):
 *   A2R_GELU_ERF    y = erf(x) (ONNX Erf);
 *   A2R_GELU_EXACT  y = x/2 (1 + erf(x / sqrt 2)) (ONNX Gelu, approximate "none");
 *   A2R_GELU_TANH   y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate "tanh"). */
#define A2R_GELU_ERF 0
#define A2R_GELU_EXACT 1
#define A2R_GELU_TANH 2
void a2r_gelu(const float *x, float *y, int64_t n, int form);

/* softmax_rows: y = e^(x - max) / sum e^(x - max) along each of `rows` contiguous rows of n
 * floats, n >= 1 (ONNX Softmax over the last axis); relative error below 4e-6 where y is a
 * normal float (most of it the rounding of x - max before e^); y may equal x. */
void a2r_softmax_rows(const float *x, float *y, int64_t rows, int64_t n);

/* layernorm_rows: y = (x - mean) / sqrt(var + eps) * scale + bias along each of `rows`
 * contiguous rows of n >= 1 floats (ONNX LayerNormalization over the last axes), mean and
 * biased variance of the row; scale: n floats; bias: n floats or NULL; y may equal x. */
void a2r_layernorm_rows(const float *x, int64_t rows, int64_t n, const float *scale,
                        const float *bias, float eps, float *y);

/* resize: separable resampling of nc planes (h, w) -> (oh, ow) by tap tables (the ONNX
 * Resize of the executor: model/ops/resize.py makes the tables).
 *   rows[r, j] = sum_{k<ky} wy[k*oh + o] * x[plane, iy[k*oh + o], j]        r = plane*oh + o
 *   y[r, p]    = sum_{k<kx} wx[k*ow + p] * rows[r, ix[k*ow + p]]
 * iy in [0, h), ix in [0, w); rows: nc*oh*w floats of scratch (not touched when both axes
 * have one tap of weight 1: nearest); ky, kx >= 1. */
void a2r_resize(const float *x, int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
                int64_t ky, const int64_t *iy, const float *wy, int64_t kx, const int64_t *ix,
                const float *wx, float *rows, float *y);

/* maxpool: 2-D max pooling of nc planes (h, w) -> (oh, ow): y[i, j] = max over taps (a, b),
 * a < kh, b < kw, of x[i*sh - ph + a*dh, j*sw - pw + b*dw] among those inside the input
 * and not NaN (-inf when none is); strides, dilations >= 1, pads >= 0. */
void a2r_maxpool(const float *x, int64_t nc, int64_t h, int64_t w, int64_t kh, int64_t kw,
                 int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                 int64_t oh, int64_t ow, float *y);

/* avgpool: 2-D average pooling, the same geometry: y[i, j] = (sum of the taps inside the
 * input) / count[i*ow + j], count > 0 per output pixel (ONNX AveragePool: the taps inside, or
 * with count_include_pad the pads too; the caller computes it once per plan). */
void a2r_avgpool(const float *x, int64_t nc, int64_t h, int64_t w, int64_t kh, int64_t kw,
                 int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                 int64_t oh, int64_t ow, const float *count, float *y);

/* pad2d: the ONNX Pad of the last two axes of nc planes (h, w) -> (h + top + bottom,
 * w + left + right), pads >= 0: A2R_PAD_CONSTANT fills with value, A2R_PAD_REFLECT mirrors
 * without repeating the edge (pads < the side), A2R_PAD_EDGE repeats the edge. */
enum { A2R_PAD_CONSTANT = 0, A2R_PAD_REFLECT = 1, A2R_PAD_EDGE = 2 };
void a2r_pad2d(const float *x, int64_t nc, int64_t h, int64_t w, int64_t top, int64_t bottom,
               int64_t left, int64_t right, int mode, float value, float *y);

/* crop_add: y[p, i, j] = x[p, top + i, left + j] + b[p, i, j], p < nc, i < h, j < w: the part
 * of x (nc, xh, xw) a crop (negative pads) keeps, added to b (nc, h, w) in one pass; top + h <=
 * xh, left + w <= xw; y may be b. */
void a2r_crop_add(const float *x, int64_t nc, int64_t xh, int64_t xw, int64_t top, int64_t left,
                  const float *b, int64_t h, int64_t w, float *y);

/* pixel_shuffle (torch PixelShuffle = ONNX DepthToSpace CRD), x (n, c*r*r, h, w), the window
 * from (top, left) of its result: with Y = top + oy, X = left + ox,
 *   y[b, k, oy, ox] = x[b, k*r*r + (Y % r)*r + X % r, Y / r, X / r]              y (n, c, oh, ow)
 * top + oh <= h*r, left + ow <= w*r; (0, 0, h*r, w*r) is the whole picture. */
void a2r_pixel_shuffle(const float *x, int64_t n, int64_t c, int64_t h, int64_t w, int64_t r,
                       int64_t top, int64_t left, int64_t oh, int64_t ow, float *y);
/* The same on bytes: the u8 levels an int8 convolution hands the next through a DepthToSpace. */
void a2r_pixel_shuffle_u8(const uint8_t *x, int64_t n, int64_t c, int64_t h, int64_t w,
                          int64_t r, int64_t top, int64_t left, int64_t oh, int64_t ow,
                          uint8_t *y);

/* transpose: y[b, j, i] = x[b, i, j], x (batch, rows, cols) -> y (batch, cols, rows), any 4-byte
 * elements (float32, int32: moved, never computed); x and y do not overlap. */
void a2r_transpose(const float *x, int64_t batch, int64_t rows, int64_t cols, float *y);

/* im2col, Caffe layout, zero padding. x (c, h, w) -> out (c*kh*kw, oh*ow) with
 *   oh = (h + 2*pad_h - dil_h*(kh-1) - 1) / stride_h + 1 (same for ow), both > 0,
 *   out[((ci*kh + i)*kw + j)*oh*ow + y*ow + x] = x[ci, y*stride_h - pad_h + i*dil_h, ...] or 0. */
void a2r_im2col(const float *x, int64_t c, int64_t h, int64_t w,
                int64_t kh, int64_t kw, int64_t stride_h, int64_t stride_w,
                int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w, float *out);

/* conv2d: y = act(conv(x, w) + bias + residual), x (n, c, h, w), w (o, c/groups, kh, kw), zero
 * padding, y and residual (n, o, oh, ow) with oh, ow as in a2r_im2col (both > 0).
 * Weights are packed once for the active ISA level's micro-kernel (a2r_conv2d_pack); a packing is
 * valid only at the ISA level it was made at (the caller keeps one per level).
 * Scratch: the caller passes `workspace` of a2r_conv2d_workspace_size() floats, asked for at the
 * active ISA level and thread count; a call runs on at most as many threads as the workspace has
 * slots for, so a smaller workspace is slower, never unsafe (>= 1 slot required). No allocation.
 * Layout and tiling: cpu_ops/src/conv2d/kernel.c. bias and residual may be NULL. */
typedef struct {
    int64_t n, c, h, w, o, groups, kh, kw;
    int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
} a2r_conv2d_shape;
int64_t a2r_conv2d_packed_size(const a2r_conv2d_shape *s); /* floats */
void a2r_conv2d_pack(const a2r_conv2d_shape *s, const float *w, float *packed);
int64_t a2r_conv2d_workspace_size(const a2r_conv2d_shape *s); /* floats */
/* Which path 3x3 stride-1 dilation-1 groups-1 convs take, at fp32 and at bf16 (a2r_conv2d_lowp;
 * int8 is always direct): AUTO (default) = Winograd F(2,3) where measured faster (per precision),
 * else the direct GEMM; DIRECT / WINOGRAD force one (a test and benchmark hook; process-wide,
 * not to be changed while a conv runs). Both packings are made for such shapes, so a switch
 * needs no repacking. Returns the previous setting. */
#define A2R_CONV2D_AUTO 0
#define A2R_CONV2D_DIRECT 1
#define A2R_CONV2D_WINOGRAD 2
int a2r_conv2d_set_algo(int algo);
void a2r_conv2d(const a2r_conv2d_shape *s, const float *x, const float *packed, const float *bias,
                const float *residual, int activation, float alpha, float *workspace,
                int64_t workspace_floats, float *y);

/* conv2d_lowp: a2r_conv2d (same shape, epilogue and outputs in float32) with the multiplies at
 * lower precision, accumulated at fp32 (bf16) or int32 (int8):
 *   A2R_PREC_BF16  weights and activations rounded to bf16 (nearest even), products exact;
 *   A2R_PREC_INT8  weights per output channel symmetric to [-127, 127]; activations asymmetric u8
 *                  over x_range = {lo, hi} (widened to hold 0; values outside are clamped to it)
 *                  at a2r_conv2d_lowp_u8_levels() levels: 255 with VNNI or in plain C, 127 where
 *                  vpmaddubsw would saturate its int16 pair sums. x_range is ignored for bf16.
 * The dot-product units (vdpbf16ps, vpdpbusd) are used at A2R_ISA_AVX512_BF16, the AMX tiles
 * (tdpbf16ps, tdpbsud) at A2R_ISA_AVX512_AMX where a tap has 4+ channel lanes; lower levels
 * widen bf16 to fp32 and use vpmaddubsw (AVX2, AVX-512) or plain C (baseline).
 * Sizes are in bytes. Packing is valid at the ISA level it was made at (as a2r_conv2d_pack);
 * workspace is asked for at the active level and thread count (fewer slots: fewer threads).
 * Give packed a 64-byte aligned start: the AMX tiles load it in 64-byte rows, and rows split
 * across cache lines made a bf16 conv 1.6x slower (any alignment is still correct).
 * Layout and arithmetic: cpu_ops/src/conv2d_lowp/kernel.c. */
#define A2R_PREC_BF16 1
#define A2R_PREC_INT8 2
int64_t a2r_conv2d_lowp_packed_size(const a2r_conv2d_shape *s, int precision);
void a2r_conv2d_lowp_pack(const a2r_conv2d_shape *s, int precision, const float *w, void *packed);
int64_t a2r_conv2d_lowp_workspace_size(const a2r_conv2d_shape *s, int precision);
void a2r_conv2d_lowp(const a2r_conv2d_shape *s, int precision, const void *x, int x_u8,
                     const void *packed, const float x_range[2], const float *bias,
                     const float *residual, int activation, float alpha, void *workspace,
                     int64_t workspace_bytes, void *y, const float *y_range);
int a2r_conv2d_lowp_u8_levels(void);
/* u8 activations between int8 layers (the float traffic of the tensor between them saved):
 * y_range non-NULL (int8 only): y is uint8, the output's u8 levels on the grid of y_range
 * (the next layer's x_range), bit for bit what that layer would make of the float output.
 * x_u8 (int8 only, and only where a2r_conv2d_lowp_takes_u8 says so: the implicit path): x is
 * uint8, levels on this layer's x_range grid. Both at the same ISA level (the levels differ). */
int a2r_conv2d_lowp_takes_u8(const a2r_conv2d_shape *s, int precision);
/* lowp_peak: the multiply-add ceiling of conv2d_lowp's micro-kernel at `precision` (roofline,
 * as a2r_fma_peak): each thread runs `iters` rounds of its inner instruction sequence on the
 * register tile's MR*NV independent accumulators (vdpbf16ps / vpdpbusd with the dot units;
 * widen + 2 FMAs / vpmaddubsw + vpmaddwd + vpaddd without). Returns the operations done (2 per
 * multiply-add: the flop count of the convolution it bounds). `sink` keeps the results live. */
double a2r_lowp_peak(int precision, int64_t iters, float *sink);

/* fma_peak: the FMA throughput ceiling (roofline). Each thread runs `iters` rounds of independent
 * vector FMAs on registers; returns the floating-point operations done (2 per lane per FMA) so
 * the caller divides by its own wall time. `sink` (1 float) keeps the results live. */
double a2r_fma_peak(int64_t iters, float *sink);

/* guided_filter (He et al.), box means over (2r+1)^2 windows, reflect borders "cba|abc" at any
 * 0 <= r <= 2^24 (wider than the picture: whole reflected periods; larger r overflows).
 *   guide: h*w*gc floats, gc = 1 (gray) or 3 (colour, HWC); src: h*w*sc floats (HWC); out like src,
 *   not overlapping guide or src. detail: out = q + detail * (src - q), q the filter output
 *   (0: q itself; the detail layer's gain otherwise).
 * Returns A2R_ENOMEM when its scratch buffers cannot be allocated. */
int a2r_guided_filter(const float *guide, int64_t gc, const float *src, int64_t sc,
                      int64_t h, int64_t w, int64_t r, float eps, float detail, float *out);

#ifdef __cplusplus
}
#endif
#endif
