/* a2r_isa.h - included by every cpu_ops/src/<op>/kernel.c, which setup.py compiles once per ISA
 * level with that level's flags, -DA2R_ISA=<level> and -DA2R_OP=<op> (its folder's name).
 *
 * A2R_KERNEL(a2r_x) names the definition of kernel a2r_x at this level. Only the kernels that
 * a2r_kernel_list.h lists for A2R_OP may be defined so, each with the listed signature, and each
 * of them must be: this header declares each as a static body and exports it under its variant
 * name (a2r_x_avx2, ...) as an alias, which GCC refuses to emit for an undefined body.
 * Bodies are plain C written for the auto-vectoriser (restrict pointers, unit-stride inner loops,
 * no calls but inline helpers); the flags decide the vector width. Where the vectoriser's result
 * depends on the surrounding code, a loop uses the vector type a2r_vf below instead. */
#ifndef A2R_ISA_H
#define A2R_ISA_H

#include <stddef.h>
#include <stdint.h>

#include "a2r_kernel_list.h"

#if !defined(A2R_ISA) || !defined(A2R_OP)
#error "kernel.c files are compiled per ISA level by setup.py with -DA2R_ISA=<level> -DA2R_OP=<op>"
#endif

#define A2R_STR_(x) #x
#define A2R_STR(x) A2R_STR_(x)
#define A2R_KERNEL(name) A2R_CAT(name, body)

/* For each kernel of this op: `static ret name_body params;` and the exported variant
 * `ret name_<level> params` as an alias of it. */
#define A2R_DEFINE_VARIANT(level, ret, name, params, args)                                       \
    static ret A2R_KERNEL(name) params;                                                          \
    ret A2R_CAT(name, level) params __attribute__((alias(A2R_STR(A2R_KERNEL(name)))));
A2R_CAT(A2R_OPS, A2R_OP)(A2R_DEFINE_VARIANT, A2R_ISA)

/* Floats in one vector register at this level: block sizes are multiples of it. */
#if defined(__AVX512F__)
#define A2R_VEC_FLOATS 16
#elif defined(__AVX2__)
#define A2R_VEC_FLOATS 8
#else
#define A2R_VEC_FLOATS 4
#endif

/* a*b + c: one fused instruction where the level has FMA. The build uses -ffp-contract=off so
 * that only this macro fuses; plain a*b + c stays two roundings (postprocess relies on that). */
#if defined(__FMA__) || defined(__aarch64__)
#define A2R_MADD(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define A2R_MADD(a, b, c) ((a) * (b) + (c))
#endif

/* One vector register of floats as a GCC/clang vector type, for the few loops whose vectorised
 * form the auto-vectoriser does not find reliably (moments.h says which and why). Elementwise
 * operators apply; A2R_VMADD fuses exactly where A2R_MADD does (x86 with FMA, aarch64), so a
 * vector body and its scalar tail round alike (a2r_math.h). */
typedef float a2r_vf __attribute__((vector_size(4 * A2R_VEC_FLOATS)));

static inline a2r_vf a2r_vload(const float *p) {  /* any alignment */
    a2r_vf v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

static inline void a2r_vstore(float *p, a2r_vf v) {  /* any alignment */
    __builtin_memcpy(p, &v, sizeof v);
}

#if defined(__AVX512F__)
#include <immintrin.h>
#define A2R_VMADD(a, b, c) ((a2r_vf)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#elif defined(__FMA__) && defined(__AVX2__)
#include <immintrin.h>
#define A2R_VMADD(a, b, c) ((a2r_vf)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#elif defined(__aarch64__)
#include <arm_neon.h>
#define A2R_VMADD(a, b, c) \
    ((a2r_vf)vfmaq_f32((float32x4_t)(c), (float32x4_t)(a), (float32x4_t)(b)))
#else
#define A2R_VMADD(a, b, c) ((a) * (b) + (c))
#endif

#define A2R_MIN(a, b) ((a) < (b) ? (a) : (b))
#define A2R_MAX(a, b) ((a) > (b) ? (a) : (b))

/* A2R_VSTREAM(p, v): a cache-bypassing (non-temporal) store of one vector to p aligned to the
 * vector's size; defined on x86, where each level has one. */
#if defined(__AVX512F__)
#include <immintrin.h>
#define A2R_VSTREAM(p, v) _mm512_stream_ps((p), (__m512)(v))
#elif defined(__AVX2__)
#include <immintrin.h>
#define A2R_VSTREAM(p, v) _mm256_stream_ps((p), (__m256)(v))
#elif defined(__SSE2__)
#include <xmmintrin.h>
#define A2R_VSTREAM(p, v) _mm_stream_ps((p), (__m128)(v))
#endif

#define A2R_LINE_FLOATS 16 /* floats in a 64-byte cache line */

#ifdef A2R_VSTREAM
/* dst[0:n] = src[0:n] through cache-bypassing stores: the lines of dst are written without
 * being read first. dst starts a cache line and n is whole lines: a plain store into a line
 * still being combined for streaming flushes it half-written (adain 3.3x slower, measured).
 * src: a block just computed in L1. */
static inline void a2r_stream_lines(float *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i += A2R_VEC_FLOATS) A2R_VSTREAM(dst + i, a2r_vload(src + i));
}
#endif

/* Orders a thread's streaming stores before what follows (its output read by another). */
static inline void a2r_stream_fence(void) {
#ifdef A2R_VSTREAM
    _mm_sfence();
#endif
}

/* The calling thread's index and the team size inside an OpenMP region (0 and 1 without OpenMP). */
#ifdef _OPENMP
#include <omp.h>
#define A2R_THREAD_ID() omp_get_thread_num()
#define A2R_THREAD_COUNT() omp_get_num_threads()
#else
#define A2R_THREAD_ID() 0
#define A2R_THREAD_COUNT() 1
#endif

/* Minimum work (elements) per OpenMP thread: below it a parallel region costs more than it saves
 * (a passive-wait wake-up is a few microseconds). */
#define A2R_PAR_GRAIN 32768

#endif
