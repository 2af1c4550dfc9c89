//! The black-box protocol: an unknown unit that answers dot-product-adds. [`BlackBox`] is
//! the one operation inference needs (answer a batch of inputs, in order), implemented by
//! [`SpecBox`] (an instruction of a compiled spec, in process: how tests serve the
//! library without a process per instruction) and by [`PipeBox`] (a command run once
//! through `sh -c`, spoken to over its stdin and stdout). [`Interface`] is what both
//! sides agree on: the operand formats, k and the block scales, and the request lines.
//!
//! On the wire a request is a `.mmv` case without `d=` (`c=HEX a=HEX,... b=HEX,...
//! [sa=HEX,... sb=HEX,...]`) and an answer is one line `d=HEX`, in request order. mmac
//! writes a whole batch before it reads, from a writer thread, so a box that reads
//! everything first, or one that answers line by line, or a slow one never deadlocks
//! against a full pipe.

use crate::inputs::{Input, hex};
use crate::sparse::SparseInput;
use crate::vectors::parse_answer;
use mmac_compiler::Checked;
use mmac_compiler::engine::{Choice, Engine};
use mmac_compiler::format::{self, Format};
use mmac_compiler::ir::Sparsity;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The operands an unknown unit takes: formats of a, b, c and d, k, and the block scale
/// factors (their format and block size) when it has them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    pub a: Format,
    pub b: Format,
    pub c: Format,
    pub d: Format,
    pub k: usize,
    pub scale: Option<(Format, usize)>,
}

/// Why an interface could not be read from the command line's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InterfaceError(pub String);

