/* runtime.c - ISA selection, thread count and streaming-store threshold (contract in
 * a2r_runtime.h), and the process-wide conv2d path setting (a2r_kernels.h). Baseline flags. */
#include "a2r_kernels.h"
#include "a2r_runtime.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(A2R_X86_VARIANTS) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif
#elif defined(A2R_AARCH64_VARIANTS) && defined(__linux__)
#include <sys/auxv.h>
#define A2R_HWCAP_ASIMDDP (1UL << 20) /* Linux arm64 uapi asm/hwcap.h: the dot products */
#endif

int a2r_active_isa = A2R_ISA_BASELINE;
static int num_threads = 1;

#if defined(A2R_X86_VARIANTS) && (defined(__GNUC__) || defined(__clang__))
/* AMX-TILE, -INT8 and -BF16 (CPUID 7.0 EDX bits 24, 25, 22), the tile state enabled in XCR0
 * (bits 17, 18) and, on Linux, the process's leave to use the tile data (asked once; granted
 * to every thread of the process). Elsewhere no AMX. */
static int amx_usable(void) {
    static int usable = -1;
    if (usable >= 0) return usable;
    usable = 0;
#ifdef __linux__
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> 22 & 1) || !(d >> 24 & 1) ||
        !(d >> 25 & 1))
        return usable;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c >> 27 & 1)) return usable; /* OSXSAVE */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo >> 17 & 3) != 3) return usable;
    /* ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18) */
    usable = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#endif
    return usable;
}
#endif

int a2r_best_isa(void) {
#if defined(A2R_X86_VARIANTS) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512vnni"))
            return A2R_ISA_AVX512;
        return amx_usable() ? A2R_ISA_AVX512_AMX : A2R_ISA_AVX512_BF16;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return A2R_ISA_AVX2;
#elif defined(A2R_AARCH64_VARIANTS) && defined(__linux__)
    if (getauxval(AT_HWCAP) & A2R_HWCAP_ASIMDDP) return A2R_ISA_NEON_DOT;
#endif
    return A2R_ISA_BASELINE;
}

int a2r_set_isa(int level) {
    int best = a2r_best_isa();
    if (level < A2R_ISA_BASELINE) level = A2R_ISA_BASELINE;
    a2r_active_isa = level < best ? level : best;
    return a2r_active_isa;
}

int a2r_get_isa(void) { return a2r_active_isa; }

int a2r_set_num_threads(int n) {
#ifdef _OPENMP
    num_threads = n < 1 ? 1 : n;
#else
    (void)n;
    num_threads = 1;
#endif
    return num_threads;
}

int a2r_num_threads(void) { return num_threads; }

int a2r_openmp_enabled(void) {
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

static int64_t stream_min_bytes = INT64_MAX;

int64_t a2r_stream_min_bytes(void) { return stream_min_bytes; }

int64_t a2r_set_stream_min_bytes(int64_t bytes) {
    const int64_t old = stream_min_bytes;
    stream_min_bytes = bytes > 0 ? bytes : INT64_MAX;
    return old;
}

int a2r_conv2d_algo = A2R_CONV2D_AUTO;

int a2r_conv2d_set_algo(int algo) {
    const int old = a2r_conv2d_algo;
    a2r_conv2d_algo = algo;
    return old;
}
