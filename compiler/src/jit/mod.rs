//! The Cranelift JIT: compiles each instruction of a checked [`Spec`] into native
//! dot-product-add kernels that give the interpreter's bits.
//!
//! [`compile`] takes a spec with the validator's [`SpecInfo`] (whose widths and grids the
//! lowering relies on), lowers every distinct arithmetic it can (instructions with equal
//! [`crate::ir::Arithmetic`] share one kernel) and records a [`JitError`] for each it
//! refuses, so that the interpreter runs it instead; a panic while building a kernel is
//! caught and becomes such a refusal. [`CompiledSpec::kernel`]
//! hands out a [`Kernel`] with three entries: one dot product ([`Kernel::dot`]), many
//! independent dot products per call ([`Kernel::batch`]) and a whole M x N x K
//! instruction ([`Kernel::mma`]). Kernels take raw encodings (`u64` per element) through
//! pointers; the ABI has only pointers and i64s. Every call runs under the IEEE default
//! floating-point control state (`fpenv`), whatever the embedder set.
//!
//! Lowerings: `fused` (fixed-point alignment in i64 or i128), `sequential` (native
//! f32/f64 steps), `integer`; shared instruction helpers in `emit`. Cranelift's IR
//! verifier runs on every kernel in debug builds (and so in tests).

mod composed;
mod emit;
pub(crate) mod fpenv;
mod fused;
mod integer;
pub mod panel;
mod sequential;
mod tables;

use crate::checked::{Checked, CheckedSpec};
use crate::engine::{EvalError, Operands};
use crate::ir::{Instruction, Shape};
use crate::valid::Kind;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{AbiParam, BlockArg, InstBuilder, MemFlagsData, UserFuncName, types};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{DataDescription, DataId, FuncId, Linkage, Module, default_libcall_names};
use fpenv::IeeeDefaults;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why an instruction (or the whole backend) could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", match instruction { Some(i) => format!("cannot JIT-compile `{i}`: "), None => "JIT: ".to_string() })]
pub struct JitError {
    /// The instruction, or `None` for a failure of the backend itself.
    pub instruction: Option<String>,
    pub message: String,
}

impl JitError {
    fn backend(message: impl Into<String>) -> JitError {
        JitError {
            instruction: None,
            message: message.into(),
        }
    }
    fn refused(inst: &Instruction, message: impl Into<String>) -> JitError {
        JitError {
            instruction: Some(inst.name.clone()),
            message: message.into(),
        }
    }
}

/// What [`compile_with`] should keep besides the code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Keep the Cranelift IR text of every kernel ([`CompiledSpec::clif`]).
    pub emit_clif: bool,
    /// Keep the machine code listing of every kernel's dot entry ([`CompiledSpec::asm`]).
    pub emit_asm: bool,
    /// Run Cranelift's IR verifier on every kernel (always on in debug builds).
    pub verify: bool,
    /// Compile for a short job (a conformance run of a few hundred cases per kernel):
    /// no optimisation passes and Cranelift's single-pass register allocator, about
    /// half the compile time for slower code. The arithmetic is the same.
    pub quick: bool,
}

type DotFn = unsafe extern "C" fn(u64, *const u64, *const u64, *const u64, *const u64) -> u64;
/// `batch(n, c, a, b, sa, sb, d, strides)`: `strides` points at four record strides, in
/// elements, of a, b, sa and sb (0 repeats one slice for every record).
type BatchFn = unsafe extern "C" fn(
    u64,
    *const u64,
    *const u64,
    *const u64,
    *const u64,
    *const u64,
    *mut u64,
    *const u64,
);

#[derive(Clone, Copy)]
pub(crate) struct Entry {
    dot: DotFn,
    batch: BatchFn,
    /// Run under flush-to-zero (same bits, no slow path for subnormal results).
    flush_to_zero: bool,
}

impl Entry {
    /// The batch entry over `c.len()` records, record i of an operand at `i * stride`
    /// elements (`strides`: a, b, sa, sb), in the floating-point environment it needs.
    ///
    /// # Safety
    /// Every record the strides reach, of the kernel's k elements of a and b and its
    /// scale count of sa and sb, lies inside its slice, and `d` holds `c.len()` results.
    unsafe fn batch(
        &self,
        c: &[u64],
        a: &[u64],
        b: &[u64],
        (sa, sb): (&[u64], &[u64]),
        d: &mut [u64],
        strides: [u64; 4],
    ) {
        let _fp = IeeeDefaults::enter(self.flush_to_zero);
        // SAFETY: the caller's promise above
        unsafe {
            (self.batch)(
                c.len() as u64,
                c.as_ptr(),
                a.as_ptr(),
                b.as_ptr(),
                sa.as_ptr(),
                sb.as_ptr(),
                d.as_mut_ptr(),
                strides.as_ptr(),
            )
        }
    }
}

/// A kernel's GEMM panel, once asked for.
type PanelCell = std::sync::OnceLock<Result<Arc<panel::Panel>, String>>;

/// What runs an arithmetic: native entries, or a composed kernel that calls others.
#[derive(Clone)]
pub(crate) enum Code {
    Native(Entry),
    Composed(std::sync::Arc<composed::ComposedKernel>),
}

impl Code {
    /// One dot product whose operand counts are checked.
    pub(crate) fn dot(&self, ops: &Operands) -> Result<u64, EvalError> {
        match self {
            Code::Native(entry) => {
                let _fp = IeeeDefaults::enter(entry.flush_to_zero);
                // SAFETY: the caller checked the operand counts against the kernel's k
                // and scale count; the code lives as long as the `CompiledSpec` the
                // caller's kernel borrows.
                Ok(unsafe {
                    (entry.dot)(
                        ops.c,
                        ops.a.as_ptr(),
                        ops.b.as_ptr(),
                        ops.sa.as_ptr(),
                        ops.sb.as_ptr(),
                    )
                })
            }
            Code::Composed(k) => k.dot(ops),
        }
    }

    /// `d[i] = dot(c[i], a[i*k..][..k], b[i*k..][..k])` for every i, with no scale
    /// factors: a composed kernel's run of an arithmetic whose k is `k` (the validator
    /// made the run's positions number exactly the arithmetic's k).
    pub(crate) fn batch(
        &self,
        k: usize,
        c: &[u64],
        a: &[u64],
        b: &[u64],
        d: &mut [u64],
    ) -> Result<(), EvalError> {
        let n = c.len();
        assert!(a.len() == n * k && b.len() == n * k && d.len() == n);
        match self {
            Code::Native(entry) => {
                // SAFETY: record i reads a[i*k..][..k] and b[i*k..][..k], inside the
                // slices (asserted above), and the kernel's k is `k`; it reads no scale
                // factors (none are taken by a run).
                unsafe { entry.batch(c, a, b, (&[], &[]), d, [k as u64, k as u64, 0, 0]) };
                Ok(())
            }
            Code::Composed(inner) => {
                inner.batch(c, (a, k), (b, k), d, &mut composed::Scratch::default())
            }
        }
    }
}

