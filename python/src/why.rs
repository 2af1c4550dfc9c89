//! The "why" of an instruction's results, computed by the runtime the CLI calls and
//! handed to Python as plain values: the trace of one dot-product-add (`mmac run
//! --trace`), the minimal witness of a difference between two instructions with its
//! cause (`mmac diff`), and the accuracy of instructions over K (`mmac report`).

use crate::compute::{self, Engine};
use crate::spec::NativeInstruction;
use mmac_compiler::Checked;
use mmac_compiler::engine::Operands;
use mmac_compiler::format::{Decoded, Format};
use mmac_compiler::interp;
use mmac_runtime::accuracy::{self, Distribution, ReportOptions, Row};
use mmac_runtime::diff::{self, DiffOptions, Difference};
use mmac_runtime::inputs::hex;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// An encoding as the CLI writes a result after `d=`: `HEX VALUE`.
fn result_text(format: &Format, raw: u64) -> String {
    format!("{} {}", hex(format, raw), format.decode(raw).describe())
}

/// A trace's lines with each one's key and stage: `[(line, key, stage), ...]`. The keys
/// and stages are those `mmac diff` pairs and names lines by ([`diff::trace_stages`]);
/// the trace of a composed instruction is read step by step: a run's own lines (`  | `
/// prefixed) as the run's trace, named after its step (stage `part: alignment sum`, key
/// `part / p[ 0]`), the step's lines (`let part = ...`, `  part = ...`) as stage `step
/// part`, and the conversions of its inputs as stage `conversion`.
fn trace_rows(lines: &[String]) -> Vec<(String, String, String)> {
    let composed = lines.iter().any(|l| l.starts_with("let "));
    let plain = diff::trace_stages(lines);
    let mut out = Vec::with_capacity(lines.len());
    let mut step: Option<&str> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        if composed && line.starts_with(RUN_PREFIX) {
            let end = (i..lines.len())
                .find(|&j| !lines[j].starts_with(RUN_PREFIX))
                .unwrap_or(lines.len());
            let inner: Vec<String> = lines[i..end]
                .iter()
                .map(|l| l[RUN_PREFIX.len()..].to_string())
                .collect();
            let label = step.unwrap_or("run");
            for (outer, (_, key, stage)) in lines[i..end].iter().zip(trace_rows(&inner)) {
                out.push((
                    outer.clone(),
                    format!("{label} / {key}"),
                    format!("{label}: {stage}"),
                ));
            }
            i = end;
            continue;
        }
        let (key, stage) = match composed_line(line, step) {
            Some((key, stage, name)) => {
                step = name.or(step);
                (key, stage)
            }
            None if composed && line.starts_with("convert ") => {
                let key = line.split(':').next().unwrap_or(line).to_string();
                (key, "conversion".to_string())
            }
            None => plain[i].clone(),
        };
        out.push((line.clone(), key, stage));
        i += 1;
    }
    out
}

/// How the lines of a run nested in a composed instruction's trace begin.
const RUN_PREFIX: &str = "  | ";

/// A step line of a composed instruction's trace: `let NAME = ...` (which opens step
/// NAME) or `  NAME = VALUE` of the current step, as (key, stage, the step it opens).
fn composed_line<'a>(
    line: &'a str,
    step: Option<&str>,
) -> Option<(String, String, Option<&'a str>)> {
    if let Some(rest) = line.strip_prefix("let ") {
        let name = rest.split(" = ").next().unwrap_or(rest);
        return Some((format!("let {name}"), format!("step {name}"), Some(name)));
    }
    let name = step?;
    let value = line.strip_prefix("  ")?.strip_prefix(name)?;
    value
        .starts_with(" = ")
        .then(|| (name.to_string(), format!("step {name}"), None))
}

/// One dot-product-add by the reference interpreter with its trace (what `mmac run
/// --trace` prints, a sparse A's `positions` included): `d` (the encoding), `d_text`
/// (`HEX VALUE`, as after `d=`) and `rows`, each trace line with its key and stage.
pub fn trace<'py>(
    py: Python<'py>,
    checked: Checked,
    ops: &Operands,
    positions: &[u64],
) -> PyResult<Bound<'py, PyDict>> {
    let (d, lines) =
        interp::run_traced_record(checked, ops, positions).map_err(compute::eval_error)?;
    let out = PyDict::new(py);
    out.set_item("d", d)?;
    out.set_item(
        "d_text",
        result_text(&checked.instruction().arithmetic.d, d),
    )?;
    out.set_item("rows", trace_rows(&lines))?;
    Ok(out)
}

