//! The corner-case shapes read from an instruction's parameters, each written once, and
//! the two selections of their variants: [`read_from_ir`] (a few per parameter value of
//! one instruction, anchored near 1: what `mmac probe` shows) and [`structured`] (every
//! variant at every cut of a [`Focus`]: what witness searches try). The shapes:
//! - alignment cuts: c = 2^E and a product of +-2^(E-j) for j around each kept width F
//!   (and each precision), alone, against a product that cancels c (so that a kept bit
//!   survives any output rounding), with products only, and with a small c under two
//!   products that cancel (for products too coarse to reach the cut, e.g. FP4);
//! - truncation direction: two small terms of opposite sign next to the cut;
//! - output ties: c plus exactly half an ulp of d (or of an intermediate precision P,
//!   F2) plus a term at an alignment cut, which decides the tie; this is what makes F
//!   visible through round-to-nearest outputs such as f16 and bf16;
//! - carries: c = 2^E plus a product 2^E and a bit at each normalisation precision P (the
//!   sum's leading bit is one binade above the alignment's reference, so the bit is kept
//!   by the alignment and cut by the normalisation); every lane at its largest
//!   significand, for the widest carry a step allows;
//! - exponents of zero: c = +-0 (or a tiny c and zero products) with every nonzero term
//!   below e_zero, one of them at the cut `e_zero - F`, a tie to break, opposite signs;
//! - chain boundaries: a product cancelling c in one chained step and a small term in the
//!   next; halves of an ulp in consecutive steps;
//! - group boundaries: two products in one group of the larger G and in two groups of the
//!   smaller, next to the cut, with c cancelled from another block;
//! - fixed references (Kulisch-style accumulators): c or a product at the grid, just
//!   below it, and at the top of the accumulator;
//! - the output's subnormal edge and its largest binade.

use super::{Focus, anchored, p2, rel, sign, sp2, spread_lanes};
use crate::inputs::{Input, Sketch, float_at};
use mmac_compiler::ir::{Instruction, Pipeline};

/// How far from 0 [`read_from_ir`] looks for an anchor exponent (it tries 0 first).
const PROBE_RANGE: i64 = 64;

/// How far from 0 [`structured`] looks for an anchor exponent (it tries the last one
/// that worked first).
const SEARCH_RANGE: i64 = 160;

/// Which variants of the shapes a selection takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Breadth {
    /// A few per parameter value, anchored as near 1 as the formats allow.
    Probes,
    /// Every variant.
    Search,
}

/// The signs and parity of an output tie: c (negative, odd: c = 2^E + an ulp of d), the
/// half ulp, and the small term at the cut that decides the tie.
#[derive(Clone, Copy, Debug)]
struct Tie {
    c_neg: bool,
    odd: bool,
    half_neg: bool,
    small_neg: bool,
}

/// A term below an exponent of zero: c = +-0, a small term 2^g at the cut, a tie to
/// break (in lane `tie`) or not, and 2^x spread over the `rest` lanes.
struct BelowZero<'r> {
    z: i64,
    f: i64,
    x: i64,
    g: i64,
    small_neg: bool,
    with_tie: bool,
    c_neg: bool,
    small: usize,
    tie: usize,
    rest: &'r [usize],
}

/// The corner cases being built for one instruction's operands.
struct Catalogue<'a> {
    inst: &'a Instruction,
    focus: &'a Focus,
    breadth: Breadth,
    out: Vec<(String, Input)>,
    /// The anchor exponent the last realised shape used (tried first next time, in a
    /// search).
    last_anchor: i64,
    /// Lanes in the order shapes fill them: distinct scale blocks, then distinct groups,
    /// then the rest (within the first chained step of the finest chain).
    slots: Vec<usize>,
    /// The finest chain length.
    step: usize,
    /// d's precision and smallest normal exponent.
    dp: i64,
    dmin: i64,
}

/// A shape's name with what it was built for, in parentheses.
fn why(name: String, why: &str) -> String {
    if why.is_empty() {
        name
    } else {
        format!("{name} ({why})")
    }
}

