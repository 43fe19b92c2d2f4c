#include "a2r_dispatch.h"

A2R_VARIANTS(void, a2r_im2col, (const float *x, int64_t c, int64_t h, int64_t w, int64_t kh,
                                int64_t kw, int64_t stride_h, int64_t stride_w, int64_t pad_h,
                                int64_t pad_w, int64_t dil_h, int64_t dil_w, float *out))

void a2r_im2col(const float *x, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw,
                int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h,
                int64_t dil_w, float *out) {
    A2R_PICK(a2r_im2col)(x, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, out);
}
