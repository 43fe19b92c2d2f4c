"""Public ops: validate in Python, compute in the native CPU kernels.

Every function takes numpy arrays of the documented dtype; any strides or byte order (a copy is
made when needed), never an empty array. Errors name the argument, what was expected and what
was given: ``TypeError`` for a wrong type or dtype, ``ValueError`` for a wrong shape or value.
``out=`` (where offered) must be a C-contiguous array of the exact shape and dtype of the result.
The numpy oracle of each op is ``a2r_edge.model.reference``.
"""
from __future__ import annotations

import math
import numbers
import os
import threading

import numpy as np

from .runtime import cpu as _cpu  # noqa: F401  (sets the ISA level and threads at import)
from . import _kernels, _settings

__all__ = ["preprocess", "postprocess", "channel_stats", "adain", "adalin", "silu", "tanh", "erf",
           "gelu", "pixel_shuffle", "im2col", "conv2d", "Conv2d", "guided_filter"]

# Fusable activations -> their A2R_ACT_* codes (cpu_ops/include/a2r_kernels.h; the CUDA library's
# a2r_cuda.h takes the same codes), shared by conv2d, adain, the executor and runtime/cuda.py.
# Defined here only.
ACT_CODES = {None: 0, "silu": 1, "relu": 2, "leaky_relu": 3}
ACTIVATIONS = tuple(ACT_CODES)  # the names Conv2d and conv2d take


# Arrays (copies and results) larger than physical memory are refused before allocating: a
# zero-strided view can declare terabytes over a few bytes, and the copy would only die later.
_PHYS_BYTES = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _check_bytes(shape, dtype, name: str) -> None:
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    if nbytes > _PHYS_BYTES:
        raise MemoryError(f"{name} of shape {tuple(shape)} needs {nbytes / 2**30:.1f} GiB, more "
                          f"than this machine's {_PHYS_BYTES / 2**30:.1f} GiB of memory")


# --- validation helpers -------------------------------------------------------------------------

def _array(x, name: str, dtype, ndims: tuple[int, ...], shape_doc: str) -> np.ndarray:
    """x as a C-contiguous native-order array of ``dtype`` with one of ``ndims`` dimensions."""
    dtype = np.dtype(dtype)
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray of {dtype} with shape {shape_doc}, "
                        f"got {type(x).__name__}")
    if x.dtype.newbyteorder("=") != dtype:
        raise TypeError(f"{name} must have dtype {dtype}, got {x.dtype}")
    if x.ndim not in ndims:
        raise ValueError(f"{name} must have shape {shape_doc}, got {x.shape}")
    if x.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {x.shape}")
    _check_bytes(x.shape, dtype, name)  # the copy below may be of a huge zero-strided view
    # copies only if strided or byte-swapped; the reshape keeps a 0-d shape (numpy makes it 1-d)
    return np.ascontiguousarray(x, dtype=dtype).reshape(x.shape)


def _out(out, shape: tuple[int, ...], dtype, *inputs: np.ndarray, inplace_ok: bool = False):
    """A fresh result array, or ``out`` after checking it; ``inplace_ok``: out may BE the input."""
    dtype = np.dtype(dtype)
    if out is None:
        _check_bytes(shape, dtype, "the result")
        return np.empty(shape, dtype)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray or None, got {type(out).__name__}")
    if out.dtype != dtype or out.shape != tuple(shape) or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous {dtype} array of shape {tuple(shape)}, got "
                         f"{out.dtype} {out.shape}"
                         f"{'' if out.flags.c_contiguous else ' (not C-contiguous)'}")
    if not out.flags.writeable:
        raise ValueError("out must be writeable")
    for a in inputs:
        same = inplace_ok and a.shape == out.shape and \
            a.__array_interface__["data"][0] == out.__array_interface__["data"][0]
        if not same and np.shares_memory(a, out):
            raise ValueError("out must not overlap an input" +
                             (" (except being the very same array)" if inplace_ok else ""))
    return out


# Padded picture sides, kernel extents and strides of conv2d / im2col stay below 2^31, so the
# kernels' int64 index arithmetic (sides + 2 * pads, products of two extents) cannot overflow.
_MAX_EXTENT = 2**31 - 1


