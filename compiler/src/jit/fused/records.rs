//! Four records at once, one per SIMD lane: the batch entry's body for the T-FDPA kernels
//! whose products' significands multiply exactly in f32 (formats of up to 10 mantissa
//! bits) and whose one normalisation is into binary32 (toward zero to P bits, or to
//! nearest even at 23), with c binary32 too. Each lane computes one record's whole
//! dot-product-add: decoding, exact products, max exponent, alignment, the sum, c, the
//! normalisation and d's encoding, chained step after step. The max and the sum then need
//! no reduction across lanes, c is aligned and d encoded four records at a time, and the
//! chained c stays in its lane. A group of four records with a NaN or an infinity among
//! its inputs (a, b, c, or a step's result), or with a lane the arithmetic below does not
//! cover, is computed again record by record by the dot entry, which handles every case.
//!
//! Two forms, by the products' range:
//! - Where every product is a normal f32 (`SimdPlan::value_lanes`: f16, FP8), the products
//!   are formed from the codes' fields as exact f32 values ([`ValueProducts`]); codes of
//!   at most 16 bits are decoded eight at a time, in i16 lanes, and their products formed
//!   in f32 lanes only after the max ([`ValueProducts::pairs`]). The rest
//!   is [`super::simd::simd_node`]'s with r per lane, then the normalisation of
//!   [`super::round::integer_binary32`] (toward zero) or [`super::round::host_binary32`]
//!   (to nearest even), done by f64 and f32 arithmetic.
//! - Where they are not (bf16, tf32), each product's power of two is applied after the
//!   max, with the alignment ([`deferred_tail`]), and the result is scaled in f64; a c that
//!   is a NaN or an infinity (an earlier step's overflow) is handled in the lanes.
//!
//! Two other pipelines have steps of their own: GTR-FDPA, with its even and odd
//! alignments and two normalisations ([`parity`], products from [`ValueProducts`]), and
//! GST-FDPA over FP4 groups scaled as blocks ([`groups`]).

mod groups;
mod parity;

use super::plan::{Plan, SimdShape, clog2};
use super::round::{binary32_step, is_binary32};
use super::simd::{ABSENT, high_half, power_from_fields, scaled_sum_i32, truncate_to_i32};
use super::sum::tree;
use crate::format::{FloatFormat, Specials};
use crate::ir::*;
use crate::jit::emit::{Emitter, little_endian};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};

/// Records computed at once, one per i32 lane.
pub(crate) const RECORDS: usize = 4;

/// What the record-lane body needs beyond the fused plan: the step of its pipeline.
pub(crate) enum RecordPlan {
    /// T-FDPA's one alignment ([`step`]).
    TFdpa(TFdpaPlan),
    /// GTR-FDPA: the even and the odd products aligned apart ([`parity::step`]).
    Parity(parity::ParityPlan),
    /// GST-FDPA: groups of FP4 products scaled as blocks ([`groups::step`]).
    Groups(groups::GroupPlan),
}

/// The T-FDPA step's parameters.
pub(crate) struct TFdpaPlan {
    /// F, the fraction bits every term keeps below the reference.
    keep: i64,
    /// The normalisation's precision P (23, or fewer toward zero).
    precision: i64,
    /// The normalisation rounds toward zero (else to nearest even).
    toward_zero: bool,
    /// r can exceed F + 126 (F = 0 and a c of 2^127 or more), where 2^(F - r) is not a
    /// normal f32.
    low_fields: bool,
    /// The products' powers of two are applied after the max ([`deferred_tail`]): their
    /// values can lie outside f32's range (bf16, tf32), and so can a step's result.
    deferred_power: bool,
    /// With `deferred_power`, t can reach 2^31: the products are summed in two halves.
    split_sum: bool,
    /// d's NaN code.
    nan: i64,
}

/// The record-lane plan, where it applies: the SIMD T-FDPA node in i32 lanes, one
/// normalisation into binary32 (toward zero to P bits up to 23, or to nearest even at
/// 23), and every c (the instruction's, then each step's d) a binary32 read without
/// flushing. With the products as f32 values (`SimdPlan::value_lanes`) the sums must not
/// overflow and every term's power must be a normal f32; otherwise the products' powers
/// are deferred, and the kept values plus c's must fit an i32.
///
/// Grouped pipelines take [`groups::group_plan`] and GTR-FDPA [`parity::parity_plan`]
/// instead.
pub(crate) fn record_plan(inst: &Instruction, fused: &Fused, p: &Plan) -> Option<RecordPlan> {
    if fused.grouping.is_some() {
        return groups::group_plan(inst, fused, p).map(RecordPlan::Groups);
    }
    let s = p.simd?;
    if s.shape == SimdShape::EvenOdd {
        return parity::parity_plan(inst, fused, p).map(RecordPlan::Parity);
    }
    if !(s.shape == SimdShape::All && ValueProducts::fit(&p.a, &p.b)) {
        return None;
    }
    let (precision, toward_zero) = binary32_step(inst, fused, false)?;
    let c = inst.arithmetic.c.as_float()?;
    // (and every power of two below is a normal f64)
    if !is_binary32(c) || fused.conditioning.flush_c || !p.narrow_exponents {
        return None;
    }
    let keep = s.keep;
    if !s.value_lanes {
        // t, the kept products (each below 2^(F + 2)) plus c's (below 2^(F + 1)), is
        // below 2^(kept + 1): one i32 sum up to kept = 30, two halves (each below 2^30,
        // and the second with c below 2^31) at 31; and each term's power field, at most
        // F + 127 - fr for a product (the significands' product has fr fraction bits) and
        // F + 104 for c, is below 255
        let kept = keep + 2 + clog2(fused.chain as u64) as i64;
        let fr = (p.a.mantissa_bits + p.b.mantissa_bits) as i64;
        let fits = kept <= 30 || (kept == 31 && fused.chain >= 2);
        return (keep >= 0 && fits && keep - fr <= 127).then_some(RecordPlan::TFdpa(TFdpaPlan {
            keep,
            precision,
            toward_zero,
            low_fields: false,
            deferred_power: true,
            split_sum: kept == 31,
            nan: super::nan_bits(inst),
        }));
    }
    // The sum cannot overflow: its magnitude is at most |c| + the products' (truncation
    // only shrinks terms), and with the products below 2^103 in all that is below f32's
    // largest value plus half its last place, so neither rounding reaches infinity.
    let products = p.a.max_exponent() + p.b.max_exponent() + 2 + clog2(fused.chain as u64) as i32;
    if products > 103 {
        return None;
    }
    // Each lane's 2^(F - r) and 2^(r - F) are normal f32s (the lanes where they are not
    // go to the dot entry) wherever a term is not zero: every nonzero product's exponent
    // lies within 126 of F, and no zero exponent lies more than 127 above it (zero terms
    // only set r; c's exponent, at most 127, is the one that can).
    let (low, high) = (
        (p.a.min_exponent() + p.b.min_exponent()) as i64,
        (p.a.max_exponent() + p.b.max_exponent()) as i64 + 1,
    );
    let fixed = |z: ZeroExponent| match z {
        ZeroExponent::Fixed(e) => e as i64,
        _ => i64::MIN,
    };
    let zero = fixed(fused.zero_exponent.products).max(fixed(fused.zero_exponent.c));
    if low < keep - 126 || high > keep + 126 || zero > keep + 127 {
        return None;
    }
    Some(RecordPlan::TFdpa(TFdpaPlan {
        keep,
        precision,
        toward_zero,
        low_fields: keep < 1,
        deferred_power: false,
        split_sum: false,
        nan: super::nan_bits(inst),
    }))
}

