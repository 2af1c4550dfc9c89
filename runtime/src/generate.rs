//! Conformance vectors from a spec (`mmac gen`): random cases, then corner cases chosen
//! from the spec's own parameters, every expected `d` computed by the reference
//! interpreter, written as `.mmv` (what `mmac test` reads) or as `$readmemh` hex.
//!
//! The corner cases all come from the catalogue ([`crate::corners`]), in the spirit of
//! Berkeley TestFloat's levels:
//! - every probe of `mmac probe` ([`crate::probes::battery`]): the battery of the formats
//!   (±0, NaN and Inf in each operand, product and output overflow, subnormal inputs and
//!   outputs, cancellation, ties of the output rounding, scale-factor extremes) and the
//!   probes read from the IR (ties at every alignment cut, carries at every normalisation
//!   precision, sums below every e_zero, chain and group boundaries);
//! - the catalogue's structured candidates ([`crate::corners::structured`]) focused
//!   on the instruction and its single-parameter neighbours ([`crate::mutants`]), kept
//!   when they tell a neighbour or a behaviour variant apart that the cases before them
//!   do not (up to [`KILLS_WANTED`] cases per mutant);
//! - for a neighbour that no case tells apart yet, witnesses found by the search, unless
//!   it is proven to compute the same function ([`crate::observability`]).
//!
//! So vectors generated from a spec fail on that spec with any one numeric parameter
//! moved to a neighbouring value that checks, except where the move is proven
//! unobservable; [`Generated::neighbours`] says which held.

use crate::conformance::matches;
use crate::corners::{self, Focus};
use crate::inputs::{Input, hex};
use crate::mutants::{behaviour_variants, neighbours};
use crate::observability::proven_equivalent;
use crate::probes::battery;
use crate::sparse::SparseInput;
use crate::witness::{self, Evaluator, RandomInputs, SearchOptions, nan_any};
use mmac_compiler::Checked;
use mmac_compiler::engine::Engine;
use mmac_compiler::format::Format;
use mmac_compiler::interp;
use mmac_compiler::ir::Instruction;
use std::collections::HashSet;
use std::fmt::Write as _;

/// Corner cases kept per mutant that they tell apart.
pub const KILLS_WANTED: usize = 2;

/// What to generate.
#[derive(Clone, Debug)]
pub struct Options {
    /// Random cases, before the corner cases.
    pub random: usize,
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            random: 256,
            seed: 1,
        }
    }
}

/// One generated case: why it is there, its inputs and the spec's result.
#[derive(Clone, Debug)]
pub struct Case {
    pub label: String,
    pub input: Input,
    /// A sparse instruction's positions of a's stored elements (empty for a dense one).
    pub positions: Vec<u64>,
    pub d: u64,
}

/// What became of one single-parameter neighbour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    /// This many generated cases fail on it.
    Killed(usize),
    /// It takes another number of scale factors (its scale `block` moved), so it refuses
    /// every generated case.
    Interface,
    /// It computes the same function on every input, for this reason.
    Unobservable(String),
    /// No case tells it apart, and it is not proven equivalent.
    Survived,
}

/// Generated vectors, and the fate of every neighbour.
#[derive(Clone, Debug)]
pub struct Generated {
    pub cases: Vec<Case>,
    /// Random cases at the head of `cases`.
    pub random: usize,
    /// Each neighbour (`F 25 -> 26`) with its fate.
    pub neighbours: Vec<(String, Fate)>,
}