/// The memory of one JIT module: its machine code and data, freed when the last holder
/// (the [`CompiledSpec`] and every [`Kernel`] taken from it) is dropped.
struct ModuleMemory(Option<JITModule>);

impl Drop for ModuleMemory {
    fn drop(&mut self) {
        if let Some(m) = self.0.take() {
            // SAFETY: every function pointer into this memory is held by a `Code` inside a
            // `CompiledSpec` or a `Kernel`, each of which holds this memory's `Arc`: this
            // runs after the last of them is gone.
            unsafe { m.free_memory() };
        }
    }
}

// SAFETY: the module (whose memory provider and symbol table are not `Sync`) is touched
// only by `Drop`, which has it alone; everything else reads finalized, immutable machine
// code through function pointers.
unsafe impl Send for ModuleMemory {}
unsafe impl Sync for ModuleMemory {}

/// The native code of a spec. Each [`Kernel`] taken from it holds the code's memory too,
/// so a kernel outlives the `CompiledSpec` it came from; the memory is freed with the last.
pub struct CompiledSpec {
    memory: Arc<ModuleMemory>,
    codes: Vec<Code>,
    /// Per code: its GEMM panel, compiled when first asked for ([`Kernel::panel`]).
    panels: Vec<Arc<PanelCell>>,
    /// Instruction name -> its kernel (index into `codes`) or why it was refused.
    by_name: HashMap<String, Result<usize, JitError>>,
    shapes: HashMap<String, (Shape, usize, usize)>,
    clif: Vec<(String, String)>,
    asm: Vec<(String, String)>,
    /// Wall time of [`compile`], lowering and code generation included.
    pub compile_time: Duration,
}

impl std::fmt::Debug for CompiledSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledSpec")
            .field("kernels", &self.codes.len())
            .field("instructions", &self.by_name.len())
            .finish()
    }
}

impl CompiledSpec {
    /// The kernel of an instruction, or why it was not compiled.
    pub fn kernel(&self, name: &str) -> Result<Kernel, JitError> {
        match self.by_name.get(name) {
            None => Err(JitError {
                instruction: Some(name.to_string()),
                message: "no such instruction in the spec".into(),
            }),
            Some(Err(e)) => Err(e.clone()),
            Some(Ok(i)) => {
                let (shape, k, scales) = self.shapes[name];
                Ok(Kernel {
                    code: self.codes[*i].clone(),
                    panel: self.panels[*i].clone(),
                    _memory: self.memory.clone(),
                    name: name.into(),
                    shape,
                    k,
                    scales,
                })
            }
        }
    }
    /// Does the spec declare this instruction (compiled or refused)?
    pub fn has(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }
    /// Distinct kernels generated (instructions with the same arithmetic share one).
    pub fn kernel_count(&self) -> usize {
        self.codes.len()
    }
    /// Instructions compiled.
    pub fn compiled_count(&self) -> usize {
        self.by_name.values().filter(|r| r.is_ok()).count()
    }
    /// The instructions the backend refused, with the reason.
    pub fn refused(&self) -> Vec<&JitError> {
        let mut v: Vec<&JitError> = self
            .by_name
            .values()
            .filter_map(|r| r.as_ref().err())
            .collect();
        v.sort_by(|a, b| a.instruction.cmp(&b.instruction));
        v
    }
    /// The Cranelift IR of each kernel (label, text), if [`Options::emit_clif`] was set.
    pub fn clif(&self) -> &[(String, String)] {
        &self.clif
    }
    /// The machine code of each kernel's dot entry, if [`Options::emit_asm`] was set.
    pub fn asm(&self) -> &[(String, String)] {
        &self.asm
    }
}

/// The compiled entries of one instruction, holding the memory of their code (so a
/// kernel lives on its own, as long as it is needed). `Send + Sync`: the code is
/// finalized, immutable machine code that reads its arguments and writes only its output.
#[derive(Clone)]
pub struct Kernel {
    code: Code,
    panel: Arc<PanelCell>,
    /// Keeps the code's memory (and the code of the kernels a composed one calls).
    _memory: Arc<ModuleMemory>,
    name: Arc<str>,
    shape: Shape,
    k: usize,
    scales: usize,
}

impl Kernel {
    pub fn k(&self) -> usize {
        self.k
    }
    /// The GEMM panel of the kernel's arithmetic ([`panel`]), compiled on first use for
    /// `checked` (an instruction of this arithmetic), or why it has none.
    pub(crate) fn panel(&self, checked: Checked) -> Result<Arc<panel::Panel>, String> {
        self.panel
            .get_or_init(|| panel::compile(checked).map(Arc::new))
            .clone()
    }
    /// Scale factors per dot product and operand (0 without block scales).
    pub fn scale_count(&self) -> usize {
        self.scales
    }

    fn count_error(&self, operand: &'static str, got: usize, want: usize) -> EvalError {
        EvalError::OperandCount {
            instruction: self.name.to_string(),
            operand,
            got,
            want,
        }
    }

    /// One dot-product-add, like [`crate::interp::run`].
    pub fn dot(&self, ops: &Operands) -> Result<u64, EvalError> {
        for (operand, got, want) in [
            ("a", ops.a.len(), self.k),
            ("b", ops.b.len(), self.k),
            ("sa", ops.sa.len(), self.scales),
            ("sb", ops.sb.len(), self.scales),
        ] {
            if got != want {
                return Err(self.count_error(operand, got, want));
            }
        }
        // the kernel reads exactly k elements of a and b and `scales` of sa and sb,
        // whose lengths were just checked
        self.code.dot(ops)
    }

    /// `d[i] = dot(c[i], a[i*k..], b[i*k..], sa[i*s..], sb[i*s..])` for every i, in one call.
    pub fn batch(
        &self,
        c: &[u64],
        a: &[u64],
        b: &[u64],
        sa: &[u64],
        sb: &[u64],
        d: &mut [u64],
    ) -> Result<(), EvalError> {
        let (k, s) = (self.k, self.scales);
        self.batch_strided(c, (a, k), (b, k), (sa, s), (sb, s), d)
    }

