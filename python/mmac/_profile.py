"""The numerics profiler of :func:`mmac.torch.emulate`: which call site of a model loses
how much accuracy on an instruction.

``with mmac.torch.emulate(ins, report=True) as profile: model(x)`` records every operator
that runs through the instruction, by call site, and measures its error in the same run::

    with torch.no_grad(), mmac.torch.emulate(ins, report=True) as profile:
        logits = model(x)
    print(profile.table())     # one row per call site
    profile.rows               # the same, as Site objects
    profile.plot()             # a bar chart per call site (needs matplotlib)

A call site is a module path (the name ``named_modules()`` of the outermost module
called gives it, such as ``"blocks.0.attn.qkv"``; ``""`` is that module itself, ``None``
an operator called outside every module), an operator (``"addmm"``, ``"bmm"``) and its
ordinal among the operators of that name the module's own ``forward`` calls (the two
``bmm`` of an attention are two sites; operators of child modules belong to the child).
Calls of the same site (a module called again, another batch) are aggregated.

For each call, the operator runs twice more, natively and outside the emulation, on the
same operands: on float64 copies (the reference) and on float32 copies (what a float32
GEMM gives). The error of the emulated result D against the reference r counts the
outputs where both are finite: absolute error ``|D - r|``, relative error ``|D - r| /
|r|`` over outputs whose reference is nonzero (as ``ins.report`` and ``mmac gemm
--report`` define them), the normwise relative error ``‖D - r‖₂ / ‖r‖₂`` (which outputs
that cancel to near zero do not dominate), and how many outputs differ from the float32
result rounded to D's dtype. The reference is of the operands as the operator received
them, before their scaling and rounding into the instruction's formats, so the error
includes that rounding: it is what the instruction costs the model at that site. The
statistics run in NumPy on one thread (see :func:`_call_error`).

This module owns the recorder (:class:`Profile`), its rows (:class:`Site`), the module
path stack kept by global forward hooks while the profile is active, the table and the
plot. :mod:`mmac.torch` calls :meth:`Profile._start`, :meth:`Profile._stop` and
:meth:`Profile._record`.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field

import numpy as np
import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.nn.modules import module as _module_hooks

from . import _dtypes

__all__ = ["Profile", "Site"]


@dataclass
class Site:
    """One call site and the error of its calls, aggregated.

    ``module`` is the module path (``""``: the outermost module itself; None: no module),
    ``op`` the ATen operator's name, ``ordinal`` which call of ``op`` within the module's
    own ``forward`` (0 for the first), ``calls`` how often it ran, ``shapes`` the distinct
    shapes of its tensor operands in the order the operator takes them (one tuple per
    call that had new shapes), ``outputs`` the outputs of all calls, ``compared`` those
    where the emulated result and the float64 reference are both finite (``non_finite``
    the rest), ``max_abs``/``mean_abs`` and ``max_rel``/``mean_rel`` the absolute and
    relative errors against the reference (relative over outputs with a nonzero reference,
    ``relative_compared`` of them), ``norm_rel`` the normwise relative error
    ``‖D - r‖₂ / ‖r‖₂`` over the compared outputs (robust where outputs cancel to near
    zero and their relative errors explode), and ``differ`` how many outputs differ from
    the float32 result."""

    module: str | None
    op: str
    ordinal: int
    calls: int = 0
    shapes: list = field(default_factory=list)
    outputs: int = 0
    compared: int = 0
    non_finite: int = 0
    max_abs: float = 0.0
    mean_abs: float = 0.0
    max_rel: float = 0.0
    mean_rel: float = 0.0
    relative_compared: int = 0
    norm_rel: float = 0.0
    differ: int = 0
    _sum_abs: float = field(default=0.0, repr=False)
    _sum_rel: float = field(default=0.0, repr=False)
    _sum_squared_error: float = field(default=0.0, repr=False)
    _sum_squared_reference: float = field(default=0.0, repr=False)

    @property
    def differ_share(self) -> float:
        """The share of outputs that differ from the float32 result (0 to 1)."""
        return self.differ / self.outputs if self.outputs else 0.0

    @property
    def label(self) -> str:
        """``module op`` as the table and the plot name the site (``#n`` for the n-th
        call of the operator in that module, when it is not the first)."""
        op = self.op if self.ordinal == 0 else f"{self.op}#{self.ordinal + 1}"
        return f"{_module_name(self.module)} {op}"

    def _add(self, shapes: tuple, stats: "_CallError") -> None:
        self.calls += 1
        if shapes not in self.shapes:
            self.shapes.append(shapes)
        self.outputs += stats.outputs
        self.compared += stats.compared
        self.non_finite += stats.outputs - stats.compared
        self.relative_compared += stats.relative_compared
        self.differ += stats.differ
        self.max_abs = max(self.max_abs, stats.max_abs)
        self.max_rel = max(self.max_rel, stats.max_rel)
        self._sum_abs += stats.sum_abs
        self._sum_rel += stats.sum_rel
        self.mean_abs = self._sum_abs / self.compared if self.compared else 0.0
        self.mean_rel = self._sum_rel / self.relative_compared if self.relative_compared else 0.0
        self._sum_squared_error += stats.sum_squared_error
        self._sum_squared_reference += stats.sum_squared_reference
        if self._sum_squared_reference > 0:
            self.norm_rel = (self._sum_squared_error / self._sum_squared_reference) ** 0.5


def _module_name(path: str | None) -> str:
    if path is None:
        return "(no module)"
    return path if path else "(model)"


@dataclass
class _CallError:
    """The error of one emulated call against its references."""

    outputs: int
    compared: int
    relative_compared: int
    differ: int
    max_abs: float
    sum_abs: float
    max_rel: float
    sum_rel: float
    sum_squared_error: float
    sum_squared_reference: float


class _Frame:
    """A module being run: its path and how many operators of each name its own
    ``forward`` has called so far."""

    __slots__ = ("path", "ops")

    def __init__(self, path: str | None):
        self.path = path
        self.ops: dict[str, int] = {}

    def ordinal(self, op: str) -> int:
        n = self.ops.get(op, 0)
        self.ops[op] = n + 1
        return n


class Table(str):
    """A text table that also shows as itself at the interactive prompt."""

    def __repr__(self) -> str:
        return str(self)


class Profile:
    """The call sites of the operators :func:`mmac.torch.emulate` ran through ``ins``,
    with their error (module doc). ``rows`` lists the :class:`Site` objects in the order
    of their first call; ``calls`` counts every recorded call."""

    def __init__(self, ins):
        self.ins = ins
        self._sites: dict[tuple, Site] = {}
        self._stack: list[_Frame] = []
        self._outside = _Frame(None)  # operators called outside every module
        self._names: dict[int, str] = {}
        self._handles: list = []

    @property
    def rows(self) -> list[Site]:
        """The call sites, in the order of their first call."""
        return list(self._sites.values())

    @property
    def calls(self) -> int:
        """Operators recorded, over every site."""
        return sum(site.calls for site in self._sites.values())

    # -------------------------------------------------------- the module path stack

    def _start(self) -> None:
        """Register the global forward hooks that keep the module path stack."""
        if self._handles:
            raise RuntimeError("this profile is already recording")
        self._stack.clear()
        self._handles = [
            _module_hooks.register_module_forward_pre_hook(self._enter_module),
            _module_hooks.register_module_forward_hook(self._leave_module, always_call=True),
        ]

    def _stop(self) -> None:
        """Remove the hooks (the recorded sites stay)."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._stack.clear()
        self._names = {}

    def _enter_module(self, module, args) -> None:
        if not self._stack:
            # the outermost module called: name every module under it
            self._names = {id(m): name for name, m in module.named_modules(remove_duplicate=False)}
        path = self._names.get(id(module))
        if path is None:  # not under the outermost module: named under its caller
            parent = self._stack[-1].path if self._stack else None
            kind = f"<{type(module).__name__}>"
            path = kind if not parent else f"{parent}.{kind}"
        self._stack.append(_Frame(path))

    def _leave_module(self, module, args, output) -> None:
        if self._stack:
            self._stack.pop()

    # -------------------------------------------------------------- recording

    def _record(self, func, args, kwargs, result) -> None:
        """Record one emulated call of ``func`` on ``args`` and ``kwargs`` (``out=``
        already removed) that gave ``result``: its site, and its error against the same
        operator on float64 and float32 copies of the operands, run natively."""
        packet = func.overloadpacket  # the overload without out= (removed already)
        op = packet.__name__
        frame = self._stack[-1] if self._stack else self._outside
        ordinal = frame.ordinal(op) if frame is not self._outside else 0
        key = (frame.path, op, ordinal)
        site = self._sites.get(key)
        if site is None:
            site = self._sites[key] = Site(frame.path, op, ordinal)
        shapes = tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))
        mask = kwargs.get("attn_mask")
        if isinstance(mask, torch.Tensor) and mask.dtype == torch.bool:
            # the fused attention takes a mask of the query's dtype: a boolean one as 0 (kept)
            # and -inf (masked), which `_cast` then copies to each precision
            float_mask = torch.zeros(mask.shape).masked_fill(~mask, -math.inf)
            kwargs = dict(kwargs, attn_mask=float_mask)
        try:
            # natively: no mode of an `emulate` around this one's may compute them
            with _disable_current_modes():
                reference = packet(*_cast(args, torch.float64), **_cast(kwargs, torch.float64))
                single = packet(*_cast(args, torch.float32), **_cast(kwargs, torch.float32))
        except RuntimeError as e:
            raise RuntimeError(
                f"the profile's reference of {op} (the operator on float64 and float32 copies of "
                f"its operands, run natively) failed: {e}"
            ) from e
        site._add(shapes, _call_error(_first(result), _first(reference), _first(single)))

    # -------------------------------------------------------------- output

    def table(self) -> Table:
        """The sites as a text table: module path, operator, calls, operand shapes,
        outputs, max, mean and normwise relative error against float64, and the share of
        outputs that differ from float32."""
        head = [
            "module",
            "op",
            "calls",
            "operand shapes",
            "outputs",
            "max rel err",
            "mean rel err",
            "norm rel err",
            "differ from f32",
        ]
        body = []
        for site in self.rows:
            op = site.op if site.ordinal == 0 else f"{site.op}#{site.ordinal + 1}"
            shapes = " ".join(_shape_text(s) for s in site.shapes[0])
            if len(site.shapes) > 1:
                shapes += f" (+{len(site.shapes) - 1} more)"
            body.append(
                [
                    _module_name(site.module),
                    op,
                    str(site.calls),
                    shapes,
                    str(site.outputs),
                    f"{site.max_rel:.3e}",
                    f"{site.mean_rel:.3e}",
                    f"{site.norm_rel:.3e}",
                    f"{100 * site.differ_share:.1f}%",
                ]
            )
        widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
        left = {0, 1, 3}  # text columns; numbers align right

        def line(row):
            cells = (c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
            return "  ".join(cells).rstrip()

        title = (
            f"{self.calls} calls through `{self.ins.name}` ({self.ins.arch}) at {len(body)} sites; "
            "error against float64 of the same operands"
        )
        return Table("\n".join([title, line(head), *map(line, body)]))

    def __str__(self) -> str:
        return str(self.table())

    def __repr__(self) -> str:
        return f"<mmac profile of `{self.ins.name}`: {self.calls} calls at {len(self._sites)} sites>"

    def plot(self, ax=None, *, metrics=("max_rel", "mean_rel", "norm_rel"), log: bool = True):
        """A bar chart of every site's relative errors against float64, one bar per site
        and metric (``"max_rel"``, ``"mean_rel"``, ``"norm_rel"``: the :class:`Site`
        fields), log scale unless ``log=False``, on ``ax`` or a new figure's axes, which
        it returns. Needs matplotlib; without it, an ImportError says so."""
        unknown = [m for m in metrics if m not in _PLOT_METRICS]
        if unknown or not metrics:
            raise ValueError(f"metrics must be some of {tuple(_PLOT_METRICS)}, found {tuple(metrics)!r}")
        try:
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ImportError("Profile.plot needs matplotlib: pip install matplotlib") from e
        rows = self.rows
        if not rows:
            raise ValueError("nothing to plot: no operator ran through the instruction")
        if ax is None:
            _, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(rows) + 2), 4.5))
        width = 0.8 / len(metrics)
        for j, metric in enumerate(metrics):
            offset = (j - (len(metrics) - 1) / 2) * width
            heights = [getattr(site, metric) for site in rows]
            ax.bar([i + offset for i in range(len(rows))], heights, width=width, label=_PLOT_METRICS[metric])
        ax.set_xticks(list(range(len(rows))))
        ax.set_xticklabels([site.label for site in rows], rotation=60, ha="right", fontsize=8)
        if log:
            ax.set_yscale("log")
        ax.set_ylabel("relative error against float64")
        ax.set_title(f"{self.ins.name} ({self.ins.arch})", fontsize=9)
        ax.legend()
        ax.figure.tight_layout()
        return ax


