//! The JIT's safety contract, one regression test per way it was broken: batch strides
//! whose address arithmetic would wrap are refused; no load behind the special-value guard
//! may be hoisted above it; the host's floating-point control state (FTZ/DAZ, rounding
//! mode) cannot change a kernel's bits; a checked spec whose alignment sums nothing
//! (GTR-FDPA with one product per step) compiles instead of panicking; and an engine
//! prepared for one instruction never runs another's kernel. A compiled spec is shared
//! between threads, and the batch entry's groups of four records read no record past the
//! last. (An instruction paired with another's validation info cannot be written: the
//! engines take a `Checked`, which only the validator builds.)

use mmac_compiler::engine::{EvalError, Operands};
use mmac_compiler::interp;
use mmac_compiler::jit;
use mmac_compiler::random::{Records, Rng};
use mmac_compiler::{Checked, CheckedSpec};
use std::path::Path;

fn load(name: &str) -> CheckedSpec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    mmac_compiler::compile(name, &text).unwrap_or_else(|d| panic!("{}", d.render_plain(100)))
}

fn find<'v>(v: &'v CheckedSpec, name: &str) -> Checked<'v> {
    v.find(name).expect("instruction")
}

/// `(n - 1) * stride + len` wrapped in release builds: 17 records 9 * 2^60 elements apart
/// passed the bound check and read far out of bounds. Now the overflow is refused.
#[test]
fn batch_strides_that_overflow_are_refused() {
    let v = load("specs/hopper.mma");
    let checked = find(&v, "mma.m16n8k16.f32.f16.f16.f32");
    let inst = checked.instruction();
    let compiled = jit::compile_instruction(checked).unwrap();
    let kernel = compiled.kernel(&inst.name).unwrap();
    let k = inst.k();
    let c = vec![0u64; 17];
    let a = vec![0u64; k];
    let b = vec![0u64; 17 * k];
    let mut d = vec![0u64; 17];
    for stride in [9usize << 60, usize::MAX, usize::MAX / 8 + 1] {
        let r = kernel.batch_strided(&c, (&a, stride), (&b, k), (&[], 0), (&[], 0), &mut d);
        assert!(
            matches!(r, Err(EvalError::Stride { operand: "a", .. })),
            "stride {stride}: {r:?}"
        );
    }
    // a short operand is still a count error, and a sound stride (0: one shared row) runs
    let r = kernel.batch_strided(&c, (&a, k), (&b, k), (&[], 0), (&[], 0), &mut d);
    assert!(
        matches!(r, Err(EvalError::OperandCount { operand: "a", .. })),
        "{r:?}"
    );
    kernel
        .batch_strided(&c, (&a, 0), (&b, k), (&[], 0), (&[], 0), &mut d)
        .unwrap();
}

/// The blocks of a CLIF function reachable only through cold blocks (the special-value
/// path: the cold branch, and the loop it runs): the greatest set of cold blocks and
/// blocks all of whose predecessors are in the set.
fn guarded_blocks(text: &str) -> std::collections::HashMap<String, Vec<String>> {
    use std::collections::{HashMap, HashSet};
    let mut blocks: Vec<(String, bool, Vec<String>)> = vec![];
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("block") && t.ends_with(':') {
            let name: String = t.chars().take_while(|c| c.is_alphanumeric()).collect();
            blocks.push((name, t.contains(" cold"), vec![]));
        } else if let Some(b) = blocks.last_mut() {
            b.2.push(t.to_string());
        }
    }
    let mut preds: HashMap<String, HashSet<String>> = HashMap::new();
    for (name, _, lines) in &blocks {
        for l in lines
            .iter()
            .filter(|l| l.starts_with("jump") || l.starts_with("brif"))
        {
            for word in l.split(|c: char| !c.is_alphanumeric()) {
                if word.starts_with("block") {
                    preds
                        .entry(word.to_string())
                        .or_default()
                        .insert(name.clone());
                }
            }
        }
    }
    let entry = blocks.first().map(|b| b.0.clone()).unwrap_or_default();
    let mut guarded: HashSet<String> = blocks
        .iter()
        .filter(|b| b.0 != entry)
        .map(|b| b.0.clone())
        .collect();
    loop {
        let drop: Vec<String> = blocks
            .iter()
            .filter(|(name, cold, _)| {
                guarded.contains(name)
                    && !cold
                    && preds
                        .get(name)
                        .is_none_or(|p| p.is_empty() || p.iter().any(|x| !guarded.contains(x)))
            })
            .map(|b| b.0.clone())
            .collect();
        if drop.is_empty() {
            break;
        }
        for d in drop {
            guarded.remove(&d);
        }
    }
    blocks
        .into_iter()
        .filter(|b| guarded.contains(&b.0))
        .map(|(name, _, lines)| (name, lines))
        .collect()
}

