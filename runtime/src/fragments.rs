//! Warp fragment layouts as data, and warp-level mma on register images.
//!
//! An `mma.sync` takes no matrices: each of a warp's 32 lanes holds a fragment of every
//! operand in its registers. This module owns the layouts (which lane, register and bits
//! hold which (row, column) of A, B, C and D, and of a sparse instruction's metadata and
//! a block-scaled one's scale factors), read from the spec library's data files
//! (`specs/layouts/*.json`, one description per fragment family, written as the PTX ISA
//! writes its formulas over `groupID`, `threadID_in_group`, the fragment index `i` and
//! the selector operands; [`library`]), the validator every loaded file passes (each
//! matrix element held by exactly as many (lane, element) as the family says, for every
//! value of its selectors), and [`warp_mma`]: register images unpacked through a layout,
//! the whole instruction run by [`crate::gemm`], D packed back into registers.

mod expr;
mod library;

use crate::gemm::{self, Problem};
use crate::matrix::Matrix;
pub use library::{Family, Library};
use mmac_compiler::engine::Engine;
use std::sync::Arc;

/// Lanes of a warp.
pub const LANES: usize = 32;

/// The layout files built into the library: their paths in the repository and texts.
pub const BUILTIN_FILES: &[(&str, &str)] = &[
    (
        "specs/layouts/ptx-mma.json",
        include_str!("../../specs/layouts/ptx-mma.json"),
    ),
    (
        "specs/layouts/ptx-mma-sparse-scaled.json",
        include_str!("../../specs/layouts/ptx-mma-sparse-scaled.json"),
    ),
    (
        "specs/layouts/ptx-wgmma.json",
        include_str!("../../specs/layouts/ptx-wgmma.json"),
    ),
    (
        "specs/layouts/amd.json",
        include_str!("../../specs/layouts/amd.json"),
    ),
    (
        "specs/layouts/ptx-ldmatrix.json",
        include_str!("../../specs/layouts/ptx-ldmatrix.json"),
    ),
];

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
        "no fragment layout is known for `{0}` (docs/layouts.md lists the instructions the layouts cover)"
    )]
    Unknown(String),
    /// An instruction whose operands no thread holds in registers (the name, and where
    /// they are instead).
    #[error("`{0}` has no register fragments: {1}")]
    WithoutRegisters(String, String),
    /// Register images that do not fit the layout.
    #[error("{0}")]
    Registers(String),
    /// A selector the instruction does not have, or one past its values.
    #[error("{0}")]
    Selector(String),
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
    /// `[lo, hi)` of the value inside the register.
    pub bits: (u32, u32),
    pub row: usize,
    pub col: usize,
    /// Which of the warp's independent matrices (`mma.m8n8k4`'s four quadpairs each
    /// compute their own; 0 for every other instruction).
    pub set: usize,
}

/// One fragment family, built for given selector values: how an operand's matrix (or
/// matrices) is spread over the lanes.
#[derive(Debug, Clone)]
pub struct Fragment {
    pub name: String,
    pub evidence: String,
    pub rows: usize,
    pub cols: usize,
    /// Bits of one element's value.
    pub width: u32,
    /// Bits an element takes in its register (at least `width`: an FP6 or FP4 value in
    /// an 8-bit container).
    pub container: u32,
    /// Lanes of the register image (32 for a warp, 128 for a warpgroup).
    pub lanes: usize,
    /// How many lanes hold each element (2 where two halves of a wave hold copies).
    pub copies: usize,
    /// Independent matrices of the operand ([`Slot::set`]).
    pub sets: usize,
    /// Elements per lane that holds any.
    pub elements: usize,
    /// Registers per lane.
    pub registers: usize,
    /// Where the operand lies when no thread holds it in registers (wgmma's B, in shared
    /// memory): then no lane holds an element, and its image is its matrix, column by
    /// column ([`Fragment::image_words`]).
    pub memory: Option<String>,
    /// The selector values it was built for (sparsity selector, scale factors' byte and
    /// thread selectors), by name.
    pub selectors: Vec<(String, usize)>,
    /// Every (lane, element) held, lane-major.
    pub slots: Vec<Slot>,
}

