//! The layout data against tables written by hand from the PTX ISA's figures, and the
//! validator's refusals.

use super::*;
use crate::specs::{self, LoadedSpec};
use std::path::Path;

fn spec(file: &str) -> LoadedSpec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../specs")
        .join(file);
    specs::load_file(&path).unwrap_or_else(|e| panic!("{file}: {e:?}"))
}

fn layout(spec: &LoadedSpec, name: &str) -> Layout {
    let inst = spec.instruction(name).expect(name).instruction();
    Library::builtin().unwrap().find(inst).expect(name)
}

/// (lane, element) -> (row, col), written from the figures, not from the formulas.
type Table = &'static [((usize, usize), (usize, usize))];

fn check(f: &Fragment, table: Table) -> Result<(), String> {
    for &((lane, i), want) in table {
        let s = f.slots[lane * f.elements + i];
        assert_eq!((s.lane, s.element), (lane, i), "slot order of `{}`", f.name);
        if (s.row, s.col) != want {
            return Err(format!(
                "`{}`: lane {lane}, element {i} holds ({}, {}), the figure says {want:?}",
                f.name, s.row, s.col
            ));
        }
    }
    Ok(())
}

// 16 x 8 accumulators, f32/s32 (4 registers) and f16 (2): c0 c1 at groupID, c2 c3 at
// groupID + 8, columns threadID_in_group * 2 and + 1
const CD_M16N8: Table = &[
    ((0, 0), (0, 0)),
    ((0, 1), (0, 1)),
    ((0, 2), (8, 0)),
    ((0, 3), (8, 1)),
    ((3, 0), (0, 6)),
    ((3, 3), (8, 7)),
    ((4, 0), (1, 0)),
    ((4, 2), (9, 0)),
    ((31, 0), (7, 6)),
    ((31, 3), (15, 7)),
];

// PTX ISA 9.7.14.5.8, Figure 79 (A, .f16/.bf16) and the B figure beside it
const A_M16N8K16_F16: Table = &[
    ((0, 0), (0, 0)),
    ((0, 1), (0, 1)),
    ((0, 2), (8, 0)),
    ((0, 4), (0, 8)),
    ((0, 7), (8, 9)),
    ((3, 0), (0, 6)),
    ((3, 7), (8, 15)),
    ((4, 0), (1, 0)),
    ((4, 5), (1, 9)),
    ((31, 0), (7, 6)),
    ((31, 3), (15, 7)),
    ((31, 7), (15, 15)),
];
const B_M16N8K16_F16: Table = &[
    ((0, 0), (0, 0)),
    ((0, 1), (1, 0)),
    ((0, 2), (8, 0)),
    ((0, 3), (9, 0)),
    ((3, 0), (6, 0)),
    ((3, 3), (15, 0)),
    ((4, 0), (0, 1)),
    ((31, 0), (6, 7)),
    ((31, 3), (15, 7)),
];

// 9.7.14.5.9, mma.m16n8k32 with .s8/.u8
const A_M16N8K32_S8: Table = &[
    ((0, 0), (0, 0)),
    ((0, 3), (0, 3)),
    ((0, 4), (8, 0)),
    ((0, 8), (0, 16)),
    ((0, 15), (8, 19)),
    ((3, 0), (0, 12)),
    ((3, 15), (8, 31)),
    ((4, 0), (1, 0)),
    ((4, 9), (1, 17)),
    ((31, 0), (7, 12)),
    ((31, 11), (7, 31)),
    ((31, 15), (15, 31)),
];
const B_M16N8K32_S8: Table = &[
    ((0, 0), (0, 0)),
    ((0, 3), (3, 0)),
    ((0, 4), (16, 0)),
    ((0, 7), (19, 0)),
    ((3, 0), (12, 0)),
    ((3, 7), (31, 0)),
    ((4, 0), (0, 1)),
    ((31, 0), (12, 7)),
    ((31, 7), (31, 7)),
];

