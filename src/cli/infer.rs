//! `serve` (a spec's instruction as a black box on stdin/stdout) and `infer` (a spec from
//! a black box run as a command): the two ends of the protocol in
//! `mmac_runtime::blackbox`, and the report of `mmac_runtime::infer`.

use super::common::{
    EXIT_FAILED, EXIT_OK, EXIT_USAGE, Halt, Outcome, create_output, instruction, load,
};
use mmac_compiler::engine::{Choice, Engine};
use mmac_runtime::blackbox::{Interface, PipeBox, evaluate};
use mmac_runtime::infer::{self, Naming, Options};
use mmac_runtime::inputs::{Input, hex};
use mmac_runtime::vectors::parse_request;
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::mpsc;

/// Requests answered together at most (the answers are flushed after each batch).
const BATCH: usize = 4096;

/// Answer requests on stdin with one `d=HEX` line each, in order. Blank lines and `#`
/// comments are skipped. A malformed request ends the run: the requests before it are
/// answered, the error names the line and column on stderr, exit 2. A sparse
/// instruction's requests carry `pos=` (the columns of a's stored elements), as `.mmv`
/// cases do.
pub fn serve(file: &Path, name: &str, color: bool) -> Outcome {
    let s = load(file, color)?;
    let checked = instruction(&s, name)?;
    let inst = checked.instruction();
    let iface = Interface::of(inst);
    // a box may answer many requests: optimised kernels
    let engine = Engine::new(checked, Choice::OPTIMISED);
    // a reader thread, so that a batch is whatever has arrived: a box that writes one
    // line and waits is answered at once, a stream of lines in large batches
    let (tx, rx) = mpsc::sync_channel::<std::io::Result<String>>(BATCH);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let stop = line.is_err();
            if tx.send(line).is_err() || stop {
                break;
            }
        }
    });
    let mut out = std::io::stdout().lock();
    let mut lineno = 0usize;
    let d = &inst.arithmetic.d;
    while let Ok(first) = rx.recv() {
        let mut lines = vec![first];
        while lines.len() < BATCH {
            match rx.try_recv() {
                Ok(l) => lines.push(l),
                Err(_) => break,
            }
        }
        let mut batch: Vec<Input> = vec![];
        let mut positions: Vec<u64> = vec![];
        let mut error = None;
        for line in lines {
            lineno += 1;
            let line = match line {
                Ok(l) => l,
                Err(e) => {
                    error = Some(format!("error: <stdin>:{lineno}: cannot read: {e}"));
                    break;
                }
            };
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let parsed = parse_request(&line).map(|r| {
                let p = r.positions;
                let input = Input {
                    c: r.c,
                    a: r.a,
                    b: r.b,
                    sa: r.sa,
                    sb: r.sb,
                };
                (input, p)
            });
            match parsed {
                Ok((input, p)) => match sparse_misfit(inst, &input, &p).or_else(|| {
                    // (the interface counts a dense instruction's elements)
                    inst.sparsity
                        .is_none()
                        .then(|| iface.misfit(&input))
                        .flatten()
                }) {
                    None => {
                        batch.push(input);
                        positions.extend(p);
                    }
                    Some(why) => {
                        error = Some(format!("error: <stdin>:{lineno}:1: {why} for `{name}`"));
                        break;
                    }
                },
                Err((column, message)) => {
                    error = Some(format!("error: <stdin>:{lineno}:{column}: {message}"));
                    break;
                }
            }
        }
        let answers = match inst.sparsity {
            Some(_) => evaluate_sparse(&engine, &batch, &positions),
            None => evaluate(&engine, &batch),
        };
        match answers {
            Ok(ds) => {
                for v in ds {
                    writeln!(out, "d={}", hex(d, v))?;
                }
            }
            Err(e) => {
                out.flush()?;
                eprintln!("error: `{name}` cannot evaluate a request: {e}");
                return Err(Halt::Exit(EXIT_FAILED));
            }
        }
        out.flush()?;
        if let Some(e) = error {
            eprintln!("{e}");
            return Err(Halt::Exit(EXIT_USAGE));
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}

/// Why a request does not fit a sparse instruction (a's stored elements, b's K, the
/// positions in the pattern; the widths as for a dense one), or positions given to a
/// dense one.
fn sparse_misfit(
    inst: &mmac_compiler::ir::Instruction,
    input: &Input,
    positions: &[u64],
) -> Option<String> {
    let Some(s) = &inst.sparsity else {
        return (!positions.is_empty())
            .then(|| "`pos=` given, but the instruction is dense".into());
    };
    let n = inst.scale_count();
    for (name, got, want) in [
        ("a", input.a.len(), inst.stored()),
        ("b", input.b.len(), inst.columns()),
        ("sa", input.sa.len(), n),
        ("sb", input.sb.len(), n),
    ] {
        if got != want {
            return Some(format!("`{name}=` has {got} values, expected {want}"));
        }
    }
    if let Err(e) = mmac_compiler::sparse::check(s, inst.columns(), positions) {
        return Some(format!("`pos=`: {e}"));
    }
    Interface::of(inst).unfit_value(input)
}

/// A sparse instruction's answers to a batch, record by record its positions.
fn evaluate_sparse(
    engine: &Engine,
    inputs: &[Input],
    positions: &[u64],
) -> Result<Vec<u64>, mmac_compiler::engine::EvalError> {
    let inst = engine.checked().instruction();
    let c: Vec<u64> = inputs.iter().map(|i| i.c).collect();
    let flat = |f: fn(&Input) -> &[u64]| -> Vec<u64> {
        inputs.iter().flat_map(|i| f(i).iter().copied()).collect()
    };
    let (a, b, sa, sb) = (
        flat(|i| &i.a),
        flat(|i| &i.b),
        flat(|i| &i.sa),
        flat(|i| &i.sb),
    );
    let s = inst.scale_count();
    let mut d = vec![0; inputs.len()];
    engine.sparse_batch_strided(
        &c,
        (&a, inst.stored()),
        (&b, inst.columns()),
        (&sa, s),
        (&sb, s),
        (positions, inst.stored()),
        &mut d,
    )?;
    Ok(d)
}

/// What `mmac infer` is given.
pub struct InferArgs<'a> {
    pub exec: &'a str,
    pub types: &'a str,
    pub k: usize,
    pub scale: Option<&'a str>,
    pub arch: Option<&'a str>,
    pub name: Option<&'a str>,
    pub verify: usize,
    pub json: bool,
    pub output: &'a Path,
    /// Seconds to wait for each answer.
    pub box_timeout: f64,
}

