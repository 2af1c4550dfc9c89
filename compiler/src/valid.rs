//! The validator: the gate between the IR and the engines. [`validate`] checks every
//! invariant the IR documents (and those the engines assume), and computes the facts the
//! engines rely on: for every distinct [`Arithmetic`], the value bounds of each term source
//! and, for each alignment node, how many values it sums, the grid of its sum and the bit
//! width of the fixed-point accumulator that holds it exactly ([`SpecInfo`]).
//!
//! Only this module builds a [`SpecInfo`], and [`validate`] returns it inside a
//! [`CheckedSpec`], the only form the engines take: the JIT reads its widths and grids
//! from it instead of re-deriving them, and the interpreter asserts (in debug and test
//! builds) that every sum it computes fits the width computed here, so each test run also
//! tests the analysis the JIT relies on.

use crate::checked::{CheckedInstruction, CheckedSpec};
use crate::diagnostic::{Code, Diag};
use crate::exact::Dyadic;
use crate::format::{FloatFormat, Format, FormatKind, IntFormat, Specials};
use crate::ir::*;
use std::collections::HashMap;

/// What the validator established about a spec: one [`ArithmeticInfo`] per distinct
/// arithmetic, and which one each instruction has.
#[derive(Clone, Debug)]
pub struct SpecInfo {
    arithmetics: Vec<ArithmeticInfo>,
    /// Per instruction (in [`Spec::instructions`] order), its index into `arithmetics`.
    of_instruction: Vec<usize>,
    /// The first instruction of each distinct arithmetic.
    first: Vec<usize>,
}

impl SpecInfo {
    /// The info of instruction `index` (its position in [`Spec::instructions`]).
    pub fn instruction(&self, index: usize) -> &ArithmeticInfo {
        &self.arithmetics[self.of_instruction[index]]
    }
    /// The distinct arithmetic of instruction `index`: instructions with the same number
    /// compute the same function and share a kernel.
    pub fn arithmetic_index(&self, index: usize) -> usize {
        self.of_instruction[index]
    }
    /// How many distinct arithmetics the spec has.
    pub fn arithmetic_count(&self) -> usize {
        self.arithmetics.len()
    }
    /// One instruction of each distinct arithmetic (the first), with its info.
    pub fn distinct(&self) -> impl Iterator<Item = (usize, &ArithmeticInfo)> {
        self.first.iter().map(|&i| (i, self.instruction(i)))
    }
}

/// What the validator established about one arithmetic: its pipeline by kind ([`Kind`]),
/// the operand formats refined (float formats for the float pipelines, integer formats
/// for the integer ones), and the facts the engines compute with. Only the validator
/// builds one; the engines take it inside a [`crate::checked::Checked`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArithmeticInfo {
    kind: KindInfo,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum KindInfo {
    Fused(Box<CheckedFused>),
    Sequential(Box<CheckedSequential>),
    Integer(CheckedInteger),
    Composed(Box<CheckedComposed>),
}

/// A checked arithmetic by pipeline kind. The structs its variants refer to have public
/// fields to read, and are `#[non_exhaustive]`, so that none is built outside this crate:
/// every one comes from the validator.
#[derive(Clone, Copy, Debug)]
pub enum Kind<'a> {
    Fused(&'a CheckedFused),
    Sequential(&'a CheckedSequential),
    Integer(&'a CheckedInteger),
    Composed(&'a CheckedComposed),
}

/// The operand formats of a pipeline that computes on floats, and its scale factors'.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FloatOperands {
    pub a: FloatFormat,
    pub b: FloatFormat,
    pub c: FloatFormat,
    pub d: FloatFormat,
    /// The scale factors' format and block, for block-scaled instructions.
    pub scale: Option<(FloatFormat, u32)>,
}

/// The operand formats of an integer pipeline.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntOperands {
    pub a: IntFormat,
    pub b: IntFormat,
    pub c: IntFormat,
    pub d: IntFormat,
}

/// A fused pipeline with float operands and the facts of its alignments.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedFused {
    pub operands: FloatOperands,
    pub pipeline: Fused,
    /// Where the block scale factors apply, with their format.
    pub scaling: Scaling,
    pub facts: FusedInfo,
}

/// Where a fused pipeline applies its block scale factors (the instruction has them
/// exactly when they apply somewhere).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scaling {
    Unscaled,
    /// Folded into every product (`multiply exact, scaled`).
    Products(FloatFormat),
    /// Applied to every group (`group G products exact, scaled`).
    Groups(FloatFormat),
}

