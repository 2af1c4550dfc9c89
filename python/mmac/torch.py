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
  NaN for formats without infinities; nothing saturates, and a warning gives the count of
  finite values that did not fit). C, when the operator has one (the bias of
  ``addmm``/``baddbmm``/``addmv``/``addr``/``addbmm``, times ``beta``), is cast to c's
  format the same way and accumulated into; without one, C is +0.
- M, N and K are padded with zeros to multiples of the instruction's m, n and k (the
  edge tiles of a tiled kernel), the GEMM runs with K in increasing k-steps, and D is
  cropped back.
- The result has the dtype torch gives the operator for its inputs (``torch.bfloat16``
  for bf16 operands, ``torch.float16`` for f16, ...): D, in the instruction's d format,
  is rounded to it to nearest even, as a GEMM library writes its output. Operands of a
  dtype torch has no matmul for (FP8) give D in d's dtype. ``alpha`` other than 1
  multiplies D in d's dtype before that rounding.
- ``out=`` tensors are filled as torch fills them (resized, and of the result's dtype).

Covered operators: ``aten.mm``, ``aten.addmm``, ``aten.bmm``, ``aten.baddbmm``,
``aten.mv``, ``aten.addmv``, ``aten.dot``, ``aten.addr`` (an outer product: a GEMM with
K = 1) and ``aten.addbmm`` (one GEMM over the batch's K concatenated, so the sum over the
batch is the instruction's own accumulation). ``torch.matmul``, ``@``, ``F.linear``,
``inner``, ``tensordot`` and ``einsum`` reach these through their decompositions.
Complex operands run as four real GEMMs through the instruction (``re = Ar Br - Ai Bi``,
``im = Ar Bi + Ai Br``, a complex C entering the first of each pair), combined in d's
dtype. Integer operands are refused: an integer matmul needs an integer instruction
through ``ins.gemm``.

Not emulated, and warned about once per operator when they run under ``emulate``:
convolutions (``aten.convolution`` and its backends), the fused attention kernels
(``scaled_dot_product_attention``'s flash, efficient and math paths), ``torch._int_mm``
and ``torch._scaled_mm``. Every other operator (element-wise operations, reductions)
runs natively, in the model's own dtypes. Block-scaled instructions and integer
instructions are refused: they need scale factors or a quantization scheme that a float
model does not have.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _dtypes
from ._dtypes import round_to_format

__all__ = ["emulate", "round_to_format"]

aten = torch.ops.aten


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
        self._warned = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        packet = func.overloadpacket
        handler = _HANDLERS.get(packet)
        if handler is None:
            if packet in _NATIVE_MATMULS and packet not in self._warned:
                self._warned.add(packet)
                warnings.warn(
                    f"mmac.torch.emulate: {packet} runs natively, not through `{self.ins.name}`",
                    stacklevel=2,
                )
            return func(*args, **kwargs)
        out = kwargs.pop("out", None)
        _check_operands(packet, args)
        self.calls += 1
        result = handler(self, *args, **kwargs)
        if out is None:
            return result
        if out.dtype != result.dtype:
            raise RuntimeError(
                f"{packet}: expected out= of dtype {result.dtype} (what torch returns for "
                f"these operands), found {out.dtype}"
            )
        out.resize_(result.shape)
        out.copy_(result)
        return out

    # ------------------------------------------------------------ one GEMM

    def _gemm(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None) -> torch.Tensor:
        """D = A @ B (+ C) through the instruction, for real 2-D A (M x K) and B (K x N),
        in d's dtype."""
        ins = self.ins
        M, K = a.shape
        N = b.shape[1]
        pm, pk, pn = (-M) % ins.m, (-K) % ins.k, (-N) % ins.n
        A = np.zeros((M + pm, K + pk), dtype=np.float64)
        B = np.zeros((K + pk, N + pn), dtype=np.float64)
        A[:M, :K] = _float_values(a)
        B[:K, :N] = _float_values(b)
        args = [self._round(A, "a"), self._round(B, "b")]
        if c is not None:
            C = np.zeros((M + pm, N + pn), dtype=np.float64)
            C[:M, :N] = _float_values(torch.broadcast_to(c, (M, N)))
            args.append(self._round(C, "c"))
        D = ins.gemm(*args, threads=self.threads, engine=self.engine)
        return _dtypes.numpy_to_tensor(np.ascontiguousarray(D[:M, :N]), like=a)

    def _round(self, x: np.ndarray, operand: str) -> np.ndarray:
        """``x`` rounded into the instruction's format of ``operand``, with a warning that
        counts the finite values beyond the format's range (they become Inf or NaN)."""
        fmt = self.ins.format(operand)
        rounded = round_to_format(x, fmt)
        if _dtypes.natural_dtype(fmt) is not None:
            lost = int(np.count_nonzero(np.isfinite(x) & ~np.isfinite(rounded.astype(np.float64))))
            if lost:
                warnings.warn(
                    f"mmac.torch.emulate: {lost} of {x.size} values of {operand} are beyond "
                    f"{fmt['name']}'s range and became Inf or NaN; scale them into range first",
                    stacklevel=4,
                )
        return rounded

    def _product(self, a, b, c=None, beta=1, alpha=1):
        """``alpha * (a @ b) + beta * c`` with the product through the instruction, in the
        dtype torch gives the operator (module doc)."""
        dtype = _result_dtype(a, b, c)
        bias = None if c is None or beta == 0 else (c if beta == 1 else c * beta)
        if a.is_complex() or b.is_complex() or (bias is not None and bias.is_complex()):
            d = self._complex_product(a, b, bias, alpha)
        elif alpha == 1:
            d = self._gemm(a, b, bias)
        else:
            d = self._gemm(a, b, None) * alpha
            d = d if bias is None else d + bias.to(d.dtype)
        return d if dtype is None else d.to(dtype)

    def _complex_product(self, a, b, bias, alpha):
        """``alpha * (a @ b) + bias`` for complex operands as four real GEMMs (module doc)."""
        ar, ai = _parts(a)
        br, bi = _parts(b)
        cr, ci = (None, None) if bias is None or alpha != 1 else _parts(bias)
        re = self._gemm(ar, br, cr) - self._gemm(ai, bi, None)
        im = self._gemm(ar, bi, ci) + self._gemm(ai, br, None)
        d = torch.complex(re, im)
        if alpha != 1:
            d = d * alpha
            if bias is not None:
                d = d + bias.to(d.dtype)
        return d


def _parts(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A tensor's real and imaginary parts (zero for a real tensor)."""
    if t.is_complex():
        return t.real.contiguous(), t.imag.contiguous()
    return t, torch.zeros_like(t)


_MATMUL_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _result_dtype(*tensors) -> torch.dtype | None:
    """The dtype torch gives a matmul of these operands; None for operands torch has no
    matmul for (FP8), whose result stays in the instruction's d dtype."""
    dtype = None
    for t in tensors:
        if isinstance(t, torch.Tensor):
            dtype = t.dtype if dtype is None else torch.promote_types(dtype, t.dtype)
    if dtype is not None and dtype.is_complex:
        return torch.promote_types(dtype, torch.complex64)
    return dtype if dtype in _MATMUL_DTYPES else None


def _check_operands(packet, args) -> None:
    """Integer tensors are refused: a float instruction would give them float results."""
    for t in args:
        if isinstance(t, torch.Tensor) and not (t.is_floating_point() or t.is_complex()):
            # RuntimeError, as torch's own dtype errors: a TypeError out of `@` makes
            # Python try the reflected operator and report that instead
            raise RuntimeError(
                f"{packet} of {t.dtype} tensors: emulate runs float matmuls through a float "
                "instruction; an integer matmul needs an integer instruction (ins.gemm on "
                "integer arrays)"
            )


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


def _addbmm(mode, c, a, b, *, beta=1, alpha=1):
    # one GEMM over the batch's K concatenated: [A_0 A_1 ...] @ [B_0; B_1; ...]
    batch, m, k = a.shape
    a_cat = a.permute(1, 0, 2).reshape(m, batch * k)
    b_cat = b.reshape(batch * k, b.shape[2])
    c = torch.broadcast_to(c, (m, b.shape[2]))
    return mode._product(a_cat, b_cat, c, beta, alpha)


def _mv(mode, a, v):
    return mode._product(a, v.reshape(-1, 1)).reshape(-1)


def _addmv(mode, c, a, v, *, beta=1, alpha=1):
    c = torch.broadcast_to(c, (a.shape[0],)).reshape(-1, 1)
    return mode._product(a, v.reshape(-1, 1), c, beta, alpha).reshape(-1)


def _addr(mode, c, x, y, *, beta=1, alpha=1):
    c = torch.broadcast_to(c, (x.shape[0], y.shape[0]))
    return mode._product(x.reshape(-1, 1), y.reshape(1, -1), c, beta, alpha)


def _dot(mode, x, y):
    return mode._product(x.reshape(1, -1), y.reshape(-1, 1)).reshape(())


_HANDLERS = {
    aten.mm: _mm,
    aten.addmm: _addmm,
    aten.bmm: _bmm,
    aten.baddbmm: _baddbmm,
    aten.addbmm: _addbmm,
    aten.mv: _mv,
    aten.addmv: _addmv,
    aten.addr: _addr,
    aten.dot: _dot,
}

# matmul-family operators emulate does not cover: each warns once when it runs natively
_NATIVE_MATMULS = {
    getattr(aten, name)
    for name in (
        "convolution",
        "_convolution",
        "convolution_overrideable",
        "mkldnn_convolution",
        "cudnn_convolution",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_int_mm",
        "_scaled_mm",
        "vdot",
    )
    if hasattr(aten, name)
}
