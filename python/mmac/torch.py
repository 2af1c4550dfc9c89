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
batch is the instruction's own accumulation), and the in-place forms (``addmm_``, ...)
and ``_addmm_activation``. ``torch.matmul`` and ``@`` (batch dimensions broadcast),
``F.linear``, ``inner``, ``tensordot`` and ``einsum`` reach these through their
decompositions (the contracted dimensions flattened into K in their order); ``matmul``
and two-operand ``einsum`` are decomposed here (:func:`_matmul`, :func:`_einsum`), so that
their first operand is always A. What torch refuses (shapes that do not match, mixed
dtypes) is refused with torch's error before any GEMM (:func:`_check_as_torch`); a
problem with no elements is empty, as torch's.
Complex operands run as four real GEMMs through the instruction (``re = Ar Br - Ai Bi``,
``im = Ar Bi + Ai Br``, a complex C entering the first of each pair), combined in d's
dtype.

Integer matmuls (``torch._int_mm``, and ``mm``/``addmm``/... of integer tensors) run
through an integer instruction given as ``emulate(ins, int_ins=...)`` (say Hopper's
``mma.m16n8k32.s32.s8.s8.s32``): padded the same way, values outside a's, b's or c's
range an error, D as the instruction gives it (its own wrapping or saturation) and
converted to torch's result dtype as torch converts (``_int_mm``: int32; int8 ``mm``:
int8, wrapping). Without ``int_ins``, ``_int_mm`` runs natively with a warning and other
integer matmuls are refused.

