"""Native executor (a2r_edge.model) against onnxruntime on random graphs of the supported ops,
a small toon->photo image network, errors, fusion and the zero-allocation steady state."""
import tracemalloc

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from a2r_edge.model import ops, reference
from a2r_edge.runtime.ort import OrtSession
from a2r_edge.model import ModelLoadError, NativeExecutor, UnsupportedOpError
from onnx_graphs import Builder, random_graph, small_image_net
from tolerances import FILTER

PARITY = FILTER   # rtol 1e-4, atol 1e-4: convolution sums, as the issue asks


def channels(m):
    return m.graph.input[0].type.tensor_type.shape.dim[1].dim_value


def ort_run(m, x):
    return OrtSession(m.SerializeToString(), threads=1).run({"x": x})[0]


def like_onnxruntime(m, rng, sizes):
    """The native executor of m and its plan for the last of sizes ((C, H, W) each), after its
    output matched onnxruntime's at every size."""
    ex = NativeExecutor(m)
    for size in sizes:
        x = rng.standard_normal((1,) + size).astype(np.float32)
        np.testing.assert_allclose(ex.run(x), ort_run(m, x), **PARITY)
    return ex, ex.plan_for({"x": x.shape})


@pytest.mark.parametrize("seed", range(24))
def test_random_graphs_match_onnxruntime(seed, threads):
    m = random_graph(seed)
    ex = NativeExecutor(m)
    rng = np.random.default_rng(seed)
    for hw in [(16, 16), (17, 23), (9, 31)]:
        x = rng.standard_normal((1, channels(m)) + hw).astype(np.float32)
        np.testing.assert_allclose(ex.run(x), ort_run(m, x), **PARITY,
                                   err_msg=f"seed {seed} size {hw}\n{ex.describe()}")


def test_small_image_net_matches_onnxruntime_and_fuses(threads):
    m = small_image_net(c1=16, c2=32, blocks=2)
    ex = NativeExecutor(m)
    x = np.random.default_rng(0).standard_normal((1, 3, 37, 50)).astype(np.float32)
    np.testing.assert_allclose(ex.run(x), ort_run(m, x), **PARITY)
    p = ex.plan_for({"x": x.shape})
    assert p.fusions["instance_norm_to_adain"] == 2 * 2 + 1
    assert p.fusions["silu"] == 1 and p.fusions["conv_activation"] >= 1
    assert p.fusions["norm_activation"] == 2 + 1   # each block's first norm and the encoder's
    assert [n.op for n in p.nodes].count("Relu") == 0
    assert [n.op for n in p.nodes].count("Sigmoid") == 0
    assert p.arena_floats < p.naive_floats   # buffers are reused
    assert "arena" in ex.describe() and "SiLU" in ex.describe()


def test_conv_epilogue_fusions():
    """Conv + per-channel Mul/Add constants + residual Add + activation -> one Conv node."""
    rng = np.random.default_rng(3)
    b = Builder(rng, 4)
    skip = b.conv("x", 4, 4)
    y = b.conv(skip, 4, 4)
    y = b.node("Mul", [y, b.const(rng.uniform(0.5, 2, (4, 1, 1)))])
    y = b.node("Add", [y, b.const(rng.standard_normal((1, 4, 1, 1)))])
    y = b.node("Add", [skip, y])
    y = b.node("Mul", [y, b.node("Sigmoid", [y])])
    y = b.node("LeakyRelu", [b.conv(y, 4, 4)], alpha=0.1)
    m = b.model(y)
    ex = NativeExecutor(m)
    x = rng.standard_normal((1, 4, 13, 17)).astype(np.float32)
    np.testing.assert_allclose(ex.run(x), ort_run(m, x), **PARITY)
    p = ex.plan_for({"x": x.shape})
    assert [n.op for n in p.nodes] == ["Conv", "Conv", "Conv"]
    assert p.fusions["conv_scale"] == 1 and p.fusions["conv_bias"] == 1
    assert p.fusions["conv_residual"] == 1 and p.fusions["conv_activation"] == 2


