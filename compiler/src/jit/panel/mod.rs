//! GEMM panels: one row of A against many columns of B, four output columns to a SIMD
//! vector, every k-step of a GEMM in one call, for the arithmetic a panel covers.
//!
//! The batch entry computes one dot product per record. A panel's lanes are output
//! columns instead, so each step of the arithmetic is one vector operation for four dot
//! products, A and B are converted once per GEMM ([`Panel::operands`]) rather than once
//! per dot product, and c stays in registers across the k-steps. Two arithmetics have
//! panels: the f32 multiply-add pipelines that flush every result (`flushed`: CDNA2),
//! and the truncating fused dot products with f32 results (`aligned`: NVIDIA's T-FDPA).
//! Each runs in the control state it needs (flush-to-zero, rounding toward zero).
//! [`crate::engine::Engine::panel`] hands one out, compiled on first use in a module of its own.

mod aligned;
mod flushed;

use super::emit::Emitter;
use super::fpenv::IeeeDefaults;
use super::{Lowering, ModuleMemory};
use crate::checked::Checked;
use crate::engine::EvalError;
use crate::format::Format;
use crate::valid::Kind;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{BlockArg, InstBuilder, Value, types};
use std::sync::Arc;

/// `widen(n, src, dst)`: n encodings (u64 each) to the f32 bits the pipeline multiplies.
type WidenFn = unsafe extern "C" fn(u64, *const u64, *mut u32);
/// `run(columns, steps, a, b, c, d)` of a flushed panel.
type RunFn = unsafe extern "C" fn(u64, u64, *const u32, *const u32, *const u64, *mut u64);
/// `run(columns, steps, a, a_exp, b, b_exp, c, d)` of an aligned panel.
type AlignedFn = unsafe extern "C" fn(
    u64,
    u64,
    *const f64,
    *const i32,
    *const f64,
    *const i32,
    *const u64,
    *mut u64,
);

/// Output columns per SIMD vector: D's columns go to a panel in runs of this many.
pub const LANES: usize = 4;

/// The compiled panel of one arithmetic.
pub struct Panel {
    _memory: Arc<ModuleMemory>,
    kind: PanelKind,
    /// The instruction's k (a GEMM's K is a multiple of it).
    k: usize,
    /// Products per step of the run entry's loop (k, or the aligned chain's length).
    step: usize,
    a: Format,
    b: Format,
    instruction: Arc<str>,
}

enum PanelKind {
    Flushed {
        widen: [WidenFn; 2],
        run: RunFn,
    },
    Aligned {
        shape: aligned::Shape,
        run: AlignedFn,
    },
}

impl std::fmt::Debug for Panel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            PanelKind::Flushed { .. } => "flushed",
            PanelKind::Aligned { .. } => "aligned",
        };
        f.debug_struct("Panel")
            .field("instruction", &self.instruction)
            .field("kind", &kind)
            .field("k", &self.k)
            .finish()
    }
}

/// A GEMM's A (M x K) and B (K x N) as a panel reads them.
pub struct Operands {
    /// The panel that converted them (its run entry's address).
    made_by: usize,
    m: usize,
    kk: usize,
    n: usize,
    data: Data,
}

enum Data {
    /// f32 bits, A row-major, B packed by [`pack`].
    Flushed { a: Vec<u32>, b: Vec<u32> },
    /// f64 values and exponents, A row-major, B packed by [`pack`].
    Aligned {
        a: Vec<f64>,
        a_exp: Vec<i32>,
        b: Vec<f64>,
        b_exp: Vec<i32>,
    },
}

