#!/usr/bin/env python3
"""The tracked instructions of docs/performance.md, measured in one run: `mmac bench`
(the JIT, one thread, against its own native f32 dot) and mmasim 2.1.1 (PyPI, batched
`dpa` over 100,000 dot products, one torch thread), on each input distribution; and,
beside them, one-step GEMMs (K = k) of mmac and of fastmma, the Rust/PyO3
re-implementation of MMA-Sim (github.com/ztatlock/MMA-Sim, fastmma_rust), on the same
operands, checked bit for bit against each other.

Usage: scripts/bench_targets.sh [--rounds N] [--dist finite,normal] [--no-mmasim]
       [--fastmma PYTHON | --no-fastmma] [--gemm-only] [--gemm-seconds S]
       [--gemm-size MxN] [--gemm-dist normal|finite] [--gemm]
(the shell wrapper creates the virtual environment with mmasim, builds the release CLI
and runs this with it). Each round measures every row on every distribution, mmac then
mmasim; the table gives medians over the rounds of ns per dot and of the ratios taken
within a round. Progress goes to stderr; the Markdown tables and one JSON line per row to
stdout.

The GEMM comparison (run with --fastmma PYTHON or --gemm, or alone with --gemm-only) takes each
tracked instruction that fastmma implements (and Ampere bf16 and Hopper
wgmma.m64n64k16.f32.f16.f16, which docs/performance.md compared before), draws A (M x k),
B (k x N) and C (M x N) once (--gemm-dist: N(0,1) rounded to the formats, or random
finite encodings) and, in every round, measures:
  - fastmma: PYTHON (a Python that imports `fastmma_rust`, the extension fastmma's
    Python wrapper calls) runs the GEMM as fastmma can: every m x n tile of D one
    instruction, all tiles as one batch of its fastest entry for the instruction (the
    one fastmma.rust_ref dispatches to; for Ada k = 32, which its batched entries refuse,
    its heap kernel twice, the two halves of the split K, as its single-tile path
    does). RAYON_NUM_THREADS=1; only the time inside the extension counts (gathering
    the tiles, in NumPy, does not, nor the conversion to f32 that its wrapper does), so
    the figure favours fastmma. M x N is sized (from a short probe in round 1) so that
    this takes about --gemm-seconds (default 1).
  - mmac `gemm` on the same .npy operands, --threads 1, ns per dot from the
    "dot products/s" it prints (the GEMM alone, not the .npy files);
  - mmac `bench` of the instruction (the kernel, --dist as --gemm-dist).
D from fastmma is compared with mmac's D bit for bit (NaNs as equal) in round 1; a
mismatch is reported in the table, never hidden (known: with --gemm-dist finite, fastmma
keeps the old MMA-Sim oracle's exponent -126 for a zero operand, so zero times a huge
value can set the alignment of a fused sum and truncate the other terms; seen on
Ampere tf32). With --gemm-only and no fastmma, mmac's GEMMs are 2048 x 2048 (or
--gemm-size). fastmma itself is not installed by this script: build it from its
repository (`pip install ./fastmma_rust`, maturin, release) into a virtual environment
and name its python, or put that environment at $FASTMMA_VENV (default
target/fastmma-venv), where the shell wrapper finds it.
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
except ImportError:  # only the GEMM comparison needs it
    np = None

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



# ---------------------------------------------------------------------------------------
# One-step GEMMs: mmac `gemm` and `bench` beside fastmma, on the same operands.


class GemmRow:
    """One instruction of the GEMM comparison: mmac's spec and name, its m, n, k, the
    formats of A and B, and how fastmma runs it (`kind` and its parameters, as
    fastmma.rust_ref passes them: nfb and the formats' minimum exponents as MMA-Sim's
    oracle sets them), or None where fastmma does not implement it."""

    def __init__(self, spec, instr, m, n, k, a, b, kind, **params):
        self.spec, self.instr, self.m, self.n, self.k = spec, instr, m, n, k
        self.a, self.b, self.kind, self.params = a, b, kind, params
        self.flush = params.pop("flush_inputs", False)


GEMM_ROWS = [
    # split K (two fused steps of 8), nfb 24, RZ: fastmma's specialised entry
    GemmRow("ampere", "mma.m16n8k16.f32.f16.f16.f32", 16, 8, 16, "f16", "f16", "spec", fn="mma_spec_ampere_f16"),
    GemmRow("ampere", "mma.m16n8k16.f32.bf16.bf16.f32", 16, 8, 16, "bf16", "bf16", "spec", fn="mma_spec_ampere_bf16"),
    GemmRow("ampere", "mma.m16n8k8.f32.tf32.tf32.f32", 16, 8, 8, "tf32", "tf32", "spec", fn="mma_spec_ampere_tf32"),
    # one fused step of 16, nfb 25: fastmma's heap (wgmma) kernel
    GemmRow("hopper", "wgmma.m64n64k16.f32.f16.f16", 64, 64, 16, "f16", "f16", "wgmma", nfb=25, a_min=-14, b_min=-14, out_bits=23),
    # split K (two steps of 16), nfb 13, f32_e8m13 output: fastmma's batched entries assert
    # m*k <= 256, so its heap kernel twice (what its single-tile path computes)
    GemmRow("ada", "mma.m16n8k32.f32.e4m3.e4m3.f32", 16, 8, 32, "e4m3", "e4m3", "wgmma_split_k", nfb=13, a_min=-6, b_min=-6, out_bits=13),
    # GTR-FDPA, groups of 16, e4m3fnuz (min exponent -7)
    GemmRow("cdna3", "v_mfma_f32_16x16x32_fp8_fp8", 16, 16, 32, "fp8", "fp8", "amd_fused_rd", group=16, fp8=True, a_min=-7, b_min=-7),
    # pairwise FTZ multiply-add, groups of 4; fastmma's wrapper zeroes subnormal A, B, C first
    GemmRow("cdna2", "v_mfma_f32_16x16x16bf16_1k", 16, 16, 16, "bf16", "bf16", "amd_pairwise", group=4, flush=True, flush_inputs=True),
]
# tracked instructions fastmma does not implement (fastmma.rust_ref raises NotImplementedError)
FASTMMA_MISSING = [
    ("hopper", "mma.m16n8k16.f32.f16.f16.f32", "no Hopper mma f16 (only wgmma and f64 mma)"),
    (
        "rtx_blackwell",
        "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3",
        "ue8m0 scale factors only",
    ),
]


def _fp8_values(bias, fnuz):
    codes = np.arange(256)
    e, mant = (codes >> 3) & 15, codes & 7
    v = np.where(e == 0, mant / 8 * 2.0 ** (1 - bias), (1 + mant / 8) * 2.0 ** (e - bias))
    v = np.where(codes >> 7 == 1, -v, v)
    nan = codes == 0x80 if fnuz else (codes & 0x7F) == 0x7F
    return np.where(nan, np.nan, v)


def _formats():
    """name -> (storage dtype of the .npy mmac reads, decode: codes -> float64 values or
    None, bits). f16 is stored as float16, every other format as raw unsigned codes."""
    def f16(c):
        return c.astype(np.uint16).view(np.float16).astype(np.float64)

    def bf16(c):
        return (c.astype(np.uint32) << 16).view(np.float32).astype(np.float64)

    def tf32(c):
        return (c.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)

    def table(values):
        return lambda c: values[c]

    return {
        "f16": (np.float16, f16, 16),
        "bf16": (np.uint16, bf16, 16),
        "tf32": (np.uint32, tf32, 32),
        "e4m3": (np.uint8, table(_fp8_values(7, False)), 8),
        "fp8": (np.uint8, table(_fp8_values(8, True)), 8),
    }


def draw_codes(fmt, shape, dist, rng):
    """Encodings of `fmt`: N(0,1) rounded to the nearest value of the format, or random
    finite encodings (as `mmac bench --dist finite`; non-finite ones become zero)."""
    storage, decode, bits = FORMATS[fmt]
    if fmt == "tf32":
        if dist == "normal":
            x = rng.standard_normal(shape, dtype=np.float32).view(np.uint32)
            x = (x + np.uint32(0xFFF) + ((x >> 13) & 1)) & np.uint32(0xFFFFE000)  # RNE
        else:
            x = rng.integers(0, 1 << 19, shape, dtype=np.uint32) << np.uint32(13)
            x[(x >> 23) & 0xFF == 0xFF] = 0
        return x
    codes = np.arange(1 << bits)
    with np.errstate(invalid="ignore"):  # NaN encodings
        values = decode(codes)
    if dist == "normal":
        finite = np.isfinite(values)
        order = np.argsort(values[finite], kind="stable")
        sorted_values, sorted_codes = values[finite][order], codes[finite][order]
        x = rng.standard_normal(shape)
        i = np.clip(np.searchsorted(sorted_values, x), 1, len(sorted_values) - 1)
        nearer_left = x - sorted_values[i - 1] <= sorted_values[i] - x
        c = sorted_codes[np.where(nearer_left, i - 1, i)]
    else:
        c = rng.integers(0, 1 << bits, shape)
        c[~np.isfinite(values[c])] = 0
    c = c.astype({8: np.uint8, 16: np.uint16}[bits])
    return c.view(np.float16) if storage is np.float16 else c


def draw_f32(shape, dist, rng):
    if dist == "normal":
        return rng.standard_normal(shape, dtype=np.float32)
    x = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)
    x[(x >> 23) & 0xFF == 0xFF] = 0
    return x.view(np.float32)


def decode_f32(fmt, codes):
    """The values fastmma's wrapper hands its extension: f32 arrays (exact for every
    format here); tf32 with the low 13 bits cleared, as the wrapper does."""
    storage, decode, _ = FORMATS[fmt]
    raw = codes.view(np.uint16) if storage is np.float16 else codes
    return np.ascontiguousarray(decode(raw).astype(np.float32))


def flush_subnormals(x, min_exp):
    """fastmma's wrapper for CDNA2: x[x.abs() < 2**min_exp] = 0."""
    return np.where(np.abs(x) < np.float32(2.0**min_exp), np.float32(0), x).astype(np.float32)


