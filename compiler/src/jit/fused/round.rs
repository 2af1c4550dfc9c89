//! The end of a chained step: the normalisation steps of the exact sum (on sign and
//! magnitude, each rounding to a precision above an exponent floor, the last one checking
//! overflow into d), then d's encoding with the zero-sign rule and the special results;
//! and, for the common roundings into binary32, both in one straight from the sum
//! ([`host_binary32`], [`integer_binary32`], [`host_two_steps`]).

use super::{SpecialFlags, Term, inf_bits, nan_bits};
use crate::format::FloatFormat;
use crate::ir::*;
use crate::jit::emit::Emitter;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};

/// The sum after the normalisation steps: `(-1)^neg * mag * 2^grid`, with `bits` the bit
/// length of `mag`, and whether (and into which bits) the final step overflowed.
pub(super) struct Normalized {
    neg: Value,
    mag: Value,
    grid: Value,
    bits: Value,
    overflow: Value,
    overflow_bits: Value,
}

/// Round the last alignment's sum through every normalisation step.
pub(super) fn normalize(
    em: &mut Emitter,
    inst: &Instruction,
    d: &FloatFormat,
    fused: &Fused,
    last: Term,
) -> Normalized {
    let root = last.signed(em);
    let root_grid = last.grid(em);
    let root_neg = em.icmp_imm(IntCC::SignedLessThan, root, 0);
    let mut mag = em.abs_w(root);
    let mut g = root_grid;
    let mut bl = em.bit_length(mag);
    let nan_bits = nan_bits(inst);
    let inf_bits = |neg: bool| inf_bits(inst, neg);
    let mut ovf_flag = em.boolc(false);
    let mut ovf_bits = em.i64c(0);
    for step in &fused.normalize {
        let le = em.b.ins().iadd(g, bl);
        let le = em.b.ins().iadd_imm_s(le, -1);
        let floor = em.i64c(step.min_exponent as i64);
        let e = em.b.ins().smax(le, floor);
        let q = em.b.ins().iadd_imm_s(e, -(step.fraction_bits as i64));
        let sh = em.b.ins().isub(q, g);
        let s = em.clamp_shift(sh);
        let rounded = em.round_mag(mag, s, step.rounding, root_neg);
        let pos = em.icmp_imm(IntCC::SignedGreaterThan, sh, 0);
        mag = em.sel(pos, rounded, mag);
        g = em.sel(pos, q, g);
        bl = em.bit_length(mag);
        if let Some(emax) = step.max_exponent {
            let le = em.b.ins().iadd(g, bl);
            let le = em.b.ins().iadd_imm_s(le, -1);
            let nz = em.icmp_imm(IntCC::NotEqual, bl, 0);
            let big = em.icmp_imm(IntCC::SignedGreaterThan, le, emax as i64);
            let o = em.and(nz, big);
            let (pos_bits, neg_bits) = match step.overflow {
                Overflow::Inf | Overflow::Wrap => (inf_bits(false), inf_bits(true)),
                Overflow::Saturate => {
                    let enc = |neg: bool| {
                        let max = crate::exact::Dyadic::from_parts(
                            neg,
                            d.max_significand() as u128,
                            emax as i64 - d.mantissa_bits as i64,
                        );
                        inst.arithmetic
                            .d
                            .encode_finite(neg, &max)
                            .unwrap_or(nan_bits as u64) as i64
                    };
                    (enc(false), enc(true))
                }
            };
            let pb = em.i64c(pos_bits);
            let nb = em.i64c(neg_bits);
            let bits = em.sel(root_neg, nb, pb);
            let fresh = em.not(ovf_flag);
            let fresh = em.and(fresh, o);
            ovf_bits = em.sel(fresh, bits, ovf_bits);
            ovf_flag = em.or(ovf_flag, o);
        }
    }

    Normalized {
        neg: root_neg,
        mag,
        grid: g,
        bits: bl,
        overflow: ovf_flag,
        overflow_bits: ovf_bits,
    }
}

