//! The panel of the f32 multiply-add pipelines that flush every result (CDNA2's
//! `ftz_mul_add`): four output columns per `f32x4`, each step of the pipeline (a product,
//! a pairwise sum, an addition into c) one vector operation for four dot products, in
//! the pipeline's own order. The hardware flushes: this panel exists only where
//! [`sequential::Plan::flush_to_zero`] holds (every rounded step flushes subnormal
//! results keeping the sign, and the host's flush-to-zero flushes exactly those), and
//! runs only under flush-to-zero. A and B are widened to the f32 values the pipeline
//! multiplies (conditioned: flushed inputs are +0) by its `widen` entries.

use super::super::emit::{Emitter, little_endian};
use super::super::sequential::{self, Native};
use super::super::{ModuleMemory, Options, Target};
use super::{LANES, RunFn, WidenFn};
use crate::checked::Checked;
use crate::format::FloatFormat;
use crate::ir::Sequential;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{BlockArg, InstBuilder, MemFlagsData, Value, types};
use cranelift_module::Module;

/// The compiled entries: `widen` for a and b, and `run`.
pub(super) struct Built {
    pub memory: ModuleMemory,
    pub widen: [WidenFn; 2],
    pub run: RunFn,
}

/// Build the panel of a sequential pipeline whose plan runs under flush-to-zero.
pub(super) fn build(
    checked: Checked,
    s: &Sequential,
    p: &sequential::Plan,
) -> Result<Built, String> {
    if !p.flush_to_zero {
        return Err("not every step flushes its subnormal results".into());
    }
    let ops = &p.operands;
    if ops.c != ops.d || p.native != Native::F32 {
        return Err("c is not d's format (f32)".into());
    }
    let inst = checked.instruction();
    let group = s.pairwise.as_ref().map_or(1, |(g, _)| *g as usize);
    let mut module = super::super::new_module(Options::default()).map_err(|e| e.message)?;
    let mut ids = vec![];
    let mut target = Target::new(&mut module, false, "");
    for (i, (float, flush)) in [
        (&ops.a, s.conditioning.flush_a),
        (&ops.b, s.conditioning.flush_b),
    ]
    .into_iter()
    .enumerate()
    {
        ids.push(define_widen(&mut target, i, float, flush)?);
    }
    let shape = RunShape {
        k: inst.k(),
        group,
        flush_c: s.conditioning.flush_c,
        nan: inst.arithmetic.d.encode_nan().unwrap_or(0) as i64,
    };
    let run_id = define_run(&mut target, &shape)?;
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
    Ok(Built {
        memory: ModuleMemory(Some(module)),
        widen,
        run,
    })
}

/// `widen{which}(n, src, dst)`: each element's f32 bits, flushed to +0 when `flush`.
fn define_widen<M: Module>(
    target: &mut Target<'_, M>,
    which: usize,
    float: &FloatFormat,
    flush: bool,
) -> Result<cranelift_module::FuncId, String> {
    super::define(target, &format!("widen{which}"), (1, 2), |em, p| {
        let (head, body, exit) = (
            em.b.create_block(),
            em.b.create_block(),
            em.b.create_block(),
        );
        em.b.append_block_param(head, types::I64);
        let zero = em.b.ins().iconst(types::I64, 0);
        em.b.ins().jump(head, &[BlockArg::Value(zero)]);
        em.b.switch_to_block(head);
        let i = em.b.block_params(head)[0];
        let more = em.b.ins().icmp(IntCC::UnsignedLessThan, i, p[0]);
        em.b.ins().brif(more, body, &[], exit, &[]);
        em.b.switch_to_block(body);
        let src = em.b.ins().imul_imm_s(i, 8);
        let src = em.b.ins().iadd(p[1], src);
        let flags = MemFlagsData::new().with_notrap();
        let raw = em.b.ins().load(types::I64, flags.with_readonly(), src, 0);
        let value = sequential::to_native(em, float, Native::F32, raw, flush);
        let bits = em.b.ins().bitcast(types::I32, MemFlagsData::new(), value);
        let dst = em.b.ins().imul_imm_s(i, 4);
        let dst = em.b.ins().iadd(p[2], dst);
        em.b.ins().store(flags, bits, dst, 0);
        let next = em.b.ins().iadd_imm_s(i, 1);
        em.b.ins().jump(head, &[BlockArg::Value(next)]);
        em.b.switch_to_block(exit);
    })
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
    shape: &RunShape,
) -> Result<cranelift_module::FuncId, String> {
    super::define(target, "panel", (2, 4), |em, p| {
        let run_bytes = em.b.ins().imul_imm_s(p[1], (shape.k * LANES * 4) as i64);
        let args = RunArgs {
            steps: p[1],
            a: p[2],
            b: p[3],
            c: p[4],
            d: p[5],
            run_bytes,
        };
        super::column_rounds(em, p[0], &[4, 1], |em, j, vectors| {
            emit_columns(em, shape, &args, j, vectors)
        });
    })
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
    super::store_results(em, &sp[3..], shape.nan, dp);
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
