//! Conformance testing: runs every case of a set of vector files through the spec that
//! declares the file's architecture and instruction, and compares bits. Files of an
//! architecture that none of the given specs declares are skipped and counted (testing one
//! spec against a folder of every architecture's vectors); a loaded architecture's file
//! whose instruction is missing fails.

use crate::specs::LoadedSpec;
use crate::vectors;
use mmac_compiler::Checked;
use mmac_compiler::diagnostic::closest;
use mmac_compiler::engine::{Choice, Engine, Engines, Operands};
use mmac_compiler::format::Format;
use mmac_compiler::ir::Instruction;
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

/// Mismatches printed per file before the rest are only counted.
pub const SHOWN_PER_FILE: usize = 3;

/// The outcome of a conformance run.
#[derive(Debug, Default)]
pub struct Summary {
    pub passed: usize,
    pub failed: usize,
    /// Cases in files of an architecture that no given spec declares (not run).
    pub skipped: usize,
    /// Files that failed as a whole with no case to count as failed (no cases at all; a
    /// header without `# arch:` or naming an instruction the spec lacks, over no cases).
    pub failed_files: usize,
    /// Human-readable report lines: mismatches, unmatched and skipped files (standard
    /// output).
    pub report: String,
    /// Diagnostics about the files and the engines, not results: `error:` (a malformed
    /// line), `warning:` (a header that describes another instruction) and `note:` (an
    /// instruction that runs on the interpreter) lines (standard error).
    pub diagnostics: String,
}

impl Summary {
    /// A file that fails as a whole (`FAIL FILE: why`): its cases count as failed, or the
    /// file, when it has none.
    fn fail_file(&mut self, shown: &str, why: &str, cases: usize) {
        let _ = writeln!(self.report, "FAIL {shown}: {why}");
        self.failed += cases;
        self.failed_files += usize::from(cases == 0);
    }

    /// The last line of a run: `N passed, M failed`, and `, S skipped` when S > 0.
    pub fn line(&self) -> String {
        let mut line = format!("{} passed, {} failed", self.passed, self.failed);
        if self.skipped > 0 {
            let _ = write!(line, ", {} skipped", self.skipped);
        }
        if self.failed_files > 0 {
            let _ = write!(
                line,
                ", {} file{} failed",
                self.failed_files,
                if self.failed_files == 1 { "" } else { "s" }
            );
        }
        line
    }

    /// Did the run pass: some case ran, and nothing failed (no case, no file)?
    pub fn passed_all(&self) -> bool {
        self.passed > 0 && self.failed == 0 && self.failed_files == 0
    }

    /// Why a run that failed no case still did not pass, if so: nothing was tested.
    pub fn nothing_ran(&self) -> Option<String> {
        (self.passed == 0 && self.failed == 0).then(|| {
            if self.skipped > 0 {
                format!(
                    "no case ran: every vector file ({} cases) is of an architecture no given spec declares",
                    self.skipped
                )
            } else {
                "no case ran: no vector file holds a case".to_string()
            }
        })
    }
}

/// Does `got` match the expected bits? Under `nan: any`, any NaN matches any NaN.
pub fn matches(d: &Format, expected: u64, got: u64, nan_any: bool) -> bool {
    expected == got || (nan_any && d.decode(expected).is_nan() && d.decode(got).is_nan())
}

/// `1 case`, `2 cases`.
fn count(cases: usize) -> String {
    format!("{cases} case{}", if cases == 1 { "" } else { "s" })
}

fn hex(format: &Format, v: u64) -> String {
    format!("{:0w$x}", v, w = format.hex_digits())
}

