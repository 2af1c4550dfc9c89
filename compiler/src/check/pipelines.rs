//! Every pipeline a file defines is checked on its own, used by an instruction or not
//! (a library of pipelines is checked too): each name its expressions use must resolve
//! (a parameter, `a`, `b`, `c`, `out`, `K`, a format, a rounding mode or an overflow
//! rule), format properties must exist, `nan` and `zero result` rules must be known, the
//! sources an `align` takes must be defined before it, and every stage must belong to the
//! kind of pipeline it is in. What needs the instruction's values (ranges, divisibility,
//! widths) is checked when an instruction instantiates the pipeline.

use super::eval::{FORMAT_PROPERTIES, property};
use super::stages::{Kind, stage_name};
use crate::ast::{self, Expr, ExprKind, Ident, StageKind};
use crate::diagnostic::{Code, Diag, closest};
use crate::exact::Rounding;
use crate::format::{self, Format};
use std::collections::HashMap;

/// The names every pipeline body sees besides its parameters.
const OPERAND_NAMES: [&str; 5] = ["a", "b", "c", "out", "K"];
const OVERFLOW_RULES: [&str; 3] = ["inf", "saturate", "wrap"];

/// Check one pipeline declaration; `formats` are the file's own formats.
pub(super) fn check_pipeline(
    p: &ast::PipelineDecl,
    formats: &HashMap<String, Format>,
) -> Vec<Diag> {
    let params: Vec<String> = p.params.iter().map(|q| q.name.name.clone()).collect();
    let names = Names { params, formats };
    let mut diags = vec![];
    for q in &p.params {
        if let Some(def) = &q.default {
            names.expr(def, &mut diags);
        }
    }
    let kind = Kind::of(p);
    let mut sources: Vec<String> = vec!["c".into()];
    check_stages(&p.stages, kind, &names, &mut sources, &mut diags);
    diags
}