/// Loads on the special-value path (behind the guard: the cold branch, the loop over the
/// products and the scale factors after it) must not carry `can_move`, which would let
/// them be hoisted above the guard.
#[test]
fn no_movable_load_behind_a_guard() {
    let mut guarded_loads = 0;
    for spec in [
        "specs/rtx_blackwell.mma",
        "specs/cdna3.mma",
        "specs/hopper.mma",
    ] {
        let v = load(spec);
        let options = jit::Options {
            emit_clif: true,
            ..jit::Options::default()
        };
        let compiled = jit::compile_with(&v, options).unwrap();
        for (label, text) in compiled.clif() {
            for (block, lines) in guarded_blocks(text) {
                for l in lines.iter().filter(|l| l.contains(" = load")) {
                    guarded_loads += 1;
                    assert!(
                        !l.contains("can_move"),
                        "{spec} {label} {block}: a movable load behind the guard: {l}"
                    );
                }
            }
        }
    }
    assert!(
        guarded_loads > 100,
        "only {guarded_loads} loads on special paths"
    );
}

#[cfg(target_arch = "x86_64")]
mod fp_state {
    //! MXCSR access for the test: set FTZ/DAZ and a rounding mode as an embedder might.

    pub fn read() -> u32 {
        let mut csr: u32 = 0;
        // SAFETY: stmxcsr stores MXCSR to a valid u32.
        unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack)) };
        csr
    }

    pub fn write(csr: u32) {
        // SAFETY: a valid MXCSR value (only documented control bits set).
        unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack)) };
    }

    pub const FTZ: u32 = 1 << 15;
    pub const DAZ: u32 = 1 << 6;
    pub const ROUND_TOWARD_ZERO: u32 = 3 << 13;
}

