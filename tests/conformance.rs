//! The committed conformance vectors (tests/vectors, chosen by mutation: see
//! tests/vectors/README.md) run through the interpreter: every file must match a spec and
//! every case must pass. `<instruction>.mmv` files are subsets of the public set (mmasim
//! 2.1.1); `<instruction>.spec.mmv` files are computed from the specs and pin them.

use std::path::Path;

#[test]
fn committed_vectors_pass_through_the_interpreter() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (specs, errors) = mmac_runtime::specs::load_all(&root.join("specs"));
    assert!(
        errors.is_empty(),
        "{}",
        errors.iter().map(|e| e.render(false)).collect::<String>()
    );
    let sum = mmac_runtime::conformance::run(&specs, &root.join("tests/vectors")).unwrap();
    assert_eq!((sum.failed, sum.skipped), (0, 0), "{}", sum.report);
    // 5,244 public and 844 spec-pinned cases when last chosen
    assert!(sum.passed > 6_000, "only {} cases ran", sum.passed);
    let files = mmac_runtime::vectors::find_files(&root.join("tests/vectors")).unwrap();
    let (pinned, public): (Vec<_>, Vec<_>) = files
        .iter()
        .partition(|f| f.to_string_lossy().ends_with(".spec.mmv"));
    assert_eq!(
        public.len(),
        326,
        "one file per (architecture, instruction) of the public set"
    );
    assert_eq!(
        pinned.len(),
        174,
        "spec-pinned files: where a neighbouring spec needs them, and the spec-only archs \
         (and dp4, written by `mmac gen`)"
    );
}

/// A wrong expectation is caught: the runner really compares bits.
#[test]
fn a_flipped_bit_fails() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (specs, _) = mmac_runtime::specs::load_all(&root.join("specs/hopper.mma"));
    let text =
        std::fs::read_to_string(root.join("tests/vectors/hopper/mma.m16n8k16.f32.f16.f16.f32.mmv"))
            .unwrap();
    let case = text.lines().find(|l| l.starts_with("c=")).unwrap();
    let (head, d) = case.rsplit_once("d=").unwrap();
    let flipped = format!("{head}d={:08x}", u32::from_str_radix(d, 16).unwrap() ^ 1);
    let dir = tempfile::TempDir::new().unwrap();
    let file = dir.path().join("flip.mmv");
    std::fs::write(&file, format!("# arch: hopper\n# instruction: mma.m16n8k16.f32.f16.f16.f32\n# nan: exact\n{case}\n{flipped}\n")).unwrap();
    let sum = mmac_runtime::conformance::run(&specs, &file).unwrap();
    assert_eq!((sum.passed, sum.failed), (1, 1), "{}", sum.report);
    assert!(sum.report.contains("flip.mmv:5"), "{}", sum.report);
}
