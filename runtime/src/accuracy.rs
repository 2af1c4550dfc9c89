//! Accuracy reports (`mmac report`): dot products of length K accumulated the way a GEMM
//! drives an instruction (K walked in k-steps in increasing order, each step's d fed back
//! as the next c, starting from c = +0), on inputs drawn from a distribution and rounded
//! to nearest into the input formats, measured against the exact result: absolute and
//! relative error, bias (the mean of (result - exact) / |exact|) with its 95% confidence
//! interval, and the shares of results that are correctly rounded (equal to the exact
//! result rounded to nearest even into d's format) and faithful (one of its two
//! neighbours in d's format).
//!
//! Sampling is deterministic: sample `s` of length `K` draws from its own generator,
//! seeded by the seed, K and s, so a report does not depend on the number of threads, and
//! every instruction of one report sees the same inputs (paired comparisons).

use mmac_compiler::engine::{Engine, EvalError};
use mmac_compiler::exact::{Dyadic, Rounding};
use mmac_compiler::format::{Decoded, Format};
use mmac_compiler::ieee::{self, Num};
use mmac_compiler::ir::{Instruction, RoundedOp};
use mmac_compiler::random::Rng;
use rand_distr::{Distribution as _, StandardNormal, StandardUniform};
use rayon::prelude::*;

/// The distribution inputs are drawn from (before rounding into the input format).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    /// Standard normal N(0, 1).
    Normal,
    /// Uniform on [lo, hi) ([0, 1) unless a range is given).
    Uniform { lo: f64, hi: f64 },
    /// exp(N(0, 1)): positive, heavy-tailed.
    LogNormal,
    /// Uniform on [-1, 1): signed values that cancel.
    Signed,
}

impl Distribution {
    /// The names `--dist` accepts.
    pub const NAMES: [&'static str; 4] = ["normal", "uniform", "lognormal", "signed"];

    /// A distribution by name; `range` applies to `uniform` only.
    pub fn parse(name: &str, range: Option<(f64, f64)>) -> Result<Distribution, String> {
        let d = match name {
            "normal" => Distribution::Normal,
            "uniform" => {
                let (lo, hi) = range.unwrap_or((0.0, 1.0));
                Distribution::Uniform { lo, hi }
            }
            "lognormal" => Distribution::LogNormal,
            "signed" => Distribution::Signed,
            other => {
                return Err(format!(
                    "unknown distribution `{other}`; expected one of {}",
                    Distribution::NAMES.join(", ")
                ));
            }
        };
        if range.is_some() && !matches!(d, Distribution::Uniform { .. }) {
            return Err(format!("--range applies to `uniform` only, not `{name}`"));
        }
        Ok(d)
    }

    /// One value of the distribution.
    pub fn draw(&self, rng: &mut Rng) -> f64 {
        match *self {
            Distribution::Normal => StandardNormal.sample(rng),
            Distribution::Uniform { lo, hi } => lo + (hi - lo) * unit(rng),
            Distribution::LogNormal => {
                let x: f64 = StandardNormal.sample(rng);
                x.exp()
            }
            Distribution::Signed => 2.0 * unit(rng) - 1.0,
        }
    }

    /// The distribution as the report names it.
    pub fn describe(&self) -> String {
        match self {
            Distribution::Normal => "normal N(0, 1)".into(),
            Distribution::Uniform { lo, hi } => format!("uniform [{lo}, {hi})"),
            Distribution::LogNormal => "lognormal exp(N(0, 1))".into(),
            Distribution::Signed => "uniform [-1, 1)".into(),
        }
    }
}

/// Uniform on [0, 1) with 53 random bits.
fn unit(rng: &mut Rng) -> f64 {
    StandardUniform.sample(rng)
}

/// What a report measures.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    pub distribution: Distribution,
    /// Dot-product lengths K (each a multiple of every instruction's k).
    pub ks: Vec<usize>,
    pub samples: usize,
    pub seed: u64,
}

