//! Lowering of fused dot-product-add pipelines (T-, ST-, GST-, TR-, GTR-FDPA and exact
//! sums): bit-level decoding, exact integer products, max-exponent alignment with the
//! per-term rounding of each alignment node, one exact fixed-point sum per node, the
//! normalisation steps, the zero-sign rule and the encoding of `d`.
//!
//! Each chained step is straight-line code for finite inputs ([`finite_step`]) that also
//! notes whether any input is a NaN or an infinity; if one is, a small out-of-line loop
//! ([`special_step`]) computes the special result instead. Every aligned value is an
//! integer of the accumulator width (i64 or i128) times `2^grid`, with the grid a run-time
//! i64; the common max-exponent alignment of products and c packs each term into one
//! i64 ([`packed_node`]); sums too wide for i128 add `c` in a sticky window
//! ([`window_sum`]). [`plan`] decides the width from the checker's `width_bits` and
//! refuses what these schemes cannot compute exactly.

use super::emit::Em;
use super::tables;
use crate::exact::Rounding;
use crate::format::{FloatFormat, Format, Specials};
use crate::ir::*;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    BlockArg, InstBuilder, MemFlagsData, StackSlot, StackSlotData, StackSlotKind, Type, Value,
    types,
};

/// Headroom the rounding helpers need above the checker's width (sign, a rounding carry,
/// and the `|x| < 2^(w-2)` bound of [`Em::round_right`]).
const HEADROOM: u32 = 3;

/// What the fused lowering decided before emitting code.
pub(crate) struct Plan {
    pub w: Type,
    a: FloatFormat,
    b: FloatFormat,
    scale: Option<FloatFormat>,
    /// The static grid of each node whose terms are all exact (`keep` none).
    node_grid: Vec<Option<i64>>,
    /// The last alignment is a wide exact sum: narrow part plus c in a sticky window.
    wide: bool,
    /// The last alignment is an exact sum too wide for any window: a multi-limb
    /// accumulator ([`limb_sum`]).
    limbs: Option<LimbPlan>,
    /// Every exponent a term can take fits the packed layout of [`packed_node`].
    pack_ok: bool,
    /// The lowest grid of an (unscaled-group) product sum.
    product_min_grid: i64,
    /// T-FDPA lowered four products per SIMD instruction ([`simd_node`]), keeping this F.
    simd: Option<i64>,
}

/// A multi-limb fixed-point accumulator for the last alignment: `digits` limbs of 32-bit
/// digits (held in i64 so that signed digit additions never carry) whose lowest bit has
/// the value `2^lsb`.
pub(crate) struct LimbPlan {
    lsb: i64,
    digits: usize,
}

/// The most limbs a multi-limb accumulator may have (8192 bits).
const MAX_LIMBS: usize = 256;

/// Check that the last alignment `n` is an exact sum the multi-limb accumulator computes:
/// only products and c, all exact, and roundings that keep at most 62 fraction bits (the
/// window taken from the accumulator keeps at least 65 bits and a sticky bit below them).
fn limb_plan(
    inst: &Instruction,
    f: &Fused,
    n: &AlignNode,
    products: u64,
    prod_top: i64,
    product_lsb: i64,
    c_min_grid: i64,
) -> Result<LimbPlan, String> {
    let plain = n.terms.iter().all(|t| {
        matches!(t.source, TermSource::Products(_) | TermSource::C)
            && t.keep.is_none()
            && t.drop_below.is_none()
    });
    if !plain || f.grouping.is_some() {
        return Err(format!(
            "an exact sum needs a {}-bit accumulator; the JIT's multi-limb accumulator takes \
             only exact products and c",
            n.width_bits
        ));
    }
    if f.normalize.iter().any(|s| s.fraction_bits > 62) {
        return Err("a normalisation keeps more than 62 fraction bits of a multi-limb sum".into());
    }
    let c = float(&inst.c, "c")?;
    let d = float(&inst.d, "d")?;
    // c is c's format in the first chained step and d's in the others
    let c_top = c.max_exponent().max(d.max_exponent()) as i64 + 1;
    let lsb = product_lsb.min(c_min_grid);
    let top = prod_top.max(c_top);
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

fn float<'a>(f: &'a Format, role: &str) -> Result<&'a FloatFormat, String> {
    f.as_float()
        .ok_or_else(|| format!("{role} has integer format `{}` in a fused pipeline", f.name))
}

fn min_grid(f: &FloatFormat) -> i64 {
    f.min_exponent() as i64 - f.mantissa_bits as i64
}

fn clog2(n: u64) -> u32 {
    64 - n.saturating_sub(1).leading_zeros()
}

/// Check that the fused pipeline can be computed exactly in fixed-width integers and
/// choose the width.
pub(crate) fn plan(inst: &Instruction, f: &Fused) -> Result<Plan, String> {
    let a = float(&inst.a, "a")?.clone();
    let b = float(&inst.b, "b")?.clone();
    let c = float(&inst.c, "c")?;
    let d = float(&inst.d, "d")?;
    if !(d.signed && d.subnormals && d.specials == Specials::Ieee) {
        return Err(format!(
            "the JIT encodes fused results only into signed IEEE-style formats with subnormals, not `{}`",
            inst.d.name
        ));
    }
    if c.mantissa_bits > 60 || d.mantissa_bits > 60 {
        return Err("c or d has more than 60 mantissa bits".into());
    }
    let last = f
        .normalize
        .last()
        .ok_or_else(|| "the pipeline has no normalisation step".to_string())?;
    if last.fraction_bits > d.mantissa_bits || (last.min_exponent as i64) < d.min_exponent() as i64
    {
        return Err(format!(
            "the last normalisation keeps {} bits above exponent floor {}, finer than `{}`",
            last.fraction_bits, last.min_exponent, inst.d.name
        ));
    }
    let scale = match &inst.scale {
        Some(s) => Some(float(&s.format, "the scale")?.clone()),
        None => None,
    };
    if (f.scaled_products || f.grouping.is_some_and(|g| g.scaled)) && scale.is_none() {
        return Err("a scaled pipeline without scale factors".into());
    }
    if f.chain == 0 || !inst.shape.k.is_multiple_of(f.chain) {
        return Err("k is not a multiple of the chain length".into());
    }
    let sig_bits = |x: &FloatFormat| x.mantissa_bits as u64 + 1;
    let mut prod_bits = sig_bits(&a) + sig_bits(&b);
    let mut product_min_grid = min_grid(&a) + min_grid(&b);
    let mut prod_exp_span =
        (a.max_exponent() - a.min_exponent() + b.max_exponent() - b.min_exponent()) as u64;
    if f.scaled_products {
        let s = scale.as_ref().unwrap();
        prod_bits += 2 * sig_bits(s);
        product_min_grid += 2 * min_grid(s);
        prod_exp_span += 2 * (s.max_exponent() - s.min_exponent()) as u64;
    }
    if prod_bits > 62 {
        return Err(format!(
            "exact products of `{}` and `{}` need {prod_bits}-bit significands; the JIT \
             multiplies in 64 bits",
            inst.a.name, inst.b.name
        ));
    }
    let mut need = prod_bits + 2;
    if let Some(g) = f.grouping {
        if g.size == 0 || !f.chain.is_multiple_of(g.size) {
            return Err("the chain length is not a multiple of the group size".into());
        }
        let mut bits = prod_bits + prod_exp_span + clog2(g.size as u64) as u64 + 2;
        if g.scaled {
            bits += 2 * sig_bits(scale.as_ref().unwrap());
        }
        need = need.max(bits);
    }
    // static grids of exact nodes
    let c_min_grid = min_grid(c).min(min_grid(d));
    let group_min_grid = product_min_grid
        + match (f.grouping, &scale) {
            (Some(g), Some(s)) if g.scaled => 2 * min_grid(s),
            _ => 0,
        };
    let mut node_grid: Vec<Option<i64>> = vec![];
    let mut wide = false;
    let mut limbs: Option<LimbPlan> = None;
    // value bounds of the narrow sources: lowest grid and an exclusive top exponent
    let max_exp = |x: &FloatFormat| x.max_exponent() as i64;
    let mut prod_top = max_exp(&a) + max_exp(&b) + 2;
    if f.scaled_products {
        let s = scale.as_ref().unwrap();
        prod_top += 2 * max_exp(s) + 2;
    }
    let group_top = match (f.grouping, &scale) {
        (Some(g), Some(s)) if g.scaled => {
            prod_top + clog2(g.size as u64) as i64 + 2 * max_exp(s) + 2
        }
        (Some(g), _) => prod_top + clog2(g.size as u64) as i64,
        _ => prod_top,
    };
    for (ni, n) in f.nodes.iter().enumerate() {
        let exact = n.terms.iter().filter(|t| t.keep.is_none()).count();
        if exact > 0 && exact < n.terms.len() {
            return Err(format!(
                "alignment {ni} mixes exact and rounded terms; the JIT does not lower that"
            ));
        }
        let too_wide = (n.width_bits + HEADROOM) as u64 > 128;
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
        let narrow_count: u64 = n
            .terms
            .iter()
            .map(|t| match t.source {
                TermSource::Products(ProductsPart::All) => f.chain as u64,
                TermSource::Products(_) => f.chain.div_ceil(2) as u64,
                TermSource::Groups => (f.chain / f.grouping.map(|g| g.size).unwrap_or(1)) as u64,
                _ => 0,
            })
            .sum();
        if exact > 0 {
            let mut g = i64::MAX;
            for t in &n.terms {
                let tg = match t.source {
                    TermSource::Products(_) => product_min_grid,
                    TermSource::C if wide_here => continue,
                    TermSource::C => c_min_grid,
                    TermSource::Groups => group_min_grid,
                    TermSource::Node(i) => node_grid.get(i).copied().flatten().ok_or_else(|| {
                        format!("alignment {ni} keeps alignment {i} exact, but that one has a run-time grid")
                    })?,
                };
                g = g.min(tg);
            }
            node_grid.push(Some(g));
        } else {
            node_grid.push(None);
        }
        if wide_here {
            let top = n
                .terms
                .iter()
                .map(|t| match t.source {
                    TermSource::Groups => group_top,
                    TermSource::Products(_) => prod_top,
                    _ => i64::MIN,
                })
                .max()
                .unwrap_or(i64::MIN);
            let lsb = match (node_grid[ni], n.reference) {
                (Some(g), _) => g,
                (None, Reference::Fixed(r)) => {
                    r as i64
                        - n.terms
                            .iter()
                            .filter_map(|t| t.keep.map(|k| k.0 as i64))
                            .max()
                            .unwrap_or(0)
                }
                _ => unreachable!("wide sums have a fixed grid"),
            };
            let narrow = (top - lsb).max(0) + clog2(narrow_count.max(1)) as i64 + 3;
            if narrow > 118 {
                // too wide for an i128 as well: a multi-limb accumulator, if the sum is
                // one of plain products and c
                limbs = Some(limb_plan(
                    inst,
                    f,
                    n,
                    narrow_count,
                    prod_top,
                    lsb,
                    c_min_grid,
                )?);
                node_grid[ni] = Some(limbs.as_ref().map_or(lsb, |l| l.lsb));
            } else {
                wide = true;
            }
            need = need.max(128);
        } else {
            need = need.max((n.width_bits + HEADROOM) as u64);
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
    Ok(Plan {
        simd,
        w,
        wide,
        limbs,
        pack_ok,
        a,
        b,
        scale,
        node_grid,
        product_min_grid,
    })
}

/// A term on its way into an alignment: the value `x * 2^(natural_exp - d)` (for base
/// terms kept as sign and magnitude, `x` formed only when needed), its exponent in the
/// max search and whether it takes part in it (`None`: always).
#[derive(Clone, Copy)]
struct TermV {
    neg: Value,
    sig: Option<Value>,
    x: Option<Value>,
    d: i64,
    exp: Value,
    natural_exp: Value,
    present: Option<Value>,
    zero: Value,
    /// The sum of an earlier alignment (its exponent does not bound its value).
    node: bool,
    /// Bits of `sig` (0 where the value is only in `x`).
    sig_bits: u32,
    /// The sign already in place at bit [`SIGN_BIT`] of an i64 (0 or 1 << 40), when it
    /// came cheaply from the raw codes; otherwise `neg` is used.
    sign40: Option<Value>,
    /// True (i8) if an input of this term is a NaN or an infinity: the value is then
    /// meaningless and the special path decides the result.
    special: Option<Value>,
}

impl TermV {
    fn signed(&self, em: &mut Em) -> Value {
        match (self.x, self.sig) {
            (Some(x), _) => x,
            (None, Some(sig)) => em.signed(self.neg, sig),
            (None, None) => unreachable!("a term has a value"),
        }
    }
    fn grid(&self, em: &mut Em) -> Value {
        em.b.ins().iadd_imm_s(self.natural_exp, -self.d)
    }
}

/// The special-value outcome so far.
struct Specials3 {
    nan: Value,
    pos_inf: Value,
    neg_inf: Value,
}

impl Specials3 {
    fn add(&mut self, em: &mut Em, nan: Value, inf: Value, neg: Value) {
        self.nan = em.or(self.nan, nan);
        let pos = em.not(neg);
        let pi = em.and(inf, pos);
        let ni = em.and(inf, neg);
        self.pos_inf = em.or(self.pos_inf, pi);
        self.neg_inf = em.or(self.neg_inf, ni);
    }
}

/// The operand pointers of one kernel call.
pub(crate) struct Ptrs {
    pub a: Value,
    pub b: Value,
    pub sa: Value,
    pub sb: Value,
}

/// Emit the whole dot-product-add: every chained step in order. Returns d's bits (i64).
pub(crate) fn emit(
    em: &mut Em,
    inst: &Instruction,
    f: &Fused,
    p: &Plan,
    c: Value,
    ptrs: &Ptrs,
) -> Value {
    let mut c = c;
    let mut c_format = &inst.c;
    // one accumulator for every chained step
    let slot = p.limbs.as_ref().map(|l| {
        em.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            ((l.digits + 2) * 8) as u32,
            3,
        ))
    });
    for start in (0..inst.k()).step_by(f.chain as usize) {
        c = emit_step(em, inst, f, p, c_format, c, ptrs, start, slot);
        c_format = &inst.d;
    }
    c
}

