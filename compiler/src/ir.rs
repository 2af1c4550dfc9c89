//! The checked intermediate representation: one [`Instruction`] per concrete instruction
//! name. An instruction is its [`Arithmetic`] (operand formats, k, scale factors and a fully
//! resolved [`Pipeline`]: no names, no expressions, every parameter a number) and its
//! [`Provenance`] (pipeline name, arguments, spans, names of intermediate sums). Equal
//! arithmetic computes equal results on every input: it is the identity of a kernel.
//!
//! Only [`crate::check`] constructs the IR from source; [`crate::valid::validate`] checks
//! the invariants below on any IR and computes the facts the engines rely on
//! ([`crate::valid::SpecInfo`]), so the engines take a spec only together with its info.
//!
//! Invariants (checked by the validator):
//! - `k` is a multiple of every chain length, group size, block size and pairwise group size;
//!   a scaled group lies inside one scale block;
//! - every product, `c`, every group and every alignment node but the last is consumed
//!   exactly once, a node only by a later node; the last node is the sum that is normalised;
//! - the last normalisation step (and only it) produces `d`: d's exponent range, at most d's
//!   precision; fused and sequential pipelines take float operands, integer ones integers;
//! - every intermediate width is within [`MAX_WIDTH_BITS`] and every F within [`MAX_F`].

use crate::diagnostic::Span;
use crate::exact::Rounding;
use crate::format::Format;

/// The widest fixed-point accumulator the checker accepts, in bits.
pub const MAX_WIDTH_BITS: u32 = 4096;
/// The largest F (fraction bits kept by an alignment) the checker accepts.
pub const MAX_F: i64 = 1024;
/// The largest dimension (m, n or k) of an instruction.
pub const MAX_DIMENSION: u32 = 65536;

/// A checked spec file.
#[derive(Clone, Debug)]
pub struct Spec {
    pub arch: String,
    pub title: Option<String>,
    pub instructions: Vec<Instruction>,
}

impl Spec {
    pub fn instruction(&self, name: &str) -> Option<&Instruction> {
        self.instructions.iter().find(|i| i.name == name)
    }
    /// The position of an instruction in [`Spec::instructions`] (and in its
    /// [`crate::valid::SpecInfo`]).
    pub fn position(&self, name: &str) -> Option<usize> {
        self.instructions.iter().position(|i| i.name == name)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    pub m: u32,
    pub n: u32,
    pub k: u32,
}

/// Block scale factors: one per `block` elements of k, per row of A and per column of B.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScaleSpec {
    pub format: Format,
    pub block: u32,
}

/// Structured sparsity of A (`sparse a 2 of 4 over selected`): of every `group` adjacent
/// columns of A, at most `kept` hold an element; A is stored as those elements and their
/// column positions. The arithmetic is a dense one over what [`Walk`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sparsity {
    pub kept: u32,
    pub group: u32,
    /// `2 of 4 pairs`: the pattern keeps adjacent pairs of elements (2 pairs of every 4,
    /// PTX's 4:8 pair-wise sparsity of 4-bit elements); a stored element's pair partner is
    /// stored too.
    pub pairs: bool,
    pub walk: Walk,
}

/// What a sparse instruction's dense arithmetic runs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Walk {
    /// The selected products only, in increasing column order: k = K * kept / group, each
    /// stored element of A times the row of B its position names.
    Selected,
    /// All K columns: A expanded with +0 at the unselected positions, so zero products,
    /// chain and group boundaries follow the original columns.
    Columns,
}

impl std::fmt::Display for Sparsity {
    /// The pattern as a spec writes it: `2 of 4`, `2 of 4 pairs`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of {}", self.kept, self.group)?;
        if self.pairs {
            f.write_str(" pairs")?;
        }
        Ok(())
    }
}

impl Walk {
    pub fn keyword(self) -> &'static str {
        match self {
            Walk::Selected => "selected",
            Walk::Columns => "columns",
        }
    }
}

