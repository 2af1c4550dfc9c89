//! T-FDPA four products per SIMD instruction ([`simd_node`]): decoding, exact products and
//! the max exponent in i32x4 lanes, and the truncated alignment and exact sum in f64x2
//! lanes, for the formats [`super::plan`] admits (`Plan::simd`).

use super::plan::Plan;
use super::sum::tree;
use super::{Ptrs, Term, or_flag};
use crate::format::{FloatFormat, Specials};
use crate::ir::*;
use crate::jit::emit::{Emitter, little_endian};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};

/// A 16-byte shuffle immediate.
pub(super) fn shuffle_mask(em: &mut Emitter, bytes: [u8; 16]) -> cranelift_codegen::ir::Immediate {
    em.b.func
        .dfg
        .immediates
        .push(cranelift_codegen::ir::ConstantData::from(bytes.to_vec()))
}

/// Lanes 2 and 3 of an i32x4 moved to lanes 0 and 1.
pub(super) fn high_half(
    em: &mut Emitter,
    x: Value,
    mask: cranelift_codegen::ir::Immediate,
) -> Value {
    let le = little_endian();
    let x8 = em.b.ins().bitcast(types::I8X16, le, x);
    let s = em.b.ins().shuffle(x8, x8, mask);
    em.b.ins().bitcast(types::I32X4, le, s)
}

/// The T-FDPA node of [`simd_plan`], four products per SIMD instruction: each i32 lane
/// decodes one element of a and b (significand, exponent with subnormals, NaN/Inf
/// flag), multiplies the significands exactly and adds the exponents; the largest
/// exponent r (zero products taking e_zero) comes from a lane-wise max. Each term's kept
/// value `trunc(sig * 2^(e - fr + F - r))` is then one f64 multiply by a power of two
/// built from the exponent's bits (exact: both are normal f64 and sig has at most 31
/// bits) and one truncation, and the sum of the truncated terms, integers below 2^52, is
/// exact in f64. This is the integer alignment of [`packed_node`], computed in f64x2.
#[allow(clippy::too_many_arguments)]
pub(super) fn simd_node(
    em: &mut Emitter,
    f: &Fused,
    p: &Plan,
    big_f: i64,
    c_term: &Term,
    ptrs: &Ptrs,
    start: usize,
    special: &mut Option<Value>,
) -> Term {
    let l = f.chain as usize;
    let (fa, fb) = (&p.a, &p.b);
    let le = little_endian();
    let hi_mask = shuffle_mask(
        em,
        [8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15],
    );
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
    let ez = match f.zero_exponent.products {
        ZeroExponent::Fixed(e) => Some(em.splat32(e as i64 + bias)),
        _ => None,
    };
    let mut groups = Vec::with_capacity(l / 4);
    let mut maxv: Option<Value> = None;
    let mut spec: Option<Value> = None;
    for g in 0..l / 4 {
        let ra = em.load_low32x4(ptrs.a, start + 4 * g);
        let rb = em.load_low32x4(ptrs.b, start + 4 * g);
        let (sa, ea, pa) = decode(em, fa, ra);
        let (sb, eb, pb) = decode(em, fb, rb);
        let sig = em.b.ins().imul(sa, sb);
        let e = em.b.ins().iadd(ea, eb);
        let e_max = match ez {
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
        groups.push((signed, e));
    }
    if let Some(spec) = spec {
        let any = em.b.ins().vany_true(spec);
        or_flag(em, special, Some(any));
    }
    or_flag(em, special, c_term.special);
    // the largest exponent
    let maxv = maxv.expect("planned: at least four products");
    let mut r32: Option<Value> = None;
    for lane in 0..4u8 {
        let x = em.b.ins().extractlane(maxv, lane);
        r32 = Some(match r32 {
            None => x,
            Some(r) => em.b.ins().smax(r, x),
        });
    }
    let r = em.b.ins().sextend(types::I64, r32.expect("four lanes"));
    let r = em.b.ins().iadd_imm_s(r, -bias);
    let ce = match c_term.present {
        None => c_term.exp,
        Some(pr) => {
            let floor = em.i64c(i64::MIN / 4);
            em.sel(pr, c_term.exp, floor)
        }
    };
    let r = em.b.ins().smax(r, ce);
    // terms: trunc(sig * 2^(e - bias - fr + F - r)), the power's f64 exponent field
    // e + (F - fr - bias + 1023) - r
    let fr = (fa.mantissa_bits + fb.mantissa_bits) as i64;
    let k = em.i64c(big_f - fr - bias + 1023);
    let kr = em.b.ins().isub(k, r);
    let kr = em.b.ins().ireduce(types::I32, kr);
    let krv = em.b.ins().splat(types::I32X4, kr);
    let mut terms = Vec::with_capacity(l / 2);
    for (signed, e) in groups {
        let pw = em.b.ins().iadd(e, krv);
        let pw_hi = high_half(em, pw, hi_mask);
        let s_hi = high_half(em, signed, hi_mask);
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
    let acc = tree(em, terms, |em, x, y| em.b.ins().fadd(x, y));
    let s0 = em.b.ins().extractlane(acc, 0u8);
    let s1 = em.b.ins().extractlane(acc, 1u8);
    let sum = em.b.ins().fadd(s0, s1);
    // c, the same way in scalar
    let csig = c_term.sig.expect("c is a base term");
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
    let sum = em.b.ins().fcvt_to_sint_sat(types::I64, sum);
    let sum = em.widen(sum);
    let zero = em.icmp_imm(IntCC::Equal, sum, 0);
    let no_sign = em.boolc(false);
    Term {
        neg: no_sign,
        sig: None,
        x: Some(sum),
        d: big_f,
        exp: r,
        natural_exp: r,
        present: None,
        zero,
        node: true,
        sig_bits: 0,
        special: None,
        sign40: None,
    }
}
