//! The C API inside an object: the table of instruction descriptors (a C struct whose
//! layout [`header`](super::header) declares) and the exported entries, written in
//! Cranelift IR: `find`, `count`, `at`, `dot`, `batch`, `mma` and `error`.
//!
//! Every entry that runs a kernel sets the IEEE default floating-point control state
//! (round to nearest, no FTZ/DAZ) around it when the caller's differs, as the JIT's
//! `fpenv` guard does, through two tiny machine-code helpers that read and write the
//! control register (MXCSR on x86-64, FPCR on AArch64).

use super::Present;
use crate::jit::fpenv;
use cranelift_codegen::Context;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    AbiParam, BlockArg, FuncRef, Function, GlobalValue, InstBuilder, MemFlagsData, Signature,
    StackSlotData, StackSlotKind, Type, UserFuncName, Value, types,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{DataDescription, DataId, FuncId, Linkage, Module, ModuleRelocTarget};
use cranelift_object::ObjectModule;

/// Field offsets of `mmac_<arch>_instruction` (every pointer 8 bytes, every count 4).
pub(crate) mod layout {
    pub const NAME: u32 = 0;
    pub const ARCH: u32 = 8;
    pub const M: u32 = 16;
    pub const N: u32 = 20;
    pub const K: u32 = 24;
    pub const SCALE_BLOCK: u32 = 28;
    pub const A: u32 = 32;
    pub const B: u32 = 40;
    pub const C: u32 = 48;
    pub const D: u32 = 56;
    pub const SCALE: u32 = 64;
    pub const A_BITS: u32 = 72;
    pub const B_BITS: u32 = 76;
    pub const C_BITS: u32 = 80;
    pub const D_BITS: u32 = 84;
    pub const SCALE_BITS: u32 = 88;
    pub const SCALE_COUNT: u32 = 92;
    pub const ALGORITHM: u32 = 96;
    pub const EVIDENCE: u32 = 104;
    pub const DOT: u32 = 112;
    pub const BATCH: u32 = 120;
    pub const SIZE: u32 = 128;
}

/// The error codes of the entries, with their messages (`mmac_<arch>_error`).
pub(crate) const ERRORS: [(&str, i64, &str); 4] = [
    ("MMAC_OK", 0, "success"),
    ("MMAC_ERR_NULL", 1, "a required pointer is NULL"),
    (
        "MMAC_ERR_SCALES",
        2,
        "the instruction is block-scaled: sa and sb are required",
    ),
    ("MMAC_ERR_NOMEM", 3, "out of memory"),
];
const ERR_NULL: i64 = 1;
const ERR_SCALES: i64 = 2;
const ERR_NOMEM: i64 = 3;

/// The machine code of the two control-register helpers for this host:
/// `read() -> u64` and `write(u64)`.
pub(crate) struct FpControl {
    read: &'static [u8],
    write: &'static [u8],
}

impl FpControl {
    pub(crate) fn host() -> Option<FpControl> {
        if cfg!(target_arch = "x86_64") {
            Some(FpControl {
                // sub rsp, 8; stmxcsr [rsp]; mov eax, [rsp]; add rsp, 8; ret
                read: &[
                    0x48, 0x83, 0xec, 0x08, 0x0f, 0xae, 0x1c, 0x24, 0x8b, 0x04, 0x24, 0x48, 0x83,
                    0xc4, 0x08, 0xc3,
                ],
                // sub rsp, 8; mov [rsp], edi; ldmxcsr [rsp]; add rsp, 8; ret
                write: &[
                    0x48, 0x83, 0xec, 0x08, 0x89, 0x3c, 0x24, 0x0f, 0xae, 0x14, 0x24, 0x48, 0x83,
                    0xc4, 0x08, 0xc3,
                ],
            })
        } else if cfg!(target_arch = "aarch64") {
            Some(FpControl {
                // mrs x0, fpcr; ret
                read: &[0x00, 0x44, 0x3b, 0xd5, 0xc0, 0x03, 0x5f, 0xd6],
                // msr fpcr, x0; ret
                write: &[0x00, 0x44, 0x1b, 0xd5, 0xc0, 0x03, 0x5f, 0xd6],
            })
        } else {
            None
        }
    }
}

