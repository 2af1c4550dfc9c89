//! Proofs cut at the reference exponent. Two fused instructions that align their terms to
//! the maximum exponent — and differ, say, in the exponent a zero term takes (`e_zero`) —
//! compute d as G(r, x) from the operands x and the reference r(x) of their last step's
//! root alignment. The Verilog back end can open that point
//! (`mmac_compiler::rtl::circuit_cut_at_reference`: the datapath takes `r_in` where `cut`
//! is set, and outputs the `r` it computes), which splits one hard miter into two:
//!
//! - **shared**: both sides cut, fed the same `r_in`: G_left(r, x) = G_right(r, x) for
//!   every r and x. Where the two differ only in how r is found, the datapaths are the
//!   same circuit and Yosys or the solver sees it at once.
//! - **apart**: both sides whole (the cut clear), the miter firing only where their
//!   references differ: d_left(x) = d_right(x) wherever r_left(x) ≠ r_right(x). That is
//!   the narrow region where the difference lives (for `e_zero` moved by one, every term
//!   zero or below the larger zero exponent), and the solver decides it far faster than
//!   the whole miter (Blackwell's `kind::f8f6f4.f16.e5m2.e5m2` units: docs/rtl.md).
//!
//! Where the references agree, d = G_left(r, x) = G_right(r, x) by the first; where they
//! differ, the second: so the two instructions agree on every input. A witness of the
//! apart miter is one of the two instructions (their circuits are whole there) and is
//! replayed as any other; one of the shared miter says nothing (r may be no reference the
//! operands give), and [`super::solve`] then goes on to the whole miter.

use super::{Join, Proof, ProveError, Side, Verdict, solve_join};
use mmac_compiler::Checked;
use mmac_compiler::rtl;
use std::path::Path;
use std::time::Instant;

/// The width of the reference exponent where both sides open the cut at the same width,
/// or None where the split does not apply (not two fused specs taking the maximum
/// exponent at their root).
pub(super) fn reference_bits(x: Checked, y: Checked) -> Option<u32> {
    let bits = |inst| {
        let c = rtl::circuit_cut_at_reference(inst)?;
        c.outputs().find(|(name, _)| *name == "r").map(|(_, w)| w)
    };
    let (p, q) = (bits(x)?, bits(y)?);
    (p == q).then_some(p)
}

/// The two miters decided in turn (each in a folder of its own under `dir`): the proof,
/// a replayed witness of the apart miter, or an undecided verdict when the budget is
/// spent; None where the shared miter is not proved with budget left (then the whole
/// miter is tried).
pub(super) fn solve_cut(
    x: Checked,
    y: Checked,
    r_bits: u32,
    solvers: super::Solvers,
    deadline: Instant,
    dir: &Path,
) -> Result<Option<Proof>, ProveError> {
    let (left, right) = (Side::Spec(x), Side::Spec(y));
    let mut decided_by = None;
    for (join, sub) in [
        (Join::SharedReference(r_bits), "cut_shared"),
        (Join::ApartReferences(r_bits), "cut_apart"),
    ] {
        let sub = dir.join(sub);
        std::fs::create_dir_all(&sub)?;
        let left_time = deadline.saturating_duration_since(Instant::now());
        let proof = solve_join(&left, &right, left_time, solvers, &sub, join)?;
        match (&proof.verdict, join) {
            // (the apart miter's solver: the shared one is all but free)
            (Verdict::Equivalent, _) => decided_by = proof.solver,
            (Verdict::Differ(_), Join::ApartReferences(_)) => {
                return Ok(Some(Proof { cut: true, ..proof }));
            }
            (Verdict::Unknown(why), _) if Instant::now() >= deadline => {
                return Ok(Some(Proof {
                    verdict: Verdict::Unknown(format!("cut at the reference exponent: {why}")),
                    ..proof
                }));
            }
            _ => return Ok(None),
        }
    }
    Ok(Some(Proof {
        verdict: Verdict::Equivalent,
        method: "solver",
        solver: decided_by,
        by_steps: None,
        cut: true,
        seconds: 0.0,
    }))
}
