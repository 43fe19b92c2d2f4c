"""The straightforward peer of the Engine: what a user would write with numpy, OpenCV and
onnxruntime for the same model package (one session per ONNX stage, numpy pre/post-processing and
AdaIN, cv2.ximgproc guided filter), one picture at a time. Benchmarks compare against it."""
import json
from pathlib import Path

import numpy as np


def converter(model, threads: int):
    """A function BGR uint8 (H, W, 3) -> BGR uint8 for the package folder ``model``; H and W
    must be multiples of the model's stride (no padding here)."""
    import cv2
    import onnxruntime as ort
    m = json.loads((Path(model) / "manifest.json").read_text())
    mean = np.array(m["normalization"]["mean"], np.float32).reshape(3, 1, 1)
    std = np.array(m["normalization"]["std"], np.float32).reshape(3, 1, 1)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    sessions = {s["name"]: ort.InferenceSession(str(Path(model) / s["file"]), so)
                for s in m["stages"] if s["kind"] == "onnx"}
    stats = {s["name"]: json.loads((Path(model) / s["stats"]).read_text())
             for s in m["stages"] if s["kind"] == "adain"}

    def convert(frame):
        x = ((frame[:, :, ::-1].transpose(2, 0, 1).astype(np.float32) / 255 - mean) / std)[None]
        y = x
        for s in m["stages"]:
            if s["kind"] == "onnx":
                sess = sessions[s["name"]]
                y = sess.run(None, {sess.get_inputs()[0].name: y})[0]
                if s.get("add_input"):
                    y = y + x
            elif s["kind"] == "adain":
                st = stats[s["name"]]
                mu = y.mean(axis=(2, 3), keepdims=True)
                sd = np.sqrt(y.var(axis=(2, 3), keepdims=True) + s.get("eps", 1e-5))
                t_mean, t_std = np.array(st["mean"]), np.array(st["std"])
                if "content_map" in st:   # target predicted from the picture's own statistics
                    c = t_mean.size
                    z = (np.array(st["content_map"]["weight"]) @ np.r_[mu.ravel(), np.log(sd.ravel())]
                         + np.array(st["content_map"]["bias"]))
                    t_mean, t_std = (np.clip(z[:c], t_mean - 4 * t_std, t_mean + 4 * t_std),
                                     t_std * np.exp(np.clip(z[c:] - np.log(t_std), -4, 4)))
                y = ((y - mu) / sd * t_std.astype(np.float32).reshape(1, -1, 1, 1)
                     + t_mean.astype(np.float32).reshape(1, -1, 1, 1)).astype(np.float32)
            else:
                luma = (0.299 * x[0, 0] + 0.587 * x[0, 1] + 0.114 * x[0, 2]).astype(np.float32)
                src = np.ascontiguousarray(y[0].transpose(1, 2, 0))
                base = cv2.ximgproc.guidedFilter(luma, src, s["radius"], s["eps"])
                y = (base + s.get("detail", 1.0) * (src - base)).transpose(2, 0, 1)[None]
        v = np.clip(np.rint((y[0] * std + mean) * 255), 0, 255).astype(np.uint8)
        return np.ascontiguousarray(v.transpose(1, 2, 0)[:, :, ::-1])

    return convert
