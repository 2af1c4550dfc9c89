//! Decoding operands inside a fused kernel: the lean decode of finite codes (special
//! codes only raise a flag), decoding-table lookups for narrow formats, the sign bit read
//! straight from a raw code, and c as an alignment term ([`c_term`]).

use super::{SIGN_BIT, Term, or_flag, zero_rule};
use crate::format::{FloatFormat, Specials};
use crate::ir::*;
use crate::jit::emit::Emitter;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};

/// c as an alignment term: its sign, significand and exponent from `c_format` (c's format
/// in the first chained step, d's after), with the zero-exponent rule for a zero c.
pub(super) fn c_term(em: &mut Emitter, fused: &Fused, cf: &FloatFormat, c_raw: Value) -> Term {
    let cond = fused.conditioning;
    {
        let mut flag = None;
        let (neg, sig, exp) = lean_decode(em, cf, c_raw, cond.flush_c, &mut flag);
        let zero = em.icmp_imm(IntCC::Equal, sig, 0);
        let (e, present) = zero_rule(em, fused.zero_exponent.c, zero, exp);
        let c_sign40 = raw_sign_pos(cf, cond.flush_c).map(|pos| sign_to_40(em, c_raw, pos));
        Term {
            neg,
            sig: Some(sig),
            x: None,
            d: cf.mantissa_bits as i64,
            exp: e,
            natural_exp: exp,
            present,
            zero,
            node: false,
            sig_bits: cf.mantissa_bits + 1,
            special: flag,
            float: None,
            sign40: c_sign40,
        }
    }
}

/// Does the format have codes for a NaN or an infinity ([`special_code`] is `Some`)?
pub(super) fn special_code_possible(float: &FloatFormat) -> bool {
    float.specials != Specials::None
}

/// Is this code a NaN or an infinity? Two instructions: a mask and a compare.
pub(super) fn special_code(em: &mut Emitter, float: &FloatFormat, raw: Value) -> Option<Value> {
    let (e, m, ign) = (
        float.exponent_bits as i64,
        float.mantissa_bits as i64,
        float.ignored_low_bits as i64,
    );
    let (mask, want) = match float.specials {
        Specials::Ieee => {
            let x = ((1i64 << e) - 1) << (m + ign);
            (x, x)
        }
        Specials::Fn => {
            let x = ((1i64 << (e + m)) - 1) << ign;
            (x, x)
        }
        Specials::Fnuz => (((1i64 << (e + m + 1)) - 1) << ign, (1i64 << (e + m)) << ign),
        Specials::None => return None,
    };
    let v = em.b.ins().band_imm_s(raw, mask);
    Some(em.icmp_imm(IntCC::Equal, v, want))
}

/// The sign bit at position `pos` of `x`, moved to bit [`SIGN_BIT`] (everything else 0).
pub(super) fn sign_to_40(em: &mut Emitter, x: Value, pos: i64) -> Value {
    let b = em.b.ins().band_imm_s(x, 1i64 << pos);
    if pos < SIGN_BIT {
        em.b.ins().ishl_imm_s(b, SIGN_BIT - pos)
    } else if pos > SIGN_BIT {
        em.b.ins().ushr_imm_s(b, pos - SIGN_BIT)
    } else {
        b
    }
}

/// Where the sign bit of a raw code sits, if it can be read without decoding (a signed
/// format whose sign `flush` cannot clear).
pub(super) fn raw_sign_pos(float: &FloatFormat, flush: bool) -> Option<i64> {
    (float.signed && !(flush && float.subnormals))
        .then(|| (float.ignored_low_bits + float.exponent_bits + float.mantissa_bits) as i64)
}

/// The decoding-table entry of a raw element (masked to its storage bits).
pub(super) fn table_entry(
    em: &mut Emitter,
    table: &'static [u64],
    float: &FloatFormat,
    raw: Value,
) -> Value {
    let idx =
        em.b.ins()
            .band_imm_s(raw, crate::format::low_mask(float.storage_bits) as i64);
    let off = em.b.ins().ishl_imm_s(idx, 3);
    let base = em.table_address(table);
    let at = em.b.ins().iadd(base, off);
    em.b.ins().load(
        types::I64,
        cranelift_codegen::ir::MemFlagsData::trusted()
            .with_readonly()
            .with_can_move(),
        at,
        0,
    )
}

/// Sign, significand and exponent of a finite code, without special-value flags.
/// `neg` is an i8 boolean.
pub(super) fn lean_decode(
    em: &mut Emitter,
    float: &FloatFormat,
    raw: Value,
    flush: bool,
    special: &mut Option<Value>,
) -> (Value, Value, Value) {
    let m = float.mantissa_bits as i64;
    let e = float.exponent_bits as i64;
    // bits above the code are masked off field by field
    let code = if float.ignored_low_bits > 0 {
        em.b.ins().ushr_imm_s(raw, float.ignored_low_bits as i64)
    } else {
        raw
    };
    let man = em.b.ins().band_imm_s(code, (1i64 << m) - 1);
    let ef = em.b.ins().ushr_imm_s(code, m);
    let ef = em.b.ins().band_imm_s(ef, (1i64 << e) - 1);
    // NaN or Inf: one compare on the exponent field for IEEE formats
    let sp = match float.specials {
        Specials::Ieee => Some(em.icmp_imm(IntCC::Equal, ef, (1i64 << e) - 1)),
        _ => special_code(em, float, raw),
    };
    or_flag(em, special, sp);
    let neg = if float.signed {
        let s = em.b.ins().ushr_imm_s(code, e + m);
        let s = em.b.ins().band_imm_s(s, 1);
        em.b.ins().ireduce(types::I8, s)
    } else {
        em.boolc(false)
    };
    let implicit = em.b.ins().bor_imm_s(man, 1i64 << m);
    if !float.subnormals {
        let exp = em.b.ins().iadd_imm_s(ef, -(float.bias as i64));
        return (neg, implicit, exp);
    }
    let nz = em.icmp_imm(IntCC::NotEqual, ef, 0);
    let one = em.i64c(1);
    let efx = em.b.ins().smax(ef, one);
    let exp = em.b.ins().iadd_imm_s(efx, -(float.bias as i64));
    if flush {
        let z = em.i64c(0);
        let sig = em.sel(nz, implicit, z);
        let f0 = em.boolc(false);
        let neg = em.sel(nz, neg, f0);
        (neg, sig, exp)
    } else {
        let sig = em.sel(nz, implicit, man);
        (neg, sig, exp)
    }
}
