"""Scaled dot-product attention as GPU attention kernels compute it (for ``mmac.torch``).

Per batch and head, with ``gemm(A, B, C)`` the instruction's GEMM (operands rounded into
its formats, D in d's format):

1. ``S = gemm(Q, Kᵀ)``, converted to float32 and multiplied by ``float32(scale)``
   (default ``1/sqrt(E)``); a boolean mask puts -inf where it is False, a float mask is
   added in float32, ``is_causal`` masks the positions above the diagonal (top-left
   aligned, as torch);
2. the softmax in float32 with the normalization deferred, as fused kernels do:
   ``P = exp(S - rowmax)``, row sums ``l`` by NumPy's float32 sum;
3. ``O = gemm(P, V)`` with P rounded into a's format (as FlashAttention casts P to the
   input dtype), then ``O / l`` in float32. A row whose every score is masked gives 0 (as
   torch's ``_safe_softmax`` and FlashAttention-2).

``variant="plain"`` does this with all of K and V at once. ``variant="flash"`` is
FlashAttention-2's loop over blocks of ``block`` rows of K and V with the online softmax:
per block, ``m_new = max(m, rowmax(S_j))``, ``P_j = exp(S_j - m_new)``, the correction
``alpha = exp(m - m_new)`` (an -inf running max counts as 0), ``l = alpha * l +
rowsum(P_j)``, all in float32; the output accumulator is rescaled by ``alpha`` in float32
and is the C of the block's ``gemm(P_j, V_j, C)`` (FlashAttention-2 keeps O in the MMA's
accumulator registers and rescales them between blocks); the division by ``l`` comes once,
after the last block. With one block the two variants are the same computation.
"""

from __future__ import annotations

import numpy as np

VARIANTS = ("plain", "flash")


def attention(gemm, q, k, v, *, mask=None, is_causal=False, scale=None, variant="plain", block=64):
    """``softmax(Q Kᵀ * scale + mask) V`` for float64 arrays ``q`` (..., L, E), ``k``
    (..., S, E), ``v`` (..., S, Ev) with the same leading dimensions; ``mask``
    broadcastable to (..., L, S), boolean (True: attend) or float (added). Returns the
    output (..., L, Ev) and the log-sum-exp of the scaled scores (..., L), float32."""
    batch = q.shape[:-2]
    L, E = q.shape[-2:]
    S, Ev = v.shape[-2:]
    bias = _score_bias(mask, is_causal, batch, L, S)
    scale = np.float32(1.0 / np.sqrt(E) if scale is None else scale)
    step = S if variant == "plain" else block
    q3, k3, v3 = (t.reshape((-1,) + t.shape[-2:]) for t in (q, k, v))
    bias3 = None if bias is None else bias.reshape((-1, L, S))
    out = np.empty((q3.shape[0], L, Ev), np.float32)
    lse = np.empty((q3.shape[0], L), np.float32)
    for h in range(q3.shape[0]):
        out[h], lse[h] = one_head(gemm, q3[h], k3[h], v3[h], None if bias3 is None else bias3[h], scale, step)
    return out.reshape(batch + (L, Ev)), lse.reshape(batch + (L,))


def one_head(gemm, q, k, v, bias, scale, block):
    """One head's attention, K and V in blocks of ``block`` rows (module doc)."""
    L, S = q.shape[0], k.shape[0]
    m = np.full(L, -np.inf, np.float32)
    l = np.zeros(L, np.float32)
    o = np.zeros((L, v.shape[1]), np.float32)
    for lo in range(0, S, max(block, 1)):
        hi = min(lo + block, S)
        s = gemm(q, k[lo:hi].T, None).astype(np.float32) * scale
        if bias is not None:
            s = s + bias[:, lo:hi]
        m_new = np.maximum(m, s.max(axis=1))
        m_safe = np.where(m_new == -np.inf, np.float32(0), m_new)
        p = np.exp(s - m_safe[:, None])
        alpha = np.exp(m - m_safe)
        l = alpha * l + p.sum(axis=1, dtype=np.float32)
        o = gemm(p, v[lo:hi], None if lo == 0 else o * alpha[:, None]).astype(np.float32)
        m = m_new
    seen = l > 0
    out = np.where(seen[:, None], o / np.where(seen, l, np.float32(1))[:, None], np.float32(0))
    with np.errstate(divide="ignore"):
        lse = np.where(seen, m + np.log(l), np.float32(-np.inf)).astype(np.float32)
    return out.astype(np.float32), lse


def _score_bias(mask, is_causal, batch, L, S):
    """The float32 term added to the scaled scores (-inf where masked), or None."""
    bias = None
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype == np.bool_:
            bias = np.where(mask, np.float32(0), np.float32(-np.inf))
        else:
            bias = mask.astype(np.float32)
    if is_causal:
        causal = np.where(np.tril(np.ones((L, S), bool)), np.float32(0), np.float32(-np.inf))
        bias = causal if bias is None else bias + causal
    if bias is None:
        return None
    try:
        return np.ascontiguousarray(np.broadcast_to(bias, batch + (L, S)))
    except ValueError:
        raise ValueError(
            f"attn_mask of shape {tuple(np.shape(mask))} does not broadcast to the scores' "
            f"{batch + (L, S)}"
        ) from None
