//! Equivalence proofs (`mmac prove`): two circuits, each a spec instruction lowered by the
//! Verilog back end (`mmac_compiler::rtl`) or a user's RTL, joined in a miter that fires
//! when their d differ (any NaN matching any NaN where a spec side leaves the payload free),
//! built by Yosys (reading, flattening; an AIG and a word-level SMT-LIB 2 form) and decided
//! by ABC and Bitwuzla side by side ([`solvers`]). Proved, a witness, or unknown when the
//! budget runs out — never a guess: every witness is replayed through the interpreter for
//! a spec side and through Yosys (`sat -set ... -show d`) for an RTL side, and reported
//! only when the replayed results differ.

mod cut;
mod solvers;
mod steps;

pub use solvers::{Solvers, catch_interrupts};

use mmac_compiler::Checked;
use mmac_compiler::engine::Operands;
use mmac_compiler::format::Format;
use mmac_compiler::interp;
use mmac_compiler::rtl::{self, Circuit};
use num_bigint::BigUint;
use num_traits::{ToPrimitive, Zero};
use solvers::{Answer, run_until, tool};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// One side of a proof.
pub enum Side<'a> {
    /// A spec instruction.
    Spec(Checked<'a>),
    /// A design: its files (read with `read_verilog -sv -noblackbox`), top module and
    /// parameters.
    Rtl {
        files: Vec<PathBuf>,
        top: String,
        parameters: Vec<(String, String)>,
    },
}

/// The operands of a witness, and what each side gives on them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Witness {
    pub c: u64,
    pub a: Vec<u64>,
    pub b: Vec<u64>,
    pub sa: Vec<u64>,
    pub sb: Vec<u64>,
    pub left_d: u64,
    pub right_d: u64,
}

/// What a proof decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Equal d on every input.
    Equivalent,
    /// A replayed input on which they differ.
    Differ(Witness),
    /// Undecided within the budget, with why.
    Unknown(String),
}

/// Why a proof could not be set up (a usage or tool error, not an undecided proof).
#[derive(Debug, thiserror::Error)]
pub enum ProveError {
    #[error("{0}")]
    Interface(String),
    #[error("{tool} is not installed (Debian, Ubuntu: apt-get install yosys; or set {var})")]
    Missing { tool: String, var: &'static str },
    #[error(
        "Bitwuzla is not available: {why} (pip install bitwuzla into a Python 3.9+ and name it with MMAC_PYTHON, now `{python}`)"
    )]
    NoBitwuzla { python: String, why: String },
    #[error("yosys could not read the design:\n{0}")]
    Yosys(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A signal (SIGINT, SIGTERM, SIGHUP) stopped the proof ([`catch_interrupts`]).
    #[error("interrupted by signal {0}: the solvers were stopped")]
    Interrupted(i32),
}

/// A finished proof: the verdict, what decided it and the seconds it took.
pub struct Proof {
    pub verdict: Verdict,
    /// `search` (a witness from `diff`'s structured and random search, for two specs),
    /// `solver` (a solver on the miter) or `budget` (undecided).
    pub method: &'static str,
    /// The solver that decided (`abc` or `bitwuzla`), when one did.
    pub solver: Option<&'static str>,
    /// Proved one chained step at a time ([`steps`]): the products per step, and how many
    /// step proofs (one per format of a step's `c`).
    pub by_steps: Option<(u32, usize)>,
    /// Proved (or found to differ) cut at the reference exponent ([`cut`]).
    pub cut: bool,
    pub seconds: f64,
}

impl Proof {
    /// The solver that decided, as output names it: `ABC`, `Bitwuzla`, or `the solver`
    /// when none did; for a proof by steps or cut, how it was split (`ABC, one chained
    /// step of 16 products at a time (2 step proofs)`, `Bitwuzla, cut at the reference
    /// exponent`).
    pub fn decided_by(&self) -> String {
        let mut text = self
            .solver
            .map_or("the solver", solvers::solver_name)
            .to_string();
        if let Some((products, proofs)) = self.by_steps {
            text.push_str(&format!(
                ", one chained step of {products} products at a time ({proofs} step proof{})",
                if proofs == 1 { "" } else { "s" }
            ));
        }
        if self.cut {
            text.push_str(", cut at the reference exponent");
        }
        text
    }

