"""The commands: convert (``python -m a2r_edge convert``), video (``python -m a2r_edge.video``),
bench (``python -m a2r_edge.bench``), distributed (``convert --ray``)."""

import argparse
import contextlib
import re
import sys
import threading
import warnings


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors read as every other error of the commands: one line,
    "a2r_edge convert: error: ...", exit code 2 (argparse prints its whole usage block first;
    --help still shows it). Subcommands' parsers are of the same class (add_subparsers)."""

    # Options whose values may start with "-" and a digit but are no number ("-1,1"): argparse
    # takes such a word for an option, so "--input-range -1,1" is glued into
    # "--input-range=-1,1" first. Set on a parser instance (convert's).
    dash_values: frozenset = frozenset()

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        for i in range(len(args) - 1, 0, -1):
            if args[i - 1] in self.dash_values and re.fullmatch(r"-\d[\d.,]*", args[i]):
                args[i - 1:i + 1] = [f"{args[i - 1]}={args[i]}"]
        return super().parse_known_args(args, namespace)

    def error(self, message):
        name = self.prog.removeprefix("python -m ")   # "a2r_edge convert", "a2r_edge.video"
        sys.stderr.write(f"{name}: error: {' '.join(message.split())} (--help: usage)\n")
        sys.exit(2)


# What a command says when building its Engine takes longer than this: the first use of a
# model on a machine measures its stages (and, at --precision auto/bf16/int8, its precisions).
SLOW_START_S = 3.0


@contextlib.contextmanager
def slow_start_note(prog: str, quiet: bool = False):
    """Inside: one line on stderr once SLOW_START_S have passed (none when it ends sooner or
    quiet), so that a first run measuring the model does not look hung."""
    timer = threading.Timer(SLOW_START_S, lambda: sys.stderr.write(
        f"{prog}: still starting (the first run of a model on a machine measures it; later "
        f"runs reuse that)...\n"))
    timer.daemon = True
    if not quiet:
        timer.start()
    try:
        yield
    finally:
        timer.cancel()


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
