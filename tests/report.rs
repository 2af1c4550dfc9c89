//! `mmac report`: the JSON rows equal a direct computation on a small case (the same
//! sampled inputs, each dot product chained through the reference interpreter k at a time,
//! the exact result summed exactly, the statistics recomputed here); the plot is written
//! as SVG and PNG; truncating alignment on positive inputs has a negative bias whose
//! confidence interval excludes 0; bad arguments are usage errors.

mod support;

use support::{mmac, stderr};

use mmac_compiler::engine::Operands;
use mmac_compiler::exact::{Dyadic, Rounding};
use mmac_compiler::format::Decoded;
use mmac_compiler::ieee::{self, Num};
use mmac_compiler::interp;
use mmac_compiler::ir::RoundedOp;
use mmac_runtime::accuracy::{Distribution, ReportOptions, sample_inputs};
use mmac_runtime::specs;
use std::path::Path;

const HOPPER: (&str, &str) = ("specs/hopper.mma", "mma.m16n8k16.f32.f16.f16.f32");
const CDNA3: (&str, &str) = ("specs/cdna3.mma", "v_mfma_f32_16x16x16_f16");

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// The statistics of one instruction at one K, computed directly.
fn direct(file: &str, name: &str, k_total: usize, options: &ReportOptions) -> [f64; 8] {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let spec = specs::load_file(&root.join(file)).unwrap();
    let checked = spec.instruction(name).unwrap();
    let inst = checked.instruction();
    let ar = &inst.arithmetic;
    let k = inst.k();
    let value = |f: &mmac_compiler::format::Format, r: u64| match f.decode(r) {
        Decoded::Finite(x) => x.value(),
        _ => panic!("finite inputs"),
    };
    let (mut abs, mut rel): (Vec<f64>, Vec<f64>) = (vec![], vec![]);
    let (mut correct, mut faithful) = (0, 0);
    for s in 0..options.samples {
        let (a, b) = sample_inputs(inst, options, k_total, s).unwrap();
        let mut c = ar.c.encode_finite(false, &Dyadic::zero()).unwrap();
        for step in 0..k_total / k {
            let r = step * k..(step + 1) * k;
            c = interp::run(
                checked,
                &Operands {
                    c,
                    a: &a[r.clone()],
                    b: &b[r],
                    sa: &[],
                    sb: &[],
                },
            )
            .unwrap();
        }
        let mut exact = Dyadic::zero();
        for i in 0..k_total {
            exact = exact.add(&value(&ar.a, a[i]).mul(&value(&ar.b, b[i])));
        }
        let got = value(&ar.d, c);
        let err = got.add(&exact.neg());
        abs.push(err.abs().to_f64_lossy());
        if !exact.is_zero() {
            rel.push(err.to_f64_lossy() / exact.abs().to_f64_lossy());
        }
        let rounded = |mode| {
            let op = RoundedOp {
                format: ar.d.clone(),
                rounding: mode,
                flush_keep_sign: false,
            };
            match ieee::round(exact.is_negative(), &exact, &op) {
                Num::Fin(_, v) => {
                    v == got || (v.is_zero() && got.is_zero()) || v.cmp_value(&got).is_eq()
                }
                _ => false,
            }
        };
        correct += rounded(Rounding::NearestEven) as usize;
        faithful += (rounded(Rounding::Down) || rounded(Rounding::Up)) as usize;
    }
    let n = abs.len() as f64;
    let bias = rel.iter().sum::<f64>() / rel.len() as f64;
    [
        abs.iter().sum::<f64>() / n,
        abs.iter().copied().fold(0.0, f64::max),
        rel.iter().map(|r| r.abs()).sum::<f64>() / rel.len() as f64,
        rel.iter().map(|r| r.abs()).fold(0.0, f64::max),
        bias,
        correct as f64 / n,
        faithful as f64 / n,
        // half-width of the 95% interval
        1.96 * (rel.iter().map(|r| (r - bias).powi(2)).sum::<f64>()
            / (rel.len() - 1) as f64
            / rel.len() as f64)
            .sqrt(),
    ]
}

