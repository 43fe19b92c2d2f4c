"""Pixel conventions of bring-your-own models: input range, channel order, output range, from the
manifest or the convert flags (model/conventions.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import cv2
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from a2r_edge.engine import Engine
from a2r_edge.model import conventions, package as pkg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def first_channel_dropped(path):
    """y = x with the network's channel 0 multiplied by 0 (a 1x1 Conv)."""
    w = np.diag([0.0, 1.0, 1.0]).astype(np.float32).reshape(3, 3, 1, 1)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, "H", "W"])],
        [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


PICTURE = np.random.default_rng(0).integers(0, 256, (12, 10, 3), dtype=np.uint8)


def convert(model):
    return Engine(model, backend="native").convert(PICTURE).astype(int)


@pytest.mark.parametrize("order,dropped", [("RGB", 2), ("BGR", 0)])  # BGR picture index
def test_channel_order_decides_which_channel_the_network_sees_first(tmp_path, order, dropped):
    path = first_channel_dropped(tmp_path / "m.onnx")
    conv = conventions.from_fields({"input_range": [0, 1], "channel_order": order},
                                   (0.5,) * 3, (0.5,) * 3)
    out = convert(pkg.wrap_onnx(path, conv))
    assert np.all(out[..., dropped] == 0)
    keep = [c for c in range(3) if c != dropped]
    assert np.abs(out[..., keep] - PICTURE[..., keep]).max() <= 1


def test_plain_default_and_output_range(tmp_path):
    path = first_channel_dropped(tmp_path / "m.onnx")
    # default [-1, 1]: a 0 in the network is mid-grey
    assert np.all(np.abs(convert(str(path))[..., 2] - 128) <= 1)
    # [0, 1] in, [-1, 1] out: v -> (v * 0.5 + 0.5)
    conv = conventions.from_fields({"input_range": "0,1", "output_range": [-1, 1]},
                                   (0.5,) * 3, (0.5,) * 3)
    out = convert(pkg.wrap_onnx(path, conv))
    expect = np.round((PICTURE[..., :2] / 255 * 0.5 + 0.5) * 255)
    assert np.abs(out[..., :2] - expect).max() <= 1


def test_manifest_fields_and_bad_values(tmp_path):
    folder = tmp_path / "pkg"
    folder.mkdir()
    first_channel_dropped(folder / "net.onnx")
    manifest = {"format": pkg.FORMAT, "name": "t", "scale": 1, "stride": 1,
                "input_range": [0, 1], "channel_order": "BGR",
                "stages": [{"name": "net", "kind": "onnx", "file": "net.onnx"}],
                "files": {"net.onnx": pkg.sha256_of(folder / "net.onnx")}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    out = convert(str(folder))
    assert np.all(out[..., 0] == 0)   # the network's channel 0 is blue
    for key, bad in (("channel_order", "GBR"), ("input_range", [0, 255])):
        (folder / "manifest.json").write_text(json.dumps(dict(manifest, **{key: bad})))
        with pytest.raises(pkg.ModelPackageError, match=key):
            pkg.load_package(folder)


def test_convert_flags(tmp_path):
    path = first_channel_dropped(tmp_path / "m.onnx")
    cv2.imwrite(str(tmp_path / "in.png"), PICTURE)
    base = [sys.executable, "-m", "a2r_edge", "convert", "-q", "--model", str(path),
            str(tmp_path / "in.png")]
    r = subprocess.run(base + ["-o", str(tmp_path / "o.png"), "--input-range", "0,1",
                               "--channel-order", "BGR"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert np.all(cv2.imread(str(tmp_path / "o.png"))[..., 0] == 0)
    bad = subprocess.run(base + ["-o", str(tmp_path / "p.png"), "--mean", "0.5,0.5,0.5"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--std" in bad.stderr and "Traceback" not in bad.stderr
