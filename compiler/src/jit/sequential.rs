//! Lowering of sequential pipelines (FMA chains, FP32 multiply-add trees with flushing) to
//! native f32/f64 arithmetic: every step the IR describes is one IEEE operation rounded to
//! nearest even, which the host computes exactly (`fma` for an exact product added to the
//! accumulator). [`plan`] refuses any step a native operation would not reproduce bit for bit.
//!
//! f32 pipelines whose elements widen to f32 by lane operations (f16, bf16) and whose k is
//! a multiple of 4 decode, multiply and add pairwise four lanes per SIMD instruction
//! ([`emit_simd`]); the accumulation into c stays one scalar addition per term, in order.
//! Where every rounded step flushes subnormal results keeping the sign, the plan also
//! says the host may run the kernel with flush-to-zero on ([`Plan::flush_to_zero`]): the
//! hardware then flushes exactly the results the code flushes, without the slow path
//! x86 takes for subnormal results, and the code's own flushes keep the bits right under
//! any control state.

use super::emit::{Emitter, little_endian};
use crate::exact::Rounding;
use crate::format::{FloatFormat, Specials};
use crate::ir::*;
use crate::valid::{CheckedSequential, FloatOperands};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Type, Value, types};

/// The native float type every step computes in, and how products are formed.
pub(crate) struct Plan {
    /// a, b, c and d, float formats by validation.
    pub(super) operands: FloatOperands,
    pub(super) native: Native,
    /// Exact products are fused into the accumulation (`fma`) rather than formed first.
    fuse_products: bool,
    /// Products and pairwise sums four lanes per SIMD instruction ([`emit_simd`]).
    simd: bool,
    /// Running under the host's flush-to-zero mode gives the same bits (and avoids the
    /// slow path for subnormal results): every rounded step flushes subnormal results
    /// keeping the sign, a, b and c are flushed on input (AArch64's FZ also reads subnormal
    /// inputs as zero), products are rounded from at most
    /// 23 significant bits and sums are of f32 values (multiples of 2^-149), so an exact
    /// result below 2^-126 is one the IEEE rounding leaves subnormal or zero, and the
    /// hardware's tininess test (before or after rounding) agrees with the model's.
    pub(crate) flush_to_zero: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Native {
    F32,
    F64,
}

impl Native {
    fn of(float: &FloatFormat) -> Option<Native> {
        let plain = float.signed
            && float.subnormals
            && float.specials == Specials::Ieee
            && float.ignored_low_bits == 0;
        match (
            plain,
            float.exponent_bits,
            float.mantissa_bits,
            float.bias,
            float.storage_bits,
        ) {
            (true, 8, 23, 127, 32) => Some(Native::F32),
            (true, 11, 52, 1023, 64) => Some(Native::F64),
            _ => None,
        }
    }
    fn layout(self) -> (i64, i64, i64) {
        match self {
            Native::F32 => (8, 23, 127),
            Native::F64 => (11, 52, 1023),
        }
    }
    fn ty(self) -> Type {
        match self {
            Native::F32 => types::F32,
            Native::F64 => types::F64,
        }
    }
    fn int(self) -> Type {
        match self {
            Native::F32 => types::I32,
            Native::F64 => types::I64,
        }
    }
    fn min_exponent(self) -> i64 {
        1 - self.layout().2
    }
    fn max_exponent(self) -> i64 {
        self.layout().2
    }
}

fn arith_native(a: &RoundedOp, what: &str) -> Result<Native, String> {
    if a.rounding != Rounding::NearestEven {
        return Err(format!(
            "{what} rounds {}; the JIT lowers only round-to-nearest-even native steps",
            a.rounding.short()
        ));
    }
    a.format.as_float().and_then(Native::of).ok_or_else(|| {
        format!(
            "{what} computes in `{}`, not a native f32/f64",
            a.format.name
        )
    })
}

/// Can every value of `f` be converted exactly into `n`?
fn fits<'f>(x: &'f FloatFormat, name: &str, n: Native) -> Result<&'f FloatFormat, String> {
    let (_, nm, _) = n.layout();
    let ok = x.signed
        && x.subnormals
        && x.specials == Specials::Ieee
        && (x.mantissa_bits as i64) <= nm
        && (x.min_exponent() as i64 - x.mantissa_bits as i64) >= n.min_exponent() - nm
        && (x.max_exponent() as i64) <= n.max_exponent();
    if ok {
        Ok(x)
    } else {
        Err(format!(
            "`{}` does not convert exactly into the native accumulator",
            name
        ))
    }
}