impl<'a> Catalogue<'a> {
    fn new(inst: &'a Instruction, focus: &'a Focus, breadth: Breadth) -> Catalogue<'a> {
        let k = inst.k();
        let step = focus.chains.iter().copied().min().unwrap_or(k).max(1);
        let group = focus.groups.iter().copied().min().unwrap_or(0);
        let d = inst.arithmetic.d.as_float();
        Catalogue {
            inst,
            focus,
            breadth,
            out: vec![],
            last_anchor: 0,
            slots: spread_lanes(inst, step, group),
            step,
            dp: d.map_or(23, |d| d.mantissa_bits as i64),
            dmin: d.map_or(-126, |d| d.min_exponent() as i64),
        }
    }

    /// Lane of slot `s` in chained step `t` of the finest chain.
    fn slot(&self, t: usize, s: usize) -> usize {
        t * self.step + self.slots.get(s).copied().unwrap_or(usize::MAX / 2)
    }

    fn steps(&self) -> usize {
        self.inst.k() / self.step
    }

    /// Realise a shape at the first anchor exponent E for which it is representable,
    /// named for that E.
    fn anchored(
        &mut self,
        name: impl FnOnce(i64) -> String,
        build: impl Fn(&mut Sketch, i64) -> Option<()>,
    ) {
        let (first, range) = match self.breadth {
            Breadth::Probes => (0, PROBE_RANGE),
            Breadth::Search => (self.last_anchor, SEARCH_RANGE),
        };
        if let Some((e, input)) = anchored(self.inst, first, range, build) {
            if self.breadth == Breadth::Search {
                self.last_anchor = e;
            }
            self.out.push((name(e), input));
        }
    }

    /// Realise a shape whose exponents are absolute.
    fn fixed(&mut self, name: String, build: impl Fn(&mut Sketch) -> Option<()>) {
        let mut s = Sketch::new(self.inst);
        if build(&mut s).is_some() {
            self.out.push((name, s.finish()));
        }
    }

    // ---------------------------------------------------------------------------------
    // The shapes.

    /// c = 2^E and one product +-2^(E-j) in step `t`.
    fn cut_term(&mut self, t: usize, neg: bool, j: i64) {
        let l0 = self.slot(t, 0);
        self.anchored(
            |e| format!("c = {} {} {} in step {t}", rel(e, 0), sign(neg), rel(e, j)),
            |s, e| {
                s.c(&p2(e))?.product(l0, &sp2(neg, e - j))?;
                Some(())
            },
        );
    }

    /// c = 2^E, a product -2^E that cancels it, and +-2^(E-j), in step `t`.
    fn cut_after_cancel(&mut self, t: usize, neg: bool, j: i64) {
        let (l0, l1) = (self.slot(t, 0), self.slot(t, 1));
        self.anchored(
            |e| {
                let (x, y) = (rel(e, 0), rel(e, j));
                format!("c = {x} - {x} {} {y} in step {t}", sign(neg))
            },
            |s, e| {
                s.c(&p2(e))?
                    .product(l0, &sp2(true, e))?
                    .product(l1, &sp2(neg, e - j))?;
                Some(())
            },
        );
    }

    /// c = +-2^(E-j) at a cut, under two products 2^E and -2^E that cancel, in step `t`
    /// (for products too coarse to reach the cut themselves, e.g. FP4).
    fn c_cut(&mut self, t: usize, neg: bool, j: i64, reason: &str) {
        let (l0, l1) = (self.slot(t, 0), self.slot(t, 1));
        self.anchored(
            |e| {
                let (x, y) = (rel(e, 0), rel(e, j));
                let c = if neg { format!("-{y}") } else { y };
                why(format!("c = {c}, {x} - {x} in step {t}"), reason)
            },
            |s, e| {
                s.c(&sp2(neg, e - j))?
                    .product(l0, &p2(e))?
                    .product(l1, &sp2(true, e))?;
                Some(())
            },
        );
    }

    /// c = 0 and products 2^E and +-2^(E-j), in step `t`.
    fn cut_products_only(&mut self, t: usize, neg: bool, j: i64) {
        let (l0, l1) = (self.slot(t, 0), self.slot(t, 1));
        self.anchored(
            |e| {
                format!(
                    "c = 0, {} {} {} in step {t}",
                    rel(e, 0),
                    sign(neg),
                    rel(e, j)
                )
            },
            |s, e| {
                s.c_zero(false)
                    .product(l0, &p2(e))?
                    .product(l1, &sp2(neg, e - j))?;
                Some(())
            },
        );
    }

    /// Two small terms 2^(E-j1) and 2^(E-j2) of opposite signs next to a cut, under c =
    /// 2^E (or under c = 2^E and a product -2^E that cancels it).
    fn opposite_pair(&mut self, j1: i64, j2: i64, neg: bool, cancelled: bool) {
        let (l0, l1, l2) = (self.slot(0, 0), self.slot(0, 1), self.slot(0, 2));
        self.anchored(
            |e| {
                let c = if cancelled {
                    format!("{0} - {0}", rel(e, 0))
                } else {
                    rel(e, 0)
                };
                format!(
                    "c = {c}, terms {}{} and {}{}",
                    sign(neg),
                    rel(e, j1),
                    sign(!neg),
                    rel(e, j2)
                )
            },
            |s, e| {
                s.c(&p2(e))?;
                if cancelled {
                    s.product(l0, &sp2(true, e))?
                        .product(l1, &sp2(neg, e - j1))?
                        .product(l2, &sp2(!neg, e - j2))?;
                } else {
                    s.product(l0, &sp2(neg, e - j1))?
                        .product(l1, &sp2(!neg, e - j2))?;
                }
                Some(())
            },
        );
    }

    /// An output tie: c, half an ulp at `p` bits, and a term +-2^(E-j) at a cut that
    /// decides it.
    fn tie(&mut self, p: i64, j: i64, tie: Tie, reason: &str) {
        let (l0, l1) = (self.slot(0, 0), self.slot(0, 1));
        let dp = self.dp;
        self.anchored(
            |e| {
                let c = format!(
                    "{}{}{}",
                    if tie.c_neg { "-" } else { "" },
                    rel(e, 0),
                    if tie.odd { " + ulp" } else { "" }
                );
                why(
                    format!(
                        "c = {c}, {} half ulp at {p} bits, {} {}",
                        sign(tie.half_neg),
                        sign(tie.small_neg),
                        rel(e, j)
                    ),
                    reason,
                )
            },
            |s, e| {
                let mut c = p2(e);
                if tie.odd {
                    c = c.add(&p2(e - dp));
                }
                if tie.c_neg {
                    c = c.neg();
                }
                s.c(&c)?
                    .product(l0, &sp2(tie.half_neg, e - p - 1))?
                    .product(l1, &sp2(tie.small_neg, e - j))?;
                Some(())
            },
        );
    }

    /// A carry into the next binade (c = 2^E plus a product 2^E), then a bit
    /// +-2^(E+1-q) at precision `p`.
    fn carry(&mut self, p: i64, q: i64, neg: bool) {
        let (l0, l1) = (self.slot(0, 0), self.slot(0, 1));
        self.anchored(
            |e| {
                format!(
                    "c = {0}, {0} {1} {2}: a carry, then {p} bits",
                    rel(e, 0),
                    sign(neg),
                    rel(e, q - 1)
                )
            },
            |s, e| {
                s.c(&p2(e))?
                    .product(l0, &p2(e))?
                    .product(l1, &sp2(neg, e + 1 - q))?;
                Some(())
            },
        );
    }

    /// Every lane of the first chained step at its largest significand, all products at
    /// one exponent E, so that their sum carries by as many bits as the step allows
    /// (about log2(lanes) + 2), then c = +-2^(E-j): the sum's last kept bit then lies
    /// more than F + 1 bits below its leading one, which is what tells a normalisation
    /// precision above F + 1 from its neighbours.
    fn wide_carry(&mut self, j: i64, neg: bool) {
        let ar = &self.inst.arithmetic;
        let (fa, fb) = (ar.a.clone(), ar.b.clone());
        let lanes: Vec<usize> = (0..self.step.min(self.inst.k())).collect();
        self.anchored(
            |e| {
                format!(
                    "every lane at its largest significand, c = {}{}",
                    sign(neg),
                    rel(e, j)
                )
            },
            move |s, e| {
                let ea = e.div_euclid(2);
                let a = float_at(&fa, false, ea, u64::MAX);
                let b = float_at(&fb, false, e - ea, u64::MAX);
                for &l in &lanes {
                    s.lane_raw(l, a, b)?;
                }
                s.c(&sp2(neg, e - j))?;
                Some(())
            },
        );
    }

    /// Every nonzero term below the exponent of zero `z`: one at the cut `z - F`, maybe
    /// a tie, the rest 2^x.
    fn below_zero(&mut self, b: BelowZero) {
        let BelowZero {
            z,
            f,
            x,
            g,
            small_neg,
            with_tie,
            c_neg,
            small,
            tie,
            rest,
        } = b;
        let dp = self.dp;
        let dmin = self.dmin;
        let name = format!(
            "c = {}0, 2^{x} {} 2^{g}{} (all below e_zero = {z}, cut {z} - {f})",
            sign(c_neg),
            sign(small_neg),
            if with_tie { " + a tie" } else { "" }
        );
        self.fixed(name, move |s| {
            s.c_zero(c_neg).product(small, &sp2(small_neg, g))?;
            if with_tie {
                s.product(tie, &p2(x.max(dmin) - dp - 1))?;
            }
            s.product_sum(rest, &p2(x))?;
            Some(())
        });
    }

    /// Zero products, and c a tiny 2^x with (or under a product of) +-2^g below the
    /// exponent of zero `z`.
    fn tiny_c(&mut self, z: i64, f: i64, x: i64, g: i64, small_neg: bool) {
        let small = self.slot(0, 0);
        self.fixed(
            format!(
                "c = 2^{x}, zero products but {} 2^{g} (e_zero {z}, F = {f})",
                sign(small_neg)
            ),
            |s| {
                s.c(&p2(x))?.product(small, &sp2(small_neg, g))?;
                Some(())
            },
        );
        self.fixed(
            format!(
                "c = 2^{x} {} 2^{g}, zero products (e_zero {z}, F = {f})",
                sign(small_neg)
            ),
            |s| {
                s.c(&p2(x).add(&sp2(small_neg, g)))?;
                Some(())
            },
        );
    }

    /// c = 2^E, a product -2^E at k = `before` (the last of a chained step), and
    /// +-2^(E-j) at k = `after` (the first of the next).
    fn chain_cancel(&mut self, before: usize, after: usize, j: i64, neg: bool, reason: &str) {
        self.anchored(
            |e| {
                why(
                    format!(
                        "c = {0}, - {0} at k = {before}, {1} {2} at k = {after}",
                        rel(e, 0),
                        sign(neg),
                        rel(e, j)
                    ),
                    reason,
                )
            },
            |s, e| {
                s.c(&p2(e))?
                    .product(before, &sp2(true, e))?
                    .product(after, &sp2(neg, e - j))?;
                Some(())
            },
        );
    }

    /// c = 2^E and +-2^(E-j) at both k = `before` and k = `after`.
    fn chain_pair(&mut self, before: usize, after: usize, j: i64, neg: bool) {
        self.anchored(
            |e| {
                format!(
                    "c = {}, {} {} at k = {before} and k = {after}",
                    rel(e, 0),
                    sign(neg),
                    rel(e, j)
                )
            },
            |s, e| {
                s.c(&p2(e))?
                    .product(before, &sp2(neg, e - j))?
                    .product(after, &sp2(neg, e - j))?;
                Some(())
            },
        );
    }

    /// c = 2^E (plus an ulp of d when `odd`), +-2^(E-dp-x) at k = `before` and
    /// +-2^(E-dp-y) at k = `after`: halves (x = 1) and quarters of an ulp in consecutive
    /// chained steps.
    #[allow(clippy::too_many_arguments)]
    fn chain_ulps(
        &mut self,
        before: usize,
        after: usize,
        (x, y): (i64, i64),
        odd: bool,
        neg: bool,
        reason: &str,
    ) {
        let dp = self.dp;
        self.anchored(
            |e| {
                why(
                    format!(
                        "c = {}{}, {} {} at k = {before}, {} {} at k = {after}",
                        rel(e, 0),
                        if odd { " + ulp" } else { "" },
                        sign(neg),
                        rel(e, dp + x),
                        sign(neg),
                        rel(e, dp + y)
                    ),
                    reason,
                )
            },
            |s, e| {
                let c = if odd { p2(e).add(&p2(e - dp)) } else { p2(e) };
                s.c(&c)?
                    .product(before, &sp2(neg, e - dp - x))?
                    .product(after, &sp2(neg, e - dp - y))?;
                Some(())
            },
        );
    }

    /// c = 2^E (cancelled by a product -2^E in the last lane when `cancel`), 2^(E-j1)
    /// at k = 0 and +-2^(E-j2) at k = `b`: two terms next to a cut in one group of more
    /// than `b` products, or in two of at most `b`.
    #[allow(clippy::too_many_arguments)]
    fn group_pair(
        &mut self,
        b: usize,
        (j1, j2): (i64, i64),
        neg: bool,
        cancel: bool,
        reason: &str,
    ) {
        let far = self.inst.k() - 1;
        self.anchored(
            |e| {
                why(
                    format!(
                        "c = {}{}, {} at k = 0 and {} {} at k = {b}",
                        rel(e, 0),
                        if cancel {
                            format!(" - {}", rel(e, 0))
                        } else {
                            String::new()
                        },
                        rel(e, j1),
                        sign(neg),
                        rel(e, j2)
                    ),
                    reason,
                )
            },
            |s, e| {
                s.c(&p2(e))?;
                if cancel {
                    s.product(far, &sp2(true, e))?;
                }
                s.product(0, &p2(e - j1))?.product(b, &sp2(neg, e - j2))?;
                Some(())
            },
        );
    }

    /// c = +-2^g on (or near) the grid of a fixed reference `r`.
    fn reference_c(&mut self, r: i64, f: i64, g: i64, neg: bool) {
        self.fixed(
            format!(
                "c = {}2^{g} (fixed reference {r}, {f} bits)",
                if neg { "-" } else { "" }
            ),
            |s| {
                s.c(&sp2(neg, g))?;
                Some(())
            },
        );
    }

    /// One product +-2^g on (or near) the grid of a fixed reference `r`.
    fn reference_product(&mut self, r: i64, f: i64, g: i64, neg: bool) {
        let l0 = self.slot(0, 0);
        self.fixed(
            format!(
                "product {}2^{g} (fixed reference {r}, {f} bits)",
                if neg { "-" } else { "" }
            ),
            |s| {
                s.product(l0, &sp2(neg, g))?;
                Some(())
            },
        );
    }

    /// c = 2^top and a product 2^top, at the top of a fixed reference's accumulator.
    fn reference_top(&mut self, r: i64, top: i64) {
        let l0 = self.slot(0, 0);
        self.fixed(
            format!("c = 2^{top} + 2^{top} (fixed reference {r})"),
            |s| {
                s.c(&p2(top))?.product(l0, &p2(top))?;
                Some(())
            },
        );
    }

    /// c = 0 and one product +-2^e near d's subnormal range.
    fn output_edge(&mut self, e: i64, neg: bool) {
        let l0 = self.slot(0, 0);
        self.fixed(
            format!("c = 0, one product {}2^{e}", if neg { "-" } else { "" }),
            |s| {
                s.c_zero(false).product(l0, &sp2(neg, e))?;
                Some(())
            },
        );
    }

    /// c = 2^top plus a product 2^top, minus 2^(top-j): at d's largest binade.
    fn output_top(&mut self, top: i64, j: i64) {
        let (l0, l1) = (self.slot(0, 0), self.slot(0, 1));
        self.fixed(format!("c = 2^{top} + 2^{top} - 2^({top}-{j})"), |s| {
            s.c(&p2(top))?
                .product(l0, &p2(top))?
                .product(l1, &sp2(true, top - j))?;
            Some(())
        });
    }
}

