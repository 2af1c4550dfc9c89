//! The checker: resolves names, expands instruction families, instantiates pipelines with
//! their arguments and checks every stage. It is the only producer of [`ir::Spec`] from
//! source; it collects every error it can before giving up.
//!
//! The passes, one file each: `eval` (expressions and names), `formats` (user-defined
//! formats), `pipelines` (every pipeline on its own), `family` (instruction families and
//! pipeline instantiation) and `stages` (the stages of each pipeline kind). The bit widths
//! of the sums are the validator's ([`crate::valid`]).

mod eval;
mod family;
mod formats;
mod pipelines;
mod stages;

pub use eval::Value;

use crate::ast::{self, Item};
use crate::diagnostic::{Code, Diag, Span};
use crate::format::{self, Format};
use crate::ir::{self, Instruction};
use family::expand_family;
use formats::define_format;
use pipelines::check_pipeline;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Expands one instruction of the file by name, on demand (None when there is none).
type Resolve<'a> = &'a dyn Fn(&str) -> Option<Instruction>;

/// What instantiating a pipeline can refer to: the file's formats and pipelines, and the
/// instructions already expanded (which composed pipelines run).
struct Env<'a> {
    formats: &'a HashMap<String, Format>,
    pipelines: &'a BTreeMap<String, PipelineEntry<'a>>,
    /// The instructions expanded so far (a composed pipeline runs them by name).
    known: &'a HashMap<String, Instruction>,
    /// When only some instructions are expanded ([`check_instruction`]): finds one that
    /// is not in `known` by expanding it on demand.
    resolve: Option<Resolve<'a>>,
}

/// Where a pipeline was declared: in the file being checked, or in the standard prelude
/// (whose spans mean nothing in the user's file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Local,
    Std,
}

struct PipelineEntry<'a> {
    decl: &'a ast::PipelineDecl,
    origin: Origin,
    /// The pipeline's own check failed: instructions that use it are not instantiated.
    broken: bool,
}

/// Check a parsed file. `std` is the parsed standard prelude, used when the file says
/// `import std`.
pub fn check(file: &ast::File, std: &ast::File) -> Result<ir::Spec, Vec<Diag>> {
    check_with(file, std, &[])
}

/// A change to one instruction's parameters, to study a neighbouring spec (how a spec
/// with one parameter moved computes): instruction `instruction` is instantiated with
/// `parameter` set to `value`. The parameter is one of its pipeline's (given or
/// defaulted), or `block` for its scale block size (an integer); the value is of the
/// parameter's kind (an integer for an integer, a rounding mode for a rounding mode...).
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    pub instruction: String,
    pub parameter: String,
    pub value: ir::Value,
}

/// [`check`] with parameters overridden. An override that names a parameter the
/// instruction's pipeline does not have is an error (`unknown-parameter`).
pub fn check_with(
    file: &ast::File,
    std: &ast::File,
    overrides: &[Override],
) -> Result<ir::Spec, Vec<Diag>> {
    check_selected(file, std, overrides, None)
}

/// [`check_with`] for one instruction: the file's formats and pipelines are checked as
/// usual, but of its instruction families only the member named `instruction` is
/// instantiated (a family's other members are skipped before their pipeline is built), so
/// the spec returned holds that instruction alone, or none if no family declares it.
/// Studying one instruction's neighbours this way costs one instantiation, not one per
/// instruction of the file (Blackwell declares over 5,000). Errors of the members skipped
/// are not reported.
pub fn check_instruction(
    file: &ast::File,
    std: &ast::File,
    instruction: &str,
    overrides: &[Override],
) -> Result<ir::Spec, Vec<Diag>> {
    check_selected(file, std, overrides, Some(instruction))
}

