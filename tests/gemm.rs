//! `mmac mma` and `mmac gemm` on .npy files: results equal the per-element dot products
//! and the documented GEMM order, errors name what was expected, and the error report is
//! computed against the exact result.

mod support;

use support::{mmac, mmac_ok, root};

use mmac_compiler::Checked;
use mmac_compiler::engine::{Engine, Operands};
use mmac_compiler::interp;
use mmac_compiler::ir::Instruction;
use mmac_compiler::random::Rng;
use mmac_runtime::gemm::{self, Problem};
use mmac_runtime::matrix::{self, Matrix};
use mmac_runtime::specs::LoadedSpec;
use std::path::Path;
use std::process::{Command, Output};

fn spec(name: &str) -> LoadedSpec {
    mmac_runtime::specs::load_file(&root().join(name)).unwrap()
}

/// Deterministic pseudo-random finite encodings of a format (the shared generator of
/// `mmac bench`, seeded per matrix).
fn random(format: &mmac_compiler::format::Format, rows: usize, cols: usize, seed: u64) -> Matrix {
    let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let data = (0..rows * cols).map(|_| rng.finite(format)).collect();
    Matrix { rows, cols, data }
}

/// Random problem files (a, b, c, and sa, sb for a block-scaled instruction) of an
/// m x k by k x n product in `dir`.
fn write_problem(
    dir: &Path,
    inst: &Instruction,
    m: usize,
    n: usize,
    k: usize,
    seed: u64,
) -> Problem {
    let a = random(&inst.arithmetic.a, m, k, seed);
    let b = random(&inst.arithmetic.b, k, n, seed + 1);
    let c = random(&inst.arithmetic.c, m, n, seed + 2);
    matrix::write(&dir.join("a.npy"), &inst.arithmetic.a, &a).unwrap();
    matrix::write(&dir.join("b.npy"), &inst.arithmetic.b, &b).unwrap();
    matrix::write(&dir.join("c.npy"), &inst.arithmetic.c, &c).unwrap();
    let (sa, sb) = match &inst.arithmetic.scale {
        Some(s) => {
            let blocks = k / s.block as usize;
            // scales near 1 keep the products finite
            let near_one = |rows: usize, cols: usize, seed: u64| {
                let mut m = random(&s.format, rows, cols, seed);
                for v in &mut m.data {
                    *v = if s.format.name == "ue8m0" {
                        0x7c + (*v % 7)
                    } else {
                        0x30 + (*v % 16)
                    };
                }
                m
            };
            let sa = near_one(m, blocks, seed + 3);
            let sb = near_one(blocks, n, seed + 4);
            matrix::write(&dir.join("sa.npy"), &s.format, &sa).unwrap();
            matrix::write(&dir.join("sb.npy"), &s.format, &sb).unwrap();
            (Some(sa), Some(sb))
        }
        None => (None, None),
    };
    Problem {
        a,
        b,
        c: Some(c),
        sa,
        sb,
        meta: None,
    }
}

/// One whole instruction through the interpreter: D = C + A*B element by element.
fn mma_by_elements(
    checked: Checked,
    a: &Matrix,
    b: &Matrix,
    c: &Matrix,
    sa: Option<&Matrix>,
    sb: Option<&Matrix>,
) -> Matrix {
    let inst = checked.instruction();
    let (m, n, k) = (a.rows, b.cols, a.cols);
    let bt = b.transposed();
    let sbt = sb.map(|x| x.transposed());
    let s = inst.scale_count();
    let mut d = Matrix::filled(m, n, 0);
    for i in 0..m {
        for j in 0..n {
            let ops = Operands {
                c: c.at(i, j),
                a: &a.data[i * k..(i + 1) * k],
                b: &bt.data[j * k..(j + 1) * k],
                sa: sa.map(|x| &x.data[i * s..(i + 1) * s]).unwrap_or(&[]),
                sb: sbt
                    .as_ref()
                    .map(|x| &x.data[j * s..(j + 1) * s])
                    .unwrap_or(&[]),
            };
            d.data[i * n + j] = interp::run(checked, &ops).unwrap();
        }
    }
    d
}

fn sub(m: &Matrix, r0: usize, rows: usize, c0: usize, cols: usize) -> Matrix {
    let mut data = vec![];
    for i in r0..r0 + rows {
        data.extend_from_slice(&m.data[i * m.cols + c0..i * m.cols + c0 + cols]);
    }
    Matrix { rows, cols, data }
}

