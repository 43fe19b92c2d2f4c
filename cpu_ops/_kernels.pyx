# Thin wrappers over cpu_ops/include/a2r_kernels.h: typed contiguous memoryviews in, one C call
# with the GIL released. Every check (dtype, shape, contiguity, sizes > 0, aliasing) is done by
# the caller, a2r_edge/ops.py; nothing here validates.
from libc.stdint cimport int64_t, uint8_t


cdef extern from "a2r_runtime.h" nogil:
    int a2r_best_isa() noexcept
    int a2r_set_isa(int level) noexcept
    int a2r_get_isa() noexcept
    int a2r_set_num_threads(int n) noexcept
    int a2r_num_threads() noexcept
    int a2r_openmp_enabled() noexcept
    int64_t a2r_set_stream_min_bytes(int64_t nbytes) noexcept


cdef extern from "a2r_kernels.h" nogil:
    int A2R_OK
    int A2R_ENOMEM
    void a2r_preprocess(const uint8_t *img, int64_t h, int64_t w, const float *scale,
                        const float *bias, float *out) noexcept
    int64_t a2r_postprocess(const float *x, int64_t h, int64_t w, const float *mean,
                            const float *stdv, uint8_t *out) noexcept
    void a2r_channel_stats(const float *x, int64_t nc, int64_t hw, float eps, float *mean,
                           float *stdv) noexcept
    void a2r_adain(const float *x, int64_t nc, int64_t hw, const float *style_mean,
                   const float *style_std, const float *content_mean, const float *content_std,
                   float eps, int activation, float alpha, const float *residual,
                   float *y) noexcept
    void a2r_adalin(const float *x, int64_t n, int64_t c, int64_t hw, const float *in_weight,
                    const float *ln_weight, const float *gamma, const float *beta,
                    float in_eps, float ln_eps, int activation, float alpha, double *moments,
                    float *y) noexcept
    void a2r_silu(const float *x, float *y, int64_t n) noexcept
    void a2r_tanh(const float *x, float *y, int64_t n, float in_scale, float out_scale,
                  float out_shift) noexcept
    void a2r_gelu(const float *x, float *y, int64_t n, int form) noexcept
    void a2r_softmax_rows(const float *x, float *y, int64_t rows, int64_t n) noexcept
    void a2r_layernorm_rows(const float *x, int64_t rows, int64_t n, const float *scale,
                            const float *bias, float eps, float *y) noexcept
    void a2r_pixel_shuffle(const float *x, int64_t n, int64_t c, int64_t h, int64_t w, int64_t r,
                           int64_t top, int64_t left, int64_t oh, int64_t ow, float *y) noexcept
    void a2r_transpose(const float *x, int64_t batch, int64_t rows, int64_t cols, float *y)
    void a2r_pixel_shuffle_u8(const uint8_t *x, int64_t n, int64_t c, int64_t h, int64_t w,
                              int64_t r, int64_t top, int64_t left, int64_t oh, int64_t ow,
                              uint8_t *y) noexcept
    void a2r_resize(const float *x, int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
                    int64_t ky, const int64_t *iy, const float *wy, int64_t kx,
                    const int64_t *ix, const float *wx, float *rows, float *y) noexcept
    void a2r_pad2d(const float *x, int64_t nc, int64_t h, int64_t w, int64_t top, int64_t bottom,
                   int64_t left, int64_t right, int mode, float value, float *y) noexcept
    void a2r_crop_add(const float *x, int64_t nc, int64_t xh, int64_t xw, int64_t top,
                      int64_t left, const float *b, int64_t h, int64_t w, float *y) noexcept
    enum:
        A2R_PAD_CONSTANT, A2R_PAD_REFLECT, A2R_PAD_EDGE
    void a2r_maxpool(const float *x, int64_t nc, int64_t h, int64_t w, int64_t kh, int64_t kw,
                     int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                     int64_t oh, int64_t ow, float *y) noexcept
    void a2r_avgpool(const float *x, int64_t nc, int64_t h, int64_t w, int64_t kh, int64_t kw,
                     int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                     int64_t oh, int64_t ow, const float *count, float *y) noexcept
    void a2r_im2col(const float *x, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw,
                    int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w,
                    int64_t dil_h, int64_t dil_w, float *out) noexcept
    ctypedef struct a2r_conv2d_shape:
        int64_t n, c, h, w, o, groups, kh, kw
        int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w
    int64_t a2r_conv2d_packed_size(const a2r_conv2d_shape *s) noexcept
    void a2r_conv2d_pack(const a2r_conv2d_shape *s, const float *w, float *packed) noexcept
    int64_t a2r_conv2d_workspace_size(const a2r_conv2d_shape *s) noexcept
    int a2r_conv2d_set_algo(int algo) noexcept
    void a2r_conv2d(const a2r_conv2d_shape *s, const float *x, const float *packed,
                    const float *bias, const float *residual, int activation, float alpha,
                    float *workspace, int64_t workspace_floats, float *y) noexcept
    int64_t a2r_conv2d_lowp_packed_size(const a2r_conv2d_shape *s, int precision) noexcept
    void a2r_conv2d_lowp_pack(const a2r_conv2d_shape *s, int precision, const float *w,
                              void *packed) noexcept
    int64_t a2r_conv2d_lowp_workspace_size(const a2r_conv2d_shape *s, int precision) noexcept
    void a2r_conv2d_lowp(const a2r_conv2d_shape *s, int precision, const void *x, int x_u8,
                         const void *packed, const float *x_range, const float *bias,
                         const float *residual, int activation, float alpha, void *workspace,
                         int64_t workspace_bytes, void *y, const float *y_range) noexcept
    int a2r_conv2d_lowp_u8_levels() noexcept
    int a2r_conv2d_lowp_takes_u8(const a2r_conv2d_shape *s, int precision) noexcept
    double a2r_lowp_peak(int precision, int64_t iters, float *sink) noexcept
    double a2r_fma_peak(int64_t iters, float *sink) noexcept
    int a2r_guided_filter(const float *guide, int64_t gc, const float *src, int64_t sc,
                          int64_t h, int64_t w, int64_t r, float eps, float detail,
                          float *out) noexcept


