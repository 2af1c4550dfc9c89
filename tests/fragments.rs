//! Warp fragments: `warp_mma` on register images equals `mma` on the matrices the
//! fragments hold (the interpreter, on matrices read out of the registers by this test's
//! own decoder) for every instruction with a layout; `mmac layout` as text and JSON, and
//! its error for an instruction without a layout.

mod support;

use support::{mmac, mmac_ok, stderr, stdout};

use mmac_compiler::engine::{Choice, Engine};
use mmac_compiler::random::Rng;
use mmac_runtime::fragments::{self, Fragment, LANES, Library};
use mmac_runtime::gemm::{self, Problem};
use mmac_runtime::matrix::Matrix;
use mmac_runtime::specs;
use std::collections::BTreeSet;

/// The 32-bit words of one element (one word, or two for 64 bits, low first): this
/// test's own reading of the register image, independent of `Fragment::unpack`.
fn word_at(f: &Fragment, lane: usize, register: usize) -> usize {
    lane * f.words() + register * (f.width.max(32) as usize / 32)
}

fn decode(f: &Fragment, image: &[u32]) -> Matrix {
    assert_eq!(image.len(), LANES * f.words());
    let mut m = Matrix::filled(f.rows, f.cols, 0);
    for s in &f.slots {
        let w = word_at(f, s.lane, s.register);
        let v = if f.width == 64 {
            image[w] as u64 | (image[w + 1] as u64) << 32
        } else {
            let width = s.bits.1 - s.bits.0;
            (image[w] as u64 >> s.bits.0) & ((1u64 << width) - 1)
        };
        m.data[s.row * f.cols + s.col] = v;
    }
    m
}

/// An image whose every element is a random finite encoding of `format` (so that D is
/// not all NaN), placed by this test's own code.
fn finite_image(f: &Fragment, format: &mmac_compiler::format::Format, rng: &mut Rng) -> Vec<u32> {
    let mut image = vec![0u32; LANES * f.words()];
    for s in &f.slots {
        let v = rng.finite(format);
        let w = word_at(f, s.lane, s.register);
        if f.width == 64 {
            image[w] = v as u32;
            image[w + 1] = (v >> 32) as u32;
        } else {
            image[w] |= (v as u32) << s.bits.0;
        }
    }
    image
}

