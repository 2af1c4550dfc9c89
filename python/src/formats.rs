//! Formats as the Python side sees them: a description of each operand's format (from
//! which `mmac/_dtypes.py` picks the NumPy dtype that holds the same bits), and exact
//! conversions between Python floats and encodings.

use mmac_compiler::format::{Decoded, Format, FormatKind};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A format's layout as a dict: `name`, `kind` (`"float"` or `"int"`), `bits` (storage),
/// `signed`, and for floats `exponent`, `mantissa`, `bias`, `specials` (`ieee`, `fn`,
/// `fnuz`, `none`), `subnormals` and `ignore_low` (low storage bits the hardware ignores).
pub fn describe<'py>(py: Python<'py>, format: &Format) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &format.name)?;
    d.set_item("bits", format.storage_bits())?;
    match &format.kind {
        FormatKind::Float(x) => {
            d.set_item("kind", "float")?;
            d.set_item("signed", x.signed)?;
            d.set_item("exponent", x.exponent_bits)?;
            d.set_item("mantissa", x.mantissa_bits)?;
            d.set_item("bias", x.bias)?;
            d.set_item("specials", x.specials.keyword())?;
            d.set_item("subnormals", x.subnormals)?;
            d.set_item("ignore_low", x.ignored_low_bits)?;
        }
        FormatKind::Int(i) => {
            d.set_item("kind", "int")?;
            d.set_item("signed", i.signed)?;
        }
    }
    Ok(d)
}

/// The encoding of `x` in `f`, exactly: never rounded. NaN and infinities map to the
/// format's own (canonical NaN); an error says why `x` has no encoding.
pub fn encode_exact(format: &Format, x: f64) -> Result<u64, String> {
    let name = &format.name;
    if x.is_nan() {
        return format
            .encode_nan()
            .ok_or_else(|| format!("nan: {name} has no NaN"));
    }
    if x.is_infinite() {
        return format
            .encode_inf(x < 0.0)
            .ok_or_else(|| format!("{x}: {name} has no infinities"));
    }
    // the sign is kept apart: a zero keeps it
    let value = mmac_runtime::accuracy::dyadic_of(x);
    format
        .encode_finite(x.is_sign_negative(), &value)
        .ok_or_else(|| format!("{x:?} is not exactly representable in {name}"))
}

/// The value of an encoding as an f64 (exact for every format of at most 53 significand
/// bits and f64's range; the nearest f64 otherwise).
pub fn decode_lossy(format: &Format, raw: u64) -> f64 {
    match format.decode(raw) {
        Decoded::Nan => f64::NAN,
        Decoded::Inf { negative: true } => f64::NEG_INFINITY,
        Decoded::Inf { negative: false } => f64::INFINITY,
        Decoded::Finite(x) if x.is_zero() => {
            if x.negative {
                -0.0
            } else {
                0.0
            }
        }
        Decoded::Finite(x) => x.value().to_f64_lossy(),
    }
}
