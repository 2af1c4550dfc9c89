//! Numbers as circuits: decoding an element of a float format into flags and an exact
//! value, shifting with each rounding mode, rounding to a precision, encoding, and the
//! IEEE-style rounded operations of sequential and composed pipelines ([`Num`]): the
//! same definitions as `format.rs`, `exact.rs` and `ieee.rs`, written as gates.

use super::circuit::{Circuit, Wire};
use crate::exact::Rounding;
use crate::format::{FloatFormat, Format, FormatKind, Specials};
use crate::ir::RoundedOp;

/// An element decoded: its flags and, when finite, `(-1)^neg * sig * 2^(exp -
/// fraction_bits)` (`exp` is what a max-exponent search sees).
#[derive(Clone, Copy, Debug)]
pub struct Unpacked {
    pub nan: Wire,
    pub inf: Wire,
    pub neg: Wire,
    /// A finite zero.
    pub zero: Wire,
    pub exp: Wire,
    pub sig: Wire,
    pub fraction_bits: u32,
}

impl Unpacked {
    /// The finite value.
    pub fn value(&self, c: &mut Circuit) -> Value {
        let f = c.int(self.fraction_bits as i64, c.exp_bits());
        Value {
            neg: self.neg,
            mag: self.sig,
            lsb: c.sub(self.exp, f),
        }
    }
}

/// An exact finite value `(-1)^neg * mag * 2^lsb` (`lsb` a signed exponent wire).
#[derive(Clone, Copy, Debug)]
pub struct Value {
    pub neg: Wire,
    pub mag: Wire,
    pub lsb: Wire,
}

fn float(f: &Format) -> &FloatFormat {
    match &f.kind {
        FormatKind::Float(x) => x,
        FormatKind::Int(_) => unreachable!("validated: a float format here"),
    }
}

/// Decode an element of a float format; `flush` reads subnormals (and -0) as +0.
pub fn decode(c: &mut Circuit, f: &FloatFormat, raw: Wire, flush: bool) -> Unpacked {
    let (e, m) = (f.exponent_bits, f.mantissa_bits);
    let code = c.slice(raw, f.ignored_low_bits, f.code_bits());
    let man = (m > 0).then(|| c.slice(code, 0, m));
    let exp_field = c.slice(code, m, e);
    let neg = if f.signed {
        c.bit(code, e + m)
    } else {
        c.bit_const(false)
    };
    let ones = c.konst((1u64 << e) - 1, e);
    let all_ones = c.eq(exp_field, ones);
    let man_zero = match man {
        Some(x) => c.is_zero(x),
        None => c.bit_const(true),
    };
    let man_ones = match man {
        Some(x) => {
            let o = c.konst((1u64 << m) - 1, m);
            c.eq(x, o)
        }
        None => c.bit_const(true),
    };
    let exp_zero = c.is_zero(exp_field);
    let no = c.bit_const(false);
    let (nan, inf) = match f.specials {
        Specials::Ieee => {
            let man_any = c.not(man_zero);
            (c.and(all_ones, man_any), c.and(all_ones, man_zero))
        }
        Specials::Fn => (c.and(all_ones, man_ones), no),
        Specials::Fnuz => {
            let z = c.and(exp_zero, man_zero);
            (c.and(neg, z), no)
        }
        Specials::None => (no, no),
    };
    let subnormal = if f.subnormals { exp_zero } else { no };
    let biased = c.zext(exp_field, c.exp_bits());
    let bias = c.int(f.bias as i64, c.exp_bits());
    let normal_exp = c.sub(biased, bias);
    let min_exp = c.int(f.min_exponent() as i64, c.exp_bits());
    let exp = c.mux(subnormal, min_exp, normal_exp);
    let implicit = c.not(subnormal);
    let mut sig = match man {
        Some(x) => c.concat(&[implicit, x]),
        None => implicit,
    };
    let mut neg = neg;
    if flush {
        let z = c.konst(0u32, sig.width);
        sig = c.mux(subnormal, z, sig);
        let keep = c.not(subnormal);
        neg = c.and(neg, keep);
    }
    let zero = c.is_zero(sig);
    Unpacked {
        nan,
        inf,
        neg,
        zero,
        exp,
        sig,
        fraction_bits: m,
    }
}

