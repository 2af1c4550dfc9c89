//! Kernels of composed instructions: the operand conversions (a table per narrow source
//! format, built once from the exact conversion), then each step in order: a `run` calls
//! the kernel of the arithmetic it runs (native code, or another composed kernel) on the
//! gathered k positions; an addition or fused multiply-add is computed exactly and rounded
//! once ([`crate::ieee`]), as the interpreter does.

use super::Code;
use crate::engine::{EvalError, Operands};
use crate::format::Format;
use crate::ieee::{self, Num};
use crate::ir::{Conversion, RoundedOp, StepValue};

/// Source formats up to this many storage bits convert through a table.
const TABLE_BITS: u32 = 16;
/// A table entry for a code with no encoding in the target (a NaN into a format without
/// NaN): the conversion reports it.
const NO_ENCODING: u64 = u64::MAX;

/// The conversion of one operand.
#[derive(Clone)]
pub(crate) struct Converter {
    from: Format,
    conversion: Option<Conversion>,
    table: Option<std::sync::Arc<[u64]>>,
}

impl Converter {
    pub(crate) fn new(from: &Format, conversion: Option<&Conversion>) -> Converter {
        let table = conversion.and_then(|c| {
            (from.storage_bits() <= TABLE_BITS).then(|| {
                (0..1u64 << from.storage_bits())
                    .map(|raw| ieee::convert(raw, from, c).unwrap_or(NO_ENCODING))
                    .collect::<Vec<u64>>()
                    .into()
            })
        });
        Converter {
            from: from.clone(),
            conversion: conversion.cloned(),
            table,
        }
    }

    fn convert(&self, raw: u64) -> Result<u64, String> {
        let Some(c) = &self.conversion else {
            return Ok(raw);
        };
        match &self.table {
            Some(t) => match t[(raw & self.from.storage_mask()) as usize] {
                NO_ENCODING => ieee::convert(raw, &self.from, c),
                x => Ok(x),
            },
            None => ieee::convert(raw, &self.from, c),
        }
    }
}

/// One step of a composed kernel.
pub(crate) enum KernelStep {
    Run {
        code: Code,
        positions: Vec<u32>,
        c: StepValue,
        /// The run's c format (what +0 is encoded in).
        c_format: Format,
    },
    Add {
        x: StepValue,
        y: StepValue,
        op: RoundedOp,
    },
    Fma {
        x: StepValue,
        y: StepValue,
        z: StepValue,
        op: RoundedOp,
    },
}

/// A composed instruction, ready to run.
pub(crate) struct ComposedKernel {
    pub(crate) name: String,
    pub(crate) a: Converter,
    pub(crate) b: Converter,
    pub(crate) c: Converter,
    /// c's format after its conversion.
    pub(crate) c_format: Format,
    pub(crate) d: Format,
    pub(crate) steps: Vec<KernelStep>,
    /// The format of each step's value.
    pub(crate) formats: Vec<Format>,
    pub(crate) result: StepValue,
}

impl ComposedKernel {
    /// One dot-product-add (operand counts checked by the caller).
    pub(crate) fn dot(&self, ops: &Operands) -> Result<u64, EvalError> {
        let fail = |message: String| EvalError::Internal {
            instruction: self.name.clone(),
            message,
        };
        let a: Vec<u64> = ops
            .a
            .iter()
            .map(|&x| self.a.convert(x))
            .collect::<Result<_, _>>()
            .map_err(fail)?;
        let b: Vec<u64> = ops
            .b
            .iter()
            .map(|&x| self.b.convert(x))
            .collect::<Result<_, _>>()
            .map_err(fail)?;
        let c = self.c.convert(ops.c).map_err(fail)?;
        let mut values: Vec<u64> = Vec::with_capacity(self.steps.len());
        let raw = |v: StepValue, values: &[u64], format: &Format| -> u64 {
            match v {
                StepValue::C => c,
                StepValue::Zero { negative } => {
                    ieee::encode(format, &Num::signed_zero(negative)).unwrap_or(0)
                }
                StepValue::Step(i) => values[i],
            }
        };
        let num = |v: StepValue, values: &[u64]| -> Num {
            match v {
                StepValue::C => Num::of(&self.c_format.decode(c)),
                StepValue::Zero { negative } => Num::signed_zero(negative),
                StepValue::Step(i) => Num::of(&self.formats[i].decode(values[i])),
            }
        };
        let mut sa = Vec::new();
        let mut sb = Vec::new();
        for step in &self.steps {
            let v = match step {
                KernelStep::Run {
                    code,
                    positions,
                    c: cv,
                    c_format,
                } => {
                    sa.clear();
                    sb.clear();
                    sa.extend(positions.iter().map(|&p| a[p as usize]));
                    sb.extend(positions.iter().map(|&p| b[p as usize]));
                    code.dot(&Operands {
                        c: raw(*cv, &values, c_format),
                        a: &sa,
                        b: &sb,
                        sa: &[],
                        sb: &[],
                    })?
                }
                KernelStep::Add { x, y, op } => {
                    let r = ieee::add(&num(*x, &values), &num(*y, &values), op);
                    ieee::encode(&op.format, &r).ok_or_else(|| {
                        fail(format!(
                            "{} has no encoding in `{}`",
                            r.show(),
                            op.format.name
                        ))
                    })?
                }
                KernelStep::Fma { x, y, z, op } => {
                    let r = ieee::fma(&num(*x, &values), &num(*y, &values), &num(*z, &values), op);
                    ieee::encode(&op.format, &r).ok_or_else(|| {
                        fail(format!(
                            "{} has no encoding in `{}`",
                            r.show(),
                            op.format.name
                        ))
                    })?
                }
            };
            values.push(v);
        }
        Ok(raw(self.result, &values, &self.d))
    }
}
