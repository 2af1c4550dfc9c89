//! `mmac compile --emit obj|lib`: objects with a C API, compiled and linked by the system C
//! compiler (`cc`, or $CC) and run the way an architect's C simulator would call them:
//! - one spec of every pipeline family (fused, sequential FMA, integer, block-scaled)
//!   reproduces its committed vectors through `dot` and `batch`, also under a hostile
//!   floating-point control state (FTZ, DAZ, round toward zero) that every call must
//!   leave as it found it, and with garbage above every operand's storage width;
//! - the `mma` entry computes every element of D as the dot product of its row and column
//!   (checked against the reference interpreter), for an unscaled and a block-scaled
//!   instruction;
//! - every spec in `specs/` and `specs/examples/` compiles to an object whose header
//!   compiles as C and as C++ and whose descriptors agree with `mmac list`;
//! - two objects link into one program; a shared library has the same API;
//! - the control-register helpers are the instructions they claim to be (objdump).

mod support;

use support::{mmac_in, root, text};

use mmac_compiler::interp;
use mmac_compiler::random::Rng;
use mmac_runtime::inputs::Input;
use mmac_runtime::specs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `mmac compile SPEC --emit obj -o DIR/ARCH.o` (the spec path is relative to the
/// repository root); returns the object's path.
fn object(spec: &str, arch: &str, dir: &Path) -> PathBuf {
    let out = dir.join(format!("{arch}.o"));
    let o = mmac_in(
        dir,
        &[
            "compile",
            root().join(spec).to_str().unwrap(),
            "--emit",
            "obj",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(dir.join(format!("{arch}.h")).is_file());
    out
}

fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".into())
}

/// Compile and link a C program; returns the executable.
fn build(dir: &Path, exe: &str, args: &[&str]) -> PathBuf {
    let out = dir.join(exe);
    let o = Command::new(cc())
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-I"])
        .arg(dir)
        .args(args)
        .arg("-o")
        .arg(&out)
        .arg("-lm")
        .current_dir(dir)
        .output()
        .expect("a C compiler (cc, or $CC)");
    assert!(o.status.success(), "{}", text(&o.stderr));
    out
}

/// The check_vectors driver for the object of `arch` (linked from `link`).
fn vector_checker(dir: &Path, arch: &str, link: &[&str]) -> PathBuf {
    let header = format!("-DMMAC_HEADER=\"{arch}.h\"");
    let prefix = format!("-DMMAC_PREFIX=mmac_{arch}_");
    let src = root().join("tests/c/check_vectors.c");
    let mut args = vec![header.as_str(), prefix.as_str(), src.to_str().unwrap()];
    args.extend(link);
    build(dir, &format!("check_{arch}"), &args)
}

fn mmv_files(arch: &str) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(root().join("tests/vectors").join(arch))
        .unwrap()
        .map(|e| e.unwrap().path().to_string_lossy().into_owned())
        .filter(|p| p.ends_with(".mmv"))
        .collect();
    files.sort();
    files
}

/// Run the checker over every committed vector file of `arch`, plainly and with the
/// hostile floating-point state and high garbage bits.
fn check_vectors(exe: &Path, arch: &str) {
    let files = mmv_files(arch);
    assert!(!files.is_empty());
    for flags in [&[][..], &["--hostile-fp", "--high-bits"][..]] {
        let o = Command::new(exe).args(flags).args(&files).output().unwrap();
        let out = text(&o.stdout);
        assert!(o.status.success(), "{arch} {flags:?}:\n{out}");
        assert_eq!(
            out.lines().last(),
            Some(format!("0 of {} files failed", files.len()).as_str()),
            "{out}"
        );
        assert_eq!(
            out.lines().filter(|l| l.starts_with("PASS ")).count(),
            files.len()
        );
    }
}

#[test]
fn one_spec_of_every_pipeline_family_reproduces_its_vectors() {
    let dir = tempfile::tempdir().unwrap();
    for (spec, arch, algorithm) in [
        ("specs/hopper.mma", "hopper", "t_fdpa"),  // fused
        ("specs/cdna3.mma", "cdna3", "fma"),       // sequential FMA
        ("specs/ampere.mma", "ampere", "int_mma"), // integer
        ("specs/rtx_blackwell.mma", "rtx_blackwell", "gst_fdpa"), // block-scaled
    ] {
        let o = object(spec, arch, dir.path());
        let header = std::fs::read_to_string(dir.path().join(format!("{arch}.h"))).unwrap();
        assert!(
            header.contains(&format!("; {algorithm};")),
            "{arch}: {algorithm}"
        );
        let exe = vector_checker(dir.path(), arch, &[o.to_str().unwrap()]);
        check_vectors(&exe, arch);
    }
}

/// Sparse instructions through `sparse_dot`: vectors `mmac gen` writes (with `pos=`) for
/// every pattern and both walks pass, `dot` and `batch` refuse the instruction, and
/// positions out of the pattern are `MMAC_ERR_PATTERN`.
#[test]
fn sparse_instructions_take_their_positions() {
    let dir = tempfile::tempdir().unwrap();
    for (spec, arch, names) in [
        (
            "specs/ampere.mma",
            "ampere",
            &[
                "mma.sp.m16n8k32.f32.f16.f16.f32",
                "mma.sp.m16n8k16.f32.tf32.tf32.f32",
                "mma.sp.m16n8k128.satfinite.s32.s4.u4.s32",
            ][..],
        ),
        (
            "specs/examples/sparse_over_columns.mma",
            "ampere_sparse_columns",
            &["mma.sp.m16n8k32.f16.f16.f16.f16"][..],
        ),
        (
            "specs/rtx_blackwell.mma",
            "rtx_blackwell",
            &["mma.sp.block_scale.m16n8k128.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3"][..],
        ),
    ] {
        let o = object(spec, arch, dir.path());
        let exe = vector_checker(dir.path(), arch, &[o.to_str().unwrap()]);
        let mut files = vec![];
        for (i, name) in names.iter().enumerate() {
            let file = dir.path().join(format!("{arch}_{i}.mmv"));
            let f = file.to_str().unwrap();
            let out = mmac_in(
                dir.path(),
                &[
                    "gen",
                    root().join(spec).to_str().unwrap(),
                    "--instr",
                    name,
                    "-n",
                    "40",
                    "-o",
                    f,
                ],
            );
            assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
            files.push(f.to_string());
        }
        let run = Command::new(&exe).args(&files).output().unwrap();
        let out = text(&run.stdout);
        assert!(run.status.success(), "{arch}:\n{out}");
        assert_eq!(
            out.lines().filter(|l| l.starts_with("PASS ")).count(),
            files.len(),
            "{out}"
        );
        // the first case's second position made equal to its first
        let text0 = std::fs::read_to_string(&files[0]).unwrap();
        let at = text0.find("\nc=").unwrap();
        let at = at + text0[at..].find(" pos=").unwrap() + 5;
        let first = at + text0[at..].find(',').unwrap();
        let second = first + 1 + text0[first + 1..].find(',').unwrap();
        let broken = format!(
            "{}{}{}",
            &text0[..first + 1],
            &text0[at..first],
            &text0[second..]
        );
        let broken_file = dir.path().join("broken.mmv");
        std::fs::write(&broken_file, broken).unwrap();
        let run = Command::new(&exe).arg(&broken_file).output().unwrap();
        let out = text(&run.stdout);
        assert!(!run.status.success(), "{out}");
        assert!(out.contains("dot returned 7 (the positions break"), "{out}");
    }
}

#[test]
fn the_scaled_family_takes_scale_factors() {
    let dir = tempfile::tempdir().unwrap();
    let o = object("specs/blackwell.mma", "blackwell", dir.path());
    let exe = vector_checker(dir.path(), "blackwell", &[o.to_str().unwrap()]);
    let scaled: Vec<String> = mmv_files("blackwell")
        .into_iter()
        .filter(|f| f.contains("block_scale"))
        .collect();
    assert!(scaled.len() > 5);
    let o = Command::new(&exe).args(&scaled).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stdout));
}

