/* a2r_kernel_list.h - THE list of dispatched kernels and of the ISA levels each is compiled at.
 *
 * Everything else is expanded from these two X-macros, so nothing can drift apart:
 *   - declarations: every variant name_<level> (src/dispatch.c; a2r_isa.h in a kernel.c);
 *   - the dispatch table: one row of function pointers per level, and the public entry points
 *     a2r_kernels.h documents, which call the active row (src/dispatch.c);
 *   - the definitions: each src/<op>/kernel.c, compiled once per level with -DA2R_OP=<op>, must
 *     define every kernel its op lists here (a2r_isa.h turns a missing one into a compile error).
 * Mismatches are compile errors: a signature here that differs from a2r_kernels.h or from the
 * kernel.c definition is a conflicting-types error; a kernel listed here but not defined by its
 * op's kernel.c is "aliased to undefined symbol"; a kernel.c function named by A2R_KERNEL() but
 * not listed here is a missing-prototype error. How to add a kernel: cpu_ops/README.md.
 *
 * A2R_ISA_LEVELS(L, a): L(a, level, id) per level; id indexes the dispatch table (a2r_runtime.h).
 *   setup.py compiles every kernel.c once per level with the flags it keeps for that name and
 *   refuses to build when its levels and this list differ. Every kernel has every level: where a
 *   level has no faster code, its kernel.c compiles the portable body at that level.
 * A2R_OPS_<op>(K, a): K(a, ret, name, params, args) per kernel of the folder src/<op>/.
 *   ret is one of void, int, int64_t, double (A2R_RETURN_<ret> in src/dispatch.c); args repeats
 *   the parameter names in order (the entry point forwards them).
 * A2R_KERNEL_LIST(K, a): every op's kernels. The trailing `a` lets an expansion pass one value
 *   (a level) through to K. */
#ifndef A2R_KERNEL_LIST_H
#define A2R_KERNEL_LIST_H

#include <stdint.h>

#include "a2r_kernels.h"
#include "a2r_runtime.h"

#ifdef A2R_X86_VARIANTS
#define A2R_ISA_LEVELS(L, a)                                                                    \
    L(a, baseline, A2R_ISA_BASELINE)                                                            \
    L(a, avx2, A2R_ISA_AVX2)                                                                    \
    L(a, avx512, A2R_ISA_AVX512)                                                                \
    L(a, avx512_bf16, A2R_ISA_AVX512_BF16)                                                      \
    L(a, avx512_amx, A2R_ISA_AVX512_AMX)
#elif defined(A2R_AARCH64_VARIANTS)
#define A2R_ISA_LEVELS(L, a)                                                                    \
    L(a, baseline, A2R_ISA_BASELINE)                                                            \
    L(a, neon_dot, A2R_ISA_NEON_DOT)
#else
#define A2R_ISA_LEVELS(L, a) L(a, baseline, A2R_ISA_BASELINE)
#endif

#define A2R_OPS_preprocess(K, a)                                                                \
    K(a, void, a2r_preprocess,                                                                  \
      (const uint8_t *img, int64_t h, int64_t w, const float scale[3], const float bias[3],      \
       float *out),                                                                             \
      (img, h, w, scale, bias, out))

#define A2R_OPS_postprocess(K, a)                                                               \
    K(a, int64_t, a2r_postprocess,                                                              \
      (const float *x, int64_t h, int64_t w, const float mean[3], const float stdv[3],           \
       uint8_t *out),                                                                           \
      (x, h, w, mean, stdv, out))

#define A2R_OPS_channel_stats(K, a)                                                             \
    K(a, void, a2r_channel_stats,                                                               \
      (const float *x, int64_t nc, int64_t hw, float eps, float *mean, float *stdv),             \
      (x, nc, hw, eps, mean, stdv))

#define A2R_OPS_adain(K, a)                                                                     \
    K(a, void, a2r_adain,                                                                       \
      (const float *x, int64_t nc, int64_t hw, const float *style_mean, const float *style_std,  \
       const float *content_mean, const float *content_std, float eps, int activation,           \
       float alpha, const float *residual, float *y),                                           \
      (x, nc, hw, style_mean, style_std, content_mean, content_std, eps, activation, alpha,     \
       residual, y))

