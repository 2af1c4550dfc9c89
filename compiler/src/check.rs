//! The checker: resolves names, expands instruction families, instantiates pipelines with
//! their arguments, validates every stage and computes the width each sum needs. It is the
//! only producer of [`ir::Spec`]; it collects every error it can before giving up.

// Diagnostics are plain values passed up by `?`; their size does not matter here.
#![allow(clippy::result_large_err)]

use crate::ast::{self, BinOp, Expr, ExprKind, Ident, Item, NamePart, StageKind};
use crate::diagnostic::{Diag, Span, closest};
use crate::exact::Rounding;
use crate::format::{self, Format, FormatKind, Specials};
use crate::ir::{self, *};
use std::collections::{BTreeMap, HashMap, HashSet};

/// A value an expression evaluates to.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    /// What happens on overflow: `inf`, `saturate`, `wrap`.
    Overflow(Overflow),
    Format(Format),
    Rounding(Rounding),
    Str(String),
    Tuple(Vec<Value>),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Int(_) => "a number",
            Value::Overflow(_) => "an overflow rule",
            Value::Format(_) => "a format",
            Value::Rounding(_) => "a rounding mode",
            Value::Str(_) => "a string",
            Value::Tuple(_) => "a tuple",
        }
    }
    /// How the value reads in an instruction name or a listing.
    pub fn show(&self) -> String {
        match self {
            Value::Int(i) => i.to_string(),
            Value::Overflow(o) => overflow_keyword(*o).to_string(),
            Value::Format(f) => f.name.clone(),
            Value::Rounding(r) => r.keyword().to_string(),
            Value::Str(s) => s.clone(),
            Value::Tuple(v) => format!(
                "({})",
                v.iter().map(|x| x.show()).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// Where a pipeline was declared: in the file being checked, or in the standard prelude
/// (whose spans mean nothing in the user's file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Local,
    Std,
}

struct Scope<'a> {
    vars: HashMap<String, Value>,
    formats: &'a HashMap<String, Format>,
}

impl Scope<'_> {
    fn lookup(&self, name: &str) -> Option<Value> {
        if let Some(v) = self.vars.get(name) {
            return Some(v.clone());
        }
        if let Some(f) = self.formats.get(name) {
            return Some(Value::Format(f.clone()));
        }
        if let Some(f) = format::builtin(name) {
            return Some(Value::Format(f));
        }
        if let Some(r) = Rounding::from_keyword(name) {
            return Some(Value::Rounding(r));
        }
        [Overflow::Inf, Overflow::Saturate, Overflow::Wrap]
            .into_iter()
            .find(|o| overflow_keyword(*o) == name)
            .map(Value::Overflow)
    }
}

fn eval(e: &Expr, scope: &Scope) -> Result<Value, Diag> {
    match &e.kind {
        ExprKind::Int(i) => {
            if *i == i64::MIN {
                Err(Diag::new("number-range", e.span, "number too large")
                    .label("does not fit in 64 bits"))
            } else {
                Ok(Value::Int(*i))
            }
        }
        ExprKind::Str(s) => Ok(Value::Str(s.clone())),
        ExprKind::Tuple(items) => Ok(Value::Tuple(
            items
                .iter()
                .map(|x| eval(x, scope))
                .collect::<Result<_, _>>()?,
        )),
        ExprKind::Path(head, prop) => {
            let v = scope
                .lookup(&head.name)
                .ok_or_else(|| unknown_name(head, scope))?;
            match prop {
                None => Ok(v),
                Some(p) => property(&v, head, p),
            }
        }
        ExprKind::Neg(x) => {
            let v = expect_int(x, scope)?;
            Ok(Value::Int(-v))
        }
        ExprKind::Binary(op, l, r) => {
            let a = expect_int(l, scope)?;
            let b = expect_int(r, scope)?;
            let v = match op {
                BinOp::Add => a.checked_add(b),
                BinOp::Sub => a.checked_sub(b),
                BinOp::Mul => a.checked_mul(b),
                BinOp::Div => {
                    if b == 0 || a % b != 0 {
                        return Err(Diag::new(
                            "number-range",
                            e.span,
                            format!("{a} / {b} is not a whole number"),
                        )
                        .label("inexact division")
                        .help("division in a spec must be exact"));
                    }
                    Some(a / b)
                }
                BinOp::Pow => u32::try_from(b).ok().and_then(|b| a.checked_pow(b)),
            };
            v.map(Value::Int).ok_or_else(|| {
                Diag::new("number-range", e.span, "arithmetic overflow")
                    .label("this value does not fit in 64 bits")
                    .help("exponents and widths in a spec are small integers; powers must have a non-negative exponent")
            })
        }
        ExprKind::Match(scrut, arms) => {
            let v = eval(scrut, scope)?;
            for (pat, val) in arms {
                match pat {
                    None => return eval(val, scope),
                    Some(p) => {
                        if eval(p, scope)? == v {
                            return eval(val, scope);
                        }
                    }
                }
            }
            Err(Diag::new(
                "no-match",
                e.span,
                format!("no arm of this match covers `{}`", v.show()),
            )
            .label(format!("`{}` is not matched", v.show()))
            .help("add an arm for it, or a catch-all `_ => ...`"))
        }
    }
}