/// Why generation failed.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error("the reference interpreter cannot compute `{instruction}` on {input}: {message}")]
    Interpreter {
        instruction: String,
        input: String,
        message: String,
    },
    #[error(transparent)]
    Search(#[from] witness::SearchError),
    #[error("cannot write the cases: {0}")]
    Write(#[from] std::io::Error),
}

/// The most random cases one run generates.
pub const MAX_RANDOM: usize = 1 << 30;

/// The corner cases of `inst` and the fate of every neighbour: what [`generate`] adds
/// after the random cases.
#[derive(Clone, Debug)]
pub struct Corners {
    pub cases: Vec<Case>,
    pub neighbours: Vec<(String, Fate)>,
}

/// Generate vectors for `inst`, declared by the spec file `file_name` whose text is
/// `text` (its neighbours are re-checked from the text): the random cases, then the
/// corner cases. Everything is held in memory; [`random_cases`] and [`corner_cases`]
/// give the same cases one part at a time (`mmac gen` streams the random ones).
pub fn generate(checked: Checked, options: &Options) -> Result<Generated, GenError> {
    let mut cases = Vec::with_capacity(options.random.min(1 << 16));
    random_cases(checked, options, &mut |c| {
        cases.push(c);
        Ok(())
    })?;
    let corners = corner_cases(checked, options)?;
    cases.extend(corners.cases);
    Ok(Generated {
        cases,
        random: options.random,
        neighbours: corners.neighbours,
    })
}

/// The `options.random` random cases of `inst`, each computed by the interpreter and
/// handed to `each` as it is drawn (nothing is kept).
pub fn random_cases(
    checked: Checked,
    options: &Options,
    each: &mut dyn FnMut(Case) -> std::io::Result<()>,
) -> Result<(), GenError> {
    let inst = checked.instruction();
    if inst.sparsity.is_some() {
        let mut rng = mmac_compiler::random::Rng::new(options.seed);
        for i in 0..options.random {
            let input = SparseInput::random(inst, &mut rng);
            each(sparse_case(checked, format!("random {i}"), input)?)?;
        }
        return Ok(());
    }
    let own_focus = Focus::of(&[inst]);
    let mut random = RandomInputs::new(inst, &own_focus, options.seed);
    for i in 0..options.random {
        let input = random.draw();
        let d = reference(checked, &input)?;
        each(Case {
            label: format!("random {i}"),
            input,
            positions: vec![],
            d,
        })?;
    }
    Ok(())
}

/// A sparse input as a case, its d from the interpreter.
fn sparse_case(checked: Checked, label: String, input: SparseInput) -> Result<Case, GenError> {
    let d = Engine::interpreter(checked)
        .sparse_dot(&input.operands(), &input.positions)
        .map_err(|e| GenError::Interpreter {
            instruction: checked.name().to_string(),
            input: input.input.case_fields(checked.instruction()),
            message: e.to_string(),
        })?;
    Ok(Case {
        label,
        input: input.input,
        positions: input.positions,
        d,
    })
}

/// A sparse instruction's corner cases: those of the dense arithmetic it runs, each lifted
/// to sparse operands (see [`SparseInput::lift`]). Every neighbour is then judged on the
/// sparse cases (lifting may change an input of `over columns`): killed by one, proven
/// equivalent, or given witnesses by the sparse search. Last, inputs on which the other
/// hypothesis of what the unit does with the selected elements gives another d (labelled
/// so: a handful of captures of these settles it).
fn sparse_corners(
    checked: Checked,
    dense: Corners,
    options: &Options,
) -> Result<Corners, GenError> {
    let inst = checked.instruction();
    let nan = nan_any(inst);
    let mut rng = mmac_compiler::random::Rng::new(options.seed ^ 0x5a5a);
    let mut cases = Vec::with_capacity(dense.cases.len() + KILLS_WANTED);
    for c in dense.cases {
        let input = SparseInput::lift(checked, &c.input, &mut rng);
        cases.push(sparse_case(checked, c.label, input)?);
    }
    let search_error = |message: String| GenError::Interpreter {
        instruction: checked.name().to_string(),
        input: "random sparse inputs".into(),
        message,
    };
    // up to KILLS_WANTED witnesses that `other` differs, labelled `label: ...`
    let witnesses =
        |other: Checked, label: &str, cases: &mut Vec<Case>| -> Result<usize, GenError> {
            let mut found = 0;
            for seed in 0..4u64 {
                if found == KILLS_WANTED {
                    break;
                }
                let (w, _) = crate::sparse::search(checked, other, 4096, options.seed + seed)
                    .map_err(search_error)?;
                if let Some(w) = w {
                    found += 1;
                    let text = format!("{label}: d = {:x} there", w.right);
                    cases.push(sparse_case(checked, text, w.input)?);
                }
            }
            Ok(found)
        };
    let mut fates: Vec<(String, Fate)> = vec![];
    for n in neighbours(checked) {
        if !n.same_interface(inst) {
            fates.push((n.label(), Fate::Interface));
            continue;
        }
        let theirs = Engine::interpreter(n.checked.checked());
        let killed = cases
            .iter()
            .filter(|c| {
                !matches!(theirs.sparse_dot(&c.input.operands(), &c.positions),
                    Ok(d) if matches(&inst.arithmetic.d, c.d, d, nan))
            })
            .count();
        let fate = if killed > 0 {
            Fate::Killed(killed)
        } else if let Some(why) = proven_equivalent(checked, n.instruction()) {
            Fate::Unobservable(why)
        } else {
            match witnesses(n.checked.checked(), &n.label(), &mut cases)? {
                0 => Fate::Survived,
                found => Fate::Killed(found),
            }
        };
        fates.push((n.label(), fate));
    }
    if let Some(other) = crate::sparse::other_walk(checked) {
        let walk = |c: Checked| c.sparsity().map_or("", |s| s.walk.keyword());
        let label = format!("over {} -> over {}", walk(checked), walk(other.checked()));
        let fate = if matches!(
            inst.arithmetic.pipeline,
            mmac_compiler::ir::Pipeline::Integer(_)
        ) {
            // an exact sum: the unselected columns' zero products add nothing
            Fate::Unobservable(
                "an integer pipeline sums exactly, so zero products add nothing".into(),
            )
        } else {
            let other_label = format!("{label} (the other hypothesis)");
            match witnesses(other.checked(), &other_label, &mut cases)? {
                0 => Fate::Survived,
                found => Fate::Killed(found),
            }
        };
        fates.push((label, fate));
    }
    Ok(Corners {
        cases,
        neighbours: fates,
    })
}

/// The interpreter's d for one input.
fn reference(checked: Checked, input: &Input) -> Result<u64, GenError> {
    interp::run(checked, &input.operands()).map_err(|e| GenError::Interpreter {
        instruction: checked.name().to_string(),
        input: input.case_fields(checked.instruction()),
        message: e.to_string(),
    })
}

/// A 64-bit fingerprint of an input (the random cases are remembered by these alone).
fn fingerprint(input: &Input) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(input)
}

