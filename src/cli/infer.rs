//! `serve` (a spec's instruction as a black box on stdin/stdout) and `infer` (a spec from
//! a black box run as a command): the two ends of the protocol in
//! `mmac_runtime::blackbox`, and the report of `mmac_runtime::infer`.

use super::common::{
    EXIT_FAILED, EXIT_OK, EXIT_USAGE, Halt, Outcome, create_output, instruction, load_for,
};
use mmac_compiler::engine::{Choice, Engine};
use mmac_compiler::ir::{Sparsity, Walk};
use mmac_runtime::blackbox::{Interface, Misfit, PipeBox, evaluate};
use mmac_runtime::infer::{self, Naming, Options};
use mmac_runtime::inputs::{Input, hex};
use mmac_runtime::sparse::SparseInput;
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
    let s = load_for(file, name, color)?;
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
                        let column = field_column(&line, why.field);
                        error = Some(format!(
                            "error: <stdin>:{lineno}:{column}: {why} for `{name}`"
                        ));
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

/// The 1-based column at which the request `line` gives `field=` (1 where it does not).
fn field_column(line: &str, field: &str) -> usize {
    let key = format!("{field}=");
    line.match_indices(&key)
        .map(|(i, _)| i)
        .find(|&i| i == 0 || line[..i].ends_with(char::is_whitespace))
        .map_or(1, |i| line[..i].chars().count() + 1)
}

/// Why a request does not fit a sparse instruction (a's stored elements, b's K, the
/// positions in the pattern; the widths as for a dense one), or positions given to a
/// dense one.
fn sparse_misfit(
    inst: &mmac_compiler::ir::Instruction,
    input: &Input,
    positions: &[u64],
) -> Option<Misfit> {
    let misfit = |field, message| Some(Misfit { field, message });
    let Some(s) = &inst.sparsity else {
        return match positions.is_empty() {
            true => None,
            false => misfit("pos", "`pos=` given, but the instruction is dense".into()),
        };
    };
    let n = inst.scale_count();
    for (name, got, want) in [
        ("a", input.a.len(), inst.stored()),
        ("b", input.b.len(), inst.columns()),
        ("sa", input.sa.len(), n),
        ("sb", input.sb.len(), n),
    ] {
        if got != want {
            return misfit(name, format!("`{name}=` has {got} values, expected {want}"));
        }
    }
    if let Err(e) = mmac_compiler::sparse::check(s, inst.columns(), positions) {
        return misfit("pos", format!("`pos=`: {e}"));
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
    /// `--sparse "2 of 4"`: the box is a sparse instruction of K = `k` columns.
    pub sparse: Option<&'a str>,
}

/// `--sparse "KEPT of GROUP [pairs]"`, for a box of K = `k` columns.
fn parse_sparse(text: &str, k: usize) -> Result<Sparsity, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let (kept, group, pairs) = match words[..] {
        [kept, "of", group] => (kept, group, false),
        [kept, "of", group, "pairs"] => (kept, group, true),
        _ => {
            return Err(format!(
                "--sparse {text:?}: expected \"KEPT of GROUP\" or \"KEPT of GROUP pairs\", e.g. \"2 of 4\""
            ));
        }
    };
    let number = |w: &str| {
        w.parse::<u32>()
            .map_err(|_| format!("--sparse {text:?}: `{w}` is not a number"))
    };
    let s = Sparsity {
        kept: number(kept)?,
        group: number(group)?,
        pairs,
        walk: Walk::Selected,
    };
    if !s.is_known() {
        return Err(format!(
            "--sparse {text:?}: the patterns are 2 of 4, 1 of 2 and 2 of 4 pairs"
        ));
    }
    if k == 0 || !k.is_multiple_of(s.span() as usize) {
        return Err(format!(
            "--sparse {text:?}: --k {k} is not a whole number of groups of {} columns",
            s.span()
        ));
    }
    Ok(s)
}

