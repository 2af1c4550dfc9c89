//! `mmac mma` and `mmac gemm`: instructions and GEMMs on .npy matrices.

use super::MatrixArgs;
use super::common::{
    EXIT_FAILED, EXIT_OK, EXIT_USAGE, Outcome, create_output, instruction, load_for, progress_bar,
};
use mmac_compiler::engine as facade;
use mmac_runtime::gemm::{self, Problem};
use mmac_runtime::matrix::{self, Matrix};
use std::io::Write as _;
use std::path::Path;

/// GEMMs with more dot products than this show a progress bar on a terminal.
const PROGRESS_DOTS: usize = 1 << 24;

pub fn run(
    args: &MatrixArgs,
    c: Option<&Path>,
    threads: Option<usize>,
    whole_instruction: bool,
    color: bool,
) -> Outcome {
    let spec = load_for(&args.spec, &args.instr, color)?;
    let checked = instruction(&spec, &args.instr)?;
    let inst = checked.instruction();
    let mut inputs = vec![
        ("FILE", args.spec.as_path()),
        ("--a", args.a.as_path()),
        ("--b", args.b.as_path()),
    ];
    for (option, path) in [
        ("--c", c),
        ("--sa", args.sa.as_deref()),
        ("--sb", args.sb.as_deref()),
        ("--meta", args.meta.as_deref()),
    ] {
        inputs.extend(path.map(|p| (option, p)));
    }
    let output = create_output(&args.output, &inputs)?;
    // an error about one input's contents (a row of A, of the positions) names its file
    let named = |e: gemm::ShapeError| {
        let path = match e.input {
            Some(gemm::Input::A) => Some(args.a.as_path()),
            Some(gemm::Input::Positions) => args.meta.as_deref(),
            None => None,
        };
        match path {
            Some(p) => format!("{}: {}", p.display(), e.message),
            None => e.message,
        }
    };
    let problem = (|| -> Result<Problem, String> {
        let a = matrix::read(&args.a, &inst.arithmetic.a, "A").map_err(|e| e.to_string())?;
        let b = matrix::read(&args.b, &inst.arithmetic.b, "B").map_err(|e| e.to_string())?;
        // without --c, C is +0 (no matrix of zeros is made)
        let c = match c {
            Some(p) => Some(matrix::read(p, &inst.arithmetic.c, "C").map_err(|e| e.to_string())?),
            None => None,
        };
        let scale =
            |p: &Option<std::path::PathBuf>, name: &str| -> Result<Option<Matrix>, String> {
                match (p, &inst.arithmetic.scale) {
                    (Some(p), Some(s)) => matrix::read(p, &s.format, name)
                        .map(Some)
                        .map_err(|e| e.to_string()),
                    (Some(_), None) => Err(format!(
                        "`{}` takes no scale factors, but --{} was given",
                        inst.name,
                        name.to_lowercase()
                    )),
                    (None, _) => Ok(None),
                }
            };
        let sa = scale(&args.sa, "SA")?;
        let sb = scale(&args.sb, "SB")?;
        let meta = match &args.meta {
            Some(p) => Some(matrix::read_positions(p, "--meta").map_err(|e| e.to_string())?),
            None => None,
        };
        let mut p = Problem {
            a,
            b,
            c,
            sa,
            sb,
            meta,
        };
        gemm::compress_sparse(inst, &mut p).map_err(named)?;
        Ok(p)
    })();
    let problem = match problem {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let (m, n, k) = match gemm::check_shapes(inst, &problem, whole_instruction) {
        Ok(dims) => dims,
        Err(e) => {
            eprintln!("error: {}", named(e));
            return Ok(EXIT_USAGE);
        }
    };
    let threads = match gemm::worker_threads(threads) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("error: --threads: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: cannot start worker threads: {e}");
            return Ok(EXIT_FAILED);
        }
    };
    // the JIT's kernel is compiled when needed: not for a GEMM its panel computes whole
    let engine = facade::Engine::deferred(checked, args.engine.choice(facade::Choice::OPTIMISED));
    let kernel = || {
        if let Some(why) = engine.fallback() {
            // (as `--engine jit` says: what the JIT refuses runs on the interpreter)
            eprintln!("note: {why}; using the interpreter (slower than a kernel)");
        }
    };
    // the JIT's GEMM panel, where the arithmetic has one, compiled like the kernel before
    // the clock starts; without one, the kernel now
    let panel = engine.panel().is_some();
    if !panel {
        kernel();
    }
    let tiles = (m / inst.m as usize) * (n / inst.n as usize);
    let dots = m * n * (k / inst.columns());
    let bar = progress_bar(tiles as u64, "tiles", dots > PROGRESS_DOTS);
    let progress = |t: usize| bar.inc(t as u64);
    // the GEMM's time: the step-major (or the panel's) copies of A and B, and computing
    // D's chunks
    let started = std::time::Instant::now();
    let plan = pool.install(|| gemm::Plan::new(&engine, &problem));
    let planning = started.elapsed();
    if panel && !plan.uses_panel() {
        // (the panel does not take these operands: a NaN or an infinity in A or B)
        kernel();
    }
    let streamed = compute_and_write(
        &pool,
        &plan,
        output,
        &inst.arithmetic.d,
        args.report,
        &progress,
    );
    bar.finish_and_clear();
    let (elapsed, d) = match streamed {
        Ok((computing, d)) => (planning + computing, d),
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_FAILED);
        }
    };
    eprintln!(
        "{}: {m} x {n} x {k}, {dots} dot products in {:.3} s ({:.3e} dot products/s), D written to {}",
        inst.name,
        elapsed.as_secs_f64(),
        dots as f64 / elapsed.as_secs_f64().max(1e-9),
        args.output.display()
    );
    if args.report {
        // the exact reference: one progress step per row of D
        let bar = progress_bar(m as u64, "rows of the exact result", dots > PROGRESS_DOTS);
        let progress = |rows: usize| bar.inc(rows as u64);
        let started = std::time::Instant::now();
        let d = d.unwrap_or_else(|| Matrix::filled(m, n, 0)); // (kept: args.report)
        let r = pool.install(|| gemm::error_report_with_progress(inst, &problem, &d, &progress));
        bar.finish_and_clear();
        eprintln!(
            "exact result of the {} elements in {:.3} s",
            m * n,
            started.elapsed().as_secs_f64()
        );
        let mut out = super::common::stdout();
        write!(out, "{}", r.table())?;
        out.flush()?;
    }
    Ok(EXIT_OK)
}