# Runs in fastmma's Python: tiles the GEMM, runs every tile through the extension in
# batches, reports the time inside the extension and writes D.
FASTMMA_HELPER = r"""
import json, sys, time
import numpy as np
import fastmma_rust as rs

req = json.loads(sys.argv[1])
m, n, k, kind, p = req["m"], req["n"], req["k"], req["kind"], req["params"]
A, B, C = np.load(req["a"]), np.load(req["b"]), np.load(req["c"])
M, N = C.shape
mt, nt = M // m, N // n


def prep(at, bt):
    if kind == "wgmma_split_k":
        h = k // 2
        return (np.ascontiguousarray(at[:, :, :h]), np.ascontiguousarray(at[:, :, h:]),
                np.ascontiguousarray(bt[:, :h]), np.ascontiguousarray(bt[:, h:]))
    return at, bt


def run(ops, ct):
    if kind == "spec":
        return getattr(rs, p["fn"])(ops[0], ops[1], ct)
    if kind == "wgmma":
        return rs.mma_f32_out_wgmma_batched_rayon(
            ops[0], ops[1], ct, p["nfb"], p["a_min"], p["b_min"], -126, p["out_bits"])
    if kind == "wgmma_split_k":
        a1, a2, b1, b2 = ops
        mid = rs.mma_f32_out_wgmma_batched_rayon(
            a1, b1, ct, p["nfb"], p["a_min"], p["b_min"], -126, p["out_bits"])
        return rs.mma_f32_out_wgmma_batched_rayon(
            a2, b2, mid, p["nfb"], p["a_min"], p["b_min"], -126, p["out_bits"])
    if kind == "amd_fused_rd":
        return rs.mma_f32_amd_fused_rd_rayon(
            ops[0], ops[1], ct, p["group"], 24, p["fp8"], p["a_min"], p["b_min"], -126)
    if kind == "amd_pairwise":
        return rs.mma_f32_amd_pairwise_rayon(ops[0], ops[1], ct, p["group"], p["flush"])
    raise ValueError(kind)


Bt = np.ascontiguousarray(B.reshape(k, nt, n).transpose(1, 0, 2))


def tiles(r0, r1):
    r = r1 - r0
    at = np.broadcast_to(A[r0 * m:r1 * m].reshape(r, 1, m, k), (r, nt, m, k))
    bt = np.broadcast_to(Bt, (r, nt, k, n))
    ct = C[r0 * m:r1 * m].reshape(r, m, nt, n).transpose(0, 2, 1, 3)
    at = np.ascontiguousarray(at).reshape(r * nt, m, k)
    bt = np.ascontiguousarray(bt).reshape(r * nt, k, n)
    return prep(at, bt), np.ascontiguousarray(ct).reshape(r * nt, m, n)


run(*tiles(0, 1))  # warm up (rayon's pool, page faults)
D = np.empty((M, N), np.float32)
rows = max(1, req["max_tiles"] // nt)
total = 0.0
for r0 in range(0, mt, rows):
    r1 = min(mt, r0 + rows)
    ops, ct = tiles(r0, r1)
    t = time.perf_counter()
    out = run(ops, ct)
    total += time.perf_counter() - t
    D[r0 * m:r1 * m] = np.asarray(out).reshape(r1 - r0, nt, m, n).transpose(0, 2, 1, 3).reshape(-1, N)
if req.get("d"):
    np.save(req["d"], D)
print(json.dumps({"seconds": total, "dots": M * N, "ns_per_dot": total / (M * N) * 1e9}))
"""


