//! `mmac diff`: two instructions compared on their operands, with a minimal witness of a
//! difference explained ([`mmac_runtime::diff`]). Exit 1 when they differ (like `diff`),
//! 0 when no difference was found, 2 for bad usage (instructions that take different
//! operands are refused, naming the difference).

use super::common::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, Outcome, instruction, load};
use mmac_compiler::Checked;
use mmac_compiler::ir::Instruction;
use mmac_runtime::diff::{self, DiffOptions};
use mmac_runtime::inputs::hex;
use mmac_runtime::prove::{self, Side, Verdict};
use mmac_runtime::sparse;
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;

/// The arguments of `mmac diff`.
pub struct DiffArgs<'a> {
    pub left: (&'a Path, &'a str),
    pub right: (&'a Path, &'a str),
    pub trials: usize,
    pub seed: u64,
    pub json: bool,
    /// `--prove`: the solver's budget in seconds.
    pub prove: Option<u64>,
}

/// `--prove` after a search that found nothing and no proof: the solver's verdict.
fn solver(x: Checked, y: Checked, seconds: u64) -> Result<prove::Proof, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    prove::solve(
        &Side::Spec(x),
        &Side::Spec(y),
        std::time::Duration::from_secs(seconds),
        prove::Solvers::All,
        dir.path(),
    )
    .map_err(|e| e.to_string())
}

/// The solver's verdict as JSON, and the exit code it gives.
fn solver_json(p: &prove::Proof, inst: &Instruction) -> (Value, i32) {
    let ar = &inst.arithmetic;
    let mut v = json!({"seconds": (p.seconds * 1000.0).round() / 1000.0});
    if let Some(name) = p.solver {
        v["name"] = json!(name);
    }
    if p.by_steps.is_some() {
        v["by_steps"] = p.by_steps_json();
    }
    if p.cut {
        v["cut"] = json!("reference exponent");
    }
    let code = match &p.verdict {
        Verdict::Equivalent => {
            v["result"] = json!("equivalent");
            EXIT_OK
        }
        Verdict::Differ(w) => {
            v["result"] = json!("differ");
            v["witness"] = witness_json(ar, w.c, [&w.a, &w.b, &w.sa, &w.sb]);
            v["left_d"] = json!(hex(&ar.d, w.left_d));
            v["right_d"] = json!(hex(&ar.d, w.right_d));
            EXIT_FAILED
        }
        Verdict::Unknown(why) => {
            v["result"] = json!("unknown");
            v["why"] = json!(why);
            super::common::EXIT_UNDECIDED
        }
    };
    (v, code)
}

/// A witness as JSON: `{"c": HEX, "a": [HEX...], "b": [...]}`, with `sa` and `sb` where
/// the instruction is scaled.
fn witness_json(ar: &mmac_compiler::ir::Arithmetic, c: u64, [a, b, sa, sb]: [&[u64]; 4]) -> Value {
    let mut witness = json!({"c": hex(&ar.c, c), "a": hex_list(&ar.a, a), "b": hex_list(&ar.b, b)});
    if let Some(s) = &ar.scale {
        witness["sa"] = Value::Array(hex_list(&s.format, sa));
        witness["sb"] = Value::Array(hex_list(&s.format, sb));
    }
    witness
}

fn hex_list(f: &mmac_compiler::format::Format, v: &[u64]) -> Vec<Value> {
    v.iter().map(|&r| Value::String(hex(f, r))).collect()
}

