//! The command line under hostile and careless use (issue 24): closed stdout and stderr,
//! runs that test nothing, ambiguous spec folders and vector headers, outputs that name
//! inputs, devices or symbolic links, leftovers of killed runs, text that could inject
//! code into a C header or cases into a vector file, sizes past every limit, thread
//! counts past the cores, and boxes that never answer. Every documented exit code holds.

mod support;

use std::path::Path;
use std::process::{Output, Stdio};
use support::{mmac, mmac_command, root, stderr, stdout};

const HOPPER: &str = "specs/hopper.mma";
const F16: &str = "mma.m16n8k16.f32.f16.f16.f32";

/// Run with stdout (`which = 1`) or stderr (`which = 2`) a pipe whose reader is gone.
fn closed(which: u8, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut c = mmac_command();
    c.args(args);
    if which == 1 {
        c.stdout(Stdio::from(writer)).stderr(Stdio::piped());
    } else {
        c.stderr(Stdio::from(writer)).stdout(Stdio::piped());
    }
    c.output().unwrap()
}

fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

/// A vector file of Hopper f16 whose one case expects the wrong d.
fn failing_vectors(dir: &Path) -> String {
    let p = dir.join("wrong.mmv");
    std::fs::write(
        &p,
        format!(
            "# arch: hopper\n# instruction: {F16}\nc=3f800000 a={} b={} d=40000001\n",
            ["3c00"; 16].join(","),
            [["3c00"].as_slice(), &["0"; 15]].concat().join(",")
        ),
    )
    .unwrap();
    p.display().to_string()
}

#[test]
fn closed_streams_change_no_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let wrong = failing_vectors(dir.path());
    let bad_spec = "tests/checker/fail/unknown_name.mma";
    for which in [1, 2] {
        // success stays success (a closed stderr panicked: exit 101)
        assert_eq!(code(&closed(which, &["check", HOPPER])), Some(0));
        // a failed check stays a failure
        assert_eq!(code(&closed(which, &["check", bad_spec])), Some(1));
        // a failing test stays a failure, a passing one a success
        let o = closed(which, &["test", HOPPER, "--vectors", &wrong]);
        assert_eq!(code(&o), Some(1), "{}", stderr(&o));
        let o = closed(
            which,
            &["test", HOPPER, "--vectors", "tests/data/hopper_small.mmv"],
        );
        assert_eq!(code(&o), Some(0), "{}", stderr(&o));
        // instructions that differ stay different
        let o = closed(
            which,
            &[
                "diff",
                HOPPER,
                F16,
                "specs/cdna3.mma",
                "v_mfma_f32_16x16x16_f16",
                "--trials",
                "1000",
            ],
        );
        assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    }
}

#[test]
fn a_run_that_tests_nothing_fails() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let header = format!("# mmv 1\n# arch: hopper\n# instruction: {F16}\n");
    std::fs::write(d.join("empty.mmv"), "").unwrap();
    std::fs::write(d.join("header_only.mmv"), &header).unwrap();
    std::fs::write(
        d.join("misspelt.mmv"),
        header.replace("hopper", "hoper") + "c=0 a=0 b=0 d=0\n",
    )
    .unwrap();
    std::fs::write(d.join("no_arch.mmv"), format!("# instruction: {F16}\n")).unwrap();
    std::fs::create_dir(d.join("nothing")).unwrap();
    for (what, path, says) in [
        ("an empty file", "empty.mmv", "FAIL"),
        ("a header-only file", "header_only.mmv", "no cases"),
        ("a misspelt arch", "misspelt.mmv", "did you mean `hopper`?"),
        ("no arch header", "no_arch.mmv", "no `# arch:` header"),
        ("an empty folder", "nothing", "no case ran"),
    ] {
        let p = d.join(path).display().to_string();
        let o = mmac(&["test", "specs", "--vectors", &p]);
        assert_eq!(code(&o), Some(1), "{what}:\n{}{}", stdout(&o), stderr(&o));
        let all = stdout(&o) + &stderr(&o);
        assert!(all.contains(says), "{what}: {all}");
    }
}

