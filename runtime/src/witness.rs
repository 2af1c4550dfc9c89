//! Witness search: an input on which two instructions that take the same operands (the
//! same formats, k and scale factors) give different results. Written for mutation
//! testing (an instruction against its neighbours, [`crate::mutants`]), and meant for
//! comparing designs and generating a spec's corner cases too: [`Focus`] gathers the
//! parameters of any set of instructions from their IR, [`crate::corners::structured`]
//! builds the corner cases those parameters call for (every variant of the catalogue's
//! shapes), and [`RandomInputs`] draws inputs concentrated on them.
//!
//! [`find`] first tries the structured candidates, then random batches, on native
//! kernels from the JIT (about a hundred times faster than the interpreter), and confirms
//! every difference with the reference interpreter before returning it.

use crate::conformance::matches;
use crate::corners::{Focus, structured};
use crate::inputs::{Input, Sketch, float_at, max_finite, split_product};
use crate::mutants::same_interface;
use mmac_compiler::Checked;
use mmac_compiler::engine::{Choice, Engine, EvalError};
use mmac_compiler::exact::Dyadic;
use mmac_compiler::format::Format;
use mmac_compiler::interp;
use mmac_compiler::ir::{Instruction, NanPolicy, Pipeline};
use mmac_compiler::random::Rng;

fn p2(e: i64) -> Dyadic {
    Dyadic::pow2(e)
}

fn sp2(negative: bool, e: i64) -> Dyadic {
    Dyadic::from_parts(negative, 1, e)
}

/// Random inputs concentrated on a [`Focus`]: terms at the cuts below a reference, ties,
/// every term below an exponent of zero, cancellations, terms across chained steps,
/// extreme and raw random elements.
pub struct RandomInputs<'a> {
    inst: &'a Instruction,
    focus: &'a Focus,
    rng: Rng,
    cuts: Vec<i64>,
    /// (scale exponent, sa, sb) for every exponent a block's two scales can make.
    scales: Vec<(i64, u64, u64)>,
    dp: i64,
    dmin: i64,
    cmin: i64,
    cmax: i64,
}

