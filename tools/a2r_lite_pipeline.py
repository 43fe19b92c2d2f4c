"""Reference runner of an a2r_edge model package (numpy + onnxruntime): the exact stage semantics
the engine implements, so that the engine can be checked for parity against it.

    from a2r_lite_pipeline import Package
    pkg = Package("a2r_edge/models/a2r_lite")
    out_bgr = pkg.convert(bgr_u8)                    # the model's own target statistics
    out_bgr = pkg.convert_like(bgr_u8, reference_bgr_u8)   # a user's reference photo (style=)

    python tools/a2r_lite_pipeline.py in.png out.png [--style ref.png] [--compare engine_out.png]

Semantics (manifest "a2r_edge.model/1"):
  x  = RGB float32 (1, 3, H', W'), (v/255 - mean)/std, of the input reflect-padded ("dcb|abcd",
       numpy 'reflect' = OpenCV BORDER_REFLECT_101; 'edge' for a 1-pixel side) at the
       bottom/right to multiples of `stride`
  F  = encoder(x)
  F' = (F - mu_F) / sqrt(var_F + eps) * t_std + t_mean              per channel, mu/var over H, W
       target (t_mean, t_std): a reference photo's statistics (style=); else, when the stats
       file has "content_map" {weight (2C, 2C), bias (2C)}: z = weight @ [mu_F; ln s_F] + bias,
       s_F = sqrt(var_F + eps), t_mean = z[:C], t_std = exp(z[C:]) (predicted from the
       picture's own statistics), clipped to mean +- 4 std and std * exp(+-4) of the file's
       fixed mean and std; else the fixed mean and std
  d  = decoder(F');  y = x + d                                        (add_input)
  enhance: base = guided_filter(guide = 0.299 R + 0.587 G + 0.114 B of x (H', W'),
                                src = y as (H', W', 3), radius, eps)
           y = base + detail * (y - base)
  crop to H, W; u8 = clip(round((y * std + mean) * 255), 0, 255) (round half to even), BGR.
With a reference photo (the engine's style=), the input is first colour-transferred
(colour_transfer: per channel, mean and sqrt(var + 1) moved STYLE_COLOUR of the way to the
photo's) and the AdaIN target is encoder(photo)'s statistics.
The guided filter is a2r_edge.ops.guided_filter when the native extension is built, else
cv2.ximgproc.guidedFilter: the same definition (box windows, reflect borders) within 1e-4.
"""
import hashlib
import json
import os

import numpy as np

FORMAT = "a2r_edge.model/1"
EXECUTOR_OPS = {"Conv", "Relu", "LeakyRelu", "Sigmoid", "Mul", "Add", "Tanh", "Clip",
                "InstanceNormalization", "DepthToSpace", "Resize", "Concat"}
MEAN = np.float32(0.5)
STD = np.float32(0.5)
LUMA = (0.299, 0.587, 0.114)
MAP_RANGE = 4.0   # content-map targets stay within the fixed statistics +- this (see above)
STYLE_COLOUR = 0.5   # share of the colour move towards a reference photo (see above)
# Enhance defaults until tools/evaluate_a2r_lite.py --tune measures better ones; detail 1 = no-op.
DEFAULT_ENHANCE = {"radius": 2, "eps": 1e-2, "detail": 1.0}
DESCRIPTION = ("Small toon->photo CNN (encoder, AdaIN, decoder, guided-filter detail): removes "
               "line art and flattens posterised colour bands of anime-style pictures; it does "
               "not invent photographic texture (skin, hair, fabric)")


def to_unit(rgb_u8):
    """RGB uint8 (H, W, 3) -> float32 (3, H, W) in [-1, 1]."""
    return ((np.asarray(rgb_u8, np.float32).transpose(2, 0, 1) / 255.0 - MEAN) / STD).astype(
        np.float32)


