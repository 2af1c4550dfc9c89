//! The checker's diagnostics, pinned: every file in tests/checker/fail/ must be rejected
//! and its rendered diagnostics match a snapshot (the source is the snapshot's
//! description); every file in tests/checker/pass/ and specs/ must be accepted.

use std::path::Path;

fn render(path: &Path) -> (String, Result<mmac_compiler::ir::Spec, String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let name = format!(
        "tests/checker/fail/{}",
        path.file_name().unwrap().to_string_lossy()
    );
    let r = mmac_compiler::compile(&name, &text).map_err(|d| d.render_plain(100));
    (text, r)
}

#[test]
fn rejected_specs_have_pinned_diagnostics() {
    insta::glob!("checker/fail/*.mma", |path| {
        let (text, result) = render(path);
        let rendered = match result {
            Ok(_) => panic!("{} was accepted but must be rejected", path.display()),
            Err(r) => r,
        };
        // every diagnostic says what to do about it
        let codes = rendered.matches("mmac::").count();
        let helps = rendered.matches("help:").count();
        assert_eq!(
            codes,
            helps,
            "a diagnostic without a help line in {}:\n{rendered}",
            path.display()
        );
        insta::with_settings!({ description => text, omit_expression => true }, {
            insta::assert_snapshot!(rendered);
        });
    });
}

#[test]
fn accepted_specs_check() {
    let mut files = vec![];
    for dir in ["tests/checker/pass", "specs", "specs/examples", "specs/std"] {
        let Ok(rd) = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)) else {
            continue;
        };
        for e in rd {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "mma") {
                files.push(p);
            }
        }
    }
    assert!(
        files.len() >= 11,
        "expected the spec library, found {files:?}"
    );
    for p in files {
        let text = std::fs::read_to_string(&p).unwrap();
        if let Err(d) = mmac_compiler::compile(&p.display().to_string(), &text) {
            panic!("{} does not check:\n{}", p.display(), d.render_plain(100));
        }
    }
}

/// Several independent mistakes are reported together, not one at a time.
#[test]
fn errors_are_collected() {
    let (_, r) = render(Path::new("tests/checker/fail/several_errors.mma"));
    let r = r.unwrap_err();
    assert!(r.contains("3 errors"), "{r}");
}