    /// Like [`Kernel::batch`], with each operand's record stride (in elements) given: record
    /// i reads `a[i*stride..][..k]`. A stride of 0 repeats one slice for every record (a
    /// row of A against many columns of B, with no copies).
    pub fn batch_strided(
        &self,
        c: &[u64],
        (a, a_stride): (&[u64], usize),
        (b, b_stride): (&[u64], usize),
        (sa, sa_stride): (&[u64], usize),
        (sb, sb_stride): (&[u64], usize),
        d: &mut [u64],
    ) -> Result<(), EvalError> {
        let n = c.len();
        // the last record must lie inside each operand: (n - 1) * stride + len, computed
        // with checked arithmetic (a wrapped bound would let the kernel read anywhere)
        let need = |stride: usize, len: usize| -> Option<usize> {
            if n == 0 {
                Some(0)
            } else {
                (n - 1).checked_mul(stride)?.checked_add(len)
            }
        };
        for (operand, got, stride, len) in [
            ("a", a.len(), a_stride, self.k),
            ("b", b.len(), b_stride, self.k),
            ("sa", sa.len(), sa_stride, self.scales),
            ("sb", sb.len(), sb_stride, self.scales),
        ] {
            match need(stride, len) {
                Some(want) if got >= want => {}
                Some(want) => return Err(self.count_error(operand, got, want)),
                None => {
                    return Err(EvalError::Stride {
                        instruction: self.name.to_string(),
                        operand,
                        records: n,
                        stride,
                    });
                }
            }
            // the kernel forms byte offsets i * stride * 8 in 64 bits
            if stride
                .checked_mul(8)
                .and_then(|b| b.checked_mul(n))
                .is_none()
            {
                return Err(EvalError::Stride {
                    instruction: self.name.to_string(),
                    operand,
                    records: n,
                    stride,
                });
            }
        }
        if d.len() != n {
            return Err(self.count_error("d", d.len(), n));
        }
        let entry = match &self.code {
            Code::Native(entry) => entry,
            Code::Composed(k) => {
                // (a composed instruction takes no scale factors)
                let mut scratch = composed::Scratch::default();
                return k.batch(c, (a, a_stride), (b, b_stride), d, &mut scratch);
            }
        };
        let strides = [
            a_stride as u64,
            b_stride as u64,
            sa_stride as u64,
            sb_stride as u64,
        ];
        // SAFETY: every record read lies inside its slice (checked above, without
        // overflow); the batch entry reads n records and writes n results.
        unsafe { entry.batch(c, a, b, (sa, sb), d, strides) };
        Ok(())
    }

    /// A whole instruction: `A` is M x K and `B` is K x N (row-major), `C` is M x N;
    /// `sa` holds each row's scale factors (M x K/block), `sb` each column's (N x K/block).
    /// Returns D (M x N, row-major).
    pub fn mma(
        &self,
        a: &[u64],
        b: &[u64],
        c: &[u64],
        sa: &[u64],
        sb: &[u64],
    ) -> Result<Vec<u64>, EvalError> {
        let (m, n, k, s) = (
            self.shape.m as usize,
            self.shape.n as usize,
            self.k,
            self.scales,
        );
        for (operand, got, want) in [
            ("a", a.len(), m * k),
            ("b", b.len(), k * n),
            ("c", c.len(), m * n),
            ("sa", sa.len(), m * s),
            ("sb", sb.len(), n * s),
        ] {
            if got != want {
                return Err(self.count_error(operand, got, want));
            }
        }
        // B's columns, contiguous
        let mut bt = vec![0u64; n * k];
        for kk in 0..k {
            for j in 0..n {
                bt[j * k + kk] = b[kk * n + j];
            }
        }
        let mut d = vec![0u64; m * n];
        for i in 0..m {
            for j in 0..n {
                d[i * n + j] = self.dot(&Operands {
                    c: c[i * n + j],
                    a: &a[i * k..(i + 1) * k],
                    b: &bt[j * k..(j + 1) * k],
                    sa: &sa[i * s..(i + 1) * s],
                    sb: &sb[j * s..(j + 1) * s],
                })?;
            }
        }
        Ok(d)
    }
}

/// The batch entry's operands: the record count, c's and d's arrays, and each other
/// operand's base and record stride in bytes.
struct BatchArgs {
    n: cranelift_codegen::ir::Value,
    c: cranelift_codegen::ir::Value,
    a: (cranelift_codegen::ir::Value, cranelift_codegen::ir::Value),
    b: (cranelift_codegen::ir::Value, cranelift_codegen::ir::Value),
    sa: (cranelift_codegen::ir::Value, cranelift_codegen::ir::Value),
    sb: (cranelift_codegen::ir::Value, cranelift_codegen::ir::Value),
    d: cranelift_codegen::ir::Value,
}

/// The batch entry's loop over groups of [`fused::records::RECORDS`] records, each
/// computed in lanes ([`fused::records::group`]), or record by record through the dot
/// entry if an input is a NaN or an infinity. `head` (parameter: the group's first
/// record) goes on to `rest` (the record-by-record loop) when fewer than four are left.
#[allow(clippy::too_many_arguments)]
fn record_groups<M: Module>(
    b: &mut FunctionBuilder,
    target: &mut Target<'_, M>,
    inst: &Instruction,
    low: &Lowering,
    (f, p, rp): (&crate::ir::Fused, &fused::Plan, &fused::records::RecordPlan),
    dot_id: FuncId,
    ops: &BatchArgs,
    [head, rest]: [cranelift_codegen::ir::Block; 2],
) {
    use fused::records::RECORDS;
    let body = b.create_block();
    let fast = b.create_block();
    let slow = b.create_block();
    b.set_cold_block(slow);

    b.switch_to_block(head);
    let i = b.block_params(head)[0];
    let end = b.ins().iadd_imm_s(i, RECORDS as i64);
    let more = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, end, ops.n);
    b.ins().brif(more, body, &[], rest, &[BlockArg::Value(i)]);

    b.switch_to_block(body);
    let flags = MemFlagsData::trusted().with_readonly();
    // (the 16-byte accesses claim no alignment: records are 8-byte aligned, and an SSE
    // instruction that folds an aligned load would fault on them)
    let unaligned = MemFlagsData::new().with_notrap();
    let le = MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little);
    let at = |b: &mut FunctionBuilder, (base, step): (_, _), j: i64| {
        let r = b.ins().iadd_imm_s(i, j);
        let o = b.ins().imul(r, step);
        b.ins().iadd(base, o)
    };
    let a: [_; RECORDS] = std::array::from_fn(|j| at(b, ops.a, j as i64));
    let bs: [_; RECORDS] = std::array::from_fn(|j| at(b, ops.b, j as i64));
    let sa: [_; RECORDS] = std::array::from_fn(|j| at(b, ops.sa, j as i64));
    let sb: [_; RECORDS] = std::array::from_fn(|j| at(b, ops.sb, j as i64));
    let c_at = b.ins().imul_imm_s(i, 8);
    let c_at = b.ins().iadd(ops.c, c_at);
    let c_lo = b
        .ins()
        .load(types::I64X2, unaligned.with_readonly(), c_at, 0);
    let c_hi = b
        .ins()
        .load(types::I64X2, unaligned.with_readonly(), c_at, 16);
    let (codes, special) = {
        let mut em = emit::Emitter {
            b,
            w: low.width(),
            data: target,
        };
        let c_lo = em.b.ins().bitcast(types::I32X4, le, c_lo);
        let c_hi = em.b.ins().bitcast(types::I32X4, le, c_hi);
        let c = em.pick32(c_lo, c_hi, [0, 2, 4, 6]);
        fused::records::group(&mut em, inst, f, p, rp, c, (a, bs), (sa, sb))
    };
    b.ins().brif(special, slow, &[], fast, &[]);

    b.switch_to_block(fast);
    let d_at = b.ins().imul_imm_s(i, 8);
    let d_at = b.ins().iadd(ops.d, d_at);
    let lo = b.ins().uwiden_low(codes);
    let hi = b.ins().uwiden_high(codes);
    b.ins().store(unaligned, lo, d_at, 0);
    b.ins().store(unaligned, hi, d_at, 16);
    b.ins().jump(head, &[BlockArg::Value(end)]);

    // a NaN or an infinity: each record through the dot entry
    b.switch_to_block(slow);
    let callee = target.module.declare_func_in_func(dot_id, b.func);
    for j in 0..RECORDS as i64 {
        let c = b.ins().load(types::I64, flags, c_at, (j * 8) as i32);
        let args = [
            c,
            at(b, ops.a, j),
            at(b, ops.b, j),
            at(b, ops.sa, j),
            at(b, ops.sb, j),
        ];
        let call = b.ins().call(callee, &args);
        let d = b.inst_results(call)[0];
        let d_at = b.ins().imul_imm_s(i, 8);
        let d_at = b.ins().iadd(ops.d, d_at);
        b.ins()
            .store(MemFlagsData::trusted(), d, d_at, (j * 8) as i32);
    }
    b.ins().jump(head, &[BlockArg::Value(end)]);
}

