//! Lowering of fused dot-product-add pipelines (T-, ST-, GST-, TR-, GTR-FDPA and exact
//! sums), one chained step after another.
//!
//! Each chained step is straight-line code for finite inputs ([`finite_step`]) that also
//! notes whether any input is a NaN or an infinity; if one is, a small out-of-line loop
//! ([`special::special_step`]) computes the special result instead. The finite step is:
//! c as a term ([`decode`]), the exact products and groups ([`products`]), the alignment
//! nodes ([`align`], [`simd`] for T-FDPA in SIMD lanes, [`sum`] for sums wider than a
//! register), then the normalisation steps and d's encoding ([`round`]).
//!
//! Every aligned value is an integer of the accumulator width (i64 or i128) times
//! `2^grid`, with the grid a run-time i64 or a static one. [`plan::plan`] chooses the
//! width and the schemes from the validator's widths and grids
//! ([`crate::valid::FusedInfo`]) and refuses what they cannot compute exactly.

mod align;
mod decode;
pub(crate) mod plan;
mod products;
pub(crate) mod records;
mod round;
mod simd;
mod special;
mod sum;

use super::emit::Emitter;
use crate::format::FloatFormat;
use crate::ir::*;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    BlockArg, InstBuilder, StackSlot, StackSlotData, StackSlotKind, Value, types,
};
pub(crate) use plan::{Plan, plan};

/// A term on its way into an alignment: the value `x * 2^(natural_exp - d)` (for base
/// terms kept as sign and magnitude `sig`, `x` formed only when needed), its exponent in
/// the max search and whether it takes part in it (`None`: always).
#[derive(Clone, Copy)]
struct Term {
    /// The sign (i8) of a base term.
    neg: Value,
    /// The magnitude of a base term (a product or c), an i64.
    sig: Option<Value>,
    /// The signed value, in the accumulator width (sums and groups).
    x: Option<Value>,
    /// Fraction bits of the value below `natural_exp`.
    d: i64,
    /// The exponent the max-exponent search sees (e_zero for a zero, by the rule).
    exp: Value,
    /// The exponent the value is scaled by.
    natural_exp: Value,
    /// Whether the term takes part in the max search (`None`: always).
    present: Option<Value>,
    /// True (i8) for a zero value.
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
    /// The signed value as an f64, where it is exact there and was computed as one (the
    /// SIMD node's sum in f64 lanes).
    float: Option<Value>,
}

impl Term {
    fn signed(&self, em: &mut Emitter) -> Value {
        match (self.x, self.sig) {
            (Some(x), _) => x,
            (None, Some(sig)) => em.signed(self.neg, sig),
            (None, None) => unreachable!("a term is built with its value or its significand"),
        }
    }
    fn grid(&self, em: &mut Emitter) -> Value {
        em.b.ins().iadd_imm_s(self.natural_exp, -self.d)
    }
    /// A sum `x * 2^(natural_exp - d)` whose exponent in a later max search is `exp`.
    fn sum(
        em: &mut Emitter,
        x: Value,
        d: i64,
        exp: Value,
        natural_exp: Value,
        present: Option<Value>,
    ) -> Term {
        let zero = em.icmp_imm(cranelift_codegen::ir::condcodes::IntCC::Equal, x, 0);
        let no_sign = em.boolc(false);
        Term {
            neg: no_sign,
            sig: None,
            x: Some(x),
            d,
            exp,
            natural_exp,
            present,
            zero,
            node: true,
            sig_bits: 0,
            special: None,
            sign40: None,
            float: None,
        }
    }
}

/// The special-value outcome so far: booleans (i8) for a NaN, +Inf and -Inf.
struct SpecialFlags {
    nan: Value,
    pos_inf: Value,
    neg_inf: Value,
}

impl SpecialFlags {
    fn none(em: &mut Emitter) -> SpecialFlags {
        let f0 = em.boolc(false);
        SpecialFlags {
            nan: f0,
            pos_inf: f0,
            neg_inf: f0,
        }
    }
    fn add(&mut self, em: &mut Emitter, nan: Value, inf: Value, neg: Value) {
        self.nan = em.or(self.nan, nan);
        let pos = em.not(neg);
        let pi = em.and(inf, pos);
        let ni = em.and(inf, neg);
        self.pos_inf = em.or(self.pos_inf, pi);
        self.neg_inf = em.or(self.neg_inf, ni);
    }
}

/// The packed layout of [`align::packed_node`]: the offset of the biased exponents.
const EXP_OFFSET: i64 = 1 << 20;

/// Bit positions of a packed term: significand below `SIGN_BIT`, exponent above.
const SIGN_BIT: i64 = 40;

const EXP_SHIFT: i64 = 41;

/// Set in a packed term whose inputs include a NaN or an infinity (above every biased
/// exponent, which stays below 2^21).
const SPECIAL_BIT: i64 = 62;

