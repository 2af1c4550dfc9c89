//! GST-FDPA in record lanes: one chained step of four records, one per i32 lane, for
//! groups of products of 4-bit formats (FP4) scaled by block scale factors (RTX
//! Blackwell's and Blackwell's `mxf4`, `mxf4nvf4`). Each record's group sums are exact
//! in i32 lanes, four elements of a record to a lane's four bytes: the codes looked up
//! in the formats' value tables (one `pshufb` per sixteen), multiplied and added in
//! pairs (`pmaddwd`). Each group's value (its sum times the scales' significands) is
//! aligned with c to their largest exponent and truncated in f64 lanes, where the sum of
//! the kept values is exact ([`GroupPlan`]), and rounded toward zero into binary32.

use super::{RECORDS, c_lanes, elements, narrowed, or_lanes};
use crate::format::{FloatFormat, Specials};
use crate::ir::*;
use crate::jit::emit::{Emitter, little_endian};
use crate::jit::fused::plan::{Plan, clog2};
use crate::jit::fused::products::{byte_products, byte_table, byte_table_constants, pack_bytes};
use crate::jit::fused::round::{binary32_step, is_binary32};
use crate::jit::fused::simd::high_half;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, Value, types};

/// The GST-FDPA step as [`step`] computes it.
pub(crate) struct GroupPlan {
    /// G, the products per group (a multiple of 4).
    size: usize,
    /// Elements per scale factor.
    block: usize,
    /// F, the fraction bits every term keeps below the reference.
    keep: i64,
    /// The normalisation's precision P (toward zero).
    precision: i64,
    /// The value tables of a and b, as the bytes of a lookup, and the exponent of their
    /// products' grid (a group sum is an integer times 2^grid).
    tables: ([u8; 16], [u8; 16]),
    grid: i64,
    /// The scale factors' format.
    scale: FloatFormat,
    /// The exponent of a zero group (every product zero, or a zero scale product), and of
    /// a zero c.
    zero_group: i64,
    zero_c: i64,
}