/// Declare and define a function of a panel's module: `name(i64 x ints, pointer x
/// pointers)`, returning nothing, whose body `emit` writes from its entry block on (the
/// parameters given) to a block that falls through, where it returns.
fn define<M: cranelift_module::Module>(
    target: &mut super::Target<'_, M>,
    name: &str,
    (ints, pointers): (usize, usize),
    emit: impl FnOnce(&mut Emitter, &[Value]),
) -> Result<cranelift_module::FuncId, String> {
    use cranelift_codegen::ir::{AbiParam, UserFuncName};
    let ptr = target.module.target_config().pointer_type();
    let mut sig = target.module.make_signature();
    sig.params
        .extend((0..ints).map(|_| AbiParam::new(types::I64)));
    sig.params.extend((0..pointers).map(|_| AbiParam::new(ptr)));
    let id = target
        .module
        .declare_function(name, cranelift_module::Linkage::Local, &sig)
        .map_err(|e| e.to_string())?;
    let mut ctx = target.module.make_context();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    let mut fctx = cranelift_frontend::FunctionBuilderContext::new();
    {
        let mut b = cranelift_frontend::FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let mut em = Emitter {
            b: &mut b,
            w: types::I64,
            data: target,
        };
        emit(&mut em, &params);
        em.b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(target.module.target_config());
    }
    target
        .module
        .define_function(id, &mut ctx)
        .map_err(|e| format!("cannot define the panel: {e:?}"))?;
    Ok(id)
}

/// Store four dot products per vector of `results` (f32x4) as d's encodings (u64) at
/// `d`, the vectors one after the other, every NaN as d's canonical NaN `nan` (as the
/// interpreter encodes it).
fn store_results(em: &mut Emitter, results: &[Value], nan: i64, d: Value) {
    use cranelift_codegen::ir::MemFlagsData;
    use cranelift_codegen::ir::condcodes::FloatCC;
    let le = super::emit::little_endian();
    let nan = em.splat32(nan);
    let store = MemFlagsData::new().with_notrap();
    for (v, &acc) in results.iter().enumerate() {
        let is_nan = em.b.ins().fcmp(FloatCC::Unordered, acc, acc);
        let bits = em.b.ins().bitcast(types::I32X4, le, acc);
        let bits = em.b.ins().bitselect(is_nan, nan, bits);
        let lo = em.b.ins().uwiden_low(bits);
        let hi = em.b.ins().uwiden_high(bits);
        em.b.ins().store(store, lo, d, (v * LANES * 8) as i32);
        em.b.ins().store(store, hi, d, (v * LANES * 8 + 16) as i32);
    }
}

/// The column loops of a run entry: for each size in `sizes` (runs of [`LANES`] columns,
/// largest first), while that many runs remain of `columns`, `emit(em, j, runs)` for
/// columns `j..`; from the current block on, ending in a block that falls through.
fn column_rounds(
    em: &mut Emitter,
    columns: Value,
    sizes: &[usize],
    mut emit: impl FnMut(&mut Emitter, Value, usize),
) {
    let mut from = em.b.ins().iconst(types::I64, 0);
    for &runs in sizes {
        let head = em.b.create_block();
        let body = em.b.create_block();
        let next = em.b.create_block();
        em.b.append_block_param(head, types::I64);
        em.b.append_block_param(next, types::I64);
        em.b.ins().jump(head, &[BlockArg::Value(from)]);
        em.b.switch_to_block(head);
        let j = em.b.block_params(head)[0];
        let end = em.b.ins().iadd_imm_s(j, (runs * LANES) as i64);
        let fits =
            em.b.ins()
                .icmp(IntCC::UnsignedLessThanOrEqual, end, columns);
        em.b.ins()
            .brif(fits, body, &[], next, &[BlockArg::Value(j)]);
        em.b.switch_to_block(body);
        emit(em, j, runs);
        em.b.ins().jump(head, &[BlockArg::Value(end)]);
        em.b.switch_to_block(next);
        from = em.b.block_params(next)[0];
    }
}

/// B (`k` x `n`, row-major) as a panel reads it: for each run of [`LANES`] columns, its
/// `k` rows one after the other (`n` a multiple of [`LANES`]).
fn pack<T: Copy>(b: &[T], k: usize, n: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(b.len());
    for j in (0..n).step_by(LANES) {
        for row in b.chunks_exact(n.max(1)).take(k) {
            out.extend_from_slice(&row[j..j + LANES]);
        }
    }
    out
}

impl Panel {
    /// Which panel this is (its run entry's address).
    fn identity(&self) -> usize {
        match self.kind {
            PanelKind::Flushed { run, .. } => run as usize,
            PanelKind::Aligned { run, .. } => run as usize,
        }
    }

    fn count(&self, operand: &'static str, got: usize, want: usize) -> EvalError {
        EvalError::OperandCount {
            instruction: self.instruction.to_string(),
            operand,
            got,
            want,
        }
    }

