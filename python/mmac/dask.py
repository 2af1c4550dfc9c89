"""GEMMs bigger than one machine: an instruction's GEMM on Dask arrays.

``gemm(ins, A, B, C=None)`` tiles M and N across the workers: each task computes one
block of D with :meth:`mmac.Instruction.gemm` on a block of rows of A (all of K), a
block of columns of B (all of K) and the matching block of C. K is never split: the
order of the k-steps is part of the result. Blocks are multiples of the instruction's m
and n, so every output element sees exactly the chain of dot-product-adds it sees in
``ins.gemm`` on the whole matrices, and D is bit-identical to it::

    import dask.array as da, mmac, mmac.dask
    ins = mmac.load("specs/hopper.mma")["mma.m16n8k16.f32.f16.f16.f32"]
    A = da.from_array(a, chunks=(256, -1)); B = da.from_array(b, chunks=(-1, 256))
    D = mmac.dask.gemm(ins, A, B).compute()     # with a dask.distributed Client, on its workers

Instructions travel to the workers as their spec's text and name; each worker process
checks a spec and compiles an instruction once.
"""

from __future__ import annotations

import re

import dask.array as da
import numpy as np

from . import _dtypes

__all__ = ["gemm"]


def _block_chunks(total: int, unit: int, preferred: int) -> tuple:
    """Chunks of ``total`` (a multiple of ``unit``) that are multiples of ``unit``, each
    the multiple of ``unit`` nearest to ``preferred`` (the last may be smaller)."""
    size = max(unit, int(round(preferred / unit)) * unit)
    chunks = [size] * (total // size)
    if total % size:
        chunks.append(total % size)
    return tuple(chunks)


def _check(ins, M: int, K: int, K2: int, N: int, meta):
    if meta is not None:
        if meta.shape != (M, K):
            raise ValueError(f"meta is {meta.shape} but A's stored elements are {M} x {K}: give one position per element")
        K = K2  # (the native GEMM checks the stored elements against B's K)
    if K != K2:
        hint = ""
        if ins.sparsity is not None:
            hint = "; a sparse instruction takes A dense and pruned (M x K), or its stored elements with meta="
        raise ValueError(f"A is {M} x {K} but B is {K2} x {N}: A's columns must equal B's rows (K){hint}")
    for what, got, unit in (
        ("M (rows of A)", M, ins.m),
        ("N (columns of B)", N, ins.n),
        ("K (columns of A)", K, ins.k),
    ):
        if got == 0 or got % unit:
            raise ValueError(f"{what} = {got} is not a positive multiple of `{ins.name}`'s {unit}")


# a row named in an error of a block's GEMM (numbered within the block)
_ROW = re.compile(r"\brow (\d+) of (A|the positions)\b")


def _block(ins, threads, engine, layout, numbers, *blocks):
    """One block of D on a worker: ``layout`` names which optional operands follow;
    ``numbers`` are the block's rows' numbers in A, by which an error names a row."""
    blocks = list(blocks)
    a, b = blocks.pop(0), blocks.pop(0)
    c = blocks.pop(0) if "c" in layout else None
    sa = blocks.pop(0) if "s" in layout else None
    sb = blocks.pop(0) if "s" in layout else None
    meta = blocks.pop(0) if "m" in layout else None
    try:
        return ins.gemm(a, b, c, sa, sb, meta=meta, threads=threads, engine=engine)
    except ValueError as e:
        start = int(numbers[0])
        raise ValueError(_ROW.sub(lambda m: f"row {int(m[1]) + start} of {m[2]}", str(e))) from None


def gemm(ins, A, B, C=None, sa=None, sb=None, *, meta=None, tile=None, threads=None, engine="auto"):
    """D = ``ins.gemm(A, B, C, sa, sb, meta=meta)`` as a Dask array, block by block (see
    the module doc). ``tile=(rows, columns)`` sets the block of D each task computes
    (multiples of the instruction's m and n); by default the blocks follow A's row chunks
    and B's column chunks, rounded to multiples of m and n. ``threads`` and ``engine`` are
    passed to each block's ``gemm``. Operands may be Dask arrays or anything
    ``dask.array`` takes; their dtypes follow the rules of :meth:`mmac.Instruction.gemm`,
    a sparse A's too (dense and pruned, or its stored elements with ``meta=``, chunked
    with A's rows). An error names a row of A as the whole matrix numbers it."""
    A = da.asarray(A)
    B = da.asarray(B)
    if A.ndim != 2 or B.ndim != 2:
        raise ValueError(f"A and B must be 2-D matrices, found shapes {A.shape} and {B.shape}")
    (M, K), (K2, N) = A.shape, B.shape
    if meta is not None:
        meta = da.asarray(meta)
    _check(ins, M, K, K2, N, meta)
    if tile is None:
        rows = _block_chunks(M, ins.m, A.chunks[0][0])
        cols = _block_chunks(N, ins.n, B.chunks[1][0])
    else:
        tm, tn = tile
        if tm <= 0 or tn <= 0 or tm % ins.m or tn % ins.n:
            raise ValueError(
                f"tile {tile} must be positive multiples of `{ins.name}`'s m = {ins.m} and n = {ins.n}"
            )
        rows = _block_chunks(M, ins.m, tm)
        cols = _block_chunks(N, ins.n, tn)
    # the rows' numbers (a block's first is where its errors count from), then A and B
    # (A's columns are its stored elements' with meta=, not B's rows: an index of their own)
    numbers = da.arange(M, chunks=(rows,))
    args = [numbers, "i", A.rechunk((rows, (K,))), "iq", B.rechunk(((K2,), cols)), "kj"]
    layout = ""
    if C is not None:
        C = da.asarray(C)
        if C.shape != (M, N):
            raise ValueError(f"C is {C.shape[0]} x {C.shape[1]} but A x B is {M} x {N}")
        args += [C.rechunk((rows, cols)), "ij"]
        layout += "c"
    if (sa is None) != (sb is None):
        raise ValueError("give both sa and sb, or neither")
    if sa is not None:
        sa, sb = da.asarray(sa), da.asarray(sb)
        args += [sa.rechunk((rows, (sa.shape[1],))), "il", sb.rechunk(((sb.shape[0],), cols)), "lj"]
        layout += "s"
    if meta is not None:
        args += [meta.rechunk((rows, (K,))), "iq"]
        layout += "m"
    dtype = _dtypes.result_dtype(ins.format("d"))
    return da.blockwise(
        _block,
        "ij",
        ins,
        None,
        threads,
        None,
        engine,
        None,
        layout,
        None,
        *args,
        concatenate=True,
        dtype=dtype,
        meta=np.empty((0, 0), dtype=dtype),
    )
