//! Exact products and groups of products inside a fused kernel: each product's sign,
//! significand and exponent (decoding tables for narrow formats, scale factors folded in,
//! the product-overflow rule), and groups summed exactly on the lowest product grid
//! (straight from value tables for FP4/FP6), scaled by their block's scale factors.

use super::decode::{lean_decode, raw_sign_pos, sign_to_40, table_entry};
use super::plan::Plan;
use super::{Ptrs, SpecialFlags, Term, or_flag, zero_rule};
use crate::ir::*;
use crate::jit::emit::Emitter;
use crate::jit::tables;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};

/// The products of chained step `start` as alignment terms (none when the SIMD node or the
/// value tables form them). A product that overflows to Inf is noted in `sp`.
#[allow(clippy::too_many_arguments)]
pub(super) fn products(
    em: &mut Emitter,
    inst: &Instruction,
    fused: &Fused,
    p: &Plan,
    ptrs: &Ptrs,
    start: usize,
    sp: &mut SpecialFlags,
) -> Vec<Term> {
    let cond = fused.conditioning;
    let l = fused.chain as usize;
    let f0 = em.boolc(false);
    let block = inst
        .arithmetic
        .scale
        .as_ref()
        .map(|s| s.block as usize)
        .unwrap_or(1);
    let scale_base = start / block;
    let fr = (p.a.mantissa_bits + p.b.mantissa_bits) as i64;
    let mut product_terms: Vec<Term> = Vec::with_capacity(l);
    let scalar_products = p.value_tables.is_none() && p.simd.is_none();
    for k in 0..if scalar_products { l } else { 0 } {
        let mut flag = None;
        let ra = em.load(ptrs.a, start + k);
        let rb = em.load(ptrs.b, start + k);
        let mut sign40: Option<Value> = None;
        let (mut neg, mut sig, mut exp) = match (
            tables::decode_table(&p.a, cond.flush_a),
            tables::decode_table(&p.b, cond.flush_b),
        ) {
            (Some(tab_a), Some(tab_b)) => {
                // one load per element from the format's decoding table
                let ta = table_entry(em, tab_a, &p.a, ra);
                let tb = table_entry(em, tab_b, &p.b, rb);
                let low = (1i64 << 32) - 1;
                let sa = em.b.ins().band_imm_s(ta, low);
                let sb = em.b.ins().band_imm_s(tb, low);
                let sig = em.b.ins().imul(sa, sb);
                let x = em.b.ins().bxor(ta, tb);
                sign40 = Some(sign_to_40(em, x, 32));
                let n = em.b.ins().ushr_imm_s(x, 32);
                let n = em.b.ins().band_imm_s(n, 1);
                let neg = em.b.ins().ireduce(types::I8, n);
                // The two exponent fields summed in place, the SPECIAL bits shifted out:
                // a special entry's exponent reads as 0, so the sum stays in the range of
                // finite ones, as the packed alignment's special bit needs (the special
                // path discards the value).
                let t = em.b.ins().iadd(ta, tb);
                let t = em.b.ins().ishl_imm_s(t, 2);
                let e = em.b.ins().ushr_imm_s(t, tables::EXP_AT + 2);
                let exp = em.b.ins().iadd_imm_s(e, -2 * tables::EXP_OFFSET);
                let o = em.b.ins().bor(ta, tb);
                let sp = em.icmp_imm(IntCC::UnsignedGreaterThanOrEqual, o, tables::SPECIAL);
                or_flag(em, &mut flag, Some(sp));
                (neg, sig, exp)
            }
            _ => {
                let (na, sa, ea) = lean_decode(em, &p.a, ra, cond.flush_a, &mut flag);
                let (nb, sb, eb) = lean_decode(em, &p.b, rb, cond.flush_b, &mut flag);
                if let (Some(pa), Some(pb)) = (
                    raw_sign_pos(&p.a, cond.flush_a),
                    raw_sign_pos(&p.b, cond.flush_b),
                ) && pa == pb
                {
                    let x = em.b.ins().bxor(ra, rb);
                    sign40 = Some(sign_to_40(em, x, pa));
                }
                let neg = em.b.ins().bxor(na, nb);
                let sig = em.b.ins().imul(sa, sb);
                let exp = em.b.ins().iadd(ea, eb);
                (neg, sig, exp)
            }
        };
        let mut dd = fr;
        let mut sig_bits = p.a.mantissa_bits + p.b.mantissa_bits + 2;
        if let Some(s) = &p.scaled_products {
            sig_bits += 2 * (s.mantissa_bits + 1);
            let idx = scale_base + k / block;
            let rx = em.load(ptrs.sa, idx);
            let ry = em.load(ptrs.sb, idx);
            let (nx, sx, ex) = lean_decode(em, s, rx, false, &mut flag);
            let (ny, sy, ey) = lean_decode(em, s, ry, false, &mut flag);
            let ns = em.b.ins().bxor(nx, ny);
            neg = em.b.ins().bxor(neg, ns);
            if s.signed {
                sign40 = None;
            }
            let ss = em.b.ins().imul(sx, sy);
            sig = em.b.ins().imul(sig, ss);
            let es = em.b.ins().iadd(ex, ey);
            exp = em.b.ins().iadd(exp, es);
            dd += 2 * s.mantissa_bits as i64;
        }
        if let Some(x) = fused.product_overflow {
            let grid = em.b.ins().iadd_imm_s(exp, -dd);
            let o = overflows(em, sig, grid, x);
            sp.add(em, f0, o, neg);
        }
        let zero = em.icmp_imm(IntCC::Equal, sig, 0);
        let (e, present) = zero_rule(em, fused.zero_exponent.products, zero, exp);
        product_terms.push(Term {
            neg,
            sig: Some(sig),
            x: None,
            d: dd,
            exp: e,
            natural_exp: exp,
            present,
            zero,
            node: false,
            sig_bits,
            special: flag,
            float: None,
            sign40,
        });
    }

    product_terms
}

