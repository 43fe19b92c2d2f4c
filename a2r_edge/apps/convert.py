"""``python -m a2r_edge convert``: pictures in, converted pictures out.

Inputs are files or folders (their png, jpg, jpeg, webp, bmp files; subfolders with
--recursive, else counted in a note; symbolic links to folders inside them are counted, never
followed). With one input that is not a folder, -o names the output file (or an existing
folder); otherwise -o is a folder, created if needed, and each output keeps its input's name
(and subfolder). Every output is written to a private temporary file in the
target folder and renamed into place, so an interrupted run never leaves half a picture; an
output equal to an input is refused unless --overwrite. A bad or unreadable input is reported
in one line and skipped; the exit code is then 2, and the summary lists every failure at the
end. --resume skips outputs that already exist and are complete (decodable, expected size) and
removes the temporary files a killed run left. Reading within limits: picture/io.py.

This module owns the files (listing, naming, --resume, atomic writes, failure report) and reads
the flags into ``Settings`` once (``settings``); a converter only turns inputs into output bytes
with them: ``convert_here`` (one Engine, this machine) or, with --ray,
``distributed.convert_on_ray`` (Engine actors on a Ray cluster, the same Settings, same bytes).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..picture.io import (CONVERT_ERRORS, Result, decode_picture, failure, finish, is_16_bit,
                          loses_alpha, output_complete, read_bytes, read_picture)
from ..runtime.files import make_folder, not_a_file, stale_temps, write_atomic
from . import slow_start_note

if TYPE_CHECKING:  # loaded late (model/ pulls in the native kernels)
    from ..model.conventions import Conventions

EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
# model.precision.CHOICES, spelled out: importing it here would load the native kernels before
# the settings' errors can be reported (tests/test_precision.py checks that the two agree)
PRECISION_CHOICES = ("fp32", "bf16", "int8", "auto")


def add_style_options(p: argparse.ArgumentParser, item: str) -> None:
    """--style and --style-colour, as convert (item "picture") and video ("frame") take them."""
    p.add_argument("--style", metavar="REF_PHOTO",
                   help=f"a reference photo: each {item}'s colours move towards its colours "
                        "(--style-colour), and its statistics steer the AdaIN stage")
    p.add_argument("--style-colour", type=style_colour, metavar="S",
                   help=f"with --style: the share of the way each {item}'s colour mean and std "
                        "move to the reference's (0: its own colours, 1: the reference's; "
                        "default: half-way)")


def add_strength_option(p: argparse.ArgumentParser) -> None:
    """--strength, as convert and video take it (Engine.convert / stream strength=)."""
    p.add_argument("--strength", type=unit_number("--strength"), metavar="S",
                   help="how much of the conversion to keep: input + S (output - input), "
                        "0 (the input) .. 1 (the model's output); default: the model's own")


def add_placement_options(p: argparse.ArgumentParser) -> None:
    """--device and --precision, as convert and video take them."""
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu", "split"),
                   help="where to run (default: auto = the plan's choice)")
    p.add_argument("--precision", default="fp32", choices=PRECISION_CHOICES,
                   help="convolution precision of the native stages: fp32 (default), bf16, "
                        "int8, or auto (per stage the fastest that keeps the quality guard "
                        "against fp32)")


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
    add_placement_options(p)
    p.add_argument("--model", metavar="PATH",
                   help="a model package folder or a plain ONNX image-to-image file "
                        "(default: the bundled a2r_lite)")
    add_style_options(p, "picture")
    add_strength_option(p)
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
    add_convention_options(p)
    p.add_argument("--strict", action="store_true",
                   help="refuse a model with a node the native executor cannot run (and a GPU "
                        "stage that fails) instead of running it on onnxruntime (or the CPU)")
    p.add_argument("-r", "--recursive", action="store_true",
                   help="also convert the pictures in subfolders of INPUT folders (the outputs "
                        "keep the subfolder layout under OUTPUT; symbolic links to folders are "
                        "not followed)")
    p.add_argument("--background", type=colour, metavar="COLOUR",
                   help="for outputs without transparency (.jpg): the colour transparent parts "
                        "of a BGRA picture are put on, #rrggbb (default: white, with a note)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def add_convention_options(p: argparse.ArgumentParser) -> None:
    """The pixel-convention flags of a plain ONNX --model, as convert and video take them
    (read by ``convention_flags``)."""
    g = p.add_argument_group(
        "pixel conventions of a plain ONNX --model (a package states them in its manifest; "
        "default: RGB in [-1, 1] in and out, NCHW unless the network declares NHWC)")
    g.add_argument("--input-range", choices=("-1,1", "0,1"), metavar="RANGE",
                   help="the network's input range: -1,1 or 0,1 (ESRGAN / Real-CUGAN style)")
    p.dash_values = frozenset({"--input-range", "--output-range"})   # "-1,1" is a value
    g.add_argument("--mean", type=_triple, metavar="R,G,B",
                   help="input mean per channel in [0, 1] units (with --std; instead of "
                        "--input-range), e.g. 0.485,0.456,0.406")
    g.add_argument("--std", type=_triple, metavar="R,G,B", help="input std per channel")
    g.add_argument("--channel-order", choices=("RGB", "BGR"), type=str.upper,
                   help="the network's channel order, input and output (default RGB)")
    g.add_argument("--output-range", choices=("-1,1", "0,1"), metavar="RANGE",
                   help="the network's output range: -1,1 or 0,1 (default: as its input)")
    g.add_argument("--layout", choices=("NCHW", "NHWC"),
                   help="the network's input layout (default: as it declares, NCHW when it "
                        "does not say; NHWC: a TensorFlow/Keras export without "
                        "--inputs-as-nchw)", type=str.upper)
    g.add_argument("--output-layout", choices=("NCHW", "NHWC"),
                   help="the network's output layout (default: as it declares, else as "
                        "--layout)", type=str.upper)


def _triple(text: str) -> tuple[float, float, float]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3:
        raise argparse.ArgumentTypeError(f"expected three numbers R,G,B, got {text!r}")
    return values


def convention_flags(args: argparse.Namespace):
    """The pixel conventions the flags give a plain ONNX --model (None: no flag given)."""
    flags = {k: getattr(args, k, None) for k in ("input_range", "mean", "std", "channel_order",
                                                  "output_range", "layout", "output_layout")}
    if all(v is None for v in flags.values()):
        return None
    from ..model import conventions
    if args.model is None or not Path(args.model).is_file():
        raise ValueError("--input-range, --mean/--std, --channel-order, --output-range and the "
                         "layouts apply to a plain ONNX --model file (a package states them in "
                         "its manifest.json)")
    if (flags["mean"] is None) != (flags["std"] is None):
        raise ValueError("--mean and --std go together: give both")
    if flags["mean"] is not None and flags["input_range"] is not None:
        raise ValueError("give --mean/--std or --input-range, not both")
    fields = {k: v for k, v in flags.items() if v is not None and k not in ("mean", "std")}
    mean, std = flags["mean"] or (0.5,) * 3, flags["std"] or (0.5,) * 3
    if 0.0 in std:
        raise ValueError("--std must not contain 0")
    return conventions.from_fields(fields, mean, std)


def package_of(model: str | None, conventions):
    """The package of --model (None: the bundled one) with ``convention_flags``' conventions
    applied to a plain ONNX file (None: its defaults)."""
    from ..model import package as pkg
    return pkg.resolve(model) if conventions is None else pkg.wrap_onnx(model, conventions)


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything of the command line that decides an output's bytes, read once: how the Engine
    is built (model, conventions, device, roi, strict, precision), how each picture is converted
    (style, style_colour, strength) and written (side_by_side, background), and resume. The
    local converter uses it here; convert --ray ships it to each actor as it is (plain values,
    the style picture as an array), so both honour the same flags."""
    model: str | None               # --model as given (None: the bundled model)
    conventions: Conventions | None = None   # the pixel conventions of a plain ONNX file
    device: str = "auto"
    roi: str | None = None
    strict: bool = False
    precision: str = "fp32"
    style: np.ndarray | None = None  # the reference photo, decoded
    style_colour: float | None = None
    strength: float | None = None
    side_by_side: bool = False
    background: tuple[int, int, int] | None = None
    resume: bool = False

    def package(self):
        """The model package the Engine runs (conventions applied to a plain ONNX file)."""
        return package_of(self.model, self.conventions)

    def engine(self):
        from ..engine import Engine
        return Engine(self.package(), device=self.device, roi=self.roi, strict=self.strict,
                      precision=self.precision)

    def convert(self, engine, img: np.ndarray) -> np.ndarray:
        return engine.convert(img, style=self.style, style_colour=self.style_colour,
                              strength=self.strength)

    def convert_batch(self, engine, imgs: list) -> list:
        return engine.convert_batch(imgs, style=self.style, style_colour=self.style_colour,
                                    strength=self.strength)

    def output_bytes(self, img: np.ndarray, out: np.ndarray, dst_path: Path) -> bytes:
        return finish(img, out, dst_path, self.side_by_side, self.background)