/// A sequential pipeline with float operands.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedSequential {
    pub operands: FloatOperands,
    pub pipeline: Sequential,
}

/// An integer pipeline with integer operands.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedInteger {
    pub operands: IntOperands,
    pub pipeline: IntegerDot,
}

/// A composed pipeline, and the info of each step's arithmetic (`None` for the steps that
/// are not runs), in step order.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedComposed {
    pub pipeline: Composed,
    pub runs: Vec<Option<ArithmeticInfo>>,
}

impl ArithmeticInfo {
    /// The arithmetic by pipeline kind.
    pub fn kind(&self) -> Kind<'_> {
        match &self.kind {
            KindInfo::Fused(f) => Kind::Fused(f),
            KindInfo::Sequential(s) => Kind::Sequential(s),
            KindInfo::Integer(i) => Kind::Integer(i),
            KindInfo::Composed(c) => Kind::Composed(c),
        }
    }
    /// The facts of a fused pipeline's alignments (`None` for the other kinds).
    pub fn fused(&self) -> Option<&FusedInfo> {
        match &self.kind {
            KindInfo::Fused(f) => Some(&f.facts),
            _ => None,
        }
    }
}

/// Bounds on the values a term source can take: a nonzero value has its exponent (the
/// one the max-exponent search sees) in `[min_exp, max_exp]`, its magnitude below
/// `2^(exponent + sig_bits)`, and is a multiple of `2^lsb`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub min_exp: i64,
    pub max_exp: i64,
    pub sig_bits: i64,
    pub lsb: i64,
}

impl Bounds {
    /// An exclusive bound on the exponent of the magnitude: `|value| < 2^top()`.
    pub fn top(&self) -> i64 {
        self.max_exp + self.sig_bits
    }
    /// The bounds of a finite element of a format (an integer: its value range).
    pub fn of_format(format: &Format) -> Bounds {
        match &format.kind {
            FormatKind::Float(x) => Bounds {
                min_exp: x.min_exponent() as i64,
                max_exp: x.max_exponent() as i64,
                sig_bits: 1,
                lsb: x.min_exponent() as i64 - x.mantissa_bits as i64,
            },
            FormatKind::Int(i) => Bounds {
                min_exp: 0,
                max_exp: 0,
                sig_bits: i.bits as i64,
                lsb: 0,
            },
        }
    }
}

/// The facts of a fused pipeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusedInfo {
    /// Exact products (with their scale factors when products are scaled).
    pub products: Bounds,
    /// c: c's format in the first chained step, d's in the others.
    pub c: Bounds,
    /// Groups of products, summed exactly (and scaled).
    pub groups: Option<Bounds>,
    /// One per alignment node, in order.
    pub nodes: Vec<NodeInfo>,
}

/// Where the lowest bit of an alignment node's sum lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grid {
    /// A fixed exponent: every term is exact, or the reference is fixed.
    Static(i64),
    /// `F` bits below the node's reference exponent (a max-exponent alignment whose every
    /// term keeps at most `F` fraction bits).
    BelowReference(u32),
}

/// The facts of one alignment node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// Values summed per chained step (0 when every source is empty, e.g. the odd
    /// products of a one-product step): the sum is then 0 and takes no exponent.
    pub items: u64,
    /// The bounds of each term source, parallel to [`AlignNode::terms`].
    pub inputs: Vec<Bounds>,
    /// The grid the sum is a multiple of.
    pub grid: Grid,
    /// Bits of a two's-complement accumulator that holds the sum exactly, sign included:
    /// `|sum| <= 2^(width_bits - 1)` units of the grid.
    pub width_bits: u32,
    /// The sum's bounds as a term of a later node (its exponent is the reference).
    pub value: Bounds,
}

impl NodeInfo {
    /// The exponent of the sum's grid, given the node's reference exponent.
    pub fn grid_exponent(&self, reference: i64) -> i64 {
        match self.grid {
            Grid::Static(g) => g,
            Grid::BelowReference(f) => reference - f as i64,
        }
    }

    /// Does `sum` fit the grid and width computed here? (`reference` is the node's
    /// reference exponent, `None` when no term took part.)
    pub fn holds(&self, sum: &Dyadic, reference: Option<i64>) -> bool {
        if sum.is_zero() {
            return true;
        }
        let Some(r) = reference else { return false };
        let g = self.grid_exponent(r);
        // on the grid: mantissa * 2^exponent is a multiple of 2^g
        let tz = sum.mantissa.trailing_zeros().unwrap_or(0) as i64;
        if sum.exponent + tz < g {
            return false;
        }
        // |sum| <= 2^(g + width - 1)
        let top = g + self.width_bits as i64 - 1;
        match sum.leading_exponent() {
            Some(le) if le < top => true,
            Some(le) if le == top => sum.mantissa.magnitude().count_ones() == 1,
            _ => false,
        }
    }
}

