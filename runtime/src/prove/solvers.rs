//! The solvers that decide a miter, and the processes they run in: ABC's `iprove` on its
//! AIG (Debian's `yosys-abc`) and Bitwuzla on its SMT-LIB 2 form (PyPI's `bitwuzla`,
//! through a small Python driver), run side by side until the first decides; every
//! process is killed at the deadline, or when the proof is interrupted
//! ([`catch_interrupts`]).

use super::ProveError;
use num_bigint::BigUint;
use num_traits::Zero;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Which solvers decide the miter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Solvers {
    /// ABC and (where the Python of `MMAC_PYTHON` has the `bitwuzla` module) Bitwuzla,
    /// side by side: the first to decide. Without Bitwuzla, ABC alone.
    #[default]
    All,
    /// ABC's `iprove` on the AIG: SAT sweeping merges internal points equal on every
    /// input, which is fast where the two circuits share structure.
    Abc,
    /// Bitwuzla on the word-level SMT-LIB 2 miter (rewriting before bit-blasting), which
    /// decides some proofs ABC does not (docs/rtl.md). Required, not optional.
    Bitwuzla,
}

impl Solvers {
    pub fn abc(self) -> bool {
        self != Solvers::Bitwuzla
    }
    pub fn bitwuzla(self) -> bool {
        self != Solvers::Abc
    }
}

/// What the solvers said about the miter.
pub(super) enum Answer {
    /// No input makes it fire.
    Unsat,
    /// It fires on these input port values.
    Sat(Vec<(String, BigUint)>),
    /// Undecided, with why.
    Undecided(String),
}

/// The environment variable and default of a tool's command.
pub(super) fn tool(var: &'static str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_string())
}

/// A running tool, its output drained on threads so that a chatty one never blocks on a
/// full pipe.
struct Job {
    child: Child,
    drained: Vec<JoinHandle<String>>,
}

impl Job {
    fn spawn(cmd: &mut Command) -> std::io::Result<Job> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut drained = vec![];
        let pipes: [Option<Box<dyn std::io::Read + Send>>; 2] = [
            child.stdout.take().map(|p| Box::new(p) as _),
            child.stderr.take().map(|p| Box::new(p) as _),
        ];
        for mut pipe in pipes.into_iter().flatten() {
            drained.push(std::thread::spawn(move || {
                let mut s = String::new();
                let _ = pipe.read_to_string(&mut s);
                s
            }));
        }
        Ok(Job { child, drained })
    }

    /// Its exit status and output (stdout, then stderr) once it has exited.
    fn poll(&mut self) -> std::io::Result<Option<(ExitStatus, String)>> {
        let Some(status) = self.child.try_wait()? else {
            return Ok(None);
        };
        let text = self
            .drained
            .drain(..)
            .map(|t| t.join().unwrap_or_default())
            .collect();
        Ok(Some((status, text)))
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The signal that interrupted the proof (0: none), set by [`catch_interrupts`]'s handler.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

/// From now on, SIGINT, SIGTERM and SIGHUP interrupt a proof instead of ending the
/// process: every tool it runs is killed at its next poll (every 20 ms) and the proof
/// returns [`ProveError::Interrupted`], so that the caller removes its files before it
/// exits. The handler fires once: a second signal ends the process as usual.
pub fn catch_interrupts() {
    extern "C" fn note(signal: libc::c_int) {
        // (an atomic store is all a signal handler may do here)
        INTERRUPTED.store(signal, Ordering::SeqCst);
    }
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a handler that only stores to an atomic, and
        // SA_RESETHAND restoring the default disposition after one delivery
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The signal that interrupted the proof, as the error that stops it.
fn interrupted() -> Result<(), ProveError> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => Ok(()),
        signal => Err(ProveError::Interrupted(signal)),
    }
}

/// A missing program as the error that says how to install it.
fn spawn_error(e: std::io::Error, program: &str) -> ProveError {
    match e.kind() {
        std::io::ErrorKind::NotFound => ProveError::Missing {
            var: if program.contains("abc") {
                "MMAC_YOSYS_ABC"
            } else {
                "MMAC_YOSYS"
            },
            tool: program.to_string(),
        },
        _ => ProveError::Io(e),
    }
}

