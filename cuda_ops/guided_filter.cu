/* guided_filter (He et al.), same numerics as the CPU op (cpu_ops/src/guided_filter/kernel.c) and
 * cv2.ximgproc.guidedFilter; contract: a2r_cuda.h. Four kernels, each streaming its planes once:
 *   1. gf_cols_quantities: column window sums of the quantities I_c, I_c*I_d (c <= d), p_s,
 *      I_c*p_s (s major; products in float, made on the fly from guide and src): k1 planes;
 *   2. gf_rows_coefficients: row window sums of those, then per pixel the coefficients a, b
 *      (float algebra as the CPU op; colour guide: cofactor inverse of Sigma + eps I with OpenCV's
 *      determinant guard): k2 = sc*(gc+1) planes;
 *   3. gf_box_cols on the k2 planes;
 *   4. gf_rows_output: their row window sums, q = (sum_a . I + sum_b) / (2r+1)^2, written HWC.
 * Every box sum is taken in double and rounded to float after the column pass and again after the
 * row pass (the float products and the float algebra are the CPU op's). Columns: one thread per
 * (column, strip of kStrip rows), a running sum started by a direct window sum at the strip's top
 * (the old kernels' one thread per column walked all rows). Rows: a block per tile of
 * kRowTile outputs of one row; the window at the tile's start is summed by the whole block, the
 * others follow from a block-wide scan of d(x) = v[x + r + 1] - v[x - r]. Both work at any r:
 * borders reflect "cba|abc" with period 2n (OpenCV BORDER_REFLECT), wrapping as often as needed.
 * Workspace: two buffers of k1 planes of h*w floats (1: A, 2: B, 3: A, 4 reads A). */
#include "a2r_cuda_internal.cuh"