// 9.7.14.5.7, Figure 72 (A, .tf32) and B .tf32
const A_M16N8K8_TF32: Table = &[
    ((0, 0), (0, 0)),
    ((0, 1), (8, 0)),
    ((0, 2), (0, 4)),
    ((0, 3), (8, 4)),
    ((3, 0), (0, 3)),
    ((3, 3), (8, 7)),
    ((4, 0), (1, 0)),
    ((4, 1), (9, 0)),
    ((31, 0), (7, 3)),
    ((31, 3), (15, 7)),
];
const B_M16N8K8_TF32: Table = &[
    ((0, 0), (0, 0)),
    ((0, 1), (4, 0)),
    ((3, 1), (7, 0)),
    ((4, 0), (0, 1)),
    ((31, 0), (3, 7)),
    ((31, 1), (7, 7)),
];

// 9.7.14.5.2, mma.m8n8k4 with .f64
const A_M8N8K4_F64: Table = &[
    ((0, 0), (0, 0)),
    ((3, 0), (0, 3)),
    ((4, 0), (1, 0)),
    ((31, 0), (7, 3)),
];
const B_M8N8K4_F64: Table = &[
    ((0, 0), (0, 0)),
    ((3, 0), (3, 0)),
    ((4, 0), (0, 1)),
    ((31, 0), (3, 7)),
];
const CD_M8N8K4_F64: Table = &[
    ((0, 0), (0, 0)),
    ((0, 1), (0, 1)),
    ((3, 1), (0, 7)),
    ((4, 0), (1, 0)),
    ((31, 0), (7, 6)),
    ((31, 1), (7, 7)),
];

// 9.7.14.5.4 (Figures 59, 60) and 9.7.14.5.5 (Figures 62, 63): eight 4-bit and
// thirty-two 1-bit elements per register
const A_M8N8K32_S4: Table = &[
    ((0, 0), (0, 0)),
    ((0, 7), (0, 7)),
    ((3, 7), (0, 31)),
    ((4, 0), (1, 0)),
    ((31, 7), (7, 31)),
];
const B_M8N8K32_S4: Table = &[
    ((0, 7), (7, 0)),
    ((3, 0), (24, 0)),
    ((4, 0), (0, 1)),
    ((31, 7), (31, 7)),
];
const A_M8N8K128_B1: Table = &[
    ((0, 31), (0, 31)),
    ((3, 0), (0, 96)),
    ((4, 0), (1, 0)),
    ((31, 31), (7, 127)),
];
const B_M8N8K128_B1: Table = &[
    ((0, 31), (31, 0)),
    ((3, 0), (96, 0)),
    ((4, 0), (0, 1)),
    ((31, 31), (127, 7)),
];
const CD_M8N8_S32: Table = &[
    ((0, 1), (0, 1)),
    ((3, 1), (0, 7)),
    ((4, 0), (1, 0)),
    ((31, 1), (7, 7)),
];

