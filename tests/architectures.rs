//! Each architecture's semantics, pinned: the instruction listing and a fixed battery of
//! feature probes per instruction (see runtime/src/probes.rs) are insta snapshots, so any
//! change to a spec's meaning shows up as a reviewed snapshot diff. docs/architectures.md
//! is generated from the specs and must be current.

use mmac_runtime::specs::LoadedSpec;
use mmac_runtime::{listing, probes, specs};
use std::path::{Path, PathBuf};

fn spec_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![];
    for dir in ["specs", "specs/examples"] {
        let mut here: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "mma"))
            .collect();
        here.sort();
        files.extend(here);
    }
    files
}

fn load(p: &Path) -> LoadedSpec {
    specs::load_file(p).unwrap_or_else(|e| panic!("{}", e.render(false)))
}

#[test]
fn listings_and_probes_are_pinned() {
    for p in spec_files() {
        let loaded = load(&p);
        let spec = &loaded.spec;
        let listing: String = spec
            .instructions
            .iter()
            .map(|i| listing::line(i) + "\n")
            .collect();
        insta::assert_snapshot!(format!("list_{}", spec.arch), listing);

        // instructions with the same arithmetic answer every probe alike: probe the
        // first of each such group
        let mut out = String::new();
        for (i, info, n) in loaded.distinct() {
            let more = if n > 1 {
                format!(" (and {} more with the same arithmetic)", n - 1)
            } else {
                String::new()
            };
            out.push_str(&format!("{}{more}\n{}\n", i.name, probes::report(i, info)));
        }
        insta::assert_snapshot!(format!("probes_{}", spec.arch), out);
    }
}

fn architectures_markdown() -> String {
    let mut out = String::from(
        "# Architectures\n\n\
         Generated from `specs/` by `mmac list --markdown` (a test checks it is current; \
         regenerate with `MMAC_UPDATE_DOCS=1 cargo test --test architectures`). \
         F is the alignment width of the first alignment (the one products meet); \
         instructions that differ only in their m/n shape are collapsed into one row.\n\n",
    );
    for p in spec_files() {
        out.push_str(&listing::markdown(&load(&p).spec));
        out.push('\n');
    }
    out
}

#[test]
fn architectures_doc_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architectures.md");
    let want = architectures_markdown();
    if std::env::var_os("MMAC_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/architectures.md is stale: run `MMAC_UPDATE_DOCS=1 cargo test --test architectures`"
    );
}

/// The probes are not vacuous: they distinguish architectures that differ (Hopper's
/// F = 25 against Ampere's F = 24 at 1 + 2^-25).
#[test]
fn probes_tell_architectures_apart() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let h = load(&root.join("specs/hopper.mma"));
    let a = load(&root.join("specs/ampere.mma"));
    let name = "mma.m16n8k16.f32.f16.f16.f32";
    let report = |s: &LoadedSpec| {
        let (i, info) = s.instruction(name).unwrap();
        probes::report(i, info)
    };
    let (rh, ra) = (report(&h), report(&a));
    let pick = |r: &str| {
        r.lines()
            .find(|l| l.contains("1 + 2^-25 (alignment F"))
            .map(|l| l.to_string())
    };
    assert_ne!(pick(&rh), pick(&ra), "hopper:\n{rh}\nampere:\n{ra}");
}