/// `round(mag * 2^-shift)` to an integer of `width` bits by `mode` (`neg` is the
/// value's sign, for the directed modes): a right shift with rounding when `shift > 0`, a
/// left shift by `-shift` otherwise. The caller knows the result fits `width`.
pub fn shift_round(
    c: &mut Circuit,
    mag: Wire,
    shift: Wire,
    mode: Rounding,
    neg: Wire,
    width: u32,
) -> Wire {
    let zero = c.int(0, c.exp_bits());
    let right = c.slt(zero, shift);
    // left: exact
    let base = c.zext(mag, width.max(mag.width));
    let amount = c.neg(shift);
    let left = c.shl(base, amount);
    let left = c.zext(left, width);
    if c.constant(right).is_some_and(num_traits::Zero::is_zero) {
        return left;
    }
    // right: every shift past the magnitude's top rounds alike, so clamp it
    let wm = mag.width;
    let cap = c.int(wm as i64 + 1, c.exp_bits());
    let below = c.slt(shift, cap);
    let clamped = c.mux(below, shift, cap);
    let amount_bits = 32 - (wm + 1).leading_zeros();
    let amount = c.slice(clamped, 0, amount_bits);
    let wide = wm + 2;
    let m2 = c.zext(mag, wide);
    let whole = c.shr(m2, amount);
    let back = c.shl(whole, amount);
    let rest = c.sub(m2, back);
    let one = c.konst(1u32, wide);
    let unit = c.shl(one, amount);
    let one_bit = one_of(c, amount);
    let half = c.shr(unit, one_bit);
    let inexact = c.any(rest);
    let inc = match mode {
        Rounding::TowardZero => c.bit_const(false),
        Rounding::Down => c.and(neg, inexact),
        Rounding::Up => {
            let pos = c.not(neg);
            c.and(pos, inexact)
        }
        Rounding::NearestEven => {
            let above = c.ult(half, rest);
            let tie = c.eq(rest, half);
            let odd = c.bit(whole, 0);
            let up = c.and(tie, odd);
            c.or(above, up)
        }
        Rounding::NearestAway => {
            let below_half = c.ult(rest, half);
            c.not(below_half)
        }
    };
    let inc = c.zext(inc, wide);
    let rounded = c.add(whole, inc);
    let rounded = c.zext(rounded, width);
    c.mux(right, rounded, left)
}

/// The constant 1 at the width of `w`.
fn one_of(c: &mut Circuit, w: Wire) -> Wire {
    c.konst(1u32, w.width)
}

/// The exponent of the leading bit of a nonzero value.
pub fn leading_exponent(c: &mut Circuit, v: &Value) -> Wire {
    let lead = c.leading_one(v.mag, c.exp_bits());
    c.add(v.lsb, lead)
}

/// A value rounded to a precision: `value.mag` (`fraction_bits + 2` bits) times
/// `2^(exponent - fraction_bits)`, where `exponent` is the binade of the value before
/// rounding, clamped to the minimum exponent; a carry out of the rounding sets the
/// magnitude's top bit. Keeping the binade, as a datapath does, spares finding the
/// leading one again.
#[derive(Clone, Copy, Debug)]
pub struct Rounded {
    pub value: Value,
    pub exponent: Wire,
    pub fraction_bits: u32,
    pub min_exponent: i64,
}

impl Rounded {
    /// The exponent of the leading bit (for a result below `2^min_exponent`, the minimum
    /// exponent): the binade, one more after a carry.
    pub fn top_exponent(&self, c: &mut Circuit) -> Wire {
        let carry = c.bit(self.value.mag, self.fraction_bits + 1);
        let one = c.int(1, c.exp_bits());
        let up = c.add(self.exponent, one);
        c.mux(carry, up, self.exponent)
    }

    /// Whether the result is nonzero with its leading bit above `2^emax` (an overflow
    /// into a format whose largest binade is `emax`).
    pub fn above(&self, c: &mut Circuit, emax: i64) -> Wire {
        let nonzero = c.any(self.value.mag);
        let top = self.top_exponent(c);
        let emax = c.int(emax, c.exp_bits());
        let above = c.slt(emax, top);
        c.and(nonzero, above)
    }

