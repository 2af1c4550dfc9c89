//! No input makes mmac panic: thousands of mutated and truncated spec files go through
//! the parser and checker (and their diagnostics are rendered), and mutated vector files
//! through the vector reader.

use mmac_compiler::records::Rng;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

const TOKENS: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ",",
    "=",
    "=>",
    "..",
    "x",
    "-",
    "+",
    "*",
    "/",
    "^",
    "0",
    "1",
    "-999",
    "99999999999999999999",
    "2^128",
    "f16",
    "e2m1",
    "ue8m0",
    "s32",
    "b1",
    "products",
    "products.even",
    "c",
    "align",
    "keep",
    "bits",
    "round",
    "down",
    "toward_zero",
    "to",
    "max",
    "exponent",
    "never",
    "zero",
    "result",
    "chain",
    "every",
    "bytes",
    "normalize",
    "range",
    "precision",
    "overflow",
    "saturate",
    "wrap",
    "inf",
    "multiply",
    "exact",
    "scaled",
    "group",
    "as",
    "sum",
    "accumulate",
    "in",
    "add",
    "pairwise",
    "groups",
    "of",
    "nan",
    "canonical",
    "instruction",
    "pipeline",
    "format",
    "arch",
    "import",
    "std",
    "for",
    "shape",
    "types",
    "scale",
    "block",
    "uses",
    "match",
    "_",
    "\"",
    "\"s\"",
    "//",
    "\n",
    "drop",
    "below",
    "flush",
    "subnormal",
    "a",
    "b",
    "d",
    "out",
    "K",
    "F",
    "L",
    "é",
    "\u{0}",
];

fn mutate(rng: &mut Rng, text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len();
    let mut out: Vec<char> = chars.clone();
    match rng.below(6) {
        0 => out.truncate(rng.below(n + 1)),
        1 => {
            let a = rng.below(n);
            let b = (a + 1 + rng.below(40)).min(n);
            out.drain(a..b);
        }
        2 => {
            let a = rng.below(n);
            let tok: Vec<char> = TOKENS[rng.below(TOKENS.len())].chars().collect();
            out.splice(a..a, tok.iter().cloned().chain(std::iter::once(' ')));
        }
        3 => {
            // replace a word with a random token
            let a = rng.below(n);
            let mut b = a;
            while b < n && (chars[b].is_alphanumeric() || chars[b] == '_') {
                b += 1;
            }
            let tok: Vec<char> = TOKENS[rng.below(TOKENS.len())].chars().collect();
            out.splice(a..b.max(a + 1).min(n), tok);
        }
        4 => {
            // change a digit
            let digits: Vec<usize> = (0..n).filter(|i| chars[*i].is_ascii_digit()).collect();
            if !digits.is_empty() {
                let i = digits[rng.below(digits.len())];
                out[i] = char::from(b'0' + rng.below(10) as u8);
            }
        }
        _ => {
            let a = rng.below(n);
            let b = (a + rng.below(80)).min(n);
            let piece: Vec<char> = chars[a..b].to_vec();
            let at = rng.below(n);
            out.splice(at..at, piece);
        }
    }
    out.into_iter().collect()
}

fn spec_texts() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![];
    for name in [
        "specs/hopper.mma",
        "specs/cdna3.mma",
        "specs/cdna2.mma",
        "specs/ada.mma",
        "specs/volta.mma",
        "specs/std/prelude.mma",
    ] {
        out.push((
            name.to_string(),
            std::fs::read_to_string(root.join(name)).unwrap(),
        ));
    }
    for e in std::fs::read_dir(root.join("tests/checker/fail")).unwrap() {
        let p = e.unwrap().path();
        out.push((
            p.display().to_string(),
            std::fs::read_to_string(&p).unwrap(),
        ));
    }
    out
}