    /// A (`m` x `kk`, row-major encodings) and B (`kk` x `n`) converted for the panel:
    /// `kk` a positive multiple of the instruction's k, `n` of [`LANES`]. `None` when an
    /// element is one the panel does not take (an aligned panel's NaN or infinity): the
    /// batch entry computes that GEMM.
    pub fn operands(
        &self,
        a: &[u64],
        b: &[u64],
        (m, kk, n): (usize, usize, usize),
    ) -> Result<Option<Operands>, EvalError> {
        if kk == 0 || !kk.is_multiple_of(self.k) {
            return Err(self.count("a", kk, kk.next_multiple_of(self.k).max(self.k)));
        }
        if !n.is_multiple_of(LANES) {
            return Err(self.count("b", n, n.next_multiple_of(LANES)));
        }
        if a.len() != m.saturating_mul(kk) {
            return Err(self.count("a", a.len(), m.saturating_mul(kk)));
        }
        if b.len() != kk.saturating_mul(n) {
            return Err(self.count("b", b.len(), kk.saturating_mul(n)));
        }
        let data = match &self.kind {
            PanelKind::Flushed { widen, .. } => {
                let widened = |which: usize, x: &[u64]| {
                    let mut out = vec![0u32; x.len()];
                    // SAFETY: reads x.len() elements of x and writes as many of out
                    unsafe { (widen[which])(x.len() as u64, x.as_ptr(), out.as_mut_ptr()) };
                    out
                };
                Data::Flushed {
                    a: widened(0, a),
                    b: pack(&widened(1, b), kk, n),
                }
            }
            PanelKind::Aligned { shape, .. } => {
                let (Some((a, a_exp)), Some((b, b_exp))) = (
                    aligned::decode(&self.a, shape, a),
                    aligned::decode(&self.b, shape, b),
                ) else {
                    return Ok(None);
                };
                Data::Aligned {
                    a,
                    a_exp,
                    b: pack(&b, kk, n),
                    b_exp: pack(&b_exp, kk, n),
                }
            }
        };
        Ok(Some(Operands {
            made_by: self.identity(),
            m,
            kk,
            n,
            data,
        }))
    }

    /// For each `(r, c, d)`: `d[j]` is the GEMM's element of row r of A against column
    /// `j0 + j` of B, starting from `c[j]` (encodings of c's format), through the K / k
    /// chained steps. `j0` and `d.len()` multiples of [`LANES`].
    pub fn rows<'x>(
        &self,
        ops: &Operands,
        j0: usize,
        rows: impl Iterator<Item = (usize, &'x [u64], &'x mut [u64])>,
    ) -> Result<(), EvalError> {
        let _fp = match self.kind {
            PanelKind::Flushed { .. } => IeeeDefaults::enter(true),
            PanelKind::Aligned { .. } => IeeeDefaults::enter_toward_zero(),
        };
        if ops.made_by != self.identity() {
            return Err(EvalError::Internal {
                instruction: self.instruction.to_string(),
                message: "the operands were converted by another panel".into(),
            });
        }
        let kk = ops.kk;
        let steps = (kk / self.step) as u64;
        // an aligned panel's row of A, each element as many times as its lanes
        let (mut values, mut exps) = (Vec::new(), Vec::new());
        for (r, c, d) in rows {
            let w = d.len();
            if r >= ops.m {
                return Err(self.count("a", ops.m * kk, (r + 1) * kk));
            }
            if c.len() != w {
                return Err(self.count("c", c.len(), w));
            }
            if !w.is_multiple_of(LANES) || !j0.is_multiple_of(LANES) || j0 + w > ops.n {
                return Err(self.count("d", w, w.next_multiple_of(LANES).min(ops.n)));
            }
            // B's runs of columns from j0 on: every one holds kk x LANES elements
            let at = j0 * kk;
            match (&self.kind, &ops.data) {
                (PanelKind::Flushed { run, .. }, Data::Flushed { a, b }) => {
                    // SAFETY: the kernel reads kk values of row r of a, w / LANES runs of
                    // b from j0 on, w of c, and writes w of d: all inside (checked above);
                    // it runs under flush-to-zero, which `_fp` set.
                    unsafe {
                        run(
                            w as u64,
                            steps,
                            a[r * kk..].as_ptr(),
                            b[at..].as_ptr(),
                            c.as_ptr(),
                            d.as_mut_ptr(),
                        )
                    }
                }
                (PanelKind::Aligned { run, .. }, Data::Aligned { a, a_exp, b, b_exp }) => {
                    let row = r * kk..(r + 1) * kk;
                    aligned::splat_row((&a[row.clone()], &a_exp[row]), &mut values, &mut exps);
                    // SAFETY: as above, for the values and exponents of a (the row's, twice
                    // and four times over) and b; it runs rounding toward zero, which `_fp`
                    // set.
                    unsafe {
                        run(
                            w as u64,
                            steps,
                            values.as_ptr(),
                            exps.as_ptr(),
                            b[at..].as_ptr(),
                            b_exp[at..].as_ptr(),
                            c.as_ptr(),
                            d.as_mut_ptr(),
                        )
                    }
                }
                // (a panel converts operands only of its own kind)
                _ => unreachable!("operands of another kind of panel"),
            }
        }
        Ok(())
    }
}

