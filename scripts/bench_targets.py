#!/usr/bin/env python3
"""The tracked instructions of docs/performance.md, measured in one run: `mmac bench`
(the JIT, one thread, against its own native f32 dot) and mmasim 2.1.1 (PyPI, batched
`dpa` over 100,000 dot products, one torch thread), on each input distribution.

Usage: scripts/bench_targets.sh [--rounds N] [--dist finite,normal] [--no-mmasim]
(the shell wrapper creates the virtual environment with mmasim and runs this with the
release build of mmac). Each round measures every row on every distribution, mmac then
mmasim; the table gives medians over the rounds of ns per dot and of the ratios taken
within a round. Progress goes to stderr; the Markdown table and one JSON line per row to
stdout.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

# (spec, mmac instruction, mmasim constructor, its arguments, K, target ratio to native)
ROWS = [
    ("hopper", "mma.m16n8k16.f32.f16.f16.f32", "MMA", ("Hopper", "m16n8k16.f32.f16.f16.f32"), 16, 2.5),
    ("ampere", "mma.m16n8k16.f32.f16.f16.f32", "MMA", ("Ampere", "m16n8k16.f32.f16.f16.f32"), 16, 3.0),
    ("ampere", "mma.m16n8k8.f32.tf32.tf32.f32", "MMA", ("Ampere", "m16n8k8.f32.tf32.tf32.f32"), 8, 4.0),
    ("ada", "mma.m16n8k32.f32.e4m3.e4m3.f32", "MMA", ("Ada Lovelace", "m16n8k32.f32.e4m3.e4m3.f32"), 32, 2.5),
    ("cdna3", "v_mfma_f32_16x16x32_fp8_fp8", "MFMA", ("CDNA3", "f32_16x16x32_fp8_fp8"), 32, 4.0),
    ("cdna2", "v_mfma_f32_16x16x16bf16_1k", "MFMA", ("CDNA2", "f32_16x16x16bf16_1k"), 16, 4.0),
    (
        "rtx_blackwell",
        "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3",
        "MMABlockScale",
        ("RTX Blackwell", "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3"),
        64,
        1.5,
    ),
]

BATCH = 100_000


def mmac_bench(mmac, spec, instr, dist):
    out = subprocess.run(
        [mmac, "bench", f"specs/{spec}.mma", "--instr", instr, "--dist", dist, "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    j = json.loads(out.strip().splitlines()[-1])
    return j["ns_per_dot"], j["baseline_ns_per_dot"]


class Mmasim:
    """mmasim's batched `dpa` on BATCH dot products drawn like `mmac bench --dist`."""

    def __init__(self):
        import torch
        import mmasim.amd
        import mmasim.nv_ptx

        torch.set_num_threads(1)
        self.torch = torch
        self.ctors = {
            "MMA": mmasim.nv_ptx.MMA,
            "MMABlockScale": mmasim.nv_ptx.MMABlockScale,
            "MFMA": mmasim.amd.MFMA,
        }

    def operand(self, dtype, shape, dist, gen):
        torch = self.torch
        if dist == "normal":
            return torch.randn(shape, generator=gen).to(dtype)
        # random finite encodings: random codes, non-finite ones replaced by zero
        bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[dtype.itemsize]
        codes = torch.randint(0, 1 << 8 * dtype.itemsize, shape, generator=gen)
        x = codes.to(torch.int64).to(bits).view(dtype)
        finite = torch.isfinite(x.float())
        return torch.where(finite, x.float(), torch.zeros(())).to(dtype)

    def ns_per_dot(self, ctor, args, k, dist):
        torch = self.torch
        op = self.ctors[ctor](*args)
        gen = torch.Generator().manual_seed(1)
        if ctor == "MMABlockScale":
            # e2m1 pairs packed in bytes, unit ue4m3 scales (as mmac bench draws them)
            if dist == "normal":
                table = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6])
                def fp4(shape):
                    v = torch.randn(shape, generator=gen).abs()
                    code = torch.bucketize(v, (table[1:] + table[:-1]) / 2)
                    sign = (torch.rand(shape, generator=gen) < 0.5).to(torch.int64) << 3
                    return code | sign
                pack = lambda c: (c[..., 0::2] << 4 | c[..., 1::2]).to(torch.uint8)
                a, b = pack(fp4((BATCH, k))), pack(fp4((BATCH, k)))
                scales = lambda: torch.ones((BATCH, k // 16)).to(torch.float8_e4m3fn)
            else:
                a = torch.randint(0, 256, (BATCH, k // 2), generator=gen).to(torch.uint8)
                b = torch.randint(0, 256, (BATCH, k // 2), generator=gen).to(torch.uint8)
                def scales():
                    s = torch.randint(0, 127, (BATCH, k // 16), generator=gen).to(torch.uint8)
                    return s.view(torch.float8_e4m3fn)
            c = self.operand(op.c_type, (BATCH,), dist, gen)
            sa, sb = scales(), scales()
            call = lambda: op.dpa(a, b, c, sa, sb)
        else:
            a = self.operand(op.a_type, (BATCH, k), dist, gen)
            b = self.operand(op.b_type, (BATCH, k), dist, gen)
            c = self.operand(op.c_type, (BATCH,), dist, gen)
            call = lambda: op.dpa(a, b, c)
        call()  # warm up
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            call()
            best = min(best, time.perf_counter() - t)
        return best / BATCH * 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mmac", default="target/release/mmac")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dist", default="finite,normal")
    ap.add_argument("--no-mmasim", action="store_true")
    args = ap.parse_args()
    dists = args.dist.split(",")
    sim = None if args.no_mmasim else Mmasim()
    # (row, dist) -> list of (jit, native, mmasim) per round
    seen = {}
    for r in range(args.rounds):
        for row in ROWS:
            spec, instr, ctor, ctor_args, k, target = row
            for dist in dists:
                jit, native = mmac_bench(args.mmac, spec, instr, dist)
                peer = sim.ns_per_dot(ctor, ctor_args, k, dist) if sim else None
                seen.setdefault((row[:2], dist), []).append((jit, native, peer))
                print(
                    f"round {r + 1} {spec} {instr[:40]} {dist}: jit {jit:.1f} ns, native "
                    f"{native:.1f} ns ({jit / native:.2f}x)"
                    + (f", mmasim {peer:.0f} ns" if peer else ""),
                    file=sys.stderr,
                )
    med = statistics.median
    print("| instruction | dist | JIT ns/dot | native f32 dot ns | JIT / native | target | met | mmasim 2.1.1 ns/dot | JIT vs mmasim |")
    print("|---|---|---|---|---|---|---|---|---|")
    lines = []
    for row in ROWS:
        spec, instr, _, _, _, target = row
        for dist in dists:
            runs = seen[(row[:2], dist)]
            jit = med(r[0] for r in runs)
            native = med(r[1] for r in runs)
            ratio = med(r[0] / r[1] for r in runs)
            peer = med(r[2] for r in runs) if runs[0][2] else None
            speedup = med(r[2] / r[0] for r in runs) if peer else None
            print(
                f"| {spec} `{instr}` | {dist} | {jit:.1f} | {native:.1f} | {ratio:.2f}x | "
                f"≤ {target}x | {'yes' if ratio <= target else 'no'} | "
                + (f"{peer:.0f} | {speedup:.0f}x faster |" if peer else "- | - |")
            )
            lines.append(
                {
                    "spec": spec,
                    "instruction": instr,
                    "dist": dist,
                    "rounds": len(runs),
                    "jit_ns_per_dot": jit,
                    "native_ns_per_dot": native,
                    "ratio_to_native": ratio,
                    "target": target,
                    "mmasim_ns_per_dot": peer,
                    "jit_speedup_over_mmasim": speedup,
                }
            )
    for line in lines:
        print(json.dumps(line))


if __name__ == "__main__":
    main()
