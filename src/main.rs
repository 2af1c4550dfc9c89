//! The `mmac` command-line tool: a thin layer over mmac-compiler and mmac-runtime.
//! Data goes to stdout, diagnostics to stderr; exit 0 on success, 1 when a check or a
//! test fails, 2 on bad usage or unreadable input.

// Diagnostics go to stderr through these, in place of std's macros, which panic when
// stderr is closed (`mmac check spec.mma 2>&- `, `2>&1 | true`): a diagnostic nobody
// can read is dropped, and the exit code still says what happened.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
macro_rules! eprint {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

mod cli;

fn main() {
    std::process::exit(cli::main());
}
