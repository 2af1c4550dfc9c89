//! Products four per SIMD instruction: decoding, exact products and the max exponent in
//! i32x4 lanes, and the truncated alignment and exact sum in f32x4 and i32x4 lanes where
//! the kept values fit 31 bits (f64x2 lanes otherwise), for the formats and shapes
//! [`super::plan`] admits (`Plan::simd`): T-FDPA's one alignment of every product and c
//! ([`simd_node`]), and GTR-FDPA's first level, the even and the odd products each
//! aligned to their own largest exponent ([`parity_nodes`]).

use super::plan::Plan;
use super::sum::tree;
use super::{Ptrs, Term, or_flag};
use crate::format::{FloatFormat, Specials};
use crate::ir::*;
use crate::jit::emit::{Emitter, little_endian};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};

/// A 16-byte shuffle immediate.
/// (One entry per distinct mask, so that equal shuffles of one value are computed once.)
pub(super) fn shuffle_mask(em: &mut Emitter, bytes: [u8; 16]) -> cranelift_codegen::ir::Immediate {
    let data = cranelift_codegen::ir::ConstantData::from(bytes.to_vec());
    let immediates = &mut em.b.func.dfg.immediates;
    match immediates.iter().find(|(_, d)| **d == data) {
        Some((imm, _)) => imm,
        None => immediates.push(data),
    }
}

/// Lanes 2 and 3 of an i32x4 moved to lanes 0 and 1.
pub(super) fn high_half(em: &mut Emitter, x: Value) -> Value {
    let mask = shuffle_mask(
        em,
        [8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15],
    );
    let le = little_endian();
    let x8 = em.b.ins().bitcast(types::I8X16, le, x);
    let s = em.b.ins().shuffle(x8, x8, mask);
    em.b.ins().bitcast(types::I32X4, le, s)
}

/// The biased exponent a zero product takes in the lane-wise max when zeros take no part
/// in it (`zero exponent never`): below every real one.
pub(super) const ABSENT: i64 = -(1 << 20);

/// The products of one chained step, four per i32x4.
struct Lanes {
    /// Per four products: the signed exact products and their biased exponents.
    groups: Vec<(Value, Value)>,
    /// Per four products, with `value_lanes`: their values as f32x4 (exact).
    values: Vec<Value>,
    /// The lane-wise max of the exponents the max search sees (biased; zero products
    /// by the zero-exponent rule, [`ABSENT`] where they take no part).
    max: Value,
    /// The sum of a's and b's exponent biases.
    bias: i64,
}

