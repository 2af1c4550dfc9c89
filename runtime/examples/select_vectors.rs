//! Chooses the committed conformance subset (`tests/vectors/`) by mutation.
//!
//! ```text
//! cargo run --release -p mmac-runtime --example select_vectors -- ../shared/vectors tests/vectors
//! ```
//!
//! (run from the repository root; a third argument names the spec folder, `specs` by
//! default). For every public vector file it keeps the header, the first
//! [`RANDOM_CASES`] random cases, and, for every neighbour of the file's instruction
//! ([`mmac_runtime::mutants`]: one parameter moved to the next value that checks), up to
//! [`KILLS_WANTED`] public cases that fail on the neighbour, and as many for every behaviour
//! variant (one rule of the IR changed: a rounding mode, the overflow or zero-sign rule, a
//! flush; this is what keeps the probes for NaN, Inf, signed zeros and subnormals that
//! matter), chosen greedily (the case that settles the most mutants first, the earlier
//! line on a tie). A neighbour that no
//! public case tells apart is either proven unobservable ([`mmac_runtime::observability`])
//! or given cases computed from the spec: the witness search ([`mmac_runtime::witness`])
//! finds inputs on which the two differ, the reference interpreter computes the
//! instruction's result, and they go to `<arch>/<instruction>.spec.mmv`, whose header says
//! that they pin the spec, not hardware. Specs without public vectors (`rdna3`, `rdna4`,
//! `specs/examples/`) get spec-pinned files only, for one instruction per distinct
//! arithmetic, with a few random cases besides the witnesses.
//!
//! Every `.mmv` file under the output folder is replaced. The run fails (exit 1) if a
//! public case fails on its own instruction, or a neighbour is neither told apart nor
//! proven unobservable.

use mmac_compiler::Checked;
use mmac_compiler::engine::{Choice, Engine, Operands};
use mmac_compiler::interp;
use mmac_compiler::ir::Instruction;
use mmac_runtime::conformance::matches;
use mmac_runtime::corners::Focus;
use mmac_runtime::generate::mmv_header;
use mmac_runtime::inputs::{Input, hex};
use mmac_runtime::mutants::{Neighbour, behaviour_variants, neighbours};
use mmac_runtime::observability::proven_equivalent;
use mmac_runtime::specs::{self, LoadedSpec};
use mmac_runtime::vectors::{self, Case};
use mmac_runtime::witness::{self, RandomInputs, SearchOptions, nan_any};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Random cases kept from the head of every public file.
const RANDOM_CASES: usize = 8;
/// Cases wanted per neighbour (public ones that fail on it, or computed witnesses).
const KILLS_WANTED: usize = 2;
/// Random cases of a spec-only file (a spec without public vectors).
const SPEC_ONLY_RANDOM: usize = 8;

/// A spec file and the path its spec-pinned headers name.
struct SpecFile {
    loaded: LoadedSpec,
    /// The path as the spec-pinned headers name it (`specs/hopper.mma`).
    shown: String,
}

/// What happened to one neighbour.
enum Fate {
    /// Killed by public cases (the kept ones).
    Public,
    /// It takes other operands: every case is refused.
    Interface,
    /// Killed by computed witnesses.
    Witnessed(usize),
    Unobservable(String),
    NotFound,
    /// A behaviour variant public cases tell apart.
    BehaviourPublic,
    /// A behaviour variant no public case tells apart (not searched for).
    BehaviourUnpinned,
}