/// The probes read from a fused instruction's IR (the module docs): each shape at each
/// value of the parameter it exposes, a few variants, anchored as near 1 as the formats
/// allow; left out where no anchor represents it.
pub fn read_from_ir(inst: &Instruction) -> Vec<(String, Input)> {
    let Pipeline::Fused(fused) = &inst.arithmetic.pipeline else {
        return vec![];
    };
    if inst.arithmetic.d.as_float().is_none() {
        return vec![];
    }
    let focus = Focus::of(&[inst]);
    let mut cat = Catalogue::new(inst, &focus, Breadth::Probes);
    // the probes fill the lanes of the instruction's own chained step
    cat.step = (fused.chain as usize).max(1);
    cat.slots = spread_lanes(inst, cat.step, focus.groups.first().copied().unwrap_or(0));
    let dp = cat.dp;
    let keeps = focus.keeps.clone();
    // an output tie decided by a term at each alignment cut
    let plain = |small_neg| Tie {
        c_neg: false,
        odd: false,
        half_neg: false,
        small_neg,
    };
    for &f in &keeps {
        for j in ((f - 1)..=(f + 2)).filter(|&j| j > dp + 1) {
            for neg in [false, true] {
                cat.tie(dp, j, plain(neg), &format!("tie, cut at F = {f}"));
            }
        }
    }
    // c cut at each alignment cut
    for &f in &keeps {
        for j in [f, f + 1] {
            cat.c_cut(0, false, j, &format!("c cut at F = {f}"));
        }
    }
    // a fixed reference: c at its grid and just below
    for &r in &focus.references {
        for &f in &keeps {
            for g in [r - f, r - f - 1] {
                cat.reference_c(r, f, g, false);
            }
        }
    }
    // chained steps: a cancellation, then a small term, in consecutive steps; and half an
    // ulp in each of two consecutive steps (the boundary of the chain and of one twice
    // as fine)
    let chain = fused.chain as usize;
    let small = keeps.last().copied().unwrap_or(dp) + 2;
    for b in [chain, chain / 2] {
        if b == 0 || b >= inst.k() {
            continue;
        }
        let reason = format!("chain {chain}");
        cat.chain_cancel(b - 1, b, small, false, &reason);
        cat.chain_ulps(b - 1, b, (1, 1), false, false, &reason);
    }
    // groups: two terms next to the cut in one group, or in two (G and half of it), with
    // c cancelled from the last lane
    if let (Some(g), Some(&f)) = (fused.grouping, keeps.last()) {
        let g = g.size as usize;
        for b in [g / 2, g] {
            if b == 0 || b >= inst.k() - 1 {
                continue;
            }
            cat.group_pair(b, (f - 1, f + 1), true, true, &format!("groups of {g}"));
        }
    }
    // a carry into the next binade, then a bit at each normalisation precision; a tie at
    // d's precision broken by a bit an intermediate precision keeps or drops
    for step in &fused.normalize {
        let p = step.fraction_bits as i64;
        for q in [p, p + 1] {
            cat.carry(p, q, false);
        }
        if p > dp + 1 && step.max_exponent.is_none() {
            for q in [p, p + 1] {
                cat.tie(dp, q, plain(false), &format!("intermediate precision {p}"));
            }
        }
    }
    // every term below an exponent of zero, a bit at its cut
    let (l0, l1) = (cat.slot(0, 0), cat.slot(0, 1));
    let rest: Vec<usize> = cat.slots.iter().skip(2).copied().collect();
    let dmin = cat.dmin;
    for &z in &focus.zero_exponents {
        for &f in &keeps {
            // the smallest value d shows (nearest the cut, for formats with few bits)
            let x = (dmin - dp).min(z - 1);
            for delta in [0, -1] {
                for (small_neg, with_tie) in [(true, false), (false, true), (true, true)] {
                    cat.below_zero(BelowZero {
                        z,
                        f,
                        x,
                        g: z - f + delta,
                        small_neg,
                        with_tie,
                        c_neg: false,
                        small: l0,
                        tie: l1,
                        rest: &rest,
                    });
                }
            }
        }
    }
    cat.out
}

