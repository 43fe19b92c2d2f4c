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


# --- NHWC networks (TensorFlow/Keras through tf2onnx) ----------------------------------------

def tf2onnx_shaped(path, in_nhwc=True, out_nhwc=True, hw=("H", "W")):
    """A 3x3 Conv with LeakyRelu shaped as tf2onnx exports a Keras model: without
    --inputs-as-nchw an NHWC input read through Transpose (0, 3, 1, 2), without
    --outputs-as-nchw an NHWC output written through Transpose (0, 2, 3, 1). Returns the
    path and the same network as a plain NCHW model (no Transposes)."""
    w = np.random.default_rng(3).standard_normal((3, 3, 3, 3)).astype(np.float32) / 3
    inits = [numpy_helper.from_array(w, "w")]
    conv = [helper.make_node("Conv", ["xc", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("LeakyRelu", ["c"], ["yc"], alpha=0.2)]

    def save(p, nodes, x_dims, y_dims):
        g = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_dims)],
                              inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
        m.ir_version = 8
        onnx.save(m, str(p))
        return p

    nchw, nhwc = ["N", 3, *hw], ["N", *hw, 3]
    head = [helper.make_node("Transpose", ["x"], ["xc"], perm=[0, 3, 1, 2])] if in_nhwc \
        else [helper.make_node("Identity", ["x"], ["xc"])]
    tail = [helper.make_node("Transpose", ["yc"], ["y"], perm=[0, 2, 3, 1])] if out_nhwc \
        else [helper.make_node("Identity", ["yc"], ["y"])]
    plain = [helper.make_node("Identity", ["x"], ["xc"]), *conv,
             helper.make_node("Identity", ["yc"], ["y"])]
    return (save(path, head + conv + tail, nhwc if in_nhwc else nchw,
                 nhwc if out_nhwc else nchw),
            save(path.with_suffix(".nchw.onnx"), plain, nchw, nchw))


@pytest.mark.parametrize("in_nhwc,out_nhwc", [(True, True), (False, True), (True, False)])
def test_an_nhwc_network_converts_as_its_nchw_twin(tmp_path, in_nhwc, out_nhwc):
    """The layouts read from the declared shapes (input, output: each on its own, as
    --inputs-as-nchw alone leaves the output NHWC): the same picture as the NCHW network,
    and the Transposes tf2onnx wrote cancel against the adapter's in the native plan."""
    from a2r_edge.model import NativeExecutor
    path, twin = tf2onnx_shaped(tmp_path / "m.onnx", in_nhwc, out_nhwc)
    model = pkg.wrap_onnx(path)
    np.testing.assert_array_equal(convert(model), convert(str(twin)))
    ex = NativeExecutor(str(model.stages[0].params["file"]))
    plan = ex.plan_for({ex.input_names[0]: (1, 3, 12, 10)})
    assert "Transpose" not in [n.op for n in plan.nodes]
    assert plan.rewrites.transpose_pair == in_nhwc + out_nhwc


def test_a_fixed_size_nhwc_network_is_not_read_as_256_channels(tmp_path):
    path, twin = tf2onnx_shaped(tmp_path / "m.onnx", hw=(16, 16))
    # fitted to its 16x16 (resized) as the NCHW twin is
    np.testing.assert_array_equal(convert(str(path)), convert(str(twin)))


def test_a_stated_layout_must_be_the_declared_one(tmp_path):
    path, twin = tf2onnx_shaped(tmp_path / "m.onnx")
    for where, fields in ((path, {"layout": "NCHW"}), (twin, {"output_layout": "NHWC"})):
        conv = conventions.from_fields(fields, (0.5,) * 3, (0.5,) * 3)
        with pytest.raises(pkg.ModelPackageError, match="but the network declares"):
            pkg.wrap_onnx(where, conv)
    # a model whose declared dimensions are all named takes the layout it is given
    m = onnx.load(str(path))
    for vi in (*m.graph.input, *m.graph.output):
        for d, name in zip(vi.type.tensor_type.shape.dim, "abcd"):
            d.dim_param = name
    onnx.save(m, str(tmp_path / "bare.onnx"))
    conv = conventions.from_fields({"layout": "NHWC"}, (0.5,) * 3, (0.5,) * 3)
    np.testing.assert_array_equal(convert(pkg.wrap_onnx(tmp_path / "bare.onnx", conv)),
                                  convert(str(twin)))
    with pytest.raises(ValueError, match="layout must be one of"):
        conventions.from_fields({"layout": "HWC"}, (0.5,) * 3, (0.5,) * 3)


def test_convert_takes_a_range_starting_with_a_minus_and_a_layout(tmp_path):
    """"--input-range -1,1" as the help writes it (argparse took -1,1 for an option)."""
    path, twin = tf2onnx_shaped(tmp_path / "m.onnx")
    cv2.imwrite(str(tmp_path / "in.png"), PICTURE)
    r = subprocess.run([sys.executable, "-m", "a2r_edge", "convert", "-q", "--model", str(path),
                        str(tmp_path / "in.png"), "-o", str(tmp_path / "o.png"),
                        "--input-range", "-1,1", "--output-range", "-1,1", "--layout", "NHWC"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(cv2.imread(str(tmp_path / "o.png")), convert(str(twin)))


def test_conventions_from_python_as_the_docs_write_them(tmp_path):
    """docs/models.md: conventions.from_fields(fields) alone (mean/std default to [-1, 1]), given
    to wrap_onnx: the same picture as the convert flags give."""
    path = first_channel_dropped(tmp_path / "m.onnx")
    for fields in ({"channel_order": "BGR"}, {"input_range": [0, 1], "channel_order": "BGR"}):
        got = convert(pkg.wrap_onnx(path, conventions.from_fields(fields)))
        want = convert(pkg.wrap_onnx(path, conventions.from_fields(fields, (0.5,) * 3,
                                                                   (0.5,) * 3)))
        np.testing.assert_array_equal(got, want)
        # the network's channel 0, blue in BGR, is dropped: 0 is black in [0, 1], grey in [-1, 1]
        assert np.abs(got[..., 0] - (0 if "input_range" in fields else 128)).max() <= 1
