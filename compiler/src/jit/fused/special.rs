//! The special-value path of a chained step: when some input is a NaN or an infinity,
//! a small out-of-line loop over the products computes which NaN or infinity the
//! interpreter's rules give (NaN inputs, `0 * Inf`, opposite infinities, products
//! overflowing to Inf, NaN or infinite scale factors).

use super::plan::Plan;
use super::products::overflows;
use super::{Ptrs, SpecialFlags, inf_bits, nan_bits};
use crate::format::FloatFormat;
use crate::ir::*;
use crate::jit::emit::{Decoded, Emitter};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{BlockArg, InstBuilder, Value, types};

/// The result when some input is a NaN or an infinity: the interpreter's special rules
/// (NaN inputs, `0 * Inf`, opposite infinities, products overflowing to Inf).
#[allow(clippy::too_many_arguments)]
pub(super) fn special_step(
    em: &mut Emitter,
    inst: &Instruction,
    fused: &Fused,
    p: &Plan,
    cf: &FloatFormat,
    c_raw: Value,
    ptrs: &Ptrs,
    start: usize,
) -> Value {
    let cond = fused.conditioning;
    let l = fused.chain as usize;
    let f0 = em.boolc(false);
    let mut sp = SpecialFlags {
        nan: f0,
        pos_inf: f0,
        neg_inf: f0,
    };
    let dc = em.decode_float(cf, c_raw, cond.flush_c);
    sp.add(em, dc.nan, dc.inf, dc.neg);
    let block = inst
        .arithmetic
        .scale
        .as_ref()
        .map(|s| s.block as usize)
        .unwrap_or(1);
    let scale_base = start / block;
    let fr = (p.a.mantissa_bits + p.b.mantissa_bits) as i64;
    // a loop over the products: this path is rare, so it is kept small
    let head = em.b.create_block();
    let body = em.b.create_block();
    let exit = em.b.create_block();
    // the whole special path is cold: laid out away from the finite path
    for b in [head, body, exit] {
        em.b.set_cold_block(b);
    }
    em.b.append_block_param(head, types::I64);
    for _ in 0..3 {
        em.b.append_block_param(head, types::I8);
    }
    for _ in 0..3 {
        em.b.append_block_param(exit, types::I8);
    }
    let k0 = em.i64c(0);
    em.b.ins().jump(
        head,
        &[
            BlockArg::Value(k0),
            BlockArg::Value(sp.nan),
            BlockArg::Value(sp.pos_inf),
            BlockArg::Value(sp.neg_inf),
        ],
    );
    em.b.switch_to_block(head);
    let hp = em.b.block_params(head).to_vec();
    let k = hp[0];
    sp = SpecialFlags {
        nan: hp[1],
        pos_inf: hp[2],
        neg_inf: hp[3],
    };
    let more = em.icmp_imm(IntCC::SignedLessThan, k, l as i64);
    em.b.ins().brif(
        more,
        body,
        &[],
        exit,
        &[
            BlockArg::Value(sp.nan),
            BlockArg::Value(sp.pos_inf),
            BlockArg::Value(sp.neg_inf),
        ],
    );
    em.b.switch_to_block(body);
    {
        let kk = em.b.ins().iadd_imm_s(k, start as i64);
        let ra = em.load_at(ptrs.a, kk);
        let rb = em.load_at(ptrs.b, kk);
        let da = em.decode_float(&p.a, ra, cond.flush_a);
        let db = em.decode_float(&p.b, rb, cond.flush_b);
        let (mut nan, mut inf, mut neg, zero) = {
            let ab = em.or(da.nan, db.nan);
            let x = em.and(da.inf, db.zero);
            let y = em.and(db.inf, da.zero);
            let xy = em.or(x, y);
            let nan = em.or(ab, xy);
            let anyinf = em.or(da.inf, db.inf);
            let notnan = em.not(nan);
            let inf = em.and(anyinf, notnan);
            let neg = em.b.ins().bxor(da.neg, db.neg);
            let z = em.or(da.zero, db.zero);
            let sa = em.or(da.nan, da.inf);
            let sb = em.or(db.nan, db.inf);
            let sab = em.or(sa, sb);
            let fin = em.not(sab);
            (nan, inf, neg, em.and(z, fin))
        };
        let mut sig = em.b.ins().imul(da.sig, db.sig);
        let e = em.b.ins().iadd(da.exp, db.exp);
        let mut grid = em.b.ins().iadd_imm_s(e, -fr);
        if let Some(s) = &p.scaled_products {
            let kb = em.b.ins().udiv_imm_u(k, block as i64);
            let idx = em.b.ins().iadd_imm_s(kb, scale_base as i64);
            let rx = em.load_at(ptrs.sa, idx);
            let ry = em.load_at(ptrs.sb, idx);
            let x = em.decode_float(s, rx, false);
            let y = em.decode_float(s, ry, false);
            let sc = scale_product(em, &x, &y);
            let n1 = em.or(nan, sc.nan);
            let i1 = em.and(inf, sc.zero);
            let i2 = em.and(sc.inf, zero);
            let i12 = em.or(i1, i2);
            nan = em.or(n1, i12);
            let ii = em.or(inf, sc.inf);
            let nn = em.not(nan);
            inf = em.and(ii, nn);
            neg = em.b.ins().bxor(neg, sc.neg);
            sig = em.b.ins().imul(sig, sc.sig);
            grid = em.b.ins().iadd(grid, sc.exp);
            grid = em.b.ins().iadd_imm_s(grid, -2 * s.mantissa_bits as i64);
        }
        if let Some(x) = fused.product_overflow {
            let o = overflows(em, sig, grid, x);
            let special = em.or(nan, inf);
            let fin = em.not(special);
            let o = em.and(o, fin);
            inf = em.or(inf, o);
        }
        sp.add(em, nan, inf, neg);
        let next = em.b.ins().iadd_imm_s(k, 1);
        em.b.ins().jump(
            head,
            &[
                BlockArg::Value(next),
                BlockArg::Value(sp.nan),
                BlockArg::Value(sp.pos_inf),
                BlockArg::Value(sp.neg_inf),
            ],
        );
    }
    em.b.switch_to_block(exit);
    let ep = em.b.block_params(exit).to_vec();
    sp = SpecialFlags {
        nan: ep[0],
        pos_inf: ep[1],
        neg_inf: ep[2],
    };
    if let (Some(g), Some(s)) = (fused.grouping, &p.scaled_groups) {
        let gs = g.size as usize;
        for gi in 0..l / gs {
            let idx = scale_base + gi * gs / block;
            let rx = em.load_guarded(ptrs.sa, idx);
            let ry = em.load_guarded(ptrs.sb, idx);
            let x = em.decode_float(s, rx, false);
            let y = em.decode_float(s, ry, false);
            let sc = scale_product(em, &x, &y);
            sp.add(em, sc.nan, sc.inf, sc.neg);
        }
    }
    let both = em.and(sp.pos_inf, sp.neg_inf);
    let is_nan = em.or(sp.nan, both);
    let ip = em.i64c(inf_bits(inst, false));
    let inn = em.i64c(inf_bits(inst, true));
    let infv = em.sel(sp.neg_inf, inn, ip);
    // some input is special, so the result is NaN or Inf; with neither flag it is Inf
    // only by an infinity of one sign, which `infv` already encodes
    let nanc = em.i64c(nan_bits(inst));
    em.sel(is_nan, nanc, infv)
}

/// The product of two decoded scale factors, with the interpreter's special rules:
/// (nan, inf, neg, significand product, exponent sum, finite zero).
pub(super) fn scale_product(em: &mut Emitter, x: &Decoded, y: &Decoded) -> ScaleProduct {
    let xy_nan = em.or(x.nan, y.nan);
    let a = em.and(x.inf, y.zero);
    let b = em.and(y.inf, x.zero);
    let ab = em.or(a, b);
    let nan = em.or(xy_nan, ab);
    let anyinf = em.or(x.inf, y.inf);
    let nn = em.not(nan);
    let inf = em.and(anyinf, nn);
    let neg = em.b.ins().bxor(x.neg, y.neg);
    let sig = em.b.ins().imul(x.sig, y.sig);
    let exp = em.b.ins().iadd(x.exp, y.exp);
    let z = em.or(x.zero, y.zero);
    let special = em.or(nan, inf);
    let fin = em.not(special);
    let zero = em.and(z, fin);
    ScaleProduct {
        nan,
        inf,
        neg,
        sig,
        exp,
        zero,
    }
}

pub(super) struct ScaleProduct {
    nan: Value,
    inf: Value,
    neg: Value,
    sig: Value,
    exp: Value,
    zero: Value,
}
