//! Planning a fused lowering: which accumulator width (i64 or i128), which schemes
//! (packed alignment, SIMD T-FDPA, value tables, a sticky window for c, a multi-limb
//! accumulator) and which static grids. The widths, grids and value bounds come from the
//! validator ([`FusedInfo`]); what these schemes cannot compute exactly is refused with a
//! reason.

use super::EXP_OFFSET;
use crate::exact::Rounding;
use crate::format::{FloatFormat, Specials};
use crate::ir::*;
use crate::jit::tables;
use crate::valid::{CheckedFused, FusedInfo, Grid, Scaling};
use cranelift_codegen::ir::{Type, types};

/// Headroom the rounding helpers need above the validator's width (sign, a rounding carry,
/// and the `|x| < 2^(w-2)` bound of [`super::super::emit::Emitter::round_right`]).
const HEADROOM: u32 = 3;

/// What the fused lowering decided before emitting code.
pub(crate) struct Plan {
    pub w: Type,
    pub(super) a: FloatFormat,
    pub(super) b: FloatFormat,
    pub(super) c: FloatFormat,
    pub(super) d: FloatFormat,
    pub(super) scale: Option<FloatFormat>,
    /// The scale format, when products are scaled.
    pub(super) scaled_products: Option<FloatFormat>,
    /// The scale format, when groups are scaled.
    pub(super) scaled_groups: Option<FloatFormat>,
    /// The grid each node's sum lies on.
    pub(super) node_grid: Vec<NodeGrid>,
    /// The last alignment is a wide exact sum: narrow part plus c in a sticky window.
    pub(super) wide: bool,
    /// The last alignment is an exact sum too wide for any window: a multi-limb
    /// accumulator ([`super::sum::limb_sum`]).
    pub(super) limbs: Option<LimbPlan>,
    /// Every exponent a term can take fits the packed layout of
    /// [`super::align::packed_node`].
    pub(super) pack_ok: bool,
    /// The lowest grid of an (unscaled-group) product sum.
    pub(super) product_min_grid: i64,
    /// Products lowered four per SIMD instruction ([`super::simd`]).
    pub(super) simd: Option<SimdPlan>,
    /// a, b, c and the scale factors have at most 8 exponent bits and the zero exponents
    /// lie within 600 of 0, so every grid a sum lies on is far inside f64's exponent range.
    pub(super) narrow_exponents: bool,
    /// Groups of products of formats without NaN/Inf (FP4, FP6) summed straight from the
    /// formats' value tables (a, b): each element is a small signed integer on its format's
    /// finest grid, so a product is one multiply on the lowest product grid.
    pub(super) value_tables: Option<(&'static [u64], &'static [u64])>,
}

/// The grid an alignment node's sum lies on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeGrid {
    /// Every term is exact (`keep` none) and the sum lies on this static grid.
    Exact(i64),
    /// Every term keeps at most `fmax` fraction bits below the reference exponent `r`:
    /// the sum lies on the grid `r - fmax`.
    Rounded { fmax: i64 },
}

/// Products four per SIMD instruction: which alignments the lanes compute, and the F they
/// keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SimdPlan {
    pub(super) keep: i64,
    pub(super) shape: SimdShape,
    /// Products exact in f32 and the sum of a node's kept products below 2^31 (f16, bf16,
    /// tf32 and FP8 with F up to 25): the products are scaled and truncated in f32x4
    /// lanes and summed in i32x4 lanes, four per instruction, instead of two in f64x2.
    pub(super) int_lanes: bool,
    /// With `int_lanes`, every product (and every special code's stand-in) is a normal
    /// f32 value (f16, FP8, FP6, FP4 products, not bf16 or tf32 ones): the products are
    /// held as their f32 values and each alignment multiplies them by one power of two
    /// per reference.
    pub(super) value_lanes: bool,
}

/// The alignments [`super::simd`] computes in lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SimdShape {
    /// The only alignment: every product and c to their largest exponent (T-FDPA).
    All,
    /// The first two: the even products, then the odd ones, each to its own largest
    /// exponent, with no other term (GTR-FDPA's first level).
    EvenOdd,
}

