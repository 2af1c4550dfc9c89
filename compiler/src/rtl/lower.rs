//! Checked arithmetic lowered to a [`Circuit`]: each pipeline family as the interpreter
//! computes it (`interp.rs`), every width the validator's. Fused pipelines align their
//! terms to the reference exponent on the grid [`crate::valid::NodeInfo`] gives and sum
//! them in its accumulator width; sequential and composed ones round step by step through
//! [`number`]; integer ones sum exactly and wrap or clamp.

use super::circuit::{Circuit, Wire};
use super::number::{self, Num, Unpacked, Value};
use crate::exact::Rounding;
use crate::format::{FloatFormat, Format, FormatKind};
use crate::ieee;
use crate::ir::*;
use crate::valid::{ArithmeticInfo, CheckedComposed, CheckedFused, CheckedInteger, Kind};

/// The operands of one dot-product-add, as wires of their formats' storage widths.
#[derive(Clone, Debug)]
pub struct Operands {
    pub c: Wire,
    pub a: Vec<Wire>,
    pub b: Vec<Wire>,
    pub sa: Vec<Wire>,
    pub sb: Vec<Wire>,
}

fn float(f: &Format) -> &FloatFormat {
    match &f.kind {
        FormatKind::Float(x) => x,
        FormatKind::Int(_) => unreachable!("validated: a float format here"),
    }
}

/// `d` of an arithmetic on these operands. With `cut_reference`, a fused arithmetic
/// whose last step's root alignment takes the maximum exponent opens a cut point there,
/// for proofs that split on it (`mmac_runtime::prove`): the circuit gains input ports
/// `r_in` (exponent-wide) and `cut` and output port `r`, the reference it computes. Where
/// `cut` is set the datapath takes `r_in` in place of that reference; where it is clear,
/// the circuit computes what it computes without the cut. (Other arithmetics open none.)
pub fn arithmetic(
    c: &mut Circuit,
    ar: &Arithmetic,
    info: &ArithmeticInfo,
    ops: &Operands,
    cut_reference: bool,
) -> Wire {
    match info.kind() {
        Kind::Fused(f) => {
            let d = fused(c, ar, f, ops, cut_reference);
            propagate_nan(c, ar, f.pipeline.nan, ops, d)
        }
        Kind::Sequential(s) => {
            let d = sequential(c, ar, &s.pipeline, ops);
            propagate_nan(c, ar, s.pipeline.nan, ops, d)
        }
        Kind::Integer(i) => integer(c, ar, i, ops),
        Kind::Composed(x) => composed(c, ar, x, ops),
    }
}

/// Under `nan propagate_*`, a NaN result carries the first input NaN in the rule's order.
fn propagate_nan(
    c: &mut Circuit,
    ar: &Arithmetic,
    rule: NanPolicy,
    ops: &Operands,
    d: Wire,
) -> Wire {
    let NanPolicy::Propagate(order) = rule else {
        return d;
    };
    let mut inputs: Vec<(&Format, Wire)> = vec![];
    let products = ops
        .a
        .iter()
        .zip(&ops.b)
        .flat_map(|(&x, &y)| [(&ar.a, x), (&ar.b, y)]);
    match order {
        NanOrder::CFirst => inputs.extend(std::iter::once((&ar.c, ops.c)).chain(products)),
        NanOrder::ProductsFirst => inputs.extend(products.chain(std::iter::once((&ar.c, ops.c)))),
    }
    let mut carried = d;
    for (f, raw) in inputs.into_iter().rev() {
        if let Some(bits) = number::nan_carrying(c, &ar.d, f, raw) {
            let is = number::is_nan(c, f, raw);
            carried = c.mux(is, bits, carried);
        }
    }
    let d_nan = number::is_nan(c, &ar.d, d);
    c.mux(d_nan, carried, d)
}

// ------------------------------------------------------------------------------------
// Fused pipelines.

/// NaNs and infinities met in a step.
#[derive(Default)]
struct Specials {
    nan: Vec<Wire>,
    pos_inf: Vec<Wire>,
    neg_inf: Vec<Wire>,
}

impl Specials {
    fn add(&mut self, c: &mut Circuit, n: &Num) {
        self.nan.push(n.nan);
        let not_nan = c.not(n.nan);
        let inf = c.and(n.inf, not_nan);
        let pos = c.not(n.value.neg);
        self.pos_inf.push(c.and(inf, pos));
        self.neg_inf.push(c.and(inf, n.value.neg));
    }
}

