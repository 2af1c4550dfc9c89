//! Number formats: the built-in table (IEEE, OCP and AMD FP8, FP6, FP4, scale formats,
//! integers, `b1`), user-defined formats, and bit-exact decoding and encoding.
//!
//! A floating-point format is `sign? exponent mantissa` with a bias and a policy for
//! non-finite codes. Decoding yields a [`Decoded`] value: `significand * 2^(exponent -
//! fraction_bits)` with `1 <= significand/2^fraction_bits < 2` for normals and the format's
//! minimum exponent for subnormals and zeros, exactly as semantics.md describes.

use crate::exact::Dyadic;
use num_bigint::BigInt;
use num_traits::ToPrimitive;

/// Which codes of a float format are not finite numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Specials {
    /// IEEE 754: exponent all ones is Inf (mantissa 0) or NaN.
    Ieee,
    /// OCP "FN": no Inf; exponent and mantissa all ones is NaN (e4m3).
    Fn,
    /// AMD "FNUZ": no Inf, no -0; the code `1000...0` is NaN.
    Fnuz,
    /// Every code is finite (FP6, FP4).
    None,
}

impl Specials {
    pub fn keyword(self) -> &'static str {
        match self {
            Specials::Ieee => "ieee",
            Specials::Fn => "fn",
            Specials::Fnuz => "fnuz",
            Specials::None => "none",
        }
    }
    pub fn from_keyword(s: &str) -> Option<Specials> {
        [Specials::Ieee, Specials::Fn, Specials::Fnuz, Specials::None]
            .into_iter()
            .find(|x| x.keyword() == s)
    }
}

/// A binary floating-point format.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FloatFormat {
    pub exponent_bits: u32,
    pub mantissa_bits: u32,
    pub bias: i32,
    pub signed: bool,
    pub specials: Specials,
    /// False for formats whose zero exponent field is an ordinary binade (ue8m0).
    pub subnormals: bool,
    /// Bits of storage (what a vector file writes, what a matrix element holds).
    pub storage_bits: u32,
    /// Low storage bits the hardware ignores (tf32: 13). The code sits above them.
    pub ignored_low_bits: u32,
}

impl FloatFormat {
    /// Whether this is IEEE 754's binary format of `exponent_bits` and `mantissa_bits`
    /// (binary32 is 8 and 23): its bias, a sign, Inf and NaN, subnormals, and the code in
    /// the low storage bits.
    pub fn is_ieee(&self, exponent_bits: u32, mantissa_bits: u32) -> bool {
        self.exponent_bits == exponent_bits
            && self.mantissa_bits == mantissa_bits
            && self.bias == (1 << (exponent_bits - 1)) - 1
            && self.signed
            && self.specials == Specials::Ieee
            && self.subnormals
            && self.ignored_low_bits == 0
    }

    /// Bits of the code itself: sign, exponent, mantissa.
    pub fn code_bits(&self) -> u32 {
        self.signed as u32 + self.exponent_bits + self.mantissa_bits
    }
    /// The exponent of the smallest normal binade (also that of subnormals and zero).
    pub fn min_exponent(&self) -> i32 {
        if self.subnormals {
            1 - self.bias
        } else {
            -self.bias
        }
    }
    /// The exponent of the largest finite binade.
    pub fn max_exponent(&self) -> i32 {
        let top = (1i64 << self.exponent_bits) as i32 - 1;
        let top_finite = match self.specials {
            Specials::Ieee => top - 1,
            // FN and the unsigned all-ones-NaN scale formats lose only one code of the top
            // binade; a mantissa-less format (ue8m0) loses the whole binade.
            Specials::Fn if self.mantissa_bits == 0 => top - 1,
            _ => top,
        };
        top_finite - self.bias
    }
    /// The largest finite value's significand, as an integer with `mantissa_bits` fraction bits.
    pub fn max_significand(&self) -> u64 {
        let full = (1u64 << (self.mantissa_bits + 1)) - 1;
        match self.specials {
            Specials::Fn if self.mantissa_bits > 0 => full - 1,
            _ => full,
        }
    }
    pub fn has_inf(&self) -> bool {
        self.specials == Specials::Ieee
    }
    pub fn has_nan(&self) -> bool {
        self.specials != Specials::None
    }
}

