//! The command-line contract: output streams, exit codes and formats other tools rely on.

mod support;

use support::{mmac, mmac_command, stderr, stdout};

use std::path::Path;

#[test]
fn check_exit_codes() {
    let ok = mmac(&["check", "specs/hopper.mma", "specs/cdna3.mma"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(stdout(&ok).is_empty(), "check writes nothing to stdout");
    let bad = mmac(&[
        "check",
        "specs/hopper.mma",
        "tests/checker/fail/unknown_name.mma",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    let err = stderr(&bad);
    assert!(
        err.contains("unknown name `f61`") && err.contains("unknown_name.mma:6:"),
        "{err}"
    );
    // an unreadable file is bad input (2), worse than a failed check (1)
    let missing = mmac(&["check", "no/such/file.mma"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("cannot read no/such/file.mma"));
    let both = mmac(&[
        "check",
        "no/such/file.mma",
        "tests/checker/fail/unknown_name.mma",
        "specs/hopper.mma",
    ]);
    assert_eq!(both.status.code(), Some(2));
    let err = stderr(&both);
    assert!(
        err.contains("unknown name `f61`") && err.contains("specs/hopper.mma: ok"),
        "every file is checked: {err}"
    );
}

#[test]
fn list_one_line_per_instruction() {
    let o = mmac(&["list", "specs/cdna3.mma"]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 41);
    assert!(
        out.contains(
            "v_mfma_f32_16x16x32_fp8_fp8\tm16n16k32\ta=fp8 b=fp8 c=f32 d=f32\tgtr_fdpa\tF=24\tevidence=model\n"
        ),
        "{out}"
    );
}

#[test]
fn run_prints_d_and_value() {
    let o = mmac(&[
        "run",
        "specs/hopper.mma",
        "--instr",
        "mma.m16n8k8.f32.f16.f16.f32",
        "--c",
        "3f800000",
        "--a",
        "3c00,3c00,0,0,0,0,0,0",
        "--b",
        "3c00,4000,0,0,0,0,0,0",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "d=40800000 4\n");
}

#[test]
fn run_trace_shows_every_stage() {
    // 1 + 2^-22 + 2^-26: the alignment at F = 25 truncates the 2^-26 product away
    let o = mmac(&[
        "run",
        "specs/hopper.mma",
        "--instr",
        "mma.m16n8k8.f32.f16.f16.f32",
        "--c",
        "3f800000",
        "--a",
        "0400,0100,0,0,0,0,0,0",
        "--b",
        "1c00,1400,0,0,0,0,0,0",
        "--trace",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    insta::assert_snapshot!(stdout(&o));
}

/// The trace of a composed instruction shows every step: the conversions, each run with
/// the k positions it takes and its own trace, and the final addition.
#[test]
fn run_trace_shows_every_step_of_a_composed_instruction() {
    // c = 1, a product 2^-4 at k = 0 (the run over k mod 4 in {0, 1}) and 2^-6 at k = 2
    // (the run over {2, 3}, whose c is the first run's result); c is added last
    let o = mmac(&[
        "run",
        "specs/hopper.mma",
        "--instr",
        "mma.m16n8k32.f16.e4m3.e4m3.f16",
        "--c",
        "3c00",
        "--a",
        "38,0,20,0",
        "--b",
        "18,0,20,0",
        "--pad",
        "--trace",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    insta::assert_snapshot!(stdout(&o));
}

#[test]
fn run_rejects_bad_operands() {
    let base = [
        "run",
        "specs/hopper.mma",
        "--instr",
        "mma.m16n8k8.f32.f16.f16.f32",
        "--c",
        "0",
    ];
    let wrong_count = mmac(&[&base[..], &["--a", "1,2", "--b", "1,2"]].concat());
    assert_eq!(wrong_count.status.code(), Some(2));
    assert!(
        stderr(&wrong_count)
            .contains("a has 2 elements, but `mma.m16n8k8.f32.f16.f16.f32` takes 8"),
        "{}",
        stderr(&wrong_count)
    );
    let bad_hex = mmac(
        &[
            &base[..],
            &["--a", "1,zz,0,0,0,0,0,0", "--b", "0,0,0,0,0,0,0,0"],
        ]
        .concat(),
    );
    assert_eq!(bad_hex.status.code(), Some(2));
    assert!(stderr(&bad_hex).contains("--a element 1: `zz` is not a hex encoding"));
    let too_wide = mmac(
        &[
            &base[..],
            &["--a", "10000,0,0,0,0,0,0,0", "--b", "0,0,0,0,0,0,0,0"],
        ]
        .concat(),
    );
    assert_eq!(too_wide.status.code(), Some(2));
    assert!(stderr(&too_wide).contains("does not fit `f16`"));
    let unknown = mmac(&[
        "run",
        "specs/hopper.mma",
        "--instr",
        "mma.nope",
        "--c",
        "0",
        "--a",
        "0",
        "--b",
        "0",
    ]);
    assert_eq!(unknown.status.code(), Some(2));
}

#[test]
fn test_summary_line_and_exit_code() {
    let ok = mmac(&["test", "specs", "--vectors", "tests/data/hopper_small.mmv"]);
    assert_eq!(ok.status.code(), Some(0), "{}{}", stdout(&ok), stderr(&ok));
    assert_eq!(stdout(&ok).lines().last(), Some("3 passed, 0 failed"));
    // tests/data also holds a file of an architecture no spec declares (skipped and
    // counted) and one naming an instruction Hopper does not have (failed)
    let mixed = mmac(&["test", "specs", "--vectors", "tests/data"]);
    assert_eq!(mixed.status.code(), Some(1));
    let out = stdout(&mixed);
    assert!(
        out.contains(
            "SKIP tests/data/unknown_arch.mmv: no given spec declares arch `hopperx` (1 case)"
        ),
        "{out}"
    );
    assert!(
        out.contains("FAIL tests/data/missing_instruction.mmv: arch `hopper` declares no instruction `mma.m16n8k8.f32.f16.f16.f33` (2 cases)\n  help: did you mean `mma.m16n8k8.f32.f16.f16.f32`?"),
        "{out}"
    );
    assert_eq!(out.lines().last(), Some("3 passed, 2 failed, 1 skipped"));
    for missing in [
        ["test", "no/such.mma", "--vectors", "tests/data"],
        ["test", "specs", "--vectors", "no/such/vectors"],
    ] {
        let o = mmac(&missing);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains(": no such file or folder"),
            "{}",
            stderr(&o)
        );
    }
}

/// One spec against every architecture's vectors: the other architectures' files are
/// skipped and counted, the run passes.
#[test]
fn test_skips_architectures_no_spec_declares() {
    let o = mmac(&["test", "specs/hopper.mma", "--vectors", "tests/vectors"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    let cases = |dir: &str| -> usize {
        let mut n = 0;
        for e in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)).unwrap() {
            let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
            n += text.lines().filter(|l| l.starts_with("c=")).count();
        }
        n
    };
    let hopper = cases("tests/vectors/hopper");
    // every other architecture's folder (the README beside them holds no case)
    let others: usize =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir() && !p.ends_with("hopper"))
            .map(|p| cases(p.to_str().unwrap()))
            .sum();
    assert_eq!(
        out.lines().last(),
        Some(format!("{hopper} passed, 0 failed, {others} skipped").as_str())
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("SKIP tests/vectors/cdna3/v_mfma_f32_16x16x32_fp8_fp8.mmv: no given spec declares arch `cdna3` (")),
        "{out}"
    );
    assert!(!out.contains("SKIP tests/vectors/hopper/"), "{out}");
}

#[test]
fn help_and_usage_errors() {
    let help = mmac(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(stdout(&help).contains("Usage: mmac"));
    let bad = mmac(&["frobnicate"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("unrecognized subcommand"));
}

#[test]
fn probe_prints_the_battery() {
    let one = mmac(&[
        "probe",
        "specs/hopper.mma",
        "--instr",
        "mma.m16n8k16.f32.f16.f16.f32",
    ]);
    assert_eq!(one.status.code(), Some(0), "{}", stderr(&one));
    let out = stdout(&one);
    assert!(out.starts_with("mma.m16n8k16.f32.f16.f16.f32\n"), "{out}");
    assert!(
        out.contains("1 + 2^-25 (alignment F = 25)") && out.contains("d=3f800000 1"),
        "{out}"
    );
    let all = mmac(&["probe", "specs/volta.mma"]);
    assert_eq!(
        stdout(&all)
            .lines()
            .filter(|l| l.starts_with("mma."))
            .count(),
        3
    );
    let bad = mmac(&["probe", "specs/volta.mma", "--instr", "nope"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn show_prints_a_resolved_spec_that_checks() {
    let o = mmac(&[
        "show",
        "specs/hopper.mma",
        "--instr",
        "wgmma.m64n8k32.f32.e4m3.e4m3",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("align products keep 13 bits round toward_zero, c keep 13 bits round toward_zero to max exponent"), "{out}");
    assert!(
        out.contains("normalize to out precision 13 round toward_zero overflow inf"),
        "{out}"
    );
    assert!(mmac_compiler::compile("shown.mma", &out).is_ok());
}

/// Run mmac with stdout on a pipe that the reader closes after `keep` lines (at once for
/// 0), as `mmac ... | head -n keep` does; returns the exit code and stderr.
fn with_closed_stdout(args: &[&str], keep: usize) -> (Option<i32>, String) {
    use std::io::BufRead;
    let mut child = mmac_command()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mmac runs");
    let pipe = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(pipe).lines();
    for _ in 0..keep {
        lines.next().expect("a line").expect("readable");
    }
    // the pipe's read end closed before the wait (kept open, a listing longer than the
    // pipe's buffer would block the writer for ever)
    drop(lines);
    let o = child.wait_with_output().unwrap();
    (o.status.code(), stderr(&o))
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let dir = tempfile::TempDir::new().unwrap();
    let f16 = mmac_compiler::format::builtin("f16").unwrap();
    let f32 = mmac_compiler::format::builtin("f32").unwrap();
    let zeros = |rows, cols| mmac_runtime::matrix::Matrix::filled(rows, cols, 0);
    let path = |name: &str| dir.path().join(name).display().to_string();
    mmac_runtime::matrix::write(dir.path().join("a.npy").as_path(), &f16, &zeros(16, 16)).unwrap();
    mmac_runtime::matrix::write(dir.path().join("b.npy").as_path(), &f16, &zeros(16, 8)).unwrap();
    mmac_runtime::matrix::write(dir.path().join("c.npy").as_path(), &f32, &zeros(16, 8)).unwrap();
    let hopper_f16 = ["--instr", "mma.m16n8k16.f32.f16.f16.f32"];
    let (a, b, c, d) = (path("a.npy"), path("b.npy"), path("c.npy"), path("d.npy"));
    let runs: Vec<(Vec<&str>, usize)> = vec![
        (vec!["list", "specs/hopper.mma"], 1),
        (vec!["probe", "specs/hopper.mma"], 1),
        (vec!["list", "specs/hopper.mma"], 0),
        (vec!["list", "specs/hopper.mma", "--markdown"], 0),
        (vec!["probe", "specs/volta.mma"], 0),
        ([&["show", "specs/hopper.mma"][..], &hopper_f16].concat(), 0),
        (vec!["compile", "specs/volta.mma", "--emit", "clif"], 1),
        (vec!["compile", "specs/volta.mma"], 0),
        (
            vec!["test", "specs", "--vectors", "tests/data/hopper_small.mmv"],
            0,
        ),
        (
            [
                &["run", "specs/hopper.mma"][..],
                &hopper_f16,
                &["--c", "0", "--a", "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0"],
                &["--b", "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0"],
            ]
            .concat(),
            0,
        ),
        (
            [&["bench", "specs/hopper.mma"][..], &hopper_f16].concat(),
            0,
        ),
        (
            [
                &["mma", "specs/hopper.mma"][..],
                &hopper_f16,
                &["--a", &a, "--b", &b, "--c", &c, "-o", &d, "--report"],
            ]
            .concat(),
            0,
        ),
    ];
    for (args, keep) in runs {
        let (code, err) = with_closed_stdout(&args, keep);
        assert!(
            !err.contains("panicked") && code != Some(101),
            "`mmac {}` after {keep} lines: exit {code:?}\n{err}",
            args.join(" ")
        );
        assert_eq!(code, Some(0), "`mmac {}`: {err}", args.join(" "));
    }
}

/// A misspelled --instr gets the closest name; a name near none points at `mmac list`.
#[test]
fn misspelled_instructions_get_a_suggestion() {
    let typo = "mma.m16n8k16.f32.f16.f16.f33";
    let (right, hint) = (
        "help: did you mean `mma.m16n8k16.f32.f16.f16.f32`?",
        "help: `mmac list specs/hopper.mma` shows its instructions",
    );
    let k16 = "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0";
    let commands: Vec<Vec<&str>> = vec![
        vec!["run", "--c", "0", "--a", k16, "--b", k16],
        vec!["show"],
        vec!["layout"],
        vec!["probe"],
        vec!["bench"],
        vec![
            "mma", "--a", "a.npy", "--b", "b.npy", "--c", "c.npy", "-o", "d.npy",
        ],
        vec!["gemm", "--a", "a.npy", "--b", "b.npy", "-o", "d.npy"],
    ];
    for cmd in commands {
        for (name, want) in [(typo, right), ("frobnicate", hint)] {
            let mut args = vec![cmd[0], "specs/hopper.mma", "--instr", name];
            args.extend(&cmd[1..]);
            let o = mmac(&args);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{err}");
            assert!(
                err.contains(&format!(
                    "error: `specs/hopper.mma` declares no instruction `{name}`\n  {want}\n"
                )),
                "mmac {}: {err}",
                cmd[0]
            );
        }
    }
}

/// A command that runs one instruction checks that instruction (and the file's formats
/// and pipelines), not every family of the file: an error in another family does not stop
/// it, and `mmac check` still reports that error. Where the instruction itself has an
/// error, the diagnostics are the whole file's, as before.
#[test]
fn one_instruction_commands_check_that_instruction() {
    let dir = tempfile::TempDir::new().unwrap();
    let spec = dir.path().join("two.mma");
    std::fs::write(
        &spec,
        "arch two \"one sound family, one broken\"\nimport std\n\n\
         instruction good.f32.e4m3.e4m3.f32 {\n    shape 1 x 1 x 4\n    \
         types a = e4m3, b = e4m3, c = f32, d = f32\n    evidence assumption\n    \
         uses t_fdpa(F = 20, L = 4, e_zero = -133, rho = nearest_even)\n}\n\n\
         instruction bad.f32.e4m3.e4m3.f32 {\n    shape 1 x 1 x 4\n    \
         types a = e4m3, b = e4m3, c = f32, d = f32\n    evidence assumption\n    \
         uses t_fdpa(F = 20, L = 4, e_zero = -133, rho = sideways)\n}\n",
    )
    .unwrap();
    let spec = spec.to_str().unwrap();
    let k4 = "38,38,38,38"; // four 1.0 in e4m3
    let run = |name: &str| {
        mmac(&[
            "run", spec, "--instr", name, "--c", "0", "--a", k4, "--b", k4,
        ])
    };
    let good = run("good.f32.e4m3.e4m3.f32");
    assert_eq!(good.status.code(), Some(0), "{}", stderr(&good));
    assert!(stdout(&good).starts_with("d=40800000"), "{}", stdout(&good)); // 4.0
    let check = mmac(&["check", spec]);
    assert_eq!(check.status.code(), Some(1));
    assert!(stderr(&check).contains("sideways"), "{}", stderr(&check));
    let bad = run("bad.f32.e4m3.e4m3.f32");
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(stderr(&bad), stderr(&check));
    let typo = run("good.f32.e4m3.e4m3.f33");
    assert_eq!(typo.status.code(), Some(1), "{}", stderr(&typo));
    assert_eq!(stderr(&typo), stderr(&check));
}

/// `mmac run` with the Hopper f16 instruction (K = 8) and extra arguments: (exit, stdout,
/// stderr).
fn run_f16(extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec![
        "run",
        "specs/hopper.mma",
        "--instr",
        "mma.m16n8k8.f32.f16.f16.f32",
    ];
    args.extend(extra);
    let o = mmac(&args);
    (o.status.code(), stdout(&o), stderr(&o))
}

#[test]
fn run_takes_exact_decimals() {
    let hex = run_f16(&[
        "--c",
        "3f800000",
        "--a",
        "3800,3400,0400,0,0,0,0,0",
        "--b",
        "4000,c400,8000,0,0,0,0,0",
    ]);
    assert_eq!(hex.0, Some(0), "{}", hex.2);
    assert_eq!(hex.1, "d=3f800000 1\n");
    // the same operands as decimals: 1 + 0.5*2 + 0.25*-4 + 2^-14*-0
    let decimal = run_f16(&[
        "--c",
        "1.0",
        "--a",
        "0.5,.25,6.103515625e-5,0,0,0,0,0",
        "--b",
        "+2,-4.0e0,-0.0,0,0,0,0,0",
    ]);
    assert_eq!(decimal, hex);
    // a value the format cannot hold exactly is refused, never rounded
    let (code, out, err) = run_f16(&[
        "--c",
        "0",
        "--a",
        "0.5,0.1,0,0,0,0,0,0",
        "--b",
        "0,0,0,0,0,0,0,0",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(out.is_empty());
    assert_eq!(
        err,
        "error: --a element 1: 0.1 is not exactly representable in f16\n"
    );
    let (code, _, err) = run_f16(&["--c", "0.1", "--a", "0", "--b", "0", "--pad"]);
    assert_eq!(
        (code, err.as_str()),
        (
            Some(2),
            "error: --c: 0.1 is not exactly representable in f32\n"
        )
    );
    // specials
    let (code, out, _) = run_f16(&["--c", "-INF", "--a", "nan", "--b", "1.0", "--pad"]);
    assert_eq!((code, out.as_str()), (Some(0), "d=7fffffff nan\n"));
    // a bare value among decimals is still hex, and a note says so
    let (code, out, err) = run_f16(&["--c", "1.0", "--a", "0.5,2", "--b", "2.0,3c00", "--pad"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        err,
        "note: --a element 1 `2` is read as the hex encoding 0x2 (1.1920928955078125e-7); write `+2` for the number\n",
        "3c00 is no decimal number: no note for it"
    );
    assert_eq!(out, "d=40000000 2\n");
}

#[test]
fn run_takes_signed_integers() {
    let run = |c: &str, a: &str, b: &str| {
        let o = mmac(&[
            "run",
            "specs/ampere.mma",
            "--instr",
            "mma.m16n8k32.s32.s8.s8.s32",
            "--c",
            c,
            "--a",
            a,
            "--b",
            b,
            "--pad",
        ]);
        (o.status.code(), stdout(&o), stderr(&o))
    };
    // 12 + (-3)*5 + 2*(-1) = -5
    let decimal = run("+12", "-3,+2", "+5,-1");
    assert_eq!(decimal.0, Some(0), "{}", decimal.2);
    assert_eq!(decimal.1, "d=fffffffb -5\n");
    assert_eq!(run("0000000c", "fd,02", "05,ff"), decimal);
    let (code, _, err) = run("+12", "+128", "+1");
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--a element 0: +128 is not exactly representable in s8"),
        "{err}"
    );
    let (code, _, err) = run("+12", "0.5", "+1");
    assert_eq!(code, Some(2));
    assert!(
        err.contains("0.5 is not exactly representable in s8"),
        "{err}"
    );
}

#[test]
fn short_lists_need_pad() {
    let full = run_f16(&[
        "--c",
        "1.0",
        "--a",
        "0.5,0,0,0,0,0,0,0",
        "--b",
        "2.0,0,0,0,0,0,0,0",
    ]);
    assert_eq!(full.0, Some(0), "{}", full.2);
    assert_eq!(full.1, "d=40000000 2\n");
    let padded = run_f16(&["--c", "1.0", "--a", "0.5", "--b", "2.0", "--pad"]);
    assert_eq!(padded, full);
    let (code, out, err) = run_f16(&["--c", "1.0", "--a", "0.5", "--b", "2.0"]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty());
    assert_eq!(
        err,
        "error: --a has 1 elements, but `mma.m16n8k8.f32.f16.f16.f32` takes 8\n  help: `--pad` fills missing a/b lanes with +0 and missing scale factors with 1.0\n"
    );
    // too many lanes are an error even with --pad
    let (code, _, err) = run_f16(&["--c", "0", "--a", "0,0,0,0,0,0,0,0,0", "--b", "0", "--pad"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--a has 9 elements"), "{err}");

    // block-scaled: missing scale factors are 1.0 (ue4m3 0x38)
    let scaled = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "specs/rtx_blackwell.mma",
            "--instr",
            "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3",
            "--c",
            "1.0",
            "--a",
            "0.5,1.5",
            "--b",
            "3.0,-2",
            "--pad",
        ];
        args.extend(extra);
        let o = mmac(&args);
        (o.status.code(), stdout(&o), stderr(&o))
    };
    let ones = scaled(&["--sa", "38,38,38,38", "--sb", "1.0,1.0,1.0,1.0"]);
    assert_eq!(ones.0, Some(0), "{}", ones.2);
    assert_eq!(ones.1, "d=bf000000 -0.5\n"); // 1 + 0.5*3 + 1.5*-2
    assert_eq!(scaled(&[]), ones);
    assert_eq!(scaled(&["--sa", "38"]), ones);
    let help = run_f16(&["--c", "0", "--a", "0", "--b", "0", "--sa", "1.0", "--pad"]);
    assert!(
        help.2
            .contains("takes no scale factors, but --sa was given"),
        "{}",
        help.2
    );
}

/// A symbolic link loop under --vectors or the spec folder is bad input, named.
#[cfg(unix)]
#[test]
fn symlink_loops_are_reported() {
    let dir = tempfile::TempDir::new().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::os::unix::fs::symlink("..", dir.path().join("sub/up")).unwrap();
    let d = dir.path().to_str().unwrap();
    for args in [
        ["test", "specs/hopper.mma", "--vectors", d],
        ["test", d, "--vectors", "tests/data/hopper_small.mmv"],
    ] {
        let o = mmac(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("symbolic link loop: {d}/sub/up leads back to {d}")),
            "{err}"
        );
    }
}

/// `mmac show` ends with the datapath as comments (still a spec that checks) and
/// `mmac list --json` carries it: the validator's accumulator widths and item counts, the
/// chain length, the normalisers.
#[test]
fn show_and_list_give_the_datapath_from_the_validator() {
    let (file, name) = ("specs/cdna3.mma", "v_mfma_f32_16x16x32_fp8_fp8");
    let spec = mmac_runtime::specs::load_file(Path::new(file)).unwrap();
    let checked = spec.instruction(name).unwrap();
    let inst = checked.instruction();
    let fused = checked.info().fused().unwrap();
    let o = mmac(&["show", file, "--instr", name]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(mmac_compiler::compile("shown.mma", &out).is_ok());
    assert!(
        out.contains("16 products per chained step, 2 steps"),
        "{out}"
    );
    for node in &fused.nodes {
        let want = format!("{} terms to the max exponent", node.items);
        assert!(out.contains(&want), "{want}: {out}");
        assert!(
            out.contains(&format!("adder {} bits", node.width_bits)),
            "{out}"
        );
    }
    let o = mmac(&["list", file, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = v["instructions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap();
    let d = &row["datapath"];
    assert_eq!(d["chain"], 16);
    assert_eq!(d["chained_steps"], inst.k() / 16);
    let aligns = d["alignments"].as_array().unwrap();
    assert_eq!(aligns.len(), fused.nodes.len());
    for (a, node) in aligns.iter().zip(&fused.nodes) {
        assert_eq!(a["adder_bits"], node.width_bits);
        assert_eq!(a["terms"], node.items);
    }
    let norms = d["normalisers"].as_array().unwrap();
    assert_eq!(norms.len(), 2);
    assert_eq!(norms[1]["precision_bits"], 24);
    assert_eq!(norms[1]["rounding"], "RNE");
    assert_eq!(row["pipeline"], "gtr_fdpa");
}
