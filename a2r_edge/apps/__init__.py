"""The commands: convert (``python -m a2r_edge convert``), video (``python -m a2r_edge.video``),
bench (``python -m a2r_edge.bench``), distributed (``convert --ray``)."""

import argparse
import sys
import warnings


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors read as every other error of the commands: one line,
    "a2r_edge convert: error: ...", exit code 2 (argparse prints its whole usage block first;
    --help still shows it). Subcommands' parsers are of the same class (add_subparsers)."""

    def error(self, message):
        name = self.prog.removeprefix("python -m ")   # "a2r_edge convert", "a2r_edge.video"
        sys.stderr.write(f"{name}: error: {' '.join(message.split())} (--help: usage)\n")
        sys.exit(2)


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (counts, sizes, threads)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def one_line_warnings(prog: str) -> None:
    """Warnings as the commands print errors: one line each, "<prog>: warning: ..." (Python's
    default adds the source line of the warn() call, which tells a user nothing)."""
    def format_warning(message, category, filename, lineno, line=None):
        return f"{prog}: warning: {' '.join(str(message).split())}\n"
    warnings.formatwarning = format_warning
