//! Operand values typed by hand (`mmac run --c/--a/--b/--sa/--sb`): a hex encoding, or an
//! exact decimal that the operand's format must represent exactly.
//!
//! A value is decimal when it contains a `.`, starts with `+` or `-`, or is `inf`,
//! `-inf` or `nan` (any case); everything else, and anything starting with `0x`, is a
//! hex encoding. A decimal (`1.5`, `-0.0`, `+12`, `6.25e-2`) is read as an exact rational
//! and encoded only if the format holds exactly that value: nothing is ever rounded.

use mmac_compiler::exact::Dyadic;
use mmac_compiler::format::Format;
use num_bigint::BigInt;
use num_traits::Zero;

/// Decimal exponents beyond this (after accounting for the digits) put any non-zero value
/// outside every format mmac knows (f64's finite range spans about 1e-324 to 1e308).
const EXPONENT_LIMIT: i64 = 400;

/// A decimal value, exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decimal {
    /// `(-1)^negative * value`; `negative` also gives the sign of a zero.
    Finite {
        negative: bool,
        value: Dyadic,
    },
    /// A finite decimal that is not a dyadic rational (`0.1`), or too large or too small
    /// for any format.
    Inexact,
    Inf {
        negative: bool,
    },
    Nan,
}

/// Is `text` written as a decimal rather than a hex encoding?
pub fn is_decimal(text: &str) -> bool {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    !lower.starts_with("0x")
        && (t.contains('.') || t.starts_with(['+', '-']) || lower == "inf" || lower == "nan")
}

/// Read a decimal number exactly: `[+-]digits[.digits][e[+-]digits]`, `inf`, `nan`.
pub fn parse_decimal(text: &str) -> Result<Decimal, String> {
    let t = text.trim();
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Ok(Decimal::Inf { negative });
    }
    if lower == "nan" {
        if body.len() != t.len() {
            return Err(format!(
                "`{t}`: a NaN takes no sign here; write `nan` for the format's canonical NaN, or a hex encoding"
            ));
        }
        return Ok(Decimal::Nan);
    }
    let not_a_number = || format!("`{t}` is not a decimal number");
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !all_digits(int) || !all_digits(frac) {
        return Err(not_a_number());
    }
    let mut exp10: i64 = match exponent {
        None => 0,
        Some(e) => {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !all_digits(digits) {
                return Err(not_a_number());
            }
            // huge exponents saturate; the range check below decides
            let v: i64 = digits.parse().unwrap_or(i64::MAX / 4).min(i64::MAX / 4);
            if e.starts_with('-') { -v } else { v }
        }
    };
    let digits = format!("{int}{frac}");
    exp10 -= frac.len() as i64;
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Ok(Decimal::Finite {
            negative,
            value: Dyadic::zero(),
        });
    }
    // |value| lies in [10^exp10, 10^(exp10 + len))
    if exp10 > EXPONENT_LIMIT || exp10 + (digits.len() as i64) < -EXPONENT_LIMIT {
        return Ok(Decimal::Inexact);
    }
    let m: BigInt = digits.parse().map_err(|_| not_a_number())?;
    let value = if exp10 >= 0 {
        let five: BigInt = BigInt::from(5u32).pow(exp10 as u32);
        Dyadic::new(m * five, exp10)
    } else {
        // m / 10^n = (m / 5^n) * 2^-n, dyadic only if 5^n divides m
        let n = exp10.unsigned_abs();
        let five: BigInt = BigInt::from(5u32).pow(n as u32);
        if !(&m % &five).is_zero() {
            return Ok(Decimal::Inexact);
        }
        Dyadic::new(m / five, -(n as i64))
    };
    Ok(Decimal::Finite {
        negative,
        value: if negative { value.neg() } else { value },
    })
}

/// The encoding of a decimal in `format`, or why it has none.
pub fn encode_decimal(text: &str, format: &Format) -> Result<u64, String> {
    let t = text.trim();
    let f = &format.name;
    match parse_decimal(t)? {
        Decimal::Finite { negative, value } => format
            .encode_finite(negative, &value)
            .ok_or_else(|| format!("{t} is not exactly representable in {f}")),
        Decimal::Inexact => Err(format!("{t} is not exactly representable in {f}")),
        Decimal::Inf { negative } => format
            .encode_inf(negative)
            .ok_or_else(|| format!("{t}: {f} has no infinities")),
        Decimal::Nan => format
            .encode_nan()
            .ok_or_else(|| format!("{t}: {f} has no NaN")),
    }
}

