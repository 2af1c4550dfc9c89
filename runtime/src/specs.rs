//! Loading spec files: one `.mma` file or every `.mma` file under a folder, each parsed
//! and checked; failures come back as rendered diagnostics.

use mmac_compiler::diagnostic::{Diag, Diagnostics};
use mmac_compiler::ir::Spec;
use mmac_compiler::{Checked, CheckedSpec};
use std::path::{Path, PathBuf};

/// A checked and validated spec, and the file it came from.
#[derive(Debug)]
pub struct LoadedSpec {
    pub path: PathBuf,
    /// The spec, validated: what the engines take.
    pub checked: CheckedSpec,
}

impl LoadedSpec {
    /// The IR.
    pub fn spec(&self) -> &Spec {
        self.checked.spec()
    }
    /// An instruction by name.
    pub fn instruction(&self, name: &str) -> Option<Checked<'_>> {
        self.checked.find(name)
    }
    /// Every instruction, in order.
    pub fn instructions(&self) -> impl Iterator<Item = Checked<'_>> {
        self.checked.instructions()
    }
    /// The spec with only the instructions `keep` accepts (in the spec's order), validated
    /// again: what a command compiles when it needs a few instructions of a large file.
    pub fn subset(&self, keep: impl Fn(&str) -> bool) -> Result<LoadedSpec, Vec<Diag>> {
        Ok(LoadedSpec {
            path: self.path.clone(),
            checked: self.checked.subset(keep)?,
        })
    }
    /// One instruction per distinct arithmetic (the first), with how many instructions
    /// share that arithmetic.
    pub fn distinct(&self) -> impl Iterator<Item = (Checked<'_>, usize)> {
        let info = self.checked.info();
        let mut count = vec![0; info.arithmetic_count()];
        for i in 0..self.checked.len() {
            count[info.arithmetic_index(i)] += 1;
        }
        self.checked
            .distinct()
            .map(move |(i, c)| (c, count[info.arithmetic_index(i)]))
    }
}

/// Why a spec could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    Io(PathBuf, std::io::Error),
    Invalid(Box<Diagnostics>),
}

impl LoadError {
    /// Render for stderr.
    pub fn render(&self, color: bool) -> String {
        match self {
            LoadError::Io(p, e) => format!("error: cannot read {}: {e}\n", p.display()),
            LoadError::Invalid(d) => d.render(color),
        }
    }
}

/// Parse and check one file.
pub fn load_file(path: &Path) -> Result<LoadedSpec, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::Io(path.to_path_buf(), e))?;
    let checked = mmac_compiler::compile(&path.display().to_string(), &text)
        .map_err(|d| LoadError::Invalid(Box::new(d)))?;
    Ok(LoadedSpec {
        path: path.to_path_buf(),
        checked,
    })
}

/// The file `path` with instruction `name` alone checked: its formats and pipelines are
/// checked as [`load_file`] checks them, but of its instruction families only `name` is
/// instantiated and validated, so the spec returned holds that instruction alone. This is
/// what a command that runs one instruction needs: a large file (Blackwell declares over
/// 10,000 instructions) costs one instantiation, not one per instruction. Where that
/// check fails (the instruction is not declared, or has an error), the whole file is
/// checked as [`load_file`] does, so that the diagnostics are the whole file's and a
/// file without `name` comes back whole (the caller names the instruction missing, with
/// the closest name). Errors in the other instructions' families are not reported when
/// `name` checks: `mmac check` reports them.
pub fn load_instruction(path: &Path, name: &str) -> Result<LoadedSpec, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::Io(path.to_path_buf(), e))?;
    let file_name = path.display().to_string();
    let checked =
        match mmac_compiler::compile_instruction_with_overrides(&file_name, &text, name, &[]) {
            Ok(one) => one,
            Err(_) => mmac_compiler::compile(&file_name, &text)
                .map_err(|d| LoadError::Invalid(Box::new(d)))?,
        };
    Ok(LoadedSpec {
        path: path.to_path_buf(),
        checked,
    })
}

/// The `.mma` files a path names: the file itself, or every `.mma` below a folder.
pub fn spec_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if path.is_dir() {
        let mut out = crate::vectors::files_with_extension(path, "mma")?;
        out.sort();
        Ok(out)
    } else {
        // a missing file is reported by the read that follows
        Ok(vec![path.to_path_buf()])
    }
}

/// Load every spec under a path; failures are returned beside the specs that loaded.
pub fn load_all(path: &Path) -> (Vec<LoadedSpec>, Vec<LoadError>) {
    let files = match spec_files(path) {
        Ok(f) => f,
        Err(e) => return (vec![], vec![LoadError::Io(path.to_path_buf(), e)]),
    };
    let mut ok = vec![];
    let mut errs = vec![];
    for f in files {
        match load_file(&f) {
            Ok(s) => ok.push(s),
            Err(e) => errs.push(e),
        }
    }
    (ok, errs)
}

/// Architectures that several of `specs` declare, each with the files that declare it
/// (libraries without instructions are not counted). `mmac test` refuses to guess which
/// of them a vector file means.
pub fn duplicate_archs(specs: &[LoadedSpec]) -> Vec<(String, Vec<PathBuf>)> {
    let mut by_arch: Vec<(String, Vec<PathBuf>)> = vec![];
    for s in specs.iter().filter(|s| !s.checked.is_empty()) {
        match by_arch.iter_mut().find(|(a, _)| a == s.checked.arch()) {
            Some((_, files)) => files.push(s.path.clone()),
            None => by_arch.push((s.checked.arch().to_string(), vec![s.path.clone()])),
        }
    }
    by_arch.retain(|(_, files)| files.len() > 1);
    by_arch
}
