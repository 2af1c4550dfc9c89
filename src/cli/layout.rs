//! `layout`: the register fragments of an instruction (which lane, register, element and
//! bits hold which row and column of A, B, C and D, of a sparse instruction's metadata and
//! of a block-scaled one's scale factors), as a lane x register grid per operand or as
//! JSON. The layouts themselves are data of the spec library
//! (`mmac_runtime::fragments`).

use super::common::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, Outcome, instruction, load};
use mmac_compiler::Checked;
use mmac_runtime::fragments::{Fragment, Layout, LayoutError, Library, Selectors};
use mmac_runtime::specs::LoadedSpec;
use std::io::Write;
use std::path::Path;

#[derive(serde::Serialize)]
struct Entry {
    lane: usize,
    register: usize,
    element: usize,
    bits: [u32; 2],
    row: usize,
    col: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    set: Option<usize>,
}

#[derive(serde::Serialize)]
struct Json {
    operands: std::collections::BTreeMap<&'static str, Vec<Entry>>,
    lanes: usize,
    /// Operands no thread holds in registers, and where they lie instead.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    memory: std::collections::BTreeMap<&'static str, String>,
    /// A sparse instruction's metadata: how its fields encode the stored elements' places.
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<Metadata>,
    /// The fragment family of each operand held in registers, by name.
    fragments: std::collections::BTreeMap<&'static str, String>,
}

/// The encoding of a sparse instruction's metadata fields: a field per `unit` stored
/// elements of a row (the `meta` operand's columns), holding `codes[p]` when the unit sits
/// at place p of its group of `span` columns, of which `kept` are stored; and the
/// sparsity selector's values.
#[derive(serde::Serialize)]
struct Metadata {
    unit: usize,
    span: u32,
    kept: u32,
    codes: Vec<u64>,
    selectors: usize,
}

fn entries(f: &Fragment) -> Vec<Entry> {
    f.slots
        .iter()
        .map(|s| Entry {
            lane: s.lane,
            register: s.register,
            element: s.element,
            bits: [s.bits.0, s.bits.1],
            row: s.row,
            col: s.col,
            set: (f.sets > 1).then_some(s.set),
        })
        .collect()
}

/// `layout FILE --instr NAME...`: one instruction's grids or JSON document; with several
/// names (`--json` only), one JSON document per line, each naming its `"instruction"`,
/// and for a name without a known layout `{"instruction", "error"}` (exit 1 at the end),
/// so that a program reading many layouts loads the spec once. A fragment family's
/// entries are printed once, with the first operand it lays out; every other operand of
/// that family (C after D's twin, later lines) is named in `"fragments"` only and left out
/// of `"operands"` (a warpgroup's 128-lane accumulators serve dozens of instructions).
pub fn layout(file: &Path, names: &[String], json: bool, sel: &Selectors, color: bool) -> Outcome {
    let s = load(file, color)?;
    let mut out = std::io::stdout().lock();
    if let [name] = names {
        let checked = instruction(&s, name)?;
        let (doc, grids) = match one(&s, checked, sel) {
            Ok(found) => found,
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(exit_code(&e));
            }
        };
        if json {
            let text = serde_json::to_string(&doc).map_err(std::io::Error::other)?;
            writeln!(out, "{text}")?;
        } else {
            write!(out, "{grids}")?;
        }
        out.flush()?;
        return Ok(EXIT_OK);
    }
    // every name found before anything is printed: an unknown one prints nothing
    let found = names
        .iter()
        .map(|name| instruction(&s, name))
        .collect::<Result<Vec<_>, _>>()?;
    let mut failed = EXIT_OK;
    let mut printed = std::collections::BTreeSet::new();
    for (name, checked) in names.iter().zip(found) {
        let line = match one(&s, checked, sel) {
            Ok((mut doc, _)) => {
                for (op, family) in &doc.fragments {
                    if !printed.insert(family.clone()) {
                        doc.operands.remove(op);
                    }
                }
                let mut v = serde_json::to_value(&doc).map_err(std::io::Error::other)?;
                v["instruction"] = name.as_str().into();
                v
            }
            Err(e) => {
                failed = failed.max(exit_code(&e));
                serde_json::json!({"instruction": name, "error": e.to_string()})
            }
        };
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(failed)
}