/// Does the sparse box run its inferred dense arithmetic over the selected products?
/// `cases` random inputs with random positions through the box and through `spec` (the
/// inferred spec with `sparse a ...`); the first that differs, if any.
fn check_walk(
    bx: &mut PipeBox,
    spec: &str,
    cases: usize,
    seed: u64,
) -> Result<(usize, Option<infer::Mismatch>), String> {
    let checked = mmac_compiler::compile("<inferred>", spec).map_err(|d| d.render_plain(100))?;
    let checked = checked.get(0);
    let inst = checked.instruction();
    let engine = Engine::new(checked, Choice::OPTIMISED);
    let mut rng = mmac_compiler::random::Rng::new(seed);
    let inputs: Vec<SparseInput> = (0..cases)
        .map(|_| SparseInput::random(inst, &mut rng))
        .collect();
    let theirs = bx.answer_sparse(&inputs).map_err(|e| e.to_string())?;
    let nan = mmac_runtime::witness::nan_any(inst);
    for (input, &box_d) in inputs.iter().zip(&theirs) {
        let ours = engine.sparse_dot(&input.operands(), &input.positions).ok();
        if !ours
            .is_some_and(|d| mmac_runtime::conformance::matches(&inst.arithmetic.d, box_d, d, nan))
        {
            let iface = Interface::of(inst);
            let positions: Vec<String> = input.positions.iter().map(|p| format!("{p:x}")).collect();
            return Ok((
                cases,
                Some(infer::Mismatch {
                    probe: "sparse: random positions (the dense unit over the selected products?)"
                        .into(),
                    input: input.input.clone(),
                    request: format!(
                        "{} pos={}",
                        iface.request(&input.input),
                        positions.join(",")
                    ),
                    box_d,
                    candidate_d: ours,
                }),
            ));
        }
    }
    Ok((cases, None))
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
    let sparse = match args.sparse {
        Some(text) => Some(parse_sparse(text, args.k).map_err(usage)?),
        None => None,
    };
    if sparse.is_some() && args.scale.is_some() {
        return Err(usage(
            "--sparse with --scale: block-scaled sparse boxes are not inferred yet".into(),
        ));
    }
    // a sparse box is asked about its dense arithmetic over the selected products
    let dense_k = sparse.map_or(args.k, |s| s.stored(args.k as u32) as usize);
    let iface = Interface::parse(args.types, dense_k, args.scale).map_err(|e| usage(e.0))?;
    if let Some(s) = sparse
        && !s.fits_elements(iface.a.storage_bits())
    {
        return Err(usage(format!(
            "--sparse \"{s}\" is not a pattern for elements of `{}` (a's type)\n  help: {}",
            iface.a.name,
            Sparsity::ELEMENTS
        )));
    }
    let mut naming = Naming::default_for(
        &Interface::parse(args.types, args.k, args.scale).map_err(|e| usage(e.0))?,
    );
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
    if let Some(s) = sparse {
        bx = bx.sparse(s, args.k);
    }
    let result = infer::infer(&mut bx, &iface, &naming, args.exec, &options);
    let mut inference = match result {
        Ok(i) => i,
        Err(e) => return Err(usage(e.to_string())),
    };
    // a sparse box: the spec says so, and its walk is checked on random positions
    let mut sparse_cases = 0;
    if let Some(s) = sparse
        && inference.verified()
    {
        inference.spec = inference.spec.replacen(
            &format!("    shape 16 x 8 x {dense_k}\n"),
            &format!(
                "    shape 16 x 8 x {}\n    sparse a {s} over selected\n",
                args.k
            ),
            1,
        );
        let cases = args.verify.clamp(1, 4096);
        match check_walk(&mut bx, &inference.spec, cases, options.seed) {
            Ok((n, failure)) => {
                sparse_cases = n;
                inference.failure = failure;
            }
            Err(e) => return Err(usage(e)),
        }
    }
    drop(bx);
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
        let sparse_note = match sparse {
            Some(s) => format!(
                ", and over the selected products of a {s} sparse A on {sparse_cases} cases with random positions"
            ),
            None => String::new(),
        };
        writeln!(
            out,
            "inferred `uses {}`: verified on {} cases after {} probes{sparse_note}; wrote {}",
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
