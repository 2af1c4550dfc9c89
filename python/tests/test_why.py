"""The "why" from Python agrees with the CLI on the same inputs: ``ins.run(..., trace=True)``
with ``mmac run --trace``, :func:`mmac.diff` with ``mmac diff`` (text and ``--json``),
:func:`mmac.report` with ``mmac report`` (text and ``--json``); the stage records, reprs
and plots; and the progress of long GEMMs and reports (``progress=``)."""

from __future__ import annotations

import json
import sys
import threading
import types
from fractions import Fraction

import numpy as np
import pytest

import mmac
from mmac import _progress
from conftest import REPO, random_codes, run_cli

# one instruction of each pipeline family: fused (plain, chained, grouped, block-scaled),
# sequential, integer, and composed of runs (with input conversions, with promotion)
FAMILIES = [
    ("hopper", "mma.m16n8k16.f32.f16.f16.f32"),
    ("ada", "mma.m16n8k8.f32.tf32.tf32.f32"),
    ("cdna3", "v_mfma_f32_16x16x32_fp8_fp8"),
    ("blackwell", "tcgen05.mma.block_scale.m64n8k32.kind::mxf8f6f4.block32.f32.e5m2.e5m2.ue8m0"),
    ("cdna2", "v_mfma_f32_32x32x8f16"),
    ("ada", "mma.m8n8k16.s32.s8.s8.s32"),
    ("blackwell", "mma.m16n8k32.f32.e4m3.e4m3.f32"),
    ("examples/fp8_promoted", "promoted.m64n8k128.f32.e4m3.e4m3"),
]


def hex_args(ins, operands: dict) -> list:
    """``mmac run`` options for raw encodings."""
    out = []
    for op, codes in operands.items():
        values = np.atleast_1d(np.asarray(codes, dtype=np.uint64))
        out += [f"--{op}", ",".join(f"{int(v):x}" for v in values)]
    return out