fn unknown_name(id: &Ident, scope: &Scope) -> Diag {
    let mut candidates: Vec<String> = scope.vars.keys().cloned().collect();
    candidates.extend(scope.formats.keys().cloned());
    candidates.extend(format::BUILTIN_NAMES.iter().map(|s| s.to_string()));
    candidates.extend(Rounding::ALL.iter().map(|r| r.keyword().to_string()));
    let d = Diag::new(
        "unknown-name",
        id.span,
        format!("unknown name `{}`", id.name),
    )
    .label("not defined");
    match closest(&id.name, candidates.iter().map(|s| s.as_str())) {
        Some(c) => d.help(format!("did you mean `{c}`?")),
        None => d.help("names are parameters, `for` bindings, formats (f32, e4m3, ...) or rounding modes (toward_zero, down, up, nearest_even, nearest_away)"),
    }
}

const FORMAT_PROPERTIES: &str = "mantissa, exponent, bias, emin, emax, bits, bytes";

fn property(v: &Value, head: &Ident, p: &Ident) -> Result<Value, Diag> {
    let Value::Format(f) = v else {
        return Err(Diag::new(
            "type",
            head.span,
            format!("`{}` is {}, which has no properties", head.name, v.kind()),
        )
        .label("not a format")
        .help(format!("properties belong to formats: {FORMAT_PROPERTIES}")));
    };
    let bad = || {
        Diag::new(
            "unknown-property",
            p.span,
            format!("format `{}` has no property `{}`", f.name, p.name),
        )
        .label("unknown property")
        .help(format!("format properties: {FORMAT_PROPERTIES}"))
    };
    let bits = f.storage_bits() as i64;
    let v = match (p.name.as_str(), &f.kind) {
        ("bits", _) => bits,
        ("bytes", _) => {
            if bits % 8 != 0 {
                return Err(Diag::new(
                    "type",
                    p.span,
                    format!("`{}` is {} bits, not a whole number of bytes", f.name, bits),
                )
                .label("not whole bytes")
                .help("give lengths of sub-byte formats in elements"));
            }
            bits / 8
        }
        ("mantissa", FormatKind::Float(x)) => x.mantissa_bits as i64,
        ("exponent", FormatKind::Float(x)) => x.exponent_bits as i64,
        ("bias", FormatKind::Float(x)) => x.bias as i64,
        ("emin", FormatKind::Float(x)) => x.min_exponent() as i64,
        ("emax", FormatKind::Float(x)) => x.max_exponent() as i64,
        _ => return Err(bad()),
    };
    Ok(Value::Int(v))
}

fn expect_int(e: &Expr, scope: &Scope) -> Result<i64, Diag> {
    match eval(e, scope)? {
        Value::Int(i) => Ok(i),
        v => Err(type_error(e, "a number", &v)),
    }
}

fn expect_format(e: &Expr, scope: &Scope) -> Result<Format, Diag> {
    match eval(e, scope)? {
        Value::Format(f) => Ok(f),
        v => Err(type_error(e, "a format", &v)),
    }
}

fn overflow_keyword(o: Overflow) -> &'static str {
    match o {
        Overflow::Inf => "inf",
        Overflow::Saturate => "saturate",
        Overflow::Wrap => "wrap",
    }
}

