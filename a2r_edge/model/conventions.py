"""The pixel conventions of a generator: its input range (or mean/std), channel order, layout
and its output range and layout, from a manifest or from CLI flags.

The Engine feeds every network RGB float32 NCHW normalised as ``(v / 255 - mean) / std`` and
reads the result with the same mean and std. A model with another convention is adapted, not
the Engine: a 1x1 Conv in front permutes RGB to BGR, and one after maps the model's output
(its own range and channel order) to the Engine's; both run natively and the after-Conv joins
the last Conv's epilogue where it can. An NHWC network (TensorFlow/Keras through tf2onnx
without ``--inputs-as-nchw``) gets a Transpose at each end; tf2onnx starts and ends such a
graph with the opposite Transposes, and the native plan drops each pair (model/rewrite.py).
The adapted model is written once, named by its content, under the temporary folder.

Plain ONNX default (``wrap_onnx``): RGB in and out, both in [-1, 1] (mean = std = 0.5), the
usual convention of GAN generators exported from PyTorch (CycleGAN, pix2pix, U-GAT-IT,
AnimeGANv2 end in Tanh). Super-resolution networks (ESRGAN, Real-CUGAN) take and give [0, 1]:
``input_range: [0, 1]``.

Manifest fields (all optional)::

    "input_range": [-1, 1] or [0, 1]      (or "normalization": {"mean": [..], "std": [..]})
    "channel_order": "RGB" or "BGR"       (the network's, input and output)
    "output_range": [-1, 1] or [0, 1]     (default: the input's convention)
    "layout": "NCHW" or "NHWC"            (the network's input; default: from its declared
                                           shape, ``declared_layout``)
    "output_layout": "NCHW" or "NHWC"     (default: from the declared output shape, else as
                                           the input)
"""
from __future__ import annotations

import dataclasses
import hashlib
import tempfile
from pathlib import Path

import numpy as np

from ..runtime import files

RANGES = {"-1,1": ((0.5,) * 3, (0.5,) * 3), "0,1": ((0.0,) * 3, (1.0,) * 3)}
ORDERS = ("RGB", "BGR")
LAYOUTS = ("NCHW", "NHWC")


@dataclasses.dataclass(frozen=True)
class Conventions:
    mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    channel_order: str = "RGB"
    out_mean: tuple[float, float, float] | None = None   # None: as the input
    out_std: tuple[float, float, float] | None = None
    layout: str | None = None       # None: not stated (``with_layouts`` reads the model's)
    out_layout: str | None = None   # None: not stated

    @property
    def plain(self) -> bool:
        """The Engine's own convention: nothing to adapt (a layout not stated counts as
        NCHW: ``with_layouts`` first, where the model is at hand)."""
        return self.channel_order == "RGB" and self.out_mean in (None, self.mean) \
            and self.out_std in (None, self.std) and self.layout in (None, "NCHW") \
            and self.out_layout in (None, "NCHW")


def range_of(value, what: str) -> tuple[tuple, tuple]:
    """(mean, std) of a range given as [-1, 1], [0, 1] or the strings "-1,1", "0,1"."""
    key = ",".join(f"{float(v):g}" for v in value) if isinstance(value, (list, tuple)) \
        else str(value).replace(" ", "")
    if key not in RANGES:
        raise ValueError(f"{what} must be [-1, 1] or [0, 1], got {value!r}")
    return RANGES[key]


def from_fields(fields: dict, mean=None, std=None) -> Conventions:
    """The conventions a manifest (or the CLI) states; mean/std: its normalization (None:
    the default [-1, 1], unless fields give an input_range)."""
    if "input_range" in fields:
        mean, std = range_of(fields["input_range"], "input_range")
    mean, std = (0.5,) * 3 if mean is None else mean, (0.5,) * 3 if std is None else std
    order = fields.get("channel_order", "RGB")
    if order not in ORDERS:
        raise ValueError(f"channel_order must be one of {ORDERS}, got {order!r}")
    out_mean = out_std = None
    if fields.get("output_range") is not None:
        out_mean, out_std = range_of(fields["output_range"], "output_range")
    layouts = [fields.get(k) for k in ("layout", "output_layout")]
    for key, value in zip(("layout", "output_layout"), layouts):
        if value is not None and value not in LAYOUTS:
            raise ValueError(f"{key} must be one of {LAYOUTS}, got {value!r}")
    return Conventions(tuple(mean), tuple(std), order, out_mean, out_std, *layouts)


def layout_of(dims) -> str | None:
    """The layout four declared dimensions (ints; None or <= 0: not fixed) say a picture
    tensor has: "NCHW" when the second is 3 (a picture's channels), "NHWC" when the last is
    and the second is not, else None."""
    if len(dims) != 4:
        return None
    if dims[1] == 3:
        return "NCHW"
    return "NHWC" if dims[3] == 3 else None


def declared_layout(value_info) -> str | None:
    """``layout_of`` the shape a graph input or output declares (None: no shape)."""
    tt = value_info.type.tensor_type
    if not tt.HasField("shape"):
        return None
    return layout_of([d.dim_value if d.HasField("dim_value") else None
                      for d in tt.shape.dim])