/// d's encoding of the normalised sum: the finite result (or +-0 by the zero-sign rule, or
/// the overflow value), unless the special flags (products overflowing to Inf) decide.
pub(super) fn encode(
    em: &mut Emitter,
    inst: &Instruction,
    d: &FloatFormat,
    fused: &Fused,
    n: &Normalized,
    sp: &SpecialFlags,
) -> Value {
    let (root_neg, mag, g, bl) = (n.neg, n.mag, n.grid, n.bits);
    let (ovf_flag, ovf_bits) = (n.overflow, n.overflow_bits);
    let nan_bits = nan_bits(inst);
    // encode the finite result into d
    let m = d.mantissa_bits as i64;
    let emin = d.min_exponent() as i64;
    let le = em.b.ins().iadd(g, bl);
    let le = em.b.ins().iadd_imm_s(le, -1);
    // f32 and bf16 results: mag * 2^g is exactly representable, so the host converts it
    // (an exact f64 product, an exact narrowing); other formats assemble the fields
    let f32_like = d.exponent_bits == 8
        && d.bias == 127
        && (d.mantissa_bits == 23 || d.mantissa_bits == 7)
        && d.ignored_low_bits == 0;
    let code = if f32_like {
        let m64 = em.low64(mag);
        // the last step leaves at most P + 1 bits: a signed conversion is one instruction,
        // an unsigned one a branchy sequence on x86-64
        let narrow = fused.normalize.last().is_some_and(|s| s.fraction_bits < 62);
        let mf = if narrow {
            em.b.ins().fcvt_from_sint(types::F64, m64)
        } else {
            em.b.ins().fcvt_from_uint(types::F64, m64)
        };
        let gb = em.b.ins().iadd_imm_s(g, 1023);
        let gb = em.b.ins().ishl_imm_s(gb, 52);
        let scale =
            em.b.ins()
                .bitcast(types::F64, cranelift_codegen::ir::MemFlagsData::new(), gb);
        let v = em.b.ins().fmul(mf, scale);
        let v = em.b.ins().fdemote(types::F32, v);
        let bits =
            em.b.ins()
                .bitcast(types::I32, cranelift_codegen::ir::MemFlagsData::new(), v);
        let bits = em.b.ins().uextend(types::I64, bits);
        if d.mantissa_bits == 7 {
            em.b.ins().ushr_imm_s(bits, 16)
        } else {
            bits
        }
    } else {
        let sub = em.icmp_imm(IntCC::SignedLessThan, le, emin);
        let t_sub = em.b.ins().iadd_imm_s(g, m - emin);
        let t_sub = em.clamp_shift(t_sub);
        let man_sub = em.b.ins().ishl(mag, t_sub);
        let man_sub = em.low64(man_sub);
        let lead = em.b.ins().iadd_imm_s(bl, -1);
        let mc = em.i64c(m);
        let t_norm = em.b.ins().isub(mc, lead);
        let tl = em.clamp_shift(t_norm);
        let left = em.b.ins().ishl(mag, tl);
        let nt = em.b.ins().ineg(t_norm);
        let tr = em.clamp_shift(nt);
        let right = em.b.ins().ushr(mag, tr);
        let tpos = em.icmp_imm(IntCC::SignedGreaterThanOrEqual, t_norm, 0);
        let man_norm = em.sel(tpos, left, right);
        let man_norm = em.low64(man_norm);
        let man_norm = em.b.ins().band_imm_s(man_norm, (1i64 << m) - 1);
        let ef = em.b.ins().iadd_imm_s(le, 1 - emin);
        let ef = em.b.ins().ishl_imm_s(ef, m);
        let code_norm = em.b.ins().bor(ef, man_norm);
        em.sel(sub, man_sub, code_norm)
    };
    // a nonzero result has the sum's sign; zeros are chosen below
    let sign = em.i64c(1i64 << (d.exponent_bits as i64 + m));
    let z64 = em.i64c(0);
    let sign = em.sel(root_neg, sign, z64);
    let code = em.b.ins().bor(code, sign);
    let code = if d.ignored_low_bits > 0 {
        em.b.ins().ishl_imm_s(code, d.ignored_low_bits as i64)
    } else {
        code
    };
    let too_big = em.icmp_imm(IntCC::SignedGreaterThan, le, d.max_exponent() as i64);
    let nanc = em.i64c(nan_bits);
    let finite = em.sel(too_big, nanc, code);

    // zero results
    let zero_pos = inst
        .arithmetic
        .d
        .encode_finite(false, &crate::exact::Dyadic::zero())
        .unwrap_or(nan_bits as u64) as i64;
    let zero_neg = inst
        .arithmetic
        .d
        .encode_finite(true, &crate::exact::Dyadic::zero())
        .unwrap_or(nan_bits as u64) as i64;
    let zp = em.i64c(zero_pos);
    let zero_bits = match fused.zero_sign {
        ZeroSign::Positive => zp,
        ZeroSign::ExactPositive => {
            let zn = em.i64c(zero_neg);
            em.sel(root_neg, zn, zp)
        }
    };
    let v_zero = em.icmp_imm(IntCC::Equal, bl, 0);
    let r = em.sel(v_zero, zero_bits, finite);
    let r = em.sel(ovf_flag, ovf_bits, r);
    special_results(em, inst, sp, r)
}

