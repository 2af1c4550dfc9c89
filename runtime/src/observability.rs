//! Proofs that two instructions compute the same result on every input, so that no
//! conformance vector can tell them apart. Only what is proven here may be declared
//! unobservable; a neighbour the witness search ([`crate::witness`]) merely failed to
//! separate is not.
//!
//! The criteria, each sound for the reference interpreter's rules (`interp.rs`):
//!
//! 1. **Equal arithmetic.** The IR is the function: equal [`Arithmetic`]s compute equal
//!    results.
//! 2. **Exponents of zero that cannot move a kept bit.** Two fused pipelines that
//!    differ only in the fixed exponent a zero term of some class takes (`e_zero`: `zero
//!    exponent z`), z and z' with `z_hi` the larger, agree on every input when every
//!    alignment that takes a term of a moved class (products, c or groups) is the last
//!    one, has a max-exponent reference, and each of its term sources either never lies
//!    below `z_hi` (its smallest nonzero exponent is at least `z_hi`), or is exact on the
//!    grid `2^(z_hi - F)` it would be cut to (every nonzero value of the source is a
//!    multiple of `2^(z_hi - F)`, F the bits the term keeps) and is never dropped (for
//!    `drop below n`: its smallest exponent is at least `z_hi - n`). The bounds are the
//!    validator's: `e_a + e_b` of the formats' smallest binades (plus the scale factors'
//!    for scaled products) and the products of the formats' smallest steps; a group's
//!    smallest scale exponent sum; c's and d's smallest binade and step, since d is the c
//!    of every chained step after the first.
//!    Proof: a zero term's value is 0, so its exponent acts only through the reference,
//!    the largest exponent of the alignment's terms, and the reference acts only on that
//!    alignment's own cuts and drops (it is the last one). If some other term (a nonzero
//!    one, or a zero of a class whose exponent did not move) has an exponent of at least
//!    `z_hi`, the moved zero terms (at `z` or `z'`, both at most `z_hi`) do not change the
//!    largest exponent: the reference is the same under both. Otherwise every nonzero
//!    term lies below `z_hi`, so only sources that can lie below `z_hi` are nonzero, and
//!    the reference is at most `z_hi` under both: each such term is cut at or below
//!    `z_hi - F`, where it is exact, and it is not dropped (it lies at or above
//!    `z_hi - n`, so at or above `reference - n`). The sum is then the exact sum of the
//!    terms under both, and so is the result. Each chained step gives the same result, so
//!    the next step has the same c. (A term whose value cancels to zero, e.g. a group
//!    whose products sum to 0, takes its nonzero exponent and is bounded like any nonzero
//!    term.) With every source at or above `z_hi`, this is the plain case: the reference
//!    never comes from a zero term.

use mmac_compiler::Checked;
use mmac_compiler::ir::{
    Arithmetic, Fused, Instruction, Pipeline, Reference, TermSource, ZeroExponent, ZeroExponents,
};
use mmac_compiler::valid::{ArithmeticInfo, Bounds};

/// Why `x` (checked) and `y` compute the same function, if that is proven.
pub fn proven_equivalent(x: Checked, y: &Instruction) -> Option<String> {
    if *x.arithmetic() == y.arithmetic {
        return Some("the same arithmetic".into());
    }
    zero_exponents_unseen(x.arithmetic(), x.info(), &y.arithmetic)
}

