//! The `mmac` command-line tool: a thin layer over mmac-compiler and mmac-runtime.
//! Data goes to stdout, diagnostics to stderr; exit 0 on success, 1 when a check or a
//! test fails, 2 on bad usage or unreadable input.

mod cli;

fn main() {
    std::process::exit(cli::main());
}
