"""The Python `gemm` against the CLI's compute on the same 1024^3 f16 GEMM.

For docs/performance.md. Each round runs `mmac gemm` (its stderr gives the GEMM's own
time, file I/O excluded) and then `ins.gemm` on the same matrices in this process (wall
time of the call: operand conversion, the GEMM and D's conversion), with the same thread
count; the ratio is taken within the round and the medians are printed.

    python scripts/bench_python_gemm.py PATH/TO/release/mmac [--rounds 5] [--threads N]

With ``--concurrent`` it measures instead whether Python threads compute at once: each
round times two ``ins.gemm(A, B, threads=1)`` calls in a row, then the same two calls
from two Python threads started together, on ``--size`` matrices (512 is a good size);
the speedup is the first time over the second (2.0 on two free cores; 1.0 if the calls
serialise), and every D is checked against the first.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

import mmac

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "specs" / "hopper.mma"
NAME = "mma.m16n8k16.f32.f16.f16.f32"


def concurrent(ins, A, B, rounds: int) -> None:
    """Two calls in a row against two Python threads calling at once (see the module doc)."""
    import threading

    want = ins.gemm(A, B, threads=1).view(np.uint32)
    ratios = []
    for r in range(rounds):
        started = time.perf_counter()
        for _ in range(2):
            assert (ins.gemm(A, B, threads=1).view(np.uint32) == want).all()
        in_a_row = time.perf_counter() - started
        results = []
        barrier = threading.Barrier(3)

        def call():
            barrier.wait()
            results.append(ins.gemm(A, B, threads=1).view(np.uint32))

        threads = [threading.Thread(target=call) for _ in range(2)]
        for t in threads:
            t.start()
        barrier.wait()
        started = time.perf_counter()
        for t in threads:
            t.join()
        at_once = time.perf_counter() - started
        assert len(results) == 2 and all((x == want).all() for x in results)
        ratios.append(in_a_row / at_once)
        print(f"round {r + 1}: two in a row {in_a_row:.3f} s, two threads at once {at_once:.3f} s, "
              f"speedup {in_a_row / at_once:.2f}x")
    print(f"median speedup of two Python threads (threads=1 each): {statistics.median(ratios):.2f}x "
          f"({A.shape[0]} x {A.shape[1]} x {B.shape[1]})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cli", type=Path, help="a release build of mmac")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="default: one per core")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--concurrent", action="store_true",
                        help="two Python threads against two calls in a row (see above)")
    args = parser.parse_args()
    n = args.size
    rng = np.random.default_rng(1024)
    A = rng.standard_normal((n, n)).astype(np.float16)
    B = rng.standard_normal((n, n)).astype(np.float16)
    ins = mmac.load(SPEC)[NAME]
    ins.gemm(A[:16, :16], B[:16, :8])  # compile the kernel (the CLI's timer excludes it too)
    if args.concurrent:
        concurrent(ins, A, B, args.rounds)
        return
    threads = ["--threads", str(args.threads)] if args.threads else []
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        a, b, d = (Path(tmp) / f for f in ("A.npy", "B.npy", "D.npy"))
        np.save(a, A)
        np.save(b, B)
        for r in range(args.rounds):
            out = subprocess.run(
                [str(args.cli), "gemm", str(SPEC), "--instr", NAME, "--a", str(a), "--b", str(b), "-o", str(d), *threads],
                capture_output=True, text=True, check=True,
            )
            cli_s = float(re.search(r"dot products in ([0-9.]+) s", out.stderr).group(1))
            started = time.perf_counter()
            D = ins.gemm(A, B, threads=args.threads)
            py_s = time.perf_counter() - started
            same = bool((D.view(np.uint32) == np.load(d).view(np.uint32)).all())
            rows.append((cli_s, py_s, py_s / cli_s))
            print(f"round {r + 1}: CLI {cli_s:.3f} s, Python {py_s:.3f} s, ratio {py_s / cli_s:.3f}, identical D: {same}")
    cli_m, py_m, ratio_m = (statistics.median(c) for c in zip(*rows))
    print(f"median: CLI {cli_m:.3f} s, Python {py_m:.3f} s, ratio of the rounds' ratios {ratio_m:.3f} "
          f"({n}^3, {args.threads or mmac.default_threads()} threads)")


if __name__ == "__main__":
    main()
