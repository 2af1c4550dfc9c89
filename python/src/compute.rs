//! Computing with the GIL released: matrices of encodings from Python `bytes`, the engine
//! (the instruction's JIT kernel, or the reference interpreter), the GEMM of
//! `mmac_runtime::gemm` (the order `mmac gemm` uses) on rayon's pool as the CLI runs it,
//! exact error reports, progress reported to a Python callable while the GIL is released
//! ([`with_progress`]), and a count of computations running at once (for the test that
//! two Python threads compute in parallel).

use crate::spec::Loaded;
use mmac_compiler::engine::{self as facade, EvalError, Operands};
use mmac_compiler::format::Format;
use mmac_runtime::gemm::{self, ErrorReport, Problem};
use mmac_runtime::matrix::Matrix;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rayon::ThreadPool;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// Which engine computes: `Auto` is the JIT, or the interpreter for an instruction the
/// JIT refuses; `Jit` insists on the JIT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Auto,
    Jit,
    Interp,
}

impl Engine {
    pub fn parse(name: &str) -> PyResult<Engine> {
        match name {
            "auto" => Ok(Engine::Auto),
            "jit" => Ok(Engine::Jit),
            "interp" => Ok(Engine::Interp),
            _ => Err(PyValueError::new_err(format!(
                "engine must be 'auto', 'jit' or 'interp', not {name:?}"
            ))),
        }
    }
}

/// The error for an encoding with bits above its format's storage width (`at`: where,
/// as `[i]` or `[i, j]`).
pub fn unfit_encoding(operand: &str, at: &str, value: u64, format: &Format) -> PyErr {
    PyValueError::new_err(format!(
        "{operand}: element {at} = {value:#x} does not fit `{}` ({} bits)",
        format.name,
        format.storage_bits()
    ))
}

/// A matrix of encodings as the Python side passes it: little-endian u64 `bytes`, rows,
/// columns.
#[derive(FromPyObject)]
pub struct RawMatrix<'py>(Bound<'py, PyBytes>, usize, usize);

impl RawMatrix<'_> {
    /// The matrix, every encoding checked against `format` (`operand` names it in errors).
    pub fn matrix(&self, format: &Format, operand: &str) -> PyResult<Matrix> {
        let (bytes, rows, cols) = (self.0.as_bytes(), self.1, self.2);
        if rows.checked_mul(cols).and_then(|n| n.checked_mul(8)) != Some(bytes.len()) {
            return Err(PyValueError::new_err(format!(
                "{operand}: {} bytes do not hold {rows} x {cols} encodings of 8 bytes",
                bytes.len()
            )));
        }
        let data = bytes
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
            .collect();
        let m = Matrix { rows, cols, data };
        match m.first_unfit(format) {
            Some((r, c, v)) => Err(unfit_encoding(operand, &format!("[{r}, {c}]"), v, format)),
            None => Ok(m),
        }
    }
}

/// Encodings as little-endian u64 `bytes`.
pub fn to_bytes<'py>(py: Python<'py>, data: &[u64]) -> Bound<'py, PyBytes> {
    PyBytes::new(
        py,
        &data
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
}

static ACTIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// A computation running without the GIL, counted while it lives.
struct Active;

