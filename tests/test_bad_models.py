"""Hostile and broken ONNX models on the command line and in the Engine: one line and exit
code 2, never a traceback; a model failing on a picture fails that picture only; a valid model
using the a2r AdaIN node runs in a default Engine."""
import cv2
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper, numpy_helper as nh

from a2r_edge import Engine
from cli_run import cli, save

W = (np.random.default_rng(0).standard_normal((3, 3, 3, 3)) * 0.1).astype(np.float32)


def model(nodes, inits=None, x=(1, 3, None, None), y=(1, 3, None, None), x_type=T.FLOAT,
          opset=17, domains=(), extra_inputs=()):
    graph = helper.make_graph(
        nodes, "bad", [helper.make_tensor_value_info("x", x_type, list(x)), *extra_inputs],
        [helper.make_tensor_value_info("y", x_type, list(y) if y else None)],
        [nh.from_array(v, k) for k, v in (inits or {}).items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)] +
                          [helper.make_opsetid(d, 1) for d in domains])
    m.ir_version = 8
    return m


def conv(**attrs):
    return helper.make_node("Conv", ["x", "w"], ["y"], **attrs)


# name -> (model, what the one line says); each refused at load or failing on every picture
BAD = {
    "wrong rank": (model([helper.make_node("Relu", ["x"], ["y"])], x=(1, 3, None),
                         y=(1, 3, None)), "shape"),
    "int64 input": (model([helper.make_node("Relu", ["x"], ["y"])], x_type=T.INT64),
                    "float32"),
    "double input": (model([helper.make_node("Relu", ["x"], ["y"])], x_type=T.DOUBLE),
                     "float32"),
    "zero strides": (model([conv(strides=[0, 0], pads=[1] * 4)], {"w": W}), "strides"),
    "negative pads": (model([conv(pads=[-5] * 4)], {"w": W}), "pads"),
    "weights of 2 channels": (model([conv(pads=[1] * 4)], {"w": W[:, :2]}), "weights"),
    "one output channel": (model([conv(pads=[1] * 4)], {"w": W[:1]}, y=(1, 1, None, None)),
                           "takes 3 channels and gives 1 channel; the picture pipeline "
                           "converts RGB pictures"),
    "one input channel": (model([conv(pads=[1] * 4)], {"w": W[:, :1]}, x=(1, 1, None, None)),
                          "takes 1 channel and gives 3 channels"),
    "four output channels": (model([conv(pads=[1] * 4)], {"w": np.concatenate([W, W[:1]])},
                                   y=(1, 4, None, None)), "gives 4 channels"),
    "unknown op": (model([helper.make_node("Foo", ["x"], ["y"])]), "Foo"),
    "output of rank 2": (model([helper.make_node("Flatten", ["x"], ["y"])], y=(1, None)),
                         "NCHW (rank 4)"),
    "two inputs": (model([helper.make_node("Add", ["x", "z"], ["y"])], extra_inputs=[
        helper.make_tensor_value_info("z", T.FLOAT, [1, 3, None, None])]), "inputs"),
    "opset 99": (model([helper.make_node("Relu", ["x"], ["y"])], opset=99), "opset"),
    "bad reshape": (model([helper.make_node("Reshape", ["x", "s"], ["y"])],
                          {"s": np.array([7, -1, 5], np.int64)}), "Reshape"),
    "resize to exabytes": (model([helper.make_node("Resize", ["x", "", "sc"], ["y"])],
                                 {"sc": np.array([1, 1, 1e6, 1e6], np.float32)}), ""),
    "garbage bytes": (b"\x08\x07garbage", "not a valid ONNX model"),
    "empty file": (b"", ""),
}


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad_models_pics")
    save(folder / "a.png", (20, 24, 3))
    save(folder / "b.png", (18, 16, 3), seed=1)
    return folder


def write(path, m):
    if isinstance(m, bytes):
        path.write_bytes(m)
    else:
        onnx.save(m, path)
    return path


@pytest.mark.parametrize("name", list(BAD))
def test_bad_model_is_one_line_exit_2(tmp_path, pictures, name):
    m, says = BAD[name]
    path = write(tmp_path / "m.onnx", m)
    p = cli("convert", pictures, "-o", tmp_path / "out", "--model", path, "-q", timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("a2r_edge: error: ")]
    assert all(line.startswith(("a2r_edge: error: ", "a2r_edge: warning: ")) for line in lines), \
        p.stderr  # one line each, never a source line or traceback
    assert len(errors) in (1, 2), p.stderr  # refused at load, or each picture once
    assert says in p.stderr + p.stdout


