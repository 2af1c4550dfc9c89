//! The capture kit (capture/) without a GPU: its CPU-backed build (the same host code, with
//! libmmac's `mmac_warp_mma` in place of the device) must reproduce `mmac test` through
//! its own parsing and fragment packing on an instruction of every layout family, refuse
//! malformed input with the file and line, and speak `mmac serve`'s protocol well enough
//! for `mmac infer --exec` to infer the arithmetic it runs. The CUDA build is checked by
//! capture/check_cuda.sh (it downloads nvcc from PyPI).

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use support::{mmac_ok, mmac_path, root, stderr, stdout};

/// One instruction of every fragment family the kit runs, with a spec that has it:
/// f16/bf16 at k8 and k16 (f32 and f16 accumulators), tf32 k4/k8, s8/u8 (m8n8k16,
/// m16n8k16, m16n8k32, satfinite), s4/u4 (m8n8k32, m16n8k32, m16n8k64), b1 (xor and and,
/// m8n8k128, m16n8k128, m16n8k256), f64 (m8n8k4, m16n8k4/k8/k16), FP8 (k16 and k32, f32 and
/// f16 accumulators) and f16's m8n8k4 (four independent products per warp); sparse
/// `mma.sp` (f16/bf16 k16/k32, tf32's 1:2 at k8/k16, s8 k32/k64, s4/u4 pairs at k64/k128,
/// FP8 k64, `.kind::f8f6f4` with FP6 and FP4); dense `.kind::f8f6f4` (FP6, FP4 in a byte);
/// block-scaled (mxf8f6f4, mxf4, mxf4nvf4 with both scale types) dense and sparse; Hopper's
/// wgmma across a warpgroup (f16, bf16, tf32 and FP8, f32 and f16 accumulators, N = 8 to
/// 256), dense and sparse, B in the kit's shared-memory layout.
const FAMILIES: &[(&str, &str)] = &[
    ("specs/ampere.mma", "mma.m16n8k8.f32.f16.f16.f32"),
    ("specs/ampere.mma", "mma.m16n8k8.f16.f16.f16.f16"),
    ("specs/ampere.mma", "mma.m16n8k8.f32.bf16.bf16.f32"),
    ("specs/hopper.mma", "mma.m16n8k16.f32.f16.f16.f32"),
    ("specs/hopper.mma", "mma.m16n8k16.f16.f16.f16.f16"),
    ("specs/ampere.mma", "mma.m16n8k16.f32.bf16.bf16.f32"),
    ("specs/ampere.mma", "mma.m16n8k4.f32.tf32.tf32.f32"),
    ("specs/hopper.mma", "mma.m16n8k8.f32.tf32.tf32.f32"),
    ("specs/ampere.mma", "mma.m8n8k16.s32.u8.s8.s32"),
    ("specs/ampere.mma", "mma.m16n8k16.satfinite.s32.s8.s8.s32"),
    ("specs/hopper.mma", "mma.m16n8k32.s32.s8.u8.s32"),
    ("specs/ampere.mma", "mma.m8n8k32.satfinite.s32.s4.u4.s32"),
    ("specs/ampere.mma", "mma.m16n8k32.s32.u4.s4.s32"),
    ("specs/hopper.mma", "mma.m16n8k64.satfinite.s32.s4.s4.s32"),
    ("specs/turing.mma", "mma.m8n8k128.s32.b1.b1.s32.xor.popc"),
    ("specs/ampere.mma", "mma.m16n8k128.s32.b1.b1.s32.and.popc"),
    ("specs/ampere.mma", "mma.m16n8k256.s32.b1.b1.s32.xor.popc"),
    ("specs/ampere.mma", "mma.m8n8k4.f64.f64.f64.f64"),
    ("specs/hopper.mma", "mma.m16n8k4.f64.f64.f64.f64"),
    ("specs/hopper.mma", "mma.m16n8k8.f64.f64.f64.f64"),
    ("specs/hopper.mma", "mma.m16n8k16.f64.f64.f64.f64"),
    ("specs/ada.mma", "mma.m16n8k32.f32.e4m3.e5m2.f32"),
    ("specs/ada.mma", "mma.m16n8k16.f16.e5m2.e4m3.f16"),
    ("specs/hopper.mma", "mma.m16n8k32.f16.e4m3.e4m3.f16"),
    ("specs/rtx_blackwell.mma", "mma.m16n8k16.f32.e5m2.e5m2.f32"),
    ("specs/ampere.mma", "mma.sp.m16n8k16.f16.f16.f16.f16"),
    ("specs/ampere.mma", "mma.sp.m16n8k32.f32.bf16.bf16.f32"),
    ("specs/hopper.mma", "mma.sp.m16n8k32.f32.f16.f16.f32"),
    ("specs/ampere.mma", "mma.sp.m16n8k8.f32.tf32.tf32.f32"),
    ("specs/blackwell.mma", "mma.sp.m16n8k16.f32.tf32.tf32.f32"),
    ("specs/ampere.mma", "mma.sp.m16n8k32.s32.s8.u8.s32"),
    (
        "specs/hopper.mma",
        "mma.sp.m16n8k64.satfinite.s32.u8.u8.s32",
    ),
    ("specs/ampere.mma", "mma.sp.m16n8k64.s32.u4.s4.s32"),
    ("specs/ada.mma", "mma.sp.m16n8k128.satfinite.s32.s4.s4.s32"),
    ("specs/ada.mma", "mma.sp.m16n8k64.f32.e4m3.e5m2.f32"),
    (
        "specs/rtx_blackwell.mma",
        "mma.sp.m16n8k64.kind::f8f6f4.f16.e2m3.e4m3.f16",
    ),
    (
        "specs/rtx_blackwell.mma",
        "mma.m16n8k32.kind::f8f6f4.f32.e3m2.e2m1.f32",
    ),
    (
        "specs/rtx_blackwell.mma",
        "mma.m16n8k32.kind::f8f6f4.f16.e5m2.e4m3.f16",
    ),
    (
        "specs/rtx_blackwell.mma",
        "mma.block_scale.m16n8k32.kind::mxf8f6f4.block32.f32.e2m3.e2m1.f32.ue8m0",
    ),
    (
        "specs/rtx_blackwell.mma",
        "mma.block_scale.m16n8k64.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0",
    ),
    (
        "specs/rtx_blackwell.mma",
        "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3",
    ),
    (
        "specs/rtx_blackwell.mma",
        "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue8m0",
    ),
    (
        "specs/rtx_blackwell.mma",
        "mma.sp.block_scale.m16n8k64.kind::mxf8f6f4.block32.f32.e4m3.e3m2.f32.ue8m0",
    ),
    (
        "specs/rtx_blackwell.mma",
        "mma.sp.block_scale.m16n8k128.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0",
    ),
    (
        "specs/rtx_blackwell.mma",
        "mma.sp.block_scale.m16n8k128.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3",
    ),
    ("specs/hopper.mma", "wgmma.m64n8k16.f32.f16.f16"),
    ("specs/hopper.mma", "wgmma.m64n256k16.f16.f16.f16"),
    ("specs/hopper.mma", "wgmma.m64n72k8.f32.tf32.tf32"),
    ("specs/hopper.mma", "wgmma.m64n24k32.f32.e4m3.e5m2"),
    ("specs/hopper.mma", "wgmma.sp.m64n16k32.f32.bf16.bf16"),
    ("specs/hopper.mma", "wgmma.sp.m64n128k16.f32.tf32.tf32"),
    ("specs/hopper.mma", "wgmma.sp.m64n256k64.f16.e5m2.e4m3"),
    ("specs/turing.mma", "mma.m8n8k4.f32.f16.f16.f32"),
];