def test_norm_residual_fusions(threads):
    """InstanceNorm + Add of a same-shape tensor (+ an activation after it) -> one AdaIN node
    with the residual added in its apply pass: a ResNet block's tail, its own input as the
    residual, and a broadcast Add that must stay a node of its own."""
    rng = np.random.default_rng(4)
    b = Builder(rng, 4)

    def inorm(t):
        return b.node("InstanceNormalization", [t, b.const(rng.uniform(0.5, 2, 4)),
                                                b.const(rng.standard_normal(4))])
    skip = b.node("Relu", [b.conv("x", 4, 4)])
    y = b.node("Relu", [b.node("Add", [skip, inorm(b.conv(skip, 4, 4))])])   # residual first
    y = b.node("Add", [inorm(y), y])                   # the norm's own input as the residual
    row = b.node("ReduceMean", [y], axes=[2], keepdims=1)   # (1, 4, 1, W): broadcast, kept
    y = b.node("Add", [inorm(y), row])
    ex, p = like_onnxruntime(b.model(y), rng, [(4, 13, 17), (4, 40, 33)])
    assert p.fusions["norm_residual"] == 2 and p.fusions["instance_norm_to_adain"] == 3
    assert [n.op for n in p.nodes].count("Add") == 1
    assert ex.describe().count("+residual(") == 2


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_activation_after_depth_to_space_joins_the_conv(threads, mode):
    """Conv -> DepthToSpace -> LeakyRelu runs as Conv(+LeakyRelu) -> DepthToSpace; a shuffle
    whose output has a second reader keeps its activation where it is."""
    rng = np.random.default_rng(4)
    b = Builder(rng, 4)
    y = b.node("LeakyRelu", [b.node("DepthToSpace", [b.conv("x", 4, 12)], blocksize=2,
                                    mode=mode)], alpha=0.2)
    t = b.node("DepthToSpace", [b.conv(y, 3, 12)], blocksize=2, mode=mode)
    y = b.node("Add", [b.node("Relu", [t]), t])
    m = b.model(y)
    ex = NativeExecutor(m)
    x = rng.standard_normal((1, 4, 11, 9)).astype(np.float32)
    np.testing.assert_allclose(ex.run(x), ort_run(m, x), **PARITY)
    p = ex.plan_for({"x": x.shape})
    assert p.fusions["activation_before_shuffle"] == 1
    assert [n.op for n in p.nodes] == ["Conv", "DepthToSpace", "Conv", "DepthToSpace", "Relu",
                                       "Add"]
    assert p.nodes[0].attrs["activation"] == "leaky_relu"


def test_add_of_a_crop_is_one_pass(threads):
    """Pad of negative pads on H and W (a crop, as Real-CUGAN's skips) read only by an Add of
    a tensor of its shape: one crop_add step, on either input; a crop with a second reader, a
    crop of channels, a Pad that pads and a crop that is a Conv's residual stay as they are."""
    rng = np.random.default_rng(6)
    b = Builder(rng, 4)

    def pad(t, pads, mode="constant"):   # pads: N, C, H, W begins, then ends
        name = b.name("pads")
        b.inits.append(numpy_helper.from_array(np.array(pads, np.int64), name))
        return b.node("Pad", [t, name], mode=mode)
    a = b.conv("x", 4, 5, pad=0)                        # (H-2, W-2)
    c = b.node("Relu", [b.conv("x", 4, 5, k=5, pad=0)])  # (H-4, W-4)
    y = b.node("Add", [c, pad(a, [0, 0, -1, -2, 0, 0, -1, 0], "reflect")])   # crop as input 1
    crop_y = pad(y, [0, 0, -1, -1, 0, 0, -1, -1])       # (H-6, W-6), read twice: kept
    d = b.node("Relu", [b.conv(y, 5, 5, pad=0)])
    y = b.node("Add", [b.node("Add", [crop_y, d]), crop_y])
    y = b.node("Add", [pad(y, [0, 0, 0, -1, 0, 0, -1, 0]),   # crops on both: input 0 fused,
                       pad(d, [0, 0, -1, 0, 0, 0, 0, -1])])   # input 1 copied; (H-7, W-7)
    e = b.conv(y, 5, 5, pad=0)                          # (H-9, W-9)
    y = b.node("Add", [e, pad(y, [0, 0, -1, -1, 0, 0, -1, -1])])   # the Conv's residual
    y = b.node("Add", [pad(y, [0, -1, 0, 0, 0, 0, 0, 0]),           # a crop of channels
                       b.node("Relu", [pad(y, [0, 0, 0, 0, 0, -1, 0, 0])])])
    y = b.node("Add", [pad(y, [0, 0, 1, 0, 0, 0, 0, -1]), b.const(np.float32(0.5))])  # pads
    ex, p = like_onnxruntime(b.model(y), rng, [(4, 17, 23), (4, 12, 12)])
    assert p.fusions["add_of_crop"] == 2 and p.fusions["conv_residual"] == 1
    # read twice, the second crop of an Add, the residual, two of channels, the padding one
    assert [n.op for n in p.nodes].count("Pad") == 6
    crops = [(n.attrs["crop"], p.shapes[n.inputs[0]]) for n in p.nodes if "crop" in n.attrs]
    assert crops == [(((1, 9), (2, 10)), (1, 5, 10, 10)),   # at 12x12: a is 10x10
                     (((0, 5), (1, 6)), (1, 5, 6, 6))]
    first = [n for n in p.nodes if "crop" in n.attrs][0]   # its reference crops as its build
    u, v = (rng.standard_normal(p.shapes[t]).astype(np.float32) for t in first.inputs)
    np.testing.assert_array_equal(ops.spec("Add").reference(first, [u, v])[0],
                                  u[:, :, 1:9, 2:10] + v)


