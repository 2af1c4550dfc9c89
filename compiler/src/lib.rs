//! mmac-compiler: the `.mma` spec language.
//!
//! The pipeline, whole: source text -> [`parse::parse`] (pest, `grammar/mma.pest`) ->
//! [`ast::File`] -> [`check::check`] -> [`ir::Spec`] -> [`interp::run`]. Formats and
//! exact arithmetic live in [`format`] and [`exact`]; diagnostics in [`diagnostic`]; the IR
//! printer (checked IR back to `.mma` text) in [`printer`].

pub mod ast;
pub mod check;
pub mod diagnostic;
pub mod engine;
pub mod exact;
pub mod format;
pub mod interp;
pub mod ir;
pub mod jit;
pub mod parse;
pub mod printer;
pub mod records;

use diagnostic::Diagnostics;
use std::sync::OnceLock;

/// The standard prelude (`import std`): the MMA-Sim operations as named pipelines.
pub const STD_PRELUDE: &str = include_str!("../../specs/std/prelude.mma");

fn std_ast() -> &'static ast::File {
    static STD: OnceLock<ast::File> = OnceLock::new();
    STD.get_or_init(|| parse::parse(STD_PRELUDE).unwrap_or(ast::File { items: vec![] }))
}

/// Parse and check a spec: the whole front end in one call.
pub fn compile(file_name: &str, text: &str) -> Result<ir::Spec, Diagnostics> {
    let ast = parse::parse(text).map_err(|d| Diagnostics::new(file_name, text, vec![d]))?;
    check::check(&ast, std_ast()).map_err(|ds| Diagnostics::new(file_name, text, ds))
}

#[cfg(test)]
mod tests {
    #[test]
    fn prelude_parses() {
        super::parse::parse(super::STD_PRELUDE).expect("the std prelude parses");
    }
}