/// Four records' dot-product-adds: `c` holds their c codes (i32x4), `a` and `b` point at
/// each record's elements. Returns d's codes (i32x4) and whether any input was a NaN or
/// an infinity (i8), in which case the codes are meaningless.
#[allow(clippy::too_many_arguments)]
pub(crate) fn group(
    em: &mut Emitter,
    inst: &Instruction,
    fused: &Fused,
    p: &Plan,
    rp: &RecordPlan,
    c: Value,
    (a, b): ([Value; RECORDS], [Value; RECORDS]),
    scales: ([Value; RECORDS], [Value; RECORDS]),
) -> (Value, Value) {
    let mut special = None;
    let mut c = c;
    let chain = fused.chain as usize;
    if let RecordPlan::Groups(gp) = rp {
        for start in (0..inst.k()).step_by(chain) {
            let steps = (&p.a, &p.b, chain, start);
            c = groups::step(em, gp, steps, c, (a, b), scales, &mut special);
        }
    } else {
        let deferred_power = matches!(rp, RecordPlan::TFdpa(tp) if tp.deferred_power);
        let pairs = matches!(rp, RecordPlan::TFdpa(_));
        let decoder = ValueProducts::new(em, fused, p, deferred_power, pairs);
        for start in (0..inst.k()).step_by(chain) {
            c = match rp {
                RecordPlan::Parity(pp) => {
                    parity::step(em, &decoder, pp, chain, c, (a, b), start, &mut special)
                }
                RecordPlan::TFdpa(tp) => {
                    step(em, fused, &decoder, tp, c, (a, b), start, &mut special)
                }
                RecordPlan::Groups(_) => unreachable!("grouped steps above"),
            };
        }
    }
    let special = special.expect("c is a binary32, which has NaN and Inf codes");
    (c, em.b.ins().vany_true(special))
}

/// One operand format of [`ValueProducts`].
struct ValueOperand {
    /// Mantissa bits m, the low bits the code sits above (tf32's 13) and the sign bit's
    /// position in the stored code.
    m: i64,
    ignored: i64,
    sign: i64,
    /// The mantissa field (i32x4 mask).
    mantissa: Value,
    /// The exponent field, in place.
    field: Value,
    /// The field of the smallest normal binade, in place: 2^m.
    unit: Value,
    /// How a NaN or an infinity is told; none for formats without.
    special: Option<SpecialTest>,
    /// The same masks in i16x8 lanes, for [`ValueProducts::pairs`].
    narrow: Option<NarrowMasks>,
}

/// An operand's masks in i16x8 lanes: the mantissa field, the exponent field in place,
/// 2^m, and the special test's mask (for [`SpecialTest::AllOnes`]).
struct NarrowMasks {
    mantissa: Value,
    field: Value,
    unit: Value,
    ones: Option<Value>,
}

/// The i16x8 constants of [`ValueProducts::pairs`]: the products' power field less the
/// exponents' sum (in units of 2^m, or at bit 7 where those are finer than 2^7), and (for [`ZeroTerm::Select`]) the zero products' exponent;
/// and whether the significands' products need i32 lanes.
struct NarrowConstants {
    power_field: Value,
    zero: Option<Value>,
    wide: bool,
}

/// The products of [`ValueProducts::pairs`] before their f32 values are formed: the
/// significands' products, and the high halves of the f32 codes of their signed powers of
/// two (i16x8, as the codes).
struct PairProducts {
    sig: PairSignificands,
    power: Value,
}

/// The significands' products of [`PairProducts`].
#[derive(Clone, Copy)]
enum PairSignificands {
    /// In i16 lanes (below 2^8), as the codes.
    Narrow(Value),
    /// In i32 lanes: of i16 lanes 0-3 (records 0 and 1), then of 4-7 (records 2 and 3).
    Wide([Value; 2]),
}

/// How [`ValueProducts`] tells an operand's NaNs and infinities, from a lane-wise
/// reduction over its elements.
#[derive(Clone, Copy)]
enum SpecialTest {
    /// The bits of this mask are all ones (and in no finite code): the exponent field
    /// (IEEE) or the code without its sign (FN). Reduced by the unsigned max.
    AllOnes(Value),
    /// The code is the sign bit alone (FNUZ's NaN): shifted left by this much, the code
    /// is i32::MIN, and no other code is (the bits above the code go out). Reduced by
    /// the signed min.
    SignAlone(i64),
}

/// How [`ValueProducts`] gives a zero product its exponent in the max search.
enum ZeroTerm {
    /// Its own, from the fields.
    Natural,
    /// This one (biased, in the max's units, not negative).
    Select(Value),
    /// One below every nonzero product's: the product takes 0 in the max, and a max of 0
    /// (every product zero) stands for this unbiased exponent.
    Clear(i64),
}