    /// `by_steps` as JSON: `{"products": L, "proofs": N}`, or null.
    pub fn by_steps_json(&self) -> serde_json::Value {
        match self.by_steps {
            None => serde_json::Value::Null,
            Some((products, proofs)) => serde_json::json!({"products": products, "proofs": proofs}),
        }
    }
}

/// Do the sides' results compare with any NaN matching any NaN? Where a spec side leaves
/// the payload free (`nan ieee`), as `mmac diff` compares.
fn nan_free(left: &Side, right: &Side) -> bool {
    [left, right].iter().any(|s| match s {
        Side::Spec(x) => crate::witness::nan_any(x.instruction()),
        Side::Rtl { .. } => false,
    })
}

/// For two specs, `diff`'s search first: its structured corner cases find most
/// differences at once, where a solver may take long to build a rare input.
fn search_first(left: &Side, right: &Side) -> Option<Witness> {
    let (Side::Spec(x), Side::Spec(y)) = (left, right) else {
        return None;
    };
    let options = crate::witness::SearchOptions {
        random_draws: 100_000,
        ..Default::default()
    };
    let found = crate::witness::find(*x, *y, &options).ok()?;
    found.into_iter().next().map(|w| Witness {
        c: w.input.c,
        a: w.input.a,
        b: w.input.b,
        sa: w.input.sa,
        sb: w.input.sb,
        left_d: w.left,
        right_d: w.right,
    })
}

/// The ports every side has: the left spec's, or for RTL against a spec, the spec's.
fn interface<'a>(left: &Side<'a>, right: &Side<'a>) -> Result<Checked<'a>, ProveError> {
    for side in [left, right] {
        if let Side::Spec(x) = side {
            mmac_compiler::rtl::lowerable(*x).map_err(ProveError::Interface)?;
        }
    }
    match (left, right) {
        (Side::Spec(x), Side::Spec(y)) => {
            if let Some(why) = crate::diff::interface_difference(x.instruction(), y.instruction()) {
                return Err(ProveError::Interface(format!(
                    "the two instructions do not take the same operands: {why}"
                )));
            }
            Ok(*x)
        }
        (Side::Spec(x), Side::Rtl { .. }) | (Side::Rtl { .. }, Side::Spec(x)) => Ok(*x),
        (Side::Rtl { .. }, Side::Rtl { .. }) => Err(ProveError::Interface(
            "one side must be a spec instruction (its formats define the ports)".into(),
        )),
    }
}

/// The Yosys commands that read a side as module `name` (a spec cut open at its reference
/// exponent with `cut`, [`cut`]).
fn read_side(side: &Side, name: &str, dir: &Path, cut: bool) -> Result<String, ProveError> {
    Ok(match side {
        Side::Spec(inst) => {
            let text = match cut {
                false => rtl::verilog(*inst, name),
                true => rtl::verilog_cut_at_reference(*inst, name).ok_or_else(|| {
                    ProveError::Interface(format!("{} has no reference to cut at", inst.name()))
                })?,
            };
            std::fs::write(dir.join(format!("{name}.v")), text)?;
            format!("read_verilog {name}.v\n")
        }
        Side::Rtl {
            files,
            top,
            parameters,
        } => {
            let mut s = String::new();
            for f in files {
                // Yosys runs in the work folder: the user's paths made absolute; a module
                // with an empty body is a module whose d is undriven (0), not a black box
                let f = std::path::absolute(f)?;
                s.push_str(&format!("read_verilog -sv -noblackbox {}\n", quoted(&f)));
            }
            for (k, v) in parameters {
                s.push_str(&format!("chparam -set {k} {v} {top}\n"));
            }
            s.push_str(&format!(
                "hierarchy -check -top {top}\nproc\nflatten\nrename {top} {name}\n"
            ));
            s
        }
    })
}

fn quoted(p: &Path) -> String {
    format!("\"{}\"", p.display())
}

