//! Composed pipelines: an instruction built from other instructions' arithmetic. The
//! body converts operands (`convert a, b to f16 round nearest_even`), runs an instruction
//! of the spec, or a pipeline, over a subset of the k positions (`let p = run inner over
//! k mod 4 in [0, 1] with c = 0`), adds or fuses values in a stated format and rounding
//! (`let d = add p, c in out round nearest_even`), repeats steps in `for` loops (unrolled
//! here), and names the value that is d (`result d`). Checked into [`Composed`]: the
//! formats of every run and value, the shapes (a run takes exactly its k positions), and
//! the k coverage (each position used by exactly one run, unless `coverage any`).

use super::super::Env;
use super::super::eval::{
    Scope, Value, eval, expect_format, expect_int, expect_overflow, expect_rounding, in_range,
};
use super::super::family::{Ctx, instantiate_pipeline};
use super::{Built, float_of, rounded_op, stage_name};
use crate::ast::{self, KClause, RunTarget, StageKind, StepExpr, ValueRef};
use crate::diagnostic::{Code, Diag, Span, closest};
use crate::format::Format;
use crate::ir::*;
use std::collections::HashMap;

/// The most steps a composed pipeline may have once its loops are unrolled.
const MAX_STEPS: usize = 4096;
/// Stages visited while unrolling, at most.
const MAX_VISITED: usize = 4 * MAX_STEPS;

/// What the walk over the body has built so far.
struct State<'c> {
    ctx: &'c Ctx,
    convert: [Option<Conversion>; 3],
    steps: Vec<Step>,
    provenance: Vec<StepProvenance>,
    /// `let` names and what they are bound to now.
    values: HashMap<String, StepValue>,
    /// How many runs use each k position.
    used: Vec<u32>,
    coverage_any: bool,
    result: Option<(StepValue, Span)>,
    diags: Vec<Diag>,
    /// Stages visited so far, loops unrolled (a step or not: nested loops of `let`
    /// aliases unroll as long as loops of runs).
    visited: usize,
}

impl State<'_> {
    /// The operands' formats now (after conversions): a, b, c.
    fn format(&self, operand: usize) -> &Format {
        match &self.convert[operand] {
            Some(c) => &c.format,
            None => match operand {
                0 => &self.ctx.a,
                1 => &self.ctx.b,
                _ => &self.ctx.c,
            },
        }
    }

    fn composed(&self) -> Composed {
        Composed {
            convert_a: self.convert[0].clone(),
            convert_b: self.convert[1].clone(),
            convert_c: self.convert[2].clone(),
            steps: self.steps.clone(),
            result: StepValue::Zero { negative: false },
        }
    }

    /// The format of a value (`None` for a zero).
    fn format_of(&self, v: StepValue) -> Option<Format> {
        match v {
            StepValue::C => Some(self.format(2).clone()),
            StepValue::Zero { .. } => None,
            StepValue::Step(i) => Some(match &self.steps[i] {
                Step::Run { arithmetic, .. } => arithmetic.d.clone(),
                Step::Add { op, .. } | Step::Fma { op, .. } => op.format.clone(),
            }),
        }
    }

    fn value(&self, r: &ValueRef) -> Result<StepValue, Diag> {
        match r {
            ValueRef::Zero { negative, .. } => Ok(StepValue::Zero {
                negative: *negative,
            }),
            ValueRef::Name(id) => {
                if let Some(v) = self.values.get(&id.name) {
                    return Ok(*v);
                }
                if id.name == "c" {
                    return Ok(StepValue::C);
                }
                let d = Diag::new(
                    Code::UnknownName,
                    id.span,
                    format!("no value named `{}`", id.name),
                )
                .label("not bound by an earlier `let`");
                let mut names: Vec<&str> = self.values.keys().map(|s| s.as_str()).collect();
                names.push("c");
                Err(match closest(&id.name, names) {
                    Some(c) => d.help(format!(
                        "did you mean `{c}`? values are c, 0 and the names of earlier `let`s"
                    )),
                    None => d.help("values are c, 0 and the names of earlier `let`s"),
                })
            }
        }
    }
}

