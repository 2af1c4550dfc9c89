//! Command-line parsing (clap) and dispatch to the subcommands: `commands` (check, list,
//! show, probe, run, test), `jit` (compile, bench), `matrix` (mma, gemm) and `infer`
//! (serve, infer), which share only the leaf `common`.

mod commands;
mod common;
mod infer;
mod jit;
mod matrix;

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(name = "mmac", version, about = "Exact arithmetic of matrix-multiply-accumulate units", long_about = None)]
pub struct Cli {
    /// Colour diagnostics: auto (when stderr is a terminal), always or never.
    #[arg(long, global = true, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Color {
    Auto,
    Always,
    Never,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// The exact reference interpreter.
    Interp,
    /// Native kernels from the Cranelift JIT (instructions it cannot lower run on the
    /// interpreter, with a note).
    Jit,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Parse and check spec files; diagnostics on stderr, exit 1 if any fails to check, 2 if
    /// any cannot be read.
    Check {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// List the instructions of a spec: name, shape, operand types, algorithm, F.
    List {
        file: PathBuf,
        /// A Markdown table per architecture (instruction, algorithm, F, rounding per stage).
        #[arg(long)]
        markdown: bool,
    },
    /// Run one dot-product-add of an instruction on values given as hex encodings or exact
    /// decimals.
    #[command(after_help = RUN_VALUES)]
    Run(RunArgs),
    /// Run conformance vectors (.mmv) against specs; the last line is `N passed, M failed`
    /// (and `, S skipped`: the cases of files of an architecture no given spec declares).
    Test {
        /// A spec file or a folder of specs.
        spec: PathBuf,
        /// A vector file or a folder searched recursively for .mmv files.
        #[arg(long)]
        vectors: PathBuf,
        #[arg(long, value_enum, default_value_t = Engine::Jit)]
        engine: Engine,
    },
    /// JIT-compile every instruction of a spec; print how many and how long it took.
    Compile {
        file: PathBuf,
        /// Print the Cranelift IR of every kernel.
        #[arg(long, value_enum)]
        emit: Option<jit::Emit>,
    },
    /// Time one instruction on random finite inputs: ns per dot product, dot products per
    /// second, and a native f32 dot product of the same K as the floor.
    Bench {
        file: PathBuf,
        #[arg(long)]
        instr: String,
        #[arg(long, value_enum, default_value_t = Engine::Jit)]
        engine: Engine,
        /// End with one JSON object: instruction, engine, ns_per_dot, dots_per_s,
        /// baseline_ns_per_dot.
        #[arg(long)]
        json: bool,
    },
    /// Run the feature probes on one instruction, or on every instruction with distinct
    /// arithmetic: a fixed battery (precision around F, rounding ties, overflow, NaN and
    /// Inf, subnormals, signed zeros) and inputs read from the spec's own parameters (ties
    /// at every alignment cut, carries at every normalisation precision, sums below
    /// e_zero, chain and group boundaries), each printed as `mmac run` arguments.
    Probe {
        file: PathBuf,
        /// Instruction name, as in `mmac list`; all instructions when omitted.
        #[arg(long)]
        instr: Option<String>,
    },
    /// Print one instruction as a standalone spec with its pipeline fully resolved: every
    /// parameter a number, every stage spelled out.
    Show {
        file: PathBuf,
        /// Instruction name, as in `mmac list`.
        #[arg(long)]
        instr: String,
    },
    /// Run one whole instruction on .npy matrices: A (M x K), B (K x N), C (M x N).
    Mma {
        #[command(flatten)]
        args: MatrixArgs,
        /// C (M x N); required for a single instruction.
        #[arg(long)]
        c: PathBuf,
    },
    /// A GEMM of any M x K x N (multiples of the instruction's shape), tiled by the
    /// instruction's m x n, K walked in k-steps in increasing order with each step's D fed
    /// back as the next C.
    Gemm {
        #[command(flatten)]
        args: MatrixArgs,
        /// C (M x N); zeros when omitted.
        #[arg(long)]
        c: Option<PathBuf>,
        /// Worker threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Serve one instruction as a black box: read requests `c=HEX a=HEX,... b=HEX,...
    /// [sa=HEX,... sb=HEX,...]` on stdin, answer each with a line `d=HEX`, in order (flushed
    /// after every batch of what has arrived). A malformed request: its line and column on
    /// stderr, exit 2.
    Serve {
        file: PathBuf,
        /// Instruction name, as in `mmac list`.
        #[arg(long)]
        instr: String,
    },
    /// Infer a spec from a black box: run COMMAND once (sh -c), send it requests as
    /// `mmac serve` reads them, narrow the prelude's pipelines and parameters with targeted
    /// probes, verify the winner on random cases and write it to -o. Exit 0: verified;
    /// 1: no candidate reproduces the box (closest one and a witness on stderr, nothing
    /// written); 2: usage, or a box that cannot be started or breaks the protocol.
    Infer {
        /// The box: a shell command that answers requests on stdout.
        #[arg(long)]
        exec: String,
        /// Operand formats: a=F,b=F,c=F,d=F (built-in formats).
        #[arg(long)]
        types: String,
        /// k: products per dot product.
        #[arg(long)]
        k: usize,
        /// Block scale factors: "FORMAT block=N".
        #[arg(long)]
        scale: Option<String>,
        /// The arch name of the spec written (default `inferred`).
        #[arg(long)]
        arch: Option<String>,
        /// The instruction name (default `inferred.k{K}.{d}.{a}.{b}.{c}`).
        #[arg(long)]
        name: Option<String>,
        /// Random cases the winner is verified on.
        #[arg(long, default_value_t = 10_000)]
        verify: usize,
        /// Print one JSON object (verified, pipeline, uses, parameters, probes,
        /// verify_cases, unresolved, seconds, output, witness) instead of the summary line.
        #[arg(long)]
        json: bool,
        /// Where to write the spec (only when verified).
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
    },
}

const RUN_VALUES: &str = "\
Values: hex encodings by default (`3f800000`, or `0x3f800000`). A value is a decimal
when it contains a `.`, starts with `+` or `-`, or is `inf`, `-inf` or `nan` (any case):
`1.0`, `-0.0`, `+12`, `6.25e-2`. A decimal is read exactly and must be exactly
representable in the operand's format; it is never rounded (`0.1` is an error in every
binary format). `inf` and `nan` need a format that has them.

Lanes: --a and --b take K values and --sa/--sb one scale factor per block, unless --pad
is given: then missing a/b lanes are +0 and missing scale factors 1.0.";

/// The instruction, operands and options of `mmac run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    pub file: PathBuf,
    /// Instruction name, as in `mmac list`.
    #[arg(long)]
    pub instr: String,
    /// c: one value (a hex encoding or an exact decimal, see below).
    #[arg(long, allow_hyphen_values = true)]
    pub c: String,
    /// a[0..K], comma-separated values.
    #[arg(long, allow_hyphen_values = true)]
    pub a: String,
    /// b[0..K], comma-separated values.
    #[arg(long, allow_hyphen_values = true)]
    pub b: String,
    /// Scale factors of A's row, one per block.
    #[arg(long, allow_hyphen_values = true)]
    pub sa: Option<String>,
    /// Scale factors of B's column, one per block.
    #[arg(long, allow_hyphen_values = true)]
    pub sb: Option<String>,
    /// Fill missing a/b lanes with +0 and missing scale factors with 1.0.
    #[arg(long)]
    pub pad: bool,
    #[arg(long, value_enum, default_value_t = Engine::Jit)]
    pub engine: Engine,
    /// Print every stage: decoded inputs, exponents, alignment, rounding, result
    /// (the trace comes from the interpreter).
    #[arg(long)]
    pub trace: bool,
}