# --- runtime -------------------------------------------------------------------------------------

def best_isa():
    return a2r_best_isa()

def set_isa(int level):
    return a2r_set_isa(level)

def get_isa():
    return a2r_get_isa()

def set_num_threads(int n):
    return a2r_set_num_threads(n)

def num_threads():
    return a2r_num_threads()

def openmp_enabled():
    return bool(a2r_openmp_enabled())

def set_stream_min_bytes(int64_t nbytes):
    """Ops whose input and output bytes together reach nbytes write with streaming stores
    (<= 0: none); returns the previous threshold."""
    return a2r_set_stream_min_bytes(nbytes)


# --- ops (arrays flattened to 1-D by the caller where the layout allows) ---------------------------

def preprocess(const uint8_t[::1] img, int64_t h, int64_t w, const float[::1] scale,
               const float[::1] bias, float[::1] out):
    with nogil:
        a2r_preprocess(&img[0], h, w, &scale[0], &bias[0], &out[0])


def postprocess(const float[::1] x, int64_t h, int64_t w, const float[::1] mean,
                const float[::1] stdv, uint8_t[::1] out):
    """Returns how many x values are NaN or infinite."""
    cdef int64_t bad
    with nogil:
        bad = a2r_postprocess(&x[0], h, w, &mean[0], &stdv[0], &out[0])
    return bad


def channel_stats(const float[::1] x, int64_t nc, int64_t hw, float eps, float[::1] mean,
                  float[::1] stdv):
    with nogil:
        a2r_channel_stats(&x[0], nc, hw, eps, &mean[0], &stdv[0])


def adain(const float[::1] x, int64_t nc, int64_t hw, const float[::1] style_mean,
          const float[::1] style_std, const float[::1] content_mean,
          const float[::1] content_std, float eps, int activation, float alpha, float[::1] y,
          const float[::1] residual=None):
    """content_mean/content_std: None to compute the statistics in the kernel; activation: an
    A2R_ACT_* code, alpha its leaky slope; residual: None or nc*hw values added before it."""
    cdef const float *cm = NULL
    cdef const float *cs = NULL
    cdef const float *r = NULL
    if content_mean is not None:
        cm = &content_mean[0]
        cs = &content_std[0]
    if residual is not None:
        r = &residual[0]
    with nogil:
        a2r_adain(&x[0], nc, hw, &style_mean[0], &style_std[0], cm, cs, eps, activation, alpha,
                  r, &y[0])