/// Products of small float formats as exact f32 values, formed from the codes' fields
/// kept in place (above the low bits a format ignores): with the exponent field f at bit
/// m, min(f, 2^m) is the implicit bit and max(f, 2^m) the exponent max(f, 1) in units of
/// 2^m, so the significand is one addition. The significands' product (an integer below
/// 2^24), converted to f32 and scaled by its power of two (built from the exponents' sum
/// in f32's exponent field), is the exact product (the plan's `value_lanes`); with
/// `deferred_power` the scaling is left to [`deferred_tail`]. The sign is the codes' sign
/// bits' xor. No f32 intermediate is subnormal (x86 computes those on a slow path). NaNs and
/// infinities are told once per step, from each operand's lane-wise reduction of its
/// fields (IEEE) or magnitudes (FN), the all-ones value being the only special one, or of
/// its codes shifted to the top (FNUZ, whose NaN is the sign bit alone).
///
/// Each product's exponent in the max search is formed from its value (the zero test),
/// so that Cranelift computes value and exponent together and the codes are not kept (or
/// spilled) until the sum.
struct ValueProducts {
    operands: [ValueOperand; 2],
    /// The exponents are summed in units of 2^m (a and b have the same m), else of 1.
    units: i64,
    /// The sum of a's and b's exponent biases.
    bias: i64,
    /// The significands' product's fraction bits, m_a + m_b.
    fr: i64,
    /// The f32 exponent field of the products' power of two, less the exponents' sum:
    /// 127 - bias - (m_a + m_b), in `units`.
    power_field: Value,
    zero: ZeroTerm,
    /// The products are left as their significands' products, signed (the power is
    /// applied after the max, [`deferred_tail`]).
    deferred_power: bool,
    /// The codes are decoded eight at a time, in i16x8 lanes ([`ValueProducts::pairs`]):
    /// formats of at most 16 bits.
    narrow: Option<NarrowConstants>,
}

impl ValueProducts {
    /// For a and b that [`ValueProducts::fit`]; in i16x8 lanes where `pairs` is asked for
    /// and a and b [`ValueProducts::fit_narrow`].
    fn new(
        em: &mut Emitter,
        fused: &Fused,
        p: &Plan,
        deferred_power: bool,
        pairs: bool,
    ) -> ValueProducts {
        let units = if p.a.mantissa_bits == p.b.mantissa_bits {
            1i64 << p.a.mantissa_bits
        } else {
            1
        };
        let narrow = pairs && !deferred_power && ValueProducts::fit_narrow(&p.a, &p.b);
        let mut operand = |x: &FloatFormat| {
            let (m, e) = (x.mantissa_bits as i64, x.exponent_bits as i64);
            let ignored = x.ignored_low_bits as i64;
            ValueOperand {
                m,
                ignored,
                sign: ignored + e + m,
                mantissa: em.splat32((1i64 << m) - 1),
                field: em.splat32(((1i64 << e) - 1) << m),
                unit: em.splat32(1i64 << m),
                special: match x.specials {
                    Specials::Ieee => {
                        Some(SpecialTest::AllOnes(em.splat32(((1i64 << e) - 1) << m)))
                    }
                    Specials::Fn => Some(SpecialTest::AllOnes(em.splat32((1i64 << (e + m)) - 1))),
                    Specials::Fnuz => Some(SpecialTest::SignAlone(31 - (e + m))),
                    Specials::None => None,
                },
                narrow: narrow.then(|| NarrowMasks {
                    mantissa: splat16(em, (1i64 << m) - 1),
                    field: splat16(em, ((1i64 << e) - 1) << m),
                    unit: splat16(em, 1i64 << m),
                    ones: match x.specials {
                        Specials::Ieee => Some(splat16(em, ((1i64 << e) - 1) << m)),
                        Specials::Fn => Some(splat16(em, (1i64 << (e + m)) - 1)),
                        _ => None,
                    },
                }),
            }
        };
        let operands = [operand(&p.a), operand(&p.b)];
        let bias = (p.a.bias + p.b.bias) as i64;
        let fr = (p.a.mantissa_bits + p.b.mantissa_bits) as i64;
        let power_field = em.splat32((127 - bias - fr) * units);
        let zero = match fused.zero_exponent.products {
            ZeroExponent::Natural => ZeroTerm::Natural,
            ZeroExponent::Fixed(e) if e as i64 + bias >= 0 => {
                ZeroTerm::Select(em.splat32((e as i64 + bias) * units))
            }
            // (every nonzero product's biased exponent is at least 2)
            ZeroExponent::Fixed(e) => ZeroTerm::Clear(e as i64),
            ZeroExponent::Never => ZeroTerm::Clear(ABSENT),
        };
        let narrow = narrow
            .then(|| {
                let zero = match fused.zero_exponent.products {
                    // (in i16 lanes, and compared unsigned with the products' exponents)
                    ZeroExponent::Fixed(e) if e as i64 + bias >= 0 => {
                        let z = (e as i64 + bias) * units;
                        if z >= 1 << 15 {
                            return None;
                        }
                        Some(splat16(em, z))
                    }
                    _ => None,
                };
                // (added before the shift to bit 7, or after a shift down)
                let power_field = if units.trailing_zeros() <= 7 {
                    (127 - bias - fr) * units
                } else {
                    (127 - bias - fr) << 7
                };
                Some(NarrowConstants {
                    power_field: splat16(em, power_field),
                    zero,
                    wide: !(p.a.storage_bits <= 8
                        && p.b.storage_bits <= 8
                        && p.a.mantissa_bits + p.b.mantissa_bits + 2 <= 8),
                })
            })
            .flatten();
        ValueProducts {
            operands,
            units,
            bias,
            fr,
            power_field,
            zero,
            deferred_power,
            narrow,
        }
    }

    /// Formats [`ValueProducts::pairs`] decodes in i16 lanes: codes of at most 16 bits
    /// (with no ignored low bits; fitting [`ValueProducts::fit`]). Their exponents' sum,
    /// in units of 2^m, is below 2^16 (each field in place is below 2^15), and below 2^8
    /// for codes of at most 8 bits; for those, where m_a + m_b is at most 6, so is the
    /// significands' product (else it takes i32 lanes).
    fn fit_narrow(a: &FloatFormat, b: &FloatFormat) -> bool {
        let narrow = |x: &FloatFormat| x.storage_bits <= 16 && x.ignored_low_bits == 0;
        narrow(a) && narrow(b)
    }

    /// Signed formats with subnormals of at most 32 bits and 10 mantissa bits (the
    /// exponents' units stay small, and the significands' product is exact in f32) whose
    /// NaN and infinity codes (if any) are the all-ones field (IEEE) or magnitude (FN),
    /// or the sign bit alone (FNUZ).
    fn fit(a: &FloatFormat, b: &FloatFormat) -> bool {
        [a, b].iter().all(|x| {
            x.signed
                && x.subnormals
                && x.storage_bits <= 32
                && x.mantissa_bits <= 10
                && matches!(
                    x.specials,
                    Specials::Ieee | Specials::Fn | Specials::Fnuz | Specials::None
                )
        })
    }

