//! What every subcommand shares: the exit codes, loading a spec and looking up one of its
//! instructions (each printing its own diagnostic). A leaf: it imports nothing from the
//! other modules of `cli`.

use mmac_compiler::ir::Instruction;
use mmac_runtime::specs::{self, LoadedSpec};
use std::path::Path;

/// Success.
pub const EXIT_OK: i32 = 0;
/// A check or a test failed.
pub const EXIT_FAILED: i32 = 1;
/// Bad usage or unreadable input.
pub const EXIT_USAGE: i32 = 2;

/// Parse and check one spec file; on failure the diagnostics are on stderr and the error
/// is the exit code (unreadable file: usage, invalid spec: failed).
pub fn load(path: &Path, color: bool) -> Result<LoadedSpec, i32> {
    specs::load_file(path).map_err(|e| {
        eprint!("{}", e.render(color));
        match e {
            specs::LoadError::Io(..) => EXIT_USAGE,
            specs::LoadError::Invalid(_) => EXIT_FAILED,
        }
    })
}

/// The named instruction of a loaded spec, or a usage error on stderr.
pub fn instruction<'s>(spec: &'s LoadedSpec, name: &str) -> Result<&'s Instruction, i32> {
    spec.spec.instruction(name).ok_or_else(|| {
        let file = spec.path.display();
        eprintln!("error: `{file}` declares no instruction `{name}`\n  help: `mmac list {file}` shows its instructions");
        EXIT_USAGE
    })
}