struct Outcome {
    /// Relative path of the public file, or of the spec-only file, without `.mmv`.
    path: String,
    public: Option<String>,
    spec_pinned: Option<String>,
    report: String,
    fates: Vec<(String, Fate)>,
    failures: Vec<String>,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: select_vectors PUBLIC_VECTORS OUTPUT [SPECS]");
        return ExitCode::from(2);
    }
    let (public, output) = (PathBuf::from(&args[0]), PathBuf::from(&args[1]));
    let spec_root = PathBuf::from(args.get(2).map_or("specs", |s| s.as_str()));
    let specs = match load_specs(&spec_root) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let files = vectors::find_files(&public).expect("the public vectors are readable");
    let mut outcomes: Vec<Outcome> = files
        .par_iter()
        .map(|path| select_public(&specs, &public, path))
        .collect();
    let public_archs: Vec<String> = outcomes
        .iter()
        .filter_map(|o| o.path.split('/').next().map(str::to_string))
        .collect();
    let spec_only: Vec<(&SpecFile, Checked)> = specs
        .values()
        .filter(|s| !public_archs.contains(&s.loaded.spec().arch))
        .flat_map(|s| s.loaded.distinct().map(move |(c, _)| (s, c)))
        .collect();
    outcomes.par_extend(spec_only.par_iter().map(|(s, c)| select_spec_only(s, *c)));

    // write
    if let Ok(old) = vectors::find_files(&output) {
        for f in old {
            std::fs::remove_file(f).expect("old vector files can be removed");
        }
    }
    let mut bytes = 0;
    let mut cases = (0, 0);
    for o in &outcomes {
        for (text, suffix, count) in [
            (&o.public, "mmv", &mut cases.0),
            (&o.spec_pinned, "spec.mmv", &mut cases.1),
        ] {
            let Some(text) = text else { continue };
            let path = output.join(format!("{}.{suffix}", o.path));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap();
            bytes += text.len();
            *count += text.lines().filter(|l| !l.starts_with('#')).count();
        }
    }

    // report
    let mut failures = 0;
    // fate -> parameter (the label's first word) -> count
    let mut tally: BTreeMap<&str, BTreeMap<String, usize>> = BTreeMap::new();
    for o in &outcomes {
        print!("{}", o.report);
        for f in &o.failures {
            println!("FAIL {}: {f}", o.path);
            failures += 1;
        }
        let spec_only = o.public.is_none();
        for (label, fate) in &o.fates {
            let what = match fate {
                Fate::Public => "killed by public cases",
                Fate::Interface => "killed by their operand count (block)",
                Fate::Witnessed(_) if spec_only => "killed by spec-pinned cases (spec-only files)",
                Fate::Witnessed(_) => "killed only by spec-pinned cases",
                Fate::Unobservable(_) => "proven unobservable",
                Fate::NotFound => "NOT told apart",
                Fate::BehaviourPublic => "behaviour variants killed by public cases",
                Fate::BehaviourUnpinned => "behaviour variants no public case kills",
            };
            let parameter = match fate {
                Fate::BehaviourPublic | Fate::BehaviourUnpinned => "",
                _ => label.split(' ').next().unwrap_or(""),
            };
            *tally
                .entry(what)
                .or_default()
                .entry(parameter.to_string())
                .or_default() += 1;
        }
    }
    println!("\nmutants:");
    for (what, by) in &tally {
        let n: usize = by.values().sum();
        let parts: Vec<String> = by
            .iter()
            .filter(|(p, _)| !p.is_empty())
            .map(|(p, k)| format!("{p} {k}"))
            .collect();
        if parts.is_empty() {
            println!("  {n:>5} {what}");
        } else {
            println!("  {n:>5} {what}: {}", parts.join(", "));
        }
    }
    println!(
        "{} public cases and {} spec-pinned cases kept, {:.2} MB",
        cases.0,
        cases.1,
        bytes as f64 / 1e6
    );
    if failures > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn load_specs(root: &Path) -> Result<BTreeMap<String, SpecFile>, String> {
    let (loaded, errors) = specs::load_all(root);
    if let Some(e) = errors.first() {
        return Err(e.render(false));
    }
    let base = root.parent().unwrap_or(Path::new(""));
    let mut out = BTreeMap::new();
    for l in loaded {
        if l.spec().instructions.is_empty() {
            continue;
        }
        let shown = l
            .path
            .strip_prefix(base)
            .unwrap_or(&l.path)
            .display()
            .to_string();
        out.insert(l.spec().arch.clone(), SpecFile { loaded: l, shown });
    }
    Ok(out)
}

/// Does `inst` (or a neighbour) fail the case?
fn fails(inst: &Instruction, got: Result<u64, String>, case: &Case, nan: bool) -> bool {
    !matches!(got, Ok(d) if matches(&inst.arithmetic.d, case.d, d, nan))
}

/// Run every case through an instruction: the JIT's batch entry, or the interpreter.
fn results(checked: Checked, cases: &[Case]) -> Vec<Result<u64, String>> {
    let engine = Engine::new(checked, Choice::OPTIMISED);
    cases
        .iter()
        .map(|case| {
            let ops = Operands {
                c: case.c,
                a: &case.a,
                b: &case.b,
                sa: &case.sa,
                sb: &case.sb,
            };
            engine.dot(&ops).map_err(|e| e.to_string())
        })
        .collect()
}

