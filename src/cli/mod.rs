//! Command-line parsing (clap) and dispatch to the subcommands: `commands` (check, list,
//! show, probe, run, test, gen), `jit` (compile, bench), `matrix` (mma, gemm), `compare`
//! (diff), `report` (report) and `infer` (serve, infer), which share only the leaf
//! `common`.

mod commands;
mod common;
mod compare;
mod infer;
mod jit;
mod layout;
mod matrix;
mod prove;
mod report;

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

/// `prove --solver`: which solvers decide the miter.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Solver {
    /// ABC and Bitwuzla side by side, the first to decide (ABC alone where the Python of
    /// MMAC_PYTHON has no `bitwuzla` module).
    All,
    /// ABC's `iprove` on the bit-blasted miter.
    Abc,
    /// Bitwuzla (PyPI) on the word-level SMT-LIB 2 miter.
    Bitwuzla,
}

impl From<Solver> for mmac_runtime::prove::Solvers {
    fn from(s: Solver) -> Self {
        match s {
            Solver::All => Self::All,
            Solver::Abc => Self::Abc,
            Solver::Bitwuzla => Self::Bitwuzla,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// The exact reference interpreter.
    Interp,
    /// Native kernels from the Cranelift JIT (instructions it cannot lower run on the
    /// interpreter, with a note).
    Jit,
}

impl Engine {
    /// The engine facade's choice: the interpreter, or the JIT compiled as `jit` says.
    pub fn choice(self, jit: mmac_compiler::engine::Choice) -> mmac_compiler::engine::Choice {
        match self {
            Engine::Interp => mmac_compiler::engine::Choice::Interp,
            Engine::Jit => jit,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Parse and check spec files; diagnostics on stderr, exit 1 if any fails to check, 2 if
    /// any cannot be read.
    Check {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// List the instructions of a spec: name, shape, operand types, algorithm, F. A
    /// folder lists every spec below it, file by file.
    List {
        /// A spec file, or a folder of them.
        file: PathBuf,
        /// A Markdown table per architecture (instruction, algorithm, F, rounding per stage).
        #[arg(long, conflicts_with = "json")]
        markdown: bool,
        /// One JSON object {"instructions": [...]}: name, shape, types, pipeline, arguments,
        /// F, evidence and the derived datapath (chain, alignments with aligner and adder
        /// widths and terms, normalisers).
        #[arg(long)]
        json: bool,
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
        /// JIT-compile the kernels optimised, as `bench`, `mma` and `gemm` run them, and
        /// run each file's cases in one call of the batch entry, as `gemm` does (four
        /// records at once where a kernel has record lanes). By default `test` compiles
        /// them quickly (no optimisation passes, a single-pass register allocator) and
        /// runs case by case: a few hundred cases per kernel do not repay optimising.
        #[arg(long)]
        optimized: bool,
    },
    /// Compile every instruction of a spec: JIT-compile it and print how many and how long
    /// it took, print its Cranelift IR or machine code, or write a linkable object or
    /// shared library with a C API and its header (OUT with the extension `.h`), or
    /// synthesizable Verilog.
    Compile {
        file: PathBuf,
        /// What to produce: `clif` or `asm` print every kernel on stdout; `obj` writes a
        /// relocatable object, `lib` a shared library (linked by `cc -shared`, or $CC);
        /// `verilog` a combinational Verilog-2005 module per instruction (stdout or -o).
        #[arg(long, value_enum)]
        emit: Option<jit::Emit>,
        /// Where `--emit obj|lib` writes (default: `ARCH.o`, `libARCH.so`; the header goes
        /// beside it), or `--emit verilog` (default: stdout).
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
        /// Only this instruction (repeat the option for several).
        #[arg(long)]
        instr: Vec<String>,
    },
    /// Write conformance vectors for one instruction, computed by the reference
    /// interpreter: random cases, then corner cases chosen from the spec's parameters
    /// (alignment cuts, ties at every rounding stage, e_zero, chaining and group
    /// boundaries, overflow, subnormals, NaN/Inf/±0, scale extremes) until every
    /// single-parameter neighbour of the spec fails one of them.
    Gen {
        file: PathBuf,
        #[arg(long)]
        instr: String,
        /// Random cases (before the corner cases).
        #[arg(short = 'n', default_value_t = 256)]
        n: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// `mmv` (what `mmac test` reads) or `hex` (one case per line for $readmemh).
        #[arg(long, value_enum, default_value_t = commands::GenFormat::Mmv)]
        format: commands::GenFormat,
        /// The output file (default: stdout).
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
    },
    /// Time one instruction on random finite inputs: ns per dot product, dot products per
    /// second, and a native f32 dot product of the same K as the floor.
    Bench {
        file: PathBuf,
        #[arg(long)]
        instr: String,
        #[arg(long, value_enum, default_value_t = Engine::Jit)]
        engine: Engine,
        /// The inputs: `finite` (random finite encodings over the whole exponent range),
        /// or values drawn from normal, uniform, lognormal or signed (as `mmac report`
        /// draws them) rounded to nearest into the input formats, with unit scales.
        #[arg(long, default_value = "finite",
              value_parser = ["finite", "normal", "uniform", "lognormal", "signed"])]
        dist: String,
        /// End with one JSON object: instruction, engine, dist, ns_per_dot, dots_per_s,
        /// baseline_ns_per_dot, and for a sparse instruction dense_ns_per_dot (its dense
        /// arithmetic's kernel on the same values).
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
    /// parameter a number, every stage spelled out; then its derived datapath as comments
    /// (per stage: terms, aligner and adder widths, normaliser widths, chain length).
    Show {
        file: PathBuf,
        /// Instruction name, as in `mmac list`.
        #[arg(long)]
        instr: String,
        /// Also synthesize the instruction's Verilog with Yosys and print its cells by
        /// kind, transistors and gate equivalents (generic gates: an estimate for
        /// comparing designs, not silicon area).
        #[arg(long)]
        cost: bool,
    },
    /// Print the register fragments of a warp-level MMA: for every operand (a, b, c, d,
    /// and a sparse instruction's metadata, a block-scaled one's scale factors sa and
    /// sb), which lane, register and element (the PTX fragment index a0, a1, ...) holds
    /// which (row, col), and the element's bits in its register; from the layouts of the
    /// spec library (specs/layouts/, transcribed from the vendors' ISA documents). Exit 1
    /// for an instruction without a known layout. `--movement NAME` (no FILE) prints the
    /// registers of a warp-level data movement instead (`ldmatrix.sync.aligned.m8n8.x4.b16`,
    /// `stmatrix...`).
    Layout {
        #[arg(required_unless_present = "movement", conflicts_with = "movement")]
        file: Option<PathBuf>,
        /// Instruction name, as in `mmac list`; several (`--json` only) print one JSON
        /// document per line, each with its "instruction" (and "error" for one without a
        /// known layout: exit 1), the spec loaded once; a fragment family's entries only on
        /// the first line that uses it (its "fragments" names each operand's family).
        #[arg(
            long,
            required_unless_present = "movement",
            conflicts_with = "movement"
        )]
        instr: Vec<String>,
        /// A warp-level data movement of the PTX ISA (ldmatrix, stmatrix with .m8n8 .b16,
        /// .x1/.x2/.x4, .trans), e.g. `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`.
        #[arg(long)]
        movement: Option<String>,
        /// One JSON object: {"operands": {"a": [{"lane", "register", "element", "bits":
        /// [lo, hi], "row", "col"}, ...], "b": ..., "c": ..., "d": ..., "meta", "sa", "sb"
        /// where the instruction has them}, "lanes": L} (entries of an operand whose warp
        /// computes several independent matrices also give their "set"; a sparse
        /// instruction adds "metadata": {"unit", "span", "kept", "codes", "selectors"}, the
        /// encoding of its fields; "memory" names operands no thread holds; "fragments" the
        /// family of each operand held in registers).
        #[arg(long)]
        json: bool,
        /// The sparsity selector (`mma.sp`'s last operand): which lanes hold the metadata.
        /// A selector the instruction does not have, or past its values (this one, or
        /// --scale-a/--scale-b's), is a usage error: exit 2.
        #[arg(long, default_value_t = 0)]
        selector: usize,
        /// Block-scaled `mma`: the byte and thread selectors of A's scale factors
        /// (byte-id-a, thread-id-a) and of B's.
        #[arg(long, value_name = "BYTE,THREAD", value_parser = selector_pair)]
        scale_a: Option<(usize, usize)>,
        /// See --scale-a.
        #[arg(long, value_name = "BYTE,THREAD", value_parser = selector_pair)]
        scale_b: Option<(usize, usize)>,
    },
    /// Compare two instructions that take the same operands: search for an input on which
    /// they differ (structured candidates from both specs, then random inputs), shrink it to
    /// a minimal witness and explain it. Exit 1 when they differ, 0 when no difference was
    /// found, 2 when they take different operands.
    Diff {
        left_file: PathBuf,
        left_instr: String,
        right_file: PathBuf,
        right_instr: String,
        /// Random inputs tried after the structured candidates.
        #[arg(long, default_value_t = 100_000)]
        trials: usize,
        /// Seed of the random inputs.
        #[arg(long, default_value_t = 0x5eed_0fd1)]
        seed: u64,
        /// One JSON object: differ, tried, and when they differ witness, left, right,
        /// exact, stage, cause.
        #[arg(long)]
        json: bool,
        /// When the search finds no difference and nothing proves them equal, ask the
        /// solver (as `mmac prove` does): exit 0 proved, 1 a witness, 3 undecided.
        #[arg(long)]
        prove: bool,
        /// The solver's budget in seconds (with --prove).
        #[arg(long, default_value_t = 600)]
        timeout: u64,
    },
    /// Prove two instructions equal on every input, or a spec instruction and an RTL
    /// design (`--rtl`), or find a witness where they differ: a miter of the two
    /// circuits built by Yosys and decided by ABC and Bitwuzla. Exit 0 equivalent, 1 a
    /// witness (replayed on both sides before it is shown), 3 undecided within
    /// --timeout, 2 bad usage.
    Prove {
        /// LEFT_FILE LEFT_INSTR RIGHT_FILE RIGHT_INSTR, or FILE with --instr and --rtl.
        #[arg(required = true, num_args = 1..=4, value_name = "OPERANDS")]
        operands: Vec<String>,
        /// The spec's instruction (with --rtl).
        #[arg(long)]
        instr: Option<String>,
        /// A Verilog/SystemVerilog file of the design (repeat for its submodules).
        #[arg(long)]
        rtl: Vec<PathBuf>,
        /// The design's top module; its ports are c, a, b (sa, sb) and d, packed as
        /// `mmac compile --emit verilog` packs them.
        #[arg(long)]
        top: Option<String>,
        /// Set a parameter of the top module: NAME=VALUE (repeatable).
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Seconds before giving up undecided (exit 3).
        #[arg(long, default_value_t = 600)]
        timeout: u64,
        /// The solvers that decide the miter.
        #[arg(long, value_enum, default_value_t = Solver::All)]
        solver: Solver,
        /// Keep the work files (each side's Verilog, the miter, its AIG and SMT-LIB 2
        /// forms, the counterexample) in this folder.
        #[arg(long, value_name = "DIR")]
        keep: Option<PathBuf>,
        /// One JSON object: result, witness, left_d, right_d, seconds.
        #[arg(long)]
        json: bool,
    },
    /// Accuracy against the exact result: dot products of length K accumulated the way a
    /// GEMM does (k-steps in increasing order, d fed back as c, from c = +0) on inputs drawn
    /// from a distribution and rounded to nearest into the input formats. Per instruction
    /// and K: mean/max absolute and relative error, bias (mean of (result - exact)/|exact|)
    /// with its 95% confidence interval, and the shares correctly rounded and faithful.
    Report {
        file: PathBuf,
        instr: String,
        /// Another instruction to report on: FILE INSTR (repeatable).
        #[arg(long, num_args = 2, value_names = ["FILE", "INSTR"], action = clap::ArgAction::Append)]
        against: Vec<String>,
        /// normal (N(0,1)), uniform ([0,1), or --range), lognormal (exp(N(0,1))), signed
        /// (uniform on [-1,1)).
        #[arg(long, default_value = "normal")]
        dist: String,
        /// LO,HI for --dist uniform.
        #[arg(long, allow_hyphen_values = true)]
        range: Option<String>,
        /// Dot-product lengths, comma-separated (multiples of every instruction's k).
        #[arg(long, value_delimiter = ',', default_value = "16,64,256,1024,4096")]
        k: Vec<usize>,
        /// Samples per instruction and K.
        #[arg(long, default_value_t = 1000)]
        samples: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Write a plot of error and bias against K (.svg or .png).
        #[arg(long)]
        plot: Option<PathBuf>,
        /// Print {"rows": [...]}, one row per instruction and K (and with --cost,
        /// "costs": one per instruction).
        #[arg(long)]
        json: bool,
        /// Also synthesize each instruction's Verilog with Yosys: cells, transistors and
        /// gate equivalents beside the accuracy (generic gates, not silicon area).
        #[arg(long)]
        cost: bool,
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
        /// Worker threads, from 1 to four per core (default: one per core).
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
        /// Random cases the winner is verified on: 1 to 100,000,000 (no spec is written
        /// unverified).
        #[arg(long, default_value_t = 10_000,
              value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000_000))]
        verify: usize,
        /// Print one JSON object (verified, pipeline, uses, parameters, probes,
        /// verify_cases, unresolved, seconds, output, witness) instead of the summary line.
        #[arg(long)]
        json: bool,
        /// Where to write the spec (only when verified).
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
        /// Seconds to wait for each answer of the box before giving up on it (exit 2).
        #[arg(long, default_value_t = 30.0)]
        box_timeout: f64,
        /// The box is a sparse instruction ("2 of 4", "1 of 2", "2 of 4 pairs") of K =
        /// --k columns: its requests carry `pos=`; the arithmetic is inferred over the
        /// selected products, then checked on random positions.
        #[arg(long)]
        sparse: Option<String>,
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
    /// a[0..K], comma-separated values (a sparse instruction: its stored elements with
    /// --meta, or K values with at most 2 of every 4 nonzero, compressed).
    #[arg(long, allow_hyphen_values = true)]
    pub a: String,
    /// A sparse instruction's positions of a's stored elements: comma-separated column
    /// numbers (0..K), one per element of --a, in decimal (a .mmv case's `pos=` holds the
    /// same columns in hex).
    #[arg(long)]
    pub meta: Option<String>,
    /// b[0..K], comma-separated values.
    #[arg(long, allow_hyphen_values = true)]
    pub b: String,
    /// Scale factors of A's row, one per block.
    #[arg(long, allow_hyphen_values = true)]
    pub sa: Option<String>,
    /// Scale factors of B's column, one per block.
    #[arg(long, allow_hyphen_values = true)]
    pub sb: Option<String>,
    /// Fill missing a/b lanes with +0 and missing scale factors with 1.0 (a sparse
    /// instruction's a without --meta is a dense row of K, filled to K).
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
    /// For a sparse instruction: A's stored elements (M x K/2 for 2 of 4) with --meta, or
    /// A dense (M x K, at most 2 of every 4 nonzero), compressed.
    #[arg(long)]
    pub a: PathBuf,
    /// A sparse A's positions (.npy, the shape of --a, any unsigned integer dtype, either byte order): the
    /// column of K at which each stored element sits, increasing along a row.
    #[arg(long)]
    pub meta: Option<PathBuf>,
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
        Command::List {
            file,
            markdown,
            json,
        } => commands::list(&file, markdown, json, color),
        Command::Run(args) => commands::run(&args, color),
        Command::Test {
            spec,
            vectors,
            engine,
            optimized,
        } => commands::test(&spec, &vectors, engine, optimized, color),
        Command::Compile {
            file,
            emit,
            output,
            instr,
        } => jit::compile(&file, emit, output.as_deref(), &instr, color),
        Command::Gen {
            file,
            instr,
            n,
            seed,
            format,
            output,
        } => commands::generate(&file, &instr, n, seed, format, output.as_deref(), color),
        Command::Bench {
            file,
            instr,
            engine,
            dist,
            json,
        } => jit::bench(&file, &instr, engine, &dist, json, color),
        Command::Probe { file, instr } => commands::probe(&file, instr.as_deref(), color),
        Command::Show { file, instr, cost } => commands::show(&file, &instr, cost, color),
        Command::Layout {
            movement: Some(name),
            json,
            ..
        } => layout::movement(&name, json),
        Command::Layout {
            file: Some(file),
            instr,
            json,
            selector,
            scale_a,
            scale_b,
            ..
        } if !instr.is_empty() => {
            if instr.len() > 1 && !json {
                eprintln!("error: several --instr print JSON lines: add --json");
                return Ok(common::EXIT_USAGE);
            }
            let ((byte_id_a, thread_id_a), (byte_id_b, thread_id_b)) =
                (scale_a.unwrap_or_default(), scale_b.unwrap_or_default());
            let sel = mmac_runtime::fragments::Selectors {
                sparsity: selector,
                byte_id_a,
                thread_id_a,
                byte_id_b,
                thread_id_b,
            };
            layout::layout(&file, &instr, json, &sel, color)
        }
        Command::Layout { .. } => {
            // (clap requires FILE and --instr unless --movement is given)
            eprintln!("error: give FILE and --instr, or --movement");
            Ok(common::EXIT_USAGE)
        }
        Command::Prove {
            operands,
            instr,
            rtl,
            top,
            set,
            timeout,
            solver,
            keep,
            json,
        } => prove::prove(
            &prove::ProveArgs {
                operands: &operands,
                instr: instr.as_deref(),
                rtl: &rtl,
                top: top.as_deref(),
                parameters: &set,
                timeout,
                solvers: solver.into(),
                keep: keep.as_deref(),
                json,
            },
            color,
        ),
        Command::Diff {
            left_file,
            left_instr,
            right_file,
            right_instr,
            trials,
            seed,
            json,
            prove,
            timeout,
        } => compare::diff(
            &compare::DiffArgs {
                left: (&left_file, &left_instr),
                right: (&right_file, &right_instr),
                trials,
                seed,
                json,
                prove: prove.then_some(timeout),
            },
            color,
        ),
        Command::Report {
            file,
            instr,
            against,
            dist,
            range,
            k,
            samples,
            seed,
            plot,
            json,
            cost,
        } => report::report(
            &report::ReportArgs {
                file: &file,
                instr: &instr,
                against: against
                    .chunks(2)
                    .map(|p| (PathBuf::from(&p[0]), p[1].clone()))
                    .collect(),
                dist: &dist,
                range: range.as_deref(),
                ks: k,
                samples,
                seed,
                plot: plot.as_deref(),
                json,
                cost,
            },
            color,
        ),
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
            box_timeout,
            sparse,
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
            box_timeout,
            sparse: sparse.as_deref(),
        }),
    }
}

/// `BYTE,THREAD`: the byte and thread selectors of a block-scaled `mma`'s scale factors.
fn selector_pair(text: &str) -> Result<(usize, usize), String> {
    let parse = |x: &str| x.trim().parse::<usize>().map_err(|e| format!("`{x}`: {e}"));
    match text.split(',').collect::<Vec<_>>()[..] {
        [byte, thread] => Ok((parse(byte)?, parse(thread)?)),
        _ => Err(format!(
            "`{text}`: give two numbers, BYTE,THREAD (e.g. 2,1)"
        )),
    }
}
