//! Values and expressions: what a spec expression evaluates to ([`Value`]), the names in
//! scope ([`Scope`]: bindings, formats, rounding and overflow keywords) and the typed
//! accessors the passes use (`expect_int`, `expect_format`, ...), each failing with a
//! located diagnostic.

use crate::ast::{BinOp, Expr, ExprKind, Ident};
use crate::diagnostic::{Code, Diag, closest};
use crate::exact::Rounding;
use crate::format::{self, Format, FormatKind};
use crate::ir::Overflow;
use std::collections::HashMap;

pub use crate::ir::Value;

impl Value {
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Value::Int(_) => "a number",
            Value::Overflow(_) => "an overflow rule",
            Value::Format(_) => "a format",
            Value::Rounding(_) => "a rounding mode",
            Value::Str(_) => "a string",
            Value::Tuple(_) => "a tuple",
        }
    }
}

/// The names an expression can see: bindings (parameters, `for` variables, the
/// instruction's operand formats) first, then user-defined formats, built-in formats,
/// rounding modes and overflow rules.
pub(super) struct Scope<'a> {
    pub(super) vars: HashMap<String, Value>,
    pub(super) formats: &'a HashMap<String, Format>,
}

impl Scope<'_> {
    pub(super) fn lookup(&self, name: &str) -> Option<Value> {
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
            .find(|o| o.keyword() == name)
            .map(Value::Overflow)
    }
}

pub(super) fn eval(e: &Expr, scope: &Scope) -> Result<Value, Diag> {
    match &e.kind {
        ExprKind::Int(i) => {
            if *i == i64::MIN {
                Err(Diag::new(Code::NumberRange, e.span, "number too large")
                    .label("does not fit in 64 bits"))
            } else {
                Ok(Value::Int(*i))
            }
        }
        ExprKind::Str(s) => interpolate(s, e, scope).map(Value::Str),
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
            v.checked_neg().map(Value::Int).ok_or_else(|| overflow(e))
        }
        ExprKind::Binary(op, l, r) => {
            let a = expect_int(l, scope)?;
            let b = expect_int(r, scope)?;
            let v = match op {
                BinOp::Add => a.checked_add(b),
                BinOp::Sub => a.checked_sub(b),
                BinOp::Mul => a.checked_mul(b),
                BinOp::Div => {
                    // (i64::MIN / -1 is the one quotient that does not fit)
                    if b == 0 || a.checked_rem(b).is_some_and(|r| r != 0) {
                        return Err(Diag::new(
                            Code::NumberRange,
                            e.span,
                            format!("{a} / {b} is not a whole number"),
                        )
                        .label("inexact division")
                        .help("division in a spec must be exact"));
                    }
                    a.checked_div(b)
                }
                BinOp::Pow => u32::try_from(b).ok().and_then(|b| a.checked_pow(b)),
            };
            v.map(Value::Int).ok_or_else(|| overflow(e))
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
                Code::NoMatch,
                e.span,
                format!("no arm of this match covers `{}`", v.show()),
            )
            .label(format!("`{}` is not matched", v.show()))
            .help("add an arm for it, or a catch-all `_ => ...`"))
        }
    }
}