/// An integer format (`s8`, `u4`, `s32`, ...) or a single bit (`b1`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IntFormat {
    pub bits: u32,
    pub signed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FormatKind {
    Float(FloatFormat),
    Int(IntFormat),
}

/// A named format.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Format {
    pub name: String,
    pub kind: FormatKind,
}

/// A finite decoded value: `(-1)^negative * significand * 2^(exponent - fraction_bits)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finite {
    pub negative: bool,
    pub significand: u64,
    pub exponent: i32,
    pub fraction_bits: u32,
}

impl Finite {
    pub fn is_zero(&self) -> bool {
        self.significand == 0
    }
    pub fn value(&self) -> Dyadic {
        Dyadic::from_parts(
            self.negative,
            self.significand as u128,
            self.exponent as i64 - self.fraction_bits as i64,
        )
    }
}

/// A decoded element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded {
    Nan,
    Inf { negative: bool },
    Finite(Finite),
}

impl Format {
    pub fn float(name: &str, e: u32, m: u32, bias: i32, specials: Specials) -> Format {
        Format {
            name: name.to_string(),
            kind: FormatKind::Float(FloatFormat {
                exponent_bits: e,
                mantissa_bits: m,
                bias,
                signed: true,
                specials,
                subnormals: true,
                storage_bits: 1 + e + m,
                ignored_low_bits: 0,
            }),
        }
    }

    pub fn int(name: &str, bits: u32, signed: bool) -> Format {
        Format {
            name: name.to_string(),
            kind: FormatKind::Int(IntFormat { bits, signed }),
        }
    }

    pub fn as_float(&self) -> Option<&FloatFormat> {
        match &self.kind {
            FormatKind::Float(f) => Some(f),
            FormatKind::Int(_) => None,
        }
    }

    pub fn as_int(&self) -> Option<&IntFormat> {
        match &self.kind {
            FormatKind::Int(i) => Some(i),
            FormatKind::Float(_) => None,
        }
    }

    pub fn storage_bits(&self) -> u32 {
        match &self.kind {
            FormatKind::Float(f) => f.storage_bits,
            FormatKind::Int(i) => i.bits,
        }
    }

    /// Hex digits of this format in a vector file.
    pub fn hex_digits(&self) -> usize {
        self.storage_bits().div_ceil(4) as usize
    }

    /// A mask of the storage bits.
    pub fn storage_mask(&self) -> u64 {
        low_mask(self.storage_bits())
    }

    /// Decode a raw storage pattern. Bits above the storage width are ignored.
    pub fn decode(&self, raw: u64) -> Decoded {
        let raw = raw & self.storage_mask();
        match &self.kind {
            FormatKind::Int(i) => {
                let v = if i.signed && i.bits < 64 && (raw >> (i.bits - 1)) & 1 == 1 {
                    raw as i64 - (1i64 << i.bits)
                } else {
                    raw as i64
                };
                Decoded::Finite(Finite {
                    negative: v < 0,
                    significand: v.unsigned_abs(),
                    exponent: 0,
                    fraction_bits: 0,
                })
            }
            FormatKind::Float(f) => decode_float(f, raw),
        }
    }

    /// Encode NaN (the canonical quiet NaN of the format), if it has one.
    /// The NaN of this format that carries the NaN `raw` of `src`, quieted: `raw`'s sign
    /// and fraction field, the fraction aligned at the top of this format's (cut or
    /// padded with zeros below), the quiet bit (the fraction's top bit) set. `None` when
    /// `raw` is not a NaN of `src`, or this format has no quiet NaN with a payload (IEEE
    /// specials only).
    pub fn nan_carrying(&self, src: &Format, raw: u64) -> Option<u64> {
        let (d, s) = (self.as_float()?, src.as_float()?);
        if d.specials != Specials::Ieee || d.mantissa_bits == 0 || !src.decode(raw).is_nan() {
            return None;
        }
        let code = (raw >> s.ignored_low_bits) & low_mask(s.code_bits());
        let fraction = code & low_mask(s.mantissa_bits);
        let negative = s.signed && (code >> (s.exponent_bits + s.mantissa_bits)) & 1 == 1;
        let (md, ms) = (d.mantissa_bits, s.mantissa_bits);
        let aligned = if md >= ms {
            fraction << (md - ms)
        } else {
            fraction >> (ms - md)
        };
        let quiet = aligned | 1 << (md - 1);
        let exponent = low_mask(d.exponent_bits) << md;
        Some((sign_bit(d, negative) | exponent | quiet) << d.ignored_low_bits)
    }