@pytest.mark.parametrize("act", ["Relu", "LeakyRelu"])
def test_instance_norm_activation_fused(threads, act):
    """InstanceNormalization + Relu/LeakyRelu -> one AdaIN node with the activation in its
    epilogue; same result as onnxruntime."""
    rng = np.random.default_rng(5)
    b = Builder(rng, 6)
    y = b.conv("x", 6, 8)
    y = b.node("InstanceNormalization", [y, b.const(rng.uniform(0.5, 1.5, 8)),
                                         b.const(rng.standard_normal(8) * 0.3)])
    y = b.node(act, [y], **({"alpha": 0.15} if act == "LeakyRelu" else {}))
    y = b.node("Add", [b.conv(y, 8, 8), y])        # y is read twice: the fused output is kept
    m = b.model(y)
    ex = NativeExecutor(m)
    x = rng.standard_normal((1, 6, 33, 29)).astype(np.float32)
    got = ex.run(x)
    np.testing.assert_allclose(got, ort_run(m, x), **PARITY)
    p = ex.plan_for({"x": x.shape})
    assert p.fusions["norm_activation"] == 1
    assert [n.op for n in p.nodes] == ["Conv", "AdaIN", "Conv"]
    kind = {"Relu": "relu", "LeakyRelu": "leaky_relu"}[act]
    assert p.nodes[1].attrs["activation"] == kind
    assert f"+{kind}" in ex.describe()
    if act == "LeakyRelu":
        assert p.nodes[1].attrs["alpha"] == pytest.approx(0.15)


def test_conv_transpose_activation_fused_in_the_stacked_form():
    """ConvTranspose k4 s2 + LeakyRelu and k2 s2 + Relu become one node (the activation in the
    stacked convolution's epilogue); k3 s2 (per-phase form) + Relu stays two. Values as
    onnxruntime's."""
    rng = np.random.default_rng(6)
    b = Builder(rng, 4)

    def convt(x, cin, cout, k, p):
        w = b.const(rng.standard_normal((cin, cout, k, k)) / np.sqrt(cin * k))
        return b.node("ConvTranspose", [x, w, b.const(rng.standard_normal(cout))],
                      kernel_shape=[k, k], strides=[2, 2], pads=[p] * 4)
    y = b.node("LeakyRelu", [convt("x", 4, 6, 4, 1)], alpha=0.2)
    y = b.node("Relu", [convt(y, 6, 5, 2, 0)])
    y = b.node("Relu", [convt(y, 5, 3, 3, 1)])
    m = b.model(y)
    ex = NativeExecutor(m, strict=True)
    x = rng.standard_normal((1, 4, 7, 10)).astype(np.float32)
    np.testing.assert_allclose(ex.run(x), ort_run(m, x), **PARITY)
    p = ex.plan_for({"x": x.shape})
    assert [nd.op for nd in p.nodes] == ["ConvTranspose", "ConvTranspose", "ConvTranspose",
                                         "Relu"]
    assert [nd.attrs.get("activation") for nd in p.nodes[:2]] == ["leaky_relu", "relu"]
    assert p.nodes[0].attrs["alpha"] == pytest.approx(0.2)


