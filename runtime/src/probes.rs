//! Feature probes: for one instruction, every probe of the corner-case catalogue that
//! exposes its arithmetic: the battery of its operand formats ([`corners::battery`]:
//! alignment precision at 1 + 2^-j around F, output rounding ties, overflow boundaries,
//! NaN and Inf, subnormals, signed zero, the exponent of zero) and the probes read from
//! its IR ([`corners::read_from_ir`]), so that moving any of F, P, F2, L, G or e_zero by
//! one changes some probe's result.
//!
//! [`report`] prints each probe's result and, below it, its inputs as `mmac run`
//! arguments (a and b up to their last nonzero lane, then `--pad`), so that any row can
//! be re-run with `--trace`.

use crate::corners;
use crate::inputs::Input;
use mmac_compiler::Checked;
use mmac_compiler::engine::Operands;
use mmac_compiler::interp;
use mmac_compiler::ir::Instruction;

/// One probe: a name and the raw inputs of one dot product.
#[derive(Clone, Debug)]
pub struct Probe {
    pub name: String,
    pub c: u64,
    pub a: Vec<u64>,
    pub b: Vec<u64>,
    pub sa: Vec<u64>,
    pub sb: Vec<u64>,
}

impl Probe {
    fn new(name: String, input: Input) -> Probe {
        Probe {
            name,
            c: input.c,
            a: input.a,
            b: input.b,
            sa: input.sa,
            sb: input.sb,
        }
    }

    /// The probe's inputs.
    pub fn input(&self) -> Input {
        Input {
            c: self.c,
            a: self.a.clone(),
            b: self.b.clone(),
            sa: self.sa.clone(),
            sb: self.sb.clone(),
        }
    }
}

/// Every probe of one instruction: the [`corners::battery`] of its formats, then the
/// probes [`corners::read_from_ir`] reads from its parameters.
pub fn battery(inst: &Instruction) -> Vec<Probe> {
    corners::battery(inst)
        .into_iter()
        .chain(corners::read_from_ir(inst))
        .map(|(name, input)| Probe::new(name, input))
        .collect()
}

/// Run the battery and format one line per probe: `name: d=HEX value`. A sparse
/// instruction's probes are its dense arithmetic's, with the stored elements at the
/// first columns of every group (0, 1, 4, 5, ... for 2 of 4) and B's other rows +0.
pub fn report(checked: Checked) -> String {
    let inst = checked.instruction();
    if let Some(sp) = inst.sparsity {
        return sparse_report(checked, &sp);
    }
    let mut s = String::new();
    for p in battery(inst) {
        let ops = Operands {
            c: p.c,
            a: &p.a,
            b: &p.b,
            sa: &p.sa,
            sb: &p.sb,
        };
        let line = result_line(inst, interp::run(checked, &ops));
        s.push_str(&format!("  {:<48} {line}\n", p.name));
        s.push_str(&format!("      {}\n", p.input().run_arguments(inst)));
    }
    s
}

/// A probe's result as `report` prints it: `d=HEX value`, or the error.
fn result_line(inst: &Instruction, d: Result<u64, mmac_compiler::engine::EvalError>) -> String {
    match d {
        Ok(dv) => format!(
            "d={:0w$x} {}",
            dv,
            inst.arithmetic.d.decode(dv).describe(),
            w = inst.arithmetic.d.hex_digits()
        ),
        Err(e) => format!("error: {e}"),
    }
}

/// [`report`] of a sparse instruction: each probe lifted to sparse operands at the first
/// columns of every group, run through the interpreter's sparse entry.
fn sparse_report(checked: Checked, sp: &mmac_compiler::ir::Sparsity) -> String {
    let inst = checked.instruction();
    let positions = crate::sparse::first_positions(sp, inst.columns());
    let mut s = format!(
        "  (sparse, {sp} over {}: a's elements at columns {})\n",
        sp.walk.keyword(),
        positions
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    let engine = mmac_compiler::engine::Engine::interpreter(checked);
    // b's unread rows are +0 (the lift draws them; zeros read better)
    let mut rng = mmac_compiler::random::Rng::new(0);
    for p in battery(inst) {
        let mut lifted =
            crate::sparse::SparseInput::lift_at(checked, &p.input(), positions.clone(), &mut rng);
        if sp.walk == mmac_compiler::ir::Walk::Selected {
            let zero = inst.arithmetic.b.positive_zero();
            for (j, x) in lifted.input.b.iter_mut().enumerate() {
                if !positions.contains(&(j as u64)) {
                    *x = zero;
                }
            }
        }
        let line = result_line(
            inst,
            engine.sparse_dot(&lifted.operands(), &lifted.positions),
        );
        s.push_str(&format!("  {:<48} {line}\n", p.name));
        s.push_str(&format!("      {}\n", lifted.run_arguments(inst)));
    }
    s
}