/// A term of an alignment: its value, the exponent the max search sees, and whether it
/// takes part in that search.
#[derive(Clone, Copy)]
struct Term {
    value: Value,
    exp: Wire,
    present: Wire,
}

/// The exponent a zero term takes (`natural` what decoding gives), and whether it takes
/// part.
fn zero_exponent(c: &mut Circuit, rule: ZeroExponent, natural: Wire) -> (Wire, Wire) {
    match rule {
        ZeroExponent::Natural => (natural, c.bit_const(true)),
        ZeroExponent::Fixed(e) => (c.int(e as i64, c.exp_bits()), c.bit_const(true)),
        ZeroExponent::Never => (natural, c.bit_const(false)),
    }
}

fn term(c: &mut Circuit, value: Value, exp: Wire, zero: Wire, rule: ZeroExponent) -> Term {
    let (zexp, zpresent) = zero_exponent(c, rule, exp);
    let one = c.bit_const(true);
    Term {
        value,
        exp: c.mux(zero, zexp, exp),
        present: c.mux(zero, zpresent, one),
    }
}

fn fused(
    c: &mut Circuit,
    ar: &Arithmetic,
    f: &CheckedFused,
    ops: &Operands,
    cut_reference: bool,
) -> Wire {
    let (l, k) = (f.pipeline.chain as usize, ar.k as usize);
    let mut cw = ops.c;
    let mut c_format = &ar.c;
    for start in (0..k).step_by(l) {
        let cut = cut_reference && start + l >= k;
        cw = fused_step(c, ar, f, c_format, cw, ops, start..start + l, cut);
        c_format = &ar.d;
    }
    cw
}

/// A decoded element as a number.
fn num(c: &mut Circuit, f: &Format, raw: Wire, flush: bool) -> (Num, Unpacked) {
    let ff = float(f);
    let u = number::decode(c, ff, raw, flush);
    (Num::of(c, &u), u)
}

/// The scale factors' product for position `k` of the dot product, and its exponent.
fn scale(c: &mut Circuit, ar: &Arithmetic, ops: &Operands, k: usize) -> (Num, Wire) {
    let s = ar.scale.as_ref().expect("validated: scaled");
    let j = k / s.block as usize;
    let (x, ux) = num(c, &s.format, ops.sa[j], false);
    let (y, uy) = num(c, &s.format, ops.sb[j], false);
    (number::multiply(c, &x, &y), c.add(ux.exp, uy.exp))
}

/// One chained step of a fused pipeline (its products `range`), from `cw` in `c_format`;
/// `cut_reference` opens the cut point of [`arithmetic`] at its root alignment.
#[allow(clippy::too_many_arguments)]
fn fused_step(
    c: &mut Circuit,
    ar: &Arithmetic,
    f: &CheckedFused,
    c_format: &Format,
    cw: Wire,
    ops: &Operands,
    range: std::ops::Range<usize>,
    cut_reference: bool,
) -> Wire {
    let p = &f.pipeline;
    let mut specials = Specials::default();
    // c
    let (cn, cu) = num(c, c_format, cw, p.conditioning.flush_c);
    specials.add(c, &cn);
    let c_term = term(c, cn.value, cu.exp, cu.zero, p.zero_exponent.c);
    // products
    let mut products: Vec<(Num, Wire, Wire)> = vec![];
    for k in range.clone() {
        let (x, ux) = num(c, &ar.a, ops.a[k], p.conditioning.flush_a);
        let (y, uy) = num(c, &ar.b, ops.b[k], p.conditioning.flush_b);
        let mut prod = number::multiply(c, &x, &y);
        let mut exp = c.add(ux.exp, uy.exp);
        if p.scaled_products {
            let (s, se) = scale(c, ar, ops, k);
            prod = number::multiply(c, &prod, &s);
            exp = c.add(exp, se);
        }
        if let Some(limit) = p.product_overflow {
            let nonzero = c.any(prod.value.mag);
            let le = number::leading_exponent(c, &prod.value);
            let x = c.int(limit as i64, c.exp_bits());
            let below = c.slt(le, x);
            let above = c.not(below);
            let over = c.and(nonzero, above);
            prod.inf = c.or(prod.inf, over);
        }
        specials.add(c, &prod);
        // a zero magnitude, whatever the flags say: a NaN or infinite product decides d
        // through the specials alone, so its term may be anything, and the finite
        // datapath then depends on the encodings only, as a hardware datapath does (which
        // keeps a proof against one from reasoning about the specials everywhere)
        let zero = c.is_zero(prod.value.mag);
        products.push((prod, exp, zero));
    }
    let product_terms: Vec<Term> = products
        .iter()
        .map(|(prod, exp, zero)| term(c, prod.value, *exp, *zero, p.zero_exponent.products))
        .collect();
    let groups = groups(c, ar, f, ops, &products, range.start, &mut specials);
    // alignments
    let mut nodes: Vec<Term> = vec![];
    for ni in 0..p.nodes.len() {
        let cut = cut_reference && ni + 1 == p.nodes.len();
        let terms = (&c_term, &product_terms[..], &groups[..], &nodes[..]);
        let t = align(c, f, ni, terms, cut);
        nodes.push(t);
    }
    let root = nodes
        .last()
        .expect("validated: a fused pipeline has a node");
    let d = normalize(c, ar, f, &root.value);
    // specials
    let nan = c.or_all(&specials.nan);
    let pos = c.or_all(&specials.pos_inf);
    let neg = c.or_all(&specials.neg_inf);
    let clash = c.and(pos, neg);
    let nan = c.or(nan, clash);
    let inf = c.or(pos, neg);
    let inf_code = number::inf_code(c, &ar.d, neg);
    let nan_code = number::nan_code(c, &ar.d);
    let d = c.mux(inf, inf_code, d);
    c.mux(nan, nan_code, d)
}