impl Fragment {
    /// A placeholder, replaced while its family is validated.
    fn empty() -> Fragment {
        Fragment {
            name: String::new(),
            evidence: String::new(),
            rows: 0,
            cols: 0,
            width: 32,
            container: 32,
            lanes: LANES,
            copies: 1,
            sets: 1,
            elements: 0,
            registers: 0,
            memory: None,
            selectors: vec![],
            slots: vec![],
        }
    }

    /// An operand that lies in memory, not in registers (`memory` says where).
    fn in_memory((rows, cols): (usize, usize), width: u32, lanes: usize, memory: &str) -> Fragment {
        Fragment {
            name: "(in memory)".into(),
            evidence: String::new(),
            rows,
            cols,
            width,
            container: width.next_power_of_two().max(1),
            lanes,
            memory: Some(memory.to_string()),
            ..Fragment::empty()
        }
    }
    /// Bits of one register: 32, or 64 for 64-bit elements.
    pub fn register_bits(&self) -> u32 {
        self.container.max(32)
    }
    /// 32-bit words per lane in a register image.
    pub fn words(&self) -> usize {
        self.registers * self.register_bits() as usize / 32
    }
    /// 32-bit words of a whole image: a register image's every lane's, held or not; for an
    /// operand in memory, its matrix's (one word per element, two for 64-bit ones).
    pub fn image_words(&self) -> usize {
        if self.memory.is_some() {
            self.rows * self.cols * self.words_per_element()
        } else {
            self.lanes * self.words()
        }
    }

    /// Words of one element of an operand in memory, given as its matrix.
    fn words_per_element(&self) -> usize {
        self.register_bits() as usize / 32
    }

    /// The matrix of an operand in memory from its image: column-major (element (r, c) at
    /// word c * rows + r), as wgmma reads B K-major; every value within the width.
    fn unpack_memory(&self, image: &[u32], operand: &str) -> Result<Vec<Matrix>, LayoutError> {
        let per = self.words_per_element();
        let mut m = Matrix::filled(self.rows, self.cols, 0);
        for c in 0..self.cols {
            for r in 0..self.rows {
                let at = (c * self.rows + r) * per;
                let v = if per == 2 {
                    image[at] as u64 | (image[at + 1] as u64) << 32
                } else {
                    image[at] as u64
                };
                if v & !self.mask() != 0 {
                    return Err(LayoutError::Registers(format!(
                        "{operand}: element ({r}, {c}) is {v:#x}, wider than its {} bits",
                        self.width
                    )));
                }
                m.data[r * self.cols + c] = v;
            }
        }
        Ok(vec![m])
    }

    fn mask(&self) -> u64 {
        if self.width == 64 {
            u64::MAX
        } else {
            (1u64 << self.width) - 1
        }
    }

    /// The image word where a slot's register begins (a 64-bit register's low word).
    pub fn word_of(&self, s: &Slot) -> usize {
        s.lane * self.words() + s.register * (self.register_bits() as usize / 32)
    }

    /// The register of a slot in an image, as a 64-bit value.
    fn register(&self, image: &[u32], s: &Slot) -> u64 {
        let base = self.word_of(s);
        if self.register_bits() == 64 {
            image[base] as u64 | (image[base + 1] as u64) << 32
        } else {
            image[base] as u64
        }
    }