    /// Whether the result is below `2^min_exponent` (zero included).
    pub fn tiny(&self, c: &mut Circuit) -> Wire {
        let p = self.fraction_bits;
        let top = c.slice(self.value.mag, p, 2);
        c.is_zero(top)
    }
}

/// Round to `fraction_bits` bits below the leading one, never below `min_exponent`'s
/// grid (`Dyadic::round_to_precision`).
pub fn round_precision(
    c: &mut Circuit,
    v: &Value,
    fraction_bits: u32,
    min_exponent: i64,
    mode: Rounding,
) -> Rounded {
    let e = leading_exponent(c, v);
    let emin = c.int(min_exponent, c.exp_bits());
    let low = c.slt(e, emin);
    let e = c.mux(low, emin, e);
    let p = c.int(fraction_bits as i64, c.exp_bits());
    let q = c.sub(e, p);
    let shift = c.sub(q, v.lsb);
    let mag = shift_round(c, v.mag, shift, mode, v.neg, fraction_bits + 2);
    Rounded {
        value: Value {
            neg: v.neg,
            mag,
            lsb: q,
        },
        exponent: e,
        fraction_bits,
        min_exponent,
    }
}

/// The encoding of a rounded value with the sign `neg`: from its binade and carry when
/// the rounding was to the format's own precision and exponent range, as a datapath
/// encodes it; otherwise as any exact value ([`encode_finite`]).
pub fn encode_rounded(c: &mut Circuit, f: &Format, r: &Rounded, neg: Wire) -> Wire {
    let ff = float(f);
    let m = ff.mantissa_bits;
    let direct = ff.subnormals
        && m > 0
        && r.fraction_bits == m
        && r.min_exponent == ff.min_exponent() as i64
        && ff.specials != Specials::Fnuz;
    if !direct {
        return encode_finite(c, f, &Value { neg, ..r.value });
    }
    let kept = r.value.mag;
    let top = r.top_exponent(c);
    let tiny = r.tiny(c);
    let offset = c.int(1 - ff.min_exponent() as i64, c.exp_bits());
    let field = c.add(top, offset);
    let field = c.slice(field, 0, ff.exponent_bits);
    let z = c.konst(0u32, ff.exponent_bits);
    let exp_field = c.mux(tiny, z, field);
    // after a carry the magnitude is 2^(m+1): its low m bits are zero, as the fraction is
    let mut parts = vec![];
    if ff.signed {
        parts.push(neg);
    }
    parts.push(exp_field);
    parts.push(c.slice(kept, 0, m));
    if ff.ignored_low_bits > 0 {
        parts.push(c.konst(0u32, ff.ignored_low_bits));
    }
    c.concat(&parts)
}

/// The largest finite value of a format, with a sign.
pub fn max_finite(c: &mut Circuit, f: &FloatFormat, neg: Wire) -> Value {
    let m = f.mantissa_bits;
    Value {
        neg,
        mag: c.konst(f.max_significand(), m + 2),
        lsb: c.int(f.max_exponent() as i64 - m as i64, c.exp_bits()),
    }
}

/// The encoding of a finite value the format holds exactly (the caller has rounded it);
/// `v.neg` is the sign, also of a zero.
pub fn encode_finite(c: &mut Circuit, f: &Format, v: &Value) -> Wire {
    let ff = float(f);
    let (e, m) = (ff.exponent_bits, ff.mantissa_bits);
    let zero = c.is_zero(v.mag);
    let le = leading_exponent(c, v);
    let emin = c.int(ff.min_exponent() as i64, c.exp_bits());
    let sub = if ff.subnormals {
        c.slt(le, emin)
    } else {
        c.bit_const(false)
    };
    let offset = c.int(
        -(ff.min_exponent() as i64) + if ff.subnormals { 1 } else { 0 },
        c.exp_bits(),
    );
    let field = c.add(le, offset);
    let field = c.slice(field, 0, e);
    let z = c.konst(0u32, e);
    let tiny = c.or(sub, zero);
    let exp_field = c.mux(tiny, z, field);
    let scale = c.mux(sub, emin, le);
    let mw = c.int(m as i64, c.exp_bits());
    let grid = c.sub(scale, mw);
    let shift = c.sub(grid, v.lsb);
    let sig = shift_round(c, v.mag, shift, Rounding::TowardZero, v.neg, m + 1);
    let mut parts = vec![];
    if ff.signed {
        let sign = if ff.specials == Specials::Fnuz {
            let nonzero = c.not(zero);
            c.and(v.neg, nonzero)
        } else {
            v.neg
        };
        parts.push(sign);
    }
    parts.push(exp_field);
    if m > 0 {
        parts.push(c.slice(sig, 0, m));
    }
    if ff.ignored_low_bits > 0 {
        parts.push(c.konst(0u32, ff.ignored_low_bits));
    }
    c.concat(&parts)
}

