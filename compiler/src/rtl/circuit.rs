//! Word-level combinational circuits: the form every instruction takes on its way to
//! Verilog. A [`Circuit`] is a list of nodes in topological order (each reads only
//! earlier ones), every value an unsigned bit vector of a fixed width; signed values are
//! two's complement and only the operations that care ([`Circuit::slt`],
//! [`Circuit::sext`]) say so. Operations whose operands are constants are folded while
//! building, so a circuit holds only what depends on its inputs.
//!
//! The same circuit is written as Verilog-2005 ([`Circuit::verilog`]) and evaluated here
//! ([`Circuit::eval`], with Verilog's semantics: widths wrap, shifts past the width give
//! zero), so the lowering is tested against the interpreter without a simulator and the
//! simulator then checks the text.

use num_bigint::BigUint;
use num_traits::{One, ToPrimitive, Zero};
use std::fmt::Write as _;

/// A value of the circuit: a node and its width in bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wire {
    id: u32,
    pub width: u32,
}

#[derive(Clone, Debug)]
enum Op {
    Input(usize),
    Const(BigUint),
    Add(Wire, Wire),
    Sub(Wire, Wire),
    Mul(Wire, Wire),
    And(Wire, Wire),
    Or(Wire, Wire),
    Xor(Wire, Wire),
    Not(Wire),
    /// Shift left by an unsigned amount (of any width).
    Shl(Wire, Wire),
    /// Logical shift right by an unsigned amount.
    Shr(Wire, Wire),
    Eq(Wire, Wire),
    Ult(Wire, Wire),
    Slt(Wire, Wire),
    /// `select ? then : otherwise`.
    Mux(Wire, Wire, Wire),
    /// Most significant part first.
    Concat(Vec<Wire>),
    /// The node's width of bits from this low bit.
    Slice(Wire, u32),
}

#[derive(Clone, Debug)]
struct Node {
    op: Op,
    width: u32,
}

/// A combinational circuit with named input and output ports.
#[derive(Clone, Debug, Default)]
pub struct Circuit {
    nodes: Vec<Node>,
    inputs: Vec<(String, Wire)>,
    outputs: Vec<(String, Wire)>,
    /// The width of the exponent wires the lowering makes (two's complement).
    exp_bits: u32,
}

fn mask(width: u32) -> BigUint {
    (BigUint::one() << width) - 1u32
}

impl Circuit {
    /// An empty circuit whose exponent wires have `exp_bits` bits.
    pub fn new(exp_bits: u32) -> Circuit {
        Circuit {
            exp_bits,
            ..Circuit::default()
        }
    }

    /// The width of exponent wires (signed): wide enough for every exponent, shift and
    /// position the lowering computes.
    pub fn exp_bits(&self) -> u32 {
        self.exp_bits
    }

    /// How many nodes it has (constants included).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The input ports, in declaration order.
    pub fn inputs(&self) -> impl Iterator<Item = (&str, u32)> {
        self.inputs.iter().map(|(n, w)| (n.as_str(), w.width))
    }

    /// The output ports, in declaration order.
    pub fn outputs(&self) -> impl Iterator<Item = (&str, u32)> {
        self.outputs.iter().map(|(n, w)| (n.as_str(), w.width))
    }

    fn push(&mut self, op: Op, width: u32) -> Wire {
        assert!(width > 0, "a wire has at least one bit");
        let id = u32::try_from(self.nodes.len()).expect("fewer than 2^32 nodes");
        self.nodes.push(Node { op, width });
        Wire { id, width }
    }

    /// A node whose operands are all constants is folded into a constant.
    fn node(&mut self, op: Op, width: u32) -> Wire {
        let operands = operands(&op);
        if !operands.is_empty() && operands.iter().all(|w| self.constant(*w).is_some()) {
            let value = self.apply(&op, width, &|w: Wire| {
                self.constant(w).cloned().unwrap_or_default()
            });
            return self.konst(value, width);
        }
        self.push(op, width)
    }

    /// The value of a wire that is a constant.
    pub fn constant(&self, w: Wire) -> Option<&BigUint> {
        match &self.nodes[w.id as usize].op {
            Op::Const(v) => Some(v),
            _ => None,
        }
    }

    pub fn input(&mut self, name: &str, width: u32) -> Wire {
        let w = self.push(Op::Input(self.inputs.len()), width);
        self.inputs.push((name.to_string(), w));
        w
    }

    pub fn output(&mut self, name: &str, w: Wire) {
        self.outputs.push((name.to_string(), w));
    }