#[test]
fn mutated_specs_never_panic() {
    let texts = spec_texts();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut rejected = 0;
    let rounds = 2500;
    for i in 0..rounds {
        let (name, base) = &texts[i % texts.len()];
        let mut text = base.clone();
        for _ in 0..=rng.below(3) {
            text = mutate(&mut rng, &text);
        }
        let r = catch_unwind(AssertUnwindSafe(|| {
            match mmac_compiler::compile(name, &text) {
                Ok(v) => {
                    // whatever checks must also run: one dot product per instruction, zeros in
                    for (index, inst) in v.spec.instructions.iter().enumerate().take(3) {
                        let z = vec![0u64; inst.k()];
                        let s = vec![0u64; inst.scale_count()];
                        let ops = mmac_compiler::engine::Operands {
                            c: 0,
                            a: &z,
                            b: &z,
                            sa: &s,
                            sb: &s,
                        };
                        mmac_compiler::interp::run(inst, v.info.instruction(index), &ops).unwrap();
                    }
                    false
                }
                Err(d) => {
                    let _ = d.render_plain(100);
                    let _ = d.short();
                    true
                }
            }
        }));
        match r {
            Ok(rej) => rejected += rej as usize,
            Err(_) => {
                panic!("mmac panicked on a mutation of {name} (round {i}):\n-----\n{text}\n-----")
            }
        }
    }
    // the mutations must exercise the error paths, not only harmless whitespace
    assert!(
        rejected > rounds / 2,
        "only {rejected} of {rounds} mutations were rejected"
    );
}

#[test]
fn truncated_specs_never_panic() {
    for (name, text) in spec_texts().into_iter().take(6) {
        let chars: Vec<char> = text.chars().collect();
        for cut in (0..chars.len()).step_by(7) {
            let t: String = chars[..cut].iter().collect();
            let r = catch_unwind(AssertUnwindSafe(|| {
                if let Err(d) = mmac_compiler::compile(&name, &t) {
                    let _ = d.render_plain(80);
                }
            }));
            assert!(r.is_ok(), "panic on {name} truncated at char {cut}");
        }
    }
}

#[test]
fn mutated_vector_files_never_panic() {
    let base = "# arch: hopper\n# instruction: mma.m16n8k8.f32.f16.f16.f32\n# nan: exact\nc=3f800000 a=3c00,3c00,0,0,0,0,0,0 b=3c00,0,0,0,0,0,0,0 d=40000000\nc=0 a=1,2,3,4,5,6,7,8 b=8,7,6,5,4,3,2,1 sa=7f sb=7f d=0\n";
    let mut rng = Rng(42);
    for _ in 0..3000 {
        let text = mutate(&mut rng, base);
        let r = catch_unwind(|| mmac_runtime::vectors::parse(Path::new("m.mmv"), &text));
        assert!(r.is_ok(), "vector reader panicked on:\n{text}");
    }
}

#[test]
fn malformed_npy_files_never_panic() {
    use mmac_runtime::matrix::{self, Matrix};
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = tmp.path();
    let f16 = mmac_compiler::format::builtin("f16").unwrap();
    let e2m1 = mmac_compiler::format::builtin("e2m1").unwrap();
    let good = dir.join("good.npy");
    matrix::write(
        &good,
        &f16,
        &Matrix {
            rows: 3,
            cols: 4,
            data: (0..12).collect(),
        },
    )
    .unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let mut rng = Rng(7);
    let bad = dir.join("bad.npy");
    for round in 0..1500 {
        let mut b = bytes.clone();
        match round % 3 {
            0 => b.truncate(rng.below(b.len() + 1)),
            1 => {
                let i = rng.below(b.len());
                b[i] = rng.next_u64() as u8;
            }
            _ => {
                // rewrite part of the header text
                let i = rng.below(b.len().min(80));
                let tok = TOKENS[rng.below(TOKENS.len())].as_bytes();
                b.splice(i..(i + tok.len()).min(b.len()), tok.iter().copied());
            }
        }
        std::fs::write(&bad, &b).unwrap();
        for f in [&f16, &e2m1] {
            let r = catch_unwind(AssertUnwindSafe(|| {
                matrix::read(&bad, f, "A")
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }));
            assert!(r.is_ok(), "the .npy reader panicked on round {round}");
        }
    }
}
