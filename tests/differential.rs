//! The generative differential fuzzer: random specs (random formats and pipelines of every
//! kind, `support::spec_gen`) that check are joined into one file; for every instruction,
//! `mmac gen`'s vectors (random cases, the probe battery, the corner cases of its
//! parameters, every expected d from the reference interpreter) then run through the quick
//! JIT and the optimised JIT (dot and batch entries), and through the object file of
//! `mmac compile --emit obj` linked into a C program (`tests/c/check_vectors.c`, also under
//! a hostile floating-point state with garbage above the codes). Every engine must give
//! the interpreter's bits.
//!
//! The default run is short (`MMAC_DIFF_SPECS` specs, 60 unless set; `MMAC_DIFF_SEED`
//! picks another campaign): `MMAC_DIFF_SPECS=2000 cargo test --test differential` is a
//! long one.

mod support;

use mmac_compiler::engine::Operands;
use mmac_compiler::jit;
use mmac_compiler::random::Rng;
use mmac_runtime::conformance::matches;
use mmac_runtime::generate::{self, Case};
use mmac_runtime::witness::nan_any;
use std::path::Path;
use std::process::Command;
use support::spec_gen;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Candidates that check on their own, joined into one spec text.
fn generated_spec(rng: &mut Rng, wanted: usize) -> String {
    let mut text = spec_gen::header("fuzz");
    let mut accepted = 0;
    let mut tried = 0;
    while accepted < wanted {
        tried += 1;
        assert!(
            tried < 50 * wanted + 100,
            "only {accepted} of {tried} candidates check: the generator writes mostly broken specs"
        );
        let c = spec_gen::candidate(rng, tried);
        let alone = format!("{}{}", spec_gen::header("fuzz"), c.text);
        if mmac_compiler::compile("candidate.mma", &alone).is_ok() {
            text += &c.text;
            accepted += 1;
        }
    }
    text
}

/// The generated cases of every instruction, from `mmac gen`'s generator.
fn vectors(v: &mmac_compiler::CheckedSpec, text: &str, seed: u64) -> Vec<Vec<Case>> {
    let options = generate::Options { random: 48, seed };
    v.instructions()
        .map(|checked| {
            generate::generate(checked, &options)
                .unwrap_or_else(|e| panic!("gen on `{}`: {e}\n{text}", checked.name()))
                .cases
        })
        .collect()
}

/// Every case of every instruction through one JIT build's dot and batch entries; returns
/// how many instructions it ran.
fn check_jit(
    v: &mmac_compiler::CheckedSpec,
    text: &str,
    cases: &[Vec<Case>],
    quick: bool,
) -> usize {
    let options = jit::Options {
        quick,
        ..jit::Options::default()
    };
    let compiled = jit::compile_with(v, options).unwrap();
    let mut ran = 0;
    for (inst, cases) in v.spec().instructions.iter().zip(cases) {
        let Ok(kernel) = compiled.kernel(&inst.name) else {
            continue;
        };
        ran += 1;
        let nan = nan_any(inst);
        let d_format = &inst.arithmetic.d;
        let (mut c, mut a, mut b, mut sa, mut sb) = (vec![], vec![], vec![], vec![], vec![]);
        for case in cases {
            let ops: Operands = case.input.operands();
            let got = kernel.dot(&ops).unwrap();
            assert!(
                matches(d_format, case.d, got, nan),
                "`{}` (quick {quick}), {}: {}: jit d={got:x}, interpreter d={:x}\n{text}",
                inst.name,
                case.label,
                case.input.case_fields(inst),
                case.d
            );
            c.push(ops.c);
            a.extend_from_slice(ops.a);
            b.extend_from_slice(ops.b);
            sa.extend_from_slice(ops.sa);
            sb.extend_from_slice(ops.sb);
        }
        let mut d = vec![0; cases.len()];
        kernel.batch(&c, &a, &b, &sa, &sb, &mut d).unwrap();
        for (case, &got) in cases.iter().zip(&d) {
            assert!(
                matches(d_format, case.d, got, nan),
                "`{}` (quick {quick}, batch entry), {}: {}: jit d={got:x}, interpreter d={:x}\n{text}",
                inst.name,
                case.label,
                case.input.case_fields(inst),
                case.d
            );
        }
    }
    ran
}

