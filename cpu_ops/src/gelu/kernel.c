/* gelu kernel body (contract: a2r_kernels.h). Compiled once per ISA level: whole vectors through
 * a2r_vgelu, the tail through a2r_gelu1 (the same result bit for bit). The form is the same for
 * every element: its test is a branch always predicted (and -O3 unswitches the loop). */
#include "a2r_isa.h"
#include "a2r_math.h"

void A2R_KERNEL(a2r_gelu)(const float *x, float *y, int64_t n, int form) {
    /* y may equal x, so no restrict; every element is read before it is written. */
    const int64_t nv = n - n % A2R_VEC_FLOATS;
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (n > 4 * A2R_PAR_GRAIN)
    for (int64_t i = 0; i < nv; i += A2R_VEC_FLOATS)
        a2r_vstore(y + i, a2r_vgelu(a2r_vload(x + i), form));
    for (int64_t i = nv; i < n; i++) y[i] = a2r_gelu1(x[i], form);
}
