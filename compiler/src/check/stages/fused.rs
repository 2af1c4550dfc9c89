//! Fused pipelines: exact products, groups, alignment nodes and normalisation steps,
//! checked into [`Fused`]: every stage in order, every term consumed exactly once.

use super::super::eval::{
    Scope, expect_format, expect_int, expect_overflow, expect_rounding, in_range, power_of_two,
};
use super::super::family::Ctx;
use super::{conditioning_of, divisibility, float_of, missing_normalize, nan_policy, stage_name};
use crate::ast::{self, StageKind};
use crate::diagnostic::{Code, Diag, Span, closest};
use crate::exact::Rounding;
use crate::ir::*;
use std::collections::HashMap;

pub(super) fn build_fused(
    p: &ast::PipelineDecl,
    scope: &Scope,
    ctx: &Ctx,
) -> Result<(Pipeline, Vec<Option<String>>), Vec<Diag>> {
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
    let mut node_name_list: Vec<Option<String>> = vec![];
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
            Diag::new(Code::Type, ctx.uses_span, format!("d `{}` has no Inf and NaN", ctx.d.name))
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
                return Err(Diag::new(Code::StageOrder, s.span, format!("`{}` after `normalize`", stage_name(&s.kind)))
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
                                Code::Divisibility,
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
                        return Err(Diag::new(Code::MisplacedStage, s.span, "fused pipelines take exact products")
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
                            return Err(Diag::new(Code::UnknownName, id.span, format!("unknown zero-result rule `{}`", id.name))
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
                            Code::Divisibility,
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
                                        Code::UnknownName,
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
                            return Err(Diag::new(Code::MissingKeep, t.span, "how many bits does this term keep?")
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
                                Code::DuplicateName,
                                n.span,
                                format!("`{}` is already defined", n.name),
                            )
                            .label("defined again")
                            .also(*prev, "first here")
                            .help("give each alignment its own name"));
                        }
                        node_names.insert(n.name.clone(), (nodes.len(), n.span));
                    }
                    node_name_list.push(name.as_ref().map(|n| n.name.clone()));
                    nodes.push(AlignNode {
                        terms: out,
                        reference,
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
                        node_name_list.push(None);
                        nodes.push(AlignNode {
                            terms,
                            reference: Reference::MaxExponent,
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
                        return Err(Diag::new(Code::Type, fmt_expr.span, format!("normalizing to `{}` but d is `{}`", f.name, ctx.d.name))
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
                                Code::MissingPrecision,
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
                                Code::MissingRounding,
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
                            return Err(Diag::new(Code::BadOverflow, sp, "floats cannot wrap")
                                .label("wrap is for integers")
                                .help("use `overflow inf` or `overflow saturate`"));
                        }
                        Some((Ok(x), _)) => x,
                    };
                    if let Some(last) = normalize.last()
                        && last.max_exponent.is_some()
                    {
                        return Err(Diag::new(Code::StageOrder, s.span, "normalisation after the final `normalize to out`")
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
                StageKind::Convert { .. }
                | StageKind::Let { .. }
                | StageKind::Result(_)
                | StageKind::Repeat { .. }
                | StageKind::Coverage => {
                    unreachable!("composed stages select the composed pipeline")
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
                Code::MissingStage,
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
                Code::MissingStage,
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
            Diag::new(Code::ScaleUnused, ctx.uses_span, format!("`{}` has scale factors, but pipeline `{}` never applies them", ctx.instruction, p.name.name))
                .label("scales ignored")
                .help("use `multiply exact, scaled` (per product) or `group G products exact, scaled as NAME` (per group)"),
        ),
        (None, true) => diags.push(
            Diag::new(Code::ScaleMissing, ctx.uses_span, format!("pipeline `{}` applies scale factors, but `{}` has none", p.name.name, ctx.instruction))
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
            Diag::new(Code::UnbalancedTerms, p.name.span, msg.to_string())
                .label("in this pipeline")
                .help("check the `align` stages"),
        );
    }
    if count(TermSource::C) != 1 {
        diags.push(
            Diag::new(
                Code::UnbalancedTerms,
                p.name.span,
                format!("c is added {} times", count(TermSource::C)),
            )
            .label("in this pipeline")
            .help("the accumulator c must appear in exactly one `align` (or `sum exact`)"),
        );
    }
    for (i, name) in node_name_list.iter().enumerate() {
        let uses = count(TermSource::Node(i));
        let last = i + 1 == nodes.len();
        if !last && uses != 1 {
            diags.push(
                Diag::new(Code::UnbalancedTerms, node_names.get(name.as_deref().unwrap_or("")).map(|x| x.1).unwrap_or(p.name.span), format!("the sum `{}` is used {} times", name.as_deref().unwrap_or("(unnamed)"), uses))
                    .label("every intermediate sum feeds exactly one later `align`")
                    .help("name it with `as NAME` and use it in a later align; the last align is the result"),
            );
        }
        if last && uses != 0 {
            diags.push(
                Diag::new(
                    Code::UnbalancedTerms,
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

    let pipeline = Pipeline::Fused(Fused {
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
    });
    Ok((pipeline, node_name_list))
}