pub(crate) fn plan(inst: &Instruction, checked: &CheckedSequential) -> Result<Plan, String> {
    let (s, ops) = (&checked.pipeline, &checked.operands);
    let native = arith_native(&s.accumulate, "the accumulation")?;
    if let ProductRule::Rounded(a) = &s.product
        && arith_native(a, "the product")? != native
    {
        return Err("products and accumulation round into different formats".into());
    }
    if let Some((g, a)) = &s.pairwise {
        if arith_native(a, "the pairwise sum")? != native {
            return Err("pairwise sums and accumulation round into different formats".into());
        }
        if !g.is_power_of_two() || !inst.arithmetic.k.is_multiple_of(*g) {
            return Err(format!(
                "pairwise groups of {g} do not tile k = {}",
                inst.arithmetic.k
            ));
        }
    }
    let ar = &inst.arithmetic;
    let a = fits(&ops.a, &ar.a.name, native)?;
    let b = fits(&ops.b, &ar.b.name, native)?;
    fits(&ops.c, &ar.c.name, native)?;
    if Native::of(&ops.d) != Some(native) {
        return Err(format!(
            "d `{}` is not the accumulator format",
            inst.arithmetic.d.name
        ));
    }
    let exact_product_fits = {
        let (_, nm, _) = native.layout();
        (a.mantissa_bits + b.mantissa_bits + 2) as i64 <= nm + 1
            && (a.min_exponent() as i64 - a.mantissa_bits as i64)
                + (b.min_exponent() as i64 - b.mantissa_bits as i64)
                >= native.min_exponent() - nm
            && ((a.max_exponent() + b.max_exponent()) as i64) < native.max_exponent()
    };
    let fuse_products = match (&s.product, &s.pairwise) {
        (ProductRule::Rounded(_), _) => false,
        (ProductRule::Exact, None) => !exact_product_fits,
        (ProductRule::Exact, Some(_)) => {
            if !exact_product_fits {
                return Err(
                    "exact products added pairwise are wider than the native format".into(),
                );
            }
            false
        }
    };
    let every_step_flushes = s.accumulate.flush_keep_sign
        && s.pairwise.as_ref().is_none_or(|(_, a)| a.flush_keep_sign)
        && matches!(&s.product, ProductRule::Rounded(r) if r.flush_keep_sign);
    let flush_to_zero = native == Native::F32
        && every_step_flushes
        && s.conditioning.flush_a
        && s.conditioning.flush_b
        && s.conditioning.flush_c
        && (a.mantissa_bits + 1) + (b.mantissa_bits + 1) <= 23;
    let simd = native == Native::F32
        && !fuse_products
        && inst.k().is_multiple_of(4)
        && lane_widens(a, s.conditioning.flush_a)
        && lane_widens(b, s.conditioning.flush_b);
    Ok(Plan {
        operands: ops.clone(),
        native,
        fuse_products,
        simd,
        flush_to_zero,
    })
}

/// Can an i32 lane widen an element of `f` to f32 bits with shifts and masks? (A signed
/// IEEE-style format of at most 32 bits whose exponents and significands fit f32's; when
/// its subnormals are not flushed, they are f32 normals or f32's own.)
pub(super) fn lane_widens(float: &FloatFormat, flush: bool) -> bool {
    let subnormals_widen = flush
        || (float.exponent_bits == 8 && float.bias == 127)
        || float.min_exponent() as i64 - float.mantissa_bits as i64 >= -126;
    subnormals_widen
        && float.signed
        && float.specials == Specials::Ieee
        && float.ignored_low_bits == 0
        && float.storage_bits == 1 + float.exponent_bits + float.mantissa_bits
        && float.storage_bits <= 32
        && float.mantissa_bits <= 23
        && float.exponent_bits <= 8
        && float.exponent_bits >= 2
}

