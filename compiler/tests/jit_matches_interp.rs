//! The JIT against the reference interpreter: for every instruction of every spec under
//! `specs/`, `specs/examples/` and `compiler/tests/data/` (IR features the shipped specs do
//! not use), random encodings give the same bits from both engines
//! (any NaN matching any NaN only where the pipeline's NaN policy is `ieee`).
//!
//! Cases per distinct kernel: `MMAC_JIT_CASES` (default 192). Random operands mix uniform
//! codes, codes clustered around one binade (cancellation, alignment shifts), zeros and
//! the extreme codes (Inf/NaN, largest finite, smallest subnormal).

use mmac_compiler::engine::Operands;
use mmac_compiler::format::{Format, FormatKind};
use mmac_compiler::interp;
use mmac_compiler::ir::{Instruction, Pipeline};
use mmac_compiler::jit;
use mmac_compiler::random::Rng;
use mmac_compiler::{Checked, CheckedSpec};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn spec_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs");
    let mut out = vec![];
    // tests/data holds a spec of the IR features the shipped specs do not use
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    for dir in [root.clone(), root.join("examples"), data] {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "mma") {
                    out.push(p);
                }
            }
        }
    }
    out.sort();
    out
}

fn load(p: &Path) -> Option<CheckedSpec> {
    let text = std::fs::read_to_string(p).ok()?;
    // a spec that does not check is the front end's business, not the JIT's
    mmac_compiler::compile(&p.display().to_string(), &text).ok()
}

/// One instruction per distinct arithmetic (instructions that differ only in M and N
/// share one kernel: test it once), with its info.
fn distinct(v: &CheckedSpec) -> Vec<(&Instruction, Checked<'_>)> {
    v.distinct().map(|(_, c)| (c.instruction(), c)).collect()
}

fn find<'v>(v: &'v CheckedSpec, name: &str) -> (&'v Instruction, Checked<'v>) {
    let c = v.find(name).unwrap_or_else(|| panic!("{name}"));
    (c.instruction(), c)
}

/// Shape one random draw into an encoding of `f`.
fn encoding(f: &Format, sel: u8, bits: u64, center: i64) -> u64 {
    let mask = f.storage_mask();
    match &f.kind {
        FormatKind::Int(_) => bits & mask,
        FormatKind::Float(x) => {
            let m = x.mantissa_bits;
            let e = x.exponent_bits;
            let emask = (1u64 << e) - 1;
            let man = bits & ((1u64 << m) - 1);
            let sign = if x.signed { (bits >> 63) << (e + m) } else { 0 };
            let code = match sel % 10 {
                0 | 1 => bits,
                2 => sign, // a zero
                3 => match (bits >> 40) % 4 {
                    0 => sign | (emask << m) | man, // Inf/NaN/top binade
                    1 => sign | ((emask - 1) << m) | ((1u64 << m) - 1), // near the largest
                    2 => sign | 1,                  // smallest subnormal
                    _ => sign | man,                // a subnormal
                },
                _ => {
                    // clustered: exponent field within a few binades of `center`
                    let off = ((bits >> 32) % 7) as i64 - 3;
                    let ef = (center + off).clamp(0, emask as i64) as u64;
                    sign | (ef << m) | man
                }
            };
            ((code & low(x.code_bits())) << x.ignored_low_bits) & mask
        }
    }
}

fn low(b: u32) -> u64 {
    if b >= 64 { u64::MAX } else { (1u64 << b) - 1 }
}

fn center(f: &Format, shift: i64) -> i64 {
    match f.as_float() {
        Some(x) => x.bias as i64 + shift,
        None => 0,
    }
}

/// Whether any NaN is as good as another here: only a composed instruction's (a run's NaN
/// passes through with its own policy's payload); every other kernel gives the
/// interpreter's NaN bit for bit, `nan ieee` included (the JIT gave the host's NaN).
fn nan_any(inst: &Instruction) -> bool {
    matches!(inst.arithmetic.pipeline, Pipeline::Composed(_))
}

fn same(inst: &Instruction, x: u64, y: u64) -> bool {
    let d = &inst.arithmetic.d;
    x == y || (nan_any(inst) && d.decode(x).is_nan() && d.decode(y).is_nan())
}

/// Cases without scale factors (c, a, b) and the interpreter's d for each, run again
/// through the batch entry: in one call from each of the first four cases on, so that
/// each case meets every lane of the entry's groups of four records (and the tail loop)
/// beside different neighbours. A panic names `what` and the operands of a difference.
fn assert_batch_agrees(
    kernel: &jit::Kernel,
    inst: &Instruction,
    cases: &[(u64, Vec<u64>, Vec<u64>)],
    want: &[u64],
    what: &str,
) {
    let cases: Vec<ScaledCase> = cases
        .iter()
        .map(|(c, a, b)| (*c, a.clone(), b.clone(), vec![], vec![]))
        .collect();
    assert_scaled_batch_agrees(kernel, inst, &cases, want, what);
}

/// A case with scale factors: (c, a, b, sa, sb).
type ScaledCase = (u64, Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>);

/// [`assert_batch_agrees`] for cases with scale factors. The cases whose d is finite are
/// run again on their own: in the batch entry's record lanes a group of four records with
/// a NaN or an infinity anywhere goes to the dot entry whole, so the special cases would
/// otherwise keep their neighbours from the lanes.
fn assert_scaled_batch_agrees(
    kernel: &jit::Kernel,
    inst: &Instruction,
    cases: &[ScaledCase],
    want: &[u64],
    what: &str,
) {
    let finite = |d: u64| {
        !matches!(
            inst.arithmetic.d.decode(d),
            mmac_compiler::format::Decoded::Nan | mmac_compiler::format::Decoded::Inf { .. }
        )
    };
    let (finite_cases, finite_want): (Vec<ScaledCase>, Vec<u64>) = cases
        .iter()
        .zip(want)
        .filter(|(_, d)| finite(**d))
        .map(|(case, d)| (case.clone(), *d))
        .unzip();
    batch_agrees(kernel, inst, cases, want, what);
    batch_agrees(kernel, inst, &finite_cases, &finite_want, what);
}

fn batch_agrees(
    kernel: &jit::Kernel,
    inst: &Instruction,
    cases: &[ScaledCase],
    want: &[u64],
    what: &str,
) {
    for first in 0..4.min(cases.len()) {
        let cases = &cases[first..];
        let c: Vec<u64> = cases.iter().map(|x| x.0).collect();
        let cat = |part: fn(&ScaledCase) -> &Vec<u64>| -> Vec<u64> {
            cases.iter().flat_map(|x| part(x).iter().copied()).collect()
        };
        let (a, b) = (cat(|x| &x.1), cat(|x| &x.2));
        let (sa, sb) = (cat(|x| &x.3), cat(|x| &x.4));
        let mut d = vec![0u64; cases.len()];
        kernel.batch(&c, &a, &b, &sa, &sb, &mut d).unwrap();
        for (i, (case, got)) in cases.iter().zip(d).enumerate() {
            let want = want[first + i];
            assert!(
                same(inst, want, got),
                "{what}: batch record {i} (from case {first}): c={:x} a={:x?} b={:x?} \
                 sa={:x?} sb={:x?}: interp {want:x}, batch {got:x}",
                case.0,
                case.1,
                case.2,
                case.3,
                case.4
            );
        }
    }
}

/// One case on the interpreter and on the kernel: the same bits (or both NaN where the
/// pipeline lets any NaN through), else a panic naming `what` and the operands. Returns
/// the interpreter's d.
fn assert_agree(
    kernel: &jit::Kernel,
    inst: &Instruction,
    info: Checked,
    ops: &Operands,
    what: &str,
) -> u64 {
    let want = interp::run(info, ops).unwrap();
    let got = kernel.dot(ops).unwrap();
    assert!(
        same(inst, want, got),
        "{what}: c={:x} a={:x?} b={:x?} sa={:x?} sb={:x?}: interp {want:x}, jit {got:x}",
        ops.c,
        ops.a,
        ops.b,
        ops.sa,
        ops.sb
    );
    want
}

