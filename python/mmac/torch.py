"""Run a PyTorch model's matrix multiplies through an MMA instruction.

``emulate(ins)`` is a context manager (a ``TorchDispatchMode``). While it is active, the
ATen operators that a model's ``matmul``, ``@``, ``mm``, ``bmm``, ``addmm`` and
``nn.Linear`` dispatch to are computed by ``ins.gemm``, bit for bit as the instruction
computes them::

    import mmac, mmac.torch
    ins = mmac.load("specs/hopper.mma")["wgmma.m64n8k32.f32.e4m3.e4m3"]
    with torch.no_grad(), mmac.torch.emulate(ins):
        logits = model(x)

What an emulated operator does, as a GPU GEMM kernel would:

- A and B are cast to the instruction's a and b formats, rounding to nearest even
  (values beyond the format's range become what the format's conversion gives: inf, or
  NaN for formats without infinities; nothing saturates). C, when the operator has one
  (the bias of ``addmm``/``baddbmm``, times ``beta``), is cast to c's format the same way
  and accumulated into; without one, C is +0.
- M, N and K are padded with zeros to multiples of the instruction's m, n and k (the
  edge tiles of a tiled kernel), the GEMM runs with K in increasing k-steps, and D is
  cropped back.
- The result has the instruction's d format as its dtype (``torch.float32`` for an f32
  accumulator); ``alpha`` other than 1 multiplies D afterwards, in that dtype.

Covered operators: ``aten.mm``, ``aten.addmm``, ``aten.bmm``, ``aten.baddbmm``,
``aten.mv``, ``aten.dot`` (``torch.matmul``, ``@`` and ``F.linear`` decompose into
these). Every other operator (convolutions, ``einsum`` paths that do not reach these,
element-wise operations, reductions) runs natively, in the model's own dtypes.
Block-scaled instructions and integer instructions are refused: they need scale factors
or a quantization scheme that a float model does not have.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _dtypes

__all__ = ["emulate", "round_to_format"]

aten = torch.ops.aten


def round_to_format(x: np.ndarray, fmt: dict) -> np.ndarray:
    """Float values rounded to nearest even into a float format, as raw-encoding-ready
    arrays: the format's dtype, or for tf32 (no dtype) ``uint32`` encodings."""
    natural = _dtypes.natural_dtype(fmt)
    if fmt["kind"] != "float":
        raise ValueError(f"cannot round floats into the integer format `{fmt['name']}`")
    if natural is not None:
        return x.astype(natural)
    if (fmt["exponent"], fmt["mantissa"], fmt["bias"], fmt["ignore_low"]) == (8, 10, 127, 13):
        # tf32: an f32 whose 13 low bits the hardware ignores; round them off, ties to even
        bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
        rounded = ((bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)).astype(np.uint32)
        nan = np.isnan(np.asarray(x, dtype=np.float32))
        rounded[nan] = np.uint32(0x7FC00000)
        return rounded
    raise ValueError(f"no rounding into `{fmt['name']}` is available (it has no NumPy dtype)")


class emulate(TorchDispatchMode):
    """Under this mode, matrix multiplies run through ``ins`` (see the module doc).

    ``threads`` and ``engine`` are passed to :meth:`mmac.Instruction.gemm`."""

    def __init__(self, ins, *, threads=None, engine: str = "auto"):
        super().__init__()
        if ins.scale is not None:
            raise ValueError(
                f"`{ins.name}` is block-scaled: emulate takes instructions without scale factors"
            )
        for op in ("a", "b", "c", "d"):
            fmt = ins.format(op)
            if fmt["kind"] != "float":
                raise ValueError(
                    f"`{ins.name}` has {op} = {fmt['name']}, an integer format: emulate "
                    "takes float instructions"
                )
        if ins.dtype("d") is None:
            raise ValueError(f"`{ins.name}`'s d format {ins.types['d']} has no dtype")
        self.ins = ins
        self.threads = threads
        self.engine = engine
        self.calls = 0
        """Operators computed through the instruction so far."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        handler = _HANDLERS.get(func.overloadpacket)
        if handler is None:
            return func(*args, **kwargs)
        self.calls += 1
        return handler(self, *args, **kwargs)

    # ------------------------------------------------------------ one GEMM

    def _gemm(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None) -> torch.Tensor:
        """D = A @ B (+ C) through the instruction, for 2-D A (M x K) and B (K x N)."""
        ins = self.ins
        M, K = a.shape
        N = b.shape[1]
        pm, pk, pn = (-M) % ins.m, (-K) % ins.k, (-N) % ins.n
        fa, fb, fc = ins.format("a"), ins.format("b"), ins.format("c")
        A = np.zeros((M + pm, K + pk), dtype=np.float64)
        B = np.zeros((K + pk, N + pn), dtype=np.float64)
        A[:M, :K] = _float_values(a)
        B[:K, :N] = _float_values(b)
        args = [round_to_format(A, fa), round_to_format(B, fb)]
        if c is not None:
            C = np.zeros((M + pm, N + pn), dtype=np.float64)
            C[:M, :N] = _float_values(torch.broadcast_to(c, (M, N)))
            args.append(round_to_format(C, fc))
        D = ins.gemm(*args, threads=self.threads, engine=self.engine)
        return _dtypes.numpy_to_tensor(np.ascontiguousarray(D[:M, :N]), like=a)

    def _product(self, a, b, c=None, beta=1, alpha=1):
        """``alpha * (a @ b) + beta * c`` with the product through the instruction."""
        bias = None if c is None or beta == 0 else (c if beta == 1 else c * beta)
        if alpha == 1:
            return self._gemm(a, b, bias)
        d = self._gemm(a, b, None) * alpha
        return d if bias is None else d + bias.to(d.dtype)


def _float_values(t: torch.Tensor) -> np.ndarray:
    """A tensor's values as float64 (exact for every float dtype torch has)."""
    return _dtypes.tensor_to_numpy(t).astype(np.float64)


def _mm(mode, a, b):
    return mode._product(a, b)


def _addmm(mode, c, a, b, *, beta=1, alpha=1):
    return mode._product(a, b, c, beta, alpha)


def _bmm(mode, a, b):
    return torch.stack([mode._product(a[i], b[i]) for i in range(a.shape[0])])


def _baddbmm(mode, c, a, b, *, beta=1, alpha=1):
    c = torch.broadcast_to(c, (a.shape[0], a.shape[1], b.shape[2]))
    return torch.stack([mode._product(a[i], b[i], c[i], beta, alpha) for i in range(a.shape[0])])


def _mv(mode, a, v):
    return mode._product(a, v.reshape(-1, 1)).reshape(-1)


def _dot(mode, x, y):
    return mode._product(x.reshape(1, -1), y.reshape(-1, 1)).reshape(())


_HANDLERS = {
    aten.mm: _mm,
    aten.addmm: _addmm,
    aten.bmm: _bmm,
    aten.baddbmm: _baddbmm,
    aten.mv: _mv,
    aten.dot: _dot,
}
