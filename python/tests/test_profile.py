"""The numerics profiler: ``mmac.torch.emulate(ins, report=True)`` records each call site
(module path, operator, shapes) and its error against float64, checked here against
references computed by hand (``ins.gemm`` on the same operands against NumPy float64)."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
import torch
from torch.nn.modules import module as module_hooks

from mmac.torch import emulate

HOPPER_FP8 = "wgmma.m64n8k32.f32.e4m3.e4m3"


def _tiny_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(30, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()


def _batches():
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 30, generator=g), torch.randn(5, 30, generator=g)


def _expected_layer(ins, x, linear):
    """One Linear's emulated output and its error statistics, computed without the
    profiler: ``ins.gemm`` on the same operands, NumPy float64 for the reference, the
    native float32 ``addmm`` for the outputs that differ."""
    w = linear.weight.detach()
    b = linear.bias.detach()
    d = ins.gemm(x.numpy(), w.T.numpy(), b.numpy(), round=True, pad=True)
    exact = x.numpy().astype(np.float64) @ w.numpy().astype(np.float64).T + b.numpy().astype(np.float64)
    err = np.abs(d.astype(np.float64) - exact)
    rel = err[exact != 0] / np.abs(exact[exact != 0])
    native = torch.addmm(b, x, w.T).numpy()
    return d, {"err": err, "rel": rel, "exact": exact, "differ": int(np.count_nonzero(d != native))}


def test_each_linear_is_a_site_with_the_error_of_a_hand_computed_reference(spec):
    ins = spec("hopper")[HOPPER_FP8]
    model = _tiny_model()
    batches = _batches()
    with torch.no_grad(), emulate(ins, report=True) as profile:
        outputs = [model(x) for x in batches]
    rows = profile.rows
    assert [(s.module, s.op, s.ordinal, s.calls) for s in rows] == [("0", "addmm", 0, 2), ("2", "addmm", 0, 2)]
    assert rows[0].shapes == [((16,), (8, 30), (30, 16)), ((16,), (5, 30), (30, 16))]
    assert rows[1].shapes == [((4,), (8, 16), (16, 4)), ((4,), (5, 16), (16, 4))]
    assert (rows[0].outputs, rows[1].outputs) == (13 * 16, 13 * 4)
    assert profile.calls == 4

    expected = {0: [], 1: []}
    for x, out in zip(batches, outputs):
        h, first = _expected_layer(ins, x, model[0])
        logits, second = _expected_layer(ins, torch.from_numpy(np.maximum(h, 0)), model[2])
        np.testing.assert_array_equal(out.numpy(), logits)  # the same run as the profile's
        expected[0].append(first)
        expected[1].append(second)
    for site, calls in zip(rows, (expected[0], expected[1])):
        err = np.concatenate([c["err"].ravel() for c in calls])
        rel = np.concatenate([c["rel"] for c in calls])
        assert site.compared == err.size and site.non_finite == 0
        assert site.relative_compared == rel.size
        assert site.max_abs == pytest.approx(err.max(), rel=1e-9)
        assert site.mean_abs == pytest.approx(err.mean(), rel=1e-9)
        assert site.max_rel == pytest.approx(rel.max(), rel=1e-9)
        assert site.mean_rel == pytest.approx(rel.mean(), rel=1e-9)
        exact = np.concatenate([c["exact"].ravel() for c in calls])
        assert site.norm_rel == pytest.approx(np.linalg.norm(err) / np.linalg.norm(exact), rel=1e-9)
        assert site.norm_rel < site.mean_rel  # the outputs near zero weigh less
        assert site.differ == sum(c["differ"] for c in calls)
        # FP8 inputs: far from float64, and nearly every output differs from float32
        assert 1e-3 < site.mean_rel < site.max_rel
        assert site.differ_share > 0.9


class _Attention(torch.nn.Module):
    """Two matmuls in its own forward (scores, then the weighted sum) and a child Linear."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, x):
        scores = torch.softmax(x @ x.transpose(-1, -2), dim=-1)
        return self.proj(scores @ x)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([_Attention(), _Attention()])
        self.head = torch.nn.Parameter(torch.randn(16, 3))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x @ self.head  # an operator of the model's own forward


