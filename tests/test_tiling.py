"""Tiled and untiled conversions of one picture agree: the one padding rule (picture/forward.py
pad_to_stride, 1-pixel sides included) and whole-picture statistics in the tiles, also those the
network holds itself (the bundled a2r_lite's InstanceNormalization nodes)."""
import collections
from pathlib import Path

import cv2
import numpy as np
import pytest

from a2r_edge import Engine
from a2r_edge.model import precision as prec
from a2r_edge.model import reference as ref
from a2r_edge.model import whole_stats
from a2r_edge.model.graph import build_graph
from a2r_edge.picture import tiling
from a2r_edge.picture.forward import pad_to_stride, padded_size, reflect_index
from a2r_edge.runtime import cpu

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "astronaut_toon.png"


@pytest.mark.parametrize("h,w", [(1, 1), (1, 6), (6, 1), (2, 3), (5, 7), (4, 8), (13, 2)])
@pytest.mark.parametrize("channels", [None, 1, 3, 4])
@pytest.mark.parametrize("margin", [0, 3, 8])
def test_pad_to_stride_is_reflect_and_repeats_a_1_pixel_side(h, w, channels, margin):
    """The margin on every side, then the stride's remainder at the bottom and right, mirrored
    (also a margin longer than the picture's side), as the reference oracle pads."""
    rng = np.random.default_rng(h * 100 + w)
    shape = (h, w) if channels is None else (h, w, channels)
    img = rng.integers(0, 256, shape, dtype=np.uint8)
    out = pad_to_stride(img, 4, margin)
    hp, wp = h + 2 * margin + -(h + 2 * margin) % 4, w + 2 * margin + -(w + 2 * margin) % 4
    assert out.shape == (hp, wp, 3) and padded_size(h, w, 4, margin) == (hp, wp)
    bgr = np.repeat(img.reshape(h, w, -1)[:, :, :1], 3, 2) if channels in (None, 1) \
        else img[:, :, :3].copy()
    if channels == 4:   # white under fully transparent pixels (forward.visible_bgr)
        bgr[img[:, :, 3] == 0] = 255
    mode_h, mode_w = ("edge" if h == 1 else "reflect"), ("edge" if w == 1 else "reflect")
    want = np.pad(bgr, ((margin, hp - h - margin), (0, 0), (0, 0)), mode=mode_h)
    want = np.pad(want, ((0, 0), (margin, wp - w - margin), (0, 0)), mode=mode_w)
    np.testing.assert_array_equal(out, want)
    chw = np.ascontiguousarray(bgr.transpose(2, 0, 1)[None])
    np.testing.assert_array_equal(ref.pad_to(chw, 4, margin)[0].transpose(1, 2, 0), want)
    assert [reflect_index(i, 3) for i in range(8)] == [0, 1, 2, 1, 0, 1, 2, 1]
    assert [reflect_index(i, 3) for i in range(-4, 0)] == [0, 1, 2, 1]


@pytest.fixture(scope="module")
def engine():
    return Engine(cache_mb=0)  # the bundled a2r_lite: InstanceNormalization in both networks


def bands(diff, width=8):
    """Mean of |diff| in the outer ``width``-pixel band of the picture and inside it."""
    border = np.ones(diff.shape[:2], bool)
    border[width:-width, width:-width] = False
    return diff[border].mean(), diff[~border].mean()


def test_tiled_equals_untiled_on_the_bundled_model(engine):
    """517x389 in tiles of 256: before whole-picture statistics reached the network's
    InstanceNormalization nodes, 2.3 grey levels apart on average and up to 35, everywhere."""
    img = cv2.resize(cv2.imread(str(SAMPLE)), (517, 389), interpolation=cv2.INTER_AREA)
    whole = engine.convert(img).astype(np.int16)
    diff = np.abs(engine.convert(img, tile=256).astype(np.int16) - whole)
    border, interior = bands(diff)
    assert diff.mean() <= 0.05 and diff.max() <= 2
    assert border <= 0.05 and interior <= 0.05


@pytest.mark.parametrize("shape", [(1, 517, 3), (389, 1, 3), (1, 300), (2, 301, 4), (300, 3, 3)])
def test_tiled_equals_untiled_with_thin_sides(engine, shape):
    rng = np.random.default_rng(sum(shape))
    base = cv2.imread(str(SAMPLE))[:shape[0], :shape[1]]
    img = base if len(shape) == 3 and shape[2] == 3 else (
        cv2.cvtColor(base, cv2.COLOR_BGR2GRAY) if len(shape) == 2
        else np.dstack([base, rng.integers(0, 256, shape[:2], dtype=np.uint8)]))
    whole = engine.convert(img).astype(np.int16)
    tiled = engine.convert(img, tile=128).astype(np.int16)
    assert tiled.shape == whole.shape == img.shape
    assert np.abs(tiled - whole).max() <= 2


