"""The pixel conventions of a generator: its input range (or mean/std), channel order, and its
output range, from a manifest or from CLI flags.

The Engine feeds every network RGB float32 NCHW normalised as ``(v / 255 - mean) / std`` and
reads the result with the same mean and std. A model with another convention is adapted, not
the Engine: a 1x1 Conv in front permutes RGB to BGR, and one after maps the model's output
(its own range and channel order) to the Engine's; both run natively and the after-Conv joins
the last Conv's epilogue where it can. The adapted model is written once, named by its content,
under the temporary folder.

Plain ONNX default (``wrap_onnx``): RGB in and out, both in [-1, 1] (mean = std = 0.5), the
usual convention of GAN generators exported from PyTorch (CycleGAN, pix2pix, U-GAT-IT,
AnimeGANv2 end in Tanh). Super-resolution networks (ESRGAN, Real-CUGAN) take and give [0, 1]:
``input_range: [0, 1]``.

Manifest fields (all optional)::

    "input_range": [-1, 1] or [0, 1]      (or "normalization": {"mean": [..], "std": [..]})
    "channel_order": "RGB" or "BGR"       (the network's, input and output)
    "output_range": [-1, 1] or [0, 1]     (default: the input's convention)
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


@dataclasses.dataclass(frozen=True)
class Conventions:
    mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    channel_order: str = "RGB"
    out_mean: tuple[float, float, float] | None = None   # None: as the input
    out_std: tuple[float, float, float] | None = None

    @property
    def plain(self) -> bool:
        """The Engine's own convention: nothing to adapt."""
        return self.channel_order == "RGB" and self.out_mean in (None, self.mean) \
            and self.out_std in (None, self.std)


def range_of(value, what: str) -> tuple[tuple, tuple]:
    """(mean, std) of a range given as [-1, 1], [0, 1] or the strings "-1,1", "0,1"."""
    key = ",".join(f"{float(v):g}" for v in value) if isinstance(value, (list, tuple)) \
        else str(value).replace(" ", "")
    if key not in RANGES:
        raise ValueError(f"{what} must be [-1, 1] or [0, 1], got {value!r}")
    return RANGES[key]


def from_fields(fields: dict, mean, std) -> Conventions:
    """The conventions a manifest (or the CLI) states; mean/std: its normalization."""
    if "input_range" in fields:
        mean, std = range_of(fields["input_range"], "input_range")
    order = fields.get("channel_order", "RGB")
    if order not in ORDERS:
        raise ValueError(f"channel_order must be one of {ORDERS}, got {order!r}")
    out_mean = out_std = None
    if fields.get("output_range") is not None:
        out_mean, out_std = range_of(fields["output_range"], "output_range")
    return Conventions(tuple(mean), tuple(std), order, out_mean, out_std)


def adapt(onnx_path: Path, conv: Conventions) -> Path:
    """``onnx_path`` itself, or the model wrapped to take and give the Engine's convention."""
    if conv.plain:
        return onnx_path
    import onnx
    from onnx import helper, numpy_helper
    m = onnx.load(str(onnx_path))
    g = m.graph
    inits = {t.name for t in g.initializer}
    if sum(i.name not in inits for i in g.input) != 1 or len(g.output) < 1:
        raise ValueError(f"{onnx_path}: channel order and ranges are adapted for one-input "
                         f"models only")
    x = next(i.name for i in g.input if i.name not in inits)
    y = g.output[0].name
    perm = np.eye(3, dtype=np.float32)[::-1] if conv.channel_order == "BGR" else \
        np.eye(3, dtype=np.float32)
    nodes = []
    if conv.channel_order == "BGR":   # Engine RGB -> network BGR
        nodes.append(helper.make_node("Conv", ["a2r_in", "a2r_in_w"], [x],
                                      name="a2r_convention_in"))
        g.initializer.append(numpy_helper.from_array(perm.reshape(3, 3, 1, 1), "a2r_in_w"))
        g.input[[i.name for i in g.input].index(x)].name = "a2r_in"
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
    g.initializer.extend([numpy_helper.from_array(w.astype(np.float32).reshape(3, 3, 1, 1),
                                                  "a2r_out_w"),
                          numpy_helper.from_array(b.astype(np.float32), "a2r_out_b")])
    for n in g.node:
        n.output[:] = ["a2r_raw" if o == y else o for o in n.output]
        n.input[:] = ["a2r_raw" if i == y else i for i in n.input]
    out_node = helper.make_node("Conv", ["a2r_raw", "a2r_out_w", "a2r_out_b"], [y],
                                name="a2r_convention_out")
    all_nodes = nodes + list(g.node) + [out_node]
    del g.node[:]
    g.node.extend(all_nodes)
    data = m.SerializeToString()
    folder = Path(tempfile.gettempdir()) / "a2r_edge_adapted"
    folder.mkdir(exist_ok=True)
    path = folder / f"{hashlib.sha256(data).hexdigest()[:32]}.onnx"
    if not path.is_file():
        files.write_atomic(path, data)
    return path
