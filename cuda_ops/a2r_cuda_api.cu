/* The whole extern "C" ABI of the CUDA library (contract: a2r_cuda.h). Each entry point checks
 * its arguments, calls the runtime or an op's launcher, and maps a failure to a status code with
 * a thread-local message for a2r_cuda_last_error(). Nothing here throws or aborts. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "a2r_cuda_internal.cuh"

namespace {

thread_local char tl_error[1024] = "";

int fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_error, sizeof tl_error, fmt, ap);
    va_end(ap);
    return code;
}

int status_of(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return A2R_CUDA_OK;
    case cudaErrorMemoryAllocation: return A2R_CUDA_ENOMEM;
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:  /* the libcuda stub, not a real driver, was found */
    case cudaErrorInitializationError: return A2R_CUDA_ENODRIVER;
    case cudaErrorNoDevice:
    case cudaErrorDevicesUnavailable: return A2R_CUDA_ENODEVICE;
    case cudaErrorInvalidValue: return A2R_CUDA_EINVAL;
    default: return A2R_CUDA_ERUNTIME;
    }
}

/* A CUDA failure as a status, with "what: description (name, code)" as the message. */
int check(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return A2R_CUDA_OK;
    return fail(status_of(e), "%s: %s (%s, CUDA error %d)", what, cudaGetErrorString(e),
                cudaGetErrorName(e), (int)e);
}

/* Launches report through cudaGetLastError(): clear what an earlier, already reported failure
 * left there (sticky errors come back anyway). */
void clear_pending() { (void)cudaGetLastError(); }

bool fault_oom() {
    const char *f = getenv("A2R_CUDA_FAULT");
    if (!f) return false;
    while (isspace((unsigned char)*f)) f++;
    return strncasecmp(f, "oom", 3) == 0 && (f[3] == '\0' || isspace((unsigned char)f[3]));
}

/* Element counts stay below 2^40 (4 TB of floats): every index product fits int64. */
constexpr int64_t kMaxElems = (int64_t)1 << 40;

bool sizes_ok(int64_t a, int64_t b = 1, int64_t c = 1, int64_t d = 1) {
    if (a <= 0 || b <= 0 || c <= 0 || d <= 0) return false;
    if (a > kMaxElems || b > kMaxElems || c > kMaxElems || d > kMaxElems) return false;
    double p = (double)a * (double)b * (double)c * (double)d;
    return p <= (double)kMaxElems;
}

#define A2R_REQUIRE(cond, ...)                               \
    do {                                                     \
        if (!(cond)) return fail(A2R_CUDA_EINVAL, __VA_ARGS__); \
    } while (0)

cudaStream_t as_stream(void *s) { return (cudaStream_t)s; }

}  // namespace

extern "C" {

/* --- library and device ----------------------------------------------------------------------- */

int a2r_cuda_abi_version(void) { return A2R_CUDA_ABI_VERSION; }

const char *a2r_cuda_last_error(void) { return tl_error; }

int a2r_cuda_versions(int *runtime, int *driver) {
    A2R_REQUIRE(runtime && driver, "a2r_cuda_versions: NULL output pointer");
    int rc = check(cudaRuntimeGetVersion(runtime), "cudaRuntimeGetVersion");
    if (rc) return rc;
    return check(cudaDriverGetVersion(driver), "cudaDriverGetVersion");
}

int a2r_cuda_device_count(int *count) {
    A2R_REQUIRE(count, "a2r_cuda_device_count: NULL output pointer");
    *count = 0;
    int rc = check(cudaGetDeviceCount(count), "cudaGetDeviceCount");
    if (rc) {
        *count = 0;
        return rc;
    }
    if (*count == 0) return fail(A2R_CUDA_ENODEVICE, "cudaGetDeviceCount: no CUDA device");
    return A2R_CUDA_OK;
}

int a2r_cuda_device_name(int device, char *buf, int64_t len) {
    A2R_REQUIRE(buf && len > 0, "a2r_cuda_device_name: NULL buffer or len <= 0");
    cudaDeviceProp prop;
    int rc = check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    if (rc) return rc;
    snprintf(buf, (size_t)len, "%s", prop.name);
    return A2R_CUDA_OK;
}

int a2r_cuda_device_capability(int device, int *major, int *minor) {
    A2R_REQUIRE(major && minor, "a2r_cuda_device_capability: NULL output pointer");
    int rc = check(cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, device),
                   "cudaDeviceGetAttribute(major)");
    if (rc) return rc;
    return check(cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, device),
                 "cudaDeviceGetAttribute(minor)");
}