/// The corner cases of `inst` (none repeating a random case of `options`), and the
/// fate of every single-parameter neighbour.
pub fn corner_cases(checked: Checked, options: &Options) -> Result<Corners, GenError> {
    let dense = dense_corner_cases(checked, options)?;
    if checked.sparsity().is_some() {
        return sparse_corners(checked, dense, options);
    }
    Ok(dense)
}

/// [`corner_cases`] of the (dense) arithmetic.
fn dense_corner_cases(checked: Checked, options: &Options) -> Result<Corners, GenError> {
    let inst = checked.instruction();
    let nan = nan_any(inst);
    let d_format = &inst.arithmetic.d;
    let reference = |input: &Input| reference(checked, input);

    // the random inputs, drawn again and remembered by fingerprint
    let own_focus = Focus::of(&[inst]);
    let mut random = RandomInputs::new(inst, &own_focus, options.seed);
    let mut seen: HashSet<u64> = HashSet::new();
    for _ in 0..options.random {
        seen.insert(fingerprint(&random.draw()));
    }
    let mut seen_corner: HashSet<Input> = HashSet::new();
    let mut fresh = |i: &Input| !seen.contains(&fingerprint(i)) && seen_corner.insert(i.clone());

    // the mutants the corner cases are chosen against
    let (neighbours, other_interface): (Vec<_>, Vec<_>) = neighbours(checked)
        .into_iter()
        .partition(|n| n.same_interface(inst));
    let variants = behaviour_variants(inst);
    let mutants: Vec<Checked> = neighbours
        .iter()
        .map(|n| n.checked.checked())
        .chain(variants.iter().map(|v| v.checked.checked()))
        .collect();

    // every probe of the battery and of the IR, then structured candidates that tell a
    // mutant apart
    let mut corners: Vec<(String, Input)> = battery(inst)
        .into_iter()
        .map(|p| (p.name.clone(), p.input()))
        .filter(|(_, i)| fresh(i))
        .collect();
    let probe_count = corners.len();
    let mut focus_on: Vec<&Instruction> = vec![inst];
    focus_on.extend(neighbours.iter().map(|n| n.instruction()));
    let structured: Vec<(String, Input)> = corners::structured(inst, &Focus::of(&focus_on))
        .into_iter()
        .filter(|(_, i)| !seen.contains(&fingerprint(i)) && !seen_corner.contains(i))
        .collect();
    corners.extend(structured);
    let inputs: Vec<&Input> = corners.iter().map(|(_, i)| i).collect();
    let own: Vec<Option<u64>> = Evaluator::new(checked).each(&inputs);
    let mut kills = vec![0usize; mutants.len()];
    let mut keep = vec![false; corners.len()];
    let mut tells: Vec<Vec<bool>> = Vec::with_capacity(mutants.len());
    for m in &mutants {
        let theirs = Evaluator::new(*m).each(&inputs);
        tells.push(
            own.iter()
                .zip(&theirs)
                .map(|(x, y)| match (x, y) {
                    (Some(x), Some(y)) => !matches(d_format, *x, *y, nan),
                    (Some(_), None) => true,
                    _ => false,
                })
                .collect(),
        );
    }
    for (c, k) in keep.iter_mut().enumerate() {
        let wanted =
            c < probe_count || (0..mutants.len()).any(|m| tells[m][c] && kills[m] < KILLS_WANTED);
        if wanted && own[c].is_some() {
            *k = true;
            for m in 0..mutants.len() {
                kills[m] += tells[m][c] as usize;
            }
        }
    }
    let mut corner_cases: Vec<Case> = vec![];
    for ((label, input), k) in corners.into_iter().zip(keep) {
        if k {
            let d = reference(&input)?;
            corner_cases.push(Case {
                label,
                input,
                positions: vec![],
                d,
            });
        }
    }

    // neighbours no corner case tells apart: prove them equivalent or search for witnesses
    let mut fates: Vec<(String, Fate)> = other_interface
        .iter()
        .map(|n| (n.label(), Fate::Interface))
        .collect();
    for (i, n) in neighbours.iter().enumerate() {
        let fate = if kills[i] > 0 {
            Fate::Killed(kills[i])
        } else if let Some(why) = proven_equivalent(checked, n.instruction()) {
            Fate::Unobservable(why)
        } else {
            let search = SearchOptions {
                wanted: KILLS_WANTED,
                seed: options.seed,
                ..Default::default()
            };
            let found = witness::find(checked, n.checked.checked(), &search)?;
            for w in &found {
                corner_cases.push(Case {
                    label: format!("{}: {}", n.label(), w.origin),
                    input: w.input.clone(),
                    positions: vec![],
                    d: w.left,
                });
            }
            if found.is_empty() {
                Fate::Survived
            } else {
                Fate::Killed(found.len())
            }
        };
        fates.push((n.label(), fate));
    }
    Ok(Corners {
        cases: corner_cases,
        neighbours: fates,
    })
}

