//! `mmac compile --emit verilog` under a simulator: for one instruction of every pipeline
//! family in the library (fused T-, E-, TR- and GTR-FDPA, block scales on products and
//! on groups, sequential FMA chains and pairwise trees, integer and `b1` dot products, a
//! composed pipeline), the emitted module is simulated by Verilator on `mmac gen`'s
//! vectors (random and corner cases), and every d it computes equals the JIT's d for the
//! same operands and the vector's own d (the interpreter's).
//!
//! Needs `verilator` (a Debian package; `.ci/run` installs it). Without it the test says
//! so and passes, unless MMAC_REQUIRE_RTL is set, as `.ci/run` sets it.

mod support;

use mmac_compiler::engine::{Choice, Engine, Operands};
use mmac_compiler::rtl;
use mmac_runtime::witness::nan_any;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use support::{have, mmac_ok, root};

/// One instruction per pipeline family: (spec, instruction).
const FAMILIES: &[(&str, &str)] = &[
    ("specs/hopper.mma", "mma.m16n8k8.f32.f16.f16.f32"),
    ("specs/cdna1.mma", "v_mfma_f32_32x32x8f16"),
    ("specs/cdna3.mma", "v_mfma_f32_16x16x8_xf32"),
    ("specs/cdna3.mma", "v_mfma_f32_16x16x32_fp8_fp8"),
    (
        "specs/blackwell.mma",
        "tcgen05.mma.block_scale.m128n104k32.kind::mxf8f6f4.block32.f32.e4m3.e2m1.ue8m0",
    ),
    (
        "specs/blackwell.mma",
        "tcgen05.mma.block_scale.m64n8k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0",
    ),
    ("specs/cdna1.mma", "v_mfma_f32_32x32x2f32"),
    ("specs/cdna2.mma", "v_mfma_f32_32x32x8f16"),
    ("specs/hopper.mma", "mma.m8n8k16.s32.s8.s8.s32"),
    ("specs/hopper.mma", "mma.m8n8k128.s32.b1.b1.s32.xor.popc"),
    ("specs/hopper.mma", "mma.m16n8k32.f16.e4m3.e4m3.f16"),
];

/// A field of a `mmac gen --format hex` word: its name, low bit and width (the storage
/// width rounded up to whole hex digits), most significant first in the file.
struct Field {
    port: &'static str,
    element: usize,
    low: u32,
    width: u32,
    /// The storage width, at the field's low end.
    bits: u32,
}

