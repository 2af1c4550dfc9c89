//! The inputs of one dot product ([`Input`]: raw encodings of c, a, b and the scale
//! factors), built from exact values: a product's value is factored into an `a` and a `b`
//! element the formats represent ([`split_product`]); [`Sketch`] places values on lanes
//! and picks the block scale factors that carry a product's exponent when the formats
//! alone cannot; [`float_at`] draws an element at a chosen exponent for random searches.
//! The probe battery ([`crate::probes`]) and the witness search ([`crate::witness`]) build
//! their inputs here.

use mmac_compiler::engine::Operands;
use mmac_compiler::exact::{Dyadic, Rounding};
use mmac_compiler::format::{Decoded, FloatFormat, Format};
use mmac_compiler::ir::Instruction;
use num_traits::ToPrimitive;

/// The raw inputs of one dot-product-add.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Input {
    pub c: u64,
    pub a: Vec<u64>,
    pub b: Vec<u64>,
    /// One scale factor per block of k (empty without block scales).
    pub sa: Vec<u64>,
    pub sb: Vec<u64>,
}

impl Input {
    /// Every element +0, c +0, every scale factor 1 (the neutral scale).
    pub fn zeros(inst: &Instruction) -> Input {
        let ar = &inst.arithmetic;
        let one_scale = ar
            .scale
            .as_ref()
            .and_then(|s| pow2(&s.format, 0, false))
            .unwrap_or(0);
        Input {
            c: zero(&ar.c, false),
            a: vec![zero(&ar.a, false); inst.k()],
            b: vec![zero(&ar.b, false); inst.k()],
            sa: vec![one_scale; inst.scale_count()],
            sb: vec![one_scale; inst.scale_count()],
        }
    }

    pub fn operands(&self) -> Operands<'_> {
        Operands {
            c: self.c,
            a: &self.a,
            b: &self.b,
            sa: &self.sa,
            sb: &self.sb,
        }
    }

    /// The input as a vector-file case without its `d=` field:
    /// `c=HEX a=HEX,... b=HEX,... [sa=HEX,... sb=HEX,...]`.
    pub fn case_fields(&self, inst: &Instruction) -> String {
        let ar = &inst.arithmetic;
        let mut s = format!(
            "c={} a={} b={}",
            hex(&ar.c, self.c),
            hex_list(&ar.a, &self.a),
            hex_list(&ar.b, &self.b)
        );
        if let Some(sc) = &ar.scale {
            s.push_str(&format!(
                " sa={} sb={}",
                hex_list(&sc.format, &self.sa),
                hex_list(&sc.format, &self.sb)
            ));
        }
        s
    }

    /// The input as `mmac run` arguments, compactly: a and b up to their last lane that is
    /// not +0, followed by `--pad` (which fills the missing lanes with zeros) when lanes
    /// were left out; scale factors in full.
    pub fn run_arguments(&self, inst: &Instruction) -> String {
        self.run_arguments_with(inst, hex)
    }

    /// [`Input::run_arguments`] with each element written by `element` (hex codes, or
    /// exact decimals).
    pub fn run_arguments_with(
        &self,
        inst: &Instruction,
        element: impl Fn(&Format, u64) -> String,
    ) -> String {
        let ar = &inst.arithmetic;
        let (za, zb) = (zero(&ar.a, false), zero(&ar.b, false));
        let used = (0..inst.k())
            .rev()
            .find(|&i| self.a[i] != za || self.b[i] != zb)
            .map_or(1, |i| i + 1);
        let list = |f: &Format, v: &[u64]| {
            v.iter()
                .map(|&x| element(f, x))
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut s = format!(
            "--c {} --a {} --b {}",
            element(&ar.c, self.c),
            list(&ar.a, &self.a[..used]),
            list(&ar.b, &self.b[..used])
        );
        if let Some(sc) = &ar.scale {
            s.push_str(&format!(
                " --sa {} --sb {}",
                list(&sc.format, &self.sa),
                list(&sc.format, &self.sb)
            ));
        }
        if used < inst.k() {
            s.push_str(" --pad");
        }
        s
    }
}

/// An element in lower-case hex, zero-padded to its format's width.
pub fn hex(format: &Format, v: u64) -> String {
    format!(
        "{:0w$x}",
        v & format.storage_mask(),
        w = format.hex_digits()
    )
}

fn hex_list(format: &Format, v: &[u64]) -> String {
    v.iter()
        .map(|x| hex(format, *x))
        .collect::<Vec<_>>()
        .join(",")
}