def test_a_fixed_input_shape_model_converts_or_says_why_in_one_line(tmp_path, pictures):
    m = model([conv(pads=[1] * 4)], {"w": W}, x=(1, 3, 64, 64), y=(1, 3, 64, 64))
    path = write(tmp_path / "fixed.onnx", m)
    p = cli("convert", pictures, "-o", tmp_path / "out", "--model", path, "-q", timeout=120)
    assert "Traceback" not in p.stderr
    assert p.returncode == 0 or len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_model_failing_on_one_picture_converts_the_others(tmp_path):
    """The network needs square pictures (a Reshape to (N, C, H, H)): a picture of another
    shape fails alone (no multiple padding can fix: model.fit.size_multiple keeps stride 1);
    the folder goes on."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "nchh"], ["r"], axis=0),
             helper.make_node("Reshape", ["x", "r"], ["y"])]
    m = model(nodes, {"nchh": np.array([0, 1, 2, 2], np.int64)})
    path = write(tmp_path / "square.onnx", m)
    folder = tmp_path / "in"
    folder.mkdir()
    save(folder / "a.png", (16, 16, 3))
    save(folder / "b.png", (17, 16, 3), seed=1)
    save(folder / "c.png", (24, 24, 3), seed=2)
    p = cli("convert", folder, "-o", tmp_path / "out", "--model", path, "-q", timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "converted 2 of 3 picture(s); 1 failed" in p.stdout
    assert "b.png" in p.stdout.splitlines()[-1]
    assert sorted(f.name for f in (tmp_path / "out").iterdir()) == ["a.png", "c.png"]


def test_a_network_needing_multiples_of_4_converts_every_picture(tmp_path):
    """A Reshape into 4x4 blocks plans only at multiples of 4: the Engine pads each picture to
    them (model.fit.size_multiple), the outputs keep the pictures' sizes."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Div", ["s", "four"], ["q"]),
             helper.make_node("Mul", ["q", "four"], ["r"]),
             helper.make_node("Reshape", ["x", "r"], ["y"])]
    path = write(tmp_path / "div4.onnx", model(nodes, {"four": np.array([1, 1, 4, 4],
                                                                        np.int64)}))
    folder = tmp_path / "in"
    folder.mkdir()
    for name, shape in (("a.png", (16, 16, 3)), ("b.png", (17, 16, 3)), ("c.png", (20, 23, 3))):
        save(folder / name, shape)
    p = cli("convert", folder, "-o", tmp_path / "out", "--model", path, "-q", timeout=120)
    assert p.returncode == 0, p.stderr
    assert [cv2.imread(str(tmp_path / "out" / n)).shape[:2] for n in ("a.png", "b.png",
                                                                      "c.png")] == \
        [(16, 16), (17, 16), (20, 23)]


def adain_model():
    c = 3
    nodes = [helper.make_node("AdaIN", ["x", "mean", "std"], ["y"], domain="com.a2r_edge",
                              epsilon=1e-5)]
    return model(nodes, {"mean": np.zeros(c, np.float32), "std": np.full(c, 0.5, np.float32)},
                 domains=["com.a2r_edge"])


def test_a_valid_adain_node_model_runs_in_a_default_engine(tmp_path):
    path = write(tmp_path / "adain.onnx", adain_model())
    eng = Engine(str(path))
    out = eng.convert(np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8))
    assert out.shape == (16, 16, 3)
    with pytest.raises(ValueError, match="only the native executor runs"):
        Engine(str(path), backend="onnxruntime")


@pytest.mark.parametrize("name", ["one output channel", "one input channel",
                                  "four output channels"])
def test_a_model_without_3_channels_is_refused_when_the_engine_is_built(tmp_path, name):
    """Stated channels other than 3 in or out: refused at load, naming what the model has
    and no internal picture size."""
    m, says = BAD[name]
    with pytest.raises(ValueError, match="must have 3 channels") as info:
        Engine(str(write(tmp_path / "m.onnx", m)), cache_mb=0)
    assert says in str(info.value) and "512" not in str(info.value)


def test_unstated_output_channels_fail_each_picture_naming_the_channels(tmp_path):
    """An output whose channels the model does not state fails on the picture, with the
    channels and no shape of the memory probe."""
    m = model([conv(pads=[1] * 4)], {"w": np.concatenate([W, W[:1]])}, y=(1, "C", None, None))
    eng = Engine(str(write(tmp_path / "m.onnx", m)), cache_mb=0)
    with pytest.raises(ValueError, match="its network gives 4 channels; the picture pipeline "
                                         "converts RGB pictures") as info:
        eng.convert(np.zeros((20, 24, 3), np.uint8))
    assert "64" not in str(info.value)


@pytest.mark.parametrize("tile", [None, 16])
def test_nan_or_inf_output_fails_the_picture(tmp_path, tile):
    """Log of the picture's negative values is NaN (of 0, -inf): the picture fails with the
    count, whole or in tiles, instead of being written with black pixels."""
    m = model([helper.make_node("Log", ["x"], ["y"])])
    eng = Engine(str(write(tmp_path / "log.onnx", m)), cache_mb=0, tile=tile)
    with pytest.raises(ValueError, match=r"returned \d+ NaN or infinite value\(s\) of \d+; no "
                                         r"picture written"):
        eng.convert(np.random.default_rng(0).integers(0, 256, (40, 36, 3), dtype=np.uint8))
    ok = eng.convert(np.full((40, 36, 3), 200, np.uint8))   # log of values > 0: finite
    assert ok.shape == (40, 36, 3)