/// Operands and output of `mma` and `gemm`.
#[derive(clap::Args, Debug)]
pub struct MatrixArgs {
    /// The spec file.
    pub spec: PathBuf,
    /// Instruction name, as in `mmac list`.
    #[arg(long)]
    pub instr: String,
    /// A (M x K) as .npy: the format's NumPy dtype (f64/f32/f16, integers) or raw encodings.
    #[arg(long)]
    pub a: PathBuf,
    /// B (K x N) as .npy.
    #[arg(long)]
    pub b: PathBuf,
    /// Scale factors of A's rows (M x K/block), for block-scaled instructions.
    #[arg(long)]
    pub sa: Option<PathBuf>,
    /// Scale factors of B's columns (K/block x N).
    #[arg(long)]
    pub sb: Option<PathBuf>,
    /// Where to write D (M x N) as .npy: checked before any work, never one of the inputs,
    /// and written whole or not at all (a temporary file renamed into place).
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Print max/mean absolute and relative error and the bias against the exact result.
    #[arg(long)]
    pub report: bool,
    #[arg(long, value_enum, default_value_t = Engine::Jit)]
    pub engine: Engine,
}

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let color = match cli.color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => {
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none()
        }
    };
    common::exit_code(dispatch(cli.command, color))
}

fn dispatch(cmd: Command, color: bool) -> common::Outcome {
    match cmd {
        Command::Check { files } => commands::check(&files, color),
        Command::List { file, markdown } => commands::list(&file, markdown, color),
        Command::Run(args) => commands::run(&args, color),
        Command::Test {
            spec,
            vectors,
            engine,
        } => commands::test(&spec, &vectors, engine, color),
        Command::Compile { file, emit } => jit::compile(&file, emit, color),
        Command::Bench {
            file,
            instr,
            engine,
            json,
        } => jit::bench(&file, &instr, engine, json, color),
        Command::Probe { file, instr } => commands::probe(&file, instr.as_deref(), color),
        Command::Show { file, instr } => commands::show(&file, &instr, color),
        Command::Mma { args, c } => matrix::run(&args, Some(&c), None, true, color),
        Command::Gemm { args, c, threads } => {
            matrix::run(&args, c.as_deref(), threads, false, color)
        }
        Command::Serve { file, instr } => infer::serve(&file, &instr, color),
        Command::Infer {
            exec,
            types,
            k,
            scale,
            arch,
            name,
            verify,
            json,
            output,
        } => infer::infer(&infer::InferArgs {
            exec: &exec,
            types: &types,
            k,
            scale: scale.as_deref(),
            arch: arch.as_deref(),
            name: name.as_deref(),
            verify,
            json,
            output: &output,
        }),
    }
}
