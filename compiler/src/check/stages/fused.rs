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

/// Check fused pipeline `p` for `ctx`: its IR and the names of its alignment nodes.
pub(super) fn build_fused(
    p: &ast::PipelineDecl,
    scope: &Scope,
    ctx: &Ctx,
) -> Result<(Pipeline, Vec<Option<String>>), Vec<Diag>> {
    check_operand_formats(ctx)?;
    let mut fused = FusedBuilder::new(scope, ctx);
    let diags: Vec<Diag> = p
        .stages
        .iter()
        .filter_map(|s| fused.stage(s).err())
        .collect();
    fail_if_any(diags)?;
    fail_if_any(fused.missing_parts(p))?;
    fail_if_any(fused.unbalanced_terms(p))?;
    Ok(fused.finish(p))
}

/// `Err(diags)` when there are any.
fn fail_if_any(diags: Vec<Diag>) -> Result<(), Vec<Diag>> {
    if diags.is_empty() { Ok(()) } else { Err(diags) }
}

/// The operands of a fused pipeline are floats, and d has Inf and NaN.
fn check_operand_formats(ctx: &Ctx) -> Result<(), Vec<Diag>> {
    let diags: Vec<Diag> = [(&ctx.a, "a"), (&ctx.b, "b"), (&ctx.c, "c"), (&ctx.d, "d")]
        .into_iter()
        .filter_map(|(f, role)| float_of(f, ctx.uses_span, role).err())
        .collect();
    fail_if_any(diags)?;
    if !ctx.d.as_float().unwrap().has_inf() {
        return Err(vec![
            Diag::new(Code::Type, ctx.uses_span, format!("d `{}` has no Inf and NaN", ctx.d.name))
                .label("unsupported output format")
                .help("fused pipelines produce IEEE-style results: use an output format with Inf and NaN (f16, bf16, f32, ...)"),
        ]);
    }
    Ok(())
}

/// `keep F bits round MODE`: the fraction bits kept and their rounding.
fn resolve_keep(kr: &ast::KeepRound, scope: &Scope) -> Result<(u32, Rounding), Diag> {
    let f = expect_int(&kr.keep, scope)?;
    let f = in_range(&kr.keep, f, 0, MAX_F, "F (fraction bits kept)")?;
    Ok((f as u32, expect_rounding(&kr.round, scope)?))
}

/// A term kept exact (a term of `sum exact`).
fn exact_term(source: TermSource) -> AlignTerm {
    AlignTerm {
        source,
        keep: None,
        drop_below: None,
    }
}

/// A fused pipeline being checked, stage by stage: what the stages so far have said.
struct FusedBuilder<'a> {
    scope: &'a Scope<'a>,
    ctx: &'a Ctx,
    chain: u32,
    scaled_products: bool,
    product_overflow: Option<i32>,
    zero: ZeroExponents,
    /// The grouping, with the name of its groups and where they are named.
    grouping: Option<(Grouping, String, Span)>,
    nodes: Vec<AlignNode>,
    /// The named alignment nodes: their index and where they are named.
    node_names: HashMap<String, (usize, Span)>,
    /// The name of every alignment node, in order.
    node_name_list: Vec<Option<String>>,
    normalize: Vec<NormalizeStep>,
    zero_sign: ZeroSign,
    nan: NanPolicy,
    multiply_seen: bool,
}

impl<'a> FusedBuilder<'a> {
    /// Nothing said yet: one chain of all of K, natural zero exponents, IEEE-style zeros.
    fn new(scope: &'a Scope<'a>, ctx: &'a Ctx) -> Self {
        FusedBuilder {
            scope,
            ctx,
            chain: ctx.k,
            scaled_products: false,
            product_overflow: None,
            zero: ZeroExponents {
                products: ZeroExponent::Natural,
                c: ZeroExponent::Natural,
                groups: ZeroExponent::Natural,
            },
            grouping: None,
            nodes: vec![],
            node_names: HashMap::new(),
            node_name_list: vec![],
            normalize: vec![],
            zero_sign: ZeroSign::Positive,
            nan: NanPolicy::Canonical,
            multiply_seen: false,
        }
    }