namespace a2r {

/* OpenCV ximgproc's colour-guide guard (guided_filter.cpp): with eps < 1e-2, a determinant below
 * 1e-6 in magnitude is replaced by 1. Kept to match cv2 and the CPU op. */
#define GF_GUARD_EPS 1e-2f
#define GF_GUARD_DET 1e-6f

constexpr int64_t kStrip = 32;  /* rows per column-pass thread (start-up: one window of 2r+1) */
constexpr int kColLoads = 8;    /* rows whose loads a column-pass thread issues together */
constexpr int kRowThreads = 128;
constexpr int kRowWarps = kRowThreads / 32;
constexpr int kRowPer = 4;      /* consecutive outputs per row-pass thread */
constexpr int64_t kRowTile = kRowThreads * kRowPer;

__device__ __forceinline__ int64_t gf_reflect(int64_t p, int64_t n) {
    if (p >= 0 && p < n) return p;
    if (n == 1) return 0;
    const int64_t period = 2 * n;
    p %= period;
    if (p < 0) p += period;
    return p < n ? p : period - 1 - p;
}

/* The quantities of pixel i: the guide part (PART_GUIDE: I_c, then I_c*I_d for c <= d in the order
 * (0,0) (0,1) (0,2) (1,1) (1,2) (2,2)) or src channel s's part (p_s, then p_s*I_c). */
template <int GC, bool PART_GUIDE, int NQ>
__device__ __forceinline__ void gf_quantities(const float *__restrict__ guide,
                                              const float *__restrict__ src, int64_t sc,
                                              int64_t s, int64_t i, float q[NQ]) {
    float I[GC];
#pragma unroll
    for (int c = 0; c < GC; c++) I[c] = guide[i * GC + c];
    if constexpr (PART_GUIDE) {
        int k = 0;
#pragma unroll
        for (int c = 0; c < GC; c++) q[k++] = I[c];
#pragma unroll
        for (int c = 0; c < GC; c++)
#pragma unroll
            for (int d = c; d < GC; d++) q[k++] = I[c] * I[d];
    } else {
        const float p = src[i * sc + s];
        q[0] = p;
#pragma unroll
        for (int c = 0; c < GC; c++) q[1 + c] = p * I[c];
    }
}

/* Column window sums of one part's NQ quantity planes for rows [y0, y1) of column x: a direct
 * window sum at y0, then a running sum (each step adds the float terms' difference in double).
 * plane[m]: where quantity m's plane starts. */
template <int GC, bool PART_GUIDE, int NQ>
__device__ __forceinline__ void gf_cols_part(const float *__restrict__ guide,
                                             const float *__restrict__ src, int64_t sc,
                                             int64_t s, int64_t h, int64_t w, int64_t r,
                                             int64_t x, int64_t y0, int64_t y1,
                                             float *const plane[NQ]) {
    double acc[NQ];
    float qa[NQ], qs[NQ];
#pragma unroll
    for (int m = 0; m < NQ; m++) acc[m] = 0.0;
    for (int64_t k = -r; k <= r; k++) {
        gf_quantities<GC, PART_GUIDE, NQ>(guide, src, sc, s, gf_reflect(y0 + k, h) * w + x, qa);
#pragma unroll
        for (int m = 0; m < NQ; m++) acc[m] += (double)qa[m];
    }
    for (int64_t y = y0; y < y1; y++) {
#pragma unroll
        for (int m = 0; m < NQ; m++) plane[m][y * w + x] = (float)acc[m];
        if (y + 1 >= y1) break;
        gf_quantities<GC, PART_GUIDE, NQ>(guide, src, sc, s, gf_reflect(y + r + 1, h) * w + x, qa);
        gf_quantities<GC, PART_GUIDE, NQ>(guide, src, sc, s, gf_reflect(y - r, h) * w + x, qs);
#pragma unroll
        for (int m = 0; m < NQ; m++) acc[m] += (double)qa[m] - (double)qs[m];
    }
}

/* Pass 1: column window sums of the k1 quantity planes (layout: the NG guide planes, p_s for each
 * s, then p_s*I_c s major). One thread per (column, strip, part): part 0 is the guide's planes,
 * part 1 + s src channel s's; each thread loads its pixels once per row for all of its planes
 * (a thread per plane would read the guide once per plane). Grid: x over columns, y over (strip,
 * part) jobs, strip-major so that the parts of a strip run together (shared reads in cache). */
template <int GC>
__global__ void gf_cols_quantities(const float *__restrict__ guide, const float *__restrict__ src,
                                   int64_t sc, int64_t h, int64_t w, int64_t r,
                                   float *__restrict__ out) {
    constexpr int NG = GC + GC * (GC + 1) / 2;
    const int64_t hw = h * w, strips = (h + kStrip - 1) / kStrip, parts = 1 + sc;
    for (int64_t job = blockIdx.y; job < strips * parts; job += gridDim.y) {
        const int64_t strip = job / parts, part = job - strip * parts;
        const int64_t y0 = strip * kStrip, y1 = y0 + kStrip < h ? y0 + kStrip : h;
        for (int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; x < w;
             x += (int64_t)gridDim.x * blockDim.x) {
            if (part == 0) {
                float *plane[NG];
#pragma unroll
                for (int m = 0; m < NG; m++) plane[m] = out + m * hw;
                gf_cols_part<GC, true, NG>(guide, src, sc, 0, h, w, r, x, y0, y1, plane);
            } else {
                const int64_t s = part - 1;
                float *plane[GC + 1];
                plane[0] = out + (NG + s) * hw;
#pragma unroll
                for (int c = 0; c < GC; c++) plane[1 + c] = out + (NG + sc + s * GC + c) * hw;
                gf_cols_part<GC, false, GC + 1>(guide, src, sc, s, h, w, r, x, y0, y1, plane);
            }
        }
    }
}

/* Pass 3: out[pl][y][x] = sum_{|k| <= r} in[pl][reflect(y + k)][x] for np planes packed at stride
 * h*w. Grid: x over columns, y over (strip, plane) jobs. */
__global__ void gf_box_cols(const float *__restrict__ in, int64_t np, int64_t h, int64_t w,
                            int64_t r, float *__restrict__ out) {
    const int64_t hw = h * w, strips = (h + kStrip - 1) / kStrip;
    for (int64_t job = blockIdx.y; job < strips * np; job += gridDim.y) {
        const int64_t strip = job / np, pl = job - strip * np;
        const int64_t y0 = strip * kStrip, y1 = y0 + kStrip < h ? y0 + kStrip : h;
        const float *col = in + pl * hw;
        float *o = out + pl * hw;
        for (int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; x < w;
             x += (int64_t)gridDim.x * blockDim.x) {
            double s = 0.0;
            for (int64_t k = -r; k <= r; k++) s += (double)col[gf_reflect(y0 + k, h) * w + x];
            for (int64_t yb = y0; yb < y1; yb += kColLoads) {
                float add[kColLoads], sub[kColLoads]; /* the loads first: several in flight */
#pragma unroll
                for (int u = 0; u < kColLoads; u++) {
                    const int64_t y = yb + u;
                    add[u] = sub[u] = 0.0f;
                    if (y + 1 < y1) {
                        add[u] = col[gf_reflect(y + r + 1, h) * w + x];
                        sub[u] = col[gf_reflect(y - r, h) * w + x];
                    }
                }
#pragma unroll
                for (int u = 0; u < kColLoads; u++) {
                    if (yb + u >= y1) break;
                    o[(yb + u) * w + x] = (float)s;
                    s += (double)add[u] - (double)sub[u];
                }
            }
        }
    }
}

/* Row window sums of NP rows (w floats each) for this thread's outputs x = x0 + kRowPer*t + j
 * (j < kRowPer): out[n][j] = sum_{|k| <= r} rows[n][reflect(x + k)], summed in double, rounded
 * once. The window at x0 is summed by the whole block, then each output adds the differences
 * d(x) = v[x + r + 1] - v[x - r] of the outputs before it (an exclusive scan over the block). The
 * NP rows go together: all their loads are in flight at once, one pair of barriers for all. Every
 * thread of the block must call it; red: 2*NP*kRowWarps doubles of shared scratch. */
template <int NP>
__device__ __forceinline__ void gf_row_sums(const float *const rows[NP], int64_t w, int64_t x0,
                                            int64_t r, double *red, float out[NP][kRowPer]) {
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    double win[NP], d[NP][kRowPer], incl[NP];
#pragma unroll
    for (int n = 0; n < NP; n++) win[n] = 0.0;
    for (int64_t k = t; k <= 2 * r; k += kRowThreads) {
        const int64_t xk = gf_reflect(x0 - r + k, w);
#pragma unroll
        for (int n = 0; n < NP; n++) win[n] += (double)rows[n][xk];
    }
#pragma unroll
    for (int j = 0; j < kRowPer; j++) {
        const int64_t x = x0 + (int64_t)t * kRowPer + j;
        if (x < w) {
            const int64_t xa = gf_reflect(x + r + 1, w), xs = gf_reflect(x - r, w);
#pragma unroll
            for (int n = 0; n < NP; n++) d[n][j] = (double)rows[n][xa] - (double)rows[n][xs];
        } else { /* past the row's end: no later output of the row needs it */
#pragma unroll
            for (int n = 0; n < NP; n++) d[n][j] = 0.0;
        }
    }
#pragma unroll
    for (int n = 0; n < NP; n++) {
        incl[n] = 0.0;
#pragma unroll
        for (int j = 0; j < kRowPer; j++) incl[n] += d[n][j];
    }
    /* warp: total of the window parts (butterfly), inclusive scan of the thread sums */
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
#pragma unroll
        for (int n = 0; n < NP; n++) {
            win[n] += __shfl_xor_sync(0xffffffffu, win[n], o);
            const double u = __shfl_up_sync(0xffffffffu, incl[n], o);
            if (lane >= o) incl[n] += u;
        }
    }
    double excl[NP];
#pragma unroll
    for (int n = 0; n < NP; n++) {
        excl[n] = __shfl_up_sync(0xffffffffu, incl[n], 1);
        if (lane == 0) excl[n] = 0.0;
        if (lane == 31) red[n * kRowWarps + warp] = incl[n];
        if (lane == 0) red[(NP + n) * kRowWarps + warp] = win[n];
    }
    __syncthreads();
#pragma unroll
    for (int n = 0; n < NP; n++) {
        double s = 0.0;
        for (int k = 0; k < kRowWarps; k++) {
            s += red[(NP + n) * kRowWarps + k];
            if (k < warp) excl[n] += red[n * kRowWarps + k];
        }
        s += excl[n];
#pragma unroll
        for (int j = 0; j < kRowPer; j++) {
            out[n][j] = (float)s;
            s += d[n][j];
        }
    }
    __syncthreads(); /* red is rewritten by the next call */
}

