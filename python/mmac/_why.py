"""The "why" of results, from Python: what ``mmac run --trace``, ``mmac diff`` and
``mmac report`` answer, as objects computed by the same runtime as the CLI.

- :class:`Run` (``ins.run(c, a, b, trace=True)``): one dot-product-add and the trace of
  every stage, as :class:`Stage` records;
- :func:`diff` returns a :class:`Difference`: a minimal input on which two instructions
  differ, both results, the exact one and the cause, or None;
- :func:`report` returns an :class:`AccuracyReport`: error and bias against the
  dot-product length K, with ``plot()`` (matplotlib).

Each object prints (``str``) what the CLI prints for the same question, and shows itself
as a table in Jupyter (``_repr_html_``).
"""

from __future__ import annotations

import html
import math
import re
import warnings
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from . import _dtypes, _native, _progress

__all__ = ["Stage", "Run", "Difference", "AccuracyRow", "AccuracyReport", "diff", "report"]


# ------------------------------------------------------------------------ traces


@dataclass(frozen=True)
class Stage:
    """One line of a trace.

    ``text`` is the line exactly as ``mmac run --trace`` prints it; ``stage`` the part of
    the pipeline it belongs to, named as ``mmac diff`` names stages (``c``, ``products``,
    ``groups``, ``alignment sum``, ``normalisation 0``, ``chained step 1 (k = 16..31)``,
    ``accumulation``, ``overflow``, ``special values``, ``result``); ``key`` what the line
    is about (``c``, ``p[ 1]``, ``align sum / p[ 1]``, ``normalize[0]``), the key
    ``mmac diff`` pairs two traces' lines by.
    """

    text: str
    stage: str
    key: str

    @property
    def name(self) -> str:
        """What the line is about, without its section: ``p[1]``, ``sum``, ``c``."""
        own = self.key.split(" / ")[-1]
        return re.sub(r"\[\s+", "[", own).removeprefix("align ")

    @property
    def value(self) -> str:
        """The line after its subject: for ``  p[ 1]: 2^-26 -> 0 (keep 25 bits RZ, dropped
        2^-26)``, ``2^-26 -> 0 (keep 25 bits RZ, dropped 2^-26)``; for ``c = 3f800000
        (1)``, ``3f800000 (1)``. Exact values are written as the trace writes them."""
        line = self.text.strip()
        cuts = [i for i in (line.find(" = "), line.find(": ")) if i >= 0]
        if not cuts:
            return line
        cut = min(cuts)
        return line[cut + (3 if line[cut] == " " else 2) :]

    @property
    def numbers(self) -> tuple:
        """The exact values the line states, in order, as :class:`fractions.Fraction`:
        the values written ``N*2^E`` (``4194305*2^-22``) and the zeros written ``0``,
        ``+0`` or ``-0`` where a value stands. For an alignment term: the term, what is
        kept of it, what was dropped; for a product, a group or a sum: its value; for a
        normalisation: before and after. (Integer pipelines write plain integers: read
        them from ``value``.)"""
        text = _EXPONENT_NOTE.sub("", self.text)
        return tuple(
            Fraction(0) if zero else Fraction(int(m)) * Fraction(2) ** int(e)
            for m, e, zero in _VALUE.findall(text)
        )

    @property
    def depth(self) -> int:
        """How deep the line is nested in the runs of a composed instruction (``  | ``
        prefixes): 0 at the top."""
        depth, rest = 0, self.text
        while rest.startswith("  | "):
            depth, rest = depth + 1, rest[4:]
        return depth


# a value as traces write it: N*2^E, or a zero where a value stands
_VALUE = re.compile(
    r"(-?\d+)\*2\^(-?\d+)|(?:(?<=-> )|(?<=dropped )|(?<== )|(?<=: ))([+-]?0)(?= \(| ->|\)|$)"
)
# the exponent a product takes in the max search, `(e = -22)`: not a value
_EXPONENT_NOTE = re.compile(r" \(e = [^)]*\)")


