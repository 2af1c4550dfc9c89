//! The code-generating subcommands: `compile` (JIT-compile a whole spec, optionally
//! printing the Cranelift IR or machine code, or write a linkable object or shared library
//! with a C API) and `bench` (time an instruction on either engine against a native f32 dot
//! product).

use super::Engine;
use super::common::{
    EXIT_FAILED, EXIT_OK, EXIT_USAGE, Halt, Outcome, create_output, instruction, load, load_for,
};
use clap::ValueEnum;
use mmac_compiler::aot;
use mmac_compiler::engine as facade;
use mmac_compiler::jit;
use mmac_compiler::random::{Records, Rng};
use mmac_runtime::accuracy::{self, Distribution};
use mmac_runtime::specs::LoadedSpec;
use std::hint::black_box;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What `mmac compile --emit` produces.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emit {
    /// The Cranelift IR of every kernel, on stdout.
    Clif,
    /// The machine code of every kernel's dot entry, on stdout.
    Asm,
    /// A relocatable object with a C API, and its header.
    Obj,
    /// A shared library with the same C API, and its header.
    Lib,
    /// Synthesizable Verilog-2005: one combinational module per instruction (on stdout,
    /// or to `-o`).
    Verilog,
}

pub fn compile(
    file: &Path,
    emit: Option<Emit>,
    output: Option<&Path>,
    only: &[String],
    color: bool,
) -> Outcome {
    let mut s = load(file, color)?;
    if !only.is_empty() {
        s = subset(&s, only)?;
    }
    match emit {
        Some(kind @ (Emit::Obj | Emit::Lib)) => return write_object(file, &s, kind, output),
        Some(Emit::Verilog) => return write_verilog(file, &s, output),
        _ if output.is_some() => {
            eprintln!(
                "error: -o is for `--emit obj`, `lib` and `verilog`; the JIT's count, `clif` and `asm` go to stdout"
            );
            return Ok(EXIT_USAGE);
        }
        _ => {}
    }
    let options = jit::Options {
        emit_clif: emit == Some(Emit::Clif),
        emit_asm: emit == Some(Emit::Asm),
        verify: false,
        quick: false,
    };
    let compiled = match jit::compile_with(&s.checked, options) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_FAILED);
        }
    };
    let mut out = super::common::stdout();
    for (label, text) in compiled.clif().iter().chain(compiled.asm()) {
        writeln!(out, "; {label}\n{text}")?;
    }
    for e in compiled.refused() {
        eprintln!(
            "warning: {e}\n  help: `--engine interp` computes it; `run` and `test` fall back to the interpreter for it"
        );
    }
    writeln!(
        out,
        "compiled {} of {} instructions ({} kernels) in {:.1} ms",
        compiled.compiled_count(),
        s.spec().instructions.len(),
        compiled.kernel_count(),
        compiled.compile_time.as_secs_f64() * 1e3
    )?;
    out.flush()?;
    Ok(EXIT_OK)
}

/// The spec with only the named instructions (each must exist), validated again.
fn subset(s: &LoadedSpec, only: &[String]) -> Result<LoadedSpec, Halt> {
    for name in only {
        instruction(s, name)?;
    }
    s.subset(|name| only.iter().any(|o| o == name))
        .map_err(|diags| {
            for d in diags {
                eprintln!("error: {}", d.message);
            }
            Halt::Exit(EXIT_FAILED)
        })
}

