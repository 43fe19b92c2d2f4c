"""The Engine: a model package, a plan, and the pipeline of DESIGN.md §1 for one picture.

    uint8 gray / BGR / BGRA  ->  reflect-pad to the model's stride  ->  preprocess
    -> the model's stages in order (onnx networks, AdaIN to photo or reference statistics,
       guided-filter detail)  ->  postprocess  ->  crop  ->  gray / alpha restored

>>> eng = Engine()                    # the bundled a2r_lite model, best plan for this machine
>>> out = eng.convert(picture)        # same layout and dtype, H and W times the model scale
"""
from __future__ import annotations

import threading
from typing import Iterable, Iterator

import numpy as np

from . import ops
from .model import package as pkg
from .scheduler import make_plan

# ITU-R BT.601 luma weights, the ones OpenCV's BGR2GRAY uses.
_LUMA = np.array([0.299, 0.587, 0.114], np.float32)  # R, G, B


def _as_picture(img, name: str = "img") -> np.ndarray:
    if not isinstance(img, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray of uint8 (H, W), (H, W, 3) or "
                        f"(H, W, 4), got {type(img).__name__}")
    if img.dtype != np.uint8:
        raise TypeError(f"{name} must have dtype uint8, got {img.dtype}")
    if img.ndim not in (2, 3) or (img.ndim == 3 and img.shape[2] not in (1, 3, 4)):
        raise ValueError(f"{name} must have shape (H, W), (H, W, 3) BGR or (H, W, 4) BGRA, "
                         f"got {img.shape}")
    if img.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {img.shape}")
    return img


