//! Chained fused instructions proved one step at a time. A fused pipeline with `chain L`
//! below k runs k / L steps, each a dot product of L products into d's format whose
//! result is the next step's `c`; the Verilog back end lowers it as exactly that
//! composition of one step's circuit (`mmac_compiler::rtl`). So two such instructions
//! with the same chain, formats and NaN rule are equal on every input when one step of
//! each is equal on every input — for every `c` of d's format, and of c's for the first
//! step — and a miter of L products is far smaller than one of k (Ada's FP8 k = 32 units
//! with f16 accumulators: two steps of 16, undecided as a whole within 20 minutes).
//!
//! The converse does not hold: a step may differ on a `c` that no earlier step produces,
//! so a step that differs (or stays undecided) says nothing, and [`super::solve`] goes on
//! to the whole miter.
//!
//! Under `nan propagate_*` the result's payload is picked from the whole instruction's
//! inputs after the last step. The steps are proved with canonical NaNs instead: a step's
//! NaN result is then its format's one NaN, which is what the next step reads (any NaN
//! `c` gives a NaN), and the payload rule, the same on both sides, applies once to equal
//! chains.

use mmac_compiler::Checked;
use mmac_compiler::checked::CheckedInstruction;
use mmac_compiler::format::Format;
use mmac_compiler::ir::{Instruction, NanPolicy, Pipeline};
use mmac_compiler::valid::validate_instruction;

/// One step of each side, with `c` in one format: equal on every input, for every such
/// format, makes the two chains equal.
pub struct StepPair {
    pub left: CheckedInstruction,
    pub right: CheckedInstruction,
    /// Products per step.
    pub products: u32,
}

/// The step pairs that prove `x` and `y` equal (module docs): one per format a step's
/// `c` takes, or None where the two are not chains of the same step (not both fused,
/// not chained, scaled, other chains, formats or NaN rules).
pub fn pairs(x: Checked, y: Checked) -> Option<Vec<StepPair>> {
    let (p, q) = (x.instruction(), y.instruction());
    let (ap, aq) = (&p.arithmetic, &q.arithmetic);
    let (Pipeline::Fused(fp), Pipeline::Fused(fq)) = (&ap.pipeline, &aq.pipeline) else {
        return None;
    };
    let chain = fp.chain;
    let chained = chain == fq.chain && chain < ap.k && ap.k % chain == 0;
    let same = (&ap.a, &ap.b, &ap.c, &ap.d, ap.k) == (&aq.a, &aq.b, &aq.c, &aq.d, aq.k);
    let unscaled = ap.scale.is_none() && aq.scale.is_none();
    let dense = p.sparsity.is_none() && q.sparsity.is_none();
    if !(chained && same && unscaled && dense && fp.nan == fq.nan) {
        return None;
    }
    let mut formats = vec![ap.c.clone()];
    if ap.d != ap.c {
        formats.push(ap.d.clone());
    }
    formats
        .into_iter()
        .map(|c| {
            Some(StepPair {
                left: step(p, &c)?,
                right: step(q, &c)?,
                products: chain,
            })
        })
        .collect()
}

/// One chained step of `inst` as an instruction of its own: its chain's products, `c`
/// of format `c`, canonical NaNs. None where the validator refuses it.
fn step(inst: &Instruction, c: &Format) -> Option<CheckedInstruction> {
    let mut s = inst.clone();
    s.name = format!("{}.step", inst.name);
    let ar = &mut s.arithmetic;
    let Pipeline::Fused(f) = &mut ar.pipeline else {
        return None;
    };
    ar.k = f.chain;
    ar.c = c.clone();
    if let NanPolicy::Propagate(_) = f.nan {
        f.nan = NanPolicy::Canonical;
    }
    validate_instruction(s).ok()
}