def _check_extents(h: int, w: int, kernel, stride, pad, dilation) -> None:
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, pad, dilation
    for what, v in (("padded height H + 2*pad", h + 2 * ph), ("padded width W + 2*pad", w + 2 * pw),
                     ("kernel extent dilation*(kh-1)+1", dh * (kh - 1) + 1),
                     ("kernel extent dilation*(kw-1)+1", dw * (kw - 1) + 1),
                     ("stride", max(sh, sw))):
        if v > _MAX_EXTENT:
            raise ValueError(f"{what} = {v} exceeds {_MAX_EXTENT} (2^31 - 1): pad {pad}, "
                             f"dilation {dilation}, kernel {kernel}, stride {stride}")


def _real(v, name: str, *, minimum: float | None = None, strict: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(v).__name__}")
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    if minimum is not None and (v <= minimum if strict else v < minimum):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {minimum}, got {v}")
    return v


def _int(v, name: str, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    if v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {v}")
    return int(v)


def _pair(v, name: str, minimum: int) -> tuple[int, int]:
    """An int or a pair of ints, each >= minimum."""
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"{name} must be an int or a pair of ints, got {v!r}")
        return _int(v[0], name, minimum), _int(v[1], name, minimum)
    value = _int(v, name, minimum)
    return value, value


def _reals(v, name: str, what: str) -> np.ndarray:
    """v as a float64 array when it holds only real numbers (None or strings are a TypeError)."""
    try:
        a = np.asarray(v)
    except (TypeError, ValueError):
        a = None
    if a is None or a.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be {what}, got {v!r}")
    return a.astype(np.float64)


def _triple(v, name: str, nonzero: bool = False) -> np.ndarray:
    """Three finite per-channel values (R, G, B) as float32."""
    a = _reals(v, name, "3 real numbers")
    if a.shape != (3,):
        raise ValueError(f"{name} must be 3 numbers (R, G, B), got shape {a.shape}")
    if not np.all(np.isfinite(a)) or (nonzero and np.any(a == 0)):
        raise ValueError(f"{name} must be finite{' and non-zero' if nonzero else ''}, got {v!r}")
    return a.astype(np.float32)


def _per_plane(v, name: str, n: int, c: int, positive: bool = False) -> np.ndarray:
    """Per-channel values of shape (C,) or (N, C), broadcast to N*C float32."""
    a = _reals(v, name, "an array of real numbers")
    if a.shape not in ((c,), (n, c)):
        raise ValueError(f"{name} must have shape ({c},) or ({n}, {c}), got {a.shape}")
    if not np.all(np.isfinite(a)) or (positive and np.any(a <= 0)):
        raise ValueError(f"{name} must be finite{' and > 0' if positive else ''}")
    return np.ascontiguousarray(np.broadcast_to(a, (n, c)), np.float32).reshape(-1)


# --- ops ----------------------------------------------------------------------------------------

def preprocess(img, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), out=None):
    """BGR uint8 (H, W, 3) -> normalised RGB float32 (1, 3, H, W) in one pass.

    ``out[0, c] = (img[..., 2 - c] / 255 - mean[c]) / std[c]`` for c = R, G, B.

    >>> ops.preprocess(np.zeros((2, 2, 3), np.uint8))[0, :, 0, 0]
    array([-1., -1., -1.], dtype=float32)
    """
    img = _array(img, "img", np.uint8, (3,), "(H, W, 3)")
    if img.shape[2] != 3:
        raise ValueError(f"img must have 3 channels (BGR), got shape {img.shape}")
    m, s = _triple(mean, "mean"), _triple(std, "std", nonzero=True)
    h, w = img.shape[:2]
    out = _out(out, (1, 3, h, w), np.float32, img)
    scale = (1.0 / (255.0 * s.astype(np.float64))).astype(np.float32)
    bias = (-m.astype(np.float64) / s).astype(np.float32)
    _kernels.preprocess(img.reshape(-1), h, w, scale, bias, out.reshape(-1))
    return out


class NonFiniteError(ValueError):
    """postprocess(finite=True) of x holding ``count`` NaN or infinite values."""

    def __init__(self, count: int, size: int):
        super().__init__(f"{count} NaN or infinite value(s) of {size}")
        self.count, self.size = count, size