#define A2R_OPS_adalin(K, a)                                                                    \
    K(a, void, a2r_adalin,                                                                      \
      (const float *x, int64_t n, int64_t c, int64_t hw, const float *in_weight,                 \
       const float *ln_weight, const float *gamma, const float *beta, float in_eps,              \
       float ln_eps, int activation, float alpha, double *moments, float *y),                    \
      (x, n, c, hw, in_weight, ln_weight, gamma, beta, in_eps, ln_eps, activation, alpha,        \
       moments, y))

#define A2R_OPS_silu(K, a)                                                                      \
    K(a, void, a2r_silu, (const float *x, float *y, int64_t n), (x, y, n))

#define A2R_OPS_tanh(K, a)                                                                      \
    K(a, void, a2r_tanh,                                                                        \
      (const float *x, float *y, int64_t n, float in_scale, float out_scale, float out_shift),  \
      (x, y, n, in_scale, out_scale, out_shift))

#define A2R_OPS_gelu(K, a)                                                                      \
    K(a, void, a2r_gelu, (const float *x, float *y, int64_t n, int form), (x, y, n, form))

#define A2R_OPS_rows(K, a)                                                                      \
    K(a, void, a2r_softmax_rows, (const float *x, float *y, int64_t rows, int64_t n),           \
      (x, y, rows, n))                                                                          \
    K(a, void, a2r_layernorm_rows,                                                              \
      (const float *x, int64_t rows, int64_t n, const float *scale, const float *bias,           \
       float eps, float *y),                                                                    \
      (x, rows, n, scale, bias, eps, y))

#define A2R_OPS_pixel_shuffle(K, a)                                                             \
    K(a, void, a2r_pixel_shuffle,                                                               \
      (const float *x, int64_t n, int64_t c, int64_t h, int64_t w, int64_t r, int64_t top,       \
       int64_t left, int64_t oh, int64_t ow, float *y),                                         \
      (x, n, c, h, w, r, top, left, oh, ow, y))                                                 \
    K(a, void, a2r_pixel_shuffle_u8,                                                            \
      (const uint8_t *x, int64_t n, int64_t c, int64_t h, int64_t w, int64_t r, int64_t top,     \
       int64_t left, int64_t oh, int64_t ow, uint8_t *y),                                       \
      (x, n, c, h, w, r, top, left, oh, ow, y))

#define A2R_OPS_transpose(K, a)                                                                 \
    K(a, void, a2r_transpose,                                                                   \
      (const float *x, int64_t batch, int64_t rows, int64_t cols, float *y),                     \
      (x, batch, rows, cols, y))

#define A2R_OPS_im2col(K, a)                                                                    \
    K(a, void, a2r_im2col,                                                                      \
      (const float *x, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw,                  \
       int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h,          \
       int64_t dil_w, float *out),                                                              \
      (x, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, out))

#define A2R_OPS_conv2d(K, a)                                                                    \
    K(a, int64_t, a2r_conv2d_packed_size, (const a2r_conv2d_shape *s), (s))                     \
    K(a, void, a2r_conv2d_pack, (const a2r_conv2d_shape *s, const float *w, float *packed),     \
      (s, w, packed))                                                                           \
    K(a, int64_t, a2r_conv2d_workspace_size, (const a2r_conv2d_shape *s), (s))                  \
    K(a, void, a2r_conv2d,                                                                      \
      (const a2r_conv2d_shape *s, const float *x, const float *packed, const float *bias,        \
       const float *residual, int activation, float alpha, float *workspace,                    \
       int64_t workspace_floats, float *y),                                                     \
      (s, x, packed, bias, residual, activation, alpha, workspace, workspace_floats, y))

#define A2R_OPS_conv2d_lowp(K, a)                                                               \
    K(a, int64_t, a2r_conv2d_lowp_packed_size, (const a2r_conv2d_shape *s, int precision),      \
      (s, precision))                                                                           \
    K(a, void, a2r_conv2d_lowp_pack,                                                            \
      (const a2r_conv2d_shape *s, int precision, const float *w, void *packed),                 \
      (s, precision, w, packed))                                                                \
    K(a, int64_t, a2r_conv2d_lowp_workspace_size, (const a2r_conv2d_shape *s, int precision),   \
      (s, precision))                                                                           \
    K(a, void, a2r_conv2d_lowp,                                                                 \
      (const a2r_conv2d_shape *s, int precision, const void *x, int x_u8, const void *packed,   \
       const float x_range[2], const float *bias, const float *residual, int activation,        \
       float alpha, void *workspace, int64_t workspace_bytes, void *y, const float *y_range),   \
      (s, precision, x, x_u8, packed, x_range, bias, residual, activation, alpha, workspace,    \
       workspace_bytes, y, y_range))                                                            \
    K(a, int, a2r_conv2d_lowp_u8_levels, (void), ())                                           \
    K(a, int, a2r_conv2d_lowp_takes_u8, (const a2r_conv2d_shape *s, int precision),             \
      (s, precision))                                                                           \
    K(a, double, a2r_lowp_peak, (int precision, int64_t iters, float *sink),                    \
      (precision, iters, sink))

