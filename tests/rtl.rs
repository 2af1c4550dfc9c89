//! The RTL example (examples/rtl/): the SystemVerilog datapath dp4.sv, written from
//! specs/examples/dp4.mma, passes its testbench under Verilator (every `mmac gen` vector,
//! then random inputs against the compiled spec called through DPI-C), and the same
//! datapath with an aligner one bit narrower (F = 19) is caught, with the `mmac run
//! --trace` command that explains the first mismatch.
//!
//! The same for the netlist Yosys synthesizes from dp4.sv (`NETLIST=1`): the design as a
//! synthesis tool reads it (Yosys reads a narrower SystemVerilog than Verilator does).
//!
//! Needs `verilator` and `yosys` (Debian packages; `.ci/run` installs them). Without one
//! the test says so and passes, unless MMAC_REQUIRE_RTL is set, as `.ci/run` sets it.

use std::path::Path;
use std::process::Command;

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

/// Whether `tool` runs; if not, the test is skipped (said on stderr) unless
/// MMAC_REQUIRE_RTL is set.
fn have(tool: &str) -> bool {
    if Command::new(tool).arg("--version").output().is_ok() {
        return true;
    }
    assert!(
        std::env::var_os("MMAC_REQUIRE_RTL").is_none(),
        "MMAC_REQUIRE_RTL is set but {tool} is not installed"
    );
    // straight to stderr, past the test harness's capture: a skip must be seen
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "tests/rtl.rs: SKIPPED: {tool} is not installed (apt-get install {tool})"
    );
    false
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
    if have("verilator") {
        passes_and_catches(false);
    }
}

#[test]
fn the_netlist_yosys_synthesizes_passes_and_its_narrower_aligner_is_caught() {
    if have("verilator") && have("yosys") {
        passes_and_catches(true);
    }
}
