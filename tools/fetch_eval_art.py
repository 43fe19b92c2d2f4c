"""Real drawn and painted character art, and natural colour photos, from Debian packages: a2r_lite's
drawings set and its extra training photos.

    python tools/fetch_eval_art.py                 # fetch into the cache, print the credits
    python tools/fetch_eval_art.py --list          # what is cached, with each picture's licence

The pictures never enter git: `apt-get download PKG` (Debian's ordinary client, run once per
package) into CACHE/debs, `dpkg -x` into CACHE/x, then the chosen files are copied to
CACHE/pictures with CACHE/credits.json (package, version, path, licence as the package's
copyright file states it, role). CACHE defaults to ~/.cache/a2r_edge/eval_art
(A2R_EVAL_ART overrides it).

Roles: "eval" pictures are measured by tools/evaluate_a2r_lite.py (artefact measures of
a2r_edge.quality.artefacts) and never trained on; "check" pictures (other characters of the
same packages) are measured the same way to choose a package's settings, so that the "eval"
figures are not what is chosen on; "train" pictures carry a licence that allows
training and redistributing the weights (public domain, CC0, CC BY, MIT/Expat, BSD) and are
used by tools/train_a2r_lite.py --drawings; GPL art is evaluation only. "photo" pictures are
natural colour photos under such a licence, read per file (a copyright file's own stanza for
the file, or the upstream README beside the file inside the package), for
tools/train_a2r_lite.py --extra-photos 2; the credit keeps the author and source.

load_set(role) -> [(name, bgr uint8, alpha uint8 or None, credit dict)]: pictures with alpha
are composited over white (as a sprite is usually shown); alpha is returned so that the
measures can ignore the transparent background.
"""
import argparse
import fnmatch
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

import cv2
import numpy as np

CACHE = os.environ.get("A2R_EVAL_ART", os.path.expanduser("~/.cache/a2r_edge/eval_art"))

WESNOTH = "wesnoth-1.16-data"
WESNOTH_IMG = "usr/share/games/wesnoth/1.16/data/core/images/"
QUESTION = "renpy-thequestion"
QUESTION_IMG = "usr/share/games/renpy/the_question/game/images/"
DEMO = "renpy-demo"
DEMO_IMG = "usr/share/games/renpy/demo/game/images/"
NAEV = "naev-data"
NAEV_IMG = "usr/share/naev/dat/gfx/portraits/"

