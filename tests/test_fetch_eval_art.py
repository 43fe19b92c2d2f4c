"""tools/fetch_eval_art.py without the network: the licence read from a package's copyright file,
and the cached set loaded with alpha composited over white."""
import importlib.util
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture()
def fea(tmp_path, monkeypatch):
    monkeypatch.setenv("A2R_EVAL_ART", str(tmp_path / "cache"))
    spec = importlib.util.spec_from_file_location("fetch_eval_art",
                                                  ROOT / "tools" / "fetch_eval_art.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def copyright_file(root, pkg, text):
    d = root / "usr/share/doc" / pkg
    d.mkdir(parents=True)
    (d / "copyright").write_text(text)


def test_licence_of_reads_both_copyright_styles(fea, tmp_path):
    copyright_file(tmp_path, "a", "Format: https://www.debian.org/doc/packaging-manuals/"
                   "copyright-format/1.0/\n\nFiles: *\nCopyright: 2004 Someone\n"
                   "License:   Expat\n\nFiles: fonts/*\nLicense: OFL\n")
    assert fea.licence_of("a", str(tmp_path))[0] == "Expat"
    copyright_file(tmp_path, "b", "License:\n  This program is free software; ... under the "
                   "terms of the GNU General Public License version 2\n  or at your option "
                   "any later version.\n")
    assert fea.licence_of("b", str(tmp_path))[0] == "GPL-2+"
    copyright_file(tmp_path, "c", "All rights reserved.\n")
    with pytest.raises(SystemExit, match="no licence recognised"):
        fea.licence_of("c", str(tmp_path))


def test_load_set_composites_alpha_over_white(fea, tmp_path):
    pics = tmp_path / "cache" / "pictures"
    pics.mkdir(parents=True)
    bgra = np.zeros((8, 10, 4), np.uint8)
    bgra[..., 2] = 200                      # red, half transparent on the left half
    bgra[:, :5, 3], bgra[:, 5:, 3] = 0, 255
    cv2.imwrite(str(pics / "s.png"), bgra)
    cv2.imwrite(str(pics / "t.png"), np.full((6, 6, 3), 7, np.uint8))
    credits = [{"name": "s", "file": "s.png", "role": "eval"},
               {"name": "t", "file": "t.png", "role": "train"}]
    (tmp_path / "cache" / "credits.json").write_text(json.dumps(credits))
    (name, bgr, alpha, _), = fea.load_set("eval")
    assert name == "s" and alpha is not None and bgr.shape == (8, 10, 3)
    assert bgr[0, 0].tolist() == [255, 255, 255] and bgr[0, 9].tolist() == [0, 0, 200]
    (name, bgr, alpha, _), = fea.load_set("train")
    assert name == "t" and alpha is None and bgr[0, 0].tolist() == [7, 7, 7]


def test_missing_cache_says_what_to_run(fea):
    with pytest.raises(FileNotFoundError, match="fetch_eval_art.py"):
        fea.load_set("eval")
