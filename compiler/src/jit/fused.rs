//! Lowering of fused dot-product-add pipelines (T-, ST-, GST-, TR-, GTR-FDPA and exact
//! sums): bit-level decoding, exact integer products, max-exponent alignment with the
//! per-term rounding of each alignment node, one exact fixed-point sum per node, the
//! normalisation steps, the zero-sign rule and the encoding of `d`, all in one
//! straight-line, branch-free kernel per chained step.
//!
//! Every aligned value is an integer `X` of the accumulator width (i64 or i128) times
//! `2^grid`, with the grid a run-time i64. [`plan`] decides the width from the checker's
//! `width_bits` and refuses what the fixed-width scheme cannot compute exactly.

use super::emit::Em;
use crate::format::{FloatFormat, Format, Specials};
use crate::ir::*;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Type, Value, types};

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
    /// The lowest grid of an (unscaled-group) product sum.
    product_min_grid: i64,
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
    if f.chain == 0 || inst.shape.k % f.chain != 0 {
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
    let mut need = prod_bits + 2;
    if let Some(g) = f.grouping {
        if g.size == 0 || f.chain % g.size != 0 {
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
    for (ni, n) in f.nodes.iter().enumerate() {
        let exact = n.terms.iter().filter(|t| t.keep.is_none()).count();
        if exact > 0 && exact < n.terms.len() {
            return Err(format!(
                "alignment {ni} mixes exact and rounded terms; the JIT does not lower that"
            ));
        }
        if exact > 0 {
            let mut g = i64::MAX;
            for t in &n.terms {
                let tg = match t.source {
                    TermSource::Products(_) => product_min_grid,
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
        need = need.max((n.width_bits + HEADROOM) as u64);
    }
    let w = if need <= 64 {
        types::I64
    } else if need <= 128 {
        types::I128
    } else {
        return Err(format!(
            "an exact sum needs a {need}-bit accumulator; the JIT computes up to 128 bits \
             (an exact sum of products and a wide `c`, as in E-FDPA into f32, is not lowered yet)"
        ));
    };
    Ok(Plan {
        w,
        a,
        b,
        scale,
        node_grid,
        product_min_grid,
    })
}

/// A term on its way into an alignment: `x * 2^grid`, its exponent in the max search,
/// and whether it takes part in the search (`None`: always).
#[derive(Clone, Copy)]
struct TermV {
    x: Value,
    grid: Value,
    exp: Value,
    present: Option<Value>,
    zero: Value,
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
    for start in (0..inst.k()).step_by(f.chain as usize) {
        c = emit_step(em, inst, f, p, c_format, c, ptrs, start);
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
) -> Value {
    let cond = f.conditioning;
    let l = f.chain as usize;
    let d = inst.d.as_float().expect("planned");
    let f0 = em.boolc(false);
    let mut sp = Specials3 {
        nan: f0,
        pos_inf: f0,
        neg_inf: f0,
    };

    // c
    let cf = c_format.as_float().expect("planned");
    let dc = em.decode_float(cf, c_raw, cond.flush_c);
    sp.add(em, dc.nan, dc.inf, dc.neg);
    let c_term = {
        let x = em.signed(dc.neg, dc.sig);
        let grid = em.b.ins().iadd_imm_s(dc.exp, -(cf.mantissa_bits as i64));
        let (exp, present) = zero_rule(em, f.zero_exponent.c, dc.zero, dc.exp);
        TermV {
            x,
            grid,
            exp,
            present,
            zero: dc.zero,
        }
    };

    let block = inst.scale.as_ref().map(|s| s.block as usize).unwrap_or(1);
    let scale_base = start / block;
    let fr = (p.a.mantissa_bits + p.b.mantissa_bits) as i64;

    // products: sign, magnitude, exponent, grid, flags
    struct Prod {
        neg: Value,
        sig: Value,
        exp: Value,
        grid: Value,
        zero: Value,
    }
    let mut prods: Vec<Prod> = Vec::with_capacity(l);
    for k in 0..l {
        let ra = em.load(ptrs.a, start + k);
        let rb = em.load(ptrs.b, start + k);
        let da = em.decode_float(&p.a, ra, cond.flush_a);
        let db = em.decode_float(&p.b, rb, cond.flush_b);
        let (mut nan, mut inf, mut neg, mut sig, mut exp, mut grid, mut zero) = {
            let ab = em.or(da.nan, db.nan);
            let x = em.and(da.inf, db.zero);
            let y = em.and(db.inf, da.zero);
            let xy = em.or(x, y);
            let nan = em.or(ab, xy);
            let anyinf = em.or(da.inf, db.inf);
            let notnan = em.not(nan);
            let inf = em.and(anyinf, notnan);
            let neg = em.b.ins().bxor(da.neg, db.neg);
            let sig = em.b.ins().imul(da.sig, db.sig);
            let exp = em.b.ins().iadd(da.exp, db.exp);
            let grid = em.b.ins().iadd_imm_s(exp, -fr);
            let z = em.or(da.zero, db.zero);
            let sa = em.or(da.nan, da.inf);
            let sb = em.or(db.nan, db.inf);
            let sab = em.or(sa, sb);
            let fin = em.not(sab);
            let zero = em.and(z, fin);
            (nan, inf, neg, sig, exp, grid, zero)
        };
        if f.scaled_products {
            let s = p.scale.as_ref().expect("planned");
            let idx = scale_base + k / block;
            let rx = em.load(ptrs.sa, idx);
            let ry = em.load(ptrs.sb, idx);
            let x = em.decode_float(s, rx, false);
            let y = em.decode_float(s, ry, false);
            let (s_nan, s_inf, s_neg, s_sig, s_exp, s_zero) = scale_product(em, &x, &y);
            // special_mul of the product and the scale product
            let n1 = em.or(nan, s_nan);
            let i1 = em.and(inf, s_zero);
            let i2 = em.and(s_inf, zero);
            let i12 = em.or(i1, i2);
            nan = em.or(n1, i12);
            let ii = em.or(inf, s_inf);
            let nn = em.not(nan);
            inf = em.and(ii, nn);
            neg = em.b.ins().bxor(neg, s_neg);
            let sz = em.or(zero, s_zero);
            let any_special = em.or(nan, inf);
            let fin = em.not(any_special);
            zero = em.and(sz, fin);
            sig = em.b.ins().imul(sig, s_sig);
            exp = em.b.ins().iadd(exp, s_exp);
            grid = em.b.ins().iadd(grid, s_exp);
            grid = em.b.ins().iadd_imm_s(grid, -2 * s.mantissa_bits as i64);
        }
        if let Some(x) = f.product_overflow {
            // |p| >= 2^x becomes Inf: the leading bit of sig * 2^grid
            let lz = em.b.ins().clz(sig);
            let top = em.b.ins().isub(grid, lz);
            let le = em.b.ins().iadd_imm_s(top, 63);
            let big = em.icmp_imm(IntCC::SignedGreaterThanOrEqual, le, x as i64);
            let nz = em.icmp_imm(IntCC::NotEqual, sig, 0);
            let special = em.or(nan, inf);
            let fin = em.not(special);
            let o = em.and(big, nz);
            let o = em.and(o, fin);
            inf = em.or(inf, o);
        }
        sp.add(em, nan, inf, neg);
        prods.push(Prod {
            neg,
            sig,
            exp,
            grid,
            zero,
        });
    }

    // product terms
    let product_terms: Vec<TermV> = prods
        .iter()
        .map(|pr| {
            let x = em.signed(pr.neg, pr.sig);
            let (exp, present) = zero_rule(em, f.zero_exponent.products, pr.zero, pr.exp);
            TermV {
                x,
                grid: pr.grid,
                exp,
                present,
                zero: pr.zero,
            }
        })
        .collect();

    // groups of products, summed exactly on the lowest product grid
    let mut groups: Vec<TermV> = vec![];
    if let Some(g) = f.grouping {
        let gs = g.size as usize;
        for gi in 0..l / gs {
            let mut sum = em.wc(0);
            let mut all_zero = em.boolc(true);
            for t in &product_terms[gi * gs..(gi + 1) * gs] {
                let sh = em.b.ins().iadd_imm_s(t.grid, -p.product_min_grid);
                let sh = em.clamp_shift(sh);
                let v = em.b.ins().ishl(t.x, sh);
                sum = em.b.ins().iadd(sum, v);
                all_zero = em.and(all_zero, t.zero);
            }
            let g0 = em.i64c(p.product_min_grid);
            let term = if g.scaled {
                let s = p.scale.as_ref().expect("planned");
                let idx = scale_base + gi * gs / block;
                let rx = em.load(ptrs.sa, idx);
                let ry = em.load(ptrs.sb, idx);
                let x = em.decode_float(s, rx, false);
                let y = em.decode_float(s, ry, false);
                let (s_nan, s_inf, s_neg, s_sig, s_exp, s_zero) = scale_product(em, &x, &y);
                sp.add(em, s_nan, s_inf, s_neg);
                let ssig = em.signed(s_neg, s_sig);
                let value = em.b.ins().imul(sum, ssig);
                let grid = em.b.ins().iadd(g0, s_exp);
                let grid = em.b.ins().iadd_imm_s(grid, -2 * s.mantissa_bits as i64);
                let z = em.or(all_zero, s_zero);
                let (exp, present) = zero_rule(em, f.zero_exponent.groups, z, s_exp);
                TermV {
                    x: value,
                    grid,
                    exp,
                    present,
                    zero: z,
                }
            } else {
                let e0 = em.i64c(0);
                let (exp, present) = zero_rule(em, f.zero_exponent.groups, all_zero, e0);
                TermV {
                    x: sum,
                    grid: g0,
                    exp,
                    present,
                    zero: all_zero,
                }
            };
            groups.push(term);
        }
    }

    // alignment nodes
    let mut node_terms: Vec<TermV> = vec![];
    for (ni, node) in f.nodes.iter().enumerate() {
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
        // reference exponent
        let (r, any) = match node.reference {
            Reference::Fixed(r) => (em.i64c(r as i64), None),
            Reference::MaxExponent => {
                let mut r: Option<Value> = None;
                let mut any: Option<Value> = None;
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
                    any = match (any, t.present) {
                        (Some(a), Some(pr)) => Some(em.or(a, pr)),
                        (None, Some(pr)) => Some(pr),
                        (_, None) => {
                            // statically present: the node always has a reference
                            Some(em.boolc(true))
                        }
                    };
                }
                let r = r.expect("checked: every alignment has a term");
                let any = any.expect("checked: every alignment has a term");
                let zero = em.i64c(0);
                let r = em.sel(any, r, zero);
                (r, Some(any))
            }
        };
        let fmax = node
            .terms
            .iter()
            .filter_map(|t| t.keep.map(|k| k.0 as i64))
            .max();
        let (grid, exact_grid) = match (p.node_grid[ni], fmax) {
            (Some(g0), _) => (em.i64c(g0), Some(g0)),
            (None, Some(fm)) => (em.b.ins().iadd_imm_s(r, -fm), None),
            (None, None) => unreachable!("planned: a node is exact or rounded"),
        };
        let mut sum = em.wc(0);
        for (t, at) in &items {
            let kept = match (at.keep, exact_grid) {
                (Some((fb, mode)), _) => {
                    let target = em.b.ins().iadd_imm_s(r, -(fb as i64));
                    let sh = em.b.ins().isub(target, t.grid);
                    let v = em.round_shift(t.x, sh, mode);
                    let up = fmax.unwrap() - fb as i64;
                    if up > 0 {
                        em.b.ins().ishl_imm_s(v, up)
                    } else {
                        v
                    }
                }
                (None, Some(g0)) => {
                    let sh = em.b.ins().iadd_imm_s(t.grid, -g0);
                    let sh = em.clamp_shift(sh);
                    em.b.ins().ishl(t.x, sh)
                }
                (None, None) => unreachable!("planned"),
            };
            let kept = match at.drop_below {
                Some(n) => {
                    let lim = em.b.ins().iadd_imm_s(r, -(n as i64));
                    let below = em.icmp(IntCC::SignedLessThan, t.exp, lim);
                    let dropped = match t.present {
                        Some(pr) => em.and(pr, below),
                        None => below,
                    };
                    let z = em.wc(0);
                    em.sel(dropped, z, kept)
                }
                None => kept,
            };
            sum = em.b.ins().iadd(sum, kept);
        }
        let zero = em.icmp_imm(IntCC::Equal, sum, 0);
        node_terms.push(TermV {
            x: sum,
            grid,
            exp: r,
            present: any,
            zero,
        });
    }

    let root = node_terms
        .last()
        .expect("checked: a fused pipeline aligns")
        .x;
    let root_grid = node_terms.last().unwrap().grid;

    // normalisation steps
    let mut v = root;
    let mut g = root_grid;
    let nan_bits = inst.d.encode_nan().unwrap_or(0) as i64;
    let inf_bits = |neg: bool| inst.d.encode_inf(neg).unwrap_or(nan_bits as u64) as i64;
    let root_neg = em.icmp_imm(IntCC::SignedLessThan, root, 0);
    let mut ovf_flag = em.boolc(false);
    let mut ovf_bits = em.i64c(0);
    for step in &f.normalize {
        let mag = em.abs_w(v);
        let bl = em.bit_length(mag);
        let le = em.b.ins().iadd(g, bl);
        let le = em.b.ins().iadd_imm_s(le, -1);
        let floor = em.i64c(step.min_exponent as i64);
        let e = em.b.ins().smax(le, floor);
        let q = em.b.ins().iadd_imm_s(e, -(step.fraction_bits as i64));
        let sh = em.b.ins().isub(q, g);
        let s = em.clamp_shift(sh);
        let rounded = em.round_right(v, s, step.rounding);
        let pos = em.icmp_imm(IntCC::SignedGreaterThan, sh, 0);
        v = em.sel(pos, rounded, v);
        g = em.sel(pos, q, g);
        if let Some(emax) = step.max_exponent {
            let mag = em.abs_w(v);
            let bl = em.bit_length(mag);
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
    let mag = em.abs_w(v);
    let bl = em.bit_length(mag);
    let le = em.b.ins().iadd(g, bl);
    let le = em.b.ins().iadd_imm_s(le, -1);
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
    let code = em.sel(sub, man_sub, code_norm);
    let v_neg = em.icmp_imm(IntCC::SignedLessThan, v, 0);
    let sign = em.i64c(1i64 << (d.exponent_bits as i64 + m));
    let z64 = em.i64c(0);
    let sign = em.sel(v_neg, sign, z64);
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
fn scale_product(
    em: &mut Em,
    x: &super::emit::Decoded,
    y: &super::emit::Decoded,
) -> (Value, Value, Value, Value, Value, Value) {
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
    (nan, inf, neg, sig, exp, zero)
}
