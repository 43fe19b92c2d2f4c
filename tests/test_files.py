"""runtime/files.py: atomic writing and what a path names."""
import os
import stat

import pytest

from a2r_edge.runtime import files


def test_a_long_output_name_gets_a_valid_temporary_name(tmp_path):
    name = "x" * 251 + ".png"  # 255 bytes: the longest name most file systems take
    files.write_atomic(tmp_path / name, b"data")
    assert (tmp_path / name).read_bytes() == b"data"
    assert os.listdir(tmp_path) == [name]


def test_stale_temporaries_are_found_by_name(tmp_path):
    out = tmp_path / ("y" * 200 + ".png")
    tmp = files.private_temp(out)
    (tmp_path / "other.png").write_bytes(b"")
    assert files.stale_temps(out) == [tmp]
    video = tmp_path / "clip.mp4"                      # the video writer's own extension
    part = files.private_temp(video, ".part.mp4")
    assert files.stale_temps(video) == [part]
    upper = tmp_path / "clip.MP4"                      # which it writes in lower case
    part = files.private_temp(upper, ".part.mp4")
    assert files.stale_temps(upper) == [part]
    a = tmp_path / "a.png"                             # not another output's temporaries
    files.private_temp(tmp_path / "a.png.png")
    assert files.stale_temps(a) == []


def test_a_failed_json_write_leaves_no_temporary_file(tmp_path):
    (tmp_path / "profile.json").mkdir()   # the rename onto a folder fails
    with pytest.raises(IsADirectoryError):
        files.write_json(str(tmp_path / "profile.json"), {"source": "measured"})
    assert os.listdir(tmp_path) == ["profile.json"]
    with pytest.raises(TypeError):        # so does a value JSON cannot hold
        files.write_json(str(tmp_path / "p.json"), {"source": object()})
    assert os.listdir(tmp_path) == ["profile.json"]


def test_writes_get_a_new_files_mode_and_json_its_folder(tmp_path):
    files.write_atomic(tmp_path / "a.bin", b"xy")
    assert stat.S_IMODE((tmp_path / "a.bin").stat().st_mode) == files.FILE_MODE  # not 0600
    files.write_json(tmp_path / "new" / "p.json", {"k": [1, 2]})
    assert (tmp_path / "new" / "p.json").read_text() == '{\n "k": [\n  1,\n  2\n ]\n}'


def test_not_a_file_names_what_a_path_is(tmp_path):
    (tmp_path / "f").write_bytes(b"")
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "gone", tmp_path / "link")
    assert files.not_a_file(tmp_path / "f", "model") is None
    assert files.not_a_file(tmp_path, "model") == "a folder, not a model"
    assert files.not_a_file(tmp_path / "fifo", "model") == "a pipe (FIFO), not a model"
    assert files.not_a_file(tmp_path / "link", "model") == "a broken symbolic link"
    assert files.not_a_file(tmp_path / "none", "model") == "no such file or folder"