/// The encoding of a signed zero (+0 where the format has no -0).
pub fn zero(format: &Format, negative: bool) -> u64 {
    format
        .encode_finite(negative, &Dyadic::zero())
        .or_else(|| format.encode_finite(false, &Dyadic::zero()))
        .unwrap_or(0)
}

/// The encoding of `(-1)^negative * 2^e`, if the format represents it.
pub fn pow2(format: &Format, e: i64, negative: bool) -> Option<u64> {
    format.encode_finite(negative, &Dyadic::from_parts(negative, 1, e))
}

/// The encoding of an exact value, if the format represents it.
pub fn encode(format: &Format, v: &Dyadic) -> Option<u64> {
    format.encode_finite(v.is_negative(), v)
}

/// The largest finite value.
pub fn max_finite(format: &Format, negative: bool) -> Option<u64> {
    let ff = format.as_float()?;
    let v = Dyadic::from_parts(
        negative,
        ff.max_significand() as u128,
        ff.max_exponent() as i64 - ff.mantissa_bits as i64,
    );
    encode(format, &v)
}

/// The smallest positive value (the smallest subnormal, or the smallest normal without
/// subnormals).
pub fn min_positive(format: &Format) -> Option<u64> {
    let ff = format.as_float()?;
    let lsb = if ff.subnormals {
        ff.min_exponent() as i64 - ff.mantissa_bits as i64
    } else {
        ff.min_exponent() as i64
    };
    pow2(format, lsb, false)
}

/// `|v| = m * 2^q` with `m` odd, and the sign; `None` for zero or a huge mantissa.
fn odd_parts(v: &Dyadic) -> Option<(bool, u128, i64)> {
    if v.is_zero() {
        return None;
    }
    let tz = v.mantissa.trailing_zeros()?;
    let m = (v.mantissa.magnitude() >> tz).to_u128()?;
    Some((v.is_negative(), m, v.exponent + tz as i64))
}

/// The exponents `q` at which `m * 2^q` may be representable in `f` (a superset).
fn exponent_range(float: &FloatFormat, m: u128) -> (i64, i64) {
    let bits = 128 - m.leading_zeros() as i64;
    let lsb = float.min_exponent() as i64 - float.mantissa_bits as i64;
    (lsb, float.max_exponent() as i64 - bits + 1)
}

/// Factor an exact value into `a * b`, both representable (`v = 0` gives +0 * +0).
/// Tries the significand on a, then on b, then split between them; among the exponent
/// splits that work it takes the one nearest the middle of the feasible range (balanced
/// operands, far from both formats' edges).
pub fn split_product(a: &Format, b: &Format, v: &Dyadic) -> Option<(u64, u64)> {
    if v.is_zero() {
        return Some((zero(a, false), zero(b, false)));
    }
    let (fa, fb) = (a.as_float()?, b.as_float()?);
    let (neg, m, q) = odd_parts(v)?;
    let fits = |x: u128, f: &FloatFormat| x >> (f.mantissa_bits + 1) == 0;
    let mut splits: Vec<(u128, u128)> = vec![];
    for (x, y) in [(m, 1), (1, m)] {
        if fits(x, fa) && fits(y, fb) {
            splits.push((x, y));
        }
    }
    // odd divisors, bounded: a's significand has at most mantissa_bits + 1 bits
    let limit = (1u128 << (fa.mantissa_bits + 1).min(20)).min(m);
    let mut x = 3;
    while x < limit {
        if m % x == 0 && fits(x, fa) && fits(m / x, fb) {
            splits.push((x, m / x));
        }
        x += 2;
    }
    for (x, y) in splits {
        let (alo, ahi) = exponent_range(fa, x);
        let (blo, bhi) = exponent_range(fb, y);
        // qa + qb = q
        let lo = alo.max(q - bhi);
        let hi = ahi.min(q - blo);
        if lo > hi {
            continue;
        }
        let mid = lo + (hi - lo) / 2;
        for d in 0..=(hi - lo) {
            for qa in [mid - d, mid + d] {
                if qa < lo || qa > hi {
                    continue;
                }
                let va = Dyadic::from_parts(neg, x, qa);
                let vb = Dyadic::from_parts(false, y, q - qa);
                if let (Some(ea), Some(eb)) = (encode(a, &va), encode(b, &vb)) {
                    return Some((ea, eb));
                }
            }
        }
    }
    None
}