    /// Check one stage and record what it says.
    fn stage(&mut self, s: &ast::Stage) -> Result<(), Diag> {
        if !self.normalize.is_empty()
            && !matches!(
                s.kind,
                StageKind::Normalize { .. } | StageKind::Nan(_) | StageKind::ZeroResult(_)
            )
        {
            return Err(Diag::new(
                Code::StageOrder,
                s.span,
                format!("`{}` after `normalize`", stage_name(&s.kind)),
            )
            .label("the sum is already normalised here")
            .help(
                "stages run in order: conditioning, products, grouping, alignment, normalisation",
            ));
        }
        match &s.kind {
            StageKind::Chain { length, bytes } => self.chain = self.chain_length(length, *bytes)?,
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
                self.multiply_seen = true;
                self.scaled_products = *scaled;
                if let Some(e) = overflow_at {
                    self.product_overflow = Some(power_of_two(e, self.scope)?);
                }
            }
            StageKind::ZeroExponent { exponent, class } => {
                let z = self.zero_exponent(exponent.as_ref())?;
                match class {
                    None => {
                        self.zero = ZeroExponents {
                            products: z,
                            c: z,
                            groups: z,
                        }
                    }
                    Some(ast::TermClass::Products) => self.zero.products = z,
                    Some(ast::TermClass::C) => self.zero.c = z,
                    Some(ast::TermClass::Groups) => self.zero.groups = z,
                }
            }
            StageKind::ZeroResult(id) => self.zero_sign = zero_result_rule(id)?,
            StageKind::Group { size, scaled, name } => {
                let grouping = self.grouping(size, *scaled)?;
                self.grouping = Some((grouping, name.name.clone(), name.span));
            }
            StageKind::Align {
                terms,
                reference,
                keep_round,
                name,
            } => self.align(terms, reference, keep_round.as_ref(), name.as_ref())?,
            StageKind::SumExact => self.sum_exact(),
            StageKind::Normalize {
                target,
                precision,
                rounding,
                overflow,
            } => {
                let step = self.normalize_step(
                    s.span,
                    target,
                    precision.as_ref(),
                    rounding.as_ref(),
                    overflow.as_ref(),
                )?;
                self.normalize.push(step);
            }
            StageKind::Nan(id) => self.nan = nan_policy(id)?,
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
    }

