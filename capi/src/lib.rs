//! libmmac: the C API over the JIT for programs that load a spec at run time
//! (`include/mmac.h` is its contract). A loaded spec owns its checked IR and one handle
//! per instruction; each handle holds what the engine facade prepared for it (its kernel,
//! which holds its code, or the reference interpreter). No panic crosses the boundary: every entry catches one and
//! reports it as an error.

use mmac_compiler::engine::{Choice, Engine, Engines, Operands, Prepared};
use mmac_runtime::fragments::{self, Fragment, Layout, LayoutError, Selectors, WarpInputs};
use mmac_runtime::specs::{self, LoadedSpec};
use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::OnceLock;

const MMAC_OK: c_int = 0;
const MMAC_ERR_NULL: c_int = 1;
const MMAC_ERR_SCALES: c_int = 2;
const MMAC_ERR_ENGINE: c_int = 4;
const MMAC_ERR_LAYOUT: c_int = 5;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(message: impl Into<String>) {
    let text = message.into().replace('\0', " ");
    LAST_ERROR.with(|e| *e.borrow_mut() = CString::new(text).unwrap_or_default());
}

/// One instruction of a loaded spec.
pub struct Instruction {
    name: CString,
    /// Its index in the spec.
    index: usize,
    /// K (elements of b per dot product), and the elements of a (K, or a sparse A's
    /// stored elements).
    k: usize,
    stored: usize,
    sparse: bool,
    scales: usize,
    /// What the engine facade prepared for it: the JIT's kernel, or the interpreter.
    prepared: Prepared,
    /// The spec that owns this handle (boxed, so its address is stable).
    spec: *const Spec,
    /// Its warp fragment layout (or why it has none), looked up on first use.
    layout: OnceLock<Result<Layout, LayoutError>>,
}

impl Instruction {
    /// The spec that owns this handle.
    fn spec(&self) -> &Spec {
        // SAFETY: a handle lives inside its spec, which is live while the handle is used.
        unsafe { &*self.spec }
    }

    /// The instruction's fragment layout from the built-in layout data.
    fn layout(&self) -> &Result<Layout, LayoutError> {
        self.layout.get_or_init(|| {
            let inst = self.spec().loaded.checked.get(self.index).instruction();
            let arch = &self.spec().loaded.spec().arch;
            fragments::Library::builtin()?.find_for(arch, inst)
        })
    }
}

/// A loaded spec.
pub struct Spec {
    instructions: Vec<Instruction>,
    loaded: LoadedSpec,
}

// SAFETY: the handles' raw pointer only ever reads the immutable spec that owns them; the
// kernels are `Send + Sync`; nothing is mutated after load.
unsafe impl Send for Spec {}
unsafe impl Sync for Spec {}

fn guarded<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            set_error("internal error: mmac panicked (please report it)");
            fallback
        }
    }
}

fn load(path: &Path) -> Result<Box<Spec>, String> {
    let loaded = specs::load_file(path).map_err(|e| e.render(false))?;
    let engines = Engines::new(&loaded.checked, Choice::OPTIMISED);
    let prepared: Vec<Prepared> = (0..loaded.checked.len())
        .map(|i| engines.get(i).to_prepared())
        .collect();
    drop(engines);
    let mut spec = Box::new(Spec {
        instructions: vec![],
        loaded,
    });
    let owner: *const Spec = &*spec;
    let mut handles = vec![];
    for ((index, inst), prepared) in spec
        .loaded
        .spec()
        .instructions
        .iter()
        .enumerate()
        .zip(prepared)
    {
        handles.push(Instruction {
            name: CString::new(inst.name.clone()).map_err(|e| e.to_string())?,
            index,
            k: inst.columns(),
            stored: inst.stored(),
            sparse: inst.sparsity.is_some(),
            scales: inst.scale_count(),
            prepared,
            spec: owner,
            layout: OnceLock::new(),
        });
    }
    spec.instructions = handles;
    Ok(spec)
}

/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmac_load(path: *const c_char) -> *mut Spec {
    guarded(std::ptr::null_mut(), || {
        if path.is_null() {
            set_error("mmac_load: path is NULL");
            return std::ptr::null_mut();
        }
        // SAFETY: the caller passes a NUL-terminated string.
        let path = unsafe { CStr::from_ptr(path) }
            .to_string_lossy()
            .into_owned();
        match load(Path::new(&path)) {
            Ok(spec) => {
                set_error("");
                Box::into_raw(spec)
            }
            Err(e) => {
                set_error(e);
                std::ptr::null_mut()
            }
        }
    })
}

