"""convert --ray: a folder converted on a local Ray instance gives the local run's files byte
for byte, with the same failures and the same exit code; Ray stays optional (never imported
without --ray; missing: one line naming the extra, exit 2). The tests marked ``ray`` need the
[ray] extra and share one local Ray instance (started once per module: it takes seconds)."""
import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

import a2r_edge
from a2r_edge.__main__ import main
from a2r_edge.apps import convert as convert_app
from a2r_edge.apps.convert import Settings
from model_packages import make_package
from onnx_graphs import Builder

PACKAGE_ROOT = str(Path(a2r_edge.__file__).resolve().parent.parent)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(make_package(tmp_path_factory.mktemp("ray") / "tiny"))


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray for the module: 2 CPUs (one actor + the read tasks), no dashboard; its
    workers import the same a2r_edge as this process."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    import logging
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING,
             object_store_memory=128 << 20,  # the test pictures are KBs (Ray's minimum: 75 MB)
             runtime_env={"env_vars": {"PYTHONPATH": PACKAGE_ROOT}})
    yield ray
    ray.shutdown()


def convert(capsys, *args):
    """The CLI in this process: (exit code, stdout, stderr)."""
    code = main(["convert", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def save(path, shape, seed=0):
    img = np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)
    assert cv2.imwrite(str(path), img)
    return img


def folder_of_pictures(folder):
    """A few small pictures of every layout, and two bad files."""
    folder.mkdir()
    save(folder / "a.png", (16, 16, 3))
    save(folder / "b.jpg", (17, 19, 3), seed=1)
    save(folder / "c.png", (9, 11, 4), seed=2)
    save(folder / "d.png", (13, 7), seed=3)
    save(folder / "e.bmp", (24, 18, 3), seed=4)
    (folder / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    (folder / "empty.bmp").write_bytes(b"")
    return folder


def same_files(a, b):
    names = sorted(os.listdir(a))
    assert names == sorted(os.listdir(b))
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    return names


def failed_lines(stdout):
    return [line for line in stdout.splitlines() if line.startswith("failed: ")]


@pytest.mark.ray
def test_folder_on_ray_is_the_local_run(tmp_path, model, ray_session, capsys):
    folder = folder_of_pictures(tmp_path / "in")
    code, out, err = convert(capsys, folder, "-o", tmp_path / "local", "--model", model)
    assert code == 2
    code, out_ray, err_ray = convert(capsys, folder, "-o", tmp_path / "ray", "--model", model,
                                     "--ray")
    assert code == 2 and "Traceback" not in err_ray
    assert same_files(tmp_path / "local", tmp_path / "ray") == \
        ["a.png", "b.jpg", "c.png", "d.png", "e.bmp"]  # no .part file left behind
    assert failed_lines(out_ray) == failed_lines(out) and len(failed_lines(out)) == 2
    assert out_ray.splitlines()[0] == out.splitlines()[0].replace("local", "ray")
    errors = [line for line in err_ray.splitlines() if line.startswith("a2r_edge: error:")]
    assert len(errors) == 2 and any("broken.png" in e for e in errors) \
        and any("empty.bmp" in e for e in errors)


@pytest.mark.ray
def test_style_side_by_side_and_resume_on_ray(tmp_path, model, ray_session, capsys):
    """--style, --style-colour and --side-by-side reach the actors; --resume is checked
    against the driver's output folder: complete outputs are kept, a missing and a half-written
    one redone."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(4):
        save(folder / f"p{i}.png", (12 + i, 10, 3), seed=i)
    style = tmp_path / "style.png"
    save(style, (20, 20, 3), seed=9)
    opts = ["--model", model, "--style", style, "--style-colour", "0.8", "--side-by-side"]
    assert convert(capsys, folder, "-o", tmp_path / "local", *opts)[0] == 0
    shutil.copytree(tmp_path / "local", tmp_path / "ray")
    (tmp_path / "ray" / "p1.png").unlink()
    (tmp_path / "ray" / "p2.png").write_bytes(b"\x89PNG\r\n\x1a\n half")
    kept = (tmp_path / "ray" / "p0.png").stat().st_mtime_ns
    code, out, err = convert(capsys, folder, "-o", tmp_path / "ray", *opts, "--resume",
                             "--ray")
    assert code == 0, err
    assert "converted 2 of 4 picture(s); skipped 2 already complete" in out
    assert (tmp_path / "ray" / "p0.png").stat().st_mtime_ns == kept
    same_files(tmp_path / "local", tmp_path / "ray")


@pytest.mark.ray
def test_every_convert_option_reaches_the_actors(tmp_path, model, ray_session, capsys):
    """--strict, --precision, the pixel conventions of a plain ONNX --model and --background
    (a BGRA picture written as .jpg) give the local run's bytes on Ray too."""
    src = tmp_path / "in.png"
    save(src, (15, 12, 4))
    opts = ["--model", plain_onnx(tmp_path / "net.onnx"), "--strict", "--precision", "bf16",
            "--input-range", "0,1", "--channel-order", "BGR", "--background", "#20a040"]
    assert convert(capsys, src, "-o", tmp_path / "local.jpg", *opts)[0] == 0
    assert convert(capsys, src, "-o", tmp_path / "ray.jpg", *opts, "--ray")[0] == 0
    assert (tmp_path / "ray.jpg").read_bytes() == (tmp_path / "local.jpg").read_bytes()
    assert convert(capsys, src, "-o", tmp_path / "plain.jpg", "--model", tmp_path / "net.onnx",
                   "--ray")[0] == 0
    assert (tmp_path / "plain.jpg").read_bytes() != (tmp_path / "local.jpg").read_bytes()


@pytest.mark.ray
@pytest.mark.parametrize("how", ["--ray ADDRESS", "RAY_ADDRESS"])
def test_cli_joins_a_running_ray(tmp_path, model, ray_session, capsys, how):
    """Another process attaches with --ray ADDRESS in the middle of the options, or with a bare
    --ray last, as ray.init() does (RAY_ADDRESS); it leaves the cluster running."""
    src = tmp_path / "in.png"
    save(src, (21, 15, 3))
    assert convert(capsys, src, "-o", tmp_path / "local.png", "--model", model)[0] == 0
    address = ray_session.get_runtime_context().gcs_address
    env = {k: v for k, v in os.environ.items() if not k.startswith(("A2R_", "RAY_ADDRESS"))}
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, env.get("PYTHONPATH", "")])
    args = [str(src), "--model", model]
    if how == "RAY_ADDRESS":
        env["RAY_ADDRESS"] = address
        args += ["-o", str(tmp_path / "ray.png"), "--ray"]
    else:
        args += ["--ray", address, "-o", str(tmp_path / "ray.png")]
    p = subprocess.run([sys.executable, "-m", "a2r_edge", "convert", *args], cwd=PACKAGE_ROOT,
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "ray.png").read_bytes() == (tmp_path / "local.png").read_bytes()
    assert ray_session.is_initialized()  # the cluster it joined is still up