/// The format's canonical NaN (its largest finite value's code where it has none, which
/// no checked result reaches).
pub fn nan_code(c: &mut Circuit, f: &Format) -> Wire {
    let bits = f.storage_bits();
    c.konst(f.encode_nan().unwrap_or(0), bits)
}

/// The format's infinity with a sign (its NaN where it has none).
pub fn inf_code(c: &mut Circuit, f: &Format, neg: Wire) -> Wire {
    match (f.encode_inf(false), f.encode_inf(true)) {
        (Some(p), Some(n)) => {
            let bits = f.storage_bits();
            let (p, n) = (c.konst(p, bits), c.konst(n, bits));
            c.mux(neg, n, p)
        }
        _ => nan_code(c, f),
    }
}

/// A value with IEEE's special cases and a signed zero.
#[derive(Clone, Copy, Debug)]
pub struct Num {
    pub nan: Wire,
    pub inf: Wire,
    pub value: Value,
}

impl Num {
    /// A decoded element.
    pub fn of(c: &mut Circuit, u: &Unpacked) -> Num {
        Num {
            nan: u.nan,
            inf: u.inf,
            value: u.value(c),
        }
    }

    /// +0.
    pub fn zero(c: &mut Circuit) -> Num {
        Num::signed_zero(c, false)
    }

    /// +0, or -0 where `negative`.
    pub fn signed_zero(c: &mut Circuit, negative: bool) -> Num {
        let no = c.bit_const(false);
        let neg = c.bit_const(negative);
        Num {
            nan: no,
            inf: no,
            value: Value {
                neg,
                mag: c.konst(0u32, 1),
                lsb: c.int(0, c.exp_bits()),
            },
        }
    }

    /// A finite zero (a zero magnitude, not a special).
    fn finite_zero(&self, c: &mut Circuit) -> Wire {
        let special = c.or(self.nan, self.inf);
        let fin = c.not(special);
        let z = c.is_zero(self.value.mag);
        c.and(fin, z)
    }
}

/// Choose between two values by a one-bit select (magnitudes widened to the wider).
pub fn select(c: &mut Circuit, s: Wire, x: &Value, y: &Value) -> Value {
    let w = x.mag.width.max(y.mag.width);
    let (xm, ym) = (c.zext(x.mag, w), c.zext(y.mag, w));
    Value {
        neg: c.mux(s, x.neg, y.neg),
        mag: c.mux(s, xm, ym),
        lsb: c.mux(s, x.lsb, y.lsb),
    }
}

/// The exact product of two numbers, with IEEE's special cases (`0 * Inf` is NaN).
pub fn multiply(c: &mut Circuit, x: &Num, y: &Num) -> Num {
    let xz = x.finite_zero(c);
    let yz = y.finite_zero(c);
    let x_inf_zero = c.and(x.inf, yz);
    let y_inf_zero = c.and(y.inf, xz);
    let nan = c.or_all(&[x.nan, y.nan, x_inf_zero, y_inf_zero]);
    let any_inf = c.or(x.inf, y.inf);
    let not_nan = c.not(nan);
    let inf = c.and(any_inf, not_nan);
    let w = x.value.mag.width + y.value.mag.width;
    let (xm, ym) = (c.zext(x.value.mag, w), c.zext(y.value.mag, w));
    Num {
        nan,
        inf,
        value: Value {
            neg: c.xor(x.value.neg, y.value.neg),
            mag: c.mul(xm, ym),
            lsb: c.add(x.value.lsb, y.value.lsb),
        },
    }
}