pub(super) fn build_composed(
    p: &ast::PipelineDecl,
    scope: &Scope,
    ctx: &Ctx,
    env: &Env,
) -> Result<Built, Vec<Diag>> {
    let mut state = State {
        ctx,
        convert: [None, None, None],
        steps: vec![],
        provenance: vec![],
        values: HashMap::new(),
        used: vec![0; ctx.k as usize],
        coverage_any: false,
        visited: 0,
        result: None,
        diags: vec![],
    };
    if ctx.scale.is_some() {
        state.diags.push(
            Diag::new(
                Code::Type,
                ctx.uses_span,
                format!(
                    "`{}` has scale factors; composed pipelines take none",
                    ctx.instruction
                ),
            )
            .label("block-scaled")
            .help("compose instructions without scale factors"),
        );
        return Err(state.diags);
    }
    walk(&p.stages, scope, env, &mut state);
    if !state.diags.is_empty() {
        return Err(state.diags);
    }
    let Some((result, _)) = state.result else {
        return Err(vec![
            Diag::new(
                Code::MissingStage,
                p.name.span,
                format!("pipeline `{}` never says which value is d", p.name.name),
            )
            .label("no `result NAME`")
            .help("end the pipeline with `result NAME`, NAME a `let` whose value is in d's format"),
        ]);
    };
    if !state.coverage_any {
        let unused: Vec<String> = (0..ctx.k)
            .filter(|&k| state.used[k as usize] == 0)
            .map(|k| k.to_string())
            .collect();
        let twice: Vec<String> = (0..ctx.k)
            .filter(|&k| state.used[k as usize] > 1)
            .map(|k| k.to_string())
            .collect();
        for (list, what) in [(unused, "no run uses"), (twice, "several runs use")] {
            if !list.is_empty() {
                state.diags.push(
                    Diag::new(
                        Code::UnbalancedTerms,
                        p.name.span,
                        format!(
                            "{what} k = {} of `{}`",
                            list.join(", "),
                            ctx.instruction
                        ),
                    )
                    .label("k positions not used exactly once")
                    .help("every k position goes to exactly one `run`; write `coverage any` if that is intended"),
                );
            }
        }
        if !state.diags.is_empty() {
            return Err(state.diags);
        }
    }
    let mut composed = state.composed();
    composed.result = result;
    Ok(Built {
        pipeline: Pipeline::Composed(composed),
        node_names: vec![],
        steps: state.provenance,
    })
}