/// How one instruction is lowered.
enum Lowering<'i> {
    Fused(&'i crate::ir::Fused, fused::Plan),
    Sequential(&'i crate::ir::Sequential, sequential::Plan),
    Integer(&'i crate::ir::IntegerDot, integer::Plan),
}

fn plan(checked: Checked<'_>) -> Result<Lowering<'_>, String> {
    let inst = checked.instruction();
    if inst.k() > MAX_UNROLLED_K {
        return Err(format!(
            "k = {} is more than the JIT unrolls ({MAX_UNROLLED_K})",
            inst.k()
        ));
    }
    let nan = match checked.kind() {
        Kind::Fused(f) => Some(f.pipeline.nan),
        Kind::Sequential(s) => Some(s.pipeline.nan),
        _ => None,
    };
    if let Some(rule @ crate::ir::NanPolicy::Propagate(_)) = nan {
        return Err(format!(
            "`nan {}` (an input NaN's payload in d) is not lowered by the JIT",
            rule.word()
        ));
    }
    Ok(match checked.kind() {
        Kind::Fused(f) => Lowering::Fused(&f.pipeline, fused::plan(inst, f)?),
        Kind::Sequential(s) => Lowering::Sequential(&s.pipeline, sequential::plan(inst, s)?),
        Kind::Integer(p) => Lowering::Integer(&p.pipeline, integer::plan(inst, p)?),
        Kind::Composed(_) => return Err("a composed pipeline is lowered step by step".into()),
    })
}

/// The largest k the JIT unrolls into straight-line code.
const MAX_UNROLLED_K: usize = 4096;

impl Lowering<'_> {
    /// The kernel gives the same bits, faster, under the host's flush-to-zero mode.
    fn flush_to_zero(&self) -> bool {
        matches!(self, Lowering::Sequential(_, p) if p.flush_to_zero)
    }
    fn width(&self) -> types::Type {
        match self {
            Lowering::Fused(_, p) => p.w,
            _ => types::I64,
        }
    }
}

/// Emit the dot product from the current block on (a fused kernel adds a cold block for
/// NaN/Inf inputs and a merge block); returns d (i64), valid in the block it ends in.
fn emit_dot(
    b: &mut FunctionBuilder,
    data: &mut dyn emit::DataSymbols,
    inst: &Instruction,
    low: &Lowering,
    c: cranelift_codegen::ir::Value,
    ptrs: &fused::Ptrs,
) -> cranelift_codegen::ir::Value {
    let mut em = emit::Emitter {
        b,
        w: low.width(),
        data,
    };
    match low {
        Lowering::Fused(f, p) => fused::emit(&mut em, inst, f, p, c, ptrs),
        Lowering::Sequential(s, p) => sequential::emit(&mut em, inst, s, p, c, ptrs.a, ptrs.b),
        Lowering::Integer(p, plan) => integer::emit(&mut em, inst, p, plan, c, ptrs.a, ptrs.b),
    }
}

/// The code generator for this host. `object`: for an object file or shared library
/// (position-independent code, inline stack probes for large frames) rather than the JIT.
pub(crate) fn host_isa(
    options: Options,
    object: bool,
) -> Result<std::sync::Arc<dyn cranelift_codegen::isa::TargetIsa>, JitError> {
    let mut flags = settings::builder();
    let set = |flags: &mut settings::Builder, k: &str, v: &str| {
        flags
            .set(k, v)
            .map_err(|e| JitError::backend(format!("setting {k}: {e}")))
    };
    if options.quick {
        set(&mut flags, "opt_level", "none")?;
        set(&mut flags, "regalloc_algorithm", "single_pass")?;
    } else {
        set(&mut flags, "opt_level", "speed")?;
    }
    set(&mut flags, "use_colocated_libcalls", "false")?;
    // the verifier costs about a tenth of the compile time: on in debug builds (so in
    // every test) and on request, off in release
    let verify = cfg!(debug_assertions) || options.verify;
    set(
        &mut flags,
        "enable_verifier",
        if verify { "true" } else { "false" },
    )?;
    set(&mut flags, "is_pic", if object { "true" } else { "false" })?;
    if object {
        set(&mut flags, "enable_probestack", "true")?;
        set(&mut flags, "probestack_strategy", "inline")?;
    }
    cranelift_native::builder()
        .map_err(|e| JitError::backend(format!("this host is not supported: {e}")))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| JitError::backend(format!("cannot configure the code generator: {e}")))
}

/// The address space reserved for one module's code and data (committed only as used).
/// Code reaches its constants and decoding tables with 32-bit PC-relative offsets, so
/// everything a module holds must lie within 2 GiB: in one reservation it does. (With a
/// separate mapping per allocation, the stacks of hundreds of threads came to lie between
/// a module's code and its data, and linking panicked in cranelift-jit.)
const MODULE_ARENA_BYTES: usize = 1 << 30;

fn new_module(options: Options) -> Result<JITModule, JitError> {
    let mut builder = JITBuilder::with_isa(host_isa(options, false)?, default_libcall_names());
    let arena = cranelift_jit::ArenaMemoryProvider::new_with_size(MODULE_ARENA_BYTES)
        .map_err(|e| JitError::backend(format!("cannot reserve memory for machine code: {e}")))?;
    builder.memory_provider(Box::new(arena));
    Ok(JITModule::new(builder))
}

/// Compile every instruction of a checked spec. Instructions the backend cannot lower are
/// recorded with the reason ([`CompiledSpec::kernel`] returns it); only a failure of the
/// backend itself is an error here.
pub fn compile(spec: &CheckedSpec) -> Result<CompiledSpec, JitError> {
    compile_with(spec, Options::default())
}

/// One job per distinct arithmetic of a spec, lowered for its first instruction, and for
/// each arithmetic (by index) its job.
pub(crate) fn plan_jobs(spec: &CheckedSpec) -> (Vec<Checked<'_>>, Vec<usize>) {
    let info = spec.info();
    let jobs = spec.distinct().map(|(_, c)| c).collect();
    let mut job_of_arithmetic = vec![0; info.arithmetic_count()];
    for (job, (i, _)) in spec.distinct().enumerate() {
        job_of_arithmetic[info.arithmetic_index(i)] = job;
    }
    (jobs, job_of_arithmetic)
}

/// [`compile`] with options. Kernels are lowered to Cranelift IR one by one, compiled to
/// machine code on every available core (at most 4 threads), and defined in one module.
pub fn compile_with(spec: &CheckedSpec, options: Options) -> Result<CompiledSpec, JitError> {
    let (jobs, job_of_arithmetic) = plan_jobs(spec);
    let info = spec.info();
    let members = spec
        .spec()
        .instructions
        .iter()
        .enumerate()
        .map(|(i, inst)| (inst, job_of_arithmetic[info.arithmetic_index(i)]));
    compile_jobs(&jobs, members, options)
}

/// Compile one checked instruction on its own.
pub fn compile_instruction(inst: Checked) -> Result<CompiledSpec, JitError> {
    compile_instruction_with(inst, Options::default())
}

/// [`compile_instruction`] with options ([`Options::quick`] for a kernel that runs a few
/// thousand cases, such as a candidate of `mmac infer`).
pub fn compile_instruction_with(inst: Checked, options: Options) -> Result<CompiledSpec, JitError> {
    let c = compile_jobs(&[inst], std::iter::once((inst.instruction(), 0)), options)?;
    c.kernel(inst.name())?;
    Ok(c)
}

/// Plan and build one kernel, turning a panic into a refusal (the last line of defence:
/// the validator should have rejected whatever makes a lowering panic).
fn lower<M: Module>(
    target: &mut Target<'_, M>,
    fctx: &mut FunctionBuilderContext,
    inst: Checked,
    index: usize,
) -> Result<Pending, String> {
    let built = catch_unwind(AssertUnwindSafe(|| {
        let low = plan(inst)?;
        build_kernel(target, fctx, inst.instruction(), &low, index)
    }));
    built.unwrap_or_else(|panic| {
        // the builder context may hold a half-built function
        *fctx = FunctionBuilderContext::new();
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(format!(
            "internal error: the JIT panicked while lowering it ({what}); the interpreter \
             computes it; please report this spec"
        ))
    })
}

/// How a job was lowered: a native kernel (an index into the pending kernels), or a
/// composed kernel whose runs were lowered in turn.
pub(crate) enum Lowered {
    Native(usize),
    Composed(Box<ComposedPlan>),
}

/// A composed kernel before its runs' code exists.
pub(crate) struct ComposedPlan {
    name: String,
    k: usize,
    converters: [composed::Converter; 3],
    c_format: crate::format::Format,
    d: crate::format::Format,
    steps: Vec<PlannedStep>,
    formats: Vec<crate::format::Format>,
    result: crate::ir::StepValue,
}

enum PlannedStep {
    Run {
        lowered: Result<std::rc::Rc<Lowered>, String>,
        positions: Vec<u32>,
        c: crate::ir::StepValue,
        c_format: crate::format::Format,
    },
    Add {
        x: crate::ir::StepValue,
        y: crate::ir::StepValue,
        op: crate::ir::RoundedOp,
    },
    Fma {
        x: crate::ir::StepValue,
        y: crate::ir::StepValue,
        z: crate::ir::StepValue,
        op: crate::ir::RoundedOp,
    },
}

/// Where kernels are built: a module (the JIT's, or an object file's), the data objects of
/// the tables defined in it so far, and the prefix of the kernels' (local) symbol names.
pub(crate) struct Target<'m, M: Module> {
    pub module: &'m mut M,
    tables: HashMap<usize, DataId>,
    /// Reach the tables with PC-relative addresses (an object file, where the linker
    /// places them); the JIT uses absolute ones, wherever its memory lies.
    near: bool,
    pub prefix: String,
}

