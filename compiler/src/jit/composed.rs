//! Kernels of composed instructions: the operand conversions (a table per narrow source
//! format, built once from the exact conversion), then each step in order: a `run` calls
//! the kernel of the arithmetic it runs (native code, or another composed kernel) on the
//! gathered k positions; an addition or fused multiply-add is rounded once, as the
//! interpreter does: by the processor's own IEEE arithmetic where the formats are IEEE
//! binary16/bfloat16/binary32/binary64 and the rounding is to nearest even (see
//! [`NativeOp`]), else computed exactly ([`crate::ieee`]).

use super::Code;
use crate::engine::{EvalError, Operands};
use crate::exact::Rounding;
use crate::format::{Format, Specials};
use crate::ieee::{self, Num};
use crate::ir::{Conversion, RoundedOp, StepValue};

/// Source formats up to this many storage bits convert through a table.
const TABLE_BITS: u32 = 16;
/// A table entry for a code with no encoding in the target (a NaN into a format without
/// NaN): the conversion reports it.
const NO_ENCODING: u64 = u64::MAX;

/// The conversion of one operand.
#[derive(Clone)]
pub(crate) struct Converter {
    from: Format,
    conversion: Option<Conversion>,
    table: Option<std::sync::Arc<[u64]>>,
    /// Into the same format (e.g. an f32 c converted to f32): every code stays, but a NaN
    /// becomes this, the format's canonical NaN.
    same_format_nan: Option<u64>,
}

impl Converter {
    pub(crate) fn new(from: &Format, conversion: Option<&Conversion>) -> Converter {
        let table = conversion.and_then(|c| {
            (from.storage_bits() <= TABLE_BITS).then(|| {
                (0..1u64 << from.storage_bits())
                    .map(|raw| ieee::convert(raw, from, c).unwrap_or(NO_ENCODING))
                    .collect::<Vec<u64>>()
                    .into()
            })
        });
        // (IEEE formats alone: every value has one code, so the exact conversion gives
        // the code back)
        let same_format_nan = conversion
            .filter(|c| table.is_none() && &c.format == from)
            .filter(|_| {
                from.as_float()
                    .is_some_and(|f| f.specials == Specials::Ieee && f.ignored_low_bits == 0)
            })
            .and_then(|_| from.encode_nan());
        Converter {
            from: from.clone(),
            conversion: conversion.cloned(),
            table,
            same_format_nan,
        }
    }

    /// Every element of `from`, converted, appended to `to`.
    fn convert_into(&self, from: &[u64], to: &mut Vec<u64>) -> Result<(), String> {
        match (&self.conversion, &self.table) {
            (None, _) => to.extend_from_slice(from),
            (Some(_), Some(t)) => {
                let (start, mask) = (to.len(), self.from.storage_mask());
                to.extend(from.iter().map(|&x| t[(x & mask) as usize]));
                // (a code with no encoding in the target: reported by the exact conversion)
                for (x, &raw) in to[start..].iter_mut().zip(from) {
                    if *x == NO_ENCODING {
                        *x = self.convert(raw)?;
                    }
                }
            }
            (Some(_), None) => {
                for &x in from {
                    to.push(self.convert(x)?);
                }
            }
        }
        Ok(())
    }

    fn convert(&self, raw: u64) -> Result<u64, String> {
        let Some(c) = &self.conversion else {
            return Ok(raw);
        };
        if let Some(nan) = self.same_format_nan {
            return Ok(match self.from.decode(raw) {
                crate::format::Decoded::Nan => nan,
                _ => raw & self.from.storage_mask(),
            });
        }
        match &self.table {
            Some(t) => match t[(raw & self.from.storage_mask()) as usize] {
                NO_ENCODING => ieee::convert(raw, &self.from, c),
                x => Ok(x),
            },
            None => ieee::convert(raw, &self.from, c),
        }
    }
}

/// An IEEE format the processor computes in: every value converts to f64 exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Native {
    Binary16,
    Bfloat16,
    Binary32,
    Binary64,
}

impl Native {
    fn of(f: &Format) -> Option<Native> {
        let ff = f.as_float()?;
        // (the code fills its storage: no padding above it)
        if ff.storage_bits != ff.code_bits() {
            return None;
        }
        [
            (5, 10, Native::Binary16),
            (8, 7, Native::Bfloat16),
            (8, 23, Native::Binary32),
            (11, 52, Native::Binary64),
        ]
        .into_iter()
        .find(|&(e, m, _)| ff.is_ieee(e, m))
        .map(|(_, _, native)| native)
    }

