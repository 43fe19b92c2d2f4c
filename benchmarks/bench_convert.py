"""End-to-end convert of one picture with the bundled model: the Engine (its plan, native kernels)
vs the straightforward numpy + OpenCV + onnxruntime implementation of the same package
(benchmarks/straightforward.py), same run, 1 and 2 threads, 512^2 and 1024^2.
Targets (the issue): >= 1.5x the straightforward version; latency spread (stdev / median) of
ours <= 5 %. Both are printed; nothing is asserted on time.
"""
from pathlib import Path

import cv2
import numpy as np
import pytest

from a2r_edge import Engine
from conftest import compare
from straightforward import converter

MODEL = Path(__file__).resolve().parent.parent / "a2r_edge" / "models" / "a2r_lite"
SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "astronaut_toon.png"


@pytest.mark.parametrize("side", [512, 1024])
def test_convert(benchmark, threads, side):
    img = cv2.resize(cv2.imread(str(SAMPLE)), (side, side), interpolation=cv2.INTER_CUBIC)
    eng = Engine(cache_mb=0)  # built under the threads fixture: its plan uses `threads`
    plain = converter(MODEL, threads)
    assert np.abs(eng.convert(img).astype(int) - plain(img)).max() <= 2  # the same work
    row = compare(benchmark, lambda: eng.convert(img), lambda: plain(img), op="convert",
                  case=f"a2r_lite {side}^2", threads=threads,
                  peer_name="numpy+cv2+onnxruntime", target=1.5, rounds=11)
    stats = benchmark.stats.stats
    spread = stats.stddev / stats.median
    row["case"] += f" spread {spread:.1%}"
    benchmark.extra_info["spread"] = spread


def test_content_map_overhead(benchmark, threads, tmp_path):
    """The bundled package predicts its AdaIN targets with a content map; its peer is the same
    package with the map removed (fixed targets): the map's cost is the ratio's distance from 1."""
    import json
    import shutil

    from a2r_edge.model.package import write_manifest
    fixed = tmp_path / "fixed_targets"
    shutil.copytree(MODEL, fixed)
    stats = json.loads((fixed / "photo_stats.json").read_text())
    assert stats.pop("content_map", None) is not None
    (fixed / "photo_stats.json").write_text(json.dumps(stats))
    manifest = json.loads((fixed / "manifest.json").read_text())
    write_manifest(fixed, manifest, list(manifest["files"]))
    img = cv2.resize(cv2.imread(str(SAMPLE)), (512, 512), interpolation=cv2.INTER_CUBIC)
    ours, peer = Engine(cache_mb=0), Engine(str(fixed), cache_mb=0)
    compare(benchmark, lambda: ours.convert(img), lambda: peer.convert(img), op="convert",
            case="a2r_lite 512^2 content map", threads=threads,
            peer_name="same, fixed targets", rounds=11)


def test_tiled_vs_untiled(benchmark, threads):
    """A tiled conversion (517x389 in tiles of 256: 2 x 3 tiles, each with its 88-pixel margins)
    beside the untiled conversion of the same picture, same engine, same run. The tiles repeat
    the margins' work and gather the whole picture's statistics (picture/tiling.py), so the
    ratio is the whole price of tiling: its distance from 1 is what tiling costs."""
    img = cv2.resize(cv2.imread(str(SAMPLE)), (517, 389), interpolation=cv2.INTER_AREA)
    eng = Engine(cache_mb=0)
    assert np.abs(eng.convert(img, tile=256).astype(int) - eng.convert(img)).max() <= 2
    compare(benchmark, lambda: eng.convert(img, tile=256), lambda: eng.convert(img),
            op="convert", case="a2r_lite 517x389 tile=256", threads=threads,
            peer_name="untiled", rounds=5)


@pytest.mark.parametrize("side", [512, 1024])
def test_border_margin_cost(benchmark, threads, tmp_path, side):
    """The bundled package mirrors its border_margin (16 px) onto every side before the network
    (picture/forward.py pad_to_stride); its peer is the same package with border_margin 0: the
    ratio is the margin's price (its extra pixels: +12.9 % at 512^2, +6.3 % at 1024^2)."""
    import json
    import shutil

    no_margin = tmp_path / "no_margin"
    shutil.copytree(MODEL, no_margin)
    manifest = json.loads((no_margin / "manifest.json").read_text())
    assert manifest.pop("border_margin", 0) > 0
    (no_margin / "manifest.json").write_text(json.dumps(manifest))
    img = cv2.resize(cv2.imread(str(SAMPLE)), (side, side), interpolation=cv2.INTER_CUBIC)
    ours, peer = Engine(cache_mb=0), Engine(str(no_margin), cache_mb=0)
    compare(benchmark, lambda: ours.convert(img), lambda: peer.convert(img), op="convert",
            case=f"a2r_lite {side}^2 border_margin 16", threads=threads,
            peer_name="same, border_margin 0", rounds=11)