pub fn diff(args: &DiffArgs, color: bool) -> Outcome {
    let ls = load(args.left.0, color)?;
    let rs = load(args.right.0, color)?;
    let x = instruction(&ls, args.left.1)?;
    let y = instruction(&rs, args.right.1)?;
    if let Some(why) = diff::interface_difference(x.instruction(), y.instruction()) {
        eprintln!(
            "error: `{}` and `{}` take different operands: {why}\n  help: diff compares instructions with the same operand formats, k and scale factors",
            x.name(),
            y.name()
        );
        return Ok(EXIT_USAGE);
    }
    if x.sparsity().is_some() {
        return sparse_diff(args, x, y);
    }
    let options = DiffOptions {
        trials: args.trials,
        seed: args.seed,
    };
    let cmp = match diff::diff(x, y, &options) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let mut out = super::common::stdout();
    let inst: &Instruction = x.instruction();
    let ar = &inst.arithmetic;
    let d_shown = |raw: u64| diff::shown(&ar.d, raw);
    if args.json {
        let mut v = json!({
            "differ": cmp.difference.is_some(),
            "tried": cmp.tried(),
            "structured_tried": cmp.structured_tried,
            "random_tried": cmp.random_tried,
        });
        match &cmp.difference {
            Some(d) => {
                let w = &d.witness;
                v["witness"] = witness_json(ar, w.c, [&w.a, &w.b, &w.sa, &w.sb]);
                v["left"] =
                    json!({"d": hex(&ar.d, d.left), "value": ar.d.decode(d.left).describe()});
                v["right"] =
                    json!({"d": hex(&ar.d, d.right), "value": ar.d.decode(d.right).describe()});
                v["exact"] = match &d.exact {
                    Some(e) => Value::String(diff::exact_decimal(e, false)),
                    None => Value::Null,
                };
                v["stage"] = Value::String(d.stage.clone());
                v["cause"] = Value::String(d.cause.clone());
                v["run"] = Value::String(format!(
                    "mmac run {} --instr {} {}",
                    args.left.0.display(),
                    inst.name,
                    w.run_arguments(inst)
                ));
            }
            None => {
                if let Some(p) = &cmp.proof {
                    v["proof"] = Value::String(p.clone());
                }
            }
        }
        let mut code = if cmp.difference.is_some() {
            EXIT_FAILED
        } else {
            EXIT_OK
        };
        if let (None, None, Some(seconds)) = (&cmp.difference, &cmp.proof, args.prove) {
            match solver(x, y, seconds) {
                Ok(p) => {
                    let (s, c) = solver_json(&p, inst);
                    v["solver"] = s;
                    code = c;
                }
                Err(e) => {
                    eprintln!("error: --prove: {e}");
                    return Ok(EXIT_USAGE);
                }
            }
        }
        writeln!(out, "{v}")?;
        out.flush()?;
        return Ok(code);
    }
    let tried = format!(
        "{} structured and {} random inputs tried",
        cmp.structured_tried, cmp.random_tried
    );
    let Some(d) = &cmp.difference else {
        writeln!(out, "no difference found ({tried})")?;
        if let Some(p) = &cmp.proof {
            writeln!(out, "proven: they agree on every input ({p})")?;
        } else if let Some(seconds) = args.prove {
            let p = match solver(x, y, seconds) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("error: --prove: {e}");
                    return Ok(EXIT_USAGE);
                }
            };
            let code = solver_json(&p, inst).1;
            match &p.verdict {
                Verdict::Equivalent => writeln!(
                    out,
                    "proven by the solver ({}): they agree on every input ({:.1} s)",
                    p.decided_by(),
                    p.seconds
                )?,
                Verdict::Differ(w) => {
                    writeln!(
                        out,
                        "the solver ({}) found a difference the search missed ({:.1} s): d = {} (left), {} (right)",
                        p.decided_by(),
                        p.seconds,
                        d_shown(w.left_d),
                        d_shown(w.right_d)
                    )?;
                    let input = mmac_runtime::inputs::Input {
                        c: w.c,
                        a: w.a.clone(),
                        b: w.b.clone(),
                        sa: w.sa.clone(),
                        sb: w.sb.clone(),
                    };
                    writeln!(
                        out,
                        "  mmac run {} --instr {} {}",
                        args.left.0.display(),
                        inst.name,
                        input.run_arguments(inst)
                    )?;
                }
                Verdict::Unknown(why) => writeln!(out, "the solver did not decide: {why}")?,
            }
            out.flush()?;
            return Ok(code);
        }
        out.flush()?;
        return Ok(EXIT_OK);
    };
    let w = &d.witness;
    let nonzero = (0..inst.k())
        .filter(|&k| {
            let z = |f: &mmac_compiler::format::Format, r| {
                matches!(f.decode(r), mmac_compiler::format::Decoded::Finite(v) if v.is_zero())
            };
            !(z(&ar.a, w.a[k]) || z(&ar.b, w.b[k]))
        })
        .count();
    writeln!(
        out,
        "differ: a witness with {nonzero} nonzero product{} ({tried})",
        if nonzero == 1 { "" } else { "s" }
    )?;
    for (side, (path, name)) in [("left ", args.left), ("right", args.right)] {
        writeln!(
            out,
            "  {side}: mmac run {} --instr {name} {}",
            path.display(),
            w.run_arguments(inst)
        )?;
    }
    writeln!(out, "  decimal: {}", diff::decimal_arguments(inst, w))?;
    writeln!(out, "left  d={}", d_shown(d.left))?;
    writeln!(out, "right d={}", d_shown(d.right))?;
    match &d.exact {
        Some(e) => writeln!(out, "exact   {}", diff::exact_shown(e))?,
        None => writeln!(out, "exact   (not finite: an input is NaN or infinite)")?,
    }
    writeln!(out, "stage: {}", d.stage)?;
    writeln!(out, "cause: {}", d.cause)?;
    writeln!(out)?;
    write!(out, "{}", diff::side_by_side(d))?;
    out.flush()?;
    Ok(EXIT_FAILED)
}

