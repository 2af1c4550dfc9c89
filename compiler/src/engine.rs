//! What every engine shares: the inputs of one dot-product-add ([`Operands`]) and why an
//! evaluation could not run ([`EvalError`]). The interpreter and the JIT both speak these
//! types; neither imports the other's.

/// The inputs of one dot product, as raw encodings.
#[derive(Clone, Copy, Debug)]
pub struct Operands<'a> {
    pub c: u64,
    pub a: &'a [u64],
    pub b: &'a [u64],
    /// Scale factors of row i of A, one per block of k (empty without scales).
    pub sa: &'a [u64],
    /// Scale factors of column j of B.
    pub sb: &'a [u64],
}

/// Why an evaluation could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    #[error("{operand} has {got} elements, but `{instruction}` takes {want}")]
    OperandCount {
        instruction: String,
        operand: &'static str,
        got: usize,
        want: usize,
    },
    #[error(
        "{operand}: {records} records {stride} elements apart do not fit in memory, for `{instruction}`"
    )]
    Stride {
        instruction: String,
        operand: &'static str,
        records: usize,
        stride: usize,
    },
    /// An engine could not compute the result exactly (a broken invariant: a bug).
    #[error("internal error computing `{instruction}`: {message}")]
    Internal {
        instruction: String,
        message: String,
    },
}