    pub fn encode_nan(&self) -> Option<u64> {
        let f = self.as_float()?;
        let e = f.exponent_bits;
        let m = f.mantissa_bits;
        let code = match f.specials {
            // sign 0, exponent all ones, all mantissa bits set (0x7fff, 0x7fffffff)
            Specials::Ieee | Specials::Fn => (((1u64 << e) - 1) << m) | ((1u64 << m) - 1),
            Specials::Fnuz => 1u64 << (e + m),
            Specials::None => return None,
        };
        Some(code << f.ignored_low_bits)
    }

    pub fn encode_inf(&self, negative: bool) -> Option<u64> {
        let f = self.as_float()?;
        if !f.has_inf() {
            return None;
        }
        let code = (((1u64 << f.exponent_bits) - 1) << f.mantissa_bits) | sign_bit(f, negative);
        Some(code << f.ignored_low_bits)
    }

    /// The encoding of +0 (0 for a format without a zero: its smallest value).
    pub fn positive_zero(&self) -> u64 {
        self.encode_finite(false, &Dyadic::zero()).unwrap_or(0)
    }

    /// Encode a finite value that is exactly representable in the format (the caller has
    /// rounded it). `negative` gives the sign of a zero. Returns None if the value is not
    /// representable.
    pub fn encode_finite(&self, negative: bool, value: &Dyadic) -> Option<u64> {
        match &self.kind {
            FormatKind::Int(i) => {
                let v = value.to_integer()?;
                let (lo, hi) = int_range(i);
                if v < BigInt::from(lo) || v > BigInt::from(hi) {
                    return None;
                }
                let v = v.to_i64()?;
                Some((v as u64) & self.storage_mask())
            }
            FormatKind::Float(f) => encode_float(f, negative, value),
        }
    }
}

/// The value range of an integer format.
pub fn int_range(i: &IntFormat) -> (i64, i64) {
    if i.signed {
        (-(1i64 << (i.bits - 1)), (1i64 << (i.bits - 1)) - 1)
    } else {
        (0, ((1u128 << i.bits) - 1) as i64)
    }
}

fn sign_bit(float: &FloatFormat, negative: bool) -> u64 {
    if float.signed && negative {
        1u64 << (float.exponent_bits + float.mantissa_bits)
    } else {
        0
    }
}

fn decode_float(float: &FloatFormat, raw: u64) -> Decoded {
    let code = (raw >> float.ignored_low_bits) & low_mask(float.code_bits());
    let m = float.mantissa_bits;
    let e = float.exponent_bits;
    let man = code & ((1u64 << m) - 1);
    let exp_field = (code >> m) & ((1u64 << e) - 1);
    let negative = float.signed && (code >> (e + m)) & 1 == 1;
    let exp_all_ones = exp_field == (1u64 << e) - 1;
    match float.specials {
        Specials::Ieee if exp_all_ones => {
            return if man == 0 {
                Decoded::Inf { negative }
            } else {
                Decoded::Nan
            };
        }
        Specials::Fn if exp_all_ones && man == (1u64 << m) - 1 => return Decoded::Nan,
        Specials::Fnuz if negative && exp_field == 0 && man == 0 => return Decoded::Nan,
        _ => {}
    }
    let (significand, exponent) = if exp_field == 0 && float.subnormals {
        (man, float.min_exponent())
    } else {
        ((1u64 << m) | man, exp_field as i32 - float.bias)
    };
    Decoded::Finite(Finite {
        negative,
        significand,
        exponent,
        fraction_bits: m,
    })
}

