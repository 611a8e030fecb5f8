#!/usr/bin/env bash
# The device check of issue #34: on a lent GPU, in under 8 minutes of device time,
#   1. the device name;
#   2. the full Fig. 3 (six panels, d = 2 … 1024): time, step and evaluation counts per panel;
#   3. the phase engine's accelerator layout against its CPU layout, float64, bitwise;
#   4. the solve benchmark (benchmarks/solve.py) and 5. the gradient benchmark (benchmarks/grad.py).
# Each step has its own time limit, so that one slow step cannot eat the others' time; a step
# that times out is reported and the next one runs. Exit status: non-zero if a step failed
# (the layout check failing included) or timed out.
#
#   bash benchmarks/device_check.sh          # on the GPU machine (full sizes)
#   bash benchmarks/device_check.sh --cpu    # on the CPU at a reduced size (CI; the gradient
#                                            # benchmark: its StoredStepAdjoint part only)
#
# Output: Markdown on stdout, for benchmarks/RESULTS.md.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python}

if [[ "${1:-}" == "--cpu" ]]; then
    export JAX_PLATFORMS=cpu
    FIG3=(--preset quick --ds 2)
    LAYOUT=(--n 6 --d 8 --betas 3 --realizations 24)
    SOLVE=(--ns 8 --repeats 1 --tolerances 1)
    GRAD=(--n 8 --d 4 --repeats 1 --dtype float64 --parts slots --slots 8)
    LIMITS=(300 300 300 300)
else
    FIG3=(--preset full)
    LAYOUT=(--n 32 --d 32 --betas 16 --realizations 2048)
    SOLVE=(--ns 256 1024 --repeats 3)
    GRAD=(--n 256 --d 64 --repeats 3 --parts one slots --slots 16 64)
    LIMITS=(210 60 60 90)  # with the 60 s of the device step: at most 480 s
fi

status=0
step() {  # step NAME LIMIT_S COMMAND...
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    echo
    echo "## $name"
    echo
    timeout "$limit" "$@"
    local rc=$?
    if [[ $rc -eq 124 ]]; then
        echo "device_check: $name TIMED OUT after ${limit} s"
        status=1
    elif [[ $rc -ne 0 ]]; then
        echo "device_check: $name FAILED (exit $rc)"
        status=1
    fi
    echo
    echo "device_check: $name took $((SECONDS - start)) s"
    return $status
}

echo "# device_check $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git rev-parse --short HEAD 2>/dev/null || true)"
step device 60 "$PY" benchmarks/device_check.py --section device
step fig3 "${LIMITS[0]}" "$PY" benchmarks/device_check.py --section fig3 "${FIG3[@]}"
step layout "${LIMITS[1]}" "$PY" benchmarks/device_check.py --section layout "${LAYOUT[@]}"
(cd benchmarks && step solve "${LIMITS[2]}" "$PY" solve.py "${SOLVE[@]}")
[[ $? -ne 0 ]] && status=1
(cd benchmarks && step grad "${LIMITS[3]}" "$PY" grad.py "${GRAD[@]}")
[[ $? -ne 0 ]] && status=1
echo
echo "device_check: done in $SECONDS s, status $status"
exit $status
