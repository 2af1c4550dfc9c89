//! The Verilog back end: a checked instruction's dot-product-add as a combinational
//! circuit ([`circuit`]), lowered from the same IR and validator facts the engines take
//! ([`lower`], with numbers as gates in [`number`]), written as a synthesizable
//! Verilog-2005 module with ports `c`, `a`, `b` (and `sa`, `sb` where scaled) and `d`.
//!
//! Elements are packed lowest k in the low bits, each at its format's storage width, as
//! `mmac gen --format hex` lays them out. [`Circuit::eval`] computes what the Verilog
//! computes, so the lowering is tested against the interpreter without a simulator;
//! `tests/rtl.rs` then simulates the text under Verilator against the JIT.

pub mod circuit;
pub mod lower;
pub mod number;

pub use circuit::{Circuit, Wire};

use crate::checked::Checked;
use crate::engine::Operands;
use crate::format::{Format, FormatKind};
use crate::ir::{Arithmetic, ProductRule, Reference, Step, ZeroExponent};
use crate::valid::{ArithmeticInfo, Grid, Kind};
use num_bigint::BigUint;

/// The ports of an instruction's module, in order: name and width in bits.
pub fn ports(inst: Checked) -> Vec<(&'static str, u32)> {
    let ar = inst.arithmetic();
    let k = ar.k;
    let mut ports = vec![
        ("c", ar.c.storage_bits()),
        ("a", k * ar.a.storage_bits()),
        ("b", k * ar.b.storage_bits()),
    ];
    if let Some(s) = &ar.scale {
        let n = inst.scale_count() as u32 * s.format.storage_bits();
        ports.push(("sa", n));
        ports.push(("sb", n));
    }
    ports.push(("d", ar.d.storage_bits()));
    ports
}

/// The instruction as a circuit with ports `c`, `a`, `b` (`sa`, `sb`) and `d`.
pub fn circuit(inst: Checked) -> Circuit {
    circuit_with(inst, false)
}

/// The instruction's circuit with the cut point at its reference exponent open (input
/// ports `r_in` and `cut` after the operands, output `r` before `d`; see
/// [`lower::arithmetic`]), or
/// None where its arithmetic has none (not fused, or a fixed reference).
pub fn circuit_cut_at_reference(inst: Checked) -> Option<Circuit> {
    let c = circuit_with(inst, true);
    let open = c.outputs().any(|(name, _)| name == "r");
    open.then_some(c)
}

fn circuit_with(inst: Checked, cut_reference: bool) -> Circuit {
    let ar = inst.arithmetic();
    let mut c = Circuit::new(exponent_bits(ar, inst.info()));
    let ports = ports(inst);
    let split = |c: &mut Circuit, name: &str, width: u32, element: u32| -> Vec<Wire> {
        let w = c.input(name, width);
        (0..width / element.max(1))
            .map(|i| c.slice(w, i * element, element))
            .collect()
    };
    let cw = c.input("c", ports[0].1);
    let a = split(&mut c, "a", ports[1].1, ar.a.storage_bits());
    let b = split(&mut c, "b", ports[2].1, ar.b.storage_bits());
    let (sa, sb) = match &ar.scale {
        Some(s) => {
            let bits = s.format.storage_bits();
            (
                split(&mut c, "sa", ports[3].1, bits),
                split(&mut c, "sb", ports[4].1, bits),
            )
        }
        None => (vec![], vec![]),
    };
    let ops = lower::Operands {
        c: cw,
        a,
        b,
        sa,
        sb,
    };
    let d = lower::arithmetic(&mut c, ar, inst.info(), &ops, cut_reference);
    c.output("d", d);
    c
}

/// The width of the exponent wires of an arithmetic's circuit: every exponent the
/// lowering forms is a sum of at most four element exponents (a product and its two scale
/// factors) or a reference, and every shift the difference of two such, offset by an F, a
/// precision or a position in an accumulator; all are bounded by the formats, the
/// validator's facts and the pipeline's parameters collected here.
fn exponent_bits(ar: &Arithmetic, info: &ArithmeticInfo) -> u32 {
    let mut seen = vec![64];
    magnitudes(ar, info, &mut seen);
    let largest = seen.iter().map(|x| x.saturating_abs()).max().unwrap_or(64);
    let bound = 16 * largest;
    1 + (64 - bound.unsigned_abs().leading_zeros())
}

fn format_magnitudes(f: &Format, seen: &mut Vec<i64>) {
    match &f.kind {
        FormatKind::Float(x) => {
            seen.push(x.min_exponent() as i64 - x.mantissa_bits as i64);
            seen.push(x.max_exponent() as i64 + x.mantissa_bits as i64 + 2);
        }
        FormatKind::Int(i) => seen.push(i.bits as i64),
    }
}

