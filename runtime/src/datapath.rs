//! The derived datapath of an instruction (`mmac show`, `mmac list --json`): the numbers
//! an architect sizes hardware with, per stage. Everything comes from the IR and the
//! validator's analysis ([`mmac_compiler::valid::NodeInfo`]: items, grid and accumulator
//! width per alignment node); nothing is re-derived here. Per chained step: the number of
//! products and the steps; per alignment node: the terms it aligns, the aligner's window
//! (the bits a term can occupy once shifted onto the node's grid), the adder (the
//! validator's two's-complement accumulator width); per normalisation: the width of the
//! sum it reads and the precision it rounds to.

use mmac_compiler::Checked;
use mmac_compiler::ir::{ProductRule, Reference, TermSource, Walk};
use mmac_compiler::valid::{Grid, Kind};
use serde::Serialize;

/// One alignment node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Alignment {
    pub name: String,
    /// Values aligned and summed per chained step.
    pub terms: u64,
    /// `max exponent` or `fixed 2^R`.
    pub reference: String,
    /// The grid of the sum: `F below the reference` or `2^G`.
    pub grid: String,
    /// Bits from the top of the largest aligned term down to the grid.
    pub aligner_bits: i64,
    /// The validator's accumulator width (sign included).
    pub adder_bits: u32,
}

/// One rounding of the sum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Normaliser {
    /// Width of the sum it reads (the last alignment's adder).
    pub input_bits: u32,
    /// Significant bits of its result (fraction bits + 1).
    pub precision_bits: u32,
    pub rounding: String,
}

/// An instruction's datapath.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Datapath {
    /// `fused`, `sequential`, `integer` or `composed`.
    pub kind: String,
    pub k: usize,
    /// Products per chained step (k when not chained).
    pub chain: usize,
    pub chained_steps: usize,
    /// Products summed exactly per group (GST-FDPA), if grouped.
    pub group: Option<u32>,
    pub alignments: Vec<Alignment>,
    pub normalisers: Vec<Normaliser>,
    /// Sequential pipelines: the format each step rounds to.
    pub steps_round_to: Option<String>,
    /// A sparse instruction: what its dense pipeline runs over, in words.
    pub sparse: Option<String>,
}

