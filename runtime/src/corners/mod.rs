//! The catalogue of corner cases: every structured input mmac builds to expose an
//! arithmetic, in one place. `mmac probe`, `mmac gen`, `mmac diff`'s witness search and
//! `mmac infer`'s probes all draw from it:
//! - [`battery`]: probes built from the operand formats alone (alignment precision at
//!   1 + 2^-j, output ties, overflow boundaries, NaN and Inf, subnormals, signed zeros,
//!   the exponent of zero), and [`read_from_ir`]: probes read from a fused instruction's
//!   parameters, a few per value (ties decided at each alignment cut, a carry then a bit
//!   at each precision, chain and group boundaries, fixed references, every term below an
//!   exponent of zero); `mmac probe` shows both and `mmac gen` keeps both;
//! - [`structured`]: the same shapes in every variant, at every cut of a [`Focus`] (the
//!   parameters of one or more instructions), which witness searches and `infer` try;
//! - [`signed_zeros`] and [`nan_payloads`]: the sign of a zero sum and the NaN a result
//!   carries, which `infer` asks a box about.
//!
//! Each shape (an output tie, a carry, a chain boundary, ...) is written once, in
//! [`catalogue`]; [`read_from_ir`] and [`structured`] are two selections of its variants.
//! A shape the formats cannot represent at any anchor exponent is left out.

mod battery;
mod catalogue;
mod specials;

pub use battery::battery;
pub use catalogue::{read_from_ir, structured};
pub use specials::{nan_payloads, signed_zeros};

use crate::inputs::{Input, Sketch};
use mmac_compiler::exact::Dyadic;
use mmac_compiler::ir::{Instruction, Pipeline, ProductRule, Reference, ZeroExponent};

/// The parameters a search concentrates on, from the IR of one or more instructions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Focus {
    /// Fraction bits kept by alignments (F; F2 + 1 for TR-FDPA's dot).
    pub keeps: Vec<i64>,
    /// Fraction bits of roundings: normalisation steps (P, F2, d's precision) and the
    /// formats of rounded sequential steps.
    pub precisions: Vec<i64>,
    /// Fixed exponents of zero terms (e_zero).
    pub zero_exponents: Vec<i64>,
    /// Chain lengths (L) and pairwise group sizes below k.
    pub chains: Vec<usize>,
    /// Sizes of exactly summed groups (G).
    pub groups: Vec<usize>,
    /// Distances below the reference at which a term is dropped.
    pub drops: Vec<i64>,
    /// Fixed reference exponents.
    pub references: Vec<i64>,
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v.dedup();
    v
}

impl Focus {
    /// The parameters of every instruction given.
    pub fn of(insts: &[&Instruction]) -> Focus {
        let mut f = Focus::default();
        for inst in insts {
            let k = inst.k();
            if let Some(d) = inst.arithmetic.d.as_float() {
                f.precisions.push(d.mantissa_bits as i64);
            }
            match &inst.arithmetic.pipeline {
                Pipeline::Fused(fu) => {
                    for n in &fu.nodes {
                        for t in &n.terms {
                            if let Some((keep, _)) = t.keep {
                                f.keeps.push(keep as i64);
                            }
                            if let Some(d) = t.drop_below {
                                f.drops.push(d as i64);
                            }
                        }
                        if let Reference::Fixed(r) = n.reference {
                            f.references.push(r as i64);
                        }
                    }
                    for s in &fu.normalize {
                        f.precisions.push(s.fraction_bits as i64);
                    }
                    for z in [
                        fu.zero_exponent.products,
                        fu.zero_exponent.c,
                        fu.zero_exponent.groups,
                    ] {
                        if let ZeroExponent::Fixed(z) = z {
                            f.zero_exponents.push(z as i64);
                        }
                    }
                    if (fu.chain as usize) < k {
                        f.chains.push(fu.chain as usize);
                    }
                    if let Some(g) = fu.grouping {
                        f.groups.push(g.size as usize);
                    }
                }
                Pipeline::Sequential(s) => {
                    let mut ops = vec![&s.accumulate];
                    if let ProductRule::Rounded(op) = &s.product {
                        ops.push(op);
                    }
                    if let Some((g, op)) = &s.pairwise {
                        ops.push(op);
                        if (*g as usize) < k {
                            f.chains.push(*g as usize);
                        }
                    }
                    for op in ops {
                        if let Some(x) = op.format.as_float() {
                            f.precisions.push(x.mantissa_bits as i64);
                        }
                    }
                }
                // the runs' parameters are their own instructions'; the IEEE steps
                // have only their format's precision
                Pipeline::Integer(_) | Pipeline::Composed(_) => {}
            }
        }
        Focus {
            keeps: sorted(f.keeps),
            precisions: sorted(f.precisions),
            zero_exponents: sorted(f.zero_exponents),
            chains: sorted(f.chains),
            groups: sorted(f.groups),
            drops: sorted(f.drops),
            references: sorted(f.references),
        }
    }

    /// Every bit position below a reference where something is cut: kept widths,
    /// precisions and drop distances.
    pub fn cuts(&self) -> Vec<i64> {
        sorted(
            self.keeps
                .iter()
                .chain(&self.precisions)
                .chain(&self.drops)
                .copied()
                .collect(),
        )
    }
}

/// Build an input at the first anchor exponent `E` (tried: `first`, then 0, 1, -1, 2,
/// ... up to `range` away from 0) for which `build` succeeds, i.e. every value it places
/// is representable.
pub fn anchored(
    inst: &Instruction,
    first: i64,
    range: i64,
    build: impl Fn(&mut Sketch, i64) -> Option<()>,
) -> Option<(i64, Input)> {
    let order =
        std::iter::once(first).chain((0..=range).flat_map(|d| [d, -d]).filter(|&e| e != first));
    for e in order {
        let mut s = Sketch::new(inst);
        if build(&mut s, e).is_some() {
            return Some((e, s.finish()));
        }
    }
    None
}

/// The lanes of the first `step` lanes of k in the order templates fill them: one per
/// scale block, then one per group of `group` products, then the rest; so that terms
/// placed in order land in different blocks (each with its own scale) and groups first.
pub fn spread_lanes(inst: &Instruction, step: usize, group: usize) -> Vec<usize> {
    let block = inst
        .arithmetic
        .scale
        .as_ref()
        .map(|s| s.block as usize)
        .unwrap_or(0);
    let mut slots = vec![];
    for stride in [block, group, 1] {
        if stride == 0 {
            continue;
        }
        for lane in (0..step.min(inst.k())).step_by(stride) {
            if !slots.contains(&lane) {
                slots.push(lane);
            }
        }
    }
    slots
}

fn p2(e: i64) -> Dyadic {
    Dyadic::pow2(e)
}

fn sp2(negative: bool, e: i64) -> Dyadic {
    Dyadic::from_parts(negative, 1, e)
}

/// `2^(E-j)` written relative to the anchor `E` an input was built at (`1` when E = 0).
fn rel(e: i64, j: i64) -> String {
    match (e, j) {
        (0, 0) => "1".into(),
        (0, j) => format!("2^{}", -j),
        (e, 0) => format!("2^{e}"),
        (e, j) => format!("2^({e}-{j})"),
    }
}

fn sign(negative: bool) -> &'static str {
    if negative { "-" } else { "+" }
}