/// Criterion 2 (module docs).
fn zero_exponents_unseen(x: &Arithmetic, info: &ArithmeticInfo, y: &Arithmetic) -> Option<String> {
    let (Pipeline::Fused(fx), Pipeline::Fused(fy)) = (&x.pipeline, &y.pipeline) else {
        return None;
    };
    let fi = info.fused()?;
    // equal once the zero exponents are set alike
    let same_rest = Arithmetic {
        pipeline: Pipeline::Fused(Fused {
            zero_exponent: fx.zero_exponent,
            ..fy.clone()
        }),
        ..y.clone()
    };
    if &same_rest != x {
        return None;
    }
    let (zx, zy) = (fx.zero_exponent, fy.zero_exponent);
    let moved = |class: fn(&ZeroExponents) -> ZeroExponent| class(&zx) != class(&zy);
    let moved_products = moved(|z| z.products);
    let moved_c = moved(|z| z.c);
    let moved_groups = moved(|z| z.groups);
    let moved_of = |s: &TermSource| match s {
        TermSource::Products(_) => moved_products.then_some((zx.products, zy.products)),
        TermSource::C => moved_c.then_some((zx.c, zy.c)),
        TermSource::Groups => moved_groups.then_some((zx.groups, zy.groups)),
        TermSource::Node(_) => None,
    };
    let bound_of = |s: &TermSource| -> Option<(&'static str, Bounds)> {
        match s {
            TermSource::Products(_) => Some(("products", fi.products)),
            TermSource::C => Some(("c", fi.c)),
            TermSource::Groups => fi.groups.map(|g| ("groups", g)),
            TermSource::Node(_) => None,
        }
    };
    let mut reasons = vec![];
    for (ni, node) in fx.nodes.iter().enumerate() {
        let moved_here: Vec<(ZeroExponent, ZeroExponent)> = node
            .terms
            .iter()
            .filter_map(|t| moved_of(&t.source))
            .collect();
        if moved_here.is_empty() || node.reference != Reference::MaxExponent {
            continue;
        }
        if ni + 1 != fx.nodes.len() {
            // its reference is a later alignment's term exponent
            return None;
        }
        let mut z_hi = i64::MIN;
        for (p, q) in moved_here {
            let (ZeroExponent::Fixed(p), ZeroExponent::Fixed(q)) = (p, q) else {
                return None;
            };
            z_hi = z_hi.max(p.max(q) as i64);
        }
        let mut parts = vec![];
        for t in &node.terms {
            // a node term's exponent may itself be a zero exponent: not bounded here
            let (what, b) = bound_of(&t.source)?;
            if b.min_exp >= z_hi {
                parts.push(format!(
                    "{what} never lie below 2^{z_hi} (exponent >= {})",
                    b.min_exp
                ));
                continue;
            }
            let exact = match t.keep {
                None => true,
                Some((f, _)) => b.lsb >= z_hi - f as i64,
            };
            let kept = t.drop_below.is_none_or(|n| b.min_exp >= z_hi - n as i64);
            if !(exact && kept) {
                return None;
            }
            parts.push(match t.keep {
                Some((f, _)) => format!(
                    "{what} below 2^{z_hi} are multiples of 2^{} (at or above the cut 2^({z_hi} - {f}))",
                    b.lsb
                ),
                None => format!("{what} are kept exact"),
            });
        }
        reasons.push(format!(
            "the zero exponents {} and {} ({}) move no kept bit: {}",
            zero_text(&zx),
            zero_text(&zy),
            classes(moved_products, moved_c, moved_groups),
            parts.join("; ")
        ));
    }
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

fn zero_text(z: &ZeroExponents) -> String {
    let one = |e: ZeroExponent| match e {
        ZeroExponent::Fixed(x) => x.to_string(),
        ZeroExponent::Never => "never".into(),
        ZeroExponent::Natural => "natural".into(),
    };
    if z.products == z.c && z.c == z.groups {
        one(z.c)
    } else {
        format!("{}/{}/{}", one(z.products), one(z.c), one(z.groups))
    }
}

fn classes(products: bool, c: bool, groups: bool) -> String {
    let mut v = vec![];
    if products {
        v.push("products");
    }
    if c {
        v.push("c");
    }
    if groups {
        v.push("groups");
    }
    format!("of {}", v.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutants::neighbours;
    use mmac_compiler::interp;
    use mmac_compiler::random::Rng;

    fn load(path: &str) -> mmac_compiler::CheckedSpec {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = std::fs::read_to_string(root.join(path)).unwrap();
        mmac_compiler::compile(path, &text).unwrap()
    }

    /// Which e_zero neighbours are proven unobservable: f16 products (>= 2^-28) and an
    /// f32 c (>= 2^-126) never lie below -132; bf16 products (down to 2^-252) do, and an
    /// f16 output's e_zero = -21 lies above f16 products, whose bits reach 2^-48, below
    /// the cut -20 - 25; FP8 products below e_zero are exact at Hopper's F = 13.
    #[test]
    fn e_zero_below_every_term_is_unobservable() {
        let v = load("specs/hopper.mma");
        for (name, expect) in [
            ("mma.m16n8k16.f32.f16.f16.f32", true),
            ("mma.m16n8k16.f32.bf16.bf16.f32", false),
            ("mma.m16n8k16.f16.f16.f16.f16", false),
            ("wgmma.m64n8k32.f16.e4m3.e4m3", true),
            // F = 13 below e_zero = -20 still holds every e5m2 product (multiples of 2^-32)
            ("wgmma.m64n8k32.f16.e5m2.e5m2", true),
        ] {
            let checked = v.find(name).unwrap();
            let ns = neighbours(checked);
            let mut seen = 0;
            for n in ns.iter().filter(|n| n.parameter == "e_zero") {
                seen += 1;
                let proof = proven_equivalent(checked, n.instruction());
                assert_eq!(proof.is_some(), expect, "{name} {}: {proof:?}", n.label());
            }
            assert_eq!(seen, 2, "{name}");
            // other parameters are never declared unobservable by this criterion
            for n in ns.iter().filter(|n| n.parameter != "e_zero") {
                assert!(
                    proven_equivalent(checked, n.instruction()).is_none(),
                    "{name} {}",
                    n.label()
                );
            }
        }
    }

    /// Soundness, checked: proven pairs agree on inputs made to expose a zero exponent
    /// (zero and tiny elements, zero c) and on random ones.
    #[test]
    fn proven_pairs_agree() {
        let v = load("specs/hopper.mma");
        let mut rng = Rng::new(7);
        for name in [
            "mma.m16n8k16.f32.f16.f16.f32",
            "wgmma.m64n8k32.f16.e4m3.e4m3",
        ] {
            let i = v.spec().position(name).unwrap();
            let checked = v.get(i);
            let inst = checked.instruction();
            for n in neighbours(checked) {
                if proven_equivalent(checked, n.instruction()).is_none() {
                    continue;
                }
                let ar = &inst.arithmetic;
                for _ in 0..300 {
                    // zeros, and elements in the few binades above the smallest
                    let tiny = |rng: &mut Rng, f: &mmac_compiler::format::Format| {
                        let ff = f.as_float().unwrap();
                        let lo = ff.min_exponent() as i64 - ff.mantissa_bits as i64;
                        match rng.below(4) {
                            0 => 0,
                            1 => rng.finite(f),
                            _ => crate::inputs::float_at(
                                f,
                                rng.percent(50),
                                rng.between(lo, lo + 12),
                                rng.next_u64(),
                            ),
                        }
                    };
                    let a: Vec<u64> = (0..inst.k()).map(|_| tiny(&mut rng, &ar.a)).collect();
                    let b: Vec<u64> = (0..inst.k()).map(|_| tiny(&mut rng, &ar.b)).collect();
                    let c = tiny(&mut rng, &ar.c);
                    let ops = mmac_compiler::engine::Operands {
                        c,
                        a: &a,
                        b: &b,
                        sa: &[],
                        sb: &[],
                    };
                    assert_eq!(
                        interp::run(checked, &ops).unwrap(),
                        interp::run(n.checked.checked(), &ops).unwrap(),
                        "{name} {}",
                        n.label()
                    );
                }
            }
        }
    }
}