/// Check a list of stages (a body, or a loop's body, whose variable `names` holds).
fn check_stages(
    stages: &[ast::Stage],
    kind: Kind,
    names: &Names,
    sources: &mut Vec<String>,
    diags: &mut Vec<Diag>,
) {
    for s in stages {
        if let Some(d) = misplaced(kind, s) {
            diags.push(d);
        }
        match &s.kind {
            StageKind::Chain { length, .. } => names.expr(length, diags),
            StageKind::Flush { .. } | StageKind::SumExact => {}
            StageKind::Multiply {
                kind, overflow_at, ..
            } => {
                if let ast::MultiplyKind::Round { format, rounding } = kind {
                    names.expr(format, diags);
                    names.expr(rounding, diags);
                }
                if let Some(e) = overflow_at {
                    names.expr(e, diags);
                }
            }
            StageKind::ZeroExponent { exponent, .. } => {
                if let Some(e) = exponent {
                    names.expr(e, diags);
                }
            }
            StageKind::ZeroResult(id) => {
                if let Some(d) = keyword(
                    id,
                    &["positive", "exact_positive"],
                    "zero-result rule",
                    "zero-result rules",
                ) {
                    diags.push(d);
                }
            }
            StageKind::Group { size, name, .. } => {
                names.expr(size, diags);
                sources.push(name.name.clone());
            }
            StageKind::Align {
                terms,
                reference,
                keep_round,
                name,
            } => {
                for t in terms {
                    if let ast::Source::Named(id) = &t.source
                        && !sources.contains(&id.name)
                    {
                        let d = Diag::new(
                            Code::UnknownName,
                            id.span,
                            format!("no term source named `{}`", id.name),
                        )
                        .label("not defined before this stage");
                        let mut cands: Vec<&str> = sources.iter().map(|s| s.as_str()).collect();
                        cands.push("products");
                        diags.push(match closest(&id.name, cands) {
                            Some(c) => d.help(format!("did you mean `{c}`? sources are products, products.even, products.odd, c, a group, or an earlier `align ... as NAME`")),
                            None => d.help("sources are products, products.even, products.odd, c, a group, or an earlier `align ... as NAME`"),
                        });
                    }
                    if let Some(kr) = &t.keep_round {
                        names.expr(&kr.keep, diags);
                        names.expr(&kr.round, diags);
                    }
                    if let Some(e) = &t.drop_below {
                        names.expr(e, diags);
                    }
                }
                if let ast::Reference::Fixed(e) = reference {
                    names.expr(e, diags);
                }
                if let Some(kr) = keep_round {
                    names.expr(&kr.keep, diags);
                    names.expr(&kr.round, diags);
                }
                if let Some(n) = name {
                    sources.push(n.name.clone());
                }
            }
            StageKind::Normalize {
                target,
                precision,
                rounding,
                overflow,
            } => {
                let (ast::NormalizeTarget::To(t) | ast::NormalizeTarget::Range(t)) = target;
                names.expr(t, diags);
                for e in [precision, rounding, overflow].into_iter().flatten() {
                    names.expr(e, diags);
                }
            }
            StageKind::Accumulate {
                format, rounding, ..
            } => {
                names.expr(format, diags);
                names.expr(rounding, diags);
            }
            StageKind::Pairwise {
                size,
                format,
                rounding,
                ..
            } => {
                names.expr(size, diags);
                names.expr(format, diags);
                names.expr(rounding, diags);
            }
            StageKind::Nan(id) => {
                let words = crate::ir::NanPolicy::ALL.map(crate::ir::NanPolicy::word);
                if let Some(d) = keyword(id, &words, "NaN policy", "NaN policies") {
                    diags.push(d);
                }
            }
            StageKind::Convert {
                format,
                rounding,
                overflow,
                ..
            } => {
                for e in [Some(format), Some(rounding), overflow.as_ref()]
                    .into_iter()
                    .flatten()
                {
                    names.expr(e, diags);
                }
            }
            StageKind::Let { value, .. } => match value {
                ast::StepExpr::Run {
                    target, positions, ..
                } => {
                    match target {
                        ast::RunTarget::Instruction(e) => names.expr(e, diags),
                        ast::RunTarget::Pipeline { args, into, .. } => {
                            for a in args {
                                names.expr(&a.value, diags);
                            }
                            names.expr(into, diags);
                        }
                    }
                    for c in positions {
                        match c {
                            ast::KClause::Range { from, to, step, .. } => {
                                for e in [Some(&**from), Some(&**to), step.as_deref()]
                                    .into_iter()
                                    .flatten()
                                {
                                    names.expr(e, diags);
                                }
                            }
                            ast::KClause::Mod {
                                modulus, residues, ..
                            } => {
                                names.expr(modulus, diags);
                                residues.iter().for_each(|r| names.expr(r, diags));
                            }
                        }
                    }
                }
                ast::StepExpr::Add {
                    format, rounding, ..
                }
                | ast::StepExpr::Fma {
                    format, rounding, ..
                } => {
                    names.expr(format, diags);
                    names.expr(rounding, diags);
                }
                ast::StepExpr::Value(_) => {}
            },
            StageKind::Result(_) | StageKind::Coverage => {}
            StageKind::Repeat {
                var,
                from,
                to,
                step,
                body,
            } => {
                for e in [Some(from), Some(to), step.as_ref()].into_iter().flatten() {
                    names.expr(e, diags);
                }
                let mut inner = Names {
                    params: names.params.clone(),
                    formats: names.formats,
                };
                inner.params.push(var.name.clone());
                check_stages(body, kind, &inner, sources, diags);
            }
        }
    }
}

/// A stage that has no meaning in this kind of pipeline.
fn misplaced(kind: Kind, s: &ast::Stage) -> Option<Diag> {
    let allowed: &[&str] = match kind {
        Kind::Fused => &[
            "chain",
            "flush",
            "multiply",
            "zero exponent",
            "zero result",
            "group",
            "align",
            "sum exact",
            "normalize",
            "nan",
        ],
        Kind::Sequential => &["flush", "multiply", "add pairwise", "accumulate", "nan"],
        Kind::Integer => &["multiply", "sum exact", "normalize", "nan"],
        Kind::Composed => &["convert", "let", "for", "result", "coverage"],
    };
    let name = stage_name(&s.kind);
    (!allowed.contains(&name)).then(|| {
        Diag::new(
            Code::MisplacedStage,
            s.span,
            format!("`{name}` has no meaning in {}", kind_name(kind)),
        )
        .label("not allowed here")
        .help(format!("{} has: {}", kind_name(kind), allowed.join(", ")))
    })
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Fused => "a fused pipeline",
        Kind::Sequential => "a sequential pipeline",
        Kind::Integer => "an integer pipeline",
        Kind::Composed => "a composed pipeline",
    }
}

