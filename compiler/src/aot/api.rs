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
use cranelift_codegen::isa::CallConv;
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
    /// Elements of a per dot product: K, or a sparse A's stored elements.
    pub const STORED: u32 = 112;
    /// A sparse A's pattern, one byte each: kept, group, pairs, over columns (0 if dense).
    pub const SPARSE_KEPT: u32 = 116;
    pub const SPARSE_PAIRS: u32 = 118;
    pub const SPARSE_OVER_COLUMNS: u32 = 119;
    // the object's own fields
    pub const DOT: u32 = 120;
    pub const BATCH: u32 = 128;
    /// The encoding of +0 in a's format (what `over columns` puts at unstored columns).
    pub const ZERO: u32 = 136;
    /// The dense arithmetic's k.
    pub const KERNEL_K: u32 = 144;
    /// Columns a sparsity group spans (0 when dense), and the columns of a group that
    /// hold an element.
    pub const SPAN: u32 = 148;
    pub const KEPT_COLUMNS: u32 = 152;
    /// The instruction's register fragments ([`super::warp`]), or NULL.
    pub const WARP: u32 = 160;
    pub const SIZE: u32 = 168;
}

/// The error codes of the entries, with their messages (`mmac_<arch>_error`).
/// The first four are libmmac's too (its header defines them under the same guard); the
/// sparse ones have a guard of their own, as do the warp entry's (`MMAC_ERR_LAYOUT` is
/// libmmac's too).
pub(crate) const ERRORS: [(&str, i64, &str); 9] = [
    ("MMAC_OK", 0, "success"),
    ("MMAC_ERR_NULL", 1, "a required pointer is NULL"),
    (
        "MMAC_ERR_SCALES",
        2,
        "the instruction is block-scaled: sa and sb are required",
    ),
    ("MMAC_ERR_NOMEM", 3, "out of memory"),
    (
        "MMAC_ERR_SPARSE",
        6,
        "a sparse instruction takes sparse_dot (with the positions of a's elements), a dense one dot, batch or mma",
    ),
    (
        "MMAC_ERR_PATTERN",
        7,
        "the positions break the instruction's sparsity pattern",
    ),
    (
        "MMAC_ERR_LAYOUT",
        5,
        "no warp fragment layout is known for the instruction",
    ),
    (
        "MMAC_ERR_WARP",
        8,
        "the object's warp entry runs dense instructions without scale factors (libmmac's mmac_warp_mma runs sparse and block-scaled ones)",
    ),
    (
        "MMAC_ERR_REGISTERS",
        9,
        "lanes holding copies of one element disagree",
    ),
];
const ERR_NULL: i64 = 1;
const ERR_SCALES: i64 = 2;
const ERR_NOMEM: i64 = 3;
const ERR_SPARSE: i64 = 6;
const ERR_PATTERN: i64 = 7;
const ERR_LAYOUT: i64 = 5;
const ERR_WARP: i64 = 8;
const ERR_REGISTERS: i64 = 9;

mod warp;

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

/// The data objects the entries read: the descriptor table and the strings, with where
/// each error message lies among the strings.
struct Data {
    table: DataId,
    strings: DataId,
    /// Each error code, with the offset of its message.
    errors: Vec<(i64, u32)>,
    /// The offset of the message of a code that is none of them.
    unknown_error: u32,
}

/// The functions and data the entries use.
struct Refs {
    data: Data,
    count: i64,
    read_fp: FuncId,
    write_fp: FuncId,
    strcmp: FuncId,
    malloc: FuncId,
    free: FuncId,
}

/// A module error, as the message [`define`] returns.
fn module_error(e: cranelift_module::ModuleError) -> String {
    e.to_string()
}

/// Define the descriptor table and the exported entries in `module`.
pub(crate) fn define(
    module: &mut ObjectModule,
    prefix: &str,
    arch: &str,
    present: &[Present],
) -> Result<(), String> {
    let fp = FpControl::host().ok_or("no floating-point control helpers for this host")?;
    let mut object = Api::new(module, prefix);
    let data = object.define_data(arch, present)?;
    let refs = object.declare_functions(&fp, data, present.len() as i64)?;
    object.export_entries(&refs)
}