/// Every exponent-like number an arithmetic's lowering starts from.
fn magnitudes(ar: &Arithmetic, info: &ArithmeticInfo, seen: &mut Vec<i64>) {
    for f in [&ar.a, &ar.b, &ar.c, &ar.d] {
        format_magnitudes(f, seen);
    }
    if let Some(s) = &ar.scale {
        format_magnitudes(&s.format, seen);
    }
    match info.kind() {
        Kind::Fused(f) => {
            let facts = &f.facts;
            let bounds = std::iter::once(&facts.products)
                .chain([&facts.c])
                .chain(facts.groups.iter())
                .chain(
                    facts
                        .nodes
                        .iter()
                        .flat_map(|n| n.inputs.iter().chain([&n.value])),
                );
            for b in bounds {
                seen.extend([b.min_exp, b.max_exp, b.lsb, b.top()]);
            }
            for n in &facts.nodes {
                seen.push(n.width_bits as i64);
                if let Grid::Static(g) = n.grid {
                    seen.push(g);
                }
            }
            let p = &f.pipeline;
            for node in &p.nodes {
                if let Reference::Fixed(r) = node.reference {
                    seen.push(r as i64);
                }
                for t in &node.terms {
                    seen.push(t.keep.map_or(0, |(fb, _)| fb as i64));
                    seen.push(t.drop_below.unwrap_or(0) as i64);
                }
            }
            for z in [
                p.zero_exponent.products,
                p.zero_exponent.c,
                p.zero_exponent.groups,
            ] {
                if let ZeroExponent::Fixed(e) = z {
                    seen.push(e as i64);
                }
            }
            seen.push(p.product_overflow.unwrap_or(0) as i64);
            for step in &p.normalize {
                seen.push(step.min_exponent as i64);
                seen.push(step.max_exponent.unwrap_or(0) as i64);
                seen.push(step.fraction_bits as i64 + 2);
            }
        }
        Kind::Sequential(s) => {
            let p = &s.pipeline;
            let product = match &p.product {
                ProductRule::Rounded(op) => Some(op),
                ProductRule::Exact => None,
            };
            let ops = [
                Some(&p.accumulate),
                p.pairwise.as_ref().map(|x| &x.1),
                product,
            ];
            for op in ops.into_iter().flatten() {
                format_magnitudes(&op.format, seen);
            }
        }
        Kind::Integer(_) => {}
        Kind::Composed(x) => {
            let p = &x.pipeline;
            for cv in [&p.convert_a, &p.convert_b, &p.convert_c]
                .into_iter()
                .flatten()
            {
                format_magnitudes(&cv.format, seen);
            }
            for (step, run) in p.steps.iter().zip(&x.runs) {
                match (step, run) {
                    (Step::Run { arithmetic, .. }, Some(info)) => {
                        magnitudes(arithmetic, info, seen)
                    }
                    (Step::Add { op, .. } | Step::Fma { op, .. }, _) => {
                        format_magnitudes(&op.format, seen)
                    }
                    _ => {}
                }
            }
        }
    }
}

/// The most products a module unrolls, as the JIT ([`crate::jit`]): the Verilog of an
/// instruction grows with k (about 25 KB per product), and no instruction of the library
/// has more than 256.
pub const MAX_K: usize = 4096;

/// Why the Verilog back end does not lower `inst`, if it does not: a sparse instruction
/// (its module would take B's K rows and gather the selected ones itself, which is not
/// written yet) or one of more than [`MAX_K`] products.
pub fn lowerable(inst: Checked) -> Result<(), String> {
    if let Some(s) = inst.sparsity() {
        return Err(format!(
            "`{}` is sparse ({s}): the Verilog back end lowers dense arithmetic, and a module that gathers B's selected rows itself is not written yet",
            inst.name()
        ));
    }
    if inst.k() > MAX_K {
        return Err(format!(
            "`{}` has k = {}: the Verilog back end unrolls at most {MAX_K} products",
            inst.name(),
            inst.k()
        ));
    }
    Ok(())
}

