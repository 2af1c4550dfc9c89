//! The engines behind one door: [`Engine`] gives a checked instruction's JIT kernel, or
//! the reference interpreter with the reason it runs instead, and computes dot products
//! and batches of them through whichever it is; [`Engines`] does so for every instruction
//! of a spec compiled once. Nothing else chooses between the JIT and the interpreter. It
//! also holds what both engines speak: the inputs of one dot-product-add ([`Operands`])
//! and why an evaluation could not run ([`EvalError`]).

use crate::checked::{Checked, CheckedSpec};
use crate::ir::Walk;
use crate::{interp, jit, sparse};
use std::sync::Arc;

/// Elements of the dense operands a sparse batch builds at a time (32 KiB).
const SPARSE_CHUNK_ELEMENTS: usize = 4096;

thread_local! {
    /// The buffer of [`Engine::sparse_batch_strided`]'s dense operands, kept for the
    /// thread's next call (taken for the call, so a call inside another's gets its own).
    static SPARSE_BUFFER: std::cell::Cell<Vec<u64>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The inputs of one dot product, as raw encodings.
#[derive(Clone, Copy, Debug)]
pub struct Operands<'a> {
    pub c: u64,
    pub a: &'a [u64],
    pub b: &'a [u64],
    /// Scale factors of row i of A, one per block of k (empty without scales).
    pub sa: &'a [u64],
    /// Scale factors of column j of B.
    pub sb: &'a [u64],
}

/// Why an evaluation could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    #[error("{operand} has {got} elements, but `{instruction}` takes {want}")]
    OperandCount {
        instruction: String,
        operand: &'static str,
        got: usize,
        want: usize,
    },
    #[error(
        "{operand}: {records} records {stride} elements apart do not fit in memory, for `{instruction}`"
    )]
    Stride {
        instruction: String,
        operand: &'static str,
        records: usize,
        stride: usize,
    },
    /// The positions of a sparse A's stored elements break the instruction's pattern, or
    /// were given to a dense instruction (or left out for a sparse one).
    #[error("positions of A's stored elements, for `{instruction}`: {message}")]
    Pattern {
        instruction: String,
        message: String,
    },
    /// An engine could not compute the result exactly (a broken invariant: a bug).
    #[error("internal error computing `{instruction}`: {message}")]
    Internal {
        instruction: String,
        message: String,
    },
}

/// Which engine to use: the JIT (with the interpreter for what it refuses), or the
/// interpreter alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// JIT kernels compiled with these options ([`jit::Options::quick`] for short jobs).
    Jit(jit::Options),
    /// The reference interpreter for everything.
    Interp,
}

impl Choice {
    /// The JIT with optimised kernels (for GEMMs, benchmarks, a box that serves many).
    pub const OPTIMISED: Choice = Choice::Jit(jit::Options {
        emit_clif: false,
        emit_asm: false,
        verify: false,
        quick: false,
    });
    /// The JIT with quickly compiled kernels (for a few thousand dot products).
    pub const QUICK: Choice = Choice::Jit(jit::Options {
        emit_clif: false,
        emit_asm: false,
        verify: false,
        quick: true,
    });
}

/// One checked instruction's engine: its JIT kernel, or the interpreter (with why).
#[derive(Clone)]
pub struct Engine<'a> {
    checked: Checked<'a>,
    route: Slot,
}

/// An engine's route, or the JIT's compiled on first use ([`Engine::deferred`]).
#[derive(Clone)]
enum Slot {
    Ready(Route),
    Deferred(Arc<Deferred>),
}

/// The JIT's kernel of an instruction, compiled when something first needs it, and its
/// panel, compiled on its own.
struct Deferred {
    options: jit::Options,
    route: std::sync::OnceLock<Route>,
    panel: std::sync::OnceLock<Option<Arc<jit::panel::Panel>>>,
}

#[derive(Clone)]
enum Route {
    Jit(jit::Kernel),
    /// The interpreter, and why (the JIT's refusal), or `None` when it was asked for.
    Interp(Option<Arc<str>>),
}

