"""The bundled a2r_lite package: loads and verifies, runs natively and on onnxruntime alike,
and equals the training tools' reference pipeline (tools/a2r_lite_pipeline.py)."""
import importlib.util
import json
from pathlib import Path

import cv2
import numpy as np
import onnx
import onnxruntime
import pytest

from a2r_edge import Engine, load_model
from a2r_edge.model import SUPPORTED, NativeExecutor

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "astronaut_toon.png"


@pytest.fixture(scope="module")
def package():
    return load_model(None)  # checks every sha256


@pytest.fixture(scope="module")
def engine():
    return Engine()


def test_package_is_complete_and_small(package):
    assert package.name == "a2r_lite" and package.stride == 4 and package.scale == 1
    assert [s.kind for s in package.stages] == ["onnx", "adain", "onnx", "guided_filter"]
    size = sum(f.stat().st_size for f in package.folder.iterdir())
    assert size < 20 << 20
    manifest = json.loads((package.folder / "manifest.json").read_text())
    assert manifest["training"]["gflops_512"] <= 15 and manifest["receptive_field"] > 0


@pytest.mark.parametrize("stage", ["encode", "decode"])
def test_graphs_use_only_executor_ops_and_match_onnxruntime(package, stage):
    path = str(next(s for s in package.stages if s.name == stage).params["file"])
    assert {n.op_type for n in onnx.load(path).graph.node} <= SUPPORTED
    channels = 3 if stage == "encode" else 32
    x = np.random.default_rng(0).standard_normal((1, channels, 36, 44)).astype(np.float32)
    want = onnxruntime.InferenceSession(path).run(None, {onnx.load(path).graph.input[0].name: x})[0]
    got = NativeExecutor(path).run(x)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


def test_native_and_onnxruntime_plans_agree_on_the_sample(engine):
    img = cv2.imread(str(SAMPLE))
    other = Engine(backend="onnxruntime")
    assert np.abs(engine.convert(img).astype(int) - other.convert(img)).max() <= 1


def test_engine_equals_the_reference_pipeline(engine):
    spec = importlib.util.spec_from_file_location("a2r_lite_pipeline",
                                                  ROOT / "tools" / "a2r_lite_pipeline.py")
    pipeline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pipeline)
    reference = pipeline.Package(str(ROOT / "a2r_edge" / "models" / "a2r_lite"))
    img = cv2.imread(str(SAMPLE))[:237, :203]  # odd size: padding and crop
    assert np.abs(engine.convert(img).astype(int) - reference.convert(img)).max() <= 1


def test_the_sample_changes_and_keeps_its_layout(engine):
    img = cv2.imread(str(SAMPLE))
    out = engine.convert(img)
    assert out.shape == img.shape and out.dtype == np.uint8
    assert np.abs(out.astype(int) - img).mean() > 3  # the model did something
