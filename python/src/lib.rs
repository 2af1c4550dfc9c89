//! `mmac._native`, the compiled half of the `mmac` Python package: specs parsed and checked
//! by mmac-compiler ([`spec`]), operands as raw encodings and formats described for the
//! Python side ([`formats`]), instructions and GEMMs computed by the JIT or the
//! reference interpreter with the GIL released ([`compute`]), and the "why" of results:
//! traces, differences between instructions and accuracy over K ([`why`]).
//!
//! The Python package (`python/mmac/`) owns everything about dtypes, NumPy, torch and
//! Dask; this module sees only raw encodings (`u64` per element, passed as little-endian
//! `bytes`) and plain Python values.

mod compute;
mod formats;
mod spec;
mod why;

use pyo3::prelude::*;

pyo3::create_exception!(
    mmac,
    SpecError,
    pyo3::exceptions::PyException,
    "A spec that does not parse or check; the message is the rendered diagnostics."
);

#[pymodule]
#[pyo3(name = "_native")]
fn native_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SpecError", m.py().get_type::<SpecError>())?;
    m.add_class::<spec::NativeSpec>()?;
    m.add_class::<spec::NativeInstruction>()?;
    m.add_function(wrap_pyfunction!(spec::load, m)?)?;
    m.add_function(wrap_pyfunction!(spec::loads, m)?)?;
    m.add_function(wrap_pyfunction!(compute::default_threads, m)?)?;
    m.add_function(wrap_pyfunction!(compute::concurrency_peak, m)?)?;
    m.add_function(wrap_pyfunction!(compute::reset_concurrency_peak, m)?)?;
    m.add_function(wrap_pyfunction!(why::diff_instructions, m)?)?;
    m.add_function(wrap_pyfunction!(why::accuracy_report, m)?)?;
    Ok(())
}
