//! The subcommands: each reads its inputs, calls the compiler or runtime, prints data to
//! stdout and diagnostics to stderr, and returns the exit code.

use super::{Command, Engine};
use mmac_compiler::engine::Operands;
use mmac_compiler::interp;
use mmac_compiler::ir::Instruction;
use mmac_compiler::valid::ArithmeticInfo;
use mmac_runtime::listing;
use mmac_runtime::specs::{self, LoadedSpec};
use std::path::Path;

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

pub fn dispatch(cmd: Command, color: bool) -> i32 {
    match cmd {
        Command::Check { files } => check(&files, color),
        Command::List { file, markdown } => list(&file, markdown, color),
        Command::Run {
            file,
            instr,
            c,
            a,
            b,
            sa,
            sb,
            engine,
            trace,
        } => run(
            &file,
            &instr,
            &c,
            &a,
            &b,
            sa.as_deref(),
            sb.as_deref(),
            engine,
            trace,
            color,
        ),
        Command::Test {
            spec,
            vectors,
            engine,
        } => test(&spec, &vectors, engine, color),
        Command::Compile { file, emit } => super::jit::compile(&file, emit, color),
        Command::Bench {
            file,
            instr,
            engine,
            json,
        } => super::jit::bench(&file, &instr, engine, json, color),
        Command::Probe { file, instr } => probe(&file, instr.as_deref(), color),
        Command::Show { file, instr } => show(&file, &instr, color),
        Command::Mma { args, c } => super::matrix::run(&args, Some(&c), None, true, color),
        Command::Gemm { args, c, threads } => {
            super::matrix::run(&args, c.as_deref(), threads, false, color)
        }
    }
}

/// The named instruction of a loaded spec with the validator's info, or a usage error on
/// stderr.
pub(super) fn instruction<'s>(
    spec: &'s LoadedSpec,
    name: &str,
) -> Result<(&'s Instruction, &'s ArithmeticInfo), i32> {
    spec.instruction(name).ok_or_else(|| {
        let file = spec.path.display();
        eprintln!("error: `{file}` declares no instruction `{name}`\n  help: `mmac list {file}` shows its instructions");
        EXIT_USAGE
    })
}

pub(super) fn load(path: &Path, color: bool) -> Result<LoadedSpec, i32> {
    specs::load_file(path).map_err(|e| {
        eprint!("{}", e.render(color));
        match e {
            specs::LoadError::Io(..) => EXIT_USAGE,
            specs::LoadError::Invalid(_) => EXIT_FAILED,
        }
    })
}

fn check(files: &[std::path::PathBuf], color: bool) -> i32 {
    let mut code = EXIT_OK;
    for f in files {
        match specs::load_file(f) {
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
            Err(e) => {
                eprint!("{}", e.render(color));
                code = EXIT_FAILED;
            }
        }
    }
    code
}

fn list(file: &Path, markdown: bool, color: bool) -> i32 {
    let s = match load(file, color) {
        Ok(s) => s,
        Err(c) => return c,
    };
    if markdown {
        print!("{}", listing::markdown(&s.spec));
    } else {
        for i in &s.spec.instructions {
            println!("{}", listing::line(i));
        }
    }
    EXIT_OK
}

fn show(file: &Path, name: &str, color: bool) -> i32 {
    let s = match load(file, color) {
        Ok(s) => s,
        Err(c) => return c,
    };
    match instruction(&s, name) {
        Ok((inst, info)) => {
            print!(
                "{}",
                mmac_compiler::printer::print_instruction(&s.spec.arch, inst, info)
            );
            EXIT_OK
        }
        Err(code) => code,
    }
}

fn probe(file: &Path, instr: Option<&str>, color: bool) -> i32 {
    let s = match load(file, color) {
        Ok(s) => s,
        Err(c) => return c,
    };
    let chosen: Vec<_> = match instr {
        Some(name) => match instruction(&s, name) {
            Ok(i) => vec![i],
            Err(code) => return code,
        },
        // one instruction per distinct arithmetic: shape families answer alike
        None => s.distinct().map(|(i, info, _)| (i, info)).collect(),
    };
    for (i, info) in chosen {
        println!("{}\n{}", i.name, mmac_runtime::probes::report(i, info));
    }
    EXIT_OK
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
fn run(
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
) -> i32 {
    let s = match load(file, color) {
        Ok(s) => s,
        Err(c) => return c,
    };
    let (inst, info) = match instruction(&s, instr) {
        Ok(i) => i,
        Err(code) => return code,
    };
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
            return EXIT_USAGE;
        }
    };
    for (name, vals, f) in [
        ("c", std::slice::from_ref(&c), Some(&inst.arithmetic.c)),
        ("a", &a[..], Some(&inst.arithmetic.a)),
        ("b", &b[..], Some(&inst.arithmetic.b)),
        (
            "sa",
            &sa[..],
            inst.arithmetic.scale.as_ref().map(|s| &s.format),
        ),
        (
            "sb",
            &sb[..],
            inst.arithmetic.scale.as_ref().map(|s| &s.format),
        ),
    ] {
        if let Some(f) = f
            && let Some(v) = vals.iter().find(|v| **v & !f.storage_mask() != 0)
        {
            eprintln!(
                "error: --{name} value {v:x} does not fit `{}` ({} bits)",
                f.name,
                f.storage_bits()
            );
            return EXIT_USAGE;
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
        interp::run_traced(inst, info, &ops)
    } else if engine == Engine::Jit {
        super::jit::run_one(inst, info, &ops).map(|d| (d, vec![]))
    } else {
        interp::run(inst, info, &ops).map(|d| (d, vec![]))
    };
    match result {
        Ok((d, lines)) => {
            for l in lines {
                println!("{l}");
            }
            println!(
                "d={:0w$x} {}",
                d,
                inst.arithmetic.d.decode(d).describe(),
                w = inst.arithmetic.d.hex_digits()
            );
            EXIT_OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_USAGE
        }
    }
}

fn test(spec: &Path, vectors: &Path, engine: Engine, color: bool) -> i32 {
    let (loaded, errors) = specs::load_all(spec);
    for e in &errors {
        eprint!("{}", e.render(color));
    }
    if !vectors.exists() {
        eprintln!("error: {}: no such file or folder", vectors.display());
        return EXIT_USAGE;
    }
    let engine = match engine {
        Engine::Interp => mmac_runtime::conformance::Engine::Interp,
        Engine::Jit => mmac_runtime::conformance::Engine::Jit,
    };
    match mmac_runtime::conformance::run_with(&loaded, vectors, engine) {
        Ok(sum) => {
            print!("{}", sum.report);
            println!("{} passed, {} failed", sum.passed, sum.failed);
            if sum.failed > 0 || !errors.is_empty() {
                EXIT_FAILED
            } else {
                EXIT_OK
            }
        }
        Err(e) => {
            eprintln!("error: reading {}: {e}", vectors.display());
            EXIT_USAGE
        }
    }
}