pub(super) fn to_native(
    em: &mut Emitter,
    float: &FloatFormat,
    n: Native,
    raw: Value,
    flush: bool,
) -> Value {
    let (ne, nm, nbias) = n.layout();
    let m = float.mantissa_bits as i64;
    let e = float.exponent_bits as i64;
    let raw =
        em.b.ins()
            .band_imm_s(raw, crate::format::low_mask(float.storage_bits) as i64);
    let code = if float.ignored_low_bits > 0 {
        em.b.ins().ushr_imm_s(raw, float.ignored_low_bits as i64)
    } else {
        raw
    };
    let code =
        em.b.ins()
            .band_imm_s(code, crate::format::low_mask(float.code_bits()) as i64);
    let ef = em.b.ins().ushr_imm_s(code, m);
    let ef = em.b.ins().band_imm_s(ef, (1i64 << e) - 1);
    let bits = if e == ne && float.bias as i64 == nbias {
        // same exponent layout: the mantissa only widens
        em.b.ins().ishl_imm_s(code, nm - m)
    } else {
        let man = em.b.ins().band_imm_s(code, (1i64 << m) - 1);
        let man_w = em.b.ins().ishl_imm_s(man, nm - m);
        let ef_n = em.b.ins().iadd_imm_s(ef, nbias - float.bias as i64);
        let ef_n = em.b.ins().ishl_imm_s(ef_n, nm);
        let normal = em.b.ins().bor(ef_n, man_w);
        let all = em.i64c(((1i64 << ne) - 1) << nm);
        let special = em.b.ins().bor(all, man_w);
        // subnormal: man * 2^(emin - m), exact in the wider format
        let sub = {
            let scale = (float.min_exponent() as i64 - m) as i32;
            let fm = em.b.ins().fcvt_from_uint(n.ty(), man);
            let k = match n {
                Native::F32 => em.b.ins().f32const(2f32.powi(scale)),
                Native::F64 => em.b.ins().f64const(2f64.powi(scale)),
            };
            let v = em.b.ins().fmul(fm, k);
            let i = em.b.ins().bitcast(n.int(), MemFlagsData::new(), v);
            if n == Native::F32 {
                em.b.ins().uextend(types::I64, i)
            } else {
                i
            }
        };
        let ez = em.icmp_imm(IntCC::Equal, ef, 0);
        let eall = em.icmp_imm(IntCC::Equal, ef, (1i64 << e) - 1);
        let x = em.sel(eall, special, normal);
        let x = em.sel(ez, sub, x);
        let s = em.b.ins().ushr_imm_s(code, e + m);
        let s = em.b.ins().band_imm_s(s, 1);
        let s = em.b.ins().ishl_imm_s(s, ne + nm);
        em.b.ins().bor(x, s)
    };
    let bits = if flush {
        let ez = em.icmp_imm(IntCC::Equal, ef, 0);
        let z = em.i64c(0);
        em.sel(ez, z, bits)
    } else {
        bits
    };
    let bits = if n == Native::F32 {
        em.b.ins().ireduce(types::I32, bits)
    } else {
        bits
    };
    em.b.ins().bitcast(n.ty(), MemFlagsData::new(), bits)
}

/// A subnormal result becomes a zero of the same sign.
fn flush_keep_sign(em: &mut Emitter, n: Native, x: Value) -> Value {
    let (ne, nm, _) = n.layout();
    let it = n.int();
    let bits = em.b.ins().bitcast(it, MemFlagsData::new(), x);
    let expm = em.b.ins().band_imm_s(bits, ((1i64 << ne) - 1) << nm);
    let manm = em.b.ins().band_imm_s(bits, (1i64 << nm) - 1);
    let ez = em.icmp_imm(IntCC::Equal, expm, 0);
    let mnz = em.icmp_imm(IntCC::NotEqual, manm, 0);
    let sub = em.and(ez, mnz);
    let sign = em.b.ins().band_imm_s(bits, 1i64 << (ne + nm));
    let r = em.sel(sub, sign, bits);
    em.b.ins().bitcast(n.ty(), MemFlagsData::new(), r)
}

/// One level of a pairwise tree: adjacent values added, each sum rounded by `a`.
fn pairwise_level(em: &mut Emitter, n: Native, a: &RoundedOp, level: &[Value]) -> Vec<Value> {
    level
        .chunks(2)
        .map(|pair| {
            let r = em.b.ins().fadd(pair[0], pair[1]);
            step(em, n, a, r)
        })
        .collect()
}

fn step(em: &mut Emitter, n: Native, a: &RoundedOp, x: Value) -> Value {
    if a.flush_keep_sign {
        flush_keep_sign(em, n, x)
    } else {
        x
    }
}

