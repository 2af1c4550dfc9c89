"""`mmac.torch.emulate` on the matmul family's decompositions (einsum, tensordot, inner,
broadcast matmul) and on integer matmuls through an integer instruction (`int_ins`)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from mmac.torch import emulate

HOPPER_F16 = "mma.m16n8k16.f32.f16.f16.f32"
HOPPER_S8 = "mma.m16n8k32.s32.s8.s8.s32"
HOPPER_S8_SAT = "mma.m16n8k32.satfinite.s32.s8.s8.s32"


def _same_bits(got: torch.Tensor, want) -> None:
    want = want.numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    got = got.contiguous().numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_broadcast_matmul_einsum_tensordot_and_inner_are_emulated(spec):
    ins = spec("hopper")[HOPPER_F16]
    g = torch.Generator().manual_seed(11)
    a = torch.randn(2, 1, 20, 30, generator=g)
    b = torch.randn(3, 30, 10, generator=g)
    x = torch.randn(4, 5, 6, generator=g)
    y = torch.randn(5, 6, 7, generator=g)
    u = torch.randn(9, 30, generator=g)
    w = torch.randn(12, 30, generator=g)
    seen = []
    with torch.no_grad(), emulate(ins) as mode:
        broadcast = torch.matmul(a, b)  # batch (2, 1) with (3,): six GEMMs
        seen.append(mode.calls)
        ein = torch.einsum("bij,bjk->bik", a[1].expand(3, 20, 30), b)
        seen.append(mode.calls)
        contracted = torch.einsum("ijk,jkl->il", x, y)  # K = (j, k), 30 long
        seen.append(mode.calls)
        td = torch.tensordot(x, y, dims=([1, 2], [0, 1]))
        seen.append(mode.calls)
        inner = torch.inner(u, w)
        seen.append(mode.calls)
    assert all(later > earlier for earlier, later in zip([0] + seen, seen)), seen
    # each equals ins.gemm on the same operands (rounded into f16, padded, batches broadcast)
    _same_bits(broadcast, ins.gemm(a.numpy(), b.numpy(), round=True, pad=True))
    _same_bits(ein, ins.gemm(a[1].numpy(), b.numpy(), round=True, pad=True))
    want = ins.gemm(x.reshape(4, 30).numpy(), y.reshape(30, 7).numpy(), round=True, pad=True)
    _same_bits(contracted, want)
    _same_bits(td, want)
    _same_bits(inner, ins.gemm(u.numpy(), w.T.numpy(), round=True, pad=True))
    # and not what float32 computes
    assert not torch.equal(broadcast, torch.matmul(a, b))


def test_int_mm_runs_through_the_integer_instruction(spec):
    ins, int_ins = spec("hopper")[HOPPER_F16], spec("hopper")[HOPPER_S8]
    g = torch.Generator().manual_seed(12)
    a = torch.randint(-128, 128, (20, 70), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (70, 12), generator=g, dtype=torch.int8)
    with torch.no_grad(), emulate(ins, int_ins=int_ins) as mode:
        d = torch._int_mm(a, b)
    assert mode.calls == 1 and d.dtype == torch.int32
    # exact: the instruction's s32 sum of s8 products does not overflow here
    exact = a.numpy().astype(np.int64) @ b.numpy().astype(np.int64)
    np.testing.assert_array_equal(d.numpy(), exact)
    A = np.zeros((32, 96), np.int8); A[:20, :70] = a.numpy()
    B = np.zeros((96, 16), np.int8); B[:70, :12] = b.numpy()
    np.testing.assert_array_equal(d.numpy(), int_ins.gemm(A, B)[:20, :12])


def test_int_mm_without_an_integer_instruction_warns_and_runs_natively(spec):
    ins = spec("hopper")[HOPPER_F16]
    a = torch.ones(32, 32, dtype=torch.int8)
    with torch.no_grad(), emulate(ins) as mode:
        with pytest.warns(UserWarning, match="_int_mm runs natively"):
            d = torch._int_mm(a, a)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            torch._int_mm(a, a)
    assert mode.calls == 0 and torch.equal(d, torch.full((32, 32), 32, dtype=torch.int32))


def test_integer_mm_keeps_torchs_dtype(spec):
    ins, int_ins = spec("hopper")[HOPPER_F16], spec("hopper")[HOPPER_S8]
    g = torch.Generator().manual_seed(13)
    a = torch.randint(-128, 128, (9, 40), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (40, 5), generator=g, dtype=torch.int8)
    native = a @ b  # int8, wrapping
    with torch.no_grad(), emulate(ins, int_ins=int_ins) as mode:
        d = a @ b
    assert mode.calls == 1 and d.dtype == torch.int8
    assert torch.equal(d, native)
    wide = (a.numpy().astype(np.int64) @ b.numpy().astype(np.int64)).astype(np.int8)  # wraps
    np.testing.assert_array_equal(d.numpy(), wide)


def test_integer_beta_and_alpha_truncate_as_torchs(spec):
    """torch converts a fractional beta or alpha to the integer dtype (0.5 is 0, -2.7 is
    -2); the emulation gives torch's result, not a refusal of a float bias."""
    ins, int_ins = spec("hopper")[HOPPER_F16], spec("hopper")[HOPPER_S8]
    g = torch.Generator().manual_seed(15)
    a = torch.randint(-8, 8, (16, 32), generator=g, dtype=torch.int8)
    b = torch.randint(-8, 8, (32, 8), generator=g, dtype=torch.int8)
    c = torch.randint(-8, 8, (16, 8), generator=g, dtype=torch.int8)
    for beta, alpha in [(0.5, 1), (-2.7, 1), (1, 0.5), (2.9, -1.5)]:
        native = torch.addmm(c, a, b, beta=beta, alpha=alpha)
        with torch.no_grad(), emulate(ins, int_ins=int_ins):
            d = torch.addmm(c, a, b, beta=beta, alpha=alpha)
        assert d.dtype == torch.int8 and torch.equal(d, native), (beta, alpha)


