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
use crate::vectors::parse_answer;
use mmac_compiler::format::{self, Format};
use mmac_compiler::interp;
use mmac_compiler::ir::Instruction;
use mmac_compiler::jit;
use mmac_compiler::valid::ArithmeticInfo;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;

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
    pub fn of(inst: &Instruction) -> Interface {
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

    /// Why an input does not fit this interface (element counts), if it does not.
    pub fn misfit(&self, input: &Input) -> Option<String> {
        let n = self.scale_count();
        for (name, got, want) in [
            ("a", input.a.len(), self.k),
            ("b", input.b.len(), self.k),
            ("sa", input.sa.len(), n),
            ("sb", input.sb.len(), n),
        ] {
            if got != want {
                return Some(format!("`{name}=` has {got} values, expected {want}"));
            }
        }
        None
    }
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
    #[error("the spec cannot evaluate the input: {0}")]
    Eval(String),
}

/// An unknown unit: answers every input of a batch with d's raw encoding, in order.
pub trait BlackBox {
    fn answer(&mut self, inputs: &[Input]) -> Result<Vec<u64>, BoxError>;
}

/// An instruction of a compiled spec as a box: the JIT's kernel, or the interpreter for
/// an instruction the JIT refuses.
pub struct SpecBox<'a> {
    inst: &'a Instruction,
    info: &'a ArithmeticInfo,
    compiled: Option<jit::CompiledSpec>,
}

impl<'a> SpecBox<'a> {
    pub fn new(inst: &'a Instruction, info: &'a ArithmeticInfo) -> SpecBox<'a> {
        SpecBox {
            inst,
            info,
            compiled: jit::compile_instruction(inst, info).ok(),
        }
    }
}

impl BlackBox for SpecBox<'_> {
    fn answer(&mut self, inputs: &[Input]) -> Result<Vec<u64>, BoxError> {
        evaluate(self.inst, self.info, self.compiled.as_ref(), inputs)
            .map_err(|e| BoxError::Eval(e.to_string()))
    }
}

/// Results of an instruction on inputs: the compiled kernel when there is one, else the
/// interpreter.
pub fn evaluate(
    inst: &Instruction,
    info: &ArithmeticInfo,
    compiled: Option<&jit::CompiledSpec>,
    inputs: &[impl std::borrow::Borrow<Input>],
) -> Result<Vec<u64>, mmac_compiler::engine::EvalError> {
    let kernel = compiled.and_then(|c| c.kernel(&inst.name).ok());
    let Some(kernel) = kernel else {
        return inputs
            .iter()
            .map(|i| interp::run(inst, info, &i.borrow().operands()))
            .collect();
    };
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
    kernel.batch(&c, &a, &b, &sa, &sb, &mut d)?;
    Ok(d)
}

/// A command run once through `sh -c`, answering requests on its stdout. Requests go
/// through a writer thread, so the box may read many lines before it answers.
pub struct PipeBox {
    interface: Interface,
    child: Child,
    lines: Option<mpsc::Sender<String>>,
    writer: Option<JoinHandle<std::io::Result<()>>>,
    reader: BufReader<ChildStdout>,
    answered: usize,
}

impl PipeBox {
    /// Start `command` (through `sh -c`); its stderr is the caller's.
    pub fn start(command: &str, interface: Interface) -> Result<PipeBox, BoxError> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
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
        Ok(PipeBox {
            interface,
            child,
            lines: Some(tx),
            writer: Some(writer),
            reader: BufReader::new(stdout),
            answered: 0,
        })
    }

    fn status(&mut self) -> String {
        // the box closed its output: it has exited or is about to
        match self.child.wait() {
            Ok(s) => format!(" ({s})"),
            Err(_) => String::new(),
        }
    }
}

impl BlackBox for PipeBox {
    fn answer(&mut self, inputs: &[Input]) -> Result<Vec<u64>, BoxError> {
        let mut text = String::new();
        for input in inputs {
            text.push_str(&self.interface.request(input));
            text.push('\n');
        }
        let sent = self.lines.as_ref().is_some_and(|tx| tx.send(text).is_ok());
        if !sent {
            return Err(BoxError::Io("the box's input is closed".into()));
        }
        let mut out = Vec::with_capacity(inputs.len());
        let mut line = String::new();
        for i in 0..inputs.len() {
            line.clear();
            let n = self
                .reader
                .read_line(&mut line)
                .map_err(|e| BoxError::Io(e.to_string()))?;
            if n == 0 {
                let status = self.status();
                return Err(BoxError::Closed {
                    answered: i,
                    asked: inputs.len(),
                    status,
                });
            }
            self.answered += 1;
            let trimmed = line.trim();
            let d = parse_answer(trimmed).map_err(|(column, message)| BoxError::Malformed {
                index: self.answered,
                line: trimmed.to_string(),
                column,
                message,
            })?;
            out.push(d & self.interface.d.storage_mask());
        }
        Ok(out)
    }
}

impl Drop for PipeBox {
    fn drop(&mut self) {
        // closing stdin ends a well-behaved box; one that keeps running is killed
        self.lines = None;
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
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
}