fn clog2(n: u64) -> i64 {
    (u64::BITS - n.saturating_sub(1).leading_zeros()) as i64
}

/// Validate a spec: every instruction's arithmetic keeps the IR's invariants, and every
/// accumulator fits [`MAX_WIDTH_BITS`]. Errors point at the instruction (and for widths,
/// at its pipeline, with the `uses` line). The checked spec is what the engines take.
pub fn validate(spec: Spec) -> Result<CheckedSpec, Vec<Diag>> {
    let info = spec_info(&spec)?;
    Ok(CheckedSpec::new(spec, info))
}

fn spec_info(spec: &Spec) -> Result<SpecInfo, Vec<Diag>> {
    let mut diags = vec![];
    let mut by_arithmetic: HashMap<&Arithmetic, usize> = HashMap::new();
    let mut arithmetics = vec![];
    let mut of_instruction = Vec::with_capacity(spec.instructions.len());
    let mut first = vec![];
    for (index, inst) in spec.instructions.iter().enumerate() {
        if let Err(why) = sparsity(inst) {
            diags.push(invalid_ir(inst, why));
        }
        if let Some(&a) = by_arithmetic.get(&inst.arithmetic) {
            of_instruction.push(a);
            continue;
        }
        match instruction_info(inst) {
            Ok(info) => {
                by_arithmetic.insert(&inst.arithmetic, arithmetics.len());
                of_instruction.push(arithmetics.len());
                first.push(index);
                arithmetics.push(info);
            }
            Err(d) => {
                // report each broken arithmetic once
                by_arithmetic.insert(&inst.arithmetic, usize::MAX);
                of_instruction.push(usize::MAX);
                diags.push(d);
            }
        }
    }
    if diags.is_empty() {
        Ok(SpecInfo {
            arithmetics,
            of_instruction,
            first,
        })
    } else {
        Err(diags)
    }
}

/// Validate one instruction on its own (a neighbouring spec, a candidate).
pub fn validate_instruction(inst: Instruction) -> Result<CheckedInstruction, Diag> {
    sparsity(&inst).map_err(|why| invalid_ir(&inst, why))?;
    let info = instruction_info(&inst)?;
    Ok(CheckedInstruction::new(inst, info))
}

/// The diagnostic for an instruction whose IR breaks an invariant (`why`).
fn invalid_ir(inst: &Instruction, why: String) -> Diag {
    let p = &inst.provenance;
    Diag::new(
        Code::InvalidIr,
        p.span,
        format!("`{}` breaks an invariant of the IR: {why}", inst.name),
    )
    .label("in this instruction")
    .also(p.uses, "with this pipeline")
    .help("this is a bug in mmac's checker (it should have reported the mistake); please report it with the spec")
}

/// A sparse instruction's pattern is 2 of 4 or 1 of 2, and its dense arithmetic covers
/// whole groups of columns (and of scale blocks): the engines' operand transforms rely on
/// it.
fn sparsity(inst: &Instruction) -> Result<(), String> {
    let Some(s) = inst.sparsity else {
        return Ok(());
    };
    if !s.is_known() {
        return Err(format!("sparsity {s} is not 2 of 4 (pairs) or 1 of 2"));
    }
    let whole = |n: u32| match s.walk {
        Walk::Selected => n.is_multiple_of(s.kept_columns()),
        Walk::Columns => n.is_multiple_of(s.span()),
    };
    if !whole(inst.arithmetic.k) {
        return Err(format!(
            "k = {} is not a whole number of sparsity groups",
            inst.arithmetic.k
        ));
    }
    if let Some(sc) = &inst.arithmetic.scale
        && !whole(sc.block)
    {
        return Err(format!(
            "the scale block {} is not a whole number of sparsity groups",
            sc.block
        ));
    }
    Ok(())
}