/// The contents of the descriptor table: its bytes, with the counts filled in, and the
/// fields that point at strings and at functions, which are relocated.
struct TableContents {
    bytes: Vec<u8>,
    /// Each field that points at a string, with the string's offset among the strings.
    string_fields: Vec<(u32, u32)>,
    /// Each field that points at a kernel, with the kernel.
    function_fields: Vec<(u32, FuncId)>,
    /// Each descriptor's warp field, with the index of its instruction in `present`.
    warp_fields: Vec<(u32, usize)>,
}

impl TableContents {
    /// One descriptor per instruction of `present`, in order, their strings added to
    /// `strings`.
    fn new(arch: &str, present: &[Present], strings: &mut Strings) -> Self {
        let mut table = TableContents {
            bytes: vec![0u8; present.len().max(1) * layout::SIZE as usize],
            string_fields: vec![],
            function_fields: vec![],
            warp_fields: vec![],
        };
        for (i, p) in present.iter().enumerate() {
            let base = i as u32 * layout::SIZE;
            table.put_counts(base, p);
            table.put_strings(base, p, arch, strings);
            table.function_fields.push((base + layout::DOT, p.dot));
            table.function_fields.push((base + layout::BATCH, p.batch));
            if p.warp.is_some() {
                table.warp_fields.push((base + layout::WARP, i));
            }
        }
        table
    }

    /// The counts of the descriptor at `base`: the shape, the scale block, and the bits
    /// of the operands and of the scale factors.
    fn put_counts(&mut self, base: u32, p: &Present) {
        let ar = &p.inst.arithmetic;
        let at = |field: u32| (base + field) as usize;
        if let Some(s) = p.inst.sparsity {
            let bytes = [
                s.kept as u8,
                s.group as u8,
                s.pairs as u8,
                (s.walk == crate::ir::Walk::Columns) as u8,
            ];
            self.bytes[at(layout::SPARSE_KEPT)..at(layout::SPARSE_KEPT) + 4]
                .copy_from_slice(&bytes);
        }
        let zero = ar.a.positive_zero().to_le_bytes();
        self.bytes[at(layout::ZERO)..at(layout::ZERO) + 8].copy_from_slice(&zero);
        let mut put32 = |field: u32, v: u32| {
            self.bytes[at(field)..at(field) + 4].copy_from_slice(&v.to_le_bytes());
        };
        put32(layout::M, p.inst.m);
        put32(layout::N, p.inst.n);
        put32(layout::K, p.inst.columns() as u32);
        put32(layout::STORED, p.inst.stored() as u32);
        put32(layout::KERNEL_K, ar.k);
        put32(layout::SPAN, p.inst.sparsity.map_or(0, |s| s.span()));
        put32(
            layout::KEPT_COLUMNS,
            p.inst.sparsity.map_or(0, |s| s.kept_columns()),
        );
        put32(layout::SCALE_BLOCK, p.inst.scale_block().unwrap_or(0));
        put32(layout::A_BITS, ar.a.storage_bits());
        put32(layout::B_BITS, ar.b.storage_bits());
        put32(layout::C_BITS, ar.c.storage_bits());
        put32(layout::D_BITS, ar.d.storage_bits());
        put32(
            layout::SCALE_BITS,
            ar.scale.as_ref().map_or(0, |s| s.format.storage_bits()),
        );
        put32(layout::SCALE_COUNT, ar.scale_count() as u32);
    }

    /// The string fields of the descriptor at `base`: the name, the architecture, the
    /// formats, the algorithm and the evidence.
    fn put_strings(&mut self, base: u32, p: &Present, arch: &str, strings: &mut Strings) {
        let ar = &p.inst.arithmetic;
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
                self.string_fields.push((base + field, strings.offset(s)));
            }
        }
        self.string_fields.push((
            base + layout::EVIDENCE,
            strings.offset(&p.inst.provenance.evidence_words()),
        ));
    }
}

/// The C API being written into a module: where its symbols go, and what the functions
/// it defines share.
struct Api<'m> {
    module: &'m mut ObjectModule,
    /// The prefix of every symbol, `mmac_<arch>_`.
    prefix: &'m str,
    ptr: Type,
    call_conv: CallConv,
    fctx: FunctionBuilderContext,
}

impl<'m> Api<'m> {
    /// Nothing written yet.
    fn new(module: &'m mut ObjectModule, prefix: &'m str) -> Self {
        Api {
            ptr: module.target_config().pointer_type(),
            call_conv: module.isa().default_call_conv(),
            module,
            prefix,
            fctx: FunctionBuilderContext::new(),
        }
    }