fn zero_rule(
    em: &mut Em,
    rule: ZeroExponent,
    zero: Value,
    natural: Value,
) -> (Value, Option<Value>) {
    match rule {
        ZeroExponent::Natural => (natural, None),
        ZeroExponent::Fixed(e) => {
            let ec = em.i64c(e as i64);
            (em.sel(zero, ec, natural), None)
        }
        ZeroExponent::Never => (natural, Some(em.not(zero))),
    }
}

/// Is this code a NaN or an infinity? Two instructions: a mask and a compare.
fn special_code(em: &mut Em, f: &FloatFormat, raw: Value) -> Option<Value> {
    let (e, m, ign) = (
        f.exponent_bits as i64,
        f.mantissa_bits as i64,
        f.ignored_low_bits as i64,
    );
    let (mask, want) = match f.specials {
        Specials::Ieee => {
            let x = ((1i64 << e) - 1) << (m + ign);
            (x, x)
        }
        Specials::Fn => {
            let x = ((1i64 << (e + m)) - 1) << ign;
            (x, x)
        }
        Specials::Fnuz => (((1i64 << (e + m + 1)) - 1) << ign, (1i64 << (e + m)) << ign),
        Specials::None => return None,
    };
    let v = em.b.ins().band_imm_s(raw, mask);
    Some(em.icmp_imm(IntCC::Equal, v, want))
}

/// One chained step. The lean [`finite_step`] runs first and notes whether any input is
/// a NaN or an infinity; if one is, the result is a NaN or an infinity (every input feeds
/// a product, c or a group scale) and the compact [`special_step`] computes which.
#[allow(clippy::too_many_arguments)]
fn emit_step(
    em: &mut Em,
    inst: &Instruction,
    f: &Fused,
    p: &Plan,
    c_format: &Format,
    c_raw: Value,
    ptrs: &Ptrs,
    start: usize,
    slot: Option<StackSlot>,
) -> Value {
    let mut special: Option<Value> = None;
    let r = finite_step(
        em,
        inst,
        f,
        p,
        c_format,
        c_raw,
        ptrs,
        start,
        slot,
        &mut special,
    );
    let Some(any) = special else {
        return r;
    };
    let slow = em.b.create_block();
    let merge = em.b.create_block();
    em.b.append_block_param(merge, types::I64);
    em.b.ins()
        .brif(any, slow, &[], merge, &[BlockArg::Value(r)]);
    em.b.set_cold_block(slow);
    em.b.switch_to_block(slow);
    let r = special_step(em, inst, f, p, c_format, c_raw, ptrs, start);
    em.b.ins().jump(merge, &[BlockArg::Value(r)]);
    em.b.switch_to_block(merge);
    em.b.block_params(merge)[0]
}

fn or_flag(em: &mut Em, acc: &mut Option<Value>, x: Option<Value>) {
    if let Some(x) = x {
        *acc = Some(match *acc {
            None => x,
            Some(a) => em.or(a, x),
        });
    }
}

/// The d encoding of NaN, and of an infinity (NaN where d has none).
fn nan_bits(inst: &Instruction) -> i64 {
    inst.d.encode_nan().unwrap_or(0) as i64
}
fn inf_bits(inst: &Instruction, neg: bool) -> i64 {
    inst.d.encode_inf(neg).unwrap_or(nan_bits(inst) as u64) as i64
}

/// The result when some input is a NaN or an infinity: the interpreter's special rules
/// (NaN inputs, `0 * Inf`, opposite infinities, products overflowing to Inf).
#[allow(clippy::too_many_arguments)]
fn special_step(
    em: &mut Em,
    inst: &Instruction,
    f: &Fused,
    p: &Plan,
    c_format: &Format,
    c_raw: Value,
    ptrs: &Ptrs,
    start: usize,
) -> Value {
    let cond = f.conditioning;
    let l = f.chain as usize;
    let f0 = em.boolc(false);
    let mut sp = Specials3 {
        nan: f0,
        pos_inf: f0,
        neg_inf: f0,
    };
    let cf = c_format.as_float().expect("planned");
    let dc = em.decode_float(cf, c_raw, cond.flush_c);
    sp.add(em, dc.nan, dc.inf, dc.neg);
    let block = inst.scale.as_ref().map(|s| s.block as usize).unwrap_or(1);
    let scale_base = start / block;
    let fr = (p.a.mantissa_bits + p.b.mantissa_bits) as i64;
    // a loop over the products: this path is rare, so it is kept small
    let head = em.b.create_block();
    let body = em.b.create_block();
    let exit = em.b.create_block();
    em.b.append_block_param(head, types::I64);
    for _ in 0..3 {
        em.b.append_block_param(head, types::I8);
    }
    for _ in 0..3 {
        em.b.append_block_param(exit, types::I8);
    }
    let k0 = em.i64c(0);
    em.b.ins().jump(
        head,
        &[
            BlockArg::Value(k0),
            BlockArg::Value(sp.nan),
            BlockArg::Value(sp.pos_inf),
            BlockArg::Value(sp.neg_inf),
        ],
    );
    em.b.switch_to_block(head);
    let hp = em.b.block_params(head).to_vec();
    let k = hp[0];
    sp = Specials3 {
        nan: hp[1],
        pos_inf: hp[2],
        neg_inf: hp[3],
    };
    let more = em.icmp_imm(IntCC::SignedLessThan, k, l as i64);
    em.b.ins().brif(
        more,
        body,
        &[],
        exit,
        &[
            BlockArg::Value(sp.nan),
            BlockArg::Value(sp.pos_inf),
            BlockArg::Value(sp.neg_inf),
        ],
    );
    em.b.switch_to_block(body);
    {
        let kk = em.b.ins().iadd_imm_s(k, start as i64);
        let ra = em.load_at(ptrs.a, kk);
        let rb = em.load_at(ptrs.b, kk);
        let da = em.decode_float(&p.a, ra, cond.flush_a);
        let db = em.decode_float(&p.b, rb, cond.flush_b);
        let (mut nan, mut inf, mut neg, mut zero) = {
            let ab = em.or(da.nan, db.nan);
            let x = em.and(da.inf, db.zero);
            let y = em.and(db.inf, da.zero);
            let xy = em.or(x, y);
            let nan = em.or(ab, xy);
            let anyinf = em.or(da.inf, db.inf);
            let notnan = em.not(nan);
            let inf = em.and(anyinf, notnan);
            let neg = em.b.ins().bxor(da.neg, db.neg);
            let z = em.or(da.zero, db.zero);
            let sa = em.or(da.nan, da.inf);
            let sb = em.or(db.nan, db.inf);
            let sab = em.or(sa, sb);
            let fin = em.not(sab);
            (nan, inf, neg, em.and(z, fin))
        };
        let mut sig = em.b.ins().imul(da.sig, db.sig);
        let e = em.b.ins().iadd(da.exp, db.exp);
        let mut grid = em.b.ins().iadd_imm_s(e, -fr);
        if f.scaled_products {
            let s = p.scale.as_ref().expect("planned");
            let kb = em.b.ins().udiv_imm_u(k, block as i64);
            let idx = em.b.ins().iadd_imm_s(kb, scale_base as i64);
            let rx = em.load_at(ptrs.sa, idx);
            let ry = em.load_at(ptrs.sb, idx);
            let x = em.decode_float(s, rx, false);
            let y = em.decode_float(s, ry, false);
            let sc = scale_product(em, &x, &y);
            let n1 = em.or(nan, sc.nan);
            let i1 = em.and(inf, sc.zero);
            let i2 = em.and(sc.inf, zero);
            let i12 = em.or(i1, i2);
            nan = em.or(n1, i12);
            let ii = em.or(inf, sc.inf);
            let nn = em.not(nan);
            inf = em.and(ii, nn);
            neg = em.b.ins().bxor(neg, sc.neg);
            let sz = em.or(zero, sc.zero);
            let special = em.or(nan, inf);
            let fin = em.not(special);
            zero = em.and(sz, fin);
            sig = em.b.ins().imul(sig, sc.sig);
            grid = em.b.ins().iadd(grid, sc.exp);
            grid = em.b.ins().iadd_imm_s(grid, -2 * s.mantissa_bits as i64);
        }
        let _ = zero;
        if let Some(x) = f.product_overflow {
            let o = overflows(em, sig, grid, x);
            let special = em.or(nan, inf);
            let fin = em.not(special);
            let o = em.and(o, fin);
            inf = em.or(inf, o);
        }
        sp.add(em, nan, inf, neg);
        let next = em.b.ins().iadd_imm_s(k, 1);
        em.b.ins().jump(
            head,
            &[
                BlockArg::Value(next),
                BlockArg::Value(sp.nan),
                BlockArg::Value(sp.pos_inf),
                BlockArg::Value(sp.neg_inf),
            ],
        );
    }
    em.b.switch_to_block(exit);
    let ep = em.b.block_params(exit).to_vec();
    sp = Specials3 {
        nan: ep[0],
        pos_inf: ep[1],
        neg_inf: ep[2],
    };
    if let Some(g) = f.grouping
        && g.scaled
    {
        let s = p.scale.as_ref().expect("planned");
        let gs = g.size as usize;
        for gi in 0..l / gs {
            let idx = scale_base + gi * gs / block;
            let rx = em.load(ptrs.sa, idx);
            let ry = em.load(ptrs.sb, idx);
            let x = em.decode_float(s, rx, false);
            let y = em.decode_float(s, ry, false);
            let sc = scale_product(em, &x, &y);
            sp.add(em, sc.nan, sc.inf, sc.neg);
        }
    }
    let both = em.and(sp.pos_inf, sp.neg_inf);
    let is_nan = em.or(sp.nan, both);
    let ip = em.i64c(inf_bits(inst, false));
    let inn = em.i64c(inf_bits(inst, true));
    let infv = em.sel(sp.neg_inf, inn, ip);
    // some input is special, so the result is NaN or Inf; with neither flag it is Inf
    // only by an infinity of one sign, which `infv` already encodes
    let nanc = em.i64c(nan_bits(inst));
    em.sel(is_nan, nanc, infv)
}

