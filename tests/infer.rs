//! `mmac infer` recovers the library: every distinct arithmetic of `specs/` and
//! `specs/examples/`, served in process ([`SpecBox`]), is inferred, verified, and the
//! inferred spec agrees with the original on every public vector of its instructions and
//! on fresh random cases; hypothetical variants (tests/infer/variants.mma) likewise. An
//! arithmetic outside the prelude's space (composed emulations, a custom fixed-point
//! accumulator) must be either recovered in the same way or refused: never reported as
//! verified while it disagrees.

mod support;

use support::root;

use mmac_compiler::engine::{self, Engine};
use mmac_compiler::ir::Instruction;
use mmac_compiler::{Checked, CheckedInstruction};
use mmac_runtime::blackbox::{Interface, SpecBox, evaluate};
use mmac_runtime::conformance::matches;
use mmac_runtime::corners::Focus;
use mmac_runtime::infer::{Inference, Naming, Options, infer};
use mmac_runtime::inputs::Input;
use mmac_runtime::vectors;
use mmac_runtime::witness::{RandomInputs, nan_any};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::PathBuf;

const PRELUDE_PIPELINES: [&str; 11] = [
    "t_fdpa",
    "st_fdpa",
    "gst_fdpa",
    "tr_fdpa",
    "gtr_fdpa",
    "e_fdpa",
    "ftz_mul_add",
    "fma",
    "int_mma",
    "xor_popc",
    "and_popc",
];

/// The public vectors: ../shared/vectors when present, else the committed subset.
fn vectors_root() -> PathBuf {
    let shared = root().join("../shared/vectors");
    if shared.is_dir() {
        shared
    } else {
        root().join("tests/vectors")
    }
}

/// Cases by (arch, instruction), with the file's `nan: any`.
fn all_vectors() -> HashMap<(String, String), Vec<(bool, vectors::Case)>> {
    let mut out: HashMap<(String, String), Vec<(bool, vectors::Case)>> = HashMap::new();
    for dir in [vectors_root(), root().join("tests/vectors")] {
        for f in vectors::find_files(&dir).unwrap() {
            let (file, errors) = vectors::read(&f).unwrap();
            assert!(errors.is_empty(), "{}: {errors:?}", f.display());
            let (Some(arch), Some(name)) = (file.arch.clone(), file.instruction.clone()) else {
                continue;
            };
            let e = out.entry((arch, name)).or_default();
            e.extend(file.cases.into_iter().map(|c| (file.nan_any, c)));
        }
    }
    out
}

/// One arithmetic to recover: its file, an instruction with it, and the vector cases of
/// every instruction of the file that shares it.
type Item = (String, CheckedInstruction, Vec<(bool, vectors::Case)>);

struct Recovery {
    inference: Inference,
    /// Vector cases of the original's instructions the inferred spec was run on.
    vector_cases: usize,
    /// Disagreements on vectors and on fresh random cases (with a description).
    wrong: Vec<String>,
}

/// Infer `inst` from a box serving it, and check the inferred spec against the vectors of
/// every instruction that shares its arithmetic and against fresh random cases.
fn recover(original: Checked, cases: &[&(bool, vectors::Case)], options: &Options) -> Recovery {
    let inst = original.instruction();
    let iface = Interface::of(inst);
    let mut bx = SpecBox::new(original);
    let naming = Naming::default_for(&iface);
    let inference = infer(&mut bx, &iface, &naming, "in-process", options)
        .unwrap_or_else(|e| panic!("{}: {e}", inst.name));
    let mut wrong = vec![];
    let mut vector_cases = 0;
    if inference.verified() {
        let v = mmac_compiler::compile("inferred.mma", &inference.spec)
            .unwrap_or_else(|d| panic!("{}: {}", inst.name, d.render_plain(100)));
        let inferred = Engine::new(v.get(0), engine::Choice::QUICK);
        let d = &inst.arithmetic.d;
        let inputs: Vec<Input> = cases
            .iter()
            .map(|(_, c)| Input {
                c: c.c,
                a: c.a.clone(),
                b: c.b.clone(),
                sa: c.sa.clone(),
                sb: c.sb.clone(),
            })
            .collect();
        vector_cases = inputs.len();
        let got = evaluate(&inferred, &inputs).unwrap();
        for (i, (nan_file, case)) in cases.iter().enumerate() {
            if !matches(d, case.d, got[i], *nan_file || nan_any(inst)) {
                wrong.push(format!(
                    "vector line {}: {} expected d={:x}, inferred gives {:x}",
                    case.line,
                    iface.request(&inputs[i]),
                    case.d,
                    got[i]
                ));
            }
        }
        let focus = Focus::of(&[inst]);
        let mut random = RandomInputs::new(inst, &focus, 0xf7e5_4a11);
        let fresh: Vec<Input> = (0..2000).map(|_| random.draw()).collect();
        let want = SpecBox::new(original)
            .answer_all(&fresh)
            .expect("the original evaluates");
        let got = evaluate(&inferred, &fresh).unwrap();
        for i in 0..fresh.len() {
            if !matches(d, want[i], got[i], nan_any(inst)) {
                wrong.push(format!(
                    "fresh random case {}: original d={:x}, inferred {:x}",
                    iface.request(&fresh[i]),
                    want[i],
                    got[i]
                ));
            }
        }
    }
    Recovery {
        inference,
        vector_cases,
        wrong,
    }
}

