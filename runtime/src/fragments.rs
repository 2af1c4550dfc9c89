//! Warp fragment layouts as data, and warp-level mma on register images.
//!
//! An `mma.sync` takes no matrices: each of a warp's 32 lanes holds a fragment of every
//! operand in its registers. This module owns the layouts (which lane, register and bits
//! hold which (row, column) of A, B, C and D), read from the spec library's data files
//! (`specs/layouts/*.json`, one description per fragment family, written as the PTX ISA
//! writes its formulas over `groupID`, `threadID_in_group` and the fragment index `i`),
//! the validator every loaded file passes (each matrix element held exactly once by one
//! (lane, element), registers full, all 32 lanes used), and [`warp_mma`]: register
//! images unpacked through a layout, the whole instruction run by [`crate::gemm`], D
//! packed back into registers.

use crate::gemm::{self, Problem};
use crate::matrix::Matrix;
use mmac_compiler::engine::Engine;
use mmac_compiler::ir::Instruction;
use serde::Deserialize;
use std::sync::{Arc, OnceLock};

/// Lanes of a warp.
pub const LANES: usize = 32;

/// The layout file built into the library, by its path in the repository.
pub const BUILTIN_FILE: &str = "specs/layouts/ptx-mma.json";
const BUILTIN_TEXT: &str = include_str!("../../specs/layouts/ptx-mma.json");

/// What can go wrong with layouts: a data file that does not validate, an instruction
/// without a layout, register images of the wrong size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// A layout file that does not parse or validate: the file, the fragment family (if
    /// the fault is in one) and what is wrong.
    #[error("{file}{}: {what}", family.as_ref().map(|f| format!(": fragment `{f}`")).unwrap_or_default())]
    Invalid {
        file: String,
        family: Option<String>,
        what: String,
    },
    /// No layout file describes this instruction's fragments.
    #[error(
        "no fragment layout is known for `{0}` (the layouts cover the dense mma.sync shapes listed in docs/layouts.md)"
    )]
    Unknown(String),
    /// Register images that do not fit the layout.
    #[error("{0}")]
    Registers(String),
    /// The instruction failed on the matrices the registers hold.
    #[error("{0}")]
    Eval(String),
}

/// Where one element of a fragment lives and which matrix element it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub lane: usize,
    /// The register of the lane's fragment (a 64-bit element's register is two words of
    /// the image, low word first).
    pub register: usize,
    /// The index in the PTX fragment (a0, a1, ...).
    pub element: usize,
    /// `[lo, hi)` inside the register.
    pub bits: (u32, u32),
    pub row: usize,
    pub col: usize,
}

/// One fragment family: how an operand's matrix is spread over the lanes.
#[derive(Debug, Clone)]
pub struct Fragment {
    pub name: String,
    pub evidence: String,
    pub rows: usize,
    pub cols: usize,
    /// Bits of one element.
    pub width: u32,
    /// Elements per lane.
    pub elements: usize,
    /// Every (lane, element), lane-major: `slots[lane * elements + element]`.
    pub slots: Vec<Slot>,
}

impl Fragment {
    /// Bits of one register: 32, or 64 for 64-bit elements.
    pub fn register_bits(&self) -> u32 {
        self.width.max(32)
    }
    /// Registers per lane.
    pub fn registers(&self) -> usize {
        self.elements * self.width as usize / self.register_bits() as usize
    }
    /// 32-bit words per lane in a register image.
    pub fn words(&self) -> usize {
        self.registers() * self.register_bits() as usize / 32
    }

    fn mask(&self) -> u64 {
        if self.width == 64 {
            u64::MAX
        } else {
            (1u64 << self.width) - 1
        }
    }

    /// The register image of a lane-major `u32` array (lanes x [`Fragment::words`])
    /// unpacked into the matrix of encodings it holds.
    pub fn unpack(&self, image: &[u32], operand: &str) -> Result<Matrix, LayoutError> {
        self.check_image(image.len(), operand)?;
        let words = self.words();
        let mut m = Matrix::filled(self.rows, self.cols, 0);
        for s in &self.slots {
            let base = s.lane * words + s.register * (self.register_bits() as usize / 32);
            let reg = if self.width == 64 {
                image[base] as u64 | (image[base + 1] as u64) << 32
            } else {
                image[base] as u64
            };
            m.data[s.row * self.cols + s.col] = (reg >> s.bits.0) & self.mask();
        }
        Ok(m)
    }

