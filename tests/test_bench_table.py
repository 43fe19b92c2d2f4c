"""The bench table names its reference rates for what they are: a numpy copy of the op's
footprint and the native FMA loop, references that an op can pass, never a "% of roof"."""
from a2r_edge.apps.bench import format_table


def profile(of_copy, of_fma):
    row = {"op": "channel_stats", "case": "1x16x128x128", "ms": 0.2, "gbps": 9.0,
           "of_roofline": of_copy, "peers": []}
    conv = {"op": "conv2d", "case": "32ch", "ms": 4.0, "gflops": 30.0, "of_roofline": of_fma,
            "peers": [{"name": "onnxruntime Conv", "ms": 1.0, "ratio": 0.25}]}
    return {"version": "0", "date": "d", "threads": 1, "isa": "avx2",
            "machine": {"cpu_model": "x", "architecture": "x86_64", "physical_cores": 1},
            "roofline": {"copy_gbps": {"1": 8.0}, "fma_gflops": {"1": 25.0}},
            "ops": [row, conv], "model": {"which": "tiny"}, "stages": [], "notes": []}


def test_shares_above_100_percent_are_labelled_as_references():
    text = format_table(profile(1.3, 1.2))
    assert "%roof" not in text
    assert "130% copy" in text and "120% FMA" in text
    assert "not ceilings" in text
