//! The checker's diagnostics, pinned. Every file in tests/checker/fail/ must be rejected
//! with the diagnostic codes its first line names (`// codes: type, unknown-name`), and
//! its rendered diagnostics must match a snapshot (the source is the snapshot's
//! description). Every file in tests/checker/pass/ (edge cases that must be accepted) and
//! in specs/ must be accepted, and every instruction of a pass/ file runs on both engines
//! with equal bits.

mod support;

use support::root;

use mmac_compiler::diagnostic::Code;
use mmac_compiler::engine::Operands;
use mmac_compiler::random::Rng;
use mmac_compiler::{interp, jit};
use std::path::{Path, PathBuf};

fn compile(
    path: &Path,
) -> (
    String,
    Result<mmac_compiler::CheckedSpec, mmac_compiler::diagnostic::Diagnostics>,
) {
    let text = std::fs::read_to_string(path).unwrap();
    let name = format!(
        "tests/checker/{}/{}",
        path.parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy(),
        path.file_name().unwrap().to_string_lossy()
    );
    let r = mmac_compiler::compile(&name, &text);
    (text, r)
}

/// The codes a fail/ file expects, from its first line `// codes: a, b`.
fn expected_codes(path: &Path, text: &str) -> Vec<String> {
    let first = text.lines().next().unwrap_or("");
    let Some(list) = first.strip_prefix("// codes:") else {
        panic!("{} must start with `// codes: ...`", path.display());
    };
    list.split(',').map(|c| c.trim().to_string()).collect()
}

#[test]
fn rejected_specs_have_pinned_diagnostics() {
    insta::glob!("checker/fail/*.mma", |path| {
        let (text, result) = compile(path);
        let diags = match result {
            Ok(_) => panic!("{} was accepted but must be rejected", path.display()),
            Err(d) => d,
        };
        let codes: Vec<&str> = diags.codes().iter().map(|c| c.as_str()).collect();
        assert_eq!(
            codes,
            expected_codes(path, &text),
            "the diagnostic codes of {}",
            path.display()
        );
        let rendered = diags.render_plain(100);
        // every diagnostic says what to do about it
        let helps = rendered.matches("help:").count();
        assert_eq!(
            codes.len(),
            helps,
            "a diagnostic without a help line in {}:\n{rendered}",
            path.display()
        );
        insta::with_settings!({ description => text, omit_expression => true }, {
            insta::assert_snapshot!(rendered);
        });
    });
}

fn mma_files(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "mma"))
        .collect();
    files.sort();
    files
}

#[test]
fn accepted_specs_check() {
    let mut files = vec![];
    for dir in ["tests/checker/pass", "specs", "specs/examples", "specs/std"] {
        files.extend(mma_files(dir));
    }
    assert!(
        mma_files("tests/checker/pass").len() >= 5,
        "tests/checker/pass holds the accepted edge cases"
    );
    for p in files {
        let text = std::fs::read_to_string(&p).unwrap();
        if let Err(d) = mmac_compiler::compile(&p.display().to_string(), &text) {
            panic!("{} does not check:\n{}", p.display(), d.render_plain(100));
        }
    }
}

/// The accepted edge cases run: every instruction on random encodings through the
/// interpreter and the JIT (which compiles each of them), with equal bits.
#[test]
fn accepted_edge_cases_run_on_both_engines() {
    let mut rng = Rng::new(0x5eed);
    for p in mma_files("tests/checker/pass") {
        let (_, r) = compile(&p);
        let v = r.unwrap_or_else(|d| panic!("{}", d.render_plain(100)));
        let compiled = jit::compile(&v).expect("the backend starts");
        for checked in v.instructions() {
            let inst = checked.instruction();
            let kernel = compiled
                .kernel(&inst.name)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let ar = &inst.arithmetic;
            let scale = ar.scale.as_ref().map(|s| &s.format);
            for _ in 0..200 {
                let draw = |rng: &mut Rng, f: &mmac_compiler::format::Format| {
                    rng.next_u64() & f.storage_mask()
                };
                let a: Vec<u64> = (0..inst.k()).map(|_| draw(&mut rng, &ar.a)).collect();
                let b: Vec<u64> = (0..inst.k()).map(|_| draw(&mut rng, &ar.b)).collect();
                let sa: Vec<u64> = (0..inst.scale_count())
                    .map(|_| draw(&mut rng, scale.unwrap()))
                    .collect();
                let sb: Vec<u64> = (0..inst.scale_count())
                    .map(|_| draw(&mut rng, scale.unwrap()))
                    .collect();
                let c = draw(&mut rng, &ar.c);
                let ops = Operands {
                    c,
                    a: &a,
                    b: &b,
                    sa: &sa,
                    sb: &sb,
                };
                let want = interp::run(checked, &ops).unwrap();
                let got = kernel.dot(&ops).unwrap();
                let nan = |x: u64| ar.d.decode(x).is_nan();
                assert!(
                    want == got || (nan(want) && nan(got)),
                    "{} {}: c={c:x} a={a:x?} b={b:x?}: interp {want:x}, jit {got:x}",
                    p.display(),
                    inst.name
                );
            }
        }
    }
}

/// Several independent mistakes are reported together, not one at a time.
#[test]
fn errors_are_collected() {
    let (_, r) = compile(&root().join("tests/checker/fail/several_errors.mma"));
    let d = r.unwrap_err();
    assert_eq!(d.diags.len(), 3);
    assert!(d.render_plain(100).contains("3 errors"));
}

/// Each broken item of a file gets its own syntax error, at its own line; a file with one
/// syntax error gets just that one.
#[test]
fn syntax_errors_are_reported_per_item() {
    let lines = |file: &str| {
        let (text, r) = compile(&root().join("tests/checker/fail").join(file));
        let d = r.unwrap_err();
        assert!(d.codes().iter().all(|c| *c == Code::Syntax), "{file}");
        let line = |s: usize| mmac_compiler::diagnostic::line_col(&text, s).0;
        d.diags
            .iter()
            .map(|d| line(d.span.start))
            .collect::<Vec<_>>()
    };
    assert_eq!(lines("syntax_several_items.mma"), [4, 8, 13]);
    assert_eq!(lines("syntax_unclosed_pipeline.mma"), [8]);
    assert_eq!(lines("syntax_misspelled_item.mma"), [3]);
}

/// Every diagnostic code but the validator's internal ones is exercised by a fail/ file.
#[test]
fn every_code_has_a_failing_example() {
    let mut seen = std::collections::HashSet::new();
    for p in mma_files("tests/checker/fail") {
        let text = std::fs::read_to_string(&p).unwrap();
        seen.extend(expected_codes(&p, &text));
    }
    let missing: Vec<&str> = Code::ALL
        .iter()
        .filter(|c| !matches!(c, Code::InvalidIr | Code::Internal))
        .map(|c| c.as_str())
        .filter(|c| !seen.contains(*c))
        .collect();
    assert!(
        missing.is_empty(),
        "no tests/checker/fail file for {missing:?}"
    );
}
