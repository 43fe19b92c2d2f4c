"""Files every part writes or checks: atomic writing (a private temporary file beside the
target, renamed into place once complete: never half a file under the final name, never a
planted symlink followed) and what a path names, for one-line errors. Pictures and videos
(picture/io.py, apps/), calibration and profile JSON (model/precision.py, runtime/measure.py,
apps/bench.py) and adapted models (model/conventions.py) all write through here.
"""
from __future__ import annotations

import functools
import json
import os
import re
import stat
import tempfile
from pathlib import Path


def file_kind(mode: int) -> str:
    """What a stat ``st_mode`` names, for error lines ("a folder", "a pipe (FIFO)", ...)."""
    kinds = ((stat.S_ISREG, "a file"), (stat.S_ISDIR, "a folder"),
             (stat.S_ISFIFO, "a pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    return next((kind for test, kind in kinds if test(mode)), "not a regular file")


def not_a_file(path: Path, wanted: str) -> str | None:
    """None when ``path`` names a regular file (symbolic links followed); else what it is, for
    the error line "<path>: <this>": "no such file or folder", "a broken symbolic link",
    "a folder, not a <wanted>", ..."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "a broken symbolic link" if path.is_symlink() else "no such file or folder"
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    return None if stat.S_ISREG(mode) else f"{file_kind(mode)}, not a {wanted}"


def version(path) -> tuple:
    """(inode, size, modification time in ns) of ``path``: the key of a cache of what a file
    holds (a rewritten or replaced file gets a new one)."""
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def per_version(maxsize: int):
    """Decorator: ``fn(path)`` computed once per file version (``version``; OSError when the
    path cannot be stat'ed), the ``maxsize`` latest results kept."""
    def wrap(fn):
        @functools.lru_cache(maxsize=maxsize)
        def cached(path: str, _version: tuple):
            return fn(path)

        @functools.wraps(fn)
        def call(path):
            path = os.fspath(path)
            return cached(path, version(path))
        return call
    return wrap


def make_folder(folder: Path) -> None:
    """Creates ``folder`` and its missing parents (the place an output goes); ValueError in one
    line when it cannot, naming the part of the path that is a file."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in reversed((folder, *folder.parents))
                        if p.exists() and not p.is_dir()), None)
        why = f"{blocker} is {file_kind(blocker.stat().st_mode)}" if blocker else \
            exc.strerror or str(exc)
        raise ValueError(f"cannot create the output folder {folder}: {why}") from None


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return mask


# The mode open() would give a new file; the temporary file is 0600 (owner only) until renamed.
FILE_MODE = 0o666 & ~_umask()

# Temporary outputs are named ".<start of the output name>.<random>.part<ext>": a 255-byte
# output name still gives a valid temporary name, and --resume finds what a killed run left.
TEMP_PREFIX_CHARS = 64


def temp_prefix(path: Path) -> str:
    return f".{path.name[:TEMP_PREFIX_CHARS]}."


def private_temp(path: Path, suffix: str = ".part") -> Path:
    """A new empty file beside ``path`` created with O_EXCL under a random name (never a
    planted symlink, never another run's file), mode 0600 until it is renamed into place."""
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), suffix=suffix, dir=path.parent)
    os.close(fd)
    return Path(tmp)


def stale_temps(path: Path) -> list[Path]:
    """Temporary files a killed run left for output ``path``: exactly ``private_temp``'s names
    for it (its prefix, mkstemp's 8 random characters, ".part" and maybe path's extension in
    any case: the video writer lowers it), so not those of "a.png.png" for "a.png". Outputs
    whose names share their first TEMP_PREFIX_CHARS characters cannot be told apart."""
    name = re.compile(re.escape(temp_prefix(path)) + r"[a-z0-9_]{8}\.part((?i:" +
                      re.escape(path.suffix) + "))?")
    try:
        return [p for p in path.parent.iterdir() if name.fullmatch(p.name)]
    except OSError:
        return []


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a private temporary file beside ``path``, check it holds every byte (a full
    disk is an OSError here), then rename into place (never half a file under the final name),
    with the permissions a newly created file gets."""
    tmp = private_temp(path)
    try:
        with open(tmp, "r+b") as f:
            f.write(data)
            f.flush()
            written = os.fstat(f.fileno()).st_size
        if written != len(data):
            raise OSError(f"{path}: short write ({written} of {len(data)} bytes)")
        publish(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def publish(tmp: Path, path: Path) -> None:
    """Put the complete temporary file ``tmp`` (``private_temp``) in ``path``'s place: flushed
    to the disk first (a crash after the rename leaves the whole file, not an empty one), given
    the mode a new file gets, then renamed in one step. The caller removes ``tmp`` on error."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, FILE_MODE)
    os.replace(tmp, path)


def write_json(path, data: dict) -> None:
    """``data`` as indented JSON at ``path`` (``write_atomic``), its folder made first; an
    OSError when the write or the rename fails (a full disk, ``path`` a folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=1).encode())