impl Interface {
    /// The interface from `--types a=F,b=F,c=F,d=F`, `--k K` and `--scale "FORMAT
    /// block=N"` (the built-in formats: f32, f16, bf16, e4m3, s8, ...).
    pub fn parse(types: &str, k: usize, scale: Option<&str>) -> Result<Interface, InterfaceError> {
        let mut slots: [Option<Format>; 4] = Default::default();
        for item in types.split(',') {
            let Some((name, fmt)) = item.split_once('=') else {
                return Err(InterfaceError(format!(
                    "`{item}` in --types is not `operand=format` (e.g. a=f16,b=f16,c=f32,d=f32)"
                )));
            };
            let slot = match name.trim() {
                "a" => 0,
                "b" => 1,
                "c" => 2,
                "d" => 3,
                other => {
                    return Err(InterfaceError(format!(
                        "--types names operand `{other}`; the operands are a, b, c and d"
                    )));
                }
            };
            if slots[slot].is_some() {
                return Err(InterfaceError(format!(
                    "--types gives `{}` twice",
                    name.trim()
                )));
            }
            slots[slot] = Some(builtin(fmt.trim())?);
        }
        let [Some(a), Some(b), Some(c), Some(d)] = slots else {
            return Err(InterfaceError(
                "--types must give all of a, b, c and d (e.g. a=f16,b=f16,c=f32,d=f32)".into(),
            ));
        };
        if k == 0 {
            return Err(InterfaceError("--k must be at least 1".into()));
        }
        let scale = match scale {
            None => None,
            Some(text) => {
                let mut words = text.split_whitespace();
                let fmt = words.next().ok_or_else(|| {
                    InterfaceError("--scale is `FORMAT block=N` (e.g. \"ue8m0 block=32\")".into())
                })?;
                let block = words
                    .next()
                    .and_then(|w| w.strip_prefix("block="))
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|&n| n > 0 && k.is_multiple_of(n))
                    .ok_or_else(|| {
                        InterfaceError(format!(
                            "--scale \"{text}\": expected `FORMAT block=N` with N dividing k = {k}"
                        ))
                    })?;
                if words.next().is_some() {
                    return Err(InterfaceError(format!(
                        "--scale \"{text}\": expected only `FORMAT block=N`"
                    )));
                }
                Some((builtin(fmt)?, block))
            }
        };
        Ok(Interface {
            a,
            b,
            c,
            d,
            k,
            scale,
        })
    }

    /// The interface of an instruction.
    pub fn of(inst: &mmac_compiler::ir::Instruction) -> Interface {
        let ar = &inst.arithmetic;
        Interface {
            a: ar.a.clone(),
            b: ar.b.clone(),
            c: ar.c.clone(),
            d: ar.d.clone(),
            k: inst.k(),
            scale: ar
                .scale
                .as_ref()
                .map(|s| (s.format.clone(), s.block as usize)),
        }
    }

    /// Scale factors per dot product.
    pub fn scale_count(&self) -> usize {
        self.scale.as_ref().map_or(0, |(_, b)| self.k / b)
    }

    /// The request line of one input (no newline).
    pub fn request(&self, input: &Input) -> String {
        let list =
            |f: &Format, v: &[u64]| v.iter().map(|x| hex(f, *x)).collect::<Vec<_>>().join(",");
        let mut s = format!(
            "c={} a={} b={}",
            hex(&self.c, input.c),
            list(&self.a, &input.a),
            list(&self.b, &input.b)
        );
        if let Some((f, _)) = &self.scale {
            s.push_str(&format!(
                " sa={} sb={}",
                list(f, &input.sa),
                list(f, &input.sb)
            ));
        }
        s
    }

    /// Why an input does not fit this interface (element counts, or a value wider than
    /// its format: refused, as `mmac test` refuses it, never masked), if it does not.
    pub fn misfit(&self, input: &Input) -> Option<Misfit> {
        let n = self.scale_count();
        for (name, got, want) in [
            ("a", input.a.len(), self.k),
            ("b", input.b.len(), self.k),
            ("sa", input.sa.len(), n),
            ("sb", input.sb.len(), n),
        ] {
            if got != want {
                return Some(Misfit {
                    field: name,
                    message: format!("`{name}=` has {got} values, expected {want}"),
                });
            }
        }
        self.unfit_value(input)
    }

    /// The first value of an input wider than its format, named, if there is one.
    pub fn unfit_value(&self, input: &Input) -> Option<Misfit> {
        let scale = self.scale.as_ref().map(|(f, _)| f);
        let groups: [(&str, Option<&Format>, &[u64]); 5] = [
            ("c", Some(&self.c), std::slice::from_ref(&input.c)),
            ("a", Some(&self.a), &input.a),
            ("b", Some(&self.b), &input.b),
            ("sa", scale, &input.sa),
            ("sb", scale, &input.sb),
        ];
        for (name, f, values) in groups {
            if let Some(f) = f
                && let Some(v) = values.iter().find(|v| **v & !f.storage_mask() != 0)
            {
                return Some(Misfit {
                    field: name,
                    message: format!(
                        "{name} value {v:x} does not fit `{}` ({} bits)",
                        f.name,
                        f.storage_bits()
                    ),
                });
            }
        }
        None
    }
}

/// Why an input does not fit an instruction, and the field of a request (`a`, `pos`, ...)
/// at fault, for an error to point at.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Misfit {
    pub field: &'static str,
    pub message: String,
}

fn builtin(name: &str) -> Result<Format, InterfaceError> {
    format::builtin(name).ok_or_else(|| {
        InterfaceError(format!(
            "unknown format `{name}` (built-in formats: f64, f32, tf32, f16, bf16, e4m3, e5m2, s8, u8, ...)"
        ))
    })
}

/// Why a box could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoxError {
    #[error("the box could not be started: {0}")]
    Start(String),
    #[error("the box closed its output after {answered} of {asked} answers{status}")]
    Closed {
        answered: usize,
        asked: usize,
        status: String,
    },
    #[error("answer {index} of the box, `{line}`: column {column}: {message}")]
    Malformed {
        index: usize,
        line: String,
        column: usize,
        message: String,
    },
    #[error("cannot talk to the box: {0}")]
    Io(String),
    #[error(
        "the box did not answer within {:.1} s (after {answered} of {asked} answers); `--box-timeout` waits longer",
        *millis as f64 / 1000.0
    )]
    Timeout {
        answered: usize,
        asked: usize,
        millis: u64,
    },
    #[error("the spec cannot evaluate the input: {0}")]
    Eval(String),
    #[error(
        "the box printed more lines than its first {asked} requests (one too many: `{line}`): it must print one `d=HEX` line per request"
    )]
    Surplus { line: String, asked: usize },
}

