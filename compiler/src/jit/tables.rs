//! Decoding tables for narrow formats (at most 8 storage bits): one `u64` per code,
//! built once per process from [`crate::format::Format::decode`] itself, so a kernel
//! decodes an element with one load. An entry holds the significand in bits 0..32, the
//! sign in bit 32, the exponent plus [`EXP_OFFSET`] from bit 40, and [`SPECIAL`] for a
//! NaN or an infinity (whose exponent field reads as 0, so that a sum of two entries'
//! exponent fields stays in range whatever they hold). With `flush`, subnormals and -0 read as +0, as the interpreter's
//! input conditioning does.

use crate::format::{Decoded, FloatFormat, Format, FormatKind};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// Added to exponents so that they are positive in an entry.
pub(crate) const EXP_OFFSET: i64 = 1 << 20;
/// First bit of the biased exponent.
pub(crate) const EXP_AT: i64 = 40;
/// Set in the entry of a NaN or an infinity.
pub(crate) const SPECIAL: i64 = 1 << 62;
/// Formats up to this many storage bits get a table (a 64K-entry f16 table measured
/// slower than decoding with shifts: it does not stay in L1).
pub(crate) const MAX_BITS: u32 = 8;

type Key = (FloatFormat, bool);

/// The table of a format, or `None` if it is too wide. Built once per process; every module
/// that uses it copies it into a data object of its own (`emit::DataSymbols`).
pub(crate) fn decode_table(float: &FloatFormat, flush: bool) -> Option<&'static [u64]> {
    if float.storage_bits > MAX_BITS || float.mantissa_bits > 30 {
        return None;
    }
    static TABLES: OnceLock<Mutex<HashMap<Key, &'static [u64]>>> = OnceLock::new();
    let tables = TABLES.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = tables.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = map.get(&(float.clone(), flush)) {
        return Some(t);
    }
    let format = Format {
        name: String::new(),
        kind: FormatKind::Float(float.clone()),
    };
    let min_exp = float.min_exponent();
    let table: Vec<u64> = (0..1u64 << float.storage_bits)
        .map(|raw| match format.decode(raw) {
            Decoded::Finite(x) => {
                let flushed =
                    flush && x.exponent == min_exp && x.significand < (1u64 << x.fraction_bits);
                let (neg, sig) = if flushed {
                    (false, 0)
                } else {
                    (x.negative, x.significand)
                };
                sig | ((neg as u64) << 32) | (((x.exponent as i64 + EXP_OFFSET) as u64) << EXP_AT)
            }
            _ => SPECIAL as u64 | ((EXP_OFFSET as u64) << EXP_AT),
        })
        .collect();
    let leaked: &'static [u64] = Box::leak(table.into_boxed_slice());
    map.insert((float.clone(), flush), leaked);
    Some(leaked)
}

/// Bits of the largest magnitude in a [`value_table`] of `f`.
pub(crate) fn value_bits(float: &FloatFormat) -> u32 {
    float.mantissa_bits + 1 + (float.max_exponent() - float.min_exponent()).max(0) as u32
}

/// The table of finite values of a format without NaN or Inf codes, as signed integers
/// in units of its smallest grid step: `±significand << (exponent - min_exponent)`.
/// `None` if the format is wider than [`MAX_BITS`], has special codes, or its values need
/// more than 30 bits.
pub(crate) fn value_table(float: &FloatFormat, flush: bool) -> Option<&'static [u64]> {
    if float.storage_bits > MAX_BITS || float.has_nan() || float.has_inf() || value_bits(float) > 30
    {
        return None;
    }
    static TABLES: OnceLock<Mutex<HashMap<Key, &'static [u64]>>> = OnceLock::new();
    let tables = TABLES.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = tables.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = map.get(&(float.clone(), flush)) {
        return Some(t);
    }
    let format = Format {
        name: String::new(),
        kind: FormatKind::Float(float.clone()),
    };
    let min_exp = float.min_exponent();
    let table: Vec<u64> = (0..1u64 << float.storage_bits)
        .map(|raw| match format.decode(raw) {
            Decoded::Finite(x) => {
                let flushed =
                    flush && x.exponent == min_exp && x.significand < (1u64 << x.fraction_bits);
                let mag = if flushed {
                    0
                } else {
                    (x.significand << (x.exponent - min_exp)) as i64
                };
                (if x.negative { -mag } else { mag }) as u64
            }
            // unreachable: the format has no special codes
            _ => 0,
        })
        .collect();
    let leaked: &'static [u64] = Box::leak(table.into_boxed_slice());
    map.insert((float.clone(), flush), leaked);
    Some(leaked)
}
