"""setup.py's decisions to build the optional CUDA library and to reuse an in-tree kernel build,
run without compiling anything: its functions are taken from the file (importing setup.py would
run the whole build)."""
import ast
import os
import stat
from pathlib import Path

import pytest

SETUP = Path(__file__).resolve().parent.parent / "setup.py"
NAMES = {"_find_nvcc", "_driver_sees_a_gpu", "build_cuda_library",
         "CUDA_SOURCES", "CUDA_DEPENDS", "CUDA_ARCHS", "CUDA_FLAGS",
         "_is_current", "_digest", "BUILD_STAMP"}


def setup_functions():
    tree = ast.parse(SETUP.read_text())
    keep = [n for n in tree.body
            if isinstance(n, (ast.Import, ast.ImportFrom)) and not any(
                a.name.startswith(("Cython", "numpy", "setuptools")) or
                getattr(n, "module", "") and n.module.startswith(("Cython", "setuptools"))
                for a in n.names)
            or isinstance(n, ast.FunctionDef) and n.name in NAMES
            or isinstance(n, ast.Assign) and {getattr(t, "id", "") for t in n.targets} & NAMES]
    namespace = {"__file__": str(SETUP)}
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(SETUP), "exec"), namespace)
    return namespace


def tool(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def fake_tools(tmp_path, monkeypatch):
    """PATH with an nvcc that only records its call (and writes its -o file) and an
    nvidia-smi that finds no GPU."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool(bin_dir, "nvcc", f'echo called > "{tmp_path}/nvcc_called"\n'
                          'while [ $# -gt 1 ]; do [ "$1" = -o ] && : > "$2"; shift; done')
    tool(bin_dir, "nvidia-smi", 'echo "No devices were found"; exit 6')
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.chdir(SETUP.parent)  # the CUDA sources are named relative to the project
    return tmp_path


@pytest.mark.skipif(os.path.isdir("/proc/driver/nvidia/gpus"), reason="this machine has a GPU")
def test_auto_skips_the_cuda_library_without_a_gpu(fake_tools, monkeypatch):
    monkeypatch.setenv("A2R_WITH_CUDA", "auto")
    assert setup_functions()["build_cuda_library"](str(fake_tools / "pkg")) is None
    assert not (fake_tools / "nvcc_called").exists()


def test_explicit_request_builds_it_without_a_gpu(fake_tools, monkeypatch):
    monkeypatch.setenv("A2R_WITH_CUDA", "1")
    built = setup_functions()["build_cuda_library"](str(fake_tools / "pkg"))
    assert built == str(fake_tools / "pkg" / "_a2r_cuda.so") and os.path.exists(built)
    assert (fake_tools / "nvcc_called").exists()


def test_auto_builds_it_when_the_driver_lists_a_gpu(fake_tools, monkeypatch):
    tool(fake_tools / "bin", "nvidia-smi", 'echo "GPU 0: NVIDIA H200 (UUID: GPU-0)"')
    monkeypatch.setenv("A2R_WITH_CUDA", "auto")
    assert setup_functions()["build_cuda_library"](str(fake_tools / "pkg")) is not None
    assert (fake_tools / "nvcc_called").exists()


def test_an_in_tree_kernel_build_is_reused_only_when_current(tmp_path, monkeypatch):
    """The second `pip install -e` of the Quick start reuses the first one's library, and nothing
    else does: a newer source, another build key, other library bytes or no stamp rebuild."""
    import json
    import time
    monkeypatch.chdir(tmp_path)
    is_current, digest = setup_functions()["_is_current"], setup_functions()["_digest"]
    source, library = tmp_path / "kernel.c", tmp_path / "lib.so"
    source.write_text("int f(void);")
    assert not is_current(str(library), "k", [str(source)])  # nothing built yet
    library.write_bytes(b"built")
    assert not is_current(str(library), "k", [str(source)])  # no stamp
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "a2r_kernels.stamp.json").write_text(
        json.dumps({"key": "k", "sha256": digest(str(library))}))
    assert is_current(str(library), "k", [str(source)])
    assert not is_current(str(library), "other flags", [str(source)])
    later = time.time() + 10
    os.utime(source, (later, later))
    assert not is_current(str(library), "k", [str(source)])  # a source edited since
    os.utime(library, (later + 1, later + 1))
    assert is_current(str(library), "k", [str(source)])
    library.write_bytes(b"something else")  # e.g. a sanitizer build put there
    os.utime(library, (later + 1, later + 1))
    assert not is_current(str(library), "k", [str(source)])
    (tmp_path / "build" / "a2r_kernels.stamp.json").write_text("[not a stamp")
    assert not is_current(str(library), "k", [str(source)])
