#include "a2r_dispatch.h"

A2R_VARIANTS(void, a2r_preprocess, (const uint8_t *img, int64_t h, int64_t w,
                                    const float scale[3], const float bias[3], float *out))

void a2r_preprocess(const uint8_t *img, int64_t h, int64_t w, const float scale[3],
                    const float bias[3], float *out) {
    A2R_PICK(a2r_preprocess)(img, h, w, scale, bias, out);
}