/// Signed `value` as an integer in units of `2^grid`, `width` bits, rounded by `mode`
/// where bits fall below the grid.
fn on_grid(c: &mut Circuit, v: &Value, grid: Wire, mode: Rounding, width: u32) -> Wire {
    let shift = c.sub(grid, v.lsb);
    let m = number::shift_round(c, v.mag, shift, mode, v.neg, width);
    let n = c.neg(m);
    c.mux(v.neg, n, m)
}

/// A two's complement sum as a value on its grid.
fn signed_value(c: &mut Circuit, sum: Wire, lsb: Wire) -> Value {
    let neg = c.bit(sum, sum.width - 1);
    let n = c.neg(sum);
    Value {
        neg,
        mag: c.mux(neg, n, sum),
        lsb,
    }
}

/// The groups of a step's products, each summed exactly (and scaled).
fn groups(
    c: &mut Circuit,
    ar: &Arithmetic,
    f: &CheckedFused,
    ops: &Operands,
    products: &[(Num, Wire, Wire)],
    k0: usize,
    specials: &mut Specials,
) -> Vec<Term> {
    let p = &f.pipeline;
    let Some(g) = p.grouping else {
        return vec![];
    };
    let bounds = f.facts.products;
    let size = g.size as usize;
    let width = u32::try_from(bounds.top() - bounds.lsb).expect("validated widths")
        + (usize::BITS - size.leading_zeros())
        + 2;
    let grid = c.int(bounds.lsb, c.exp_bits());
    let mut out = vec![];
    for (gi, chunk) in products.chunks(size).enumerate() {
        let mut sum = c.konst(0u32, width);
        for (prod, _, _) in chunk {
            let t = on_grid(c, &prod.value, grid, Rounding::TowardZero, width);
            sum = c.add(sum, t);
        }
        let zeros: Vec<Wire> = chunk.iter().map(|x| x.2).collect();
        let all_zero = c.and_all(&zeros);
        let mut value = signed_value(c, sum, grid);
        let (exp, zero) = if g.scaled {
            let (s, se) = scale(c, ar, ops, k0 + gi * size);
            specials.add(c, &s);
            let w = value.mag.width + s.value.mag.width;
            let (m, sm) = (c.zext(value.mag, w), c.zext(s.value.mag, w));
            value.mag = c.mul(m, sm);
            value.lsb = c.add(value.lsb, s.value.lsb);
            let sz = c.is_zero(s.value.mag);
            (se, c.or(all_zero, sz))
        } else {
            (c.int(0, c.exp_bits()), all_zero)
        };
        out.push(term(c, value, exp, zero, p.zero_exponent.groups));
    }
    out
}