/// Strings of the object, in one data object: each string NUL-terminated, at an offset.
struct Strings {
    bytes: Vec<u8>,
    at: std::collections::HashMap<String, u32>,
}

impl Strings {
    fn offset(&mut self, s: &str) -> u32 {
        if let Some(o) = self.at.get(s) {
            return *o;
        }
        let o = self.bytes.len() as u32;
        self.bytes.extend_from_slice(s.as_bytes());
        self.bytes.push(0);
        self.at.insert(s.to_string(), o);
        o
    }
}

/// The functions and data the entries use.
struct Refs {
    table: DataId,
    strings: DataId,
    count: i64,
    read_fp: FuncId,
    write_fp: FuncId,
    strcmp: FuncId,
    malloc: FuncId,
    free: FuncId,
}

/// Define the descriptor table and the exported entries in `module`.
pub(crate) fn define(
    module: &mut ObjectModule,
    prefix: &str,
    arch: &str,
    present: &[Present],
) -> Result<(), String> {
    let err = |e: cranelift_module::ModuleError| e.to_string();
    let ptr = module.target_config().pointer_type();
    let fp = FpControl::host().ok_or("no floating-point control helpers for this host")?;

    // strings and the descriptor table
    let mut strings = Strings {
        bytes: vec![],
        at: Default::default(),
    };
    let strings_id = module
        .declare_data(&format!("{prefix}strings"), Linkage::Local, false, false)
        .map_err(err)?;
    let table_id = module
        .declare_data(
            &format!("{prefix}instructions"),
            Linkage::Local,
            false,
            false,
        )
        .map_err(err)?;
    let mut table = DataDescription::new();
    table.set_align(8);
    let mut bytes = vec![0u8; present.len().max(1) * layout::SIZE as usize];
    let strings_gv = table.import_global_value(ModuleRelocTarget::user(1, strings_id.as_u32()));
    let mut string_fields = vec![];
    let mut function_fields = vec![];
    for (i, p) in present.iter().enumerate() {
        let base = i as u32 * layout::SIZE;
        let ar = &p.inst.arithmetic;
        let mut put32 = |field: u32, v: u32| {
            let at = (base + field) as usize;
            bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
        };
        put32(layout::M, p.inst.m);
        put32(layout::N, p.inst.n);
        put32(layout::K, ar.k);
        put32(
            layout::SCALE_BLOCK,
            ar.scale.as_ref().map_or(0, |s| s.block),
        );
        put32(layout::A_BITS, ar.a.storage_bits());
        put32(layout::B_BITS, ar.b.storage_bits());
        put32(layout::C_BITS, ar.c.storage_bits());
        put32(layout::D_BITS, ar.d.storage_bits());
        put32(
            layout::SCALE_BITS,
            ar.scale.as_ref().map_or(0, |s| s.format.storage_bits()),
        );
        put32(layout::SCALE_COUNT, ar.scale_count() as u32);
        for (field, s) in [
            (layout::NAME, Some(p.inst.name.as_str())),
            (layout::ARCH, Some(arch)),
            (layout::A, Some(ar.a.name.as_str())),
            (layout::B, Some(ar.b.name.as_str())),
            (layout::C, Some(ar.c.name.as_str())),
            (layout::D, Some(ar.d.name.as_str())),
            (
                layout::SCALE,
                ar.scale.as_ref().map(|s| s.format.name.as_str()),
            ),
            (layout::ALGORITHM, Some(super::algorithm(p.inst))),
        ] {
            if let Some(s) = s {
                string_fields.push((base + field, strings.offset(s)));
            }
        }
        string_fields.push((
            base + layout::EVIDENCE,
            strings.offset(&p.inst.provenance.evidence_words()),
        ));
        function_fields.push((base + layout::DOT, p.dot));
        function_fields.push((base + layout::BATCH, p.batch));
    }
    table.define(bytes.into_boxed_slice());
    for (at, offset) in string_fields {
        table.write_data_addr(at, strings_gv, offset as i64);
    }
    for (at, f) in function_fields {
        let r = table.import_function(ModuleRelocTarget::user(0, f.as_u32()));
        table.write_function_addr(at, r);
    }
    module.define_data(table_id, &table).map_err(err)?;
    let error_offsets: Vec<(i64, u32)> = ERRORS
        .iter()
        .map(|(_, code, message)| (*code, strings.offset(message)))
        .collect();
    let unknown = strings.offset("unknown error code");
    let mut desc = DataDescription::new();
    desc.define(strings.bytes.into_boxed_slice());
    module.define_data(strings_id, &desc).map_err(err)?;

    // the control-register helpers and the libc functions
    let call_conv = module.isa().default_call_conv();
    let sig = |params: &[Type], returns: &[Type]| {
        let mut s = Signature::new(call_conv);
        s.params.extend(params.iter().map(|t| AbiParam::new(*t)));
        s.returns.extend(returns.iter().map(|t| AbiParam::new(*t)));
        s
    };
    let read_fp = module
        .declare_function(
            &format!("{prefix}fp_read"),
            Linkage::Local,
            &sig(&[], &[types::I64]),
        )
        .map_err(err)?;
    let write_fp = module
        .declare_function(
            &format!("{prefix}fp_write"),
            Linkage::Local,
            &sig(&[types::I64], &[]),
        )
        .map_err(err)?;
    module
        .define_function_bytes(read_fp, 16, fp.read, &[])
        .map_err(err)?;
    module
        .define_function_bytes(write_fp, 16, fp.write, &[])
        .map_err(err)?;
    let import = |module: &mut ObjectModule, name: &str, s: Signature| {
        module
            .declare_function(name, Linkage::Import, &s)
            .map_err(err)
    };
    let refs = Refs {
        table: table_id,
        strings: strings_id,
        count: present.len() as i64,
        read_fp,
        write_fp,
        strcmp: import(module, "strcmp", sig(&[ptr, ptr], &[types::I32]))?,
        malloc: import(module, "malloc", sig(&[ptr], &[ptr]))?,
        free: import(module, "free", sig(&[ptr], &[]))?,
    };

    let mut fctx = FunctionBuilderContext::new();
    let mut export = |name: &str,
                      params: &[Type],
                      returns: &[Type],
                      body: &dyn Fn(&mut Entry)|
     -> Result<(), String> {
        let id = module
            .declare_function(
                &format!("{prefix}{name}"),
                Linkage::Export,
                &sig(params, returns),
            )
            .map_err(err)?;
        let mut ctx = Context::new();
        ctx.func =
            Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig(params, returns));
        {
            let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let block = b.create_block();
            b.append_block_params_for_function_params(block);
            b.switch_to_block(block);
            let args = b.block_params(block).to_vec();
            let mut e = Entry {
                b,
                module,
                refs: &refs,
                ptr,
                args,
            };
            body(&mut e);
            e.b.seal_all_blocks();
            e.b.finalize(module.target_config());
        }
        module
            .define_function(id, &mut ctx)
            .map_err(|e| format!("cannot compile the entry `{prefix}{name}`: {e:?}"))?;
        Ok(())
    };

    export("count", &[], &[ptr], &|e| {
        let n = e.b.ins().iconst(e.ptr, e.refs.count);
        e.b.ins().return_(&[n]);
    })?;
    export("at", &[ptr], &[ptr], &|e| {
        let i = e.args[0];
        let inside =
            e.b.ins()
                .icmp_imm_s(IntCC::UnsignedLessThan, i, e.refs.count);
        let d = e.descriptor(i);
        let null = e.b.ins().iconst(e.ptr, 0);
        let r = e.b.ins().select(inside, d, null);
        e.b.ins().return_(&[r]);
    })?;
    export("find", &[ptr], &[ptr], &|e| e.find())?;
    export(
        "dot",
        &[ptr, types::I64, ptr, ptr, ptr, ptr, ptr],
        &[types::I32],
        &|e| e.dot(),
    )?;
    export(
        "batch",
        &[ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr],
        &[types::I32],
        &|e| e.batch(),
    )?;
    export(
        "mma",
        &[ptr, ptr, ptr, ptr, ptr, ptr, ptr],
        &[types::I32],
        &|e| e.mma(),
    )?;
    export("error", &[types::I32], &[ptr], &|e| {
        let code = e.b.ins().sextend(types::I64, e.args[0]);
        let base = e.strings();
        let mut r = e.b.ins().iadd_imm_s(base, unknown as i64);
        for (c, offset) in &error_offsets {
            let is = e.b.ins().icmp_imm_s(IntCC::Equal, code, *c);
            let m = e.b.ins().iadd_imm_s(base, *offset as i64);
            r = e.b.ins().select(is, m, r);
        }
        e.b.ins().return_(&[r]);
    })?;
    Ok(())
}

