//! Sparse MMA (`sparse a 2 of 4`): cases of the independent model (mmasim's vectors of the
//! dense instruction of half the K) reproduced through `mmac gemm --meta` under the stated
//! hypothesis; both engines agreeing on sparse batches; the pattern enforced with the row
//! named; dense 2:4 matrices compressed; and the two hypotheses of what the unit does with
//! the selected elements told apart by `mmac diff` and `mmac gen`.

mod support;

use support::{mmac, mmac_ok, root, stderr, stdout};

use mmac_compiler::Checked;
use mmac_compiler::engine::{Choice, Engine};
use mmac_compiler::ir::Walk;
use mmac_compiler::random::Rng;
use mmac_runtime::conformance::matches;
use mmac_runtime::matrix::{self, Matrix};
use mmac_runtime::sparse::{SparseInput, random_positions};
use mmac_runtime::specs::{self, LoadedSpec};
use mmac_runtime::vectors;
use std::path::{Path, PathBuf};

fn library() -> Vec<LoadedSpec> {
    let mut loaded = specs::load_all(&root().join("specs")).0;
    loaded.extend(specs::load_all(&root().join("specs/examples")).0);
    loaded
}

/// The dense instruction whose arithmetic a sparse one runs over its selected products:
/// `mma.sp.m16n8k32...` -> `mma.m16n8k16...`, `v_smfmac_f32_16x16x32_f16` ->
/// `v_mfma_f32_16x16x16_f16`, `v_swmmac_...` -> `v_wmma_...` (K halved).
fn dense_name(sparse: &str, columns: usize, dense_k: usize) -> String {
    let name = sparse
        .replacen("mma.sp.", "mma.", 1)
        .replacen("wgmma.sp.", "wgmma.", 1)
        .replacen("v_smfmac_", "v_mfma_", 1)
        .replacen("v_swmmac_", "v_wmma_", 1);
    name.replacen(&format!("k{columns}."), &format!("k{dense_k}."), 1)
        .replacen(&format!("x{columns}_"), &format!("x{dense_k}_"), 1)
}

/// Random encodings of a format, specials (NaN, Inf) included: what B's unselected rows
/// hold, which the selected products must never read.
fn any_encoding(rng: &mut Rng, f: &mmac_compiler::format::Format) -> u64 {
    rng.next_u64() & f.storage_mask()
}

/// A cell of D to compare: row, column, and the independent model's d.
type Cell = (usize, usize, u64);

/// Every dense vector case `case` of the independent model placed at the diagonal cell
/// (m*t, n*t) of one GEMM: row m*t of A holds its a at random positions, column n*t of B
/// its b at those rows (every other row of that column anything, NaN included), C its c.
/// Returns the files and the cells to compare.
fn block_diagonal(
    dir: &Path,
    checked: Checked,
    cases: &[vectors::Case],
    rng: &mut Rng,
) -> (Vec<(String, PathBuf)>, Vec<Cell>) {
    let inst = checked.instruction();
    let ar = &inst.arithmetic;
    let s = inst.sparsity.unwrap();
    let (m, n, stored, columns) = (
        inst.m as usize,
        inst.n as usize,
        inst.stored(),
        inst.columns(),
    );
    let t = cases.len();
    let (rows, cols) = (m * t, n * t);
    let mut a = Matrix::filled(rows, stored, 0);
    let mut meta = Matrix::filled(rows, stored, 0);
    let mut b = Matrix::filled(columns, cols, 0);
    let mut c = Matrix::filled(rows, cols, 0);
    for x in &mut a.data {
        *x = rng.finite(&ar.a);
    }
    for x in &mut b.data {
        *x = any_encoding(rng, &ar.b);
    }
    for x in &mut c.data {
        *x = rng.finite(&ar.c);
    }
    for i in 0..rows {
        let p = random_positions(&s, columns, rng);
        meta.data[i * stored..(i + 1) * stored].copy_from_slice(&p);
    }
    let mut cells = vec![];
    for (ti, case) in cases.iter().enumerate() {
        let (i, j) = (m * ti, n * ti);
        a.data[i * stored..(i + 1) * stored].copy_from_slice(&case.a);
        for (q, &p) in meta.data[i * stored..(i + 1) * stored].iter().enumerate() {
            b.data[p as usize * cols + j] = case.b[q];
        }
        c.data[i * cols + j] = case.c;
        cells.push((i, j, case.d));
    }
    let u64_format = mmac_compiler::format::Format::int("u64", 64, false);
    let mut files = vec![];
    for (option, name, format, x) in [
        ("--a", "a.npy", &ar.a, &a),
        ("--b", "b.npy", &ar.b, &b),
        ("--c", "c.npy", &ar.c, &c),
        ("--meta", "meta.npy", &u64_format, &meta),
    ] {
        let path = dir.join(name);
        matrix::write(&path, format, x).unwrap();
        files.push((option.to_string(), path));
    }
    (files, cells)
}