/// The groups of chained step `start`, each summed exactly from `product_terms` (or from
/// the value tables) and scaled by its block's scale factors.
#[allow(clippy::too_many_arguments)]
pub(super) fn groups(
    em: &mut Emitter,
    inst: &Instruction,
    fused: &Fused,
    p: &Plan,
    ptrs: &Ptrs,
    start: usize,
    product_terms: &[Term],
    special: &mut Option<Value>,
) -> Vec<Term> {
    let l = fused.chain as usize;
    let f0 = em.boolc(false);
    let block = inst
        .arithmetic
        .scale
        .as_ref()
        .map(|s| s.block as usize)
        .unwrap_or(1);
    let scale_base = start / block;
    let mut groups: Vec<Term> = vec![];
    if let Some(g) = fused.grouping {
        let gs = g.size as usize;
        for gi in 0..l / gs {
            let mut sum = em.wc(0);
            let mut all_zero = em.boolc(true);
            if let Some((tab_a, tab_b)) = p.value_tables
                && let (Some(ba), Some(bb)) = (byte_table(tab_a), byte_table(tab_b))
                && gs.is_multiple_of(16)
            {
                let (s64, zero) =
                    byte_table_group(em, (&ba, &bb), (&p.a, &p.b), ptrs, start + gi * gs, gs);
                sum = em.widen(s64);
                all_zero = zero;
            } else if let Some((tab_a, tab_b)) = p.value_tables {
                let mut s64 = em.i64c(0);
                let mut nz = em.i64c(0);
                for k in gi * gs..(gi + 1) * gs {
                    let ra = em.load(ptrs.a, start + k);
                    let rb = em.load(ptrs.b, start + k);
                    let va = table_entry(em, tab_a, &p.a, ra);
                    let vb = table_entry(em, tab_b, &p.b, rb);
                    let pr = em.b.ins().imul(va, vb);
                    s64 = em.b.ins().iadd(s64, pr);
                    nz = em.b.ins().bor(nz, pr);
                }
                sum = em.widen(s64);
                all_zero = em.icmp_imm(IntCC::Equal, nz, 0);
            }
            for t in product_terms.iter().skip(gi * gs).take(gs) {
                // grid = natural exponent - d, shifted onto the lowest product grid
                let sh =
                    em.b.ins()
                        .iadd_imm_s(t.natural_exp, -t.d - p.product_min_grid);
                let x = t.signed(em);
                let v = em.b.ins().ishl(x, sh);
                sum = em.b.ins().iadd(sum, v);
                all_zero = em.and(all_zero, t.zero);
                or_flag(em, special, t.special);
            }
            let term = if let Some(s) = &p.scaled_groups {
                let idx = scale_base + gi * gs / block;
                let rx = em.load(ptrs.sa, idx);
                let ry = em.load(ptrs.sb, idx);
                let (nx, sx, ex) = lean_decode(em, s, rx, false, special);
                let (ny, sy, ey) = lean_decode(em, s, ry, false, special);
                let ns = em.b.ins().bxor(nx, ny);
                let ss = em.b.ins().imul(sx, sy);
                let s_zero = em.icmp_imm(IntCC::Equal, ss, 0);
                let ssig = em.signed(ns, ss);
                let value = em.b.ins().imul(sum, ssig);
                let s_exp = em.b.ins().iadd(ex, ey);
                let z = em.or(all_zero, s_zero);
                let (e, present) = zero_rule(em, fused.zero_exponent.groups, z, s_exp);
                Term {
                    neg: f0,
                    sig: None,
                    x: Some(value),
                    d: 2 * s.mantissa_bits as i64 - p.product_min_grid,
                    exp: e,
                    natural_exp: s_exp,
                    present,
                    zero: z,
                    node: false,
                    sig_bits: 0,
                    special: None,
                    sign40: None,
                    float: None,
                }
            } else {
                let e0 = em.i64c(0);
                let (e, present) = zero_rule(em, fused.zero_exponent.groups, all_zero, e0);
                Term {
                    neg: f0,
                    sig: None,
                    x: Some(sum),
                    d: -p.product_min_grid,
                    exp: e,
                    natural_exp: e0,
                    present,
                    zero: all_zero,
                    node: false,
                    sig_bits: 0,
                    special: None,
                    sign40: None,
                    float: None,
                }
            };
            groups.push(term);
        }
    }

    groups
}

