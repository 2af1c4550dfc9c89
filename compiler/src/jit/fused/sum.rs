//! Exact sums wider than one register: `c` added to a narrow sum in a 124-bit window
//! with a sticky bit ([`window_sum`]), the multi-limb accumulator of exact sums of
//! products and c ([`limb_sum`]), the sticky right shift they share ([`jam_shift`]), and
//! balanced reduction trees ([`tree`]).

use super::Term;
use super::plan::LimbPlan;
use crate::ir::AlignTerm;
use crate::jit::emit::Emitter;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, StackSlot, Value, types};

/// `p * 2^gp + c * 2^gc` as `s * 2^g` in an i128, exactly as far as any rounding to at
/// most 118 bits below the sum's leading bit can tell. `p` spans at most 118 bits and `c`
/// at most 54, so when their bits do not fit one 124-bit window below the larger operand's
/// top, the smaller operand lies wholly below the larger one's half (no cancellation can
/// expose its low bits): its bits below the window are ORed into its lowest kept bit
/// (a sticky bit), which keeps the sum strictly inside the same interval between
/// rounding points, and exact sums exact.
pub(super) fn window_sum(
    em: &mut Emitter,
    p: Value,
    gp: Value,
    c: Value,
    gc: Value,
) -> (Value, Value) {
    let floor = em.i64c(i64::MIN / 4);
    let top_of = |em: &mut Emitter, x: Value, g: Value| {
        let mag = em.abs_w(x);
        let bl = em.bit_length(mag);
        let t = em.b.ins().iadd(g, bl);
        let z = em.icmp_imm(IntCC::Equal, bl, 0);
        em.sel(z, floor, t)
    };
    let tp = top_of(em, p, gp);
    let tc = top_of(em, c, gc);
    let top = em.b.ins().smax(tp, tc);
    let low = em.b.ins().smin(gp, gc);
    let win = em.b.ins().iadd_imm_s(top, -124);
    let g = em.b.ins().smax(low, win);
    let sp = em.b.ins().isub(g, gp);
    let p2 = jam_shift(em, p, sp);
    let sc = em.b.ins().isub(g, gc);
    let c2 = jam_shift(em, c, sc);
    (em.b.ins().iadd(p2, c2), g)
}

