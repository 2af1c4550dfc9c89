"""Every dtype path against the `mmac` command on the same data: natural dtypes (NumPy,
ml_dtypes), raw encodings, Python floats; D in d's dtype. The CLI reads `.npy` files of
its own dtypes (raw unsigned encodings for formats NumPy lacks), so both sides see the
same bits."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from mmac import _dtypes
from conftest import random_codes, run_cli, SPECS

# (spec, instruction, the natural dtypes expected for a, b, c, d (None: raw only), scale dtype)
CASES = [
    ("hopper", "mma.m16n8k16.f32.f16.f16.f32", ("float16", "float16", "float32", "float32"), None),
    ("hopper", "mma.m16n8k16.f16.f16.f16.f16", ("float16", "float16", "float16", "float16"), None),
    ("hopper", "mma.m16n8k16.f32.bf16.bf16.f32", ("bfloat16", "bfloat16", "float32", "float32"), None),
    ("hopper", "mma.m16n8k8.f32.tf32.tf32.f32", (None, None, "float32", "float32"), None),
    ("hopper", "mma.m16n8k8.f64.f64.f64.f64", ("float64", "float64", "float64", "float64"), None),
    ("hopper", "wgmma.m64n8k32.f32.e5m2.e4m3", ("float8_e5m2", "float8_e4m3fn", "float32", "float32"), None),
    ("cdna3", "v_mfma_f32_16x16x32_fp8_bf8", ("float8_e4m3fnuz", "float8_e5m2fnuz", "float32", "float32"), None),
    ("cdna3", "v_mfma_f32_16x16x8_xf32", (None, None, "float32", "float32"), None),
    ("rtx_blackwell", "mma.m16n8k32.kind::f8f6f4.f32.e3m2.e5m2.f32", ("float6_e3m2fn", "float8_e5m2", "float32", "float32"), None),
    ("rtx_blackwell", "mma.m16n8k32.kind::f8f6f4.f32.e2m3.e5m2.f32", ("float6_e2m3fn", "float8_e5m2", "float32", "float32"), None),
    ("rtx_blackwell", "mma.m16n8k32.kind::f8f6f4.f32.e2m1.e5m2.f32", ("float4_e2m1fn", "float8_e5m2", "float32", "float32"), None),
    (
        "blackwell",
        "tcgen05.mma.block_scale.m64n8k32.kind::mxf8f6f4.block32.f32.e4m3.e2m1.ue8m0",
        ("float8_e4m3fn", "float4_e2m1fn", "float32", "float32"),
        "float8_e8m0fnu",
    ),
    (
        "rtx_blackwell",
        "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3",
        ("float4_e2m1fn", "float4_e2m1fn", "float32", "float32"),
        None,
    ),
    ("hopper", "mma.m16n8k32.s32.s8.u8.s32", ("int8", "uint8", "int32", "int32"), None),
    ("hopper", "mma.m16n8k64.s32.s4.u4.s32", ("int4", "uint4", "int32", "int32"), None),
    ("hopper", "mma.m8n8k128.s32.b1.b1.s32.xor.popc", ("bool", "bool", "int32", "int32"), None),
]


def _dtype_name(dt):
    return None if dt is None else dt.name


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(20261122)


def _cli_file(tmp_path, name, codes, fmt):
    """An .npy file as `mmac gemm` reads it: the natural dtype for f16/f32/f64 and the
    8- to 32-bit integers, else unsigned raw encodings."""
    natural = _dtypes.natural_dtype(fmt)
    if natural is not None and natural.name in ("float16", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32"):
        arr = _dtypes.from_encodings(codes, fmt)
    else:
        arr = codes.astype(_dtypes.raw_dtype(fmt))
    path = tmp_path / f"{name}.npy"
    np.save(path, arr)
    return path


def _operands(ins, rng, M, N, K):
    ops = {
        "a": random_codes(ins, "a", (M, K), rng),
        "b": random_codes(ins, "b", (K, N), rng),
        "c": random_codes(ins, "c", (M, N), rng),
    }
    if ins.scale is not None:
        blocks = K // ins.scale["block"]
        fmt = ins.format("sa")
        if fmt["name"] == "ue8m0":
            # scales near 1 (2^-4 .. 2^4) keep D finite and meaningful
            ops["sa"] = rng.integers(123, 132, size=(M, blocks), dtype=np.uint64)
            ops["sb"] = rng.integers(123, 132, size=(blocks, N), dtype=np.uint64)
        else:
            ops["sa"] = random_codes(ins, "sa", (M, blocks), rng)
            ops["sb"] = random_codes(ins, "sb", (blocks, N), rng)
    return ops


def _as_natural(codes, fmt):
    natural = _dtypes.natural_dtype(fmt)
    return None if natural is None else _dtypes.from_encodings(codes, fmt)


def _raw(d, fmt):
    """D's raw encodings, whatever dtype it came back in."""
    arr = np.asarray(d)
    if arr.dtype == np.bool_ or arr.dtype.kind == "u":
        return arr.astype(np.uint64)
    return arr.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[arr.dtype.itemsize]).astype(np.uint64) & np.uint64(
        (1 << fmt["bits"]) - 1 if fmt["bits"] < 64 else (1 << 64) - 1
    )