#[test]
fn warp_mma_equals_mma_on_the_matrices_the_fragments_hold() {
    let lib = Library::builtin().unwrap();
    let mut rng = Rng::new(27);
    let mut shapes = BTreeSet::new();
    let mut tested = 0;
    for file in ["volta", "turing", "ampere", "ada", "hopper"] {
        let path = support::root().join(format!("specs/{file}.mma"));
        let spec = specs::load_file(&path).unwrap_or_else(|e| panic!("{file}: {e:?}"));
        for checked in spec.instructions() {
            let inst = checked.instruction();
            let Ok(layout) = lib.find(inst) else {
                continue;
            };
            let ar = &inst.arithmetic;
            shapes.insert(format!(
                "m{}n{}k{}.{}.{}",
                inst.m, inst.n, ar.k, ar.a.name, ar.c.name
            ));
            tested += 1;
            let jit = Engine::new(checked, Choice::OPTIMISED);
            let interp = Engine::interpreter(checked);
            let raw = |f: &Fragment, rng: &mut Rng| -> Vec<u32> {
                (0..LANES * f.words())
                    .map(|_| rng.next_u64() as u32)
                    .collect()
            };
            let images = [
                [
                    raw(&layout.a, &mut rng),
                    raw(&layout.b, &mut rng),
                    raw(&layout.c, &mut rng),
                ],
                [
                    finite_image(&layout.a, &ar.a, &mut rng),
                    finite_image(&layout.b, &ar.b, &mut rng),
                    finite_image(&layout.c, &ar.c, &mut rng),
                ],
            ];
            for [a, b, c] in images {
                let d = fragments::warp_mma(&interp, &layout, &a, &b, &c)
                    .unwrap_or_else(|e| panic!("{}: {e}", inst.name));
                let problem = Problem {
                    a: decode(&layout.a, &a),
                    b: decode(&layout.b, &b),
                    c: Some(decode(&layout.c, &c)),
                    sa: None,
                    sb: None,
                    meta: None,
                };
                gemm::check_shapes(inst, &problem, true).unwrap();
                let want = gemm::gemm(&interp, &problem, &|_| {}).unwrap();
                assert_eq!(
                    decode(&layout.d, &d).data,
                    want.data,
                    "{file}: {}",
                    inst.name
                );
                // on the JIT (what `mmac mma` runs) the same bits, except the payload of
                // a NaN where the spec does not pin it (`nan ieee`, docs/language.md)
                let fast = fragments::warp_mma(&jit, &layout, &a, &b, &c).unwrap();
                for (x, y) in decode(&layout.d, &fast).data.iter().zip(&want.data) {
                    let both_nan = ar.d.decode(*x).is_nan() && ar.d.decode(*y).is_nan();
                    assert!(
                        x == y || both_nan,
                        "{file}: {} (JIT): {x:#x} vs {y:#x}",
                        inst.name
                    );
                }
                // the round trip, for every operand
                for (f, image) in [
                    (&layout.a, &a),
                    (&layout.b, &b),
                    (&layout.c, &c),
                    (&layout.d, &d),
                ] {
                    let m = f.unpack(image, "x").unwrap();
                    assert_eq!(
                        &f.pack(&m, "x").unwrap(),
                        image,
                        "{}: `{}`",
                        inst.name,
                        f.name
                    );
                }
            }
        }
    }
    eprintln!("{tested} instructions, {} shapes and types", shapes.len());
    assert!(tested >= 235, "{tested}");
    let want = [
        "m16n8k16.bf16.f32",
        "m16n8k16.e4m3.f16",
        "m16n8k16.e5m2.f32",
        "m16n8k16.f16.f16",
        "m16n8k16.f16.f32",
        "m16n8k16.s8.s32",
        "m16n8k16.u8.s32",
        "m16n8k32.e4m3.f16",
        "m16n8k32.e4m3.f32",
        "m16n8k32.s8.s32",
        "m16n8k32.u8.s32",
        "m16n8k32.s4.s32",
        "m16n8k32.u4.s32",
        "m16n8k64.s4.s32",
        "m16n8k64.u4.s32",
        "m16n8k128.b1.s32",
        "m16n8k256.b1.s32",
        "m16n8k4.f64.f64",
        "m16n8k8.f64.f64",
        "m16n8k16.f64.f64",
        "m16n8k4.tf32.f32",
        "m16n8k8.bf16.f32",
        "m16n8k8.f16.f16",
        "m16n8k8.f16.f32",
        "m16n8k8.tf32.f32",
        "m8n8k128.b1.s32",
        "m8n8k16.s8.s32",
        "m8n8k32.s4.s32",
        "m8n8k32.u4.s32",
        "m8n8k4.f64.f64",
    ];
    for s in want {
        assert!(shapes.contains(s), "{s} not covered: {shapes:?}");
    }
}

#[test]
fn warp_mma_refuses_images_of_the_wrong_size() {
    let spec = specs::load_file(&support::root().join("specs/ampere.mma")).unwrap();
    let checked = spec.instruction("mma.m16n8k16.f32.f16.f16.f32").unwrap();
    let layout = Library::builtin()
        .unwrap()
        .find(checked.instruction())
        .unwrap();
    let engine = Engine::interpreter(checked);
    let e = fragments::warp_mma(&engine, &layout, &[0; 128], &[0; 64], &[0; 127]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the register image of c has 127 words, but its fragment `m16n8.cd.f32` takes 128 (32 lanes x 4 words)"
    );
}