fn instruction_info(inst: &Instruction) -> Result<ArithmeticInfo, Diag> {
    let p = &inst.provenance;
    let invalid = |why: String| invalid_ir(inst, why);
    if inst.m == 0 || inst.n == 0 || inst.m > MAX_DIMENSION || inst.n > MAX_DIMENSION {
        return Err(invalid(format!(
            "the tile {} x {} is outside 1..={MAX_DIMENSION}",
            inst.m, inst.n
        )));
    }
    arithmetic_info(&inst.arithmetic, 0).map_err(|e| match e {
        Broken::Invariant(why) => invalid(why),
        Broken::TooWide(width) => Diag::new(
            Code::TooWide,
            p.pipeline_span,
            format!(
                "an alignment of pipeline `{}` needs a {width}-bit accumulator",
                p.pipeline
            ),
        )
        .label(format!("more than {MAX_WIDTH_BITS} bits"))
        .also(p.uses, format!("`{}` uses `{}` here", inst.name, p.pipeline))
        .help("the engines compute exactly and refuse accumulators wider than 4096 bits; keep fewer bits or align to a max exponent"),
    })
}

/// Why an arithmetic does not validate.
enum Broken {
    /// An invariant of the IR does not hold (the message says which).
    Invariant(String),
    /// An alignment needs an accumulator of this many bits, more than the engines hold.
    TooWide(i64),
}

/// How deeply composed pipelines may nest (the checker refuses deeper ones).
const MAX_NESTING: usize = MAX_COMPOSED_NESTING;

/// Validate an arithmetic (at composition depth `depth`) and compute its info.
fn arithmetic_info(a: &Arithmetic, depth: usize) -> Result<ArithmeticInfo, Broken> {
    if depth > MAX_NESTING {
        return Err(Broken::Invariant(format!(
            "composed pipelines nest more than {MAX_NESTING} deep"
        )));
    }
    arithmetic(a).map_err(Broken::Invariant)?;
    let kind = match &a.pipeline {
        Pipeline::Fused(f) => {
            let operands = float_operands(a).map_err(Broken::Invariant)?;
            let scale = operands.scale.as_ref().map(|(s, _)| s.clone());
            let scaling = match (
                scale,
                f.scaled_products,
                f.grouping.is_some_and(|g| g.scaled),
            ) {
                (None, false, false) => Scaling::Unscaled,
                (Some(s), true, false) => Scaling::Products(s),
                (Some(s), false, true) => Scaling::Groups(s),
                // (`fused` refused every other combination above)
                _ => {
                    return Err(Broken::Invariant(
                        "scale factors and where they apply disagree".into(),
                    ));
                }
            };
            KindInfo::Fused(Box::new(CheckedFused {
                operands,
                pipeline: f.clone(),
                scaling,
                facts: fused_info(a, f).map_err(Broken::TooWide)?,
            }))
        }
        Pipeline::Composed(c) => {
            let mut runs = Vec::with_capacity(c.steps.len());
            for s in &c.steps {
                runs.push(match s {
                    Step::Run { arithmetic, .. } => Some(arithmetic_info(arithmetic, depth + 1)?),
                    _ => None,
                });
            }
            KindInfo::Composed(Box::new(CheckedComposed {
                pipeline: c.clone(),
                runs,
            }))
        }
        Pipeline::Sequential(s) => KindInfo::Sequential(Box::new(CheckedSequential {
            operands: float_operands(a).map_err(Broken::Invariant)?,
            pipeline: s.clone(),
        })),
        Pipeline::Integer(i) => {
            let int = |f: &Format, role: &str| {
                f.as_int().cloned().ok_or_else(|| {
                    Broken::Invariant(format!("{role} `{}` is not an integer format", f.name))
                })
            };
            KindInfo::Integer(CheckedInteger {
                operands: IntOperands {
                    a: int(&a.a, "a")?,
                    b: int(&a.b, "b")?,
                    c: int(&a.c, "c")?,
                    d: int(&a.d, "d")?,
                },
                pipeline: *i,
            })
        }
    };
    Ok(ArithmeticInfo { kind })
}

/// The operands of a float pipeline, each checked to be a float format.
fn float_operands(a: &Arithmetic) -> Result<FloatOperands, String> {
    Ok(FloatOperands {
        a: float(&a.a, "a")?.clone(),
        b: float(&a.b, "b")?.clone(),
        c: float(&a.c, "c")?.clone(),
        d: float(&a.d, "d")?.clone(),
        scale: match &a.scale {
            Some(s) => Some((float(&s.format, "the scale format")?.clone(), s.block)),
            None => None,
        },
    })
}

