//! Feature probes: a fixed battery of inputs per instruction that exposes its arithmetic
//! (alignment precision at 1 + 2^-j around F, output rounding ties, overflow boundaries,
//! NaN and Inf, subnormals, signed zero, the exponent of zero), built from the operand
//! formats, and then a part read from the instruction's IR ([`parameter_probes`]) so
//! that moving any of F, P, F2 or e_zero by one changes some probe's result: output ties
//! decided by a term at each alignment cut (which makes F visible through a
//! round-to-nearest f16 or bf16 output), a carry followed by a bit at each normalisation
//! precision (P), ties broken by a bit at an intermediate precision (F2), and sums whose
//! every term lies below an exponent of zero with a bit at its cut (e_zero).
//!
//! [`report`] prints each probe's result and, below it, its inputs as `mmac run`
//! arguments (a and b up to their last nonzero lane, then `--pad`), so that any row can
//! be re-run with `--trace`.

use crate::inputs::{Input, Sketch, encode as value, max_finite, min_positive, pow2, zero};
use crate::witness::{Focus, anchored, spread_lanes};
use mmac_compiler::Checked;
use mmac_compiler::engine::Operands;
use mmac_compiler::exact::Dyadic;
use mmac_compiler::format::{Format, FormatKind, low_mask};
use mmac_compiler::interp;
use mmac_compiler::ir::{Instruction, Pipeline};

/// One probe: a name and the raw inputs of one dot product.
#[derive(Clone, Debug)]
pub struct Probe {
    pub name: String,
    pub c: u64,
    pub a: Vec<u64>,
    pub b: Vec<u64>,
    pub sa: Vec<u64>,
    pub sb: Vec<u64>,
}

impl Probe {
    fn new(name: String, input: Input) -> Probe {
        Probe {
            name,
            c: input.c,
            a: input.a,
            b: input.b,
            sa: input.sa,
            sb: input.sb,
        }
    }

    /// The probe's inputs.
    pub fn input(&self) -> Input {
        Input {
            c: self.c,
            a: self.a.clone(),
            b: self.b.clone(),
            sa: self.sa.clone(),
            sb: self.sb.clone(),
        }
    }
}

/// Factor `2^e` into `2^ea * 2^eb` with both representable in a and b.
fn split_pow2(a: &Format, b: &Format, e: i64, negative: bool) -> Option<(u64, u64)> {
    let (fa, fb) = (a.as_float()?, b.as_float()?);
    let lo = (fa.min_exponent() as i64 - fa.mantissa_bits as i64).max(e - fb.max_exponent() as i64);
    let hi =
        (fa.max_exponent() as i64).min(e - (fb.min_exponent() as i64 - fb.mantissa_bits as i64));
    // prefer a balanced split, near the middle of the feasible range
    let mid = if lo <= hi { (lo + hi) / 2 } else { return None };
    for d in 0..=(hi - lo) {
        for ea in [mid - d, mid + d] {
            if ea < lo || ea > hi {
                continue;
            }
            if let (Some(x), Some(y)) = (pow2(a, ea, negative), pow2(b, e - ea, false)) {
                return Some((x, y));
            }
        }
    }
    None
}

/// The probes of one instruction.
pub fn battery(inst: &Instruction) -> Vec<Probe> {
    let k = inst.k();
    let scales = inst.scale_count();
    // neutral scale factors: 1.0
    let one_scale = inst
        .arithmetic
        .scale
        .as_ref()
        .and_then(|s| pow2(&s.format, 0, false))
        .unwrap_or(0);
    let mut out = vec![];
    let mut add = |name: String, c: Option<u64>, pairs: Vec<Option<(u64, u64)>>| {
        let Some(c) = c else { return };
        if pairs.iter().any(|p| p.is_none()) {
            return;
        }
        let mut a = vec![zero(&inst.arithmetic.a, false); k];
        let mut b = vec![zero(&inst.arithmetic.b, false); k];
        for (i, p) in pairs.into_iter().enumerate().take(k) {
            let (x, y) = p.unwrap();
            a[i] = x;
            b[i] = y;
        }
        out.push(Probe {
            name,
            c,
            a,
            b,
            sa: vec![one_scale; scales],
            sb: vec![one_scale; scales],
        });
    };
    match (&inst.arithmetic.a.kind, &inst.arithmetic.d.kind) {
        (FormatKind::Int(ia), FormatKind::Int(_)) => {
            let a_max = low_mask(ia.bits - ia.signed as u32);
            let a_min = if ia.signed { 1u64 << (ia.bits - 1) } else { 0 };
            let b_max = inst
                .arithmetic
                .b
                .as_int()
                .map(|ib| low_mask(ib.bits - ib.signed as u32))
                .unwrap_or(1);
            let c_max = low_mask(31);
            add("one plus one".into(), Some(1), vec![Some((1, 1))]);
            add(
                "max * max in every lane".into(),
                Some(0),
                vec![Some((a_max, b_max)); k],
            );
            add(
                "max * max onto c max (overflow)".into(),
                Some(c_max),
                vec![Some((a_max, b_max)); k],
            );
            add(
                "min * max onto c min (underflow)".into(),
                Some(1 << 31),
                vec![Some((a_min, b_max)); k],
            );
            add(
                "min * max in every lane".into(),
                Some(0),
                vec![Some((a_min, b_max)); k],
            );
        }
        _ => float_probes(inst, &mut add),
    }
    for (name, input) in parameter_probes(inst) {
        out.push(Probe::new(name, input));
    }
    out
}