/// The `# key: value` header of a `.mmv` file for `inst`.
pub fn mmv_header(arch: &str, inst: &Instruction) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# mmv 1");
    let _ = writeln!(s, "# arch: {arch}");
    let _ = writeln!(s, "# instruction: {}", inst.name);
    for (key, value) in described(inst) {
        let note = match key {
            "sparse" => " (a= holds the stored elements, pos= their columns)",
            _ => "",
        };
        let _ = writeln!(s, "# {key}: {value}{note}");
    }
    let _ = writeln!(s, "# nan: {}", if nan_any(inst) { "any" } else { "exact" });
    s
}

/// The header lines that describe an instruction's operands, as `.mmv` files write them
/// (key, value): `k`, `sparse` (a sparse one), `types` and `scale`. `mmac test` warns
/// where a file's lines say otherwise of the instruction it names.
pub fn described(inst: &Instruction) -> Vec<(&'static str, String)> {
    let ar = &inst.arithmetic;
    let mut out = vec![("k", inst.columns().to_string())];
    if let Some(sp) = &inst.sparsity {
        out.push(("sparse", format!("a {sp} over {}", sp.walk.keyword())));
    }
    out.push((
        "types",
        format!(
            "a={} b={} c={} d={}",
            ar.a.name, ar.b.name, ar.c.name, ar.d.name
        ),
    ));
    out.push((
        "scale",
        ar.scale.as_ref().map_or("none".to_string(), |x| {
            format!(
                "{} block={}",
                x.format.name,
                inst.scale_block().unwrap_or(x.block)
            )
        }),
    ));
    out
}

/// The cases as a `.mmv` file: the header, `notes` as comment lines, then each case under
/// a comment with its label.
pub fn mmv_text(arch: &str, inst: &Instruction, notes: &[String], cases: &[Case]) -> String {
    let mut s = mmv_head(arch, inst, notes, cases.len());
    for c in cases {
        s.push_str(&mmv_case(inst, c));
    }
    s
}