/// A selector the instruction does not have (or past its values) is a usage error; an
/// instruction without a known layout, or a layout file at fault, a failure.
fn exit_code(e: &LayoutError) -> i32 {
    match e {
        LayoutError::Selector(_) => EXIT_USAGE,
        _ => EXIT_FAILED,
    }
}

/// One instruction's layout: its JSON document and its grids, or why it has none.
fn one(s: &LoadedSpec, checked: Checked, sel: &Selectors) -> Result<(Json, String), LayoutError> {
    let inst = checked.instruction();
    let (frags, extras) = Library::builtin().and_then(|lib| {
        let layout = lib.find_for(&s.spec().arch, inst)?;
        let extras = layout.extras(sel)?;
        Ok((layout, extras))
    })?;
    let ar = &inst.arithmetic;
    let mut operands: Vec<(&str, &Fragment, String)> = frags
        .operands()
        .into_iter()
        .zip([&ar.a, &ar.b, &ar.c, &ar.d])
        .map(|((op, f), format)| (op, f, format.name.clone()))
        .collect();
    for (op, f) in &extras {
        operands.push((op, f, extra_format(inst, &frags, op, f)));
    }
    let doc = Json {
        lanes: frags.a.lanes,
        operands: operands
            .iter()
            .map(|(op, f, _)| (*op, entries(f)))
            .collect(),
        memory: operands
            .iter()
            .filter_map(|(op, f, _)| Some((*op, f.memory.clone()?)))
            .collect(),
        fragments: operands
            .iter()
            .filter(|(_, f, _)| f.memory.is_none())
            .map(|(op, f, _)| (*op, f.name.clone()))
            .collect(),
        metadata: frags
            .meta
            .as_ref()
            .zip(inst.sparsity)
            .map(|(m, s)| Metadata {
                unit: m.unit,
                span: s.span(),
                kept: s.kept_columns(),
                codes: m.codes.clone(),
                selectors: m
                    .family
                    .selectors
                    .iter()
                    .find(|(n, _)| n == "selector")
                    .map_or(1, |(_, count)| *count),
            }),
    };
    let grids: Vec<String> = operands
        .iter()
        .map(|(op, f, format)| grid(op, f, format))
        .collect();
    Ok((doc, grids.join("\n")))
}

/// `layout --movement NAME`: the registers of a warp-level data movement (`ldmatrix`,
/// `stmatrix`), and which lanes give the rows' addresses.
pub fn movement(name: &str, json: bool) -> Outcome {
    let (f, matrices) = match Library::builtin().and_then(|lib| lib.movement(name)) {
        Ok(found) => found,
        Err(e) => {
            eprintln!(
                "error: {}",
                e.to_string()
                    .replace("fragment layout", "register layout of a data movement")
            );
            return Ok(EXIT_FAILED);
        }
    };
    let mut out = std::io::stdout().lock();
    let addresses: Vec<Address> = (0..8 * matrices)
        .map(|lane| Address {
            lane,
            matrix: lane / 8,
            row: lane % 8,
        })
        .collect();
    if json {
        #[derive(serde::Serialize)]
        struct MovementJson {
            operands: std::collections::BTreeMap<&'static str, Vec<Entry>>,
            lanes: usize,
            addresses: Vec<Address>,
        }
        let doc = MovementJson {
            operands: [("r", entries(&f))].into_iter().collect(),
            lanes: f.lanes,
            addresses,
        };
        let text = serde_json::to_string(&doc).map_err(std::io::Error::other)?;
        writeln!(out, "{text}")?;
    } else {
        let format = format!(
            "b16 ({matrices} {} of 8 x 8, matrix j in rows 8j..8j+7 and register j)",
            if matrices == 1 { "matrix" } else { "matrices" }
        );
        write!(out, "{}", grid_named("r", "e", &f, &format))?;
        writeln!(
            out,
            "\naddresses: lanes 0..{} each give the address of one row: lane l, row l % 8 of matrix l / 8",
            8 * matrices - 1
        )?;
    }
    out.flush()?;
    Ok(EXIT_OK)
}

/// A lane that gives a row's address to a data movement.
#[derive(serde::Serialize)]
struct Address {
    lane: usize,
    matrix: usize,
    row: usize,
}

