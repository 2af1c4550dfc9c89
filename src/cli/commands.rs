//! The spec and vector subcommands: `check`, `list`, `show`, `probe`, `run` (one dot
//! product, on the JIT or the interpreter), `test` (conformance vectors) and `gen` (vectors
//! from a spec). Each reads its inputs, calls the compiler or runtime, prints data to
//! stdout and diagnostics to stderr, and returns the exit code.

use super::common::{
    EXIT_FAILED, EXIT_OK, EXIT_USAGE, Halt, Outcome, create_output, instruction, load, load_for,
    progress_bar,
};
use super::{Engine, RunArgs};
use mmac_compiler::Checked;
use mmac_compiler::engine::{self as facade, Operands};
use mmac_compiler::exact::Dyadic;
use mmac_compiler::format::Format;
use mmac_compiler::ir::Instruction;
use mmac_compiler::{interp, sparse};
use mmac_runtime::{generate, listing};
use mmac_runtime::{specs, values};
use std::io::Write;
use std::path::Path;

/// Check every file; the exit code is the worst outcome (an unreadable file is a usage
/// error, 2; an invalid spec a failed check, 1).
pub fn check(files: &[std::path::PathBuf], color: bool) -> Outcome {
    let mut code = EXIT_OK;
    for f in files {
        match load(f, color) {
            Ok(s) => {
                if !s.spec().arch.is_empty() {
                    eprintln!(
                        "{}: ok ({} instructions, arch {})",
                        f.display(),
                        s.spec().instructions.len(),
                        s.spec().arch
                    );
                } else {
                    eprintln!("{}: ok (library)", f.display());
                }
            }
            Err(Halt::Exit(c)) => code = code.max(c),
            Err(halt) => return Err(halt),
        }
    }
    Ok(code)
}

