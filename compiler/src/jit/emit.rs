//! The instruction-level vocabulary every lowering shares: constants and booleans, loads of
//! operand encodings, exact shifts with each rounding mode on fixed-width two's-complement
//! integers (i64 or i128), leading-bit positions, and the bit-level decoding of a float
//! format into sign, significand, exponent and special-value flags.
//!
//! Booleans are `i8` values that are always 0 or 1 (so `bxor 1` negates them).

use crate::exact::Rounding;
use crate::format::{FloatFormat, Specials, low_mask};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Function, GlobalValue, InstBuilder, MemFlagsData, Type, Value, types};
use cranelift_frontend::FunctionBuilder;

/// An emitter: the function builder plus the width `w` of the fixed-point accumulator.
pub(crate) struct Emitter<'a, 'f> {
    pub b: &'a mut FunctionBuilder<'f>,
    /// `I64` or `I128`: the type of every aligned or summed value.
    pub w: Type,
    /// Where read-only tables live: data objects of the module the kernel is built in.
    pub data: &'a mut dyn DataSymbols,
}

/// The module's side of a kernel's read-only tables: each table is a data object of the
/// module (defined once), so a JIT kernel and an object file reach it the same way.
pub(crate) trait DataSymbols {
    /// A global value in `func` that holds the address of `table`.
    fn table(&mut self, func: &mut Function, table: &'static [u64]) -> GlobalValue;
}

/// Bit casts between vector types keep lanes in little-endian order.
pub(crate) fn little_endian() -> MemFlagsData {
    MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little)
}

/// A decoded float element: booleans (i8) and i64 fields. `sig` and `exp` are meaningful
/// only for finite elements; `zero` is true only for finite zeros.
#[derive(Clone, Copy)]
pub(crate) struct Decoded {
    pub nan: Value,
    pub inf: Value,
    pub neg: Value,
    pub sig: Value,
    pub exp: Value,
    pub zero: Value,
}

impl<'a, 'f> Emitter<'a, 'f> {
    pub fn wbits(&self) -> i64 {
        self.w.bits() as i64
    }

    /// The address of a read-only table (an i64).
    pub fn table_address(&mut self, table: &'static [u64]) -> Value {
        let gv = self.data.table(self.b.func, table);
        self.b.ins().symbol_value(types::I64, gv)
    }

    pub fn i64c(&mut self, v: i64) -> Value {
        self.b.ins().iconst(types::I64, v)
    }

    /// An i32x4 with every lane `v`.
    pub fn splat32(&mut self, v: i64) -> Value {
        let x = self.b.ins().iconst(types::I32, v);
        self.b.ins().splat(types::I32X4, x)
    }

    /// An i64x2 with both lanes `v`.
    pub fn splat64(&mut self, v: i64) -> Value {
        let x = self.b.ins().iconst(types::I64, v);
        self.b.ins().splat(types::I64X2, x)
    }