/// D's elements computed per chunk of rows when D is written chunk by chunk.
const CHUNK_ELEMENTS: usize = 1 << 18;

/// Compute D (see [`gemm::Plan`]) and write it to `output`. For a regular file, D is
/// computed a chunk of tile rows at a time into one reused buffer, and each chunk is
/// written while it is still in cache: D is never whole in memory (unless `keep`, for
/// the error report), so its pages are not faulted in one by one (1.6 us per 4 KiB on
/// the machine of docs/performance.md, 3 ns per dot of a one-step GEMM). The writing is
/// not overlapped with the computing: there, a writing thread beside a 1-thread GEMM
/// slowed the GEMM by 15 to 50 %, more than the writing it hid. A device or a FIFO,
/// which would see a partial D if the GEMM failed, gets D once it is complete. The loop
/// runs on a worker of the pool, which computes its share of each chunk and then writes
/// it: the chunk stays in that core's cache, and the pool is not woken from outside once
/// per chunk (measured: 2,449 context switches for an 8192 x 2048 x 16 CDNA2 GEMM at 2
/// threads before, 176 after; Hopper f16 2048 x 2048 x 16 at 1 thread 8 % faster). Returns
/// the GEMM's computing time (the chunks', without their writing) and D when kept.
fn compute_and_write(
    pool: &rayon::ThreadPool,
    plan: &gemm::Plan,
    output: matrix::Output,
    format: &mmac_compiler::format::Format,
    keep: bool,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<(std::time::Duration, Option<Matrix>), String> {
    let (m, n) = plan.shape();
    if !output.replaces_whole() {
        let started = std::time::Instant::now();
        let mut d = Matrix::try_filled(m, n, 0)?;
        pool.install(|| plan.rows_into(0..m, &mut d.data, progress))
            .map_err(|e| e.to_string())?;
        let computing = started.elapsed();
        output.finish(format, &d).map_err(|e| e.to_string())?;
        return Ok((computing, keep.then_some(d)));
    }
    let tm = plan.tile_rows();
    let rows = (CHUNK_ELEMENTS / n.max(1)).div_ceil(tm).max(1) * tm;
    let mut computing = std::time::Duration::ZERO;
    let mut failed = None;
    // (D kept for the error report: refused here if it cannot be had, before any work)
    let mut kept = Matrix::try_room(if keep { m } else { 0 }, n)?;
    let output = output.expecting(matrix::npy_size(format, m, n));
    // the whole loop on a worker of the pool: the chunks' parallel parts then start from
    // a worker, not by waking the pool from this thread once per chunk
    let written = pool.install(|| {
        output.write_with(|out| {
            matrix::write_npy_header(out, format, m, n)?;
            let mut chunk = vec![0u64; rows.min(m) * n];
            for start in (0..m).step_by(rows) {
                let end = (start + rows).min(m);
                let chunk = &mut chunk[..(end - start) * n];
                let started = std::time::Instant::now();
                if let Err(e) = plan.rows_into(start..end, chunk, progress) {
                    failed = Some(e);
                    // (the file is not put in place: the old one stays whole)
                    return Err(std::io::Error::other("the GEMM failed"));
                }
                computing += started.elapsed();
                matrix::write_npy_elements(out, format, chunk)?;
                if keep {
                    kept.extend_from_slice(chunk);
                }
            }
            Ok(())
        })
    });
    if let Some(e) = failed {
        return Err(e.to_string());
    }
    written.map_err(|e| e.to_string())?;
    let d = keep.then_some(Matrix {
        rows: m,
        cols: n,
        data: kept,
    });
    Ok((computing, d))
}