@pytest.mark.parametrize("stem,name,dtypes,scale_dtype", CASES, ids=[c[1] for c in CASES])
def test_every_dtype_path_matches_the_cli(tmp_path, cli, spec, rng, stem, name, dtypes, scale_dtype):
    ins = spec(stem)[name]
    # the dtypes the package picks for the instruction's formats
    assert tuple(_dtype_name(ins.dtype(op)) for op in "abcd") == dtypes
    if ins.scale is not None:
        assert _dtype_name(ins.dtype("sa")) == scale_dtype
    M, N, K = 2 * ins.m, 2 * ins.n, 2 * ins.k
    ops = _operands(ins, rng, M, N, K)
    files = {op: _cli_file(tmp_path, op, codes, ins.format(op)) for op, codes in ops.items()}
    out = tmp_path / "D.npy"
    args = ["gemm", SPECS / f"{stem}.mma", "--instr", name, "-o", out]
    for op in ops:
        args += [f"--{op}", files[op]]
    r = run_cli(cli, *args)
    assert r.returncode == 0, r.stderr
    want = np.load(out)
    want_raw = want.astype(np.uint64) if want.dtype.kind == "u" else _raw(want, ins.format("d"))

    # raw encodings for every operand
    d_raw = ins.gemm(ops["a"], ops["b"], ops["c"], ops.get("sa"), ops.get("sb"))
    assert d_raw.dtype == _dtypes.result_dtype(ins.format("d"))
    np.testing.assert_array_equal(_raw(d_raw, ins.format("d")), want_raw)

    # natural dtypes where the format has one
    natural = {op: _as_natural(codes, ins.format(op)) for op, codes in ops.items()}
    if all(v is not None for v in natural.values()):
        d_nat = ins.gemm(natural["a"], natural["b"], natural["c"], natural.get("sa"), natural.get("sb"))
        np.testing.assert_array_equal(_raw(d_nat, ins.format("d")), want_raw)

    # one whole instruction (`mmac mma`) on the top-left tile, and one dot product
    m, n, k = ins.m, ins.n, ins.k
    tile = {
        "a": ops["a"][:m, :k],
        "b": ops["b"][:k, :n],
        "c": ops["c"][:m, :n],
    }
    if ins.scale is not None:
        kb = k // ins.scale["block"]
        tile["sa"], tile["sb"] = ops["sa"][:m, :kb], ops["sb"][:kb, :n]
    tile_files = {op: _cli_file(tmp_path, f"tile_{op}", codes, ins.format(op)) for op, codes in tile.items()}
    args = ["mma", SPECS / f"{stem}.mma", "--instr", name, "-o", tmp_path / "tile_D.npy"]
    for op in tile:
        args += [f"--{op}", tile_files[op]]
    r = run_cli(cli, *args)
    assert r.returncode == 0, r.stderr
    want_tile = np.load(tmp_path / "tile_D.npy")
    want_tile_raw = want_tile.astype(np.uint64) if want_tile.dtype.kind == "u" else _raw(want_tile, ins.format("d"))
    got_tile = ins.mma(tile["a"], tile["b"], tile["c"], tile.get("sa"), tile.get("sb"))
    np.testing.assert_array_equal(_raw(got_tile, ins.format("d")), want_tile_raw)
    d00 = ins.dot(
        tile["c"][0, 0],
        tile["a"][0, :],
        tile["b"][:, 0],
        None if ins.scale is None else tile["sa"][0, :],
        None if ins.scale is None else tile["sb"][:, 0],
    )
    assert _raw(np.asarray(d00), ins.format("d")) == want_tile_raw[0, 0]


def test_sub_byte_dtypes_hold_the_format_bit_for_bit():
    """ml_dtypes keeps FP4/FP6 codes in the low bits of a byte: every code round-trips."""
    for name, bits in (("float4_e2m1fn", 4), ("float6_e2m3fn", 6), ("float6_e3m2fn", 6)):
        codes = np.arange(1 << bits, dtype=np.uint8)
        values = codes.view(getattr(ml_dtypes, name))
        back = values.astype(np.float32).astype(getattr(ml_dtypes, name)).view(np.uint8)
        # -0 and +0 differ only in sign; everything else is a distinct value
        np.testing.assert_array_equal(back, codes)


