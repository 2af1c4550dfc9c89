//! `mmac prove` (runtime/src/prove/) on two specs: two that differ (a witness that
//! `mmac run` confirms) and two that agree, `diff --prove`, errors and the budget (exit
//! 3), each solver on its own. The RTL example's proofs are in tests/rtl.rs.
//!
//! Every neighbour that runtime/src/observability.rs proves unobservable for a library
//! instruction with inputs of at most 8 bits is proved again by the solvers: one in every
//! run, all 268 with MMAC_PROVE_ALL=1 (half a minute to over a minute each with f32
//! accumulators, minutes with f16 accumulators; docs/rtl.md).
//!
//! Needs `yosys` and `yosys-abc` (Debian's yosys; `.ci/run` installs it) and a Python
//! with the `bitwuzla` module (`MMAC_PYTHON`; scripts/test installs it). Without them the
//! tests say so and pass, unless MMAC_REQUIRE_RTL is set, as `.ci/run` sets it.

mod support;

use mmac_runtime::prove::{self, Side, Verdict};
use mmac_runtime::{mutants, observability};
use std::path::Path;
use support::{
    DP4_INSTR, DP4_RTL, DP4_SPEC, check_witness, exits, have, mmac, prove_dp4, root, stdout,
};

/// Two pipelines that agree by an argument `observability.rs` does not make (two
/// truncations onto nested grids are one): the spec and its two instructions.
const TWOSTEP: (&str, &str, &str) = (
    "tests/data/twostep.mma",
    "once.f32.e4m3.e4m3.f32",
    "twice.f32.e4m3.e4m3.f32",
);

