"""Choose the residual gate's offset of a gated a2r_lite package (train_a2r_lite.py --gate 1)
on pictures the evaluation does not use, and write the package with it.

    python tools/calibrate_gate.py --model build/G5 --out build/G5c [--offsets 0,0.5,1,1.5,2]

The gate g = sigmoid(logit) multiplies the decoder's residual; training sets its logit apart on
the training crops (toons 1, drawings 0), and on pictures unlike those it lands in between.
An offset b added to the logit (the bias of the gate's last conv, so the package format and the
engine are unchanged) opens it (b > 0) or closes it. For each offset this measures the "check"
drawings (tools/fetch_eval_art.py: other characters than the "eval" set's, never trained on)
with a2r_edge.quality.artefacts at strength 1, and the toon gain on the VALIDATION photo
(never trained on, not held out) toonified by the evaluation's recipe sets, printed beside.
The choice: of the offsets at which the most check drawings pass every measure, the largest:
a more open gate converts toons more (their gain grows with it up to the ungated network's),
so the gate is opened as far as the drawings allow. The held-out photos and the "eval"
drawings are not looked at: tools/evaluate_a2r_lite.py measures the written package on them
afterwards.
--detail D also sets the enhance stage's detail (the same for every offset).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import a2r_lite_pipeline as pipe  # noqa: E402
import evaluate_a2r_lite as ev  # noqa: E402
import toonify as tf  # noqa: E402

GATE_LOGIT_BIAS = "gate.2.bias"   # train_a2r_lite.Decoder.gate's last conv (the logit)


def write_shifted(src, dst, offset, detail=None):
    """Copy package src to dst with the gate's logit shifted by `offset` (added to any offset
    src already has); the manifest records the total as training["gate_offset"]."""
    import onnx
    from onnx import numpy_helper
    os.makedirs(dst, exist_ok=True)
    for name in ("encoder.onnx", "manifest.json", "photo_stats.json"):
        shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))
    model = onnx.load(os.path.join(src, "decoder.onnx"))
    bias = next((i for i in model.graph.initializer if i.name == GATE_LOGIT_BIAS), None)
    if bias is None:
        raise SystemExit(f"{src}: decoder.onnx has no {GATE_LOGIT_BIAS} (not a gated package)")
    bias.CopyFrom(numpy_helper.from_array(
        (numpy_helper.to_array(bias) + np.float32(offset)).astype(np.float32), bias.name))
    onnx.save(model, os.path.join(dst, "decoder.onnx"))
    with open(os.path.join(src, "manifest.json")) as fh:
        training = json.load(fh)["training"]
    training = dict(training, gate_offset=round(training.get("gate_offset", 0.0) + offset, 6))
    pipe.write_manifest(dst, training=training,
                        enhance=None if detail is None else {"detail": detail})


def measure(folder, toons):
    """(check drawings passing every measure, their count, {set: validation gain dB})."""
    pkg = pipe.Package(folder, threads=1)
    res, _ = ev.drawings_eval(pkg, (1.0,), role="check")
    rows = res[1.0]
    passing = sum(1 for _, _, bad in rows if not bad)
    fails = sorted({f"{name}: {', '.join(bad)}" for name, _, bad in rows if bad})
    return passing, len(rows), ev.toon_gains(pkg, toons, (1.0,))[1.0], fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a gated package (train_a2r_lite.py --gate 1)")
    ap.add_argument("--out", required=True, help="where the package with the chosen offset goes")
    ap.add_argument("--offsets", default="0,0.5,1,1.5,2,2.5,3",
                    type=lambda v: [float(x) for x in v.split(",")])
    ap.add_argument("--detail", type=float, default=None,
                    help="the enhance stage's detail for every candidate (default: the package's)")
    args = ap.parse_args()
    val = ev.load_bgr(ev.VALIDATION)
    toons = {fam: [(tf.toonify(val, r), val) for _, r in recipes]
             for fam, recipes in ev.recipe_sets().items()}
    print(f"| offset | check drawings passing | validation `{ev.VALIDATION}`: gain dB "
          "(training family / unseen) | failing |\n|---|---|---|---|")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for b in args.offsets:
            cand = os.path.join(tmp, f"offset{b:g}")
            write_shifted(args.model, cand, b, args.detail)
            passing, n, gains, fails = measure(cand, toons)
            rows.append((passing, b))
            print(f"| {b:+g} | {passing} / {n} | "
                  + " / ".join(f"{g:+.2f}" for g in gains.values())
                  + f" | {'; '.join(fails) or 'none'} |", flush=True)
    passing, best = max(rows)
    write_shifted(args.model, args.out, best, args.detail)
    print(f"chosen: offset {best:+g} ({passing} check drawings passing); package written to "
          f"{args.out}")


if __name__ == "__main__":
    main()