/// A C program calling the `mma` entry on random encodings; every element of D must be
/// the reference interpreter's dot product of its row of A and column of B.
fn check_mma(spec: &str, arch: &str, name: &str, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let o = object(spec, arch, dir.path());
    let header = format!("-DMMAC_HEADER=\"{arch}.h\"");
    let prefix = format!("-DMMAC_PREFIX=mmac_{arch}_");
    let src = root().join("tests/c/mma_check.c");
    let exe = build(
        dir.path(),
        "mma_check",
        &[&header, &prefix, src.to_str().unwrap(), o.to_str().unwrap()],
    );
    let loaded = specs::load_file(&root().join(spec)).unwrap();
    let checked = loaded.instruction(name).unwrap();
    let inst = checked.instruction();
    let ar = &inst.arithmetic;
    let (m, n, k, s) = (
        inst.m as usize,
        inst.n as usize,
        inst.k(),
        inst.scale_count(),
    );
    let mut rng = Rng::new(seed);
    let mut draw = |bits: u32, count: usize| -> Vec<u64> {
        (0..count)
            .map(|_| rng.next_u64() & ((1u64 << bits) - 1))
            .collect()
    };
    let a = draw(ar.a.storage_bits(), m * k);
    let b = draw(ar.b.storage_bits(), k * n);
    let c = draw(ar.c.storage_bits(), m * n);
    let scale_bits = ar.scale.as_ref().map_or(1, |x| x.format.storage_bits());
    let sa = draw(scale_bits, m * s);
    let sb = draw(scale_bits, n * s);
    let mut stdin = format!("{name}\n");
    for v in a.iter().chain(&b).chain(&c).chain(&sa).chain(&sb) {
        stdin.push_str(&format!("{v:x} "));
    }
    let (ok, out, err) = run_with_input(&exe, &[], &stdin);
    assert!(ok, "{err}");
    let d: Vec<u64> = out
        .lines()
        .map(|l| u64::from_str_radix(l, 16).unwrap())
        .collect();
    assert_eq!(d.len(), m * n);
    for i in 0..m {
        for j in 0..n {
            let input = Input {
                c: c[i * n + j],
                a: a[i * k..(i + 1) * k].to_vec(),
                b: (0..k).map(|x| b[x * n + j]).collect(),
                sa: sa[i * s..(i + 1) * s].to_vec(),
                sb: sb[j * s..(j + 1) * s].to_vec(),
            };
            let want = interp::run(checked, &input.operands()).unwrap();
            let nan = |v: u64| ar.d.decode(v).is_nan();
            assert!(
                d[i * n + j] == want || (nan(want) && nan(d[i * n + j])),
                "{name} D[{i}][{j}] = {:x}, the interpreter gives {want:x}",
                d[i * n + j]
            );
        }
    }
}

