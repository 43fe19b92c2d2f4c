"""``python -m a2r_edge.bench``: the command's entry point only; the code is a2r_edge/apps/bench.py
(the CLI) and a2r_edge/runtime/measure.py (the timing)."""