/// A format the engines can decode: at most 64 bits, a sane float layout.
fn format_ok(f: &Format) -> Result<(), String> {
    match &f.kind {
        FormatKind::Int(i) => {
            if !(1..=32).contains(&i.bits) {
                return Err(format!("integer format `{}` has {} bits", f.name, i.bits));
            }
        }
        FormatKind::Float(x) => {
            let ok = (1..=15).contains(&x.exponent_bits)
                && x.mantissa_bits <= 52
                && x.code_bits() + x.ignored_low_bits <= x.storage_bits
                && x.storage_bits <= 64
                && (x.specials != Specials::Fnuz || x.signed)
                && x.bias.unsigned_abs() <= 1 << 15;
            if !ok {
                return Err(format!("float format `{}` has an invalid layout", f.name));
            }
        }
    }
    Ok(())
}

fn float<'a>(f: &'a Format, role: &str) -> Result<&'a crate::format::FloatFormat, String> {
    f.as_float()
        .ok_or_else(|| format!("{role} `{}` is not a float format", f.name))
}

fn divides(what: &str, by: u32, k: u32) -> Result<(), String> {
    if by == 0 || !k.is_multiple_of(by) {
        Err(format!("the {what} {by} does not divide {k}"))
    } else {
        Ok(())
    }
}

/// Check the invariants of an arithmetic; returns its fused pipeline, if it is one.
fn arithmetic(a: &Arithmetic) -> Result<Option<&Fused>, String> {
    for f in [&a.a, &a.b, &a.c, &a.d] {
        format_ok(f)?;
    }
    if a.k == 0 || a.k > MAX_DIMENSION {
        return Err(format!("k = {} is outside 1..={MAX_DIMENSION}", a.k));
    }
    if let Some(s) = &a.scale {
        format_ok(&s.format)?;
        float(&s.format, "the scale format")?;
        divides("scale block", s.block, a.k)?;
    }
    match &a.pipeline {
        Pipeline::Fused(f) => {
            fused(a, f)?;
            Ok(Some(f))
        }
        Pipeline::Sequential(s) => {
            float(&a.a, "a")?;
            float(&a.b, "b")?;
            if a.scale.is_some() {
                return Err("a sequential pipeline takes no scale factors".into());
            }
            let op_ok = |op: &RoundedOp, what: &str| -> Result<(), String> {
                if !float(&op.format, what)?.has_inf() {
                    return Err(format!(
                        "{what} rounds into `{}`, which has no Inf",
                        op.format.name
                    ));
                }
                Ok(())
            };
            op_ok(&s.accumulate, "the accumulation")?;
            if s.accumulate.format != a.c || s.accumulate.format != a.d {
                return Err("the accumulation is not in c's and d's format".into());
            }
            if let ProductRule::Rounded(op) = &s.product {
                op_ok(op, "the product")?;
            }
            if let Some((g, op)) = &s.pairwise {
                op_ok(op, "the pairwise sum")?;
                if !g.is_power_of_two() {
                    return Err(format!("pairwise groups of {g} are not a binary tree"));
                }
                divides("pairwise group size", *g, a.k)?;
            }
            Ok(None)
        }
        Pipeline::Composed(c) => {
            composed(a, c)?;
            Ok(None)
        }
        Pipeline::Integer(i) => {
            for (f, role) in [(&a.a, "a"), (&a.b, "b"), (&a.c, "c"), (&a.d, "d")] {
                if f.as_int().is_none() {
                    return Err(format!("{role} `{}` is not an integer format", f.name));
                }
            }
            if a.scale.is_some() {
                return Err("an integer pipeline takes no scale factors".into());
            }
            if i.op != IntegerOp::Multiply
                && (a.a.as_int().is_some_and(|x| x.bits != 1)
                    || a.b.as_int().is_some_and(|x| x.bits != 1))
            {
                return Err("xor/and take single-bit operands".into());
            }
            if i.overflow == Overflow::Inf {
                return Err("integers cannot overflow to Inf".into());
            }
            Ok(None)
        }
    }
}