// 9.7.14.5, mma.m16n8k32 and mma.m16n8k64 with .u4/.s4 (Figures 93-95 for k64): eight
// 4-bit elements per register; the rows of A step by 8 every eight elements, and k64's
// second half of k (A from a16, B from b8) at + 32
const A_M16N8K32_S4: Table = &[
    ((0, 0), (0, 0)),
    ((0, 7), (0, 7)),
    ((0, 8), (8, 0)),
    ((0, 15), (8, 7)),
    ((3, 0), (0, 24)),
    ((3, 15), (8, 31)),
    ((4, 0), (1, 0)),
    ((31, 0), (7, 24)),
    ((31, 15), (15, 31)),
];
const B_M16N8K32_S4: Table = &[
    ((0, 0), (0, 0)),
    ((0, 7), (7, 0)),
    ((3, 0), (24, 0)),
    ((4, 0), (0, 1)),
    ((31, 7), (31, 7)),
];
const A_M16N8K64_S4: Table = &[
    ((0, 0), (0, 0)),
    ((0, 8), (8, 0)),
    ((0, 16), (0, 32)),
    ((0, 24), (8, 32)),
    ((0, 31), (8, 39)),
    ((3, 7), (0, 31)),
    ((3, 31), (8, 63)),
    ((4, 0), (1, 0)),
    ((31, 16), (7, 56)),
    ((31, 31), (15, 63)),
];
const B_M16N8K64_S4: Table = &[
    ((0, 0), (0, 0)),
    ((0, 8), (32, 0)),
    ((0, 15), (39, 0)),
    ((3, 7), (31, 0)),
    ((3, 15), (63, 0)),
    ((4, 0), (0, 1)),
    ((31, 15), (63, 7)),
];
// 9.7.14.5.12 (Figures 97, 98) and 9.7.14.5.13: thirty-two 1-bit elements per register;
// A's rows step by 8 every 32 elements, k256's second half of k (A from a64, B from b32)
// at + 128
const A_M16N8K128_B1: Table = &[
    ((0, 0), (0, 0)),
    ((0, 31), (0, 31)),
    ((0, 32), (8, 0)),
    ((0, 63), (8, 31)),
    ((3, 0), (0, 96)),
    ((3, 63), (8, 127)),
    ((4, 0), (1, 0)),
    ((31, 63), (15, 127)),
];
const B_M16N8K128_B1: Table = &[
    ((0, 31), (31, 0)),
    ((3, 0), (96, 0)),
    ((4, 0), (0, 1)),
    ((31, 31), (127, 7)),
];
const A_M16N8K256_B1: Table = &[
    ((0, 0), (0, 0)),
    ((0, 32), (8, 0)),
    ((0, 64), (0, 128)),
    ((0, 96), (8, 128)),
    ((0, 127), (8, 159)),
    ((3, 31), (0, 127)),
    ((3, 127), (8, 255)),
    ((4, 0), (1, 0)),
    ((31, 64), (7, 224)),
    ((31, 127), (15, 255)),
];
const B_M16N8K256_B1: Table = &[
    ((0, 0), (0, 0)),
    ((0, 32), (128, 0)),
    ((0, 63), (159, 0)),
    ((3, 31), (127, 0)),
    ((3, 63), (255, 0)),
    ((4, 0), (0, 1)),
    ((31, 63), (255, 7)),
];

// 9.7.14.5.6-.8, .f64 (sm_90): one 64-bit register per element; A as .tf32's at k4 and k8
// (Figure 73), Figure 80 at k16 (a0..a7: rows groupID, + 8 alternating, columns
// threadID_in_group + 4 per pair); C/D as the .f32 accumulators
const A_M16N8K4_F64: Table = &[
    ((0, 0), (0, 0)),
    ((0, 1), (8, 0)),
    ((3, 0), (0, 3)),
    ((4, 1), (9, 0)),
    ((31, 1), (15, 3)),
];
const B_M16N8K4_F64: Table = &[
    ((0, 0), (0, 0)),
    ((3, 0), (3, 0)),
    ((4, 0), (0, 1)),
    ((31, 0), (3, 7)),
];
const A_M16N8K8_F64: Table = &[
    ((0, 0), (0, 0)),
    ((0, 1), (8, 0)),
    ((0, 2), (0, 4)),
    ((0, 3), (8, 4)),
    ((3, 0), (0, 3)),
    ((4, 0), (1, 0)),
    ((31, 3), (15, 7)),
];
const B_M16N8K8_F64: Table = &[
    ((0, 1), (4, 0)),
    ((3, 0), (3, 0)),
    ((4, 0), (0, 1)),
    ((31, 1), (7, 7)),
];
const A_M16N8K16_F64: Table = &[
    ((0, 0), (0, 0)),
    ((0, 1), (8, 0)),
    ((0, 2), (0, 4)),
    ((0, 6), (0, 12)),
    ((0, 7), (8, 12)),
    ((3, 0), (0, 3)),
    ((3, 7), (8, 15)),
    ((4, 0), (1, 0)),
    ((31, 7), (15, 15)),
];
const B_M16N8K16_F64: Table = &[
    ((0, 1), (4, 0)),
    ((0, 3), (12, 0)),
    ((3, 0), (3, 0)),
    ((4, 0), (0, 1)),
    ((31, 3), (15, 7)),
];