#[test]
fn one_arch_per_folder_and_one_header_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hopper = std::fs::read_to_string(root().join(HOPPER)).unwrap();
    std::fs::write(d.join("hopper.mma"), &hopper).unwrap();
    std::fs::write(d.join("hopper-old.mma"), hopper.replace("F = 25", "F = 24")).unwrap();
    let o = mmac(&[
        "test",
        &d.display().to_string(),
        "--vectors",
        "tests/data/hopper_small.mmv",
    ]);
    assert_eq!(code(&o), Some(2), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("all declare arch `hopper`"),
        "{}",
        stderr(&o)
    );
    // a second `# arch:` (or a header after the cases) would re-label the cases above it
    let good = std::fs::read_to_string(root().join("tests/data/hopper_small.mmv")).unwrap();
    for (name, text, says) in [
        (
            "relabel.mmv",
            format!("{good}# arch: cdna3\n"),
            "after the first case",
        ),
        (
            "twice.mmv",
            good.replacen("# arch: hopper\n", "# arch: hopper\n# arch: ampere\n", 1),
            "a second `# arch:` header",
        ),
        (
            "version.mmv",
            format!("# mmv 7\n{good}"),
            "this mmac reads version 1",
        ),
    ] {
        let p = d.join(name);
        std::fs::write(&p, text).unwrap();
        let o = mmac(&["test", HOPPER, "--vectors", &p.display().to_string()]);
        assert_eq!(code(&o), Some(1), "{name}: {}", stdout(&o));
        // (a diagnostic: on stderr, the report on stdout)
        assert!(stderr(&o).contains(says), "{name}: {}", stderr(&o));
        assert!(!stdout(&o).contains(says), "{name}: {}", stdout(&o));
    }
}

/// Header lines that describe another instruction (its K, pattern, types or scale factors)
/// are warned about at their line; the cases still run as the named instruction's.
#[test]
fn a_header_that_describes_another_instruction_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(root().join("tests/data/hopper_small.mmv")).unwrap();
    // after `# mmv 1`, `# arch:` and `# instruction: mma.m16n8k8...`
    let mut lines: Vec<&str> = good.lines().collect();
    lines.insert(3, "# k: 16");
    lines.insert(
        4,
        "# sparse: a 2 of 4 over selected (a= holds the stored elements)",
    );
    lines.insert(5, "# types: a=f16 b=f16 c=f32 d=f32");
    let p = dir.path().join("other.mmv");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    let o = mmac(&["test", HOPPER, "--vectors", &p.display().to_string()]);
    assert_eq!(code(&o), Some(0), "{}", stdout(&o));
    let out = stderr(&o);
    let at = |line: usize| format!("warning: {}:{line}: the header says", p.display());
    assert!(
        out.contains(&format!(
            "{} `# k: 16`, but `mma.m16n8k8.f32.f16.f16.f32` has `# k: 8`",
            at(4)
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{} `# sparse: a 2 of 4 over selected`, but",
            at(5)
        )) && out.contains("has no `# sparse:` line: it is dense"),
        "{out}"
    );
    // the types line agrees: no warning
    assert_eq!(out.matches("warning:").count(), 2, "{out}");
}

/// A vector file with a byte that is not UTF-8 fails on its own, at that byte's line and
/// column, and the other files of the folder still run.
#[test]
fn a_file_that_is_not_text_fails_alone_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = std::fs::read(root().join("tests/data/hopper_small.mmv")).unwrap();
    std::fs::write(d.join("good.mmv"), &good).unwrap();
    // the invalid bytes in a comment on line 2, after 12 characters
    let first = good.iter().position(|&b| b == b'\n').unwrap() + 1;
    let bad = [
        &good[..first],
        b"# a comment \xff\xfe here\n",
        &good[first..],
    ]
    .concat();
    std::fs::write(d.join("bad.mmv"), &bad).unwrap();
    let o = mmac(&["test", HOPPER, "--vectors", &d.display().to_string()]);
    assert_eq!(code(&o), Some(1), "{}{}", stdout(&o), stderr(&o));
    let out = stderr(&o);
    let at = format!(
        "{}:2:13: byte 0xff is not UTF-8",
        d.join("bad.mmv").display()
    );
    assert!(out.contains(&at), "{out}");
    // both files' three cases ran: the bad one's lines parse around the bytes
    assert!(stdout(&o).contains("6 passed, 1 failed"), "{}", stdout(&o));
}

