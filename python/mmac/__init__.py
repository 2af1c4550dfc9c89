"""mmac: the exact arithmetic of GPU matrix-multiply-accumulate units, from Python.

Load a ``.mma`` spec, pick an instruction, and compute what the hardware computes, bit
for bit, on NumPy arrays (or torch tensors)::

    import mmac, numpy as np
    spec = mmac.load("specs/hopper.mma")
    ins = spec["mma.m16n8k16.f32.f16.f16.f32"]
    A = np.ones((16, 16), np.float16); B = np.ones((16, 8), np.float16)
    D = ins.gemm(A, B)            # float32, as the instruction's d format

The specs are checked and the instructions compiled by the same compiler and JIT as the
``mmac`` command; GEMMs run in the order ``mmac gemm`` uses (K walked in increasing
k-steps, each step's D the next step's C), on rayon's thread pool with the GIL released.
``ins.run(c, a, b, trace=True)``, :func:`diff` and :func:`report` answer why a result is
what it is, as ``mmac run --trace``, ``mmac diff`` and ``mmac report`` do. ``mmac.torch``
emulates an instruction under a model's matmuls; ``mmac.dask`` spreads a GEMM over a
Dask cluster.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import numpy as np

from . import _dtypes, _progress, _why
from ._native import SpecError
from . import _native
from ._why import AccuracyReport, AccuracyRow, Difference, Run, Stage, diff, report

__all__ = [
    "load",
    "loads",
    "Spec",
    "Instruction",
    "ErrorReport",
    "SpecError",
    "default_threads",
    "Run",
    "Stage",
    "diff",
    "Difference",
    "report",
    "AccuracyReport",
    "AccuracyRow",
]

_OPERANDS = ("a", "b", "c", "d")


def load(path) -> "Spec":
    """Read, parse and check a spec file. A spec that does not check raises
    :class:`SpecError` whose text is the rendered diagnostics; a missing file raises
    ``FileNotFoundError``."""
    return Spec(_native.load(str(path)))


def loads(text: str, name: str = "<string>") -> "Spec":
    """Parse and check spec text; ``name`` names it in diagnostics."""
    return Spec(_native.loads(text, name))


@functools.lru_cache(maxsize=64)
def _loads_cached(text: str, name: str) -> "Spec":
    """A spec rebuilt from its text once per process (pickles sent to Dask workers)."""
    return loads(text, name)


def _instruction_of(text: str, spec_name: str, name: str) -> "Instruction":
    return _loads_cached(text, spec_name)[name]


def default_threads() -> int:
    """Threads a computation uses when ``threads=None``: one per core, as ``mmac gemm``."""
    return _native.default_threads()


def _memory_image(name, op, lay, x):
    """The image of an operand that lies in memory: its (rows, cols) matrix of encodings,
    column by column, as little-endian 32-bit words (64-bit elements as two, low first)."""
    shape = (lay["rows"], lay["cols"])
    dtype = np.uint64 if lay["container"] == 64 else np.uint32
    if not isinstance(x, np.ndarray) or x.dtype != dtype or x.shape != shape:
        got = f"{x.dtype} {x.shape}" if isinstance(x, np.ndarray) else type(x).__name__
        raise ValueError(
            f"{op}: `{name}` reads {op} from {lay['memory']}: give its matrix of "
            f"encodings, a {np.dtype(dtype).name} array of shape {shape}, not {got}"
        )
    le = "<u8" if dtype == np.uint64 else "<u4"
    return np.ascontiguousarray(x.T, dtype=le).tobytes()

class Spec:
    """A checked spec: its instructions by name (``spec[name]``)."""

    def __init__(self, native):
        self._native = native
        self._instructions: dict[str, Instruction] = {}

    @property
    def name(self) -> str:
        """The file name, or the name given to :func:`loads`."""
        return self._native.name

    @property
    def arch(self) -> str:
        return self._native.arch

    @property
    def title(self):
        return self._native.title

    @property
    def text(self) -> str:
        """The spec's source text."""
        return self._native.text

    def instructions(self) -> list:
        """Every instruction's name, in the order of the file."""
        return self._native.instructions()

    def __getitem__(self, name: str) -> "Instruction":
        ins = self._instructions.get(name)
        if ins is None:
            ins = Instruction(self, self._native.instruction(name))
            self._instructions[name] = ins
        return ins

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name in self.instructions()

    def __iter__(self):
        return iter(self.instructions())

    def __len__(self) -> int:
        return len(self.instructions())

    def __reduce__(self):
        return (_loads_cached, (self.text, self.name))

    def __repr__(self) -> str:
        return f"<mmac.Spec {self.name!r}: arch {self.arch}, {len(self)} instructions>"