def test_concat_producers_write_into_slices():
    rng = np.random.default_rng(4)
    b = Builder(rng, 3)
    y = b.node("Concat", [b.conv("x", 3, 5), b.node("Relu", [b.conv("x", 3, 2)]), "x"], axis=1)
    m = b.model(b.conv(y, 10, 3))
    ex = NativeExecutor(m)
    x = rng.standard_normal((1, 3, 11, 12)).astype(np.float32)
    np.testing.assert_allclose(ex.run(x), ort_run(m, x), **PARITY)
    assert ex.plan_for({"x": x.shape}).aliased == 2   # the two convs; "x" is copied


def test_dense_block_concats_are_views_of_the_last():
    """A dense block (RRDB / ESRGAN): each concat's inputs begin the next one's, so every x_i is
    written once, into its slice of the last concat, and the earlier concats are that one's
    first channels: no Concat step is left, and the result is onnxruntime's. A tensor read by
    other nodes too (x0: every conv and the residual Add) is read from its slice."""
    rng = np.random.default_rng(5)
    b = Builder(rng, 3)
    xs = [b.conv("x", 3, 4)]
    for i in range(3):
        cat = b.node("Concat", list(xs), axis=1) if i else xs[0]
        xs.append(b.node("LeakyRelu", [b.conv(cat, 4 + 3 * i, 3)], alpha=0.2))
    last = b.conv(b.node("Concat", list(xs), axis=1), 13, 4)
    m = b.model(b.node("Add", [last, xs[0]]))
    ex = NativeExecutor(m)
    x = rng.standard_normal((1, 3, 13, 11)).astype(np.float32)
    np.testing.assert_allclose(ex.run(x), ort_run(m, x), **PARITY)
    p = ex.plan_for({"x": x.shape})
    assert "Concat" not in [nd.op for nd in p.step_nodes]
    assert p.aliased == 4 + 3 + 2   # each concat's inputs, all in place


def test_reshapes_run_on_their_input_s_memory():
    """Reshape/Flatten/Unsqueeze/Squeeze get their input's memory and no step, while what
    reads the input afterwards (an in-place Relu, a Concat) still sees the values it had."""
    rng = np.random.default_rng(5)
    b = Builder(rng, 3)

    def ints(values):
        name = b.name("i")
        b.inits.append(helper.make_tensor(name, TensorProto.INT64, [len(values)], values))
        return name
    a = b.conv("x", 3, 4)
    flat = b.node("Flatten", [a], axis=1)                 # a stays needed below
    relu = b.node("Relu", [a])                            # may not overwrite a while flat lives
    back = b.node("Reshape", [flat, ints([1, 4, -1, 1])])
    sq = b.node("Squeeze", [b.node("Unsqueeze", [relu, ints([0])]), ints([0])])
    cat = b.node("Concat", [b.node("Reshape", [back, ints([1, 4, 9, 10])]), sq], axis=1)
    m = b.model(b.conv(cat, 8, 3))
    ex = NativeExecutor(m, strict=True)
    x = rng.standard_normal((1, 3, 9, 10)).astype(np.float32)
    np.testing.assert_allclose(ex.run(x), ort_run(m, x), **PARITY)
    p = ex.plan_for({"x": x.shape})
    assert p.views >= 3, p.describe()
    ran = {nd.op for nd in p.step_nodes}
    assert "Flatten" not in ran and "Unsqueeze" not in ran


def test_adain_stage_matches_reference():
    rng = np.random.default_rng(5)
    b = Builder(rng, 6)
    sm, ss = rng.standard_normal(6), rng.uniform(0.5, 2, 6)
    b.nodes.append(helper.make_node("AdaIN", ["x", b.const(sm), b.const(ss)], ["y"],
                                    name="stylize", domain="com.a2r_edge", epsilon=1e-5))
    g = helper.make_graph(b.nodes, "g", [b.x], [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, [1, 6, "H", "W"])], b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.a2r_edge", 1)])
    x = (rng.standard_normal((1, 6, 19, 21)) * 3 + 5).astype(np.float32)
    np.testing.assert_allclose(NativeExecutor(m).run(x), reference.adain(x, sm, ss, 1e-5),
                               rtol=1e-4, atol=1e-4)