fn encode_float(float: &FloatFormat, negative: bool, value: &Dyadic) -> Option<u64> {
    let negative = if value.is_zero() {
        negative
    } else {
        value.is_negative()
    };
    if negative && !float.signed && !value.is_zero() {
        return None;
    }
    if value.is_zero() {
        if !float.subnormals {
            return None;
        }
        // FNUZ has no -0: both zeros encode as +0
        let neg = negative && float.specials != Specials::Fnuz;
        return Some(sign_bit(float, neg) << float.ignored_low_bits);
    }
    let m = float.mantissa_bits as i64;
    let lead = value.leading_exponent()?;
    let emin = float.min_exponent() as i64;
    if lead > float.max_exponent() as i64 {
        return None;
    }
    let (exp_field, scale_exp) = if lead < emin {
        if !float.subnormals {
            return None;
        }
        (0u64, emin)
    } else {
        (
            (lead - emin + if float.subnormals { 1 } else { 0 }) as u64,
            lead,
        )
    };
    // significand as an integer with m fraction bits at scale_exp
    let grid = scale_exp - m;
    if value.exponent < grid {
        // must be exact on the grid
        let r = value.round_to_grid(grid, crate::exact::Rounding::TowardZero);
        if r.cmp_value(value) != std::cmp::Ordering::Equal {
            return None;
        }
    }
    let sig = (value.abs().mantissa.clone() << (value.exponent - grid).max(0) as usize)
        >> (grid - value.exponent).max(0) as usize;
    let sig = sig.to_u64()?;
    let man = sig & ((1u64 << m) - 1);
    let code = sign_bit(float, negative) | (exp_field << m) | man;
    // the code must not collide with a special
    let bits = code << float.ignored_low_bits;
    match decode_float(float, bits) {
        Decoded::Finite(_) => Some(bits),
        _ => None,
    }
}

/// A mask of the low `bits` bits (all 64 for `bits >= 64`).
pub fn low_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Built-in formats, by name.
pub fn builtin(name: &str) -> Option<Format> {
    let f = match name {
        "f64" => Format::float("f64", 11, 52, 1023, Specials::Ieee),
        "f32" => Format::float("f32", 8, 23, 127, Specials::Ieee),
        "f16" => Format::float("f16", 5, 10, 15, Specials::Ieee),
        "bf16" => Format::float("bf16", 8, 7, 127, Specials::Ieee),
        "tf32" | "xf32" => {
            let mut f = Format::float(name, 8, 10, 127, Specials::Ieee);
            if let FormatKind::Float(ff) = &mut f.kind {
                ff.storage_bits = 32;
                ff.ignored_low_bits = 13;
            }
            f
        }
        "e5m2" => Format::float("e5m2", 5, 2, 15, Specials::Ieee),
        "e4m3" => Format::float("e4m3", 4, 3, 7, Specials::Fn),
        "e3m2" => Format::float("e3m2", 3, 2, 3, Specials::None),
        "e2m3" => Format::float("e2m3", 2, 3, 1, Specials::None),
        "e2m1" => Format::float("e2m1", 2, 1, 1, Specials::None),
        "fp8" => Format::float("fp8", 4, 3, 8, Specials::Fnuz),
        "bf8" => Format::float("bf8", 5, 2, 16, Specials::Fnuz),
        "ue8m0" => Format {
            name: name.into(),
            kind: FormatKind::Float(FloatFormat {
                exponent_bits: 8,
                mantissa_bits: 0,
                bias: 127,
                signed: false,
                specials: Specials::Fn,
                subnormals: false,
                storage_bits: 8,
                ignored_low_bits: 0,
            }),
        },
        "ue4m3" => Format {
            name: name.into(),
            kind: FormatKind::Float(FloatFormat {
                exponent_bits: 4,
                mantissa_bits: 3,
                bias: 7,
                signed: false,
                specials: Specials::Fn,
                subnormals: true,
                // stored in a byte whose top bit the hardware ignores
                storage_bits: 8,
                ignored_low_bits: 0,
            }),
        },
        "s4" => Format::int("s4", 4, true),
        "u4" => Format::int("u4", 4, false),
        "s8" => Format::int("s8", 8, true),
        "u8" => Format::int("u8", 8, false),
        "s16" => Format::int("s16", 16, true),
        "u16" => Format::int("u16", 16, false),
        "s32" => Format::int("s32", 32, true),
        "u32" => Format::int("u32", 32, false),
        "b1" => Format::int("b1", 1, false),
        _ => return None,
    };
    Some(f)
}

/// Names of all built-in formats, in the order the docs list them.
pub const BUILTIN_NAMES: &[&str] = &[
    "f64", "f32", "f16", "bf16", "tf32", "xf32", "e5m2", "e4m3", "e3m2", "e2m3", "e2m1", "fp8",
    "bf8", "ue8m0", "ue4m3", "s4", "u4", "s8", "u8", "s16", "u16", "s32", "u32", "b1",
];