    /// The signed products of the codes `ra` and `rb` (f32x4), or with `deferred_power`
    /// their significands' products, and the exponents the max search sees (biased, in
    /// `units`; by the zero rule for zero products). Their lane-wise unsigned max is taken
    /// into `max`, and each operand's tested field or magnitude into `seen`.
    fn group(
        &self,
        em: &mut Emitter,
        [ra, rb]: [Value; 2],
        max: &mut Option<Value>,
        seen: &mut [Option<Value>; 2],
    ) -> (Value, Value) {
        let le = little_endian();
        let mut parts = Vec::with_capacity(2);
        for ((x, raw), seen) in self.operands.iter().zip([ra, rb]).zip(seen) {
            let code = if x.ignored > 0 {
                em.b.ins().ushr_imm_s(raw, x.ignored)
            } else {
                raw
            };
            let mantissa = em.b.ins().band(code, x.mantissa);
            let field = em.b.ins().band(code, x.field);
            let implicit = em.b.ins().smin(field, x.unit);
            let sig = em.b.ins().iadd(mantissa, implicit);
            let exp = em.b.ins().smax(field, x.unit);
            let exp = if self.units == 1 {
                em.b.ins().ushr_imm_s(exp, x.m)
            } else {
                exp
            };
            // (for IEEE formats the same band as `field`, which Cranelift computes once)
            match x.special {
                Some(SpecialTest::AllOnes(ones)) => {
                    let tested = em.b.ins().band(code, ones);
                    max_lanes(em, seen, tested);
                }
                Some(SpecialTest::SignAlone(shift)) => {
                    let tested = em.b.ins().ishl_imm_s(code, shift);
                    *seen = Some(match *seen {
                        None => tested,
                        Some(acc) => em.b.ins().smin(acc, tested),
                    });
                }
                None => {}
            }
            parts.push((sig, exp));
        }
        // |product| = sig_a sig_b 2^(e - bias - fr), in f32 (exact: below 2^24, normal)
        let sig = em.b.ins().imul(parts[0].0, parts[1].0);
        let e = em.b.ins().iadd(parts[0].1, parts[1].1);
        let product = em.b.ins().fcvt_from_sint(types::F32X4, sig);
        let product = if self.deferred_power {
            product
        } else {
            let field = em.b.ins().iadd(e, self.power_field);
            let field =
                em.b.ins()
                    .ishl_imm_s(field, 23 - self.units.trailing_zeros() as i64);
            let power = em.b.ins().bitcast(types::F32X4, le, field);
            em.b.ins().fmul(product, power)
        };
        // the product's sign: the xor of the sign bits, at bit 31
        let sign = self.signs_at(em, [ra, rb], 31);
        let top = em.splat32(1 << 31);
        let sign = em.b.ins().band(sign, top);
        let bits = em.b.ins().bitcast(types::I32X4, le, product);
        let e = match self.zero {
            ZeroTerm::Natural => e,
            ZeroTerm::Select(z) => {
                let zero = em.b.ins().f32const(0.0);
                let zero = em.b.ins().splat(types::F32X4, zero);
                let is0 = em.b.ins().fcmp(FloatCC::Equal, product, zero);
                let is0 = em.b.ins().bitcast(types::I32X4, le, is0);
                em.b.ins().bitselect(is0, z, e)
            }
            // a nonzero |product|'s f32 code is at least 2^23 (it is normal), above every
            // biased exponent sum (below 2^19), and a zero's is 0: their unsigned min
            ZeroTerm::Clear(_) => em.b.ins().umin(e, bits),
        };
        let bits = em.b.ins().bxor(bits, sign);
        let signed = em.b.ins().bitcast(types::F32X4, le, bits);
        max_lanes(em, max, e);
        (signed, e)
    }

    /// [`ValueProducts::group`] for elements k and k + 1 of four records at once, their
    /// codes in i16x8 lanes ([`pair_elements`]): the significands' products and the
    /// high halves of the f32 codes of their signed powers of two (i16x8 each), which
    /// [`ValueProducts::pair_values`] makes the products. The exponents the max search
    /// sees are taken into `max` and the tested fields into `seen`, lane-wise in i16
    /// lanes ([`ValueProducts::reference`] reduces each record's two).
    fn pairs(
        &self,
        em: &mut Emitter,
        [ra, rb]: [Value; 2],
        max: &mut Option<Value>,
        seen: &mut [Option<Value>; 2],
    ) -> PairProducts {
        let n = self
            .narrow
            .as_ref()
            .expect("the record plan puts these operands in i16 lanes");
        let mut parts = Vec::with_capacity(2);
        for ((x, code), seen) in self.operands.iter().zip([ra, rb]).zip(seen) {
            let masks = x
                .narrow
                .as_ref()
                .expect("the record plan puts these operands in i16 lanes");
            let mantissa = em.b.ins().band(code, masks.mantissa);
            let field = em.b.ins().band(code, masks.field);
            let implicit = em.b.ins().smin(field, masks.unit);
            let sig = em.b.ins().iadd(mantissa, implicit);
            let exp = em.b.ins().smax(field, masks.unit);
            let exp = if self.units == 1 {
                em.b.ins().ushr_imm_s(exp, x.m)
            } else {
                exp
            };
            match (x.special, masks.ones) {
                (Some(SpecialTest::AllOnes(_)), Some(ones)) => {
                    let tested = em.b.ins().band(code, ones);
                    max_lanes(em, seen, tested);
                }
                // the code's sign bit at bit 15 (the bits above the code go out)
                (Some(SpecialTest::SignAlone(_)), _) => {
                    let tested = em.b.ins().ishl_imm_s(code, 15 - x.sign);
                    *seen = Some(match *seen {
                        None => tested,
                        Some(acc) => em.b.ins().smin(acc, tested),
                    });
                }
                _ => {}
            }
            parts.push((sig, exp));
        }
        // the exponents' sum (in units), and the significands' product: below 2^8 in i16
        // lanes, or (`wide`) in i32 lanes, four at a time
        let ((sig_a, exp_a), (sig_b, exp_b)) = (parts[0], parts[1]);
        let e = em.b.ins().iadd(exp_a, exp_b);
        let sig = if n.wide {
            let low = [sig_a, sig_b].map(|x| em.b.ins().uwiden_low(x));
            let high = [sig_a, sig_b].map(|x| em.b.ins().uwiden_high(x));
            PairSignificands::Wide([low, high].map(|[x, y]| em.b.ins().imul(x, y)))
        } else {
            PairSignificands::Narrow(em.b.ins().imul(sig_a, sig_b))
        };
        // the sign, at bit 15
        let sign = self.signs_at(em, [ra, rb], 15);
        let top = splat16(em, 0x8000);
        let sign = em.b.ins().band(sign, top);
        // the power's f32 code's high half: the sign, and the field at bit 7 (the sum in
        // units of 2^m moved there exactly: its low m bits are zero)
        let shift = 7 - self.units.trailing_zeros() as i64;
        let field = if shift >= 0 {
            let field = em.b.ins().iadd(e, n.power_field);
            em.b.ins().ishl_imm_s(field, shift)
        } else {
            let field = em.b.ins().ushr_imm_s(e, -shift);
            em.b.ins().iadd(field, n.power_field)
        };
        let power = em.b.ins().bor(field, sign);
        // a zero product: one of the significands is zero
        let is_zero = |em: &mut Emitter| {
            let zero = splat16(em, 0);
            let least = em.b.ins().umin(sig_a, sig_b);
            em.b.ins().icmp(IntCC::Equal, least, zero)
        };
        let e = match (&self.zero, n.zero, sig) {
            (ZeroTerm::Natural, _, _) => e,
            (ZeroTerm::Select(_), Some(z), _) => {
                let is0 = is_zero(em);
                em.b.ins().bitselect(is0, z, e)
            }
            // a nonzero product's significand times 2^8 is above every exponents' sum
            // (below 2^8) and below 2^16, and a zero's is 0: their unsigned min
            (ZeroTerm::Clear(_), _, PairSignificands::Narrow(sig)) => {
                let scaled = em.b.ins().ishl_imm_s(sig, 8);
                em.b.ins().umin(e, scaled)
            }
            // (every nonzero product's exponents' sum is at least 2)
            (ZeroTerm::Clear(_), _, PairSignificands::Wide(_)) => {
                let is0 = is_zero(em);
                em.b.ins().band_not(e, is0)
            }
            (ZeroTerm::Select(_), None, _) => unreachable!("planned: a zero exponent in i16"),
        };
        max_lanes(em, max, e);
        PairProducts { sig, power }
    }