/// The plan, where the pipeline is GST-FDPA over 4-bit formats whose values fit an i8:
/// groups of G products (G a multiple of 4) scaled as blocks by an unsigned scale format
/// of at most 3 mantissa bits (ue4m3, ue8m0) whose only special is its all-ones code,
/// a zero group and a zero c at fixed exponents, one alignment of the groups and c to
/// their largest exponent truncated to F bits, and one normalisation into binary32
/// toward zero; c binary32. Bounds that make every step exact:
/// - a group's sum times its scales' significands fits an i32 (b bits);
/// - each group's kept value is below 2^(F + b - 2m + grid) (its exponent is at most r),
///   c's below 2^(F + 1), and their sum is exact in f64;
/// - the scale factors of a chained step are loaded in pairs: their count is even.
pub(crate) fn group_plan(inst: &Instruction, fused: &Fused, p: &Plan) -> Option<GroupPlan> {
    let g = fused.grouping?;
    let scale = inst.arithmetic.scale.as_ref()?;
    let s = scale.format.as_float()?.clone();
    let (ta, tb) = p.value_tables?;
    let tables = (byte_table(ta)?, byte_table(tb)?);
    let c = inst.arithmetic.c.as_float()?;
    let size = g.size as usize;
    let block = scale.block as usize;
    let (precision, true) = binary32_step(inst, fused, false)? else {
        return None;
    };
    let (ZeroExponent::Fixed(zero_group), ZeroExponent::Fixed(zero_c)) =
        (fused.zero_exponent.groups, fused.zero_exponent.c)
    else {
        return None;
    };
    let keep = match fused.nodes.as_slice() {
        [n] if n.reference == Reference::MaxExponent => match n.terms.as_slice() {
            [groups, c]
                if groups.source == TermSource::Groups
                    && c.source == TermSource::C
                    && groups.drop_below.is_none()
                    && c.drop_below.is_none()
                    && groups.keep == c.keep =>
            {
                match groups.keep {
                    Some((fb, crate::exact::Rounding::TowardZero)) => fb as i64,
                    _ => return None,
                }
            }
            _ => return None,
        },
        _ => return None,
    };
    let four_bits = |x: &FloatFormat| x.storage_bits <= 4 && x.ignored_low_bits == 0;
    let plain = g.scaled
        && !fused.scaled_products
        && fused.product_overflow.is_none()
        && !fused.conditioning.flush_a
        && !fused.conditioning.flush_b
        && !fused.conditioning.flush_c
        && fused.zero_sign == ZeroSign::Positive
        && is_binary32(c)
        && p.narrow_exponents
        && four_bits(&p.a)
        && four_bits(&p.b)
        && !s.signed
        && s.mantissa_bits <= 3
        && s.storage_bits <= 8
        && s.ignored_low_bits == 0
        && matches!(s.specials, Specials::Fn | Specials::None)
        && size.is_multiple_of(4)
        && (fused.chain as usize).is_multiple_of(size)
        && (fused.chain as usize).is_multiple_of(block)
        && inst.scale_count().is_multiple_of(2);
    if !plain {
        return None;
    }
    // |group sum| * the largest significands' product, below 2^31
    let largest = |t: &[u8; 16]| t.iter().map(|&x| (x as i8).unsigned_abs() as i64).max();
    let sum = largest(&tables.0)? * largest(&tables.1)? * size as i64;
    let sig = (1i64 << (s.mantissa_bits + 1)) - 1;
    let product = sum * sig * sig;
    let bits = 64 - (product as u64).leading_zeros() as i64;
    let two_m = 2 * s.mantissa_bits as i64;
    let groups = (fused.chain as usize / size) as u64;
    let kept = keep + bits - two_m + p.product_min_grid;
    let fits = product < 1 << 31 && kept.max(keep + 1) + clog2(groups + 1) as i64 <= 52;
    fits.then_some(GroupPlan {
        size,
        block,
        keep,
        precision,
        tables,
        grid: p.product_min_grid,
        scale: s,
        zero_group: zero_group as i64,
        zero_c: zero_c as i64,
    })
}

