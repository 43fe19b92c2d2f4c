"""The residual gate of tools/train_a2r_lite.py's decoder (--gate, issue 22): it scales the
residual by a map in (0, 1), starts near the ungated decoder, closes to the identity, and its
ONNX graph runs on the native executor as on onnxruntime; and the drawing loss and data cache
beside it."""
import copy
import importlib.util
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest

from a2r_edge.model import SUPPORTED, NativeExecutor

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def train():
    sys.path.insert(0, str(ROOT / "tools"))
    spec = importlib.util.spec_from_file_location("train_a2r_lite",
                                                  ROOT / "tools" / "train_a2r_lite.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _decoders(train):
    torch.manual_seed(3)
    plain, gated = train.Decoder(), train.Decoder(gate=True)
    for p in plain.parameters():   # a residual that is not zero (the output conv starts at 0)
        torch.nn.init.normal_(p, std=0.2)
    gated.load_state_dict({**plain.state_dict(),
                           **{f"gate.{k}": v for k, v in gated.gate.state_dict().items()}})
    return plain, gated


def test_gate_starts_near_the_ungated_residual_and_closes_to_the_identity(train):
    plain, gated = _decoders(train)
    f = torch.randn(1, train.C3, 9, 11)
    with torch.no_grad():
        d0 = plain(f)
        d, g = gated(f, with_gate=True)
        assert g.shape == (1, 1, 36, 44)
        start = torch.sigmoid(torch.tensor(train.GATE_INIT))
        torch.testing.assert_close(g, torch.full_like(g, float(start)))
        torch.testing.assert_close(d, d0 * start)
        gated.gate[2].bias.fill_(-30.0)   # closed: the residual vanishes, y = x
        assert gated(f).abs().max() < 1e-9 * (1 + d0.abs().max())


def test_gated_decoder_runs_natively_as_on_onnxruntime(train, tmp_path):
    _, gated = _decoders(train)
    for p in gated.gate.parameters():   # a gate that varies over the picture
        torch.nn.init.normal_(p, std=0.3)
    gated.eval()
    path = str(tmp_path / "decoder.onnx")
    torch.onnx.export(gated, (torch.zeros(1, train.C3, 8, 8),), path, input_names=["f"],
                      output_names=["d"], opset_version=17, dynamo=False,
                      dynamic_axes={"f": {2: "h4", 3: "w4"}, "d": {2: "h", 3: "w"}})
    ops = {n.op_type for n in onnx.load(path).graph.node}
    assert {"Sigmoid", "Mul", "Resize"} <= ops <= SUPPORTED
    x = np.random.default_rng(0).standard_normal((1, train.C3, 9, 11)).astype(np.float32)
    want = onnxruntime.InferenceSession(path).run(None, {"f": x})[0]
    with torch.no_grad():
        np.testing.assert_allclose(gated(torch.from_numpy(x)).numpy(), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(NativeExecutor(path).run(x), want, rtol=1e-3, atol=1e-3)


def test_receptive_field_counts_the_longer_gate_branch(train):
    plain = train.receptive_field(train.conv_path())
    assert train.receptive_field(train.gate_path()) > plain == 87


def test_drawing_loss_charges_removed_detail_only_when_asked(train):
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32))
    smooth = train.gauss(x.reshape(6, 1, 32, 32), 1.5).reshape(x.shape)   # detail removed
    assert train.drawing_loss(x, x, lost=1.0).item() == pytest.approx(0.0, abs=1e-6)
    free, charged = (train.drawing_loss(smooth, x, lost=w).item() for w in (0.0, 1.0))
    removed = torch.relu(train.local_hf_rms(x) - train.local_hf_rms(smooth)).mean().item()
    assert removed > 0.05
    assert charged - free == pytest.approx(removed, rel=1e-4)


def test_photos_kept_share_of_the_preservation_batch(train):
    """--photos-kept: about that share of the crops come from the photos; at 0 none, and the
    random stream is the one before the option (a --steps replay draws the same crops)."""
    c = train.CROP
    drawings = [(np.zeros((c + 8, c + 8, 3), np.uint8), np.ones((c + 8, c + 8), np.float32))]
    photos = [np.full((c + 8, c + 8, 3), 255, np.uint8)]

    def share(rng, p):   # of photo crops (all 255, drawings all 0) over 40 batches
        return float(np.mean([(train.sample_drawings(drawings, rng, photos, p).mean((1, 2, 3))
                               > 0).numpy().mean() for _ in range(40)]))

    assert share(np.random.RandomState(0), 0.0) == 0.0
    assert 0.35 < share(np.random.RandomState(0), 0.5) < 0.65
    a, b = np.random.RandomState(3), np.random.RandomState(3)
    train.sample_drawings(drawings, a)
    train.sample_drawings(drawings, b, photos, 0.0)
    assert a.rand() == b.rand()


