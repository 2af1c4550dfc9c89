//! What validation returns and the engines take: a [`CheckedSpec`] (a spec every
//! instruction of which passed [`crate::valid::validate`]) and its instructions as
//! [`Checked`] values (an instruction with what the validator established about it:
//! [`ArithmeticInfo`], its pipeline by [`Kind`] with refined operand formats and the
//! facts of its alignments). Their fields are private and only the validator builds
//! them, so an engine given a `Checked` may rely on every invariant the IR documents and
//! on every fact the validator computed; it never meets an unvalidated spec, nor an
//! instruction paired with another's facts.

use crate::ir::{Arithmetic, Instruction, Provenance, Shape, Spec};
use crate::valid::{ArithmeticInfo, Kind, SpecInfo};

/// A spec whose every instruction passed the validator, with what it established.
#[derive(Clone, Debug)]
pub struct CheckedSpec {
    spec: Spec,
    info: SpecInfo,
}

impl CheckedSpec {
    /// Only the validator pairs a spec with its info.
    pub(crate) fn new(spec: Spec, info: SpecInfo) -> CheckedSpec {
        CheckedSpec { spec, info }
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
        crate::valid::validate(spec)
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
        }
    }
}

/// One instruction with what the validator established about it: what every engine
/// takes. `Copy`: a pair of references into a [`CheckedSpec`] or a [`CheckedInstruction`].
#[derive(Clone, Copy, Debug)]
pub struct Checked<'a> {
    inst: &'a Instruction,
    info: &'a ArithmeticInfo,
}

impl<'a> Checked<'a> {
    /// A validated arithmetic paired with its validator's info, for the engines' own use
    /// (a composed instruction's run: its step's arithmetic and the info the validator
    /// computed for it).
    pub(crate) fn new(inst: &'a Instruction, info: &'a ArithmeticInfo) -> Checked<'a> {
        Checked { inst, info }
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
    /// Products per dot product.
    pub fn k(self) -> usize {
        self.inst.k()
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
        }
    }
}

/// One instruction checked on its own (a neighbouring spec, a candidate of `infer`),
/// owning its IR and its info.
#[derive(Clone, Debug)]
pub struct CheckedInstruction {
    inst: Instruction,
    info: ArithmeticInfo,
}

impl CheckedInstruction {
    /// Only the validator pairs an instruction with its info.
    pub(crate) fn new(inst: Instruction, info: ArithmeticInfo) -> CheckedInstruction {
        CheckedInstruction { inst, info }
    }
    pub fn checked(&self) -> Checked<'_> {
        Checked {
            inst: &self.inst,
            info: &self.info,
        }
    }
    pub fn instruction(&self) -> &Instruction {
        &self.inst
    }
}