#[test]
fn layout_prints_a_lane_by_register_grid_per_operand() {
    let out = mmac_ok(&[
        "layout",
        "specs/ampere.mma",
        "--instr",
        "mma.m16n8k16.f32.f16.f16.f32",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("a: 16 x 16 f16, fragment `m16n8k16.a.16bit`: 4 registers of 32 bits per lane, 2 elements each"), "{out}");
    assert!(
        lines[1].contains("evidence documentation: PTX ISA 9.7.14.5.8"),
        "{out}"
    );
    assert_eq!(
        lines[2],
        "  lane  r0: a0 a1  r1: a2 a3  r2: a4 a5  r3: a6 a7"
    );
    assert_eq!(lines[3], "     0  0,0 0,1    8,0 8,1    0,8 0,9    8,8 8,9");
    assert_eq!(
        lines[34],
        "    31  7,6 7,7    15,6 15,7  7,14 7,15  15,14 15,15"
    );
    for op in ["b: 16 x 8 f16", "c: 16 x 8 f32", "d: 16 x 8 f32"] {
        assert!(out.contains(&format!("\n\n{op}, fragment")), "{op}: {out}");
    }
    let out = mmac_ok(&[
        "layout",
        "specs/ampere.mma",
        "--instr",
        "mma.m8n8k4.f64.f64.f64.f64",
    ]);
    assert!(out.contains("c: 8 x 8 f64, fragment `m8n8k4.cd.f64`: 2 registers of 64 bits per lane, 1 element each"), "{out}");
    assert!(out.contains("\n    31  7,3\n"), "{out}");
}

#[test]
fn layout_json_has_every_element_with_lane_register_bits_row_col() {
    let out = mmac_ok(&[
        "layout",
        "specs/ampere.mma",
        "--instr",
        "mma.m16n8k32.s32.s8.s8.s32",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ops = v["operands"].as_object().unwrap();
    assert_eq!(ops.keys().collect::<Vec<_>>(), ["a", "b", "c", "d"]);
    let a = v["operands"]["a"].as_array().unwrap();
    assert_eq!(a.len(), 16 * 32);
    // lane 31, a15: register 3, the top byte, row groupID + 8, col threadID_in_group * 4 + 3 + 16
    let last = &a[31 * 16 + 15];
    assert_eq!(
        last,
        &serde_json::json!({"lane": 31, "register": 3, "element": 15, "bits": [24, 32], "row": 15, "col": 31})
    );
    assert_eq!(
        a[0],
        serde_json::json!({"lane": 0, "register": 0, "element": 0, "bits": [0, 8], "row": 0, "col": 0})
    );
    let b = v["operands"]["b"].as_array().unwrap();
    assert_eq!(b.len(), 8 * 32);
    assert_eq!(
        b[4 * 8 + 5],
        serde_json::json!({"lane": 4, "register": 1, "element": 5, "bits": [8, 16], "row": 17, "col": 1})
    );
    let d = v["operands"]["d"].as_array().unwrap();
    assert_eq!(
        d[3 * 4 + 2],
        serde_json::json!({"lane": 3, "register": 2, "element": 2, "bits": [0, 32], "row": 8, "col": 6})
    );
    // every (row, col) of every operand exactly once
    for (op, (rows, cols)) in [
        ("a", (16, 32)),
        ("b", (32, 8)),
        ("c", (16, 8)),
        ("d", (16, 8)),
    ] {
        let held: BTreeSet<(u64, u64)> = v["operands"][op]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["row"].as_u64().unwrap(), e["col"].as_u64().unwrap()))
            .collect();
        assert_eq!(held.len(), rows * cols, "{op}");
        assert_eq!(
            v["operands"][op].as_array().unwrap().len(),
            rows * cols,
            "{op}"
        );
    }
    let out = mmac_ok(&[
        "layout",
        "specs/ampere.mma",
        "--instr",
        "mma.m8n8k4.f64.f64.f64.f64",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["operands"]["c"][31 * 2 + 1],
        serde_json::json!({"lane": 31, "register": 1, "element": 1, "bits": [0, 64], "row": 7, "col": 7})
    );
}

#[test]
fn layout_of_an_instruction_without_one_is_an_error() {
    let o = mmac(&[
        "layout",
        "specs/volta.mma",
        "--instr",
        "mma.m8n8k4.f32.f16.f16.f32",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(stdout(&o), "");
    assert_eq!(
        stderr(&o),
        "error: no fragment layout is known for `mma.m8n8k4.f32.f16.f16.f32` (the layouts cover the dense mma.sync shapes listed in docs/layouts.md)\n"
    );
    // a name the spec does not declare: the usage error of every subcommand
    let o = mmac(&[
        "layout",
        "specs/ampere.mma",
        "--instr",
        "mma.m16n8k16.f32.f16.f16.f3",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("did you mean `mma.m16n8k16.f32.f16.f16.f32`?"),
        "{}",
        stderr(&o)
    );
}