fn fields(inst: mmac_compiler::Checked) -> (Vec<Field>, u32) {
    let ar = inst.arithmetic();
    let mut order: Vec<(&'static str, usize, u32)> = vec![("c", 0, ar.c.storage_bits())];
    order.extend((0..inst.k()).map(|i| ("a", i, ar.a.storage_bits())));
    order.extend((0..inst.k()).map(|i| ("b", i, ar.b.storage_bits())));
    if let Some(s) = &ar.scale {
        let n = inst.scale_count();
        order.extend((0..n).map(|i| ("sa", i, s.format.storage_bits())));
        order.extend((0..n).map(|i| ("sb", i, s.format.storage_bits())));
    }
    order.push(("d", 0, ar.d.storage_bits()));
    let word: u32 = order.iter().map(|x| x.2.div_ceil(4) * 4).sum();
    let mut top = word;
    let fields = order
        .into_iter()
        .map(|(port, element, bits)| {
            let width = bits.div_ceil(4) * 4;
            top -= width;
            Field {
                port,
                element,
                low: top,
                width,
                bits,
            }
        })
        .collect();
    (fields, word)
}

/// A testbench that applies every case of the hex file to the module and writes each d.
/// Each case's inputs are gathered in locals and assigned whole: Verilator 5.006 does not
/// always re-evaluate the design after part-selects of a wide input in an initial block.
fn testbench(module: &str, fields: &[Field], word: u32, ports: &[(&str, u32)]) -> String {
    let mut tb = String::from("module tb;\n");
    let _ = writeln!(tb, "  logic [{}:0] vectors [0:65535];", word - 1);
    for (p, w) in ports {
        let _ = writeln!(tb, "  logic [{}:0] {p}, next_{p};", w - 1);
    }
    let connect: Vec<String> = ports.iter().map(|(p, _)| format!(".{p}({p})")).collect();
    let _ = writeln!(tb, "  {module} dut ({});", connect.join(", "));
    tb.push_str(
        "  initial begin\n    string path, out;\n    int count, f;\n    \
         if (!$value$plusargs(\"vectors=%s\", path) || !$value$plusargs(\"count=%d\", count) ||\n        \
         !$value$plusargs(\"out=%s\", out)) $fatal(1, \"+vectors, +count and +out\");\n    \
         $readmemh(path, vectors);\n    f = $fopen(out, \"w\");\n    \
         for (int i = 0; i < count; i++) begin\n",
    );
    for x in fields.iter().filter(|x| x.port != "d") {
        let _ = writeln!(
            tb,
            "      next_{}[{}+:{}] = vectors[i][{}+:{}];",
            x.port,
            x.element as u32 * x.bits,
            x.bits,
            x.low,
            x.bits
        );
    }
    for (p, _) in ports.iter().filter(|(p, _)| *p != "d") {
        let _ = writeln!(tb, "      {p} = next_{p};");
    }
    tb.push_str(
        "      #1;\n      $fdisplay(f, \"%h\", d);\n    end\n    $fclose(f);\n    $finish;\n  end\nendmodule\n",
    );
    tb
}

fn simulate(dir: &Path, spec_path: &str, name: &str) {
    let file = root().join(spec_path);
    let text = std::fs::read_to_string(&file).unwrap();
    let spec = mmac_compiler::compile(spec_path, &text).unwrap();
    let inst = spec.find(name).unwrap();
    let module = rtl::module_name(name);
    let (v, hex, tb, out) = (
        dir.join("dut.v"),
        dir.join("vectors.hex"),
        dir.join("tb.sv"),
        dir.join("d.hex"),
    );
    let s = |p: &Path| p.display().to_string();
    mmac_ok(&[
        "compile",
        spec_path,
        "--emit",
        "verilog",
        "--instr",
        name,
        "-o",
        &s(&v),
    ]);
    mmac_ok(&[
        "gen",
        spec_path,
        "--instr",
        name,
        "-n",
        "100",
        "--format",
        "hex",
        "-o",
        &s(&hex),
    ]);
    let (fields, word) = fields(inst);
    let ports = rtl::ports(inst);
    std::fs::write(&tb, testbench(&module, &fields, word, &ports)).unwrap();
    let build = Command::new("verilator")
        .args([
            "--binary",
            "-j",
            "2",
            "-Wno-fatal",
            "-Wno-WIDTH",
            "--top-module",
            "tb",
        ])
        .arg("--Mdir")
        .arg(dir.join("obj"))
        .args(["-o", "Vtb"])
        .arg(&v)
        .arg(&tb)
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "{name}: verilator failed:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    // the vectors: one case per line, fields by position
    let words: Vec<String> = std::fs::read_to_string(&hex)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("//") && !l.trim().is_empty())
        .map(|l| l.replace('_', ""))
        .collect();
    let run = Command::new(dir.join("obj/Vtb"))
        .arg(format!("+vectors={}", s(&hex)))
        .arg(format!("+count={}", words.len()))
        .arg(format!("+out={}", s(&out)))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{name}: the simulation failed: {run:?}"
    );
    let got: Vec<u64> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| u64::from_str_radix(l.trim(), 16).unwrap())
        .collect();
    assert_eq!(got.len(), words.len(), "{name}: a d per case");
    let engine = Engine::new(inst, Choice::Jit(Default::default()));
    assert!(engine.is_jit(), "{name}: the JIT compiles it");
    for (i, (w, d)) in words.iter().zip(&got).enumerate() {
        // a field of the word: hex digits from the top
        let digits = w.len() as u32;
        let field = |x: &Field| {
            let from = (digits * 4 - x.low - x.width) / 4;
            u64::from_str_radix(&w[from as usize..((from + x.width / 4) as usize)], 16).unwrap()
        };
        let take = |port: &str| -> Vec<u64> {
            fields
                .iter()
                .filter(|x| x.port == port)
                .map(field)
                .collect()
        };
        let (c, a, b, sa, sb, want) = (
            take("c")[0],
            take("a"),
            take("b"),
            take("sa"),
            take("sb"),
            take("d")[0],
        );
        let jit = engine
            .dot(&Operands {
                c,
                a: &a,
                b: &b,
                sa: &sa,
                sb: &sb,
            })
            .unwrap();
        // under `nan ieee` the payload is not pinned: the JIT's NaN is any NaN
        let format = &inst.arithmetic().d;
        let nan = |x: u64| format.decode(x).is_nan();
        let jit_agrees = jit == *d || (nan_any(inst.instruction()) && nan(jit) && nan(*d));
        assert!(
            *d == want && jit_agrees,
            "{name} case {i}: Verilog d={d:x}, JIT d={jit:x}, vector d={want:x} \
             (c={c:x} a={a:x?} b={b:x?} sa={sa:x?} sb={sb:x?})"
        );
    }
}

