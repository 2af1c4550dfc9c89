"""torch tensors in and out, and `mmac.torch.emulate` on a small model."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
import torch

import mmac.torch
from mmac.torch import emulate, round_to_format

HOPPER_F16 = "mma.m16n8k16.f32.f16.f16.f32"
HOPPER_FP8 = "wgmma.m64n8k32.f32.e4m3.e4m3"


def _bits(x):
    a = x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    return a.view(np.uint32)


def test_tensors_in_give_tensors_out(spec):
    ins = spec("hopper")[HOPPER_F16]
    g = torch.Generator().manual_seed(3)
    A = torch.randn(32, 32, generator=g).to(torch.float16)
    B = torch.randn(32, 16, generator=g).to(torch.float16)
    C = torch.randn(32, 16, generator=g)
    D = ins.gemm(A, B, C)
    assert isinstance(D, torch.Tensor) and D.dtype == torch.float32 and D.shape == (32, 16)
    np.testing.assert_array_equal(_bits(D), _bits(ins.gemm(A.numpy(), B.numpy(), C.numpy())))
    d = ins.dot(C[0, 0], A[0, :16], B[:16, 0])
    assert isinstance(d, torch.Tensor) and d.dtype == torch.float32 and d.shape == ()


@pytest.mark.parametrize(
    "stem,name,tdtype,mdtype",
    [
        ("hopper", "mma.m16n8k16.f32.bf16.bf16.f32", torch.bfloat16, ml_dtypes.bfloat16),
        ("hopper", HOPPER_FP8, torch.float8_e4m3fn, ml_dtypes.float8_e4m3fn),
        ("hopper", "wgmma.m64n8k32.f32.e5m2.e5m2", torch.float8_e5m2, ml_dtypes.float8_e5m2),
        ("cdna3", "v_mfma_f32_16x16x32_fp8_fp8", torch.float8_e4m3fnuz, ml_dtypes.float8_e4m3fnuz),
        ("cdna3", "v_mfma_f32_16x16x32_bf8_bf8", torch.float8_e5m2fnuz, ml_dtypes.float8_e5m2fnuz),
    ],
)
def test_bf16_and_fp8_tensors(spec, stem, name, tdtype, mdtype):
    ins = spec(stem)[name]
    g = torch.Generator().manual_seed(5)
    A = torch.randn(ins.m, 2 * ins.k, generator=g).to(tdtype)
    B = torch.randn(2 * ins.k, ins.n, generator=g).to(tdtype)
    D = ins.gemm(A, B)
    assert D.dtype == torch.float32
    # the same bits as ml_dtypes arrays of the same values
    a = A.float().numpy().astype(mdtype)
    b = B.float().numpy().astype(mdtype)
    np.testing.assert_array_equal(_bits(D), _bits(ins.gemm(a, b)))


def test_a_tensor_of_another_format_is_refused(spec):
    ins = spec("cdna3")["v_mfma_f32_16x16x32_fp8_fp8"]
    A = torch.zeros(16, 32, dtype=torch.float8_e4m3fn)
    B = torch.zeros(32, 16, dtype=torch.float8_e4m3fnuz)
    with pytest.raises(ValueError, match="A must be float8_e4m3fnuz .* found torch.float8_e4m3fn"):
        ins.gemm(A, B)


def _reference(ins, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None):
    """y = x @ w.T + bias through ins.gemm by hand: RNE casts, zero padding, cropping."""
    M, K = x.shape
    N = w.shape[0]
    Mp, Kp, Np = -(-M // ins.m) * ins.m, -(-K // ins.k) * ins.k, -(-N // ins.n) * ins.n
    A = np.zeros((Mp, Kp)); A[:M, :K] = x.double().numpy()
    B = np.zeros((Kp, Np)); B[:K, :N] = w.double().numpy().T
    args = [round_to_format(A, ins.format("a")), round_to_format(B, ins.format("b"))]
    if bias is not None:
        C = np.zeros((Mp, Np)); C[:M, :N] = np.broadcast_to(bias.double().numpy(), (M, N))
        args.append(round_to_format(C, ins.format("c")))
    return torch.from_numpy(np.ascontiguousarray(ins.gemm(*args)[:M, :N]))


@pytest.mark.parametrize("stem,name", [("hopper", HOPPER_F16), ("hopper", HOPPER_FP8), ("cdna3", "v_mfma_f32_16x16x32_fp8_fp8")])
def test_emulate_runs_a_sequential_model_through_the_instruction(spec, stem, name):
    ins = spec(stem)[name]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 24), torch.nn.ReLU(), torch.nn.Linear(24, 10, bias=False))
    x = torch.randn(37, 20)
    with torch.no_grad():
        native = model(x)
        with emulate(ins) as mode:
            emulated = model(x)
        assert mode.calls == 2
        # by hand: layer 1 (addmm, bias as C), ReLU natively, layer 2 (mm)
        h = _reference(ins, x, model[0].weight, model[0].bias)
        want = _reference(ins, torch.relu(h), model[2].weight, None)
    assert emulated.dtype == torch.float32
    np.testing.assert_array_equal(_bits(emulated), _bits(want))
    # emulation changes the bits, not the meaning
    assert not torch.equal(emulated, native)
    tolerance = 0.05 if "f16" in name else 0.5
    assert torch.allclose(emulated, native, atol=tolerance, rtol=0.1)


def test_emulate_covers_matmul_bmm_and_leaves_other_ops_native(spec):
    ins = spec("hopper")[HOPPER_F16]
    g = torch.Generator().manual_seed(1)
    a = torch.randn(3, 20, 30, generator=g)
    b = torch.randn(3, 30, 10, generator=g)
    v = torch.randn(30, generator=g)
    with torch.no_grad(), emulate(ins) as mode:
        batched = torch.matmul(a, b)  # bmm
        plain = a[0] @ b[0]  # mm
        mv = a[0] @ v  # mv
        dot = v @ v  # dot
        summed = (a * 2).sum()  # native
    assert mode.calls == 4
    for i in range(3):
        np.testing.assert_array_equal(_bits(batched[i]), _bits(_reference(ins, a[i], b[i].T, None)))
    np.testing.assert_array_equal(_bits(plain), _bits(batched[0]))
    np.testing.assert_array_equal(_bits(mv), _bits(_reference(ins, a[0], v.reshape(1, -1), None)[:, 0]))
    np.testing.assert_array_equal(_bits(dot.reshape(1)), _bits(_reference(ins, v.reshape(1, -1), v.reshape(1, -1), None)[0]))
    assert summed.item() == (a * 2).sum().item()


def test_emulate_refuses_instructions_a_float_model_cannot_use(spec):
    with pytest.raises(ValueError, match="an integer format"):
        emulate(spec("hopper")["mma.m16n8k32.s32.s8.s8.s32"])
    with pytest.raises(ValueError, match="block-scaled"):
        emulate(spec("blackwell")["tcgen05.mma.block_scale.m64n8k32.kind::mxf8f6f4.block32.f32.e4m3.e2m1.ue8m0"])


def test_tf32_rounding_is_to_nearest_even():
    fmt = {"kind": "float", "name": "tf32", "bits": 32, "exponent": 8, "mantissa": 10, "bias": 127,
           "specials": "ieee", "signed": True, "subnormals": True, "ignore_low": 13}
    ulp = 2.0**-10
    x = np.array([1 + ulp / 2, 1 + 3 * ulp / 2, 1 + ulp / 2 + 2**-20, -(1 + ulp / 2), np.inf, np.nan], np.float32)
    got = round_to_format(x, fmt)
    want = np.array([1.0, 1 + 2 * ulp, 1 + ulp, -1.0, np.inf], np.float32).view(np.uint32)
    np.testing.assert_array_equal(got[:5], want)
    assert got[5] == 0x7FC00000
    assert mmac.torch.__doc__ and "aten.mm" in mmac.torch.__doc__


def test_out_is_filled_as_torch_fills_it(spec):
    ins = spec("hopper")[HOPPER_F16]
    g = torch.Generator().manual_seed(7)
    a, b = torch.randn(20, 30, generator=g), torch.randn(30, 12, generator=g)
    out = torch.empty(0)
    with torch.no_grad(), emulate(ins) as mode:
        got = torch.mm(a, b, out=out)
        plain = torch.mm(a, b)
        with pytest.raises(RuntimeError, match="expected out= of dtype torch.float32"):
            torch.mm(a, b, out=torch.empty(20, 12, dtype=torch.float64))
    assert got is out and out.shape == (20, 12) and mode.calls == 3
    np.testing.assert_array_equal(_bits(out), _bits(_reference(ins, a, b.T, None)))
    np.testing.assert_array_equal(_bits(out), _bits(plain))


@pytest.mark.parametrize("tdtype", [torch.bfloat16, torch.float16, torch.float64])
def test_results_have_the_dtype_torch_gives(spec, tdtype):
    ins = spec("hopper")[HOPPER_F16]
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(30, 16), torch.nn.LayerNorm(16)).to(tdtype)
    x = torch.randn(9, 30).to(tdtype)
    with torch.no_grad(), emulate(ins) as mode:
        y = model(x)
        h = model[0](x)
    assert y.dtype == tdtype and h.dtype == tdtype and mode.calls == 2
    # D (f32) rounded to nearest even into the model's dtype
    with torch.no_grad():
        want = _reference(ins, x.double(), model[0].weight.double(), model[0].bias.double())
    assert torch.equal(h, want.to(tdtype))


def test_complex_operands_run_as_four_real_gemms(spec):
    ins = spec("hopper")[HOPPER_F16]
    g = torch.Generator().manual_seed(4)
    a = torch.complex(torch.randn(16, 32, generator=g), torch.randn(16, 32, generator=g))
    b = torch.complex(torch.randn(32, 8, generator=g), torch.randn(32, 8, generator=g))
    with torch.no_grad(), emulate(ins) as mode:
        d = a @ b
    assert d.dtype == torch.complex64 and mode.calls == 1

    def ref(x, y):
        return _reference(ins, x, y.T, None)

    re = ref(a.real, b.real) - ref(a.imag, b.imag)
    im = ref(a.real, b.imag) + ref(a.imag, b.real)
    np.testing.assert_array_equal(_bits(d.real.contiguous()), _bits(re))
    np.testing.assert_array_equal(_bits(d.imag.contiguous()), _bits(im))
    # complex32 gives complex32, as torch's matmul does where it has one: each part of
    # the same D (the operands' parts round into f16 alike either way) rounded to float16
    with torch.no_grad(), emulate(ins):
        half = a.to(torch.complex32) @ b.to(torch.complex32)
    assert half.dtype == torch.complex32
    parts = torch.view_as_real(half.to(torch.complex64))
    np.testing.assert_array_equal(_bits(parts[..., 0].contiguous()), _bits(re.half().float()))
    np.testing.assert_array_equal(_bits(parts[..., 1].contiguous()), _bits(im.half().float()))


def test_integer_matmuls_are_refused(spec):
    ins = spec("hopper")[HOPPER_F16]
    a = torch.ones(4, 4, dtype=torch.int64)
    with torch.no_grad(), emulate(ins), pytest.raises(RuntimeError, match="integer instruction"):
        a @ a


def test_addmv_addbmm_and_addr_are_emulated(spec):
    ins = spec("hopper")[HOPPER_F16]
    g = torch.Generator().manual_seed(8)
    a = torch.randn(3, 20, 16, generator=g)
    b = torch.randn(3, 16, 12, generator=g)
    c = torch.randn(20, 12, generator=g)
    v, w = torch.randn(16, generator=g), torch.randn(20, generator=g)
    x, y = torch.randn(20, generator=g), torch.randn(12, generator=g)
    with torch.no_grad(), emulate(ins) as mode:
        mv = torch.addmv(w, a[0], v)
        bmm = torch.addbmm(c, a, b)
        outer = torch.addr(c, x, y)
    assert mode.calls == 3
    np.testing.assert_array_equal(_bits(mv), _bits(_reference(ins, a[0], v.reshape(1, -1), w.reshape(-1, 1))[:, 0]))
    # the batch's K concatenated: one GEMM (K = 48, three k-steps of 16)
    a_cat = torch.cat(list(a), dim=1)
    b_cat = torch.cat(list(b), dim=0)
    np.testing.assert_array_equal(_bits(bmm), _bits(_reference(ins, a_cat, b_cat.T, c)))
    np.testing.assert_array_equal(_bits(outer), _bits(_reference(ins, x.reshape(-1, 1), y.reshape(-1, 1), c)))


def test_native_matmul_family_ops_warn_once(spec):
    ins = spec("hopper")[HOPPER_F16]
    x = torch.randn(1, 2, 8, 8)
    w = torch.randn(3, 2, 3, 3)
    with torch.no_grad(), emulate(ins) as mode:
        with pytest.warns(UserWarning, match="mkldnn_convolution runs natively"):
            torch.ops.aten.mkldnn_convolution(x, w, None, [0, 0], [1, 1], [1, 1], 1)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            torch.ops.aten.mkldnn_convolution(x, w, None, [0, 0], [1, 1], [1, 1], 1)  # once per operator
    assert mode.calls == 0


def test_values_beyond_an_fp8_range_are_counted_not_silent(spec):
    ins = spec("hopper")[HOPPER_FP8]
    a = torch.full((8, 32), 1000.0)
    b = torch.ones(32, 8)
    # (of a's own 256 values: the padding to the instruction's m = 64 is not counted, and
    # NumPy's own overflow warnings are left out)
    with torch.no_grad(), emulate(ins), warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        d = a @ b
    assert [str(w.message)[:60] for w in said] == [
        "mmac.torch.emulate: 256 of 256 values of a are beyond e4m3's"
    ]
    assert torch.isnan(d).all()


def test_gemm_on_batched_float32_tensors_with_rounding_and_padding(spec):
    ins = spec("hopper")[HOPPER_F16]
    g = torch.Generator().manual_seed(9)
    A = torch.randn(2, 20, 30, generator=g)
    B = torch.randn(30, 12, generator=g)
    D = ins.gemm(A, B, round=True, pad=True)
    assert isinstance(D, torch.Tensor) and D.shape == (2, 20, 12) and D.dtype == torch.float32
    for i in range(2):
        np.testing.assert_array_equal(_bits(D[i]), _bits(_reference(ins, A[i], B.T, None)))