fn check_all(l: &Layout, tables: [Table; 4]) {
    for ((_, f), table) in l.operands().into_iter().zip(tables) {
        check(f, table).unwrap();
    }
}

#[test]
fn layouts_match_the_figures_of_the_ptx_isa() {
    let ampere = spec("ampere.mma");
    let ada = spec("ada.mma");
    for name in [
        "mma.m16n8k16.f32.f16.f16.f32",
        "mma.m16n8k16.f32.bf16.bf16.f32",
        "mma.m16n8k16.f16.f16.f16.f16",
    ] {
        let l = layout(&ampere, name);
        check_all(&l, [A_M16N8K16_F16, B_M16N8K16_F16, CD_M16N8, CD_M16N8]);
    }
    for name in [
        "mma.m16n8k32.s32.s8.s8.s32",
        "mma.m16n8k32.satfinite.s32.u8.s8.s32",
    ] {
        let l = layout(&ampere, name);
        check_all(&l, [A_M16N8K32_S8, B_M16N8K32_S8, CD_M16N8, CD_M16N8]);
    }
    // FP8 shares the 8-bit fragments (9.7.14.5.9 names .e4m3/.e5m2 beside .s8/.u8)
    let l = layout(&ada, "mma.m16n8k32.f32.e4m3.e5m2.f32");
    check_all(&l, [A_M16N8K32_S8, B_M16N8K32_S8, CD_M16N8, CD_M16N8]);
    let l = layout(&ampere, "mma.m16n8k8.f32.tf32.tf32.f32");
    check_all(&l, [A_M16N8K8_TF32, B_M16N8K8_TF32, CD_M16N8, CD_M16N8]);
    let l = layout(&ampere, "mma.m8n8k4.f64.f64.f64.f64");
    check_all(
        &l,
        [A_M8N8K4_F64, B_M8N8K4_F64, CD_M8N8K4_F64, CD_M8N8K4_F64],
    );
    let turing = spec("turing.mma");
    let l = layout(&turing, "mma.m8n8k32.satfinite.s32.u4.s4.s32");
    check_all(&l, [A_M8N8K32_S4, B_M8N8K32_S4, CD_M8N8_S32, CD_M8N8_S32]);
    let l = layout(&turing, "mma.m8n8k128.s32.b1.b1.s32.xor.popc");
    check_all(&l, [A_M8N8K128_B1, B_M8N8K128_B1, CD_M8N8_S32, CD_M8N8_S32]);
    assert_eq!(l.a.slots[31 * 32 + 31].bits, (31, 32));
    assert_eq!(l.a.registers, 1);
    // the sub-byte m16n8 shapes (sm_80 on): accumulators as m16n8k32's s32
    for name in [
        "mma.m16n8k32.s32.s4.s4.s32",
        "mma.m16n8k32.satfinite.s32.u4.s4.s32",
    ] {
        let l = layout(&ampere, name);
        check_all(&l, [A_M16N8K32_S4, B_M16N8K32_S4, CD_M16N8, CD_M16N8]);
    }
    for name in [
        "mma.m16n8k64.s32.s4.u4.s32",
        "mma.m16n8k64.satfinite.s32.u4.u4.s32",
    ] {
        let l = layout(&ampere, name);
        check_all(&l, [A_M16N8K64_S4, B_M16N8K64_S4, CD_M16N8, CD_M16N8]);
    }
    let hopper = spec("hopper.mma");
    let l = layout(&hopper, "mma.m16n8k128.s32.b1.b1.s32.and.popc");
    check_all(&l, [A_M16N8K128_B1, B_M16N8K128_B1, CD_M16N8, CD_M16N8]);
    let l = layout(&ampere, "mma.m16n8k256.s32.b1.b1.s32.xor.popc");
    check_all(&l, [A_M16N8K256_B1, B_M16N8K256_B1, CD_M16N8, CD_M16N8]);
    for (name, a, b) in [
        ("mma.m16n8k4.f64.f64.f64.f64", A_M16N8K4_F64, B_M16N8K4_F64),
        ("mma.m16n8k8.f64.f64.f64.f64", A_M16N8K8_F64, B_M16N8K8_F64),
        (
            "mma.m16n8k16.f64.f64.f64.f64",
            A_M16N8K16_F64,
            B_M16N8K16_F64,
        ),
    ] {
        let l = layout(&hopper, name);
        check_all(&l, [a, b, CD_M16N8, CD_M16N8]);
    }
}

