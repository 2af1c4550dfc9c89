"""`mmac.dask.gemm` on a LocalCluster of two worker processes: bit-identical to
`ins.gemm` on the same data."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster, wait

import mmac.dask

HOPPER_F16 = "mma.m16n8k16.f32.f16.f16.f32"


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as c:
            yield c


def test_dask_gemm_is_bit_identical_to_gemm(client, spec):
    ins = spec("hopper")[HOPPER_F16]
    rng = np.random.default_rng(11)
    A = rng.standard_normal((96, 64)).astype(np.float16)
    B = rng.standard_normal((64, 40)).astype(np.float16)
    C = rng.standard_normal((96, 40)).astype(np.float32)
    want = ins.gemm(A, B, C)
    D = mmac.dask.gemm(ins, da.from_array(A, chunks=(32, 32)), da.from_array(B, chunks=(16, 16)), da.from_array(C))
    assert D.dtype == np.float32 and D.shape == (96, 40)
    assert D.numblocks == (3, 3)  # M and N tiled, K whole
    got = D.compute()
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    # with explicit tiles, both workers hold blocks of D
    tiled = mmac.dask.gemm(ins, A, B, tile=(48, 8)).persist()
    wait(tiled)
    assert tiled.numblocks == (2, 5)
    located = client.who_has(tiled)
    assert len({w for ws in located.values() for w in ws}) == 2
    np.testing.assert_array_equal(tiled.compute().view(np.uint32), ins.gemm(A, B).view(np.uint32))


def test_dask_block_scaled_gemm(client, spec):
    ins = spec("blackwell")["tcgen05.mma.block_scale.m64n8k32.kind::mxf8f6f4.block32.f32.e4m3.e2m1.ue8m0"]
    rng = np.random.default_rng(12)
    A = rng.integers(0, 0x7F, (128, 64), dtype=np.uint8)
    B = rng.integers(0, 0x10, (64, 16), dtype=np.uint8)
    SA = rng.integers(124, 131, (128, 2), dtype=np.uint8)
    SB = rng.integers(124, 131, (2, 16), dtype=np.uint8)
    want = ins.gemm(A, B, None, SA, SB)
    got = mmac.dask.gemm(ins, da.from_array(A, chunks=(64, 64)), B, None, SA, SB, tile=(64, 8)).compute()
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_dask_shapes_are_checked_before_any_work(spec):
    ins = spec("hopper")[HOPPER_F16]
    A = da.zeros((32, 24), dtype=np.float16)
    B = da.zeros((24, 8), dtype=np.float16)
    with pytest.raises(ValueError, match=r"K \(columns of A\) = 24 is not a positive multiple"):
        mmac.dask.gemm(ins, A, B)
    with pytest.raises(ValueError, match="must be positive multiples of"):
        mmac.dask.gemm(ins, da.zeros((32, 16), np.float16), da.zeros((16, 8), np.float16), tile=(20, 8))


def test_dask_sparse_gemm_takes_meta_and_names_rows_of_a(client, spec):
    ins = spec("hopper")["mma.sp.m16n8k32.f32.f16.f16.f32"]
    rng = np.random.default_rng(13)
    A = np.zeros((128, 64), np.float16)
    for i in range(128):
        for g in range(16):
            A[i, 4 * g + rng.choice(4, 2, replace=False)] = rng.standard_normal(2)
    B = rng.standard_normal((64, 16)).astype(np.float16)
    E = np.stack([np.flatnonzero(row) for row in A]).astype(np.uint8)
    S = np.take_along_axis(A, E.astype(np.int64), axis=1)
    want = ins.gemm(A, B)
    dense = mmac.dask.gemm(ins, da.from_array(A, chunks=(32, 64)), B).compute()
    stored = mmac.dask.gemm(ins, da.from_array(S, chunks=(32, 32)), B, meta=da.from_array(E, chunks=(64, 32)))
    np.testing.assert_array_equal(dense.view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(stored.compute().view(np.uint32), want.view(np.uint32))
    # a row that breaks the pattern is named as A numbers it, not as its block does
    A[83, 4:8] = 1.0
    with pytest.raises(ValueError, match=r"row 83 of A breaks"):
        mmac.dask.gemm(ins, da.from_array(A, chunks=(32, 64)), B).compute()
    E[70, 1] = E[70, 0]
    with pytest.raises(ValueError, match=r"row 70 of the positions"):
        mmac.dask.gemm(ins, S, B, meta=E, tile=(32, 8)).compute()
    # the stored elements without their positions: the hint says what a sparse A takes
    with pytest.raises(ValueError, match="or its stored elements with meta="):
        mmac.dask.gemm(ins, S, B)
