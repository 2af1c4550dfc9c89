//! Alignment nodes: the terms of each node (products, c, groups, earlier nodes) aligned to
//! the node's reference exponent with each term's rounding and summed exactly. The
//! common max-exponent alignment of products and c packs each term into one i64
//! ([`packed_node`]); other nodes align term by term on a run-time grid (or a static one
//! for exact sums), with `c` in a sticky window for sums too wide for i128 and a
//! multi-limb accumulator for exact sums wider still.

use super::plan::{NodeGrid, Plan, SimdShape};
use super::simd::{parity_nodes, simd_node};
use super::sum::{limb_sum, tree, window_sum};
use super::{EXP_OFFSET, EXP_SHIFT, Ptrs, SIGN_BIT, SPECIAL_BIT, Term, or_flag};
use crate::exact::Rounding;
use crate::ir::*;
use crate::jit::emit::Emitter;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, StackSlot, Value, types};

/// Every alignment node of a chained step, in order; the last one is the sum that is
/// normalised. `special` collects the NaN/Inf flags of the terms.
#[allow(clippy::too_many_arguments)]
pub(super) fn nodes(
    em: &mut Emitter,
    fused: &Fused,
    p: &Plan,
    c_term: Term,
    product_terms: &[Term],
    groups: &[Term],
    ptrs: &Ptrs,
    start: usize,
    slot: Option<StackSlot>,
    special: &mut Option<Value>,
) -> Vec<Term> {
    let mut node_terms: Vec<Term> = vec![];
    match p.simd {
        Some(s) if s.shape == SimdShape::All => {
            let t = simd_node(em, fused, p, s.keep, &c_term, ptrs, start, special);
            node_terms.push(t);
        }
        Some(s) => node_terms.extend(parity_nodes(em, fused, p, s.keep, ptrs, start, special)),
        None => {}
    }
    for (ni, node) in fused.nodes.iter().enumerate().skip(node_terms.len()) {
        let items = node_items(node, &c_term, product_terms, groups, &node_terms);
        if items.is_empty() {
            // every source is empty (the odd products of a one-product step): the sum is
            // 0 and takes no part in a later max search
            let zero = em.wc(0);
            let e0 = em.i64c(0);
            let absent = em.boolc(false);
            node_terms.push(Term::sum(em, zero, 0, e0, e0, Some(absent)));
            continue;
        }
        let grid = p.node_grid[ni];
        if let Some((t, flag)) = packed_node(
            em,
            node,
            &items,
            matches!(grid, NodeGrid::Rounded { .. }) && p.pack_ok,
        ) {
            or_flag(em, special, flag);
            node_terms.push(t);
            continue;
        }
        for (t, _) in &items {
            or_flag(em, special, t.special);
        }
        let last = ni + 1 == fused.nodes.len();
        if let (Some(lp), Some(slot), true) = (&p.limbs, slot, last) {
            let (sum, g) = limb_sum(em, &items, lp, slot);
            node_terms.push(Term::sum(em, sum, 0, g, g, None));
            continue;
        }
        let (r, any) = match node.reference {
            Reference::Fixed(r) => (em.i64c(r as i64), None),
            Reference::MaxExponent => max_exponent(em, &items),
        };
        let (sum, dd, natural_exp) = aligned_sum(em, node, &items, grid, p.wide && last, r);
        node_terms.push(Term::sum(em, sum, dd, r, natural_exp, any));
    }

    node_terms
}

/// The terms of alignment node `node`, each with the alignment term it came from.
fn node_items<'a>(
    node: &'a AlignNode,
    c_term: &Term,
    product_terms: &[Term],
    groups: &[Term],
    node_terms: &[Term],
) -> Vec<(Term, &'a AlignTerm)> {
    let mut items: Vec<(Term, &AlignTerm)> = vec![];
    for at in &node.terms {
        match at.source {
            TermSource::Products(part) => {
                for (k, t) in product_terms.iter().enumerate() {
                    let take = match part {
                        ProductsPart::All => true,
                        ProductsPart::Even => k % 2 == 0,
                        ProductsPart::Odd => k % 2 == 1,
                    };
                    if take {
                        items.push((*t, at));
                    }
                }
            }
            TermSource::C => items.push((*c_term, at)),
            TermSource::Groups => items.extend(groups.iter().map(|g| (*g, at))),
            TermSource::Node(i) => items.push((node_terms[i.index()], at)),
        }
    }
    items
}