    /// The register image of a lane-major `u32` array (lanes x [`Fragment::words`])
    /// unpacked into the matrices of encodings it holds, one per set. Where lanes hold
    /// copies of an element, they must agree.
    pub fn unpack(&self, image: &[u32], operand: &str) -> Result<Vec<Matrix>, LayoutError> {
        self.check_image(image.len(), operand)?;
        if self.memory.is_some() {
            return self.unpack_memory(image, operand);
        }
        let mut m = vec![Matrix::filled(self.rows, self.cols, 0); self.sets];
        let mut holder = vec![usize::MAX; self.sets * self.rows * self.cols];
        for s in &self.slots {
            let v = (self.register(image, s) >> s.bits.0) & self.mask();
            let cell = &mut m[s.set].data[s.row * self.cols + s.col];
            let first = &mut holder[(s.set * self.rows + s.row) * self.cols + s.col];
            if *first == usize::MAX {
                (*first, *cell) = (s.lane, v);
            } else if *cell != v {
                return Err(LayoutError::Registers(format!(
                    "{operand}: lanes {} and {} hold copies of ({}, {}) that differ ({:#x} and {v:#x})",
                    *first, s.lane, s.row, s.col, *cell
                )));
            }
        }
        Ok(m)
    }

    /// The register image (lanes x [`Fragment::words`], lane-major) that holds matrices of
    /// encodings, one per set (bits above the element's width are dropped; bits no
    /// element uses are 0).
    pub fn pack(&self, m: &[Matrix], operand: &str) -> Result<Vec<u32>, LayoutError> {
        if m.len() != self.sets || m.iter().any(|m| (m.rows, m.cols) != (self.rows, self.cols)) {
            let got: Vec<String> = m
                .iter()
                .map(|m| format!("{} x {}", m.rows, m.cols))
                .collect();
            return Err(LayoutError::Registers(format!(
                "{operand} is {}, but its fragment `{}` holds {} of {} x {}",
                got.join(", "),
                self.name,
                self.sets,
                self.rows,
                self.cols
            )));
        }
        let mut image = vec![0u32; self.image_words()];
        if self.memory.is_some() {
            let per = self.words_per_element();
            for (i, v) in m[0].data.iter().enumerate() {
                let (r, c) = (i / self.cols, i % self.cols);
                let v = v & self.mask();
                let at = (c * self.rows + r) * per;
                image[at] = v as u32;
                if per == 2 {
                    image[at + 1] = (v >> 32) as u32;
                }
            }
            return Ok(image);
        }
        for s in &self.slots {
            let base = self.word_of(s);
            let v = (m[s.set].data[s.row * self.cols + s.col] & self.mask()) << s.bits.0;
            image[base] |= v as u32;
            if self.register_bits() == 64 {
                image[base + 1] |= (v >> 32) as u32;
            }
        }
        Ok(image)
    }

    fn check_image(&self, len: usize, operand: &str) -> Result<(), LayoutError> {
        if let Some(memory) = &self.memory {
            if len != self.image_words() {
                return Err(LayoutError::Registers(format!(
                    "{operand} lies in {memory}, so its image is its {} x {} matrix, column by \
                     column ({} words), not {len} words",
                    self.rows,
                    self.cols,
                    self.image_words()
                )));
            }
            return Ok(());
        }
        if len != self.image_words() {
            return Err(LayoutError::Registers(format!(
                "the register image of {operand} has {len} words, but its fragment `{}` takes {} \
                 ({} lanes x {} words)",
                self.name,
                self.image_words(),
                self.lanes,
                self.words()
            )));
        }
        Ok(())
    }
}

/// A sparse instruction's metadata: the family that lays it out (a matrix of M rows and
/// one field per `unit` stored elements of a row), and the code of each place a unit can
/// take in its group (`codes[offset / unit]`).
#[derive(Debug, Clone)]
pub struct Meta {
    pub family: Arc<Family>,
    pub unit: usize,
    pub codes: Vec<u64>,
}

/// The fragments of one instruction's operands.
#[derive(Debug, Clone)]
pub struct Layout {
    pub a: Arc<Fragment>,
    pub b: Arc<Fragment>,
    pub c: Arc<Fragment>,
    pub d: Arc<Fragment>,
    /// A sparse instruction's metadata.
    pub meta: Option<Meta>,
    /// A block-scaled instruction's scale factors of A (M x blocks) and B (blocks x N).
    pub scales: Option<[Arc<Family>; 2]>,
}

