//! Fused pipelines: exact products, groups, alignment nodes and normalisation steps,
//! checked into [`Fused`]: every stage in order, every term consumed exactly once.

// Diagnostics are plain values passed up by `?`; their size does not matter here.
#![allow(clippy::result_large_err)]

use super::super::eval::{
    Scope, expect_format, expect_int, expect_overflow, expect_rounding, in_range, power_of_two,
};
use super::super::family::Ctx;
use super::{conditioning_of, divisibility, float_of, missing_normalize, nan_policy, stage_name};
use crate::ast::{self, StageKind};
use crate::diagnostic::{Diag, Span, closest};
use crate::exact::Rounding;
use crate::format::{Format, FormatKind};
use crate::ir::*;
use std::collections::HashMap;

/// Bounds on a term, for the width analysis: its exponent lies in `[min_exp, max_exp]`,
/// its magnitude is below `2^(exp + sig_bits)` and its lowest set bit is at or above `lsb`.
#[derive(Clone, Copy, Debug)]
struct TermBounds {
    min_exp: i64,
    max_exp: i64,
    sig_bits: i64,
    lsb: i64,
}

fn float_bounds(f: &Format) -> TermBounds {
    match &f.kind {
        FormatKind::Float(x) => TermBounds {
            min_exp: x.min_exponent() as i64,
            max_exp: x.max_exponent() as i64,
            sig_bits: 1,
            lsb: x.min_exponent() as i64 - x.mantissa_bits as i64,
        },
        FormatKind::Int(i) => TermBounds {
            min_exp: 0,
            max_exp: 0,
            sig_bits: i.bits as i64,
            lsb: 0,
        },
    }
}

fn clog2(n: usize) -> i64 {
    (usize::BITS - n.saturating_sub(1).leading_zeros()) as i64
}