/// The exact sum of the base terms `items` (products and c, each `sig * 2^grid`) in the
/// multi-limb accumulator `slot`, returned as `s * 2^g` (an i128 `s` and an i64 `g`) exact
/// as far as any rounding keeping at most 62 fraction bits can tell.
///
/// Each term is shifted by its grid's offset within a 32-bit digit and added, signed, to
/// the two or three digits it covers (limbs are i64, so no addition carries: every limb
/// takes at most 4097 values below 2^32 in magnitude). Then one pass propagates the carries
/// (leaving 32-bit digits and the sign), a second negates a negative sum into its
/// magnitude, and a third finds the leading nonzero digit. The result is that digit and
/// the two below it (at least 65 significant bits) with every lower bit ORed into the
/// window's lowest bit: below any rounding point a normalisation can choose, it keeps the
/// sum inside the same interval between rounding points, and exact sums exact.
///
/// Terms of special inputs have meaningless grids; their digit index is clamped into the
/// accumulator, so they never address outside it (the special path discards the sum).
pub(super) fn limb_sum(
    em: &mut Emitter,
    items: &[(Term, &AlignTerm)],
    lp: &LimbPlan,
    slot: StackSlot,
) -> (Value, Value) {
    let n = lp.digits;
    let flags = MemFlagsData::trusted();
    let base = em.b.ins().stack_addr(types::I64, slot, 0);
    let zero = em.i64c(0);
    for j in 0..n + 2 {
        em.b.ins().store(flags, zero, base, (j * 8) as i32);
    }
    let add = |em: &mut Emitter, at: Value, off: i32, v: Value| {
        let old = em.b.ins().load(types::I64, flags, at, off);
        let new = em.b.ins().iadd(old, v);
        em.b.ins().store(flags, new, at, off);
    };
    let max_j = em.i64c(n as i64 - 3);
    for (t, _) in items {
        let sig = t
            .sig
            .expect("planned: the terms of a multi-limb sum are products and c");
        let grid = t.grid(em);
        let pos = em.b.ins().iadd_imm_s(grid, -lp.lsb);
        let j = em.b.ins().ushr_imm_s(pos, 5);
        let j = em.b.ins().umin(j, max_j);
        let o = em.b.ins().band_imm_s(pos, 31);
        let off = em.b.ins().ishl_imm_s(j, 3);
        let at = em.b.ins().iadd(base, off);
        if t.sig_bits <= 32 {
            // sig < 2^32: the shifted magnitude is below 2^63
            let v = em.b.ins().ishl(sig, o);
            let nv = em.b.ins().ineg(v);
            let v = em.sel(t.neg, nv, v);
            let lo = em.b.ins().band_imm_s(v, 0xffff_ffff);
            let hi = em.b.ins().sshr_imm_s(v, 32);
            add(em, at, 0, lo);
            add(em, at, 8, hi);
        } else {
            let w = em.b.ins().uextend(types::I128, sig);
            let v = em.b.ins().ishl(w, o);
            let nv = em.b.ins().ineg(v);
            let v = em.sel(t.neg, nv, v);
            let (lo, hi) = em.b.ins().isplit(v);
            let d0 = em.b.ins().band_imm_s(lo, 0xffff_ffff);
            let d1 = em.b.ins().ushr_imm_s(lo, 32);
            add(em, at, 0, d0);
            add(em, at, 8, d1);
            add(em, at, 16, hi);
        }
    }
    // carries: 32-bit digits and the sign
    let mut carry = zero;
    let mut digits = Vec::with_capacity(n);
    for j in 0..n {
        let l = em.b.ins().load(types::I64, flags, base, (j * 8) as i32);
        let t = em.b.ins().iadd(l, carry);
        digits.push(em.b.ins().band_imm_s(t, 0xffff_ffff));
        carry = em.b.ins().sshr_imm_s(t, 32);
    }
    let neg = em.icmp_imm(IntCC::SignedLessThan, carry, 0);
    // the magnitude: complement and add one where negative; stored two digits up, above
    // two zero digits, for the window's loads
    let ones = em.i64c(0xffff_ffff);
    let flip = em.sel(neg, ones, zero);
    let mut c = em.b.ins().uextend(types::I64, neg);
    let mut mag = Vec::with_capacity(n);
    for (j, &dj) in digits.iter().enumerate() {
        let x = em.b.ins().bxor(dj, flip);
        let t = em.b.ins().iadd(x, c);
        let m = em.b.ins().band_imm_s(t, 0xffff_ffff);
        c = em.b.ins().ushr_imm_s(t, 32);
        em.b.ins().store(flags, m, base, ((j + 2) * 8) as i32);
        mag.push(m);
    }
    em.b.ins().store(flags, zero, base, 0);
    em.b.ins().store(flags, zero, base, 8);
    // the leading digit, and the OR of every digit more than two below it
    let mut hi = zero;
    let mut sticky = zero;
    let mut below = vec![zero];
    for (j, &m) in mag.iter().enumerate() {
        let prev = *below
            .last()
            .expect("`below` starts with the zero of no limb");
        below.push(em.b.ins().bor(prev, m));
        let nz = em.icmp_imm(IntCC::NotEqual, m, 0);
        let jc = em.i64c(j as i64);
        hi = em.sel(nz, jc, hi);
        let s = below[j.saturating_sub(2)];
        sticky = em.sel(nz, s, sticky);
    }
    let off = em.b.ins().ishl_imm_s(hi, 3);
    let at = em.b.ins().iadd(base, off);
    let w0 = em.b.ins().load(types::I64, flags, at, 0);
    let w1 = em.b.ins().load(types::I64, flags, at, 8);
    let w2 = em.b.ins().load(types::I64, flags, at, 16);
    let w1 = em.b.ins().ishl_imm_s(w1, 32);
    let low = em.b.ins().bor(w1, w0);
    let st = em.icmp_imm(IntCC::NotEqual, sticky, 0);
    let st = em.b.ins().uextend(types::I64, st);
    let low = em.b.ins().bor(low, st);
    let win = em.b.ins().iconcat(low, w2);
    let nwin = em.b.ins().ineg(win);
    let s = em.sel(neg, nwin, win);
    // the window's lowest digit is digit hi - 2
    let g = em.b.ins().ishl_imm_s(hi, 5);
    let g = em.b.ins().iadd_imm_s(g, lp.lsb - 64);
    (s, g)
}

/// `x * 2^-s`: an exact left shift for `s <= 0`, else a right shift of the magnitude with
/// the dropped bits ORed into the lowest kept bit.
pub(super) fn jam_shift(em: &mut Emitter, x: Value, s: Value) -> Value {
    let ns = em.b.ins().ineg(s);
    let l = em.clamp_shift(ns);
    let left = em.b.ins().ishl(x, l);
    let r = em.clamp_shift(s);
    let is_neg = em.icmp_imm(IntCC::SignedLessThan, x, 0);
    let mag = em.abs_w(x);
    let q = em.b.ins().ushr(mag, r);
    let back = em.b.ins().ishl(q, r);
    let lost = em.icmp(IntCC::NotEqual, back, mag);
    let lost = em.b.ins().uextend(em.w, lost);
    let q = em.b.ins().bor(q, lost);
    let nq = em.neg(q);
    let right = em.sel(is_neg, nq, q);
    let pos = em.icmp_imm(IntCC::SignedGreaterThan, s, 0);
    em.sel(pos, right, left)
}

/// Combine values pairwise (a balanced tree: short dependency chains). `items` is
/// non-empty.
pub(super) fn tree(
    em: &mut Emitter,
    mut items: Vec<Value>,
    op: impl Fn(&mut Emitter, Value, Value) -> Value,
) -> Value {
    while items.len() > 1 {
        items = items
            .chunks(2)
            .map(|c| {
                if c.len() == 2 {
                    op(em, c[0], c[1])
                } else {
                    c[0]
                }
            })
            .collect();
    }
    items[0]
}
