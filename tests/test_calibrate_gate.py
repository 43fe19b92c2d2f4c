"""tools/calibrate_gate.py's package rewrite: the gate's logit bias shifted, the offset recorded
and added up with the command that chose it, every other file and weight unchanged, the
manifest's digests valid."""
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
def cal():
    spec = importlib.util.spec_from_file_location("calibrate_gate",
                                                  ROOT / "tools" / "calibrate_gate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)   # puts tools/ on sys.path for its own imports
    return mod


def ungated_copy(cal, dst):
    """The bundled (gated) package with its gate logit bias renamed: a decoder the rewrite
    must refuse, as it refuses a package trained without --gate."""
    shutil.copytree(BUNDLED, dst)
    model = onnx.load(dst / "decoder.onnx")
    renamed = cal.GATE_LOGIT_BIAS + ".renamed"
    for init in model.graph.initializer:
        if init.name == cal.GATE_LOGIT_BIAS:
            init.name = renamed
    for node in model.graph.node:
        node.input[:] = [renamed if i == cal.GATE_LOGIT_BIAS else i for i in node.input]
    onnx.save(model, dst / "decoder.onnx")
    cal.pipe.write_manifest(str(dst))
    return dst


def gate_bias(folder, name):
    model = onnx.load(folder / "decoder.onnx")
    return next(numpy_helper.to_array(i) for i in model.graph.initializer if i.name == name)


def test_write_shifted_moves_only_the_gate_and_records_the_offset(cal, tmp_path):
    src = BUNDLED
    bias0 = gate_bias(src, cal.GATE_LOGIT_BIAS)[0]
    man0 = json.loads((src / "manifest.json").read_text())
    offset0 = man0["training"].get("gate_offset", 0.0)
    detail0 = man0["stages"][-1]["detail"]
    once, twice = tmp_path / "once", tmp_path / "twice"
    cal.write_shifted(str(src), str(once), 1.5)
    cal.write_shifted(str(once), str(twice), -0.5, detail=detail0 + 0.05,
                      command="how it was chosen")
    assert gate_bias(once, cal.GATE_LOGIT_BIAS)[0] == pytest.approx(bias0 + 1.5)
    assert gate_bias(twice, cal.GATE_LOGIT_BIAS)[0] == pytest.approx(bias0 + 1.0)
    for folder, offset in ((once, 1.5), (twice, 1.0)):
        man = json.loads((folder / "manifest.json").read_text())
        assert man["training"]["gate_offset"] == pytest.approx(offset0 + offset)
        assert man["training"].get("calibration") == (
            man0["training"].get("calibration") if folder is once else "how it was chosen")
        cal.pipe.Package(str(folder))          # raises on a digest that does not match
    enhance = [json.loads((f / "manifest.json").read_text())["stages"][-1] for f in (once, twice)]
    assert enhance[0]["detail"] == detail0
    assert enhance[1]["detail"] == pytest.approx(detail0 + 0.05)
    src_dec, out_dec = onnx.load(src / "decoder.onnx"), onnx.load(twice / "decoder.onnx")
    others = {i.name: numpy_helper.to_array(i) for i in src_dec.graph.initializer
              if i.name != cal.GATE_LOGIT_BIAS}
    assert others and all(np.array_equal(others[i.name], numpy_helper.to_array(i))
                          for i in out_dec.graph.initializer if i.name in others)
    assert (twice / "encoder.onnx").read_bytes() == (src / "encoder.onnx").read_bytes()


def test_write_shifted_refuses_a_package_without_a_gate(cal, tmp_path):
    with pytest.raises(SystemExit, match="not a gated package"):
        cal.write_shifted(str(ungated_copy(cal, tmp_path / "src")), str(tmp_path / "out"), 1.0)