/// Alignment node `ni`: its terms (from c, the products, the groups and earlier nodes)
/// aligned to the reference, rounded to their grids or dropped, summed in the
/// validator's width. Returns the sum as a term of later nodes. `cut_reference` opens
/// the cut point of [`arithmetic`] at its reference, where that is the maximum exponent.
fn align(
    c: &mut Circuit,
    f: &CheckedFused,
    ni: usize,
    (c_term, products, groups, nodes): (&Term, &[Term], &[Term], &[Term]),
    cut_reference: bool,
) -> Term {
    let node = &f.pipeline.nodes[ni];
    let facts = &f.facts.nodes[ni];
    let mut items: Vec<(Term, &AlignTerm)> = vec![];
    for at in &node.terms {
        match at.source {
            TermSource::Products(part) => {
                for (k, t) in products.iter().enumerate() {
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
            TermSource::Node(i) => items.push((nodes[i.index()], at)),
        }
    }
    let (r, valid) = match node.reference {
        Reference::Fixed(r) => (c.int(r as i64, c.exp_bits()), c.bit_const(true)),
        Reference::MaxExponent => {
            let mut r = c.int(0, c.exp_bits());
            let mut valid = c.bit_const(false);
            for (t, _) in &items {
                let larger = c.slt(r, t.exp);
                let first = c.not(valid);
                let better = c.or(first, larger);
                let take = c.and(t.present, better);
                r = c.mux(take, t.exp, r);
                valid = c.or(valid, t.present);
            }
            if cut_reference {
                let r_in = c.input("r_in", c.exp_bits());
                let cut = c.input("cut", 1);
                c.output("r", r);
                r = c.mux(cut, r_in, r);
            }
            (r, valid)
        }
    };
    let grid = match facts.grid {
        crate::valid::Grid::Static(g) => c.int(g, c.exp_bits()),
        crate::valid::Grid::BelowReference(fb) => {
            let x = c.int(fb as i64, c.exp_bits());
            c.sub(r, x)
        }
    };
    let width = facts.width_bits + 1;
    let mut sum = c.konst(0u32, width);
    for (t, at) in &items {
        let units = match at.keep {
            Some((fb, mode)) => {
                let x = c.int(fb as i64, c.exp_bits());
                let kept_grid = c.sub(r, x);
                let u = on_grid(c, &t.value, kept_grid, mode, width);
                let up = c.sub(kept_grid, grid);
                c.shl(u, up)
            }
            None => on_grid(c, &t.value, grid, Rounding::TowardZero, width),
        };
        let mut keep = valid;
        if let Some(n) = at.drop_below {
            let x = c.int(n as i64, c.exp_bits());
            let floor = c.sub(r, x);
            let below = c.slt(t.exp, floor);
            let dropped = c.and(t.present, below);
            let stays = c.not(dropped);
            keep = c.and(keep, stays);
        }
        let z = c.konst(0u32, width);
        let units = c.mux(keep, units, z);
        sum = c.add(sum, units);
    }
    Term {
        value: signed_value(c, sum, grid),
        exp: r,
        present: valid,
    }
}

/// The root sum through every normalisation step into d's encoding.
fn normalize(c: &mut Circuit, ar: &Arithmetic, f: &CheckedFused, root: &Value) -> Wire {
    let p = &f.pipeline;
    let exact_zero = c.is_zero(root.mag);
    let mut v = *root;
    let mut last = None;
    // an overflow ends the normalisation: the first that fires gives d
    let mut overflows: Vec<(Wire, Wire)> = vec![];
    let d = &ar.d;
    for step in &p.normalize {
        let rounded = number::round_precision(
            c,
            &v,
            step.fraction_bits,
            step.min_exponent as i64,
            step.rounding,
        );
        v = rounded.value;
        last = Some(rounded);
        if let Some(emax) = step.max_exponent {
            let over = rounded.above(c, emax as i64);
            let code = match step.overflow {
                Overflow::Inf | Overflow::Wrap => number::inf_code(c, d, v.neg),
                Overflow::Saturate => {
                    let max = number::max_finite(c, float(d), v.neg);
                    number::encode_finite(c, d, &max)
                }
            };
            overflows.push((over, code));
        }
    }
    let neg = match p.zero_sign {
        ZeroSign::Positive => {
            let nonzero = c.any(v.mag);
            c.and(v.neg, nonzero)
        }
        ZeroSign::ExactPositive => {
            let nonzero = c.not(exact_zero);
            c.and(nonzero, root.neg)
        }
    };
    let mut out = match last {
        Some(r) => number::encode_rounded(c, d, &r, neg),
        None => number::encode_finite(c, d, &Value { neg, ..v }),
    };
    for (over, code) in overflows.into_iter().rev() {
        out = c.mux(over, code, out);
    }
    out
}

// ------------------------------------------------------------------------------------
// Sequential pipelines.

fn sequential(c: &mut Circuit, ar: &Arithmetic, s: &Sequential, ops: &Operands) -> Wire {
    let cond = s.conditioning;
    let (mut acc, _) = num(c, &ar.c, ops.c, cond.flush_c);
    let mut terms = vec![];
    for k in 0..ar.k as usize {
        let (x, _) = num(c, &ar.a, ops.a[k], cond.flush_a);
        let (y, _) = num(c, &ar.b, ops.b[k], cond.flush_b);
        let p = number::multiply(c, &x, &y);
        let p = match &s.product {
            ProductRule::Exact => p,
            ProductRule::Rounded(op) => {
                let r = number::round(c, &p.value, op);
                Num {
                    nan: p.nan,
                    inf: c.or(p.inf, r.inf),
                    ..r
                }
            }
        };
        terms.push(p);
    }
    if let Some((g, op)) = &s.pairwise {
        let mut grouped = vec![];
        for chunk in terms.chunks(*g as usize) {
            let mut level = chunk.to_vec();
            while level.len() > 1 {
                level = level
                    .chunks(2)
                    .map(|pair| match pair {
                        [x, y] => number::add(c, x, y, op),
                        [x] => *x,
                        _ => unreachable!("chunks of two"),
                    })
                    .collect();
            }
            grouped.push(match level.first() {
                Some(x) => *x,
                None => Num::zero(c),
            });
        }
        terms = grouped;
    }
    for t in &terms {
        acc = number::add(c, &acc, t, &s.accumulate);
    }
    number::encode(c, &ar.d, &acc)
}

// ------------------------------------------------------------------------------------
// Integer pipelines.

fn integer(c: &mut Circuit, ar: &Arithmetic, i: &CheckedInteger, ops: &Operands) -> Wire {
    let o = &i.operands;
    let k = ar.k as u64;
    let width = o.c.bits.max(o.a.bits + o.b.bits) + (64 - k.leading_zeros()) + 2;
    let extend = |c: &mut Circuit, w: Wire, signed: bool| {
        if signed {
            c.sext(w, width)
        } else {
            c.zext(w, width)
        }
    };
    let mut sum = extend(c, ops.c, o.c.signed);
    for (&x, &y) in ops.a.iter().zip(&ops.b) {
        let x = extend(c, x, o.a.signed);
        let y = extend(c, y, o.b.signed);
        let t = match i.pipeline.op {
            IntegerOp::Multiply => c.mul(x, y),
            IntegerOp::Xor => c.xor(x, y),
            IntegerOp::And => c.and(x, y),
        };
        sum = c.add(sum, t);
    }
    let (lo, hi) = crate::format::int_range(&o.d);
    if i.pipeline.overflow == Overflow::Saturate {
        let (lo, hi) = (c.int(lo, width), c.int(hi, width));
        let under = c.slt(sum, lo);
        let over = c.slt(hi, sum);
        sum = c.mux(under, lo, sum);
        sum = c.mux(over, hi, sum);
    }
    c.slice(sum, 0, o.d.bits)
}

// ------------------------------------------------------------------------------------
// Composed pipelines.

/// An element converted into `conv.format` (`ieee::convert`).
fn convert(c: &mut Circuit, raw: Wire, from: &Format, conv: &Conversion) -> Wire {
    let to = float(&conv.format);
    let (n, _) = num(c, from, raw, false);
    let rounded = number::round_precision(
        c,
        &n.value,
        to.mantissa_bits,
        to.min_exponent() as i64,
        conv.rounding,
    );
    let r = rounded.value;
    // beyond the largest finite value: above its binade, or in it with a larger
    // significand (an FN format's top code is NaN)
    let above = rounded.above(c, to.max_exponent() as i64);
    let top = rounded.top_exponent(c);
    let emax = c.int(to.max_exponent() as i64, c.exp_bits());
    let at = c.eq(top, emax);
    let max_sig = c.konst(to.max_significand(), r.mag.width);
    let sig_above = c.ult(max_sig, r.mag);
    let at_above = c.and(at, sig_above);
    let finite_over = c.or(above, at_above);
    let inf_in = n.inf;
    let over = if to.has_inf() {
        finite_over
    } else {
        c.or(finite_over, inf_in)
    };
    let encoded = number::encode_rounded(c, &conv.format, &rounded, r.neg);
    let neg = n.value.neg;
    let overflowed = match (conv.overflow, to.has_inf()) {
        (Overflow::Saturate, _) => {
            let max = number::max_finite(c, to, neg);
            number::encode_finite(c, &conv.format, &max)
        }
        (_, true) => number::inf_code(c, &conv.format, neg),
        (_, false) => number::nan_code(c, &conv.format),
    };
    let inf = number::inf_code(c, &conv.format, neg);
    let nan = number::nan_code(c, &conv.format);
    let mut out = c.mux(over, overflowed, encoded);
    if to.has_inf() {
        out = c.mux(inf_in, inf, out);
    }
    c.mux(n.nan, nan, out)
}

fn composed(c: &mut Circuit, ar: &Arithmetic, x: &CheckedComposed, ops: &Operands) -> Wire {
    let p = &x.pipeline;
    let conv = |c: &mut Circuit, raws: &[Wire], from: &Format, cv: &Option<Conversion>| {
        raws.iter()
            .map(|&r| match cv {
                Some(cv) => convert(c, r, from, cv),
                None => r,
            })
            .collect::<Vec<_>>()
    };
    let a = conv(c, &ops.a, &ar.a, &p.convert_a);
    let b = conv(c, &ops.b, &ar.b, &p.convert_b);
    let c_raw = conv(c, &[ops.c], &ar.c, &p.convert_c)[0];
    let c_format = p.convert_c.as_ref().map_or(&ar.c, |x| &x.format);
    let mut values: Vec<(Wire, &Format)> = vec![];
    let raw_of = |c: &mut Circuit, v: StepValue, values: &[(Wire, &Format)], f: &Format| match v {
        StepValue::C => c.zext(c_raw, f.storage_bits()),
        StepValue::Zero { negative } => c.konst(
            ieee::encode(f, &ieee::Num::signed_zero(negative)).unwrap_or(0),
            f.storage_bits(),
        ),
        StepValue::Step(i) => c.zext(values[i].0, f.storage_bits()),
    };
    let num_of = |c: &mut Circuit, v: StepValue, values: &[(Wire, &Format)]| match v {
        StepValue::C => num(c, c_format, c_raw, false).0,
        StepValue::Zero { negative } => Num::signed_zero(c, negative),
        StepValue::Step(i) => num(c, values[i].1, values[i].0, false).0,
    };
    for (i, step) in p.steps.iter().enumerate() {
        let value = match step {
            Step::Run {
                arithmetic: sub,
                positions,
                c: cv,
            } => {
                let info = x.runs[i]
                    .as_ref()
                    .expect("validated: every run has its info");
                let sub_ops = Operands {
                    c: raw_of(c, *cv, &values, &sub.c),
                    a: positions.iter().map(|&k| a[k as usize]).collect(),
                    b: positions.iter().map(|&k| b[k as usize]).collect(),
                    sa: vec![],
                    sb: vec![],
                };
                (arithmetic(c, sub, info, &sub_ops, false), &sub.d)
            }
            Step::Add { x: u, y: v, op } => {
                let (u, v) = (num_of(c, *u, &values), num_of(c, *v, &values));
                let r = number::add(c, &u, &v, op);
                (number::encode(c, &op.format, &r), &op.format)
            }
            Step::Fma {
                x: u,
                y: v,
                z: w,
                op,
            } => {
                let (u, v, w) = (
                    num_of(c, *u, &values),
                    num_of(c, *v, &values),
                    num_of(c, *w, &values),
                );
                let prod = number::multiply(c, &u, &v);
                let r = number::add(c, &prod, &w, op);
                (number::encode(c, &op.format, &r), &op.format)
            }
        };
        values.push(value);
    }
    raw_of(c, p.result, &values, &ar.d)
}
