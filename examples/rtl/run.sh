#!/usr/bin/env bash
# Check the SystemVerilog datapath dp4.sv against its spec under Verilator:
# spec -> vectors (mmac gen) -> compiled model (mmac compile --emit obj) -> testbench.
#
#   examples/rtl/run.sh [F]       (from the repository root; F = the datapath's aligner
#                                  width, 20 by default as in the spec)
#
# Uses `mmac` from PATH, or $MMAC; builds in $BUILD (default target/rtl-F20, target/rtl-F19).
# RANDOM_CASES: random cases after the vectors (default 100000).
# NETLIST=1: synthesize dp4.sv with Yosys first (generic gates, `synth -flatten`) and run
# the testbench on that netlist instead of the SystemVerilog: the design as Yosys reads
# it, which is what an equivalence proof or a cost estimate works on.
# Exits 0 when every vector and random case matches, non-zero at the first build error
# or when a case fails (the testbench prints the first mismatch and how to explain it).
set -euo pipefail
cd "$(dirname "$0")/../.."
F="${1:-20}"
mmac="${MMAC:-mmac}"
build="${BUILD:-target/rtl-F$F}"
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
spec=specs/examples/dp4.mma
instr=dp4.f32.e4m3.e4m3.f32
tools=(verilator "$mmac")
[ "${NETLIST:-}" = 1 ] && tools+=(yosys)
for tool in "${tools[@]}"; do
    if ! command -v "$tool" >/dev/null; then
        case "$tool" in
        verilator | yosys) echo "run.sh: $tool is not installed (Debian, Ubuntu: apt-get install $tool)" >&2 ;;
        *) echo "run.sh: $tool is not on PATH (cargo install --path . --locked, or set MMAC)" >&2 ;;
        esac
        exit 2
    fi
done
mkdir -p "$build"
"$mmac" gen "$spec" --instr "$instr" -n 1000 --format hex -o "$build/vectors.hex"
"$mmac" compile "$spec" --emit obj -o "$build/dp4.o" >/dev/null
count=$(grep -vc '^//' "$build/vectors.hex")
datapath=("$PWD/examples/rtl/dp4.sv")
if [ "${NETLIST:-}" = 1 ]; then
    # the gates Yosys makes of dp4 with this F, as module dp4_gates, under a wrapper
    # with dp4's ports and parameters (the testbench instantiates dp4 #(.F(F)))
    yosys -q -p "read_verilog -sv ${datapath[0]}; chparam -set F $F dp4; hierarchy -check -top dp4;
        synth -flatten -top dp4; rename dp4 dp4_gates; write_verilog -noattr $build/dp4_gates.v" \
        >"$build/yosys.log" 2>&1 || { cat "$build/yosys.log" >&2; exit 2; }
    printf '%s\n' \
        "module dp4 #(parameter int F = $F, parameter int E_ZERO = -133) (" \
        "    input logic [31:0] c, input logic [31:0] a, input logic [31:0] b," \
        "    output logic [31:0] d);" \
        "  dp4_gates gates (.c(c), .a(a), .b(b), .d(d));" \
        "endmodule" >"$build/dp4_netlist.sv"
    datapath=("$build/dp4_gates.v" "$build/dp4_netlist.sv")
fi
verilator --binary -j 2 -Wall -Wno-fatal --top-module tb -GF="$F" \
    --Mdir "$build/obj_dir" -o Vtb \
    -CFLAGS "-I$build" -LDFLAGS "$build/dp4.o -lm" \
    "${datapath[@]}" "$PWD/examples/rtl/tb.sv" "$PWD/examples/rtl/golden.c" >"$build/verilator.log" 2>&1 ||
    { cat "$build/verilator.log" >&2; exit 2; }
"$build/obj_dir/Vtb" +vectors="$build/vectors.hex" +count="$count" +random="${RANDOM_CASES:-100000}" +seed=1