impl<'a> RandomInputs<'a> {
    pub fn new(inst: &'a Instruction, focus: &'a Focus, seed: u64) -> RandomInputs<'a> {
        let ar = &inst.arithmetic;
        let mut scales = vec![];
        if let Some(s) = &ar.scale
            && let Some(ff) = s.format.as_float()
        {
            let lo = 2 * (ff.min_exponent() as i64 - ff.mantissa_bits as i64);
            let hi = 2 * ff.max_exponent() as i64;
            for e in lo..=hi {
                if let Some((x, y)) = split_product(&s.format, &s.format, &p2(e)) {
                    scales.push((e, x, y));
                }
            }
        }
        let d = ar.d.as_float();
        let c = ar.c.as_float();
        RandomInputs {
            inst,
            focus,
            rng: Rng::new(seed),
            cuts: focus.cuts(),
            scales,
            dp: d.map_or(23, |d| d.mantissa_bits as i64),
            dmin: d.map_or(-126, |d| d.min_exponent() as i64),
            cmin: c.map_or(0, |c| c.min_exponent() as i64),
            cmax: c.map_or(0, |c| c.max_exponent() as i64),
        }
    }

    /// The next input.
    pub fn draw(&mut self) -> Input {
        let k = self.inst.k();
        let mut input = Input::zeros(self.inst);
        if matches!(self.inst.arithmetic.pipeline, Pipeline::Integer(_)) {
            self.raw(&mut input);
            return input;
        }
        let mut block_exp = vec![0i64; self.inst.scale_count()];
        let steps = self.focus.chains.first().map_or(1, |l| k / l);
        let mode = self.rng.below(100);
        match mode {
            0..=34 => self.align(&mut input, &mut block_exp),
            35..=49 => self.tie(&mut input, &mut block_exp),
            50..=64 if !self.focus.zero_exponents.is_empty() => {
                self.below_zero_exponent(&mut input, &mut block_exp)
            }
            65..=74 => self.cancel(&mut input, &mut block_exp),
            75..=86 if steps > 1 => self.across_steps(&mut input, &mut block_exp),
            87..=94 => self.extreme(&mut input),
            50..=94 => self.align(&mut input, &mut block_exp),
            _ => self.raw(&mut input),
        }
        input
    }

    fn offset(&mut self) -> i64 {
        let widest = self.cuts.last().copied().unwrap_or(24);
        match self.rng.below(10) {
            0..=2 => self.rng.between(0, 2),
            3..=7 if !self.cuts.is_empty() => {
                let c = *self.rng.pick(&self.cuts);
                c + self.rng.between(-2, 2)
            }
            _ => self.rng.between(0, widest + 8),
        }
    }

    fn anchor(&mut self) -> i64 {
        match self.rng.below(10) {
            0..=5 => self.rng.between(-4, 4),
            6..=7 => self.rng.between(self.cmin, self.cmax),
            _ => self.dmin + self.rng.between(0, self.dp + 4),
        }
    }

    fn fraction(&mut self, dense: bool) -> u64 {
        if dense { self.rng.next_u64() } else { 0 }
    }

    /// Set block `j`'s scales to `2^e` (or the nearest exponent they can make).
    fn set_scale(&mut self, input: &mut Input, block_exp: &mut [i64], j: usize, e: i64) {
        if self.scales.is_empty() || j >= block_exp.len() {
            return;
        }
        let i = self
            .scales
            .partition_point(|s| s.0 < e)
            .min(self.scales.len() - 1);
        let (se, x, y) = self.scales[i];
        input.sa[j] = x;
        input.sb[j] = y;
        block_exp[j] = se;
    }

    /// A product of exponent `e` (its scales' included) on lane `lane`.
    fn product_at(
        &mut self,
        input: &mut Input,
        block_exp: &[i64],
        lane: usize,
        e: i64,
        negative: bool,
    ) {
        let ar = &self.inst.arithmetic;
        let (Some(fa), Some(fb)) = (ar.a.as_float(), ar.b.as_float()) else {
            return;
        };
        let s = ar
            .scale
            .as_ref()
            .map_or(0, |sc| block_exp[lane / sc.block as usize]);
        let e = e - s;
        let (amin, amax) = (
            fa.min_exponent() as i64 - fa.mantissa_bits as i64,
            fa.max_exponent() as i64,
        );
        let (bmin, bmax) = (
            fb.min_exponent() as i64 - fb.mantissa_bits as i64,
            fb.max_exponent() as i64,
        );
        let lo = amin.max(e - bmax);
        let hi = amax.min(e - bmin);
        let ea = if lo <= hi {
            self.rng.between(lo, hi)
        } else {
            e.clamp(amin, amax)
        };
        let dense_a = self.rng.percent(60);
        let dense_b = self.rng.percent(30);
        let (fa_bits, fb_bits) = (self.fraction(dense_a), self.fraction(dense_b));
        input.a[lane] = float_at(&ar.a, negative, ea, fa_bits);
        input.b[lane] = float_at(&ar.b, false, e - ea, fb_bits);
    }

    fn lanes(&mut self, n: usize) -> Vec<usize> {
        let k = self.inst.k();
        let mut out: Vec<usize> = vec![];
        for _ in 0..n {
            let lane = self.rng.below(k);
            if !out.contains(&lane) {
                out.push(lane);
            }
        }
        out
    }

    fn random_c(&mut self, input: &mut Input, e: i64, negative: bool) {
        let dense = self.rng.percent(50);
        let frac = self.fraction(dense);
        input.c = float_at(&self.inst.arithmetic.c, negative, e, frac);
    }

    fn align(&mut self, input: &mut Input, block_exp: &mut [i64]) {
        let k = self.inst.k();
        let e = self.anchor();
        for j in 0..block_exp.len() {
            if self.rng.percent(30) {
                let s = e + self.rng.between(-8, 8);
                self.set_scale(input, block_exp, j, s);
            }
        }
        let c_neg = self.rng.percent(50);
        match self.rng.below(10) {
            0..=5 => self.random_c(input, e, c_neg),
            6 => input.c = crate::inputs::zero(&self.inst.arithmetic.c, c_neg),
            7 => {
                let j = self.offset();
                self.random_c(input, e - j, c_neg)
            }
            _ => {
                let lane = self.rng.below(k);
                self.product_at(input, block_exp, lane, e, c_neg);
            }
        }
        let n = if self.rng.percent(10) {
            k
        } else {
            1 + self.rng.below(k.min(6))
        };
        for lane in self.lanes(n) {
            let j = self.offset();
            let neg = self.rng.percent(50);
            self.product_at(input, block_exp, lane, e - j, neg);
        }
        // sometimes a product cancels c exactly
        if self.rng.percent(25)
            && let Some(cv) = decode_value(&self.inst.arithmetic.c, input.c)
        {
            let lane = self.rng.below(k);
            let mut s = Sketch::new(self.inst);
            s.input = input.clone();
            if s.product(lane, &cv.neg()).is_some() {
                *input = s.finish();
            }
        }
    }

    fn tie(&mut self, input: &mut Input, block_exp: &mut [i64]) {
        let k = self.inst.k();
        let e = self.anchor();
        let c_neg = self.rng.percent(50);
        let odd = self.rng.percent(50);
        let mut c = p2(e);
        if odd {
            c = c.add(&p2(e - self.dp));
        }
        if c_neg {
            c = c.neg();
        }
        let p = *self.rng.pick(&self.focus.precisions.clone());
        let lane = self.rng.below(k);
        let tie_neg = if self.rng.percent(70) { c_neg } else { !c_neg };
        let mut s = Sketch::new(self.inst);
        if s.c(&c).is_none() || s.product(lane, &sp2(tie_neg, e - p - 1)).is_none() {
            return self.align(input, block_exp);
        }
        *input = s.finish();
        for (j, e) in block_exp.iter_mut().enumerate() {
            *e = decode_scale(self.inst, input, j);
        }
        let n = 1 + self.rng.below(3);
        for other in self.lanes(n) {
            if other == lane {
                continue;
            }
            let j = self.offset().max(p + 2);
            let neg = self.rng.percent(50);
            self.product_at(input, block_exp, other, e - j, neg);
        }
    }

    fn below_zero_exponent(&mut self, input: &mut Input, block_exp: &mut [i64]) {
        let z = *self.rng.pick(&self.focus.zero_exponents.clone());
        let f = self.focus.keeps.last().copied().unwrap_or(24);
        for j in 0..block_exp.len() {
            let s = z - self.rng.between(1, f + 4);
            self.set_scale(input, block_exp, j, s);
        }
        if self.rng.percent(70) {
            input.c = crate::inputs::zero(&self.inst.arithmetic.c, self.rng.percent(50));
        } else {
            let e = z - self.rng.between(1, f + 4);
            let neg = self.rng.percent(50);
            self.random_c(input, e, neg);
        }
        let n = 1 + self.rng.below(4);
        for lane in self.lanes(n) {
            let e = z - self.rng.between(1, f + 6);
            let neg = self.rng.percent(50);
            self.product_at(input, block_exp, lane, e, neg);
        }
        if self.rng.percent(30) {
            let lane = self.rng.below(self.inst.k());
            let e = (z - 1).max(self.dmin) - self.dp - 1;
            let mut s = Sketch::new(self.inst);
            s.input = input.clone();
            if s.product(lane, &p2(e)).is_some() {
                *input = s.finish();
            }
        }
    }

    fn cancel(&mut self, input: &mut Input, block_exp: &mut [i64]) {
        let k = self.inst.k();
        let e = self.anchor();
        let pairs = 1 + self.rng.below((k / 2).clamp(1, 4));
        let lanes = self.lanes(2 * pairs);
        for pair in lanes.chunks(2) {
            let [x, y] = pair else { continue };
            let neg = self.rng.percent(50);
            self.product_at(input, block_exp, *x, e, neg);
            let ar = &self.inst.arithmetic;
            let flip = ar.a.as_float().map_or(0, |f| {
                if f.signed {
                    1u64 << (f.exponent_bits + f.mantissa_bits + f.ignored_low_bits)
                } else {
                    0
                }
            });
            let nudge: i64 = *self.rng.pick(&[-1, 0, 0, 1]);
            input.a[*y] = input.a[*x] ^ flip;
            input.b[*y] = input.b[*x]
                .wrapping_add_signed(nudge << ar.b.as_float().map_or(0, |f| f.ignored_low_bits));
            if !matches!(
                ar.b.decode(input.b[*y]),
                mmac_compiler::format::Decoded::Finite(_)
            ) {
                input.b[*y] = input.b[*x];
            }
        }
        if self.rng.percent(50) {
            let neg = self.rng.percent(50);
            self.random_c(input, e, neg);
        }
        let n = self.rng.below(3);
        for lane in self.lanes(n) {
            let j = self.offset();
            let neg = self.rng.percent(50);
            self.product_at(input, block_exp, lane, e - j, neg);
        }
    }

    fn across_steps(&mut self, input: &mut Input, block_exp: &mut [i64]) {
        let k = self.inst.k();
        let l = *self.rng.pick(&self.focus.chains.clone());
        let e = self.anchor();
        let c_neg = self.rng.percent(50);
        self.random_c(input, e, c_neg);
        let steps = k / l;
        for _ in 0..1 + self.rng.below(4) {
            let t = self.rng.below(steps);
            let lane = t * l + self.rng.below(l);
            let j = if self.rng.percent(30) {
                0
            } else {
                self.offset()
            };
            let neg = self.rng.percent(50);
            self.product_at(input, block_exp, lane, e - j, neg);
        }
    }

    fn extreme(&mut self, input: &mut Input) {
        let ar = &self.inst.arithmetic;
        let k = self.inst.k();
        let pick_elem = |rng: &mut Rng, f: &Format| -> u64 {
            let Some(ff) = f.as_float() else {
                return rng.finite(f);
            };
            let neg = rng.percent(50);
            let frac = rng.next_u64();
            match rng.below(5) {
                0 => max_finite(f, neg).unwrap_or(0),
                1 => float_at(f, neg, ff.max_exponent() as i64 - rng.between(0, 3), frac),
                2 => float_at(
                    f,
                    neg,
                    ff.min_exponent() as i64 - rng.between(0, ff.mantissa_bits as i64),
                    frac,
                ),
                3 => crate::inputs::zero(f, neg),
                _ => rng.finite(f),
            }
        };
        input.c = pick_elem(&mut self.rng, &ar.c);
        for i in 0..k {
            if self.rng.percent(40) {
                input.a[i] = pick_elem(&mut self.rng, &ar.a);
                input.b[i] = pick_elem(&mut self.rng, &ar.b);
            }
        }
        if let Some(s) = &ar.scale {
            for j in 0..input.sa.len() {
                if self.rng.percent(50) {
                    input.sa[j] = self.rng.finite(&s.format);
                    input.sb[j] = self.rng.finite(&s.format);
                }
            }
        }
    }

    fn raw(&mut self, input: &mut Input) {
        let ar = &self.inst.arithmetic;
        input.c = self.rng.finite(&ar.c);
        for i in 0..self.inst.k() {
            input.a[i] = self.rng.finite(&ar.a);
            input.b[i] = self.rng.finite(&ar.b);
        }
        if let Some(s) = &ar.scale {
            for j in 0..input.sa.len() {
                input.sa[j] = self.rng.finite(&s.format);
                input.sb[j] = self.rng.finite(&s.format);
            }
        }
    }
}