/// One instruction at one K.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Row {
    pub instruction: String,
    /// How tables and plots name the row: the instruction, or with its arch (or file)
    /// where several compared instructions share a name.
    pub label: String,
    /// The architecture and the spec file the instruction comes from (set by the caller;
    /// empty when unknown).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub arch: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub file: String,
    pub k: usize,
    /// Samples drawn.
    pub samples: usize,
    /// Samples whose result and exact result are finite (the others are left out).
    pub compared: usize,
    pub mean_abs_error: f64,
    pub max_abs_error: f64,
    /// Over the compared samples with a nonzero exact result.
    pub mean_rel_error: f64,
    pub max_rel_error: f64,
    /// Mean of (result - exact) / |exact|.
    pub bias: f64,
    pub bias_ci95: [f64; 2],
    /// Share of compared samples equal to the exact result rounded to nearest even.
    pub correctly_rounded: f64,
    /// Share of compared samples that are either neighbour of the exact result in d.
    pub faithful: f64,
    /// Input values (of a and b, over every sample) beyond their format's range: clamped
    /// to its largest finite value of that sign, not rounded to an infinity.
    pub clamped_inputs: usize,
}

impl Row {
    /// What a reader of the row's figures must know: inputs that were clamped, samples
    /// left out (a result that is not finite); None when neither.
    pub fn caveat(&self) -> Option<String> {
        let mut said = vec![];
        if self.clamped_inputs > 0 {
            said.push(format!(
                "{} of its {} input values lay beyond their format's range and were clamped to its largest value",
                self.clamped_inputs,
                2 * self.k * self.samples
            ));
        }
        if self.compared < self.samples {
            let left = self.samples - self.compared;
            said.push(if self.compared == 0 {
                format!("no sample compared (every result of the {left} is infinite or NaN): its figures mean nothing")
            } else {
                format!(
                    "{left} of {} samples left out (an infinite or NaN result); the figures are over the other {}",
                    self.samples, self.compared
                )
            });
        }
        (!said.is_empty()).then(|| format!("{} at K = {}: {}", self.label, self.k, said.join("; ")))
    }
}

/// An f64 as an exact dyadic.
pub fn dyadic_of(x: f64) -> Dyadic {
    if x == 0.0 || !x.is_finite() {
        return Dyadic::zero();
    }
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i64;
    let frac = bits & ((1u64 << 52) - 1);
    let (m, e) = if exp == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), exp - 1075)
    };
    Dyadic::from_parts(x < 0.0, m as u128, e)
}

fn rounded_op(f: &Format, rounding: Rounding) -> RoundedOp {
    RoundedOp {
        format: f.clone(),
        rounding,
        flush_keep_sign: false,
    }
}

/// `x` rounded to nearest even into a float format; beyond its range, its largest finite
/// value of that sign.
pub fn round_into(f: &Format, x: f64) -> Result<u64, String> {
    round_or_clamp(f, x).map(|(code, _)| code)
}

/// [`round_into`], and whether `x` lay beyond the format's range (clamped to its largest
/// finite value, not rounded).
fn round_or_clamp(f: &Format, x: f64) -> Result<(u64, bool), String> {
    let Some(ff) = f.as_float() else {
        return Err(format!(
            "`{}` is not a floating-point format; reports draw float inputs",
            f.name
        ));
    };
    let v = dyadic_of(x);
    let neg = x.is_sign_negative();
    let (n, clamped) = match ieee::round(neg, &v, &rounded_op(f, Rounding::NearestEven)) {
        Num::Fin(neg, v) => (Num::Fin(neg, v), false),
        _ => (
            Num::Fin(
                neg,
                Dyadic::from_parts(
                    neg,
                    ff.max_significand() as u128,
                    ff.max_exponent() as i64 - ff.mantissa_bits as i64,
                ),
            ),
            true,
        ),
    };
    // an unsigned format, or a value whose code the format lacks: the nearest is +0
    let code = ieee::encode(f, &n)
        .or_else(|| f.encode_finite(false, &Dyadic::zero()))
        .unwrap_or(0);
    Ok((code, clamped))
}

/// Sample `sample` of length `k_total`: a and b (each `k_total` encodings).
pub fn sample_inputs(
    inst: &Instruction,
    options: &ReportOptions,
    k_total: usize,
    sample: usize,
) -> Result<(Vec<u64>, Vec<u64>), String> {
    sample_inputs_counted(inst, options, k_total, sample).map(|(a, b, _)| (a, b))
}