/// Positions of a sparse A's stored elements, as `pos=` writes them.
pub fn positions(v: &[u64]) -> String {
    v.iter()
        .map(|p| format!("{p:x}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn list(format: &Format, v: &[u64]) -> String {
    v.iter()
        .map(|x| hex(format, *x))
        .collect::<Vec<_>>()
        .join(",")
}

/// Check that every operand has as many values as the instruction takes (none of sa and
/// sb for an instruction without scale factors), that every value fits its format's
/// storage, and that a sparse instruction's case has positions that fit its pattern (a
/// dense one's none); the message names the operand.
fn check_widths(inst: &Instruction, case: &vectors::Case) -> Result<(), String> {
    let s = inst.scale_count();
    for (name, got, want) in [
        ("a", case.a.len(), inst.stored()),
        ("b", case.b.len(), inst.columns()),
        ("sa", case.sa.len(), s),
        ("sb", case.sb.len(), s),
    ] {
        if got != want {
            return Err(format!(
                "`{name}=` has {got} value{}, but `{}` takes {want}",
                if got == 1 { "" } else { "s" },
                inst.name
            ));
        }
    }
    match &inst.sparsity {
        Some(s) => mmac_compiler::sparse::check(s, inst.columns(), &case.positions)
            .map_err(|e| format!("pos: {e}"))?,
        None if !case.positions.is_empty() => {
            return Err("pos= given, but the instruction is dense".into());
        }
        None => {}
    }
    let scale = inst.arithmetic.scale.as_ref().map(|s| &s.format);
    let groups: [(&str, Option<&Format>, &[u64]); 6] = [
        ("c", Some(&inst.arithmetic.c), std::slice::from_ref(&case.c)),
        ("d", Some(&inst.arithmetic.d), std::slice::from_ref(&case.d)),
        ("a", Some(&inst.arithmetic.a), &case.a),
        ("b", Some(&inst.arithmetic.b), &case.b),
        ("sa", scale, &case.sa),
        ("sb", scale, &case.sb),
    ];
    for (name, f, vals) in groups {
        if let Some(f) = f
            && let Some(v) = vals.iter().find(|v| **v & !f.storage_mask() != 0)
        {
            return Err(format!(
                "{name} value {v:x} does not fit `{}` ({} bits)",
                f.name,
                f.storage_bits()
            ));
        }
    }
    Ok(())
}

/// Which engine computes `d`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The exact reference interpreter.
    Interp,
    /// Native kernels from the Cranelift JIT, compiled quickly (`jit::Options::quick`:
    /// a conformance run executes each kernel a few hundred times, so compile time
    /// dominates). An instruction the JIT refuses runs on the interpreter, and the report
    /// says so.
    Jit,
    /// As `Jit`, with the optimised kernels `bench` and `gemm` run, each file's cases
    /// in one call of the batch entry (as `gemm` runs them: four records at once where
    /// the kernel has record lanes, record by record otherwise).
    JitOptimized,
}

/// Run every vector file under `vectors` against `specs` with the interpreter.
pub fn run(specs: &[LoadedSpec], vectors_path: &Path) -> std::io::Result<Summary> {
    run_with(specs, vectors_path, Mode::Interp)
}

/// Run every vector file under `vectors` against `specs` with `engine`.
/// The header lines of `file` that say otherwise of `inst` than it is (`LINE: why`):
/// vectors of another K, pattern, types or scale factors run under this instruction's
/// name. A `# sparse:` line for a dense instruction counts; a sparse instruction's file
/// without one does not (the line is optional).
fn contradicted(file: &vectors::VectorFile, inst: &Instruction) -> Vec<String> {
    let own = crate::generate::described(inst);
    file.described
        .iter()
        .filter_map(|(line, key, value)| {
            let want = own.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
            let why = match want {
                Some(want) if want == value => return None,
                Some(want) => format!("`# {key}: {want}`"),
                None => "no `# sparse:` line: it is dense".to_string(),
            };
            Some(format!(
                "{line}: the header says `# {key}: {value}`, but `{}` has {why}; its cases run as the instruction's",
                inst.name
            ))
        })
        .collect()
}

pub fn run_with(specs: &[LoadedSpec], vectors_path: &Path, mode: Mode) -> std::io::Result<Summary> {
    let archs: HashSet<&str> = specs.iter().map(|s| s.checked.arch()).collect();
    let mut sum = Summary::default();
    let files = vectors::find_files(vectors_path)?
        .into_iter()
        .map(|path| vectors::read(&path).map(|(file, errors)| (path, file, errors)))
        .collect::<std::io::Result<Vec<_>>>()?;
    // the JIT compiles only the instructions some file names, each spec on its own thread
    let used: HashSet<(&str, &str)> = files
        .iter()
        .filter_map(|(_, f, _)| Some((f.arch.as_deref()?, f.instruction.as_deref()?)))
        .collect();
    let choice = match mode {
        Mode::Interp => Choice::Interp,
        Mode::Jit => Choice::QUICK,
        Mode::JitOptimized => Choice::OPTIMISED,
    };
    let subsets: Vec<Result<LoadedSpec, String>> = specs
        .par_iter()
        .map(|s| {
            let arch = s.checked.arch();
            s.subset(|name| used.contains(&(arch, name)))
                .map_err(|d| format!("{arch} does not validate: {}", d[0].message))
        })
        .collect();
    let subsets: Vec<LoadedSpec> = subsets
        .into_iter()
        .filter_map(|s| match s {
            Ok(s) => Some(s),
            Err(e) => {
                let _ = writeln!(sum.diagnostics, "note: {e}; using the interpreter");
                None
            }
        })
        .collect();
    let engines: Vec<Engines> = subsets
        .par_iter()
        .map(|s| Engines::new(&s.checked, choice))
        .collect();
    // every declared instruction, by (arch, name), with its spec's engines
    let mut by_name: HashMap<(&str, &str), Checked> = HashMap::new();
    for s in specs {
        for c in s.instructions() {
            by_name.insert((s.checked.arch(), c.name()), c);
        }
    }
    let engine_of = |arch: &str, name: &str| -> Option<Engine> {
        subsets
            .iter()
            .zip(&engines)
            .find(|(s, _)| s.checked.arch() == arch)
            .and_then(|(_, e)| e.find(name))
    };
    for (path, file, errors) in &files {
        let shown = path.display().to_string();
        let cases = file.cases.len();
        if let Some(arch) = file.arch.as_deref().filter(|a| !archs.contains(a)) {
            let _ = writeln!(
                sum.report,
                "SKIP {shown}: no given spec declares arch `{arch}` ({})",
                count(cases)
            );
            if let Some(near) = closest(arch, archs.iter().copied()) {
                let _ = writeln!(sum.report, "  help: did you mean `{near}`?");
            }
            sum.skipped += cases;
            continue;
        }
        for e in errors {
            let _ = writeln!(sum.diagnostics, "error: {e}");
        }
        sum.failed += errors.len();
        let Some(arch) = file.arch.as_deref() else {
            let why = format!("no `# arch:` header ({})", count(cases));
            sum.fail_file(&shown, &why, cases);
            continue;
        };
        if cases == 0 && errors.is_empty() {
            let _ = writeln!(sum.report, "FAIL {shown}: no cases");
            sum.failed_files += 1;
            continue;
        }
        let Some(name) = file.instruction.as_deref() else {
            let why = format!(
                "{}, but no `# instruction:` header names their instruction",
                count(cases)
            );
            sum.fail_file(&shown, &why, cases);
            continue;
        };
        let Some(&checked) = by_name.get(&(arch, name)) else {
            let why = format!(
                "arch `{arch}` declares no instruction `{name}` ({})",
                count(cases)
            );
            sum.fail_file(&shown, &why, cases);
            let names = by_name.keys().filter(|k| k.0 == arch).map(|k| k.1);
            if let Some(near) = closest(name, names) {
                let _ = writeln!(sum.report, "  help: did you mean `{near}`?");
            }
            continue;
        };
        let inst = checked.instruction();
        for why in contradicted(file, inst) {
            let _ = writeln!(sum.diagnostics, "warning: {shown}:{why}");
        }
        let engine = engine_of(arch, name).unwrap_or_else(|| Engine::interpreter(checked));
        if let Some(why) = engine.fallback() {
            let _ = writeln!(
                sum.diagnostics,
                "note: {why}; {shown} runs on the interpreter"
            );
        }
        // the optimised engine runs the file's well-formed cases through the batch entry
        let batched = match (engine.is_jit(), mode) {
            (true, Mode::JitOptimized) => Some(batch(&engine, &file.cases)),
            _ => None,
        };
        let mut shown_here = 0;
        let mut failed_here = 0;
        for (i, case) in file.cases.iter().enumerate() {
            let ops = Operands {
                c: case.c,
                a: &case.a,
                b: &case.b,
                sa: &case.sa,
                sb: &case.sb,
            };
            let outcome = check_widths(inst, case).and_then(|_| match &batched {
                // (a well-formed case has its d in the batch)
                Some(Ok(d)) => d[i].ok_or_else(|| "left out of the batch".to_string()),
                Some(Err(e)) => Err(e.clone()),
                None => engine
                    .sparse_dot(&ops, &case.positions)
                    .map_err(|e| e.to_string()),
            });
            match outcome {
                Ok(got) if matches(&inst.arithmetic.d, case.d, got, file.nan_any) => {
                    sum.passed += 1
                }
                other => {
                    sum.failed += 1;
                    failed_here += 1;
                    if shown_here < SHOWN_PER_FILE {
                        shown_here += 1;
                        let mut line = format!(
                            "FAIL {shown}:{} {name}\n  c={} a={} b={}",
                            case.line,
                            hex(&inst.arithmetic.c, case.c),
                            list(&inst.arithmetic.a, &case.a),
                            list(&inst.arithmetic.b, &case.b)
                        );
                        if let Some(s) = &inst.arithmetic.scale {
                            let _ = write!(
                                line,
                                " sa={} sb={}",
                                list(&s.format, &case.sa),
                                list(&s.format, &case.sb)
                            );
                        }
                        if !case.positions.is_empty() {
                            let _ = write!(line, " pos={}", positions(&case.positions));
                        }
                        let _ = write!(
                            line,
                            "\n  expected d={} ({})",
                            hex(&inst.arithmetic.d, case.d),
                            inst.arithmetic.d.decode(case.d).describe()
                        );
                        match other {
                            Ok(got) => {
                                let _ = write!(
                                    line,
                                    "\n  actual   d={} ({})",
                                    hex(&inst.arithmetic.d, got),
                                    inst.arithmetic.d.decode(got).describe()
                                );
                            }
                            Err(e) => {
                                let _ = write!(line, "\n  error: {e}");
                            }
                        }
                        let _ = writeln!(sum.report, "{line}");
                    }
                }
            }
        }
        if failed_here > shown_here {
            let _ = writeln!(
                sum.report,
                "  ... and {} more failures in {shown}",
                failed_here - shown_here
            );
        }
    }
    Ok(sum)
}

/// d for each case whose operands have the instruction's widths (`None` for the others),
/// from one call of the kernel's batch entry.
fn batch(engine: &Engine, cases: &[vectors::Case]) -> Result<Vec<Option<u64>>, String> {
    let inst = engine.checked().instruction();
    let well_formed: Vec<&vectors::Case> = cases
        .iter()
        .filter(|case| check_widths(inst, case).is_ok())
        .collect();
    let cat = |part: fn(&vectors::Case) -> &Vec<u64>| -> Vec<u64> {
        well_formed
            .iter()
            .flat_map(|case| part(case).iter().copied())
            .collect()
    };
    let c: Vec<u64> = well_formed.iter().map(|case| case.c).collect();
    let (a, b, sa, sb) = (cat(|x| &x.a), cat(|x| &x.b), cat(|x| &x.sa), cat(|x| &x.sb));
    let positions = cat(|x| &x.positions);
    let mut d = vec![0u64; c.len()];
    let (stored, columns, s) = (inst.stored(), inst.columns(), inst.scale_count());
    let p = if inst.sparsity.is_some() { stored } else { 0 };
    engine
        .sparse_batch_strided(
            &c,
            (&a, stored),
            (&b, columns),
            (&sa, s),
            (&sb, s),
            (&positions, p),
            &mut d,
        )
        .map_err(|e| e.to_string())?;
    let mut d = d.into_iter();
    Ok(cases
        .iter()
        .map(|case| check_widths(inst, case).ok().and_then(|_| d.next()))
        .collect())
}
