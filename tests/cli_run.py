"""Runs ``python -m a2r_edge`` in a subprocess that imports the a2r_edge these tests import."""
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np

import a2r_edge

PACKAGE_ROOT = str(Path(a2r_edge.__file__).resolve().parent.parent)


def cli(*args, cwd=None, env=None, module="a2r_edge", timeout=300):
    """The finished process (text output); A2R_* settings of this process are not passed on,
    ``env`` adds to the environment."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("A2R_")}
    full["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, full.get("PYTHONPATH", "")])
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, env=full)


def save(path, shape, seed=0, dtype=np.uint8):
    """A random picture written with OpenCV; returns it."""
    top = 256 if dtype == np.uint8 else 65536
    img = np.random.default_rng(seed).integers(0, top, shape).astype(dtype)
    assert cv2.imwrite(str(path), img)
    return img