    /// The signed products (f32x4) of elements k and k + 1 of four records, from
    /// [`ValueProducts::pairs`]. Narrow: element k's of records 0-3, then element k + 1's
    /// (each record's two i16 lanes are one i32 lane, element k's the low half). Wide:
    /// records 0 and 1's (k, k + 1, k, k + 1), then records 2 and 3's.
    fn pair_values(&self, em: &mut Emitter, products: PairProducts) -> [Value; 2] {
        let le = little_endian();
        let power = products.power;
        let (sigs, powers) = match products.sig {
            PairSignificands::Narrow(sig) => {
                let sig = em.b.ins().bitcast(types::I32X4, le, sig);
                let power = em.b.ins().bitcast(types::I32X4, le, power);
                let low = em.splat32(0xffff);
                let high = em.splat32(0xffff_0000);
                let sigs = [em.b.ins().band(sig, low), em.b.ins().ushr_imm_s(sig, 16)];
                let powers = [
                    em.b.ins().ishl_imm_s(power, 16),
                    em.b.ins().band(power, high),
                ];
                (sigs, powers)
            }
            PairSignificands::Wide(sig) => {
                let powers = [em.b.ins().uwiden_low(power), em.b.ins().uwiden_high(power)]
                    .map(|x| em.b.ins().ishl_imm_s(x, 16));
                (sig, powers)
            }
        };
        [0, 1].map(|i| {
            let sig = em.b.ins().fcvt_from_sint(types::F32X4, sigs[i]);
            let power = em.b.ins().bitcast(types::F32X4, le, powers[i]);
            em.b.ins().fmul(sig, power)
        })
    }

    /// The xor of the codes' sign bits at bit `top` of each lane (`ra` and `rb`'s lanes:
    /// 31 for i32, 15 for i16); the bits below it are left for the caller to mask, and
    /// those above the codes go out.
    fn signs_at(&self, em: &mut Emitter, [ra, rb]: [Value; 2], top: i64) -> Value {
        let [xa, xb] = &self.operands;
        let to_top = |em: &mut Emitter, x: Value, sign: i64| {
            if sign == top {
                x
            } else {
                em.b.ins().ishl_imm_s(x, top - sign)
            }
        };
        if xa.sign == xb.sign {
            let x = em.b.ins().bxor(ra, rb);
            to_top(em, x, xa.sign)
        } else {
            let sa = to_top(em, ra, xa.sign);
            let sb = to_top(em, rb, xb.sign);
            em.b.ins().bxor(sa, sb)
        }
    }

    /// The products' unbiased reference from the lane-wise max of [`ValueProducts::group`],
    /// and the lanes with a NaN or an infinity among the operands (from `seen`).
    fn reference(
        &self,
        em: &mut Emitter,
        max: Value,
        seen: [Option<Value>; 2],
    ) -> (Value, Option<Value>) {
        let (max, seen) = if self.narrow.is_some() {
            let seen = [0, 1].map(|i| {
                seen[i].map(|s| match self.operands[i].special {
                    Some(SpecialTest::SignAlone(_)) => records_min(em, s),
                    _ => records_max(em, s),
                })
            });
            (records_max(em, max), seen)
        } else {
            (max, seen)
        };
        let mut special = None;
        for (x, seen) in self.operands.iter().zip(seen) {
            let want = match x.special {
                Some(SpecialTest::AllOnes(ones)) => ones,
                Some(SpecialTest::SignAlone(_)) => em.splat32(i32::MIN as i64),
                None => continue,
            };
            if let Some(m) = seen {
                let s = em.b.ins().icmp(IntCC::Equal, m, want);
                or_lanes(em, &mut special, s);
            }
        }
        let r = if self.units > 1 {
            em.b.ins()
                .sshr_imm_s(max, self.units.trailing_zeros() as i64)
        } else {
            max
        };
        let bias = em.splat32(self.bias);
        let r = em.b.ins().isub(r, bias);
        let r = match self.zero {
            ZeroTerm::Clear(e) => {
                let zero = em.splat32(0);
                let all_zero = em.b.ins().icmp(IntCC::Equal, max, zero);
                let e = em.splat32(e);
                em.b.ins().bitselect(all_zero, e, r)
            }
            _ => r,
        };
        (r, special)
    }
}

/// An i16x8 with every lane `v`.
fn splat16(em: &mut Emitter, v: i64) -> Value {
    let x = em.b.ins().iconst(types::I16, v & 0xffff);
    em.b.ins().splat(types::I16X8, x)
}