/// The panel of `checked`'s arithmetic, or why it has none.
pub(crate) fn compile(checked: Checked) -> Result<Panel, String> {
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        return Err("panels need a host whose control state the JIT sets".into());
    }
    let inst = checked.instruction();
    let k = inst.k();
    // the JIT's own refusals first (`nan propagate_*`, k beyond the unrolled limit)
    let lowering = super::plan(checked)?;
    let (memory, kind, step) = match (checked.kind(), lowering) {
        (Kind::Sequential(_), Lowering::Sequential(s, p)) => {
            let built = flushed::build(checked, s, &p)?;
            let kind = PanelKind::Flushed {
                widen: built.widen,
                run: built.run,
            };
            (built.memory, kind, k)
        }
        (Kind::Fused(_), _) => {
            let shape = aligned::plan(checked)?;
            let (memory, run) = aligned::build(&shape)?;
            let step = shape.chain;
            (memory, PanelKind::Aligned { shape, run }, step)
        }
        _ => return Err("no panel computes this pipeline".into()),
    };
    Ok(Panel {
        _memory: Arc::new(memory),
        kind,
        k,
        step,
        a: inst.arithmetic.a.clone(),
        b: inst.arithmetic.b.clone(),
        instruction: inst.name.as_str().into(),
    })
}

#[cfg(test)]
mod tests {
    //! Panels against the interpreter's chain of dot products (one instruction per k-step,
    //! each d fed back as the next c), over 1 to 3 steps and column counts that take one
    //! run of four columns or several, and the sixteen-column rounds of the flushed
    //! panel. The flushed panel on the inputs of the flush-to-zero test of `sequential`
    //! (products, pairwise sums and accumulations around the smallest normal f32,
    //! cancelling pairs); the aligned panel on exponents spread over the whole range
    //! (products that overflow f32's range and fall below it, subnormal results) or
    //! bunched (every cut matters), zeros (the fixed exponent of zero terms) and
    //! cancelling pairs; both with zero, -0, subnormal, infinite and NaN c.
    use super::*;
    use crate::engine::{Choice, Engine, Operands as DotOperands};
    use crate::format::FloatFormat;
    use crate::random::Rng;

