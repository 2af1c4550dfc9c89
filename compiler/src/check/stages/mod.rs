//! Pipeline stages: which kind of pipeline a body is (fused, sequential, integer or
//! composed), and the checks every kind shares. Each kind is built into its IR by its own
//! file.

mod composed;
mod fused;
mod integer;
mod sequential;

use composed::build_composed;
use fused::build_fused;
use integer::build_integer;
use sequential::build_sequential;

use super::Env;
use super::eval::{Scope, expect_format, expect_rounding};
use super::family::Ctx;
use crate::ast::{self, Expr, Ident, StageKind};
use crate::diagnostic::{Code, Diag, Span};
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
        StageKind::Convert { .. } => "convert",
        StageKind::Let { .. } => "let",
        StageKind::Result(_) => "result",
        StageKind::Repeat { .. } => "for",
        StageKind::Coverage => "coverage",
    }
}

/// The three kinds of pipeline, told apart by their stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::check) enum Kind {
    /// Exact products, alignment, one exact sum, normalisation.
    Fused,
    /// Rounded steps ending in `accumulate`.
    Sequential,
    /// `multiply integer|xor|and`.
    Integer,
    /// `let` steps that run other arithmetic: `convert`, `let`, `for`, `result`.
    Composed,
}

impl Kind {
    pub(in crate::check) fn of(p: &ast::PipelineDecl) -> Kind {
        let integer = p.stages.iter().any(|s| {
            matches!(
                &s.kind,
                StageKind::Multiply {
                    kind: ast::MultiplyKind::Integer
                        | ast::MultiplyKind::Xor
                        | ast::MultiplyKind::And,
                    ..
                }
            )
        });
        let composed = p.stages.iter().any(|s| {
            matches!(
                s.kind,
                StageKind::Let { .. }
                    | StageKind::Result(_)
                    | StageKind::Convert { .. }
                    | StageKind::Repeat { .. }
                    | StageKind::Coverage
            )
        });
        if composed {
            Kind::Composed
        } else if integer {
            Kind::Integer
        } else if p
            .stages
            .iter()
            .any(|s| matches!(s.kind, StageKind::Accumulate { .. }))
        {
            Kind::Sequential
        } else {
            Kind::Fused
        }
    }

    /// Which operands must be float formats (the others integers).
    fn float_operands(self) -> &'static [char] {
        match self {
            Kind::Fused => &['a', 'b', 'c', 'd'],
            Kind::Sequential => &['a', 'b'],
            Kind::Integer | Kind::Composed => &[],
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Fused => "a fused pipeline",
            Kind::Sequential => "a sequential pipeline",
            Kind::Integer => "an integer pipeline",
            Kind::Composed => "a composed pipeline",
        }
    }
}

/// Do the instruction's operand types suit the pipeline's kind? Checked before the
/// pipeline's defaults are evaluated, so that `P = out.mantissa` on an integer `out` is
/// reported as what it is: integer operands in a float pipeline.
pub(in crate::check) fn check_operand_kinds(
    kind: Kind,
    pipeline: &str,
    types: &[(char, &Format)],
    span: Span,
) -> Vec<Diag> {
    let wrong: Vec<String> = types
        .iter()
        .filter(|(op, f)| {
            let is_float = f.as_float().is_some();
            (kind.float_operands().contains(op) && !is_float) || (kind == Kind::Integer && is_float)
        })
        .map(|(op, f)| format!("{op} = {}", f.name))
        .collect();
    if wrong.is_empty() {
        return vec![];
    }
    let (want, help) = if kind == Kind::Integer {
        (
            "integer formats",
            "float operands need a fused or sequential pipeline, e.g. std's `t_fdpa` or `fma`",
        )
    } else {
        (
            "float formats",
            "integer operands need an integer pipeline (`multiply integer`), e.g. std's `int_mma`",
        )
    };
    vec![
        Diag::new(
            Code::Type,
            span,
            format!(
                "`{pipeline}` is {} of {want}, but the instruction has {}",
                kind.describe(),
                wrong.join(", ")
            ),
        )
        .label(format!("needs {want}"))
        .help(help),
    ]
}

/// A pipeline's IR and the provenance of its parts.
pub(in crate::check) struct Built {
    pub(in crate::check) pipeline: Pipeline,
    /// A fused pipeline's alignment names.
    pub(in crate::check) node_names: Vec<Option<String>>,
    /// A composed pipeline's steps.
    pub(in crate::check) steps: Vec<StepProvenance>,
}

impl Built {
    fn plain(pipeline: Pipeline) -> Built {
        Built {
            pipeline,
            node_names: vec![],
            steps: vec![],
        }
    }
}

/// Build the pipeline's IR.
pub(in crate::check) fn build_pipeline(
    p: &ast::PipelineDecl,
    scope: &Scope,
    ctx: &Ctx,
    env: &Env,
) -> Result<Built, Vec<Diag>> {
    match Kind::of(p) {
        Kind::Integer => build_integer(p, scope, ctx).map(Built::plain),
        Kind::Sequential => build_sequential(p, scope, ctx).map(Built::plain),
        Kind::Fused => build_fused(p, scope, ctx).map(|(pipeline, node_names)| Built {
            pipeline,
            node_names,
            steps: vec![],
        }),
        Kind::Composed => build_composed(p, scope, ctx, env),
    }
}

pub(super) fn misplaced(s: &ast::Stage, kind: &str, help: &str) -> Diag {
    Diag::new(
        Code::MisplacedStage,
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

pub(crate) fn nan_policy(id: &Ident) -> Result<NanPolicy, Diag> {
    match NanPolicy::ALL.into_iter().find(|p| p.word() == id.name) {
        Some(p) => Ok(p),
        None => Err(Diag::new(
            Code::UnknownName,
            id.span,
            format!("unknown NaN policy `{}`", id.name),
        )
        .label("not a NaN policy")
        .help("`canonical` (the format's canonical NaN), `ieee` (payload not pinned), `propagate_c_first` or `propagate_products_first` (the first input NaN, quieted)")),
    }
}

pub(super) fn float_of(f: &Format, span: Span, role: &str) -> Result<(), Diag> {
    if f.as_float().is_none() {
        Err(Diag::new(
            Code::Type,
            span,
            format!("{role} `{}` is an integer format", f.name),
        )
        .label("expected a float format")
        .help("integer operands need an integer pipeline (`multiply integer`)"))
    } else {
        Ok(())
    }
}

pub(super) fn rounded_op(
    format: &Expr,
    rounding: &Expr,
    flush: bool,
    scope: &Scope,
) -> Result<RoundedOp, Diag> {
    let f = expect_format(format, scope)?;
    float_of(&f, format.span, "arithmetic format")?;
    if !f.as_float().unwrap().has_inf() {
        return Err(Diag::new(
            Code::Type,
            format.span,
            format!("arithmetic in `{}` needs Inf and NaN", f.name),
        )
        .label("no IEEE specials")
        .help("rounded arithmetic steps follow IEEE rules and need a format with Inf and NaN"));
    }
    Ok(RoundedOp {
        format: f,
        rounding: expect_rounding(rounding, scope)?,
        flush_keep_sign: flush,
    })
}

pub(super) fn divisibility(span: Span, k: u32, by: u32, what: &str) -> Diag {
    Diag::new(
        Code::Divisibility,
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
        Code::MissingNormalize,
        p.name.span,
        format!("pipeline `{}` never produces d", p.name.name),
    )
    .label("no `normalize to out`")
    .help("end the pipeline with `normalize to out round MODE`")
}
