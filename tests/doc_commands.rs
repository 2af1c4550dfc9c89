//! Every command shown in the docs runs as written: each ```console block of README.md
//! and docs/*.md is run, and what its commands print must match the lines the block shows.
//!
//! A `$ ` line is a command (a line ending in `\` continues it on the next line); the lines
//! up to the next command are what it prints, stdout and stderr together as on a terminal.
//! A line `...` matches any run of lines (also none). A command whose block shows no
//! output must succeed. The commands of one file run in order in one `sh -c`, as a reader
//! follows a page in one terminal: a variable one command sets (the tutorial's `A=...`)
//! is seen by the next, also in a later block. The built `mmac` is first on PATH. They run in
//! a fresh temporary folder that holds a symbolic link to every top-level entry of the
//! repository: paths such as `specs/hopper.mma` read the repository, and a file a command
//! writes (`-o D.npy`) lands in the temporary folder, not in the checkout.
//!
//! Commands that need more than a clone (cargo itself, `../shared`) are not shown in
//! ```console blocks.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// One command of a block and the lines the block shows for it.
#[derive(Debug)]
struct Shown {
    /// 1-based line of the command in its file.
    line: usize,
    command: String,
    output: Vec<String>,
}

fn console_blocks(text: &str) -> Vec<Vec<Shown>> {
    let mut blocks = vec![];
    let mut lines = text.lines().enumerate();
    while let Some((_, l)) = lines.next() {
        if l.trim() != "```console" {
            continue;
        }
        let mut block: Vec<Shown> = vec![];
        let mut continued = false;
        for (n, l) in lines.by_ref() {
            if l.trim() == "```" {
                break;
            }
            if continued {
                let cmd = &mut block.last_mut().unwrap().command;
                cmd.push('\n');
                cmd.push_str(l);
                continued = l.ends_with('\\');
            } else if let Some(cmd) = l.strip_prefix("$ ") {
                block.push(Shown {
                    line: n + 1,
                    command: cmd.to_string(),
                    output: vec![],
                });
                continued = cmd.ends_with('\\');
            } else {
                let shown = block
                    .last_mut()
                    .unwrap_or_else(|| panic!("output before any command at line {}", n + 1));
                shown.output.push(l.trim_end().to_string());
            }
        }
        blocks.push(block);
    }
    blocks
}

/// Do `got` lines match the `want` pattern (`...` for any run of lines)?
fn matches(want: &[String], got: &[String]) -> bool {
    match want.split_first() {
        None => got.is_empty(),
        Some((w, rest)) if w == "..." => (0..=got.len()).any(|i| matches(rest, &got[i..])),
        Some((w, rest)) => got
            .split_first()
            .is_some_and(|(g, more)| g == w && matches(rest, more)),
    }
}

/// The folder the commands run in: a link to every top-level entry of the repository.
fn workdir(root: &Path) -> tempfile::TempDir {
    let dir = tempfile::TempDir::new().unwrap();
    for e in std::fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap();
        if name == ".git" || name == "target" {
            continue;
        }
        std::os::unix::fs::symlink(&p, dir.path().join(name)).unwrap();
    }
    dir
}

const END: &str = "@@mmac-doc-command-end";

/// Run commands in order in one shell; each command's output lines and exit code.
fn run_in_order(root: &Path, commands: &[&Shown]) -> Vec<(Vec<String>, i32)> {
    let mut script = String::from("exec 2>&1\n");
    for s in commands {
        script.push_str(&s.command);
        script.push_str(&format!("\nprintf '\\n{END} %d\\n' $?\n"));
    }
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_mmac")).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let dir = workdir(root);
    let o = Command::new("sh")
        .args(["-c", &script])
        .current_dir(dir.path())
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let mut runs = vec![];
    let mut lines: Vec<String> = vec![];
    for l in text.lines() {
        if let Some(code) = l.strip_prefix(END) {
            // the marker's own leading newline ends the command's last line
            if lines.last().is_some_and(|l| l.is_empty()) {
                lines.pop();
            }
            runs.push((std::mem::take(&mut lines), code.trim().parse().unwrap()));
        } else {
            lines.push(l.trim_end().to_string());
        }
    }
    runs
}

fn doc_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

#[test]
fn documented_commands_print_what_the_docs_show() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut ran = 0;
    let mut failures = vec![];
    for file in doc_files(root) {
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = file.strip_prefix(root).unwrap().display().to_string();
        let blocks = console_blocks(&text);
        let commands: Vec<&Shown> = blocks.iter().flatten().collect();
        if commands.is_empty() {
            continue;
        }
        let runs = run_in_order(root, &commands);
        assert_eq!(
            runs.len(),
            commands.len(),
            "{shown}: a command did not finish"
        );
        for (s, (got, code)) in commands.iter().zip(runs) {
            ran += 1;
            let ok = matches(&s.output, &got) && (code == 0 || !s.output.is_empty());
            if !ok {
                failures.push(format!(
                    "{shown}:{}: $ {}\n--- shown\n{}\n--- printed (exit {code})\n{}",
                    s.line,
                    s.command,
                    s.output.join("\n"),
                    got.join("\n")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
    assert!(ran >= 8, "only {ran} documented commands found");
}

#[test]
fn the_matcher_and_the_parser() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert!(matches(&s(&["a", "...", "d"]), &s(&["a", "b", "c", "d"])));
    assert!(matches(&s(&["a", "...", "d"]), &s(&["a", "d"])));
    assert!(!matches(&s(&["a", "...", "d"]), &s(&["a", "b"])));
    assert!(!matches(&s(&["a"]), &s(&["a", "b"])));
    assert!(!matches(&s(&[]), &s(&["error: x"])));
    let blocks = console_blocks("text\n```console\n$ echo a \\\n  b\na b\n$ true\n```\n");
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0][0].command, "echo a \\\n  b");
    assert_eq!(blocks[0][0].output, ["a b"]);
    assert_eq!((blocks[0][1].line, blocks[0][1].output.len()), (6, 0));
}