/// A value table of at most 16 entries, each fitting an i8, as the bytes of a SIMD
/// lookup (`swizzle`) table.
pub(super) fn byte_table(t: &[u64]) -> Option<[u8; 16]> {
    if t.len() > 16 {
        return None;
    }
    let mut out = [0u8; 16];
    for (o, &v) in out.iter_mut().zip(t) {
        *o = i8::try_from(v as i64).ok()? as u8;
    }
    Some(out)
}

/// Sixteen codes of 4-bit formats, one per byte of `codes_a` and `codes_b` (i8x16),
/// looked up in their value tables (`tables`, from [`byte_table_constants`]), widened to
/// i16, multiplied, and added in pairs into i32 lanes (the pattern x86 lowers to
/// `pmaddwd`): the pair sums of bytes 0-7 and of bytes 8-15 (i32x4 each), and a byte mask
/// of the nonzero products.
pub(super) fn byte_products(
    em: &mut Emitter,
    (tva, tvb): (Value, Value),
    (codes_a, codes_b): (Value, Value),
) -> ([Value; 2], Value) {
    let va = em.b.ins().swizzle(tva, codes_a);
    let vb = em.b.ins().swizzle(tvb, codes_b);
    let (alo, ahi) = (em.b.ins().swiden_low(va), em.b.ins().swiden_high(va));
    let (blo, bhi) = (em.b.ins().swiden_low(vb), em.b.ins().swiden_high(vb));
    let dot = |em: &mut Emitter, x: Value, y: Value| {
        let (xl, yl) = (em.b.ins().swiden_low(x), em.b.ins().swiden_low(y));
        let (xh, yh) = (em.b.ins().swiden_high(x), em.b.ins().swiden_high(y));
        let low = em.b.ins().imul(xl, yl);
        let high = em.b.ins().imul(xh, yh);
        em.b.ins().iadd_pairwise(low, high)
    };
    let p0 = dot(em, alo, blo);
    let p1 = dot(em, ahi, bhi);
    let zero8 = {
        let z = em.b.ins().iconst(types::I8, 0);
        em.b.ins().splat(types::I8X16, z)
    };
    let na = em.b.ins().icmp(IntCC::NotEqual, va, zero8);
    let nb = em.b.ins().icmp(IntCC::NotEqual, vb, zero8);
    ([p0, p1], em.b.ins().band(na, nb))
}