/// A module that fires when the two d differ (any NaN matching any NaN when `nan_free`).
fn comparator(d: &Format, nan_free: bool) -> String {
    let bits = d.storage_bits();
    let mut c = Circuit::new(16);
    let x = c.input("left_d", bits);
    let y = c.input("right_d", bits);
    let same = c.eq(x, y);
    let same = if nan_free {
        let xn = rtl::number::is_nan(&mut c, d, x);
        let yn = rtl::number::is_nan(&mut c, d, y);
        let both = c.and(xn, yn);
        c.or(same, both)
    } else {
        same
    };
    let differ = c.not(same);
    c.output("differ", differ);
    c.verilog("mmac_compare", "fires when the two results differ")
}

/// The miter: both sides on the same inputs, and the comparator; cut at the reference
/// exponent as `join` says ([`cut`]).
fn miter(ports: &[(&str, u32)], join: Join) -> String {
    let mut inputs: Vec<(&str, u32)> = ports.iter().filter(|(p, _)| *p != "d").copied().collect();
    let d = ports.iter().find(|(p, _)| *p == "d").map_or(1, |x| x.1);
    let mut connect: Vec<String> = inputs.iter().map(|(p, _)| format!(".{p}({p})")).collect();
    let (mut fires, mut wires) = ("differ".to_string(), String::new());
    match join {
        Join::Whole => {}
        Join::SharedReference(bits) => {
            inputs.push(("r_in", bits));
            connect.push(".r_in(r_in), .cut(1'b1)".into());
        }
        Join::ApartReferences(bits) => {
            connect.push(format!(".r_in({bits}'b0), .cut(1'b0)"));
            wires = format!("  wire [{}:0] left_r, right_r;\n", bits - 1);
            fires.push_str(" & (left_r != right_r)");
        }
    }
    let r = |side: &str| match join {
        Join::ApartReferences(_) => format!(", .r({side}_r)"),
        _ => String::new(),
    };
    let mut s = String::from("module mmac_miter (\n");
    for (p, w) in &inputs {
        s.push_str(&format!("    input wire [{}:0] {p},\n", w - 1));
    }
    s.push_str("    output wire trigger\n);\n");
    let connect = connect.join(", ");
    s.push_str(&format!(
        "  wire [{0}:0] left_d, right_d;\n  wire differ;\n{wires}  \
         mmac_left left ({connect}, .d(left_d){1});\n  \
         mmac_right right ({connect}, .d(right_d){2});\n  \
         mmac_compare compare (.left_d(left_d), .right_d(right_d), .differ(differ));\n  \
         assign trigger = {fires};\nendmodule\n",
        d - 1,
        r("left"),
        r("right"),
    ));
    s
}

/// Prove `left` and `right` equal on every input, or find where they differ, within
/// `timeout`, with `solvers` on the miter. `dir` holds the work files (the Verilog of each
/// side, the miter, its AIG and SMT-LIB 2 forms, the counterexample).
pub fn prove(
    left: &Side,
    right: &Side,
    timeout: Duration,
    solvers: Solvers,
    dir: &Path,
) -> Result<Proof, ProveError> {
    let start = Instant::now();
    let deadline = start + timeout;
    // (operands that differ: no witness, and `solve` says why)
    if let Some(w) = search_first(left, right) {
        return Ok(Proof {
            verdict: Verdict::Differ(w),
            method: "search",
            solver: None,
            by_steps: None,
            cut: false,
            seconds: start.elapsed().as_secs_f64(),
        });
    }
    within(start, deadline, |left_time| {
        solve(left, right, left_time, solvers, dir)
    })
}

/// `f` given the time left before `deadline`, its proof's seconds counted from `start`.
fn within(
    start: Instant,
    deadline: Instant,
    f: impl FnOnce(Duration) -> Result<Proof, ProveError>,
) -> Result<Proof, ProveError> {
    let mut proof = f(deadline.saturating_duration_since(Instant::now()))?;
    proof.seconds = start.elapsed().as_secs_f64();
    Ok(proof)
}

/// The Yosys commands that flatten the miter from the sides read before them.
const FLATTEN_MITER: &str = "read_verilog compare.v\nread_verilog miter.v\n\
    hierarchy -check -top mmac_miter\nproc\nflatten\nopt -mux_undef\nsetundef -zero\n\
    opt -fast\nwreduce\nopt_clean\n";

