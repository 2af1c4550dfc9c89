//! The JIT's command-line surface: `compile`, `compile --emit clif`, `bench --json`, and
//! `run`/`test` giving the same answers on both engines.

use std::path::Path;
use std::process::{Command, Output};

fn mmac(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mmac"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .output()
        .expect("mmac runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn compile_reports_every_instruction() {
    let o = mmac(&["compile", "specs/cdna3.mma"]);
    assert!(o.status.success(), "{o:?}");
    let out = stdout(&o);
    let line = out.lines().last().unwrap();
    let n = mmac(&["list", "specs/cdna3.mma"]);
    let count = stdout(&n).lines().count();
    assert!(
        line.starts_with(&format!("compiled {count} of {count} instructions")),
        "{line}"
    );
}

#[test]
fn compile_emits_clif() {
    let o = mmac(&["compile", "specs/cdna2.mma", "--emit", "clif"]);
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(
        out.contains("function u0:0(i64, i64, i64, i64, i64) -> i64"),
        "{out}"
    );
    assert!(
        out.contains(" = fma v"),
        "the f64 FMA kernel uses a native fma"
    );
}

#[test]
fn refusals_are_warnings_with_a_reason() {
    let o = mmac(&["compile", "compiler/tests/data/jit_refused.mma"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("warning: cannot JIT-compile `fused.m8n8k4.f64"),
        "{err}"
    );
    assert!(err.contains("bits"), "{err}");
}

#[test]
fn bench_json_is_the_last_line() {
    for engine in ["jit", "interp"] {
        let o = mmac(&[
            "bench",
            "specs/hopper.mma",
            "--instr",
            "mma.m16n8k8.f32.f16.f16.f32",
            "--engine",
            engine,
            "--json",
        ]);
        assert!(o.status.success(), "{o:?}");
        let out = stdout(&o);
        let last = out.lines().last().unwrap();
        assert!(last.starts_with('{') && last.ends_with('}'), "{last}");
        for key in [
            "instruction",
            "engine",
            "ns_per_dot",
            "dots_per_s",
            "baseline_ns_per_dot",
        ] {
            assert!(last.contains(&format!("\"{key}\":")), "{key} in {last}");
        }
        assert!(last.contains(&format!("\"engine\":\"{engine}\"")), "{last}");
    }
}

#[test]
fn run_gives_the_same_bits_on_both_engines() {
    let args = [
        "run",
        "specs/hopper.mma",
        "--instr",
        "mma.m16n8k8.f32.f16.f16.f32",
        "--c",
        "3f800000",
        "--a",
        "3c00,3c00,0,7bff,1,8001,0,0",
        "--b",
        "3c00,4000,0,7bff,1,1,0,0",
    ];
    let jit = mmac(&args);
    let mut with_interp = args.to_vec();
    with_interp.extend(["--engine", "interp"]);
    let interp = mmac(&with_interp);
    assert!(jit.status.success() && interp.status.success());
    assert_eq!(stdout(&jit), stdout(&interp));
}

#[test]
fn test_defaults_to_the_jit() {
    let o = mmac(&[
        "test",
        "specs/hopper.mma",
        "--vectors",
        "tests/data/hopper_small.mmv",
    ]);
    assert!(o.status.success(), "{o:?}");
    assert!(stdout(&o).lines().last().unwrap().ends_with(" 0 failed"));
}