def pad_to(x, stride):
    """(N, C, H, W) reflect-padded ('dcb|abcd') at the bottom/right to multiples of stride."""
    h, w = x.shape[-2:]
    ph, pw = (-h) % stride, (-w) % stride
    if ph == 0 and pw == 0:
        return x
    return np.pad(x, ((0, 0), (0, 0), (0, ph), (0, pw)),
                  mode="reflect" if min(h, w) > 1 else "edge")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_ops(path):
    """Raise if the ONNX graph uses an op outside the native executor's set; return the ops."""
    import onnx
    ops = {n.op_type for n in onnx.load(path).graph.node}
    bad = ops - EXECUTOR_OPS
    if bad:
        raise ValueError(f"{path}: ops outside the executor set: {sorted(bad)}")
    return ops


def guided_filter(guide, src, radius, eps):
    try:
        from a2r_edge import ops
        return ops.guided_filter(guide, src, radius, eps)
    except ImportError:
        import cv2
        return cv2.ximgproc.guidedFilter(guide, src, radius, eps)


def write_manifest(folder, receptive_field=None, training=None, enhance=None, version=None):
    """(Re)write manifest.json: keeps fields not given, recomputes every sha256."""
    path = os.path.join(folder, "manifest.json")
    old = {}
    if os.path.exists(path):
        with open(path) as fh:
            old = json.load(fh)
    old_enh = next((s for s in old.get("stages", []) if s.get("kind") == "guided_filter"), {})
    enh = dict(DEFAULT_ENHANCE)
    enh.update({k: old_enh[k] for k in DEFAULT_ENHANCE if k in old_enh})
    enh.update(enhance or {})
    files = ["encoder.onnx", "decoder.onnx", "photo_stats.json"]
    man = {
        "format": FORMAT, "name": "a2r_lite",
        "version": version if version is not None else old.get("version", "0.0.0-dev"),
        "license": "MIT",
        "description": DESCRIPTION,
        "scale": 1, "stride": 4,
        "receptive_field": int(receptive_field if receptive_field is not None
                               else old["receptive_field"]),
        "normalization": {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]},
        "stages": [
            {"name": "encode", "kind": "onnx", "file": "encoder.onnx"},
            {"name": "stylize", "kind": "adain", "stats": "photo_stats.json", "eps": 1e-5},
            {"name": "decode", "kind": "onnx", "file": "decoder.onnx", "add_input": True},
            {"name": "enhance", "kind": "guided_filter", "radius": int(enh["radius"]),
             "eps": float(enh["eps"]), "detail": float(enh["detail"])}],
        "files": {f: sha256(os.path.join(folder, f)) for f in files},
        "training": training if training is not None else old["training"],
    }
    with open(path, "w") as fh:
        json.dump(man, fh, indent=2)
        fh.write("\n")
    return man


