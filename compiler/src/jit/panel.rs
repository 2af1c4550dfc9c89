//! GEMM panels of the f32 multiply-add pipelines that flush every result (CDNA2's
//! `ftz_mul_add`): one row of A against many columns of B, four columns to a SIMD vector,
//! every k-step of a GEMM in one call.
//!
//! The batch entry computes one dot product per record: the products and pairwise sums
//! four lanes of one record at a time, the accumulation in scalars, every flush in code.
//! A panel's lanes are output columns instead, so each step of the pipeline (a product,
//! a pairwise sum, an addition into c) is one vector operation for four dot products, in
//! the pipeline's own order. The hardware flushes: a panel exists only where
//! [`sequential::Plan::flush_to_zero`] holds (every rounded step flushes subnormal results
//! keeping the sign, and the host's flush-to-zero flushes exactly those), and it runs
//! only under flush-to-zero. A and B are widened once per GEMM to the f32 values the
//! pipeline multiplies (conditioned: flushed inputs are +0) by the panel's `widen`
//! entries, B packed as [`pack_columns`] lays it out.

use super::emit::{Emitter, little_endian};
use super::fpenv::IeeeDefaults;
use super::sequential::{self, Native};
use super::{Lowering, ModuleMemory, Options, Target};
use crate::checked::Checked;
use crate::engine::EvalError;
use crate::format::FloatFormat;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    AbiParam, BlockArg, InstBuilder, MemFlagsData, UserFuncName, Value, types,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::Module;
use std::sync::Arc;

/// `widen(n, src, dst)`: n encodings (u64 each) to the f32 bits the pipeline multiplies.
type WidenFn = unsafe extern "C" fn(u64, *const u64, *mut u32);
/// `run(columns, steps, a, b, c, d)`: see [`Panel::rows`].
type RunFn = unsafe extern "C" fn(u64, u64, *const u32, *const u32, *const u64, *mut u64);

/// Output columns per SIMD vector.
pub const LANES: usize = 4;

/// The compiled panel of one arithmetic.
pub struct Panel {
    _memory: Arc<ModuleMemory>,
    widen: [WidenFn; 2],
    run: RunFn,
    /// The instruction's k: one step of the chain.
    k: usize,
    instruction: Arc<str>,
}

impl std::fmt::Debug for Panel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Panel")
            .field("instruction", &self.instruction)
            .field("k", &self.k)
            .finish()
    }
}

/// B (`k` x `n`, row-major, f32 bits) as a panel reads it: for each run of [`LANES`]
/// columns, its `k` rows one after the other (`n` a multiple of [`LANES`]).
pub fn pack_columns(b: &[u32], k: usize, n: usize) -> Vec<u32> {
    assert!(n.is_multiple_of(LANES) && b.len() == k * n);
    let mut out = Vec::with_capacity(b.len());
    for j in (0..n).step_by(LANES) {
        for row in b.chunks_exact(n.max(1)) {
            out.extend_from_slice(&row[j..j + LANES]);
        }
    }
    out
}

impl Panel {
    /// Elements of A as the f32 values (bits) the pipeline multiplies.
    pub fn widen_a(&self, x: &[u64]) -> Vec<u32> {
        self.widen_with(0, x)
    }
    /// Elements of B as the f32 values (bits) the pipeline multiplies.
    pub fn widen_b(&self, x: &[u64]) -> Vec<u32> {
        self.widen_with(1, x)
    }
    fn widen_with(&self, which: usize, x: &[u64]) -> Vec<u32> {
        let mut out = vec![0u32; x.len()];
        // SAFETY: reads x.len() elements of x and writes as many of out
        unsafe { (self.widen[which])(x.len() as u64, x.as_ptr(), out.as_mut_ptr()) };
        out
    }