/// The finite result `r`, unless the special flags (products overflowing to Inf) decide.
fn special_results(em: &mut Emitter, inst: &Instruction, sp: &SpecialFlags, r: Value) -> Value {
    let nanc = em.i64c(nan_bits(inst));
    let inf_bits = |neg: bool| inf_bits(inst, neg);
    let both = em.and(sp.pos_inf, sp.neg_inf);
    let is_nan = em.or(sp.nan, both);
    let is_inf = em.or(sp.pos_inf, sp.neg_inf);
    let ip = em.i64c(inf_bits(false));
    let inn = em.i64c(inf_bits(true));
    let infv = em.sel(sp.neg_inf, inn, ip);
    let r = em.sel(is_inf, infv, r);
    em.sel(is_nan, nanc, r)
}

/// A normalisation into an IEEE binary32 d with d's exponent range and overflow to
/// infinity, toward zero to a precision P up to 23 or to nearest even at 23, as the last
/// step (`last`) or the only one: `(P, toward zero)`.
pub(super) fn binary32_step(inst: &Instruction, fused: &Fused, last: bool) -> Option<(i64, bool)> {
    let binary32 = is_binary32(inst.arithmetic.d.as_float()?);
    let step = match fused.normalize.as_slice() {
        [step] => step,
        [_, step] if last => step,
        _ => return None,
    };
    let p = step.fraction_bits as i64;
    let toward_zero = match step.rounding {
        crate::exact::Rounding::TowardZero => true,
        crate::exact::Rounding::NearestEven if p == 23 => false,
        _ => return None,
    };
    (binary32
        && p <= 23
        && step.min_exponent == -126
        && step.max_exponent == Some(127)
        && step.overflow == Overflow::Inf)
        .then_some((p, toward_zero))
}

/// IEEE binary32, with subnormals.
pub(super) fn is_binary32(x: &crate::format::FloatFormat) -> bool {
    x.is_ieee(8, 23)
}

/// The sign of a zero result by the zero rule: +0, or (ExactPositive) the sum's sign for
/// a nonzero sum that rounded to zero (an exact zero sum is never negative).
fn zero_code(em: &mut Emitter, fused: &Fused, neg: Value) -> Value {
    match fused.zero_sign {
        ZeroSign::Positive => em.i64c(0),
        ZeroSign::ExactPositive => {
            let sign = em.i64c(1 << 31);
            let zero = em.i64c(0);
            em.sel(neg, sign, zero)
        }
    }
}

/// A sum that fits an i64 as the direct encodings read it: `sum * 2^g`, its sign, its
/// magnitude and its exponent `e = g + bit length - 1` (g - 1 for a zero sum).
struct SumParts {
    sum: Value,
    g: Value,
    neg: Value,
    mag: Value,
    e: Value,
}

fn sum_parts(em: &mut Emitter, last: Term) -> SumParts {
    let sum = last.signed(em);
    let sum = em.low64(sum);
    let g = last.grid(em);
    let neg = em.icmp_imm(IntCC::SignedLessThan, sum, 0);
    let minus = em.b.ins().ineg(sum);
    let mag = em.sel(neg, minus, sum);
    let lz = em.b.ins().clz(mag);
    let e = em.b.ins().isub(g, lz);
    let e = em.b.ins().iadd_imm_s(e, 63);
    SumParts {
        sum,
        g,
        neg,
        mag,
        e,
    }
}