fn expect_overflow(e: &Expr, scope: &Scope) -> Result<Overflow, Diag> {
    match eval(e, scope)? {
        Value::Overflow(o) => Ok(o),
        v => Err(type_error(e, "an overflow rule", &v).help("overflow rules: inf, saturate, wrap")),
    }
}

fn expect_rounding(e: &Expr, scope: &Scope) -> Result<Rounding, Diag> {
    match eval(e, scope)? {
        Value::Rounding(r) => Ok(r),
        v => Err(type_error(e, "a rounding mode", &v)
            .help("rounding modes: toward_zero, down, up, nearest_even, nearest_away")),
    }
}

fn type_error(e: &Expr, want: &str, got: &Value) -> Diag {
    Diag::new(
        "type",
        e.span,
        format!("expected {want}, found {} `{}`", got.kind(), got.show()),
    )
    .label(format!("expected {want}"))
    .help(match want {
        "a number" => "numbers are integer literals, arithmetic on them, or format properties such as `f16.bytes`",
        "a format" => "formats are built-in names (f32, f16, e4m3, ue8m0, s8, ...) or ones defined with `format`",
        _ => "see docs/language.md, section Expressions",
    })
}

/// The exponent of a power of two written `2^N` (N may be large or negative) or as a number.
fn power_of_two(e: &Expr, scope: &Scope) -> Result<i32, Diag> {
    if let ExprKind::Binary(BinOp::Pow, base, exp) = &e.kind
        && base.kind == ExprKind::Int(2)
    {
        return Ok(in_range(
            exp,
            expect_int(exp, scope)?,
            -100_000,
            100_000,
            "an exponent",
        )? as i32);
    }
    let v = expect_int(e, scope)?;
    if v <= 0 || v.count_ones() != 1 {
        return Err(
            Diag::new("out-of-range", e.span, format!("{v} is not a power of two"))
                .label("expected 2^N")
                .help("write the threshold as a power of two, e.g. `overflow at 2^128`"),
        );
    }
    Ok(v.trailing_zeros() as i32)
}

/// Check that an integer lies in a range.
fn in_range(e: &Expr, v: i64, lo: i64, hi: i64, what: &str) -> Result<i64, Diag> {
    if v < lo || v > hi {
        Err(Diag::new(
            "out-of-range",
            e.span,
            format!("{what} {v} is out of range"),
        )
        .label(format!("must be between {lo} and {hi}"))
        .help(format!("{what} must lie in {lo}..={hi}")))
    } else {
        Ok(v)
    }
}

// ------------------------------------------------------------------------------------
// The whole-file check.

struct PipelineEntry<'a> {
    decl: &'a ast::PipelineDecl,
    origin: Origin,
}

