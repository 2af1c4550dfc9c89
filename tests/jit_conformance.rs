//! Conformance vectors through the JIT engine: the committed subset (`tests/vectors`) must
//! pass with every instruction of `specs/` running as native code, compiled both ways
//! (quickly, as `mmac test` does, case by case through the dot entry; and optimised, as
//! `bench` and `gemm` run it, each file in one call of the batch entry). (The full
//! public set, `../shared/vectors`, runs through the JIT both ways in `.ci/run`, `mmac
//! test specs --vectors ../shared/vectors [--optimized]`, whose default engine is the JIT.)

use mmac_runtime::conformance::{self, Mode};
use std::path::Path;

#[test]
fn vectors_pass_through_the_jit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let vectors = root.join("tests/vectors");
    let (specs, errors) = mmac_runtime::specs::load_all(&root.join("specs"));
    assert!(errors.is_empty(), "the specs check");
    for engine in [Mode::Jit, Mode::JitOptimized] {
        let sum = conformance::run_with(&specs, &vectors, engine).unwrap();
        check(&sum, &vectors, engine);
    }
}

fn check(sum: &conformance::Summary, vectors: &Path, engine: Mode) {
    assert_eq!(
        sum.failed, 0,
        "{engine:?}: {}{}",
        sum.diagnostics, sum.report
    );
    assert!(sum.passed > 1000, "only {} cases ran", sum.passed);
    // the JIT compiles every instruction of specs/: no file falls back to the interpreter
    // (a file that did would say so)
    let fallbacks = sum
        .diagnostics
        .lines()
        .filter(|l| l.contains("runs on the interpreter"))
        .count();
    let files = mmac_runtime::vectors::find_files(vectors).unwrap().len();
    assert_eq!(
        fallbacks, 0,
        "{fallbacks} of {files} files fell back:\n{}",
        sum.diagnostics
    );
}

/// The JIT engine really compares bits: a flipped expectation fails.
#[test]
fn a_flipped_bit_fails_on_the_jit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (specs, _) = mmac_runtime::specs::load_all(&root.join("specs/hopper.mma"));
    let text = std::fs::read_to_string(root.join("tests/data/hopper_small.mmv")).unwrap();
    let header: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
    let case = text.lines().find(|l| l.starts_with("c=")).unwrap();
    let (head, d) = case.rsplit_once("d=").unwrap();
    let width = d.trim().len();
    let flipped = format!(
        "{head}d={:0width$x}",
        u64::from_str_radix(d.trim(), 16).unwrap() ^ 1
    );
    let dir = tempfile::TempDir::new().unwrap();
    let file = dir.path().join("flip.mmv");
    std::fs::write(&file, format!("{}\n{case}\n{flipped}\n", header.join("\n"))).unwrap();
    for engine in [Mode::Jit, Mode::JitOptimized] {
        let sum = conformance::run_with(&specs, &file, engine).unwrap();
        assert_eq!(
            (sum.passed, sum.failed),
            (1, 1),
            "{engine:?}: {}",
            sum.report
        );
        assert!(
            !sum.diagnostics.contains("runs on the interpreter"),
            "{}",
            sum.diagnostics
        );
    }
}
