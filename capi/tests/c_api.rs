//! libmmac from C: a program built against include/mmac.h and the library this package
//! builds loads specs at run time. It reproduces real-GPU captures of an instruction the
//! ahead-of-time objects lack (Blackwell's composed fp8 `mma.sync`), suggests a name for
//! a misspelled instruction, and reports a broken spec with its file, line and column.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The folder holding libmmac.so: the one cargo put this test's executable in. The
/// package's lib is also an rlib, so building this test builds (and rebuilds) the shared
/// library beside it; the copy `cargo build` places one folder up may be stale.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().to_path_buf()
}

fn build(dir: &Path) -> PathBuf {
    build_program(dir, "run_spec")
}

/// `tests/NAME.c` compiled and linked against libmmac.
fn build_program(dir: &Path, name: &str) -> PathBuf {
    let lib = library_dir();
    assert!(
        lib.join("libmmac.so").is_file() || lib.join("libmmac.dylib").is_file(),
        "libmmac in {}",
        lib.display()
    );
    let exe = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let o = Command::new(cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("include"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/{name}.c")))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lmmac")
        .output()
        .expect("a C compiler (cc, or $CC)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    exe
}

fn run(exe: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(exe)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// A sparse instruction through `mmac_sparse_dot`: vectors `mmac gen` wrote (with `pos=`)
/// pass, the dense entry refuses it, and a position out of the pattern is an error.
#[test]
fn c_program_runs_a_sparse_instruction_with_its_positions() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    let vectors = dir.path().join("sp.mmv");
    let mmac = library_dir().join("../mmac");
    let mmac = if mmac.is_file() {
        mmac
    } else {
        library_dir().join("mmac")
    };
    let o = Command::new(&mmac)
        .args([
            "gen",
            "specs/ampere.mma",
            "--instr",
            "mma.sp.m16n8k32.f32.f16.f16.f32",
            "-n",
            "64",
            "-o",
        ])
        .arg(&vectors)
        .current_dir(repo())
        .output()
        .expect("the mmac command beside the library");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&vectors).unwrap();
    let cases = text.lines().filter(|l| l.starts_with("c=")).count();
    let v = vectors.display().to_string();
    let (code, out) = run(&exe, &["specs/ampere.mma", &v]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out.trim(), format!("{cases} passed, 0 failed"));
    // the dense entry refuses it, saying which entry takes it
    let (code, out) = run(
        &exe,
        &[
            "specs/ampere.mma",
            "--find",
            "mma.sp.m16n8k32.f32.f16.f16.f32",
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("k=32")
            && out.contains("stored=16 mmac_dot rc=4")
            && out.contains("call mmac_sparse_dot"),
        "{out}"
    );
    // the first case's second position made equal to its first: the engine refuses it
    let at = text.find("\nc=").unwrap();
    let at = at + text[at..].find(" pos=").unwrap() + 5;
    let first = at + text[at..].find(',').unwrap();
    let second = first + 1 + text[first + 1..].find(',').unwrap();
    let broken_text = format!(
        "{}{}{}",
        &text[..first + 1],
        &text[at..first],
        &text[second..]
    );
    let broken = dir.path().join("broken.mmv");
    std::fs::write(&broken, broken_text).unwrap();
    let (code, out) = run(&exe, &["specs/ampere.mma", &broken.display().to_string()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("rc=4"), "{out}");
}

#[test]
fn c_program_loads_a_spec_at_run_time() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    let files = [
        "tests/silicon/B200/E4M3_fp32.mmv",
        "tests/silicon/B200/E5M2_fp16.mmv",
    ];
    let mut args = vec!["specs/blackwell.mma"];
    args.extend(files);
    let (code, out) = run(&exe, &args);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out.trim(), "400 passed, 0 failed");

    let (code, out) = run(
        &exe,
        &["specs/hopper.mma", "--find", "mma.m16n8k16.f32.f16.f16.f31"],
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        out.trim(),
        "no instruction `mma.m16n8k16.f32.f16.f16.f31`; did you mean `mma.m16n8k16.f32.f16.f16.f32`?"
    );

    let broken = dir.path().join("broken.mma");
    std::fs::write(
        &broken,
        "arch x\nimport std\ninstruction y {\n    shape 1 x 1 x 4\n",
    )
    .unwrap();
    let (code, out) = run(&exe, &[broken.to_str().unwrap(), "--find", "y"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("broken.mma:4:20]"), "{out}");
    assert!(
        out.contains("`instruction y` is missing its closing `}`"),
        "{out}"
    );

    // nesting deep enough to overflow the program's stack is a load error, not SIGSEGV
    let deep = dir.path().join("deep.mma");
    let n = 100_000;
    std::fs::write(
        &deep,
        format!(
            "arch x\nimport std\ninstruction y {{\n shape 1 x 1 x 16\n types a = f16, b = f16, c = f32, d = f32\n uses t_fdpa(F = {}25{}, L = 16, e_zero = -133)\n}}\n",
            "(".repeat(n),
            ")".repeat(n)
        ),
    )
    .unwrap();
    let (code, out) = run(&exe, &[deep.to_str().unwrap(), "--find", "y"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("mmac::too-deep"), "{out}");
}

/// `mmac_warp_mma` on register images of m16n8k16 f16 equals `mmac_dot` on the matrices
/// `tests/warp.c` unpacks by the PTX ISA's formulas, element for element; the fragment
/// sizes (f64 registers as two words), and the errors: NULL pointers, an unknown
/// operand, an instruction without a layout (named in `mmac_last_error`); a sparse
/// instruction's metadata and selector, and their refusals; a wgmma across a warpgroup
/// with B given as its matrix.
#[test]
fn c_program_runs_a_warp_on_register_images() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_program(dir.path(), "warp");
    let (code, out) = run(
        &exe,
        &[
            "specs/ampere.mma",
            "specs/examples/dp4.mma",
            "dp4.f32.e4m3.e4m3.f32",
            "specs/hopper.mma",
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    // 3 sizes, 8 x 128 elements of D, 2 f64 sizes, 10 error checks, 8 of the sparse
    // instruction's metadata and selector; the wgmma: found, 3 sizes, the call, 512
    // elements of D
    assert_eq!(out.trim(), "1564 passed, 0 failed");
}
