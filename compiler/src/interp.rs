//! The reference interpreter: computes one dot-product-add of a validated instruction
//! exactly, with [`Dyadic`] arithmetic, rounding only where the IR says so. Optionally
//! records a trace of every stage (decoded inputs, exponents, the reference exponent of
//! each alignment, what each rounding dropped, the sum and the result).
//!
//! In debug and test builds it asserts that every alignment sum fits the grid and width
//! the validator computed ([`crate::valid::NodeInfo::holds`]): the JIT sizes its
//! accumulators by that analysis, so every test that runs the interpreter also tests it.

use crate::checked::Checked;
use crate::engine::{EvalError, Operands};
use crate::exact::Dyadic;
use crate::format::{Decoded, Finite, Format};
use crate::ieee::{self, Num};
use crate::ir::*;
use crate::valid::{ArithmeticInfo, CheckedFused, CheckedInteger, Kind};
use num_bigint::BigInt;

/// Compute `d` for one dot product of a checked instruction.
pub fn run(inst: Checked, ops: &Operands) -> Result<u64, EvalError> {
    let mut t = Trace { lines: None };
    evaluate(Target::of(inst.instruction()), inst.info(), ops, &mut t)
}

/// Compute `d` and return the trace of every stage.
pub fn run_traced(inst: Checked, ops: &Operands) -> Result<(u64, Vec<String>), EvalError> {
    let mut t = Trace {
        lines: Some(vec![]),
    };
    let d = evaluate(Target::of(inst.instruction()), inst.info(), ops, &mut t)?;
    Ok((d, t.lines.unwrap_or_default()))
}

/// [`run_traced`] of one record with a sparse A's positions (none for a dense
/// instruction): the trace of the dense arithmetic on the operands the positions give it
/// ([`crate::sparse::dense_record`]), after a first line saying where a's elements sit and
/// what the pipeline walks. What `mmac run --trace --meta` prints, and Python's
/// `ins.run(..., meta=, trace=True)`.
pub fn run_traced_record(
    inst: Checked,
    ops: &Operands,
    positions: &[u64],
) -> Result<(u64, Vec<String>), EvalError> {
    let (a, b) = crate::sparse::dense_record(inst, ops.a, ops.b, positions).map_err(|message| {
        EvalError::Pattern {
            instruction: inst.name().to_string(),
            message,
        }
    })?;
    let (d, mut lines) = run_traced(
        inst,
        &Operands {
            a: &a,
            b: &b,
            ..*ops
        },
    )?;
    if let Some(s) = inst.sparsity() {
        let columns: Vec<String> = positions.iter().map(u64::to_string).collect();
        let walk = match s.walk {
            Walk::Selected => "the selected products",
            Walk::Columns => "all columns, a expanded with +0",
        };
        lines.insert(
            0,
            format!(
                "sparse: a's elements at columns {}; the pipeline runs over {walk}",
                columns.join(",")
            ),
        );
    }
    Ok((d, lines))
}

/// What the interpreter computes: an arithmetic under a name, with the provenance its
/// trace names parts by (an instruction, or the run of a composed instruction's step).
#[derive(Clone, Copy)]
struct Target<'a> {
    name: &'a str,
    arithmetic: &'a Arithmetic,
    provenance: &'a Provenance,
}