/// The largest exponent of the present terms of `items`, and whether any is present
/// (`None` when one always is); 0 when none is.
fn max_exponent(em: &mut Emitter, items: &[(Term, &AlignTerm)]) -> (Value, Option<Value>) {
    let floor = em.i64c(i64::MIN / 4);
    let mut r: Option<Value> = None;
    let mut any: Option<Value> = None;
    let mut always = false;
    for (t, _) in items {
        let e = match t.present {
            None => t.exp,
            Some(pr) => em.sel(pr, t.exp, floor),
        };
        r = Some(match r {
            None => e,
            Some(r) => em.b.ins().smax(r, e),
        });
        match t.present {
            None => always = true,
            Some(pr) => {
                any = Some(match any {
                    None => pr,
                    Some(a) => em.or(a, pr),
                })
            }
        }
    }
    let r = r.unwrap_or(floor);
    match any {
        Some(any) if !always => {
            let zero = em.i64c(0);
            (em.sel(any, r, zero), Some(any))
        }
        _ => (r, None),
    }
}

/// The terms of a node aligned to the reference exponent `r` and summed: with every term
/// kept with F bits on the grid `r - Fmax`, or on the node's static grid when every term
/// is exact; a wide node keeps c apart in a window with a sticky bit. Returns the sum,
/// its fraction bits and its natural exponent ([`Term::sum`]).
fn aligned_sum(
    em: &mut Emitter,
    node: &AlignNode,
    items: &[(Term, &AlignTerm)],
    grid: NodeGrid,
    wide_node: bool,
    r: Value,
) -> (Value, i64, Value) {
    let max_ref = node.reference == Reference::MaxExponent;
    let mut wide_c: Option<(Value, Value)> = None;
    let mut terms_kept: Vec<Value> = Vec::with_capacity(items.len());
    for (t, at) in items {
        if wide_node && at.source == TermSource::C {
            wide_c = Some(window_term(em, t, at, r));
            continue;
        }
        let kept = match (grid, at.keep) {
            (NodeGrid::Rounded { fmax }, Some((fb, mode))) => {
                let v = rounded_term(em, t, fb as i64, mode, max_ref, r);
                let up = fmax - fb as i64;
                if up > 0 {
                    em.b.ins().ishl_imm_s(v, up)
                } else {
                    v
                }
            }
            (NodeGrid::Exact(g0), _) => {
                let grid = t.grid(em);
                let sh = em.b.ins().iadd_imm_s(grid, -g0);
                let sh = em.clamp_shift(sh);
                let x = t.signed(em);
                em.b.ins().ishl(x, sh)
            }
            (NodeGrid::Rounded { .. }, None) => {
                unreachable!(
                    "plan: a node with an exact term is an exact node (mixed nodes are refused)"
                )
            }
        };
        terms_kept.push(drop_below(em, at.drop_below, r, t, kept));
    }
    let sum = if terms_kept.is_empty() {
        em.wc(0)
    } else {
        tree(em, terms_kept, |em, x, y| em.b.ins().iadd(x, y))
    };
    // the node's value is sum * 2^grid with grid = r - Fmax (or the static grid)
    let (natural_exp, dd) = match grid {
        NodeGrid::Exact(g0) => (em.i64c(0), -g0),
        NodeGrid::Rounded { fmax } => (r, fmax),
    };
    match wide_c {
        Some((cx, cg)) => {
            let gp = em.b.ins().iadd_imm_s(natural_exp, -dd);
            let (s, g) = window_sum(em, sum, gp, cx, cg);
            (s, 0, g)
        }
        None => (sum, dd, natural_exp),
    }
}

