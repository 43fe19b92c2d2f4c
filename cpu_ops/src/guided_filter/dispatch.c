#include "a2r_dispatch.h"

A2R_VARIANTS(int, a2r_guided_filter, (const float *guide, int64_t gc, const float *src, int64_t sc,
                                      int64_t h, int64_t w, int64_t r, float eps, float detail,
                                      float *out))

int a2r_guided_filter(const float *guide, int64_t gc, const float *src, int64_t sc, int64_t h,
                      int64_t w, int64_t r, float eps, float detail, float *out) {
    return A2R_PICK(a2r_guided_filter)(guide, gc, src, sc, h, w, r, eps, detail, out);
}