/// Every variant of every shape at every cut of `focus` (the parameters of one or more
/// instructions), for `inst`'s operands; duplicates removed.
pub fn structured(inst: &Instruction, focus: &Focus) -> Vec<(String, Input)> {
    if matches!(inst.arithmetic.pipeline, Pipeline::Integer(_)) {
        return vec![];
    }
    let mut cat = Catalogue::new(inst, focus, Breadth::Search);
    search_cuts(&mut cat);
    search_ties_and_carries(&mut cat);
    search_zero_exponents(&mut cat);
    search_boundaries(&mut cat);
    search_edges(&mut cat);
    let mut seen = std::collections::HashSet::new();
    cat.out.retain(|(_, i)| seen.insert(i.clone()));
    cat.out
}

/// Terms at and around every cut, in the first and last chained step, and pairs of
/// opposite signs next to each kept width (truncation direction).
fn search_cuts(cat: &mut Catalogue) {
    let last = cat.steps() - 1;
    for cut in cat.focus.cuts() {
        for j in ((cut - 2)..=(cut + 3)).filter(|&j| j >= 1) {
            for neg in [false, true] {
                for t in [0, last] {
                    cat.cut_term(t, neg, j);
                    cat.cut_after_cancel(t, neg, j);
                    cat.c_cut(t, neg, j, "");
                    cat.cut_products_only(t, neg, j);
                }
            }
        }
    }
    for f in cat.focus.keeps.clone() {
        let pairs = [
            (f - 2, f),
            (f - 1, f + 1),
            (f, f + 1),
            (f, f + 2),
            (f + 1, f + 3),
        ];
        for (j1, j2) in pairs.into_iter().filter(|&(j1, _)| j1 >= 1) {
            for neg in [false, true] {
                cat.opposite_pair(j1, j2, neg, false);
                cat.opposite_pair(j1, j2, neg, true);
            }
        }
    }
}