/// Run a command with a deadline: whether it succeeded and its output, or `None` when the
/// deadline passed (the command is killed).
pub(super) fn run_until(
    cmd: &mut Command,
    deadline: Instant,
) -> Result<Option<(bool, String)>, ProveError> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    interrupted()?;
    let mut job = Job::spawn(cmd).map_err(|e| spawn_error(e, &program))?;
    loop {
        if let Some((status, text)) = job.poll()? {
            return Ok(Some((status.success(), text)));
        }
        if let Err(e) = interrupted() {
            job.kill();
            return Err(e);
        }
        if Instant::now() >= deadline {
            job.kill();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The Bitwuzla driver, run as `python -c`.
const BITWUZLA_DRIVER: &str = include_str!("bitwuzla.py");

/// The exit code of the driver when its Python has no `bitwuzla` module.
const NO_BITWUZLA: i32 = 4;

/// The SMT-LIB 2 query of the miter Yosys wrote to `miter.smt2` in `dir`: one state on
/// which it fires. Written beside it as `query.smt2`.
pub(super) fn write_query(dir: &Path) -> Result<(), ProveError> {
    let mut text = std::fs::read_to_string(dir.join("miter.smt2"))?;
    text.push_str("(declare-const s |mmac_miter_s|)\n(assert (|mmac_miter_n trigger| s))\n");
    std::fs::write(dir.join("query.smt2"), text)?;
    Ok(())
}

/// One solver's process and how to read its answer.
struct Running {
    name: &'static str,
    job: Job,
}

/// Decide the miter in `dir` (`miter.aig` and `miter.map` for ABC, `query.smt2` for
/// Bitwuzla) with `solvers`, side by side until one decides or `deadline`; `inputs` are
/// the miter's input ports. The answer and the solver that gave it.
pub(super) fn decide(
    solvers: Solvers,
    dir: &Path,
    inputs: &[&str],
    timeout: Duration,
    deadline: Instant,
) -> Result<(Answer, Option<&'static str>), ProveError> {
    let mut running = vec![];
    let mut notes = vec![];
    let python = tool("MMAC_PYTHON", "python3");
    if solvers.abc() {
        let abc = tool("MMAC_YOSYS_ABC", "yosys-abc");
        let job = Job::spawn(
            Command::new(&abc)
                .current_dir(dir)
                .arg("-c")
                .arg("read_aiger miter.aig; iprove; write_cex -n cex.txt"),
        )
        .map_err(|e| spawn_error(e, &abc))?;
        running.push(Running { name: "abc", job });
    }
    if solvers.bitwuzla() {
        match Job::spawn(
            Command::new(&python)
                .current_dir(dir)
                .arg("-c")
                .arg(BITWUZLA_DRIVER)
                .arg("query.smt2")
                .args(inputs),
        ) {
            Ok(job) => running.push(Running {
                name: "bitwuzla",
                job,
            }),
            Err(e) if solvers == Solvers::All => {
                notes.push(format!("Bitwuzla was not run ({python}: {e})"))
            }
            Err(e) => return Err(no_bitwuzla(&python, &e.to_string())),
        }
    }
    while !running.is_empty() {
        if let Err(e) = interrupted() {
            for r in running {
                r.job.kill();
            }
            return Err(e);
        }
        if Instant::now() >= deadline {
            let names: Vec<&str> = running.iter().map(|r| solver_name(r.name)).collect();
            for r in running {
                r.job.kill();
            }
            notes.insert(
                0,
                format!(
                    "the budget ({} s) ran out before {} decided the miter",
                    timeout.as_secs(),
                    names.join(" or ")
                ),
            );
            return Ok((Answer::Undecided(notes.join("; ")), None));
        }
        let mut finished = None;
        for (i, r) in running.iter_mut().enumerate() {
            if let Some(done) = r.job.poll()? {
                finished = Some((i, done));
                break;
            }
        }
        let Some((i, (status, text))) = finished else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let name = running.remove(i).name;
        let answer = match name {
            "abc" => abc_answer(&text, dir)?,
            _ if status.code() == Some(NO_BITWUZLA) => {
                if solvers != Solvers::All {
                    return Err(no_bitwuzla(&python, text.trim()));
                }
                notes.push(format!("Bitwuzla was not run ({python}: {})", text.trim()));
                continue;
            }
            // the driver itself failed (a broken interpreter, a crash): no answer
            _ if !status.success()
                && !matches!(text.lines().next().map(str::trim), Some("sat" | "unsat")) =>
            {
                let why = match text.trim().lines().last() {
                    Some(line) => format!("{status}: {line}"),
                    None => format!("{status}, with no output"),
                };
                if solvers != Solvers::All {
                    return Err(no_bitwuzla(&python, &why));
                }
                notes.push(format!("Bitwuzla's driver failed ({python}: {why})"));
                continue;
            }
            _ => bitwuzla_answer(&text),
        };
        match answer {
            Answer::Undecided(why) => notes.push(why),
            decided => {
                for r in running {
                    r.job.kill();
                }
                return Ok((decided, Some(name)));
            }
        }
    }
    Ok((Answer::Undecided(notes.join("; ")), None))
}

/// A solver's name as the output shows it.
pub(super) fn solver_name(name: &str) -> &'static str {
    match name {
        "abc" => "ABC",
        "bitwuzla" => "Bitwuzla",
        _ => "the solver",
    }
}

fn no_bitwuzla(python: &str, why: &str) -> ProveError {
    ProveError::NoBitwuzla {
        python: python.to_string(),
        why: why.to_string(),
    }
}

/// ABC's log: `UNSATISFIABLE`, or `SATISFIABLE` with the counterexample it wrote to
/// `cex.txt`, mapped to the ports through `miter.map`.
fn abc_answer(log: &str, dir: &Path) -> Result<Answer, ProveError> {
    Ok(if log.contains("UNSATISFIABLE") {
        Answer::Unsat
    } else if log.contains("SATISFIABLE") {
        Answer::Sat(counterexample(
            &std::fs::read_to_string(dir.join("cex.txt"))?,
            &std::fs::read_to_string(dir.join("miter.map"))?,
        ))
    } else {
        Answer::Undecided(format!(
            "ABC did not decide the miter: {}",
            log.lines().last().unwrap_or("")
        ))
    })
}

/// The driver's output: `unsat`, or `sat` and `PORT BITS` lines.
fn bitwuzla_answer(out: &str) -> Answer {
    let mut lines = out.lines();
    match lines.next().map(str::trim) {
        Some("unsat") => Answer::Unsat,
        Some("sat") => {
            let mut values = vec![];
            for line in lines {
                if let Some((port, bits)) = line.split_once(' ')
                    && let Some(v) = BigUint::parse_bytes(bits.trim().as_bytes(), 2)
                {
                    values.push((port.to_string(), v));
                }
            }
            Answer::Sat(values)
        }
        _ => Answer::Undecided(format!(
            "Bitwuzla did not decide the miter: {}",
            out.lines().last().unwrap_or("").trim()
        )),
    }
}

/// The input ports' values from ABC's counterexample (`piN=0|1` lines) and the AIGER
/// map (`input N BIT NAME` lines).
fn counterexample(cex: &str, map: &str) -> Vec<(String, BigUint)> {
    let mut index: Vec<(usize, u32, String)> = vec![];
    for line in map.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        if let ["input", i, bit, name] = t[..]
            && let (Ok(i), Ok(bit)) = (i.parse(), bit.parse())
        {
            index.push((i, bit, name.to_string()));
        }
    }
    let mut values: Vec<(String, BigUint)> = vec![];
    for line in cex.lines() {
        let Some(rest) = line.trim().strip_prefix("pi") else {
            continue;
        };
        let Some((i, v)) = rest.split_once('=') else {
            continue;
        };
        let i: usize = match i.split('@').next().and_then(|x| x.parse().ok()) {
            Some(i) => i,
            None => continue,
        };
        let Some((_, bit, name)) = index.iter().find(|x| x.0 == i) else {
            continue;
        };
        let slot = match values.iter().position(|(n, _)| n == name) {
            Some(p) => p,
            None => {
                values.push((name.clone(), BigUint::zero()));
                values.len() - 1
            }
        };
        if v.trim() == "1" {
            values[slot].1.set_bit(*bit as u64, true);
        }
    }
    values
}