    /// An unsigned constant, cut to `width` bits.
    pub fn konst(&mut self, value: impl Into<BigUint>, width: u32) -> Wire {
        let v = value.into() & mask(width);
        self.push(Op::Const(v), width)
    }

    /// A signed constant in two's complement.
    pub fn int(&mut self, value: i64, width: u32) -> Wire {
        let m = BigUint::one() << width;
        let v = if value < 0 {
            &m - (BigUint::from(value.unsigned_abs()) % &m)
        } else {
            BigUint::from(value as u64)
        };
        self.konst(v, width)
    }

    pub fn bit_const(&mut self, b: bool) -> Wire {
        self.konst(b as u32, 1)
    }

    fn same(a: Wire, b: Wire) {
        assert_eq!(a.width, b.width, "operands of equal width");
    }

    pub fn add(&mut self, a: Wire, b: Wire) -> Wire {
        Self::same(a, b);
        if self.constant(a).is_some_and(|v| v.is_zero()) {
            return b;
        }
        if self.constant(b).is_some_and(|v| v.is_zero()) {
            return a;
        }
        self.node(Op::Add(a, b), a.width)
    }
    pub fn sub(&mut self, a: Wire, b: Wire) -> Wire {
        Self::same(a, b);
        if self.constant(b).is_some_and(|v| v.is_zero()) {
            return a;
        }
        self.node(Op::Sub(a, b), a.width)
    }
    pub fn mul(&mut self, a: Wire, b: Wire) -> Wire {
        Self::same(a, b);
        self.node(Op::Mul(a, b), a.width)
    }
    pub fn and(&mut self, a: Wire, b: Wire) -> Wire {
        Self::same(a, b);
        for (x, y) in [(a, b), (b, a)] {
            if let Some(v) = self.constant(x) {
                if v.is_zero() {
                    return x;
                }
                if *v == mask(x.width) {
                    return y;
                }
            }
        }
        self.node(Op::And(a, b), a.width)
    }
    pub fn or(&mut self, a: Wire, b: Wire) -> Wire {
        Self::same(a, b);
        for (x, y) in [(a, b), (b, a)] {
            if let Some(v) = self.constant(x) {
                if v.is_zero() {
                    return y;
                }
                if *v == mask(x.width) {
                    return x;
                }
            }
        }
        self.node(Op::Or(a, b), a.width)
    }
    pub fn xor(&mut self, a: Wire, b: Wire) -> Wire {
        Self::same(a, b);
        self.node(Op::Xor(a, b), a.width)
    }
    pub fn not(&mut self, a: Wire) -> Wire {
        self.node(Op::Not(a), a.width)
    }
    pub fn neg(&mut self, a: Wire) -> Wire {
        let z = self.konst(0u32, a.width);
        self.sub(z, a)
    }
    pub fn shl(&mut self, a: Wire, amount: Wire) -> Wire {
        if self.constant(amount).is_some_and(|v| v.is_zero()) {
            return a;
        }
        self.node(Op::Shl(a, amount), a.width)
    }
    pub fn shr(&mut self, a: Wire, amount: Wire) -> Wire {
        if self.constant(amount).is_some_and(|v| v.is_zero()) {
            return a;
        }
        self.node(Op::Shr(a, amount), a.width)
    }
    pub fn eq(&mut self, a: Wire, b: Wire) -> Wire {
        Self::same(a, b);
        self.node(Op::Eq(a, b), 1)
    }
    pub fn ne(&mut self, a: Wire, b: Wire) -> Wire {
        let e = self.eq(a, b);
        self.not(e)
    }
    pub fn ult(&mut self, a: Wire, b: Wire) -> Wire {
        Self::same(a, b);
        self.node(Op::Ult(a, b), 1)
    }
    pub fn slt(&mut self, a: Wire, b: Wire) -> Wire {
        Self::same(a, b);
        self.node(Op::Slt(a, b), 1)
    }
    /// `a <= b`, signed.
    pub fn sle(&mut self, a: Wire, b: Wire) -> Wire {
        let gt = self.slt(b, a);
        self.not(gt)
    }
    pub fn mux(&mut self, select: Wire, then: Wire, otherwise: Wire) -> Wire {
        assert_eq!(select.width, 1, "a one-bit select");
        Self::same(then, otherwise);
        if then == otherwise {
            return then;
        }
        if let Some(v) = self.constant(select) {
            return if v.is_zero() { otherwise } else { then };
        }
        self.node(Op::Mux(select, then, otherwise), then.width)
    }
    /// Most significant part first.
    pub fn concat(&mut self, parts: &[Wire]) -> Wire {
        if parts.len() == 1 {
            return parts[0];
        }
        let width = parts.iter().map(|w| w.width).sum();
        self.node(Op::Concat(parts.to_vec()), width)
    }
    pub fn slice(&mut self, a: Wire, low: u32, width: u32) -> Wire {
        assert!(low + width <= a.width, "a slice inside its wire");
        if low == 0 && width == a.width {
            return a;
        }
        self.node(Op::Slice(a, low), width)
    }
    pub fn bit(&mut self, a: Wire, i: u32) -> Wire {
        self.slice(a, i, 1)
    }
    /// Zero-extend (or cut) to `width` bits.
    pub fn zext(&mut self, a: Wire, width: u32) -> Wire {
        if width <= a.width {
            return self.slice(a, 0, width);
        }
        let z = self.konst(0u32, width - a.width);
        self.concat(&[z, a])
    }
    /// Sign-extend (or cut) to `width` bits.
    pub fn sext(&mut self, a: Wire, width: u32) -> Wire {
        if width <= a.width {
            return self.slice(a, 0, width);
        }
        let s = self.bit(a, a.width - 1);
        let fill: Vec<Wire> = std::iter::repeat_n(s, (width - a.width) as usize).collect();
        let hi = self.concat(&fill);
        self.concat(&[hi, a])
    }
    /// Whether any bit is set.
    pub fn any(&mut self, a: Wire) -> Wire {
        let z = self.konst(0u32, a.width);
        self.ne(a, z)
    }
    pub fn is_zero(&mut self, a: Wire) -> Wire {
        let z = self.konst(0u32, a.width);
        self.eq(a, z)
    }
    /// The OR of one-bit wires (0 for none).
    pub fn or_all(&mut self, bits: &[Wire]) -> Wire {
        let zero = self.bit_const(false);
        bits.iter().fold(zero, |acc, &b| self.or(acc, b))
    }
    pub fn and_all(&mut self, bits: &[Wire]) -> Wire {
        let one = self.bit_const(true);
        bits.iter().fold(one, |acc, &b| self.and(acc, b))
    }
    /// The index of the highest set bit, as an unsigned number of `width` bits (0 for 0).
    pub fn leading_one(&mut self, a: Wire, width: u32) -> Wire {
        let mut index = self.konst(0u32, width);
        for i in 0..a.width {
            let b = self.bit(a, i);
            let k = self.konst(i, width);
            index = self.mux(b, k, index);
        }
        index
    }