/// The reserved words of Verilog-2005 (IEEE 1364) and SystemVerilog (IEEE 1800-2017): no
/// module may be named one, and simulators read `.v` files with either set.
const KEYWORDS: &str = "accept_on alias always always_comb always_ff always_latch and assert assign \
     assume automatic before begin bind bins binsof bit break buf bufif0 bufif1 byte \
     case casex casez cell chandle checker class clocking cmos config const \
     constraint context continue cover covergroup coverpoint cross deassign default \
     defparam design disable dist do edge else end endcase endchecker endclass \
     endclocking endconfig endfunction endgenerate endgroup endinterface endmodule \
     endpackage endprimitive endprogram endproperty endsequence endspecify endtable \
     endtask enum event eventually expect export extends extern final first_match for \
     force foreach forever fork forkjoin function generate genvar global highz0 \
     highz1 if iff ifnone ignore_bins illegal_bins implements implies import incdir \
     include initial inout input inside instance int integer interconnect interface \
     intersect join join_any join_none large let liblist library local localparam \
     logic longint macromodule matches medium modport module nand negedge nettype new \
     nexttime nmos nor noshowcancelled not notif0 notif1 null or output package \
     packed parameter pmos posedge primitive priority program property protected \
     pull0 pull1 pulldown pullup pulsestyle_ondetect pulsestyle_onevent pure rand \
     randc randcase randsequence rcmos real realtime ref reg reject_on release repeat \
     restrict return rnmos rpmos rtran rtranif0 rtranif1 s_always s_eventually \
     s_nexttime s_until s_until_with scalared sequence shortint shortreal \
     showcancelled signed small soft solve specify specparam static string strong \
     strong0 strong1 struct super supply0 supply1 sync_accept_on sync_reject_on table \
     tagged task this throughout time timeprecision timeunit tran tranif0 tranif1 tri \
     tri0 tri1 triand trior trireg type typedef union unique unique0 unsigned until \
     until_with untyped use uwire var vectored virtual void wait wait_order wand weak \
     weak0 weak1 while wildcard wire with within wor xnor xor";

/// A Verilog module name from an instruction name: every character that is not a
/// letter, digit or `_` becomes `_`, and a leading digit or a reserved word (`module`,
/// `wire`, SystemVerilog's too) gets a `m_` prefix.
pub fn module_name(instruction: &str) -> String {
    let mut s: String = instruction
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || ch == '_' {
                ch
            } else {
                '_'
            }
        })
        .collect();
    if !s.starts_with(|ch: char| ch.is_ascii_alphabetic() || ch == '_')
        || KEYWORDS.split_whitespace().any(|k| k == s)
    {
        s.insert_str(0, "m_");
    }
    s
}

/// The instruction as a Verilog-2005 module named `module`.
pub fn verilog(inst: Checked, module: &str) -> String {
    module_text(inst, &circuit(inst), module)
}

/// [`verilog`] of [`circuit_cut_at_reference`]: None where there is no such cut point.
pub fn verilog_cut_at_reference(inst: Checked, module: &str) -> Option<String> {
    let c = circuit_cut_at_reference(inst)?;
    let mut text = module_text(inst, &c, module);
    text.insert_str(
        0,
        "// Cut open at the reference exponent, for a proof: r is the reference the circuit\n\
         // computes; where cut is set, the datapath takes r_in in its place.\n",
    );
    Some(text)
}

/// The module text of `c`, a circuit of `inst`, with a header saying what it computes.
fn module_text(inst: Checked, c: &Circuit, module: &str) -> String {
    let ar = inst.arithmetic();
    let mut header = format!(
        "{}: d = c + sum of a[i] * b[i], i < {} (generated by mmac from the checked IR).\n\
         Ports: c ({}), a and b ({} x {} and {}, element i in bits [w*i +: w]), ",
        inst.name(),
        ar.k,
        ar.c.name,
        ar.k,
        ar.a.name,
        ar.b.name,
    );
    if let Some(s) = &ar.scale {
        header.push_str(&format!(
            "sa and sb ({} x {}, one per {} elements of k), ",
            inst.scale_count(),
            s.format.name,
            s.block
        ));
    }
    header.push_str(&format!(
        "d ({}).\nCombinational; {} nodes.",
        ar.d.name,
        c.len()
    ));
    c.verilog(module, &header)
}

/// The operands packed into the module's input ports, in port order.
pub fn pack(inst: Checked, ops: &Operands) -> Vec<BigUint> {
    let ar = inst.arithmetic();
    let pack = |xs: &[u64], bits: u32| {
        xs.iter().rev().fold(BigUint::default(), |acc, &x| {
            (acc << bits) | BigUint::from(x & crate::format::low_mask(bits))
        })
    };
    let mut v = vec![
        BigUint::from(ops.c & ar.c.storage_mask()),
        pack(ops.a, ar.a.storage_bits()),
        pack(ops.b, ar.b.storage_bits()),
    ];
    if let Some(s) = &ar.scale {
        v.push(pack(ops.sa, s.format.storage_bits()));
        v.push(pack(ops.sb, s.format.storage_bits()));
    }
    v
}

#[cfg(test)]
mod tests;
