//! AMD's register layouts (specs/layouts/amd.json) against tables written by hand from
//! AMD's own register tables: the `--matrix-layout` tables of AMD's Matrix Instruction
//! Calculator (ROCm/amd_matrix_instruction_calculator, the tool AMD publishes beside the
//! CDNA and RDNA ISA guides) and, for RDNA3/RDNA4, the layouts the GPUOpen WMMA articles
//! and Mesa's cooperative-matrix lowering draw. Each table entry is one cell of such a
//! table: (lane, VGPR, lowest bit) -> (block, row, column), copied from the table, not
//! computed from the formulas of amd.json. Lanes 0, 15, 16, 31, 32 and 63 where they exist.

use mmac_runtime::fragments::{Fragment, Layout, LayoutError, Library};
use mmac_runtime::specs::{self, LoadedSpec};
use std::path::Path;

fn spec(file: &str) -> LoadedSpec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("specs")
        .join(file);
    specs::load_file(&path).unwrap_or_else(|e| panic!("{file}: {e:?}"))
}

fn layout(spec: &LoadedSpec, name: &str) -> Layout {
    let inst = spec.instruction(name).expect(name).instruction();
    Library::builtin().unwrap().find(inst).expect(name)
}

fn family(name: &str) -> Fragment {
    Library::builtin()
        .unwrap()
        .fragment(name)
        .unwrap_or_else(|| panic!("no family `{name}`"))
        .clone()
}

/// (lane, VGPR, lowest bit) -> (block, row, col). A 64-bit element's VGPR is the low one
/// of its pair (v[3:2] is 2). For the sparse index, col is the field: the index of A's
/// stored element it places (two 2-bit fields per 4-bit group of the table, the group's
/// first stored element in the low 2 bits).
type Table = &'static [((usize, usize, u32), (usize, usize, usize))];

fn check(f: &Fragment, table: Table) -> Result<(), String> {
    let per = f.container.max(32) as usize / 32;
    for &((lane, vgpr, lo), want) in table {
        let hits: Vec<_> = f
            .slots
            .iter()
            .filter(|s| s.lane == lane && s.register * per == vgpr && s.bits.0 == lo)
            .collect();
        let [s] = hits[..] else {
            return Err(format!(
                "`{}`: lane {lane}, v{vgpr} bit {lo} holds {} elements",
                f.name,
                hits.len()
            ));
        };
        if (s.set, s.row, s.col) != want {
            return Err(format!(
                "`{}`: lane {lane}, v{vgpr} bit {lo} holds block {} ({}, {}), the table says {want:?}",
                f.name, s.set, s.row, s.col
            ));
        }
    }
    Ok(())
}

fn check_ok(f: &Fragment, table: Table) {
    check(f, table).unwrap_or_else(|e| panic!("{e}"));
}

// ---------------------------------------------------------------- CDNA (wave64)

// v_mfma_f32_16x16x16_f16 (CDNA3; v_mfma_f32_16x16x16f16 of CDNA1/2 alike)
const A_16X16X16_F16: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 0, 16), (0, 0, 1)),
    ((0, 1, 0), (0, 0, 2)),
    ((0, 1, 16), (0, 0, 3)),
    ((15, 0, 0), (0, 15, 0)),
    ((15, 1, 16), (0, 15, 3)),
    ((16, 0, 0), (0, 0, 4)),
    ((16, 1, 16), (0, 0, 7)),
    ((31, 0, 16), (0, 15, 5)),
    ((32, 0, 0), (0, 0, 8)),
    ((32, 1, 16), (0, 0, 11)),
    ((63, 0, 0), (0, 15, 12)),
    ((63, 1, 16), (0, 15, 15)),
];
const B_16X16X16_F16: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 0, 16), (0, 1, 0)),
    ((0, 1, 16), (0, 3, 0)),
    ((15, 0, 0), (0, 0, 15)),
    ((16, 0, 0), (0, 4, 0)),
    ((31, 1, 16), (0, 7, 15)),
    ((32, 0, 16), (0, 9, 0)),
    ((63, 0, 0), (0, 12, 15)),
    ((63, 1, 16), (0, 15, 15)),
];
const CD_16X16_F32: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 1, 0), (0, 1, 0)),
    ((0, 3, 0), (0, 3, 0)),
    ((15, 0, 0), (0, 0, 15)),
    ((16, 0, 0), (0, 4, 0)),
    ((31, 2, 0), (0, 6, 15)),
    ((32, 1, 0), (0, 9, 0)),
    ((63, 0, 0), (0, 12, 15)),
    ((63, 3, 0), (0, 15, 15)),
];