/// Decode a and b four elements at a time (significand, exponent with subnormals, NaN/Inf
/// flag), multiply the significands exactly, add the exponents and keep the lane-wise
/// max; a NaN or an infinity among the inputs sets `special`.
fn product_lanes(
    em: &mut Emitter,
    fused: &Fused,
    p: &Plan,
    ptrs: &Ptrs,
    start: usize,
    special: &mut Option<Value>,
) -> Lanes {
    let l = fused.chain as usize;
    let (fa, fb) = (&p.a, &p.b);
    // (significand, biased exponent max(field, 1), NaN/Inf mask)
    let decode = |em: &mut Emitter, x: &FloatFormat, raw: Value| -> (Value, Value, Option<Value>) {
        let (m, e) = (x.mantissa_bits as i64, x.exponent_bits as i64);
        let code = if x.ignored_low_bits > 0 {
            em.b.ins().ushr_imm_s(raw, x.ignored_low_bits as i64)
        } else {
            raw
        };
        let mm = em.splat32((1i64 << m) - 1);
        let man = em.b.ins().band(code, mm);
        let ef = em.b.ins().ushr_imm_s(code, m);
        let emask = em.splat32((1i64 << e) - 1);
        let ef = em.b.ins().band(ef, emask);
        let zero = em.splat32(0);
        let sub = em.b.ins().icmp(IntCC::Equal, ef, zero);
        let ex = em.b.ins().isub(ef, sub);
        let one = em.splat32(1i64 << m);
        let implicit = em.b.ins().band_not(one, sub);
        let sig = em.b.ins().bor(man, implicit);
        // the lane masks of `special_code`
        let sp = match x.specials {
            Specials::Ieee => Some(em.b.ins().icmp(IntCC::Equal, ef, emask)),
            Specials::Fn => {
                let all = em.splat32((1i64 << (e + m)) - 1);
                let v = em.b.ins().band(code, all);
                Some(em.b.ins().icmp(IntCC::Equal, v, all))
            }
            Specials::Fnuz => {
                let all = em.splat32((1i64 << (e + m + 1)) - 1);
                let v = em.b.ins().band(code, all);
                let want = em.splat32(1i64 << (e + m));
                Some(em.b.ins().icmp(IntCC::Equal, v, want))
            }
            Specials::None => None,
        };
        (sig, ex, sp)
    };
    let sign_mask = |em: &mut Emitter, x: Value, pos: i64| {
        let y = em.b.ins().ishl_imm_s(x, 31 - pos);
        em.b.ins().sshr_imm_s(y, 31)
    };
    let pos = |x: &FloatFormat| (x.ignored_low_bits + x.exponent_bits + x.mantissa_bits) as i64;
    let bias = (fa.bias + fb.bias) as i64;
    let zero_exp = match fused.zero_exponent.products {
        ZeroExponent::Fixed(e) => Some(em.splat32(e as i64 + bias)),
        ZeroExponent::Never => Some(em.splat32(ABSENT)),
        ZeroExponent::Natural => None,
    };
    let mut groups = Vec::with_capacity(l / 4);
    let values_wanted = p.simd.is_some_and(|s| s.value_lanes);
    let fr = (fa.mantissa_bits + fb.mantissa_bits) as i64;
    let value_field = em.splat32(127 - bias - fr);
    let mut values = Vec::with_capacity(l / 4);
    let mut maxv: Option<Value> = None;
    let mut spec: Option<Value> = None;
    for g in 0..l / 4 {
        let ra = em.load_low32x4(ptrs.a, start + 4 * g);
        let rb = em.load_low32x4(ptrs.b, start + 4 * g);
        let (sa, ea, pa) = decode(em, fa, ra);
        let (sb, eb, pb) = decode(em, fb, rb);
        let sig = em.b.ins().imul(sa, sb);
        let e = em.b.ins().iadd(ea, eb);
        let e_max = match zero_exp {
            Some(z) => {
                let zero = em.splat32(0);
                let is0 = em.b.ins().icmp(IntCC::Equal, sig, zero);
                em.b.ins().bitselect(is0, z, e)
            }
            None => e,
        };
        maxv = Some(match maxv {
            None => e_max,
            Some(m) => em.b.ins().smax(m, e_max),
        });
        for sp in [pa, pb].into_iter().flatten() {
            spec = Some(match spec {
                None => sp,
                Some(s) => em.b.ins().bor(s, sp),
            });
        }
        let neg = if pos(fa) == pos(fb) {
            let x = em.b.ins().bxor(ra, rb);
            sign_mask(em, x, pos(fa))
        } else {
            let na = sign_mask(em, ra, pos(fa));
            let nb = sign_mask(em, rb, pos(fb));
            em.b.ins().bxor(na, nb)
        };
        let x = em.b.ins().bxor(sig, neg);
        let signed = em.b.ins().isub(x, neg);
        if values_wanted {
            // sig 2^(e - bias - fr), its scale built in f32's exponent field
            let field = em.b.ins().iadd(e, value_field);
            let w = em.b.ins().ishl_imm_s(field, 23);
            let scale = em.b.ins().bitcast(types::F32X4, little_endian(), w);
            let v = em.b.ins().fcvt_from_sint(types::F32X4, signed);
            values.push(em.b.ins().fmul(v, scale));
        }
        groups.push((signed, e));
    }
    if let Some(spec) = spec {
        let any = em.b.ins().vany_true(spec);
        or_flag(em, special, Some(any));
    }
    Lanes {
        groups,
        values,
        max: maxv.expect("planned: at least four products"),
        bias,
    }
}

/// Each product's kept value `trunc(sig * 2^(e - fr + F - r))`, summed lane-wise in
/// f64x2: `power` holds, per i32 lane, the f64 exponent field `F - fr + 1023 - r` of that
/// lane's reference r. The power of two is built from the exponent's bits (exact: both
/// are normal f64 and sig has at most 31 bits), the truncation is exact, and the sum of
/// the truncated terms, integers below 2^52, is exact in f64. Lane 0 of the result sums
/// i32 lanes 0 and 2, lane 1 lanes 1 and 3.
fn truncated_sum(em: &mut Emitter, groups: &[(Value, Value)], power: Value) -> Value {
    let le = little_endian();
    let mut terms = Vec::with_capacity(groups.len() * 2);
    for &(signed, e) in groups {
        let pw = em.b.ins().iadd(e, power);
        let pw_hi = high_half(em, pw);
        let s_hi = high_half(em, signed);
        for (pw, s) in [(pw, signed), (pw_hi, s_hi)] {
            let w = em.b.ins().swiden_low(pw);
            let w = em.b.ins().ishl_imm_s(w, 52);
            let scale = em.b.ins().bitcast(types::F64X2, le, w);
            let sw = em.b.ins().swiden_low(s);
            let v = em.b.ins().fcvt_from_sint(types::F64X2, sw);
            let v = em.b.ins().fmul(v, scale);
            terms.push(em.b.ins().trunc(v));
        }
    }
    tree(em, terms, |em, x, y| em.b.ins().fadd(x, y))
}