pub(super) fn build_fused(
    p: &ast::PipelineDecl,
    scope: &Scope,
    ctx: &Ctx,
) -> Result<Pipeline, Vec<Diag>> {
    let mut diags: Vec<Diag> = vec![];
    let mut chain = ctx.k;
    let mut scaled_products = false;
    let mut product_overflow = None;
    let mut zero = ZeroExponents {
        products: ZeroExponent::Natural,
        c: ZeroExponent::Natural,
        groups: ZeroExponent::Natural,
    };
    let mut grouping: Option<(Grouping, String, Span)> = None;
    let mut nodes: Vec<AlignNode> = vec![];
    let mut node_names: HashMap<String, (usize, Span)> = HashMap::new();
    let mut normalize: Vec<NormalizeStep> = vec![];
    let mut zero_sign = ZeroSign::Positive;
    let mut nan = NanPolicy::Canonical;
    let mut multiply_seen = false;

    for (a, role) in [(&ctx.a, "a"), (&ctx.b, "b"), (&ctx.c, "c"), (&ctx.d, "d")] {
        if let Err(d) = float_of(a, ctx.uses_span, role) {
            diags.push(d);
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    if !ctx.d.as_float().unwrap().has_inf() {
        diags.push(
            Diag::new("type", ctx.uses_span, format!("d `{}` has no Inf and NaN", ctx.d.name))
                .label("unsupported output format")
                .help("fused pipelines produce IEEE-style results: use an output format with Inf and NaN (f16, bf16, f32, ...)"),
        );
        return Err(diags);
    }

    let resolve_keep = |kr: &ast::KeepRound| -> Result<(u32, Rounding), Diag> {
        let f = expect_int(&kr.keep, scope)?;
        let f = in_range(&kr.keep, f, 0, MAX_F, "F (fraction bits kept)")?;
        Ok((f as u32, expect_rounding(&kr.round, scope)?))
    };

    for s in &p.stages {
        let r: Result<(), Diag> = (|| {
            if !normalize.is_empty()
                && !matches!(
                    s.kind,
                    StageKind::Normalize { .. } | StageKind::Nan(_) | StageKind::ZeroResult(_)
                )
            {
                return Err(Diag::new("stage-order", s.span, format!("`{}` after `normalize`", stage_name(&s.kind)))
                    .label("the sum is already normalised here")
                    .help("stages run in order: conditioning, products, grouping, alignment, normalisation"));
            }
            match &s.kind {
                StageKind::Chain { length, bytes } => {
                    let mut l = in_range(
                        length,
                        expect_int(length, scope)?,
                        1,
                        1 << 20,
                        "a chain length",
                    )?;
                    if *bytes {
                        let bits = ctx.a.storage_bits() as i64;
                        if (l * 8) % bits != 0 {
                            return Err(Diag::new(
                                "divisibility",
                                length.span,
                                format!(
                                    "{l} bytes is not a whole number of `{}` elements",
                                    ctx.a.name
                                ),
                            )
                            .label("not whole elements")
                            .help("give the chain length in elements instead"));
                        }
                        l = l * 8 / bits;
                    }
                    let l = (l as u32).min(ctx.k);
                    if !ctx.k.is_multiple_of(l) {
                        return Err(divisibility(length.span, ctx.k, l, "chain length"));
                    }
                    chain = l;
                }
                StageKind::Flush { .. } => {}
                StageKind::Multiply {
                    kind,
                    scaled,
                    overflow_at,
                    flush_keep_sign,
                } => {
                    if !matches!(kind, ast::MultiplyKind::Exact) || *flush_keep_sign {
                        return Err(Diag::new("misplaced-stage", s.span, "fused pipelines take exact products")
                            .label("rounded products here")
                            .help("rounded products belong to sequential pipelines, which end in `accumulate in FORMAT round MODE`"));
                    }
                    multiply_seen = true;
                    scaled_products = *scaled;
                    if let Some(e) = overflow_at {
                        product_overflow = Some(power_of_two(e, scope)?);
                    }
                }
                StageKind::ZeroExponent { exponent, class } => {
                    let z = match exponent {
                        None => ZeroExponent::Never,
                        Some(e) => ZeroExponent::Fixed(in_range(
                            e,
                            expect_int(e, scope)?,
                            -100_000,
                            100_000,
                            "a zero exponent",
                        )? as i32),
                    };
                    match class {
                        None => {
                            zero = ZeroExponents {
                                products: z,
                                c: z,
                                groups: z,
                            }
                        }
                        Some(ast::TermClass::Products) => zero.products = z,
                        Some(ast::TermClass::C) => zero.c = z,
                        Some(ast::TermClass::Groups) => zero.groups = z,
                    }
                }
                StageKind::ZeroResult(id) => {
                    zero_sign = match id.name.as_str() {
                        "positive" => ZeroSign::Positive,
                        "exact_positive" => ZeroSign::ExactPositive,
                        _ => {
                            return Err(Diag::new("unknown-name", id.span, format!("unknown zero-result rule `{}`", id.name))
                                .label("not a rule")
                                .help("`zero result positive` (every zero is +0) or `zero result exact_positive` (exact zeros are +0, underflows keep their sign)"));
                        }
                    }
                }
                StageKind::Group { size, scaled, name } => {
                    let g = in_range(size, expect_int(size, scope)?, 1, 1 << 16, "a group size")?
                        as u32;
                    if !chain.is_multiple_of(g) {
                        return Err(divisibility(size.span, chain, g, "group size"));
                    }
                    if let Some(sc) = &ctx.scale
                        && *scaled
                        && sc.block % g != 0
                    {
                        return Err(Diag::new(
                            "divisibility",
                            size.span,
                            format!(
                                "scale block {} is not a multiple of the group size {g}",
                                sc.block
                            ),
                        )
                        .label("a group would straddle two scale blocks")
                        .help("groups must lie inside one scale block"));
                    }
                    grouping = Some((
                        Grouping {
                            size: g,
                            scaled: *scaled,
                        },
                        name.name.clone(),
                        name.span,
                    ));
                }
                StageKind::Align {
                    terms,
                    reference,
                    keep_round,
                    name,
                } => {
                    let default_keep = keep_round.as_ref().map(resolve_keep).transpose()?;
                    let mut out = vec![];
                    for t in terms {
                        let source = match &t.source {
                            ast::Source::Products(part) => TermSource::Products(match part {
                                ast::ProductsPart::All => ProductsPart::All,
                                ast::ProductsPart::Even => ProductsPart::Even,
                                ast::ProductsPart::Odd => ProductsPart::Odd,
                            }),
                            ast::Source::Named(id) if id.name == "c" => TermSource::C,
                            ast::Source::Named(id) => {
                                if let Some((idx, _)) = node_names.get(&id.name) {
                                    TermSource::Node(*idx)
                                } else if grouping.as_ref().is_some_and(|(_, g, _)| *g == id.name) {
                                    TermSource::Groups
                                } else {
                                    let mut cands: Vec<&str> =
                                        node_names.keys().map(|s| s.as_str()).collect();
                                    cands.push("c");
                                    cands.push("products");
                                    if let Some((_, g, _)) = &grouping {
                                        cands.push(g);
                                    }
                                    let d = Diag::new(
                                        "unknown-name",
                                        id.span,
                                        format!("no term source named `{}`", id.name),
                                    )
                                    .label("not defined before this stage");
                                    return Err(match closest(&id.name, cands) {
                                        Some(c) => d.help(format!("did you mean `{c}`? sources are products, products.even, products.odd, c, a group, or an earlier `align ... as NAME`")),
                                        None => d.help("sources are products, products.even, products.odd, c, a group, or an earlier `align ... as NAME`"),
                                    });
                                }
                            }
                        };
                        let keep = match &t.keep_round {
                            Some(kr) => Some(resolve_keep(kr)?),
                            None => default_keep,
                        };
                        if keep.is_none() {
                            return Err(Diag::new("missing-keep", t.span, "how many bits does this term keep?")
                                .label("no `keep F bits round MODE`")
                                .help("add `keep F bits round MODE` after the term or after the reference; for an exact sum use `sum exact`"));
                        }
                        let drop_below = match &t.drop_below {
                            Some(e) => Some(in_range(
                                e,
                                expect_int(e, scope)?,
                                0,
                                100_000,
                                "a drop distance",
                            )? as u32),
                            None => None,
                        };
                        out.push(AlignTerm {
                            source,
                            keep,
                            drop_below,
                        });
                    }
                    let reference = match reference {
                        ast::Reference::MaxExponent => Reference::MaxExponent,
                        ast::Reference::Fixed(e) => Reference::Fixed(in_range(
                            e,
                            expect_int(e, scope)?,
                            -100_000,
                            100_000,
                            "a reference exponent",
                        )?
                            as i32),
                    };
                    if let Some(n) = name {
                        if let Some((_, prev)) = node_names.get(&n.name) {
                            return Err(Diag::new(
                                "duplicate-name",
                                n.span,
                                format!("`{}` is already defined", n.name),
                            )
                            .label("defined again")
                            .also(*prev, "first here")
                            .help("give each alignment its own name"));
                        }
                        node_names.insert(n.name.clone(), (nodes.len(), n.span));
                    }
                    nodes.push(AlignNode {
                        name: name.as_ref().map(|n| n.name.clone()),
                        terms: out,
                        reference,
                        width_bits: 0,
                    });
                }
                StageKind::SumExact => {
                    if nodes.is_empty() {
                        let mut terms = vec![];
                        if grouping.is_some() {
                            terms.push(AlignTerm {
                                source: TermSource::Groups,
                                keep: None,
                                drop_below: None,
                            });
                        } else {
                            terms.push(AlignTerm {
                                source: TermSource::Products(ProductsPart::All),
                                keep: None,
                                drop_below: None,
                            });
                        }
                        terms.push(AlignTerm {
                            source: TermSource::C,
                            keep: None,
                            drop_below: None,
                        });
                        nodes.push(AlignNode {
                            name: None,
                            terms,
                            reference: Reference::MaxExponent,
                            width_bits: 0,
                        });
                    }
                }
                StageKind::Normalize {
                    target,
                    precision,
                    rounding,
                    overflow,
                } => {
                    let (fmt_expr, final_step) = match target {
                        ast::NormalizeTarget::To(e) => (e, true),
                        ast::NormalizeTarget::Range(e) => (e, false),
                    };
                    let f = expect_format(fmt_expr, scope)?;
                    float_of(&f, fmt_expr.span, "normalisation format")?;
                    let ff = f.as_float().unwrap().clone();
                    if final_step && f != ctx.d {
                        return Err(Diag::new("type", fmt_expr.span, format!("normalizing to `{}` but d is `{}`", f.name, ctx.d.name))
                            .label("not d's format")
                            .help("the last step is `normalize to out ...`; use `normalize range FORMAT precision P` for intermediate steps"));
                    }
                    let fraction_bits = match precision {
                        Some(pe) => {
                            let hi = if final_step {
                                ff.mantissa_bits as i64
                            } else {
                                MAX_F
                            };
                            in_range(pe, expect_int(pe, scope)?, 0, hi, "precision")? as u32
                        }
                        None if final_step => ff.mantissa_bits,
                        None => {
                            return Err(Diag::new(
                                "missing-precision",
                                s.span,
                                "an intermediate normalisation needs a precision",
                            )
                            .label("no `precision P`")
                            .help("write `normalize range FORMAT precision P round MODE`"));
                        }
                    };
                    let rounding = match rounding {
                        Some(r) => expect_rounding(r, scope)?,
                        None => {
                            return Err(Diag::new(
                                "missing-rounding",
                                s.span,
                                "normalisation needs a rounding mode",
                            )
                            .label("no `round MODE`")
                            .help("add `round toward_zero`, `round nearest_even`, ..."));
                        }
                    };
                    let overflow = match overflow
                        .as_ref()
                        .map(|e| (expect_overflow(e, scope), e.span))
                    {
                        None => Overflow::Inf,
                        Some((Err(d), _)) => return Err(d),
                        Some((Ok(Overflow::Wrap), sp)) => {
                            return Err(Diag::new("bad-overflow", sp, "floats cannot wrap")
                                .label("wrap is for integers")
                                .help("use `overflow inf` or `overflow saturate`"));
                        }
                        Some((Ok(x), _)) => x,
                    };
                    if let Some(last) = normalize.last()
                        && last.max_exponent.is_some()
                    {
                        return Err(Diag::new("stage-order", s.span, "normalisation after the final `normalize to out`")
                            .label("d is already produced")
                            .help("intermediate steps (`normalize range ...`) come before `normalize to out`"));
                    }
                    normalize.push(NormalizeStep {
                        min_exponent: ff.min_exponent(),
                        max_exponent: final_step.then_some(ff.max_exponent()),
                        fraction_bits,
                        rounding,
                        overflow,
                    });
                }
                StageKind::Nan(id) => nan = nan_policy(id)?,
                StageKind::Accumulate { .. } | StageKind::Pairwise { .. } => {
                    unreachable!("sequential stages select the sequential pipeline")
                }
            }
            Ok(())
        })();
        if let Err(d) = r {
            diags.push(d);
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    if !multiply_seen {
        diags.push(
            Diag::new(
                "missing-stage",
                p.name.span,
                format!(
                    "pipeline `{}` never says how products are formed",
                    p.name.name
                ),
            )
            .label("no `multiply`")
            .help("add `multiply exact`"),
        );
    }
    if nodes.is_empty() {
        diags.push(
            Diag::new(
                "missing-stage",
                p.name.span,
                format!("pipeline `{}` never sums its terms", p.name.name),
            )
            .label("no `align` or `sum exact`")
            .help("add `align products, c to max exponent keep F bits round MODE`, or `sum exact`"),
        );
    }
    if normalize.last().is_none_or(|n| n.max_exponent.is_none()) {
        diags.push(missing_normalize(p));
    }
    // scale factors must be applied exactly when the instruction has them
    let scale_used = scaled_products || grouping.as_ref().is_some_and(|(g, _, _)| g.scaled);
    match (&ctx.scale, scale_used) {
        (Some(_), false) => diags.push(
            Diag::new("scale-unused", ctx.uses_span, format!("`{}` has scale factors, but pipeline `{}` never applies them", ctx.instruction, p.name.name))
                .label("scales ignored")
                .help("use `multiply exact, scaled` (per product) or `group G products exact, scaled as NAME` (per group)"),
        ),
        (None, true) => diags.push(
            Diag::new("scale-missing", ctx.uses_span, format!("pipeline `{}` applies scale factors, but `{}` has none", p.name.name, ctx.instruction))
                .label("no `scale` statement")
                .help("add `scale ue8m0 block 32` (format and block size) to the instruction"),
        ),
        _ => {}
    }
    if !diags.is_empty() {
        return Err(diags);
    }

    // every term consumed exactly once
    let mut use_count: HashMap<TermSource, usize> = HashMap::new();
    for n in &nodes {
        for t in &n.terms {
            *use_count.entry(t.source).or_default() += 1;
        }
    }
    let count = |s: TermSource| use_count.get(&s).copied().unwrap_or(0);
    let consumed_products = if grouping.is_some() {
        if count(TermSource::Products(ProductsPart::All))
            + count(TermSource::Products(ProductsPart::Even))
            + count(TermSource::Products(ProductsPart::Odd))
            > 0
        {
            Some("products are grouped; align the group instead of the products")
        } else if count(TermSource::Groups) != 1 {
            Some("each group must be aligned exactly once")
        } else {
            None
        }
    } else {
        let all = count(TermSource::Products(ProductsPart::All));
        let even = count(TermSource::Products(ProductsPart::Even));
        let odd = count(TermSource::Products(ProductsPart::Odd));
        if !((all == 1 && even == 0 && odd == 0) || (all == 0 && even == 1 && odd == 1)) {
            Some(
                "every product must be added exactly once: `products` once, or `products.even` and `products.odd` once each",
            )
        } else {
            None
        }
    };
    if let Some(msg) = consumed_products {
        diags.push(
            Diag::new("unbalanced-terms", p.name.span, msg.to_string())
                .label("in this pipeline")
                .help("check the `align` stages"),
        );
    }
    if count(TermSource::C) != 1 {
        diags.push(
            Diag::new(
                "unbalanced-terms",
                p.name.span,
                format!("c is added {} times", count(TermSource::C)),
            )
            .label("in this pipeline")
            .help("the accumulator c must appear in exactly one `align` (or `sum exact`)"),
        );
    }
    for (i, n) in nodes.iter().enumerate() {
        let uses = count(TermSource::Node(i));
        let last = i + 1 == nodes.len();
        if !last && uses != 1 {
            diags.push(
                Diag::new("unbalanced-terms", node_names.get(n.name.as_deref().unwrap_or("")).map(|x| x.1).unwrap_or(p.name.span), format!("the sum `{}` is used {} times", n.name.as_deref().unwrap_or("(unnamed)"), uses))
                    .label("every intermediate sum feeds exactly one later `align`")
                    .help("name it with `as NAME` and use it in a later align; the last align is the result"),
            );
        }
        if last && uses != 0 {
            diags.push(
                Diag::new(
                    "unbalanced-terms",
                    p.name.span,
                    "the last sum is used as a term",
                )
                .label("cycle")
                .help("the last align is the result"),
            );
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }

    // width analysis
    let mut prod = {
        let a = float_bounds(&ctx.a);
        let b = float_bounds(&ctx.b);
        TermBounds {
            min_exp: a.min_exp + b.min_exp,
            max_exp: a.max_exp + b.max_exp,
            sig_bits: 2,
            lsb: a.lsb + b.lsb,
        }
    };
    let scale_b = ctx.scale.as_ref().map(|s| float_bounds(&s.format));
    if scaled_products && let Some(s) = scale_b {
        prod = TermBounds {
            min_exp: prod.min_exp + 2 * s.min_exp,
            max_exp: prod.max_exp + 2 * s.max_exp,
            sig_bits: prod.sig_bits + 2,
            lsb: prod.lsb + 2 * s.lsb,
        };
    }
    let cb = {
        let c = float_bounds(&ctx.c);
        let d = float_bounds(&ctx.d);
        TermBounds {
            min_exp: c.min_exp.min(d.min_exp),
            max_exp: c.max_exp.max(d.max_exp),
            sig_bits: 1,
            lsb: c.lsb.min(d.lsb),
        }
    };
    let group_b = grouping.as_ref().map(|(g, _, _)| {
        let (smin, smax, slsb, sbits) = match (g.scaled, scale_b) {
            (true, Some(s)) => (2 * s.min_exp, 2 * s.max_exp, 2 * s.lsb - 2 * s.min_exp, 2),
            _ => (0, 0, 0, 0),
        };
        // a group's value is the exact sum of its products' values at the scale exponent
        TermBounds {
            min_exp: smin,
            max_exp: smax,
            sig_bits: prod.max_exp + prod.sig_bits + clog2(g.size as usize) + sbits,
            lsb: prod.lsb + slsb.min(0) + smin,
        }
    });
    let mut node_b: Vec<TermBounds> = vec![];
    for n in nodes.iter_mut() {
        let bounds: Vec<(TermBounds, Option<(u32, Rounding)>)> = n
            .terms
            .iter()
            .map(|t| {
                let b = match t.source {
                    TermSource::Products(_) => prod,
                    TermSource::C => cb,
                    TermSource::Groups => group_b.unwrap(),
                    TermSource::Node(i) => node_b[i],
                };
                (b, t.keep)
            })
            .collect();
        let count: usize = n
            .terms
            .iter()
            .map(|t| match t.source {
                TermSource::Products(ProductsPart::All) => chain as usize,
                TermSource::Products(_) => chain.div_ceil(2) as usize,
                TermSource::Groups => (chain / grouping.as_ref().unwrap().0.size) as usize,
                _ => 1,
            })
            .sum();
        let (ref_min, ref_max) = match n.reference {
            Reference::MaxExponent => (
                bounds.iter().map(|(b, _)| b.min_exp).max().unwrap(),
                bounds.iter().map(|(b, _)| b.max_exp).max().unwrap(),
            ),
            Reference::Fixed(r) => (r as i64, r as i64),
        };
        // absolute bounds of the sum's bits
        let hi = bounds
            .iter()
            .map(|(b, _)| b.max_exp + b.sig_bits)
            .max()
            .unwrap()
            .max(ref_max)
            + clog2(count);
        let lo_abs = bounds
            .iter()
            .map(|(b, k)| match k {
                Some((f, _)) => (ref_min - *f as i64).max(b.lsb.min(ref_min - *f as i64)),
                None => b.lsb,
            })
            .min()
            .unwrap();
        let width = match n.reference {
            // relative to a max-exponent reference every kept term lies within
            // sig_bits + F bits of the reference
            Reference::MaxExponent if bounds.iter().all(|(_, k)| k.is_some()) => {
                let rel = bounds
                    .iter()
                    .map(|(b, k)| (b.max_exp - ref_max).max(0) + b.sig_bits + k.unwrap().0 as i64)
                    .max()
                    .unwrap();
                rel + clog2(count) + 1
            }
            _ => hi - lo_abs + 1,
        };
        if width > MAX_WIDTH_BITS as i64 {
            diags.push(
                Diag::new("too-wide", p.name.span, format!("an alignment of pipeline `{}` needs a {width}-bit accumulator", p.name.name))
                    .label(format!("more than {MAX_WIDTH_BITS} bits"))
                    .help("the engines compute exactly and refuse accumulators wider than 4096 bits; keep fewer bits or align to a max exponent"),
            );
            return Err(diags);
        }
        n.width_bits = width as u32;
        let keep_max = bounds
            .iter()
            .filter_map(|(_, k)| k.map(|k| k.0 as i64))
            .max()
            .unwrap_or(0);
        node_b.push(TermBounds {
            min_exp: ref_min,
            max_exp: ref_max,
            sig_bits: hi - ref_max,
            lsb: lo_abs.min(ref_min - keep_max),
        });
    }

    Ok(Pipeline::Fused(Fused {
        chain,
        conditioning: conditioning_of(p),
        scaled_products,
        product_overflow,
        zero_exponent: zero,
        grouping: grouping.map(|(g, _, _)| g),
        nodes,
        normalize,
        zero_sign,
        nan,
    }))
}