// v_mfma_f32_32x32x8_f16
const A_32X32X8_F16: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 1, 16), (0, 0, 3)),
    ((15, 0, 16), (0, 15, 1)),
    ((16, 0, 0), (0, 16, 0)),
    ((31, 1, 0), (0, 31, 2)),
    ((32, 0, 0), (0, 0, 4)),
    ((63, 0, 0), (0, 31, 4)),
    ((63, 1, 16), (0, 31, 7)),
];
const B_32X32X8_F16: Table = &[
    ((0, 0, 16), (0, 1, 0)),
    ((15, 1, 0), (0, 2, 15)),
    ((16, 0, 0), (0, 0, 16)),
    ((31, 1, 16), (0, 3, 31)),
    ((32, 0, 0), (0, 4, 0)),
    ((63, 1, 16), (0, 7, 31)),
];
const CD_32X32_F32: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 3, 0), (0, 3, 0)),
    ((0, 4, 0), (0, 8, 0)),
    ((0, 8, 0), (0, 16, 0)),
    ((0, 15, 0), (0, 27, 0)),
    ((15, 5, 0), (0, 9, 15)),
    ((16, 12, 0), (0, 24, 16)),
    ((31, 15, 0), (0, 27, 31)),
    ((32, 0, 0), (0, 4, 0)),
    ((32, 4, 0), (0, 12, 0)),
    ((63, 11, 0), (0, 23, 31)),
    ((63, 15, 0), (0, 31, 31)),
];

// v_mfma_f32_32x32x1_2b_f32: block b of A in lanes 32 b .. 32 b + 31, of C in v16b..
const A_32X32X1_2B: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((15, 0, 0), (0, 15, 0)),
    ((16, 0, 0), (0, 16, 0)),
    ((31, 0, 0), (0, 31, 0)),
    ((32, 0, 0), (1, 0, 0)),
    ((63, 0, 0), (1, 31, 0)),
];
const CD_32X32_2B: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 4, 0), (0, 8, 0)),
    ((0, 16, 0), (1, 0, 0)),
    ((0, 20, 0), (1, 8, 0)),
    ((15, 1, 0), (0, 1, 15)),
    ((16, 17, 0), (1, 1, 16)),
    ((32, 0, 0), (0, 4, 0)),
    ((32, 31, 0), (1, 31, 0)),
    ((63, 15, 0), (0, 31, 31)),
    ((63, 31, 0), (1, 31, 31)),
];

// v_mfma_f32_4x4x4_16b_f16: block b in lanes 4 b .. 4 b + 3
const A_4X4X4_16B: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 1, 16), (0, 0, 3)),
    ((15, 0, 0), (3, 3, 0)),
    ((16, 0, 16), (4, 0, 1)),
    ((31, 1, 0), (7, 3, 2)),
    ((32, 0, 0), (8, 0, 0)),
    ((63, 1, 16), (15, 3, 3)),
];
const CD_4X4_16B: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 3, 0), (0, 3, 0)),
    ((15, 0, 0), (3, 0, 3)),
    ((16, 1, 0), (4, 1, 0)),
    ((31, 3, 0), (7, 3, 3)),
    ((32, 0, 0), (8, 0, 0)),
    ((63, 2, 0), (15, 2, 3)),
];

// v_mfma_f64_16x16x4_f64: an f64 in v[1:0], C in v[1:0], v[3:2], v[5:4], v[7:6]
const A_16X16X4_F64: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((15, 0, 0), (0, 15, 0)),
    ((16, 0, 0), (0, 0, 1)),
    ((31, 0, 0), (0, 15, 1)),
    ((32, 0, 0), (0, 0, 2)),
    ((63, 0, 0), (0, 15, 3)),
];
const CD_16X16_F64: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 2, 0), (0, 4, 0)),
    ((0, 6, 0), (0, 12, 0)),
    ((15, 4, 0), (0, 8, 15)),
    ((16, 0, 0), (0, 1, 0)),
    ((31, 6, 0), (0, 13, 15)),
    ((32, 2, 0), (0, 6, 0)),
    ((63, 0, 0), (0, 3, 15)),
    ((63, 6, 0), (0, 15, 15)),
];