#[test]
fn serve_refuses_values_wider_than_their_format_as_test_does() {
    let mut child = mmac_command()
        .args(["serve", HOPPER, "--instr", F16])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        let a = ["13c00"; 16].join(",");
        let b = ["0"; 16].join(",");
        writeln!(stdin, "c=0 a={a} b={b}").unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), Some(2), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("a value 13c00 does not fit `f16`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn outputs_never_replace_inputs_or_special_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = d.join("hopper.mma");
    std::fs::copy(root().join(HOPPER), &spec).unwrap();
    let before = std::fs::read(&spec).unwrap();
    let (a, b) = ("tests/data/A.npy", "tests/data/B.npy");
    let s = spec.display().to_string();
    // -o naming the spec
    for sub in ["gemm", "mma"] {
        let mut args = vec![
            sub,
            s.as_str(),
            "--instr",
            F16,
            "--a",
            a,
            "--b",
            b,
            "-o",
            &s,
        ];
        if sub == "mma" {
            args.extend(["--c", a]);
        }
        let o = mmac(&args);
        assert_eq!(code(&o), Some(2), "{sub}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("is the input FILE"),
            "{sub}: {}",
            stderr(&o)
        );
        assert_eq!(
            std::fs::read(&spec).unwrap(),
            before,
            "{sub} replaced the spec"
        );
    }
    // an object named like its header
    let h = d.join("dp4.h").display().to_string();
    let o = mmac(&[
        "compile",
        "specs/examples/dp4.mma",
        "--emit",
        "obj",
        "-o",
        &h,
    ]);
    assert_eq!(code(&o), Some(2), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("would be written over the object"),
        "{}",
        stderr(&o)
    );
    assert!(!d.join("dp4.h").exists());
    // a device is written through, never replaced by a regular file
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let o = mmac(&[
            "gemm",
            HOPPER,
            "--instr",
            F16,
            "--a",
            a,
            "--b",
            b,
            "-o",
            "/dev/null",
        ]);
        assert_eq!(code(&o), Some(0), "{}", stderr(&o));
        assert!(
            std::fs::metadata("/dev/null")
                .unwrap()
                .file_type()
                .is_char_device()
        );
        // a symbolic link stays a link; its target gets the result
        let target = d.join("D.npy");
        let link = d.join("link.npy");
        std::fs::write(&target, "old").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let l = link.display().to_string();
        let o = mmac(&["gemm", HOPPER, "--instr", F16, "--a", a, "--b", b, "-o", &l]);
        assert_eq!(code(&o), Some(0), "{}", stderr(&o));
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        assert!(std::fs::read(&target).unwrap().starts_with(b"\x93NUMPY"));
    }
}

/// A killed run's temporary file is named after its output and process; the next run
/// writing that output removes it (`kill -9` left `.mmac-*.part` files behind).
#[test]
fn leftovers_of_killed_runs_are_cleaned_up() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.mmv");
    let leftover = dir.path().join(".out.mmv.mmac-4294967295-Ab12Cd.part");
    std::fs::write(&leftover, "half a file").unwrap();
    let o = mmac(&[
        "gen",
        HOPPER,
        "--instr",
        F16,
        "-n",
        "4",
        "-o",
        &out.display().to_string(),
    ]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(!leftover.exists());
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["out.mmv"]);
}