/// The flat miter as SMT-LIB 2 for Bitwuzla (`miter.smt2`, bit-vector operations as
/// they are).
const WRITE_SMT2: &str = "write_smt2 -stbv miter.smt2\n";

/// The flat miter bit-blasted to an AIG for ABC (`miter.aig`, its inputs in `miter.map`).
const WRITE_AIG: &str =
    "techmap\nopt_expr\nopt_clean\naigmap\nopt_clean\nwrite_aiger -map miter.map miter.aig\n";

/// [`prove`] without the search: the solvers alone (for `mmac diff --prove`, whose
/// search has run). Two chains of the same step are first proved one step at a time
/// ([`steps`]); where a step differs or is undecided, the whole miter is tried.
pub fn solve(
    left: &Side,
    right: &Side,
    timeout: Duration,
    solvers: Solvers,
    dir: &Path,
) -> Result<Proof, ProveError> {
    // (operands that differ: no step pairs, and the whole miter's `interface` says why)
    let by_steps = |deadline| match two_specs(left, right).and_then(|(x, y)| steps::pairs(x, y)) {
        // proved; or undecided with no budget left for the whole miter
        Some(pairs) => solve_steps(&pairs, solvers, deadline, dir),
        None => Ok(None),
    };
    split_first(timeout, by_steps, |left_time| {
        solve_pair(left, right, left_time, solvers, dir)
    })
}

/// One pair of sides: for two specs that open the cut at the reference exponent, the two
/// cut miters ([`cut`]) first; where those do not decide, the whole miter.
fn solve_pair(
    left: &Side,
    right: &Side,
    timeout: Duration,
    solvers: Solvers,
    dir: &Path,
) -> Result<Proof, ProveError> {
    let cut = two_specs(left, right).and_then(|(x, y)| Some((x, y, cut::reference_bits(x, y)?)));
    let by_cut = |deadline| match cut {
        Some((x, y, bits)) => cut::solve_cut(x, y, bits, solvers, deadline, dir),
        None => Ok(None),
    };
    split_first(timeout, by_cut, |left_time| {
        solve_whole(left, right, left_time, solvers, dir)
    })
}

/// The two instructions, where both sides are specs.
fn two_specs<'a>(left: &Side<'a>, right: &Side<'a>) -> Option<(Checked<'a>, Checked<'a>)> {
    match (left, right) {
        (Side::Spec(x), Side::Spec(y)) => Some((*x, *y)),
        _ => None,
    }
}

/// A split proof first (`split`, given the deadline: its proof, or None where it does
/// not decide with budget left), then `rest` within what is left of `timeout`; the
/// seconds counted from the start.
fn split_first(
    timeout: Duration,
    split: impl FnOnce(Instant) -> Result<Option<Proof>, ProveError>,
    rest: impl FnOnce(Duration) -> Result<Proof, ProveError>,
) -> Result<Proof, ProveError> {
    let start = Instant::now();
    let deadline = start + timeout;
    if let Some(mut proof) = split(deadline)? {
        proof.seconds = start.elapsed().as_secs_f64();
        return Ok(proof);
    }
    within(start, deadline, rest)
}