fn decode_value(f: &Format, raw: u64) -> Option<Dyadic> {
    match f.decode(raw) {
        mmac_compiler::format::Decoded::Finite(x) if !x.is_zero() => Some(x.value()),
        _ => None,
    }
}

fn decode_scale(inst: &Instruction, input: &Input, j: usize) -> i64 {
    let Some(s) = &inst.arithmetic.scale else {
        return 0;
    };
    let e = |raw: u64| match s.format.decode(raw) {
        mmac_compiler::format::Decoded::Finite(x) => x.exponent as i64,
        _ => 0,
    };
    e(input.sa[j]) + e(input.sb[j])
}

/// An input on which two instructions differ, with both results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Witness {
    pub input: Input,
    /// The first instruction's result.
    pub left: u64,
    /// The second instruction's result.
    pub right: u64,
    /// The structured candidate's name, or `random draw N`.
    pub origin: String,
}

/// Why a search could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    #[error("`{0}` and `{1}` do not take the same operands (formats, k, scale factors)")]
    Incomparable(String, String),
    #[error(transparent)]
    Eval(#[from] EvalError),
    /// The JIT found a difference the interpreter does not confirm: an engine bug.
    #[error("the JIT and the interpreter disagree on `{instruction}` for {input}")]
    EnginesDisagree { instruction: String, input: String },
}

