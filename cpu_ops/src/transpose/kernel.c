/* transpose kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * y[b, j, i] = x[b, i, j] on 4-byte elements, in tiles of 64 x 64 and, inside a tile, blocks
 * of 8 x 8 made of four 4 x 4 ones transposed in registers (block4). A tile's blocks go down
 * its rows for each 8 columns, so the 8 y rows of a column step get 256 contiguous bytes each
 * within the tile (4 x 4 blocks stepped one by one were 1.2x slower). Tried in a scratch loop
 * and not kept: strips of 8, 16 or 32 rows across the whole width, tiles of 16 x 256 and
 * 32 x 128, the x rows' next tile prefetched, the blocks row-major when x's rows are the longer:
 * alike or slower. Matrices with fewer than 8 rows or columns take a plain loop (thin): no block fits.
 * Speed against numpy, onnxruntime and OpenCV: benchmarks/bench_transpose.py. */
#include <string.h>

#include "a2r_isa.h"

#define TILE 64

typedef float tr_v4 __attribute__((vector_size(16)));
typedef int tr_i4 __attribute__((vector_size(16)));

/* A two-input shuffle: indices 0..3 pick a's elements, 4..7 b's; the two rounds below are
 * single instructions at every level (unpcklps/unpckhps and movlhps/movhlps at x86, zip1/zip2
 * at NEON). */
#define SHUF4(a, b, ...) __builtin_shuffle(a, b, (tr_i4){__VA_ARGS__})

/* y rows (stride ys) <- x columns of a 4 x 4 block (x rows stride xs). 128-bit at every level:
 * one 8 x 8 block on 256-bit shuffles (unpck, shufps, vperm2f128) at AVX2 and AVX-512 was
 * slower than four of these (the (64, 65536) matrix and back, 1 thread: 2.4-3.3 ms against
 * 2.0-2.8 ms). */
static inline void block4(const float *restrict x, int64_t xs, float *restrict y, int64_t ys) {
    tr_v4 v[4], t[4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) memcpy(&v[r], x + r * xs, sizeof v[r]);
    _Pragma("GCC unroll 2") for (int r = 0; r < 4; r += 2) { /* pairs of rows interleaved */
        t[r] = SHUF4(v[r], v[r + 1], 0, 4, 1, 5);
        t[r + 1] = SHUF4(v[r], v[r + 1], 2, 6, 3, 7);
    }
    _Pragma("GCC unroll 2") for (int k = 0; k < 2; k++) { /* then their 64-bit halves */
        v[2 * k] = SHUF4(t[k], t[k + 2], 0, 1, 4, 5);
        v[2 * k + 1] = SHUF4(t[k], t[k + 2], 2, 3, 6, 7);
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) memcpy(y + r * ys, &v[r], sizeof v[r]);
}

/* An 8 x 8 block as four 4 x 4 ones. */
static inline void block8(const float *restrict x, int64_t xs, float *restrict y, int64_t ys) {
    block4(x, xs, y, ys);
    block4(x + 4 * xs, xs, y + 4, ys);
    block4(x + 4, xs, y + 4 * ys, ys);
    block4(x + 4 * xs + 4, xs, y + 4 * ys + 4, ys);
}

/* Tile rows [i0, i1) x columns [j0, j1) of one (rows, cols) matrix into y (cols, rows). */
static void tile(const float *restrict x, int64_t rows, int64_t cols, int64_t i0, int64_t i1,
                 int64_t j0, int64_t j1, float *restrict y) {
    const int64_t ib = i0 + (i1 - i0) / 8 * 8, jb = j0 + (j1 - j0) / 8 * 8;
    for (int64_t j = j0; j < jb; j += 8)
        for (int64_t i = i0; i < ib; i += 8) block8(x + i * cols + j, cols, y + j * rows + i, rows);
    for (int64_t j = j0; j < j1; j++) /* the edges */
        for (int64_t i = j < jb ? ib : i0; i < i1; i++) y[j * rows + i] = x[i * cols + j];
}

/* A thin matrix (rows or cols below 8): the long side in order, the short side's few rows as
 * that many strided streams (a picture's 3 planes into interleaved pixels: y written in order,
 * x read from its 3 rows). Split between threads along the long side. */
static void thin(const float *restrict x, int64_t rows, int64_t cols, float *restrict y) {
    const int par = rows * cols > 4 * A2R_PAR_GRAIN;
    if (rows <= cols) {
        #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (par)
        for (int64_t j = 0; j < cols; j++)
            for (int64_t i = 0; i < rows; i++) y[j * rows + i] = x[i * cols + j];
    } else {
        #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (par)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) y[j * rows + i] = x[i * cols + j];
    }
}

void A2R_KERNEL(a2r_transpose)(const float *restrict x, int64_t batch, int64_t rows,
                               int64_t cols, float *restrict y) {
    const int64_t plane = rows * cols;
    const int par = batch * plane > 4 * A2R_PAR_GRAIN;
    if (rows < 8 || cols < 8) {
        for (int64_t b = 0; b < batch; b++) thin(x + b * plane, rows, cols, y + b * plane);
        return;
    }
    /* work items: (matrix, tile); each writes its own part of y */
    const int64_t ti = (rows + TILE - 1) / TILE, tj = (cols + TILE - 1) / TILE;
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (par)
    for (int64_t t = 0; t < batch * ti * tj; t++) {
        const int64_t b = t / (ti * tj), i0 = t / tj % ti * TILE, j0 = t % tj * TILE;
        tile(x + b * plane, rows, cols, i0, A2R_MIN(rows, i0 + TILE), j0,
             A2R_MIN(cols, j0 + TILE), y + b * plane);
    }
}
