//! GTR-FDPA in record lanes: one chained step of four records, one per i32 lane, for the
//! pipelines whose first level aligns the even and the odd products each to its own
//! largest exponent (AMD CDNA3 FP8). The products are exact f32 values
//! ([`ValueProducts`]); each parity's kept values are summed in i32 lanes; the rest (the
//! floors of the two sums to the dot's grid, c's floor and its drop rule, the window of
//! the first normalisation and the rounding into binary32) is done in f32 and f64 lanes,
//! where every value it forms is exact ([`ParityPlan`]).

use super::{ValueProducts, c_lanes, elements, narrowed, or_lanes};
use crate::ir::*;
use crate::jit::emit::{Emitter, little_endian};
use crate::jit::fused::plan::{Plan, SimdShape, clog2};
use crate::jit::fused::round::{binary32_step, is_binary32};
use crate::jit::fused::simd::{ABSENT, high_half, power_from_fields, scaled_sum_i32};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, Value, types};

/// The parameters of the GTR-FDPA step after the products, read from the pipeline:
/// `align products.even|odd ... keep F round toward_zero`, `align even, odd ... keep F
/// round down as dot`, `align dot keep G round down, c keep Fc round down drop below D`,
/// `normalize ... precision P1 round down`, then to nearest even into binary32.
pub(crate) struct ParityPlan {
    /// F, the fraction bits each parity's products and the dot keep.
    keep: i64,
    /// G, the fraction bits the dot keeps below the last alignment's reference.
    dot_keep: i64,
    /// Fc, c's.
    c_keep: i64,
    /// D: c is dropped when its exponent lies more than D below the reference.
    drop: i64,
    /// P1, the first normalisation's fraction bits (rounded down).
    window: i64,
}

/// The plan, where the pipeline is GTR-FDPA as [`ParityPlan`] reads it, with c and d
/// binary32 (c read without flushing, a zero c at its natural exponent -126), zero
/// products outside every max search, and these bounds, which make every step below
/// exact:
/// - each parity's kept values (each below 2^(F + 2)) sum below 2^30 in i32 lanes;
/// - t, the last alignment's sum (the dot's kept value below 2^(G + 3 + log2(L/2)) and
///   c's below 2^(G + 1)), is exact in f64;
/// - with a nonzero product, the reference e is at least the lowest product exponent
///   e_lo and t's last place 2^(e - G) is a normal f32, so the window's floor needs no
///   subnormal range, and 2^(Fc - e) and 2^(e - G) are normal f32s (e is at most 127);
/// - with every product zero, the result is c: kept whole (Fc >= 23) and within the
///   window (P1 >= 23).
pub(crate) fn parity_plan(inst: &Instruction, fused: &Fused, p: &Plan) -> Option<ParityPlan> {
    let s = p.simd?;
    if s.shape != SimdShape::EvenOdd || !s.value_lanes || !ValueProducts::fit(&p.a, &p.b) {
        return None;
    }
    let c = inst.arithmetic.c.as_float()?;
    if !is_binary32(c)
        || fused.conditioning.flush_c
        || !p.narrow_exponents
        || fused.zero_exponent.products != ZeroExponent::Never
        || fused.zero_exponent.c != ZeroExponent::Natural
        || fused.zero_sign != ZeroSign::ExactPositive
        || binary32_step(inst, fused, true)? != (23, false)
    {
        return None;
    }
    let down = |t: &AlignTerm, source: TermSource, drop: bool| match t.keep {
        Some((fb, crate::exact::Rounding::Down))
            if t.source == source && t.drop_below.is_some() == drop =>
        {
            Some(fb as i64)
        }
        _ => None,
    };
    let max_ref = |n: &AlignNode| n.reference == Reference::MaxExponent;
    let (dot, last) = match fused.nodes.as_slice() {
        [_, _, dot, last] if max_ref(dot) && max_ref(last) => (dot, last),
        _ => return None,
    };
    let (dot_keep, c_keep, drop) = match (dot.terms.as_slice(), last.terms.as_slice()) {
        ([even, odd], [d, c])
            if down(even, TermSource::Node(NodeId::new(0)), false) == Some(s.keep)
                && down(odd, TermSource::Node(NodeId::new(1)), false) == Some(s.keep) =>
        {
            (
                down(d, TermSource::Node(NodeId::new(2)), false)?,
                down(c, TermSource::C, true)?,
                c.drop_below? as i64,
            )
        }
        _ => return None,
    };
    let window = match fused.normalize.as_slice() {
        [first, _]
            if first.rounding == crate::exact::Rounding::Down
                && first.min_exponent == -126
                && first.max_exponent.is_none() =>
        {
            first.fraction_bits as i64
        }
        _ => return None,
    };
    let keep = s.keep;
    let half = clog2(fused.chain as u64 / 2) as i64;
    let e_lo = (p.a.min_exponent() + p.b.min_exponent()) as i64;
    let fits = keep + 2 + half <= 30
        && dot_keep >= keep
        && dot_keep + 4 + half <= 52
        && (23..=dot_keep).contains(&c_keep)
        && (23..=52).contains(&window)
        && e_lo - dot_keep >= -126
        && c_keep - e_lo <= 126;
    fits.then_some(ParityPlan {
        keep,
        dot_keep,
        c_keep,
        drop,
        window,
    })
}

