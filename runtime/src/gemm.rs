//! Whole instructions and GEMMs on matrices, and their error against the exact result.
//!
//! A GEMM of any M x K x N (multiples of the instruction's m, n, k) is computed the way a
//! GEMM kernel drives the hardware: D is tiled by the instruction's m x n; for each tile,
//! K is walked in k-sized steps in increasing order, and each step's D is fed back as the
//! next step's C (register accumulation). Per output element this is a chain of
//! dot-product-adds `d = f(d, A[i, s*k..(s+1)*k], B[s*k..(s+1)*k, j])` for s = 0, 1, ...
//! starting from `d = C[i, j]`. Tiles are independent and run in parallel (rayon).
//!
//! Where the JIT has a panel of the arithmetic ([`Engine::panel`]: CDNA2's FTZ
//! multiply-add, NVIDIA's T-FDPA with f32 results), a row of a task runs every k-step
//! against the task's columns in one call, on A and B converted once; the chain per
//! element is the same.

use crate::matrix::Matrix;
use mmac_compiler::engine::{Engine, EvalError};
use mmac_compiler::exact::Dyadic;
use mmac_compiler::format::{Decoded, Format};
use mmac_compiler::ir::Instruction;
use mmac_compiler::jit::panel::{self, Panel};
use rayon::prelude::*;
use std::sync::Arc;

/// The most worker threads a computation takes: four per core (more only add threads
/// that wait, and their stacks).
pub fn max_threads() -> usize {
    4 * std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Worker threads asked for (`None`: one per core), checked: at least 1, at most
/// [`max_threads`]. The error says the limit.
pub fn worker_threads(requested: Option<usize>) -> Result<usize, String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match requested {
        None => Ok(cores),
        Some(0) => Err("threads must be at least 1 (leave it out for one per core)".into()),
        Some(n) if n > max_threads() => Err(format!(
            "{n} threads is more than {} (four per core; this machine has {cores})",
            max_threads()
        )),
        Some(n) => Ok(n),
    }
}

/// The operands of an instruction or a GEMM: A is M x K, B is K x N, C is M x N (None:
/// +0 of c's format in every element, without a matrix of them); block scale factors SA
/// are M x K/block and SB is K/block x N. For a sparse instruction A holds each row's
/// stored elements (M x K/2 for 2 of 4) and `meta` (the same shape) the column of each.
#[derive(Clone, Debug)]
pub struct Problem {
    pub a: Matrix,
    pub b: Matrix,
    pub c: Option<Matrix>,
    pub sa: Option<Matrix>,
    pub sb: Option<Matrix>,
    pub meta: Option<Matrix>,
}

/// For a sparse instruction given a dense A (M x K, as B's rows) and no positions:
/// compress each row to its stored elements and their columns (the nonzero elements, and
/// the lowest free columns where a group has fewer), which is how a pruned weight matrix
/// arrives. Anything else is left as it is. A row that breaks the pattern is an error
/// naming the row and the group.
pub fn compress_sparse(inst: &Instruction, p: &mut Problem) -> Result<(), ShapeError> {
    let Some(s) = &inst.sparsity else {
        return Ok(());
    };
    if p.meta.is_some() || p.a.cols != p.b.rows || !p.a.cols.is_multiple_of(s.span() as usize) {
        return Ok(());
    }
    let stored = s.stored(p.a.cols as u32) as usize;
    let (mut a, mut meta) = (
        Vec::with_capacity(p.a.rows * stored),
        Vec::with_capacity(p.a.rows * stored),
    );
    for (i, row) in p.a.data.chunks_exact(p.a.cols.max(1)).enumerate() {
        let zero = |x| mmac_compiler::sparse::is_zero(&inst.arithmetic.a, x);
        mmac_compiler::sparse::compress(s, row, zero, &mut a, &mut meta).map_err(|e| {
            ShapeError::in_input(
                Input::A,
                format!(
                    "row {i} of A breaks `{}`'s {s} sparsity: {e} (A, with as many columns as B has rows, is read as dense; its stored elements come with their positions)",
                    inst.name
                ),
            )
        })?;
    }
    let rows = p.a.rows;
    p.a = Matrix {
        rows,
        cols: stored,
        data: a,
    };
    p.meta = Some(Matrix {
        rows,
        cols: stored,
        data: meta,
    });
    Ok(())
}

/// A sparse problem's A and positions: both M x (stored elements of K), every row's
/// positions inside K and in the pattern; a dense one has no positions.
fn check_sparse(inst: &Instruction, p: &Problem, k: usize) -> Result<(), ShapeError> {
    let Some(s) = &inst.sparsity else {
        if p.meta.is_some() {
            return Err(ShapeError::new(format!(
                "`{}` is dense: it takes no positions of A's elements (--meta, meta=)",
                inst.name
            )));
        }
        return Ok(());
    };
    let Some(meta) = &p.meta else {
        return Err(ShapeError::new(format!(
            "`{}` is sparse ({s}): give A's stored elements ({} x {}) and their columns (--meta, meta=), or A dense ({} x {k})",
            inst.name,
            p.a.rows,
            s.stored(k as u32),
            p.a.rows
        )));
    };
    let stored = s.stored(k as u32) as usize;
    if (meta.rows, meta.cols) != (p.a.rows, p.a.cols) || p.a.cols != stored {
        return Err(ShapeError::new(format!(
            "A is {} x {} and the positions {} x {}, but B's {k} rows make A's stored elements {} x {stored} ({s})",
            p.a.rows, p.a.cols, meta.rows, meta.cols, p.a.rows
        )));
    }
    for (i, row) in meta.data.chunks_exact(stored.max(1)).enumerate() {
        mmac_compiler::sparse::check(s, k, row).map_err(|e| {
            ShapeError::in_input(Input::Positions, format!("row {i} of the positions: {e}"))
        })?;
    }
    Ok(())
}