/// How far from 0 the parameter probes look for an anchor exponent.
const ANCHOR_RANGE: i64 = 64;

/// `2^(E-j)` written relative to the anchor `E` the probe found (`1` when E = 0).
fn rel(e: i64, j: i64) -> String {
    match (e, j) {
        (0, 0) => "1".into(),
        (0, j) => format!("2^{}", -j),
        (e, 0) => format!("2^{e}"),
        (e, j) => format!("2^({e}-{j})"),
    }
}

fn signed(negative: bool) -> &'static str {
    if negative { "-" } else { "+" }
}

/// The probes read from a fused instruction's IR (module docs). Each is built at the
/// first anchor exponent where the formats represent it, and left out where none does.
pub fn parameter_probes(inst: &Instruction) -> Vec<(String, Input)> {
    let Pipeline::Fused(fused) = &inst.arithmetic.pipeline else {
        return vec![];
    };
    let Some(d) = inst.arithmetic.d.as_float() else {
        return vec![];
    };
    let (dp, dmin) = (d.mantissa_bits as i64, d.min_exponent() as i64);
    let focus = Focus::of(&[inst]);
    let lanes = spread_lanes(
        inst,
        fused.chain as usize,
        focus.groups.first().copied().unwrap_or(0),
    );
    let (l0, l1) = (lanes[0], lanes.get(1).copied().unwrap_or(lanes[0]));
    let rest: Vec<usize> = lanes.iter().skip(2).copied().collect();
    let mut out = vec![];
    let mut add = |name: String, found: Option<(i64, Input)>| {
        if let Some((_, input)) = found {
            out.push((name, input));
        }
    };
    let p2 = Dyadic::pow2;
    let sp2 = |neg: bool, e: i64| Dyadic::from_parts(neg, 1, e);
    // an output tie decided by a term at each alignment cut
    for &f in &focus.keeps {
        for j in (f - 1)..=(f + 2) {
            if j <= dp + 1 {
                continue;
            }
            for neg in [false, true] {
                let found = anchored(inst, 0, ANCHOR_RANGE, |s, e| {
                    s.c(&p2(e))?
                        .product(l0, &p2(e - dp - 1))?
                        .product(l1, &sp2(neg, e - j))?;
                    Some(())
                });
                let e = found.as_ref().map_or(0, |x| x.0);
                add(
                    format!(
                        "{} + half ulp {} {} (tie, cut at F = {f})",
                        rel(e, 0),
                        signed(neg),
                        rel(e, j)
                    ),
                    found,
                );
            }
        }
    }
    // c cut at each alignment cut, with products that cancel above it (for products too
    // coarse to reach the cut themselves, e.g. FP4)
    for &f in &focus.keeps {
        for j in [f, f + 1] {
            let found = anchored(inst, 0, ANCHOR_RANGE, |s, e| {
                s.c(&p2(e - j))?
                    .product(l0, &p2(e))?
                    .product(l1, &sp2(true, e))?;
                Some(())
            });
            let e = found.as_ref().map_or(0, |x| x.0);
            add(
                format!(
                    "c = {}, {} - {} (c cut at F = {f})",
                    rel(e, j),
                    rel(e, 0),
                    rel(e, 0)
                ),
                found,
            );
        }
    }
    // a fixed reference: c at its grid and just below
    for &r in &focus.references {
        for &f in &focus.keeps {
            for g in [r - f, r - f - 1] {
                let mut sk = Sketch::new(inst);
                let built = sk.c(&p2(g)).is_some().then(|| (0, sk.finish()));
                add(format!("c = 2^{g} (fixed reference {r}, {f} bits)"), built);
            }
        }
    }
    // chained steps: a cancellation, then a small term, in consecutive steps; and half an
    // ulp in each of two consecutive steps (the boundary of the chain and of one twice
    // as fine)
    let chain = fused.chain as usize;
    let small = focus.keeps.last().copied().unwrap_or(dp) + 2;
    for b in [chain, chain / 2] {
        if b == 0 || b >= inst.k() {
            continue;
        }
        let found = anchored(inst, 0, ANCHOR_RANGE, |s, e| {
            s.c(&p2(e))?
                .product(b - 1, &sp2(true, e))?
                .product(b, &p2(e - small))?;
            Some(())
        });
        let e = found.as_ref().map_or(0, |x| x.0);
        add(
            format!(
                "c = {}, - {} at k = {}, + {} at k = {b} (chain {chain})",
                rel(e, 0),
                rel(e, 0),
                b - 1,
                rel(e, small)
            ),
            found,
        );
        let found = anchored(inst, 0, ANCHOR_RANGE, |s, e| {
            s.c(&p2(e))?
                .product(b - 1, &p2(e - dp - 1))?
                .product(b, &p2(e - dp - 1))?;
            Some(())
        });
        let e = found.as_ref().map_or(0, |x| x.0);
        add(
            format!(
                "c = {}, half ulp at k = {} and at k = {b} (chain {chain})",
                rel(e, 0),
                b - 1
            ),
            found,
        );
    }
    // groups: two terms next to the cut in one group, or in two (G and half of it), with
    // c cancelled from the last lane
    if let (Some(g), Some(&f)) = (fused.grouping, focus.keeps.last()) {
        let g = g.size as usize;
        let far = inst.k() - 1;
        for b in [g / 2, g] {
            if b == 0 || b >= far {
                continue;
            }
            let found = anchored(inst, 0, ANCHOR_RANGE, |s, e| {
                s.c(&p2(e))?
                    .product(far, &sp2(true, e))?
                    .product(0, &p2(e - f + 1))?
                    .product(b, &sp2(true, e - f - 1))?;
                Some(())
            });
            let e = found.as_ref().map_or(0, |x| x.0);
            add(
                format!(
                    "c = {0} - {0}, {1} at k = 0, - {2} at k = {b} (groups of {g})",
                    rel(e, 0),
                    rel(e, f - 1),
                    rel(e, f + 1)
                ),
                found,
            );
        }
    }
    // a carry into the next binade, then a bit at each normalisation precision
    for step in &fused.normalize {
        let p = step.fraction_bits as i64;
        for q in [p, p + 1] {
            let found = anchored(inst, 0, ANCHOR_RANGE, |s, e| {
                s.c(&p2(e))?
                    .product(l0, &p2(e))?
                    .product(l1, &p2(e + 1 - q))?;
                Some(())
            });
            let e = found.as_ref().map_or(0, |x| x.0);
            add(
                format!(
                    "{} + {} + {} (carry, then precision {p})",
                    rel(e, 0),
                    rel(e, 0),
                    rel(e, q - 1)
                ),
                found,
            );
        }
        // a tie at d's precision broken by a bit an intermediate precision keeps or drops
        if p > dp + 1 && step.max_exponent.is_none() {
            for q in [p, p + 1] {
                let found = anchored(inst, 0, ANCHOR_RANGE, |s, e| {
                    s.c(&p2(e))?
                        .product(l0, &p2(e - dp - 1))?
                        .product(l1, &p2(e - q))?;
                    Some(())
                });
                let e = found.as_ref().map_or(0, |x| x.0);
                add(
                    format!(
                        "{} + half ulp + {} (tie, intermediate precision {p})",
                        rel(e, 0),
                        rel(e, q)
                    ),
                    found,
                );
            }
        }
    }
    // every term below an exponent of zero, a bit at its cut
    for &z in &focus.zero_exponents {
        for &f in &focus.keeps {
            // the smallest value d shows (nearest the cut, for formats with few bits)
            let x = (dmin - dp).min(z - 1);
            for delta in [0, -1] {
                let g = z - f + delta;
                for (neg, tie) in [(true, false), (false, true), (true, true)] {
                    let mut sk = Sketch::new(inst);
                    let built = (|| {
                        sk.c_zero(false).product(l0, &sp2(neg, g))?;
                        if tie {
                            sk.product(l1, &p2(x.max(dmin) - dp - 1))?;
                        }
                        sk.product_sum(&rest, &p2(x))?;
                        Some(())
                    })();
                    add(
                        format!(
                            "c = 0, 2^{x}{} {} 2^{g} (all below e_zero = {z}, cut {z} - {f})",
                            if tie { " + half ulp" } else { "" },
                            signed(neg)
                        ),
                        built.map(|_| (0, sk.finish())),
                    );
                }
            }
        }
    }
    out
}