trait AnswerAll {
    fn answer_all(
        &mut self,
        inputs: &[Input],
    ) -> Result<Vec<u64>, mmac_runtime::blackbox::BoxError>;
}

impl AnswerAll for SpecBox<'_> {
    fn answer_all(
        &mut self,
        inputs: &[Input],
    ) -> Result<Vec<u64>, mmac_runtime::blackbox::BoxError> {
        mmac_runtime::blackbox::BlackBox::answer(self, inputs)
    }
}

fn options() -> Options {
    Options {
        verify: 3000,
        ..Options::default()
    }
}

/// Run `recover` over instructions (in parallel) and assert the contract; returns a
/// summary line per instruction.
fn recover_all(
    items: Vec<Item>,
    must_recover: impl Fn(&Instruction) -> bool + Sync,
) -> Vec<String> {
    let results: Vec<(String, bool, Recovery, bool)> = items
        .par_iter()
        .map(|(file, original, cases)| {
            let inst = original.instruction();
            let refs: Vec<&(bool, vectors::Case)> = cases.iter().collect();
            let started = std::time::Instant::now();
            let checked = recover(original.checked(), &refs, &options());
            eprintln!(
                "{file}: {}: {:.1}s",
                inst.name,
                started.elapsed().as_secs_f64()
            );
            (
                format!("{file}: {}", inst.name),
                must_recover(inst),
                checked,
                cases.is_empty(),
            )
        })
        .collect();
    let mut failures = vec![];
    let mut lines = vec![];
    for (name, must, checked, no_vectors) in results {
        let inf = &checked.inference;
        let line = format!(
            "{name}: {} uses {} ({} probes, {} verification cases, {} vector cases{})",
            if inf.verified() {
                "recovered"
            } else {
                "REFUSED"
            },
            inf.uses,
            inf.probes,
            inf.verify_cases,
            checked.vector_cases,
            if no_vectors { ", no vectors" } else { "" }
        );
        if !checked.wrong.is_empty() {
            failures.push(format!(
                "{line}\n  verified, but wrong on {} cases, first: {}",
                checked.wrong.len(),
                checked.wrong[0]
            ));
        } else if must && !inf.verified() {
            let m = inf.failure.as_ref().unwrap();
            failures.push(format!(
                "{line}\n  not recovered: {} box d={:x} candidate {:?}\n{}",
                m.request, m.box_d, m.candidate_d, inf.spec
            ));
        }
        lines.push(line);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    lines
}

fn library_items(files: &[&str]) -> Vec<Item> {
    let vecs = all_vectors();
    let mut items = vec![];
    for file in files {
        let path = root().join(file);
        let s = mmac_runtime::specs::load_file(&path).unwrap();
        for (checked, _) in s.distinct() {
            let inst = checked.instruction();
            let cases: Vec<(bool, vectors::Case)> = s
                .spec()
                .instructions
                .iter()
                .filter(|i| i.arithmetic == inst.arithmetic)
                .flat_map(|i| {
                    vecs.get(&(s.spec().arch.clone(), i.name.clone()))
                        .cloned()
                        .unwrap_or_default()
                })
                .collect();
            items.push((file.to_string(), checked.to_instruction(), cases));
        }
    }
    items
}

fn spec_files() -> Vec<String> {
    let mut out = vec![];
    for dir in ["specs", "specs/examples"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "mma") {
                out.push(format!(
                    "{dir}/{}",
                    p.file_name().unwrap().to_string_lossy()
                ));
            }
        }
    }
    out.sort();
    out
}

