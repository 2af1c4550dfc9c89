//! What every subcommand shares: the exit codes, how a subcommand stops ([`Halt`]: a
//! diagnostic already printed, or a failed write to stdout, quiet for a closed pipe),
//! loading a spec and looking up one of its instructions, starting an output file
//! that is not one of the inputs (each printing its own diagnostic), and the progress
//! bar of long runs. A leaf: it imports
//! nothing from the other modules of `cli`.

use mmac_compiler::Checked;
use mmac_compiler::diagnostic::closest;
use mmac_runtime::matrix;
use mmac_runtime::specs::{self, LoadedSpec};
use std::io;
use std::path::{Path, PathBuf};

/// Success.
pub const EXIT_OK: i32 = 0;
/// A check or a test failed.
pub const EXIT_FAILED: i32 = 1;
/// Bad usage or unreadable input.
pub const EXIT_USAGE: i32 = 2;
/// A proof undecided within its budget (`prove`, `diff --prove`).
pub const EXIT_UNDECIDED: i32 = 3;

/// Why a subcommand stopped before finishing.
#[derive(Debug)]
pub enum Halt {
    /// The diagnostic is on stderr; exit with this code.
    Exit(i32),
    /// Writing to stdout failed (`mmac list F | head -1` closes the pipe early).
    Stdout(io::Error),
}

impl From<io::Error> for Halt {
    fn from(e: io::Error) -> Halt {
        Halt::Stdout(e)
    }
}

/// What a subcommand returns: the exit code once it has finished, or why it stopped.
/// Subcommands write data through a locked stdout with `writeln!(out, ...)?`.
pub type Outcome = Result<i32, Halt>;

/// The process exit code of a subcommand's outcome. A closed stdout is the reader's
/// choice, not an error: a data subcommand (`gen`, `list`) that stops there ends quietly
/// with success; subcommands whose exit code is a verdict write through [`stdout`] and
/// never stop there.
pub fn exit_code(outcome: Outcome) -> i32 {
    match outcome {
        Ok(code) | Err(Halt::Exit(code)) => code,
        Err(Halt::Stdout(e)) if e.kind() == io::ErrorKind::BrokenPipe => EXIT_OK,
        Err(Halt::Stdout(e)) => {
            eprintln!("error: cannot write to stdout: {e}");
            EXIT_USAGE
        }
    }
}

/// Standard output for a subcommand whose exit code is a verdict (`test`, `diff`, ...):
/// once the reader has gone (a closed pipe), further writes are dropped, so that the
/// subcommand still finishes and its exit code says what it found, read or not. Other
/// write errors (a full disk) are returned.
pub struct Stdout {
    out: io::StdoutLock<'static>,
    closed: bool,
}

/// The verdict-keeping [`Stdout`].
pub fn stdout() -> Stdout {
    Stdout {
        out: io::stdout().lock(),
        closed: false,
    }
}

impl io::Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.closed {
            return Ok(buf.len());
        }
        match self.out.write(buf) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(buf.len())
            }
            r => r,
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        match self.out.flush() {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            r => r,
        }
    }
}

/// Parse and check one spec file; on failure the diagnostics are on stderr and the
/// subcommand halts with the exit code (unreadable file: usage, invalid spec: failed).
pub fn load(path: &Path, color: bool) -> Result<LoadedSpec, Halt> {
    specs::load_file(path).map_err(|e| not_loaded(e, color))
}

/// Load `path` for the one instruction `name` a command runs
/// ([`specs::load_instruction`]: that instruction alone checked, the whole file where it
/// fails); errors as [`load`]'s.
pub fn load_for(path: &Path, name: &str, color: bool) -> Result<LoadedSpec, Halt> {
    specs::load_instruction(path, name).map_err(|e| not_loaded(e, color))
}

/// A spec that did not load: its diagnostics on stderr, exit 2 for a file that cannot be
/// read, 1 for one that does not check.
fn not_loaded(e: specs::LoadError, color: bool) -> Halt {
    eprint!("{}", e.render(color));
    Halt::Exit(match e {
        specs::LoadError::Io(..) => EXIT_USAGE,
        specs::LoadError::Invalid(_) => EXIT_FAILED,
    })
}

/// The named instruction of a loaded spec, or a usage error on stderr that suggests the
/// closest name (else points at `mmac list`).
pub fn instruction<'s>(spec: &'s LoadedSpec, name: &str) -> Result<Checked<'s>, Halt> {
    spec.instruction(name).ok_or_else(|| {
        let file = spec.path.display();
        let names = spec.spec().instructions.iter().map(|i| i.name.as_str());
        let help = match closest(name, names) {
            Some(near) => format!("did you mean `{near}`?"),
            None => format!("`mmac list {file}` shows its instructions"),
        };
        eprintln!("error: `{file}` declares no instruction `{name}`\n  help: {help}");
        Halt::Exit(EXIT_USAGE)
    })
}

/// Where a path would be once created: the canonical path of an existing file, else its
/// canonical folder joined with its name.
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = path.canonicalize() {
        return Some(p);
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Some(dir.canonicalize().ok()?.join(path.file_name()?))
}

/// Start the output file `path` (`-o`) before any work is done: refuse a path that names
/// one of the `inputs` (`(option, path)`, compared as canonical paths, so `./x/../A.npy`
/// is `A.npy`), and one that cannot be created. Both are usage errors.
pub fn create_output(path: &Path, inputs: &[(&str, &Path)]) -> Result<matrix::Output, Halt> {
    let out = resolved(path);
    for (option, input) in inputs {
        let same_path = out
            .as_ref()
            .is_some_and(|o| input.canonicalize().is_ok_and(|i| &i == o));
        if same_path || same_file(path, input) {
            eprintln!(
                "error: the output {} is the input {option} {}; refusing to overwrite it\n  help: write the result to another file",
                path.display(),
                input.display()
            );
            return Err(Halt::Exit(EXIT_USAGE));
        }
    }
    matrix::Output::create(path).map_err(|e| {
        eprintln!("error: {e}");
        Halt::Exit(EXIT_USAGE)
    })
}

/// Are two existing paths the same file (hard links included)?
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(x), Ok(y)) => x.is_file() && x.dev() == y.dev() && x.ino() == y.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        false
    }
}

/// A progress bar of `len` steps named `what` on stderr, when `show` and stderr is a
/// terminal; otherwise a hidden one (pipes and logs stay clean).
pub fn progress_bar(len: u64, what: &str, show: bool) -> indicatif::ProgressBar {
    if !show || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {what} ({{eta}} left)"
        ))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}