# --- everywhere: Ray is optional ---------------------------------------------------------------

def test_missing_ray_is_one_line_naming_the_extra(tmp_path, model, monkeypatch, capsys):
    src = tmp_path / "in.png"
    save(src, (8, 8, 3))
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    code, out, err = convert(capsys, src, "-o", tmp_path / "out" / "x.png", "--model", model,
                             "--ray")
    assert code == 2
    assert err.count("\n") == 1 and 'pip install "a2r_edge[ray]"' in err
    assert not (tmp_path / "out").exists()  # refused before any work


def test_ray_before_the_inputs_does_not_take_an_input_as_address(tmp_path, model, capsys):
    src = tmp_path / "in.png"
    save(src, (8, 8, 3))
    with pytest.raises(SystemExit) as exc:
        main(["convert", "--ray", str(src), "-o", str(tmp_path / "x.png"), "--model", model])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "not a Ray address" in err and "--ray=ADDRESS" in err


def test_without_ray_option_ray_is_never_imported(tmp_path, model):
    src = tmp_path / "in.png"
    save(src, (8, 8, 3))
    code = ("import sys; from a2r_edge.__main__ import main; "
            f"rc = main(['convert', {str(src)!r}, '-o', {str(tmp_path / 'x.png')!r}, "
            f"'--model', {model!r}, '-q']); "
            "assert rc == 0, rc; assert 'ray' not in sys.modules, 'ray was imported'")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PACKAGE_ROOT,
                                                       os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "x.png").is_file()


# --- everywhere: the read task and the actor, as plain functions (no Ray) ----------------------

def batch_of(folder, out, names):
    return {"index": np.arange(len(names)),
            "src": np.array([str(folder / n) for n in names], dtype=object),
            "dst": np.array([str(out / n) for n in names], dtype=object)}