/// The invariants of a composed pipeline: conversions into float formats; every run
/// takes as many increasing k positions as its arithmetic's k, with the (converted)
/// operand formats and its c format; values refer only to earlier steps; d is the
/// result's format.
fn composed(a: &Arithmetic, c: &Composed) -> Result<(), String> {
    if a.scale.is_some() {
        return Err("a composed pipeline takes no scale factors".into());
    }
    for (conv, from, role) in [
        (&c.convert_a, &a.a, "a"),
        (&c.convert_b, &a.b, "b"),
        (&c.convert_c, &a.c, "c"),
    ] {
        if let Some(conv) = conv {
            format_ok(&conv.format)?;
            float(&conv.format, "a conversion format")?;
            float(from, role)?;
            if conv.overflow == Overflow::Wrap {
                return Err("a conversion wraps".into());
            }
        }
    }
    let fa = c.convert_a.as_ref().map_or(&a.a, |x| &x.format);
    let fb = c.convert_b.as_ref().map_or(&a.b, |x| &x.format);
    let earlier = |v: StepValue, i: usize| match v {
        StepValue::Step(j) if j >= i => {
            Err(format!("step {i} takes step {j}, which is not earlier"))
        }
        _ => Ok(()),
    };
    for (i, s) in c.steps.iter().enumerate() {
        match s {
            Step::Run {
                arithmetic,
                positions,
                c: cv,
            } => {
                earlier(*cv, i)?;
                if positions.len() != arithmetic.k as usize
                    || positions.windows(2).any(|w| w[0] >= w[1])
                    || positions.iter().any(|&p| p >= a.k)
                {
                    return Err(format!(
                        "step {i} does not take {} increasing k positions below {}",
                        arithmetic.k, a.k
                    ));
                }
                if arithmetic.a != *fa || arithmetic.b != *fb || arithmetic.scale.is_some() {
                    return Err(format!("step {i} runs arithmetic of other operand formats"));
                }
                if let Some(f) = c.format_of(*cv, &a.c)
                    && *f != arithmetic.c
                {
                    return Err(format!(
                        "step {i} passes c in `{}`, not `{}`",
                        f.name, arithmetic.c.name
                    ));
                }
            }
            Step::Add { x, y, op } => {
                earlier(*x, i)?;
                earlier(*y, i)?;
                float(&op.format, "an addition's format")?;
            }
            Step::Fma { x, y, z, op } => {
                earlier(*x, i)?;
                earlier(*y, i)?;
                earlier(*z, i)?;
                float(&op.format, "an fma's format")?;
            }
        }
        if let Step::Add { x, y, .. } | Step::Fma { x, y, .. } = s {
            for v in [x, y] {
                if let Some(f) = c.format_of(*v, &a.c) {
                    float(f, "an operand of a rounded step")?;
                }
            }
        }
    }
    earlier(c.result, c.steps.len())?;
    if let Some(f) = c.format_of(c.result, &a.c)
        && *f != a.d
    {
        return Err(format!(
            "the result is in `{}`, not d's `{}`",
            f.name, a.d.name
        ));
    }
    Ok(())
}

