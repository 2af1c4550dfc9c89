//! What the integration tests share: running the `mmac` binary from the repository root,
//! its output as text, and the random specs of the fuzzers ([`spec_gen`]).
// each test crate uses some of these helpers
#![allow(dead_code)]

pub mod spec_gen;

use assert_cmd::cargo::{cargo_bin, cargo_bin_cmd};
use std::path::Path;
use std::process::Output;

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `mmac` executable cargo built for these tests.
pub fn mmac_path() -> &'static Path {
    cargo_bin!("mmac")
}

/// `mmac` with its working folder at the repository root and colour off, as a plain
/// `std::process::Command` for tests that pipe or spawn it.
pub fn mmac_command() -> std::process::Command {
    let mut c = std::process::Command::new(mmac_path());
    c.current_dir(root()).env("NO_COLOR", "1");
    c
}

/// Run `mmac ARGS` from the repository root.
pub fn mmac(args: &[&str]) -> Output {
    mmac_in(root(), args)
}

/// Run `mmac ARGS` with its working folder at `dir`.
pub fn mmac_in(dir: &Path, args: &[&str]) -> Output {
    cargo_bin_cmd!("mmac")
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .args(args)
        .output()
        .expect("mmac runs")
}

/// Run `mmac ARGS` from the repository root, which must succeed (on failure the test
/// fails showing the command, its exit code, stdout and stderr); its stdout.
pub fn mmac_ok(args: &[&str]) -> String {
    let assert = cargo_bin_cmd!("mmac")
        .current_dir(root())
        .env("NO_COLOR", "1")
        .args(args)
        .assert()
        .success();
    stdout(assert.get_output())
}

/// A process's stdout as text.
pub fn stdout(o: &Output) -> String {
    text(&o.stdout)
}

/// A process's stderr as text.
pub fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

/// Bytes as text, invalid UTF-8 replaced.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The witness's `mmac run` line, run: the spec's d, which must be the reported left d
/// and differ from the design's.
pub fn check_witness(text: &str) -> (String, String) {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("mmac run "))
        .unwrap_or_else(|| panic!("no mmac run line:\n{text}"));
    let args: Vec<&str> = line.split_whitespace().skip(1).collect();
    let run = mmac_ok(&args);
    let left = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("left d  = "))
        .unwrap()
        .to_string();
    let right = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("right d = "))
        .unwrap()
        .to_string();
    assert!(run.contains(&format!("d={left} ")), "{run}\nvs\n{text}");
    assert!(!right.ends_with(&left), "{text}");
    (left, right)
}

/// Whether `tool` runs; if not, the calling test (`who`) is skipped, said on stderr,
/// unless MMAC_REQUIRE_RTL is set (as `.ci/run` sets it), when it fails.
pub fn have(tool: &str, who: &str) -> bool {
    let found = std::process::Command::new(tool)
        .arg("--version")
        .output()
        .is_ok();
    found
        || skipped(
            who,
            &format!("{tool} is not installed"),
            &format!("apt-get install {tool}"),
        )
}

/// Whether the Python that `mmac prove` runs Bitwuzla with (`MMAC_PYTHON`, else
/// `python3`) has the `bitwuzla` module (scripts/test installs it); if not, the calling
/// test (`who`) is skipped as [`have`] skips it.
pub fn have_bitwuzla(who: &str) -> bool {
    let python = std::env::var("MMAC_PYTHON").unwrap_or_else(|_| "python3".into());
    let found = std::process::Command::new(&python)
        .args(["-c", "import bitwuzla"])
        .output()
        .is_ok_and(|o| o.status.success());
    found
        || skipped(
            who,
            &format!("{python} has no bitwuzla module"),
            "pip install bitwuzla, as scripts/test does; MMAC_PYTHON names the Python",
        )
}

/// A test skipped for want of a tool (`missing`): said on stderr with how to install it,
/// or a failure when MMAC_REQUIRE_RTL is set. Always false.
fn skipped(who: &str, missing: &str, install: &str) -> bool {
    assert!(
        std::env::var_os("MMAC_REQUIRE_RTL").is_none(),
        "MMAC_REQUIRE_RTL is set but {missing} ({install})"
    );
    // straight to stderr, past the test harness's capture: a skip must be seen
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{who}: SKIPPED: {missing} ({install})");
    false
}

/// The exit code must be `code` (else the test fails showing stdout and stderr); stdout.
pub fn exits(out: &Output, code: i32) -> String {
    let text = stdout(out);
    assert_eq!(out.status.code(), Some(code), "{text}{}", stderr(out));
    text
}

/// The RTL example's spec, instruction and design (examples/rtl/).
pub const DP4_SPEC: &str = "specs/examples/dp4.mma";
pub const DP4_INSTR: &str = "dp4.f32.e4m3.e4m3.f32";
pub const DP4_RTL: &str = "examples/rtl/dp4.sv";

/// `mmac prove` of the dp4 spec against the design `rtl` (top module `dp4`), with
/// `extra` options.
pub fn prove_dp4(extra: &[&str], rtl: &str) -> Output {
    let mut args = vec![
        "prove", DP4_SPEC, "--instr", DP4_INSTR, "--rtl", rtl, "--top", "dp4",
    ];
    args.extend_from_slice(extra);
    mmac(&args)
}