def test_tiled_equals_untiled_on_onnxruntime():
    """The graph pieces run on onnxruntime too (several inputs and outputs per piece)."""
    eng = Engine(backend="onnxruntime", cache_mb=0)
    assert {p.backend for p in eng.plan.placements if p.stage in ("encode", "decode")} \
        == {"onnxruntime"}
    img = cv2.resize(cv2.imread(str(SAMPLE)), (517, 389), interpolation=cv2.INTER_AREA)
    diff = np.abs(eng.convert(img, tile=256).astype(np.int16) - eng.convert(img))
    assert diff.mean() <= 0.05 and diff.max() <= 2


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_tiles_run_at_the_engines_precision(engine, precision):
    """The graph pieces run at the stage's precision, int8 ranges and fp32 nodes
    (NativeExecutor.sibling): they ran at fp32 whatever the Engine's, the same bytes as fp32's
    tiles (int8: up to 10 levels from its untiled result). At bf16 and int8 tiled and untiled
    agree within a few levels: their rounding steps magnify float rounding (a one-level change
    of one pixel moves this int8 output elsewhere by up to 3 levels)."""
    if precision not in prec.runnable():
        pytest.skip(f"{precision} does not run at {cpu.isa()}")
    img = cv2.resize(cv2.imread(str(SAMPLE)), (517, 389), interpolation=cv2.INTER_AREA)
    eng = Engine(cache_mb=0, precision=precision)
    tiled = eng.convert(img, tile=256)
    assert np.any(tiled != engine.convert(img, tile=256))
    diff = np.abs(tiled.astype(np.int16) - eng.convert(img))
    assert diff.mean() <= 0.3 and diff.max() <= 5


def test_pieces_keep_the_names_of_unnamed_nodes():
    """An unnamed node is named by its op and index in its graph (graph.node_name); a piece
    names its nodes as the whole graph does, so the stage's int8 ranges and fp32 lists, keyed
    by those names, find them (by its own indices a piece's Conv_0 was the whole graph's
    Conv_3, or nothing)."""
    proto = whole_stats.load(ROOT / "a2r_edge" / "models" / "a2r_lite" / "decoder.onnx")
    for node in proto.graph.node:
        node.name = ""
    names = [node.name for node in build_graph(proto).nodes]
    got = [node.name for piece in whole_stats.pieces(proto)
           for node in build_graph(whole_stats.piece_graph(proto, piece)).nodes]
    assert got == names and "Conv_12" in names and len(set(names)) == len(names)


def test_tiles_resume_from_kept_values_and_run_again_when_they_do_not_fit(engine, monkeypatch):
    """Each tile keeps its values between passes, so every step runs once per tile and is then
    forgotten; with less room (keep_bytes) the tiles that do not fit run again from what they
    kept, at worst from the picture, and the result is the same bytes. What is kept never
    exceeds keep_bytes."""
    img = cv2.resize(cv2.imread(str(SAMPLE)), (517, 389), interpolation=cv2.INTER_AREA)
    runs, kept = collections.Counter(), []
    add, keep = tiling._Passes.add, tiling._Passes.keep

    def counted_add(self, step, reads_slot=False):
        def counted(values, slot, i=len(self.steps)):
            runs[i] += 1
            return step(values, slot)
        add(self, counted, reads_slot)

    def checked_keep(self, tile, values):
        keep(self, tile, values)
        assert self.kept_bytes <= self.keep_bytes
        kept.append(self.kept_bytes)

    def gather(self, name):   # steps every tile is past are forgotten (their runners freed)
        parts = gathered(self, name)
        forgotten.append(sum(step is None for step in self.steps) / len(self.steps))
        return parts

    gathered, forgotten = tiling._Passes.gather, []
    monkeypatch.setattr(tiling._Passes, "add", counted_add)
    monkeypatch.setattr(tiling._Passes, "keep", checked_keep)
    monkeypatch.setattr(tiling._Passes, "gather", gather)
    forward = engine._forward
    margin = tiling.margin_for(forward.model)
    n_tiles = (len(tiling.spans(392, 256, margin, 4))      # 517x389 padded to 520x392
               * len(tiling.spans(520, 256, margin, 4)))
    statistics = 10   # a2r_lite: 4 + 4 InstanceNormalization nodes, the AdaIN content and the
    # decoder gate's global mean
    out, total = {}, {}
    for room in (None, 3 << 20, 0):   # None: A2R_MEMORY_MB (1 GiB), all fit
        runs.clear()
        kept.clear()
        forgotten.clear()
        out[room] = tiling.convert_tiled(forward, img, 256, keep_bytes=room)
        total[room] = sum(runs.values())
        if room is None:
            assert set(runs.values()) == {n_tiles}
            assert max(kept) > 3 << 20
            assert forgotten == [1.0] * statistics
        if room == 0:
            assert max(kept) == 0
            assert forgotten == [0.0] * statistics
            assert runs[0] == n_tiles * (statistics + 1)   # the picture, in every pass
    assert total[None] < total[3 << 20] < total[0]
    np.testing.assert_array_equal(out[3 << 20], out[None])
    np.testing.assert_array_equal(out[0], out[None])
    np.testing.assert_array_equal(out[None], engine.convert(img, tile=256))


