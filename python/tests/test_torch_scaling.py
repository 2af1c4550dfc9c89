"""`mmac.torch.emulate`'s scaling recipes (per tensor, per row, MX and NVFP4 block scales)
and kernel-level accumulation (split-K, promotion), each against a reference built here
by hand: NumPy computes the scales and the slices, `ins.gemm` the instruction."""

from __future__ import annotations

import math
import warnings

import ml_dtypes
import numpy as np
import pytest
import torch

from mmac.torch import emulate

HOPPER_F16 = "mma.m16n8k16.f32.f16.f16.f32"
HOPPER_FP8 = "wgmma.m64n8k32.f32.e4m3.e4m3"
MXFP8 = "tcgen05.mma.block_scale.m64n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"
MXFP4 = "tcgen05.mma.block_scale.m64n8k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0"
NVFP4 = "tcgen05.mma.block_scale.m64n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3"
E4M3 = ml_dtypes.float8_e4m3fn


def _pad(x, rows, cols):
    out = np.zeros((-(-x.shape[0] // rows) * rows, -(-x.shape[1] // cols) * cols), x.dtype)
    out[: x.shape[0], : x.shape[1]] = x
    return out


def _operands(seed, m, k, n, spread=1.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g) * spread
    w = torch.randn(n, k, generator=g) * spread
    bias = torch.randn(n, generator=g)
    return x, w, bias


def _linear(ins, x, w, bias, **options):
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # no out-of-range warning under a recipe
        with emulate(ins, **options) as mode:
            y = torch.nn.functional.linear(x, w, bias)
    assert mode.calls == 1
    return y.numpy()


def test_per_tensor_scaling_against_a_hand_built_reference(spec):
    ins = spec("hopper")[HOPPER_FP8]
    x, w, bias = _operands(21, 50, 70, 12, spread=1000.0)  # far beyond e4m3's 448
    got = _linear(ins, x, w, bias, scaling="tensor")
    A, B = x.numpy(), w.numpy().T  # float32
    sa = np.float32(448) / np.abs(A).max()
    sb = np.float32(448) / np.abs(B).max()
    a8 = np.clip(A * sa, -448, 448).astype(E4M3)
    b8 = np.clip(B * sb, -448, 448).astype(E4M3)
    D = ins.gemm(_pad(a8, 64, 32), _pad(b8, 32, 8))[:50, :12]
    alpha = (np.float32(1) / sa) * (np.float32(1) / sb)
    want = D * alpha + bias.numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    exact = x.double().numpy() @ w.double().numpy().T + bias.double().numpy()
    assert np.abs(got - exact).max() < 0.1 * np.abs(exact).max()


def test_per_row_scaling_against_a_hand_built_reference(spec):
    ins = spec("hopper")[HOPPER_FP8]
    x, w, bias = _operands(22, 40, 64, 16)
    x[3] *= 1e5  # one row far out of range: its own scale keeps the others precise
    got = _linear(ins, x, w, bias, scaling="row")
    A, B = x.numpy(), w.numpy().T
    sa = np.float32(448) / np.abs(A).max(axis=1)
    sb = np.float32(448) / np.abs(B).max(axis=0)
    a8 = np.clip(A * sa[:, None], -448, 448).astype(E4M3)
    b8 = np.clip(B * sb[None, :], -448, 448).astype(E4M3)
    D = ins.gemm(_pad(a8, 64, 32), _pad(b8, 32, 8))[:40, :16]
    want = (D * (np.float32(1) / sa)[:, None]) * (np.float32(1) / sb)[None, :] + bias.numpy()
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    per_tensor = _linear(ins, x, w, bias, scaling="tensor")
    exact = x.double().numpy() @ w.double().numpy().T + bias.double().numpy()
    others = np.arange(40) != 3
    assert np.abs(got - exact)[others].mean() < 0.5 * np.abs(per_tensor - exact)[others].mean()


def _mx_reference(x, block, emax, top, elem_dtype):
    """OCP MX by hand: per block, X = 2^(floor(log2 amax) - emax), elements V / X."""
    rows, cols = x.shape
    elems = np.zeros((rows, cols), elem_dtype)
    scales = np.zeros((rows, cols // block), ml_dtypes.float8_e8m0fnu)
    for i in range(rows):
        for j in range(cols // block):
            v = x[i, j * block : (j + 1) * block].astype(np.float64)
            amax = np.abs(v).max()
            e = 0 if amax == 0 else math.floor(math.log2(amax)) - emax
            scales[i, j] = 2.0**e
            elems[i, j * block : (j + 1) * block] = np.clip(v / 2.0**e, -top, top).astype(elem_dtype)
    return elems, scales


@pytest.mark.parametrize("name,emax,top,elem_dtype", [
    (MXFP8, 8, 448.0, E4M3),
    (MXFP4, 2, 6.0, ml_dtypes.float4_e2m1fn),
])
def test_mx_block_scales_against_a_hand_built_reference(spec, name, emax, top, elem_dtype):
    ins = spec("blackwell")[name]
    x, w, bias = _operands(23, 30, 100, 8)
    x[:, :10] *= 1e4  # blocks of very different magnitudes
    got = _linear(ins, x, w, bias, scaling="block")
    A = _pad(x.double().numpy(), ins.m, ins.k)
    B = _pad(w.double().numpy().T, ins.k, ins.n)
    a, sa = _mx_reference(A, 32, emax, top, elem_dtype)
    bt, sbt = _mx_reference(B.T, 32, emax, top, elem_dtype)
    D = ins.gemm(a, np.ascontiguousarray(bt.T), sa=sa, sb=np.ascontiguousarray(sbt.T))[:30, :8]
    want = D + bias.numpy()
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    exact = x.double().numpy() @ w.double().numpy().T + bias.double().numpy()
    assert np.abs(got - exact).max() < (0.1 if top > 6 else 0.5) * np.abs(exact).max()


def test_nvfp4_two_level_scales_against_a_hand_built_reference(spec):
    ins = spec("blackwell")[NVFP4]
    x, w, bias = _operands(24, 20, 128, 8, spread=30.0)
    got = _linear(ins, x, w, bias, scaling="block")
    fp4 = ml_dtypes.float4_e2m1fn

    def quantize(v):  # rows of v in blocks of 16: e4m3 block scales under a float32 tensor scale
        v = v.astype(np.float32)
        g = np.float32(448 * 6) / np.abs(v).max()
        elems = np.zeros(v.shape, fp4)
        codes = np.zeros((v.shape[0], v.shape[1] // 16), np.uint8)
        for i in range(v.shape[0]):
            for j in range(v.shape[1] // 16):
                blk = v[i, j * 16 : (j + 1) * 16]
                s = np.float32(np.abs(blk).max() / np.float32(6) * g).astype(E4M3)
                codes[i, j] = s.view(np.uint8)
                enc = g / np.float32(s) if np.float32(s) > 0 else np.float32(0)
                elems[i, j * 16 : (j + 1) * 16] = np.clip(blk * np.float32(enc), -6, 6).astype(fp4)
        return elems, codes, g

    a, sa, ga = quantize(_pad(x.numpy(), ins.m, ins.k))
    bt, sbt, gb = quantize(_pad(w.numpy(), ins.n, ins.k))
    D = ins.gemm(a, np.ascontiguousarray(bt.T), sa=sa, sb=np.ascontiguousarray(sbt.T))[:20, :8]
    want = D * ((np.float32(1) / ga) * (np.float32(1) / gb)) + bias.numpy()
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    exact = x.double().numpy() @ w.double().numpy().T + bias.double().numpy()
    assert np.abs(got - exact).max() < 0.3 * np.abs(exact).max()


def test_without_a_recipe_out_of_range_values_keep_their_warning(spec):
    ins = spec("hopper")[HOPPER_FP8]
    x, w, _ = _operands(25, 8, 32, 8)
    x = x * 1000.0
    with torch.no_grad(), emulate(ins), pytest.warns(UserWarning, match="values of a are beyond e4m3's range"):
        x @ w.T


def _sliced_reference(ins, x, w, bias, bounds):
    """Each K slice a GEMM from C = 0, summed in float32 in order, then the bias."""
    A = _pad(x.double().numpy(), ins.m, ins.k).astype(ml_dtypes.float8_e4m3fn if "e4m3" in ins.name else np.float16)
    B = _pad(w.double().numpy().T, ins.k, ins.n).astype(A.dtype)
    acc = None
    for lo, hi in bounds:
        part = ins.gemm(np.ascontiguousarray(A[:, lo:hi]), np.ascontiguousarray(B[lo:hi]))
        acc = part if acc is None else acc + part
    M, N = x.shape[0], w.shape[0]
    return acc[:M, :N] + bias.numpy()


def test_promotion_every_128_elements_against_a_hand_built_reference(spec):
    ins = spec("hopper")[HOPPER_FP8]
    x, w, bias = _operands(26, 64, 500, 8)
    got = _linear(ins, x, w, bias, promote_every=128)
    bounds = [(0, 128), (128, 256), (256, 384), (384, 512)]  # K padded to 512
    want = _sliced_reference(ins, x, w, bias, bounds)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    # promotion changes the bits, and brings them closer to the exact result
    plain = _linear(ins, x, w, bias)
    assert (got != plain).any()
    exact = (x.double().numpy().astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
             @ w.double().numpy().astype(ml_dtypes.float8_e4m3fn).astype(np.float64).T + bias.double().numpy())
    assert np.abs(got - exact).mean() < np.abs(plain - exact).mean()


def test_split_k_against_a_hand_built_reference(spec):
    ins = spec("hopper")[HOPPER_F16]
    x, w, bias = _operands(27, 20, 100, 12)
    got = _linear(ins, x, w, bias, split_k=3)
    # K = 100 padded to 112: 7 k-steps, slices of ceil(7 / 3) = 3 steps
    want = _sliced_reference(ins, x, w, bias, [(0, 48), (48, 96), (96, 112)])
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    one = _linear(ins, x, w, bias, split_k=1)
    np.testing.assert_array_equal(one.view(np.uint32), ins.gemm(
        x.numpy(), w.numpy().T, np.broadcast_to(bias.numpy(), (20, 12)), round=True, pad=True).view(np.uint32))


def test_recipe_and_accumulation_options_are_checked(spec):
    hopper, blackwell = spec("hopper"), spec("blackwell")
    f16, fp8 = hopper[HOPPER_F16], hopper[HOPPER_FP8]
    with pytest.raises(ValueError, match="scaling must be one of"):
        emulate(fp8, scaling="amax")
    with pytest.raises(ValueError, match="scales FP8/FP6/FP4 operands; .* a = f16"):
        emulate(f16, scaling="tensor")
    with pytest.raises(ValueError, match="takes block-scaled instructions"):
        emulate(fp8, scaling="block")
    with pytest.raises(ValueError, match="is block-scaled .*: emulate needs scaling='block'"):
        emulate(blackwell[MXFP8], scaling="row")
    with pytest.raises(ValueError, match="split_k must be a positive integer"):
        emulate(f16, split_k=0)
    with pytest.raises(ValueError, match="promote_every must be a positive multiple of .* k = 16"):
        emulate(f16, promote_every=24)
    with pytest.raises(ValueError, match="not both"):
        emulate(f16, split_k=2, promote_every=32)
