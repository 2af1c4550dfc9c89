#!/usr/bin/env bash
# capture/build.sh: builds the capture kit, either the CUDA build (nvcc from PyPI, in a
# virtual environment this script creates; no GPU needed) or, with --cpu, the CPU-backed
# build linked against libmmac. Both first generate the instruction table and kernels from
# the spec library (capture/gen.py, through `mmac list` and `mmac layout --json`).
#
#   capture/build.sh [--cpu] [--out DIR] [--only NAME...]
#
# Output: DIR/mmac-capture (default target/capture/cuda or target/capture/cpu), with the
# generated sources in DIR/gen. --only builds the table for those instructions alone.
# Nothing is rebuilt when the binary is newer than everything it is made from.
#
# Environment: CARGO_TARGET_DIR; MMAC (the mmac executable, default TARGET/debug/mmac) and
# MMAC_LIB_DIR (the folder of libmmac.so, default TARGET/debug): when they are given this
# script does not run cargo, else it runs `cargo build -p mmac -p mmac-capi` first.
# MMAC_CAPTURE_VENV (the virtual environment, default TARGET/capture-venv), PYTHON
# (python3), CXX (g++).
set -euo pipefail
# (a relative --out is the caller's: made absolute before the cd to the repository)
caller=$PWD
cd "$(dirname "$0")/.."
root=$PWD
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac

mode=cuda
out=""
only=()
while [ $# -gt 0 ]; do
    case "$1" in
    --cpu) mode=cpu ;;
    --out)
        [ $# -ge 2 ] && [ -n "$2" ] || { echo "build.sh: error: --out takes a folder" >&2; exit 2; }
        out="$2"; shift ;;
    --only)
        shift
        while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do only+=("$1"); shift; done
        [ ${#only[@]} -gt 0 ] || { echo "build.sh: error: --only takes instruction names" >&2; exit 2; }
        continue ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument \`$1\` (see capture/build.sh --help)" >&2; exit 2 ;;
    esac
    shift
done
if [ -z "$out" ]; then
    out="$target/capture/$mode"
else
    case "$out" in /*) ;; *) out="$caller/$out" ;; esac
fi

need() {
    if ! command -v "$1" >/dev/null 2>&1; then
        echo "build.sh: error: \`$1\` is required: $2" >&2
        exit 2
    fi
}
python="${PYTHON:-python3}"
cxx="${CXX:-g++}"
need "$python" "apt-get install -y python3 python3-venv"
need "$cxx" "apt-get install -y g++ (a C++17 compiler; or set CXX)"

mmac="${MMAC:-$target/debug/mmac}"
libdir="${MMAC_LIB_DIR:-$target/debug}"
# unless told where they are, build mmac and libmmac (quick when they are up to date): the
# kit's table comes from mmac, the CPU build runs libmmac, and the two must agree
if [ -z "${MMAC:-}" ] || { [ "$mode" = cpu ] && [ -z "${MMAC_LIB_DIR:-}" ]; }; then
    need cargo "install Rust (https://rustup.rs), or set MMAC and MMAC_LIB_DIR"
    mkdir -p "$target/capture"
    if ! cargo build --locked -p mmac -p mmac-capi >"$target/capture/cargo.log" 2>&1; then
        cat "$target/capture/cargo.log" >&2
        echo "build.sh: error: cargo build -p mmac -p mmac-capi failed" >&2
        exit 2
    fi
fi
[ -x "$mmac" ] || { echo "build.sh: error: no mmac executable at $mmac (cargo build)" >&2; exit 2; }

bin="$out/mmac-capture"
gen="$out/gen"
mkdir -p "$gen"
# one build of a folder at a time (run.sh may run twice at once); the lock goes with us
if command -v flock >/dev/null 2>&1; then
    exec 9>"$out/.lock"
    flock 9
fi
# up to date: the binary is newer than mmac (whose layouts it reads), the specs, the
# kit's sources, and this build's inputs (mmac, libmmac and the --only list)
stamp="$out/inputs.txt"
{
    echo "mmac $mmac"
    [ "$mode" = cpu ] && echo "libmmac $libdir"
    printf 'only %s\n' "${only[@]+"${only[@]}"}"
} >"$stamp.new"
if cmp -s "$stamp" "$stamp.new"; then rm "$stamp.new"; else mv "$stamp.new" "$stamp"; fi
deps=("$mmac" "$stamp" capture/gen.py capture/build.sh capture/src specs)
[ "$mode" = cpu ] && deps+=("$libdir/libmmac.so" capi/include/mmac.h)
if [ -x "$bin" ] && [ -z "$(find "${deps[@]}" -newer "$bin" -print -quit)" ]; then
    echo "build.sh: $bin is up to date" >&2
    exit 0
fi

gen_args=(--mmac "$mmac" --out "$gen")
[ ${#only[@]} -gt 0 ] && gen_args+=(--only "${only[@]}")
"$python" capture/gen.py "${gen_args[@]}"

src=capture/src
host=("$src/main.cpp" "$src/mmv.cpp" "$src/pack.cpp" "$src/table.cpp")
cxxflags=(-std=c++17 -O2 -Wall -Wextra -Werror -I "$src" -I "$gen"
    "-DCAPTURE_TABLE_BIN=\"$gen/capture_table.bin\"")

if [ "$mode" = cpu ]; then
    [ -e "$libdir/libmmac.so" ] || { echo "build.sh: error: no libmmac.so in $libdir (cargo build -p mmac-capi)" >&2; exit 2; }
    "$cxx" "${cxxflags[@]}" -I capi/include "${host[@]}" "$src/device_cpu.cpp" -o "$bin.tmp" \
        -L "$libdir" -Wl,-rpath,"$libdir" -lmmac
    mv "$bin.tmp" "$bin"
    echo "build.sh: built $bin (CPU build, libmmac from $libdir)" >&2
    exit 0
fi

# the CUDA build: nvcc from PyPI in the kit's virtual environment
venv="${MMAC_CAPTURE_VENV:-$target/capture-venv}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv" || { echo "build.sh: error: cannot create $venv (apt-get install -y python3-venv)" >&2; exit 2; }
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r capture/requirements-cuda.txt
cuda=$("$venv/bin/python" -c 'import glob, sys; d = glob.glob(sys.prefix + "/lib/python3*/site-packages/nvidia/cu13"); print(d[0] if d else "")')
nvcc="$cuda/bin/nvcc"
[ -x "$nvcc" ] || { echo "build.sh: error: no nvcc in $venv (nvidia-cuda-nvcc from capture/requirements-cuda.txt)" >&2; exit 2; }
echo "build.sh: $("$nvcc" --version | tail -1)" >&2

gencode=()
for t in sm_80 sm_89 sm_90a sm_100a sm_120a; do
    gencode+=(-gencode "arch=compute_${t#sm_},code=$t")
done
# PTX of sm_80 too, which the driver compiles for a GPU none of the targets runs on
gencode+=(-gencode arch=compute_80,code=compute_80)
obj="$out/obj"
mkdir -p "$obj"
# the two translation units at once: mma.sync for every target, wgmma for sm_90a alone
nvflags=(-ccbin "$cxx" -std=c++17 -O2 -Xcompiler -Wall -I "$src" -I "$gen")
"$nvcc" "${nvflags[@]}" "${gencode[@]}" -c "$src/device_cuda.cu" -o "$obj/device_cuda.o" &
mma_build=$!
"$nvcc" "${nvflags[@]}" -gencode arch=compute_90a,code=sm_90a -c "$src/device_wgmma.cu" \
    -o "$obj/device_wgmma.o" &
wgmma_build=$!
status=0
wait "$mma_build" || status=$?
wait "$wgmma_build" || status=$?
[ "$status" -eq 0 ] || { echo "build.sh: error: nvcc failed" >&2; exit 2; }
for f in "${host[@]}"; do
    "$cxx" "${cxxflags[@]}" -c "$f" -o "$obj/$(basename "$f" .cpp).o"
done
"$cxx" "$obj"/*.o -o "$bin.tmp" -L "$cuda/lib" -lcudart_static -ldl -lpthread -lrt
mv "$bin.tmp" "$bin"
echo "build.sh: built $bin (CUDA build: sm_80 sm_89 sm_90a sm_100a sm_120a, compute_80 PTX; wgmma sm_90a)" >&2