@pytest.mark.parametrize("name", ["encoder", "decoder"])
def test_graph_pieces_chained_are_the_graph(name):
    """whole_stats.pieces run one after another, each passing on what is live at its cut, give
    the graph's output: with the statistic nodes left as they are (to float32 rounding on
    onnxruntime: it fuses across a cut differently), and with each fixed to its input's own
    statistics (the Mul and Add that replace a norm, the constant that replaces the gate's
    mean)."""
    import onnxruntime as ort
    proto = whole_stats.load(ROOT / "a2r_edge" / "models" / "a2r_lite" / f"{name}.onnx")
    session = ort.InferenceSession(proto.SerializeToString())
    first = session.get_inputs()[0]
    channels = 3 if name == "encoder" else 32
    x = np.random.default_rng(3).standard_normal((1, channels, 40, 28)).astype(np.float32)
    want = session.run(None, {first.name: x})[0]
    pieces = whole_stats.pieces(proto)
    cuts = 4 if name == "encoder" else 5   # the decoder's gate takes a global mean too
    assert [p.norm is None for p in pieces] == [True] + [False] * cuts
    for fixed in (False, True):
        values = {first.name: x}
        for piece in pieces:
            stats = None
            if fixed and piece.norm is not None:
                v = values[piece.norm.input].astype(np.float64)
                stats = (v.mean(axis=(0, 2, 3)), v.var(axis=(0, 2, 3)))
            graph = whole_stats.piece_graph(proto, piece, stats)
            run = ort.InferenceSession(graph.SerializeToString())
            got = dict(zip(piece.outputs, run.run(None, {t: values[t] for t in piece.inputs})))
            values = {t: got[t] if t in got else values[t] for t in piece.live}
        assert list(values) == [session.get_outputs()[0].name]
        if fixed:
            np.testing.assert_allclose(values[pieces[-1].live[0]], want, rtol=1e-4, atol=1e-4)
        else:
            np.testing.assert_allclose(values[pieces[-1].live[0]], want, rtol=1e-6, atol=1e-6)


GENERATORS = ROOT / "tests" / "fixtures" / "generators"


@pytest.mark.parametrize("name,fixable,why", [
    ("cyclegan_resnet", 9, None),                    # scale and B from Constant nodes
    ("animeganv2_dynamo", 0, "rank 3"),              # GroupNorm: a norm of (N, G, C/G*H*W)
    ("ugatit_full", 0, "fixed H x W"),               # exported at 24x24: fit.py's
])
def test_which_instance_norms_tiles_can_fix(name, fixable, why):
    norms, skipped = whole_stats.statistic_nodes(whole_stats.load(GENERATORS / f"{name}.onnx"))
    assert len(norms) == fixable
    assert (not skipped) if why is None else all(why in w for w in skipped.values())


def test_a_norm_tiles_cannot_fix_is_named_in_a_warning():
    """A GroupNorm exported around a rank-3 InstanceNormalization: the tiles keep their own
    statistics there and say so (it was an IndexError)."""
    eng = Engine(str(GENERATORS / "animeganv2_dynamo.onnx"), cache_mb=0)
    img = cv2.resize(cv2.imread(str(SAMPLE)), (150, 110), interpolation=cv2.INTER_AREA)
    with pytest.warns(RuntimeWarning, match="keep each tile's own"):
        out = eng.convert(img, tile=64)
    assert out.shape == img.shape


def test_a_model_whose_outputs_do_not_scale_with_its_tiles_is_one_clear_error():
    """A plain ONNX file is taken as stride 1; this CycleGAN down-samples by 4 and returns
    88x84 for an 87x82 tile: a clear ValueError, not a numpy broadcasting error."""
    eng = Engine(str(GENERATORS / "cyclegan_resnet.onnx"), cache_mb=0)
    img = cv2.resize(cv2.imread(str(SAMPLE)), (150, 110), interpolation=cv2.INTER_AREA)
    with pytest.raises(ValueError, match="stride"):
        eng.convert(img, tile=64)


