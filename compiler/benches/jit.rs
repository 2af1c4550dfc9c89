//! `cargo bench -p mmac-compiler`: ns per dot product of the JIT (batch entry), the
//! interpreter, and a plain native f32 dot product of the same K, for the instructions
//! docs/performance.md tracks. Inputs are random finite encodings; an instruction whose
//! spec is absent is skipped with a note.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mmac_compiler::interp;
use mmac_compiler::jit;
use mmac_compiler::random::{Records, Rng};
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

const TRACKED: &[(&str, &str)] = &[
    ("hopper", "mma.m16n8k16.f32.f16.f16.f32"),
    ("ampere", "mma.m16n8k8.f32.tf32.tf32.f32"),
    ("ada", "mma.m16n8k32.f32.e4m3.e4m3.f32"),
    ("cdna3", "v_mfma_f32_16x16x32_fp8_fp8"),
    ("cdna2", "v_mfma_f32_16x16x16bf16_1k"),
    (
        "rtx_blackwell",
        "mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3",
    ),
    ("ampere", "mma.m8n8k4.f64.f64.f64.f64"),
];

fn load(arch: &str) -> Option<mmac_compiler::CheckedSpec> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../specs/{arch}.mma"));
    let text = std::fs::read_to_string(&path).ok()?;
    mmac_compiler::compile(&path.display().to_string(), &text).ok()
}

fn bench(c: &mut Criterion) {
    const N: usize = 1024;
    for (arch, name) in TRACKED {
        let Some(v) = load(arch) else {
            eprintln!("note: specs/{arch}.mma is missing; skipping {name}");
            continue;
        };
        let Some(index) = v.spec().position(name) else {
            eprintln!("note: {arch} has no {name}; skipping");
            continue;
        };
        let checked = v.get(index);
        let inst = checked.instruction();
        let k = inst.k();
        let rec = Records::random(inst, N);
        let mut group = c.benchmark_group(format!("{arch}/{name}"));
        group.throughput(Throughput::Elements(N as u64));
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
        group.sample_size(20);

        let compiled = jit::compile_instruction(checked).expect("the tracked instructions compile");
        let kernel = compiled.kernel(name).expect("kernel");
        let mut d = vec![0u64; N];
        group.bench_function(BenchmarkId::new("jit", N), |bch| {
            bch.iter(|| {
                kernel
                    .batch(&rec.c, &rec.a, &rec.b, &rec.sa, &rec.sb, &mut d)
                    .unwrap();
                black_box(&mut d);
            })
        });

        // the interpreter on a slice of the same records (it is ~100x slower)
        let m = 64;
        group.throughput(Throughput::Elements(m as u64));
        group.bench_function(BenchmarkId::new("interp", m), |bch| {
            bch.iter(|| {
                for i in 0..m {
                    let ops = rec.operands(i);
                    black_box(interp::run(checked, &ops).unwrap());
                }
            })
        });

        // the floor: a plain native f32 dot product of the same k
        let mut r = Rng::new(7);
        let mut unit = || (r.next_u64() >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
        let fa: Vec<f32> = (0..N * k).map(|_| unit()).collect();
        let fb: Vec<f32> = (0..N * k).map(|_| unit()).collect();
        let fc: Vec<f32> = (0..N).map(|_| unit()).collect();
        let mut fd = vec![0f32; N];
        group.throughput(Throughput::Elements(N as u64));
        group.bench_function(BenchmarkId::new("native_f32", N), |bch| {
            bch.iter(|| {
                let (fa, fb, fc) = (black_box(&fa), black_box(&fb), black_box(&fc));
                for i in 0..N {
                    let mut acc = fc[i];
                    for (x, y) in fa[i * k..(i + 1) * k].iter().zip(&fb[i * k..(i + 1) * k]) {
                        acc += x * y;
                    }
                    fd[i] = acc;
                }
                black_box(&mut fd);
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
