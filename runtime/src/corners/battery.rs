//! The battery: probes built from an instruction's operand formats alone. Alignment
//! precision (c = 2^E plus one product 2^(E-j) for j around the first alignment's F, or
//! d's precision), two opposite small terms, output ties and near-ties at half an ulp of
//! d, overflow boundaries, NaN and Inf, subnormals and tiny values, the exponent of zero,
//! signed zeros; for integer instructions, the extremes of every lane.

use crate::inputs::{Input, encode as value, max_finite, min_positive, pow2, zero};
use mmac_compiler::exact::Dyadic;
use mmac_compiler::format::{Format, FormatKind, low_mask};
use mmac_compiler::ir::{Instruction, Pipeline};

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

/// The probes built from the operand formats alone (module docs).
pub fn battery(inst: &Instruction) -> Vec<(String, Input)> {
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
        let input = Input {
            c,
            a,
            b,
            sa: vec![one_scale; scales],
            sb: vec![one_scale; scales],
        };
        out.push((name, input));
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
