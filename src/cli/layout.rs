//! `layout`: the warp fragments of an instruction (which lane, register, element and bits
//! hold which row and column of A, B, C and D), as a lane x register grid per operand or
//! as JSON. The layouts themselves are data of the spec library
//! (`mmac_runtime::fragments`).

use super::common::{EXIT_FAILED, EXIT_OK, Outcome, instruction, load};
use mmac_runtime::fragments::{Fragment, Layout, Library};
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
}

#[derive(serde::Serialize)]
struct Operands {
    a: Vec<Entry>,
    b: Vec<Entry>,
    c: Vec<Entry>,
    d: Vec<Entry>,
}

#[derive(serde::Serialize)]
struct Json {
    operands: Operands,
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
        })
        .collect()
}

pub fn layout(file: &Path, name: &str, json: bool, color: bool) -> Outcome {
    let s = load(file, color)?;
    let checked = instruction(&s, name)?;
    let inst = checked.instruction();
    let found = Library::builtin().and_then(|lib| lib.find(inst));
    let frags = match found {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_FAILED);
        }
    };
    let mut out = std::io::stdout().lock();
    if json {
        let doc = Json {
            operands: Operands {
                a: entries(&frags.a),
                b: entries(&frags.b),
                c: entries(&frags.c),
                d: entries(&frags.d),
            },
        };
        let text = serde_json::to_string(&doc).map_err(std::io::Error::other)?;
        writeln!(out, "{text}")?;
    } else {
        write!(out, "{}", grids(inst, &frags))?;
    }
    out.flush()?;
    Ok(EXIT_OK)
}

/// Per operand: a heading (shape, format, fragment family, registers, evidence), then
/// one line per lane with the (row, col) of each register's elements, low to high.
fn grids(inst: &mmac_compiler::ir::Instruction, frags: &Layout) -> String {
    let ar = &inst.arithmetic;
    let formats = [&ar.a, &ar.b, &ar.c, &ar.d];
    let mut text = String::new();
    for ((op, f), format) in frags.operands().into_iter().zip(formats) {
        let per = f.elements / f.registers();
        text += &format!(
            "{op}: {} x {} {}, fragment `{}`: {} register{} of {} bits per lane, {per} element{} each\n  evidence {}\n",
            f.rows,
            f.cols,
            format.name,
            f.name,
            f.registers(),
            if f.registers() == 1 { "" } else { "s" },
            f.register_bits(),
            if per == 1 { "" } else { "s" },
            f.evidence
        );
        let cell = |lane: usize, r: usize| -> String {
            (0..per)
                .map(|j| {
                    let s = f.slots[lane * f.elements + r * per + j];
                    format!("{},{}", s.row, s.col)
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        let heads: Vec<String> = (0..f.registers())
            .map(|r| {
                let names: Vec<String> = (0..per).map(|j| format!("{op}{}", r * per + j)).collect();
                format!("r{r}: {}", names.join(" "))
            })
            .collect();
        let widths: Vec<usize> = (0..f.registers())
            .map(|r| {
                (0..32)
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
        for lane in 0..32 {
            text += &line(
                lane.to_string(),
                (0..f.registers()).map(|r| cell(lane, r)).collect(),
            );
        }
        text += "\n";
    }
    text.pop();
    text
}