/// One exported entry being built.
struct Entry<'a, 'f> {
    b: FunctionBuilder<'f>,
    module: &'a mut ObjectModule,
    refs: &'a Refs,
    ptr: Type,
    args: Vec<Value>,
}

impl Entry<'_, '_> {
    fn data(&mut self, id: DataId) -> Value {
        let gv: GlobalValue = self.module.declare_data_in_func(id, self.b.func);
        self.b.ins().symbol_value(self.ptr, gv)
    }

    fn strings(&mut self) -> Value {
        self.data(self.refs.strings)
    }

    fn func(&mut self, id: FuncId) -> FuncRef {
        self.module.declare_func_in_func(id, self.b.func)
    }

    /// The address of descriptor `i` (no bounds check).
    fn descriptor(&mut self, i: Value) -> Value {
        let table = self.data(self.refs.table);
        let off = self.b.ins().imul_imm_s(i, layout::SIZE as i64);
        self.b.ins().iadd(table, off)
    }

    fn load(&mut self, ty: Type, base: Value, offset: u32) -> Value {
        let v = self
            .b
            .ins()
            .load(ty, MemFlagsData::trusted(), base, offset as i32);
        if ty == types::I32 && self.ptr == types::I64 {
            self.b.ins().uextend(types::I64, v)
        } else {
            v
        }
    }