/// `p * 2^gp + c * 2^gc` as `s * 2^g` in an i128, exactly as far as any rounding to at
/// most 118 bits below the sum's leading bit can tell. `p` spans at most 118 bits and `c`
/// at most 54, so when their bits do not fit one 124-bit window below the larger operand's
/// top, the smaller operand lies wholly below the larger one's half (no cancellation can
/// expose its low bits): its bits below the window are ORed into its lowest kept bit
/// (a sticky bit), which keeps the sum strictly inside the same interval between
/// rounding points, and exact sums exact.
fn window_sum(em: &mut Em, p: Value, gp: Value, c: Value, gc: Value) -> (Value, Value) {
    let floor = em.i64c(i64::MIN / 4);
    let top_of = |em: &mut Em, x: Value, g: Value| {
        let mag = em.abs_w(x);
        let bl = em.bit_length(mag);
        let t = em.b.ins().iadd(g, bl);
        let z = em.icmp_imm(IntCC::Equal, bl, 0);
        em.sel(z, floor, t)
    };
    let tp = top_of(em, p, gp);
    let tc = top_of(em, c, gc);
    let top = em.b.ins().smax(tp, tc);
    let low = em.b.ins().smin(gp, gc);
    let win = em.b.ins().iadd_imm_s(top, -124);
    let g = em.b.ins().smax(low, win);
    let sp = em.b.ins().isub(g, gp);
    let p2 = jam_shift(em, p, sp);
    let sc = em.b.ins().isub(g, gc);
    let c2 = jam_shift(em, c, sc);
    (em.b.ins().iadd(p2, c2), g)
}

/// The exact sum of the base terms `items` (products and c, each `sig * 2^grid`) in the
/// multi-limb accumulator `slot`, returned as `s * 2^g` (an i128 `s` and an i64 `g`) exact
/// as far as any rounding keeping at most 62 fraction bits can tell.
///
/// Each term is shifted by its grid's offset within a 32-bit digit and added, signed, to
/// the two or three digits it covers (limbs are i64, so no addition carries: every limb
/// takes at most 4097 values below 2^32 in magnitude). Then one pass propagates the carries
/// (leaving 32-bit digits and the sign), a second negates a negative sum into its
/// magnitude, and a third finds the leading nonzero digit. The result is that digit and
/// the two below it (at least 65 significant bits) with every lower bit ORed into the
/// window's lowest bit: below any rounding point a normalisation can choose, it keeps the
/// sum inside the same interval between rounding points, and exact sums exact.
///
/// Terms of special inputs have meaningless grids; their digit index is clamped into the
/// accumulator, so they never address outside it (the special path discards the sum).
fn limb_sum(
    em: &mut Em,
    items: &[(TermV, &AlignTerm)],
    lp: &LimbPlan,
    slot: StackSlot,
) -> (Value, Value) {
    let n = lp.digits;
    let flags = MemFlagsData::trusted();
    let base = em.b.ins().stack_addr(types::I64, slot, 0);
    let zero = em.i64c(0);
    for j in 0..n + 2 {
        em.b.ins().store(flags, zero, base, (j * 8) as i32);
    }
    let add = |em: &mut Em, at: Value, off: i32, v: Value| {
        let old = em.b.ins().load(types::I64, flags, at, off);
        let new = em.b.ins().iadd(old, v);
        em.b.ins().store(flags, new, at, off);
    };
    let max_j = em.i64c(n as i64 - 3);
    for (t, _) in items {
        let sig = t
            .sig
            .expect("planned: the terms of a multi-limb sum are products and c");
        let grid = t.grid(em);
        let pos = em.b.ins().iadd_imm_s(grid, -lp.lsb);
        let j = em.b.ins().ushr_imm_s(pos, 5);
        let j = em.b.ins().umin(j, max_j);
        let o = em.b.ins().band_imm_s(pos, 31);
        let off = em.b.ins().ishl_imm_s(j, 3);
        let at = em.b.ins().iadd(base, off);
        if t.sig_bits <= 32 {
            // sig < 2^32: the shifted magnitude is below 2^63
            let v = em.b.ins().ishl(sig, o);
            let nv = em.b.ins().ineg(v);
            let v = em.sel(t.neg, nv, v);
            let lo = em.b.ins().band_imm_s(v, 0xffff_ffff);
            let hi = em.b.ins().sshr_imm_s(v, 32);
            add(em, at, 0, lo);
            add(em, at, 8, hi);
        } else {
            let w = em.b.ins().uextend(types::I128, sig);
            let v = em.b.ins().ishl(w, o);
            let nv = em.b.ins().ineg(v);
            let v = em.sel(t.neg, nv, v);
            let (lo, hi) = em.b.ins().isplit(v);
            let d0 = em.b.ins().band_imm_s(lo, 0xffff_ffff);
            let d1 = em.b.ins().ushr_imm_s(lo, 32);
            add(em, at, 0, d0);
            add(em, at, 8, d1);
            add(em, at, 16, hi);
        }
    }
    // carries: 32-bit digits and the sign
    let mut carry = zero;
    let mut digits = Vec::with_capacity(n);
    for j in 0..n {
        let l = em.b.ins().load(types::I64, flags, base, (j * 8) as i32);
        let t = em.b.ins().iadd(l, carry);
        digits.push(em.b.ins().band_imm_s(t, 0xffff_ffff));
        carry = em.b.ins().sshr_imm_s(t, 32);
    }
    let neg = em.icmp_imm(IntCC::SignedLessThan, carry, 0);
    // the magnitude: complement and add one where negative; stored two digits up, above
    // two zero digits, for the window's loads
    let ones = em.i64c(0xffff_ffff);
    let flip = em.sel(neg, ones, zero);
    let mut c = em.b.ins().uextend(types::I64, neg);
    let mut mag = Vec::with_capacity(n);
    for (j, &dj) in digits.iter().enumerate() {
        let x = em.b.ins().bxor(dj, flip);
        let t = em.b.ins().iadd(x, c);
        let m = em.b.ins().band_imm_s(t, 0xffff_ffff);
        c = em.b.ins().ushr_imm_s(t, 32);
        em.b.ins().store(flags, m, base, ((j + 2) * 8) as i32);
        mag.push(m);
    }
    em.b.ins().store(flags, zero, base, 0);
    em.b.ins().store(flags, zero, base, 8);
    // the leading digit, and the OR of every digit more than two below it
    let mut hi = zero;
    let mut sticky = zero;
    let mut below = vec![zero];
    for (j, &m) in mag.iter().enumerate() {
        let prev = *below.last().expect("non-empty");
        below.push(em.b.ins().bor(prev, m));
        let nz = em.icmp_imm(IntCC::NotEqual, m, 0);
        let jc = em.i64c(j as i64);
        hi = em.sel(nz, jc, hi);
        let s = below[j.saturating_sub(2)];
        sticky = em.sel(nz, s, sticky);
    }
    let off = em.b.ins().ishl_imm_s(hi, 3);
    let at = em.b.ins().iadd(base, off);
    let w0 = em.b.ins().load(types::I64, flags, at, 0);
    let w1 = em.b.ins().load(types::I64, flags, at, 8);
    let w2 = em.b.ins().load(types::I64, flags, at, 16);
    let w1 = em.b.ins().ishl_imm_s(w1, 32);
    let low = em.b.ins().bor(w1, w0);
    let st = em.icmp_imm(IntCC::NotEqual, sticky, 0);
    let st = em.b.ins().uextend(types::I64, st);
    let low = em.b.ins().bor(low, st);
    let win = em.b.ins().iconcat(low, w2);
    let nwin = em.b.ins().ineg(win);
    let s = em.sel(neg, nwin, win);
    // the window's lowest digit is digit hi - 2
    let g = em.b.ins().ishl_imm_s(hi, 5);
    let g = em.b.ins().iadd_imm_s(g, lp.lsb - 64);
    (s, g)
}