/// [`truncated_sum`] four products per instruction, where every product is exact in f32
/// and the kept values' sum is below 2^31 (`Plan::simd`'s `int_lanes`): each product is
/// scaled in f32x4 and truncated to an i32 by the conversion itself, and the lanes add as
/// integers. `power` holds the f32 exponent field `F - fr + 127 - r`; each lane's power is
/// clamped to `[2^-30, 2^(F - fr)]`: a nonzero product's exponent is at most r, so the
/// upper clamp only meets zero products (which stay 0 instead of meeting an infinite
/// power), and below 2^-30 a product (below 2^24) keeps nothing either way. Returns the i32 lane sums (lane i sums the products in lanes i of the groups).
fn truncated_sum_i32(em: &mut Emitter, groups: &[(Value, Value)], power: Value, top: i64) -> Value {
    let le = little_endian();
    let lo = em.splat32(127 - 30);
    let hi = em.splat32(127 + top);
    let mut terms = Vec::with_capacity(groups.len());
    for &(signed, e) in groups {
        let pw = em.b.ins().iadd(e, power);
        let pw = em.b.ins().smax(pw, lo);
        let pw = em.b.ins().smin(pw, hi);
        let w = em.b.ins().ishl_imm_s(pw, 23);
        let scale = em.b.ins().bitcast(types::F32X4, le, w);
        let v = em.b.ins().fcvt_from_sint(types::F32X4, signed);
        let v = em.b.ins().fmul(v, scale);
        terms.push(truncate_to_i32(em, v));
    }
    tree(em, terms, |em, x, y| em.b.ins().iadd(x, y))
}

/// [`truncated_sum_i32`] for products held as their f32 values (`value_lanes`): each
/// kept value is `trunc(v * 2^(F - r))`, with `power` the f32x4 of each lane's 2^(F - r)
/// (a normal f32: where r is so low that it would not be, every product is zero). A
/// nonzero product is at most 2^(r + 2), so its scaled value is below 2^(F + 2); scaled
/// below f32's normal range it is below 1 whatever its rounding and keeps nothing.
pub(super) fn scaled_sum_i32(em: &mut Emitter, values: &[Value], power: Value) -> Value {
    let terms = values
        .iter()
        .map(|&v| {
            let v = em.b.ins().fmul(v, power);
            truncate_to_i32(em, v)
        })
        .collect();
    tree(em, terms, |em, x, y| em.b.ins().iadd(x, y))
}

/// The f32x4 power 2^(F - r) from the i32x4 of the lanes' exponent fields `F - r + 127`,
/// clamped to f32's normal range: above it r lies below every nonzero product (all the
/// products are zero), below it r is beyond every product's reach (each keeps nothing).
/// (With f32 or narrower c the field is never below 0, and an infinite power meets only
/// zero products, whose NaNs convert to i32::MIN and happen to sum to 0 over a multiple
/// of four lanes; the clamps keep the kernel from relying on either.)
pub(super) fn power_from_fields(em: &mut Emitter, fields: Value) -> Value {
    let lo = em.splat32(1);
    let hi = em.splat32(254);
    let f = em.b.ins().smax(fields, lo);
    let f = em.b.ins().smin(f, hi);
    let w = em.b.ins().ishl_imm_s(f, 23);
    em.b.ins().bitcast(types::F32X4, little_endian(), w)
}

/// f32x4 lanes converted to i32 toward zero. Every lane of a finite step is an integer-
/// valued conversion in range; a special step's garbage converts to anything without
/// trapping, and its result is not used. On x86-64 this is one `cvttps2dq` (Cranelift's
/// saturating conversion adds a NaN and range fix-up around it); elsewhere (AArch64's
/// `fcvtzs` saturates by itself) the saturating conversion.
pub(super) fn truncate_to_i32(em: &mut Emitter, v: Value) -> Value {
    if cfg!(target_arch = "x86_64") {
        em.b.ins().x86_cvtt2dq(types::I32X4, v)
    } else {
        em.b.ins().fcvt_to_sint_sat(types::I32X4, v)
    }
}