/// Each step pair proved equal (each in a folder of its own under `dir`): the proof, or
/// an undecided step's verdict when the budget is spent, or None when a step differs or
/// is undecided within the budget. A step's witness is not one of the whole.
fn solve_steps(
    pairs: &[steps::StepPair],
    solvers: Solvers,
    deadline: Instant,
    dir: &Path,
) -> Result<Option<Proof>, ProveError> {
    let (mut decided_by, mut every_cut) = (None, true);
    for (i, pair) in pairs.iter().enumerate() {
        let sub = dir.join(format!("step{i}"));
        std::fs::create_dir_all(&sub)?;
        let proof = solve_pair(
            &Side::Spec(pair.left.checked()),
            &Side::Spec(pair.right.checked()),
            deadline.saturating_duration_since(Instant::now()),
            solvers,
            &sub,
        )?;
        match proof.verdict {
            Verdict::Equivalent => {}
            Verdict::Unknown(why) if Instant::now() >= deadline => {
                return Ok(Some(Proof {
                    verdict: Verdict::Unknown(format!(
                        "step proof {} of {} (one chained step of {} products): {why}",
                        i + 1,
                        pairs.len(),
                        pair.products
                    )),
                    by_steps: None,
                    ..proof
                }));
            }
            _ => return Ok(None),
        }
        // (the solver of the longest step proof)
        if decided_by.is_none_or(|(_, s)| proof.seconds > s) {
            decided_by = Some((proof.solver, proof.seconds));
        }
        every_cut &= proof.cut;
    }
    Ok(Some(Proof {
        verdict: Verdict::Equivalent,
        method: "solver",
        solver: decided_by.and_then(|(s, _)| s),
        by_steps: Some((pairs[0].products, pairs.len())),
        cut: every_cut,
        seconds: 0.0,
    }))
}

/// [`solve`] on the whole miter of the two sides.
pub fn solve_whole(
    left: &Side,
    right: &Side,
    timeout: Duration,
    solvers: Solvers,
    dir: &Path,
) -> Result<Proof, ProveError> {
    solve_join(left, right, timeout, solvers, dir, Join::Whole)
}

/// How a miter joins its two sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Join {
    /// Each side whole, on the same operands: fires where their d differ.
    Whole,
    /// Two specs cut open at the reference exponent (of these bits), fed the same `r_in`
    /// ([`cut`]).
    SharedReference(u32),
    /// Two specs whole (the cut clear): fires where their d differ and their references
    /// differ too ([`cut`]).
    ApartReferences(u32),
}

/// The miter of `join` decided within `timeout`, in `dir`. A witness of a whole or
/// apart miter is replayed; one of a shared miter (not an input of the instructions)
/// is reported as undecided.
fn solve_join(
    left: &Side,
    right: &Side,
    timeout: Duration,
    solvers: Solvers,
    dir: &Path,
    join: Join,
) -> Result<Proof, ProveError> {
    let start = Instant::now();
    let deadline = start + timeout;
    let spec = interface(left, right)?;
    let ports = rtl::ports(spec);
    for (side, name) in [(left, "mmac_left"), (right, "mmac_right")] {
        if let Side::Rtl { top, .. } = side {
            check_ports(side, name, top, &ports, dir, deadline)?;
        }
    }
    std::fs::write(
        dir.join("compare.v"),
        comparator(&spec.arithmetic().d, nan_free(left, right)),
    )?;
    std::fs::write(dir.join("miter.v"), miter(&ports, join))?;
    // a design's `hierarchy -top` drops every module read before it: designs first
    let mut sides = [(left, "mmac_left"), (right, "mmac_right")];
    sides.sort_by_key(|(s, _)| matches!(s, Side::Spec(_)));
    let mut script = String::new();
    for (side, name) in sides {
        script.push_str(&read_side(side, name, dir, join != Join::Whole)?);
    }
    // Yosys runs in `dir`: the files it writes are named relative to it
    script.push_str(FLATTEN_MITER);
    if solvers.bitwuzla() {
        script.push_str(WRITE_SMT2);
    }
    script.push_str(WRITE_AIG);
    let built = yosys(dir, "miter.ys", &script, deadline)?;
    let seconds = || start.elapsed().as_secs_f64();
    match built {
        None => {
            return Ok(Proof {
                verdict: Verdict::Unknown("the budget ran out while Yosys built the miter".into()),
                method: "budget",
                solver: None,
                by_steps: None,
                cut: false,
                seconds: seconds(),
            });
        }
        Some((false, log)) => return Err(ProveError::Yosys(errors_of(&log))),
        Some((true, _)) => {}
    }
    if solvers.bitwuzla() {
        solvers::write_query(dir)?;
    }
    let mut inputs: Vec<&str> = ports.iter().map(|p| p.0).filter(|p| *p != "d").collect();
    if let Join::SharedReference(_) = join {
        inputs.push("r_in");
    }
    let (answer, solver) = solvers::decide(solvers, dir, &inputs, timeout, deadline)?;
    let verdict = match answer {
        Answer::Undecided(why) => Verdict::Unknown(why),
        Answer::Unsat => Verdict::Equivalent,
        Answer::Sat(_) if matches!(join, Join::SharedReference(_)) => Verdict::Unknown(
            "the two datapaths differ when given the same reference exponent".into(),
        ),
        Answer::Sat(values) => replay(left, right, spec, &values, dir, deadline)?,
    };
    let (method, solver) = match verdict {
        Verdict::Unknown(_) => ("budget", None),
        _ => ("solver", solver),
    };
    Ok(Proof {
        verdict,
        method,
        solver,
        by_steps: None,
        cut: false,
        seconds: seconds(),
    })
}