def with_layouts(conv: Conventions, onnx_path) -> Conventions:
    """``conv`` with the layouts it does not state read from the model's declared input and
    output shapes (``declared_layout``; NCHW when the input does not say, the output as the
    input when it does not). ValueError when a stated layout is not the declared one."""
    try:
        ends = _declared_ends(onnx_path)
    except OSError:
        ends = None
    if ends is None:   # not a model: the loader says so, in its words, later
        return conv
    for what, stated, (found, name, dims) in zip(
            ("layout (--layout)", "output_layout (--output-layout)"),
            (conv.layout, conv.out_layout), ends):
        if stated is not None and found is not None and stated != found:
            raise ValueError(f"{what} {stated} given, but the network declares {name!r} "
                             f"with shape {dims}: {found}")
    layout = conv.layout or ends[0][0] or "NCHW"
    return dataclasses.replace(conv, layout=layout, out_layout=conv.out_layout or ends[1][0]
                               or layout)


@files.per_version(16)
def _declared_ends(path: str) -> tuple | None:
    """((layout or None, name, dims) of the input, the same of the first output) a model file
    declares, read once per file version (an Engine and its package ask again); None when it
    does not load."""
    import onnx
    try:
        g = onnx.load(path, load_external_data=False).graph
    except Exception:  # noqa: BLE001
        return None
    inits = {t.name for t in g.initializer}
    inputs = [vi for vi in g.input if vi.name not in inits]

    def end(vi, known: bool):
        if vi is None:
            return None, None, None
        dims = [d.dim_value or d.dim_param or "?" for d in vi.type.tensor_type.shape.dim]
        return (declared_layout(vi) if known else None), vi.name, dims
    return (end(inputs[0] if inputs else None, len(inputs) == 1),
            end(g.output[0] if g.output else None, True))


def adapt(onnx_path: Path, conv: Conventions) -> Path:
    """``onnx_path`` itself, or the model wrapped to take and give the Engine's convention
    (``conv`` with its layouts stated: ``with_layouts``)."""
    if conv.plain:
        return onnx_path
    import onnx
    from onnx import helper, numpy_helper
    m = onnx.load(str(onnx_path))
    g = m.graph
    inits = {t.name for t in g.initializer}
    if sum(i.name not in inits for i in g.input) != 1 or len(g.output) < 1:
        raise ValueError(f"{onnx_path}: channel order, ranges and layouts are adapted for "
                         f"one-input models only")
    x_info = next(i for i in g.input if i.name not in inits)
    x, y = x_info.name, g.output[0].name
    before, after = [], []   # nodes: Engine NCHW RGB -> x; y -> the Engine's convention

    def step(op, inputs, dst, **attrs):
        return helper.make_node(op, inputs, [dst], name=f"a2r_convention_{dst}", **attrs)

    feed = "a2r_in"
    if conv.channel_order == "BGR":   # Engine RGB -> network BGR
        perm = np.eye(3, dtype=np.float32)[::-1]
        g.initializer.append(numpy_helper.from_array(perm.reshape(3, 3, 1, 1), "a2r_in_w"))
        before.append(step("Conv", [feed, "a2r_in_w"], "a2r_in_bgr"))
        feed = "a2r_in_bgr"
    if conv.layout == "NHWC":
        before.append(step("Transpose", [feed], "a2r_in_nhwc", perm=[0, 2, 3, 1]))
        feed = "a2r_in_nhwc"
        _to_nchw(x_info)
    if before:
        x_info.name = "a2r_in"
        before[-1].output[0] = x
    # network output (its order, out_mean/out_std) -> Engine RGB in mean/std:
    # e = (y * out_std + out_mean - mean) / std, channels permuted
    om = np.array(conv.out_mean or conv.mean, np.float64)
    os_ = np.array(conv.out_std or conv.std, np.float64)
    mean, std = np.array(conv.mean), np.array(conv.std)
    if conv.channel_order == "BGR":   # output channel c (RGB) reads network channel 2 - c
        w = np.array([[os_[j] / std[c] if j == 2 - c else 0.0 for j in range(3)]
                      for c in range(3)])
        b = np.array([(om[2 - c] - mean[c]) / std[c] for c in range(3)])
    else:
        w, b = np.diag(os_ / std), (om - mean) / std
    raw = "a2r_raw"
    if conv.out_layout == "NHWC":
        after.append(step("Transpose", [raw], "a2r_raw_nchw", perm=[0, 3, 1, 2]))
        raw = "a2r_raw_nchw"
        _to_nchw(g.output[0])
    if not (np.allclose(w, np.eye(3)) and np.allclose(b, 0)):
        g.initializer.extend([
            numpy_helper.from_array(w.astype(np.float32).reshape(3, 3, 1, 1), "a2r_out_w"),
            numpy_helper.from_array(b.astype(np.float32), "a2r_out_b")])
        after.append(step("Conv", [raw, "a2r_out_w", "a2r_out_b"], "a2r_out"))
    if after:
        for n in g.node:
            n.output[:] = ["a2r_raw" if o == y else o for o in n.output]
            n.input[:] = ["a2r_raw" if i == y else i for i in n.input]
        after[-1].output[0] = y
    all_nodes = before + list(g.node) + after
    del g.node[:]
    g.node.extend(all_nodes)
    data = m.SerializeToString()
    folder = Path(tempfile.gettempdir()) / "a2r_edge_adapted"
    folder.mkdir(exist_ok=True)
    path = folder / f"{hashlib.sha256(data).hexdigest()[:32]}.onnx"
    if not path.is_file():
        files.write_atomic(path, data)
    return path


def _to_nchw(value_info) -> None:
    """A declared NHWC shape stated as NCHW (the adapted graph's input or output)."""
    dims = value_info.type.tensor_type.shape.dim
    if len(dims) == 4:
        order = [type(d)() for d in dims]
        for dst, src in zip(order, (dims[0], dims[3], dims[1], dims[2])):
            dst.CopyFrom(src)
        del dims[:]
        dims.extend(order)
