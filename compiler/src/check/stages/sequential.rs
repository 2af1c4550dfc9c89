//! Sequential pipelines: rounded IEEE-style steps (FMA chains, FP32 multiply-add trees),
//! checked into [`Sequential`].

use super::super::eval::{Scope, expect_int, in_range};
use super::super::family::Ctx;
use super::{conditioning_of, divisibility, float_of, misplaced, nan_policy, rounded_op};
use crate::ast::{self, StageKind};
use crate::diagnostic::{Code, Diag};
use crate::ir::*;

pub(super) fn build_sequential(
    p: &ast::PipelineDecl,
    scope: &Scope,
    ctx: &Ctx,
) -> Result<Pipeline, Vec<Diag>> {
    let mut diags = vec![];
    let mut product = ProductRule::Exact;
    let mut pairwise = None;
    let mut accumulate = None;
    let mut nan = NanPolicy::Ieee;
    for s in &p.stages {
        let r: Result<(), Diag> = (|| {
            match &s.kind {
                StageKind::Flush { .. } => {}
                StageKind::Multiply {
                    kind,
                    scaled,
                    overflow_at,
                    flush_keep_sign,
                } => {
                    if *scaled || overflow_at.is_some() {
                        return Err(misplaced(
                            s,
                            "a sequential pipeline",
                            "scaled products and product overflow belong to fused pipelines",
                        ));
                    }
                    product = match kind {
                        ast::MultiplyKind::Exact => {
                            if *flush_keep_sign {
                                return Err(Diag::new(Code::MisplacedStage, s.span, "an exact product has nothing to flush")
                                    .label("exact products are never subnormal in a format")
                                    .help("use `multiply round to f32 nearest_even, flush subnormal keep sign`"));
                            }
                            ProductRule::Exact
                        }
                        ast::MultiplyKind::Round { format, rounding } => ProductRule::Rounded(
                            rounded_op(format, rounding, *flush_keep_sign, scope)?,
                        ),
                        _ => unreachable!("integer multiplies select the integer pipeline"),
                    };
                }
                StageKind::Pairwise {
                    size,
                    format,
                    rounding,
                    flush_keep_sign,
                } => {
                    let g = in_range(
                        size,
                        expect_int(size, scope)?,
                        1,
                        1024,
                        "a pairwise group size",
                    )? as u32;
                    if !g.is_power_of_two() {
                        return Err(Diag::new(
                            Code::OutOfRange,
                            size.span,
                            format!("pairwise groups of {g} do not form a binary tree"),
                        )
                        .label("not a power of two")
                        .help("use groups of 2, 4, 8, ..."));
                    }
                    if !ctx.k.is_multiple_of(g) {
                        return Err(divisibility(size.span, ctx.k, g, "pairwise group size"));
                    }
                    pairwise = Some((g, rounded_op(format, rounding, *flush_keep_sign, scope)?));
                }
                StageKind::Accumulate {
                    format,
                    rounding,
                    flush_keep_sign,
                } => {
                    let a = rounded_op(format, rounding, *flush_keep_sign, scope)?;
                    if a.format != ctx.d || ctx.c != ctx.d {
                        return Err(Diag::new(Code::Type, format.span, format!("accumulating in `{}` but c is `{}` and d is `{}`", a.format.name, ctx.c.name, ctx.d.name))
                            .label("accumulator format differs")
                            .help("a sequential pipeline accumulates in the format of c and d; make them the same"));
                    }
                    accumulate = Some(a);
                }
                StageKind::Nan(id) => nan = nan_policy(id)?,
                _ => {
                    return Err(misplaced(
                        s,
                        "a sequential pipeline",
                        "a sequential pipeline has: flush, multiply, add pairwise, accumulate, nan",
                    ));
                }
            }
            Ok(())
        })();
        if let Err(d) = r {
            diags.push(d);
        }
    }
    for (f, role) in [(&ctx.a, "a"), (&ctx.b, "b")] {
        if let Err(d) = float_of(f, ctx.uses_span, role) {
            diags.push(d);
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    Ok(Pipeline::Sequential(Sequential {
        conditioning: conditioning_of(p),
        product,
        pairwise,
        accumulate: accumulate.unwrap(),
        nan,
    }))
}