def settings(args: argparse.Namespace) -> Settings:
    """The one place the convert flags become ``Settings`` (usage errors: ValueError)."""
    check_style_options(args)
    return Settings(model=args.model, conventions=convention_flags(args), device=args.device,
                    roi=args.roi, strict=args.strict, precision=args.precision,
                    style=read_picture(Path(args.style)) if args.style else None,
                    style_colour=args.style_colour, strength=args.strength,
                    side_by_side=args.side_by_side,
                    background=args.background, resume=args.resume)


def unit_number(option: str) -> Callable[[str], float]:
    """argparse type of an option taking a number in [0, 1] (shared with the video command)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not 0 <= value <= 1:
            raise argparse.ArgumentTypeError(f"{option} must be a number in [0, 1], got {text!r}")
        return value
    return parse


style_colour = unit_number("--style-colour")   # --style-colour S


def colour(text: str) -> tuple[int, int, int]:
    """--background #rrggbb -> (b, g, r), OpenCV's channel order."""
    t = text.strip().lstrip("#")
    try:
        if len(t) != 6:
            raise ValueError
        r, g, b = (int(t[i:i + 2], 16) for i in (0, 2, 4))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--background must be #rrggbb, got {text!r}") from None
    return b, g, r


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


class Inputs:
    """The pictures to convert: ``files`` in order, each with ``names[i]``, its output path
    relative to the output folder (the file name; with --recursive the path below its input
    folder); ``errors``: lines for inputs that do not exist or are not files or folders;
    ``skipped_folders``, ``skipped_links`` and ``skipped_files``: what the folders held that is
    not converted (subfolders without --recursive, symbolic links to folders, files of other
    types), counted for the summary."""

    def __init__(self):
        self.files: list[Path] = []
        self.names: list[Path] = []
        self.errors: list[str] = []
        self.skipped_folders = self.skipped_links = self.skipped_files = 0

    def add_folder(self, folder: Path, recursive: bool) -> None:
        found = []
        stack = [folder]
        while stack:
            here = stack.pop()
            for q in sorted(here.iterdir()):
                if q.is_dir():
                    if q.is_symlink():  # not followed: a link up the tree would loop
                        self.skipped_links += 1
                    elif recursive:
                        stack.append(q)
                    else:
                        self.skipped_folders += 1
                elif q.is_file() and q.suffix.lower() in EXTENSIONS:
                    found.append(q)
                elif not q.name.startswith("."):  # hidden files (our temporaries) not counted
                    self.skipped_files += 1
        if not found:
            self.errors.append(f"{folder}: folder holds no {'/'.join(EXTENSIONS)} pictures" +
                               ("" if recursive else " (subfolders need --recursive)"))
        found.sort()
        self.files += found
        self.names += [q.relative_to(folder) for q in found]

    def skipped_note(self) -> str:
        parts = []
        if self.skipped_folders:
            parts.append(f"{self.skipped_folders} subfolder(s) (--recursive converts them)")
        if self.skipped_links:
            parts.append(f"{self.skipped_links} symbolic link(s) to folders (not followed; "
                         f"give them as inputs)")
        if self.skipped_files:
            parts.append(f"{self.skipped_files} file(s) not {'/'.join(EXTENSIONS)}")
        return "not converted: " + ", ".join(parts) if parts else ""


