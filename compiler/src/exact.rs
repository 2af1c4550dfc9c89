//! Exact dyadic arithmetic: values `m * 2^q` with an arbitrary-precision integer `m`,
//! and rounding of such values to a grid or to a binary precision.
//!
//! Everything the interpreter computes goes through this module, so every intermediate
//! is exact; rounding happens only where a spec says so, by [`Dyadic::round_to_grid`] and
//! [`Dyadic::round_to_precision`].

use num_bigint::{BigInt, Sign};
use num_integer::Integer;
use num_traits::{One, Signed, Zero};
use std::cmp::Ordering;
use std::fmt;

/// A rounding mode: how the bits below a grid point are dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rounding {
    /// Truncate toward zero (RZ).
    TowardZero,
    /// Floor, toward negative infinity (RD).
    Down,
    /// Ceiling, toward positive infinity (RU).
    Up,
    /// Round to nearest, ties to even (RNE).
    NearestEven,
    /// Round to nearest, ties away from zero (RNA).
    NearestAway,
}

impl Rounding {
    pub const ALL: [Rounding; 5] = [
        Rounding::TowardZero,
        Rounding::Down,
        Rounding::Up,
        Rounding::NearestEven,
        Rounding::NearestAway,
    ];

    /// The keyword a spec uses for this mode.
    pub fn keyword(self) -> &'static str {
        match self {
            Rounding::TowardZero => "toward_zero",
            Rounding::Down => "down",
            Rounding::Up => "up",
            Rounding::NearestEven => "nearest_even",
            Rounding::NearestAway => "nearest_away",
        }
    }

    /// The short name used in papers and tables (RZ, RD, ...).
    pub fn short(self) -> &'static str {
        match self {
            Rounding::TowardZero => "RZ",
            Rounding::Down => "RD",
            Rounding::Up => "RU",
            Rounding::NearestEven => "RNE",
            Rounding::NearestAway => "RNA",
        }
    }

    pub fn from_keyword(s: &str) -> Option<Rounding> {
        Rounding::ALL.into_iter().find(|r| r.keyword() == s)
    }
}

/// An exact value `mantissa * 2^exponent`. Zero is kept with its exponent (the sign of
/// zero is tracked by callers that need it, not here).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dyadic {
    pub mantissa: BigInt,
    pub exponent: i64,
}

impl Dyadic {
    pub fn zero() -> Dyadic {
        Dyadic {
            mantissa: BigInt::zero(),
            exponent: 0,
        }
    }

    pub fn new(mantissa: impl Into<BigInt>, exponent: i64) -> Dyadic {
        Dyadic {
            mantissa: mantissa.into(),
            exponent,
        }
    }

    /// `(-1)^negative * magnitude * 2^exponent`.
    pub fn from_parts(negative: bool, magnitude: u128, exponent: i64) -> Dyadic {
        let m = BigInt::from(magnitude);
        Dyadic {
            mantissa: if negative { -m } else { m },
            exponent,
        }
    }

    pub fn pow2(exponent: i64) -> Dyadic {
        Dyadic::new(1, exponent)
    }

    pub fn is_zero(&self) -> bool {
        self.mantissa.is_zero()
    }

    pub fn is_negative(&self) -> bool {
        self.mantissa.sign() == Sign::Minus
    }

    pub fn neg(&self) -> Dyadic {
        Dyadic {
            mantissa: -&self.mantissa,
            exponent: self.exponent,
        }
    }

    pub fn abs(&self) -> Dyadic {
        Dyadic {
            mantissa: self.mantissa.abs(),
            exponent: self.exponent,
        }
    }

    pub fn mul(&self, other: &Dyadic) -> Dyadic {
        Dyadic {
            mantissa: &self.mantissa * &other.mantissa,
            exponent: self.exponent + other.exponent,
        }
    }

    /// Multiply by `2^k`.
    pub fn scale(&self, k: i64) -> Dyadic {
        Dyadic {
            mantissa: self.mantissa.clone(),
            exponent: self.exponent + k,
        }
    }

    pub fn add(&self, other: &Dyadic) -> Dyadic {
        if self.is_zero() {
            return other.clone();
        }
        if other.is_zero() {
            return self.clone();
        }
        let e = self.exponent.min(other.exponent);
        let a = &self.mantissa << (self.exponent - e) as usize;
        let b = &other.mantissa << (other.exponent - e) as usize;
        Dyadic {
            mantissa: a + b,
            exponent: e,
        }
    }