/// # Safety
/// `spec` is NULL or a pointer `mmac_load` returned, not yet freed, and no handle of it
/// is in use.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmac_free(spec: *mut Spec) {
    if !spec.is_null() {
        // SAFETY: it came from Box::into_raw in mmac_load.
        drop(unsafe { Box::from_raw(spec) });
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn mmac_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// # Safety
/// `spec` is NULL or a live spec; `name` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmac_find(spec: *const Spec, name: *const c_char) -> *const Instruction {
    guarded(std::ptr::null(), || {
        // SAFETY: the caller passes a live spec and a NUL-terminated name, or NULL.
        let (Some(spec), false) = (unsafe { spec.as_ref() }, name.is_null()) else {
            set_error("mmac_find: spec or name is NULL");
            return std::ptr::null();
        };
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        match spec
            .instructions
            .iter()
            .find(|i| i.name.to_bytes() == name.as_bytes())
        {
            Some(i) => i,
            None => {
                let names = spec
                    .loaded
                    .spec()
                    .instructions
                    .iter()
                    .map(|i| i.name.as_str());
                let near = mmac_compiler::diagnostic::closest(&name, names)
                    .map(|n| format!("; did you mean `{n}`?"))
                    .unwrap_or_default();
                set_error(format!("no instruction `{name}`{near}"));
                std::ptr::null()
            }
        }
    })
}

/// # Safety
/// `spec` is NULL or a live spec.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmac_count(spec: *const Spec) -> usize {
    // SAFETY: a live spec or NULL.
    unsafe { spec.as_ref() }.map_or(0, |s| s.instructions.len())
}

/// # Safety
/// `spec` is NULL or a live spec.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmac_at(spec: *const Spec, i: usize) -> *const Instruction {
    // SAFETY: a live spec or NULL.
    unsafe { spec.as_ref() }
        .and_then(|s| s.instructions.get(i))
        .map_or(std::ptr::null(), |i| i as *const Instruction)
}

/// # Safety
/// `ins` is NULL or a handle of a live spec.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmac_name(ins: *const Instruction) -> *const c_char {
    // SAFETY: a handle of a live spec or NULL.
    unsafe { ins.as_ref() }.map_or(std::ptr::null(), |i| i.name.as_ptr())
}

/// # Safety
/// `ins` is NULL or a handle of a live spec.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmac_k(ins: *const Instruction) -> u32 {
    // SAFETY: a handle of a live spec or NULL.
    unsafe { ins.as_ref() }.map_or(0, |i| i.k as u32)
}

/// # Safety
/// `ins` is NULL or a handle of a live spec.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmac_scale_count(ins: *const Instruction) -> u32 {
    // SAFETY: a handle of a live spec or NULL.
    unsafe { ins.as_ref() }.map_or(0, |i| i.scales as u32)
}

/// # Safety
/// `ins` is NULL or a handle of a live spec.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmac_stored(ins: *const Instruction) -> u32 {
    // SAFETY: a handle of a live spec or NULL.
    unsafe { ins.as_ref() }.map_or(0, |i| i.stored as u32)
}

/// # Safety
/// `ins` is NULL or a handle of a live spec; `a` and `b` point to `k` values, `sa` and `sb`
/// to `scale_count` values (or are NULL when unscaled); `d` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmac_dot(
    ins: *const Instruction,
    c: u64,
    a: *const u64,
    b: *const u64,
    sa: *const u64,
    sb: *const u64,
    d: *mut u64,
) -> c_int {
    // SAFETY: the caller's promises, passed on; no positions.
    unsafe { dot(ins, c, (a, b), (sa, sb), std::ptr::null(), d) }
}

/// # Safety
/// `ins` is NULL or a handle of a live spec; `a` and `positions` point to `stored`
/// values, `b` to `k`, `sa` and `sb` to `scale_count` values (or are NULL when unscaled);
/// `d` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmac_sparse_dot(
    ins: *const Instruction,
    c: u64,
    a: *const u64,
    b: *const u64,
    sa: *const u64,
    sb: *const u64,
    positions: *const u32,
    d: *mut u64,
) -> c_int {
    if positions.is_null() {
        return MMAC_ERR_NULL;
    }
    // SAFETY: the caller's promises, passed on.
    unsafe { dot(ins, c, (a, b), (sa, sb), positions, d) }
}