    fn value(self, raw: u64) -> f64 {
        match self {
            Native::Binary16 => half::f16::from_bits(raw as u16).to_f64(),
            Native::Bfloat16 => f64::from(f32::from_bits((raw as u32 & 0xffff) << 16)),
            Native::Binary32 => f64::from(f32::from_bits(raw as u32)),
            Native::Binary64 => f64::from_bits(raw),
        }
    }

    /// Whether every value is a binary32 value.
    fn in_binary32(self) -> bool {
        self != Native::Binary64
    }
}

/// An addition or fused multiply-add that the processor rounds exactly as IEEE 754 does
/// (to nearest even, no flushing, the default floating-point environment): into binary32
/// or binary64 with one native operation on operands that convert exactly; into binary16
/// an addition whose f64 sum is exact (TwoSum's error term is 0), rounded once by
/// [`binary16`]. A NaN result is the format's canonical NaN, as [`ieee::encode`] gives it.
/// Any other case returns `None` and is computed exactly.
#[derive(Clone, Debug)]
pub(crate) struct NativeOp {
    into: Native,
    /// Each operand's format; `None` for a zero.
    operands: [Option<Native>; 3],
    nan: u64,
}

impl NativeOp {
    fn new(op: &RoundedOp, operands: &[Option<&Format>]) -> Option<NativeOp> {
        if op.rounding != Rounding::NearestEven || op.flush_keep_sign {
            return None;
        }
        let into = Native::of(&op.format)?;
        let mut kinds = [None; 3];
        for (slot, f) in kinds.iter_mut().zip(operands) {
            if let Some(f) = f {
                let k = Native::of(f)?;
                if into != Native::Binary64 && !k.in_binary32() {
                    return None;
                }
                *slot = Some(k);
            }
        }
        // binary16 results: additions only
        if into == Native::Binary16 && operands.len() == 3 {
            return None;
        }
        Some(NativeOp {
            into,
            operands: kinds,
            nan: op.format.encode_nan()?,
        })
    }

    /// The operand `i` whose code is `raw` (for a zero operand, `raw` is 1 for -0 and 0
    /// for +0).
    fn operand(&self, i: usize, raw: u64) -> f64 {
        match self.operands[i] {
            Some(k) => k.value(raw),
            None if raw != 0 => -0.0,
            None => 0.0,
        }
    }

    /// `x + y`, or `None` where it is not computed here.
    fn add(&self, x: u64, y: u64) -> Option<u64> {
        let (x, y) = (self.operand(0, x), self.operand(1, y));
        let r = match self.into {
            Native::Binary32 => return Some(self.binary32((x as f32) + (y as f32))),
            Native::Binary64 => x + y,
            Native::Binary16 => {
                let s = x + y;
                if s.is_finite() {
                    // TwoSum: s is the exact sum where the error term is 0
                    let t = s - x;
                    let error = (x - (s - t)) + (y - t);
                    if error != 0.0 {
                        return None;
                    }
                }
                return Some(if s.is_nan() {
                    self.nan
                } else {
                    u64::from(binary16(s))
                });
            }
            Native::Bfloat16 => return None,
        };
        Some(if r.is_nan() { self.nan } else { r.to_bits() })
    }

    /// `x * y + z`, or `None` where it is not computed here.
    fn fma(&self, x: u64, y: u64, z: u64) -> Option<u64> {
        let (x, y, z) = (self.operand(0, x), self.operand(1, y), self.operand(2, z));
        match self.into {
            Native::Binary32 => Some(self.binary32((x as f32).mul_add(y as f32, z as f32))),
            Native::Binary64 => {
                let r = x.mul_add(y, z);
                Some(if r.is_nan() { self.nan } else { r.to_bits() })
            }
            Native::Binary16 | Native::Bfloat16 => None,
        }
    }

    fn binary32(&self, r: f32) -> u64 {
        if r.is_nan() {
            self.nan
        } else {
            u64::from(r.to_bits())
        }
    }
}

/// The binary16 code of `x` (not a NaN) rounded to nearest even: one rounding of the
/// value `x` holds, however many bits it has.
fn binary16(x: f64) -> u16 {
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    // 65520 = 65504 + half an ulp: ties go to the even 65536, beyond the range
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    // the binade of a normal result (its exponent from the bits; a is a normal f64 here
    // or zero), or the subnormals' fixed step of 2^-24
    let e = ((a.to_bits() >> 52) as i32 - 1023).max(-14);
    // a scaled so that the result's last bit is 1: exact (a power of two), then rounded
    let q = (a * f64::powi(2.0, 10 - e)).round_ties_even() as u16;
    // q in 0..=2048: below 1024 a subnormal (or zero) and its code; from 1024 the
    // implicit bit, which adds one to the biased exponent e + 14 (a carry to 2048 moves
    // to the next binade by itself)
    sign | if e == -14 && q < 1024 {
        q
    } else {
        (((e + 14) as u16) << 10) + q
    }
}