fn usage(message: String) -> Halt {
    eprintln!("error: {message}");
    Halt::Exit(EXIT_USAGE)
}

/// Infer a spec from the box, verify it, and write it to `-o` (only when verified).
/// Exit 0: verified; 1: no candidate reproduces the box (closest candidate and a witness
/// on stderr, nothing written); 2: usage, or a box that cannot be started or breaks the
/// protocol.
pub fn infer(args: &InferArgs) -> Outcome {
    let iface = Interface::parse(args.types, args.k, args.scale).map_err(|e| usage(e.0))?;
    let mut naming = Naming::default_for(&iface);
    if let Some(a) = args.arch {
        naming.arch = a.to_string();
    }
    if let Some(n) = args.name {
        naming.instruction = n.to_string();
    }
    let out_path = args.output;
    // the box's own files (`--exec "python3 box.py"`) are inputs that -o must not name
    let box_files: Vec<&Path> = args
        .exec
        .split_whitespace()
        .map(Path::new)
        .filter(|p| p.is_file())
        .collect();
    let inputs: Vec<(&str, &Path)> = box_files.iter().map(|p| ("--exec", *p)).collect();
    let output = create_output(out_path, &inputs)?;
    let options = Options {
        verify: args.verify,
        ..Options::default()
    };
    let started = std::time::Instant::now();
    if !(args.box_timeout > 0.0 && args.box_timeout <= 86_400.0) {
        return Err(usage(format!(
            "--box-timeout {}: expected seconds, more than 0 and at most a day",
            args.box_timeout
        )));
    }
    let mut bx = PipeBox::start(args.exec, iface.clone())
        .map_err(|e| usage(e.to_string()))?
        .reply_timeout(std::time::Duration::from_secs_f64(args.box_timeout));
    let result = infer::infer(&mut bx, &iface, &naming, args.exec, &options);
    drop(bx);
    let inference = match result {
        Ok(i) => i,
        Err(e) => return Err(usage(e.to_string())),
    };
    let seconds = started.elapsed().as_secs_f64();
    // the spec must be one `mmac check` accepts
    if let Err(d) = mmac_compiler::compile(&out_path.display().to_string(), &inference.spec) {
        eprint!("{}", d.render_plain(100));
        eprintln!("error: internal: the inferred spec does not check");
        return Err(Halt::Exit(EXIT_FAILED));
    }
    let verified = inference.verified();
    if verified && let Err(e) = output.finish_bytes(inference.spec.as_bytes()) {
        return Err(usage(e.to_string()));
    }
    let mut out = super::common::stdout();
    if args.json {
        let params: serde_json::Map<String, serde_json::Value> = inference
            .parameters
            .iter()
            .map(|p| (p.name.clone(), serde_json::Value::String(p.value.clone())))
            .collect();
        let failure = inference.failure.as_ref().map(|m| {
            serde_json::json!({
                "probe": m.probe,
                "request": m.request,
                "box_d": hex(&iface.d, m.box_d),
                "candidate_d": m.candidate_d.map(|d| hex(&iface.d, d)),
            })
        });
        let j = serde_json::json!({
            "verified": verified,
            "pipeline": inference.family,
            "uses": inference.uses,
            "parameters": params,
            "probes": inference.probes,
            "verify_cases": inference.verify_cases,
            "unresolved": inference.unresolved,
            "seconds": (seconds * 1000.0).round() / 1000.0,
            "output": if verified { Some(out_path.display().to_string()) } else { None },
            "witness": failure,
        });
        writeln!(out, "{j}")?;
    } else if verified {
        writeln!(
            out,
            "inferred `uses {}`: verified on {} cases after {} probes; wrote {}",
            inference.uses,
            inference.verify_cases,
            inference.probes,
            out_path.display()
        )?;
    }
    out.flush()?;
    if verified {
        return Ok(EXIT_OK);
    }
    let m = inference.failure.as_ref().expect("not verified: a failure");
    eprintln!(
        "error: no candidate of the prelude reproduces the box; nothing written to {}",
        out_path.display()
    );
    eprintln!("  closest candidate: uses {}", inference.uses);
    eprintln!("  witness ({}): {}", m.probe, m.request);
    eprintln!(
        "    the box answers d={}, the candidate {}",
        hex(&iface.d, m.box_d),
        m.candidate_d
            .map_or("cannot evaluate it".into(), |d| format!(
                "d={}",
                hex(&iface.d, d)
            ))
    );
    for u in &inference.unresolved {
        eprintln!("  unresolved: {u}");
    }
    Ok(EXIT_FAILED)
}