/// The T-FDPA node of [`super::plan::SimdShape::All`]: every product and c aligned to
/// the largest exponent r (zero products taking e_zero), each truncated to F fraction bits
/// below it, and summed (in f64x2 lanes, or i32x4 where the values are narrow enough):
/// the integer alignment of [`super::align::packed_node`], computed in lanes.
#[allow(clippy::too_many_arguments)]
pub(super) fn simd_node(
    em: &mut Emitter,
    fused: &Fused,
    p: &Plan,
    big_f: i64,
    c_term: &Term,
    ptrs: &Ptrs,
    start: usize,
    special: &mut Option<Value>,
) -> Term {
    let lanes = product_lanes(em, fused, p, ptrs, start, special);
    or_flag(em, special, c_term.special);
    // the largest exponent
    let r32 = across_lanes(em, lanes.max, |em, x, y| em.b.ins().smax(x, y));
    let r = em.b.ins().sextend(types::I64, r32);
    let r = em.b.ins().iadd_imm_s(r, -lanes.bias);
    let ce = match c_term.present {
        None => c_term.exp,
        Some(pr) => {
            let floor = em.i64c(i64::MIN / 4);
            em.sel(pr, c_term.exp, floor)
        }
    };
    let r = em.b.ins().smax(r, ce);
    let fr = (p.a.mantissa_bits + p.b.mantissa_bits) as i64;
    let csig = c_term.sig.expect("c is a base term");
    let sum = if p.simd.is_some_and(|s| s.int_lanes) {
        // the power's f32 exponent field e + (F - fr - bias + 127) - r
        let k = em.i64c(big_f - fr - lanes.bias + 127);
        let kr = em.b.ins().isub(k, r);
        let kr = em.b.ins().ireduce(types::I32, kr);
        let acc = if lanes.values.is_empty() {
            let krv = em.b.ins().splat(types::I32X4, kr);
            truncated_sum_i32(em, &lanes.groups, krv, big_f - fr)
        } else {
            let field = em.b.ins().iadd_imm_s(kr, fr + lanes.bias);
            let fields = em.b.ins().splat(types::I32X4, field);
            let power = power_from_fields(em, fields);
            scaled_sum_i32(em, &lanes.values, power)
        };
        let sum = across_lanes(em, acc, |em, x, y| em.b.ins().iadd(x, y));
        let sum = em.b.ins().sextend(types::I64, sum);
        // c's kept value trunc(|c| 2^(F - r)), |c| = sig 2^(e - d), by two shifts: left
        // by max(F - d, 0) (|c| < 2^(r + 1), so the right shift r - e + d - F + left is
        // not negative when c is present; a zero c shifts to 0 by any amount)
        let left = (big_f - c_term.d).max(0);
        let cs = em.b.ins().ishl_imm_s(csig, left);
        let right = em.b.ins().isub(r, c_term.natural_exp);
        let right = em.b.ins().iadd_imm_s(right, c_term.d - big_f + left);
        let most = em.i64c(63);
        let right = em.b.ins().umin(right, most);
        let kept = em.b.ins().ushr(cs, right);
        let kept_neg = em.b.ins().ineg(kept);
        let kept = em.sel(c_term.neg, kept_neg, kept);
        em.b.ins().iadd(sum, kept)
    } else {
        // the power's f64 exponent field e + (F - fr - bias + 1023) - r
        let k = em.i64c(big_f - fr - lanes.bias + 1023);
        let kr = em.b.ins().isub(k, r);
        let kr = em.b.ins().ireduce(types::I32, kr);
        let krv = em.b.ins().splat(types::I32X4, kr);
        let acc = truncated_sum(em, &lanes.groups, krv);
        let s0 = em.b.ins().extractlane(acc, 0u8);
        let s1 = em.b.ins().extractlane(acc, 1u8);
        let sum = em.b.ins().fadd(s0, s1);
        // c, the same way in scalar
        let cneg = em.b.ins().ineg(csig);
        let cs = em.sel(c_term.neg, cneg, csig);
        let cv = em.b.ins().fcvt_from_sint(types::F64, cs);
        let q =
            em.b.ins()
                .iadd_imm_s(c_term.natural_exp, big_f - c_term.d + 1023);
        let q = em.b.ins().isub(q, r);
        let q = em.b.ins().ishl_imm_s(q, 52);
        let cscale = em.b.ins().bitcast(types::F64, MemFlagsData::new(), q);
        let cv = em.b.ins().fmul(cv, cscale);
        let cv = em.b.ins().trunc(cv);
        let sum = em.b.ins().fadd(sum, cv);
        // an integer below 2^52 for finite inputs; special inputs leave any value, and the
        // saturating conversion never traps
        let int = em.b.ins().fcvt_to_sint_sat(types::I64, sum);
        let int = em.widen(int);
        return Term {
            float: Some(sum),
            ..Term::sum(em, int, big_f, r, r, None)
        };
    };
    let sum = em.widen(sum);
    Term::sum(em, sum, big_f, r, r, None)
}