/// An unknown unit: answers every input of a batch with d's raw encoding, in order.
pub trait BlackBox {
    fn answer(&mut self, inputs: &[Input]) -> Result<Vec<u64>, BoxError>;
}

/// An instruction of a compiled spec as a box: its engine (the JIT's kernel, or the
/// interpreter for an instruction the JIT refuses).
pub struct SpecBox<'a> {
    engine: Engine<'a>,
}

impl<'a> SpecBox<'a> {
    pub fn new(checked: Checked<'a>) -> SpecBox<'a> {
        SpecBox {
            engine: Engine::new(checked, Choice::OPTIMISED),
        }
    }
}

impl BlackBox for SpecBox<'_> {
    fn answer(&mut self, inputs: &[Input]) -> Result<Vec<u64>, BoxError> {
        evaluate(&self.engine, inputs).map_err(|e| BoxError::Eval(e.to_string()))
    }
}

/// Results of an engine on inputs, in one batch.
pub fn evaluate(
    engine: &Engine,
    inputs: &[impl std::borrow::Borrow<Input>],
) -> Result<Vec<u64>, mmac_compiler::engine::EvalError> {
    let c: Vec<u64> = inputs.iter().map(|i| i.borrow().c).collect();
    let flat = |f: fn(&Input) -> &[u64]| -> Vec<u64> {
        inputs
            .iter()
            .flat_map(|i| f(i.borrow()).iter().copied())
            .collect()
    };
    let (a, b, sa, sb) = (
        flat(|i| &i.a),
        flat(|i| &i.b),
        flat(|i| &i.sa),
        flat(|i| &i.sb),
    );
    let mut d = vec![0; inputs.len()];
    engine.batch(&c, &a, &b, &sa, &sb, &mut d)?;
    Ok(d)
}

/// How long a box may take to answer, by default: the wait for each answer line.
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest answer line read (`d=` and 16 hex digits need 18 bytes): a box that
/// floods one endless line is refused there, not read into memory.
pub const MAX_ANSWER_LINE: usize = 4096;

/// A command run once through `sh -c` (in a process group of its own), answering
/// requests on its stdout. Requests go through a writer thread, so the box may read many
/// lines before it answers; answers come through a reader thread, so that each has a
/// deadline ([`PipeBox::reply_timeout`]) and a bounded length.
pub struct PipeBox {
    interface: Interface,
    child: Child,
    lines: Option<mpsc::Sender<String>>,
    writer: Option<JoinHandle<std::io::Result<()>>>,
    answers: mpsc::Receiver<Answer>,
    /// What a receive took that the next one is to see (the end of the output, met
    /// while looking for a second answer to the first request).
    held: Option<Answer>,
    answered: usize,
    /// Whether the first batch's answers were watched for a line too many.
    first_checked: bool,
    timeout: Duration,
    /// A sparse box: its pattern and K. Each input is then the dense arithmetic's, sent
    /// as a sparse request with the stored elements at the first columns of every group.
    sparse: Option<(Sparsity, usize)>,
}

/// What the reader thread read: a line (without its end), the end of the output, or a
/// line too long or unreadable.
enum Answer {
    Line(String),
    End,
    TooLong,
    Failed(String),
}

impl PipeBox {
    /// Start `command` (through `sh -c`); its stderr is the caller's.
    pub fn start(command: &str, interface: Interface) -> Result<PipeBox, BoxError> {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // its own process group: teardown kills the box and whatever it started
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd
            .spawn()
            .map_err(|e| BoxError::Start(format!("sh -c {command:?}: {e}")))?;
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel::<String>();
        let writer = std::thread::spawn(move || -> std::io::Result<()> {
            let mut w = std::io::BufWriter::new(stdin);
            while let Ok(batch) = rx.recv() {
                w.write_all(batch.as_bytes())?;
                w.flush()?;
            }
            Ok(())
        });
        let (answer_tx, answers) = mpsc::channel::<Answer>();
        std::thread::spawn(move || read_answers(stdout, answer_tx));
        Ok(PipeBox {
            interface,
            child,
            lines: Some(tx),
            writer: Some(writer),
            answers,
            held: None,
            answered: 0,
            first_checked: false,
            timeout: DEFAULT_REPLY_TIMEOUT,
            sparse: None,
        })
    }