/// One value of `format`: a hex encoding (which must fit the format's storage) or an exact
/// decimal.
pub fn parse(text: &str, format: &Format) -> Result<u64, String> {
    let t = text.trim();
    if is_decimal(t) {
        return encode_decimal(t, format);
    }
    let hex = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let v = u64::from_str_radix(hex, 16).map_err(|_| {
        format!("`{t}` is not a hex encoding (nor a decimal: those have a `.` or a sign, or are inf or nan)")
    })?;
    if v & !format.storage_mask() != 0 {
        return Err(format!(
            "{v:x} does not fit `{}` ({} bits)",
            format.name,
            format.storage_bits()
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmac_compiler::format::builtin;

    fn enc(text: &str, f: &str) -> Result<u64, String> {
        parse(text, &builtin(f).unwrap())
    }

    #[test]
    fn which_values_are_decimal() {
        for d in [
            "1.0", ".5", "5.", "+12", "-3", "-0", "inf", "-INF", "NaN", "+inf",
        ] {
            assert!(is_decimal(d), "{d}");
        }
        for h in ["3f800000", "0x10", "1e5", "0", "ff", "0x1.0"] {
            assert!(!is_decimal(h), "{h}");
        }
    }

    #[test]
    fn exact_decimals_encode() {
        assert_eq!(enc("1.0", "f32"), Ok(0x3f80_0000));
        assert_eq!(enc("0.5", "f16"), Ok(0x3800));
        assert_eq!(enc("-2.5e1", "f16"), Ok(0xce40));
        assert_eq!(enc("6.103515625e-5", "f16"), Ok(0x0400));
        assert_eq!(enc("-0.0", "f16"), Ok(0x8000));
        assert_eq!(enc("+0.0", "f16"), Ok(0));
        assert_eq!(enc("-inf", "f32"), Ok(0xff80_0000));
        assert_eq!(
            enc("nan", "bf16"),
            Ok(builtin("bf16").unwrap().encode_nan().unwrap())
        );
        assert_eq!(enc("+12", "s8"), Ok(12));
        assert_eq!(enc("-3", "s8"), Ok(0xfd));
        assert_eq!(enc("-3.0e0", "s32"), Ok(0xffff_fffd));
        assert_eq!(enc("1.0", "ue8m0"), Ok(0x7f));
        assert_eq!(enc("0.0e999999999999999999", "f32"), Ok(0));
    }

    #[test]
    fn inexact_decimals_are_refused_never_rounded() {
        assert_eq!(
            enc("0.1", "f16"),
            Err("0.1 is not exactly representable in f16".into())
        );
        for (v, f) in [
            ("1.0009765625", "bf16"), // 1 + 2^-10: f16 holds it, bf16 does not
            ("70000.0", "f16"),       // beyond f16's range
            ("1.0e-400", "f64"),
            ("1.0e999999999999", "f64"),
            ("0.5", "s8"),
            ("+128", "s8"),
            ("-1", "u8"),
        ] {
            let e = enc(v, f).unwrap_err();
            assert_eq!(e, format!("{v} is not exactly representable in {f}"));
        }
        assert_eq!(enc("1.0009765625", "f16"), Ok(0x3c01));
    }

    #[test]
    fn specials_need_a_format_that_has_them() {
        assert_eq!(
            enc("inf", "e4m3"),
            Err("inf: e4m3 has no infinities".into())
        );
        assert_eq!(enc("nan", "e2m1"), Err("nan: e2m1 has no NaN".into()));
        assert!(enc("inf", "s8").is_err());
        assert!(enc("-nan", "f32").unwrap_err().contains("takes no sign"));
    }

    #[test]
    fn hex_stays_the_default() {
        assert_eq!(enc("3c00", "f16"), Ok(0x3c00));
        assert_eq!(enc("0x3c00", "f16"), Ok(0x3c00));
        assert_eq!(enc("2", "f16"), Ok(2));
        assert_eq!(
            enc("10000", "f16"),
            Err("10000 does not fit `f16` (16 bits)".into())
        );
        assert!(
            enc("zz", "f16")
                .unwrap_err()
                .starts_with("`zz` is not a hex encoding")
        );
        for bad in ["1.2.3", "+", "-.", "1.0e", "1.0e+", "+1x"] {
            assert!(
                enc(bad, "f32")
                    .unwrap_err()
                    .contains("is not a decimal number"),
                "{bad}"
            );
        }
    }
}
