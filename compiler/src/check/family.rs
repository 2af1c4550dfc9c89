//! Instruction families: every combination of an instruction's `for` bindings becomes one
//! instruction, whose pipeline is instantiated with its arguments (defaults evaluated in
//! the instruction's context) and built by [`super::stages`].

use super::eval::{Scope, Value, eval, expect_format, expect_int, in_range};
use super::stages::{Kind, build_pipeline, check_operand_kinds};
use super::{Env, Origin, Override, PipelineEntry};
use crate::ast::{self, NamePart};
use crate::diagnostic::{Code, Diag, FileId, Span, closest};
use crate::format::Format;
use crate::ir::*;
use std::collections::HashMap;

/// The most instructions one family may expand to.
pub(super) const MAX_FAMILY: usize = 100_000;

pub(super) fn expand_family(
    decl: &ast::InstructionDecl,
    env: &Env,
    overrides: &[Override],
    only: Option<&str>,
) -> Result<Vec<Instruction>, Vec<Diag>> {
    let (formats, pipelines) = (env.formats, env.pipelines);
    let mut diags = vec![];
    // every combination of the `for` bindings
    let mut combos: Vec<HashMap<String, Value>> = vec![HashMap::new()];
    if let Some(target) = only
        && !name_may_match(decl, &combos[0], target)
    {
        return Ok(vec![]);
    }
    let scope0 = Scope {
        vars: HashMap::new(),
        formats,
    };
    for b in &decl.bindings {
        let values: Vec<(Value, Span)> = match &b.values {
            ast::BindingValues::List(items) => {
                let mut out = vec![];
                for it in items {
                    match eval(it, &scope0) {
                        Ok(v) => out.push((v, it.span)),
                        Err(d) => diags.push(d),
                    }
                }
                out
            }
            ast::BindingValues::Range { from, to, step } => {
                let r = (|| -> Result<Vec<(Value, Span)>, Diag> {
                    let f = expect_int(from, &scope0)?;
                    let t = expect_int(to, &scope0)?;
                    let s = match step {
                        Some(s) => {
                            in_range(s, expect_int(s, &scope0)?, 1, i64::MAX, "a range step")?
                        }
                        None => 1,
                    };
                    // (the span in i128: t - f may not fit i64 where a step makes it short)
                    if t < f || (t as i128 - f as i128) / s as i128 > 4096 {
                        return Err(Diag::new(
                            Code::OutOfRange,
                            b.span,
                            "this range is empty or too long",
                        )
                        .label(format!("{f}..{t} step {s}"))
                        .help("ranges are inclusive, increasing and at most 4096 values long"));
                    }
                    // (each value in i128 first: i * s alone may not fit i64)
                    let count = ((t as i128 - f as i128) / s as i128) as i64;
                    Ok((0..=count)
                        .map(|i| {
                            (
                                Value::Int((f as i128 + i as i128 * s as i128) as i64),
                                b.span,
                            )
                        })
                        .collect())
                })();
                match r {
                    Ok(v) => v,
                    Err(d) => {
                        diags.push(d);
                        vec![]
                    }
                }
            }
        };
        // (counted before the combinations are made: 4096 x 4096 of them took 7 GB)
        if only.is_none() && combos.len().saturating_mul(values.len()) > MAX_FAMILY {
            diags.push(too_many(b.span));
            return Err(diags);
        }
        let mut next = vec![];
        for combo in &combos {
            for (v, vspan) in &values {
                let mut c = combo.clone();
                if b.names.len() == 1 {
                    c.insert(b.names[0].name.clone(), v.clone());
                } else {
                    match v {
                        Value::Tuple(items) if items.len() == b.names.len() => {
                            for (n, x) in b.names.iter().zip(items) {
                                c.insert(n.name.clone(), x.clone());
                            }
                        }
                        _ => {
                            diags.push(
                                Diag::new(
                                    Code::Type,
                                    *vspan,
                                    format!("expected a tuple of {} values", b.names.len()),
                                )
                                .label(format!("found {} `{}`", v.kind(), v.show()))
                                .help(format!(
                                    "each item binds ({})",
                                    b.names
                                        .iter()
                                        .map(|n| n.name.as_str())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                )),
                            );
                            continue;
                        }
                    }
                }
                // checking one instruction: only the members whose name can still match
                if only.is_none_or(|target| name_may_match(decl, &c, target)) {
                    next.push(c);
                }
                if next.len() > MAX_FAMILY {
                    diags.push(too_many(b.span));
                    return Err(diags);
                }
            }
        }
        combos = next;
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    // placeholders must be bound
    for part in &decl.name {
        if let NamePart::Placeholder(id) = part
            && !decl
                .bindings
                .iter()
                .any(|b| b.names.iter().any(|n| n.name == id.name))
        {
            diags.push(
                Diag::new(
                    Code::UnknownName,
                    id.span,
                    format!("placeholder `{{{}}}` is not bound", id.name),
                )
                .label("no `for` binds this")
                .help(format!("add `for {} in [...]` to the instruction", id.name)),
            );
        }
    }
    let Some(uses) = &decl.uses else {
        diags.push(
            Diag::new(
                Code::MissingUses,
                decl.name_span,
                "instruction has no pipeline",
            )
            .label("what does it compute?")
            .help("add `uses PIPELINE(ARGS)`, e.g. `uses t_fdpa(F = 25, L = 16, e_zero = -133)`"),
        );
        return Err(diags);
    };
    let Some(entry) = pipelines.get(&uses.pipeline.name) else {
        let d = Diag::new(
            Code::UnknownName,
            uses.pipeline.span,
            format!("unknown pipeline `{}`", uses.pipeline.name),
        )
        .label("not defined");
        let d = match closest(&uses.pipeline.name, pipelines.keys().map(|s| s.as_str())) {
            Some(c) => d.help(format!("did you mean `{c}`?")),
            None if pipelines.is_empty() => d.help("define it with `pipeline NAME(...) { ... }`, or `import std` for the MMA-Sim pipelines"),
            None => d.help(format!("known pipelines: {}", pipelines.keys().cloned().collect::<Vec<_>>().join(", "))),
        };
        diags.push(d);
        return Err(diags);
    };
    if entry.broken {
        // its own errors are reported where it is defined
        return Err(diags);
    }
    let mut out = vec![];
    for combo in combos {
        if only.is_some_and(|name| {
            instruction_name(
                decl,
                &Scope {
                    vars: combo.clone(),
                    formats,
                },
            ) != name
        }) {
            continue;
        }
        match instantiate(decl, uses, entry, combo, env, overrides) {
            Ok(i) => out.push(i),
            Err(mut d) => diags.append(&mut d),
        }
    }
    if diags.is_empty() {
        Ok(out)
    } else {
        Err(diags)
    }
}

/// Instantiate one member of the family `decl`, whose `for` bindings are `vars`: its
/// shape, operand types and scale factors, then its pipeline `entry` with the arguments
/// of `uses`.
pub(super) fn instantiate(
    decl: &ast::InstructionDecl,
    uses: &ast::Uses,
    entry: &PipelineEntry,
    vars: HashMap<String, Value>,
    env: &Env,
    overrides: &[Override],
) -> Result<Instruction, Vec<Diag>> {
    let scope = Scope {
        vars,
        formats: env.formats,
    };
    let mut diags = vec![];
    let name = instruction_name(decl, &scope);
    let shape = instruction_shape(decl, &scope, &name, &mut diags);
    let types = operand_types(decl, &scope, &name, &mut diags);
    let scale = scale_factors(decl, &scope, &name, overrides, &mut diags);
    check_scale_block(decl, scale.as_ref(), shape, &mut diags);
    let walk = overridden(overrides, &name, "over").map(|v| v.to_string());
    let sparsity = sparsity(
        decl,
        &scope,
        (shape, walk),
        &types,
        scale.as_ref(),
        &mut diags,
    );
    // every part that gives nothing has reported why
    let Some(shape) = shape.filter(|_| diags.is_empty()) else {
        return Err(diags);
    };
    check_overrides(decl, uses, entry, &name, overrides)?;
    let evidence = evidence_kinds(decl)?;
    // a sparse instruction's pipeline is the dense one over what it walks: its k, and its
    // scale blocks counted in the products it runs
    let k = sparsity.map_or(shape.k, |s| s.dense_k(shape.k));
    let scale = scale.map(|s| ScaleSpec {
        block: sparsity.map_or(s.block, |sp| sp.dense_k(s.block)),
        ..s
    });
    let ctx = Ctx {
        k,
        a: types[&'a'].clone(),
        b: types[&'b'].clone(),
        c: types[&'c'].clone(),
        d: types[&'d'].clone(),
        scale: scale.clone(),
        uses_span: uses.span,
        origin: entry.origin,
        pipeline: entry.decl.name.name.clone(),
        instruction: name.clone(),
    };
    let mut ins = instantiate_pipeline(entry, &uses.args, &scope, &ctx, env, overrides)?;
    if let Some(rule) = &uses.nan {
        set_nan_rule(&mut ins.pipeline, rule).map_err(|d| vec![d])?;
    }
    Ok(Instruction {
        name,
        m: shape.m,
        n: shape.n,
        arithmetic: Arithmetic {
            a: ctx.a,
            b: ctx.b,
            c: ctx.c,
            d: ctx.d,
            k,
            scale,
            pipeline: ins.pipeline,
        },
        sparsity,
        provenance: Provenance {
            pipeline: entry.decl.name.name.clone(),
            arguments: ins.arguments,
            span: decl.span,
            uses: uses.span,
            pipeline_span: ins.pipeline_span,
            node_names: ins.node_names,
            steps: ins.steps,
            evidence,
        },
    })
}

/// `shape M x N x K` of instruction `name`: each dimension from 1 to 65536 (None after
/// an error).
fn instruction_shape(
    decl: &ast::InstructionDecl,
    scope: &Scope,
    name: &str,
    diags: &mut Vec<Diag>,
) -> Option<Shape> {
    let Some((dims, _)) = &decl.shape else {
        diags.push(
            Diag::new(
                Code::MissingShape,
                decl.name_span,
                format!("instruction `{name}` has no shape"),
            )
            .label("M x N x K unknown")
            .help("add `shape M x N x K`, e.g. `shape 16 x 8 x 16`"),
        );
        return None;
    };
    let mut v = [0u32; 3];
    let mut ok = true;
    for (i, e) in dims.iter().enumerate() {
        match expect_int(e, scope).and_then(|x| in_range(e, x, 1, 65536, "a dimension")) {
            Ok(x) => v[i] = x as u32,
            Err(d) => {
                diags.push(d);
                ok = false;
            }
        }
    }
    ok.then_some(Shape {
        m: v[0],
        n: v[1],
        k: v[2],
    })
}

/// `types a = ..., b = ..., c = ..., d = ...` of instruction `name`: each operand's
/// format, given once.
fn operand_types(
    decl: &ast::InstructionDecl,
    scope: &Scope,
    name: &str,
    diags: &mut Vec<Diag>,
) -> HashMap<char, Format> {
    let mut types: HashMap<char, Format> = HashMap::new();
    for (op, e, sp) in &decl.types {
        match expect_format(e, scope) {
            Ok(f) => {
                if types.insert(*op, f).is_some() {
                    diags.push(
                        Diag::new(
                            Code::DuplicateName,
                            *sp,
                            format!("type of `{op}` is given twice"),
                        )
                        .label("again here")
                        .help("give each operand type once"),
                    );
                }
            }
            Err(d) => diags.push(d),
        }
    }
    for op in ['a', 'b', 'c', 'd'] {
        if !types.contains_key(&op) && !decl.types.iter().any(|(o, _, _)| *o == op) {
            diags.push(
                Diag::new(
                    Code::MissingType,
                    decl.name_span,
                    format!("instruction `{name}` does not give the type of `{op}`"),
                )
                .label(format!("`{op}` has no type"))
                .help("add `types a = ..., b = ..., c = ..., d = ...`"),
            );
        }
    }
    types
}

/// `scale FORMAT block B` of instruction `name`, if any: a float format, and a block
/// size (possibly overridden) from 1 to 65536 (None after an error).
fn scale_factors(
    decl: &ast::InstructionDecl,
    scope: &Scope,
    name: &str,
    overrides: &[Override],
    diags: &mut Vec<Diag>,
) -> Option<ScaleSpec> {
    let (fe, be, _) = decl.scale.as_ref()?;
    match (
        expect_format(fe, scope),
        expect_int(be, scope)
            .map(|b| {
                overridden(overrides, name, "block")
                    .and_then(Value::as_int)
                    .unwrap_or(b)
            })
            .and_then(|b| in_range(be, b, 1, 65536, "a block size")),
    ) {
        (Ok(f), Ok(b)) => {
            if f.as_float().is_none() {
                diags.push(
                    Diag::new(
                        Code::Type,
                        fe.span,
                        format!("scale format `{}` is not a float format", f.name),
                    )
                    .label("expected ue8m0, ue4m3 or another float format"),
                );
            }
            Some(ScaleSpec {
                format: f,
                block: b as u32,
            })
        }
        (a, b) => {
            diags.extend(a.err());
            diags.extend(b.err());
            None
        }
    }
}

/// K is a whole number of scale blocks (when both are known).
fn check_scale_block(
    decl: &ast::InstructionDecl,
    scale: Option<&ScaleSpec>,
    shape: Option<Shape>,
    diags: &mut Vec<Diag>,
) {
    if let (Some(s), Some(sh)) = (scale, shape)
        && sh.k % s.block != 0
    {
        let (_, be, _) = decl.scale.as_ref().unwrap();
        diags.push(
            Diag::new(
                Code::Divisibility,
                be.span,
                format!(
                    "K = {} is not a multiple of the scale block {}",
                    sh.k, s.block
                ),
            )
            .label("block size does not divide K")
            .help("each block of k shares one scale factor; K must be a whole number of blocks"),
        );
    }
}

/// `sparse a KEPT of GROUP [over selected|columns]` of an instruction, checked: operand
/// a, the 2:4 pattern for elements of at most 16 bits and 1:2 for 32-bit ones, K and the
/// scale block whole numbers of groups (None without the clause or after an error).
fn sparsity(
    decl: &ast::InstructionDecl,
    scope: &Scope,
    (shape, walk_override): (Option<Shape>, Option<String>),
    types: &HashMap<char, Format>,
    scale: Option<&ScaleSpec>,
    diags: &mut Vec<Diag>,
) -> Option<Sparsity> {
    let sd = decl.sparse.as_ref()?;
    let before = diags.len();
    if sd.operand != 'a' {
        diags.push(
            Diag::new(
                Code::Sparsity,
                sd.operand_span,
                format!("operand {} cannot be sparse", sd.operand),
            )
            .label("only A is stored sparse")
            .help("sparse MMA (PTX mma.sp, AMD SMFMAC and SWMMAC) prunes A: write `sparse a`"),
        );
    }
    let written = sd.over.as_ref().map(|w| w.name.clone());
    let walk = match walk_override.or(written).as_deref() {
        None | Some("selected") => Walk::Selected,
        Some("columns") => Walk::Columns,
        Some(other) => {
            let w = sd.over.as_ref().unwrap();
            diags.push(
                Diag::new(
                    Code::UnknownName,
                    w.span,
                    format!("`over {other}`: a sparse pipeline runs over `selected` or `columns`"),
                )
                .label("expected `selected` or `columns`")
                .help(
                    "`over selected`: the k/2 selected products; `over columns`: all K columns, \
                     unselected ones as zero products",
                ),
            );
            Walk::Selected
        }
    };
    let (kept, group) = match (expect_int(&sd.kept, scope), expect_int(&sd.group, scope)) {
        (Ok(k), Ok(g)) => (k, g),
        (k, g) => {
            diags.extend(k.err());
            diags.extend(g.err());
            return None;
        }
    };
    let pattern = Sparsity {
        kept: u32::try_from(kept).unwrap_or(0),
        group: u32::try_from(group).unwrap_or(0),
        pairs: sd.pairs,
        walk,
    };
    // each pattern is for elements of one width
    let bits = types.get(&'a').map_or(0, Format::storage_bits);
    if !pattern.fits_elements(bits) {
        let a = types.get(&'a').map_or("?".into(), |f| f.name.clone());
        let written = format!("{kept} of {group}{}", if sd.pairs { " pairs" } else { "" });
        diags.push(
            Diag::new(
                Code::Sparsity,
                sd.span,
                format!("{written} sparsity is not a pattern for elements of `{a}`"),
            )
            .label("pattern")
            .help(Sparsity::ELEMENTS),
        );
        return None;
    }
    let span = pattern.span();
    if let Some(sh) = shape
        && sh.k % span != 0
    {
        diags.push(
            Diag::new(
                Code::Divisibility,
                sd.group.span,
                format!("K = {} is not a multiple of the sparsity group ({span} columns)", sh.k),
            )
            .label("group size does not divide K")
            .help("a sparse A keeps its pattern in every group of columns: make K a multiple of the group"),
        );
    }
    if let Some(s) = scale
        && s.block % span != 0
    {
        diags.push(
            Diag::new(
                Code::Divisibility,
                sd.group.span,
                format!("the scale block {} is not a multiple of the sparsity group ({span} columns)", s.block),
            )
            .label("group size does not divide the scale block")
            .help("a scale block covers whole groups of columns: make the block a multiple of the group"),
        );
    }
    (diags.len() == before).then_some(pattern)
}

/// Every override of instruction `name` names a parameter of its pipeline, or `block`
/// when it is scaled.
fn check_overrides(
    decl: &ast::InstructionDecl,
    uses: &ast::Uses,
    entry: &PipelineEntry,
    name: &str,
    overrides: &[Override],
) -> Result<(), Vec<Diag>> {
    let mut diags = vec![];
    for o in overrides.iter().filter(|o| o.instruction == name) {
        let known = o.parameter == "block" && decl.scale.is_some()
            || o.parameter == "over" && decl.sparse.is_some()
            || entry.decl.params.iter().any(|q| q.name.name == o.parameter);
        if !known {
            diags.push(
                Diag::new(
                    Code::UnknownParameter,
                    uses.span,
                    format!("`{name}` has no parameter `{}` to override", o.parameter),
                )
                .label("the instruction overridden")
                .help("override a parameter of its pipeline, or `block` for its scale block"),
            );
        }
    }
    if diags.is_empty() { Ok(()) } else { Err(diags) }
}

/// `evidence WORD, ...`: the kinds of evidence that pin the instruction, each once.
fn evidence_kinds(decl: &ast::InstructionDecl) -> Result<Vec<Evidence>, Vec<Diag>> {
    let mut diags = vec![];
    let mut evidence = vec![];
    for id in &decl.evidence {
        match Evidence::ALL.iter().find(|e| e.keyword() == id.name) {
            Some(e) if !evidence.contains(e) => evidence.push(*e),
            Some(_) => {}
            None => {
                let d = Diag::new(
                    Code::UnknownName,
                    id.span,
                    format!("unknown kind of evidence `{}`", id.name),
                )
                .label("not a kind of evidence");
                let words = Evidence::ALL.map(|e| e.keyword());
                diags.push(match closest(&id.name, words) {
                    Some(c) => d.help(format!("did you mean `{c}`? (evidence: model, silicon, documentation, assumption)")),
                    None => d.help("evidence: model (conformance vectors of a bit-accurate model), silicon (outputs captured on real GPUs), documentation (the ISA manual states it), assumption"),
                });
            }
        }
    }
    if diags.is_empty() {
        Ok(evidence)
    } else {
        Err(diags)
    }
}

/// `uses PIPELINE(...) nan RULE`: the instruction's NaN rule in place of the pipeline's
/// own `nan` stage (fused and sequential pipelines; an integer one makes no NaN, a
/// composed one's NaN is its last step's).
fn set_nan_rule(pipeline: &mut Pipeline, rule: &crate::ast::Ident) -> Result<(), Diag> {
    let policy = super::stages::nan_policy(rule)?;
    let refuse = |what: &str| {
        Diag::new(
            Code::MisplacedStage,
            rule.span,
            format!("`nan {}` at the uses line of {what}", rule.name),
        )
        .label("no NaN rule to set")
    };
    match pipeline {
        Pipeline::Fused(f) => f.nan = policy,
        Pipeline::Sequential(s) => s.nan = policy,
        Pipeline::Integer(_) => {
            return Err(refuse("an integer pipeline").help("integer dot products make no NaN"));
        }
        Pipeline::Composed(_) => {
            return Err(refuse("a composed pipeline").help(
                "a composed instruction's NaN is its last step's: state the rule where that step's instruction is declared",
            ));
        }
    }
    Ok(())
}

/// What instantiating a pipeline gives: its IR, its resolved arguments, and the
/// provenance of its parts.
pub(super) struct Instantiated {
    pub(super) pipeline: Pipeline,
    pub(super) arguments: Vec<(String, Value)>,
    pub(super) node_names: Vec<Option<String>>,
    pub(super) steps: Vec<StepProvenance>,
    pub(super) pipeline_span: Span,
}

/// Instantiate pipeline `entry` for `ctx`: bind its parameters (the arguments `args`,
/// evaluated in `arg_scope`, else the defaults, evaluated with the operand formats and K
/// in scope; then `overrides`) and build its IR.
pub(super) fn instantiate_pipeline(
    entry: &PipelineEntry,
    args: &[ast::Arg],
    arg_scope: &Scope,
    ctx: &Ctx,
    env: &Env,
    overrides: &[Override],
) -> Result<Instantiated, Vec<Diag>> {
    let mut diags = vec![];
    let name = &ctx.instruction;
    let scope = arg_scope;
    // the operands must suit the kind of pipeline before its defaults are evaluated
    let p = entry.decl;
    let kind_errors = check_operand_kinds(
        Kind::of(p),
        &p.name.name,
        &[('a', &ctx.a), ('b', &ctx.b), ('c', &ctx.c), ('d', &ctx.d)],
        ctx.uses_span,
    );
    if !kind_errors.is_empty() {
        return Err(kind_errors);
    }

    // bind the pipeline's parameters
    let mut pscope = Scope {
        vars: HashMap::new(),
        formats: env.formats,
    };
    for (n, f) in [("a", &ctx.a), ("b", &ctx.b), ("c", &ctx.c), ("out", &ctx.d)] {
        pscope.vars.insert(n.to_string(), Value::Format(f.clone()));
    }
    pscope
        .vars
        .insert("K".to_string(), Value::Int(ctx.k as i64));
    let mut given: HashMap<String, (Value, Span)> = HashMap::new();
    let mut failed: Vec<String> = vec![];
    for (i, arg) in args.iter().enumerate() {
        let pname = match &arg.name {
            Some(n) => {
                if !p.params.iter().any(|q| q.name.name == n.name) {
                    let d = Diag::new(
                        Code::UnknownParameter,
                        n.span,
                        format!("pipeline `{}` has no parameter `{}`", p.name.name, n.name),
                    )
                    .label("unknown parameter");
                    let list = p
                        .params
                        .iter()
                        .map(|q| q.name.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ");
                    diags.push(
                        match closest(&n.name, p.params.iter().map(|q| q.name.name.as_str())) {
                            Some(c) => {
                                // a misspelt parameter is not also a missing one
                                let d =
                                    d.help(format!("did you mean `{c}`? its parameters: {list}"));
                                failed.push(c);
                                d
                            }
                            None => d.help(format!("its parameters: {list}")),
                        },
                    );
                    continue;
                }
                n.name.clone()
            }
            None => match p.params.get(i) {
                Some(q) => q.name.name.clone(),
                None => {
                    diags.push(
                        Diag::new(
                            Code::WrongArguments,
                            arg.value.span,
                            format!(
                                "pipeline `{}` takes {} parameters",
                                p.name.name,
                                p.params.len()
                            ),
                        )
                        .label("one argument too many")
                        .help("remove it, or name the parameter it is for"),
                    );
                    continue;
                }
            },
        };
        match eval(&arg.value, scope) {
            Ok(v) => {
                if given.insert(pname.clone(), (v, arg.value.span)).is_some() {
                    diags.push(
                        Diag::new(
                            Code::DuplicateName,
                            arg.value.span,
                            format!("parameter `{pname}` is given twice"),
                        )
                        .label("again here")
                        .help("give each argument once"),
                    );
                }
            }
            Err(d) => {
                // the argument is given, if wrong: not also "missing"
                failed.push(pname);
                diags.push(d)
            }
        }
    }
    let mut arguments = vec![];
    for q in &p.params {
        let v = match given.remove(&q.name.name) {
            Some((v, _)) => v,
            None if failed.contains(&q.name.name) => continue,
            None => match &q.default {
                Some(def) => match eval(def, &pscope) {
                    Ok(v) => v,
                    Err(d) => {
                        diags.push(ctx.relocate(d));
                        continue;
                    }
                },
                None => {
                    diags.push(
                        Diag::new(
                            Code::MissingArgument,
                            ctx.uses_span,
                            format!("`{}` needs an argument for `{}`", p.name.name, q.name.name),
                        )
                        .label(format!("`{}` is not given", q.name.name))
                        .help(format!("add `{} = ...` to the arguments", q.name.name)),
                    );
                    continue;
                }
            },
        };
        let v = match overridden(overrides, name, &q.name.name) {
            Some(x) if x.kind() == v.kind() => x.clone(),
            Some(x) => {
                diags.push(
                    Diag::new(
                        Code::Type,
                        ctx.uses_span,
                        format!(
                            "`{}` takes {}, and the override `{x}` is {}",
                            q.name.name,
                            v.kind(),
                            x.kind()
                        ),
                    )
                    .label(format!("`{}` is `{v}` here", q.name.name))
                    .help("override a parameter with a value of its own kind"),
                );
                continue;
            }
            None => v,
        };
        arguments.push((q.name.name.clone(), v.clone()));
        pscope.vars.insert(q.name.name.clone(), v);
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    let built = build_pipeline(p, &pscope, ctx, env)
        .map_err(|ds| ds.into_iter().map(|d| ctx.relocate(d)).collect::<Vec<_>>())?;
    let pipeline_span = match entry.origin {
        Origin::Local => p.name.span,
        Origin::Std => p.name.span.in_file(FileId::Std),
    };
    Ok(Instantiated {
        pipeline: built.pipeline,
        arguments,
        node_names: built.node_names,
        steps: built.steps,
        pipeline_span,
    })
}

/// The name of one member of an instruction family: its placeholders filled in.
fn instruction_name(decl: &ast::InstructionDecl, scope: &Scope) -> String {
    decl.name
        .iter()
        .map(|p| match p {
            NamePart::Text(t) => t.clone(),
            NamePart::Placeholder(id) => {
                scope.lookup(&id.name).map(|v| v.show()).unwrap_or_default()
            }
        })
        .collect()
}

/// Can a member of the family named by `decl`, with the placeholders `bound` so far, be
/// called `target`? Unbound placeholders match any text.
fn name_may_match(
    decl: &ast::InstructionDecl,
    bound: &HashMap<String, Value>,
    target: &str,
) -> bool {
    let parts: Vec<Option<String>> = decl
        .name
        .iter()
        .map(|p| match p {
            NamePart::Text(t) => Some(t.clone()),
            NamePart::Placeholder(id) => bound.get(&id.name).map(|v| v.show()),
        })
        .collect();
    fn matches(parts: &[Option<String>], rest: &str) -> bool {
        match parts.split_first() {
            None => rest.is_empty(),
            Some((Some(text), more)) => rest
                .strip_prefix(text.as_str())
                .is_some_and(|r| matches(more, r)),
            Some((None, more)) => (0..=rest.len())
                .filter(|&i| rest.is_char_boundary(i))
                .any(|i| matches(more, &rest[i..])),
        }
    }
    matches(&parts, target)
}

/// The value `overrides` give an instruction's parameter, if any.
fn overridden<'o>(
    overrides: &'o [Override],
    instruction: &str,
    parameter: &str,
) -> Option<&'o Value> {
    overrides
        .iter()
        .find(|o| o.instruction == instruction && o.parameter == parameter)
        .map(|o| &o.value)
}

/// What a pipeline is instantiated for.
pub(super) struct Ctx {
    pub(super) k: u32,
    pub(super) a: Format,
    pub(super) b: Format,
    pub(super) c: Format,
    pub(super) d: Format,
    pub(super) scale: Option<ScaleSpec>,
    pub(super) uses_span: Span,
    pub(super) origin: Origin,
    pub(super) pipeline: String,
    pub(super) instruction: String,
}

impl Ctx {
    /// Errors inside a pipeline get the `uses` line that instantiated it as a secondary
    /// label; inside a std pipeline their spans point into the prelude. An error about
    /// the instantiation itself (its span the `uses` line: an output format the pipeline
    /// cannot produce) stays on the user's `uses` line.
    pub(super) fn relocate(&self, mut d: Diag) -> Diag {
        let at_uses = d.span == self.uses_span;
        if self.origin == Origin::Std {
            if !at_uses {
                d.span = d.span.in_file(FileId::Std);
            }
            for (s, _) in &mut d.secondary {
                if *s != self.uses_span {
                    *s = s.in_file(FileId::Std);
                }
            }
            d.message = format!("{} (in std pipeline `{}`)", d.message, self.pipeline);
        }
        let label = format!("`{}` uses `{}` here", self.instruction, self.pipeline);
        // (once: a pipeline that runs itself is instantiated at the same line again and
        // again before the nesting limit stops it)
        if !at_uses
            && !d
                .secondary
                .iter()
                .any(|(s, l)| *s == self.uses_span && *l == label)
        {
            d.secondary.push((self.uses_span, label));
        }
        d
    }
}

/// The error of a family of more than [`MAX_FAMILY`] instructions, at the binding that
/// makes it so.
fn too_many(span: Span) -> Diag {
    Diag::new(
        Code::OutOfRange,
        span,
        format!("this family expands to more than {MAX_FAMILY} instructions"),
    )
    .label("too many combinations")
    .help("split the family, or narrow its `for` lists")
}