_PLOT_METRICS = {"max_rel": "max", "mean_rel": "mean", "norm_rel": "normwise"}


def _first(result):
    """An operator's result tensor: the first of a tuple (attention gives its output and
    the log-sum-exp of its rows)."""
    return result[0] if isinstance(result, (tuple, list)) else result


def _shape_text(shape: tuple) -> str:
    """``8x30`` for a shape (8, 30); ``scalar`` for ()."""
    return "x".join(map(str, shape)) if shape else "scalar"


def _cast(args, real: torch.dtype):
    """``args`` (a list, or a dict of keyword arguments) with every floating tensor copied
    to ``real`` and every complex tensor to the complex dtype of that precision; other
    arguments (integer and boolean tensors, numbers) as they are."""
    complex_ = torch.complex128 if real == torch.float64 else torch.complex64

    def one(a):
        if isinstance(a, torch.Tensor) and a.is_complex():
            return a.to(complex_)
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            return a.to(real)
        return a

    if isinstance(args, dict):
        return {name: one(a) for name, a in args.items()}
    return [one(a) for a in args]


def _call_error(result: torch.Tensor, reference: torch.Tensor, single: torch.Tensor) -> _CallError:
    """``result``'s error against ``reference`` (float64) and how many of its outputs
    differ from ``single`` (float32) rounded to ``result``'s dtype.

    The statistics are most of the profiler's cost. They run in NumPy, on one thread, in
    a few whole-array passes: torch's parallel kernels would start OpenMP threads that
    spin beside the instruction's GEMM threads between calls."""
    d = _flat_values(result)
    r = _flat_values(reference)  # integer operators' references are integers
    err = np.abs(d - r)
    # |D - r| is finite exactly where both are (a difference of finite float64 values that
    # overflows needs magnitudes near 1e308, beyond what float32 operands give)
    finite = np.isfinite(err)
    compared = int(np.count_nonzero(finite))
    magnitude = np.abs(r)
    if compared < err.size:
        err = np.where(finite, err, 0.0)
        magnitude = np.where(finite, magnitude, 0.0)
    zero = magnitude == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = err / magnitude
    rel[zero] = 0.0
    flat = _dtypes.tensor_to_numpy(result.reshape(-1))
    native = _dtypes.tensor_to_numpy(single.reshape(-1).to(result.dtype))
    differ = int(np.count_nonzero(flat != native))
    if compared < err.size:  # NaN != NaN: a NaN where float32 gives NaN too is no difference
        differ -= int(np.count_nonzero(np.isnan(flat) & np.isnan(native)))
    empty = err.size == 0
    return _CallError(
        outputs=result.numel(),
        compared=compared,
        relative_compared=err.size - int(np.count_nonzero(zero)),
        differ=differ,
        max_abs=0.0 if empty else float(err.max()),
        sum_abs=float(err.sum()),
        max_rel=0.0 if empty else float(rel.max()),
        sum_rel=float(rel.sum()),
        sum_squared_error=float(np.square(err).sum()),
        sum_squared_reference=float(np.square(magnitude).sum()),
    )


def _flat_values(t: torch.Tensor) -> np.ndarray:
    """A tensor's values as a 1-D float64 (complex128 for complex) array."""
    wide = np.complex128 if t.is_complex() else np.float64
    return _dtypes.tensor_to_numpy(t.reshape(-1)).astype(wide, copy=False)
