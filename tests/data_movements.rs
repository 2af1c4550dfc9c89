//! `mmac layout --movement`: the registers of `ldmatrix` and `stmatrix` (.m8n8 .b16, .x1,
//! .x2, .x4, .trans) against tables written by hand from the PTX ISA's ldmatrix figures,
//! the lanes that give the rows' addresses, and the errors.

mod support;

use mmac_runtime::fragments::Library;
use support::{mmac, mmac_ok, stderr};

/// (lane, element) -> (row, col) of the stacked matrices, from the figures: without
/// .trans a thread holds two adjacent elements of a row (row groupID, columns
/// 2 * threadID_in_group and + 1) of each matrix, in the register of that matrix; with
/// .trans the same two places of the transposed matrix.
type Table = &'static [((usize, usize), (usize, usize))];

const X1: Table = &[
    ((0, 0), (0, 0)),
    ((0, 1), (0, 1)),
    ((5, 0), (1, 2)),
    ((5, 1), (1, 3)),
    ((31, 1), (7, 7)),
];
const X4_TRANS: Table = &[
    ((0, 0), (0, 0)),
    ((0, 1), (1, 0)),
    ((4, 0), (0, 1)),
    ((1, 2), (10, 0)),
    ((31, 6), (30, 7)),
    ((31, 7), (31, 7)),
];
const X2: Table = &[((0, 2), (8, 0)), ((7, 3), (9, 7)), ((31, 2), (15, 6))];

#[test]
fn ldmatrix_and_stmatrix_registers_match_the_figures() {
    let lib = Library::builtin().unwrap();
    for (name, table, registers) in [
        ("ldmatrix.sync.aligned.m8n8.x1.shared.b16", X1, 1),
        ("stmatrix.sync.aligned.m8n8.x1.shared::cta.b16", X1, 1),
        ("ldmatrix.sync.aligned.m8n8.x2.b16", X2, 2),
        (
            "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
            X4_TRANS,
            4,
        ),
        ("stmatrix.sync.aligned.m8n8.x4.trans.b16", X4_TRANS, 4),
    ] {
        let (f, matrices) = lib.movement(name).unwrap();
        assert_eq!(
            (f.registers, matrices, f.rows),
            (registers, registers, 8 * registers),
            "{name}"
        );
        for &((lane, i), want) in table {
            let s = f.slots[lane * f.elements + i];
            assert_eq!((s.lane, s.element), (lane, i));
            assert_eq!((s.row, s.col), want, "{name}: lane {lane}, element {i}");
            // element i in register i / 2, its low or high half
            assert_eq!(
                (s.register, s.bits),
                (i / 2, (16 * (i as u32 % 2), 16 * (i as u32 % 2) + 16))
            );
        }
    }
    assert!(
        lib.movement("ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8")
            .is_err()
    );
}

#[test]
fn layout_movement_prints_registers_and_addresses() {
    let out = mmac_ok(&[
        "layout",
        "--movement",
        "ldmatrix.sync.aligned.m8n8.x2.trans.b16",
    ]);
    assert!(
        out.starts_with("r: 16 x 8 b16 (2 matrices of 8 x 8"),
        "{out}"
    );
    assert!(
        out.contains("\n  lane  r0: e0 e1  r1: e2 e3\n     0  0,0 1,0    8,0 9,0\n"),
        "{out}"
    );
    assert!(out.ends_with("addresses: lanes 0..15 each give the address of one row: lane l, row l % 8 of matrix l / 8\n"), "{out}");
    let json = mmac_ok(&[
        "layout",
        "--movement",
        "stmatrix.sync.aligned.m8n8.x4.b16",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["operands"]["r"].as_array().unwrap().len(), 32 * 8);
    assert_eq!(v["addresses"].as_array().unwrap().len(), 32);
    assert_eq!(
        v["addresses"][13],
        serde_json::json!({"lane": 13, "matrix": 1, "row": 5})
    );
    let o = mmac(&["layout", "--movement", "ldmatrix.sync.aligned.m8n8.x3.b16"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(
            "no register layout of a data movement is known for `ldmatrix.sync.aligned.m8n8.x3.b16`"
        ),
        "{}",
        stderr(&o)
    );
    // --movement with a spec, or neither: usage errors
    let o = mmac(&[
        "layout",
        "specs/ampere.mma",
        "--movement",
        "ldmatrix.sync.aligned.m8n8.x1.b16",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = mmac(&["layout"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