    /// A signature in the module's calling convention.
    fn sig(&self, params: &[Type], returns: &[Type]) -> Signature {
        let mut s = Signature::new(self.call_conv);
        s.params.extend(params.iter().map(|t| AbiParam::new(*t)));
        s.returns.extend(returns.iter().map(|t| AbiParam::new(*t)));
        s
    }

    /// Declare the local data object `<prefix><name>`.
    fn declare_data(&mut self, name: &str) -> Result<DataId, String> {
        self.module
            .declare_data(
                &format!("{}{name}", self.prefix),
                Linkage::Local,
                false,
                false,
            )
            .map_err(module_error)
    }

    /// Define the descriptor table of `present` and the strings it and the error
    /// messages point at.
    fn define_data(&mut self, arch: &str, present: &[Present]) -> Result<Data, String> {
        let mut strings = Strings {
            bytes: vec![],
            at: Default::default(),
        };
        let strings_id = self.declare_data("strings")?;
        let table_id = self.declare_data("instructions")?;
        let contents = TableContents::new(arch, present, &mut strings);
        let mut table = DataDescription::new();
        table.set_align(8);
        let strings_gv = table.import_global_value(ModuleRelocTarget::user(1, strings_id.as_u32()));
        table.define(contents.bytes.into_boxed_slice());
        for (at, offset) in contents.string_fields {
            table.write_data_addr(at, strings_gv, offset as i64);
        }
        for (at, f) in contents.function_fields {
            let r = table.import_function(ModuleRelocTarget::user(0, f.as_u32()));
            table.write_function_addr(at, r);
        }
        for (at, i) in contents.warp_fields {
            let id = self.declare_data(&format!("warp{i}"))?;
            let mut desc = DataDescription::new();
            desc.set_align(8);
            desc.define(
                warp::table(present[i].warp.as_ref().expect("a warp field has a layout"))
                    .into_boxed_slice(),
            );
            self.module.define_data(id, &desc).map_err(module_error)?;
            let gv = table.import_global_value(ModuleRelocTarget::user(1, id.as_u32()));
            table.write_data_addr(at, gv, 0);
        }
        self.module
            .define_data(table_id, &table)
            .map_err(module_error)?;
        let errors = ERRORS
            .iter()
            .map(|(_, code, message)| (*code, strings.offset(message)))
            .collect();
        let unknown_error = strings.offset("unknown error code");
        let mut desc = DataDescription::new();
        desc.define(strings.bytes.into_boxed_slice());
        self.module
            .define_data(strings_id, &desc)
            .map_err(module_error)?;
        Ok(Data {
            table: table_id,
            strings: strings_id,
            errors,
            unknown_error,
        })
    }

    /// Define the control-register helpers from their machine code `fp`, and import the
    /// libc functions the entries call.
    fn declare_functions(
        &mut self,
        fp: &FpControl,
        data: Data,
        count: i64,
    ) -> Result<Refs, String> {
        let read_fp = self
            .module
            .declare_function(
                &format!("{}fp_read", self.prefix),
                Linkage::Local,
                &self.sig(&[], &[types::I64]),
            )
            .map_err(module_error)?;
        let write_fp = self
            .module
            .declare_function(
                &format!("{}fp_write", self.prefix),
                Linkage::Local,
                &self.sig(&[types::I64], &[]),
            )
            .map_err(module_error)?;
        self.module
            .define_function_bytes(read_fp, 16, fp.read, &[])
            .map_err(module_error)?;
        self.module
            .define_function_bytes(write_fp, 16, fp.write, &[])
            .map_err(module_error)?;
        let ptr = self.ptr;
        Ok(Refs {
            data,
            count,
            read_fp,
            write_fp,
            strcmp: self.import("strcmp", &[ptr, ptr], &[types::I32])?,
            malloc: self.import("malloc", &[ptr], &[ptr])?,
            free: self.import("free", &[ptr], &[])?,
        })
    }

    /// Declare the function `name` that the object imports.
    fn import(&mut self, name: &str, params: &[Type], returns: &[Type]) -> Result<FuncId, String> {
        let s = self.sig(params, returns);
        self.module
            .declare_function(name, Linkage::Import, &s)
            .map_err(module_error)
    }