#[test]
fn registers_and_bits() {
    let ampere = spec("ampere.mma");
    let slot = |f: &Fragment, lane: usize, i: usize| {
        let s = f.slots[lane * f.elements + i];
        (s.register, s.bits)
    };
    let l = layout(&ampere, "mma.m16n8k16.f32.f16.f16.f32");
    assert_eq!((l.a.registers, l.b.registers, l.c.registers), (4, 2, 4));
    assert_eq!(slot(&l.a, 5, 0), (0, (0, 16)));
    assert_eq!(slot(&l.a, 5, 1), (0, (16, 32)));
    assert_eq!(slot(&l.a, 5, 7), (3, (16, 32)));
    assert_eq!(slot(&l.d, 5, 3), (3, (0, 32)));
    let l = layout(&ampere, "mma.m16n8k16.f16.f16.f16.f16");
    assert_eq!(l.d.registers, 2);
    assert_eq!(slot(&l.d, 9, 3), (1, (16, 32)));
    let l = layout(&ampere, "mma.m16n8k32.s32.s8.s8.s32");
    assert_eq!((l.a.registers, l.b.registers), (4, 2));
    assert_eq!(slot(&l.a, 0, 5), (1, (8, 16)));
    assert_eq!(slot(&l.a, 31, 15), (3, (24, 32)));
    let l = layout(&ampere, "mma.m8n8k4.f64.f64.f64.f64");
    assert_eq!((l.a.registers, l.a.words(), l.c.words()), (1, 2, 4));
    assert_eq!(slot(&l.c, 0, 1), (1, (0, 64)));
    let l = layout(&ampere, "mma.m16n8k32.s32.s4.s4.s32");
    assert_eq!((l.a.registers, l.b.registers, l.c.registers), (2, 1, 4));
    assert_eq!(slot(&l.a, 0, 9), (1, (4, 8)));
    assert_eq!(slot(&l.a, 31, 15), (1, (28, 32)));
    assert_eq!(slot(&l.b, 31, 7), (0, (28, 32)));
    let l = layout(&ampere, "mma.m16n8k64.s32.s4.s4.s32");
    assert_eq!((l.a.registers, l.b.registers), (4, 2));
    assert_eq!(slot(&l.a, 0, 17), (2, (4, 8)));
    assert_eq!(slot(&l.a, 31, 31), (3, (28, 32)));
    assert_eq!(slot(&l.b, 31, 15), (1, (28, 32)));
    let l = layout(&ampere, "mma.m16n8k128.s32.b1.b1.s32.xor.popc");
    assert_eq!((l.a.registers, l.b.registers), (2, 1));
    assert_eq!(slot(&l.a, 0, 33), (1, (1, 2)));
    assert_eq!(slot(&l.a, 31, 63), (1, (31, 32)));
    let l = layout(&ampere, "mma.m16n8k256.s32.b1.b1.s32.xor.popc");
    assert_eq!((l.a.registers, l.b.registers, l.d.registers), (4, 2, 4));
    assert_eq!(slot(&l.a, 0, 65), (2, (1, 2)));
    assert_eq!(slot(&l.a, 31, 127), (3, (31, 32)));
    assert_eq!(slot(&l.b, 31, 63), (1, (31, 32)));
    assert_eq!(slot(&l.d, 31, 3), (3, (0, 32)));
    let hopper = spec("hopper.mma");
    let l = layout(&hopper, "mma.m16n8k16.f64.f64.f64.f64");
    assert_eq!((l.a.registers, l.a.words()), (8, 16));
    assert_eq!((l.b.registers, l.b.words(), l.c.words()), (4, 8, 8));
    assert_eq!(slot(&l.a, 0, 7), (7, (0, 64)));
    assert_eq!(slot(&l.c, 31, 3), (3, (0, 64)));
    let l = layout(&hopper, "mma.m16n8k4.f64.f64.f64.f64");
    assert_eq!((l.a.words(), l.b.words(), l.d.words()), (4, 2, 8));
    assert_eq!(slot(&l.a, 31, 1), (1, (0, 64)));
}

