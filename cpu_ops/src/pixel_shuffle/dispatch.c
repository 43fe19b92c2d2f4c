#include "a2r_dispatch.h"

A2R_VARIANTS(void, a2r_pixel_shuffle, (const float *x, int64_t n, int64_t c, int64_t h, int64_t w,
                                       int64_t r, float *y))

void a2r_pixel_shuffle(const float *x, int64_t n, int64_t c, int64_t h, int64_t w, int64_t r,
                       float *y) {
    A2R_PICK(a2r_pixel_shuffle)(x, n, c, h, w, r, y);
}
