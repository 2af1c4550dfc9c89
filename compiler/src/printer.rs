//! The IR printer: one checked instruction written back as a standalone `.mma` spec, with
//! every parameter resolved to a number (`mmac show`). Checking the printed text gives the
//! same IR again (tested for every instruction of the spec library).

use crate::checked::Checked;
use crate::exact::Rounding;
use crate::format::{self, Format, FormatKind};
use crate::ir::*;
use crate::valid::{ArithmeticInfo, Kind};
use std::fmt::Write;

/// Print a checked instruction as a spec of architecture `arch`: formats it needs, its
/// pipeline (named after the original, with no parameters) and the instruction. The
/// validator's info gives the width of each sum, shown as a comment. A composed
/// instruction is printed with the instructions its steps run, before it.
pub fn print_instruction(arch: &str, checked: Checked) -> String {
    let inst = checked.instruction();
    let mut p = Printer::default();
    p.instruction(
        &inst.name,
        (inst.m, inst.n, inst.sparsity),
        &inst.arithmetic,
        &inst.provenance,
        checked.info(),
    );
    let mut out = format!("arch {arch}\n\n");
    out.push_str(&p.decls);
    out.push_str(&p.extra);
    if !p.decls.is_empty() || !p.extra.is_empty() {
        out.push('\n');
    }
    out.push_str(p.items.trim_end());
    out.push('\n');
    out
}

/// A printed spec under construction: format declarations, helper formats, and the
/// pipelines and instructions in the order they must appear.
#[derive(Default)]
struct Printer {
    decls: String,
    declared: Vec<String>,
    extra: String,
    items: String,
    /// Instructions printed so far (a composed spec's runs, each once).
    printed: Vec<String>,
}

impl Printer {
    fn declare(&mut self, f: &Format) {
        if format::builtin(&f.name).as_ref() != Some(f) && !self.declared.contains(&f.name) {
            self.declared.push(f.name.clone());
            self.decls.push_str(&format_decl(f));
        }
    }

    /// Print an instruction (and first whatever it runs), its pipeline named `pipeline`.
    fn instruction(
        &mut self,
        name: &str,
        (m, n, sparsity): (u32, u32, Option<Sparsity>),
        a: &Arithmetic,
        provenance: &Provenance,
        info: &ArithmeticInfo,
    ) {
        if self.printed.iter().any(|p| p == name) {
            return;
        }
        self.printed.push(name.to_string());
        for f in [&a.a, &a.b, &a.c, &a.d] {
            self.declare(f);
        }
        if let Some(s) = &a.scale {
            self.declare(&s.format);
        }
        // the first instruction keeps its pipeline's name; what it runs is numbered
        let pipeline = match self.printed.len() - 1 {
            0 => provenance.pipeline.clone(),
            i => format!("{}_{i}", provenance.pipeline),
        };
        let body = match &a.pipeline {
            Pipeline::Composed(c) => self.composed(name, a, c, provenance, info),
            other => pipeline_body(other, info, &mut self.extra),
        };
        let args: Vec<String> = provenance
            .arguments
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect();
        let out = &mut self.items;
        let _ = writeln!(
            out,
            "// {}({}), resolved",
            provenance.pipeline,
            args.join(", ")
        );
        let _ = writeln!(out, "pipeline {pipeline}() {{\n{body}}}\n");
        let _ = writeln!(out, "instruction {name} {{");
        // a sparse instruction's K and scale block count columns, its pipeline products
        let columns = |k: u32| sparsity.map_or(k, |s| s.columns(k));
        let _ = writeln!(out, "    shape {m} x {n} x {}", columns(a.k));
        let _ = writeln!(
            out,
            "    types a = {}, b = {}, c = {}, d = {}",
            a.a.name, a.b.name, a.c.name, a.d.name
        );
        if let Some(s) = &a.scale {
            let _ = writeln!(
                out,
                "    scale {} block {}",
                s.format.name,
                columns(s.block)
            );
        }
        if let Some(s) = sparsity {
            let _ = writeln!(out, "    sparse a {s} over {}", s.walk.keyword());
        }
        let _ = writeln!(out, "    uses {pipeline}()\n}}\n");
    }