#[test]
fn independent_model_cases_are_reproduced_through_gemm_meta() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(26);
    let mut covered = vec![];
    for loaded in library() {
        let spec_path = loaded.path.clone();
        let arch = loaded.checked.arch().to_string();
        for checked in loaded.checked.instructions() {
            let inst = checked.instruction();
            let Some(s) = inst.sparsity else { continue };
            if s.walk != Walk::Selected || inst.arithmetic.scale.is_some() {
                continue;
            }
            let dense = dense_name(&inst.name, inst.columns(), inst.k());
            let file = root()
                .join("tests/vectors")
                .join(&arch)
                .join(format!("{}.mmv", dense.replace("::", "_")));
            let Ok((vf, errors)) = vectors::read(&file) else {
                continue;
            };
            assert!(errors.is_empty(), "{}: {errors:?}", file.display());
            let cases: Vec<_> = vf.cases.iter().take(40).cloned().collect();
            let (files, cells) = block_diagonal(dir.path(), checked, &cases, &mut rng);
            let out = dir.path().join("d.npy");
            let mut args = vec![
                "gemm".to_string(),
                spec_path.display().to_string(),
                "--instr".into(),
                inst.name.clone(),
                "-o".into(),
                out.display().to_string(),
            ];
            for (option, path) in &files {
                args.push(option.clone());
                args.push(path.display().to_string());
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            mmac_ok(&args);
            let d = matrix::read(&out, &inst.arithmetic.d, "D").unwrap();
            for (case, (i, j, want)) in cases.iter().zip(cells) {
                let got = d.data[i * d.cols + j];
                assert!(
                    matches(&inst.arithmetic.d, want, got, vf.nan_any),
                    "{} from {}:{}: d = {got:x}, mmasim's dense {dense} gives {want:x}",
                    inst.name,
                    file.display(),
                    case.line
                );
            }
            covered.push(format!("{arch} {}", inst.name));
        }
    }
    // every family with a public dense vector file: NVIDIA f16/bf16/tf32/fp8 on five
    // architectures, wgmma and tcgen05 shapes, CDNA3's SMFMAC
    assert!(
        covered.len() >= 40,
        "only {} covered: {covered:#?}",
        covered.len()
    );
    for family in [
        "ampere mma.sp.m16n8k32.f32.f16",
        "ampere mma.sp.m16n8k16.f32.tf32",
        "hopper mma.sp.m16n8k32.f32.bf16",
        "ada mma.sp.m16n8k64.f32.e4m3",
        "cdna3 v_smfmac_f32_16x16x32_f16",
    ] {
        assert!(
            covered.iter().any(|c| c.starts_with(family)),
            "{family} not covered: {covered:#?}"
        );
    }
}

/// Every sparse instruction of the library on both engines, a batch of records each with
/// its own positions: random finite encodings (NaNs and infinities among the steps'
/// results, tiny operands), and values of N(0, 1) rounded into float formats with unit
/// scales and c = 0, whose products decide d (random encodings' c alone gives d on most
/// records, and would hide a batch that dropped the products).
#[test]
fn both_engines_agree_on_every_sparse_instruction() {
    let mut rng = Rng::new(7);
    let mut seen = 0;
    for loaded in library() {
        for checked in loaded.checked.instructions() {
            if checked.sparsity().is_none() {
                continue;
            }
            seen += 1;
            let inst = checked.instruction();
            let jit = Engine::new(checked, Choice::QUICK);
            let interp = Engine::interpreter(checked);
            let inputs: Vec<SparseInput> = (0..48)
                .map(|r| {
                    let random = SparseInput::random(inst, &mut rng);
                    if r % 2 == 0 {
                        random
                    } else {
                        valued(inst, random, &mut rng)
                    }
                })
                .collect();
            let cat = |part: fn(&SparseInput) -> &[u64]| -> Vec<u64> {
                inputs
                    .iter()
                    .flat_map(|i| part(i).iter().copied())
                    .collect()
            };
            let c: Vec<u64> = inputs.iter().map(|i| i.input.c).collect();
            let mut d = vec![0; c.len()];
            let s = inst.scale_count();
            jit.sparse_batch_strided(
                &c,
                (&cat(|i| &i.input.a), inst.stored()),
                (&cat(|i| &i.input.b), inst.columns()),
                (&cat(|i| &i.input.sa), s),
                (&cat(|i| &i.input.sb), s),
                (&cat(|i| &i.positions), inst.stored()),
                &mut d,
            )
            .unwrap();
            let mut moved = 0;
            for (i, input) in inputs.iter().enumerate() {
                let want = interp
                    .sparse_dot(&input.operands(), &input.positions)
                    .unwrap();
                assert_eq!(d[i], want, "{}: {}", inst.name, input.run_arguments(inst));
                moved += usize::from(i % 2 == 1 && want != input.input.c);
            }
            assert!(
                moved >= 18,
                "{}: the products moved d on {moved} of 24 valued records",
                inst.name
            );
        }
    }
    assert!(seen > 100, "{seen} sparse instructions");
}

