#!/usr/bin/env bash
# The tracked instructions of docs/performance.md against their targets and against
# mmasim 2.1.1, measured in one run (scripts/bench_targets.py says how). Creates a virtual
# environment with mmasim from PyPI ($MMASIM_VENV or target/mmasim-venv) and builds the
# release CLI first. Arguments go to bench_targets.py (--rounds N, --dist finite,normal,
# --no-mmasim).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
cargo build --release --locked -q
venv="${MMASIM_VENV:-$target/mmasim-venv}"
# absolute: torch builds mmasim's extension in another directory, running ninja by PATH
case "$venv" in /*) ;; *) venv="$PWD/$venv" ;; esac
if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
# mmasim builds a C++ extension with torch at import (ninja and a C++ compiler)
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check mmasim==2.1.1 numpy ninja
PATH="$venv/bin:$PATH" exec "$venv/bin/python" scripts/bench_targets.py --mmac "$target/release/mmac" "$@"