/// The witness's elements as raw encodings: `{"c": int, "a": [...], "b": [...], "sa":
/// [...], "sb": [...]}` (the scale lists empty without scale factors).
fn witness<'py>(py: Python<'py>, d: &Difference) -> PyResult<Bound<'py, PyDict>> {
    let w = &d.witness;
    let out = PyDict::new(py);
    out.set_item("c", w.c)?;
    out.set_item("a", w.a.clone())?;
    out.set_item("b", w.b.clone())?;
    out.set_item("sa", w.sa.clone())?;
    out.set_item("sb", w.sb.clone())?;
    Ok(out)
}

/// Products of the witness with neither factor zero (the CLI's `a witness with N
/// nonzero products`).
fn nonzero_products(left: &NativeInstruction, d: &Difference) -> usize {
    let ar = &left.inst().arithmetic;
    let zero = |f: &Format, raw| matches!(f.decode(raw), Decoded::Finite(v) if v.is_zero());
    let w = &d.witness;
    (0..w.a.len())
        .filter(|&k| !(zero(&ar.a, w.a[k]) || zero(&ar.b, w.b[k])))
        .count()
}

/// What [`diff::diff`] found about a difference, as `mmac diff --json` names it, plus
/// both traces with their stages and the CLI's side-by-side text.
fn difference<'py>(
    py: Python<'py>,
    left: &NativeInstruction,
    d: &Difference,
    out: &Bound<'py, PyDict>,
) -> PyResult<()> {
    let inst = left.inst();
    let ar = &inst.arithmetic;
    out.set_item("witness", witness(py, d)?)?;
    out.set_item("nonzero_products", nonzero_products(left, d))?;
    out.set_item("left", d.left)?;
    out.set_item("right", d.right)?;
    out.set_item("left_text", diff::shown(&ar.d, d.left))?;
    out.set_item("right_text", diff::shown(&ar.d, d.right))?;
    let (exact, exact_shown) = match &d.exact {
        Some(e) => (
            Some(diff::exact_decimal(e, false)),
            Some(diff::exact_shown(e)),
        ),
        None => (None, None),
    };
    out.set_item("exact", exact)?;
    out.set_item("exact_shown", exact_shown)?;
    out.set_item("stage", &d.stage)?;
    out.set_item("cause", &d.cause)?;
    out.set_item("run_arguments", d.witness.run_arguments(inst))?;
    out.set_item(
        "decimal_arguments",
        diff::decimal_arguments(inst, &d.witness),
    )?;
    out.set_item("left_trace", trace_rows(&d.left_trace))?;
    out.set_item("right_trace", trace_rows(&d.right_trace))?;
    out.set_item("divergence", d.divergence)?;
    out.set_item("side_by_side", diff::side_by_side(d))?;
    Ok(())
}

/// Compare two instructions as `mmac diff` does: search for an input on which they
/// differ (structured candidates, then `trials` random inputs from `seed`), shrink it to
/// a minimal witness and explain it. Returns `differ`, `tried`, `structured_tried`,
/// `random_tried`, and either the difference's fields or `proof` (why none exists, when
/// that is proven; else None). Instructions that take different operands raise
/// `ValueError` with the CLI's message.
#[pyfunction]
#[pyo3(name = "diff", signature = (left, right, trials, seed))]
pub fn diff_instructions<'py>(
    py: Python<'py>,
    left: PyRef<'py, NativeInstruction>,
    right: PyRef<'py, NativeInstruction>,
    trials: usize,
    seed: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let x = left.spec.spec.checked.get(left.index);
    let y = right.spec.spec.checked.get(right.index);
    if let Some(why) = diff::interface_difference(x.instruction(), y.instruction()) {
        return Err(PyValueError::new_err(format!(
            "`{}` and `{}` take different operands: {why} (diff compares instructions with \
             the same operand formats, k and scale factors)",
            x.name(),
            y.name()
        )));
    }
    let options = DiffOptions { trials, seed };
    let cmp = py
        .detach(|| diff::diff(x, y, &options))
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let out = PyDict::new(py);
    out.set_item("differ", cmp.difference.is_some())?;
    out.set_item("tried", cmp.tried())?;
    out.set_item("structured_tried", cmp.structured_tried)?;
    out.set_item("random_tried", cmp.random_tried)?;
    out.set_item("proof", cmp.proof.clone())?;
    if let Some(d) = &cmp.difference {
        difference(py, &left, d, &out)?;
    }
    Ok(out)
}