/// A spec file like dp4.mma with F (the aligner) and e_zero given.
fn variant(dir: &Path, f: u32, e_zero: i32) -> String {
    let text = std::fs::read_to_string(root().join(DP4_SPEC))
        .unwrap()
        .replace(
            "t_fdpa(F = 20, L = 4, e_zero = -133,",
            &format!("t_fdpa(F = {f}, L = 4, e_zero = {e_zero},"),
        );
    let path = dir.join(format!("dp4_f{f}_z{}.mma", -e_zero));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn two_specs_are_separated_by_a_witness_or_proved_equal() {
    if !have("yosys", "tests/prove.rs") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let f19 = variant(dir.path(), 19, -133);
    let out = mmac(&["prove", DP4_SPEC, DP4_INSTR, &f19, DP4_INSTR]);
    let text = exits(&out, 1);
    check_witness(&text);
    // e_zero -133 -> -150: no product or c lies below 2^-133 by more than F, so the
    // zero terms never take part in a kept bit; proved by the solver (the search finds
    // nothing)
    let z = variant(dir.path(), 20, -150);
    let out = mmac(&["prove", DP4_SPEC, DP4_INSTR, &z, DP4_INSTR, "--json"]);
    let text = exits(&out, 0);
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(v["result"], "equivalent", "{v}");
    assert_eq!(v["method"], "solver", "{v}");
    assert!(
        ["abc", "bitwuzla"].contains(&v["solver"].as_str().unwrap()),
        "{v}"
    );
}

/// Bitwuzla alone (`--solver bitwuzla`, on the word-level SMT-LIB 2 miter) proves two
/// equal specs, and finds the one-bit-narrower aligner in the RTL example, its witness
/// replayed on both sides and confirmed by `mmac run`.
#[test]
fn bitwuzla_proves_and_separates_on_its_own() {
    if !have("yosys", "tests/prove.rs") || !support::have_bitwuzla("tests/prove.rs") {
        return;
    }
    let (spec, once, twice) = TWOSTEP;
    let out = mmac(&[
        "prove", spec, once, spec, twice, "--solver", "bitwuzla", "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(exits(&out, 0).trim()).unwrap();
    assert_eq!(v["result"], "equivalent", "{v}");
    assert_eq!(v["solver"], "bitwuzla", "{v}");
    let out = prove_dp4(&["--set", "F=19", "--solver", "bitwuzla"], DP4_RTL);
    let text = exits(&out, 1);
    assert!(
        text.contains("witness found by Bitwuzla and replayed on both sides"),
        "{text}"
    );
    check_witness(&text);
}

/// Without Bitwuzla, `--solver bitwuzla` is an error that says how to install it (exit
/// 2), and the default runs ABC alone.
#[test]
fn without_bitwuzla_the_default_runs_abc_alone() {
    if !have("yosys", "tests/prove.rs") {
        return;
    }
    let (spec, once, twice) = TWOSTEP;
    let run = |extra: &[&str]| {
        support::mmac_command()
            .env("MMAC_PYTHON", "/nonexistent/python3")
            .args(["prove", spec, once, spec, twice, "--json"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&["--solver", "bitwuzla"]);
    exits(&out, 2);
    let err = support::stderr(&out);
    assert!(
        err.contains("Bitwuzla is not available") && err.contains("pip install bitwuzla"),
        "{err}"
    );
    let out = run(&[]);
    let v: serde_json::Value = serde_json::from_str(exits(&out, 0).trim()).unwrap();
    assert_eq!(v["solver"], "abc", "{v}");
}

#[test]
fn usage_errors_exit_2_and_a_spent_budget_exits_3() {
    if !have("yosys", "tests/prove.rs") {
        return;
    }
    // different operands
    let out = mmac(&[
        "prove",
        "specs/hopper.mma",
        "mma.m16n8k16.f32.f16.f16.f32",
        "specs/hopper.mma",
        "mma.m16n8k16.f32.bf16.bf16.f32",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(support::stderr(&out).contains("a is f16 (left) vs bf16 (right)"));
    // --rtl without --top
    let out = mmac(&["prove", DP4_SPEC, "--instr", DP4_INSTR, "--rtl", DP4_RTL]);
    assert_eq!(out.status.code(), Some(2));
    // a design whose ports are not the spec's
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.v");
    std::fs::write(
        &bad,
        "module dp4(input [31:0] c, input [15:0] a, input [31:0] b, output [31:0] d);\n  assign d = c;\nendmodule\n",
    )
    .unwrap();
    let out = prove_dp4(&[], bad.to_str().unwrap());
    exits(&out, 2);
    assert!(
        support::stderr(&out).contains("port `a` is input [15:0]; the spec's is input [31:0]"),
        "{}",
        support::stderr(&out)
    );
    // a design Yosys cannot read
    std::fs::write(
        &bad,
        "module dp4(input [31:0] c;
",
    )
    .unwrap();
    let out = prove_dp4(&[], bad.to_str().unwrap());
    exits(&out, 2);
    assert!(support::stderr(&out).contains("yosys could not read the design"));
    // one second is not enough to build the miter: undecided, never a guess
    let out = prove_dp4(&["--timeout", "1", "--json"], DP4_RTL);
    exits(&out, 3);
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["result"], "unknown", "{v}");
}

/// Every unobservable neighbour (observability.rs) of a library instruction with inputs
/// of at most 8 bits, proved again by the solvers: a sample, or all with MMAC_PROVE_ALL
/// (`MMAC_PROVE_ALL=I/N`: the I-th of N shards, every N-th case from the I-th, to spread
/// the hours over machines). The sweep reports every case that is not proved.
#[test]
fn the_solver_proves_what_observability_proves() {
    if !have("yosys", "tests/prove.rs") {
        return;
    }
    let sweep = std::env::var("MMAC_PROVE_ALL").ok();
    let all = sweep.is_some();
    let (shard, shards) = match sweep.as_deref().and_then(|s| s.split_once('/')) {
        Some((i, n)) => {
            let parsed = (i.parse::<usize>(), n.parse::<usize>());
            let (Ok(i), Ok(n)) = parsed else {
                panic!("MMAC_PROVE_ALL={i}/{n}: write I/N, 1 <= I <= N")
            };
            assert!((1..=n).contains(&i), "MMAC_PROVE_ALL={i}/{n}: 1 <= I <= N");
            (i - 1, n)
        }
        None => (0, 1),
    };
    let mut cases = vec![];
    // (the arithmetic of each case and of its neighbour: a pair met before, in another
    // spec, is the same proof)
    let mut pairs = vec![];
    let mut neighbours = 0;
    for file in ["ada", "hopper", "blackwell", "rtx_blackwell"] {
        let loaded =
            mmac_runtime::specs::load_file(&root().join(format!("specs/{file}.mma"))).unwrap();
        for (_, original) in loaded.checked.distinct() {
            let inst = original.instruction();
            let ar = &inst.arithmetic;
            // (prove takes dense instructions: the Verilog back end lowers dense arithmetic)
            if original.sparsity().is_some() || [&ar.a, &ar.b].iter().any(|f| f.storage_bits() > 8)
            {
                continue;
            }
            for n in mutants::neighbours(original) {
                if n.same_interface(inst)
                    && observability::proven_equivalent(original, n.instruction()).is_some()
                {
                    neighbours += 1;
                    let pair = (ar.clone(), n.instruction().arithmetic.clone());
                    if !pairs.contains(&pair) {
                        pairs.push(pair);
                        cases.push((file, inst.name.clone(), ar.k, ar.c.name.clone(), n.label()));
                    }
                }
            }
        }
    }
    assert!(neighbours >= 200, "{neighbours} unobservable neighbours");
    if all {
        let mut groups: Vec<(&str, u32, String, usize)> = vec![];
        for c in &cases {
            match groups
                .iter_mut()
                .find(|g| (g.0, g.1, &g.2) == (c.0, c.2, &c.3))
            {
                Some(g) => g.3 += 1,
                None => groups.push((c.0, c.2, c.3.clone(), 1)),
            }
        }
        eprintln!(
            "{neighbours} neighbours, {} distinct proofs (file, k, accumulator, count): {groups:?}",
            cases.len()
        );
    }
    if all {
        cases = cases
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % shards == shard)
            .map(|(_, c)| c)
            .collect();
    } else {
        // the first with the shortest k and an f32 accumulator (about a minute; the f16
        // accumulators' e_zero lies among the values and takes the solver much longer,
        // docs/rtl.md)
        let k = cases.iter().map(|c| c.2).min().unwrap();
        let first = cases
            .iter()
            .find(|c| c.2 == k && c.3 == "f32")
            .cloned()
            .unwrap();
        cases = vec![first];
    }
    let mut failed = vec![];
    for (file, name, _, _, label) in &cases {
        let loaded =
            mmac_runtime::specs::load_file(&root().join(format!("specs/{file}.mma"))).unwrap();
        let original = loaded.checked.find(name).unwrap();
        let n = mutants::neighbours(original)
            .into_iter()
            .find(|n| n.label() == *label)
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let proof = prove::prove(
            &Side::Spec(original),
            &Side::Spec(n.checked.checked()),
            std::time::Duration::from_secs(900),
            prove::Solvers::All,
            dir.path(),
        )
        .unwrap();
        let line = format!(
            "{file} {name}: {label}: {:?} by {} in {:.1} s",
            proof.verdict,
            proof.solver.unwrap_or("none"),
            proof.seconds
        );
        if all {
            // the sweep takes hours: its progress as it goes (seen with --nocapture)
            eprintln!("{line}");
        }
        if proof.verdict != Verdict::Equivalent {
            failed.push(line);
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} not proved:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}

/// `diff --prove`: two pipelines that agree by an argument `observability.rs` does not
/// make (two truncations onto nested grids are one); the search finds nothing and the
/// solver proves it.
#[test]
fn diff_asks_the_solver_when_its_search_finds_nothing() {
    if !have("yosys", "tests/prove.rs") {
        return;
    }
    let (spec, once, twice) = TWOSTEP;
    let plain = mmac(&["diff", spec, once, spec, twice]);
    let text = stdout(&plain);
    assert!(text.starts_with("no difference found"), "{text}");
    assert!(!text.contains("proven"), "{text}");
    let out = mmac(&["diff", spec, once, spec, twice, "--prove"]);
    let text = exits(&out, 0);
    assert!(
        text.contains("proven by the solver (") && text.contains("they agree on every input"),
        "{text}"
    );
    let out = mmac(&["diff", spec, once, spec, twice, "--prove", "--json"]);
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["solver"]["result"], "equivalent", "{v}");
}