def adalin(const float[::1] x, int64_t n, int64_t c, int64_t hw, const float[::1] in_weight,
           const float[::1] ln_weight, const float[::1] gamma, const float[::1] beta,
           float in_eps, float ln_eps, int activation, float alpha, double[::1] moments,
           float[::1] y):
    with nogil:
        a2r_adalin(&x[0], n, c, hw, &in_weight[0], &ln_weight[0], &gamma[0], &beta[0], in_eps,
                   ln_eps, activation, alpha, &moments[0], &y[0])


def silu(const float[::1] x, float[::1] y):
    with nogil:
        a2r_silu(&x[0], &y[0], x.shape[0])


def tanh(const float[::1] x, float[::1] y, float in_scale=1.0, float out_scale=1.0,
         float out_shift=-0.0):
    with nogil:
        a2r_tanh(&x[0], &y[0], x.shape[0], in_scale, out_scale, out_shift)


def gelu(const float[::1] x, float[::1] y, int form):
    with nogil:
        a2r_gelu(&x[0], &y[0], x.shape[0], form)


def softmax_rows(const float[::1] x, float[::1] y, int64_t rows, int64_t n):
    with nogil:
        a2r_softmax_rows(&x[0], &y[0], rows, n)


def layernorm_rows(const float[::1] x, int64_t rows, int64_t n, const float[::1] scale,
                   const float[::1] bias, float eps, float[::1] y):
    """bias: None for none."""
    cdef const float *b = NULL
    if bias is not None:
        b = &bias[0]
    with nogil:
        a2r_layernorm_rows(&x[0], rows, n, &scale[0], b, eps, &y[0])


def resize(const float[::1] x, int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
           int64_t ky, const int64_t[::1] iy, const float[::1] wy, int64_t kx,
           const int64_t[::1] ix, const float[::1] wx, float[::1] rows, float[::1] y):
    with nogil:
        a2r_resize(&x[0], nc, h, w, oh, ow, ky, &iy[0], &wy[0], kx, &ix[0], &wx[0], &rows[0],
                   &y[0])


def maxpool(const float[::1] x, int64_t nc, int64_t h, int64_t w, int64_t kh, int64_t kw,
            int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t oh,
            int64_t ow, float[::1] y):
    with nogil:
        a2r_maxpool(&x[0], nc, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, &y[0])


def avgpool(const float[::1] x, int64_t nc, int64_t h, int64_t w, int64_t kh, int64_t kw,
            int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t oh,
            int64_t ow, const float[::1] count, float[::1] y):
    if count.shape[0] != oh * ow:
        raise ValueError(f"count must hold oh * ow = {oh * ow} values, got {count.shape[0]}")
    with nogil:
        a2r_avgpool(&x[0], nc, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, &count[0], &y[0])


PAD2D_MODES = {"constant": A2R_PAD_CONSTANT, "reflect": A2R_PAD_REFLECT, "edge": A2R_PAD_EDGE}


def pixel_shuffle(const float[::1] x, int64_t n, int64_t c, int64_t h, int64_t w, int64_t r,
                  int64_t top, int64_t left, int64_t oh, int64_t ow, float[::1] y):
    with nogil:
        a2r_pixel_shuffle(&x[0], n, c, h, w, r, top, left, oh, ow, &y[0])


def pixel_shuffle_u8(const uint8_t[::1] x, int64_t n, int64_t c, int64_t h, int64_t w,
                     int64_t r, int64_t top, int64_t left, int64_t oh, int64_t ow,
                     uint8_t[::1] y):
    with nogil:
        a2r_pixel_shuffle_u8(&x[0], n, c, h, w, r, top, left, oh, ow, &y[0])


def transpose(const float[::1] x, int64_t batch, int64_t rows, int64_t cols, float[::1] y):
    with nogil:
        a2r_transpose(&x[0], batch, rows, cols, &y[0])