/// The design's top module must have the spec's ports, with their directions and widths
/// (Yosys would otherwise cut or extend a port silently).
fn check_ports(
    side: &Side,
    name: &str,
    top: &str,
    ports: &[(&str, u32)],
    dir: &Path,
    deadline: Instant,
) -> Result<(), ProveError> {
    let script = format!(
        "{}write_json {name}.ports.json\n",
        read_side(side, name, dir, false)?
    );
    match yosys(dir, &format!("{name}.ports.ys"), &script, deadline)? {
        // out of time: the miter's construction reports it
        None => return Ok(()),
        Some((false, log)) => return Err(ProveError::Yosys(errors_of(&log))),
        Some((true, _)) => {}
    }
    let text = std::fs::read_to_string(dir.join(format!("{name}.ports.json")))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| ProveError::Yosys(format!("its JSON netlist: {e}")))?;
    let have = &v["modules"][name]["ports"];
    let mut problems = vec![];
    for (port, width) in ports {
        let want_dir = if *port == "d" { "output" } else { "input" };
        match have.get(port) {
            None => problems.push(format!("no port `{port}` ({want_dir}, {width} bits)")),
            Some(p) => {
                let bits = p["bits"].as_array().map_or(0, |b| b.len());
                let direction = p["direction"].as_str().unwrap_or("");
                if direction != want_dir || bits != *width as usize {
                    problems.push(format!(
                        "port `{port}` is {direction} [{}:0]; the spec's is {want_dir} [{}:0]",
                        bits.saturating_sub(1),
                        width - 1
                    ));
                }
            }
        }
    }
    if let Some(extra) = have.as_object().and_then(|o| {
        o.keys()
            .find(|k| !ports.iter().any(|(p, _)| p == k))
            .cloned()
    }) {
        problems.push(format!("port `{extra}` is not one of the spec's"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ProveError::Interface(format!(
            "module `{top}` does not have the spec's ports ({}): {}",
            ports
                .iter()
                .map(|(p, w)| format!("{p} [{}:0]", w - 1))
                .collect::<Vec<_>>()
                .join(", "),
            problems.join("; ")
        )))
    }
}

/// Run a Yosys script in `dir` (written there as `file`, the files it names relative to
/// `dir`) until `deadline`: whether it succeeded and its log, or `None` out of time.
fn yosys(
    dir: &Path,
    file: &str,
    script: &str,
    deadline: Instant,
) -> Result<Option<(bool, String)>, ProveError> {
    std::fs::write(dir.join(file), script)?;
    let yosys = tool("MMAC_YOSYS", "yosys");
    run_until(
        Command::new(&yosys)
            .current_dir(dir)
            .args(["-q", "-s", file]),
        deadline,
    )
}

/// The `ERROR:` lines of a Yosys log (or its last lines).
fn errors_of(log: &str) -> String {
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    if errors.is_empty() {
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    } else {
        errors.join("\n")
    }
}

/// The elements of a packed port value.
fn elements(value: &BigUint, count: usize, bits: u32) -> Vec<u64> {
    let mask = (BigUint::from(1u32) << bits) - 1u32;
    (0..count)
        .map(|i| ((value >> (i as u32 * bits)) & &mask).to_u64().unwrap_or(0))
        .collect()
}