/// The value of a finite decoded element as a dyadic; zero for zeros.
pub fn finite_value(d: &Finite) -> Dyadic {
    if d.significand == 0 {
        Dyadic::zero()
    } else {
        d.value()
    }
}

impl Decoded {
    pub fn is_nan(&self) -> bool {
        matches!(self, Decoded::Nan)
    }
    /// A short human description: `nan`, `-inf`, or the value in decimal.
    pub fn describe(&self) -> String {
        match self {
            Decoded::Nan => "nan".into(),
            Decoded::Inf { negative } => {
                if *negative {
                    "-inf".into()
                } else {
                    "inf".into()
                }
            }
            Decoded::Finite(f) => {
                let v = f.value().to_f64_lossy();
                let sign = if f.negative { "-" } else { "" };
                if f.significand == 0 {
                    format!("{sign}0")
                } else {
                    show_f64(v)
                }
            }
        }
    }
}

/// A readable decimal: plain notation for moderate magnitudes, scientific otherwise. The
/// digits are the shortest that read back as the same f64 (exact for f32, f16 and smaller
/// formats).
pub fn show_f64(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 || (1e-4..1e16).contains(&a) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exact::Dyadic;

    fn fmt(n: &str) -> Format {
        builtin(n).unwrap()
    }

    fn val(format: &Format, raw: u64) -> f64 {
        match format.decode(raw) {
            Decoded::Finite(x) => {
                let v = x.value().to_f64_lossy();
                if x.negative && v == 0.0 { -0.0 } else { v }
            }
            Decoded::Inf { negative } => {
                if negative {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }
            }
            Decoded::Nan => f64::NAN,
        }
    }

    /// Every code of every small format decodes, and re-encodes to itself (or to the
    /// canonical NaN).
    #[test]
    fn round_trip_every_small_code() {
        for name in [
            "f16", "bf16", "e5m2", "e4m3", "e3m2", "e2m3", "e2m1", "fp8", "bf8", "ue8m0", "ue4m3",
            "s4", "u4", "s8", "u8", "b1",
        ] {
            let f = fmt(name);
            let n = 1u64 << f.storage_bits();
            for raw in 0..n {
                let d = f.decode(raw);
                let back = match d {
                    Decoded::Nan => f.encode_nan(),
                    Decoded::Inf { negative } => f.encode_inf(negative),
                    Decoded::Finite(x) => f.encode_finite(x.negative, &x.value()),
                };
                let back = back.unwrap_or_else(|| panic!("{name} {raw:#x} does not re-encode"));
                if d.is_nan() {
                    assert!(f.decode(back).is_nan());
                } else if name == "ue4m3" {
                    assert_eq!(back, raw & 0x7f, "{name} {raw:#x}");
                } else {
                    assert_eq!(back, raw, "{name} {raw:#x}");
                }
            }
        }
    }

    #[test]
    fn f32_f64_agree_with_host() {
        let f32f = fmt("f32");
        for raw in [
            0u64,
            0x8000_0000,
            1,
            0x007f_ffff,
            0x0080_0000,
            0x3f80_0000,
            0x7f7f_ffff,
            0xc2d0_0680,
            0x7f80_0000,
            0xff80_0000,
        ] {
            assert_eq!(
                val(&f32f, raw).to_bits(),
                (f32::from_bits(raw as u32) as f64).to_bits(),
                "{raw:#x}"
            );
        }
        assert!(val(&f32f, 0x7fc0_0000).is_nan());
        let f64f = fmt("f64");
        for x in [
            1.5f64,
            -3.25e-310,
            1.7976931348623157e308,
            0.0,
            -0.0,
            4.9e-324,
        ] {
            assert_eq!(val(&f64f, x.to_bits()).to_bits(), x.to_bits());
        }
    }

    #[test]
    fn fp8_fp6_fp4_tables() {
        let e4m3 = fmt("e4m3");
        assert_eq!(val(&e4m3, 0x7e), 448.0);
        assert!(val(&e4m3, 0x7f).is_nan());
        assert!(val(&e4m3, 0xff).is_nan());
        assert_eq!(val(&e4m3, 0x01), 2f64.powi(-9));
        assert_eq!(val(&e4m3, 0x78), 256.0); // exponent all ones is finite in FN
        let e5m2 = fmt("e5m2");
        assert_eq!(val(&e5m2, 0x7b), 57344.0);
        assert_eq!(val(&e5m2, 0x7c), f64::INFINITY);
        assert!(val(&e5m2, 0x7d).is_nan());
        let e2m1 = fmt("e2m1");
        let table: Vec<f64> = (0..16).map(|r| val(&e2m1, r)).collect();
        assert_eq!(&table[..8], &[0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]);
        assert_eq!(table[9], -0.5);
        assert_eq!(val(&fmt("e3m2"), 0x1f), 28.0);
        assert_eq!(val(&fmt("e3m2"), 0x01), 0.0625);
        assert_eq!(val(&fmt("e2m3"), 0x1f), 7.5);
        assert_eq!(val(&fmt("e2m3"), 0x01), 0.125);
        let fp8 = fmt("fp8");
        assert!(val(&fp8, 0x80).is_nan());
        assert_eq!(val(&fp8, 0x7f), 240.0);
        assert_eq!(val(&fp8, 0x01), 2f64.powi(-10));
        let bf8 = fmt("bf8");
        assert!(val(&bf8, 0x80).is_nan());
        assert_eq!(val(&bf8, 0x7f), 57344.0);
        assert_eq!(val(&bf8, 0x7c), 32768.0);
    }

    #[test]
    fn scale_formats() {
        let ue8m0 = fmt("ue8m0");
        assert_eq!(val(&ue8m0, 0x7f), 1.0);
        assert_eq!(val(&ue8m0, 0x00), 2f64.powi(-127));
        assert_eq!(val(&ue8m0, 0xfe), 2f64.powi(127));
        assert!(val(&ue8m0, 0xff).is_nan());
        let ue4m3 = fmt("ue4m3");
        assert_eq!(val(&ue4m3, 0x00), 0.0);
        assert!(val(&ue4m3, 0x7f).is_nan());
        assert_eq!(val(&ue4m3, 0x7e), 448.0);
        // the top bit is ignored
        assert_eq!(val(&ue4m3, 0xb8), val(&ue4m3, 0x38));
        assert_eq!(val(&ue4m3, 0x38), 1.0);
    }

    #[test]
    fn tf32_ignores_low_bits() {
        let tf32 = fmt("tf32");
        assert_eq!(val(&tf32, 0x3f80_1fff), 1.0);
        // a NaN whose payload is only in the ignored bits reads as Inf
        assert_eq!(val(&tf32, 0x7f80_0001), f64::INFINITY);
        assert!(val(&tf32, 0x7f80_2000).is_nan());
    }

    #[test]
    fn integers() {
        assert_eq!(val(&fmt("s4"), 0xf), -1.0);
        assert_eq!(val(&fmt("s4"), 0x8), -8.0);
        assert_eq!(val(&fmt("u4"), 0xf), 15.0);
        assert_eq!(val(&fmt("s8"), 0x80), -128.0);
        assert_eq!(val(&fmt("s32"), 0xffff_ffff), -1.0);
        let s32 = fmt("s32");
        assert_eq!(
            s32.encode_finite(false, &Dyadic::new(-2, 0)),
            Some(0xffff_fffe)
        );
        assert_eq!(s32.encode_finite(false, &Dyadic::new(1i64 << 31, 0)), None);
    }

    #[test]
    fn encode_rejects_unrepresentable() {
        let f16 = fmt("f16");
        assert_eq!(f16.encode_finite(false, &Dyadic::new(3, -30)), None); // below subnormal grid
        assert_eq!(f16.encode_finite(false, &Dyadic::new(1, 16)), None); // overflow
        assert_eq!(f16.encode_finite(false, &Dyadic::new(1, -24)), Some(1));
        assert_eq!(f16.encode_finite(true, &Dyadic::zero()), Some(0x8000));
        assert_eq!(f16.encode_nan(), Some(0x7fff));
        assert_eq!(fmt("f32").encode_nan(), Some(0x7fff_ffff));
        assert_eq!(fmt("fp8").encode_finite(true, &Dyadic::zero()), Some(0));
    }
}
