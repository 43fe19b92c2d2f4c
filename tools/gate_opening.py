"""How far a gated a2r_lite package's gate opens on each drawing: the share of the fully open
gate's change that the package makes, |out - closed| / |open - closed| (mean absolute levels;
closed and open: the gate's logit shifted by -40 and +40 with calibrate_gate.write_shifted).
0: the picture is left as the gate-closed network leaves it, 1: converted as a toon.
The role "toons" is the evaluation's held-out toons (tools/evaluate_a2r_lite.py, every recipe).

    python tools/gate_opening.py --model build/Mc [--roles eval,check,toons] [NAME_PART ...]
"""
import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import a2r_lite_pipeline as pipe  # noqa: E402
import calibrate_gate  # noqa: E402
import fetch_eval_art  # noqa: E402

SHUT = 40.0   # logit shift that closes (-) or opens (+) the gate: sigmoid(+-40) is 0 or 1 in float32


def pictures(role):
    """[(name, bgr uint8)]: a tools/fetch_eval_art.py role's pictures, or the held-out toons."""
    if role != "toons":
        return [(name, bgr) for name, bgr, _, _ in fetch_eval_art.load_set(role)]
    import evaluate_a2r_lite as ev
    return [(f"{name} {recipe}", toon) for rows in ev.named_toons().values()
            for name, recipe, toon, _ in rows]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a gated package (train_a2r_lite.py --gate)")
    ap.add_argument("--roles", default="eval,check", help="fetch_eval_art.py roles, or toons")
    ap.add_argument("names", nargs="*", help="only pictures whose name contains one of these")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pkgs = {}
        for tag, shift in (("closed", -SHUT), ("open", SHUT)):
            calibrate_gate.write_shifted(args.model, os.path.join(tmp, tag), shift)
            pkgs[tag] = pipe.Package(os.path.join(tmp, tag))
        pkgs["package"] = pipe.Package(args.model)
        print("| role | picture | gate opening | mean abs(open - closed) |\n|---|---|---|---|")
        for role in args.roles.split(","):
            for name, bgr in pictures(role):
                if args.names and not any(n in name for n in args.names):
                    continue
                out = {k: p.convert(bgr).astype(np.float64) for k, p in pkgs.items()}
                full = np.abs(out["open"] - out["closed"]).mean()
                share = np.abs(out["package"] - out["closed"]).mean() / max(full, 1e-9)
                print(f"| {role} | {name} | {share:.2f} | {full:.2f} |")


if __name__ == "__main__":
    main()
