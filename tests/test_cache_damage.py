"""A damaged calibration or profile cache is ignored with one warning and measured again: it
must never make every Engine() fail."""
import json
import warnings

import pytest

from a2r_edge import Engine
from a2r_edge.runtime import scheduler, system
from model_packages import make_package

DAMAGE = ['{"stages": [1, 2]}', "[]", "null", "{not json",
          '{"stages": [{"stage": "encode", "backend": "native", "size": 256, "ms": "x"}]}',
          '{"stages": {"encode": 1}, "threads": 2, "date": "x"}',
          "[" * 100000 + "]" * 100000]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("A2R_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("A2R_PROFILE", raising=False)
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    return str(make_package(tmp_path_factory.mktemp("cache") / "tiny"))


@pytest.mark.parametrize("content", DAMAGE, ids=range(len(DAMAGE)))
def test_damaged_calibration_cache_is_measured_again(cache, package, content):
    Engine(package)
    (path,) = cache.glob("calibration-*.json")
    path.write_text(content)
    with pytest.warns(RuntimeWarning, match="damaged calibration cache"):
        Engine(package)
    assert json.loads(path.read_text())["stages"]  # rewritten with fresh figures
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Engine(package)  # and read back without a word


@pytest.mark.parametrize("profile", [{"host_device": 5}, {"stages": "x", "model": []}])
def test_damaged_cached_profile_is_ignored(cache, package, profile):
    cache.mkdir()
    with open(system.profile_path(), "w") as f:
        json.dump(profile, f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the calibration's own
        Engine(package)


def test_costs_refuse_entries_that_are_not_figures():
    with pytest.raises(ValueError, match="bad stage figure"):
        scheduler.Costs([{"stage": "a", "backend": "native", "size": -1, "ms": 1}])
