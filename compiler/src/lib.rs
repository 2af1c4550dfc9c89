//! mmac-compiler: the `.mma` spec language and the engines that run it.
//!
//! The pipeline, whole: source text -> [`parse::parse`] (pest, `grammar/mma.pest`) ->
//! [`ast::File`] -> [`check::check`] -> [`ir::Spec`] -> [`valid::validate`] ->
//! [`CheckedSpec`] ([`checked`]: the only values the engines accept). The engines:
//! [`interp`] (the exact reference), [`jit`] (Cranelift native code) and [`aot`] (the same
//! code as a relocatable object with a C API); [`engine`] is the one door to them, choosing
//! the JIT kernel or the interpreter with the reason. Formats and exact arithmetic live in
//! [`format`](mod@format), [`exact`] and [`ieee`]; diagnostics in [`diagnostic`]; the IR
//! printer (checked IR back to `.mma` text) in [`printer`]; the Verilog back end in [`rtl`]; the deterministic generator and
//! random operands every test, fuzzer and benchmark draws from in [`random`].

// Diagnostics are plain values passed up by `?` in every pass; their size does not matter.
#![allow(clippy::result_large_err)]

pub mod aot;
pub mod ast;
pub mod check;
pub mod checked;
pub mod diagnostic;
pub mod engine;
pub mod exact;
pub mod format;
pub mod ieee;
pub mod interp;
pub mod ir;
pub mod jit;
pub mod parse;
pub mod printer;
pub mod random;
pub mod rtl;
pub mod sparse;
pub mod valid;

use diagnostic::{Code, Diag, Diagnostics, FileId};
use std::sync::{Arc, OnceLock};

/// The standard prelude (`import std`): the MMA-Sim operations as named pipelines.
pub const STD_PRELUDE: &str = include_str!("../../specs/std/prelude.mma");
/// The name diagnostics show for the prelude.
pub const STD_PRELUDE_NAME: &str = "std/prelude.mma";

pub use checked::{Checked, CheckedInstruction, CheckedSpec};

/// Parse a prelude; its spans point into [`FileId::Std`]. A prelude that does not parse
/// is mmac's own failure, reported as such.
fn parse_prelude(text: &str) -> Result<ast::File, Diag> {
    parse::parse(text).map_err(|diags| {
        let d = &diags[0];
        let mut d = Diag::new(
            Code::Internal,
            d.span.in_file(FileId::Std),
            format!("the standard prelude does not parse: {}", d.message),
        )
        .label(&d.label);
        d.help = Some("this is a bug in mmac's build: specs/std/prelude.mma must parse".into());
        d
    })
}

fn std_ast() -> Result<&'static ast::File, Diag> {
    static STD: OnceLock<Result<ast::File, Diag>> = OnceLock::new();
    STD.get_or_init(|| parse_prelude(STD_PRELUDE))
        .as_ref()
        .map_err(Clone::clone)
}

/// Parse, check and validate a spec: the whole front end in one call.
pub fn compile(file_name: &str, text: &str) -> Result<CheckedSpec, Diagnostics> {
    let std = std_ast().map_err(|d| Diagnostics::new(file_name, text, vec![d]))?;
    compile_with(file_name, text, std, &[])
}

/// [`compile`] with some instructions' parameters overridden: the neighbouring specs that
/// mutation tests and design comparisons study ([`check::Override`]).
pub fn compile_with_overrides(
    file_name: &str,
    text: &str,
    overrides: &[check::Override],
) -> Result<CheckedSpec, Diagnostics> {
    let std = std_ast().map_err(|d| Diagnostics::new(file_name, text, vec![d]))?;
    compile_with(file_name, text, std, overrides)
}

/// [`compile_with_overrides`] for one instruction ([`check::check_instruction`]): the
/// spec returned holds only `instruction`, checked with `overrides`; a file that does not
/// declare it is an `unknown-name` error.
pub fn compile_instruction_with_overrides(
    file_name: &str,
    text: &str,
    instruction: &str,
    overrides: &[check::Override],
) -> Result<CheckedSpec, Diagnostics> {
    checked::Source::parse(file_name, text)?.check_instruction(instruction, overrides)
}

/// Check and validate instruction `instruction` of a parsed file with `overrides`
/// ([`check::check_instruction`]): the spec returned holds only it.
fn check_instruction(
    source: &Arc<checked::Source>,
    instruction: &str,
    overrides: &[check::Override],
) -> Result<CheckedSpec, Diagnostics> {
    let fail = |diags| Diagnostics::new(&source.file_name, &source.text, diags);
    let std = std_ast().map_err(|d| fail(vec![d]))?;
    let spec = check::check_instruction(&source.ast, std, instruction, overrides).map_err(fail)?;
    if spec.instructions.is_empty() {
        return Err(fail(vec![
            Diag::new(
                Code::UnknownName,
                diagnostic::Span::new(0, 0),
                format!("no instruction `{instruction}` in this file"),
            )
            .label("not declared here"),
        ]));
    }
    let checked = valid::validate(spec).map_err(fail)?;
    Ok(checked.with_source(source.clone()))
}