    /// `chain L [bytes]`: the chain length in elements, at most K and dividing it.
    fn chain_length(&self, length: &ast::Expr, bytes: bool) -> Result<u32, Diag> {
        let (scope, ctx) = (self.scope, self.ctx);
        let mut l = in_range(
            length,
            expect_int(length, scope)?,
            1,
            1 << 20,
            "a chain length",
        )?;
        if bytes {
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
        Ok(l)
    }

    /// `zero exponent E` (or `never`): the exponent a zero term takes.
    fn zero_exponent(&self, exponent: Option<&ast::Expr>) -> Result<ZeroExponent, Diag> {
        Ok(match exponent {
            None => ZeroExponent::Never,
            Some(e) => ZeroExponent::Fixed(in_range(
                e,
                expect_int(e, self.scope)?,
                -100_000,
                100_000,
                "a zero exponent",
            )? as i32),
        })
    }

    /// `group G products exact [, scaled]`: groups that divide the chain and lie inside
    /// one scale block.
    fn grouping(&self, size: &ast::Expr, scaled: bool) -> Result<Grouping, Diag> {
        let g = in_range(
            size,
            expect_int(size, self.scope)?,
            1,
            1 << 16,
            "a group size",
        )? as u32;
        if !self.chain.is_multiple_of(g) {
            return Err(divisibility(size.span, self.chain, g, "group size"));
        }
        if let Some(sc) = &self.ctx.scale
            && scaled
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
        Ok(Grouping { size: g, scaled })
    }

    /// `align TERMS to REFERENCE [keep ...] [as NAME]`: one more alignment node.
    fn align(
        &mut self,
        terms: &[ast::AlignTerm],
        reference: &ast::Reference,
        keep_round: Option<&ast::KeepRound>,
        name: Option<&ast::Ident>,
    ) -> Result<(), Diag> {
        let default_keep = keep_round
            .map(|kr| resolve_keep(kr, self.scope))
            .transpose()?;
        let terms = terms
            .iter()
            .map(|t| self.align_term(t, default_keep))
            .collect::<Result<Vec<_>, _>>()?;
        let reference = match reference {
            ast::Reference::MaxExponent => Reference::MaxExponent,
            ast::Reference::Fixed(e) => Reference::Fixed(in_range(
                e,
                expect_int(e, self.scope)?,
                -100_000,
                100_000,
                "a reference exponent",
            )? as i32),
        };
        if let Some(n) = name {
            if let Some((_, prev)) = self.node_names.get(&n.name) {
                return Err(Diag::new(
                    Code::DuplicateName,
                    n.span,
                    format!("`{}` is already defined", n.name),
                )
                .label("defined again")
                .also(*prev, "first here")
                .help("give each alignment its own name"));
            }
            self.node_names
                .insert(n.name.clone(), (self.nodes.len(), n.span));
        }
        self.node_name_list.push(name.map(|n| n.name.clone()));
        self.nodes.push(AlignNode { terms, reference });
        Ok(())
    }

    /// One term of an `align`: its source, the bits it keeps (its own `keep`, else the
    /// alignment's) and where it is dropped.
    fn align_term(
        &self,
        t: &ast::AlignTerm,
        default_keep: Option<(u32, Rounding)>,
    ) -> Result<AlignTerm, Diag> {
        let source = self.term_source(&t.source)?;
        let keep = match &t.keep_round {
            Some(kr) => Some(resolve_keep(kr, self.scope)?),
            None => default_keep,
        };
        if keep.is_none() {
            return Err(Diag::new(Code::MissingKeep, t.span, "how many bits does this term keep?")
                .label("no `keep F bits round MODE`")
                .help("add `keep F bits round MODE` after the term or after the reference; for an exact sum use `sum exact`"));
        }
        let drop_below = match &t.drop_below {
            Some(e) => {
                Some(in_range(e, expect_int(e, self.scope)?, 0, 100_000, "a drop distance")? as u32)
            }
            None => None,
        };
        Ok(AlignTerm {
            source,
            keep,
            drop_below,
        })
    }

    /// What a term names: products, c, the groups, or an earlier alignment node.
    fn term_source(&self, source: &ast::Source) -> Result<TermSource, Diag> {
        Ok(match source {
            ast::Source::Products(part) => TermSource::Products(match part {
                ast::ProductsPart::All => ProductsPart::All,
                ast::ProductsPart::Even => ProductsPart::Even,
                ast::ProductsPart::Odd => ProductsPart::Odd,
            }),
            ast::Source::Named(id) if id.name == "c" => TermSource::C,
            ast::Source::Named(id) => {
                if let Some((idx, _)) = self.node_names.get(&id.name) {
                    TermSource::Node(NodeId::new(*idx))
                } else if self
                    .grouping
                    .as_ref()
                    .is_some_and(|(_, g, _)| *g == id.name)
                {
                    TermSource::Groups
                } else {
                    return Err(self.unknown_source(id));
                }
            }
        })
    }

    /// A term names no source defined before its stage.
    fn unknown_source(&self, id: &ast::Ident) -> Diag {
        let mut cands: Vec<&str> = self.node_names.keys().map(|s| s.as_str()).collect();
        cands.push("c");
        cands.push("products");
        if let Some((_, g, _)) = &self.grouping {
            cands.push(g);
        }
        let d = Diag::new(
            Code::UnknownName,
            id.span,
            format!("no term source named `{}`", id.name),
        )
        .label("not defined before this stage");
        match closest(&id.name, cands) {
            Some(c) => d.help(format!("did you mean `{c}`? sources are products, products.even, products.odd, c, a group, or an earlier `align ... as NAME`")),
            None => d.help("sources are products, products.even, products.odd, c, a group, or an earlier `align ... as NAME`"),
        }
    }

    /// `sum exact`: when nothing is aligned yet, one exact node of the products (or the
    /// groups) and c.
    fn sum_exact(&mut self) {
        if self.nodes.is_empty() {
            let products = if self.grouping.is_some() {
                TermSource::Groups
            } else {
                TermSource::Products(ProductsPart::All)
            };
            self.node_name_list.push(None);
            self.nodes.push(AlignNode {
                terms: vec![exact_term(products), exact_term(TermSource::C)],
                reference: Reference::MaxExponent,
            });
        }
    }

    /// `normalize to FORMAT ...` (the final step, into d) or `normalize range FORMAT
    /// precision P ...` (an intermediate one).
    fn normalize_step(
        &self,
        span: Span,
        target: &ast::NormalizeTarget,
        precision: Option<&ast::Expr>,
        rounding: Option<&ast::Expr>,
        overflow: Option<&ast::Expr>,
    ) -> Result<NormalizeStep, Diag> {
        let scope = self.scope;
        let (fmt_expr, final_step) = match target {
            ast::NormalizeTarget::To(e) => (e, true),
            ast::NormalizeTarget::Range(e) => (e, false),
        };
        let f = expect_format(fmt_expr, scope)?;
        float_of(&f, fmt_expr.span, "normalisation format")?;
        let ff = f.as_float().unwrap().clone();
        if final_step && f != self.ctx.d {
            return Err(Diag::new(Code::Type, fmt_expr.span, format!("normalizing to `{}` but d is `{}`", f.name, self.ctx.d.name))
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
                    span,
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
                    span,
                    "normalisation needs a rounding mode",
                )
                .label("no `round MODE`")
                .help("add `round toward_zero`, `round nearest_even`, ..."));
            }
        };
        let overflow = float_overflow(overflow, scope)?;
        if let Some(last) = self.normalize.last()
            && last.max_exponent.is_some()
        {
            return Err(Diag::new(
                Code::StageOrder,
                span,
                "normalisation after the final `normalize to out`",
            )
            .label("d is already produced")
            .help("intermediate steps (`normalize range ...`) come before `normalize to out`"));
        }
        Ok(NormalizeStep {
            min_exponent: ff.min_exponent(),
            max_exponent: final_step.then_some(ff.max_exponent()),
            fraction_bits,
            rounding,
            overflow,
        })
    }

    /// The stages every fused pipeline needs (products, a sum, the final normalisation),
    /// and scale factors applied exactly when the instruction has them.
    fn missing_parts(&self, p: &ast::PipelineDecl) -> Vec<Diag> {
        let mut diags = vec![];
        if !self.multiply_seen {
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
        if self.nodes.is_empty() {
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
        if self
            .normalize
            .last()
            .is_none_or(|n| n.max_exponent.is_none())
        {
            diags.push(missing_normalize(p));
        }
        let ctx = self.ctx;
        let scale_used =
            self.scaled_products || self.grouping.as_ref().is_some_and(|(g, _, _)| g.scaled);
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
        diags
    }

    /// Every term consumed exactly once: the products (or groups), c, and every
    /// intermediate sum; the last sum is the result.
    fn unbalanced_terms(&self, p: &ast::PipelineDecl) -> Vec<Diag> {
        let mut diags = vec![];
        let mut use_count: HashMap<TermSource, usize> = HashMap::new();
        for n in &self.nodes {
            for t in &n.terms {
                *use_count.entry(t.source).or_default() += 1;
            }
        }
        let count = |s: TermSource| use_count.get(&s).copied().unwrap_or(0);
        if let Some(msg) = self.unbalanced_products(count) {
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
        for (i, name) in self.node_name_list.iter().enumerate() {
            let uses = count(TermSource::Node(NodeId::new(i)));
            let last = i + 1 == self.nodes.len();
            if !last && uses != 1 {
                diags.push(
                    Diag::new(Code::UnbalancedTerms, self.node_names.get(name.as_deref().unwrap_or("")).map(|x| x.1).unwrap_or(p.name.span), format!("the sum `{}` is used {} times", name.as_deref().unwrap_or("(unnamed)"), uses))
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
        diags
    }

    /// What is wrong with how the products (or groups) are consumed, given how many
    /// times each source is used; None when each is added exactly once.
    fn unbalanced_products(&self, count: impl Fn(TermSource) -> usize) -> Option<&'static str> {
        let all = count(TermSource::Products(ProductsPart::All));
        let even = count(TermSource::Products(ProductsPart::Even));
        let odd = count(TermSource::Products(ProductsPart::Odd));
        if self.grouping.is_some() {
            if all + even + odd > 0 {
                Some("products are grouped; align the group instead of the products")
            } else if count(TermSource::Groups) != 1 {
                Some("each group must be aligned exactly once")
            } else {
                None
            }
        } else if !((all == 1 && even == 0 && odd == 0) || (all == 0 && even == 1 && odd == 1)) {
            Some(
                "every product must be added exactly once: `products` once, or `products.even` and `products.odd` once each",
            )
        } else {
            None
        }
    }

    /// The checked pipeline and the names of its alignment nodes.
    fn finish(self, p: &ast::PipelineDecl) -> (Pipeline, Vec<Option<String>>) {
        let pipeline = Pipeline::Fused(Fused {
            chain: self.chain,
            conditioning: conditioning_of(p),
            scaled_products: self.scaled_products,
            product_overflow: self.product_overflow,
            zero_exponent: self.zero,
            grouping: self.grouping.map(|(g, _, _)| g),
            nodes: self.nodes,
            normalize: self.normalize,
            zero_sign: self.zero_sign,
            nan: self.nan,
        });
        (pipeline, self.node_name_list)
    }
}

/// `zero result positive | exact_positive`: the sign of a zero result.
fn zero_result_rule(id: &ast::Ident) -> Result<ZeroSign, Diag> {
    match id.name.as_str() {
        "positive" => Ok(ZeroSign::Positive),
        "exact_positive" => Ok(ZeroSign::ExactPositive),
        _ => Err(Diag::new(Code::UnknownName, id.span, format!("unknown zero-result rule `{}`", id.name))
            .label("not a rule")
            .help("`zero result positive` (every zero is +0) or `zero result exact_positive` (exact zeros are +0, underflows keep their sign)")),
    }
}

/// `overflow RULE` of a normalisation: Inf when not given; floats cannot wrap.
fn float_overflow(overflow: Option<&ast::Expr>, scope: &Scope) -> Result<Overflow, Diag> {
    match overflow.map(|e| (expect_overflow(e, scope), e.span)) {
        None => Ok(Overflow::Inf),
        Some((Err(d), _)) => Err(d),
        Some((Ok(Overflow::Wrap), sp)) => {
            Err(Diag::new(Code::BadOverflow, sp, "floats cannot wrap")
                .label("wrap is for integers")
                .help("use `overflow inf` or `overflow saturate`"))
        }
        Some((Ok(x), _)) => Ok(x),
    }
}