/// The native form of each step that has one (`None` for runs, and for additions and
/// fused multiply-adds outside [`NativeOp`]'s cases), given each step's format and c's.
pub(crate) fn native_ops(
    steps: &[KernelStep],
    formats: &[Format],
    c: &Format,
) -> Vec<Option<NativeOp>> {
    let format_of = |v: &StepValue| -> Option<&Format> {
        match v {
            StepValue::C => Some(c),
            StepValue::Zero { .. } => None,
            StepValue::Step(i) => Some(&formats[*i]),
        }
    };
    steps
        .iter()
        .map(|s| match s {
            KernelStep::Run { .. } => None,
            KernelStep::Add { x, y, op } => NativeOp::new(op, &[format_of(x), format_of(y)]),
            KernelStep::Fma { x, y, z, op } => {
                NativeOp::new(op, &[format_of(x), format_of(y), format_of(z)])
            }
        })
        .collect()
}

/// Buffers a composed kernel reuses from one dot product to the next.
#[derive(Default)]
pub(crate) struct Scratch {
    /// The chunk's converted a, b (record-major) and c.
    a: Vec<u64>,
    b: Vec<u64>,
    c: Vec<u64>,
    /// Each step's value for each record of the chunk (step-major).
    values: Vec<u64>,
    /// A run's gathered operands and c, record-major.
    run_a: Vec<u64>,
    run_b: Vec<u64>,
    run_c: Vec<u64>,
}

/// Records a composed kernel computes together: a run's operands for this many records go
/// to its kernel's batch entry in one call.
const CHUNK: usize = 64;

/// One step of a composed kernel.
pub(crate) enum KernelStep {
    Run {
        code: Code,
        positions: Vec<u32>,
        c: StepValue,
        /// The run's c format (what +0 is encoded in).
        c_format: Format,
    },
    Add {
        x: StepValue,
        y: StepValue,
        op: RoundedOp,
    },
    Fma {
        x: StepValue,
        y: StepValue,
        z: StepValue,
        op: RoundedOp,
    },
}

/// A composed instruction, ready to run.
pub(crate) struct ComposedKernel {
    pub(crate) name: String,
    /// The instruction's k.
    pub(crate) k: usize,
    pub(crate) a: Converter,
    pub(crate) b: Converter,
    pub(crate) c: Converter,
    /// c's format after its conversion.
    pub(crate) c_format: Format,
    pub(crate) d: Format,
    pub(crate) steps: Vec<KernelStep>,
    /// Each step's native form, where it has one ([`native_ops`]).
    pub(crate) native: Vec<Option<NativeOp>>,
    /// The format of each step's value.
    pub(crate) formats: Vec<Format>,
    pub(crate) result: StepValue,
}

impl ComposedKernel {
    /// One dot-product-add (operand counts checked by the caller).
    pub(crate) fn dot(&self, ops: &Operands) -> Result<u64, EvalError> {
        let (k, mut d) = (ops.a.len(), [0]);
        let mut scratch = Scratch::default();
        self.batch(&[ops.c], (ops.a, k), (ops.b, k), &mut d, &mut scratch)?;
        Ok(d[0])
    }