pub(crate) fn emit(
    em: &mut Emitter,
    inst: &Instruction,
    s: &Sequential,
    p: &Plan,
    c: Value,
    a_ptr: Value,
    b_ptr: Value,
) -> Value {
    if p.simd {
        return emit_simd(em, inst, s, p, c, a_ptr, b_ptr);
    }
    let n = p.native;
    let cond = s.conditioning;
    let (fa, fb, fc) = (&p.operands.a, &p.operands.b, &p.operands.c);
    let mut acc = to_native(em, fc, n, c, cond.flush_c);
    let mut pairs = vec![];
    for k in 0..inst.k() {
        let ra = em.load(a_ptr, k);
        let rb = em.load(b_ptr, k);
        let x = to_native(em, fa, n, ra, cond.flush_a);
        let y = to_native(em, fb, n, rb, cond.flush_b);
        pairs.push((x, y));
    }
    if p.fuse_products {
        for (x, y) in pairs {
            let r = em.b.ins().fma(x, y, acc);
            acc = step(em, n, &s.accumulate, r);
        }
    } else {
        let mut terms: Vec<Value> = pairs
            .into_iter()
            .map(|(x, y)| {
                let pr = em.b.ins().fmul(x, y);
                match &s.product {
                    ProductRule::Rounded(ar) => step(em, n, ar, pr),
                    ProductRule::Exact => pr,
                }
            })
            .collect();
        if let Some((g, ar)) = &s.pairwise {
            terms = terms
                .chunks(*g as usize)
                .map(|chunk| {
                    let mut level = chunk.to_vec();
                    while level.len() > 1 {
                        level = pairwise_level(em, n, ar, &level);
                    }
                    level[0]
                })
                .collect();
        }
        for t in terms {
            let r = em.b.ins().fadd(acc, t);
            acc = step(em, n, &s.accumulate, r);
        }
    }
    result_bits(em, inst, n, acc)
}

/// d's bits from the accumulator.
fn result_bits(em: &mut Emitter, inst: &Instruction, n: Native, acc: Value) -> Value {
    let bits = em.b.ins().bitcast(n.int(), MemFlagsData::new(), acc);
    let bits = if n == Native::F32 {
        em.b.ins().uextend(types::I64, bits)
    } else {
        bits
    };
    // every NaN is d's canonical NaN, as the interpreter encodes it: under `nan ieee` any
    // NaN would be right, but the host's (x86's default NaN, or an input's payload) would
    // make the engines differ, and the results depend on the host (`plan` refuses `nan
    // propagate_*`)
    let is_nan = em.b.ins().fcmp(FloatCC::Unordered, acc, acc);
    let nan = em.i64c(inst.arithmetic.d.encode_nan().unwrap_or(0) as i64);
    em.sel(is_nan, nan, bits)
}

/// f32 bits of four elements of `f` in i32 lanes (`code`: the low 32 bits of each
/// element), subnormals flushed to +0 when `flush` (otherwise the format's subnormals
/// are f32 normals, which [`plan`] checked).
pub(super) fn widen_lanes(
    em: &mut Emitter,
    float: &FloatFormat,
    code: Value,
    flush: bool,
) -> Value {
    let (m, e) = (float.mantissa_bits as i64, float.exponent_bits as i64);
    let code = if float.storage_bits < 32 {
        let mask = em.splat32(crate::format::low_mask(float.storage_bits) as i64);
        em.b.ins().band(code, mask)
    } else {
        code
    };
    let emask = em.splat32((1i64 << e) - 1);
    let ef = em.b.ins().ushr_imm_s(code, m);
    let ef = em.b.ins().band(ef, emask);
    let zero = em.splat32(0);
    let bits = if e == 8 && float.bias == 127 {
        // f32's exponent layout: the significand only widens, the sign lands on bit 31
        em.b.ins().ishl_imm_s(code, 23 - m)
    } else {
        let mm = em.splat32((1i64 << m) - 1);
        let man = em.b.ins().band(code, mm);
        let man = em.b.ins().ishl_imm_s(man, 23 - m);
        let sign = em.b.ins().ushr_imm_s(code, e + m);
        let sign = em.b.ins().ishl_imm_s(sign, 31);
        let rebias = em.splat32(127 - float.bias as i64);
        let en = em.b.ins().iadd(ef, rebias);
        let en = em.b.ins().ishl_imm_s(en, 23);
        let normal = em.b.ins().bor(en, man);
        let inf = em.splat32(0x7f80_0000);
        let special = em.b.ins().bor(inf, man);
        let is_special = em.b.ins().icmp(IntCC::Equal, ef, emask);
        let x = em.b.ins().bitselect(is_special, special, normal);
        let x = if flush {
            x
        } else {
            // a subnormal: man * 2^(emin - m), an f32 normal
            let ez = em.b.ins().icmp(IntCC::Equal, ef, zero);
            let fm = em.b.ins().fcvt_from_uint(types::F32X4, man);
            let scale = 2f32.powi((float.min_exponent() as i64 - 23) as i32);
            let k = em.b.ins().f32const(scale);
            let k = em.b.ins().splat(types::F32X4, k);
            let v = em.b.ins().fmul(fm, k);
            let v = em.b.ins().bitcast(types::I32X4, little_endian(), v);
            em.b.ins().bitselect(ez, v, x)
        };
        em.b.ins().bor(x, sign)
    };
    if flush {
        let ez = em.b.ins().icmp(IntCC::Equal, ef, zero);
        em.b.ins().band_not(bits, ez)
    } else {
        bits
    }
}

