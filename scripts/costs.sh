#!/usr/bin/env bash
# The gate counts in docs/architectures.md ("What the datapaths cost"): each listed
# instruction's `mmac compile --emit verilog` module synthesized by Yosys (`mmac show
# --cost`), as Markdown table rows. Generic-gate estimates for comparing designs, not
# silicon area. Uses `mmac` from PATH, or $MMAC; needs yosys.
#
#   scripts/costs.sh            (from the repository root; about 10 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
mmac="${MMAC:-mmac}"
echo "| spec | instruction | cells | transistors | gate equivalents | synthesis (s) |"
echo "|---|---|---|---|---|---|"
while read -r spec instr; do
    start=$(date +%s.%N)
    line=$("$mmac" show "$spec" --instr "$instr" --cost | grep "estimate for comparing")
    end=$(date +%s.%N)
    # `... area): 6071 cells, 46736 transistors, 11684 gate equivalents`
    read -r cells transistors ge < <(echo "$line" | sed -E 's/.*: ([0-9]+) cells, ([0-9]+) transistors, ([0-9]+) gate equivalents/\1 \2 \3/')
    printf '| `%s` | `%s` | %s | %s | %s | %.1f |\n' "$spec" "$instr" "$cells" "$transistors" "$ge" \
        "$(echo "$end - $start" | bc)"
done <<'LIST'
specs/examples/dp4.mma dp4.f32.e4m3.e4m3.f32
specs/volta.mma mma.m8n8k4.f32.f16.f16.f32
specs/ampere.mma mma.m16n8k8.f32.tf32.tf32.f32
specs/ampere.mma mma.m16n8k16.f32.bf16.bf16.f32
specs/hopper.mma mma.m16n8k16.f32.f16.f16.f32
specs/hopper.mma mma.m8n8k16.s32.s8.s8.s32
specs/cdna1.mma v_mfma_f32_32x32x8f16
specs/cdna2.mma v_mfma_f32_32x32x8f16
specs/cdna3.mma v_mfma_f32_16x16x8_xf32
LIST

# What one parameter costs: dp4 with its aligner F moved, and chained every 2 products
# instead of 4 (the spec file rewritten in a temporary folder)
echo
echo "| design | cells | transistors | gate equivalents |"
echo "|---|---|---|---|"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
variant() { # name, spec, instruction, sed expression
    sed "$4" "$2" >"$tmp/$1.mma"
    line=$("$mmac" show "$tmp/$1.mma" --instr "$3" --cost | grep "estimate for comparing")
    read -r cells transistors ge < <(echo "$line" | sed -E 's/.*: ([0-9]+) cells, ([0-9]+) transistors, ([0-9]+) gate equivalents/\1 \2 \3/')
    printf '| %s | %s | %s | %s |\n' "$1" "$cells" "$transistors" "$ge"
}
for f in 16 20 25; do
    variant "dp4, F = $f" specs/examples/dp4.mma dp4.f32.e4m3.e4m3.f32 "s/F = 20, L = 4/F = $f, L = 4/"
done
variant "dp4, F = 20, chain every 2" specs/examples/dp4.mma dp4.f32.e4m3.e4m3.f32 \
    "s/F = 20, L = 4/F = 20, L = 2/"