impl Sparsity {
    /// Is it a pattern the engines take: 2 of 4 (of elements or of pairs), or 1 of 2?
    pub fn is_known(&self) -> bool {
        matches!(
            (self.kept, self.group, self.pairs),
            (2, 4, _) | (1, 2, false)
        )
    }
    /// Is it a known pattern for elements of `bits` bits (as stored): pairs of 4-bit
    /// ones, 2 of 4 of at most 16 bits, 1 of 2 of 32 bits?
    pub fn fits_elements(&self, bits: u32) -> bool {
        self.is_known()
            && match (self.pairs, self.kept) {
                (true, _) => bits <= 4,
                (false, 2) => bits <= 16,
                (false, _) => bits == 32,
            }
    }
    /// What [`Sparsity::fits_elements`] allows, for a diagnostic's help.
    pub const ELEMENTS: &'static str = "structured sparsity keeps 2 of every 4 elements of at most 16 bits, \
         1 of every 2 of tf32 and other 32-bit elements, and 2 of every 4 pairs \
         (`2 of 4 pairs`) of 4-bit elements";
    /// Columns one group spans: `group`, or twice that for pairs.
    pub fn span(&self) -> u32 {
        self.group * if self.pairs { 2 } else { 1 }
    }
    /// Columns of a group that hold an element: `kept`, or twice that for pairs.
    pub fn kept_columns(&self) -> u32 {
        self.kept * if self.pairs { 2 } else { 1 }
    }
    /// Stored elements of A per row of a dot product of `columns` columns.
    pub fn stored(&self, columns: u32) -> u32 {
        columns / self.span() * self.kept_columns()
    }
    /// The length of the dense arithmetic's dot product for `columns` columns of A.
    pub fn dense_k(&self, columns: u32) -> u32 {
        match self.walk {
            Walk::Selected => self.stored(columns),
            Walk::Columns => columns,
        }
    }
    /// Columns of A from the dense arithmetic's k.
    pub fn columns(&self, dense_k: u32) -> u32 {
        match self.walk {
            Walk::Selected => dense_k / self.kept_columns() * self.span(),
            Walk::Columns => dense_k,
        }
    }
}

/// One concrete instruction.
#[derive(Clone, Debug)]
pub struct Instruction {
    pub name: String,
    /// M and N of the instruction's tile; K is [`Instruction::columns`].
    pub m: u32,
    pub n: u32,
    pub arithmetic: Arithmetic,
    /// Structured sparsity of A: the arithmetic is then the dense one it runs.
    pub sparsity: Option<Sparsity>,
    pub provenance: Provenance,
}

impl Instruction {
    /// M x N x K as the instruction names it (K: columns of A, rows of B).
    pub fn shape(&self) -> Shape {
        Shape {
            m: self.m,
            n: self.n,
            k: self.columns() as u32,
        }
    }
    /// The length of the arithmetic's dot product: K, or for a sparse instruction the
    /// dense k its pipeline runs.
    pub fn k(&self) -> usize {
        self.arithmetic.k as usize
    }
    /// K: columns of A and rows of B (elements of b per dot product).
    pub fn columns(&self) -> usize {
        match &self.sparsity {
            Some(s) => s.columns(self.arithmetic.k) as usize,
            None => self.arithmetic.k as usize,
        }
    }
    /// Elements of a per dot product (K, or the stored elements of a sparse A).
    pub fn stored(&self) -> usize {
        match &self.sparsity {
            Some(s) => s.stored(self.columns() as u32) as usize,
            None => self.arithmetic.k as usize,
        }
    }
    /// Scale factors per row of A (and per column of B) for one dot product.
    pub fn scale_count(&self) -> usize {
        self.arithmetic.scale_count()
    }
    /// Columns of A (rows of B) that share a scale factor: the arithmetic's block, or for
    /// a sparse instruction the columns its block of products comes from.
    pub fn scale_block(&self) -> Option<u32> {
        let block = self.arithmetic.scale.as_ref()?.block;
        Some(self.sparsity.map_or(block, |s| s.columns(block)))
    }
}

/// What one dot-product-add `d = f(c, a[0..k], b[0..k])` computes. Two instructions with
/// equal arithmetic give equal results on every input (they share a kernel).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Arithmetic {
    pub a: Format,
    pub b: Format,
    pub c: Format,
    pub d: Format,
    pub k: u32,
    pub scale: Option<ScaleSpec>,
    pub pipeline: Pipeline,
}

/// How deeply composed pipelines may nest (a composed instruction running one that runs
/// another, ...): the checker refuses deeper ones, the validator relies on it.
pub const MAX_COMPOSED_NESTING: usize = 8;

impl Arithmetic {
    /// How many composed pipelines nest in this arithmetic: 0 for a native one, 1 for a
    /// composed one that runs native ones, and so on.
    pub fn composed_depth(&self) -> usize {
        match &self.pipeline {
            Pipeline::Composed(c) => {
                1 + c
                    .steps
                    .iter()
                    .map(|s| match s {
                        Step::Run { arithmetic, .. } => arithmetic.composed_depth(),
                        _ => 0,
                    })
                    .max()
                    .unwrap_or(0)
            }
            _ => 0,
        }
    }
    /// Scale factors per row of A (and per column of B) for one dot product.
    pub fn scale_count(&self) -> usize {
        self.scale
            .as_ref()
            .map(|s| (self.k / s.block.max(1)) as usize)
            .unwrap_or(0)
    }
}

