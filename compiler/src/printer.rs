//! The IR printer: one checked instruction written back as a standalone `.mma` spec, with
//! every parameter resolved to a number (`mmac show`). Checking the printed text gives the
//! same IR again (tested for every instruction of the spec library).

use crate::exact::Rounding;
use crate::format::{self, Format, FormatKind};
use crate::ir::*;
use crate::valid::ArithmeticInfo;
use std::fmt::Write;

/// Print `inst` as a spec of architecture `arch`: formats it needs, its pipeline (named
/// after the original, with no parameters) and the instruction. `info` (the validator's)
/// gives the width of each sum, shown as a comment.
pub fn print_instruction(arch: &str, inst: &Instruction, info: &ArithmeticInfo) -> String {
    let mut out = format!("arch {arch}\n\n");
    let mut formats: Vec<&Format> = vec![
        &inst.arithmetic.a,
        &inst.arithmetic.b,
        &inst.arithmetic.c,
        &inst.arithmetic.d,
    ];
    if let Some(s) = &inst.arithmetic.scale {
        formats.push(&s.format);
    }
    let mut declared: Vec<String> = vec![];
    for f in formats {
        if format::builtin(&f.name).as_ref() != Some(f) && !declared.contains(&f.name) {
            declared.push(f.name.clone());
            out.push_str(&format_decl(f));
        }
    }
    let mut extra = String::new();
    let body = pipeline_body(&inst.arithmetic.pipeline, info, &mut extra);
    out.push_str(&extra);
    if !declared.is_empty() || !extra.is_empty() {
        out.push('\n');
    }
    let args: Vec<String> = inst
        .provenance
        .arguments
        .iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    let _ = writeln!(
        out,
        "// {}({}), resolved",
        inst.provenance.pipeline,
        args.join(", ")
    );
    let _ = writeln!(
        out,
        "pipeline {}() {{\n{body}}}\n",
        inst.provenance.pipeline
    );
    let _ = writeln!(out, "instruction {} {{", inst.name);
    let _ = writeln!(
        out,
        "    shape {} x {} x {}",
        inst.m, inst.n, inst.arithmetic.k
    );
    let _ = writeln!(
        out,
        "    types a = {}, b = {}, c = {}, d = {}",
        inst.arithmetic.a.name,
        inst.arithmetic.b.name,
        inst.arithmetic.c.name,
        inst.arithmetic.d.name
    );
    if let Some(s) = &inst.arithmetic.scale {
        let _ = writeln!(out, "    scale {} block {}", s.format.name, s.block);
    }
    let _ = writeln!(out, "    uses {}()\n}}", inst.provenance.pipeline);
    out
}

fn format_decl(f: &Format) -> String {
    match &f.kind {
        FormatKind::Int(i) => format!(
            "format {} {{ integer = {}, signed = {} }}\n",
            f.name, i.bits, i.signed
        ),
        FormatKind::Float(x) => format!(
            "format {} {{ exponent = {}, mantissa = {}, bias = {}, specials = {}, signed = {}, subnormals = {}, storage = {}, ignore_low = {} }}\n",
            f.name,
            x.exponent_bits,
            x.mantissa_bits,
            x.bias,
            x.specials.keyword(),
            x.signed,
            x.subnormals,
            x.storage_bits,
            x.ignored_low_bits
        ),
    }
}

fn mode(r: Rounding) -> &'static str {
    r.keyword()
}

fn flush_line(c: &Conditioning) -> Option<String> {
    let ops: Vec<&str> = [(c.flush_a, "a"), (c.flush_b, "b"), (c.flush_c, "c")]
        .into_iter()
        .filter(|x| x.0)
        .map(|x| x.1)
        .collect();
    (!ops.is_empty()).then(|| format!("    flush subnormal {} to zero\n", ops.join(", ")))
}

fn keep_sign(a: &RoundedOp) -> &'static str {
    if a.flush_keep_sign {
        ", flush subnormal keep sign"
    } else {
        ""
    }
}

/// A format whose exponent floor is `min_exponent`, for `normalize range`: a built-in one
/// when there is one, else a declared helper format.
fn range_format(min_exponent: i32, extra: &mut String) -> String {
    for name in ["f32", "f16", "f64", "bf16"] {
        let f = format::builtin(name).unwrap();
        if f.as_float().unwrap().min_exponent() == min_exponent {
            return name.to_string();
        }
    }
    let name = format!("range_{}", min_exponent.unsigned_abs());
    let decl = format!(
        "format {name} {{ exponent = 15, mantissa = 52, bias = {} }}\n",
        1 - min_exponent as i64
    );
    if !extra.contains(&decl) {
        extra.push_str(&decl);
    }
    name
}