#[test]
fn cdna_mfma_layouts_match_the_calculator_tables() {
    let cdna3 = spec("cdna3.mma");
    for name in ["v_mfma_f32_16x16x16_f16", "v_mfma_f32_16x16x16_bf16"] {
        let l = layout(&cdna3, name);
        check_ok(&l.a, A_16X16X16_F16);
        check_ok(&l.b, B_16X16X16_F16);
        check_ok(&l.c, CD_16X16_F32);
        check_ok(&l.d, CD_16X16_F32);
        assert_eq!((l.a.lanes, l.a.registers, l.c.registers), (64, 2, 4));
    }
    // the CDNA1/2 spellings of the same instruction
    for (file, name) in [
        ("cdna1.mma", "v_mfma_f32_16x16x16f16"),
        ("cdna2.mma", "v_mfma_f32_16x16x16bf16_1k"),
    ] {
        let l = layout(&spec(file), name);
        check_ok(&l.a, A_16X16X16_F16);
        check_ok(&l.d, CD_16X16_F32);
    }
    let l = layout(&cdna3, "v_mfma_f32_32x32x8_f16");
    check_ok(&l.a, A_32X32X8_F16);
    check_ok(&l.b, B_32X32X8_F16);
    check_ok(&l.c, CD_32X32_F32);
    assert_eq!(l.c.registers, 16);

    let l = layout(&cdna3, "v_mfma_f32_32x32x1_2b_f32");
    check_ok(&l.a, A_32X32X1_2B);
    check_ok(&l.d, CD_32X32_2B);
    assert_eq!((l.a.sets, l.d.registers), (2, 32));
    let l = layout(&cdna3, "v_mfma_f32_4x4x4_16b_f16");
    check_ok(&l.a, A_4X4X4_16B);
    check_ok(&l.c, CD_4X4_16B);
    assert_eq!(l.c.sets, 16);

    let l = layout(&cdna3, "v_mfma_f64_16x16x4_f64");
    check_ok(&l.a, A_16X16X4_F64);
    check_ok(&l.c, CD_16X16_F64);
    // one f64 in a VGPR pair, low word first: 2 words per lane for A, 8 for C
    assert_eq!((l.a.words(), l.c.words()), (2, 8));
}

// v_smfmac_f32_16x16x32_f16: A holds 16 x 16 stored elements, two per VGPR from one group
// of four columns (the calculator's cell `A[0][4] .. A[0][7]` in lane 0, v1: stored
// elements 2 and 3 of row 0)
const A_SMFMAC_16X16X32_F16: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 0, 16), (0, 0, 1)),
    ((0, 1, 0), (0, 0, 2)),
    ((0, 1, 16), (0, 0, 3)),
    ((15, 1, 0), (0, 15, 2)),
    ((16, 0, 0), (0, 0, 4)),
    ((31, 1, 16), (0, 15, 7)),
    ((32, 0, 0), (0, 0, 8)),
    ((63, 0, 0), (0, 15, 12)),
    ((63, 1, 16), (0, 15, 15)),
];
const B_SMFMAC_16X16X32_F16: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 3, 16), (0, 7, 0)),
    ((15, 2, 0), (0, 4, 15)),
    ((16, 0, 0), (0, 8, 0)),
    ((31, 3, 16), (0, 15, 15)),
    ((32, 0, 0), (0, 16, 0)),
    ((63, 0, 0), (0, 24, 15)),
    ((63, 3, 16), (0, 31, 15)),
];
// its index (SrcC): v0.[3:0] of lane 0 is K[0][0..3], v0.[7:4] K[0][4..7]; lane 16 the
// groups at columns 8 and 12, lane 32 at 16 and 20, lane 63 row 15 at 24 and 28
const INDEX_SMFMAC_16X16X32: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 0, 2), (0, 0, 1)),
    ((0, 0, 4), (0, 0, 2)),
    ((0, 0, 6), (0, 0, 3)),
    ((15, 0, 4), (0, 15, 2)),
    ((16, 0, 0), (0, 0, 4)),
    ((16, 0, 6), (0, 0, 7)),
    ((31, 0, 2), (0, 15, 5)),
    ((32, 0, 0), (0, 0, 8)),
    ((63, 0, 0), (0, 15, 12)),
    ((63, 0, 6), (0, 15, 15)),
];
// v_smfmac_f32_32x32x32_fp8_fp8: four groups per lane, v0.[15:0]
const INDEX_SMFMAC_32X32X32: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 0, 14), (0, 0, 7)),
    ((15, 0, 8), (0, 15, 4)),
    ((16, 0, 12), (0, 16, 6)),
    ((31, 0, 2), (0, 31, 1)),
    ((32, 0, 0), (0, 0, 8)),
    ((63, 0, 14), (0, 31, 15)),
];

