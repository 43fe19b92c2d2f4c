"""tools/fetch_eval_art.py without the network: the licence read from a package's copyright file,
the per-file licences of the training photos (a copyright file's stanza, a README inside a Qt
resource bundle), and the cached set loaded with alpha composited over white."""
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
    assert fea.licence_of("a", str(tmp_path), "x.png")[0] == "Expat"
    copyright_file(tmp_path, "b", "License:\n  This program is free software; ... under the "
                   "terms of the GNU General Public License version 2\n  or at your option "
                   "any later version.\n")
    assert fea.licence_of("b", str(tmp_path), "x.png")[0] == "GPL-2+"
    copyright_file(tmp_path, "c", "All rights reserved.\n")
    with pytest.raises(SystemExit, match="no licence recognised"):
        fea.licence_of("c", str(tmp_path), "x.png")


def test_licence_of_reads_the_stanza_of_the_file(fea, tmp_path):
    """A package in SOURCE_ROOTS: the last stanza whose Files patterns match the file's path in
    the source tree governs it (Naev: most portraits GPL-3+, a listed few GPL-3)."""
    copyright_file(tmp_path, fea.NAEV, "Files: *\nLicense: GPL-3+\n\n"
                   "Files: ./dat/gfx/portraits/a.png\n ./dat/gfx/portraits/b.png\n"
                   "License: GPL-3\n")
    root, lic = str(tmp_path), lambda rel: fea.licence_of(fea.NAEV, root, rel)[0]
    assert lic(fea.NAEV_IMG + "b.png") == "GPL-3"
    assert lic(fea.NAEV_IMG + "c.png") == "GPL-3+"
    assert all(rel.startswith(fea.NAEV_IMG) for pkg, rel, *_ in fea.CHECK if pkg == fea.NAEV)
    assert fea.source_path(fea.LOMIRI, fea.LOMIRI_IMG + "x.jpg") == "16.04/x.jpg"
    with pytest.raises(ValueError, match="not under"):
        fea.source_path(fea.NAEV, "usr/share/doc/naev-data/copyright")


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
    name, one, alpha, _ = fea.load_picture("s")   # one picture by name, read the same way
    assert name == "s" and alpha is not None and one[0, 0].tolist() == [255, 255, 255]
    with pytest.raises(FileNotFoundError, match="not in the cache"):
        fea.load_picture("u")


def test_missing_cache_says_what_to_run(fea):
    with pytest.raises(FileNotFoundError, match="fetch_eval_art.py"):
        fea.load_set("eval")


@pytest.mark.parametrize("text, want", [
    ("Public Domain", "public-domain"), ("public-domain", "public-domain"),
    ("CC0-1.0", "CC0"), ("CC-BY-4.0", "CC-BY-4.0"), ("CC-BY 2.0", "CC-BY-2.0"),
    ("CC BY", "CC-BY"), ("CC-BY-SA 4.0", None), ("CC-BY-NC-3.0", None), ("GPLv3", None),
    ("", None)])
def test_photo_licence_takes_only_what_allows_training_the_weights(fea, text, want):
    assert fea.photo_licence(text) == want


def test_file_stanza_is_the_last_paragraph_matching_the_source_path(fea):
    text = ("Format: x\n\nFiles: *\nLicense: Expat\n\nFiles: 16.04/a.jpg\n  16.04/b*.jpg\n"
            "Copyright: Someone,\n  2018\nLicense: CC-BY-4.0\n\nFiles: debian/*\n"
            "License: GPL-2+\n")
    assert fea.file_stanza(text, "16.04/a.jpg") == {
        "files": "16.04/a.jpg\n16.04/b*.jpg", "copyright": "Someone,\n2018",
        "license": "CC-BY-4.0"}
    assert fea.file_stanza(text, "16.04/b2.jpg")["license"] == "CC-BY-4.0"
    assert fea.file_stanza(text, "16.04/c.jpg")["license"] == "Expat"      # only `*` matches
    assert fea.file_stanza(text, "debian/rules")["license"] == "GPL-2+"
    assert fea.file_stanza("Files: x/*\nLicense: MIT\n", "y/a.jpg") is None


def make_rcc(files: dict, compressed=()) -> bytes:
    """A Qt resource bundle (format 1) of one folder "res" holding ``files`` ({name: bytes}),
    those in ``compressed`` stored zlib-compressed."""
    import struct
    import zlib
    names, name_at = b"", {}
    for n in ["res", *files]:
        name_at[n] = len(names)
        names += struct.pack(">HI", len(n), 0) + n.encode("utf-16-be")
    data, tree = b"", struct.pack(">IHII", 0, 2, 1, 1)               # the root: 1 child at 1
    tree += struct.pack(">IHII", name_at["res"], 2, len(files), 2)    # res: children from 2
    for n, blob in files.items():
        stored = struct.pack(">I", len(blob)) + zlib.compress(blob) if n in compressed else blob
        tree += struct.pack(">IHHHI", name_at[n], int(n in compressed), 0, 0, len(data))
        data += struct.pack(">I", len(stored)) + stored
    head = 20
    return (b"qres" + struct.pack(">IIII", 1, head, head + len(tree),
                                  head + len(tree) + len(data)) + tree + data + names)


def test_readme_photos_reads_a_resource_bundle_and_keeps_the_allowed_licences(fea, tmp_path):
    readme = ("Copyright: Drawn by someone\nLicense: CC-BY-SA 4.0\nFiles:\nmap.webp\n\n"
              "Copyright: A. Photographer\nLicense: Public Domain\nSource: https://x/y.jpg\n"
              "Files:\nlion.webp\nmissing.webp\n\nCopyright: B\nLicense: CC0-1.0\nFiles:\n"
              "cow.webp\n")
    files = {"README": readme.encode(), "map.webp": b"M" * 50, "lion.webp": b"L" * 300,
             "cow.webp": b"C" * 7}
    path = tmp_path / "b.rcc"
    path.write_bytes(make_rcc(files, compressed={"README", "lion.webp"}))
    entries = fea.rcc_entries(str(path))
    assert entries == {f"/res/{n}": blob for n, blob in files.items()}
    got = fea.readme_photos(entries)
    assert [(p, para["license"], para.get("source")) for p, para in got] == [
        ("/res/cow.webp", "CC0-1.0", None), ("/res/lion.webp", "Public Domain", "https://x/y.jpg")]
    path.write_bytes(b"PK\x03\x04 not a bundle")
    with pytest.raises(SystemExit, match="not a Qt resource bundle"):
        fea.rcc_entries(str(path))
