"""The straightforward peer of the Engine: what a user would write with numpy, OpenCV and
onnxruntime for the same model package, one picture at a time: the package oracle
(a2r_edge/model/reference.py ``PackageReference``: one onnxruntime session per ONNX stage, numpy
pre/post-processing and AdaIN) with OpenCV's cv2.ximgproc guided filter. Benchmarks compare
against it."""
from a2r_edge.model.reference import PackageReference


def converter(model, threads: int):
    """A function BGR uint8 (H, W, 3) -> BGR uint8 for the package folder ``model``."""
    import cv2
    return PackageReference(str(model), threads, guided_filter=cv2.ximgproc.guidedFilter).convert