/// Where an instruction comes from and how it is named: for listings, traces and
/// diagnostics, never for what it computes.
#[derive(Clone, Debug, Default)]
pub struct Provenance {
    /// The pipeline's name and its resolved arguments (every parameter, given or
    /// defaulted, in the pipeline's order), for listings and for moving one.
    pub pipeline: String,
    pub arguments: Vec<(String, Value)>,
    /// The instruction family's declaration.
    pub span: Span,
    /// The `uses` line.
    pub uses: Span,
    /// The pipeline's name where it is defined (in the prelude for std pipelines).
    pub pipeline_span: Span,
    /// The names of a fused pipeline's alignment nodes (`align ... as NAME`), by index.
    pub node_names: Vec<Option<String>>,
    /// A composed pipeline's steps: the `let` names and, for a `run`, what it runs.
    pub steps: Vec<StepProvenance>,
    /// What pins the arithmetic (`evidence model, silicon`); empty when not stated.
    pub evidence: Vec<Evidence>,
}

impl Provenance {
    /// What pins the arithmetic, in words: `model`, `model+silicon`, `assumption`, or
    /// `unstated`.
    pub fn evidence_words(&self) -> String {
        if self.evidence.is_empty() {
            "unstated".into()
        } else {
            let words: Vec<_> = self.evidence.iter().map(|x| x.keyword()).collect();
            words.join("+")
        }
    }
}

/// What pins an instruction's arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Evidence {
    /// Conformance vectors of a bit-accurate model tested against real GPUs (mmasim).
    Model,
    /// Outputs captured on real GPUs.
    Silicon,
    /// The vendor's ISA documentation states the arithmetic exactly (integer MMA).
    Documentation,
    /// None of these: the arithmetic is assumed (RDNA, whose rounding is not public; a
    /// proposed design; an extrapolation from a measured sibling).
    Assumption,
}

impl Evidence {
    pub const ALL: [Evidence; 4] = [
        Evidence::Model,
        Evidence::Silicon,
        Evidence::Documentation,
        Evidence::Assumption,
    ];
    pub fn keyword(self) -> &'static str {
        match self {
            Evidence::Model => "model",
            Evidence::Silicon => "silicon",
            Evidence::Documentation => "documentation",
            Evidence::Assumption => "assumption",
        }
    }
}

/// Where a composed pipeline's step comes from.
#[derive(Clone, Debug, Default)]
pub struct StepProvenance {
    /// The `let` name the step's value is bound to.
    pub label: String,
    /// For a `run`: the instruction it runs (its name and provenance).
    pub run: Option<(String, Box<Provenance>)>,
}

/// How an instruction computes one dot-product-add.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Pipeline {
    /// Fused dot-product-add: exact products, alignment, one exact sum, normalisation.
    Fused(Fused),
    /// Rounded arithmetic step by step: FMA chains, FP32 multiply-add trees.
    Sequential(Sequential),
    /// Exact integer dot product (`s8`, `u4`, ...) or `b1` xor/and popc.
    Integer(IntegerDot),
    /// Built from other instructions' arithmetic: operand conversions, runs of other
    /// arithmetic over subsets of k, and rounded additions.
    Composed(Composed),
}

impl Pipeline {
    /// A short algorithm tag for listings.
    pub fn algorithm(&self) -> &'static str {
        match self {
            Pipeline::Fused(_) => "fused",
            Pipeline::Sequential(_) => "sequential",
            Pipeline::Integer(_) => "integer",
            Pipeline::Composed(_) => "composed",
        }
    }
}

/// Input conditioning: subnormal inputs read as +0 (and for `c`, a -0 reads as +0 too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Conditioning {
    pub flush_a: bool,
    pub flush_b: bool,
    pub flush_c: bool,
}

/// The exponent a zero term takes in a max-exponent search.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZeroExponent {
    /// What decoding gives: the format's minimum exponent (`e_a + e_b` for a product).
    Natural,
    /// A fixed exponent (`e_zero`).
    Fixed(i32),
    /// Zero terms never take part in the search.
    Never,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ZeroExponents {
    pub products: ZeroExponent,
    pub c: ZeroExponent,
    pub groups: ZeroExponent,
}