    /// A box of a sparse instruction (`sparse` with K = `columns`): [`BlackBox::answer`]
    /// takes inputs of its dense arithmetic over the selected products (the interface's k
    /// is the stored elements) and sends each with a's elements at the first columns of
    /// every group (0, 1, 4, 5, ... for 2 of 4), b's elements at those rows and +0 in
    /// the others; [`PipeBox::answer_sparse`] sends sparse inputs as they are.
    pub fn sparse(mut self, sparse: Sparsity, columns: usize) -> PipeBox {
        self.sparse = Some((sparse, columns));
        self
    }

    /// Answers of a sparse box to inputs with their own positions.
    pub fn answer_sparse(&mut self, inputs: &[SparseInput]) -> Result<Vec<u64>, BoxError> {
        let lines: Vec<String> = inputs
            .iter()
            .map(|i| sparse_request(&self.interface, i))
            .collect();
        self.exchange(&lines)
    }

    /// How long to wait for each answer line before giving up on the box.
    pub fn reply_timeout(mut self, timeout: Duration) -> PipeBox {
        self.timeout = timeout;
        self
    }

    /// The box's exit status, if it exits within a moment of closing its output.
    fn status(&mut self) -> String {
        for _ in 0..50 {
            if let Ok(Some(s)) = self.child.try_wait() {
                return format!(" ({s})");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        String::new()
    }

    /// Kill the box and everything in its process group.
    fn kill(&mut self) {
        #[cfg(unix)]
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) on the box's own process group (it leads it), no memory
            // involved
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The reader thread: lines of at most [`MAX_ANSWER_LINE`] bytes, until the end, a line
/// too long, a read error, or no one listening.
fn read_answers(stdout: ChildStdout, tx: mpsc::Sender<Answer>) {
    let mut reader = BufReader::new(stdout);
    loop {
        let mut line: Vec<u8> = vec![];
        let n = (&mut reader)
            .take(MAX_ANSWER_LINE as u64 + 1)
            .read_until(b'\n', &mut line);
        let answer = match n {
            Err(e) => Answer::Failed(e.to_string()),
            Ok(0) => Answer::End,
            Ok(_) if line.len() > MAX_ANSWER_LINE && !line.ends_with(b"\n") => Answer::TooLong,
            Ok(_) => Answer::Line(String::from_utf8_lossy(&line).into_owned()),
        };
        let last = !matches!(answer, Answer::Line(_));
        if tx.send(answer).is_err() || last {
            return;
        }
    }
}

/// A sparse input as a request line: `c= a= b= [sa= sb=] pos=`.
fn sparse_request(iface: &Interface, input: &SparseInput) -> String {
    let positions: Vec<String> = input.positions.iter().map(|p| format!("{p:x}")).collect();
    format!(
        "{} pos={}",
        iface.request(&input.input),
        positions.join(",")
    )
}

/// How long a box's output is watched, after the first batch, for a line too many.
const SURPLUS_WAIT: Duration = Duration::from_millis(100);

impl PipeBox {
    /// Send one request line per input and read one answer each, in order. After the
    /// first batch the output is watched for a moment: a box that prints more than one
    /// line per request would shift every later answer, and its arithmetic would look
    /// wrong instead of its protocol.
    fn exchange(&mut self, lines: &[String]) -> Result<Vec<u64>, BoxError> {
        let out = self.exchange_batch(lines)?;
        if !self.first_checked && !lines.is_empty() {
            self.first_checked = true;
            match self.answers.recv_timeout(SURPLUS_WAIT) {
                Ok(Answer::Line(l)) => {
                    return Err(BoxError::Surplus {
                        line: l.trim().to_string(),
                        asked: lines.len(),
                    });
                }
                Ok(other) => self.held = Some(other),
                Err(_) => {}
            }
        }
        Ok(out)
    }

    /// [`PipeBox::exchange`] without the watch.
    fn exchange_batch(&mut self, lines: &[String]) -> Result<Vec<u64>, BoxError> {
        let mut text = String::new();
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        let sent = self.lines.as_ref().is_some_and(|tx| tx.send(text).is_ok());
        if !sent {
            return Err(BoxError::Io("the box's input is closed".into()));
        }
        let mut out = Vec::with_capacity(lines.len());
        for i in 0..lines.len() {
            let received = match self.held.take() {
                Some(a) => Ok(a),
                None => self.answers.recv_timeout(self.timeout),
            };
            let line = match received {
                Ok(Answer::Line(l)) => l,
                Ok(Answer::End) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self.status();
                    return Err(BoxError::Closed {
                        answered: i,
                        asked: lines.len(),
                        status,
                    });
                }
                Ok(Answer::TooLong) => {
                    return Err(BoxError::Malformed {
                        index: self.answered + 1,
                        line: "...".into(),
                        column: MAX_ANSWER_LINE + 1,
                        message: format!("an answer line longer than {MAX_ANSWER_LINE} bytes"),
                    });
                }
                Ok(Answer::Failed(e)) => return Err(BoxError::Io(e)),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(BoxError::Timeout {
                        answered: i,
                        asked: lines.len(),
                        millis: self.timeout.as_millis() as u64,
                    });
                }
            };
            self.answered += 1;
            let trimmed = line.trim();
            let d = parse_answer(trimmed).map_err(|(column, message)| BoxError::Malformed {
                index: self.answered,
                line: trimmed.to_string(),
                column,
                message,
            })?;
            let f = &self.interface.d;
            if d & !f.storage_mask() != 0 {
                return Err(BoxError::Malformed {
                    index: self.answered,
                    line: trimmed.to_string(),
                    column: 3,
                    message: format!(
                        "d value {d:x} does not fit `{}` ({} bits)",
                        f.name,
                        f.storage_bits()
                    ),
                });
            }
            out.push(d);
        }
        Ok(out)
    }

    /// The request line of a dense input: as it is, or for a sparse box its stored
    /// elements at the first columns of every group.
    fn request(&self, input: &Input) -> String {
        let Some((s, columns)) = &self.sparse else {
            return self.interface.request(input);
        };
        let positions = crate::sparse::first_positions(s, *columns);
        let mut b = vec![self.interface.b.positive_zero(); *columns];
        for (&p, &x) in positions.iter().zip(&input.b) {
            b[p as usize] = x;
        }
        let sparse = SparseInput {
            input: Input { b, ..input.clone() },
            positions,
        };
        sparse_request(&self.interface, &sparse)
    }
}

impl BlackBox for PipeBox {
    fn answer(&mut self, inputs: &[Input]) -> Result<Vec<u64>, BoxError> {
        let lines: Vec<String> = inputs.iter().map(|i| self.request(i)).collect();
        self.exchange(&lines)
    }
}

impl Drop for PipeBox {
    fn drop(&mut self) {
        // closing stdin ends a well-behaved box; one that keeps running is killed, before
        // the writer is joined (a writer blocked on the full pipe of a box that stopped
        // reading ends when the box does)
        self.lines = None;
        let mut exited = false;
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                exited = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if !exited {
            self.kill();
        }
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfaces_are_read_from_words() {
        let i = Interface::parse("a=f16,b=f16,c=f32,d=f32", 16, None).unwrap();
        assert_eq!(
            (i.a.name.as_str(), i.d.name.as_str(), i.k),
            ("f16", "f32", 16)
        );
        let s = Interface::parse("a=e2m1,b=e2m1,c=f32,d=f32", 64, Some("ue8m0 block=32")).unwrap();
        assert_eq!(s.scale_count(), 2);
        for (types, k, scale) in [
            ("a=f16,b=f16,c=f32", 16, None),
            ("a=f16,b=f16,c=f32,d=f99", 16, None),
            ("a=f16,b=f16,c=f32,d=f32", 16, Some("ue8m0 block=5")),
            ("a=f16,a=f16,c=f32,d=f32", 16, None),
        ] {
            assert!(Interface::parse(types, k, scale).is_err(), "{types}");
        }
    }

    /// A batch far larger than a pipe buffer, to a box that answers as it reads: the
    /// writer thread keeps both pipes moving (no deadlock), answers come in order.
    #[test]
    fn a_large_batch_does_not_deadlock() {
        let i = Interface::parse("a=s8,b=s8,c=s32,d=s32", 4, None).unwrap();
        let inputs: Vec<Input> = (0..20_000u64)
            .map(|n| Input {
                c: n,
                a: vec![0; 4],
                b: vec![0; 4],
                sa: vec![],
                sb: vec![],
            })
            .collect();
        // sed -u answers line by line, but mmac writes all 2 MB before it reads a line
        let mut bx = PipeBox::start("sed -u 's/^c=\\([0-9a-f]*\\).*/d=\\1/'", i).unwrap();
        let d = bx.answer(&inputs).unwrap();
        assert_eq!(d, (0..20_000u64).collect::<Vec<_>>());
        // a box that stops early is reported, not waited for
        let mut short =
            PipeBox::start("head -n 3 | sed 's/^c=\\([0-9a-f]*\\).*/d=\\1/'", i_again()).unwrap();
        let e = short.answer(&inputs[..10]).unwrap_err();
        assert!(
            matches!(
                e,
                BoxError::Closed {
                    answered: 3,
                    asked: 10,
                    ..
                }
            ),
            "{e}"
        );
        let mut bad = PipeBox::start("sed -u 's/^c=/x=/'", i_again()).unwrap();
        let e = bad.answer(&inputs[..2]).unwrap_err();
        assert!(matches!(e, BoxError::Malformed { index: 1, .. }), "{e}");
    }

    fn i_again() -> Interface {
        Interface::parse("a=s8,b=s8,c=s32,d=s32", 4, None).unwrap()
    }

    fn inputs(n: u64) -> Vec<Input> {
        (0..n)
            .map(|n| Input {
                c: n,
                a: vec![0; 4],
                b: vec![0; 4],
                sa: vec![],
                sb: vec![],
            })
            .collect()
    }

    /// A box that never answers is given up on after the reply timeout, and teardown
    /// does not wait for it.
    #[test]
    fn a_silent_box_times_out() {
        let mut bx = PipeBox::start("sleep 600", i_again())
            .unwrap()
            .reply_timeout(Duration::from_millis(300));
        let e = bx.answer(&inputs(1)).unwrap_err();
        assert!(matches!(e, BoxError::Timeout { answered: 0, .. }), "{e}");
        // teardown kills it (a teardown that waited would take the box's 600 s)
        drop(bx);
    }

    /// A box that answers garbage and lingers without reading (its input pipe full): the
    /// answer is refused, and teardown kills it before joining the writer stuck on the
    /// pipe.
    #[test]
    fn a_lingering_box_that_answers_garbage_is_torn_down() {
        let mut bx = PipeBox::start("echo garbage; exec sleep 600", i_again())
            .unwrap()
            .reply_timeout(Duration::from_secs(20));
        // far more than a pipe buffer, so that the writer blocks
        let e = bx.answer(&inputs(20_000)).unwrap_err();
        assert!(matches!(e, BoxError::Malformed { index: 1, .. }), "{e}");
        drop(bx);
    }

    /// A box that floods one endless line is refused at the bound, not read into memory.
    #[test]
    fn an_endless_line_is_refused_at_its_bound() {
        let mut bx = PipeBox::start("yes x | tr -d '\\n'", i_again())
            .unwrap()
            .reply_timeout(Duration::from_secs(20));
        let e = bx.answer(&inputs(1)).unwrap_err();
        assert!(
            matches!(&e, BoxError::Malformed { message, .. } if message.contains("longer than")),
            "{e}"
        );
    }
}