fn select_public(specs: &BTreeMap<String, SpecFile>, root: &Path, path: &Path) -> Outcome {
    let rel = path
        .strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string();
    let mut out = Outcome {
        path: rel.strip_suffix(".mmv").unwrap_or(&rel).to_string(),
        public: None,
        spec_pinned: None,
        report: String::new(),
        fates: vec![],
        failures: vec![],
    };
    let text = std::fs::read_to_string(path).expect("a public vector file is readable");
    let (file, errors) = vectors::parse(path, &text);
    if !errors.is_empty() {
        out.failures
            .push(format!("{} malformed lines", errors.len()));
        return out;
    }
    let arch = file.arch.clone().unwrap_or_default();
    let name = file.instruction.clone().unwrap_or_default();
    let Some(spec) = specs.get(&arch) else {
        out.failures.push(format!("no spec declares arch `{arch}`"));
        return out;
    };
    let Some(checked) = spec.loaded.instruction(&name) else {
        out.failures
            .push(format!("`{arch}` has no instruction `{name}`"));
        return out;
    };
    let inst = checked.instruction();
    let cases = &file.cases;
    // the original passes every case (else the selection means nothing)
    for (case, got) in cases.iter().zip(results(checked, cases)) {
        if fails(inst, got, case, file.nan_any) {
            out.failures
                .push(format!("line {} fails on the spec itself", case.line));
        }
    }
    let ns = neighbours(checked);
    let variants = behaviour_variants(inst);
    let kill_row = |c: Checked| -> Vec<bool> {
        results(c, cases)
            .into_iter()
            .zip(cases)
            .map(|(got, case)| fails(c.instruction(), got, case, file.nan_any))
            .collect()
    };
    // kills[m][i]: case i fails on mutant m (the neighbours, then the behaviour variants)
    let mut kills: Vec<Vec<bool>> = ns
        .iter()
        .map(|n| {
            if n.same_interface(inst) {
                kill_row(n.checked.checked())
            } else {
                vec![true; cases.len()]
            }
        })
        .collect();
    kills.extend(variants.iter().map(|v| kill_row(v.checked.checked())));
    let mut keep: Vec<bool> = (0..cases.len()).map(|i| i < RANDOM_CASES).collect();
    let wanted: Vec<usize> = kills
        .iter()
        .map(|k| k.iter().filter(|x| **x).count().min(KILLS_WANTED))
        .collect();
    loop {
        let have: Vec<usize> = kills
            .iter()
            .map(|k| k.iter().zip(&keep).filter(|(x, y)| **x && **y).count())
            .collect();
        let best = (0..cases.len())
            .filter(|&i| !keep[i])
            .map(|i| {
                let gain = (0..kills.len())
                    .filter(|&m| kills[m][i] && have[m] < wanted[m])
                    .count();
                (gain, std::cmp::Reverse(i))
            })
            .max();
        match best {
            Some((gain, std::cmp::Reverse(i))) if gain > 0 => keep[i] = true,
            _ => break,
        }
    }
    let mut pinned: Vec<(String, Input, u64)> = vec![];
    for (m, n) in ns.iter().enumerate() {
        let fate = if !n.same_interface(inst) {
            Fate::Interface
        } else if wanted[m] > 0 {
            Fate::Public
        } else {
            fate_without_public(checked, n, &mut pinned)
        };
        out.fates.push((n.label(), fate));
    }
    for (m, v) in variants.iter().enumerate() {
        let fate = if wanted[ns.len() + m] > 0 {
            Fate::BehaviourPublic
        } else {
            Fate::BehaviourUnpinned
        };
        out.fates.push((v.label.clone(), fate));
    }
    let kept: Vec<&Case> = cases
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(c, _)| c)
        .collect();
    let lines: Vec<&str> = text.lines().collect();
    let mut s = String::new();
    for l in lines.iter().filter(|l| l.starts_with('#')) {
        let _ = writeln!(s, "{l}");
    }
    let _ = writeln!(
        s,
        "# subset: {} of these cases, chosen by tests/vectors/README.md's mutation rule: the first {RANDOM_CASES} random cases, then up to {KILLS_WANTED} cases that fail on each neighbouring spec and behaviour variant",
        kept.len()
    );
    for c in &kept {
        let _ = writeln!(s, "{}", lines[c.line - 1]);
    }
    out.public = Some(s);
    if !pinned.is_empty() {
        out.spec_pinned = Some(spec_file_text(spec, inst, &pinned));
    }
    let _ = writeln!(
        out.report,
        "{}: {} neighbours, {} public cases kept, {} computed",
        out.path,
        ns.len(),
        kept.len(),
        pinned.len()
    );
    for (label, fate) in &out.fates {
        match fate {
            Fate::Unobservable(why) => {
                let _ = writeln!(out.report, "  {label}: unobservable: {why}");
            }
            Fate::Witnessed(n) => {
                let _ = writeln!(out.report, "  {label}: no public case fails; {n} computed");
            }
            Fate::NotFound => out.failures.push(format!(
                "{label}: no case tells it apart, and it is not proven unobservable"
            )),
            _ => {}
        }
    }
    out
}