/// [`sample_inputs`], and how many of its values lay beyond their format's range
/// (clamped to its largest finite value).
fn sample_inputs_counted(
    inst: &Instruction,
    options: &ReportOptions,
    k_total: usize,
    sample: usize,
) -> Result<(Vec<u64>, Vec<u64>, usize), String> {
    let mut rng = Rng::new(
        options
            .seed
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .wrapping_add((k_total as u64) << 32)
            .wrapping_add(sample as u64)
            .wrapping_add(1),
    );
    // warm up: nearby seeds give unrelated streams
    for _ in 0..4 {
        rng.next_u64();
    }
    let ar = &inst.arithmetic;
    let mut a = Vec::with_capacity(k_total);
    let mut b = Vec::with_capacity(k_total);
    let mut clamped = 0;
    for _ in 0..k_total {
        let (x, cx) = round_or_clamp(&ar.a, options.distribution.draw(&mut rng))?;
        let (y, cy) = round_or_clamp(&ar.b, options.distribution.draw(&mut rng))?;
        a.push(x);
        b.push(y);
        clamped += usize::from(cx) + usize::from(cy);
    }
    Ok((a, b, clamped))
}

/// Can `inst` be reported on (float operands, d fed back as c)? The reason if not.
pub fn reportable(inst: &Instruction) -> Result<(), String> {
    let ar = &inst.arithmetic;
    // `over selected`: the dense arithmetic over the selected products, which is what the
    // samples are; `over columns` would need A's zeros in the samples
    if let Some(s) = inst.sparsity
        && s.walk == mmac_compiler::ir::Walk::Columns
    {
        return Err(format!(
            "`{}` walks every column of a {s} sparse A: report samples dense rows, which it does not take; report takes dense and `over selected` instructions",
            inst.name
        ));
    }
    for (name, f) in [("a", &ar.a), ("b", &ar.b), ("d", &ar.d)] {
        if f.as_float().is_none() {
            return Err(format!(
                "`{}`: {name} is `{}`, not a floating-point format",
                inst.name, f.name
            ));
        }
    }
    if ar.c != ar.d {
        return Err(format!(
            "`{}`: c is `{}` but d is `{}`; a GEMM feeds d back as c, so they must match",
            inst.name, ar.c.name, ar.d.name
        ));
    }
    Ok(())
}

/// The exact `sum a*b` of one sample.
pub fn exact_dot(inst: &Instruction, a: &[u64], b: &[u64]) -> Dyadic {
    let ar = &inst.arithmetic;
    let v = |f: &Format, r: u64| match f.decode(r) {
        Decoded::Finite(x) => x.value(),
        _ => Dyadic::zero(),
    };
    let products: Vec<Dyadic> = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| v(&ar.a, x).mul(&v(&ar.b, y)))
        .collect();
    Dyadic::sum(&products)
}

/// One sample's outcome against the exact result.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleError {
    /// |result - exact|.
    pub abs: f64,
    /// (result - exact) / |exact|, when exact is nonzero.
    pub signed_rel: Option<f64>,
    pub correctly_rounded: bool,
    pub faithful: bool,
}

/// Compare one result with the exact value (`None` when the result is not finite).
pub fn sample_error(d_format: &Format, d: u64, exact: &Dyadic) -> Option<SampleError> {
    let Decoded::Finite(x) = d_format.decode(d) else {
        return None;
    };
    let got = x.value();
    let err = got.add(&exact.neg());
    let signed_rel = (!exact.is_zero()).then(|| err.to_f64_lossy() / exact.abs().to_f64_lossy());
    let round = |mode| match ieee::round(exact.is_negative(), exact, &rounded_op(d_format, mode)) {
        Num::Fin(_, v) => Some(v),
        _ => None,
    };
    let is = |v: Option<Dyadic>| v.is_some_and(|v| v.cmp_value(&got).is_eq());
    Some(SampleError {
        abs: err.abs().to_f64_lossy(),
        signed_rel,
        correctly_rounded: is(round(Rounding::NearestEven)),
        faithful: is(round(Rounding::Down)) || is(round(Rounding::Up)),
    })
}