/// `--emit obj|lib`: the object (or the shared library linked from it) and its header.
fn write_object(file: &Path, s: &LoadedSpec, kind: Emit, output: Option<&Path>) -> Outcome {
    let arch = &s.spec().arch;
    let output = match output {
        Some(p) => p.to_path_buf(),
        None if kind == Emit::Lib => PathBuf::from(format!("lib{arch}.so")),
        None => PathBuf::from(format!("{arch}.o")),
    };
    let header_path = output.with_extension("h");
    let name = |p: &Path| {
        p.file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned())
    };
    let names = aot::ObjectNames {
        source: file.display().to_string(),
        header_name: name(&header_path),
        object_name: name(&output),
        shared: kind == Emit::Lib,
    };
    if header_path == output {
        eprintln!(
            "error: -o {}: the header {} would be written over the object\n  help: name the object with its own extension (`.o`, `.so`); the header takes `.h`",
            output.display(),
            header_path.display()
        );
        return Ok(EXIT_USAGE);
    }
    let object_out = create_output(&output, &[("FILE", file)])?;
    let header_out = create_output(&header_path, &[("FILE", file), ("-o", &output)])?;
    let start = Instant::now();
    let warp = |inst: &mmac_compiler::ir::Instruction| {
        let library = mmac_runtime::fragments::Library::builtin().ok()?;
        mmac_runtime::fragments::aot_layout(&library.find_for(&s.spec().arch, inst).ok()?)
    };
    let object = match aot::compile_object(&s.checked, &names, &warp) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_FAILED);
        }
    };
    if object.present.is_empty() {
        for (instr, why) in &object.absent {
            eprintln!("error: `{instr}`: {why}");
        }
        eprintln!(
            "error: no instruction of {} compiles into {}: nothing written",
            file.display(),
            output.display()
        );
        return Ok(EXIT_FAILED);
    }
    let bytes = match kind {
        Emit::Lib => match link_shared(&object.bytes) {
            Ok(b) => b,
            Err(why) => {
                eprintln!("error: cannot link {}: {why}", output.display());
                return Ok(EXIT_FAILED);
            }
        },
        _ => object.bytes,
    };
    for (out, data) in [
        (object_out, &bytes[..]),
        (header_out, object.header.as_bytes()),
    ] {
        if let Err(e) = out.finish_bytes(data) {
            eprintln!("error: {e}");
            return Ok(EXIT_USAGE);
        }
    }
    for (instr, why) in &object.absent {
        eprintln!("warning: `{instr}` is not in {}: {why}", output.display());
    }
    let mut out = super::common::stdout();
    writeln!(
        out,
        "wrote {} and {}: {} of {} instructions (symbols {}*) in {:.1} ms",
        output.display(),
        header_path.display(),
        object.present.len(),
        s.spec().instructions.len(),
        object.prefix,
        start.elapsed().as_secs_f64() * 1e3
    )?;
    out.flush()?;
    Ok(EXIT_OK)
}