#[test]
fn mma_entry_computes_every_element() {
    check_mma(
        "specs/hopper.mma",
        "hopper",
        "mma.m16n8k16.f32.f16.f16.f32",
        1,
    );
    check_mma(
        "specs/blackwell.mma",
        "blackwell",
        "tcgen05.mma.block_scale.m64n8k32.kind::mxf8f6f4.block32.f32.e5m2.e2m1.ue8m0",
        2,
    );
}

#[test]
fn every_spec_compiles_to_an_object_that_links() {
    let dir = tempfile::tempdir().unwrap();
    let mut loaded = specs::load_all(&root().join("specs")).0;
    loaded.extend(specs::load_all(&root().join("specs/examples")).0);
    // (the prelude declares pipelines, no instructions)
    loaded.retain(|l| !l.spec().instructions.is_empty());
    assert!(loaded.len() >= 15);
    let gxx = Command::new("g++").arg("--version").output().is_ok();
    for l in &loaded {
        let arch = &l.spec().arch;
        let spec = l.path.strip_prefix(root()).unwrap().to_str().unwrap();
        let o = object(spec, arch, dir.path());
        // a program that walks the descriptors and prints each name with its shape
        let main = dir.path().join(format!("{arch}_list.c"));
        std::fs::write(
            &main,
            format!(
                "#include <stdio.h>\n#include \"{arch}.h\"\n\
                 int main(void) {{\n\
                 \x20   for (size_t i = 0; i < mmac_{arch}_count(); i++) {{\n\
                 \x20       const mmac_{arch}_instruction *ins = mmac_{arch}_at(i);\n\
                 \x20       if (mmac_{arch}_find(ins->name) != ins) return 1;\n\
                 \x20       printf(\"%s m%un%uk%u %s\\n\", ins->name, ins->m, ins->n, ins->k, ins->evidence);\n\
                 \x20   }}\n\
                 \x20   return mmac_{arch}_at(mmac_{arch}_count()) != NULL;\n\
                 }}\n"
            ),
        )
        .unwrap();
        let exe = build(
            dir.path(),
            &format!("{arch}_list"),
            &[main.to_str().unwrap(), o.to_str().unwrap()],
        );
        let run = Command::new(&exe).output().unwrap();
        assert!(run.status.success(), "{arch}");
        let listed: Vec<String> = text(&run.stdout).lines().map(str::to_string).collect();
        let header = std::fs::read_to_string(dir.path().join(format!("{arch}.h"))).unwrap();
        // every instruction is in the object, or the header lists it as absent
        for inst in &l.spec().instructions {
            let line = format!(
                "{} m{}n{}k{} {}",
                inst.name,
                inst.m,
                inst.n,
                inst.shape().k,
                inst.provenance.evidence_words()
            );
            let absent = header
                .split_once("find returns NULL for these.")
                .is_some_and(|(_, list)| list.contains(&format!(" *   {}\n", inst.name)));
            assert!(listed.contains(&line) || absent, "{arch}: {line}");
        }
        if gxx {
            let o = Command::new("g++")
                .args([
                    "-std=c++11",
                    "-fsyntax-only",
                    "-Wall",
                    "-Werror",
                    "-x",
                    "c++",
                ])
                .arg(dir.path().join(format!("{arch}.h")))
                .output()
                .unwrap();
            assert!(o.status.success(), "{arch}.h as C++: {}", text(&o.stderr));
        }
    }
}

