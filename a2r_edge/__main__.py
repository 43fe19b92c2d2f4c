"""``python -m a2r_edge``: the command line.

  convert   pictures in, photo-realistic pictures out (see apps/convert.py)
  model     model check MODEL: coverage, parity and speed of a bring-your-own ONNX model
            against onnxruntime (see apps/model_check.py)
  info      the setup report: version, CPU kernel level, OpenMP and threads, the hardware, where
            each stage of the model runs and why (the plan, at --precision), every A2R_* setting
Usage errors, bad settings and bad inputs print one line each and exit with code 2.
"""
from __future__ import annotations

import argparse
import platform
import sys

from . import _settings
from .apps import OneLineParser, convert, model_check, one_line_warnings


def _info(args: argparse.Namespace) -> int:
    import a2r_edge
    from a2r_edge.runtime import cpu, system, threads

    rows = [
        ("a2r_edge", a2r_edge.__version__),
        ("python", f"{platform.python_version()} ({platform.machine()})"),
        ("cpu kernels", f"{cpu.isa()} (available: {', '.join(cpu.available_isas())})"),
        ("openmp", "on" if cpu.openmp_enabled() else "off (kernels run serially)"),
        ("threads", f"{cpu.num_threads()} (physical cores {threads.physical_cores()}, "
                    f"cgroup quota {threads.cgroup_cpu_quota() or 'none'})"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print("\nhardware:")
    print("  " + system.detect_hardware().describe().replace("\n", "\n  "))
    print("\nplan:")
    from a2r_edge.model import package as pkg
    if args.model is None and not (pkg.BUNDLED / pkg.DEFAULT_MODEL / "manifest.json").exists():
        print(f"  (no model: the bundled {pkg.DEFAULT_MODEL} is not installed; pass --model)")
    else:
        from a2r_edge.engine import Engine
        eng = Engine(args.model, args.device, precision=args.precision)
        print(f"  model {eng.model.name} {eng.model.version}")
        print("  " + eng.plan.describe().replace("\n", "\n  "))
        if eng.stream_plan.placements != eng.plan.placements:
            print("  batches and streams:")
            print("  " + eng.stream_plan.describe().replace("\n", "\n  "))
    print("\nsettings:")
    for name, value, doc in _settings.describe():
        print(f"  {name}={value}\n      {doc}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m a2r_edge",
                           description="a2r_edge: anime -> photo-realistic pictures.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    convert.add_parser(sub)
    model_check.add_parser(sub)
    info = sub.add_parser("info", help="print the setup report (kernels, threads, hardware, "
                                       "the plan, settings)")
    info.add_argument("--model", help="model package folder or ONNX file (default: bundled)")
    info.add_argument("--device", default="auto", help="auto | cpu | gpu | split")
    info.add_argument("--precision", default="fp32", choices=convert.PRECISION_CHOICES,
                      help="the precision to plan at (auto: calibrated here, as convert "
                           "does); the plan then says what each stage runs at and why")
    args = parser.parse_args(argv)
    try:
        one_line_warnings("a2r_edge")
        _settings.check_all()  # a malformed A2R_* value: one line now, not one per picture
        return {"info": _info, "convert": convert.run,
                "model": model_check.run}[args.command](args)
    # bad settings, models, paths; a model that fails on the calibration input or is too large
    # for memory (RuntimeError, MemoryError): one line, exit 2
    except (ValueError, OSError, RuntimeError, MemoryError) as exc:
        print(f"a2r_edge: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