fn check_instruction(
    kernel: &jit::Kernel,
    inst: &Instruction,
    info: Checked,
    cases: u32,
) -> Result<(), String> {
    let k = inst.k();
    let s = inst.scale_count();
    let strat = (
        prop::collection::vec((any::<u8>(), any::<u64>()), 2 * k + 2 * s + 1),
        -4i64..4,
    );
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let scale_f = inst.arithmetic.scale.as_ref().map(|x| x.format.clone());
    // (c, a, b, sa, sb, d) of the latest cases
    type Record = (u64, Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>, u64);
    let recent: std::cell::RefCell<Vec<Record>> = Default::default();
    runner
        .run(&strat, |(draws, shift)| {
            let enc =
                |f: &Format, i: usize, sh: i64| encoding(f, draws[i].0, draws[i].1, center(f, sh));
            let ar = &inst.arithmetic;
            let a: Vec<u64> = (0..k).map(|i| enc(&ar.a, i, 0)).collect();
            let b: Vec<u64> = (0..k).map(|i| enc(&ar.b, k + i, 0)).collect();
            let c = enc(&ar.c, 2 * k, shift);
            let (sa, sb): (Vec<u64>, Vec<u64>) = match &scale_f {
                Some(f) => (
                    (0..s).map(|i| enc(f, 2 * k + 1 + i, 0)).collect(),
                    (0..s).map(|i| enc(f, 2 * k + 1 + s + i, 0)).collect(),
                ),
                None => (vec![], vec![]),
            };
            let ops = Operands {
                c,
                a: &a,
                b: &b,
                sa: &sa,
                sb: &sb,
            };
            let want = interp::run(info, &ops).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let got = kernel
                .dot(&ops)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(
                same(inst, want, got),
                "{}: c={:x} a={:x?} b={:x?} sa={:x?} sb={:x?}: interp {:x}, jit {:x}",
                inst.name,
                c,
                a,
                b,
                sa,
                sb,
                want,
                got
            );
            // the batch entry agrees with the single-dot entry: this case after the
            // (up to) four before it, so that the entry's groups of four records meet
            // different records in their lanes
            let mut recent = recent.borrow_mut();
            if recent.len() == 5 {
                recent.remove(0);
            }
            recent.push((c, a, b, sa, sb, got));
            let c2: Vec<u64> = recent.iter().map(|r| r.0).collect();
            let cat = |part: fn(&Record) -> &Vec<u64>| -> Vec<u64> {
                recent
                    .iter()
                    .flat_map(|r| part(r).iter().copied())
                    .collect()
            };
            let (a2, b2) = (cat(|r| &r.1), cat(|r| &r.2));
            let (sa2, sb2) = (cat(|r| &r.3), cat(|r| &r.4));
            let mut d = vec![0u64; recent.len()];
            kernel
                .batch(&c2, &a2, &b2, &sa2, &sb2, &mut d)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let want: Vec<u64> = recent.iter().map(|r| r.5).collect();
            prop_assert_eq!(d, want);
            Ok(())
        })
        .map_err(|e| e.to_string())
}