/// A neighbour no public case kills: proven unobservable, or witnesses (appended to
/// `pinned` with the instruction's result), or not found.
fn fate_without_public(
    checked: Checked,
    n: &Neighbour,
    pinned: &mut Vec<(String, Input, u64)>,
) -> Fate {
    let inst = checked.instruction();
    if let Some(why) = proven_equivalent(checked, n.instruction()) {
        return Fate::Unobservable(why);
    }
    // a witness found for an earlier neighbour may already tell this one apart
    let nan = nan_any(inst);
    let mut have = 0;
    for (_, input, d) in pinned.iter() {
        let got = interp::run(n.checked.checked(), &input.operands());
        if !matches!(got, Ok(x) if matches(&inst.arithmetic.d, *d, x, nan)) {
            have += 1;
        }
    }
    if have >= KILLS_WANTED {
        return Fate::Witnessed(0);
    }
    let options = SearchOptions {
        wanted: KILLS_WANTED,
        ..Default::default()
    };
    match witness::find(checked, n.checked.checked(), &options) {
        Ok(found) if !found.is_empty() => {
            let mut added = 0;
            for w in found.into_iter().take(KILLS_WANTED - have) {
                pinned.push((format!("{}: {}", n.label(), w.origin), w.input, w.left));
                added += 1;
            }
            Fate::Witnessed(added)
        }
        Ok(_) if have > 0 => Fate::Witnessed(0),
        Ok(_) => Fate::NotFound,
        Err(e) => {
            eprintln!("{}: {}: {e}", inst.name, n.label());
            Fate::NotFound
        }
    }
}

fn spec_file_text(spec: &SpecFile, inst: &Instruction, cases: &[(String, Input, u64)]) -> String {
    let ar = &inst.arithmetic;
    let mut s = mmv_header(&spec.loaded.spec().arch, inst);
    let _ = writeln!(
        s,
        "# source: computed from {} by mmac's reference interpreter (not by mmasim, not on hardware)",
        spec.shown
    );
    let _ = writeln!(
        s,
        "# pins: the spec, not hardware. The comment above each case names the neighbouring spec"
    );
    let _ = writeln!(
        s,
        "#   (one parameter moved) that it tells apart, or says it is a random case (tests/vectors/README.md)."
    );
    let _ = writeln!(s, "# cases: {}", cases.len());
    for (why, input, d) in cases {
        let _ = writeln!(s, "# {why}");
        let _ = writeln!(s, "{} d={}", input.case_fields(inst), hex(&ar.d, *d));
    }
    s
}

/// A spec without public vectors: random cases and witnesses for every neighbour of one
/// instruction.
fn select_spec_only(spec: &SpecFile, checked: Checked) -> Outcome {
    let inst = checked.instruction();
    let mut out = Outcome {
        path: format!(
            "{}/{}",
            spec.loaded.spec().arch,
            inst.name.replace("::", "_")
        ),
        public: None,
        spec_pinned: None,
        report: String::new(),
        fates: vec![],
        failures: vec![],
    };
    let focus = Focus::of(&[inst]);
    let mut random = RandomInputs::new(inst, &focus, 1);
    let mut pinned: Vec<(String, Input, u64)> = (0..SPEC_ONLY_RANDOM)
        .map(|i| {
            let input = random.draw();
            let d = interp::run(checked, &input.operands()).expect("the spec computes");
            (format!("random case {i}"), input, d)
        })
        .collect();
    for n in neighbours(checked) {
        let fate = if n.same_interface(inst) {
            fate_without_public(checked, &n, &mut pinned)
        } else {
            Fate::Interface
        };
        if let Fate::NotFound = fate {
            out.failures.push(format!(
                "{}: no case tells it apart, and it is not proven unobservable",
                n.label()
            ));
        }
        out.fates.push((n.label(), fate));
    }
    out.spec_pinned = Some(spec_file_text(spec, inst, &pinned));
    let _ = writeln!(
        out.report,
        "{}: spec only, {} neighbours, {} cases",
        out.path,
        out.fates.len(),
        pinned.len()
    );
    out
}
