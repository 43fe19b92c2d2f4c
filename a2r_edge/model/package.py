"""Model packages: a folder with ``manifest.json`` and the files it names (docs/architecture.md).

``load_package(path)`` reads and checks a package: the manifest's fields and stages, that every
file stays inside the folder, and the sha256 of every file. ``wrap_onnx(path)`` turns a plain
ONNX image-to-image file into a one-stage package (RGB float32 NCHW in [-1, 1] in and out, the
usual GAN convention). Weights load without pickle: ONNX files and JSON statistics only.

Manifest (format ``a2r_edge.model/1``)::

    {"format": "a2r_edge.model/1", "name": ..., "version": ..., "license": ..., "description": ...,
     "scale": 1, "stride": 4, "receptive_field": 61,
     "normalization": {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]},
     "stages": [{"name": "encode", "kind": "onnx", "file": "encoder.onnx"},
                {"name": "stylize", "kind": "adain", "stats": "photo_stats.json", "eps": 1e-5},
                {"name": "decode", "kind": "onnx", "file": "decoder.onnx", "add_input": true},
                {"name": "enhance", "kind": "guided_filter", "radius": 2, "eps": 1e-4,
                 "detail": 1.5}],
     "files": {"encoder.onnx": "<sha256>", ...},
     "strength": 1.0, "border_margin": 16}

``strength`` (optional, default 1): the share of the conversion the engine keeps by default
(output = input + strength (model output - input)), chosen by the model's evaluation.
``border_margin`` (optional, default 0): pixels of the picture mirrored onto every side before
the network and cropped after (``picture.forward.pad_to_stride``), so that the network's own zero
padding sits that far from the picture on all four sides (no bright or dark line along an edge).

Pixel conventions (optional ``input_range``, ``channel_order``, ``output_range``, ``layout``,
``output_layout``; the plain ONNX default RGB in [-1, 1] in and out, NCHW unless the network
declares NHWC): see ``conventions.py``.

Stage kinds: ``onnx`` (a network; ``add_input``: it predicts a residual, added to the normalised
input picture), ``adain`` (features renormalised to target statistics: a reference photo's, else
those of ``stats``, see ``AdainStats``), ``guided_filter`` (detail stage: base = guided filter of
the picture guided by the input's luma, y = base + detail * (y - base)).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np

from ..runtime import files
from . import conventions

FORMAT = "a2r_edge.model/1"
STAGE_KINDS = ("onnx", "adain", "guided_filter")
BUNDLED = Path(__file__).resolve().parent.parent / "models"
DEFAULT_MODEL = "a2r_lite"


class ModelPackageError(ValueError):
    """A model package that cannot be used: the message says which file or field and why."""


@dataclasses.dataclass(frozen=True)
class Stage:
    name: str
    kind: str
    params: dict  # the manifest entry; files resolved to absolute paths


@dataclasses.dataclass(frozen=True)
class ModelPackage:
    name: str
    version: str
    license: str
    description: str
    scale: int | None  # output size / input size; None: whatever the network gives
    stride: int
    receptive_field: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    stages: tuple[Stage, ...]
    folder: Path | None  # None for a wrapped plain ONNX file
    strength: float = 1.0  # default share of the conversion kept (Engine.convert strength=)
    border_margin: int = 0  # px mirrored onto every side before the network (pad_to_stride)

    def stage(self, kind: str) -> Stage | None:
        return next((s for s in self.stages if s.kind == kind), None)


@files.per_version(64)
def sha256_of(path) -> str:
    """The hex SHA-256 of the file at ``path``, read once per file version: an Engine asks for
    its stages' digests several times (plan figures, calibration, stored precision choices)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_manifest(folder, manifest: dict, files) -> dict:
    """Write ``folder``/manifest.json: ``manifest`` (every field but "format" and "files") with
    the format and the sha256 of each of ``files`` (names inside ``folder``, already written);
    returns what was written. The one manifest writer, beside the reader ``load_package``."""
    folder = Path(folder)
    out = {"format": FORMAT, **{k: v for k, v in manifest.items() if k not in ("format", "files")},
           "files": {name: sha256_of(folder / name) for name in files}}
    (folder / "manifest.json").write_text(json.dumps(out, indent=2) + "\n")
    return out


