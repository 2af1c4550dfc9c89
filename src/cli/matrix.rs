//! `mmac mma` and `mmac gemm`: instructions and GEMMs on .npy matrices.

use super::MatrixArgs;
use super::common::{
    EXIT_FAILED, EXIT_OK, EXIT_USAGE, Outcome, create_output, instruction, load, progress_bar,
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
    let spec = load(&args.spec, color)?;
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
    ] {
        inputs.extend(path.map(|p| (option, p)));
    }
    let output = create_output(&args.output, &inputs)?;
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
        Ok(Problem { a, b, c, sa, sb })
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
            eprintln!("error: {e}");
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
    // D's memory is put in place on a second thread while the kernel compiles, so that
    // the GEMM does not take a page fault per page of D on its first writes
    let (engine, mut d) = std::thread::scope(|scope| {
        let d = scope.spawn(|| Matrix::resident(m, n));
        let engine = facade::Engine::new(checked, args.engine.choice(facade::Choice::OPTIMISED));
        let d = d.join().unwrap_or_else(|_| Matrix::filled(m, n, 0));
        (engine, d)
    });
    if let Some(why) = engine.fallback() {
        eprintln!(
            "error: the JIT refuses `{}`: {why}\n  help: `--engine interp` runs the reference interpreter",
            inst.name
        );
        return Ok(EXIT_FAILED);
    }
    let tiles = (m / inst.m as usize) * (n / inst.n as usize);
    let dots = m * n * (k / inst.arithmetic.k as usize);
    let bar = progress_bar(tiles as u64, "tiles", dots > PROGRESS_DOTS);
    let started = std::time::Instant::now();
    let progress = |t: usize| bar.inc(t as u64);
    let done = pool.install(|| gemm::gemm_into(&engine, &problem, &mut d, &progress));
    bar.finish_and_clear();
    if let Err(e) = done {
        eprintln!("error: {e}");
        return Ok(EXIT_FAILED);
    }
    let elapsed = started.elapsed();
    if let Err(e) = output.finish(&inst.arithmetic.d, &d) {
        eprintln!("error: {e}");
        return Ok(EXIT_FAILED);
    }
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