/// `random` with a and b of N(0, 1) rounded into their formats where those are floats,
/// c = +0 and unit scales: inputs whose products decide d.
fn valued(
    inst: &mmac_compiler::ir::Instruction,
    random: SparseInput,
    rng: &mut Rng,
) -> SparseInput {
    use mmac_runtime::accuracy::{Distribution, round_into};
    let ar = &inst.arithmetic;
    let mut x = random;
    for (format, values) in [(&ar.a, &mut x.input.a), (&ar.b, &mut x.input.b)] {
        if format.as_float().is_some() {
            for v in values.iter_mut() {
                *v = round_into(format, Distribution::Normal.draw(rng)).unwrap();
            }
        }
    }
    x.input.c = mmac_runtime::inputs::zero(&ar.c, false);
    if let Some(s) = &ar.scale {
        let one = mmac_runtime::inputs::pow2(&s.format, 0, false).unwrap();
        x.input.sa.fill(one);
        x.input.sb.fill(one);
    }
    x
}

/// A batch whose records each have their own positions names the first record that breaks
/// the pattern, on both engines and for both walks (the JIT checks positions in the pass
/// that builds the dense operand, the interpreter in `sparse::dense_record`).
#[test]
fn a_batch_names_the_record_whose_positions_break_the_pattern() {
    let columns = specs::load_file(&root().join("specs/examples/sparse_over_columns.mma")).unwrap();
    let mut rng = Rng::new(11);
    for (loaded, name) in [(hopper(), HOPPER_SP), (columns, AMPERE_SP)] {
        let checked = loaded.checked.find(name).unwrap();
        let inst = checked.instruction();
        let inputs: Vec<SparseInput> = (0..24)
            .map(|_| SparseInput::random(inst, &mut rng))
            .collect();
        let cat = |part: fn(&SparseInput) -> &[u64]| -> Vec<u64> {
            inputs
                .iter()
                .flat_map(|i| part(i).iter().copied())
                .collect()
        };
        let c: Vec<u64> = inputs.iter().map(|i| i.input.c).collect();
        let stored = inst.stored();
        // (record 13: its first two positions swapped; record 17: one far outside)
        let mut positions = cat(|i| &i.positions);
        positions.swap(13 * stored, 13 * stored + 1);
        positions[17 * stored + 3] = u64::MAX - 2;
        let (a, b) = (cat(|i| &i.input.a), cat(|i| &i.input.b));
        for engine in [
            Engine::new(checked, Choice::QUICK),
            Engine::interpreter(checked),
        ] {
            let refused = |positions: &[u64]| {
                let mut d = vec![0; c.len()];
                engine
                    .sparse_batch_strided(
                        &c,
                        (&a, stored),
                        (&b, inst.columns()),
                        (&[], 0),
                        (&[], 0),
                        (positions, stored),
                        &mut d,
                    )
                    .unwrap_err()
                    .to_string()
            };
            let e = refused(&positions);
            assert!(
                e.contains("record 13: group 0 (columns 0..3): positions"),
                "{name}: {e}"
            );
            assert!(e.contains("do not increase"), "{name}: {e}");
            let mut later = positions.clone();
            later.swap(13 * stored, 13 * stored + 1);
            let e = refused(&later);
            assert!(
                e.contains("record 17: group 1 (columns 4..7): position 18446744073709551613"),
                "{name}: {e}"
            );
        }
    }
}

/// Records that share the operand their positions build from (B for the selected walk, A
/// for the columns walk) and the positions themselves share what is built: over several
/// of the engine's chunks (600 records), every record's d is the interpreter's for its
/// own c and other operand. The inputs are f16 and f32 values in [1, 2) of either sign,
/// so that every product moves d.
#[test]
fn records_that_share_the_built_operand_match_the_interpreter_across_chunks() {
    let columns = specs::load_file(&root().join("specs/examples/sparse_over_columns.mma")).unwrap();
    let mut rng = Rng::new(5);
    for (loaded, name) in [(hopper(), HOPPER_SP), (columns, AMPERE_SP)] {
        let checked = loaded.checked.find(name).unwrap();
        let inst = checked.instruction();
        let s = checked.sparsity().unwrap();
        let mut f16 =
            |n: usize| -> Vec<u64> { (0..n).map(|_| rng.next_u64() & 0x83ff | 0x3c00).collect() };
        let selected = s.walk == Walk::Selected;
        // the operand the records share (B's columns, or A's stored elements), and the
        // one each has of its own
        let (shared_len, own_len) = if selected {
            (inst.columns(), inst.stored())
        } else {
            (inst.stored(), inst.columns())
        };
        let (shared, own) = (f16(shared_len), f16(600 * own_len));
        let c: Vec<u64> = (0..600)
            .map(|_| rng.next_u64() & 0x807f_ffff | 0x3f80_0000)
            .collect();
        let positions = random_positions(&s, inst.columns(), &mut rng);
        let (a, b) = if selected {
            ((&own[..], own_len), (&shared[..], 0))
        } else {
            ((&shared[..], 0), (&own[..], own_len))
        };
        let mut d = vec![0; c.len()];
        Engine::new(checked, Choice::QUICK)
            .sparse_batch_strided(&c, a, b, (&[], 0), (&[], 0), (&positions, 0), &mut d)
            .unwrap();
        let interp = Engine::interpreter(checked);
        for (r, &c) in c.iter().enumerate() {
            let own = &own[r * own_len..(r + 1) * own_len];
            let (a, b) = if selected {
                (own, &shared[..])
            } else {
                (&shared[..], own)
            };
            let ops = mmac_compiler::engine::Operands {
                c,
                a,
                b,
                sa: &[],
                sb: &[],
            };
            let want = interp.sparse_dot(&ops, &positions).unwrap();
            assert_ne!(want, c, "{name}: record {r}: the products move d");
            assert_eq!(d[r], want, "{name}: record {r}");
        }
    }
}