/// Which products a term takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProductsPart {
    All,
    /// Products with even k (within the chained step).
    Even,
    /// Products with odd k.
    Odd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TermSource {
    Products(ProductsPart),
    C,
    Groups,
    /// The sum of an earlier alignment node; its exponent is that node's reference exponent.
    Node(NodeId),
}

/// An alignment node of a fused pipeline: its place in [`Fused::nodes`], which lists the
/// nodes in order (a node sums only earlier ones, each exactly once; the last gives the
/// sum that is normalised).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u32);

impl NodeId {
    /// The node at `index` of [`Fused::nodes`].
    pub fn new(index: usize) -> NodeId {
        NodeId(u32::try_from(index).unwrap_or(u32::MAX))
    }

    /// Its place in [`Fused::nodes`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One input of an alignment node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AlignTerm {
    pub source: TermSource,
    /// Keep `F` fraction bits below the reference exponent, dropping the rest by this
    /// rounding; `None` keeps the term exact.
    pub keep: Option<(u32, Rounding)>,
    /// Drop the term entirely when its exponent is below `reference - n`.
    pub drop_below: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reference {
    /// The largest exponent among the node's terms.
    MaxExponent,
    /// A fixed exponent (a Kulisch-style accumulator).
    Fixed(i32),
}

/// Terms aligned to a reference exponent and summed exactly. (Its name, if any, is
/// provenance: [`Provenance::node_names`]; its width is the validator's.)
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AlignNode {
    pub terms: Vec<AlignTerm>,
    pub reference: Reference,
}

/// What happens when a rounded value exceeds its format's largest finite value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Overflow {
    /// Becomes +-Inf (also for truncating modes: NVIDIA `|x| >= 2^128 -> Inf`).
    Inf,
    /// Clamps to the largest finite value (`.satfinite`).
    Saturate,
    /// Integers only: wraps modulo 2^bits.
    Wrap,
}

impl Overflow {
    /// The rule's keyword in a spec.
    pub fn keyword(self) -> &'static str {
        match self {
            Overflow::Inf => "inf",
            Overflow::Saturate => "saturate",
            Overflow::Wrap => "wrap",
        }
    }
}

/// A value a spec expression evaluates to: what a pipeline's arguments resolve to.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    /// What happens on overflow: `inf`, `saturate`, `wrap`.
    Overflow(Overflow),
    Format(Format),
    Rounding(Rounding),
    Str(String),
    Tuple(Vec<Value>),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.show())
    }
}

impl Value {
    /// How the value reads in an instruction name or a listing.
    pub fn show(&self) -> String {
        match self {
            Value::Int(i) => i.to_string(),
            Value::Overflow(o) => o.keyword().to_string(),
            Value::Format(f) => f.name.clone(),
            Value::Rounding(r) => r.keyword().to_string(),
            Value::Str(s) => s.clone(),
            Value::Tuple(v) => format!(
                "({})",
                v.iter().map(|x| x.show()).collect::<Vec<_>>().join(", ")
            ),
        }
    }
    /// The value when it is a number.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }
}

/// One rounding of the exact sum to a precision and exponent range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NormalizeStep {
    /// The exponent floor (subnormal range) of the step.
    pub min_exponent: i32,
    /// The largest finite exponent, for the final step into `d`.
    pub max_exponent: Option<i32>,
    pub fraction_bits: u32,
    pub rounding: Rounding,
    pub overflow: Overflow,
}

/// The sign of a zero result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZeroSign {
    /// Every zero result is +0 (T-, ST-, GST-FDPA).
    Positive,
    /// An exact zero sum is +0; a nonzero sum that rounds to zero keeps its sign.
    ExactPositive,
}

/// The encoding of a NaN result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NanPolicy {
    /// The format's canonical NaN (`0x7fffffff`, `0x7fff`).
    Canonical,
    /// An IEEE default NaN; the payload is not pinned.
    Ieee,
    /// The first NaN among the inputs, in this order, quieted and converted to d's
    /// format (its fraction aligned at the top of d's, its sign kept); the canonical NaN
    /// when no input is a NaN (an invalid operation, an overflowing product) or d has no
    /// payloads.
    Propagate(NanOrder),
}

/// Which input NaN a propagating unit returns: the first in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NanOrder {
    /// c, then a[0], b[0], a[1], b[1], ...
    CFirst,
    /// a[0], b[0], a[1], b[1], ..., then c.
    ProductsFirst,
}

impl NanPolicy {
    /// Every rule, in the order the language documents them.
    pub const ALL: [NanPolicy; 4] = [
        NanPolicy::Canonical,
        NanPolicy::Ieee,
        NanPolicy::Propagate(NanOrder::CFirst),
        NanPolicy::Propagate(NanOrder::ProductsFirst),
    ];

