//! The Verilog back end against the reference interpreter: for every distinct arithmetic
//! of every spec under `specs/`, `specs/examples/` and `compiler/tests/data/` (and its
//! `rtl/`: NaN rules the JIT refuses), the circuit
//! `rtl::circuit` builds (evaluated with Verilog's semantics, `Circuit::eval`) gives the
//! interpreter's bits on random encodings: uniform codes (NaN and Inf included), codes
//! clustered around one binade (cancellation, alignment shifts), zeros and extreme codes.
//!
//! The circuit with the proofs' cut point at the reference exponent open computes the same
//! d with the cut clear, and with it set and fed the reference the circuit computes.
//!
//! Cases per arithmetic: `MMAC_RTL_CASES` (default 64, fewer for the largest circuits);
//! the Verilog text itself is simulated under Verilator in the root crate's tests/rtl.rs.

use mmac_compiler::engine::Operands;
use mmac_compiler::format::{Format, FormatKind};
use mmac_compiler::random::Rng;
use mmac_compiler::rtl::Circuit;
use mmac_compiler::{Checked, CheckedSpec, interp, rtl};
use num_bigint::BigUint;
use std::path::{Path, PathBuf};

fn spec_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut out = vec![];
    // (data/rtl: instructions the JIT refuses, which jit_matches_interp.rs does not read)
    for dir in [root.clone(), root.join("examples"), data.join("rtl"), data] {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "mma") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// One random encoding of `f`: uniform, a zero, an extreme code, or near `center`.
fn encoding(f: &Format, r: &mut Rng, center: i64) -> u64 {
    let bits = r.next_u64();
    let mask = f.storage_mask();
    match &f.kind {
        FormatKind::Int(_) => bits & mask,
        FormatKind::Float(x) => {
            let (m, e) = (x.mantissa_bits, x.exponent_bits);
            let emask = (1u64 << e) - 1;
            let man = bits & ((1u64 << m) - 1);
            let sign = if x.signed { (bits >> 63) << (e + m) } else { 0 };
            let code = match r.below(10) {
                0 | 1 => bits,
                2 => sign,
                3 => match r.below(4) {
                    0 => sign | (emask << m) | man,
                    1 => sign | ((emask - 1) << m) | ((1u64 << m) - 1),
                    2 => sign | 1,
                    _ => sign | man,
                },
                _ => {
                    let off = r.below(7) as i64 - 3;
                    let ef = (center + off).clamp(0, emask as i64) as u64;
                    sign | (ef << m) | man
                }
            };
            let low = |b: u32| if b >= 64 { u64::MAX } else { (1u64 << b) - 1 };
            ((code & low(x.code_bits())) << x.ignored_low_bits) & mask
        }
    }
}

/// The circuit's d for `ops`, asserted equal to the interpreter's (`case` says which on
/// failure); None where the interpreter refuses the operands.
fn agrees(inst: Checked, circuit: &Circuit, ops: &Operands, case: &str) -> Option<BigUint> {
    let want = interp::run(inst, ops).ok()?;
    let got = circuit.eval(&rtl::pack(inst, ops)).swap_remove(0);
    assert_eq!(
        got,
        BigUint::from(want),
        "{case}: interp {want:x}, circuit {got:x}"
    );
    Some(got)
}

