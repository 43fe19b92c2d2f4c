/* a2r_runtime.h - ISA selection and thread count, shared by every op (cpu_ops/src/runtime.c).
 *
 * ISA levels are ordered: a level implies every lower one. The active level is chosen once at
 * import by the Python layer (best supported, capped by A2R_MAX_ISA); tests may change it between
 * calls, never during one. */
#ifndef A2R_RUNTIME_H
#define A2R_RUNTIME_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define A2R_ISA_BASELINE 0 /* x86-64: SSE2; aarch64: NEON */
#define A2R_ISA_AVX2 1     /* AVX2 + FMA */
#define A2R_ISA_AVX512 2   /* AVX-512 F/BW/VL/DQ */
#define A2R_ISA_AVX512_BF16 3 /* + AVX512_BF16 and AVX512_VNNI (the dot products of conv2d_lowp;
                               * other ops run their AVX-512 body at this level) */
#define A2R_ISA_AVX512_AMX 4  /* + AMX-TILE/INT8/BF16 with the OS's leave to use the tile data
                               * (Linux: arch_prctl ARCH_REQ_XCOMP_PERM): conv2d_lowp's tile
                               * products; other ops as at AVX512_BF16 */
/* aarch64 (its own numbering: a build has either the x86 levels or these) */
#define A2R_ISA_NEON_DOT 1 /* + the Armv8.2 dot products (sdot: conv2d_lowp's int8); other ops
                            * run their NEON body compiled for Armv8.2 */

/* Best level this build has code for AND this CPU + OS support (XCR0 checked by libgcc; for
 * AMX here, and the tile-data permission asked of Linux once). */
int a2r_best_isa(void);
/* Select a level, clamped to a2r_best_isa(); returns the level now active. */
int a2r_set_isa(int level);
int a2r_get_isa(void);

/* Threads each kernel's OpenMP region uses (>= 1). 1 when built without OpenMP. */
int a2r_set_num_threads(int n);
int a2r_num_threads(void);
/* 1 when the library was built with OpenMP, else 0. */
int a2r_openmp_enabled(void);

/* An op whose footprint (bytes read + bytes written) reaches this writes its output with
 * cache-bypassing stores (a2r_stream_lines in a2r_isa.h): its output cannot stay cached for the
 * next op anyway, and each line written is then not read first. Set once at import by the Python
 * layer (the last-level cache's size); until then, and after a set to <= 0, never (INT64_MAX).
 * The setter returns the old value. */
int64_t a2r_stream_min_bytes(void);
int64_t a2r_set_stream_min_bytes(int64_t bytes);

#ifdef __cplusplus
}
#endif
#endif