def collect_inputs(items: list[str], recursive: bool = False) -> Inputs:
    """The picture files ``items`` (files and folders) name."""
    found = Inputs()
    for item in items:
        p = Path(item)
        if p.is_dir():
            found.add_folder(p, recursive)
        elif (why := not_a_file(p, "picture file or folder")) is None:
            found.files.append(p)
            found.names.append(Path(p.name))
        else:
            found.errors.append(f"{p}: {why}")
    return found


def plan_outputs(args: argparse.Namespace) -> tuple[list[Path], list[Path], Path, Inputs]:
    """(inputs, their output paths, the path the summary shows, the ``Inputs`` with error lines
    for missing inputs). One input that is not a folder: -o is the output file (a folder only
    when it exists as one). ValueError for a usage error (bad output name, name clashes, an
    input as output)."""
    if not args.output:  # Path("") is the current folder
        raise ValueError("-o/--output is empty: give an output file or folder")
    found = collect_inputs(args.inputs, getattr(args, "recursive", False))
    files = found.files
    out_arg = Path(args.output)
    single = len(args.inputs) == 1 and not Path(args.inputs[0]).is_dir() and not out_arg.is_dir()
    if single:
        if out_arg.suffix.lower() not in EXTENSIONS:
            raise ValueError(f"output {out_arg}: give a picture file name ({', '.join(EXTENSIONS)}) "
                             f"or an existing folder")
        targets = [out_arg] * len(files)
        if files:
            make_folder(out_arg.parent)
    else:
        if out_arg.exists() and not out_arg.is_dir():
            raise ValueError(f"output {out_arg} is a file; several inputs need an output folder")
        targets = [out_arg / n for n in found.names]
        names = [str(n) for n in found.names]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"several inputs would write the same output name: {', '.join(dup)}")
        for folder in sorted({t.parent for t in targets}):
            make_folder(folder)
    inputs = {f.resolve() for f in files}
    if not args.overwrite:
        for t in targets:
            if t.resolve() in inputs:
                raise ValueError(f"output {t} is also an input: refusing to overwrite it "
                                 f"(use --overwrite)")
    if getattr(args, "resume", False):  # what a killed run left behind
        for t in targets:
            for tmp in stale_temps(t):
                tmp.unlink(missing_ok=True)
    return files, targets, out_arg, found


