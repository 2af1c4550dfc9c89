//! What validation returns and the engines take: a [`CheckedSpec`] (a spec every
//! instruction of which passed [`crate::valid::validate`]) and its instructions as
//! [`Checked`] values (an instruction with what the validator established about it:
//! [`ArithmeticInfo`], its pipeline by [`Kind`] with refined operand formats and the
//! facts of its alignments). Their fields are private and only the validator builds
//! them, so an engine given a `Checked` may rely on every invariant the IR documents and
//! on every fact the validator computed; it never meets an unvalidated spec, nor an
//! instruction paired with another's facts.
//!
//! Outside this crate a `Checked` comes only from a checked spec:
//!
//! ```
//! let spec = mmac_compiler::compile("s.mma", &std::fs::read_to_string(
//!     concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/hopper.mma")).unwrap()).unwrap();
//! let checked = spec.find("mma.m16n8k16.f32.f16.f16.f32").unwrap();
//! assert_eq!(checked.k(), 16);
//! ```
//!
//! and cannot be put together from an instruction and some info:
//!
//! ```compile_fail
//! # let spec = mmac_compiler::compile("s.mma", "").unwrap();
//! # let (inst, info) = (&spec.spec().instructions[0], spec.info().instruction(0));
//! let forged = mmac_compiler::Checked { inst, info };
//! ```
//!
//! ```compile_fail
//! # let spec = mmac_compiler::compile("s.mma", "").unwrap();
//! # let (inst, info) = (&spec.spec().instructions[0], spec.info().instruction(0));
//! let forged = mmac_compiler::Checked::new(inst, info);
//! ```

use crate::ast;
use crate::check::Override;
use crate::diagnostic::Diagnostics;
use crate::ir::{Arithmetic, Instruction, Provenance, Shape, Sparsity, Spec, Walk};
use crate::valid::{ArithmeticInfo, Kind, SpecInfo};
use std::sync::Arc;

/// The parsed file a checked spec came from, kept so that a neighbouring instruction (one
/// parameter moved, [`Checked::moved`]) goes through the checker again from its syntax
/// tree, without the text being read or parsed again.
#[derive(Debug)]
pub struct Source {
    pub(crate) file_name: String,
    pub(crate) text: String,
    pub(crate) ast: ast::File,
}

impl Source {
    /// Parse `text` (`file_name` in diagnostics) and keep it, so that its instructions can
    /// be checked one at a time with parameters moved ([`Source::check_instruction`]):
    /// a family of specs that differ only in their arguments is parsed once.
    pub fn parse(file_name: &str, text: &str) -> Result<Arc<Source>, Diagnostics> {
        let ast =
            crate::parse::parse(text).map_err(|diags| Diagnostics::new(file_name, text, diags))?;
        Ok(Arc::new(Source {
            file_name: file_name.to_string(),
            text: text.to_string(),
            ast,
        }))
    }

    /// Check and validate instruction `instruction` of this file with `overrides`: the
    /// spec returned holds only it.
    pub fn check_instruction(
        self: &Arc<Self>,
        instruction: &str,
        overrides: &[Override],
    ) -> Result<CheckedSpec, Diagnostics> {
        crate::check_instruction(self, instruction, overrides)
    }

    pub fn file_name(&self) -> &str {
        &self.file_name
    }
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// A spec whose every instruction passed the validator, with what it established.
#[derive(Clone, Debug)]
pub struct CheckedSpec {
    spec: Spec,
    info: SpecInfo,
    /// The parsed file it was checked from (`None` for a spec validated from IR).
    source: Option<Arc<Source>>,
}

impl CheckedSpec {
    /// Only the validator pairs a spec with its info.
    pub(crate) fn new(spec: Spec, info: SpecInfo) -> CheckedSpec {
        CheckedSpec {
            spec,
            info,
            source: None,
        }
    }
    /// The spec, noting the parsed file it was checked from.
    pub(crate) fn with_source(mut self, source: Arc<Source>) -> CheckedSpec {
        self.source = Some(source);
        self
    }
    /// The file it was checked from, when it was.
    pub fn source(&self) -> Option<&Source> {
        self.source.as_deref()
    }
    /// The IR.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }
    /// What the validator established about each distinct arithmetic.
    pub fn info(&self) -> &SpecInfo {
        &self.info
    }
    pub fn arch(&self) -> &str {
        &self.spec.arch
    }
    /// How many instructions the spec declares.
    pub fn len(&self) -> usize {
        self.spec.instructions.len()
    }
    pub fn is_empty(&self) -> bool {
        self.spec.instructions.is_empty()
    }
    /// Instruction `index` (its position in the spec).
    pub fn get(&self, index: usize) -> Checked<'_> {
        Checked {
            inst: &self.spec.instructions[index],
            info: self.info.instruction(index),
            source: self.source.as_ref(),
        }
    }
    /// The instruction called `name`.
    pub fn find(&self, name: &str) -> Option<Checked<'_>> {
        self.position(name).map(|i| self.get(i))
    }
    /// The position of the instruction called `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.spec.position(name)
    }
    /// Every instruction, in order.
    pub fn instructions(&self) -> impl Iterator<Item = Checked<'_>> {
        (0..self.len()).map(|i| self.get(i))
    }
    /// One instruction of each distinct arithmetic (the first), with its position.
    pub fn distinct(&self) -> impl Iterator<Item = (usize, Checked<'_>)> {
        self.info.distinct().map(|(i, _)| (i, self.get(i)))
    }
    /// The spec with only the instructions `keep` accepts (in order), validated again.
    pub fn subset(
        &self,
        keep: impl Fn(&str) -> bool,
    ) -> Result<CheckedSpec, Vec<crate::diagnostic::Diag>> {
        let mut spec = self.spec.clone();
        spec.instructions.retain(|i| keep(&i.name));
        let checked = crate::valid::validate(spec)?;
        Ok(CheckedSpec {
            source: self.source.clone(),
            ..checked
        })
    }
    /// The IR, given up.
    pub fn into_spec(self) -> Spec {
        self.spec
    }
    /// Instruction `index` on its own, with its info.
    pub fn take(mut self, index: usize) -> CheckedInstruction {
        let info = self.info.instruction(index).clone();
        CheckedInstruction {
            inst: self.spec.instructions.swap_remove(index),
            info,
            source: self.source,
        }
    }
}