# (package, path inside the package, short name, kind): chosen for variety: painted portraits
# (faces and busts, dark and bright, alpha), small pixel sprites, a landscape painting (the
# top-edge case), anime-style sprites (alpha, half bodies), an anime background.
EVAL = [
    (WESNOTH, WESNOTH_IMG + "portraits/humans/mage+female.png", "wes_mage_f", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/humans/necromancer.png", "wes_necromancer", "painted portrait, dark, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/elves/lady.png", "wes_elf_lady", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/elves/sorceress.png", "wes_sorceress", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/dwarves/lord.png", "wes_dwarf_lord", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/humans/peasant.png", "wes_peasant", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/undead/lich.png", "wes_lich", "painted portrait, dark, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/humans/mage-white.png", "wes_white_mage", "painted portrait, bright, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/merfolk/priestess.png", "wes_mer_priestess", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/orcs/grunt.png", "wes_orc_grunt", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "units/human-loyalists/spearman.png", "wes_sprite_spearman", "72 px pixel sprite, full body, alpha"),
    (WESNOTH, WESNOTH_IMG + "units/elves-wood/fighter.png", "wes_sprite_elf", "72 px pixel sprite, full body, alpha"),
    (WESNOTH, WESNOTH_IMG + "story/landscape-castle.jpg", "wes_landscape_castle", "landscape painting"),
    (QUESTION, QUESTION_IMG + "sylvie green normal.png", "sylvie_green_normal", "anime sprite, alpha"),
    (QUESTION, QUESTION_IMG + "sylvie blue giggle.png", "sylvie_blue_giggle", "anime sprite, alpha"),
    (QUESTION, QUESTION_IMG + "bg meadow.jpg", "question_bg_meadow", "anime background"),
]
# Check drawings: other characters and pictures of the same packages, for choosing a
# package's settings (tools/calibrate_gate.py) without looking at the "eval" pictures; never
# trained on. The five by the eval orc grunt's painter (LordBob, per the portraits' ARTISTS file),
# near-photographic paintings, were added to make the check set as strict as the eval set on that
# kind; they did not (the gate opens less on them than on the orc: docs/a2r_lite_training.md 6.5).
CHECK = [
    (WESNOTH, WESNOTH_IMG + "portraits/drakes/burner.png", "wes_drake_burner", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/dwarves/runemaster.png", "wes_dwarf_runemaster", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/elves/druid.png", "wes_elf_druid", "painted portrait, bright, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/goblins/impaler.png", "wes_goblin_impaler", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/humans/bandit.png", "wes_bandit", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/humans/dark-adept+female.png", "wes_dark_adept_f", "painted portrait, dark, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/merfolk/enchantress.png", "wes_mer_enchantress", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/nagas/fighter.png", "wes_naga_fighter", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/saurians/augur.png", "wes_saurian_augur", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/trolls/troll-shaman.png", "wes_troll_shaman", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/undead/ghost.png", "wes_ghost", "painted portrait, dark, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/woses/wose.png", "wes_wose", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/orcs/archer.png", "wes_orc_archer", "painted portrait, dark, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/orcs/crossbowman.png", "wes_orc_crossbowman", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/humans/spearman.png", "wes_spearman", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/humans/woodsman.png", "wes_woodsman", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "portraits/humans/sergeant.png", "wes_sergeant", "painted portrait, alpha"),
    (WESNOTH, WESNOTH_IMG + "units/human-loyalists/bowman.png", "wes_sprite_bowman", "72 px pixel sprite, full body, alpha"),
    (WESNOTH, WESNOTH_IMG + "units/human-magi/mage.png", "wes_sprite_mage", "72 px pixel sprite, full body, alpha"),
    (WESNOTH, WESNOTH_IMG + "units/orcs/grunt.png", "wes_sprite_grunt", "72 px pixel sprite, full body, alpha"),
    (WESNOTH, WESNOTH_IMG + "units/dwarves/fighter.png", "wes_sprite_dwarf", "72 px pixel sprite, full body, alpha"),
    (WESNOTH, WESNOTH_IMG + "story/landscape-coast.jpg", "wes_landscape_coast", "landscape painting"),
    (QUESTION, QUESTION_IMG + "sylvie blue surprised.png", "sylvie_blue_surprised", "anime sprite, alpha"),
    (QUESTION, QUESTION_IMG + "sylvie green smile.png", "sylvie_green_smile", "anime sprite, alpha"),
] + [
    # Naev's digitally painted, semi-realistic busts (200 x 150, blurred city lights behind): the
    # kind of picture on which the gate opens as far as on the eval orc grunt. Every 20th of the
    # package's 173 portraits (placeholders left out), from the 11th, in sorted path order.
    (NAEV, NAEV_IMG + rel, "naev_" + os.path.splitext(os.path.basename(rel))[0],
     "painted portrait, 200 x 150, dark background")
    for rel in ("dvaered/dv_civilian_f9.png", "dvaered/dv_military_f8.png",
                "empire/empire_mil_m4.png", "neutral/female3.png", "neutral/miner1.png",
                "neutral/unique/mia.png", "pirate/pirate14.png", "sirius/sirius_fyrra_m5.png",
                "zalek/unique/logan.png")
]
# Training drawings: Expat (MIT) by the package's copyright file; other characters than the
# evaluation's anime sprites (Eileen and Lucy of the Ren'Py demo).
TRAIN = [
    (DEMO, DEMO_IMG + "eileen happy.png", "eileen_happy", "anime sprite, alpha"),
    (DEMO, DEMO_IMG + "eileen vhappy.png", "eileen_vhappy", "anime sprite, alpha"),
    (DEMO, DEMO_IMG + "eileen concerned.png", "eileen_concerned", "anime sprite, alpha"),
    (DEMO, DEMO_IMG + "lucy happy.png", "lucy_happy", "anime sprite, alpha"),
    (DEMO, DEMO_IMG + "lucy mad.png", "lucy_mad", "anime sprite, alpha"),
    (QUESTION, QUESTION_IMG + "bg club.jpg", "question_bg_club", "anime background"),
    (QUESTION, QUESTION_IMG + "bg lecturehall.jpg", "question_bg_lecturehall", "anime background"),
    (QUESTION, QUESTION_IMG + "bg uni.jpg", "question_bg_uni", "anime background"),
]
TRAIN_LICENCES = ("Expat", "MIT", "BSD", "CC0", "CC-BY-3.0", "CC-BY-4.0", "public-domain")

# Training photos. LOMIRI: wallpapers, each with its own stanza in the machine-readable copyright
# file (the package's other picture, a colour gradient, is left out). GCOMPRIS: the educational
# suite's photos of monuments and animals (Wikimedia Commons), packed in Qt resource bundles with
# an upstream README per folder giving each file's author, source and licence; Debian's copyright
# file for these names describes older pictures, so the README is what is read.
LOMIRI = "lomiri-wallpapers-16.04"
LOMIRI_IMG = "usr/share/backgrounds/"
LOMIRI_PHOTOS = ["aitzgorri_by_Aitzol_Berasategi.jpg", "friends_by_Aitzol_Berasategi.jpg",
                 "life_by_Aitzol_Berasategi.jpg", "picosdeeuropa_by_Aitzol_Berasategi.jpg",
                 "Picture_0B_by_freespace.jpg", "Picture_1A_by_freespace.jpg",
                 "seeding_by_Clements_Engelhardt.jpg", "sunset_by_Aitzol_Berasategi.jpg",
                 "Wine_by_Jakkub_Mede.jpg"]
GCOMPRIS = "gcompris-qt-data"
GCOMPRIS_RCC = "usr/share/gcompris-qt/rcc/"
GCOMPRIS_PHOTOS = ["explore_monuments", "explore_world_animals", "explore_farm_animals"]

# Packages whose machine-readable copyright file gives licences per file: (installed folder, the
# same folder as the file's Files patterns name it in the source tree), for file_stanza.
SOURCE_ROOTS = {NAEV: ("usr/share/naev/", "./"), LOMIRI: (LOMIRI_IMG, "16.04/")}


def source_path(pkg, rel):
    """The installed file ``rel`` of a SOURCE_ROOTS package as its copyright file names it."""
    installed, source = SOURCE_ROOTS[pkg]
    if not rel.startswith(installed):
        raise ValueError(f"{rel} is not under {pkg}'s {installed}")
    return source + rel[len(installed):]


def photo_licence(text: str) -> str | None:
    """A licence statement that allows training the shipped weights (public domain, CC0, CC BY;
    not BY-SA, NC or ND) spelt as "public-domain", "CC0", "CC-BY" or "CC-BY-<version>"; else
    None."""
    key = re.sub(r"[\s_-]", "", text).upper()
    if key.startswith("PUBLICDOMAIN"):
        return "public-domain"
    if key.startswith("CC0"):
        return "CC0"
    m = re.fullmatch(r"CCBY(\d\.\d)?", key)
    return None if m is None else f"CC-BY-{m.group(1)}" if m.group(1) else "CC-BY"


def paragraphs(text: str) -> list[dict]:
    """The blank-line separated paragraphs of a copyright file or README of `Field: value`
    lines, a field's continuation lines (indented, or bare lines after `Files:`) joined to it
    with newlines."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        fields, key = {}, None
        for line in block.splitlines():
            m = re.match(r"([A-Za-z-]+):\s*(.*)$", line)
            if m:
                key = m.group(1).lower()
                fields[key] = m.group(2).strip()
            elif key and line.strip():
                fields[key] += "\n" + line.strip()
        if fields:
            out.append(fields)
    return out


def file_stanza(text: str, source_path: str) -> dict | None:
    """The paragraph of a machine-readable copyright file that governs ``source_path`` (the
    file's path in the source tree): the last whose Files patterns match it, or None."""
    hit = None
    for para in paragraphs(text):
        if any(fnmatch.fnmatchcase(source_path, p) for p in para.get("files", "").split()):
            hit = para
    return hit


def rcc_entries(path: str) -> dict[str, bytes]:
    """{path: bytes} of the files in a Qt resource bundle (.rcc, format 1-3: a tree of nodes
    whose files are stored plain or zlib-compressed behind a 4-byte size)."""
    with open(path, "rb") as fh:
        b = fh.read()
    if b[:4] != b"qres":
        raise SystemExit(f"{path}: not a Qt resource bundle")
    version, tree, data, names = struct.unpack(">IIII", b[4:20])
    node = 14 if version == 1 else 22

    def name(off):
        n = struct.unpack(">H", b[names + off:names + off + 2])[0]
        return b[names + off + 6:names + off + 6 + 2 * n].decode("utf-16-be")

    out, todo = {}, [(0, "")]
    while todo:
        i, prefix = todo.pop()
        o = tree + i * node
        noff, flags = struct.unpack(">IH", b[o:o + 6])
        here = f"{prefix}/{name(noff)}" if i else ""
        if flags & 2:   # a folder: its children's count and first index
            count, first = struct.unpack(">II", b[o + 6:o + 14])
            todo += [(first + k, here) for k in range(count)]
            continue
        at = data + struct.unpack(">I", b[o + 10:o + 14])[0]
        raw = b[at + 4:at + 4 + struct.unpack(">I", b[at:at + 4])[0]]
        if flags & 4:
            raise SystemExit(f"{path}: {here} is zstd-compressed; add a reader")
        out[here] = zlib.decompress(raw[4:]) if flags & 1 else raw
    return out


def readme_photos(entries: dict[str, bytes]) -> list[tuple[str, dict]]:
    """[(path, README paragraph)] of the .webp/.jpg/.png files of a resource bundle that a README
    in their folder (or one above) gives a licence photo_licence accepts."""
    found = []
    for readme, text in entries.items():
        if os.path.basename(readme) != "README":
            continue
        folder = os.path.dirname(readme)
        for para in paragraphs(text.decode("utf-8", "replace")):
            if photo_licence(para.get("license", "")) is None:
                continue
            for rel in para.get("files", "").split():
                path = f"{folder}/{rel}"
                if path in entries and rel.lower().endswith((".webp", ".jpg", ".png")):
                    found.append((path, para))
    return sorted(found, key=lambda item: item[0])


def _run(cmd, cwd=None):
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def unpacked(pkg):
    """Folder of PKG's unpacked .deb (downloaded with apt-get on first use)."""
    root = os.path.join(CACHE, "x", pkg)
    if os.path.isdir(root):
        return root
    debs = os.path.join(CACHE, "debs")
    os.makedirs(debs, exist_ok=True)
    found = glob.glob(os.path.join(debs, f"{pkg}_*.deb"))
    if not found:
        _run(["apt-get", "download", pkg], cwd=debs)
        found = glob.glob(os.path.join(debs, f"{pkg}_*.deb"))
    if not found:
        raise SystemExit(f"apt-get download {pkg} gave no .deb in {debs}")
    shutil.rmtree(root + ".tmp", ignore_errors=True)  # a run stopped half-way
    os.makedirs(os.path.dirname(root), exist_ok=True)  # dpkg -x makes the last folder only
    _run(["dpkg", "-x", found[0], root + ".tmp"])
    os.replace(root + ".tmp", root)
    return root


def version_of(pkg):
    deb = glob.glob(os.path.join(CACHE, "debs", f"{pkg}_*.deb"))
    return os.path.basename(deb[0]).split("_")[1].replace("%3a", ":") if deb else "?"


def licence_of(pkg, root, rel):
    """The licence the package's copyright file gives for its file ``rel`` (installed path).
    Wesnoth's file is free text (GPL-2+ for all of it); Ren'Py's is machine-readable, `Files: *`
    -> Expat (the images fall under `*`: no other stanza names them); Naev's is machine-readable
    with stanzas per file (SOURCE_ROOTS): the one that governs ``rel``."""
    path = os.path.join(root, "usr/share/doc", pkg, "copyright")
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    if pkg in SOURCE_ROOTS:
        para = file_stanza(text, source_path(pkg, rel))
        if para is None or not para.get("license"):
            raise SystemExit(f"{path}: no stanza gives {rel} a licence")
        return para["license"].split("\n")[0], path
    m = re.search(r"^Files:\s*\*\s*\n(?:.+\n)*?License:\s*(\S+)", text, re.M)
    if m:
        return m.group(1), path
    if re.search(r"GNU General Public License version 2\s+or at your option any later", text):
        return "GPL-2+", path
    raise SystemExit(f"{path}: no licence recognised; read it and add a rule")


def fetch():
    pics = os.path.join(CACHE, "pictures")
    os.makedirs(pics, exist_ok=True)
    credits = []
    for role, items in (("eval", EVAL), ("check", CHECK), ("train", TRAIN)):
        for pkg, rel, name, kind in items:
            root = unpacked(pkg)
            lic, cfile = licence_of(pkg, root, rel)
            if role == "train" and lic not in TRAIN_LICENCES:
                raise SystemExit(f"{name}: {lic} does not allow training the shipped weights")
            ext = os.path.splitext(rel)[1]
            shutil.copyfile(os.path.join(root, rel), os.path.join(pics, name + ext))
            credits.append({"name": name, "file": name + ext, "role": role, "kind": kind,
                            "package": pkg, "version": version_of(pkg), "path": "/" + rel,
                            "licence": lic, "copyright_file": "/usr/share/doc/" + pkg + "/copyright"})
    credits += fetch_photos(pics)
    with open(os.path.join(CACHE, "credits.json"), "w") as fh:
        json.dump(credits, fh, indent=1)
    return credits


def fetch_photos(pics):
    """Copy the "photo" role's pictures into ``pics``; their credits, each with the licence,
    author and source its own stanza gives."""
    credits, seen = [], set()

    def keep(name, ext, blob, pkg, path, para, licence_file):
        if name in seen:
            raise SystemExit(f"two training photos named {name}")
        seen.add(name)
        with open(os.path.join(pics, name + ext), "wb") as fh:
            fh.write(blob)
        credits.append({"name": name, "file": name + ext, "role": "photo",
                        "kind": "natural colour photo", "package": pkg,
                        "version": version_of(pkg), "path": path,
                        "licence": photo_licence(para["license"]),
                        "author": para.get("copyright", ""), "source": para.get("source", ""),
                        "copyright_file": licence_file})

    root = unpacked(LOMIRI)
    cfile = f"/usr/share/doc/{LOMIRI}/copyright"
    with open(root + cfile, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    for fname in LOMIRI_PHOTOS:
        rel = LOMIRI_IMG + fname
        para = file_stanza(text, source_path(LOMIRI, rel))
        if para is None or photo_licence(para.get("license", "")) is None:
            raise SystemExit(f"{fname}: {cfile} gives it no licence that allows training")
        with open(os.path.join(root, rel), "rb") as fh:
            keep("lomiri_" + os.path.splitext(fname)[0].lower(), ".jpg", fh.read(), LOMIRI,
                 "/" + rel, para, cfile)
    root = unpacked(GCOMPRIS)
    for bundle in GCOMPRIS_PHOTOS:
        rcc = GCOMPRIS_RCC + bundle + ".rcc"
        entries = rcc_entries(os.path.join(root, rcc))
        for path, para in readme_photos(entries):
            stem, ext = os.path.splitext(os.path.basename(path))
            keep(f"gcompris_{stem}", ext, entries[path], GCOMPRIS, f"/{rcc}:{path}", para,
                 f"/{rcc}:{os.path.dirname(path)}/README")
    return credits


def credits_list():
    path = os.path.join(CACHE, "credits.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} missing: run python tools/fetch_eval_art.py first")
    with open(path) as fh:
        return json.load(fh)


def load_set(role="eval"):
    """[(name, bgr uint8 HxWx3, alpha uint8 HxW or None, credit)] of the cached role's pictures;
    alpha pictures composited over white."""
    return [read(c) for c in credits_list() if c["role"] == role]


def load_picture(name):
    """(name, bgr, alpha, credit) of one cached picture, as load_set gives it."""
    found = [c for c in credits_list() if c["name"] == name]
    if not found:
        raise FileNotFoundError(f"{name} is not in the cache: run tools/fetch_eval_art.py")
    return read(found[0])


def read(credit):
    """(name, bgr uint8 HxWx3, alpha uint8 HxW or None, credit) of the cached picture ``credit``
    names, alpha composited over white."""
    img = cv2.imread(os.path.join(CACHE, "pictures", credit["file"]), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise FileNotFoundError(f"{credit['file']} unreadable: run tools/fetch_eval_art.py again")
    alpha = None
    if img.ndim == 2:
        img = cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    elif img.shape[2] == 4:
        from a2r_edge.picture.io import WHITE, flatten   # as the engine writes BGRA to .jpg
        alpha = img[..., 3].copy()
        img = flatten(img, WHITE)
    return credit["name"], np.ascontiguousarray(img[..., :3]), alpha, credit


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--list", action="store_true", help="only list the cached set")
    args = ap.parse_args()
    credits = credits_list() if args.list else fetch()
    for c in credits:
        print(f"{c['role']:5s} {c['name']:24s} {c['licence']:7s} {c['package']} "
              f"{c['version']} {c['path']}")
    print(f"{len(credits)} pictures in {os.path.join(CACHE, 'pictures')}", file=sys.stderr)


if __name__ == "__main__":
    main()