def test_second_input_size_gets_its_own_plan():
    m = random_graph(7)
    ex = NativeExecutor(m)
    rng = np.random.default_rng(7)
    xa = rng.standard_normal((1, channels(m), 20, 24)).astype(np.float32)
    xb = rng.standard_normal((1, channels(m), 33, 15)).astype(np.float32)
    ya = ex.run(xa).copy()
    yb = ex.run(xb).copy()
    np.testing.assert_allclose(ex.run(xa), ya, rtol=0, atol=0)   # deterministic, plan reused
    np.testing.assert_allclose(yb, ort_run(m, xb), **PARITY)
    assert len(ex._plans) == 2


def test_executors_sharing_an_arena_hold_one_buffer():
    # Two executors that take turns (an Engine's stages) share one arena as large as the
    # largest plan; their results equal private-arena executors' at every turn and size.
    from a2r_edge.model.arena import SharedArena
    ma, mb = random_graph(5), small_image_net(c1=8, c2=16, blocks=1)
    memory = SharedArena()
    shared = [NativeExecutor(ma, memory), NativeExecutor(mb, memory)]
    private = [NativeExecutor(ma), NativeExecutor(mb)]
    rng = np.random.default_rng(3)
    for side in (24, 40, 24, 56):
        for sh, pr, m in zip(shared, private, (ma, mb)):
            x = rng.standard_normal((1, channels(m), side, side + 3)).astype(np.float32)
            np.testing.assert_array_equal(sh.run(x), pr.run(x))
    assert memory.nbytes == max(ex.arena_bytes() for ex in private) > 0
    assert [ex.arena_bytes() for ex in shared] == [ex.arena_bytes() for ex in private]


def test_shared_arena_growth_frees_the_old_buffer():
    import weakref

    from a2r_edge.model.arena import SharedArena
    m = random_graph(6)
    memory = SharedArena()
    ex = NativeExecutor(m, memory)
    x = np.ones((1, channels(m), 16, 16), np.float32)
    ex.run(x)
    old = weakref.ref(memory._buf)
    big = np.ones((1, channels(m), 48, 48), np.float32)
    y = ex.run(big).copy()  # a larger plan: the arena grows
    assert old() is None, "a dropped plan still holds the old arena"
    np.testing.assert_array_equal(y, NativeExecutor(m).run(big))
    np.testing.assert_array_equal(ex.run(x), NativeExecutor(m).run(x))  # re-planned on use


def _allocations(ex, x):
    """(new numpy-domain traces left by one run, transient traced peak in bytes)."""
    tracemalloc.start()
    s0 = tracemalloc.take_snapshot()
    cur0, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    ex.run(x)
    _, peak = tracemalloc.get_traced_memory()
    s1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    only = [tracemalloc.DomainFilter(True, np.lib.tracemalloc_domain)]
    diff = s1.filter_traces(only).compare_to(s0.filter_traces(only), "lineno")
    return sum(max(d.count_diff, 0) for d in diff), peak - cur0


@pytest.mark.parametrize("seed", [5, 6, 7])   # graphs without fixed-size (tiny) Resize outputs
def test_zero_allocations_after_first_run(seed):
    # Sizes chosen so every tensor is > 100 KiB: a numpy temporary freed within the run would
    # push the traced peak past PY_CHURN (Python objects only: views, tuples, frames).
    PY_CHURN = 64 << 10
    for m in (random_graph(seed), small_image_net(c1=8, c2=16, blocks=1)):
        ex = NativeExecutor(m)
        x = np.ones((1, channels(m), 97, 101), np.float32)
        ex.run(x)
        traces, peak = _allocations(ex, x)
        assert traces == 0
        assert peak < PY_CHURN, f"a run allocated a temporary ({peak} bytes traced at peak)"
        p = ex.plan_for({"x": x.shape})   # run-time tensors: not the constants rewrites made
        smallest = min(int(np.prod(s)) * 4 for t, s in p.shapes.items()
                       if t not in p.specialised.graph.consts)
        assert smallest > PY_CHURN   # the peak bound above can see any tensor temporary