/// `x * 2^-s`: an exact left shift for `s <= 0`, else a right shift of the magnitude with
/// the dropped bits ORed into the lowest kept bit.
/// `drop below n`: the aligned term `x` becomes 0 when the term is present and its
/// exponent lies below `reference - n`.
fn drop_below(em: &mut Em, n: Option<u32>, reference: Value, t: &TermV, x: Value) -> Value {
    let Some(n) = n else { return x };
    let lim = em.b.ins().iadd_imm_s(reference, -(n as i64));
    let below = em.icmp(IntCC::SignedLessThan, t.exp, lim);
    let dropped = match t.present {
        Some(pr) => em.and(pr, below),
        None => below,
    };
    let z = em.wc(0);
    em.sel(dropped, z, x)
}

fn jam_shift(em: &mut Em, x: Value, s: Value) -> Value {
    let ns = em.b.ins().ineg(s);
    let l = em.clamp_shift(ns);
    let left = em.b.ins().ishl(x, l);
    let r = em.clamp_shift(s);
    let is_neg = em.icmp_imm(IntCC::SignedLessThan, x, 0);
    let mag = em.abs_w(x);
    let q = em.b.ins().ushr(mag, r);
    let back = em.b.ins().ishl(q, r);
    let lost = em.icmp(IntCC::NotEqual, back, mag);
    let lost = em.b.ins().uextend(em.w, lost);
    let q = em.b.ins().bor(q, lost);
    let nq = em.neg(q);
    let right = em.sel(is_neg, nq, q);
    let pos = em.icmp_imm(IntCC::SignedGreaterThan, s, 0);
    em.sel(pos, right, left)
}

/// Does the finite product `sig * 2^grid` (sig > 0) reach `2^x`?
fn overflows(em: &mut Em, sig: Value, grid: Value, x: i32) -> Value {
    let lz = em.b.ins().clz(sig);
    let top = em.b.ins().isub(grid, lz);
    let le = em.b.ins().iadd_imm_s(top, 63);
    let big = em.icmp_imm(IntCC::SignedGreaterThanOrEqual, le, x as i64);
    let nz = em.icmp_imm(IntCC::NotEqual, sig, 0);
    em.and(big, nz)
}

/// Offset of the biased exponents in [`packed_node`].
const EXP_OFFSET: i64 = 1 << 20;
/// Bit positions of a packed term: significand below `SIGN_BIT`, exponent above.
const SIGN_BIT: i64 = 40;
const EXP_SHIFT: i64 = 41;
/// Set in a packed term whose inputs include a NaN or an infinity (above every biased
/// exponent, which stays below 2^21).
const SPECIAL_BIT: i64 = 62;

/// The common alignment (max exponent, every term a product or c kept with F bits) with
/// each term packed into one i64 `biased_exp << 41 | neg << 40 | sig`: the max of the
/// packed values carries the max exponent, and one live value per term keeps the
/// registers from spilling. `None` when the node does not have that form.
fn packed_node(
    em: &mut Em,
    node: &AlignNode,
    items: &[(TermV, &AlignTerm)],
    rounded: bool,
) -> Option<(TermV, Option<Value>)> {
    let ok = rounded
        && node.reference == Reference::MaxExponent
        && em.w == types::I64
        && !items.is_empty()
        && items.iter().all(|(t, at)| {
            !t.node
                && t.sig.is_some()
                && at.keep.is_some()
                && t.sig_bits >= 1
                && t.sig_bits <= SIGN_BIT as u32
        });
    if !ok {
        return None;
    }
    let fmax = items
        .iter()
        .map(|(_, at)| at.keep.unwrap().0 as i64)
        .max()?;
    let mut packed = Vec::with_capacity(items.len());
    let mut any_special = false;
    let mut any: Option<Value> = None;
    let mut always = false;
    for (t, _) in items {
        let e = match t.present {
            None => {
                always = true;
                t.exp
            }
            Some(pr) => {
                any = Some(match any {
                    None => pr,
                    Some(a) => em.or(a, pr),
                });
                let absent = em.i64c(-EXP_OFFSET);
                em.sel(pr, t.exp, absent)
            }
        };
        let eb = em.b.ins().iadd_imm_s(e, EXP_OFFSET);
        let hi = em.b.ins().ishl_imm_s(eb, EXP_SHIFT);
        let n = match t.sign40 {
            Some(s) => s,
            None => {
                let n = em.b.ins().uextend(types::I64, t.neg);
                em.b.ins().ishl_imm_s(n, SIGN_BIT)
            }
        };
        let x = em.b.ins().bor(hi, n);
        let x = em.b.ins().bor(x, t.sig.unwrap());
        // a special input sets the top exponent bit: the max then shows it
        let x = match t.special {
            Some(flag) => {
                let f64v = em.b.ins().uextend(types::I64, flag);
                let fb = em.b.ins().ishl_imm_s(f64v, SPECIAL_BIT);
                any_special = true;
                em.b.ins().bor(x, fb)
            }
            None => x,
        };
        packed.push(x);
    }
    let m = tree(em, packed.clone(), |em, x, y| em.b.ins().smax(x, y));
    let rb = em.b.ins().ushr_imm_s(m, EXP_SHIFT);
    let flag = if any_special {
        Some(em.icmp_imm(
            IntCC::UnsignedGreaterThanOrEqual,
            rb,
            1i64 << (SPECIAL_BIT - EXP_SHIFT),
        ))
    } else {
        None
    };
    let mut kept: Vec<Value> = Vec::with_capacity(items.len());
    let top = em.i64c(63);
    for ((t, at), &pk) in items.iter().zip(&packed) {
        let (fb, mode) = at.keep.unwrap();
        let fb = fb as i64;
        let pre = (fb - t.d).max(0);
        let post = (t.d - fb).max(0);
        let eb = em.b.ins().ushr_imm_s(pk, EXP_SHIFT);
        let rp = em.b.ins().iadd_imm_s(rb, post);
        let sh = em.b.ins().isub(rp, eb);
        let s = em.b.ins().umin(sh, top);
        let mag = em.b.ins().band_imm_s(pk, (1i64 << SIGN_BIT) - 1);
        let mag = if pre > 0 {
            em.b.ins().ishl_imm_s(mag, pre)
        } else {
            mag
        };
        let nb = em.b.ins().band_imm_s(pk, 1i64 << SIGN_BIT);
        let is_neg = em.icmp_imm(IntCC::NotEqual, nb, 0);
        let v = if mode == Rounding::TowardZero {
            let q = em.b.ins().ushr(mag, s);
            let nq = em.neg(q);
            em.sel(is_neg, nq, q)
        } else {
            let nm = em.neg(mag);
            let x = em.sel(is_neg, nm, mag);
            em.round_right(x, s, mode)
        };
        let up = fmax - fb;
        let v = if up > 0 {
            em.b.ins().ishl_imm_s(v, up)
        } else {
            v
        };
        let v = match at.drop_below {
            Some(n) => {
                // biased exponents compare like exponents; an absent term is 0 anyway
                let lim = em.b.ins().iadd_imm_s(rb, -(n as i64));
                let below = em.icmp(IntCC::SignedLessThan, eb, lim);
                let z = em.i64c(0);
                em.sel(below, z, v)
            }
            None => v,
        };
        kept.push(v);
    }
    let sum = (!kept.is_empty()).then(|| tree(em, kept, |em, x, y| em.b.ins().iadd(x, y)));
    let sum = sum?;
    let r = em.b.ins().iadd_imm_s(rb, -EXP_OFFSET);
    let (r, present) = if always {
        (r, None)
    } else {
        let any = any?;
        let zero = em.i64c(0);
        (em.sel(any, r, zero), Some(any))
    };
    let zero = em.icmp_imm(IntCC::Equal, sum, 0);
    // `neg` is unused where the value is in `x`
    let no_sign = em.boolc(false);
    let term = TermV {
        neg: no_sign,
        sig: None,
        x: Some(sum),
        d: fmax,
        exp: r,
        natural_exp: r,
        present,
        zero,
        node: true,
        sig_bits: 0,
        special: None,
        sign40: None,
    };
    Some((term, flag))
}

/// Does the fused pipeline have the form [`simd_node`] computes? Then its F.
///
/// One alignment of all products and c to their largest exponent, each truncated to F
/// fraction bits; signed inputs with subnormals whose codes fit 32 bits and whose exact
/// products fit 31 bits (f16, bf16, tf32, FP8, FP6, FP4); and every power of two the
/// kernel forms, and every scaled term, a normal f64, with the sum of the truncated terms
/// exact in f64.
fn simd_plan(
    inst: &Instruction,
    f: &Fused,
    a: &FloatFormat,
    b: &FloatFormat,
    c: &FloatFormat,
    d: &FloatFormat,
) -> Option<i64> {
    let cond = f.conditioning;
    if f.nodes.len() != 1
        || f.scaled_products
        || f.grouping.is_some()
        || f.product_overflow.is_some()
        || cond.flush_a
        || cond.flush_b
        || !f.chain.is_multiple_of(4)
        || inst.scale.is_some()
    {
        return None;
    }
    let n = &f.nodes[0];
    if n.reference != Reference::MaxExponent || n.terms.len() != 2 {
        return None;
    }
    let mut keep = None;
    let (mut products, mut has_c) = (false, false);
    for t in &n.terms {
        match (t.keep, t.drop_below) {
            (Some((fb, Rounding::TowardZero)), None) if keep.is_none_or(|k| k == fb) => {
                keep = Some(fb)
            }
            _ => return None,
        }
        match t.source {
            TermSource::Products(ProductsPart::All) => products = true,
            TermSource::C => has_c = true,
            _ => return None,
        }
    }
    let big_f = keep? as i64;
    let ok = |x: &FloatFormat| {
        x.subnormals && x.signed && x.storage_bits <= 32 && x.ignored_low_bits + x.code_bits() <= 32
    };
    if !(products && has_c && ok(a) && ok(b)) || a.mantissa_bits + b.mantissa_bits + 2 > 31 {
        return None;
    }
    // c's significand converts to f64 exactly; the sum stays below 2^52
    if c.mantissa_bits.max(d.mantissa_bits) > 52
        || big_f + 2 + clog2(f.chain as u64 + 1) as i64 > 52
    {
        return None;
    }
    let ez_p = match f.zero_exponent.products {
        ZeroExponent::Natural => None,
        ZeroExponent::Fixed(e) => Some(e as i64),
        ZeroExponent::Never => return None,
    };
    let fr = (a.mantissa_bits + b.mantissa_bits) as i64;
    let e_lo = (a.min_exponent() + b.min_exponent()) as i64;
    // special codes decode one above the largest exponent
    let e_hi = (a.max_exponent() + b.max_exponent()) as i64 + 2;
    let c_lo = c.min_exponent().min(d.min_exponent()) as i64;
    let c_hi = c.max_exponent().max(d.max_exponent()) as i64 + 1;
    let r_lo = e_lo.min(ez_p.unwrap_or(e_lo));
    let r_hi = e_hi.max(c_hi).max(match f.zero_exponent.c {
        ZeroExponent::Fixed(e) => e as i64,
        _ => c_hi,
    });
    let (mc_lo, mc_hi) = (
        c.mantissa_bits.min(d.mantissa_bits) as i64,
        c.mantissa_bits.max(d.mantissa_bits) as i64,
    );
    let powers = [
        e_lo - fr + big_f - r_hi,
        e_hi - fr + big_f - r_lo,
        c_lo - mc_hi + big_f - r_hi,
        c_hi - mc_lo + big_f - r_lo,
    ];
    powers
        .iter()
        .all(|q| (-1000..=1000).contains(q))
        .then_some(big_f)
}

