"""preprocess / postprocess and style='s colour step on a 1920x1080 BGR frame against OpenCV
(+ numpy) and copy bandwidth.

Ours writes into a preallocated out=; the peers get preallocated buffers wherever their API takes
one (blobFromImage has no dst, so it allocates its 24 MB result on every call).
"""
import cv2
import numpy as np

from a2r_edge import ops
from a2r_edge.picture import stages
from a2r_edge.model import reference as ref
from conftest import compare

H, W = 1080, 1920
MEAN = STD = (0.5, 0.5, 0.5)


def _frame():
    return np.random.default_rng(0).integers(0, 256, (H, W, 3), dtype=np.uint8)


def test_preprocess(benchmark, threads):
    img = _frame()
    out = np.empty((1, 3, H, W), np.float32)

    # blobFromImage computes (img - mean) * scalefactor with the channels swapped (BGR -> RGB):
    # (x - 127.5) / 127.5 = (x / 255 - 0.5) / 0.5, our contract for mean = std = 0.5.
    def blob():
        return cv2.dnn.blobFromImage(img, scalefactor=1 / (255 * 0.5),
                                     mean=(127.5, 127.5, 127.5), swapRB=True)

    np.testing.assert_allclose(blob(), ref.preprocess(img, MEAN, STD), rtol=1e-5, atol=1e-6)
    compare(benchmark, lambda: ops.preprocess(img, MEAN, STD, out=out), blob, op="preprocess",
            case="1080x1920 bgr u8->f32", threads=threads, peer_name="cv2.dnn.blobFromImage",
            bytes_moved=H * W * 3 + H * W * 3 * 4, target=8, target_bandwidth=0.6)


def test_postprocess(benchmark, threads):
    x = np.random.default_rng(1).uniform(-1.1, 1.1, (1, 3, H, W)).astype(np.float32)
    out = np.empty((H, W, 3), np.uint8)
    tmp = np.empty((3, H, W), np.float32)
    rgb = np.empty((H, W, 3), np.uint8)
    peer_out = np.empty((H, W, 3), np.uint8)

    # np.clip(np.rint((x*0.5+0.5)*255), 0, 255).astype(uint8) -> HWC -> cvtColor RGB2BGR, every
    # step into a preallocated buffer (the cast and the transpose share one copyto).
    def numpy_cv2():
        np.multiply(x[0], np.float32(0.5), out=tmp)
        np.add(tmp, np.float32(0.5), out=tmp)
        np.multiply(tmp, np.float32(255), out=tmp)
        np.rint(tmp, out=tmp)
        np.clip(tmp, 0, 255, out=tmp)
        np.copyto(rgb, tmp.transpose(1, 2, 0), casting="unsafe")
        return cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR, dst=peer_out)

    np.testing.assert_array_equal(numpy_cv2(), ref.postprocess(x, MEAN, STD))
    compare(benchmark, lambda: ops.postprocess(x, MEAN, STD, out=out), numpy_cv2,
            op="postprocess", case="1080x1920 f32->bgr u8", threads=threads,
            peer_name="numpy + cv2.cvtColor", bytes_moved=H * W * 3 * 4 + H * W * 3, target=8)


def test_colour_transfer(benchmark, threads):
    """style='s colour step (statistics + one table per channel) against the same affine map
    written as numpy float32 passes over the frame."""
    img = _frame()
    ref_stats = stages.colour_stats(img[::4, ::4] // 2 + 60)
    px = np.empty((H, W, 3), np.float32)
    peer_out = np.empty((H, W, 3), np.uint8)

    def numpy_passes():
        np.copyto(px, img)
        m = px.mean((0, 1), dtype=np.float64)
        s = np.sqrt(px.var((0, 1), dtype=np.float64) + 1.0)
        k = stages.STYLE_COLOUR
        gain = (ref_stats[1][:3] / s) ** k
        np.multiply(px, gain.astype(np.float32), out=px)
        np.add(px, (m + k * (ref_stats[0][:3] - m) - m * gain).astype(np.float32), out=px)
        np.rint(px, out=px)
        np.clip(px, 0, 255, out=px)
        np.copyto(peer_out, px, casting="unsafe")
        return peer_out

    assert np.abs(numpy_passes().astype(int) - stages.colour_transfer(img, ref_stats)).max() <= 1
    compare(benchmark, lambda: stages.colour_transfer(img, ref_stats), numpy_passes,
            op="colour_transfer", case="1080x1920 bgr u8", threads=threads,
            peer_name="numpy float32", bytes_moved=2 * H * W * 3)
