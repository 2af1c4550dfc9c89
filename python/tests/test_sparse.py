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
    with pytest.raises(ValueError, match=r"row 2 of the positions.* group 0 \(columns 0\.\.3\): .* do not increase"):
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


def test_run_and_report_take_meta(cli, spec, tmp_path):
    rng = np.random.default_rng(8)
    ins = spec("hopper")[SPARSE]
    row = pruned(rng, 1, 32)[0]
    b = rng.standard_normal(32).astype(np.float16)
    stored, cols = compressed(row[None, :])
    stored, cols = stored[0], cols[0]
    # run with meta= and with the dense row (compressed) give dot's d and the CLI's trace
    want = ins.dot(np.float32(0.5), stored, b, meta=cols)
    traced = ins.run(np.float32(0.5), stored, b, meta=cols, trace=True)
    assert traced.encoding == int(want.view(np.uint32))
    assert ins.run(np.float32(0.5), row, b).encoding == traced.encoding
    # pad=True fills a short dense row with +0
    short = row.copy()
    short[28:] = 0
    assert ins.run(0.5, short[:28], b, pad=True).encoding == ins.run(0.5, short, b).encoding
    first = traced.stages[0]
    assert first.stage == "sparsity" and first.text.startswith(
        "sparse: a's elements at columns " + ",".join(map(str, cols))
    )
    hex_a = ",".join(f"{int(v):04x}" for v in stored.view(np.uint16))
    hex_b = ",".join(f"{int(v):04x}" for v in b.view(np.uint16))
    out = run_cli(
        cli, "run", "specs/hopper.mma", "--instr", SPARSE, "--c", "3f000000", "--a", hex_a,
        "--b", hex_b, "--meta", ",".join(map(str, cols)), "--trace",
    )
    assert out.returncode == 0, out.stderr
    assert str(traced) + "\n" == out.stdout
    # a dense row that breaks the pattern names the group; meta on a dense instruction
    broken = row.copy()
    broken[4:8] = 1.0
    with pytest.raises(ValueError, match=r"a: group 1 \(columns 4\.\.7\) holds 4 nonzero"):
        ins.run(0.0, broken, b)
    with pytest.raises(ValueError, match="dense: it takes no meta="):
        spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"].run(0.0, b[:16], b[:16], meta=cols[:16])
    # report: the stored elements with meta= as the dense pruned A
    A = pruned(rng, 16, 64)
    B = rng.standard_normal((64, 8)).astype(np.float16)
    S, E = compressed(A)
    dense, sparse = ins.report(A, B), ins.report(S, B, meta=E)
    np.testing.assert_array_equal(dense.d.view(np.uint32), sparse.d.view(np.uint32))
    assert (dense.max_abs, dense.mean_rel) == (sparse.max_abs, sparse.mean_rel)


def test_dot_meta_is_checked_as_gemm_checks_it(spec):
    ins = spec("hopper")[SPARSE]
    stored = np.ones(16, np.float16)
    b = np.ones(32, np.float16)
    cols = np.array([c for g in range(8) for c in (4 * g, 4 * g + 2)], np.uint8)
    assert ins.dot(0.0, stored, b, meta=cols) == ins.dot(0.0, stored, b, meta=list(map(int, cols)))
    for bad, match in (
        (cols.astype(np.int64), "unsigned integer array, not int64"),
        (cols.reshape(2, 8), r"1-D .* found shape \(2, 8\)"),
        (np.where(np.arange(16) == 3, 40, cols).astype(np.uint8), "positions of A's stored elements"),
        (cols[::-1].copy(), "positions of A's stored elements"),
    ):
        with pytest.raises(ValueError, match=match):
            ins.dot(0.0, stored, b, meta=bad)


def test_narrow_unsigned_ml_dtypes_are_positions(spec):
    """ml_dtypes' uint2 and uint4 are unsigned integer dtypes (NumPy sees kind "V"); its
    int4 is not."""
    import ml_dtypes

    rng = np.random.default_rng(11)
    ins = spec("ampere")["mma.sp.m16n8k16.f32.f16.f16.f32"]
    stored, meta = compressed(pruned(rng, 16, 16))
    b = rng.standard_normal((16, 8)).astype(np.float16)
    want = ins.gemm(stored, b, meta=meta).view(np.uint32)
    got = ins.gemm(stored, b, meta=meta.astype(ml_dtypes.uint4)).view(np.uint32)
    np.testing.assert_array_equal(got, want)
    row = meta[3].astype(ml_dtypes.uint4)
    assert ins.dot(0.0, stored[3], b[:, 0], meta=row) == ins.dot(0.0, stored[3], b[:, 0], meta=meta[3])
    with pytest.raises(ValueError, match="unsigned integer array, not int4"):
        ins.gemm(stored, b, meta=meta.astype(ml_dtypes.int4))


def test_emulate_runs_the_weight_as_a_whatever_the_input(spec):
    torch = pytest.importorskip("torch")
    import mmac.torch
    from mmac.torch import PatternError

    rng = np.random.default_rng(9)
    sparse = spec("ampere")[SPARSE]
    w = pruned(rng, 16, 32).astype(np.float32)
    # an input that is itself 2:4 (as after a ReLU): the weight is still A
    x = pruned(rng, 8, 32).astype(np.float32)
    with mmac.torch.emulate(sparse):
        y = torch.nn.functional.linear(torch.tensor(x), torch.tensor(w))
    for i, j in ((0, 0), (5, 9)):
        row = w[j].astype(np.float16)
        cols = np.flatnonzero(row).astype(np.uint8)
        want = sparse.dot(np.float32(0), row[cols], x[i].astype(np.float16), meta=cols)
        assert np.float32(y[i, j].item()).view(np.uint32) == want.view(np.uint32)
    # a weight with one broken row is refused, naming the operator, the row and the group,
    # even for a 2:4 input
    w[7, 8:11] = 1.0
    with mmac.torch.emulate(sparse), pytest.raises(
        PatternError, match=r"aten\.\w+: .* row 7 of that weight breaks the pattern after rounding into f16: group 2 \(columns 8\.\.11\)"
    ):
        torch.nn.functional.linear(torch.tensor(x), torch.tensor(w))
    # the pattern as the instruction sees it: a value that rounds to zero in f16 is a zero
    w[7, 8:11] = (1e-12, 0.5, 0.5)
    w[7, 11] = 0.0
    with mmac.torch.emulate(sparse):
        torch.nn.functional.linear(torch.tensor(x), torch.tensor(w))
    # integer matmuls through a sparse integer instruction: the weight (second operand) as A
    int_sparse = spec("ampere")["mma.sp.m16n8k32.s32.s8.s8.s32"]
    wi = (pruned(rng, 16, 32) * 8).astype(np.int8)
    xi = rng.integers(-8, 8, (16, 32), dtype=np.int8)
    with mmac.torch.emulate(sparse, int_ins=int_sparse):
        yi = torch._int_mm(torch.tensor(xi), torch.tensor(wi).T)
    np.testing.assert_array_equal(yi.numpy(), xi.astype(np.int32) @ wi.astype(np.int32).T)
    wi[3, 0:4] = 1
    with mmac.torch.emulate(sparse, int_ins=int_sparse), pytest.raises(PatternError, match=r"row 3 of that weight"):
        torch._int_mm(torch.tensor(xi), torch.tensor(wi).T)