    /// The register image (lanes x [`Fragment::words`], lane-major) that holds a matrix of
    /// encodings (bits above the element's width are dropped).
    pub fn pack(&self, m: &Matrix, operand: &str) -> Result<Vec<u32>, LayoutError> {
        if (m.rows, m.cols) != (self.rows, self.cols) {
            return Err(LayoutError::Registers(format!(
                "{operand} is {} x {}, but its fragment `{}` holds {} x {}",
                m.rows, m.cols, self.name, self.rows, self.cols
            )));
        }
        let words = self.words();
        let mut image = vec![0u32; LANES * words];
        for s in &self.slots {
            let base = s.lane * words + s.register * (self.register_bits() as usize / 32);
            let v = (m.data[s.row * self.cols + s.col] & self.mask()) << s.bits.0;
            image[base] |= v as u32;
            if self.width == 64 {
                image[base + 1] = (v >> 32) as u32;
            }
        }
        Ok(image)
    }

    fn check_image(&self, len: usize, operand: &str) -> Result<(), LayoutError> {
        if len != LANES * self.words() {
            return Err(LayoutError::Registers(format!(
                "the register image of {operand} has {len} words, but its fragment `{}` takes {} \
                 ({LANES} lanes x {} words)",
                self.name,
                LANES * self.words(),
                self.words()
            )));
        }
        Ok(())
    }
}

/// The fragments of one instruction's four operands.
#[derive(Debug, Clone)]
pub struct Layout {
    pub a: Arc<Fragment>,
    pub b: Arc<Fragment>,
    pub c: Arc<Fragment>,
    pub d: Arc<Fragment>,
}

impl Layout {
    /// The operands by name, in the order a, b, c, d.
    pub fn operands(&self) -> [(&'static str, &Fragment); 4] {
        [
            ("a", &self.a),
            ("b", &self.b),
            ("c", &self.c),
            ("d", &self.d),
        ]
    }
}

/// A validated layout file: fragment families and the instructions they serve.
#[derive(Debug, Clone)]
pub struct Library {
    pub file: String,
    fragments: Vec<Arc<Fragment>>,
    /// Name patterns (`*` matches any run of characters) and the fragments of a, b, c, d.
    entries: Vec<(Vec<String>, [usize; 4])>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileData {
    #[serde(default)]
    #[allow(dead_code)]
    about: String,
    fragments: Vec<FragmentData>,
    instructions: Vec<EntryData>,
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
    a: String,
    b: String,
    c: String,
    d: String,
}

impl Library {
    /// The library's own layouts ([`BUILTIN_FILE`]), parsed and validated once.
    pub fn builtin() -> Result<&'static Library, LayoutError> {
        static LIB: OnceLock<Result<Library, LayoutError>> = OnceLock::new();
        LIB.get_or_init(|| Library::parse(BUILTIN_FILE, BUILTIN_TEXT))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Parse and validate a layout file; every error names the file and, where the fault
    /// is in one, the fragment family.
    pub fn parse(file: &str, text: &str) -> Result<Library, LayoutError> {
        let invalid = |family: Option<&str>, what: String| LayoutError::Invalid {
            file: file.to_string(),
            family: family.map(str::to_string),
            what,
        };
        let data: FileData =
            serde_json::from_str(text).map_err(|e| invalid(None, e.to_string()))?;
        let mut fragments: Vec<Arc<Fragment>> = Vec::new();
        for f in data.fragments {
            if fragments.iter().any(|g| g.name == f.name) {
                return Err(invalid(Some(&f.name), "declared twice".into()));
            }
            let frag = build_fragment(&f).map_err(|what| invalid(Some(&f.name), what))?;
            fragments.push(Arc::new(frag));
        }
        let mut entries = Vec::new();
        for e in data.instructions {
            let mut ids = [0; 4];
            for (slot, (operand, name)) in
                ids.iter_mut()
                    .zip([("a", &e.a), ("b", &e.b), ("c", &e.c), ("d", &e.d)])
            {
                *slot = fragments
                    .iter()
                    .position(|f| &f.name == name)
                    .ok_or_else(|| {
                        invalid(
                            None,
                            format!(
                                "operand {operand} of `{}` names no fragment `{name}`",
                                e.names.join("`, `")
                            ),
                        )
                    })?;
            }
            let [a, b, c, d] = ids.map(|i| &fragments[i]);
            let shapes_agree = a.rows == c.rows
                && a.cols == b.rows
                && b.cols == c.cols
                && (c.rows, c.cols) == (d.rows, d.cols);
            if !shapes_agree {
                return Err(invalid(
                    None,
                    format!(
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
                    ),
                ));
            }
            entries.push((e.names, ids));
        }
        Ok(Library {
            file: file.to_string(),
            fragments,
            entries,
        })
    }