/// One instruction with what the validator established about it: what every engine
/// takes. `Copy`: a pair of references into a [`CheckedSpec`] or a [`CheckedInstruction`].
#[derive(Clone, Copy, Debug)]
pub struct Checked<'a> {
    inst: &'a Instruction,
    info: &'a ArithmeticInfo,
    source: Option<&'a Arc<Source>>,
}

impl<'a> Checked<'a> {
    /// A validated arithmetic paired with its validator's info, for the engines' own use
    /// (a composed instruction's run: its step's arithmetic and the info the validator
    /// computed for it).
    pub(crate) fn new(inst: &'a Instruction, info: &'a ArithmeticInfo) -> Checked<'a> {
        Checked {
            inst,
            info,
            source: None,
        }
    }
    /// The instruction's IR.
    pub fn instruction(self) -> &'a Instruction {
        self.inst
    }
    /// What the validator established about its arithmetic.
    pub fn info(self) -> &'a ArithmeticInfo {
        self.info
    }
    /// The arithmetic by pipeline kind.
    pub fn kind(self) -> Kind<'a> {
        self.info.kind()
    }
    pub fn name(self) -> &'a str {
        &self.inst.name
    }
    pub fn arithmetic(self) -> &'a Arithmetic {
        &self.inst.arithmetic
    }
    pub fn provenance(self) -> &'a Provenance {
        &self.inst.provenance
    }
    pub fn shape(self) -> Shape {
        self.inst.shape()
    }
    /// Products per dot product of the arithmetic (for a sparse instruction, of the dense
    /// arithmetic it runs).
    pub fn k(self) -> usize {
        self.inst.k()
    }
    /// Structured sparsity of A, if any.
    pub fn sparsity(self) -> Option<Sparsity> {
        self.inst.sparsity
    }
    /// K: elements of b per dot product (columns of A).
    pub fn columns(self) -> usize {
        self.inst.columns()
    }
    /// Elements of a per dot product (K, or the stored elements of a sparse A).
    pub fn stored(self) -> usize {
        self.inst.stored()
    }
    /// Scale factors per dot product and operand (0 without block scales).
    pub fn scale_count(self) -> usize {
        self.inst.scale_count()
    }
    /// A copy that owns its IR and info (to keep beyond the spec it came from).
    pub fn to_instruction(self) -> CheckedInstruction {
        CheckedInstruction {
            inst: self.inst.clone(),
            info: self.info.clone(),
            source: self.source.cloned(),
        }
    }
    /// The file its spec was checked from, when it was.
    pub fn source(self) -> Option<&'a Source> {
        self.source.map(|s| &**s)
    }
    /// This instruction with its pipeline's parameter `parameter` (one of its
    /// [`Provenance::arguments`], or `block` for its scale block size) set to `value`,
    /// through the checker and the validator again from the parsed file its spec came
    /// from ([`crate::check::check_instruction`]). `None` for an instruction validated
    /// from IR, which has no file; `Err` with the checker's diagnostics where the moved
    /// value does not check.
    pub fn moved(
        self,
        parameter: &str,
        value: i64,
    ) -> Option<Result<CheckedInstruction, Diagnostics>> {
        self.overridden(parameter, crate::ir::Value::Int(value))
    }
    /// This sparse instruction with its pipeline run over `walk` instead (the other
    /// hypothesis of what the unit does with the selected elements), checked again as
    /// [`Checked::moved`] is.
    pub fn walked(self, walk: Walk) -> Option<Result<CheckedInstruction, Diagnostics>> {
        self.overridden("over", crate::ir::Value::Str(walk.keyword().into()))
    }
    fn overridden(
        self,
        parameter: &str,
        value: crate::ir::Value,
    ) -> Option<Result<CheckedInstruction, Diagnostics>> {
        let source = self.source?;
        let moved = Override {
            instruction: self.inst.name.clone(),
            parameter: parameter.to_string(),
            value,
        };
        Some(
            crate::check_instruction(source, &self.inst.name, std::slice::from_ref(&moved))
                .map(|spec| spec.take(0)),
        )
    }
}

/// One instruction checked on its own (a neighbouring spec, a candidate of `infer`),
/// owning its IR and its info.
#[derive(Clone, Debug)]
pub struct CheckedInstruction {
    inst: Instruction,
    info: ArithmeticInfo,
    source: Option<Arc<Source>>,
}

impl CheckedInstruction {
    /// Only the validator pairs an instruction with its info.
    pub(crate) fn new(inst: Instruction, info: ArithmeticInfo) -> CheckedInstruction {
        CheckedInstruction {
            inst,
            info,
            source: None,
        }
    }
    pub fn checked(&self) -> Checked<'_> {
        Checked {
            inst: &self.inst,
            info: &self.info,
            source: self.source.as_ref(),
        }
    }
    pub fn instruction(&self) -> &Instruction {
        &self.inst
    }
}