/// Check a parsed file. `std` is the parsed standard prelude, used when the file says
/// `import std`.
pub fn check(file: &ast::File, std: &ast::File) -> Result<ir::Spec, Vec<Diag>> {
    let mut diags: Vec<Diag> = vec![];
    let mut arch: Option<(String, Option<String>, Span)> = None;
    let mut formats: HashMap<String, Format> = HashMap::new();
    let mut format_spans: HashMap<String, Span> = HashMap::new();
    let mut pipelines: BTreeMap<String, PipelineEntry> = BTreeMap::new();

    for item in &std.items {
        if let Item::Pipeline(p) = item {
            pipelines.insert(
                p.name.name.clone(),
                PipelineEntry {
                    decl: p,
                    origin: Origin::Std,
                },
            );
        }
    }
    let imports_std = file
        .items
        .iter()
        .any(|i| matches!(i, Item::Import { name, .. } if name.name == "std"));
    if !imports_std {
        pipelines.clear();
    }

    for item in &file.items {
        match item {
            Item::Arch { name, title, span } => {
                if let Some((_, _, first)) = &arch {
                    diags.push(
                        Diag::new(
                            "duplicate-arch",
                            *span,
                            "a spec file declares one architecture",
                        )
                        .label("second `arch`")
                        .also(*first, "first declared here")
                        .help("split the instructions of each architecture into its own file"),
                    );
                } else {
                    arch = Some((name.name.clone(), title.clone(), *span));
                }
            }
            Item::Import { name, .. } => {
                if name.name != "std" {
                    diags.push(
                        Diag::new(
                            "unknown-import",
                            name.span,
                            format!("unknown library `{}`", name.name),
                        )
                        .label("no such library")
                        .help(
                            "the only library is `std`, the standard prelude of MMA-Sim pipelines",
                        ),
                    );
                }
            }
            Item::Format(fd) => {
                if let Some(prev) = format_spans.get(&fd.name.name) {
                    diags.push(
                        Diag::new(
                            "duplicate-name",
                            fd.name.span,
                            format!("format `{}` is defined twice", fd.name.name),
                        )
                        .label("redefined here")
                        .also(*prev, "first defined here")
                        .help("rename one of them"),
                    );
                    continue;
                }
                if format::builtin(&fd.name.name).is_some() {
                    diags.push(
                        Diag::new(
                            "duplicate-name",
                            fd.name.span,
                            format!("`{}` is a built-in format", fd.name.name),
                        )
                        .label("shadows a built-in format")
                        .help("choose another name; built-in formats cannot be redefined"),
                    );
                    continue;
                }
                match define_format(fd, &formats) {
                    Ok(f) => {
                        format_spans.insert(fd.name.name.clone(), fd.name.span);
                        formats.insert(fd.name.name.clone(), f);
                    }
                    Err(mut d) => diags.append(&mut d),
                }
            }
            Item::Pipeline(p) => {
                if let Some(prev) = pipelines.get(&p.name.name)
                    && prev.origin == Origin::Local
                {
                    diags.push(
                        Diag::new(
                            "duplicate-name",
                            p.name.span,
                            format!("pipeline `{}` is defined twice", p.name.name),
                        )
                        .label("redefined here")
                        .also(prev.decl.name.span, "first defined here")
                        .help("rename one of them"),
                    );
                    continue;
                }
                let mut seen: HashMap<&str, Span> = HashMap::new();
                for param in &p.params {
                    if let Some(prev) = seen.insert(&param.name.name, param.name.span) {
                        diags.push(
                            Diag::new(
                                "duplicate-name",
                                param.name.span,
                                format!("parameter `{}` is declared twice", param.name.name),
                            )
                            .label("again here")
                            .also(prev, "first here")
                            .help("each parameter needs its own name"),
                        );
                    }
                }
                pipelines.insert(
                    p.name.name.clone(),
                    PipelineEntry {
                        decl: p,
                        origin: Origin::Local,
                    },
                );
            }
            Item::Instruction(_) => {}
        }
    }

    // a file without instructions is a library of formats and pipelines and needs no arch
    let has_instructions = file.items.iter().any(|i| matches!(i, Item::Instruction(_)));
    if arch.is_none() && has_instructions {
        diags.push(
            Diag::new(
                "missing-arch",
                Span::new(0, 0),
                "the spec file does not name its architecture",
            )
            .label("expected `arch NAME` here")
            .help("start the file with e.g. `arch hopper \"NVIDIA Hopper (sm_90a)\"`"),
        );
    }

    let mut instructions: Vec<Instruction> = vec![];
    let mut names: HashMap<String, Span> = HashMap::new();
    // instructions are checked once the formats they may name are sound
    let formats_ok = diags.iter().all(|d| {
        !matches!(
            d.code,
            "unknown-field" | "missing-field" | "out-of-range" | "type" | "unknown-name"
        )
    });
    for item in &file.items {
        if let Item::Instruction(decl) = item
            && formats_ok
        {
            match expand_family(decl, &formats, &pipelines) {
                Ok(list) => {
                    for inst in list {
                        if let Some(prev) = names.get(&inst.name) {
                            diags.push(
                                Diag::new(
                                    "duplicate-instruction",
                                    decl.name_span,
                                    format!("instruction `{}` is declared twice", inst.name),
                                )
                                .label("declares it again")
                                .also(*prev, "already declared here")
                                .help("remove one declaration, or narrow a family's `for` lists"),
                            );
                            continue;
                        }
                        names.insert(inst.name.clone(), decl.name_span);
                        instructions.push(inst);
                    }
                }
                Err(mut d) => diags.append(&mut d),
            }
        }
    }

    // the same mistake inside a family is reported once, not once per expansion
    let mut seen = HashSet::new();
    diags.retain(|d| seen.insert((d.code, d.span, d.message.clone())));
    if diags.is_empty() {
        let (arch, title) = arch.map(|(a, t, _)| (a, t)).unwrap_or_default();
        Ok(ir::Spec {
            arch,
            title,
            instructions,
        })
    } else {
        diags.sort_by_key(|d| d.span.start);
        Err(diags)
    }
}

