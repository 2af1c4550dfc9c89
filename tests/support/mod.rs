//! What the integration tests share: running the `mmac` binary from the repository root,
//! its output as text, and the random specs of the fuzzers ([`spec_gen`]).
// each test crate uses some of these helpers
#![allow(dead_code)]

pub mod spec_gen;

use std::path::Path;
use std::process::{Command, Output};

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `mmac` with its working folder at the repository root and colour off.
pub fn mmac_command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mmac"));
    c.current_dir(root()).env("NO_COLOR", "1");
    c
}

/// Run `mmac ARGS` from the repository root.
pub fn mmac(args: &[&str]) -> Output {
    mmac_command().args(args).output().expect("mmac runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