def _stages(rows) -> tuple:
    return tuple(Stage(text, stage, key) for text, key, stage in rows)


def _group(stages) -> list:
    """Consecutive stages of the same ``stage``, in order: ``[(stage, [Stage, ...])]``."""
    groups: list = []
    for s in stages:
        if groups and groups[-1][0] == s.stage:
            groups[-1][1].append(s)
        else:
            groups.append((s.stage, [s]))
    return groups


def _zero_product(s: Stage) -> bool:
    return s.name.startswith("p[") and s.text.endswith("= +0")


def _folded(stages) -> list:
    """The stages' lines, each run of more than two zero products folded into one line
    (``p[2] .. p[15] = +0``), as ``mmac diff`` folds them side by side."""
    out, i = [], 0
    while i < len(stages):
        j = i
        while j < len(stages) and _zero_product(stages[j]) and stages[j].depth == stages[i].depth:
            j += 1
        if j - i > 2:
            indent = stages[i].text[: len(stages[i].text) - len(stages[i].text.lstrip(" |"))]
            out.append(f"{indent}{stages[i].name} .. {stages[j - 1].name} = +0")
            i = j
        else:
            out.append(stages[i].text)
            i += 1
    return out


def _html_table(title: str, stages, footer: str) -> str:
    """A table of trace lines (zero products folded), the stage named once per run of
    lines."""
    rows = []
    for stage, group in _group(stages):
        texts = _folded(group)
        for i, text in enumerate(texts):
            head = (
                f'<th rowspan="{len(texts)}" style="text-align:left;vertical-align:top">'
                f"{html.escape(stage)}</th>"
                if i == 0
                else ""
            )
            rows.append(
                f"<tr>{head}<td style='text-align:left'><code>{html.escape(text)}</code>"
                "</td></tr>"
            )
    return (
        f"<div><p><b>{html.escape(title)}</b></p><table>"
        f"<tr><th>stage</th><th>trace</th></tr>{''.join(rows)}</table>"
        f"<p><code>{html.escape(footer)}</code></p></div>"
    )


class Run:
    """One dot-product-add of an instruction, as ``mmac run`` computes it.

    ``d`` is the result (a NumPy scalar of d's dtype, or a raw encoding for a d format
    without one), ``encoding`` its raw encoding and ``text`` the CLI's ``HEX VALUE``.
    With ``trace=True``, ``stages`` holds every line of the trace as a :class:`Stage`
    (``len(run)``, ``run[i]`` and iteration reach them too); ``str(run)`` is what ``mmac
    run --trace`` prints, line for line."""

    def __init__(self, instruction, d, encoding: int, text: str, stages: tuple):
        self.instruction = instruction
        self.d = d
        self.encoding = encoding
        self.text = text
        self.stages = stages

    def __len__(self) -> int:
        return len(self.stages)

    def __iter__(self):
        return iter(self.stages)

    def __getitem__(self, i):
        return self.stages[i]

    def by_stage(self) -> dict:
        """The trace's lines by stage, stages in the order they first appear."""
        out: dict = {}
        for s in self.stages:
            out.setdefault(s.stage, []).append(s)
        return out

    def __str__(self) -> str:
        return "\n".join([s.text for s in self.stages] + [f"d={self.text}"])

    def __repr__(self) -> str:
        head = f"<mmac.Run {self.instruction.name}: d={self.text}"
        if not self.stages:
            return head + ">"
        lines = [head + f", {len(self.stages)} trace lines>"]
        for stage, group in _group(self.stages):
            lines.append(f"{stage}:")
            lines.extend(f"    {text}" for text in _folded(group))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        title = f"{self.instruction.name} ({self.instruction.arch})"
        return _html_table(title, self.stages, f"d={self.text}")