/// One chained step of four records: c's codes in, d's codes out (i32x4).
///
/// - Each parity's reference r_h is its products' largest exponent ([`ABSENT`] where they
///   are all zero), and its kept values trunc(p 2^(F - r_h)) sum exactly in i32 lanes.
/// - e_p = max(r_even, r_odd). Each parity's sum is floored to the dot's grid 2^(e_p - F)
///   in f64 (scaled by 2^(r_h - e_p), at least 2^-126: where it is clamped the sum is 0),
///   and the two are added: the dot, an integer on that grid below 2^(F + 3 + log2(L/2)).
/// - e = max(e_p, e_c). The dot is floored to the grid 2^(e - G) (by 2^(G - F - (e - e_p)),
///   clamped at 2^-126, where the dot's floor is 0 or -1 either way); c is floored to
///   2^(e - Fc) in f32 (exact: c has 24 bits) and put on the same grid, or dropped when
///   e_c < e - D. Their sum t is exact in f64.
/// - The window: t is floored to P1 fraction bits below its leading one by the bits of
///   its code (a negative t's are first raised by one less than the last place kept,
///   which carries into the exponent where it must); scaled by 2^(e - G) and narrowed
///   to f32 to nearest even, with infinity past f32's range. An exact zero t is +0.
/// - Where every product is zero, d is c (a zero c gives +0).
#[allow(clippy::too_many_arguments)]
pub(super) fn step(
    em: &mut Emitter,
    decoder: &ValueProducts,
    pp: &ParityPlan,
    chain: usize,
    c: Value,
    (a, b): ([Value; super::RECORDS], [Value; super::RECORDS]),
    start: usize,
    special: &mut Option<Value>,
) -> Value {
    let le = little_endian();
    let mut max = [None, None];
    let mut seen = [None, None];
    let mut values: [Vec<Value>; 2] =
        [Vec::with_capacity(chain / 2), Vec::with_capacity(chain / 2)];
    for k in (start..start + chain).step_by(2) {
        let ra = elements(em, a, k);
        let rb = elements(em, b, k);
        for (parity, (ra, rb)) in ra.into_iter().zip(rb).enumerate() {
            let (v, _) = decoder.group(em, [ra, rb], &mut max[parity], &mut seen);
            values[parity].push(v);
        }
    }
    let [max_even, max_odd] = max.map(|m| m.expect("planned: products of both parities"));
    let (r_even, operand_specials) = decoder.reference(em, max_even, seen);
    let (r_odd, _) = decoder.reference(em, max_odd, [None, None]);
    if let Some(s) = operand_specials {
        or_lanes(em, special, s);
    }
    // c: its exponent max(field, 1) - 127 (a zero's is -126), and NaN/Inf
    let c_fields = c_lanes(em, c);
    or_lanes(em, special, c_fields.special);
    // each parity's kept values, summed in i32 lanes
    let top = em.splat32(pp.keep + 127);
    let sums = [(r_even, &values[0]), (r_odd, &values[1])].map(|(r, values)| {
        let fields = em.b.ins().isub(top, r);
        let power = power_from_fields(em, fields);
        scaled_sum_i32(em, values, power)
    });
    let e_p = em.b.ins().smax(r_even, r_odd);
    let c_exp = c_fields.exp;
    let e = em.b.ins().smax(e_p, c_exp);
    // the powers of two, as f32 lanes from their exponents (clamped to f32's normal
    // range where the lane's value does not depend on them)
    let power = |em: &mut Emitter, exponent: Value| {
        let bias = em.splat32(127);
        let field = em.b.ins().iadd(exponent, bias);
        power_from_fields(em, field)
    };
    let to_parity = [r_even, r_odd].map(|r| {
        let x = em.b.ins().isub(r, e_p);
        power(em, x)
    });
    let j = em.b.ins().isub(e, e_p);
    let to_dot = {
        let k = em.splat32(pp.dot_keep - pp.keep);
        let x = em.b.ins().isub(k, j);
        power(em, x)
    };
    let to_c = {
        let k = em.splat32(pp.c_keep);
        let x = em.b.ins().isub(k, e);
        power(em, x)
    };
    let to_result = {
        let k = em.splat32(-pp.dot_keep);
        let x = em.b.ins().iadd(e, k);
        power(em, x)
    };
    // c's kept value on the grid 2^(e - G), or 0 where it is dropped
    let c32 = em.b.ins().bitcast(types::F32X4, le, c);
    let c_kept = em.b.ins().fmul(c32, to_c);
    let c_kept = em.b.ins().floor(c_kept);
    let up = em.b.ins().f32const(f32::from_bits(
        ((pp.dot_keep - pp.c_keep + 127) as u32) << 23,
    ));
    let up = em.b.ins().splat(types::F32X4, up);
    let c_kept = em.b.ins().fmul(c_kept, up);
    let lowest = em.splat32(-pp.drop);
    let lowest = em.b.ins().iadd(e, lowest);
    let dropped = em.b.ins().icmp(IntCC::SignedLessThan, c_exp, lowest);
    let c_kept = em.b.ins().bitcast(types::I32X4, le, c_kept);
    let c_kept = em.b.ins().band_not(c_kept, dropped);
    // in f64 lanes, two records each
    let ulp = (1i64 << (52 - pp.window)) - 1;
    let below = em.splat64(ulp);
    let kept = em.splat64(!ulp);
    let zero = em.b.ins().f64const(0.0);
    let zero = em.b.ins().splat(types::F64X2, zero);
    let scaled = [false, true].map(|high| {
        let half = |em: &mut Emitter, x: Value| {
            let x = em.b.ins().bitcast(types::I32X4, le, x);
            if high { high_half(em, x) } else { x }
        };
        let wide_int = |em: &mut Emitter, x: Value| {
            let x = half(em, x);
            let x = em.b.ins().swiden_low(x);
            em.b.ins().fcvt_from_sint(types::F64X2, x)
        };
        let wide_float = |em: &mut Emitter, x: Value| {
            let x = half(em, x);
            let x = em.b.ins().bitcast(types::F32X4, le, x);
            em.b.ins().fvpromote_low(x)
        };
        let mut dot = None;
        for (sum, p) in sums.iter().zip(&to_parity) {
            let x = wide_int(em, *sum);
            let p = wide_float(em, *p);
            let x = em.b.ins().fmul(x, p);
            let x = em.b.ins().floor(x);
            dot = Some(match dot {
                None => x,
                Some(d) => em.b.ins().fadd(d, x),
            });
        }
        let dot = dot.expect("two parities");
        let p = wide_float(em, to_dot);
        let dot = em.b.ins().fmul(dot, p);
        let dot = em.b.ins().floor(dot);
        let c = wide_float(em, c_kept);
        let t = em.b.ins().fadd(dot, c);
        // floored to P1 fraction bits below t's leading one
        let neg = em.b.ins().fcmp(FloatCC::LessThan, t, zero);
        let neg = em.b.ins().bitcast(types::I64X2, le, neg);
        let raise = em.b.ins().band(neg, below);
        let bits = em.b.ins().bitcast(types::I64X2, le, t);
        let bits = em.b.ins().iadd(bits, raise);
        let bits = em.b.ins().band(bits, kept);
        let t = em.b.ins().bitcast(types::F64X2, le, bits);
        let p = wide_float(em, to_result);
        em.b.ins().fmul(t, p)
    });
    let d = narrowed(em, scaled);
    // every product zero: d is c, a zero c +0
    let absent = em.splat32(ABSENT);
    let none = em.b.ins().icmp(IntCC::Equal, e_p, absent);
    let c_result = em.b.ins().band_not(c, c_fields.zero);
    em.b.ins().bitselect(none, c_result, d)
}