/* Rows of the k1 column sums S, then the coefficients: gray ab[s] = a, ab[sc + s] = b; colour
 * ab[3s + c] = a_c, ab[3sc + s] = b. Grid: one (row, tile) job per block, grid-stride. */
template <int GC>
__global__ void __launch_bounds__(kRowThreads)
gf_rows_coefficients(const float *__restrict__ S, int64_t sc, int64_t h, int64_t w, int64_t r,
                     float ia, float eps, float *__restrict__ ab) {
    constexpr int NG = GC + GC * (GC + 1) / 2; /* planes of the guide alone: I_c, I_c*I_d */
    constexpr int NGG = GC == 1 ? 2 : 3;       /* guide planes per gf_row_sums call */
    __shared__ double red[2 * (GC + 1) * kRowWarps];
    /* The guide planes' sums wait in shared memory while the src planes come (registers would
     * cut the colour kernel's occupancy to 3 blocks); each thread touches only its own column. */
    __shared__ float gs[NG][kRowPer][kRowThreads];
    const int t = threadIdx.x;
    const int64_t hw = h * w, tiles = (w + kRowTile - 1) / kRowTile;
    for (int64_t job = blockIdx.x; job < h * tiles; job += gridDim.x) {
        const int64_t y = job / tiles, x0 = (job - y * tiles) * kRowTile, row = y * w;
        for (int k0 = 0; k0 < NG; k0 += NGG) {
            const float *rows[NGG];
            float v[NGG][kRowPer];
#pragma unroll
            for (int n = 0; n < NGG; n++) rows[n] = S + (k0 + n) * hw + row;
            gf_row_sums<NGG>(rows, w, x0, r, red, v);
#pragma unroll
            for (int n = 0; n < NGG; n++)
#pragma unroll
                for (int j = 0; j < kRowPer; j++) gs[k0 + n][j][t] = v[n][j];
        }
        for (int64_t s = 0; s < sc; s++) {
            const float *rows[GC + 1]; /* p_s, then I_c*p_s */
            float v[GC + 1][kRowPer];
            rows[0] = S + (NG + s) * hw + row;
#pragma unroll
            for (int c = 0; c < GC; c++) rows[1 + c] = S + (NG + sc + s * GC + c) * hw + row;
            gf_row_sums<GC + 1>(rows, w, x0, r, red, v);
            const float(&p)[kRowPer] = v[0];
            const float(*ip)[kRowPer] = v + 1;
#pragma unroll
            for (int j = 0; j < kRowPer; j++) {
                const int64_t x = x0 + (int64_t)t * kRowPer + j;
                if (x >= w) break;
                const int64_t i = row + x;
                const float mp = p[j] * ia;
                float g[NG];
#pragma unroll
                for (int k = 0; k < NG; k++) g[k] = gs[k][j][t];
                if constexpr (GC == 1) {
                    const float mI = g[0] * ia;
                    const float var = g[1] * ia - mI * mI;
                    const float cov = ip[0][j] * ia - mI * mp;
                    const float a = cov / (var + eps);
                    ab[s * hw + i] = a;
                    ab[(sc + s) * hw + i] = mp - a * mI;
                } else {
                    const float m0 = g[0] * ia, m1 = g[1] * ia, m2 = g[2] * ia;
                    const float s00 = g[3] * ia - m0 * m0 + eps, s01 = g[4] * ia - m0 * m1,
                                s02 = g[5] * ia - m0 * m2, s11 = g[6] * ia - m1 * m1 + eps,
                                s12 = g[7] * ia - m1 * m2, s22 = g[8] * ia - m2 * m2 + eps;
                    const float c00 = s11 * s22 - s12 * s12, c01 = s12 * s02 - s22 * s01,
                                c02 = s01 * s12 - s02 * s11, c11 = s22 * s00 - s02 * s02,
                                c12 = s02 * s01 - s00 * s12, c22 = s00 * s11 - s01 * s01;
                    float det = s00 * c00 + s01 * c01 + s02 * c02;
                    if (eps < GF_GUARD_EPS && fabsf(det) < GF_GUARD_DET) det = 1.0f;
                    const float id = 1.0f / det;
                    const float i00 = c00 * id, i01 = c01 * id, i02 = c02 * id, i11 = c11 * id,
                                i12 = c12 * id, i22 = c22 * id;
                    const float v0 = ip[0][j] * ia - m0 * mp, v1 = ip[1][j] * ia - m1 * mp,
                                v2 = ip[2][j] * ia - m2 * mp;
                    const float x0c = i00 * v0 + i01 * v1 + i02 * v2;
                    const float x1c = i01 * v0 + i11 * v1 + i12 * v2;
                    const float x2c = i02 * v0 + i12 * v1 + i22 * v2;
                    ab[(3 * s) * hw + i] = x0c;
                    ab[(3 * s + 1) * hw + i] = x1c;
                    ab[(3 * s + 2) * hw + i] = x2c;
                    ab[(3 * sc + s) * hw + i] = mp - x0c * m0 - x1c * m1 - x2c * m2;
                }
            }
        }
    }
}

