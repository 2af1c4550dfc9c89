"""`mmac.torch.emulate` refuses what torch refuses (shapes, dtypes) and computes what torch
computes where the instruction's operands are not interchangeable: the first operand of
a matmul or einsum is always A (an instruction with a != b formats tells), in-place forms
and fused epilogues, problems with no elements, attention given by keyword, and every
option checked when the mode is made."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mmac.torch import emulate

HOPPER_F16 = "mma.m16n8k16.f32.f16.f16.f32"
# a = e4m3, b = e5m2: swapping the operands rounds each into the other's format
ADA_MIXED = "mma.m16n8k32.f32.e4m3.e5m2.f32"


def _same_bits(got: torch.Tensor, want: np.ndarray) -> None:
    got = got.detach().contiguous().numpy()
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got.view(np.uint32), want.astype(np.float32).view(np.uint32))


def _gemm(ins, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """The reference: ``x`` as A and ``y`` as B, rounded and padded by ``ins.gemm``."""
    a, b = (t.detach().double().numpy() for t in (x, y))
    return ins.gemm(a, b, round=True, pad=True)


def test_shapes_and_dtypes_torch_refuses_are_refused(spec):
    ins = spec("hopper")[HOPPER_F16]
    cases = [
        (lambda: torch.mm(torch.ones(1, 4), torch.ones(6, 1)), "same reduction dim"),
        (lambda: torch.ones(3, 4) @ torch.ones(5, 6), "same reduction dim"),
        (lambda: torch.bmm(torch.ones(2, 3, 4), torch.ones(3, 4, 5)), "batch2"),
        (lambda: torch.mv(torch.ones(3, 4), torch.ones(9)), "size mismatch"),
        (lambda: torch.dot(torch.ones(4), torch.ones(9)), "inconsistent tensor size"),
        (lambda: torch.mm(torch.ones(4), torch.ones(4, 2)), "must be 2D"),
        (lambda: torch.mm(torch.ones(4, 4).half(), torch.ones(4, 4)), "same dtype"),
        (lambda: torch.addmm(torch.zeros(4, dtype=torch.float64), torch.ones(4, 4), torch.ones(4, 4)), "same dtype"),
    ]
    for call, says in cases:
        with pytest.raises(RuntimeError):
            call()  # torch refuses it natively
        with torch.no_grad(), emulate(ins) as mode, pytest.raises(RuntimeError, match=says):
            call()
        assert mode.calls == 0  # refused before any GEMM


def test_the_first_operand_is_always_a(spec):
    ins = spec("ada")[ADA_MIXED]
    g = torch.Generator().manual_seed(3)
    x = torch.randn(8, 32, generator=g, requires_grad=True)
    W = torch.randn(3, 32, 16, generator=g)
    with emulate(ins):
        # torch would fold x into the batch as (W^T x^T)^T: x rounded into b's format
        y = x @ W
        v = x[0].detach() @ W.mT.contiguous().mT
        e = torch.einsum("ij,jk->ki", x.detach(), W[0])
        eb = torch.einsum("bij,bjk->bik", x.detach().expand(3, 8, 32), W)
        es = torch.einsum("ij,jk->k", x.detach(), W[1])  # i summed first, as torch does
    for i in range(3):
        _same_bits(y[i], _gemm(ins, x, W[i]))
        _same_bits(v[i], _gemm(ins, x[:1], W[i])[0])
        _same_bits(eb[i], _gemm(ins, x, W[i]))
    _same_bits(e, _gemm(ins, x, W[0]).T)
    _same_bits(es, _gemm(ins, x.detach().sum(0, keepdim=True), W[1])[0])
    # the swap would have given other bits: the test can tell
    assert not np.array_equal(_gemm(ins, x, W[0]), _gemm(ins, W[0].T, x.T).T)


def test_in_place_forms_and_the_fused_activation_are_emulated(spec):
    ins = spec("hopper")[HOPPER_F16]
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(8, 16, generator=g), torch.randn(16, 8, generator=g)
    c, v, w = torch.randn(8, 8, generator=g), torch.randn(16, generator=g), torch.randn(8, generator=g)
    A3, B3 = torch.randn(2, 8, 16, generator=g), torch.randn(2, 16, 8, generator=g)
    pairs = [
        (lambda: c.clone().addmm_(a, b, beta=0.5), lambda: torch.addmm(c, a, b, beta=0.5)),
        (lambda: w.clone().addmv_(a, v), lambda: torch.addmv(w, a, v)),
        (lambda: c.clone().addr_(w, w), lambda: torch.addr(c, w, w)),
        (lambda: c.expand(2, 8, 8).clone().baddbmm_(A3, B3), lambda: torch.baddbmm(c, A3, B3)),
        (lambda: c.clone().addbmm_(A3, B3), lambda: torch.addbmm(c, A3, B3)),
        (lambda: torch._addmm_activation(c, a, b), lambda: torch.relu(torch.addmm(c, a, b))),
    ]
    for in_place, out_of_place in pairs:
        with torch.no_grad(), emulate(ins) as mode:
            got = in_place()
            assert mode.calls == 1
            want = out_of_place()
        _same_bits(got, want.numpy())
        assert not torch.equal(got, in_place())  # natively: other bits


def test_problems_with_no_elements_are_empty_or_the_bias(spec):
    ins = spec("hopper")[HOPPER_F16]
    q, kv = torch.ones(1, 1, 3, 8), torch.ones(1, 1, 0, 8)
    with torch.no_grad(), emulate(ins):
        assert torch.mm(torch.ones(0, 4), torch.ones(4, 3)).shape == (0, 3)
        assert torch.bmm(torch.ones(0, 3, 4), torch.ones(0, 4, 5)).shape == (0, 3, 5)
        assert torch.equal(torch.addmm(torch.full((3,), 2.0), torch.ones(4, 0), torch.ones(0, 3)), torch.full((4, 3), 2.0))
        assert torch.equal(torch.mm(torch.ones(4, 0), torch.ones(0, 3)), torch.zeros(4, 3))
        none = torch.nn.functional.scaled_dot_product_attention(torch.ones(1, 1, 0, 8), q, q)
        no_keys = torch.nn.functional.scaled_dot_product_attention(q, kv, kv)
    assert none.shape == (1, 1, 0, 8)
    assert torch.equal(no_keys, torch.nn.functional.scaled_dot_product_attention(q, kv, kv))


def test_attention_by_keyword_and_options_checked_at_once(spec):
    ins = spec("hopper")[HOPPER_F16]
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 5, 8, generator=g) for _ in range(3))
    F = torch.nn.functional
    for attention in ("plain", "flash"):
        with torch.no_grad(), emulate(ins, attention=attention):
            by_place = F.scaled_dot_product_attention(q, k, v)
            by_name = F.scaled_dot_product_attention(query=q, key=k, value=v)
            mixed = F.scaled_dot_product_attention(q, key=k, value=v)
        assert torch.equal(by_place, by_name) and torch.equal(by_place, mixed)
    for options, says in (
        ({"threads": 0}, "threads must be a positive integer"),
        ({"threads": "4"}, "threads must be a positive integer"),
        ({"engine": "gpu"}, "engine must be 'auto', 'jit' or 'interp'"),
    ):
        with pytest.raises(ValueError, match=says):
            emulate(ins, **options)


def test_alpha_zero_leaves_the_product_out_and_profiles_nest(spec):
    ins = spec("hopper")[HOPPER_F16]
    fp8 = spec("hopper")["wgmma.m64n8k32.f32.e4m3.e4m3"]
    c, inf = torch.ones(4, 4), torch.full((4, 4), float("inf"))
    with torch.no_grad(), emulate(ins) as mode:
        d = torch.addmm(c, inf, inf, alpha=0, beta=2)
    assert torch.equal(d, torch.addmm(c, inf, inf, alpha=0, beta=2)) and mode.calls == 1
    # a profile inside another emulate: its reference runs natively, not through the outer
    g = torch.Generator().manual_seed(8)
    a, b = torch.randn(12, 16, generator=g), torch.randn(16, 5, generator=g)
    with torch.no_grad(), emulate(ins, report=True) as alone:
        torch.mm(a, b)
    with torch.no_grad(), emulate(fp8, scaling="tensor") as outer:
        with emulate(ins, report=True) as nested:
            torch.mm(a, b)
    assert outer.calls == 0
    assert (nested.rows[0].max_rel, nested.rows[0].norm_rel) == (alone.rows[0].max_rel, alone.rows[0].norm_rel)


def test_composites_follow_torchs_own_decomposition(spec):
    """`F.linear` with a bias: on a contiguous 3-D input torch computes one `addmm` (the
    bias is C); on a non-contiguous one `x @ Wᵀ`, then the bias added in x's dtype. The
    emulation follows each, so the two differ, as they do natively."""
    ins = spec("hopper")[HOPPER_F16]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 16, 32, generator=g).half()
    w = torch.randn(8, 32, generator=g).half()
    bias = torch.randn(8, generator=g).half()
    strided = x.transpose(0, 1).contiguous().transpose(0, 1)
    assert not strided.is_contiguous() and torch.equal(strided, x)
    with emulate(ins):
        fused, added = torch.nn.functional.linear(x, w, bias), torch.nn.functional.linear(strided, w, bias)
    flat = x.reshape(64, 32)
    c = np.broadcast_to(bias.double().numpy(), (64, 8))
    with_c = ins.gemm(flat.double().numpy(), w.t().double().numpy(), c, round=True, pad=True)
    _same_bits(fused.float().reshape(64, 8), with_c.astype(np.float16))
    then = torch.from_numpy(_gemm(ins, flat, w.t()).astype(np.float16)) + bias
    _same_bits(added.float().reshape(64, 8), then.numpy())
    assert not torch.equal(fused, added)
