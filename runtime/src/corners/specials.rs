//! Special results: sums whose exact value is zero (what sets the sign of a zero result)
//! and NaN operands with payloads (which NaN a result carries), built from an
//! instruction's interface alone, for asking a black box.

use crate::blackbox::Interface;
use crate::inputs::Input;

/// The scale factor 1 of the interface's scale format (0 when it has none).
fn unit_scale(iface: &Interface) -> u64 {
    iface
        .scale
        .as_ref()
        .and_then(|(f, _)| crate::inputs::pow2(f, 0, false))
        .unwrap_or(0)
}

/// Sums whose exact value is zero, with every sign of c and of the zero products, and
/// exact cancellations: what sets the sign of a zero result (`zero result positive`,
/// `exact_positive`, IEEE's rules in sequential steps) apart.
pub fn signed_zeros(iface: &Interface) -> Vec<(String, Input)> {
    use crate::inputs::{pow2, zero};
    let k = iface.k;
    let one_scale = unit_scale(iface);
    let base = |c: u64| Input {
        c,
        a: vec![zero(&iface.a, false); k],
        b: vec![zero(&iface.b, false); k],
        sa: vec![one_scale; iface.scale_count()],
        sb: vec![one_scale; iface.scale_count()],
    };
    let sign = |n: bool| if n { "-" } else { "+" };
    let mut out = vec![];
    for c_neg in [false, true] {
        let c = zero(&iface.c, c_neg);
        for (what, negs) in [
            ("every product +0", vec![false; k]),
            ("every product -0", vec![true; k]),
            ("products -0 and +0", (0..k).map(|i| i % 2 == 0).collect()),
        ] {
            let mut input = base(c);
            for (i, &n) in negs.iter().enumerate() {
                input.a[i] = zero(&iface.a, n);
            }
            out.push((format!("signed zeros: c = {}0, {what}", sign(c_neg)), input));
        }
        for last in [false, true] {
            // 1 - 1 = 0 exactly, in the first lanes or the last ones
            let (i, j) = if last {
                (k.saturating_sub(2), k - 1)
            } else {
                (0, 1.min(k - 1))
            };
            if i == j {
                continue;
            }
            let (Some(p), Some(m), Some(one)) = (
                pow2(&iface.a, 0, false),
                pow2(&iface.a, 0, true),
                pow2(&iface.b, 0, false),
            ) else {
                continue;
            };
            let mut input = base(c);
            input.a[i] = p;
            input.a[j] = m;
            input.b[i] = one;
            input.b[j] = one;
            out.push((
                format!("signed zeros: c = {}0, 1 - 1 at k = {i}, {j}", sign(c_neg)),
                input,
            ));
        }
    }
    out
}

/// NaNs with distinct payloads (quiet and signalling) in c, in a and b at the first and
/// last k, and two at once (c with a product, a with b, two products): what tells a box
/// that returns the canonical NaN from one that propagates an input's payload, and which
/// input's payload wins. Only for operands whose formats have NaN payloads.
pub fn nan_payloads(iface: &Interface) -> Vec<(String, Input)> {
    use crate::inputs::pow2;
    let k = iface.k;
    let one_scale = unit_scale(iface);
    let (Some(one_a), Some(one_b), Some(one_c)) = (
        pow2(&iface.a, 0, false),
        pow2(&iface.b, 0, false),
        pow2(&iface.c, 0, false),
    ) else {
        return vec![];
    };
    let base = || Input {
        c: one_c,
        a: vec![one_a; k],
        b: vec![one_b; k],
        sa: vec![one_scale; iface.scale_count()],
        sb: vec![one_scale; iface.scale_count()],
    };
    // the NaN of format f with fraction `payload` (quiet bit included or not), if f has
    // payloads
    let nan = |f: &mmac_compiler::format::Format, payload: u64, quiet: bool| -> Option<u64> {
        let x = f.as_float()?;
        if x.specials != mmac_compiler::format::Specials::Ieee || x.mantissa_bits < 2 {
            return None;
        }
        let m = x.mantissa_bits;
        let quiet_bit = 1u64 << (m - 1);
        let fraction = (payload & (quiet_bit - 1)).max(1) | if quiet { quiet_bit } else { 0 };
        let code = (((1u64 << x.exponent_bits) - 1) << m) | fraction;
        Some(code << x.ignored_low_bits)
    };
    let mut out = vec![];
    for (quiet, q) in [(true, "quiet"), (false, "signalling")] {
        let mut add = |what: &str, set: &dyn Fn(&mut Input) -> Option<()>| {
            let mut input = base();
            if set(&mut input).is_some() {
                out.push((format!("NaN payloads: {q} {what}"), input));
            }
        };
        add("c", &|i| {
            i.c = nan(&iface.c, 0x15, quiet)?;
            Some(())
        });
        add("a[0]", &|i| {
            i.a[0] = nan(&iface.a, 0x2a, quiet)?;
            Some(())
        });
        add(&format!("b[{}]", k - 1), &|i| {
            i.b[k - 1] = nan(&iface.b, 0x13, quiet)?;
            Some(())
        });
        add(&format!("c and a[{}]", k - 1), &|i| {
            i.c = nan(&iface.c, 0x15, quiet)?;
            i.a[k - 1] = nan(&iface.a, 0x2a, quiet)?;
            Some(())
        });
        add("a[0] and b[0]", &|i| {
            i.a[0] = nan(&iface.a, 0x2a, quiet)?;
            i.b[0] = nan(&iface.b, 0x13, quiet)?;
            Some(())
        });
        if k > 1 {
            add(&format!("b[0] and a[{}]", k - 1), &|i| {
                i.b[0] = nan(&iface.b, 0x13, quiet)?;
                i.a[k - 1] = nan(&iface.a, 0x2a, quiet)?;
                Some(())
            });
        }
    }
    out
}