/// The statistics of a row, accumulated one sample at a time (and merged in sample
/// order), so that a run of any length holds only this.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    compared: usize,
    sum_abs: f64,
    max_abs: f64,
    /// Samples with a relative error, their mean and sum of squared deviations
    /// (Welford, merged by Chan et al.'s formula).
    rel_n: usize,
    rel_mean: f64,
    rel_m2: f64,
    sum_abs_rel: f64,
    max_abs_rel: f64,
    correctly_rounded: usize,
    faithful: usize,
    /// Input values beyond their format's range, clamped to its largest finite value.
    clamped: usize,
}

impl Stats {
    pub fn add(&mut self, e: &SampleError) {
        self.compared += 1;
        self.sum_abs += e.abs;
        self.max_abs = self.max_abs.max(e.abs);
        if let Some(r) = e.signed_rel {
            self.rel_n += 1;
            let delta = r - self.rel_mean;
            self.rel_mean += delta / self.rel_n as f64;
            self.rel_m2 += delta * (r - self.rel_mean);
            self.sum_abs_rel += r.abs();
            self.max_abs_rel = self.max_abs_rel.max(r.abs());
        }
        self.correctly_rounded += e.correctly_rounded as usize;
        self.faithful += e.faithful as usize;
    }

    /// The statistics of this run of samples followed by `later`'s.
    pub fn merge(&mut self, later: &Stats) {
        let (n1, n2) = (self.rel_n as f64, later.rel_n as f64);
        if later.rel_n > 0 {
            let n = n1 + n2;
            let delta = later.rel_mean - self.rel_mean;
            self.rel_mean += delta * n2 / n;
            self.rel_m2 += later.rel_m2 + delta * delta * n1 * n2 / n;
        }
        self.compared += later.compared;
        self.sum_abs += later.sum_abs;
        self.max_abs = self.max_abs.max(later.max_abs);
        self.rel_n += later.rel_n;
        self.sum_abs_rel += later.sum_abs_rel;
        self.max_abs_rel = self.max_abs_rel.max(later.max_abs_rel);
        self.correctly_rounded += later.correctly_rounded;
        self.faithful += later.faithful;
        self.clamped += later.clamped;
    }

    /// The row of `instruction` at K = `k` over `samples` samples drawn.
    pub fn row(&self, instruction: &str, k: usize, samples: usize) -> Row {
        let nf = self.compared.max(1) as f64;
        let nr = self.rel_n.max(1) as f64;
        let bias = self.rel_mean;
        let var = if self.rel_n > 1 {
            self.rel_m2 / (self.rel_n - 1) as f64
        } else {
            0.0
        };
        let half = 1.96 * (var / nr).sqrt();
        Row {
            instruction: instruction.to_string(),
            label: instruction.to_string(),
            arch: String::new(),
            file: String::new(),
            k,
            samples,
            compared: self.compared,
            mean_abs_error: self.sum_abs / nf,
            max_abs_error: self.max_abs,
            mean_rel_error: self.sum_abs_rel / nr,
            max_rel_error: self.max_abs_rel,
            bias,
            bias_ci95: [bias - half, bias + half],
            correctly_rounded: self.correctly_rounded as f64 / nf,
            faithful: self.faithful as f64 / nf,
            clamped_inputs: self.clamped,
        }
    }
}

/// Statistics of one instruction at one K from its samples' errors (in sample order).
pub fn row(instruction: &str, k: usize, samples: usize, errors: &[SampleError]) -> Row {
    let mut stats = Stats::default();
    for e in errors {
        stats.add(e);
    }
    stats.row(instruction, k, samples)
}

/// The longest dot product a report takes (each sample's a and b are held whole, and its
/// exact sum is formed from every product).
pub const MAX_K: usize = 1 << 22;

/// The most samples per instruction and K.
pub const MAX_SAMPLES: usize = 1 << 30;