impl<'m, M: Module> Target<'m, M> {
    pub fn new(module: &'m mut M, near: bool, prefix: &str) -> Target<'m, M> {
        Target {
            module,
            tables: HashMap::new(),
            near,
            prefix: prefix.to_string(),
        }
    }
}

impl<M: Module> emit::DataSymbols for Target<'_, M> {
    fn table(
        &mut self,
        func: &mut cranelift_codegen::ir::Function,
        table: &'static [u64],
    ) -> cranelift_codegen::ir::GlobalValue {
        let key = table.as_ptr() as usize;
        let id = match self.tables.get(&key) {
            Some(id) => *id,
            None => {
                let name = format!("{}table{}", self.prefix, self.tables.len());
                let id = self
                    .module
                    .declare_data(&name, Linkage::Local, false, false)
                    .expect("a fresh local data name");
                let mut desc = DataDescription::new();
                desc.set_align(8);
                desc.define(table.iter().flat_map(|e| e.to_le_bytes()).collect());
                self.module
                    .define_data(id, &desc)
                    .expect("a declared data object is defined once");
                self.tables.insert(key, id);
                id
            }
        };
        let name = func.declare_imported_user_function(cranelift_codegen::ir::UserExternalName {
            namespace: 1,
            index: id.as_u32(),
        });
        func.create_global_value(cranelift_codegen::ir::GlobalValueData::Symbol {
            name: cranelift_codegen::ir::ExternalName::user(name),
            offset: cranelift_codegen::ir::immediates::Imm64::new(0),
            colocated: self.near,
            tls: false,
        })
    }
}