/// The cases checked, and of those the ones checked with the cut open too.
fn check_spec(spec: &CheckedSpec, file: &Path, cases: usize) -> (usize, usize) {
    let (mut checked, mut cut_checked) = (0, 0);
    for (_, inst) in spec.distinct() {
        let circuit = rtl::circuit(inst);
        // (the proofs' cut point: clear, or given the reference the circuit computes, it
        // changes nothing)
        let cut = rtl::circuit_cut_at_reference(inst);
        // the largest circuits get fewer cases (the evaluator is a plain interpreter)
        let n = (cases * 20_000 / circuit.len().max(1)).clamp(4, cases);
        let ar = inst.arithmetic();
        let mut r = Rng::new(0x5eed ^ circuit.len() as u64);
        let bias = |f: &Format| f.as_float().map_or(0, |x| x.bias as i64);
        for i in 0..n {
            // a center shared by a, b and c: products near c's binade
            let shift = r.below(9) as i64 - 4;
            let k = inst.k();
            let a: Vec<u64> = (0..k)
                .map(|_| encoding(&ar.a, &mut r, bias(&ar.a) + shift))
                .collect();
            let b: Vec<u64> = (0..k)
                .map(|_| encoding(&ar.b, &mut r, bias(&ar.b)))
                .collect();
            let c = encoding(&ar.c, &mut r, bias(&ar.c) + 2 * shift);
            let s = inst.scale_count();
            let scale = ar.scale.as_ref().map(|x| x.format.clone());
            let mut draw = |n: usize| -> Vec<u64> {
                (0..n)
                    .map(|_| scale.as_ref().map_or(0, |f| encoding(f, &mut r, bias(f))))
                    .collect()
            };
            let (sa, sb) = (draw(s), draw(s));
            let ops = Operands {
                c,
                a: &a,
                b: &b,
                sa: &sa,
                sb: &sb,
            };
            let case = format!(
                "{} {} case {i}: c={c:x} a={a:x?} b={b:x?} sa={sa:x?} sb={sb:x?}",
                file.display(),
                inst.name()
            );
            let Some(got) = agrees(inst, &circuit, &ops, &case) else {
                continue;
            };
            if let Some(cut) = cut.as_ref().filter(|_| i < 8) {
                let mut inputs = rtl::pack(inst, &ops);
                inputs.extend([BigUint::ZERO, BigUint::ZERO]);
                let port = |name| cut.outputs().position(|(n, _)| n == name).unwrap();
                let (d, r) = (port("d"), port("r"));
                let open = cut.eval(&inputs);
                let n = inputs.len();
                (inputs[n - 2], inputs[n - 1]) = (open[r].clone(), BigUint::from(1u32));
                let fed = cut.eval(&inputs);
                assert_eq!(
                    (&open[d], &fed[d]),
                    (&got, &got),
                    "{} {} case {i}: the cut at the reference changes d (clear, then fed its own r)",
                    file.display(),
                    inst.name(),
                );
                cut_checked += 1;
            }
            checked += 1;
        }
    }
    (checked, cut_checked)
}

#[test]
fn every_arithmetic_as_a_circuit_computes_what_the_interpreter_does() {
    let cases: usize = std::env::var("MMAC_RTL_CASES")
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or(64);
    let (mut total, mut cut_total) = (0, 0);
    for file in spec_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let Ok(spec) = mmac_compiler::compile(&file.display().to_string(), &text) else {
            continue;
        };
        let (checked, cut_checked) = check_spec(&spec, &file, cases);
        total += checked;
        cut_total += cut_checked;
    }
    eprintln!("{total} cases agreed ({cut_total} with the cut at the reference open too)");
    assert!(total > 1000, "only {total} cases ran");
    assert!(
        cut_total > 100,
        "only {cut_total} cases ran with the cut open"
    );
}

/// `-0` in a composed pipeline (Hopper's `mma.m8n8k4`: the f16 form's chains start from
/// -0 and its f32 sum is rounded into f16 by adding -0; the f32 forms start from +0): the
/// circuit gives the interpreter's signed zero for every pattern of ±0 products and c,
/// the cases random encodings seldom draw. The interpreter's answers are the H200's
/// (tests/gpu_captures.rs).
#[test]
fn signed_zeros_of_composed_pipelines_as_circuits() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/hopper.mma");
    let text = std::fs::read_to_string(&file).unwrap();
    let spec = mmac_compiler::compile(&file.display().to_string(), &text).unwrap();
    let mut negative = 0;
    for name in [
        "mma.m8n8k4.f16.f16.f16.f16",
        "mma.m8n8k4.f32.f16.f16.f16",
        "mma.m8n8k4.f32.f16.f16.f32",
    ] {
        let inst = spec.find(name).unwrap();
        let circuit = rtl::circuit(inst);
        let c_bits = inst.arithmetic().c.storage_bits();
        for pattern in 0u32..32 {
            let a: Vec<u64> = (0..4).map(|k| u64::from(pattern >> k & 1) << 15).collect();
            let b = [0x3c00u64; 4];
            let c = u64::from(pattern >> 4) << (c_bits - 1);
            let ops = Operands {
                c,
                a: &a,
                b: &b,
                sa: &[],
                sb: &[],
            };
            let d = agrees(inst, &circuit, &ops, &format!("{name}: c={c:x} a={a:x?}"));
            negative += usize::from(d.expect("finite operands") != BigUint::ZERO);
        }
    }
    // only the f16 form keeps -0, where every product and c are -0
    assert_eq!(negative, 1);
}