def fastmma_run(python, row, a, b, c, d=None):
    """fastmma's one-step GEMM on the f32 operands in files a, b, c: ns per dot."""
    req = {
        "m": row.m, "n": row.n, "k": row.k, "kind": row.kind, "params": row.params,
        "a": a, "b": b, "c": c, "d": d, "max_tiles": max(1, (1 << 21) // (row.m * row.n)),
    }
    env = dict(os.environ, RAYON_NUM_THREADS="1", OMP_NUM_THREADS="1")
    r = subprocess.run(
        [python, "-c", FASTMMA_HELPER, json.dumps(req)], capture_output=True, text=True, env=env
    )
    if r.returncode != 0:
        raise RuntimeError(f"fastmma failed on {row.instr}:\n{r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])["ns_per_dot"]


def mmac_gemm(mmac, row, a, b, c, d):
    """`mmac gemm --threads 1` on the .npy files: ns per dot from its printed rate."""
    r = subprocess.run(
        [mmac, "gemm", f"specs/{row.spec}.mma", "--instr", row.instr, "--a", a, "--b", b,
         "--c", c, "-o", d, "--threads", "1"],
        capture_output=True, text=True,
    )
    if r.returncode != 0:
        raise RuntimeError(f"mmac gemm failed on {row.instr}:\n{r.stderr.strip()[-2000:]}")
    rate = re.search(r"\(([0-9.eE+-]+) dot products/s\)", r.stderr)
    if not rate:
        raise RuntimeError(f"no dot products/s in mmac gemm's output:\n{r.stderr.strip()}")
    return 1e9 / float(rate.group(1))


def compare_d(mmac_d, fastmma_d):
    """(elements, mismatches, description of the first): bit for bit, NaN equal to NaN."""
    x, y = np.load(mmac_d), np.load(fastmma_d)
    if x.shape != y.shape or x.dtype != np.float32:
        return x.size, x.size, f"shape/dtype {x.shape} {x.dtype} vs {y.shape} {y.dtype}"
    bad = (x.view(np.uint32) != y.view(np.uint32)) & ~(np.isnan(x) & np.isnan(y))
    count = int(bad.sum())
    if not count:
        return x.size, 0, ""
    i, j = np.argwhere(bad)[0]
    return x.size, count, (
        f"first at ({i}, {j}): mmac {float(x[i, j]):.9g} (0x{x.view(np.uint32)[i, j]:08x}), "
        f"fastmma {float(y[i, j]):.9g} (0x{y.view(np.uint32)[i, j]:08x})"
    )


def gemm_shape(row, dots):
    """M x N (multiples of m and n, about square) with about `dots` outputs."""
    side = math.sqrt(max(dots, row.m * row.n))
    M = max(row.m, round(side / row.m) * row.m)
    N = max(row.n, round(dots / M / row.n) * row.n)
    return M, N


def write_operands(row, M, N, dist, folder, rng):
    """A, B, C as mmac reads them and, for fastmma, as f32 (files; paths returned)."""
    A = draw_codes(row.a, (M, row.k), dist, rng)
    B = draw_codes(row.b, (row.k, N), dist, rng)
    C = draw_f32((M, N), dist, rng)
    Af, Bf, Cf = decode_f32(row.a, A), decode_f32(row.b, B), C
    if row.flush:
        Af, Bf, Cf = flush_subnormals(Af, -126), flush_subnormals(Bf, -126), flush_subnormals(C, -126)
    paths = {}
    for name, arr in [("A", A), ("B", B), ("C", C), ("Af", Af), ("Bf", Bf)]:
        paths[name] = os.path.join(folder, f"{name}.npy")
        np.save(paths[name], arr)
    if row.flush:
        paths["Cf"] = os.path.join(folder, "Cf.npy")
        np.save(paths["Cf"], Cf)
    else:
        paths["Cf"] = paths["C"]
    paths["D"] = os.path.join(folder, "D.npy")
    paths["Dfm"] = os.path.join(folder, "Dfm.npy")
    return paths


def gemm_comparison(args, fastmma, mmasim_ns=None):
    """The one-step GEMM table: fastmma, mmac gemm and mmac bench per instruction; and,
    given the kernel table's mmasim medians (`mmasim_ns`, (instruction, dist) -> ns per
    dot), mmac's one-step GEMMs against mmasim."""
    rows = GEMM_ROWS
    rng = np.random.default_rng(1)
    work = tempfile.TemporaryDirectory(prefix="bench_targets_gemm_")
    setup = {}  # instr -> (M, N, paths, check)
    seen = {}  # instr -> list of (fastmma, gemm, bench)
    failed = {}
    for r in range(args.rounds):
        for row in rows:
            if row.instr in failed:
                continue
            folder = os.path.join(work.name, re.sub(r"[^A-Za-z0-9]+", "_", row.instr))
            try:
                if row.instr not in setup:
                    os.makedirs(folder)
                    if args.gemm_size:
                        M, N = (int(v) for v in args.gemm_size.lower().split("x"))
                        M, N = max(row.m, M // row.m * row.m), max(row.n, N // row.n * row.n)
                    elif fastmma:
                        # probe: ~2^19 dots, then size for --gemm-seconds of fastmma
                        M, N = gemm_shape(row, 1 << 19)
                        probe = write_operands(row, M, N, args.gemm_dist, folder, rng)
                        ns = fastmma_run(fastmma, row, probe["Af"], probe["Bf"], probe["Cf"])
                        M, N = gemm_shape(row, min(args.gemm_seconds * 1e9 / ns, 1 << 26))
                    else:
                        M, N = gemm_shape(row, 2048 * 2048)
                    paths = write_operands(row, M, N, args.gemm_dist, folder, rng)
                    setup[row.instr] = [M, N, paths, None]
                M, N, paths, check = setup[row.instr]
                bench, _ = mmac_bench(args.mmac, row.spec, row.instr, args.gemm_dist)
                gemm = mmac_gemm(args.mmac, row, paths["A"], paths["B"], paths["C"], paths["D"])
                peer = None
                if fastmma:
                    d = paths["Dfm"] if check is None else None
                    peer = fastmma_run(fastmma, row, paths["Af"], paths["Bf"], paths["Cf"], d)
                    if check is None:
                        check = setup[row.instr][3] = compare_d(paths["D"], paths["Dfm"])
                        os.remove(paths["Dfm"])
            except (RuntimeError, subprocess.SubprocessError, OSError) as e:
                print(f"error: {e}", file=sys.stderr)
                failed[row.instr] = str(e).splitlines()[0]
                continue
            seen.setdefault(row.instr, []).append((peer, gemm, bench))
            print(
                f"round {r + 1} gemm {row.spec} {row.instr[:40]} {M}x{N}x{row.k}: "
                f"mmac gemm {gemm:.1f} ns/dot, bench {bench:.1f}"
                + (f", fastmma {peer:.1f} ({peer / gemm:.1f}x gemm)" if peer else "")
                + (f", D {'equal' if not check[1] else 'DIFFERS'}" if check else ""),
                file=sys.stderr,
            )
    work.cleanup()
    med = statistics.median
    print()
    print(
        f"One-step GEMMs (K = k), 1 thread, --gemm-dist {args.gemm_dist}, medians of "
        f"{args.rounds} round(s); fastmma: the time inside its extension only"
    )
    print()
    print(
        "| instruction | M x N x K | fastmma ns/dot | mmac gemm ns/dot | mmac bench ns/dot "
        "| fastmma / gemm | fastmma / bench | gemm / bench | D bit-identical |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    lines = []
    for row in rows:
        if row.instr in failed:
            print(f"| {row.spec} `{row.instr}` | - | - | - | - | - | - | - | failed: {failed[row.instr]} |")
            lines.append({"gemm": True, "spec": row.spec, "instruction": row.instr, "error": failed[row.instr]})
            continue
        runs = seen[row.instr]
        M, N, _, check = setup[row.instr]
        gemm, bench = med(x[1] for x in runs), med(x[2] for x in runs)
        peer = med(x[0] for x in runs) if fastmma else None
        vs_gemm = med(x[0] / x[1] for x in runs) if fastmma else None
        vs_bench = med(x[0] / x[2] for x in runs) if fastmma else None
        g_b = med(x[1] / x[2] for x in runs)
        if check is None:
            same = "-"
        elif check[1] == 0:
            same = f"yes ({check[0]} elements)"
        else:
            same = f"**NO: {check[1]} of {check[0]} differ**, {check[2]}"
        fm = lambda v, f: f.format(v) if v is not None else "-"
        print(
            f"| {row.spec} `{row.instr}` | {M} x {N} x {row.k} | {fm(peer, '{:.1f}')} | {gemm:.1f} "
            f"| {bench:.1f} | {fm(vs_gemm, '{:.1f}x')} | {fm(vs_bench, '{:.1f}x')} | {g_b:.2f}x | {same} |"
        )
        lines.append(
            {
                "gemm": True, "spec": row.spec, "instruction": row.instr, "M": M, "N": N, "K": row.k,
                "dist": args.gemm_dist, "rounds": len(runs), "fastmma_ns_per_dot": peer,
                "mmac_gemm_ns_per_dot": gemm, "mmac_bench_ns_per_dot": bench,
                "fastmma_over_gemm": vs_gemm, "fastmma_over_bench": vs_bench, "gemm_over_bench": g_b,
                "d_elements": check[0] if check else None, "d_mismatches": check[1] if check else None,
                "d_first_mismatch": check[2] if check else None,
            }
        )
    if fastmma:
        print()
        for spec, instr, why in FASTMMA_MISSING:
            print(f"- {spec} `{instr}`: not in fastmma ({why})")
    if mmasim_ns:
        print()
        print(
            f"One-step GEMMs against mmasim 2.1.1 (its batched `dpa`, measured in the kernel "
            f"table of this run on --dist {args.gemm_dist}; medians)"
        )
        print()
        print("| instruction | mmasim ns/dot | mmac gemm ns/dot | mmasim / gemm |")
        print("|---|---|---|---|")
        for row in rows:
            peer = mmasim_ns.get((row.instr, args.gemm_dist))
            if peer is None or row.instr not in seen:
                continue
            gemm = med(x[1] for x in seen[row.instr])
            print(f"| {row.spec} `{row.instr}` | {peer:.0f} | {gemm:.1f} | {peer / gemm:.0f}x |")
            lines.append(
                {
                    "gemm_vs_mmasim": True, "spec": row.spec, "instruction": row.instr,
                    "dist": args.gemm_dist, "mmasim_ns_per_dot": peer, "mmac_gemm_ns_per_dot": gemm,
                    "mmasim_over_gemm": peer / gemm,
                }
            )
    for line in lines:
        print(json.dumps(line))


def kernel_table(args):
    """The kernels of the tracked instructions against their targets and mmasim."""
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
    return {
        (row[1], dist): med(r[2] for r in seen[(row[:2], dist)])
        for row in ROWS
        for dist in dists
        if seen[(row[:2], dist)][0][2]
    }


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]),
    )
    ap.add_argument("--mmac", default="target/release/mmac")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dist", default="finite,normal", help="distributions of the kernel table")
    ap.add_argument("--no-mmasim", action="store_true", help="the kernel table without mmasim")
    ap.add_argument(
        "--fastmma", metavar="PYTHON",
        help="a Python that imports fastmma_rust: adds the GEMM comparison with fastmma",
    )
    ap.add_argument("--no-fastmma", action="store_true", help="ignore --fastmma")
    ap.add_argument(
        "--gemm-only", action="store_true",
        help="only the one-step GEMM comparison (no kernel table, no mmasim)",
    )
    ap.add_argument(
        "--gemm-seconds", type=float, default=1.0,
        help="size each GEMM for about this many seconds of fastmma (default 1)",
    )
    ap.add_argument("--gemm-size", metavar="MxN", help="fixed M x N of D instead")
    ap.add_argument("--gemm-dist", choices=["normal", "finite"], default="normal")
    ap.add_argument(
        "--gemm", action="store_true",
        help="the one-step GEMM comparison without fastmma too (mmac against mmasim)",
    )
    args = ap.parse_args()
    fastmma = None if args.no_fastmma else args.fastmma
    mmasim_ns = None
    if not args.gemm_only:
        mmasim_ns = kernel_table(args)
    if fastmma or args.gemm_only or args.gemm:
        if np is None:
            sys.exit(
                "error: the GEMM comparison needs numpy in the Python that runs this "
                "(scripts/bench_targets.sh: set PYTHON or FASTMMA_VENV to one that has it)"
            )
        global FORMATS
        FORMATS = _formats()
        gemm_comparison(args, fastmma, mmasim_ns)


if __name__ == "__main__":
    main()
