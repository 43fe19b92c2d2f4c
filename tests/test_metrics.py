"""Prometheus metrics of long runs, scraped from a real loopback endpoint while the run goes:
the stream API (Engine.stream(metrics=)) and the video loop (--metrics-port)."""
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import cv2
import numpy as np
import pytest

pytest.importorskip("prometheus_client", reason="the [metrics] extra is not installed")

from a2r_edge import Engine  # noqa: E402
from a2r_edge.runtime.metrics import StreamMetrics  # noqa: E402
from cli_run import PACKAGE_ROOT  # noqa: E402
from model_packages import make_package  # noqa: E402


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    return str(make_package(tmp_path_factory.mktemp("metrics") / "tiny"))


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        return r.read().decode()


def value(text: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", text, re.M)
    assert m, f"{name}{labels} not in:\n{text}"
    return float(m.group(1))


def test_stream_metrics_scraped_during_the_run(package):
    eng = Engine(package)
    metrics = StreamMetrics()
    port = metrics.serve(0)
    frames = (np.full((32, 40, 3), i % 256, np.uint8) for i in range(40))
    seen = None
    try:
        for i, _ in enumerate(eng.stream(frames, metrics=metrics)):
            if i == 20:
                seen = scrape(port)  # mid-run, over TCP on 127.0.0.1
    finally:
        metrics.close()
    assert value(seen, "a2r_frames_total") >= 20
    for stage in ("preprocess", "network", "postprocess"):
        assert value(seen, "a2r_stage_seconds_count", f'{{stage="{stage}"}}') >= 20
        assert value(seen, "a2r_stage_seconds_sum", f'{{stage="{stage}"}}') > 0
    assert value(seen, "a2r_frames_per_second") > 0
    assert value(seen, "a2r_resident_memory_bytes") > 10e6
    assert "a2r_dropped_frames_total 0.0" in seen
    final = metrics.text()
    assert value(final, "a2r_frames_total") == 40


def test_counters_and_fallbacks():
    m = StreamMetrics()
    m.dropped_total(3)
    m.dropped_total(3)
    m.dropped_total(5)
    m.fallback("cpu")
    text = m.text()
    assert value(text, "a2r_dropped_frames_total") == 5
    assert value(text, "a2r_fallbacks_total", '{kind="cpu"}') == 1


def test_video_metrics_port_serves_during_the_run(package, tmp_path):
    src = tmp_path / "long.avi"
    wr = cv2.VideoWriter(str(src), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (64, 48))
    for i in range(3000):
        wr.write(np.full((48, 64, 3), i % 256, np.uint8))
    wr.release()
    env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT, A2R_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "a2r_edge.video", "--input", str(src),
                             "--model", package, "--metrics-port", "0"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        port = None
        deadline = time.monotonic() + 120
        while port is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, "the video command ended before printing the metrics URL"
            m = re.search(r"metrics: http://127\.0\.0\.1:(\d+)/metrics", line)
            port = int(m.group(1)) if m else None
        text = ""
        while time.monotonic() < deadline:
            text = scrape(port)
            if value(text, "a2r_frames_total") >= 5:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the run must still be going"
        assert value(text, "a2r_frames_total") >= 5
        assert value(text, "a2r_stage_seconds_count", '{stage="network"}') >= 5
        assert 'a2r_stage_seconds_bucket{le="0.001",stage="network"}' in text
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_metrics_port_validated(package):
    from a2r_edge.apps import video
    with pytest.raises(SystemExit):
        video.parser().parse_args(["--camera", "0", "--metrics-port", "70000"])