/// Each record's two i16 lanes of `x` (i16x8), as unsigned values, reduced to one i32
/// lane by the unsigned max.
fn records_max(em: &mut Emitter, x: Value) -> Value {
    let x = em.b.ins().bitcast(types::I32X4, little_endian(), x);
    let mask = em.splat32(0xffff);
    let low = em.b.ins().band(x, mask);
    let high = em.b.ins().ushr_imm_s(x, 16);
    em.b.ins().umax(low, high)
}

/// Each record's two i16 lanes of `x` (i16x8), as signed values, reduced to one i32
/// lane by the signed min, in the lane's top half (i32::MIN where the min is i16::MIN).
fn records_min(em: &mut Emitter, x: Value) -> Value {
    let x = em.b.ins().bitcast(types::I32X4, little_endian(), x);
    let mask = em.splat32(0xffff_0000);
    let low = em.b.ins().ishl_imm_s(x, 16);
    let high = em.b.ins().band(x, mask);
    em.b.ins().smin(low, high)
}

/// Elements k and k + 1 of four records, the low 32 bits of their codes in two i32x4:
/// record 0's k, k + 1, record 1's k, k + 1, then records 2 and 3's.
fn record_pairs(em: &mut Emitter, records: [Value; RECORDS], k: usize) -> [Value; 2] {
    let flags = MemFlagsData::new()
        .with_notrap()
        .with_readonly()
        .with_can_move();
    let le = little_endian();
    let pairs: Vec<Value> = records
        .iter()
        .map(|&ptr| {
            let x = em.b.ins().load(types::I64X2, flags, ptr, (k * 8) as i32);
            em.b.ins().bitcast(types::I32X4, le, x)
        })
        .collect();
    [
        em.pick32(pairs[0], pairs[1], [0, 2, 4, 6]),
        em.pick32(pairs[2], pairs[3], [0, 2, 4, 6]),
    ]
}

/// Elements k and k + 1 of four records, the low 16 bits of their codes in i16x8 lanes:
/// record 0's k, k + 1, record 1's k, k + 1, and so on.
fn pair_elements(em: &mut Emitter, records: [Value; RECORDS], k: usize) -> Value {
    // the codes' low 32 bits, cut to 16 (a saturating narrowing of values in range)
    let [low, high] = record_pairs(em, records, k);
    let mask = em.splat32(0xffff);
    let low = em.b.ins().band(low, mask);
    let high = em.b.ins().band(high, mask);
    em.b.ins().unarrow(low, high)
}

/// Elements k and k + 1 of four records: two i32x4 of the codes' low 32 bits.
fn elements(em: &mut Emitter, records: [Value; RECORDS], k: usize) -> [Value; 2] {
    let [low, high] = record_pairs(em, records, k);
    [
        em.pick32(low, high, [0, 2, 4, 6]),
        em.pick32(low, high, [1, 3, 5, 7]),
    ]
}

/// One chained step of four records: c's codes in, d's codes out (i32x4).
#[allow(clippy::too_many_arguments)]
fn step(
    em: &mut Emitter,
    fused: &Fused,
    decoder: &ValueProducts,
    rp: &TFdpaPlan,
    c: Value,
    (a, b): ([Value; RECORDS], [Value; RECORDS]),
    start: usize,
    special: &mut Option<Value>,
) -> Value {
    let le = little_endian();
    let big_f = rp.keep;
    let mut max = None;
    let mut seen = [None, None];
    let mut products = Vec::with_capacity(fused.chain as usize);
    let mut pairs = Vec::with_capacity(fused.chain as usize / 2);
    for k in (start..start + fused.chain as usize).step_by(2) {
        if decoder.narrow.is_some() {
            let ra = pair_elements(em, a, k);
            let rb = pair_elements(em, b, k);
            pairs.push(decoder.pairs(em, [ra, rb], &mut max, &mut seen));
            continue;
        }
        let ra = elements(em, a, k);
        let rb = elements(em, b, k);
        for (ra, rb) in ra.into_iter().zip(rb) {
            products.push(decoder.group(em, [ra, rb], &mut max, &mut seen));
        }
    }
    // c: its exponent max(field, 1) - 127 by the zero rule, and NaN/Inf
    let CLanes {
        field: ef,
        exp: c_exp,
        special: c_special,
        zero: c_is0,
    } = c_lanes(em, c);
    if !rp.deferred_power {
        or_lanes(em, special, c_special);
    }
    let one = em.splat32(1);
    let c_exp = match fused.zero_exponent.c {
        ZeroExponent::Natural => c_exp,
        rule => {
            let e = match rule {
                ZeroExponent::Fixed(e) => e as i64,
                _ => ABSENT,
            };
            let e = em.splat32(e);
            em.b.ins().bitselect(c_is0, e, c_exp)
        }
    };
    // the reference r per lane, and the products' kept values summed in i32 lanes
    let products_max = max.expect("planned: at least four products");
    let (products_max, operand_specials) = decoder.reference(em, products_max, seen);
    if let Some(s) = operand_specials {
        or_lanes(em, special, s);
    }
    let r = em.b.ins().smax(products_max, c_exp);
    if rp.deferred_power {
        let c = CTerm {
            code: c,
            field: ef,
            special: c_special,
        };
        return deferred_tail(em, decoder, rp, &products, c, r, special);
    }
    let wide = decoder.narrow.as_ref().is_some_and(|n| n.wide);
    let values: Vec<Value> = if decoder.narrow.is_some() {
        pairs
            .into_iter()
            .flat_map(|pair| decoder.pair_values(em, pair))
            .collect()
    } else {
        products.iter().map(|&(v, _)| v).collect()
    };
    let top = em.splat32(big_f + 127);
    let fields = em.b.ins().isub(top, r);
    let power = power_from_fields(em, fields);
    let sum = if wide {
        // lanes of records (0, 0, 1, 1), then (2, 2, 3, 3): two sums, added in pairs
        let halves = [[0, 0, 1, 1], [2, 2, 3, 3]].map(|lanes| {
            let power = em.pick32(power, power, lanes);
            let values: Vec<Value> = values
                .iter()
                .skip(lanes[0] as usize / 2)
                .step_by(2)
                .copied()
                .collect();
            scaled_sum_i32(em, &values, power)
        });
        let even = em.pick32(halves[0], halves[1], [0, 2, 4, 6]);
        let odd = em.pick32(halves[0], halves[1], [1, 3, 5, 7]);
        em.b.ins().iadd(even, odd)
    } else {
        scaled_sum_i32(em, &values, power)
    };
    // c's kept value trunc(c 2^(F - r)), below 2^(F + 1) as c's exponent is at most r:
    // exact in f32 where 2^(F - r) is a normal f32 whose multiples by 2^(r - F) are too
    // (fields in 1..=253). Elsewhere a lane with a nonzero c goes to the dot entry; with
    // a zero c (and so r from the products) every term is zero there (the plan).
    let c32 = em.b.ins().bitcast(types::F32X4, le, c);
    let c_scaled = em.b.ins().fmul(c32, power);
    let c_kept = truncate_to_i32(em, c_scaled);
    let high = em.splat32(253);
    let mut outside = em.b.ins().icmp(IntCC::SignedGreaterThan, fields, high);
    if rp.low_fields {
        let low = em.b.ins().icmp(IntCC::SignedLessThan, fields, one);
        outside = em.b.ins().bor(outside, low);
    }
    let outside = em.b.ins().band_not(outside, c_is0);
    or_lanes(em, special, outside);
    // t = the sum plus c's kept value, exact in f64x2 lanes (two records each), rounded
    // to P + 1 significant bits and narrowed to f32 (exact toward zero, where the bits
    // below those are cleared first; the rounding to nearest even at P = 23), scaled by
    // 2^(r - F), exactly: t's grid is a normal f32 in the lanes kept. The sign is t's;
    // an exact zero t is +0.0, which every zero rule keeps. No nonzero t rounds to zero.
    let t = t_in_f64(em, rp, &[sum, c_kept]);
    let t = narrowed(em, t);
    let t = em.b.ins().bitcast(types::F32X4, le, t);
    // 2^(r - F), whose field is at least 1 wherever t is not zero
    let bottom = em.splat32(127 - big_f);
    let up = em.b.ins().iadd(r, bottom);
    let up = em.b.ins().smax(up, one);
    let up = em.b.ins().ishl_imm_s(up, 23);
    let up = em.b.ins().bitcast(types::F32X4, le, up);
    let d = em.b.ins().fmul(t, up);
    em.b.ins().bitcast(types::I32X4, le, d)
}