def test_unsupported_op_names_op_and_node():
    b = Builder(np.random.default_rng(0), 3)
    y = b.conv("x", 3, 4)
    b.nodes.append(helper.make_node("GridSample", [y, y], ["z"], name="my_warp"))
    m = b.model("z")
    with pytest.raises(UnsupportedOpError, match=r"GridSample.*'my_warp'"):
        NativeExecutor(m, strict=True)
    b2 = Builder(np.random.default_rng(0), 3)
    b2.nodes.append(helper.make_node("Warp", ["x"], ["z"], name="warper", domain="my.ops"))
    g = helper.make_graph(b2.nodes, "g", [b2.x], [helper.make_tensor_value_info(
        "z", TensorProto.FLOAT, [1, 3, "H", "W"])])
    m2 = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid("my.ops", 1)])
    with pytest.raises(UnsupportedOpError, match=r"my\.ops::Warp.*'warper'") as info:
        NativeExecutor(m2, strict=True)
    assert isinstance(info.value, ValueError) and info.value.node_name == "warper"


def test_unsupported_resize_mode_is_named_or_run_by_onnxruntime():
    b = Builder(np.random.default_rng(0), 3)
    m = b.model(b.node("Resize", ["x", "", b.const([1, 1, 0.5, 0.5])], mode="linear",
                       coordinate_transformation_mode="align_corners"))
    x = np.random.default_rng(1).standard_normal((1, 3, 9, 9)).astype(np.float32)
    NativeExecutor(m, strict=True).run(x[:, :, :8, :8].copy())   # 8 * 0.5: a whole size
    with pytest.raises(UnsupportedOpError, match="align_corners.*fractional"):
        NativeExecutor(m, strict=True).run(x)   # 9 * 0.5: onnxruntime and ONNX disagree
    ex = NativeExecutor(m)
    with pytest.warns(RuntimeWarning, match="1 of 1 nodes run on onnxruntime"):
        y = ex.run(x)
    np.testing.assert_allclose(y, ort_run(m, x), rtol=1e-5, atol=1e-5)
    assert "align_corners" in ex.describe()