#[test]
fn cdna3_smfmac_index_and_operands_match_the_calculator_tables() {
    let cdna3 = spec("cdna3.mma");
    for name in ["v_smfmac_f32_16x16x32_f16", "v_smfmac_f32_16x16x32_bf16"] {
        let l = layout(&cdna3, name);
        check_ok(&l.a, A_SMFMAC_16X16X32_F16);
        check_ok(&l.b, B_SMFMAC_16X16X32_F16);
        check_ok(&l.d, CD_16X16_F32);
        let meta = l.meta.as_ref().expect("sparse");
        assert_eq!((meta.unit, &meta.codes[..]), (1, &[0, 1, 2, 3][..]));
        let index = meta.family.fragment();
        check_ok(index, INDEX_SMFMAC_16X16X32);
        // one VGPR, only its low byte used (the ABID = 0 set)
        assert_eq!(index.registers, 1);
        assert!(
            index.slots.iter().all(|s| s.bits.1 <= 8),
            "{:?}",
            index.slots
        );
    }
    for name in ["v_smfmac_f32_32x32x32_fp8_fp8", "v_smfmac_i32_32x32x32_i8"] {
        let l = layout(&cdna3, name);
        let index = l.meta.as_ref().expect("sparse").family.fragment().clone();
        check_ok(&index, INDEX_SMFMAC_32X32X32);
        assert!(index.slots.iter().all(|s| s.bits.1 <= 16));
        check_ok(&l.c, CD_32X32_F32);
    }
}

// ---------------------------------------------------------------- RDNA (wave32)

// RDNA3 WMMA, 16-bit A: lane l holds row l % 16, all 16 columns; lanes 16-31 a copy
const RDNA3_A_16BIT: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 0, 16), (0, 0, 1)),
    ((0, 7, 16), (0, 0, 15)),
    ((15, 3, 0), (0, 15, 6)),
    ((16, 0, 0), (0, 0, 0)),
    ((16, 7, 16), (0, 0, 15)),
    ((31, 3, 0), (0, 15, 6)),
    ((31, 7, 16), (0, 15, 15)),
];
const RDNA3_B_16BIT: Table = &[
    ((0, 0, 16), (0, 1, 0)),
    ((15, 7, 16), (0, 15, 15)),
    ((16, 0, 16), (0, 1, 0)),
    ((31, 4, 0), (0, 8, 15)),
];
// C/D f32: lane l, VGPR v holds row 2 v + l / 16
const RDNA3_CD_F32: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 1, 0), (0, 2, 0)),
    ((0, 7, 0), (0, 14, 0)),
    ((15, 3, 0), (0, 6, 15)),
    ((16, 0, 0), (0, 1, 0)),
    ((16, 7, 0), (0, 15, 0)),
    ((31, 7, 0), (0, 15, 15)),
];