fn written_with_the_prelude(inst: &Instruction) -> bool {
    PRELUDE_PIPELINES.contains(&inst.provenance.pipeline.as_str())
}

/// The library's arithmetics, chosen so that every pipeline meets each of its argument
/// lists, each operand format in a and in b, and each combination of c, d and scale at
/// least once (an arithmetic is kept when one of those is new for its pipeline; k aside:
/// the arithmetics that differ only in k share everything inference looks for but the
/// chain and group divisors); every instruction of the file sharing the chosen one's
/// arithmetic contributes its vectors. Every one written with a prelude pipeline is
/// recovered and agrees with all its public vectors and fresh random cases; the others
/// (composed emulations, custom pipelines) are recovered the same way or refused. Every
/// arithmetic, each pair of a and b formats included, runs in the ignored test below.
#[test]
fn the_library_is_recovered() {
    let files = spec_files();
    let refs: Vec<&str> = files.iter().map(String::as_str).collect();
    let mut seen = std::collections::HashSet::new();
    let items: Vec<Item> = library_items(&refs)
        .into_iter()
        .filter(|(_, original, _)| {
            let inst = original.instruction();
            let ar = &inst.arithmetic;
            let pipeline = &inst.provenance.pipeline;
            let keys = [
                format!("{pipeline} {:?}", inst.provenance.arguments),
                format!("{pipeline} a={}", ar.a.name),
                format!("{pipeline} b={}", ar.b.name),
                format!(
                    "{pipeline} c={} d={} scale={:?}",
                    ar.c.name,
                    ar.d.name,
                    ar.scale.as_ref().map(|s| (&s.format.name, s.block))
                ),
            ];
            // every key inserted: no short-circuit
            keys.into_iter()
                .map(|key| seen.insert(key))
                .fold(false, |new, inserted| new | inserted)
        })
        .collect();
    assert!(items.len() > 40, "{} arithmetics", items.len());
    eprintln!("{} arithmetics", items.len());
    let lines = recover_all(items, written_with_the_prelude);
    println!("{}", lines.join("\n"));
}

/// Every distinct arithmetic of the library, every k included: about 240 inferences, a
/// quarter of an hour on a debug build, 8 minutes on a release build with 2 cores
/// (`cargo test --release --test infer -- --ignored`; passed on 2026-11-23).
#[test]
#[ignore = "every distinct arithmetic: long; the_library_is_recovered covers every pipeline with each of its argument lists and each of its format combinations"]
fn every_distinct_arithmetic_of_the_library_is_recovered() {
    let files = spec_files();
    let refs: Vec<&str> = files.iter().map(String::as_str).collect();
    let lines = recover_all(library_items(&refs), written_with_the_prelude);
    println!("{}", lines.join("\n"));
}

/// Variants in no spec file: other F, L, rounding modes, e_zero, P, F2, group sizes.
#[test]
fn hypothetical_variants_are_recovered() {
    let items = library_items(&["tests/infer/variants.mma"]);
    assert!(items.len() >= 10, "{} variants", items.len());
    let lines = recover_all(items, |_| true);
    println!("{}", lines.join("\n"));
}

/// A box outside the prelude's space is refused with its closest candidate and a witness,
/// and the witness is real: the box and the candidate differ on it.
#[test]
fn a_box_outside_the_space_is_refused_with_a_witness() {
    let path = root().join("tests/infer/outside.mma");
    let s = mmac_runtime::specs::load_file(&path).unwrap();
    let checked = s.instructions().next().unwrap();
    let recovery = recover(checked, &[], &options());
    let inf = recovery.inference;
    assert!(!inf.verified(), "{}", inf.spec);
    let m = inf.failure.unwrap();
    let box_d = SpecBox::new(checked)
        .answer_all(std::slice::from_ref(&m.input))
        .unwrap()[0];
    assert_eq!(box_d, m.box_d);
    assert_ne!(Some(box_d), m.candidate_d);
    assert!(inf.spec.contains("NOT VERIFIED"), "{}", inf.spec);
}