#define A2R_OPS_roofline(K, a)                                                                  \
    K(a, double, a2r_fma_peak, (int64_t iters, float *sink), (iters, sink))

#define A2R_OPS_guided_filter(K, a)                                                             \
    K(a, int, a2r_guided_filter,                                                                \
      (const float *guide, int64_t gc, const float *src, int64_t sc, int64_t h, int64_t w,       \
       int64_t r, float eps, float detail, float *out),                                         \
      (guide, gc, src, sc, h, w, r, eps, detail, out))

#define A2R_OPS_resize(K, a)                                                                    \
    K(a, void, a2r_resize,                                                                      \
      (const float *x, int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t ky,     \
       const int64_t *iy, const float *wy, int64_t kx, const int64_t *ix, const float *wx,       \
       float *rows, float *y),                                                                  \
      (x, nc, h, w, oh, ow, ky, iy, wy, kx, ix, wx, rows, y))

#define A2R_OPS_maxpool(K, a)                                                                   \
    K(a, void, a2r_maxpool,                                                                     \
      (const float *x, int64_t nc, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh,     \
       int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t oh, int64_t ow,       \
       float *y),                                                                               \
      (x, nc, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, y))                                \
    K(a, void, a2r_avgpool,                                                                     \
      (const float *x, int64_t nc, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh,     \
       int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t oh, int64_t ow,       \
       const float *count, float *y),                                                           \
      (x, nc, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, count, y))

#define A2R_OPS_pad2d(K, a)                                                                     \
    K(a, void, a2r_pad2d,                                                                       \
      (const float *x, int64_t nc, int64_t h, int64_t w, int64_t top, int64_t bottom,            \
       int64_t left, int64_t right, int mode, float value, float *y),                           \
      (x, nc, h, w, top, bottom, left, right, mode, value, y))                                  \
    K(a, void, a2r_crop_add,                                                                    \
      (const float *x, int64_t nc, int64_t xh, int64_t xw, int64_t top, int64_t left,            \
       const float *b, int64_t h, int64_t w, float *y),                                         \
      (x, nc, xh, xw, top, left, b, h, w, y))

/* One line per folder under src/ that holds a kernel.c (setup.py checks the two agree). */
#define A2R_KERNEL_LIST(K, a)                                                                   \
    A2R_OPS_preprocess(K, a)                                                                    \
    A2R_OPS_postprocess(K, a)                                                                   \
    A2R_OPS_channel_stats(K, a)                                                                 \
    A2R_OPS_adain(K, a)                                                                         \
    A2R_OPS_adalin(K, a)                                                                        \
    A2R_OPS_silu(K, a)                                                                          \
    A2R_OPS_tanh(K, a)                                                                          \
    A2R_OPS_gelu(K, a)                                                                          \
    A2R_OPS_rows(K, a)                                                                          \
    A2R_OPS_pixel_shuffle(K, a)                                                                 \
    A2R_OPS_transpose(K, a)                                                                     \
    A2R_OPS_im2col(K, a)                                                                        \
    A2R_OPS_conv2d(K, a)                                                                        \
    A2R_OPS_conv2d_lowp(K, a)                                                                   \
    A2R_OPS_roofline(K, a)                                                                      \
    A2R_OPS_guided_filter(K, a)                                                                 \
    A2R_OPS_resize(K, a)                                                                        \
    A2R_OPS_maxpool(K, a)                                                                       \
    A2R_OPS_pad2d(K, a)

#define A2R_CAT_(a, b) a##_##b
#define A2R_CAT(a, b) A2R_CAT_(a, b)

/* Declares every variant of one kernel at one level: ret name_<level> params; */
#define A2R_DECLARE_VARIANT(level, ret, name, params, args) ret A2R_CAT(name, level) params;
#define A2R_DECLARE_LEVEL(unused, level, id) A2R_KERNEL_LIST(A2R_DECLARE_VARIANT, level)

#endif