/// A shape that does not fit the instruction, or a sparse operand that breaks its
/// pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ShapeError {
    pub message: String,
    /// The one input whose contents are wrong (a row of A or of the positions), for a
    /// caller that knows where it came from to name it; `None` where the shapes disagree.
    pub input: Option<Input>,
}

/// The input of a [`Problem`] that a [`ShapeError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    A,
    Positions,
}

impl ShapeError {
    fn new(message: String) -> ShapeError {
        ShapeError {
            message,
            input: None,
        }
    }
    fn in_input(input: Input, message: String) -> ShapeError {
        ShapeError {
            message,
            input: Some(input),
        }
    }
}

/// Check the operand shapes; `whole_instruction` demands exactly the instruction's
/// M x N x K, otherwise multiples of it. Returns (M, N, K).
pub fn check_shapes(
    inst: &Instruction,
    p: &Problem,
    whole_instruction: bool,
) -> Result<(usize, usize, usize), ShapeError> {
    // K: B's rows (A's columns, unless A is sparse)
    let (m, n) = (p.a.rows, p.b.cols);
    let k = if inst.sparsity.is_some() {
        p.b.rows
    } else {
        p.a.cols
    };
    let (im, in_, ik) = (inst.m as usize, inst.n as usize, inst.columns());
    let stored_k = inst.stored();
    if whole_instruction {
        // each operand against the instruction's shape, so that the message names the
        // operand that is wrong
        for (what, (rows, cols), want) in [
            ("A", (p.a.rows, p.a.cols), (im, stored_k)),
            ("B", (p.b.rows, p.b.cols), (ik, in_)),
            (
                "C",
                p.c.as_ref().map_or((im, in_), |c| (c.rows, c.cols)),
                (im, in_),
            ),
        ] {
            if (rows, cols) != want {
                return Err(ShapeError::new(format!(
                    "{what} is {rows} x {cols}, but `{}` (m{im}n{in_}k{ik}) takes {what} {} x {}",
                    inst.name, want.0, want.1
                )));
            }
        }
    }
    if p.b.rows != k {
        return Err(ShapeError::new(format!(
            "A is {} x {} but B is {} x {}: A's columns must equal B's rows (K)",
            p.a.rows, p.a.cols, p.b.rows, p.b.cols
        )));
    }
    if let Some(c) = &p.c
        && (c.rows, c.cols) != (m, n)
    {
        return Err(ShapeError::new(format!(
            "C is {} x {} but A x B is {m} x {n}",
            c.rows, c.cols
        )));
    }
    if !whole_instruction {
        for (what, got, unit) in [
            ("M (rows of A)", m, im),
            ("N (columns of B)", n, in_),
            ("K (columns of A)", k, ik),
        ] {
            if got == 0 || got % unit != 0 {
                return Err(ShapeError::new(format!(
                    "{what} = {got} is not a positive multiple of `{}`'s {unit}",
                    inst.name
                )));
            }
        }
    }
    let ar = &inst.arithmetic;
    if k > ik && ar.c != ar.d {
        return Err(ShapeError::new(format!(
            "K = {k} is {} k-steps of `{}`, each step's d fed back as the next c, but c is `{}` and d is `{}`; K = {ik} (one step) runs",
            k / ik,
            inst.name,
            ar.c.name,
            ar.d.name
        )));
    }
    check_sparse(inst, p, k)?;
    match (&inst.arithmetic.scale, &p.sa, &p.sb) {
        (None, None, None) => {}
        (None, _, _) => {
            return Err(ShapeError::new(format!(
                "`{}` takes no scale factors, but --sa/--sb were given",
                inst.name
            )));
        }
        (Some(s), Some(sa), Some(sb)) => {
            let block = inst.scale_block().unwrap_or(s.block) as usize;
            let blocks = k / block;
            if (sa.rows, sa.cols) != (m, blocks) {
                return Err(ShapeError::new(format!(
                    "SA must be {m} x {blocks} (M x K/{}), found {} x {}",
                    block, sa.rows, sa.cols
                )));
            }
            if (sb.rows, sb.cols) != (blocks, n) {
                return Err(ShapeError::new(format!(
                    "SB must be {blocks} x {n} (K/{} x N), found {} x {}",
                    block, sb.rows, sb.cols
                )));
            }
        }
        (Some(s), _, _) => {
            return Err(ShapeError::new(format!(
                "`{}` is block-scaled ({} per {} elements of k): give --sa and --sb",
                inst.name,
                s.format.name,
                inst.scale_block().unwrap_or(s.block)
            )));
        }
    }
    Ok((m, n, k))
}

