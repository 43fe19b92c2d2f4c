/* fma_peak kernel (contract: a2r_kernels.h): the FMA ceiling the conv2d micro-kernel can reach,
 * with the same vector type and FMA (common/simd.h). Each thread updates MR*NV independent
 * accumulators (the micro-kernel's tile: enough to cover FMA latency x issue width, e.g. 4
 * cycles x 2 pipes = 8 on AVX2, and 24 >= 8 on AVX-512) with acc = acc * m + a. */
#include "simd.h"

#define NACC (MR * NV)

double A2R_KERNEL(a2r_fma_peak)(int64_t iters, float *sink) {
    int nthr = a2r_num_threads();
    float total = 0.0f;
    #pragma omp parallel num_threads(nthr) reduction(+ : total)
    {
        v_t acc[NACC];
        /* m slightly below 1 and a small: the values converge to a / (1 - m), never overflow. */
        const v_t m = v_set1(0.999999f), a = v_set1(1e-6f);
#pragma GCC unroll 32
        for (int i = 0; i < NACC; i++) acc[i] = v_set1((float)i);
        for (int64_t t = 0; t < iters; t++) {
#pragma GCC unroll 32
            for (int i = 0; i < NACC; i++) acc[i] = v_fma(acc[i], m, a);
        }
        float buf[VL];
        v_t s = acc[0];
#pragma GCC unroll 32
        for (int i = 1; i < NACC; i++) s = v_fma(s, m, acc[i]);
        v_store(buf, s);
        total += buf[0];
    }
    *sink = total;
    return (double)nthr * (double)iters * NACC * VL * 2.0;
}
