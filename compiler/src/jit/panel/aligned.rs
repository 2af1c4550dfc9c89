//! The panel of truncating fused dot products with f32 results (T-FDPA: NVIDIA's f16,
//! bf16 and tf32 `mma`, `wgmma` and `tcgen05.mma`): four output columns per vector of
//! exponents (`i32x4`) and two of values (`f64x2`), under rounding toward zero.
//!
//! Per chained step of L products, in every lane: the products of the operands' f64
//! values are exact (at most 2 x 24 significant bits); the reference exponent is the
//! largest of the products' `e_a + e_b` (a zero product takes the pipeline's fixed
//! exponent, found through a sentinel exponent of zero elements) and of c's; each term is
//! cut to a multiple of `2^(emax - F)` toward zero by adding and then subtracting
//! `2^(emax - F + 52)` with the term's sign (the term lies below that constant, whose
//! unit in the last place is the cut, so only the addition rounds); the cut terms are
//! summed exactly (fewer than 53 bits apart); the conversion to f32 rounds the sum
//! toward zero, a sum of 2^128 or more becomes ±Inf and a zero +0, as `normalize`
//! says. A NaN or an infinity in A or B is not taken ([`decode`] says so and the GEMM
//! runs the batch entry); one in C, or an overflow fed to the next step, runs through:
//! its exponent field reads as 128, and Inf or NaN carries to d as the model's rules
//! give with finite products.

use super::super::emit::{Emitter, little_endian};
use super::super::{ModuleMemory, Options, Target};
use super::{AlignedFn, LANES};
use crate::checked::Checked;
use crate::exact::Rounding;
use crate::format::{Decoded, FloatFormat, Format};
use crate::ir::{Overflow, ProductsPart, Reference, TermSource, ZeroExponent, ZeroSign};
use crate::valid::Kind;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{BlockArg, InstBuilder, MemFlagsData, Value, types};

/// The exponent [`decode`] gives a zero element where zero products take a fixed
/// exponent: a product with a zero factor then lies below [`ZERO_BELOW`].
const ZERO_SENTINEL: i32 = -(1 << 20);
const ZERO_BELOW: i32 = -(1 << 19);

/// How a zero product takes part in the search for the reference exponent.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum ZeroProducts {
    /// At `e_a + e_b` as decoding gives them.
    Natural,
    /// At a fixed exponent that c's exponent always reaches (c takes part with at least
    /// f32's -126, or its own fixed exponent when zero): never the largest.
    Below,
    /// At this fixed exponent.
    Fixed(i32),
}

/// What the kernel's code depends on.
pub(super) struct Shape {
    /// Products per chained step.
    pub chain: usize,
    /// Fraction bits kept below the reference exponent.
    fraction_bits: u32,
    zero_products: ZeroProducts,
    zero_c: Option<i32>,
    /// d's canonical NaN.
    nan: i64,
}

fn is_f32(f: &FloatFormat) -> bool {
    f.signed
        && f.subnormals
        && f.specials == crate::format::Specials::Ieee
        && f.ignored_low_bits == 0
        && (f.exponent_bits, f.mantissa_bits, f.bias, f.storage_bits) == (8, 23, 127, 32)
}