/// cargo's target folder: this test executable is in TARGET/debug/deps.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The folder of the freshest libmmac.so: `cargo test --workspace` builds it into
/// TARGET/debug/deps, `cargo build -p mmac-capi` into TARGET/debug.
fn libmmac_dir() -> PathBuf {
    let debug = target_dir().join("debug");
    let candidates = [debug.join("deps"), debug.clone()];
    let newest = candidates
        .iter()
        .filter_map(|d| {
            let m = std::fs::metadata(d.join("libmmac.so")).ok()?;
            Some((m.modified().ok()?, d.clone()))
        })
        .max();
    match newest {
        Some((_, d)) => d,
        None => panic!(
            "libmmac.so is not built in {}: run `cargo build -p mmac-capi` (cargo test --workspace builds it)",
            debug.display()
        ),
    }
}

/// A tool the kit's scripts need: present, or the test fails saying how to install it.
fn require(tool: &str, install: &str) {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "the capture kit's test needs `{tool}`: {install} (.ci/run installs it)"
    );
}

/// The kit's scripts, with the mmac and libmmac of this build (so that they run no cargo).
fn script(name: &str) -> Command {
    let mut c = Command::new(root().join("capture").join(name));
    c.current_dir(root())
        .env("CARGO_TARGET_DIR", target_dir())
        .env("MMAC", mmac_path())
        .env("MMAC_LIB_DIR", libmmac_dir())
        .env("NO_COLOR", "1");
    c
}

/// The CPU-backed build of the whole table (TARGET/capture/cpu/mmac-capture), built once.
fn cpu_build() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        require("g++", "apt-get install -y g++");
        require("python3", "apt-get install -y python3");
        let o = script("build.sh").arg("--cpu").output().unwrap();
        assert!(
            o.status.success(),
            "capture/build.sh --cpu failed:\n{}{}",
            stdout(&o),
            stderr(&o)
        );
        target_dir().join("capture/cpu/mmac-capture")
    })
}

