//! The limits that keep parsing and checking inside a small stack: how deep brackets nest
//! (checked on the text, before pest's recursive descent sees it) and how deep an
//! expression's tree is (checked on pest's pairs, before the AST is built). Both are
//! far above what a spec needs and far below what overflows a thread's stack (a Python
//! thread's, a C program's), so every input is refused with a located error or fits.

use super::Rule;
use super::scan::{Kind, tokens};
use crate::diagnostic::{Code, Diag, Span};
use pest::iterators::Pair;

/// Brackets (`(`, `[`, `{`) open at once, at most.
pub const MAX_NESTING: usize = 32;

/// The depth of an expression's tree, at most: each operand of a sum or product, each
/// parenthesis, `match`, power and negation is one level.
pub const MAX_EXPRESSION_DEPTH: usize = 256;

/// The first bracket that opens more than [`MAX_NESTING`] levels, skipping comments and
/// strings as the grammar does.
pub fn check_nesting(text: &str) -> Result<(), Diag> {
    let mut open: Vec<usize> = vec![];
    for token in tokens(text, 0) {
        match token.kind {
            Kind::Open(_) => {
                open.push(token.start);
                if open.len() > MAX_NESTING {
                    let i = token.start;
                    return Err(Diag::new(
                        Code::TooDeep,
                        Span::new(i, i + 1),
                        format!("brackets nest more than {MAX_NESTING} levels deep"),
                    )
                    .label(format!("level {}", open.len()))
                    .also(Span::new(open[0], open[0] + 1), "the outermost opens here")
                    .help("a spec needs a few levels; name a value or a pipeline instead of nesting it"));
                }
            }
            Kind::Close(_) => {
                open.pop();
            }
            Kind::Word => {}
        }
    }
    Ok(())
}

/// The first expression whose tree is deeper than [`MAX_EXPRESSION_DEPTH`] (a flat sum of
/// thousands of terms is a tree that deep), walked without recursion.
pub fn check_expression_depth(file: &Pair<Rule>) -> Result<(), Diag> {
    let mut stack: Vec<(Pair<Rule>, usize)> = vec![(file.clone(), 0)];
    while let Some((pair, depth)) = stack.pop() {
        let own = match pair.as_rule() {
            // a left-leaning chain: the first operand lies one level per operator down
            Rule::sum_expr | Rule::product_expr => pair.clone().into_inner().count().div_ceil(2),
            Rule::paren | Rule::match_expr | Rule::power_expr | Rule::unary => 1,
            _ => 0,
        };
        let depth = depth + own;
        if depth > MAX_EXPRESSION_DEPTH {
            let s = pair.as_span();
            return Err(Diag::new(
                Code::TooDeep,
                Span::new(s.start(), s.start() + 1),
                format!("an expression more than {MAX_EXPRESSION_DEPTH} levels deep"),
            )
            .label("this expression")
            .help("sums and products count one level per term; split it into named values"));
        }
        stack.extend(pair.into_inner().map(|p| (p, depth)));
    }
    Ok(())
}
