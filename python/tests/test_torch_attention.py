"""`scaled_dot_product_attention` under `mmac.torch.emulate`: the plain variant against a
NumPy reference built here (its two GEMMs by `ins.gemm`), the FlashAttention-2 blocked
variant against it, both against float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mmac.torch import emulate

HOPPER_F16 = "mma.m16n8k16.f32.f16.f16.f32"


def _qkv(seed, batch=(2, 3), L=10, S=21, E=16, Ev=16):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch + (L, E), generator=g)
    k = torch.randn(batch + (S, E), generator=g)
    v = torch.randn(batch + (S, Ev), generator=g)
    return q, k, v


def _plain_by_hand(ins, q, k, v, mask=None, is_causal=False, scale=None):
    """S = QKᵀ (instruction), times scale and masked in float32, P = exp(S - max), O = P V
    (instruction, P rounded to f16), O / rowsum(P): per batch and head."""
    q, k, v = (t.double().numpy() for t in (q, k, v))
    L, E = q.shape[-2:]
    S = k.shape[-2]
    scale = np.float32(1 / np.sqrt(E) if scale is None else scale)
    add = np.zeros((L, S), np.float32)
    if is_causal:
        add[np.triu_indices(L, 1, S)] = -np.inf
    if mask is not None:
        m = mask.numpy()
        add = np.where(m, add, -np.inf).astype(np.float32) if m.dtype == np.bool_ else add + m.astype(np.float32)
    out = np.zeros(q.shape[:-1] + (v.shape[-1],), np.float32)
    for idx in np.ndindex(*q.shape[:-2]):
        s = ins.gemm(q[idx], k[idx].T, round=True, pad=True) * scale + np.broadcast_to(add, (L, S))
        rowmax = s.max(axis=1)
        p = np.exp(s - np.where(rowmax == -np.inf, 0, rowmax)[:, None]).astype(np.float32)
        total = p.sum(axis=1, dtype=np.float32)
        o = ins.gemm(p, v[idx], round=True, pad=True)
        out[idx] = np.where(total[:, None] > 0, o / np.where(total > 0, total, 1)[:, None], 0)
    return out


def _sdpa(ins, q, k, v, **options):
    attention = {key: options.pop(key) for key in ("attention", "block") if key in options}
    with torch.no_grad(), emulate(ins, **attention) as mode:
        out = F.scaled_dot_product_attention(q, k, v, **options)
    assert mode.calls == 1, mode.calls  # one attention, not its pieces
    return out


@pytest.mark.parametrize("options", [
    {},
    {"is_causal": True, "scale": 0.3},
    {"attn_mask": "bool"},
    {"attn_mask": "float"},
])
def test_plain_attention_against_a_numpy_reference(spec, options):
    ins = spec("hopper")[HOPPER_F16]
    q, k, v = _qkv(41)
    options = dict(options)
    g = torch.Generator().manual_seed(42)
    if options.get("attn_mask") == "bool":
        mask = torch.rand(10, 21, generator=g) > 0.3
        mask[4] = False  # a row with every score masked gives 0
        options["attn_mask"] = mask
    elif options.get("attn_mask") == "float":
        options["attn_mask"] = torch.randn(10, 21, generator=g)
    got = _sdpa(ins, q, k, v, **options)
    want = _plain_by_hand(ins, q, k, v, mask=options.get("attn_mask"), is_causal=options.get("is_causal", False),
                          scale=options.get("scale"))
    assert got.dtype == torch.float32
    np.testing.assert_array_equal(got.numpy().view(np.uint32), want.view(np.uint32))
    native64 = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), **{
        key: (value.double() if isinstance(value, torch.Tensor) and value.is_floating_point() else value)
        for key, value in options.items()})
    assert np.abs(got.double().numpy() - native64.numpy()).max() < 5e-3


def test_flash_attention_blocks_and_online_softmax(spec):
    ins = spec("hopper")[HOPPER_F16]
    q, k, v = _qkv(43, L=40, S=70)  # causal rows past 16 reach into later blocks
    plain = _sdpa(ins, q, k, v, is_causal=True)
    one_block = _sdpa(ins, q, k, v, is_causal=True, attention="flash", block=70)
    np.testing.assert_array_equal(one_block.numpy().view(np.uint32), plain.numpy().view(np.uint32))
    blocked = _sdpa(ins, q, k, v, is_causal=True, attention="flash", block=16)
    native64 = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True).numpy()
    assert not torch.equal(blocked, plain)  # the rescaled accumulator rounds elsewhere
    for result in (plain, blocked):
        assert np.abs(result.double().numpy() - native64).max() < 5e-3


def test_flash_attention_by_hand_for_two_blocks(spec):
    ins = spec("hopper")[HOPPER_F16]
    q, k, v = _qkv(44, batch=(1,), L=16, S=32)
    got = _sdpa(ins, q, k, v, attention="flash", block=16)
    Q, K, V = (t[0].double().numpy() for t in (q, k, v))
    scale = np.float32(0.25)
    m = np.full(16, -np.inf, np.float32)
    total = np.zeros(16, np.float32)
    o = None
    for lo in (0, 16):
        s = ins.gemm(Q, K[lo:lo + 16].T, round=True, pad=True) * scale
        m_new = np.maximum(m, s.max(axis=1))
        p = np.exp(s - m_new[:, None])
        alpha = np.exp(m - m_new)
        total = alpha * total + p.sum(axis=1, dtype=np.float32)
        # the rescaled accumulator is the second block's C
        o = ins.gemm(p, V[lo:lo + 16], None if o is None else o * alpha[:, None], round=True, pad=True)
        m = m_new
    want = o / total[:, None]
    np.testing.assert_array_equal(got[0].numpy().view(np.uint32), want.view(np.uint32))


def test_attention_keeps_the_models_dtype_and_refuses_dropout(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.bf16.bf16.f32"]
    q, k, v = (t.to(torch.bfloat16) for t in _qkv(45, E=8, Ev=8))
    with torch.no_grad(), emulate(ins) as mode:
        out = F.scaled_dot_product_attention(q, k, v)
        calls = mode.calls
        with pytest.raises(RuntimeError, match="dropout_p=0.5: emulate computes attention without dropout"):
            F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 3, 10, 8) and calls == 1
    with torch.no_grad(), emulate(ins, attention="math") as mode:
        F.scaled_dot_product_attention(q, k, v)
    assert mode.calls == 2  # torch's decomposition: two bmm through the instruction
    with pytest.raises(ValueError, match="attention must be one of"):
        emulate(ins, attention="fused")
    with pytest.raises(ValueError, match="block .* must be a positive integer"):
        emulate(ins, attention="flash", block=0)
