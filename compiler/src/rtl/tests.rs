//! The circuit's own semantics: what `eval` computes is what the Verilog text says.

use super::circuit::Circuit;
use num_bigint::BigUint;

fn b(x: u64) -> BigUint {
    BigUint::from(x)
}

#[test]
fn eval_follows_verilog_widths_shifts_and_signed_compares() {
    let mut c = Circuit::new(16);
    let x = c.input("x", 8);
    let y = c.input("y", 8);
    let s = c.input("s", 4);
    let sum = c.add(x, y);
    let diff = c.sub(x, y);
    let shl = c.shl(x, s);
    let shr = c.shr(x, s);
    let slt = c.slt(x, y);
    let ult = c.ult(x, y);
    let wide = c.sext(x, 12);
    let top = c.slice(wide, 4, 8);
    for (name, w) in [
        ("sum", sum),
        ("diff", diff),
        ("shl", shl),
        ("shr", shr),
        ("slt", slt),
        ("ult", ult),
        ("top", top),
    ] {
        c.output(name, w);
    }
    // 0xf0 = -16, 0x10 = 16; a shift by 9 (past the width) gives 0
    let out = c.eval(&[b(0xf0), b(0x10), b(9)]);
    assert_eq!(out, [b(0x00), b(0xe0), b(0), b(0), b(1), b(0), b(0xff)]);
    let out = c.eval(&[b(0x81), b(0x7f), b(1)]);
    assert_eq!(
        out,
        [b(0x00), b(0x02), b(0x02), b(0x40), b(1), b(0), b(0xf8)]
    );
    let v = c.verilog("t", "a test");
    assert!(v.contains("$signed(x) < $signed(y)"), "{v}");
    assert!(v.contains("module t ("), "{v}");
}

#[test]
fn constants_fold_and_leading_one_counts() {
    let mut c = Circuit::new(16);
    let k = c.konst(5u32, 8);
    let j = c.konst(3u32, 8);
    let p = c.mul(k, j);
    assert_eq!(c.constant(p), Some(&b(15)));
    let x = c.input("x", 16);
    let lead = c.leading_one(x, 5);
    c.output("lead", lead);
    for (v, want) in [(0u64, 0u64), (1, 0), (2, 1), (0x8000, 15), (0x0123, 8)] {
        assert_eq!(c.eval(&[b(v)]), [b(want)], "{v:x}");
    }
}