type Add<'a> = dyn FnMut(String, Option<u64>, Vec<Option<(u64, u64)>>) + 'a;

fn float_probes(inst: &Instruction, add: &mut Add) {
    let (a, b, c, d) = (
        &inst.arithmetic.a,
        &inst.arithmetic.b,
        &inst.arithmetic.c,
        &inst.arithmetic.d,
    );
    let one = split_pow2(a, b, 0, false);
    let minus_one = split_pow2(a, b, 0, true);
    let c1 = pow2(c, 0, false);
    let d_prec = d.as_float().map(|f| f.mantissa_bits as i64).unwrap_or(23);
    add("1 + 1*1".into(), c1, vec![one]);
    // alignment precision: c = 2^E plus one product 2^(E-j), for j around F; E is the
    // smallest anchor at which every probe below is representable (0 for most formats)
    let f = match &inst.arithmetic.pipeline {
        Pipeline::Fused(fu) => fu.nodes.first().and_then(|n| {
            n.terms
                .iter()
                .filter_map(|t| t.keep.map(|k| k.0 as i64))
                .max()
        }),
        _ => None,
    };
    let (f, what) = match f {
        Some(f) => (f, format!("alignment F = {f}")),
        None => (d_prec, format!("d precision {d_prec}")),
    };
    let deepest = (f + 3).max(d_prec + 2);
    let anchor = (0..=64i64).find(|&e| {
        pow2(c, e, false).is_some()
            && value(c, &Dyadic::pow2(e).add(&Dyadic::pow2(e - d_prec))).is_some()
            && split_pow2(a, b, e - deepest, false).is_some()
    });
    let Some(e0) = anchor else {
        return tail_probes(inst, add, one, minus_one, c1);
    };
    let big = |x: i64| {
        if e0 == 0 {
            format!("1 + 2^-{x}")
        } else {
            format!("2^{e0} + 2^({e0}-{x})")
        }
    };
    let cbig = pow2(c, e0, false);
    for j in (f - 2)..=(f + 2) {
        add(
            format!("{} ({what})", big(j)),
            cbig,
            vec![split_pow2(a, b, e0 - j, false)],
        );
        add(
            format!("{} ({what})", big(j)).replacen(" + 2^", " - 2^", 1),
            cbig,
            vec![split_pow2(a, b, e0 - j, true)],
        );
    }
    // two opposite small terms: RZ per term vs. exact sum
    add(
        format!("{} - 2^({e0}-{})", big(f + 1), f + 3),
        cbig,
        vec![
            split_pow2(a, b, e0 - (f + 1), false),
            split_pow2(a, b, e0 - (f + 3), true),
        ],
    );
    // output rounding: ties and near-ties at half an ulp of d
    for (label, c_is_odd) in [("even", false), ("odd", true)] {
        let cv = if c_is_odd {
            Dyadic::pow2(e0).add(&Dyadic::pow2(e0 - d_prec))
        } else {
            Dyadic::pow2(e0)
        };
        for (neg, sign) in [(false, "+"), (true, "-")] {
            let cc = value(c, &if neg { cv.neg() } else { cv.clone() });
            add(
                format!("c {label} {sign} half ulp (tie)"),
                cc,
                vec![split_pow2(a, b, e0 - d_prec - 1, neg)],
            );
            let quarter = split_pow2(a, b, e0 - d_prec - 2, neg);
            add(
                format!("c {label} {sign} 3/4 ulp"),
                cc,
                vec![split_pow2(a, b, e0 - d_prec - 1, neg), quarter],
            );
            add(format!("c {label} {sign} 1/4 ulp"), cc, vec![quarter]);
        }
    }
    tail_probes(inst, add, one, minus_one, c1)
}