/// Round an exact value into an arithmetic format with IEEE's overflow rules and the
/// optional flush of subnormal results (`ieee::round`).
pub fn round(c: &mut Circuit, v: &Value, op: &RoundedOp) -> Num {
    let f = float(&op.format);
    let rounded = round_precision(c, v, f.mantissa_bits, f.min_exponent() as i64, op.rounding);
    let r = rounded.value;
    let overflow = rounded.above(c, f.max_exponent() as i64);
    let to_inf = match op.rounding {
        Rounding::NearestEven | Rounding::NearestAway => c.bit_const(true),
        Rounding::TowardZero => c.bit_const(false),
        Rounding::Up => c.not(v.neg),
        Rounding::Down => v.neg,
    };
    let max = max_finite(c, f, v.neg);
    let mut value = select(c, overflow, &max, &r);
    if op.flush_keep_sign {
        let tiny = rounded.tiny(c);
        let z = c.konst(0u32, value.mag.width);
        value.mag = c.mux(tiny, z, value.mag);
    }
    let no = c.bit_const(false);
    Num {
        nan: no,
        inf: c.and(overflow, to_inf),
        value,
    }
}

/// `x + y`, rounded by `op`, with IEEE's special cases and signed zeros (`ieee::add`).
pub fn add(c: &mut Circuit, x: &Num, y: &Num, op: &RoundedOp) -> Num {
    let opposite = c.xor(x.value.neg, y.value.neg);
    let both_inf = c.and(x.inf, y.inf);
    let inf_clash = c.and(both_inf, opposite);
    let nan = c.or_all(&[x.nan, y.nan, inf_clash]);
    let any_inf = c.or(x.inf, y.inf);
    let not_nan = c.not(nan);
    let inf = c.and(any_inf, not_nan);
    let inf_neg = c.mux(x.inf, x.value.neg, y.value.neg);
    // The sum in a window below the larger operand's leading bit, the smaller one's bits
    // beneath the window folded into a sticky bit: the window holds the larger operand
    // whole and `precision + 4` bits more, so when the smaller one reaches below it (the
    // exponents two or more apart) the sum's leading bit is at most one below the
    // larger's, the rounding point at least two bits above the sticky bit, and every
    // rounding mode sees what it would see in the exact sum.
    let p = float(&op.format).mantissa_bits;
    let w = x.value.mag.width.max(y.value.mag.width);
    let window = w + p + 4;
    let floor = c.int(-(1i64 << (c.exp_bits() - 2)), c.exp_bits());
    let top = |c: &mut Circuit, v: &Value| {
        let t = leading_exponent(c, v);
        // a zero never leads
        let z = c.is_zero(v.mag);
        c.mux(z, floor, t)
    };
    let (tx, ty) = (top(c, &x.value), top(c, &y.value));
    let y_larger = c.slt(tx, ty);
    let x_leads = c.not(y_larger);
    let big = select(c, x_leads, &x.value, &y.value);
    let small = select(c, x_leads, &y.value, &x.value);
    let t = c.mux(x_leads, tx, ty);
    let headroom = c.int(window as i64 - 1, c.exp_bits());
    let grid = c.sub(t, headroom);
    let width = window + 3;
    // the larger operand: whole on the grid (its lead at the window's top)
    let shift = c.sub(grid, big.lsb);
    let b = shift_round(c, big.mag, shift, Rounding::TowardZero, big.neg, width);
    // the smaller: its bits on the grid, and whether any lie below it
    let shift = c.sub(grid, small.lsb);
    let s = shift_round(c, small.mag, shift, Rounding::TowardZero, small.neg, width);
    let zero_shift = c.int(0, c.exp_bits());
    let back = c.sub(zero_shift, shift);
    let restored = shift_round(c, s, back, Rounding::TowardZero, small.neg, w.max(width));
    let whole = c.zext(small.mag, w.max(width));
    let sticky = c.ne(restored, whole);
    // both doubled, the sticky bit as the smaller's lowest: units of 2^(grid - 1)
    let one = c.konst(1u32, width);
    let b = c.shl(b, one);
    let s = c.shl(s, one);
    let st = c.zext(sticky, width);
    let s = c.or(s, st);
    let nb = c.neg(b);
    let b = c.mux(big.neg, nb, b);
    let ns = c.neg(s);
    let s = c.mux(small.neg, ns, s);
    let sum = c.add(b, s);
    let sneg = c.bit(sum, width - 1);
    let flipped = c.neg(sum);
    let mag = c.mux(sneg, flipped, sum);
    let exact_zero = c.is_zero(mag);
    let one_exp = c.int(1, c.exp_bits());
    let lsb = c.sub(grid, one_exp);
    let rounded = round(
        c,
        &Value {
            neg: sneg,
            mag,
            lsb,
        },
        op,
    );
    // an exact zero: same-signed zeros keep their sign, otherwise +0 (-0 rounding down)
    let xz = c.is_zero(x.value.mag);
    let yz = c.is_zero(y.value.mag);
    let same = c.not(opposite);
    let keep = c.and_all(&[xz, yz, same]);
    let down = c.bit_const(op.rounding == Rounding::Down);
    let zero_neg = c.mux(keep, x.value.neg, down);
    let zero = Value {
        neg: zero_neg,
        mag: c.konst(0u32, 1),
        lsb,
    };
    let value = select(c, exact_zero, &zero, &rounded.value);
    let fin_inf = c.and(rounded.inf, not_nan);
    let not_zero = c.not(exact_zero);
    let fin_inf = c.and(fin_inf, not_zero);
    let inf_any = c.or(inf, fin_inf);
    let neg = c.mux(inf, inf_neg, value.neg);
    Num {
        nan,
        inf: inf_any,
        value: Value { neg, ..value },
    }
}