impl Active {
    fn enter() -> Active {
        let now = ACTIVE.fetch_add(1, Ordering::SeqCst) + 1;
        PEAK.fetch_max(now, Ordering::SeqCst);
        Active
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The most GEMMs and reports that have run at the same time (each counted while it
/// runs on its worker pool) since the last reset.
#[pyfunction]
pub fn concurrency_peak() -> usize {
    PEAK.load(Ordering::SeqCst)
}

/// Reset [`concurrency_peak`] to the number running now.
#[pyfunction]
pub fn reset_concurrency_peak() {
    PEAK.store(ACTIVE.load(Ordering::SeqCst), Ordering::SeqCst);
}

/// The number of threads a computation uses when `threads` is None: rayon's global
/// pool, one per core, as `mmac gemm` without `--threads`.
#[pyfunction]
pub fn default_threads() -> usize {
    rayon::current_num_threads()
}

/// The pool for `threads` workers, or None for rayon's global pool. Each Python thread
/// has its own pools (built once per count and thread): two threads that each ask for one
/// worker get one each, where a shared pool would run their calls one after the other.
pub fn pool(threads: Option<usize>) -> PyResult<Option<Arc<ThreadPool>>> {
    thread_local! {
        static POOLS: RefCell<HashMap<usize, Arc<ThreadPool>>> = RefCell::new(HashMap::new());
    }
    let Some(n) = threads else {
        return Ok(None);
    };
    let n = mmac_runtime::gemm::worker_threads(Some(n))
        .map_err(|e| PyValueError::new_err(e.replace("leave it out", "None")))?;
    if let Some(p) = POOLS.with_borrow(|pools| pools.get(&n).cloned()) {
        return Ok(Some(p));
    }
    let p = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start worker threads: {e}")))?;
    let p = Arc::new(p);
    POOLS.with_borrow_mut(|pools| pools.insert(n, p.clone()));
    Ok(Some(p))
}

pub fn eval_error(e: EvalError) -> PyErr {
    match e {
        // the caller's operands: wrong values, as `ValueError` (docs/python.md, Errors)
        EvalError::OperandCount { .. } | EvalError::Pattern { .. } => {
            PyValueError::new_err(e.to_string())
        }
        EvalError::Stride { .. } | EvalError::Internal { .. } => {
            PyRuntimeError::new_err(e.to_string())
        }
    }
}

/// The engine `engine` asks for: the JIT's kernel (compiled once per instruction), or the
/// interpreter for `Interp` and for an instruction the JIT refuses under `Auto`; `Jit` on
/// a refused instruction is an error.
pub fn engine(spec: &Loaded, index: usize, engine: Engine) -> Result<facade::Engine<'_>, PyErr> {
    let checked = spec.spec.checked.get(index);
    if engine == Engine::Interp {
        return Ok(facade::Engine::interpreter(checked));
    }
    let prepared = spec.prepared(index);
    match (engine, prepared.fallback()) {
        (Engine::Jit, Some(why)) => Err(PyRuntimeError::new_err(format!(
            "the JIT refuses `{}`: {why}\n  help: engine='interp' runs the reference interpreter",
            checked.name()
        ))),
        _ => Ok(facade::Engine::prepared(checked, prepared)),
    }
}

/// One dot-product-add (short: the GIL stays held).
#[allow(clippy::too_many_arguments)]
pub fn dot(
    spec: &Loaded,
    index: usize,
    engine: Engine,
    c: u64,
    (a, b, positions): (&[u64], &[u64], &[u64]),
    sa: &[u64],
    sb: &[u64],
) -> PyResult<u64> {
    let ops = Operands { c, a, b, sa, sb };
    self::engine(spec, index, engine)?
        .sparse_dot(&ops, positions)
        .map_err(eval_error)
}

/// How often a computation's progress is passed to its Python callable.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Run `work` with the GIL released, handing it a counter to call with units of work
/// finished (tiles, samples). Without `progress` the counter does nothing and `work` runs
/// on this thread. With a Python callable, `work` runs on a thread of its own while this
/// one, every [`PROGRESS_INTERVAL`] and once at the end, takes the GIL and calls
/// `progress(n)` with the units finished since its last call (so the calls sum to the
/// total). The computation cannot be interrupted: when the callable raises, it is not
/// called again, the computation runs to its end, and then the exception is raised.
pub fn with_progress<R: Send>(
    py: Python<'_>,
    progress: Option<&Bound<'_, PyAny>>,
    work: impl FnOnce(&(dyn Fn(usize) + Sync)) -> PyResult<R> + Send,
) -> PyResult<R> {
    let Some(callback) = progress else {
        return py.detach(|| work(&|_| {}));
    };
    let callback: Py<PyAny> = callback.clone().unbind();
    let finished = AtomicUsize::new(0);
    let count = |n: usize| {
        finished.fetch_add(n, Ordering::Relaxed);
    };
    py.detach(|| {
        std::thread::scope(|scope| {
            let (done, result) = mpsc::channel();
            let count = &count;
            scope.spawn(move || {
                // the receiver lives until this thread is joined
                let _ = done.send(work(count));
            });
            let mut reported = 0;
            let mut failure: Option<PyErr> = None;
            loop {
                let outcome = result.recv_timeout(PROGRESS_INTERVAL);
                let now = finished.load(Ordering::Relaxed);
                if now > reported && failure.is_none() {
                    let delta = now - reported;
                    let call = Python::attach(|py| callback.call1(py, (delta,)).map(drop));
                    failure = call.err();
                }
                reported = now;
                match outcome {
                    Ok(r) => return failure.map_or(r, Err),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => {
                        return Err(PyRuntimeError::new_err(
                            "the computation's thread ended without a result",
                        ));
                    }
                }
            }
        })
    })
}

/// D of a GEMM (shapes checked here: multiples of the instruction's, or exactly it), with
/// the GIL released, on the pool for `threads`; `progress` (see [`with_progress`]) is
/// called with the number of m x n tiles of D finished.
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    py: Python<'_>,
    spec: &Arc<Loaded>,
    index: usize,
    problem: &Problem,
    whole_instruction: bool,
    threads: Option<usize>,
    engine: Engine,
    progress: Option<&Bound<'_, PyAny>>,
) -> PyResult<Matrix> {
    let inst = spec.spec.checked.get(index).instruction();
    gemm::check_shapes(inst, problem, whole_instruction)
        .map_err(|e| PyValueError::new_err(e.message))?;
    let pool = pool(threads)?;
    with_progress(py, progress, |count| {
        // counted where the GEMM runs (inside the pool), so that calls queued behind
        // another on a busy pool do not count as running
        let run = || -> PyResult<Matrix> {
            let _active = Active::enter();
            let engine = self::engine(spec, index, engine)?;
            let mut d = Matrix::try_filled(problem.a.rows, problem.b.cols, 0)
                .map_err(pyo3::exceptions::PyMemoryError::new_err)?;
            gemm::gemm_into(&engine, problem, &mut d, count).map_err(eval_error)?;
            Ok(d)
        };
        match pool {
            Some(p) => p.install(run),
            None => run(),
        }
    })
}

/// The exact error report of D, with the GIL released.
pub fn error_report(
    py: Python<'_>,
    spec: &Arc<Loaded>,
    index: usize,
    problem: &Problem,
    d: &Matrix,
    threads: Option<usize>,
) -> PyResult<ErrorReport> {
    let inst = spec.spec.checked.get(index).instruction();
    let pool = pool(threads)?;
    Ok(py.detach(|| {
        let run = || {
            let _active = Active::enter();
            gemm::error_report(inst, problem, d)
        };
        match pool {
            Some(p) => p.install(run),
            None => run(),
        }
    }))
}