    /// The word the language writes it with.
    pub fn word(self) -> &'static str {
        match self {
            NanPolicy::Canonical => "canonical",
            NanPolicy::Ieee => "ieee",
            NanPolicy::Propagate(NanOrder::CFirst) => "propagate_c_first",
            NanPolicy::Propagate(NanOrder::ProductsFirst) => "propagate_products_first",
        }
    }
}

/// Groups of products summed exactly before alignment (GST-FDPA).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Grouping {
    pub size: u32,
    /// The group's exponent is the sum of its scale factors' exponents, and its value is
    /// the exact sum of its products times the scale significands.
    pub scaled: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Fused {
    /// Products per chained step (each step's result, in `d`'s format, is the next `c`).
    pub chain: u32,
    pub conditioning: Conditioning,
    /// Products carry the block scale factors of their k.
    pub scaled_products: bool,
    /// A product with `|p| >= 2^x` becomes +-Inf.
    pub product_overflow: Option<i32>,
    pub zero_exponent: ZeroExponents,
    pub grouping: Option<Grouping>,
    pub nodes: Vec<AlignNode>,
    pub normalize: Vec<NormalizeStep>,
    pub zero_sign: ZeroSign,
    pub nan: NanPolicy,
}

/// One IEEE-style rounded arithmetic step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RoundedOp {
    pub format: Format,
    pub rounding: Rounding,
    /// Subnormal results become a zero of the same sign.
    pub flush_keep_sign: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProductRule {
    Exact,
    Rounded(RoundedOp),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sequential {
    pub conditioning: Conditioning,
    pub product: ProductRule,
    /// Products summed in groups of this many by a pairwise tree of rounded additions.
    pub pairwise: Option<(u32, RoundedOp)>,
    /// `c = round(c + term)`, one term (product or group) at a time, in k order.
    pub accumulate: RoundedOp,
    pub nan: NanPolicy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IntegerOp {
    Multiply,
    Xor,
    And,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IntegerDot {
    pub op: IntegerOp,
    pub overflow: Overflow,
}

/// An operand conversion of a composed pipeline: every element rounded into `format`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Conversion {
    pub format: Format,
    pub rounding: Rounding,
    /// What a value beyond the format's range becomes (`Inf`: the format's infinity, or
    /// NaN where it has none; `Saturate`: its largest finite value).
    pub overflow: Overflow,
}

/// A value of a composed pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepValue {
    /// The instruction's c (converted, if c is).
    C,
    /// A zero (+0, or -0 where `negative`), in whatever format it is used. -0 is the
    /// identity of IEEE addition (x + -0 = x, signed zeros included).
    Zero { negative: bool },
    /// The result of an earlier step.
    Step(usize),
}

/// One step of a composed pipeline; its result is a value in a format: the run's d, or
/// the rounded operation's format.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Another arithmetic over the k positions `positions` (increasing; its lane j takes
    /// position `positions[j]`), with `c` as its c.
    Run {
        arithmetic: Box<Arithmetic>,
        positions: Vec<u32>,
        c: StepValue,
    },
    /// `x + y`, rounded once.
    Add {
        x: StepValue,
        y: StepValue,
        op: RoundedOp,
    },
    /// `x * y + z`, rounded once.
    Fma {
        x: StepValue,
        y: StepValue,
        z: StepValue,
        op: RoundedOp,
    },
}

/// An instruction built from other instructions' arithmetic.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Composed {
    /// Conversions of a, b and c, applied first.
    pub convert_a: Option<Conversion>,
    pub convert_b: Option<Conversion>,
    pub convert_c: Option<Conversion>,
    pub steps: Vec<Step>,
    /// The value that is d.
    pub result: StepValue,
}

impl Composed {
    /// The format of a value (`None` for a zero, which takes the format it is used in), given
    /// the instruction's c format.
    pub fn format_of<'a>(&'a self, v: StepValue, c: &'a Format) -> Option<&'a Format> {
        match v {
            StepValue::C => Some(self.convert_c.as_ref().map_or(c, |x| &x.format)),
            StepValue::Zero { .. } => None,
            StepValue::Step(i) => Some(self.step_format(i)),
        }
    }
    /// The format of step `i`'s result.
    pub fn step_format(&self, i: usize) -> &Format {
        match &self.steps[i] {
            Step::Run { arithmetic, .. } => &arithmetic.d,
            Step::Add { op, .. } | Step::Fma { op, .. } => &op.format,
        }
    }
}