#[test]
fn emitted_verilog_of_every_pipeline_family_simulates_to_the_jits_results() {
    if !have("verilator", "tests/verilog.rs") {
        return;
    }
    let only = std::env::var("MMAC_VERILOG_ONLY").ok();
    for (spec, name) in FAMILIES {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        // MMAC_VERILOG_KEEP=DIR keeps each instruction's files in DIR/MODULE
        match std::env::var_os("MMAC_VERILOG_KEEP") {
            Some(keep) => {
                let dir = Path::new(&keep).join(rtl::module_name(name));
                std::fs::create_dir_all(&dir).unwrap();
                simulate(&dir, spec, name);
            }
            None => simulate(tempfile::tempdir().unwrap().path(), spec, name),
        }
    }
}

/// Module names: after the instruction, punctuation made `_`, numbered where two names
/// meet; an instruction that shares another's arithmetic instantiates its module.
#[test]
fn modules_are_named_once_and_shared_arithmetic_is_instantiated() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("names.mma");
    let body = "    shape 1 x 1 x 4\n    types a = e4m3, b = e4m3, c = f32, d = f32\n";
    std::fs::write(
        &spec,
        format!(
            "arch names\nimport std\n\
             instruction a.b {{\n{body}    uses t_fdpa(F = 20, L = 4, e_zero = -133)\n}}\n\
             instruction a_b {{\n{body}    uses t_fdpa(F = 21, L = 4, e_zero = -133)\n}}\n\
             instruction same.as.first {{\n{body}    uses t_fdpa(F = 20, L = 4, e_zero = -133)\n}}\n\
             instruction module {{\n{body}    uses t_fdpa(F = 22, L = 4, e_zero = -133)\n}}\n\
             instruction always_ff {{\n{body}    uses t_fdpa(F = 23, L = 4, e_zero = -133)\n}}\n"
        ),
    )
    .unwrap();
    let text = mmac_ok(&["compile", spec.to_str().unwrap(), "--emit", "verilog"]);
    let modules: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("module "))
        .collect();
    // reserved words of Verilog and SystemVerilog are prefixed, as a leading digit is
    assert_eq!(
        modules,
        [
            "a_b (",
            "a_b_2 (",
            "same_as_first (",
            "m_module (",
            "m_always_ff ("
        ],
        "{text}"
    );
    assert!(
        text.contains("  a_b body (.c(c), .a(a), .b(b), .d(d));"),
        "{text}"
    );
}