/// Walk a list of stages (the body, or a loop's body) in order.
fn walk(stages: &[ast::Stage], scope: &Scope, env: &Env, state: &mut State) {
    for s in stages {
        state.visited += 1;
        if state.steps.len() > MAX_STEPS || state.visited > MAX_VISITED {
            state.diags.push(
                Diag::new(
                    Code::OutOfRange,
                    s.span,
                    format!(
                        "more than {MAX_STEPS} steps (or {MAX_VISITED} stages) once the loops are unrolled"
                    ),
                )
                .label("too many steps")
                .help("composed pipelines unroll their `for` loops; use fewer iterations"),
            );
            return;
        }
        let r = match &s.kind {
            StageKind::Convert {
                operands,
                format,
                rounding,
                overflow,
            } => convert(
                s,
                operands,
                format,
                rounding,
                overflow.as_ref(),
                scope,
                state,
            ),
            StageKind::Let { name, value } => match bind(name, value, scope, env, state) {
                Ok(()) => Ok(()),
                Err(mut ds) => {
                    // later uses of the name are not reported again
                    if name.name != "c" {
                        state
                            .values
                            .insert(name.name.clone(), StepValue::Zero { negative: false });
                    }
                    let last = ds.pop();
                    state.diags.append(&mut ds);
                    last.map_or(Ok(()), Err)
                }
            },
            StageKind::Result(id) => result(id, state),
            StageKind::Coverage => {
                state.coverage_any = true;
                Ok(())
            }
            StageKind::Repeat {
                var,
                from,
                to,
                step,
                body,
            } => repeat(
                var,
                from,
                to,
                step.as_ref(),
                body,
                s.span,
                scope,
                env,
                state,
            ),
            other => Err(Diag::new(
                Code::MisplacedStage,
                s.span,
                format!(
                    "`{}` has no meaning in a composed pipeline",
                    stage_name(other)
                ),
            )
            .label("not allowed here")
            .help("a composed pipeline has: convert, let, for, result, coverage any")),
        };
        if let Err(d) = r {
            state.diags.push(d);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn convert(
    s: &ast::Stage,
    operands: &[ast::Operand],
    format: &ast::Expr,
    rounding: &ast::Expr,
    overflow: Option<&ast::Expr>,
    scope: &Scope,
    state: &mut State,
) -> Result<(), Diag> {
    if !state.steps.is_empty() || state.result.is_some() {
        return Err(
            Diag::new(Code::StageOrder, s.span, "`convert` after a step")
                .label("the operands are already in use")
                .help("convert operands first, before any `let`"),
        );
    }
    let f = expect_format(format, scope)?;
    float_of(&f, format.span, "conversion format")?;
    let rounding = expect_rounding(rounding, scope)?;
    let overflow = match overflow {
        None => Overflow::Inf,
        Some(e) => match expect_overflow(e, scope)? {
            Overflow::Wrap => {
                return Err(Diag::new(Code::BadOverflow, e.span, "floats cannot wrap")
                    .label("wrap is for integers")
                    .help("use `overflow inf` or `overflow saturate`"));
            }
            o => o,
        },
    };
    for o in operands {
        let i = match o {
            ast::Operand::A => 0,
            ast::Operand::B => 1,
            ast::Operand::C => 2,
        };
        if state.convert[i].is_some() {
            return Err(
                Diag::new(Code::DuplicateName, s.span, "an operand is converted twice")
                    .label("converted again here")
                    .help("convert each operand once"),
            );
        }
        let from = state.format(i).clone();
        float_of(&from, s.span, "a converted operand")?;
        state.convert[i] = Some(Conversion {
            format: f.clone(),
            rounding,
            overflow,
        });
    }
    Ok(())
}

fn result(id: &ast::Ident, state: &mut State) -> Result<(), Diag> {
    let v = state.value(&ValueRef::Name(id.clone()))?;
    if let Some(f) = state.format_of(v)
        && f != state.ctx.d
    {
        return Err(Diag::new(
            Code::Type,
            id.span,
            format!(
                "`{}` is in `{}`, but d is `{}`",
                id.name, f.name, state.ctx.d.name
            ),
        )
        .label("not d's format")
        .help(
            "end with a value in d's format, e.g. `let d = add x, c in out round nearest_even`",
        ));
    }
    state.result = Some((v, id.span));
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn repeat(
    var: &ast::Ident,
    from: &ast::Expr,
    to: &ast::Expr,
    step: Option<&ast::Expr>,
    body: &[ast::Stage],
    span: Span,
    scope: &Scope,
    env: &Env,
    state: &mut State,
) -> Result<(), Diag> {
    let f = expect_int(from, scope)?;
    let t = expect_int(to, scope)?;
    let s = match step {
        Some(e) => in_range(e, expect_int(e, scope)?, 1, i64::MAX, "a range step")?,
        None => 1,
    };
    // (the span in i128: t - f may not fit i64 where a step makes the range short)
    if t < f || (t as i128 - f as i128) / s as i128 > MAX_STEPS as i128 {
        return Err(Diag::new(
            Code::OutOfRange,
            span,
            "this loop's range is empty or too long",
        )
        .label(format!("{f}..{t} step {s}"))
        .help(format!(
            "ranges are inclusive, increasing and at most {MAX_STEPS} values long"
        )));
    }
    // (by count: `i += s` past t could overflow i64)
    let count = ((t as i128 - f as i128) / s as i128) as i64;
    for n in 0..=count {
        let i = (f as i128 + n as i128 * s as i128) as i64;
        let mut inner = Scope {
            vars: scope.vars.clone(),
            formats: scope.formats,
        };
        inner.vars.insert(var.name.clone(), Value::Int(i));
        walk(body, &inner, env, state);
        if !state.diags.is_empty() {
            break;
        }
    }
    Ok(())
}

/// The k positions a run takes: every k in 0..K that all clauses admit, increasing.
fn positions(clauses: &[KClause], scope: &Scope, k: u32) -> Result<Vec<u32>, Diag> {
    let mut keep = vec![true; k as usize];
    for c in clauses {
        match c {
            KClause::Range {
                from,
                to,
                step,
                span,
            } => {
                let f = expect_int(from, scope)?;
                let t = expect_int(to, scope)?;
                let s = match step {
                    Some(e) => in_range(e, expect_int(e, scope)?, 1, i64::MAX, "a range step")?,
                    None => 1,
                };
                if f < 0 || t < f || t >= k as i64 {
                    return Err(Diag::new(
                        Code::OutOfRange,
                        *span,
                        format!("k in {f}..{t} is not a range of positions 0..{}", k - 1),
                    )
                    .label(format!("K = {k}"))
                    .help("k ranges are inclusive and lie in 0..K-1"));
                }
                for (j, kept) in keep.iter_mut().enumerate() {
                    let j = j as i64;
                    *kept &= j >= f && j <= t && (j - f) % s == 0;
                }
            }
            KClause::Mod {
                modulus, residues, ..
            } => {
                let m = in_range(
                    modulus,
                    expect_int(modulus, scope)?,
                    1,
                    k as i64,
                    "a modulus",
                )?;
                let mut rs = vec![];
                for r in residues {
                    rs.push(in_range(r, expect_int(r, scope)?, 0, m - 1, "a residue")?);
                }
                for (j, kept) in keep.iter_mut().enumerate() {
                    *kept &= rs.contains(&(j as i64 % m));
                }
            }
        }
    }
    Ok((0..k).filter(|&j| keep[j as usize]).collect())
}

/// `let NAME = STEP`.
fn bind(
    name: &ast::Ident,
    value: &StepExpr,
    scope: &Scope,
    env: &Env,
    state: &mut State,
) -> Result<(), Vec<Diag>> {
    if name.name == "c" {
        return Err(vec![
            Diag::new(Code::DuplicateName, name.span, "`c` is the instruction's c")
                .label("cannot be rebound")
                .help("choose another name"),
        ]);
    }
    let one = |d: Diag| vec![d];
    let v = match value {
        StepExpr::Value(r) => state.value(r).map_err(one)?,
        StepExpr::Add {
            x,
            y,
            format,
            rounding,
        } => {
            let (x, y) = (state.value(x).map_err(one)?, state.value(y).map_err(one)?);
            let op = rounded_op(format, rounding, false, scope).map_err(one)?;
            state.steps.push(Step::Add { x, y, op });
            StepValue::Step(state.steps.len() - 1)
        }
        StepExpr::Fma {
            x,
            y,
            z,
            format,
            rounding,
        } => {
            let (x, y, z) = (
                state.value(x).map_err(one)?,
                state.value(y).map_err(one)?,
                state.value(z).map_err(one)?,
            );
            let op = rounded_op(format, rounding, false, scope).map_err(one)?;
            state.steps.push(Step::Fma { x, y, z, op });
            StepValue::Step(state.steps.len() - 1)
        }
        StepExpr::Run {
            target,
            positions: clauses,
            c,
            span,
        } => run(target, clauses, c, *span, scope, env, state)?,
    };
    state.values.insert(name.name.clone(), v);
    if !matches!(value, StepExpr::Value(_)) {
        let last = state.steps.len() - 1;
        if state.provenance.len() <= last {
            state.provenance.push(StepProvenance {
                label: name.name.clone(),
                run: None,
            });
        } else {
            state.provenance[last].label = name.name.clone();
        }
    }
    Ok(())
}

/// `run TARGET over POSITIONS with c = VALUE`: the target's arithmetic, checked against
/// the operands' formats, the positions and c.
fn run(
    target: &RunTarget,
    clauses: &[KClause],
    c: &ValueRef,
    span: Span,
    scope: &Scope,
    env: &Env,
    state: &mut State,
) -> Result<StepValue, Vec<Diag>> {
    let ctx = state.ctx;
    let one = |d: Diag| vec![d];
    let at = positions(clauses, scope, ctx.k).map_err(one)?;
    let c_value = state.value(c).map_err(one)?;
    let c_format = state.format_of(c_value);
    let (fa, fb) = (state.format(0).clone(), state.format(1).clone());
    let (arithmetic, name, provenance) = match target {
        RunTarget::Instruction(e) => {
            let name = match eval(e, scope).map_err(one)? {
                Value::Str(s) => s,
                v => {
                    return Err(one(Diag::new(
                        Code::Type,
                        e.span,
                        format!("expected an instruction name, found {} `{}`", v.kind(), v.show()),
                    )
                    .label("expected a string")
                    .help("name an instruction of this spec, e.g. `run \"mma.m16n8k16.f16.f16.f16.f16\" over ...`")));
                }
            };
            let resolved = match env.known.get(&name) {
                Some(_) => None,
                None => env.resolve.and_then(|r| r(&name)),
            };
            let Some(inst) = env.known.get(&name).or(resolved.as_ref()) else {
                return Err(one(no_run_target(&name, e.span, env)));
            };
            if inst.sparsity.is_some() {
                return Err(one(
                    Diag::new(
                        Code::Sparsity,
                        e.span,
                        format!("`{name}` is sparse: a composed pipeline runs dense instructions"),
                    )
                    .label("sparse instruction")
                    .help("run the dense instruction of the same arithmetic, and put `sparse a ...` on the composed one"),
                ));
            }
            (inst.arithmetic.clone(), name, inst.provenance.clone())
        }
        RunTarget::Pipeline { name, args, into } => {
            let Some(entry) = env.pipelines.get(&name.name) else {
                let d = Diag::new(
                    Code::UnknownName,
                    name.span,
                    format!("unknown pipeline `{}`", name.name),
                )
                .label("not defined");
                return Err(one(
                    match closest(&name.name, env.pipelines.keys().map(|k| k.as_str())) {
                        Some(c) => d.help(format!("did you mean `{c}`?")),
                        None => {
                            d.help("define it with `pipeline NAME(...) { ... }`, or `import std`")
                        }
                    },
                ));
            };
            let d = expect_format(into, scope).map_err(one)?;
            let label = format!(
                "{}({})",
                name.name,
                args.iter()
                    .map(|a| match &a.name {
                        Some(n) => format!("{} = ...", n.name),
                        None => "...".to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let sub = Ctx {
                k: at.len() as u32,
                a: fa.clone(),
                b: fb.clone(),
                c: c_format.clone().unwrap_or_else(|| d.clone()),
                d: d.clone(),
                scale: None,
                uses_span: span,
                origin: entry.origin,
                pipeline: name.name.clone(),
                instruction: label.clone(),
            };
            if at.is_empty() {
                return Err(one(shape_error(span, &label, 0, 0)));
            }
            // a pipeline that runs itself (or two that run each other) would instantiate
            // without end: refused at the nesting limit, before the stack runs out
            let Some(_nested) = RunDepth::enter() else {
                return Err(one(RunDepth::too_deep(&name.name, name.span)));
            };
            let ins = instantiate_pipeline(entry, args, scope, &sub, env, &[])?;
            let arithmetic = Arithmetic {
                a: sub.a,
                b: sub.b,
                c: sub.c,
                d: sub.d,
                k: sub.k,
                scale: None,
                pipeline: ins.pipeline,
            };
            let provenance = Provenance {
                pipeline: name.name.clone(),
                arguments: ins.arguments,
                span,
                uses: span,
                pipeline_span: ins.pipeline_span,
                node_names: ins.node_names,
                steps: ins.steps,
                evidence: vec![],
            };
            let shown = format!(
                "{}({})",
                name.name,
                provenance
                    .arguments
                    .iter()
                    .map(|(k, v)| format!("{k} = {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            (arithmetic, shown, provenance)
        }
    };
    if arithmetic.composed_depth() >= MAX_COMPOSED_NESTING {
        return Err(one(Diag::new(
            Code::TooDeep,
            span,
            format!(
                "`{name}` runs composed pipelines {} deep; this run would nest more than {MAX_COMPOSED_NESTING}",
                arithmetic.composed_depth()
            ),
        )
        .label("nests too deep")
        .help("run the instruction one or two levels down directly")));
    }
    if arithmetic.scale.is_some() {
        return Err(one(Diag::new(
            Code::Type,
            span,
            format!("`{name}` takes scale factors; a composed pipeline runs instructions without"),
        )
        .label("block-scaled")
        .help("run an instruction without scale factors")));
    }
    if arithmetic.k as usize != at.len() {
        return Err(one(shape_error(span, &name, arithmetic.k, at.len())));
    }
    for (want, have, role) in [(&arithmetic.a, &fa, "a"), (&arithmetic.b, &fb, "b")] {
        if want != have {
            return Err(one(Diag::new(
                Code::Type,
                span,
                format!(
                    "`{name}` takes {role} = {}, but {role} is {} here",
                    want.name, have.name
                ),
            )
            .label(format!("{role} is not `{}`", want.name))
            .help(format!(
                "convert it first: `convert {role} to {} round nearest_even`",
                want.name
            ))));
        }
    }
    if let Some(f) = &c_format
        && *f != arithmetic.c
    {
        return Err(one(Diag::new(
            Code::Type,
            c.span(),
            format!(
                "`{name}` takes c = {}, but this value is in {}",
                arithmetic.c.name, f.name
            ),
        )
        .label(format!("not `{}`", arithmetic.c.name))
        .help("pass a value in the run's c format, or 0")));
    }
    for &k in &at {
        state.used[k as usize] += 1;
    }
    state.steps.push(Step::Run {
        arithmetic: Box::new(arithmetic),
        positions: at,
        c: c_value,
    });
    state.provenance.push(StepProvenance {
        label: String::new(),
        run: Some((name, Box::new(provenance))),
    });
    Ok(StepValue::Step(state.steps.len() - 1))
}

fn shape_error(span: Span, name: &str, k: u32, selected: usize) -> Diag {
    Diag::new(
        Code::Shape,
        span,
        format!("the positions select {selected} k, but `{name}` takes k = {k}"),
    )
    .label("k does not match")
    .help("select as many k positions as the run's instruction takes")
}

/// The error of `run "NAME"` where no instruction of the spec that is not composed has
/// the name (a composed instruction is no run target either: the label said "not
/// declared" of one that is).
fn no_run_target(name: &str, span: Span, env: &Env) -> Diag {
    let d = Diag::new(
        Code::UnknownName,
        span,
        format!("no instruction `{name}` to run"),
    )
    .label("no instruction of this spec that is not composed has this name");
    match closest(name, env.known.keys().map(|k| k.as_str())) {
        Some(c) => d.help(format!("did you mean `{c}`?")),
        None => d.help("a composed pipeline runs an instruction the same spec declares (one that is not composed itself), or a pipeline: `run PIPELINE(ARGS) into FORMAT`"),
    }
}

thread_local! {
    /// How many `run PIPELINE(...)` instantiations are under way on this thread.
    static RUN_DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One level of `run PIPELINE(...)` being instantiated, left when dropped (on every path,
/// errors included); `None` past [`MAX_COMPOSED_NESTING`] levels.
struct RunDepth;

impl RunDepth {
    /// The error of a run of pipeline `name` at `span` past the limit.
    fn too_deep(name: &str, span: Span) -> Diag {
        Diag::new(
            Code::TooDeep,
            span,
            format!(
                "`{name}` runs pipelines nested more than {MAX_COMPOSED_NESTING} deep: does it run itself?"
            ),
        )
        .label("nests too deep")
        .help("a composed pipeline runs instructions or other pipelines, not itself")
    }

    fn enter() -> Option<RunDepth> {
        let depth = RUN_DEPTH.get();
        (depth < MAX_COMPOSED_NESTING).then(|| {
            RUN_DEPTH.set(depth + 1);
            RunDepth
        })
    }
}

impl Drop for RunDepth {
    fn drop(&mut self) {
        RUN_DEPTH.set(RUN_DEPTH.get().saturating_sub(1));
    }
}
