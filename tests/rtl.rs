//! The RTL example (examples/rtl/): the SystemVerilog datapath dp4.sv, written from
//! specs/examples/dp4.mma, passes its testbench under Verilator (every `mmac gen` vector,
//! then random inputs against the compiled spec called through DPI-C), and the same
//! datapath with an aligner one bit narrower (F = 19) is caught, with the `mmac run
//! --trace` command that explains the first mismatch.
//!
//! The same for the netlist Yosys synthesizes from dp4.sv (`NETLIST=1`): the design as a
//! synthesis tool reads it (Yosys reads a narrower SystemVerilog than Verilator does).
//!
//! `mmac prove` proves the datapath equal to its spec for every input, and gets replayed
//! witnesses for the narrower aligner and for a bug that fires on one input in 2^96 (no
//! vector set hits it: the solver has to build it).
//!
//! Needs `verilator` and `yosys` (Debian packages; `.ci/run` installs them). Without one
//! the test says so and passes, unless MMAC_REQUIRE_RTL is set, as `.ci/run` sets it.

mod support;

use std::path::Path;
use std::process::Command;
use support::{DP4_RTL, check_witness, exits, have, prove_dp4, root};

fn run(f: u32, build: &Path, netlist: bool) -> std::process::Output {
    Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rtl/run.sh"))
        .arg(f.to_string())
        .env("NETLIST", if netlist { "1" } else { "0" })
        .env("MMAC", env!("CARGO_BIN_EXE_mmac"))
        .env("BUILD", build)
        .env("RANDOM_CASES", "20000")
        .output()
        .unwrap()
}

/// The datapath passes every vector and 20,000 random cases; the one with an aligner one
/// bit narrower is caught, with the command that explains the first mismatch.
fn passes_and_catches(netlist: bool) {
    let dir = tempfile::tempdir().unwrap();
    let good = run(20, &dir.path().join("good"), netlist);
    let out = String::from_utf8_lossy(&good.stdout);
    assert!(
        good.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&good.stderr)
    );
    let last = out.lines().rev().find(|l| l.contains("passed")).unwrap();
    let passed: u64 = last.split(' ').next().unwrap().parse().unwrap();
    assert!(
        last.ends_with("passed, 0 failed") && passed > 20_000,
        "{out}"
    );

    let broken = run(19, &dir.path().join("broken"), netlist);
    let out = String::from_utf8_lossy(&broken.stdout);
    assert!(
        !broken.status.success(),
        "the F = 19 datapath passed:\n{out}"
    );
    assert!(out.contains("MISMATCH ("), "{out}");
    assert!(
        out.contains("explain: mmac run specs/examples/dp4.mma --instr dp4.f32.e4m3.e4m3.f32 --c "),
        "{out}"
    );
}

#[test]
fn testbench_passes_the_datapath_and_catches_a_narrower_aligner() {
    if have("verilator", "tests/rtl.rs") {
        passes_and_catches(false);
    }
}

#[test]
fn the_netlist_yosys_synthesizes_passes_and_its_narrower_aligner_is_caught() {
    if have("verilator", "tests/rtl.rs") && have("yosys", "tests/rtl.rs") {
        passes_and_catches(true);
    }
}

#[test]
fn the_rtl_example_is_proved_equal_to_its_spec() {
    if !have("yosys", "tests/rtl.rs") {
        return;
    }
    let out = prove_dp4(&["--timeout", "300"], DP4_RTL);
    let text = exits(&out, 0);
    assert!(
        text.starts_with("equivalent: dp4.f32.e4m3.e4m3.f32 (specs/examples/dp4.mma) and dp4 (examples/rtl/dp4.sv)"),
        "{text}"
    );
}

#[test]
fn a_narrower_aligner_and_a_one_pattern_bug_get_replayed_witnesses() {
    if !have("yosys", "tests/rtl.rs") {
        return;
    }
    // F = 19: a witness, with the design's port values and its d
    let out = prove_dp4(&["--set", "F=19", "--timeout", "300"], DP4_RTL);
    let text = exits(&out, 1);
    assert!(text.contains("  dp4: c = 32'h"), "{text}");
    check_witness(&text);

    // a bug on one input pattern of 2^96: no vector set hits it; the solver must build it
    let dir = tempfile::tempdir().unwrap();
    let source = std::fs::read_to_string(root().join(DP4_RTL)).unwrap();
    let bugged = source.replace(
        "  assign d = any_nan ? 32'h7fff_ffff : c_inf ? c : rounded;",
        "  wire rare = c == 32'h3f9d_70a4 && a == 32'h4c3a_2b19 && b == 32'h3355_2e0f;\n  \
         assign d = (any_nan ? 32'h7fff_ffff : c_inf ? c : rounded) ^ {31'b0, rare};",
    );
    assert_ne!(bugged, source, "the injection point moved");
    let path = dir.path().join("dp4_rare.sv");
    std::fs::write(&path, bugged).unwrap();
    let out = prove_dp4(&["--timeout", "300", "--json"], path.to_str().unwrap());
    let text = exits(&out, 1);
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(v["result"], "differ", "{v}");
    assert_eq!(v["method"], "solver", "{v}");
    assert_eq!(v["witness"]["c"], "3f9d70a4", "{v}");
    assert_eq!(
        v["witness"]["a"],
        serde_json::json!(["19", "2b", "3a", "4c"]),
        "{v}"
    );
    assert_eq!(
        v["witness"]["b"],
        serde_json::json!(["0f", "2e", "55", "33"]),
        "{v}"
    );
    let (l, r) = (
        u64::from_str_radix(v["left_d"].as_str().unwrap(), 16).unwrap(),
        u64::from_str_radix(v["right_d"].as_str().unwrap(), 16).unwrap(),
    );
    assert_eq!(l ^ r, 1, "{v}");
    assert!(v["seconds"].as_f64().unwrap() > 0.0, "{v}");
}