/// A subnormal lane becomes a zero of the same sign (f32x4).
fn flush_lanes(em: &mut Emitter, x: Value) -> Value {
    let bits = em.b.ins().bitcast(types::I32X4, little_endian(), x);
    let abs_mask = em.splat32(0x7fff_ffff);
    let abs = em.b.ins().band(bits, abs_mask);
    let min_normal = em.splat32(0x0080_0000);
    let tiny = em.b.ins().icmp(IntCC::SignedLessThan, abs, min_normal);
    let sign_mask = em.splat32(0x8000_0000u32 as i32 as i64);
    let sign = em.b.ins().band(bits, sign_mask);
    let r = em.b.ins().bitselect(tiny, sign, bits);
    em.b.ins().bitcast(types::F32X4, little_endian(), r)
}

fn step_lanes(em: &mut Emitter, a: &RoundedOp, x: Value) -> Value {
    if a.flush_keep_sign {
        flush_lanes(em, x)
    } else {
        x
    }
}

/// The f32 pipeline of [`plan`]'s `simd` case: elements decoded, multiplied and summed
/// pairwise four lanes at a time (the pairwise tree's lower levels as even + odd lanes
/// of two vectors, which keeps k order), then every term added to c in k order.
fn emit_simd(
    em: &mut Emitter,
    inst: &Instruction,
    s: &Sequential,
    p: &Plan,
    c: Value,
    a_ptr: Value,
    b_ptr: Value,
) -> Value {
    let n = Native::F32;
    let cond = s.conditioning;
    let (fa, fb, fc) = (&p.operands.a, &p.operands.b, &p.operands.c);
    let mut acc = to_native(em, fc, n, c, cond.flush_c);
    let mut vals = vec![];
    for k in (0..inst.k()).step_by(4) {
        let ra = em.load_low32x4(a_ptr, k);
        let rb = em.load_low32x4(b_ptr, k);
        let x = widen_lanes(em, fa, ra, cond.flush_a);
        let y = widen_lanes(em, fb, rb, cond.flush_b);
        let x = em.b.ins().bitcast(types::F32X4, little_endian(), x);
        let y = em.b.ins().bitcast(types::F32X4, little_endian(), y);
        let pr = em.b.ins().fmul(x, y);
        vals.push(match &s.product {
            ProductRule::Rounded(ar) => step_lanes(em, ar, pr),
            ProductRule::Exact => pr,
        });
    }
    let mut terms: Vec<Value> = vec![];
    if let Some((g, ar)) = &s.pairwise {
        let mut levels = g.trailing_zeros();
        // lower levels in lanes: pairs of adjacent lanes are the even and odd lanes
        while levels > 0 && vals.len() >= 2 && vals.len().is_multiple_of(2) {
            vals = vals
                .chunks(2)
                .map(|v| {
                    let even = em.pick32(v[0], v[1], [0, 2, 4, 6]);
                    let odd = em.pick32(v[0], v[1], [1, 3, 5, 7]);
                    let r = em.b.ins().fadd(even, odd);
                    step_lanes(em, ar, r)
                })
                .collect();
            levels -= 1;
        }
        let mut level: Vec<Value> = lanes(em, &vals);
        for _ in 0..levels {
            level = pairwise_level(em, n, ar, &level);
        }
        terms = level;
    } else {
        terms.extend(lanes(em, &vals));
    }
    for t in terms {
        let r = em.b.ins().fadd(acc, t);
        acc = step(em, n, &s.accumulate, r);
    }
    result_bits(em, inst, n, acc)
}

