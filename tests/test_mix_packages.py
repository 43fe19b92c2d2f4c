"""tools/mix_packages.py: every float weight, the photo statistics and the content map are the
weighted mean of the sources', the weights normalised and recorded in the manifest, whose digests
stay valid; packages of different graphs are refused."""
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = ROOT / "a2r_edge" / "models" / "a2r_lite"


@pytest.fixture(scope="module")
def mixer():
    spec = importlib.util.spec_from_file_location("mix_packages", ROOT / "tools" / "mix_packages.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)   # puts tools/ on sys.path for its own imports
    return mod


def weights(folder, name):
    model = onnx.load(folder / name)
    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


def scaled_copy(mixer, dst, factor):
    """The bundled package with every float weight and statistic times `factor`."""
    shutil.copytree(BUNDLED, dst)
    for name in mixer.GRAPHS:
        model = onnx.load(dst / name)
        for init in model.graph.initializer:
            a = numpy_helper.to_array(init)
            if a.dtype.kind == "f":
                init.CopyFrom(numpy_helper.from_array((a * factor).astype(a.dtype), init.name))
        onnx.save(model, dst / name)
    stats = json.loads((dst / mixer.STATS).read_text())
    stats["mean"] = (np.asarray(stats["mean"]) * factor).tolist()
    stats["content_map"]["weight"] = (np.asarray(stats["content_map"]["weight"]) * factor).tolist()
    (dst / mixer.STATS).write_text(json.dumps(stats))
    mixer.pipe.write_manifest(str(dst))
    return dst


def test_mix_is_the_weighted_mean_and_is_recorded(mixer, tmp_path):
    a, b = scaled_copy(mixer, tmp_path / "a", 1.0), scaled_copy(mixer, tmp_path / "b", 3.0)
    out = tmp_path / "mix"
    mixer.mix([(str(a), 1.0), (str(b), 3.0)], str(out))   # normalised: 0.25, 0.75 -> x 2.5
    for name in mixer.GRAPHS:
        ref, got = weights(a, name), weights(out, name)
        assert ref.keys() == got.keys()
        for key, r in ref.items():
            expect = r * 2.5 if r.dtype.kind == "f" else r
            np.testing.assert_allclose(got[key], expect, rtol=1e-6, atol=1e-7)
    s_a = json.loads((a / mixer.STATS).read_text())
    s_m = json.loads((out / mixer.STATS).read_text())
    np.testing.assert_allclose(s_m["mean"], np.asarray(s_a["mean"]) * 2.5, rtol=1e-6)
    np.testing.assert_allclose(s_m["std"], s_a["std"], rtol=1e-6)   # the same in both
    np.testing.assert_allclose(s_m["content_map"]["weight"],
                               np.asarray(s_a["content_map"]["weight"]) * 2.5, rtol=1e-6)
    man = json.loads((out / "manifest.json").read_text())
    assert man["stages"] == json.loads((b / "manifest.json").read_text())["stages"]
    mix = man["training"]["mix"]
    assert [(m["package"], m["weight"]) for m in mix] == [(str(a), 0.25), (str(b), 0.75)]
    mixer.pipe.Package(str(out))       # raises on a digest that does not match


def test_mix_refuses_different_graphs(mixer, tmp_path):
    a = scaled_copy(mixer, tmp_path / "a", 1.0)
    b = scaled_copy(mixer, tmp_path / "b", 1.0)
    model = onnx.load(b / "decoder.onnx")
    model.graph.initializer.append(numpy_helper.from_array(np.zeros(1, np.float32), "extra"))
    onnx.save(model, b / "decoder.onnx")
    with pytest.raises(SystemExit, match="not the same graph"):
        mixer.mix([(str(a), 1.0), (str(b), 1.0)], str(tmp_path / "mix"))


def test_source_weights_parse(mixer, tmp_path):
    assert mixer.parse_source(str(tmp_path)) == (str(tmp_path), 1.0)
    assert mixer.parse_source(f"{tmp_path}:0.75") == (str(tmp_path), 0.75)
    with pytest.raises(SystemExit, match="FOLDER:WEIGHT"):
        mixer.parse_source(f"{tmp_path}:x")