/* Rows of the k2 column sums S (layout of gf_rows_coefficients' ab), then the output. */
template <int GC>
__global__ void __launch_bounds__(kRowThreads)
gf_rows_output(const float *__restrict__ guide, const float *__restrict__ S, int64_t sc,
               int64_t h, int64_t w, int64_t r, float ia, float *__restrict__ out) {
    __shared__ double red[2 * (GC + 1) * kRowWarps];
    const int64_t hw = h * w, tiles = (w + kRowTile - 1) / kRowTile;
    for (int64_t job = blockIdx.x; job < h * tiles; job += gridDim.x) {
        const int64_t y = job / tiles, x0 = (job - y * tiles) * kRowTile, row = y * w;
        for (int64_t s = 0; s < sc; s++) {
            const float *rows[GC + 1]; /* a_c, then b */
            float v[GC + 1][kRowPer];
#pragma unroll
            for (int c = 0; c < GC; c++) rows[c] = S + (GC * s + c) * hw + row;
            rows[GC] = S + (GC * sc + s) * hw + row;
            gf_row_sums<GC + 1>(rows, w, x0, r, red, v);
            const float(*a)[kRowPer] = v;
            const float(&b)[kRowPer] = v[GC];
#pragma unroll
            for (int j = 0; j < kRowPer; j++) {
                const int64_t x = x0 + (int64_t)threadIdx.x * kRowPer + j;
                if (x >= w) break;
                const int64_t i = row + x;
                float q;
                if constexpr (GC == 1) {
                    q = (a[0][j] * guide[i] + b[j]) * ia;
                } else {
                    const float *gp = guide + 3 * i;
                    q = ((a[0][j] * gp[0] + a[1][j] * gp[1]) + (a[2][j] * gp[2] + b[j])) * ia;
                }
                out[i * sc + s] = q;
            }
        }
    }
}