#[test]
fn every_instruction_of_the_layout_shapes_has_a_layout() {
    let lib = Library::builtin().unwrap();
    let mut found = 0;
    for file in [
        "volta.mma",
        "turing.mma",
        "ampere.mma",
        "ada.mma",
        "hopper.mma",
    ] {
        let s = spec(file);
        for c in s.instructions() {
            let inst = c.instruction();
            match lib.find(inst) {
                Ok(_) => found += 1,
                Err(LayoutError::Unknown(_)) => {}
                Err(e) => panic!("{file}: {e}"),
            }
        }
    }
    assert!(found > 50, "{found}");
    // m8n8k4 with .f16 (Volta, Turing): four independent 8 x 8 x 4 MMAs, one per
    // quadpair, every operand in 4 sets
    let s = spec("volta.mma");
    let f16_m8n8k4: Vec<_> = s
        .spec()
        .instructions
        .iter()
        .filter(|i| i.name.starts_with("mma.m8n8k4.") && i.arithmetic.a.name == "f16")
        .collect();
    assert_eq!(f16_m8n8k4.len(), 3);
    for inst in f16_m8n8k4 {
        let l = lib
            .find(inst)
            .unwrap_or_else(|e| panic!("{}: {e}", inst.name));
        for (op, f) in l.operands() {
            assert_eq!(f.sets, 4, "{} {op}", inst.name);
        }
    }
}

#[test]
fn pack_of_unpack_is_the_identity() {
    let ampere = spec("ampere.mma");
    let mut x = 0x9e37_79b9_u32;
    for name in [
        "mma.m16n8k16.f32.f16.f16.f32",
        "mma.m16n8k32.s32.s8.s8.s32",
        "mma.m8n8k4.f64.f64.f64.f64",
        "mma.m16n8k8.f32.tf32.tf32.f32",
    ] {
        let l = layout(&ampere, name);
        for (op, f) in l.operands() {
            let image: Vec<u32> = (0..f.image_words())
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x
                })
                .collect();
            let m = f.unpack(&image, op).unwrap();
            assert_eq!(f.pack(&m, op).unwrap(), image, "{name} {op}");
            assert_eq!(m.len(), 1);
        }
        assert!(matches!(
            l.a.unpack(&[0; 3], "a"),
            Err(LayoutError::Registers(e)) if e.contains("has 3 words")
        ));
    }
}

const SMALL: &str = r#"{"fragments": [
 {"name": "f", "evidence": "test", "rows": 8, "cols": 4, "width": 32, "elements": 1,
  "row": [{"expr": "groupID"}], "col": [{"expr": "threadID_in_group"}]}
], "instructions": [{"names": ["x"], "a": "f", "b": "f", "c": "f", "d": "f"}]}"#;