fn define_format(
    fd: &ast::FormatDecl,
    formats: &HashMap<String, Format>,
) -> Result<Format, Vec<Diag>> {
    let scope = Scope {
        vars: HashMap::new(),
        formats,
    };
    let mut diags = vec![];
    let mut fields: HashMap<&str, (&Expr, Span)> = HashMap::new();
    const KEYS: &[&str] = &[
        "exponent",
        "mantissa",
        "bias",
        "specials",
        "signed",
        "subnormals",
        "storage",
        "ignore_low",
        "integer",
    ];
    for (k, v) in &fd.fields {
        if !KEYS.contains(&k.name.as_str()) {
            let d = Diag::new(
                "unknown-field",
                k.span,
                format!("formats have no field `{}`", k.name),
            )
            .label("unknown field");
            diags.push(match closest(&k.name, KEYS.iter().copied()) {
                Some(c) => d.help(format!("did you mean `{c}`? fields: {}", KEYS.join(", "))),
                None => d.help(format!("fields: {}", KEYS.join(", "))),
            });
        } else if let Some((_, prev)) = fields.insert(&k.name, (v, k.span)) {
            diags.push(
                Diag::new(
                    "duplicate-name",
                    k.span,
                    format!("field `{}` is given twice", k.name),
                )
                .label("again here")
                .also(prev, "first here")
                .help("give each field once"),
            );
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    let int_field = |key: &str, lo: i64, hi: i64| -> Result<Option<i64>, Diag> {
        match fields.get(key) {
            None => Ok(None),
            Some((e, _)) => {
                let v = expect_int(e, &scope)?;
                in_range(e, v, lo, hi, &format!("`{key}`")).map(Some)
            }
        }
    };
    let bool_field = |key: &str| -> Result<Option<bool>, Diag> {
        match fields.get(key) {
            None => Ok(None),
            Some((e, _)) => match &e.kind {
                ExprKind::Path(id, None) if id.name == "true" || id.name == "false" => {
                    Ok(Some(id.name == "true"))
                }
                _ => Err(
                    Diag::new("type", e.span, format!("`{key}` is `true` or `false`"))
                        .label("expected true or false")
                        .help(format!("write `{key} = true` or `{key} = false`")),
                ),
            },
        }
    };
    let result = (|| -> Result<Format, Diag> {
        if let Some(bits) = int_field("integer", 1, 32)? {
            let signed = bool_field("signed")?.unwrap_or(true);
            return Ok(Format {
                name: fd.name.name.clone(),
                kind: FormatKind::Int(format::IntFormat {
                    bits: bits as u32,
                    signed,
                }),
            });
        }
        let Some(e) = int_field("exponent", 1, 15)? else {
            return Err(Diag::new("missing-field", fd.name.span, format!("format `{}` needs `exponent`", fd.name.name))
                .label("no exponent width")
                .help("a float format needs at least `exponent = E, mantissa = M`; an integer one `integer = BITS`"));
        };
        let Some(m) = int_field("mantissa", 0, 52)? else {
            return Err(Diag::new(
                "missing-field",
                fd.name.span,
                format!("format `{}` needs `mantissa`", fd.name.name),
            )
            .label("no mantissa width")
            .help("add `mantissa = M` (fraction bits, without the hidden bit)"));
        };
        let signed = bool_field("signed")?.unwrap_or(true);
        let default_bias = (1i64 << (e - 1)) - 1;
        let bias = int_field("bias", -4096, 4096)?.unwrap_or(default_bias);
        let specials = match fields.get("specials") {
            None => Specials::Ieee,
            Some((x, _)) => match &x.kind {
                ExprKind::Path(id, None) => Specials::from_keyword(&id.name).ok_or_else(|| {
                    Diag::new("unknown-name", x.span, format!("unknown special-value policy `{}`", id.name))
                        .label("not a policy")
                        .help("policies: ieee (Inf and NaN), fn (no Inf, all-ones NaN), fnuz (no Inf, no -0, NaN = 0x80), none")
                })?,
                _ => return Err(Diag::new("type", x.span, "expected a special-value policy").label("expected ieee, fn, fnuz or none")),
            },
        };
        let subnormals = bool_field("subnormals")?.unwrap_or(true);
        let code_bits = signed as i64 + e + m;
        if code_bits > 64 {
            return Err(
                Diag::new("out-of-range", fd.span, "format is wider than 64 bits")
                    .label("too wide")
                    .help("formats up to 64 bits are supported"),
            );
        }
        let ignore_low = int_field("ignore_low", 0, 32)?.unwrap_or(0);
        let storage = int_field("storage", 1, 64)?.unwrap_or(code_bits + ignore_low);
        if storage < code_bits + ignore_low {
            let (x, _) = fields["storage"];
            return Err(Diag::new(
                "out-of-range",
                x.span,
                format!(
                    "storage of {storage} bits cannot hold {} code bits",
                    code_bits + ignore_low
                ),
            )
            .label("too small")
            .help("storage must be at least sign + exponent + mantissa (+ ignore_low) bits"));
        }
        if specials == Specials::Fnuz && !signed {
            let (x, _) = fields["specials"];
            return Err(Diag::new("type", x.span, "fnuz needs a sign bit")
                .label("NaN is the negative-zero code")
                .help("use `fn` or `none` for unsigned formats"));
        }
        Ok(Format {
            name: fd.name.name.clone(),
            kind: FormatKind::Float(format::FloatFormat {
                exponent_bits: e as u32,
                mantissa_bits: m as u32,
                bias: bias as i32,
                signed,
                specials,
                subnormals,
                storage_bits: storage as u32,
                ignored_low_bits: ignore_low as u32,
            }),
        })
    })();
    result.map_err(|d| vec![d])
}

// ------------------------------------------------------------------------------------
// Instruction families.

/// The most instructions one family may expand to.
const MAX_FAMILY: usize = 100_000;

fn expand_family(
    decl: &ast::InstructionDecl,
    formats: &HashMap<String, Format>,
    pipelines: &BTreeMap<String, PipelineEntry>,
) -> Result<Vec<Instruction>, Vec<Diag>> {
    let mut diags = vec![];
    // every combination of the `for` bindings
    let mut combos: Vec<HashMap<String, Value>> = vec![HashMap::new()];
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
                    if t < f || (t - f) / s > 4096 {
                        return Err(Diag::new(
                            "out-of-range",
                            b.span,
                            "this range is empty or too long",
                        )
                        .label(format!("{f}..{t} step {s}"))
                        .help("ranges are inclusive, increasing and at most 4096 values long"));
                    }
                    Ok((0..=(t - f) / s)
                        .map(|i| (Value::Int(f + i * s), b.span))
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
                                    "type",
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
                next.push(c);
            }
        }
        combos = next;
        if combos.len() > MAX_FAMILY {
            diags.push(
                Diag::new(
                    "out-of-range",
                    b.span,
                    format!("this family expands to more than {MAX_FAMILY} instructions"),
                )
                .label("too many combinations")
                .help("split the family, or narrow its `for` lists"),
            );
            return Err(diags);
        }
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
                    "unknown-name",
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
                "missing-uses",
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
            "unknown-name",
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
    let mut out = vec![];
    for combo in combos {
        match instantiate(decl, uses, entry, combo, formats) {
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

fn instantiate(
    decl: &ast::InstructionDecl,
    uses: &ast::Uses,
    entry: &PipelineEntry,
    vars: HashMap<String, Value>,
    formats: &HashMap<String, Format>,
) -> Result<Instruction, Vec<Diag>> {
    let scope = Scope { vars, formats };
    let mut diags = vec![];
    let name: String = decl
        .name
        .iter()
        .map(|p| match p {
            NamePart::Text(t) => t.clone(),
            NamePart::Placeholder(id) => {
                scope.lookup(&id.name).map(|v| v.show()).unwrap_or_default()
            }
        })
        .collect();

    // shape
    let shape = match &decl.shape {
        None => {
            diags.push(
                Diag::new(
                    "missing-shape",
                    decl.name_span,
                    format!("instruction `{name}` has no shape"),
                )
                .label("M x N x K unknown")
                .help("add `shape M x N x K`, e.g. `shape 16 x 8 x 16`"),
            );
            None
        }
        Some((dims, _)) => {
            let mut v = [0u32; 3];
            let mut ok = true;
            for (i, e) in dims.iter().enumerate() {
                match expect_int(e, &scope).and_then(|x| in_range(e, x, 1, 65536, "a dimension")) {
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
    };

    // operand types
    let mut types: HashMap<char, Format> = HashMap::new();
    for (op, e, sp) in &decl.types {
        match expect_format(e, &scope) {
            Ok(f) => {
                if types.insert(*op, f).is_some() {
                    diags.push(
                        Diag::new(
                            "duplicate-name",
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
                    "missing-type",
                    decl.name_span,
                    format!("instruction `{name}` does not give the type of `{op}`"),
                )
                .label(format!("`{op}` has no type"))
                .help("add `types a = ..., b = ..., c = ..., d = ...`"),
            );
        }
    }

    // scale factors
    let scale = match &decl.scale {
        None => None,
        Some((fe, be, _)) => match (
            expect_format(fe, &scope),
            expect_int(be, &scope).and_then(|b| in_range(be, b, 1, 65536, "a block size")),
        ) {
            (Ok(f), Ok(b)) => {
                if f.as_float().is_none() {
                    diags.push(
                        Diag::new(
                            "type",
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
        },
    };
    if let (Some(s), Some(sh)) = (&scale, shape)
        && sh.k % s.block != 0
    {
        let (_, be, _) = decl.scale.as_ref().unwrap();
        diags.push(
            Diag::new(
                "divisibility",
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
    if !diags.is_empty() {
        return Err(diags);
    }
    let shape = shape.unwrap();
    let ctx = Ctx {
        k: shape.k,
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

    // bind the pipeline's parameters
    let p = entry.decl;
    let mut pscope = Scope {
        vars: HashMap::new(),
        formats,
    };
    for (n, f) in [("a", &ctx.a), ("b", &ctx.b), ("c", &ctx.c), ("out", &ctx.d)] {
        pscope.vars.insert(n.to_string(), Value::Format(f.clone()));
    }
    pscope
        .vars
        .insert("K".to_string(), Value::Int(shape.k as i64));
    let mut given: HashMap<String, (Value, Span)> = HashMap::new();
    for (i, arg) in uses.args.iter().enumerate() {
        let pname = match &arg.name {
            Some(n) => {
                if !p.params.iter().any(|q| q.name.name == n.name) {
                    let d = Diag::new(
                        "unknown-parameter",
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
                                d.help(format!("did you mean `{c}`? its parameters: {list}"))
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
                            "wrong-arguments",
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
        match eval(&arg.value, &scope) {
            Ok(v) => {
                if given.insert(pname.clone(), (v, arg.value.span)).is_some() {
                    diags.push(
                        Diag::new(
                            "duplicate-name",
                            arg.value.span,
                            format!("parameter `{pname}` is given twice"),
                        )
                        .label("again here")
                        .help("give each argument once"),
                    );
                }
            }
            Err(d) => diags.push(d),
        }
    }
    let mut arguments = vec![];
    for q in &p.params {
        let v = match given.remove(&q.name.name) {
            Some((v, _)) => v,
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
                            "missing-argument",
                            uses.span,
                            format!("`{}` needs an argument for `{}`", p.name.name, q.name.name),
                        )
                        .label(format!("`{}` is not given", q.name.name))
                        .help(format!("add `{} = ...` to the arguments", q.name.name)),
                    );
                    continue;
                }
            },
        };
        arguments.push((q.name.name.clone(), v.show()));
        pscope.vars.insert(q.name.name.clone(), v);
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    let pipeline = build_pipeline(p, &pscope, &ctx)
        .map_err(|ds| ds.into_iter().map(|d| ctx.relocate(d)).collect::<Vec<_>>())?;
    Ok(Instruction {
        name,
        shape,
        a: ctx.a,
        b: ctx.b,
        c: ctx.c,
        d: ctx.d,
        scale,
        pipeline_name: p.name.name.clone(),
        arguments,
        pipeline,
        span: decl.span,
    })
}

/// What a pipeline is instantiated for.
struct Ctx {
    k: u32,
    a: Format,
    b: Format,
    c: Format,
    d: Format,
    scale: Option<ScaleSpec>,
    uses_span: Span,
    origin: Origin,
    pipeline: String,
    instruction: String,
}

impl Ctx {
    /// Errors inside a std pipeline point at the `uses` line of the user's file.
    fn relocate(&self, mut d: Diag) -> Diag {
        match self.origin {
            Origin::Local => {
                d.secondary
                    .push((self.uses_span, format!("for `{}`", self.instruction)));
                d
            }
            Origin::Std => {
                d.message = format!("{} (in std pipeline `{}`)", d.message, self.pipeline);
                d.label = format!("{} (first for `{}`)", d.label, self.instruction);
                d.span = self.uses_span;
                d.secondary.clear();
                d
            }
        }
    }
}

fn stage_name(k: &StageKind) -> &'static str {
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

fn build_pipeline(p: &ast::PipelineDecl, scope: &Scope, ctx: &Ctx) -> Result<Pipeline, Vec<Diag>> {
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

fn misplaced(s: &ast::Stage, kind: &str, help: &str) -> Diag {
    Diag::new(
        "misplaced-stage",
        s.span,
        format!("`{}` has no meaning in {kind}", stage_name(&s.kind)),
    )
    .label("not allowed here")
    .help(help.to_string())
}

fn conditioning_of(p: &ast::PipelineDecl) -> Conditioning {
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

fn nan_policy(id: &Ident) -> Result<NanPolicy, Diag> {
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

fn float_of(f: &Format, span: Span, role: &str) -> Result<(), Diag> {
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

fn arithmetic(
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

fn build_sequential(
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
                                return Err(Diag::new("misplaced-stage", s.span, "an exact product has nothing to flush")
                                    .label("exact products are never subnormal in a format")
                                    .help("use `multiply round to f32 nearest_even, flush subnormal keep sign`"));
                            }
                            ProductRule::Exact
                        }
                        ast::MultiplyKind::Round { format, rounding } => ProductRule::Rounded(
                            arithmetic(format, rounding, *flush_keep_sign, scope, s.span)?,
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
                            "out-of-range",
                            size.span,
                            format!("pairwise groups of {g} do not form a binary tree"),
                        )
                        .label("not a power of two")
                        .help("use groups of 2, 4, 8, ..."));
                    }
                    if !ctx.k.is_multiple_of(g) {
                        return Err(divisibility(size.span, ctx.k, g, "pairwise group size"));
                    }
                    pairwise = Some((
                        g,
                        arithmetic(format, rounding, *flush_keep_sign, scope, s.span)?,
                    ));
                }
                StageKind::Accumulate {
                    format,
                    rounding,
                    flush_keep_sign,
                } => {
                    let a = arithmetic(format, rounding, *flush_keep_sign, scope, s.span)?;
                    if a.format != ctx.d || ctx.c != ctx.d {
                        return Err(Diag::new("type", format.span, format!("accumulating in `{}` but c is `{}` and d is `{}`", a.format.name, ctx.c.name, ctx.d.name))
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

fn divisibility(span: Span, k: u32, by: u32, what: &str) -> Diag {
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

fn build_integer(p: &ast::PipelineDecl, scope: &Scope, ctx: &Ctx) -> Result<Pipeline, Vec<Diag>> {
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
                    return Err(Diag::new("rounding-not-allowed", e.span, "integer results are exact: there is nothing to round")
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
                            "type",
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
                                "bad-overflow",
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
                    "type",
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
            Diag::new("type", ctx.uses_span, "xor/and popc take b1 operands")
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

fn missing_normalize(p: &ast::PipelineDecl) -> Diag {
    Diag::new(
        "missing-normalize",
        p.name.span,
        format!("pipeline `{}` never produces d", p.name.name),
    )
    .label("no `normalize to out`")
    .help("end the pipeline with `normalize to out round MODE`")
}

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

fn build_fused(p: &ast::PipelineDecl, scope: &Scope, ctx: &Ctx) -> Result<Pipeline, Vec<Diag>> {
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