/// The encoding of a number in a format (a NaN as its canonical NaN).
pub fn encode(c: &mut Circuit, f: &Format, n: &Num) -> Wire {
    let fin = encode_finite(c, f, &n.value);
    let inf = inf_code(c, f, n.value.neg);
    let nan = nan_code(c, f);
    let x = c.mux(n.inf, inf, fin);
    c.mux(n.nan, nan, x)
}

/// Whether a raw element of a format is a NaN.
pub fn is_nan(c: &mut Circuit, f: &Format, raw: Wire) -> Wire {
    match &f.kind {
        FormatKind::Float(ff) => decode(c, ff, raw, false).nan,
        FormatKind::Int(_) => c.bit_const(false),
    }
}

/// The NaN of `d` that carries the NaN `raw` of `src`, quieted (`Format::nan_carrying`);
/// `None` when `d` has no payloads.
pub fn nan_carrying(c: &mut Circuit, d: &Format, src: &Format, raw: Wire) -> Option<Wire> {
    let (df, sf) = (d.as_float()?, src.as_float()?);
    if df.specials != Specials::Ieee || df.mantissa_bits == 0 {
        return None;
    }
    let (md, ms) = (df.mantissa_bits, sf.mantissa_bits);
    let code = c.slice(raw, sf.ignored_low_bits, sf.code_bits());
    let fraction = if ms > 0 {
        let f = c.slice(code, 0, ms);
        match md.cmp(&ms) {
            std::cmp::Ordering::Greater => {
                let z = c.konst(0u32, md - ms);
                c.concat(&[f, z])
            }
            std::cmp::Ordering::Equal => f,
            std::cmp::Ordering::Less => c.slice(f, ms - md, md),
        }
    } else {
        c.konst(0u32, md)
    };
    let quiet = c.konst(1u64 << (md - 1), md);
    let fraction = c.or(fraction, quiet);
    let neg = if sf.signed {
        c.bit(code, sf.exponent_bits + ms)
    } else {
        c.bit_const(false)
    };
    let exponent = c.konst((1u64 << df.exponent_bits) - 1, df.exponent_bits);
    let mut parts = vec![];
    if df.signed {
        parts.push(neg);
    }
    parts.extend([exponent, fraction]);
    if df.ignored_low_bits > 0 {
        parts.push(c.konst(0u32, df.ignored_low_bits));
    }
    Some(c.concat(&parts))
}