@pytest.mark.parametrize("name,saturates", [(HOPPER_S8, False), (HOPPER_S8_SAT, True)])
def test_overflow_follows_the_instruction(spec, name, saturates):
    ins, int_ins = spec("hopper")[HOPPER_F16], spec("hopper")[name]
    g = torch.Generator().manual_seed(14)
    a = torch.randint(0, 128, (16, 32), generator=g, dtype=torch.int32)
    b = torch.randint(0, 128, (32, 8), generator=g, dtype=torch.int32)
    top = 2**31 - 1
    c = torch.full((16, 8), top - 1000, dtype=torch.int32)  # the products push past 2^31 - 1
    with torch.no_grad(), emulate(ins, int_ins=int_ins):
        d = torch.addmm(c, a, b)
    assert d.dtype == torch.int32
    exact = c.numpy().astype(np.int64) + a.numpy().astype(np.int64) @ b.numpy().astype(np.int64)
    assert (exact > top).all()
    want = np.minimum(exact, top) if saturates else (exact - 2**32)
    np.testing.assert_array_equal(d.numpy(), want)
    np.testing.assert_array_equal(
        d.numpy(), int_ins.gemm(a.numpy().astype(np.int8), b.numpy().astype(np.int8), c.numpy())
    )


def test_integer_values_beyond_the_format_and_wrong_instructions_are_errors(spec):
    hopper = spec("hopper")
    ins, int_ins = hopper[HOPPER_F16], hopper[HOPPER_S8]
    a = torch.full((4, 4), 300, dtype=torch.int32)
    with torch.no_grad(), emulate(ins, int_ins=int_ins):
        with pytest.raises(ValueError, match="16 of 16 values of a lie outside s8's range"):
            a @ a
        # an integer and a float operand: refused as torch refuses them
        with pytest.raises(RuntimeError, match="expected its tensors to have the same dtype"):
            torch.ones(4, 4, dtype=torch.int8) @ torch.ones(4, 4)
    with pytest.raises(ValueError, match="float format: emulate takes an integer instruction as int_ins"):
        emulate(ins, int_ins=ins)
    with pytest.raises(ValueError, match="an integer format"):
        emulate(int_ins)
