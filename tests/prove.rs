//! `mmac prove` (runtime/src/prove/) on two specs: two that differ (a witness that
//! `mmac run` confirms) and two that agree, proofs by chained steps and cut at the
//! reference exponent, `diff --prove`, errors and the budget (exit 3), each solver on its
//! own. The RTL example's proofs are in tests/rtl.rs.
//!
//! Every neighbour that runtime/src/observability.rs proves unobservable for a library
//! instruction with inputs of at most 8 bits is proved again by the solvers: one in every
//! run; all 268 (166 distinct proofs) with MMAC_PROVE_ALL=1, on every core, Bitwuzla
//! first and ABC where Bitwuzla is undecided (all proved, docs/rtl.md; cut at the
//! reference exponent, seconds to about a minute and a half each).
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

/// Chained units proved one step at a time (runtime/src/prove/steps.rs): one step proof
/// where c and d share a format, two where the first step reads another; the whole miter
/// agrees; a step that differs hands over to the whole miter, whose witness (over all
/// four products) is replayed, and the text says how a proof was split.
#[test]
fn chains_are_proved_one_step_at_a_time() {
    if !have("yosys", "tests/prove.rs") {
        return;
    }
    const CHAINED: &str = "tests/data/chained.mma";
    let json = |x: &str, y: &str| {
        let out = mmac(&["prove", CHAINED, x, CHAINED, y, "--json"]);
        let v: serde_json::Value = serde_json::from_str(exits(&out, 0).trim()).unwrap();
        assert_eq!(v["result"], "equivalent", "{v}");
        v["by_steps"].clone()
    };
    let (z20, z21, f12) = (
        "z20.f16.e4m3.e4m3.f16",
        "z21.f16.e4m3.e4m3.f16",
        "f12.f16.e4m3.e4m3.f16",
    );
    let one = json(z20, z21);
    assert_eq!(one, serde_json::json!({"products": 2, "proofs": 1}));
    let two = json("z160.f16.e4m3.e4m3.f32", "z161.f16.e4m3.e4m3.f32");
    assert_eq!(two, serde_json::json!({"products": 2, "proofs": 2}));
    let out = mmac(&["prove", CHAINED, z20, CHAINED, z21]);
    let text = exits(&out, 0);
    assert!(
        text.contains("one chained step of 2 products at a time (1 step proof)"),
        "{text}"
    );
    let loaded = mmac_runtime::specs::load_file(&root().join(CHAINED)).unwrap();
    let side = |name| Side::Spec(loaded.checked.find(name).unwrap());
    type Solve = fn(
        &Side,
        &Side,
        std::time::Duration,
        prove::Solvers,
        &Path,
    ) -> Result<prove::Proof, prove::ProveError>;
    let run = |solve: Solve, x, y| {
        let dir = tempfile::tempdir().unwrap();
        let budget = std::time::Duration::from_secs(600);
        solve(&side(x), &side(y), budget, prove::Solvers::All, dir.path()).unwrap()
    };
    let whole = run(prove::solve_whole, z20, z21);
    assert_eq!((whole.verdict, whole.by_steps), (Verdict::Equivalent, None));
    // (solve: no search first, so the witness is the solvers')
    let proof = run(prove::solve, z20, f12);
    let Verdict::Differ(w) = &proof.verdict else {
        panic!("{:?}", proof.verdict)
    };
    assert_eq!((w.a.len(), w.b.len(), proof.by_steps), (4, 4, None));
    assert_ne!(w.left_d, w.right_d);
}