    fn apply(&self, op: &Op, width: u32, value: &dyn Fn(Wire) -> BigUint) -> BigUint {
        let m = mask(width);
        let modulus = BigUint::one() << width;
        let v = |w: Wire| value(w);
        let shift = |w: Wire| v(w).to_u64().filter(|&s| s < u64::from(width));
        let r = match op {
            Op::Input(_) => unreachable!("inputs are given"),
            Op::Const(c) => c.clone(),
            Op::Add(a, b) => v(*a) + v(*b),
            Op::Sub(a, b) => (v(*a) + &modulus) - v(*b),
            Op::Mul(a, b) => v(*a) * v(*b),
            Op::And(a, b) => v(*a) & v(*b),
            Op::Or(a, b) => v(*a) | v(*b),
            Op::Xor(a, b) => v(*a) ^ v(*b),
            Op::Not(a) => v(*a) ^ &m,
            Op::Shl(a, s) => match shift(*s) {
                Some(s) => v(*a) << s,
                None => BigUint::zero(),
            },
            Op::Shr(a, s) => match shift(*s) {
                Some(s) => v(*a) >> s,
                None => BigUint::zero(),
            },
            Op::Eq(a, b) => BigUint::from((v(*a) == v(*b)) as u32),
            Op::Ult(a, b) => BigUint::from((v(*a) < v(*b)) as u32),
            Op::Slt(a, b) => {
                let half = BigUint::one() << (a.width - 1);
                // flipping the sign bits orders two's complement as unsigned
                BigUint::from((v(*a) ^ &half < v(*b) ^ &half) as u32)
            }
            Op::Mux(s, t, e) => {
                if v(*s).is_zero() {
                    v(*e)
                } else {
                    v(*t)
                }
            }
            Op::Concat(parts) => parts
                .iter()
                .fold(BigUint::zero(), |acc, p| (acc << p.width) | v(*p)),
            Op::Slice(a, low) => v(*a) >> *low,
        };
        r & m
    }

    /// The outputs' values for the inputs' values (in port order), as Verilog computes
    /// them.
    pub fn eval(&self, inputs: &[BigUint]) -> Vec<BigUint> {
        let values = self.eval_nets(inputs);
        self.outputs
            .iter()
            .map(|(_, w)| values[w.id as usize].clone())
            .collect()
    }