def run(ins, c, a, b, sa, sb, positions, trace: bool, pad: bool, engine: str) -> Run:
    """:meth:`mmac.Instruction.run` (``positions``: a sparse A's stored elements' columns,
    or None)."""
    c_code = int(ins._codes(c, "c", "c", 0))
    a_codes = [int(v) for v in ins._codes(a, "a", "a", 1)]
    b_codes = [int(v) for v in ins._codes(b, "b", "b", 1)]
    if pad and ins._scale_format is not None:  # missing scale factors are 1.0
        sa, sb = ([] if sa is None else sa), ([] if sb is None else sb)
    ins._check_scales(sa, sb)
    if ins._scale_format is None:
        sa_codes = sb_codes = []
    else:
        sa_codes = [int(v) for v in ins._codes(sa, "sa", "sa", 1)]
        sb_codes = [int(v) for v in ins._codes(sb, "sb", "sb", 1)]
    if pad:
        zero = {op: _padding(ins, op, 0.0, "+0") for op in ("a", "b")}
        # (a's stored elements, given with their positions, are as many as those)
        if positions is None:
            a_codes += [zero["a"]] * (ins.k - len(a_codes))
        b_codes += [zero["b"]] * (ins.k - len(b_codes))
        if ins._scale_format is not None:
            one = _padding(ins, "sa", 1.0, "1.0")
            blocks = ins.k // ins.scale["block"]
            sa_codes += [one] * (blocks - len(sa_codes))
            sb_codes += [one] * (blocks - len(sb_codes))
    if ins.sparsity is not None and positions is None:
        # a's whole row, compressed as `mmac run` compresses it
        a_codes, positions = ins._native.compress_row(a_codes)
    if trace:
        out = ins._native.trace(c_code, a_codes, b_codes, sa_codes, sb_codes, positions)
        code, text, stages = out["d"], out["d_text"], _stages(out["rows"])
    else:
        code = ins._native.dot(c_code, a_codes, b_codes, sa_codes, sb_codes, ins._engine(engine), positions)
        text, stages = _result_text(ins, code), ()
    d = _dtypes.from_encodings(np.array([code], dtype=np.uint64), ins._format("d"))[0]
    return Run(ins, d, code, text, stages)


def _padding(ins, op: str, value: float, what: str) -> int:
    codes, failure = ins._native.encode(op, [value])
    if failure is not None:
        fmt = ins._format(op)["name"]
        raise ValueError(f"pad=True: `{fmt}` ({op}) has no {what} to pad with")
    return int(codes[0])


def _result_text(ins, code: int) -> str:
    """``HEX VALUE`` as ``mmac run`` writes d (the trace's own text when traced)."""
    fmt = ins._format("d")
    digits = (fmt["bits"] + 3) // 4
    value = ins._native.describe("d", code)
    return f"{code:0{digits}x} {value}"


# ------------------------------------------------------------------------ diff


