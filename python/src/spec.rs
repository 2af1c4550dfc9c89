//! Specs and instructions as Python objects: `load` and `loads` (a spec that does not
//! check raises `SpecError` with the rendered diagnostics), lookup by name (a `KeyError`
//! with a did-you-mean), each instruction's shape, formats and scale, and its entries:
//! one dot product (and its trace), a whole instruction, a GEMM, an error report, exact
//! encoding of Python floats. Compiled kernels are kept per instruction for the spec's
//! lifetime.

use crate::SpecError;
use crate::compute::{self, RawMatrix, unfit_encoding};
use crate::formats;
use crate::why;
use mmac_compiler::diagnostic::closest;
use mmac_compiler::engine::{Choice, Engine, Operands, Prepared};
use mmac_compiler::format::Format;
use mmac_compiler::ir::Instruction;
use mmac_runtime::fragments::{self, Layout, LayoutError};
use mmac_runtime::gemm::{self, Problem};
use mmac_runtime::specs::LoadedSpec;
use pyo3::exceptions::{PyFileNotFoundError, PyKeyError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// A checked spec, its source text (a spec travels to Dask workers as its text) and
/// what the engine facade prepared for each instruction (its JIT kernel, or why the
/// interpreter runs it), on first use.
pub struct Loaded {
    pub spec: LoadedSpec,
    pub text: String,
    prepared: Vec<OnceLock<Prepared>>,
}

impl Loaded {
    fn new(spec: LoadedSpec, text: String) -> Loaded {
        let prepared = (0..spec.checked.len()).map(|_| OnceLock::new()).collect();
        Loaded {
            spec,
            text,
            prepared,
        }
    }

    /// The IR of instruction `index`.
    pub fn instruction(&self, index: usize) -> &Instruction {
        self.spec.checked.get(index).instruction()
    }

    /// The instruction's JIT kernel, compiled once (or why the JIT refuses it).
    pub fn prepared(&self, index: usize) -> &Prepared {
        self.prepared[index]
            .get_or_init(|| Engine::prepare(self.spec.checked.get(index), Choice::OPTIMISED))
    }
}

fn compile(name: &str, text: String) -> PyResult<NativeSpec> {
    let validated = mmac_compiler::compile(name, &text)
        .map_err(|d| SpecError::new_err(d.render(false).trim_end().to_string()))?;
    let spec = LoadedSpec {
        path: PathBuf::from(name),
        checked: validated,
    };
    Ok(NativeSpec {
        inner: Arc::new(Loaded::new(spec, text)),
    })
}

/// Read, parse and check a spec file.
#[pyfunction]
pub fn load(path: PathBuf) -> PyResult<NativeSpec> {
    let text = std::fs::read_to_string(&path).map_err(|e| {
        let message = format!("cannot read {}: {e}", path.display());
        if e.kind() == std::io::ErrorKind::NotFound {
            PyFileNotFoundError::new_err(message)
        } else {
            PyOSError::new_err(message)
        }
    })?;
    compile(&path.display().to_string(), text)
}

/// Parse and check spec text; `name` names it in diagnostics.
#[pyfunction]
pub fn loads(text: String, name: &str) -> PyResult<NativeSpec> {
    compile(name, text)
}

/// A checked spec.
#[pyclass(frozen, module = "mmac._native")]
pub struct NativeSpec {
    inner: Arc<Loaded>,
}

#[pymethods]
impl NativeSpec {
    /// The file name (or the name given to `loads`).
    #[getter]
    fn name(&self) -> String {
        self.inner.spec.path.display().to_string()
    }
    #[getter]
    fn text(&self) -> &str {
        &self.inner.text
    }
    #[getter]
    fn arch(&self) -> &str {
        &self.inner.spec.spec().arch
    }
    #[getter]
    fn title(&self) -> Option<&str> {
        self.inner.spec.spec().title.as_deref()
    }
    /// Every instruction's name, in the order of the file.
    fn instructions(&self) -> Vec<String> {
        let insts = &self.inner.spec.spec().instructions;
        insts.iter().map(|i| i.name.clone()).collect()
    }
    /// An instruction by name; a `KeyError` suggests the closest name.
    fn instruction(&self, name: &str) -> PyResult<NativeInstruction> {
        let spec = &self.inner.spec;
        let Some(index) = spec.checked.position(name) else {
            let file = spec.path.display();
            let names = spec.spec().instructions.iter().map(|i| i.name.as_str());
            let help = match closest(name, names) {
                Some(near) => format!("did you mean `{near}`?"),
                None => "Spec.instructions() lists its instructions".to_string(),
            };
            return Err(PyKeyError::new_err(format!(
                "`{file}` declares no instruction `{name}`; {help}"
            )));
        };
        Ok(NativeInstruction {
            spec: self.inner.clone(),
            index,
        })
    }
}

/// A layout error as Python sees it: the instruction failing on the matrices is a
/// `RuntimeError`, everything else (no layout, register images of the wrong size, a
/// layout file that does not validate) a `ValueError`.
/// The selector operands of a warp-level MMA from Python's arguments.
fn selectors(
    sparsity: usize,
    (ba, ta, bb, tb): (usize, usize, usize, usize),
) -> fragments::Selectors {
    fragments::Selectors {
        sparsity,
        byte_id_a: ba,
        thread_id_a: ta,
        byte_id_b: bb,
        thread_id_b: tb,
    }
}

fn layout_error(e: LayoutError) -> PyErr {
    match e {
        LayoutError::Eval(_) => PyRuntimeError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// Little-endian `u32` words of `bytes` (`operand` names it in errors).
fn words(bytes: &[u8], operand: &str) -> PyResult<Vec<u32>> {
    if !bytes.len().is_multiple_of(4) {
        return Err(PyValueError::new_err(format!(
            "{operand}: {} bytes are not whole 32-bit words",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes(w.try_into().unwrap_or_default()))
        .collect())
}

/// One instruction of a checked spec.
#[pyclass(frozen, module = "mmac._native")]
pub struct NativeInstruction {
    pub(crate) spec: Arc<Loaded>,
    pub(crate) index: usize,
}

impl NativeInstruction {
    pub(crate) fn inst(&self) -> &Instruction {
        self.spec.instruction(self.index)
    }

    /// Positions given to a sparse instruction, none to a dense one (`meta=`).
    fn check_positions(&self, positions: Option<&[u64]>) -> PyResult<()> {
        let inst = self.inst();
        match (&inst.sparsity, positions) {
            (Some(s), None) => Err(PyValueError::new_err(format!(
                "`{}` is sparse ({} of every {}): give meta=, the columns of a's {} stored elements",
                inst.name,
                s.kept,
                s.group,
                inst.stored()
            ))),
            (None, Some(_)) => Err(PyValueError::new_err(format!(
                "`{}` is dense: it takes no meta=",
                inst.name
            ))),
            _ => Ok(()),
        }
    }

    /// Are the operands of one dot-product-add k elements (and k/block scale factors)
    /// each, every encoding within its format's storage bits?
    fn check_dot_operands(
        &self,
        c: u64,
        a: &[u64],
        b: &[u64],
        sa: &[u64],
        sb: &[u64],
    ) -> PyResult<()> {
        let inst = self.inst();
        let (ka, kb, s) = (inst.stored(), inst.columns(), inst.scale_count());
        for (operand, values, want) in [("a", a, ka), ("b", b, kb), ("sa", sa, s), ("sb", sb, s)] {
            if values.len() != want {
                let what = if operand.starts_with('s') {
                    "scale factors"
                } else {
                    "elements"
                };
                return Err(PyValueError::new_err(format!(
                    "{operand} has {} {what}, but `{}` takes {want}",
                    values.len(),
                    inst.name
                )));
            }
            if values.is_empty() {
                continue;
            }
            let f = self.format(operand)?;
            if let Some(i) = values.iter().position(|v| v & !f.storage_mask() != 0) {
                return Err(unfit_encoding(operand, &format!("[{i}]"), values[i], f));
            }
        }
        let f = &inst.arithmetic.c;
        if c & !f.storage_mask() != 0 {
            return Err(unfit_encoding("c", "", c, f));
        }
        Ok(())
    }

    /// The format of an operand: `a`, `b`, `c`, `d`, or `sa`/`sb` (the scale format).
    fn format(&self, operand: &str) -> PyResult<&Format> {
        let a = &self.inst().arithmetic;
        match operand {
            "a" => Ok(&a.a),
            "b" => Ok(&a.b),
            "c" => Ok(&a.c),
            "d" => Ok(&a.d),
            "sa" | "sb" => a.scale.as_ref().map(|s| &s.format).ok_or_else(|| {
                PyValueError::new_err(format!("`{}` takes no scale factors", self.inst().name))
            }),
            _ => Err(PyValueError::new_err(format!(
                "unknown operand `{operand}`: one of a, b, c, d, sa, sb"
            ))),
        }
    }

    /// The fragment layout of this instruction from the built-in layout data, or a
    /// `ValueError` naming the instruction when none is known.
    fn warp_layout(&self) -> PyResult<Layout> {
        let library = fragments::Library::builtin().map_err(layout_error)?;
        library
            .find_for(&self.spec.spec.spec().arch, self.inst())
            .map_err(layout_error)
    }

    /// The operands of a GEMM as matrices of checked encodings; a missing C is +0.
    fn problem(
        &self,
        a: RawMatrix,
        b: RawMatrix,
        c: Option<RawMatrix>,
        sa: Option<RawMatrix>,
        sb: Option<RawMatrix>,
        meta: Option<RawMatrix>,
    ) -> PyResult<Problem> {
        let inst = self.inst();
        let ar = &inst.arithmetic;
        let a = a.matrix(&ar.a, "A")?;
        let b = b.matrix(&ar.b, "B")?;
        let c = c.map(|c| c.matrix(&ar.c, "C")).transpose()?;
        let (sa, sb) = match (&ar.scale, sa, sb) {
            (_, None, None) => (None, None),
            (Some(s), Some(sa), Some(sb)) => (
                Some(sa.matrix(&s.format, "SA")?),
                Some(sb.matrix(&s.format, "SB")?),
            ),
            (None, _, _) => {
                return Err(PyValueError::new_err(format!(
                    "`{}` takes no scale factors, but sa/sb were given",
                    inst.name
                )));
            }
            (Some(s), _, _) => {
                return Err(PyValueError::new_err(format!(
                    "`{}` is block-scaled ({} per {} elements of k): give both sa and sb",
                    inst.name, s.format.name, s.block
                )));
            }
        };
        let positions = Format::int("u64", 64, false);
        let meta = meta.map(|m| m.matrix(&positions, "meta")).transpose()?;
        let mut p = Problem {
            a,
            b,
            c,
            sa,
            sb,
            meta,
        };
        gemm::compress_sparse(inst, &mut p).map_err(|e| PyValueError::new_err(e.message))?;
        Ok(p)
    }
}

#[pymethods]
impl NativeInstruction {
    #[getter]
    fn name(&self) -> &str {
        &self.inst().name
    }
    #[getter]
    fn arch(&self) -> &str {
        &self.spec.spec.spec().arch
    }
    #[getter]
    fn m(&self) -> u32 {
        self.inst().m
    }
    #[getter]
    fn n(&self) -> u32 {
        self.inst().n
    }
    /// K: columns of A and rows of B.
    #[getter]
    fn k(&self) -> u32 {
        self.inst().columns() as u32
    }
    /// Structured sparsity of A: `{"kept": 2, "group": 4, "pairs": False, "over":
    /// "selected"}` (`sparse a 2 of 4`), or None for a dense instruction.
    #[getter]
    fn sparsity<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(s) = self.inst().sparsity else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("kept", s.kept)?;
        d.set_item("group", s.group)?;
        d.set_item("pairs", s.pairs)?;
        d.set_item("over", s.walk.keyword())?;
        Ok(Some(d))
    }
    /// The pipeline the instruction uses, as its `uses` line names it.
    #[getter]
    fn pipeline(&self) -> &str {
        &self.inst().provenance.pipeline
    }
    /// The pipeline's kind (`mmac list`'s algorithm column).
    #[getter]
    fn algorithm(&self) -> &'static str {
        self.inst().arithmetic.pipeline.algorithm()
    }
    /// Scale factors: `(format description, block)`, the block in columns of K (a
    /// sparse instruction's counts A's dense columns: twice its stored elements for 2:4),
    /// or None.
    #[getter]
    fn scale<'py>(&self, py: Python<'py>) -> PyResult<Option<(Bound<'py, PyDict>, u32)>> {
        let inst = self.inst();
        match (&inst.arithmetic.scale, inst.scale_block()) {
            (Some(s), Some(block)) => Ok(Some((formats::describe(py, &s.format)?, block))),
            _ => Ok(None),
        }
    }
    /// The description of an operand's format (see `formats::describe`).
    fn format_of<'py>(&self, py: Python<'py>, operand: &str) -> PyResult<Bound<'py, PyDict>> {
        formats::describe(py, self.format(operand)?)
    }
    /// Why the JIT refuses this instruction (then the interpreter computes it), or None.
    #[getter]
    fn jit_error(&self, py: Python<'_>) -> Option<String> {
        let spec = &self.spec;
        let index = self.index;
        py.detach(|| spec.prepared(index).fallback().map(str::to_string))
    }

    /// Exact encodings of Python floats in an operand's format, and None; or, when a
    /// value is not held exactly by the format, the codes before it and its position and
    /// why.
    #[allow(clippy::type_complexity)]
    fn encode(
        &self,
        operand: &str,
        values: Vec<f64>,
    ) -> PyResult<(Vec<u64>, Option<(usize, String)>)> {
        let f = self.format(operand)?;
        let mut codes = Vec::with_capacity(values.len());
        for (i, &x) in values.iter().enumerate() {
            match formats::encode_exact(f, x) {
                Ok(c) => codes.push(c),
                Err(why) => return Ok((codes, Some((i, why)))),
            }
        }
        Ok((codes, None))
    }

    /// The values of encodings of an operand's format, as floats.
    fn decode(&self, operand: &str, codes: Vec<u64>) -> PyResult<Vec<f64>> {
        let f = self.format(operand)?;
        Ok(codes.iter().map(|&c| formats::decode_lossy(f, c)).collect())
    }

    /// An encoding of an operand's format as the CLI describes its value (`1`, `-0`,
    /// `NaN`, `1.000000238418579`).
    fn describe(&self, operand: &str, code: u64) -> PyResult<String> {
        let f = self.format(operand)?;
        if code & !f.storage_mask() != 0 {
            return Err(unfit_encoding(operand, "", code, f));
        }
        Ok(f.decode(code).describe())
    }

    /// One dot-product-add on encodings; `positions`: a sparse instruction's columns of
    /// a's stored elements (required for one, refused for a dense one).
    #[pyo3(signature = (c, a, b, sa, sb, engine, positions=None))]
    #[allow(clippy::too_many_arguments)]
    fn dot(
        &self,
        c: u64,
        a: Vec<u64>,
        b: Vec<u64>,
        sa: Vec<u64>,
        sb: Vec<u64>,
        engine: &str,
        positions: Option<Vec<u64>>,
    ) -> PyResult<u64> {
        let engine = compute::Engine::parse(engine)?;
        self.check_positions(positions.as_deref())?;
        self.check_dot_operands(c, &a, &b, &sa, &sb)?;
        let positions = positions.unwrap_or_default();
        compute::dot(
            &self.spec,
            self.index,
            engine,
            c,
            (&a, &b, &positions),
            &sa,
            &sb,
        )
    }

    /// A sparse instruction's dense row of a (k elements, the pattern's zeros included)
    /// compressed to `(stored, positions)`: its nonzero elements and their columns, a
    /// group with fewer filled from its lowest free columns, as `mmac run` compresses a row
    /// given without `--meta`.
    fn compress_row(&self, row: Vec<u64>) -> PyResult<(Vec<u64>, Vec<u64>)> {
        let names = mmac_compiler::sparse::RowNames {
            row: "a",
            positions: "meta=",
            pad: "pad=True",
        };
        mmac_compiler::sparse::compress_row(self.inst(), &row, &names)
            .map_err(PyValueError::new_err)
    }

    /// One dot-product-add on encodings by the reference interpreter, with the trace of
    /// every stage as `mmac run --trace` prints it (see [`why::trace`]); a sparse
    /// instruction takes its stored elements' `positions`, as `dot` does.
    #[pyo3(signature = (c, a, b, sa, sb, positions=None))]
    #[allow(clippy::too_many_arguments)]
    fn trace<'py>(
        &self,
        py: Python<'py>,
        c: u64,
        a: Vec<u64>,
        b: Vec<u64>,
        sa: Vec<u64>,
        sb: Vec<u64>,
        positions: Option<Vec<u64>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.check_positions(positions.as_deref())?;
        self.check_dot_operands(c, &a, &b, &sa, &sb)?;
        let ops = Operands {
            c,
            a: &a,
            b: &b,
            sa: &sa,
            sb: &sb,
        };
        why::trace(
            py,
            self.spec.spec.checked.get(self.index),
            &ops,
            positions.as_deref().unwrap_or_default(),
        )
    }

    /// A GEMM (`whole_instruction`: exactly one instruction's shape) on matrices of
    /// encodings `(bytes of little-endian u64, rows, columns)`; returns D the same way.
    /// `progress`: a callable given the number of tiles finished (see
    /// [`compute::with_progress`]), or None.
    /// `meta`: a sparse A's positions (the shape of A's stored elements), or None.
    #[pyo3(signature = (a, b, c, sa, sb, whole_instruction, threads, engine, progress=None, meta=None))]
    #[allow(clippy::too_many_arguments)]
    fn gemm<'py>(
        &self,
        py: Python<'py>,
        a: RawMatrix,
        b: RawMatrix,
        c: Option<RawMatrix>,
        sa: Option<RawMatrix>,
        sb: Option<RawMatrix>,
        whole_instruction: bool,
        threads: Option<usize>,
        engine: &str,
        progress: Option<Bound<'py, PyAny>>,
        meta: Option<RawMatrix>,
    ) -> PyResult<(Bound<'py, PyBytes>, usize, usize)> {
        let engine = compute::Engine::parse(engine)?;
        let problem = self.problem(a, b, c, sa, sb, meta)?;
        let d = compute::gemm(
            py,
            &self.spec,
            self.index,
            &problem,
            whole_instruction,
            threads,
            engine,
            progress.as_ref(),
        )?;
        Ok((compute::to_bytes(py, &d.data), d.rows, d.cols))
    }

    /// The error of D against the exact result `C + A*B`; D is computed when not given.
    /// Returns the report's fields and its table.
    #[pyo3(signature = (a, b, c, sa, sb, d, threads, engine, meta=None))]
    #[allow(clippy::too_many_arguments)]
    fn report<'py>(
        &self,
        py: Python<'py>,
        a: RawMatrix,
        b: RawMatrix,
        c: Option<RawMatrix>,
        sa: Option<RawMatrix>,
        sb: Option<RawMatrix>,
        d: Option<RawMatrix>,
        threads: Option<usize>,
        engine: &str,
        meta: Option<RawMatrix>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let engine = compute::Engine::parse(engine)?;
        let problem = self.problem(a, b, c, sa, sb, meta)?;
        let inst = self.inst();
        let d = match d {
            Some(d) => {
                let d = d.matrix(&inst.arithmetic.d, "D")?;
                let (m, n) = (problem.a.rows, problem.b.cols);
                if (d.rows, d.cols) != (m, n) {
                    return Err(PyValueError::new_err(format!(
                        "D is {} x {} but A x B is {m} x {n}",
                        d.rows, d.cols
                    )));
                }
                gemm::check_shapes(inst, &problem, false)
                    .map_err(|e| PyValueError::new_err(e.message))?;
                d
            }
            None => compute::gemm(
                py, &self.spec, self.index, &problem, false, threads, engine, None,
            )?,
        };
        let r = compute::error_report(py, &self.spec, self.index, &problem, &d, threads)?;
        let out = PyDict::new(py);
        out.set_item("compared", r.compared)?;
        out.set_item("non_finite", r.non_finite)?;
        out.set_item("max_abs", r.max_abs)?;
        out.set_item("mean_abs", r.mean_abs)?;
        out.set_item("max_rel", r.max_rel)?;
        out.set_item("mean_rel", r.mean_rel)?;
        out.set_item("mean_signed", r.mean_signed)?;
        out.set_item("table", r.table())?;
        out.set_item("d", (compute::to_bytes(py, &d.data), d.rows, d.cols))?;
        Ok(out)
    }

    /// The fragment layout: for each operand `a`, `b`, `c`, `d` (and `meta`, `sa`, `sb`
    /// where the instruction has them, for the given selectors) a dict with `fragment`
    /// (the family's name), `evidence`, `rows`, `cols`, `sets`, `width` (bits of an
    /// element), `container` (bits it takes in its register), `lanes`, `copies`,
    /// `elements` (per lane that holds any), `registers` (per lane), `words` (32-bit
    /// words per lane in a register image) and `slots`: every (lane, element) as `mmac
    /// layout --json` prints it, lane-major, `{"lane", "register", "element", "bits":
    /// (lo, hi), "row", "col", "set"}`. A `ValueError` names an instruction without a
    /// known layout, or a selector out of range.
    #[pyo3(signature = (selector = 0, scale_selectors = (0, 0, 0, 0)))]
    fn layout<'py>(
        &self,
        py: Python<'py>,
        selector: usize,
        scale_selectors: (usize, usize, usize, usize),
    ) -> PyResult<Bound<'py, PyDict>> {
        let layout = self.warp_layout()?;
        let extras = layout
            .extras(&selectors(selector, scale_selectors))
            .map_err(layout_error)?;
        let out = PyDict::new(py);
        let all = layout
            .operands()
            .into_iter()
            .chain(extras.iter().map(|(n, f)| (*n, f)));
        for (operand, f) in all {
            let d = PyDict::new(py);
            d.set_item("fragment", &f.name)?;
            d.set_item("evidence", &f.evidence)?;
            d.set_item("rows", f.rows)?;
            d.set_item("cols", f.cols)?;
            d.set_item("sets", f.sets)?;
            d.set_item("width", f.width)?;
            d.set_item("container", f.container)?;
            d.set_item("lanes", f.lanes)?;
            d.set_item("copies", f.copies)?;
            d.set_item("elements", f.elements)?;
            d.set_item("registers", f.registers)?;
            d.set_item("words", f.words())?;
            d.set_item("memory", f.memory.as_deref())?;
            let slots = PyList::empty(py);
            for s in &f.slots {
                let e = PyDict::new(py);
                e.set_item("lane", s.lane)?;
                e.set_item("register", s.register)?;
                e.set_item("element", s.element)?;
                e.set_item("bits", s.bits)?;
                e.set_item("row", s.row)?;
                e.set_item("col", s.col)?;
                e.set_item("set", s.set)?;
                slots.append(e)?;
            }
            d.set_item("slots", slots)?;
            out.set_item(operand, d)?;
        }
        Ok(out)
    }

    /// The whole instruction on register images, as a warp runs `mma.sync`: `a`, `b`,
    /// `c` (and `meta`, `sa`, `sb` where the instruction has them) are lane-major
    /// little-endian `u32` words (lanes x the fragment's words, see `layout`); returns
    /// d's image the same way.
    #[pyo3(signature = (a, b, c, meta, selector, sa, sb, scale_selectors, engine))]
    #[allow(clippy::too_many_arguments)]
    fn warp_mma<'py>(
        &self,
        py: Python<'py>,
        a: &[u8],
        b: &[u8],
        c: &[u8],
        meta: Option<&[u8]>,
        selector: usize,
        sa: Option<&[u8]>,
        sb: Option<&[u8]>,
        scale_selectors: (usize, usize, usize, usize),
        engine: &str,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let choice = compute::Engine::parse(engine)?;
        let layout = self.warp_layout()?;
        let (a, b, c) = (words(a, "a")?, words(b, "b")?, words(c, "c")?);
        let optional = |x: Option<&[u8]>, what| x.map(|x| words(x, what)).transpose();
        let (meta, sa, sb) = (
            optional(meta, "meta")?,
            optional(sa, "sa")?,
            optional(sb, "sb")?,
        );
        let sel = selectors(selector, scale_selectors);
        let spec = &self.spec;
        let index = self.index;
        let d = py.detach(|| -> PyResult<Vec<u32>> {
            let engine = compute::engine(spec, index, choice)?;
            let inputs = fragments::WarpInputs {
                a: &a,
                b: &b,
                c: &c,
                meta: meta.as_deref(),
                sa: sa.as_deref(),
                sb: sb.as_deref(),
            };
            fragments::warp_mma(&engine, &layout, &inputs, &sel).map_err(layout_error)
        })?;
        let bytes: Vec<u8> = d.iter().flat_map(|w| w.to_le_bytes()).collect();
        Ok(PyBytes::new(py, &bytes))
    }
}
