#!/usr/bin/env bash
# Split the time of a dot product into a cost per product and a cost per chained step:
# `mmac bench` (JIT, one thread) on every instruction of scripts/profile/steps.mma, for
# each input distribution, then a least-squares line through the one-step variants of
# each family (ns = fixed + per_product * k). The chained variants show what each extra
# step costs at a fixed k. Usage: scripts/profile/steps.sh [MMAC] (default: the release
# build, built first).
set -euo pipefail
cd "$(dirname "$0")/../.."
mmac="${1:-}"
if [ -z "$mmac" ]; then
    cargo build --release --locked -q
    mmac="${CARGO_TARGET_DIR:-target}/release/mmac"
fi
spec=scripts/profile/steps.mma
for dist in normal finite; do
    "$mmac" list "$spec" | cut -f1 | while read -r name; do
        "$mmac" bench "$spec" --instr "$name" --dist "$dist" --json | tail -1
    done
done | python3 -c '
import json, sys, collections
rows = [json.loads(l) for l in sys.stdin]
fam = collections.defaultdict(list)
for r in rows:
    name = r["instruction"]
    dist, ns, native = r["dist"], r["ns_per_dot"], r["baseline_ns_per_dot"]
    print(f"{name:24} {dist:7} {ns:8.1f} ns  (native {native:.1f})")
    parts = name.split(".")
    if len(parts) == 2:
        fam[(parts[0], r["dist"])].append((int(parts[1][1:]), r["ns_per_dot"]))
print()
print("family                   dist    per product  per step (fixed)")
for (f, d), pts in sorted(fam.items()):
    n = len(pts)
    mx = sum(k for k, _ in pts) / n
    my = sum(t for _, t in pts) / n
    slope = sum((k - mx) * (t - my) for k, t in pts) / sum((k - mx) ** 2 for k, _ in pts)
    print(f"{f:24} {d:7} {slope:8.2f} ns  {my - slope * mx:8.1f} ns")
'