/// `mmac_dot` (`positions` NULL) and `mmac_sparse_dot`: the operands checked against the
/// instruction (a sparse one needs positions, a dense one takes none), then one dot
/// product through its engine.
///
/// # Safety
/// As `mmac_sparse_dot`, `positions` NULL for a dense instruction.
unsafe fn dot(
    ins: *const Instruction,
    c: u64,
    (a, b): (*const u64, *const u64),
    (sa, sb): (*const u64, *const u64),
    positions: *const u32,
    d: *mut u64,
) -> c_int {
    guarded(MMAC_ERR_ENGINE, || {
        // SAFETY: a handle of a live spec or NULL.
        let Some(ins) = (unsafe { ins.as_ref() }) else {
            return MMAC_ERR_NULL;
        };
        if a.is_null() || b.is_null() || d.is_null() {
            return MMAC_ERR_NULL;
        }
        if ins.scales > 0 && (sa.is_null() || sb.is_null()) {
            return MMAC_ERR_SCALES;
        }
        if ins.sparse == positions.is_null() {
            set_error(if ins.sparse {
                format!(
                    "`{}` is sparse: call mmac_sparse_dot with the positions of a's stored elements",
                    ins.name.to_string_lossy()
                )
            } else {
                format!("`{}` is dense: call mmac_dot", ins.name.to_string_lossy())
            });
            return MMAC_ERR_ENGINE;
        }
        // SAFETY: the caller passes `stored` values in a (and positions), k in b,
        // scale_count in sa and sb.
        let (a, b) = unsafe {
            (
                std::slice::from_raw_parts(a, ins.stored),
                std::slice::from_raw_parts(b, ins.k),
            )
        };
        let positions: Vec<u64> = if positions.is_null() {
            vec![]
        } else {
            // SAFETY: as above.
            unsafe { std::slice::from_raw_parts(positions, ins.stored) }
                .iter()
                .map(|&p| u64::from(p))
                .collect()
        };
        let (sa, sb): (&[u64], &[u64]) = if ins.scales == 0 {
            (&[], &[])
        } else {
            // SAFETY: as above.
            unsafe {
                (
                    std::slice::from_raw_parts(sa, ins.scales),
                    std::slice::from_raw_parts(sb, ins.scales),
                )
            }
        };
        let ops = Operands { c, a, b, sa, sb };
        // SAFETY: a handle lives inside its spec, which is live.
        let spec = unsafe { &*ins.spec };
        let checked = spec.loaded.checked.get(ins.index);
        let result = Engine::prepared(checked, &ins.prepared).sparse_dot(&ops, &positions);
        match result {
            Ok(v) => {
                // SAFETY: d is writable.
                unsafe { *d = v };
                MMAC_OK
            }
            Err(e) => {
                set_error(e.to_string());
                MMAC_ERR_ENGINE
            }
        }
    })
}

/// The fragment of operand `a`, `b`, `c`, `d`, `meta`, `sa` or `sb` (a C string; the
/// metadata and scale factors with every selector 0), or the error text.
fn fragment(ins: &Instruction, operand: *const c_char) -> Result<Fragment, String> {
    if operand.is_null() {
        return Err("operand is NULL".into());
    }
    // SAFETY: a NUL-terminated string (checked non-NULL above).
    let name = unsafe { CStr::from_ptr(operand) }.to_string_lossy();
    let layout = ins.layout().as_ref().map_err(|e| e.to_string())?;
    match name.as_ref() {
        "a" => Ok((*layout.a).clone()),
        "b" => Ok((*layout.b).clone()),
        "c" => Ok((*layout.c).clone()),
        "d" => Ok((*layout.d).clone()),
        "meta" | "sa" | "sb" => {
            let extras = layout
                .extras(&Selectors::default())
                .map_err(|e| e.to_string())?;
            extras
                .into_iter()
                .find(|(n, _)| *n == name)
                .map(|(_, f)| f)
                .ok_or_else(|| format!("`{}` has no {name} operand", ins.name.to_string_lossy()))
        }
        other => Err(format!(
            "unknown operand {other:?}: one of a, b, c, d, meta, sa, sb"
        )),
    }
}

/// Lanes, registers or 32-bit words per lane of an operand's fragment.
fn fragment_size(
    ins: *const Instruction,
    operand: *const c_char,
    size: fn(&Fragment) -> usize,
    entry: &str,
) -> c_int {
    guarded(-1, || {
        // SAFETY: a handle of a live spec or NULL.
        let Some(ins) = (unsafe { ins.as_ref() }) else {
            set_error(format!("{entry}: ins is NULL"));
            return -1;
        };
        match fragment(ins, operand) {
            Ok(f) => {
                set_error("");
                c_int::try_from(size(&f)).unwrap_or(-1)
            }
            Err(e) => {
                set_error(format!("{entry}: {e}"));
                -1
            }
        }
    })
}

/// # Safety
/// `ins` is NULL or a handle of a live spec.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmac_fragment_lanes(ins: *const Instruction) -> c_int {
    fragment_size(ins, c"a".as_ptr(), |f| f.lanes, "mmac_fragment_lanes")
}