/// How hard [`find`] looks.
#[derive(Clone, Debug)]
pub struct SearchOptions {
    /// Random inputs drawn after the structured candidates.
    pub random_draws: usize,
    pub seed: u64,
    /// Witnesses wanted; the search stops when it has this many.
    pub wanted: usize,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            random_draws: 1 << 20,
            seed: 0x5eed_0fd1,
            wanted: 1,
        }
    }
}

/// Evaluates one instruction on batches of inputs through its engine (compiled quickly:
/// a search runs a few thousand inputs), the interpreter confirming what it finds.
pub(crate) struct Evaluator<'a> {
    engine: Engine<'a>,
}

impl<'a> Evaluator<'a> {
    pub(crate) fn new(checked: Checked<'a>) -> Evaluator<'a> {
        Evaluator {
            engine: Engine::new(checked, Choice::QUICK),
        }
    }

    /// Each input's result, `None` where the engine refuses that input (one refused input
    /// does not cost the others their results).
    pub(crate) fn each(&self, inputs: &[&Input]) -> Vec<Option<u64>> {
        match self.run(inputs) {
            Ok(d) => d.into_iter().map(Some).collect(),
            Err(_) => inputs
                .iter()
                .map(|i| self.run(&[i]).ok().map(|d| d[0]))
                .collect(),
        }
    }

    fn run(&self, inputs: &[&Input]) -> Result<Vec<u64>, EvalError> {
        crate::blackbox::evaluate(&self.engine, inputs)
    }

    fn interp(&self, input: &Input) -> Result<u64, EvalError> {
        interp::run(self.engine.checked(), &input.operands())
    }
}

/// Do results of `inst` compare with any NaN matching any NaN (`nan ieee`)?
pub fn nan_any(inst: &Instruction) -> bool {
    pipeline_nan_any(&inst.arithmetic.pipeline)
}

fn pipeline_nan_any(p: &Pipeline) -> bool {
    match p {
        Pipeline::Fused(f) => f.nan == NanPolicy::Ieee,
        Pipeline::Sequential(s) => s.nan == NanPolicy::Ieee,
        Pipeline::Integer(_) => false,
        // d is the result of its last run (whose rule applies), or of an IEEE addition or
        // FMA, whose NaN is the format's canonical one
        Pipeline::Composed(c) => match c.result {
            mmac_compiler::ir::StepValue::Step(i) => match &c.steps[i] {
                mmac_compiler::ir::Step::Run { arithmetic, .. } => {
                    pipeline_nan_any(&arithmetic.pipeline)
                }
                _ => false,
            },
            _ => false,
        },
    }
}

/// Inputs per batch.
const BATCH: usize = 2048;

/// Look for inputs on which `x` and `y` differ (module docs): every structured candidate
/// first, then random draws, until `options.wanted` witnesses are found, no two with the
/// same products (a, b and scale factors). Every witness is confirmed by the interpreter. An empty list means none was found, not that none exists
/// ([`crate::observability`] proves that).
pub fn find(x: Checked, y: Checked, options: &SearchOptions) -> Result<Vec<Witness>, SearchError> {
    search(x, y, options).map(|s| s.witnesses)
}

/// What [`search`] found, and how many inputs it tried to find it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Search {
    pub witnesses: Vec<Witness>,
    /// Structured candidates evaluated (all of them when no witness was wanted sooner).
    pub structured_tried: usize,
    /// Random inputs evaluated.
    pub random_tried: usize,
}

