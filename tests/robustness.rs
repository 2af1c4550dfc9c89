//! Malformed input gets a diagnostic, never a panic, for the classes of input generated
//! here: thousands of mutated and truncated spec files through the parser, checker and
//! validator (their diagnostics rendered); expressions at the integer extremes (`i64::MIN`,
//! `-1`, `0`, shifts and powers past 63) in every place an expression can stand, each a
//! located error; nesting and composition past the limits, very long lines, many errors;
//! mutated vector and .npy files through their readers. Every mutated spec that checks is
//! also JIT-compiled and run on random records through both engines, which must give equal
//! bits (or the JIT refuses the instruction with a reason).

use mmac_compiler::random::Rng;
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
        "specs/rtx_blackwell.mma",
        "specs/std/prelude.mma",
        "specs/examples/kulisch.mma",
        "compiler/tests/data/jit_coverage.mma",
    ] {
        out.push((
            name.to_string(),
            std::fs::read_to_string(root.join(name)).unwrap(),
        ));
    }
    for dir in ["tests/checker/fail", "tests/checker/pass"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for p in files {
            out.push((
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            ));
        }
    }
    out
}

/// Run a checked (mutated) spec: for a few of its distinct arithmetics, random records
/// (any encoding, NaN and Inf included) through the interpreter, and through the JIT
/// unless it refuses the instruction with a reason. Returns whether a kernel ran.
fn run_on_both_engines(v: &mmac_compiler::CheckedSpec, rng: &mut Rng) -> Result<bool, String> {
    use mmac_compiler::engine::Operands;
    use mmac_compiler::{interp, jit};
    let distinct: Vec<usize> = v.info().distinct().map(|(i, _)| i).collect();
    let mut ran = false;
    for _ in 0..2.min(distinct.len()) {
        let index = distinct[rng.below(distinct.len())];
        let checked = v.get(index);
        let inst = checked.instruction();
        let ar = &inst.arithmetic;
        let kernel = match jit::compile_instruction(checked) {
            Ok(c) => Some(c),
            Err(e) if e.message.contains("internal error") => {
                return Err(format!("the JIT failed on `{}`: {e}", inst.name));
            }
            Err(_) => None,
        };
        let kernel = kernel.as_ref().map(|c| c.kernel(&inst.name).unwrap());
        ran |= kernel.is_some();
        let scale = ar.scale.as_ref().map(|s| &s.format);
        for _ in 0..4 {
            let mut draw = |f: Option<&mmac_compiler::format::Format>, n: usize| -> Vec<u64> {
                (0..n)
                    .map(|_| f.map_or(0, |f| rng.next_u64() & f.storage_mask()))
                    .collect()
            };
            let (a, b) = (draw(Some(&ar.a), inst.k()), draw(Some(&ar.b), inst.k()));
            let (sa, sb) = (
                draw(scale, inst.scale_count()),
                draw(scale, inst.scale_count()),
            );
            let c = draw(Some(&ar.c), 1)[0];
            let ops = Operands {
                c,
                a: &a,
                b: &b,
                sa: &sa,
                sb: &sb,
            };
            let want = interp::run(checked, &ops).map_err(|e| e.to_string())?;
            if let Some(k) = &kernel {
                let got = k.dot(&ops).map_err(|e| e.to_string())?;
                let nan = |x: u64| ar.d.decode(x).is_nan();
                if want != got && !(nan(want) && nan(got)) {
                    return Err(format!(
                        "`{}`: c={c:x} a={a:x?} b={b:x?} sa={sa:x?} sb={sb:x?}: interp {want:x}, jit {got:x}",
                        inst.name
                    ));
                }
            }
        }
    }
    Ok(ran)
}