    /// Lanes of `x` and `y` (128-bit vectors of 32-bit lanes, of either type; lane numbers
    /// 0-3 in `x`, 4-7 in `y`) picked by `lanes`, in `x`'s type.
    pub fn pick32(&mut self, x: Value, y: Value, lanes: [u8; 4]) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let mut bytes = [0u8; 16];
        for (i, l) in lanes.iter().enumerate() {
            for j in 0..4 {
                bytes[i * 4 + j] = l * 4 + j as u8;
            }
        }
        let mask = self
            .b
            .func
            .dfg
            .immediates
            .push(cranelift_codegen::ir::ConstantData::from(bytes.to_vec()));
        let le = little_endian();
        let x8 = self.b.ins().bitcast(types::I8X16, le, x);
        let y8 = self.b.ins().bitcast(types::I8X16, le, y);
        let s = self.b.ins().shuffle(x8, y8, mask);
        self.b.ins().bitcast(ty, le, s)
    }

    /// The low 32 bits of the four operand elements at `ptr[k..k + 4]`, as an i32x4.
    /// The loads may move (`can_move`: Cranelift places them at their first use rather
    /// than all at the top, where they would be spilled), so this is only for code every
    /// call runs, never behind a guard.
    pub fn load_low32x4(&mut self, ptr: Value, k: usize) -> Value {
        let flags = MemFlagsData::new()
            .with_notrap()
            .with_readonly()
            .with_can_move();
        let le = little_endian();
        let x = self.b.ins().load(types::I64X2, flags, ptr, (k * 8) as i32);
        let y = self
            .b
            .ins()
            .load(types::I64X2, flags, ptr, (k * 8 + 16) as i32);
        let x = self.b.ins().bitcast(types::I32X4, le, x);
        let y = self.b.ins().bitcast(types::I32X4, le, y);
        self.pick32(x, y, [0, 2, 4, 6])
    }

    pub fn boolc(&mut self, v: bool) -> Value {
        self.b.ins().iconst(types::I8, v as i64)
    }

    /// A constant of the accumulator width.
    pub fn wc(&mut self, v: i64) -> Value {
        let x = self.i64c(v);
        self.widen(x)
    }

    /// Sign-extend an i64 to the accumulator width.
    pub fn widen(&mut self, x: Value) -> Value {
        if self.w == types::I64 {
            x
        } else {
            self.b.ins().sextend(self.w, x)
        }
    }

    /// The low 64 bits of an accumulator-width value.
    pub fn low64(&mut self, x: Value) -> Value {
        if self.w == types::I64 {
            x
        } else {
            self.b.ins().ireduce(types::I64, x)
        }
    }

    pub fn and(&mut self, x: Value, y: Value) -> Value {
        self.b.ins().band(x, y)
    }
    pub fn or(&mut self, x: Value, y: Value) -> Value {
        self.b.ins().bor(x, y)
    }
    pub fn not(&mut self, x: Value) -> Value {
        self.b.ins().bxor_imm_s(x, 1)
    }
    pub fn sel(&mut self, c: Value, x: Value, y: Value) -> Value {
        self.b.ins().select(c, x, y)
    }
    pub fn icmp(&mut self, cc: IntCC, x: Value, y: Value) -> Value {
        self.b.ins().icmp(cc, x, y)
    }
    pub fn icmp_imm(&mut self, cc: IntCC, x: Value, y: i64) -> Value {
        self.b.ins().icmp_imm_s(cc, x, y)
    }
    pub fn neg(&mut self, x: Value) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let zero = if ty == types::I128 {
            self.wc(0)
        } else {
            self.b.ins().iconst(ty, 0)
        };
        self.b.ins().isub(zero, x)
    }

    /// Load the 64-bit element `index` of an array, in code every call runs (the load may
    /// be moved: its address is always valid).
    pub fn load(&mut self, ptr: Value, index: usize) -> Value {
        self.b.ins().load(
            types::I64,
            MemFlagsData::trusted().with_readonly().with_can_move(),
            ptr,
            (index * 8) as i32,
        )
    }

    /// Load the 64-bit element `index` of an array behind a control-flow guard (the
    /// special-value path): without `can_move`, so it is never hoisted above the guard.
    pub fn load_guarded(&mut self, ptr: Value, index: usize) -> Value {
        self.b.ins().load(
            types::I64,
            MemFlagsData::trusted().with_readonly(),
            ptr,
            (index * 8) as i32,
        )
    }

    /// Load element `index` (an i64 value) of an array, behind a guard (a loop bound):
    /// without `can_move`.
    pub fn load_at(&mut self, ptr: Value, index: Value) -> Value {
        let off = self.b.ins().imul_imm_s(index, 8);
        let at = self.b.ins().iadd(ptr, off);
        self.b
            .ins()
            .load(types::I64, MemFlagsData::trusted().with_readonly(), at, 0)
    }

    /// `select(neg, -x, x)` in the accumulator width, for an i64 magnitude `x`.
    pub fn signed(&mut self, neg: Value, x: Value) -> Value {
        let xw = self.widen(x);
        let n = self.neg(xw);
        self.sel(neg, n, xw)
    }

    /// Clamp an i64 shift amount into `[0, w - 1]`.
    pub fn clamp_shift(&mut self, s: Value) -> Value {
        let zero = self.i64c(0);
        let top = self.i64c(self.wbits() - 1);
        let s = self.b.ins().smax(s, zero);
        self.b.ins().smin(s, top)
    }

    /// Round `x / 2^s` to an integer with `mode`, for `0 <= s <= w - 1` (i64 `s`). Exact for
    /// `|x| < 2^(w-2)`, which the width checks guarantee; shift amounts beyond the width
    /// are clamped by the caller, and with that bound a clamped shift rounds the same way.
    pub fn round_right(&mut self, x: Value, s: Value, mode: Rounding) -> Value {
        match mode {
            Rounding::Down => self.b.ins().sshr(x, s),
            Rounding::Up => {
                let n = self.neg(x);
                let f = self.b.ins().sshr(n, s);
                self.neg(f)
            }
            Rounding::TowardZero => {
                let is_neg = self.icmp_imm(IntCC::SignedLessThan, x, 0);
                let n = self.neg(x);
                let mag = self.sel(is_neg, n, x);
                let q = self.b.ins().ushr(mag, s);
                let nq = self.neg(q);
                self.sel(is_neg, nq, q)
            }
            Rounding::NearestEven | Rounding::NearestAway => {
                let fl = self.b.ins().sshr(x, s);
                let back = self.b.ins().ishl(fl, s);
                let rem = self.b.ins().isub(x, back);
                let one = self.wc(1);
                let unit = self.b.ins().ishl(one, s);
                let half = self.b.ins().ushr_imm_s(unit, 1);
                let above = self.icmp(IntCC::UnsignedGreaterThan, rem, half);
                let tie = self.icmp(IntCC::Equal, rem, half);
                let tie_up = if mode == Rounding::NearestEven {
                    let odd = self.b.ins().band_imm_s(fl, 1);
                    self.icmp_imm(IntCC::NotEqual, odd, 0)
                } else {
                    self.icmp_imm(IntCC::SignedGreaterThanOrEqual, x, 0)
                };
                let t = self.and(tie, tie_up);
                let up = self.or(above, t);
                let s_pos = self.icmp_imm(IntCC::SignedGreaterThan, s, 0);
                let up = self.and(up, s_pos);
                let up_w = self.b.ins().uextend(self.w, up);
                self.b.ins().iadd(fl, up_w)
            }
        }
    }

    /// Round a magnitude `mag / 2^s` (unsigned, `0 <= s <= w - 1`) to an integer with
    /// `mode` applied to the signed value `(-1)^neg * mag`: RZ truncates, RD and RU round
    /// the magnitude up or down by the sign, nearest modes are symmetric.
    pub fn round_mag(&mut self, mag: Value, s: Value, mode: Rounding, neg: Value) -> Value {
        let fl = self.b.ins().ushr(mag, s);
        let back = self.b.ins().ishl(fl, s);
        let rem = self.b.ins().isub(mag, back);
        let up = match mode {
            Rounding::TowardZero => return fl,
            Rounding::Down | Rounding::Up => {
                let inexact = self.icmp_imm(IntCC::NotEqual, rem, 0);
                let away = if mode == Rounding::Down {
                    neg
                } else {
                    self.not(neg)
                };
                self.and(inexact, away)
            }
            Rounding::NearestEven | Rounding::NearestAway => {
                let one = self.wc(1);
                let unit = self.b.ins().ishl(one, s);
                let half = self.b.ins().ushr_imm_s(unit, 1);
                let above = self.icmp(IntCC::UnsignedGreaterThan, rem, half);
                let tie = self.icmp(IntCC::Equal, rem, half);
                let tie_up = if mode == Rounding::NearestEven {
                    let odd = self.b.ins().band_imm_s(fl, 1);
                    self.icmp_imm(IntCC::NotEqual, odd, 0)
                } else {
                    self.boolc(true)
                };
                let t = self.and(tie, tie_up);
                let up = self.or(above, t);
                let s_pos = self.icmp_imm(IntCC::SignedGreaterThan, s, 0);
                self.and(up, s_pos)
            }
        };
        let up_w = self.b.ins().uextend(self.w, up);
        self.b.ins().iadd(fl, up_w)
    }

    /// `x * 2^-sh` rounded with `mode` for any i64 `sh`: a rounding right shift when `sh > 0`,
    /// an exact left shift otherwise.
    pub fn round_shift(&mut self, x: Value, sh: Value, mode: Rounding) -> Value {
        let s = self.clamp_shift(sh);
        let right = self.round_right(x, s, mode);
        let nsh = self.b.ins().ineg(sh);
        let l = self.clamp_shift(nsh);
        let left = self.b.ins().ishl(x, l);
        let pos = self.icmp_imm(IntCC::SignedGreaterThan, sh, 0);
        self.sel(pos, right, left)
    }

    /// `|x|` of an accumulator-width value (as an unsigned pattern).
    pub fn abs_w(&mut self, x: Value) -> Value {
        let is_neg = self.icmp_imm(IntCC::SignedLessThan, x, 0);
        let n = self.neg(x);
        self.sel(is_neg, n, x)
    }

    /// Bit length of an accumulator-width magnitude, as i64 (0 for 0).
    pub fn bit_length(&mut self, mag: Value) -> Value {
        let lz = self.b.ins().clz(mag);
        let lz = self.low64(lz);
        let wb = self.i64c(self.wbits());
        self.b.ins().isub(wb, lz)
    }

    /// Decode a float element from its raw storage pattern, exactly as
    /// [`crate::format::Format::decode`] does; with `flush`, subnormals and -0 read as +0.
    pub fn decode_float(&mut self, float: &FloatFormat, raw: Value, flush: bool) -> Decoded {
        let m = float.mantissa_bits as i64;
        let e = float.exponent_bits as i64;
        let storage = low_mask(float.storage_bits) as i64;
        let raw = self.b.ins().band_imm_s(raw, storage);
        let code = if float.ignored_low_bits > 0 {
            self.b.ins().ushr_imm_s(raw, float.ignored_low_bits as i64)
        } else {
            raw
        };
        let code = self
            .b
            .ins()
            .band_imm_s(code, low_mask(float.code_bits()) as i64);
        let mmask = ((1u64 << m) - 1) as i64;
        let emask = ((1u64 << e) - 1) as i64;
        let man = self.b.ins().band_imm_s(code, mmask);
        let ef = self.b.ins().ushr_imm_s(code, m);
        let ef = self.b.ins().band_imm_s(ef, emask);
        let neg = if float.signed {
            let s = self.b.ins().ushr_imm_s(code, e + m);
            let s = self.b.ins().band_imm_s(s, 1);
            self.b.ins().ireduce(types::I8, s)
        } else {
            self.boolc(false)
        };
        let all_ones = self.icmp_imm(IntCC::Equal, ef, emask);
        let (nan, inf) = match float.specials {
            Specials::Ieee => {
                let mz = self.icmp_imm(IntCC::Equal, man, 0);
                let mnz = self.not(mz);
                let inf = self.and(all_ones, mz);
                let nan = self.and(all_ones, mnz);
                (nan, inf)
            }
            Specials::Fn => {
                let mfull = self.icmp_imm(IntCC::Equal, man, mmask);
                let nan = self.and(all_ones, mfull);
                (nan, self.boolc(false))
            }
            Specials::Fnuz => {
                let ez = self.icmp_imm(IntCC::Equal, ef, 0);
                let mz = self.icmp_imm(IntCC::Equal, man, 0);
                let z = self.and(ez, mz);
                let nan = self.and(z, neg);
                (nan, self.boolc(false))
            }
            Specials::None => (self.boolc(false), self.boolc(false)),
        };
        let implicit = self.b.ins().bor_imm_s(man, 1i64 << m);
        let (mut sig, exp) = if float.subnormals {
            // exponent field 0 reads as the smallest normal binade without the implicit bit
            let ez = self.icmp_imm(IntCC::Equal, ef, 0);
            let sig = self.sel(ez, man, implicit);
            let one = self.i64c(1);
            let efx = self.b.ins().smax(ef, one);
            let exp = self.b.ins().iadd_imm_s(efx, -(float.bias as i64));
            (sig, exp)
        } else {
            (implicit, self.b.ins().iadd_imm_s(ef, -(float.bias as i64)))
        };
        let mut neg = neg;
        if flush && float.subnormals {
            let ez = self.icmp_imm(IntCC::Equal, ef, 0);
            let not_nan = self.not(nan);
            let fl = self.and(ez, not_nan);
            let zero = self.i64c(0);
            sig = self.sel(fl, zero, sig);
            let f0 = self.boolc(false);
            neg = self.sel(fl, f0, neg);
        }
        let sz = self.icmp_imm(IntCC::Equal, sig, 0);
        let special = self.or(nan, inf);
        let fin = self.not(special);
        let zero = self.and(sz, fin);
        Decoded {
            nan,
            inf,
            neg,
            sig,
            exp,
            zero,
        }
    }
}