/// Lowering the jobs: where, the kernels built so far, and the arithmetic of composed runs
/// already lowered (each once).
pub(crate) struct Jobs<'t, 'm, M: Module> {
    target: &'t mut Target<'m, M>,
    fctx: FunctionBuilderContext,
    kernels: Vec<Pending>,
    clif: Vec<(String, String)>,
    options: Options,
    runs: HashMap<crate::ir::Arithmetic, Result<std::rc::Rc<Lowered>, String>>,
}

impl<M: Module> Jobs<'_, '_, M> {
    /// Lower one instruction: native code, or a composed kernel over lowered runs.
    fn job(&mut self, checked: Checked) -> Result<Lowered, String> {
        let inst = checked.instruction();
        let Kind::Composed(composed) = checked.kind() else {
            let index = self.kernels.len();
            let k = lower(self.target, &mut self.fctx, checked, index)?;
            if self.options.emit_clif {
                self.clif.push((
                    format!("{} (dot{index})", inst.name),
                    k.dot.1.display().to_string(),
                ));
                if k.records {
                    self.clif.push((
                        format!("{} (batch{index})", inst.name),
                        k.batch.1.display().to_string(),
                    ));
                }
            }
            self.kernels.push(k);
            return Ok(Lowered::Native(index));
        };
        if inst.k() > MAX_UNROLLED_K {
            return Err(format!(
                "k = {} is more than the JIT handles ({MAX_UNROLLED_K})",
                inst.k()
            ));
        }
        let (c, runs) = (&composed.pipeline, &composed.runs);
        let ar = &inst.arithmetic;
        let c_format = c.convert_c.as_ref().map_or(&ar.c, |x| &x.format).clone();
        let mut steps = vec![];
        let mut formats = vec![];
        for (i, step) in c.steps.iter().enumerate() {
            formats.push(c.step_format(i).clone());
            steps.push(match step {
                crate::ir::Step::Run {
                    arithmetic,
                    positions,
                    c: cv,
                } => {
                    let lowered = match self.runs.get(arithmetic.as_ref()) {
                        Some(l) => l.clone(),
                        None => {
                            let (name, provenance) = inst
                                .provenance
                                .steps
                                .get(i)
                                .and_then(|p| p.run.clone())
                                .unwrap_or_else(|| {
                                    (format!("{}.run{i}", inst.name), Box::default())
                                });
                            let sub = Instruction {
                                name: name.clone(),
                                m: 1,
                                n: 1,
                                arithmetic: arithmetic.as_ref().clone(),
                                sparsity: None,
                                provenance: *provenance,
                            };
                            // (the validator gives every run its info, at its step)
                            let sub_info = runs
                                .get(i)
                                .and_then(Option::as_ref)
                                .ok_or("a run without validation info")?;
                            let l = self
                                .job(Checked::new(&sub, sub_info))
                                .map(std::rc::Rc::new)
                                .map_err(|e| format!("its step `{name}`: {e}"));
                            self.runs.insert(arithmetic.as_ref().clone(), l.clone());
                            l
                        }
                    };
                    PlannedStep::Run {
                        lowered,
                        positions: positions.clone(),
                        c: *cv,
                        c_format: arithmetic.c.clone(),
                    }
                }
                crate::ir::Step::Add { x, y, op } => PlannedStep::Add {
                    x: *x,
                    y: *y,
                    op: op.clone(),
                },
                crate::ir::Step::Fma { x, y, z, op } => PlannedStep::Fma {
                    x: *x,
                    y: *y,
                    z: *z,
                    op: op.clone(),
                },
            });
        }
        Ok(Lowered::Composed(Box::new(ComposedPlan {
            name: inst.name.clone(),
            k: inst.k(),
            converters: [
                composed::Converter::new(&ar.a, c.convert_a.as_ref()),
                composed::Converter::new(&ar.b, c.convert_b.as_ref()),
                composed::Converter::new(&ar.c, c.convert_c.as_ref()),
            ],
            c_format,
            d: ar.d.clone(),
            steps,
            formats,
            result: c.result,
        })))
    }
}

/// The code of a lowered job once the module is finalized (`entries`: each pending
/// kernel's entries, or why it could not be defined).
fn materialize(l: &Lowered, entries: &[Result<Entry, String>]) -> Result<Code, String> {
    match l {
        Lowered::Native(i) => entries[*i].clone().map(Code::Native),
        Lowered::Composed(p) => {
            let mut steps = Vec::with_capacity(p.steps.len());
            for s in &p.steps {
                steps.push(match s {
                    PlannedStep::Run {
                        lowered,
                        positions,
                        c,
                        c_format,
                    } => composed::KernelStep::Run {
                        code: materialize(lowered.as_ref().map_err(Clone::clone)?, entries)?,
                        positions: positions.clone(),
                        c: *c,
                        c_format: c_format.clone(),
                    },
                    PlannedStep::Add { x, y, op } => composed::KernelStep::Add {
                        x: *x,
                        y: *y,
                        op: op.clone(),
                    },
                    PlannedStep::Fma { x, y, z, op } => composed::KernelStep::Fma {
                        x: *x,
                        y: *y,
                        z: *z,
                        op: op.clone(),
                    },
                });
            }
            let [a, b, c] = &p.converters;
            let native = composed::native_ops(&steps, &p.formats, &p.c_format);
            Ok(Code::Composed(std::sync::Arc::new(
                composed::ComposedKernel {
                    name: p.name.clone(),
                    k: p.k,
                    a: a.clone(),
                    b: b.clone(),
                    c: c.clone(),
                    c_format: p.c_format.clone(),
                    d: p.d.clone(),
                    steps,
                    native,
                    formats: p.formats.clone(),
                    result: p.result,
                },
            )))
        }
    }
}

/// The kernels of some jobs, built and defined in a module.
pub(crate) struct Built {
    /// Per job: how it was lowered, or why it was refused.
    pub outcome: Vec<Result<Lowered, String>>,
    /// Per native kernel: its dot and batch functions, or why they could not be defined.
    pub ids: Vec<Result<(FuncId, FuncId), String>>,
    /// Per native kernel: whether it may run under flush-to-zero
    /// ([`Lowering::flush_to_zero`]).
    pub flush_to_zero: Vec<bool>,
    pub clif: Vec<(String, String)>,
    pub asm: Vec<(String, String)>,
}