    /// For each row `(a, c, d)`: `d[j]` is the GEMM's element of the row's `a` (its K
    /// widened values, K a multiple of the instruction's k) against column j of `b`,
    /// starting from `c[j]` (encodings of c's format), through K / k chained steps.
    /// `b`: the columns' widened values packed by [`pack_columns`] (at least
    /// `d.len()` x K of them); `d.len()` a multiple of [`LANES`].
    pub fn rows<'x>(
        &self,
        b: &[u32],
        rows: impl Iterator<Item = (&'x [u32], &'x [u64], &'x mut [u64])>,
    ) -> Result<(), EvalError> {
        let _fp = IeeeDefaults::enter(true);
        for (a, c, d) in rows {
            let kk = a.len();
            let count = |operand, got, want| EvalError::OperandCount {
                instruction: self.instruction.to_string(),
                operand,
                got,
                want,
            };
            if kk == 0 || !kk.is_multiple_of(self.k) {
                return Err(count("a", kk, kk.next_multiple_of(self.k).max(self.k)));
            }
            if c.len() != d.len() {
                return Err(count("c", c.len(), d.len()));
            }
            if !d.len().is_multiple_of(LANES) {
                return Err(count("d", d.len(), d.len().next_multiple_of(LANES)));
            }
            let need = d.len().saturating_mul(kk);
            if b.len() < need {
                return Err(count("b", b.len(), need));
            }
            // SAFETY: the kernel reads kk values of a, d.len() x kk of b (d.len() / LANES
            // runs of kk x LANES), d.len() of c, and writes d.len() of d: checked above;
            // it runs under flush-to-zero, which `_fp` set.
            unsafe {
                (self.run)(
                    d.len() as u64,
                    (kk / self.k) as u64,
                    a.as_ptr(),
                    b.as_ptr(),
                    c.as_ptr(),
                    d.as_mut_ptr(),
                )
            };
        }
        Ok(())
    }
}

/// The panel of `checked`'s arithmetic, or why it has none.
pub(crate) fn compile(checked: Checked) -> Result<Panel, String> {
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        return Err("panels need a host whose flush-to-zero mode the JIT sets".into());
    }
    let inst = checked.instruction();
    let (s, p) = match super::plan(checked)? {
        Lowering::Sequential(s, p) => (s, p),
        _ => return Err("only sequential f32 pipelines have panels".into()),
    };
    if !p.flush_to_zero {
        return Err("not every step flushes its subnormal results".into());
    }
    let ops = &p.operands;
    if ops.c != ops.d || p.native != Native::F32 {
        return Err("c is not d's format (f32)".into());
    }
    let group = s.pairwise.as_ref().map_or(1, |(g, _)| *g as usize);
    let k = inst.k();
    let mut module = super::new_module(Options::default()).map_err(|e| e.message)?;
    let mut fctx = FunctionBuilderContext::new();
    let mut ids = vec![];
    let mut target = Target::new(&mut module, false, "");
    for (i, (float, flush)) in [
        (&ops.a, s.conditioning.flush_a),
        (&ops.b, s.conditioning.flush_b),
    ]
    .into_iter()
    .enumerate()
    {
        ids.push(define_widen(&mut target, &mut fctx, i, float, flush)?);
    }
    let shape = RunShape {
        k,
        group,
        flush_c: s.conditioning.flush_c,
        nan: inst.arithmetic.d.encode_nan().unwrap_or(0) as i64,
    };
    let run_id = define_run(&mut target, &mut fctx, &shape)?;
    module
        .finalize_definitions()
        .map_err(|e| format!("cannot finalize the panel: {e}"))?;
    let widen = |id| {
        // SAFETY: defined with exactly this signature
        unsafe { std::mem::transmute::<*const u8, WidenFn>(module.get_finalized_function(id)) }
    };
    let widen = [widen(ids[0]), widen(ids[1])];
    // SAFETY: defined with exactly this signature
    let run =
        unsafe { std::mem::transmute::<*const u8, RunFn>(module.get_finalized_function(run_id)) };
    Ok(Panel {
        _memory: Arc::new(ModuleMemory(Some(module))),
        widen,
        run,
        k,
        instruction: inst.name.as_str().into(),
    })
}