#[test]
fn mutated_specs_never_panic() {
    let texts = spec_texts();
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    let mut rejected = 0;
    let mut compiled = 0;
    // MMAC_FUZZ_ROUNDS runs a longer campaign (and MMAC_FUZZ_SEED another one)
    let rounds: usize = std::env::var("MMAC_FUZZ_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2500);
    if let Some(seed) = std::env::var("MMAC_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        rng = Rng::new(seed);
    }
    for i in 0..rounds {
        // every other round mutates a spec that checks (the spec library, the pass/
        // corpus), so that many mutations still check and reach the engines
        let runnable: Vec<&(String, String)> = texts
            .iter()
            .filter(|(n, _)| !n.contains("checker/fail") && !n.contains("prelude"))
            .collect();
        let (name, base) = if i % 2 == 0 {
            runnable[(i / 2) % runnable.len()]
        } else {
            &texts[i % texts.len()]
        };
        let mut text = base.clone();
        // one mutation of a runnable spec often still checks; up to three elsewhere
        let mutations = if i % 2 == 0 { 1 } else { 1 + rng.below(3) };
        for _ in 0..mutations {
            text = mutate(&mut rng, &text);
        }
        let r = catch_unwind(AssertUnwindSafe(|| {
            match mmac_compiler::compile(name, &text) {
                // whatever checks must also run, on both engines, with equal bits
                Ok(v) => run_on_both_engines(&v, &mut rng).map(|ran| (false, ran)),
                Err(d) => {
                    let _ = d.render_plain(100);
                    let _ = d.short();
                    Ok((true, false))
                }
            }
        }));
        match r {
            Ok(Ok((rej, ran))) => {
                rejected += rej as usize;
                compiled += ran as usize;
            }
            Ok(Err(e)) => {
                panic!(
                    "the engines disagree on a mutation of {name} (round {i}): {e}\n-----\n{text}\n-----"
                )
            }
            Err(_) => {
                panic!("mmac panicked on a mutation of {name} (round {i}):\n-----\n{text}\n-----")
            }
        }
    }
    // the mutations must exercise the error paths, not only harmless whitespace
    assert!(
        rejected > rounds / 3,
        "only {rejected} of {rounds} mutations were rejected"
    );
    eprintln!("{rejected} rejected, {compiled} of the accepted ran through the JIT");
    // and the accepted ones really went through the JIT
    assert!(
        compiled > rounds / 8,
        "only {compiled} of {rounds} mutations ran through the JIT"
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
    let mut rng = Rng::new(42);
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
    let mut rng = Rng::new(7);
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

/// Compile and render on a thread with a small stack (a C program's or a Python thread's
/// might be no larger): deep inputs must be refused, never overflow it.
fn compile_on_small_stack(name: &str, text: String) -> Result<usize, (Vec<String>, String)> {
    let name = name.to_string();
    std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(move || match mmac_compiler::compile(&name, &text) {
            Ok(v) => Ok(v.spec().instructions.len()),
            Err(d) => Err((
                d.codes().iter().map(|c| c.as_str().to_string()).collect(),
                d.render_plain(100) + &d.short(),
            )),
        })
        .unwrap()
        .join()
        .expect("no panic, no stack overflow")
}

fn with_f(expr: &str) -> String {
    format!(
        "arch t\nimport std\ninstruction x {{\n    shape 1 x 1 x 16\n    types a = f16, b = f16, c = f32, d = f32\n    uses t_fdpa(F = {expr}, L = 16, e_zero = -133)\n}}\n"
    )
}

/// Parentheses, `match`, flat sums and nested `for` loops at every depth up to 100,000:
/// each compiles on a 512 KB stack or is refused as `too-deep` with its location.
#[test]
fn deep_nesting_is_refused_on_a_small_stack() {
    for depth in [5, 31, 33, 700, 10_000, 100_000] {
        let parens = with_f(&format!("{}25{}", "(".repeat(depth), ")".repeat(depth)));
        let mut m = "25".to_string();
        for _ in 0..depth.min(20_000) {
            m = format!("match f16 {{ f16 => {m}, _ => 1 }}");
        }
        let matches = with_f(&m);
        let ones = vec!["1"; depth].join(" + ");
        let sum = with_f(&format!("24 + {ones} - {depth}"));
        let fors = format!(
            "arch t\nimport std\npipeline p() {{\n{}let x = 0\n{}result x\n}}\n",
            "for i in 0..1 {\n".repeat(depth),
            "}\n".repeat(depth)
        );
        for (what, text) in [
            ("parens", parens),
            ("match", matches),
            ("sum", sum),
            ("for", fors),
        ] {
            match compile_on_small_stack(what, text) {
                Ok(_) => assert!(depth <= 200, "{what} {depth} compiled"),
                Err((codes, rendered)) => {
                    if depth > 32 || what == "sum" && depth > 200 {
                        assert!(
                            codes.contains(&"too-deep".to_string()),
                            "{what} {depth}: {rendered}"
                        );
                        assert!(
                            rendered.contains(&format!("{what}:")),
                            "{what} {depth}: no location: {rendered}"
                        );
                    }
                }
            }
        }
    }
    // a flat sum of 200 terms is an ordinary expression
    assert_eq!(
        compile_on_small_stack(
            "sum",
            with_f(&format!("{} - 175", vec!["1"; 200].join(" + ")))
        ),
        Ok(1)
    );
}

/// Composed instructions that run composed instructions, twelve deep: the checker says
/// so at the run (`too-deep`), not the validator as its own bug (`invalid-ir`).
#[test]
fn deeply_composed_instructions_are_a_located_error() {
    let mut s = String::from(
        "arch t\nimport std\ninstruction i0 {\n shape 1 x 1 x 4\n types a = f16, b = f16, c = f32, d = f32\n uses t_fdpa(F = 25, L = 4, e_zero = -133)\n}\npipeline wrap(inner) {\n let d = run inner over all k with c = c\n result d\n}\n",
    );
    for i in 1..=12 {
        s += &format!(
            "instruction i{i} {{\n shape 1 x 1 x 4\n types a = f16, b = f16, c = f32, d = f32\n uses wrap(inner = \"i{}\")\n}}\n",
            i - 1
        );
    }
    let (codes, rendered) = compile_on_small_stack("nest.mma", s).unwrap_err();
    assert!(codes.contains(&"too-deep".to_string()), "{rendered}");
    assert!(!codes.contains(&"invalid-ir".to_string()), "{rendered}");
    assert!(
        rendered.contains("this run would nest more than 8"),
        "{rendered}"
    );
}

/// A diagnostic far along a long line (past column 65,535, where miette's padding
/// panics) is rendered with its location in the message and no snippet.
#[test]
fn diagnostics_on_very_long_lines_render() {
    let text = with_f(&format!("{}unknown_name", " ".repeat(70_000)));
    let (codes, rendered) = compile_on_small_stack("long.mma", text).unwrap_err();
    assert_eq!(codes, ["unknown-name"]);
    assert!(
        rendered.contains("(at long.mma:6:"),
        "{}",
        &rendered[..rendered.len().min(500)]
    );
    assert!(rendered.len() < 2000, "the long line is not shown");
}

/// Thousands of errors render the first fifty and a count, not megabytes.
#[test]
fn many_errors_render_a_bounded_report() {
    let args: Vec<String> = (0..5000).map(|_| "F = 25".to_string()).collect();
    let text = format!(
        "arch t\nimport std\ninstruction x {{\n    shape 1 x 1 x 16\n    types a = f16, b = f16, c = f32, d = f32\n    uses t_fdpa({}, L = 16, e_zero = -133)\n}}\n",
        args.join(", ")
    );
    let (codes, rendered) = compile_on_small_stack("dup.mma", text).unwrap_err();
    assert!(codes.len() > 1000, "{}", codes.len());
    assert!(rendered.contains("more errors, not shown"), "no count");
    assert!(rendered.len() < 200_000, "{} bytes", rendered.len());
}

/// Did-you-mean skips names far longer than any identifier (its distance is quadratic in
/// the name's length); ordinary misspellings are still suggested.
#[test]
fn did_you_mean_skips_names_too_long_to_be_misspellings() {
    use mmac_compiler::diagnostic::{MAX_SUGGESTED_NAME, closest};
    let long = "x".repeat(MAX_SUGGESTED_NAME + 100);
    let near = format!("{long}y");
    assert_eq!(closest(&near, [long.as_str()]), None);
    assert_eq!(
        closest("t_fdpb", ["t_fdpa", "tr_fdpa"]),
        Some("t_fdpa".into())
    );
    // a name of 36,000 characters among many candidates
    let huge = "z".repeat(36_000);
    let names: Vec<String> = (0..1000).map(|i| format!("name{i}")).collect();
    assert_eq!(closest(&huge, names.iter().map(|s| s.as_str())), None);
}

/// Old Mac line ends (CR only): a `//` comment ends at the CR, so the file checks as the
/// same spec as with LF, and diagnostics count CR-ended lines.
#[test]
fn carriage_return_line_ends_end_comments() {
    let lf = "arch t\nimport std\n// a comment\ninstruction x {\n    shape 1 x 1 x 16\n    types a = f16, b = f16, c = f32, d = f32\n    uses t_fdpa(F = 25, L = 16, e_zero = -133)\n}\n";
    let cr = lf.replace('\n', "\r");
    let a = mmac_compiler::compile("lf.mma", lf).unwrap();
    let b = mmac_compiler::compile("cr.mma", &cr).unwrap();
    assert_eq!(b.spec().instructions.len(), 1);
    assert_eq!(
        a.spec().instructions[0].arithmetic,
        b.spec().instructions[0].arithmetic
    );
    let broken = cr.replace("F = 25", "F = nope");
    let d = mmac_compiler::compile("cr.mma", &broken).unwrap_err();
    assert!(d.short().starts_with("cr.mma:7:"), "{}", d.short());
}

/// Integer extremes: `i64::MIN`, `i64::MAX`, -1, 0, and shifts and powers past 63, the
/// ones that break unchecked arithmetic (`MIN / -1`, `-MIN`) weighted up.
const EXTREME_ATOMS: &[&str] = &[
    "(0 - 9223372036854775807 - 1)",
    "(0 - 9223372036854775807 - 1)",
    "(0 - 9223372036854775807 - 1)",
    "(0 - 9223372036854775807 - 1)",
    "9223372036854775807",
    "9223372036854775807",
    "99999999999999999999",
    "-1",
    "-1",
    "-1",
    "0",
    "0",
    "1",
    "2",
    "8",
    "63",
    "64",
    "65",
    "-64",
    "2^62",
    "2^63",
    "2^64",
    "(0 - 2^63)",
    "4096",
    "-133",
];

/// A random expression at the integer extremes: atoms combined with every operator,
/// negated, nested a few levels.
fn extreme_expression(rng: &mut Rng, depth: usize) -> String {
    if depth == 0 || rng.below(3) == 0 {
        return EXTREME_ATOMS[rng.below(EXTREME_ATOMS.len())].to_string();
    }
    let (l, r) = (
        extreme_expression(rng, depth - 1),
        extreme_expression(rng, depth - 1),
    );
    match rng.below(7) {
        0 => format!("-({l})"),
        1 => format!("({l}) + ({r})"),
        2 => format!("({l}) - ({r})"),
        3 => format!("({l}) * ({r})"),
        4 => format!("({l}) / ({r})"),
        5 => format!("({l}) ^ ({r})"),
        _ => format!("match {l} {{ 0 => {r}, _ => {l} }}"),
    }
}

/// Every place an expression can stand, as `{E}` in one spec: format fields, pipeline
/// parameter defaults, every stage parameter, shapes, scale blocks, `for` ranges and
/// their steps, composed runs' k ranges and patterns, and the arguments of a `uses`.
const EXPRESSION_PLACES: &str = r#"arch extremes "expressions at the integer extremes"
import std
format fx { exponent = {E}, mantissa = {E}, bias = {E}, storage = {E}, ignore_low = {E} }
format ix { integer = {E}, signed = true }
pipeline fused_x(F, L = {E}, Z = {E}) {
    chain every {E} bytes
    multiply exact, overflow at 2^{E}
    group {E} products exact as g
    zero exponent {E} for products
    align products.even to max exponent keep {E} bits round toward_zero as even
    align products.odd to exponent {E} keep F bits round down as odd
    align even keep {E} bits round up, odd keep {E} bits round down drop below {E}, g keep {E} bits round toward_zero, c keep {E} bits round down to max exponent
    normalize range f32 precision {E} round down
    normalize to out precision {E} round nearest_even overflow saturate
    nan canonical
}
pipeline seq_x(P = {E}) {
    multiply round to f32 nearest_even
    add pairwise groups of {E} in f32 round nearest_even
    accumulate in f32 round nearest_even
}
pipeline composed_x(inner) {
    let part = 0
    for j in {E} .. {E} step {E} {
        let part = run inner over k in {E} .. {E} step {E} and k mod {E} in [{E}, {E}] with c = part
    }
    result part
}
instruction fused.{N} {
    for N in {E} .. {E} step {E}
    shape {E} x {E} x {E}
    types a = f16, b = f16, c = f32, d = f32
    scale ue8m0 block {E}
    uses fused_x(F = {E}, L = {E}, Z = match N { {E} => {E}, _ => {E} })
}
instruction seq.x {
    shape 16 x 8 x {E}
    types a = f16, b = f16, c = f32, d = f32
    uses seq_x(P = {E})
}
instruction int.x {
    shape 16 x 8 x {E}
    types a = ix, b = s8, c = s32, d = s32
    uses int_mma()
}
instruction fmt.x {
    shape 16 x 8 x 16
    types a = fx, b = fx, c = f32, d = f32
    uses t_fdpa(F = {E}, L = {E}, e_zero = {E}, P = {E})
}
instruction composed.x {
    shape 16 x 8 x {E}
    types a = f16, b = f16, c = f32, d = f32
    uses composed_x(inner = "seq.x")
}
"#;

/// Expressions at the integer extremes in every place an expression can stand: each
/// spec is refused with located errors (or checks), never a panic, in debug and release
/// builds alike (a debug build panics on an unchecked overflow, a release build wraps).
/// `i64::MIN / -1` panicked the checker, `-(i64::MIN)` wrapped.
#[test]
fn expressions_at_the_integer_extremes_are_refused_with_located_errors() {
    let mut rng = Rng::new(0xe7e7_e5e5);
    let rounds: usize = std::env::var("MMAC_FUZZ_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(400, |r: usize| r / 4);
    let places = EXPRESSION_PLACES.matches("{E}").count();
    assert!(places > 50, "{places}");
    let mut located = 0;
    for round in 0..rounds {
        // every place extreme (half the rounds), or one place extreme and the others
        // ordinary (so that the checker gets past the other places to it)
        let focus = if rng.below(2) == 0 {
            places
        } else {
            rng.below(places)
        };
        let mut text = String::new();
        let mut rest = EXPRESSION_PLACES;
        let mut i = 0;
        while let Some(at) = rest.find("{E}") {
            text.push_str(&rest[..at]);
            let e = if focus == places || i == focus {
                extreme_expression(&mut rng, 3)
            } else {
                ["4", "8", "16", "1", "2", "0"][rng.below(6)].to_string()
            };
            text.push_str(&e);
            rest = &rest[at + 3..];
            i += 1;
        }
        text.push_str(rest);
        let r = catch_unwind(AssertUnwindSafe(|| {
            mmac_compiler::compile("extremes.mma", &text)
                .map(|_| ())
                .map_err(|d| {
                    let short = d.short();
                    let _ = d.render_plain(100);
                    short
                })
        }));
        match r {
            Ok(Ok(())) => {}
            Ok(Err(short)) => {
                // every error names its line and column
                assert!(
                    short.lines().all(
                        |l| l.starts_with("extremes.mma:") || l.starts_with("std/prelude.mma:")
                    ),
                    "round {round}: an error without its place:\n{short}"
                );
                located += 1;
            }
            Err(_) => panic!("the checker panicked on round {round}:\n-----\n{text}\n-----"),
        }
    }
    assert!(located > rounds / 2, "{located} of {rounds} refused");
}