/// An embedder that sets flush-to-zero, denormals-are-zero and round-toward-zero (ML
/// runtimes set FTZ/DAZ) does not change a kernel's bits, and gets its state back.
#[cfg(target_arch = "x86_64")]
#[test]
fn host_fp_state_does_not_change_the_bits() {
    let cases: &[(&str, &str)] = &[
        // sequential f32 FMA: subnormal products and sums, native fma
        ("specs/cdna3.mma", "v_mfma_f32_16x16x4_f32"),
        // fused f16 products into f32 with subnormal c: the host encodes f32 results
        ("specs/hopper.mma", "mma.m16n8k16.f32.f16.f16.f32"),
        // f64 FMA
        ("specs/cdna2.mma", "v_mfma_f64_16x16x4f64"),
        // composed: f32 additions of subnormal sums on the processor, and into f16
        ("specs/hopper.mma", "mma.m8n8k4.f32.f16.f16.f32"),
        ("specs/hopper.mma", "mma.m8n8k4.f16.f16.f16.f16"),
    ];
    let mut rng = Rng::new(42);
    for (spec, name) in cases {
        let v = load(spec);
        let checked = find(&v, name);
        let inst = checked.instruction();
        let compiled = jit::compile_instruction(checked).unwrap();
        let kernel = compiled.kernel(name).unwrap();
        let ar = &inst.arithmetic;
        let c_bits = ar.c.storage_bits();
        for case in 0..400 {
            // tiny values: subnormal c (exponent field 0) and products at the bottom
            let tiny = |rng: &mut Rng, bits: u32, man: u32| -> u64 {
                let sign = (rng.next_u64() & 1) << (bits - 1);
                let e = rng.below(3) as u64;
                sign | (e << man) | (rng.next_u64() & ((1 << man) - 1))
            };
            let man = |f: &mmac_compiler::format::Format| f.as_float().unwrap().mantissa_bits;
            let a: Vec<u64> = (0..inst.k())
                .map(|_| tiny(&mut rng, ar.a.storage_bits(), man(&ar.a)))
                .collect();
            let b: Vec<u64> = (0..inst.k())
                .map(|i| {
                    if case % 2 == 0 && i > 0 {
                        0
                    } else {
                        tiny(&mut rng, ar.b.storage_bits(), man(&ar.b))
                    }
                })
                .collect();
            let c = tiny(&mut rng, c_bits, man(&ar.c));
            let ops = Operands {
                c,
                a: &a,
                b: &b,
                sa: &[],
                sb: &[],
            };
            let want = interp::run(checked, &ops).unwrap();
            let saved = fp_state::read();
            let hostile = saved | fp_state::FTZ | fp_state::DAZ | fp_state::ROUND_TOWARD_ZERO;
            fp_state::write(hostile);
            let got = kernel.dot(&ops);
            let mut batch = [0u64; 1];
            let batched = kernel.batch(&[c], &a, &b, &[], &[], &mut batch);
            let after = fp_state::read();
            fp_state::write(saved);
            assert_eq!(
                after & 0xffc0,
                hostile & 0xffc0,
                "the caller's state is restored"
            );
            assert_eq!(
                got.unwrap(),
                want,
                "{name}: c={c:x} a={a:x?} b={b:x?} under FTZ/DAZ/RZ"
            );
            batched.unwrap();
            assert_eq!(batch[0], want, "{name}: batch entry under FTZ/DAZ/RZ");
        }
    }
}

/// GTR-FDPA and TR-FDPA chained after every product: the odd alignment of each step is
/// empty. The JIT panicked ("every alignment has a term") on this checked spec; now it
/// compiles, and agrees with the interpreter.
#[test]
fn one_product_steps_compile_and_agree() {
    let text = "arch demo\nimport std\n\
        instruction fp8.l1 { shape 16 x 16 x 32\n types a = fp8, b = bf8, c = f32, d = f32\n uses gtr_fdpa(F = 24, F2 = 31, L = 1) }\n\
        instruction f16.l1 { shape 16 x 16 x 4\n types a = f16, b = f16, c = f32, d = f32\n uses tr_fdpa(F = 24, F2 = 31, L = 1) }\n";
    let v = mmac_compiler::compile("l1.mma", text).unwrap();
    let compiled = jit::compile(&v).unwrap();
    assert!(compiled.refused().is_empty(), "{:?}", compiled.refused());
    for checked in v.instructions() {
        let inst = checked.instruction();
        let kernel = compiled.kernel(&inst.name).unwrap();
        let rec = Records::random(inst, 500);
        let mut d = vec![0u64; rec.n];
        kernel
            .batch(&rec.c, &rec.a, &rec.b, &rec.sa, &rec.sb, &mut d)
            .unwrap();
        for (i, &got) in d.iter().enumerate() {
            let ops = rec.operands(i);
            assert_eq!(got, interp::run(checked, &ops).unwrap(), "{}", inst.name);
        }
    }
}

