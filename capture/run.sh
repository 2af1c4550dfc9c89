#!/usr/bin/env bash
# capture/run.sh: the capture kit's one command: `mmac gen` writes conformance vectors for
# an instruction of a spec, mmac-capture runs them on the GPU (or, with --cpu, on libmmac
# standing in for it) and writes the device's d, and `mmac test` compares the spec with
# that. Ends on mmac test's `N passed, M failed` line, and exits as mmac test does.
#
#   capture/run.sh [--cpu] SPEC INSTR [-n N] [--seed S] [-o OUT.mmv] [--cases-per-mma N]
#
# -n/--seed go to `mmac gen` (256 random cases and seed 1 by default); OUT.mmv is the
# capture (default target/capture/captures/ARCH/INSTR.mmv, cpu-captures/ with --cpu), the
# file to contribute (docs/capture.md). Builds the kit first if needed (capture/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac

usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
    exit 2
}
mode=cuda
args=()
n=256
seed=1
out=""
per_mma=()
while [ $# -gt 0 ]; do
    case "$1" in
    --cpu) mode=cpu ;;
    -n) n="${2:?-n takes a number}"; shift ;;
    --seed) seed="${2:?--seed takes a number}"; shift ;;
    -o) out="${2:?-o takes a file}"; shift ;;
    --cases-per-mma) per_mma=(--cases-per-mma "${2:?--cases-per-mma takes a number}"); shift ;;
    -h | --help) usage ;;
    -*) echo "run.sh: unknown option \`$1\`" >&2; usage ;;
    *) args+=("$1") ;;
    esac
    shift
done
[ ${#args[@]} -eq 2 ] || usage
spec="${args[0]}"
instr="${args[1]}"
[ -f "$spec" ] || { echo "run.sh: error: $spec: no such spec file" >&2; exit 2; }

mkdir -p "$target/capture"
log=$(mktemp "$target/capture/build-$mode.XXXXXX.log")
trap 'rm -f "$log"' EXIT
build=(capture/build.sh)
[ "$mode" = cpu ] && build+=(--cpu)
if ! "${build[@]}" >"$log" 2>&1; then
    cat "$log" >&2
    echo "run.sh: error: ${build[*]} failed" >&2
    exit 2
fi
capture="$target/capture/$mode/mmac-capture"
mmac="${MMAC:-$target/debug/mmac}"

arch=$(basename "$spec" .mma)
if [ -z "$out" ]; then
    dir=captures
    [ "$mode" = cpu ] && dir=cpu-captures
    out="$target/capture/$dir/$arch/${instr//::/_}.mmv"
fi
mkdir -p "$(dirname "$out")"
vectors="$(dirname "$out")/${instr//::/_}.gen.mmv"

"$mmac" gen "$spec" --instr "$instr" -n "$n" --seed "$seed" -o "$vectors" 2>"$vectors.log" || {
    cat "$vectors.log" >&2
    exit 2
}
device=()
[ "$mode" = cpu ] && device=(--spec "$spec")
"$capture" --instr "$instr" --vectors "$vectors" -o "$out" "${device[@]+"${device[@]}"}" \
    "${per_mma[@]+"${per_mma[@]}"}"
echo "run.sh: capture in $out"
"$mmac" test "$spec" --vectors "$out"