    /// Define the exported entries: `count`, `at`, `find`, `dot`, `batch`, `mma`,
    /// `sparse_dot` and `error`.
    fn export_entries(&mut self, refs: &Refs) -> Result<(), String> {
        let ptr = self.ptr;
        self.export(refs, "count", &[], &[ptr], &|e| e.count())?;
        self.export(refs, "at", &[ptr], &[ptr], &|e| e.at())?;
        self.export(refs, "find", &[ptr], &[ptr], &|e| e.find())?;
        self.export(
            refs,
            "dot",
            &[ptr, types::I64, ptr, ptr, ptr, ptr, ptr],
            &[types::I32],
            &|e| e.dot(),
        )?;
        self.export(
            refs,
            "batch",
            &[ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr],
            &[types::I32],
            &|e| e.batch(),
        )?;
        let mma = self.export(
            refs,
            "mma",
            &[ptr, ptr, ptr, ptr, ptr, ptr, ptr],
            &[types::I32],
            &|e| e.mma(),
        )?;
        self.export(
            refs,
            "warp_mma",
            &[ptr, ptr, ptr, ptr, ptr, types::I32, ptr, ptr, ptr, ptr],
            &[types::I32],
            &|e| e.warp_mma(mma),
        )?;
        self.export(refs, "fragment_lanes", &[ptr], &[types::I32], &|e| {
            e.fragment_size(None)
        })?;
        self.export(refs, "fragment_words", &[ptr, ptr], &[types::I32], &|e| {
            e.fragment_size(Some(e.args[1]))
        })?;
        self.export(
            refs,
            "sparse_dot",
            &[ptr, types::I64, ptr, ptr, ptr, ptr, ptr, ptr],
            &[types::I32],
            &|e| e.sparse_dot(),
        )?;
        self.export(refs, "error", &[types::I32], &[ptr], &|e| e.error())?;
        Ok(())
    }

