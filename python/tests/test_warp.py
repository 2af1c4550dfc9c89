"""Warp-level execution on register images: ``Instruction.warp_mma`` and
``Instruction.layout``. ``warp_mma`` must equal ``mma`` on the matrices the fragments
hold; the test reads those matrices out of the registers itself, for m16n8k16 f16 with a
mapping written here from the PTX ISA's formulas (section 9.7.14.5.8), for the other
shapes through ``layout()`` (whose m16n8k16 data is checked against the same formulas)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import random_codes

F16 = "mma.m16n8k16.f32.f16.f16.f32"
CASES = [
    ("ampere", F16),
    ("hopper", F16),
    ("ampere", "mma.m16n8k32.s32.s8.s8.s32"),
    ("ampere", "mma.m16n8k32.satfinite.s32.u8.s8.s32"),
    ("ampere", "mma.m16n8k8.f32.tf32.tf32.f32"),
    ("ampere", "mma.m8n8k4.f64.f64.f64.f64"),
]
NO_LAYOUT = ("examples/dp4", "dp4.f32.e4m3.e4m3.f32")


# --------------------------------------------------------------- m16n8k16 f16 by hand


def ptx_m16n8k16_f16():
    """(lane, register, lo bit) -> (row, col) for A, B (two f16 per register, element i
    in register i // 2, low half first) and C/D (f32, one per register), from the PTX
    ISA's formulas over groupID = lane // 4 and threadID_in_group = lane % 4."""
    a, b, cd = {}, {}, {}
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(8):
            row = g + 8 * ((i // 2) % 2)
            col = t * 2 + (i % 2) + 8 * (i // 4)
            a[(lane, i // 2, 16 * (i % 2))] = (row, col)
        for i in range(4):
            row = t * 2 + (i % 2) + 8 * (i // 2)
            b[(lane, i // 2, 16 * (i % 2))] = (row, g)
            cd[(lane, i, 0)] = (g + 8 * (i // 2), t * 2 + (i % 2))
    return {"a": (a, 16, 16, 16), "b": (b, 16, 8, 16), "c": (cd, 16, 8, 32), "d": (cd, 16, 8, 32)}


def unpack_by_hand(image, mapping):
    where, rows, cols, width = mapping
    m = np.zeros((rows, cols), np.uint64)
    mask = (1 << width) - 1
    for (lane, reg, lo), (r, c) in where.items():
        m[r, c] = (int(image[lane, reg]) >> lo) & mask
    assert len(where) == rows * cols
    return m


# --------------------------------------------------------------- through layout()


def unpack(image, frag):
    """The matrix of encodings a register image holds, by ``layout()``'s slots (a 64-bit
    register is two words, low word first)."""
    m = np.zeros((frag["rows"], frag["cols"]), np.uint64)
    width = frag["width"]
    per_reg = max(width, 32) // 32
    mask = (1 << width) - 1
    for s in frag["slots"]:
        w = s["register"] * per_reg
        reg = int(image[s["lane"], w])
        if per_reg == 2:
            reg |= int(image[s["lane"], w + 1]) << 32
        lo, hi = s["bits"]
        assert hi - lo == width
        m[s["row"], s["col"]] = (reg >> lo) & mask
    return m


def pack(m, frag):
    image = np.zeros((frag["lanes"], frag["words"]), np.uint64)
    per_reg = max(frag["width"], 32) // 32
    for s in frag["slots"]:
        w = s["register"] * per_reg
        v = int(m[s["row"], s["col"]]) << s["bits"][0]
        image[s["lane"], w] |= v & 0xFFFFFFFF
        if per_reg == 2:
            image[s["lane"], w + 1] = v >> 32
    return image.astype(np.uint32)


def codes_of(d):
    """Raw encodings of ``mma``'s result (its dtype's bits)."""
    return d.view(np.dtype(f"u{d.dtype.itemsize}")).astype(np.uint64)


def random_image(ins, op, rng):
    return rng.integers(0, 1 << 32, size=(32, ins.layout()[op]["words"]), dtype=np.uint32)


# --------------------------------------------------------------- tests


def test_layout_of_m16n8k16_f16_is_the_ptx_formulas(spec):
    lay = spec("ampere")[F16].layout()
    for op, mapping in ptx_m16n8k16_f16().items():
        where, rows, cols, width = mapping
        frag = lay[op]
        assert (frag["rows"], frag["cols"], frag["width"]) == (rows, cols, width)
        assert frag["words"] == frag["registers"] == (rows * cols * width) // (32 * 32)
        got = {(s["lane"], s["register"], s["bits"][0]): (s["row"], s["col"]) for s in frag["slots"]}
        assert got == where, op
    assert lay["a"]["fragment"] == "m16n8k16.a.16bit"
    assert "9.7.14.5.8" in lay["a"]["evidence"]
    assert lay["a"]["slots"][1] == {
        "lane": 0, "register": 0, "element": 1, "bits": (16, 32), "row": 0, "col": 1, "set": 0,
    }
    assert (lay["a"]["lanes"], lay["a"]["copies"], lay["a"]["sets"]) == (32, 1, 1)


@pytest.mark.parametrize("arch", ["ampere", "hopper"])
def test_m16n8k16_f16_by_hand(spec, arch):
    """Random register images (NaNs and all): warp_mma's D registers are mma's D on the
    matrices the hand-written PTX mapping reads out of them, packed by the same mapping."""
    ins = spec(arch)[F16]
    hand = ptx_m16n8k16_f16()
    rng = np.random.default_rng(16)
    for trial in range(4):
        a = rng.integers(0, 1 << 32, size=(32, 4), dtype=np.uint32)
        b = rng.integers(0, 1 << 32, size=(32, 2), dtype=np.uint32)
        c = rng.integers(0, 1 << 32, size=(32, 4), dtype=np.uint32)
        if trial % 2:  # finite values too, where the arithmetic is not swamped by NaN
            a &= np.uint32(0x3BFF3BFF)
            b &= np.uint32(0x3BFF3BFF)
            c &= np.uint32(0x3FFFFFFF)
        d = ins.warp_mma(a, b, c)
        assert d.dtype == np.uint32 and d.shape == (32, 4)
        D = codes_of(ins.mma(unpack_by_hand(a, hand["a"]), unpack_by_hand(b, hand["b"]),
                             unpack_by_hand(c, hand["c"])))
        where = hand["d"][0]
        want = np.zeros((32, 4), np.uint32)
        for (lane, reg, _), (r, col) in where.items():
            want[lane, reg] = D[r, col]
        np.testing.assert_array_equal(d, want)


@pytest.mark.parametrize("arch,name", CASES)
def test_warp_mma_equals_mma_on_the_fragments(spec, arch, name):
    ins = spec(arch)[name]
    lay = ins.layout()
    rng = np.random.default_rng(sum(map(ord, name)))
    for _ in range(3):
        a, b, c = (random_image(ins, op, rng) for op in "abc")
        d = ins.warp_mma(a, b, c)
        assert d.dtype == np.uint32 and d.shape == (32, lay["d"]["words"])
        D = codes_of(ins.mma(unpack(a, lay["a"]), unpack(b, lay["b"]), unpack(c, lay["c"])))
        np.testing.assert_array_equal(unpack(d, lay["d"]), D)
        np.testing.assert_array_equal(d, pack(D, lay["d"]))


@pytest.mark.parametrize("arch,name", CASES)
def test_finite_matrices_round_trip(spec, arch, name):
    """Matrices of finite values packed into registers: warp_mma's D, read back out, is
    mma's D; both engines agree."""
    ins = spec(arch)[name]
    lay = ins.layout()
    m, n, k = ins.m, ins.n, ins.k
    rng = np.random.default_rng(7)
    A = random_codes(ins, "a", (m, k), rng)
    B = random_codes(ins, "b", (k, n), rng)
    C = random_codes(ins, "c", (m, n), rng)
    regs = [pack(X, lay[op]) for X, op in ((A, "a"), (B, "b"), (C, "c"))]
    D = codes_of(ins.mma(A, B, C))
    for engine in ("auto", "interp"):
        d = ins.warp_mma(*regs, engine=engine)
        np.testing.assert_array_equal(unpack(d, lay["d"]), D)


def test_f64_registers_are_two_words_low_first(spec):
    """m8n8k4 f64: lane 0 holds A(0,0) in its one 64-bit register, as words (low, high)."""
    ins = spec("ampere")["mma.m8n8k4.f64.f64.f64.f64"]
    lay = ins.layout()
    assert lay["a"]["registers"] == 1 and lay["a"]["words"] == 2
    assert lay["d"]["registers"] == 2 and lay["d"]["words"] == 4
    a = np.zeros((32, 2), np.uint32)
    b = np.zeros((32, 2), np.uint32)
    c = np.zeros((32, 4), np.uint32)
    one = np.float64(1.5).view(np.uint64)
    a_slot = next(s for s in lay["a"]["slots"] if (s["row"], s["col"]) == (0, 0))
    b_slot = next(s for s in lay["b"]["slots"] if (s["row"], s["col"]) == (0, 0))
    a[a_slot["lane"]] = [int(one) & 0xFFFFFFFF, int(one) >> 32]
    b[b_slot["lane"]] = [int(one) & 0xFFFFFFFF, int(one) >> 32]
    d = ins.warp_mma(a, b, c)
    d_slot = next(s for s in lay["d"]["slots"] if (s["row"], s["col"]) == (0, 0))
    w = 2 * d_slot["register"]
    got = int(d[d_slot["lane"], w]) | int(d[d_slot["lane"], w + 1]) << 32
    assert np.uint64(got).view(np.float64) == 2.25
    assert np.count_nonzero(d) == 1  # 2.25's low word is 0


def test_errors(spec):
    ins = spec("ampere")[F16]
    a = np.zeros((32, 4), np.uint32)
    b = np.zeros((32, 2), np.uint32)
    c = np.zeros((32, 4), np.uint32)
    with pytest.raises(ValueError, match=r"a: a register image is a uint32 array, not int32"):
        ins.warp_mma(a.astype(np.int32), b, c)
    with pytest.raises(ValueError, match=r"c: a register image is a uint32 array, not uint64"):
        ins.warp_mma(a, b, c.astype(np.uint64))
    with pytest.raises(ValueError, match=r"b: the register image of `mma.m16n8k16.f32.f16.f16.f32` "
                                         r"is \(lanes, words\) = \(32, 2\), not \(32, 4\)"):
        ins.warp_mma(a, np.zeros((32, 4), np.uint32), c)
    with pytest.raises(ValueError, match=r"\(32, 4\), not \(128,\)"):
        ins.warp_mma(a.ravel(), b, c)
    with pytest.raises(ValueError, match=r"a: a register image is a uint32 NumPy array"):
        ins.warp_mma(a.tolist(), b, c)
    with pytest.raises(ValueError, match="engine must be"):
        ins.warp_mma(a, b, c, engine="gpu")
    # a transposed (non-contiguous) image of the right shape is read as its values
    d1 = ins.warp_mma(a, b, c)
    assert d1.shape == (32, 4)
    t = np.ascontiguousarray(np.arange(128, dtype=np.uint32).reshape(4, 32).T)
    np.testing.assert_array_equal(
        ins.warp_mma(np.arange(128, dtype=np.uint32).reshape(4, 32).T, b, c),
        ins.warp_mma(t, b, c),
    )


def test_no_layout_is_named(spec):
    arch, name = NO_LAYOUT
    ins = spec(arch)[name]
    with pytest.raises(ValueError, match=rf"no fragment layout is known for `{name}`"):
        ins.layout()
    z = np.zeros((32, 4), np.uint32)
    with pytest.raises(ValueError, match=rf"no fragment layout is known for `{name}`"):
        ins.warp_mma(z, z, z)


def test_sparse_warp_mma_takes_metadata_and_a_selector(spec):
    """``mma.sp``: the metadata registers (2-bit indices of each kept element in its group
    of 4, placed by ``layout(selector)``'s slots) and the sparsity selector; warp_mma equals
    ``mma`` with ``meta`` on the matrices this test packed."""
    ins = spec("ampere")["mma.sp.m16n8k32.f32.f16.f16.f32"]
    rng = np.random.default_rng(26)
    for selector in (0, 1):
        lay = ins.layout(selector)
        # stored A (16 x 16 finite f16), its columns (2 of every 4), B (32 x 8), C
        A = rng.integers(0, 0x3BFF, size=(16, 16), dtype=np.uint64)
        E = np.array(
            [np.sort(rng.choice(4, 2, replace=False)) + 4 * g for _ in range(16) for g in range(8)],
            dtype=np.uint64,
        ).reshape(16, 16)
        B = rng.integers(0, 0x3BFF, size=(32, 8), dtype=np.uint64)
        C = np.zeros((16, 8), np.uint64)
        meta = pack(E % 4, lay["meta"])
        d = ins.warp_mma(pack(A, lay["a"]), pack(B, lay["b"]), pack(C, lay["c"]), meta, selector)
        D = codes_of(ins.mma(A, B, C, meta=E))
        np.testing.assert_array_equal(unpack(d, lay["d"]), D)
        # a thread pair of every quad holds the metadata: the selector names which
        held = {s["lane"] for s in lay["meta"]["slots"]}
        assert held == {lane for lane in range(32) if lane % 4 // 2 == selector}
    a, b, c = (pack(np.zeros((f["rows"], f["cols"]), np.uint64), f) for f in (lay["a"], lay["b"], lay["c"]))
    with pytest.raises(ValueError, match="takes meta registers"):
        ins.warp_mma(a, b, c)
    with pytest.raises(ValueError, match="selector 2 is out of range"):
        ins.warp_mma(a, b, c, meta, 2)
    bad = pack(np.full((16, 16), 3, np.uint64), lay["meta"])  # index 3 twice in a group
    with pytest.raises(ValueError, match="do not increase|positions"):
        ins.warp_mma(a, b, c, bad, selector)


def test_wgmma_takes_b_as_its_matrix(spec):
    """``wgmma``: A and the accumulator across a warpgroup's 128 lanes, B (which lies in
    shared memory) as its K x N matrix of encodings; warp_mma equals ``mma``, sparse too."""
    rng = np.random.default_rng(90)
    for name, meta in (("wgmma.m64n16k16.f32.f16.f16", False), ("wgmma.sp.m64n24k32.f16.f16.f16", True)):
        ins = spec("hopper")[name]
        lay = ins.layout()
        assert lay["a"]["lanes"] == 128 and lay["b"]["slots"] == []
        assert lay["b"]["memory"].startswith("shared memory")
        k, n = lay["b"]["rows"], lay["b"]["cols"]
        A = rng.integers(0, 0x3BFF, size=(64, lay["a"]["cols"]), dtype=np.uint64)
        B = rng.integers(0, 0x3BFF, size=(k, n), dtype=np.uint64)
        C = rng.integers(0, 0x3BFF, size=(64, n), dtype=np.uint64)
        extra, E = (), None
        if meta:
            E = np.array(
                [np.sort(rng.choice(4, 2, replace=False)) + 4 * g for _ in range(64) for g in range(k // 4)],
                dtype=np.uint64,
            ).reshape(64, k // 2)
            extra = (pack(E % 4, lay["meta"]),)
        d = ins.warp_mma(pack(A, lay["a"]), B.astype(np.uint32), pack(C, lay["c"]), *extra)
        assert d.shape == (128, lay["d"]["words"])
        D = codes_of(ins.mma(A, B, C, meta=E) if meta else ins.mma(A, B, C))
        np.testing.assert_array_equal(unpack(d, lay["d"]), D)
        with pytest.raises(ValueError, match=r"reads b from shared memory.*shape \(%d, %d\)" % (k, n)):
            ins.warp_mma(pack(A, lay["a"]), B[:-1].astype(np.uint32), pack(C, lay["c"]), *extra)
