//! Pipeline stages: which kind of pipeline a body is (fused, sequential or integer), and
//! the checks every kind shares. Each kind is built into its IR by its own file.

// Diagnostics are plain values passed up by `?`; their size does not matter here.
#![allow(clippy::result_large_err)]

mod fused;
mod integer;
mod sequential;

use fused::build_fused;
use integer::build_integer;
use sequential::build_sequential;

use super::eval::{Scope, expect_format, expect_rounding};
use super::family::Ctx;
use crate::ast::{self, Expr, Ident, StageKind};
use crate::diagnostic::{Diag, Span};
use crate::format::Format;
use crate::ir::*;

pub(super) fn stage_name(k: &StageKind) -> &'static str {
    match k {
        StageKind::Chain { .. } => "chain",
        StageKind::Flush { .. } => "flush",
        StageKind::Multiply { .. } => "multiply",
        StageKind::ZeroExponent { .. } => "zero exponent",
        StageKind::ZeroResult(_) => "zero result",
        StageKind::Group { .. } => "group",
        StageKind::Align { .. } => "align",
        StageKind::SumExact => "sum exact",
        StageKind::Normalize { .. } => "normalize",
        StageKind::Accumulate { .. } => "accumulate",
        StageKind::Pairwise { .. } => "add pairwise",
        StageKind::Nan(_) => "nan",
    }
}

pub(super) fn build_pipeline(
    p: &ast::PipelineDecl,
    scope: &Scope,
    ctx: &Ctx,
) -> Result<Pipeline, Vec<Diag>> {
    let integer = p.stages.iter().any(|s| {
        matches!(
            &s.kind,
            StageKind::Multiply {
                kind: ast::MultiplyKind::Integer | ast::MultiplyKind::Xor | ast::MultiplyKind::And,
                ..
            }
        )
    });
    let sequential = p
        .stages
        .iter()
        .any(|s| matches!(s.kind, StageKind::Accumulate { .. }));
    if integer {
        build_integer(p, scope, ctx)
    } else if sequential {
        build_sequential(p, scope, ctx)
    } else {
        build_fused(p, scope, ctx)
    }
}

pub(super) fn misplaced(s: &ast::Stage, kind: &str, help: &str) -> Diag {
    Diag::new(
        "misplaced-stage",
        s.span,
        format!("`{}` has no meaning in {kind}", stage_name(&s.kind)),
    )
    .label("not allowed here")
    .help(help.to_string())
}

pub(super) fn conditioning_of(p: &ast::PipelineDecl) -> Conditioning {
    let mut c = Conditioning::default();
    for s in &p.stages {
        if let StageKind::Flush { operands } = &s.kind {
            for o in operands {
                match o {
                    ast::Operand::A => c.flush_a = true,
                    ast::Operand::B => c.flush_b = true,
                    ast::Operand::C => c.flush_c = true,
                }
            }
        }
    }
    c
}

pub(super) fn nan_policy(id: &Ident) -> Result<NanPolicy, Diag> {
    match id.name.as_str() {
        "canonical" => Ok(NanPolicy::Canonical),
        "ieee" => Ok(NanPolicy::Ieee),
        _ => Err(Diag::new(
            "unknown-name",
            id.span,
            format!("unknown NaN policy `{}`", id.name),
        )
        .label("not a NaN policy")
        .help("`nan canonical` (the format's canonical NaN) or `nan ieee` (payload not pinned)")),
    }
}

pub(super) fn float_of(f: &Format, span: Span, role: &str) -> Result<(), Diag> {
    if f.as_float().is_none() {
        Err(Diag::new(
            "type",
            span,
            format!("{role} `{}` is an integer format", f.name),
        )
        .label("expected a float format")
        .help("integer operands need an integer pipeline (`multiply integer`)"))
    } else {
        Ok(())
    }
}

pub(super) fn arithmetic(
    format: &Expr,
    rounding: &Expr,
    flush: bool,
    scope: &Scope,
    span: Span,
) -> Result<Arithmetic, Diag> {
    let f = expect_format(format, scope)?;
    float_of(&f, format.span, "arithmetic format")?;
    if !f.as_float().unwrap().has_inf() {
        return Err(Diag::new(
            "type",
            format.span,
            format!("arithmetic in `{}` needs Inf and NaN", f.name),
        )
        .label("no IEEE specials")
        .help("rounded arithmetic steps follow IEEE rules and need a format with Inf and NaN"));
    }
    let _ = span;
    Ok(Arithmetic {
        format: f,
        rounding: expect_rounding(rounding, scope)?,
        flush_keep_sign: flush,
    })
}

pub(super) fn divisibility(span: Span, k: u32, by: u32, what: &str) -> Diag {
    Diag::new(
        "divisibility",
        span,
        format!("K = {k} is not a multiple of the {what} {by}"),
    )
    .label(format!("{by} does not divide {k}"))
    .help(format!(
        "choose a {what} that divides K, or an instruction shape whose K it divides"
    ))
}

pub(super) fn missing_normalize(p: &ast::PipelineDecl) -> Diag {
    Diag::new(
        "missing-normalize",
        p.name.span,
        format!("pipeline `{}` never produces d", p.name.name),
    )
    .label("no `normalize to out`")
    .help("end the pipeline with `normalize to out round MODE`")
}
