"""``python -m a2r_edge.video``: the command's entry point only; the code is a2r_edge/apps/video.py."""
