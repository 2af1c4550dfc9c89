#!/usr/bin/env bash
# The tracked instructions of docs/performance.md against their targets and against
# mmasim 2.1.1, and one-step GEMMs against fastmma, measured in one run
# (scripts/bench_targets.py says how). Builds the release CLI first. Creates a virtual
# environment with mmasim from PyPI ($MMASIM_VENV or target/mmasim-venv) unless
# --gemm-only or --no-mmasim is given. fastmma (ztatlock/MMA-Sim, fastmma_rust, built with
# maturin into a virtual environment) joins when $FASTMMA_VENV (default
# target/fastmma-venv) has a python that imports fastmma_rust, or with --fastmma PYTHON.
# Arguments go to bench_targets.py (--rounds N, --dist finite,normal, --no-mmasim,
# --fastmma PYTHON, --no-fastmma, --gemm, --gemm-only, --gemm-seconds S, --gemm-size MxN,
# --gemm-dist normal|finite). Examples:
#   scripts/bench_targets.sh                              # everything, 3 rounds
#   FASTMMA_VENV=/path/to/venv scripts/bench_targets.sh --gemm-only --rounds 1
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
cargo build --release --locked -q
need_mmasim=1
for arg in "$@"; do
    case "$arg" in --gemm-only | --no-mmasim) need_mmasim= ;; esac
done
fastmma=()
fvenv="${FASTMMA_VENV:-$target/fastmma-venv}"
if [ -x "$fvenv/bin/python" ] && "$fvenv/bin/python" -c "import fastmma_rust, numpy" 2>/dev/null; then
    fastmma=(--fastmma "$fvenv/bin/python")
fi
if [ -n "$need_mmasim" ]; then
    venv="${MMASIM_VENV:-$target/mmasim-venv}"
    # absolute: torch builds mmasim's extension in another directory, running ninja by PATH
    case "$venv" in /*) ;; *) venv="$PWD/$venv" ;; esac
    if [ ! -x "$venv/bin/python" ]; then
        "${PYTHON:-python3}" -m venv "$venv"
    fi
    # mmasim builds a C++ extension with torch at import (ninja and a C++ compiler)
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check mmasim==2.1.1 numpy ninja
    PATH="$venv/bin:$PATH" exec "$venv/bin/python" scripts/bench_targets.py \
        --mmac "$target/release/mmac" "${fastmma[@]}" "$@"
fi
# without mmasim: any Python with numpy drives it (fastmma's has it)
driver="${PYTHON:-python3}"
if ! "$driver" -c "import numpy" 2>/dev/null && [ ${#fastmma[@]} -gt 0 ]; then
    driver="${fastmma[1]}"
fi
exec "$driver" scripts/bench_targets.py --mmac "$target/release/mmac" "${fastmma[@]}" "$@"
