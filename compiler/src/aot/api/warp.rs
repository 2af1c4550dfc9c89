//! The object's warp entry: `warp_mma` on register images, through a table of where each
//! element of a, b, c and d lies (a data object per instruction that has a layout), and
//! `fragment_lanes` / `fragment_words`. The entry unpacks the images into A, B and C (in a
//! buffer from malloc), runs the object's own `mma` once per set, and packs D.

use super::{ERR_LAYOUT, ERR_NOMEM, ERR_REGISTERS, ERR_WARP, Entry, layout};
use crate::aot::WarpLayout;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, Value, types,
};
use cranelift_module::FuncId;

/// The table's header: lanes, sets, then per operand (a, b, c, d) its words per lane,
/// value width, wide registers (0/1), slot count and the offset of its slots.
const LANES: u32 = 0;
const SETS: u32 = 4;
const OPERANDS: u32 = 8;
const OPERAND_SIZE: u32 = 20;
const WORDS: u32 = 0;
const WIDTH: u32 = 4;
const WIDE: u32 = 8;
const COUNT: u32 = 12;
const SLOTS: u32 = 16;
/// Each slot: word, shift, cell, copy (u32 each).
const SLOT_SIZE: u32 = 16;

/// The bytes of an instruction's table.
pub(super) fn table(w: &WarpLayout) -> Vec<u8> {
    let head = OPERANDS + 4 * OPERAND_SIZE;
    let mut bytes = vec![0u8; head as usize];
    let put = |bytes: &mut Vec<u8>, at: u32, v: u32| {
        bytes[at as usize..at as usize + 4].copy_from_slice(&v.to_le_bytes());
    };
    put(&mut bytes, LANES, w.lanes);
    put(&mut bytes, SETS, w.sets);
    for (op, o) in w.operands.iter().enumerate() {
        let base = OPERANDS + op as u32 * OPERAND_SIZE;
        let slots = bytes.len() as u32;
        put(&mut bytes, base + WORDS, o.words);
        put(&mut bytes, base + WIDTH, o.width);
        put(&mut bytes, base + WIDE, o.wide as u32);
        put(&mut bytes, base + COUNT, o.slots.len() as u32);
        put(&mut bytes, base + SLOTS, slots);
        for s in &o.slots {
            for v in [s.word, s.shift, s.cell, s.copy as u32] {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    bytes
}

impl Entry<'_, '_> {
    /// A u32 field of the table at `w`, widened.
    fn table_field(&mut self, w: Value, op: Option<u32>, field: u32) -> Value {
        let at = op.map_or(0, |op| OPERANDS + op * OPERAND_SIZE) + field;
        self.load(types::I32, w, at)
    }

    /// `fragment_lanes(ins)` (`operand` None) or `fragment_words(ins, operand)`: the
    /// lanes of the images, or the 32-bit words per lane of operand "a", "b", "c" or "d";
    /// -1 for NULL, an unknown operand, or an instruction without a layout.
    pub(super) fn fragment_size(&mut self, operand: Option<Value>) {
        let ins = self.args[0];
        let minus = self.b.ins().iconst(types::I32, -1);
        let fail = self.b.create_block();
        let null = self.is_null(ins);
        let go_on = self.b.create_block();
        self.b.ins().brif(null, fail, &[], go_on, &[]);
        self.b.switch_to_block(go_on);
        let w = self.load(self.ptr, ins, layout::WARP);
        let null = self.is_null(w);
        let go_on = self.b.create_block();
        self.b.ins().brif(null, fail, &[], go_on, &[]);
        self.b.switch_to_block(go_on);
        let Some(name) = operand else {
            let lanes = self
                .b
                .ins()
                .load(types::I32, MemFlagsData::trusted(), w, LANES as i32);
            self.b.ins().return_(&[lanes]);
            self.b.switch_to_block(fail);
            self.b.ins().return_(&[minus]);
            return;
        };
        let null = self.is_null(name);
        let go_on = self.b.create_block();
        self.b.ins().brif(null, fail, &[], go_on, &[]);
        self.b.switch_to_block(go_on);
        // "a" .. "d": one letter, then NUL
        let first = self.load_byte(name, 0);
        let second = self.load_byte(name, 1);
        let op = self.b.ins().iadd_imm_s(first, -(b'a' as i64));
        let outside = self.b.ins().icmp_imm_s(IntCC::UnsignedGreaterThan, op, 3);
        let long = self.b.ins().icmp_imm_s(IntCC::NotEqual, second, 0);
        let bad = self.b.ins().bor(outside, long);
        let go_on = self.b.create_block();
        self.b.ins().brif(bad, fail, &[], go_on, &[]);
        self.b.switch_to_block(go_on);
        let at = self.b.ins().imul_imm_s(op, OPERAND_SIZE as i64);
        let at = self.b.ins().iadd(w, at);
        let words = self.b.ins().load(
            types::I32,
            MemFlagsData::trusted(),
            at,
            (OPERANDS + WORDS) as i32,
        );
        self.b.ins().return_(&[words]);
        self.b.switch_to_block(fail);
        self.b.ins().return_(&[minus]);
    }

    /// `warp_mma(ins, a_regs, b_regs, c_regs, meta_regs, selector, sa_regs, sb_regs,
    /// scale_selectors, d_regs)`: libmmac's signature; the object runs dense instructions
    /// without scale factors (`MMAC_ERR_WARP` for the others, and for metadata, scale
    /// factors or a selector given).
    pub(super) fn warp_mma(&mut self, mma: FuncId) {
        let [ins, a, b, c, meta, selector, sa, sb, _scale_selectors, d] = self.args[..] else {
            unreachable!("ten parameters")
        };
        self.require(&[ins, a, b, c, d]);
        let span = self.load(types::I32, ins, layout::SPAN);
        let scales = self.load(types::I32, ins, layout::SCALE_COUNT);
        let mut unsupported = self.b.ins().bor(span, scales);
        for p in [meta, sa, sb] {
            unsupported = self.b.ins().bor(unsupported, p);
        }
        let selector = self.b.ins().uextend(self.ptr, selector);
        let unsupported = self.b.ins().bor(unsupported, selector);
        let unsupported = self.b.ins().icmp_imm_s(IntCC::NotEqual, unsupported, 0);
        self.fail_if(unsupported, ERR_WARP);
        let w = self.load(self.ptr, ins, layout::WARP);
        let none = self.is_null(w);
        self.fail_if(none, ERR_LAYOUT);
        let m = self.load(types::I32, ins, layout::M);
        let n = self.load(types::I32, ins, layout::N);
        let k = self.load(types::I32, ins, layout::K);
        let sets = self.table_field(w, None, SETS);
        // A, B, C and D of every set, in one buffer
        let sizes = [
            self.b.ins().imul(m, k),
            self.b.ins().imul(k, n),
            self.b.ins().imul(m, n),
            self.b.ins().imul(m, n),
        ];
        let mut total = self.b.ins().iconst(self.ptr, 0);
        let mut bases = vec![];
        let malloc = self.func(self.refs.malloc);
        for s in sizes {
            let bytes = self.b.ins().imul(s, sets);
            let bytes = self.b.ins().imul_imm_s(bytes, 8);
            bases.push(total);
            total = self.b.ins().iadd(total, bytes);
        }
        let call = self.b.ins().call(malloc, &[total]);
        let buffer = self.b.inst_results(call)[0];
        let nomem = self.is_null(buffer);
        self.fail_if(nomem, ERR_NOMEM);
        let matrix: Vec<Value> = bases
            .iter()
            .map(|&o| self.b.ins().iadd(buffer, o))
            .collect();
        let bad =
            self.b
                .create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 8, 3));
        let zero = self.b.ins().iconst(self.ptr, 0);
        self.b.ins().stack_store(self.ptr, zero, bad, 0);
        for (op, image) in [a, b, c].into_iter().enumerate() {
            self.unpack(w, op as u32, image, matrix[op], bad);
        }
        let free = self.func(self.refs.free);
        let mismatch = self.b.ins().stack_load(self.ptr, self.ptr, bad, 0);
        let mismatch = self.b.ins().icmp_imm_s(IntCC::NotEqual, mismatch, 0);
        self.free_and_fail_if(mismatch, buffer, ERR_REGISTERS);
        // the object's mma, set by set
        let mma = self.func(mma);
        self.counted(sets, &mut |e, set| {
            let at = |e: &mut Self, base: Value, size: Value| {
                let o = e.b.ins().imul(set, size);
                let o = e.b.ins().imul_imm_s(o, 8);
                e.b.ins().iadd(base, o)
            };
            let args = [
                ins,
                at(e, matrix[0], sizes[0]),
                at(e, matrix[1], sizes[1]),
                at(e, matrix[2], sizes[2]),
                zero,
                zero,
                at(e, matrix[3], sizes[3]),
            ];
            let call = e.b.ins().call(mma, &args);
            let rc = e.b.inst_results(call)[0];
            let failed = e.b.ins().icmp_imm_s(IntCC::NotEqual, rc, 0);
            let fail = e.b.create_block();
            let go_on = e.b.create_block();
            e.b.ins().brif(failed, fail, &[], go_on, &[]);
            e.b.switch_to_block(fail);
            e.b.ins().call(free, &[buffer]);
            e.b.ins().return_(&[rc]);
            e.b.switch_to_block(go_on);
        });
        self.pack(w, matrix[3], d);
        self.b.ins().call(free, &[buffer]);
        self.ok();
    }

    /// Free `buffer` and return `code` if `cond` holds.
    fn free_and_fail_if(&mut self, cond: Value, buffer: Value, code: i64) {
        let fail = self.b.create_block();
        let go_on = self.b.create_block();
        self.b.ins().brif(cond, fail, &[], go_on, &[]);
        self.b.switch_to_block(fail);
        let free = self.func(self.refs.free);
        self.b.ins().call(free, &[buffer]);
        let c = self.b.ins().iconst(types::I32, code);
        self.b.ins().return_(&[c]);
        self.b.switch_to_block(go_on);
    }

    /// The operand's value mask (all ones for 64 bits), its wide flag and its slots:
    /// `(count, slots, width mask, wide)`.
    fn operand(&mut self, w: Value, op: u32) -> (Value, Value, Value, Value) {
        let count = self.table_field(w, Some(op), COUNT);
        let offset = self.table_field(w, Some(op), SLOTS);
        let slots = self.b.ins().iadd(w, offset);
        let width = self.table_field(w, Some(op), WIDTH);
        let one = self.b.ins().iconst(types::I64, 1);
        let narrow = self.b.ins().ishl(one, width);
        let narrow = self.b.ins().iadd_imm_s(narrow, -1);
        let full = self.b.ins().iconst(types::I64, -1);
        let is64 = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, width, 64);
        let mask = self.b.ins().select(is64, full, narrow);
        let wide = self.table_field(w, Some(op), WIDE);
        let wide = self.b.ins().icmp_imm_s(IntCC::NotEqual, wide, 0);
        (count, slots, mask, wide)
    }

    /// Slot `i`'s fields: word, shift, cell, copy.
    fn slot(&mut self, slots: Value, i: Value) -> [Value; 4] {
        let at = self.b.ins().imul_imm_s(i, SLOT_SIZE as i64);
        let at = self.b.ins().iadd(slots, at);
        [0, 4, 8, 12].map(|o| self.load(types::I32, at, o))
    }

    /// The 32-bit word `word` of `image`, widened.
    fn word(&mut self, image: Value, word: Value) -> Value {
        let at = self.b.ins().imul_imm_s(word, 4);
        let at = self.b.ins().iadd(image, at);
        self.load(types::I32, at, 0)
    }

    /// Read operand `op`'s elements from `image` into `matrix` (u64 per element); a later
    /// copy that differs from the first sets the flag in `bad`.
    fn unpack(
        &mut self,
        w: Value,
        op: u32,
        image: Value,
        matrix: Value,
        bad: cranelift_codegen::ir::StackSlot,
    ) {
        let (count, slots, mask, wide) = self.operand(w, op);
        self.counted(count, &mut |e, i| {
            let [word, shift, cell, copy] = e.slot(slots, i);
            let low = e.word(image, word);
            // the high word of a 64-bit register (for a 32-bit one the same word again:
            // never read past the image)
            let next = e.b.ins().iadd_imm_s(word, 1);
            let high_at = e.b.ins().select(wide, next, word);
            let high = e.word(image, high_at);
            let high = e.b.ins().ishl_imm_s(high, 32);
            let zero = e.b.ins().iconst(types::I64, 0);
            let high = e.b.ins().select(wide, high, zero);
            let register = e.b.ins().bor(low, high);
            let v = e.b.ins().ushr(register, shift);
            let v = e.b.ins().band(v, mask);
            let at = e.b.ins().imul_imm_s(cell, 8);
            let at = e.b.ins().iadd(matrix, at);
            let old = e.b.ins().load(types::I64, MemFlagsData::trusted(), at, 0);
            let is_copy = e.b.ins().icmp_imm_s(IntCC::NotEqual, copy, 0);
            let new = e.b.ins().select(is_copy, old, v);
            e.b.ins().store(MemFlagsData::trusted(), new, at, 0);
            let differs = e.b.ins().icmp(IntCC::NotEqual, old, v);
            let differs = e.b.ins().band(differs, is_copy);
            let differs = e.b.ins().uextend(e.ptr, differs);
            let seen = e.b.ins().stack_load(e.ptr, e.ptr, bad, 0);
            let seen = e.b.ins().bor(seen, differs);
            e.b.ins().stack_store(e.ptr, seen, bad, 0);
        });
    }

    /// Write d's image from D: zero it, then every slot's value into its bits.
    fn pack(&mut self, w: Value, matrix: Value, image: Value) {
        let lanes = self.table_field(w, None, LANES);
        let words = self.table_field(w, Some(3), WORDS);
        let all = self.b.ins().imul(lanes, words);
        self.counted(all, &mut |e, i| {
            let at = e.b.ins().imul_imm_s(i, 4);
            let at = e.b.ins().iadd(image, at);
            let z = e.b.ins().iconst(types::I32, 0);
            e.b.ins().store(MemFlagsData::trusted(), z, at, 0);
        });
        let (count, slots, mask, wide) = self.operand(w, 3);
        self.counted(count, &mut |e, i| {
            let [word, shift, cell, _copy] = e.slot(slots, i);
            let at = e.b.ins().imul_imm_s(cell, 8);
            let at = e.b.ins().iadd(matrix, at);
            let v = e.b.ins().load(types::I64, MemFlagsData::trusted(), at, 0);
            let v = e.b.ins().band(v, mask);
            let v = e.b.ins().ishl(v, shift);
            let low_at = e.b.ins().imul_imm_s(word, 4);
            let low_at = e.b.ins().iadd(image, low_at);
            let old =
                e.b.ins()
                    .load(types::I32, MemFlagsData::trusted(), low_at, 0);
            let low = e.b.ins().ireduce(types::I32, v);
            let low = e.b.ins().bor(old, low);
            e.b.ins().store(MemFlagsData::trusted(), low, low_at, 0);
            // a 64-bit register's high word
            let write_high = e.b.create_block();
            let go_on = e.b.create_block();
            e.b.ins().brif(wide, write_high, &[], go_on, &[]);
            e.b.switch_to_block(write_high);
            let high = e.b.ins().ushr_imm_s(v, 32);
            let high = e.b.ins().ireduce(types::I32, high);
            e.b.ins().store(MemFlagsData::trusted(), high, low_at, 4);
            e.b.ins().jump(go_on, &[]);
            e.b.switch_to_block(go_on);
        });
    }
}