/// A row of [`accuracy::measure`] as a dict with the keys of `mmac report --json`'s rows
/// (the caller adds `label`, `arch` and `file`).
fn row<'py>(py: Python<'py>, r: &Row) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("instruction", &r.instruction)?;
    out.set_item("k", r.k)?;
    out.set_item("samples", r.samples)?;
    out.set_item("compared", r.compared)?;
    out.set_item("mean_abs_error", r.mean_abs_error)?;
    out.set_item("max_abs_error", r.max_abs_error)?;
    out.set_item("mean_rel_error", r.mean_rel_error)?;
    out.set_item("max_rel_error", r.max_rel_error)?;
    out.set_item("bias", r.bias)?;
    out.set_item("bias_ci95", PyList::new(py, r.bias_ci95)?)?;
    out.set_item("correctly_rounded", r.correctly_rounded)?;
    out.set_item("faithful", r.faithful)?;
    out.set_item("clamped_inputs", r.clamped_inputs)?;
    out.set_item("caveat", r.caveat())?;
    Ok(out)
}

/// The accuracy of instructions on dot products of each length in `ks`, accumulated
/// as a GEMM does, as `mmac report` measures it: `samples` inputs per instruction and K
/// drawn from `dist` (`normal`, `uniform` on `range` or [0, 1), `lognormal`, `signed`)
/// with `seed`, rounded to nearest into the input formats. Returns `distribution` (as the
/// report describes it) and `rows`, one dict per instruction and K, in that order. `progress` (see [`compute::with_progress`]) is called with the
/// number of samples finished. Bad options raise `ValueError` with the CLI's messages.
#[pyfunction]
#[pyo3(name = "accuracy", signature = (instructions, dist, range, ks, samples, seed, threads, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn accuracy_report<'py>(
    py: Python<'py>,
    instructions: Vec<PyRef<'py, NativeInstruction>>,
    dist: &str,
    range: Option<(f64, f64)>,
    ks: Vec<usize>,
    samples: usize,
    seed: u64,
    threads: Option<usize>,
    progress: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let usage = PyValueError::new_err;
    if let Some((lo, hi)) = range
        && !(lo < hi && lo.is_finite() && hi.is_finite())
    {
        return Err(usage(format!(
            "range ({lo}, {hi}): expected (LO, HI) with finite LO < HI"
        )));
    }
    let distribution =
        Distribution::parse(dist, range).map_err(|e| usage(e.replace("--range", "range=")))?;
    if ks.is_empty() {
        return Err(usage("k needs at least one length".to_string()));
    }
    let options = ReportOptions {
        distribution,
        ks,
        samples,
        seed,
    };
    accuracy::check_sizes(&options).map_err(usage)?;
    for ins in &instructions {
        let inst = ins.inst();
        accuracy::reportable(inst).map_err(usage)?;
        if let Some(kt) = options.ks.iter().find(|&&kt| kt == 0 || kt % inst.k() != 0) {
            return Err(usage(format!(
                "k {kt} is not a positive multiple of `{}`'s k = {}",
                inst.name,
                inst.k()
            )));
        }
    }
    let engines = instructions
        .iter()
        .map(|ins| compute::engine(&ins.spec, ins.index, Engine::Auto))
        .collect::<PyResult<Vec<_>>>()?;
    let pool = compute::pool(threads)?;
    let rows = compute::with_progress(py, progress.as_ref(), |count| {
        let run = || -> PyResult<Vec<Row>> {
            let mut rows = vec![];
            for engine in &engines {
                let measured = accuracy::measure(engine, &options, count);
                rows.extend(measured.map_err(PyRuntimeError::new_err)?);
            }
            Ok(rows)
        };
        match pool {
            Some(p) => p.install(run),
            None => run(),
        }
    })?;
    let out = PyDict::new(py);
    out.set_item("distribution", distribution.describe())?;
    let rows: Vec<_> = rows.iter().map(|r| row(py, r)).collect::<PyResult<_>>()?;
    out.set_item("rows", rows)?;
    Ok(out)
}