/// A step's c, for [`deferred_tail`]: its code, its exponent field max(field, 1), and
/// the lanes where it is a NaN or an infinity.
struct CTerm {
    code: Value,
    field: Value,
    special: Value,
}

/// The rest of a step whose products' powers are deferred ([`TFdpaPlan::deferred_power`]),
/// from the signed significands' products with their exponents (`products`), c and each
/// lane's reference r:
/// - each product's kept value trunc(sig 2^(e - bias - fr + F - r)) is one f32 multiply
///   by its own power of two, whose field is at most F - fr + 127 (e is at most r) and is
///   clamped at f32's smallest normal (where a product, below 2^24, keeps nothing);
/// - c's kept value trunc(c 2^(F - r)) is its significand times 2^(e_c - 23 + F - r),
///   clamped the same way; each is exact and below 2^(F + 2), and t, their sum, is exact
///   in i32 lanes, or (`split_sum`, t up to 2^32) in two i32 sums added in f64 (the plan);
/// - t is rounded in f64 (toward zero by clearing the bits below P + 1 significant bits;
///   to nearest even at P = 23 by the narrowing), scaled there by 2^(r - F), exactly, as
///   f64's range holds every step's, and narrowed to f32, with infinity past f32's range
///   as the step's overflow rule gives.
///
/// r is floored, for the powers only, at the lowest exponent a nonzero product (or c)
/// has: where the floor moves it, every such term is zero, and the powers stay finite.
/// A c that is a NaN or an infinity (with finite a and b) gives the result (d's NaN
/// code, or c), in lanes: an earlier step's overflow makes such a c common. A subnormal
/// result is exact where t's last place 2^(r - F) lies on the subnormal grid 2^(-126 - P):
/// it then has at most P significant bits, which the clearing keeps, and the narrowing is
/// exact. Lanes where r lies lower with a nonzero t (a result that would be rounded on
/// that grid, or to a zero of either sign) go to the dot entry.
fn deferred_tail(
    em: &mut Emitter,
    decoder: &ValueProducts,
    rp: &TFdpaPlan,
    products: &[(Value, Value)],
    c: CTerm,
    r: Value,
    special: &mut Option<Value>,
) -> Value {
    let le = little_endian();
    let big_f = rp.keep;
    let units = decoder.units;
    let shift = units.trailing_zeros() as i64;
    // the products: power field e - x, with x = (r + bias - (F - fr + 127)) in units
    let lowest = em.splat32(2 - decoder.bias);
    let r_products = em.b.ins().smax(r, lowest);
    let k = em.splat32(decoder.bias - (big_f - decoder.fr + 127));
    let x = em.b.ins().iadd(r_products, k);
    let x = if shift > 0 {
        em.b.ins().ishl_imm_s(x, shift)
    } else {
        x
    };
    let smallest = em.splat32(units);
    let terms: Vec<Value> = products
        .iter()
        .map(|&(v, e)| {
            let field = em.b.ins().isub(e, x);
            let field = em.b.ins().smax(field, smallest);
            let field = em.b.ins().ishl_imm_s(field, 23 - shift);
            let power = em.b.ins().bitcast(types::F32X4, le, field);
            let v = em.b.ins().fmul(v, power);
            truncate_to_i32(em, v)
        })
        .collect();
    // c: its signed significand (with the implicit bit where the field is not 0), and the
    // power field max(field, 1) - r + F - 23
    let mantissa_mask = em.splat32(0x7f_ffff);
    let mantissa = em.b.ins().band(c.code, mantissa_mask);
    let field_mask = em.splat32(0x7f80_0000);
    let field_bits = em.b.ins().band(c.code, field_mask);
    let unit = em.splat32(0x80_0000);
    let implicit = em.b.ins().umin(field_bits, unit);
    let sig = em.b.ins().iadd(mantissa, implicit);
    let sig = em.b.ins().fcvt_from_sint(types::F32X4, sig);
    let sig = em.b.ins().bitcast(types::I32X4, le, sig);
    let sign_mask = em.splat32(1 << 31);
    let sign = em.b.ins().band(c.code, sign_mask);
    let sig = em.b.ins().bor(sig, sign);
    let sig = em.b.ins().bitcast(types::F32X4, le, sig);
    let c_lowest = em.splat32(-126);
    let r_c = em.b.ins().smax(r, c_lowest);
    let field = em.b.ins().isub(c.field, r_c);
    let k = em.splat32(big_f - 23);
    let field = em.b.ins().iadd(field, k);
    let one = em.splat32(1);
    let field = em.b.ins().smax(field, one);
    let field = em.b.ins().ishl_imm_s(field, 23);
    let power = em.b.ins().bitcast(types::F32X4, le, field);
    let c_scaled = em.b.ins().fmul(sig, power);
    let c_kept = truncate_to_i32(em, c_scaled);
    // t: one i32 sum, or (`split_sum`) two, each below 2^31, whose f64 sum is t; their
    // i32 sum wraps but still tells a zero t, as |t| is below 2^32
    let add = |em: &mut Emitter, x: Value, y: Value| em.b.ins().iadd(x, y);
    let parts = if rp.split_sum {
        let (first, second) = terms.split_at(terms.len() / 2);
        let first = tree(em, first.to_vec(), add);
        let second = tree(em, second.to_vec(), add);
        vec![first, em.b.ins().iadd(second, c_kept)]
    } else {
        let sum = tree(em, terms, add);
        vec![em.b.ins().iadd(sum, c_kept)]
    };
    let t = match parts[..] {
        [t] => t,
        [first, second] => em.b.ins().iadd(first, second),
        _ => unreachable!("one or two parts"),
    };
    // lanes whose result can lie below f32's subnormal grid for P (below it t's last
    // place, 2^(r - F), is finer than 2^(-126 - P))
    let floor = em.splat32(big_f - 126 - rp.precision);
    let low = em.b.ins().icmp(IntCC::SignedLessThan, r, floor);
    let zero = em.splat32(0);
    let t_zero = em.b.ins().icmp(IntCC::Equal, t, zero);
    let low = em.b.ins().band_not(low, t_zero);
    or_lanes(em, special, low);
    // t in f64x2 lanes (two records each), rounded, scaled by 2^(r - F) and narrowed
    // (a normal f64: r is at least -600, as the products' max is a product's exponent or
    // their zero exponent, within 600 of 0 by `Plan::narrow_exponents`)
    let up = em.splat32(1023 - big_f);
    let up = em.b.ins().iadd(r, up);
    let up_high = high_half(em, up);
    let [t_low, t_high] = t_in_f64(em, rp, &parts);
    let scaled = [(t_low, up), (t_high, up_high)].map(|(t, up)| {
        let up = em.b.ins().swiden_low(up);
        let up = em.b.ins().ishl_imm_s(up, 52);
        let up = em.b.ins().bitcast(types::F64X2, le, up);
        em.b.ins().fmul(t, up)
    });
    let d = narrowed(em, scaled);
    // a NaN or infinite c is the result
    let is_nan = em.b.ins().icmp(IntCC::NotEqual, mantissa, zero);
    let is_nan = em.b.ins().band(is_nan, c.special);
    let nan = em.splat32(rp.nan);
    let special_d = em.b.ins().bitselect(is_nan, nan, c.code);
    em.b.ins().bitselect(c.special, special_d, d)
}