fn refused(text: &str) -> String {
    match Library::parse("bad.json", &text.replace("\"x\"", "\"y\"")) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_validator_names_file_family_and_fault() {
    // the base text is wrong only in its shapes (a 8 x 4 times b 8 x 4)
    assert!(
        refused(SMALL).contains("do not make one m x n x k"),
        "{}",
        refused(SMALL)
    );
    let e = refused(&SMALL.replace("\"expr\": \"groupID\"", "\"expr\": \"groupID & 3\""));
    assert!(
        e.starts_with(
            "bad.json: fragment `f`: (0, 0) is held twice: by lane 0, element 0 and by lane 16"
        ),
        "{e}"
    );
    let e = refused(&SMALL.replace("\"expr\": \"groupID\"", "\"expr\": \"groupID + 1\""));
    assert!(
        e.contains("lane 28, element 0: (8, 0) is outside the 8 x 4 matrix"),
        "{e}"
    );
    let e = refused(&SMALL.replace("\"width\": 32", "\"width\": 16"));
    assert!(
        e.contains("1 elements of 16 bits do not fill whole 32-bit registers"),
        "{e}"
    );
    let e = refused(&SMALL.replace("\"elements\": 1", "\"elements\": 2"));
    assert!(
        e.contains("8 x 4 elements over 32 lanes is not 2 elements per lane"),
        "{e}"
    );
    let e = refused(&SMALL.replace(
        "[{\"expr\": \"groupID\"}]",
        "[{\"i\": [1], \"expr\": \"groupID\"}]",
    ));
    assert!(e.contains("row: element 1 does not exist"), "{e}");
    let e = refused(&SMALL.replace("\"threadID_in_group\"", "\"threadID\""));
    assert!(e.contains("col `threadID`: unknown name `threadID`"), "{e}");
    let e = refused(&SMALL.replace("\"a\": \"f\"", "\"a\": \"g\""));
    assert!(e.contains("operand a of `y` names no fragment `g`"), "{e}");
    let e = refused(&SMALL.replace("\"rows\": 8", "\"rows\": 18446744073709551615"));
    assert!(e.contains("more than 4096 is not a fragment"), "{e}");
    let e = refused(&SMALL.replace(
        "\"expr\": \"groupID\"",
        "\"expr\": \"0x7fffffffffffffff * 3 + groupID\"",
    ));
    assert!(
        e.contains("lane 0, element 0: (9223372036854775805, 0) is outside the 8 x 4 matrix"),
        "{e}"
    );
    let e = refused("{");
    assert!(e.starts_with("bad.json: "), "{e}");
}

#[test]
fn a_wrong_formula_turns_the_figure_tables_red() {
    // a0/a2 and a1/a3 of the tf32 A fragment swapped: still one element per place, so
    // the validator accepts it, and only the tables from the figures can catch it
    let builtin = BUILTIN_FILES[0].1;
    let text = builtin.replacen(
        "{\"i\": [0, 2], \"expr\": \"groupID\"},\n    {\"i\": [1, 3], \"expr\": \"groupID + 8\"}",
        "{\"i\": [1, 3], \"expr\": \"groupID\"},\n    {\"i\": [0, 2], \"expr\": \"groupID + 8\"}",
        1,
    );
    assert_ne!(text, builtin, "the formula to break was not found");
    let lib = Library::parse("mutated.json", &text).unwrap();
    let f = lib.fragment("m16n8k8.a.tf32").unwrap();
    assert!(check(f, A_M16N8K8_TF32).is_err());
    let f = Library::builtin()
        .unwrap()
        .fragment("m16n8k8.a.tf32")
        .unwrap();
    check(f, A_M16N8K8_TF32).unwrap();
}

#[test]
fn formulas_follow_c_precedence() {
    let v = expr::Vars {
        lane: 13,
        i: 5,
        selectors: &[3],
    };
    let names = ["selector".to_string()];
    let e = |s: &str| expr::Expr::parse(s, &names).unwrap().eval(v);
    assert_eq!(e("threadID_in_group * 2 + (i & 0x1) + 8"), 11);
    assert_eq!(e("lane >> 2"), 3);
    assert_eq!(e("1 + i & 2"), 2);
    assert_eq!(e("%laneid % 4 * 4 + i - 1"), 8);
    assert_eq!(e("selector * 2 + warp"), 6);
    assert_eq!(e("(lane + 64) / 32 + groupID"), 5);
    assert!(expr::Expr::parse("(i", &names).is_err());
    assert!(expr::Expr::parse("i >", &names).is_err());
    assert!(
        expr::Expr::parse("byte_id", &names).unwrap_err().contains(
            "unknown name `byte_id` (lane, groupID, threadID_in_group, warp, i, selector)"
        )
    );
}