static int64_t gf_k1(int64_t gc, int64_t sc) { return gc + gc * (gc + 1) / 2 + sc + sc * gc; }

int64_t guided_filter_workspace_bytes(int64_t gc, int64_t sc, int64_t h, int64_t w) {
    return 2 * gf_k1(gc, sc) * h * w * (int64_t)sizeof(float);
}

/* A grid dimension for n jobs (grid-stride beyond kMaxBlocks). */
static unsigned gf_capped(int64_t n) {
    return (unsigned)(n < kMaxBlocks ? (n < 1 ? 1 : n) : kMaxBlocks);
}

cudaError_t launch_guided_filter(const float *guide, int64_t gc, const float *src, int64_t sc,
                                 int64_t h, int64_t w, int64_t r, float eps, float *out, void *ws,
                                 cudaStream_t s) {
    const int64_t hw = h * w, k1 = gf_k1(gc, sc), k2 = sc * (gc + 1);
    float *A = (float *)ws, *B = A + k1 * hw; /* planes packed at stride hw inside each buffer */
    const float ia = (float)(1.0 / ((double)(2 * r + 1) * (double)(2 * r + 1)));
    const int64_t strips = (h + kStrip - 1) / kStrip;
    const unsigned rows = gf_capped(h * ((w + kRowTile - 1) / kRowTile));
    const dim3 cols1(grid_for(w), gf_capped(strips * (1 + sc)));
    if (gc == 1) gf_cols_quantities<1><<<cols1, kThreads, 0, s>>>(guide, src, sc, h, w, r, A);
    else gf_cols_quantities<3><<<cols1, kThreads, 0, s>>>(guide, src, sc, h, w, r, A);
    A2R_LAUNCHED();
    if (gc == 1) gf_rows_coefficients<1><<<rows, kRowThreads, 0, s>>>(A, sc, h, w, r, ia, eps, B);
    else gf_rows_coefficients<3><<<rows, kRowThreads, 0, s>>>(A, sc, h, w, r, ia, eps, B);
    A2R_LAUNCHED();
    gf_box_cols<<<dim3(grid_for(w), gf_capped(strips * k2)), kThreads, 0, s>>>(B, k2, h, w, r, A);
    A2R_LAUNCHED();
    if (gc == 1) gf_rows_output<1><<<rows, kRowThreads, 0, s>>>(guide, A, sc, h, w, r, ia, out);
    else gf_rows_output<3><<<rows, kRowThreads, 0, s>>>(guide, A, sc, h, w, r, ia, out);
    A2R_LAUNCHED();
    return cudaSuccess;
}

}  // namespace a2r