#[test]
fn rdna3_wmma_families_replicate_a_and_b_over_the_half_waves() {
    let a = family("rdna3.a.16bit");
    check_ok(&a, RDNA3_A_16BIT);
    assert_eq!((a.lanes, a.copies, a.registers), (32, 2, 8));
    // every element held twice, by lanes l and l + 16 at the same register and bits
    for s in a.slots.iter().filter(|s| s.lane < 16) {
        let copy = a.slots[(s.lane + 16) * a.elements + s.element];
        assert_eq!(
            (copy.register, copy.bits, copy.row, copy.col),
            (s.register, s.bits, s.row, s.col)
        );
    }
    check_ok(&family("rdna3.b.16bit"), RDNA3_B_16BIT);
    for name in ["rdna3.a.8bit", "rdna3.a.4bit"] {
        let f = family(name);
        assert_eq!((f.copies, f.slots[16 * f.elements].col), (2, 0), "{name}");
    }
    check_ok(&family("rdna3.cd.32bit"), RDNA3_CD_F32);
    // 16-bit C/D: the same rows, one value per VGPR in bits 15:0 (OPSEL = 0)
    let cd16 = family("rdna3.cd.16bit");
    check_ok(&cd16, RDNA3_CD_F32);
    assert_eq!((cd16.registers, cd16.slots[0].bits), (8, (0, 16)));
}

// RDNA4 WMMA, 16-bit A: v0-v1 hold columns 0-3 (lanes 0-15) and 4-7 (lanes 16-31),
// v2-v3 columns 8-11 and 12-15
const RDNA4_A_16BIT: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 1, 16), (0, 0, 3)),
    ((0, 2, 0), (0, 0, 8)),
    ((15, 3, 16), (0, 15, 11)),
    ((16, 0, 0), (0, 0, 4)),
    ((16, 2, 16), (0, 0, 13)),
    ((31, 1, 0), (0, 15, 6)),
    ((31, 3, 16), (0, 15, 15)),
];
const RDNA4_B_16BIT: Table = &[
    ((0, 0, 16), (0, 1, 0)),
    ((0, 2, 0), (0, 8, 0)),
    ((15, 1, 16), (0, 3, 15)),
    ((16, 0, 0), (0, 4, 0)),
    ((31, 3, 16), (0, 15, 15)),
];
// C/D f32: lane l, VGPR v holds row 8 (l / 16) + v
const RDNA4_CD_F32: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 7, 0), (0, 7, 0)),
    ((15, 1, 0), (0, 1, 15)),
    ((16, 0, 0), (0, 8, 0)),
    ((31, 7, 0), (0, 15, 15)),
];
// C/D f16: packed, two rows per VGPR
const RDNA4_CD_F16: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 0, 16), (0, 1, 0)),
    ((15, 3, 16), (0, 7, 15)),
    ((16, 0, 0), (0, 8, 0)),
    ((31, 3, 16), (0, 15, 15)),
];

// v_swmmac_f32_16x16x32_f16's index, v0.[15:0]: lane 0's nibbles are the groups at
// columns 0, 4, 16 and 20, lane 16's at 8, 12, 24 and 28
const INDEX_SWMMAC_F16: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 0, 6), (0, 0, 3)),
    ((0, 0, 8), (0, 0, 8)),
    ((0, 0, 14), (0, 0, 11)),
    ((15, 0, 10), (0, 15, 9)),
    ((16, 0, 0), (0, 0, 4)),
    ((16, 0, 8), (0, 0, 12)),
    ((31, 0, 14), (0, 15, 15)),
];
// v_swmmac_f32_16x16x32_fp8_fp8's: lane 0 the groups at 0-12, lane 16 at 16-28
const INDEX_SWMMAC_FP8: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 0, 8), (0, 0, 4)),
    ((15, 0, 14), (0, 15, 7)),
    ((16, 0, 0), (0, 0, 8)),
    ((31, 0, 14), (0, 15, 15)),
];
// v_swmmac_i32_16x16x64_iu4's: the whole VGPR, lane 16 the groups at 32-60
const INDEX_SWMMAC_IU4_K64: Table = &[
    ((0, 0, 0), (0, 0, 0)),
    ((0, 0, 30), (0, 0, 15)),
    ((15, 0, 16), (0, 15, 8)),
    ((16, 0, 0), (0, 0, 16)),
    ((16, 0, 28), (0, 0, 30)),
    ((31, 0, 30), (0, 15, 31)),
];