/// Output ties at every precision decided at every cut, in every sign and parity; a
/// carry then a bit around every precision; the widest carries.
fn search_ties_and_carries(cat: &mut Catalogue) {
    let cuts = cat.focus.cuts();
    for p in cat.focus.precisions.clone() {
        for &cut in &cuts {
            for j in ((cut - 1)..=(cut + 2)).filter(|&j| j > p + 1) {
                for odd in [false, true] {
                    for (c_neg, half_neg, small_neg) in [
                        (false, false, false),
                        (false, false, true),
                        (true, true, false),
                        (true, true, true),
                        (false, true, false),
                        (false, true, true),
                    ] {
                        let tie = Tie {
                            c_neg,
                            odd,
                            half_neg,
                            small_neg,
                        };
                        cat.tie(p, j, tie, "");
                    }
                }
            }
        }
    }
    for p in cat.focus.precisions.clone() {
        for q in [p - 1, p, p + 1, p + 2] {
            for neg in [false, true] {
                cat.carry(p, q, neg);
            }
        }
    }
    let ar = &cat.inst.arithmetic;
    if ar.a.as_float().is_some() && ar.b.as_float().is_some() {
        for f in cat.focus.keeps.clone() {
            for j in [f - 1, f, f + 1] {
                for neg in [false, true] {
                    cat.wide_carry(j, neg);
                }
            }
        }
    }
}

