/* a2r_dispatch.h - included by every cpu_ops/src/<op>/dispatch.c (compiled once, baseline flags).
 *
 *   A2R_VARIANTS(void, a2r_silu, (const float *x, float *y, int64_t n))  declares every variant;
 *   A2R_PICK(a2r_silu)(x, y, n)                                          calls the active one.
 * Per-ISA variants exist only on x86-64 builds (setup.py defines A2R_X86_VARIANTS there). */
#ifndef A2R_DISPATCH_H
#define A2R_DISPATCH_H

#include "a2r_kernels.h"
#include "a2r_runtime.h"

extern int a2r_active_isa; /* owned by runtime.c */

#ifdef A2R_X86_VARIANTS
#define A2R_VARIANTS(ret, name, params) \
    ret name##_baseline params;         \
    ret name##_avx2 params;             \
    ret name##_avx512 params;
#define A2R_PICK(name)                                   \
    (a2r_active_isa == A2R_ISA_AVX512 ? name##_avx512    \
     : a2r_active_isa == A2R_ISA_AVX2 ? name##_avx2      \
                                      : name##_baseline)
#else
#define A2R_VARIANTS(ret, name, params) ret name##_baseline params;
#define A2R_PICK(name) name##_baseline
#endif

#endif