/// Columns of D one parallel task covers at most (a run of adjacent tiles): the batch
/// entry's record count per call, with B's slices of one k-step kept in L1 (64 columns
/// of 16 elements: 8 KiB).
const TASK_COLUMNS: usize = 64;

/// One parallel task: tile row `ti`'s columns `j0..j0 + w`, written straight into D
/// (one mutable slice of `w` elements per row of the tile row).
struct Task<'d> {
    ti: usize,
    j0: usize,
    rows: Vec<&'d mut [u64]>,
}

/// Ask the processor to bring `x` into its caches ahead of its use (a hint: nothing is
/// read, and other targets do nothing).
#[inline]
fn prefetch(x: &[u64]) {
    #[cfg(target_arch = "x86_64")]
    for line in x.chunks(8) {
        // SAFETY: a prefetch hint for an address inside a live slice; SSE, which the
        // hint needs, is part of every x86-64 processor
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// Cut D (`m` x `n`, row-major) into tasks of whole tiles: runs of adjacent tiles of one
/// tile row, as wide as [`TASK_COLUMNS`] allows, narrower when D has too few tiles for
/// every worker to get four tasks. The tasks are disjoint and cover D.
fn tasks(d: &mut [u64], (m, n): (usize, usize), (tm, tn): (usize, usize)) -> Vec<Task<'_>> {
    let workers = rayon::current_num_threads().max(1);
    let tiles_per_row = n / tn;
    let tiles = (m / tm) * tiles_per_row;
    let per_task = (TASK_COLUMNS / tn)
        .min(tiles.div_ceil(4 * workers))
        .clamp(1, tiles_per_row.max(1));
    let w = per_task * tn;
    let mut out = Vec::with_capacity((m / tm) * tiles_per_row.div_ceil(per_task));
    for (ti, band) in d.chunks_mut(tm * n).enumerate() {
        // each row of the tile row cut into the tasks' column runs, regrouped per task
        let mut cut: Vec<_> = band.chunks_mut(n).map(|row| row.chunks_mut(w)).collect();
        for j0 in (0..n).step_by(w) {
            let rows = cut.iter_mut().filter_map(Iterator::next).collect();
            out.push(Task { ti, j0, rows });
        }
    }
    out
}

/// Compute D for a checked problem (see the module doc for the order). `progress` is
/// called with the number of output tiles finished since the last call.
pub fn gemm(
    engine: &Engine,
    p: &Problem,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<Matrix, EvalError> {
    let mut d = Matrix::filled(p.a.rows, p.b.cols, 0);
    gemm_into(engine, p, &mut d, progress)?;
    Ok(d)
}

/// [`gemm`] into a matrix the caller made (M x N, its elements overwritten).
pub fn gemm_into(
    engine: &Engine,
    p: &Problem,
    out: &mut Matrix,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<(), EvalError> {
    let plan = Plan::new(engine, p);
    if (out.rows, out.cols) != (plan.m, plan.n) {
        return Err(plan.wrong_d(out.data.len(), plan.m * plan.n));
    }
    plan.rows_into(0..plan.m, &mut out.data, progress)
}

/// A GEMM ready to run: A, B (and SA, SB) copied once into step-major order, so that any
/// run of D's tile rows can be computed on its own ([`Plan::rows_into`]), e.g. D in
/// chunks of rows that are written out while the next chunk is computed.
pub struct Plan<'a> {
    engine: &'a Engine<'a>,
    p: &'a Problem,
    m: usize,
    n: usize,
    tile: (usize, usize, usize),
    steps: usize,
    blocks: usize,
    /// For each k-step, the step's slice of every row of A (and of SA) and of every
    /// column of B (and of SB), contiguous: a row of a tile shares one slice of A (record
    /// stride 0) and its columns' slices of B follow each other.
    a_steps: Vec<u64>,
    b_steps: Vec<u64>,
    sa_steps: Vec<u64>,
    sb_steps: Vec<u64>,
    /// Without a C, every row of C is this row of +0 (N long: a task's columns are a
    /// slice of it, however wide tasks are cut).
    zeros: Vec<u64>,
    /// Elements of a row of A per k-step (the tile's k, or its stored elements when A is
    /// sparse), and a sparse A's positions step-major as A, relative to their step.
    stored: usize,
    positions: Vec<u64>,
    /// The JIT's panel, with A and B converted for it; the step-major copies are then
    /// left empty.
    panel: Option<Widened>,
}

/// A panel and the operands it reads.
struct Widened {
    panel: Arc<Panel>,
    operands: panel::Operands,
}

impl<'a> Plan<'a> {
    /// The plan of a checked problem ([`check_shapes`]).
    pub fn new(engine: &'a Engine<'a>, p: &'a Problem) -> Plan<'a> {
        let inst = engine.checked().instruction();
        let (m, n, kk) = (p.a.rows, p.b.cols, p.b.rows);
        let (tm, tn, tk) = (inst.m as usize, inst.n as usize, inst.columns());
        let stored = inst.stored();
        let steps = kk / tk;
        let blocks = inst.scale_count(); // scale factors per k-step
        // the JIT's panel, where the arithmetic has one and takes these operands
        let panel = engine
            .panel()
            .filter(|_| n.is_multiple_of(panel::LANES) && p.meta.is_none() && blocks == 0)
            .and_then(|panel| {
                let operands = panel.operands(&p.a.data, &p.b.data, (m, kk, n)).ok()??;
                Some(Widened { panel, operands })
            });
        if panel.is_some() {
            return Plan {
                engine,
                p,
                m,
                n,
                tile: (tm, tn, tk),
                steps,
                blocks,
                a_steps: Vec::new(),
                b_steps: Vec::new(),
                sa_steps: Vec::new(),
                sb_steps: Vec::new(),
                zeros: vec![zero_of(&inst.arithmetic.c); n],
                stored,
                positions: Vec::new(),
                panel,
            };
        }
        let (a_steps, b_steps) = rayon::join(
            || step_major(&p.a, stored, steps),
            || step_major_columns(&p.b, tk, steps),
        );
        let mut positions = p
            .meta
            .as_ref()
            .map(|x| step_major(x, stored, steps))
            .unwrap_or_default();
        for (s, step) in positions.chunks_mut((m * stored).max(1)).enumerate() {
            step.iter_mut().for_each(|x| *x -= (s * tk) as u64);
        }
        let sa_steps =
            p.sa.as_ref()
                .map(|x| step_major(x, blocks, steps))
                .unwrap_or_default();
        let sb_steps =
            p.sb.as_ref()
                .map(|x| step_major_columns(x, blocks, steps))
                .unwrap_or_default();
        let zeros = match &p.c {
            Some(_) => Vec::new(),
            None => vec![zero_of(&inst.arithmetic.c); n],
        };
        Plan {
            engine,
            p,
            m,
            n,
            tile: (tm, tn, tk),
            steps,
            blocks,
            a_steps,
            b_steps,
            sa_steps,
            sb_steps,
            zeros,
            stored,
            positions,
            panel: None,
        }
    }

    /// Whether the JIT's panel computes D ([`Engine::panel`]), not the kernel's batches.
    pub fn uses_panel(&self) -> bool {
        self.panel.is_some()
    }

    /// D's rows (M) and columns (N).
    pub fn shape(&self) -> (usize, usize) {
        (self.m, self.n)
    }

    /// Rows of one tile (the instruction's m): [`Plan::rows_into`] takes runs of whole
    /// tile rows.
    pub fn tile_rows(&self) -> usize {
        self.tile.0
    }

    fn wrong_d(&self, got: usize, want: usize) -> EvalError {
        EvalError::OperandCount {
            instruction: self.engine.checked().instruction().name.clone(),
            operand: "d",
            got,
            want,
        }
    }

    /// D's rows `rows` (a run of whole tile rows) into `out` (their elements, row-major).
    ///
    /// Each task writes its part of D in place: with one k-step, the batch entry reads
    /// C's rows and writes D's directly; with more, the steps alternate between D and a
    /// scratch block of the task's size, so that the last step lands in D and nothing is
    /// copied.
    pub fn rows_into(
        &self,
        rows: std::ops::Range<usize>,
        out: &mut [u64],
        progress: &(dyn Fn(usize) + Sync),
    ) -> Result<(), EvalError> {
        let (m, n) = (self.m, self.n);
        let (tm, tn, tk) = self.tile;
        let (steps, blocks, ta) = (self.steps, self.blocks, self.stored);
        let sparse = !self.positions.is_empty();
        let whole = rows.start <= rows.end
            && rows.end <= m
            && rows.start.is_multiple_of(tm)
            && rows.end.is_multiple_of(tm);
        if !whole || out.len() != rows.len() * n {
            return Err(self.wrong_d(out.len(), rows.len() * n));
        }
        let c_row = |at: usize, w: usize| -> &[u64] {
            match &self.p.c {
                Some(c) => &c.data[at..at + w],
                None => &self.zeros[..w],
            }
        };
        let first = rows.start / tm;
        let work = tasks(out, (rows.len(), n), (tm, tn));
        if let Some(wide) = &self.panel {
            return work.into_par_iter().try_for_each(|task| {
                let Task { ti, j0, rows } = task;
                let w = rows.first().map_or(0, |r| r.len());
                let r0 = (first + ti) * tm;
                let end = r0 + rows.len();
                let rows = rows.into_iter().enumerate().map(|(di, d)| {
                    let r = r0 + di;
                    // the next row's C ahead of its turn: a task reads a short run of
                    // each row of C (64 columns), too short for the processor to see the
                    // stream (measured: a tf32 GEMM with C took 1.4x as long as without)
                    if let (Some(c), true) = (&self.p.c, r + 1 < end) {
                        let at = (r + 1) * n + j0;
                        prefetch(&c.data[at..at + w]);
                    }
                    (r, c_row(r * n + j0, w), d)
                });
                wide.panel.rows(&wide.operands, j0, rows)?;
                progress(w / tn);
                Ok(())
            });
        }
        work.into_par_iter().try_for_each(|task| {
            let Task { ti, j0, mut rows } = task;
            let ti = first + ti; // the tile row in D
            let w = rows.first().map_or(0, |r| r.len());
            // the step that writes D itself: the last; earlier ones alternate with
            // `scratch`
            let mut scratch = if steps > 1 {
                vec![0u64; tm * w]
            } else {
                Vec::new()
            };
            for s in 0..steps {
                let a_rows = &self.a_steps[(s * m + ti * tm) * ta..(s * m + ti * tm + tm) * ta];
                let p_rows = match sparse {
                    true => &self.positions[(s * m + ti * tm) * ta..(s * m + ti * tm + tm) * ta],
                    false => &[],
                };
                let b_cols = &self.b_steps[(s * n + j0) * tk..(s * n + j0 + w) * tk];
                let (sa_rows, sb_cols): (&[u64], &[u64]) = if blocks > 0 {
                    (
                        &self.sa_steps[(s * m + ti * tm) * blocks..(s * m + ti * tm + tm) * blocks],
                        &self.sb_steps[(s * n + j0) * blocks..(s * n + j0 + w) * blocks],
                    )
                } else {
                    (&[], &[])
                };
                let into_d = (steps - 1 - s) % 2 == 0;
                for (di, a) in a_rows.chunks_exact(ta).enumerate() {
                    let sa = &sa_rows[di * blocks..(di + 1) * blocks];
                    let at = (ti * tm + di) * n + j0;
                    if let (Some(c), 0, true) = (&self.p.c, s, di + 1 < tm) {
                        // the next row's C ahead of its turn (as the panels')
                        prefetch(&c.data[at + n..at + n + w]);
                    }
                    let tmp = match scratch.len() {
                        0 => &mut [],
                        _ => &mut scratch[di * w..(di + 1) * w],
                    };
                    let row = &mut *rows[di];
                    // (c, d) of this step: C's row first, then whichever the last step
                    // wrote
                    let (c, d): (&[u64], &mut [u64]) = match (s, into_d) {
                        (0, true) => (c_row(at, w), row),
                        (0, false) => (c_row(at, w), tmp),
                        (_, true) => (tmp, row),
                        (_, false) => (row, tmp),
                    };
                    if sparse {
                        self.engine.sparse_batch_strided(
                            c,
                            (a, 0),
                            (b_cols, tk),
                            (sa, 0),
                            (sb_cols, blocks),
                            (&p_rows[di * ta..(di + 1) * ta], 0),
                            d,
                        )?;
                    } else {
                        self.engine.batch_strided(
                            c,
                            (a, 0),
                            (b_cols, tk),
                            (sa, 0),
                            (sb_cols, blocks),
                            d,
                        )?;
                    }
                }
            }
            progress(w / tn);
            Ok(())
        })
    }
}

/// `steps` x rows x `width`: for each step s, row r's elements `s*width .. (s+1)*width`.
fn step_major(x: &Matrix, width: usize, steps: usize) -> Vec<u64> {
    let mut out = Vec::with_capacity(x.data.len());
    for s in 0..steps {
        for r in 0..x.rows {
            out.extend_from_slice(&x.data[r * x.cols + s * width..r * x.cols + (s + 1) * width]);
        }
    }
    out
}

/// `steps` x columns x `width`: for each step s, column j's elements `s*width ..
/// (s+1)*width` (rows of `x`), read straight from the row-major matrix without a
/// transposed copy.
fn step_major_columns(x: &Matrix, width: usize, steps: usize) -> Vec<u64> {
    let mut out = vec![0u64; x.data.len()];
    for (s, step) in out
        .chunks_exact_mut((x.cols * width).max(1))
        .enumerate()
        .take(steps)
    {
        for (r, row) in x.data[s * width * x.cols..(s + 1) * width * x.cols]
            .chunks_exact(x.cols.max(1))
            .enumerate()
        {
            for (j, &v) in row.iter().enumerate() {
                step[j * width + r] = v;
            }
        }
    }
    out
}

/// The encoding of +0 in a format (the default C of a GEMM).
pub fn zero_of(format: &Format) -> u64 {
    format.positive_zero()
}

/// Error statistics of D against the exact result `C + A*B` (scales included), computed
/// exactly: every product and sum is exact; only the final statistics are f64.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ErrorReport {
    /// Elements compared (finite exact result and finite D).
    pub compared: usize,
    /// Elements skipped because an input or D is NaN or infinite.
    pub non_finite: usize,
    pub max_abs: f64,
    pub mean_abs: f64,
    /// Relative error |D - exact| / |exact|, over elements whose exact result is nonzero.
    pub max_rel: f64,
    pub mean_rel: f64,
    /// Mean signed error D - exact (bias).
    pub mean_signed: f64,
}

impl ErrorReport {
    /// A small table for humans.
    pub fn table(&self) -> String {
        format!(
            "error against the exact result ({} elements compared, {} non-finite skipped)\n\
             {:<18} {:>14} {:>14}\n\
             {:<18} {:>14.6e} {:>14.6e}\n\
             {:<18} {:>14.6e} {:>14.6e}\n\
             {:<18} {:>14.6e}\n",
            self.compared,
            self.non_finite,
            "",
            "max",
            "mean",
            "absolute",
            self.max_abs,
            self.mean_abs,
            "relative",
            self.max_rel,
            self.mean_rel,
            "signed (bias)",
            self.mean_signed
        )
    }
}

/// A finite decoded element as an integer significand and the exponent of its last bit.
fn split(d: &Decoded) -> Option<(i128, i64)> {
    match d {
        Decoded::Finite(f) => {
            let s = f.significand as i128;
            Some((
                if f.negative { -s } else { s },
                f.exponent as i64 - f.fraction_bits as i64,
            ))
        }
        _ => None,
    }
}

/// The exact value of `c + sum_k a_k * b_k * sa * sb` for one element, or None if any
/// input is NaN or infinite.
fn exact_element(
    inst: &Instruction,
    c: u64,
    a: &[u64],
    b: &[u64],
    sa: &[u64],
    sb: &[u64],
) -> Option<Dyadic> {
    let block = inst.scale_block().map_or(usize::MAX, |b| b as usize);
    let scale = |j: usize| -> Option<(i128, i64)> {
        let s = inst.arithmetic.scale.as_ref()?;
        let (x, ex) = split(&s.format.decode(sa[j]))?;
        let (y, ey) = split(&s.format.decode(sb[j]))?;
        Some((x * y, ex + ey))
    };
    // Products accumulate in an i128 anchored at the lowest exponent seen; a term that
    // would not fit sends the element to the arbitrary-precision path.
    let mut terms: Vec<(i128, i64)> = Vec::with_capacity(a.len());
    for k in 0..a.len() {
        let (x, ex) = split(&inst.arithmetic.a.decode(a[k]))?;
        let (y, ey) = split(&inst.arithmetic.b.decode(b[k]))?;
        let (mut p, mut e) = (x * y, ex + ey);
        if inst.arithmetic.scale.is_some() {
            let (s, es) = scale(k / block)?;
            p = p.checked_mul(s)?;
            e += es;
        }
        if p != 0 {
            terms.push((p, e));
        }
    }
    let (cv, ce) = split(&inst.arithmetic.c.decode(c))?;
    let lo = terms.iter().map(|t| t.1).min();
    let fast = lo.and_then(|lo| {
        let mut acc: i128 = 0;
        for &(p, e) in &terms {
            let shift = (e - lo) as u32;
            if shift >= 126 || p.unsigned_abs().leading_zeros() <= shift + 8 {
                return None;
            }
            acc = acc.checked_add(p << shift)?;
        }
        Some(Dyadic::new(acc, lo))
    });
    let sum = match (fast, lo) {
        (Some(s), _) => s,
        (None, None) => Dyadic::zero(),
        (None, Some(_)) => terms
            .iter()
            .fold(Dyadic::zero(), |acc, &(p, e)| acc.add(&Dyadic::new(p, e))),
    };
    Some(sum.add(&Dyadic::new(cv, ce)))
}

/// One element's error: |D - exact|, the relative error if exact != 0, and D - exact.
struct ElementError {
    abs: f64,
    rel: Option<f64>,
    signed: f64,
}

/// Compare D with the exact result of the problem.
/// A sparse A (stored elements and their columns) as the dense M x `k` matrix it stands
/// for: +0 of a's format at every unstored column.
pub fn expand_sparse(inst: &Instruction, a: &Matrix, meta: &Matrix, k: usize) -> Matrix {
    let mut out = Matrix::filled(a.rows, k, zero_of(&inst.arithmetic.a));
    for (i, (row, cols)) in a
        .data
        .chunks_exact(a.cols.max(1))
        .zip(meta.data.chunks_exact(a.cols.max(1)))
        .enumerate()
    {
        for (&x, &j) in row.iter().zip(cols) {
            out.data[i * k + j as usize] = x;
        }
    }
    out
}

pub fn error_report(inst: &Instruction, p: &Problem, d: &Matrix) -> ErrorReport {
    error_report_with_progress(inst, p, d, &|_| {})
}

/// Elements of one operand matrix decoded once: integer significand and the exponent of
/// its last bit (zeros take the smallest exponent of the nonzero ones), and whether each
/// row is all finite.
struct DecodedRows {
    sig: Vec<i64>,
    exp: Vec<i32>,
    row_finite: Vec<bool>,
    /// The smallest last-bit exponent and the largest top-bit exponent (exclusive) of the
    /// nonzero elements.
    lo: i64,
    top: i64,
    /// Each element as an integer on the grid 2^lo (`sig << (exp - lo)`), where every
    /// element fits an i64 there (top - lo at most 62: f16 and FP8 always).
    on_grid: Option<Vec<i64>>,
}

impl DecodedRows {
    /// `data` as `rows` rows of `cols`; None if a significand needs more than 62 bits.
    fn new(format: &Format, data: &[u64], rows: usize, cols: usize) -> Option<DecodedRows> {
        let mut sig = Vec::with_capacity(data.len());
        let mut exp = Vec::with_capacity(data.len());
        let mut row_finite = vec![true; rows];
        let (mut lo, mut top) = (i64::MAX, i64::MIN);
        for (i, &x) in data.iter().enumerate() {
            match split(&format.decode(x)) {
                Some((v, e)) => {
                    if v.unsigned_abs() >= 1 << 62 || e.abs() > 1 << 20 {
                        return None;
                    }
                    if v != 0 {
                        lo = lo.min(e);
                        top = top.max(e + (128 - v.unsigned_abs().leading_zeros()) as i64);
                    }
                    sig.push(v as i64);
                    exp.push(e as i32);
                }
                None => {
                    row_finite[i / cols.max(1)] = false;
                    sig.push(0);
                    exp.push(0);
                }
            }
        }
        if lo == i64::MAX {
            (lo, top) = (0, 0);
        }
        for (s, e) in sig.iter().zip(exp.iter_mut()) {
            if *s == 0 {
                *e = lo as i32;
            }
        }
        debug_assert_eq!(row_finite.len(), rows);
        let on_grid = (top - lo <= 62).then(|| {
            sig.iter()
                .zip(&exp)
                .map(|(&s, &e)| s << (e as i64 - lo))
                .collect()
        });
        Some(DecodedRows {
            sig,
            exp,
            row_finite,
            lo,
            top,
            on_grid,
        })
    }
}

/// The exact `c + row i of A . column j of B` on the fixed-width path of
/// [`error_report_with_progress`] (whose width check makes every shift and sum fit).
fn fixed_exact(
    inst: &Instruction,
    da: &DecodedRows,
    db: &DecodedRows,
    kk: usize,
    i: usize,
    j: usize,
    c: u64,
) -> Option<Dyadic> {
    if !da.row_finite[i] || !db.row_finite[j] {
        return None;
    }
    let lo = (da.lo + db.lo) as i32;
    let acc: i128 = match (&da.on_grid, &db.on_grid) {
        // both on their grids: one 64 x 64 -> 128-bit multiply and add per product
        (Some(ga), Some(gb)) => ga[i * kk..(i + 1) * kk]
            .iter()
            .zip(&gb[j * kk..(j + 1) * kk])
            .map(|(&x, &y)| x as i128 * y as i128)
            .sum(),
        _ => {
            let (sa, ea) = (&da.sig[i * kk..(i + 1) * kk], &da.exp[i * kk..(i + 1) * kk]);
            let (sb, eb) = (&db.sig[j * kk..(j + 1) * kk], &db.exp[j * kk..(j + 1) * kk]);
            let mut acc: i128 = 0;
            for k in 0..kk {
                let prod = sa[k] as i128 * sb[k] as i128;
                acc += prod << (ea[k] + eb[k] - lo) as u32;
            }
            acc
        }
    };
    let (cv, ce) = split(&inst.arithmetic.c.decode(c))?;
    Some(Dyadic::new(acc, lo as i64).add(&Dyadic::new(cv, ce)))
}

/// Does the fixed-width path hold every sum of `kk` products of `da` and `db`?
fn fits_fixed(da: &DecodedRows, db: &DecodedRows, kk: usize) -> bool {
    let lo = da.lo + db.lo;
    let top = da.top + db.top;
    let width = top - lo + (usize::BITS - kk.leading_zeros()) as i64 + 1;
    width <= 126
}

/// [`error_report`], calling `progress(rows)` as rows of D are done. The exact sums are
/// fixed-width integers: A and B are decoded once, and when every product of the data,
/// shifted to the smallest last-bit exponent of any product, fits with the sum of K of
/// them in an i128 (f16 and FP8 always do; wider formats when the data's exponents allow
/// it), each element is one pass of multiply, shift and add. Otherwise elements take the
/// arbitrary-precision path.
pub fn error_report_with_progress(
    inst: &Instruction,
    p: &Problem,
    d: &Matrix,
    progress: &(dyn Fn(usize) + Sync),
) -> ErrorReport {
    // a sparse A is measured as the dense matrix it stands for
    if let Some(meta) = &p.meta {
        let dense = Problem {
            a: expand_sparse(inst, &p.a, meta, p.b.rows),
            meta: None,
            ..p.clone()
        };
        return error_report_with_progress(inst, &dense, d, progress);
    }
    let (m, n, kk) = (p.a.rows, p.b.cols, p.a.cols);
    let bt = p.b.transposed();
    let per_k = inst
        .scale_block()
        .map(|block| kk / block as usize)
        .unwrap_or(0);
    let sa = p.sa.as_ref().map(|x| x.data.clone()).unwrap_or_default();
    let sbt =
        p.sb.as_ref()
            .map(|x| x.transposed().data)
            .unwrap_or_default();
    // the fixed-width path: unscaled instructions whose data fits
    let fixed = if per_k == 0 {
        let da = DecodedRows::new(&inst.arithmetic.a, &p.a.data, m, kk);
        let db = DecodedRows::new(&inst.arithmetic.b, &bt.data, n, kk);
        da.zip(db).filter(|(da, db)| fits_fixed(da, db, kk))
    } else {
        None
    };
    let c_zero = zero_of(&inst.arithmetic.c);
    // per element: None when an input or D is not finite
    let element = |i: usize, j: usize| -> Option<ElementError> {
        let c = p.c.as_ref().map_or(c_zero, |c| c.data[i * n + j]);
        let exact = match &fixed {
            Some((da, db)) => fixed_exact(inst, da, db, kk, i, j, c)?,
            None => exact_element(
                inst,
                c,
                &p.a.data[i * kk..(i + 1) * kk],
                &bt.data[j * kk..(j + 1) * kk],
                if per_k > 0 {
                    &sa[i * per_k..(i + 1) * per_k]
                } else {
                    &[]
                },
                if per_k > 0 {
                    &sbt[j * per_k..(j + 1) * per_k]
                } else {
                    &[]
                },
            )?,
        };
        let (dv, de) = split(&inst.arithmetic.d.decode(d.data[i * n + j]))?;
        let err = Dyadic::new(dv, de).add(&exact.neg());
        let signed = err.to_f64_lossy();
        let rel = (!exact.is_zero())
            .then(|| (err.abs().to_f64_lossy() / exact.abs().to_f64_lossy()).abs());
        Some(ElementError {
            abs: signed.abs(),
            rel,
            signed,
        })
    };
    let rows: Vec<Vec<Option<ElementError>>> = (0..m)
        .into_par_iter()
        .map(|i| {
            let row = (0..n).map(|j| element(i, j)).collect();
            progress(1);
            row
        })
        .collect();
    let mut r = ErrorReport::default();
    let (mut sum_abs, mut sum_rel, mut n_rel, mut sum_signed) = (0.0, 0.0, 0usize, 0.0);
    for e in rows.into_iter().flatten() {
        match e {
            None => r.non_finite += 1,
            Some(ElementError { abs, rel, signed }) => {
                r.compared += 1;
                r.max_abs = r.max_abs.max(abs);
                sum_abs += abs;
                sum_signed += signed;
                if let Some(rel) = rel {
                    r.max_rel = r.max_rel.max(rel);
                    sum_rel += rel;
                    n_rel += 1;
                }
            }
        }
    }
    if r.compared > 0 {
        r.mean_abs = sum_abs / r.compared as f64;
        r.mean_signed = sum_signed / r.compared as f64;
    }
    if n_rel > 0 {
        r.mean_rel = sum_rel / n_rel as f64;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmac_compiler::random::Rng;

    /// The fixed-width exact sums equal the arbitrary-precision ones, element by element,
    /// on f16 data over its whole range and bf16 data over a narrow one (both fit, and
    /// both operands' elements fit an i64 on their grids), on bf16 data with A over 70
    /// binades (fits, with A's elements off the grid: the shifting loop), and bf16 over its
    /// whole range does not fit (the report takes the other path).
    #[test]
    fn fixed_width_exact_sums_equal_the_arbitrary_precision_ones() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/hopper.mma"))
                .unwrap();
        let v = mmac_compiler::compile("hopper.mma", &text).unwrap();
        let mut rng = Rng::new(7);
        for (name, ranges, on_grid) in [
            ("mma.m16n8k16.f32.f16.f16.f32", None, true),
            (
                "mma.m16n8k16.f32.bf16.bf16.f32",
                Some([(100, 40), (100, 40)]),
                true,
            ),
            (
                "mma.m16n8k16.f32.bf16.bf16.f32",
                Some([(70, 70), (120, 10)]),
                false,
            ),
        ] {
            let inst = &v.spec().instructions[v.spec().position(name).unwrap()];
            let (m, n, kk) = (8, 8, 256);
            let mut draw = |f: &Format, count: usize, range: Option<(u64, u64)>| -> Vec<u64> {
                (0..count)
                    .map(|_| {
                        let x = rng.finite(f);
                        match range {
                            // exponent field within from..from + width
                            Some((from, width)) => {
                                let e = from + rng.next_u64() % width;
                                (x & 0x807f) | (e << 7)
                            }
                            None => x,
                        }
                    })
                    .collect()
            };
            let a = draw(&inst.arithmetic.a, m * kk, ranges.map(|r| r[0]));
            let bt = draw(&inst.arithmetic.b, n * kk, ranges.map(|r| r[1]));
            let c = draw(&inst.arithmetic.c, m * n, None);
            let da = DecodedRows::new(&inst.arithmetic.a, &a, m, kk).unwrap();
            let db = DecodedRows::new(&inst.arithmetic.b, &bt, n, kk).unwrap();
            assert!(fits_fixed(&da, &db, kk), "{name}");
            assert_eq!(da.on_grid.is_some(), on_grid, "{name}: A on its grid");
            assert!(db.on_grid.is_some(), "{name}: B on its grid");
            for i in 0..m {
                for j in 0..n {
                    let want = exact_element(
                        inst,
                        c[i * n + j],
                        &a[i * kk..(i + 1) * kk],
                        &bt[j * kk..(j + 1) * kk],
                        &[],
                        &[],
                    );
                    let got = fixed_exact(inst, &da, &db, kk, i, j, c[i * n + j]);
                    let same = match (&got, &want) {
                        (Some(g), Some(w)) => g.add(&w.neg()).is_zero(),
                        (None, None) => true,
                        _ => false,
                    };
                    assert!(same, "{name} element ({i}, {j}): {got:?} vs {want:?}");
                }
            }
        }
        let inst =
            &v.spec().instructions[v.spec().position("mma.m16n8k16.f32.bf16.bf16.f32").unwrap()];
        let wide: Vec<u64> = (0..256).map(|_| rng.finite(&inst.arithmetic.a)).collect();
        let da = DecodedRows::new(&inst.arithmetic.a, &wide, 1, 256).unwrap();
        assert!(!fits_fixed(&da, &da, 256));
    }
}