class Package:
    """A model package run stage by stage with onnxruntime (CPU) and numpy."""

    def __init__(self, folder, threads=1):
        import onnxruntime as ort
        with open(os.path.join(folder, "manifest.json")) as fh:
            self.manifest = json.load(fh)
        m = self.manifest
        if m.get("format") != FORMAT:
            raise ValueError(f"manifest format must be {FORMAT!r}, got {m.get('format')!r}")
        for name, digest in m["files"].items():
            if sha256(os.path.join(folder, name)) != digest:
                raise ValueError(f"{name}: sha256 mismatch")
        self.stride = int(m["stride"])
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
        return pad_to(((rgb / 255.0 - self.mean) / self.std).astype(np.float32), self.stride)

    def postprocess(self, y, h, w):
        v = (y[0, :, :h, :w] * self.std[0] + self.mean[0]) * 255.0
        v = np.nan_to_num(v, nan=0.0)
        return np.clip(np.rint(v), 0, 255).astype(np.uint8).transpose(1, 2, 0)[..., ::-1].copy()

    def stats_of(self, reference_bgr_u8):
        """(mean, std) of encoder(reference photo): a user's own target statistics."""
        f = self._run_onnx(self.stages[0], self.preprocess(reference_bgr_u8))
        eps = next(s["eps"] for s in self.stages if s["kind"] == "adain")
        return f.mean((0, 2, 3)), np.sqrt(f.var((0, 2, 3)) + eps)

    @staticmethod
    def _run_onnx(st, x):
        sess = st["session"]
        return sess.run(None, {sess.get_inputs()[0].name: x})[0]

    def forward(self, x, stats=None, enhance=None, stop_before=None):
        """x (1, 3, H', W') padded -> y (1, 3, H', W'); enhance overrides the manifest's
        radius/eps/detail; stop_before='enhance' returns y before the enhance stage."""
        t = x
        for st in self.stages:
            if st["name"] == stop_before:
                break
            k = st["kind"]
            if k == "onnx":
                t = self._run_onnx(st, t)
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

    @staticmethod
    def enhance(x, y, radius, eps, detail):
        if detail == 1.0:
            return y
        guide = np.ascontiguousarray(LUMA[0] * x[0, 0] + LUMA[1] * x[0, 1] + LUMA[2] * x[0, 2],
                                     dtype=np.float32)
        src = np.ascontiguousarray(y[0].transpose(1, 2, 0))
        base = guided_filter(guide, src, radius, eps)
        out = base + np.float32(detail) * (src - base)
        return np.ascontiguousarray(out.transpose(2, 0, 1)[None], dtype=np.float32)

    def convert(self, bgr_u8, stats=None, enhance=None):
        h, w = bgr_u8.shape[:2]
        return self.postprocess(self.forward(self.preprocess(bgr_u8), stats, enhance), h, w)

    def convert_like(self, bgr_u8, reference_bgr_u8, enhance=None):
        """The conversion with a reference photo: its colours, then its AdaIN statistics."""
        return self.convert(colour_transfer(bgr_u8, reference_bgr_u8),
                            self.stats_of(reference_bgr_u8), enhance)


def colour_transfer(bgr_u8, reference_bgr_u8, strength=STYLE_COLOUR):
    """Per BGR channel: v -> (v - m) / s * s' + m', m and s = sqrt(var + 1) the picture's,
    m' = m + strength (m_ref - m), s' = s (s_ref / s) ** strength; rounded, clipped to u8."""
    def moments(img):
        v = img.reshape(-1, 3).astype(np.float64)
        return v.mean(0), np.sqrt(v.var(0) + 1.0)
    (m, s), (mr, sr) = moments(bgr_u8), moments(reference_bgr_u8)
    m2, s2 = m + strength * (mr - m), s * (sr / s) ** strength
    return np.clip(np.rint((bgr_u8 - m) / s * s2 + m2), 0, 255).astype(np.uint8)


def main():
    """python tools/a2r_lite_pipeline.py IN.png OUT.png [--model DIR] [--style PHOTO.png]
    [--compare ENGINE_OUT.png]: convert with this reference; --compare prints the largest
    absolute difference (u8) to another implementation's output of the same input."""
    import argparse
    import cv2
    ap = argparse.ArgumentParser(description="reference a2r_edge model-package runner")
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--model", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "..", "a2r_edge", "models", "a2r_lite"))
    ap.add_argument("--style", default=None, help="reference photo (colours, AdaIN statistics)")
    ap.add_argument("--compare", default=None)
    args = ap.parse_args()
    pkg = Package(args.model)
    img = cv2.imread(args.src, cv2.IMREAD_COLOR)
    out = (pkg.convert_like(img, cv2.imread(args.style, cv2.IMREAD_COLOR)) if args.style
           else pkg.convert(img))
    cv2.imwrite(args.dst, out)
    if args.compare:
        other = cv2.imread(args.compare, cv2.IMREAD_COLOR)
        diff = np.abs(out.astype(np.int16) - other.astype(np.int16))
        print(f"max |diff| {diff.max()}, pixels differing {np.count_nonzero(diff.max(2))}"
              f" of {diff.shape[0] * diff.shape[1]}")


if __name__ == "__main__":
    main()