    /// The fragment family of this name.
    pub fn fragment(&self, name: &str) -> Option<&Fragment> {
        self.fragments().find(|f| f.name == name)
    }

    /// Every fragment family of the file.
    pub fn fragments(&self) -> impl Iterator<Item = &Fragment> {
        self.fragments.iter().map(|f| &**f)
    }

    /// The layout of an instruction: the first entry with a name pattern that matches,
    /// checked against the instruction's shape and operand widths.
    pub fn find(&self, inst: &Instruction) -> Result<Layout, LayoutError> {
        let Some((_, ids)) = self
            .entries
            .iter()
            .find(|(names, _)| names.iter().any(|p| glob(p, &inst.name)))
        else {
            return Err(LayoutError::Unknown(inst.name.clone()));
        };
        let [a, b, c, d] = ids.map(|i| self.fragments[i].clone());
        let ar = &inst.arithmetic;
        let (m, n, k) = (inst.m as usize, inst.n as usize, ar.k as usize);
        for (operand, f, (rows, cols), format) in [
            ("a", &a, (m, k), &ar.a),
            ("b", &b, (k, n), &ar.b),
            ("c", &c, (m, n), &ar.c),
            ("d", &d, (m, n), &ar.d),
        ] {
            if (f.rows, f.cols) != (rows, cols) || f.width != format.storage_bits() {
                return Err(LayoutError::Invalid {
                    file: self.file.clone(),
                    family: Some(f.name.clone()),
                    what: format!(
                        "serves operand {operand} of `{}` ({rows} x {cols} of {}, {} bits), but holds {} x {} of {} bits",
                        inst.name,
                        format.name,
                        format.storage_bits(),
                        f.rows,
                        f.cols,
                        f.width
                    ),
                });
            }
        }
        Ok(Layout { a, b, c, d })
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

/// The most rows, columns or elements per lane a fragment may have (the largest PTX
/// fragment, b1 m16n8k256's A, is 16 x 256 with 128 elements per lane).
const MAX_SIDE: usize = 4096;

fn build_fragment(f: &FragmentData) -> Result<Fragment, String> {
    if ![1, 2, 4, 8, 16, 32, 64].contains(&f.width) {
        return Err(format!(
            "width {} is not a power of two from 1 to 64 bits",
            f.width
        ));
    }
    if f.rows > MAX_SIDE || f.cols > MAX_SIDE || f.elements > MAX_SIDE {
        return Err(format!(
            "{} x {} with {} elements per lane: more than {MAX_SIDE} is not a fragment",
            f.rows, f.cols, f.elements
        ));
    }
    if f.elements == 0 || f.rows * f.cols != LANES * f.elements {
        return Err(format!(
            "{} x {} elements over {LANES} lanes is not {} elements per lane",
            f.rows, f.cols, f.elements
        ));
    }
    let register_bits = f.width.max(32) as usize;
    if !(f.elements * f.width as usize).is_multiple_of(register_bits) {
        return Err(format!(
            "{} elements of {} bits do not fill whole {register_bits}-bit registers",
            f.elements, f.width
        ));
    }
    let rows = formulas(&f.row, f.elements, "row")?;
    let cols = formulas(&f.col, f.elements, "col")?;
    let mut holder: Vec<Option<(usize, usize)>> = vec![None; f.rows * f.cols];
    let mut slots = Vec::with_capacity(LANES * f.elements);
    for lane in 0..LANES {
        for i in 0..f.elements {
            let vars = Vars { lane, i };
            let row = rows[i].eval(vars);
            let col = cols[i].eval(vars);
            let (Ok(row), Ok(col)) = (usize::try_from(row), usize::try_from(col)) else {
                return Err(format!(
                    "lane {lane}, element {i}: row {row}, col {col} is negative"
                ));
            };
            if row >= f.rows || col >= f.cols {
                return Err(format!(
                    "lane {lane}, element {i}: ({row}, {col}) is outside the {} x {} matrix",
                    f.rows, f.cols
                ));
            }
            if let Some((l, e)) = holder[row * f.cols + col].replace((lane, i)) {
                return Err(format!(
                    "({row}, {col}) is held twice: by lane {l}, element {e} and by lane {lane}, element {i}"
                ));
            }
            let lo = (i * f.width as usize % register_bits) as u32;
            slots.push(Slot {
                lane,
                register: i * f.width as usize / register_bits,
                element: i,
                bits: (lo, lo + f.width),
                row,
                col,
            });
        }
    }
    // rows * cols == lanes * elements and no element twice: every element is held, and
    // every lane holds `elements` of them; checked again so that a change above cannot
    // slip through
    if let Some(at) = holder.iter().position(Option::is_none) {
        return Err(format!(
            "({}, {}) is held by no lane",
            at / f.cols,
            at % f.cols
        ));
    }
    Ok(Fragment {
        name: f.name.clone(),
        evidence: f.evidence.clone(),
        rows: f.rows,
        cols: f.cols,
        width: f.width,
        elements: f.elements,
        slots,
    })
}

/// One formula per element index, from cases that must cover each index exactly once.
fn formulas(cases: &[Case], elements: usize, what: &str) -> Result<Vec<Expr>, String> {
    let mut out: Vec<Option<Expr>> = vec![None; elements];
    for case in cases {
        let expr = Expr::parse(&case.expr).map_err(|e| format!("{what} `{}`: {e}", case.expr))?;
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

#[derive(Clone, Copy)]
struct Vars {
    lane: usize,
    i: usize,
}

/// A formula of the PTX ISA's fragment sections: integers, `lane` (`%laneid`),
/// `groupID`, `threadID_in_group`, `i`, parentheses and `* / % + - >> &` with C's
/// precedence.
#[derive(Clone, Debug)]
enum Expr {
    Num(i64),
    Lane,
    Group,
    InGroup,
    Index,
    Bin(char, Box<Expr>, Box<Expr>),
}

impl Expr {
    fn parse(text: &str) -> Result<Expr, String> {
        let tokens = tokenize(text)?;
        let mut pos = 0;
        let e = parse_level(&tokens, &mut pos, 0)?;
        if pos != tokens.len() {
            return Err(format!("unexpected `{}`", tokens[pos]));
        }
        Ok(e)
    }

    fn eval(&self, v: Vars) -> i64 {
        match self {
            Expr::Num(n) => *n,
            Expr::Lane => v.lane as i64,
            Expr::Group => (v.lane >> 2) as i64,
            Expr::InGroup => (v.lane % 4) as i64,
            Expr::Index => v.i as i64,
            Expr::Bin(op, l, r) => {
                let (l, r) = (l.eval(v), r.eval(v));
                // wrapping: an absurd constant gives an absurd row, which the validator
                // refuses, never an overflow panic
                match op {
                    '+' => l.wrapping_add(r),
                    '-' => l.wrapping_sub(r),
                    '*' => l.wrapping_mul(r),
                    // divisors are checked non-zero literals or variables; a zero one
                    // gives -1, which the validator refuses as a negative row or column
                    '/' => l.checked_div(r).unwrap_or(-1),
                    '%' => l.checked_rem(r).unwrap_or(-1),
                    '&' => l & r,
                    _ => l.checked_shr(r as u32).unwrap_or(0), // '>'
                }
            }
        }
    }
}

/// Binary operators from loosest to tightest binding, as in C.
const LEVELS: [&[char]; 4] = [&['&'], &['>'], &['+', '-'], &['*', '/', '%']];

fn parse_level(t: &[String], pos: &mut usize, level: usize) -> Result<Expr, String> {
    if level == LEVELS.len() {
        return parse_atom(t, pos);
    }
    let mut left = parse_level(t, pos, level + 1)?;
    while let Some(op) = t.get(*pos).and_then(|s| {
        let c = if s == ">>" { '>' } else { s.chars().next()? };
        (s.len() == 1 || s == ">>").then_some(c)
    }) {
        if !LEVELS[level].contains(&op) {
            break;
        }
        *pos += 1;
        let right = parse_level(t, pos, level + 1)?;
        left = Expr::Bin(op, Box::new(left), Box::new(right));
    }
    Ok(left)
}

fn parse_atom(t: &[String], pos: &mut usize) -> Result<Expr, String> {
    let Some(tok) = t.get(*pos) else {
        return Err("the formula ends too early".into());
    };
    *pos += 1;
    Ok(match tok.as_str() {
        "(" => {
            let e = parse_level(t, pos, 0)?;
            if t.get(*pos).map(String::as_str) != Some(")") {
                return Err("a `(` is not closed".into());
            }
            *pos += 1;
            e
        }
        "lane" | "%laneid" => Expr::Lane,
        "groupID" => Expr::Group,
        "threadID_in_group" => Expr::InGroup,
        "i" => Expr::Index,
        s if s.starts_with("0x") => Expr::Num(
            i64::from_str_radix(&s[2..], 16).map_err(|_| format!("`{s}` is not a number"))?,
        ),
        s if s.starts_with(|c: char| c.is_ascii_digit()) => {
            Expr::Num(s.parse().map_err(|_| format!("`{s}` is not a number"))?)
        }
        s => {
            return Err(format!(
                "unknown name `{s}` (lane, groupID, threadID_in_group, i)"
            ));
        }
    })
}

fn tokenize(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' || c == '%' {
            let mut end = at + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if !(d.is_ascii_alphanumeric() || d == '_') {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            out.push(text[at..end].to_string());
        } else if c == '>' {
            if chars.next_if(|&(_, d)| d == '>').is_none() {
                return Err("`>` alone (did you mean `>>`?)".into());
            }
            out.push(">>".into());
        } else if "()+-*/%&".contains(c) {
            out.push(c.to_string());
        } else {
            return Err(format!("unexpected character `{c}`"));
        }
    }
    Ok(out)
}

/// Run a whole instruction on register images, the way a warp executes `mma.sync`:
/// `a`, `b` and `c` are lane-major `u32` arrays (32 lanes x the fragment's words; a
/// 64-bit register is two words, low word first), unpacked through `layout` into the
/// matrices they hold; D = the instruction on them ([`gemm::check_shapes`] with the whole
/// instruction, then [`gemm::gemm`], as `mmac mma`), packed back into d's registers.
pub fn warp_mma(
    engine: &Engine,
    layout: &Layout,
    a: &[u32],
    b: &[u32],
    c: &[u32],
) -> Result<Vec<u32>, LayoutError> {
    let inst = engine.checked().instruction();
    let problem = Problem {
        a: layout.a.unpack(a, "a")?,
        b: layout.b.unpack(b, "b")?,
        c: Some(layout.c.unpack(c, "c")?),
        sa: None,
        sb: None,
        meta: None,
    };
    gemm::check_shapes(inst, &problem, true).map_err(|e| LayoutError::Registers(e.0))?;
    let d = gemm::gemm(engine, &problem, &|_| {}).map_err(|e| LayoutError::Eval(e.to_string()))?;
    layout.d.pack(&d, "d")
}

#[cfg(test)]
mod tests;
