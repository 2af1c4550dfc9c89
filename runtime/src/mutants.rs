//! Mutants: the single-parameter neighbours of an instruction. Each integer parameter of
//! its pipeline (given or defaulted: `F`, `F2`, `L`, `P`, `e_zero`, `G`, ...) and, for a
//! block-scaled instruction, its scale `block`, is moved by +1 and by -1, and the
//! instruction is checked again with that one change from the parsed file it came from
//! ([`Checked::moved`]).
//! A value the checker refuses is passed over: the walk continues in the same direction
//! to the nearest value that checks, at most [`MAX_STEPS`] steps away, and stops at once
//! when the refusal is a range error (the values further on are out of range too). For
//! `L`, `G` and `block`, which must divide k (or the chain), the values after the first
//! step are the next divisors of k in that direction. A neighbour whose arithmetic equals
//! the original's (`L = 17` on k = 16 clamps to 16) is an equivalent mutant, not a wrong
//! spec: it is passed over like a refused value, and no two neighbours of an instruction
//! share an arithmetic.
//!
//! A suite of conformance vectors is adequate for an instruction when every neighbour
//! fails at least one of its cases, or is proven to compute what the original computes on
//! every input ([`crate::observability`]).
//!
//! [`behaviour_variants`] are the other kind of mutant: the instruction's IR with one rule
//! changed that no number expresses (a rounding mode, the overflow rule, the sign of a
//! zero result, flushing, whether zero terms take part in the max-exponent search, a
//! product overflow threshold or a drop rule removed). They are what conformance cases
//! for NaN, Inf, signed zeros and subnormals pin; `tests/vectors/` keeps public cases that
//! tell them apart too.

use mmac_compiler::checked::{Checked, CheckedInstruction};
use mmac_compiler::diagnostic::Code;
use mmac_compiler::exact::Rounding;
use mmac_compiler::ir::{
    Conditioning, Instruction, Overflow, Pipeline, ProductRule, ZeroExponent, ZeroSign,
};
use mmac_compiler::valid::validate_instruction;

/// The most single steps a walk takes in one direction before giving up.
pub const MAX_STEPS: i64 = 64;

/// Parameters that must divide k (or the chain): after their first step, the walk visits
/// the divisors of k.
const DIVISOR_PARAMETERS: [&str; 3] = ["L", "G", "block"];

/// One neighbour of an instruction: the spec with `parameter` moved from `old` to `new`.
#[derive(Clone, Debug)]
pub struct Neighbour {
    pub parameter: String,
    pub old: i64,
    pub new: i64,
    /// The neighbour, checked and validated.
    /// The moved instruction, checked.
    pub checked: CheckedInstruction,
}

impl Neighbour {
    /// `F 25 -> 26`.
    pub fn label(&self) -> String {
        format!("{} {} -> {}", self.parameter, self.old, self.new)
    }

    /// Does the neighbour take operands the way the original does (the same formats, k and
    /// number of scale factors)? A `block` neighbour takes another number of scale factors
    /// per dot product, so every case of the original is refused by it.
    pub fn same_interface(&self, original: &Instruction) -> bool {
        same_interface(original, self.instruction())
    }
    /// The moved instruction's IR.
    pub fn instruction(&self) -> &Instruction {
        self.checked.instruction()
    }
}

/// Do two instructions take the same operands (formats, k, scale format and count)?
pub fn same_interface(x: &Instruction, y: &Instruction) -> bool {
    let (p, q) = (&x.arithmetic, &y.arithmetic);
    p.a == q.a
        && p.b == q.b
        && p.c == q.c
        && p.d == q.d
        && p.k == q.k
        && p.scale.as_ref().map(|s| &s.format) == q.scale.as_ref().map(|s| &s.format)
        && p.scale_count() == q.scale_count()
}

/// The integer parameters of an instruction that its neighbours move: the pipeline's
/// arguments whose value is an integer, then `block` for a block-scaled instruction.
pub fn numeric_parameters(inst: &Instruction) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = inst
        .provenance
        .arguments
        .iter()
        .filter_map(|(name, value)| value.as_int().map(|v| (name.clone(), v)))
        .collect();
    if let Some(s) = &inst.arithmetic.scale {
        out.push(("block".into(), s.block as i64));
    }
    out
}

