//! Lowering of integer pipelines: `s8`/`u8`/`s4`/`u4` products and `b1` xor/and summed
//! exactly in i64 with c, then wrapped or saturated into d. [`plan`] checks that the exact
//! sum cannot leave i64.

use super::emit::Emitter;
use crate::format::{IntFormat, int_range};
use crate::ir::*;
use crate::valid::{CheckedInteger, IntOperands};
use cranelift_codegen::ir::InstBuilder;
use cranelift_codegen::ir::Value;

/// The integer operands (of at most 32 bits, by validation).
pub(crate) struct Plan {
    operands: IntOperands,
}

pub(crate) fn plan(inst: &Instruction, checked: &CheckedInteger) -> Result<Plan, String> {
    let (a, b) = (&checked.operands.a, &checked.operands.b);
    // |x op y| < 2^(bits_a + bits_b); k such terms and a 32-bit c stay far inside i64
    let term_bits = (a.bits + b.bits) as u64;
    let k_bits = 64 - (inst.arithmetic.k as u64).leading_zeros() as u64;
    if term_bits + k_bits + 2 > 62 {
        return Err("the exact integer sum could exceed 62 bits".into());
    }
    Ok(Plan {
        operands: checked.operands.clone(),
    })
}

fn value(em: &mut Emitter, f: &IntFormat, raw: Value) -> Value {
    let bits = f.bits as i64;
    if f.signed {
        let s = em.b.ins().ishl_imm_s(raw, 64 - bits);
        em.b.ins().sshr_imm_s(s, 64 - bits)
    } else {
        em.b.ins()
            .band_imm_s(raw, crate::format::low_mask(f.bits) as i64)
    }
}

pub(crate) fn emit(
    em: &mut Emitter,
    inst: &Instruction,
    p: &IntegerDot,
    plan: &Plan,
    c: Value,
    a_ptr: Value,
    b_ptr: Value,
) -> Value {
    let ops = &plan.operands;
    let (fa, fb, fc, fd) = (&ops.a, &ops.b, &ops.c, &ops.d);
    let mut sum = value(em, fc, c);
    for k in 0..inst.k() {
        let ra = em.load(a_ptr, k);
        let rb = em.load(b_ptr, k);
        let x = value(em, fa, ra);
        let y = value(em, fb, rb);
        let t = match p.op {
            IntegerOp::Multiply => em.b.ins().imul(x, y),
            IntegerOp::Xor => em.b.ins().bxor(x, y),
            IntegerOp::And => em.b.ins().band(x, y),
        };
        sum = em.b.ins().iadd(sum, t);
    }
    let v = match p.overflow {
        Overflow::Saturate => {
            let (lo, hi) = int_range(fd);
            let lo = em.i64c(lo);
            let hi = em.i64c(hi);
            let v = em.b.ins().smax(sum, lo);
            em.b.ins().smin(v, hi)
        }
        // wrapping modulo 2^bits is what the mask below leaves
        Overflow::Wrap | Overflow::Inf => sum,
    };
    em.b.ins()
        .band_imm_s(v, crate::format::low_mask(fd.bits) as i64)
}