#[test]
fn two_objects_link_into_one_program() {
    let dir = tempfile::tempdir().unwrap();
    let h = object("specs/hopper.mma", "hopper", dir.path());
    let c = object("specs/cdna3.mma", "cdna3", dir.path());
    let src = root().join("tests/c/two_specs.c");
    let exe = build(
        dir.path(),
        "two_specs",
        &[
            src.to_str().unwrap(),
            h.to_str().unwrap(),
            c.to_str().unwrap(),
        ],
    );
    let o = Command::new(&exe).output().unwrap();
    assert!(o.status.success());
    let out = text(&o.stdout);
    // 1 + 1*1 = 2 in f32 on both
    assert!(
        out.contains("mma.m16n8k16.f32.f16.f16.f32: rc=0 d=40000000"),
        "{out}"
    );
    assert!(
        out.contains("v_mfma_f32_16x16x16_f16: rc=0 d=40000000"),
        "{out}"
    );
    assert!(
        out.contains("null operand: 1 (a required pointer is NULL)"),
        "{out}"
    );
}

#[test]
fn shared_library_has_the_same_api() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libhopper.so");
    let o = mmac_in(
        dir.path(),
        &[
            "compile",
            root().join("specs/hopper.mma").to_str().unwrap(),
            "--emit",
            "lib",
            "-o",
            lib.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // the header says how to make the library again
    let header = std::fs::read_to_string(dir.path().join("libhopper.h")).unwrap();
    assert!(header.contains("--emit lib -o libhopper.so"), "{header}");
    // the header is libhopper.h; the checker includes it by the architecture's name
    std::fs::copy(dir.path().join("libhopper.h"), dir.path().join("hopper.h")).unwrap();
    let rpath = format!("-Wl,-rpath,{}", dir.path().display());
    let l = format!("-L{}", dir.path().display());
    let exe = vector_checker(dir.path(), "hopper", &[&l, "-lhopper", &rpath]);
    check_vectors(&exe, "hopper");
}

#[cfg(target_arch = "x86_64")]
#[test]
fn control_register_helpers_are_what_they_claim() {
    let dir = tempfile::tempdir().unwrap();
    let o = object("specs/cdna3.mma", "cdna3", dir.path());
    let Ok(dump) = Command::new("objdump").arg("-d").arg(&o).output() else {
        panic!("objdump (binutils) is needed");
    };
    let asm = text(&dump.stdout);
    let body = |symbol: &str| -> String {
        let start = asm
            .find(&format!("<{symbol}>:"))
            .unwrap_or_else(|| panic!("{symbol} in\n{asm}"));
        asm[start..].split("\n\n").next().unwrap().to_string()
    };
    let read = body("mmac_cdna3_fp_read");
    assert!(read.contains("stmxcsr") && read.contains("ret"), "{read}");
    let write = body("mmac_cdna3_fp_write");
    assert!(
        write.contains("ldmxcsr") && write.contains("ret"),
        "{write}"
    );
}

#[test]
fn compile_refuses_what_it_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    let spec = root().join("specs/hopper.mma");
    let spec = spec.to_str().unwrap();
    // -o without a file to write
    let o = mmac_in(dir.path(), &["compile", spec, "--emit", "clif", "-o", "x"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("-o is for `--emit obj`, `lib` and `verilog`"));
    // an unknown instruction
    let o = mmac_in(
        dir.path(),
        &[
            "compile",
            spec,
            "--instr",
            "mma.m16n8k16.f32.f16.f16.f31",
            "--emit",
            "obj",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("did you mean `mma.m16n8k16.f32.f16.f16.f32`?"));
    // an output folder that does not exist
    let o = mmac_in(
        dir.path(),
        &["compile", spec, "--emit", "obj", "-o", "no/such/x.o"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(!dir.path().join("no").exists());
}

#[test]
fn instr_filters_every_emit() {
    let dir = tempfile::tempdir().unwrap();
    let spec = root().join("specs/hopper.mma");
    let spec = spec.to_str().unwrap();
    let one = "mma.m16n8k8.f32.bf16.bf16.f32";
    let o = mmac_in(
        dir.path(),
        &["compile", spec, "--instr", one, "--emit", "clif"],
    );
    assert_eq!(o.status.code(), Some(0));
    let out = text(&o.stdout);
    assert!(
        out.contains("compiled 1 of 1 instructions (1 kernels)"),
        "{out}"
    );
    assert!(out.contains("function"), "{out}");
    let o = mmac_in(
        dir.path(),
        &[
            "compile",
            spec,
            "--instr",
            one,
            "--instr",
            "mma.m16n8k16.f32.f16.f16.f32",
            "--emit",
            "obj",
            "-o",
            "two.o",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let header = std::fs::read_to_string(dir.path().join("two.h")).unwrap();
    assert!(header.contains("2 instructions"), "{header}");
    assert!(header.contains(&format!(" *   {one}\n")));
    assert!(!header.contains("mma.m16n8k16.f32.bf16.bf16.f32"));
}

/// With the public vectors beside the clone (`../shared/vectors`, as `.ci/run` has them):
/// every architecture's object reproduces every public vector through the C API. Without
/// them the committed subset above stands in, and this test says so.
#[test]
fn objects_reproduce_every_public_vector() {
    let public = root().join("../shared/vectors");
    if !public.is_dir() {
        eprintln!("skipped: no ../shared/vectors beside the clone");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut files_run = 0;
    for l in specs::load_all(&root().join("specs")).0 {
        let arch = l.spec().arch.clone();
        let folder = public.join(&arch);
        if l.spec().instructions.is_empty() || !folder.is_dir() {
            continue;
        }
        let spec = l.path.strip_prefix(root()).unwrap().to_str().unwrap();
        let o = object(spec, &arch, dir.path());
        let exe = vector_checker(dir.path(), &arch, &[o.to_str().unwrap()]);
        let mut files: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "mmv"))
            .collect();
        files.sort();
        let run = Command::new(&exe).args(&files).output().unwrap();
        let out = text(&run.stdout);
        assert!(run.status.success(), "{arch}:\n{out}");
        files_run += files.len();
    }
    assert_eq!(files_run, 326, "every public vector file");
}

/// The warp_check driver (tests/c/warp_check.c) linked with the object of `spec`.
fn warp_checker(dir: &Path, spec: &str, arch: &str) -> PathBuf {
    let o = object(spec, arch, dir);
    let header = format!("-DMMAC_HEADER=\"{arch}.h\"");
    let prefix = format!("-DMMAC_PREFIX=mmac_{arch}_");
    let src = root().join("tests/c/warp_check.c");
    build(
        dir,
        &format!("warp_{arch}"),
        &[&header, &prefix, src.to_str().unwrap(), o.to_str().unwrap()],
    )
}

/// Run `exe` with `args`, `stdin` on its standard input: whether it succeeded, its stdout
/// and its stderr.
fn run_with_input(exe: &Path, args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = Command::new(exe)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), stdin.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    (o.status.success(), text(&o.stdout), text(&o.stderr))
}

/// The object's warp entry on random register images (every bit pattern) equals the
/// runtime's `warp_mma` (the interpreter) on the same images, for every layout family of
/// `specs/ampere.mma` (16-bit, tf32, 8-bit, 4-bit, b1 and f64 elements, 64-bit registers
/// as two words) and Volta's or Turing's f16 `mma.m8n8k4` when it has a layout (four
/// independent matrices per warp); a sparse instruction, one without a layout and
/// operands it does not take are refused with their codes.
#[test]
fn warp_entry_runs_register_images() {
    let dir = tempfile::tempdir().unwrap();
    let lib = mmac_runtime::fragments::Library::builtin().unwrap();
    let mut rng = Rng::new(0x77a9);
    let mut tested = 0;
    for (spec, arch) in [
        ("specs/ampere.mma", "ampere"),
        ("specs/turing.mma", "turing"),
    ] {
        let exe = warp_checker(dir.path(), spec, arch);
        let loaded = specs::load_file(&root().join(spec)).unwrap();
        // one instruction per fragment family of a
        let mut families = std::collections::BTreeSet::new();
        for checked in loaded.checked.instructions() {
            let inst = checked.instruction();
            let Ok(layout) = lib.find_for(arch, inst) else {
                continue;
            };
            if inst.sparsity.is_some()
                || inst.arithmetic.scale.is_some()
                || !families.insert(layout.a.name.clone())
            {
                continue;
            }
            let images: Vec<Vec<u32>> = [&layout.a, &layout.b, &layout.c]
                .iter()
                .map(|f| {
                    let random: Vec<u32> = (0..f.image_words())
                        .map(|_| rng.next_u64() as u32)
                        .collect();
                    // lanes that hold copies of an element must agree
                    f.pack(&f.unpack(&random, "x").unwrap(), "x").unwrap()
                })
                .collect();
            let mut stdin = format!("{}\n", inst.name);
            for w in images.iter().flatten() {
                stdin.push_str(&format!("{w:x} "));
            }
            let (ok, out, err) = run_with_input(&exe, &[], &stdin);
            assert!(ok, "{}: {err}", inst.name);
            let mut lines = out.lines();
            assert_eq!(lines.next(), Some("rc 0"), "{}: {out}", inst.name);
            let got: Vec<u32> = lines.map(|l| u32::from_str_radix(l, 16).unwrap()).collect();
            let engine = mmac_compiler::engine::Engine::interpreter(checked);
            let inputs = mmac_runtime::fragments::WarpInputs {
                a: &images[0],
                b: &images[1],
                c: &images[2],
                ..Default::default()
            };
            let want =
                mmac_runtime::fragments::warp_mma(&engine, &layout, &inputs, &Default::default())
                    .unwrap();
            assert_eq!(got.len(), want.len(), "{}", inst.name);
            // the same bits, but for NaN payloads the spec leaves open
            let (got_d, want_d) = (
                layout.d.unpack(&got, "d").unwrap(),
                layout.d.unpack(&want, "d").unwrap(),
            );
            let nan = |v: u64| inst.arithmetic.d.decode(v).is_nan();
            for (g, w) in got_d
                .iter()
                .flat_map(|m| &m.data)
                .zip(want_d.iter().flat_map(|m| &m.data))
            {
                assert!(
                    g == w || (nan(*g) && nan(*w)),
                    "{}: {g:x} vs {w:x}",
                    inst.name
                );
            }
            tested += 1;
        }
        if arch == "ampere" {
            let (_, out, _) = run_with_input(
                &exe,
                &["errors"],
                "mma.sp.m16n8k16.f32.f16.f16.f32 mma.m8n8k4.f64.f64.f64.f64 mma.m16n8k16.f32.f16.f16.f32",
            );
            assert!(out.contains("sparse 8\n"), "{out}");
            assert!(out.contains("null 1\n"), "{out}");
            assert!(out.contains("meta 8\nselector 8\n"), "{out}");
            assert!(out.contains("operand -1 -1 -1\n"), "{out}");
            assert!(
                out.contains("message the object's warp entry runs dense instructions"),
                "{out}"
            );
        }
    }
    assert!(tested >= 8, "{tested} families");
    // an object whose instruction has no layout
    let exe = warp_checker(dir.path(), "specs/examples/kulisch.mma", "kulisch");
    let (_, out, _) = run_with_input(
        &exe,
        &["errors"],
        "none kulisch.m16n8k16.f32.f16.f16.f32 kulisch.m16n8k16.f32.f16.f16.f32",
    );
    assert!(out.contains("none 5 -1\n"), "{out}");
}