/// The spec's object linked with the C vector checker, over every present instruction's
/// cases; returns how many instructions it ran.
fn check_object(
    v: &mmac_compiler::CheckedSpec,
    text: &str,
    cases: &[Vec<Case>],
    dir: &Path,
) -> usize {
    let names = mmac_compiler::aot::ObjectNames {
        source: "fuzz.mma".into(),
        header_name: "fuzz.h".into(),
        object_name: "fuzz.o".into(),
        shared: false,
    };
    let object = match mmac_compiler::aot::compile_object(v, &names, &|_| None) {
        Ok(o) => o,
        // a host without the FP control helpers has no objects
        Err(e) if e.message.contains("host") => return 0,
        Err(e) => panic!("compile_object: {e}\n{text}"),
    };
    std::fs::write(dir.join("fuzz.o"), &object.bytes).unwrap();
    std::fs::write(dir.join("fuzz.h"), &object.header).unwrap();
    let mut files = vec![];
    for (inst, cases) in v.spec().instructions.iter().zip(cases) {
        if !object.present.contains(&inst.name) {
            continue;
        }
        let path = dir.join(format!("{}.mmv", inst.name));
        std::fs::write(&path, generate::mmv_text("fuzz", inst, &[], cases)).unwrap();
        files.push(path);
    }
    if files.is_empty() {
        return 0;
    }
    let exe = dir.join("check_fuzz");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = Command::new(cc)
        .args([
            "-std=c11",
            "-O1",
            "-DMMAC_HEADER=\"fuzz.h\"",
            "-DMMAC_PREFIX=mmac_fuzz_",
            "-I",
        ])
        .arg(dir)
        .arg(root.join("tests/c/check_vectors.c"))
        .arg(dir.join("fuzz.o"))
        .arg("-o")
        .arg(&exe)
        .arg("-lm")
        .output()
        .expect("a C compiler (cc, or $CC)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for flags in [&[][..], &["--hostile-fp", "--high-bits"][..]] {
        let o = Command::new(&exe)
            .args(flags)
            .args(&files)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "the object {flags:?}:\n{}\n{text}",
            out.lines()
                .filter(|l| !l.starts_with("PASS"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    files.len()
}

#[test]
fn generated_specs_agree_on_every_engine() {
    let specs = env_number("MMAC_DIFF_SPECS", 60) as usize;
    let seed = env_number("MMAC_DIFF_SEED", 0x5eed_d1ff);
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    // rounds of at most 40 specs, one object per round
    let mut done = 0;
    let (mut quick, mut optimised, mut object, mut total) = (0, 0, 0, 0);
    while done < specs {
        let n = (specs - done).min(40);
        let text = generated_spec(&mut rng, n);
        let v = mmac_compiler::compile("fuzz.mma", &text)
            .unwrap_or_else(|d| panic!("{}\n{text}", d.render_plain(100)));
        let cases = vectors(&v, &text, seed.wrapping_add(done as u64));
        total += v.spec().instructions.len();
        quick += check_jit(&v, &text, &cases, true);
        optimised += check_jit(&v, &text, &cases, false);
        object += check_object(&v, &text, &cases, dir.path());
        done += n;
    }
    eprintln!(
        "{total} generated instructions: {quick} through the quick JIT, {optimised} through the optimised JIT, {object} through an object"
    );
    // the generator must reach the compiled engines, not only the interpreter
    assert!(quick * 2 > total, "{quick} of {total} ran through the JIT");
    assert_eq!(quick, optimised);
}

/// A spec's text, an instruction of it, and the input (c, a, b) with the d it must give.
type Reproducer<'a> = (&'a str, &'a str, u64, &'a [u64], &'a [u64], u64);

/// What the fuzzer found, kept as fixed cases: each spec with the input that broke it.
/// - The validator sized a max-exponent alignment from each term's own kept bits, where
///   the grid is the finest term's: a node keeping 10 bits beside c keeping 15 summed
///   outside its 18-bit accumulator (the interpreter refused with an internal error).
#[test]
fn reproducers_found_by_the_fuzzer() {
    let cases: &[Reproducer] = &[(
        "format fmt9a { exponent = 7, mantissa = 5, specials = fnuz }
format fmt9b { exponent = 8, mantissa = 7, specials = ieee }
pipeline p9() {
    chain every 2
    multiply exact
    zero exponent never
    align products to max exponent keep 45 bits round toward_zero as dot
    align dot keep 10 bits round down, c keep 15 bits round down to max exponent
    normalize to out round down
    nan ieee
}
instruction fz.9 {
    shape 1 x 1 x 4
    types a = fmt9a, b = fmt9b, c = f16, d = f16
    uses p9()
}
",
        "fz.9",
        0,
        &[0xfff; 4],
        &[0x7f7f; 4],
        0x7c00,
    )];
    for (text, name, c, a, b, d) in cases {
        let text = format!("{}{text}", spec_gen::header("found"));
        let v = mmac_compiler::compile("found.mma", &text)
            .unwrap_or_else(|e| panic!("{}", e.render_plain(100)));
        let i = v.spec().position(name).unwrap();
        let checked = v.get(i);
        let ops = Operands {
            c: *c,
            a,
            b,
            sa: &[],
            sb: &[],
        };
        let want = mmac_compiler::interp::run(checked, &ops).unwrap();
        assert_eq!(want, *d, "{name}: the interpreter");
        let compiled = jit::compile_instruction(checked).unwrap();
        let got = compiled.kernel(name).unwrap().dot(&ops).unwrap();
        assert_eq!(got, *d, "{name}: the JIT");
    }
}