/// An identifier that must be one of `words` (`what` names one, `plural` the list).
fn keyword(id: &Ident, words: &[&str], what: &str, plural: &str) -> Option<Diag> {
    if words.contains(&id.name.as_str()) {
        return None;
    }
    let d = Diag::new(
        Code::UnknownName,
        id.span,
        format!("unknown {what} `{}`", id.name),
    )
    .label(format!("not a {what}"));
    Some(match closest(&id.name, words.iter().copied()) {
        Some(c) => d.help(format!(
            "did you mean `{c}`? ({plural}: {})",
            words.join(", ")
        )),
        None => d.help(format!("{plural}: {}", words.join(", "))),
    })
}

/// The names a pipeline body can use.
struct Names<'a> {
    /// Parameters, and the variables of the loops around.
    params: Vec<String>,
    formats: &'a HashMap<String, Format>,
}

impl Names<'_> {
    /// A name that is a known constant format (not a parameter or operand, whose format
    /// is only known when an instruction instantiates the pipeline).
    fn constant_format(&self, name: &str) -> Option<Format> {
        if self.params.iter().any(|p| p == name) || OPERAND_NAMES.contains(&name) {
            return None;
        }
        self.formats
            .get(name)
            .cloned()
            .or_else(|| format::builtin(name))
    }

    fn known(&self, name: &str) -> bool {
        self.params.iter().any(|p| p == name)
            || OPERAND_NAMES.contains(&name)
            || self.formats.contains_key(name)
            || format::builtin(name).is_some()
            || Rounding::from_keyword(name).is_some()
            || OVERFLOW_RULES.contains(&name)
    }

    fn candidates(&self) -> Vec<&str> {
        let mut c: Vec<&str> = self.params.iter().map(|s| s.as_str()).collect();
        c.extend(OPERAND_NAMES);
        c.extend(self.formats.keys().map(|s| s.as_str()));
        c.extend(format::BUILTIN_NAMES.iter().copied());
        c.extend(Rounding::ALL.iter().map(|r| r.keyword()));
        c.extend(OVERFLOW_RULES);
        c
    }

    fn expr(&self, e: &Expr, diags: &mut Vec<Diag>) {
        match &e.kind {
            ExprKind::Int(_) | ExprKind::Str(_) => {}
            ExprKind::Tuple(items) => items.iter().for_each(|x| self.expr(x, diags)),
            ExprKind::Neg(x) => self.expr(x, diags),
            ExprKind::Binary(_, l, r) => {
                self.expr(l, diags);
                self.expr(r, diags);
            }
            ExprKind::Match(scrutinee, arms) => {
                self.expr(scrutinee, diags);
                for (pattern, value) in arms {
                    if let Some(p) = pattern {
                        self.expr(p, diags);
                    }
                    self.expr(value, diags);
                }
            }
            ExprKind::Path(head, prop) => {
                if !self.known(&head.name) {
                    let d = Diag::new(
                        Code::UnknownName,
                        head.span,
                        format!("unknown name `{}`", head.name),
                    )
                    .label("not defined");
                    diags.push(match closest(&head.name, self.candidates()) {
                        Some(c) => d.help(format!("did you mean `{c}`?")),
                        None => d.help("names are parameters, a, b, c, out, K, formats (f32, e4m3, ...), rounding modes (toward_zero, down, up, nearest_even, nearest_away) or overflow rules (inf, saturate, wrap)"),
                    });
                    return;
                }
                let Some(p) = prop else { return };
                match self.constant_format(&head.name) {
                    Some(f) => {
                        if let Err(d) = property(&super::eval::Value::Format(f), head, p) {
                            diags.push(d);
                        }
                    }
                    None if self.params.contains(&head.name)
                        || OPERAND_NAMES.contains(&head.name.as_str()) =>
                    {
                        // a format known only at instantiation: the property must exist
                        if !FORMAT_PROPERTIES.split(", ").any(|x| x == p.name) {
                            diags.push(
                                Diag::new(
                                    Code::UnknownProperty,
                                    p.span,
                                    format!("formats have no property `{}`", p.name),
                                )
                                .label("unknown property")
                                .help(match closest(&p.name, FORMAT_PROPERTIES.split(", ")) {
                                    Some(c) => format!("did you mean `{c}`? format properties: {FORMAT_PROPERTIES}"),
                                    None => format!("format properties: {FORMAT_PROPERTIES}"),
                                }),
                            );
                        }
                    }
                    None => diags.push(
                        Diag::new(
                            Code::Type,
                            head.span,
                            format!("`{}` is not a format, so it has no properties", head.name),
                        )
                        .label("a rounding mode or an overflow rule")
                        .help(format!("properties belong to formats: {FORMAT_PROPERTIES}")),
                    ),
                }
            }
        }
    }
}