/// The datapath of a checked instruction, from its validation info.
pub fn of(checked: Checked) -> Datapath {
    let inst = checked.instruction();
    let k = checked.k();
    let mut d = Datapath {
        kind: String::new(),
        k,
        chain: k,
        chained_steps: 1,
        group: None,
        alignments: vec![],
        normalisers: vec![],
        steps_round_to: None,
        sparse: checked.sparsity().map(|s| {
            let columns = checked.columns();
            match s.walk {
                Walk::Selected => format!(
                    "{s} sparsity; the pipeline runs over the {k} selected products of {columns} columns, in column order"
                ),
                Walk::Columns => format!(
                    "{s} sparsity; the pipeline runs over all {columns} columns, unselected ones as zero products"
                ),
            }
        }),
    };
    match checked.kind() {
        Kind::Fused(cf) => {
            let (f, fi) = (&cf.pipeline, &cf.facts);
            d.kind = "fused".into();
            d.chain = (f.chain as usize).min(k);
            d.chained_steps = k.div_ceil(d.chain.max(1));
            d.group = f.grouping.map(|g| g.size);
            for (ni, (node, ninfo)) in f.nodes.iter().zip(&fi.nodes).enumerate() {
                let name = inst
                    .provenance
                    .node_names
                    .get(ni)
                    .cloned()
                    .flatten()
                    .unwrap_or_else(|| {
                        node.terms
                            .iter()
                            .map(|t| match t.source {
                                TermSource::Products(_) => "products".to_string(),
                                TermSource::C => "c".into(),
                                TermSource::Groups => "groups".into(),
                                TermSource::Node(i) => inst
                                    .provenance
                                    .node_names
                                    .get(i.index())
                                    .cloned()
                                    .flatten()
                                    .unwrap_or_else(|| format!("node {i}")),
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    });
                let (grid, aligner_bits) = match ninfo.grid {
                    // a term's significand (its bits above its exponent) over F bits
                    Grid::BelowReference(fb) => (
                        format!("{fb} bits below the reference"),
                        fb as i64 + ninfo.inputs.iter().map(|b| b.sig_bits).max().unwrap_or(1),
                    ),
                    Grid::Static(g) => (
                        format!("2^{g}"),
                        ninfo.inputs.iter().map(|b| b.top() - g).max().unwrap_or(0),
                    ),
                };
                d.alignments.push(Alignment {
                    name,
                    terms: ninfo.items,
                    reference: match node.reference {
                        Reference::MaxExponent => "max exponent".into(),
                        Reference::Fixed(r) => format!("fixed 2^{r}"),
                    },
                    grid,
                    aligner_bits,
                    adder_bits: ninfo.width_bits,
                });
            }
            let input = fi.nodes.last().map(|n| n.width_bits).unwrap_or(0);
            for s in &f.normalize {
                d.normalisers.push(Normaliser {
                    input_bits: input,
                    precision_bits: s.fraction_bits + 1,
                    rounding: s.rounding.short().into(),
                });
            }
        }
        Kind::Sequential(cs) => {
            let s = &cs.pipeline;
            d.kind = "sequential".into();
            d.chain = 1;
            d.chained_steps = k;
            d.group = s.pairwise.as_ref().map(|(g, _)| *g);
            let product = match &s.product {
                ProductRule::Exact => "exact products".to_string(),
                ProductRule::Rounded(o) => {
                    format!("products {} {}", o.format.name, o.rounding.short())
                }
            };
            d.steps_round_to = Some(format!(
                "{product}; each step {} {}",
                s.accumulate.format.name,
                s.accumulate.rounding.short()
            ));
        }
        Kind::Integer(_) => d.kind = "integer".into(),
        Kind::Composed(_) => d.kind = "composed".into(),
    }
    d
}

impl Datapath {
    /// The datapath as `//` comment lines (so that `mmac show` stays a spec that checks).
    pub fn comment(&self) -> String {
        let mut s = String::from("// datapath (from the validator's analysis)\n");
        if let Some(sp) = &self.sparse {
            s.push_str(&format!("//   sparse: {sp}\n"));
        }
        if self.kind != "fused" {
            s.push_str(&format!("//   {} pipeline, k = {}\n", self.kind, self.k));
            if let Some(g) = self.group {
                s.push_str(&format!("//   pairwise groups of {g} products\n"));
            }
            if let Some(r) = &self.steps_round_to {
                s.push_str(&format!("//   {r}\n"));
            }
            return s;
        }
        s.push_str(&format!(
            "//   {} pipeline, k = {}: {} product{} per chained step, {} step{}\n",
            self.kind,
            self.k,
            self.chain,
            if self.chain == 1 { "" } else { "s" },
            self.chained_steps,
            if self.chained_steps == 1 { "" } else { "s" }
        ));
        if let Some(g) = self.group {
            s.push_str(&format!("//   groups of {g} products summed exactly\n"));
        }
        for a in &self.alignments {
            s.push_str(&format!(
                "//   align {}: {} terms to the {}, grid {}; aligner {} bits, adder {} bits\n",
                a.name, a.terms, a.reference, a.grid, a.aligner_bits, a.adder_bits
            ));
        }
        for (i, n) in self.normalisers.iter().enumerate() {
            s.push_str(&format!(
                "//   normalise[{i}]: {}-bit sum to {} significant bits, {}\n",
                n.input_bits, n.precision_bits, n.rounding
            ));
        }
        if let Some(r) = &self.steps_round_to {
            s.push_str(&format!("//   {r}\n"));
        }
        s
    }
}