    /// `d[i]` of record i: `c[i]`, `a[i*a_stride..][..k]`, `b[i*b_stride..][..k]` (k the
    /// instruction's; counts checked by the caller), a chunk of records at a time: their
    /// operands converted, then each step for all of them (a run through its kernel's batch
    /// entry), with `scratch`'s buffers.
    pub(crate) fn batch(
        &self,
        c: &[u64],
        (a, a_stride): (&[u64], usize),
        (b, b_stride): (&[u64], usize),
        d: &mut [u64],
        s: &mut Scratch,
    ) -> Result<(), EvalError> {
        let fail = |message: String| EvalError::Internal {
            instruction: self.name.clone(),
            message,
        };
        let k = self.k;
        // the native additions round as IEEE's only in the default environment (no
        // flush-to-zero or denormals-are-zero an embedder may have set)
        let _fp = super::fpenv::IeeeDefaults::enter(false);
        for r0 in (0..c.len()).step_by(CHUNK) {
            let m = (c.len() - r0).min(CHUNK);
            s.a.clear();
            s.b.clear();
            s.c.clear();
            for r in r0..r0 + m {
                self.a
                    .convert_into(&a[r * a_stride..][..k], &mut s.a)
                    .map_err(fail)?;
                self.b
                    .convert_into(&b[r * b_stride..][..k], &mut s.b)
                    .map_err(fail)?;
                s.c.push(self.c.convert(c[r]).map_err(fail)?);
            }
            s.values.clear();
            s.values.resize(self.steps.len() * m, 0);
            for (j, (step, native)) in self.steps.iter().zip(&self.native).enumerate() {
                let (before, rest) = s.values.split_at_mut(j * m);
                let out = &mut rest[..m];
                match step {
                    KernelStep::Run {
                        code,
                        positions,
                        c: cv,
                        c_format,
                    } => {
                        let len = positions.len();
                        s.run_a.clear();
                        s.run_b.clear();
                        s.run_c.clear();
                        // (a zero c: encoded once)
                        let zero = matches!(cv, StepValue::Zero { .. })
                            .then(|| self.code(*cv, 0, m, before, &s.c, c_format));
                        for r in 0..m {
                            let (ra, rb) = (&s.a[r * k..][..k], &s.b[r * k..][..k]);
                            s.run_a.extend(positions.iter().map(|&p| ra[p as usize]));
                            s.run_b.extend(positions.iter().map(|&p| rb[p as usize]));
                            s.run_c.push(match zero {
                                Some(z) => z,
                                None => self.code(*cv, r, m, before, &s.c, c_format),
                            });
                        }
                        code.batch(len, &s.run_c, &s.run_a, &s.run_b, out)?;
                    }
                    KernelStep::Add { x, y, op } => {
                        for (r, v) in out.iter_mut().enumerate() {
                            let arg = |v: &StepValue| self.native_arg(*v, r, m, before, &s.c);
                            *v = match native.as_ref().and_then(|n| n.add(arg(x), arg(y))) {
                                Some(v) => v,
                                None => {
                                    let num = |v: &StepValue| self.num(*v, r, m, before, &s.c);
                                    self.encode(ieee::add(&num(x), &num(y), op), op)?
                                }
                            };
                        }
                    }
                    KernelStep::Fma { x, y, z, op } => {
                        for (r, v) in out.iter_mut().enumerate() {
                            let arg = |v: &StepValue| self.native_arg(*v, r, m, before, &s.c);
                            let fast = native.as_ref().and_then(|n| n.fma(arg(x), arg(y), arg(z)));
                            *v = match fast {
                                Some(v) => v,
                                None => {
                                    let num = |v: &StepValue| self.num(*v, r, m, before, &s.c);
                                    self.encode(ieee::fma(&num(x), &num(y), &num(z), op), op)?
                                }
                            };
                        }
                    }
                }
            }
            for (r, dr) in d[r0..r0 + m].iter_mut().enumerate() {
                *dr = self.code(self.result, r, m, &s.values, &s.c, &self.d);
            }
        }
        Ok(())
    }

    /// The code of value `v` for record `r` of a chunk of `m` (`values`: the steps before,
    /// step-major), a zero encoded in `format`.
    fn code(
        &self,
        v: StepValue,
        r: usize,
        m: usize,
        values: &[u64],
        c: &[u64],
        format: &Format,
    ) -> u64 {
        match v {
            StepValue::C => c[r],
            StepValue::Zero { negative } => {
                ieee::encode(format, &Num::signed_zero(negative)).unwrap_or(0)
            }
            StepValue::Step(i) => values[i * m + r],
        }
    }

    /// Value `v` as a [`NativeOp`] operand: a zero's sign as 0 or 1.
    fn native_arg(&self, v: StepValue, r: usize, m: usize, values: &[u64], c: &[u64]) -> u64 {
        match v {
            StepValue::Zero { negative } => u64::from(negative),
            _ => self.code(v, r, m, values, c, &self.d),
        }
    }

    /// Value `v` as an exact number.
    fn num(&self, v: StepValue, r: usize, m: usize, values: &[u64], c: &[u64]) -> Num {
        match v {
            StepValue::C => Num::of(&self.c_format.decode(c[r])),
            StepValue::Zero { negative } => Num::signed_zero(negative),
            StepValue::Step(i) => Num::of(&self.formats[i].decode(values[i * m + r])),
        }
    }

