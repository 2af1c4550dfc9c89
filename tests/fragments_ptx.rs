//! The layouts of `specs/layouts/ptx-mma-sparse-scaled.json`, `ptx-wgmma.json` and
//! m8n8k4 with .f16 against tables written by hand from the PTX ISA's figures and
//! formulas (sections 9.7.14.3, 9.7.14.5.1, 9.7.14.5.10, 9.7.14.6 and 9.7.15.5.1.1), not
//! from the data's formulas: the compressed A, B and the metadata of sparse m16n8k32
//! .f16 for both selector values, the .tf32 metadata codes, the four quadpairs of
//! m8n8k4 .f16, an .e2m1 value in its 8-bit container, the scale factors one byte and
//! thread selector name, and the accumulator of a warpgroup.

use mmac_runtime::fragments::{Fragment, Library, Selectors, Slot};
use mmac_runtime::specs::{self, LoadedSpec};
use std::path::Path;

fn spec(file: &str) -> LoadedSpec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("specs")
        .join(file);
    specs::load_file(&path).unwrap_or_else(|e| panic!("{file}: {e:?}"))
}

fn layout(spec: &LoadedSpec, name: &str) -> mmac_runtime::fragments::Layout {
    let inst = spec.instruction(name).expect(name).instruction();
    Library::builtin()
        .unwrap()
        .find(inst)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The slot of element `i` of `lane`, if that lane holds one.
fn slot(f: &Fragment, lane: usize, i: usize) -> Option<Slot> {
    f.slots
        .iter()
        .find(|s| s.lane == lane && s.element == i)
        .copied()
}

/// (lane, element) -> (row, col) of set 0.
type Table = &'static [((usize, usize), (usize, usize))];

fn check(f: &Fragment, table: Table) {
    for &((lane, i), want) in table {
        let s = slot(f, lane, i)
            .unwrap_or_else(|| panic!("`{}`: lane {lane} holds no element {i}", f.name));
        assert_eq!(
            (s.row, s.col),
            want,
            "`{}`: lane {lane}, element {i} (the figure's)",
            f.name
        );
    }
}

/// The lanes of a fragment that hold anything.
fn holders(f: &Fragment) -> Vec<usize> {
    let mut lanes: Vec<usize> = f.slots.iter().map(|s| s.lane).collect();
    lanes.dedup();
    lanes
}

// 9.7.14.6.2.2, Figure 120: sparse m16n8k32 .f16 A, the compressed 16 x 16 matrix: a0 a1
// (a4 a5) are the two kept elements of the 4-wide chunk from column threadID_in_group * 4
// (+ 16) of row groupID, a2 a3 (a6 a7) of row groupID + 8, so stored columns 2t, 2t + 1
// (+ 8)
const SP_A_M16N8K32_F16: Table = &[
    ((0, 0), (0, 0)),
    ((0, 1), (0, 1)),
    ((0, 2), (8, 0)),
    ((0, 3), (8, 1)),
    ((0, 4), (0, 8)),
    ((0, 7), (8, 9)),
    ((1, 0), (0, 2)),
    ((1, 5), (0, 11)),
    ((2, 0), (0, 4)),
    ((3, 0), (0, 6)),
    ((3, 7), (8, 15)),
    ((4, 0), (1, 0)),
    ((4, 6), (9, 8)),
    ((31, 0), (7, 6)),
    ((31, 3), (15, 7)),
    ((31, 7), (15, 15)),
];

// 9.7.14.6.2.2, Figure 121: sparse m16n8k32 .f16 B, 32 x 8, four registers of two
const SP_B_M16N8K32_F16: Table = &[
    ((0, 0), (0, 0)),
    ((0, 1), (1, 0)),
    ((0, 2), (8, 0)),
    ((0, 3), (9, 0)),
    ((0, 4), (16, 0)),
    ((0, 7), (25, 0)),
    ((1, 0), (2, 0)),
    ((2, 0), (4, 0)),
    ((3, 7), (31, 0)),
    ((4, 0), (0, 1)),
    ((31, 0), (6, 7)),
    ((31, 7), (31, 7)),
];

// 9.7.14.6.2.2, Figure 122: the metadata of sparse m16n8k32 .f16 (rows x one 2-bit field
// per stored element), selector 0: threads 0 and 1 of every quad; thread 0 the fields of
// dense columns 0-15 (fields 0-7), row groupID in bits 0-15 and groupID + 8 in 16-31,
// thread 1 those of columns 16-31 (fields 8-15)
const META_M16N8K32_F16_SEL0: Table = &[
    ((0, 0), (0, 0)),
    ((0, 7), (0, 7)),
    ((0, 8), (8, 0)),
    ((0, 15), (8, 7)),
    ((1, 0), (0, 8)),
    ((1, 15), (8, 15)),
    ((4, 0), (1, 0)),
    ((5, 8), (9, 8)),
    ((29, 15), (15, 15)),
];
// selector 1: threads 2 and 3
const META_M16N8K32_F16_SEL1: Table = &[
    ((2, 0), (0, 0)),
    ((2, 15), (8, 7)),
    ((3, 0), (0, 8)),
    ((3, 15), (8, 15)),
    ((6, 0), (1, 0)),
    ((30, 0), (7, 0)),
    ((31, 0), (7, 8)),
    ((31, 15), (15, 15)),
];

#[test]
fn sparse_m16n8k32_f16_a_b_and_metadata_for_both_selectors() {
    let ampere = spec("ampere.mma");
    let l = layout(&ampere, "mma.sp.m16n8k32.f32.f16.f16.f32");
    check(&l.a, SP_A_M16N8K32_F16);
    check(&l.b, SP_B_M16N8K32_F16);
    let m = l.meta.as_ref().unwrap();
    // 2:4: one 2-bit index per stored element, its place in the 4-wide chunk
    assert_eq!((m.unit, &m.codes[..]), (1, &[0, 1, 2, 3][..]));
    assert_eq!(m.family.selectors, [("selector".to_string(), 2)]);
    for (sel, table, lanes) in [
        (0, META_M16N8K32_F16_SEL0, [0, 1, 4, 5, 28, 29]),
        (1, META_M16N8K32_F16_SEL1, [2, 3, 6, 7, 30, 31]),
    ] {
        let extras = l
            .extras(&Selectors {
                sparsity: sel,
                ..Default::default()
            })
            .unwrap();
        let (name, meta) = &extras[0];
        assert_eq!(*name, "meta");
        check(meta, table);
        let held = holders(meta);
        assert_eq!(held.len(), 16, "selector {sel}: {held:?}");
        for lane in lanes {
            assert!(held.contains(&lane), "selector {sel}: lane {lane}");
        }
        for lane in [0, 1, 2, 3, 4, 31] {
            assert_eq!(
                held.contains(&lane),
                lane % 4 / 2 == sel,
                "selector {sel}, lane {lane}"
            );
        }
        // field i of a register in bits 2i..2i+2
        let s = slot(meta, if sel == 0 { 0 } else { 2 }, 9).unwrap();
        assert_eq!((s.register, s.bits), (0, (18, 20)));
    }
    // a third selector value is out of range
    assert!(
        l.extras(&Selectors {
            sparsity: 2,
            ..Default::default()
        })
        .is_err()
    );
}

#[test]
fn sparse_metadata_codes_and_selector_counts_follow_the_isa() {
    let (ampere, ada, rtx) = (
        spec("ampere.mma"),
        spec("ada.mma"),
        spec("rtx_blackwell.mma"),
    );
    // 9.7.14.6.1: a .tf32 element's index is 0b0100 (first of its 2-wide chunk) or 0b1110
    for name in [
        "mma.sp.m16n8k8.f32.tf32.tf32.f32",
        "mma.sp.m16n8k16.f32.tf32.tf32.f32",
    ] {
        let m = layout(&ampere, name).meta.unwrap();
        assert_eq!((m.unit, &m.codes[..]), (1, &[0b0100, 0b1110][..]), "{name}");
        assert_eq!(m.family.width, 4, "{name}");
    }
    // 4:8 pairwise: one 2-bit index per kept pair
    let m = layout(&ampere, "mma.sp.m16n8k64.s32.s4.s4.s32")
        .meta
        .unwrap();
    assert_eq!((m.unit, &m.codes[..]), (2, &[0, 1, 2, 3][..]));
    // the sparsity selector values the ISA allows (9.7.14.6.1): one thread of four, a
    // thread pair, or all four threads (only 0)
    for (s, name, count) in [
        (&ampere, "mma.sp.m16n8k16.f32.f16.f16.f32", 4),
        (&ampere, "mma.sp.m16n8k32.f16.f16.f16.f16", 2),
        (&ampere, "mma.sp.m16n8k8.f32.tf32.tf32.f32", 4),
        (&ampere, "mma.sp.m16n8k16.f32.tf32.tf32.f32", 2),
        (&ampere, "mma.sp.m16n8k32.s32.s8.s8.s32", 2),
        (&ampere, "mma.sp.m16n8k64.satfinite.s32.u8.s8.s32", 1),
        (&ampere, "mma.sp.m16n8k64.s32.u4.u4.s32", 2),
        (&ampere, "mma.sp.m16n8k128.s32.s4.s4.s32", 1),
        (&ada, "mma.sp.m16n8k64.f32.e4m3.e5m2.f32", 1),
        (&rtx, "mma.sp.m16n8k64.kind::f8f6f4.f32.e2m1.e4m3.f32", 1),
        (
            &rtx,
            "mma.sp.block_scale.m16n8k128.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0",
            1,
        ),
    ] {
        let m = layout(s, name).meta.unwrap();
        let got = m
            .family
            .selectors
            .iter()
            .find(|(n, _)| n == "selector")
            .map_or(1, |x| x.1);
        assert_eq!(got, count, "{name}");
    }
    // m16n8k8 .tf32, selector 2 (Figure 127): thread 2 of each quad, row groupID's four
    // 4-bit indices in bits 0-15, row groupID + 8's in bits 16-31
    let l = layout(&ampere, "mma.sp.m16n8k8.f32.tf32.tf32.f32");
    let extras = l
        .extras(&Selectors {
            sparsity: 2,
            ..Default::default()
        })
        .unwrap();
    let meta = &extras[0].1;
    assert_eq!(holders(meta), (0..8).map(|g| 4 * g + 2).collect::<Vec<_>>());
    let s = slot(meta, 2, 3).unwrap();
    assert_eq!((s.row, s.col, s.bits), (0, 3, (12, 16)));
    let s = slot(meta, 30, 4).unwrap();
    assert_eq!((s.row, s.col, s.bits), (15, 0, (16, 20)));
}

/// (lane, element) -> (row, col, set)
type SetTable = &'static [((usize, usize), (usize, usize, usize))];

fn check_sets(f: &Fragment, table: SetTable) {
    assert_eq!(f.sets, 4, "`{}`", f.name);
    for &((lane, i), want) in table {
        let s = slot(f, lane, i).unwrap();
        assert_eq!(
            (s.row, s.col, s.set),
            want,
            "`{}`: lane {lane}, element {i}",
            f.name
        );
    }
}

// 9.7.14.5.1: computation 1 (set 0) by lanes 0-3 and 16-19, computation 3 (set 2) by
// lanes 8-11 and 24-27. Figure 46: row-major A, row %laneid % 4 (+ 4 in the high
// group), col i
const M8N8K4_A: SetTable = &[
    ((0, 0), (0, 0, 0)),
    ((0, 3), (0, 3, 0)),
    ((3, 0), (3, 0, 0)),
    ((16, 0), (4, 0, 0)),
    ((19, 3), (7, 3, 0)),
    ((8, 0), (0, 0, 2)),
    ((9, 2), (1, 2, 2)),
    ((27, 3), (7, 3, 2)),
];
// Figure 49: column-major B, row i, col %laneid % 4 (+ 4 in the high group)
const M8N8K4_B: SetTable = &[
    ((0, 0), (0, 0, 0)),
    ((0, 3), (3, 0, 0)),
    ((2, 1), (1, 2, 0)),
    ((17, 0), (0, 5, 0)),
    ((9, 0), (0, 1, 2)),
    ((26, 3), (3, 6, 2)),
];
// Figures 51 and 52: .f32 C/D, row (%laneid & 1) + (i & 2) (+ 4), col (i & 4) +
// (%laneid & 2) + (i & 1)
const M8N8K4_C_F32: SetTable = &[
    ((0, 0), (0, 0, 0)),
    ((0, 1), (0, 1, 0)),
    ((0, 2), (2, 0, 0)),
    ((0, 3), (2, 1, 0)),
    ((0, 4), (0, 4, 0)),
    ((0, 7), (2, 5, 0)),
    ((1, 0), (1, 0, 0)),
    ((2, 0), (0, 2, 0)),
    ((2, 7), (2, 7, 0)),
    ((3, 7), (3, 7, 0)),
    ((16, 0), (4, 0, 0)),
    ((19, 7), (7, 7, 0)),
    ((8, 0), (0, 0, 2)),
    ((27, 7), (7, 7, 2)),
];
// Figure 50: .f16 C/D, row %laneid % 4 (+ 4), col i
const M8N8K4_C_F16: SetTable = &[
    ((0, 0), (0, 0, 0)),
    ((0, 7), (0, 7, 0)),
    ((18, 3), (6, 3, 0)),
    ((11, 5), (3, 5, 2)),
    ((24, 0), (4, 0, 2)),
];

#[test]
fn m8n8k4_f16_quadpairs() {
    let volta = spec("volta.mma");
    let l = layout(&volta, "mma.m8n8k4.f32.f16.f16.f32");
    check_sets(&l.a, M8N8K4_A);
    check_sets(&l.b, M8N8K4_B);
    check_sets(&l.c, M8N8K4_C_F32);
    check_sets(&l.d, M8N8K4_C_F32);
    assert_eq!((l.a.words(), l.b.words(), l.c.words()), (2, 2, 8));
    let l = layout(&volta, "mma.m8n8k4.f32.f16.f16.f16");
    check_sets(&l.c, M8N8K4_C_F16);
    check_sets(&l.d, M8N8K4_C_F32);
    let l = layout(&volta, "mma.m8n8k4.f16.f16.f16.f16");
    check_sets(&l.d, M8N8K4_C_F16);
    assert_eq!(l.d.words(), 4);
    // c1 in the high half of the first .f16x2 register
    assert_eq!(slot(&l.d, 0, 1).unwrap().bits, (16, 32));
}

#[test]
fn kind_f8f6f4_values_sit_in_8_bit_containers() {
    let rtx = spec("rtx_blackwell.mma");
    let l = layout(&rtx, "mma.m16n8k32.kind::f8f6f4.f32.e2m1.e4m3.f32");
    // A (.e2m1): four registers of four 8-bit containers (Figure 88), the value in bits
    // 2-5 of its byte
    assert_eq!((l.a.width, l.a.container, l.a.words()), (4, 8, 4));
    for (i, register, bits) in [
        (0, 0, (2, 6)),
        (1, 0, (10, 14)),
        (3, 0, (26, 30)),
        (4, 1, (2, 6)),
    ] {
        let s = slot(&l.a, 0, i).unwrap();
        assert_eq!((s.register, s.bits), (register, bits), "a{i}");
    }
    assert_eq!(
        (slot(&l.a, 0, 4).unwrap().row, slot(&l.a, 0, 8).unwrap().col),
        (8, 16)
    );
    // B (.e4m3): the whole byte
    let s = slot(&l.b, 0, 1).unwrap();
    assert_eq!((s.register, s.bits, s.row, s.col), (0, (8, 16), 1, 0));
    // A (.e3m2): a 6-bit value in bits 0-5 of its byte (e2m1's four bits are the top of
    // the same six)
    let l = layout(&rtx, "mma.m16n8k32.kind::f8f6f4.f32.e3m2.e2m3.f32");
    assert_eq!((l.a.width, l.a.container, l.b.width), (6, 8, 6));
    for (i, register, bits) in [(0, 0, (0, 6)), (3, 0, (24, 30)), (5, 1, (8, 14))] {
        let s = slot(&l.a, 0, i).unwrap();
        assert_eq!((s.register, s.bits), (register, bits), "a{i}");
    }
}

#[test]
fn scale_factors_at_the_byte_and_threads_the_selectors_name() {
    let rtx = spec("rtx_blackwell.mma");
    // 9.7.14.3: scale_vec::2X (mxf4nvf4, block 32), byte-id-a 2: the high two bytes;
    // thread-id-a 1: lanes 2 and 3 of each quad, rows groupID and groupID + 8
    let l = layout(
        &rtx,
        "mma.block_scale.m16n8k64.kind::mxf4nvf4.block32.f32.e2m1.e2m1.f32.ue8m0",
    );
    let sel = Selectors {
        byte_id_a: 2,
        thread_id_a: 1,
        byte_id_b: 0,
        thread_id_b: 3,
        ..Default::default()
    };
    let extras = l.extras(&sel).unwrap();
    let (sa, sb) = (&extras[0].1, &extras[1].1);
    assert_eq!((extras[0].0, extras[1].0), ("sa", "sb"));
    assert_eq!((sa.rows, sa.cols, sb.rows, sb.cols), (16, 2, 2, 8));
    let held: Vec<usize> = holders(sa);
    assert_eq!(held.len(), 16);
    assert!(held.contains(&2) && held.contains(&3) && !held.contains(&0) && !held.contains(&1));
    for (lane, i, want, bits) in [
        (2, 0, (0, 0), (16, 24)),
        (2, 1, (0, 1), (24, 32)),
        (3, 0, (8, 0), (16, 24)),
        (31, 1, (15, 1), (24, 32)),
    ] {
        let s = slot(sa, lane, i).unwrap();
        assert_eq!(((s.row, s.col), s.bits), (want, bits), "sa lane {lane}");
    }
    // thread-id-b 3: lane 3 of each quad, the quad's column; byte-id-b 0: bytes 0 and 1
    assert_eq!(holders(sb), (0..8).map(|g| 4 * g + 3).collect::<Vec<_>>());
    let s = slot(sb, 7, 1).unwrap();
    assert_eq!((s.row, s.col, s.bits), (1, 1, (8, 16)));
    // scale_vec::1X (mxf8f6f4): byte-id 3 is the top byte
    let l = layout(
        &rtx,
        "mma.block_scale.m16n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.f32.ue8m0",
    );
    let extras = l
        .extras(&Selectors {
            byte_id_a: 3,
            thread_id_a: 0,
            byte_id_b: 3,
            thread_id_b: 2,
            ..Default::default()
        })
        .unwrap();
    let (sa, sb) = (&extras[0].1, &extras[1].1);
    let s = slot(sa, 1, 0).unwrap();
    assert_eq!((s.row, s.col, s.bits), (8, 0, (24, 32)));
    let s = slot(sb, 30, 0).unwrap();
    assert_eq!((s.row, s.col, s.bits), (0, 7, (24, 32)));
    // scale_vec::4X: all four bytes, byte-id only 0
    let l = layout(
        &rtx,
        "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3",
    );
    let extras = l.extras(&Selectors::default()).unwrap();
    let s = slot(&extras[0].1, 0, 3).unwrap();
    assert_eq!((s.row, s.col, s.bits), (0, 3, (24, 32)));
    assert!(
        l.extras(&Selectors {
            byte_id_a: 1,
            ..Default::default()
        })
        .is_err()
    );
}

// 9.7.15.5.1.1, Figure 149: the accumulator D of wgmma.m64nNk16 (N = 256, .f32): warp w of
// the warpgroup holds rows 16w..16w + 15 as the m16n8 accumulator, repeated every 8
// columns
const WGMMA_D_N256: Table = &[
    ((0, 0), (0, 0)),
    ((0, 1), (0, 1)),
    ((0, 2), (8, 0)),
    ((0, 3), (8, 1)),
    ((0, 4), (0, 8)),
    ((0, 127), (8, 249)),
    ((31, 0), (7, 6)),
    ((31, 3), (15, 7)),
    ((31, 126), (15, 254)),
    ((32, 0), (16, 0)),
    ((32, 2), (24, 0)),
    ((127, 0), (55, 6)),
    ((127, 1), (55, 7)),
    ((127, 127), (63, 255)),
];

#[test]
fn wgmma_accumulators_of_a_warpgroup() {
    let lib = Library::builtin().unwrap();
    let d = lib.fragment("wgmma.m64n256.d.32bit").unwrap();
    assert_eq!(
        (d.lanes, d.rows, d.cols, d.elements, d.words()),
        (128, 64, 256, 128, 128)
    );
    check(d, WGMMA_D_N256);
    let d = lib.fragment("wgmma.m64n8.d.f16").unwrap();
    assert_eq!((d.elements, d.words()), (4, 2));
    check(d, &[((0, 3), (8, 1)), ((127, 3), (63, 7))]);
    assert_eq!(slot(d, 0, 1).unwrap().bits, (16, 32));
    for n in (8..=256).step_by(8) {
        for w in ["32bit", "f16"] {
            let d = lib.fragment(&format!("wgmma.m64n{n}.d.{w}")).unwrap();
            assert_eq!((d.lanes, d.cols), (128, n));
        }
    }
    let a = lib.fragment("wgmma.m64k16.a.16bit").unwrap();
    check(
        a,
        &[
            ((0, 0), (0, 0)),
            ((0, 7), (8, 9)),
            ((32, 0), (16, 0)),
            ((127, 7), (63, 15)),
        ],
    );
    // the entries: A from registers, B in shared memory, C and D the accumulator
    let hopper = spec("hopper.mma");
    let inst = hopper
        .instruction("wgmma.m64n256k32.f16.e4m3.e5m2")
        .unwrap()
        .instruction()
        .clone();
    let l = lib.find(&inst).unwrap();
    assert_eq!(
        (l.a.name.as_str(), l.d.name.as_str(), l.a.lanes),
        ("wgmma.m64k32.a.8bit", "wgmma.m64n256.d.f16", 128)
    );
    assert!(l.b.memory.as_deref().unwrap().starts_with("shared memory"));
    assert!(l.b.slots.is_empty() && (l.b.rows, l.b.cols) == (32, 256));
}

/// Sparse wgmma: the compressed A in the dense A fragment of half the K, the metadata of
/// each warp as sparse mma's of the same types, in the warp's 16 rows (PTX ISA 9.7.15.6.2).
#[test]
fn sparse_wgmma_metadata_warp_by_warp() {
    let hopper = spec("hopper.mma");
    let l = layout(&hopper, "wgmma.sp.m64n8k32.f32.f16.f16");
    assert_eq!((l.a.name.as_str(), l.a.cols), ("wgmma.m64k16.a.16bit", 16));
    assert!(l.b.memory.is_some() && (l.b.rows, l.b.cols) == (32, 8));
    let m = l.meta.as_ref().unwrap();
    assert_eq!((m.unit, &m.codes[..]), (1, &[0, 1, 2, 3][..]));
    // selector 0: lanes 0 and 1 of each group of four, as mma.sp.m16n8k32 (rows groupID in
    // fields 0-7, groupID + 8 in 8-15; the pair's second thread columns 8-15)
    for (sel, table) in [
        (
            0,
            &[
                ((32, 0), (16, 0)),
                ((32, 8), (24, 0)),
                ((33, 7), (16, 15)),
                ((97, 15), (56, 15)),
                ((125, 0), (55, 8)),
            ][..],
        ),
        (
            1,
            &[
                ((34, 0), (16, 0)),
                ((35, 15), (24, 15)),
                ((126, 3), (55, 3)),
            ][..],
        ),
    ] {
        let extras = l
            .extras(&Selectors {
                sparsity: sel,
                ..Default::default()
            })
            .unwrap();
        let meta = &extras[0].1;
        assert_eq!((meta.lanes, meta.rows, meta.cols), (128, 64, 16));
        check(meta, table);
        let held = holders(meta);
        assert_eq!(held.len(), 64, "selector {sel}");
        assert!(held.iter().all(|lane| lane % 4 / 2 == sel), "{held:?}");
    }
    // tf32 (1:2, its codes) and the 8-bit k64 (every thread, selector 0 only)
    let t = layout(&hopper, "wgmma.sp.m64n256k16.f32.tf32.tf32");
    assert_eq!(t.a.name, "wgmma.m64k8.a.tf32");
    assert_eq!(t.meta.as_ref().unwrap().codes, [4, 14]);
    let e = layout(&hopper, "wgmma.sp.m64n16k64.f16.e5m2.e4m3");
    assert_eq!(
        (e.a.name.as_str(), e.d.name.as_str()),
        ("wgmma.m64k32.a.8bit", "wgmma.m64n16.d.f16")
    );
    let extras = e.extras(&Selectors::default()).unwrap();
    check(
        &extras[0].1,
        &[
            ((96, 0), (48, 0)),
            ((97, 15), (56, 15)),
            ((98, 0), (48, 16)),
            ((127, 15), (63, 31)),
        ],
    );
    assert!(
        e.extras(&Selectors {
            sparsity: 1,
            ..Default::default()
        })
        .is_err()
    );
}