def test_read_task_bytes_failures_and_resume(tmp_path):
    from a2r_edge.apps import distributed
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir(), out.mkdir()
    save(folder / "a.png", (10, 12, 3))
    save(folder / "done.png", (10, 12, 3), seed=1)
    save(out / "done.png", (10, 12, 3), seed=2)  # a complete output: --resume skips it
    (folder / "empty.png").write_bytes(b"")
    names = ["a.png", "done.png", "empty.png", "gone.png"]
    got = distributed._read(batch_of(folder, out, names), resume=True, scale=1, sbs=False)
    assert got["data"][0] == (folder / "a.png").read_bytes()
    assert list(got["skip"]) == [False, True, False, False] and got["data"][1] == b""
    assert got["error"][2].endswith("empty file") and "gone.png: cannot read" in got["error"][3]
    got = distributed._read(batch_of(folder, out, names), resume=False, scale=1, sbs=False)
    assert not got["skip"][1] and got["data"][1] == (folder / "done.png").read_bytes()


def test_actor_converts_like_the_local_run_and_reports_per_picture(tmp_path, model):
    from a2r_edge.picture import io as picture_io
    from a2r_edge.apps import distributed
    from a2r_edge.engine import Engine
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    img = save(folder / "a.png", (14, 9, 3))
    (folder / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n junk")
    batch = batch_of(folder, out, ["a.png", "bad.png", "failed.png", "skipped.png"])
    batch["data"] = np.array([(folder / "a.png").read_bytes(), (folder / "bad.png").read_bytes(),
                              b"", b""], dtype=object)
    batch["error"] = np.array(["", "", "failed.png: read before", ""], dtype=object)
    batch["skip"] = np.array([False, False, False, True])
    files, entry = distributed.model_files(model)
    actor = distributed._Converter(files, entry, Settings(model=None, side_by_side=True))
    got = actor(dict(batch))
    want = picture_io.finish(img, Engine(model).convert(img), out / "a.png", True)
    assert got["data"][0] == want  # same bytes as the local path's
    assert "not a picture OpenCV can decode" in got["error"][1] and got["data"][1] == b""
    assert got["error"][2] == "failed.png: read before" and got["skip"][3]
    assert got["error"][0] == "" and got["error"][3] == ""

    # One picture the Engine refuses: only it fails, the batch's others are converted.
    class Refuses:
        def convert_batch(self, imgs, style=None, style_colour=None, strength=None):
            raise RuntimeError("one of them is too large")

        def convert(self, img, style=None, style_colour=None, strength=None):
            if img.shape[0] == 14:
                raise MemoryError("too large")
            return img
    actor.engine = Refuses()
    save(folder / "b.png", (5, 6, 3), seed=1)
    two = batch_of(folder, out, ["a.png", "b.png"])
    two.update(data=np.array([(folder / n).read_bytes() for n in ("a.png", "b.png")],
                             dtype=object),
               error=np.array(["", ""], dtype=object), skip=np.array([False, False]))
    got = actor(two)
    assert got["error"][0] == f"{folder / 'a.png'}: MemoryError: too large"
    assert got["error"][1] == "" and len(got["data"][1]) > 0

    # A model no node can load: every picture says so, nothing raises.
    broken = distributed._Converter({"manifest.json": b"{"}, "", Settings(model=None))
    got = broken(dict(batch))
    assert "no Engine on" in got["error"][0] and "no Engine on" in got["error"][1]
    assert got["error"][2] == "failed.png: read before" and got["skip"][3]


def test_model_files_ship_a_package_or_a_plain_onnx_file(model):
    from a2r_edge.apps import distributed
    files, entry = distributed.model_files(model)
    assert entry == "" and "manifest.json" in files
    assert all((Path(model) / name).read_bytes() == data for name, data in files.items())
    onnx_file = next(Path(model).glob("*.onnx"))
    assert distributed.model_files(str(onnx_file)) == ({onnx_file.name: onnx_file.read_bytes()},
                                                       onnx_file.name)


# --- everywhere: one Settings for both converters ------------------------------------------------

def parse_convert(*argv):
    import argparse
    parser = argparse.ArgumentParser()
    convert_app.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["convert", *map(str, argv)])


