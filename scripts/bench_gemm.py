#!/usr/bin/env python3
"""`mmac gemm` against its own kernel (`mmac bench`), per dot product, for short and long K.

For docs/performance.md (issue 30). For each instruction and K, the operands are random
normal values rounded to nearest into A's and B's formats (M = N = 2048 unless
--size), written once as `.npy` files. Each round then runs, one after the other:

- `mmac bench --dist normal --json` (the kernel's batch entry alone, one thread);
- `mmac gemm --threads 1` and `--threads 2` (the GEMM's own time, printed on stderr,
  and the wall time of the whole command, `.npy` reading and writing included), each
  the best of --repeat runs (3, as the issue's own figures: a one-step GEMM of 2048 x
  2048 takes 30-60 ms, and a run that loses a core to another process for a moment
  says nothing about the GEMM);
- with --base, the same two GEMMs with another build (D compared bit for bit).

Ratios are taken within a round (the machine is shared: absolute times drift between
rounds) and the table gives their medians over the rounds:

- `gemm/bench`: ns per dot of the 1-thread GEMM over the kernel's (goal: at most 1.2);
- `2t/1t`: the 2-thread GEMM's speed over the 1-thread one (goal: at least 1.85);
- `whole/gemm`: the whole 1-thread command's wall time over the GEMM time it prints
  (goal: at most 1.5).

Usage (NumPy and ml_dtypes must import; target/python-venv has them):

    target/python-venv/bin/python scripts/bench_gemm.py --mmac target/release/mmac \
        [--rounds 5] [--repeat 3] [--base OLD/mmac] [--only hopper] [--ks 1,4] [--size 2048]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ml_dtypes
import numpy as np

REPO = Path(__file__).resolve().parents[1]

# (label, spec, instruction, A and B as numpy dtype and the dtype of their raw
# encodings in the .npy file (None: the values themselves), k)
ROWS = [
    ("Hopper f16", "hopper", "mma.m16n8k16.f32.f16.f16.f32", (np.float16, None), 16),
    ("Ampere bf16", "ampere", "mma.m16n8k16.f32.bf16.bf16.f32", (ml_dtypes.bfloat16, np.uint16), 16),
    ("Ada e4m3", "ada", "mma.m16n8k32.f32.e4m3.e4m3.f32", (ml_dtypes.float8_e4m3fn, np.uint8), 32),
    ("CDNA3 fp8", "cdna3", "v_mfma_f32_16x16x32_fp8_fp8", (ml_dtypes.float8_e4m3fnuz, np.uint8), 32),
    ("CDNA2 bf16_1k", "cdna2", "v_mfma_f32_16x16x16bf16_1k", (ml_dtypes.bfloat16, np.uint16), 16),
    ("CDNA2 f16", "cdna2", "v_mfma_f32_16x16x16f16", (np.float16, None), 16),
]

GEMM_LINE = re.compile(r"dot products in ([0-9.]+) s \(([0-9.e+]+) dot products/s\)")


def operands(folder: Path, tag: str, dtypes, m: int, k: int, n: int, seed: int):
    """A (m x k) and B (k x n) of normal values rounded into the formats, as .npy files."""
    value, raw = dtypes
    rng = np.random.default_rng(seed)
    paths = []
    for name, shape in (("a", (m, k)), ("b", (k, n))):
        x = rng.standard_normal(shape).astype(value)
        if raw is not None:
            x = x.view(raw)
        path = folder / f"{tag}-{name}.npy"
        np.save(path, x)
        paths.append(path)
    return paths


def bench(mmac: str, spec: Path, instr: str) -> float:
    out = subprocess.run(
        [mmac, "bench", str(spec), "--instr", instr, "--dist", "normal", "--json"],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])["ns_per_dot"]


def gemm(mmac: str, spec: Path, instr: str, a: Path, b: Path, d: Path, threads: int, repeat: int = 1):
    """(GEMM seconds as printed, dots/s as printed, and the whole command's wall time
    over the GEMM time of the same run): the GEMM of the run with the fastest GEMM, the
    ratio of the run with the fastest whole command, of `repeat` runs."""
    runs = [gemm_once(mmac, spec, instr, a, b, d, threads) for _ in range(repeat)]
    best = min(runs, key=lambda r: r[0])
    quickest = min(runs, key=lambda r: r[2])
    return best[0], best[1], quickest[2] / quickest[0]


def gemm_once(mmac: str, spec: Path, instr: str, a: Path, b: Path, d: Path, threads: int):
    started = time.perf_counter()
    out = subprocess.run(
        [mmac, "gemm", str(spec), "--instr", instr, "--a", str(a), "--b", str(b),
         "-o", str(d), "--threads", str(threads)],
        check=True, capture_output=True, text=True,
    )
    wall = time.perf_counter() - started
    m = GEMM_LINE.search(out.stderr)
    if m is None:
        sys.exit(f"no GEMM time in mmac gemm's stderr: {out.stderr}")
    return float(m.group(1)), float(m.group(2)), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mmac", default="target/release/mmac")
    ap.add_argument("--base", help="another build of mmac to time and compare D with")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3, help="runs per GEMM variant and round (the best counts)")
    ap.add_argument("--size", type=int, default=2048, help="M = N")
    ap.add_argument("--ks", default="1,4", help="K as multiples of the instruction's k")
    ap.add_argument("--only", help="rows whose label or spec contains this")
    args = ap.parse_args()
    rows = [r for r in ROWS if not args.only or args.only.lower() in (r[0] + r[1]).lower()]
    multiples = [int(x) for x in args.ks.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cases = []
        for label, spec, instr, dtypes, k in rows:
            for mult in multiples:
                kk = k * mult
                tag = f"{spec}-{label.split()[-1]}-{kk}"
                a, b = operands(folder, tag, dtypes, args.size, kk, args.size, seed=kk)
                cases.append((label, REPO / "specs" / f"{spec}.mma", instr, kk, a, b, tag))
        per_case = {c[-1]: [] for c in cases}
        for r in range(args.rounds):
            for label, spec, instr, kk, a, b, tag in cases:
                d1, d2 = folder / f"{tag}-d1.npy", folder / f"{tag}-d2.npy"
                ns_bench = bench(args.mmac, spec, instr)
                t1, dots1, whole1 = gemm(args.mmac, spec, instr, a, b, d1, 1, args.repeat)
                t2, dots2, _ = gemm(args.mmac, spec, instr, a, b, d2, 2, args.repeat)
                same_threads = d1.read_bytes() == d2.read_bytes()
                row = {
                    "label": label, "instruction": instr, "K": kk, "round": r + 1,
                    "bench_ns": ns_bench, "gemm1_ns": 1e9 / dots1, "gemm2_ns": 1e9 / dots2,
                    "gemm_over_bench": 1e9 / dots1 / ns_bench, "speedup_2t": dots2 / dots1,
                    "whole_over_gemm": whole1, "gemm1_s": t1,
                    "identical_across_threads": same_threads,
                }
                if args.base:
                    db = folder / f"{tag}-base.npy"
                    tb1, dotsb1, _ = gemm(args.base, spec, instr, a, b, db, 1, args.repeat)
                    tb2, dotsb2, _ = gemm(args.base, spec, instr, a, b, db, 2, args.repeat)
                    row.update({
                        "base_gemm1_ns": 1e9 / dotsb1, "base_gemm2_ns": 1e9 / dotsb2,
                        "base_over_new_1t": dots1 / dotsb1, "base_over_new_2t": dots2 / dotsb2,
                        "identical_to_base": db.read_bytes() == d1.read_bytes(),
                    })
                per_case[tag].append(row)
                print(json.dumps(row), file=sys.stderr)
        for label, spec, instr, kk, a, b, tag in cases:
            rs = per_case[tag]
            med = lambda key: statistics.median(x[key] for x in rs)  # noqa: E731
            summary = {
                "label": label, "K": kk, "bench_ns": med("bench_ns"), "gemm1_ns": med("gemm1_ns"),
                "gemm_over_bench": med("gemm_over_bench"), "speedup_2t": med("speedup_2t"),
                "whole_over_gemm": med("whole_over_gemm"),
                "identical": all(x["identical_across_threads"] for x in rs),
            }
            if args.base:
                summary["new_over_base_1t"] = med("base_over_new_1t")
                summary["new_over_base_2t"] = med("base_over_new_2t")
                summary["identical"] &= all(x["identical_to_base"] for x in rs)
            results.append(summary)
    head = "| instruction | K | bench ns/dot | gemm 1t ns/dot | gemm/bench | 2t/1t | whole/gemm |"
    line = "|---|---|---|---|---|---|---|"
    if args.base:
        head += " speed vs base 1t | 2t |"
        line += "---|---|"
    print(head + " D identical |")
    print(line + "---|")
    for s in results:
        cells = [s["label"], str(s["K"]), f"{s['bench_ns']:.1f}", f"{s['gemm1_ns']:.1f}",
                 f"{s['gemm_over_bench']:.2f}x", f"{s['speedup_2t']:.2f}x",
                 f"{s['whole_over_gemm']:.2f}x"]
        if args.base:
            cells += [f"{s['new_over_base_1t']:.2f}x", f"{s['new_over_base_2t']:.2f}x"]
        cells.append("yes" if s["identical"] else "**no**")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