def _inside(folder: Path, name, what: str) -> Path:
    """folder/name, refusing names that escape the folder (absolute, .., symlinks out)."""
    if not isinstance(name, str) or not name:
        raise ModelPackageError(f"{what} must be a file name inside the package, got {name!r}")
    path = (folder / name).resolve()
    if path != folder and folder not in path.parents:
        raise ModelPackageError(f"{what} {name!r} points outside the package folder {folder}")
    return path


# Largest JSON file of a package read: a manifest is a few KB, statistics with a content map
# a few hundred KB; anything much larger is not a package file.
MAX_JSON_BYTES = 64 << 20


def _read_json(path: Path, what: str):
    """The JSON in ``path`` (a regular file of at most MAX_JSON_BYTES); ModelPackageError for
    anything else, nesting deeper than the parser goes included."""
    try:
        if not path.is_file():
            raise ModelPackageError(f"{what} {path} is not a regular file")
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise ModelPackageError(f"{what} {path} is {size} bytes: more than a package file "
                                    f"holds ({MAX_JSON_BYTES})")
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        if isinstance(exc, ModelPackageError):
            raise
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ModelPackageError(f"{what} {path}: not valid JSON: {reason}") from None


def _bounded_int(manifest: dict, key: str, low: int, high: int, default=None) -> int:
    """manifest[key], an int in [low, high] (``default`` when absent and not None)."""
    if default is not None and key not in manifest:
        return default
    value = _field(manifest, key, int)
    if not low <= value <= high:
        raise ModelPackageError(f"manifest.json field {key!r} must be in [{low}, {high}], "
                                f"got {value}")
    return value


def _field(manifest: dict, key: str, kind, where: str = "manifest.json"):
    if key not in manifest:
        raise ModelPackageError(f"{where} lacks the field {key!r}")
    value = manifest[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ModelPackageError(f"{where} field {key!r} must be {kind.__name__ if isinstance(kind, type) else kind}, "
                                f"got {value!r}")
    return value


def _triple(value, key: str) -> tuple[float, float, float]:
    if (not isinstance(value, list) or len(value) != 3
            or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in value)):
        raise ModelPackageError(f"manifest.json normalization.{key} must be 3 finite numbers, "
                                f"got {value!r}")
    return tuple(float(v) for v in value)


