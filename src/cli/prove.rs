//! `prove`: equivalence of two spec instructions, or of a spec instruction and an RTL
//! design, for every input (`mmac_runtime::prove`: Yosys, ABC and Bitwuzla on a miter), with a
//! replayed witness when they differ. Exit 0 proved equivalent, 1 a witness, 3 undecided
//! within `--timeout`, 2 bad usage or a design Yosys cannot read.

use super::common::{EXIT_FAILED, EXIT_OK, EXIT_UNDECIDED, EXIT_USAGE, Outcome, instruction, load};
use mmac_compiler::Checked;
use mmac_runtime::inputs::hex;
use mmac_runtime::prove::{self, Side, Verdict, Witness};
use serde_json::json;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct ProveArgs<'a> {
    /// LEFT_FILE LEFT_INSTR RIGHT_FILE RIGHT_INSTR, or FILE with `instr` and `rtl`.
    pub operands: &'a [String],
    pub instr: Option<&'a str>,
    pub rtl: &'a [PathBuf],
    pub top: Option<&'a str>,
    pub parameters: &'a [String],
    pub timeout: u64,
    pub solvers: prove::Solvers,
    pub keep: Option<&'a Path>,
    pub json: bool,
}

pub fn prove(args: &ProveArgs, color: bool) -> Outcome {
    let usage = |why: &str| {
        eprintln!(
            "error: {why}\n  usage: mmac prove LEFT_FILE LEFT_INSTR RIGHT_FILE RIGHT_INSTR\n         mmac prove FILE --instr NAME --rtl DESIGN.sv... --top MODULE"
        );
        Ok(EXIT_USAGE)
    };
    let mut parameters = vec![];
    for p in args.parameters {
        match p.split_once('=') {
            Some((k, v)) if !k.is_empty() && !v.is_empty() => {
                parameters.push((k.to_string(), v.to_string()))
            }
            _ => return usage(&format!("--set {p}: write NAME=VALUE")),
        }
    }
    let rtl_mode = !args.rtl.is_empty();
    match (rtl_mode, args.operands.len()) {
        (true, 1) => {
            let (Some(name), Some(top)) = (args.instr, args.top) else {
                return usage(
                    "--rtl needs --instr (the spec's instruction) and --top (the design's module)",
                );
            };
            let file = Path::new(&args.operands[0]);
            let spec = load(file, color)?;
            let inst = instruction(&spec, name)?;
            for f in args.rtl {
                if !f.is_file() {
                    let what = if f.is_dir() {
                        "a folder, not a Verilog file"
                    } else {
                        "no such file"
                    };
                    return usage(&format!("--rtl {}: {what}", f.display()));
                }
            }
            let left = Side::Spec(inst);
            let right = Side::Rtl {
                files: args.rtl.to_vec(),
                top: top.to_string(),
                parameters,
            };
            let names = (
                format!("{} ({})", inst.name(), file.display()),
                format!(
                    "{top} ({})",
                    args.rtl
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            decide(args, &left, &right, inst, (file, name), &names)
        }
        (false, 4) => {
            if args.instr.is_some() || args.top.is_some() || !parameters.is_empty() {
                return usage("--instr, --top and --set go with --rtl");
            }
            let (lf, rf) = (Path::new(&args.operands[0]), Path::new(&args.operands[2]));
            let ls = load(lf, color)?;
            let rs = load(rf, color)?;
            let x = instruction(&ls, &args.operands[1])?;
            let y = instruction(&rs, &args.operands[3])?;
            let names = (
                format!("{} ({})", x.name(), lf.display()),
                format!("{} ({})", y.name(), rf.display()),
            );
            decide(
                args,
                &Side::Spec(x),
                &Side::Spec(y),
                x,
                (lf, &args.operands[1]),
                &names,
            )
        }
        (true, _) => usage("with --rtl, give one spec FILE"),
        (false, _) => usage("give two instructions (FILE INSTR FILE INSTR), or one and --rtl"),
    }
}

fn decide(
    args: &ProveArgs,
    left: &Side,
    right: &Side,
    spec: Checked,
    run_as: (&Path, &str),
    names: &(String, String),
) -> Outcome {
    let scratch;
    let dir = match args.keep {
        Some(d) => {
            if let Err(e) = std::fs::create_dir_all(d) {
                eprintln!(
                    "error: --keep {}: cannot make the folder the proof's files go in: {e}",
                    d.display()
                );
                return Ok(EXIT_USAGE);
            }
            d.to_path_buf()
        }
        None => {
            scratch = tempfile::tempdir()?;
            scratch.path().to_path_buf()
        }
    };
    // a signal stops the solvers and returns here, so that the scratch folder is removed
    prove::catch_interrupts();
    let proof = match prove::prove(
        left,
        right,
        Duration::from_secs(args.timeout),
        args.solvers,
        &dir,
    ) {
        Ok(p) => p,
        Err(prove::ProveError::Interrupted(signal)) => {
            eprintln!("mmac prove: interrupted (signal {signal}); the solvers were stopped");
            return Ok(128 + signal);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let ar = spec.arithmetic();
    let mut out = super::common::stdout();
    let code = match &proof.verdict {
        Verdict::Equivalent => EXIT_OK,
        Verdict::Differ(_) => EXIT_FAILED,
        Verdict::Unknown(_) => EXIT_UNDECIDED,
    };
    if args.json {
        let mut v = json!({
            "result": match &proof.verdict {
                Verdict::Equivalent => "equivalent",
                Verdict::Differ(_) => "differ",
                Verdict::Unknown(_) => "unknown",
            },
            "seconds": (proof.seconds * 1000.0).round() / 1000.0,
            "method": proof.method,
        });
        if let Some(solver) = proof.solver {
            v["solver"] = json!(solver);
        }
        if proof.by_steps.is_some() {
            v["by_steps"] = proof.by_steps_json();
        }
        if proof.cut {
            v["cut"] = json!("reference exponent");
        }
        match &proof.verdict {
            Verdict::Differ(w) => {
                let list = |f: &mmac_compiler::format::Format, xs: &[u64]| -> Vec<String> {
                    xs.iter().map(|&x| hex(f, x)).collect()
                };
                let mut witness = json!({
                    "c": hex(&ar.c, w.c),
                    "a": list(&ar.a, &w.a),
                    "b": list(&ar.b, &w.b),
                });
                if let Some(s) = &ar.scale {
                    witness["sa"] = json!(list(&s.format, &w.sa));
                    witness["sb"] = json!(list(&s.format, &w.sb));
                }
                v["witness"] = witness;
                v["left_d"] = json!(hex(&ar.d, w.left_d));
                v["right_d"] = json!(hex(&ar.d, w.right_d));
            }
            Verdict::Unknown(why) => v["why"] = json!(why),
            Verdict::Equivalent => {}
        }
        writeln!(out, "{v}")?;
    } else {
        match &proof.verdict {
            Verdict::Equivalent => writeln!(
                out,
                "equivalent: {} and {} give the same d on every input\n  proved by {} in {:.1} s",
                names.0,
                names.1,
                proof.decided_by(),
                proof.seconds
            )?,
            Verdict::Differ(w) => {
                let how = match proof.method {
                    "search" => {
                        "found by the structured search and confirmed by the interpreter".into()
                    }
                    _ => format!("found by {} and replayed on both sides", proof.decided_by()),
                };
                writeln!(
                    out,
                    "differ: {} and {}\n  witness {how} in {:.1} s",
                    names.0, names.1, proof.seconds
                )?;
                write_witness(&mut out, spec, run_as, w, right)?;
            }
            Verdict::Unknown(why) => writeln!(
                out,
                "unknown: {} and {}\n  {why} (after {:.1} s)",
                names.0, names.1, proof.seconds
            )?,
        }
    }
    out.flush()?;
    Ok(code)
}

/// The witness as the `mmac run` line of the spec side and the port values of the
/// other, with each side's d.
fn write_witness(
    out: &mut impl std::io::Write,
    spec: Checked,
    run_as: (&Path, &str),
    w: &Witness,
    right: &Side,
) -> std::io::Result<()> {
    let ar = spec.arithmetic();
    let join = |f: &mmac_compiler::format::Format, xs: &[u64]| {
        xs.iter().map(|&x| hex(f, x)).collect::<Vec<_>>().join(",")
    };
    let mut run = format!(
        "mmac run {} --instr {} --c {} --a {} --b {}",
        run_as.0.display(),
        run_as.1,
        hex(&ar.c, w.c),
        join(&ar.a, &w.a),
        join(&ar.b, &w.b)
    );
    if let Some(s) = &ar.scale {
        run.push_str(&format!(
            " --sa {} --sb {}",
            join(&s.format, &w.sa),
            join(&s.format, &w.sb)
        ));
    }
    writeln!(out, "  {run} --trace")?;
    writeln!(out, "    left d  = {}", hex(&ar.d, w.left_d))?;
    match right {
        Side::Rtl { top, .. } => {
            let values = mmac_compiler::rtl::pack(
                spec,
                &mmac_compiler::engine::Operands {
                    c: w.c,
                    a: &w.a,
                    b: &w.b,
                    sa: &w.sa,
                    sb: &w.sb,
                },
            );
            let ports: Vec<_> = mmac_compiler::rtl::ports(spec)
                .into_iter()
                .zip(values)
                .map(|((p, width), v)| (p, width, v))
                .collect();
            let shown: Vec<String> = ports
                .iter()
                .map(|(p, width, v)| format!("{p} = {width}'h{}", v.to_str_radix(16)))
                .collect();
            writeln!(out, "  {top}: {}", shown.join(", "))?;
            writeln!(
                out,
                "    right d = {}'h{}",
                ar.d.storage_bits(),
                hex(&ar.d, w.right_d)
            )?;
        }
        Side::Spec(_) => writeln!(out, "    right d = {}", hex(&ar.d, w.right_d))?,
    }
    Ok(())
}