/// Every term below each exponent of zero, in every sign, with and without a tie; and a
/// tiny c under zero products.
fn search_zero_exponents(cat: &mut Catalogue) {
    let (dp, dmin) = (cat.dp, cat.dmin);
    // the small terms take the first slots (so that a block scale is chosen for them),
    // the big one is spread over the remaining lanes of the step if it must be
    let (small, tie) = (cat.slot(0, 0), cat.slot(0, 1));
    let rest: Vec<usize> = (0..cat.step).filter(|l| *l != small && *l != tie).collect();
    for z in cat.focus.zero_exponents.clone() {
        let xs: Vec<i64> = [z - 1, z - 2, z - 3, z - 5, z - 9, z - 17]
            .into_iter()
            .chain((0..3).map(|i| dmin - dp + i))
            .chain([dmin - 1, dmin])
            .filter(|x| *x < z)
            .collect();
        for f in cat.focus.keeps.clone() {
            for &x in &xs {
                for g in [z - f - 1, z - f, z - f + 1].into_iter().filter(|&g| g < x) {
                    for small_neg in [false, true] {
                        for with_tie in [false, true] {
                            for c_neg in [false, true] {
                                cat.below_zero(BelowZero {
                                    z,
                                    f,
                                    x,
                                    g,
                                    small_neg,
                                    with_tie,
                                    c_neg,
                                    small,
                                    tie,
                                    rest: &rest,
                                });
                            }
                        }
                        cat.tiny_c(z, f, x, g, small_neg);
                    }
                }
            }
        }
    }
}