/// An element of `f` near `(-1)^negative * 2^e * (1 + fraction / 2^64)`: the exponent is
/// kept (clamped into the format's range; below the normal range the value becomes a
/// subnormal with the fraction's top bits), the fraction is cut to the format's mantissa.
/// Never a NaN or an Inf.
pub fn float_at(format: &Format, negative: bool, e: i64, fraction: u64) -> u64 {
    let Some(ff) = format.as_float() else {
        return 0;
    };
    let m = ff.mantissa_bits;
    let emin = ff.min_exponent() as i64;
    let e = e.clamp(emin - m as i64, ff.max_exponent() as i64);
    let frac = if m == 0 { 0 } else { fraction >> (64 - m) };
    let (field, man) = if e >= emin {
        let field = (e - emin) as u64 + u64::from(ff.subnormals);
        (field, frac)
    } else {
        // subnormal: the implicit bit shifted right
        let shift = (emin - e) as u32;
        (0, ((1u64 << m) | frac) >> shift)
    };
    let sign = if ff.signed && negative {
        1u64 << (ff.exponent_bits + m)
    } else {
        0
    };
    let mut code = sign | (field << m) | man;
    // FN's all-ones code and FNUZ's negative zero are NaN: step one code down
    for _ in 0..2 {
        let bits = code << ff.ignored_low_bits;
        if let Decoded::Finite(_) = format.decode(bits) {
            return bits;
        }
        code = if code & ((1u64 << (ff.exponent_bits + m)) - 1) == 0 {
            0
        } else {
            code - 1
        };
    }
    0
}

/// Lanes of one input being built from exact values. Block-scaled instructions get a
/// scale per block, chosen (and then kept) by the first value placed in the block that the
/// operand formats cannot represent with the neutral scale.
pub struct Sketch<'a> {
    inst: &'a Instruction,
    pub input: Input,
    /// The scale exponent chosen for each block (`None`: still the neutral 1).
    block_exponent: Vec<Option<i64>>,
}