    /// The body of a composed pipeline; the instructions its runs take are printed first.
    fn composed(
        &mut self,
        name: &str,
        a: &Arithmetic,
        c: &Composed,
        provenance: &Provenance,
        info: &ArithmeticInfo,
    ) -> String {
        let mut s = String::new();
        for (conv, role) in [
            (&c.convert_a, "a"),
            (&c.convert_b, "b"),
            (&c.convert_c, "c"),
        ] {
            if let Some(conv) = conv {
                self.declare(&conv.format);
                let _ = writeln!(
                    s,
                    "    convert {role} to {} round {} overflow {}",
                    conv.format.name,
                    mode(conv.rounding),
                    conv.overflow.keyword()
                );
            }
        }
        let value = |v: StepValue| match v {
            StepValue::C => "c".to_string(),
            StepValue::Zero { negative } => if negative { "-0" } else { "0" }.to_string(),
            StepValue::Step(i) => format!("s{i}"),
        };
        for (i, step) in c.steps.iter().enumerate() {
            match step {
                Step::Run {
                    arithmetic,
                    positions,
                    c: cv,
                } => {
                    let (target, sub) = match provenance.steps.get(i).and_then(|p| p.run.as_ref()) {
                        Some((n, p)) if is_instruction_name(n) => (n.clone(), p.as_ref().clone()),
                        Some((_, p)) => (format!("{name}.run{i}"), p.as_ref().clone()),
                        None => (format!("{name}.run{i}"), Provenance::default()),
                    };
                    let sub = if sub.pipeline.is_empty() {
                        Provenance {
                            pipeline: "run".into(),
                            ..sub
                        }
                    } else {
                        sub
                    };
                    // (the validator gives every run its info, at its step)
                    if let Kind::Composed(cc) = info.kind()
                        && let Some(Some(sub_info)) = cc.runs.get(i)
                    {
                        self.instruction(&target, (1, 1, None), arithmetic, &sub, sub_info);
                    }
                    let _ = writeln!(
                        s,
                        "    let s{i} = run \"{target}\" over {} with c = {}",
                        position_set(positions, a.k),
                        value(*cv)
                    );
                }
                Step::Add { x, y, op } => {
                    self.declare(&op.format);
                    let _ = writeln!(
                        s,
                        "    let s{i} = add {}, {} in {} round {}",
                        value(*x),
                        value(*y),
                        op.format.name,
                        mode(op.rounding)
                    );
                }
                Step::Fma { x, y, z, op } => {
                    self.declare(&op.format);
                    let _ = writeln!(
                        s,
                        "    let s{i} = fma {}, {}, {} in {} round {}",
                        value(*x),
                        value(*y),
                        value(*z),
                        op.format.name,
                        mode(op.rounding)
                    );
                }
            }
        }
        // a result that is c or 0 is bound first, since `result` takes a name
        match c.result {
            StepValue::Step(i) => {
                let _ = writeln!(s, "    result s{i}");
            }
            other => {
                let _ = writeln!(s, "    let r = {}\n    result r", value(other));
            }
        }
        if covered_irregularly(c, a.k) {
            s.push_str("    coverage any\n");
        }
        s
    }
}

/// Can `name` be written as an instruction name (letters, digits, `_`, `.`, `:`)?
fn is_instruction_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':'))
}

/// Do the runs fail to use every k position exactly once (so the printed spec needs
/// `coverage any`)?
fn covered_irregularly(c: &Composed, k: u32) -> bool {
    let mut used = vec![0u32; k as usize];
    for s in &c.steps {
        if let Step::Run { positions, .. } = s {
            for &p in positions {
                used[p as usize] += 1;
            }
        }
    }
    used.iter().any(|&u| u != 1)
}

/// k positions as the language writes them, in the fewest words: `all k`, a range with
/// a step (`k in 32..63`), a residue set over all of k (`k mod 4 in [0, 1]`), or a range
/// and a residue set (`k in 0..31 and k mod 4 in [0, 1]`).
fn position_set(positions: &[u32], k: u32) -> String {
    if positions.len() == k as usize {
        return "all k".into();
    }
    let (lo, hi) = (positions[0], *positions.last().unwrap_or(&0));
    let step = if positions.len() > 1 {
        positions[1] - positions[0]
    } else {
        1
    };
    if positions.windows(2).all(|w| w[1] - w[0] == step) {
        return if step == 1 {
            format!("k in {lo}..{hi}")
        } else {
            format!("k in {lo}..{hi} step {step}")
        };
    }
    let residues =
        |m: u32| -> std::collections::BTreeSet<u32> { positions.iter().map(|p| p % m).collect() };
    let select = |from: u32, to: u32, m: u32| -> Vec<u32> {
        let r = residues(m);
        (from..=to).filter(|p| r.contains(&(p % m))).collect()
    };
    let list = |m: u32| {
        residues(m)
            .iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for m in 2..=k.max(2) {
        if select(0, k - 1, m) == positions {
            return format!("k mod {m} in [{}]", list(m));
        }
    }
    for m in 2..=k.max(2) {
        if select(lo, hi, m) == positions {
            return format!("k in {lo}..{hi} and k mod {m} in [{}]", list(m));
        }
    }
    unreachable!("k mod K selects any set of positions")
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
                    info.fused().map_or(0, |fi| fi.nodes[i].width_bits)
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
            let _ = writeln!(s, "    nan {}", f.nan.word());
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
            let _ = writeln!(s, "    nan {}", q.nan.word());
        }
        Pipeline::Composed(_) => unreachable!("composed pipelines are printed by `Printer`"),
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