/// The values a walk from `value` in direction `step` (+1 or -1) visits, nearest first.
fn walk(parameter: &str, value: i64, step: i64, k: i64) -> Vec<i64> {
    if DIVISOR_PARAMETERS.contains(&parameter) {
        let first = value + step;
        let mut out = vec![first];
        let mut divisors: Vec<i64> = (1..=k)
            .filter(|d| k % d == 0 && (d - first) * step > 0)
            .collect();
        if step < 0 {
            divisors.reverse();
        }
        out.extend(divisors);
        out
    } else {
        (1..=MAX_STEPS).map(|s| value + s * step).collect()
    }
}

/// Every neighbour of `original`: for each numeric parameter, the nearest value above
/// and below that checks and changes the arithmetic. Parameters in the order
/// [`numeric_parameters`] gives, the step up first. None for an instruction validated
/// from IR (it has no file to be checked again from).
pub fn neighbours(original: Checked) -> Vec<Neighbour> {
    let inst = original.instruction();
    let mut out: Vec<Neighbour> = vec![];
    let k = inst.k() as i64;
    for (parameter, old) in numeric_parameters(inst) {
        for step in [1, -1] {
            for new in walk(&parameter, old, step, k) {
                let checked = match original.moved(&parameter, new) {
                    None => return out,
                    Some(Ok(v)) => v,
                    // further on in this direction is out of range too
                    Some(Err(d)) if d.codes().contains(&Code::OutOfRange) => break,
                    Some(Err(_)) => continue,
                };
                let arithmetic = &checked.instruction().arithmetic;
                let equivalent = *arithmetic == inst.arithmetic
                    || out
                        .iter()
                        .any(|n| n.instruction().arithmetic == *arithmetic);
                if equivalent {
                    continue;
                }
                out.push(Neighbour {
                    parameter: parameter.clone(),
                    old,
                    new,
                    checked,
                });
                break;
            }
        }
    }
    out
}

/// An instruction with one rule of its IR changed ([`behaviour_variants`]).
#[derive(Clone, Debug)]
pub struct Variant {
    /// What changed, e.g. `normalize[0] round toward_zero -> down`.
    pub label: String,
    /// The changed instruction, checked.
    pub checked: CheckedInstruction,
}

impl Variant {
    /// The changed instruction's IR.
    pub fn instruction(&self) -> &Instruction {
        self.checked.instruction()
    }
}

fn flip_conditioning(c: &Conditioning) -> Vec<(String, Conditioning)> {
    vec![
        (
            format!("flush a {} -> {}", c.flush_a, !c.flush_a),
            Conditioning {
                flush_a: !c.flush_a,
                ..*c
            },
        ),
        (
            format!("flush b {} -> {}", c.flush_b, !c.flush_b),
            Conditioning {
                flush_b: !c.flush_b,
                ..*c
            },
        ),
        (
            format!("flush c {} -> {}", c.flush_c, !c.flush_c),
            Conditioning {
                flush_c: !c.flush_c,
                ..*c
            },
        ),
    ]
}

fn other_roundings(r: Rounding) -> impl Iterator<Item = Rounding> {
    Rounding::ALL.into_iter().filter(move |x| *x != r)
}

