"""numpy reference of every op: the oracle the native kernels are tested against.

Written for clarity, not speed; statistics in float64. Inputs are assumed valid (ops.py checks).
"""
from __future__ import annotations

import numpy as np


def preprocess(img, mean, std):
    rgb = img[..., ::-1].astype(np.float32) / np.float32(255)
    x = (rgb - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1))[None]


def postprocess(x, mean, std):
    x = x.reshape(3, x.shape[-2], x.shape[-1])
    m = np.asarray(mean, np.float32)[:, None, None]
    s = np.asarray(std, np.float32)[:, None, None]
    with np.errstate(invalid="ignore", over="ignore"):
        v = (x * s + m) * np.float32(255)  # float32, two roundings, as the contract says
    v = np.clip(np.rint(np.nan_to_num(v, nan=0.0)), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(v.transpose(1, 2, 0)[..., ::-1])


def channel_stats(x, eps=1e-5):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=(2, 3))
    var = x64.var(axis=(2, 3))
    return mean.astype(np.float32), np.sqrt(var + eps).astype(np.float32)


def adain(x, style_mean, style_std, eps=1e-5, content_stats=None):
    n, c = x.shape[:2]
    if content_stats is None:
        content_stats = channel_stats(x, eps)
    mu, sigma = (np.asarray(s, np.float64).reshape(n, c, 1, 1) for s in content_stats)
    sm = np.broadcast_to(np.asarray(style_mean, np.float64), (n, c)).reshape(n, c, 1, 1)
    ss = np.broadcast_to(np.asarray(style_std, np.float64), (n, c)).reshape(n, c, 1, 1)
    return ((x - mu) / sigma * ss + sm).astype(np.float32)


def silu(x):
    with np.errstate(over="ignore", invalid="ignore"):
        return (x / (np.float32(1) + np.exp(-x))).astype(np.float32)


def pixel_shuffle(x, r):
    n, c, h, w = x.shape
    y = x.reshape(n, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3)
    return np.ascontiguousarray(y.reshape(n, c // (r * r), h * r, w * r))


def im2col(x, kernel, stride=(1, 1), pad=(0, 0), dilation=(1, 1)):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, pad, dilation
    c, h, w = x.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.pad(x, ((0, 0), (ph, ph), (pw, pw)))
    cols = np.empty((c, kh, kw, oh, ow), np.float32)
    for i in range(kh):
        for j in range(kw):
            cols[:, i, j] = xp[:, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                               j * dw: j * dw + sw * (ow - 1) + 1: sw]
    return cols.reshape(c * kh * kw, oh * ow)


def activation(y, kind, alpha=0.01):
    """The activations a conv can fuse: None, 'relu', 'leaky_relu' (slope alpha), 'silu'."""
    if kind is None:
        return y
    if kind == "relu":
        return np.maximum(y, 0)
    if kind == "leaky_relu":
        return np.where(y >= 0, y, y * alpha)
    if kind == "silu":
        with np.errstate(over="ignore"):
            return y / (1 + np.exp(-y))
    raise ValueError(kind)


def conv2d(x, w, b=None, stride=(1, 1), pad=(0, 0), dilation=(1, 1), groups=1,
           activation_kind=None, alpha=0.01, residual=None):
    """act(conv(x, w) + b + residual): im2col per group and a float64 matrix product."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    ys = []
    for i in range(n):
        parts = []
        for g in range(groups):
            cols = im2col(x[i, g * cg:(g + 1) * cg], (kh, kw), stride, pad, dilation)
            parts.append(w[g * og:(g + 1) * og].reshape(og, -1).astype(np.float64)
                         @ cols.astype(np.float64))
        ys.append(np.concatenate(parts))
    (sh, sw), (ph, pw), (dh, dw) = stride, pad, dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    y = np.stack(ys).reshape(n, o, oh, ow)
    if b is not None:
        y = y + np.asarray(b, np.float64)[None, :, None, None]
    if residual is not None:
        y = y + residual
    return activation(y, activation_kind, alpha).astype(np.float32)


def box_mean(a, r):
    """Mean over (2r+1)^2 windows of a (H, W, ...) array, reflect borders "cba|abc"."""
    pad = [(r, r), (r, r)] + [(0, 0)] * (a.ndim - 2)
    p = np.pad(a.astype(np.float64), pad, mode="symmetric")
    c = np.cumsum(np.cumsum(p, axis=0), axis=1)
    c = np.pad(c, [(1, 0), (1, 0)] + [(0, 0)] * (a.ndim - 2))
    k = 2 * r + 1
    s = c[k:, k:] - c[:-k, k:] - c[k:, :-k] + c[:-k, :-k]
    return s / (k * k)


def guided_filter(guide, src, radius, eps):
    """He et al. guided filter as cv2.ximgproc.guidedFilter computes it (float64 here).

    Box means reflect "cba|abc" at any radius (box_mean). A colour guide solves
    (Sigma + eps I) a = cov(I, p) through the adjugate of the symmetric 3x3 matrix, and keeps
    OpenCV's guard (ximgproc guided_filter.cpp): when eps < 1e-2, a determinant with
    |det| < 1e-6 is replaced by 1, so there a = adj(Sigma + eps I) cov. Without it the
    reference would differ from cv2 by up to about 1e-2 on smooth pictures with small eps.
    """
    I = guide.astype(np.float64)
    p = src.astype(np.float64)
    squeeze = p.ndim == 2
    if squeeze:
        p = p[..., None]
    mean_p = box_mean(p, radius)
    if I.ndim == 2:
        mean_I = box_mean(I, radius)[..., None]
        var_I = box_mean(I * I, radius)[..., None] - mean_I**2
        cov_Ip = box_mean(I[..., None] * p, radius) - mean_I * mean_p
        a = cov_Ip / (var_I + eps)
        b = mean_p - a * mean_I
        q = box_mean(a, radius) * I[..., None] + box_mean(b, radius)
    else:
        mean_I = box_mean(I, radius)                                       # (H, W, 3)
        corr = box_mean(I[..., :, None] * I[..., None, :], radius)         # (H, W, 3, 3)
        sigma = corr - mean_I[..., :, None] * mean_I[..., None, :] + eps * np.eye(3)
        cov_Ip = box_mean(I[..., :, None] * p[..., None, :], radius) \
            - mean_I[..., :, None] * mean_p[..., None, :]                  # (H, W, 3, C)
        s0, s1, s2 = sigma[..., 0, :], sigma[..., 1, :], sigma[..., 2, :]
        adj = np.stack([np.cross(s1, s2), np.cross(s2, s0), np.cross(s0, s1)], axis=-2)
        det = np.einsum("hwk,hwk->hw", s0, adj[..., 0, :])
        if eps < 1e-2:
            det = np.where(np.abs(det) < 1e-6, 1.0, det)
        a = np.einsum("hwij,hwjc->hwic", adj, cov_Ip) / det[..., None, None]  # (H, W, 3, C)
        b = mean_p - np.einsum("hwk,hwkc->hwc", mean_I, a)
        q = np.einsum("hwk,hwkc->hwc", I, box_mean(a, radius)) + box_mean(b, radius)
    q = q.astype(np.float32)
    return q[..., 0] if squeeze else q