impl Route {
    fn is_jit(&self) -> bool {
        matches!(self, Route::Jit(_))
    }
    fn fallback(&self) -> Option<&str> {
        match self {
            Route::Interp(Some(why)) => Some(why),
            _ => None,
        }
    }
}

/// What [`Engine::prepare`] made for one instruction (its compiled kernel, or why the
/// interpreter runs it), borrowing nothing: kept across calls by an embedder (the C API,
/// the Python bindings), each call taking an [`Engine`] with [`Engine::prepared`].
#[derive(Clone)]
pub struct Prepared {
    name: Arc<str>,
    /// The instruction it was made for: where it lay (the quick test) and its arithmetic.
    at: usize,
    arithmetic: Arc<crate::ir::Arithmetic>,
    route: Route,
}

impl Prepared {
    fn new(checked: Checked, route: Route) -> Prepared {
        Prepared {
            name: checked.name().into(),
            at: std::ptr::from_ref(checked.instruction()) as usize,
            arithmetic: Arc::new(checked.arithmetic().clone()),
            route,
        }
    }
    /// Does the JIT compute it?
    pub fn is_jit(&self) -> bool {
        self.route.is_jit()
    }
    /// Why the interpreter computes it when the JIT was asked for.
    pub fn fallback(&self) -> Option<&str> {
        self.route.fallback()
    }
}