#[test]
fn rdna4_wmma_and_swmmac_layouts_match_the_tables() {
    let a = family("rdna4.a.16bit");
    check_ok(&a, RDNA4_A_16BIT);
    assert_eq!((a.lanes, a.copies, a.registers), (32, 1, 4));
    check_ok(&family("rdna4.b.16bit"), RDNA4_B_16BIT);
    check_ok(&family("rdna4.cd.32bit"), RDNA4_CD_F32);
    check_ok(&family("rdna4.cd.16bit"), RDNA4_CD_F16);

    let rdna4 = spec("rdna4.mma");
    let l = layout(&rdna4, "v_swmmac_f32_16x16x32_f16");
    // the stored A of the 16-bit SWMMAC: the calculator's v0 of lane 0 is the group at
    // columns 0-3, v2 the group at 16-19 (stored elements 8 and 9)
    check_ok(&l.a, RDNA4_A_16BIT);
    check_ok(&l.d, RDNA4_CD_F32);
    let meta = l.meta.as_ref().expect("sparse");
    assert_eq!((meta.unit, &meta.codes[..]), (1, &[0, 1, 2, 3][..]));
    check_ok(meta.family.fragment(), INDEX_SWMMAC_F16);
    assert!(meta.family.fragment().slots.iter().all(|s| s.bits.1 <= 16));
    let l = layout(&rdna4, "v_swmmac_f16_16x16x32_f16");
    check_ok(&l.c, RDNA4_CD_F16);
    let l = layout(&rdna4, "v_swmmac_f32_16x16x32_fp8_fp8");
    check_ok(l.meta.as_ref().unwrap().family.fragment(), INDEX_SWMMAC_FP8);
    let l = layout(&rdna4, "v_swmmac_i32_16x16x64_iu4");
    check_ok(
        l.meta.as_ref().unwrap().family.fragment(),
        INDEX_SWMMAC_IU4_K64,
    );
}

/// RDNA3 and RDNA4 name six WMMAs alike, with different layouts: each spec's instruction
/// takes its own architecture's (the entries name the `arch` they serve), and a lookup
/// without the architecture finds neither.
#[test]
fn wmma_names_rdna3_and_rdna4_share_take_their_own_layouts() {
    let lib = Library::builtin().unwrap();
    for (file, arch) in [("rdna3.mma", "rdna3"), ("rdna4.mma", "rdna4")] {
        let s = spec(file);
        for name in [
            "v_wmma_f32_16x16x16_f16",
            "v_wmma_f32_16x16x16_bf16",
            "v_wmma_f16_16x16x16_f16",
            "v_wmma_bf16_16x16x16_bf16",
            "v_wmma_i32_16x16x16_iu8",
            "v_wmma_i32_16x16x16_iu4",
        ] {
            let inst = s.instruction(name).expect(name).instruction();
            assert!(
                matches!(lib.find(inst), Err(LayoutError::Unknown(_))),
                "{file}: {name}"
            );
            let l = lib.find_for(arch, inst).unwrap();
            for f in [&l.a, &l.b, &l.c, &l.d] {
                assert!(
                    f.name.starts_with(&format!("{arch}.")),
                    "{file}: {name}: {}",
                    f.name
                );
            }
            // RDNA3 replicates A and B across the half-waves, RDNA4 does not
            assert_eq!(l.a.copies, if arch == "rdna3" { 2 } else { 1 }, "{name}");
        }
    }
}

/// The tables catch a formula swapped for another that still holds every element once.
#[test]
fn a_swapped_formula_fails_the_tables() {
    let text = include_str!("../specs/layouts/amd.json");
    let (from, to) = (
        r#""name": "cdna.16x16.cd.32bit""#,
        r#""expr": "4 * (lane / 16) + i""#,
    );
    let at = text.find(from).unwrap();
    let end = at + text[at..].find(to).unwrap();
    let swapped = format!(
        "{}{}{}",
        &text[..end],
        r#""expr": "4 * i + lane / 16""#,
        &text[end + to.len()..]
    );
    let lib = Library::parse("swapped.json", &swapped).unwrap();
    let f = lib.fragment("cdna.16x16.cd.32bit").unwrap();
    assert!(check(f, CD_16X16_F32).is_err());
    let f = Library::parse("amd.json", text)
        .unwrap()
        .fragment("cdna.16x16.cd.32bit")
        .unwrap()
        .clone();
    check_ok(&f, CD_16X16_F32);
}