def test_corrupt_and_truncated_models(tmp_path):
    data = small_image_net(c1=8, c2=16, blocks=1).SerializeToString()
    for bad in (data[: len(data) // 2], b"\x00garbage\xff" * 10):
        with pytest.raises(ModelLoadError, match="ONNX"):
            NativeExecutor(bad)
    path = tmp_path / "m.onnx"
    path.write_bytes(data[:100])
    with pytest.raises(ModelLoadError):
        NativeExecutor(str(path))
    with pytest.raises(FileNotFoundError, match="no such file"):
        NativeExecutor(str(tmp_path / "missing.onnx"))
    with pytest.raises(ModelLoadError, match="a folder, not a model file"):   # "not found" before
        NativeExecutor(str(tmp_path))
    with pytest.raises(TypeError):
        NativeExecutor(42)


def test_bad_inputs():
    ex = NativeExecutor(small_image_net(c1=8, c2=16, blocks=1))
    with pytest.raises(TypeError, match="float32"):
        ex.run(np.zeros((1, 3, 8, 8), np.float64))
    with pytest.raises(ValueError, match="shape"):
        ex.run(np.zeros((1, 4, 8, 8), np.float32))
    with pytest.raises(ValueError, match="missing"):
        ex.run_many({})


def test_native_steps_by_address_keep_their_buffers():
    """Steps calling a native ``*_at`` entry point pass buffer addresses: every address they
    pass lies in an array the step itself keeps alive (``keeps``), so no buffer a plan
    computes once (style statistics, group statistics, scales) can be freed under it."""
    import functools
    import os
    import warnings
    fixtures = os.path.join(os.path.dirname(__file__), "fixtures", "generators")
    checked = 0
    for name in ("ugatit_light", "animeganv2", "cyclegan_resnet"):
        ex = NativeExecutor(os.path.join(fixtures, name + ".onnx"))
        x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 32, 40)).astype(np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ex.run(x)
        steps = ex.plan_for({ex.input_names[0]: x.shape}).steps
        for step in steps:
            calls = [step] + [c.cell_contents for c in (getattr(step, "__closure__", None) or ())
                              if isinstance(c.cell_contents, functools.partial)]
            for call in calls:
                if not (isinstance(call, functools.partial)
                        and call.func.__name__.endswith("_at")):
                    continue
                spans = [(a.ctypes.data, a.ctypes.data + a.nbytes) for a in call.keeps]
                for v in call.args:
                    if isinstance(v, int) and v > 1 << 16:
                        assert any(lo <= v < hi for lo, hi in spans), (name, call.func)
                checked += 1
    assert checked > 20


def _fp16_conv_model(op, cast_weights=False):
    """x -> op (3x3 kernels, weights and bias stored as float16) -> Relu -> y, x and y float16;
    cast_weights: x and y float32, the weights Cast to float32 before the op."""
    rng = np.random.default_rng(0)
    io = TensorProto.FLOAT if cast_weights else TensorProto.FLOAT16
    w = numpy_helper.from_array((rng.standard_normal((3, 3, 3, 3)) * 0.2).astype(np.float16),
                                "w")
    b = numpy_helper.from_array(rng.standard_normal(3).astype(np.float16), "b")
    nodes = [helper.make_node(op, ["x", "wf" if cast_weights else "w",
                                   "bf" if cast_weights else "b"], ["h"], pads=[1] * 4),
             helper.make_node("Relu", ["h"], ["y"])]
    if cast_weights:
        nodes[:0] = [helper.make_node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
                     helper.make_node("Cast", ["b"], ["bf"], to=TensorProto.FLOAT)]
    g = helper.make_graph(nodes, "half", [helper.make_tensor_value_info(
        "x", io, [1, 3, "H", "W"])], [helper.make_tensor_value_info("y", io, [1, 3, "H", "W"])],
        [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
def test_float16_convolutions_are_refused_at_load(op):
    """A net.half() export: its fused Conv would reach the float16 numpy reference without
    its weights (an IndexError) and every convolution would run in numpy; refused at load
    with what to do instead. Weights stored as float16 but Cast to float32 run natively."""
    with pytest.raises(ValueError, match=rf"{op} node .* float16 weights.*export the model "
                                         r"in float32") as info:
        NativeExecutor(_fp16_conv_model(op))
    assert "\n" not in str(info.value)
    m = _fp16_conv_model(op, cast_weights=True)
    x = np.random.default_rng(1).standard_normal((1, 3, 9, 11)).astype(np.float32)
    np.testing.assert_allclose(NativeExecutor(m).run(x), ort_run(m, x), **PARITY)


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum"])
def test_sums_over_leading_axes_run_as_one_einsum(threads, op):
    """A sum or mean over a block of axes with others after it (a Keras SE block's mean over an
    NHWC map's H and W) runs as one einsum over (A, R, B) (reduce.py _rows_reduced); those
    and the other axis sets give float64 numpy's values to float32 rounding, with and without
    keepdims."""
    from a2r_edge.model.ops.reduce import _rows_reduced
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 24, 20, 8)).astype(np.float32)
    assert _rows_reduced(x, (1, 2)) is not None and _rows_reduced(x, (0,)) is not None
    assert _rows_reduced(x, (2, 3)) is None and _rows_reduced(x, (1, 3)) is None
    assert _rows_reduced(x.astype(np.float64), (1, 2)) is None
    for axes in ([1, 2], [0], [1], [2, 3], [1, 3], [0, 1, 2, 3]):
        for keep in (0, 1):
            want = getattr(np, op[6:].lower())(x.astype(np.float64), axis=tuple(axes),
                                                keepdims=bool(keep))
            axes_in = numpy_helper.from_array(np.array(axes, np.int64), "axes")
            node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keep)
            g = helper.make_graph([node], "g", [helper.make_tensor_value_info(
                "x", TensorProto.FLOAT, x.shape)], [helper.make_tensor_value_info(
                    "y", TensorProto.FLOAT, want.shape)], [axes_in])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
            m.ir_version = 8
            got = NativeExecutor(m).run(x)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * x.shape[1] ** 0.5,
                                       err_msg=f"{axes} keepdims={keep}")
