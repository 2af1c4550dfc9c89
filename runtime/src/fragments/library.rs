//! The layout files: parsing, the validator every fragment family passes (for every value
//! of its selectors), and the lookup of an instruction's layout.

use super::expr::{Expr, Vars};
use super::{Fragment, Layout, LayoutError, Meta, Slot};
use mmac_compiler::ir::Instruction;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The most rows, columns or elements per lane a fragment may have (the largest PTX
/// fragment, b1 m16n8k256's A, is 16 x 256 with 128 elements per lane).
const MAX_SIDE: usize = 4096;
/// The most lanes an image may have (a warpgroup's 128).
const MAX_LANES: usize = 128;
/// The most combinations of selector values a family may have (each is validated).
const MAX_COMBINATIONS: usize = 256;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileData {
    #[serde(default)]
    #[allow(dead_code)]
    about: String,
    fragments: Vec<FragmentData>,
    instructions: Vec<EntryData>,
    /// Instructions whose operands no thread holds in registers, and why.
    #[serde(default)]
    without_registers: Vec<WithoutData>,
    /// Warp-level data movements (ldmatrix, stmatrix) and the registers they fill.
    #[serde(default)]
    movements: Vec<MovementData>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MovementData {
    names: Vec<String>,
    fragment: String,
    matrices: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WithoutData {
    names: Vec<String>,
    why: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FragmentData {
    name: String,
    evidence: String,
    rows: usize,
    cols: usize,
    width: u32,
    elements: usize,
    row: Vec<Case>,
    col: Vec<Case>,
    /// Bits an element takes in its register (its width unless given), and where in
    /// them the value's lowest bit lies.
    container: Option<u32>,
    #[serde(default)]
    offset: u32,
    lanes: Option<usize>,
    copies: Option<usize>,
    sets: Option<usize>,
    #[serde(default)]
    set: Vec<Case>,
    held: Option<String>,
    #[serde(default)]
    at: Vec<Case>,
    registers: Option<usize>,
    #[serde(default)]
    selectors: BTreeMap<String, usize>,
}

/// A formula for the elements `i` lists (all of them when `i` is left out).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    i: Option<Vec<usize>>,
    expr: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryData {
    names: Vec<String>,
    /// The architectures (a spec's `arch`) the entry serves; every one when left out.
    #[serde(default)]
    arch: Vec<String>,
    a: String,
    /// B's family, or (`b_memory`) where B lies instead of registers.
    b: Option<String>,
    b_memory: Option<String>,
    c: String,
    d: String,
    meta: Option<MetaData>,
    sa: Option<String>,
    sb: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MetaData {
    fragment: String,
    #[serde(default = "one")]
    unit: usize,
    codes: Vec<u64>,
}

fn one() -> usize {
    1
}

/// A fragment family as its file describes it: the formulas, built into a [`Fragment`]
/// for given values of its selectors.
#[derive(Debug)]
pub struct Family {
    pub name: String,
    pub evidence: String,
    /// The file that describes it.
    pub file: String,
    pub rows: usize,
    pub cols: usize,
    pub width: u32,
    pub container: u32,
    pub offset: u32,
    pub lanes: usize,
    pub copies: usize,
    pub sets: usize,
    pub elements: usize,
    pub registers: usize,
    /// The selectors' names and how many values each takes.
    pub selectors: Vec<(String, usize)>,
    row: Vec<Expr>,
    col: Vec<Expr>,
    set: Vec<Expr>,
    at: Option<Vec<Expr>>,
    held: Option<Expr>,
    /// Built with every selector 0.
    default: Arc<Fragment>,
}

impl Family {
    /// The fragment for these selector values (by name; a selector the family does not
    /// have must be 0, one it has below its count).
    pub fn build(&self, values: &[(&str, usize)]) -> Result<Fragment, String> {
        let mut v = vec![0; self.selectors.len()];
        for &(name, value) in values {
            match self.selectors.iter().position(|(n, _)| n == name) {
                Some(at) if value < self.selectors[at].1 => v[at] = value,
                Some(at) => {
                    return Err(format!(
                        "{name} {value} is out of range for fragment `{}` (0 to {})",
                        self.name,
                        self.selectors[at].1 - 1
                    ));
                }
                None if value == 0 => {}
                None => {
                    return Err(format!(
                        "fragment `{}` has no {name} (it must be 0, not {value})",
                        self.name
                    ));
                }
            }
        }
        if v.iter().all(|&x| x == 0) {
            return Ok((*self.default).clone());
        }
        self.build_at(&v)
    }

    /// The fragment with every selector 0.
    pub fn fragment(&self) -> &Arc<Fragment> {
        &self.default
    }

    fn register_bits(&self) -> u32 {
        self.container.max(32)
    }

    /// Build and validate the slots for selector values `v` (in declaration order).
    fn build_at(&self, v: &[usize]) -> Result<Fragment, String> {
        let regbits = self.register_bits() as usize;
        let mut holders = vec![0usize; self.sets * self.rows * self.cols];
        let mut first: Vec<Option<(usize, usize)>> = vec![None; holders.len()];
        let mut slots = Vec::new();
        for lane in 0..self.lanes {
            let vars = |i| Vars {
                lane,
                i,
                selectors: v,
            };
            if let Some(h) = &self.held
                && h.eval(vars(0)) == 0
            {
                continue;
            }
            let mut used: Vec<(usize, usize)> = Vec::new();
            for i in 0..self.elements {
                let (row, col) = (self.row[i].eval(vars(i)), self.col[i].eval(vars(i)));
                let set = self.set.get(i).map_or(0, |e| e.eval(vars(i)));
                let at = match &self.at {
                    Some(at) => at[i].eval(vars(i)),
                    None => (i * self.container as usize) as i64,
                };
                let (Ok(row), Ok(col), Ok(set), Ok(at)) = (
                    usize::try_from(row),
                    usize::try_from(col),
                    usize::try_from(set),
                    usize::try_from(at),
                ) else {
                    return Err(format!(
                        "lane {lane}, element {i}: row {row}, col {col}, set {set}, bit {at}: negative"
                    ));
                };
                if row >= self.rows || col >= self.cols || set >= self.sets {
                    let (of, sets) = if self.sets > 1 || set > 0 {
                        (
                            format!(" of set {set}"),
                            format!(" and its {} sets", self.sets),
                        )
                    } else {
                        (String::new(), String::new())
                    };
                    return Err(format!(
                        "lane {lane}, element {i}: ({row}, {col}){of} is outside the {} x {} matrix{sets}",
                        self.rows, self.cols
                    ));
                }
                let span = (at, at + self.container as usize);
                if at % regbits + self.container as usize > regbits
                    || span.1 > self.registers * regbits
                {
                    return Err(format!(
                        "lane {lane}, element {i}: bits {}..{} do not lie in one of its {} registers of {regbits} bits",
                        span.0, span.1, self.registers
                    ));
                }
                if let Some(&(lo, _)) = used.iter().find(|&&(lo, hi)| lo < span.1 && span.0 < hi) {
                    return Err(format!(
                        "lane {lane}, element {i}: bits {}..{} overlap another element's, from bit {lo}",
                        span.0, span.1
                    ));
                }
                used.push(span);
                let cell = (set * self.rows + row) * self.cols + col;
                holders[cell] += 1;
                if holders[cell] > self.copies {
                    let (l, e) = first[cell].unwrap_or_default();
                    return Err(format!(
                        "({row}, {col}){} is held {}: by lane {l}, element {e} and by lane {lane}, element {i}",
                        if self.sets > 1 {
                            format!(" of set {set}")
                        } else {
                            String::new()
                        },
                        if self.copies == 1 {
                            "twice".to_string()
                        } else {
                            format!("more than {} times", self.copies)
                        }
                    ));
                }
                first[cell].get_or_insert((lane, i));
                let lo = (at % regbits) as u32 + self.offset;
                slots.push(Slot {
                    lane,
                    register: at / regbits,
                    element: i,
                    bits: (lo, lo + self.width),
                    row,
                    col,
                    set,
                });
            }
        }
        if let Some(cell) = holders.iter().position(|&n| n != self.copies) {
            let (set, rc) = (
                cell / (self.rows * self.cols),
                cell % (self.rows * self.cols),
            );
            return Err(format!(
                "({}, {}){} is held by {} lane{} ({} expected)",
                rc / self.cols,
                rc % self.cols,
                if self.sets > 1 {
                    format!(" of set {set}")
                } else {
                    String::new()
                },
                if holders[cell] == 0 {
                    "no".to_string()
                } else {
                    holders[cell].to_string()
                },
                if holders[cell] == 1 { "" } else { "s" },
                self.copies
            ));
        }
        Ok(Fragment {
            name: self.name.clone(),
            evidence: self.evidence.clone(),
            rows: self.rows,
            cols: self.cols,
            width: self.width,
            container: self.container,
            lanes: self.lanes,
            copies: self.copies,
            sets: self.sets,
            elements: self.elements,
            registers: self.registers,
            memory: None,
            selectors: self
                .selectors
                .iter()
                .zip(v)
                .map(|((n, _), &x)| (n.clone(), x))
                .collect(),
            slots,
        })
    }
}

/// Check the shape of a family's description and parse its formulas.
fn family(file: &str, f: FragmentData) -> Result<Family, String> {
    if !(1..=64).contains(&f.width) {
        return Err(format!("width {} is not 1 to 64 bits", f.width));
    }
    let container = f.container.unwrap_or(f.width);
    if ![1, 2, 4, 8, 16, 32, 64].contains(&container) || f.offset + f.width > container {
        return Err(format!(
            "a container of {container} bits cannot hold {} bits from bit {}",
            f.width, f.offset
        ));
    }
    let (lanes, copies, sets) = (
        f.lanes.unwrap_or(super::LANES),
        f.copies.unwrap_or(1),
        f.sets.unwrap_or(1),
    );
    if lanes == 0 || lanes > MAX_LANES || copies == 0 || sets == 0 || copies * sets > 64 {
        return Err(format!(
            "{lanes} lanes, {copies} copies, {sets} sets: lanes must be 1 to {MAX_LANES}, copies and sets at least 1"
        ));
    }
    if f.rows > MAX_SIDE || f.cols > MAX_SIDE || f.elements > MAX_SIDE {
        return Err(format!(
            "{} x {} with {} elements per lane: more than {MAX_SIDE} is not a fragment",
            f.rows, f.cols, f.elements
        ));
    }
    let cells = f.rows * f.cols * sets * copies;
    if f.elements == 0 || (f.held.is_none() && cells != lanes * f.elements) {
        return Err(format!(
            "{} x {} elements{}{} over {lanes} lanes is not {} elements per lane",
            f.rows,
            f.cols,
            if sets > 1 {
                format!(" in {sets} sets")
            } else {
                String::new()
            },
            if copies > 1 {
                format!(", each held {copies} times,")
            } else {
                String::new()
            },
            f.elements
        ));
    }
    let register_bits = container.max(32) as usize;
    let registers = match (f.registers, f.at.is_empty()) {
        (Some(r), false) => r,
        (None, false) => return Err("`at` places elements: give `registers` too".into()),
        (given, true) => {
            if !(f.elements * container as usize).is_multiple_of(register_bits) {
                return Err(format!(
                    "{} elements of {container} bits do not fill whole {register_bits}-bit registers",
                    f.elements
                ));
            }
            let r = f.elements * container as usize / register_bits;
            if given.is_some_and(|g| g != r) {
                return Err(format!(
                    "{} elements fill {r} registers, not {}",
                    f.elements,
                    given.unwrap()
                ));
            }
            r
        }
    };
    let names: Vec<String> = f.selectors.keys().cloned().collect();
    let combinations = f
        .selectors
        .values()
        .try_fold(1usize, |n, &c| (c > 0).then(|| n.saturating_mul(c)));
    if combinations.is_none_or(|n| n > MAX_COMBINATIONS) {
        return Err(format!(
            "selectors {:?}: each needs at least 1 value, at most {MAX_COMBINATIONS} combinations in all",
            f.selectors
        ));
    }
    let held = f
        .held
        .as_deref()
        .map(|h| Expr::parse(h, &names).map_err(|e| format!("held `{h}`: {e}")))
        .transpose()?;
    if held.as_ref().is_some_and(Expr::uses_index) {
        return Err("held: a lane holds all its elements or none (no `i`)".into());
    }
    let mut fam = Family {
        name: f.name,
        evidence: f.evidence,
        file: file.to_string(),
        rows: f.rows,
        cols: f.cols,
        width: f.width,
        container,
        offset: f.offset,
        lanes,
        copies,
        sets,
        elements: f.elements,
        registers,
        selectors: f.selectors.into_iter().collect(),
        row: formulas(&f.row, f.elements, "row", &names)?,
        col: formulas(&f.col, f.elements, "col", &names)?,
        set: if f.set.is_empty() {
            vec![]
        } else {
            formulas(&f.set, f.elements, "set", &names)?
        },
        at: if f.at.is_empty() {
            None
        } else {
            Some(formulas(&f.at, f.elements, "at", &names)?)
        },
        held,
        default: Arc::new(Fragment::empty()),
    };
    // every combination of selector values
    let counts: Vec<usize> = fam.selectors.iter().map(|(_, c)| *c).collect();
    let mut v = vec![0; counts.len()];
    loop {
        let built = fam.build_at(&v).map_err(|e| {
            if v.is_empty() {
                e
            } else {
                let at: Vec<String> = fam
                    .selectors
                    .iter()
                    .zip(&v)
                    .map(|((n, _), x)| format!("{n} {x}"))
                    .collect();
                format!("with {}: {e}", at.join(", "))
            }
        })?;
        if v.iter().all(|&x| x == 0) {
            fam.default = Arc::new(built);
        }
        let Some(d) = (0..v.len()).find(|&d| v[d] + 1 < counts[d]) else {
            break;
        };
        v[d] += 1;
        v[..d].fill(0);
    }
    Ok(fam)
}

/// One formula per element index, from cases that must cover each index exactly once.
fn formulas(
    cases: &[Case],
    elements: usize,
    what: &str,
    selectors: &[String],
) -> Result<Vec<Expr>, String> {
    let mut out: Vec<Option<Expr>> = vec![None; elements];
    for case in cases {
        let expr = Expr::parse(&case.expr, selectors)
            .map_err(|e| format!("{what} `{}`: {e}", case.expr))?;
        let indices: Vec<usize> = match &case.i {
            Some(list) => list.clone(),
            None => (0..elements).collect(),
        };
        for i in indices {
            if i >= elements {
                return Err(format!(
                    "{what}: element {i} does not exist (a lane holds {elements})"
                ));
            }
            if out[i].replace(expr.clone()).is_some() {
                return Err(format!("{what}: element {i} has two formulas"));
            }
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(i, e)| e.ok_or_else(|| format!("{what}: element {i} has no formula")))
        .collect()
}

/// An instruction entry: name patterns and its operands' families.
struct Entry {
    file: String,
    names: Vec<String>,
    /// The architectures it serves (all when empty).
    arch: Vec<String>,
    /// Where B lies when no thread holds it in registers (then `abcd[1]` is unused).
    b_memory: Option<String>,
    abcd: [usize; 4],
    meta: Option<(usize, usize, Vec<u64>)>,
    scales: Option<[usize; 2]>,
}

/// Validated layout files: fragment families and the instructions they serve.
#[derive(Default)]
pub struct Library {
    families: Vec<Arc<Family>>,
    entries: Vec<Entry>,
    /// Name patterns of instructions without register fragments, and why.
    without: Vec<(Vec<String>, String)>,
    /// Name patterns of data movements, their family and how many 8-row matrices it holds.
    movements: Vec<(Vec<String>, usize, usize)>,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library")
            .field("families", &self.families.len())
            .field("entries", &self.entries.len())
            .finish()
    }
}

impl Library {
    /// The library's own layouts ([`super::BUILTIN_FILES`]), parsed and validated once.
    pub fn builtin() -> Result<&'static Library, LayoutError> {
        static LIB: std::sync::OnceLock<Result<Library, LayoutError>> = std::sync::OnceLock::new();
        LIB.get_or_init(|| {
            let mut lib = Library::default();
            for (file, text) in super::BUILTIN_FILES {
                lib.add(file, text)?;
            }
            Ok(lib)
        })
        .as_ref()
        .map_err(Clone::clone)
    }

    /// Parse and validate one layout file; every error names the file and, where the
    /// fault is in one, the fragment family.
    pub fn parse(file: &str, text: &str) -> Result<Library, LayoutError> {
        let mut lib = Library::default();
        lib.add(file, text)?;
        Ok(lib)
    }

    /// Parse and validate a layout file into the library (fragment names are shared by
    /// all its files, and an entry may name a family of an earlier file).
    pub fn add(&mut self, file: &str, text: &str) -> Result<(), LayoutError> {
        let invalid = |family: Option<&str>, what: String| LayoutError::Invalid {
            file: file.to_string(),
            family: family.map(str::to_string),
            what,
        };
        let data: FileData =
            serde_json::from_str(text).map_err(|e| invalid(None, e.to_string()))?;
        for f in data.fragments {
            if self.families.iter().any(|g| g.name == f.name) {
                return Err(invalid(Some(&f.name), "declared twice".into()));
            }
            let name = f.name.clone();
            let fam = family(file, f).map_err(|what| invalid(Some(&name), what))?;
            self.families.push(Arc::new(fam));
        }
        for e in data.instructions {
            let entry = self.entry(file, e).map_err(|what| invalid(None, what))?;
            self.entries.push(entry);
        }
        for w in data.without_registers {
            self.without.push((w.names, w.why));
        }
        for m in data.movements {
            let at = self
                .index(&m.fragment, "registers", &m.names)
                .map_err(|what| invalid(None, what))?;
            let f = &self.families[at];
            if m.matrices == 0 || f.rows != 8 * m.matrices || f.lanes < 8 * m.matrices {
                return Err(invalid(
                    Some(&f.name),
                    format!(
                        "serves `{}`, {} matrices of 8 rows, but holds {} rows",
                        m.names.join("`, `"),
                        m.matrices,
                        f.rows
                    ),
                ));
            }
            self.movements.push((m.names, at, m.matrices));
        }
        Ok(())
    }

    fn index(&self, name: &str, operand: &str, names: &[String]) -> Result<usize, String> {
        self.families
            .iter()
            .position(|f| f.name == name)
            .ok_or_else(|| {
                format!(
                    "operand {operand} of `{}` names no fragment `{name}`",
                    names.join("`, `")
                )
            })
    }

    fn entry(&self, file: &str, e: EntryData) -> Result<Entry, String> {
        let b_name = match (&e.b, &e.b_memory) {
            (Some(b), None) => b.clone(),
            // (B's shape is the instruction's; the checks below use C's columns)
            (None, Some(_)) => e.c.clone(),
            _ => {
                return Err(format!(
                    "`{}`: give b (a fragment) or b_memory (where B lies instead), one of them",
                    e.names.join("`, `")
                ));
            }
        };
        let mut abcd = [0; 4];
        for (slot, (operand, name)) in
            abcd.iter_mut()
                .zip([("a", &e.a), ("b", &b_name), ("c", &e.c), ("d", &e.d)])
        {
            *slot = self.index(name, operand, &e.names)?;
        }
        let [a, b, c, d] = abcd.map(|i| &self.families[i]);
        let k_agrees =
            e.b_memory.is_some() || a.cols == b.rows || e.meta.is_some() && a.cols * 2 == b.rows;
        let shapes_agree = k_agrees
            && a.rows == c.rows
            && b.cols == c.cols
            && (c.rows, c.cols) == (d.rows, d.cols);
        if !shapes_agree {
            return Err(format!(
                "the fragments of `{}` do not make one m x n x k (a {} x {}, b {} x {}, c {} x {}, d {} x {})",
                e.names.join("`, `"),
                a.rows,
                a.cols,
                b.rows,
                b.cols,
                c.rows,
                c.cols,
                d.rows,
                d.cols
            ));
        }
        let fams = [a, b, c, d];
        if fams.iter().any(|f| (f.lanes, f.sets) != (a.lanes, a.sets)) {
            return Err(format!(
                "the fragments of `{}` differ in lanes or sets",
                e.names.join("`, `")
            ));
        }
        let meta = match e.meta {
            None => None,
            Some(m) => {
                let at = self.index(&m.fragment, "meta", &e.names)?;
                let f = &self.families[at];
                let distinct = m
                    .codes
                    .iter()
                    .enumerate()
                    .all(|(j, x)| !m.codes[..j].contains(x));
                if m.unit == 0
                    || m.codes.is_empty()
                    || !distinct
                    || m.codes.iter().any(|&x| f.width < 64 && x >> f.width != 0)
                {
                    return Err(format!(
                        "the metadata codes of `{}` must be distinct values of {} bits, one per unit of {} elements",
                        e.names.join("`, `"),
                        f.width,
                        m.unit
                    ));
                }
                Some((at, m.unit, m.codes))
            }
        };
        let scales = match (e.sa, e.sb) {
            (None, None) => None,
            (Some(sa), Some(sb)) => Some([
                self.index(&sa, "sa", &e.names)?,
                self.index(&sb, "sb", &e.names)?,
            ]),
            _ => {
                return Err(format!(
                    "`{}`: give both sa and sb, or neither",
                    e.names.join("`, `")
                ));
            }
        };
        Ok(Entry {
            file: file.to_string(),
            names: e.names,
            arch: e.arch,
            b_memory: e.b_memory,
            abcd,
            meta,
            scales,
        })
    }

    /// The registers a warp-level data movement (`ldmatrix`, `stmatrix`) fills or reads:
    /// the fragment of its matrices (matrix j in rows 8j..8j+7) and how many there are.
    pub fn movement(&self, name: &str) -> Result<(Arc<Fragment>, usize), LayoutError> {
        self.movements
            .iter()
            .find(|(names, _, _)| names.iter().any(|p| glob(p, name)))
            .map(|(_, at, n)| (self.families[*at].fragment().clone(), *n))
            .ok_or_else(|| LayoutError::Unknown(name.to_string()))
    }

    /// The fragment family of this name, built with every selector 0.
    pub fn fragment(&self, name: &str) -> Option<&Fragment> {
        self.family(name).map(|f| &**f.fragment())
    }

    /// The fragment family of this name.
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name).map(|f| &**f)
    }

    /// Every fragment family, with every selector 0.
    pub fn fragments(&self) -> impl Iterator<Item = &Fragment> {
        self.families.iter().map(|f| &**f.fragment())
    }

    /// The layout of an instruction of any architecture: [`Library::find_for`] without
    /// one (entries that serve named architectures only do not match).
    pub fn find(&self, inst: &Instruction) -> Result<Layout, LayoutError> {
        self.find_for("", inst)
    }

    /// The layout of an instruction of a spec of architecture `arch` (its `arch` line):
    /// the first entry with a name pattern that matches and that serves `arch` (or every
    /// architecture), checked against the instruction's shape, sparsity, scale factors
    /// and operand widths. (RDNA3 and RDNA4 share WMMA names with different layouts.)
    pub fn find_for(&self, arch: &str, inst: &Instruction) -> Result<Layout, LayoutError> {
        let Some(e) = self.entries.iter().find(|e| {
            (e.arch.is_empty() || e.arch.iter().any(|a| a == arch))
                && e.names.iter().any(|p| glob(p, &inst.name))
        }) else {
            if let Some((_, why)) = self
                .without
                .iter()
                .find(|(names, _)| names.iter().any(|p| glob(p, &inst.name)))
            {
                return Err(LayoutError::WithoutRegisters(
                    inst.name.clone(),
                    why.clone(),
                ));
            }
            return Err(LayoutError::Unknown(inst.name.clone()));
        };
        let invalid = |family: &Family, what: String| LayoutError::Invalid {
            file: e.file.clone(),
            family: Some(family.name.clone()),
            what,
        };
        let [a, b, c, d] = e.abcd.map(|i| self.families[i].clone());
        let ar = &inst.arithmetic;
        let (m, n, k) = (inst.m as usize, inst.n as usize, inst.columns());
        let stored = inst.stored();
        let mut checks = vec![
            ("a", a.clone(), (m, stored), ar.a.storage_bits()),
            ("c", c.clone(), (m, n), ar.c.storage_bits()),
            ("d", d.clone(), (m, n), ar.d.storage_bits()),
        ];
        if e.b_memory.is_none() {
            checks.push(("b", b.clone(), (k, n), ar.b.storage_bits()));
        }
        let meta = match (&e.meta, &inst.sparsity) {
            (None, None) => None,
            (Some((at, unit, codes)), Some(s)) => {
                let f = self.families[*at].clone();
                let span_units = s.span() as usize / unit;
                if codes.len() != span_units || !stored.is_multiple_of(*unit) {
                    return Err(invalid(
                        &f,
                        format!(
                            "`{}` ({s}) needs {span_units} metadata codes, one per unit of {unit} columns of a group; the entry gives {}",
                            inst.name,
                            codes.len()
                        ),
                    ));
                }
                checks.push(("meta", f.clone(), (m, stored / unit), f.width));
                Some(Meta {
                    family: f,
                    unit: *unit,
                    codes: codes.clone(),
                })
            }
            (Some(_), None) => {
                return Err(invalid(
                    &a,
                    format!("`{}` is dense, but its entry has metadata", inst.name),
                ));
            }
            (None, Some(_)) => {
                return Err(invalid(
                    &a,
                    format!("`{}` is sparse, but its entry has no metadata", inst.name),
                ));
            }
        };
        let scales = match (&e.scales, &ar.scale) {
            (None, None) => None,
            (Some([sa, sb]), Some(s)) => {
                let blocks = k / inst.scale_block().unwrap_or(s.block) as usize;
                let (sa, sb) = (self.families[*sa].clone(), self.families[*sb].clone());
                let bits = s.format.storage_bits();
                checks.push(("sa", sa.clone(), (m, blocks), bits));
                checks.push(("sb", sb.clone(), (blocks, n), bits));
                Some([sa, sb])
            }
            _ => {
                return Err(invalid(
                    &a,
                    format!(
                        "`{}`: its entry's scale factors and the instruction's do not agree",
                        inst.name
                    ),
                ));
            }
        };
        for (operand, f, (rows, cols), bits) in checks {
            if (f.rows, f.cols) != (rows, cols) || f.width != bits {
                return Err(invalid(
                    &f,
                    format!(
                        "serves operand {operand} of `{}` ({rows} x {cols}, {bits} bits), but holds {} x {} of {} bits",
                        inst.name, f.rows, f.cols, f.width
                    ),
                ));
            }
        }
        let b = match &e.b_memory {
            None => b.fragment().clone(),
            Some(memory) => Arc::new(Fragment::in_memory(
                (k, n),
                ar.b.storage_bits(),
                a.lanes,
                memory,
            )),
        };
        Ok(Layout {
            a: a.fragment().clone(),
            b,
            c: c.fragment().clone(),
            d: d.fragment().clone(),
            meta,
            scales,
        })
    }
}

/// `*` matches any run of characters; everything else itself.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            let Some(rest) = name.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len()).any(|at| rest.is_char_boundary(at) && glob(tail, &rest[at..]))
        }
    }
}
