"""The numpy oracles: of every op (the native kernels are tested against them) and of what a
model package means (``PackageReference``: the Engine, the tools and the benchmarks' plain peer
are checked against it).

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


def adalin(x, in_weight, ln_weight, gamma, beta, in_eps=1e-5, ln_eps=1e-5):
    """U-GAT-IT's AdaLIN/ILN: in_weight * instance norm + ln_weight * layer norm (over C, H, W)
    per channel, then * gamma + beta per (sample, channel); biased variances."""
    n, c = x.shape[:2]
    x64 = x.astype(np.float64)
    inorm = (x64 - x64.mean(axis=(2, 3), keepdims=True)) / np.sqrt(
        x64.var(axis=(2, 3), keepdims=True) + in_eps)
    lnorm = (x64 - x64.mean(axis=(1, 2, 3), keepdims=True)) / np.sqrt(
        x64.var(axis=(1, 2, 3), keepdims=True) + ln_eps)

    def per_channel(v):
        return np.asarray(v, np.float64).reshape(1, c, 1, 1)

    def per_plane(v):
        return np.broadcast_to(np.asarray(v, np.float64), (n, c)).reshape(n, c, 1, 1)
    y = per_channel(in_weight) * inorm + per_channel(ln_weight) * lnorm
    return (y * per_plane(gamma) + per_plane(beta)).astype(np.float32)


def silu(x):
    with np.errstate(over="ignore", invalid="ignore"):
        return (x / (np.float32(1) + np.exp(-x))).astype(np.float32)


def tanh(x):
    return np.tanh(np.asarray(x, np.float64)).astype(np.float32)


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


# --- the meaning of a model package, stage by stage: the one oracle of package semantics --------
# (manifest "a2r_edge.model/1"; the Engine implements it fast in picture/forward.py and stages.py)
#   x  = RGB float32 (1, 3, H', W'), (v/255 - mean)/std, of the input padded by `border_margin`
#        (default 0) on every side, then at the bottom/right to multiples of `stride` (``pad_to``:
#        reflect "dcb|abcd", a 1-pixel side repeated)
#   onnx stage:    y = network(y), + x when ``add_input``
#   adain stage:   y = (y - mu_y) / sqrt(var_y + eps) * t_std + t_mean   per channel over H, W;
#        target (t_mean, t_std): a reference photo's statistics (style=); else, when the stats
#        file has "content_map" {weight (2C, 2C), bias (2C)}: z = weight @ [mu_y; ln s_y] + bias,
#        s_y = sqrt(var_y + eps), t_mean = z[:C], t_std = exp(z[C:]), clipped to mean +-
#        MAP_RANGE std and std * exp(+-MAP_RANGE) of the file's fixed ones; else the fixed ones
#   guided_filter stage: base = guided_filter(guide = luma of x, src = y as (H', W', 3), radius,
#        eps); y = base + detail * (y - base)
#   crop the margin and the stride padding (scaled) off;
#   u8 = clip(round((y * std + mean) * 255), 0, 255) (half to even), BGR.
# With a reference photo, the input is first colour-transferred (``colour_transfer``) and the
# AdaIN target is the statistics of the stages before AdaIN on the photo.

MAP_RANGE = 4.0      # content-map targets stay within the fixed statistics +- this many stds
STYLE_COLOUR = 0.5   # share of the colour move towards a reference photo
LUMA = (0.299, 0.587, 0.114)


def pad_to(x, stride, margin=0):
    """(N, C, H, W) padded by ``margin`` on every side, then at the bottom/right to multiples of
    stride: reflect "dcb|abcd" along each axis, a 1-pixel axis repeated."""
    h, w = x.shape[-2:]
    x = np.pad(x, ((0, 0), (0, 0), (margin, margin + -(h + 2 * margin) % stride), (0, 0)),
               mode="reflect" if h > 1 else "edge")
    return np.pad(x, ((0, 0), (0, 0), (0, 0), (margin, margin + -(w + 2 * margin) % stride)),
                  mode="reflect" if w > 1 else "edge")


def colour_transfer(bgr_u8, reference_bgr_u8, strength=STYLE_COLOUR):
    """Per BGR channel: v -> (v - m) / s * s' + m', m and s = sqrt(var + 1) the picture's,
    m' = m + strength (m_ref - m), s' = s (s_ref / s) ** strength; rounded, clipped to u8."""
    def moments(img):
        v = img.reshape(-1, 3).astype(np.float64)
        return v.mean(0), np.sqrt(v.var(0) + 1.0)
    (m, s), (mr, sr) = moments(bgr_u8), moments(reference_bgr_u8)
    m2, s2 = m + strength * (mr - m), s * (sr / s) ** strength
    return np.clip(np.rint((bgr_u8 - m) / s * s2 + m2), 0, 255).astype(np.uint8)


class PackageReference:
    """A model package folder run stage by stage with onnxruntime (CPU) and numpy, as the
    comment above defines it. guided_filter: the (guide, src, radius, eps) implementation
    (default this module's; tools pass a faster one with the same definition); threads:
    onnxruntime's intra-op threads."""

    def __init__(self, folder, threads=1, guided_filter=guided_filter):
        import json
        import os

        import onnxruntime as ort

        from .package import FORMAT, sha256_of
        with open(os.path.join(folder, "manifest.json")) as fh:
            self.manifest = m = json.load(fh)
        if m.get("format") != FORMAT:
            raise ValueError(f"manifest format must be {FORMAT!r}, got {m.get('format')!r}")
        for name, digest in m["files"].items():
            if sha256_of(os.path.join(folder, name)) != digest:
                raise ValueError(f"{name}: sha256 mismatch")
        self.guided_filter = guided_filter
        self.stride = int(m["stride"])
        self.strength = float(m.get("strength", 1.0))   # the engine's default strength=
        self.margin = int(m.get("border_margin", 0))
        self.mean = np.asarray(m["normalization"]["mean"], np.float32).reshape(1, 3, 1, 1)
        self.std = np.asarray(m["normalization"]["std"], np.float32).reshape(1, 3, 1, 1)
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.stages = []
        for st in m["stages"]:
            st = dict(st)
            if st["kind"] == "onnx":
                st["session"] = ort.InferenceSession(os.path.join(folder, st["file"]), so,
                                                     providers=["CPUExecutionProvider"])
            elif st["kind"] == "adain":
                with open(os.path.join(folder, st["stats"])) as fh:
                    s = json.load(fh)
                st["mean"] = np.asarray(s["mean"], np.float32)
                st["std"] = np.asarray(s["std"], np.float32)
                cmap = s.get("content_map")
                st["map"] = None if cmap is None else (np.asarray(cmap["weight"], np.float64),
                                                       np.asarray(cmap["bias"], np.float64))
            self.stages.append(st)

    def preprocess(self, bgr_u8):
        rgb = np.asarray(bgr_u8)[..., ::-1].astype(np.float32).transpose(2, 0, 1)[None]
        return pad_to(((rgb / 255.0 - self.mean) / self.std).astype(np.float32), self.stride,
                      self.margin)

    def postprocess(self, y, h, w):
        """y for an h x w picture's padded input -> BGR uint8 (h, w, 3), padding cropped."""
        hp, wp = (n + 2 * self.margin + -(n + 2 * self.margin) % self.stride for n in (h, w))
        sy, sx = y.shape[2] / hp, y.shape[3] / wp
        oy, ox = round(self.margin * sy), round(self.margin * sx)
        v = (y[0, :, oy:oy + round(h * sy), ox:ox + round(w * sx)] * self.std[0]
             + self.mean[0]) * 255.0
        v = np.nan_to_num(v, nan=0.0)
        return np.clip(np.rint(v), 0, 255).astype(np.uint8).transpose(1, 2, 0)[..., ::-1].copy()

    def stats_of(self, reference_bgr_u8):
        """(mean, std) of the stages before AdaIN on a reference photo: its target statistics."""
        f = self.forward(self.preprocess(reference_bgr_u8), stop_before_kind="adain")
        eps = next(s["eps"] for s in self.stages if s["kind"] == "adain")
        return f.mean((0, 2, 3)), np.sqrt(f.var((0, 2, 3)) + eps)

    @staticmethod
    def run_onnx(st, x):
        sess = st["session"]
        return sess.run(None, {sess.get_inputs()[0].name: x})[0]

    def forward(self, x, stats=None, enhance=None, stop_before=None, stop_before_kind=None):
        """x (1, 3, H', W') padded -> y; enhance overrides the guided_filter stage's
        radius/eps/detail; the stages from the one named ``stop_before`` (or of kind
        ``stop_before_kind``) on are left out."""
        t = x
        for st in self.stages:
            k = st["kind"]
            if st["name"] == stop_before or k == stop_before_kind:
                break
            if k == "onnx":
                t = self.run_onnx(st, t)
                if st.get("add_input"):
                    t = x + t
            elif k == "adain":
                mu = t.mean((2, 3), keepdims=True, dtype=np.float64)
                sd = np.sqrt(((t - mu) ** 2).mean((2, 3), keepdims=True) + st["eps"])
                if stats is not None:
                    sm, ss = stats
                elif st["map"] is not None:
                    w, b = st["map"]
                    z = w @ np.concatenate([mu.ravel(), np.log(sd.ravel())]) + b
                    m0, s0 = st["mean"].astype(np.float64), st["std"].astype(np.float64)
                    sm = np.clip(z[:mu.size], m0 - MAP_RANGE * s0, m0 + MAP_RANGE * s0)
                    ss = s0 * np.exp(np.clip(z[mu.size:] - np.log(s0), -MAP_RANGE, MAP_RANGE))
                else:
                    sm, ss = st["mean"], st["std"]
                t = ((t - mu) / sd * np.reshape(ss, (1, -1, 1, 1))
                     + np.reshape(sm, (1, -1, 1, 1))).astype(np.float32)
            elif k == "guided_filter":
                p = dict(st)
                p.update(enhance or {})
                t = self.enhance(x, t, int(p["radius"]), float(p["eps"]), float(p["detail"]))
            else:
                raise ValueError(f"unknown stage kind {k!r}")
        return t

    def enhance(self, x, y, radius, eps, detail):
        if detail == 1.0:
            return y
        guide = np.ascontiguousarray(LUMA[0] * x[0, 0] + LUMA[1] * x[0, 1] + LUMA[2] * x[0, 2],
                                     dtype=np.float32)
        src = np.ascontiguousarray(y[0].transpose(1, 2, 0))
        base = self.guided_filter(guide, src, radius, eps)
        out = base + np.float32(detail) * (src - base)
        return np.ascontiguousarray(out.transpose(2, 0, 1)[None], dtype=np.float32)

    def convert(self, bgr_u8, stats=None, enhance=None, strength=None):
        """BGR uint8 (H, W, 3) -> the converted BGR uint8 picture; stats: AdaIN target;
        strength s (None: the manifest's "strength", 1 if absent; the engine's strength=):
        round(input + s (output - input)) per channel of the uint8 pictures."""
        h, w = bgr_u8.shape[:2]
        out = self.postprocess(self.forward(self.preprocess(bgr_u8), stats, enhance), h, w)
        s = self.strength if strength is None else strength
        if s == 1.0:
            return out
        f = np.asarray(bgr_u8, np.float32)
        return np.clip(np.rint(f + np.float32(s) * (out.astype(np.float32) - f)), 0,
                       255).astype(np.uint8)

    def convert_like(self, bgr_u8, reference_bgr_u8, enhance=None, strength=STYLE_COLOUR):
        """The conversion with a reference photo: its colours, then its AdaIN statistics."""
        return self.convert(colour_transfer(bgr_u8, reference_bgr_u8, strength),
                            self.stats_of(reference_bgr_u8), enhance)