    fn encode(&self, r: Num, op: &RoundedOp) -> Result<u64, EvalError> {
        ieee::encode(&op.format, &r).ok_or_else(|| EvalError::Internal {
            instruction: self.name.clone(),
            message: format!("{} has no encoding in `{}`", r.show(), op.format.name),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::builtin;
    use crate::random::Rng;

    /// A code of `f`: uniform, a special, a zero, or near `anchor`'s binade (so that sums
    /// cancel, tie and carry).
    fn code(f: &Format, r: &mut Rng, anchor: u64) -> u64 {
        let bits = f.storage_bits();
        let mask = f.storage_mask();
        match r.below(8) {
            0 => r.next_u64() & mask,
            1 => [0, 1 << (bits - 1)][r.below(2)],
            2 => f.encode_nan().unwrap() | (r.next_u64() & 1) << (bits - 1),
            3 => f.encode_inf(r.below(2) == 1).unwrap(),
            _ => (anchor ^ (r.next_u64() & 0xff) ^ (r.next_u64() & 1) << (bits - 1)) & mask,
        }
    }

    /// Every native addition and fused multiply-add gives the exact computation's code,
    /// over every pairing of the four formats it takes, and `binary16` rounds every binary32
    /// value as the exact conversion does.
    #[test]
    fn native_ops_round_as_the_exact_ones_do() {
        let names = ["f16", "bf16", "f32", "f64"];
        let mut r = Rng::new(7);
        let mut native = 0;
        for into in names {
            let op = RoundedOp {
                format: builtin(into).unwrap(),
                rounding: Rounding::NearestEven,
                flush_keep_sign: false,
            };
            for x in names {
                for y in names {
                    let (fx, fy) = (builtin(x).unwrap(), builtin(y).unwrap());
                    let zero = r.below(4) == 0;
                    let formats = [Some(&fx), if zero { None } else { Some(&fy) }];
                    let Some(n) = NativeOp::new(&op, &formats) else {
                        continue;
                    };
                    for _ in 0..20_000 {
                        let a = code(&fx, &mut r, fx.encode_nan().unwrap() >> 3);
                        let b = if zero {
                            r.next_u64() & 1
                        } else {
                            code(
                                &fy,
                                &mut r,
                                a >> (fx.storage_bits() - fy.storage_bits().min(fx.storage_bits())),
                            )
                        };
                        let num = |f: &Format, v: u64| Num::of(&f.decode(v));
                        let bn = if zero {
                            Num::signed_zero(b == 1)
                        } else {
                            num(&fy, b)
                        };
                        let want = ieee::encode(&op.format, &ieee::add(&num(&fx, a), &bn, &op));
                        if let Some(got) = n.add(a, b) {
                            assert_eq!(Some(got), want, "{x} {a:x} + {y} {b:x} into {into}");
                            native += 1;
                        }
                    }
                    let Some(f3) = NativeOp::new(&op, &[Some(&fx), Some(&fy), Some(&fx)]) else {
                        continue;
                    };
                    for _ in 0..5_000 {
                        let (a, b) = (code(&fx, &mut r, 0), code(&fy, &mut r, 0));
                        let c = code(&fx, &mut r, a);
                        let num = |f: &Format, v: u64| Num::of(&f.decode(v));
                        let want = ieee::encode(
                            &op.format,
                            &ieee::fma(&num(&fx, a), &num(&fy, b), &num(&fx, c), &op),
                        );
                        if let Some(got) = f3.fma(a, b, c) {
                            assert_eq!(
                                Some(got),
                                want,
                                "{x} {a:x} * {y} {b:x} + {c:x} into {into}"
                            );
                            native += 1;
                        }
                    }
                }
            }
        }
        assert!(native > 500_000, "{native} native results checked");
        // every binary32 value's binary16 rounding (a sample of a million codes)
        let (f32f, f16f) = (builtin("f32").unwrap(), builtin("f16").unwrap());
        let conv = Conversion {
            format: f16f.clone(),
            rounding: Rounding::NearestEven,
            overflow: crate::ir::Overflow::Inf,
        };
        let check = |x: f32| {
            if !x.is_nan() {
                let want = ieee::convert(u64::from(x.to_bits()), &f32f, &conv).unwrap();
                assert_eq!(u64::from(binary16(f64::from(x))), want, "{x:e}");
            }
        };
        for _ in 0..1_000_000 {
            check(f32::from_bits(r.next_u64() as u32));
        }
        // and the ties: halfway between every two neighbouring binary16 values, and the
        // binary32 values either side of it
        for h in 0..0x7c00u16 {
            let (lo, hi) = (
                half::f16::from_bits(h).to_f32(),
                half::f16::from_bits(h + 1).to_f32(),
            );
            let mid = (lo + hi) / 2.0;
            for x in [mid, mid.next_down(), mid.next_up(), lo, -mid] {
                check(x);
            }
        }
    }
}