/// [`check_with`], instantiating only the instruction `only` when one is named
/// ([`check_instruction`]).
fn check_selected(
    file: &ast::File,
    std: &ast::File,
    overrides: &[Override],
    only: Option<&str>,
) -> Result<ir::Spec, Vec<Diag>> {
    let mut diags: Vec<Diag> = vec![];
    let mut declared = Declarations::new(file, std);
    for item in &file.items {
        declared.declare(item, &mut diags);
    }
    declared.require_arch(file, &mut diags);
    declared.check_pipelines(&mut diags);
    let instructions = expand_instructions(file, &declared, overrides, only, &mut diags);
    finish(declared.arch, instructions, diags)
}

/// What a file declares besides its instructions: its architecture, its formats and the
/// pipelines it can use (its own, and the prelude's when it says `import std`).
struct Declarations<'a> {
    /// `arch NAME "TITLE"`, with where it is declared.
    arch: Option<(String, Option<String>, Span)>,
    formats: HashMap<String, Format>,
    /// Where each of `formats` is defined.
    format_spans: HashMap<String, Span>,
    /// A format failed to define: no instruction is checked.
    broken_formats: bool,
    pipelines: BTreeMap<String, PipelineEntry<'a>>,
}

impl<'a> Declarations<'a> {
    /// Nothing declared yet but the prelude's pipelines, when `file` imports `std`.
    fn new(file: &ast::File, std: &'a ast::File) -> Self {
        let mut pipelines = BTreeMap::new();
        for item in &std.items {
            if let Item::Pipeline(p) = item {
                pipelines.insert(
                    p.name.name.clone(),
                    PipelineEntry {
                        decl: p,
                        origin: Origin::Std,
                        broken: false,
                    },
                );
            }
        }
        let imports_std = file
            .items
            .iter()
            .any(|i| matches!(i, Item::Import { name, .. } if name.name == "std"));
        if !imports_std {
            pipelines.clear();
        }
        Declarations {
            arch: None,
            formats: HashMap::new(),
            format_spans: HashMap::new(),
            broken_formats: false,
            pipelines,
        }
    }

    /// Record one item of the file (instructions are expanded later).
    fn declare(&mut self, item: &'a Item, diags: &mut Vec<Diag>) {
        match item {
            Item::Arch { name, title, span } => self.declare_arch(name, title, *span, diags),
            Item::Import { name, .. } => check_import(name, diags),
            Item::Format(fd) => self.declare_format(fd, diags),
            Item::Pipeline(p) => self.declare_pipeline(p, diags),
            Item::Instruction(_) => {}
        }
    }

    /// `arch NAME "TITLE"`: the first one counts, a second is an error.
    fn declare_arch(
        &mut self,
        name: &ast::Ident,
        title: &Option<String>,
        span: Span,
        diags: &mut Vec<Diag>,
    ) {
        if let Some((_, _, first)) = &self.arch {
            diags.push(
                Diag::new(
                    Code::DuplicateArch,
                    span,
                    "a spec file declares one architecture",
                )
                .label("second `arch`")
                .also(*first, "first declared here")
                .help("split the instructions of each architecture into its own file"),
            );
        } else {
            self.arch = Some((name.name.clone(), title.clone(), span));
        }
    }

    /// `format NAME { ... }`: defined unless its name is taken (by another format of the
    /// file or a built-in one).
    fn declare_format(&mut self, fd: &ast::FormatDecl, diags: &mut Vec<Diag>) {
        if let Some(prev) = self.format_spans.get(&fd.name.name) {
            diags.push(
                Diag::new(
                    Code::DuplicateName,
                    fd.name.span,
                    format!("format `{}` is defined twice", fd.name.name),
                )
                .label("redefined here")
                .also(*prev, "first defined here")
                .help("rename one of them"),
            );
            return;
        }
        if format::builtin(&fd.name.name).is_some() {
            diags.push(
                Diag::new(
                    Code::DuplicateName,
                    fd.name.span,
                    format!("`{}` is a built-in format", fd.name.name),
                )
                .label("shadows a built-in format")
                .help("choose another name; built-in formats cannot be redefined"),
            );
            return;
        }
        match define_format(fd, &self.formats) {
            Ok(f) => {
                self.format_spans.insert(fd.name.name.clone(), fd.name.span);
                self.formats.insert(fd.name.name.clone(), f);
            }
            Err(mut d) => {
                self.broken_formats = true;
                diags.append(&mut d)
            }
        }
    }

