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
# file to contribute (docs/capture.md); relative paths are the caller's. The generated
# vectors stay in a scratch folder, removed at the end. Builds the kit first if needed
# (capture/build.sh).
set -euo pipefail
# (relative paths are the caller's: made absolute before the cd to the repository)
caller=$PWD
absolute() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$caller/$1" ;; esac; }
cd "$(dirname "$0")/.."
root=$PWD
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac

usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
    exit 2
}
fail() { echo "run.sh: error: $*" >&2; exit 2; }
# an option's value: present and not empty
value() { [ $# -ge 2 ] && [ -n "$2" ] || fail "$1 takes a value"; }
mode=cuda
args=()
n=256
seed=1
out=""
per_mma=()
while [ $# -gt 0 ]; do
    case "$1" in
    --cpu) mode=cpu ;;
    -n) value "$@"; n="$2"; shift ;;
    --seed) value "$@"; seed="$2"; shift ;;
    -o) value "$@"; out=$(absolute "$2"); shift ;;
    --cases-per-mma) value "$@"; per_mma=(--cases-per-mma "$2"); shift ;;
    -h | --help) usage ;;
    -*) echo "run.sh: unknown option \`$1\`" >&2; usage ;;
    *) args+=("$1") ;;
    esac
    shift
done
[ ${#args[@]} -eq 2 ] || usage
spec=$(absolute "${args[0]}")
instr="${args[1]}"
[ -f "$spec" ] || fail "${args[0]}: no such spec file"
[ -n "$out" ] && [ -d "$out" ] && fail "-o $out is a folder; name the capture file"

mkdir -p "$target/capture"
# the build's log and the generated vectors (whose d is the spec's, not the device's: no
# file to contribute) in a scratch folder, removed at the end
scratch=$(mktemp -d "$target/capture/run-$mode.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
log="$scratch/build.log"
build=(capture/build.sh)
[ "$mode" = cpu ] && build+=(--cpu)
if ! "${build[@]}" >"$log" 2>&1; then
    cat "$log" >&2
    fail "${build[*]} failed"
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
vectors="$scratch/${instr//::/_}.gen.mmv"

"$mmac" gen "$spec" --instr "$instr" -n "$n" --seed "$seed" -o "$vectors" 2>"$scratch/gen.log" || {
    cat "$scratch/gen.log" >&2
    exit 2
}
device=()
[ "$mode" = cpu ] && device=(--spec "$spec")
"$capture" --instr "$instr" --vectors "$vectors" -o "$out" "${device[@]+"${device[@]}"}" \
    "${per_mma[@]+"${per_mma[@]}"}"
echo "run.sh: capture in $out"
"$mmac" test "$spec" --vectors "$out"