    pub fn sum<'a>(items: impl IntoIterator<Item = &'a Dyadic>) -> Dyadic {
        items.into_iter().fold(Dyadic::zero(), |acc, x| acc.add(x))
    }

    pub fn cmp_value(&self, other: &Dyadic) -> Ordering {
        match self.add(&other.neg()).mantissa.sign() {
            Sign::Minus => Ordering::Less,
            Sign::NoSign => Ordering::Equal,
            Sign::Plus => Ordering::Greater,
        }
    }

    /// `floor(log2(|x|))` for nonzero `x`: the exponent of the leading bit.
    pub fn leading_exponent(&self) -> Option<i64> {
        if self.is_zero() {
            None
        } else {
            Some(self.mantissa.bits() as i64 - 1 + self.exponent)
        }
    }

    /// Round to a multiple of `2^q` with the given mode. The result has exponent `q`
    /// (or is zero).
    pub fn round_to_grid(&self, q: i64, mode: Rounding) -> Dyadic {
        if self.exponent >= q || self.is_zero() {
            return self.clone();
        }
        let shift = (q - self.exponent) as usize;
        let divisor = BigInt::one() << shift;
        // floor division and remainder in [0, divisor)
        let (floor, rem) = self.mantissa.div_mod_floor(&divisor);
        if rem.is_zero() {
            return Dyadic {
                mantissa: floor,
                exponent: q,
            };
        }
        let half = BigInt::one() << (shift - 1);
        let up = match mode {
            Rounding::Down => false,
            Rounding::Up => true,
            Rounding::TowardZero => self.is_negative(),
            Rounding::NearestEven | Rounding::NearestAway => match rem.cmp(&half) {
                Ordering::Less => false,
                Ordering::Greater => true,
                Ordering::Equal => {
                    if mode == Rounding::NearestEven {
                        floor.is_odd()
                    } else {
                        // away from zero: up for positive values, floor for negative ones
                        !self.is_negative()
                    }
                }
            },
        };
        Dyadic {
            mantissa: if up { floor + 1 } else { floor },
            exponent: q,
        }
    }

    /// Round to `fraction_bits` bits after the leading bit, with the leading bit's exponent
    /// clamped below at `min_exponent` (the subnormal range of a format). Returns the
    /// rounded value; its leading exponent may exceed the input's by one after rounding up.
    pub fn round_to_precision(
        &self,
        fraction_bits: u32,
        min_exponent: i64,
        mode: Rounding,
    ) -> Dyadic {
        match self.leading_exponent() {
            None => self.clone(),
            Some(e) => {
                let e = e.max(min_exponent);
                self.round_to_grid(e - fraction_bits as i64, mode)
            }
        }
    }

    /// The value as an integer if it is one.
    pub fn to_integer(&self) -> Option<BigInt> {
        if self.exponent >= 0 {
            Some(&self.mantissa << self.exponent as usize)
        } else {
            let shift = self.exponent.unsigned_abs();
            let exact =
                self.is_zero() || self.mantissa.trailing_zeros().is_some_and(|tz| tz >= shift);
            exact.then(|| &self.mantissa >> shift as usize)
        }
    }

    /// A nearby f64, for display only.
    pub fn to_f64_lossy(&self) -> f64 {
        if self.is_zero() {
            return 0.0;
        }
        let bits = self.mantissa.bits() as i64;
        let keep = 53.min(bits);
        let shifted: BigInt = &self.mantissa >> (bits - keep) as usize;
        let m = i64::try_from(&shifted).unwrap_or(0) as f64; // exact: at most 53 bits
        let mut e = self.exponent + bits - keep;
        let mut v = m;
        // scale in steps so that intermediate powers of two stay normal
        while e > 0 {
            let s = e.min(1000);
            v *= 2f64.powi(s as i32);
            e -= s;
        }
        while e < 0 {
            let s = (-e).min(1000);
            v *= 2f64.powi(-(s as i32));
            e += s;
        }
        v
    }
}

impl fmt::Display for Dyadic {
    /// Shows the value as `m*2^q` with an odd `m` (or `0`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_zero() {
            return write!(f, "0");
        }
        let tz = self.mantissa.trailing_zeros().unwrap_or(0);
        let m: BigInt = &self.mantissa >> tz as usize;
        write!(f, "{}*2^{}", m, self.exponent + tz as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(m: i64, e: i64) -> Dyadic {
        Dyadic::new(m, e)
    }

    #[test]
    fn round_to_grid_modes() {
        // 2.75 = 11 * 2^-2 rounded to integers
        let x = d(11, -2);
        assert_eq!(x.round_to_grid(0, Rounding::TowardZero), d(2, 0));
        assert_eq!(x.round_to_grid(0, Rounding::Down), d(2, 0));
        assert_eq!(x.round_to_grid(0, Rounding::Up), d(3, 0));
        assert_eq!(x.round_to_grid(0, Rounding::NearestEven), d(3, 0));
        let y = d(-11, -2);
        assert_eq!(y.round_to_grid(0, Rounding::TowardZero), d(-2, 0));
        assert_eq!(y.round_to_grid(0, Rounding::Down), d(-3, 0));
        assert_eq!(y.round_to_grid(0, Rounding::Up), d(-2, 0));
        // ties
        assert_eq!(d(5, -1).round_to_grid(0, Rounding::NearestEven), d(2, 0));
        assert_eq!(d(7, -1).round_to_grid(0, Rounding::NearestEven), d(4, 0));
        assert_eq!(d(5, -1).round_to_grid(0, Rounding::NearestAway), d(3, 0));
        assert_eq!(d(-5, -1).round_to_grid(0, Rounding::NearestAway), d(-3, 0));
        assert_eq!(d(-5, -1).round_to_grid(0, Rounding::NearestEven), d(-2, 0));
    }

    #[test]
    fn precision_and_subnormal_floor() {
        // 1.0111b rounded to 2 fraction bits, RNE -> 1.10b
        let x = d(0b10111, -4);
        assert_eq!(
            x.round_to_precision(2, -100, Rounding::NearestEven)
                .cmp_value(&d(0b110, -2)),
            Ordering::Equal
        );
        // below the floor the grid stays at min_exponent - fraction_bits
        let tiny = d(3, -10);
        assert_eq!(
            tiny.round_to_precision(2, -5, Rounding::TowardZero),
            d(0, -7)
        );
    }

    #[test]
    fn add_and_compare() {
        let x = d(3, -2).add(&d(1, 4));
        assert_eq!(x.cmp_value(&d(67, -2)), Ordering::Equal);
        assert_eq!(x.leading_exponent(), Some(4));
        assert_eq!(d(1, 0).cmp_value(&d(2, -1)), Ordering::Equal);
        assert_eq!(d(-1, 0).cmp_value(&d(1, -1)), Ordering::Less);
    }
}