/// A 16-byte shuffle immediate.
fn shuffle_mask(em: &mut Em, bytes: [u8; 16]) -> cranelift_codegen::ir::Immediate {
    em.b.func
        .dfg
        .immediates
        .push(cranelift_codegen::ir::ConstantData::from(bytes.to_vec()))
}

fn splat32(em: &mut Em, v: i64) -> Value {
    let x = em.b.ins().iconst(types::I32, v);
    em.b.ins().splat(types::I32X4, x)
}

/// Lanes 2 and 3 of an i32x4 moved to lanes 0 and 1.
fn high_half(em: &mut Em, x: Value, mask: cranelift_codegen::ir::Immediate) -> Value {
    let le = MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little);
    let x8 = em.b.ins().bitcast(types::I8X16, le, x);
    let s = em.b.ins().shuffle(x8, x8, mask);
    em.b.ins().bitcast(types::I32X4, le, s)
}

/// The T-FDPA node of [`simd_plan`], four products per SIMD instruction: each i32 lane
/// decodes one element of a and b (significand, exponent with subnormals, NaN/Inf
/// flag), multiplies the significands exactly and adds the exponents; the largest
/// exponent r (zero products taking e_zero) comes from a lane-wise max. Each term's kept
/// value `trunc(sig * 2^(e - fr + F - r))` is then one f64 multiply by a power of two
/// built from the exponent's bits (exact: both are normal f64 and sig has at most 31
/// bits) and one truncation, and the sum of the truncated terms, integers below 2^52, is
/// exact in f64. This is the integer alignment of [`packed_node`], computed in f64x2.
#[allow(clippy::too_many_arguments)]
fn simd_node(
    em: &mut Em,
    f: &Fused,
    p: &Plan,
    big_f: i64,
    c_term: &TermV,
    ptrs: &Ptrs,
    start: usize,
    special: &mut Option<Value>,
) -> TermV {
    let l = f.chain as usize;
    let (fa, fb) = (&p.a, &p.b);
    let le = MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little);
    let vload = MemFlagsData::new()
        .with_notrap()
        .with_readonly()
        .with_can_move();
    let low32 = shuffle_mask(
        em,
        [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27],
    );
    let hi_mask = shuffle_mask(
        em,
        [8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15],
    );
    // the low 32 bits of elements k..k+4
    let load4 = |em: &mut Em, ptr: Value, k: usize| {
        let x = em.b.ins().load(types::I64X2, vload, ptr, (k * 8) as i32);
        let y =
            em.b.ins()
                .load(types::I64X2, vload, ptr, (k * 8 + 16) as i32);
        let x8 = em.b.ins().bitcast(types::I8X16, le, x);
        let y8 = em.b.ins().bitcast(types::I8X16, le, y);
        let s = em.b.ins().shuffle(x8, y8, low32);
        em.b.ins().bitcast(types::I32X4, le, s)
    };
    // (significand, biased exponent max(field, 1), NaN/Inf mask)
    let decode = |em: &mut Em, x: &FloatFormat, raw: Value| -> (Value, Value, Option<Value>) {
        let (m, e) = (x.mantissa_bits as i64, x.exponent_bits as i64);
        let code = if x.ignored_low_bits > 0 {
            em.b.ins().ushr_imm_s(raw, x.ignored_low_bits as i64)
        } else {
            raw
        };
        let mm = splat32(em, (1i64 << m) - 1);
        let man = em.b.ins().band(code, mm);
        let ef = em.b.ins().ushr_imm_s(code, m);
        let emask = splat32(em, (1i64 << e) - 1);
        let ef = em.b.ins().band(ef, emask);
        let zero = splat32(em, 0);
        let sub = em.b.ins().icmp(IntCC::Equal, ef, zero);
        let ex = em.b.ins().isub(ef, sub);
        let one = splat32(em, 1i64 << m);
        let implicit = em.b.ins().band_not(one, sub);
        let sig = em.b.ins().bor(man, implicit);
        // the lane masks of `special_code`
        let sp = match x.specials {
            Specials::Ieee => Some(em.b.ins().icmp(IntCC::Equal, ef, emask)),
            Specials::Fn => {
                let all = splat32(em, (1i64 << (e + m)) - 1);
                let v = em.b.ins().band(code, all);
                Some(em.b.ins().icmp(IntCC::Equal, v, all))
            }
            Specials::Fnuz => {
                let all = splat32(em, (1i64 << (e + m + 1)) - 1);
                let v = em.b.ins().band(code, all);
                let want = splat32(em, 1i64 << (e + m));
                Some(em.b.ins().icmp(IntCC::Equal, v, want))
            }
            Specials::None => None,
        };
        (sig, ex, sp)
    };
    let sign_mask = |em: &mut Em, x: Value, pos: i64| {
        let y = em.b.ins().ishl_imm_s(x, 31 - pos);
        em.b.ins().sshr_imm_s(y, 31)
    };
    let pos = |x: &FloatFormat| (x.ignored_low_bits + x.exponent_bits + x.mantissa_bits) as i64;
    let bias = (fa.bias + fb.bias) as i64;
    let ez = match f.zero_exponent.products {
        ZeroExponent::Fixed(e) => Some(splat32(em, e as i64 + bias)),
        _ => None,
    };
    let mut groups = Vec::with_capacity(l / 4);
    let mut maxv: Option<Value> = None;
    let mut spec: Option<Value> = None;
    for g in 0..l / 4 {
        let ra = load4(em, ptrs.a, start + 4 * g);
        let rb = load4(em, ptrs.b, start + 4 * g);
        let (sa, ea, pa) = decode(em, fa, ra);
        let (sb, eb, pb) = decode(em, fb, rb);
        let sig = em.b.ins().imul(sa, sb);
        let e = em.b.ins().iadd(ea, eb);
        let e_max = match ez {
            Some(z) => {
                let zero = splat32(em, 0);
                let is0 = em.b.ins().icmp(IntCC::Equal, sig, zero);
                em.b.ins().bitselect(is0, z, e)
            }
            None => e,
        };
        maxv = Some(match maxv {
            None => e_max,
            Some(m) => em.b.ins().smax(m, e_max),
        });
        for sp in [pa, pb].into_iter().flatten() {
            spec = Some(match spec {
                None => sp,
                Some(s) => em.b.ins().bor(s, sp),
            });
        }
        let neg = if pos(fa) == pos(fb) {
            let x = em.b.ins().bxor(ra, rb);
            sign_mask(em, x, pos(fa))
        } else {
            let na = sign_mask(em, ra, pos(fa));
            let nb = sign_mask(em, rb, pos(fb));
            em.b.ins().bxor(na, nb)
        };
        let x = em.b.ins().bxor(sig, neg);
        let signed = em.b.ins().isub(x, neg);
        groups.push((signed, e));
    }
    if let Some(spec) = spec {
        let any = em.b.ins().vany_true(spec);
        or_flag(em, special, Some(any));
    }
    or_flag(em, special, c_term.special);
    // the largest exponent
    let maxv = maxv.expect("planned: at least four products");
    let mut r32: Option<Value> = None;
    for lane in 0..4u8 {
        let x = em.b.ins().extractlane(maxv, lane);
        r32 = Some(match r32 {
            None => x,
            Some(r) => em.b.ins().smax(r, x),
        });
    }
    let r = em.b.ins().sextend(types::I64, r32.expect("four lanes"));
    let r = em.b.ins().iadd_imm_s(r, -bias);
    let ce = match c_term.present {
        None => c_term.exp,
        Some(pr) => {
            let floor = em.i64c(i64::MIN / 4);
            em.sel(pr, c_term.exp, floor)
        }
    };
    let r = em.b.ins().smax(r, ce);
    // terms: trunc(sig * 2^(e - bias - fr + F - r)), the power's f64 exponent field
    // e + (F - fr - bias + 1023) - r
    let fr = (fa.mantissa_bits + fb.mantissa_bits) as i64;
    let k = em.i64c(big_f - fr - bias + 1023);
    let kr = em.b.ins().isub(k, r);
    let kr = em.b.ins().ireduce(types::I32, kr);
    let krv = em.b.ins().splat(types::I32X4, kr);
    let mut terms = Vec::with_capacity(l / 2);
    for (signed, e) in groups {
        let pw = em.b.ins().iadd(e, krv);
        let pw_hi = high_half(em, pw, hi_mask);
        let s_hi = high_half(em, signed, hi_mask);
        for (pw, s) in [(pw, signed), (pw_hi, s_hi)] {
            let w = em.b.ins().swiden_low(pw);
            let w = em.b.ins().ishl_imm_s(w, 52);
            let scale = em.b.ins().bitcast(types::F64X2, le, w);
            let sw = em.b.ins().swiden_low(s);
            let v = em.b.ins().fcvt_from_sint(types::F64X2, sw);
            let v = em.b.ins().fmul(v, scale);
            terms.push(em.b.ins().trunc(v));
        }
    }
    let acc = tree(em, terms, |em, x, y| em.b.ins().fadd(x, y));
    let s0 = em.b.ins().extractlane(acc, 0u8);
    let s1 = em.b.ins().extractlane(acc, 1u8);
    let sum = em.b.ins().fadd(s0, s1);
    // c, the same way in scalar
    let csig = c_term.sig.expect("c is a base term");
    let cneg = em.b.ins().ineg(csig);
    let cs = em.sel(c_term.neg, cneg, csig);
    let cv = em.b.ins().fcvt_from_sint(types::F64, cs);
    let q =
        em.b.ins()
            .iadd_imm_s(c_term.natural_exp, big_f - c_term.d + 1023);
    let q = em.b.ins().isub(q, r);
    let q = em.b.ins().ishl_imm_s(q, 52);
    let cscale = em.b.ins().bitcast(types::F64, MemFlagsData::new(), q);
    let cv = em.b.ins().fmul(cv, cscale);
    let cv = em.b.ins().trunc(cv);
    let sum = em.b.ins().fadd(sum, cv);
    // an integer below 2^52 for finite inputs; special inputs leave any value, and the
    // saturating conversion never traps
    let sum = em.b.ins().fcvt_to_sint_sat(types::I64, sum);
    let sum = em.widen(sum);
    let zero = em.icmp_imm(IntCC::Equal, sum, 0);
    let no_sign = em.boolc(false);
    TermV {
        neg: no_sign,
        sig: None,
        x: Some(sum),
        d: big_f,
        exp: r,
        natural_exp: r,
        present: None,
        zero,
        node: true,
        sig_bits: 0,
        special: None,
        sign40: None,
    }
}