/// [`find`], also counting the structured and random inputs tried.
pub fn search(x: Checked, y: Checked, options: &SearchOptions) -> Result<Search, SearchError> {
    let (xi, yi) = (x.instruction(), y.instruction());
    if !same_interface(xi, yi) {
        return Err(SearchError::Incomparable(xi.name.clone(), yi.name.clone()));
    }
    let focus = Focus::of(&[xi, yi]);
    let (ex, ey) = (Evaluator::new(x), Evaluator::new(y));
    let nan = nan_any(xi) || nan_any(yi);
    let d = &xi.arithmetic.d;
    let mut found: Vec<Witness> = vec![];
    let check = |batch: &[(String, Input)], found: &mut Vec<Witness>| -> Result<(), SearchError> {
        let inputs: Vec<&Input> = batch.iter().map(|(_, i)| i).collect();
        let (dx, dy) = (ex.run(&inputs)?, ey.run(&inputs)?);
        for (i, (name, input)) in batch.iter().enumerate() {
            if found.len() >= options.wanted {
                break;
            }
            // witnesses differ in their products, not only in c
            let seen = found.iter().any(|w| {
                w.input.a == input.a
                    && w.input.b == input.b
                    && w.input.sa == input.sa
                    && w.input.sb == input.sb
            });
            if seen || matches(d, dx[i], dy[i], nan) {
                continue;
            }
            let (left, right) = (ex.interp(input)?, ey.interp(input)?);
            if matches(d, left, right, nan) {
                let culprit = if left != dx[i] { xi } else { yi };
                return Err(SearchError::EnginesDisagree {
                    instruction: culprit.name.clone(),
                    input: input.case_fields(xi),
                });
            }
            found.push(Witness {
                input: input.clone(),
                left,
                right,
                origin: name.clone(),
            });
        }
        Ok(())
    };
    let candidates = structured(xi, &focus);
    let mut structured_tried = 0;
    for chunk in candidates.chunks(BATCH) {
        check(chunk, &mut found)?;
        structured_tried += chunk.len();
        if found.len() >= options.wanted {
            return Ok(Search {
                witnesses: found,
                structured_tried,
                random_tried: 0,
            });
        }
    }
    let mut random = RandomInputs::new(xi, &focus, options.seed);
    let mut drawn = 0;
    while drawn < options.random_draws && found.len() < options.wanted {
        let n = BATCH.min(options.random_draws - drawn);
        let batch: Vec<(String, Input)> = (0..n)
            .map(|i| (format!("random draw {}", drawn + i), random.draw()))
            .collect();
        drawn += n;
        check(&batch, &mut found)?;
    }
    Ok(Search {
        witnesses: found,
        structured_tried,
        random_tried: drawn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutants::neighbours;
    use crate::observability::proven_equivalent;

    fn load(path: &str) -> mmac_compiler::CheckedSpec {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = std::fs::read_to_string(root.join(path)).unwrap();
        mmac_compiler::compile(path, &text).unwrap()
    }

    /// Every neighbour of these instructions is separated by a structured candidate or a
    /// few random draws, unless it is proven unobservable; the witness really separates.
    #[test]
    fn neighbours_are_separated() {
        for (file, name) in [
            ("specs/hopper.mma", "mma.m16n8k16.f32.f16.f16.f32"),
            ("specs/hopper.mma", "mma.m16n8k16.f16.f16.f16.f16"),
            ("specs/hopper.mma", "mma.m16n8k16.f32.bf16.bf16.f32"),
            ("specs/ada.mma", "mma.m16n8k16.f32.e4m3.e4m3.f32"),
            ("specs/cdna3.mma", "v_mfma_f32_16x16x16_f16"),
            ("specs/cdna3.mma", "v_mfma_f32_16x16x32_fp8_bf8"),
            ("specs/cdna2.mma", "v_mfma_f32_16x16x16f16"),
            (
                "specs/blackwell.mma",
                "tcgen05.mma.block_scale.m64n8k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0",
            ),
            (
                "specs/blackwell.mma",
                "tcgen05.mma.m64n8k32.kind::f8f6f4.f16.e2m1.e2m3",
            ),
            (
                "specs/examples/kulisch.mma",
                "fixed.m16n8k32.f32.e4m3.e4m3.f32",
            ),
        ] {
            let v = load(file);
            let i = v.spec().position(name).unwrap();
            let checked = v.get(i);
            let inst = checked.instruction();
            for n in neighbours(checked) {
                if !n.same_interface(inst) || proven_equivalent(checked, n.instruction()).is_some()
                {
                    continue;
                }
                let opts = SearchOptions {
                    random_draws: 4096,
                    ..Default::default()
                };
                let w = find(checked, n.checked.checked(), &opts).unwrap();
                assert_eq!(w.len(), 1, "{name} {}: no witness", n.label());
                let ops = w[0].input.operands();
                assert_ne!(
                    interp::run(checked, &ops).unwrap(),
                    interp::run(n.checked.checked(), &ops).unwrap()
                );
            }
        }
    }

    /// Instructions that take other operands cannot be compared.
    #[test]
    fn other_operands_are_incomparable() {
        let v = load("specs/hopper.mma");
        let x = v.spec().position("mma.m16n8k16.f32.f16.f16.f32").unwrap();
        let y = v.spec().position("mma.m16n8k8.f32.f16.f16.f32").unwrap();
        let r = find(v.get(x), v.get(y), &SearchOptions::default());
        assert!(matches!(r, Err(SearchError::Incomparable(..))));
    }
}
