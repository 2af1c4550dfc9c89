//! IEEE-style rounded operations on exact values, shared by both engines: a value with
//! its special cases and signed zero ([`Num`]), rounding an exact value into a format with
//! IEEE's overflow rules ([`round`]), addition ([`add`]) and fused multiply-add ([`fma`]),
//! the operand conversion of composed pipelines ([`convert`]), and encoding a value into
//! a format ([`encode`]). Everything is exact until the one rounding each operation
//! states.

use crate::exact::{Dyadic, Rounding};
use crate::format::{Decoded, Format};
use crate::ir::{Conversion, Overflow, RoundedOp};

/// A value with IEEE special cases and a signed zero.
#[derive(Clone, Debug, PartialEq)]
pub enum Num {
    Nan,
    /// An infinity; `true` for -Inf.
    Inf(bool),
    /// sign (meaningful for zeros), value
    Fin(bool, Dyadic),
}

impl Num {
    /// +0.
    pub fn zero() -> Num {
        Num::Fin(false, Dyadic::zero())
    }

    /// +0, or -0 where `negative`.
    pub fn signed_zero(negative: bool) -> Num {
        Num::Fin(negative, Dyadic::zero())
    }

    /// A decoded element as a value.
    pub fn of(d: &Decoded) -> Num {
        match d {
            Decoded::Nan => Num::Nan,
            Decoded::Inf { negative } => Num::Inf(*negative),
            Decoded::Finite(x) => Num::Fin(x.negative, x.value()),
        }
    }

    /// For traces: `nan`, `-inf`, `+0`, or the exact value and a decimal approximation.
    pub fn show(&self) -> String {
        match self {
            Num::Nan => "nan".into(),
            Num::Inf(true) => "-inf".into(),
            Num::Inf(false) => "inf".into(),
            Num::Fin(neg, v) if v.is_zero() => if *neg { "-0" } else { "+0" }.into(),
            Num::Fin(_, v) => format!("{} (~{})", v, crate::format::show_f64(v.to_f64_lossy())),
        }
    }
}

/// The largest finite value of `f` with the given sign.
fn max_finite(float: &crate::format::FloatFormat, neg: bool) -> Dyadic {
    Dyadic::from_parts(
        neg,
        float.max_significand() as u128,
        float.max_exponent() as i64 - float.mantissa_bits as i64,
    )
}

/// Round an exact value into an arithmetic format with IEEE overflow rules (a rounding
/// toward the value's side overflows to Inf, away from it to the largest finite value),
/// then flush a subnormal result to a zero of the same sign if asked.
pub fn round(neg: bool, v: &Dyadic, a: &RoundedOp) -> Num {
    let f = a
        .format
        .as_float()
        .expect("validated: arithmetic formats are floats");
    if v.is_zero() {
        return Num::Fin(neg, Dyadic::zero());
    }
    let r = v.round_to_precision(f.mantissa_bits, f.min_exponent() as i64, a.rounding);
    let neg = v.is_negative();
    if r.leading_exponent()
        .is_some_and(|le| le > f.max_exponent() as i64)
    {
        let to_inf = match a.rounding {
            Rounding::NearestEven | Rounding::NearestAway => true,
            Rounding::TowardZero => false,
            Rounding::Up => !neg,
            Rounding::Down => neg,
        };
        return if to_inf {
            Num::Inf(neg)
        } else {
            Num::Fin(neg, max_finite(f, neg))
        };
    }
    if a.flush_keep_sign
        && r.leading_exponent()
            .is_some_and(|le| le < f.min_exponent() as i64)
    {
        return Num::Fin(neg, Dyadic::zero());
    }
    Num::Fin(neg, r)
}