/// # Safety
/// `ins` is NULL or a handle of a live spec; `operand` NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmac_fragment_registers(
    ins: *const Instruction,
    operand: *const c_char,
) -> c_int {
    fragment_size(ins, operand, |f| f.registers, "mmac_fragment_registers")
}

/// # Safety
/// `ins` is NULL or a handle of a live spec; `operand` NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmac_fragment_words(
    ins: *const Instruction,
    operand: *const c_char,
) -> c_int {
    fragment_size(ins, operand, Fragment::words, "mmac_fragment_words")
}

/// # Safety
/// `ins` is NULL or a handle of a live spec; `operand` NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmac_operand_words(
    ins: *const Instruction,
    operand: *const c_char,
) -> c_int {
    fragment_size(ins, operand, Fragment::image_words, "mmac_operand_words")
}

/// # Safety
/// `ins` is NULL or a handle of a live spec; `a_regs`, `b_regs` and `c_regs` point to
/// `mmac_operand_words` of their operand readable words, as do `meta_regs` for a
/// sparse instruction and `sa_regs`, `sb_regs` for a block-scaled one (NULL otherwise);
/// `scale_selectors` is NULL or points to 4 readable words; `d_regs` points to lanes x
/// words of d writable words (or is NULL).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mmac_warp_mma(
    ins: *const Instruction,
    a_regs: *const u32,
    b_regs: *const u32,
    c_regs: *const u32,
    meta_regs: *const u32,
    selector: u32,
    sa_regs: *const u32,
    sb_regs: *const u32,
    scale_selectors: *const u32,
    d_regs: *mut u32,
) -> c_int {
    guarded(MMAC_ERR_ENGINE, || {
        // SAFETY: a handle of a live spec or NULL.
        let Some(ins) = (unsafe { ins.as_ref() }) else {
            set_error("mmac_warp_mma: ins is NULL");
            return MMAC_ERR_NULL;
        };
        if a_regs.is_null() || b_regs.is_null() || c_regs.is_null() || d_regs.is_null() {
            set_error("mmac_warp_mma: a_regs, b_regs, c_regs or d_regs is NULL");
            return MMAC_ERR_NULL;
        }
        let layout = match ins.layout() {
            Ok(l) => l,
            Err(e) => {
                set_error(e.to_string());
                return MMAC_ERR_LAYOUT;
            }
        };
        let scale = if scale_selectors.is_null() {
            [0; 4]
        } else {
            // SAFETY: the caller passes 4 readable words.
            unsafe { std::ptr::read_unaligned(scale_selectors.cast::<[u32; 4]>()) }
        };
        let sel = Selectors {
            sparsity: selector as usize,
            byte_id_a: scale[0] as usize,
            thread_id_a: scale[1] as usize,
            byte_id_b: scale[2] as usize,
            thread_id_b: scale[3] as usize,
        };
        let extras = match layout.extras(&sel) {
            Ok(x) => x,
            Err(e) => {
                set_error(format!("mmac_warp_mma: {e}"));
                return MMAC_ERR_ENGINE;
            }
        };
        let words = |name: &str| -> Option<usize> {
            let f = extras.iter().find(|(n, _)| *n == name)?;
            Some(f.1.image_words())
        };
        // SAFETY: the caller passes lanes x words of each operand it has.
        let image = |p: *const u32, n: usize| unsafe { std::slice::from_raw_parts(p, n) };
        let optional = |p: *const u32, name: &str| {
            // (given for an operand the instruction lacks: warp_mma says so; its length
            // is then not read)
            (!p.is_null()).then(|| image(p, words(name).unwrap_or(0)))
        };
        let inputs = WarpInputs {
            a: image(a_regs, layout.a.image_words()),
            b: image(b_regs, layout.b.image_words()),
            c: image(c_regs, layout.c.image_words()),
            meta: optional(meta_regs, "meta"),
            sa: optional(sa_regs, "sa"),
            sb: optional(sb_regs, "sb"),
        };
        let checked = ins.spec().loaded.checked.get(ins.index);
        let engine = Engine::prepared(checked, &ins.prepared);
        match fragments::warp_mma(&engine, layout, &inputs, &sel) {
            Ok(d) => {
                // SAFETY: d_regs holds lanes x words of d, the length of the image.
                unsafe { std::ptr::copy_nonoverlapping(d.as_ptr(), d_regs, d.len()) };
                set_error("");
                MMAC_OK
            }
            Err(e) => {
                set_error(e.to_string());
                MMAC_ERR_ENGINE
            }
        }
    })
}
