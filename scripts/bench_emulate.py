"""What `mmac.torch.emulate` adds to the GEMMs it runs, and what its profiler adds to it.

For docs/performance.md (issue 29). Two measurements, in rounds that alternate the
variants so that a noisy machine slows both alike; each ratio is taken within a round and
the medians are printed. One round before them is not counted (compilation, first calls).

1. A 1024 x 1024 x 1024 float32 matmul ``A @ B`` under ``emulate(ins)`` against
   ``ins.gemm`` on the same operands already in the instruction's formats (the GEMM
   alone): what emulate adds is dispatch, rounding A and B into a's and b's formats, the
   zero padding and D back to a tensor. Both D are checked bit-identical in every round.
2. The profiler: the transformer of examples/transformer_numerics.py (untrained, seeded;
   the cost does not depend on the weights) on ``--sequences`` sequences under
   ``emulate(ins, scaling="tensor")`` with and without ``report=True``: the extra time is
   the float64 reference and the float32 run of every call and their statistics. The
   same for the 1024^3 matmul alone.

    python scripts/bench_emulate.py [--rounds 5] [--threads N] [--sequences 256]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np
import torch

import mmac
import mmac.torch

REPO = Path(__file__).resolve().parents[1]
INSTRUCTIONS = [
    ("hopper", "mma.m16n8k16.f32.f16.f16.f32"),
    ("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3"),
]


def _timed(fn):
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def matmul_rounds(ins, rounds: int, threads) -> list:
    """(emulate s, ins.gemm s, ratio) per round for a 1024^3 matmul (after one round not
    counted: first calls allocate and fault in memory)."""
    g = torch.Generator().manual_seed(1024)
    A = torch.randn(1024, 1024, generator=g)
    B = torch.randn(1024, 1024, generator=g)
    # the same operands in the instruction's formats (round to nearest even, as emulate)
    a = mmac.torch.round_to_format(A.double().numpy(), ins.format("a"))
    b = mmac.torch.round_to_format(B.double().numpy(), ins.format("b"))
    ins.gemm(a[: ins.m, : ins.k], b[: ins.k, : ins.n])  # compile the kernel first
    rows = []
    for r in range(-1, rounds):
        with mmac.torch.emulate(ins, threads=threads):
            emulated_s, D = _timed(lambda: A @ B)
        gemm_s, D2 = _timed(lambda: ins.gemm(a, b, threads=threads))
        same = bool((D.numpy().view(np.uint32) == D2.view(np.uint32)).all())
        if not same:
            sys.exit(f"round {r + 1}: emulate and ins.gemm gave different D")
        if r < 0:
            continue  # the warm-up round
        rows.append((emulated_s, gemm_s, emulated_s / gemm_s))
        print(f"  round {r + 1}: emulate {emulated_s:.3f} s, ins.gemm {gemm_s:.3f} s, ratio {emulated_s / gemm_s:.3f}")
    return rows


def profiler_rounds(ins, scaling, make_input, model, rounds: int, threads) -> list:
    """(plain s, report s, ratio) per round: the model under emulate without and with
    the profiler (after one round not counted)."""
    rows = []
    for r in range(-1, rounds):
        x = make_input()
        with torch.no_grad(), mmac.torch.emulate(ins, scaling=scaling, threads=threads):
            plain_s, _ = _timed(lambda: model(x))
        with torch.no_grad(), mmac.torch.emulate(ins, scaling=scaling, threads=threads, report=True):
            report_s, _ = _timed(lambda: model(x))
        if r < 0:
            continue  # the warm-up round: the kernel's compilation, first native calls
        rows.append((plain_s, report_s, report_s / plain_s))
        print(f"  round {r + 1}: emulate {plain_s:.3f} s, with report {report_s:.3f} s, ratio {report_s / plain_s:.3f}")
    return rows


def summary(label: str, rows: list, names: tuple) -> None:
    first, second, ratio = zip(*rows)
    print(
        f"{label}: {names[0]} median {statistics.median(first):.3f} s, {names[1]} median "
        f"{statistics.median(second):.3f} s, ratio median {statistics.median(ratio):.3f} "
        f"(range {min(ratio):.3f}-{max(ratio):.3f}, {len(rows)} rounds)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="mmac's threads (default: one per core)")
    parser.add_argument("--sequences", type=int, default=256)
    args = parser.parse_args()
    if args.rounds < 1 or args.sequences < 1:
        parser.error("--rounds and --sequences must be positive")
    threads = args.threads or mmac.default_threads()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} torch threads, mmac threads {threads}")
    for stem, name in INSTRUCTIONS:
        ins = mmac.load(REPO / "specs" / f"{stem}.mma")[name]
        print(f"1024^3 matmul, {name}")
        summary(name, matmul_rounds(ins, args.rounds, args.threads), ("emulate", "ins.gemm"))

    # the example's model, imported without its float32 settings (they would fix torch to
    # one thread before it loads; this bench measures torch as it is configured)
    settings = types.ModuleType("reproducible")
    settings.pin_float32 = lambda: torch
    sys.modules["reproducible"] = settings
    sys.path.insert(0, str(REPO / "examples"))
    from transformer_numerics import DIGITS, LENGTH, Sorter  # noqa: E402  (a model, untrained)

    torch.manual_seed(0)
    model = Sorter().eval()
    g = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, DIGITS, (args.sequences, LENGTH), generator=g)
    fp8 = mmac.load(REPO / "specs" / "hopper.mma")["wgmma.m64n8k32.f32.e4m3.e4m3"]
    print(f"profiler, transformer on {args.sequences} sequences, {fp8.name} scaling='tensor'")
    rows = profiler_rounds(fp8, "tensor", lambda: tokens, model, args.rounds, args.threads)
    summary("profiler (transformer)", rows, ("emulate", "report=True"))
    f16 = mmac.load(REPO / "specs" / "hopper.mma")["mma.m16n8k16.f32.f16.f16.f32"]
    A = torch.randn(1024, 1024, generator=g)
    B = torch.randn(1024, 1024, generator=g)
    print(f"profiler, 1024^3 matmul, {f16.name}")
    rows = profiler_rounds(f16, None, lambda: A, lambda x: x @ B, args.rounds, args.threads)
    summary("profiler (1024^3 matmul)", rows, ("emulate", "report=True"))


if __name__ == "__main__":
    main()
