"""Convolutions as the implicit GEMM of tensor-core libraries (for ``mmac.torch``).

A convolution of an input ``(N, C_in, *spatial)`` with a weight ``(C_out, C_in/groups,
*kernel)`` becomes, per group, one GEMM: A is the im2col matrix, one row per output
position (``N * prod(out)`` rows: the batch folds into M), one column per (kernel
position, input channel) pair; B is the weight as a ``K x C_out/groups`` matrix; the
columns of D are the output channels. The K order is part of the result (it decides which
products share a k-step), and :data:`IM2COL_ORDERS` names the two in use:

- ``"channels_last"``: K = (kernel position, c_in), channels fastest: the channels-last
  (NHWC) implicit GEMM that CUTLASS and cuDNN's tensor-core kernels run (for each filter
  tap, a slab of channels), the layout tensor cores are fed in;
- ``"channels_first"``: K = (c_in, kernel position), kernel positions fastest: torch's
  ``unfold`` and the weight's own (C_out, C_in, kh, kw) layout.

A transposed convolution runs as its equivalent direct convolution: ``stride - 1`` zeros
inserted between input elements, ``dilation * (k - 1) - padding`` zeros around them (plus
``output_padding`` at the end), the kernel flipped in every spatial dimension with its
input and output channels swapped per group, then a stride-1 convolution. (cuDNN's data
gradient skips the inserted zeros; here they are +0 products inside the k-steps.)
"""

from __future__ import annotations

import math

import numpy as np

IM2COL_ORDERS = ("channels_last", "channels_first")


def convolution(gemm, x, w, bias, stride, padding, dilation, transposed, output_padding, groups, order):
    """``aten.convolution`` on float64 arrays through ``gemm(A, B, C)`` (one call per
    group; ``bias`` is the GEMM's C, broadcast over the output positions). Returns D as
    ``(N, C_out, *out)`` in the dtype ``gemm`` gives."""
    nd = x.ndim - 2
    stride, padding, dilation, output_padding = (
        _per_dim(v, nd, name)
        for v, name in (
            (stride, "stride"),
            (padding, "padding"),
            (dilation, "dilation"),
            (output_padding, "output_padding"),
        )
    )
    _check(x, w, bias, transposed, groups, stride, dilation, padding)
    if transposed:
        x, w = transposed_as_direct(x, w, stride, padding, dilation, output_padding, groups)
        stride, padding = (1,) * nd, (0,) * nd
    n, c_in = x.shape[:2]
    c_out = w.shape[0]
    cig, cog = c_in // groups, c_out // groups
    parts = []
    out = None
    for g in range(groups):
        A, out = im2col(x[:, g * cig : (g + 1) * cig], w.shape[2:], stride, padding, dilation, order)
        B = weight_matrix(w[g * cog : (g + 1) * cog], order)
        C = None if bias is None else np.broadcast_to(bias[g * cog : (g + 1) * cog], (A.shape[0], cog))
        parts.append(gemm(A, B, C))
    D = np.concatenate(parts, axis=1).reshape((n, *out, c_out))
    return np.ascontiguousarray(np.moveaxis(D, -1, 1))


def im2col(x, kernel, stride, padding, dilation, order):
    """The im2col matrix of ``x`` (N, C, *spatial): ``(N * prod(out), C * prod(kernel))``
    with K in ``order`` (module doc), and the output's spatial shape."""
    n, c = x.shape[:2]
    nd = len(kernel)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    out = tuple(
        (s - d * (k - 1) - 1) // st + 1 for s, k, st, d in zip(xp.shape[2:], kernel, stride, dilation)
    )
    if any(o <= 0 for o in out):
        raise RuntimeError(
            f"convolution: the kernel {tuple(kernel)} (dilation {tuple(dilation)}) is larger than "
            f"the padded input {tuple(xp.shape[2:])}"
        )
    taps = []
    for offsets in np.ndindex(*kernel):
        window = tuple(slice(o * d, o * d + st * (m - 1) + 1, st) for o, d, st, m in zip(offsets, dilation, stride, out))
        taps.append(xp[(slice(None), slice(None)) + window])  # (N, C, *out)
    patches = np.stack(taps, axis=2)  # (N, C, taps, *out)
    patches = np.moveaxis(patches, list(range(3, 3 + nd)), list(range(1, 1 + nd)))  # (N, *out, C, taps)
    if order == "channels_last":
        patches = np.swapaxes(patches, -1, -2)  # (N, *out, taps, C)
    return patches.reshape(n * math.prod(out), c * len(taps)), out