/// Every lane of `vals` in order, as scalars.
fn lanes(em: &mut Emitter, vals: &[Value]) -> Vec<Value> {
    let mut out = vec![];
    for &v in vals {
        for l in 0..4 {
            out.push(em.b.ins().extractlane(v, l));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    //! The flush-to-zero claim of [`Plan::flush_to_zero`]: CDNA2's FTZ multiply-add
    //! kernels give the interpreter's bits both under flush-to-zero (how the JIT runs
    //! them) and under the IEEE defaults (how an object file runs them), on inputs whose
    //! products, pairwise sums and accumulations land around the smallest normal f32.
    use super::super::{Code, Kernel};
    use crate::engine::Operands;
    use crate::random::Rng;

    #[test]
    fn ftz_multiply_add_is_exact_with_and_without_flush_to_zero() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/cdna2.mma");
        let text = std::fs::read_to_string(path).unwrap();
        let v = crate::compile(path, &text).expect("cdna2 checks");
        let compiled = super::super::compile(&v).expect("compiles");
        let names = [
            "v_mfma_f32_16x16x16bf16_1k", // P = 4, SIMD
            "v_mfma_f32_16x16x8bf16",     // P = 2, SIMD
            "v_mfma_f32_4x4x4f16",        // P = 4, k = 4: the tree in scalars
            "v_mfma_f32_16x16x2bf16",     // P = 2, k = 2: the scalar path
        ];
        let mut rng = Rng::new(0x6a09_e667_f3bc_c909);
        for name in names {
            let i = v.spec().position(name).expect(name);
            let checked = v.get(i);
            let inst = checked.instruction();
            let kernel = compiled.kernel(name).unwrap();
            let Code::Native(entry) = &kernel.code else {
                panic!("{name}: a native kernel");
            };
            assert!(entry.flush_to_zero, "{name} runs under flush-to-zero");
            let mut ieee_entry = *entry;
            ieee_entry.flush_to_zero = false;
            let ieee = Kernel {
                code: Code::Native(ieee_entry),
                ..kernel.clone()
            };
            let f = inst.arithmetic.a.as_float().unwrap();
            let (m, bias) = (f.mantissa_bits as i64, f.bias as i64);
            let k = inst.k();
            for case in 0..4000 {
                // exponents whose sums straddle -126 (bf16), or the whole range (f16)
                let el = |e: i64, r: u64| -> u64 {
                    let field = (e + bias).clamp(0, (1 << f.exponent_bits) - 2) as u64;
                    ((r >> 63) << (f.exponent_bits as i64 + m))
                        | (field << m)
                        | (r & ((1 << m) - 1))
                };
                let mut a = vec![];
                let mut b = vec![];
                for _ in 0..k {
                    let (r1, r2) = (rng.next_u64(), rng.next_u64());
                    let ea = (r1 % 40) as i64 - 83; // -83..-44
                    let eb = -126 - ea + ((r1 >> 8) % 9) as i64 - 4;
                    let (ea, eb) = if f.exponent_bits == 5 {
                        ((r1 % 31) as i64 - 15, ((r1 >> 8) % 31) as i64 - 15)
                    } else {
                        (ea, eb)
                    };
                    a.push(el(ea, r2));
                    b.push(el(eb, r2.rotate_left(17)));
                }
                // cancelling pairs: b[1] = -b[0] with a[1] = a[0]
                if case % 3 == 0 && k >= 2 {
                    a[1] = a[0];
                    b[1] = b[0] ^ (1 << (f.exponent_bits as i64 + m));
                }
                let r = rng.next_u64();
                let c = match case % 4 {
                    0 => 0,
                    1 => (r % (3 << 23)) | ((r >> 32) & 0x8000_0000),
                    _ => ((((r >> 40) % 8) + 120) << 23) | (r & 0x807f_ffff),
                };
                let ops = Operands {
                    c,
                    a: &a,
                    b: &b,
                    sa: &[],
                    sb: &[],
                };
                let want = crate::interp::run(checked, &ops).unwrap();
                for (mode, kern) in [("flush-to-zero", &kernel), ("IEEE", &ieee)] {
                    let got = kern.dot(&ops).unwrap();
                    assert_eq!(
                        got, want,
                        "{name} under {mode}: c={c:x} a={a:x?} b={b:x?}: interp {want:x}, jit {got:x}"
                    );
                }
            }
        }
    }
}