/// c in a wide node, apart on its own grid, rounded to the node's grid where it lies
/// below: its value and grid.
fn window_term(em: &mut Emitter, t: &Term, at: &AlignTerm, r: Value) -> (Value, Value) {
    let x = t.signed(em);
    let g = t.grid(em);
    let (x, g) = match at.keep {
        Some((fb, mode)) => {
            let target = em.b.ins().iadd_imm_s(r, -(fb as i64));
            let sh = em.b.ins().isub(target, g);
            let s = em.clamp_shift(sh);
            let rx = em.round_right(x, s, mode);
            let pos = em.icmp_imm(IntCC::SignedGreaterThan, sh, 0);
            (em.sel(pos, rx, x), em.sel(pos, target, g))
        }
        None => (x, g),
    };
    (drop_below(em, at.drop_below, r, t, x), g)
}

/// Term `t` kept with `fb` fraction bits below the reference exponent `r` by `mode`.
fn rounded_term(
    em: &mut Emitter,
    t: &Term,
    fb: i64,
    mode: Rounding,
    max_ref: bool,
    r: Value,
) -> Value {
    if !max_ref || t.node {
        let target = em.b.ins().iadd_imm_s(r, -fb);
        let grid = t.grid(em);
        let sh = em.b.ins().isub(target, grid);
        let x = t.signed(em);
        return em.round_shift(x, sh, mode);
    }
    // the term's exponent is at most r: a right shift by r - e + d - F after a static
    // left shift by F - d
    let pre = (fb - t.d).max(0);
    let post = (t.d - fb).max(0);
    let sh = em.b.ins().isub(r, t.natural_exp);
    let sh = if post > 0 {
        em.b.ins().iadd_imm_s(sh, post)
    } else {
        sh
    };
    let top = em.i64c(em.wbits() - 1);
    let s = em.b.ins().umin(sh, top);
    match (mode, t.sig) {
        (Rounding::TowardZero, Some(sig)) => {
            let mag = em.widen(sig);
            let mag = if pre > 0 {
                em.b.ins().ishl_imm_s(mag, pre)
            } else {
                mag
            };
            let q = em.b.ins().ushr(mag, s);
            let nq = em.neg(q);
            em.sel(t.neg, nq, q)
        }
        _ => {
            let x = t.signed(em);
            let x = if pre > 0 {
                em.b.ins().ishl_imm_s(x, pre)
            } else {
                x
            };
            em.round_right(x, s, mode)
        }
    }
}

/// `drop below n`: the aligned term `x` becomes 0 when the term is present and its
/// exponent lies below `reference - n`.
pub(super) fn drop_below(
    em: &mut Emitter,
    n: Option<u32>,
    reference: Value,
    t: &Term,
    x: Value,
) -> Value {
    let Some(n) = n else { return x };
    let lim = em.b.ins().iadd_imm_s(reference, -(n as i64));
    let below = em.icmp(IntCC::SignedLessThan, t.exp, lim);
    let dropped = match t.present {
        Some(pr) => em.and(pr, below),
        None => below,
    };
    let z = em.wc(0);
    em.sel(dropped, z, x)
}

