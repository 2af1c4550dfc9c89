//! Ahead-of-time compilation: a spec's kernels as a relocatable object file with a C API,
//! and the C header that documents it.
//!
//! [`compile_object`] lowers every distinct arithmetic with the JIT's own code
//! ([`crate::jit::build_jobs`], so an object computes the JIT's bits, which are the
//! interpreter's) into a `cranelift-object` module, adds a table of instruction
//! descriptors and the exported entries ([`api`]), and returns the object's bytes with its
//! header ([`header`]). Every exported symbol is `mmac_<arch>_...`; everything else is
//! local, so the objects of several specs link into one program. The object needs libc
//! (`strcmp`, `malloc`, `free`) and, on hosts without native FMA, libm.

mod api;
mod header;

use crate::checked::CheckedSpec;
use crate::ir::{Instruction, Pipeline};
use crate::jit::{self, Built, JitError, Lowered, Options, Target};
use cranelift_module::{FuncId, default_libcall_names};
use cranelift_object::{ObjectBuilder, ObjectModule};

/// An instruction of the object, with the kernel functions it calls and its register
/// fragments, where known.
pub(crate) struct Present<'s> {
    pub inst: &'s Instruction,
    pub dot: FuncId,
    pub batch: FuncId,
    pub warp: Option<WarpLayout>,
}

/// An instruction's register fragments as the object's warp entry reads and writes them.
/// The caller builds it from its layout data (the CLI from `mmac_runtime::fragments`):
/// the compiler crate knows no layouts.
#[derive(Clone, Debug)]
pub struct WarpLayout {
    /// Lanes of an image (32 for a warp).
    pub lanes: u32,
    /// Independent matrices per warp (4 for `mma.m8n8k4`'s quadpairs, else 1).
    pub sets: u32,
    /// a, b, c and d.
    pub operands: [WarpOperand; 4],
}

/// One operand of a [`WarpLayout`].
#[derive(Clone, Debug)]
pub struct WarpOperand {
    /// 32-bit words per lane.
    pub words: u32,
    /// Bits of an element's value.
    pub width: u32,
    /// 64-bit registers (two words, the low one first).
    pub wide: bool,
    pub slots: Vec<WarpSlot>,
}

/// Where one element of an operand lies in its image.
#[derive(Clone, Copy, Debug)]
pub struct WarpSlot {
    /// The register's (first) word in the image.
    pub word: u32,
    /// The value's lowest bit in the register.
    pub shift: u32,
    /// The element: `(set * rows + row) * cols + col`.
    pub cell: u32,
    /// A later copy of an element an earlier slot holds: compared when read.
    pub copy: bool,
}

/// A compiled object file and its header.
#[derive(Debug)]
pub struct Object {
    /// The relocatable object (ELF on Linux, Mach-O on macOS).
    pub bytes: Vec<u8>,
    /// The C header (`OUT.h`).
    pub header: String,
    /// The C identifier prefix of every exported symbol: `mmac_<arch>_`.
    pub prefix: String,
    /// Instructions in the object.
    pub present: Vec<String>,
    /// Instructions the code generator could not lower, with the reason; the header lists
    /// them as absent and `find` returns NULL for them.
    pub absent: Vec<(String, String)>,
}

/// What the header says about where the object came from.
#[derive(Clone, Debug, Default)]
pub struct ObjectNames {
    /// The spec file, as the user named it.
    pub source: String,
    /// The header's file name (`hopper.h`), for its include guard and usage comment.
    pub header_name: String,
    /// The object's file name (`hopper.o`), for the usage comment.
    pub object_name: String,
    /// A shared library (`--emit lib`) rather than an object (`--emit obj`): how the
    /// header says to regenerate it.
    pub shared: bool,
}

/// The C identifier an architecture's symbols start with: `mmac_<arch>_`, every character
/// that may not appear in a C identifier replaced by `_`.
pub fn symbol_prefix(arch: &str) -> String {
    let arch: String = arch
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("mmac_{arch}_")
}

/// Compile every instruction of a spec into an object file with the C API of
/// [`api`]. Instructions the code generator cannot lower are left out and listed.
/// `warp` gives an instruction's register fragments for the warp entry (`None`: the
/// entry answers that no layout is known).
pub fn compile_object(
    checked: &CheckedSpec,
    names: &ObjectNames,
    warp: &dyn Fn(&Instruction) -> Option<WarpLayout>,
) -> Result<Object, JitError> {
    let (spec, info) = (checked.spec(), checked.info());
    let backend = |m: String| JitError {
        instruction: None,
        message: m,
    };
    if api::FpControl::host().is_none() {
        return Err(backend(
            "objects are generated for x86-64 and AArch64 hosts only (the entries guard the \
             floating-point control register)"
                .into(),
        ));
    }
    let prefix = symbol_prefix(&spec.arch);
    let isa = jit::host_isa(Options::default(), true)?;
    let builder = ObjectBuilder::new(isa, format!("{prefix}object"), default_libcall_names())
        .map_err(|e| backend(format!("cannot start the object: {e}")))?;
    let mut module = ObjectModule::new(builder);

    let (jobs, job_of_arithmetic) = jit::plan_jobs(checked);
    let Built { outcome, ids, .. } = jit::build_jobs(
        &mut Target::new(&mut module, true, &prefix),
        &jobs,
        Options::default(),
    );
    // each job's functions, or why it is absent
    let functions: Vec<Result<(FuncId, FuncId), String>> = outcome
        .iter()
        .map(|o| match o {
            Err(e) => Err(e.clone()),
            Ok(Lowered::Native(k)) => ids[*k].clone(),
            Ok(Lowered::Composed(_)) => Err("a composed instruction (its steps run other \
                                             kernels and IEEE operations) is not compiled \
                                             ahead of time yet; the JIT and the interpreter \
                                             run it"
                .into()),
        })
        .collect();

    let mut present = vec![];
    let mut absent = vec![];
    for (i, inst) in spec.instructions.iter().enumerate() {
        match &functions[job_of_arithmetic[info.arithmetic_index(i)]] {
            Ok((dot, batch)) => present.push(Present {
                inst,
                dot: *dot,
                batch: *batch,
                warp: warp(inst),
            }),
            Err(why) => absent.push((inst.name.clone(), why.clone())),
        }
    }
    api::define(&mut module, &prefix, &spec.arch, &present).map_err(backend)?;
    let bytes = module
        .finish()
        .emit()
        .map_err(|e| backend(format!("cannot write the object: {e}")))?;
    let header = header::write(spec, &prefix, names, &present, &absent);
    Ok(Object {
        bytes,
        header,
        prefix,
        present: present.iter().map(|p| p.inst.name.clone()).collect(),
        absent,
    })
}

/// The algorithm an instruction's pipeline implements, for the descriptor and header:
/// the pipeline's name without its arguments (`t_fdpa`).
pub(crate) fn algorithm(inst: &Instruction) -> &str {
    let p = inst.provenance.pipeline.as_str();
    let name = p.split('(').next().unwrap_or(p).trim();
    if name.is_empty() {
        match &inst.arithmetic.pipeline {
            Pipeline::Fused(_) => "fused",
            Pipeline::Sequential(_) => "sequential",
            Pipeline::Integer(_) => "integer",
            Pipeline::Composed(_) => "composed",
        }
    } else {
        name
    }
}