/// A compiled spec is `Send + Sync`: one cache of kernels serves every thread of an
/// embedder (the Python package keeps one per instruction). Threads that look kernels up
/// in one shared spec at the same time get the interpreter's bits.
#[test]
fn a_compiled_spec_is_shared_between_threads() {
    fn shareable<T: Send + Sync>(_: &T) {}
    let v = load("specs/hopper.mma");
    let checked = find(&v, "mma.m16n8k16.f32.f16.f16.f32");
    let inst = checked.instruction();
    let compiled = jit::compile_instruction(checked).unwrap();
    shareable(&compiled);
    let rec = Records::random(inst, 300);
    let want: Vec<u64> = (0..rec.n)
        .map(|i| {
            let ops = rec.operands(i);
            interp::run(checked, &ops).unwrap()
        })
        .collect();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..20 {
                    let kernel = compiled.kernel(&inst.name).unwrap();
                    let mut d = vec![0u64; rec.n];
                    kernel
                        .batch(&rec.c, &rec.a, &rec.b, &rec.sa, &rec.sb, &mut d)
                        .unwrap();
                    assert_eq!(d, want);
                }
            });
        }
    });
}

/// The host's page size.
#[cfg(unix)]
fn page() -> usize {
    // SAFETY: sysconf reads a system constant.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// `len` u64s ending exactly at an inaccessible page: any read past the slice faults.
#[cfg(unix)]
struct Guarded {
    base: *mut libc::c_void,
    size: usize,
    len: usize,
}

#[cfg(unix)]
impl Guarded {
    fn new(values: &[u64]) -> Guarded {
        let (page, bytes) = (page(), values.len() * 8);
        let size = bytes.div_ceil(page) * page + page;
        // SAFETY: a fresh private anonymous mapping; its last page is made inaccessible
        // and the values are copied just below it.
        let base = unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(base, libc::MAP_FAILED);
            let guard = (base as *mut u8).add(size - page);
            assert_eq!(libc::mprotect(guard as *mut _, page, libc::PROT_NONE), 0);
            let at = guard.sub(bytes) as *mut u64;
            std::ptr::copy_nonoverlapping(values.as_ptr(), at, values.len());
            base
        };
        Guarded {
            base,
            size,
            len: values.len(),
        }
    }
    fn slice(&self) -> &[u64] {
        // SAFETY: the values copied in `new`, below the guard page, live as long as self.
        unsafe {
            let end = (self.base as *const u8).add(self.size - page());
            std::slice::from_raw_parts(end.sub(self.len * 8) as *const u64, self.len)
        }
    }
}

#[cfg(unix)]
impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `new`.
        unsafe { libc::munmap(self.base, self.size) };
    }
}

/// The batch entry of a kernel with record lanes computes four records at a time while
/// four are left; its loads may be placed by Cranelift (`can_move`) but not above the
/// loop's bound check. Operands ending at an inaccessible page, in batches of 1 to 9
/// records (no group, groups with 1-3 records left over), fault if a group reads past the
/// last record; the results agree with the dot entry.
#[cfg(unix)]
#[test]
fn record_lanes_read_no_record_past_the_last() {
    let v = load("specs/hopper.mma");
    let name = "mma.m16n8k16.f32.f16.f16.f32";
    let options = jit::Options {
        emit_clif: true,
        ..jit::Options::default()
    };
    let compiled = jit::compile_with(&v, options).unwrap();
    let batch = format!("{name} (batch");
    assert!(
        compiled.clif().iter().any(|(l, _)| l.starts_with(&batch)),
        "{name} takes record lanes"
    );
    let inst = find(&v, name).instruction();
    let kernel = compiled.kernel(name).unwrap();
    for n in 1..=9 {
        let rec = Records::random(inst, n);
        let (c, a, b) = (
            Guarded::new(&rec.c),
            Guarded::new(&rec.a),
            Guarded::new(&rec.b),
        );
        let mut d = vec![0u64; n];
        kernel
            .batch(c.slice(), a.slice(), b.slice(), &[], &[], &mut d)
            .unwrap();
        for (i, &got) in d.iter().enumerate() {
            let ops = rec.operands(i);
            assert_eq!(got, kernel.dot(&ops).unwrap(), "record {i} of {n}");
        }
    }
}

