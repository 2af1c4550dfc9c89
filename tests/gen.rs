//! `mmac gen`: vectors generated from a spec pass on that spec on both engines, and fail on
//! every single-parameter neighbour of it (runtime/src/mutants.rs) that is not proven to
//! compute the same function; checked here independently of the generator's own
//! bookkeeping, over one instruction of every distinct arithmetic of every spec in
//! `specs/` and `specs/examples/`. The hex format is checked field by field.

mod support;

use support::mmac;

use mmac_runtime::conformance::matches;
use mmac_runtime::generate::{self, Fate, Options};
use mmac_runtime::mutants::neighbours;
use mmac_runtime::observability::proven_equivalent;
use mmac_runtime::specs;
use mmac_runtime::witness::nan_any;
use rayon::prelude::*;
use std::path::Path;

#[test]
fn generated_vectors_kill_every_neighbour_over_the_library() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut loaded = specs::load_all(&root.join("specs")).0;
    loaded.extend(specs::load_all(&root.join("specs/examples")).0);
    let mut jobs = vec![];
    for l in &loaded {
        for (i, _) in l.checked.distinct() {
            jobs.push((l, i));
        }
    }
    let options = Options {
        random: 16,
        seed: 7,
    };
    let report: Vec<(String, usize, Vec<String>, Vec<String>)> = jobs
        .par_iter()
        .map(|(l, i)| {
            let checked = l.checked.get(*i);
            let inst = checked.instruction();
            let label = format!("{} {}", l.spec().arch, inst.name);
            let g =
                generate::generate(checked, &options).unwrap_or_else(|e| panic!("{label}: {e}"));
            let nan = nan_any(inst);
            // a case through the interpreter (a sparse one with its positions)
            let run = |checked: mmac_compiler::Checked, c: &generate::Case| {
                mmac_compiler::engine::Engine::interpreter(checked)
                    .sparse_dot(&c.input.operands(), &c.positions)
            };
            // every case is the spec's own result
            for c in &g.cases {
                let d = run(checked, c).unwrap();
                assert_eq!(d, c.d, "{label}: {}", c.label);
            }
            let mut unobservable = vec![];
            let mut survivors = vec![];
            for n in neighbours(checked) {
                let killed = g.cases.iter().any(|c| {
                    !matches!(run(n.checked.checked(), c),
                        Ok(d) if matches(&inst.arithmetic.d, c.d, d, nan))
                });
                let fate = &g
                    .neighbours
                    .iter()
                    .find(|(l, _)| *l == n.label())
                    .unwrap()
                    .1;
                if killed {
                    assert!(
                        matches!(fate, Fate::Killed(_) | Fate::Interface),
                        "{label} {}: killed, but the generator says {fate:?}",
                        n.label()
                    );
                } else if let Some(why) = proven_equivalent(checked, n.instruction()) {
                    unobservable.push(format!("{} ({why})", n.label()));
                } else {
                    survivors.push(n.label());
                }
            }
            (label, g.cases.len(), unobservable, survivors)
        })
        .collect();
    let mut cases = 0;
    let mut failures = vec![];
    for (label, n, unobservable, survivors) in &report {
        cases += n;
        for u in unobservable {
            println!("{label}: unobservable {u}");
        }
        for s in survivors {
            failures.push(format!(
                "{label}: neighbour {s} passes every generated case"
            ));
        }
    }
    println!("{} instructions, {cases} generated cases", report.len());
    assert!(
        report.len() > 100,
        "one instruction per distinct arithmetic"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn generated_vectors_pass_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    for (spec, instr) in [
        ("specs/hopper.mma", "mma.m16n8k16.f32.f16.f16.f32"),
        ("specs/cdna3.mma", "v_mfma_f32_16x16x32_fp8_fp8"),
        ("specs/ampere.mma", "mma.m8n8k16.satfinite.s32.s8.s8.s32"),
        (
            "specs/rtx_blackwell.mma",
            "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3",
        ),
        (
            "specs/examples/fp8_f20_rne.mma",
            "mma.m16n8k32.f32.e4m3.e5m2.f32",
        ),
    ] {
        let out = dir.path().join("v.mmv");
        let o = mmac(&[
            "gen",
            spec,
            "--instr",
            instr,
            "-n",
            "32",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = std::fs::read_to_string(&out).unwrap();
        let cases = text.lines().filter(|l| l.starts_with("c=")).count();
        assert!(cases > 32, "{instr}: random and corner cases, got {cases}");
        for engine in ["jit", "interp"] {
            let o = mmac(&[
                "test",
                spec,
                "--vectors",
                out.to_str().unwrap(),
                "--engine",
                engine,
            ]);
            let stdout = String::from_utf8_lossy(&o.stdout);
            assert_eq!(
                stdout.lines().last(),
                Some(format!("{cases} passed, 0 failed").as_str()),
                "{instr} on {engine}"
            );
        }
    }
}

#[test]
fn hex_lines_are_the_fields_of_the_mmv_cases() {
    let spec = "specs/hopper.mma";
    let instr = "mma.m16n8k8.f32.bf16.bf16.f32";
    let mmv = mmac(&["gen", spec, "--instr", instr, "-n", "8", "--seed", "3"]);
    let hex = mmac(&[
        "gen", spec, "--instr", instr, "-n", "8", "--seed", "3", "--format", "hex",
    ]);
    assert_eq!(hex.status.code(), Some(0));
    let mmv = String::from_utf8(mmv.stdout).unwrap();
    let hex = String::from_utf8(hex.stdout).unwrap();
    // c (8 digits), a0..a7 and b0..b7 (4 digits each), d (8 digits): 32 + 16*16 + 32 bits
    assert!(
        hex.contains("a 320-bit word (logic [319:0] vectors"),
        "{hex}"
    );
    assert!(hex.contains("c[319:288]=f32 a0[287:272]=bf16"), "{hex}");
    let words: Vec<&str> = hex.lines().filter(|l| !l.starts_with("//")).collect();
    let cases: Vec<&str> = mmv.lines().filter(|l| l.starts_with("c=")).collect();
    assert_eq!(words.len(), cases.len());
    for (w, case) in words.iter().zip(&cases) {
        // c=X a=A0,...,A7 b=B0,...,B7 d=Y  ->  X_A0_..._A7_B0_..._B7_Y
        let fields: Vec<String> = case
            .split(' ')
            .flat_map(|kv| kv.split_once('=').unwrap().1.split(','))
            .map(str::to_string)
            .collect();
        assert_eq!(*w, fields.join("_"));
    }
}

#[test]
fn gen_refuses_what_it_cannot_do() {
    let o = mmac(&[
        "gen",
        "specs/hopper.mma",
        "--instr",
        "mma.m16n8k16.f32.f16.f16.f33",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("did you mean `mma.m16n8k16.f32.f16.f16.f32`?"),
        "{err}"
    );
    let o = mmac(&[
        "gen",
        "specs/hopper.mma",
        "--instr",
        "x",
        "-o",
        "specs/hopper.mma",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let o = mmac(&["gen", "no/such.mma", "--instr", "x"]);
    assert_eq!(o.status.code(), Some(2));
}