/// Text from a spec or a file name cannot become C code in the header, nor a case in a
/// generated vector file.
#[test]
fn titles_and_paths_are_escaped_where_they_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let dp4 = std::fs::read_to_string(root().join("specs/examples/dp4.mma")).unwrap();
    let evil = dp4.replacen(
        "\"Hypothetical 4-term FP8 dot-product-add unit (examples/rtl)\"",
        "\"*/ __attribute__((constructor)) static void pwn(void) { } /*\"",
        1,
    );
    assert!(evil.contains("pwn"), "the title went in");
    // a newline in the spec's own path, too
    let spec = d.join("dp4\nc=0 a=0 b=0 d=0.mma");
    std::fs::write(&spec, &evil).unwrap();
    let s = spec.display().to_string();
    let obj = d.join("dp4.o").display().to_string();
    let o = mmac(&["compile", &s, "--emit", "obj", "-o", &obj]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let header = std::fs::read_to_string(d.join("dp4.h")).unwrap();
    // every comment opened is closed by mmac's own `*/`, at the end of a line
    for line in header.lines() {
        if let Some(i) = line.find("*/") {
            assert_eq!(line[i..].trim_end(), "*/", "a comment closed early: {line}");
        }
    }
    assert!(header.contains("* / __attribute__"), "{header}");
    // the generated vectors: the path's newline is written escaped, no case is injected
    let mmv = d.join("v.mmv");
    let o = mmac(&[
        "gen",
        &s,
        "--instr",
        "dp4.f32.e4m3.e4m3.f32",
        "-n",
        "3",
        "-o",
        &mmv.display().to_string(),
    ]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&mmv).unwrap();
    let source = text.lines().find(|l| l.starts_with("# source:")).unwrap();
    assert!(source.contains("dp4\\nc=0 a=0 b=0 d=0.mma"), "{source}");
    let cases: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("# cases: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(text.lines().filter(|l| l.starts_with("c=")).count(), cases);
}

#[test]
fn sizes_past_their_limits_are_usage_errors() {
    for (args, says) in [
        (vec!["--k", "1099511627776"], "at most 4194304"),
        (vec!["--k", "9223372036854775808"], "at most 4194304"),
        (
            vec!["--samples", "4611686018427387904"],
            "from 1 to 1073741824",
        ),
        (vec!["--samples", "0"], "from 1 to 1073741824"),
    ] {
        let mut all = vec!["report", HOPPER, F16];
        all.extend(args.iter());
        let o = mmac(&all);
        assert_eq!(code(&o), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    let o = mmac(&["gen", HOPPER, "--instr", F16, "-n", "1099511627776"]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("at most 1073741824"), "{}", stderr(&o));
    // threads: at least one, at most four per core
    let (a, b) = ("tests/data/A.npy", "tests/data/B.npy");
    for (threads, says) in [("0", "at least 1"), ("100000", "four per core")] {
        let o = mmac(&[
            "gemm",
            HOPPER,
            "--instr",
            F16,
            "--a",
            a,
            "--b",
            b,
            "-o",
            "/dev/null",
            "--threads",
            threads,
        ]);
        assert_eq!(code(&o), Some(2), "{threads}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{threads}: {}", stderr(&o));
    }
}

/// A spec none of whose instructions the back ends take: the Verilog back end refuses k
/// past its limit (a usage error, nothing written; beside a smaller instruction, left out
/// with a warning), and an object or library with no instruction in it is not written.
#[test]
fn back_ends_with_nothing_to_write_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let spec = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let big = spec(
        "big.mma",
        "arch big\nimport std\ninstruction huge {\n    shape 1 x 1 x 8192\n    types a = f16, b = f16, c = f32, d = f32\n    uses t_fdpa(F = 24, L = 8192, e_zero = -133)\n}\n",
    );
    let v = dir.path().join("big.v").display().to_string();
    let o = mmac(&["compile", &big, "--emit", "verilog", "-o", &v]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("`huge` has k = 8192: the Verilog back end unrolls at most 4096"),
        "{}",
        stderr(&o)
    );
    assert!(!Path::new(&v).exists());
    let both = spec(
        "both.mma",
        "arch both\nimport std\ninstruction huge {\n    shape 1 x 1 x 8192\n    types a = f16, b = f16, c = f32, d = f32\n    uses t_fdpa(F = 24, L = 8192, e_zero = -133)\n}\ninstruction little {\n    shape 1 x 1 x 4\n    types a = f16, b = f16, c = f32, d = f32\n    uses t_fdpa(F = 24, L = 4, e_zero = -133)\n}\n",
    );
    let o = mmac(&["compile", &both, "--emit", "verilog"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("module little (") && !stdout(&o).contains("module huge"));
    assert!(
        stderr(&o).contains("1 instructions left out, e.g. `huge` has k = 8192"),
        "{}",
        stderr(&o)
    );
    // the JIT refuses it too: an object would hold no instruction
    for (kind, out) in [("obj", "big.o"), ("lib", "libbig.so")] {
        let path = dir.path().join(out);
        let o = mmac(&[
            "compile",
            &big,
            "--emit",
            kind,
            "-o",
            &path.display().to_string(),
        ]);
        assert_eq!(code(&o), Some(1), "{kind}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("error: `huge`: k = 8192")
                && stderr(&o).contains("compiles into")
                && stderr(&o).contains("nothing written"),
            "{kind}: {}",
            stderr(&o)
        );
        assert!(
            !path.exists() && !path.with_extension("h").exists(),
            "{kind}"
        );
    }
}

#[test]
fn a_box_that_never_answers_is_given_up_on() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.mma").display().to_string();
    let o = mmac(&[
        "infer",
        "--exec",
        "exec sleep 600",
        "--types",
        "a=f16,b=f16,c=f32,d=f32",
        "--k",
        "4",
        "--box-timeout",
        "0.5",
        "-o",
        &out,
    ]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("did not answer within 0.5 s"),
        "{}",
        stderr(&o)
    );
}

/// What a first-time user tripped over: `--c 1e3`, a folder given to `list`, two rows
/// of `report` with the same instruction name.
#[test]
fn first_time_users_get_told() {
    let o = mmac(&[
        "run", HOPPER, "--instr", F16, "--c", "1e3", "--a", "0", "--b", "0", "--pad",
    ]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("`1e3` is read as the hex encoding 0x1e3")
            && stderr(&o).contains("+1e3"),
        "{}",
        stderr(&o)
    );
    let o = mmac(&["list", "specs"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("# specs/hopper.mma (arch hopper)"));
    assert!(stdout(&o).contains(F16));
    let o = mmac(&[
        "report",
        HOPPER,
        F16,
        "--against",
        "specs/ada.mma",
        F16,
        "--k",
        "16",
        "--samples",
        "20",
        "--json",
    ]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let labels: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, [format!("hopper {F16}"), format!("ada {F16}")]);
}

/// A case with more values than the instruction takes (a 9th product, a scale factor of a
/// dense instruction) fails with the count named, as `run` and `serve` refuse it (`test`
/// ignored the extra values, and the case passed); so does an expected d too wide for d.
#[test]
fn a_case_with_extra_values_fails() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(root().join("tests/data/hopper_small.mmv")).unwrap();
    let case = "c=3f800000 a=3c00,3c00,0,0,0,0,0,0 b=3c00,4000,0,0,0,0,0,0 d=40800000";
    assert!(good.contains(case));
    for (bad, says) in [
        (
            "c=3f800000 a=3c00,3c00,0,0,0,0,0,0,3c00 b=3c00,4000,0,0,0,0,0,0,3c00 d=40800000",
            "`a=` has 9 values, but `mma.m16n8k8.f32.f16.f16.f32` takes 8",
        ),
        (
            "c=3f800000 a=3c00,3c00,0,0,0,0,0,0 b=3c00,4000,0,0,0,0,0,0,0 d=40800000",
            "`b=` has 9 values",
        ),
        (
            "c=3f800000 a=3c00,3c00,0,0,0,0,0,0 b=3c00,4000,0,0,0,0,0,0 sa=7f sb=7f d=40800000",
            "`sa=` has 1 value, but `mma.m16n8k8.f32.f16.f16.f32` takes 0",
        ),
        // (and an expected d wider than d's format: no comparison, an error)
        (
            "c=3f800000 a=3c00,3c00,0,0,0,0,0,0 b=3c00,4000,0,0,0,0,0,0 d=140800000",
            "d value 140800000 does not fit `f32` (32 bits)",
        ),
    ] {
        let file = dir.path().join("extra.mmv");
        std::fs::write(&file, good.replace(case, bad)).unwrap();
        let o = mmac(&["test", HOPPER, "--vectors", &file.display().to_string()]);
        assert_eq!(code(&o), Some(1), "{}", stdout(&o));
        let out = format!("{}{}", stdout(&o), stderr(&o));
        assert!(out.contains(says), "{out}");
        assert!(stdout(&o).contains("2 passed, 1 failed"), "{out}");
    }
}

/// A file that starts with a byte-order mark reads as without it (its headers were all
/// "after the first case"), and one without `# instruction:` says so (it named an
/// instruction `?`).
#[test]
fn a_byte_order_mark_is_skipped_and_a_missing_instruction_named() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(root().join("tests/data/hopper_small.mmv")).unwrap();
    let file = dir.path().join("bom.mmv");
    std::fs::write(&file, format!("\u{feff}{good}")).unwrap();
    let o = mmac(&["test", HOPPER, "--vectors", &file.display().to_string()]);
    assert_eq!(code(&o), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("3 passed, 0 failed"), "{}", stdout(&o));
    let headless: String = good
        .lines()
        .filter(|l| !l.starts_with("# instruction:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&file, headless).unwrap();
    let o = mmac(&["test", HOPPER, "--vectors", &file.display().to_string()]);
    assert_eq!(code(&o), Some(1));
    let out = stdout(&o);
    assert!(
        out.contains("3 cases, but no `# instruction:` header names their instruction"),
        "{out}"
    );
}