/// t, the sum of `parts` (i32x4, each record's terms in its lane), as two f64x2: records
/// 0 and 1, then 2 and 3. The sum is exact (at most two parts below 2^31 each); toward
/// zero, the bits of its code below P + 1 significant bits are cleared, so that the
/// narrowing to f32 is exact (to nearest even at P = 23 the narrowing is the rounding).
fn t_in_f64(em: &mut Emitter, rp: &TFdpaPlan, parts: &[Value]) -> [Value; 2] {
    let le = little_endian();
    let clear = rp
        .toward_zero
        .then(|| em.splat64(!((1i64 << (52 - rp.precision)) - 1)));
    [false, true].map(|high| {
        let mut t = None;
        for &part in parts {
            let part = if high { high_half(em, part) } else { part };
            let part = em.b.ins().swiden_low(part);
            let part = em.b.ins().fcvt_from_sint(types::F64X2, part);
            t = Some(match t {
                None => part,
                Some(x) => em.b.ins().fadd(x, part),
            });
        }
        let t = t.expect("at least one part");
        match clear {
            Some(mask) => {
                let bits = em.b.ins().bitcast(types::I64X2, le, t);
                let bits = em.b.ins().band(bits, mask);
                em.b.ins().bitcast(types::F64X2, le, bits)
            }
            None => t,
        }
    })
}

/// Two f64x2 (records 0 and 1, then 2 and 3) narrowed to f32 (to nearest even, infinity
/// past f32's range), as the i32x4 of their codes.
fn narrowed(em: &mut Emitter, halves: [Value; 2]) -> Value {
    let le = little_endian();
    let [low, high] = halves.map(|x| {
        let y = em.b.ins().fvdemote(x);
        em.b.ins().bitcast(types::I32X4, le, y)
    });
    em.pick32(low, high, [0, 1, 4, 5])
}

/// A step's c (binary32 codes, i32x4) in lanes: its exponent field max(field, 1) (1 for
/// zeros and subnormals), its exponent, and the lanes where it is a NaN or an infinity,
/// and where it is a zero.
struct CLanes {
    field: Value,
    exp: Value,
    special: Value,
    zero: Value,
}

fn c_lanes(em: &mut Emitter, c: Value) -> CLanes {
    let field_mask = em.splat32(0xff);
    let ef = em.b.ins().ushr_imm_s(c, 23);
    let ef = em.b.ins().band(ef, field_mask);
    let special = em.b.ins().icmp(IntCC::Equal, ef, field_mask);
    let one = em.splat32(1);
    let field = em.b.ins().smax(ef, one);
    let bias = em.splat32(127);
    let exp = em.b.ins().isub(field, bias);
    let magnitude = em.splat32(0x7fff_ffff);
    let c_magnitude = em.b.ins().band(c, magnitude);
    let zero = em.splat32(0);
    let zero = em.b.ins().icmp(IntCC::Equal, c_magnitude, zero);
    CLanes {
        field,
        exp,
        special,
        zero,
    }
}

/// `acc = umax(acc, x)` lane-wise, `acc` starting empty.
fn max_lanes(em: &mut Emitter, acc: &mut Option<Value>, x: Value) {
    *acc = Some(match *acc {
        None => x,
        Some(a) => em.b.ins().umax(a, x),
    });
}

/// `acc |= x` for lane masks, `acc` starting empty.
fn or_lanes(em: &mut Emitter, acc: &mut Option<Value>, x: Value) {
    *acc = Some(match *acc {
        None => x,
        Some(a) => em.b.ins().bor(a, x),
    });
}