/// The operand pointers of one kernel call.
pub(crate) struct Ptrs {
    pub a: Value,
    pub b: Value,
    pub sa: Value,
    pub sb: Value,
}

/// Emit the whole dot-product-add: every chained step in order. Returns d's bits (i64).
pub(crate) fn emit(
    em: &mut Emitter,
    inst: &Instruction,
    fused: &Fused,
    p: &Plan,
    c: Value,
    ptrs: &Ptrs,
) -> Value {
    let mut c = c;
    let mut c_format = &p.c;
    // one accumulator for every chained step
    let slot = p.limbs.as_ref().map(|l| {
        em.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            ((l.digits + 2) * 8) as u32,
            3,
        ))
    });
    for start in (0..inst.k()).step_by(fused.chain as usize) {
        c = emit_step(em, inst, fused, p, c_format, c, ptrs, start, slot);
        c_format = &p.d;
    }
    c
}

fn zero_rule(
    em: &mut Emitter,
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

/// One chained step. The lean [`finite_step`] runs first and notes whether any input is
/// a NaN or an infinity; if one is, the result is a NaN or an infinity (every input feeds
/// a product, c or a group scale). When c is the only special input (a chained step after
/// one that overflowed, say) and products cannot overflow, c's NaN or infinity is the
/// result ([`c_only`]); otherwise the compact [`special_step`] computes which.
#[allow(clippy::too_many_arguments)]
fn emit_step(
    em: &mut Emitter,
    inst: &Instruction,
    fused: &Fused,
    p: &Plan,
    c_format: &FloatFormat,
    c_raw: Value,
    ptrs: &Ptrs,
    start: usize,
    slot: Option<StackSlot>,
) -> Value {
    let mut special: Option<Value> = None;
    let r = finite_step(
        em,
        inst,
        fused,
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
    let cf = c_format;
    // (not where a product may overflow to Inf, nor for chains so short that the loop
    // costs little more than the scan that would avoid it)
    let c_special = match fused.product_overflow {
        None if fused.chain >= SHORTCUT_CHAIN => decode::special_code(em, cf, c_raw),
        _ => None,
    };
    if let Some(c_special) = c_special {
        // c is special and no operand is: c's NaN or infinity is the result
        let c_alone = match operand_specials(em, inst, fused, p, ptrs, start) {
            Some(ops) => {
                let none = em.not(ops);
                em.and(c_special, none)
            }
            None => c_special,
        };
        let (c_block, products) = (em.b.create_block(), em.b.create_block());
        em.b.set_cold_block(c_block);
        em.b.set_cold_block(products);
        em.b.ins().brif(c_alone, c_block, &[], products, &[]);
        em.b.switch_to_block(c_block);
        let r = c_only(em, inst, fused, c_format, c_raw);
        em.b.ins().jump(merge, &[BlockArg::Value(r)]);
        em.b.switch_to_block(products);
    }
    let r = special::special_step(em, inst, fused, p, c_format, c_raw, ptrs, start);
    em.b.ins().jump(merge, &[BlockArg::Value(r)]);
    em.b.switch_to_block(merge);
    em.b.block_params(merge)[0]
}

/// The shortest chain whose special path first tests whether c is the only special
/// input (shorter ones go straight to the loop: measured on RDNA3's E-FDPA, L = 2, the
/// test cost 2 % on normal inputs).
const SHORTCUT_CHAIN: u32 = 4;

/// Is any operand of a chained step (a, b, and the scale factors of the blocks it
/// touches) a NaN or an infinity? Their codes tested in a small loop, for the special path
/// (`None`: no operand format has such codes). A loop, not straight-line code: each use
/// of the operand pointers here weighs on the register allocator's choices for the finite
/// path. The scan may include a scale factor no group reads, which only sends the step
/// to the full special path.
fn operand_specials(
    em: &mut Emitter,
    inst: &Instruction,
    fused: &Fused,
    p: &Plan,
    ptrs: &Ptrs,
    start: usize,
) -> Option<Value> {
    let l = fused.chain as i64;
    let mut any: Option<Value> = None;
    let element_specials =
        decode::special_code_possible(&p.a) || decode::special_code_possible(&p.b);
    if element_specials {
        let head = em.b.create_block();
        let body = em.b.create_block();
        let exit = em.b.create_block();
        for b in [head, body, exit] {
            em.b.set_cold_block(b);
        }
        em.b.append_block_param(head, types::I64);
        em.b.append_block_param(head, types::I8);
        em.b.append_block_param(exit, types::I8);
        let k0 = em.i64c(start as i64);
        let f0 = em.boolc(false);
        em.b.ins()
            .jump(head, &[BlockArg::Value(k0), BlockArg::Value(f0)]);
        em.b.switch_to_block(head);
        let hp = em.b.block_params(head).to_vec();
        let (k, seen) = (hp[0], hp[1]);
        let more = em.icmp_imm(IntCC::SignedLessThan, k, start as i64 + l);
        em.b.ins()
            .brif(more, body, &[], exit, &[BlockArg::Value(seen)]);
        em.b.switch_to_block(body);
        let mut flag = Some(seen);
        for (format, ptr) in [(&p.a, ptrs.a), (&p.b, ptrs.b)] {
            let raw = em.load_at(ptr, k);
            let x = decode::special_code(em, format, raw);
            or_flag(em, &mut flag, x);
        }
        let next = em.b.ins().iadd_imm_s(k, 1);
        let flag = flag.unwrap_or(seen);
        em.b.ins()
            .jump(head, &[BlockArg::Value(next), BlockArg::Value(flag)]);
        em.b.switch_to_block(exit);
        any = Some(em.b.block_params(exit)[0]);
    }
    if let (Some(s), Some(scale)) = (&p.scale, &inst.arithmetic.scale) {
        let block = scale.block as usize;
        for idx in start / block..=(start + l as usize - 1) / block {
            for ptr in [ptrs.sa, ptrs.sb] {
                let raw = em.load_guarded(ptr, idx);
                let flag = decode::special_code(em, s, raw);
                or_flag(em, &mut any, flag);
            }
        }
    }
    any
}

/// The result of a step whose only special input is c (a NaN or an infinity) and whose
/// products are finite: c's NaN or infinity, as [`special::special_step`] gives it.
fn c_only(
    em: &mut Emitter,
    inst: &Instruction,
    fused: &Fused,
    c_format: &FloatFormat,
    c_raw: Value,
) -> Value {
    let cf = c_format;
    let dc = em.decode_float(cf, c_raw, fused.conditioning.flush_c);
    let ip = em.i64c(inf_bits(inst, false));
    let inn = em.i64c(inf_bits(inst, true));
    let infv = em.sel(dc.neg, inn, ip);
    let nanc = em.i64c(nan_bits(inst));
    em.sel(dc.nan, nanc, infv)
}

fn or_flag(em: &mut Emitter, acc: &mut Option<Value>, x: Option<Value>) {
    if let Some(x) = x {
        *acc = Some(match *acc {
            None => x,
            Some(a) => em.or(a, x),
        });
    }
}

/// The d encoding of NaN, and of an infinity (NaN where d has none).
fn nan_bits(inst: &Instruction) -> i64 {
    inst.arithmetic.d.encode_nan().unwrap_or(0) as i64
}

fn inf_bits(inst: &Instruction, neg: bool) -> i64 {
    inst.arithmetic
        .d
        .encode_inf(neg)
        .unwrap_or(nan_bits(inst) as u64) as i64
}

/// A step all of whose inputs are finite. `special` collects whether any input is a NaN
/// or an infinity (the caller then takes the special path).
#[allow(clippy::too_many_arguments)]
fn finite_step(
    em: &mut Emitter,
    inst: &Instruction,
    f: &Fused,
    p: &Plan,
    c_format: &FloatFormat,
    c_raw: Value,
    ptrs: &Ptrs,
    start: usize,
    slot: Option<StackSlot>,
    special: &mut Option<Value>,
) -> Value {
    // only products overflowing to Inf make specials here
    let mut sp = SpecialFlags::none(em);
    let c_term = decode::c_term(em, f, c_format, c_raw);
    let product_terms = products::products(em, inst, f, p, ptrs, start, &mut sp);
    let groups = products::groups(em, inst, f, p, ptrs, start, &product_terms, special);
    let node_terms = align::nodes(
        em,
        f,
        p,
        c_term,
        &product_terms,
        &groups,
        ptrs,
        start,
        slot,
        special,
    );
    let last = *node_terms
        .last()
        .expect("one node term per alignment node, and a checked fused pipeline has one");
    // one normalisation into binary32: the SIMD T-FDPA node's sum in f64 lanes is exact
    // in f64 and rounds there; in i32 lanes it is a small integer (and the f64 unit
    // measures slower for it)
    let direct = if last.float.is_some() {
        round::host_binary32(em, inst, f, last, &sp)
    } else if p
        .simd
        .is_some_and(|s| s.int_lanes && s.shape == plan::SimdShape::All)
    {
        round::integer_binary32(em, inst, f, last, &sp)
    } else if !p.wide && p.limbs.is_none() && p.narrow_exponents {
        // (the sum is exact in the accumulator, not a window with a sticky bit)
        round::host_two_steps(em, inst, f, last, &sp)
    } else {
        None
    };
    if let Some(code) = direct {
        return code;
    }
    let normalized = round::normalize(em, inst, &p.d, f, last);
    round::encode(em, inst, &p.d, f, &normalized, &sp)
}