    /// Return `code` if `cond` holds; go on in a new block otherwise.
    fn fail_if(&mut self, cond: Value, code: i64) {
        let fail = self.b.create_block();
        let go_on = self.b.create_block();
        self.b.ins().brif(cond, fail, &[], go_on, &[]);
        self.b.switch_to_block(fail);
        let c = self.b.ins().iconst(types::I32, code);
        self.b.ins().return_(&[c]);
        self.b.switch_to_block(go_on);
    }

    fn is_null(&mut self, v: Value) -> Value {
        self.b.ins().icmp_imm_s(IntCC::Equal, v, 0)
    }

    /// Fail with `MMAC_ERR_NULL` if any of `values` is NULL.
    fn require(&mut self, values: &[Value]) {
        let mut any = self.b.ins().iconst(types::I8, 0);
        for v in values {
            let n = self.is_null(*v);
            any = self.b.ins().bor(any, n);
        }
        self.fail_if(any, ERR_NULL);
    }

    /// Fail with `MMAC_ERR_SCALES` if the instruction is scaled and sa or sb is NULL.
    fn require_scales(&mut self, ins: Value, sa: Value, sb: Value) -> Value {
        let count = self.load(types::I32, ins, layout::SCALE_COUNT);
        let scaled = self.b.ins().icmp_imm_s(IntCC::NotEqual, count, 0);
        let na = self.is_null(sa);
        let nb = self.is_null(sb);
        let missing = self.b.ins().bor(na, nb);
        let bad = self.b.ins().band(scaled, missing);
        self.fail_if(bad, ERR_SCALES);
        count
    }

    /// Set the IEEE default control state if the caller's differs; returns the caller's
    /// state and whether it was changed, for [`Entry::fp_leave`].
    fn fp_enter(&mut self) -> (Value, Value) {
        let read = self.func(self.refs.read_fp);
        let call = self.b.ins().call(read, &[]);
        let old = self.b.inst_results(call)[0];
        let control = self.b.ins().band_imm_s(old, fpenv::CONTROL_MASK as i64);
        let changed = self
            .b
            .ins()
            .icmp_imm_s(IntCC::NotEqual, control, fpenv::DEFAULT as i64);
        let set = self.b.create_block();
        let go_on = self.b.create_block();
        self.b.ins().brif(changed, set, &[], go_on, &[]);
        self.b.switch_to_block(set);
        let kept = self.b.ins().band_imm_s(old, !(fpenv::CONTROL_MASK as i64));
        let default = self.b.ins().bor_imm_s(kept, fpenv::DEFAULT as i64);
        let write = self.func(self.refs.write_fp);
        self.b.ins().call(write, &[default]);
        self.b.ins().jump(go_on, &[]);
        self.b.switch_to_block(go_on);
        (old, changed)
    }