def test_python_floats_are_encoded_exactly(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    k = ins.k
    a = [2.0**-10, 2.0**-12] + [0.0] * (k - 2)
    b = [2.0**-8, 2.0**-10] + [0.0] * (k - 2)
    # 1 + 2^-18 + 2^-22: both products inside the 25-bit window
    d = ins.dot(1.0, a, b)
    assert d.dtype == np.float32
    assert float(d) == 1.0 + 2.0**-18 + 2.0**-22
    # the README's example: 2^-26 falls below Hopper's alignment and is truncated away
    a = [6.103515625e-5, 1.52587890625e-5] + [0.0] * (k - 2)
    b = [0.00390625, 0.0009765625] + [0.0] * (k - 2)
    assert ins.dot(1.0, a, b).view(np.uint32) == 0x3F800002
    # lists of Python numbers work for whole matrices too
    A = [[1.0] * k] * ins.m
    B = [[0.5] * ins.n] * k
    D = ins.gemm(A, B)
    assert D.dtype == np.float32 and D.shape == (ins.m, ins.n)
    assert np.all(D == 0.5 * k)
    # a broadcast C of Python numbers: a scalar, a row, a list per batch (they were
    # taken as float64 arrays, "C must be float32")
    A16, B16 = np.ones((ins.m, k), np.float16), np.ones((k, ins.n), np.float16)
    assert np.all(ins.gemm(A16, B16, 0.5) == k + 0.5)
    assert np.all(ins.gemm(A16, B16, [0.25] * ins.n) == k + 0.25)
    batched = ins.gemm(np.stack([A16, A16]), B16, [[0.75] * ins.n] * ins.m)
    assert batched.shape == (2, ins.m, ins.n) and np.all(batched == k + 0.75)
    with pytest.raises(ValueError, match=r"C\[0, 0\]: 0.1 is not exactly representable"):
        ins.gemm(A16, B16, 0.1)
    # big-endian arrays hold the same values ("must be float16, found float16")
    big = ins.gemm(A16.astype(">f2"), B16.view(np.uint16).astype(">u2"), np.float32(0.5))
    np.testing.assert_array_equal(big.view(np.uint32), ins.gemm(A16, B16, 0.5).view(np.uint32))


def test_rounding_into_formats_without_inf_or_nan_refuses_what_has_no_encoding(spec):
    """FP4 and FP6 have neither Inf nor NaN: a NaN, an infinity or a value that rounds past
    the range is a ValueError naming the element (ml_dtypes gave -0 for NaN and saturated
    the others); the range's edge itself rounds in."""
    ins = spec("rtx_blackwell")["mma.m16n8k32.kind::f8f6f4.f32.e2m1.e5m2.f32"]
    A, B = np.ones((16, 32)), np.ones((32, 8))
    A[0, 0] = 6.99  # below 6 + half an ulp (7): rounds to 6
    assert ins.gemm(A, B, round=True)[0, 0] == 31 + 6
    for bad in (np.nan, np.inf, -np.inf, 7.0, -100.0):
        A[2, 3] = bad
        with pytest.raises(ValueError, match=r"A\[2, 3\] = .* has no `e2m1` encoding"):
            ins.gemm(A, B, round=True)
    e2m3 = spec("rtx_blackwell")["mma.m16n8k32.kind::f8f6f4.f32.e2m3.e5m2.f32"]
    A[2, 3] = 7.75  # e2m3's range ends at 7.5, its last ulp is 0.5
    with pytest.raises(ValueError, match="has no `e2m3` encoding"):
        e2m3.gemm(A, B, round=True)
    A[2, 3] = 7.7
    assert e2m3.gemm(A, B, round=True)[2, 0] == 31 + 7.5


def test_results_come_back_in_d_dtype(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.bf16.bf16.f32"]
    A = np.ones((16, 16), ml_dtypes.bfloat16)
    B = np.full((16, 8), 2, ml_dtypes.bfloat16)
    D = ins.gemm(A, B)
    assert D.dtype == np.float32
    assert np.all(D == 32.0)
    tf = spec("hopper")["mma.m16n8k8.f32.tf32.tf32.f32"]
    assert tf.dtype("a") is None
    one = np.full((16, 8), 0x3F800000, np.uint32)  # tf32 1.0
    D = tf.gemm(one, np.full((8, 8), 0x3F800000, np.uint32))
    assert D.dtype == np.float32 and np.all(D == 8.0)


def test_report_matches_the_cli(tmp_path, cli, spec, rng):
    stem, name = "hopper", "mma.m16n8k16.f32.f16.f16.f32"
    ins = spec(stem)[name]
    A = rng.uniform(-1, 1, (32, 64)).astype(np.float16)
    B = rng.uniform(-1, 1, (64, 16)).astype(np.float16)
    np.save(tmp_path / "A.npy", A)
    np.save(tmp_path / "B.npy", B)
    r = run_cli(cli, "gemm", SPECS / f"{stem}.mma", "--instr", name, "--a", tmp_path / "A.npy", "--b", tmp_path / "B.npy", "-o", tmp_path / "D.npy", "--report")
    assert r.returncode == 0, r.stderr
    report = ins.report(A, B)
    assert str(report) == r.stdout
    assert report.compared == 32 * 16 and report.non_finite == 0
    assert 0 < report.max_abs < 1e-5 and report.mean_abs <= report.max_abs
    np.testing.assert_array_equal(report.d, np.load(tmp_path / "D.npy"))
    # a given D is compared as it is: the exact result itself has no error
    exact = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
    assert ins.report(A, B, D=exact).mean_abs < report.mean_abs


def test_ml_dtypes_saved_by_np_save_get_a_hint(tmp_path, cli, spec):
    """np.save writes an ml_dtypes array as raw void bytes (descr `<V2`): both the API and
    the CLI refuse it with the way out, `.view(np.uint16)`, which both then take."""
    ins = spec("hopper")["mma.m16n8k16.f32.bf16.bf16.f32"]
    A = np.ones((16, 16), ml_dtypes.bfloat16)
    B = np.full((16, 8), 2, ml_dtypes.bfloat16)
    np.save(tmp_path / "A.npy", A)
    np.save(tmp_path / "B.npy", B)
    loaded = np.load(tmp_path / "A.npy")
    assert loaded.dtype.kind == "V"
    with pytest.raises(ValueError, match=r"view\(np.uint16\)"):
        ins.gemm(loaded, B)
    assert np.all(ins.gemm(loaded.view(np.uint16), B) == 32.0)
    r = run_cli(cli, "gemm", SPECS / "hopper.mma", "--instr", ins.name, "--a", tmp_path / "A.npy",
                "--b", tmp_path / "B.npy", "-o", tmp_path / "D.npy")
    assert r.returncode == 2, r.stderr
    assert "A.view(np.uint16)" in r.stderr, r.stderr
    np.save(tmp_path / "A.npy", A.view(np.uint16))
    np.save(tmp_path / "B.npy", B.view(np.uint16))
    r = run_cli(cli, "gemm", SPECS / "hopper.mma", "--instr", ins.name, "--a", tmp_path / "A.npy",
                "--b", tmp_path / "B.npy", "-o", tmp_path / "D.npy")
    assert r.returncode == 0, r.stderr
    assert np.all(np.load(tmp_path / "D.npy") == 32.0)


def _nearest_even(x: float, precision: int) -> float:
    """``x`` (a normal value of the target) rounded to nearest even at ``precision``
    significant bits, exactly."""
    from fractions import Fraction
    import math

    _, e = math.frexp(x)
    scaled = Fraction(x) * Fraction(2) ** (precision - e)
    return float(round(scaled) * Fraction(2) ** (e - precision))


@pytest.mark.parametrize(
    "instr,operand,precision,low,high",
    [
        ("mma.m16n8k16.f32.bf16.bf16.f32", "a", 8, -100, 100),
        ("wgmma.m64n8k32.f32.e5m2.e4m3", "b", 4, -6, 8),
        ("wgmma.m64n8k32.f32.e5m2.e4m3", "a", 3, -14, 15),
        ("mma.m16n8k8.f32.tf32.tf32.f32", "a", 11, -100, 100),
    ],
)
def test_float64_values_are_rounded_once(spec, instr, operand, precision, low, high):
    """Into formats whose conversions go through float32, a float64 value is rounded once
    (to odd in float32 first): ties of the format nudged either way by less than float32
    resolves (which float32's own rounding turns into ties), and random values."""
    fmt = spec("hopper")[instr].format(operand)
    rng = np.random.default_rng(precision)
    exps = rng.integers(low, high, 400)
    # half an ulp above a value of the format, times (1 +- 2^-30), and random values
    odd = rng.integers(0, 2 ** (precision - 1), 400)
    ties = [(1 + (2 * int(m) + 1) * 2.0**-precision) * 2.0 ** int(e) for m, e in zip(odd, exps)]
    values = np.array(
        [t * (1 + s * 2.0**-30) for t in ties for s in (1, -1)]
        + list(rng.uniform(1, 2, 400) * 2.0**exps),
        dtype=np.float64,
    )
    values = np.concatenate([values, -values])
    got = _dtypes.round_to_format(values, fmt)
    got = (got.view(np.float32) if got.dtype == np.uint32 else got).astype(np.float64)
    want = np.array([_nearest_even(v, precision) for v in values])
    np.testing.assert_array_equal(got, want)