/// Combine values pairwise (a balanced tree: short dependency chains). `items` is
/// non-empty.
fn tree(em: &mut Em, mut items: Vec<Value>, op: impl Fn(&mut Em, Value, Value) -> Value) -> Value {
    while items.len() > 1 {
        items = items
            .chunks(2)
            .map(|c| {
                if c.len() == 2 {
                    op(em, c[0], c[1])
                } else {
                    c[0]
                }
            })
            .collect();
    }
    items[0]
}

/// The sign bit at position `pos` of `x`, moved to bit [`SIGN_BIT`] (everything else 0).
fn sign_to_40(em: &mut Em, x: Value, pos: i64) -> Value {
    let b = em.b.ins().band_imm_s(x, 1i64 << pos);
    if pos < SIGN_BIT {
        em.b.ins().ishl_imm_s(b, SIGN_BIT - pos)
    } else if pos > SIGN_BIT {
        em.b.ins().ushr_imm_s(b, pos - SIGN_BIT)
    } else {
        b
    }
}

/// Where the sign bit of a raw code sits, if it can be read without decoding (a signed
/// format whose sign `flush` cannot clear).
fn raw_sign_pos(f: &FloatFormat, flush: bool) -> Option<i64> {
    (f.signed && !(flush && f.subnormals))
        .then(|| (f.ignored_low_bits + f.exponent_bits + f.mantissa_bits) as i64)
}

/// The decoding-table entry of a raw element (masked to its storage bits).
fn table_entry(em: &mut Em, table: &'static [u64], f: &FloatFormat, raw: Value) -> Value {
    let idx =
        em.b.ins()
            .band_imm_s(raw, crate::format::low_mask(f.storage_bits) as i64);
    let off = em.b.ins().ishl_imm_s(idx, 3);
    let base = em.i64c(table.as_ptr() as i64);
    let at = em.b.ins().iadd(base, off);
    em.b.ins().load(
        types::I64,
        cranelift_codegen::ir::MemFlagsData::trusted()
            .with_readonly()
            .with_can_move(),
        at,
        0,
    )
}

/// Sign, significand and exponent of a finite code, without special-value flags.
/// `neg` is an i8 boolean.
fn lean_decode(
    em: &mut Em,
    f: &FloatFormat,
    raw: Value,
    flush: bool,
    special: &mut Option<Value>,
) -> (Value, Value, Value) {
    let m = f.mantissa_bits as i64;
    let e = f.exponent_bits as i64;
    // bits above the code are masked off field by field
    let code = if f.ignored_low_bits > 0 {
        em.b.ins().ushr_imm_s(raw, f.ignored_low_bits as i64)
    } else {
        raw
    };
    let man = em.b.ins().band_imm_s(code, (1i64 << m) - 1);
    let ef = em.b.ins().ushr_imm_s(code, m);
    let ef = em.b.ins().band_imm_s(ef, (1i64 << e) - 1);
    // NaN or Inf: one compare on the exponent field for IEEE formats
    let sp = match f.specials {
        Specials::Ieee => Some(em.icmp_imm(IntCC::Equal, ef, (1i64 << e) - 1)),
        _ => special_code(em, f, raw),
    };
    or_flag(em, special, sp);
    let neg = if f.signed {
        let s = em.b.ins().ushr_imm_s(code, e + m);
        let s = em.b.ins().band_imm_s(s, 1);
        em.b.ins().ireduce(types::I8, s)
    } else {
        em.boolc(false)
    };
    let implicit = em.b.ins().bor_imm_s(man, 1i64 << m);
    if !f.subnormals {
        let exp = em.b.ins().iadd_imm_s(ef, -(f.bias as i64));
        return (neg, implicit, exp);
    }
    let nz = em.icmp_imm(IntCC::NotEqual, ef, 0);
    let one = em.i64c(1);
    let efx = em.b.ins().smax(ef, one);
    let exp = em.b.ins().iadd_imm_s(efx, -(f.bias as i64));
    if flush {
        let z = em.i64c(0);
        let sig = em.sel(nz, implicit, z);
        let f0 = em.boolc(false);
        let neg = em.sel(nz, neg, f0);
        (neg, sig, exp)
    } else {
        let sig = em.sel(nz, implicit, man);
        (neg, sig, exp)
    }
}