    /// `pipeline NAME(...) { ... }`: recorded (in place of a prelude pipeline of that
    /// name) unless the file defines it twice; checked later by [`Self::check_pipelines`].
    fn declare_pipeline(&mut self, p: &'a ast::PipelineDecl, diags: &mut Vec<Diag>) {
        if let Some(prev) = self.pipelines.get(&p.name.name)
            && prev.origin == Origin::Local
        {
            diags.push(
                Diag::new(
                    Code::DuplicateName,
                    p.name.span,
                    format!("pipeline `{}` is defined twice", p.name.name),
                )
                .label("redefined here")
                .also(prev.decl.name.span, "first defined here")
                .help("rename one of them"),
            );
            return;
        }
        check_parameter_names(p, diags);
        self.pipelines.insert(
            p.name.name.clone(),
            PipelineEntry {
                decl: p,
                origin: Origin::Local,
                broken: false,
            },
        );
    }

    /// A file with instructions must name its architecture; a file without them is a
    /// library of formats and pipelines and needs none.
    fn require_arch(&self, file: &ast::File, diags: &mut Vec<Diag>) {
        let has_instructions = file.items.iter().any(|i| matches!(i, Item::Instruction(_)));
        if self.arch.is_none() && has_instructions {
            diags.push(
                Diag::new(
                    Code::MissingArch,
                    Span::new(0, 0),
                    "the spec file does not name its architecture",
                )
                .label("expected `arch NAME` here")
                .help("start the file with e.g. `arch hopper \"NVIDIA Hopper (sm_90a)\"`"),
            );
        }
    }

    /// Check every pipeline the file defines, used or not, and mark the broken ones: an
    /// instruction that uses one is not instantiated (its errors are reported once, here).
    fn check_pipelines(&mut self, diags: &mut Vec<Diag>) {
        for entry in self.pipelines.values_mut() {
            if entry.origin == Origin::Local {
                let mut d = check_pipeline(entry.decl, &self.formats);
                entry.broken = !d.is_empty();
                diags.append(&mut d);
            }
        }
    }

    /// Whether `decl` uses a composed pipeline (one that runs other instructions).
    fn is_composed(&self, decl: &ast::InstructionDecl) -> bool {
        decl.uses
            .as_ref()
            .and_then(|u| self.pipelines.get(&u.pipeline.name))
            .is_some_and(|e| stages::Kind::of(e.decl) == stages::Kind::Composed)
    }
}

/// `import NAME`: the only library is `std`.
fn check_import(name: &ast::Ident, diags: &mut Vec<Diag>) {
    if name.name != "std" {
        diags.push(
            Diag::new(
                Code::UnknownImport,
                name.span,
                format!("unknown library `{}`", name.name),
            )
            .label("no such library")
            .help("the only library is `std`, the standard prelude of MMA-Sim pipelines"),
        );
    }
}

/// Each parameter of pipeline `p` has its own name.
fn check_parameter_names(p: &ast::PipelineDecl, diags: &mut Vec<Diag>) {
    let mut seen: HashMap<&str, Span> = HashMap::new();
    for param in &p.params {
        if let Some(prev) = seen.insert(&param.name.name, param.name.span) {
            diags.push(
                Diag::new(
                    Code::DuplicateName,
                    param.name.span,
                    format!("parameter `{}` is declared twice", param.name.name),
                )
                .label("again here")
                .also(prev, "first here")
                .help("each parameter needs its own name"),
            );
        }
    }
}

