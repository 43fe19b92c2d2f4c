/* silu kernel body (contract: a2r_kernels.h). Compiled once per ISA level. */
#include "a2r_isa.h"
#include "a2r_math.h"

void A2R_KERNEL(a2r_silu)(const float *x, float *y, int64_t n) {
    /* y may equal x, so no restrict; every element is read before it is written. */
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (n > 4 * A2R_PAR_GRAIN)
    for (int64_t i = 0; i < n; i++) y[i] = a2r_silu1(x[i]);
}