/// `x + y` rounded by `a`, with IEEE's special cases and signed zeros.
pub fn add(x: &Num, y: &Num, a: &RoundedOp) -> Num {
    match (x, y) {
        (Num::Nan, _) | (_, Num::Nan) => Num::Nan,
        (Num::Inf(p), Num::Inf(q)) => {
            if p == q {
                Num::Inf(*p)
            } else {
                Num::Nan
            }
        }
        (Num::Inf(p), _) | (_, Num::Inf(p)) => Num::Inf(*p),
        (Num::Fin(sx, u), Num::Fin(sy, v)) => {
            let s = u.add(v);
            if s.is_zero() {
                // exact zero: same-signed zeros keep their sign; otherwise +0 (-0 rounding down)
                let neg = if u.is_zero() && v.is_zero() && sx == sy {
                    *sx
                } else {
                    a.rounding == Rounding::Down
                };
                Num::Fin(neg, s)
            } else {
                round(s.is_negative(), &s, a)
            }
        }
    }
}

/// `x * y + z`, rounded once by `a`, with IEEE's special cases (`0 * Inf` is NaN).
pub fn fma(x: &Num, y: &Num, z: &Num, a: &RoundedOp) -> Num {
    let product = match (x, y) {
        (Num::Nan, _) | (_, Num::Nan) => Num::Nan,
        (Num::Inf(p), Num::Inf(q)) => Num::Inf(p ^ q),
        (Num::Inf(p), Num::Fin(q, v)) | (Num::Fin(q, v), Num::Inf(p)) => {
            if v.is_zero() {
                Num::Nan
            } else {
                Num::Inf(p ^ q)
            }
        }
        (Num::Fin(p, u), Num::Fin(q, v)) => Num::Fin(p ^ q, u.mul(v)),
    };
    // the exact product, then one rounding of the sum
    add(&product, z, a)
}

/// Convert an element of format `from` into `conv.format`: NaN stays NaN, an infinity
/// stays one where the target has infinities; a finite value is rounded by
/// `conv.rounding`, and one beyond the target's range becomes its infinity (NaN where it
/// has none) or, under `overflow saturate`, its largest finite value. `Err` says why a
/// value has no encoding in the target (a NaN into a format without NaN).
pub fn convert(raw: u64, from: &Format, conv: &Conversion) -> Result<u64, String> {
    let to = &conv.format;
    let f = to
        .as_float()
        .expect("validated: conversions are into float formats");
    let overflowed = |neg: bool| -> Num {
        match (conv.overflow, f.has_inf()) {
            (Overflow::Saturate, _) => Num::Fin(neg, max_finite(f, neg)),
            (_, true) => Num::Inf(neg),
            (_, false) => Num::Nan,
        }
    };
    let n = match Num::of(&from.decode(raw)) {
        Num::Nan => Num::Nan,
        Num::Inf(neg) if f.has_inf() => Num::Inf(neg),
        Num::Inf(neg) => overflowed(neg),
        Num::Fin(neg, v) if v.is_zero() => Num::Fin(neg, v),
        Num::Fin(neg, v) => {
            let r = v.round_to_precision(f.mantissa_bits, f.min_exponent() as i64, conv.rounding);
            if r.abs().cmp_value(&max_finite(f, false)) == std::cmp::Ordering::Greater {
                overflowed(neg)
            } else {
                Num::Fin(neg, r)
            }
        }
    };
    encode(to, &n).ok_or_else(|| format!("{} has no encoding in `{}`", n.show(), to.name))
}