/// Single-step units proved cut at the reference exponent (runtime/src/prove/cut.rs): a
/// zero exponent moved where no result shows it is proved by the two cut miters; one
/// moved where results show it, only where the references differ, gets the apart miter's
/// witness, replayed; an alignment one bit narrower differs with equal references, so the
/// shared miter fails and the whole miter's witness is reported.
#[test]
fn single_steps_are_proved_cut_at_the_reference_exponent() {
    if !have("yosys", "tests/prove.rs") {
        return;
    }
    const CUT: &str = "tests/data/cut.mma";
    let name = |x: &str| format!("{x}.f16.e4m3.e4m3.f16");
    let out = mmac(&["prove", CUT, &name("z20"), CUT, &name("z21"), "--json"]);
    let v: serde_json::Value = serde_json::from_str(exits(&out, 0).trim()).unwrap();
    assert_eq!(v["result"], "equivalent", "{v}");
    assert_eq!(v["cut"], "reference exponent", "{v}");
    assert!(v.get("by_steps").is_none(), "{v}");
    let out = mmac(&["prove", CUT, &name("z20"), CUT, &name("z21")]);
    assert!(
        exits(&out, 0).contains(", cut at the reference exponent"),
        "{}",
        stdout(&out)
    );
    let loaded = mmac_runtime::specs::load_file(&root().join(CUT)).unwrap();
    // (solve: no search first, so a witness is the solvers')
    let solve = |x: &str, y: &str| {
        let side = |n: &str| Side::Spec(loaded.checked.find(&name(n)).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let budget = std::time::Duration::from_secs(600);
        prove::solve(&side(x), &side(y), budget, prove::Solvers::All, dir.path()).unwrap()
    };
    let differ = |proof: &prove::Proof| match &proof.verdict {
        Verdict::Differ(w) => {
            assert_eq!((w.a.len(), w.b.len()), (4, 4));
            assert_ne!(w.left_d, w.right_d);
        }
        other => panic!("{other:?}"),
    };
    let apart = solve("z10", "z11");
    differ(&apart);
    assert!(apart.cut, "{}", apart.decided_by());
    let narrower = solve("z20", "f12");
    differ(&narrower);
    assert!(!narrower.cut, "{}", narrower.decided_by());
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
    // a Python that runs but fails (no answer, exit 1): the same error, not "undecided"
    let out = support::mmac_command()
        .env("MMAC_PYTHON", "false")
        .args(["prove", spec, once, spec, twice, "--solver", "bitwuzla"])
        .output()
        .unwrap();
    exits(&out, 2);
    let err = support::stderr(&out);
    assert!(
        err.contains("Bitwuzla is not available: exit status: 1, with no output"),
        "{err}"
    );
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
    // --rtl naming a folder, --keep naming a file: each said as it is
    let out = mmac(&[
        "prove", DP4_SPEC, "--instr", DP4_INSTR, "--rtl", "specs", "--top", "dp4",
    ]);
    exits(&out, 2);
    assert!(support::stderr(&out).contains("--rtl specs: a folder, not a Verilog file"));
    let out = prove_dp4(&["--keep", DP4_SPEC], DP4_RTL);
    exits(&out, 2);
    assert!(
        support::stderr(&out).contains("cannot make the folder the proof's files go in"),
        "{}",
        support::stderr(&out)
    );
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

/// One proof of the sweep: a library file, an instruction in it, its k and accumulator, and
/// the label of the neighbour.
type Case = (&'static str, String, u32, String, String);

/// Proves `case`'s instruction equal to its neighbour with `solvers` within `budget`
/// seconds: the line that reports it, and the verdict.
fn prove_case(case: &Case, solvers: prove::Solvers, budget: u64) -> (String, Verdict) {
    let (file, name, _, _, label) = case;
    let loaded = mmac_runtime::specs::load_file(&root().join(format!("specs/{file}.mma"))).unwrap();
    let original = loaded.checked.find(name).unwrap();
    let n = mutants::neighbours(original)
        .into_iter()
        .find(|n| n.label() == *label)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let proof = prove::prove(
        &Side::Spec(original),
        &Side::Spec(n.checked.checked()),
        std::time::Duration::from_secs(budget),
        solvers,
        dir.path(),
    )
    .unwrap();
    let line = format!(
        "{file} {name}: {label}: {:?} by {} in {:.1} s",
        proof.verdict,
        proof.decided_by(),
        proof.seconds
    );
    (line, proof.verdict)
}

/// The whole sweep, on every core: each case first by Bitwuzla alone within 300 s (cut at
/// the reference exponent, most proofs take it seconds to a minute and a half), then,
/// where Bitwuzla is undecided, by ABC alone within 1200 s (or MMAC_PROVE_BUDGET seconds).
/// A free core takes a waiting ABC proof before a new Bitwuzla one, so that the long
/// proofs start early. Prints each case as it goes (seen with --nocapture); returns the
/// lines of those not proved.
fn sweep(cases: &[Case]) -> Vec<String> {
    use std::sync::Mutex;
    struct Queue {
        next: usize,
        first_running: usize,
        for_second: Vec<usize>,
    }
    let queue = Mutex::new(Queue {
        next: 0,
        first_running: 0,
        for_second: vec![],
    });
    let failed = Mutex::new(vec![]);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let second_budget: u64 = std::env::var("MMAC_PROVE_BUDGET")
        .map_or(1200, |s| s.parse().expect("MMAC_PROVE_BUDGET: seconds"));
    let (first, second) = (prove::Solvers::Bitwuzla, prove::Solvers::Abc);
    let work = || {
        loop {
            let job = {
                let mut q = queue.lock().unwrap();
                if let Some(i) = q.for_second.pop() {
                    Some((i, second))
                } else if q.next < cases.len() {
                    q.next += 1;
                    q.first_running += 1;
                    Some((q.next - 1, first))
                } else if q.first_running == 0 {
                    return;
                } else {
                    None
                }
            };
            // (nothing to start, but a running first proof may still hand one on)
            let Some((i, solvers)) = job else {
                std::thread::sleep(std::time::Duration::from_secs(1));
                continue;
            };
            let is_first = solvers == first;
            let budget = if is_first { 300 } else { second_budget };
            let (line, verdict) = prove_case(&cases[i], solvers, budget);
            eprintln!("{line}");
            let mut q = queue.lock().unwrap();
            match verdict {
                Verdict::Equivalent => {}
                Verdict::Unknown(_) if is_first => q.for_second.push(i),
                _ => failed.lock().unwrap().push(line),
            }
            if is_first {
                q.first_running -= 1;
            }
        }
    };
    std::thread::scope(|s| {
        for _ in 0..cores.min(cases.len()) {
            s.spawn(work);
        }
    });
    failed.into_inner().unwrap()
}

/// Every unobservable neighbour (observability.rs) of a library instruction with inputs
/// of at most 8 bits, proved again by the solvers: a sample, or all with MMAC_PROVE_ALL=1
/// (`MMAC_PROVE_ALL=I/N`: the I-th of N shards, every N-th case from the I-th, to spread
/// the hours over machines; `I-J/N`: shards I to J; `MMAC_PROVE_MATCH=ada,hopper`: only
/// the instructions or neighbours named). The sweep reports every case that is not proved.
#[test]
fn the_solver_proves_what_observability_proves() {
    if !have("yosys", "tests/prove.rs") {
        return;
    }
    let sweep_shards = std::env::var("MMAC_PROVE_ALL").ok().map(|s| shards(&s));
    let all = sweep_shards.is_some();
    let mut cases: Vec<Case> = vec![];
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
    let failed = if let Some((shards, n)) = sweep_shards {
        // (MMAC_PROVE_MATCH: only the cases whose `file instruction: neighbour` contains
        // one of these, comma-separated)
        let matching = std::env::var("MMAC_PROVE_MATCH").unwrap_or_default();
        let wanted = |c: &Case| {
            let line = format!("{} {}: {}", c.0, c.1, c.4);
            matching.is_empty() || matching.split(',').any(|m| line.contains(m))
        };
        cases = cases
            .into_iter()
            .enumerate()
            .filter(|(i, c)| shards.contains(&(i % n)) && wanted(c))
            .map(|(_, c)| c)
            .collect();
        sweep(&cases)
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
        let (line, verdict) = prove_case(&first, prove::Solvers::All, 900);
        cases = vec![first];
        if verdict == Verdict::Equivalent {
            vec![]
        } else {
            vec![line]
        }
    };
    assert!(
        failed.is_empty(),
        "{} of {} not proved:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}

/// `MMAC_PROVE_ALL`'s value: `1` (all), `I/N` or `I-J/N`, as the shards (from 0) and N.
fn shards(value: &str) -> (std::ops::RangeInclusive<usize>, usize) {
    if value == "1" {
        return (0..=0, 1);
    }
    let parsed = value.split_once('/').and_then(|(range, n)| {
        let (i, j) = range.split_once('-').unwrap_or((range, range));
        Some((
            i.parse::<usize>().ok()?,
            j.parse::<usize>().ok()?,
            n.parse::<usize>().ok()?,
        ))
    });
    match parsed {
        Some((i, j, n)) if 1 <= i && i <= j && j <= n => (i - 1..=j - 1, n),
        _ => panic!("MMAC_PROVE_ALL={value}: write 1, I/N or I-J/N with 1 <= I <= J <= N"),
    }
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

/// SIGTERM (or Ctrl-C's SIGINT) during a proof stops the solvers it runs and removes its
/// scratch folder before the process exits 128 + the signal.
#[test]
fn an_interrupted_proof_stops_its_tools_and_leaves_no_files() {
    if !have("yosys", "tests/prove.rs") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let child = support::mmac_command()
        .env("TMPDIR", tmp.path())
        .args([
            "prove",
            DP4_SPEC,
            "--instr",
            DP4_INSTR,
            "--rtl",
            DP4_RTL,
            "--top",
            "dp4",
            "--timeout",
            "300",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // the tools the proof runs: the children of the process, once there are any
    let children = || -> Vec<u32> {
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    let start = std::time::Instant::now();
    let mut tools = children();
    while tools.is_empty() && start.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        tools = children();
    }
    assert!(!tools.is_empty(), "the proof ran no tool within 60 s");
    // its scratch folder (tempfile's `.tmp` prefix; a tool may make others of its own)
    let scratch: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(".tmp"))
        .collect();
    assert_eq!(scratch.len(), 1, "{scratch:?}");
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(128 + 15),
        "{}",
        support::stderr(&out)
    );
    assert!(support::stderr(&out).contains("interrupted (signal 15)"));
    for tool in tools {
        // gone, or a zombie nobody waits for (never running)
        let state = std::fs::read_to_string(format!("/proc/{tool}/stat")).unwrap_or_default();
        let running = state
            .split(") ")
            .nth(1)
            .is_some_and(|s| !s.starts_with('Z'));
        assert!(!running, "tool {tool} still runs: {state}");
    }
    assert!(!scratch[0].exists(), "{} left", scratch[0].display());
}

/// A design whose top module has an empty body drives nothing: d reads as 0 (as any
/// undriven bit does), so it differs from the spec, with a witness; Yosys would otherwise
/// take the empty module for a black box and stop.
#[test]
fn an_empty_design_differs_with_a_witness() {
    if !have("yosys", "tests/prove.rs") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.v");
    std::fs::write(
        &empty,
        "module dp4(input wire [31:0] c, input wire [31:0] a, input wire [31:0] b, output wire [31:0] d);\nendmodule\n",
    )
    .unwrap();
    let out = prove_dp4(&["--solver", "abc"], empty.to_str().unwrap());
    let text = exits(&out, 1);
    assert!(text.contains("right d = 32'h00000000"), "{text}");
}