def postprocess(x, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), out=None, finite=False):
    """RGB float32 (1, 3, H, W) or (3, H, W) -> BGR uint8 (H, W, 3).

    ``v = (x * std + mean) * 255`` in float32, rounded half to even, clipped to [0, 255];
    NaN -> 0. Bit-exact on every ISA level and thread count. finite: NonFiniteError when x
    holds NaN or infinite values (counted in the same pass; ``out`` is written either way).
    """
    x = _array(x, "x", np.float32, (3, 4), "(1, 3, H, W) or (3, H, W)")
    if x.shape[-3] != 3 or (x.ndim == 4 and x.shape[0] != 1):
        raise ValueError(f"x must have shape (1, 3, H, W) or (3, H, W), got {x.shape}")
    m, s = _triple(mean, "mean"), _triple(std, "std")
    h, w = x.shape[-2:]
    out = _out(out, (h, w, 3), np.uint8, x)
    bad = _kernels.postprocess(x.reshape(-1), h, w, m, s, out.reshape(-1))
    if finite and bad:
        raise NonFiniteError(bad, x.size)
    return out


def channel_stats(x, eps=1e-5):
    """Per-(n, c) mean and std = sqrt(biased var + eps) of float32 (N, C, H, W).

    Returns two float32 (N, C) arrays. Accurate for large offsets (mean 1000, std 1).
    """
    x = _array(x, "x", np.float32, (4,), "(N, C, H, W)")
    eps = _real(eps, "eps", minimum=0.0)
    n, c, h, w = x.shape
    mean, std = np.empty((n, c), np.float32), np.empty((n, c), np.float32)
    _kernels.channel_stats(x.reshape(-1), n * c, h * w, eps, mean.reshape(-1), std.reshape(-1))
    return mean, std


def adain(x, style_mean, style_std, eps=1e-5, content_stats=None, out=None):
    """Adaptive instance normalisation of float32 (N, C, H, W), per (n, c):

    ``y = (x - mu) / sqrt(var + eps) * style_std + style_mean``.

    style_mean, style_std: shape (C,) or (N, C). content_stats: ``(mean, std)`` as returned by
    ``channel_stats`` (e.g. of the whole picture, shared by its tiles); default: x's own.
    ``out`` may be ``x`` itself (in place).
    """
    x = _array(x, "x", np.float32, (4,), "(N, C, H, W)")
    n, c, h, w = x.shape
    eps = _real(eps, "eps", minimum=0.0, strict=content_stats is None)
    sm = _per_plane(style_mean, "style_mean", n, c)
    ss = _per_plane(style_std, "style_std", n, c)
    cm = cs = None
    if content_stats is not None:
        if not isinstance(content_stats, (tuple, list)) or len(content_stats) != 2:
            raise TypeError("content_stats must be a (mean, std) pair from channel_stats()")
        cm = _per_plane(content_stats[0], "content_stats[0] (mean)", n, c)
        cs = _per_plane(content_stats[1], "content_stats[1] (std)", n, c, positive=True)
    out = _out(out, x.shape, np.float32, x, inplace_ok=True)
    _kernels.adain(x.reshape(-1), n * c, h * w, sm, ss, cm, cs, eps, ACT_CODES[None], 0.0,
                   out.reshape(-1))
    return out


def adalin(x, in_weight, ln_weight, gamma, beta, in_eps=1e-5, ln_eps=1e-5, out=None):
    """U-GAT-IT's adaptive layer-instance normalisation (AdaLIN, ILN) of float32 (N, C, H, W):

    ``y = (in_weight * (x - mu_nc) / sqrt(var_nc + in_eps)
    + ln_weight * (x - mu_n) / sqrt(var_n + ln_eps)) * gamma + beta``

    with the instance statistics (mu_nc, var_nc) over H, W and the layer ones (mu_n, var_n) over
    C, H, W (biased variances). in_weight, ln_weight: shape (C,) (rho and 1 - rho); gamma, beta:
    (C,) or (N, C). Two passes over x. ``out`` may be ``x`` itself (in place).
    """
    x = _array(x, "x", np.float32, (4,), "(N, C, H, W)")
    n, c, h, w = x.shape
    in_eps = _real(in_eps, "in_eps", minimum=0.0, strict=True)
    ln_eps = _real(ln_eps, "ln_eps", minimum=0.0, strict=True)
    wi, wl = (_per_plane(v, name, 1, c) for v, name in ((in_weight, "in_weight"),
                                                         (ln_weight, "ln_weight")))
    g, b = _per_plane(gamma, "gamma", n, c), _per_plane(beta, "beta", n, c)
    out = _out(out, x.shape, np.float32, x, inplace_ok=True)
    _kernels.adalin(x.reshape(-1), n, c, h * w, wi, wl, g, b, in_eps, ln_eps, ACT_CODES[None],
                    0.0, np.empty(2 * n * c), out.reshape(-1))
    return out