impl<'a> Target<'a> {
    fn of(inst: &'a Instruction) -> Target<'a> {
        Target {
            name: &inst.name,
            arithmetic: &inst.arithmetic,
            provenance: &inst.provenance,
        }
    }
    fn k(&self) -> usize {
        self.arithmetic.k as usize
    }
    fn scale_count(&self) -> usize {
        self.arithmetic.scale_count()
    }
}

struct Trace {
    lines: Option<Vec<String>>,
}

impl Trace {
    fn on(&self) -> bool {
        self.lines.is_some()
    }
    fn line(&mut self, f: impl FnOnce() -> String) {
        if let Some(l) = &mut self.lines {
            l.push(f());
        }
    }
}

fn check_counts(inst: Target, ops: &Operands) -> Result<(), EvalError> {
    let k = inst.k();
    let s = inst.scale_count();
    for (operand, got, want) in [
        ("a", ops.a.len(), k),
        ("b", ops.b.len(), k),
        ("sa", ops.sa.len(), s),
        ("sb", ops.sb.len(), s),
    ] {
        if got != want {
            return Err(EvalError::OperandCount {
                instruction: inst.name.to_string(),
                operand,
                got,
                want,
            });
        }
    }
    Ok(())
}

fn evaluate(
    inst: Target,
    info: &ArithmeticInfo,
    ops: &Operands,
    t: &mut Trace,
) -> Result<u64, EvalError> {
    check_counts(inst, ops)?;
    match info.kind() {
        Kind::Fused(f) => {
            let d = fused(inst, f, ops, t)?;
            Ok(propagate_nan(inst, f.pipeline.nan, ops, d, t))
        }
        Kind::Sequential(s) => {
            let d = sequential(inst, &s.pipeline, ops, t)?;
            Ok(propagate_nan(inst, s.pipeline.nan, ops, d, t))
        }
        Kind::Integer(i) => integer(inst, i, ops, t),
        Kind::Composed(c) => composed(inst, &c.pipeline, &c.runs, ops, t),
    }
}

// ------------------------------------------------------------------------------------
// Composed pipelines: conversions, runs of other arithmetic, rounded additions.

fn composed(
    inst: Target,
    c: &Composed,
    runs: &[Option<ArithmeticInfo>],
    ops: &Operands,
    t: &mut Trace,
) -> Result<u64, EvalError> {
    let ar = inst.arithmetic;
    let internal = |message: String| EvalError::Internal {
        instruction: inst.name.to_string(),
        message,
    };
    let convert = |raw: u64, from: &Format, conv: &Option<Conversion>| match conv {
        Some(cv) => {
            ieee::convert(raw, from, cv).map_err(|e| internal(format!("converting {raw:x}: {e}")))
        }
        None => Ok(raw),
    };
    let a: Vec<u64> = ops
        .a
        .iter()
        .map(|&x| convert(x, &ar.a, &c.convert_a))
        .collect::<Result<_, _>>()?;
    let b: Vec<u64> = ops
        .b
        .iter()
        .map(|&x| convert(x, &ar.b, &c.convert_b))
        .collect::<Result<_, _>>()?;
    let c_raw = convert(ops.c, &ar.c, &c.convert_c)?;
    for (conv, role, from, to) in [
        (&c.convert_a, "a", ops.a, &a),
        (&c.convert_b, "b", ops.b, &b),
    ] {
        if let Some(cv) = conv {
            t.line(|| {
                format!(
                    "convert {role} to {} ({}): {}",
                    cv.format.name,
                    cv.rounding.short(),
                    from.iter()
                        .zip(to.iter())
                        .map(|(x, y)| format!("{x:x}->{y:x}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            });
        }
    }
    if let Some(cv) = &c.convert_c {
        t.line(|| format!("convert c to {}: {:x}->{c_raw:x}", cv.format.name, ops.c));
    }
    let c_format = c.convert_c.as_ref().map_or(&ar.c, |x| &x.format);
    // each step's value: its encoding and format
    let mut values: Vec<(u64, &Format)> = Vec::with_capacity(c.steps.len());
    let raw_of = |v: StepValue, values: &[(u64, &Format)], format: &Format| -> u64 {
        match v {
            StepValue::C => c_raw,
            StepValue::Zero { negative } => {
                ieee::encode(format, &Num::signed_zero(negative)).unwrap_or(0)
            }
            StepValue::Step(i) => values[i].0,
        }
    };
    let num_of = |v: StepValue, values: &[(u64, &Format)]| -> Num {
        match v {
            StepValue::C => Num::of(&c_format.decode(c_raw)),
            StepValue::Zero { negative } => Num::signed_zero(negative),
            StepValue::Step(i) => Num::of(&values[i].1.decode(values[i].0)),
        }
    };
    let label = |i: usize| {
        inst.provenance
            .steps
            .get(i)
            .map_or_else(|| format!("s{i}"), |p| p.label.clone())
    };
    for (i, step) in c.steps.iter().enumerate() {
        let (raw, format) = match step {
            Step::Run {
                arithmetic,
                positions,
                c: cv,
            } => {
                // (the validator gives every run its info, at its step's position)
                let sub_info = runs
                    .get(i)
                    .and_then(Option::as_ref)
                    .ok_or_else(|| internal(format!("step {i} has no validation info")))?;
                let (name, provenance) =
                    match inst.provenance.steps.get(i).and_then(|p| p.run.as_ref()) {
                        Some((n, p)) => (n.as_str(), p.as_ref()),
                        None => ("run", inst.provenance),
                    };
                let sub = Target {
                    name,
                    arithmetic,
                    provenance,
                };
                let sa: Vec<u64> = positions.iter().map(|&p| a[p as usize]).collect();
                let sb: Vec<u64> = positions.iter().map(|&p| b[p as usize]).collect();
                let sub_c = raw_of(*cv, &values, &arithmetic.c);
                t.line(|| {
                    format!(
                        "let {} = run {name} over k = {} with c = {}",
                        label(i),
                        positions
                            .iter()
                            .map(|p| p.to_string())
                            .collect::<Vec<_>>()
                            .join(","),
                        describe_raw(&arithmetic.c, sub_c)
                    )
                });
                let sub_ops = Operands {
                    c: sub_c,
                    a: &sa,
                    b: &sb,
                    sa: &[],
                    sb: &[],
                };
                let mut inner = Trace {
                    lines: t.on().then(Vec::new),
                };
                let d = evaluate(sub, sub_info, &sub_ops, &mut inner)?;
                for l in inner.lines.unwrap_or_default() {
                    t.line(|| format!("  | {l}"));
                }
                (d, &arithmetic.d)
            }
            Step::Add { x, y, op } => {
                let r = ieee::add(&num_of(*x, &values), &num_of(*y, &values), op);
                (
                    ieee::encode(&op.format, &r).ok_or_else(|| {
                        internal(format!(
                            "{} has no encoding in `{}`",
                            r.show(),
                            op.format.name
                        ))
                    })?,
                    &op.format,
                )
            }
            Step::Fma { x, y, z, op } => {
                let r = ieee::fma(
                    &num_of(*x, &values),
                    &num_of(*y, &values),
                    &num_of(*z, &values),
                    op,
                );
                (
                    ieee::encode(&op.format, &r).ok_or_else(|| {
                        internal(format!(
                            "{} has no encoding in `{}`",
                            r.show(),
                            op.format.name
                        ))
                    })?,
                    &op.format,
                )
            }
        };
        if !matches!(step, Step::Run { .. }) {
            t.line(|| {
                // each operand by name and value: `high 2d00 (0.078125)`
                let operand = |v: StepValue| {
                    let name = match v {
                        StepValue::C => "c".to_string(),
                        StepValue::Zero { negative } => {
                            if negative { "-0" } else { "0" }.to_string()
                        }
                        StepValue::Step(j) => label(j),
                    };
                    match v {
                        StepValue::C => format!("{name} {}", describe_raw(c_format, c_raw)),
                        StepValue::Step(j) => {
                            format!("{name} {}", describe_raw(values[j].1, values[j].0))
                        }
                        StepValue::Zero { .. } => name,
                    }
                };
                let what = match step {
                    Step::Add { x, y, op } => format!(
                        "add {}, {} in {} {}",
                        operand(*x),
                        operand(*y),
                        op.format.name,
                        op.rounding.short()
                    ),
                    Step::Fma { x, y, z, op } => format!(
                        "fma {}, {}, {} in {} {}",
                        operand(*x),
                        operand(*y),
                        operand(*z),
                        op.format.name,
                        op.rounding.short()
                    ),
                    Step::Run { .. } => String::new(),
                };
                format!("let {} = {what}", label(i))
            });
        }
        t.line(|| format!("  {} = {}", label(i), describe_raw(format, raw)));
        values.push((raw, format));
    }
    Ok(raw_of(c.result, &values, &ar.d))
}

fn decode(format: &Format, raw: u64, flush: bool) -> Decoded {
    let d = format.decode(raw);
    if flush
        && let Decoded::Finite(x) = d
        && x.exponent == format.as_float().map(|ff| ff.min_exponent()).unwrap_or(0)
        && x.significand < (1u64 << x.fraction_bits)
    {
        // subnormals (and -0) read as +0
        return Decoded::Finite(Finite {
            negative: false,
            significand: 0,
            ..x
        });
    }
    d
}

fn describe_raw(format: &Format, raw: u64) -> String {
    format!(
        "{:0w$x} ({})",
        raw & format.storage_mask(),
        format.decode(raw).describe(),
        w = format.hex_digits()
    )
}

/// A term of an alignment: its exact value and the exponent it takes in the max search
/// (`None`: a zero that takes no part).
#[derive(Clone, Debug)]
struct Term {
    value: Dyadic,
    exponent: Option<i64>,
}

fn zero_exp(rule: ZeroExponent, natural: i64) -> Option<i64> {
    match rule {
        ZeroExponent::Natural => Some(natural),
        ZeroExponent::Fixed(e) => Some(e as i64),
        ZeroExponent::Never => None,
    }
}

/// The special-value outcome of a set of inputs: NaN, an infinity, or none.
#[derive(Default)]
struct Specials {
    nan: bool,
    pos_inf: bool,
    neg_inf: bool,
}

impl Specials {
    fn add(&mut self, n: &Num) {
        match n {
            Num::Nan => self.nan = true,
            Num::Inf(neg) => {
                if *neg {
                    self.neg_inf = true
                } else {
                    self.pos_inf = true
                }
            }
            Num::Fin(..) => {}
        }
    }
    fn result(&self) -> Option<Num> {
        if self.nan || (self.pos_inf && self.neg_inf) {
            Some(Num::Nan)
        } else if self.pos_inf || self.neg_inf {
            Some(Num::Inf(self.neg_inf))
        } else {
            None
        }
    }
}

/// Multiply two decoded values: NaN rules, `0 * Inf = NaN`, exact finite products.
/// Returns the product, and for finite products the exponent `e_a + e_b`.
fn product(a: &Decoded, b: &Decoded) -> (Num, i64) {
    match (a, b) {
        (Decoded::Nan, _) | (_, Decoded::Nan) => (Num::Nan, 0),
        (Decoded::Inf { negative: x }, Decoded::Inf { negative: y }) => (Num::Inf(x ^ y), 0),
        (Decoded::Inf { negative }, Decoded::Finite(f))
        | (Decoded::Finite(f), Decoded::Inf { negative }) => {
            if f.is_zero() {
                (Num::Nan, 0)
            } else {
                (Num::Inf(negative ^ f.negative), 0)
            }
        }
        (Decoded::Finite(x), Decoded::Finite(y)) => {
            let v = Dyadic::from_parts(
                x.negative ^ y.negative,
                x.significand as u128 * y.significand as u128,
                x.exponent as i64 + y.exponent as i64
                    - x.fraction_bits as i64
                    - y.fraction_bits as i64,
            );
            (
                Num::Fin(x.negative ^ y.negative, v),
                x.exponent as i64 + y.exponent as i64,
            )
        }
    }
}

/// Under `nan propagate_*`, a NaN result carries the first input NaN's payload (in the
/// rule's order), quieted, in d's format; without an input NaN (an invalid operation, an
/// overflowing product) or without payloads in d it stays the canonical NaN.
fn propagate_nan(inst: Target, rule: NanPolicy, ops: &Operands, d: u64, t: &mut Trace) -> u64 {
    let NanPolicy::Propagate(order) = rule else {
        return d;
    };
    let ar = inst.arithmetic;
    if !ar.d.decode(d).is_nan() {
        return d;
    }
    let c = std::iter::once((&ar.c, ops.c, "c".to_string()));
    let products = ops
        .a
        .iter()
        .zip(ops.b)
        .enumerate()
        .flat_map(|(k, (&x, &y))| [(&ar.a, x, format!("a[{k}]")), (&ar.b, y, format!("b[{k}]"))]);
    let first = match order {
        NanOrder::CFirst => c.chain(products).find(|(f, x, _)| f.decode(*x).is_nan()),
        NanOrder::ProductsFirst => products.chain(c).find(|(f, x, _)| f.decode(*x).is_nan()),
    };
    let Some((f, raw, name)) = first else {
        return d;
    };
    match ar.d.nan_carrying(f, raw) {
        Some(bits) => {
            t.line(|| {
                format!(
                    "nan {}: {name} = {raw:x} is the first NaN: d = {bits:x}",
                    rule.word()
                )
            });
            bits
        }
        None => d,
    }
}

/// Encode a result in d's format. A NaN is the format's canonical quiet NaN under either
/// NaN policy (`nan ieee` only means the payload is not pinned). The validator guarantees
/// that every result is rounded into the format; a value that still does not encode is
/// an error, never a silent NaN.
fn encode(inst: Target, n: &Num) -> Result<u64, EvalError> {
    let d = &inst.arithmetic.d;
    let bits = match n {
        Num::Nan => d.encode_nan(),
        Num::Inf(neg) => d.encode_inf(*neg),
        Num::Fin(neg, v) => d.encode_finite(*neg, v),
    };
    bits.ok_or_else(|| EvalError::Internal {
        instruction: inst.name.to_string(),
        message: format!(
            "the result {} is not representable in `{}`",
            n.show(),
            d.name
        ),
    })
}

fn fused(
    inst: Target,
    checked: &CheckedFused,
    ops: &Operands,
    t: &mut Trace,
) -> Result<u64, EvalError> {
    let l = checked.pipeline.chain as usize;
    let mut c = ops.c;
    let mut c_format = &inst.arithmetic.c;
    for (step, start) in (0..inst.k()).step_by(l).enumerate() {
        if inst.k() > l {
            t.line(|| {
                format!(
                    "-- chained step {} (k = {}..{})",
                    step,
                    start,
                    start + l - 1
                )
            });
        }
        let scales = inst.arithmetic.scale.as_ref().map(|s| {
            let block = s.block as usize;
            let blocks = start / block..(start + l).div_ceil(block);
            Scales {
                format: &s.format,
                block,
                sa: &ops.sa[blocks.clone()],
                sb: &ops.sb[blocks],
            }
        });
        let operands = StepOperands {
            c_format,
            c,
            a: &ops.a[start..start + l],
            b: &ops.b[start..start + l],
            scales,
            k0: start,
        };
        c = fused_step(inst, checked, &operands, t)?;
        c_format = &inst.arithmetic.d;
        if inst.k() > l {
            t.line(|| format!("   step result {}", describe_raw(&inst.arithmetic.d, c)));
        }
    }
    Ok(c)
}

/// The name of alignment node `i` of `count` in traces: its `as NAME`, or `sum` for the
/// last.
fn node_name(inst: Target, i: usize, count: usize) -> String {
    match inst.provenance.node_names.get(i).cloned().flatten() {
        Some(n) => n,
        None if i + 1 == count => "sum".into(),
        None => format!("node{i}"),
    }
}

/// The operands of one chained step of a fused pipeline.
struct StepOperands<'a> {
    /// c's format: c's in the first step, d's after.
    c_format: &'a Format,
    c: u64,
    a: &'a [u64],
    b: &'a [u64],
    scales: Option<Scales<'a>>,
    /// The position of the step's first product in the dot product (for traces).
    k0: usize,
}

/// The block scale factors of one chained step.
struct Scales<'a> {
    format: &'a Format,
    block: usize,
    sa: &'a [u64],
    sb: &'a [u64],
}

impl Scales<'_> {
    /// The scale factors of the step's product `k`.
    fn of_product(&self, k: usize) -> (Decoded, Decoded) {
        let j = k / self.block;
        (
            self.format.decode(self.sa[j]),
            self.format.decode(self.sb[j]),
        )
    }
}

/// A product of a chained step: its value, its exponent, and whether it is zero.
struct StepProduct {
    value: Num,
    exponent: i64,
    zero: bool,
}

fn fused_step(
    inst: Target,
    checked: &CheckedFused,
    ops: &StepOperands,
    t: &mut Trace,
) -> Result<u64, EvalError> {
    let f = &checked.pipeline;
    let mut specials = Specials::default();
    let c_term = c_term(f, ops, &mut specials, t);
    let products = step_products(inst, f, ops, &mut specials, t);
    let groups = step_groups(f, ops, &products, &mut specials, t);
    if let Some(sp) = specials.result() {
        t.line(|| format!("special inputs give {}", sp.show()));
        return encode(inst, &sp);
    }
    // every product is finite here (a special one returned above; one that is not is
    // left out, as it would be of no finite sum)
    let product_terms: Vec<Term> = products
        .into_iter()
        .filter_map(|p| {
            let Num::Fin(_, value) = p.value else {
                return None;
            };
            let exponent = if p.zero {
                zero_exp(f.zero_exponent.products, p.exponent)
            } else {
                Some(p.exponent)
            };
            Some(Term { value, exponent })
        })
        .collect();
    let mut node_terms: Vec<Term> = vec![];
    for ni in 0..f.nodes.len() {
        let sources = Sources {
            c: &c_term,
            products: &product_terms,
            groups: &groups,
            nodes: &node_terms,
            k0: ops.k0,
        };
        let term = align(inst, checked, ni, &sources, t)?;
        node_terms.push(term);
    }
    let root = node_terms
        .last()
        .map(|x| x.value.clone())
        .unwrap_or_else(Dyadic::zero);
    normalize(inst, checked, root, t)
}

/// c as an alignment term (a NaN or an infinity noted in `specials`).
fn c_term(fused: &Fused, ops: &StepOperands, specials: &mut Specials, t: &mut Trace) -> Term {
    let c_dec = decode(ops.c_format, ops.c, fused.conditioning.flush_c);
    t.line(|| format!("c = {}", describe_raw(ops.c_format, ops.c)));
    match &c_dec {
        Decoded::Finite(x) => {
            let exponent = if x.is_zero() {
                zero_exp(fused.zero_exponent.c, x.exponent as i64)
            } else {
                Some(x.exponent as i64)
            };
            Term {
                value: x.value(),
                exponent,
            }
        }
        other => {
            specials.add(&Num::of(other));
            Term {
                value: Dyadic::zero(),
                exponent: None,
            }
        }
    }
}

/// The step's exact products, scaled where the pipeline scales them, an overflowing one
/// made infinite where the pipeline says so (NaNs and infinities noted in `specials`).
fn step_products(
    inst: Target,
    fused: &Fused,
    ops: &StepOperands,
    specials: &mut Specials,
    t: &mut Trace,
) -> Vec<StepProduct> {
    let cond = fused.conditioning;
    let ar = inst.arithmetic;
    let product_scales = ops.scales.as_ref().filter(|_| fused.scaled_products);
    let mut products = Vec::with_capacity(ops.a.len());
    for k in 0..ops.a.len() {
        let da = decode(&ar.a, ops.a[k], cond.flush_a);
        let db = decode(&ar.b, ops.b[k], cond.flush_b);
        let (mut p, mut e) = product(&da, &db);
        if let Some(s) = product_scales {
            let (x, y) = s.of_product(k);
            let (s, se) = product(&x, &y);
            p = num_mul(&p, &s);
            e += se;
        }
        if let (Some(x), Num::Fin(neg, v)) = (fused.product_overflow, &p)
            && v.leading_exponent().is_some_and(|le| le >= x as i64)
        {
            p = Num::Inf(*neg);
        }
        let zero = matches!(&p, Num::Fin(_, v) if v.is_zero());
        t.line(|| {
            let shown = match &p {
                Num::Fin(_, v) if !v.is_zero() => format!("{} (e = {e})", show(v)),
                other => other.show(),
            };
            let sc = match product_scales {
                Some(s) => {
                    let j = k / s.block;
                    format!(" * sa {:02x} * sb {:02x}", s.sa[j], s.sb[j])
                }
                None => String::new(),
            };
            format!(
                "p[{:>2}] = a {} * b {}{} = {}",
                ops.k0 + k,
                describe_raw(&ar.a, ops.a[k]),
                describe_raw(&ar.b, ops.b[k]),
                sc,
                shown
            )
        });
        specials.add(&p);
        products.push(StepProduct {
            value: p,
            exponent: e,
            zero,
        });
    }
    products
}

/// The step's groups of products, each summed exactly and scaled where the pipeline
/// scales groups (none without grouping).
fn step_groups(
    fused: &Fused,
    ops: &StepOperands,
    products: &[StepProduct],
    specials: &mut Specials,
    t: &mut Trace,
) -> Vec<Term> {
    let Some(g) = fused.grouping else {
        return vec![];
    };
    let mut groups = vec![];
    for (gi, chunk) in products.chunks(g.size as usize).enumerate() {
        let sum = Dyadic::sum(chunk.iter().filter_map(|p| match &p.value {
            Num::Fin(_, v) => Some(v),
            _ => None,
        }));
        let all_zero = chunk.iter().all(|p| p.zero);
        let group_scales = ops.scales.as_ref().filter(|_| g.scaled);
        let (value, exp, zero_scale) = match group_scales {
            Some(s) => {
                let (x, y) = s.of_product(gi * g.size as usize);
                match product(&x, &y) {
                    (Num::Fin(_, s), e) => (sum.mul(&s), e, s.is_zero()),
                    (other, _) => {
                        specials.add(&other);
                        (Dyadic::zero(), 0, false)
                    }
                }
            }
            None => (sum, 0, false),
        };
        // the group's exponent is the scale exponent; the group value is the exact sum
        // of its products' values scaled by the scale significands
        let exponent = if all_zero || zero_scale {
            zero_exp(fused.zero_exponent.groups, exp)
        } else {
            Some(exp)
        };
        t.line(|| {
            format!(
                "group[{gi}] = {} (e = {})",
                show(&value),
                exponent.map(|e| e.to_string()).unwrap_or("never".into())
            )
        });
        groups.push(Term { value, exponent });
    }
    groups
}

/// The terms an alignment node may take, computed so far in a step.
struct Sources<'a> {
    c: &'a Term,
    products: &'a [Term],
    groups: &'a [Term],
    /// The earlier nodes' sums.
    nodes: &'a [Term],
    k0: usize,
}

/// Alignment node `ni`: its terms aligned to the reference exponent, each rounded to the
/// grid its `keep` gives or dropped below its `drop_below`, and summed exactly.
fn align(
    inst: Target,
    checked: &CheckedFused,
    ni: usize,
    sources: &Sources,
    t: &mut Trace,
) -> Result<Term, EvalError> {
    let f = &checked.pipeline;
    let node = &f.nodes[ni];
    let mut items: Vec<(&Term, &AlignTerm, String)> = vec![];
    for at in &node.terms {
        match at.source {
            TermSource::Products(part) => {
                for (k, p) in sources.products.iter().enumerate() {
                    let take = match part {
                        ProductsPart::All => true,
                        ProductsPart::Even => k % 2 == 0,
                        ProductsPart::Odd => k % 2 == 1,
                    };
                    if take {
                        items.push((p, at, format!("p[{}]", sources.k0 + k)));
                    }
                }
            }
            TermSource::C => items.push((sources.c, at, "c".into())),
            TermSource::Groups => {
                for (gi, g) in sources.groups.iter().enumerate() {
                    items.push((g, at, format!("group[{gi}]")));
                }
            }
            TermSource::Node(i) => items.push((
                &sources.nodes[i.index()],
                at,
                node_name(inst, i.index(), f.nodes.len()),
            )),
        }
    }
    let reference = match node.reference {
        Reference::Fixed(r) => Some(r as i64),
        Reference::MaxExponent => items.iter().filter_map(|(x, _, _)| x.exponent).max(),
    };
    let label = node_name(inst, ni, f.nodes.len());
    t.line(|| {
        format!(
            "align {label}: reference exponent {}",
            reference
                .map(|r| r.to_string())
                .unwrap_or("none (all terms zero)".into())
        )
    });
    let mut sum = Dyadic::zero();
    for (term, at, name) in &items {
        let kept = match reference {
            None => Dyadic::zero(),
            Some(r) => match (at.drop_below, term.exponent) {
                (Some(n), Some(e)) if e < r - n as i64 => {
                    t.line(|| format!("  {name}: dropped (e = {e} < {r} - {n})"));
                    Dyadic::zero()
                }
                _ => match at.keep {
                    Some((fb, mode)) => term.value.round_to_grid(r - fb as i64, mode),
                    None => term.value.clone(),
                },
            },
        };
        if t.on() && !term.value.is_zero() {
            let lost = term.value.add(&kept.neg());
            let how = at
                .keep
                .map(|(fb, m)| format!("keep {fb} bits {}", m.short()))
                .unwrap_or("exact".into());
            t.line(|| {
                format!(
                    "  {name}: {} -> {} ({how}, dropped {})",
                    show(&term.value),
                    show(&kept),
                    show(&lost)
                )
            });
        }
        sum = sum.add(&kept);
    }
    t.line(|| format!("  {label} = {}", show(&sum)));
    // the JIT sizes its accumulators by the validator's analysis: check it here
    let facts = &checked.facts.nodes[ni];
    if cfg!(debug_assertions) && !facts.holds(&sum, reference) {
        return Err(EvalError::Internal {
            instruction: inst.name.to_string(),
            message: format!(
                "alignment {label} summed {}, outside the {}-bit accumulator the validator sized ({:?})",
                show(&sum),
                facts.width_bits,
                facts.grid
            ),
        });
    }
    Ok(Term {
        value: sum,
        exponent: reference,
    })
}

/// The last alignment's sum through every normalisation step into d.
fn normalize(
    inst: Target,
    checked: &CheckedFused,
    root: Dyadic,
    t: &mut Trace,
) -> Result<u64, EvalError> {
    let f = &checked.pipeline;
    let exact_zero = root.is_zero();
    let mut v = root.clone();
    for (si, step) in f.normalize.iter().enumerate() {
        let before = v.clone();
        v = v.round_to_precision(step.fraction_bits, step.min_exponent as i64, step.rounding);
        t.line(|| {
            format!(
                "normalize[{si}]: {} -> {} ({} bits {}, exponent floor {})",
                show(&before),
                show(&v),
                step.fraction_bits,
                step.rounding.short(),
                step.min_exponent
            )
        });
        if let Some(emax) = step.max_exponent
            && v.leading_exponent().is_some_and(|le| le > emax as i64)
        {
            let neg = v.is_negative();
            match step.overflow {
                Overflow::Inf | Overflow::Wrap => {
                    t.line(|| "overflow -> inf".to_string());
                    return encode(inst, &Num::Inf(neg));
                }
                Overflow::Saturate => {
                    let d = &checked.operands.d;
                    let max = Dyadic::from_parts(
                        neg,
                        d.max_significand() as u128,
                        emax as i64 - d.mantissa_bits as i64,
                    );
                    t.line(|| "overflow -> saturate".to_string());
                    return encode(inst, &Num::Fin(neg, max));
                }
            }
        }
    }
    let neg = match f.zero_sign {
        ZeroSign::Positive => v.is_negative(),
        ZeroSign::ExactPositive => !exact_zero && root.is_negative(),
    };
    encode(inst, &Num::Fin(neg, v))
}

fn num_mul(x: &Num, y: &Num) -> Num {
    match (x, y) {
        (Num::Fin(a, u), Num::Fin(b, v)) => Num::Fin(a ^ b, u.mul(v)),
        _ => special_mul(x, y),
    }
}

fn special_mul(x: &Num, y: &Num) -> Num {
    match (x, y) {
        (Num::Nan, _) | (_, Num::Nan) => Num::Nan,
        (Num::Inf(a), Num::Inf(b)) => Num::Inf(a ^ b),
        (Num::Inf(a), Num::Fin(b, v)) | (Num::Fin(b, v), Num::Inf(a)) => {
            if v.is_zero() {
                Num::Nan
            } else {
                Num::Inf(a ^ b)
            }
        }
        (Num::Fin(..), Num::Fin(..)) => num_mul(x, y),
    }
}

/// A dyadic for traces: the exact value and a decimal approximation.
fn show(v: &Dyadic) -> String {
    if v.is_zero() {
        "0".into()
    } else {
        format!("{} (~{})", v, crate::format::show_f64(v.to_f64_lossy()))
    }
}

// ------------------------------------------------------------------------------------
// Sequential pipelines: IEEE-style rounded steps.

fn sequential(
    inst: Target,
    s: &Sequential,
    ops: &Operands,
    t: &mut Trace,
) -> Result<u64, EvalError> {
    let cond = s.conditioning;
    let mut c = Num::of(&decode(&inst.arithmetic.c, ops.c, cond.flush_c));
    t.line(|| {
        format!(
            "c = {} -> {}",
            describe_raw(&inst.arithmetic.c, ops.c),
            c.show()
        )
    });
    let mut terms = vec![];
    for k in 0..inst.k() {
        let da = decode(&inst.arithmetic.a, ops.a[k], cond.flush_a);
        let db = decode(&inst.arithmetic.b, ops.b[k], cond.flush_b);
        let (p, _) = product(&da, &db);
        let p = match (&s.product, &p) {
            (ProductRule::Rounded(ar), Num::Fin(neg, v)) => ieee::round(*neg, v, ar),
            _ => p,
        };
        t.line(|| {
            format!(
                "p[{k:>2}] = a {} * b {} = {}",
                describe_raw(&inst.arithmetic.a, ops.a[k]),
                describe_raw(&inst.arithmetic.b, ops.b[k]),
                p.show()
            )
        });
        terms.push(p);
    }
    if let Some((g, ar)) = &s.pairwise {
        terms = terms
            .chunks(*g as usize)
            .enumerate()
            .map(|(gi, chunk)| {
                // adjacent pairs, level by level (an empty sum is +0)
                let sum = |terms: &[Num]| {
                    terms
                        .iter()
                        .cloned()
                        .reduce(|x, y| ieee::add(&x, &y, ar))
                        .unwrap_or_else(Num::zero)
                };
                let mut level = chunk.to_vec();
                while level.len() > 1 {
                    level = level.chunks(2).map(sum).collect();
                }
                let r = sum(&level);
                t.line(|| format!("group[{gi}] (pairwise) = {}", r.show()));
                r
            })
            .collect();
    }
    for (i, term) in terms.iter().enumerate() {
        c = ieee::add(&c, term, &s.accumulate);
        t.line(|| format!("acc[{i:>2}] = {}", c.show()));
    }
    encode(inst, &c)
}

// ------------------------------------------------------------------------------------
// Integer pipelines.

fn int_value(format: &Format, raw: u64) -> i128 {
    match format.decode(raw) {
        Decoded::Finite(x) => {
            let v = x.significand as i128;
            if x.negative { -v } else { v }
        }
        _ => 0,
    }
}

fn integer(
    inst: Target,
    checked: &CheckedInteger,
    ops: &Operands,
    t: &mut Trace,
) -> Result<u64, EvalError> {
    let p = &checked.pipeline;
    let mut sum: i128 = int_value(&inst.arithmetic.c, ops.c);
    t.line(|| format!("c = {}", describe_raw(&inst.arithmetic.c, ops.c)));
    for k in 0..inst.k() {
        let x = int_value(&inst.arithmetic.a, ops.a[k]);
        let y = int_value(&inst.arithmetic.b, ops.b[k]);
        let term = match p.op {
            IntegerOp::Multiply => x * y,
            IntegerOp::Xor => x ^ y,
            IntegerOp::And => x & y,
        };
        sum += term;
        t.line(|| {
            format!(
                "p[{k:>2}] = {x} {} {y} = {term}",
                match p.op {
                    IntegerOp::Multiply => "*",
                    IntegerOp::Xor => "xor",
                    IntegerOp::And => "and",
                }
            )
        });
    }
    t.line(|| format!("exact sum = {sum}"));
    let fi = &checked.operands.d;
    let (lo, hi) = crate::format::int_range(fi);
    let v = match p.overflow {
        Overflow::Saturate => sum.clamp(lo as i128, hi as i128),
        _ => {
            let m = 1i128 << fi.bits;
            let w = sum.rem_euclid(m);
            if fi.signed && w > hi as i128 {
                w - m
            } else {
                w
            }
        }
    };
    encode(inst, &Num::Fin(v < 0, Dyadic::new(BigInt::from(v), 0)))
}