/// The selector operands of a warp-level MMA (each 0 where the instruction has none):
/// `mma.sp`'s sparsity selector, and the block-scaled `mma`'s byte and thread selectors
/// of A's and B's scale factors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Selectors {
    pub sparsity: usize,
    pub byte_id_a: usize,
    pub thread_id_a: usize,
    pub byte_id_b: usize,
    pub thread_id_b: usize,
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

    /// The metadata's and scale factors' fragments for these selectors (none for an
    /// instruction without them), by operand name.
    pub fn extras(&self, sel: &Selectors) -> Result<Vec<(&'static str, Fragment)>, LayoutError> {
        let mut out = vec![];
        let built =
            |f: &Family, values: &[(&str, usize)]| f.build(values).map_err(LayoutError::Selector);
        if let Some(m) = &self.meta {
            out.push(("meta", built(&m.family, &[("selector", sel.sparsity)])?));
        } else if sel.sparsity != 0 {
            return Err(LayoutError::Selector(format!(
                "sparsity selector {}: the instruction is dense",
                sel.sparsity
            )));
        }
        if let Some([sa, sb]) = &self.scales {
            out.push((
                "sa",
                built(
                    sa,
                    &[("byte_id", sel.byte_id_a), ("thread_id", sel.thread_id_a)],
                )?,
            ));
            out.push((
                "sb",
                built(
                    sb,
                    &[("byte_id", sel.byte_id_b), ("thread_id", sel.thread_id_b)],
                )?,
            ));
        } else if (
            sel.byte_id_a,
            sel.thread_id_a,
            sel.byte_id_b,
            sel.thread_id_b,
        ) != (0, 0, 0, 0)
        {
            return Err(LayoutError::Selector(
                "scale-factor selectors: the instruction has no scale factors".into(),
            ));
        }
        Ok(out)
    }
}

/// The register images of a warp-level MMA: lane-major `u32` arrays (lanes x a
/// fragment's words; a 64-bit register is two words, low word first). `meta` for a
/// sparse instruction, `sa` and `sb` for a block-scaled one. An operand the layout puts
/// in memory (wgmma's B) is given as its matrix, column by column.
#[derive(Debug, Clone, Copy, Default)]
pub struct WarpInputs<'x> {
    pub a: &'x [u32],
    pub b: &'x [u32],
    pub c: &'x [u32],
    pub meta: Option<&'x [u32]>,
    pub sa: Option<&'x [u32]>,
    pub sb: Option<&'x [u32]>,
}