def weight_matrix(w, order):
    """A weight (C_out, C_in, *kernel) as the GEMM's B: ``K x C_out`` with K in ``order``."""
    c_out, c_in = w.shape[:2]
    taps = w.reshape(c_out, c_in, -1)
    if order == "channels_last":
        taps = np.swapaxes(taps, 1, 2)  # (C_out, taps, C_in)
    return np.ascontiguousarray(taps.reshape(c_out, -1).T)


def transposed_as_direct(x, w, stride, padding, dilation, output_padding, groups):
    """The input and weight of the stride-1 direct convolution that a transposed
    convolution equals (module doc): zeros inserted and padded, the kernel flipped."""
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    kernel = w.shape[2:]
    spread = np.zeros((n, c) + tuple((s - 1) * st + 1 for s, st in zip(spatial, stride)), x.dtype)
    spread[(slice(None), slice(None)) + tuple(slice(None, None, st) for st in stride)] = x
    edges = [(d * (k - 1) - p, d * (k - 1) - p + op) for k, d, p, op in zip(kernel, dilation, padding, output_padding)]
    spread = _pad_or_crop(spread, edges)
    c_in, cog = w.shape[:2]
    cig = c_in // groups
    grouped = w.reshape((groups, cig, cog) + kernel)
    direct = np.swapaxes(grouped, 1, 2).reshape((groups * cog, cig) + kernel)
    direct = np.flip(direct, axis=tuple(range(2, 2 + len(kernel))))
    return spread, np.ascontiguousarray(direct)


def _pad_or_crop(x, edges):
    """``x`` with ``(before, after)`` zeros added per spatial dimension (a negative
    amount crops)."""
    pad = [(0, 0), (0, 0)] + [(max(b, 0), max(a, 0)) for b, a in edges]
    x = np.pad(x, pad)
    crop = tuple(slice(max(-b, 0), x.shape[2 + i] - max(-a, 0)) for i, (b, a) in enumerate(edges))
    return x[(slice(None), slice(None)) + crop]


def _per_dim(value, nd, name):
    """A per-dimension parameter as a tuple of ``nd`` ints (a single value repeats)."""
    values = tuple(int(v) for v in value) if isinstance(value, (list, tuple)) else (int(value),)
    if len(values) == 1:
        values = values * nd
    if len(values) != nd:
        raise RuntimeError(f"convolution: {name} has {len(values)} values for {nd} spatial dimensions")
    return values


def _check(x, w, bias, transposed, groups, stride, dilation, padding):
    """torch's own checks of a convolution's shapes, as errors (never a wrong result)."""
    if x.ndim < 3 or w.ndim != x.ndim:
        raise RuntimeError(
            f"convolution: an input (N, C, *spatial) of {x.ndim} dimensions needs a weight of as "
            f"many, found {w.ndim}"
        )
    if groups < 1 or any(s < 1 for s in stride) or any(d < 1 for d in dilation) or any(p < 0 for p in padding):
        raise RuntimeError("convolution: groups, stride and dilation must be positive and padding non-negative")
    c_in = x.shape[1]
    if transposed:
        ok = w.shape[0] == c_in and c_in % groups == 0
        c_out = w.shape[1] * groups
        expected = f"weight of shape ({c_in}, C_out/groups, ...)"
    else:
        ok = w.shape[1] * groups == c_in and w.shape[0] % groups == 0
        c_out = w.shape[0]
        expected = f"weight of shape (C_out, {c_in}/{groups}, ...) with C_out a multiple of groups"
    if not ok:
        raise RuntimeError(
            f"convolution: input with {c_in} channels and groups={groups} needs a {expected}, "
            f"found {tuple(w.shape)}"
        )
    if bias is not None and bias.shape != (c_out,):
        raise RuntimeError(f"convolution: bias must have {c_out} elements, found shape {tuple(bias.shape)}")