@dataclasses.dataclass(frozen=True, eq=False)   # arrays: compared by identity
class AdainStats:
    """An adain stage's statistics file: {"mean": [C], "std": [C]} (std > 0), the photo
    statistics every picture is renormalised to, and optionally "content_map": {"weight":
    [2C][2C], "bias": [2C]}, which predicts each picture's target statistics from its own
    content statistics (m, s) instead: z = weight @ [m; ln s] + bias, target mean = z[:C], target
    std = exp(z[C:]), each clipped to mean +- MAP_RANGE * std and std * exp(+-MAP_RANGE) of the
    fixed statistics (a flat or noise picture far from the training data gets no extreme
    target)."""
    mean: np.ndarray                    # float32 (C,)
    std: np.ndarray                     # float32 (C,)
    weight: np.ndarray | None = None    # float64 (2C, 2C)
    bias: np.ndarray | None = None      # float64 (2C,)

    MAP_RANGE = 4.0

    def target(self, content=None) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) to renormalise to: the fixed ones, or with a content map the prediction
        from content = (mean, std) float32 (N, C) -> each (N, C)."""
        if self.weight is None:
            return self.mean, self.std
        if content is None:
            raise ValueError("this statistics file predicts the target from the picture's own "
                             "statistics: content=(mean, std) is required")
        m, s = (np.asarray(v, np.float64) for v in content)
        z = np.concatenate([m, np.log(s)], axis=-1) @ self.weight.T + self.bias
        c = self.mean.size
        lo, hi = self.mean - self.MAP_RANGE * self.std, self.mean + self.MAP_RANGE * self.std
        mean = np.clip(z[..., :c], lo, hi)
        std = self.std * np.exp(np.clip(z[..., c:] - np.log(self.std), -self.MAP_RANGE,
                                        self.MAP_RANGE))
        return mean.astype(np.float32), std.astype(np.float32)


def load_stats(path: Path) -> AdainStats:
    """The AdainStats of an adain statistics file (format: AdainStats)."""
    data = _read_json(path, "statistics file")
    try:
        mean = np.asarray(data["mean"], np.float64)
        std = np.asarray(data["std"], np.float64)
        cmap = data.get("content_map")
        if cmap is not None:
            weight = np.asarray(cmap["weight"], np.float64)
            bias = np.asarray(cmap["bias"], np.float64)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelPackageError(f"{path.name}: not a statistics file "
                                f"{{\"mean\": [...], \"std\": [...]}}: {exc}") from None
    if (mean.ndim != 1 or mean.shape != std.shape or mean.size == 0
            or not np.all(np.isfinite(mean)) or not np.all(np.isfinite(std)) or np.any(std <= 0)):
        raise ModelPackageError(f"{path.name}: mean and std must be equal-length lists of finite "
                                f"numbers, std > 0")
    if cmap is None:
        return AdainStats(mean.astype(np.float32), std.astype(np.float32))
    n = 2 * mean.size
    if (weight.shape != (n, n) or bias.shape != (n,) or not np.all(np.isfinite(weight))
            or not np.all(np.isfinite(bias))):
        raise ModelPackageError(f"{path.name}: content_map needs a finite weight ({n}, {n}) and "
                                f"bias ({n},) for {mean.size} channels, got {weight.shape} and "
                                f"{bias.shape}")
    return AdainStats(mean.astype(np.float32), std.astype(np.float32), weight, bias)


def _check_stage(folder: Path, entry, index: int, checksums: dict) -> Stage:
    where = f"manifest.json stages[{index}]"
    if not isinstance(entry, dict):
        raise ModelPackageError(f"{where} must be an object, got {entry!r}")
    name = _field(entry, "name", str, where)
    kind = _field(entry, "kind", str, where)
    if kind not in STAGE_KINDS:
        raise ModelPackageError(f"{where} ({name}): kind must be one of {STAGE_KINDS}, "
                                f"got {kind!r}")
    params = dict(entry)
    for key in {"onnx": ("file",), "adain": ("stats",), "guided_filter": ()}[kind]:
        rel = _field(entry, key, str, where)
        path = _inside(folder, rel, f"{where} {key}")
        if rel not in checksums:
            raise ModelPackageError(f"manifest.json 'files' has no sha256 for {rel!r}")
        params[key] = path
    if kind == "adain":
        eps = params.setdefault("eps", 1e-5)
        if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0 < eps < math.inf:
            raise ModelPackageError(f"{where} ({name}): eps must be > 0, got {eps!r}")
    if kind == "guided_filter":
        r, eps, detail = entry.get("radius"), entry.get("eps"), entry.get("detail", 1.0)
        if not isinstance(r, int) or isinstance(r, bool) or r < 0:
            raise ModelPackageError(f"{where} ({name}): radius must be an int >= 0, got {r!r}")
        for key, v in (("eps", eps), ("detail", detail)):
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise ModelPackageError(f"{where} ({name}): {key} must be a finite number, "
                                        f"got {v!r}")
        if eps <= 0:
            raise ModelPackageError(f"{where} ({name}): eps must be > 0, got {eps!r}")
        params["detail"] = float(detail)
    return Stage(name, kind, params)


def load_package(folder) -> ModelPackage:
    """Read and check the model package in ``folder`` (every checksum verified)."""
    folder = Path(folder).resolve()
    if not (folder / "manifest.json").is_file():
        raise ModelPackageError(f"{folder} is not a model package: no manifest.json")
    manifest_path = _inside(folder, "manifest.json", "manifest.json")  # no symlink out
    manifest = _read_json(manifest_path, "manifest")
    if not isinstance(manifest, dict):
        raise ModelPackageError(f"{manifest_path}: must hold a JSON object")
    if manifest.get("format") != FORMAT:
        raise ModelPackageError(f"{manifest_path}: format must be {FORMAT!r}, "
                                f"got {manifest.get('format')!r}")
    checksums = _field(manifest, "files", dict)
    for rel, digest in checksums.items():
        path = _inside(folder, rel, "manifest.json files entry")
        if not path.is_file():
            raise ModelPackageError(f"model package file {rel!r} is missing from {folder}")
        actual = sha256_of(path)
        if not isinstance(digest, str) or actual != digest.lower():
            raise ModelPackageError(f"{rel}: sha256 mismatch (manifest {digest!r}, file "
                                    f"{actual}): the file is corrupt or was changed")
    stages = _field(manifest, "stages", list)
    if not stages:
        raise ModelPackageError("manifest.json 'stages' is empty")
    stages = tuple(_check_stage(folder, s, i, checksums) for i, s in enumerate(stages))
    if not any(s.kind == "onnx" for s in stages):
        raise ModelPackageError("manifest.json has no 'onnx' stage: nothing to run")
    # bounds: far beyond any real model (x4 super-resolution, stride 64), small enough that
    # the sizes derived from them stay sane
    scale, stride = _bounded_int(manifest, "scale", 1, 16), _bounded_int(manifest, "stride", 1, 4096)
    receptive_field = _bounded_int(manifest, "receptive_field", 0, 1 << 16, default=0)
    border_margin = _bounded_int(manifest, "border_margin", 0, 1 << 10, default=0)
    if "input_range" in manifest and "normalization" not in manifest:
        mean, std = (0.0,) * 3, (1.0,) * 3   # replaced by the range below
    else:
        norm = _field(manifest, "normalization", dict)
        mean, std = _triple(norm.get("mean"), "mean"), _triple(norm.get("std"), "std")
    if 0.0 in std:
        raise ModelPackageError("manifest.json normalization.std must not contain 0")
    try:
        conv = conventions.from_fields(manifest, mean, std)
    except ValueError as exc:
        raise ModelPackageError(f"manifest.json: {exc}") from None
    return ModelPackage(
        name=_field(manifest, "name", str), version=str(manifest.get("version", "")),
        license=str(manifest.get("license", "unknown")),
        description=str(manifest.get("description", "")), scale=scale, stride=stride,
        receptive_field=receptive_field,
        mean=conv.mean, std=conv.std, stages=_adapted(stages, conv), folder=folder,
        strength=_strength(manifest.get("strength", 1.0)), border_margin=border_margin)


def _strength(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ModelPackageError(f"manifest.json strength must be a number in [0, 1], "
                                f"got {value!r}")
    return float(value)


def _adapted(stages: tuple[Stage, ...], conv: conventions.Conventions) -> tuple[Stage, ...]:
    """The stages with the network adapted to the Engine's pixel convention (conventions.py;
    the layouts a one-network package does not state read from its network)."""
    nets = [s for s in stages if s.kind == "onnx"]
    try:
        if len(nets) == 1:
            conv = conventions.with_layouts(conv, nets[0].params["file"])
        if conv.plain:
            return stages
        if len(nets) != 1:
            raise ValueError("channel_order BGR, output_range and the NHWC layout are "
                             "supported for packages with one onnx stage")
        path = conventions.adapt(nets[0].params["file"], conv)
    except ValueError as exc:
        raise ModelPackageError(str(exc)) from None
    return tuple(Stage(s.name, s.kind, dict(s.params, file=path)) if s is nets[0] else s
                 for s in stages)


def wrap_onnx(path, conv: conventions.Conventions | None = None) -> ModelPackage:
    """A plain ONNX image-to-image file as a one-stage package, at whatever scale the network
    has. conv: its pixel conventions (default: RGB float32 NCHW in [-1, 1], mean = std = 0.5,
    in and out; see conventions.py)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise ModelPackageError(f"model file not found: {path}")
    conv = conv or conventions.Conventions()
    stage = Stage("network", "onnx", {"name": "network", "kind": "onnx", "file": path})
    return ModelPackage(name=path.stem, version="", license="unknown",
                        description=f"plain ONNX model {path.name}", scale=None, stride=1,
                        receptive_field=0, mean=conv.mean, std=conv.std,
                        stages=_adapted((stage,), conv), folder=None)


def resolve(model) -> ModelPackage:
    """None (the bundled default), a package folder, or a plain .onnx file."""
    if model is None:
        return load_package(BUNDLED / DEFAULT_MODEL)
    if isinstance(model, ModelPackage):
        return model
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"model must be None, a package folder or an .onnx path, "
                        f"got {type(model).__name__}")
    path = Path(model)
    if path.is_dir():
        return load_package(path)
    if path.is_file():
        return wrap_onnx(path)
    raise ModelPackageError(f"model not found: {path} is neither a package folder nor a file")