/// [`normalize`] and [`encode`] in one, toward zero into binary32 ([`binary32_step`]),
/// for a sum that fits an i64: the magnitude is shifted to the step's grid (P bits below
/// its leading one, or 2^(-126 - P) in the subnormal range) and the fields are formed by
/// one addition, `(e + 126) << 23` plus the significand with its leading one at bit 23
/// (which carries it into the exponent field; a subnormal has exponent field 0 and no
/// leading one). Truncation never carries, so the result overflows exactly when the
/// sum's exponent exceeds 127. `None` where [`binary32_step`] does not hold or the step
/// rounds to nearest.
pub(super) fn integer_binary32(
    em: &mut Emitter,
    inst: &Instruction,
    fused: &Fused,
    last: Term,
    sp: &SpecialFlags,
) -> Option<Value> {
    let (p, true) = binary32_step(inst, fused, false)? else {
        return None;
    };
    let SumParts { g, neg, mag, e, .. } = sum_parts(em, last);
    // the step's exponent max(e, -126)
    let floor = em.i64c(-126);
    let step_e = em.b.ins().smax(e, floor);
    // to the grid 2^(step_e - P): right by the positive shift, left by the negative one
    let shift = em.b.ins().isub(step_e, g);
    let shift = em.b.ins().iadd_imm_s(shift, -p);
    let back = em.b.ins().ineg(shift);
    let (right, left) = (em.clamp_shift(shift), em.clamp_shift(back));
    let down = em.b.ins().ushr(mag, right);
    let up = em.b.ins().ishl(mag, left);
    let positive = em.icmp_imm(IntCC::SignedGreaterThan, shift, 0);
    let m = em.sel(positive, down, up);
    let significand = em.b.ins().ishl_imm_s(m, 23 - p);
    let field = em.b.ins().iadd_imm_s(step_e, 126);
    let field = em.b.ins().ishl_imm_s(field, 23);
    let code = em.b.ins().iadd(field, significand);
    let sign = em.i64c(1 << 31);
    let zero = em.i64c(0);
    let sign = em.sel(neg, sign, zero);
    let code = em.b.ins().bor(code, sign);
    let too_big = em.icmp_imm(IntCC::SignedGreaterThan, e, 127);
    let pos_inf = em.i64c(inf_bits(inst, false));
    let neg_inf = em.i64c(inf_bits(inst, true));
    let inf = em.sel(neg, neg_inf, pos_inf);
    let code = em.sel(too_big, inf, code);
    // (after the overflow test: a zero sum's e is g - 1, which may exceed 127)
    let rounded_zero = em.icmp_imm(IntCC::Equal, m, 0);
    let zero_bits = zero_code(em, fused, neg);
    let code = em.sel(rounded_zero, zero_bits, code);
    Some(special_results(em, inst, sp, code))
}

/// [`normalize`] and [`encode`] in one, by the host's f64 and f32 arithmetic
/// ([`binary32_step`]), for a sum exact in f64 and computed as one (the SIMD T-FDPA
/// node's sum in f64 lanes). Toward zero, the bits below the step's grid (P bits below
/// the leading one, or fixed at 2^(-126 - P) in the subnormal range) are cleared in its
/// encoding; the grid's exponent is added to the exponent field (f64's range holds every
/// sum's); and the narrowing to f32, now exact, or to nearest even the one rounding,
/// gives d's code, with infinity past f32's range. `None` where [`binary32_step`] does
/// not hold or the sum is not an f64.
pub(super) fn host_binary32(
    em: &mut Emitter,
    inst: &Instruction,
    fused: &Fused,
    last: Term,
    sp: &SpecialFlags,
) -> Option<Value> {
    let (p, toward_zero) = binary32_step(inst, fused, false)?;
    let le = cranelift_codegen::ir::MemFlagsData::new();
    let x = last.float?;
    let g = last.grid(em);
    let bits = em.b.ins().bitcast(types::I64, le, x);
    let neg = em.icmp_imm(IntCC::SignedLessThan, bits, 0);
    let (bits, lost) = if toward_zero {
        // the value's exponent e; 52 - P bits go, and -126 - e more below f32's normals
        let ef = em.b.ins().ushr_imm_s(bits, 52);
        let ef = em.b.ins().band_imm_s(ef, 0x7ff);
        let e = em.b.ins().iadd(ef, g);
        let below = em.i64c(-126 + 1023);
        let below = em.b.ins().isub(below, e);
        let zero = em.i64c(0);
        let below = em.b.ins().smax(below, zero);
        let clear = em.b.ins().iadd_imm_s(below, 52 - p);
        // 53 or more: nothing is kept (an exact zero too: its exponent field is 0)
        let lost = em.icmp_imm(IntCC::SignedGreaterThan, clear, 52);
        let most = em.i64c(63);
        let clear = em.b.ins().umin(clear, most);
        let ones = em.i64c(-1);
        let mask = em.b.ins().ishl(ones, clear);
        (em.b.ins().band(bits, mask), lost)
    } else {
        // an exact zero: its exponent field would not survive the grid's
        let magnitude = em.b.ins().band_imm_s(bits, i64::MAX);
        let zero = em.icmp_imm(IntCC::Equal, magnitude, 0);
        (bits, zero)
    };
    let scale = em.b.ins().ishl_imm_s(g, 52);
    let bits = em.b.ins().iadd(bits, scale);
    let v = em.b.ins().bitcast(types::F64, le, bits);
    let v = em.b.ins().fdemote(types::F32, v);
    let code = em.b.ins().bitcast(types::I32, le, v);
    let code = em.b.ins().uextend(types::I64, code);
    // zero results. An exact zero sum is +0.0 (the term at the reference exponent is
    // nonzero or +0.0, and terms that cancel give +0.0 under round to nearest), so it
    // takes the zero rule as +0 (`neg` is false); a nonzero sum that rounds to zero
    // takes the rule with its sign.
    let magnitude = em.b.ins().band_imm_s(code, 0x7fff_ffff);
    let rounded_zero = em.icmp_imm(IntCC::Equal, magnitude, 0);
    let rounded_zero = em.or(rounded_zero, lost);
    let zero_bits = zero_code(em, fused, neg);
    let r = em.sel(rounded_zero, zero_bits, code);
    Some(special_results(em, inst, sp, r))
}

