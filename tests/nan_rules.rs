//! NaN rules (`nan canonical | ieee | propagate_c_first | propagate_products_first`), in a
//! pipeline's body and at the uses line: which NaN each gives, bit for bit, on both
//! engines where the JIT lowers the rule.

use mmac_compiler::engine::Operands;
use mmac_compiler::{CheckedSpec, interp, jit};

const SPEC: &str = "arch n
import std
instruction c_first {
    shape 1 x 1 x 2
    types a = f16, b = f16, c = f32, d = f32
    uses e_fdpa(L = 2) nan propagate_c_first
}
instruction products_first {
    shape 1 x 1 x 2
    types a = f16, b = f16, c = f32, d = f32
    uses e_fdpa(L = 2) nan propagate_products_first
}
instruction fma_canonical {
    shape 1 x 1 x 2
    types a = f32, b = f32, c = f32, d = f32
    uses fma() nan canonical
}
instruction fma_ieee {
    shape 1 x 1 x 2
    types a = f32, b = f32, c = f32, d = f32
    uses fma()
}
";

fn spec() -> CheckedSpec {
    mmac_compiler::compile("n.mma", SPEC).unwrap_or_else(|d| panic!("{}", d.render_plain(100)))
}

fn run(v: &CheckedSpec, name: &str, c: u64, a: [u64; 2], b: [u64; 2]) -> u64 {
    let i = v.spec().position(name).unwrap();
    let ops = Operands {
        c,
        a: &a,
        b: &b,
        sa: &[],
        sb: &[],
    };
    interp::run(v.get(i), &ops).unwrap()
}

const ONE_F16: u64 = 0x3c00;

#[test]
fn the_first_input_nan_is_propagated_in_the_rules_order() {
    let v = spec();
    // c's NaN (quiet, payload 1) and a[1]'s (f16 signalling, fraction 0x101)
    let (c_nan, a_nan) = (0x7fc0_0001, 0x7d01);
    for (name, want) in [
        // c's own bits, already quiet
        ("c_first", 0x7fc0_0001),
        // a[1]'s fraction 0x101 at the top of f32's 23 bits (<< 13), quieted
        ("products_first", 0x7fe0_2000),
    ] {
        let got = run(&v, name, c_nan, [ONE_F16, a_nan], [ONE_F16, ONE_F16]);
        assert_eq!(got, want, "{name}: {got:x}");
    }
    // the sign is kept; a signalling c is quieted
    let got = run(
        &v,
        "c_first",
        0xff80_0001,
        [ONE_F16, ONE_F16],
        [ONE_F16, ONE_F16],
    );
    assert_eq!(got, 0xffc0_0001);
    // b's NaN when it comes first: b[0] before a[1]
    let got = run(&v, "products_first", 0, [ONE_F16, a_nan], [0xfe00, ONE_F16]);
    assert_eq!(got, 0xffc0_0000, "{got:x}");
    // no input NaN (Inf * 0): the canonical NaN
    let got = run(&v, "c_first", 0, [0x7c00, ONE_F16], [0, ONE_F16]);
    assert_eq!(got, 0x7fff_ffff);
}

#[test]
fn a_rule_at_the_uses_line_holds_on_both_engines() {
    let v = spec();
    let compiled = jit::compile(&v).unwrap();
    // the host's FMA propagates c's payload; `nan canonical` pins the canonical NaN
    let (c, a, b) = (0x7fc0_1234u64, [0x3f80_0000u64; 2], [0x3f80_0000u64; 2]);
    let ops = Operands {
        c,
        a: &a,
        b: &b,
        sa: &[],
        sb: &[],
    };
    let jit_canonical = compiled.kernel("fma_canonical").unwrap().dot(&ops).unwrap();
    assert_eq!(jit_canonical, 0x7fff_ffff);
    assert_eq!(run(&v, "fma_canonical", c, a, b), 0x7fff_ffff);
    // `ieee` leaves it unpinned: some NaN
    let jit_ieee = compiled.kernel("fma_ieee").unwrap().dot(&ops).unwrap();
    assert!(
        v.spec().instructions[0]
            .arithmetic
            .d
            .decode(jit_ieee)
            .is_nan()
    );
    // the propagating rules run on the interpreter, with the reason
    let Err(e) = compiled.kernel("c_first") else {
        panic!("the JIT lowered `nan propagate_c_first`");
    };
    assert!(e.message.contains("nan propagate_c_first"), "{e}");
    // the printer writes the rule back, as a stage of the pipeline, and that checks
    for name in ["c_first", "products_first"] {
        let shown = mmac_compiler::printer::print_instruction("n", v.find(name).unwrap());
        let rule = v
            .find(name)
            .unwrap()
            .instruction()
            .provenance
            .pipeline
            .clone();
        assert!(shown.contains("nan propagate_"), "{shown}");
        let again = mmac_compiler::compile("shown.mma", &shown)
            .unwrap_or_else(|d| panic!("{rule}: {}\n{shown}", d.render_plain(100)));
        let ops = Operands {
            c: 0x7fc0_0001,
            a: &[ONE_F16, 0x7d01],
            b: &[ONE_F16, ONE_F16],
            sa: &[],
            sb: &[],
        };
        let i = again.spec().instructions.len() - 1;
        let (orig, printed) = (v.find(name).unwrap(), again.get(i));
        assert_eq!(
            interp::run(orig, &ops),
            interp::run(printed, &ops),
            "{name}"
        );
    }
}

#[test]
fn a_rule_where_no_nan_is_made_is_refused() {
    let text = "arch n
import std
instruction i {
    shape 1 x 1 x 4
    types a = s8, b = s8, c = s32, d = s32
    uses int_mma() nan canonical
}
instruction q {
    shape 1 x 1 x 4
    types a = f16, b = f16, c = f32, d = f32
    uses fma() nan sometimes
}
";
    let d = mmac_compiler::compile("n.mma", text).unwrap_err();
    let r = d.render_plain(100);
    assert!(
        r.contains("`nan canonical` at the uses line of an integer pipeline"),
        "{r}"
    );
    assert!(r.contains("unknown NaN policy `sometimes`"), "{r}");
}
