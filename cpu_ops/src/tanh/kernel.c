/* tanh kernel body (contract: a2r_kernels.h). Compiled once per ISA level: whole vectors through
 * a2r_vtanh, the tail through a2r_tanh1 (the same result bit for bit), in one pass with the
 * affine map around it (sigmoid is 0.5 tanh(x / 2) + 0.5). */
#include "a2r_isa.h"
#include "a2r_math.h"

void A2R_KERNEL(a2r_tanh)(const float *x, float *y, int64_t n, float in_scale, float out_scale,
                          float out_shift) {
    /* y may equal x, so no restrict; every element is read before it is written. */
    const int64_t nv = n - n % A2R_VEC_FLOATS;
    const a2r_vf vi = a2r_vsplat(in_scale), vo = a2r_vsplat(out_scale), vs = a2r_vsplat(out_shift);
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (n > 4 * A2R_PAR_GRAIN)
    for (int64_t i = 0; i < nv; i += A2R_VEC_FLOATS)
        a2r_vstore(y + i, A2R_VMADD(vo, a2r_vtanh(vi * a2r_vload(x + i)), vs));
    for (int64_t i = nv; i < n; i++) y[i] = A2R_MADD(out_scale, a2r_tanh1(in_scale * x[i]), out_shift);
}