/// [`normalize`] and [`encode`] in one for two normalisations, the first toward zero or
/// down (GTR-FDPA's window of F2 bits), the second to nearest even into binary32
/// ([`binary32_step`]), for a sum of an i64 accumulator: the first rounding by one shift
/// of the signed sum (arithmetic for down, of the magnitude toward zero), which leaves at
/// most `P1 + 2` bits; then that value, exact in f64 with P1 up to 50, scaled by its grid
/// and narrowed to f32 by the host, the second rounding. `None` where these conditions do
/// not hold.
pub(super) fn host_two_steps(
    em: &mut Emitter,
    inst: &Instruction,
    fused: &Fused,
    last: Term,
    sp: &SpecialFlags,
) -> Option<Value> {
    let [first, _] = fused.normalize.as_slice() else {
        return None;
    };
    let (23, false) = binary32_step(inst, fused, true)? else {
        return None;
    };
    let p1 = first.fraction_bits as i64;
    let down = match first.rounding {
        crate::exact::Rounding::Down => true,
        crate::exact::Rounding::TowardZero => false,
        _ => return None,
    };
    if em.w != types::I64 || p1 > 50 || first.max_exponent.is_some() {
        return None;
    }
    let SumParts {
        sum,
        g,
        neg,
        mag,
        e,
    } = sum_parts(em, last);
    // the first step's grid max(e, floor) - P1
    let floor = em.i64c(first.min_exponent as i64);
    let e = em.b.ins().smax(e, floor);
    let q = em.b.ins().iadd_imm_s(e, -p1);
    let shift = em.b.ins().isub(q, g);
    let s = em.clamp_shift(shift);
    let rounded = if down {
        em.b.ins().sshr(sum, s)
    } else {
        let m = em.b.ins().ushr(mag, s);
        let minus = em.b.ins().ineg(m);
        em.sel(neg, minus, m)
    };
    let positive = em.icmp_imm(IntCC::SignedGreaterThan, shift, 0);
    let grid = em.sel(positive, q, g);
    let x = em.b.ins().fcvt_from_sint(types::F64, rounded);
    let le = cranelift_codegen::ir::MemFlagsData::new();
    let power = em.b.ins().iadd_imm_s(grid, 1023);
    let power = em.b.ins().ishl_imm_s(power, 52);
    let power = em.b.ins().bitcast(types::F64, le, power);
    let v = em.b.ins().fmul(x, power);
    let v = em.b.ins().fdemote(types::F32, v);
    let code = em.b.ins().bitcast(types::I32, le, v);
    let code = em.b.ins().uextend(types::I64, code);
    // zeros: the narrowing gives +0 for an exact zero sum and keeps the sign of one that
    // rounded to zero, as ExactPositive says; Positive makes every zero +0
    let code = match fused.zero_sign {
        ZeroSign::ExactPositive => code,
        ZeroSign::Positive => {
            let magnitude = em.b.ins().band_imm_s(code, 0x7fff_ffff);
            let zero = em.icmp_imm(IntCC::Equal, magnitude, 0);
            em.sel(zero, magnitude, code)
        }
    };
    Some(special_results(em, inst, sp, code))
}
