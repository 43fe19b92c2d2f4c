#!/usr/bin/env bash
# GPU check of the CUDA library, for a machine with an NVIDIA GPU (about 3-5 minutes; every step
# has a timeout so the whole run stays under 8 minutes):
#   1. build (A2R_WITH_CUDA=1: a missing nvcc or a failed nvcc build is an error here);
#   2. the loader's view: available(), device name, capability, memory;
#   3. tests/test_cuda.py in full (the any-machine part and every @pytest.mark.gpu test);
#   4. tools/gpu_bench.py: each kernel's GB/s against the measured D2D copy bandwidth, and
#      H2D/D2H bandwidth pinned vs pageable.
# Writes everything under $OUT (or ./gpu_report): build.log, device.txt, tests.log, tests.xml,
# bench.txt, gpu_bench.json, summary.txt. Exit status: 0 when every step passed.
set -u
cd "$(dirname "$0")/.."
REPORT="${OUT:-./gpu_report}"
mkdir -p "$REPORT"
STATUS=0
step() { echo "== $*" | tee -a "$REPORT/summary.txt"; }
: > "$REPORT/summary.txt"

step "nvidia-smi / nvcc"
{ nvidia-smi || echo "nvidia-smi failed"; nvcc --version || echo "no nvcc on PATH"; } \
    > "$REPORT/device.txt" 2>&1
python -c "import pytest, hypothesis, numpy, cv2" 2>>"$REPORT/summary.txt" \
    || echo "missing Python test dependencies (pip install -e .[test])" | tee -a "$REPORT/summary.txt"

step "build (A2R_WITH_CUDA=1)"
START=$(date +%s)
if A2R_WITH_CUDA=1 timeout 300 python setup.py build_ext --inplace > "$REPORT/build.log" 2>&1; then
    echo "build ok in $(( $(date +%s) - START )) s" | tee -a "$REPORT/summary.txt"
else
    echo "BUILD FAILED (see build.log):" | tee -a "$REPORT/summary.txt"
    tail -30 "$REPORT/build.log" | tee -a "$REPORT/summary.txt"
    exit 1
fi

step "loader"
timeout 60 python - >> "$REPORT/device.txt" 2>&1 <<'PY'
from a2r_edge.runtime import cuda
print("available:", cuda.available(), "|", cuda.why_unavailable())
if cuda.available():
    print(cuda.device_info())
PY
grep -E "^(available|\{)" "$REPORT/device.txt" | tee -a "$REPORT/summary.txt"

step "tests/test_cuda.py"
(cd tests && PYTHONPATH=.. timeout 240 python -m pytest -q -rs test_cuda.py \
    --junitxml="$(cd .. && realpath "$REPORT")/tests.xml") > "$REPORT/tests.log" 2>&1 || STATUS=1
tail -3 "$REPORT/tests.log" | tee -a "$REPORT/summary.txt"
if grep -q "SKIPPED.*no GPU" "$REPORT/tests.log"; then
    echo "GPU TESTS WERE SKIPPED: no usable GPU (see device.txt)" | tee -a "$REPORT/summary.txt"
    STATUS=1
fi

step "benchmark"
PYTHONPATH=. timeout 150 python tools/gpu_bench.py "$REPORT/gpu_bench.json" > "$REPORT/bench.txt" 2>&1 \
    || STATUS=1
cat "$REPORT/bench.txt" | tee -a "$REPORT/summary.txt"

step "done: status $STATUS"
exit $STATUS