/// NaN and Inf became +0 in the JIT when products of 8-bit formats (decoded through
/// tables, whose special entries carried a garbage exponent) met an alignment rounded
/// other than toward zero (the packed alignment, whose special bit the garbage overflowed):
/// `inf * 1` gave `d = 0`. Every 8-bit format with special codes, every alignment rounding,
/// Inf and NaN in every product position with finite and special partners: the quick
/// and the optimised kernels, dot and batch entries, equal the interpreter.
#[test]
fn specials_of_table_decoded_products_survive_every_alignment_rounding() {
    use mmac_compiler::format::{Decoded, Format};
    let formats = ["e4m3", "e5m2", "fp8", "bf8"];
    let modes = ["nearest_even", "nearest_away", "down", "up", "toward_zero"];
    let mut text = String::from("arch t \"specials\"\nimport std\n");
    for mode in modes {
        text += &format!(
            "pipeline p_{mode}(F) {{\n  multiply exact\n  align products, c to max exponent keep F bits round {mode}\n  normalize to out round nearest_even\n  nan canonical\n}}\n"
        );
    }
    for fa in formats {
        for fb in formats {
            for mode in modes {
                text += &format!(
                    "instruction dp.{mode}.{fa}.{fb} {{\n  shape 1 x 1 x 4\n  types a = {fa}, b = {fb}, c = f32, d = f32\n  uses p_{mode}(F = 24)\n}}\n"
                );
            }
        }
    }
    let v = mmac_compiler::compile("specials.mma", &text)
        .unwrap_or_else(|d| panic!("{}", d.render_plain(100)));
    let specials = |f: &Format| -> Vec<u64> {
        (0..256u64)
            .filter(|&x| !matches!(f.decode(x), Decoded::Finite(_)))
            .collect()
    };
    let mut rng = Rng::new(24);
    let mut cases = 0;
    for quick in [true, false] {
        let options = jit::Options {
            quick,
            ..jit::Options::default()
        };
        let compiled = jit::compile_with(&v, options).unwrap();
        for checked in v.instructions() {
            let inst = checked.instruction();
            let kernel = compiled.kernel(&inst.name).unwrap();
            let (fa, fb) = (&inst.arithmetic.a, &inst.arithmetic.b);
            let (sa, sb) = (specials(fa), specials(fb));
            let one = |f: &Format| {
                (0..256u64)
                    .find(|&x| f.decode(x).describe() == "1")
                    .unwrap()
            };
            let (mut cs, mut avs, mut bvs, mut want) = (vec![], vec![], vec![], vec![]);
            for pos in 0..4 {
                for (&s, partner) in sa
                    .iter()
                    .zip([one(fb), rng.next_u64() & 0xff, sb[0]].iter().cycle())
                {
                    let mut a: Vec<u64> = (0..4).map(|_| rng.next_u64() & 0x3f).collect();
                    let mut b: Vec<u64> = (0..4).map(|_| rng.next_u64() & 0x3f).collect();
                    a[pos] = s;
                    b[pos] = *partner;
                    let c = [0, 0x3f80_0000, 0xff80_0000][rng.below(3)];
                    let ops = Operands {
                        c,
                        a: &a,
                        b: &b,
                        sa: &[],
                        sb: &[],
                    };
                    let w = interp::run(checked, &ops).unwrap();
                    let got = kernel.dot(&ops).unwrap();
                    assert_eq!(
                        got, w,
                        "{} (quick {quick}): c={c:x} a={a:x?} b={b:x?}: jit {got:x}, interp {w:x}",
                        inst.name
                    );
                    cs.push(c);
                    avs.extend(a);
                    bvs.extend(b);
                    want.push(w);
                    cases += 1;
                }
            }
            let mut d = vec![0; cs.len()];
            kernel.batch(&cs, &avs, &bvs, &[], &[], &mut d).unwrap();
            assert_eq!(d, want, "{} (quick {quick}): the batch entry", inst.name);
        }
    }
    assert!(cases > 1000, "{cases}");
}