class Difference:
    """A minimal input on which two instructions differ, as ``mmac diff`` finds it.

    - ``witness``: the input, ``{"c": ..., "a": ..., "b": ...}`` (and ``"sa"``, ``"sb"``
      for block-scaled instructions) as NumPy values of the operands' dtypes (raw
      encodings for formats without one), so that ``left.run(**witness, trace=True)``
      reproduces ``left_trace``; ``witness_codes`` the same as raw encodings (ints);
    - ``left_d``, ``right_d``: both results (scalars of d's dtype), ``left_encoding``,
      ``right_encoding`` their encodings, ``left_text``, ``right_text`` as ``HEX
      (VALUE)``;
    - ``exact``: the exact ``c + sum a*b`` as a :class:`fractions.Fraction` (None when an
      input is NaN or infinite), ``exact_text`` as the exact decimal of ``mmac diff
      --json``;
    - ``stage``: the first stage where the two traces' values differ; ``cause``: the
      parameters of the two specs that differ there, in the spec's terms;
    - ``left_trace``, ``right_trace``: both traces as :class:`Stage` tuples,
      ``side_by_side`` the CLI's pairing of them (``>`` marks the divergence);
    - ``tried``, ``structured_tried``, ``random_tried``: inputs tried by the search;
      ``run_arguments``, ``decimal_arguments``: the witness as ``mmac run`` arguments.

    ``str(difference)`` is what ``mmac diff`` prints."""

    def __init__(self, left, right, found: dict):
        self.left, self.right = left, right
        codes = found["witness"]
        operands = ("c", "a", "b") + (("sa", "sb") if left.scale else ())
        self.witness_codes = {op: codes[op] for op in operands}
        self.witness = {
            op: _decoded(left, op, codes[op]) for op in operands
        }
        self.left_encoding, self.right_encoding = found["left"], found["right"]
        self.left_d = _decoded(left, "d", found["left"])
        self.right_d = _decoded(left, "d", found["right"])
        self.left_text, self.right_text = found["left_text"], found["right_text"]
        self.exact_text = found["exact"]
        self.exact = None if found["exact"] is None else Fraction(found["exact"])
        self._exact_shown = found["exact_shown"]
        self.stage, self.cause = found["stage"], found["cause"]
        self.left_trace = _stages(found["left_trace"])
        self.right_trace = _stages(found["right_trace"])
        self.side_by_side = found["side_by_side"]
        self.tried = found["tried"]
        self.structured_tried = found["structured_tried"]
        self.random_tried = found["random_tried"]
        self.nonzero_products = found["nonzero_products"]
        self.run_arguments = found["run_arguments"]
        self.decimal_arguments = found["decimal_arguments"]

    def __str__(self) -> str:
        tried = (
            f"{self.structured_tried} structured and {self.random_tried} random inputs tried"
        )
        plural = "" if self.nonzero_products == 1 else "s"
        n = self.nonzero_products
        lines = [f"differ: a witness with {n} nonzero product{plural} ({tried})"]
        for side, ins in (("left ", self.left), ("right", self.right)):
            lines.append(
                f"  {side}: mmac run {ins.spec.name} --instr {ins.name} {self.run_arguments}"
            )
        lines.append(f"  decimal: {self.decimal_arguments}")
        lines.append(f"left  d={self.left_text}")
        lines.append(f"right d={self.right_text}")
        if self._exact_shown is None:
            lines.append("exact   (not finite: an input is NaN or infinite)")
        else:
            lines.append(f"exact   {self._exact_shown}")
        lines.append(f"stage: {self.stage}")
        lines.append(f"cause: {self.cause}")
        lines.append("")
        return "\n".join(lines) + "\n" + self.side_by_side

    def __repr__(self) -> str:
        return (
            f"<mmac.Difference {self.left.name} ({self.left.arch}) vs {self.right.name} "
            f"({self.right.arch}): left d={self.left_text}, right d={self.right_text}, "
            f"exact {self._exact_shown or 'not finite'}; stage: {self.stage}; "
            f"cause: {self.cause}>"
        )

    def _repr_html_(self) -> str:
        esc = html.escape
        facts = [
            ("witness", f"mmac run … {self.decimal_arguments}"),
            (f"left ({self.left.arch})", self.left_text),
            (f"right ({self.right.arch})", self.right_text),
            ("exact", self._exact_shown or "not finite (an input is NaN or infinite)"),
            ("stage", self.stage),
            ("cause", self.cause),
        ]
        rows = "".join(
            f"<tr><th style='text-align:left'>{esc(k)}</th><td><code>{esc(v)}</code></td></tr>"
            for k, v in facts
        )
        return (
            f"<div><p><b>{esc(self.left.name)} vs {esc(self.right.name)}</b></p>"
            f"<table>{rows}</table><pre>{esc(self.side_by_side)}</pre></div>"
        )


