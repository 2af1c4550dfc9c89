//! Integer pipelines: exact integer products (or b1 xor/and) summed with c, wrapped or
//! saturated into d, checked into [`IntegerDot`].

use super::super::eval::{Scope, expect_format, expect_overflow};
use super::super::family::Ctx;
use super::{misplaced, missing_normalize};
use crate::ast::{self, StageKind};
use crate::diagnostic::{Code, Diag};
use crate::ir::*;

pub(super) fn build_integer(
    p: &ast::PipelineDecl,
    scope: &Scope,
    ctx: &Ctx,
) -> Result<Pipeline, Vec<Diag>> {
    let mut diags = vec![];
    let mut op = IntegerOp::Multiply;
    let mut overflow = Overflow::Wrap;
    let mut has_normalize = false;
    for s in &p.stages {
        let r: Result<(), Diag> = (|| {
            match &s.kind {
                StageKind::Multiply {
                    kind,
                    scaled,
                    overflow_at,
                    flush_keep_sign,
                } => {
                    if *scaled || overflow_at.is_some() || *flush_keep_sign {
                        return Err(misplaced(
                            s,
                            "an integer pipeline",
                            "integer products are exact; only `multiply integer|xor|and` applies",
                        ));
                    }
                    op = match kind {
                        ast::MultiplyKind::Integer => IntegerOp::Multiply,
                        ast::MultiplyKind::Xor => IntegerOp::Xor,
                        ast::MultiplyKind::And => IntegerOp::And,
                        _ => {
                            return Err(misplaced(
                                s,
                                "an integer pipeline",
                                "use `multiply integer`",
                            ));
                        }
                    };
                }
                StageKind::SumExact | StageKind::Nan(_) => {}
                StageKind::Normalize {
                    precision: Some(e), ..
                }
                | StageKind::Normalize {
                    rounding: Some(e), ..
                } => {
                    return Err(Diag::new(Code::RoundingNotAllowed, e.span, "integer results are exact: there is nothing to round")
                        .label("no rounding or precision in an integer pipeline")
                        .help("write `normalize to out overflow wrap` or `normalize to out overflow saturate`"));
                }
                StageKind::Normalize {
                    target: ast::NormalizeTarget::To(t),
                    precision: None,
                    rounding: None,
                    overflow: o,
                } => {
                    let f = expect_format(t, scope)?;
                    if f != ctx.d {
                        return Err(Diag::new(
                            Code::Type,
                            t.span,
                            format!("normalizing to `{}` but d is `{}`", f.name, ctx.d.name),
                        )
                        .label("not d's format")
                        .help("write `normalize to out`"));
                    }
                    has_normalize = true;
                    overflow = match o.as_ref().map(|e| (expect_overflow(e, scope), e.span)) {
                        None => Overflow::Wrap,
                        Some((Err(d), _)) => return Err(d),
                        Some((Ok(Overflow::Inf), sp)) => {
                            return Err(Diag::new(
                                Code::BadOverflow,
                                sp,
                                "integers cannot overflow to Inf",
                            )
                            .label("no Inf in integers")
                            .help("use `overflow wrap` or `overflow saturate`"));
                        }
                        Some((Ok(x), _)) => x,
                    };
                }
                _ => {
                    return Err(misplaced(
                        s,
                        "an integer pipeline",
                        "an integer pipeline has: multiply integer|xor|and, sum exact, normalize to out overflow wrap|saturate",
                    ));
                }
            }
            Ok(())
        })();
        if let Err(d) = r {
            diags.push(d);
        }
    }
    for (f, role) in [(&ctx.a, "a"), (&ctx.b, "b"), (&ctx.c, "c"), (&ctx.d, "d")] {
        if f.as_int().is_none() {
            diags.push(
                Diag::new(
                    Code::Type,
                    ctx.uses_span,
                    format!("{role} `{}` is not an integer format", f.name),
                )
                .label("integer pipeline")
                .help("integer pipelines take s4/u4/s8/u8/b1 operands and s32 accumulators"),
            );
        }
    }
    if op != IntegerOp::Multiply && (ctx.a.name != "b1" || ctx.b.name != "b1") {
        diags.push(
            Diag::new(Code::Type, ctx.uses_span, "xor/and popc take b1 operands")
                .label("operands are not b1")
                .help("use `types a = b1, b = b1`"),
        );
    }
    if !has_normalize && diags.is_empty() {
        diags.push(missing_normalize(p));
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    Ok(Pipeline::Integer(IntegerDot { op, overflow }))
}