def test_start_gate_is_the_frozen_copys_map(train):
    """--gate-keep's reference: the resumed network's gate map, unmoved by training the copy."""
    torch.manual_seed(0)
    enc, dec = train.Encoder(), train.Decoder(gate=2)
    start = tuple(copy.deepcopy(m).eval().requires_grad_(False) for m in (enc, dec))
    x = torch.randn(2, 3, 32, 32)
    f = enc(x)
    m, s = train.channel_stats(f)
    g = dec(train.adain(f, m, s), with_gate=True)[1]
    g0 = train.start_gate(start, x, m, s)
    torch.testing.assert_close(g0, g.detach())
    assert not g0.requires_grad
    with torch.no_grad():
        for p in dec.gate.parameters():
            p.add_(0.5)
    assert (dec(train.adain(f, m, s), with_gate=True)[1] - g0).abs().max() > 1e-3
    torch.testing.assert_close(train.start_gate(start, x, m, s), g0)


def test_data_cache_keeps_the_drawings_scales(train, tmp_path):
    photo = np.zeros((8, 8, 3), np.uint8)
    drawing = (np.full((4, 4, 3), 7, np.uint8), np.ones((4, 4), np.float32))
    path = str(tmp_path / "sources.npz")
    train.save_sources(path, {"p": photo}, [drawing], ["credit"], (1.0, 0.25))
    originals, drawings, credits, scales = train.load_sources(path)
    assert scales == (1.0, 0.25) and credits == ["credit"] and list(originals) == ["p"]
    np.testing.assert_array_equal(drawings[0][0], drawing[0])


def test_whole_picture_gate_term_starts_at_zero_and_shifts_the_whole_map(train, tmp_path):
    _, local = _decoders(train)
    whole = train.Decoder(gate=2)
    whole.load_state_dict({**local.state_dict(),
                           **{f"gate_global.{k}": v
                              for k, v in whole.gate_global.state_dict().items()}})
    f = torch.randn(1, train.C3, 12, 12)
    with torch.no_grad():
        torch.testing.assert_close(whole(f), local(f))      # the new term starts at 0
        for p in list(whole.gate.parameters()) + list(whole.gate_global.parameters()):
            torch.nn.init.normal_(p, std=0.05)   # logits away from float32 sigmoid's 0 and 1
        local.gate.load_state_dict(whole.gate.state_dict())
        shift = (torch.logit(whole(f, with_gate=True)[1].double())
                 - torch.logit(local(f, with_gate=True)[1].double()))
    assert shift.abs().min().item() > 1e-3                   # one vote for the whole picture
    torch.testing.assert_close(shift, torch.full_like(shift, shift.mean().item()), atol=1e-3,
                               rtol=0)
    whole.eval()
    path = str(tmp_path / "decoder.onnx")
    torch.onnx.export(whole, (torch.zeros(1, train.C3, 8, 8),), path, input_names=["f"],
                      output_names=["d"], opset_version=17, dynamo=False,
                      dynamic_axes={"f": {2: "h4", 3: "w4"}, "d": {2: "h", 3: "w"}})
    assert {n.op_type for n in onnx.load(path).graph.node} <= SUPPORTED
    x = np.random.default_rng(0).standard_normal((1, train.C3, 9, 11)).astype(np.float32)
    want = onnxruntime.InferenceSession(path).run(None, {"f": x})[0]
    np.testing.assert_allclose(NativeExecutor(path).run(x), want, rtol=1e-3, atol=1e-3)


def test_calibration_shifts_the_bias_of_the_gate_logit(train):
    """tools/calibrate_gate.py names the logit's bias without importing torch: that name must
    be the bias of the gate's last conv, in every gate kind."""
    spec = importlib.util.spec_from_file_location("calibrate_gate",
                                                  ROOT / "tools" / "calibrate_gate.py")
    cal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cal)
    for kind in (1, 2):
        dec = train.Decoder(gate=kind)
        assert (dec.state_dict()[cal.GATE_LOGIT_BIAS].data_ptr()
                == dec.gate[-1].bias.data_ptr())          # the same tensor, not an equal one
        assert dec.gate[-1].out_channels == 1