fn pipeline_body(p: &Pipeline, info: &ArithmeticInfo, extra: &mut String) -> String {
    let mut s = String::new();
    match p {
        Pipeline::Fused(f) => {
            let _ = writeln!(s, "    chain every {}", f.chain);
            if let Some(l) = flush_line(&f.conditioning) {
                s.push_str(&l);
            }
            let mut m = String::from("    multiply exact");
            if f.scaled_products {
                m.push_str(", scaled");
            }
            if let Some(x) = f.product_overflow {
                let _ = write!(m, ", overflow at 2^{x}");
            }
            let _ = writeln!(s, "{m}");
            for (class, z) in [
                ("products", f.zero_exponent.products),
                ("c", f.zero_exponent.c),
                ("groups", f.zero_exponent.groups),
            ] {
                match z {
                    ZeroExponent::Natural => {}
                    ZeroExponent::Fixed(e) => {
                        let _ = writeln!(s, "    zero exponent {e} for {class}");
                    }
                    ZeroExponent::Never => {
                        let _ = writeln!(s, "    zero exponent never for {class}");
                    }
                }
            }
            if let Some(g) = f.grouping {
                let _ = writeln!(
                    s,
                    "    group {} products exact{} as blocks",
                    g.size,
                    if g.scaled { ", scaled" } else { "" }
                );
            }
            for (i, n) in f.nodes.iter().enumerate() {
                if n.terms.iter().all(|t| t.keep.is_none()) {
                    s.push_str("    sum exact\n");
                    continue;
                }
                let terms: Vec<String> = n
                    .terms
                    .iter()
                    .map(|t| {
                        let src = match t.source {
                            TermSource::Products(ProductsPart::All) => "products".to_string(),
                            TermSource::Products(ProductsPart::Even) => "products.even".to_string(),
                            TermSource::Products(ProductsPart::Odd) => "products.odd".to_string(),
                            TermSource::C => "c".to_string(),
                            TermSource::Groups => "blocks".to_string(),
                            TermSource::Node(j) => format!("n{j}"),
                        };
                        let mut t2 = src;
                        if let Some((fb, r)) = t.keep {
                            let _ = write!(t2, " keep {fb} bits round {}", mode(r));
                        }
                        if let Some(d) = t.drop_below {
                            let _ = write!(t2, " drop below {d}");
                        }
                        t2
                    })
                    .collect();
                let reference = match n.reference {
                    Reference::MaxExponent => "max exponent".to_string(),
                    Reference::Fixed(e) => format!("exponent {e}"),
                };
                let name = if i + 1 < f.nodes.len() {
                    format!(" as n{i}")
                } else {
                    String::new()
                };
                let _ = writeln!(
                    s,
                    "    align {} to {reference}{name}    // {}-bit sum",
                    terms.join(", "),
                    info.fused.as_ref().map_or(0, |fi| fi.nodes[i].width_bits)
                );
            }
            for step in &f.normalize {
                let overflow = match step.overflow {
                    Overflow::Inf => "inf",
                    Overflow::Saturate => "saturate",
                    Overflow::Wrap => "wrap",
                };
                if step.max_exponent.is_some() {
                    let _ = writeln!(
                        s,
                        "    normalize to out precision {} round {} overflow {overflow}",
                        step.fraction_bits,
                        mode(step.rounding)
                    );
                } else {
                    let fmt = range_format(step.min_exponent, extra);
                    let _ = writeln!(
                        s,
                        "    normalize range {fmt} precision {} round {}",
                        step.fraction_bits,
                        mode(step.rounding)
                    );
                }
            }
            let _ = writeln!(
                s,
                "    zero result {}",
                if f.zero_sign == ZeroSign::Positive {
                    "positive"
                } else {
                    "exact_positive"
                }
            );
            let _ = writeln!(
                s,
                "    nan {}",
                if f.nan == NanPolicy::Canonical {
                    "canonical"
                } else {
                    "ieee"
                }
            );
        }
        Pipeline::Sequential(q) => {
            if let Some(l) = flush_line(&q.conditioning) {
                s.push_str(&l);
            }
            match &q.product {
                ProductRule::Exact => s.push_str("    multiply exact\n"),
                ProductRule::Rounded(a) => {
                    let _ = writeln!(
                        s,
                        "    multiply round to {} {}{}",
                        a.format.name,
                        mode(a.rounding),
                        keep_sign(a)
                    );
                }
            }
            if let Some((g, a)) = &q.pairwise {
                let _ = writeln!(
                    s,
                    "    add pairwise groups of {g} in {} round {}{}",
                    a.format.name,
                    mode(a.rounding),
                    keep_sign(a)
                );
            }
            let a = &q.accumulate;
            let _ = writeln!(
                s,
                "    accumulate in {} round {}{}",
                a.format.name,
                mode(a.rounding),
                keep_sign(a)
            );
            let _ = writeln!(
                s,
                "    nan {}",
                if q.nan == NanPolicy::Canonical {
                    "canonical"
                } else {
                    "ieee"
                }
            );
        }
        Pipeline::Integer(i) => {
            let op = match i.op {
                IntegerOp::Multiply => "integer",
                IntegerOp::Xor => "xor",
                IntegerOp::And => "and",
            };
            let overflow = if i.overflow == Overflow::Saturate {
                "saturate"
            } else {
                "wrap"
            };
            let _ = write!(
                s,
                "    multiply {op}\n    sum exact\n    normalize to out overflow {overflow}\n"
            );
        }
    }
    s
}
