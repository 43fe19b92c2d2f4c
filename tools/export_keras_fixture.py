"""Export a small Keras generator through tf2onnx, as a Keras user exports theirs, as a test
fixture (needs tensorflow and tf2onnx; the tests do not): tests/fixtures/generators/keras_se.onnx.

The network (NHWC, seeded random weights) holds what Keras graphs bring through tf2onnx: a
tanh-GELU (tf.nn.gelu(approximate=True): Pow, Mul, Add, Tanh, Mul nodes), an SE block
(GlobalAveragePooling2D, two Dense as MatMul, a sigmoid multiply on the NHWC map, the
Transposes tf2onnx leaves around it), ReLU6 (Clip), a depthwise conv, a "same" Conv2DTranspose
(its crop computed from the input's shape) and a tanh output; the input and output stay NHWC
(no --inputs-as-nchw), as the default export leaves them.

Usage (from the repository root):  python tools/export_keras_fixture.py [--out PATH]
The file is checked with onnx.checker and against the Keras output with onnxruntime.
"""
from __future__ import annotations

import argparse

import numpy as np

OUT = "tests/fixtures/generators/keras_se.onnx"


def build():
    import tensorflow as tf
    layers = tf.keras.layers
    tf.keras.utils.set_random_seed(0)

    def gelu(t):
        return tf.nn.gelu(t, approximate=True)

    inp = layers.Input((None, None, 3))
    x = layers.Activation(gelu)(layers.Conv2D(32, 3, padding="same")(inp))
    s = layers.GlobalAveragePooling2D(keepdims=True)(x)
    s = layers.Dense(32, activation="sigmoid")(layers.Dense(8, activation="relu")(s))
    x = layers.Multiply()([x, s])
    x = layers.Conv2D(48, 3, strides=2, padding="same", activation=tf.nn.relu6)(x)
    x = layers.DepthwiseConv2D(3, padding="same")(x)
    x = layers.Activation(gelu)(layers.Conv2DTranspose(32, 4, strides=2, padding="same")(x))
    return tf.keras.Model(inp, layers.Conv2D(3, 3, padding="same", activation="tanh")(x))


def main() -> None:
    import onnx
    import onnxruntime as ort
    import tensorflow as tf
    import tf2onnx
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    model = build()
    spec = [tf.TensorSpec((1, None, None, 3), tf.float32, name="input")]
    tf2onnx.convert.from_keras(model, input_signature=spec, opset=17, output_path=args.out)
    onnx.checker.check_model(onnx.load(args.out))
    x = np.random.default_rng(0).uniform(-1, 1, (1, 37, 30, 3)).astype(np.float32)
    got = ort.InferenceSession(args.out, providers=["CPUExecutionProvider"]).run(
        None, {"input": x})[0]
    err = float(np.abs(got - model(x).numpy()).max())
    assert err < 1e-4, err
    print(f"{args.out}: matches Keras to {err:.2g}")


if __name__ == "__main__":
    main()
