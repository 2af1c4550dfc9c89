"""How a GEMM library drives an MMA instruction on float operands (for ``mmac.torch``).

:class:`GemmKernel` computes ``D = A @ B + C`` for float64 matrices of any shape, the way a
tiled GPU GEMM kernel uses the instruction:

- **padding**: M, K and N are padded with zeros to multiples of m, k and n (the edge tiles)
  and D is cropped back;
- **rounding**: A and B are rounded to nearest even into a's and b's formats, a warning
  counting the finite values beyond a format's range (they become Inf or NaN);
- **scaling recipes** (``scaling=``) for FP8/FP6/FP4 operands:

  - ``"tensor"``: one scale per operand, ``scale = fmt_max / amax`` in float32 (not
    rounded to a power of two: Transformer Engine's and torchao's default), the operand
    multiplied by it in float32, clamped to ±fmt_max (torchao's saturated cast) and
    rounded; D is multiplied by ``inv_a * inv_b`` (float32 reciprocals, their product
    first, as cuBLASLt's alpha);
  - ``"row"``: the same per row of A and per column of B (torchao's rowwise recipe); D is
    multiplied by ``inv_a[i]`` and then by ``inv_b[j]`` in float32;
  - ``"block"``: the block scale factors of a block-scaled instruction, per ``block``
    elements along K of each row of A and each column of B. E8M0 scales as the OCP MX spec
    computes them: ``X = 2^(floor(log2(amax)) - emax_elem)`` (clamped to E8M0's
    2^-127..2^127; an all-zero block takes 1, a block with Inf or NaN takes NaN), elements
    ``V / X`` clamped to ±fmt_max and rounded. UE4M3 scales (NVFP4) as NVIDIA's two-level
    recipe: a per-tensor float32 ``g = 448 * fmt_max / amax``, block scales
    ``ue4m3(amax_block / fmt_max * g)``, elements ``V * (g / scale)`` in float32, clamped
    and rounded; D is multiplied by ``(1/g_a) * (1/g_b)``.

  With a recipe, the instruction runs from C = +0 and the bias C is added in float32 after
  the inverse scales (the epilogue of cuBLASLt's FP8 GEMM);
- **kernel-level accumulation**: ``split_k=S`` cuts K (padded, in k-steps) into slices of
  ``ceil(steps / S)`` k-steps (the last one shorter; fewer than S slices when K is short),
  ``promote_every=N`` into slices of N elements of K (N a multiple of k: DeepSeek-V3's
  128, cuBLAS's FP8 "fast accumulation" off). Each slice is one GEMM from C = +0, and the
  slices' D are summed in float32 in slice order (``((D0 + D1) + D2) + ...``), then the
  bias C is added in float32 (the reduction's epilogue).

Without a recipe or slices, C (rounded into c's format) is the instruction's accumulator
input, and D comes back in d's dtype; otherwise D is float32.

A sparse instruction's A is the GEMM's second operand (:func:`weight_as_a`: the weight of
``x @ W.T``), by its place: D^T = B^T A^T + C^T, the weight checked against the pattern
after rounding (:func:`check_weight`).
"""

from __future__ import annotations

import math
import warnings

import ml_dtypes
import numpy as np

from . import _dtypes

SCALINGS = (None, "tensor", "row", "block")

# NVFP4's per-tensor scale puts the largest block scale at UE4M3's maximum
_UE4M3_MAX = 448.0


