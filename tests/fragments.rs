//! Warp fragments: `warp_mma` on register images equals `mma` on the matrices the
//! fragments hold (the interpreter, on matrices read out of the registers by this test's
//! own decoder) for every instruction with a layout; `mmac layout` as text and JSON, and
//! its error for an instruction without a layout.

mod support;

use support::{mmac, mmac_ok, stderr, stdout};

use mmac_compiler::engine::{Choice, Engine};
use mmac_compiler::random::Rng;
use mmac_runtime::fragments::{self, Fragment, Library};
use mmac_runtime::gemm::{self, Problem};
use mmac_runtime::matrix::Matrix;
use mmac_runtime::specs;
use std::collections::BTreeSet;

/// Where a slot's register starts in an image: this test's own reading of the register
/// image, independent of `Fragment::unpack`.
fn word_at(f: &Fragment, lane: usize, register: usize) -> usize {
    lane * f.words() + register * (f.container.max(32) as usize / 32)
}

fn mask(width: u32) -> u64 {
    if width == 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// Words of an element of an operand in memory (whose image is its matrix, column by
/// column: element (r, c) at c * rows + r).
fn per_element(f: &Fragment) -> usize {
    f.container.max(32) as usize / 32
}

/// The matrices an image holds, one per set (the first lane holding an element gives it).
fn decode(f: &Fragment, image: &[u32]) -> Vec<Matrix> {
    if f.memory.is_some() {
        let per = per_element(f);
        let mut m = Matrix::filled(f.rows, f.cols, 0);
        for (i, x) in m.data.iter_mut().enumerate() {
            let at = ((i % f.cols) * f.rows + i / f.cols) * per;
            *x = image[at] as u64
                | if per == 2 {
                    (image[at + 1] as u64) << 32
                } else {
                    0
                };
        }
        return vec![m];
    }
    assert_eq!(image.len(), f.lanes * f.words());
    let mut m = vec![Matrix::filled(f.rows, f.cols, u64::MAX); f.sets];
    for s in &f.slots {
        let w = word_at(f, s.lane, s.register);
        let reg = if f.container == 64 {
            image[w] as u64 | (image[w + 1] as u64) << 32
        } else {
            image[w] as u64
        };
        let cell = &mut m[s.set].data[s.row * f.cols + s.col];
        if *cell == u64::MAX {
            *cell = (reg >> s.bits.0) & mask(f.width);
        }
    }
    m
}

/// `background` with every slot's bits replaced by its element of `m` (one matrix per
/// set), as this test places them.
fn encode(f: &Fragment, m: &[Matrix], mut background: Vec<u32>) -> Vec<u32> {
    if f.memory.is_some() {
        let per = per_element(f);
        let mut image = vec![0u32; f.rows * f.cols * per];
        for (i, &v) in m[0].data.iter().enumerate() {
            let at = ((i % f.cols) * f.rows + i / f.cols) * per;
            image[at] = v as u32;
            if per == 2 {
                image[at + 1] = (v >> 32) as u32;
            }
        }
        return image;
    }
    assert_eq!(background.len(), f.lanes * f.words());
    for s in &f.slots {
        let w = word_at(f, s.lane, s.register);
        let v = m[s.set].data[s.row * f.cols + s.col] & mask(f.width);
        let keep = !(mask(f.width) << s.bits.0);
        if f.container == 64 {
            let reg =
                (background[w] as u64 | (background[w + 1] as u64) << 32) & keep | v << s.bits.0;
            background[w] = reg as u32;
            background[w + 1] = (reg >> 32) as u32;
        } else {
            background[w] = (background[w] as u64 & keep | v << s.bits.0) as u32;
        }
    }
    background
}

/// Matrices of random finite encodings of `format` (so that D is not all NaN), or of
/// random bit patterns, one per set.
fn matrices(
    f: &Fragment,
    format: &mmac_compiler::format::Format,
    finite: bool,
    rng: &mut Rng,
) -> Vec<Matrix> {
    (0..f.sets)
        .map(|_| {
            let mut m = Matrix::filled(f.rows, f.cols, 0);
            for x in &mut m.data {
                *x = if finite {
                    rng.finite(format)
                } else {
                    rng.next_u64() & mask(f.width)
                };
            }
            m
        })
        .collect()
}

fn random_words(f: &Fragment, rng: &mut Rng) -> Vec<u32> {
    (0..f.lanes * f.words())
        .map(|_| rng.next_u64() as u32)
        .collect()
}

/// A sparse instruction's stored-element columns (one matrix per set) and the metadata
/// fields that give them.
fn sparse_meta(
    inst: &mmac_compiler::ir::Instruction,
    layout: &fragments::Layout,
    f: &Fragment,
    rng: &mut Rng,
) -> (Vec<Matrix>, Vec<Matrix>) {
    let (s, m) = (inst.sparsity.unwrap(), layout.meta.as_ref().unwrap());
    let (k, span) = (inst.columns(), s.span() as u64);
    let mut positions = vec![];
    let mut fields = vec![];
    for _ in 0..f.sets {
        let mut p = Matrix::filled(f.rows, inst.stored(), 0);
        let mut e = Matrix::filled(f.rows, f.cols, 0);
        for r in 0..f.rows {
            let row = mmac_runtime::sparse::random_positions(&s, k, rng);
            for (j, &x) in row.iter().enumerate() {
                p.data[r * inst.stored() + j] = x;
                if j % m.unit == 0 {
                    e.data[r * f.cols + j / m.unit] = m.codes[(x % span) as usize / m.unit];
                }
            }
        }
        positions.push(p);
        fields.push(e);
    }
    (positions, fields)
}

/// One random draw of every operand of `inst` through its layout: `warp_mma` on the
/// images against `gemm` on the matrices this test put in them, set by set (the
/// interpreter; on the JIT the same bits but for NaN payloads the spec leaves open).
fn check_warp(
    jit: &Engine,
    interp: &Engine,
    layout: &fragments::Layout,
    finite: bool,
    rng: &mut Rng,
) {
    let inst = interp.checked().instruction();
    let ar = &inst.arithmetic;
    let pick = |n: usize, rng: &mut Rng| (rng.next_u64() % n.max(1) as u64) as usize;
    let count = |family: Option<&fragments::Family>, name: &str| {
        family.map_or(1, |f| {
            f.selectors
                .iter()
                .find(|(n, _)| n == name)
                .map_or(1, |x| x.1)
        })
    };
    let meta_family = layout.meta.as_ref().map(|m| &*m.family);
    let scales = layout.scales.as_ref();
    let sel = fragments::Selectors {
        sparsity: pick(count(meta_family, "selector"), rng),
        byte_id_a: pick(count(scales.map(|s| &*s[0]), "byte_id"), rng),
        thread_id_a: pick(count(scales.map(|s| &*s[0]), "thread_id"), rng),
        byte_id_b: pick(count(scales.map(|s| &*s[1]), "byte_id"), rng),
        thread_id_b: pick(count(scales.map(|s| &*s[1]), "thread_id"), rng),
    };
    let extras = layout.extras(&sel).unwrap();
    let extra = |n: &str| extras.iter().find(|(x, _)| *x == n).map(|(_, f)| f);
    let [a, b, c] = [(&layout.a, &ar.a), (&layout.b, &ar.b), (&layout.c, &ar.c)]
        .map(|(f, format)| matrices(f, format, finite, rng));
    let image = |f: &Fragment, m: &[Matrix], rng: &mut Rng| encode(f, m, random_words(f, rng));
    let (ia, ib, ic) = (
        image(&layout.a, &a, rng),
        image(&layout.b, &b, rng),
        image(&layout.c, &c, rng),
    );
    let (positions, imeta) = match extra("meta") {
        Some(f) => {
            let (p, e) = sparse_meta(inst, layout, f, rng);
            (Some(p), Some(image(f, &e, rng)))
        }
        None => (None, None),
    };
    let scale = |n: &str, rng: &mut Rng| {
        extra(n).map(|f| {
            let m = matrices(f, &ar.scale.as_ref().unwrap().format, true, rng);
            let i = image(f, &m, rng);
            (m, i)
        })
    };
    let (sa, sb) = (scale("sa", rng), scale("sb", rng));
    let inputs = fragments::WarpInputs {
        a: &ia,
        b: &ib,
        c: &ic,
        meta: imeta.as_deref(),
        sa: sa.as_ref().map(|x| &x.1[..]),
        sb: sb.as_ref().map(|x| &x.1[..]),
    };
    let d = fragments::warp_mma(interp, layout, &inputs, &sel)
        .unwrap_or_else(|e| panic!("{}: {e}", inst.name));
    let fast = fragments::warp_mma(jit, layout, &inputs, &sel).unwrap();
    let (got, fast) = (decode(&layout.d, &d), decode(&layout.d, &fast));
    for set in 0..layout.d.sets {
        let problem = Problem {
            a: a[set].clone(),
            b: b[set].clone(),
            c: Some(c[set].clone()),
            sa: sa.as_ref().map(|x| x.0[set].clone()),
            sb: sb.as_ref().map(|x| x.0[set].clone()),
            meta: positions.as_ref().map(|p| p[set].clone()),
        };
        gemm::check_shapes(inst, &problem, true).unwrap();
        let want = gemm::gemm(interp, &problem, &|_| {}).unwrap();
        assert_eq!(got[set].data, want.data, "{} set {set} {sel:?}", inst.name);
        for (x, y) in fast[set].data.iter().zip(&want.data) {
            let both_nan = ar.d.decode(*x).is_nan() && ar.d.decode(*y).is_nan();
            assert!(x == y || both_nan, "{} (JIT): {x:#x} vs {y:#x}", inst.name);
        }
    }
    // the round trip, for every operand
    for (f, image) in [
        (&layout.a, &ia),
        (&layout.b, &ib),
        (&layout.c, &ic),
        (&layout.d, &d),
    ] {
        let m = f.unpack(image, "x").unwrap();
        let again = f.pack(&m, "x").unwrap();
        assert_eq!(f.unpack(&again, "x").unwrap().len(), m.len());
        assert_eq!(
            decode(f, &again),
            decode(f, image),
            "{}: `{}`",
            inst.name,
            f.name
        );
    }
}

#[test]
fn warp_mma_equals_mma_on_the_matrices_the_fragments_hold() {
    let lib = Library::builtin().unwrap();
    let mut rng = Rng::new(27);
    let mut shapes = BTreeSet::new();
    let mut tested = 0;
    let mut in_memory = 0;
    for file in [
        "volta",
        "turing",
        "ampere",
        "ada",
        "hopper",
        "blackwell",
        "rtx_blackwell",
        "cdna1",
        "cdna2",
        "cdna3",
        "rdna3",
        "rdna4",
    ] {
        let path = support::root().join(format!("specs/{file}.mma"));
        let spec = specs::load_file(&path).unwrap_or_else(|e| panic!("{file}: {e:?}"));
        for checked in spec.instructions() {
            let inst = checked.instruction();
            let Ok(layout) = lib.find_for(&spec.spec().arch, inst) else {
                continue;
            };
            if let Some(memory) = &layout.b.memory {
                // wgmma: B lies in shared memory, and warp_mma takes it as its matrix; a
                // register image in its place is refused, naming where B lies
                let (a, c) = (
                    vec![0; layout.a.image_words()],
                    vec![0; layout.c.image_words()],
                );
                let registers = vec![0; layout.b.image_words() + 1];
                let e = fragments::warp_mma(
                    &Engine::interpreter(checked),
                    &layout,
                    &fragments::WarpInputs {
                        a: &a,
                        b: &registers,
                        c: &c,
                        ..Default::default()
                    },
                    &Default::default(),
                )
                .unwrap_err();
                assert!(
                    e.to_string().contains(memory.as_str()),
                    "{}: {e}",
                    inst.name
                );
                in_memory += 1;
                // every type at the narrowest, a middle and the widest N (each N's D is
                // its own fragment; the checks of the 64 x 256 D take the longest)
                if ![8, 72, 256].contains(&inst.n) {
                    continue;
                }
            }
            let ar = &inst.arithmetic;
            shapes.insert(format!(
                "{}m{}n{}k{}.{}.{}",
                if inst.sparsity.is_some() { "sp." } else { "" },
                inst.m,
                inst.n,
                inst.columns(),
                ar.a.name,
                ar.c.name
            ));
            tested += 1;
            let jit = Engine::new(checked, Choice::QUICK);
            let interp = Engine::interpreter(checked);
            for finite in [false, true] {
                check_warp(&jit, &interp, &layout, finite, &mut rng);
            }
        }
    }
    eprintln!(
        "{tested} instructions, {} shapes and types; {in_memory} with B in memory",
        shapes.len()
    );
    assert_eq!(in_memory, 32 * 24, "Hopper's wgmma, dense and sparse");
    // every register-held instruction, and Hopper's wgmma at N = 8, 72 and 256
    assert!(tested >= 779 + 24 * 3, "{tested}");
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
        "m64n8k8.tf32.f32",
        "m64n72k16.bf16.f32",
        "m64n256k32.e5m2.f16",
        "sp.m64n8k32.f16.f16",
        "sp.m64n256k16.tf32.f32",
        "sp.m64n72k64.e4m3.f32",
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
    let inputs = fragments::WarpInputs {
        a: &[0; 128],
        b: &[0; 64],
        c: &[0; 127],
        ..Default::default()
    };
    let e = fragments::warp_mma(&engine, &layout, &inputs, &Default::default()).unwrap_err();
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
    assert_eq!(
        v["fragments"],
        serde_json::json!({"a": "m8n8k4.a.f64", "b": "m8n8k4.b.f64", "c": "m8n8k4.cd.f64", "d": "m8n8k4.cd.f64"})
    );
}

/// Several `--instr`: one JSON line each, the spec loaded once, a family's entries on the
/// first line that uses it only; an instruction without a layout is an error line, exit 1.
#[test]
fn layout_json_lines_for_several_instructions() {
    let names = [
        "wgmma.m64n16k16.f32.f16.f16",
        "wgmma.m64n16k16.f32.bf16.bf16",
        "wgmma.sp.m64n16k32.f32.f16.f16",
    ];
    let mut args = vec!["layout", "specs/hopper.mma", "--json"];
    for n in names {
        args.extend(["--instr", n]);
    }
    let out = mmac_ok(&args);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    for (v, name) in lines.iter().zip(names) {
        assert_eq!(v["instruction"], name);
        assert_eq!(v["fragments"]["d"], "wgmma.m64n16.d.32bit");
        assert_eq!(
            v["memory"]["b"].as_str().unwrap().get(..13),
            Some("shared memory")
        );
    }
    // the first line has every family once (C and D share one); the second shares all
    // of them; the third its metadata alone is new (B, in memory, has no entries)
    let keys = |v: &serde_json::Value| {
        v["operands"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(&lines[0]), ["a", "b", "c"]);
    assert_eq!(keys(&lines[1]), ["b"]);
    assert_eq!(keys(&lines[2]), ["b", "meta"]);
    assert_eq!(lines[0]["operands"]["c"].as_array().unwrap().len(), 64 * 16);
    // text needs one instruction; a name without a layout is an error line and exit 1
    let o = mmac(&[
        "layout",
        "specs/hopper.mma",
        "--instr",
        names[0],
        "--instr",
        names[1],
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("several --instr print JSON lines: add --json"));
    let o = mmac(&[
        "layout",
        "specs/examples/dp4.mma",
        "--json",
        "--instr",
        "dp4.f32.e4m3.e4m3.f32",
        "--instr",
        "dp4.f32.e4m3.e4m3.f32",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let first: serde_json::Value =
        serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    assert!(
        first["error"]
            .as_str()
            .unwrap()
            .contains("no fragment layout is known for `dp4.f32.e4m3.e4m3.f32`"),
        "{first}"
    );
}

const TCGEN05: &str = "tcgen05.mma.m64n8k8.kind::tf32.f32.tf32.tf32";
/// An instruction no layout file covers (a hypothetical unit).
const DP4: &str = "dp4.f32.e4m3.e4m3.f32";

#[test]
fn layout_of_an_instruction_without_one_is_an_error() {
    let o = mmac(&["layout", "specs/examples/dp4.mma", "--instr", DP4, "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(stdout(&o), "");
    assert_eq!(
        stderr(&o),
        format!(
            "error: no fragment layout is known for `{DP4}` (docs/layouts.md lists the instructions the layouts cover)\n"
        )
    );
    // an instruction whose operands live in tensor memory: where they are instead
    let o = mmac(&["layout", "specs/blackwell.mma", "--instr", TCGEN05]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with(&format!(
            "error: `{TCGEN05}` has no register fragments: tcgen05.mma reads A from tensor memory or shared memory"
        )),
        "{}",
        stderr(&o)
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

/// `mmac layout` places a sparse instruction's metadata and a block-scaled one's scale
/// factors by the selectors given, and refuses one out of range.
#[test]
fn layout_places_metadata_and_scale_factors_by_their_selectors() {
    let sp = "mma.sp.m16n8k32.f32.f16.f16.f32";
    let out = mmac_ok(&[
        "layout",
        "specs/ampere.mma",
        "--instr",
        sp,
        "--selector",
        "1",
    ]);
    let meta = &out[out.find("\nmeta: 16 x 16 metadata fields").expect(&out)..];
    assert!(meta.contains("selector 1"), "{meta}");
    assert!(
        meta.contains("\n     0  -\n") && meta.contains("\n     2  0,"),
        "{meta}"
    );
    let json = mmac_ok(&["layout", "specs/ampere.mma", "--instr", sp, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        v["metadata"],
        serde_json::json!({"unit": 1, "span": 4, "kept": 2, "codes": [0, 1, 2, 3], "selectors": 2})
    );
    let tf32 = mmac_ok(&[
        "layout",
        "specs/ampere.mma",
        "--instr",
        "mma.sp.m16n8k8.f32.tf32.tf32.f32",
        "--json",
    ]);
    let t: serde_json::Value = serde_json::from_str(&tf32).unwrap();
    assert_eq!(t["metadata"]["codes"], serde_json::json!([4, 14]));
    assert!(
        v["operands"]["meta"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["lane"].as_u64().unwrap() % 4 < 2)
    );
    let scaled = "mma.block_scale.m16n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.f32.ue8m0";
    let rtx = "specs/rtx_blackwell.mma";
    let out = mmac_ok(&["layout", rtx, "--instr", scaled, "--scale-a", "2,1"]);
    let sa = &out[out.find("\nsa: 16 x 1 ue8m0 scale factors").expect(&out)..];
    assert!(
        sa.contains("1 element each") && sa.contains("\n     2  0,0\n"),
        "{sa}"
    );
    // a selector past its values, or one the instruction lacks, is a usage error
    let o = mmac(&["layout", rtx, "--instr", scaled, "--scale-b", "9,0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("byte_id 9 is out of range"),
        "{}",
        stderr(&o)
    );
    let dense = "mma.m16n8k16.f32.f16.f16.f32";
    let ampere = "specs/ampere.mma";
    for (args, says) in [
        (
            &["--instr", dense, "--selector", "1"][..],
            "the instruction is dense",
        ),
        (
            &["--instr", sp, "--selector", "2"],
            "selector 2 is out of range",
        ),
        // several names at once: each line says why
        (
            &[
                "--instr",
                sp,
                "--instr",
                "mma.sp.m16n8k16.f32.f16.f16.f32",
                "--json",
                "--selector",
                "4",
            ],
            "selector 4 is out of range",
        ),
    ] {
        let o = mmac(&[&["layout", ampere][..], args].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let said = stdout(&o) + &stderr(&o);
        let want = if args.contains(&"--json") { 2 } else { 1 };
        assert_eq!(said.matches(says).count(), want, "{args:?}: {said}");
    }
    // an unknown name among several: nothing printed; three selectors: named as such
    for (args, says) in [
        (
            &["--instr", sp, "--instr", "nosuch", "--json"][..],
            "declares no instruction `nosuch`",
        ),
        (
            &["--instr", sp, "--scale-a", "1,2,3"][..],
            "`1,2,3`: give two numbers, BYTE,THREAD",
        ),
    ] {
        let o = mmac(&[&["layout", ampere][..], args].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(stdout(&o), "", "{args:?}");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}