/// `widen{which}(n, src, dst)`: each element's f32 bits, flushed to +0 when `flush`.
fn define_widen<M: Module>(
    target: &mut Target<'_, M>,
    fctx: &mut FunctionBuilderContext,
    which: usize,
    float: &FloatFormat,
    flush: bool,
) -> Result<cranelift_module::FuncId, String> {
    let ptr = target.module.target_config().pointer_type();
    let mut sig = target.module.make_signature();
    sig.params.push(AbiParam::new(types::I64));
    sig.params.push(AbiParam::new(ptr));
    sig.params.push(AbiParam::new(ptr));
    let id = target
        .module
        .declare_function(
            &format!("widen{which}"),
            cranelift_module::Linkage::Local,
            &sig,
        )
        .map_err(|e| e.to_string())?;
    let mut ctx = target.module.make_context();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
        let (entry, head, body, exit) = (
            b.create_block(),
            b.create_block(),
            b.create_block(),
            b.create_block(),
        );
        b.append_block_params_for_function_params(entry);
        b.append_block_param(head, types::I64);
        b.switch_to_block(entry);
        let p = b.block_params(entry).to_vec();
        let zero = b.ins().iconst(types::I64, 0);
        b.ins().jump(head, &[BlockArg::Value(zero)]);
        b.switch_to_block(head);
        let i = b.block_params(head)[0];
        let more = b.ins().icmp(IntCC::UnsignedLessThan, i, p[0]);
        b.ins().brif(more, body, &[], exit, &[]);
        b.switch_to_block(body);
        let src = b.ins().imul_imm_s(i, 8);
        let src = b.ins().iadd(p[1], src);
        let flags = MemFlagsData::new().with_notrap();
        let raw = b.ins().load(types::I64, flags.with_readonly(), src, 0);
        let value = {
            let mut em = Emitter {
                b: &mut b,
                w: types::I64,
                data: target,
            };
            sequential::to_native(&mut em, float, Native::F32, raw, flush)
        };
        let bits = b.ins().bitcast(types::I32, MemFlagsData::new(), value);
        let dst = b.ins().imul_imm_s(i, 4);
        let dst = b.ins().iadd(p[2], dst);
        b.ins().store(flags, bits, dst, 0);
        let next = b.ins().iadd_imm_s(i, 1);
        b.ins().jump(head, &[BlockArg::Value(next)]);
        b.switch_to_block(exit);
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(target.module.target_config());
    }
    target
        .module
        .define_function(id, &mut ctx)
        .map_err(|e| format!("cannot define the panel: {e:?}"))?;
    Ok(id)
}

/// What the run entry's code depends on.
struct RunShape {
    k: usize,
    /// Products per pairwise group (1: each product is a term).
    group: usize,
    flush_c: bool,
    /// d's canonical NaN.
    nan: i64,
}

/// The run entry's arguments, and the bytes of one run of [`LANES`] columns in `b`.
struct RunArgs {
    steps: Value,
    a: Value,
    b: Value,
    c: Value,
    d: Value,
    run_bytes: Value,
}

/// `run(columns, steps, a, b, c, d)`: sixteen columns a round while sixteen remain, then
/// four at a time.
fn define_run<M: Module>(
    target: &mut Target<'_, M>,
    fctx: &mut FunctionBuilderContext,
    shape: &RunShape,
) -> Result<cranelift_module::FuncId, String> {
    let ptr = target.module.target_config().pointer_type();
    let mut sig = target.module.make_signature();
    sig.params.push(AbiParam::new(types::I64));
    sig.params.push(AbiParam::new(types::I64));
    for _ in 0..4 {
        sig.params.push(AbiParam::new(ptr));
    }
    let id = target
        .module
        .declare_function("panel", cranelift_module::Linkage::Local, &sig)
        .map_err(|e| e.to_string())?;
    let mut ctx = target.module.make_context();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let p = b.block_params(entry).to_vec();
        let run_bytes = b.ins().imul_imm_s(p[1], (shape.k * LANES * 4) as i64);
        let args = RunArgs {
            steps: p[1],
            a: p[2],
            b: p[3],
            c: p[4],
            d: p[5],
            run_bytes,
        };
        let columns = p[0];
        let exit = b.create_block();
        let zero = b.ins().iconst(types::I64, 0);
        let mut from = zero;
        let mut em = Emitter {
            b: &mut b,
            w: types::I64,
            data: target,
        };
        for vectors in [4, 1] {
            // while `vectors` runs of columns remain: those columns
            let head = em.b.create_block();
            let body = em.b.create_block();
            let next = em.b.create_block();
            em.b.append_block_param(head, types::I64);
            em.b.append_block_param(next, types::I64);
            em.b.ins().jump(head, &[BlockArg::Value(from)]);
            em.b.switch_to_block(head);
            let j = em.b.block_params(head)[0];
            let end = em.b.ins().iadd_imm_s(j, (vectors * LANES) as i64);
            let fits =
                em.b.ins()
                    .icmp(IntCC::UnsignedLessThanOrEqual, end, columns);
            em.b.ins()
                .brif(fits, body, &[], next, &[BlockArg::Value(j)]);
            em.b.switch_to_block(body);
            emit_columns(&mut em, shape, &args, j, vectors);
            em.b.ins().jump(head, &[BlockArg::Value(end)]);
            em.b.switch_to_block(next);
            from = em.b.block_params(next)[0];
        }
        em.b.ins().jump(exit, &[]);
        b.switch_to_block(exit);
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(target.module.target_config());
    }
    target
        .module
        .define_function(id, &mut ctx)
        .map_err(|e| format!("cannot define the panel: {e:?}"))?;
    Ok(id)
}