/// Lower `jobs` (a representative instruction and its info each) in `target`, generate
/// their machine code on every available core (at most 4 threads), and define it in the
/// module. The same code serves the JIT and object files.
pub(crate) fn build_jobs<M: Module>(
    target: &mut Target<'_, M>,
    jobs: &[Checked],
    options: Options,
) -> Built {
    let mut lowering = Jobs {
        target,
        fctx: FunctionBuilderContext::new(),
        kernels: vec![],
        clif: vec![],
        options,
        runs: HashMap::new(),
    };
    let outcome: Vec<Result<Lowered, String>> =
        jobs.iter().map(|&inst| lowering.job(inst)).collect();
    let (kernels, clif) = (lowering.kernels, lowering.clif);
    let module = &mut *target.module;

    // machine code, in parallel
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4)
        .min(kernels.len().max(1));
    let isa = module.isa();
    let compiled: Vec<Result<(MachineCode, MachineCode), String>> = if threads <= 1 {
        // (one kernel, as a command that runs one instruction compiles: its dot and batch
        // functions side by side where there is a second core)
        let beside =
            kernels.len() == 1 && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
        kernels
            .iter()
            .map(|k| match beside {
                true => compile_kernel_beside(isa, k, options.emit_asm),
                false => compile_kernel(isa, k, options.emit_asm),
            })
            .collect()
    } else {
        let mut out: Vec<Option<Result<(MachineCode, MachineCode), String>>> =
            (0..kernels.len()).map(|_| None).collect();
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let kernels = &kernels;
                    scope.spawn(move || {
                        (t..kernels.len())
                            .step_by(threads)
                            .map(|i| (i, compile_kernel(isa, &kernels[i], options.emit_asm)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            // a worker that panicked leaves its kernels unset: they are refused below
            for results in handles.into_iter().filter_map(|h| h.join().ok()) {
                for (i, r) in results {
                    out[i] = Some(r);
                }
            }
        });
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err("the code generator failed".into())))
            .collect()
    };

    let mut ids: Vec<Result<(FuncId, FuncId), String>> = vec![];
    let mut asm = vec![];
    for (k, code) in kernels.iter().zip(compiled) {
        ids.push(code.and_then(|(dot, batch)| {
            let define =
                |e: cranelift_module::ModuleError| format!("cannot define the kernel: {e}");
            module
                .define_function_bytes(k.dot.0, dot.align, &dot.bytes, &dot.relocs)
                .map_err(define)?;
            module
                .define_function_bytes(k.batch.0, batch.align, &batch.bytes, &batch.relocs)
                .map_err(define)?;
            if let Some(text) = dot.asm {
                asm.push((k.label.clone(), text));
            }
            if let Some(text) = batch.asm {
                asm.push((format!("{} (batch)", k.label), text));
            }
            Ok((k.dot.0, k.batch.0))
        }));
    }
    Built {
        outcome,
        ids,
        flush_to_zero: kernels.iter().map(|k| k.flush_to_zero).collect(),
        clif,
        asm,
    }
}

/// Compile the kernels of `jobs` (a representative instruction and its info each);
/// `members` gives every instruction and the job whose kernel it uses.
fn compile_jobs<'s>(
    jobs: &[Checked],
    members: impl Iterator<Item = (&'s Instruction, usize)>,
    options: Options,
) -> Result<CompiledSpec, JitError> {
    let started = Instant::now();
    let mut module = new_module(options)?;
    let Built {
        outcome,
        ids,
        flush_to_zero,
        clif,
        asm,
    } = build_jobs(&mut Target::new(&mut module, false, ""), jobs, options);
    module
        .finalize_definitions()
        .map_err(|e| JitError::backend(format!("cannot finalize the code: {e}")))?;
    let entries: Vec<Result<Entry, String>> = ids
        .into_iter()
        .zip(flush_to_zero)
        .map(|(r, flush_to_zero)| {
            r.map(|(d, b)| {
                let dp = module.get_finalized_function(d);
                let bp = module.get_finalized_function(b);
                // SAFETY: the functions were defined with exactly these signatures.
                unsafe {
                    Entry {
                        dot: std::mem::transmute::<*const u8, DotFn>(dp),
                        batch: std::mem::transmute::<*const u8, BatchFn>(bp),
                        flush_to_zero,
                    }
                }
            })
        })
        .collect();
    let mut codes = vec![];
    let mut of_job: Vec<Result<usize, String>> = vec![];
    for o in &outcome {
        of_job.push(
            o.as_ref()
                .map_err(Clone::clone)
                .and_then(|l| materialize(l, &entries))
                .map(|code| {
                    codes.push(code);
                    codes.len() - 1
                }),
        );
    }
    let mut by_name: HashMap<String, Result<usize, JitError>> = HashMap::new();
    let mut shapes = HashMap::new();
    for (inst, job) in members {
        shapes.insert(
            inst.name.clone(),
            (inst.shape(), inst.k(), inst.scale_count()),
        );
        let r = of_job[job]
            .clone()
            .map_err(|message| JitError::refused(inst, message));
        by_name.insert(inst.name.clone(), r);
    }
    Ok(CompiledSpec {
        memory: Arc::new(ModuleMemory(Some(module))),
        panels: codes.iter().map(|_| Arc::default()).collect(),
        codes,
        by_name,
        shapes,
        clif,
        asm,
        compile_time: started.elapsed(),
    })
}

/// A kernel's two functions in Cranelift IR, declared in the module, not yet compiled.
struct Pending {
    label: String,
    /// See [`Lowering::flush_to_zero`].
    flush_to_zero: bool,
    dot: (FuncId, cranelift_codegen::ir::Function),
    batch: (FuncId, cranelift_codegen::ir::Function),
    /// The batch entry computes groups of records in lanes ([`record_groups`]): its code
    /// is a kernel of its own, shown beside the dot entry's by `--emit clif` and `asm`.
    records: bool,
}

/// Machine code of one function, ready for `define_function_bytes`.
struct MachineCode {
    bytes: Vec<u8>,
    align: u64,
    relocs: Vec<cranelift_module::ModuleReloc>,
    asm: Option<String>,
}

fn compile_function(
    isa: &dyn cranelift_codegen::isa::TargetIsa,
    id: FuncId,
    func: &cranelift_codegen::ir::Function,
    want_asm: bool,
) -> Result<MachineCode, String> {
    let mut ctx = cranelift_codegen::Context::for_function(func.clone());
    ctx.set_disasm(want_asm);
    let mut plane = cranelift_codegen::control::ControlPlane::default();
    ctx.compile(isa, &mut plane)
        .map_err(|e| format!("code generation failed: {:?}", e.inner))?;
    let code = ctx
        .compiled_code()
        .ok_or_else(|| "code generation produced no code".to_string())?;
    let align = (code.buffer.alignment as u64)
        .max(isa.function_alignment().minimum as u64)
        .max(isa.symbol_alignment());
    let bytes = code.code_buffer().to_vec();
    let asm = if want_asm { code.vcode.clone() } else { None };
    let relocs = code
        .buffer
        .relocs()
        .iter()
        .map(|r| cranelift_module::ModuleReloc::from_mach_reloc(r, &ctx.func, id))
        .collect();
    Ok(MachineCode {
        bytes,
        align,
        relocs,
        asm,
    })
}