/// `op` folded across the four i32 lanes of `x` (two shuffles), as a scalar i32.
fn across_lanes(
    em: &mut Emitter,
    x: Value,
    op: impl Fn(&mut Emitter, Value, Value) -> Value,
) -> Value {
    let hi = em.pick32(x, x, [2, 3, 2, 3]);
    let x = op(em, x, hi);
    let odd = em.pick32(x, x, [1, 1, 1, 1]);
    let x = op(em, x, odd);
    em.b.ins().extractlane(x, 0u8)
}

/// The two nodes of [`super::plan::SimdShape::EvenOdd`]: the even products aligned to
/// their largest exponent and truncated to F fraction bits below it, and the odd ones
/// likewise, as
/// [`super::align::packed_node`] computes them one by one. With four products per i32x4
/// the even ones are lanes 0 and 2, so one lane-wise max, one shuffle and one f64x2 sum
/// serve both. Returns the even node, then the odd one.
pub(super) fn parity_nodes(
    em: &mut Emitter,
    f: &Fused,
    p: &Plan,
    big_f: i64,
    ptrs: &Ptrs,
    start: usize,
    special: &mut Option<Value>,
) -> [Term; 2] {
    let lanes = product_lanes(em, f, p, ptrs, start, special);
    // lanes 0 and 1: the even and the odd reference (biased)
    let hi = em.pick32(lanes.max, lanes.max, [2, 3, 2, 3]);
    let r2 = em.b.ins().smax(lanes.max, hi);
    // an all-zero parity has no reference: its terms are 0 on any grid, so the power is
    // formed against the lowest exponent a product has (and stays a normal f64)
    let lowest = em.splat32(p.a.min_exponent() as i64 + p.b.min_exponent() as i64 + lanes.bias);
    let rc = em.b.ins().smax(r2, lowest);
    let rc = em.pick32(rc, rc, [0, 1, 0, 1]);
    let fr = (p.a.mantissa_bits + p.b.mantissa_bits) as i64;
    // lanes 0 and 1: the even and the odd node's sum, as an i64
    let sums: [Value; 2] = if p.simd.is_some_and(|s| s.int_lanes) {
        let acc = if lanes.values.is_empty() {
            let k = em.splat32(big_f - fr + 127);
            let power = em.b.ins().isub(k, rc);
            truncated_sum_i32(em, &lanes.groups, power, big_f - fr)
        } else {
            // 2^(F - r) for each lane's reference r (biased in rc)
            let k = em.splat32(big_f + lanes.bias + 127);
            let fields = em.b.ins().isub(k, rc);
            let power = power_from_fields(em, fields);
            scaled_sum_i32(em, &lanes.values, power)
        };
        let hi = em.pick32(acc, acc, [2, 3, 2, 3]);
        let acc = em.b.ins().iadd(acc, hi);
        std::array::from_fn(|lane| {
            let s = em.b.ins().extractlane(acc, lane as u8);
            em.b.ins().sextend(types::I64, s)
        })
    } else {
        let k = em.splat32(big_f - fr + 1023);
        let power = em.b.ins().isub(k, rc);
        let acc = truncated_sum(em, &lanes.groups, power);
        // finite sums are integers below 2^52; the saturating conversion never traps
        std::array::from_fn(|lane| {
            let s = em.b.ins().extractlane(acc, lane as u8);
            em.b.ins().fcvt_to_sint_sat(types::I64, s)
        })
    };
    let always = !matches!(f.zero_exponent.products, ZeroExponent::Never);
    std::array::from_fn(|lane| {
        let sum = em.widen(sums[lane]);
        let r = em.b.ins().extractlane(r2, lane as u8);
        let r = em.b.ins().sextend(types::I64, r);
        let r = em.b.ins().iadd_imm_s(r, -lanes.bias);
        let (r, present) = if always {
            (r, None)
        } else {
            // as packed_node: a parity of zeros has exponent 0 and takes no part later
            let any = em.icmp_imm(IntCC::SignedGreaterThan, r, ABSENT / 2);
            let zero = em.i64c(0);
            (em.sel(any, r, zero), Some(any))
        };
        Term::sum(em, sum, big_f, r, r, present)
    })
}