class GemmKernel:
    """``D = A @ B + C`` through ``ins`` as a GEMM kernel runs it (see the module doc).

    >>> kernel = GemmKernel(ins, scaling="tensor", promote_every=128)   # doctest: +SKIP
    >>> D = kernel.run(A, B, C)     # float64 arrays of any shape in, D as a NumPy array
    """

    def __init__(self, ins, *, scaling=None, split_k=1, promote_every=None, threads=None, engine="auto"):
        self.ins = ins
        self.scaling = _checked_scaling(ins, scaling)
        if isinstance(split_k, bool) or not isinstance(split_k, int) or split_k < 1:
            raise ValueError(f"split_k must be a positive integer, found {split_k!r}")
        if promote_every is not None:
            if (
                isinstance(promote_every, bool)
                or not isinstance(promote_every, int)
                or promote_every < 1
                or promote_every % ins.k
            ):
                raise ValueError(
                    f"promote_every must be a positive multiple of `{ins.name}`'s k = {ins.k} "
                    f"(elements of K between promotions), found {promote_every!r}"
                )
            if split_k != 1:
                raise ValueError("give split_k or promote_every, not both")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be a positive integer or None (one per core), found {threads!r}")
        if engine not in ("auto", "jit", "interp"):
            raise ValueError(f"engine must be 'auto', 'jit' or 'interp', found {engine!r}")
        self.split_k = split_k
        self.promote_every = promote_every
        self.threads = threads
        self.engine = engine

    def k_slices(self, k_padded: int) -> list:
        """The ``(start, stop)`` column ranges of K, in order, that run as separate GEMMs."""
        k = self.ins.k
        steps = k_padded // k
        if self.promote_every is not None:
            length = self.promote_every // k
        elif self.split_k > 1:
            length = -(-steps // self.split_k)
        else:
            length = max(steps, 1)
        return [(lo * k, min(lo + length, steps) * k) for lo in range(0, steps, length)]

    def run(self, A: np.ndarray, B: np.ndarray, C: np.ndarray | None = None) -> np.ndarray:
        """D for float64 ``A`` (M x K), ``B`` (K x N) and ``C`` (broadcast to M x N, or
        None): in d's dtype without a recipe or slices, else float32."""
        if self.ins.sparsity is not None:
            return weight_as_a(self._run, A, B, C)
        return self._run(A, B, C)

    def _run(self, A: np.ndarray, B: np.ndarray, C: np.ndarray | None) -> np.ndarray:
        """:meth:`run` with A as the instruction's A (a sparse one's: the pruned weight)."""
        ins = self.ins
        M, K = A.shape
        N = B.shape[1]
        if K == 0:  # no products: one k-step of zeros, which adds nothing to C
            A, B = np.zeros((M, ins.k)), np.zeros((ins.k, N))
        A = _padded(A, ins.m, ins.k)
        B = _padded(B, ins.k, ins.n)
        slices = self.k_slices(A.shape[1])
        bias = None if C is None else np.broadcast_to(C, (M, N))
        c_in = None
        if bias is not None and self.scaling is None and len(slices) == 1:
            c_in = self._round(_padded(np.asarray(bias, np.float64), ins.m, ins.n), "c", M * N)
        a, b, sa, sb, dequantize = self._quantized(A, B, (M * K, K * N))
        if ins.sparsity is not None:
            # the pattern as the instruction sees the weight: rounded into a's format
            values = a.view(np.float32) if a.dtype == np.uint32 else a.astype(np.float64)
            check_weight(ins, values != 0, f" after rounding into {ins.format('a')['name']}")
        parts = []
        for lo, hi in slices:
            scales = {}
            if sa is not None:
                block = ins.scale["block"]
                scales = {"sa": sa[:, lo // block : hi // block], "sb": sb[lo // block : hi // block]}
            parts.append(
                ins.gemm(
                    np.ascontiguousarray(a[:, lo:hi]),
                    np.ascontiguousarray(b[lo:hi]),
                    c_in,
                    threads=self.threads,
                    engine=self.engine,
                    **scales,
                )
            )
        D = parts[0]
        if len(parts) > 1:
            D = parts[0].astype(np.float32)
            for part in parts[1:]:
                D = D + part.astype(np.float32)
        if dequantize is not None:
            D = dequantize(D.astype(np.float32))
        D = D[:M, :N]
        if bias is not None and c_in is None:
            D = D.astype(np.float32) + np.asarray(bias, np.float64).astype(np.float32)
        return np.ascontiguousarray(D)

    # ------------------------------------------------------------ operands

    def _quantized(self, A, B, sizes):
        """A and B in a's and b's formats, the scale factors (block recipe) and the
        function that takes D back to unscaled values (tensor and row recipes, NVFP4)."""
        if self.scaling is None:
            return self._round(A, "a", sizes[0]), self._round(B, "b", sizes[1]), None, None, None
        if self.scaling == "block":
            return self._block_scaled(A, B, sizes)
        axis = None if self.scaling == "tensor" else 1
        a, inv_a = _amax_scaled(A, self.ins.format("a"), axis)
        b, inv_b = _amax_scaled(B, self.ins.format("b"), None if axis is None else 0)
        if axis is None:
            alpha = np.float32(inv_a * inv_b)
            dequantize = lambda D: D * alpha  # noqa: E731
        else:
            dequantize = lambda D: (D * inv_a[:, None]) * inv_b[None, :]  # noqa: E731
        return self._round(a, "a", sizes[0]), self._round(b, "b", sizes[1]), None, None, dequantize

    def _block_scaled(self, A, B, sizes):
        """Block scale factors and elements for a block-scaled instruction."""
        ins = self.ins
        block = ins.scale["block"]
        scale_fmt = ins.format("sa")
        if _dtypes.natural_dtype(scale_fmt) == np.dtype(ml_dtypes.float8_e8m0fnu):
            a, sa = mx_block_scaled(A, ins.format("a"), block)
            bt, sbt = mx_block_scaled(B.T, ins.format("b"), block)
            return self._round(a, "a", sizes[0]), self._round(bt.T, "b", sizes[1]), sa, sbt.T, None
        a, sa, g_a = nvfp4_block_scaled(A, ins.format("a"), block)
        bt, sbt, g_b = nvfp4_block_scaled(B.T, ins.format("b"), block)
        alpha = np.float32(np.float32(1) / g_a) * np.float32(np.float32(1) / g_b)
        return (
            self._round(a, "a", sizes[0]),
            self._round(bt.T, "b", sizes[1]),
            sa,
            sbt.T,
            lambda D: D * np.float32(alpha),
        )

    def _round(self, x: np.ndarray, operand: str, values: int) -> np.ndarray:
        """``x`` (padded) rounded into the instruction's format of ``operand``, with a
        warning that counts the finite values beyond the format's range (they become Inf
        or NaN) of the operand's ``values`` (NumPy's own overflow warnings left out)."""
        fmt = self.ins.format(operand)
        with np.errstate(over="ignore", invalid="ignore"):
            rounded = _dtypes.round_to_format(x, fmt, operand)
        if _dtypes.natural_dtype(fmt) is not None:
            lost = int(np.count_nonzero(np.isfinite(x) & ~np.isfinite(rounded.astype(np.float64))))
            if lost:
                warnings.warn(
                    f"mmac.torch.emulate: {lost} of {values} values of {operand} are beyond "
                    f"{fmt['name']}'s range and became Inf or NaN; scale them into range first "
                    "(emulate's scaling=)",
                    stacklevel=5,
                )
        return rounded


def _checked_scaling(ins, scaling):
    """``scaling`` checked against the instruction (clear errors for what cannot work)."""
    if scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {SCALINGS}, found {scaling!r}")
    if ins.scale is not None:
        if scaling != "block":
            s = ins.scale
            raise ValueError(
                f"`{ins.name}` is block-scaled ({s['format']} per {s['block']} elements of k): "
                "emulate needs scaling='block' to compute its scale factors"
            )
        scale_fmt = ins.format("sa")
        if _dtypes.natural_dtype(scale_fmt) != np.dtype(ml_dtypes.float8_e8m0fnu) and not _is_ue4m3(scale_fmt):
            raise ValueError(
                f"scaling='block' computes ue8m0 (MX) or ue4m3 (NVFP4) scales; `{ins.name}` "
                f"has {scale_fmt['name']}"
            )
    elif scaling == "block":
        raise ValueError(
            f"scaling='block' takes block-scaled instructions; `{ins.name}` has no scale "
            "factors (use scaling='tensor' or 'row')"
        )
    if scaling is not None:
        for op in ("a", "b"):
            fmt = ins.format(op)
            if fmt["kind"] != "float" or fmt["bits"] > 8 or _dtypes.natural_dtype(fmt) is None:
                raise ValueError(
                    f"scaling={scaling!r} scales FP8/FP6/FP4 operands; `{ins.name}` has "
                    f"{op} = {fmt['name']}"
                )
    return scaling


def _is_ue4m3(fmt: dict) -> bool:
    return fmt["kind"] == "float" and not fmt["signed"] and (fmt["exponent"], fmt["mantissa"], fmt["bias"]) == (4, 3, 7)


def format_max(fmt: dict) -> float:
    """The largest finite value of a float format that has a NumPy/ml_dtypes dtype."""
    return float(ml_dtypes.finfo(_dtypes.natural_dtype(fmt)).max)


def _amax_scaled(x: np.ndarray, fmt: dict, axis):
    """``x`` scaled by ``fmt_max / amax`` (per tensor, or along ``axis``) in float32 and
    clamped to ±fmt_max, with the float32 inverse scales (an amax of 0 or a non-finite
    amax takes scale 1)."""
    top = np.float32(format_max(fmt))
    x32 = x.astype(np.float32)
    amax = np.max(np.abs(x32), axis=axis) if x32.size else np.float32(0)
    amax = np.asarray(amax, np.float32)
    usable = (amax > 0) & np.isfinite(amax)
    scale = np.where(usable, top / np.where(usable, amax, np.float32(1)), np.float32(1)).astype(np.float32)
    inv = (np.float32(1) / scale).astype(np.float32)
    scaled = x32 * (scale if axis is None else np.expand_dims(scale, axis))
    return np.clip(scaled, -top, top), inv


def mx_block_scaled(x: np.ndarray, fmt: dict, block: int):
    """OCP MX quantization of the rows of ``x`` (M x K, K a multiple of ``block``): the
    elements ``V / X`` clamped to ±fmt_max (float64, to be rounded into ``fmt``), and the
    E8M0 scales ``X`` (M x K/block)."""
    top = format_max(fmt)
    emax_elem = math.floor(math.log2(top))
    rows, cols = x.shape
    blocks = x.reshape(rows, cols // block, block)
    amax = np.max(np.abs(blocks), axis=2)
    finite = np.isfinite(amax)
    _, exp = np.frexp(np.where(finite & (amax > 0), amax, 1.0))
    shared = np.clip(exp - 1 - emax_elem, -127, 127)  # frexp: amax = f * 2^exp, f in [0.5, 1)
    shared = np.where(amax > 0, shared, 0)
    X = np.ldexp(1.0, shared)
    X = np.where(finite, X, np.nan)
    elements = np.where(finite[..., None], blocks / np.where(finite, X, 1.0)[..., None], 0.0)
    elements = np.clip(elements, -top, top).reshape(rows, cols)
    return elements, X.astype(ml_dtypes.float8_e8m0fnu)


def nvfp4_block_scaled(x: np.ndarray, fmt: dict, block: int):
    """NVFP4 two-level quantization of the rows of ``x``: the elements (float32 values to
    round into ``fmt``), the UE4M3 block scales as raw encodings (``uint8``) and the
    per-tensor float32 encode scale ``g``."""
    top = np.float32(format_max(fmt))
    rows, cols = x.shape
    x32 = x.astype(np.float32)
    amax = np.float32(np.max(np.abs(x32))) if x32.size else np.float32(0)
    g = np.float32(_UE4M3_MAX) * top / amax if (amax > 0 and np.isfinite(amax)) else np.float32(1)
    g = np.float32(g)
    blocks = x32.reshape(rows, cols // block, block)
    block_amax = np.max(np.abs(blocks), axis=2)
    wanted = (block_amax / top * g).astype(np.float32)
    scale = np.clip(wanted, 0, _UE4M3_MAX).astype(ml_dtypes.float8_e4m3fn)  # RNE, saturated
    scale_values = scale.astype(np.float32)
    encode = np.where(scale_values > 0, g / np.where(scale_values > 0, scale_values, 1), 0).astype(np.float32)
    elements = np.clip(blocks * encode[..., None], -top, top).reshape(rows, cols)
    return elements, scale.view(np.uint8), g


def _padded(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """``x`` with zero rows and columns added up to multiples of ``rows`` and ``cols``."""
    r, c = x.shape
    pr, pc = (-r) % rows, (-c) % cols
    if pr == 0 and pc == 0:
        return x
    out = np.zeros((r + pr, c + pc), dtype=x.dtype)
    out[:r, :c] = x
    return out


class PatternError(ValueError):
    """A weight that a sparse instruction cannot take as its A: a row breaks the pattern."""


def weight_as_a(run, A: np.ndarray, B: np.ndarray, C: np.ndarray | None) -> np.ndarray:
    """``D = A @ B + C`` through a sparse instruction, whose A is the GEMM's second
    operand: ``run(B^T, A^T, C^T)`` gives D^T, each element the sparse dot product of a
    row of B^T (the weight's row in ``x @ W.T``, a linear layer; a convolution's filter)
    with a row of A. Which operand is pruned is fixed by its place, never by the values."""
    M, N = A.shape[0], B.shape[1]
    Ct = None if C is None else np.broadcast_to(C, (M, N)).T
    return np.ascontiguousarray(run(np.ascontiguousarray(B.T), np.ascontiguousarray(A.T), Ct).T)


def check_weight(ins, nonzero: np.ndarray, how: str) -> None:
    """Raise :class:`PatternError` naming the first row and group of the weight
    (``nonzero``: its nonzero elements, rows x K with K a multiple of the group) that hold
    more than the pattern keeps."""
    s = ins.sparsity
    unit = 2 if s["pairs"] else 1
    span = s["group"] * unit
    rows, k = nonzero.shape
    units = nonzero.reshape(rows, k // span, s["group"], unit).any(axis=-1)
    counts = units.sum(axis=-1)
    broken = np.argwhere(counts > s["kept"])
    if broken.size == 0:
        return
    row, group = (int(v) for v in broken[0])
    what = "pairs holding a nonzero element" if s["pairs"] else "nonzero elements"
    pattern = f"{s['kept']} of every {s['group']}" + (" pairs" if s["pairs"] else "")
    raise PatternError(
        f"`{ins.name}` is sparse ({pattern} along K): emulate runs it with the matmul's "
        "second operand as its A (x @ W.T: the weight W, a linear layer's; a convolution's "
        f"filters), and row {row} of that weight breaks the pattern{how}: group {group} "
        f"(columns {group * span}..{group * span + span - 1}) holds {int(counts[row, group])} "
        f"{what}, at most {s['kept']}; prune the weight to {pattern} along its input "
        "dimension, or emulate a dense instruction"
    )


def int_range(fmt: dict) -> tuple:
    """The smallest and largest value of an integer format."""
    bits = fmt["bits"]
    if fmt["signed"]:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def integer_gemm(
    ins, A: np.ndarray, B: np.ndarray, C: np.ndarray | None = None, *, threads=None, engine="auto"
) -> np.ndarray:
    """``D = A @ B + C`` for integer arrays through an integer instruction, padded with
    zeros as :class:`GemmKernel` pads; D in d's dtype (int32 for s32: the instruction's
    wrapping or saturation is its own). A value outside a's, b's or c's range is a
    ``ValueError`` with the count (an integer is never rounded)."""
    if ins.sparsity is not None:
        run = lambda A, B, C: _integer_gemm(ins, A, B, C, threads, engine)  # noqa: E731
        return weight_as_a(run, A, B, C)
    return _integer_gemm(ins, A, B, C, threads, engine)


def _integer_gemm(ins, A, B, C, threads, engine) -> np.ndarray:
    """:func:`integer_gemm` with A as the instruction's A (a sparse one's: the pruned
    weight)."""
    M, K = A.shape
    N = B.shape[1]
    if K == 0:  # no products: one k-step of zeros, which adds nothing to C
        A, B = np.zeros((M, ins.k), np.int64), np.zeros((ins.k, N), np.int64)
    operands = []
    for x, op in ((A, "a"), (B, "b"), (C, "c")):
        if x is None:
            operands.append(None)
            continue
        fmt = ins.format(op)
        lo, hi = int_range(fmt)
        x = np.asarray(x, np.int64)
        outside = int(np.count_nonzero((x < lo) | (x > hi)))
        if outside:
            raise ValueError(
                f"{outside} of {x.size} values of {op} lie outside {fmt['name']}'s range "
                f"[{lo}, {hi}]: `{ins.name}` cannot take them"
            )
        rows, cols = (ins.m, ins.k) if op == "a" else ((ins.k, ins.n) if op == "b" else (ins.m, ins.n))
        operands.append(_padded(x, rows, cols).astype(_dtypes.natural_dtype(fmt)))
    if ins.sparsity is not None:
        check_weight(ins, operands[0] != 0, "")
    D = ins.gemm(*operands, threads=threads, engine=engine)
    return np.ascontiguousarray(D[:M, :N])