fn fused(a: &Arithmetic, f: &Fused) -> Result<(), String> {
    for (x, role) in [(&a.a, "a"), (&a.b, "b"), (&a.c, "c"), (&a.d, "d")] {
        float(x, role)?;
    }
    let d = float(&a.d, "d")?;
    if !d.has_inf() {
        return Err(format!("d `{}` has no Inf and NaN", a.d.name));
    }
    divides("chain length", f.chain, a.k)?;
    let scaled_groups = f.grouping.is_some_and(|g| g.scaled);
    match (&a.scale, f.scaled_products || scaled_groups) {
        (Some(_), false) => return Err("the scale factors are never applied".into()),
        (None, true) => return Err("scale factors are applied but the instruction has none".into()),
        _ => {}
    }
    if f.scaled_products && scaled_groups {
        return Err("both products and groups are scaled".into());
    }
    if let Some(g) = f.grouping {
        divides("group size", g.size, f.chain)?;
        if let (true, Some(s)) = (g.scaled, &a.scale)
            && s.block % g.size != 0
        {
            return Err(format!(
                "a group of {} straddles two scale blocks of {}",
                g.size, s.block
            ));
        }
    }
    if let Some(x) = f.product_overflow
        && x.unsigned_abs() > 100_000
    {
        return Err(format!(
            "the product overflow threshold 2^{x} is out of range"
        ));
    }
    for z in [
        f.zero_exponent.products,
        f.zero_exponent.c,
        f.zero_exponent.groups,
    ] {
        if let ZeroExponent::Fixed(e) = z
            && e.unsigned_abs() > 100_000
        {
            return Err(format!("the zero exponent {e} is out of range"));
        }
    }
    // every term consumed exactly once, nodes only by later nodes
    if f.nodes.is_empty() {
        return Err("the pipeline has no alignment".into());
    }
    let mut uses: HashMap<TermSource, usize> = HashMap::new();
    for (ni, n) in f.nodes.iter().enumerate() {
        if n.terms.is_empty() {
            return Err(format!("alignment {ni} has no terms"));
        }
        if let Reference::Fixed(r) = n.reference
            && r.unsigned_abs() > 100_000
        {
            return Err(format!("alignment {ni} has the reference exponent {r}"));
        }
        for t in &n.terms {
            if let TermSource::Node(i) = t.source
                && i.index() >= ni
            {
                return Err(format!(
                    "alignment {ni} takes alignment {i}, which is not earlier"
                ));
            }
            if t.source == TermSource::Groups && f.grouping.is_none() {
                return Err(format!(
                    "alignment {ni} takes groups, but products are not grouped"
                ));
            }
            if let Some((keep, _)) = t.keep
                && keep as i64 > MAX_F
            {
                return Err(format!(
                    "alignment {ni} keeps {keep} bits, more than {MAX_F}"
                ));
            }
            if t.drop_below.is_some_and(|n| n > 100_000) {
                return Err(format!("alignment {ni} drops terms too far below"));
            }
            *uses.entry(t.source).or_default() += 1;
        }
    }
    let count = |s: TermSource| uses.get(&s).copied().unwrap_or(0);
    let (all, even, odd) = (
        count(TermSource::Products(ProductsPart::All)),
        count(TermSource::Products(ProductsPart::Even)),
        count(TermSource::Products(ProductsPart::Odd)),
    );
    if f.grouping.is_some() {
        if all + even + odd != 0 || count(TermSource::Groups) != 1 {
            return Err("grouped products must be aligned as one group term".into());
        }
    } else if !((all == 1 && even + odd == 0) || (all == 0 && even == 1 && odd == 1)) {
        return Err("every product must be aligned exactly once".into());
    }
    if count(TermSource::C) != 1 {
        return Err(format!("c is aligned {} times", count(TermSource::C)));
    }
    for i in 0..f.nodes.len() {
        let n = count(TermSource::Node(NodeId::new(i)));
        let want = usize::from(i + 1 < f.nodes.len());
        if n != want {
            return Err(format!(
                "alignment {i} is used {n} times (an intermediate sum feeds exactly one later alignment, the last none)"
            ));
        }
    }
    // normalisation: intermediate steps, then exactly one final step into d
    let Some(last) = f.normalize.last() else {
        return Err("the pipeline never normalises".into());
    };
    if f.normalize[..f.normalize.len() - 1]
        .iter()
        .any(|s| s.max_exponent.is_some())
        || last.max_exponent != Some(d.max_exponent())
        || last.min_exponent != d.min_exponent()
        || last.fraction_bits > d.mantissa_bits
    {
        return Err(format!(
            "the last normalisation does not produce d `{}` (its range, at most its precision)",
            a.d.name
        ));
    }
    for s in &f.normalize {
        if s.fraction_bits as i64 > MAX_F || s.min_exponent.unsigned_abs() > 100_000 {
            return Err("a normalisation step is out of range".into());
        }
        if s.overflow == Overflow::Wrap {
            return Err("a float normalisation wraps".into());
        }
    }
    Ok(())
}