/// A multi-limb fixed-point accumulator for the last alignment: `digits` limbs of 32-bit
/// digits (held in i64 so that signed digit additions never carry) whose lowest bit has
/// the value `2^lsb`.
pub(crate) struct LimbPlan {
    pub(super) lsb: i64,
    pub(super) digits: usize,
}

/// The most limbs a multi-limb accumulator may have (8192 bits).
const MAX_LIMBS: usize = 256;

/// Check that the last alignment `n` is an exact sum the multi-limb accumulator computes:
/// only products and c, all exact, and roundings that keep at most 62 fraction bits (the
/// window taken from the accumulator keeps at least 65 bits and a sticky bit below them).
fn limb_plan(
    fused: &Fused,
    n: &AlignNode,
    info: &FusedInfo,
    width_bits: u32,
    products: u64,
) -> Result<LimbPlan, String> {
    let plain = n.terms.iter().all(|t| {
        matches!(t.source, TermSource::Products(_) | TermSource::C)
            && t.keep.is_none()
            && t.drop_below.is_none()
    });
    if !plain || fused.grouping.is_some() {
        return Err(format!(
            "an exact sum needs a {width_bits}-bit accumulator; the JIT's multi-limb accumulator takes \
             only exact products and c"
        ));
    }
    if fused.normalize.iter().any(|s| s.fraction_bits > 62) {
        return Err("a normalisation keeps more than 62 fraction bits of a multi-limb sum".into());
    }
    // c is c's format in the first chained step and d's in the others
    let lsb = info.products.lsb.min(info.c.lsb);
    let top = info.products.top().max(info.c.top());
    // the value's bits, a sign, growth by the number of terms, and three digits that a
    // term at the top can touch
    let bits = (top - lsb).max(0) + clog2(products + 1) as i64 + 2;
    let digits = (bits / 32) as usize + 1 + 3;
    if digits > MAX_LIMBS {
        return Err(format!(
            "an exact sum needs {} bits; the JIT's multi-limb accumulator holds up to {}",
            bits,
            MAX_LIMBS * 32 - 128
        ));
    }
    Ok(LimbPlan { lsb, digits })
}

pub(super) fn clog2(n: u64) -> u32 {
    64 - n.saturating_sub(1).leading_zeros()
}