/// The encoding of a value in a format (a NaN as the format's canonical NaN), if it has
/// one.
pub fn encode(format: &Format, n: &Num) -> Option<u64> {
    match n {
        Num::Nan => format.encode_nan(),
        Num::Inf(neg) => format.encode_inf(*neg),
        Num::Fin(neg, v) => format.encode_finite(*neg, v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::builtin;

    fn conv(to: &str, rounding: Rounding, overflow: Overflow) -> Conversion {
        Conversion {
            format: builtin(to).unwrap(),
            rounding,
            overflow,
        }
    }

    /// Every e4m3 and e5m2 code converts into f16 exactly (f16 holds every FP8 value).
    #[test]
    fn fp8_into_f16_is_exact() {
        for name in ["e4m3", "e5m2"] {
            let from = builtin(name).unwrap();
            let c = conv("f16", Rounding::NearestEven, Overflow::Inf);
            for raw in 0..256u64 {
                let to = convert(raw, &from, &c).unwrap();
                let (x, y) = (from.decode(raw), c.format.decode(to));
                match (Num::of(&x), Num::of(&y)) {
                    (Num::Nan, Num::Nan) => {}
                    (Num::Fin(s, u), Num::Fin(t, v)) => {
                        assert_eq!(s, t, "{name} {raw:#x}");
                        assert_eq!(
                            u.cmp_value(&v),
                            std::cmp::Ordering::Equal,
                            "{name} {raw:#x}"
                        );
                    }
                    (p, q) => assert_eq!(p, q, "{name} {raw:#x}"),
                }
            }
        }
    }

    /// Conversions round and overflow as stated: f32 into e4m3 (no infinity) and f16.
    #[test]
    fn conversions_round_and_overflow_as_stated() {
        let f32 = builtin("f32").unwrap();
        let bits = |x: f32| x.to_bits() as u64;
        let e4m3_sat = conv("e4m3", Rounding::NearestEven, Overflow::Saturate);
        let e4m3_inf = conv("e4m3", Rounding::NearestEven, Overflow::Inf);
        assert_eq!(convert(bits(1000.0), &f32, &e4m3_sat).unwrap(), 0x7e); // 448
        assert_eq!(convert(bits(1000.0), &f32, &e4m3_inf).unwrap(), 0x7f); // NaN: no Inf
        assert_eq!(convert(bits(-1000.0), &f32, &e4m3_sat).unwrap(), 0xfe);
        // 1 + 2^-4 is a tie between 1 and 1.125 in e4m3: to even
        assert_eq!(convert(bits(1.0625), &f32, &e4m3_sat).unwrap(), 0x38);
        let rz = conv("e4m3", Rounding::TowardZero, Overflow::Saturate);
        assert_eq!(convert(bits(1.1), &f32, &rz).unwrap(), 0x38);
        let f16 = conv("f16", Rounding::NearestEven, Overflow::Inf);
        assert_eq!(convert(bits(65520.0), &f32, &f16).unwrap(), 0x7c00); // rounds to Inf
        assert_eq!(convert(bits(-0.0), &f32, &f16).unwrap(), 0x8000);
        assert_eq!(convert(bits(f32::NAN), &f32, &f16).unwrap(), 0x7fff);
        let e2m1 = conv("e2m1", Rounding::NearestEven, Overflow::Inf);
        assert!(convert(bits(f32::NAN), &f32, &e2m1).is_err());
    }

    /// Addition: one rounding, IEEE signed zeros, and infinities.
    #[test]
    fn addition_rounds_once() {
        let op = RoundedOp {
            format: builtin("f16").unwrap(),
            rounding: Rounding::NearestEven,
            flush_keep_sign: false,
        };
        let f16 = builtin("f16").unwrap();
        let v = |raw: u64| Num::of(&f16.decode(raw));
        // 1 + 2^-11 is a tie: to even (1)
        let r = add(&v(0x3c00), &v(0x1000), &op);
        assert_eq!(encode(&f16, &r), Some(0x3c00));
        // 1 + (2^-11 + 2^-21): above the tie, up
        let x = Num::Fin(false, Dyadic::pow2(-11).add(&Dyadic::pow2(-21)));
        assert_eq!(encode(&f16, &add(&v(0x3c00), &x, &op)), Some(0x3c01));
        assert_eq!(encode(&f16, &add(&v(0x3c00), &v(0xbc00), &op)), Some(0));
        let down = RoundedOp {
            rounding: Rounding::Down,
            ..op.clone()
        };
        assert_eq!(
            encode(&f16, &add(&v(0x3c00), &v(0xbc00), &down)),
            Some(0x8000)
        );
        assert_eq!(add(&v(0x7c00), &v(0xfc00), &op), Num::Nan);
        let fused = fma(&v(0x3c00), &v(0x7c00), &v(0x3c00), &op);
        assert_eq!(fused, Num::Inf(false));
        assert_eq!(fma(&Num::zero(), &v(0x7c00), &v(0x3c00), &op), Num::Nan);
    }
}