/// Every behaviour variant of an instruction (module docs): each rounding mode replaced
/// by every other, each overflow rule swapped, the zero-result sign rule swapped, each
/// flush turned on or off, a fixed zero exponent replaced by "never", a product overflow
/// threshold or a drop rule removed. Variants the validator refuses, or whose arithmetic
/// equals the original's, are left out.
pub fn behaviour_variants(inst: &Instruction) -> Vec<Variant> {
    let mut edits: Vec<(String, Pipeline)> = vec![];
    match &inst.arithmetic.pipeline {
        Pipeline::Fused(f) => {
            for (i, step) in f.normalize.iter().enumerate() {
                for r in other_roundings(step.rounding) {
                    let mut g = f.clone();
                    g.normalize[i].rounding = r;
                    edits.push((
                        format!(
                            "normalize[{i}] round {} -> {}",
                            step.rounding.keyword(),
                            r.keyword()
                        ),
                        Pipeline::Fused(g),
                    ));
                }
                if step.max_exponent.is_some() {
                    let o = match step.overflow {
                        Overflow::Saturate => Overflow::Inf,
                        _ => Overflow::Saturate,
                    };
                    let mut g = f.clone();
                    g.normalize[i].overflow = o;
                    edits.push((
                        format!("normalize[{i}] overflow {:?} -> {o:?}", step.overflow),
                        Pipeline::Fused(g),
                    ));
                }
            }
            for (ni, node) in f.nodes.iter().enumerate() {
                for (ti, term) in node.terms.iter().enumerate() {
                    if let Some((keep, mode)) = term.keep {
                        for r in other_roundings(mode) {
                            let mut g = f.clone();
                            g.nodes[ni].terms[ti].keep = Some((keep, r));
                            edits.push((
                                format!(
                                    "align[{ni}] term {ti} round {} -> {}",
                                    mode.keyword(),
                                    r.keyword()
                                ),
                                Pipeline::Fused(g),
                            ));
                        }
                    }
                    if term.drop_below.is_some() {
                        let mut g = f.clone();
                        g.nodes[ni].terms[ti].drop_below = None;
                        edits.push((
                            format!("align[{ni}] term {ti} drop rule removed"),
                            Pipeline::Fused(g),
                        ));
                    }
                }
            }
            let zero_sign = match f.zero_sign {
                ZeroSign::Positive => ZeroSign::ExactPositive,
                ZeroSign::ExactPositive => ZeroSign::Positive,
            };
            edits.push((
                format!("zero result {:?} -> {zero_sign:?}", f.zero_sign),
                Pipeline::Fused(mmac_compiler::ir::Fused {
                    zero_sign,
                    ..f.clone()
                }),
            ));
            if f.product_overflow.is_some() {
                edits.push((
                    "product overflow removed".into(),
                    Pipeline::Fused(mmac_compiler::ir::Fused {
                        product_overflow: None,
                        ..f.clone()
                    }),
                ));
            }
            let z = f.zero_exponent;
            for (class, value) in [("products", z.products), ("c", z.c), ("groups", z.groups)] {
                if let ZeroExponent::Fixed(e) = value {
                    let mut g = f.clone();
                    match class {
                        "products" => g.zero_exponent.products = ZeroExponent::Never,
                        "c" => g.zero_exponent.c = ZeroExponent::Never,
                        _ => g.zero_exponent.groups = ZeroExponent::Never,
                    }
                    edits.push((
                        format!("zero exponent of {class} {e} -> never"),
                        Pipeline::Fused(g),
                    ));
                }
            }
            for (label, c) in flip_conditioning(&f.conditioning) {
                edits.push((
                    label,
                    Pipeline::Fused(mmac_compiler::ir::Fused {
                        conditioning: c,
                        ..f.clone()
                    }),
                ));
            }
        }
        Pipeline::Sequential(sq) => {
            for r in other_roundings(sq.accumulate.rounding) {
                let mut g = sq.clone();
                g.accumulate.rounding = r;
                edits.push((
                    format!(
                        "accumulate round {} -> {}",
                        sq.accumulate.rounding.keyword(),
                        r.keyword()
                    ),
                    Pipeline::Sequential(g),
                ));
            }
            let mut g = sq.clone();
            g.accumulate.flush_keep_sign = !g.accumulate.flush_keep_sign;
            edits.push((
                format!(
                    "accumulate flush {} -> {}",
                    sq.accumulate.flush_keep_sign, g.accumulate.flush_keep_sign
                ),
                Pipeline::Sequential(g),
            ));
            if let ProductRule::Rounded(_) = sq.product {
                let mut g = sq.clone();
                g.product = ProductRule::Exact;
                edits.push(("products exact".into(), Pipeline::Sequential(g)));
            }
            if sq.pairwise.is_some() {
                let mut g = sq.clone();
                g.pairwise = None;
                edits.push(("pairwise sums removed".into(), Pipeline::Sequential(g)));
            }
            for (label, c) in flip_conditioning(&sq.conditioning) {
                let mut g = sq.clone();
                g.conditioning = c;
                edits.push((label, Pipeline::Sequential(g)));
            }
        }
        Pipeline::Integer(i) => {
            let o = match i.overflow {
                Overflow::Saturate => Overflow::Wrap,
                _ => Overflow::Saturate,
            };
            edits.push((
                format!("overflow {:?} -> {o:?}", i.overflow),
                Pipeline::Integer(mmac_compiler::ir::IntegerDot { overflow: o, ..*i }),
            ));
        }
        // a composed instruction's runs are varied where the instructions they run are
        // declared; its own IEEE steps round as IEEE 754 says
        Pipeline::Composed(_) => {}
    }
    let mut out: Vec<Variant> = vec![];
    for (label, pipeline) in edits {
        let mut instruction = inst.clone();
        instruction.arithmetic.pipeline = pipeline;
        if instruction.arithmetic == inst.arithmetic
            || out
                .iter()
                .any(|v| v.instruction().arithmetic == instruction.arithmetic)
        {
            continue;
        }
        if let Ok(checked) = validate_instruction(instruction) {
            out.push(Variant { label, checked });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(path: &str) -> (String, String) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = std::fs::read_to_string(root.join(path)).unwrap();
        (path.to_string(), text)
    }

    fn labels(file: &str, name: &str) -> Vec<String> {
        let (path, text) = spec(file);
        let whole = mmac_compiler::compile(&path, &text).unwrap();
        neighbours(whole.find(name).unwrap())
            .iter()
            .map(|n| n.label())
            .collect()
    }

    /// Hopper f16 with f32 output: F and e_zero move both ways; L = 16 = k cannot grow (17
    /// clamps to 16, an equivalent mutant) and shrinks to the next divisor, 8; P = 23 is
    /// f32's whole precision and can only shrink.
    #[test]
    fn hopper_f16_neighbours() {
        assert_eq!(
            labels("specs/hopper.mma", "mma.m16n8k16.f32.f16.f16.f32"),
            [
                "F 25 -> 26",
                "F 25 -> 24",
                "L 16 -> 8",
                "e_zero -133 -> -132",
                "e_zero -133 -> -134",
                "P 23 -> 22"
            ]
        );
    }

    /// CDNA3's f16 instructions with k = 4 say L = 8, which clamps to 4: the walk down
    /// passes over the equivalent 7..4 and the refused 3 to reach 2.
    #[test]
    fn a_clamped_chain_walks_to_the_next_divisor() {
        let got = labels("specs/cdna3.mma", "v_mfma_f32_4x4x4_16b_f16");
        assert!(got.contains(&"L 8 -> 2".to_string()), "{got:?}");
        assert!(got.contains(&"F2 31 -> 30".to_string()), "{got:?}");
        assert!(!got.iter().any(|l| l.starts_with("L 8 -> 9")), "{got:?}");
    }

    /// Behaviour variants change one rule each and validate.
    #[test]
    fn behaviour_variants_of_cdna3() {
        let (path, text) = spec("specs/cdna3.mma");
        let whole = mmac_compiler::compile(&path, &text).unwrap();
        let inst = whole
            .spec()
            .instruction("v_mfma_f32_16x16x32_fp8_fp8")
            .unwrap();
        let labels: Vec<String> = behaviour_variants(inst)
            .into_iter()
            .map(|v| v.label)
            .collect();
        for want in [
            "normalize[0] round down -> toward_zero",
            "normalize[1] overflow Inf -> Saturate",
            "align[3] term 1 drop rule removed",
            "zero result ExactPositive -> Positive",
            "flush c false -> true",
        ] {
            assert!(labels.iter().any(|l| l == want), "{want} not in {labels:?}");
        }
        let fma = whole.spec().instruction("v_mfma_f32_16x16x4_f32").unwrap();
        assert!(
            behaviour_variants(fma)
                .iter()
                .any(|v| v.label == "accumulate round nearest_even -> toward_zero")
        );
    }

    /// A block-scaled instruction's block moves to the neighbouring divisors of k, and
    /// such a neighbour takes another number of scale factors.
    #[test]
    fn block_neighbours_change_the_interface() {
        let (path, text) = spec("specs/blackwell.mma");
        let name = "tcgen05.mma.block_scale.m128n8k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0";
        let whole = mmac_compiler::compile(&path, &text).unwrap();
        let inst = whole.spec().instruction(name).unwrap();
        let ns = neighbours(whole.find(name).unwrap());
        let blocks: Vec<String> = ns
            .iter()
            .filter(|n| n.parameter == "block")
            .map(|n| n.label())
            .collect();
        assert_eq!(blocks, ["block 32 -> 64", "block 32 -> 16"]);
        for n in &ns {
            assert_eq!(
                n.same_interface(inst),
                n.parameter != "block",
                "{}",
                n.label()
            );
        }
        let g: Vec<String> = ns
            .iter()
            .filter(|n| n.parameter == "G")
            .map(|n| n.label())
            .collect();
        assert_eq!(g, ["G 16 -> 32", "G 16 -> 8"]);
    }
}