def _decoded(ins, op: str, codes):
    """Raw encodings (an int or a list) as values of the operand's dtype."""
    arr = np.asarray(codes, dtype=np.uint64)
    return _dtypes.from_encodings(arr.reshape(-1), ins._format(op)).reshape(arr.shape)[()]


def diff(left, right, *, trials: int = 100_000, seed: int = 0x5EED0FD1):
    """Compare two instructions that take the same operands, as ``mmac diff`` does:
    structured candidates from both specs, then ``trials`` random inputs drawn from
    ``seed``; a difference found is shrunk to a minimal witness and explained.

    Returns a :class:`Difference`, or None when no input was found on which they differ
    (``mmac diff`` exit 0). Instructions that take different operands (formats, k, scale
    factors) raise ``ValueError``. Runs with the GIL released."""
    from . import Instruction

    for side, ins in (("left", left), ("right", right)):
        if not isinstance(ins, Instruction):
            raise TypeError(f"{side} must be an mmac.Instruction, not {type(ins).__name__}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 0:
        raise ValueError(f"trials must be a non-negative int, not {trials!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 1 << 64:
        raise ValueError(f"seed must be an int from 0 to 2^64 - 1, not {seed!r}")
    found = _native.diff(left._native, right._native, trials, seed)
    if not found["differ"]:
        return None
    return Difference(left, right, found)


# ------------------------------------------------------------------------ report


@dataclass(frozen=True)
class AccuracyRow:
    """One instruction at one K, with the fields of ``mmac report --json``'s rows."""

    instruction: str
    label: str
    """How the table and the plot name the instruction: its name, or ``arch name`` (then
    ``file name``) where names repeat."""
    arch: str
    file: str
    k: int
    samples: int
    compared: int
    """Samples whose result and exact result are finite."""
    mean_abs_error: float
    max_abs_error: float
    mean_rel_error: float
    max_rel_error: float
    bias: float
    """Mean of (result - exact) / |exact|."""
    bias_ci95: tuple
    correctly_rounded: float
    """Share of results equal to the exact result rounded to nearest even into d."""
    faithful: float
    """Share of results that are either neighbour of the exact result in d."""
    clamped_inputs: int = 0
    """Input values beyond their format's range, clamped to its largest finite value."""


def _rust_exp(x: float, digits: int) -> str:
    """``x`` as Rust's ``{:.DIGITSe}`` writes it: ``1.234e-5``, ``NaN``, ``inf``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


class AccuracyReport:
    """The accuracy of instructions over the dot-product length K, as ``mmac report``
    measures it: ``rows`` (one :class:`AccuracyRow` per instruction and K, in that order),
    ``distribution`` (as the report describes it), ``samples``, ``seed``.
    ``str(report)`` is ``mmac report``'s table; ``plot()`` draws its plot."""

    def __init__(self, rows, distribution: str, samples: int, seed: int):
        self.rows = rows
        self.distribution = distribution
        self.samples = samples
        self.seed = seed

    def __str__(self) -> str:
        width = max([len(r.label) for r in self.rows] + [len("instruction")])
        lines = [
            f"{self.distribution} inputs rounded to nearest into the input formats; "
            f"{self.samples} samples per K, seed {self.seed}",
            f"{'instruction':<{width}} {'K':>5} {'mean |abs|':>11} {'max |abs|':>11} "
            f"{'mean |rel|':>11} {'max |rel|':>11} {'bias (95% CI)':>24} {'correct':>7} "
            f"{'faithful':>8}",
        ]
        for r in self.rows:
            e3 = [
                f"{_rust_exp(v, 3):>11}"
                for v in (r.mean_abs_error, r.max_abs_error, r.mean_rel_error, r.max_rel_error)
            ]
            bias = (
                f"{_rust_exp(r.bias, 2)} [{_rust_exp(r.bias_ci95[0], 1)}, "
                f"{_rust_exp(r.bias_ci95[1], 1)}]"
            )
            lines.append(
                f"{r.label:<{width}} {r.k:>5} {' '.join(e3)} {bias:>24} "
                f"{100 * r.correctly_rounded:>6.1f}% {100 * r.faithful:>7.1f}%"
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        labels = list(dict.fromkeys(r.label for r in self.rows))
        ks = list(dict.fromkeys(r.k for r in self.rows))
        return (
            f"<mmac.AccuracyReport {', '.join(labels)}: K = {ks}, {self.samples} samples "
            f"per K, {self.distribution}>\n{self}"
        )

    def _repr_html_(self) -> str:
        head = (
            "<tr><th>instruction</th><th>K</th><th>mean |rel|</th><th>max |rel|</th>"
            "<th>bias (95% CI)</th><th>correct</th><th>faithful</th></tr>"
        )
        body = "".join(
            f"<tr><td>{html.escape(r.label)}</td><td>{r.k}</td>"
            f"<td>{_rust_exp(r.mean_rel_error, 3)}</td><td>{_rust_exp(r.max_rel_error, 3)}</td>"
            f"<td>{_rust_exp(r.bias, 2)} [{_rust_exp(r.bias_ci95[0], 1)}, "
            f"{_rust_exp(r.bias_ci95[1], 1)}]</td>"
            f"<td>{100 * r.correctly_rounded:.1f}%</td><td>{100 * r.faithful:.1f}%</td></tr>"
            for r in self.rows
        )
        return (
            f"<div><p>{html.escape(self.distribution)} inputs, {self.samples} samples per K, "
            f"seed {self.seed}</p><table>{head}{body}</table></div>"
        )

    def series(self) -> dict:
        """The rows by label, in the order of their first row: ``{label: [rows]}``."""
        out: dict = {}
        for r in self.rows:
            out.setdefault(r.label, []).append(r)
        return out

    def plot(self, path=None):
        """Draw what ``mmac report --plot`` draws: mean (solid) and max (dashed) relative
        error against K, log-log, and the bias with its 95% confidence interval against
        K. Returns the matplotlib ``Figure``; with ``path``, also saves it there (the
        format by the extension, as matplotlib's ``savefig``). Needs matplotlib
        (``pip install matplotlib``): an ``ImportError`` says so."""
        try:
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ImportError(
                "AccuracyReport.plot() draws with matplotlib, which is not installed: "
                "pip install matplotlib (str(report) is the table without it)"
            ) from e
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(9.6, 9.0), sharex=True)
        fig.suptitle(f"{self.distribution} inputs, {self.samples} samples per K")
        positive = [
            v for r in self.rows for v in (r.mean_rel_error, r.max_rel_error) if v > 0
        ]
        floor = min(positive) / 3 if positive else 1e-10
        for i, (label, rows) in enumerate(self.series().items()):
            colour = f"C{i}"
            ks = [r.k for r in rows]
            means = [max(r.mean_rel_error, floor) for r in rows]
            top.plot(ks, means, "o-", color=colour, label=label)
            top.plot(ks, [max(r.max_rel_error, floor) for r in rows], "--", color=colour)
            lower = [r.bias - r.bias_ci95[0] for r in rows]
            upper = [r.bias_ci95[1] - r.bias for r in rows]
            bottom.errorbar(
                ks, [r.bias for r in rows], yerr=[lower, upper], color=colour,
                capsize=4, label=label,
            )
        top.set_xscale("log")
        top.set_yscale("log")
        top.set_ylabel("relative error")
        top.set_title("relative error |result - exact| / |exact| (solid: mean, dashed: max)")
        top.legend(loc="upper left")
        bottom.axhline(0.0, color="black", alpha=0.4, linewidth=1)
        bottom.set_xscale("log")
        ks = sorted({r.k for r in self.rows})
        bottom.set_xticks(ks, [str(k) for k in ks])
        bottom.minorticks_off()
        top.minorticks_off()
        bottom.set_xlabel("K (dot-product length)")
        bottom.set_ylabel("bias")
        bottom.set_title("bias: mean of (result - exact) / |exact|, with 95% confidence interval")
        bottom.legend(loc="upper left")
        fig.tight_layout()
        if path is not None:
            fig.savefig(path)
        return fig


def _labels(instructions) -> list:
    """How ``mmac report`` names each instruction: its name, or ``arch name`` where names
    repeat, or ``file name`` where those repeat too, or ``file name (#i)``."""
    keys = [
        lambda i: i.name,
        lambda i: f"{i.arch} {i.name}",
        lambda i: f"{i.spec.name} {i.name}",
    ]
    out = []
    for n, ins in enumerate(instructions):
        for key in keys:
            if sum(key(other) == key(ins) for other in instructions) == 1:
                out.append(key(ins))
                break
        else:
            out.append(f"{ins.spec.name} {ins.name} (#{n + 1})")
    return out


def report(
    ins,
    *against,
    dist: str = "normal",
    range=None,
    k=(16, 64, 256, 1024, 4096),
    samples: int = 1000,
    seed: int = 1,
    threads=None,
    progress=None,
) -> AccuracyReport:
    """The accuracy of ``ins`` (and of each instruction of ``against``) against the exact
    result, as ``mmac report`` measures it: for each dot-product length in ``k`` (each a
    multiple of every instruction's k), ``samples`` dot products accumulated as a GEMM
    does (k-steps in increasing order, d fed back as c, from c = +0) on inputs drawn from
    ``dist`` with ``seed`` and rounded to nearest into the input formats. Every
    instruction sees the same inputs.

    ``dist``: ``"normal"`` (N(0, 1)), ``"uniform"`` ([0, 1), or ``range=(lo, hi)``),
    ``"lognormal"`` (exp(N(0, 1))), ``"signed"`` (uniform on [-1, 1)). ``threads``: as
    for ``gemm``. ``progress``: as for ``gemm``, counting samples (automatic: a bar when
    tqdm is installed and the report is large). Bad options raise ``ValueError`` with the
    CLI's messages."""
    from . import Instruction

    chosen = (ins,) + against
    for i, x in enumerate(chosen):
        if not isinstance(x, Instruction):
            raise TypeError(
                f"instruction {i + 1} must be an mmac.Instruction, not {type(x).__name__}"
            )
    ks = [k] if isinstance(k, int) else list(k)
    for v in ks:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"k takes positive int lengths, found {v!r}")
    for name, v in (("samples", samples), ("seed", seed)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name} must be a non-negative int, not {v!r}")
    if range is not None:
        range = tuple(float(v) for v in range)
        if len(range) != 2:
            raise ValueError(f"range takes (lo, hi), found {len(range)} values")
    total = len(chosen) * len(ks) * int(samples)
    with _progress.reporter(
        progress, total=total, work=len(chosen) * sum(ks) * int(samples),
        desc="report", unit="sample",
    ) as count:
        found = _native.accuracy(
            [x._native for x in chosen], dist, range, [int(v) for v in ks], int(samples),
            int(seed), threads, count,
        )
    labels = _labels(chosen)
    rows = []
    for n, r in enumerate(found["rows"]):
        i = n // len(ks)  # the rows of each instruction, one per K
        r = dict(r, label=labels[i], arch=chosen[i].arch, file=chosen[i].spec.name)
        r["bias_ci95"] = tuple(r["bias_ci95"])
        caveat = r.pop("caveat")
        if caveat is not None:
            # (the native side named the row by its instruction; the table by its label)
            warnings.warn(caveat.replace(r["instruction"], r["label"], 1), stacklevel=2)
        rows.append(AccuracyRow(**r))
    return AccuracyReport(rows, found["distribution"], int(samples), int(seed))
