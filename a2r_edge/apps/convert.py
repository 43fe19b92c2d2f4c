"""``python -m a2r_edge convert``: pictures in, converted pictures out.

Inputs are files or folders (their png, jpg, jpeg, webp, bmp files, not recursive). With one
input file, -o names the output file (or an existing folder); otherwise -o is a folder, created
if needed, and each output keeps its input's name. Every output is written to a temporary file
in the target folder and renamed into place, so an interrupted run never leaves half a picture;
an output equal to an input is refused unless --overwrite. A bad or unreadable input is reported
in one line and skipped; the exit code is then 2, and the summary lists every failure at the
end. --resume skips outputs that already exist and are complete (decodable, expected size).
Picture headers declaring more than A2R_MAX_PIXELS pixels are refused before decoding.

This module owns the files (listing, naming, --resume, atomic writes, failure report); a
converter only turns inputs into output bytes: ``convert_here`` (one Engine, this machine) or,
with --ray, ``distributed.convert_on_ray`` (Engine actors on a Ray cluster, same bytes).
"""
from __future__ import annotations

import argparse
import os
import struct
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".bmp")


class InputError(ValueError):
    """A picture that cannot be read: one line for the user."""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "convert", help="convert anime-style pictures into photo-realistic ones",
        description="Convert anime-style pictures into photo-realistic ones with the bundled "
                    "model (or --model). Outputs are written atomically; bad inputs are "
                    "reported and skipped (exit code 2).")
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="picture files or folders (" + ", ".join(EXTENSIONS) + ")")
    p.add_argument("-o", "--output", required=True, metavar="OUTPUT",
                   help="output file (one input file) or folder (created if missing)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu", "split"),
                   help="where to run (default: auto = the plan's choice)")
    p.add_argument("--model", metavar="PATH",
                   help="a model package folder or a plain ONNX image-to-image file "
                        "(default: the bundled a2r_lite)")
    p.add_argument("--style", metavar="REF_PHOTO",
                   help="a reference photo: the picture's colours move towards its colours "
                        "(--style-colour), and its statistics steer the AdaIN stage")
    p.add_argument("--style-colour", type=style_colour, metavar="S",
                   help="with --style: the share of the way each picture's colour mean and std "
                        "move to the reference's (0: its own colours, 1: the reference's; "
                        "default: half-way)")
    p.add_argument("--roi", choices=("face",),
                   help="convert only the character's face region, pasted back feathered "
                        "(needs the optional animeface package; no face: the whole picture)")
    p.add_argument("--side-by-side", action="store_true",
                   help="write input | output next to each other")
    p.add_argument("--overwrite", action="store_true",
                   help="allow an output path that is also an input")
    p.add_argument("--resume", action="store_true",
                   help="skip inputs whose output already exists and is complete (a decodable "
                        "picture of the expected size): continues an interrupted folder run")
    p.add_argument("--ray", nargs="?", const="", type=_ray_address, metavar="ADDRESS",
                   help="convert on a Ray cluster (needs the [ray] extra), this machine being "
                        "one of its nodes: the Ray at ADDRESS (host:port or auto), or without "
                        "one as ray.init() does (RAY_ADDRESS, else a new local Ray); put --ray "
                        "after the inputs or write --ray=ADDRESS. Outputs are the same files a "
                        "local run writes")
    p.add_argument("--strict", action="store_true",
                   help="refuse a model with a node the native executor cannot run (and a GPU "
                        "stage that fails) instead of running it on onnxruntime (or the CPU)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def style_colour(text: str) -> float:
    """--style-colour S: a number in [0, 1] (argparse type, shared with the video command)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"--style-colour must be a number in [0, 1], got {text!r}")
    return value


def check_style_options(args: argparse.Namespace) -> None:
    """--style-colour means nothing without --style: refused rather than ignored."""
    if args.style is None and args.style_colour is not None:
        raise ValueError("--style-colour needs --style REF_PHOTO")


def _ray_address(value: str) -> str:
    from .distributed import is_address
    if value and not is_address(value):  # most likely an INPUT after a bare --ray ("": none)
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a Ray address (host:port, auto or local); "
            f"put --ray after the inputs or write --ray=ADDRESS")
    return value


def declared_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) a PNG, JPEG, BMP or WebP header declares, None when not found. Read
    before decoding so that a decompression bomb is refused before OpenCV allocates for it."""
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
        return struct.unpack(">II", head[16:24])
    if head[:2] == b"BM" and len(head) >= 26:
        w, h = struct.unpack("<ii", head[18:26])
        return abs(w), abs(h)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        kind, body = head[12:16], head[20:]
        if kind == b"VP8X" and len(body) >= 10:
            return (int.from_bytes(body[4:7], "little") + 1,
                    int.from_bytes(body[7:10], "little") + 1)
        if kind == b"VP8L" and len(body) >= 5:
            bits = int.from_bytes(body[1:5], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        if kind == b"VP8 " and len(body) >= 10:
            w, h = struct.unpack("<HH", body[6:10])
            return w & 0x3FFF, h & 0x3FFF
        return None
    if head[:2] == b"\xff\xd8":  # JPEG: walk the segments to the first SOFn
        i = 2
        while i + 9 <= len(head) and head[i] == 0xFF:
            marker = head[i + 1]
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                h, w = struct.unpack(">HH", head[i + 5:i + 9])
                return w, h
            i += 2 + struct.unpack(">H", head[i + 2:i + 4])[0]
    return None


def read_bytes(path: Path) -> np.ndarray:
    """The file's bytes (uint8); InputError when it cannot be read or is empty."""
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if data.size == 0:
        raise InputError(f"{path}: empty file")
    return data


def decode_picture(data: np.ndarray, path: Path) -> np.ndarray:
    """A file's bytes (``read_bytes``) -> uint8 picture as OpenCV reads it; ``path`` names the
    picture in errors. InputError for what cannot be decoded or is too large."""
    import cv2

    from .. import _settings
    size, limit = declared_size(data[:1 << 16].tobytes()), _settings.get("A2R_MAX_PIXELS")
    if size is not None and size[0] * size[1] > limit:
        raise InputError(f"{path}: declares {size[0]}x{size[1]} pixels, more than the limit "
                         f"A2R_MAX_PIXELS={limit} (refused before decoding)")
    try:
        img = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
    except cv2.error as exc:  # e.g. OpenCV's own CV_IO_MAX_IMAGE_PIXELS check
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else "decoder error"
        raise InputError(f"{path}: OpenCV refused to decode it: {reason}") from None
    if img is None:
        raise InputError(f"{path}: not a picture OpenCV can decode (corrupt, truncated, or "
                         f"another format)")
    if img.dtype == np.uint16:  # 16-bit PNG: keep the top 8 bits' worth, rounded
        img = ((img.astype(np.uint32) + 128) // 257).astype(np.uint8)
    if img.dtype != np.uint8:
        raise InputError(f"{path}: {img.dtype} pictures are not supported (8-bit or 16-bit only)")
    return img


def read_picture(path: Path) -> np.ndarray:
    return decode_picture(read_bytes(path), path)


def encode_picture(path: Path, img: np.ndarray) -> bytes:
    """``img`` encoded in the format ``path``'s extension names (PNG without one)."""
    import cv2
    ext = path.suffix.lower() or ".png"
    ok, buf = cv2.imencode(ext, img)
    if not ok:
        raise OSError(f"{path}: OpenCV cannot encode {ext} pictures")
    return buf.tobytes()


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return mask


# The mode open() would give a new file; mkstemp's temporary file is 0600 (owner only).
FILE_MODE = 0o666 & ~_umask()


def write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file beside ``path``, then rename into place (never half a file
    under the final name), with the permissions a newly created file gets."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def collect_inputs(items: list[str]) -> tuple[list[Path], list[str]]:
    """(picture files in order, error lines for inputs that do not exist)."""
    files, errors = [], []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(q for q in p.iterdir() if q.is_file() and q.suffix.lower() in EXTENSIONS)
            if not found:
                errors.append(f"{p}: folder holds no {'/'.join(EXTENSIONS)} pictures")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            errors.append(f"{p}: no such file or folder")
    return files, errors


def output_complete(path: Path, src_shape: tuple, scale, sbs: bool) -> bool:
    """True when ``path`` holds a decodable picture of the size converting a picture of
    ``src_shape`` gives (any size when the model's scale is not declared)."""
    import cv2
    if not path.is_file():
        return False
    try:
        out = cv2.imdecode(np.fromfile(path, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    except (OSError, ValueError, cv2.error):
        return False
    if out is None:
        return False
    if scale is None:
        return True
    h, w = round(src_shape[0] * scale), round(src_shape[1] * scale)
    return out.shape[:2] == (h, 2 * w if sbs else w)


def side_by_side(src: np.ndarray, out: np.ndarray) -> np.ndarray:
    import cv2
    if src.shape[:2] != out.shape[:2]:
        src = cv2.resize(src, (out.shape[1], out.shape[0]), interpolation=cv2.INTER_CUBIC)
    return np.hstack([src.reshape(out.shape), out])


# A picture failing with one of these is reported and skipped (InputError is a ValueError;
# RuntimeError/MemoryError: a conversion refused for its size); anything else is a bug.
CONVERT_ERRORS = (ValueError, OSError, MemoryError, RuntimeError)

# What a converter yields per input: (index into the inputs, the output file's bytes, the
# failure line). (i, bytes, None): converted; (i, None, line): failed; (i, None, None): skipped
# by --resume, its output already complete. Any order; each index once.
Result = tuple[int, "bytes | None", "str | None"]


def failure(src_path: Path, exc: BaseException) -> str:
    """The one line reporting ``exc`` for input ``src_path``; it always names the input."""
    text = str(exc)
    return text if text.startswith(str(src_path)) else f"{src_path}: {type(exc).__name__}: {text}"


def finish(img: np.ndarray, out: np.ndarray, dst_path: Path, sbs: bool) -> bytes:
    """Input ``img`` converted to ``out`` -> the bytes of its output file at ``dst_path``."""
    return encode_picture(dst_path, side_by_side(img, out) if sbs else out)


def plan_outputs(args: argparse.Namespace) -> tuple[list[Path], list[Path], Path, list[str]]:
    """(inputs, their output paths, the path the summary shows, error lines for missing
    inputs). ValueError for a usage error (bad output name, name clashes, an input as output)."""
    files, errors = collect_inputs(args.inputs)
    out_arg = Path(args.output)
    single = len(files) == 1 and len(args.inputs) == 1 and Path(args.inputs[0]).is_file() \
        and not out_arg.is_dir()
    if single:
        if out_arg.suffix.lower() not in EXTENSIONS:
            raise ValueError(f"output {out_arg}: give a picture file name ({', '.join(EXTENSIONS)}) "
                             f"or a folder")
        targets = [out_arg]
        out_arg.parent.mkdir(parents=True, exist_ok=True)
    else:
        if out_arg.exists() and not out_arg.is_dir():
            raise ValueError(f"output {out_arg} is a file; several inputs need an output folder")
        out_arg.mkdir(parents=True, exist_ok=True)
        targets = [out_arg / f.name for f in files]
        names = [t.name for t in targets]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"several inputs would write the same output name: {', '.join(dup)}")
    inputs = {f.resolve() for f in files}
    if not args.overwrite:
        for t in targets:
            if t.resolve() in inputs:
                raise ValueError(f"output {t} is also an input: refusing to overwrite it "
                                 f"(use --overwrite)")
    return files, targets, targets[0] if single else out_arg, errors


def convert_here(args: argparse.Namespace, files: list[Path],
                 targets: list[Path]) -> Iterator[Result]:
    """This machine's converter: one Engine, the inputs in order. The Engine is built now (its
    errors are usage errors); the pictures are converted as the results are taken."""
    from ..engine import Engine

    engine = Engine(args.model, device=args.device, roi=args.roi, strict=args.strict)
    style = read_picture(Path(args.style)) if args.style else None  # any layout the Engine takes

    def results():
        for i, (src_path, dst_path) in enumerate(zip(files, targets)):
            try:
                img = read_picture(src_path)
                if args.resume and output_complete(dst_path, img.shape, engine.model.scale,
                                                   args.side_by_side):
                    yield i, None, None
                    continue
                out = engine.convert(img, style=style, style_colour=args.style_colour)
                yield i, finish(img, out, dst_path, args.side_by_side), None
            except CONVERT_ERRORS as exc:  # one bad picture never stops the others
                yield i, None, failure(src_path, exc)
    return results()


def report(results: Iterable[Result], files: list[Path], targets: list[Path], shown: Path,
           errors: list[str], quiet: bool) -> int:
    """Writes each output as it comes (atomically), prints progress, then the summary with
    every failure (in input order) at the end; returns the exit code (2: something failed)."""
    done, skipped, failed = 0, 0, []
    for i, data, line in results:
        src_path, dst_path = files[i], targets[i]
        if data is not None:
            try:
                write_bytes(dst_path, data)
            except OSError as exc:
                line = failure(src_path, exc)
        if line is not None:
            failed.append((i, line))
            print(f"a2r_edge: error: [{i + 1}/{len(files)}] {line}", file=sys.stderr)
        elif data is None:
            skipped += 1
        else:
            done += 1
            if not quiet:
                print(f"[{i + 1}/{len(files)}] {src_path} -> {dst_path}", file=sys.stderr)
    errors = errors + [line for _, line in sorted(failed)]
    print(f"converted {done} of {len(files)} picture(s)" +
          (f"; skipped {skipped} already complete" if skipped else "") +
          (f"; {len(errors)} failed" if errors else "") +
          (f"; output: {shown}" if done or skipped else ""))
    for line in errors:  # the failures again, together at the end
        print(f"failed: {line}")
    return 2 if errors else 0


def run(args: argparse.Namespace) -> int:
    on_ray = getattr(args, "ray", None) is not None
    if on_ray:
        from . import distributed
        distributed.require_ray()  # before any work: the one line saying what to install
    check_style_options(args)
    files, targets, shown, errors = plan_outputs(args)
    if on_ray:
        results = distributed.convert_on_ray(args, files, targets)
    else:
        results = convert_here(args, files, targets)
    for line in errors:
        print(f"a2r_edge: error: {line}", file=sys.stderr)
    return report(results, files, targets, shown, errors, args.quiet)
