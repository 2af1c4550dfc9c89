//! The abstract syntax tree of a `.mma` file: what the user wrote, with byte spans, before
//! any name is resolved. Built by [`crate::parse`], consumed by [`crate::check`].

use crate::diagnostic::Span;

#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Int(i64),
    /// `name` or `name.property` (e.g. `f32`, `toward_zero`, `out.precision`).
    Path(Ident, Option<Ident>),
    Neg(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `match scrutinee { pattern => value, _ => value }`; a `None` pattern is `_`.
    Match(Box<Expr>, Vec<(Option<Expr>, Expr)>),
    Str(String),
    Tuple(Vec<Expr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    /// Exact integer division (an error when there is a remainder).
    Div,
    Pow,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct File {
    pub items: Vec<Item>,
}

#[allow(clippy::large_enum_variant)] // built once per file; boxing buys nothing
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Arch {
        name: Ident,
        title: Option<String>,
        span: Span,
    },
    Import {
        name: Ident,
        span: Span,
    },
    Format(FormatDecl),
    Pipeline(PipelineDecl),
    Instruction(InstructionDecl),
}

#[derive(Clone, Debug, PartialEq)]
pub struct FormatDecl {
    pub name: Ident,
    pub fields: Vec<(Ident, Expr)>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: Ident,
    pub default: Option<Expr>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PipelineDecl {
    pub name: Ident,
    pub params: Vec<Param>,
    pub stages: Vec<Stage>,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    A,
    B,
    C,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TermClass {
    Products,
    C,
    Groups,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProductsPart {
    All,
    Even,
    Odd,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    Products(ProductsPart),
    /// `c`, a group name, or the name of an earlier `align ... as NAME`.
    Named(Ident),
}

#[derive(Clone, Debug, PartialEq)]
pub struct KeepRound {
    pub keep: Expr,
    pub round: Expr,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AlignTerm {
    pub source: Source,
    pub keep_round: Option<KeepRound>,
    pub drop_below: Option<Expr>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Reference {
    MaxExponent,
    Fixed(Expr),
}

#[allow(clippy::large_enum_variant)] // built once per stage; boxing buys nothing
#[derive(Clone, Debug, PartialEq)]
pub enum MultiplyKind {
    Exact,
    Round { format: Expr, rounding: Expr },
    Integer,
    Xor,
    And,
}

#[derive(Clone, Debug, PartialEq)]
pub enum NormalizeTarget {
    /// `to FORMAT`: the result format (range, precision and overflow).
    To(Expr),
    /// `range FORMAT`: only the exponent floor of FORMAT; the value stays exact otherwise.
    Range(Expr),
}

#[derive(Clone, Debug, PartialEq)]
pub enum StageKind {
    Chain {
        length: Expr,
        bytes: bool,
    },
    Flush {
        operands: Vec<Operand>,
    },
    Multiply {
        kind: MultiplyKind,
        scaled: bool,
        overflow_at: Option<Expr>,
        flush_keep_sign: bool,
    },
    ZeroExponent {
        exponent: Option<Expr>,
        class: Option<TermClass>,
    },
    ZeroResult(Ident),
    Group {
        size: Expr,
        scaled: bool,
        name: Ident,
    },
    Align {
        terms: Vec<AlignTerm>,
        reference: Reference,
        keep_round: Option<KeepRound>,
        name: Option<Ident>,
    },
    SumExact,
    Normalize {
        target: NormalizeTarget,
        precision: Option<Expr>,
        rounding: Option<Expr>,
        /// `overflow inf | saturate | wrap` (an expression, so it can be a parameter).
        overflow: Option<Expr>,
    },
    Accumulate {
        format: Expr,
        rounding: Expr,
        flush_keep_sign: bool,
    },
    Pairwise {
        size: Expr,
        format: Expr,
        rounding: Expr,
        flush_keep_sign: bool,
    },
    Nan(Ident),
    /// `convert a, b to FORMAT round MODE [overflow RULE]` (composed pipelines).
    Convert {
        operands: Vec<Operand>,
        format: Expr,
        rounding: Expr,
        overflow: Option<Expr>,
    },
    /// `let NAME = STEP`.
    Let {
        name: Ident,
        value: StepExpr,
    },
    /// `result NAME`: the value that is d.
    Result(Ident),
    /// `for VAR in FROM..TO [step S] { stages }`: the body once per value.
    Repeat {
        var: Ident,
        from: Expr,
        to: Expr,
        step: Option<Expr>,
        body: Vec<Stage>,
    },
    /// `coverage any`: k positions may be used by no `run`, or by several.
    Coverage,
}

/// What a `let` binds in a composed pipeline.
#[derive(Clone, Debug, PartialEq)]
pub enum StepExpr {
    /// `run TARGET over POSITIONS with c = VALUE`.
    Run {
        target: RunTarget,
        /// The k positions: every clause must hold (none: all of them).
        positions: Vec<KClause>,
        c: ValueRef,
        span: Span,
    },
    /// `add X, Y in FORMAT round MODE`.
    Add {
        x: ValueRef,
        y: ValueRef,
        format: Expr,
        rounding: Expr,
    },
    /// `fma X, Y, Z in FORMAT round MODE`: `x * y + z`, rounded once.
    Fma {
        x: ValueRef,
        y: ValueRef,
        z: ValueRef,
        format: Expr,
        rounding: Expr,
    },
    /// Another name for a value.
    Value(ValueRef),
}

/// What a `run` computes with.
#[derive(Clone, Debug, PartialEq)]
pub enum RunTarget {
    /// An instruction of the same spec, by name (an expression giving a string).
    Instruction(Expr),
    /// A pipeline instantiated for the run: `PIPELINE(ARGS) into FORMAT`.
    Pipeline {
        name: Ident,
        args: Vec<Arg>,
        into: Expr,
    },
}

/// A condition on k positions.
#[derive(Clone, Debug, PartialEq)]
pub enum KClause {
    /// `k in FROM..TO [step S]` (inclusive).
    Range {
        from: Box<Expr>,
        to: Box<Expr>,
        step: Option<Box<Expr>>,
        span: Span,
    },
    /// `k mod M in [R, ...]`.
    Mod {
        modulus: Expr,
        residues: Vec<Expr>,
        span: Span,
    },
}

/// A value in a composed pipeline: `0` (+0), `-0`, `c`, or the name of an earlier `let`.
#[derive(Clone, Debug, PartialEq)]
pub enum ValueRef {
    Zero { span: Span, negative: bool },
    Name(Ident),
}

impl ValueRef {
    pub fn span(&self) -> Span {
        match self {
            ValueRef::Zero { span, .. } => *span,
            ValueRef::Name(id) => id.span,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    pub kind: StageKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum NamePart {
    Text(String),
    Placeholder(Ident),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Binding {
    pub names: Vec<Ident>,
    pub values: BindingValues,
    pub span: Span,
}

#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum BindingValues {
    List(Vec<Expr>),
    Range {
        from: Expr,
        to: Expr,
        step: Option<Expr>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    pub name: Option<Ident>,
    pub value: Expr,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Uses {
    pub pipeline: Ident,
    pub args: Vec<Arg>,
    /// `nan RULE` after the arguments: the instruction's NaN rule, in place of the
    /// pipeline's `nan` stage.
    pub nan: Option<Ident>,
    pub span: Span,
}

/// `sparse OPERAND KEPT of GROUP [over selected|columns]`, as written.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseDecl {
    pub operand: char,
    pub operand_span: Span,
    pub kept: Expr,
    pub group: Expr,
    /// `2 of 4 pairs`: adjacent pairs of elements kept together.
    pub pairs: bool,
    /// `over selected` or `over columns` (the selected products when left out).
    pub over: Option<Ident>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct InstructionDecl {
    pub name: Vec<NamePart>,
    pub name_span: Span,
    pub bindings: Vec<Binding>,
    pub shape: Option<([Expr; 3], Span)>,
    pub types: Vec<(char, Expr, Span)>,
    pub scale: Option<(Expr, Expr, Span)>,
    /// `sparse a 2 of 4 over selected`: structured sparsity of an operand.
    pub sparse: Option<SparseDecl>,
    pub uses: Option<Uses>,
    /// `evidence model, silicon`: what pins the arithmetic.
    pub evidence: Vec<Ident>,
    pub span: Span,
}
