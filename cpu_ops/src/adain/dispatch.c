#include "a2r_dispatch.h"

A2R_VARIANTS(void, a2r_adain, (const float *x, int64_t nc, int64_t hw, const float *style_mean,
                               const float *style_std, const float *content_mean,
                               const float *content_std, float eps, int activation, float alpha,
                               float *y))

void a2r_adain(const float *x, int64_t nc, int64_t hw, const float *style_mean,
               const float *style_std, const float *content_mean, const float *content_std,
               float eps, int activation, float alpha, float *y) {
    A2R_PICK(a2r_adain)(x, nc, hw, style_mean, style_std, content_mean, content_std, eps,
                        activation, alpha, y);
}
