"""The package's API: loading, instruction lookup and description, and the error cases,
each a Python exception with the CLI's message."""

from __future__ import annotations

import os
import pickle

import ml_dtypes
import numpy as np
import pytest

import mmac
from conftest import REPO, SPECS, run_cli

HOPPER_F16 = "mma.m16n8k16.f32.f16.f16.f32"
BAD_SPEC = """arch demo
import std

instruction mma.m16n8k16.f32.f16.f16.f32 {
    shape 16 x 8 x 16
    types a = f16, b = f16, c = f32, d = f33
    uses t_fdpa(F = 25, L = 16, e_zero = -133)
}
"""


def test_load_and_describe(spec):
    hopper = spec("hopper")
    assert hopper.arch == "hopper"
    names = hopper.instructions()
    assert HOPPER_F16 in names and len(hopper) == len(names)
    assert HOPPER_F16 in hopper and "nope" not in hopper
    ins = hopper[HOPPER_F16]
    assert (ins.m, ins.n, ins.k) == (16, 8, 16) and ins.shape == (16, 8, 16)
    assert ins.types == {"a": "f16", "b": "f16", "c": "f32", "d": "f32"}
    assert ins.arch == "hopper" and ins.scale is None
    assert ins.pipeline == "t_fdpa" and ins.jit_error is None
    assert ins.dtype("a") == np.float16 and ins.dtype("d") == np.float32
    assert ins.format("a")["mantissa"] == 10
    assert hopper[HOPPER_F16] is ins  # one object (and one compiled kernel) per name
    scaled = spec("blackwell")["tcgen05.mma.block_scale.m64n8k32.kind::mxf8f6f4.block32.f32.e4m3.e2m1.ue8m0"]
    assert scaled.scale == {"format": "ue8m0", "block": 32}
    assert scaled.dtype("sa") == np.dtype(ml_dtypes.float8_e8m0fnu)
    # a sparse A's block counts its dense columns: k = 64 takes k / block = 1 factor
    sparse = spec("rtx_blackwell")["mma.sp.block_scale.m16n8k64.kind::mxf8f6f4.block32.f32.e5m2.e5m2.f32.ue8m0"]
    assert sparse.scale == {"format": "ue8m0", "block": 64} and sparse.k == 64
    one = np.ones(sparse.k // sparse.scale["block"], ml_dtypes.float8_e8m0fnu)
    cols = np.array([c for g in range(16) for c in (4 * g, 4 * g + 1)], np.uint8)
    stored, b = np.ones(32, ml_dtypes.float8_e5m2), np.ones(64, ml_dtypes.float8_e5m2)
    assert sparse.dot(np.float32(1.0), stored, b, one, one, meta=cols) == 33.0


def test_loads_and_pickle():
    text = (SPECS / "hopper.mma").read_text()
    s = mmac.loads(text, name="my.mma")
    assert s.name == "my.mma" and s.text == text
    ins = s[HOPPER_F16]
    again = pickle.loads(pickle.dumps(ins))
    assert again.name == ins.name and again.spec.text == text
    A = np.eye(16, dtype=np.float16)
    B = np.ones((16, 8), np.float16)
    np.testing.assert_array_equal(again.gemm(A, B), ins.gemm(A, B))
    assert pickle.loads(pickle.dumps(s)).instructions() == s.instructions()


def test_a_spec_that_does_not_check_raises_spec_error_with_the_cli_diagnostics(tmp_path, cli):
    path = tmp_path / "bad.mma"
    path.write_text(BAD_SPEC)
    with pytest.raises(mmac.SpecError) as e:
        mmac.load(path)
    r = run_cli(cli, "check", path)
    assert r.returncode == 1
    assert str(e.value) == r.stderr.rstrip()
    assert "f33" in str(e.value)
    with pytest.raises(mmac.SpecError) as e:
        mmac.loads(BAD_SPEC, name="inline.mma")
    assert "inline.mma" in str(e.value)
    with pytest.raises(FileNotFoundError, match="cannot read"):
        mmac.load(tmp_path / "missing.mma")


def test_hostile_specs_raise_spec_error_and_never_crash():
    """Nesting deep enough to overflow a stack (it killed the interpreter) and a diagnostic
    past column 65,535 (a PanicException, which `except Exception` misses) are SpecErrors."""
    def uses(f):
        return (
            "arch t\nimport std\ninstruction x {\n shape 1 x 1 x 16\n"
            " types a = f16, b = f16, c = f32, d = f32\n"
            f" uses t_fdpa(F = {f}, L = 16, e_zero = -133)\n}}\n"
        )
    for depth in (700, 10_000, 100_000):
        with pytest.raises(mmac.SpecError, match="too-deep"):
            mmac.loads(uses("(" * depth + "25" + ")" * depth))
    with pytest.raises(mmac.SpecError, match="too-deep"):
        mmac.loads(uses(" + ".join(["1"] * 7000)))
    try:
        mmac.loads(uses(" " * 70_000 + "unknown_name"))
    except Exception as e:  # a PanicException would not be caught here
        assert isinstance(e, mmac.SpecError) and "unknown name" in str(e)
    else:
        raise AssertionError("the spec checked")


def test_an_unknown_instruction_is_a_key_error_with_did_you_mean(spec):
    with pytest.raises(KeyError, match=r"did you mean `mma.m16n8k16.f32.f16.f16.f32`\?"):
        spec("hopper")["mma.m16n8k16.f32.f16.f16.f3"]
    with pytest.raises(KeyError, match=r"declares no instruction `zzz`; Spec.instructions\(\) lists"):
        spec("hopper")["zzz"]


@pytest.fixture
def f16(spec):
    return spec("hopper")[HOPPER_F16]


def test_wrong_dtypes_name_what_was_expected(f16, spec):
    A = np.zeros((16, 16), np.float32)
    B = np.zeros((16, 8), np.float16)
    with pytest.raises(ValueError, match=r"A must be float16 \(`f16`\) or an unsigned integer array of raw `f16` encodings, found float32"):
        f16.gemm(A, B)
    with pytest.raises(ValueError, match="found int16"):
        f16.gemm(A.astype(np.int16), B)
    # OCP fp8 for CDNA3's FNUZ fp8: the same width, another format: refused
    cdna3 = spec("cdna3")["v_mfma_f32_16x16x32_fp8_fp8"]
    a = np.zeros((16, 32), ml_dtypes.float8_e4m3fn)
    b = np.zeros((32, 16), ml_dtypes.float8_e4m3fnuz)
    with pytest.raises(ValueError, match=r"A must be float8_e4m3fnuz \(`fp8`\) .* found float8_e4m3fn$"):
        cdna3.gemm(a, b)
    # tf32 has no dtype: only raw encodings
    tf32 = spec("hopper")["mma.m16n8k8.f32.tf32.tf32.f32"]
    with pytest.raises(ValueError, match=r"raw `tf32` encodings \(no NumPy dtype holds tf32\), found float32"):
        tf32.gemm(np.zeros((16, 8), np.float32), np.zeros((8, 8), np.uint32))


def test_wrong_shapes_name_what_was_expected(f16):
    h = np.float16
    with pytest.raises(ValueError, match=r"K \(columns of A\) = 24 is not a positive multiple of `mma.m16n8k16.f32.f16.f16.f32`'s 16"):
        f16.gemm(np.zeros((16, 24), h), np.zeros((24, 8), h))
    with pytest.raises(ValueError, match="A is 16 x 16 but B is 32 x 8"):
        f16.gemm(np.zeros((16, 16), h), np.zeros((32, 8), h))
    with pytest.raises(ValueError, match="C is 16 x 16 but A x B is 16 x 8"):
        f16.gemm(np.zeros((16, 16), h), np.zeros((16, 8), h), np.zeros((16, 16), np.float32))
    with pytest.raises(ValueError, match=r"A is 32 x 16, but `mma.m16n8k16.f32.f16.f16.f32` \(m16n8k16\) takes A 16 x 16"):
        f16.mma(np.zeros((32, 16), h), np.zeros((16, 8), h), np.zeros((32, 8), np.float32))
    # a wrong A is blamed on A, not on C
    with pytest.raises(ValueError, match=r"A is 8 x 16, but"):
        f16.mma(np.zeros((8, 16), h), np.zeros((16, 8), h), np.zeros((16, 8), np.float32))
    with pytest.raises(ValueError, match=r"A must be a 2-D matrix, found shape \(16,\)"):
        f16.gemm(np.zeros(16, h), np.zeros((16, 8), h))
    with pytest.raises(ValueError, match="a has 15 elements, but `mma.m16n8k16.f32.f16.f16.f32` takes 16"):
        f16.dot(0.0, np.zeros(15, h), np.zeros(16, h))


def test_wrong_encodings_and_values_are_refused(f16, spec):
    fp4 = spec("rtx_blackwell")["mma.m16n8k32.kind::f8f6f4.f32.e2m1.e5m2.f32"]
    a = np.zeros((16, 32), np.uint8)
    a[3, 5] = 0x10
    with pytest.raises(ValueError, match=r"A: element \[3, 5\] = 0x10 does not fit `e2m1` \(4 bits\)"):
        fp4.gemm(a, np.zeros((32, 8), np.uint8))
    with pytest.raises(ValueError, match=r"^c: 0.1 is not exactly representable in f32"):
        f16.dot(0.1, [0.0] * 16, [0.0] * 16)
    with pytest.raises(ValueError, match=r"a\[1\]: 1e-9 is not exactly representable in f16"):
        f16.dot(0.0, [1.0, 1e-9] + [0.0] * 14, [0.0] * 16)
    e2m1 = fp4.format("a")
    assert e2m1["specials"] == "none"
    with pytest.raises(ValueError, match=r"a\[0\]: inf: e2m1 has no infinities"):
        fp4.dot(0.0, [float("inf")] + [0.0] * 31, [0.0] * 32)


def test_scale_factors_given_or_missing(f16, spec):
    h = np.float16
    with pytest.raises(ValueError, match="takes no scale factors, but sa/sb were given"):
        f16.gemm(np.zeros((16, 16), h), np.zeros((16, 8), h), sa=np.zeros((16, 1), np.uint8), sb=np.zeros((1, 8), np.uint8))
    scaled = spec("blackwell")["tcgen05.mma.block_scale.m64n8k32.kind::mxf8f6f4.block32.f32.e4m3.e2m1.ue8m0"]
    a = np.zeros((64, 32), np.uint8)
    b = np.zeros((32, 8), np.uint8)
    with pytest.raises(ValueError, match=r"is block-scaled \(ue8m0 per 32 elements of k\): give both sa and sb"):
        scaled.gemm(a, b)
    with pytest.raises(ValueError, match=r"SA must be 64 x 1 \(M x K/32\), found 64 x 2"):
        scaled.gemm(a, b, sa=np.zeros((64, 2), np.uint8), sb=np.zeros((1, 8), np.uint8))


def test_threads_and_engines(f16):
    rng = np.random.default_rng(7)
    A = rng.standard_normal((64, 64)).astype(np.float16)
    B = rng.standard_normal((64, 32)).astype(np.float16)
    C = rng.standard_normal((64, 32)).astype(np.float32)
    d = f16.gemm(A, B, C)
    assert mmac.default_threads() >= 1
    for threads in (1, 2, 3):
        np.testing.assert_array_equal(f16.gemm(A, B, C, threads=threads).view(np.uint32), d.view(np.uint32))
    np.testing.assert_array_equal(f16.gemm(A, B, C, engine="interp").view(np.uint32), d.view(np.uint32))
    with pytest.raises(ValueError, match="threads must be at least 1"):
        f16.gemm(A, B, threads=0)
    # more than four per core is refused at once, not started (2**40 hung)
    for threads in (4 * os.cpu_count() + 1, 2**40):
        with pytest.raises(ValueError, match="four per core"):
            f16.gemm(A, B, threads=threads)
    with pytest.raises(ValueError, match="engine must be 'auto', 'jit' or 'interp'"):
        f16.gemm(A, B, engine="gpu")


def test_an_instruction_the_jit_refuses_runs_on_the_interpreter_with_a_warning():
    text = (REPO / "compiler" / "tests" / "data" / "jit_refused.mma").read_text()
    s = mmac.loads(text, name="jit_refused.mma")
    ins = s[s.instructions()[0]]
    assert ins.jit_error is not None
    with pytest.raises(RuntimeError, match="engine='interp' runs the reference interpreter"):
        ins.dot(0.0, [0.0] * ins.k, [0.0] * ins.k, engine="jit")
    with pytest.warns(RuntimeWarning, match="the reference interpreter computes"):
        d = ins.dot(1.0, [1.0] * ins.k, [1.0] * ins.k)
    assert float(d) == 1.0 + ins.k


def _bits32(x):
    return np.asarray(x).view(np.uint32)


def test_gemm_rounds_float_inputs_into_the_formats(spec):
    ins = spec("hopper")[HOPPER_F16]
    rng = np.random.default_rng(11)
    A = rng.standard_normal((32, 32))
    B = rng.standard_normal((32, 16)).astype(np.float32)
    C = rng.standard_normal((32, 16))
    want = ins.gemm(A.astype(np.float16), B.astype(np.float16), C.astype(np.float32))
    np.testing.assert_array_equal(_bits32(ins.gemm(A, B, C, round=True)), _bits32(want))
    # lists of Python floats too
    got = ins.gemm(A.tolist(), B.tolist(), round=True)
    np.testing.assert_array_equal(_bits32(got), _bits32(ins.gemm(A.astype(np.float16), B.astype(np.float16))))
    with pytest.raises(ValueError, match="A must be"):
        ins.gemm(A, B)  # float64 without round=True is not a format's dtype


def test_gemm_pads_shapes_that_are_not_multiples(spec):
    ins = spec("hopper")[HOPPER_F16]
    rng = np.random.default_rng(12)
    A = rng.standard_normal((20, 30)).astype(np.float16)
    B = rng.standard_normal((30, 12)).astype(np.float16)
    C = rng.standard_normal((20, 12)).astype(np.float32)
    Ap = np.zeros((32, 32), np.float16); Ap[:20, :30] = A
    Bp = np.zeros((32, 16), np.float16); Bp[:30, :12] = B
    Cp = np.zeros((32, 16), np.float32); Cp[:20, :12] = C
    got = ins.gemm(A, B, C, pad=True)
    assert got.shape == (20, 12)
    np.testing.assert_array_equal(_bits32(got), _bits32(ins.gemm(Ap, Bp, Cp)[:20, :12]))
    with pytest.raises(ValueError):
        ins.gemm(A, B, C)  # not multiples, and no pad=True


def test_gemm_broadcasts_batches_and_c(spec):
    ins = spec("hopper")[HOPPER_F16]
    rng = np.random.default_rng(13)
    A = rng.standard_normal((2, 3, 16, 32)).astype(np.float16)
    B = rng.standard_normal((32, 8)).astype(np.float16)
    row = rng.standard_normal(8).astype(np.float32)
    got = ins.gemm(A, B, row)
    assert got.shape == (2, 3, 16, 8) and got.dtype == np.float32
    for i in range(2):
        for j in range(3):
            want = ins.gemm(A[i, j], B, np.broadcast_to(row, (16, 8)).copy())
            np.testing.assert_array_equal(_bits32(got[i, j]), _bits32(want))
    scalar = ins.gemm(A[0], B, np.float32(0.5))
    np.testing.assert_array_equal(_bits32(scalar[1]), _bits32(ins.gemm(A[0, 1], B, np.full((16, 8), 0.5, np.float32))))
    with pytest.raises(ValueError, match="does not broadcast"):
        ins.gemm(A, B, np.zeros((5, 8), np.float32))
    with pytest.raises(ValueError, match="K differs"):
        ins.gemm(A, B[:16])


def test_round_pad_and_batches_refuse_scale_factors(spec):
    ins = spec("blackwell")["tcgen05.mma.block_scale.m64n8k32.kind::mxf8f6f4.block32.f32.e4m3.e2m1.ue8m0"]
    with pytest.raises(ValueError, match="without scale factors"):
        ins.gemm(np.zeros((64, 32)), np.zeros((32, 8)), sa=np.zeros((64, 1)), sb=np.zeros((1, 8)), round=True)