Convolutions (``aten.convolution``: conv1d/2d/3d, groups, stride, padding, dilation,
transposed) run as the implicit GEMM of tensor-core libraries, one GEMM per group, the
bias as C (as ``addmm``'s); ``emulate(im2col=)`` picks the K order, channels-last (the
default: K = (kernel position, c_in), as CUTLASS and cuDNN's NHWC tensor-core kernels) or
channels-first; transposed convolutions run as zero insertion and a flipped kernel
(:mod:`mmac._conv`).

A sparse instruction (``ins.sparsity``, say Ampere's ``mma.sp.m16n8k32.f32.f16.f16.f32``,
and a sparse ``int_ins``) takes the matmul's second operand as its A, by its place and
never by its values: the weight W of ``x @ W.T`` (``nn.Linear``), a convolution's filters,
each element the sparse dot product of a weight's row with an input's row (D^T = W x^T).
The weight, rounded into a's format, must keep the pattern along K; a row that does not
raises :class:`PatternError` naming the operator, the row and the group.

``F.scaled_dot_product_attention`` runs as one attention (a ``TorchFunctionMode`` entered
with the mode sends it to ``aten._scaled_dot_product_flash_attention_for_cpu``, which is
emulated): ``S = Q Kᵀ`` through the instruction, scaled, masked and the softmax in float32,
``P V`` through the instruction, the normalization after it; ``attention="flash"`` with
``block=`` rows of K/V per step is FlashAttention-2's online softmax, its float32
accumulator rescaled between blocks and fed back as the C of the next block's ``P V``
(:mod:`mmac._attention`); ``attention="math"`` leaves it to torch's decomposition.
``dropout_p > 0`` is an error.

How the GEMM library drives the instruction (:mod:`mmac._gemm_kernel`):
``scaling="tensor"`` or ``"row"`` scales FP8/FP6/FP4 operands by ``fmt_max / amax`` (per
tensor, or per row of A and column of B, as Transformer Engine and torchao) and D back by
the inverse scales in float32; ``scaling="block"`` computes the scale factors of
block-scaled instructions (MX: E8M0 per 32 elements as the OCP MX spec; NVFP4: UE4M3 per
16 with a per-tensor float32 scale), which ``emulate`` refuses without it; ``split_k=S``
and ``promote_every=N`` (elements of K) run K in slices from C = 0 summed in float32.
Without a recipe, values beyond an FP8 range are counted in a warning.

Not emulated, and warned about once per operator when they run under ``emulate``: the
convolution backends called directly (``mkldnn_convolution``, ``cudnn_convolution``, ...)
and ``convolution_backward``, the CUDA attention kernels and the attention backward,
``torch._int_mm`` without ``int_ins``, ``torch._scaled_mm`` and ``vdot``. Every other
operator (element-wise operations, reductions) runs natively, in the model's own dtypes.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from . import _attention, _conv, _dtypes, _gemm_kernel
from . import _profile
from ._dtypes import round_to_format
from ._gemm_kernel import PatternError

__all__ = ["PatternError", "emulate", "round_to_format"]

aten = torch.ops.aten

ATTENTION_VARIANTS = ("plain", "flash", "math")
"""``emulate(attention=...)``: ``"plain"`` and ``"flash"`` compute
``scaled_dot_product_attention`` as :mod:`mmac._attention` describes; ``"math"`` lets
torch decompose it (its two ``bmm`` through the instruction, the scaling, masking and
softmax natively in the model's dtype)."""


class emulate(TorchDispatchMode):
    """Under this mode, matrix multiplies run through ``ins`` (see the module doc).

    - ``int_ins``: an integer instruction for ``torch._int_mm`` and integer matmuls.
    - ``scaling``: None, ``"tensor"``, ``"row"`` (FP8/FP6/FP4 instructions) or
      ``"block"`` (block-scaled instructions, where it is required).
    - ``split_k`` (slices of K) or ``promote_every`` (elements of K between promotions
      into a float32 accumulator, a multiple of ``ins.k``).
    - ``attention``: ``"plain"``, ``"flash"`` (with ``block`` rows of K/V per step) or
      ``"math"``; ``im2col``: ``"channels_last"`` or ``"channels_first"``.

    Example: Hopper FP8 with per-row scales and DeepSeek-V3's promotion interval,
    ``emulate(ins, scaling="row", promote_every=128)``.

    ``threads`` and ``engine`` are passed to :meth:`mmac.Instruction.gemm`. With
    ``report=True``, ``with`` gives a :class:`mmac._profile.Profile` instead of the mode:
    every emulated call's site and its error against float64 (the profiler, see
    :mod:`mmac._profile`; the mode holds the same object as ``profile``)."""

    def __init__(
        self,
        ins,
        *,
        int_ins=None,
        scaling=None,
        split_k: int = 1,
        promote_every=None,
        attention: str = "plain",
        block: int = 64,
        im2col: str = "channels_last",
        threads=None,
        engine: str = "auto",
        report: bool = False,
    ):
        super().__init__()
        _check_kinds(ins, "float", "ins")
        if ins.dtype("d") is None:
            raise ValueError(f"`{ins.name}`'s d format {ins.types['d']} has no dtype")
        if int_ins is not None:
            _check_kinds(int_ins, "int", "int_ins")
            if int_ins.scale is not None:
                raise ValueError(
                    f"int_ins `{int_ins.name}` is block-scaled: give an integer MMA without scale factors"
                )
        if attention not in ATTENTION_VARIANTS:
            raise ValueError(f"attention must be one of {ATTENTION_VARIANTS}, found {attention!r}")
        if isinstance(block, bool) or not isinstance(block, int) or block < 1:
            raise ValueError(
                "block (rows of K and V per step of attention='flash') must be a positive "
                f"integer, found {block!r}"
            )
        if im2col not in _conv.IM2COL_ORDERS:
            raise ValueError(f"im2col must be one of {_conv.IM2COL_ORDERS}, found {im2col!r}")
        self.ins = ins
        self.int_ins = int_ins
        self.kernel = _gemm_kernel.GemmKernel(
            ins, scaling=scaling, split_k=split_k, promote_every=promote_every, threads=threads, engine=engine
        )
        """How the GEMMs drive ``ins`` (:class:`mmac._gemm_kernel.GemmKernel`)."""
        self.attention = attention
        self.block = block
        self.im2col = im2col
        self.threads = threads
        self.engine = engine
        self._function_mode = _AttentionFunctions(self)
        self.calls = 0
        """Operators computed through the instruction so far."""
        self._warned = set()
        self.profile = _profile.Profile(ins) if report else None
        """The numerics profile (``report=True``), else None."""

    def __enter__(self):
        super().__enter__()
        self._function_mode.__enter__()  # F.scaled_dot_product_attention as one call
        if self.profile is None:
            return self
        self.profile._start()
        return self.profile

    def __exit__(self, exc_type, exc_value, traceback):
        if self.profile is not None:
            self.profile._stop()
        self._function_mode.__exit__(exc_type, exc_value, traceback)
        return super().__exit__(exc_type, exc_value, traceback)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        packet = func.overloadpacket
        handler = self._handler(packet)
        if handler is None:
            if packet in _NATIVE_MATMULS and packet not in self._warned:
                self._warned.add(packet)
                warnings.warn(
                    f"mmac.torch.emulate: {packet} runs natively, not through `{self.ins.name}`",
                    stacklevel=2,
                )
            return func(*args, **kwargs)
        out = kwargs.pop("out", None)
        _check_operands(packet, args, self.int_ins)
        expected = _check_as_torch(packet, args, kwargs)
        self.calls += 1
        try:
            result = _empty_like(expected, args)
            if result is None:
                result = handler(self, *args, **kwargs)
        except PatternError as e:
            raise PatternError(f"{packet}: {e}") from None
        if self.profile is not None:
            self.profile._record(func, args, kwargs, result)
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

    def _handler(self, packet):
        """The function that emulates ``packet``, or None (it runs natively)."""
        if packet is aten._int_mm and self.int_ins is None:
            return None
        if packet is aten._scaled_dot_product_flash_attention_for_cpu and self.attention == "math":
            return None
        return _HANDLERS.get(packet)

    # ------------------------------------------------------------ one GEMM

    def _gemm(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None) -> torch.Tensor:
        """D = A @ B (+ C) through the instruction as the kernel drives it, for real 2-D A
        (M x K) and B (K x N): in d's dtype (float32 with a scaling recipe or K slices)."""
        M, N = a.shape[0], b.shape[1]
        C = None if c is None else _float_values(torch.broadcast_to(c, (M, N)))
        D = self.kernel.run(_float_values(a), _float_values(b), C)
        return _dtypes.numpy_to_tensor(D, like=a)

    def _values_gemm(self, A: np.ndarray, B: np.ndarray, C: np.ndarray | None = None) -> np.ndarray:
        """The kernel's GEMM on float64 arrays (what convolutions and attention call)."""
        return self.kernel.run(A, B, C)

    def _product(self, a, b, c=None, beta=1, alpha=1):
        """``alpha * (a @ b) + beta * c`` with the product through the instruction, in the
        dtype torch gives the operator (module doc)."""
        integer = not a.is_floating_point() and not a.is_complex()
        if integer:
            # torch converts beta and alpha to the integer type, truncating (0.5 is 0)
            beta, alpha = int(beta), int(alpha)
        bias = None if c is None or beta == 0 else (c if beta == 1 else c * beta)
        if integer and alpha != 0:
            return self._int_product(a, b, bias, alpha, torch.promote_types(a.dtype, b.dtype))
        dtype = torch.promote_types(a.dtype, b.dtype) if integer else _result_dtype(a, b, c)
        if alpha == 0:
            # torch leaves the product out (an Inf or NaN in it too): beta * c, or zeros
            d = torch.zeros((a.shape[0], b.shape[1]), dtype=dtype or torch.float32, device=a.device)
            return d if bias is None else d + bias.to(d.dtype)
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

    def _int_product(self, a, b, bias, alpha, dtype):
        """``alpha * (a @ b) + bias`` for integer tensors through ``int_ins`` (module doc):
        D in d's format (int32 for s32), converted to ``dtype`` as torch converts
        (wrapping)."""
        for t in (a, b) + (() if bias is None else (bias,)):
            if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
                raise RuntimeError(
                    f"an integer matmul takes integer tensors only, found {a.dtype}, {b.dtype}"
                    + ("" if bias is None else f" and a bias of {bias.dtype}")
                )
        A, B = (_dtypes.tensor_to_numpy(t).astype(np.int64) for t in (a, b))
        C = None
        if bias is not None:
            C = _dtypes.tensor_to_numpy(torch.broadcast_to(bias, (A.shape[0], B.shape[1]))).astype(np.int64)
        D = _gemm_kernel.integer_gemm(
            self.int_ins, A, B, C if alpha == 1 else None, threads=self.threads, engine=self.engine
        )
        if alpha != 1:
            D = D.astype(np.int64) * int(alpha) + (0 if C is None else C)
        return torch.from_numpy(np.ascontiguousarray(D)).to(device=a.device).to(dtype)


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
        return dtype
    return dtype if dtype in _MATMUL_DTYPES else None


def _check_operands(packet, args, int_ins) -> None:
    """Integer tensors are refused unless an integer instruction is given (matmuls only):
    a float instruction would give them float results."""
    integer_ok = int_ins is not None and packet in _INTEGER_MATMULS
    for t in args:
        if isinstance(t, torch.Tensor) and not (t.is_floating_point() or t.is_complex()):
            if integer_ok and t.dtype != torch.bool:
                continue
            # RuntimeError, as torch's own dtype errors: a TypeError out of `@` makes
            # Python try the reflected operator and report that instead
            raise RuntimeError(
                f"{packet} of {t.dtype} tensors: emulate runs float operators through a float "
                "instruction; an integer matmul needs an integer instruction "
                "(emulate(ins, int_ins=...), or ins.gemm on integer arrays)"
            )




def _check_as_torch(packet, args, kwargs):
    """What the native operator refuses is refused, with torch's own error, before any
    GEMM: its shape checks, run by its meta kernel on meta tensors (no data; padding to
    the instruction's multiples would otherwise hide a K that does not match), and the one
    dtype the matmuls take."""
    tensors = [t for t in args if isinstance(t, torch.Tensor)]
    if packet in _SAME_DTYPE and len({t.dtype for t in tensors}) > 1:
        raise RuntimeError(
            f"{packet}: expected its tensors to have the same dtype, found "
            + ", ".join(str(t.dtype) for t in tensors)
        )
    meta = lambda x: x.to("meta") if isinstance(x, torch.Tensor) else x  # noqa: E731
    try:
        # (the packet, not `func`: an `out=` overload's `out` was taken off `kwargs`;
        # natively, not through the mode of an `emulate` around this one)
        with _disable_current_modes():
            return packet(*_pytree.tree_map(meta, args), **_pytree.tree_map(meta, kwargs))
    except NotImplementedError:
        return None  # no meta kernel: the handler's own checks
    except RuntimeError:
        if packet in (aten.convolution, aten._convolution):
            return None  # :mod:`mmac._conv`'s checks say more ("needs a weight of ...")
        raise


def _empty_like(expected, args):
    """The operator's result when it has no elements (M, N or a batch of 0), as torch's
    meta kernel shapes it (``expected``), on the operands' device; else None."""
    results = expected if isinstance(expected, tuple) else (expected,)
    if not results or not all(isinstance(r, torch.Tensor) and r.numel() == 0 for r in results):
        return None
    device = next(t.device for t in args if isinstance(t, torch.Tensor))
    empty = tuple(torch.empty(r.shape, dtype=r.dtype, device=device) for r in results)
    return empty if isinstance(expected, tuple) else empty[0]


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


def _int_mm(mode, a, b):
    if a.dtype != torch.int8 or b.dtype != torch.int8 or a.dim() != 2 or b.dim() != 2:
        raise RuntimeError(
            f"_int_mm takes two 2-D int8 matrices, found {a.dtype} {tuple(a.shape)} and "
            f"{b.dtype} {tuple(b.shape)}"
        )
    return mode._int_product(a, b, None, 1, torch.int32)


def _convolution(mode, x, w, bias, stride, padding, dilation, transposed, output_padding, groups, *_backend):
    """``aten.convolution`` (and ``aten._convolution``, whose backend flags are ignored) as
    one implicit GEMM per group (:mod:`mmac._conv`), the bias as C; the result in the
    input's dtype (D rounded to it)."""
    for t in (x, w) if bias is None else (x, w, bias):
        if not t.is_floating_point():
            raise RuntimeError(f"convolution through emulate takes real float tensors, found {t.dtype}")
    D = _conv.convolution(
        mode._values_gemm,
        _float_values(x),
        _float_values(w),
        None if bias is None else _float_values(bias),
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        mode.im2col,
    )
    d = _dtypes.numpy_to_tensor(D, like=x)
    dtype = _result_dtype(x, w)
    return d if dtype is None else d.to(dtype)


def _flash_attention_for_cpu(mode, q, k, v, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    """``aten._scaled_dot_product_flash_attention_for_cpu``: attention through the
    instruction (:mod:`mmac._attention`, ``emulate(attention=, block=)``); returns the
    output in the query's dtype and the float32 log-sum-exp, as the operator does."""
    if dropout_p:
        raise RuntimeError(
            f"scaled_dot_product_attention with dropout_p={dropout_p}: emulate computes attention "
            "without dropout (random masks are no part of the arithmetic); run the model in "
            "eval mode or with dropout_p=0"
        )
    for t in (q, k, v):
        if not t.is_floating_point():
            raise RuntimeError(f"attention through emulate takes real float tensors, found {t.dtype}")
    if attn_mask is not None and is_causal:
        raise RuntimeError("scaled_dot_product_attention: give attn_mask or is_causal=True, not both")
    if k.shape[-2] == 0:
        # no keys: no products, the output zeros and the log-sum-exp -inf (the operator's)
        shape = q.shape[:-1]
        out = torch.zeros(shape + (v.shape[-1],), dtype=q.dtype, device=q.device)
        return out, torch.full(shape, -math.inf, dtype=torch.float32, device=q.device)
    mask = None
    if attn_mask is not None:
        mask = _dtypes.tensor_to_numpy(attn_mask)
        mask = mask if mask.dtype == np.bool_ else mask.astype(np.float64)
    out, lse = _attention.attention(
        mode._values_gemm,
        _float_values(q),
        _float_values(k),
        _float_values(v),
        mask=mask,
        is_causal=is_causal,
        scale=scale,
        variant=mode.attention,
        block=mode.block,
    )
    out_t = _dtypes.numpy_to_tensor(out, like=q)
    return out_t.to(q.dtype), _dtypes.numpy_to_tensor(lse, like=q)


_SDPA = torch._C._nn.scaled_dot_product_attention


class _AttentionFunctions(TorchFunctionMode):
    """Under a dispatch mode torch computes ``F.scaled_dot_product_attention`` by its math
    path (separate ``bmm``, softmax in the model's dtype); this function mode, entered with
    :class:`emulate`, sends it to the fused CPU operator instead, which ``emulate``
    computes as one attention (``attention="math"``: to torch's math path, always)."""

    def __init__(self, mode):
        super().__init__()
        self.mode = mode

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _MATMULS and len(args) == 2 and not kwargs:
            return _matmul(*args)
        if func is torch.einsum:
            return _einsum(func, args, kwargs)
        if func is _SDPA and self.mode.attention == "math":
            return _sdpa_by_torchs_math(*args, **kwargs)
        if func is _SDPA:
            q, k, v = _sdpa_operands(args, kwargs)
            needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
            if not (needs_grad and q.shape[-1] != v.shape[-1]):
                return _sdpa_as_one_operator(*args, **kwargs)
            # the fused CPU operator's backward takes one head size only
            if "sdpa-grad" not in self.mode._warned:
                self.mode._warned.add("sdpa-grad")
                warnings.warn(
                    "mmac.torch.emulate: scaled_dot_product_attention with gradients and value "
                    "heads of another size than the query's runs as torch's math path (its two "
                    "bmm through the instruction)",
                    stacklevel=2,
                )
        return func(*args, **kwargs)


def _sdpa_operands(args, kwargs) -> tuple:
    """``F.scaled_dot_product_attention``'s query, key and value, given by place or name."""
    named = dict(zip(("query", "key", "value"), args))
    named.update({k: v for k, v in kwargs.items() if k in ("query", "key", "value")})
    if len(named) < 3:
        raise TypeError("scaled_dot_product_attention takes query, key and value")
    return named["query"], named["key"], named["value"]


# `a @ b`, `torch.matmul(a, b)` and `a.matmul(b)`, computed by :func:`_matmul`
_MATMULS = (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__)


def _matmul(a, b):
    """``torch.matmul(a, b)`` with ``a`` the instruction's A and ``b`` its B in every GEMM.
    (Torch's own may fold a 2-D or 1-D ``a`` into a batched ``b`` by transposing both,
    which would round ``a`` into b's format and ``b`` into a's.) Batch dimensions are
    broadcast; a batched ``a`` times a matrix folds its batch into M (one GEMM), else one
    ``bmm``; a 1-D operand is a row (``a``) or a column (``b``), dropped from the result."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or min(a.dim(), b.dim()) == 0:
        return torch.matmul(a, b)  # torch's own (and its errors)
    if a.dim() <= 2 and b.dim() <= 2:
        return torch.matmul(a, b)  # mm, mv, dot, and a row times a matrix: no swap
    row, column = a.dim() == 1, b.dim() == 1
    A = a.unsqueeze(0) if row else a
    B = b.unsqueeze(-1) if column else b
    (M, K), N = A.shape[-2:], B.shape[-1]
    if B.dim() == 2:
        D = torch.mm(A.reshape(-1, K), B).reshape(A.shape[:-1] + (N,))
    else:
        batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        A = A.expand(batch + (M, K)).reshape((-1, M, K))
        B = B.expand(batch + B.shape[-2:]).reshape((-1,) + B.shape[-2:])
        D = torch.bmm(A, B).reshape(batch + (M, N))
    if row:
        D = D.squeeze(-2)
    return D.squeeze(-1) if column else D


def _einsum(func, args, kwargs):
    """``torch.einsum`` of two operands that contracts at least one index, with the first
    operand as the instruction's A: both permuted to (batch, kept, contracted) and
    (batch, contracted, kept) and one ``bmm``. (Torch's own may swap the operands to
    produce the output's order.) Other forms (one or three operands, ``...``, an index
    repeated in an operand, nothing contracted) are torch's."""
    if kwargs or len(args) != 3 or not isinstance(args[0], str):
        return func(*args, **kwargs)
    equation, x, y = args
    equation = equation.replace(" ", "")
    lhs, _, out = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != 2 or "." in equation or not all(isinstance(t, torch.Tensor) for t in (x, y)):
        return func(*args)
    xs, ys = terms
    if "->" not in equation:  # implicit output: the indices seen once, in order
        out = "".join(sorted(c for c in set(xs + ys) if (xs + ys).count(c) == 1))
    if (
        len(set(xs)) != len(xs) or len(set(ys)) != len(ys) or len(xs) != x.dim() or len(ys) != y.dim()
        or not set(out) <= set(xs + ys)
    ):
        return func(*args)
    size = {}
    for letters, t in ((xs, x), (ys, y)):
        for c, n in zip(letters, t.shape):
            if size.setdefault(c, n) != n:
                return func(*args)  # torch's error (or its broadcasting)
    contracted = [c for c in xs if c in ys and c not in out]
    if not contracted:
        return func(*args)
    # an index of one operand only, not in the output: summed out first (a `sum` over no
    # dimensions would sum them all)
    alone_x = [i for i, c in enumerate(xs) if c not in ys and c not in out]
    alone_y = [i for i, c in enumerate(ys) if c not in xs and c not in out]
    x = x.sum(alone_x) if alone_x else x
    y = y.sum(alone_y) if alone_y else y
    xs = "".join(c for c in xs if c in ys or c in out)
    ys = "".join(c for c in ys if c in xs or c in out)
    batch = [c for c in out if c in xs and c in ys]
    kept_x = [c for c in xs if c not in ys]
    kept_y = [c for c in ys if c not in xs]
    count = lambda letters: int(np.prod([size[c] for c in letters], dtype=np.int64))  # noqa: E731
    X = x.permute([xs.index(c) for c in batch + kept_x + contracted]).reshape(
        count(batch), count(kept_x), count(contracted)
    )
    Y = y.permute([ys.index(c) for c in batch + contracted + kept_y]).reshape(
        count(batch), count(contracted), count(kept_y)
    )
    D = torch.bmm(X, Y).reshape([size[c] for c in batch + kept_x + kept_y])
    order = batch + kept_x + kept_y
    return D.permute([order.index(c) for c in out])


def _sdpa_by_torchs_math(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """``F.scaled_dot_product_attention`` as torch's math path, whatever backend torch
    would pick: its pieces (two ``bmm``, scaling, mask, softmax) reach the dispatch mode."""
    return aten._scaled_dot_product_attention_math(
        query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
    )[0]


def _sdpa_as_one_operator(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """``F.scaled_dot_product_attention`` as one call of the fused CPU operator: leading
    dimensions broadcast and folded into (batch, 1), grouped-query heads repeated (as
    torch's ``enable_gqa``)."""
    if enable_gqa and query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        groups = query.shape[-3] // key.shape[-3]
        if groups * key.shape[-3] != query.shape[-3]:
            raise RuntimeError(
                f"enable_gqa: {query.shape[-3]} query heads are not a multiple of {key.shape[-3]} key heads"
            )
        key = key.repeat_interleave(groups, dim=-3)
        value = value.repeat_interleave(groups, dim=-3)
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError("scaled_dot_product_attention takes query, key and value of at least 2 dimensions")
    L, S = query.shape[-2], key.shape[-2]
    try:
        batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except RuntimeError:
        raise RuntimeError(
            f"scaled_dot_product_attention: the leading dimensions of query {tuple(query.shape)}, "
            f"key {tuple(key.shape)} and value {tuple(value.shape)} do not broadcast"
        ) from None
    n = math.prod(batch)  # (not -1: a tensor of no elements has no inferred size)
    q, k, v = (t.expand(batch + t.shape[-2:]).reshape((n, 1) + t.shape[-2:]) for t in (query, key, value))
    mask = None
    if attn_mask is not None:
        mask = attn_mask.expand(batch + (L, S)).reshape((n, 1, L, S))
    out, _ = aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, dropout_p, is_causal, attn_mask=mask, scale=scale
    )
    return out.reshape(batch + out.shape[-2:])


def _check_kinds(ins, kind: str, what: str) -> None:
    """Every operand format of ``ins`` is of ``kind`` (float or int)."""
    for op in ("a", "b", "c", "d"):
        fmt = ins.format(op)
        if fmt["kind"] != kind:
            other = "an integer" if fmt["kind"] == "int" else "a float"
            raise ValueError(
                f"{what} `{ins.name}` has {op} = {fmt['name']}, {other} format: emulate takes "
                + (
                    "a float instruction as ins (an integer one as int_ins)"
                    if kind == "float"
                    else "an integer instruction as int_ins"
                )
            )


def _in_place(handler):
    """The in-place form (``Tensor.addmm_``, ...) of an operator's handler: the result
    written into ``self``, the operator's first argument, as torch writes it."""

    def in_place(mode, c, *args, **kwargs):
        return c.copy_(handler(mode, c, *args, **kwargs))

    return in_place


def _addmm_activation(mode, c, a, b, *, beta=1, alpha=1, use_gelu=False):
    """``torch._addmm_activation``: ``addmm`` through the instruction, then ReLU (or GELU,
    tanh-approximated, as torch's fused epilogue) natively."""
    d = _addmm(mode, c, a, b, beta=beta, alpha=alpha)
    return torch.nn.functional.gelu(d, approximate="tanh") if use_gelu else torch.relu(d)


_HANDLERS = {
    aten.mm: _mm,
    aten.addmm: _addmm,
    aten.addmm_: _in_place(_addmm),
    aten._addmm_activation: _addmm_activation,
    aten.bmm: _bmm,
    aten.baddbmm: _baddbmm,
    aten.baddbmm_: _in_place(_baddbmm),
    aten.addbmm: _addbmm,
    aten.addbmm_: _in_place(_addbmm),
    aten.mv: _mv,
    aten.addmv: _addmv,
    aten.addmv_: _in_place(_addmv),
    aten.addr: _addr,
    aten.addr_: _in_place(_addr),
    aten.dot: _dot,
    aten._int_mm: _int_mm,
    aten.convolution: _convolution,
    aten._convolution: _convolution,
    aten._scaled_dot_product_flash_attention_for_cpu: _flash_attention_for_cpu,
}

# the matmul family: every operator above but convolution and attention
_MATMULS_EMULATED = set(_HANDLERS) - {
    aten.convolution,
    aten._convolution,
    aten._scaled_dot_product_flash_attention_for_cpu,
}

# the operators that take integer tensors when an integer instruction is given
_INTEGER_MATMULS = _MATMULS_EMULATED - {aten._addmm_activation}

# the operators torch refuses for tensors of different dtypes (addr promotes them)
_SAME_DTYPE = _MATMULS_EMULATED - {aten.addr, aten.addr_, aten._int_mm}

# matmul-family operators emulate does not cover: each warns once when it runs natively
_NATIVE_MATMULS = {
    getattr(aten, name)
    for name in (
        "convolution",
        "_convolution",
        "convolution_overrideable",
        "mkldnn_convolution",
        "cudnn_convolution",
        "convolution_backward",
        "_scaled_dot_product_flash_attention_for_cpu_backward",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_int_mm",
        "_scaled_mm",
        "vdot",
        "_trilinear",
        "mkldnn_rnn_layer",
        "_cdist_forward",
        "_euclidean_dist",
    )
    if hasattr(aten, name)
}