/// Expand the file's instruction families, in the file's order, once the formats they may
/// name are sound. Families whose pipeline is composed are expanded second, since they run
/// instructions the others declare. With `only`, the first pass expands only that
/// instruction; a composed one may run instructions the pass skipped, which are then
/// expanded on demand.
fn expand_instructions(
    file: &ast::File,
    declared: &Declarations,
    overrides: &[Override],
    only: Option<&str>,
    diags: &mut Vec<Diag>,
) -> Vec<Instruction> {
    let decls: Vec<&ast::InstructionDecl> = file
        .items
        .iter()
        .filter_map(|item| match item {
            Item::Instruction(decl) if !declared.broken_formats => Some(decl),
            _ => None,
        })
        .collect();
    let mut expanded: Vec<Vec<Instruction>> = vec![vec![]; decls.len()];
    // the instructions a composed family may run: kept (cloned) only where one is declared
    let composed = decls.iter().any(|d| declared.is_composed(d));
    let mut known: HashMap<String, Instruction> = HashMap::new();
    let mut names: HashMap<String, Span> = HashMap::new();
    let resolve = |name: &str| -> Option<Instruction> {
        let no_known = HashMap::new();
        let env = Env {
            formats: &declared.formats,
            pipelines: &declared.pipelines,
            known: &no_known,
            resolve: None,
        };
        // the one family that declares `name`: none where two do, or where a family that
        // may declare it does not check (the whole file's check then says which)
        let mut found = None;
        for d in decls.iter().filter(|d| !declared.is_composed(d)) {
            let mut list = expand_family(d, &env, overrides, Some(name)).ok()?;
            if list.len() > 1 || (!list.is_empty() && found.is_some()) {
                return None;
            }
            found = found.or(list.pop());
        }
        found
    };
    for second_pass in [false, true] {
        for (index, decl) in decls.iter().enumerate() {
            if declared.is_composed(decl) != second_pass {
                continue;
            }
            let env = Env {
                formats: &declared.formats,
                pipelines: &declared.pipelines,
                known: &known,
                resolve: only.is_some().then_some(&resolve as Resolve),
            };
            match expand_family(decl, &env, overrides, only) {
                Ok(list) => {
                    for inst in list {
                        if let Some(prev) = names.get(&inst.name) {
                            diags.push(duplicate_instruction(decl, &inst.name, *prev));
                            continue;
                        }
                        names.insert(inst.name.clone(), decl.name_span);
                        if composed {
                            known.insert(inst.name.clone(), inst.clone());
                        }
                        expanded[index].push(inst);
                    }
                }
                Err(mut d) => diags.append(&mut d),
            }
        }
    }
    expanded.into_iter().flatten().collect()
}

/// Instruction `name`, expanded from `decl`, was already declared at `prev`.
fn duplicate_instruction(decl: &ast::InstructionDecl, name: &str, prev: Span) -> Diag {
    Diag::new(
        Code::DuplicateInstruction,
        decl.name_span,
        format!("instruction `{name}` is declared twice"),
    )
    .label("declares it again")
    .also(prev, "already declared here")
    .help("remove one declaration, or narrow a family's `for` lists")
}

/// The spec, or every error found, each once and in the order of the file.
fn finish(
    arch: Option<(String, Option<String>, Span)>,
    instructions: Vec<Instruction>,
    mut diags: Vec<Diag>,
) -> Result<ir::Spec, Vec<Diag>> {
    // the same mistake inside a family is reported once, not once per expansion
    let mut seen = HashSet::new();
    diags.retain(|d| seen.insert((d.code, d.span, d.message.clone())));
    if diags.is_empty() {
        let (arch, title) = arch.map(|(a, t, _)| (a, t)).unwrap_or_default();
        Ok(ir::Spec {
            arch,
            title,
            instructions,
        })
    } else {
        diags.sort_by_key(|d| d.span.start);
        Err(diags)
    }
}