    fn fp_leave(&mut self, (old, changed): (Value, Value)) {
        let restore = self.b.create_block();
        let go_on = self.b.create_block();
        self.b.ins().brif(changed, restore, &[], go_on, &[]);
        self.b.switch_to_block(restore);
        let write = self.func(self.refs.write_fp);
        self.b.ins().call(write, &[old]);
        self.b.ins().jump(go_on, &[]);
        self.b.switch_to_block(go_on);
    }

    fn ok(&mut self) {
        let z = self.b.ins().iconst(types::I32, 0);
        self.b.ins().return_(&[z]);
    }

    /// `for i in 0..n { body(i) }`, continuing after the loop.
    fn counted(&mut self, n: Value, body: &mut dyn FnMut(&mut Self, Value)) {
        let head = self.b.create_block();
        let work = self.b.create_block();
        let done = self.b.create_block();
        self.b.append_block_param(head, self.ptr);
        let zero = self.b.ins().iconst(self.ptr, 0);
        self.b.ins().jump(head, &[BlockArg::Value(zero)]);
        self.b.switch_to_block(head);
        let i = self.b.block_params(head)[0];
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, i, n);
        self.b.ins().brif(more, work, &[], done, &[]);
        self.b.switch_to_block(work);
        body(self, i);
        let next = self.b.ins().iadd_imm_s(i, 1);
        self.b.ins().jump(head, &[BlockArg::Value(next)]);
        self.b.switch_to_block(done);
    }

    /// `find(name)`: the descriptor whose name is `name` (strcmp), or NULL.
    fn find(&mut self) {
        let name = self.args[0];
        let null = self.b.ins().iconst(self.ptr, 0);
        let nn = self.is_null(name);
        let absent = self.b.create_block();
        let search = self.b.create_block();
        self.b.ins().brif(nn, absent, &[], search, &[]);
        self.b.switch_to_block(search);
        let count = self.b.ins().iconst(self.ptr, self.refs.count);
        let strcmp = self.func(self.refs.strcmp);
        self.counted(count, &mut |e, i| {
            let d = e.descriptor(i);
            let n = e.load(e.ptr, d, layout::NAME);
            let call = e.b.ins().call(strcmp, &[n, name]);
            let r = e.b.inst_results(call)[0];
            let same = e.b.ins().icmp_imm_s(IntCC::Equal, r, 0);
            let found = e.b.create_block();
            let next = e.b.create_block();
            e.b.ins().brif(same, found, &[], next, &[]);
            e.b.switch_to_block(found);
            e.b.ins().return_(&[d]);
            e.b.switch_to_block(next);
        });
        self.b.ins().jump(absent, &[]);
        self.b.switch_to_block(absent);
        self.b.ins().return_(&[null]);
    }

    /// `dot(ins, c, a, b, sa, sb, d)`.
    fn dot(&mut self) {
        let [ins, c, a, b, sa, sb, d] = self.args[..] else {
            unreachable!("seven parameters")
        };
        self.require(&[ins, a, b, d]);
        self.require_scales(ins, sa, sb);
        let kernel = self.load(self.ptr, ins, layout::DOT);
        let mut s = Signature::new(self.module.isa().default_call_conv());
        s.params.push(AbiParam::new(types::I64));
        s.params
            .extend(std::iter::repeat_n(AbiParam::new(self.ptr), 4));
        s.returns.push(AbiParam::new(types::I64));
        let sig = self.b.import_signature(s);
        let fp = self.fp_enter();
        let call = self.b.ins().call_indirect(sig, kernel, &[c, a, b, sa, sb]);
        let r = self.b.inst_results(call)[0];
        self.fp_leave(fp);
        self.b.ins().store(MemFlagsData::trusted(), r, d, 0);
        self.ok();
    }

    /// Call the batch kernel of `ins` on `n` records with the given record strides (in
    /// elements), inside an already entered FP guard.
    #[allow(clippy::too_many_arguments)]
    fn call_batch(
        &mut self,
        ins: Value,
        n: Value,
        [c, a, b, sa, sb, d]: [Value; 6],
        strides: [Value; 4],
    ) {
        let slot =
            self.b
                .create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 32, 3));
        for (i, s) in strides.iter().enumerate() {
            self.b.ins().stack_store(self.ptr, *s, slot, i as i32 * 8);
        }
        let strides = self.b.ins().stack_addr(self.ptr, slot, 0);
        let kernel = self.load(self.ptr, ins, layout::BATCH);
        let mut s = Signature::new(self.module.isa().default_call_conv());
        s.params.push(AbiParam::new(types::I64));
        s.params
            .extend(std::iter::repeat_n(AbiParam::new(self.ptr), 7));
        let sig = self.b.import_signature(s);
        self.b
            .ins()
            .call_indirect(sig, kernel, &[n, c, a, b, sa, sb, d, strides]);
    }

    /// `batch(ins, n, c, a, b, sa, sb, d)`: record i is `a + i*k`, `b + i*k`, `sa + i*s`.
    fn batch(&mut self) {
        let [ins, n, c, a, b, sa, sb, d] = self.args[..] else {
            unreachable!("eight parameters")
        };
        let none = self.b.ins().icmp_imm_s(IntCC::Equal, n, 0);
        let done = self.b.create_block();
        let work = self.b.create_block();
        self.b.ins().brif(none, done, &[], work, &[]);
        self.b.switch_to_block(done);
        self.ok();
        self.b.switch_to_block(work);
        self.require(&[ins, c, a, b, d]);
        let s = self.require_scales(ins, sa, sb);
        let k = self.load(types::I32, ins, layout::K);
        let fp = self.fp_enter();
        self.call_batch(ins, n, [c, a, b, sa, sb, d], [k, k, s, s]);
        self.fp_leave(fp);
        self.ok();
    }

    /// `mma(ins, A, B, C, sa, sb, D)`: B's columns are copied once into a buffer
    /// (malloc), then each row of D is one batch call.
    fn mma(&mut self) {
        let [ins, a, b, c, sa, sb, d] = self.args[..] else {
            unreachable!("seven parameters")
        };
        self.require(&[ins, a, b, c, d]);
        let s = self.require_scales(ins, sa, sb);
        let m = self.load(types::I32, ins, layout::M);
        let n = self.load(types::I32, ins, layout::N);
        let k = self.load(types::I32, ins, layout::K);
        let nk = self.b.ins().imul(n, k);
        let bytes = self.b.ins().imul_imm_s(nk, 8);
        let malloc = self.func(self.refs.malloc);
        let call = self.b.ins().call(malloc, &[bytes]);
        let bt = self.b.inst_results(call)[0];
        let nomem = self.is_null(bt);
        self.fail_if(nomem, ERR_NOMEM);
        // bt[j*k + kk] = B[kk*n + j]
        self.counted(k, &mut |e, kk| {
            e.counted(n, &mut |e, j| {
                let src = e.b.ins().imul(kk, n);
                let src = e.b.ins().iadd(src, j);
                let src = e.b.ins().imul_imm_s(src, 8);
                let src = e.b.ins().iadd(b, src);
                let v = e.b.ins().load(types::I64, MemFlagsData::trusted(), src, 0);
                let dst = e.b.ins().imul(j, k);
                let dst = e.b.ins().iadd(dst, kk);
                let dst = e.b.ins().imul_imm_s(dst, 8);
                let dst = e.b.ins().iadd(bt, dst);
                e.b.ins().store(MemFlagsData::trusted(), v, dst, 0);
            });
        });
        let fp = self.fp_enter();
        let zero = self.b.ins().iconst(self.ptr, 0);
        self.counted(m, &mut |e, i| {
            let at = |e: &mut Self, base: Value, per_row: Value| {
                let o = e.b.ins().imul(i, per_row);
                let o = e.b.ins().imul_imm_s(o, 8);
                e.b.ins().iadd(base, o)
            };
            let row_c = at(e, c, n);
            let row_a = at(e, a, k);
            let row_sa = at(e, sa, s);
            let row_d = at(e, d, n);
            // record j: row i of A (stride 0) against column j of B
            e.call_batch(
                ins,
                n,
                [row_c, row_a, bt, row_sa, sb, row_d],
                [zero, k, zero, s],
            );
        });
        self.fp_leave(fp);
        let free = self.func(self.refs.free);
        self.b.ins().call(free, &[bt]);
        self.ok();
    }
}
