//! Real-GPU evidence on a bare clone: the committed subset of the silicon captures
//! (`tests/silicon`, outputs of real A100, A2, Ada, L40S, H100, H200, B200 and V100 GPUs)
//! passes bit for bit through both engines, every file matched by an instruction of
//! `specs/`, the emulated fp8 `mma.m16n8k32` of Hopper and Blackwell included.

use mmac_runtime::conformance::{self, Mode};
use std::path::Path;

#[test]
fn silicon_captures_pass_on_both_engines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (specs, errors) = mmac_runtime::specs::load_all(&root.join("specs"));
    assert!(errors.is_empty(), "the specs check");
    let captures = root.join("tests/silicon");
    let files = mmac_runtime::vectors::find_files(&captures).unwrap();
    assert_eq!(files.len(), 48, "one file per GPU and format pair");
    for engine in [Mode::Interp, Mode::Jit] {
        let sum = conformance::run_with(&specs, &captures, engine).unwrap();
        assert_eq!(
            (sum.failed, sum.skipped),
            (0, 0),
            "{engine:?}:\n{}",
            sum.report
        );
        assert_eq!(sum.passed, 48 * 200, "{engine:?}: every sample ran");
    }
}

/// The emulated instructions are pinned by the captures: the same spec without the
/// emulation's k mod 4 split (halves 0-15 and 16-31 instead) fails them.
#[test]
fn the_k_split_of_the_emulation_is_what_the_captures_pin() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("specs/hopper.mma"))
        .unwrap()
        .replace(
            "uses fp8_through_f16(inner = \"mma.m16n8k16.f16.f16.f16.f16\")",
            "uses halves(inner = \"mma.m16n8k16.f16.f16.f16.f16\")",
        );
    let halves = "
pipeline halves(inner) {
    convert a, b to f16 round nearest_even
    let low = run inner over k in 0..15 with c = 0
    let high = run inner over k in 16..31 with c = low
    let d = add high, c in out round nearest_even
    result d
}
";
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("hopper.mma");
    std::fs::write(&path, format!("{text}\n{halves}")).unwrap();
    let spec =
        mmac_runtime::specs::load_file(&path).unwrap_or_else(|e| panic!("{}", e.render(false)));
    let sum = conformance::run_with(
        std::slice::from_ref(&spec),
        &root.join("tests/silicon/H100/E4M3_fp16.mmv"),
        Mode::Jit,
    )
    .unwrap();
    assert!(sum.failed > 20, "{} of 200 failed", sum.failed);
}
