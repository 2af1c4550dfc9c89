//! The JIT's command-line surface: `compile`, `compile --emit clif`, `bench --json`, and
//! `run`/`test` giving the same answers on both engines.

mod support;

use support::{mmac, mmac_ok, stdout};

#[test]
fn compile_reports_every_instruction() {
    let out = mmac_ok(&["compile", "specs/cdna3.mma"]);
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
    let out = mmac_ok(&["compile", "specs/cdna2.mma", "--emit", "clif"]);
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
    assert_eq!(
        err,
        "warning: cannot JIT-compile `fused.m8n8k4.f64.f64.f64.f64`: exact products of `f64` and `f64` need 106-bit significands; the JIT multiplies in 64 bits\n  help: `--engine interp` computes it; `run` and `test` fall back to the interpreter for it\n"
    );
    assert!(
        stdout(&o).starts_with("compiled 0 of 1 instructions (0 kernels) in "),
        "{}",
        stdout(&o)
    );
}

/// The last line of `mmac bench --json` parsed as JSON: exactly the documented keys
/// (`dense_ns_per_dot` for a sparse instruction only).
fn bench_json(
    file: &str,
    instr: &str,
    engine: &str,
    dist: &str,
) -> serde_json::Map<String, serde_json::Value> {
    let out = mmac_ok(&[
        "bench", file, "--instr", instr, "--engine", engine, "--dist", dist, "--json",
    ]);
    let last = out.lines().last().unwrap();
    let v: serde_json::Value =
        serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {last}"));
    let map = v.as_object().unwrap().clone();
    let mut keys: Vec<&str> = map.keys().map(|k| k.as_str()).collect();
    keys.sort();
    let sparse = instr.contains(".sp.") || instr.starts_with("v_smfmac");
    let mut want = vec![
        "baseline_ns_per_dot",
        "dist",
        "dots_per_s",
        "engine",
        "instruction",
        "ns_per_dot",
    ];
    if sparse {
        want.push("dense_ns_per_dot");
        want.sort();
    }
    assert_eq!(keys, want);
    let timed = [
        "ns_per_dot",
        "dots_per_s",
        "baseline_ns_per_dot",
        "dense_ns_per_dot",
    ];
    for &key in &timed[..if sparse { 4 } else { 3 }] {
        assert!(
            map[key].as_f64().is_some_and(|x| x > 0.0),
            "{key} in {last}"
        );
    }
    map
}

#[test]
fn bench_json_is_the_last_line() {
    for (engine, dist) in [("jit", "finite"), ("interp", "finite"), ("jit", "normal")] {
        let name = "mma.m16n8k8.f32.f16.f16.f32";
        let map = bench_json("specs/hopper.mma", name, engine, dist);
        assert_eq!(map["engine"], engine);
        assert_eq!(map["instruction"], name);
        assert_eq!(map["dist"], dist);
    }
    // block-scaled inputs take unit scales under a value distribution
    let name = "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3";
    let map = bench_json("specs/rtx_blackwell.mma", name, "jit", "lognormal");
    assert_eq!(map["dist"], "lognormal");
}

/// A sparse instruction is timed beside the dense kernel it runs through (of k/2 over
/// the selected products, of all k over the columns), in the text and in the JSON.
#[test]
fn bench_of_a_sparse_instruction_times_its_dense_kernel_beside_it() {
    for (file, name, k) in [
        ("specs/hopper.mma", "mma.sp.m16n8k32.f32.f16.f16.f32", 16),
        (
            "specs/examples/sparse_over_columns_hopper.mma",
            "mma.sp.m16n8k16.f32.f16.f16.f32",
            16,
        ),
        ("specs/cdna3.mma", "v_smfmac_f32_16x16x32_f16", 16),
    ] {
        let map = bench_json(file, name, "jit", "finite");
        assert_eq!(map["instruction"], name);
        let text = mmac_ok(&["bench", file, "--instr", name]);
        assert!(
            text.contains(&format!("(the dense kernel it runs through, k = {k})"))
                && text.contains("\nratio_to_dense "),
            "{text}"
        );
    }
}

/// Value distributions need float operands; an unknown name is refused by the parser.
#[test]
fn bench_refuses_a_distribution_it_cannot_draw() {
    let o = mmac(&[
        "bench",
        "specs/ampere.mma",
        "--instr",
        "mma.m8n8k16.s32.s8.s8.s32",
        "--dist",
        "normal",
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--dist normal draws real values, but a is `s8`, not a floating-point format"),
        "{err}"
    );
    let o = mmac(&[
        "bench",
        "specs/hopper.mma",
        "--instr",
        "mma.m16n8k8.f32.f16.f16.f32",
        "--dist",
        "gaussian",
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("finite"));
}

/// Instruction names may hold any character of a string in a `for` list (a tab, a
/// backslash): the JSON line escapes them.
#[test]
fn bench_json_escapes_the_instruction_name() {
    let dir = tempfile::TempDir::new().unwrap();
    let spec = dir.path().join("odd.mma");
    std::fs::write(
        &spec,
        "arch odd\nimport std\ninstruction mma.{X}.f32 {\n    for X in [\"tab\there\\\\\"]\n    shape 16 x 8 x 16\n    types a = f16, b = f16, c = f32, d = f32\n    uses t_fdpa(F = 25, L = 16, e_zero = -133)\n}\n",
    )
    .unwrap();
    let name = "mma.tab\there\\\\.f32";
    let map = bench_json(spec.to_str().unwrap(), name, "jit", "finite");
    assert_eq!(map["instruction"], name);
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