/// Which fused pipelines this panel computes, or why not this one.
pub(super) fn plan(checked: Checked) -> Result<Shape, String> {
    let Kind::Fused(cf) = checked.kind() else {
        return Err("not a fused pipeline".into());
    };
    let (f, ops) = (&cf.pipeline, &cf.operands);
    let cond = f.conditioning;
    if f.scaled_products
        || f.product_overflow.is_some()
        || f.grouping.is_some()
        || cond.flush_a
        || cond.flush_b
        || cond.flush_c
        || f.zero_sign != ZeroSign::Positive
    {
        return Err("scales, groups, flushes, overflowing products or signed zeros".into());
    }
    let [node] = &f.nodes[..] else {
        return Err("more than one alignment".into());
    };
    let mut kept = vec![];
    for t in &node.terms {
        match (t.source, t.keep, t.drop_below) {
            (
                TermSource::Products(ProductsPart::All) | TermSource::C,
                Some((fb, Rounding::TowardZero)),
                None,
            ) => kept.push((t.source, fb)),
            _ => return Err("a term other than all products or c, cut toward zero".into()),
        }
    }
    let fraction_bits = match &kept[..] {
        [(x, f1), (y, f2)] if f1 == f2 && x != y => *f1,
        _ => return Err("not the products and c at one width".into()),
    };
    if node.reference != Reference::MaxExponent {
        return Err("a fixed reference exponent".into());
    }
    let normalize_f32 = match &f.normalize[..] {
        [n] => {
            (n.min_exponent, n.max_exponent, n.fraction_bits) == (-126, Some(127), 23)
                && n.rounding == Rounding::TowardZero
                && n.overflow == Overflow::Inf
        }
        _ => false,
    };
    if !normalize_f32 || !is_f32(&ops.c) || !is_f32(&ops.d) {
        return Err("not c and d in f32, normalised toward zero".into());
    }
    let zero_c = match f.zero_exponent.c {
        ZeroExponent::Natural => None,
        ZeroExponent::Fixed(e) => Some(e),
        ZeroExponent::Never => return Err("zero terms outside the search".into()),
    };
    let lowest_c = zero_c.map_or(-126, |z| z.min(-126));
    let zero_products = match f.zero_exponent.products {
        ZeroExponent::Natural => ZeroProducts::Natural,
        ZeroExponent::Fixed(e) if e <= lowest_c => ZeroProducts::Below,
        ZeroExponent::Fixed(e) => ZeroProducts::Fixed(e),
        ZeroExponent::Never => return Err("zero terms outside the search".into()),
    };
    let element_fits = |x: &FloatFormat| {
        x.mantissa_bits <= 23 && x.min_exponent() >= -300 && x.max_exponent() <= 300
    };
    if !element_fits(&ops.a) || !element_fits(&ops.b) {
        return Err("elements wider than the panel's f64 products".into());
    }
    // the cut's constant 2^(emax - F + 52) is a finite f64 for the largest reference:
    // a product's e_a + e_b, c's 128 (an infinity's field), a fixed zero exponent
    let highest = [
        (ops.a.max_exponent() + ops.b.max_exponent()) as i64,
        128,
        zero_c.map_or(i64::MIN, i64::from),
        match zero_products {
            ZeroProducts::Fixed(e) => e as i64,
            _ => i64::MIN,
        },
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    if highest - fraction_bits as i64 + 52 > 1023 {
        return Err("a reference exponent beyond the panel's f64 cut".into());
    }
    let k = checked.k();
    let chain = match f.chain as usize {
        0 => k,
        l => l,
    };
    // terms below 2^(emax + 2), cut at 2^(emax - F): the chain's sum spans F + 2 + the
    // carries of chain + 1 terms
    let carries = usize::BITS - chain.leading_zeros();
    if chain == 0 || !k.is_multiple_of(chain) || fraction_bits + 2 + carries > 52 {
        return Err("a chained step wider than f64".into());
    }
    Ok(Shape {
        chain,
        fraction_bits,
        zero_products,
        zero_c,
        nan: checked.instruction().arithmetic.d.encode_nan().unwrap_or(0) as i64,
    })
}

/// Elements as the kernel reads them: their f64 values and exponents (zeros at
/// [`ZERO_SENTINEL`] unless zero products take their decoded exponents), or `None` when
/// one is a NaN or an infinity.
pub(super) fn decode(format: &Format, shape: &Shape, x: &[u64]) -> Option<(Vec<f64>, Vec<i32>)> {
    let mut values = Vec::with_capacity(x.len());
    let mut exponents = Vec::with_capacity(x.len());
    for &raw in x {
        let Decoded::Finite(v) = format.decode(raw) else {
            return None;
        };
        let magnitude = v.significand as f64 * 2f64.powi(v.exponent - v.fraction_bits as i32);
        values.push(if v.negative { -magnitude } else { magnitude });
        exponents.push(match shape.zero_products {
            ZeroProducts::Natural => v.exponent,
            _ if v.is_zero() => ZERO_SENTINEL,
            _ => v.exponent,
        });
    }
    Some((values, exponents))
}

/// A row of A as the kernel reads it: each value twice, each exponent four times (the
/// lanes it meets them in), into `values` and `exponents`.
pub(super) fn splat_row(
    (a, a_exp): (&[f64], &[i32]),
    values: &mut Vec<f64>,
    exponents: &mut Vec<i32>,
) {
    values.clear();
    exponents.clear();
    values.extend(a.iter().flat_map(|&x| [x; 2]));
    exponents.extend(a_exp.iter().flat_map(|&e| [e; LANES]));
}

/// Compile the kernel.
pub(super) fn build(shape: &Shape) -> Result<(ModuleMemory, AlignedFn), String> {
    let mut module = super::super::new_module(Options::default()).map_err(|e| e.message)?;
    let mut target = Target::new(&mut module, false, "");
    let id = super::define(&mut target, "panel", (2, 6), |em, p| emit(em, shape, p))?;
    module
        .finalize_definitions()
        .map_err(|e| format!("cannot finalize the panel: {e}"))?;
    // SAFETY: defined with exactly this signature
    let run =
        unsafe { std::mem::transmute::<*const u8, AlignedFn>(module.get_finalized_function(id)) };
    Ok((ModuleMemory(Some(module)), run))
}

/// `run(columns, steps, a, a_exp, b, b_exp, c, d)`: eight columns a round while eight
/// remain, then four; in each round, the chained steps one after the other. The row of A
/// comes with each value twice and each exponent four times (a vector's lanes:
/// [`splat_row`]).
fn emit(em: &mut Emitter, shape: &Shape, p: &[Value]) {
    super::column_rounds(em, p[0], &[2, 1], |em, j, quads| {
        emit_columns(em, shape, p, j, quads)
    });
}

/// Columns `j..j + quads * LANES`, from the current block on, ending in a block that
/// falls through. Each run of four columns carries its own pointers into A and B (equal
/// for A, but the code generator cannot merge their loads, which then stay operands of
/// the arithmetic instead of registers held across the runs), so that the runs' chains
/// of steps are independent code the processor overlaps.
fn emit_columns(em: &mut Emitter, shape: &Shape, p: &[Value], j: Value, quads: usize) {
    let (steps, av, ae, bv, be, c, d) = (p[1], p[2], p[3], p[4], p[5], p[6], p[7]);
    let l = shape.chain as i64;
    let le = little_endian();
    // one run of four columns in b: steps x l values (8 bytes) and exponents (4 bytes)
    let run_values = em.b.ins().imul_imm_s(steps, l * LANES as i64 * 8);
    let run_exponents = em.b.ins().imul_imm_s(steps, l * LANES as i64 * 4);
    let quad = em.b.ins().ushr_imm_s(j, 2);
    let cd = em.b.ins().imul_imm_s(j, 8);
    let cp = em.b.ins().iadd(c, cd);
    let dp = em.b.ins().iadd(d, cd);
    // per run: a, a_exp, b, b_exp, then the accumulators
    let mut start = vec![em.b.ins().iconst(types::I64, 0)];
    let mut accs = vec![];
    for q in 0..quads {
        let at = em.b.ins().iadd_imm_s(quad, q as i64);
        let values = em.b.ins().imul(at, run_values);
        let exponents = em.b.ins().imul(at, run_exponents);
        start.push(av);
        start.push(ae);
        start.push(em.b.ins().iadd(bv, values));
        start.push(em.b.ins().iadd(be, exponents));
        let code = em.load_low32x4(cp, q * LANES);
        accs.push(em.b.ins().bitcast(types::F32X4, le, code));
    }
    start.extend(accs);

    let (steps_head, step, done) = (
        em.b.create_block(),
        em.b.create_block(),
        em.b.create_block(),
    );
    for _ in 0..1 + 4 * quads {
        em.b.append_block_param(steps_head, types::I64);
    }
    for _ in 0..quads {
        em.b.append_block_param(steps_head, types::F32X4);
    }
    em.b.ins().jump(steps_head, &start.map_args());
    em.b.switch_to_block(steps_head);
    let sp = em.b.block_params(steps_head).to_vec();
    let more = em.b.ins().icmp(IntCC::UnsignedLessThan, sp[0], steps);
    em.b.ins().brif(more, step, &[], done, &[]);

    em.b.switch_to_block(step);
    let mut next = vec![em.b.ins().iadd_imm_s(sp[0], 1)];
    let mut accs = vec![];
    for q in 0..quads {
        let [av, ae, bv, be] = [0, 1, 2, 3].map(|i| sp[1 + 4 * q + i]);
        accs.push(emit_step(
            em,
            shape,
            [av, ae, bv, be],
            sp[1 + 4 * quads + q],
        ));
        next.push(em.b.ins().iadd_imm_s(av, l * 16));
        next.push(em.b.ins().iadd_imm_s(ae, l * 16));
        next.push(em.b.ins().iadd_imm_s(bv, l * LANES as i64 * 8));
        next.push(em.b.ins().iadd_imm_s(be, l * LANES as i64 * 4));
    }
    next.extend(accs);
    em.b.ins().jump(steps_head, &next.map_args());

    em.b.switch_to_block(done);
    super::store_results(em, &sp[1 + 4 * quads..], shape.nan, dp);
}

/// Values as block arguments.
trait MapArgs {
    fn map_args(&self) -> Vec<BlockArg>;
}

impl MapArgs for Vec<Value> {
    fn map_args(&self) -> Vec<BlockArg> {
        self.iter().copied().map(BlockArg::Value).collect()
    }
}

/// One chained step of four columns: `[a, a_exp, b, b_exp]` at the step's first product,
/// `acc` the four c (f32); returns the four d.
fn emit_step(em: &mut Emitter, shape: &Shape, [av, ae, bv, be]: [Value; 4], acc: Value) -> Value {
    let le = little_endian();
    // loads every step makes (never behind a guard within the step's block)
    let read = MemFlagsData::new()
        .with_notrap()
        .with_readonly()
        .with_can_move();
    // c's exponent: its field less the bias, a subnormal's -126, a zero's the fixed one
    let bits = em.b.ins().bitcast(types::I32X4, le, acc);
    let field = em.b.ins().ushr_imm_s(bits, 23);
    let mask = em.splat32(0xff);
    let field = em.b.ins().band(field, mask);
    let one = em.splat32(1);
    let field = em.b.ins().smax(field, one);
    let bias = em.splat32(127);
    let mut emax = em.b.ins().isub(field, bias);
    if let Some(z) = shape.zero_c {
        let magnitude = em.splat32(0x7fff_ffff);
        let magnitude = em.b.ins().band(bits, magnitude);
        let zero = em.splat32(0);
        let is_zero = em.b.ins().icmp(IntCC::Equal, magnitude, zero);
        let z = em.splat32(z as i64);
        emax = em.b.ins().bitselect(is_zero, z, emax);
    }
    // the products' e_a + e_b: the largest (a zero factor's sentinel never is, unless
    // every product is zero), and the smallest, below the sentinel's bound when a
    // product is zero
    let mut smallest = None;
    let mut largest = emax;
    for i in 0..shape.chain {
        let ea = em.b.ins().load(types::I32X4, read, ae, (i * 16) as i32);
        let eb =
            em.b.ins()
                .load(types::I32X4, read, be, (i * LANES * 4) as i32);
        let e = em.b.ins().iadd(ea, eb);
        largest = em.b.ins().smax(largest, e);
        if let ZeroProducts::Fixed(_) = shape.zero_products {
            smallest = Some(match smallest {
                None => e,
                Some(x) => em.b.ins().smin(x, e),
            });
        }
    }
    emax = largest;
    if let (ZeroProducts::Fixed(z), Some(smallest)) = (shape.zero_products, smallest) {
        // a zero product takes part at the fixed exponent (and no product's sentinel
        // exponent does: at most every product is zero, leaving c's or the fixed one)
        let below = em.splat32(ZERO_BELOW as i64);
        let any_zero = em.b.ins().icmp(IntCC::SignedLessThan, smallest, below);
        let z = em.splat32(z as i64);
        let none = em.splat32(i32::MIN as i64);
        let zero_term = em.b.ins().bitselect(any_zero, z, none);
        emax = em.b.ins().smax(emax, zero_term);
    }
    // the cut's constant 2^(emax - F + 52), two lanes at a time
    let offset = em.splat32(1023 + 52 - shape.fraction_bits as i64);
    let biased = em.b.ins().iadd(emax, offset);
    let cut = |em: &mut Emitter, half: Value| -> Value {
        let x = em.b.ins().ishl_imm_s(half, 52);
        em.b.ins().bitcast(types::F64X2, le, x)
    };
    let lo = em.b.ins().swiden_low(biased);
    let hi = em.b.ins().swiden_high(biased);
    let cuts = [cut(em, lo), cut(em, hi)];
    // c's lanes 0-1 and 2-3 in f64
    let swapped = em.pick32(acc, acc, [2, 3, 0, 1]);
    let c_halves = [
        em.b.ins().fvpromote_low(acc),
        em.b.ins().fvpromote_low(swapped),
    ];
    // the cut terms of each half, summed as a tree (exact in any order: fewer dependent
    // additions than a chain)
    let mut terms = [0, 1].map(|h| vec![truncate(em, c_halves[h], cuts[h])]);
    for i in 0..shape.chain {
        let a = em.b.ins().load(types::F64X2, read, av, (i * 16) as i32);
        for (h, terms) in terms.iter_mut().enumerate() {
            let b =
                em.b.ins()
                    .load(types::F64X2, read, bv, (i * LANES * 8 + h * 16) as i32);
            let product = em.b.ins().fmul(a, b);
            terms.push(truncate(em, product, cuts[h]));
        }
    }
    let sums = terms.map(|mut level| {
        while level.len() > 1 {
            level = level
                .chunks(2)
                .map(|pair| match pair {
                    [x, y] => em.b.ins().fadd(*x, *y),
                    _ => pair[0],
                })
                .collect();
        }
        level[0]
    });
    // a sum of 2^128 or more becomes ±Inf, looked for only where a lane's reference
    // exponent allows one: every term lies below 2^(emax + 2) (c below 2^(emax + 1)), so
    // the sum lies below (2 chain + 1) 2^(emax + 1)
    let carries = (2 * shape.chain as u32 + 1)
        .next_power_of_two()
        .trailing_zeros();
    let safe = em.splat32(127 - carries as i64);
    let large = em.b.ins().icmp(IntCC::SignedGreaterThan, emax, safe);
    let any = em.b.ins().vany_true(large);
    let (fix, join) = (em.b.create_block(), em.b.create_block());
    em.b.append_block_param(join, types::F64X2);
    em.b.append_block_param(join, types::F64X2);
    em.b.ins()
        .brif(any, fix, &[], join, &sums.to_vec().map_args());
    em.b.switch_to_block(fix);
    let fixed = sums.map(|s| overflow_to_inf(em, s)).to_vec();
    em.b.ins().jump(join, &fixed.map_args());
    em.b.switch_to_block(join);
    let sums = em.b.block_params(join).to_vec();
    let halves = [0, 1].map(|h| em.b.ins().fvdemote(sums[h]));
    let d = em.pick32(halves[0], halves[1], [0, 1, 4, 5]);
    // a zero is +0 (-0 + +0 is +0 rounding toward zero)
    let zero = em.b.ins().f32const(0.0);
    let zero = em.b.ins().splat(types::F32X4, zero);
    em.b.ins().fadd(d, zero)
}

/// `x` cut toward zero to a multiple of the unit in the last place of `cut` (a power of
/// two above |x|): `(x + cut') - cut'`, `cut'` with x's sign, rounding toward zero.
fn truncate(em: &mut Emitter, x: Value, cut: Value) -> Value {
    let le = little_endian();
    let bits = em.b.ins().bitcast(types::I64X2, le, x);
    let sign = em.splat64(i64::MIN);
    let sign = em.b.ins().band(bits, sign);
    let c = em.b.ins().bitcast(types::I64X2, le, cut);
    let c = em.b.ins().bor(c, sign);
    let c = em.b.ins().bitcast(types::F64X2, le, c);
    let up = em.b.ins().fadd(x, c);
    em.b.ins().fsub(up, c)
}

/// A sum of 2^128 or more becomes ±Inf (rounding toward zero would give f32's largest
/// finite value).
fn overflow_to_inf(em: &mut Emitter, x: Value) -> Value {
    let le = little_endian();
    let magnitude = em.b.ins().fabs(x);
    let limit = em.b.ins().f64const(2f64.powi(128));
    let limit = em.b.ins().splat(types::F64X2, limit);
    let big =
        em.b.ins()
            .fcmp(FloatCC::GreaterThanOrEqual, magnitude, limit);
    let bits = em.b.ins().bitcast(types::I64X2, le, x);
    let sign = em.splat64(i64::MIN);
    let sign = em.b.ins().band(bits, sign);
    let inf = em.splat64(0x7ff0_0000_0000_0000);
    let inf = em.b.ins().bor(inf, sign);
    let r = em.b.ins().bitselect(big, inf, bits);
    em.b.ins().bitcast(types::F64X2, le, r)
}
