"""convert --ray: a folder converted on a local Ray instance gives the local run's files byte
for byte, with the same failures and the same exit code; Ray stays optional (never imported
without --ray; missing: one line naming the extra, exit 2). The tests marked ``ray`` need the
[ray] extra and share one local Ray instance (started once per module: it takes seconds)."""
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
from model_packages import make_package

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
    actor = distributed._Converter(files, entry, "auto", None, None, True)
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
    broken = distributed._Converter({"manifest.json": b"{"}, "", "auto", None, None, False)
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