class Engine:
    """Converts pictures with one model on one plan.

    model: None (the bundled default, a2r_lite), a model package folder, or a plain ONNX
    image-to-image file (RGB float32 NCHW in [-1, 1] in and out). device: "auto", "cpu", "gpu" or
    "split" ("gpu"/"split" need the CUDA library; without it they raise ValueError). backend:
    None (the plan's choice), "native" or "onnxruntime" for every ONNX stage.
    Thread-safe: calls from several threads run one at a time.
    """

    def __init__(self, model=None, device: str = "auto", *, backend: str | None = None):
        self.model = pkg.resolve(model)
        # Each ONNX stage becomes a function float32 NCHW -> float32 NCHW on its backend.
        runners, unsupported = {}, {}
        for stage in self.model.stages:
            if stage.kind == "onnx" and backend != "onnxruntime":
                from .model import NativeExecutor, UnsupportedOpError
                try:
                    runners[stage.name] = NativeExecutor(str(stage.params["file"])).run
                except UnsupportedOpError as exc:
                    unsupported[stage.name] = str(exc)
        self.plan = make_plan(self.model.stages, device, backend, unsupported)
        for stage in self.model.stages:
            if stage.kind == "onnx" and self.plan.backend_of(stage.name) == "onnxruntime":
                from .backends.ort import OrtSession
                session = OrtSession(str(stage.params["file"]), threads=self.plan.threads)
                runners[stage.name] = (
                    lambda x, s=session: s.run({s.input_names[0]: x})[0])
        self._runners = runners
        adain = self.model.stage("adain")
        self._photo_stats = pkg.load_stats(adain.params["stats"]) if adain else None
        self._lock = threading.Lock()

    # --- public API ------------------------------------------------------------------------------

    def convert(self, img: np.ndarray, style: np.ndarray | None = None) -> np.ndarray:
        """One picture: uint8 (H, W), (H, W, 3) BGR or (H, W, 4) BGRA -> the same layout, H and W
        times the model's scale. style: a reference photo (uint8 BGR) whose statistics replace
        the bundled photo statistics in the AdaIN stage."""
        img = _as_picture(img)
        stats = self.style_stats(style) if style is not None else None
        with self._lock:
            return self._convert(img, stats)

    def convert_batch(self, images: Iterable[np.ndarray],
                      style: np.ndarray | None = None) -> list[np.ndarray]:
        """A list of pictures -> the list of results, same order."""
        return list(self.stream(images, style=style))

    def stream(self, frames: Iterable[np.ndarray],
               style: np.ndarray | None = None) -> Iterator[np.ndarray]:
        """Converts frames as they come, same order."""
        stats = self.style_stats(style) if style is not None else None
        for i, frame in enumerate(frames):
            frame = _as_picture(frame, f"frame {i}")
            with self._lock:
                yield self._convert(frame, stats)

    def style_stats(self, photo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """AdaIN statistics (mean, std) per feature channel of a reference photo: the features
        the stage before the AdaIN stage makes of it."""
        photo = _as_picture(photo, "style")
        if self.model.stage("adain") is None:
            raise ValueError(f"model {self.model.name!r} has no AdaIN stage: style= does not apply")
        with self._lock:
            x = ops.preprocess(self._bgr(photo), self.model.mean, self.model.std)
            for stage in self.model.stages:
                if stage.kind == "adain":
                    return ops.channel_stats(x, stage.params["eps"])
                x = self._run_stage(stage, x, x, None)
        raise AssertionError("unreachable: the model has an AdaIN stage")

    # --- the pipeline ----------------------------------------------------------------------------

    @staticmethod
    def _bgr(img: np.ndarray) -> np.ndarray:
        if img.ndim == 2 or img.shape[2] == 1:
            return np.repeat(img.reshape(img.shape[0], img.shape[1], 1), 3, axis=2)
        return np.ascontiguousarray(img[:, :, :3])

    def _run_stage(self, stage, x, picture, stats):
        """x: the current float32 NCHW tensor; picture: the normalised input picture."""
        p = stage.params
        if stage.kind == "onnx":
            # The native executor owns its output until its next run: consumed right away here.
            y = self._runners[stage.name](x)
            if p.get("add_input"):
                if y.shape != picture.shape:
                    raise ValueError(f"stage {stage.name!r}: add_input needs an output of the "
                                     f"input picture's shape {picture.shape}, got {y.shape}")
                y += picture
            return y
        if stage.kind == "adain":
            mean, std = stats if stats is not None else self._photo_stats
            if mean.shape[-1] != x.shape[1]:
                raise ValueError(f"stage {stage.name!r}: {mean.shape[-1]} statistics for "
                                 f"{x.shape[1]} feature channels")
            return ops.adain(x, mean, std, eps=p["eps"])
        # guided_filter: detail stage guided by the input's luma
        y = np.ascontiguousarray(x[0].transpose(1, 2, 0))
        guide = np.tensordot(_LUMA, picture[0], axes=1).astype(np.float32)
        if guide.shape != y.shape[:2]:
            import cv2
            guide = cv2.resize(guide, (y.shape[1], y.shape[0]), interpolation=cv2.INTER_LINEAR)
        base = ops.guided_filter(guide, y, p["radius"], p["eps"])
        if p["detail"] != 1.0:
            y -= base
            y *= np.float32(p["detail"])
            y += base
        else:
            y = base
        return np.ascontiguousarray(y.transpose(2, 0, 1))[None]

    def _convert(self, img: np.ndarray, stats) -> np.ndarray:
        h, w = img.shape[:2]
        s = self.model.stride
        ph, pw = (-h) % s, (-w) % s
        bgr = self._bgr(img)
        if ph or pw:
            bgr = np.pad(bgr, ((0, ph), (0, pw), (0, 0)), mode="reflect" if min(h, w) > 1
                         else "edge")
        picture = ops.preprocess(bgr, self.model.mean, self.model.std)
        x = picture
        for stage in self.model.stages:
            x = self._run_stage(stage, x, picture, stats)
        if x.ndim != 4 or x.shape[:2] != (1, 3):
            raise ValueError(f"model {self.model.name!r} returned shape {x.shape}; "
                             f"expected (1, 3, H, W) RGB")
        out = ops.postprocess(x, self.model.mean, self.model.std)
        sy, sx = out.shape[0] / bgr.shape[0], out.shape[1] / bgr.shape[1]
        if self.model.scale is not None and (sy, sx) != (self.model.scale,) * 2:
            raise ValueError(f"model {self.model.name!r} declares scale {self.model.scale} but "
                             f"returned {out.shape[:2]} for {bgr.shape[:2]}")
        oh, ow = round(h * sy), round(w * sx)
        out = out[:oh, :ow]
        if img.ndim == 2 or img.shape[2] == 1:
            luma = out.astype(np.float32) @ _LUMA[::-1]  # BGR order
            gray = np.clip(np.rint(luma), 0, 255).astype(np.uint8)
            return gray if img.ndim == 2 else gray[..., None]
        if img.shape[2] == 4:
            alpha = img[:, :, 3]
            if alpha.shape != (oh, ow):
                import cv2
                alpha = cv2.resize(alpha, (ow, oh), interpolation=cv2.INTER_LINEAR)
            return np.dstack([out, alpha])
        return np.ascontiguousarray(out)
