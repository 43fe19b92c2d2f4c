"""``python -m a2r_edge model check MODEL``: coverage, parity and speed in one report."""
from __future__ import annotations

import os
import subprocess
import sys

from a2r_edge.model import precision as prec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "generators")


def check(*args):
    return subprocess.run([sys.executable, "-m", "a2r_edge", "model", "check", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_model_check_reports_coverage_parity_and_speed():
    r = check(os.path.join(FIXTURES, "cyclegan_resnet.onnx"), "--size", "33x40", "--runs", "1")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "input (1, 3, 33, 40)" in out and "load" in out and "plan" in out
    assert "Conv" in out and "native" in out
    assert "output: max |native - onnxruntime|" in out and "(ok," in out
    assert "1 thread: native" in out and "x onnxruntime" in out


def test_model_check_fixed_size_model_and_bad_input(tmp_path):
    r = check(os.path.join(FIXTURES, "ugatit_full.onnx"), "--no-speed")
    assert r.returncode == 0 and "input (1, 3, 24, 24)" in r.stdout, r.stderr
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    r = check(str(bad), "--no-speed")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_model_check_times_a_precision_and_profiles_the_ops():
    r = check(os.path.join(FIXTURES, "cyclegan_resnet.onnx"), "--size", "32x32", "--runs", "1",
              "--precision", "int8", "--profile")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "native at int8, calibrated on the bundled sample" in out
    if "int8" in prec.runnable():   # (the baseline level runs fp32)
        assert "1 thread at int8: " in out and "dB against fp32 (guard 40 dB): asked for" in out
    assert "where the native time goes: " in out and "Conv " in out
    assert "the 5 slowest steps:" in out and " ms " in out and "/model/" in out
    r = check(os.path.join(FIXTURES, "cyclegan_resnet.onnx"), "--precision", "fp16")
    assert r.returncode == 2 and "invalid choice: 'fp16'" in r.stderr
