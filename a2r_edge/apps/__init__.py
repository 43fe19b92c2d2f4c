"""The commands: convert (``python -m a2r_edge convert``), video (``python -m a2r_edge.video``),
bench (``python -m a2r_edge.bench``), distributed (``convert --ray``)."""

import warnings


def one_line_warnings(prog: str) -> None:
    """Warnings as the commands print errors: one line each, "<prog>: warning: ..." (Python's
    default adds the source line of the warn() call, which tells a user nothing)."""
    def format_warning(message, category, filename, lineno, line=None):
        return f"{prog}: warning: {' '.join(str(message).split())}\n"
    warnings.formatwarning = format_warning