#[test]
fn jit_matches_interpreter_on_every_spec() {
    let cases: u32 = std::env::var("MMAC_JIT_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(192);
    let mut failures = vec![];
    let mut checked = 0;
    for path in spec_files() {
        let Some(v) = load(&path) else { continue };
        let compiled = jit::compile(&v).expect("the backend starts");
        for (inst, info) in distinct(&v) {
            // refusals are pinned by `refusals_are_exactly_the_expected_ones`
            if let Ok(kernel) = compiled.kernel(&inst.name) {
                checked += 1;
                if let Err(e) = check_instruction(&kernel, inst, info, cases) {
                    failures.push(format!("{}: {e}", path.display()));
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} kernels were compiled");
    assert!(
        failures.is_empty(),
        "{} instructions differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The JIT refuses exactly what it cannot compute (fused f64 products, in
/// tests/data/jit_refused.mma), with the reason and the instruction's name; everything
/// else in the spec library compiles. A new refusal, or a verifier error in debug builds
/// (which would surface as a refusal), fails here.
#[test]
fn refusals_are_exactly_the_expected_ones() {
    let mut refused = vec![];
    for path in spec_files() {
        let Some(v) = load(&path) else { continue };
        let compiled = jit::compile(&v).expect("the backend starts");
        for e in compiled.refused() {
            refused.push((
                path.file_name().unwrap().to_string_lossy().into_owned(),
                e.instruction.clone().unwrap_or_default(),
                e.message.clone(),
            ));
        }
    }
    assert_eq!(refused.len(), 1, "refused: {refused:#?}");
    let (file, inst, message) = &refused[0];
    assert_eq!(file, "jit_refused.mma");
    assert_eq!(inst, "fused.m8n8k4.f64.f64.f64.f64");
    assert_eq!(
        message,
        "exact products of `f64` and `f64` need 106-bit significands; the JIT multiplies in 64 bits"
    );
}

/// A whole M x N x K instruction equals its dot products.
#[test]
fn mma_entry_equals_dot_products() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/hopper.mma");
    let v = load(&path).expect("hopper spec");
    let (inst, info) = find(&v, "mma.m16n8k16.f32.f16.f16.f32");
    let compiled = jit::compile(&v).expect("compiles");
    let kernel = compiled.kernel(&inst.name).expect("kernel");
    let (m, n, k) = (16usize, 8usize, 16usize);
    let mut rng = Rng::new(0x1234_5678_9abc_def0);
    let mut next = || rng.next_u64();
    let a: Vec<u64> = (0..m * k)
        .map(|_| encoding(&inst.arithmetic.a, 5, next(), 15))
        .collect();
    let b: Vec<u64> = (0..k * n)
        .map(|_| encoding(&inst.arithmetic.b, 5, next(), 15))
        .collect();
    let c: Vec<u64> = (0..m * n)
        .map(|_| encoding(&inst.arithmetic.c, 5, next(), 127))
        .collect();
    let d = kernel.mma(&a, &b, &c, &[], &[]).expect("mma");
    for i in 0..m {
        for j in 0..n {
            let col: Vec<u64> = (0..k).map(|kk| b[kk * n + j]).collect();
            let want = interp::run(
                info,
                &Operands {
                    c: c[i * n + j],
                    a: &a[i * k..(i + 1) * k],
                    b: &col,
                    sa: &[],
                    sb: &[],
                },
            )
            .unwrap();
            assert_eq!(d[i * n + j], want, "D[{i}][{j}]");
        }
    }
}

/// Kernels can be shared across threads: the code is read-only.
#[test]
fn kernels_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<jit::Kernel>();
}

/// Exact sums wider than i128 (c added in a sticky window): c chosen to nearly cancel the
/// products, or far above or below them, where the sticky bit decides the rounding.
#[test]
fn wide_sums_near_cancellation() {
    let mut checked = 0;
    for path in spec_files() {
        let Some(v) = load(&path) else { continue };
        let compiled = jit::compile(&v).expect("the backend starts");
        for (inst, info) in distinct(&v) {
            let wide = info
                .info()
                .fused()
                .as_ref()
                .and_then(|f| f.nodes.last())
                .is_some_and(|n| n.width_bits > 125);
            if !wide || inst.arithmetic.c.name != "f32" {
                continue;
            }
            let Ok(kernel) = compiled.kernel(&inst.name) else {
                continue;
            };
            checked += 1;
            let k = inst.k();
            let mut rng = Rng::new(0x0123_4567_89ab_cdefu64);
            let mut next = || rng.next_u64();
            for case in 0..3000 {
                let a: Vec<u64> = (0..k)
                    .map(|_| encoding(&inst.arithmetic.a, 5, next(), center(&inst.arithmetic.a, 0)))
                    .collect();
                let b: Vec<u64> = (0..k)
                    .map(|_| encoding(&inst.arithmetic.b, 5, next(), center(&inst.arithmetic.b, 0)))
                    .collect();
                // the products' sum, approximately
                let val = |f: &Format, r: u64| match f.decode(r) {
                    mmac_compiler::format::Decoded::Finite(v) => v.value().to_f64_lossy(),
                    _ => 0.0,
                };
                let p: f64 = (0..k)
                    .map(|i| val(&inst.arithmetic.a, a[i]) * val(&inst.arithmetic.b, b[i]))
                    .sum();
                let c = match case % 3 {
                    // nearly cancels the products
                    0 => ((-p) as f32).to_bits() as u64 ^ (next() & 1),
                    // far above: the products only round
                    1 => (((next() % 60) + 170) << 23 | (next() & 0x807f_ffff)) & 0xffff_ffff,
                    // far below
                    _ => (((next() % 40) + 1) << 23 | (next() & 0x807f_ffff)) & 0xffff_ffff,
                };
                let ops = Operands {
                    c,
                    a: &a,
                    b: &b,
                    sa: &[],
                    sb: &[],
                };
                assert_agree(&kernel, inst, info, &ops, inst.name.as_str());
            }
        }
    }
    assert!(checked > 0, "no wide exact sum was compiled");
}

/// Exact sums of bf16 products (526 bits and more: the multi-limb accumulator) over the
/// whole exponent range of bf16: products that cancel exactly at any exponent (so tiny
/// products or c decide the result), c cancelling a product, c far above or below every
/// product, overflow to infinity and subnormal results.
#[test]
fn bf16_exact_sums_over_the_whole_exponent_range() {
    let mut names = vec![];
    for path in spec_files() {
        let Some(v) = load(&path) else { continue };
        let compiled = jit::compile(&v).expect("the backend starts");
        let mut seen = HashSet::new();
        for (inst, info) in distinct(&v) {
            let exact_sum = info
                .info()
                .fused()
                .as_ref()
                .and_then(|f| f.nodes.last())
                .is_some_and(|n| n.width_bits > 500);
            let ar = &inst.arithmetic;
            if !exact_sum || ar.a.name != "bf16" || ar.c.name != "f32" {
                continue;
            }
            let kernel = compiled
                .kernel(&inst.name)
                .unwrap_or_else(|e| panic!("{}: not compiled: {e}", path.display()));
            if !seen.insert((inst.k(), ar.pipeline.clone())) {
                continue;
            }
            names.push(inst.name.clone());
            let k = inst.k();
            let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15u64 ^ k as u64);
            let mut next = || rng.next_u64();
            // a finite bf16 with any exponent field (subnormals included)
            let any_bf16 = |r: u64| (r & 0x807f) | ((r >> 16) % 255) << 7;
            for case in 0..20_000u32 {
                let mut a: Vec<u64> = (0..k).map(|_| any_bf16(next())).collect();
                let mut b: Vec<u64> = (0..k).map(|_| any_bf16(next())).collect();
                if case % 2 == 0 {
                    // pairs of products that cancel exactly; some pairs left unpaired
                    for i in (0..k.saturating_sub(1)).step_by(2) {
                        if next() % 4 != 0 {
                            a[i + 1] = a[i] ^ 0x8000;
                            b[i + 1] = b[i];
                        }
                    }
                }
                let val = |r: u64| f32::from_bits((r as u32) << 16) as f64;
                let prods: Vec<f64> = (0..k).map(|i| val(a[i]) * val(b[i])).collect();
                let c = match case % 5 {
                    // cancels one product (exactly where f32 holds it)
                    0 => (-(prods[(next() % k as u64) as usize] as f32)).to_bits() as u64,
                    // far above or far below the products
                    1 => ((next() % 30 + 224) << 23) | (next() & 0x807f_ffff),
                    2 => ((next() % 30) << 23) | (next() & 0x807f_ffff),
                    // zeros of either sign
                    3 => next() & 0x8000_0000,
                    // any finite f32
                    _ => ((next() % 255) << 23) | (next() & 0x807f_ffff),
                } & 0xffff_ffff;
                let ops = Operands {
                    c,
                    a: &a,
                    b: &b,
                    sa: &[],
                    sb: &[],
                };
                assert_agree(&kernel, inst, info, &ops, inst.name.as_str());
            }
        }
    }
    // CDNA1's E-FDPA (L = 2) and the Kulisch k16 sum at least
    assert!(names.len() >= 2, "bf16 exact sums compiled: {names:?}");
}

/// Which lanes a kernel's products are aligned and summed in, from its IR: `"i32x4"`
/// (scaled in f32x4, truncated to i32 by the conversion), `"f64x2"`, or `"scalar"`.
fn alignment_lanes(compiled: &jit::CompiledSpec, name: &str) -> &'static str {
    let clif = compiled
        .clif()
        .iter()
        .filter(|(label, _)| label.contains(name) && !label.contains("(batch"))
        .map(|(_, text)| text.as_str())
        .collect::<String>();
    assert!(!clif.is_empty(), "{name}: no IR kept");
    if clif.contains("x86_cvtt2dq") || clif.contains("fcvt_to_sint_sat.i32x4") {
        "i32x4"
    } else if clif.contains("f64x2") {
        "f64x2"
    } else {
        "scalar"
    }
}

/// T-FDPA kernels that align in f64x2 lanes (Ampere tf32, steps of 4) or i32x4 lanes
/// (Hopper f16, bf16 and tf32, Ampere f16, Ada e4m3 and e5m2), and variants rounding into f32 to nearest
/// even or toward zero at P = 13 with the exact-positive zero rule, F = 0, a zero exponent
/// far below f32's or one that makes the power 2^(F - e_zero) overflow f32 (toward zero,
/// or in f64 lanes, d's code is formed straight from the sum):
/// zero products that take e_zero
/// under a tiny c (of every exponent: a zero a times any b), products of subnormals,
/// negative terms truncated toward zero, c far above the products, sums that overflow
/// f32 (tf32, bf16) or round to a subnormal or to zero, and one NaN or infinity in each
/// lane position.
#[test]
fn simd_t_fdpa_edges() {
    let variants = r#"
arch t_variants "T-FDPA rounding into f32 otherwise"
pipeline t_rne(F, L, e_zero) {
    chain every L
    multiply exact
    zero exponent e_zero
    align products, c to max exponent keep F bits round toward_zero
    normalize to out round nearest_even
    zero result exact_positive
    nan canonical
}
pipeline t_rz13(F, L, e_zero) {
    chain every L
    multiply exact
    zero exponent e_zero
    align products, c to max exponent keep F bits round toward_zero
    normalize to out precision 13 round toward_zero
    zero result exact_positive
    nan canonical
}
pipeline t_pos(F, L, e_zero) {
    chain every L
    multiply exact
    zero exponent e_zero for products
    zero exponent never for c
    align products, c to max exponent keep F bits round toward_zero
    normalize to out round toward_zero
    zero result positive
    nan canonical
}
pipeline t_natural(F, L) {
    chain every L
    multiply exact
    align products, c to max exponent keep F bits round toward_zero
    normalize to out round toward_zero
    zero result exact_positive
    nan canonical
}
instruction natural.f16 {
    shape 16 x 8 x 16
    types a = f16, b = f16, c = f32, d = f32
    uses t_natural(F = 25, L = 16)
}
instruction natural.e5m2.e4m3 {
    shape 16 x 8 x 32
    types a = e5m2, b = e4m3, c = f32, d = f32
    uses t_natural(F = 13, L = 16)
}
instruction pos.f16 {
    shape 16 x 8 x 16
    types a = f16, b = f16, c = f32, d = f32
    uses t_pos(F = 25, L = 8, e_zero = -133)
}
instruction rne.f16.ez10 {
    shape 16 x 8 x 16
    types a = f16, b = f16, c = f32, d = f32
    uses t_rne(F = 25, L = 16, e_zero = -10)
}
instruction rz13.f16 {
    shape 16 x 8 x 16
    types a = f16, b = f16, c = f32, d = f32
    uses t_rz13(F = 25, L = 16, e_zero = -133)
}
instruction rne.e4m3 {
    shape 16 x 8 x 32
    types a = e4m3, b = e4m3, c = f32, d = f32
    uses t_rne(F = 13, L = 16, e_zero = -300)
}
instruction rz.fp8.bf8 {
    shape 16 x 8 x 32
    types a = fp8, b = bf8, c = f32, d = f32
    uses t_pos(F = 24, L = 16, e_zero = -133)
}
instruction rne.e4m3.ez10 {
    shape 16 x 8 x 32
    types a = e4m3, b = e4m3, c = f32, d = f32
    uses t_rne(F = 13, L = 16, e_zero = -10)
}
instruction rne.e4m3.e3m2 {
    shape 16 x 8 x 32
    types a = e4m3, b = e3m2, c = f32, d = f32
    uses t_rne(F = 13, L = 16, e_zero = -132)
}
instruction rz13.e5m2.ez10 {
    shape 16 x 8 x 32
    types a = e5m2, b = e5m2, c = f32, d = f32
    uses t_rz13(F = 13, L = 16, e_zero = -10)
}
instruction rne.f16 {
    shape 16 x 8 x 16
    types a = f16, b = f16, c = f32, d = f32
    uses t_rne(F = 25, L = 16, e_zero = -133)
}
instruction rne.tf32 {
    shape 16 x 8 x 8
    types a = tf32, b = tf32, c = f32, d = f32
    uses t_rne(F = 24, L = 4, e_zero = -133)
}
instruction rne.f16.f0 {
    shape 16 x 8 x 16
    types a = f16, b = f16, c = f32, d = f32
    uses t_rne(F = 0, L = 16, e_zero = -133)
}
instruction rne.f16.ez {
    shape 16 x 8 x 16
    types a = f16, b = f16, c = f32, d = f32
    uses t_rne(F = 25, L = 16, e_zero = -103)
}
instruction rz13.bf16 {
    shape 16 x 8 x 16
    types a = bf16, b = bf16, c = f32, d = f32
    uses t_rz13(F = 25, L = 16, e_zero = -300)
}
instruction rne.bf16 {
    shape 16 x 8 x 16
    types a = bf16, b = bf16, c = f32, d = f32
    uses t_rne(F = 24, L = 8, e_zero = -133)
}
instruction rne.tf32.ez253 {
    shape 16 x 8 x 8
    types a = tf32, b = tf32, c = f32, d = f32
    uses t_rne(F = 24, L = 4, e_zero = -253)
}
instruction rne.tf32.ez400 {
    shape 16 x 8 x 8
    types a = tf32, b = tf32, c = f32, d = f32
    uses t_rne(F = 24, L = 4, e_zero = -400)
}
instruction rz13.tf32 {
    shape 16 x 8 x 8
    types a = tf32, b = tf32, c = f32, d = f32
    uses t_rz13(F = 24, L = 4, e_zero = -133)
}
"#;
    let spec = |file: &str| {
        load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../specs/{file}.mma")))
            .expect("spec")
    };
    let (hopper, ampere, ada) = (spec("hopper"), spec("ampere"), spec("ada"));
    let variants = mmac_compiler::compile("t_variants.mma", variants).expect("checks");
    for (v, name, lanes, in_records) in [
        (&hopper, "mma.m16n8k16.f32.f16.f16.f32", "i32x4", true),
        (&hopper, "mma.m16n8k16.f32.bf16.bf16.f32", "i32x4", true),
        (&hopper, "mma.m16n8k8.f32.tf32.tf32.f32", "i32x4", true),
        (&ampere, "mma.m16n8k16.f32.f16.f16.f32", "i32x4", true),
        (&ampere, "mma.m16n8k8.f32.tf32.tf32.f32", "f64x2", true),
        (&ada, "mma.m16n8k32.f32.e4m3.e4m3.f32", "i32x4", true),
        (&ada, "mma.m16n8k32.f32.e5m2.e5m2.f32", "i32x4", true),
        (&variants, "rne.f16", "i32x4", true),
        (&variants, "rne.tf32", "f64x2", true),
        (&variants, "rne.f16.f0", "i32x4", true),
        (&variants, "rne.f16.ez", "i32x4", true),
        (&variants, "rz13.bf16", "i32x4", true),
        (&variants, "rne.bf16", "i32x4", true),
        (&variants, "rne.tf32.ez253", "f64x2", true),
        (&variants, "rne.tf32.ez400", "f64x2", true),
        (&variants, "rz13.tf32", "f64x2", true),
        (&variants, "pos.f16", "i32x4", true),
        (&variants, "natural.f16", "i32x4", true),
        (&variants, "natural.e5m2.e4m3", "i32x4", true),
        (&ada, "mma.m16n8k32.f32.e4m3.e5m2.f32", "i32x4", true),
        (&variants, "rz13.f16", "i32x4", true),
        (&variants, "rne.f16.ez10", "i32x4", true),
        (&variants, "rne.e4m3", "i32x4", true),
        // FNUZ formats (NaN: the sign bit alone; the zeros family makes NaNs of -0)
        (&variants, "rz.fp8.bf8", "i32x4", true),
        // FP8 with a zero exponent the products' max selects (above every zero's own)
        (&variants, "rne.e4m3.ez10", "i32x4", true),
        (&variants, "rz13.e5m2.ez10", "i32x4", true),
        // FP8 times FP6: the sign bits at different positions
        (&variants, "rne.e4m3.e3m2", "i32x4", true),
    ] {
        let options = jit::Options {
            emit_clif: true,
            ..jit::Options::default()
        };
        let compiled = jit::compile_with(v, options).expect("compiles");
        assert_eq!(alignment_lanes(&compiled, name), lanes, "{name}");
        // the batch entry's record lanes show as a kernel of their own
        let batch = format!("{name} (batch");
        let records = compiled.clif().iter().any(|(l, _)| l.starts_with(&batch));
        assert_eq!(records, in_records, "{name}: record lanes");
        let (inst, info) = find(v, name);
        let kernel = compiled.kernel(name).expect("kernel");
        let fa = inst.arithmetic.a.as_float().expect("float");
        let (m, e, ign) = (fa.mantissa_bits, fa.exponent_bits, fa.ignored_low_bits);
        let sign = 1u64 << (m + e + ign);
        let emask = (1u64 << e) - 1;
        let code = |ef: u64, man: u64| ((ef << m) | man) << ign;
        let k = inst.k();
        let mut rng = Rng::new(0x2545_f491_4f6c_dd1du64);
        let mut next = || rng.next_u64();
        let (mut cases, mut wants) = (vec![], vec![]);
        for case in 0..7000u32 {
            let el = |r: u64| {
                let man = r & ((1 << m) - 1);
                let s = if r >> 63 == 1 { sign } else { 0 };
                s | match case % 7 {
                    // zeros: every product zero, c decides
                    0 => 0,
                    // (a zero times b anywhere: zero products of every exponent)
                    6 => code((r >> 32) % emask, man),
                    // subnormals and the smallest normals
                    1 => code((r >> 32) % 2, man),
                    // exponents from -60 to -85, so that (tf32, bf16) products and their
                    // sums lie at the bottom of f32's range, or below it
                    4 => {
                        let below = if case % 2 == 0 { 60 } else { 75 };
                        let field = fa.bias as i64 - below - ((r >> 32) % 11) as i64;
                        code(field.max(1) as u64, man)
                    }
                    // anywhere
                    _ => code((r >> 32) % emask, man),
                }
            };
            let mut a: Vec<u64> = (0..k).map(|_| el(next())).collect();
            let mut b: Vec<u64> = (0..k).map(|_| el(next())).collect();
            if case % 7 == 2 && case % 4 == 3 {
                // products that cancel in pairs (with c = +-0: an exact zero sum at any
                // reference exponent)
                for i in (0..k).step_by(2) {
                    a[i + 1] = a[i] ^ sign;
                    b[i + 1] = b[i];
                }
            }
            if case % 7 == 6 {
                a.iter_mut().for_each(|x| *x &= sign);
            }
            // every product at one exponent, with the largest significands and one sign,
            // and c at that exponent too, with that sign: the largest sums of kept values
            // (above 2^31 for bf16 with F = 25 and L = 16)
            let mut top_c = None;
            if case % 7 == 3 && case % 3 == 0 {
                let field = |r: u64| 1 + (emask - 1) / 4 + r % ((emask - 1) / 2).max(1);
                let (ea, eb) = (field(next()), field(next()));
                let neg = next() & 1 == 1;
                let s = if neg { sign } else { 0 };
                a.iter_mut().for_each(|x| *x = code(ea, (1 << m) - 1) | s);
                b.iter_mut().for_each(|x| *x = code(eb, (1 << m) - 1));
                let e = ea as i64 + eb as i64 - 2 * fa.bias as i64;
                let c_field = (e + 127).clamp(1, 254) as u64;
                top_c = Some((c_field << 23) | 0x7f_ffff | if neg { 1 << 31 } else { 0 });
            }
            if case % 7 == 5 {
                // a NaN (every format's all-ones code) or an infinity (IEEE formats) in
                // one lane position
                let i = (next() % k as u64) as usize;
                let man = if next() % 2 == 0 { (1 << m) - 1 } else { 0 };
                a[i] = code(emask, man) | ((next() & 1) * sign);
            }
            if case % 11 == 10 {
                // bits above the codes, which every engine ignores
                let fb = inst.arithmetic.b.as_float().expect("float");
                let i = (next() % k as u64) as usize;
                a[i] |= next() << fa.storage_bits;
                b[i] |= next() << fb.storage_bits;
            }
            let c = match case % 4 {
                _ if top_c.is_some() => top_c.expect("set"),
                // tiny: subnormal or near the smallest normal f32
                // (with those products: zero or below 2^-140)
                _ if case % 7 == 4 => (next() % 512) | (next() & 0x8000_0000),
                // c +0 or -0 with every product zero (an exact zero sum) or every
                // product at the bottom of the range (the reference may be e_zero)
                3 if case % 7 <= 2 => next() & 0x8000_0000,
                0 => (next() % (3 << 23)) | (next() & 0x8000_0000),
                // far above the products
                1 => (((next() % 55) + 200) << 23) | (next() & 0x807f_ffff),
                _ => next() & 0xffff_ffff,
            };
            let ops = Operands {
                c,
                a: &a,
                b: &b,
                sa: &[],
                sb: &[],
            };
            wants.push(assert_agree(&kernel, inst, info, &ops, name));
            cases.push((c, a, b));
        }
        assert_batch_agrees(&kernel, inst, &cases, &wants, name);
    }
}

/// A NaN or an infinity in c alone (as after a chained step that overflowed) takes the
/// special path's shortcut (c's NaN or infinity is the result, unless products can
/// overflow); an infinity or NaN in an operand as well (a, b or a scale factor, at any
/// position) takes the full loop. Every fused and sequential arithmetic of the specs, with
/// finite random operands and c each special its format has (a NaN of another payload
/// too): d is the interpreter's bit for bit, NaNs included (a sequential `nan ieee`
/// kernel gave the host's NaN: x86's default, or c's payload).
#[test]
fn special_c_with_finite_operands() {
    let (mut tried, mut tried_sequential) = (0, 0);
    for path in spec_files() {
        let Some(v) = load(&path) else { continue };
        let compiled = jit::compile(&v).expect("compiles");
        for (inst, info) in distinct(&v) {
            let sequential = matches!(inst.arithmetic.pipeline, Pipeline::Sequential(_));
            if !matches!(inst.arithmetic.pipeline, Pipeline::Fused(_)) && !sequential {
                continue;
            }
            let Ok(kernel) = compiled.kernel(&inst.name) else {
                continue;
            };
            let ar = &inst.arithmetic;
            // (a NaN with another payload too: the host would pass it through)
            let payload = ar.c.encode_nan().map(|n| n - 1);
            let cs: Vec<u64> = [
                ar.c.encode_nan(),
                ar.c.encode_inf(false),
                ar.c.encode_inf(true),
                payload.filter(|&p| ar.c.decode(p).is_nan()),
            ]
            .into_iter()
            .flatten()
            .collect();
            if cs.is_empty() {
                continue;
            }
            tried += 1;
            tried_sequential += usize::from(sequential);
            let (k, s) = (inst.k(), inst.scale_count());
            let mut rng = Rng::new(0x94d0_49bb_1331_11ebu64 ^ k as u64);
            // a random finite encoding of `f`, clustered near its bias
            let mut finite = |f: &Format| loop {
                let bits = rng.next_u64();
                let x = encoding(f, (bits >> 56) as u8 % 10 + 4, bits, center(f, 0));
                match f.decode(x) {
                    mmac_compiler::format::Decoded::Finite(_) => break x,
                    _ => continue,
                }
            };
            for case in 0..64u32 {
                let mut a: Vec<u64> = (0..k).map(|_| finite(&ar.a)).collect();
                let mut b: Vec<u64> = (0..k).map(|_| finite(&ar.b)).collect();
                let scale = ar.scale.as_ref().map(|x| x.format.clone());
                let (mut sa, sb): (Vec<u64>, Vec<u64>) = (0..s)
                    .map(|_| {
                        let f = scale.as_ref().unwrap();
                        (finite(f), finite(f))
                    })
                    .unzip();
                // an operand special as well (in a, b or a scale factor, in any chained
                // step): the loop decides
                let special = |f: &Format| {
                    [f.encode_inf(case % 16 < 8), f.encode_nan()]
                        .into_iter()
                        .flatten()
                        .next()
                };
                let at = (case as usize / 4) % k;
                match case % 12 {
                    3 => a[at] = special(&ar.a).unwrap_or(a[at]),
                    7 => b[at] = special(&ar.b).unwrap_or(b[at]),
                    11 if s > 0 => {
                        let f = scale.as_ref().unwrap();
                        sa[at % s] = special(f).unwrap_or(sa[at % s]);
                    }
                    _ => {}
                }
                let c = cs[case as usize % cs.len()];
                let ops = Operands {
                    c,
                    a: &a,
                    b: &b,
                    sa: &sa,
                    sb: &sb,
                };
                assert_agree(
                    &kernel,
                    inst,
                    info,
                    &ops,
                    &format!("{}: {}", path.display(), inst.name),
                );
            }
        }
    }
    assert!(
        tried > 30,
        "{tried} fused and sequential arithmetics with a special c"
    );
    assert!(
        tried_sequential > 5,
        "{tried_sequential} sequential arithmetics"
    );
}

/// GTR-FDPA's first level in lanes (the even and the odd products aligned apart), and its
/// two normalisations (down or toward zero to F2 bits, then to nearest even into f32) by
/// a shift and the host's narrowing: CDNA3's FP8/BF8 instructions (fnuz formats, zero
/// products never in the max search, two chained steps at k = 32) and variants with zero
/// products at a fixed exponent or their natural one, OCP FP8, f16 and bf16 inputs, and
/// either zero rule. Cases: every product zero, one parity all zeros, one nonzero product
/// per parity, subnormals, far-apart exponents, bf16 products near 2^-150, a NaN or an
/// infinity in each lane position, c tiny, far above or far below; and sums just above a
/// tie at 2^-150 (which the F2 window below f32's normals decides) or rounding to -0. The
/// kernels are checked to take the lanes (f64x2 where the kept values are wide, i32x4
/// otherwise).
#[test]
fn simd_gtr_fdpa_edges() {
    let variants = r#"
arch gtr_variants "GTR-FDPA's first level with other zero-exponent rules and formats"
import std
pipeline gtr_fixed_zero(F, F2, L) {
    chain every L
    multiply exact
    zero exponent -20 for products
    align products.even to max exponent keep F bits round toward_zero as even
    align products.odd to max exponent keep F bits round toward_zero as odd
    align even, odd to max exponent keep F bits round down as dot
    align dot keep F2 + 1 bits round down, c keep F bits round down drop below F + 1 to max exponent
    normalize range f32 precision F2 round down
    normalize to out round nearest_even
    zero result exact_positive
    nan canonical
}
pipeline gtr_positive_zero(F, F2, L) {
    chain every L
    multiply exact
    zero exponent never for products
    align products.even to max exponent keep F bits round toward_zero as even
    align products.odd to max exponent keep F bits round toward_zero as odd
    align even, odd to max exponent keep F bits round down as dot
    align dot keep F2 + 1 bits round down, c keep F bits round down drop below F + 1 to max exponent
    normalize range f32 precision F2 round toward_zero
    normalize to out round nearest_even
    zero result positive
    nan canonical
}
pipeline gtr_natural_zero(F, F2, L) {
    chain every L
    multiply exact
    align products.even to max exponent keep F bits round toward_zero as even
    align products.odd to max exponent keep F bits round toward_zero as odd
    align even, odd to max exponent keep F bits round toward_zero as dot
    align dot, c to max exponent keep F2 bits round toward_zero
    normalize to out round nearest_even
    zero result positive
    nan canonical
}
pipeline gtr_apart(L) {
    chain every L
    multiply exact
    zero exponent never for products
    align products.even to max exponent keep 20 bits round toward_zero as even
    align products.odd to max exponent keep 20 bits round toward_zero as odd
    align even, odd to max exponent keep 20 bits round down as dot
    align dot keep 27 bits round down, c keep 23 bits round down drop below 9 to max exponent
    normalize range f32 precision 25 round down
    normalize to out round nearest_even
    zero result exact_positive
    nan canonical
}
instruction ocp.e4m3.e5m2 {
    shape 16 x 8 x 32
    types a = e4m3, b = e5m2, c = f32, d = f32
    uses gtr_fdpa(F = 23, F2 = 30, L = 8)
}
instruction apart.fp8.bf8 {
    shape 16 x 8 x 32
    types a = fp8, b = bf8, c = f32, d = f32
    uses gtr_apart(L = 16)
}
instruction fixed.e4m3.e5m2 {
    shape 16 x 8 x 32
    types a = e4m3, b = e5m2, c = f32, d = f32
    uses gtr_fixed_zero(F = 20, F2 = 28, L = 4)
}
instruction fixed.bf16 {
    shape 16 x 8 x 16
    types a = bf16, b = bf16, c = f32, d = f32
    uses gtr_fixed_zero(F = 24, F2 = 31, L = 16)
}
instruction never.bf16 {
    shape 16 x 8 x 16
    types a = bf16, b = bf16, c = f32, d = f32
    uses gtr_fdpa(F = 24, F2 = 31, L = 16)
}
instruction positive.bf16 {
    shape 16 x 8 x 16
    types a = bf16, b = bf16, c = f32, d = f32
    uses gtr_positive_zero(F = 24, F2 = 31, L = 16)
}
instruction natural.f16 {
    shape 16 x 8 x 16
    types a = f16, b = f16, c = f32, d = f16
    uses gtr_natural_zero(F = 13, F2 = 30, L = 16)
}
instruction natural.bf8.fp8 {
    shape 16 x 8 x 8
    types a = bf8, b = fp8, c = f32, d = f32
    uses gtr_natural_zero(F = 9, F2 = 40, L = 4)
}
"#;
    let cdna3 =
        load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/cdna3.mma")).expect("spec");
    let variants = mmac_compiler::compile("gtr_variants.mma", variants).expect("checks");
    // (spec, instruction, lanes of the dot entry, whether the batch entry has record lanes)
    let cases: Vec<(&CheckedSpec, &str, &str, bool)> = vec![
        (&cdna3, "v_mfma_f32_16x16x32_fp8_fp8", "i32x4", true),
        (&cdna3, "v_mfma_f32_16x16x32_bf8_fp8", "i32x4", true),
        (&cdna3, "v_mfma_f32_32x32x16_fp8_bf8", "i32x4", true),
        (&cdna3, "v_mfma_f32_32x32x16_bf8_bf8", "i32x4", true),
        (&variants, "ocp.e4m3.e5m2", "i32x4", true),
        (&variants, "apart.fp8.bf8", "i32x4", true),
        (&variants, "fixed.e4m3.e5m2", "f64x2", false),
        (&variants, "fixed.bf16", "i32x4", false),
        (&variants, "never.bf16", "i32x4", false),
        (&variants, "positive.bf16", "i32x4", false),
        (&variants, "natural.f16", "i32x4", false),
        (&variants, "natural.bf8.fp8", "i32x4", false),
    ];
    for (v, name, lanes, in_records) in cases {
        let options = jit::Options {
            emit_clif: true,
            ..jit::Options::default()
        };
        let compiled = jit::compile_with(v, options).expect("compiles");
        let (inst, info) = find(v, name);
        let kernel = compiled.kernel(name).expect("kernel");
        assert_eq!(alignment_lanes(&compiled, name), lanes, "{name}");
        let batch = format!("{name} (batch");
        let records = compiled.clif().iter().any(|(l, _)| l.starts_with(&batch));
        assert_eq!(records, in_records, "{name}: record lanes");
        let ar = &inst.arithmetic;
        let (fa, fb) = (ar.a.as_float().unwrap(), ar.b.as_float().unwrap());
        let k = inst.k();
        let mut rng = Rng::new(0x5851_f42d_4c95_7f2du64);
        // an element's exponent (None for a zero, or FNUZ's NaN)
        let exponent = |f: &mmac_compiler::format::FloatFormat, x: u64| {
            let (m, e) = (f.mantissa_bits, f.exponent_bits);
            let magnitude = x & ((1u64 << (m + e)) - 1);
            (magnitude != 0).then(|| (magnitude >> m).max(1) as i64 - f.bias as i64)
        };
        let (mut cases, mut wants) = (vec![], vec![]);
        for case in 0..4000u32 {
            let mut next = || rng.next_u64();
            let el = |f: &mmac_compiler::format::FloatFormat, r: u64, i: usize| {
                let (m, e) = (f.mantissa_bits, f.exponent_bits);
                let man = r & ((1 << m) - 1);
                let sign = (r >> 63) << (m + e);
                let field = match case % 7 {
                    // every product zero
                    0 => return 0,
                    // the even products zero
                    1 if i.is_multiple_of(2) => return 0,
                    // one nonzero product per parity
                    2 if i >= 2 => return 0,
                    // subnormals and the smallest normals
                    3 => (r >> 32) % 2,
                    // the largest finite binades and the smallest
                    4 => {
                        if (r >> 40).is_multiple_of(2) {
                            (1 << e) - 2
                        } else {
                            (r >> 32) % 2
                        }
                    }
                    // exponents near -75: products of wide formats (bf16) near the
                    // bottom of f32's range
                    5 if case % 2 == 0 => {
                        (f.bias as u64).saturating_sub(70 + (r >> 32) % 11).max(1)
                    }
                    _ => (r >> 32) % ((1 << e) - 1),
                };
                sign | (field << m) | man
            };
            let mut a: Vec<u64> = (0..k).map(|i| el(fa, next(), i)).collect();
            let mut b: Vec<u64> = (0..k).map(|i| el(fb, next(), i)).collect();
            let sign_a = 1u64 << (fa.mantissa_bits + fa.exponent_bits);
            if case % 7 == 3 && case % 3 == 0 {
                // each odd product cancels the even one before it: both parities at one
                // exponent, and a zero dot
                for i in (0..k).step_by(2) {
                    if exponent(fa, a[i]).is_some() {
                        a[i + 1] = a[i] ^ sign_a;
                        b[i + 1] = b[i];
                    }
                }
            }
            if case % 13 == 12 {
                // large significands at one exponent with one sign: the largest kept sums
                let big = |f: &mmac_compiler::format::FloatFormat| {
                    let m = f.mantissa_bits;
                    (((1u64 << f.exponent_bits) - 2) << m) | ((1 << m) - 1)
                };
                let neg = if next() % 2 == 0 { sign_a } else { 0 };
                a.iter_mut().for_each(|x| *x = big(fa) | neg);
                b.iter_mut().for_each(|x| *x = big(fb));
            }
            if case % 7 == 6 {
                // a NaN or an infinity (whatever special the format has) in one position
                let i = (next() % k as u64) as usize;
                let specials = [ar.a.encode_nan(), ar.a.encode_inf(next() % 2 == 0)];
                if let Some(x) = specials[(next() % 2) as usize].or(specials[0]) {
                    a[i] = x;
                }
            }
            let c = match case % 4 {
                // with the extreme binades or the products near 2^-150: zero or below
                // 2^-140
                _ if case % 7 == 4 || (case % 7 == 5 && case % 2 == 0) => {
                    (next() % 512) | (next() & 0x8000_0000)
                }
                // +0 or -0 with every product zero (an exact zero sum), the even ones
                // zero, or one nonzero product per parity
                3 if case % 7 <= 2 => next() & 0x8000_0000,
                // tiny: subnormal or near the smallest normal f32
                0 => (next() % (3 << 23)) | (next() & 0x8000_0000),
                // far above the products
                1 => (((next() % 40) + 200) << 23) | (next() & 0x807f_ffff),
                // far below them
                2 => (((next() % 40) + 20) << 23) | (next() & 0x807f_ffff),
                _ => next() & 0xffff_ffff,
            };
            // c near the products' largest exponent e_p, from 28 below (where the drop
            // rules act) to 12 above (where the dot is floored to a coarser grid)
            let e_p = (0..k)
                .filter_map(|i| Some(exponent(fa, a[i])? + exponent(fb, b[i])?))
                .max();
            let c = match e_p {
                Some(e_p) if case % 5 == 4 => {
                    let field = (e_p + (next() % 41) as i64 - 28 + 127).clamp(1, 254) as u64;
                    (field << 23) | (next() & 0x807f_ffff)
                }
                _ => c,
            };
            if case % 11 == 10 {
                // bits above the codes, which every engine ignores
                let i = (next() % k as u64) as usize;
                a[i] |= next() << fa.storage_bits;
                b[i] |= next() << fb.storage_bits;
            }
            let ops = Operands {
                c,
                a: &a,
                b: &b,
                sa: &[],
                sb: &[],
            };
            wants.push(assert_agree(&kernel, inst, info, &ops, name));
            cases.push((c, a, b));
        }
        assert_batch_agrees(&kernel, inst, &cases, &wants, name);
        if name.ends_with(".bf16") {
            // (c = 0) 2^-150 + 2^-157: the window of F2 = 31 bits below f32's smallest
            // normal exponent keeps 2^-157, so the sum lies above the tie between 0 and
            // 2^-149 and rounds up; one bit less of window makes it the tie (-> 0).
            // -2^-151: rounds to -0, which the zero rule may make +0.
            // the bf16 code of (-1)^neg 2^e
            let pow2 = |neg: u64, e: i64| (neg << 15) | (((e + 127) as u64) << 7);
            for (label, products) in [
                (
                    "2^-150 + 2^-157",
                    [(pow2(0, -75), pow2(0, -75)), (pow2(0, -78), pow2(0, -79))],
                ),
                ("-2^-151", [(pow2(1, -75), pow2(0, -76)), (0, 0)]),
            ] {
                let mut a = vec![0u64; k];
                let mut b = vec![0u64; k];
                for (i, (x, y)) in products.into_iter().enumerate() {
                    (a[i], b[i]) = (x, y);
                }
                let ops = Operands {
                    c: 0,
                    a: &a,
                    b: &b,
                    sa: &[],
                    sb: &[],
                };
                assert_agree(&kernel, inst, info, &ops, &format!("{name}: {label}"));
            }
        }
    }
}

/// GST groups of FP4 products summed sixteen per SIMD step (byte-table lookups and
/// `pmaddwd`) in the dot entry, and four records at once in the batch entry's record
/// lanes: codes with garbage above their 4 bits, groups whose products are all zeros of
/// either sign (the group's zero-exponent rule), a single nonzero product per group,
/// random codes and scales; scales over their whole range (zero, NaN, the extremes); c
/// near the groups' exponents, c zero or tiny with every group zero (an exact zero, and
/// results below f32's normal range), and c near f32's largest values (overflow).
#[test]
fn fp4_groups_in_simd_lanes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/rtx_blackwell.mma");
    let rtx = load(&path).expect("spec");
    // a zero c at its own zero exponent, above the groups' (a tiny group is then
    // truncated against it)
    let variants = r#"
arch gst_variants "GST-FDPA with c's zero exponent apart from the groups'"
import std
pipeline gst_c_apart(G, F, L) {
    chain every L
    multiply exact
    group G products exact, scaled as blocks
    zero exponent -139 for groups
    zero exponent -100 for c
    align blocks, c to max exponent keep F bits round toward_zero
    normalize to out round toward_zero
    zero result positive
    nan canonical
}
instruction c_apart.ue8m0 {
    shape 16 x 8 x 64
    types a = e2m1, b = e2m1, c = f32, d = f32
    scale ue8m0 block 16
    uses gst_c_apart(G = 16, F = 35, L = 64)
}
"#;
    let variants = mmac_compiler::compile("gst_variants.mma", variants).expect("checks");
    let options = jit::Options {
        emit_clif: true,
        ..jit::Options::default()
    };
    let compiled_rtx = jit::compile_with(&rtx, options).expect("compiles");
    let compiled_variants = jit::compile_with(&variants, options).expect("compiles");
    for (v, compiled, name) in [
        (
            &rtx,
            &compiled_rtx,
            "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3",
        ),
        (
            &rtx,
            &compiled_rtx,
            "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue8m0",
        ),
        // (the arithmetic of `mxf4nvf4.block32...ue8m0` too)
        (
            &rtx,
            &compiled_rtx,
            "mma.block_scale.m16n8k64.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0",
        ),
        (&variants, &compiled_variants, "c_apart.ue8m0"),
    ] {
        let (inst, info) = find(v, name);
        let kernel = compiled.kernel(name).expect("kernel");
        // the batch entry's record lanes show as a kernel of their own
        let batch = format!("{name} (batch");
        let records = compiled.clif().iter().any(|(l, _)| l.starts_with(&batch));
        assert!(records, "{name}: record lanes");
        let (k, blocks) = (inst.k(), inst.scale_count());
        let scale = &inst.arithmetic.scale.as_ref().unwrap().format;
        let mut rng = Rng::new(0x3c6e_f372_fe94_f82b);
        let (mut cases, mut wants) = (vec![], vec![]);
        for case in 0..3000u32 {
            let mut next = || rng.next_u64();
            let (a, b): (Vec<u64>, Vec<u64>) = (0..k)
                .map(|i| {
                    let (x, y) = (next(), next());
                    match case % 4 {
                        // garbage above the 4 bits of the code
                        0 => (x, y),
                        // zeros of either sign only
                        1 => (x & 8, y & 8),
                        // one nonzero product in each group of 16
                        2 if i % 16 == (x >> 20) as usize % 16 => (x & 15, y & 15),
                        2 => (x & 8, y & 15),
                        _ => (x & 15, y & 15),
                    }
                })
                .unzip();
            let mut scales = || -> Vec<u64> {
                (0..blocks)
                    .map(|_| {
                        let r = rng.next_u64();
                        let s = match case % 5 {
                            // anything, NaN and garbage above the code included
                            3 if case % 3 == 0 => r,
                            // zero (ue4m3), the extremes, or near 1
                            3 => [0, 1, 0x7e, 0xfe, 0x38][(r % 5) as usize],
                            // finite scales near 1 (the scale format's NaN code excluded)
                            _ => 0x38 + r % 16,
                        };
                        s & scale.storage_mask()
                    })
                    .collect()
            };
            let (sa, sb) = (scales(), scales());
            // the exponent of the first group's scales (ue4m3: bias 7; ue8m0: 127)
            let scale_exp = |x: u64| match scale.as_float().map(|f| f.mantissa_bits) {
                Some(3) => ((x >> 3) & 15).max(1) as i64 - 7,
                _ => (x & 0xff) as i64 - 127,
            };
            let e_g = scale_exp(sa[0]) + scale_exp(sb[0]);
            let r = rng.next_u64();
            let sign = r & 0x8000_0000;
            let c = match case % 7 {
                // near the first group's exponent, from 40 below to 8 above
                0 | 1 => {
                    let field = (e_g + (r >> 40) as i64 % 49 - 40 + 127).clamp(1, 254) as u64;
                    sign | (field << 23) | (r & 0x7f_ffff)
                }
                // zero or tiny (subnormal, or the smallest normals)
                2 if case % 2 == 1 => sign,
                2 => sign | ((r >> 40) % (3 << 23)),
                // near f32's largest finite values
                3 if case % 2 == 0 => sign | (254 << 23) | (r & 0x7f_ffff),
                _ => r & 0xffff_ffff,
            };
            let ops = Operands {
                c,
                a: &a,
                b: &b,
                sa: &sa,
                sb: &sb,
            };
            wants.push(assert_agree(&kernel, inst, info, &ops, name));
            cases.push((c, a, b, sa, sb));
        }
        if name.ends_with("ue8m0") && !name.contains("block32") {
            // e2m1 codes: 0.5, 1, 1.5; ue8m0 codes of 2^e; the f32 code of -2^-115
            let (half, one, three_halves) = (1u64, 2u64, 3u64);
            let pow2 = |e: i64| (e + 127) as u64;
            let minus_2_115 = 0x8000_0000 | (12 << 23);
            let mut first = |x: [(u64, u64); 4], scales: [(i64, i64); 4], c: u64| {
                let (mut a, mut b) = (vec![0u64; k], vec![0u64; k]);
                for (g, &(xa, xb)) in x.iter().enumerate() {
                    (a[16 * g], b[16 * g]) = (xa, xb);
                }
                let sa: Vec<u64> = scales.iter().map(|s| pow2(s.0)).collect();
                let sb: Vec<u64> = scales.iter().map(|s| pow2(s.1)).collect();
                let ops = Operands {
                    c,
                    a: &a,
                    b: &b,
                    sa: &sa,
                    sb: &sb,
                };
                let want = assert_agree(&kernel, inst, info, &ops, name);
                // four times: a group of four records with no other in its lanes (a
                // neighbour with a NaN would send the group to the dot entry)
                for _ in 0..4 {
                    wants.push(want);
                    cases.push((c, a.clone(), b.clone(), sa.clone(), sb.clone()));
                }
            };
            // r = -115, one below the bound where t's last place, 2^(r - 35), reaches
            // f32's subnormal grid: 2^-115 - 2^-115 + 1.5 2^-149 truncates to 2^-149
            // (rounding to nearest would give 2^-148)
            first(
                [(one, one), (three_halves, half), (0, 0), (0, 0)],
                [(-57, -58), (-74, -74), (0, 0), (0, 0)],
                minus_2_115,
            );
            // c = -0 at the zero exponent -139 above four groups of -2^-181: every kept
            // value is -0, and the result +0
            let minus_one = one | 8;
            first([(minus_one, half); 4], [(-90, -90); 4], 0x8000_0000);
            if name.starts_with("c_apart") {
                // a zero c at its zero exponent -100 above 2^-110 - 2^-140: the reference
                // is -100, and -2^-140 is truncated to -0 (d = 2^-110); at the groups'
                // zero exponent the reference would be -110, and d 2^-110 - 2^-134
                first(
                    [(one, one), (minus_one, one), (0, 0), (0, 0)],
                    [(-55, -55), (-70, -70), (0, 0), (0, 0)],
                    0,
                );
            }
        }
        assert_scaled_batch_agrees(&kernel, inst, &cases, &wants, name);
    }
}

/// What the JIT cannot compute exactly is refused with a reason, not miscompiled.
#[test]
fn wide_products_are_refused() {
    let text = r#"
arch wide "f64 products in a fused pipeline"
import std
instruction fused.m8n8k4.f64.f64.f64.f64 {
    shape 8 x 8 x 4
    types a = f64, b = f64, c = f64, d = f64
    uses t_fdpa(F = 60, L = 4, e_zero = -1100)
}
"#;
    let v = mmac_compiler::compile("wide.mma", text).expect("the spec checks");
    let compiled = jit::compile(&v).expect("the backend starts");
    let err = compiled
        .kernel("fused.m8n8k4.f64.f64.f64.f64")
        .err()
        .expect("refused");
    assert_eq!(
        err.message,
        "exact products of `f64` and `f64` need 106-bit significands; the JIT multiplies in 64 bits"
    );
    assert_eq!(
        err.instruction.as_deref(),
        Some("fused.m8n8k4.f64.f64.f64.f64")
    );
}

/// Composed kernels run a chunk of records at a time (each run through its kernel's batch
/// entry, additions natively where the formats allow): a batch spanning three chunks, with
/// a's records apart and then all one record (stride 0, a row of A against many columns),
/// gives the interpreter's d on every record, for every composed instruction of the specs.
#[test]
fn composed_batches_across_chunks() {
    let mut checked = 0;
    let mut r = Rng::new(0xc0de);
    for path in spec_files() {
        let Some(v) = load(&path) else { continue };
        let compiled = jit::compile(&v).expect("the backend starts");
        for (inst, info) in distinct(&v) {
            if !matches!(inst.arithmetic.pipeline, Pipeline::Composed(_)) {
                continue;
            }
            let kernel = compiled.kernel(&inst.name).unwrap();
            let (k, n, ar) = (inst.k(), 150, &inst.arithmetic);
            let mut draw = |f: &Format, shift: i64| {
                encoding(f, r.next_u64() as u8, r.next_u64(), center(f, shift))
            };
            let c: Vec<u64> = (0..n).map(|i| draw(&ar.c, i as i64 % 5 - 2)).collect();
            let a: Vec<u64> = (0..n * k).map(|_| draw(&ar.a, 0)).collect();
            let b: Vec<u64> = (0..n * k).map(|_| draw(&ar.b, 0)).collect();
            for a_stride in [k, 0] {
                let mut d = vec![0; n];
                kernel
                    .batch_strided(&c, (&a, a_stride), (&b, k), (&[], 0), (&[], 0), &mut d)
                    .unwrap();
                for (i, got) in d.into_iter().enumerate() {
                    let ra = &a[i * a_stride..][..k];
                    let ops = Operands {
                        c: c[i],
                        a: ra,
                        b: &b[i * k..][..k],
                        sa: &[],
                        sb: &[],
                    };
                    let want = interp::run(info, &ops).unwrap();
                    assert!(
                        same(inst, want, got),
                        "{} record {i} (a stride {a_stride}): c={:x} a={ra:x?}: interp {want:x}, batch {got:x}",
                        inst.name,
                        c[i]
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 3000, "only {checked} records");
}

/// Named sums aligned again (tests/data/jit_coverage.mma's `anchored` and `carried`):
/// where the validator sized the later adders from the reference's range rather than the
/// terms', the JIT's sum wrapped (448 x 256 = 114688 gave -16384 in f16, -448 gave
/// +16384) and the interpreter's debug check found the sum outside its accumulator.
#[test]
fn named_sums_aligned_again_are_sized_by_their_terms() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jit_coverage.mma");
    let v = load(&path).expect("checks");
    let compiled = jit::compile(&v).expect("compiles");
    let (inst, info) = find(&v, "anchored.m1n1k1.f16.e4m3.e4m3.f16");
    let kernel = compiled.kernel(&inst.name).unwrap();
    // e4m3 codes: 448 0x7e, -448 0xfe, 256 0x78, 2 0x40; f16 results: +inf, -inf, 4
    for (a, b, want) in [
        (0x7e, 0x78, 0x7c00),
        (0xfe, 0x78, 0xfc00),
        (0x40, 0x40, 0x4400),
    ] {
        let ops = Operands {
            c: 0,
            a: &[a],
            b: &[b],
            sa: &[],
            sb: &[],
        };
        let d = assert_agree(&kernel, inst, info, &ops, &inst.name);
        assert_eq!(d, want, "a = {a:x}, b = {b:x}: d = {d:x}");
    }
    // c = 1.5 and two products of 1.9990234375^2: 5.496... (the sum n0 carries past its
    // reference)
    let (inst, info) = find(&v, "carried.m1n1k1.f32.f16.f16.f32");
    let kernel = compiled.kernel(&inst.name).unwrap();
    let x = 0x3fff; // 1.9990234375 in f16
    let ops = Operands {
        c: 1.5f32.to_bits() as u64,
        a: &[x],
        b: &[x],
        sa: &[],
        sb: &[],
    };
    assert_agree(&kernel, inst, info, &ops, &inst.name);
    for name in [
        "anchored.m1n1k4.f16.e4m3.e4m3.f16",
        "carried.m1n1k4.f32.f16.f16.f32",
    ] {
        let (inst, info) = find(&v, name);
        let kernel = compiled.kernel(&inst.name).unwrap();
        check_instruction(&kernel, inst, info, 2000).unwrap();
    }
}

/// A fixed zero exponent far above every term's: the reference is the zero products' (or
/// zero c's) exponent, and every nonzero term is cut to 0. The SIMD alignment sized its
/// powers of two by the terms' and c's exponents but not the zero products', so with
/// `zero exponent 970 for products` 1 x 1 + 0 gave 2^-77 (the exponent field wrapped),
/// on the dot and batch entries alike.
#[test]
fn zero_exponents_far_above_every_term() {
    let text = "arch far_zeros \"far zeros\"\n\
        pipeline tz(F, L, zp, zc) {\n\
            chain every L\n\
            multiply exact\n\
            zero exponent zp for products\n\
            zero exponent zc for c\n\
            align products, c to max exponent keep F bits round toward_zero\n\
            normalize to out round toward_zero\n\
            zero result positive\n\
            nan canonical\n\
        }\n\
        instruction far.P{P}.C{C}.{T} {\n\
            for (P, C) in [(970, -132), (900, -132), (-132, 2000), (1000, 1000)]\n\
            for T in [f16, bf16]\n\
            shape 4 x 4 x 4\n\
            types a = T, b = T, c = f32, d = f32\n\
            evidence assumption\n\
            uses tz(F = 24, L = 4, zp = P, zc = C)\n\
        }\n";
    let v = mmac_compiler::compile("far_zeros.mma", text).expect("checks");
    let compiled = jit::compile(&v).expect("compiles");
    for (inst, info) in distinct(&v) {
        let kernel = compiled.kernel(&inst.name).unwrap();
        let one = match inst.arithmetic.a.name.as_str() {
            "f16" => 0x3c00,
            _ => 0x3f80,
        };
        let mut cases = vec![];
        for c in [0u64, 0x3f80_0000, 0x8000_0000, 0x7f7f_ffff] {
            for a in [[one, 0, 0, 0], [one; 4], [0; 4]] {
                let ops = Operands {
                    c,
                    a: &a,
                    b: &[one, 0, one, 0],
                    sa: &[],
                    sb: &[],
                };
                assert_agree(&kernel, inst, info, &ops, &inst.name);
                cases.push((c, a.to_vec(), vec![one, 0, one, 0]));
            }
        }
        let want: Vec<u64> = cases
            .iter()
            .map(|(c, a, b)| {
                let ops = Operands {
                    c: *c,
                    a,
                    b,
                    sa: &[],
                    sb: &[],
                };
                interp::run(info, &ops).unwrap()
            })
            .collect();
        assert_batch_agrees(&kernel, inst, &cases, &want, &inst.name);
    }
}
