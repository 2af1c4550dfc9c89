"""Sparse instructions from Python: ``meta=`` with the stored elements equals a dense 2:4 A
compressed and the CLI's ``mmac mma --meta``; a row that breaks the pattern is named; the
torch emulation runs a 2:4 pruned linear layer through a sparse instruction."""

from __future__ import annotations

import numpy as np
import pytest

import mmac
from conftest import run_cli

SPARSE = "mma.sp.m16n8k32.f32.f16.f16.f32"


def pruned(rng, rows: int, cols: int) -> np.ndarray:
    """A float16 matrix with 2 nonzero elements in every group of 4 columns."""
    a = np.zeros((rows, cols), dtype=np.float16)
    for i in range(rows):
        for g in range(cols // 4):
            cols_kept = rng.choice(4, 2, replace=False)
            a[i, 4 * g + cols_kept] = rng.standard_normal(2).astype(np.float16)
    return a


def compressed(a: np.ndarray):
    """The nonzero elements of each row and their columns (2 per group of 4)."""
    rows = a.shape[0]
    meta = np.stack([np.flatnonzero(row) for row in a]).astype(np.uint8)
    stored = np.take_along_axis(a, meta.astype(np.int64), axis=1)
    assert stored.shape == (rows, a.shape[1] // 2)
    return stored, meta


def test_sparsity_is_described(spec):
    ins = spec("ampere")[SPARSE]
    assert ins.sparsity == {"kept": 2, "group": 4, "pairs": False, "over": "selected"}
    assert ins.k == 32 and ins.shape == (16, 8, 32)
    assert spec("ampere")["mma.m16n8k16.f32.f16.f16.f32"].sparsity is None
    pairs = spec("ampere")["mma.sp.m16n8k64.s32.s4.s4.s32"].sparsity
    assert pairs["pairs"] is True


def test_meta_equals_a_dense_a_and_the_cli(spec, cli, tmp_path):
    rng = np.random.default_rng(5)
    ins = spec("hopper")[SPARSE]
    a = pruned(rng, 16, 32)
    b = rng.standard_normal((32, 8)).astype(np.float16)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    stored, meta = compressed(a)
    d_meta = ins.mma(stored, b, c, meta=meta)
    d_dense = ins.mma(a, b, c)
    assert d_meta.dtype == np.float32 and d_meta.shape == (16, 8)
    np.testing.assert_array_equal(d_meta.view(np.uint32), d_dense.view(np.uint32))
    for name, x in (("a", stored), ("b", b), ("c", c), ("e", meta)):
        np.save(tmp_path / f"{name}.npy", x)
    out = tmp_path / "d.npy"
    r = run_cli(
        cli, "mma", "specs/hopper.mma", "--instr", SPARSE, "--a", tmp_path / "a.npy",
        "--b", tmp_path / "b.npy", "--c", tmp_path / "c.npy", "--meta", tmp_path / "e.npy", "-o", out,
    )
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(out).view(np.uint32), d_meta.view(np.uint32))
    # one element by hand: the dot product of the row's stored elements and B's rows
    i, j = 3, 5
    d = ins.dot(c[i, j], stored[i], b[:, j], meta=meta[i])
    assert d.view(np.uint32) == d_meta[i, j].view(np.uint32)
    # gemm over K = 64 walks two steps, positions counted in the whole K
    a2 = pruned(rng, 32, 64)
    b2 = rng.standard_normal((64, 16)).astype(np.float16)
    s2, m2 = compressed(a2)
    np.testing.assert_array_equal(
        ins.gemm(s2, b2, meta=m2).view(np.uint32), ins.gemm(a2, b2).view(np.uint32)
    )


def test_broken_patterns_are_named(spec):
    rng = np.random.default_rng(6)
    ins = spec("hopper")[SPARSE]
    a = pruned(rng, 16, 32)
    b = rng.standard_normal((32, 8)).astype(np.float16)
    c = np.zeros((16, 8), np.float32)
    a[7, 8:11] = 1.0
    with pytest.raises(ValueError, match=r"row 7 of A .* group 2 \(columns 8\.\.11\)"):
        ins.mma(a, b, c)
    stored, meta = compressed(pruned(rng, 16, 32))
    meta[2, 1] = meta[2, 0]
    with pytest.raises(ValueError, match="row 2 of the positions"):
        ins.mma(stored, b, c, meta=meta)
    with pytest.raises(ValueError, match="unsigned integer array"):
        ins.mma(stored, b, c, meta=meta.astype(np.int32))
    with pytest.raises(ValueError, match="give meta="):
        ins.dot(0.0, stored[0], b[:, 0])
    dense = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    with pytest.raises(ValueError, match="dense: it takes no meta="):
        dense.dot(0.0, b[:16, 0], b[:16, 1], meta=np.arange(16, dtype=np.uint8))


def test_torch_emulation_runs_a_pruned_linear_layer_on_a_sparse_instruction(spec):
    torch = pytest.importorskip("torch")
    import mmac.torch

    rng = np.random.default_rng(7)
    # K = 32: one step of the sparse instruction per element
    w = torch.tensor(pruned(rng, 16, 32).astype(np.float32))
    x = torch.tensor(rng.standard_normal((8, 32)).astype(np.float16).astype(np.float32))
    sparse = spec("ampere")[SPARSE]
    with mmac.torch.emulate(sparse):
        y = torch.nn.functional.linear(x, w)
    # each element: the sparse dot product of the weight's row with the input's row
    for i, j in ((0, 0), (3, 11), (7, 15)):
        row = w[j].numpy().astype(np.float16)
        cols = np.flatnonzero(row).astype(np.uint8)
        want = sparse.dot(np.float32(0), row[cols], x[i].numpy().astype(np.float16), meta=cols)
        assert np.float32(y[i, j].item()).view(np.uint32) == want.view(np.uint32)
    # the dense instruction of the same architecture walks every column: other bits
    with mmac.torch.emulate(spec("ampere")["mma.m16n8k16.f32.f16.f16.f32"]):
        y_dense = torch.nn.functional.linear(x, w)
    assert (y_dense != y).any()