/// A dense 2:4 A for `inst` (`rows` x `k`): two nonzero elements in most groups, fewer in
/// some.
fn pruned(inst: &mmac_compiler::ir::Instruction, rows: usize, k: usize, rng: &mut Rng) -> Matrix {
    let f = &inst.arithmetic.a;
    let s = inst.sparsity.unwrap();
    let mut a = Matrix::filled(rows, k, f.positive_zero());
    for i in 0..rows {
        for p in random_positions(&s, k, rng) {
            if !rng.percent(10) {
                let x = loop {
                    let x = rng.finite(f);
                    if !mmac_compiler::sparse::is_zero(f, x) {
                        break x;
                    }
                };
                a.data[i * k + p as usize] = x;
            }
        }
    }
    a
}

fn hopper() -> LoadedSpec {
    specs::load_file(&root().join("specs/hopper.mma")).unwrap()
}

const HOPPER_SP: &str = "mma.sp.m16n8k32.f32.f16.f16.f32";

#[test]
fn a_dense_pruned_a_is_compressed_and_a_broken_row_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = hopper();
    let inst = spec.checked.find(HOPPER_SP).unwrap().instruction();
    let mut rng = Rng::new(3);
    let a = pruned(inst, 32, 64, &mut rng);
    let b = Matrix {
        rows: 64,
        cols: 16,
        data: (0..64 * 16)
            .map(|_| rng.finite(&inst.arithmetic.b))
            .collect(),
    };
    matrix::write(&d.join("a.npy"), &inst.arithmetic.a, &a).unwrap();
    matrix::write(&d.join("b.npy"), &inst.arithmetic.b, &b).unwrap();
    let path = |n: &str| d.join(n).display().to_string();
    let hopper = root().join("specs/hopper.mma").display().to_string();
    let gemm = |extra: &[&str], out: &str| {
        let o = path(out);
        let mut args = vec!["gemm", &hopper, "--instr", HOPPER_SP, "-o", &o];
        args.extend(extra);
        mmac(&args)
    };
    let (pa, pb) = (path("a.npy"), path("b.npy"));
    let o = gemm(&["--a", &pa, "--b", &pb], "dense.npy");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // the same with A compressed by hand: the stored elements and their columns as u8
    let mut p = mmac_runtime::gemm::Problem {
        a: a.clone(),
        b: b.clone(),
        c: None,
        sa: None,
        sb: None,
        meta: None,
    };
    mmac_runtime::gemm::compress_sparse(inst, &mut p).unwrap();
    let meta = p.meta.unwrap();
    assert_eq!((p.a.rows, p.a.cols), (32, 32));
    matrix::write(&d.join("s.npy"), &inst.arithmetic.a, &p.a).unwrap();
    matrix::write(
        &d.join("e.npy"),
        &mmac_compiler::format::Format::int("u8", 8, false),
        &meta,
    )
    .unwrap();
    let (ps, pe) = (path("s.npy"), path("e.npy"));
    let o = gemm(&["--a", &ps, "--meta", &pe, "--b", &pb], "meta.npy");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(d.join("dense.npy")).unwrap(),
        std::fs::read(d.join("meta.npy")).unwrap()
    );
    // and each element is the interpreter's sparse dot of that row and column
    let dd = matrix::read(&d.join("meta.npy"), &inst.arithmetic.d, "D").unwrap();
    let interp = Engine::interpreter(spec.checked.find(HOPPER_SP).unwrap());
    for (i, j) in [(0, 0), (5, 3), (31, 15), (17, 8)] {
        let bcol: Vec<u64> = (0..32).map(|r| b.data[r * 16 + j]).collect();
        let ops = mmac_compiler::engine::Operands {
            c: 0,
            a: &p.a.data[i * 32..i * 32 + 16],
            b: &bcol,
            sa: &[],
            sb: &[],
        };
        let first = interp
            .sparse_dot(&ops, &meta.data[i * 32..i * 32 + 16])
            .unwrap();
        let bcol2: Vec<u64> = (32..64).map(|r| b.data[r * 16 + j]).collect();
        let ops2 = mmac_compiler::engine::Operands {
            c: first,
            a: &p.a.data[i * 32 + 16..i * 32 + 32],
            b: &bcol2,
            ..ops
        };
        let rel: Vec<u64> = meta.data[i * 32 + 16..i * 32 + 32]
            .iter()
            .map(|x| x - 32)
            .collect();
        let want = interp.sparse_dot(&ops2, &rel).unwrap();
        assert_eq!(dd.data[i * 16 + j], want, "D[{i}, {j}]");
    }

    // row 5 with three nonzero elements in its second group: refused, nothing written
    let mut broken = a.clone();
    for col in 4..7 {
        broken.data[5 * 64 + col] = 0x3c00;
    }
    matrix::write(&d.join("broken.npy"), &inst.arithmetic.a, &broken).unwrap();
    let pbr = path("broken.npy");
    let o = gemm(&["--a", &pbr, "--b", &pb], "never.npy");
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("error: {pbr}: row 5 of A")) && e.contains("group 1 (columns 4..7)"),
        "{e}"
    );
    assert!(!d.join("never.npy").exists());

    // positions out of the pattern in row 2 of --meta: refused, naming the row
    let mut bad = meta.clone();
    bad.data[2 * 32 + 1] = bad.data[2 * 32];
    matrix::write(
        &d.join("bad.npy"),
        &mmac_compiler::format::Format::int("u8", 8, false),
        &bad,
    )
    .unwrap();
    let pbad = path("bad.npy");
    let o = gemm(&["--a", &ps, "--meta", &pbad, "--b", &pb], "never.npy");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!("error: {pbad}: row 2 of the positions")),
        "{}",
        stderr(&o)
    );
    assert!(!d.join("never.npy").exists());

    // a signed dtype is not positions
    matrix::write(
        &d.join("signed.npy"),
        &mmac_compiler::format::Format::int("s16", 16, true),
        &meta,
    )
    .unwrap();
    let psigned = path("signed.npy");
    let o = gemm(&["--a", &ps, "--meta", &psigned, "--b", &pb], "never.npy");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("uint8, uint16, uint32 or uint64"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn run_takes_the_positions_or_a_dense_row() {
    let hopper = root().join("specs/hopper.mma").display().to_string();
    let b: Vec<String> = (1..=32).map(|i| format!("{i}.0")).collect();
    let b = b.join(",");
    let with_meta = mmac_ok(&[
        "run",
        &hopper,
        "--instr",
        HOPPER_SP,
        "--c",
        "0.5",
        "--a",
        "1.0,2.0,3.0,-4.0",
        "--pad",
        "--meta",
        "1,3,4,6,8,9,12,13,16,17,20,21,24,25,28,29",
        "--b",
        &b,
    ]);
    // 1*2 + 2*4 + 3*5 - 4*7 + 0.5
    assert_eq!(with_meta.trim(), "d=c0200000 -2.5");
    let mut dense = vec!["0.0"; 32];
    for (col, v) in [(1, "1.0"), (3, "2.0"), (4, "3.0"), (6, "-4.0")] {
        dense[col] = v;
    }
    let dense = dense.join(",");
    let compressed = mmac_ok(&[
        "run", &hopper, "--instr", HOPPER_SP, "--c", "0.5", "--a", &dense, "--b", &b,
    ]);
    assert_eq!(compressed, with_meta);
    // --pad without --meta fills a shorter dense row with +0
    let short = dense.split(',').take(7).collect::<Vec<_>>().join(",");
    let padded = mmac_ok(&[
        "run", &hopper, "--instr", HOPPER_SP, "--c", "0.5", "--a", &short, "--pad", "--b", &b,
    ]);
    assert_eq!(padded, with_meta);
    let o = mmac(&[
        "run", &hopper, "--instr", HOPPER_SP, "--c", "0.5", "--a", &short, "--b", &b,
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--pad fills"), "{}", stderr(&o));
    let o = mmac(&[
        "run",
        &hopper,
        "--instr",
        HOPPER_SP,
        "--c",
        "0",
        "--a",
        "1.0",
        "--pad",
        "--meta",
        "0,1,2,6,8,9,12,13,16,17,20,21,24,25,28,29",
        "--b",
        &b,
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("group 0 (columns 0..3) holds more than 2"),
        "{}",
        stderr(&o)
    );
    let trace = mmac_ok(&[
        "run", &hopper, "--instr", HOPPER_SP, "--c", "0.5", "--a", &dense, "--b", &b, "--trace",
    ]);
    assert!(
        trace.starts_with("sparse: a's elements at columns 1,3,4,6,"),
        "{trace}"
    );
    assert!(trace.trim_end().ends_with("d=c0200000 -2.5"), "{trace}");
}

const AMPERE_SP: &str = "mma.sp.m16n8k32.f32.f16.f16.f32";

/// Two sparse instructions with as many stored elements in different patterns take
/// different positions: `diff` refuses them before it searches, either way round; and
/// with `--trials 0` the structured candidates alone separate Ampere's F = 24 from
/// Blackwell's F = 25 (3000 random inputs did not: "no difference found").
#[test]
fn diff_refuses_different_patterns_and_searches_structured_candidates() {
    let pairs = ["specs/ampere.mma", "mma.sp.m16n8k64.s32.s4.s4.s32"];
    let single = ["specs/rdna4.mma", "v_swmmac_i32_16x16x64_iu4"];
    for (left, right, says) in [
        (
            pairs,
            single,
            "A is 2 of 4 pairs sparse (left) vs 2 of 4 (right)",
        ),
        (
            single,
            pairs,
            "A is 2 of 4 sparse (left) vs 2 of 4 pairs (right)",
        ),
    ] {
        let o = mmac(&["diff", left[0], left[1], right[0], right[1]]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("take different operands: {says}")),
            "{}",
            stderr(&o)
        );
    }
    let ampere = root().join("specs/ampere.mma").display().to_string();

    let blackwell = root().join("specs/blackwell.mma").display().to_string();
    let f16 = "mma.sp.m16n8k16.f16.f16.f16.f16";
    let o = mmac(&["diff", &ampere, f16, &blackwell, f16, "--trials", "0"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let text = stdout(&o);
    assert!(text.contains("structured candidates"), "{text}");
    let d = |side: &str| {
        let line = text.lines().find_map(|l| l.strip_prefix(side)).unwrap();
        line.split_whitespace().next().unwrap().to_string()
    };
    for (prefix, want) in [
        ("  left : mmac ", d("left  d=")),
        ("  right: mmac ", d("right d=")),
    ] {
        let args = text.lines().find_map(|l| l.strip_prefix(prefix)).unwrap();
        let got = mmac_ok(&args.split_whitespace().collect::<Vec<_>>());
        assert!(got.starts_with(&format!("d={want} ")), "{args}: {got}");
    }
    assert_ne!(d("left  d="), d("right d="));
}

#[test]
fn diff_tells_the_two_hypotheses_apart_with_a_witness_that_replays() {
    let ampere = root().join("specs/ampere.mma").display().to_string();
    let other = root()
        .join("specs/examples/sparse_over_columns.mma")
        .display()
        .to_string();
    let o = mmac(&["diff", &ampere, AMPERE_SP, &other, AMPERE_SP]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = stdout(&o);
    let line = |prefix: &str| -> String {
        text.lines()
            .find_map(|l| l.trim_start().strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in {text}"))
            .trim()
            .to_string()
    };
    let (left_d, right_d) = (line("left  d="), line("right d="));
    assert!(left_d.contains("(over selected)") && right_d.contains("(over columns)"));
    for (side, d) in [("left : mmac ", &left_d), ("right: mmac ", &right_d)] {
        let args = line(side);
        let args: Vec<&str> = args.split_whitespace().collect();
        let got = mmac_ok(&args);
        let hex = d.split_whitespace().next().unwrap();
        assert!(
            got.starts_with(&format!("d={hex} ")),
            "{side}{args:?} gave {got}, diff said {d}"
        );
    }
    assert_ne!(
        left_d.split_whitespace().next(),
        right_d.split_whitespace().next()
    );
    // the same instruction is not told apart from itself
    let o = mmac(&[
        "diff", &ampere, AMPERE_SP, &ampere, AMPERE_SP, "--trials", "2000",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn gen_writes_cases_that_separate_the_hypotheses_and_test_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let ampere = root().join("specs/ampere.mma").display().to_string();
    let out = dir.path().join("sp.mmv");
    let o = out.display().to_string();
    mmac_ok(&["gen", &ampere, "--instr", AMPERE_SP, "-n", "40", "-o", &o]);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("# sparse: a 2 of 4 over selected"), "{text}");
    let separating = text.matches("# over selected -> over columns").count();
    assert_eq!(separating, 2, "{text}");
    let summary = mmac_ok(&["test", &ampere, "--vectors", &o]);
    assert!(
        summary.contains("failed") && summary.contains(" 0 failed"),
        "{summary}"
    );
    // under the other hypothesis (its spec declares another arch) those cases fail
    let other = dir.path().join("other.mmv");
    std::fs::write(
        &other,
        text.replace("# arch: ampere\n", "# arch: ampere_sparse_columns\n"),
    )
    .unwrap();
    let alt = root()
        .join("specs/examples/sparse_over_columns.mma")
        .display()
        .to_string();
    let o = mmac(&["test", &alt, "--vectors", &other.display().to_string()]);
    assert_eq!(o.status.code(), Some(1));
    // the separating cases alone: every one fails under the other hypothesis
    let lines: Vec<&str> = text.lines().collect();
    let mut only = String::new();
    for l in lines.iter().take_while(|l| l.starts_with('#')) {
        only.push_str(&l.replace("# arch: ampere", "# arch: ampere_sparse_columns"));
        only.push('\n');
    }
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("# over selected -> over columns") {
            only.push_str(&format!("{l}\n{}\n", lines[i + 1]));
        }
    }
    let separating_file = dir.path().join("separating.mmv");
    std::fs::write(&separating_file, &only).unwrap();
    let o = mmac(&[
        "test",
        &alt,
        "--vectors",
        &separating_file.display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).trim_end().ends_with("0 passed, 2 failed"),
        "{}",
        stdout(&o)
    );
    // a case whose positions break the pattern fails with the position named
    let broken = text.replacen(" pos=0,", " pos=1,1,", 1);
    std::fs::write(&other, broken).unwrap();
    let o = mmac(&["test", &ampere, "--vectors", &other.display().to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("pos: "), "{}", stdout(&o));
}

#[test]
fn the_checker_refuses_sparsity_an_instruction_cannot_have() {
    let dir = tempfile::tempdir().unwrap();
    for (clause, types, k, message) in [
        (
            "sparse a 2 of 4",
            "tf32",
            16,
            "2 of 4 sparsity is not a pattern for elements of `tf32`",
        ),
        (
            "sparse a 1 of 2",
            "f16",
            16,
            "1 of 2 sparsity is not a pattern for elements of `f16`",
        ),
        ("sparse b 2 of 4", "f16", 16, "operand b cannot be sparse"),
        (
            "sparse a 2 of 4",
            "f16",
            18,
            "K = 18 is not a multiple of the sparsity group (4 columns)",
        ),
        (
            "sparse a 2 of 4 over rows",
            "f16",
            16,
            "`over rows`: a sparse pipeline runs over `selected` or `columns`",
        ),
    ] {
        let path = dir.path().join("s.mma");
        std::fs::write(
            &path,
            format!(
                "arch t\nimport std\ninstruction x {{\n    shape 16 x 8 x {k}\n    types a = {types}, b = {types}, c = f32, d = f32\n    {clause}\n    uses t_fdpa(F = 25, L = 2, e_zero = -133)\n}}\n"
            ),
        )
        .unwrap();
        let o = mmac(&["check", "--color", "never", &path.display().to_string()]);
        assert_eq!(o.status.code(), Some(1), "{clause}");
        let e = stderr(&o);
        assert!(e.contains(message), "{clause}: {e}");
        assert!(
            e.contains("s.mma:6:"),
            "{clause}: the error points at line 6: {e}"
        );
    }
}

#[test]
fn serve_answers_requests_with_positions() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let ampere = root().join("specs/ampere.mma").display().to_string();
    let out = dir.path().join("sp.mmv");
    mmac_ok(&[
        "gen",
        &ampere,
        "--instr",
        AMPERE_SP,
        "-n",
        "20",
        "-o",
        &out.display().to_string(),
    ]);
    let text = std::fs::read_to_string(&out).unwrap();
    let (requests, answers): (Vec<&str>, Vec<&str>) = text
        .lines()
        .filter(|l| l.starts_with("c="))
        .map(|l| l.split_once(" d=").unwrap())
        .unzip();
    let mut child = support::mmac_command()
        .args(["serve", &ampere, "--instr", AMPERE_SP])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(requests.join("\n").as_bytes()).unwrap();
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let got: Vec<String> = stdout(&o)
        .lines()
        .map(|l| l.trim_start_matches("d=").to_string())
        .collect();
    assert_eq!(got, answers);
    // a request without its positions is refused, naming the line
    let serve = |input: String| {
        let mut child = support::mmac_command()
            .args(["serve", &ampere, "--instr", AMPERE_SP])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    };
    let first = requests[0].split(" pos=").next().unwrap();
    let o = serve(format!("{}\n{first}\n", requests[0]));
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stdout(&o).lines().count(), 1);
    assert!(
        stderr(&o).contains("<stdin>:2:1: `pos=`: 0 positions"),
        "{}",
        stderr(&o)
    );
    // positions that break the pattern, or a short `b=`: the error points at the field
    let at = requests[0].find(" pos=").unwrap() + 1;
    let (head, pos) = requests[0].split_at(at);
    let mut columns: Vec<&str> = pos["pos=".len()..].split(',').collect();
    columns.swap(0, 1);
    let swapped = format!("{head}pos={}", columns.join(","));
    let b_at = requests[0].find(" b=").unwrap() + 1;
    let b_end = b_at + requests[0][b_at..].find(',').unwrap();
    let short_b = format!("{}{}", &requests[0][..b_at + 2], &requests[0][b_end + 1..]);
    for (request, column, says) in [
        (swapped, at + 1, "`pos=`: group 0 (columns 0..3): positions"),
        (short_b, b_at + 1, "`b=` has 31 values"),
    ] {
        let o = serve(format!("{request}\n"));
        assert_eq!(o.status.code(), Some(2));
        assert!(
            stderr(&o).contains(&format!("<stdin>:1:{column}: {says}")),
            "{}",
            stderr(&o)
        );
    }
}

/// `mmac infer --sparse`: a served sparse instruction is inferred over its selected
/// products and checked on random positions; the two hypotheses come out as different
/// chain lengths (Ampere's over-columns unit closes a step every 8 columns: 4 selected
/// products), and a bad pattern is a usage error.
#[test]
fn infer_recovers_a_sparse_box_and_tells_the_walks_apart() {
    let dir = tempfile::tempdir().unwrap();
    let bin = support::mmac_path().display().to_string();
    let infer = |spec: &str, out: &str| {
        let exec = format!(
            "{bin} serve {} --instr {AMPERE_SP}",
            root().join(spec).display()
        );
        let path = dir.path().join(out);
        let o = mmac(&[
            "infer",
            "--exec",
            &exec,
            "--types",
            "a=f16,b=f16,c=f32,d=f32",
            "--k",
            "32",
            "--sparse",
            "2 of 4",
            "-o",
            &path.display().to_string(),
        ]);
        (o, path)
    };
    let (o, path) = infer("specs/ampere.mma", "selected.mma");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("over the selected products of a 2 of 4 sparse A on 4096 cases"),
        "{}",
        stdout(&o)
    );
    let spec = std::fs::read_to_string(&path).unwrap();
    assert!(
        spec.contains("    shape 16 x 8 x 32\n    sparse a 2 of 4 over selected\n"),
        "{spec}"
    );
    assert!(spec.contains("uses t_fdpa(F = 24, L = 8,"), "{spec}");
    // what was inferred and the library's instruction agree
    let name = "inferred.k32.f32.f16.f16.f32";
    let ampere = root().join("specs/ampere.mma").display().to_string();
    let o = mmac(&[
        "diff",
        &path.display().to_string(),
        name,
        &ampere,
        AMPERE_SP,
        "--trials",
        "4000",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));

    let (o, path) = infer("specs/examples/sparse_over_columns.mma", "columns.mma");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let spec = std::fs::read_to_string(&path).unwrap();
    assert!(spec.contains("uses t_fdpa(F = 24, L = 4,"), "{spec}");

    for (pattern, k, message) in [
        (
            "3 of 4",
            "32",
            "the patterns are 2 of 4, 1 of 2 and 2 of 4 pairs",
        ),
        (
            "2 of 4",
            "30",
            "--k 30 is not a whole number of groups of 4 columns",
        ),
        ("two of four", "32", "`two` is not a number"),
        ("2 4", "32", "expected \"KEPT of GROUP\""),
        // patterns of other element widths, refused before the box starts
        (
            "2 of 4 pairs",
            "32",
            "--sparse \"2 of 4 pairs\" is not a pattern for elements of `f16`",
        ),
        (
            "1 of 2",
            "32",
            "--sparse \"1 of 2\" is not a pattern for elements of `f16`",
        ),
    ] {
        let o = mmac(&[
            "infer",
            "--exec",
            "true",
            "--types",
            "a=f16,b=f16,c=f32,d=f32",
            "--k",
            k,
            "--sparse",
            pattern,
            "-o",
            &dir.path().join("never.mma").display().to_string(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{pattern}");
        assert!(stderr(&o).contains(message), "{pattern}: {}", stderr(&o));
        assert!(!dir.path().join("never.mma").exists());
    }
}

/// What lowers dense arithmetic only refuses a sparse instruction, naming it: the Verilog
/// back end (a whole spec leaves them out with a warning), `show --cost`, `prove`; and
/// `report` refuses the over-columns walk, whose samples would need A's zeros.
#[test]
fn the_dense_only_tools_refuse_sparse_instructions() {
    let ampere = root().join("specs/ampere.mma").display().to_string();
    let columns = root()
        .join("specs/examples/sparse_over_columns.mma")
        .display()
        .to_string();
    let refused = "is sparse (2 of 4): the Verilog back end lowers dense arithmetic";
    for args in [
        vec![
            "compile", &ampere, "--emit", "verilog", "--instr", AMPERE_SP,
        ],
        vec!["prove", &ampere, AMPERE_SP, &columns, AMPERE_SP],
    ] {
        let o = mmac(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(refused), "{args:?}: {}", stderr(&o));
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ampere.v");
    let o = mmac(&[
        "compile",
        &ampere,
        "--emit",
        "verilog",
        "-o",
        &out.display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("instructions left out, e.g. `mma.sp.")
            && stderr(&o).contains("is sparse"),
        "{}",
        stderr(&o)
    );
    let v = std::fs::read_to_string(&out).unwrap();
    assert!(v.contains("module mma_m16n8k16_f32_f16_f16_f32") && !v.contains("module mma_sp_"));
    let o = mmac(&["report", &columns, AMPERE_SP, "--samples", "10"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("walks every column of a 2 of 4 sparse A"),
        "{}",
        stderr(&o)
    );
    let o = mmac(&["report", &ampere, AMPERE_SP, "--samples", "10", "--k", "16"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}