def im2col(const float[::1] x, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw,
           int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h,
           int64_t dil_w, float[::1] out):
    with nogil:
        a2r_im2col(&x[0], c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
                   &out[0])


cdef a2r_conv2d_shape _conv_shape(tuple shape):
    """shape = (n, c, h, w, o, groups, kh, kw, sh, sw, ph, pw, dh, dw)."""
    cdef a2r_conv2d_shape s
    (s.n, s.c, s.h, s.w, s.o, s.groups, s.kh, s.kw,
     s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.dil_h, s.dil_w) = shape
    return s


def conv2d_packed_size(tuple shape):
    """Floats of packed weights at the active ISA level (shape: see _conv_shape)."""
    cdef a2r_conv2d_shape s = _conv_shape(shape)
    return a2r_conv2d_packed_size(&s)


def conv2d_pack(tuple shape, const float[::1] w, float[::1] packed):
    cdef a2r_conv2d_shape s = _conv_shape(shape)
    with nogil:
        a2r_conv2d_pack(&s, &w[0], &packed[0])


def conv2d_workspace_size(tuple shape):
    """Floats of scratch at the active ISA level and thread count."""
    cdef a2r_conv2d_shape s = _conv_shape(shape)
    return a2r_conv2d_workspace_size(&s)


def conv2d_set_algo(int algo):
    """0 auto, 1 direct, 2 Winograd (3x3 stride-1 convs); returns the previous setting."""
    return a2r_conv2d_set_algo(algo)


def conv2d(tuple shape, const float[::1] x, const float[::1] packed, const float[::1] bias,
           const float[::1] residual, int activation, float alpha, float[::1] workspace,
           float[::1] y):
    """bias, residual: None when absent."""
    cdef a2r_conv2d_shape s = _conv_shape(shape)
    cdef const float *b = NULL
    cdef const float *r = NULL
    if bias is not None:
        b = &bias[0]
    if residual is not None:
        r = &residual[0]
    with nogil:
        a2r_conv2d(&s, &x[0], &packed[0], b, r, activation, alpha, &workspace[0],
                   workspace.shape[0], &y[0])


def conv2d_lowp_packed_size(tuple shape, int precision):
    """Bytes of packed weights at the active ISA level (precision: 1 bf16, 2 int8)."""
    cdef a2r_conv2d_shape s = _conv_shape(shape)
    return a2r_conv2d_lowp_packed_size(&s, precision)


def conv2d_lowp_pack(tuple shape, int precision, const float[::1] w, uint8_t[::1] packed):
    cdef a2r_conv2d_shape s = _conv_shape(shape)
    with nogil:
        a2r_conv2d_lowp_pack(&s, precision, &w[0], &packed[0])


def conv2d_lowp_workspace_size(tuple shape, int precision):
    """Bytes of scratch at the active ISA level and thread count."""
    cdef a2r_conv2d_shape s = _conv_shape(shape)
    return a2r_conv2d_lowp_workspace_size(&s, precision)


def conv2d_lowp(tuple shape, int precision, const uint8_t[::1] x, bint x_u8,
                const uint8_t[::1] packed, float lo, float hi, const float[::1] bias,
                const float[::1] residual, int activation, float alpha, uint8_t[::1] workspace,
                uint8_t[::1] y, tuple y_range):
    """x, y: the bytes of the arrays (float32, or uint8 levels: x_u8, y_range given); bias,
    residual, y_range: None when absent; lo, hi: the int8 activation range (ignored by bf16)."""
    cdef a2r_conv2d_shape s = _conv_shape(shape)
    cdef float x_range[2]
    cdef float out_range[2]
    cdef const float *yr = NULL
    cdef const float *b = NULL
    cdef const float *r = NULL
    x_range[0] = lo
    x_range[1] = hi
    if y_range is not None:
        out_range[0] = y_range[0]
        out_range[1] = y_range[1]
        yr = out_range
    if bias is not None:
        b = &bias[0]
    if residual is not None:
        r = &residual[0]
    with nogil:
        a2r_conv2d_lowp(&s, precision, &x[0], x_u8, &packed[0], x_range, b, r, activation,
                        alpha, &workspace[0], workspace.shape[0], &y[0], yr)