    /// The value of every node (net `n{i}` of the Verilog text is node `i`).
    pub fn eval_nets(&self, inputs: &[BigUint]) -> Vec<BigUint> {
        let mut values: Vec<BigUint> = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            let v = match &node.op {
                Op::Input(i) => inputs[*i].clone() & mask(node.width),
                op => self.apply(op, node.width, &|w: Wire| values[w.id as usize].clone()),
            };
            values.push(v);
        }
        values
    }

    /// The circuit as a Verilog-2005 module: one net per node, every operation at its
    /// operands' width.
    pub fn verilog(&self, module: &str, header: &str) -> String {
        let mut out = String::new();
        for line in header.lines() {
            let _ = writeln!(out, "// {line}");
        }
        let ports: Vec<String> = self
            .inputs
            .iter()
            .map(|(n, w)| format!("    input  wire [{}:0] {n}", w.width - 1))
            .chain(
                self.outputs
                    .iter()
                    .map(|(n, w)| format!("    output wire [{}:0] {n}", w.width - 1)),
            )
            .collect();
        let _ = writeln!(out, "module {module} (\n{}\n);", ports.join(",\n"));
        for (id, node) in self.nodes.iter().enumerate() {
            if matches!(node.op, Op::Input(_) | Op::Const(_)) {
                continue;
            }
            let expr = self.expression(&node.op, node.width);
            let _ = writeln!(out, "  wire [{}:0] n{id} = {expr};", node.width - 1);
        }
        for (name, w) in &self.outputs {
            let _ = writeln!(out, "  assign {name} = {};", self.name(*w));
        }
        out.push_str("endmodule\n");
        out
    }

    /// How a wire is written in an expression: its net, its port, or a sized constant.
    fn name(&self, w: Wire) -> String {
        match &self.nodes[w.id as usize].op {
            Op::Input(i) => self.inputs[*i].0.clone(),
            Op::Const(v) => format!("{}'h{}", w.width, v.to_str_radix(16)),
            _ => format!("n{}", w.id),
        }
    }

    /// The expression a node of `width` bits computes.
    fn expression(&self, op: &Op, width: u32) -> String {
        let n = |w: &Wire| self.name(*w);
        match op {
            Op::Input(_) | Op::Const(_) => unreachable!("written as names"),
            Op::Add(a, b) => format!("{} + {}", n(a), n(b)),
            Op::Sub(a, b) => format!("{} - {}", n(a), n(b)),
            Op::Mul(a, b) => format!("{} * {}", n(a), n(b)),
            Op::And(a, b) => format!("{} & {}", n(a), n(b)),
            Op::Or(a, b) => format!("{} | {}", n(a), n(b)),
            Op::Xor(a, b) => format!("{} ^ {}", n(a), n(b)),
            Op::Not(a) => format!("~{}", n(a)),
            Op::Shl(a, s) => format!("{} << {}", n(a), n(s)),
            Op::Shr(a, s) => format!("{} >> {}", n(a), n(s)),
            Op::Eq(a, b) => format!("{} == {}", n(a), n(b)),
            Op::Ult(a, b) => format!("{} < {}", n(a), n(b)),
            Op::Slt(a, b) => format!("$signed({}) < $signed({})", n(a), n(b)),
            Op::Mux(s, t, e) => format!("{} ? {} : {}", n(s), n(t), n(e)),
            Op::Concat(parts) => {
                format!("{{{}}}", parts.iter().map(n).collect::<Vec<_>>().join(", "))
            }
            Op::Slice(a, low) => {
                if a.width == 1 {
                    n(a)
                } else if width == 1 {
                    format!("{}[{low}]", n(a))
                } else {
                    format!("{}[{}:{low}]", n(a), low + width - 1)
                }
            }
        }
    }
}

fn operands(op: &Op) -> Vec<Wire> {
    match op {
        Op::Input(_) | Op::Const(_) => vec![],
        Op::Not(a) | Op::Slice(a, _) => vec![*a],
        Op::Add(a, b)
        | Op::Sub(a, b)
        | Op::Mul(a, b)
        | Op::And(a, b)
        | Op::Or(a, b)
        | Op::Xor(a, b)
        | Op::Shl(a, b)
        | Op::Shr(a, b)
        | Op::Eq(a, b)
        | Op::Ult(a, b)
        | Op::Slt(a, b) => vec![*a, *b],
        Op::Mux(s, t, e) => vec![*s, *t, *e],
        Op::Concat(parts) => parts.clone(),
    }
}
