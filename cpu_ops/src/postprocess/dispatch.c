#include "a2r_dispatch.h"

A2R_VARIANTS(void, a2r_postprocess, (const float *x, int64_t h, int64_t w, const float mean[3],
                                     const float stdv[3], uint8_t *out))

void a2r_postprocess(const float *x, int64_t h, int64_t w, const float mean[3],
                     const float stdv[3], uint8_t *out) {
    A2R_PICK(a2r_postprocess)(x, h, w, mean, stdv, out);
}