/// The width analysis of a fused pipeline whose invariants hold. `Err(bits)` when an
/// accumulator would be wider than [`MAX_WIDTH_BITS`].
fn fused_info(a: &Arithmetic, fused: &Fused) -> Result<FusedInfo, i64> {
    let fa = Bounds::of_format(&a.a);
    let fb = Bounds::of_format(&a.b);
    let mut products = Bounds {
        min_exp: fa.min_exp + fb.min_exp,
        max_exp: fa.max_exp + fb.max_exp,
        sig_bits: 2,
        lsb: fa.lsb + fb.lsb,
    };
    let scale = a.scale.as_ref().map(|s| Bounds::of_format(&s.format));
    if fused.scaled_products
        && let Some(s) = scale
    {
        products = Bounds {
            min_exp: products.min_exp + 2 * s.min_exp,
            max_exp: products.max_exp + 2 * s.max_exp,
            sig_bits: products.sig_bits + 2,
            lsb: products.lsb + 2 * s.lsb,
        };
    }
    let c = {
        let c = Bounds::of_format(&a.c);
        let d = Bounds::of_format(&a.d);
        Bounds {
            min_exp: c.min_exp.min(d.min_exp),
            max_exp: c.max_exp.max(d.max_exp),
            sig_bits: 1,
            lsb: c.lsb.min(d.lsb),
        }
    };
    let groups = fused.grouping.map(|g| {
        let (smin, smax, slsb, sbits) = match (g.scaled, scale) {
            (true, Some(s)) => (2 * s.min_exp, 2 * s.max_exp, 2 * s.lsb - 2 * s.min_exp, 2),
            _ => (0, 0, 0, 0),
        };
        // a group's value is the exact sum of its products' values at the scale exponent
        Bounds {
            min_exp: smin,
            max_exp: smax,
            sig_bits: products.max_exp + products.sig_bits + clog2(g.size as u64) + sbits,
            lsb: products.lsb + slsb.min(0) + smin,
        }
    });
    let chain = fused.chain as u64;
    let mut nodes: Vec<NodeInfo> = vec![];
    for n in &fused.nodes {
        let inputs: Vec<Bounds> = n
            .terms
            .iter()
            .map(|t| match t.source {
                TermSource::Products(_) => products,
                TermSource::C => c,
                TermSource::Groups => groups.expect("validated: groups exist"),
                TermSource::Node(i) => nodes[i.index()].value,
            })
            .collect();
        let items: u64 = n
            .terms
            .iter()
            .map(|t| match t.source {
                TermSource::Products(ProductsPart::All) => chain,
                TermSource::Products(ProductsPart::Even) => chain.div_ceil(2),
                TermSource::Products(ProductsPart::Odd) => chain / 2,
                TermSource::Groups => chain / fused.grouping.map_or(1, |g| g.size as u64),
                TermSource::C | TermSource::Node(_) => 1,
            })
            .sum();
        let keeps: Vec<Option<u32>> = n.terms.iter().map(|t| t.keep.map(|k| k.0)).collect();
        // the reference: a max-exponent search's is the largest exponent of the terms
        // that take part, and a term may take none (a zero sum of a node, or a zero term
        // without a zero exponent), so it can be as low as any one term's smallest
        let (ref_min, ref_max) = match n.reference {
            Reference::MaxExponent => (
                inputs.iter().map(|b| b.min_exp).min().unwrap_or(0),
                inputs.iter().map(|b| b.max_exp).max().unwrap_or(0),
            ),
            Reference::Fixed(r) => (r as i64, r as i64),
        };
        // absolute bounds of the sum's bits
        let hi = inputs
            .iter()
            .map(|b| b.top())
            .max()
            .unwrap_or(0)
            .max(ref_max)
            + clog2(items.max(1));
        let lo_abs = inputs
            .iter()
            .zip(&keeps)
            .map(|(b, k)| match k {
                Some(fused) => (ref_min - *fused as i64).max(b.lsb.min(ref_min - *fused as i64)),
                None => b.lsb,
            })
            .min()
            .unwrap_or(0);
        let fmax = keeps.iter().flatten().copied().max();
        let all_kept = keeps.iter().all(|k| k.is_some());
        let (grid, width) = match (n.reference, fmax) {
            // relative to a max-exponent reference every kept term lies within sig_bits
            // bits above the reference, on the grid of the finest kept term (fm bits below
            // it): a term that keeps fewer bits is as large in units of that grid
            (Reference::MaxExponent, Some(fm)) if all_kept => {
                let rel = inputs
                    .iter()
                    .map(|b| (b.max_exp - ref_max).max(0) + b.sig_bits + fm as i64)
                    .max()
                    .unwrap_or(0);
                (Grid::BelowReference(fm), rel + clog2(items.max(1)) + 1)
            }
            _ => (Grid::Static(lo_abs), hi - lo_abs + 1),
        };
        if width > MAX_WIDTH_BITS as i64 {
            return Err(width);
        }
        // the sum as a later node's term: its exponent is this node's reference, and its
        // magnitude relative to that: every term lies below 2^(its exponent + sig_bits),
        // at most the reference for a max-exponent search (items of them add clog2 bits);
        // against a fixed reference, the largest term's top (a term may lie far above it)
        let relative = match n.reference {
            Reference::MaxExponent => {
                inputs.iter().map(|b| b.sig_bits).max().unwrap_or(0) + clog2(items.max(1))
            }
            Reference::Fixed(r) => hi - r as i64,
        };
        let value = Bounds {
            min_exp: ref_min,
            max_exp: ref_max,
            sig_bits: relative,
            lsb: lo_abs.min(ref_min - fmax.unwrap_or(0) as i64),
        };
        nodes.push(NodeInfo {
            items,
            inputs,
            grid,
            width_bits: width as u32,
            value,
        });
    }
    Ok(FusedInfo {
        products,
        c,
        groups,
        nodes,
    })
}