/// Two value tables of at most 16 i8 entries ([`byte_table`]) as i8x16 constants.
pub(super) fn byte_table_constants(em: &mut Emitter, tables: [&[u8; 16]; 2]) -> (Value, Value) {
    let [a, b] = tables.map(|t| {
        let c =
            em.b.func
                .dfg
                .constants
                .insert(cranelift_codegen::ir::ConstantData::from(t.to_vec()));
        em.b.ins().vconst(types::I8X16, c)
    });
    (a, b)
}

/// Sixteen codes (each in an i32 lane of `quads`, four per i32x4) masked to `bits` and
/// packed into the bytes of an i8x16, in order.
pub(super) fn pack_bytes(em: &mut Emitter, quads: [Value; 4], bits: u32) -> Value {
    let mask = crate::format::low_mask(bits) as i64;
    let quads = quads.map(|x| {
        let m = em.splat32(mask);
        em.b.ins().band(x, m)
    });
    let lo = em.b.ins().unarrow(quads[0], quads[1]);
    let hi = em.b.ins().unarrow(quads[2], quads[3]);
    em.b.ins().unarrow(lo, hi)
}

/// A group of `gs` (a multiple of 16) products of two 4-bit formats whose values fit an
/// i8 ([`byte_table`]), sixteen products per SIMD step ([`byte_products`]): the elements'
/// codes packed into the bytes of an i8x16, their values looked up in one `swizzle`
/// each, and multiplied and added in pairs into i32 lanes. Returns the exact sum (i64) on
/// the lowest product grid and whether every product is zero (i8).
fn byte_table_group(
    em: &mut Emitter,
    (ta, tb): (&[u8; 16], &[u8; 16]),
    (fa, fb): (&crate::format::FloatFormat, &crate::format::FloatFormat),
    ptrs: &Ptrs,
    first: usize,
    gs: usize,
) -> (Value, Value) {
    // the 16 codes at ptr[k..k + 16], one per byte
    let codes = |em: &mut Emitter, ptr: Value, k: usize, bits: u32| {
        let quads: [Value; 4] = std::array::from_fn(|q| em.load_low32x4(ptr, k + 4 * q));
        pack_bytes(em, quads, bits)
    };
    let tables = byte_table_constants(em, [ta, tb]);
    let mut sums: Option<Value> = None;
    let mut nonzero: Option<Value> = None;
    for k in (first..first + gs).step_by(16) {
        let ca = codes(em, ptrs.a, k, fa.storage_bits);
        let cb = codes(em, ptrs.b, k, fb.storage_bits);
        let ([p0, p1], both) = byte_products(em, tables, (ca, cb));
        let s = em.b.ins().iadd(p0, p1);
        sums = Some(match sums {
            None => s,
            Some(t) => em.b.ins().iadd(t, s),
        });
        nonzero = Some(match nonzero {
            None => both,
            Some(t) => em.b.ins().bor(t, both),
        });
    }
    let s = sums.expect("gs >= 16");
    let swapped = em.pick32(s, s, [2, 3, 0, 1]);
    let s = em.b.ins().iadd(s, swapped);
    let swapped = em.pick32(s, s, [1, 0, 3, 2]);
    let s = em.b.ins().iadd(s, swapped);
    let s32 = em.b.ins().extractlane(s, 0);
    let s64 = em.b.ins().sextend(types::I64, s32);
    let any = em.b.ins().vany_true(nonzero.expect("gs >= 16"));
    (s64, em.not(any))
}

/// Does the finite product `sig * 2^grid` (sig > 0) reach `2^x`?
pub(super) fn overflows(em: &mut Emitter, sig: Value, grid: Value, x: i32) -> Value {
    let lz = em.b.ins().clz(sig);
    let top = em.b.ins().isub(grid, lz);
    let le = em.b.ins().iadd_imm_s(top, 63);
    let big = em.icmp_imm(IntCC::SignedGreaterThanOrEqual, le, x as i64);
    let nz = em.icmp_imm(IntCC::NotEqual, sig, 0);
    em.and(big, nz)
}
