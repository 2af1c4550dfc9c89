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
3. Convolution and attention: a conv2d (batch 8, 32 -> 64 channels, 32 x 32, 3 x 3,
   padding 1: one implicit GEMM of M = 8192, K = 288, N = 64) under ``emulate`` against
   ``ins.gemm`` of the same shape on operands already in the formats (what im2col, the
   rounding and the layout changes add to the GEMM), and ``scaled_dot_product_attention``
   (batch 1, 8 heads, 512 x 64) with ``attention="plain"``, ``"flash"`` (blocks of 64)
   and ``"math"`` (torch's decomposition, its matmuls through the instruction).

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


def conv_attention_rounds(ins, rounds: int, threads) -> None:
    """Medians of the conv2d against its GEMM, and of the three attention variants."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(8, 32, 32, 32, generator=g)
    w = torch.randn(64, 32, 3, 3, generator=g)
    m, k, n = 8 * 32 * 32, 32 * 9, 64
    a = mmac.torch.round_to_format(torch.randn(m, k, generator=g).double().numpy(), ins.format("a"))
    b = mmac.torch.round_to_format(torch.randn(k, n, generator=g).double().numpy(), ins.format("b"))
    q, kk, v = (torch.randn(1, 8, 512, 64, generator=g) for _ in range(3))
    F = torch.nn.functional
    times = {"conv2d": [], "its GEMM": [], "plain": [], "flash": [], "math": []}
    for r in range(-1, rounds):
        with torch.no_grad(), mmac.torch.emulate(ins, threads=threads):
            conv_s, _ = _timed(lambda: F.conv2d(x, w, padding=1))
        gemm_s, _ = _timed(lambda: ins.gemm(a, b, pad=True, threads=threads))
        attention = {}
        for variant in ("plain", "flash", "math"):
            with torch.no_grad(), mmac.torch.emulate(ins, threads=threads, attention=variant, block=64):
                attention[variant], _ = _timed(lambda: F.scaled_dot_product_attention(q, kk, v))
        if r < 0:
            continue
        for key, t in (("conv2d", conv_s), ("its GEMM", gemm_s), *attention.items()):
            times[key].append(t)
        print(f"  round {r + 1}: conv2d {conv_s:.3f} s (its GEMM {gemm_s:.3f} s), attention plain "
              f"{attention['plain']:.3f} s, flash {attention['flash']:.3f} s, math {attention['math']:.3f} s")
    med = {key: statistics.median(t) for key, t in times.items()}
    print(f"conv2d median {med['conv2d']:.3f} s against its GEMM {med['its GEMM']:.3f} s "
          f"(ratio {med['conv2d'] / med['its GEMM']:.2f}); attention medians: plain {med['plain']:.3f} s, "
          f"flash {med['flash']:.3f} s, math {med['math']:.3f} s ({rounds} rounds)")


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
    parser.add_argument("--only-conv-attention", action="store_true",
                        help="measurement 3 only")
    args = parser.parse_args()
    if args.rounds < 1 or args.sequences < 1:
        parser.error("--rounds and --sequences must be positive")
    threads = args.threads or mmac.default_threads()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} torch threads, mmac threads {threads}")
    f16 = mmac.load(REPO / "specs" / "hopper.mma")["mma.m16n8k16.f32.f16.f16.f32"]
    print(f"conv2d and attention, {f16.name}")
    conv_attention_rounds(f16, args.rounds, args.threads)
    if args.only_conv_attention:
        return
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