/// A step all of whose inputs are finite.
#[allow(clippy::too_many_arguments)]
fn finite_step(
    em: &mut Em,
    inst: &Instruction,
    f: &Fused,
    p: &Plan,
    c_format: &Format,
    c_raw: Value,
    ptrs: &Ptrs,
    start: usize,
    slot: Option<StackSlot>,
    special: &mut Option<Value>,
) -> Value {
    let cond = f.conditioning;
    let l = f.chain as usize;
    let d = inst.d.as_float().expect("planned");
    let f0 = em.boolc(false);
    // only products overflowing to Inf make specials here
    let mut sp = Specials3 {
        nan: f0,
        pos_inf: f0,
        neg_inf: f0,
    };

    // c
    let cf = c_format.as_float().expect("planned");
    let c_term = {
        let mut flag = None;
        let (neg, sig, exp) = lean_decode(em, cf, c_raw, cond.flush_c, &mut flag);
        let zero = em.icmp_imm(IntCC::Equal, sig, 0);
        let (e, present) = zero_rule(em, f.zero_exponent.c, zero, exp);
        let c_sign40 = raw_sign_pos(cf, cond.flush_c).map(|pos| sign_to_40(em, c_raw, pos));
        TermV {
            neg,
            sig: Some(sig),
            x: None,
            d: cf.mantissa_bits as i64,
            exp: e,
            natural_exp: exp,
            present,
            zero,
            node: false,
            sig_bits: cf.mantissa_bits + 1,
            special: flag,
            sign40: c_sign40,
        }
    };

    let block = inst.scale.as_ref().map(|s| s.block as usize).unwrap_or(1);
    let scale_base = start / block;
    let fr = (p.a.mantissa_bits + p.b.mantissa_bits) as i64;

    // Groups of products of formats without NaN/Inf (FP4, FP6) are summed straight from
    // value tables: each element is a small signed integer on its format's finest grid,
    // so a product is one multiply on the lowest product grid.
    let value_tabs = match f.grouping {
        Some(g)
            if !f.scaled_products
                && f.product_overflow.is_none()
                && f.nodes.iter().all(|n| {
                    n.terms
                        .iter()
                        .all(|t| !matches!(t.source, TermSource::Products(_)))
                })
                && tables::value_bits(&p.a)
                    + tables::value_bits(&p.b)
                    + clog2(g.size as u64)
                    + 2
                    <= 62 =>
        {
            match (
                tables::value_table(&p.a, cond.flush_a),
                tables::value_table(&p.b, cond.flush_b),
            ) {
                (Some(ta), Some(tb)) => Some((ta, tb)),
                _ => None,
            }
        }
        _ => None,
    };

    // products
    let mut product_terms: Vec<TermV> = Vec::with_capacity(l);
    let scalar_products = value_tabs.is_none() && p.simd.is_none();
    for k in 0..if scalar_products { l } else { 0 } {
        let mut flag = None;
        let ra = em.load(ptrs.a, start + k);
        let rb = em.load(ptrs.b, start + k);
        let mut sign40: Option<Value> = None;
        let (mut neg, mut sig, mut exp) = match (
            tables::decode_table(&p.a, cond.flush_a),
            tables::decode_table(&p.b, cond.flush_b),
        ) {
            (Some(tab_a), Some(tab_b)) => {
                // one load per element from the format's decoding table
                let ta = table_entry(em, tab_a, &p.a, ra);
                let tb = table_entry(em, tab_b, &p.b, rb);
                let low = (1i64 << 32) - 1;
                let sa = em.b.ins().band_imm_s(ta, low);
                let sb = em.b.ins().band_imm_s(tb, low);
                let sig = em.b.ins().imul(sa, sb);
                let x = em.b.ins().bxor(ta, tb);
                sign40 = Some(sign_to_40(em, x, 32));
                let n = em.b.ins().ushr_imm_s(x, 32);
                let n = em.b.ins().band_imm_s(n, 1);
                let neg = em.b.ins().ireduce(types::I8, n);
                // a special entry's exponent is garbage; the special path discards it
                let ea = em.b.ins().ushr_imm_s(ta, tables::EXP_AT);
                let eb = em.b.ins().ushr_imm_s(tb, tables::EXP_AT);
                let e = em.b.ins().iadd(ea, eb);
                let exp = em.b.ins().iadd_imm_s(e, -2 * tables::EXP_OFFSET);
                let o = em.b.ins().bor(ta, tb);
                let sp = em.icmp_imm(IntCC::UnsignedGreaterThanOrEqual, o, tables::SPECIAL);
                or_flag(em, &mut flag, Some(sp));
                (neg, sig, exp)
            }
            _ => {
                let (na, sa, ea) = lean_decode(em, &p.a, ra, cond.flush_a, &mut flag);
                let (nb, sb, eb) = lean_decode(em, &p.b, rb, cond.flush_b, &mut flag);
                if let (Some(pa), Some(pb)) = (
                    raw_sign_pos(&p.a, cond.flush_a),
                    raw_sign_pos(&p.b, cond.flush_b),
                ) && pa == pb
                {
                    let x = em.b.ins().bxor(ra, rb);
                    sign40 = Some(sign_to_40(em, x, pa));
                }
                let neg = em.b.ins().bxor(na, nb);
                let sig = em.b.ins().imul(sa, sb);
                let exp = em.b.ins().iadd(ea, eb);
                (neg, sig, exp)
            }
        };
        let mut dd = fr;
        let mut sig_bits = p.a.mantissa_bits + p.b.mantissa_bits + 2;
        if f.scaled_products {
            sig_bits += 2 * (p.scale.as_ref().expect("planned").mantissa_bits + 1);
            let s = p.scale.as_ref().expect("planned");
            let idx = scale_base + k / block;
            let rx = em.load(ptrs.sa, idx);
            let ry = em.load(ptrs.sb, idx);
            let (nx, sx, ex) = lean_decode(em, s, rx, false, &mut flag);
            let (ny, sy, ey) = lean_decode(em, s, ry, false, &mut flag);
            let ns = em.b.ins().bxor(nx, ny);
            neg = em.b.ins().bxor(neg, ns);
            if s.signed {
                sign40 = None;
            }
            let ss = em.b.ins().imul(sx, sy);
            sig = em.b.ins().imul(sig, ss);
            let es = em.b.ins().iadd(ex, ey);
            exp = em.b.ins().iadd(exp, es);
            dd += 2 * s.mantissa_bits as i64;
        }
        if let Some(x) = f.product_overflow {
            let grid = em.b.ins().iadd_imm_s(exp, -dd);
            let o = overflows(em, sig, grid, x);
            sp.add(em, f0, o, neg);
        }
        let zero = em.icmp_imm(IntCC::Equal, sig, 0);
        let (e, present) = zero_rule(em, f.zero_exponent.products, zero, exp);
        product_terms.push(TermV {
            neg,
            sig: Some(sig),
            x: None,
            d: dd,
            exp: e,
            natural_exp: exp,
            present,
            zero,
            node: false,
            sig_bits,
            special: flag,
            sign40,
        });
    }

    // groups of products, summed exactly on the lowest product grid
    let mut groups: Vec<TermV> = vec![];
    if let Some(g) = f.grouping {
        let gs = g.size as usize;
        for gi in 0..l / gs {
            let mut sum = em.wc(0);
            let mut all_zero = em.boolc(true);
            if let Some((tab_a, tab_b)) = value_tabs {
                let mut s64 = em.i64c(0);
                let mut nz = em.i64c(0);
                for k in gi * gs..(gi + 1) * gs {
                    let ra = em.load(ptrs.a, start + k);
                    let rb = em.load(ptrs.b, start + k);
                    let va = table_entry(em, tab_a, &p.a, ra);
                    let vb = table_entry(em, tab_b, &p.b, rb);
                    let pr = em.b.ins().imul(va, vb);
                    s64 = em.b.ins().iadd(s64, pr);
                    nz = em.b.ins().bor(nz, pr);
                }
                sum = em.widen(s64);
                all_zero = em.icmp_imm(IntCC::Equal, nz, 0);
            }
            for t in product_terms.iter().skip(gi * gs).take(gs) {
                // grid = natural exponent - d, shifted onto the lowest product grid
                let sh =
                    em.b.ins()
                        .iadd_imm_s(t.natural_exp, -t.d - p.product_min_grid);
                let x = t.signed(em);
                let v = em.b.ins().ishl(x, sh);
                sum = em.b.ins().iadd(sum, v);
                all_zero = em.and(all_zero, t.zero);
                or_flag(em, special, t.special);
            }
            let term = if g.scaled {
                let s = p.scale.as_ref().expect("planned");
                let idx = scale_base + gi * gs / block;
                let rx = em.load(ptrs.sa, idx);
                let ry = em.load(ptrs.sb, idx);
                let (nx, sx, ex) = lean_decode(em, s, rx, false, special);
                let (ny, sy, ey) = lean_decode(em, s, ry, false, special);
                let ns = em.b.ins().bxor(nx, ny);
                let ss = em.b.ins().imul(sx, sy);
                let s_zero = em.icmp_imm(IntCC::Equal, ss, 0);
                let ssig = em.signed(ns, ss);
                let value = em.b.ins().imul(sum, ssig);
                let s_exp = em.b.ins().iadd(ex, ey);
                let z = em.or(all_zero, s_zero);
                let (e, present) = zero_rule(em, f.zero_exponent.groups, z, s_exp);
                TermV {
                    neg: f0,
                    sig: None,
                    x: Some(value),
                    d: 2 * s.mantissa_bits as i64 - p.product_min_grid,
                    exp: e,
                    natural_exp: s_exp,
                    present,
                    zero: z,
                    node: false,
                    sig_bits: 0,
                    special: None,
                    sign40: None,
                }
            } else {
                let e0 = em.i64c(0);
                let (e, present) = zero_rule(em, f.zero_exponent.groups, all_zero, e0);
                TermV {
                    neg: f0,
                    sig: None,
                    x: Some(sum),
                    d: -p.product_min_grid,
                    exp: e,
                    natural_exp: e0,
                    present,
                    zero: all_zero,
                    node: false,
                    sig_bits: 0,
                    special: None,
                    sign40: None,
                }
            };
            groups.push(term);
        }
    }

    // alignment nodes
    let mut node_terms: Vec<TermV> = vec![];
    if let Some(fk) = p.simd {
        let t = simd_node(em, f, p, fk, &c_term, ptrs, start, special);
        node_terms.push(t);
    }
    for (ni, node) in f.nodes.iter().enumerate().skip(node_terms.len()) {
        let mut items: Vec<(TermV, &AlignTerm)> = vec![];
        for at in &node.terms {
            match at.source {
                TermSource::Products(part) => {
                    for (k, t) in product_terms.iter().enumerate() {
                        let take = match part {
                            ProductsPart::All => true,
                            ProductsPart::Even => k % 2 == 0,
                            ProductsPart::Odd => k % 2 == 1,
                        };
                        if take {
                            items.push((*t, at));
                        }
                    }
                }
                TermSource::C => items.push((c_term, at)),
                TermSource::Groups => {
                    for g in &groups {
                        items.push((*g, at));
                    }
                }
                TermSource::Node(i) => items.push((node_terms[i], at)),
            }
        }
        if let Some((t, flag)) =
            packed_node(em, node, &items, p.node_grid[ni].is_none() && p.pack_ok)
        {
            or_flag(em, special, flag);
            node_terms.push(t);
            continue;
        }
        for (t, _) in &items {
            or_flag(em, special, t.special);
        }
        if let (Some(lp), Some(slot)) = (&p.limbs, slot)
            && ni + 1 == f.nodes.len()
        {
            let (sum, g) = limb_sum(em, &items, lp, slot);
            let zero = em.icmp_imm(IntCC::Equal, sum, 0);
            node_terms.push(TermV {
                neg: f0,
                sig: None,
                x: Some(sum),
                d: 0,
                exp: g,
                natural_exp: g,
                present: None,
                zero,
                node: true,
                sig_bits: 0,
                special: None,
                sign40: None,
            });
            continue;
        }
        // reference exponent
        let (r, any) = match node.reference {
            Reference::Fixed(r) => (em.i64c(r as i64), None),
            Reference::MaxExponent => {
                let mut r: Option<Value> = None;
                let mut any: Option<Value> = None;
                let mut always = false;
                let floor = em.i64c(i64::MIN / 4);
                for (t, _) in &items {
                    let e = match t.present {
                        None => t.exp,
                        Some(pr) => em.sel(pr, t.exp, floor),
                    };
                    r = Some(match r {
                        None => e,
                        Some(r) => em.b.ins().smax(r, e),
                    });
                    match t.present {
                        None => always = true,
                        Some(pr) => {
                            any = Some(match any {
                                None => pr,
                                Some(a) => em.or(a, pr),
                            })
                        }
                    }
                }
                let r = r.expect("checked: every alignment has a term");
                if always {
                    (r, None)
                } else {
                    let any = any.expect("checked: every alignment has a term");
                    let zero = em.i64c(0);
                    (em.sel(any, r, zero), Some(any))
                }
            }
        };
        let max_ref = node.reference == Reference::MaxExponent;
        let fmax = node
            .terms
            .iter()
            .filter_map(|t| t.keep.map(|k| k.0 as i64))
            .max();
        let exact_grid = p.node_grid[ni];
        let wide_node = p.wide && ni + 1 == f.nodes.len();
        let mut wide_c: Option<(Value, Value)> = None;
        let mut sum: Option<Value> = None;
        let mut terms_kept: Vec<Value> = Vec::with_capacity(items.len());
        for (t, at) in &items {
            if wide_node && at.source == TermSource::C {
                // c stays apart on its own grid, rounded to the node's grid if it lies below
                let x = t.signed(em);
                let g = t.grid(em);
                let (x, g) = match at.keep {
                    Some((fb, mode)) => {
                        let target = em.b.ins().iadd_imm_s(r, -(fb as i64));
                        let sh = em.b.ins().isub(target, g);
                        let s = em.clamp_shift(sh);
                        let rx = em.round_right(x, s, mode);
                        let pos = em.icmp_imm(IntCC::SignedGreaterThan, sh, 0);
                        (em.sel(pos, rx, x), em.sel(pos, target, g))
                    }
                    None => (x, g),
                };
                let x = drop_below(em, at.drop_below, r, t, x);
                wide_c = Some((x, g));
                continue;
            }
            let kept = match (at.keep, exact_grid) {
                (Some((fb, mode)), None) => {
                    let fb = fb as i64;
                    let v = if max_ref && !t.node {
                        // the term's exponent is at most r: a right shift by
                        // r - e + d - F after a static left shift by F - d
                        let pre = (fb - t.d).max(0);
                        let post = (t.d - fb).max(0);
                        let sh = em.b.ins().isub(r, t.natural_exp);
                        let sh = if post > 0 {
                            em.b.ins().iadd_imm_s(sh, post)
                        } else {
                            sh
                        };
                        let top = em.i64c(em.wbits() - 1);
                        let s = em.b.ins().umin(sh, top);
                        match (mode, t.sig) {
                            (Rounding::TowardZero, Some(sig)) => {
                                let mag = em.widen(sig);
                                let mag = if pre > 0 {
                                    em.b.ins().ishl_imm_s(mag, pre)
                                } else {
                                    mag
                                };
                                let q = em.b.ins().ushr(mag, s);
                                let nq = em.neg(q);
                                em.sel(t.neg, nq, q)
                            }
                            _ => {
                                let x = t.signed(em);
                                let x = if pre > 0 {
                                    em.b.ins().ishl_imm_s(x, pre)
                                } else {
                                    x
                                };
                                em.round_right(x, s, mode)
                            }
                        }
                    } else {
                        let target = em.b.ins().iadd_imm_s(r, -fb);
                        let grid = t.grid(em);
                        let sh = em.b.ins().isub(target, grid);
                        let x = t.signed(em);
                        em.round_shift(x, sh, mode)
                    };
                    let up = fmax.expect("a rounded term") - fb;
                    if up > 0 {
                        em.b.ins().ishl_imm_s(v, up)
                    } else {
                        v
                    }
                }
                (None, Some(g0)) => {
                    let grid = t.grid(em);
                    let sh = em.b.ins().iadd_imm_s(grid, -g0);
                    let sh = em.clamp_shift(sh);
                    let x = t.signed(em);
                    em.b.ins().ishl(x, sh)
                }
                _ => unreachable!("planned: a node is exact or rounded"),
            };
            let kept = drop_below(em, at.drop_below, r, t, kept);
            terms_kept.push(kept);
        }
        if !terms_kept.is_empty() {
            sum = Some(tree(em, terms_kept, |em, x, y| em.b.ins().iadd(x, y)));
        }
        let sum = match sum {
            Some(s) => s,
            None => em.wc(0),
        };
        // the node's value is sum * 2^grid with grid = r - Fmax (or the static grid)
        let (natural_exp, dd) = match exact_grid {
            Some(g0) => (em.i64c(0), -g0),
            None => (r, fmax.expect("a rounded node")),
        };
        let (sum, natural_exp, dd) = match wide_c {
            Some((cx, cg)) => {
                let gp = em.b.ins().iadd_imm_s(natural_exp, -dd);
                let (s, g) = window_sum(em, sum, gp, cx, cg);
                (s, g, 0)
            }
            None => (sum, natural_exp, dd),
        };
        let zero = em.icmp_imm(IntCC::Equal, sum, 0);
        node_terms.push(TermV {
            neg: f0,
            sig: None,
            x: Some(sum),
            d: dd,
            exp: r,
            natural_exp,
            present: any,
            zero,
            node: true,
            sig_bits: 0,
            special: None,
            sign40: None,
        });
    }

    let last = *node_terms.last().expect("checked: a fused pipeline aligns");
    let root = last.signed(em);
    let root_grid = last.grid(em);

    // normalisation steps, on sign and magnitude (the sign never changes)
    let root_neg = em.icmp_imm(IntCC::SignedLessThan, root, 0);
    let mut mag = em.abs_w(root);
    let mut g = root_grid;
    let mut bl = em.bit_length(mag);
    let nan_bits = inst.d.encode_nan().unwrap_or(0) as i64;
    let inf_bits = |neg: bool| inst.d.encode_inf(neg).unwrap_or(nan_bits as u64) as i64;
    let mut ovf_flag = em.boolc(false);
    let mut ovf_bits = em.i64c(0);
    for step in &f.normalize {
        let le = em.b.ins().iadd(g, bl);
        let le = em.b.ins().iadd_imm_s(le, -1);
        let floor = em.i64c(step.min_exponent as i64);
        let e = em.b.ins().smax(le, floor);
        let q = em.b.ins().iadd_imm_s(e, -(step.fraction_bits as i64));
        let sh = em.b.ins().isub(q, g);
        let s = em.clamp_shift(sh);
        let rounded = em.round_mag(mag, s, step.rounding, root_neg);
        let pos = em.icmp_imm(IntCC::SignedGreaterThan, sh, 0);
        mag = em.sel(pos, rounded, mag);
        g = em.sel(pos, q, g);
        bl = em.bit_length(mag);
        if let Some(emax) = step.max_exponent {
            let le = em.b.ins().iadd(g, bl);
            let le = em.b.ins().iadd_imm_s(le, -1);
            let nz = em.icmp_imm(IntCC::NotEqual, bl, 0);
            let big = em.icmp_imm(IntCC::SignedGreaterThan, le, emax as i64);
            let o = em.and(nz, big);
            let (pos_bits, neg_bits) = match step.overflow {
                Overflow::Inf | Overflow::Wrap => (inf_bits(false), inf_bits(true)),
                Overflow::Saturate => {
                    let enc = |neg: bool| {
                        let max = crate::exact::Dyadic::from_parts(
                            neg,
                            d.max_significand() as u128,
                            emax as i64 - d.mantissa_bits as i64,
                        );
                        inst.d.encode_finite(neg, &max).unwrap_or(nan_bits as u64) as i64
                    };
                    (enc(false), enc(true))
                }
            };
            let pb = em.i64c(pos_bits);
            let nb = em.i64c(neg_bits);
            let bits = em.sel(root_neg, nb, pb);
            let fresh = em.not(ovf_flag);
            let fresh = em.and(fresh, o);
            ovf_bits = em.sel(fresh, bits, ovf_bits);
            ovf_flag = em.or(ovf_flag, o);
        }
    }

    // encode the finite result into d
    let m = d.mantissa_bits as i64;
    let emin = d.min_exponent() as i64;
    let le = em.b.ins().iadd(g, bl);
    let le = em.b.ins().iadd_imm_s(le, -1);
    // f32 and bf16 results: mag * 2^g is exactly representable, so the host converts it
    // (an exact f64 product, an exact narrowing); other formats assemble the fields
    let f32_like = d.exponent_bits == 8
        && d.bias == 127
        && (d.mantissa_bits == 23 || d.mantissa_bits == 7)
        && d.ignored_low_bits == 0;
    let code = if f32_like {
        let m64 = em.low64(mag);
        let mf = em.b.ins().fcvt_from_uint(types::F64, m64);
        let gb = em.b.ins().iadd_imm_s(g, 1023);
        let gb = em.b.ins().ishl_imm_s(gb, 52);
        let scale =
            em.b.ins()
                .bitcast(types::F64, cranelift_codegen::ir::MemFlagsData::new(), gb);
        let v = em.b.ins().fmul(mf, scale);
        let v = em.b.ins().fdemote(types::F32, v);
        let bits =
            em.b.ins()
                .bitcast(types::I32, cranelift_codegen::ir::MemFlagsData::new(), v);
        let bits = em.b.ins().uextend(types::I64, bits);
        if d.mantissa_bits == 7 {
            em.b.ins().ushr_imm_s(bits, 16)
        } else {
            bits
        }
    } else {
        let sub = em.icmp_imm(IntCC::SignedLessThan, le, emin);
        let t_sub = em.b.ins().iadd_imm_s(g, m - emin);
        let t_sub = em.clamp_shift(t_sub);
        let man_sub = em.b.ins().ishl(mag, t_sub);
        let man_sub = em.low64(man_sub);
        let lead = em.b.ins().iadd_imm_s(bl, -1);
        let mc = em.i64c(m);
        let t_norm = em.b.ins().isub(mc, lead);
        let tl = em.clamp_shift(t_norm);
        let left = em.b.ins().ishl(mag, tl);
        let nt = em.b.ins().ineg(t_norm);
        let tr = em.clamp_shift(nt);
        let right = em.b.ins().ushr(mag, tr);
        let tpos = em.icmp_imm(IntCC::SignedGreaterThanOrEqual, t_norm, 0);
        let man_norm = em.sel(tpos, left, right);
        let man_norm = em.low64(man_norm);
        let man_norm = em.b.ins().band_imm_s(man_norm, (1i64 << m) - 1);
        let ef = em.b.ins().iadd_imm_s(le, 1 - emin);
        let ef = em.b.ins().ishl_imm_s(ef, m);
        let code_norm = em.b.ins().bor(ef, man_norm);
        em.sel(sub, man_sub, code_norm)
    };
    // a nonzero result has the sum's sign; zeros are chosen below
    let sign = em.i64c(1i64 << (d.exponent_bits as i64 + m));
    let z64 = em.i64c(0);
    let sign = em.sel(root_neg, sign, z64);
    let code = em.b.ins().bor(code, sign);
    let code = if d.ignored_low_bits > 0 {
        em.b.ins().ishl_imm_s(code, d.ignored_low_bits as i64)
    } else {
        code
    };
    let too_big = em.icmp_imm(IntCC::SignedGreaterThan, le, d.max_exponent() as i64);
    let nanc = em.i64c(nan_bits);
    let finite = em.sel(too_big, nanc, code);

    // zero results
    let zero_pos = inst
        .d
        .encode_finite(false, &crate::exact::Dyadic::zero())
        .unwrap_or(nan_bits as u64) as i64;
    let zero_neg = inst
        .d
        .encode_finite(true, &crate::exact::Dyadic::zero())
        .unwrap_or(nan_bits as u64) as i64;
    let zp = em.i64c(zero_pos);
    let zero_bits = match f.zero_sign {
        ZeroSign::Positive => zp,
        ZeroSign::ExactPositive => {
            let zn = em.i64c(zero_neg);
            em.sel(root_neg, zn, zp)
        }
    };
    let v_zero = em.icmp_imm(IntCC::Equal, bl, 0);
    let r = em.sel(v_zero, zero_bits, finite);
    let r = em.sel(ovf_flag, ovf_bits, r);

    // special inputs
    let both = em.and(sp.pos_inf, sp.neg_inf);
    let is_nan = em.or(sp.nan, both);
    let is_inf = em.or(sp.pos_inf, sp.neg_inf);
    let ip = em.i64c(inf_bits(false));
    let inn = em.i64c(inf_bits(true));
    let infv = em.sel(sp.neg_inf, inn, ip);
    let r = em.sel(is_inf, infv, r);
    em.sel(is_nan, nanc, r)
}

/// The product of two decoded scale factors, with the interpreter's special rules:
/// (nan, inf, neg, significand product, exponent sum, finite zero).
fn scale_product(em: &mut Em, x: &super::emit::Decoded, y: &super::emit::Decoded) -> ScaleProduct {
    let xy_nan = em.or(x.nan, y.nan);
    let a = em.and(x.inf, y.zero);
    let b = em.and(y.inf, x.zero);
    let ab = em.or(a, b);
    let nan = em.or(xy_nan, ab);
    let anyinf = em.or(x.inf, y.inf);
    let nn = em.not(nan);
    let inf = em.and(anyinf, nn);
    let neg = em.b.ins().bxor(x.neg, y.neg);
    let sig = em.b.ins().imul(x.sig, y.sig);
    let exp = em.b.ins().iadd(x.exp, y.exp);
    let z = em.or(x.zero, y.zero);
    let special = em.or(nan, inf);
    let fin = em.not(special);
    let zero = em.and(z, fin);
    ScaleProduct {
        nan,
        inf,
        neg,
        sig,
        exp,
        zero,
    }
}

struct ScaleProduct {
    nan: Value,
    inf: Value,
    neg: Value,
    sig: Value,
    exp: Value,
    zero: Value,
}
