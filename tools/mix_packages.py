"""A package whose weights are a weighted mean of a2r_lite packages with the same graphs (the
checkpoints of one run, or of runs resumed from one package): every float initializer of the
encoder and the decoder, the photo statistics and the content map.

    python tools/mix_packages.py --out build/mix PKG_A:0.5 PKG_B:0.5
    python tools/mix_packages.py --out build/avg build/G6/step03000 build/G6/step03300 ...  # equal

Weights are normalised to sum 1. The manifest keeps the last package's fields and records, under
training["mix"], each source with its weight and its own training command, so the mix can be
made again. Packages whose graphs differ (names, shapes or node lists) are refused.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import a2r_lite_pipeline as pipe  # noqa: E402

GRAPHS = ("encoder.onnx", "decoder.onnx")
STATS = "photo_stats.json"


def parse_source(text):
    """"PATH" or "PATH:WEIGHT" -> (path, weight)."""
    if os.path.isdir(text):
        return text, 1.0
    path, _, weight = text.rpartition(":")
    try:
        return path, float(weight)
    except ValueError:
        raise SystemExit(f"{text}: not a folder, nor FOLDER:WEIGHT") from None


def mixed(arrays, weights):
    return sum(w * a.astype(np.float64) for a, w in zip(arrays, weights))


def mix(sources, dst):
    """Write package dst from [(folder, weight)] (weights normalised)."""
    import onnx
    from onnx import numpy_helper
    total = sum(w for _, w in sources)
    if total <= 0 or any(w < 0 for _, w in sources):
        raise SystemExit("weights must be >= 0 with a positive sum")
    folders = [f for f, _ in sources]
    weights = [w / total for _, w in sources]
    os.makedirs(dst, exist_ok=True)
    for name in GRAPHS:
        models = [onnx.load(os.path.join(f, name)) for f in folders]
        base = models[-1]
        for m, f in zip(models, folders):
            if [n.op_type for n in m.graph.node] != [n.op_type for n in base.graph.node] or \
                    [(i.name, tuple(i.dims)) for i in m.graph.initializer] != \
                    [(i.name, tuple(i.dims)) for i in base.graph.initializer]:
                raise SystemExit(f"{f}/{name}: not the same graph as {folders[-1]}/{name}")
        for k, init in enumerate(base.graph.initializer):
            arrays = [numpy_helper.to_array(m.graph.initializer[k]) for m in models]
            if arrays[0].dtype.kind == "f":
                init.CopyFrom(numpy_helper.from_array(
                    mixed(arrays, weights).astype(arrays[0].dtype), init.name))
        onnx.save(base, os.path.join(dst, name))
    stats = []
    for f in folders:
        with open(os.path.join(f, STATS)) as fh:
            stats.append(json.load(fh))
    out = dict(stats[-1])
    for key in ("mean", "std"):
        out[key] = mixed([np.asarray(s[key]) for s in stats], weights).tolist()
    if "content_map" in out:
        out["content_map"] = {k: mixed([np.asarray(s["content_map"][k]) for s in stats],
                                       weights).tolist() for k in out["content_map"]}
    with open(os.path.join(dst, STATS), "w") as fh:
        json.dump(out, fh, indent=1)
    manifests = []
    for f in folders:
        with open(os.path.join(f, "manifest.json")) as fh:
            manifests.append(json.load(fh))
    with open(os.path.join(dst, "manifest.json"), "w") as fh:   # write_manifest keeps its fields
        json.dump(manifests[-1], fh)
    training = dict(manifests[-1]["training"])
    training["mix"] = [{"package": f, "weight": round(w, 6), "command": m["training"].get("command")}
                       for f, w, m in zip(folders, weights, manifests)]
    pipe.write_manifest(dst, training=training)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="+", help="package folders, each optionally :WEIGHT")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    sources = [parse_source(s) for s in args.sources]
    for f, _ in sources:
        if not os.path.isfile(os.path.join(f, "manifest.json")):
            raise SystemExit(f"{f}: not a package (no manifest.json)")
    mix(sources, args.out)
    print(f"package written to {args.out}: "
          + ", ".join(f"{f} x {w:g}" for f, w in sources))


if __name__ == "__main__":
    main()
