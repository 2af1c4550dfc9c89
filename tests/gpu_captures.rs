//! The capture kit's own captures from a real GPU (`tests/captures/H200`: every Hopper
//! `mma.sync`, dense and sparse, and `wgmma` at N = 8, run on an H200): they pass bit for
//! bit through both engines against `specs/hopper.mma`, and they settle the sparse
//! hypothesis: the alternative (`specs/examples/sparse_over_columns_hopper.mma`, the unit
//! walking every column) fails them wherever the two hypotheses differ.

use mmac_runtime::conformance::{self, Mode};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn captures() -> PathBuf {
    root().join("tests/captures/H200")
}

#[test]
fn h200_captures_pass_on_both_engines() {
    let spec = mmac_runtime::specs::load_file(&root().join("specs/hopper.mma")).unwrap();
    let files = mmac_runtime::vectors::find_files(&captures()).unwrap();
    assert_eq!(
        files.len(),
        194,
        "142 of mmac gen's vectors and 52 narrow files"
    );
    for engine in [Mode::Interp, Mode::Jit] {
        let sum = conformance::run_with(std::slice::from_ref(&spec), &captures(), engine).unwrap();
        assert_eq!(
            (sum.failed, sum.skipped, sum.failed_files),
            (0, 0, 0),
            "{engine:?}:\n{}",
            sum.report
        );
        assert_eq!(sum.passed, 26245, "{engine:?}: every case ran");
    }
}

/// The alternative hypothesis, as a spec of arch `hopper` so that it reads the captures.
fn over_columns() -> mmac_runtime::specs::LoadedSpec {
    let text =
        std::fs::read_to_string(root().join("specs/examples/sparse_over_columns_hopper.mma"))
            .unwrap()
            .replace("arch hopper_sparse_columns", "arch hopper");
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("over_columns.mma");
    std::fs::write(&path, text).unwrap();
    mmac_runtime::specs::load_file(&path).unwrap_or_else(|e| panic!("{}", e.render(false)))
}

/// Failed cases of one capture under a spec.
fn failed(spec: &mmac_runtime::specs::LoadedSpec, file: &Path) -> usize {
    let sum = conformance::run_with(std::slice::from_ref(spec), file, Mode::Jit).unwrap();
    assert_eq!((sum.skipped, sum.failed_files), (0, 0), "{}", sum.report);
    sum.failed
}

/// Where the two hypotheses differ (K longer than one step of the dense unit: f16 and bf16
/// k32, tf32 k16, every fp8 form), the H200 answers as `over selected` says and not as
/// `over columns` does; where they cannot differ (f16 and bf16 k16, tf32 k8: one step
/// either way, and an unselected column's zero product below every other), it fails neither.
#[test]
fn h200_sparse_captures_refute_the_unit_walking_every_column() {
    let hopper = mmac_runtime::specs::load_file(&root().join("specs/hopper.mma")).unwrap();
    let columns = over_columns();
    let mut separated = 0;
    for kind in ["gen", "narrow"] {
        for file in mmac_runtime::vectors::find_files(&captures().join(kind)).unwrap() {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            if !name.contains(".sp.") || name.contains(".s32.") {
                continue;
            }
            assert_eq!(
                failed(&hopper, &file),
                0,
                "{kind}/{name} under specs/hopper.mma"
            );
            let against = failed(&columns, &file);
            let one_step = name.starts_with("mma.sp.m16n8k8.")
                || (name.starts_with("mma.sp.m16n8k16.") && !name.contains("tf32"));
            // fp8 through the f16 unit, on narrow cases: 16 products of 8 significant bits
            // within 2^-8..2^8 sum exactly within F = 25, so neither walk truncates
            let exact = kind == "narrow" && name.starts_with("mma.sp.m16n8k64");
            if one_step || exact {
                assert_eq!(
                    against, 0,
                    "{kind}/{name}: the hypotheses agree on these cases"
                );
            } else {
                assert!(
                    against > 0,
                    "{kind}/{name}: no case tells the hypotheses apart"
                );
                separated += 1;
            }
        }
    }
    // gen: 8 mma.sp files (f16 and bf16 k32, tf32 k16, 4 fp8) and 12 wgmma.sp (N = 8);
    // narrow: the same less the 4 fp8 mma.sp
    assert_eq!(separated, 36);
}