def _elementwise(kernel, x, out):
    """kernel(x, out) over a float32 array of any shape, flattened; ``out`` may be ``x``."""
    x = _array(x, "x", np.float32, tuple(range(0, 33)), "(...)")
    out = _out(out, x.shape, np.float32, x, inplace_ok=True)
    kernel(x.reshape(-1), out.reshape(-1))
    return out


def silu(x, out=None):
    """x * sigmoid(x), elementwise on a float32 array of any shape; ``out`` may be ``x``."""
    return _elementwise(_kernels.silu, x, out)


def tanh(x, out=None):
    """tanh elementwise on a float32 array of any shape (relative error below 1e-6, vectorised
    at every ISA level); ``out`` may be ``x``.

    >>> ops.tanh(np.array([0.0, 1.0], np.float32))
    array([0.       , 0.7615941], dtype=float32)
    """
    return _elementwise(_kernels.tanh, x, out)


# The gelu kernel's forms -> their A2R_GELU_* codes (cpu_ops/include/a2r_kernels.h): erf alone,
# and GELU by ONNX's names of its two forms (approximate "none" and "tanh").
GELU_CODES = {"erf": 0, "none": 1, "tanh": 2}


def erf(x, out=None):
    """The error function elementwise on a float32 array of any shape (absolute error below
    2e-7, vectorised at every ISA level); ``out`` may be ``x``."""
    return _elementwise(lambda a, y: _kernels.gelu(a, y, GELU_CODES["erf"]), x, out)