def conv2d_lowp_takes_u8(tuple shape, int precision):
    """Whether conv2d_lowp takes uint8 levels as x for this shape (int8, implicit path)."""
    cdef a2r_conv2d_shape s = _conv_shape(shape)
    return bool(a2r_conv2d_lowp_takes_u8(&s, precision))


def conv2d_lowp_u8_levels():
    """Activation levels of the active int8 variant (255 or 127)."""
    return a2r_conv2d_lowp_u8_levels()


def lowp_peak(int precision, int64_t iters):
    """Run conv2d_lowp's roofline loop (1 bf16, 2 int8) on the current thread count; returns
    the operations done (2 per multiply-add)."""
    cdef float sink = 0
    cdef double ops
    with nogil:
        ops = a2r_lowp_peak(precision, iters, &sink)
    return ops


def fma_peak(int64_t iters):
    """Run the FMA roofline loop on the current thread count; returns the flops done."""
    cdef float sink = 0
    cdef double flops
    with nogil:
        flops = a2r_fma_peak(iters, &sink)
    return flops


def guided_filter(const float[::1] guide, int64_t gc, const float[::1] src, int64_t sc, int64_t h,
                  int64_t w, int64_t r, float eps, float detail, float[::1] out):
    cdef int status
    with nogil:
        status = a2r_guided_filter(&guide[0], gc, &src[0], sc, h, w, r, eps, detail, &out[0])
    if status == A2R_ENOMEM:
        raise MemoryError("guided_filter: scratch buffers could not be allocated")


# --- raw-address entry points ------------------------------------------------------------------
# For callers that run the same buffers many times (the executor's plans): the addresses
# (ndarray.ctypes.data) of float32 buffers the caller checked once and keeps alive, instead of
# typed memoryviews, whose acquisition costs microseconds per argument and call: more than
# the kernel on a small picture.

def pad2d_at(size_t x, int64_t nc, int64_t h, int64_t w, int64_t top, int64_t bottom,
             int64_t left, int64_t right, int mode, float value, size_t y):
    with nogil:
        a2r_pad2d(<const float *>x, nc, h, w, top, bottom, left, right, mode, value, <float *>y)


def crop_add_at(size_t x, int64_t nc, int64_t xh, int64_t xw, int64_t top, int64_t left,
                size_t b, int64_t h, int64_t w, size_t y):
    with nogil:
        a2r_crop_add(<const float *>x, nc, xh, xw, top, left, <const float *>b, h, w, <float *>y)


def adain_at(size_t x, int64_t nc, int64_t hw, size_t style_mean, size_t style_std,
             size_t content_mean, size_t content_std, float eps, int activation, float alpha,
             size_t residual, size_t y):
    """adain with addresses; content_mean/content_std: 0 to compute the statistics here;
    residual: 0 for none."""
    with nogil:
        a2r_adain(<const float *>x, nc, hw, <const float *>style_mean,
                  <const float *>style_std, <const float *>content_mean,
                  <const float *>content_std, eps, activation, alpha,
                  <const float *>residual, <float *>y)


def adalin_at(size_t x, int64_t n, int64_t c, int64_t hw, size_t in_weight, size_t ln_weight,
              size_t gamma, size_t beta, float in_eps, float ln_eps, int activation,
              float alpha, size_t moments, size_t y):
    """adalin with addresses (moments: float64 scratch)."""
    with nogil:
        a2r_adalin(<const float *>x, n, c, hw, <const float *>in_weight,
                   <const float *>ln_weight, <const float *>gamma, <const float *>beta, in_eps,
                   ln_eps, activation, alpha, <double *>moments, <float *>y)


def conv2d_at(tuple shape, size_t x, size_t packed, size_t bias, size_t residual,
              int activation, float alpha, size_t workspace, int64_t workspace_floats,
              size_t y):
    """conv2d with addresses; bias, residual: 0 when absent."""
    cdef a2r_conv2d_shape s = _conv_shape(shape)
    with nogil:
        a2r_conv2d(&s, <const float *>x, <const float *>packed, <const float *>bias,
                   <const float *>residual, activation, alpha, <float *>workspace,
                   workspace_floats, <float *>y)
