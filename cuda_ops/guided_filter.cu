/* guided_filter (He et al.), same numerics as the CPU op (cpu_ops/src/guided_filter/kernel.c) and
 * cv2.ximgproc.guidedFilter; contract: a2r_cuda.h. Straightforward plane-at-a-time passes:
 *   1. quantities: k1 planes I_c, I_c*I_d (c <= d), p_s, I_c*p_s (s major), products in float;
 *   2. box sums of the k1 planes: columns (one thread per column, running sum in double: exact for
 *      float terms, no drift) then rows (one thread per pixel, direct window sum in double);
 *   3. coefficients a, b per pixel (float algebra as the CPU op; colour guide: cofactor inverse
 *      of Sigma + eps I with OpenCV's determinant guard): k2 = sc*(gc+1) planes;
 *   4. box sums of the k2 planes; 5. q = (sum_a . I + sum_b) / (2r+1)^2, written HWC.
 * Borders reflect "cba|abc" with period 2n at any r (OpenCV BORDER_REFLECT). Row windows cost
 * O(r) per pixel (fine for the usual r <= 16; correct, if slow, for any r).
 * Workspace: two buffers of k1 planes of h*w floats (ping-pong). */
#include "a2r_cuda_internal.cuh"

namespace a2r {

/* OpenCV ximgproc's colour-guide guard (guided_filter.cpp): with eps < 1e-2, a determinant below
 * 1e-6 in magnitude is replaced by 1. Kept to match cv2 and the CPU op. */
#define GF_GUARD_EPS 1e-2f
#define GF_GUARD_DET 1e-6f

__device__ __forceinline__ int64_t gf_reflect(int64_t p, int64_t n) {
    if (p >= 0 && p < n) return p;
    if (n == 1) return 0;
    const int64_t period = 2 * n;
    p %= period;
    if (p < 0) p += period;
    return p < n ? p : period - 1 - p;
}

__global__ void gf_quantities(const float *__restrict__ guide, int gc,
                              const float *__restrict__ src, int64_t sc, int64_t hw,
                              float *__restrict__ q) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < hw;
         i += (int64_t)gridDim.x * blockDim.x) {
        float I[3];
        for (int c = 0; c < gc; c++) I[c] = guide[i * gc + c];
        int64_t k = 0;
        for (int c = 0; c < gc; c++) q[(k++) * hw + i] = I[c];
        for (int c = 0; c < gc; c++)
            for (int d = c; d < gc; d++) q[(k++) * hw + i] = I[c] * I[d];
        for (int64_t s = 0; s < sc; s++) q[(k++) * hw + i] = src[i * sc + s];
        for (int64_t s = 0; s < sc; s++) {
            const float p = src[i * sc + s];
            for (int c = 0; c < gc; c++) q[(k++) * hw + i] = p * I[c];
        }
    }
}

/* Column window sums: out[y][x] = sum_{|k| <= r} in[reflect(y + k)][x], per plane. */
__global__ void gf_box_cols(const float *__restrict__ in, int64_t planes, int64_t h, int64_t w,
                            int64_t r, float *__restrict__ out) {
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < planes * w;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t pl = t / w, x = t - pl * w;
        const float *col = in + pl * h * w + x;
        float *ocol = out + pl * h * w + x;
        double s = 0.0;
        for (int64_t k = -r; k <= r; k++) s += (double)col[gf_reflect(k, h) * w];
        for (int64_t y = 0; y < h; y++) {
            ocol[y * w] = (float)s;
            if (y + 1 < h)
                s += (double)col[gf_reflect(y + r + 1, h) * w] - (double)col[gf_reflect(y - r, h) * w];
        }
    }
}

/* Row window sums: out[y][x] = sum_{|k| <= r} in[y][reflect(x + k)]. */
__global__ void gf_box_rows(const float *__restrict__ in, int64_t rows, int64_t w, int64_t r,
                            float *__restrict__ out) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * w;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = i / w, x = i - row * w;
        const float *in_row = in + row * w;
        double s = 0.0;
        for (int64_t k = -r; k <= r; k++) s += (double)in_row[gf_reflect(x + k, w)];
        out[i] = (float)s;
    }
}

