//! Lowering of sequential pipelines (FMA chains, FP32 multiply-add trees with flushing) to
//! native f32/f64 arithmetic: every step the IR describes is one IEEE operation rounded to
//! nearest even, which the host computes exactly (`fma` for an exact product added to the
//! accumulator). [`plan`] refuses any step a native operation would not reproduce bit for bit.

use super::emit::Emitter;
use crate::exact::Rounding;
use crate::format::{FloatFormat, Format, Specials};
use crate::ir::*;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Type, Value, types};

/// The native float type every step computes in, and how products are formed.
pub(crate) struct Plan {
    native: Native,
    /// Exact products are fused into the accumulation (`fma`) rather than formed first.
    fuse_products: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Native {
    F32,
    F64,
}

impl Native {
    fn of(f: &FloatFormat) -> Option<Native> {
        let plain =
            f.signed && f.subnormals && f.specials == Specials::Ieee && f.ignored_low_bits == 0;
        match (
            plain,
            f.exponent_bits,
            f.mantissa_bits,
            f.bias,
            f.storage_bits,
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
fn fits(f: &Format, n: Native) -> Result<&FloatFormat, String> {
    let x = f
        .as_float()
        .ok_or_else(|| format!("`{}` is not a float format", f.name))?;
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
            f.name
        ))
    }
}

pub(crate) fn plan(inst: &Instruction, s: &Sequential) -> Result<Plan, String> {
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
    let a = fits(&inst.arithmetic.a, native)?;
    let b = fits(&inst.arithmetic.b, native)?;
    fits(&inst.arithmetic.c, native)?;
    if inst.arithmetic.d.as_float().and_then(Native::of) != Some(native) {
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
    Ok(Plan {
        native,
        fuse_products,
    })
}

fn to_native(em: &mut Emitter, f: &FloatFormat, n: Native, raw: Value, flush: bool) -> Value {
    let (ne, nm, nbias) = n.layout();
    let m = f.mantissa_bits as i64;
    let e = f.exponent_bits as i64;
    let raw =
        em.b.ins()
            .band_imm_s(raw, crate::format::low_mask(f.storage_bits) as i64);
    let code = if f.ignored_low_bits > 0 {
        em.b.ins().ushr_imm_s(raw, f.ignored_low_bits as i64)
    } else {
        raw
    };
    let code =
        em.b.ins()
            .band_imm_s(code, crate::format::low_mask(f.code_bits()) as i64);
    let ef = em.b.ins().ushr_imm_s(code, m);
    let ef = em.b.ins().band_imm_s(ef, (1i64 << e) - 1);
    let bits = if e == ne && f.bias as i64 == nbias {
        // same exponent layout: the mantissa only widens
        em.b.ins().ishl_imm_s(code, nm - m)
    } else {
        let man = em.b.ins().band_imm_s(code, (1i64 << m) - 1);
        let man_w = em.b.ins().ishl_imm_s(man, nm - m);
        let ef_n = em.b.ins().iadd_imm_s(ef, nbias - f.bias as i64);
        let ef_n = em.b.ins().ishl_imm_s(ef_n, nm);
        let normal = em.b.ins().bor(ef_n, man_w);
        let all = em.i64c(((1i64 << ne) - 1) << nm);
        let special = em.b.ins().bor(all, man_w);
        // subnormal: man * 2^(emin - m), exact in the wider format
        let sub = {
            let scale = (f.min_exponent() as i64 - m) as i32;
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
    let n = p.native;
    let cond = s.conditioning;
    let fa = inst.arithmetic.a.as_float().expect("planned");
    let fb = inst.arithmetic.b.as_float().expect("planned");
    let fc = inst.arithmetic.c.as_float().expect("planned");
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
                        level = level
                            .chunks(2)
                            .map(|pair| {
                                let r = em.b.ins().fadd(pair[0], pair[1]);
                                step(em, n, ar, r)
                            })
                            .collect();
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
    let bits = em.b.ins().bitcast(n.int(), MemFlagsData::new(), acc);
    let bits = if n == Native::F32 {
        em.b.ins().uextend(types::I64, bits)
    } else {
        bits
    };
    // the interpreter encodes every NaN as d's canonical NaN; under `nan ieee` any NaN
    // is right, under `nan canonical` only that one
    match s.nan {
        NanPolicy::Ieee => bits,
        NanPolicy::Canonical => {
            let is_nan = em.b.ins().fcmp(FloatCC::Unordered, acc, acc);
            let nan = em.i64c(inst.arithmetic.d.encode_nan().unwrap_or(0) as i64);
            em.sel(is_nan, nan, bits)
        }
    }
}
