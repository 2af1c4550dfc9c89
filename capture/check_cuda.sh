#!/usr/bin/env bash
# capture/check_cuda.sh: the capture kit's CUDA build test, without a GPU: builds the kit
# with PyPI's nvcc for every target (capture/build.sh: ptxas runs for each and must accept
# every instruction), then capture/check_cuda.py checks, target by target, that the PTX
# holds each instruction the kit claims and nothing else, that ptxas accepts it, and that
# ptxas refuses exactly the instructions the kit does not claim for the target. Prints a
# summary; exits non-zero on any failure. Downloads the CUDA wheels (about 300 MB
# installed) into the kit's virtual environment on its first run.
#
#   capture/check_cuda.sh
#
# Environment: as capture/build.sh (CARGO_TARGET_DIR, MMAC, MMAC_CAPTURE_VENV, CXX).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
out="$target/capture/cuda"

capture/build.sh --out "$out"
venv="${MMAC_CAPTURE_VENV:-$target/capture-venv}"
cuda=$("$venv/bin/python" -c 'import glob, sys; d = glob.glob(sys.prefix + "/lib/python3*/site-packages/nvidia/cu13"); print(d[0] if d else "")')
nvcc="$cuda/bin/nvcc"
mmac="${MMAC:-$target/debug/mmac}"
work="$target/capture/check"
rm -rf "$work"
mkdir -p "$work"
echo "check_cuda: $("$nvcc" --version | tail -1)"
"${PYTHON:-python3}" capture/gen.py --mmac "$mmac" --out "$work/gen-all" --all-targets
"${PYTHON:-python3}" capture/check_cuda.py --nvcc "$nvcc" --src capture/src/device_cuda.cu \
    --wgmma-src capture/src/device_wgmma.cu --gen "$out/gen" --gen-all "$work/gen-all" --work "$work"
# the binary runs without a GPU as far as it can: it lists what it was built with, and
# says that there is no device instead of crashing
"$out/mmac-capture" --list >"$work/list.txt"
n=$(wc -l <"$work/list.txt")
echo "check_cuda: mmac-capture --list: $n instructions"
"$mmac" gen specs/ampere.mma --instr mma.m16n8k16.f32.f16.f16.f32 -n 4 -o "$work/probe.mmv" 2>/dev/null
set +e
"$out/mmac-capture" --vectors "$work/probe.mmv" -o "$work/probe.out.mmv" 2>"$work/probe.err"
rc=$?
set -e
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
    echo "check_cuda: a GPU is present: run capture/run.sh SPEC INSTR for a capture"
elif [ "$rc" -ne 1 ] || ! grep -q "error: no CUDA device" "$work/probe.err"; then
    echo "check_cuda: FAILED: without a GPU mmac-capture should say \`no CUDA device\` and exit 1; it exited $rc:" >&2
    cat "$work/probe.err" >&2
    exit 1
else
    echo "check_cuda: without a GPU, mmac-capture says: $(cat "$work/probe.err")"
fi
echo "check_cuda: passed"
