//! The CLI's modules depend one way: `src/cli/mod.rs` dispatches to the subcommand
//! modules, which share helpers only through the leaf `common`; no subcommand module
//! imports another, and `common` imports no sibling.

use std::path::Path;

/// The sibling modules a file names through `super::` (`super::x::...` or
/// `super::{x, y::...}`).
fn siblings_used(text: &str, modules: &[String]) -> Vec<String> {
    let mut names = vec![];
    for (at, _) in text.match_indices("super::") {
        let rest = &text[at + "super::".len()..];
        let group = if let Some(inner) = rest.strip_prefix('{') {
            &inner[..inner.find('}').unwrap_or(inner.len())]
        } else {
            // `super::x::...`: only its first segment (not the rest of the file)
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        };
        for item in group.split(',') {
            let ident: String = item
                .trim()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if modules.contains(&ident) {
                names.push(ident);
            }
        }
    }
    names
}

#[test]
fn cli_modules_share_only_the_leaf_common() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    let modules: Vec<String> = files
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|m| m != "mod")
        .collect();
    assert!(modules.contains(&"common".to_string()), "{modules:?}");
    for f in &files {
        let me = f.file_stem().unwrap().to_string_lossy().into_owned();
        if me == "mod" {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let used = siblings_used(&text, &modules);
        let allowed: &[&str] = if me == "common" { &[] } else { &["common"] };
        let wrong: Vec<_> = used
            .iter()
            .filter(|m| !allowed.contains(&m.as_str()))
            .collect();
        assert!(
            wrong.is_empty(),
            "src/cli/{me}.rs uses sibling modules {wrong:?}; shared helpers belong in common.rs"
        );
    }
}

#[test]
fn the_scanner_sees_both_import_forms() {
    let modules = vec!["common".to_string(), "jit".to_string()];
    assert_eq!(
        siblings_used("use super::{Engine, jit::Emit};", &modules),
        ["jit"]
    );
    assert_eq!(
        siblings_used("let x = super::common::load(p);", &modules),
        ["common"]
    );
}
