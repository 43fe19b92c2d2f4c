"""The straightforward peer of the Engine: what a user would write with numpy, OpenCV and
onnxruntime (or OpenVINO) for the same model package, one picture at a time: the package oracle
(a2r_edge/model/reference.py ``PackageReference``: one onnxruntime session per ONNX stage, numpy
pre/post-processing and AdaIN) with OpenCV's cv2.ximgproc guided filter. Benchmarks compare
against it."""
import os
from types import SimpleNamespace

from a2r_edge.model.reference import PackageReference

# OpenVINO's inference precision: its default (bf16 where the CPU has AVX512_BF16 or AMX), or
# the hint A2R_BENCH_OPENVINO_PRECISION names (f32, bf16). With ONEDNN_MAX_CPU_ISA=AVX2 and
# A2R_MAX_ISA=avx2 beside f32, a run stands in for an AVX2-only machine (benchmarks/README.md).
OPENVINO_PRECISION = os.environ.get("A2R_BENCH_OPENVINO_PRECISION")
OPENVINO = f"openvino {OPENVINO_PRECISION or 'default'}"   # the peer's name in the tables


class _OpenVinoSession:
    """The part of onnxruntime's session PackageReference uses (get_inputs, run) over an OpenVINO
    model compiled for the CPU at OPENVINO_PRECISION."""

    def __init__(self, path, threads: int):
        import openvino as ov
        config = {"INFERENCE_NUM_THREADS": threads}
        if OPENVINO_PRECISION:
            config["INFERENCE_PRECISION_HINT"] = OPENVINO_PRECISION
        self._compiled = ov.Core().compile_model(str(path), "CPU", config)
        self._request = self._compiled.create_infer_request()
        self._name = self._compiled.input(0).any_name

    def get_inputs(self):
        return [SimpleNamespace(name=self._name)]

    def run(self, outputs, feeds):
        return [self._request.infer([feeds[self._name]])[self._compiled.output(0)]]


def stage_runner(path, threads: int, runtime: str = "onnxruntime"):
    """A function float32 NCHW -> float32 NCHW running one ONNX file on ``runtime``
    ("onnxruntime": fp32; "openvino": OPENVINO_PRECISION)."""
    if runtime == "openvino":
        sess = _OpenVinoSession(path, threads)
    else:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return lambda x: sess.run(None, {name: x})[0]


def converter(model, threads: int, runtime: str = "onnxruntime"):
    """A function BGR uint8 (H, W, 3) -> BGR uint8 for the package folder ``model``; runtime: of
    the ONNX stages, "onnxruntime" or "openvino"."""
    import cv2
    ref = PackageReference(str(model), threads, guided_filter=cv2.ximgproc.guidedFilter)
    if runtime == "openvino":
        for st in ref.stages:
            if st["kind"] == "onnx":
                st["session"] = _OpenVinoSession(os.path.join(str(model), st["file"]), threads)
    return ref.convert