fn capture(args: &[&str]) -> Output {
    Command::new(cpu_build())
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

fn text_of(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

/// `N passed, M failed`: (N, M).
fn tally(line: &str) -> (usize, usize) {
    let mut it = line.split(", ");
    let n = |s: Option<&str>, what: &str| -> usize {
        let s = s.unwrap_or_else(|| panic!("no `{what}` in `{line}`"));
        let s = s
            .strip_suffix(what)
            .unwrap_or_else(|| panic!("`{line}`: expected `N {what}`"));
        s.trim().parse().unwrap()
    };
    (n(it.next(), " passed"), n(it.next(), " failed"))
}

/// The data lines of a .mmv (its cases), each without its d.
fn cases_without_d(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split(" d=").next().unwrap().to_string())
        .collect()
}

#[test]
fn the_cpu_build_reproduces_mmac_test_on_every_layout_family() {
    cpu_build();
    let dir = tempfile::tempdir().unwrap();
    // two at a time: each is `mmac gen`, the capture and `mmac test`, mostly one core each
    std::thread::scope(|s| {
        for half in FAMILIES.chunks(FAMILIES.len().div_ceil(2)) {
            let dir = dir.path();
            s.spawn(move || {
                for (spec, instr) in half {
                    reproduce(dir, spec, instr);
                }
            });
        }
    });
}

/// `capture/run.sh --cpu SPEC INSTR` ends on `N passed, 0 failed`, and its capture is the
/// generated file case for case.
fn reproduce(dir: &Path, spec: &str, instr: &str) {
    // run.sh names the generated file as the capture, `::` as `_`
    let file = instr.replace("::", "_");
    let out = dir.join(format!("{file}.mmv"));
    let o = script("run.sh")
        .args(["--cpu", spec, instr, "-n", "48", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let text = text_of(&o);
    assert!(o.status.success(), "run.sh --cpu {spec} {instr}:\n{text}");
    let last = stdout(&o).lines().last().unwrap_or_default().to_string();
    let (passed, failed) = tally(&last);
    assert!(
        passed > 48 && failed == 0,
        "{spec} {instr}: `{last}`\n{text}"
    );
    // the capture is the generated file (the same `mmac gen` run again: it is
    // deterministic), case for case, with the device's d and notes; the generated file
    // itself is not left beside the capture
    let captured = std::fs::read_to_string(&out).unwrap();
    assert!(!dir.join(format!("{file}.gen.mmv")).exists());
    let gen_path = dir.join(format!("{file}.again.gen.mmv"));
    let gen_out = gen_path.display().to_string();
    let args = [
        "gen", spec, "--instr", instr, "-n", "48", "--seed", "1", "-o", &gen_out,
    ];
    mmac_ok(&args);
    let generated = std::fs::read_to_string(&gen_path).unwrap();
    assert_eq!(cases_without_d(&captured), cases_without_d(&generated));
    assert_eq!(cases_without_d(&captured).len(), passed);
    assert!(
        captured.contains("# captured: CPU build: libmmac mmac_warp_mma on "),
        "{captured}"
    );
    assert!(captured.contains(&format!("# instruction: {instr}\n")));
}

/// Two files' lines must be equal: the first difference, else the counts.
fn same_lines(a: &[String], b: &[String], what: &str) {
    if let Some(i) = (0..a.len().min(b.len())).find(|&i| a[i] != b[i]) {
        panic!("{what}: line {} differs:\n  {}\n  {}", i + 1, a[i], b[i]);
    }
    assert_eq!(a.len(), b.len(), "{what}: line counts differ");
}

#[test]
fn one_case_per_mma_gives_the_same_answers_as_a_full_diagonal() {
    let dir = tempfile::tempdir().unwrap();
    for (spec, instr) in [
        ("specs/hopper.mma", "mma.m16n8k16.f32.bf16.bf16.f32"),
        ("specs/turing.mma", "mma.m8n8k4.f16.f16.f16.f16"),
        ("specs/ampere.mma", "mma.m8n8k4.f64.f64.f64.f64"),
    ] {
        let vectors = dir.path().join("in.mmv");
        mmac_ok(&[
            "gen",
            spec,
            "--instr",
            instr,
            "-n",
            "40",
            "-o",
            vectors.to_str().unwrap(),
        ]);
        let run = |per: &str| {
            let o = capture(&[
                "--spec",
                spec,
                "--vectors",
                vectors.to_str().unwrap(),
                "--cases-per-mma",
                per,
            ]);
            assert!(o.status.success(), "{}", text_of(&o));
            stdout(&o)
                .lines()
                .filter(|l| !l.starts_with("# capture"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let one = run("1");
        let most = run(if instr.starts_with("mma.m8n8k4.f16") {
            "32"
        } else {
            "8"
        });
        same_lines(&one, &most, instr);
        // and both are the generated file itself, d for d (the spec is the device), where
        // the file pins NaNs (`# nan: any` leaves the payload to the engine)
        let generated = std::fs::read_to_string(&vectors).unwrap();
        if generated.contains("# nan: exact") {
            let lines: Vec<String> = generated.lines().map(str::to_string).collect();
            same_lines(&one, &lines, instr);
        }
        // beyond the diagonal: refused
        let o = capture(&[
            "--spec",
            spec,
            "--vectors",
            vectors.to_str().unwrap(),
            "--cases-per-mma",
            "33",
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", text_of(&o));
        assert!(stderr(&o).contains("cases per MMA"), "{}", text_of(&o));
    }
}

/// The check can fail: Ampere's f16-accumulating HMMA (F = 24) captured where Hopper's
/// spec (F = 25) is what the vectors were generated from.
#[test]
fn a_device_with_other_arithmetic_fails_mmac_test() {
    let dir = tempfile::tempdir().unwrap();
    let instr = "mma.m16n8k16.f16.f16.f16.f16";
    let vectors = dir.path().join("in.mmv");
    let out = dir.path().join("out.mmv");
    mmac_ok(&[
        "gen",
        "specs/hopper.mma",
        "--instr",
        instr,
        "-o",
        vectors.to_str().unwrap(),
    ]);
    let o = capture(&[
        "--spec",
        "specs/ampere.mma",
        "--vectors",
        vectors.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text_of(&o));
    let t = support::mmac(&[
        "test",
        "specs/hopper.mma",
        "--vectors",
        out.to_str().unwrap(),
    ]);
    let last = stdout(&t).lines().last().unwrap().to_string();
    let (_, failed) = tally(&last);
    assert!(failed > 0, "{last}");
}

/// Each malformed input: exit 2, and the message names the file and line (and column).
#[test]
fn malformed_vectors_are_refused_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let instr = "mma.m16n8k8.f32.f16.f16.f32";
    let header =
        format!("# mmv 1\n# instruction: {instr}\n# k: 8\n# types: a=f16 b=f16 c=f32 d=f32\n");
    let good = "c=3f800000 a=3c00,0,0,0,0,0,0,0 b=3c00,0,0,0,0,0,0,0 d=40000000";
    let cases: &[(&str, String, &str)] = &[
        (
            "bad token",
            format!("{header}{good}\nc=3f800000 a=3c00,0,0,0,0,0,0,0 b=zz d=0\n"),
            ":6:",
        ),
        (
            "a count",
            format!("{header}c=0 a=1,2 b=0,0,0,0,0,0,0,0 d=0\n"),
            ":5:5: `a=` has 2 values, expected 8",
        ),
        (
            "too wide",
            format!("{header}c=0 a=10000,0,0,0,0,0,0,0 b=0,0,0,0,0,0,0,0 d=0\n"),
            ":5:5: a value 10000 does not fit `f16` (16 bits)",
        ),
        (
            "missing d",
            format!("{header}c=0 a=0,0,0,0,0,0,0,0 b=0,0,0,0,0,0,0,0\n"),
            ":5:1: missing `d=`",
        ),
        (
            "missing c",
            format!("{header}a=0,0,0,0,0,0,0,0 b=0,0,0,0,0,0,0,0 d=0\n"),
            ":5:1: missing `c=`",
        ),
        (
            "twice",
            format!("{header}c=0 c=0 a=0 b=0 d=0\n"),
            ":5:5: `c=` given twice",
        ),
        (
            "dangling comma",
            format!("{header}c=0 a=0,0,0,0,0,0,0, b=0 d=0\n"),
            ":5:",
        ),
        (
            "sparse",
            format!("{header}c=0 a=0,0,0,0,0,0,0,0 b=0,0,0,0,0,0,0,0 pos=0 d=0\n"),
            "`pos=` is for a sparse instruction",
        ),
        (
            "other instruction",
            format!("# instruction: mma.m16n8k16.f32.f16.f16.f32\n{good}\n"),
            ":1:1: the file is for `mma.m16n8k16.f32.f16.f16.f32`",
        ),
        (
            "other k",
            format!("# instruction: {instr}\n# k: 16\n{good}\n"),
            ":2:1: `# k: 16`, but",
        ),
        (
            "other types",
            format!("# instruction: {instr}\n# types: a=bf16 b=bf16 c=f32 d=f32\n{good}\n"),
            ":2:1: `# types:",
        ),
        ("version", format!("# mmv 2\n{good}\n"), ":1:1: `# mmv 2`"),
        (
            "late header",
            format!("{good}\n# instruction: {instr}\n"),
            ":2:1: `# instruction:` after the first case",
        ),
        ("no cases", header.clone(), "no cases"),
        // the column of a line that ends where a value was due, after leading spaces
        (
            "no value",
            format!("{header}      c=\n"),
            ":5:9: line ends where a hex value",
        ),
        // a long token is shown cut short, its bytes escaped (a NUL ended the message)
        (
            "long token",
            format!("{header}c=0 {}\u{0}zz d=0\n", "q".repeat(100_000)),
            &format!(":5:5: unexpected `{}...`", "q".repeat(60)),
        ),
        (
            "scaled",
            format!("# scale: ue8m0 block=32\n{good}\n"),
            ":1:1: `# scale: ue8m0 block=32`",
        ),
    ];
    for (what, text, want) in cases {
        let path = dir.path().join("bad.mmv");
        std::fs::write(&path, text).unwrap();
        let p = path.to_str().unwrap();
        let o = capture(&[
            "--spec",
            "specs/ampere.mma",
            "--instr",
            instr,
            "--vectors",
            p,
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{what}: {}", text_of(&o));
        assert!(
            err.contains(&format!("{p}{want}")) || (err.contains(p) && err.contains(want)),
            "{what}: expected `{want}` naming {p}, got:\n{err}"
        );
        assert!(stdout(&o).is_empty(), "{what}: wrote {}", stdout(&o));
    }
    // a file that is not there
    let o = capture(&["--spec", "specs/ampere.mma", "--vectors", "no/such.mmv"]);
    assert_eq!(o.status.code(), Some(2), "{}", text_of(&o));
    assert!(
        stderr(&o).contains("no/such.mmv: cannot read"),
        "{}",
        text_of(&o)
    );
}

/// Runs the CPU build on `text` as a .mmv for `instr` of `spec`: exit 2, and the message
/// names the file and line and says `want`.
fn refused(spec: &str, instr: &str, what: &str, text: &str, want: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.mmv");
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap();
    let o = capture(&["--spec", spec, "--instr", instr, "--vectors", p]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{what}: {}", text_of(&o));
    assert!(
        err.contains(p) && err.contains(want),
        "{what}: expected `{want}` naming {p}, got:\n{err}"
    );
}

/// A sparse case's positions must be what the metadata can say (k / 2 increasing columns
/// below k, `kept` per group, whole pairs for the 4-bit forms); a block-scaled case takes
/// k / block scale factors of the scale format; the headers must agree.
#[test]
fn malformed_sparse_and_block_scaled_cases_are_refused() {
    let sp = "mma.sp.m16n8k16.f32.f16.f16.f32";
    let a = "a=3c00,0,0,0,0,0,0,0";
    let b = format!("b=3c00{}", ",0".repeat(15));
    for (what, case, want) in [
        ("no pos", format!("c=0 {a} {b} d=0"), ":1:1: missing `pos=`"),
        (
            "pos count",
            format!("c=0 {a} {b} pos=0,1,4,5,8,9,c d=0"),
            ":1:63: `pos=` has 7 values, expected 8",
        ),
        (
            "a count",
            format!("c=0 a=3c00{} {b} pos=0,1,4,5,8,9,c,d d=0", ",0".repeat(15)),
            ":1:5: `a=` has 16 values, expected 8 (the stored elements, k / 2,",
        ),
        (
            "decreasing",
            format!("c=0 {a} {b} pos=1,0,4,5,8,9,c,d d=0"),
            "`pos=` value 1 (column 0): the columns must increase",
        ),
        (
            "three in a group",
            format!("c=0 {a} {b} pos=0,1,2,5,8,9,c,d d=0"),
            "`pos=` value 2 (column 2): each group of 4 columns holds 2 stored elements",
        ),
        (
            "beyond k",
            format!("c=0 {a} {b} pos=0,1,4,5,8,9,c,10 d=0"),
            "`pos=` value 7 (column 16): not below k = 16",
        ),
    ] {
        refused("specs/ampere.mma", sp, what, &format!("{case}\n"), want);
    }
    // s4's 2:4 over pairs: a field per pair of adjacent columns from an even one
    let pairs = "mma.sp.m16n8k64.s32.s4.s4.s32";
    let zeros = |n: usize| vec!["0"; n].join(",");
    let mut pos: Vec<String> = (0..8)
        .flat_map(|g| [g * 8, g * 8 + 1, g * 8 + 4, g * 8 + 5])
        .map(|p| format!("{p:x}"))
        .collect();
    pos[2] = "3".into();
    pos[3] = "4".into();
    refused(
        "specs/ampere.mma",
        pairs,
        "odd pair",
        &format!(
            "c=0 a={} b={} pos={} d=0\n",
            zeros(32),
            zeros(64),
            pos.join(",")
        ),
        "`pos=` value 2 (column 3): the stored elements go in adjacent runs of 2 from a multiple of 2",
    );
    let scaled = "mma.block_scale.m16n8k32.kind::mxf8f6f4.block32.f32.e2m3.e2m1.f32.ue8m0";
    let ab = format!("a={} b={}", zeros(32), zeros(32));
    for (what, text, want) in [
        (
            "no sa",
            format!("c=0 {ab} sb=7f d=0\n"),
            ":1:1: `sa=` has 0 values, expected 1",
        ),
        (
            "two sb",
            format!("c=0 {ab} sa=7f sb=7f,7f d=0\n"),
            ":1:143: `sb=` has 2 values, expected 1",
        ),
        (
            "wide sa",
            format!("c=0 {ab} sa=100 sb=7f d=0\n"),
            "sa value 100 does not fit `the scale factors, ue8m0 block=32` (8 bits)",
        ),
        (
            "scale header",
            format!("# scale: ue4m3 block=32\nc=0 {ab} sa=7f sb=7f d=0\n"),
            ":1:1: `# scale: ue4m3 block=32`, but mma.block_scale.m16n8k32.kind::mxf8f6f4.block32.f32.e2m3.e2m1.f32.ue8m0 has `ue8m0 block=32`",
        ),
        (
            "sparse header",
            format!("# sparse: a 2 of 4 over selected\nc=0 {ab} sa=7f sb=7f d=0\n"),
            ":1:1: `# sparse: a 2 of 4 over selected`, but",
        ),
        (
            "pos",
            format!("c=0 {ab} sa=7f sb=7f pos=0 d=0\n"),
            "`pos=` is for a sparse instruction",
        ),
    ] {
        refused("specs/rtx_blackwell.mma", scaled, what, &text, want);
    }
}

#[test]
fn unknown_instructions_and_options_are_refused() {
    let o = capture(&[
        "--spec",
        "specs/hopper.mma",
        "--serve",
        "--instr",
        "mma.m16n8k16.f32.f16.f16.f33",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text_of(&o));
    let err = stderr(&o);
    assert!(
        err.contains("`mma.m16n8k16.f32.f16.f16.f33` is not an instruction of the capture kit")
            && err.contains("nearest: mma.m16n8k16.f32.f16.f16.f32"),
        "{err}"
    );
    // the header names an instruction the kit lacks
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.mmv");
    std::fs::write(
        &path,
        "# instruction: tcgen05.mma.cta_group::1.kind::f16.f32.f16.f16\nc=0 a=0 b=0 d=0\n",
    )
    .unwrap();
    let o = capture(&[
        "--spec",
        "specs/hopper.mma",
        "--vectors",
        path.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text_of(&o));
    assert!(
        stderr(&o).contains(
            ":1:1: `tcgen05.mma.cta_group::1.kind::f16.f32.f16.f16` is not an instruction of the capture kit"
        ),
        "{}",
        text_of(&o)
    );
    // the spec lacks it: libmmac's error, exit 2
    let o = capture(&[
        "--spec",
        "specs/ampere.mma",
        "--serve",
        "--instr",
        "mma.m16n8k16.f64.f64.f64.f64",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text_of(&o));
    assert!(
        stderr(&o).contains("specs/ampere.mma has no instruction `mma.m16n8k16.f64.f64.f64.f64`"),
        "{}",
        text_of(&o)
    );
    // the CPU build needs its spec; unknown options; two modes
    for (args, want) in [
        (
            &["--serve", "--instr", "mma.m16n8k8.f32.f16.f16.f32"][..],
            "--spec SPEC",
        ),
        (&["--frobnicate"][..], "unknown argument `--frobnicate`"),
        (
            &["--list", "--serve"][..],
            "give one of --vectors, --serve, --list",
        ),
        (
            &["--cases-per-mma", "x", "--list"][..],
            "--cases-per-mma takes a positive number",
        ),
    ] {
        let o = capture(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text_of(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", text_of(&o));
    }
    // --list: the table, generated from the specs' layouts
    let o = capture(&["--list"]);
    assert!(o.status.success());
    let list = stdout(&o);
    assert!(
        list.contains("mma.m16n8k32.f32.e4m3.e4m3.f32\tmma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32\tsm_89 sm_90a sm_100a sm_120a\n"),
        "{list}"
    );
    assert!(list.contains("mma.m8n8k128.s32.b1.b1.s32.xor.popc\tmma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor.popc\tsm_80 "), "{list}");
    assert!(list.contains("mma.m16n8k16.satfinite.s32.u8.s8.s32\tmma.sync.aligned.m16n8k16.row.col.satfinite.s32.u8.s8.s32\t"), "{list}");
    // sparse (as ::ordered_metadata), .kind::, block-scaled (the scale vector from k and
    // the block), with the targets whose ptxas takes them (capture/check_cuda.sh)
    for line in [
        "mma.sp.m16n8k32.f32.f16.f16.f32\tmma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32\tsm_80 sm_89 sm_90a sm_100a sm_120a\n",
        "mma.sp.m16n8k64.satfinite.s32.s8.s8.s32\tmma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.satfinite.s32.s8.s8.s32\tsm_80 ",
        "mma.m16n8k32.kind::f8f6f4.f32.e2m1.e3m2.f32\tmma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e3m2.f32\tsm_120a\n",
        "mma.m16n8k32.kind::f8f6f4.f32.e4m3.e5m2.f32\tmma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e5m2.f32\tsm_100a sm_120a\n",
        "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3\tmma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3\tsm_120a\n",
        "mma.sp.block_scale.m16n8k128.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0\tmma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0\tsm_120a\n",
        "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue8m0\tmma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue8m0\tno target: CUDA 13.0's ptxas refuses",
        "wgmma.m64n8k16.f32.f16.f16\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16\tsm_90a\n",
        "wgmma.sp.m64n256k64.f16.e4m3.e5m2\twgmma.mma_async.sp.sync.aligned.m64n256k64.f16.e4m3.e5m2\tsm_90a\n",
    ] {
        assert!(list.contains(line), "{line}\n{list}");
    }
}

fn serve(spec: &str, instr: &str) -> std::process::Child {
    Command::new(cpu_build())
        .args(["--serve", "--spec", spec, "--instr", instr])
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The protocol: each request answered without waiting for the end of the input, in
/// order; comments and blank lines skipped; a malformed request ends it after the
/// answers before it, with its line and column, exit 2.
#[test]
fn serve_answers_request_by_request() {
    let instr = "mma.m16n8k16.f32.f16.f16.f32";
    let mut child = serve("specs/hopper.mma", instr);
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let zeros = ",0".repeat(14);
    // docs/infer.md's example: 1 + 2^-12 * 2^-8 + 2^-14 * 2^-10, one request at a time
    let requests = [
        format!("c=3f800000 a=0400,0100{zeros} b=1c00,1400{zeros}"),
        format!("c=0 a=3c00,3c00{zeros} b=3c00,4000{zeros}"),
        format!("c=bf800000 a=3c00,0{zeros} b=3c00,0{zeros}"),
    ];
    let mut answers = vec![];
    for r in &requests {
        writeln!(input, "{r}").unwrap();
        input.flush().unwrap();
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        answers.push(line.trim_end().to_string());
    }
    assert_eq!(answers, ["d=3f800002", "d=40400000", "d=00000000"]);
    // the same through mmac serve
    let mut served = support::mmac_command();
    served
        .args(["serve", "specs/hopper.mma", "--instr", instr])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut s = served.spawn().unwrap();
    s.stdin
        .take()
        .unwrap()
        .write_all(format!("{}\n", requests.join("\n")).as_bytes())
        .unwrap();
    let o = s.wait_with_output().unwrap();
    assert_eq!(stdout(&o).lines().collect::<Vec<_>>(), answers);
    // a batch with a comment, a blank line, then a malformed request, in one write (the
    // kit exits at the malformed line: a write after it could meet a closed pipe)
    let batch = format!(
        "# a comment\n\n{}\nc=0 a=1,2 b=3\n{}\n",
        requests[0], requests[1]
    );
    input.write_all(batch.as_bytes()).unwrap();
    drop(input);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut output, &mut rest).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(rest, "d=3f800002\n");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("<stdin>:7:5: `a=` has 2 values, expected 16"),
        "{}",
        stderr(&o)
    );
}

/// Sparse and block-scaled requests (`pos=`, `sa=`, `sb=`) get mmac serve's answers.
#[test]
fn serve_answers_sparse_and_block_scaled_requests_as_mmac_serve_does() {
    for (spec, instr) in [
        ("specs/ampere.mma", "mma.sp.m16n8k32.f32.bf16.bf16.f32"),
        (
            "specs/rtx_blackwell.mma",
            "mma.sp.block_scale.m16n8k64.kind::mxf8f6f4.block32.f32.e2m1.e5m2.f32.ue8m0",
        ),
    ] {
        let vectors = mmac_ok(&["gen", spec, "--instr", instr, "-n", "16"]);
        let requests: String = cases_without_d(&vectors)
            .iter()
            .map(|l| format!("{l}\n"))
            .collect();
        let answer = |mut c: Command| {
            let mut child = c
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(requests.as_bytes())
                .unwrap();
            let o = child.wait_with_output().unwrap();
            assert!(o.status.success(), "{instr}: {}", text_of(&o));
            stdout(&o)
        };
        let mut kit = Command::new(cpu_build());
        kit.args(["--serve", "--spec", spec, "--instr", instr])
            .current_dir(root());
        let mut served = support::mmac_command();
        served.args(["serve", spec, "--instr", instr]);
        let (ours, theirs) = (answer(kit), answer(served));
        assert_eq!(ours.lines().count(), requests.lines().count(), "{instr}");
        assert_eq!(ours, theirs, "{instr}");
    }
}

/// `mmac infer --exec` through the kit's serve mode finds the spec's arithmetic.
#[test]
fn mmac_infer_infers_the_arithmetic_through_the_kit() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("inferred.mma");
    let exec = format!(
        "{} --serve --spec specs/hopper.mma --instr mma.m16n8k16.f16.f16.f16.f16",
        cpu_build().display()
    );
    let o = support::mmac(&[
        "infer",
        "--exec",
        &exec,
        "--types",
        "a=f16,b=f16,c=f16,d=f16",
        "--k",
        "16",
        "-o",
        out.to_str().unwrap(),
    ]);
    let text = text_of(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains(
            "inferred `uses t_fdpa(F = 25, L = 16, e_zero = -21)`: verified on 10000 cases"
        ),
        "{text}"
    );
    let check = support::mmac(&["check", out.to_str().unwrap()]);
    assert!(check.status.success(), "{}", text_of(&check));
}

/// capture/gen.py with `--only` these instructions, into `out`.
fn generate(out: &Path, only: &[&str]) -> Output {
    Command::new("python3")
        .arg(root().join("capture/gen.py"))
        .arg("--mmac")
        .arg(mmac_path())
        .arg("--out")
        .arg(out)
        .arg("--only")
        .args(only)
        .current_dir(root())
        .output()
        .unwrap()
}

/// The generator refuses what it cannot lay out, naming it.
#[test]
fn the_generator_refuses_instructions_without_a_layout() {
    let dir = tempfile::tempdir().unwrap();
    let o = generate(
        dir.path(),
        &["mma.m16n8k16.f32.f16.f16.f32", "v_mfma_f32_32x32x8_f16"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text_of(&o));
    assert!(
        stderr(&o).contains("not an mma instruction of the specs: v_mfma_f32_32x32x8_f16"),
        "{}",
        text_of(&o)
    );
    // and writes its files for what it can
    let o = generate(
        dir.path(),
        &[
            "mma.m16n8k16.f32.f16.f16.f32",
            "mma.sp.m16n8k32.f32.f16.f16.f32",
            "mma.sp.block_scale.m16n8k128.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3",
            "wgmma.sp.m64n8k32.f16.f16.f16",
        ],
    );
    assert!(o.status.success(), "{}", text_of(&o));
    // (the wgmma kernels in their own file, a translation unit built for sm_90a alone)
    let kernels = ["capture_kernels.cuh", "capture_wgmma.cuh"]
        .map(|f| std::fs::read_to_string(dir.path().join(f)).unwrap())
        .join("\n");
    let wgmma = std::fs::read_to_string(dir.path().join("capture_wgmma.cuh")).unwrap();
    assert!(
        wgmma.contains("wgmma.mma_async") && !wgmma.contains("mma.sync"),
        "{wgmma}"
    );
    // the operands in PTX's order: d, a, b, c, then the metadata and the selector 0, then
    // each scale factor register with its byte and thread ids 0
    for asm in [
        "asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\\n\"",
        "asm volatile(\"mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, %16, 0x0;\\n\"",
        "asm volatile(\"mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, %16, 0x0, %17, {0, 0}, %18, {0, 0};\\n\"",
        // wgmma from fence to wait: D (f16x2) accumulates onto C, A from registers, B
        // through the descriptor of the kit's shared memory (K-major, 4 core matrices of
        // K 128 bytes apart, groups of 8 columns 512), the metadata, selector 0, scale-d
        // true, A and B as they are, B not transposed
        "asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %8, 0;\\nwgmma.fence.sync.aligned;\\nwgmma.mma_async.sp.sync.aligned.m64n8k32.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, %6, %7, 0, p, 1, 1, 0;\\nwgmma.commit_group.sync.aligned;\\nwgmma.wait_group.sync.aligned 0;\\n}\\n\"",
        ": \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"l\"(desc), \"r\"(meta0), \"r\"(1u) : \"memory\");",
        "const uint64_t desc = capture_desc(smem_b, 128u, 512u);",
        "fence.proxy.async.shared::cta;",
    ] {
        assert!(kernels.contains(asm), "{asm}\n{kernels}");
    }
    let manifest = std::fs::read_to_string(dir.path().join("capture_manifest.tsv")).unwrap();
    assert_eq!(
        manifest.lines().filter(|l| !l.starts_with('#')).count(),
        5 + 5 + 1 + 1,
        "{manifest}"
    );
}

/// wgmma's B, which the kit lays out in shared memory itself: the table's memory image and
/// the kernels' matrix descriptor must tell the same story, the PTX ISA's K-major layout
/// without swizzling (9.7.15.5.1.2): core matrices of 8 columns of B by 16 contiguous
/// bytes of K (128 bytes each), the ones along K the leading dimension byte offset (128)
/// apart, the groups of 8 columns the stride dimension byte offset (all K's bytes of 8
/// columns) apart. The CPU build reads B back through the same table, so only this test
/// and a GPU check the layout.
#[test]
fn wgmma_b_lies_in_shared_memory_as_its_descriptor_says() {
    let dir = tempfile::tempdir().unwrap();
    let o = generate(
        dir.path(),
        &[
            "wgmma.m64n16k16.f32.f16.f16",
            "wgmma.sp.m64n16k64.f32.e4m3.e4m3",
        ],
    );
    assert!(o.status.success(), "{}", text_of(&o));
    let table = std::fs::read_to_string(dir.path().join("capture_table.inc")).unwrap();
    let blob: Vec<u32> = std::fs::read(dir.path().join("capture_table.bin"))
        .unwrap()
        .chunks(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let kernels = std::fs::read_to_string(dir.path().join("capture_wgmma.cuh")).unwrap();
    // (rows = K, bytes per element, the stride byte offset the kernel gives)
    for (k, bytes, sbo) in [(16usize, 2usize, 256usize), (64, 1, 512)] {
        assert!(
            kernels.contains(&format!("capture_desc(smem_b, 128u, {sbo}u)")),
            "{kernels}"
        );
        // the memory family: `{1, K, 16, 1, width, 32, words, words, nullptr, capture_blob + OFF}`
        let prefix = format!("    {{1, {k}, 16, 1, {}, 32, ", 8 * bytes);
        let line = table
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no memory family `{prefix}`:\n{table}"));
        let off: usize = line
            .rsplit("capture_blob + ")
            .next()
            .unwrap()
            .trim_end_matches("},")
            .parse()
            .unwrap();
        let per_row = 16 / bytes;
        for r in 0..k {
            for c in 0..16 {
                let slot = blob[off + r * 16 + c];
                let (word, bit) = ((slot >> 5) & 0xffff, slot & 31);
                let byte = word as usize * 4 + bit as usize / 8;
                let want =
                    (c / 8) * sbo + (r / per_row) * 128 + (c % 8) * 16 + (r % per_row) * bytes;
                assert_eq!(byte, want, "K = {k}: B[{r}][{c}]");
                assert_eq!(slot >> 21, 0, "a memory image has one lane");
            }
        }
    }
}

/// A capture is written whole or not at all: through a temporary file renamed over the
/// output (a write cut short by a file-size limit left a file cut mid-line, and `-o`
/// naming the input destroyed it), the replaced file's permissions kept; a capture
/// captured again names the device once (it kept the earlier `# captured:` lines).
#[cfg(unix)]
#[test]
fn a_capture_is_written_whole_and_names_one_device() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let earlier = "tests/captures/H200/fit/narrow/mma.m16n8k16.f16.e4m3.e4m3.f16.mmv";
    let input = dir.path().join("in.mmv");
    std::fs::copy(root().join(earlier), &input).unwrap();
    let before = std::fs::read_to_string(&input).unwrap();
    assert!(before.contains("# captured: NVIDIA"), "{before}");
    std::fs::set_permissions(&input, std::fs::Permissions::from_mode(0o640)).unwrap();
    let p = input.display().to_string();
    let o = capture(&["--spec", "specs/hopper.mma", "--vectors", &p, "-o", &p]);
    assert_eq!(o.status.code(), Some(0), "{}", text_of(&o));
    let after = std::fs::read_to_string(&input).unwrap();
    assert_eq!(after.matches("# captured:").count(), 1, "{after}");
    assert_eq!(after.matches("# capture:").count(), 1, "{after}");
    assert!(after.contains("# captured: CPU build"), "{after}");
    assert_eq!(cases_without_d(&after), cases_without_d(&before));
    let mode = std::fs::metadata(&input).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o640);
    // a write that fails (past a 4 KiB file-size limit) leaves the old file as it was
    let script = format!(
        "trap '' XFSZ; ulimit -f 4; exec \"$0\" --spec specs/hopper.mma --vectors {p} -o {p}"
    );
    let o = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .arg(cpu_build())
        .current_dir(root())
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0), "{}", text_of(&o));
    assert!(stderr(&o).contains("cannot write"), "{}", text_of(&o));
    assert_eq!(std::fs::read_to_string(&input).unwrap(), after);
    let files = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(files, 1, "no temporary file is left");
}

/// run.sh takes relative paths as the caller means them (they were the repository's),
/// refuses a folder as the capture (it wrote into the folder's parent, once `/`), an
/// option without its value (a bash error, exit 1), and leaves nothing beside the
/// capture but the capture.
#[test]
fn run_sh_takes_the_callers_paths_and_leaves_only_the_capture() {
    cpu_build();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(root().join("specs/ampere.mma"), dir.path().join("my.mma")).unwrap();
    let instr = "mma.m16n8k8.f32.f16.f16.f32";
    let o = script("run.sh")
        .current_dir(dir.path())
        .args(["--cpu", "my.mma", instr, "-n", "8", "-o", "out/cap.mmv"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text_of(&o));
    let listed: Vec<String> = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed, ["cap.mmv"]);
    for (args, says) in [
        (vec!["--cpu", "my.mma", instr, "-o", "."], "is a folder"),
        (vec!["--cpu", "my.mma", instr, "-n"], "-n takes a value"),
        (
            vec!["--cpu", "none.mma", instr],
            "none.mma: no such spec file",
        ),
    ] {
        let o = script("run.sh")
            .current_dir(dir.path())
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text_of(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", text_of(&o));
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        2,
        "my.mma and out/"
    );
}

/// A name far longer than any instruction's is refused at once (the nearest names were
/// searched over all of it: seconds for 100k characters), and shown cut short.
#[test]
fn a_long_unknown_name_is_refused_shortly() {
    let name = "x".repeat(100_000);
    let o = capture(&["--spec", "specs/hopper.mma", "--instr", &name, "--serve"]);
    assert_eq!(o.status.code(), Some(2), "{}", text_of(&o));
    let err = stderr(&o);
    assert!(err.len() < 1000, "{} bytes", err.len());
    assert!(
        err.contains(&format!("`{}...` is not an instruction", "x".repeat(60))),
        "{err}"
    );
}