/// Columns `j..j + vectors * LANES` of every step, from the current block on; ends in a
/// block that falls through to the caller's code. Two loops: over the steps (c's
/// conditioning at each), and inside each over its pairwise groups, one group of every
/// vector per round (a round's values stay in registers).
fn emit_columns(em: &mut Emitter, shape: &RunShape, args: &RunArgs, j: Value, vectors: usize) {
    let le = little_endian();
    let quads = em.b.ins().ushr_imm_s(j, 2);
    let b_off = em.b.ins().imul(quads, args.run_bytes);
    let b0 = em.b.ins().iadd(args.b, b_off);
    let cd_off = em.b.ins().imul_imm_s(j, 8);
    let cp = em.b.ins().iadd(args.c, cd_off);
    let dp = em.b.ins().iadd(args.d, cd_off);
    let mut accs = vec![];
    for v in 0..vectors {
        let code = em.load_low32x4(cp, v * LANES);
        accs.push(em.b.ins().bitcast(types::F32X4, le, code));
    }
    // both loops carry: their counter, a's and b's place, the accumulators
    let loop_block = |em: &mut Emitter| {
        let block = em.b.create_block();
        for _ in 0..3 {
            em.b.append_block_param(block, types::I64);
        }
        for _ in 0..vectors {
            em.b.append_block_param(block, types::F32X4);
        }
        block
    };
    let carried = |counter: Value, a: Value, b: Value, accs: &[Value]| -> Vec<BlockArg> {
        [counter, a, b]
            .into_iter()
            .chain(accs.iter().copied())
            .map(BlockArg::Value)
            .collect()
    };
    let (steps, groups) = (loop_block(em), loop_block(em));
    let (step, group, done) = (
        em.b.create_block(),
        em.b.create_block(),
        em.b.create_block(),
    );
    let zero = em.b.ins().iconst(types::I64, 0);
    em.b.ins().jump(steps, &carried(zero, args.a, b0, &accs));

    // steps: while s < steps, c's conditioning, then the groups
    em.b.switch_to_block(steps);
    let sp = em.b.block_params(steps).to_vec();
    let more = em.b.ins().icmp(IntCC::UnsignedLessThan, sp[0], args.steps);
    em.b.ins().brif(more, step, &[], done, &[]);
    em.b.switch_to_block(step);
    // c at each step: zeros and subnormals read as +0
    let accs: Vec<Value> = sp[3..]
        .iter()
        .map(|&x| match shape.flush_c {
            true => flush_to_plus_zero(em, x),
            false => x,
        })
        .collect();
    let next_step = em.b.ins().iadd_imm_s(sp[0], 1);
    em.b.ins().jump(groups, &carried(zero, sp[1], sp[2], &accs));

    // groups: while g < k / group, one group of products of every vector
    em.b.switch_to_block(groups);
    let gp = em.b.block_params(groups).to_vec();
    let (g, ap, bp) = (gp[0], gp[1], gp[2]);
    let more =
        em.b.ins()
            .icmp_imm_u(IntCC::UnsignedLessThan, g, (shape.k / shape.group) as i64);
    em.b.ins().brif(
        more,
        group,
        &[],
        steps,
        &carried(next_step, ap, bp, &gp[3..]),
    );
    em.b.switch_to_block(group);
    let read = MemFlagsData::new().with_notrap().with_readonly();
    let splats: Vec<Value> = (0..shape.group)
        .map(|i| {
            let x = em.b.ins().load(types::F32, read, ap, (i * 4) as i32);
            em.b.ins().splat(types::F32X4, x)
        })
        .collect();
    let mut column_run = bp;
    let mut accs = vec![];
    for (v, &acc) in gp[3..].iter().enumerate() {
        if v > 0 {
            column_run = em.b.ins().iadd(column_run, args.run_bytes);
        }
        let mut level: Vec<Value> = splats
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let y =
                    em.b.ins()
                        .load(types::F32X4, read, column_run, (i * LANES * 4) as i32);
                em.b.ins().fmul(x, y)
            })
            .collect();
        // the pairwise tree: adjacent sums, level by level
        while level.len() > 1 {
            level = level
                .chunks(2)
                .map(|pair| em.b.ins().fadd(pair[0], pair[1]))
                .collect();
        }
        accs.push(em.b.ins().fadd(acc, level[0]));
    }
    let g_next = em.b.ins().iadd_imm_s(g, 1);
    let a_next = em.b.ins().iadd_imm_s(ap, (shape.group * 4) as i64);
    let b_next = em.b.ins().iadd_imm_s(bp, (shape.group * LANES * 4) as i64);
    em.b.ins()
        .jump(groups, &carried(g_next, a_next, b_next, &accs));

    em.b.switch_to_block(done);
    let store = MemFlagsData::new().with_notrap();
    let nan = em.splat32(shape.nan);
    for (v, &acc) in sp[3..].iter().enumerate() {
        // every NaN is d's canonical NaN, as the interpreter encodes it
        let is_nan = em.b.ins().fcmp(FloatCC::Unordered, acc, acc);
        let bits = em.b.ins().bitcast(types::I32X4, le, acc);
        let bits = em.b.ins().bitselect(is_nan, nan, bits);
        let lo = em.b.ins().uwiden_low(bits);
        let hi = em.b.ins().uwiden_high(bits);
        em.b.ins().store(store, lo, dp, (v * LANES * 8) as i32);
        em.b.ins().store(store, hi, dp, (v * LANES * 8 + 16) as i32);
    }
}