#[test]
fn mma_equals_the_per_element_dot_products() {
    for (file, name) in [
        ("specs/hopper.mma", "mma.m16n8k16.f32.f16.f16.f32"),
        ("specs/cdna3.mma", "v_mfma_f32_16x16x32_fp8_fp8"),
        (
            "specs/rtx_blackwell.mma",
            "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3",
        ),
        ("specs/ampere.mma", "mma.m16n8k32.satfinite.s32.s8.u8.s32"),
    ] {
        let s = spec(file);
        let checked = s.instruction(name).unwrap();
        let inst = checked.instruction();
        let tmp = tempfile::TempDir::new().unwrap();
        let dir = tmp.path();
        let (m, n, k) = (inst.m as usize, inst.n as usize, inst.k());
        let p = write_problem(dir, inst, m, n, k, 7);
        let mut args = vec![
            "mma", file, "--instr", name, "--a", "a.npy", "--b", "b.npy", "--c", "c.npy", "-o",
            "d.npy",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
        for x in ["a.npy", "b.npy", "c.npy", "d.npy"] {
            let pos = args.iter().position(|y| y == x).unwrap();
            args[pos] = dir.join(x).display().to_string();
        }
        if inst.arithmetic.scale.is_some() {
            args.extend([
                "--sa".into(),
                dir.join("sa.npy").display().to_string(),
                "--sb".into(),
                dir.join("sb.npy").display().to_string(),
            ]);
        }
        let out = mmac(&args.iter().map(|s| s.as_str()).collect::<Vec<_>>());
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let d = matrix::read(&dir.join("d.npy"), &inst.arithmetic.d, "D").unwrap();
        assert_eq!(
            d,
            mma_by_elements(
                checked,
                &p.a,
                &p.b,
                p.c.as_ref().unwrap(),
                p.sa.as_ref(),
                p.sb.as_ref()
            ),
            "{name}"
        );
    }
}

/// D of a GEMM in the documented order, whole instruction by whole instruction through
/// the interpreter: tiles of m x n; K in k-steps, increasing; D fed back as C.
fn gemm_by_mma_loop(checked: Checked, p: &Problem) -> Matrix {
    let inst = checked.instruction();
    let (m, n, k) = (p.a.rows, p.b.cols, p.a.cols);
    let (tm, tn, tk) = (inst.m as usize, inst.n as usize, inst.arithmetic.k as usize);
    let s = inst.scale_count();
    let mut want = Matrix::filled(m, n, 0);
    for ti in 0..m / tm {
        for tj in 0..n / tn {
            let mut d = match &p.c {
                Some(c) => sub(c, ti * tm, tm, tj * tn, tn),
                None => Matrix::filled(tm, tn, gemm::zero_of(&inst.arithmetic.c)),
            };
            for step in 0..k / tk {
                let sa = p.sa.as_ref().map(|x| sub(x, ti * tm, tm, step * s, s));
                let sb = p.sb.as_ref().map(|x| sub(x, step * s, s, tj * tn, tn));
                d = mma_by_elements(
                    checked,
                    &sub(&p.a, ti * tm, tm, step * tk, tk),
                    &sub(&p.b, step * tk, tk, tj * tn, tn),
                    &d,
                    sa.as_ref(),
                    sb.as_ref(),
                );
            }
            for i in 0..tm {
                for j in 0..tn {
                    want.data[(ti * tm + i) * n + tj * tn + j] = d.at(i, j);
                }
            }
        }
    }
    want
}

#[test]
fn gemm_equals_a_loop_of_mma_calls_in_order() {
    // one, two and three k-steps (D written by the first step, or by alternating with a
    // scratch block, with either parity), tile rows and columns that do not fill a task,
    // a block-scaled instruction, Hopper's and Ampere's T-FDPA and CDNA2's FTZ multiply-add
    // through the JIT's panels (runs of eight and of four columns, of sixteen and of four,
    // three steps); the CLI and the library with the optimised JIT kernel at one and two
    // threads, and the interpreter
    let cases: [(&str, &str, (usize, usize, usize)); 9] = [
        (
            "specs/hopper.mma",
            "mma.m16n8k16.f32.f16.f16.f32",
            (32, 24, 48),
        ),
        (
            "specs/hopper.mma",
            "mma.m16n8k16.f32.f16.f16.f32",
            (16, 136, 16),
        ),
        (
            "specs/hopper.mma",
            "mma.m16n8k16.f32.f16.f16.f32",
            (48, 72, 32),
        ),
        (
            "specs/cdna3.mma",
            "v_mfma_f32_16x16x32_fp8_fp8",
            (32, 80, 96),
        ),
        (
            "specs/rtx_blackwell.mma",
            "mma.block_scale.m16n8k32.kind::mxf8f6f4.block32.f32.e4m3.e2m1.f32.ue8m0",
            (16, 16, 64),
        ),
        (
            "specs/ampere.mma",
            "mma.m16n8k8.f32.tf32.tf32.f32",
            (32, 40, 24),
        ),
        (
            "specs/cdna2.mma",
            "v_mfma_f32_16x16x16bf16_1k",
            (32, 80, 48),
        ),
        ("specs/cdna2.mma", "v_mfma_f32_4x4x4f16", (8, 20, 12)),
        ("specs/cdna2.mma", "v_mfma_f32_16x16x8bf16", (16, 48, 16)),
    ];
    for (seed, (file, name, (m, n, k))) in cases.into_iter().enumerate() {
        let s = spec(file);
        let checked = s.instruction(name).unwrap();
        let inst = checked.instruction();
        let tmp = tempfile::TempDir::new().unwrap();
        let dir = tmp.path();
        let mut p = write_problem(dir, inst, m, n, k, 11 + seed as u64);
        if seed == 1 {
            p.c = None; // C left out: +0
        }
        let want = gemm_by_mma_loop(checked, &p);
        let what = format!("{name} {m} x {n} x {k}");
        for threads in ["1", "2"] {
            let d_path = dir.join(format!("d{threads}.npy"));
            let mut args = vec![
                "gemm".to_string(),
                file.to_string(),
                "--instr".into(),
                name.into(),
                "-o".into(),
                d_path.to_str().unwrap().into(),
                "--threads".into(),
                threads.into(),
            ];
            let mut operands = vec!["a", "b"];
            if p.c.is_some() {
                operands.push("c");
            }
            if p.sa.is_some() {
                operands.extend(["sa", "sb"]);
            }
            for x in operands {
                args.push(format!("--{x}"));
                args.push(dir.join(format!("{x}.npy")).to_str().unwrap().into());
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            mmac_ok(&args);
            assert_eq!(
                matrix::read(&d_path, &inst.arithmetic.d, "D").unwrap(),
                want,
                "{what}, CLI, threads = {threads}"
            );
        }
        // the library: the optimised JIT kernel on pools of 1 and 2 workers, and the
        // interpreter
        let jit = Engine::new(checked, mmac_compiler::engine::Choice::OPTIMISED);
        // the JIT's panels: CDNA2's flushed one, Hopper's and Ampere's aligned ones (T-FDPA)
        let has_panel = ["cdna2", "hopper", "ampere"]
            .iter()
            .any(|x| file.contains(x));
        assert_eq!(jit.panel().is_some(), has_panel, "{what}: a panel");
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let d = pool.install(|| gemm::gemm(&jit, &p, &|_| {})).unwrap();
            assert_eq!(d, want, "{what}, JIT, {threads} workers");
        }
        let lib = gemm::gemm(&Engine::interpreter(checked), &p, &|_| {}).unwrap();
        assert_eq!(lib, want, "{what}, interpreter");
    }
}

/// Every conformance case of an instruction the JIT has a GEMM panel for, through the
/// panel as a one-row GEMM of one k-step (its b in four columns, its c in each): d, bit
/// for bit. The committed vectors (`tests/vectors`), and the public set
/// (`../shared/vectors`) where the checkout has it beside it, as `.ci/run` does.
#[test]
fn panels_reproduce_the_conformance_vectors() {
    use mmac_compiler::format::Decoded;
    let (specs, errors) = mmac_runtime::specs::load_all(&root().join("specs"));
    assert!(errors.is_empty());
    let mut folders = vec![root().join("tests/vectors")];
    let shared = root().join("../shared/vectors");
    if shared.is_dir() {
        folders.push(shared);
    }
    let (mut ran, mut not_taken, mut instructions) = (0, 0, std::collections::HashSet::new());
    for folder in folders {
        for path in mmac_runtime::vectors::find_files(&folder).unwrap() {
            let (file, errors) = mmac_runtime::vectors::read(&path).unwrap();
            assert!(errors.is_empty(), "{}", path.display());
            let (Some(arch), Some(name)) = (&file.arch, &file.instruction) else {
                continue;
            };
            let Some(checked) = specs
                .iter()
                .filter(|s| s.checked.arch() == arch)
                .find_map(|s| s.instruction(name))
            else {
                continue;
            };
            let engine = Engine::new(checked, mmac_compiler::engine::Choice::OPTIMISED);
            let Some(panel) = engine.panel() else {
                continue;
            };
            instructions.insert(name.clone());
            let d_format = &checked.instruction().arithmetic.d;
            let k = checked.k();
            for case in &file.cases {
                let b: Vec<u64> = case.b.iter().flat_map(|&x| [x; 4]).collect();
                let Some(ops) = panel.operands(&case.a, &b, (1, k, 4)).unwrap() else {
                    not_taken += 1; // a NaN or an infinity in a or b
                    continue;
                };
                let mut d = [0u64; 4];
                panel
                    .rows(&ops, 0, std::iter::once((0, &[case.c; 4][..], &mut d[..])))
                    .unwrap();
                let nan = |x: u64| matches!(d_format.decode(x), Decoded::Nan);
                for got in d {
                    assert!(
                        got == case.d || (file.nan_any && nan(got) && nan(case.d)),
                        "{}:{}: {name}: panel {got:x}, want {:x}",
                        path.display(),
                        case.line,
                        case.d
                    );
                }
                ran += 1;
            }
        }
    }
    eprintln!(
        "{ran} cases of {} instructions through panels, {not_taken} with a NaN or an infinity in a or b not taken",
        instructions.len()
    );
    // the committed vectors alone hold CDNA2's and NVIDIA's f32 T-FDPA instructions
    assert!(instructions.len() >= 4, "{instructions:?}");
    assert!(ran > 500, "{ran} cases ran, {not_taken} not taken");
}

#[test]
fn a_nan_or_an_infinity_in_a_or_b_runs_without_the_panel() {
    // the aligned panel takes only finite A and B: with a NaN or an infinity the GEMM
    // runs the batch entry, and D is still the loop of whole instructions; one in C runs
    // through the panel
    let s = spec("specs/ampere.mma");
    let checked = s.instruction("mma.m16n8k8.f32.tf32.tf32.f32").unwrap();
    let inst = checked.instruction();
    let jit = Engine::new(checked, mmac_compiler::engine::Choice::OPTIMISED);
    assert!(jit.panel().is_some());
    let tmp = tempfile::TempDir::new().unwrap();
    for (operand, value) in [
        ("a", 0x7f80_0000u64),
        ("b", 0x7fc0_0000),
        ("c", 0xff80_0000),
    ] {
        let mut p = write_problem(tmp.path(), inst, 32, 16, 24, 7);
        match operand {
            "a" => p.a.data[5] = value,
            "b" => p.b.data[17] = value,
            _ => p.c.as_mut().unwrap().data[3] = value,
        }
        let want = gemm_by_mma_loop(checked, &p);
        let d = gemm::gemm(&jit, &p, &|_| {}).unwrap();
        assert_eq!(d, want, "{operand} = {value:x}");
    }
}

#[test]
fn gemm_into_a_matrix_of_the_wrong_shape_is_an_error() {
    let s = spec("specs/hopper.mma");
    let checked = s.instruction("mma.m16n8k16.f32.f16.f16.f32").unwrap();
    let inst = checked.instruction();
    let p = Problem {
        a: random(&inst.arithmetic.a, 16, 16, 1),
        b: random(&inst.arithmetic.b, 16, 8, 2),
        c: None,
        sa: None,
        sb: None,
        meta: None,
    };
    let mut d = Matrix::filled(16, 16, 0);
    let e = gemm::gemm_into(&Engine::interpreter(checked), &p, &mut d, &|_| {}).unwrap_err();
    assert!(e.to_string().contains("d"), "{e}");
    let mut d = Matrix::filled(16, 8, 0);
    gemm::gemm_into(&Engine::interpreter(checked), &p, &mut d, &|_| {}).unwrap();
    assert_eq!(
        d,
        gemm::gemm(&Engine::interpreter(checked), &p, &|_| {}).unwrap()
    );
}

#[test]
fn errors_name_what_was_expected() {
    let s = spec("specs/hopper.mma");
    let inst = s
        .instruction("mma.m16n8k16.f32.f16.f16.f32")
        .unwrap()
        .instruction();
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = tmp.path();
    write_problem(dir, inst, 16, 8, 16, 3);
    let f32 = mmac_compiler::format::builtin("f32").unwrap();
    matrix::write(&dir.join("a32.npy"), &f32, &Matrix::filled(16, 16, 0)).unwrap();
    let f16 = mmac_compiler::format::builtin("f16").unwrap();
    matrix::write(&dir.join("a15.npy"), &f16, &Matrix::filled(16, 15, 0)).unwrap();
    matrix::write(&dir.join("a_big.npy"), &f16, &Matrix::filled(24, 16, 0)).unwrap();
    let p = |x: &str| dir.join(x).display().to_string();
    let run = |cmd: &str, a: &str, extra: &[&str]| {
        let mut args = vec![
            cmd.to_string(),
            "specs/hopper.mma".into(),
            "--instr".into(),
            "mma.m16n8k16.f32.f16.f16.f32".into(),
            "--a".into(),
            p(a),
            "--b".into(),
            p("b.npy"),
            "-o".into(),
            p("d.npy"),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        mmac(&args.iter().map(|s| s.as_str()).collect::<Vec<_>>())
    };
    let cases: Vec<(Output, &str)> = vec![
        (
            run("mma", "a32.npy", &["--c", &p("c.npy")]),
            "A must have dtype <f2 (`f16`) or hold raw `f16` encodings in an unsigned integer dtype, found <f4",
        ),
        // one whole instruction: each operand against its shape, the wrong one named
        // (a wrong A was blamed on C)
        (
            run("mma", "a15.npy", &["--c", &p("c.npy")]),
            "A is 16 x 15, but `mma.m16n8k16.f32.f16.f16.f32` (m16n8k16) takes A 16 x 16",
        ),
        (
            run("mma", "a_big.npy", &["--c", &p("c.npy")]),
            "A is 24 x 16, but `mma.m16n8k16.f32.f16.f16.f32` (m16n8k16) takes A 16 x 16",
        ),
        (run("gemm", "a15.npy", &[]), "A is 16 x 15 but B is 16 x 8"),
        (
            run("gemm", "a_big.npy", &["--c", &p("c.npy")]),
            "C is 16 x 8 but A x B is 24 x 8",
        ),
        (
            run("gemm", "a_big.npy", &[]),
            "M (rows of A) = 24 is not a positive multiple of `mma.m16n8k16.f32.f16.f16.f32`'s 16",
        ),
        (run("gemm", "missing.npy", &[]), "missing.npy: No such file"),
        (
            run("gemm", "a.npy", &["--sa", &p("a.npy")]),
            "takes no scale factors",
        ),
    ];
    for (out, want) in cases {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(want), "expected `{want}` in:\n{err}");
    }
    // a block-scaled instruction without scales
    let rb = "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3";
    let s2 = spec("specs/rtx_blackwell.mma");
    let i2 = s2.instruction(rb).unwrap().instruction();
    write_problem(dir, i2, 16, 8, 64, 5);
    let out = mmac(&[
        "mma",
        "specs/rtx_blackwell.mma",
        "--instr",
        rb,
        "--a",
        &p("a.npy"),
        "--b",
        &p("b.npy"),
        "--c",
        &p("c.npy"),
        "-o",
        &p("d.npy"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("is block-scaled (ue4m3 per 16 elements of k): give --sa and --sb")
    );
}

/// An instruction whose c and d formats differ (Volta's `mma.m8n8k4.f32.f16.f16.f16`: c
/// f16, d f32) cannot feed a step's d back as the next c: a GEMM of more than one k-step
/// is refused (it read d's f32 codes as f16: 2.58 came out as 0.97); one step runs.
#[test]
fn a_gemm_of_several_steps_needs_c_and_d_alike() {
    let s = spec("specs/volta.mma");
    let name = "mma.m8n8k4.f32.f16.f16.f16";
    let inst = s.instruction(name).unwrap().instruction();
    let tmp = tempfile::TempDir::new().unwrap();
    let p = |x: &str| tmp.path().join(x).display().to_string();
    let gemm = |k: usize| {
        write_problem(tmp.path(), inst, 8, 8, k, 21);
        let args = [
            "gemm",
            "specs/volta.mma",
            "--instr",
            name,
            "--a",
            &p("a.npy"),
            "--b",
            &p("b.npy"),
        ];
        mmac(&[&args[..], &["--c", &p("c.npy"), "-o", &p("d.npy")]].concat())
    };
    let out = gemm(8);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("K = 8 is 2 k-steps of `mma.m8n8k4.f32.f16.f16.f16`, each step's d fed back as the next c, but c is `f16` and d is `f32`"),
        "{err}"
    );
    assert!(!tmp.path().join("d.npy").exists());
    let problem = write_problem(tmp.path(), inst, 8, 8, 4, 21);
    let out = gemm(4);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = matrix::read(Path::new(&p("d.npy")), &inst.arithmetic.d, "D").unwrap();
    let c = problem.c.as_ref().unwrap();
    let want = mma_by_elements(
        s.instruction(name).unwrap(),
        &problem.a,
        &problem.b,
        c,
        None,
        None,
    );
    assert_eq!(d.data, want.data);
}

#[test]
fn error_report_is_exact() {
    // An exactly rounded design (the Kulisch example): every element is within half an
    // f32 ulp of the exact result, and an integer instruction has no error at all.
    let s = spec("specs/examples/kulisch.mma");
    let checked = s.instruction("kulisch.m16n8k16.f32.f16.f16.f32").unwrap();
    let inst = checked.instruction();
    let p = Problem {
        a: random(&inst.arithmetic.a, 32, 16, 1),
        b: random(&inst.arithmetic.b, 16, 16, 2),
        c: Some(random(&inst.arithmetic.c, 32, 16, 3)),
        sa: None,
        sb: None,
        meta: None,
    };
    let d = gemm::gemm(&Engine::interpreter(checked), &p, &|_| {}).unwrap();
    let r = gemm::error_report(inst, &p, &d);
    assert_eq!(r.compared, 512, "{r:?}");
    // one instruction, one rounding to nearest: at most half an ulp, 2^-24 relative
    assert!(r.max_rel <= 2f64.powi(-24), "{r:?}");
    assert!(r.max_rel > 0.0, "some results must be inexact: {r:?}");

    let s = spec("specs/ampere.mma");
    let checked = s.instruction("mma.m16n8k32.s32.s8.s8.s32").unwrap();
    let inst = checked.instruction();
    let mut c = random(&inst.arithmetic.c, 16, 8, 9);
    for v in &mut c.data {
        *v &= 0xffff; // small accumulators: no wrap-around
    }
    let p = Problem {
        a: random(&inst.arithmetic.a, 16, 32, 4),
        b: random(&inst.arithmetic.b, 32, 8, 5),
        c: Some(c),
        sa: None,
        sb: None,
        meta: None,
    };
    let d = gemm::gemm(&Engine::interpreter(checked), &p, &|_| {}).unwrap();
    let r = gemm::error_report(inst, &p, &d);
    assert_eq!((r.compared, r.max_abs, r.mean_signed), (128, 0.0, 0.0));

    // Hopper's truncation shows as a bias toward zero on positive data
    let s = spec("specs/hopper.mma");
    let checked = s.instruction("mma.m16n8k16.f32.f16.f16.f32").unwrap();
    let inst = checked.instruction();
    let pos = |f: &mmac_compiler::format::Format, r, c, seed| {
        let mut m = random(f, r, c, seed);
        for v in &mut m.data {
            *v &= !(1u64 << (f.storage_bits() - 1)); // clear the sign bit
        }
        m
    };
    let p = Problem {
        a: pos(&inst.arithmetic.a, 16, 64, 6),
        b: pos(&inst.arithmetic.b, 64, 8, 7),
        c: Some(pos(&inst.arithmetic.c, 16, 8, 8)),
        sa: None,
        sb: None,
        meta: None,
    };
    let d = gemm::gemm(&Engine::interpreter(checked), &p, &|_| {}).unwrap();
    let r = gemm::error_report(inst, &p, &d);
    assert!(r.mean_signed < 0.0 && r.max_abs > 0.0, "{r:?}");
}

/// `mmac gemm` of the block-scaled RTX Blackwell instruction on files in `dir` (see
/// `write_problem`), writing D to `out`; `dir`-relative names.
fn gemm_block_scaled(dir: &Path, out: &str, extra: &[&str]) -> Output {
    let rb = "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3";
    let p = |x: &str| dir.join(x).display().to_string();
    let mut args: Vec<String> = ["gemm", "specs/rtx_blackwell.mma", "--instr", rb]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for (flag, file) in [
        ("--a", "a.npy"),
        ("--b", "b.npy"),
        ("--c", "c.npy"),
        ("--sa", "sa.npy"),
        ("--sb", "sb.npy"),
    ] {
        args.extend([flag.to_string(), p(file)]);
    }
    args.extend(["-o".to_string(), p(out)]);
    args.extend(extra.iter().map(|s| s.to_string()));
    mmac(&args.iter().map(|s| s.as_str()).collect::<Vec<_>>())
}

#[test]
fn d_written_chunk_by_chunk_is_d() {
    // 272 x 1024 outputs: D is computed in two chunks of rows (256 and 16), each written
    // as it is done; with --report the chunks are also kept for the exact comparison;
    // through a FIFO (a destination that would see a partial D), D is written once
    // complete. Each D equals the library's.
    let s = spec("specs/hopper.mma");
    let name = "mma.m16n8k16.f32.f16.f16.f32";
    let checked = s.instruction(name).unwrap();
    let inst = checked.instruction();
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = tmp.path();
    let p = write_problem(dir, inst, 272, 1024, 32, 5);
    let want = gemm::gemm(&Engine::interpreter(checked), &p, &|_| {}).unwrap();
    let operands = |out: &Path| -> Vec<String> {
        let mut args: Vec<String> = [
            "gemm",
            "specs/hopper.mma",
            "--instr",
            name,
            "--threads",
            "1",
        ]
        .map(String::from)
        .to_vec();
        for x in ["a", "b", "c"] {
            args.push(format!("--{x}"));
            args.push(dir.join(format!("{x}.npy")).to_str().unwrap().into());
        }
        args.push("-o".into());
        args.push(out.to_str().unwrap().into());
        args
    };
    for extra in [&[][..], &["--report"][..]] {
        let d_path = dir.join("d.npy");
        let mut args = operands(&d_path);
        args.extend(extra.iter().map(|x| x.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let table = mmac_ok(&args);
        assert_eq!(
            matrix::read(&d_path, &inst.arithmetic.d, "D").unwrap(),
            want,
            "{extra:?}"
        );
        if !extra.is_empty() {
            // the report compared the kept D: an exact GEMM of this size has an error
            assert!(table.contains("278528 elements compared"), "{table}");
        }
    }
    #[cfg(unix)]
    {
        let fifo = dir.join("d.fifo");
        let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        let args = operands(&fifo);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        mmac_ok(&args);
        let bytes = reader.join().unwrap();
        let copy = dir.join("from-fifo.npy");
        std::fs::write(&copy, bytes).unwrap();
        assert_eq!(matrix::read(&copy, &inst.arithmetic.d, "D").unwrap(), want);
    }
}

#[test]
fn the_output_is_never_an_input() {
    let s = spec("specs/rtx_blackwell.mma");
    let inst = s
        .instruction("mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3")
        .unwrap()
        .instruction();
    let dir = tempfile::TempDir::new().unwrap();
    std::fs::create_dir(dir.path().join("x")).unwrap();
    write_problem(dir.path(), inst, 16, 8, 64, 21);
    for (flag, file) in [
        ("--a", "a.npy"),
        ("--b", "b.npy"),
        ("--c", "c.npy"),
        ("--sa", "sa.npy"),
        ("--sb", "sb.npy"),
    ] {
        let before = std::fs::read(dir.path().join(file)).unwrap();
        // the same file, spelled differently
        let o = gemm_block_scaled(dir.path(), &format!("x/../{file}"), &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("x/../{file} is the input {flag} ")) && err.contains("refusing"),
            "{err}"
        );
        assert!(!err.contains("dot products in"), "nothing ran: {err}");
        assert_eq!(
            std::fs::read(dir.path().join(file)).unwrap(),
            before,
            "{file} unchanged"
        );
    }
    // and a distinct output is fine
    let o = gemm_block_scaled(dir.path(), "x/d.npy", &[]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
}

#[test]
fn an_output_that_cannot_be_created_is_refused_before_any_work() {
    let dir = tempfile::TempDir::new().unwrap();
    let d = dir.path().join("nodir/D.npy");
    // missing inputs too: the output is checked first
    let o = mmac(&[
        "gemm",
        "specs/hopper.mma",
        "--instr",
        "mma.m16n8k16.f32.f16.f16.f32",
        "--a",
        "missing_a.npy",
        "--b",
        "missing_b.npy",
        "-o",
        d.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "cannot create {}: there is no folder",
            d.display()
        )),
        "{err}"
    );
    assert!(!err.contains("missing_a.npy"), "{err}");
    // a folder in the way
    let o = mmac(&[
        "gemm",
        "specs/hopper.mma",
        "--instr",
        "mma.m16n8k16.f32.f16.f16.f32",
        "--a",
        "missing_a.npy",
        "--b",
        "missing_b.npy",
        "-o",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("it is a folder"));
}

/// `sh -c SCRIPT` in the repository, with `$0` the built mmac (for `ulimit`, `trap` and
/// redirections around it).
#[cfg(unix)]
fn sh(script: &str) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(support::mmac_path())
        .current_dir(root())
        .output()
        .unwrap()
}

/// A D beyond the file size limit (`ulimit -f`) is refused before the work, and leaves the
/// previous D as it was and no temporary file behind.
#[cfg(unix)]
#[test]
fn a_failed_write_leaves_the_previous_output_whole() {
    let s = spec("specs/hopper.mma");
    let inst = s
        .instruction("mma.m16n8k16.f32.f16.f16.f32")
        .unwrap()
        .instruction();
    let dir = tempfile::TempDir::new().unwrap();
    write_problem(dir.path(), inst, 64, 64, 16, 31);
    let p = |x: &str| dir.path().join(x).display().to_string();
    let old = b"the previous D".to_vec();
    std::fs::write(dir.path().join("d.npy"), &old).unwrap();
    let files_before = std::fs::read_dir(dir.path()).unwrap().count();
    // D is 64 x 64 f32, 16 KiB; allow 4 blocks (2 or 4 KiB). An ignored SIGXFSZ stays
    // ignored across exec, so the write fails with EFBIG instead of killing mmac.
    let script = format!(
        "trap '' XFSZ; ulimit -f 4; exec \"$0\" gemm specs/hopper.mma --instr mma.m16n8k16.f32.f16.f16.f32 --a {} --b {} --c {} -o {}",
        p("a.npy"),
        p("b.npy"),
        p("c.npy"),
        p("d.npy")
    );
    // without the trap, SIGXFSZ would kill mmac midway: the limit is found before the
    // work, from the size D will take (found by a hostile run: killed, a temporary file
    // left until the next run)
    for script in [script.clone(), script.replace("trap '' XFSZ; ", "")] {
        let o = sh(&script);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains("d.npy") && err.contains("(ulimit -f)"),
            "{err}"
        );
        assert_eq!(std::fs::read(dir.path().join("d.npy")).unwrap(), old);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            files_before,
            "no temporary file left"
        );
    }
}

/// `-o /dev/stdout` writes D through the process's stdout, whatever it is open on: a file
/// the shell appends to keeps what it held (it was replaced by a file holding only D),
/// and a file named as the output keeps its permissions when replaced.
#[cfg(unix)]
#[test]
fn stdout_is_written_through_and_a_replaced_file_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let s = spec("specs/hopper.mma");
    let name = "mma.m16n8k16.f32.f16.f16.f32";
    let inst = s.instruction(name).unwrap().instruction();
    let dir = tempfile::TempDir::new().unwrap();
    write_problem(dir.path(), inst, 16, 8, 16, 33);
    let p = |x: &str| dir.path().join(x).display().to_string();
    let gemm = format!(
        "\"$0\" gemm specs/hopper.mma --instr {name} --a {} --b {} --c {}",
        p("a.npy"),
        p("b.npy"),
        p("c.npy")
    );
    std::fs::write(dir.path().join("d.npy"), b"old").unwrap();
    std::fs::set_permissions(
        dir.path().join("d.npy"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let o = sh(&format!("{gemm} -o {}", p("d.npy")));
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let d = std::fs::read(dir.path().join("d.npy")).unwrap();
    let mode = std::fs::metadata(dir.path().join("d.npy"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    for (out, how) in [
        ("/dev/stdout", ">>"),
        ("/dev/fd/1", ">>"),
        ("/dev/stdout", ">"),
    ] {
        std::fs::write(dir.path().join("log"), b"kept\n").unwrap();
        let o = sh(&format!("{gemm} -o {out} {how} {}", p("log")));
        assert_eq!(o.status.code(), Some(0), "{o:?}");
        let log = std::fs::read(dir.path().join("log")).unwrap();
        let want = if how == ">>" {
            [&b"kept\n"[..], &d].concat()
        } else {
            d.clone()
        };
        assert_eq!(log, want, "-o {out} {how} log");
    }
}

/// SIGINT, SIGTERM or SIGHUP during a run that writes D removes its temporary file (a
/// 100 MB `.part` was left behind) and leaves the previous D whole (each that this test
/// does not ignore: SIGTERM at least).
#[cfg(unix)]
#[test]
fn an_interrupted_run_leaves_no_temporary_file() {
    let s = spec("specs/hopper.mma");
    let name = "mma.m16n8k16.f32.f16.f16.f32";
    let inst = s.instruction(name).unwrap().instruction();
    let dir = tempfile::TempDir::new().unwrap();
    // 4096 x 4096 outputs on the interpreter: seconds of work, written row chunk by chunk
    write_problem(dir.path(), inst, 4096, 4096, 16, 35);
    let p = |x: &str| dir.path().join(x).display().to_string();
    // a signal this process ignores (`nohup` ignores HUP, a shell's `&` INT) the child
    // ignores too, and mmac keeps it so: only the others are sent
    let ignored = |number: u32| {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let mask = status
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .unwrap_or(0);
        mask >> (number - 1) & 1 == 1
    };
    let signals = [("INT", 2), ("TERM", 15), ("HUP", 1)];
    for (signal, _) in signals.into_iter().filter(|&(_, n)| !ignored(n)) {
        std::fs::write(dir.path().join("d.npy"), b"the previous D").unwrap();
        let mut child = Command::new(support::mmac_path())
            .args([
                "gemm",
                "specs/hopper.mma",
                "--instr",
                name,
                "--engine",
                "interp",
            ])
            .args(["--a", &p("a.npy"), "--b", &p("b.npy"), "--c", &p("c.npy")])
            .args(["-o", &p("d.npy")])
            .current_dir(root())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let part = || {
            std::fs::read_dir(dir.path())
                .unwrap()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".part"))
        };
        let started = std::time::Instant::now();
        while !part() && started.elapsed().as_secs() < 120 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(part(), "the run writes its temporary file as it goes");
        let killed = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = child.wait().unwrap();
        assert!(!status.success(), "{signal}: {status:?}");
        assert!(!part(), "{signal}: the temporary file is removed");
        assert_eq!(
            std::fs::read(dir.path().join("d.npy")).unwrap(),
            b"the previous D"
        );
    }
}

/// A D larger than the memory the process may have (32768 x 32768 elements, 8 GiB, under
/// a 4 GiB limit) is an error saying so, not an abort, and nothing is written.
#[cfg(unix)]
#[test]
fn a_d_beyond_memory_is_an_error() {
    let s = spec("specs/hopper.mma");
    let name = "mma.m16n8k16.f32.f16.f16.f32";
    let inst = s.instruction(name).unwrap().instruction();
    let dir = tempfile::TempDir::new().unwrap();
    let f16 = &inst.arithmetic.a;
    matrix::write(
        &dir.path().join("a.npy"),
        f16,
        &Matrix::filled(32768, 16, 0x3c00),
    )
    .unwrap();
    matrix::write(
        &dir.path().join("b.npy"),
        f16,
        &Matrix::filled(16, 32768, 0x3c00),
    )
    .unwrap();
    let p = |x: &str| dir.path().join(x).display().to_string();
    for (out, extra) in [("/dev/null", ""), (&*p("d.npy"), "--report")] {
        let script = format!(
            "ulimit -v 4000000; exec \"$0\" gemm specs/hopper.mma --instr {name} --a {} --b {} -o {out} {extra}",
            p("a.npy"),
            p("b.npy")
        );
        let o = sh(&script);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains("a 32768 x 32768 matrix needs 8.0 GiB (8 bytes an element), more memory than there is"),
            "{err}"
        );
        assert!(!dir.path().join("d.npy").exists());
    }
}

/// An instruction the JIT does not lower (a NaN rule of the interpreter's alone) runs on
/// the interpreter with a note, as `--engine jit` says (gemm and mma refused it, exit 1).
#[test]
fn what_the_jit_refuses_runs_on_the_interpreter_with_a_note() {
    let spec_text = "arch hopper\nimport std\n\ninstruction mma.m16n8k16.f32.f16.f16.f32 {\n    shape 16 x 8 x 16\n    types a = f16, b = f16, c = f32, d = f32\n    uses t_fdpa(F = 25, L = 16, e_zero = -133, rho = toward_zero, P = 23)\n    nan propagate_c_first\n}\n";
    let dir = tempfile::TempDir::new().unwrap();
    let spec_path = dir.path().join("prop.mma");
    std::fs::write(&spec_path, spec_text).unwrap();
    let loaded = mmac_runtime::specs::load_file(&spec_path).unwrap();
    let checked = loaded.instruction("mma.m16n8k16.f32.f16.f16.f32").unwrap();
    let problem = write_problem(dir.path(), checked.instruction(), 16, 8, 16, 41);
    let p = |x: &str| dir.path().join(x).display().to_string();
    for cmd in ["mma", "gemm"] {
        let o = mmac(&[
            cmd,
            &p("prop.mma"),
            "--instr",
            "mma.m16n8k16.f32.f16.f16.f32",
            "--a",
            &p("a.npy"),
            "--b",
            &p("b.npy"),
            "--c",
            &p("c.npy"),
            "-o",
            &p("d.npy"),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{cmd}: {err}");
        // (once: found by a review, the deferred kernel's note came twice)
        assert_eq!(err.matches("using the interpreter").count(), 1, "{err}");
        assert!(err.contains("note: "), "{err}");
        let d = matrix::read(
            Path::new(&p("d.npy")),
            &checked.instruction().arithmetic.d,
            "D",
        );
        let c = problem.c.as_ref().unwrap();
        let want = mma_by_elements(checked, &problem.a, &problem.b, c, None, None);
        assert_eq!(d.unwrap().data, want.data, "{cmd}");
    }
}