/// The head of a `.mmv` file of `count` cases: the header and `notes` as comment lines
/// ([`one_line`]).
pub fn mmv_head(arch: &str, inst: &Instruction, notes: &[String], count: usize) -> String {
    let mut s = mmv_header(arch, inst);
    for n in notes {
        let _ = writeln!(s, "# {}", one_line(n));
    }
    let _ = writeln!(s, "# cases: {count}");
    s
}

/// A note as one comment line: control characters (a newline in a file name, say) are
/// written escaped (`\n`), so that a note can never start a line of its own.
pub fn one_line(note: &str) -> String {
    note.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// One case of a `.mmv` file: its label as a comment, then its line.
pub fn mmv_case(inst: &Instruction, c: &Case) -> String {
    let positions = match c.positions.is_empty() {
        true => String::new(),
        false => format!(" pos={}", crate::conformance::positions(&c.positions)),
    };
    format!(
        "# {}\n{}{positions} d={}\n",
        c.label,
        c.input.case_fields(inst),
        hex(&inst.arithmetic.d, c.d)
    )
}

/// The fields of one hex line, most significant first: (name, format).
fn hex_fields(inst: &Instruction) -> Vec<(String, &Format)> {
    let ar = &inst.arithmetic;
    let mut fields = vec![("c".to_string(), &ar.c)];
    fields.extend((0..inst.k()).map(|i| (format!("a{i}"), &ar.a)));
    fields.extend((0..inst.k()).map(|i| (format!("b{i}"), &ar.b)));
    if let Some(s) = &ar.scale {
        fields.extend((0..inst.scale_count()).map(|i| (format!("sa{i}"), &s.format)));
        fields.extend((0..inst.scale_count()).map(|i| (format!("sb{i}"), &s.format)));
    }
    fields.push(("d".to_string(), &ar.d));
    fields
}

/// The cases for Verilog's `$readmemh`: a comment header naming every field and its bit
/// range, then one case per line, every field zero-padded to whole hex digits and joined
/// by `_` (which `$readmemh` ignores), so that line `i` is one word of a memory
/// `logic [W-1:0] vectors [0:N-1]`.
pub fn hex_text(arch: &str, inst: &Instruction, notes: &[String], cases: &[Case]) -> String {
    let mut s = hex_head(arch, inst, notes, cases.len());
    for c in cases {
        s.push_str(&hex_case(inst, c));
    }
    s
}

/// The comment header of a `$readmemh` file of `count` cases.
pub fn hex_head(arch: &str, inst: &Instruction, notes: &[String], count: usize) -> String {
    let fields = hex_fields(inst);
    let width: u32 = fields.iter().map(|(_, f)| 4 * f.hex_digits() as u32).sum();
    let mut s = String::new();
    let _ = writeln!(s, "// mmac gen: {arch} {}", inst.name);
    for n in notes {
        let _ = writeln!(s, "// {}", one_line(n));
    }
    let _ = writeln!(
        s,
        "// {} cases, one per line: a {width}-bit word (logic [{}:0] vectors [0:{}])",
        count,
        width - 1,
        count.saturating_sub(1)
    );
    let _ = writeln!(
        s,
        "// fields, most significant first, each the raw encoding zero-padded to whole hex digits:"
    );
    let mut hi = width;
    let mut line = String::from("//  ");
    for (name, f) in &fields {
        let w = 4 * f.hex_digits() as u32;
        let item = format!(" {name}[{}:{}]={}", hi - 1, hi - w, f.name);
        if line.len() + item.len() > 96 {
            let _ = writeln!(s, "{line}");
            line = String::from("//  ");
        }
        line.push_str(&item);
        hi -= w;
    }
    let _ = writeln!(s, "{line}");
    s
}

/// One case as a `$readmemh` line.
pub fn hex_case(inst: &Instruction, c: &Case) -> String {
    let fields = hex_fields(inst);
    let i = &c.input;
    let mut values = vec![i.c];
    values.extend(&i.a);
    values.extend(&i.b);
    values.extend(&i.sa);
    values.extend(&i.sb);
    values.push(c.d);
    let words: Vec<String> = fields
        .iter()
        .zip(values)
        .map(|((_, f), v)| hex(f, v))
        .collect();
    format!("{}\n", words.join("_"))
}