/// Lanes that are zeros or subnormals become +0 (c's conditioning).
fn flush_to_plus_zero(em: &mut Emitter, x: Value) -> Value {
    let le = little_endian();
    let bits = em.b.ins().bitcast(types::I32X4, le, x);
    let exponent = em.b.ins().ushr_imm_s(bits, 23);
    let mask = em.splat32(0xff);
    let exponent = em.b.ins().band(exponent, mask);
    let zero = em.splat32(0);
    let tiny = em.b.ins().icmp(IntCC::Equal, exponent, zero);
    let bits = em.b.ins().band_not(bits, tiny);
    em.b.ins().bitcast(types::F32X4, le, bits)
}

#[cfg(test)]
mod tests {
    //! Panels against the interpreter's chain of dot products, on the inputs of the
    //! flush-to-zero test of `sequential` (products, pairwise sums and accumulations
    //! around the smallest normal f32, cancelling pairs), with NaN, infinite, zero and
    //! subnormal c, over 1 to 3 steps and column counts that take the sixteen-column
    //! rounds, the four-column ones, or both.
    use super::*;
    use crate::engine::{Choice, Engine, Operands};
    use crate::random::Rng;

    fn cdna2() -> crate::checked::CheckedSpec {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/cdna2.mma");
        let text = std::fs::read_to_string(path).unwrap();
        crate::compile(path, &text).expect("cdna2 checks")
    }

    /// An element of `f` with exponent `e` (clamped to the normal range) and random bits.
    fn element(f: &FloatFormat, e: i64, r: u64) -> u64 {
        let (m, bias) = (f.mantissa_bits as i64, f.bias as i64);
        let field = (e + bias).clamp(0, (1 << f.exponent_bits) - 2) as u64;
        ((r >> 63) << (f.exponent_bits as i64 + m)) | (field << m) | (r & ((1 << m) - 1))
    }