/// Check that the fused pipeline can be computed exactly in fixed-width integers and
/// choose the width, reading bounds, grids and widths from the validator's `info`.
pub(crate) fn plan(inst: &Instruction, checked: &CheckedFused) -> Result<Plan, String> {
    let (f, info) = (&checked.pipeline, &checked.facts);
    let ar = &inst.arithmetic;
    let ops = &checked.operands;
    let (a, b, c, d) = (ops.a.clone(), ops.b.clone(), &ops.c, &ops.d);
    if !(d.signed && d.subnormals && d.specials == Specials::Ieee) {
        return Err(format!(
            "the JIT encodes fused results only into signed IEEE-style formats with subnormals, not `{}`",
            ar.d.name
        ));
    }
    if c.mantissa_bits > 60 || d.mantissa_bits > 60 {
        return Err("c or d has more than 60 mantissa bits".into());
    }
    let scale = ops.scale.as_ref().map(|(s, _)| s.clone());
    let (scaled_products, scaled_groups) = match &checked.scaling {
        Scaling::Unscaled => (None, None),
        Scaling::Products(s) => (Some(s.clone()), None),
        Scaling::Groups(s) => (None, Some(s.clone())),
    };
    let sig_bits = |x: &FloatFormat| x.mantissa_bits as u64 + 1;
    let mut prod_bits = sig_bits(&a) + sig_bits(&b);
    if let Some(s) = &scaled_products {
        prod_bits += 2 * sig_bits(s);
    }
    if prod_bits > 62 {
        return Err(format!(
            "exact products of `{}` and `{}` need {prod_bits}-bit significands; the JIT \
             multiplies in 64 bits",
            ar.a.name, ar.b.name
        ));
    }
    let mut need = prod_bits + 2;
    if let Some(g) = f.grouping {
        // a group sum on the lowest product grid, times the scale significands
        let mut bits =
            (info.products.top() - info.products.lsb) as u64 + clog2(g.size as u64) as u64 + 2;
        if let Some(s) = &scaled_groups {
            bits += 2 * sig_bits(s);
        }
        need = need.max(bits);
    }
    let mut node_grid: Vec<NodeGrid> = vec![];
    let mut wide = false;
    let mut limbs: Option<LimbPlan> = None;
    for (ni, (n, ninfo)) in f.nodes.iter().zip(&info.nodes).enumerate() {
        let exact = n.terms.iter().filter(|t| t.keep.is_none()).count();
        if exact > 0 && exact < n.terms.len() {
            return Err(format!(
                "alignment {ni} mixes exact and rounded terms; the JIT does not lower that"
            ));
        }
        let too_wide = (ninfo.width_bits + HEADROOM) as u64 > 128;
        // A sum too wide for i128 is computed as a narrow exact part (products, groups)
        // plus c in a 124-bit window with a sticky bit (see `window_sum`). That needs the
        // sum to be the result, c to be its only wide term, and a fixed grid.
        let wide_here = too_wide
            && ni + 1 == f.nodes.len()
            && n.terms.iter().filter(|t| t.source == TermSource::C).count() == 1
            && n.terms
                .iter()
                .all(|t| !matches!(t.source, TermSource::Node(_)))
            && (exact > 0 || matches!(n.reference, Reference::Fixed(_)));
        // the exact grid of the node: the validator's, or without c when c is kept apart
        let narrow_lsb = n
            .terms
            .iter()
            .zip(&ninfo.inputs)
            .filter(|(t, _)| t.source != TermSource::C)
            .map(|(_, b)| b.lsb)
            .min();
        let fmax = n
            .terms
            .iter()
            .filter_map(|t| t.keep.map(|k| k.0 as i64))
            .max();
        node_grid.push(match (ninfo.grid, fmax) {
            (Grid::Static(g), _) if exact > 0 && wide_here => {
                NodeGrid::Exact(narrow_lsb.unwrap_or(g))
            }
            (Grid::Static(g), _) if exact > 0 => NodeGrid::Exact(g),
            (_, Some(fmax)) if exact == 0 => NodeGrid::Rounded { fmax },
            _ => {
                return Err(format!(
                    "alignment {ni} sums exact terms on a grid known only at run time; the \
                     JIT does not lower that"
                ));
            }
        });
        if wide_here {
            let top = n
                .terms
                .iter()
                .zip(&ninfo.inputs)
                .filter(|(t, _)| t.source != TermSource::C)
                .map(|(_, b)| b.top())
                .max()
                .unwrap_or(i64::MIN);
            let lsb = match (node_grid[ni], n.reference) {
                (NodeGrid::Exact(g), _) => g,
                (NodeGrid::Rounded { fmax }, Reference::Fixed(r)) => r as i64 - fmax,
                (NodeGrid::Rounded { .. }, Reference::MaxExponent) => {
                    return Err(format!(
                        "alignment {ni} is too wide for any window and its grid is known \
                         only at run time"
                    ));
                }
            };
            // every item but c
            let narrow_count = ninfo.items.saturating_sub(1);
            let narrow = (top - lsb).max(0) + clog2(narrow_count.max(1)) as i64 + 3;
            if narrow > 118 {
                // too wide for an i128 as well: a multi-limb accumulator, if the sum is
                // one of plain products and c
                let lp = limb_plan(f, n, info, ninfo.width_bits, narrow_count)?;
                node_grid[ni] = NodeGrid::Exact(lp.lsb);
                limbs = Some(lp);
            } else {
                wide = true;
            }
            need = need.max(128);
        } else {
            need = need.max((ninfo.width_bits + HEADROOM) as u64);
        }
    }
    let w = if need <= 64 {
        types::I64
    } else if need <= 128 {
        types::I128
    } else {
        return Err(format!(
            "an exact sum needs a {need}-bit accumulator; the JIT computes up to 128 bits"
        ));
    };
    let small = |z: ZeroExponent| match z {
        ZeroExponent::Fixed(e) => (e as i64).abs() < EXP_OFFSET / 2,
        _ => true,
    };
    let zx = f.zero_exponent;
    let pack_ok = small(zx.products) && small(zx.c) && small(zx.groups);
    let simd = simd_plan(inst, f, &a, &b, c, d);
    let value_tables = value_tables(f, &a, &b);
    let zero_near = |z: ZeroExponent| match z {
        ZeroExponent::Fixed(e) => (e as i64).abs() <= 600,
        _ => true,
    };
    let narrow_exponents = [Some(&a), Some(&b), Some(c), scale.as_ref()]
        .iter()
        .flatten()
        .all(|x| x.exponent_bits <= 8)
        && zero_near(zx.products)
        && zero_near(zx.c)
        && zero_near(zx.groups);
    Ok(Plan {
        simd,
        narrow_exponents,
        w,
        wide,
        limbs,
        pack_ok,
        a,
        b,
        c: c.clone(),
        d: d.clone(),
        scale,
        scaled_products,
        scaled_groups,
        node_grid,
        product_min_grid: info.products.lsb,
        value_tables,
    })
}