#[test]
fn json_rows_match_a_direct_computation_and_the_plot_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("report.svg");
    let o = mmac(&[
        "report",
        HOPPER.0,
        HOPPER.1,
        "--against",
        CDNA3.0,
        CDNA3.1,
        "--dist",
        "normal",
        "--k",
        "16,48",
        "--samples",
        "40",
        "--seed",
        "5",
        "--json",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    let options = ReportOptions {
        distribution: Distribution::Normal,
        ks: vec![16, 48],
        samples: 40,
        seed: 5,
    };
    for row in rows {
        let name = row["instruction"].as_str().unwrap();
        let file = if name == HOPPER.1 { HOPPER.0 } else { CDNA3.0 };
        let k = row["k"].as_u64().unwrap() as usize;
        assert_eq!(row["samples"], 40);
        let want = direct(file, name, k, &options);
        let ci = row["bias_ci95"].as_array().unwrap();
        let got = [
            row["mean_abs_error"].as_f64().unwrap(),
            row["max_abs_error"].as_f64().unwrap(),
            row["mean_rel_error"].as_f64().unwrap(),
            row["max_rel_error"].as_f64().unwrap(),
            row["bias"].as_f64().unwrap(),
            row["correctly_rounded"].as_f64().unwrap(),
            row["faithful"].as_f64().unwrap(),
            (ci[1].as_f64().unwrap() - ci[0].as_f64().unwrap()) / 2.0,
        ];
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(close(*g, *w), "{name} K={k} statistic {i}: {g} vs {w}");
        }
        assert!(want[0] > 0.0, "{name} K={k}: some error on 40 samples");
    }
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg"), "an SVG");
    for want in [HOPPER.1, CDNA3.1, "K (dot-product length)", "bias"] {
        assert!(plot.contains(want), "the plot shows `{want}`");
    }
    // PNG by the extension
    let png = dir.path().join("report.png");
    let o = mmac(&[
        "report",
        HOPPER.0,
        HOPPER.1,
        "--k",
        "16,32",
        "--samples",
        "8",
        "--plot",
        png.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG"), "a PNG");
    // the same seed gives the same numbers; the table names the instruction
    let again = mmac(&[
        "report",
        HOPPER.0,
        HOPPER.1,
        "--k",
        "16,32",
        "--samples",
        "8",
    ]);
    assert_eq!(again.stdout, o.stdout);
    assert!(String::from_utf8_lossy(&o.stdout).contains(HOPPER.1));
}

/// On positive inputs every truncation drops value: Hopper's round-toward-zero alignment
/// gives a negative bias whose 95% interval lies below 0.
#[test]
fn truncation_biases_positive_sums_downwards() {
    let o = mmac(&[
        "report",
        HOPPER.0,
        HOPPER.1,
        "--dist",
        "uniform",
        "--k",
        "256",
        "--samples",
        "64",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = &v["rows"][0];
    assert!(row["bias"].as_f64().unwrap() < 0.0, "{row}");
    assert!(row["bias_ci95"][1].as_f64().unwrap() < 0.0, "{row}");
}

#[test]
fn bad_arguments_are_usage_errors() {
    for (args, want) in [
        (vec!["--k", "24"], "not a positive multiple"),
        (vec!["--dist", "cauchy"], "unknown distribution `cauchy`"),
        (
            vec!["--dist", "normal", "--range", "0,1"],
            "applies to `uniform` only",
        ),
        (
            vec!["--dist", "uniform", "--range", "1,0"],
            "expected LO,HI",
        ),
        (vec!["--plot", "x.pdf"], "must end in .svg or .png"),
    ] {
        let mut all = vec!["report", HOPPER.0, HOPPER.1];
        all.extend(args);
        let o = mmac(&all);
        assert_eq!(o.status.code(), Some(2), "{all:?}");
        assert!(stderr(&o).contains(want), "{all:?}: {}", stderr(&o));
    }
    // d cannot be fed back as c
    let o = mmac(&["report", "specs/volta.mma", "mma.m8n8k4.f32.f16.f16.f16"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("feeds d back as c"), "{}", stderr(&o));
}

/// Inputs beyond the format's range are clamped to its largest value, and samples whose
/// result is infinite are left out: each is said on stderr, and counted in the JSON (the
/// table showed 100 % correct for 1e5..1e6 in f16, and errors of 0 beside 0 % correct when
/// every result overflowed).
#[test]
fn clamped_inputs_and_samples_left_out_are_said() {
    for (name, range, says, clamped, compared) in [
        (
            "mma.m16n8k16.f32.f16.f16.f32",
            "1e5,1e6",
            "160 of its 160 input values lay beyond their format's range and were clamped",
            160,
            5,
        ),
        (
            "mma.m16n8k16.f16.f16.f16.f16",
            "100,200",
            "no sample compared (every result of the 5 is infinite or NaN)",
            0,
            0,
        ),
    ] {
        let args = ["report", HOPPER.0, name, "--k", "16", "--samples", "5"];
        let o = mmac(
            &[
                &args[..],
                &["--dist", "uniform", "--range", range, "--json"],
            ]
            .concat(),
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("warning: {name} at K = 16: {says}")),
            "{}",
            stderr(&o)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let row = &v["rows"][0];
        assert_eq!(row["clamped_inputs"], clamped, "{row}");
        assert_eq!(row["compared"], compared, "{row}");
    }
    // inputs inside the range: nothing to say
    let o = mmac(&["report", HOPPER.0, HOPPER.1, "--k", "16", "--samples", "5"]);
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
}
