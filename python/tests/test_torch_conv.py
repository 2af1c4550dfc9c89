"""Convolutions under `mmac.torch.emulate`: one implicit GEMM per group, checked bit for bit
against an im2col built here by loops and `ins.gemm`, and against torch's float64
convolution within the instruction's error."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mmac.torch import emulate

HOPPER_F16 = "mma.m16n8k16.f32.f16.f16.f32"


def _im2col_by_loops(x, kernel, stride, padding, dilation, channels_last):
    """Rows: output positions (n, *out) in order; columns: K as (tap, c) or (c, tap)."""
    n, c = x.shape[:2]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    out = [(s - d * (k - 1) - 1) // st + 1 for s, k, st, d in zip(xp.shape[2:], kernel, stride, dilation)]
    taps = list(itertools.product(*(range(k) for k in kernel)))
    rows = []
    for b in range(n):
        for pos in itertools.product(*(range(o) for o in out)):
            row = []
            pairs = [(t, ch) for t in taps for ch in range(c)] if channels_last else [(t, ch) for ch in range(c) for t in taps]
            for t, ch in pairs:
                at = tuple(p * st + i * d for p, st, i, d in zip(pos, stride, t, dilation))
                row.append(xp[(b, ch) + at])
            rows.append(row)
    return np.array(rows), out


def _reference(ins, x, w, bias, stride, padding, dilation, groups, channels_last=True):
    """The direct convolution through ins.gemm: per group, im2col by loops, the weight as
    K x C_out (same K order), the bias as C; D back to (N, C_out, *out)."""
    x, w = x.double().numpy(), w.double().numpy()
    n, c_in = x.shape[:2]
    c_out = w.shape[0]
    cig, cog = c_in // groups, c_out // groups
    parts = []
    for g in range(groups):
        A, out = _im2col_by_loops(x[:, g * cig : (g + 1) * cig], w.shape[2:], stride, padding, dilation, channels_last)
        wg = w[g * cog : (g + 1) * cog].reshape(cog, cig, -1)
        B = (wg.transpose(0, 2, 1) if channels_last else wg).reshape(cog, -1).T
        C = None
        if bias is not None:
            C = np.broadcast_to(bias.double().numpy()[g * cog : (g + 1) * cog], (A.shape[0], cog))
        parts.append(ins.gemm(A, B, C, round=True, pad=True))
    D = np.concatenate(parts, axis=1).reshape([n] + out + [c_out])
    return np.moveaxis(D, -1, 1)


def _check(ins, got, want, native64):
    assert got.dtype == torch.float32 and tuple(got.shape) == want.shape
    np.testing.assert_array_equal(got.contiguous().numpy().view(np.uint32), np.ascontiguousarray(want).view(np.uint32))
    # f16 operands: a few 2^-11 relative roundings per product
    err = np.abs(got.double().numpy() - native64.numpy()).max()
    assert err < 2e-2 * np.abs(native64.numpy()).max(), err


CASES = [
    # (spatial dims, in channels, out channels, kernel, stride, padding, dilation, groups)
    (1, 4, 6, 3, 2, 1, 1, 2),
    (2, 3, 8, 3, 1, 1, 1, 1),
    (2, 4, 4, 3, 2, 2, 2, 4),
    (3, 2, 3, 2, 1, 0, 1, 1),
]


@pytest.mark.parametrize("nd,cin,cout,k,stride,padding,dilation,groups", CASES)
def test_direct_convolutions_against_im2col_by_hand(spec, nd, cin, cout, k, stride, padding, dilation, groups):
    ins = spec("hopper")[HOPPER_F16]
    g = torch.Generator().manual_seed(31 + nd)
    x = torch.randn((2, cin) + (6,) * nd, generator=g)
    w = torch.randn((cout, cin // groups) + (k,) * nd, generator=g)
    bias = torch.randn(cout, generator=g)
    conv = getattr(F, f"conv{nd}d")
    with torch.no_grad(), emulate(ins) as mode:
        got = conv(x, w, bias, stride=stride, padding=padding, dilation=dilation, groups=groups)
    assert mode.calls == 1
    want = _reference(ins, x, w, bias, (stride,) * nd, (padding,) * nd, (dilation,) * nd, groups)
    native64 = conv(x.double(), w.double(), bias.double(), stride=stride, padding=padding, dilation=dilation, groups=groups)
    _check(ins, got, want, native64)


def test_the_k_order_is_an_option_and_changes_the_bits(spec):
    ins = spec("hopper")[HOPPER_F16]
    g = torch.Generator().manual_seed(35)
    x = torch.randn(1, 8, 7, 7, generator=g)
    w = torch.randn(4, 8, 3, 3, generator=g)
    with torch.no_grad():
        with emulate(ins) as mode:
            last = F.conv2d(x, w)
        with emulate(ins, im2col="channels_first"):
            first = F.conv2d(x, w)
    assert mode.im2col == "channels_last"
    want = _reference(ins, x, w, None, (1, 1), (0, 0), (1, 1), 1, channels_last=False)
    np.testing.assert_array_equal(first.numpy().view(np.uint32), np.ascontiguousarray(want).view(np.uint32))
    assert not torch.equal(first, last)
    with pytest.raises(ValueError, match="im2col must be one of"):
        emulate(ins, im2col="nhwc")


def test_transposed_convolution_as_zero_insertion_and_a_flipped_kernel(spec):
    ins = spec("hopper")[HOPPER_F16]
    g = torch.Generator().manual_seed(36)
    x = torch.randn(2, 4, 5, 5, generator=g)
    w = torch.randn(4, 3, 3, 3, generator=g)  # (C_in, C_out / groups, kh, kw), groups = 2
    bias = torch.randn(6, generator=g)
    stride, padding, output_padding, groups = 2, 1, 1, 2
    with torch.no_grad(), emulate(ins) as mode:
        got = F.conv_transpose2d(x, w, bias, stride=stride, padding=padding, output_padding=output_padding, groups=groups)
    assert mode.calls == 1
    # by hand: zeros between the inputs, k - 1 - padding around them (+ output_padding at the
    # end), the kernel flipped with its channels swapped per group, a stride-1 convolution
    xs = np.zeros((2, 4, 9, 9))
    xs[:, :, ::2, ::2] = x.double().numpy()
    xs = np.pad(xs, [(0, 0), (0, 0), (1, 2), (1, 2)])
    wd = np.zeros((6, 2, 3, 3))
    for gi in range(groups):
        for i in range(2):
            for o in range(3):
                wd[gi * 3 + o, i] = w.double().numpy()[gi * 2 + i, o, ::-1, ::-1]
    want = _reference(ins, torch.from_numpy(xs), torch.from_numpy(wd), bias, (1, 1), (0, 0), (1, 1), groups)
    native64 = F.conv_transpose2d(x.double(), w.double(), bias.double(), stride=stride, padding=padding,
                                  output_padding=output_padding, groups=groups)
    _check(ins, got, want, native64)


def test_a_bf16_cnn_keeps_its_dtype_and_bad_shapes_are_errors(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.bf16.bf16.f32"]
    torch.manual_seed(37)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 3)).to(torch.bfloat16)
    x = torch.randn(1, 3, 8, 8).to(torch.bfloat16)
    with torch.no_grad(), emulate(ins) as mode:
        y = model(x)
        calls = mode.calls
        with pytest.raises(RuntimeError, match="input with 3 channels and groups=1 needs a weight"):
            torch.ops.aten.convolution(x, torch.ones(2, 2, 3, 3, dtype=torch.bfloat16), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    assert y.dtype == torch.bfloat16 and y.shape == (1, 2, 6, 6) and calls == 2