/// With hundreds of threads alive (their stacks, and malloc arenas whose 64 MiB alignment
/// leaves holes high in the address space), the functions of one module were mapped one
/// by one into holes more than 2 GiB apart, and cranelift-jit panicked linking a 32-bit
/// PC-relative call (`gemm --threads 800`). Every module now lives in one reservation:
/// compiling while 800 threads exist links and runs.
#[test]
fn many_threads_keep_a_module_in_reach() {
    let v = load("specs/hopper.mma");
    let checked = find(&v, "mma.m16n8k16.f32.f16.f16.f32");
    let inst = checked.instruction();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let mut threads = vec![];
    for _ in 0..800 {
        let rx = rx.clone();
        let ready = ready_tx.clone();
        let t = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                // small heap allocations of its own give the thread a malloc arena (glibc
                // reserves arenas aligned to 64 MiB, leaving holes in the address space)
                let v: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 100]).collect();
                ready.send(()).unwrap();
                let _ = rx.lock().map(|r| r.recv());
                v.len()
            });
        match t {
            Ok(t) => threads.push(t),
            Err(_) => break, // a machine that allows fewer threads: as many as it allows
        }
    }
    for _ in 0..threads.len() {
        ready_rx.recv().unwrap();
    }
    for _ in 0..6 {
        let compiled = jit::compile_instruction(checked).unwrap();
        let k = compiled.kernel(&inst.name).unwrap();
        let (a, b) = (vec![0x3c00u64; 16], vec![0x3c00u64; 16]);
        let ops = Operands {
            c: 0,
            a: &a,
            b: &b,
            sa: &[],
            sb: &[],
        };
        assert_eq!(k.dot(&ops).unwrap(), 0x4180_0000);
    }
    drop(tx);
    for t in threads {
        let _ = t.join();
    }
}

/// What the facade prepared for one instruction runs only that instruction: given an
/// instruction of the same name with another arithmetic (Ampere's F = 24 against
/// Hopper's 25), the engine is the interpreter, saying why, and computes Ampere's result.
#[test]
fn a_prepared_engine_runs_only_its_own_instruction() {
    use mmac_compiler::engine::{Choice, Engine};
    let name = "mma.m16n8k16.f32.f16.f16.f32";
    let (hopper, ampere) = (load("specs/hopper.mma"), load("specs/ampere.mma"));
    let prepared = Engine::prepare(find(&hopper, name), Choice::QUICK);
    assert!(prepared.is_jit());
    // the same instruction, and an equal one in another copy of the spec, take the kernel
    assert!(Engine::prepared(find(&hopper, name), &prepared).is_jit());
    let copy = hopper.clone();
    assert!(Engine::prepared(find(&copy, name), &prepared).is_jit());
    let engine = Engine::prepared(find(&ampere, name), &prepared);
    assert!(!engine.is_jit());
    assert!(
        engine
            .fallback()
            .is_some_and(|why| why.contains("prepared for")),
        "{:?}",
        engine.fallback()
    );
    // 1 - 2^-25: Hopper keeps the -2^-25 term (F = 25) and d is 1 - 2^-24 toward
    // zero; Ampere truncates it away (F = 24) and d is 1
    let (one, two_m12, minus_two_m13) = (0x3c00u64, 0x0c00u64, 0x8800u64);
    let mut a = vec![0u64; 16];
    let mut b = vec![0u64; 16];
    (a[0], b[0], a[1], b[1]) = (one, one, two_m12, minus_two_m13);
    let ops = Operands {
        c: 0,
        a: &a,
        b: &b,
        sa: &[],
        sb: &[],
    };
    let want = interp::run(find(&ampere, name), &ops).unwrap();
    assert_eq!(engine.dot(&ops).unwrap(), want);
    assert_ne!(
        Engine::prepared(find(&hopper, name), &prepared)
            .dot(&ops)
            .unwrap(),
        want,
        "the probe does not tell Hopper from Ampere"
    );
}