impl<'a> Engine<'a> {
    /// The engine `choice` gives `checked`, compiling it on its own.
    pub fn new(checked: Checked<'a>, choice: Choice) -> Engine<'a> {
        let route = Engine::prepare(checked, choice).route;
        Engine {
            checked,
            route: Slot::Ready(route),
        }
    }
    /// [`Engine::new`], the JIT's kernel compiled only when something first needs it
    /// (its panel, [`Engine::panel`], is compiled on its own): a GEMM that its panel
    /// computes whole never compiles the kernel (`mmac gemm`: 4 ms of a Hopper f16
    /// kernel). Whether the JIT refuses the instruction ([`Engine::fallback`]) is known
    /// once the kernel is asked for; the panel is compiled (and used) whether or not the
    /// kernel would compile (it computes what the interpreter does).
    pub fn deferred(checked: Checked<'a>, choice: Choice) -> Engine<'a> {
        let route = match choice {
            Choice::Interp => Slot::Ready(Route::Interp(None)),
            Choice::Jit(options) => Slot::Deferred(Arc::new(Deferred {
                options,
                route: std::sync::OnceLock::new(),
                panel: std::sync::OnceLock::new(),
            })),
        };
        Engine { checked, route }
    }
    /// The route, compiling a deferred kernel now.
    fn route(&self) -> &Route {
        match &self.route {
            Slot::Ready(r) => r,
            Slot::Deferred(d) => d
                .route
                .get_or_init(|| Engine::prepare(self.checked, Choice::Jit(d.options)).route),
        }
    }
    /// Compile `checked` as `choice` says, to keep ([`Engine::prepared`] takes it back).
    pub fn prepare(checked: Checked, choice: Choice) -> Prepared {
        let route = match choice {
            Choice::Interp => Route::Interp(None),
            Choice::Jit(options) => match jit::compile_instruction_with(checked, options)
                .and_then(|c| c.kernel(checked.name()))
            {
                Ok(k) => Route::Jit(k),
                Err(e) => Route::Interp(Some(e.message.into())),
            },
        };
        Prepared::new(checked, route)
    }
    /// The engine of `checked` from what [`Engine::prepare`] made for it (made for an
    /// instruction of another name or arithmetic, it is the interpreter, saying so).
    pub fn prepared(checked: Checked<'a>, prepared: &Prepared) -> Engine<'a> {
        let same = *prepared.name == *checked.name()
            && (prepared.at == std::ptr::from_ref(checked.instruction()) as usize
                || *prepared.arithmetic == *checked.arithmetic());
        let route = if same {
            prepared.route.clone()
        } else {
            Route::Interp(Some(
                format!("the engine was prepared for `{}`", prepared.name).into(),
            ))
        };
        Engine {
            checked,
            route: Slot::Ready(route),
        }
    }
    /// The engine of `checked` in a spec compiled before (compiled with `checked`
    /// among its instructions): its kernel, or the interpreter with the JIT's reason.
    pub fn from_compiled(checked: Checked<'a>, compiled: &jit::CompiledSpec) -> Engine<'a> {
        let route = match compiled.kernel(checked.name()) {
            Ok(k) => Route::Jit(k),
            Err(e) => Route::Interp(Some(e.message.into())),
        };
        Engine {
            checked,
            route: Slot::Ready(route),
        }
    }
    /// The reference interpreter.
    pub fn interpreter(checked: Checked<'a>) -> Engine<'a> {
        Engine {
            checked,
            route: Slot::Ready(Route::Interp(None)),
        }
    }
    /// What it holds, to keep without its borrow ([`Engine::prepared`] takes it back).
    pub fn to_prepared(&self) -> Prepared {
        Prepared::new(self.checked, self.route().clone())
    }
    /// The instruction it computes.
    pub fn checked(&self) -> Checked<'a> {
        self.checked
    }
    /// Does the JIT compute it?
    pub fn is_jit(&self) -> bool {
        self.route().is_jit()
    }
    /// Why the interpreter computes it when the JIT was asked for (the JIT's refusal).
    pub fn fallback(&self) -> Option<&str> {
        self.route().fallback()
    }
    /// The JIT's kernel, when it computes it.
    pub fn kernel(&self) -> Option<&jit::Kernel> {
        match self.route() {
            Route::Jit(k) => Some(k),
            Route::Interp(_) => None,
        }
    }

    /// The JIT's GEMM panel of the arithmetic ([`jit::panel`]): `None` under the
    /// interpreter, for a sparse or block-scaled instruction, and for any arithmetic
    /// the panels do not cover.
    pub fn panel(&self) -> Option<Arc<jit::panel::Panel>> {
        if self.checked.instruction().sparsity.is_some() || self.checked.scale_count() > 0 {
            return None;
        }
        match &self.route {
            // (its own panel: the kernel, compiled or not, is not needed for one)
            Slot::Deferred(d) => d
                .panel
                .get_or_init(|| jit::panel::compile(self.checked).ok().map(Arc::new))
                .clone(),
            Slot::Ready(Route::Jit(k)) => k.panel(self.checked).ok(),
            Slot::Ready(Route::Interp(_)) => None,
        }
    }

    /// One dot-product-add of the arithmetic (for a sparse instruction, of the dense
    /// arithmetic it runs, on operands as that takes them: see [`Engine::sparse_dot`]).
    pub fn dot(&self, ops: &Operands) -> Result<u64, EvalError> {
        match self.route() {
            Route::Jit(k) => k.dot(ops),
            Route::Interp(_) => interp::run(self.checked, ops),
        }
    }

    /// One dot-product-add of the instruction as its users see it: for a sparse one, `a`
    /// its stored elements, `positions` their columns and `b` all K elements, checked
    /// against the pattern and run through the dense arithmetic ([`crate::sparse`]); for
    /// a dense one, `positions` is empty and this is [`Engine::dot`].
    pub fn sparse_dot(&self, ops: &Operands, positions: &[u64]) -> Result<u64, EvalError> {
        let mut d = [0];
        self.sparse_batch_strided(
            &[ops.c],
            (ops.a, 0),
            (ops.b, 0),
            (ops.sa, 0),
            (ops.sb, 0),
            (positions, 0),
            &mut d,
        )?;
        Ok(d[0])
    }

    /// [`Engine::batch_strided`] for the instruction as its users see it (see
    /// [`Engine::sparse_dot`]): record r's positions at `positions.0[r * positions.1..]`.
    /// Every record's positions are checked (records that share them and the operand
    /// they build from, once). On the JIT, the dense arithmetic's operands are built a
    /// chunk of records at a time ([`sparse::build_fn`]) and run through its batch entry;
    /// the interpreter, the reference, builds each record's with
    /// [`sparse::dense_record`]. After an error, the records before the failing one may
    /// have their d.
    #[allow(clippy::too_many_arguments)]
    pub fn sparse_batch_strided(
        &self,
        c: &[u64],
        a: (&[u64], usize),
        b: (&[u64], usize),
        sa: (&[u64], usize),
        sb: (&[u64], usize),
        positions: (&[u64], usize),
        d: &mut [u64],
    ) -> Result<(), EvalError> {
        let name = self.checked.name();
        let pattern = |message: String| EvalError::Pattern {
            instruction: name.to_string(),
            message,
        };
        let Some(sp) = self.checked.sparsity() else {
            if !positions.0.is_empty() {
                return Err(pattern("it is dense and takes none".into()));
            }
            return self.batch_strided(c, a, b, sa, sb, d);
        };
        let (stored, columns) = (self.checked.stored(), self.checked.columns());
        let s = self.checked.scale_count();
        check_strides(
            name,
            c.len(),
            &[
                ("a", a, stored),
                ("b", b, columns),
                ("sa", sa, s),
                ("sb", sb, s),
                ("positions", positions, stored),
            ],
        )?;
        let n = c.len();
        let explained = |r: usize| {
            let p = slice(positions, r, stored);
            let m = sparse::check(&sp, columns, p).err().unwrap_or_default();
            pattern(if n > 1 { format!("record {r}: {m}") } else { m })
        };
        if !self.route().is_jit() {
            // the reference builds each record's operands on its own, by the plain
            // `select` and `expand` (`sparse::dense_record`), not by the chunk builders the
            // kernels' batches take: comparing the engines tests those
            return self.sparse_by_record(c, [a, b], [sa, sb], positions, d, explained);
        }
        // each record's positions are checked in the pass that builds its dense operand
        // (gathers b's selected elements, or expands a)
        // the dense operands a chunk of records at a time, in one buffer small enough to
        // stay in cache, the thread's own from call to call (a GEMM makes one call per
        // row of a tile)
        let k = self.checked.k();
        let chunk = (SPARSE_CHUNK_ELEMENTS / k.max(1)).clamp(1, n.max(1));
        let mut buffer = SPARSE_BUFFER.take();
        buffer.resize(chunk * k, 0);
        let build = sparse::build_fn(&sp);
        let zero = self.checked.arithmetic().a.positive_zero();
        // the operand the positions build from: b's columns, or a's stored elements
        let from = match sp.walk {
            Walk::Selected => b,
            Walk::Columns => a,
        };
        // records that share it and their positions share what is built: it is built
        // once, in the first chunk, and kept for the others
        let shared = from.1 == 0 && positions.1 == 0;
        for r0 in (0..n).step_by(chunk) {
            let r1 = (r0 + chunk).min(n);
            let at = |x| from_record(x, r0);
            let (c, d) = (&c[r0..r1], &mut d[r0..r1]);
            let records = if shared { 1 } else { r1 - r0 };
            if (!shared || r0 == 0)
                && !build(
                    at(from),
                    at(positions),
                    zero,
                    &mut buffer[..records * k],
                    stored,
                )
            {
                let fits = |r| sparse::fits(&sp, columns, slice(positions, r, stored));
                return Err(explained((r0..r1).find(|&r| !fits(r)).unwrap_or(r0)));
            }
            let built = (&buffer[..records * k], if shared { 0 } else { k });
            let (a, b) = match sp.walk {
                Walk::Selected => (at(a), built),
                Walk::Columns => (built, at(b)),
            };
            self.batch_strided(c, a, b, at(sa), at(sb), d)?;
        }
        SPARSE_BUFFER.set(buffer);
        Ok(())
    }

    /// [`Engine::sparse_batch_strided`] on the interpreter (the operands' counts and
    /// strides already checked): each record's dense operands built on its own, then the
    /// interpreter's batch.
    fn sparse_by_record(
        &self,
        c: &[u64],
        [a, b]: [Strided; 2],
        [sa, sb]: [Strided; 2],
        positions: Strided,
        d: &mut [u64],
        explained: impl Fn(usize) -> EvalError,
    ) -> Result<(), EvalError> {
        let (stored, columns, k) = (
            self.checked.stored(),
            self.checked.columns(),
            self.checked.k(),
        );
        let (mut dense_a, mut dense_b) = (
            Vec::with_capacity(c.len() * k),
            Vec::with_capacity(c.len() * k),
        );
        for r in 0..c.len() {
            let (a, b) = sparse::dense_record(
                self.checked,
                slice(a, r, stored),
                slice(b, r, columns),
                slice(positions, r, stored),
            )
            .map_err(|_| explained(r))?;
            dense_a.extend(a);
            dense_b.extend(b);
        }
        self.batch_strided(c, (&dense_a, k), (&dense_b, k), sa, sb, d)
    }

    /// `d[i] = dot(c[i], a[i*k..], b[i*k..], sa[i*s..], sb[i*s..])` for every record i.
    pub fn batch(
        &self,
        c: &[u64],
        a: &[u64],
        b: &[u64],
        sa: &[u64],
        sb: &[u64],
        d: &mut [u64],
    ) -> Result<(), EvalError> {
        let (k, s) = (self.checked.k(), self.checked.scale_count());
        self.batch_strided(c, (a, k), (b, k), (sa, s), (sb, s), d)
    }

    /// Like [`Engine::batch`], each operand with its record stride in elements (0 repeats
    /// one slice for every record): the JIT's batch entry, or the interpreter record by
    /// record, with the same checks of counts and strides.
    pub fn batch_strided(
        &self,
        c: &[u64],
        a: (&[u64], usize),
        b: (&[u64], usize),
        sa: (&[u64], usize),
        sb: (&[u64], usize),
        d: &mut [u64],
    ) -> Result<(), EvalError> {
        if let Route::Jit(kernel) = self.route() {
            return kernel.batch_strided(c, a, b, sa, sb, d);
        }
        let (k, s) = (self.checked.k(), self.checked.scale_count());
        let name = self.checked.name();
        check_strides(
            name,
            c.len(),
            &[("a", a, k), ("b", b, k), ("sa", sa, s), ("sb", sb, s)],
        )?;
        if d.len() != c.len() {
            return Err(EvalError::OperandCount {
                instruction: name.to_string(),
                operand: "d",
                got: d.len(),
                want: c.len(),
            });
        }
        for (r, d) in d.iter_mut().enumerate() {
            *d = interp::run(
                self.checked,
                &Operands {
                    c: c[r],
                    a: slice(a, r, k),
                    b: slice(b, r, k),
                    sa: slice(sa, r, s),
                    sb: slice(sb, r, s),
                },
            )?;
        }
        Ok(())
    }
}

/// A strided operand from record `r` on (inside it: [`check_strides`] checked).
fn from_record((x, stride): (&[u64], usize), r: usize) -> (&[u64], usize) {
    if stride == 0 {
        (x, 0)
    } else {
        (&x[r * stride..], stride)
    }
}

/// Record `r`'s slice of an operand (inside it: [`check_strides`] checked).
fn slice((x, stride): (&[u64], usize), r: usize, len: usize) -> &[u64] {
    &x[r * stride..r * stride + len]
}

/// An operand's elements and its record stride in elements.
type Strided<'a> = (&'a [u64], usize);

/// An operand of a strided batch: its name, its elements and record stride, and how many
/// elements of each record it holds.
type StridedOperand<'a> = (&'static str, Strided<'a>, usize);

/// Every record of `n` lies inside each operand: `(n - 1) * stride + len` elements, with
/// checked arithmetic (a wrapped bound would index anywhere).
fn check_strides(
    instruction: &str,
    n: usize,
    operands: &[StridedOperand],
) -> Result<(), EvalError> {
    for &(operand, (x, stride), len) in operands {
        let need = if n == 0 {
            Some(0)
        } else {
            (n - 1).checked_mul(stride).and_then(|v| v.checked_add(len))
        };
        match need {
            Some(want) if x.len() >= want => {}
            Some(want) => {
                return Err(EvalError::OperandCount {
                    instruction: instruction.to_string(),
                    operand,
                    got: x.len(),
                    want,
                });
            }
            None => {
                return Err(EvalError::Stride {
                    instruction: instruction.to_string(),
                    operand,
                    records: n,
                    stride,
                });
            }
        }
    }
    Ok(())
}

/// The engines of every instruction of a spec, its kernels compiled once.
pub struct Engines<'a> {
    spec: &'a CheckedSpec,
    compiled: Result<jit::CompiledSpec, Arc<str>>,
    choice: Choice,
}

impl<'a> Engines<'a> {
    /// Compile every instruction of `spec` as `choice` says (nothing, for the interpreter).
    pub fn new(spec: &'a CheckedSpec, choice: Choice) -> Engines<'a> {
        let compiled = match choice {
            Choice::Interp => Err(Arc::from("the interpreter was asked for")),
            Choice::Jit(options) => {
                jit::compile_with(spec, options).map_err(|e| Arc::from(e.to_string()))
            }
        };
        Engines {
            spec,
            compiled,
            choice,
        }
    }
    /// The engine of instruction `index`.
    pub fn get(&self, index: usize) -> Engine<'a> {
        let checked = self.spec.get(index);
        let route = match (&self.compiled, self.choice) {
            (_, Choice::Interp) => Route::Interp(None),
            (Ok(c), _) => match c.kernel(checked.name()) {
                Ok(k) => Route::Jit(k),
                Err(e) => Route::Interp(Some(e.message.into())),
            },
            (Err(why), _) => Route::Interp(Some(why.clone())),
        };
        Engine {
            checked,
            route: Slot::Ready(route),
        }
    }
    /// The engine of the instruction called `name`.
    pub fn find(&self, name: &str) -> Option<Engine<'a>> {
        self.spec.position(name).map(|i| self.get(i))
    }
    /// The compiled spec, when the JIT was asked for and the backend ran.
    pub fn compiled(&self) -> Option<&jit::CompiledSpec> {
        self.compiled.as_ref().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> CheckedSpec {
        let path = format!("{}/../specs/{name}.mma", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        crate::compile(&path, &text).expect("the spec checks")
    }

    /// Whether a deferred engine has compiled its kernel yet.
    fn compiled(e: &Engine) -> bool {
        match &e.route {
            Slot::Deferred(d) => d.route.get().is_some(),
            Slot::Ready(_) => true,
        }
    }

    /// A deferred engine compiles its panel without its kernel, and the kernel when a dot
    /// product or a question about the route first needs it; it computes what the
    /// engine compiled at once computes, and its clones share the one kernel.
    #[test]
    fn a_deferred_engine_compiles_its_kernel_when_first_needed() {
        let s = spec("hopper");
        let checked = s.find("mma.m16n8k16.f32.f16.f16.f32").unwrap();
        let lazy = Engine::deferred(checked, Choice::OPTIMISED);
        assert!(lazy.panel().is_some());
        assert!(!compiled(&lazy), "the panel compiled the kernel");
        let copy = lazy.clone();
        let (a, b) = ([0x3c00u64; 16], [0x4000u64; 16]); // 1.0 and 2.0 in f16
        let ops = Operands {
            c: 0x3f80_0000, // 1.0f
            a: &a,
            b: &b,
            sa: &[],
            sb: &[],
        };
        let eager = Engine::new(checked, Choice::OPTIMISED);
        assert_eq!(lazy.dot(&ops).unwrap(), eager.dot(&ops).unwrap());
        assert_eq!(lazy.dot(&ops).unwrap(), 0x4204_0000); // 1 + 16 * 2 = 33
        assert!(
            compiled(&lazy) && compiled(&copy),
            "the clone shares the kernel"
        );
        assert!(lazy.is_jit() && lazy.fallback().is_none());
        // an instruction without a panel: none, and the kernel on first use
        let ada = spec("ada");
        let fp8 = ada.find("mma.m16n8k32.f32.e4m3.e4m3.f32").unwrap();
        let lazy = Engine::deferred(fp8, Choice::OPTIMISED);
        assert!(lazy.panel().is_none() && !compiled(&lazy));
        assert!(lazy.is_jit() && compiled(&lazy));
        // the interpreter, asked for: nothing deferred, no panel
        let interp = Engine::deferred(checked, Choice::Interp);
        assert!(interp.panel().is_none() && !interp.is_jit() && interp.fallback().is_none());
    }
}
