"""Random valid ONNX graphs of the executor's supported ops, built with onnx.helper (tests and
benchmarks). Every builder returns an onnx.ModelProto with one float32 NCHW input "x" whose
H and W are symbolic, so one model serves every input size."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class Builder:
    def __init__(self, rng, channels):
        self.rng, self.nodes, self.inits, self.k = rng, [], [], 0
        self.x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, "H", "W"])

    def name(self, prefix):
        self.k += 1
        return f"{prefix}{self.k}"

    def const(self, array):
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(array, np.float32), n))
        return n

    def node(self, op, inputs, **attrs):
        out = self.name("t")
        self.nodes.append(helper.make_node(op, inputs, [out], name=self.name(op.lower()),
                                           **attrs))
        return out

    def conv(self, x, cin, cout, k=3, stride=1, pad=None, groups=1, dilation=1, bias=True,
             pads=None):
        w = self.rng.standard_normal((cout, cin // groups, k, k)) / np.sqrt(cin // groups * k * k)
        ins = [x, self.const(w)] + ([self.const(self.rng.standard_normal(cout) * 0.1)]
                                    if bias else [])
        p = pad if pad is not None else (k // 2) * dilation
        return self.node("Conv", ins, kernel_shape=[k, k], strides=[stride, stride],
                         pads=pads or [p, p, p, p], group=groups, dilations=[dilation, dilation])

    def decomposed_norm(self, x, axes, eps=1e-5, count=None):
        """(x - mean) / sqrt(var + eps) over ``axes`` as torch.onnx.export writes it: ReduceMean,
        Sub, Pow, ReduceMean, Add, Sqrt, Div; count: the number of values normalised together,
        for torch.var's unbiased n / (n - 1) (as a Mul and a Div by constants)."""
        mean = self.node("ReduceMean", [x], axes=axes, keepdims=1)
        d = self.node("Sub", [x, mean])
        var = self.node("ReduceMean", [self.node("Pow", [d, self.const(2.0)])], axes=axes,
                        keepdims=1)
        if count is not None:
            var = self.node("Div", [self.node("Mul", [var, self.const(float(count))]),
                                    self.const(float(count - 1))])
        return self.node("Div", [d, self.node("Sqrt", [self.node("Add", [var,
                                                                         self.const(eps)])])])

    def model(self, y, opset=OPSET):
        out = helper.make_tensor_value_info(y, TensorProto.FLOAT, ["n", "c", "oh", "ow"])
        g = helper.make_graph(self.nodes, "g", [self.x], [out], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def random_graph(seed: int) -> tuple[onnx.ModelProto, int]:
    """A random chain with side branches; returns (model, spatial multiple the input must be)."""
    rng = np.random.default_rng(seed)
    c = int(rng.choice([3, 4, 8]))
    b = Builder(rng, c)
    x = b.x.name
    for _ in range(int(rng.integers(5, 10))):
        kind = rng.choice(["conv", "conv_act", "residual", "norm", "d2s", "resize", "concat",
                           "act", "silu", "affine", "conv_asym"])
        if kind in ("conv", "conv_act"):
            groups = int(rng.choice([1, c])) if c in (4, 8) else 1
            cout = int(rng.choice([4, 8, 12])) * (groups if groups > 1 else 1) // max(groups, 1)
            cout = cout if cout % groups == 0 else groups * 2
            k = int(rng.choice([1, 3, 5]))
            x = b.conv(x, c, cout, k=k, stride=1, groups=groups,
                       dilation=int(rng.choice([1, 2])) if k == 3 else 1,
                       bias=bool(rng.integers(2)))
            c = cout
            if kind == "conv_act":
                act = rng.choice(["Relu", "LeakyRelu", "silu"])
                if act == "silu":
                    x = b.node("Mul", [x, b.node("Sigmoid", [x])])
                else:
                    x = b.node(str(act), [x], **({"alpha": 0.2} if act == "LeakyRelu" else {}))
        elif kind == "conv_asym":
            x = b.conv(x, c, c, k=2, pads=[0, 0, 1, 1])
        elif kind == "residual":
            y = b.node("Relu", [b.conv(x, c, c)])
            x = b.node("Add", [b.conv(y, c, c), x])
        elif kind == "norm":
            x = b.node("InstanceNormalization",
                       [x, b.const(rng.uniform(0.5, 2, c)), b.const(rng.standard_normal(c))],
                       epsilon=1e-5)
            if rng.integers(2):
                x = b.node("Mul", [b.node("Sigmoid", [x]), x])
        elif kind == "d2s":
            x = b.conv(x, c, 4 * c, k=1)
            x = b.node("DepthToSpace", [x], blocksize=2, mode=str(rng.choice(["CRD", "DCR"])))
            x = b.conv(x, c, c, k=3, stride=2)   # back down so graphs stay small
        elif kind == "resize":
            mode = str(rng.choice(["nearest", "linear"]))
            coord = str(rng.choice(["half_pixel", "asymmetric", "align_corners",
                                    "pytorch_half_pixel"]))
            attrs = dict(mode=mode, coordinate_transformation_mode=coord)
            if mode == "nearest":
                attrs["nearest_mode"] = str(rng.choice(["round_prefer_floor", "floor"]))
            if rng.integers(2):
                # align_corners by a scale that leaves in * scale fractional is refused
                s = float(rng.choice([2.0] if coord == "align_corners" else [0.5, 1.5, 2.0]))
                x = b.node("Resize", [x, "", b.const([1, 1, s, s])], **attrs)
            else:   # sizes: fixed output, independent of the input size. Not nearest+asymmetric:
                # exact .5 ties there round differently in onnxruntime (see the executor notes)
                if mode == "nearest" and coord == "asymmetric":
                    attrs["coordinate_transformation_mode"] = "half_pixel"
                sizes = numpy_helper.from_array(np.array([1, c, 11, 14], np.int64), b.name("sz"))
                b.inits.append(sizes)
                x = b.node("Resize", [x, "", "", sizes.name], **attrs)
        elif kind == "concat":
            y = b.conv(x, c, 4)
            z = b.node("Tanh", [x])
            x = b.node("Concat", [y, z], axis=1)
            c += 4
        elif kind == "act":
            op = str(rng.choice(["Relu", "Sigmoid", "Tanh", "Clip", "LeakyRelu"]))
            ins = [x] + ([b.const(-0.5), b.const(0.7)] if op == "Clip" else [])
            x = b.node(op, ins)
        elif kind == "silu":
            x = b.node("Mul", [x, b.node("Sigmoid", [x])])
        elif kind == "affine":
            x = b.node("Add", [b.node("Mul", [x, b.const(rng.uniform(0.5, 1.5, (c, 1, 1)))]),
                               b.const(rng.standard_normal((1, c, 1, 1)))])
    return b.model(x)


def small_image_net(seed=0, c1=32, c2=64, blocks=4, opset=OPSET) -> onnx.ModelProto:
    """Encoder 3->c1 (3x3), c1->c2 (3x3 stride 2), ``blocks`` residual blocks
    (conv-IN-relu-conv-IN + skip), PixelShuffle decoder (c2 -> 4*c1 -> DepthToSpace CRD 2 ->
    3x3 to 3 channels), tanh; the shape of a small toon->photo model."""
    rng = np.random.default_rng(seed)
    b = Builder(rng, 3)

    def norm(x, c):
        return b.node("InstanceNormalization", [x, b.const(rng.uniform(0.5, 1.5, c)),
                                                b.const(rng.standard_normal(c) * 0.1)])
    x = b.node("Relu", [b.conv("x", 3, c1)])
    x = b.node("Relu", [norm(b.conv(x, c1, c2, stride=2, pad=1), c2)])
    for _ in range(blocks):
        y = b.node("Relu", [norm(b.conv(x, c2, c2), c2)])
        x = b.node("Add", [norm(b.conv(y, c2, c2), c2), x])
    x = b.conv(x, c2, 4 * c1, k=3)
    x = b.node("DepthToSpace", [x], blocksize=2, mode="CRD")
    x = b.node("Mul", [x, b.node("Sigmoid", [x])])
    x = b.node("Tanh", [b.conv(x, c1, 3)])
    return b.model(x, opset)