def random_operands(ins, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    ops = {
        "c": random_codes(ins, "c", (), rng),
        "a": random_codes(ins, "a", (ins.k,), rng),
        "b": random_codes(ins, "b", (ins.k,), rng),
    }
    if ins.scale:
        blocks = ins.k // ins.scale["block"]
        # scale factors near 1.0 (e8m0 127), so that products stay finite
        ops["sa"] = rng.integers(120, 135, size=blocks, dtype=np.uint64)
        ops["sb"] = rng.integers(120, 135, size=blocks, dtype=np.uint64)
    return ops


# ------------------------------------------------------------------------ run / trace


@pytest.mark.parametrize("stem,name", FAMILIES)
def test_trace_is_what_mmac_run_trace_prints(cli, spec, stem, name):
    ins = spec(stem)[name]
    ops = random_operands(ins, seed=len(name))
    r = ins.run(**ops, trace=True)
    out = run_cli(cli, "run", f"specs/{stem}.mma", "--instr", name, *hex_args(ins, ops), "--trace")
    assert out.returncode == 0, out.stderr
    assert str(r) + "\n" == out.stdout
    assert len(r.stages) == len(out.stdout.splitlines()) - 1
    # without the trace: the engine's d, the same as the interpreter's and the CLI's
    plain = ins.run(**ops)
    assert plain.stages == ()
    assert plain.encoding == r.encoding
    assert out.stdout.splitlines()[-1] == f"d={plain.text}"
    untraced = run_cli(cli, "run", f"specs/{stem}.mma", "--instr", name, *hex_args(ins, ops))
    assert untraced.stdout == str(plain) + "\n"


def test_stages_of_the_readme_example(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    r = ins.run(1.0, [2**-14, 2**-16], [2**-8, 2**-10], pad=True, trace=True)
    assert r.d == np.float32(1 + 2**-22) and r.d.dtype == np.float32
    assert r.encoding == 0x3F800002 and r.text == "3f800002 1.000000238418579"
    assert list(r.by_stage()) == ["c", "products", "alignment sum", "normalisation 0"]
    terms = {s.name: s for s in r.by_stage()["alignment sum"]}
    # the 2^-26 product is truncated away by the 25-bit alignment: term, kept, dropped
    assert terms["p[1]"].numbers == (Fraction(1, 2**26), Fraction(0), Fraction(1, 2**26))
    assert terms["p[1]"].key == "align sum / p[1]"
    assert terms["p[0]"].numbers[2] == 0
    assert terms["sum"].numbers == (1 + Fraction(1, 2**22),)
    assert terms["sum"].value == "4194305*2^-22 (~1.000000238418579)"
    products = r.by_stage()["products"]
    assert [p.name for p in products] == [f"p[{k}]" for k in range(16)]
    assert products[1].numbers == (Fraction(1, 2**26),)
    assert r[0].text == "c = 3f800000 (1)" and r[0].value == "3f800000 (1)"
    assert len(r) == 23 and list(r) == list(r.stages)


def test_stages_of_a_composed_instruction_are_named_by_step(spec):
    ins = spec("examples/fp8_promoted")["promoted.m64n8k128.f32.e4m3.e4m3"]
    r = ins.run(1.0, [1.5, 2.0**-9, 3.0], [0.5, 0.25, 1.0], pad=True, trace=True)
    stages = r.by_stage()
    assert "step part" in stages and "step d" in stages
    assert "part: alignment sum" in stages and "part: products" in stages
    nested = [s for s in r if s.depth == 1]
    assert nested and all(s.stage.startswith("part: ") for s in nested)
    assert all(s.key.startswith("part / ") for s in nested)
    assert [s.depth for s in r if s.depth == 0][0] == 0
    assert stages["step d"][-1].numbers == ()
    assert stages["step d"][-1].value == "40980400 (4.75048828125)"
    assert r.d == np.float32(4.75048828125)
    conversions = spec("blackwell")["mma.m16n8k32.f32.e4m3.e4m3.f32"].run(
        1.0, [1.5], [0.5], pad=True, trace=True
    )
    assert [s.key for s in conversions.by_stage()["conversion"]] == [
        "convert a to f16 (RNE)",
        "convert b to f16 (RNE)",
    ]


def test_run_repr_and_html(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    r = ins.run(1.0, [2**-14, 2**-16], [2**-8, 2**-10], pad=True, trace=True)
    text = repr(r)
    assert text.splitlines()[0] == (
        "<mmac.Run mma.m16n8k16.f32.f16.f16.f32: d=3f800002 1.000000238418579, 23 trace lines>"
    )
    assert "alignment sum:\n    align sum: reference exponent 0" in text
    assert "    p[2] .. p[15] = +0" in text and "p[ 3]" not in text
    page = r._repr_html_()
    assert page.count("<tr>") == 1 + 1 + 3 + 5 + 1  # header, c, products, alignment, normalise
    assert 'rowspan="5"' in page and "alignment sum" in page
    assert "d=3f800002 1.000000238418579" in page
    plain = ins.run(1.0, [0.0] * 16, [0.0] * 16)
    assert repr(plain) == "<mmac.Run mma.m16n8k16.f32.f16.f16.f32: d=3f800000 1>"


def test_run_pads_and_checks_lanes(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    with pytest.raises(ValueError, match=f"a has 2 elements, but `{ins.name}` takes 16"):
        ins.run(1.0, [1.0, 2.0], [1.0, 1.0])
    assert ins.run(1.0, [1.0, 2.0], [1.0, 1.0], pad=True).d == 4.0
    mx = spec("blackwell")[FAMILIES[3][1]]
    padded = mx.run(0.0, [1.0], [1.0], pad=True, trace=True)  # scale factors 1.0
    assert padded.d == 1.0
    assert "* sa 7f * sb 7f" in padded[1].text


# ------------------------------------------------------------------------ diff

PAIR = (("ada", "mma.m16n8k16.f32.f16.f16.f32"), ("hopper", "mma.m16n8k16.f32.f16.f16.f32"))


def test_diff_is_what_mmac_diff_finds(cli, monkeypatch):
    monkeypatch.chdir(REPO)  # the specs named as the CLI is given them
    (ls, ln), (rs, rn) = PAIR
    left, right = mmac.load(f"specs/{ls}.mma")[ln], mmac.load(f"specs/{rs}.mma")[rn]
    args = ("diff", f"specs/{ls}.mma", ln, f"specs/{rs}.mma", rn, "--trials", "500", "--seed", "7")
    d = mmac.diff(left, right, trials=500, seed=7)
    assert isinstance(d, mmac.Difference)
    js = run_cli(cli, *args, "--json")
    assert js.returncode == 1, js.stderr
    want = json.loads(js.stdout)
    assert want["differ"] is True
    assert d.tried == want["tried"]
    assert (d.structured_tried, d.random_tried) == (want["structured_tried"], want["random_tried"])
    for op in ("a", "b"):
        assert d.witness_codes[op] == [int(h, 16) for h in want["witness"][op]]
    assert d.witness_codes["c"] == int(want["witness"]["c"], 16)
    assert d.left_text.split(" ")[0] == want["left"]["d"]
    assert d.right_text.split(" ")[0] == want["right"]["d"]
    assert d.left_encoding == int(want["left"]["d"], 16)
    assert d.left_d == np.float32(float(want["left"]["value"]))
    assert d.right_d == np.float32(float(want["right"]["value"]))
    assert d.exact_text == want["exact"] and d.exact == Fraction(want["exact"])
    assert (d.stage, d.cause) == (want["stage"], want["cause"])
    assert want["run"] == f"mmac run specs/{ls}.mma --instr {ln} {d.run_arguments}"
    text = run_cli(cli, *args)
    assert text.returncode == 1
    assert str(d) == text.stdout


def test_diff_witness_reproduces_both_traces(spec):
    (ls, ln), (rs, rn) = PAIR
    left, right = spec(ls)[ln], spec(rs)[rn]
    d = mmac.diff(left, right, trials=500, seed=7)
    lr = left.run(**d.witness, trace=True)
    rr = right.run(**d.witness, trace=True)
    assert (lr.encoding, rr.encoding) == (d.left_encoding, d.right_encoding)
    assert lr.encoding != rr.encoding
    assert [s.text for s in d.left_trace] == [s.text for s in lr]
    assert [s.text for s in d.right_trace] == [s.text for s in rr]
    assert d.witness["a"].dtype == np.float16 and d.left_d.dtype == np.float32
    # the exact result lies between (or on) the two results' values
    assert min(d.left_d, d.right_d) <= d.exact <= max(d.left_d, d.right_d)
    assert d.stage in {s.stage for s in d.left_trace}
    assert "stage: " in repr(d) and d.cause in repr(d)
    assert "<table>" in d._repr_html_() and ">" in d.side_by_side


def test_diff_of_an_instruction_with_itself_is_none(cli, spec):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    assert mmac.diff(ins, ins, trials=50, seed=1) is None
    out = run_cli(cli, "diff", "specs/hopper.mma", ins.name, "specs/hopper.mma", ins.name,
                  "--trials", "50", "--seed", "1")
    assert out.returncode == 0 and out.stdout.startswith("no difference found")


def test_diff_refuses_what_the_cli_refuses(spec):
    f16 = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    bf16 = spec("hopper")["mma.m16n8k16.f32.bf16.bf16.f32"]
    different = r"take different operands: a is f16 \(left\) vs bf16 \(right\)"
    with pytest.raises(ValueError, match=different):
        mmac.diff(f16, bf16)
    with pytest.raises(TypeError, match="right must be an mmac.Instruction"):
        mmac.diff(f16, "hopper")
    with pytest.raises(ValueError, match="trials must be a non-negative int"):
        mmac.diff(f16, f16, trials=-1)


# ------------------------------------------------------------------------ report

REPORTED = [("hopper", "mma.m16n8k16.f32.f16.f16.f32"), ("ada", "mma.m16n8k16.f32.f16.f16.f32")]


def test_report_is_what_mmac_report_measures(cli, monkeypatch):
    monkeypatch.chdir(REPO)  # the specs named as the CLI is given them
    (fa, na), (fb, nb) = REPORTED
    a, b = mmac.load(f"specs/{fa}.mma")[na], mmac.load(f"specs/{fb}.mma")[nb]
    r = mmac.report(a, b, dist="signed", k=[16, 64], samples=300, seed=3)
    args = ("report", f"specs/{fa}.mma", na, "--against", f"specs/{fb}.mma", nb,
            "--dist", "signed", "--k", "16,64", "--samples", "300", "--seed", "3")
    js = run_cli(cli, *args, "--json")
    assert js.returncode == 0, js.stderr
    want = json.loads(js.stdout)["rows"]
    got = [dict(vars(row)) for row in r.rows]
    for g in got:
        g["bias_ci95"] = list(g["bias_ci95"])
    assert got == want
    assert [row.label for row in r.rows] == [f"hopper {na}"] * 2 + [f"ada {nb}"] * 2
    text = run_cli(cli, *args)
    assert str(r) + "\n" == text.stdout
    assert r.distribution == "uniform [-1, 1)"
    assert list(r.series()) == [f"hopper {na}", f"ada {nb}"]
    assert "<table>" in r._repr_html_() and repr(r).endswith(str(r))


def test_report_on_a_range_agrees_with_the_cli(cli, spec):
    ins = spec("hopper")["mma.m16n8k16.f32.bf16.bf16.f32"]
    r = mmac.report(ins, dist="uniform", range=(-2, 3), k=32, samples=100, seed=9)
    out = run_cli(cli, "report", "specs/hopper.mma", ins.name, "--dist", "uniform",
                  "--range", "-2,3", "--k", "32", "--samples", "100", "--seed", "9")
    assert str(r) + "\n" == out.stdout
    assert r.rows[0].label == ins.name and r.rows[0].compared == 100


def test_report_warns_of_clamped_inputs_and_samples_left_out(spec):
    ins = spec("hopper")["mma.m16n8k16.f16.f16.f16.f16"]
    with pytest.warns(UserWarning, match="no sample compared"):
        r = mmac.report(ins, dist="uniform", range=(100, 200), k=16, samples=5)
    assert r.rows[0].compared == 0
    with pytest.warns(UserWarning, match="160 of its 160 input values lay beyond"):
        r = mmac.report(ins, dist="uniform", range=(1e5, 1e6), k=16, samples=5)
    assert r.rows[0].clamped_inputs == 160


def test_report_refuses_bad_options(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    with pytest.raises(ValueError, match=f"k 24 is not a positive multiple of `{ins.name}`'s k = 16"):
        mmac.report(ins, k=[16, 24], samples=10)
    with pytest.raises(ValueError, match="unknown distribution `gauss`"):
        mmac.report(ins, dist="gauss", k=16, samples=10)
    with pytest.raises(ValueError, match="^range= applies to `uniform` only, not `normal`$"):
        mmac.report(ins, dist="normal", range=(0, 1), k=16, samples=10)
    bad_range = r"range \(1, 1\): expected \(LO, HI\) with finite LO < HI"
    with pytest.raises(ValueError, match=bad_range):
        mmac.report(ins, dist="uniform", range=(1, 1), k=16, samples=10)
    with pytest.raises(ValueError, match="0 samples per K"):
        mmac.report(ins, k=16, samples=0)
    with pytest.raises(ValueError, match="k needs at least one length"):
        mmac.report(ins, k=[], samples=10)
    with pytest.raises(TypeError, match="instruction 2 must be an mmac.Instruction"):
        mmac.report(ins, "ada", k=16, samples=10)


def test_report_plot(spec, monkeypatch, tmp_path):
    r = mmac.report(spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"], k=[16, 64], samples=50)
    try:
        import matplotlib
    except ImportError:
        with pytest.raises(ImportError, match="pip install matplotlib"):
            r.plot()
    else:
        matplotlib.use("Agg")
        fig = r.plot(tmp_path / "report.png")
        top, bottom = fig.axes
        assert top.get_xscale() == "log" and top.get_yscale() == "log"
        assert len(top.get_lines()) == 2  # mean and max
        assert list(top.get_lines()[0].get_xdata()) == [16, 64]
        assert (tmp_path / "report.png").stat().st_size > 0
    # without matplotlib: a clear ImportError, whatever is installed here
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    missing = "matplotlib, which is not installed: pip install matplotlib"
    with pytest.raises(ImportError, match=missing):
        r.plot()


# ------------------------------------------------------------------------ progress


def f16_operands(M, K, N, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    return A, B


def test_gemm_progress_counts_every_tile_on_the_calling_thread(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    A, B = f16_operands(256, 512, 256)
    counts, threads = [], set()

    def progress(n):
        counts.append(n)
        threads.add(threading.get_ident())

    D = ins.gemm(A, B, progress=progress, threads=2)
    assert sum(counts) == (256 // 16) * (256 // 8)
    assert all(isinstance(n, int) and n > 0 for n in counts)
    assert threads == {threading.get_ident()}
    assert np.array_equal(D, ins.gemm(A, B, progress=False))


def test_gemm_progress_over_a_padded_batch(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    rng = np.random.default_rng(1)
    A = rng.uniform(-1, 1, (3, 40, 20))
    B = rng.uniform(-1, 1, (20, 12))
    counts = []
    D = ins.gemm(A, B, round=True, pad=True, progress=counts.append)
    # 3 matrices of D padded to 48 x 16: 3 x 2 tiles each
    assert sum(counts) == 3 * (48 // 16) * (16 // 8)
    assert np.array_equal(D, ins.gemm(A, B, round=True, pad=True))


def test_gemm_progress_exception_is_raised_after_the_gemm(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    # on one thread this GEMM spans several 0.1 s reporting intervals (about 0.9 s here)
    A, B = f16_operands(512, 2048, 512)
    calls = []

    def failing(n):
        calls.append(n)
        raise KeyError("stop")

    with pytest.raises(KeyError, match="stop"):
        ins.gemm(A, B, progress=failing, threads=1)
    assert len(calls) == 1  # not called again once it raised


def test_gemm_progress_arguments(spec, monkeypatch):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    A, B = f16_operands(16, 16, 8)
    with pytest.raises(TypeError, match="progress must be True, False, None or a callable, not 1"):
        ins.gemm(A, B, progress=1)
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    missing = "progress=True draws a tqdm bar, and tqdm is not installed"
    with pytest.raises(ImportError, match=missing):
        ins.gemm(A, B, progress=True)
    # automatic without tqdm: no bar, even for a large GEMM
    monkeypatch.setattr(_progress, "AUTOMATIC_WORK", 1)
    assert ins.gemm(A, B).shape == (16, 8)


class FakeBar:
    """A stand-in for tqdm's bar: records its total, updates and closing."""

    made: list = []

    def __init__(self, total, desc, unit, leave):
        self.total, self.desc, self.unit, self.leave = total, desc, unit, leave
        self.updates, self.closed = [], False
        FakeBar.made.append(self)

    def update(self, n):
        self.updates.append(n)

    def close(self):
        self.closed = True


@pytest.fixture
def fake_tqdm(monkeypatch):
    FakeBar.made = []
    package = types.ModuleType("tqdm")
    auto = types.ModuleType("tqdm.auto")
    auto.tqdm = FakeBar
    package.auto = auto
    monkeypatch.setitem(sys.modules, "tqdm", package)
    monkeypatch.setitem(sys.modules, "tqdm.auto", auto)
    return FakeBar


def test_gemm_progress_bar_automatic_when_large(spec, fake_tqdm, monkeypatch):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    A, B = f16_operands(64, 32, 32)
    ins.gemm(A, B)  # small: no bar
    assert fake_tqdm.made == []
    monkeypatch.setattr(_progress, "AUTOMATIC_WORK", 64 * 32 * 32)
    ins.gemm(A, B)
    (bar,) = fake_tqdm.made
    assert (bar.total, bar.unit, bar.desc, bar.leave) == (16, "tile", ins.name, False)
    assert sum(bar.updates) == 16 and bar.closed
    ins.gemm(A, B, progress=False)
    assert len(fake_tqdm.made) == 1
    ins.gemm(A[:16], B, progress=True)  # asked for: a bar whatever the size
    assert len(fake_tqdm.made) == 2 and sum(fake_tqdm.made[1].updates) == 4


def test_report_progress_counts_samples(spec, fake_tqdm):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    counts = []
    r = mmac.report(ins, ins, k=[16, 32], samples=70, progress=counts.append)
    assert sum(counts) == 2 * 2 * 70
    assert r.rows[0].mean_rel_error == r.rows[2].mean_rel_error  # the same inputs for both
    mmac.report(ins, k=[16], samples=10, progress=True)
    (bar,) = fake_tqdm.made
    assert (bar.total, bar.unit, sum(bar.updates)) == (10, "sample", 10)