/// The common alignment (max exponent, every term a product or c kept with F bits) with
/// each term packed into one i64 `biased_exp << 41 | neg << 40 | sig`: the max of the
/// packed values carries the max exponent, and one live value per term keeps the
/// registers from spilling. `None` when the node does not have that form.
pub(super) fn packed_node(
    em: &mut Emitter,
    node: &AlignNode,
    items: &[(Term, &AlignTerm)],
    rounded: bool,
) -> Option<(Term, Option<Value>)> {
    let ok = rounded
        && node.reference == Reference::MaxExponent
        && em.w == types::I64
        && !items.is_empty()
        && items.iter().all(|(t, at)| {
            !t.node
                && t.sig.is_some()
                && at.keep.is_some()
                && t.sig_bits >= 1
                && t.sig_bits <= SIGN_BIT as u32
        });
    if !ok {
        return None;
    }
    let fmax = items
        .iter()
        .map(|(_, at)| at.keep.unwrap().0 as i64)
        .max()?;
    let mut packed = Vec::with_capacity(items.len());
    let mut any_special = false;
    let mut any: Option<Value> = None;
    let mut always = false;
    for (t, _) in items {
        let e = match t.present {
            None => {
                always = true;
                t.exp
            }
            Some(pr) => {
                any = Some(match any {
                    None => pr,
                    Some(a) => em.or(a, pr),
                });
                let absent = em.i64c(-EXP_OFFSET);
                em.sel(pr, t.exp, absent)
            }
        };
        let eb = em.b.ins().iadd_imm_s(e, EXP_OFFSET);
        let hi = em.b.ins().ishl_imm_s(eb, EXP_SHIFT);
        let n = match t.sign40 {
            Some(s) => s,
            None => {
                let n = em.b.ins().uextend(types::I64, t.neg);
                em.b.ins().ishl_imm_s(n, SIGN_BIT)
            }
        };
        let x = em.b.ins().bor(hi, n);
        let x = em.b.ins().bor(x, t.sig.unwrap());
        // a special input sets the top exponent bit: the max then shows it
        let x = match t.special {
            Some(flag) => {
                let f64v = em.b.ins().uextend(types::I64, flag);
                let fb = em.b.ins().ishl_imm_s(f64v, SPECIAL_BIT);
                any_special = true;
                em.b.ins().bor(x, fb)
            }
            None => x,
        };
        packed.push(x);
    }
    let m = tree(em, packed.clone(), |em, x, y| em.b.ins().smax(x, y));
    let rb = em.b.ins().ushr_imm_s(m, EXP_SHIFT);
    let flag = if any_special {
        Some(em.icmp_imm(
            IntCC::UnsignedGreaterThanOrEqual,
            rb,
            1i64 << (SPECIAL_BIT - EXP_SHIFT),
        ))
    } else {
        None
    };
    let mut kept: Vec<Value> = Vec::with_capacity(items.len());
    let top = em.i64c(63);
    for ((t, at), &pk) in items.iter().zip(&packed) {
        let (fb, mode) = at.keep.unwrap();
        let fb = fb as i64;
        let pre = (fb - t.d).max(0);
        let post = (t.d - fb).max(0);
        let eb = em.b.ins().ushr_imm_s(pk, EXP_SHIFT);
        let rp = em.b.ins().iadd_imm_s(rb, post);
        let sh = em.b.ins().isub(rp, eb);
        let s = em.b.ins().umin(sh, top);
        let mag = em.b.ins().band_imm_s(pk, (1i64 << SIGN_BIT) - 1);
        let mag = if pre > 0 {
            em.b.ins().ishl_imm_s(mag, pre)
        } else {
            mag
        };
        let nb = em.b.ins().band_imm_s(pk, 1i64 << SIGN_BIT);
        let is_neg = em.icmp_imm(IntCC::NotEqual, nb, 0);
        let v = if mode == Rounding::TowardZero {
            let q = em.b.ins().ushr(mag, s);
            let nq = em.neg(q);
            em.sel(is_neg, nq, q)
        } else {
            let nm = em.neg(mag);
            let x = em.sel(is_neg, nm, mag);
            em.round_right(x, s, mode)
        };
        let up = fmax - fb;
        let v = if up > 0 {
            em.b.ins().ishl_imm_s(v, up)
        } else {
            v
        };
        let v = match at.drop_below {
            Some(n) => {
                // biased exponents compare like exponents; an absent term is 0 anyway
                let lim = em.b.ins().iadd_imm_s(rb, -(n as i64));
                let below = em.icmp(IntCC::SignedLessThan, eb, lim);
                let z = em.i64c(0);
                em.sel(below, z, v)
            }
            None => v,
        };
        kept.push(v);
    }
    let sum = (!kept.is_empty()).then(|| tree(em, kept, |em, x, y| em.b.ins().iadd(x, y)));
    let sum = sum?;
    let r = em.b.ins().iadd_imm_s(rb, -EXP_OFFSET);
    let (r, present) = if always {
        (r, None)
    } else {
        let any = any?;
        let zero = em.i64c(0);
        (em.sel(any, r, zero), Some(any))
    };
    Some((Term::sum(em, sum, fmax, r, r, present), flag))
}