/// What the elements of the metadata and the scale factors are.
fn extra_format(
    inst: &mmac_compiler::ir::Instruction,
    l: &Layout,
    op: &str,
    f: &Fragment,
) -> String {
    match (op, &l.meta, &inst.sparsity, &inst.arithmetic.scale) {
        ("meta", Some(m), Some(s), _) => format!(
            "metadata fields (one per {} stored element{} of a row, {s}: codes {})",
            m.unit,
            if m.unit == 1 { "" } else { "s" },
            m.codes
                .iter()
                .map(|c| format!("{c:#0w$b}", w = f.width as usize + 2))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        (_, _, _, Some(s)) => format!(
            "{} scale factors (one per {} elements of k)",
            s.format.name,
            inst.scale_block().unwrap_or(s.block)
        ),
        _ => String::new(),
    }
}

/// An operand's heading (shape, format, fragment family, registers, selectors, evidence),
/// then one line per lane with the (row, col) of each register's elements, low to high
/// (`row,col@set` where the warp computes several matrices; `-` for a register no element
/// uses, and for the lanes that hold none).
fn grid(op: &str, f: &Fragment, format: &str) -> String {
    grid_named(op, op, f, format)
}

/// [`grid`], the elements in the heading named `element` and their index.
fn grid_named(op: &str, element: &str, f: &Fragment, format: &str) -> String {
    if let Some(memory) = &f.memory {
        return format!(
            "{op}: {} x {} {format}, in {memory}: no thread holds it in registers\n",
            f.rows, f.cols
        );
    }
    // each lane's registers: the slots in them, low bits first
    let mut cells = vec![vec![Vec::new(); f.registers]; f.lanes];
    for s in &f.slots {
        cells[s.lane][s.register].push(*s);
    }
    // elements per register: as many as one holds (a scale factor's lanes hold one byte
    // of a register)
    let per = cells.iter().flatten().map(Vec::len).max().unwrap_or(0);
    let mut text = format!(
        "{op}: {}{} x {} {format}, fragment `{}`: {} register{} of {} bits per lane, {per} element{} each{}{}\n  evidence {}\n",
        if f.sets > 1 {
            format!("{} sets of ", f.sets)
        } else {
            String::new()
        },
        f.rows,
        f.cols,
        f.name,
        f.registers,
        if f.registers == 1 { "" } else { "s" },
        f.register_bits(),
        if per == 1 { "" } else { "s" },
        if f.copies > 1 {
            format!(", each element held by {} lanes", f.copies)
        } else {
            String::new()
        },
        f.selectors
            .iter()
            .map(|(n, v)| format!(", {n} {v}"))
            .collect::<String>(),
        f.evidence
    );
    let cell = |lane: usize, r: usize| -> String {
        let mut slots = cells[lane][r].clone();
        slots.sort_by_key(|s| s.bits.0);
        if slots.is_empty() {
            return "-".into();
        }
        slots
            .iter()
            .map(|s| {
                if f.sets > 1 {
                    format!("{},{}@{}", s.row, s.col, s.set)
                } else {
                    format!("{},{}", s.row, s.col)
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    // the heading names the elements of lane 0's registers (or the first lane's that
    // holds any), as the PTX ISA names them
    let named = f.slots.first().map_or(0, |s| s.lane);
    let heads: Vec<String> = (0..f.registers)
        .map(|r| {
            let mut slots = cells[named][r].clone();
            slots.sort_by_key(|s| s.bits.0);
            let names: Vec<String> = slots
                .iter()
                .map(|s| format!("{element}{}", s.element))
                .collect();
            format!("r{r}: {}", names.join(" ")).trim_end().to_string()
        })
        .collect();
    let widths: Vec<usize> = (0..f.registers)
        .map(|r| {
            (0..f.lanes)
                .map(|lane| cell(lane, r).len())
                .chain([heads[r].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |first: String, cells: Vec<String>| -> String {
        let mut l = format!("  {first:>4}");
        for (c, w) in cells.iter().zip(&widths) {
            l += &format!("  {c:<w$}");
        }
        l.trim_end().to_string() + "\n"
    };
    text += &line("lane".into(), heads.clone());
    for lane in 0..f.lanes {
        text += &line(
            lane.to_string(),
            (0..f.registers).map(|r| cell(lane, r)).collect(),
        );
    }
    text
}
