"""The commands: convert (``python -m a2r_edge convert``), video (``python -m a2r_edge.video``),
bench (``python -m a2r_edge.bench``), distributed (``convert --ray``)."""