/// Terms across the first two boundaries of every chain length, and across the groups of
/// the smallest G.
fn search_boundaries(cat: &mut Catalogue) {
    let k = cat.inst.k();
    let cuts = cat.focus.cuts();
    for l in cat.focus.chains.clone() {
        for b in (l..k).step_by(l).take(2) {
            let (before, after) = (b - 1, b);
            for &cut in &cuts {
                for j in (cut - 1)..=(cut + 2) {
                    for neg in [false, true] {
                        cat.chain_cancel(before, after, j, neg, "");
                        cat.chain_pair(before, after, j, neg);
                    }
                }
            }
            for odd in [false, true] {
                for xy in [(1, 1), (1, 2), (2, 2), (2, 1)] {
                    for neg in [false, true] {
                        cat.chain_ulps(before, after, xy, odd, neg, "");
                    }
                }
            }
        }
    }
    let Some(&g) = cat.focus.groups.first() else {
        return;
    };
    if g >= k - 1 {
        return;
    }
    for f in cat.focus.keeps.clone() {
        for pair in [
            (f - 1, f + 1),
            (f, f + 1),
            (f - 2, f),
            (f + 1, f + 2),
            (f, f),
        ] {
            for neg in [false, true] {
                for cancel in [false, true] {
                    cat.group_pair(g, pair, neg, cancel, "");
                }
            }
        }
    }
}

/// Fixed references' grids and tops; d's subnormal edge and largest binade.
fn search_edges(cat: &mut Catalogue) {
    for r in cat.focus.references.clone() {
        for f in cat.focus.keeps.clone() {
            for g in [r - f - 2, r - f - 1, r - f, r - f + 1] {
                for neg in [false, true] {
                    cat.reference_c(r, f, g, neg);
                    cat.reference_product(r, f, g, neg);
                }
            }
            for top in [r, r + 1, r + 2] {
                cat.reference_top(r, top);
            }
        }
    }
    let (dp, dmin) = (cat.dp, cat.dmin);
    for e in [dmin - dp - 2, dmin - dp - 1, dmin - 1, dmin] {
        for neg in [false, true] {
            cat.output_edge(e, neg);
        }
    }
    if let Some(ff) = cat.inst.arithmetic.d.as_float() {
        let top = ff.max_exponent() as i64;
        for j in [dp, dp + 1, dp + 2] {
            cat.output_top(top, j);
        }
    }
}
