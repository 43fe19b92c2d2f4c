"""Choose the residual gate's offset of a gated a2r_lite package (train_a2r_lite.py --gate)
on pictures the evaluation does not use, and write the package with it.

    python tools/calibrate_gate.py --model build/G6 --out build/G6c [--offsets 0,0.5,1,1.5,2]
    python tools/calibrate_gate.py --model build/G6/step* build/G6 --out build/G6c   # + checkpoint

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
With several packages (a run's checkpoints), the one to calibrate is chosen first, at offset
0, by the same measures: the most check drawings passing, then the highest validation gain.
--detail D also sets the enhance stage's detail (the same for every candidate).
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

GATE_LOGIT_BIAS = "gate.2.bias"   # train_a2r_lite.Decoder.gate's last conv (the logit)


def write_shifted(src, dst, offset, detail=None, command=None):
    """Copy package src to dst with the gate's logit shifted by `offset` (added to any offset
    src already has); the manifest records the total as training["gate_offset"], and `command`
    (how the offset was chosen) as training["calibration"]."""
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
    if command:
        training["calibration"] = command
    pipe.write_manifest(dst, training=training,
                        enhance=None if detail is None else {"detail": detail})


def measure(folder, toons):
    """(check drawings passing every measure, their count, {set: validation gain dB}, the
    failures as "picture: measures" lines)."""
    pkg = pipe.Package(folder, threads=1)
    res, _ = ev.drawings_eval(pkg, (1.0,), role="check")
    rows = res[1.0]
    passing = sum(1 for _, _, bad in rows if not bad)
    fails = sorted({f"{name}: {', '.join(bad)}" for name, _, bad in rows if bad})
    return passing, len(rows), ev.toon_gains(pkg, toons, (1.0,))[1.0], fails


def table(label, rows):
    """Print the rows [(name, passing, n, gains, fails)] as a markdown table."""
    print(f"\n| {label} | check drawings passing | validation `{ev.VALIDATION}`: gain dB "
          "(training family / unseen) | failing |\n|---|---|---|---|")
    for name, passing, n, gains, fails in rows:
        print(f"| {name} | {passing} / {n} | " + " / ".join(f"{g:+.2f}" for g in gains.values())
              + f" | {'; '.join(fails) or 'none'} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, nargs="+",
                    help="gated packages (train_a2r_lite.py --gate): one, or a run's "
                         "checkpoints to choose from first")
    ap.add_argument("--out", required=True, help="where the package with the chosen offset goes")
    ap.add_argument("--offsets", default="0,0.5,1,1.5,2,2.5,3",
                    type=lambda v: [float(x) for x in v.split(",")])
    ap.add_argument("--detail", type=float, default=None,
                    help="the enhance stage's detail for every candidate (default: the package's)")
    args = ap.parse_args()
    toons = ev.eval_toons([ev.VALIDATION])
    with tempfile.TemporaryDirectory() as tmp:
        def rows(candidates):
            out = []
            for name, folder, b in candidates:
                cand = os.path.join(tmp, str(len(out)))
                write_shifted(folder, cand, b, args.detail)
                out.append((name, *measure(cand, toons)))
                shutil.rmtree(cand)
            return out

        model = args.model[0]
        if len(args.model) > 1:
            found = rows([(m, m, 0.0) for m in args.model])
            table("package (offset 0)", found)
            best = max(found, key=lambda r: (r[1], sum(r[3].values())))
            model = best[0]
            print(f"chosen: {model} (the most check drawings passing, then the highest "
                  "validation gain)")
        found = rows([(f"{b:+g}", model, b) for b in args.offsets])
        table(f"offset ({model})", found)
    passing, best = max((r[1], b) for r, b in zip(found, args.offsets))
    write_shifted(model, args.out, best, args.detail,
                  command="python tools/calibrate_gate.py " + " ".join(sys.argv[1:]))
    print(f"chosen: offset {best:+g} ({passing} check drawings passing); package written to "
          f"{args.out}")


if __name__ == "__main__":
    main()