    /// Define the exported function `<prefix><name>`, whose body `body` writes.
    fn export(
        &mut self,
        refs: &Refs,
        name: &str,
        params: &[Type],
        returns: &[Type],
        body: &dyn Fn(&mut Entry),
    ) -> Result<FuncId, String> {
        let sig = self.sig(params, returns);
        let id = self
            .module
            .declare_function(&format!("{}{name}", self.prefix), Linkage::Export, &sig)
            .map_err(module_error)?;
        let mut ctx = Context::new();
        ctx.func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig);
        {
            let mut b = FunctionBuilder::new(&mut ctx.func, &mut self.fctx);
            let block = b.create_block();
            b.append_block_params_for_function_params(block);
            b.switch_to_block(block);
            let args = b.block_params(block).to_vec();
            let mut e = Entry {
                b,
                module: self.module,
                refs,
                ptr: self.ptr,
                args,
            };
            body(&mut e);
            e.b.seal_all_blocks();
            e.b.finalize(self.module.target_config());
        }
        self.module
            .define_function(id, &mut ctx)
            .map_err(|e| format!("cannot compile the entry `{}{name}`: {e:?}", self.prefix))?;
        Ok(id)
    }
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
        self.data(self.refs.data.strings)
    }

    fn func(&mut self, id: FuncId) -> FuncRef {
        self.module.declare_func_in_func(id, self.b.func)
    }

    /// The address of descriptor `i` (no bounds check).
    fn descriptor(&mut self, i: Value) -> Value {
        let table = self.data(self.refs.data.table);
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

    /// Fail with `MMAC_ERR_SPARSE` if the instruction is sparse (the dense entries take its
    /// dense arithmetic's operands, not a sparse A).
    fn refuse_sparse(&mut self, ins: Value) {
        let span = self.load(types::I32, ins, layout::SPAN);
        let sparse = self.b.ins().icmp_imm_s(IntCC::NotEqual, span, 0);
        self.fail_if(sparse, ERR_SPARSE);
    }

    /// A byte field of the descriptor, widened to a pointer-sized integer.
    fn load_byte(&mut self, base: Value, offset: u32) -> Value {
        let v = self.load(types::I8, base, offset);
        self.b.ins().uextend(self.ptr, v)
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

    /// `count()`: the number of instructions.
    fn count(&mut self) {
        let n = self.b.ins().iconst(self.ptr, self.refs.count);
        self.b.ins().return_(&[n]);
    }

    /// `at(i)`: descriptor `i`, or NULL past the last one.
    fn at(&mut self) {
        let i = self.args[0];
        let inside = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThan, i, self.refs.count);
        let d = self.descriptor(i);
        let null = self.b.ins().iconst(self.ptr, 0);
        let r = self.b.ins().select(inside, d, null);
        self.b.ins().return_(&[r]);
    }

    /// `error(code)`: the message of error code `code`.
    fn error(&mut self) {
        let code = self.b.ins().sextend(types::I64, self.args[0]);
        let base = self.strings();
        let data = &self.refs.data;
        let mut r = self.b.ins().iadd_imm_s(base, data.unknown_error as i64);
        for (c, offset) in &data.errors {
            let is = self.b.ins().icmp_imm_s(IntCC::Equal, code, *c);
            let m = self.b.ins().iadd_imm_s(base, *offset as i64);
            r = self.b.ins().select(is, m, r);
        }
        self.b.ins().return_(&[r]);
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
        self.refuse_sparse(ins);
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
        // the descriptor is checked as `dot` checks it, whatever n is; the operands only
        // when there is a record to read
        self.require(&[ins]);
        self.refuse_sparse(ins);
        let none = self.b.ins().icmp_imm_s(IntCC::Equal, n, 0);
        let done = self.b.create_block();
        let work = self.b.create_block();
        self.b.ins().brif(none, done, &[], work, &[]);
        self.b.switch_to_block(done);
        self.ok();
        self.b.switch_to_block(work);
        self.require(&[c, a, b, d]);
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
        self.refuse_sparse(ins);
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

    /// `sparse_dot(ins, c, a, b, sa, sb, positions, d)`: a holds `stored` elements at the
    /// columns `positions` (uint32_t) names, b all `k`. The positions are checked against
    /// the pattern (element i in group i / kept_columns, increasing within it, pairs
    /// adjacent), then the dense arithmetic's operands are built in a buffer (malloc): b's
    /// selected elements, or a expanded with +0; then its kernel runs.
    fn sparse_dot(&mut self) {
        let [ins, c, a, b, sa, sb, positions, d] = self.args[..] else {
            unreachable!("eight parameters")
        };
        self.require(&[ins, a, b, positions, d]);
        self.require_scales(ins, sa, sb);
        let span = self.load(types::I32, ins, layout::SPAN);
        let dense = self.b.ins().icmp_imm_s(IntCC::Equal, span, 0);
        self.fail_if(dense, ERR_SPARSE);
        let stored = self.load(types::I32, ins, layout::STORED);
        let columns = self.load(types::I32, ins, layout::K);
        let kept = self.load(types::I32, ins, layout::KEPT_COLUMNS);
        let pairs = self.load_byte(ins, layout::SPARSE_PAIRS);
        let pairs = self.b.ins().icmp_imm_s(IntCC::NotEqual, pairs, 0);
        // [bad, previous position] across the loop
        let slot =
            self.b
                .create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 16, 3));
        let zero = self.b.ins().iconst(self.ptr, 0);
        self.b.ins().stack_store(self.ptr, zero, slot, 0);
        self.b.ins().stack_store(self.ptr, zero, slot, 8);
        let position = |e: &mut Self, i: Value| {
            let at = e.b.ins().imul_imm_s(i, 4);
            let at = e.b.ins().iadd(positions, at);
            e.load(types::I32, at, 0)
        };
        self.counted(stored, &mut |e, i| {
            let p = position(e, i);
            let previous = e.b.ins().stack_load(e.ptr, e.ptr, slot, 8);
            let outside =
                e.b.ins()
                    .icmp(IntCC::UnsignedGreaterThanOrEqual, p, columns);
            let group_of_p = e.b.ins().udiv(p, span);
            let group_of_i = e.b.ins().udiv(i, kept);
            let elsewhere = e.b.ins().icmp(IntCC::NotEqual, group_of_p, group_of_i);
            let in_group = e.b.ins().urem(i, kept);
            let not_first = e.b.ins().icmp_imm_s(IntCC::NotEqual, in_group, 0);
            let not_after = e.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, p, previous);
            let unordered = e.b.ins().band(not_first, not_after);
            // pairs: an even element at an even column, an odd one right after it
            let odd_element = e.b.ins().band_imm_s(i, 1);
            let odd_element = e.b.ins().icmp_imm_s(IntCC::NotEqual, odd_element, 0);
            let odd_column = e.b.ins().band_imm_s(p, 1);
            let odd_column = e.b.ins().icmp_imm_s(IntCC::NotEqual, odd_column, 0);
            let next = e.b.ins().iadd_imm_s(previous, 1);
            let not_next = e.b.ins().icmp(IntCC::NotEqual, p, next);
            let unpaired = e.b.ins().select(odd_element, not_next, odd_column);
            let unpaired = e.b.ins().band(pairs, unpaired);
            let any = e.b.ins().bor(outside, elsewhere);
            let any = e.b.ins().bor(any, unordered);
            let any = e.b.ins().bor(any, unpaired);
            let any = e.b.ins().uextend(e.ptr, any);
            let bad = e.b.ins().stack_load(e.ptr, e.ptr, slot, 0);
            let bad = e.b.ins().bor(bad, any);
            e.b.ins().stack_store(e.ptr, bad, slot, 0);
            e.b.ins().stack_store(e.ptr, p, slot, 8);
        });
        let bad = self.b.ins().stack_load(self.ptr, self.ptr, slot, 0);
        let bad = self.b.ins().icmp_imm_s(IntCC::NotEqual, bad, 0);
        self.fail_if(bad, ERR_PATTERN);
        // the dense arithmetic's operands
        let k = self.load(types::I32, ins, layout::KERNEL_K);
        let bytes = self.b.ins().imul_imm_s(k, 8);
        let malloc = self.func(self.refs.malloc);
        let call = self.b.ins().call(malloc, &[bytes]);
        let buffer = self.b.inst_results(call)[0];
        let nomem = self.is_null(buffer);
        self.fail_if(nomem, ERR_NOMEM);
        let element = |e: &mut Self, base: Value, i: Value| {
            let at = e.b.ins().imul_imm_s(i, 8);
            e.b.ins().iadd(base, at)
        };
        let over_columns = self.load_byte(ins, layout::SPARSE_OVER_COLUMNS);
        let selected = self.b.create_block();
        let walk_columns = self.b.create_block();
        let run = self.b.create_block();
        self.b.append_block_param(run, self.ptr);
        self.b.append_block_param(run, self.ptr);
        self.b
            .ins()
            .brif(over_columns, walk_columns, &[], selected, &[]);
        // over selected: buffer[i] = b[positions[i]]
        self.b.switch_to_block(selected);
        self.counted(stored, &mut |e, i| {
            let p = position(e, i);
            let from = element(e, b, p);
            let v = e.b.ins().load(types::I64, MemFlagsData::trusted(), from, 0);
            let to = element(e, buffer, i);
            e.b.ins().store(MemFlagsData::trusted(), v, to, 0);
        });
        self.b
            .ins()
            .jump(run, &[BlockArg::Value(a), BlockArg::Value(buffer)]);
        // over columns: buffer = +0 everywhere, a[i] at column positions[i]
        self.b.switch_to_block(walk_columns);
        let plus_zero = self.load(types::I64, ins, layout::ZERO);
        self.counted(columns, &mut |e, j| {
            let to = element(e, buffer, j);
            e.b.ins().store(MemFlagsData::trusted(), plus_zero, to, 0);
        });
        self.counted(stored, &mut |e, i| {
            let p = position(e, i);
            let from = element(e, a, i);
            let v = e.b.ins().load(types::I64, MemFlagsData::trusted(), from, 0);
            let to = element(e, buffer, p);
            e.b.ins().store(MemFlagsData::trusted(), v, to, 0);
        });
        self.b
            .ins()
            .jump(run, &[BlockArg::Value(buffer), BlockArg::Value(b)]);
        self.b.switch_to_block(run);
        let (ka, kb) = (self.b.block_params(run)[0], self.b.block_params(run)[1]);
        let kernel = self.load(self.ptr, ins, layout::DOT);
        let mut sig = Signature::new(self.module.isa().default_call_conv());
        sig.params.push(AbiParam::new(types::I64));
        sig.params
            .extend(std::iter::repeat_n(AbiParam::new(self.ptr), 4));
        sig.returns.push(AbiParam::new(types::I64));
        let sig = self.b.import_signature(sig);
        let fp = self.fp_enter();
        let call = self
            .b
            .ins()
            .call_indirect(sig, kernel, &[c, ka, kb, sa, sb]);
        let r = self.b.inst_results(call)[0];
        self.fp_leave(fp);
        let free = self.func(self.refs.free);
        self.b.ins().call(free, &[buffer]);
        self.b.ins().store(MemFlagsData::trusted(), r, d, 0);
        self.ok();
    }
}