int a2r_cuda_set_device(int device) { return check(cudaSetDevice(device), "cudaSetDevice"); }

int a2r_cuda_mem_info(int64_t *free_bytes, int64_t *total_bytes) {
    A2R_REQUIRE(free_bytes && total_bytes, "a2r_cuda_mem_info: NULL output pointer");
    size_t f = 0, t = 0;
    int rc = check(cudaMemGetInfo(&f, &t), "cudaMemGetInfo");
    *free_bytes = (int64_t)f;
    *total_bytes = (int64_t)t;
    return rc;
}

/* --- streams, events, memory ------------------------------------------------------------------ */

int a2r_cuda_stream_create(void **stream) {
    A2R_REQUIRE(stream, "a2r_cuda_stream_create: NULL output pointer");
    cudaStream_t s = nullptr;
    int rc = check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    *stream = rc ? nullptr : (void *)s;
    return rc;
}

int a2r_cuda_stream_destroy(void *stream) {
    A2R_REQUIRE(stream, "a2r_cuda_stream_destroy: NULL stream (the default stream is not owned)");
    return check(cudaStreamDestroy(as_stream(stream)), "cudaStreamDestroy");
}

int a2r_cuda_stream_synchronize(void *stream) {
    return check(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize");
}

int a2r_cuda_device_synchronize(void) {
    return check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

int a2r_cuda_event_create(void **event) {
    A2R_REQUIRE(event, "a2r_cuda_event_create: NULL output pointer");
    cudaEvent_t e = nullptr;
    int rc = check(cudaEventCreate(&e), "cudaEventCreate");
    *event = rc ? nullptr : (void *)e;
    return rc;
}

int a2r_cuda_event_destroy(void *event) {
    A2R_REQUIRE(event, "a2r_cuda_event_destroy: NULL event");
    return check(cudaEventDestroy((cudaEvent_t)event), "cudaEventDestroy");
}

int a2r_cuda_event_record(void *event, void *stream) {
    A2R_REQUIRE(event, "a2r_cuda_event_record: NULL event");
    return check(cudaEventRecord((cudaEvent_t)event, as_stream(stream)), "cudaEventRecord");
}

int a2r_cuda_event_elapsed_ms(void *start, void *end, float *ms) {
    A2R_REQUIRE(start && end && ms, "a2r_cuda_event_elapsed_ms: NULL argument");
    return check(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end),
                 "cudaEventElapsedTime");
}

/* One allocation through ``alloc`` (cudaMalloc or cudaHostAlloc), named ``api`` in messages and
called by the entry point ``entry``: arguments checked, fault injection honoured, a failure
reported here and kept out of the next launch check. */
typedef cudaError_t (*alloc_fn)(void **, size_t);

static int checked_alloc(void **ptr, int64_t bytes, const char *entry, const char *api,
                         alloc_fn alloc) {
    A2R_REQUIRE(ptr, "%s: NULL output pointer", entry);
    *ptr = nullptr;
    A2R_REQUIRE(bytes > 0, "%s: bytes must be > 0, got %lld", entry, (long long)bytes);
    if (fault_oom())
        return fail(A2R_CUDA_ENOMEM, "%s(%lld bytes): out of memory (injected by "
                    "A2R_CUDA_FAULT=oom)", api, (long long)bytes);
    void *p = nullptr;
    char what[96];
    snprintf(what, sizeof what, "%s(%lld bytes)", api, (long long)bytes);
    int rc = check(alloc(&p, (size_t)bytes), what);
    if (rc) clear_pending();
    *ptr = rc ? nullptr : p;
    return rc;
}

int a2r_cuda_malloc(void **ptr, int64_t bytes) {
    return checked_alloc(ptr, bytes, "a2r_cuda_malloc", "cudaMalloc",
                         [](void **p, size_t n) { return cudaMalloc(p, n); });
}

int a2r_cuda_free(void *ptr) {
    if (!ptr) return A2R_CUDA_OK;
    return check(cudaFree(ptr), "cudaFree");
}

int a2r_cuda_host_alloc(void **ptr, int64_t bytes) {
    return checked_alloc(ptr, bytes, "a2r_cuda_host_alloc", "cudaHostAlloc",
                         [](void **p, size_t n) { return cudaHostAlloc(p, n, cudaHostAllocDefault); });
}

int a2r_cuda_host_free(void *ptr) {
    if (!ptr) return A2R_CUDA_OK;
    return check(cudaFreeHost(ptr), "cudaFreeHost");
}

static int copy(void *dst, const void *src, int64_t bytes, cudaMemcpyKind kind, void *stream,
                const char *what) {
    A2R_REQUIRE(bytes >= 0, "%s: bytes must be >= 0, got %lld", what, (long long)bytes);
    if (bytes == 0) return A2R_CUDA_OK;
    A2R_REQUIRE(dst && src, "%s: NULL pointer", what);
    return check(cudaMemcpyAsync(dst, src, (size_t)bytes, kind, as_stream(stream)), what);
}

int a2r_cuda_memcpy_h2d(void *dst, const void *src, int64_t bytes, void *stream) {
    return copy(dst, src, bytes, cudaMemcpyHostToDevice, stream, "cudaMemcpyAsync(H2D)");
}

int a2r_cuda_memcpy_d2h(void *dst, const void *src, int64_t bytes, void *stream) {
    return copy(dst, src, bytes, cudaMemcpyDeviceToHost, stream, "cudaMemcpyAsync(D2H)");
}

int a2r_cuda_memcpy_d2d(void *dst, const void *src, int64_t bytes, void *stream) {
    return copy(dst, src, bytes, cudaMemcpyDeviceToDevice, stream, "cudaMemcpyAsync(D2D)");
}

/* --- ops -------------------------------------------------------------------------------------- */

int a2r_cuda_preprocess(const uint8_t *img, int64_t h, int64_t w, const float *scale,
                        const float *bias, float *out, void *stream) {
    A2R_REQUIRE(img && scale && bias && out, "a2r_cuda_preprocess: NULL pointer");
    A2R_REQUIRE(sizes_ok(h, w, 3), "a2r_cuda_preprocess: bad size h=%lld w=%lld", (long long)h,
                (long long)w);
    clear_pending();
    return check(a2r::launch_preprocess(img, h, w, scale, bias, out, as_stream(stream)),
                 "preprocess launch");
}

int a2r_cuda_postprocess(const float *x, int64_t h, int64_t w, int64_t r, const float *mean,
                         const float *stdv, uint8_t *out, void *stream) {
    A2R_REQUIRE(x && mean && stdv && out, "a2r_cuda_postprocess: NULL pointer");
    A2R_REQUIRE(sizes_ok(h, w, 3 * r, r), "a2r_cuda_postprocess: bad size h=%lld w=%lld r=%lld",
                (long long)h, (long long)w, (long long)r);
    clear_pending();
    return check(a2r::launch_postprocess(x, h, w, r, mean, stdv, out, as_stream(stream)),
                 "postprocess launch");
}

int64_t a2r_cuda_stats_workspace_bytes(int64_t nc, int64_t hw) {
    if (!sizes_ok(nc, hw)) return -1;
    return a2r::stats_workspace_bytes(nc, hw);
}

int a2r_cuda_channel_stats(const float *x, int64_t nc, int64_t hw, float eps, float *mean,
                           float *stdv, void *workspace, int64_t workspace_bytes, void *stream) {
    A2R_REQUIRE(x && mean && stdv && workspace, "a2r_cuda_channel_stats: NULL pointer");
    A2R_REQUIRE(sizes_ok(nc, hw), "a2r_cuda_channel_stats: bad size nc=%lld hw=%lld",
                (long long)nc, (long long)hw);
    A2R_REQUIRE(eps >= 0.0f && eps < INFINITY, "a2r_cuda_channel_stats: eps must be finite >= 0");
    const int64_t need = a2r::stats_workspace_bytes(nc, hw);
    A2R_REQUIRE(workspace_bytes >= need, "a2r_cuda_channel_stats: workspace of %lld bytes, "
                "needs %lld", (long long)workspace_bytes, (long long)need);
    clear_pending();
    return check(a2r::launch_channel_stats(x, nc, hw, eps, mean, stdv, workspace,
                                           as_stream(stream)), "channel_stats launch");
}

int a2r_cuda_adain(const float *x, int64_t nc, int64_t hw, const float *style_mean,
                   const float *style_std, const float *content_mean, const float *content_std,
                   float eps, int activation, float *y, void *workspace, int64_t workspace_bytes,
                   void *stream) {
    A2R_REQUIRE(x && style_mean && style_std && y && workspace, "a2r_cuda_adain: NULL pointer");
    A2R_REQUIRE(!content_mean == !content_std,
                "a2r_cuda_adain: content_mean and content_std must both be given or both NULL");
    A2R_REQUIRE(sizes_ok(nc, hw), "a2r_cuda_adain: bad size nc=%lld hw=%lld", (long long)nc,
                (long long)hw);
    A2R_REQUIRE(eps >= 0.0f && eps < INFINITY, "a2r_cuda_adain: eps must be finite >= 0");
    A2R_REQUIRE(activation == A2R_CUDA_ACT_NONE || activation == A2R_CUDA_ACT_SILU ||
                activation == A2R_CUDA_ACT_RELU, "a2r_cuda_adain: unknown activation %d",
                activation);
    const int64_t need = a2r::stats_workspace_bytes(nc, hw);
    A2R_REQUIRE(workspace_bytes >= need, "a2r_cuda_adain: workspace of %lld bytes, needs %lld",
                (long long)workspace_bytes, (long long)need);
    clear_pending();
    return check(a2r::launch_adain(x, nc, hw, style_mean, style_std, content_mean, content_std,
                                   eps, activation, y, workspace, as_stream(stream)),
                 "adain launch");
}

int a2r_cuda_silu(const float *x, float *y, int64_t n, void *stream) {
    A2R_REQUIRE(x && y, "a2r_cuda_silu: NULL pointer");
    A2R_REQUIRE(sizes_ok(n), "a2r_cuda_silu: bad size n=%lld", (long long)n);
    clear_pending();
    return check(a2r::launch_silu(x, y, n, as_stream(stream)), "silu launch");
}

int a2r_cuda_pixel_shuffle(const float *x, int64_t n, int64_t c, int64_t h, int64_t w, int64_t r,
                           float *y, void *stream) {
    A2R_REQUIRE(x && y, "a2r_cuda_pixel_shuffle: NULL pointer");
    A2R_REQUIRE(sizes_ok(r) && sizes_ok(n * c, h * r, w * r),
                "a2r_cuda_pixel_shuffle: bad size n=%lld c=%lld h=%lld w=%lld r=%lld",
                (long long)n, (long long)c, (long long)h, (long long)w, (long long)r);
    A2R_REQUIRE(sizes_ok(n, c, h, w), "a2r_cuda_pixel_shuffle: bad size");
    clear_pending();
    return check(a2r::launch_pixel_shuffle(x, n, c, h, w, r, y, as_stream(stream)),
                 "pixel_shuffle launch");
}

int64_t a2r_cuda_guided_filter_workspace_bytes(int64_t gc, int64_t sc, int64_t h, int64_t w) {
    if ((gc != 1 && gc != 3) || !sizes_ok(sc, h, w)) return -1;
    return a2r::guided_filter_workspace_bytes(gc, sc, h, w);
}

int a2r_cuda_guided_filter(const float *guide, int64_t gc, const float *src, int64_t sc, int64_t h,
                           int64_t w, int64_t r, float eps, float *out, void *workspace,
                           int64_t workspace_bytes, void *stream) {
    A2R_REQUIRE(guide && src && out && workspace, "a2r_cuda_guided_filter: NULL pointer");
    A2R_REQUIRE(gc == 1 || gc == 3, "a2r_cuda_guided_filter: gc must be 1 or 3, got %lld",
                (long long)gc);
    A2R_REQUIRE(sizes_ok(sc * 4 + 9, h, w), "a2r_cuda_guided_filter: bad size sc=%lld h=%lld "
                "w=%lld", (long long)sc, (long long)h, (long long)w);
    A2R_REQUIRE(r >= 0 && r <= (1 << 24), "a2r_cuda_guided_filter: radius must be in [0, 2^24], "
                "got %lld", (long long)r);
    A2R_REQUIRE(eps >= 0.0f && eps < INFINITY, "a2r_cuda_guided_filter: eps must be finite >= 0");
    const int64_t need = a2r::guided_filter_workspace_bytes(gc, sc, h, w);
    A2R_REQUIRE(workspace_bytes >= need, "a2r_cuda_guided_filter: workspace of %lld bytes, "
                "needs %lld", (long long)workspace_bytes, (long long)need);
    clear_pending();
    return check(a2r::launch_guided_filter(guide, gc, src, sc, h, w, r, eps, out, workspace,
                                           as_stream(stream)), "guided_filter launch");
}

}  // extern "C"