/// One chained step of four records: c's codes in, d's codes out (i32x4).
///
/// - The codes of four elements of each record (masked to their storage bits) are packed
///   into the bytes of an i8x16, lane j of its i32x4 view holding record j's; their
///   values are looked up (one `swizzle` per operand), widened to i16, multiplied and
///   added in pairs into i32 lanes, and those pairs added across the group: the group
///   sum S, an integer times 2^grid, per record. A byte mask of the nonzero products
///   tells the groups whose products are all zero.
/// - Each group's scales: significands s_a, s_b (integers with m fraction bits) and
///   exponents; the group's exponent is their exponents' sum e_g (the zero exponent where
///   every product is zero or s_a s_b is), its value S s_a s_b 2^(e_g - 2m + grid).
/// - r, the largest exponent of the groups and c; each group's kept value
///   trunc(S s_a s_b 2^(e_g - 2m + grid + F - r)) and c's trunc(c 2^(F - r)) in f64
///   lanes, exact, and their sum t, exact.
/// - t toward zero to P + 1 significant bits by clearing the bits below them, scaled by
///   2^(r - F) and narrowed, exact (infinity past f32's range, as the step's overflow
///   rule gives); a zero result is +0. Lanes whose t is not zero and whose last place
///   2^(r - F) lies below f32's subnormal grid for P go to the dot entry, as do lanes
///   with a NaN scale factor or a NaN or infinite c.
pub(super) fn step(
    em: &mut Emitter,
    gp: &GroupPlan,
    (fa, fb, chain, start): (&FloatFormat, &FloatFormat, usize, usize),
    c: Value,
    (a, b): ([Value; RECORDS], [Value; RECORDS]),
    (sa, sb): ([Value; RECORDS], [Value; RECORDS]),
    special: &mut Option<Value>,
) -> Value {
    let le = little_endian();
    let tables = byte_table_constants(em, [&gp.tables.0, &gp.tables.1]);
    // four elements k..k + 4 of each record, one record per i32 lane, a byte each
    let codes = |em: &mut Emitter, records: [Value; RECORDS], k: usize, f: &FloatFormat| {
        let quads = records.map(|ptr| em.load_low32x4(ptr, k));
        pack_bytes(em, quads, f.storage_bits)
    };
    // the scale factors' codes, in pairs
    let mut scale_codes: Vec<Option<[Value; 2]>> = vec![None; (start + chain) / gp.block + 1];
    let mut scale = |em: &mut Emitter, idx: usize| -> [Value; 2] {
        let pair = idx & !1;
        if scale_codes[pair].is_none() {
            let x = elements(em, sa, pair);
            let y = elements(em, sb, pair);
            scale_codes[pair] = Some([x[0], y[0]]);
            scale_codes[pair + 1] = Some([x[1], y[1]]);
        }
        scale_codes[idx].expect("the loop above loads the scale codes of every pair of records")
    };
    let s = &gp.scale;
    let (m, e_bits) = (s.mantissa_bits as i64, s.exponent_bits as i64);
    let code_mask = em.splat32((1i64 << (e_bits + m)) - 1);
    let man_mask = em.splat32((1i64 << m) - 1);
    let unit = em.splat32(1i64 << m);
    let s_bias = em.splat32(s.bias as i64);
    // (significand, exponent) of scale codes, and NaN lanes into `special`
    let decode = |em: &mut Emitter, raw: Value, special: &mut Option<Value>| {
        let code = em.b.ins().band(raw, code_mask);
        if s.specials == Specials::Fn {
            let nan = em.b.ins().icmp(IntCC::Equal, code, code_mask);
            or_lanes(em, special, nan);
        }
        let man = em.b.ins().band(code, man_mask);
        let field = em.b.ins().ushr_imm_s(code, m);
        let (sig, field) = if s.subnormals {
            let one = em.splat32(1);
            let zero = em.splat32(0);
            let normal = em.b.ins().icmp(IntCC::NotEqual, field, zero);
            let implicit = em.b.ins().band(normal, unit);
            (em.b.ins().bor(man, implicit), em.b.ins().smax(field, one))
        } else {
            (em.b.ins().bor(man, unit), field)
        };
        (sig, em.b.ins().isub(field, s_bias))
    };
    let zero_group = em.splat32(gp.zero_group);
    let zero = em.splat32(0);
    let mut values = vec![];
    let mut max = None;
    for g in 0..chain / gp.size {
        let first = start + g * gp.size;
        let mut sums: Option<(Value, Value)> = None;
        let mut nonzero: Option<Value> = None;
        for k in (first..first + gp.size).step_by(4) {
            let (ca, cb) = (codes(em, a, k, fa), codes(em, b, k, fb));
            // records 0 and 1 (two lanes each), then records 2 and 3
            let ([low, high], both) = byte_products(em, tables, (ca, cb));
            sums = Some(match sums {
                None => (low, high),
                Some((x, y)) => (em.b.ins().iadd(x, low), em.b.ins().iadd(y, high)),
            });
            nonzero = Some(match nonzero {
                None => both,
                Some(x) => em.b.ins().bor(x, both),
            });
        }
        let (low, high) = sums.expect("G >= 4");
        let even = em.pick32(low, high, [0, 2, 4, 6]);
        let odd = em.pick32(low, high, [1, 3, 5, 7]);
        let sum = em.b.ins().iadd(even, odd);
        let nonzero =
            em.b.ins()
                .bitcast(types::I32X4, le, nonzero.expect("G >= 4"));
        let all_zero = em.b.ins().icmp(IntCC::Equal, nonzero, zero);
        // the group's scales
        let [ra, rb] = scale(em, first / gp.block);
        let (sig_a, e_a) = decode(em, ra, special);
        let (sig_b, e_b) = decode(em, rb, special);
        let sig = em.b.ins().imul(sig_a, sig_b);
        let e = em.b.ins().iadd(e_a, e_b);
        let scale_zero = em.b.ins().icmp(IntCC::Equal, sig, zero);
        let is_zero = em.b.ins().bor(all_zero, scale_zero);
        let e_max = em.b.ins().bitselect(is_zero, zero_group, e);
        max = Some(match max {
            None => e_max,
            Some(x) => em.b.ins().smax(x, e_max),
        });
        values.push((em.b.ins().imul(sum, sig), e));
    }
    // c: its exponent by the zero rule, and NaN/Inf
    let c_fields = c_lanes(em, c);
    or_lanes(em, special, c_fields.special);
    let zero_c = em.splat32(gp.zero_c);
    let c_exp = em.b.ins().bitselect(c_fields.zero, zero_c, c_fields.exp);
    let r = em.b.ins().smax(max.expect("at least one group"), c_exp);
    // the powers' f64 exponent fields
    let groups_field = em.splat32(gp.keep - 2 * m + gp.grid + 1023);
    let groups_field = em.b.ins().isub(groups_field, r);
    let c_field = em.splat32(gp.keep + 1023);
    let c_field = em.b.ins().isub(c_field, r);
    let up_field = em.splat32(1023 - gp.keep);
    let up_field = em.b.ins().iadd(r, up_field);
    let clear = em.splat64(!((1i64 << (52 - gp.precision)) - 1));
    let zero64 = {
        let z = em.b.ins().f64const(0.0);
        em.b.ins().splat(types::F64X2, z)
    };
    let halves = [false, true].map(|high| {
        let half = |em: &mut Emitter, x: Value| {
            if high { high_half(em, x) } else { x }
        };
        let power = |em: &mut Emitter, field: Value| {
            let x = half(em, field);
            let x = em.b.ins().swiden_low(x);
            let x = em.b.ins().ishl_imm_s(x, 52);
            em.b.ins().bitcast(types::F64X2, le, x)
        };
        let mut t = None;
        for &(value, e) in &values {
            let field = em.b.ins().iadd(e, groups_field);
            let p = power(em, field);
            let x = half(em, value);
            let x = em.b.ins().swiden_low(x);
            let x = em.b.ins().fcvt_from_sint(types::F64X2, x);
            let x = em.b.ins().fmul(x, p);
            let x = em.b.ins().trunc(x);
            t = Some(match t {
                None => x,
                Some(s) => em.b.ins().fadd(s, x),
            });
        }
        let p = power(em, c_field);
        let x = half(em, c);
        let x = em.b.ins().bitcast(types::F32X4, le, x);
        let x = em.b.ins().fvpromote_low(x);
        let x = em.b.ins().fmul(x, p);
        let x = em.b.ins().trunc(x);
        let t = em.b.ins().fadd(t.expect("at least one group"), x);
        let nz = em.b.ins().fcmp(FloatCC::NotEqual, t, zero64);
        let nonzero_t = em.b.ins().bitcast(types::I32X4, le, nz);
        let bits = em.b.ins().bitcast(types::I64X2, le, t);
        let bits = em.b.ins().band(bits, clear);
        let t = em.b.ins().bitcast(types::F64X2, le, bits);
        let p = power(em, up_field);
        (em.b.ins().fmul(t, p), nonzero_t)
    });
    let d = narrowed(em, halves.map(|(y, _)| y));
    let nonzero_t = halves.map(|(_, nz)| nz);
    // lanes whose result can lie below f32's subnormal grid for P
    let floor = em.splat32(gp.keep - 126 - gp.precision);
    let low = em.b.ins().icmp(IntCC::SignedLessThan, r, floor);
    let nonzero_t = em.pick32(nonzero_t[0], nonzero_t[1], [0, 2, 4, 6]);
    let low = em.b.ins().band(low, nonzero_t);
    or_lanes(em, special, low);
    // a zero result is +0
    let magnitude = em.splat32(0x7fff_ffff);
    let d_magnitude = em.b.ins().band(d, magnitude);
    let d_zero = em.b.ins().icmp(IntCC::Equal, d_magnitude, zero);
    em.b.ins().band_not(d, d_zero)
}