fn compile_with(
    file_name: &str,
    text: &str,
    std: &ast::File,
    overrides: &[check::Override],
) -> Result<CheckedSpec, Diagnostics> {
    let fail = |diags| Diagnostics::new(file_name, text, diags);
    let ast = parse::parse(text).map_err(fail)?;
    let spec = check::check_with(&ast, std, overrides).map_err(fail)?;
    let checked = valid::validate(spec).map_err(fail)?;
    Ok(checked.with_source(Arc::new(checked::Source {
        file_name: file_name.to_string(),
        text: text.to_string(),
        ast,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An override moves one parameter of one instruction, and follows into what the
    /// pipeline derives from it; an unknown parameter is refused.
    #[test]
    fn overrides_move_one_parameter() {
        let text = "arch x\nimport std\ninstruction v {\n  shape 16 x 16 x 16\n  types a = f16, b = f16, c = f32, d = f32\n  uses tr_fdpa(F = 24, F2 = 31, L = 8)\n}\ninstruction w {\n  shape 16 x 16 x 16\n  types a = f16, b = f16, c = f32, d = f32\n  uses tr_fdpa(F = 24, F2 = 31, L = 8)\n}\n";
        let base = compile("x.mma", text).unwrap();
        let o = |p: &str, v| check::Override {
            instruction: "v".into(),
            parameter: p.into(),
            value: ir::Value::Int(v),
        };
        let moved = compile_with_overrides("x.mma", text, &[o("F2", 30)]).unwrap();
        let (v0, v1) = (&base.spec().instructions[0], &moved.spec().instructions[0]);
        assert_ne!(v0.arithmetic, v1.arithmetic);
        assert!(
            v1.provenance
                .arguments
                .contains(&("F2".into(), ir::Value::Int(30)))
        );
        // the other instruction is untouched
        assert_eq!(
            base.spec().instructions[1].arithmetic,
            moved.spec().instructions[1].arithmetic
        );
        let Err(d) = compile_with_overrides("x.mma", text, &[o("G", 3)]) else {
            panic!("an unknown parameter is refused")
        };
        assert_eq!(d.codes(), vec![Code::UnknownParameter]);
        // a value the checker refuses is refused here too
        assert!(compile_with_overrides("x.mma", text, &[o("L", 3)]).is_err());
    }

    /// An override carries a value of the parameter's own kind (a rounding mode moves
    /// `rho`, a defaulted parameter included); a value of another kind is a located type
    /// error, not ignored.
    #[test]
    fn overrides_are_typed() {
        let text = "arch x\nimport std\ninstruction v {\n  shape 16 x 8 x 16\n  types a = f16, b = f16, c = f32, d = f32\n  uses t_fdpa(F = 25, L = 16, e_zero = -133)\n}\n";
        let source = checked::Source::parse("x.mma", text).unwrap();
        let o = |p: &str, value| check::Override {
            instruction: "v".into(),
            parameter: p.into(),
            value,
        };
        let rho = |spec: &CheckedSpec| {
            spec.get(0)
                .provenance()
                .arguments
                .iter()
                .find(|(n, _)| n == "rho")
                .map(|(_, v)| v.clone())
        };
        let base = source.check_instruction("v", &[]).unwrap();
        assert_eq!(
            rho(&base),
            Some(ir::Value::Rounding(exact::Rounding::TowardZero))
        );
        let up = ir::Value::Rounding(exact::Rounding::Up);
        let moved = source
            .check_instruction("v", &[o("rho", up.clone())])
            .unwrap();
        assert_eq!(rho(&moved), Some(up.clone()));
        assert_ne!(base.get(0).arithmetic(), moved.get(0).arithmetic());
        let err = source
            .check_instruction("v", &[o("F", up)])
            .unwrap_err()
            .render_plain(100);
        assert!(
            err.contains("`F` takes a number, and the override `up` is a rounding mode"),
            "{err}"
        );
        assert!(err.contains("x.mma:6:"), "{err}");
    }

    /// Checking one instruction gives the same IR as checking the whole file, and only it.
    #[test]
    fn one_instruction_is_checked_alone() {
        let text = "arch x\nimport std\ninstruction v{K} {\n  for K in [8, 16]\n  shape 16 x 16 x K\n  types a = f16, b = f16, c = f32, d = f32\n  uses tr_fdpa(F = 24, F2 = 31, L = 8)\n}\n";
        let whole = compile("x.mma", text).unwrap();
        let o = check::Override {
            instruction: "v16".into(),
            parameter: "F2".into(),
            value: ir::Value::Int(30),
        };
        let one = compile_instruction_with_overrides("x.mma", text, "v16", &[]).unwrap();
        assert_eq!(one.spec().instructions.len(), 1);
        assert_eq!(
            one.spec().instructions[0].arithmetic,
            whole.spec().instruction("v16").unwrap().arithmetic
        );
        let moved =
            compile_instruction_with_overrides("x.mma", text, "v16", std::slice::from_ref(&o))
                .unwrap();
        let moved_whole = compile_with_overrides("x.mma", text, &[o]).unwrap();
        assert_eq!(
            moved.spec().instructions[0].arithmetic,
            moved_whole.spec().instruction("v16").unwrap().arithmetic
        );
        let Err(d) = compile_instruction_with_overrides("x.mma", text, "v32", &[]) else {
            panic!("an instruction the file does not declare is an error")
        };
        assert_eq!(d.codes(), vec![Code::UnknownName]);
    }

    /// A composed instruction checked alone runs the one instruction of its inner name:
    /// where two families declare that name, or one that may declare it does not check,
    /// checking it alone fails as checking the whole file does (found by a hostile run:
    /// the first declaration ran, so the result hung on the order of the file).
    #[test]
    fn a_composed_instruction_alone_needs_its_inner_instruction_declared_once() {
        let inner = |f: &str| {
            format!(
                "instruction mma.m16n8k16.f16.f16.f16.f16 {{\n  shape 16 x 8 x 16\n  \
                 types a = f16, b = f16, c = f16, d = f16\n  evidence model\n  \
                 uses t_fdpa({f}, L = 16, e_zero = -21)\n}}\n"
            )
        };
        let composed = "pipeline through_f16(inner) {\n  convert a, b to f16 round nearest_even\n  \
             let low = run inner over k mod 4 in [0, 1] with c = 0\n  \
             let high = run inner over k mod 4 in [2, 3] with c = low\n  \
             let d = add high, c in out round nearest_even\n  result d\n}\n\
             instruction mma.m16n8k32.f16.e4m3.e4m3.f16 {\n  shape 16 x 8 x 32\n  \
             types a = e4m3, b = e4m3, c = f16, d = f16\n  evidence model\n  \
             uses through_f16(inner = \"mma.m16n8k16.f16.f16.f16.f16\")\n}\n";
        let name = "mma.m16n8k32.f16.e4m3.e4m3.f16";
        let file = |inners: &[String]| format!("arch x\nimport std\n{}{composed}", inners.concat());
        let once = file(&[inner("F = 24")]);
        assert!(compile_instruction_with_overrides("x.mma", &once, name, &[]).is_ok());
        for (inners, code) in [
            (
                vec![inner("F = 24"), inner("F = 11")],
                Code::DuplicateInstruction,
            ),
            (
                vec![inner("F = 24, Q = 3"), inner("F = 24")],
                Code::UnknownParameter,
            ),
        ] {
            let text = file(&inners);
            assert!(compile("x.mma", &text).unwrap_err().codes().contains(&code));
            assert!(
                compile_instruction_with_overrides("x.mma", &text, name, &[]).is_err(),
                "{code:?}: checked alone, it ran one of the declarations"
            );
        }
    }

    /// Over the whole library, checking one instruction alone gives the instruction the
    /// whole file gives (a sample of each file's instructions, every family member kind).
    #[test]
    fn one_instruction_of_the_library_is_checked_alike() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for dir in ["specs", "specs/examples"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_none_or(|e| e != "mma") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let name = path.display().to_string();
                let whole = compile(&name, &text).unwrap();
                for inst in whole.spec().instructions.iter().step_by(23) {
                    let one = compile_instruction_with_overrides(&name, &text, &inst.name, &[])
                        .unwrap_or_else(|d| panic!("{}", d.render_plain(100)));
                    assert_eq!(one.spec().instructions.len(), 1, "{}", inst.name);
                    assert_eq!(one.spec().instructions[0].name, inst.name);
                    assert_eq!(one.spec().instructions[0].arithmetic, inst.arithmetic);
                }
            }
        }
    }

    #[test]
    fn prelude_parses() {
        parse::parse(STD_PRELUDE).expect("the std prelude parses");
        assert!(std_ast().is_ok());
    }

    /// A prelude that does not parse is a hard error naming the prelude, not an empty
    /// prelude that makes every `uses` an unknown pipeline.
    #[test]
    fn a_broken_prelude_is_a_hard_error() {
        let broken = parse_prelude("pipeline t_fdpa(F) { chain every }").unwrap_err();
        assert_eq!(broken.code, Code::Internal);
        assert_eq!(broken.span.file, FileId::Std);
        let d = Diagnostics::new("x.mma", "arch x\n", vec![broken]);
        let text = d.render_plain(100);
        assert!(
            text.contains("the standard prelude does not parse"),
            "{text}"
        );
        assert!(text.contains(STD_PRELUDE_NAME), "{text}");
    }
}