def convert_here(opts: Settings, files: list[Path], targets: list[Path],
                 quiet: bool = False) -> Iterator[Result]:
    """This machine's converter: one Engine, the inputs in order. The Engine is built now (its
    errors are usage errors); the pictures are converted as the results are taken."""
    with slow_start_note("a2r_edge convert", quiet):
        engine = opts.engine()
    said = set()

    def note(kind: str, text: str) -> None:  # each kind of note once per run
        if kind not in said and not quiet:
            said.add(kind)
            print(f"a2r_edge: note: {text}", file=sys.stderr)

    def results():
        for i, (src_path, dst_path) in enumerate(zip(files, targets)):
            try:
                data = read_bytes(src_path)
                img = decode_picture(data, src_path)
                if is_16_bit(data):
                    note("16", f"{src_path} has 16 bits per channel: the model converts 8-bit "
                               f"pictures, so it is rounded to 8 bits and the output is 8-bit")
                if loses_alpha(img, dst_path) and opts.background is None:
                    note("alpha", f"{dst_path.suffix} has no transparency: transparent parts "
                                  f"are put on white (--background #rrggbb to choose)")
                if opts.resume and output_complete(dst_path, img.shape, engine.model.scale,
                                                   opts.side_by_side):
                    yield i, None, None
                    continue
                out = opts.convert(engine, img)
                yield i, opts.output_bytes(img, out, dst_path), None
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
                write_atomic(dst_path, data)
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
    opts = settings(args)
    files, targets, shown, found = plan_outputs(args)
    errors = found.errors
    if found.skipped_note() and not args.quiet:
        print(f"a2r_edge: note: {found.skipped_note()}", file=sys.stderr)
    if on_ray:
        results = distributed.convert_on_ray(opts, args.ray, files, targets)
    else:
        results = convert_here(opts, files, targets, args.quiet)
    for line in errors:
        print(f"a2r_edge: error: {line}", file=sys.stderr)
    return report(results, files, targets, shown, errors, args.quiet)
