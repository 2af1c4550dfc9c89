//! The spec and vector subcommands: `check`, `list`, `show`, `probe`, `run` (one dot
//! product, on the JIT or the interpreter) and `test` (conformance vectors). Each reads its
//! inputs, calls the compiler or runtime, prints data to stdout and diagnostics to stderr,
//! and returns the exit code.

use super::Engine;
use super::common::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, Halt, Outcome, instruction, load};
use mmac_compiler::engine::{EvalError, Operands};
use mmac_compiler::interp;
use mmac_compiler::ir::Instruction;
use mmac_compiler::jit;
use mmac_runtime::listing;
use mmac_runtime::specs;
use std::io::Write as _;
use std::path::Path;

/// Check every file; the exit code is the worst outcome (an unreadable file is a usage
/// error, 2; an invalid spec a failed check, 1).
pub fn check(files: &[std::path::PathBuf], color: bool) -> Outcome {
    let mut code = EXIT_OK;
    for f in files {
        match load(f, color) {
            Ok(s) => {
                if !s.spec.arch.is_empty() {
                    eprintln!(
                        "{}: ok ({} instructions, arch {})",
                        f.display(),
                        s.spec.instructions.len(),
                        s.spec.arch
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

pub fn list(file: &Path, markdown: bool, color: bool) -> Outcome {
    let s = load(file, color)?;
    let mut out = std::io::stdout().lock();
    if markdown {
        write!(out, "{}", listing::markdown(&s.spec))?;
    } else {
        for i in &s.spec.instructions {
            writeln!(out, "{}", listing::line(i))?;
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}

pub fn show(file: &Path, name: &str, color: bool) -> Outcome {
    let s = load(file, color)?;
    let inst = instruction(&s, name)?;
    let mut out = std::io::stdout().lock();
    write!(
        out,
        "{}",
        mmac_compiler::printer::print_instruction(&s.spec.arch, inst)
    )?;
    out.flush()?;
    Ok(EXIT_OK)
}

pub fn probe(file: &Path, instr: Option<&str>, color: bool) -> Outcome {
    let s = load(file, color)?;
    let chosen: Vec<_> = match instr {
        Some(name) => vec![instruction(&s, name)?],
        None => {
            // one instruction per distinct arithmetic: shape families answer alike
            let mut seen = std::collections::HashSet::new();
            s.spec
                .instructions
                .iter()
                .filter(|i| {
                    seen.insert(format!(
                        "{:?}|{:?}|{:?}|{:?}|{:?}|{}|{:?}",
                        i.pipeline, i.a, i.b, i.c, i.d, i.shape.k, i.scale
                    ))
                })
                .collect()
        }
    };
    let mut out = std::io::stdout().lock();
    for i in chosen {
        writeln!(out, "{}\n{}", i.name, mmac_runtime::probes::report(i))?;
    }
    out.flush()?;
    Ok(EXIT_OK)
}

fn parse_hex_list(s: &str, what: &str) -> Result<Vec<u64>, String> {
    s.split(',')
        .enumerate()
        .map(|(i, x)| {
            let t = x.trim().trim_start_matches("0x");
            u64::from_str_radix(t, 16)
                .map_err(|_| format!("--{what}: element {i} `{x}` is not a hex encoding"))
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
pub fn run(
    file: &Path,
    instr: &str,
    c: &str,
    a: &str,
    b: &str,
    sa: Option<&str>,
    sb: Option<&str>,
    engine: Engine,
    trace: bool,
    color: bool,
) -> Outcome {
    let s = load(file, color)?;
    let inst = instruction(&s, instr)?;
    let parsed = (|| -> Result<_, String> {
        let c = parse_hex_list(c, "c")?;
        if c.len() != 1 {
            return Err("--c takes one value".into());
        }
        let a = parse_hex_list(a, "a")?;
        let b = parse_hex_list(b, "b")?;
        let sa = sa
            .map(|x| parse_hex_list(x, "sa"))
            .transpose()?
            .unwrap_or_default();
        let sb = sb
            .map(|x| parse_hex_list(x, "sb"))
            .transpose()?
            .unwrap_or_default();
        Ok((c[0], a, b, sa, sb))
    })();
    let (c, a, b, sa, sb) = match parsed {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    for (name, vals, f) in [
        ("c", std::slice::from_ref(&c), Some(&inst.c)),
        ("a", &a[..], Some(&inst.a)),
        ("b", &b[..], Some(&inst.b)),
        ("sa", &sa[..], inst.scale.as_ref().map(|s| &s.format)),
        ("sb", &sb[..], inst.scale.as_ref().map(|s| &s.format)),
    ] {
        if let Some(f) = f
            && let Some(v) = vals.iter().find(|v| **v & !f.storage_mask() != 0)
        {
            eprintln!(
                "error: --{name} value {v:x} does not fit `{}` ({} bits)",
                f.name,
                f.storage_bits()
            );
            return Ok(EXIT_USAGE);
        }
    }
    let ops = Operands {
        c,
        a: &a,
        b: &b,
        sa: &sa,
        sb: &sb,
    };
    let result = if trace {
        interp::run_traced(inst, &ops)
    } else if engine == Engine::Jit {
        run_one(inst, &ops).map(|d| (d, vec![]))
    } else {
        interp::run(inst, &ops).map(|d| (d, vec![]))
    };
    match result {
        Ok((d, lines)) => {
            let mut out = std::io::stdout().lock();
            for l in lines {
                writeln!(out, "{l}")?;
            }
            writeln!(
                out,
                "d={:0w$x} {}",
                d,
                inst.d.decode(d).describe(),
                w = inst.d.hex_digits()
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

/// One dot product on the JIT; an instruction the JIT refuses runs on the interpreter
/// after a note on stderr.
fn run_one(inst: &Instruction, ops: &Operands) -> Result<u64, EvalError> {
    let refused = match jit::compile_instruction(inst) {
        Ok(c) => match c.kernel(&inst.name) {
            Ok(k) => return k.dot(ops),
            Err(e) => e,
        },
        Err(e) => e,
    };
    eprintln!("note: {refused}; using the interpreter");
    interp::run(inst, ops)
}

pub fn test(spec: &Path, vectors: &Path, engine: Engine, color: bool) -> Outcome {
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
    let unreadable = errors.iter().any(|e| matches!(e, specs::LoadError::Io(..)));
    let engine = match engine {
        Engine::Interp => mmac_runtime::conformance::Engine::Interp,
        Engine::Jit => mmac_runtime::conformance::Engine::Jit,
    };
    match mmac_runtime::conformance::run_with(&loaded, vectors, engine) {
        Ok(sum) => {
            let mut out = std::io::stdout().lock();
            write!(out, "{}", sum.report)?;
            writeln!(out, "{}", sum.line())?;
            out.flush()?;
            Ok(if unreadable {
                EXIT_USAGE
            } else if sum.failed > 0 || !errors.is_empty() {
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