/// The propagating NaN rules (`compiler/tests/data/rtl/nan_rules.mma`, which the random cases
/// above also run): NaNs in each input, quiet and signalling, of either sign, Inf * 0,
/// and finite inputs, for d as wide as its sources and wider, as the interpreter gives
/// them. (A source as wide as d made the back end build a 0-bit wire and panic.)
#[test]
fn propagating_nan_rules_as_circuits() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/rtl/nan_rules.mma");
    let text = std::fs::read_to_string(&file).unwrap();
    let spec = mmac_compiler::compile(&file.display().to_string(), &text).unwrap();
    const ONE: u64 = 0x3c00;
    let (nan16, snan16, inf16) = (0x7e05u64, 0xfd01u64, 0x7c00u64);
    for name in ["c_first", "products_first", "c_first_f16"] {
        let inst = spec.find(name).unwrap();
        let circuit = rtl::circuit(inst);
        let wide = inst.arithmetic().c.storage_bits() == 32;
        let (c_nan, c_one, c_sign) = if wide {
            (0x7fc0_0001, 0x3f80_0000, 1 << 31)
        } else {
            (0x7e07, ONE, 1 << 15)
        };
        let cases: [(u64, [u64; 2], [u64; 2]); 8] = [
            (c_nan, [ONE, nan16], [ONE, ONE]),
            (c_one, [ONE, nan16], [snan16, ONE]),
            (c_one, [snan16, ONE], [ONE, nan16]),
            (c_nan | c_sign, [nan16, ONE], [ONE, ONE]),
            (c_one, [inf16, ONE], [0, ONE]),
            (c_one, [ONE, ONE], [0x4000, 0xbc00]),
            (0, [ONE, 0x0001], [0x3555, 0x8001]),
            (c_nan, [inf16, ONE], [0, ONE]),
        ];
        for (c, a, b) in cases {
            let ops = Operands {
                c,
                a: &a,
                b: &b,
                sa: &[],
                sb: &[],
            };
            agrees(
                inst,
                &circuit,
                &ops,
                &format!("{name}: c={c:x} a={a:x?} b={b:x?}"),
            )
            .expect("the interpreter computes it");
        }
    }
}

/// A named sum anchored at a fixed exponent far below its terms, aligned again
/// (compiler/tests/data/jit_coverage.mma's `anchored`): the circuit's adders are sized by
/// the validator's analysis, which sized the last one 34 bits, too narrow for 448 x 256.
#[test]
fn named_sums_aligned_again_as_circuits() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jit_coverage.mma");
    let text = std::fs::read_to_string(&file).unwrap();
    let spec = mmac_compiler::compile(&file.display().to_string(), &text).unwrap();
    let inst = spec.find("anchored.m1n1k1.f16.e4m3.e4m3.f16").unwrap();
    let circuit = rtl::circuit(inst);
    // e4m3 448 0x7e, -448 0xfe, 256 0x78, 2 0x40: +inf, -inf, 4 in f16
    for (a, b, want) in [
        (0x7e, 0x78, 0x7c00u64),
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
        let got = agrees(inst, &circuit, &ops, &format!("a={a:x} b={b:x}"));
        assert_eq!(got, Some(BigUint::from(want)));
    }
}
