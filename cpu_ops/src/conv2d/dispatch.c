#include "a2r_dispatch.h"

A2R_VARIANTS(int64_t, a2r_conv2d_packed_size, (const a2r_conv2d_shape *s))
A2R_VARIANTS(void, a2r_conv2d_pack, (const a2r_conv2d_shape *s, const float *w, float *packed))
A2R_VARIANTS(int64_t, a2r_conv2d_workspace_size, (const a2r_conv2d_shape *s))
A2R_VARIANTS(void, a2r_conv2d, (const a2r_conv2d_shape *s, const float *x, const float *packed,
                                const float *bias, const float *residual, int activation,
                                float alpha, float *workspace, int64_t workspace_floats, float *y))

int64_t a2r_conv2d_packed_size(const a2r_conv2d_shape *s) {
    return A2R_PICK(a2r_conv2d_packed_size)(s);
}

void a2r_conv2d_pack(const a2r_conv2d_shape *s, const float *w, float *packed) {
    A2R_PICK(a2r_conv2d_pack)(s, w, packed);
}

int64_t a2r_conv2d_workspace_size(const a2r_conv2d_shape *s) {
    return A2R_PICK(a2r_conv2d_workspace_size)(s);
}

void a2r_conv2d(const a2r_conv2d_shape *s, const float *x, const float *packed, const float *bias,
                const float *residual, int activation, float alpha, float *workspace,
                int64_t workspace_floats, float *y) {
    A2R_PICK(a2r_conv2d)(s, x, packed, bias, residual, activation, alpha, workspace,
                         workspace_floats, y);
}

int a2r_conv2d_algo = A2R_CONV2D_AUTO;

int a2r_conv2d_set_algo(int algo) {
    const int old = a2r_conv2d_algo;
    a2r_conv2d_algo = algo;
    return old;
}
