//! Listings of checked specs: one line per instruction (`mmac list`) and Markdown tables
//! of each architecture's arithmetic (`mmac list --markdown`, docs/architectures.md).

use mmac_compiler::ir::{Instruction, Pipeline, ProductRule, Spec, Step};

/// The F of the first alignment: the one the products meet ("exact" for exact sums).
pub fn alignment_f(inst: &Instruction) -> String {
    match &inst.arithmetic.pipeline {
        Pipeline::Fused(f) => f
            .nodes
            .first()
            .and_then(|n| n.terms.iter().filter_map(|t| t.keep.map(|k| k.0)).max())
            .map(|f| f.to_string())
            .unwrap_or_else(|| "exact".into()),
        _ => "-".into(),
    }
}

pub fn shape(inst: &Instruction) -> String {
    let s = inst.shape();
    format!("m{}n{}k{}", s.m, s.n, s.k)
}

pub fn types(inst: &Instruction) -> String {
    let mut s = format!(
        "a={} b={} c={} d={}",
        inst.arithmetic.a.name,
        inst.arithmetic.b.name,
        inst.arithmetic.c.name,
        inst.arithmetic.d.name
    );
    if let Some(sc) = &inst.arithmetic.scale {
        let block = inst.sparsity.map_or(sc.block, |sp| sp.columns(sc.block));
        s.push_str(&format!(" scale={}/{block}", sc.format.name));
    }
    if let Some(sp) = &inst.sparsity {
        s.push_str(&format!(
            " sparse={}:{}{}/{}",
            sp.kept,
            sp.group,
            if sp.pairs { "pairs" } else { "" },
            sp.walk.keyword()
        ));
    }
    s
}

/// What pins the instruction's arithmetic, in words: `model`, `model+silicon`,
/// `assumption`, or `unstated`.
pub fn evidence(inst: &Instruction) -> String {
    inst.provenance.evidence_words()
}

/// `name <TAB> shape <TAB> types <TAB> pipeline <TAB> F=... <TAB> evidence=...`
pub fn line(inst: &Instruction) -> String {
    format!(
        "{}\t{}\t{}\t{}\tF={}\tevidence={}",
        inst.name,
        shape(inst),
        types(inst),
        inst.provenance.pipeline,
        alignment_f(inst),
        evidence(inst)
    )
}

/// The rounding of each stage, in words.
pub fn stage_roundings(inst: &Instruction) -> String {
    match &inst.arithmetic.pipeline {
        Pipeline::Fused(f) => {
            let mut parts = vec![];
            if f.chain < inst.arithmetic.k {
                parts.push(format!("chain {}", f.chain));
            }
            if let Some(g) = f.grouping {
                parts.push(format!("groups of {} exact", g.size));
            }
            for n in &f.nodes {
                let mut t: Vec<String> = n
                    .terms
                    .iter()
                    .map(|t| match t.keep {
                        Some((fb, r)) => format!("{fb} {}", r.short()),
                        None => "exact".into(),
                    })
                    .collect();
                t.dedup();
                parts.push(format!("align {}", t.join("/")));
            }
            for s in &f.normalize {
                parts.push(format!(
                    "{} to {} bits",
                    s.rounding.short(),
                    s.fraction_bits
                ));
            }
            parts.join("; ")
        }
        Pipeline::Sequential(s) => {
            let mut parts = vec![];
            if let ProductRule::Rounded(a) = &s.product {
                parts.push(format!("products {} {}", a.rounding.short(), a.format.name));
            }
            if let Some((g, a)) = &s.pairwise {
                parts.push(format!(
                    "pairs of {g} {} {}",
                    a.rounding.short(),
                    a.format.name
                ));
            }
            parts.push(format!(
                "accumulate {} {}",
                s.accumulate.rounding.short(),
                s.accumulate.format.name
            ));
            if s.accumulate.flush_keep_sign {
                parts.push("subnormals flushed".into());
            }
            parts.join("; ")
        }
        Pipeline::Integer(i) => match i.overflow {
            mmac_compiler::ir::Overflow::Saturate => "exact; clamp to d".into(),
            _ => "exact; wrap to d".into(),
        },
        Pipeline::Composed(c) => {
            let mut parts = vec![];
            for (conv, role) in [
                (&c.convert_a, "a"),
                (&c.convert_b, "b"),
                (&c.convert_c, "c"),
            ] {
                if let Some(conv) = conv {
                    parts.push(format!(
                        "{role} to {} {}",
                        conv.format.name,
                        conv.rounding.short()
                    ));
                }
            }
            for (i, step) in c.steps.iter().enumerate() {
                parts.push(match step {
                    Step::Run { positions, .. } => {
                        let name = inst
                            .provenance
                            .steps
                            .get(i)
                            .and_then(|p| p.run.as_ref())
                            .map_or("a run", |(n, _)| n.as_str());
                        format!("`{name}` over {} k", positions.len())
                    }
                    Step::Add { op, .. } => {
                        format!("add {} {}", op.rounding.short(), op.format.name)
                    }
                    Step::Fma { op, .. } => {
                        format!("fma {} {}", op.rounding.short(), op.format.name)
                    }
                });
            }
            parts.join("; ")
        }
    }
}

/// A Markdown section for one spec. Instructions that differ only in shape (n, m) and
/// share every other column are collapsed into one row naming the first and the count.
pub fn markdown(spec: &Spec) -> String {
    let mut out = format!(
        "## {}\n\n",
        spec.title.clone().unwrap_or_else(|| spec.arch.clone())
    );
    out.push_str(
        "| instruction | types | algorithm | F | rounding per stage | evidence |\n|---|---|---|---|---|---|\n",
    );
    let mut rows: Vec<(String, String, usize)> = vec![];
    for i in &spec.instructions {
        let key = format!(
            "| {} | {} | {} | {} | {} |",
            types(i),
            i.provenance.pipeline,
            alignment_f(i),
            stage_roundings(i),
            evidence(i)
        );
        let family = family_key(&i.name);
        match rows
            .iter_mut()
            .find(|(k, f, _)| *k == key && family_key(f) == family)
        {
            Some(row) => row.2 += 1,
            None => rows.push((key, i.name.clone(), 1)),
        }
    }
    for (key, name, n) in rows {
        let more = if n > 1 {
            format!(" (+{} shapes)", n - 1)
        } else {
            String::new()
        };
        out.push_str(&format!("| `{name}`{more} {key}\n"));
    }
    out
}

/// An instruction name with its m and n digits blanked: the shape family.
fn family_key(name: &str) -> String {
    let mut out = String::new();
    let mut chars = name.chars().peekable();
    while let Some(ch) = chars.next() {
        out.push(ch);
        if (ch == 'm' || ch == 'n') && chars.peek().is_some_and(|c| c.is_ascii_digit()) {
            while chars.peek().is_some_and(|c| c.is_ascii_digit()) {
                chars.next();
            }
            out.push('#');
        }
    }
    out
}