/// Overflow, specials, subnormals, the exponent of zero and signed zeros.
fn tail_probes(
    inst: &Instruction,
    add: &mut Add,
    one: Option<(u64, u64)>,
    minus_one: Option<(u64, u64)>,
    c1: Option<u64>,
) {
    let (a, b, c, d) = (
        &inst.arithmetic.a,
        &inst.arithmetic.b,
        &inst.arithmetic.c,
        &inst.arithmetic.d,
    );
    let d_prec = d.as_float().map(|f| f.mantissa_bits as i64).unwrap_or(23);
    // overflow boundaries
    let amax = max_finite(a, false);
    let bmax = max_finite(b, false);
    let maxmax = amax.zip(bmax);
    add("max * max".into(), Some(zero(c, false)), vec![maxmax]);
    add(
        "max * max in every lane".into(),
        Some(zero(c, false)),
        vec![maxmax; inst.k()],
    );
    add(
        "c max + max * max".into(),
        max_finite(c, false),
        vec![maxmax],
    );
    add("c max + 1*1".into(), max_finite(c, false), vec![one]);
    add(
        "-c max - max * max".into(),
        max_finite(c, true),
        vec![max_finite(a, true).zip(bmax)],
    );
    // specials
    let inf_a = a.encode_inf(false);
    let nan_a = a.encode_nan();
    add(
        "inf * 1".into(),
        Some(zero(c, false)),
        vec![inf_a.zip(one.map(|x| x.1))],
    );
    add(
        "inf * 0".into(),
        Some(zero(c, false)),
        vec![inf_a.map(|x| (x, zero(b, false)))],
    );
    add(
        "inf * 1 - inf * 1".into(),
        Some(zero(c, false)),
        vec![
            inf_a.zip(one.map(|x| x.1)),
            a.encode_inf(true).zip(one.map(|x| x.1)),
        ],
    );
    add(
        "nan * 1".into(),
        Some(zero(c, false)),
        vec![nan_a.zip(one.map(|x| x.1))],
    );
    add("c = nan".into(), c.encode_nan(), vec![one]);
    add("c = inf".into(), c.encode_inf(false), vec![one]);
    add(
        "c = -inf, inf * 1".into(),
        c.encode_inf(true),
        vec![inf_a.zip(one.map(|x| x.1))],
    );
    // subnormals and tiny values
    let amin = min_positive(a);
    add(
        "min subnormal a * 1".into(),
        Some(zero(c, false)),
        vec![amin.zip(pow2(b, 0, false))],
    );
    add(
        "min subnormal a * min subnormal b".into(),
        Some(zero(c, false)),
        vec![amin.zip(min_positive(b))],
    );
    add("c = min subnormal".into(), min_positive(c), vec![]);
    add("c = min subnormal + 1*1".into(), min_positive(c), vec![one]);
    let d_min = d
        .as_float()
        .map(|f| f.min_exponent() as i64)
        .unwrap_or(-126);
    add(
        "result at the output's smallest normal".into(),
        Some(zero(c, false)),
        vec![split_pow2(a, b, d_min, false)],
    );
    add(
        "result just below the output's normal range".into(),
        Some(zero(c, false)),
        vec![split_pow2(a, b, d_min - 1, false)],
    );
    add(
        "negative result below the output's subnormals".into(),
        Some(zero(c, false)),
        vec![split_pow2(a, b, d_min - d_prec - 2, true)],
    );
    // exponent of zero: a single tiny product against a zero c
    for shift in [0i64, 4, 12, 30] {
        add(
            format!("c = 0, one product 2^({d_min} - {shift})"),
            Some(zero(c, false)),
            vec![split_pow2(a, b, d_min - shift, false)],
        );
    }
    // signed zeros
    add("c = -0, no products".into(), Some(zero(c, true)), vec![]);
    add(
        "c = -0, -0 * 1".into(),
        Some(zero(c, true)),
        vec![pow2(b, 0, false).map(|y| (zero(a, true), y))],
    );
    add(
        "c = +0, -0 * 1".into(),
        Some(zero(c, false)),
        vec![pow2(b, 0, false).map(|y| (zero(a, true), y))],
    );
    add(
        "exact cancellation 1 - 1".into(),
        Some(zero(c, false)),
        vec![one, minus_one],
    );
    add("c = 1, - 1*1".into(), c1, vec![minus_one]);
}

/// Run the battery and format one line per probe: `name: d=HEX value`.
pub fn report(checked: Checked) -> String {
    let inst = checked.instruction();
    let mut s = String::new();
    for p in battery(inst) {
        let ops = Operands {
            c: p.c,
            a: &p.a,
            b: &p.b,
            sa: &p.sa,
            sb: &p.sb,
        };
        let line = match interp::run(checked, &ops) {
            Ok(dv) => format!(
                "d={:0w$x} {}",
                dv,
                inst.arithmetic.d.decode(dv).describe(),
                w = inst.arithmetic.d.hex_digits()
            ),
            Err(e) => format!("error: {e}"),
        };
        s.push_str(&format!("  {:<48} {line}\n", p.name));
        s.push_str(&format!("      {}\n", p.input().run_arguments(inst)));
    }
    s
}