def squeeze_excite(path, mean: str):
    """Conv -> x * sigmoid(Conv(mean of x over H, W)) -> Conv: a squeeze-excite block. Its mean
    NCHW ("reduce": ReduceMean axes 2, 3; "pool": GlobalAveragePool, torch's
    AdaptiveAvgPool2d(1); tiles can be given both) or ("nhwc"), as tf2onnx leaves it, over
    axes 1, 2 of an NHWC Transpose (they cannot: a warning says so)."""
    import onnx
    from onnx_graphs import Builder
    b = Builder(np.random.default_rng(33), 3)
    x = b.node("Relu", [b.conv("x", 3, 8)])
    if mean == "nhwc":
        m = b.node("ReduceMean", [b.node("Transpose", [x], perm=[0, 2, 3, 1])], axes=[1, 2])
        m = b.node("Transpose", [m], perm=[0, 3, 1, 2])
    elif mean == "pool":
        m = b.node("GlobalAveragePool", [x])
    else:
        m = b.node("ReduceMean", [x], axes=[2, 3])
    y = b.node("Mul", [x, b.node("Sigmoid", [b.conv(m, 8, 8, k=1)])])
    onnx.save(b.model(b.node("Tanh", [b.conv(y, 8, 3)])), str(path))
    return path


def test_a_global_mean_is_the_whole_pictures_in_tiles(tmp_path):
    """A ReduceMean over H and W (a squeeze-excite's, the bundled decoder gate's) is a cut:
    the tiles get the whole picture's mean and convert as it does whole (each tile's own mean
    moved the bundled model's output by up to 4 levels on an eval drawing). The same mean
    taken over NHWC axes cannot be given: the warning names it."""
    img = cv2.resize(cv2.imread(str(SAMPLE)), (300, 220), interpolation=cv2.INTER_AREA)
    for mean in ("reduce", "pool"):
        eng = Engine(str(squeeze_excite(tmp_path / f"se_{mean}.onnx", mean)), cache_mb=0)
        whole, tiled = eng.convert(img).astype(int), eng.convert(img, tile=96).astype(int)
        assert np.abs(whole - tiled).max() <= 1, mean
    eng = Engine(str(squeeze_excite(tmp_path / "se_nhwc.onnx", "nhwc")), cache_mb=0)
    with pytest.warns(RuntimeWarning, match="ReduceMean over picture-sized axes"):
        eng.convert(img, tile=96)


def test_a_statistic_of_the_input_itself_and_opset_18_constant_axes_in_tiles(tmp_path):
    """Conv(x - ReduceMean(x)) with the mean the graph's first node (it read the picture under
    a name the tiles did not hold: KeyError), and a mean whose axes come from a Constant node
    at opset 18 (its int64 value crossed the cut as a float32 input: TypeError): tiled as
    whole. keepdims=0 is no cut: its mean is named in the warning."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    img = cv2.resize(cv2.imread(str(SAMPLE)), (120, 90), interpolation=cv2.INTER_AREA)
    w = numpy_helper.from_array(
        np.random.default_rng(35).standard_normal((3, 3, 3, 3)).astype(np.float32) / 3, "w")
    for keepdims in (1, 0):
        nodes = [helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(
                     np.array([2, 3], np.int64))),
                 helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=keepdims)]
        if not keepdims:
            nodes.append(helper.make_node("Unsqueeze", ["m", "axes"], ["m4"]))
        nodes += [helper.make_node("Sub", ["x", "m4" if not keepdims else "m"], ["d"]),
                  helper.make_node("Conv", ["d", "w"], ["c"], pads=[1, 1, 1, 1]),
                  helper.make_node("Tanh", ["c"], ["y"])]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
            "x", TensorProto.FLOAT, [1, 3, "H", "W"])], [helper.make_tensor_value_info(
                "y", TensorProto.FLOAT, [1, 3, "H", "W"])], [w])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
        m.ir_version = 8
        onnx.save(m, str(tmp_path / f"centred{keepdims}.onnx"))
        eng = Engine(str(tmp_path / f"centred{keepdims}.onnx"), cache_mb=0)
        if keepdims:
            assert np.abs(eng.convert(img).astype(int) - eng.convert(img, tile=48)).max() <= 1
        else:
            with pytest.warns(RuntimeWarning, match="ReduceMean over picture-sized axes"):
                eng.convert(img, tile=48)


def test_a_memory_limit_too_small_even_for_tiles_says_so(monkeypatch):
    """At A2R_MEMORY_MB=4 the bundled model does not fit even its smallest tiles: one error
    saying so and what to do (it read "convert in tiles or raise A2R_MEMORY_MB", naming a tile
    shape, while it was converting in tiles)."""
    from a2r_edge.model.specialise import MemoryLimitError
    eng = Engine(cache_mb=0)
    monkeypatch.setenv("A2R_MEMORY_MB", "4")
    img = cv2.imread(str(SAMPLE))
    with pytest.raises(MemoryLimitError, match=r"even in tiles of \d+ pixels .* raise "
                                               r"A2R_MEMORY_MB"):
        eng.convert(img)