/// `--emit verilog`: a module per instruction, named after it (`rtl::module_name`); the
/// first instruction of each distinct arithmetic holds the circuit, the others instantiate
/// it.
fn write_verilog(file: &Path, s: &LoadedSpec, output: Option<&Path>) -> Outcome {
    let start = Instant::now();
    let mut text = format!(
        "// Generated by mmac {} from {} (arch {}): each instruction's dot-product-add as a\n\
         // combinational module. Do not edit; regenerate with `mmac compile --emit verilog`.\n\n",
        env!("CARGO_PKG_VERSION"),
        // a comment line: a path's control characters (a newline) escaped
        file.display().to_string().escape_default(),
        s.spec().arch
    );
    let checked = &s.checked;
    let info = checked.info();
    // the module that holds each distinct arithmetic's circuit
    let mut holder: Vec<Option<String>> = vec![None; info.arithmetic_count()];
    let mut taken = std::collections::HashSet::new();
    // what the back end does not lower (sparse instructions, and k beyond its limit), why
    let mut refused: Vec<String> = vec![];
    for (i, inst) in checked.instructions().enumerate() {
        if let Err(why) = mmac_compiler::rtl::lowerable(inst) {
            refused.push(why);
            continue;
        }
        // names that differ only in their punctuation get a numbered module each
        let base = mmac_compiler::rtl::module_name(inst.name());
        let mut module = base.clone();
        let mut n = 1;
        while !taken.insert(module.clone()) {
            n += 1;
            module = format!("{base}_{n}");
        }
        match &holder[info.arithmetic_index(i)] {
            None => {
                text.push_str(&mmac_compiler::rtl::verilog(inst, &module));
                holder[info.arithmetic_index(i)] = Some(module);
            }
            Some(body) => {
                let ports = mmac_compiler::rtl::ports(inst);
                text.push_str(&format!(
                    "// {}: the arithmetic of {body}\nmodule {module} (\n{}\n);\n  {body} body ({});\nendmodule\n",
                    inst.name(),
                    ports
                        .iter()
                        .map(|(p, w)| {
                            let dir = if *p == "d" { "output" } else { "input " };
                            format!("    {dir} wire [{}:0] {p}", w - 1)
                        })
                        .collect::<Vec<_>>()
                        .join(",\n"),
                    ports
                        .iter()
                        .map(|(p, _)| format!(".{p}({p})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        text.push('\n');
    }
    if let Some(first) = refused.first() {
        if refused.len() == checked.len() {
            eprintln!("error: {first}");
            return Ok(EXIT_USAGE);
        }
        eprintln!(
            "warning: {} instructions left out, e.g. {first}",
            refused.len()
        );
    }
    let summary = format!(
        "{} modules ({} circuits) in {:.1} ms",
        checked.len() - refused.len(),
        holder.iter().filter(|h| h.is_some()).count(),
        start.elapsed().as_secs_f64() * 1e3
    );
    match output {
        Some(path) => {
            let out = create_output(path, &[("FILE", file)])?;
            if let Err(e) = out.finish_bytes(text.as_bytes()) {
                eprintln!("error: {e}");
                return Ok(EXIT_USAGE);
            }
            let mut out = super::common::stdout();
            writeln!(out, "wrote {}: {summary}", path.display())?;
            out.flush()?;
        }
        None => {
            let mut out = super::common::stdout();
            out.write_all(text.as_bytes())?;
            out.flush()?;
            eprintln!("{summary}");
        }
    }
    Ok(EXIT_OK)
}

/// A shared library linked from an object by the system C compiler ($CC, else `cc`).
fn link_shared(object: &[u8]) -> Result<Vec<u8>, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (o, so) = (dir.path().join("mmac.o"), dir.path().join("libmmac.so"));
    std::fs::write(&o, object).map_err(|e| e.to_string())?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let run = std::process::Command::new(&cc)
        .arg("-shared")
        .arg("-o")
        .arg(&so)
        .arg(&o)
        .arg("-lm")
        .output()
        .map_err(|e| format!("cannot run `{cc}`: {e} (set CC to a C compiler)"))?;
    if !run.status.success() {
        return Err(format!(
            "`{cc} -shared` failed:\n{}",
            String::from_utf8_lossy(&run.stderr)
        ));
    }
    std::fs::read(&so).map_err(|e| e.to_string())
}

/// The best (smallest) ns per dot over `rounds` rounds of at least `min` each, where one
/// call of `f` computes `per_call` dot products.
fn time_per_dot(rounds: usize, min: Duration, per_call: usize, mut f: impl FnMut()) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..rounds {
        let start = Instant::now();
        let mut calls = 0usize;
        while start.elapsed() < min {
            f();
            calls += 1;
        }
        let ns = start.elapsed().as_nanos() as f64 / (calls * per_call) as f64;
        best = best.min(ns);
    }
    best
}

/// A plain native f32 dot-product-add of length k over `n` records: the floor.
fn baseline_ns_per_dot(k: usize, n: usize) -> f64 {
    let mut r = Rng::new(0x2545_f491_4f6c_dd1d);
    let mut unit = || (r.next_u64() >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
    let a: Vec<f32> = (0..n * k).map(|_| unit()).collect();
    let b: Vec<f32> = (0..n * k).map(|_| unit()).collect();
    let c: Vec<f32> = (0..n).map(|_| unit()).collect();
    let mut d = vec![0f32; n];
    time_per_dot(5, Duration::from_millis(100), n, || {
        let (a, b, c) = (black_box(&a), black_box(&b), black_box(&c));
        for i in 0..n {
            let mut acc = c[i];
            for (x, y) in a[i * k..(i + 1) * k].iter().zip(&b[i * k..(i + 1) * k]) {
                acc += x * y;
            }
            d[i] = acc;
        }
        black_box(&mut d);
    })
}

/// The last line of `mmac bench --json`.
#[derive(serde::Serialize)]
struct BenchJson<'a> {
    instruction: &'a str,
    engine: &'a str,
    dist: &'a str,
    ns_per_dot: f64,
    dots_per_s: f64,
    baseline_ns_per_dot: f64,
    /// For a sparse instruction: its dense arithmetic's kernel on the same values (the
    /// operands already gathered or expanded).
    #[serde(skip_serializing_if = "Option::is_none")]
    dense_ns_per_dot: Option<f64>,
}

/// The inputs `mmac bench --dist` names: random finite encodings, or values of one of
/// `mmac report`'s distributions rounded into the input formats (unit scales).
fn bench_records(
    inst: &mmac_compiler::ir::Instruction,
    n: usize,
    dist: &str,
) -> Result<Records, String> {
    let mut rec = Records::random(inst, n);
    if dist == "finite" {
        return Ok(rec);
    }
    let d = Distribution::parse(dist, None).map_err(|e| e.replace("one of ", "one of finite, "))?;
    let ar = &inst.arithmetic;
    for (operand, format) in [("a", &ar.a), ("b", &ar.b), ("c", &ar.c)] {
        if format.as_float().is_none() {
            return Err(format!(
                "--dist {dist} draws real values, but {operand} is `{}`, not a floating-point format; `--dist finite` draws random encodings of any format",
                format.name
            ));
        }
    }
    let mut rng = Rng::new(0x5851_f42d_4c95_7f2d);
    for (format, values) in [
        (&ar.c, &mut rec.c),
        (&ar.a, &mut rec.a),
        (&ar.b, &mut rec.b),
    ] {
        for v in values.iter_mut() {
            *v = accuracy::round_into(format, d.draw(&mut rng))
                .map_err(|e| format!("--dist {dist}: {e}"))?;
        }
    }
    if let Some(s) = &ar.scale {
        let one = mmac_runtime::inputs::pow2(&s.format, 0, false)
            .ok_or_else(|| format!("--dist {dist}: `{}` has no 1.0", s.format.name))?;
        rec.sa.fill(one);
        rec.sb.fill(one);
    }
    Ok(rec)
}

/// A sparse instruction's operands for `bench`: a's stored elements and all K of b drawn
/// from the records' values (their distribution), and random positions in the pattern.
fn sparse_records(
    inst: &mmac_compiler::ir::Instruction,
    rec: &Records,
) -> Option<(Vec<u64>, Vec<u64>, Vec<u64>)> {
    let s = inst.sparsity?;
    let cycle = |v: &[u64], n: usize| v.iter().copied().cycle().take(n).collect::<Vec<u64>>();
    let mut rng = Rng::new(0x2545_f491_4f6c_dd1d);
    let positions = (0..rec.n)
        .flat_map(|_| mmac_runtime::sparse::random_positions(&s, inst.columns(), &mut rng))
        .collect();
    Some((
        cycle(&rec.a, rec.n * inst.stored()),
        cycle(&rec.b, rec.n * inst.columns()),
        positions,
    ))
}

pub fn bench(
    file: &Path,
    instr: &str,
    engine: Engine,
    dist: &str,
    json: bool,
    color: bool,
) -> Outcome {
    let s = load_for(file, instr, color)?;
    let checked = instruction(&s, instr)?;
    let inst = checked.instruction();
    let k = inst.k();
    let records = |n: usize| -> Result<Records, Halt> {
        bench_records(inst, n, dist).map_err(|e| {
            eprintln!("error: {e}");
            Halt::Exit(EXIT_USAGE)
        })
    };
    let engine = facade::Engine::new(checked, engine.choice(facade::Choice::OPTIMISED));
    if let Some(why) = engine.fallback() {
        eprintln!(
            "error: the JIT refuses `{instr}`: {why}\n  help: `--engine interp` times the interpreter"
        );
        return Ok(EXIT_FAILED);
    }
    // a batch of records through the kernel, or fewer through the interpreter
    let (engine_name, n, rounds, min) = if engine.is_jit() {
        ("jit", 1024, 5, Duration::from_millis(200))
    } else {
        ("interp", 256, 3, Duration::from_millis(300))
    };
    let rec = records(n)?;
    let sparse = sparse_records(inst, &rec);
    let mut d = vec![0u64; rec.n];
    let mut failed = None;
    let ns = time_per_dot(rounds, min, rec.n, || {
        let done = match &sparse {
            // a sparse instruction as its users run it: positions checked, B's selected
            // elements gathered (or A expanded), then the dense kernel
            Some((a, b, p)) => engine.sparse_batch_strided(
                &rec.c,
                (a, inst.stored()),
                (b, inst.columns()),
                (&rec.sa, rec.s),
                (&rec.sb, rec.s),
                (p, inst.stored()),
                &mut d,
            ),
            None => engine.batch(&rec.c, &rec.a, &rec.b, &rec.sa, &rec.sb, &mut d),
        };
        if let Err(e) = done {
            failed = Some(e);
        }
        black_box(&mut d);
    });
    if let Some(e) = failed {
        eprintln!("error: {e}");
        return Ok(EXIT_FAILED);
    }
    // a sparse instruction beside the dense kernel it runs through, on the records'
    // values as that takes them (what the positions cost: their check, and the gather
    // or expansion)
    let dense = match sparse {
        Some(_) => {
            let ns = time_per_dot(rounds, min, rec.n, || {
                if let Err(e) = engine.batch(&rec.c, &rec.a, &rec.b, &rec.sa, &rec.sb, &mut d) {
                    failed = Some(e);
                }
                black_box(&mut d);
            });
            if let Some(e) = failed {
                eprintln!("error: {e}");
                return Ok(EXIT_FAILED);
            }
            Some(ns)
        }
        None => None,
    };
    let baseline = baseline_ns_per_dot(k, 1024);
    let dots_per_s = 1e9 / ns;
    let mut out = super::common::stdout();
    writeln!(out, "instruction          {}", inst.name)?;
    writeln!(out, "engine               {engine_name}")?;
    writeln!(out, "dist                 {dist}")?;
    writeln!(out, "k                    {k}")?;
    writeln!(out, "ns_per_dot           {ns:.2}")?;
    writeln!(out, "dots_per_s           {dots_per_s:.0}")?;
    writeln!(
        out,
        "baseline_ns_per_dot  {baseline:.2}  (native f32 dot, k = {k})"
    )?;
    writeln!(out, "ratio_to_baseline    {:.1}", ns / baseline)?;
    if let Some(dense) = dense {
        writeln!(
            out,
            "dense_ns_per_dot     {dense:.2}  (the dense kernel it runs through, k = {k})"
        )?;
        writeln!(out, "ratio_to_dense       {:.2}", ns / dense)?;
    }
    if json {
        let line = BenchJson {
            instruction: &inst.name,
            engine: engine_name,
            dist,
            ns_per_dot: ns,
            dots_per_s,
            baseline_ns_per_dot: baseline,
            dense_ns_per_dot: dense,
        };
        serde_json::to_writer(&mut out, &line).map_err(std::io::Error::from)?;
        writeln!(out)?;
    }
    out.flush()?;
    Ok(EXIT_OK)
}