pub fn list(file: &Path, markdown: bool, json: bool, color: bool) -> Outcome {
    if file.is_dir() {
        return list_folder(file, markdown, json, color);
    }
    let s = load(file, color)?;
    let mut out = super::common::stdout();
    if json {
        let rows: Vec<serde_json::Value> = s.instructions().map(instruction_json).collect();
        writeln!(out, "{}", serde_json::json!({ "instructions": rows }))?;
    } else if markdown {
        write!(out, "{}", listing::markdown(s.spec()))?;
    } else {
        for i in &s.spec().instructions {
            writeln!(out, "{}", listing::line(i))?;
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}

/// One instruction of `mmac list --json`.
fn instruction_json(checked: Checked) -> serde_json::Value {
    let i = checked.instruction();
    serde_json::json!({
        "name": i.name,
        "shape": listing::shape(i),
        "types": listing::types(i),
        "pipeline": i.provenance.pipeline,
        "arguments": i.provenance.arguments.iter().map(|(n, v)| (n.clone(), serde_json::Value::String(v.show()))).collect::<serde_json::Map<_, _>>(),
        "F": listing::alignment_f(i),
        "evidence": listing::evidence(i),
        "datapath": mmac_runtime::datapath::of(checked),
    })
}

/// `mmac list FOLDER`: every spec below it, file by file (as `mmac test` loads them);
/// a spec that does not check is reported and the others are listed.
fn list_folder(folder: &Path, markdown: bool, json: bool, color: bool) -> Outcome {
    let (loaded, errors) = specs::load_all(folder);
    for e in &errors {
        eprint!("{}", e.render(color));
    }
    let mut out = super::common::stdout();
    let with_instructions = loaded.iter().filter(|s| !s.spec().instructions.is_empty());
    if json {
        let mut rows: Vec<serde_json::Value> = vec![];
        for s in with_instructions {
            for c in s.instructions() {
                let mut row = instruction_json(c);
                row["file"] = s.path.display().to_string().into();
                row["arch"] = s.spec().arch.clone().into();
                rows.push(row);
            }
        }
        writeln!(out, "{}", serde_json::json!({ "instructions": rows }))?;
    } else {
        for s in with_instructions {
            if markdown {
                write!(out, "{}", listing::markdown(s.spec()))?;
            } else {
                writeln!(out, "# {} (arch {})", s.path.display(), s.spec().arch)?;
                for i in &s.spec().instructions {
                    writeln!(out, "{}", listing::line(i))?;
                }
            }
        }
    }
    out.flush()?;
    let unreadable = errors.iter().any(|e| matches!(e, specs::LoadError::Io(..)));
    Ok(if unreadable {
        EXIT_USAGE
    } else if !errors.is_empty() {
        EXIT_FAILED
    } else {
        EXIT_OK
    })
}

pub fn show(file: &Path, name: &str, cost: bool, color: bool) -> Outcome {
    let s = load_for(file, name, color)?;
    let checked = instruction(&s, name)?;
    // synthesis first: a failure prints nothing on stdout
    let cost = match cost.then(|| mmac_runtime::cost::synthesize(checked)) {
        Some(Err(e)) => {
            eprintln!("error: --cost: {e}");
            return Ok(EXIT_USAGE);
        }
        Some(Ok(c)) => Some(c),
        None => None,
    };
    let mut out = super::common::stdout();
    write!(
        out,
        "{}",
        mmac_compiler::printer::print_instruction(&s.spec().arch, checked)
    )?;
    // the datapath as comments: the output stays a spec that checks
    write!(out, "\n{}", mmac_runtime::datapath::of(checked).comment())?;
    if let Some(c) = cost {
        writeln!(
            out,
            "// cost (Yosys `synth -flatten` of `mmac compile --emit verilog`; generic gates, an\n\
             // estimate for comparing designs, not silicon area): {}",
            c.summary()
        )?;
        let kinds: Vec<String> = c
            .cells_by_kind
            .iter()
            .map(|(k, n)| format!("{} {n}", k.trim_start_matches('$').trim_matches('_')))
            .collect();
        writeln!(out, "//   cells: {}", kinds.join(", "))?;
    }
    out.flush()?;
    Ok(EXIT_OK)
}

pub fn probe(file: &Path, instr: Option<&str>, color: bool) -> Outcome {
    let s = load(file, color)?;
    let chosen: Vec<_> = match instr {
        Some(name) => vec![instruction(&s, name)?],
        // one instruction per distinct arithmetic: shape families answer alike
        None => s.distinct().map(|(c, _)| c).collect(),
    };
    let mut out = super::common::stdout();
    for c in chosen {
        writeln!(out, "{}\n{}", c.name(), mmac_runtime::probes::report(c))?;
    }
    out.flush()?;
    Ok(EXIT_OK)
}

/// The values of `--{option}`, comma-separated, in `format`; a note on stderr for a bare
/// hex value that reads differently as a number: among decimals (`--b 0.5,2`: `2` is the
/// encoding 0x2, not 2.0), or in e-notation the format holds (`--c 1e3` is 0x1e3, not
/// 1000).
fn parse_values(text: &str, format: &Format, option: &str) -> Result<Vec<u64>, String> {
    let items: Vec<&str> = text.split(',').map(str::trim).collect();
    let decimals = items.iter().any(|x| values::is_decimal(x));
    let mut out = Vec::with_capacity(items.len());
    for (i, x) in items.iter().enumerate() {
        let at = if option == "c" {
            "--c".to_string()
        } else {
            format!("--{option} element {i}")
        };
        let v = values::parse(x, format).map_err(|e| format!("{at}: {e}"))?;
        // `1e3` alone also reads as a number the format holds: say which reading is taken
        let e_notation = x.contains(['e', 'E'])
            && values::encode_decimal(x, format).is_ok_and(|number| number != v);
        if (decimals || e_notation)
            && !values::is_decimal(x)
            && !x.starts_with("0x")
            && values::parse_decimal(x).is_ok()
            && values::encode_decimal(x, format) != Ok(v)
        {
            eprintln!(
                "note: {at} `{x}` is read as the hex encoding 0x{v:x} ({}); write `+{x}` for the number",
                format.decode(v).describe()
            );
        }
        out.push(v);
    }
    Ok(out)
}

/// Check a lane count; with `pad`, fill missing lanes with `fill` (named in errors).
fn lanes(
    mut v: Vec<u64>,
    want: usize,
    option: &str,
    inst: &Instruction,
    pad: Option<(&str, Option<u64>, &Format)>,
) -> Result<Vec<u64>, String> {
    let have = v.len();
    if have < want
        && let Some((what, fill, format)) = pad
    {
        let fill = fill.ok_or_else(|| format!("--pad: `{}` has no {what}", format.name))?;
        v.resize(want, fill);
        return Ok(v);
    }
    if have != want {
        let mut e = format!(
            "--{option} has {have} elements, but `{}` takes {want}",
            inst.name
        );
        if have < want {
            e.push_str(
                "\n  help: `--pad` fills missing a/b lanes with +0 and missing scale factors with 1.0",
            );
        }
        return Err(e);
    }
    Ok(v)
}

/// The operands of `mmac run`, parsed in the instruction's formats and counted.
fn operands(args: &RunArgs, inst: &Instruction) -> Result<(u64, [Vec<u64>; 5]), String> {
    let c = parse_values(&args.c, &inst.arithmetic.c, "c")?;
    if c.len() != 1 {
        return Err("--c takes one value".into());
    }
    let k = inst.columns();
    let zero = |f: &Format| f.encode_finite(false, &Dyadic::zero());
    let pad = |f| args.pad.then(|| ("+0 to pad with", zero(f), f));
    let a = parse_values(&args.a, &inst.arithmetic.a, "a")?;
    let (a, positions) = sparse_a(args, inst, a)?;
    let a = lanes(a, inst.stored(), "a", inst, pad(&inst.arithmetic.a))?;
    let b = lanes(
        parse_values(&args.b, &inst.arithmetic.b, "b")?,
        k,
        "b",
        inst,
        pad(&inst.arithmetic.b),
    )?;
    let mut scales = [vec![], vec![]];
    for (i, (option, text)) in [("sa", &args.sa), ("sb", &args.sb)].into_iter().enumerate() {
        scales[i] = match (&inst.arithmetic.scale, text) {
            (None, None) => vec![],
            (None, Some(_)) => {
                return Err(format!(
                    "`{}` takes no scale factors, but --{option} was given",
                    inst.name
                ));
            }
            (Some(s), text) => {
                let given = match text {
                    Some(t) => parse_values(t, &s.format, option)?,
                    None => vec![],
                };
                let one = s.format.encode_finite(false, &Dyadic::pow2(0));
                let pad = args.pad.then_some(("1.0 to pad with", one, &s.format));
                lanes(given, inst.scale_count(), option, inst, pad)?
            }
        };
    }
    let [sa, sb] = scales;
    Ok((c[0], [a, b, sa, sb, positions]))
}

/// A sparse instruction's a and the positions of its elements: `--meta` with a's stored
/// elements, or a dense row of K elements compressed (its nonzero elements, the lowest
/// free columns where a group has fewer). A dense instruction takes no `--meta`.
fn sparse_a(
    args: &RunArgs,
    inst: &Instruction,
    a: Vec<u64>,
) -> Result<(Vec<u64>, Vec<u64>), String> {
    let Some(s) = &inst.sparsity else {
        if args.meta.is_some() {
            return Err(format!("`{}` is dense: it takes no --meta", inst.name));
        }
        return Ok((a, vec![]));
    };
    if let Some(meta) = &args.meta {
        let positions = meta
            .split(',')
            .map(|p| {
                p.trim()
                    .parse::<u64>()
                    .map_err(|_| {
                        format!(
                            "--meta: `{}` is not a column number (decimal: a .mmv case's `pos=` gives them in hex)",
                            p.trim()
                        )
                    })
            })
            .collect::<Result<Vec<u64>, String>>()?;
        sparse::check(s, inst.columns(), &positions).map_err(|e| format!("--meta: {e}"))?;
        return Ok((a, positions));
    }
    // without --meta, a is a dense row: --pad fills it to K with +0
    let mut a = a;
    if args.pad && a.len() < inst.columns() {
        let zero = inst.arithmetic.a.encode_finite(false, &Dyadic::zero());
        a.resize(inst.columns(), zero.unwrap_or(0));
    }
    let names = sparse::RowNames {
        row: "--a",
        positions: "--meta",
        pad: "--pad",
    };
    sparse::compress_row(inst, &a, &names)
}

pub fn run(args: &RunArgs, color: bool) -> Outcome {
    let s = load_for(&args.file, &args.instr, color)?;
    let checked = instruction(&s, &args.instr)?;
    let inst = checked.instruction();
    let (c, [a, b, sa, sb, positions]) = match operands(args, inst) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let ops = Operands {
        c,
        a: &a,
        b: &b,
        sa: &sa,
        sb: &sb,
    };
    let result = if args.trace {
        // the trace is the dense arithmetic's, on the operands the sparse one gives it
        interp::run_traced_record(checked, &ops, &positions)
    } else {
        // one dot product: a quickly compiled kernel
        let engine = facade::Engine::new(checked, args.engine.choice(facade::Choice::QUICK));
        if let Some(why) = engine.fallback() {
            eprintln!("note: {why}; using the interpreter");
        }
        engine.sparse_dot(&ops, &positions).map(|d| (d, vec![]))
    };
    match result {
        Ok((d, lines)) => {
            let mut out = super::common::stdout();
            for l in lines {
                writeln!(out, "{l}")?;
            }
            writeln!(
                out,
                "d={:0w$x} {}",
                d,
                inst.arithmetic.d.decode(d).describe(),
                w = inst.arithmetic.d.hex_digits()
            )?;
            out.flush()?;
            Ok(EXIT_OK)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(EXIT_USAGE)
        }
    }
}

pub fn test(spec: &Path, vectors: &Path, engine: Engine, optimized: bool, color: bool) -> Outcome {
    for path in [spec, vectors] {
        if !path.exists() {
            eprintln!("error: {}: no such file or folder", path.display());
            return Ok(EXIT_USAGE);
        }
    }
    let (loaded, errors) = specs::load_all(spec);
    for e in &errors {
        eprint!("{}", e.render(color));
    }
    let twice = specs::duplicate_archs(&loaded);
    for (arch, files) in &twice {
        let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        eprintln!(
            "error: {} all declare arch `{arch}`; which one a vector file of `{arch}` means would be a guess\n  help: name the spec file to test, or give the others another arch",
            files.join(", ")
        );
    }
    if !twice.is_empty() {
        return Ok(EXIT_USAGE);
    }
    let unreadable = errors.iter().any(|e| matches!(e, specs::LoadError::Io(..)));
    let mode = match engine {
        Engine::Interp => mmac_runtime::conformance::Mode::Interp,
        Engine::Jit if optimized => mmac_runtime::conformance::Mode::JitOptimized,
        Engine::Jit => mmac_runtime::conformance::Mode::Jit,
    };
    match mmac_runtime::conformance::run_with(&loaded, vectors, mode) {
        Ok(sum) => {
            eprint!("{}", sum.diagnostics);
            let mut out = super::common::stdout();
            write!(out, "{}", sum.report)?;
            writeln!(out, "{}", sum.line())?;
            out.flush()?;
            if let Some(why) = sum.nothing_ran() {
                eprintln!("error: {why}");
            }
            Ok(if unreadable {
                EXIT_USAGE
            } else if !sum.passed_all() || !errors.is_empty() {
                EXIT_FAILED
            } else {
                EXIT_OK
            })
        }
        Err(e) => {
            eprintln!("error: reading {}: {e}", vectors.display());
            Ok(EXIT_USAGE)
        }
    }
}

/// How `mmac gen` writes its cases.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenFormat {
    /// `.mmv`, what `mmac test` reads.
    Mmv,
    /// One case per line of fixed-width hex fields, for Verilog's `$readmemh`.
    Hex,
}

pub fn generate(
    file: &Path,
    name: &str,
    random: usize,
    seed: u64,
    format: GenFormat,
    output: Option<&Path>,
    color: bool,
) -> Outcome {
    let s = load_for(file, name, color)?;
    let checked = instruction(&s, name)?;
    let inst = checked.instruction();
    let out_file = match output {
        Some(p) => Some(create_output(p, &[("FILE", file)])?),
        None => None,
    };
    let shown = file.display().to_string();
    if random > generate::MAX_RANDOM {
        eprintln!(
            "error: -n {random}: at most {} (2^30) random cases",
            generate::MAX_RANDOM
        );
        return Ok(EXIT_USAGE);
    }
    if inst.sparsity.is_some() && matches!(format, GenFormat::Hex) {
        eprintln!(
            "error: `{}` is sparse: --format hex has no field for the positions; write .mmv (the default)",
            inst.name
        );
        return Ok(EXIT_USAGE);
    }
    let options = generate::Options { random, seed };
    // the corner cases first (they need only the random inputs' fingerprints), then the
    // file: its head, the random cases as they are computed, the corner cases
    let corners = match generate::corner_cases(checked, &options) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_FAILED);
        }
    };
    let mut killed = 0;
    let mut unobservable = vec![];
    let mut survived = vec![];
    for (label, fate) in &corners.neighbours {
        match fate {
            generate::Fate::Killed(_) | generate::Fate::Interface => killed += 1,
            generate::Fate::Unobservable(why) => unobservable.push(format!("{label} ({why})")),
            generate::Fate::Survived => survived.push(label.clone()),
        }
    }
    let total = random + corners.cases.len();
    let notes = vec![
        format!(
            "source: computed from {shown} by mmac's reference interpreter (`mmac gen --seed {seed} -n {random}`)"
        ),
        format!(
            "{random} random cases, then {} corner cases; each case's comment says why it is there",
            corners.cases.len()
        ),
        format!(
            "neighbours (one parameter moved): {killed} told apart, {} unobservable{}",
            unobservable.len(),
            if survived.is_empty() {
                String::new()
            } else {
                format!(
                    ", {} not told apart: {}",
                    survived.len(),
                    survived.join(", ")
                )
            }
        ),
    ];
    let arch = &s.spec().arch;
    let (head, case): (String, fn(&Instruction, &generate::Case) -> String) = match format {
        GenFormat::Mmv => (
            generate::mmv_head(arch, inst, &notes, total),
            generate::mmv_case,
        ),
        GenFormat::Hex => (
            generate::hex_head(arch, inst, &notes, total),
            generate::hex_case,
        ),
    };
    let bar = progress_bar(random as u64, "random cases", random >= 1 << 16);
    let write = |out: &mut dyn Write| -> std::io::Result<()> {
        out.write_all(head.as_bytes())?;
        generate::random_cases(checked, &options, &mut |c| {
            bar.inc(1);
            out.write_all(case(inst, &c).as_bytes())
        })
        .map_err(|e| match e {
            generate::GenError::Write(e) => e,
            e => std::io::Error::other(e.to_string()),
        })?;
        for c in &corners.cases {
            out.write_all(case(inst, c).as_bytes())?;
        }
        Ok(())
    };
    let written = match out_file {
        Some(o) => o.write_with(write),
        None => {
            // a closed pipe ends `gen` quietly (a data command: `mmac gen ... | head`)
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let r = write(&mut out).and_then(|()| out.flush());
            bar.finish_and_clear();
            r?;
            Ok(())
        }
    };
    bar.finish_and_clear();
    if let Err(e) = written {
        eprintln!("error: {e}");
        return Ok(EXIT_FAILED);
    }
    eprintln!(
        "{total} cases ({random} random, {} corner); neighbours: {killed} told apart, {} unobservable",
        corners.cases.len(),
        unobservable.len()
    );
    for u in &unobservable {
        eprintln!("  unobservable: {u}");
    }
    for label in &survived {
        eprintln!(
            "warning: no generated case tells `{label}` apart, and it is not proven unobservable"
        );
    }
    Ok(EXIT_OK)
}
