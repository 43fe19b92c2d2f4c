#!/usr/bin/env bash
# Build the CPU kernels with AddressSanitizer + UndefinedBehaviorSanitizer in a scratch copy of
# the tree and run the kernel tests against that build. Out-of-range reads at row, tile and tail
# edges are what this is for. The normal build in the source tree is left alone.
#   tools/sanitize.sh [pytest args...]      (default: the whole tests/ folder)
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$src/setup.py" "$src/pyproject.toml" "$src/README.md" "$src/LICENSE" "$src/a2r_edge" \
      "$src/cpu_ops" "$src/tests" "$work/"
find "$work/a2r_edge" -name '*.so' -delete
cd "$work"
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
A2R_WITH_CUDA=0 CFLAGS="$san -O1 -g" LDFLAGS="$san" python setup.py build_ext --inplace > build.log 2>&1 \
    || { tail -30 build.log; exit 1; }
# Python itself is not instrumented: preload the runtime, do not report its own leaks.
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cd tests
PYTHONPATH="$work" python -m pytest -q -p no:cacheprovider "${@:-.}"
