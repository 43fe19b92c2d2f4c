"""Tiny model packages built on the fly for Engine and CLI tests (random weights, no training):
the bundled model's stage layout (encode -> adain -> decode + input -> guided filter) at a size
that runs in milliseconds, and a plain ONNX 2x up-scaler."""
import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from a2r_edge.model.package import write_manifest

FEATURES = 8


def _model(nodes, inits, out_channels, name):
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, None, None, None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, out_channels, None, None])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _conv(rng, o, c, k=3, scale=1.0):
    return (rng.standard_normal((o, c, k, k)) * scale / np.sqrt(c * k * k)).astype(np.float32)


def encoder(rng):
    inits = {"w1": _conv(rng, FEATURES, 3), "b1": np.zeros(FEATURES, np.float32),
             "w2": _conv(rng, FEATURES, FEATURES), "b2": np.zeros(FEATURES, np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["h1"], strides=[2, 2], pads=[1] * 4),
             helper.make_node("Relu", ["h1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], strides=[2, 2], pads=[1] * 4)]
    return _model(nodes, inits, FEATURES, "encoder")


def decoder(rng):
    inits = {"w1": _conv(rng, 12, FEATURES), "w2": _conv(rng, 12, 3, scale=0.3)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h1"], pads=[1] * 4),
             helper.make_node("DepthToSpace", ["h1"], ["u1"], blocksize=2, mode="CRD"),
             helper.make_node("Conv", ["u1", "w2"], ["h2"], pads=[1] * 4),
             helper.make_node("DepthToSpace", ["h2"], ["u2"], blocksize=2, mode="CRD"),
             helper.make_node("Tanh", ["u2"], ["y"])]
    return _model(nodes, inits, 3, "decoder")


def upscaler_2x(rng):
    """A plain ONNX x2 model: conv to 12 channels, DepthToSpace 2, tanh."""
    inits = {"w": _conv(rng, 12, 3)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"], pads=[1] * 4),
             helper.make_node("DepthToSpace", ["h"], ["d"], blocksize=2, mode="CRD"),
             helper.make_node("Tanh", ["d"], ["y"])]
    return _model(nodes, inits, 3, "upscaler")


def make_package(folder: Path, seed: int = 0, enhance: dict | None = None,
                 content_map: bool = False) -> Path:
    """A valid package in ``folder``; enhance: the guided_filter stage's parameters;
    content_map: the statistics file also predicts each picture's target statistics from its
    own (a random map near the identity)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(encoder(rng), folder / "encoder.onnx")
    onnx.save(decoder(rng), folder / "decoder.onnx")
    stats = {"mean": rng.normal(0, 0.3, FEATURES).round(4).tolist(),
             "std": rng.uniform(0.5, 1.5, FEATURES).round(4).tolist()}
    if content_map:
        n = 2 * FEATURES
        stats["content_map"] = {"weight": (0.8 * np.eye(n) + rng.normal(0, 0.1, (n, n))).tolist(),
                                "bias": rng.normal(0, 0.2, n).tolist()}
    (folder / "photo_stats.json").write_text(json.dumps(stats))
    stages = [{"name": "encode", "kind": "onnx", "file": "encoder.onnx"},
              {"name": "stylize", "kind": "adain", "stats": "photo_stats.json", "eps": 1e-5},
              {"name": "decode", "kind": "onnx", "file": "decoder.onnx", "add_input": True}]
    stages.append({"name": "enhance", "kind": "guided_filter",
                   **(enhance or {"radius": 2, "eps": 1e-3, "detail": 1.5})})
    manifest = {"name": "tiny", "version": "0", "license": "MIT",
                "description": "random weights, for tests", "scale": 1, "stride": 4,
                "receptive_field": 23,
                "normalization": {"mean": [0.5] * 3, "std": [0.5] * 3}, "stages": stages}
    write_manifest(folder, manifest, ["encoder.onnx", "decoder.onnx", "photo_stats.json"])
    return folder
