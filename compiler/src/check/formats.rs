//! User-defined formats: `format NAME { exponent = E, mantissa = M, ... }` checked field by
//! field into a [`Format`].

use super::eval::{Scope, expect_int, in_range};
use crate::ast::{self, Expr, ExprKind};
use crate::diagnostic::{Code, Diag, Span, closest};
use crate::format::{self, Format, FormatKind, Specials};
use std::collections::HashMap;

pub(super) fn define_format(
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
                Code::UnknownField,
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
                    Code::DuplicateName,
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
                    Diag::new(Code::Type, e.span, format!("`{key}` is `true` or `false`"))
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
            return Err(Diag::new(Code::MissingField, fd.name.span, format!("format `{}` needs `exponent`", fd.name.name))
                .label("no exponent width")
                .help("a float format needs at least `exponent = E, mantissa = M`; an integer one `integer = BITS`"));
        };
        let Some(m) = int_field("mantissa", 0, 52)? else {
            return Err(Diag::new(
                Code::MissingField,
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
                    Diag::new(Code::UnknownName, x.span, format!("unknown special-value policy `{}`", id.name))
                        .label("not a policy")
                        .help("policies: ieee (Inf and NaN), fn (no Inf, all-ones NaN), fnuz (no Inf, no -0, NaN = 0x80), none")
                })?,
                _ => return Err(Diag::new(Code::Type, x.span, "expected a special-value policy").label("expected ieee, fn, fnuz or none")),
            },
        };
        let subnormals = bool_field("subnormals")?.unwrap_or(true);
        let code_bits = signed as i64 + e + m;
        if code_bits > 64 {
            return Err(
                Diag::new(Code::OutOfRange, fd.span, "format is wider than 64 bits")
                    .label("too wide")
                    .help("formats up to 64 bits are supported"),
            );
        }
        let ignore_low = int_field("ignore_low", 0, 32)?.unwrap_or(0);
        let storage = int_field("storage", 1, 64)?.unwrap_or(code_bits + ignore_low);
        if storage < code_bits + ignore_low {
            let (x, _) = fields["storage"];
            return Err(Diag::new(
                Code::OutOfRange,
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
            return Err(Diag::new(Code::Type, x.span, "fnuz needs a sign bit")
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