fn compile_kernel(
    isa: &dyn cranelift_codegen::isa::TargetIsa,
    k: &Pending,
    want_asm: bool,
) -> Result<(MachineCode, MachineCode), String> {
    Ok((
        compile_function(isa, k.dot.0, &k.dot.1, want_asm)?,
        compile_function(isa, k.batch.0, &k.batch.1, want_asm && k.records)?,
    ))
}

/// [`compile_kernel`], the dot function on a second thread while this one compiles the
/// batch function (a thread that cannot start: the dot function compiled here; one that
/// panics: refused as the code generator's failure, or, where the batch function failed
/// first, its panic passed on, as the compile one after the other would).
fn compile_kernel_beside(
    isa: &dyn cranelift_codegen::isa::TargetIsa,
    k: &Pending,
    want_asm: bool,
) -> Result<(MachineCode, MachineCode), String> {
    std::thread::scope(|scope| {
        let dot = std::thread::Builder::new()
            .spawn_scoped(scope, || compile_function(isa, k.dot.0, &k.dot.1, want_asm));
        let batch = compile_function(isa, k.batch.0, &k.batch.1, want_asm && k.records)?;
        let dot = match dot {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|_| Err("the code generator failed".into()))?,
            Err(_) => compile_function(isa, k.dot.0, &k.dot.1, want_asm)?,
        };
        Ok((dot, batch))
    })
}

/// Declare a kernel's dot and batch functions and build their Cranelift IR.
fn build_kernel<M: Module>(
    target: &mut Target<'_, M>,
    fctx: &mut FunctionBuilderContext,
    inst: &Instruction,
    low: &Lowering,
    index: usize,
) -> Result<Pending, String> {
    let prefix = target.prefix.clone();
    let mut ctx = target.module.make_context();
    let ptr = target.module.target_config().pointer_type();

    // dot(c, a, b, sa, sb) -> d
    let mut sig = target.module.make_signature();
    sig.params.push(AbiParam::new(types::I64));
    for _ in 0..4 {
        sig.params.push(AbiParam::new(ptr));
    }
    sig.returns.push(AbiParam::new(types::I64));
    let dot_id = target
        .module
        .declare_function(&format!("{prefix}dot{index}"), Linkage::Local, &sig)
        .map_err(|e| e.to_string())?;
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, dot_id.as_u32());
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let p = b.block_params(entry).to_vec();
        let ptrs = fused::Ptrs {
            a: p[1],
            b: p[2],
            sa: p[3],
            sb: p[4],
        };
        let d = emit_dot(&mut b, target, inst, low, p[0], &ptrs);
        b.ins().return_(&[d]);
        b.seal_all_blocks();
        b.finalize(target.module.target_config());
    }
    let dot_fn = std::mem::replace(&mut ctx.func, cranelift_codegen::ir::Function::new());
    // batch(n, c, a, b, sa, sb, d, strides)
    let mut sig = target.module.make_signature();
    sig.params.push(AbiParam::new(types::I64));
    for _ in 0..7 {
        sig.params.push(AbiParam::new(ptr));
    }
    let batch_id = target
        .module
        .declare_function(&format!("{prefix}batch{index}"), Linkage::Local, &sig)
        .map_err(|e| e.to_string())?;
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, batch_id.as_u32());
    let has_records;
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
        let entry = b.create_block();
        let head = b.create_block();
        let body = b.create_block();
        let exit = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.append_block_param(head, types::I64);
        b.switch_to_block(entry);
        let p = b.block_params(entry).to_vec();
        let (n, cp, ap, bp, sap, sbp, dp) = (p[0], p[1], p[2], p[3], p[4], p[5], p[6]);
        // record strides in bytes, loaded once
        let stride = |b: &mut FunctionBuilder, slot: i32| {
            let e = b.ins().load(
                types::I64,
                MemFlagsData::trusted().with_readonly(),
                p[7],
                slot * 8,
            );
            b.ins().imul_imm_s(e, 8)
        };
        let (a_step, b_step, sa_step, sb_step) = (
            stride(&mut b, 0),
            stride(&mut b, 1),
            stride(&mut b, 2),
            stride(&mut b, 3),
        );
        let zero = b.ins().iconst(types::I64, 0);
        let records = match low {
            Lowering::Fused(f, p) => fused::records::record_plan(inst, f, p).map(|rp| (f, p, rp)),
            _ => None,
        };
        has_records = records.is_some();
        match records {
            // four records per round while four remain, then the rest one by one
            Some((f, p, rp)) => {
                let operands = BatchArgs {
                    n,
                    c: cp,
                    a: (ap, a_step),
                    b: (bp, b_step),
                    sa: (sap, sa_step),
                    sb: (sbp, sb_step),
                    d: dp,
                };
                let groups = b.create_block();
                b.append_block_param(groups, types::I64);
                b.ins().jump(groups, &[BlockArg::Value(zero)]);
                record_groups(
                    &mut b,
                    target,
                    inst,
                    low,
                    (f, p, &rp),
                    dot_id,
                    &operands,
                    [groups, head],
                );
            }
            None => {
                b.ins().jump(head, &[BlockArg::Value(zero)]);
            }
        }

        b.switch_to_block(head);
        let i = b.block_params(head)[0];
        let more = b.ins().icmp(IntCC::UnsignedLessThan, i, n);
        b.ins().brif(more, body, &[], exit, &[]);

        b.switch_to_block(body);
        let off = |b: &mut FunctionBuilder, base, per: i64| {
            let o = b.ins().imul_imm_s(i, per * 8);
            b.ins().iadd(base, o)
        };
        let c_at = off(&mut b, cp, 1);
        let c = b
            .ins()
            .load(types::I64, MemFlagsData::trusted().with_readonly(), c_at, 0);
        let at = |b: &mut FunctionBuilder, base, step| {
            let o = b.ins().imul(i, step);
            b.ins().iadd(base, o)
        };
        let args = [
            c,
            at(&mut b, ap, a_step),
            at(&mut b, bp, b_step),
            at(&mut b, sap, sa_step),
            at(&mut b, sbp, sb_step),
        ];
        // one copy of the kernel body: the batch loop calls the dot entry
        let callee = target.module.declare_func_in_func(dot_id, b.func);
        let call = b.ins().call(callee, &args);
        let d = b.inst_results(call)[0];
        let d_at = off(&mut b, dp, 1);
        b.ins().store(MemFlagsData::trusted(), d, d_at, 0);
        let next = b.ins().iadd_imm_s(i, 1);
        b.ins().jump(head, &[BlockArg::Value(next)]);

        b.switch_to_block(exit);
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(target.module.target_config());
    }
    Ok(Pending {
        label: inst.name.clone(),
        flush_to_zero: low.flush_to_zero(),
        dot: (dot_id, dot_fn),
        batch: (batch_id, ctx.func),
        records: has_records,
    })
}