/// A string with its `{NAME}` placeholders replaced by the values in scope, as an
/// instruction name template is (`"mma.m16n8k16.{D}.f16.f16.{D}"`).
fn interpolate(s: &str, e: &Expr, scope: &Scope) -> Result<String, Diag> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            return Err(
                Diag::new(Code::Syntax, e.span, "an unclosed `{` in a string")
                    .label("`{NAME}` needs its `}`")
                    .help("placeholders in strings are `{NAME}`, NAME a binding in scope"),
            );
        };
        let name = &rest[open + 1..open + close];
        match scope.lookup(name) {
            Some(v) => out.push_str(&v.show()),
            None => {
                return Err(Diag::new(
                    Code::UnknownName,
                    e.span,
                    format!("unknown name `{name}` in a string placeholder"),
                )
                .label(format!("`{{{name}}}` is not bound"))
                .help("placeholders in strings name a `for` binding or a parameter"));
            }
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Integer arithmetic in an expression that leaves 64 bits.
fn overflow(e: &Expr) -> Diag {
    Diag::new(Code::NumberRange, e.span, "arithmetic overflow")
        .label("this value does not fit in 64 bits")
        .help("exponents and widths in a spec are small integers; powers must have a non-negative exponent")
}

pub(super) fn unknown_name(id: &Ident, scope: &Scope) -> Diag {
    let mut candidates: Vec<String> = scope.vars.keys().cloned().collect();
    candidates.extend(scope.formats.keys().cloned());
    candidates.extend(format::BUILTIN_NAMES.iter().map(|s| s.to_string()));
    candidates.extend(Rounding::ALL.iter().map(|r| r.keyword().to_string()));
    let d = Diag::new(
        Code::UnknownName,
        id.span,
        format!("unknown name `{}`", id.name),
    )
    .label("not defined");
    match closest(&id.name, candidates.iter().map(|s| s.as_str())) {
        Some(c) => d.help(format!("did you mean `{c}`?")),
        None => d.help("names are parameters, `for` bindings, formats (f32, e4m3, ...) or rounding modes (toward_zero, down, up, nearest_even, nearest_away)"),
    }
}

pub(super) const FORMAT_PROPERTIES: &str = "mantissa, exponent, bias, emin, emax, bits, bytes";

pub(super) fn property(v: &Value, head: &Ident, p: &Ident) -> Result<Value, Diag> {
    let Value::Format(f) = v else {
        return Err(Diag::new(
            Code::Type,
            head.span,
            format!("`{}` is {}, which has no properties", head.name, v.kind()),
        )
        .label("not a format")
        .help(format!("properties belong to formats: {FORMAT_PROPERTIES}")));
    };
    let bad = || {
        Diag::new(
            Code::UnknownProperty,
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
                    Code::Type,
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

pub(super) fn expect_int(e: &Expr, scope: &Scope) -> Result<i64, Diag> {
    match eval(e, scope)? {
        Value::Int(i) => Ok(i),
        v => Err(type_error(e, "a number", &v)),
    }
}

pub(super) fn expect_format(e: &Expr, scope: &Scope) -> Result<Format, Diag> {
    match eval(e, scope)? {
        Value::Format(f) => Ok(f),
        v => Err(type_error(e, "a format", &v)),
    }
}

pub(super) fn expect_overflow(e: &Expr, scope: &Scope) -> Result<Overflow, Diag> {
    match eval(e, scope)? {
        Value::Overflow(o) => Ok(o),
        v => Err(type_error(e, "an overflow rule", &v).help("overflow rules: inf, saturate, wrap")),
    }
}

pub(super) fn expect_rounding(e: &Expr, scope: &Scope) -> Result<Rounding, Diag> {
    match eval(e, scope)? {
        Value::Rounding(r) => Ok(r),
        v => Err(type_error(e, "a rounding mode", &v)
            .help("rounding modes: toward_zero, down, up, nearest_even, nearest_away")),
    }
}

pub(super) fn type_error(e: &Expr, want: &str, got: &Value) -> Diag {
    Diag::new(
        Code::Type,
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
pub(super) fn power_of_two(e: &Expr, scope: &Scope) -> Result<i32, Diag> {
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
        return Err(Diag::new(
            Code::OutOfRange,
            e.span,
            format!("{v} is not a power of two"),
        )
        .label("expected 2^N")
        .help("write the threshold as a power of two, e.g. `overflow at 2^128`"));
    }
    Ok(v.trailing_zeros() as i32)
}

/// Check that an integer lies in a range.
pub(super) fn in_range(e: &Expr, v: i64, lo: i64, hi: i64, what: &str) -> Result<i64, Diag> {
    if v < lo || v > hi {
        Err(Diag::new(
            Code::OutOfRange,
            e.span,
            format!("{what} {v} is out of range"),
        )
        .label(format!("must be between {lo} and {hi}"))
        .help(format!("{what} must lie in {lo}..={hi}")))
    } else {
        Ok(v)
    }
}
