"""Reference runner of an a2r_edge model package (numpy + onnxruntime): the exact stage semantics
the engine implements, so that the engine can be checked for parity against it.

    from a2r_lite_pipeline import Package
    pkg = Package("a2r_edge/models/a2r_lite")
    out_bgr = pkg.convert(bgr_u8)                    # the model's own target statistics
    out_bgr = pkg.convert_like(bgr_u8, reference_bgr_u8)   # a user's reference photo (style=)

    python tools/a2r_lite_pipeline.py in.png out.png [--style ref.png] [--compare engine_out.png]

Semantics: a2r_edge/model/reference.py (``PackageReference``, the one oracle of what a model
package means); this tool runs it with a fast guided filter: a2r_edge.ops.guided_filter when the
native extension is built, else cv2.ximgproc.guidedFilter (the same definition, box windows and
reflect borders, within 1e-4).
"""
import json
import os
import sys

import numpy as np

# the source tree's a2r_edge (this tool runs as python tools/a2r_lite_pipeline.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from a2r_edge.model import SUPPORTED, package  # noqa: E402
from a2r_edge.model.reference import (  # noqa: E402,F401  (re-exported for the tools)
    MAP_RANGE, STYLE_COLOUR, PackageReference, colour_transfer, pad_to)

MEAN = np.float32(0.5)
STD = np.float32(0.5)
# Enhance defaults until tools/evaluate_a2r_lite.py --tune measures better ones; detail 1 = no-op.
DEFAULT_ENHANCE = {"radius": 2, "eps": 1e-2, "detail": 1.0}
# Picture mirrored onto every side before the network (manifest "border_margin"): the bright top
# band of zero-padded edges is gone at 16 px (docs/a2r_lite_training.md, border measure).
BORDER_MARGIN = 16
DESCRIPTION = ("Small toon->photo CNN (encoder, AdaIN, decoder, guided-filter detail): removes "
               "line art and flattens posterised colour bands of anime-style pictures; it does "
               "not invent photographic texture (skin, hair, fabric)")


def to_unit(rgb_u8):
    """RGB uint8 (H, W, 3) -> float32 (3, H, W) in [-1, 1]."""
    return ((np.asarray(rgb_u8, np.float32).transpose(2, 0, 1) / 255.0 - MEAN) / STD).astype(
        np.float32)


def check_ops(path):
    """Raise if the ONNX graph uses an op outside the native executor's set; return the ops."""
    import onnx
    ops = {n.op_type for n in onnx.load(path).graph.node}
    bad = ops - SUPPORTED
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
        "name": "a2r_lite",
        "version": version if version is not None else old.get("version", "0.0.0-dev"),
        "license": "MIT",
        "description": DESCRIPTION,
        "scale": 1, "stride": 4,
        "receptive_field": int(receptive_field if receptive_field is not None
                               else old["receptive_field"]),
        "border_margin": int(old.get("border_margin", BORDER_MARGIN)),
        "normalization": {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]},
        "stages": [
            {"name": "encode", "kind": "onnx", "file": "encoder.onnx"},
            {"name": "stylize", "kind": "adain", "stats": "photo_stats.json", "eps": 1e-5},
            {"name": "decode", "kind": "onnx", "file": "decoder.onnx", "add_input": True},
            {"name": "enhance", "kind": "guided_filter", "radius": int(enh["radius"]),
             "eps": float(enh["eps"]), "detail": float(enh["detail"])}],
        "training": training if training is not None else old["training"],
    }
    return package.write_manifest(folder, man, files)


class Package(PackageReference):
    """A model package run stage by stage by the oracle (onnxruntime, numpy) with the fast guided
    filter."""

    def __init__(self, folder, threads=1):
        super().__init__(folder, threads, guided_filter=guided_filter)


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