    fn spec(name: &str) -> crate::checked::CheckedSpec {
        let path = format!("{}/../specs/{name}.mma", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        crate::compile(&path, &text).expect("the spec checks")
    }

    /// T-FDPA whose zero products take part above every c (at -100 or 970, where c's
    /// zero is at -132 and a subnormal c at -126): the panel's zero-product search is
    /// live, where the library's (products and c at one exponent) never changes a result.
    /// And one whose zero c sits so high (2000) that the panel's cut would leave f64.
    const ZERO_EXPONENTS: &str = "arch panel_test \"panel test\"\n\
        pipeline t_fdpa_zeros(F, L, zp, zc) {\n\
            chain every L\n\
            multiply exact\n\
            zero exponent zp for products\n\
            zero exponent zc for c\n\
            align products, c to max exponent keep F bits round toward_zero\n\
            normalize to out round toward_zero\n\
            zero result positive\n\
            nan canonical\n\
        }\n\
        instruction zeros.P{P}.C{C}.m16n8k8.f32.bf16.bf16.f32 {\n\
            for (P, C) in [(-100, -132), (970, -132), (-132, 2000)]\n\
            shape 16 x 8 x 8\n\
            types a = bf16, b = bf16, c = f32, d = f32\n\
            evidence assumption\n\
            uses t_fdpa_zeros(F = 24, L = 4, zp = P, zc = C)\n\
        }\n";

    /// An element of `f` with exponent `e` (clamped to the normal range) and random bits.
    fn element(f: &FloatFormat, e: i64, r: u64) -> u64 {
        let (m, bias) = (f.mantissa_bits as i64, f.bias as i64);
        let field = (e + bias).clamp(0, (1 << f.exponent_bits) - 2) as u64;
        let code =
            ((r >> 63) << (f.exponent_bits as i64 + m)) | (field << m) | (r & ((1 << m) - 1));
        code << f.ignored_low_bits
    }

    /// A c of f32: a zero, -0, a subnormal, ±Inf, a NaN, or a normal near 2^(e - 127).
    fn special_c(case: usize, e: u64, r: u64) -> u64 {
        match case % 8 {
            0 => 0,
            1 => 0x8000_0000,
            2 => (r & 0x807f_ffff) & !0x7f80_0000 | 1,
            3 => 0x7f80_0000 | ((r >> 40) & 1) << 31,
            4 => 0x7fc0_0001 + (r & 0xff),
            _ => (e.clamp(1, 254) << 23) | (r & 0x807f_ffff),
        }
    }

    /// D of one row through the panel, against the interpreter's chain, column by column.
    fn check_row(checked: Checked, panel: &Panel, (a, b, c): (&[u64], &[u64], &[u64]), what: &str) {
        let (k, cols) = (checked.k(), c.len());
        let kk = a.len();
        let ops = panel
            .operands(a, b, (1, kk, cols))
            .unwrap()
            .expect("finite operands");
        let mut d = vec![0u64; cols];
        panel
            .rows(&ops, 0, std::iter::once((0, c, &mut d[..])))
            .unwrap();
        for j in 0..cols {
            let mut want = c[j];
            for s in 0..kk / k {
                let col: Vec<u64> = (s * k..(s + 1) * k).map(|r| b[r * cols + j]).collect();
                let ops = DotOperands {
                    c: want,
                    a: &a[s * k..(s + 1) * k],
                    b: &col,
                    sa: &[],
                    sb: &[],
                };
                want = crate::interp::run(checked, &ops).unwrap();
            }
            assert_eq!(
                d[j],
                want,
                "{} {what}, {} steps, column {j} of {cols}: c={:x} a={a:x?}: interp {want:x}, panel {:x}",
                checked.name(),
                kk / k,
                c[j],
                d[j]
            );
        }
    }

    #[test]
    fn flushed_panels_give_the_interpreters_chain_of_dot_products() {
        let v = spec("cdna2");
        let names = [
            "v_mfma_f32_16x16x16bf16_1k", // P = 4
            "v_mfma_f32_16x16x8bf16",     // P = 2
            "v_mfma_f32_4x4x4f16",        // P = 4, k = 4
            "v_mfma_f32_16x16x2bf16",     // P = 2, k = 2
        ];
        let mut rng = Rng::new(0xbb67_ae85_84ca_a73b);
        for name in names {
            let checked = v.get(v.spec().position(name).expect(name));
            let panel = Engine::new(checked, Choice::OPTIMISED)
                .panel()
                .expect("a panel");
            assert!(matches!(panel.kind, PanelKind::Flushed { .. }), "{name}");
            let f = checked.instruction().arithmetic.a.as_float().unwrap();
            let k = checked.k();
            for case in 0..60 {
                let steps = 1 + case % 3;
                let cols = [4, 16, 20, 36, 8][case % 5];
                let kk = steps * k;
                let (mut a, mut b) = (vec![], vec![]);
                for _ in 0..kk {
                    let (r1, r2) = (rng.next_u64(), rng.next_u64());
                    let (ea, eb) = if f.exponent_bits == 5 {
                        ((r1 % 31) as i64 - 15, ((r1 >> 8) % 31) as i64 - 15)
                    } else {
                        let ea = (r1 % 40) as i64 - 83;
                        (ea, -126 - ea + ((r1 >> 8) % 9) as i64 - 4)
                    };
                    a.push(element(f, ea, r2));
                    // columns of one row of B: related exponents, independent bits
                    for j in 0..cols {
                        let r = rng.next_u64();
                        let e = if j % 3 == 0 {
                            eb
                        } else {
                            eb + (r % 5) as i64 - 2
                        };
                        b.push(element(f, e, r));
                    }
                }
                if case % 3 == 0 {
                    // a cancelling pair in every column
                    a[1] = a[0];
                    for j in 0..cols {
                        b[cols + j] = b[j] ^ (1 << (f.exponent_bits + f.mantissa_bits));
                    }
                }
                let c: Vec<u64> = (0..cols)
                    .map(|j| special_c(j + case, 120 + rng.next_u64() % 8, rng.next_u64()))
                    .collect();
                check_row(checked, &panel, (&a, &b, &c), "flushed");
            }
        }
    }

    #[test]
    fn aligned_panels_give_the_interpreters_chain_of_dot_products() {
        let cases = [
            ("ampere", "mma.m16n8k8.f32.tf32.tf32.f32"), // L = 4, F = 24
            ("ampere", "mma.m16n8k16.f32.f16.f16.f32"),  // L = 8
            ("ampere", "mma.m16n8k16.f32.bf16.bf16.f32"), // L = 8
            ("hopper", "mma.m16n8k16.f32.f16.f16.f32"),  // L = 16, F = 25
            ("hopper", "wgmma.m64n8k8.f32.tf32.tf32"),   // L = 8
            ("volta", "mma.m8n8k4.f32.f16.f16.f32"),     // F = 23
        ];
        let mut rng = Rng::new(0x3c6e_f372_fe94_f82b);
        let zeros = || crate::compile("zeros.mma", ZERO_EXPONENTS).expect("checks");
        let specs: Vec<_> = cases
            .iter()
            .map(|(file, name)| (spec(file), *name))
            .chain([
                (zeros(), "zeros.P-100.C-132.m16n8k8.f32.bf16.bf16.f32"),
                (zeros(), "zeros.P970.C-132.m16n8k8.f32.bf16.bf16.f32"),
            ])
            .collect();
        for (v, name) in &specs {
            let name = *name;
            let checked = v.get(v.spec().position(name).expect(name));
            let panel = Engine::new(checked, Choice::OPTIMISED)
                .panel()
                .expect("a panel");
            assert!(matches!(panel.kind, PanelKind::Aligned { .. }), "{name}");
            let f = checked.instruction().arithmetic.a.as_float().unwrap();
            let (emin, emax) = (f.min_exponent() as i64, f.max_exponent() as i64);
            let k = checked.k();
            for case in 0..90 {
                let steps = 1 + case % 3;
                let cols = [4, 8, 12, 20][case % 4];
                let kk = steps * k;
                // exponents: the whole range; bunched a few apart at a random place; or
                // bunched where products land around f32's smallest subnormal (or at the
                // format's own smallest exponents)
                let spread = case % 3 == 1;
                let centre = match case % 3 {
                    2 => ((-150 + (rng.next_u64() % 8) as i64) / 2).max(emin),
                    _ => emin + (rng.next_u64() % (emax - emin + 1) as u64) as i64,
                };
                let draw = |rng: &mut Rng| -> u64 {
                    let r = rng.next_u64();
                    if r.is_multiple_of(10) {
                        return (r >> 63)
                            << (f.exponent_bits + f.mantissa_bits + f.ignored_low_bits);
                    }
                    let e = if spread {
                        emin - 1 + ((r >> 8) % (emax - emin + 2) as u64) as i64
                    } else {
                        centre + ((r >> 8) % 7) as i64 - 3
                    };
                    element(f, e, rng.next_u64())
                };
                let mut a: Vec<u64> = (0..kk).map(|_| draw(&mut rng)).collect();
                let mut b: Vec<u64> = (0..kk * cols).map(|_| draw(&mut rng)).collect();
                if case % 4 == 1 {
                    // a cancelling pair in every column
                    a[1] = a[0];
                    let sign = 1 << (f.exponent_bits + f.mantissa_bits + f.ignored_low_bits);
                    for j in 0..cols {
                        b[cols + j] = b[j] ^ sign;
                    }
                }
                let c: Vec<u64> = (0..cols)
                    .map(|j| {
                        let e = (centre + 127).clamp(1, 254) as u64 + rng.next_u64() % 5;
                        special_c(j + case, e, rng.next_u64())
                    })
                    .collect();
                check_row(
                    checked,
                    &panel,
                    (&a, &b, &c),
                    if spread { "spread" } else { "bunched" },
                );
            }
            if emin < -80 {
                // a negative sum below f32's smallest subnormal, from a zero c: +0
                let neg = 1 << (f.exponent_bits + f.mantissa_bits + f.ignored_low_bits);
                let mut a = vec![0u64; k];
                let mut b = vec![0u64; k * 4];
                a[0] = element(f, -76, 0);
                b[..4].copy_from_slice(&[element(f, -76, 1 << f.ignored_low_bits) | neg; 4]);
                check_row(checked, &panel, (&a, &b, &[0; 4]), "tiny negative");
            }
            // a NaN or an infinity in A or B: no panel operands (the batch entry runs it)
            let f32_inf = 0x7f80_0000u64 >> (32 - f.storage_bits);
            let inf = if f.ignored_low_bits > 0 {
                0x7f80_0000
            } else {
                f32_inf
            };
            let inf = match (f.exponent_bits, f.mantissa_bits) {
                (5, 10) => 0x7c00,
                (8, 7) => 0x7f80,
                _ => inf,
            };
            let zeros = vec![0u64; k * 4];
            let mut with_inf = zeros.clone();
            with_inf[3] = inf;
            assert!(
                panel
                    .operands(&with_inf[..k], &zeros, (1, k, 4))
                    .unwrap()
                    .is_none(),
                "{name}"
            );
            assert!(
                panel
                    .operands(&zeros[..k], &with_inf, (1, k, 4))
                    .unwrap()
                    .is_none(),
                "{name}"
            );
        }
    }

    /// Sums at the edge of f32's range: the aligned panel looks for an overflow only where
    /// a step's reference exponent allows one. At the smallest exponent that does (124
    /// for a chain of 4, 123 for 8: the sum of a chain's terms and c lies below
    /// (2 chain + 1) 2^(emax + 1)), products of the largest significands and a c just
    /// below it reach 2^128: ±Inf, where a threshold one higher gives f32's largest
    /// finite value.
    #[test]
    fn aligned_panels_find_the_overflows_at_the_edge() {
        for (file, name, edge) in [
            ("ampere", "mma.m16n8k8.f32.tf32.tf32.f32", 124), // L = 4
            ("hopper", "wgmma.m64n8k8.f32.tf32.tf32", 123),   // L = 8
            ("ampere", "mma.m16n8k16.f32.bf16.bf16.f32", 123), // L = 8
        ] {
            let v = spec(file);
            let checked = v.get(v.spec().position(name).expect(name));
            let panel = Engine::new(checked, Choice::OPTIMISED)
                .panel()
                .expect("a panel");
            let PanelKind::Aligned { shape, .. } = &panel.kind else {
                panic!("{name}: not aligned")
            };
            let (k, chain) = (checked.k(), shape.chain);
            let f = checked.instruction().arithmetic.a.as_float().unwrap();
            let sign = 1u64 << (f.exponent_bits + f.mantissa_bits + f.ignored_low_bits);
            let largest = |e: i64| element(f, e, u64::MAX >> 1); // (2 - ulp) 2^e
            let (ea, eb) = (edge / 2 + edge % 2, edge / 2);
            // the first chained step's products at the edge, the rest zero
            let a: Vec<u64> = (0..k)
                .map(|i| if i < chain { largest(ea) } else { 0 })
                .collect();
            let cols = 4;
            let mut b = vec![0u64; k * cols];
            for r in 0..chain {
                b[r * cols] = largest(eb); // + ... + c: +Inf
                b[r * cols + 1] = largest(eb) | sign; // - ... - c: -Inf
                b[r * cols + 2] = largest(eb); // c = 0: below 2^128
                b[r * cols + 3] = largest(eb - 1); // one exponent lower: no overflow
            }
            let c_edge = (((edge + 127) as u64) << 23) | 0x7f_ffff;
            let c = [c_edge, c_edge | 0x8000_0000, 0, c_edge - (1 << 23)];
            check_row(checked, &panel, (&a, &b, &c), "at the edge of overflow");
        }
    }

    #[test]
    fn only_the_arithmetic_panels_cover_has_one() {
        for (file, name, has) in [
            ("cdna2", "v_mfma_f32_16x16x16f16", true),
            ("cdna2", "v_mfma_f32_16x16x4f32", false), // f32 FMA: nothing flushed
            ("cdna2", "v_mfma_f64_16x16x4f64", false),
            ("ampere", "mma.m16n8k16.f32.f16.f16.f32", true),
            ("ampere", "mma.m16n8k16.f16.f16.f16.f16", false), // f16 d, rounded to nearest
            ("ada", "mma.m16n8k32.f32.e4m3.e4m3.f32", false),  // E8M13 results
            ("cdna3", "v_mfma_f32_16x16x32_fp8_fp8", false),   // two alignments
        ] {
            let v = spec(file);
            let checked = v.get(v.spec().position(name).expect(name));
            let jit = Engine::new(checked, Choice::OPTIMISED);
            assert_eq!(jit.panel().is_some(), has, "{name}");
            assert!(Engine::interpreter(checked).panel().is_none(), "{name}");
        }
        // a reference exponent of 2000 (a zero c's): beyond the cut's f64
        let v = crate::compile("zeros.mma", ZERO_EXPONENTS).expect("checks");
        let far = v.get(
            v.spec()
                .position("zeros.P-132.C2000.m16n8k8.f32.bf16.bf16.f32")
                .unwrap(),
        );
        assert!(Engine::new(far, Choice::OPTIMISED).panel().is_none());
    }

    #[test]
    fn operands_and_rows_refuse_the_wrong_sizes() {
        let v = spec("cdna2");
        let checked = v.get(v.spec().position("v_mfma_f32_4x4x4f16").unwrap());
        let panel = Engine::new(checked, Choice::OPTIMISED).panel().unwrap();
        let (a, b) = (vec![0u64; 2 * 8], vec![0u64; 8 * 8]);
        let err = |r: Result<Option<Operands>, EvalError>| r.err().unwrap().to_string();
        assert!(err(panel.operands(&a, &b, (2, 6, 8))).starts_with("a has 6"));
        assert!(err(panel.operands(&a, &b, (2, 8, 6))).starts_with("b has 6"));
        assert!(err(panel.operands(&a[1..], &b, (2, 8, 8))).starts_with("a has 15"));
        assert!(err(panel.operands(&a, &b[1..], (2, 8, 8))).starts_with("b has 63"));
        let ops = panel.operands(&a, &b, (2, 8, 8)).unwrap().unwrap();
        let c = vec![0u64; 8];
        let mut d = vec![0u64; 8];
        let run = |r: usize, j0: usize, c: &[u64], d: &mut [u64]| {
            panel
                .rows(&ops, j0, std::iter::once((r, c, d)))
                .map_err(|e| e.to_string())
        };
        assert!(run(1, 0, &c, &mut d).is_ok());
        assert!(run(1, 4, &c[..4], &mut d[..4]).is_ok());
        assert!(run(2, 0, &c, &mut d).unwrap_err().starts_with("a has"));
        assert!(
            run(0, 0, &c[..4], &mut d)
                .unwrap_err()
                .starts_with("c has 4")
        );
        assert!(
            run(0, 0, &c[..6], &mut d[..6])
                .unwrap_err()
                .starts_with("d has 6")
        );
        assert!(run(0, 4, &c, &mut d).unwrap_err().starts_with("d has 8"));
        assert!(
            run(0, 2, &c[..4], &mut d[..4])
                .unwrap_err()
                .starts_with("d has 4")
        );
        // operands another panel converted
        let other = v.get(v.spec().position("v_mfma_f32_16x16x4f16").unwrap());
        let other = Engine::new(other, Choice::OPTIMISED).panel().unwrap();
        let theirs = other
            .operands(&a[..4], &b[..32], (1, 4, 8))
            .unwrap()
            .unwrap();
        let refused = panel.rows(&theirs, 0, std::iter::once((0, &c[..], &mut d[..])));
        assert!(refused.unwrap_err().to_string().contains("another panel"));
    }
}