/// Are the lengths and the sample count within [`MAX_K`] and [`MAX_SAMPLES`]? The error
/// names the limit.
pub fn check_sizes(options: &ReportOptions) -> Result<(), String> {
    if options.samples == 0 || options.samples > MAX_SAMPLES {
        return Err(format!(
            "{} samples per K: a report takes from 1 to {MAX_SAMPLES} (2^30)",
            options.samples
        ));
    }
    if let Some(k) = options.ks.iter().find(|&&k| k > MAX_K) {
        return Err(format!(
            "K = {k} is longer than a report takes: at most {MAX_K} (2^22)"
        ));
    }
    Ok(())
}

/// Samples per parallel task, at most; fewer for long K, so that a task holds about
/// [`CHUNK_ELEMENTS`] elements of a and of b.
const CHUNK: usize = 64;
const CHUNK_ELEMENTS: usize = 1 << 16;
/// Tasks run in parallel before their statistics are merged (in sample order).
const WINDOW: usize = 256;

/// The rows of one instruction, one per K. `progress` is called with the number of
/// samples finished. Memory stays bounded whatever the sample count: samples are drawn,
/// run and folded into [`Stats`] a window of tasks at a time.
pub fn measure(
    engine: &Engine,
    options: &ReportOptions,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<Vec<Row>, String> {
    let inst = engine.checked().instruction();
    reportable(inst)?;
    check_sizes(options)?;
    let k = inst.k();
    let mut rows = vec![];
    for &kt in &options.ks {
        if kt == 0 || kt % k != 0 {
            return Err(format!(
                "K = {kt} is not a positive multiple of `{}`'s k = {k}",
                inst.name
            ));
        }
        let chunk = (CHUNK_ELEMENTS / kt).clamp(1, CHUNK);
        let mut stats = Stats::default();
        let mut start = 0;
        while start < options.samples {
            let starts: Vec<usize> = (start..options.samples)
                .step_by(chunk)
                .take(WINDOW)
                .collect();
            let window: Vec<Result<Stats, String>> = starts
                .par_iter()
                .map(|&s| {
                    let end = (s + chunk).min(options.samples);
                    let st = chunk_stats(inst, engine, options, kt, s..end)?;
                    progress(end - s);
                    Ok(st)
                })
                .collect();
            for w in window {
                stats.merge(&w?);
            }
            start = (starts.last().copied().unwrap_or(start) + chunk).min(options.samples);
        }
        rows.push(stats.row(&inst.name, kt, options.samples));
    }
    Ok(rows)
}

/// The statistics of samples `range` at K = `kt`: drawn, accumulated over K in steps of
/// the instruction's k (d fed back as c), compared with their exact sums.
fn chunk_stats(
    inst: &Instruction,
    engine: &Engine,
    options: &ReportOptions,
    kt: usize,
    range: std::ops::Range<usize>,
) -> Result<Stats, String> {
    let k = inst.k();
    let ar = &inst.arithmetic;
    let blocks = inst.scale_count();
    let one_scale = match &ar.scale {
        Some(s) => vec![crate::inputs::pow2(&s.format, 0, false).unwrap_or(0); blocks],
        None => vec![],
    };
    let zero = crate::gemm::zero_of(&ar.c);
    let n = range.len();
    let mut a = Vec::with_capacity(n * kt);
    let mut b = Vec::with_capacity(n * kt);
    let mut clamped = 0;
    for s in range {
        let (x, y, beyond) = sample_inputs_counted(inst, options, kt, s)?;
        a.extend(x);
        b.extend(y);
        clamped += beyond;
    }
    let mut c = vec![zero; n];
    let mut d = vec![0u64; n];
    for step in 0..kt / k {
        engine
            .batch_strided(
                &c,
                (&a[step * k..], kt),
                (&b[step * k..], kt),
                (&one_scale, 0),
                (&one_scale, 0),
                &mut d,
            )
            .map_err(|e: EvalError| e.to_string())?;
        c.copy_from_slice(&d);
    }
    let mut stats = Stats {
        clamped,
        ..Stats::default()
    };
    for r in 0..n {
        let exact = exact_dot(inst, &a[r * kt..(r + 1) * kt], &b[r * kt..(r + 1) * kt]);
        if let Some(e) = sample_error(&ar.d, c[r], &exact) {
            stats.add(&e);
        }
    }
    Ok(stats)
}