def test_sites_are_module_paths_and_ordinals_within_a_forward(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    torch.manual_seed(2)
    net = _Net()
    x = torch.randn(2, 5, 16)
    a, b = torch.randn(4, 6), torch.randn(6, 3)
    with torch.no_grad(), emulate(ins, report=True) as profile:
        net(x)
        net(x)
        torch.mm(a, b)  # outside every module
        torch.mm(a, b, out=torch.empty(0))
    sites = [(s.module, s.op, s.ordinal, s.calls) for s in profile.rows]
    assert sites == [
        ("blocks.0", "bmm", 0, 2),
        ("blocks.0", "bmm", 1, 2),
        ("blocks.0.proj", "addmm", 0, 2),
        ("blocks.1", "bmm", 0, 2),
        ("blocks.1", "bmm", 1, 2),
        ("blocks.1.proj", "addmm", 0, 2),
        ("", "mm", 0, 2),
        (None, "mm", 0, 2),
    ]
    assert [s.label for s in profile.rows[:2]] == ["blocks.0 bmm", "blocks.0 bmm#2"]
    assert profile.rows[0].shapes == [((2, 5, 16), (2, 16, 5))]
    assert profile.rows[1].shapes == [((2, 5, 5), (2, 5, 16))]
    assert profile.rows[-2].label == "(model) mm"
    assert profile.rows[-1].label == "(no module) mm"


def test_the_hooks_live_only_as_long_as_the_context(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    model = _tiny_model()
    before = (len(module_hooks._global_forward_pre_hooks), len(module_hooks._global_forward_hooks))
    with pytest.raises(RuntimeError, match="inside"):
        with torch.no_grad(), emulate(ins, report=True) as profile:
            model(torch.randn(3, 30))
            raise RuntimeError("inside")
    assert (len(module_hooks._global_forward_pre_hooks), len(module_hooks._global_forward_hooks)) == before
    with torch.no_grad():
        model(torch.randn(3, 30))  # not recorded
    assert profile.calls == 2
    # without report=, the context gives the mode, as before
    with emulate(ins) as mode:
        pass
    assert isinstance(mode, emulate) and mode.profile is None


def test_complex_operands_are_compared_with_complex128(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    g = torch.Generator().manual_seed(4)
    a = torch.complex(torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g))
    b = torch.complex(torch.randn(8, 2, generator=g), torch.randn(8, 2, generator=g))
    with emulate(ins, report=True) as profile:
        d = a @ b
    (site,) = profile.rows
    exact = a.to(torch.complex128) @ b.to(torch.complex128)
    err = (d.to(torch.complex128) - exact).abs()
    assert site.outputs == 8 and site.compared == 8
    assert site.max_abs == pytest.approx(float(err.max()), rel=1e-9)
    assert site.max_rel == pytest.approx(float((err / exact.abs()).max()), rel=1e-9)


def test_non_finite_outputs_are_counted_not_compared(spec):
    ins = spec("hopper")[HOPPER_FP8]
    a = torch.ones(2, 4)
    a[0, 0] = 1e6  # beyond e4m3: NaN after rounding, so row 0 of D is NaN
    with pytest.warns(UserWarning, match="beyond"), emulate(ins, report=True) as profile:
        torch.mm(a, torch.ones(4, 3))
    (site,) = profile.rows
    assert (site.outputs, site.compared, site.non_finite) == (6, 3, 3)
    assert site.max_abs == 0.0 and site.differ == 3


def test_the_table_shows_every_site(spec):
    ins = spec("hopper")[HOPPER_FP8]
    model = _tiny_model()
    with torch.no_grad(), emulate(ins, report=True) as profile:
        for x in _batches():
            model(x)
    table = profile.table()
    lines = table.splitlines()
    assert lines[0] == (
        f"4 calls through `{HOPPER_FP8}` (hopper) at 2 sites; error against float64 of the same operands"
    )
    assert lines[1].split() == [
        "module", "op", "calls", "operand", "shapes", "outputs", "max", "rel", "err",
        "mean", "rel", "err", "norm", "rel", "err", "differ", "from", "f32",
    ]  # fmt: skip
    for line, site, shapes in zip(
        lines[2:], profile.rows, ["16 8x30 30x16 (+1 more)", "4 8x16 16x4 (+1 more)"]
    ):
        assert re.split(r" {2,}", line) == [
            site.module,
            "addmm",
            "2",
            shapes,
            str(site.outputs),
            f"{site.max_rel:.3e}",
            f"{site.mean_rel:.3e}",
            f"{site.norm_rel:.3e}",
            f"{100 * site.differ_share:.1f}%",
        ]
    assert len(lines) == 4
    assert repr(table) == str(table) and str(profile) == str(table)
    assert repr(profile) == f"<mmac profile of `{HOPPER_FP8}`: 4 calls at 2 sites>"


def test_plot_draws_a_bar_per_site_and_error(spec):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    ins = spec("hopper")[HOPPER_FP8]
    model = _tiny_model()
    with torch.no_grad(), emulate(ins, report=True) as profile:
        model(_batches()[0])
    ax = profile.plot()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0 addmm", "2 addmm"]
    heights = [p.get_height() for p in ax.patches]
    rows = profile.rows
    assert heights == [getattr(r, m) for m in ("max_rel", "mean_rel", "norm_rel") for r in rows]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["max", "mean", "normwise"]
    assert ax.get_yscale() == "log"
    ax = profile.plot(metrics=["norm_rel"], log=False)
    assert [p.get_height() for p in ax.patches] == [r.norm_rel for r in rows]
    assert ax.get_yscale() == "linear"
    with pytest.raises(ValueError, match="metrics must be some of"):
        profile.plot(metrics=["rel"])


def test_plot_without_matplotlib_says_what_is_missing(spec, monkeypatch):
    ins = spec("hopper")[HOPPER_FP8]
    with torch.no_grad(), emulate(ins, report=True) as profile:
        _tiny_model()(_batches()[0])
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="needs matplotlib: pip install matplotlib"):
        profile.plot()


def test_plot_of_an_empty_profile_is_an_error(spec):
    pytest.importorskip("matplotlib")
    with emulate(spec("hopper")[HOPPER_FP8], report=True) as profile:
        pass
    with pytest.raises(ValueError, match="no operator ran"):
        profile.plot()


def test_convolutions_and_attention_are_sites_with_their_float64_error(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
    mask = torch.randn(5, 5, generator=g)  # a float mask, a keyword argument of the operator
    torch.manual_seed(6)
    conv = torch.nn.Conv2d(3, 4, 3)
    x = torch.randn(1, 3, 6, 6, generator=g)
    with torch.no_grad(), emulate(ins, report=True) as profile:
        attended = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        convolved = conv(x)
    attention, convolution = profile.rows
    assert (attention.module, convolution.module, convolution.op) == (None, "", "convolution")
    assert convolution.shapes == [((1, 3, 6, 6), (4, 3, 3, 3), (4,))]
    with torch.no_grad():
        exact_conv = torch.nn.functional.conv2d(x.double(), conv.weight.double(), conv.bias.double())
    exact_attention = torch.nn.functional.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), attn_mask=mask.double()
    )
    for site, d, exact in ((attention, attended, exact_attention), (convolution, convolved, exact_conv)):
        err = (d.double() - exact).abs()
        assert site.outputs == d.numel() == site.compared
        assert site.max_abs == pytest.approx(float(err.max()), rel=1e-6)
        assert site.norm_rel == pytest.approx(float(err.norm() / exact.norm()), rel=1e-6)


def test_a_boolean_attention_mask_is_profiled_against_float64(spec):
    ins = spec("hopper")["mma.m16n8k16.f32.f16.f16.f32"]
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 2, 5, 8, generator=g) for _ in range(3))
    keep = torch.ones(5, 5, dtype=torch.bool).tril()
    with torch.no_grad(), emulate(ins, report=True) as profile:
        attended = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    (site,) = profile.rows
    exact = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=keep)
    err = (attended.double() - exact).abs()
    assert site.compared == attended.numel()
    assert site.max_abs == pytest.approx(float(err.max()), rel=1e-6)