/// Replay a counterexample on both sides; a witness only when they differ there.
fn replay(
    left: &Side,
    right: &Side,
    spec: Checked,
    values: &[(String, BigUint)],
    dir: &Path,
    deadline: Instant,
) -> Result<Verdict, ProveError> {
    let port = |name: &str| {
        values
            .iter()
            .find(|(n, _)| n == name)
            .map_or_else(BigUint::zero, |(_, v)| v.clone())
    };
    let ar = spec.arithmetic();
    let k = spec.k();
    let s = spec.scale_count();
    let scale_bits = ar.scale.as_ref().map_or(1, |x| x.format.storage_bits());
    let mut w = Witness {
        c: elements(&port("c"), 1, ar.c.storage_bits())[0],
        a: elements(&port("a"), k, ar.a.storage_bits()),
        b: elements(&port("b"), k, ar.b.storage_bits()),
        sa: elements(&port("sa"), s, scale_bits),
        sb: elements(&port("sb"), s, scale_bits),
        left_d: 0,
        right_d: 0,
    };
    let packed: Vec<(&str, BigUint)> = rtl::ports(spec)
        .iter()
        .filter(|(p, _)| *p != "d")
        .map(|(p, _)| (*p, port(p)))
        .collect();
    let run = |side: &Side, name: &str| -> Result<Result<u64, String>, ProveError> {
        match side {
            Side::Spec(inst) => Ok(interp::run(
                *inst,
                &Operands {
                    c: w.c,
                    a: &w.a,
                    b: &w.b,
                    sa: &w.sa,
                    sb: &w.sb,
                },
            )
            .map_err(|e| e.to_string())),
            Side::Rtl { .. } => evaluate_rtl(side, name, &packed, &rtl::ports(spec), dir, deadline),
        }
    };
    let l = run(left, "mmac_left")?;
    let r = run(right, "mmac_right")?;
    let (l, r) = match (l, r) {
        (Ok(l), Ok(r)) => (l, r),
        (Err(e), _) | (_, Err(e)) => {
            return Ok(Verdict::Unknown(format!(
                "the solver's counterexample could not be replayed: {e}"
            )));
        }
    };
    let d = &ar.d;
    let nan = nan_free(left, right);
    let same = l == r || (nan && d.decode(l).is_nan() && d.decode(r).is_nan());
    if same {
        return Ok(Verdict::Unknown(format!(
            "the solver's counterexample does not replay (both sides give {l:x}): a bug in mmac's \
             lowering or in the tools; nothing is claimed"
        )));
    }
    w.left_d = l;
    w.right_d = r;
    Ok(Verdict::Differ(w))
}

/// d of an RTL side on packed inputs, by Yosys's SAT evaluation of the design.
fn evaluate_rtl(
    side: &Side,
    name: &str,
    inputs: &[(&str, BigUint)],
    ports: &[(&str, u32)],
    dir: &Path,
    deadline: Instant,
) -> Result<Result<u64, String>, ProveError> {
    let sets: Vec<String> = inputs
        .iter()
        .map(|(p, v)| {
            let w = ports.iter().find(|x| x.0 == *p).map_or(1, |x| x.1);
            format!("-set {p} {w}'h{}", v.to_str_radix(16))
        })
        .collect();
    let out = dir.join(format!("{name}.replay.txt"));
    let script = format!(
        "{}opt -mux_undef\nsetundef -zero\ntee -q -o {name}.replay.txt sat {} -show d {name}\n",
        read_side(side, name, dir, false)?,
        sets.join(" ")
    );
    match yosys(dir, &format!("{name}.replay.ys"), &script, deadline)? {
        None => Ok(Err(
            "the budget ran out while Yosys replayed the witness".into()
        )),
        Some((false, log)) => Err(ProveError::Yosys(errors_of(&log))),
        Some((true, _)) => {
            let text = std::fs::read_to_string(&out)?;
            // `  \d   DEC   HEX   BIN`: the binary column, most significant bit first
            let row = text
                .lines()
                .find(|l| l.trim_start().starts_with("\\d "))
                .ok_or_else(|| ProveError::Yosys(format!("no value of d in:\n{text}")))?;
            let bin = row.split_whitespace().last().unwrap_or("");
            Ok(u64::from_str_radix(bin, 2).map_err(|_| format!("d is not a number: {row}")))
        }
    }
}
