"""Hostile model package manifests: deep nesting, wrong types, out-of-range numbers, a
manifest.json that is a symlink out of the package: ModelPackageError, never a crash."""
import json
import os

import pytest

from a2r_edge.model import package as pkg
from model_packages import make_package


@pytest.fixture
def folder(tmp_path):
    return make_package(tmp_path / "p")


def edit(folder, **changes):
    m = json.loads((folder / "manifest.json").read_text())
    m.update(changes)
    (folder / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize("changes,says", [
    ({"receptive_field": [1]}, "receptive_field"),
    ({"receptive_field": "abc"}, "receptive_field"),
    ({"receptive_field": -3}, "receptive_field"),
    ({"stride": 10 ** 30}, "stride"),
    ({"scale": 1000}, "scale"),
    ({"scale": True}, "scale"),
    ({"files": []}, "files"),
    ({"stages": {"a": 1}}, "stages"),
    ({"normalization": [1, 2]}, "normalization"),
    ({"name": {"x": 1}}, "name"),
])
def test_wrong_types_and_ranges(folder, changes, says):
    edit(folder, **changes)
    with pytest.raises(pkg.ModelPackageError, match=says):
        pkg.load_package(folder)


def test_adain_eps_must_be_a_positive_number(folder):
    m = json.loads((folder / "manifest.json").read_text())
    for eps in (True, float("inf"), "1e-5", 0):
        m["stages"][1]["eps"] = eps
        (folder / "manifest.json").write_text(json.dumps(m))
        with pytest.raises(pkg.ModelPackageError, match="eps"):
            pkg.load_package(folder)


def test_deeply_nested_manifest(folder):
    (folder / "manifest.json").write_text("[" * 200000 + "]" * 200000)
    with pytest.raises(pkg.ModelPackageError, match="nested too deeply"):
        pkg.load_package(folder)


def test_deeply_nested_statistics_file(folder):
    stats = folder / "photo_stats.json"
    stats.write_text('{"mean": ' + "[" * 200000 + "]" * 200000 + "}")
    with pytest.raises(pkg.ModelPackageError, match="nested too deeply"):
        pkg.load_stats(stats)


def test_manifest_symlink_out_of_the_package_is_refused(folder, tmp_path):
    outside = tmp_path / "elsewhere.json"
    os.replace(folder / "manifest.json", outside)
    (folder / "manifest.json").symlink_to(outside)
    with pytest.raises(pkg.ModelPackageError, match="outside the package"):
        pkg.load_package(folder)


def test_manifest_that_is_a_fifo_is_not_read(folder):
    (folder / "manifest.json").unlink()
    os.mkfifo(folder / "manifest.json")
    with pytest.raises(pkg.ModelPackageError, match="manifest"):
        pkg.load_package(folder)