@dataclass(frozen=True)
class ErrorReport:
    """The error of D against the exact result ``C + A*B`` (computed exactly; only the
    statistics are floats), as ``mmac gemm --report`` prints it (``str(report)``)."""

    compared: int
    """Elements compared (exact result and D finite)."""
    non_finite: int
    """Elements skipped because an input or D is NaN or infinite."""
    max_abs: float
    mean_abs: float
    max_rel: float
    """Relative errors are over the elements whose exact result is non-zero."""
    mean_rel: float
    mean_signed: float
    """The mean of D - exact: the bias."""
    table: str
    d: np.ndarray
    """The D that was compared."""

    def __str__(self) -> str:
        return self.table


class Instruction:
    """One instruction of a spec: its shape, formats and entries.

    ``dot`` computes one dot-product-add (``run`` the same with its trace), ``mma`` one
    whole instruction, ``gemm`` any multiple of its shape, ``report`` the error against
    the exact result. ``engine`` is
    ``"auto"`` (the JIT; the reference interpreter, with a warning, for an instruction the
    JIT refuses), ``"jit"`` or ``"interp"``; the engines agree bit for bit."""

    def __init__(self, spec: Spec, native):
        self._spec = spec
        self._native = native
        self._formats = {op: native.format_of(op) for op in _OPERANDS}
        scale = native.scale
        self._scale_format = scale[0] if scale else None
        self._warned = False

    # ---------------------------------------------------------------- description

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def spec(self) -> Spec:
        return self._spec

    @property
    def arch(self) -> str:
        return self._native.arch

    @property
    def m(self) -> int:
        return self._native.m

    @property
    def n(self) -> int:
        return self._native.n

    @property
    def k(self) -> int:
        return self._native.k

    @property
    def shape(self) -> tuple:
        """``(m, n, k)``."""
        return (self.m, self.n, self.k)

    @property
    def types(self) -> dict:
        """The operand formats by name: ``{"a": "f16", "b": "f16", "c": "f32", "d": "f32"}``."""
        return {op: f["name"] for op, f in self._formats.items()}

    @property
    def scale(self):
        """Block scale factors ``{"format": name, "block": columns of k}`` (one factor per
        ``block`` columns of A and rows of B; a sparse A's columns are its dense ones), or
        None."""
        s = self._native.scale
        return None if s is None else {"format": s[0]["name"], "block": s[1]}

    @property
    def pipeline(self) -> str:
        """The pipeline of its ``uses`` line (``t_fdpa``, ...)."""
        return self._native.pipeline

    @property
    def algorithm(self) -> str:
        return self._native.algorithm

    @property
    def jit_error(self):
        """Why the JIT refuses this instruction (the interpreter computes it), or None."""
        return self._native.jit_error

    def format(self, operand: str) -> dict:
        """The layout of an operand's format (``a``, ``b``, ``c``, ``d``, ``sa``, ``sb``):
        ``name``, ``kind``, ``bits`` and, for floats, ``exponent``, ``mantissa``,
        ``bias``, ``specials``, ``signed``, ``subnormals``, ``ignore_low``."""
        return dict(self._format(operand))

    def dtype(self, operand: str):
        """The NumPy dtype that holds an operand's format bit for bit, or None when only
        raw encodings (unsigned integers) can."""
        return _dtypes.natural_dtype(self._format(operand))

    def decode(self, codes, operand: str = "d") -> np.ndarray:
        """The values of raw encodings of an operand's format, as float64 (exact for every
        format up to f64's precision)."""
        arr = np.asarray(codes)
        flat = [int(v) for v in arr.astype(np.uint64).ravel()]
        return np.asarray(self._native.decode(operand, flat), dtype=np.float64).reshape(arr.shape)

    def __repr__(self) -> str:
        t = self.types
        return (
            f"<mmac.Instruction {self.name} ({self.arch}): m{self.m}n{self.n}k{self.k}, "
            f"a={t['a']} b={t['b']} c={t['c']} d={t['d']}>"
        )

    def __reduce__(self):
        return (_instruction_of, (self._spec.text, self._spec.name, self.name))

    # ---------------------------------------------------------------- operands

    def _format(self, operand: str) -> dict:
        if operand in ("sa", "sb"):
            if self._scale_format is None:
                raise ValueError(f"`{self.name}` takes no scale factors")
            return self._scale_format
        if operand not in self._formats:
            raise ValueError(f"unknown operand {operand!r}: one of a, b, c, d, sa, sb")
        return self._formats[operand]

    def _codes(self, x, operand: str, key: str, ndim):
        return _dtypes.encodings(x, self._format(key), operand, self._native, key, ndim)

    def _matrix(self, x, operand: str, key: str):
        codes = self._codes(x, operand, key, 2)
        rows, cols = codes.shape
        return (np.ascontiguousarray(codes, dtype="<u8").tobytes(), rows, cols)

    def _check_scales(self, sa, sb):
        if self._scale_format is None:
            if sa is not None or sb is not None:
                raise ValueError(f"`{self.name}` takes no scale factors, but sa/sb were given")
        elif sa is None or sb is None:
            s = self.scale
            raise ValueError(
                f"`{self.name}` is block-scaled ({s['format']} per {s['block']} "
                "elements of k): give both sa and sb"
            )

    def _engine(self, engine: str) -> str:
        if engine == "auto" and not self._warned:
            reason = self._native.jit_error
            if reason is not None:
                self._warned = True
                warnings.warn(
                    f"{reason}; the reference interpreter computes `{self.name}`",
                    RuntimeWarning,
                    stacklevel=3,
                )
        return engine

    def _result(self, raw, operand: str, inputs):
        data, rows, cols = raw
        codes = np.frombuffer(data, dtype="<u8").reshape(rows, cols)
        out = _dtypes.from_encodings(codes, self._format(operand))
        tensors = [x for x in inputs if _dtypes.is_tensor(x)]
        if tensors:
            return _dtypes.numpy_to_tensor(out, like=tensors[0])
        return out

    def _run(self, A, B, C, sa, sb, whole_instruction, threads, engine, progress=None, meta=None):
        self._check_scales(sa, sb)
        raw = self._native.gemm(
            self._matrix(A, "A", "a"),
            self._matrix(B, "B", "b"),
            None if C is None else self._matrix(C, "C", "c"),
            None if sa is None else self._matrix(sa, "SA", "sa"),
            None if sb is None else self._matrix(sb, "SB", "sb"),
            whole_instruction,
            threads,
            self._engine(engine),
            progress,
            None if meta is None else _positions(meta),
        )
        return self._result(raw, "d", (A, B, C, sa, sb))

    @property
    def sparsity(self):
        """Structured sparsity of A as a dict, ``{"kept": 2, "group": 4, "pairs": False,
        "over": "selected"}`` for ``sparse a 2 of 4`` (``pairs``: adjacent pairs of
        elements kept, ``2 of 4 pairs``), or None for a dense instruction."""
        return self._native.sparsity

    # ---------------------------------------------------------------- entries

    def dot(self, c, a, b, sa=None, sb=None, *, meta=None, engine: str = "auto"):
        """One dot-product-add ``d = f(c, a[0..k], b[0..k])`` (``sa``, ``sb``: the block
        scale factors of a and b, k/block each). Values may be arrays of the operands'
        dtypes, raw encodings, or Python floats that are exact in the format. Returns a
        NumPy scalar of d's dtype (a 0-d tensor when an input is a tensor).

        A sparse instruction (:attr:`sparsity`) takes ``a`` as the row's stored elements
        and ``meta`` as their columns (increasing, in the pattern), ``b`` with all k."""
        c_code = self._codes(c, "c", "c", 0)
        a_codes = self._codes(a, "a", "a", 1)
        b_codes = self._codes(b, "b", "b", 1)
        self._check_scales(sa, sb)
        if self._scale_format is None:
            sa_codes = sb_codes = []
        else:
            sa_codes = [int(v) for v in self._codes(sa, "sa", "sa", 1)]
            sb_codes = [int(v) for v in self._codes(sb, "sb", "sb", 1)]
        positions = _row_positions(meta)
        d = self._native.dot(
            int(c_code),
            [int(v) for v in a_codes],
            [int(v) for v in b_codes],
            sa_codes,
            sb_codes,
            self._engine(engine),
            positions,
        )
        out = _dtypes.from_encodings(np.array([d], dtype=np.uint64), self._format("d"))
        tensors = [x for x in (c, a, b, sa, sb) if _dtypes.is_tensor(x)]
        if tensors:
            return _dtypes.numpy_to_tensor(out, like=tensors[0])[0]
        return out[0]

    def run(self, c, a, b, sa=None, sb=None, *, meta=None, trace: bool = False, pad: bool = False,
            engine: str = "auto") -> Run:
        """One dot-product-add as ``mmac run`` computes it, returned as a :class:`Run`:
        ``d`` (as :meth:`dot` returns it), its ``encoding`` and ``text`` (``HEX VALUE``)
        and, with ``trace=True``, ``stages``: every line of ``mmac run --trace`` as a
        :class:`Stage` (its ``text``, ``stage`` and ``key``); ``str(run)`` is what the
        CLI prints. With ``trace=True`` the reference interpreter computes, as the CLI's
        trace does (the engines agree bit for bit); ``engine`` applies without it.
        Operands are taken as :meth:`dot` takes them; ``pad=True`` fills missing a and b
        lanes with +0 and missing scale factors with 1.0, as ``mmac run --pad``. A sparse
        instruction takes a's stored elements and ``meta=`` their columns, as :meth:`dot`
        does, or (without ``meta``) a's whole row of k with the pattern's zeros, which is
        compressed as ``mmac run`` compresses it; its trace is the dense arithmetic's on
        the selected products, after a line that says where a's elements sit."""
        return _why.run(self, c, a, b, sa, sb, _row_positions(meta), trace, pad, engine)

    def mma(self, A, B, C, sa=None, sb=None, *, meta=None, engine: str = "auto"):
        """One whole instruction: A is m x k, B is k x n, C is m x n (``sa`` m x k/block,
        ``sb`` k/block x n for block-scaled instructions). Returns D, m x n, in d's dtype.

        A sparse instruction (:attr:`sparsity`, e.g. ``mma.sp``) takes A as its stored
        elements (m x k/2 for 2 of 4) with ``meta``, an unsigned integer array of the same
        shape giving the column of each; or A dense (m x k, at most 2 of every 4 elements
        nonzero), which is compressed. A row that breaks the pattern raises
        ``ValueError`` naming the row and the group."""
        return self._run(A, B, C, sa, sb, True, None, engine, meta=meta)

    # ---------------------------------------------------------------- warp fragments

    def layout(self, selector: int = 0, scale_selectors=(0, 0, 0, 0)) -> dict:
        """The register fragment layout of the instruction (the data ``mmac layout
        --json`` prints), from the layouts built into mmac (docs/layouts.md): for each
        operand ``"a"``, ``"b"``, ``"c"``, ``"d"`` (and ``"meta"`` for a sparse
        instruction, ``"sa"`` and ``"sb"`` for a block-scaled one, as ``selector`` and
        ``scale_selectors`` = (byte-id-a, thread-id-a, byte-id-b, thread-id-b) place them)
        a dict with ``fragment`` (the family's name), ``evidence`` (the ISA section and
        figure), ``rows`` and ``cols`` (its matrix), ``sets`` (independent matrices of the
        warp: 4 for ``mma.m8n8k4``'s quadpairs, else 1), ``width`` (bits of one element),
        ``container`` (bits it takes in its register), ``lanes`` (of the image),
        ``copies`` (lanes holding each element), ``elements`` and ``registers`` (per lane),
        ``words`` (32-bit words per lane in a register image: ``registers``, or twice
        that for 64-bit registers) and ``slots``: every (lane, element) held, lane-major,
        as a dict ``{"lane", "register", "element", "bits": (lo, hi), "row", "col",
        "set"}`` where ``element`` is the index in the PTX fragment (a0, a1, ...) and
        ``bits`` its place in the register. Raises ``ValueError`` naming the instruction
        when no layout is known for it, or for a selector out of range."""
        return self._native.layout(selector, tuple(scale_selectors))

    def warp_mma(
        self,
        a,
        b,
        c,
        meta=None,
        selector: int = 0,
        sa=None,
        sb=None,
        scale_selectors=(0, 0, 0, 0),
        *,
        engine: str = "auto",
    ) -> np.ndarray:
        """One whole instruction on register images, as a warp executes ``mma.sync``.

        ``a``, ``b`` and ``c`` are ``uint32`` NumPy arrays of shape ``(lanes, words)``
        (``lanes`` is 32 for a warp): row ``lane`` holds that lane's fragment registers
        in order (r0, r1, ...), each element in its register's bits as :meth:`layout`
        says (elements narrower than 32 bits fill a register from the low bits up: a0 in
        bits 0-15 of r0 for f16). A 64-bit register (f64) takes two consecutive words,
        its low 32 bits first, so an f64 fragment of one register per lane is
        ``(32, 2)``; ``words`` is ``layout()[op]["words"]``. A sparse instruction
        (``mma.sp``) also takes ``meta``, the metadata registers (PTX's operand e), and
        ``selector``, the sparsity selector (which lanes hold them); a block-scaled one
        ``sa`` and ``sb``, the scale-factor registers, and ``scale_selectors``
        (byte-id-a, thread-id-a, byte-id-b, thread-id-b). The registers are unpacked
        into the matrices they hold (a sparse A's stored elements at the columns the
        metadata give), the instruction runs on them exactly as :meth:`mma` does, and D
        is packed back: returns d's image, ``uint32`` of shape ``(lanes,
        layout()["d"]["words"])``. An operand that no thread holds (``wgmma``'s B, whose
        ``layout()["b"]["memory"]`` says it lies in shared memory) is given as its matrix
        of encodings instead, ``uint32`` of shape ``(rows, cols)`` (K x N for B), as a
        simulator reads it from its shared memory. Raises ``ValueError`` for an instruction without a
        known layout (naming it), for arrays of another dtype or shape, for metadata
        codes the instruction does not define and for a missing or extra operand."""
        lay = self._native.layout(selector, tuple(scale_selectors))
        images = []
        for op, x in (("a", a), ("b", b), ("c", c), ("meta", meta), ("sa", sa), ("sb", sb)):
            if x is None and op in ("meta", "sa", "sb"):
                images.append(None)
                continue
            if op not in lay:
                raise ValueError(f"`{self.name}` takes no {op} registers")
            if lay[op]["memory"] is not None:
                images.append(_memory_image(self.name, op, lay[op], x))
                continue
            shape = (lay[op]["lanes"], lay[op]["words"])
            if not isinstance(x, np.ndarray):
                raise ValueError(
                    f"{op}: a register image is a uint32 NumPy array of shape "
                    f"{shape}, not {type(x).__name__}"
                )
            if x.dtype != np.uint32:
                raise ValueError(
                    f"{op}: a register image is a uint32 array, not {x.dtype} "
                    "(view 32-bit registers of other types with .view(np.uint32))"
                )
            if x.shape != shape:
                raise ValueError(
                    f"{op}: the register image of `{self.name}` is (lanes, words) = "
                    f"{shape}, not {x.shape}"
                )
            images.append(np.ascontiguousarray(x, dtype="<u4").tobytes())
        raw = self._native.warp_mma(
            *images[:3],
            images[3],
            selector,
            images[4],
            images[5],
            tuple(scale_selectors),
            self._engine(engine),
        )
        d = lay["d"]
        return np.frombuffer(raw, dtype="<u4").astype(np.uint32).reshape(d["lanes"], d["words"])

    def gemm(
        self,
        A,
        B,
        C=None,
        sa=None,
        sb=None,
        *,
        round: bool = False,
        pad: bool = False,
        threads=None,
        engine: str = "auto",
        progress=None,
        meta=None,
    ):
        """A GEMM of M x K x N, multiples of the instruction's m, k and n, computed as
        ``mmac gemm`` does: D is tiled by m x n, and each tile walks K in k-sized steps in
        increasing order, each step's D the next step's C. ``C`` defaults to +0.
        ``threads``: worker threads (None: one per core). Returns D in d's dtype (a
        tensor when the inputs are tensors).

        For arrays as users hold them (instructions without scale factors):

        - ``round=True``: A, B and C hold float values (NumPy floats, float tensors,
          nested lists) that are rounded to nearest even into a's, b's and c's formats;
          values beyond a format's range become what its conversion gives (Inf, or NaN
          for formats without infinities; nothing saturates); a NaN, an infinity or a
          value beyond the range of a format with neither (FP6, FP4) is a ValueError.
        - ``pad=True``: M, K and N may be any size; zeros pad them to multiples (the edge
          tiles of a tiled kernel) and D is cropped back.
        - Leading batch dimensions broadcast as in ``numpy.matmul``, one GEMM per matrix;
          C may also be a scalar or a row of N values, broadcast over M and the batch.

        A sparse instruction takes A as :meth:`mma` does: its stored elements with
        ``meta`` (M x K/2 for 2 of 4, the column of each), or A dense, compressed.

        ``progress`` reports the tiles of D as they are finished (the GEMM runs with the
        GIL released; the calling thread takes it back about every 0.1 s to report):

        - ``None`` (the default): a tqdm bar when tqdm is installed and the GEMM is
          large (2^31 multiply-adds or more), else nothing;
        - ``True``: a tqdm bar (``ImportError`` when tqdm is not installed);
          ``False``: nothing;
        - a callable: called with the number of tiles finished since its last call (the
          counts sum to the number of m x n tiles of D, over every matrix of a batch).
          When it raises, it is not called again; the GEMM runs to its end and then the
          exception propagates.
        """
        plain = (
            not (round or pad)
            and np.ndim(A) <= 2
            and np.ndim(B) <= 2
            and (C is None or np.ndim(C) == 2)
        )
        if plain:
            M, K, N = _gemm_size(A, B)
            tiles = (M // self.m) * (N // self.n)
            with _progress.reporter(
                progress, total=tiles, work=M * N * K, desc=self.name, unit="tile"
            ) as report:
                return self._run(A, B, C, sa, sb, False, threads, engine, report, meta)
        if meta is not None:
            raise ValueError("meta= takes plain 2-D GEMMs (no round=, pad= or batch dimensions)")
        if sa is not None or sb is not None:
            raise ValueError(
                "round=, pad= and batch dimensions take instructions without scale factors"
            )
        return self._general_gemm(A, B, C, round, pad, threads, engine, progress)

    def _general_gemm(self, A, B, C, round, pad, threads, engine, progress):
        """:meth:`gemm` with rounding, padding, batches or a broadcast C."""
        tensors = [x for x in (A, B, C) if _dtypes.is_tensor(x)]
        a, b, c = (
            None if x is None else self._operand(x, op, round)
            for x, op in ((A, "a"), (B, "b"), (C, "c"))
        )
        for x, name in ((a, "A"), (b, "B")):
            if x.ndim < 2:
                raise ValueError(
                    f"{name} must be a 2-D matrix (or a batch of them), found shape {x.shape}"
                )
        (M, K), (K2, N) = a.shape[-2:], b.shape[-2:]
        if K != K2:
            raise ValueError(f"A is {M} x {K} but B is {K2} x {N}: K differs")
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        if c is not None:
            try:
                batch = np.broadcast_shapes(batch, c.shape[:-2] if c.ndim > 2 else ())
                c = np.broadcast_to(c, batch + (M, N))
            except ValueError:
                raise ValueError(
                    f"C of shape {c.shape} does not broadcast to D's {batch + (M, N)}"
                ) from None
        a = np.broadcast_to(a, batch + (M, K))
        b = np.broadcast_to(b, batch + (K, N))
        pm, pk, pn = ((-M) % self.m, (-K) % self.k, (-N) % self.n) if pad else (0, 0, 0)
        count = int(np.prod(batch, dtype=np.int64))
        tiles = count * ((M + pm) // self.m) * ((N + pn) // self.n)
        work = count * (M + pm) * (N + pn) * (K + pk)
        out = None
        with _progress.reporter(
            progress, total=tiles, work=work, desc=self.name, unit="tile"
        ) as report:
            for idx in np.ndindex(*batch):
                d = self._run(
                    _padded(a[idx], pm, pk),
                    _padded(b[idx], pk, pn),
                    None if c is None else _padded(c[idx], pm, pn),
                    None,
                    None,
                    False,
                    threads,
                    engine,
                    report,
                )[:M, :N]
                if out is None:
                    out = np.empty(batch + (M, N), dtype=d.dtype)
                out[idx] = d
        if out is None:  # an empty batch
            out = np.empty(batch + (M, N), dtype=_dtypes.from_encodings(
                np.zeros(0, dtype=np.uint64), self._format("d")).dtype)
        if tensors:
            return _dtypes.numpy_to_tensor(out, like=tensors[0])
        return out

    def _operand(self, x, op: str, round: bool) -> np.ndarray:
        """An operand as a NumPy array: its values rounded into ``op``'s format, or as it
        is (the same bits) without rounding."""
        python_numbers = not _dtypes.is_tensor(x) and not isinstance(x, (np.ndarray, np.generic))
        if _dtypes.is_tensor(x):
            x = _dtypes.tensor_to_numpy(x)
        x = np.asarray(x)
        if not round:
            # Python numbers stay values (encoded exactly), as an object array through
            # broadcasting and padding (NumPy would make them float64 or int64 arrays)
            return x.astype(object) if python_numbers and x.dtype.kind in "fiub" else x
        try:
            values = x.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"round=True takes float values for {op.upper()}, found dtype {x.dtype}"
            ) from None
        return _dtypes.round_to_format(values, self._format(op), op.upper())

    def report(self, A, B, C=None, sa=None, sb=None, *, D=None, meta=None, threads=None,
               engine: str = "auto"):
        """The error of D (computed by :meth:`gemm` unless given) against the exact result
        ``C + A*B``: max and mean absolute and relative error and the mean signed error
        (bias), as ``mmac gemm --report``. A sparse A is taken as :meth:`gemm` takes it
        (dense and pruned, or its stored elements with ``meta=``)."""
        self._check_scales(sa, sb)
        r = self._native.report(
            self._matrix(A, "A", "a"),
            self._matrix(B, "B", "b"),
            None if C is None else self._matrix(C, "C", "c"),
            None if sa is None else self._matrix(sa, "SA", "sa"),
            None if sb is None else self._matrix(sb, "SB", "sb"),
            None if D is None else self._matrix(D, "D", "d"),
            threads,
            self._engine(engine),
            None if meta is None else _positions(meta),
        )
        d = self._result(r.pop("d"), "d", (A, B, C, sa, sb))
        return ErrorReport(d=d, **r)


def _columns(meta, ndim: int, what: str) -> np.ndarray:
    """``meta=`` as an array of ``ndim`` dimensions: an unsigned integer array (NumPy's,
    ml_dtypes' ``uint2``/``uint4``, or a tensor), or Python integers (a list, nested for a matrix) that are not negative."""
    if _dtypes.is_tensor(meta):
        meta = meta.detach().cpu().numpy()
    arr = _dtypes.narrow_unsigned(np.asarray(meta))
    python_ints = not isinstance(meta, np.ndarray) and arr.dtype.kind == "i" and not (arr < 0).any()
    if arr.dtype.kind != "u" and not python_ints:
        raise ValueError(
            f"meta: the positions of A's stored elements are an unsigned integer array, not {arr.dtype}"
        )
    if arr.ndim != ndim:
        raise ValueError(f"meta must be {what}, found shape {arr.shape}")
    return arr


def _positions(meta):
    """A sparse A's positions as the native GEMM takes them: ``(bytes, rows, cols)`` of
    little-endian u64, from an unsigned integer matrix (:func:`_columns`)."""
    arr = _columns(meta, 2, "a 2-D matrix")
    rows, cols = arr.shape
    return (np.ascontiguousarray(arr, dtype="<u8").tobytes(), rows, cols)


def _row_positions(meta) -> list | None:
    """One row's positions (``meta=`` of :meth:`Instruction.dot` and
    :meth:`Instruction.run`) as ints, or None."""
    if meta is None:
        return None
    return [int(v) for v in _columns(meta, 1, "1-D (the columns of one row's stored elements)")]


def _gemm_size(A, B) -> tuple:
    """``(M, K, N)`` of matrices A and B, 0 for what is not a matrix's (the native shape
    check then names the problem)."""
    shape_a, shape_b = np.shape(A), np.shape(B)
    M, K = shape_a if len(shape_a) == 2 else (0, 0)
    N = shape_b[1] if len(shape_b) == 2 else 0
    return int(M), int(K), int(N)


def _padded(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """``x`` with ``rows`` rows and ``cols`` columns of zeros (+0 in every format) added."""
    if rows == 0 and cols == 0:
        return np.ascontiguousarray(x)
    out = np.zeros((x.shape[0] + rows, x.shape[1] + cols), dtype=x.dtype)
    out[: x.shape[0], : x.shape[1]] = x
    return out
