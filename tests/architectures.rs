//! Each architecture's semantics, pinned: the instruction listing and a fixed battery of
//! feature probes per instruction (see runtime/src/probes.rs) are insta snapshots, so any
//! change to a spec's meaning shows up as a reviewed snapshot diff. docs/architectures.md
//! is generated from the specs and must be current.

use mmac_runtime::specs::LoadedSpec;
use mmac_runtime::{listing, mutants, observability, probes, specs};
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
        let spec = loaded.spec();
        let listing: String = spec
            .instructions
            .iter()
            .map(|i| listing::line(i) + "\n")
            .collect();
        insta::assert_snapshot!(format!("list_{}", spec.arch), listing);

        // instructions with the same arithmetic answer every probe alike: probe the
        // first of each such group
        let mut out = String::new();
        for (checked, n) in loaded.distinct() {
            let more = if n > 1 {
                format!(" (and {} more with the same arithmetic)", n - 1)
            } else {
                String::new()
            };
            out.push_str(&format!(
                "{}{more}\n{}\n",
                checked.name(),
                probes::report(checked)
            ));
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
        out.push_str(&listing::markdown(load(&p).spec()));
        out.push('\n');
    }
    out
}

/// Where the written part of docs/architectures.md begins: the measured gate counts
/// (`scripts/costs.sh`), kept when the generated part is rewritten.
const COSTS_SECTION: &str = "## What the datapaths cost";

#[test]
fn architectures_doc_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architectures.md");
    let want = architectures_markdown();
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    let (generated, costs) = match have.find(COSTS_SECTION) {
        Some(i) => have.split_at(i),
        None => (have.as_str(), ""),
    };
    if std::env::var_os("MMAC_UPDATE_DOCS").is_some() {
        std::fs::write(&path, format!("{want}{costs}")).unwrap();
    }
    assert!(
        generated == want,
        "docs/architectures.md is stale: run `MMAC_UPDATE_DOCS=1 cargo test --test architectures`"
    );
    assert!(
        costs.starts_with(COSTS_SECTION),
        "docs/architectures.md ends with the section `{COSTS_SECTION}`"
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
    let report = |s: &LoadedSpec| probes::report(s.instruction(name).unwrap());
    let (rh, ra) = (report(&h), report(&a));
    let pick = |r: &str| {
        r.lines()
            .find(|l| l.contains("1 + 2^-25 (alignment F"))
            .map(|l| l.to_string())
    };
    assert_ne!(pick(&rh), pick(&ra), "hopper:\n{rh}\nampere:\n{ra}");
}

/// A wrong parameter changes a snapshot: for one instruction of each distinct arithmetic
/// of every spec, the probe report of each neighbour (one parameter moved to the next
/// value that checks, runtime/src/mutants.rs) differs from the original's, unless the
/// neighbour is proven to compute the same on every input (runtime/src/observability.rs)
/// or takes other operands (a moved scale block). The perturbations the hardening issue
/// names are checked by name as well.
#[test]
fn probes_see_every_wrong_parameter() {
    let mut seen = 0;
    let mut missed = vec![];
    for p in spec_files() {
        let loaded = load(&p);
        for (original, _) in loaded.distinct() {
            let inst = original.instruction();
            let report = probes::report(original);
            for n in mutants::neighbours(original) {
                if !n.same_interface(inst)
                    || observability::proven_equivalent(original, n.instruction()).is_some()
                {
                    continue;
                }
                seen += 1;
                if probes::report(n.checked.checked()) == report {
                    missed.push(format!(
                        "{} {}: {}",
                        loaded.spec().arch,
                        inst.name,
                        n.label()
                    ));
                }
            }
        }
    }
    assert!(
        missed.is_empty(),
        "the probes do not see:\n{}",
        missed.join("\n")
    );
    assert!(seen > 1000, "only {seen} neighbours");

    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (arch, name, label) in [
        (
            "hopper",
            "mma.m16n8k16.f32.bf16.bf16.f32",
            "e_zero -133 -> -132",
        ),
        (
            "hopper",
            "mma.m16n8k16.f16.f16.f16.f16",
            "e_zero -21 -> -22",
        ),
        (
            "ada",
            "mma.m16n8k16.f32.bf16.bf16.f32",
            "e_zero -132 -> -131",
        ),
        ("ada", "mma.m16n8k16.f16.f16.f16.f16", "e_zero -20 -> -19"),
        ("ada", "mma.m16n8k16.f32.e4m3.e4m3.f32", "P 13 -> 14"),
        ("cdna3", "v_mfma_f32_16x16x16_f16", "F2 31 -> 30"),
        ("volta", "mma.m8n8k4.f16.f16.f16.f16", "e_zero -19 -> -18"),
        ("turing", "mma.m16n8k8.f16.f16.f16.f16", "e_zero -20 -> -21"),
        (
            "blackwell",
            "tcgen05.mma.block_scale.m64n8k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0",
            "e_zero -139 -> -138",
        ),
    ] {
        let path = root.join(format!("specs/{arch}.mma"));
        let loaded = load(&path);
        let checked = loaded.instruction(name).unwrap();
        let n = mutants::neighbours(checked)
            .into_iter()
            .find(|n| n.label() == label)
            .unwrap_or_else(|| panic!("{arch} {name} has no neighbour {label}"));
        assert_ne!(
            probes::report(checked),
            probes::report(n.checked.checked()),
            "{arch} {name} {label}"
        );
    }
}