# convert options that decide which files are converted, where, and what is printed: the
# driver's (convert.py), not the converters'; every other option must reach Settings
DRIVER_OPTIONS = {"command", "inputs", "output", "overwrite", "recursive", "quiet", "ray"}
# options read into one Settings field under another name
FOLDED = {"input_range": "conventions", "mean": "conventions", "std": "conventions",
          "channel_order": "conventions", "output_range": "conventions",
          "layout": "conventions", "output_layout": "conventions"}


def plain_onnx(path):
    """A plain image-to-image ONNX file (3x3 conv, tanh) that takes any size."""
    import onnx
    b = Builder(np.random.default_rng(5), 3)
    onnx.save(b.model(b.node("Tanh", [b.conv("x", 3, 3)])), path)
    return path


def test_settings_hold_every_convert_option(tmp_path):
    """convert.settings is the one reading of the flags, for the local run and the Ray actors:
    every option of the parser is either the driver's or lands in Settings."""
    onnx_file = plain_onnx(tmp_path / "net.onnx")
    style = tmp_path / "style.png"
    save(style, (8, 9, 3), seed=7)
    args = parse_convert("in.png", "-o", tmp_path / "o.jpg", "--model", onnx_file,
                         "--device", "cpu", "--precision", "bf16", "--strict", "--roi", "face",
                         "--style", style, "--style-colour", "0.3", "--strength", "0.25",
                         "--side-by-side", "--resume", "--background", "#102030",
                         "--input-range", "0,1", "--channel-order", "BGR",
                         "--output-range=-1,1", "--output-layout", "NCHW")
    opts = convert_app.settings(args)
    fields = {f.name for f in dataclasses.fields(Settings)}
    for dest in vars(args):
        assert dest in DRIVER_OPTIONS or FOLDED.get(dest, dest) in fields, dest
    assert (opts.model, opts.device, opts.precision, opts.strict, opts.roi) == \
        (str(onnx_file), "cpu", "bf16", True, "face")
    assert (opts.style_colour, opts.strength, opts.side_by_side, opts.resume) == \
        (0.3, 0.25, True, True)
    assert opts.background == (0x30, 0x20, 0x10)   # OpenCV's b, g, r
    assert opts.style.shape == (8, 9, 3)
    c = opts.conventions
    assert (c.mean, c.std, c.channel_order, c.out_mean) == ((0.0,) * 3, (1.0,) * 3, "BGR",
                                                           (0.5,) * 3)
    assert (c.layout, c.out_layout) == (None, "NCHW")
    assert convert_app.settings(parse_convert("in.png", "-o", "o.png")).conventions is None


@pytest.mark.parametrize("kind", ["plain_onnx", "package"])
def test_actor_honours_the_settings_like_the_local_run(tmp_path, model, kind):
    """The Ray actor (as a plain object) builds its Engine and writes its bytes from the same
    Settings as the local converter: strict, precision, the pixel conventions of a plain ONNX
    file, strength, the style and the background of a BGRA picture written as .jpg give the
    local run's bytes, which differ from the defaults' (so the flags really acted)."""
    from a2r_edge.apps import distributed
    src, dst, style = tmp_path / "in.png", tmp_path / "out.jpg", tmp_path / "style.png"
    save(src, (20, 18, 4), seed=3)   # BGRA: the .jpg output needs the background
    save(style, (12, 12, 3), seed=4)
    common = ["--strict", "--precision", "bf16", "--background", "#ff8000"]
    if kind == "plain_onnx":
        model = plain_onnx(tmp_path / "net.onnx")
        flags = common + ["--input-range", "0,1", "--channel-order", "BGR"]
    else:
        flags = common + ["--strength", "0.5", "--style", style, "--style-colour", "0.7"]
    outputs = {}
    for name, extra in (("default", []), ("flags", flags)):
        opts = convert_app.settings(parse_convert(src, "-o", dst, "--model", model, *extra))
        (_, local, error), = convert_app.convert_here(opts, [src], [dst], quiet=True)
        assert error is None
        files, entry = distributed.model_files(opts.model)
        actor = distributed._Converter(files, entry, opts)
        assert actor.broken is None and actor.engine.strict == (name == "flags")
        batch = {"index": np.array([0]), "src": np.array([str(src)], dtype=object),
                 "dst": np.array([str(dst)], dtype=object),
                 "data": np.array([src.read_bytes()], dtype=object),
                 "error": np.array([""], dtype=object), "skip": np.array([False])}
        got = actor(batch)
        assert got["error"][0] == "" and got["data"][0] == local, name
        outputs[name] = local
    assert outputs["flags"] != outputs["default"]