/// `diff` of two sparse instructions (e.g. the two hypotheses of what the unit does with
/// the selected elements): the structured candidates of their dense arithmetic lifted
/// into the pattern, then random inputs in the pattern, through both; a difference
/// confirmed by the interpreter, shown as `mmac run` lines with `--meta`.
fn sparse_diff(args: &DiffArgs, x: Checked, y: Checked) -> Outcome {
    if args.prove.is_some() {
        eprintln!(
            "error: --prove does not take sparse instructions yet (the Verilog back end lowers dense arithmetic)"
        );
        return Ok(EXIT_USAGE);
    }
    let (found, tried) = match sparse::search(x, y, args.trials, args.seed) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let inst = x.instruction();
    let ar = &inst.arithmetic;
    let walk = |c: Checked| {
        c.sparsity()
            .map_or("dense", |s| s.walk.keyword())
            .to_string()
    };
    let mut out = super::common::stdout();
    let Some(w) = found else {
        if args.json {
            writeln!(out, "{}", json!({"differ": false, "tried": tried}))?;
        } else {
            writeln!(
                out,
                "no difference found ({tried} sparse inputs tried: structured candidates, then random)"
            )?;
        }
        out.flush()?;
        return Ok(EXIT_OK);
    };
    let exact = w.input.exact(inst);
    if args.json {
        let i = &w.input.input;
        let mut witness = witness_json(ar, i.c, [&i.a, &i.b, &i.sa, &i.sb]);
        witness["positions"] = json!(w.input.positions);
        let v = json!({
            "differ": true,
            "tried": tried,
            "witness": witness,
            "left": {"d": hex(&ar.d, w.left), "value": ar.d.decode(w.left).describe(), "over": walk(x)},
            "right": {"d": hex(&ar.d, w.right), "value": ar.d.decode(w.right).describe(), "over": walk(y)},
            "exact": exact.as_ref().map(|e| diff::exact_decimal(e, false)),
            "run": format!("mmac run {} --instr {} {}", args.left.0.display(), inst.name, w.input.run_arguments(inst)),
        });
        writeln!(out, "{v}")?;
        out.flush()?;
        return Ok(EXIT_FAILED);
    }
    writeln!(
        out,
        "differ: a sparse witness ({tried} sparse inputs tried: structured candidates, then random)"
    )?;
    for (side, (path, name)) in [("left ", args.left), ("right", args.right)] {
        writeln!(
            out,
            "  {side}: mmac run {} --instr {name} {}",
            path.display(),
            w.input.run_arguments(inst)
        )?;
    }
    writeln!(
        out,
        "left  d={} (over {})",
        diff::shown(&ar.d, w.left),
        walk(x)
    )?;
    writeln!(
        out,
        "right d={} (over {})",
        diff::shown(&ar.d, w.right),
        walk(y)
    )?;
    match &exact {
        Some(e) => writeln!(out, "exact   {}", diff::exact_shown(e))?,
        None => writeln!(out, "exact   (not finite: an input is NaN or infinite)")?,
    }
    writeln!(
        out,
        "`mmac run ... --trace` shows each side's dense pipeline on these operands"
    )?;
    out.flush()?;
    Ok(EXIT_FAILED)
}