impl<'a> Sketch<'a> {
    pub fn new(inst: &'a Instruction) -> Sketch<'a> {
        Sketch {
            inst,
            input: Input::zeros(inst),
            block_exponent: vec![None; inst.scale_count()],
        }
    }

    /// Set c (in c's format).
    pub fn c(&mut self, v: &Dyadic) -> Option<&mut Self> {
        self.input.c = encode(&self.inst.arithmetic.c, v)?;
        Some(self)
    }

    /// Set c to a signed zero.
    pub fn c_zero(&mut self, negative: bool) -> &mut Self {
        self.input.c = zero(&self.inst.arithmetic.c, negative);
        self
    }

    /// Set c from a raw encoding.
    pub fn c_raw(&mut self, raw: u64) -> &mut Self {
        self.input.c = raw;
        self
    }

    /// Set lane `k`'s raw elements.
    pub fn lane_raw(&mut self, k: usize, a: u64, b: u64) -> Option<&mut Self> {
        if k >= self.inst.k() {
            return None;
        }
        self.input.a[k] = a;
        self.input.b[k] = b;
        Some(self)
    }

    /// The scale exponent of block `j` (0 while neutral).
    fn scale_exponent(&self, j: usize) -> i64 {
        self.block_exponent.get(j).copied().flatten().unwrap_or(0)
    }

    /// Give block `j` the scale `2^e` (split between sa and sb).
    pub fn scale(&mut self, j: usize, e: i64) -> Option<&mut Self> {
        let f = &self.inst.arithmetic.scale.as_ref()?.format;
        let (x, y) = split_product(f, f, &Dyadic::pow2(e))?;
        *self.input.sa.get_mut(j)? = x;
        self.input.sb[j] = y;
        self.block_exponent[j] = Some(e);
        Some(self)
    }

    /// Place the exact value `v` on lane `k`: the product `a * b` (times the lane's
    /// scales) equals `v`. For a block-scaled instruction whose block has the neutral scale
    /// and whose operand formats cannot hold `v` alone, the block's scale is chosen.
    pub fn product(&mut self, k: usize, v: &Dyadic) -> Option<&mut Self> {
        if k >= self.inst.k() {
            return None;
        }
        let ar = &self.inst.arithmetic;
        let block = ar.scale.as_ref().map(|s| k / s.block as usize);
        let s = block.map_or(0, |j| self.scale_exponent(j));
        if let Some((x, y)) = split_product(&ar.a, &ar.b, &v.scale(-s)) {
            self.input.a[k] = x;
            self.input.b[k] = y;
            return Some(self);
        }
        let j = block?;
        if self.block_exponent[j].is_some() || v.is_zero() {
            return None;
        }
        let lead = v.leading_exponent()?;
        for d in [0, 1, -1, 2, -2, 3, -3, 4, -4] {
            let e = lead + d;
            if let Some((x, y)) = split_product(&ar.a, &ar.b, &v.scale(-e))
                && self.scale(j, e).is_some()
            {
                self.input.a[k] = x;
                self.input.b[k] = y;
                return Some(self);
            }
        }
        None
    }

    /// Place `v` as a sum of products on `lanes`, taken in order: each lane gets `v`'s
    /// remainder if it can hold it, else the largest product of the remainder's sign and
    /// at most its magnitude (with the lane's block scale). Fails if the lanes run out.
    pub fn product_sum(&mut self, lanes: &[usize], v: &Dyadic) -> Option<&mut Self> {
        let mut rest = v.clone();
        // lanes whose block scale is still free first, then those with the biggest
        // products (a block whose scale was chosen for a tiny term would only nibble)
        let mut order: Vec<(usize, Option<Dyadic>)> = lanes
            .iter()
            .map(|&k| (k, self.biggest_product(k)))
            .collect();
        order.sort_by(|(_, x), (_, y)| match (x, y) {
            (None, None) => std::cmp::Ordering::Equal,
            (None, Some(_)) => std::cmp::Ordering::Less,
            (Some(_), None) => std::cmp::Ordering::Greater,
            (Some(x), Some(y)) => y.cmp_value(x),
        });
        for k in order.into_iter().map(|(k, _)| k) {
            if rest.is_zero() {
                break;
            }
            // a lane whose products cannot reach the remainder's last bit would leave a
            // remainder no later lane can place
            if !self.reaches(k, &rest) {
                continue;
            }
            if self.product(k, &rest).is_some() {
                rest = Dyadic::zero();
                break;
            }
            let part = self.largest_product_within(k, &rest)?;
            self.product(k, &part)?;
            rest = rest.add(&part.neg());
        }
        rest.is_zero().then_some(self)
    }

    /// Can lane `k`'s products (with its block's scale, if chosen) be as fine as `v`'s
    /// last bit?
    fn reaches(&self, k: usize, v: &Dyadic) -> bool {
        let ar = &self.inst.arithmetic;
        let Some(j) = ar.scale.as_ref().map(|sc| k / sc.block as usize) else {
            return true;
        };
        let Some(s) = self.block_exponent.get(j).copied().flatten() else {
            return true;
        };
        let lsb = |f: &Format| {
            f.as_float()
                .map_or(0, |x| x.min_exponent() as i64 - x.mantissa_bits as i64)
        };
        let tz = v.mantissa.trailing_zeros().unwrap_or(0) as i64;
        v.exponent + tz >= s + lsb(&ar.a) + lsb(&ar.b)
    }

    /// The largest product lane `k` can hold, if its block's scale is chosen (or there
    /// are no scales); `None` while the scale is free.
    fn biggest_product(&self, k: usize) -> Option<Dyadic> {
        let ar = &self.inst.arithmetic;
        let s = match &ar.scale {
            None => 0,
            Some(sc) => self
                .block_exponent
                .get(k / sc.block as usize)
                .copied()
                .flatten()?,
        };
        let value = |f: &Format| match f.decode(max_finite(f, false)?) {
            Decoded::Finite(x) => Some(x.value()),
            _ => None,
        };
        Some(value(&ar.a)?.mul(&value(&ar.b)?).scale(s))
    }

    /// The largest product lane `k` can hold of `v`'s sign and at most `|v|`.
    fn largest_product_within(&self, k: usize, v: &Dyadic) -> Option<Dyadic> {
        let ar = &self.inst.arithmetic;
        let s = ar
            .scale
            .as_ref()
            .map_or(0, |sc| self.scale_exponent(k / sc.block as usize));
        let (fa, fb) = (ar.a.as_float()?, ar.b.as_float()?);
        let value = |f: &Format, raw: u64| match f.decode(raw) {
            Decoded::Finite(x) => Some(x.value()),
            _ => None,
        };
        let biggest = value(&ar.a, max_finite(&ar.a, false)?)?
            .mul(&value(&ar.b, max_finite(&ar.b, false)?)?)
            .scale(s);
        let magnitude = v.abs();
        let part = if magnitude.cmp_value(&biggest) != std::cmp::Ordering::Less {
            biggest
        } else {
            // the magnitude cut to a product's precision, then one step down at a time
            let bits = (fa.mantissa_bits + fb.mantissa_bits + 2) as i64;
            let step = Dyadic::pow2(magnitude.leading_exponent()? - bits + 1);
            let mut cand = magnitude.round_to_grid(step.exponent, Rounding::TowardZero);
            let mut found = None;
            for _ in 0..64 {
                if cand.is_zero() || cand.is_negative() {
                    break;
                }
                if split_product(&ar.a, &ar.b, &cand.scale(-s)).is_some() {
                    found = Some(cand);
                    break;
                }
                cand = cand.add(&step.neg());
            }
            found?
        };
        Some(if v.is_negative() { part.neg() } else { part })
    }

    pub fn finish(&self) -> Input {
        self.input.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmac_compiler::format::builtin;

    fn value(f: &Format, raw: u64) -> Dyadic {
        match f.decode(raw) {
            Decoded::Finite(x) => mmac_compiler::format::finite_value(&x),
            other => panic!("{other:?}"),
        }
    }

    /// Factored products multiply back to the value, for formats with few bits too.
    #[test]
    fn split_products_are_exact() {
        for (fa, fb) in [
            ("f16", "f16"),
            ("e2m1", "e2m1"),
            ("e4m3", "e5m2"),
            ("bf16", "bf16"),
        ] {
            let (a, b) = (builtin(fa).unwrap(), builtin(fb).unwrap());
            for (m, q) in [(1u128, 0i64), (3, -5), (9, -3), (15, 2), (1, -20), (5, -2)] {
                for neg in [false, true] {
                    let v = Dyadic::from_parts(neg, m, q);
                    if let Some((x, y)) = split_product(&a, &b, &v) {
                        assert_eq!(
                            value(&a, x).mul(&value(&b, y)).cmp_value(&v),
                            std::cmp::Ordering::Equal,
                            "{fa} {fb} {v}"
                        );
                    } else {
                        assert!(fa == "e2m1" || fa == "e4m3", "{fa} x {fb} cannot make {v}");
                    }
                }
            }
        }
        // 2^-46 from f16 needs two subnormals
        let h = builtin("f16").unwrap();
        let (x, y) = split_product(&h, &h, &Dyadic::pow2(-46)).unwrap();
        assert_eq!(
            value(&h, x)
                .mul(&value(&h, y))
                .cmp_value(&Dyadic::pow2(-46)),
            std::cmp::Ordering::Equal
        );
    }

    /// A value too big for one product is spread over several lanes, exactly.
    #[test]
    fn sums_of_products_are_exact() {
        let text = "arch x\nimport std\ninstruction m {\n  shape 16 x 8 x 32\n  types a = e2m1, b = e2m1, c = f32, d = f32\n  scale ue8m0 block 32\n  uses st_fdpa(F = 25, L = 32, e_zero = -133)\n}\n";
        let v = mmac_compiler::compile("x.mma", text).unwrap();
        let inst = &v.spec().instructions[0];
        let mut s = Sketch::new(inst);
        // the small term pins the block's scale at 2^-158; 2^-149 then needs many lanes
        s.product(0, &Dyadic::from_parts(true, 1, -158)).unwrap();
        let lanes: Vec<usize> = (1..32).collect();
        s.product_sum(&lanes, &Dyadic::pow2(-149)).unwrap();
        let input = s.finish();
        let f = &inst.arithmetic.a;
        let sc = value(&inst.arithmetic.scale.as_ref().unwrap().format, input.sa[0]).mul(&value(
            &inst.arithmetic.scale.as_ref().unwrap().format,
            input.sb[0],
        ));
        let total = (0..32).fold(Dyadic::zero(), |acc, i| {
            acc.add(&value(f, input.a[i]).mul(&value(f, input.b[i])).mul(&sc))
        });
        let want = Dyadic::pow2(-149).add(&Dyadic::from_parts(true, 1, -158));
        assert_eq!(total.cmp_value(&want), std::cmp::Ordering::Equal);
    }

    /// `float_at` keeps the exponent it is given inside the range and never makes a NaN.
    #[test]
    fn float_at_keeps_exponents() {
        for name in ["f16", "bf16", "e4m3", "fp8", "e2m1", "tf32", "ue8m0"] {
            let f = builtin(name).unwrap();
            let ff = f.as_float().unwrap().clone();
            for e in ff.min_exponent() as i64..=ff.max_exponent() as i64 {
                for frac in [0, u64::MAX, 0x8000_0000_0000_0000] {
                    let raw = float_at(&f, true, e, frac);
                    let Decoded::Finite(x) = f.decode(raw) else {
                        panic!("{name} {e} {frac:x}")
                    };
                    assert_eq!(x.exponent as i64, e, "{name}");
                }
            }
        }
    }
}