    #[test]
    fn panels_give_the_interpreters_chain_of_dot_products() {
        let v = cdna2();
        let names = [
            "v_mfma_f32_16x16x16bf16_1k", // P = 4
            "v_mfma_f32_16x16x8bf16",     // P = 2
            "v_mfma_f32_4x4x4f16",        // P = 4, k = 4
            "v_mfma_f32_16x16x2bf16",     // P = 2, k = 2
        ];
        let mut rng = Rng::new(0xbb67_ae85_84ca_a73b);
        for name in names {
            let checked = v.get(v.spec().position(name).expect(name));
            let engine = Engine::new(checked, Choice::OPTIMISED);
            let panel = engine.panel().expect("a panel");
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
                    .map(|j| {
                        let r = rng.next_u64();
                        match (j + case) % 7 {
                            0 => 0,
                            1 => 0x8000_0000,                         // -0
                            2 => (r & 0x007f_ffff) | 1,               // subnormal
                            3 => 0x7f80_0000 | ((r >> 40) & 1) << 31, // ±inf
                            4 => 0x7fc0_0001 + (r & 0xff),            // NaN, a payload
                            _ => ((((r >> 40) % 8) + 120) << 23) | (r & 0x807f_ffff),
                        }
                    })
                    .collect();
                let wa = panel.widen_a(&a);
                let wb = pack_columns(&panel.widen_b(&b), kk, cols);
                let mut d = vec![0u64; cols];
                panel
                    .rows(&wb, std::iter::once((&wa[..], &c[..], &mut d[..])))
                    .unwrap();
                for j in 0..cols {
                    let mut want = c[j];
                    for s in 0..steps {
                        let col: Vec<u64> = (s * k..(s + 1) * k).map(|r| b[r * cols + j]).collect();
                        let ops = Operands {
                            c: want,
                            a: &a[s * k..(s + 1) * k],
                            b: &col,
                            sa: &[],
                            sb: &[],
                        };
                        want = crate::interp::run(checked, &ops).unwrap();
                    }
                    assert_eq!(
                        d[j], want,
                        "{name}, {steps} steps, column {j} of {cols}: c={:x} a={a:x?}: interp {want:x}, panel {:x}",
                        c[j], d[j]
                    );
                }
            }
        }
    }

    #[test]
    fn only_pipelines_that_flush_every_result_have_panels() {
        let v = cdna2();
        for (name, has) in [
            ("v_mfma_f32_16x16x16f16", true),
            ("v_mfma_f32_16x16x4f32", false), // f32 FMA: nothing flushed
            ("v_mfma_f64_16x16x4f64", false),
        ] {
            let checked = v.get(v.spec().position(name).expect(name));
            let jit = Engine::new(checked, Choice::OPTIMISED);
            assert_eq!(jit.panel().is_some(), has, "{name}");
            assert!(Engine::interpreter(checked).panel().is_none(), "{name}");
        }
    }

    #[test]
    fn rows_refuse_operands_of_the_wrong_size() {
        let v = cdna2();
        let checked = v.get(v.spec().position("v_mfma_f32_4x4x4f16").unwrap());
        let panel = Engine::new(checked, Choice::OPTIMISED).panel().unwrap();
        let (a, b, c) = (vec![0u32; 8], vec![0u32; 8 * 8], vec![0u64; 8]);
        let mut d = vec![0u64; 8];
        let run = |a: &[u32], b: &[u32], c: &[u64], d: &mut [u64]| {
            panel
                .rows(b, std::iter::once((a, c, d)))
                .map_err(|e| e.to_string())
        };
        assert!(run(&a, &b, &c, &mut d).is_ok());
        assert!(
            run(&a[..6], &b, &c, &mut d)
                .unwrap_err()
                .starts_with("a has")
        );
        assert!(
            run(&a, &b[..63], &c, &mut d)
                .unwrap_err()
                .starts_with("b has")
        );
        assert!(
            run(&a, &b, &c[..4], &mut d)
                .unwrap_err()
                .starts_with("c has")
        );
        assert!(
            run(&a, &b, &c[..6], &mut d[..6])
                .unwrap_err()
                .starts_with("d has")
        );
    }
}