/// The value tables of [`Plan::value_tables`], when the pipeline groups unscaled,
/// unflagged products of formats without special codes that the tables hold.
fn value_tables(
    fused: &Fused,
    a: &FloatFormat,
    b: &FloatFormat,
) -> Option<(&'static [u64], &'static [u64])> {
    let g = fused.grouping?;
    let ok = !fused.scaled_products
        && fused.product_overflow.is_none()
        && fused.nodes.iter().all(|n| {
            n.terms
                .iter()
                .all(|t| !matches!(t.source, TermSource::Products(_)))
        })
        && tables::value_bits(a) + tables::value_bits(b) + clog2(g.size as u64) + 2 <= 62;
    if !ok {
        return None;
    }
    let cond = fused.conditioning;
    Some((
        tables::value_table(a, cond.flush_a)?,
        tables::value_table(b, cond.flush_b)?,
    ))
}

/// Does the fused pipeline have a form [`super::simd`] computes? Then which, and its F.
///
/// [`SimdShape::All`]: one alignment of all products and c to their largest exponent,
/// each truncated to F fraction bits. [`SimdShape::EvenOdd`]: the first two alignments
/// are the even and the odd products, each alone to its largest exponent and truncated to
/// the same F, and no later one takes products. Both: signed inputs with subnormals whose
/// codes fit 32 bits and whose exact products fit 31 bits (f16, bf16, tf32, FP8, FP6,
/// FP4), chains of whole lanes; every power of two the kernel forms, and every scaled
/// term, a normal f64, with the sum of the truncated terms exact in f64.
pub(super) fn simd_plan(
    inst: &Instruction,
    fused: &Fused,
    a: &FloatFormat,
    b: &FloatFormat,
    c: &FloatFormat,
    d: &FloatFormat,
) -> Option<SimdPlan> {
    let cond = fused.conditioning;
    if fused.scaled_products
        || fused.grouping.is_some()
        || fused.product_overflow.is_some()
        || cond.flush_a
        || cond.flush_b
        || !fused.chain.is_multiple_of(4)
        || inst.arithmetic.scale.is_some()
    {
        return None;
    }
    // a term of an alignment truncated to F toward zero, with nothing dropped
    let truncated = |t: &AlignTerm| match (t.keep, t.drop_below) {
        (Some((fb, Rounding::TowardZero)), None) => Some(fb as i64),
        _ => None,
    };
    let max_ref = |n: &AlignNode| n.reference == Reference::MaxExponent;
    let (shape, big_f) = match fused.nodes.as_slice() {
        [n] if max_ref(n) && n.terms.len() == 2 => {
            let mut keep = None;
            let (mut products, mut has_c) = (false, false);
            for t in &n.terms {
                match truncated(t) {
                    Some(fb) if keep.is_none_or(|k| k == fb) => keep = Some(fb),
                    _ => return None,
                }
                match t.source {
                    TermSource::Products(ProductsPart::All) => products = true,
                    TermSource::C => has_c = true,
                    _ => return None,
                }
            }
            if !(products && has_c) {
                return None;
            }
            (SimdShape::All, keep?)
        }
        [even, odd, rest @ ..] => {
            let only = |n: &AlignNode, part: ProductsPart| match n.terms.as_slice() {
                [t] if max_ref(n) && t.source == TermSource::Products(part) => truncated(t),
                _ => None,
            };
            let fe = only(even, ProductsPart::Even)?;
            let later_products = rest.iter().any(|n| {
                n.terms
                    .iter()
                    .any(|t| matches!(t.source, TermSource::Products(_)))
            });
            if only(odd, ProductsPart::Odd)? != fe || later_products {
                return None;
            }
            (SimdShape::EvenOdd, fe)
        }
        _ => return None,
    };
    let ok = |x: &FloatFormat| {
        x.subnormals && x.signed && x.storage_bits <= 32 && x.ignored_low_bits + x.code_bits() <= 32
    };
    if !(ok(a) && ok(b)) || a.mantissa_bits + b.mantissa_bits + 2 > 31 {
        return None;
    }
    // c's significand converts to f64 exactly; the sum stays below 2^52
    if c.mantissa_bits.max(d.mantissa_bits) > 52
        || big_f + 2 + clog2(fused.chain as u64 + 1) as i64 > 52
    {
        return None;
    }
    let fr = (a.mantissa_bits + b.mantissa_bits) as i64;
    let e_lo = (a.min_exponent() + b.min_exponent()) as i64;
    // special codes decode one above the largest exponent
    let e_hi = (a.max_exponent() + b.max_exponent()) as i64 + 2;
    let powers = match shape {
        SimdShape::All => {
            let ez_p = match fused.zero_exponent.products {
                ZeroExponent::Natural => None,
                ZeroExponent::Fixed(e) => Some(e as i64),
                ZeroExponent::Never => return None,
            };
            let c_lo = c.min_exponent().min(d.min_exponent()) as i64;
            let c_hi = c.max_exponent().max(d.max_exponent()) as i64 + 1;
            let r_lo = e_lo.min(ez_p.unwrap_or(e_lo));
            // the reference: a term's exponent, or a zero term's fixed one (products' too)
            let r_hi = e_hi
                .max(c_hi)
                .max(ez_p.unwrap_or(e_hi))
                .max(match fused.zero_exponent.c {
                    ZeroExponent::Fixed(e) => e as i64,
                    _ => c_hi,
                });
            let (mc_lo, mc_hi) = (
                c.mantissa_bits.min(d.mantissa_bits) as i64,
                c.mantissa_bits.max(d.mantissa_bits) as i64,
            );
            vec![
                e_lo - fr + big_f - r_hi,
                e_hi - fr + big_f - r_lo,
                c_lo - mc_hi + big_f - r_hi,
                c_hi - mc_lo + big_f - r_lo,
            ]
        }
        SimdShape::EvenOdd => {
            // the reference is a product's exponent or e_zero; the powers are formed
            // against one at least e_lo (below it every term is 0)
            let r_hi = match fused.zero_exponent.products {
                ZeroExponent::Fixed(e) => e_hi.max(e as i64),
                _ => e_hi,
            };
            vec![e_lo - fr + big_f - r_hi, e_hi - fr + big_f - e_lo]
        }
    };
    // the clamped powers 2^-30 and 2^(F - fr) are normal f32 with -30 <= F - fr. With
    // fewer than 8 products a step is bound by its latency, which the clamps lengthen
    // more than the lanes save (Ampere's tf32 steps of 4 measure 3-8 % slower in i32
    // lanes than in f64 lanes; its f16 steps of 8, 10 % faster), unless the kept values
    // are so narrow (below 2^24 with c: FP8 with F = 13) that f64 lanes are never needed.
    let int_lanes = (fused.chain >= 8 || big_f + 2 + clog2(fused.chain as u64 + 1) as i64 <= 24)
        && a.mantissa_bits + b.mantissa_bits + 2 <= 24
        && big_f + 2 + clog2(fused.chain as u64) as i64 <= 31
        && (-30..=100).contains(&(big_f - fr));
    // the scale 2^(e - fr) of every product, specials' included, a normal f32
    let value_lanes = int_lanes && e_lo - fr >= -126 && e_hi - fr <= 125;
    powers
        .iter()
        .all(|q| (-1000..=1000).contains(q))
        .then_some(SimdPlan {
            keep: big_f,
            shape,
            int_lanes,
            value_lanes,
        })
}