def gelu(x, approximate="none", out=None):
    """GELU elementwise on a float32 array of any shape, as ONNX Gelu: ``x/2 (1 + erf(x /
    sqrt 2))`` (relative error below 5e-6), or with ``approximate="tanh"`` ``x/2 (1 +
    tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (below 2e-5: the float32 cubic), where the result
    is a normal float. ``out`` may be ``x``."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return _elementwise(lambda a, y: _kernels.gelu(a, y, GELU_CODES[approximate]), x, out)


def pixel_shuffle(x, r, out=None, offset=(0, 0)):
    """torch PixelShuffle (ONNX DepthToSpace, CRD): (N, C*r*r, H, W) -> (N, C, H*r, W*r).
    With offset=(top, left), or an out smaller than that: the window of that result from
    (top, left), as large as out (default: to the end). The crop after a ConvTranspose's
    sub-pixel form, made in the same pass."""
    x = _array(x, "x", np.float32, (4,), "(N, C, H, W)")
    r = _int(r, "r", 1)
    top, left = _pair(offset, "offset", 0)
    n, c, h, w = x.shape
    if c % (r * r):
        raise ValueError(f"x's channel count must be a multiple of r*r = {r * r}, got {c}")
    if top >= h * r or left >= w * r:
        raise ValueError(f"offset {(top, left)} must lie inside the shuffled {h * r}x{w * r}")
    shape = (n, c // (r * r), h * r - top, w * r - left)
    got = getattr(out, "shape", ())
    if len(got) == 4 and got[:2] == shape[:2] and got[2] <= shape[2] and got[3] <= shape[3]:
        shape = tuple(got)  # a smaller window
    out = _out(out, shape, np.float32, x)
    _kernels.pixel_shuffle(x.reshape(-1), n, c // (r * r), h, w, r, top, left, out.shape[2],
                           out.shape[3], out.reshape(-1))
    return out


def im2col(x, kernel, stride=1, pad=0, dilation=1, out=None):
    """Caffe-layout im2col of float32 (C, H, W) with zero padding -> (C*kh*kw, OH*OW).

    Row ``(c*kh + i)*kw + j`` holds tap (i, j) of channel c for every output position.
    kernel, stride, pad, dilation: an int or an (h, w) pair.
    """
    x = _array(x, "x", np.float32, (3,), "(C, H, W)")
    (kh, kw), (sh, sw) = _pair(kernel, "kernel", 1), _pair(stride, "stride", 1)
    (ph, pw), (dh, dw) = _pair(pad, "pad", 0), _pair(dilation, "dilation", 1)
    c, h, w = x.shape
    _check_extents(h, w, (kh, kw), (sh, sw), (ph, pw), (dh, dw))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"kernel {(kh, kw)} with dilation {(dh, dw)} does not fit x of shape "
                         f"{x.shape} padded by {(ph, pw)}: output would be {oh}x{ow}")
    out = _out(out, (c * kh * kw, oh * ow), np.float32, x)
    _kernels.im2col(x.reshape(-1), c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, out.reshape(-1))
    return out


# Arithmetic of a convolution's multiplies (the epilogue and the output are float32 in all):
# fp32; bf16 (inputs rounded to bf16, fp32 sums); int8 (per-output-channel weight scales, u8
# activations over a calibrated range, int32 sums). cpu_ops/src/conv2d_lowp/kernel.c.
PRECISIONS = ("fp32", "bf16", "int8")
_PRECISION_CODES = {"bf16": 1, "int8": 2}
_conv_scratch = threading.local()  # .buf: the calling thread's Conv2d workspace (grows, kept);
#                                   .at, .floats: its address and size (Conv2d.bind's calls)


class Conv2d:
    """A 2-D convolution with its weights packed once for the native micro-kernel.

    ``Conv2d(w, b, stride, pad, dilation, groups, activation, alpha=0.01)`` validates and packs
    w (O, C/groups, kh, kw) float32; calling it with x (N, C, H, W) float32 returns
    ``activation(conv(x, w) + b + residual)`` as float32 (N, O, OH, OW), zero padding.
    stride, pad, dilation: an int or an (h, w) pair. activation: None, 'relu', 'leaky_relu'
    (negative slope ``alpha``) or 'silu'. residual: float32 (N, O, OH, OW) added before the
    activation (a ResNet skip). The scratch buffer is kept and reused across calls; one instance
    must not be called from two threads at once.

    precision: 'fp32' (default), 'bf16' or 'int8' (see PRECISIONS; every ISA level runs all
    three, the dot-product units making bf16/int8 faster where the CPU has them).
    act_range: int8 only, the (lo, hi) range of x found by calibration; values outside are
    clamped. None: each call quantises over its own x.min(), x.max() (one more pass over x).
    Between int8 layers the activations can stay u8 (4x less memory traffic than float32):
    ``out_range=`` (the next layer's act_range) makes the result uint8 levels on that range's
    grid, and a layer with act_range takes such a uint8 x where ``takes_u8(x.shape)``; the
    pair computes bit for bit what the float32 result would have given, at the same ISA level.

    >>> conv = Conv2d(np.ones((8, 3, 3, 3), np.float32), pad=1, activation="relu")
    >>> conv(np.ones((1, 3, 16, 16), np.float32)).shape
    (1, 8, 16, 16)
    """

    def __init__(self, w, b=None, stride=1, pad=0, dilation=1, groups=1, activation=None, *,
                 alpha=0.01, precision="fp32", act_range=None):
        w = _array(w, "w", np.float32, (4,), "(O, C/groups, kh, kw)")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.precision = precision
        self.act_range = None
        if act_range is not None:
            if precision != "int8":
                raise ValueError(f"act_range applies to precision='int8' only, not {precision!r}")
            self.act_range = _act_range(act_range)
        self.groups = _int(groups, "groups", 1)
        self.stride, self.pad = _pair(stride, "stride", 1), _pair(pad, "pad", 0)
        self.dilation = _pair(dilation, "dilation", 1)
        o, cg, kh, kw = w.shape
        if o % self.groups:
            raise ValueError(f"groups={self.groups} must divide w's outputs ({o})")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        self.activation = activation
        self.alpha = _real(alpha, "alpha")
        if b is not None:
            b = _array(b, "b", np.float32, (1,), f"({o},)")
            if b.shape != (o,):
                raise ValueError(f"b must have shape ({o},), got {b.shape}")
        self.w, self.b = w.copy(), (None if b is None else b.copy())  # immune to caller edits
        self._packed: dict[int, np.ndarray] = {}   # ISA level -> packed weights (layout differs)

    def _shape(self, x_shape) -> tuple:
        n, c, h, wd = x_shape
        o, _, kh, kw = self.w.shape
        return (n, c, h, wd, o, self.groups, kh, kw, *self.stride, *self.pad, *self.dilation)

    def output_shape(self, x_shape) -> tuple[int, int, int, int]:
        """(N, O, OH, OW) for an input of shape x_shape (N, C, H, W); ValueError if it does not fit."""
        n, c, h, wd = x_shape
        o, cg, kh, kw = self.w.shape
        (sh, sw), (ph, pw), (dh, dw) = self.stride, self.pad, self.dilation
        if c != cg * self.groups:
            raise ValueError(f"x must have C = groups * w.shape[1] = {cg * self.groups} channels "
                             f"for w of shape {self.w.shape} and groups={self.groups}, got "
                             f"shape {tuple(x_shape)}")
        _check_extents(h, wd, (kh, kw), self.stride, self.pad, self.dilation)
        oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        if oh < 1 or ow < 1:
            raise ValueError(f"kernel {(kh, kw)} with dilation {(dh, dw)} does not fit x of shape "
                             f"{tuple(x_shape)} padded by {(ph, pw)}: output would be {oh}x{ow}")
        return n, o, oh, ow

    def takes_u8(self, x_shape) -> bool:
        """Whether x of this shape may be uint8 levels on act_range's grid (int8 with act_range,
        and a convolution the kernel reads through its strip of lanes)."""
        return self.precision == "int8" and self.act_range is not None and \
            _kernels.conv2d_lowp_takes_u8(self._shape(tuple(x_shape)), _PRECISION_CODES["int8"])

    def __call__(self, x, residual=None, out=None, out_range=None):
        x_u8 = isinstance(x, np.ndarray) and x.dtype == np.uint8
        x = _array(x, "x", np.uint8 if x_u8 else np.float32, (4,), "(N, C, H, W)")
        n, o, oh, ow = self.output_shape(x.shape)
        if x_u8 and not self.takes_u8(x.shape):
            raise TypeError("x must be float32: a uint8 x needs precision='int8' with an "
                            "act_range and a convolution that takes_u8(x.shape)")
        if out_range is not None:
            if self.precision != "int8":
                raise ValueError(f"out_range applies to precision='int8' only, not "
                                 f"{self.precision!r}")
            out_range = _act_range(out_range)
        if residual is not None:
            residual = _array(residual, "residual", np.float32, (4,), f"({n}, {o}, {oh}, {ow})")
            if residual.shape != (n, o, oh, ow):
                raise ValueError(f"residual must have shape {(n, o, oh, ow)}, got "
                                 f"{residual.shape}")
        out = _out(out, (n, o, oh, ow), np.float32 if out_range is None else np.uint8, x,
                   *([residual] if residual is not None else []))
        shape = self._shape(x.shape)
        if self.precision != "fp32":
            return self._call_lowp(shape, x, residual, out, out_range)
        need = self._fp32_workspace_need(shape, x.shape)
        _kernels.conv2d(shape, x.reshape(-1), self._fp32_packed(shape), self.b,
                        None if residual is None else residual.reshape(-1),
                        ACT_CODES[self.activation], self.alpha, _fp32_workspace(need),
                        out.reshape(-1))
        return out

    def bind(self, x, residual=None, out=None, out_range=None):
        """A no-argument callable doing ``self(x, residual=residual, out=out,
        out_range=out_range)`` with every check made once, here: for fixed buffers run many
        times (an executor's plan), where the checks would cost more than a small convolution.
        x, residual and out must keep their shape and memory; out is required. Strided arrays
        or precisions other than fp32 get a plain deferred call."""
        if out is None:
            raise ValueError("bind needs out (the array every call writes)")
        if out_range is not None and self.precision != "int8":
            raise ValueError(f"out_range applies to precision='int8' only, not "
                             f"{self.precision!r}")
        arrays = [a for a in (x, residual, out) if a is not None]
        if self.precision != "fp32" or not all(isinstance(a, np.ndarray) and
                                               a.flags.c_contiguous and a.dtype == np.float32
                                               for a in arrays):
            return lambda: self(x, residual=residual, out=out, out_range=out_range)
        n, o, oh, ow = self.output_shape(_array(x, "x", np.float32, (4,), "(N, C, H, W)").shape)
        if residual is not None and residual.shape != (n, o, oh, ow):
            raise ValueError(f"residual must have shape {(n, o, oh, ow)}, got {residual.shape}")
        _out(out, (n, o, oh, ow), np.float32, x, *arrays[1:-1])
        shape = self._shape(x.shape)
        # workspace floats per (ISA level, thread count): the kernel runs on as many threads
        # as the workspace has slots, so a need found at 1 thread kept a plan built there at 1
        # thread after the count rose (the 512x512 fp32 conversion: 38 ms at 2 threads, not 24)
        need_at = {(_kernels.get_isa(), _kernels.num_threads()):
                   self._fp32_workspace_need(shape, x.shape)}   # (too large: raises here)
        # the native entry point taking addresses (no memoryview per argument and call): of
        # x, residual, out (kept by this closure), bias (self.b, kept by self), the packing
        # (per ISA level, kept in self._packed) and the thread's workspace (_conv_scratch)
        args = (x.ctypes.data, 0 if self.b is None else self.b.ctypes.data,
                0 if residual is None else residual.ctypes.data, ACT_CODES[self.activation],
                self.alpha, out.ctypes.data)
        packed_at: dict[int, int] = {}

        def conv():
            level = _kernels.get_isa()
            packed = packed_at.get(level)
            if packed is None:
                packed = packed_at[level] = self._fp32_packed(shape).ctypes.data
            key = (level, _kernels.num_threads())
            need = need_at.get(key)
            if need is None:
                need = need_at[key] = self._fp32_workspace_need(shape, x.shape)
            if getattr(_conv_scratch, "floats", 0) < need:
                _fp32_workspace(need)
            _kernels.conv2d_at(shape, args[0], packed, args[1], args[2], args[3], args[4],
                               _conv_scratch.at, _conv_scratch.floats, args[5])
        conv.keeps = (x, residual, out)
        return conv

    def _fp32_packed(self, shape):
        """The weights packed for the current ISA level (made on first use)."""
        level = _kernels.get_isa()
        packed = self._packed.get(level)
        if packed is None:
            packed = _cache_line_aligned(_kernels.conv2d_packed_size(shape), np.float32)
            _kernels.conv2d_pack(shape, self.w.reshape(-1), packed)
            self._packed[level] = packed
        return packed

    def _fp32_workspace_need(self, shape, x_shape) -> int:
        need = _kernels.conv2d_workspace_size(shape)
        budget = _settings.get("A2R_MEMORY_MB") << 20
        if need * 4 > budget:
            raise _settings.MemoryLimitError(
                f"conv2d scratch for x of shape {x_shape} with w of shape {self.w.shape} needs "
                f"{need * 4 / 2**20:.0f} MiB, more than A2R_MEMORY_MB={budget >> 20}")
        return need

    def _call_lowp(self, shape, x, residual, out, out_range):
        code = _PRECISION_CODES[self.precision]
        level = _kernels.get_isa()
        packed = self._packed.get(level)
        if packed is None:
            packed = _cache_line_aligned(_kernels.conv2d_lowp_packed_size(shape, code),
                                         np.uint8)
            _kernels.conv2d_lowp_pack(shape, code, self.w.reshape(-1), packed)
            self._packed[level] = packed
        lo, hi = 0.0, 0.0
        if self.precision == "int8":
            if self.act_range is not None:
                lo, hi = self.act_range
            else:
                lo, hi = float(x.min()), float(x.max())
                if not (math.isfinite(lo) and math.isfinite(hi)):
                    raise ValueError("x must be finite for int8 without act_range (its range "
                                     f"sets the quantisation), got min {lo}, max {hi}")
        need = _kernels.conv2d_lowp_workspace_size(shape, code)
        workspace = getattr(_conv_scratch, "lowp", None)
        if workspace is None or workspace.size < need:
            workspace = _conv_scratch.lowp = None
            workspace = _conv_scratch.lowp = np.empty(need, np.uint8)
        _kernels.conv2d_lowp(shape, code, x.reshape(-1).view(np.uint8), x.dtype == np.uint8,
                             packed, lo, hi, self.b,
                             None if residual is None else residual.reshape(-1),
                             ACT_CODES[self.activation], self.alpha, workspace,
                             out.reshape(-1).view(np.uint8), out_range)
        return out


def _cache_line_aligned(n: int, dtype) -> np.ndarray:
    """np.empty(n, dtype) starting on a 64-byte boundary (numpy gives 16). For packed weights:
    the AMX kernels load them in 64-byte tile rows, and with rows split across two cache lines
    a 64-channel bf16 conv at 128^2 ran 1.6x slower, int8 1.15x (cpu_ops a2r_kernels.h)."""
    nbytes = n * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + 63, np.uint8)
    skip = -raw.ctypes.data % 64
    return raw[skip:skip + nbytes].view(dtype)


def _fp32_workspace(need: int) -> np.ndarray:
    """The calling thread's Conv2d workspace, grown to ``need`` floats."""
    workspace = getattr(_conv_scratch, "buf", None)
    if workspace is None or workspace.size < need:
        workspace = _conv_scratch.buf = None  # the old buffer goes before the larger comes
        _conv_scratch.floats = 0
        workspace = _conv_scratch.buf = np.empty(need, np.float32)
        _conv_scratch.at, _conv_scratch.floats = workspace.ctypes.data, workspace.size
    return workspace


def _act_range(r) -> tuple[float, float]:
    """(lo, hi) finite floats with lo <= hi, from a calibrated int8 activation range."""
    try:
        lo, hi = (float(v) for v in r)
    except (TypeError, ValueError):
        raise ValueError(f"act_range must be a (lo, hi) pair of numbers, got {r!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise ValueError(f"act_range must be finite with lo <= hi, got {r!r}")
    return lo, hi


def conv2d(x, w, b=None, stride=1, pad=0, dilation=1, groups=1, activation=None, *,
           alpha=0.01, residual=None, out=None, precision="fp32", act_range=None):
    """2-D convolution of float32 (N, C, H, W) by w (O, C/groups, kh, kw), zero padding, with the
    epilogue fused: ``y = activation(conv(x, w) + b + residual)``. One-shot ``Conv2d``: to run
    the same weights many times, build a ``Conv2d`` once (it packs the weights once).

    stride, pad, dilation: an int or an (h, w) pair. activation: None, 'relu', 'leaky_relu'
    (negative slope ``alpha``) or 'silu'. residual: float32 (N, O, OH, OW) added before the
    activation (a ResNet skip). precision, act_range: as Conv2d. Returns float32 (N, O, OH, OW).
    """
    x = _array(x, "x", np.float32, (4,), "(N, C, H, W)")
    conv = Conv2d(w, b, stride, pad, dilation, groups, activation, alpha=alpha,
                  precision=precision, act_range=act_range)
    if x.shape[1] % conv.groups:
        raise ValueError(f"groups={conv.groups} must divide x's channels ({x.shape[1]})")
    return conv(x, residual=residual, out=out)


# Largest guided-filter radius (the CUDA library's bound too). Windows wider than the picture
# are defined (reflected whole periods) and stay so up to here, where the (2r+1)^2 window counts
# are exact in float64 and the float32 window sums of pictures' values stay far from overflow;
# past it, 2r+1 approaches int64's range (2^62: SIGSEGV).
GUIDED_FILTER_MAX_RADIUS = 2**24


def guided_filter(guide, src, radius, eps, out=None, detail=0.0):
    """He et al. guided filter of float32 ``src`` (H, W) or (H, W, C) by ``guide`` (H, W) or
    (H, W, 3); box means over (2*radius+1)^2 windows with reflect borders ("cba|abc"), radius
    0 .. ``GUIDED_FILTER_MAX_RADIUS`` (2^24; windows wider than the picture reflect it whole).
    ``out``: like src, not overlapping guide or src (rows are read after others are written).
    ``detail``: returns q + detail * (src - q), q the filtered picture (an edge-aware base plus
    the detail layer times ``detail``), blended in the filter's last pass; 0: q itself.

    Equals ``cv2.ximgproc.guidedFilter(guide, src, radius, eps)`` within 1e-4, including its
    colour-guide rule: with eps < 1e-2, a 3x3 system whose determinant is below 1e-6 in
    magnitude is solved as if the determinant were 1. NaN or inf in the input spreads down its
    column (running sums), as in the reference.
    """
    guide = _array(guide, "guide", np.float32, (2, 3), "(H, W) or (H, W, 3)")
    src = _array(src, "src", np.float32, (2, 3), "(H, W) or (H, W, C)")
    if guide.ndim == 3 and guide.shape[2] != 3:
        raise ValueError(f"guide must have shape (H, W) or (H, W, 3), got {guide.shape}")
    if guide.shape[:2] != src.shape[:2]:
        raise ValueError(f"guide and src must have the same H, W; got {guide.shape} and "
                         f"{src.shape}")
    radius = _int(radius, "radius", 0)
    if radius > GUIDED_FILTER_MAX_RADIUS:
        raise ValueError(f"radius must be <= {GUIDED_FILTER_MAX_RADIUS} (2^24), got {radius}")
    eps = _real(eps, "eps", minimum=0.0, strict=True)
    detail = _real(detail, "detail")
    h, w = src.shape[:2]
    gc = 1 if guide.ndim == 2 else 3
    sc = 1 if src.ndim == 2 else src.shape[2]
    out = _out(out, src.shape, np.float32, guide, src)
    _kernels.guided_filter(guide.reshape(-1), gc, src.reshape(-1), sc, h, w, radius, eps,
                           detail, out.reshape(-1))
    return out