/// Run a whole instruction on register images, the way a warp executes `mma.sync`: the
/// images are unpacked through `layout` (the metadata and scale factors through the
/// fragments `sel` selects) into the matrices they hold; D = the instruction on them
/// ([`gemm::check_shapes`] with the whole instruction, then [`gemm::gemm`], as `mmac
/// mma`), once per set, packed back into d's registers; an operand in memory (wgmma's
/// B, which a simulator reads from its shared memory) is taken as its matrix, column by
/// column ([`Fragment::unpack`]). Metadata become the columns of
/// A's stored elements (a code the instruction does not define is an error naming the
/// lane); the positions are then checked against the pattern as `mmac mma --meta` checks
/// them.
pub fn warp_mma(
    engine: &Engine,
    layout: &Layout,
    inputs: &WarpInputs,
    sel: &Selectors,
) -> Result<Vec<u32>, LayoutError> {
    let inst = engine.checked().instruction();
    let extras = layout.extras(sel)?;
    let extra = |name: &str| extras.iter().find(|(n, _)| *n == name).map(|(_, f)| f);
    let given = |name: &str, image: Option<&[u32]>| -> Result<Option<Vec<Matrix>>, LayoutError> {
        match (extra(name), image) {
            (Some(f), Some(image)) => Ok(Some(f.unpack(image, name)?)),
            (None, None) => Ok(None),
            (Some(_), None) => Err(LayoutError::Registers(format!(
                "`{}` takes {name} registers",
                inst.name
            ))),
            (None, Some(_)) => Err(LayoutError::Registers(format!(
                "`{}` takes no {name} registers",
                inst.name
            ))),
        }
    };
    let a = layout.a.unpack(inputs.a, "a")?;
    let b = layout.b.unpack(inputs.b, "b")?;
    let c = layout.c.unpack(inputs.c, "c")?;
    let meta = given("meta", inputs.meta)?;
    let sa = given("sa", inputs.sa)?;
    let sb = given("sb", inputs.sb)?;
    let mut d = Vec::with_capacity(layout.d.sets);
    for set in 0..layout.d.sets {
        let positions = match (&meta, &layout.meta, &inst.sparsity) {
            (Some(fields), Some(m), Some(s)) => Some(positions(m, s, &fields[set])?),
            _ => None,
        };
        let problem = Problem {
            a: a[set].clone(),
            b: b[set].clone(),
            c: Some(c[set].clone()),
            sa: sa.as_ref().map(|x| x[set].clone()),
            sb: sb.as_ref().map(|x| x[set].clone()),
            meta: positions,
        };
        gemm::check_shapes(inst, &problem, true).map_err(|e| LayoutError::Registers(e.message))?;
        d.push(
            gemm::gemm(engine, &problem, &|_| {}).map_err(|e| LayoutError::Eval(e.to_string()))?,
        );
    }
    layout.d.pack(&d, "d")
}

/// The layout as an object file's warp entry takes it ([`mmac_compiler::aot::WarpLayout`]),
/// for a dense instruction without scale factors (the object runs no others: `None`).
pub fn aot_layout(layout: &Layout) -> Option<mmac_compiler::aot::WarpLayout> {
    use mmac_compiler::aot::{WarpOperand, WarpSlot};
    if layout.meta.is_some() || layout.scales.is_some() || layout.b.memory.is_some() {
        return None;
    }
    let operand = |f: &Fragment| {
        let mut seen = std::collections::HashSet::new();
        WarpOperand {
            words: f.words() as u32,
            width: f.width,
            wide: f.register_bits() == 64,
            slots: f
                .slots
                .iter()
                .map(|s| {
                    let cell = (s.set * f.rows + s.row) * f.cols + s.col;
                    WarpSlot {
                        word: f.word_of(s) as u32,
                        shift: s.bits.0,
                        cell: cell as u32,
                        copy: !seen.insert(cell),
                    }
                })
                .collect(),
        }
    };
    Some(mmac_compiler::aot::WarpLayout {
        lanes: layout.a.lanes as u32,
        sets: layout.a.sets as u32,
        operands: [
            operand(&layout.a),
            operand(&layout.b),
            operand(&layout.c),
            operand(&layout.d),
        ],
    })
}

/// The columns of A's stored elements from the metadata fields (one per `unit` stored
/// elements of a row, the code of the unit's place in its group).
fn positions(
    m: &Meta,
    s: &mmac_compiler::ir::Sparsity,
    fields: &Matrix,
) -> Result<Matrix, LayoutError> {
    let (kept, span) = (s.kept_columns() as usize, s.span() as usize);
    let stored = fields.cols * m.unit;
    let mut out = Matrix::filled(fields.rows, stored, 0);
    for r in 0..fields.rows {
        for f in 0..fields.cols {
            let code = fields.data[r * fields.cols + f];
            let Some(place) = m.codes.iter().position(|&x| x == code) else {
                return Err(LayoutError::Registers(format!(
                    "meta: row {r}, field {f} holds {code:#b}, which is none of the codes {:?} of the {s} pattern",
                    m.codes
                )));
            };
            for e in 0..m.unit {
                let j = f * m.unit + e;
                out.data[r * stored + j] = ((j / kept) * span + place * m.unit + e) as u64;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