__global__ void gf_coefficients(const float *__restrict__ S, int gc, int64_t sc, int64_t hw,
                                float ia, float eps, float *__restrict__ ab) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < hw;
         i += (int64_t)gridDim.x * blockDim.x) {
        if (gc == 1) {
            const float mI = S[i] * ia;
            const float var = S[hw + i] * ia - mI * mI;
            for (int64_t k = 0; k < sc; k++) {
                const float mp = S[(2 + k) * hw + i] * ia;
                const float cov = S[(2 + sc + k) * hw + i] * ia - mI * mp;
                const float a = cov / (var + eps);
                ab[k * hw + i] = a;
                ab[(sc + k) * hw + i] = mp - a * mI;
            }
            continue;
        }
        const float m0 = S[i] * ia, m1 = S[hw + i] * ia, m2 = S[2 * hw + i] * ia;
        const float s00 = S[3 * hw + i] * ia - m0 * m0 + eps, s01 = S[4 * hw + i] * ia - m0 * m1,
                    s02 = S[5 * hw + i] * ia - m0 * m2, s11 = S[6 * hw + i] * ia - m1 * m1 + eps,
                    s12 = S[7 * hw + i] * ia - m1 * m2, s22 = S[8 * hw + i] * ia - m2 * m2 + eps;
        const float c00 = s11 * s22 - s12 * s12, c01 = s12 * s02 - s22 * s01,
                    c02 = s01 * s12 - s02 * s11, c11 = s22 * s00 - s02 * s02,
                    c12 = s02 * s01 - s00 * s12, c22 = s00 * s11 - s01 * s01;
        float det = s00 * c00 + s01 * c01 + s02 * c02;
        if (eps < GF_GUARD_EPS && fabsf(det) < GF_GUARD_DET) det = 1.0f;
        const float id = 1.0f / det;
        const float i00 = c00 * id, i01 = c01 * id, i02 = c02 * id, i11 = c11 * id,
                    i12 = c12 * id, i22 = c22 * id;
        for (int64_t k = 0; k < sc; k++) {
            const float mp = S[(9 + k) * hw + i] * ia;
            const int64_t o = (9 + sc + 3 * k) * hw + i;
            const float v0 = S[o] * ia - m0 * mp, v1 = S[o + hw] * ia - m1 * mp,
                        v2 = S[o + 2 * hw] * ia - m2 * mp;
            const float x0 = i00 * v0 + i01 * v1 + i02 * v2;
            const float x1 = i01 * v0 + i11 * v1 + i12 * v2;
            const float x2 = i02 * v0 + i12 * v1 + i22 * v2;
            ab[(3 * k) * hw + i] = x0;
            ab[(3 * k + 1) * hw + i] = x1;
            ab[(3 * k + 2) * hw + i] = x2;
            ab[(3 * sc + k) * hw + i] = mp - x0 * m0 - x1 * m1 - x2 * m2;
        }
    }
}

__global__ void gf_output(const float *__restrict__ guide, int gc, const float *__restrict__ S,
                          int64_t sc, int64_t hw, float ia, float *__restrict__ out) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < hw;
         i += (int64_t)gridDim.x * blockDim.x) {
        for (int64_t k = 0; k < sc; k++) {
            const float Sb = S[(gc * sc + k) * hw + i];
            float q;
            if (gc == 1) {
                q = (S[k * hw + i] * guide[i] + Sb) * ia;
            } else {
                const float *g = guide + 3 * i;
                const int64_t o = 3 * k * hw + i;
                q = ((S[o] * g[0] + S[o + hw] * g[1]) + (S[o + 2 * hw] * g[2] + Sb)) * ia;
            }
            out[i * sc + k] = q;
        }
    }
}

static int64_t gf_k1(int64_t gc, int64_t sc) { return gc + gc * (gc + 1) / 2 + sc + sc * gc; }

int64_t guided_filter_workspace_bytes(int64_t gc, int64_t sc, int64_t h, int64_t w) {
    return 2 * gf_k1(gc, sc) * h * w * (int64_t)sizeof(float);
}

/* Box sums of `planes` planes: in -> tmp (columns) -> out (rows). */
static cudaError_t gf_box(const float *in, float *tmp, float *out, int64_t planes, int64_t h,
                          int64_t w, int64_t r, cudaStream_t s) {
    gf_box_cols<<<grid_for(planes * w), kThreads, 0, s>>>(in, planes, h, w, r, tmp);
    A2R_LAUNCHED();
    gf_box_rows<<<grid_for(planes * h * w), kThreads, 0, s>>>(tmp, planes * h, w, r, out);
    A2R_LAUNCHED();
    return cudaSuccess;
}

cudaError_t launch_guided_filter(const float *guide, int64_t gc, const float *src, int64_t sc,
                                 int64_t h, int64_t w, int64_t r, float eps, float *out, void *ws,
                                 cudaStream_t s) {
    const int64_t hw = h * w, k1 = gf_k1(gc, sc), k2 = sc * (gc + 1);
    float *A = (float *)ws, *B = A + k1 * hw; /* planes packed at stride hw inside each buffer */
    const float ia = (float)(1.0 / ((double)(2 * r + 1) * (double)(2 * r + 1)));
    cudaError_t e;
    gf_quantities<<<grid_for(hw), kThreads, 0, s>>>(guide, (int)gc, src, sc, hw, A);
    A2R_LAUNCHED();
    if ((e = gf_box(A, B, A, k1, h, w, r, s)) != cudaSuccess) return e;  /* sums in A */
    gf_coefficients<<<grid_for(hw), kThreads, 0, s>>>(A, (int)gc, sc, hw, ia, eps, B);
    A2R_LAUNCHED();
    if ((e = gf_box(B, A, B, k2, h, w, r, s)) != cudaSuccess) return e;  /* sums in B */
    gf_output<<<grid_for(hw), kThreads, 0, s>>>(guide, (int)gc, B, sc, hw, ia, out);
    A2R_LAUNCHED();
    return cudaSuccess;
}

}  // namespace a2r
