//! Inference: a spec from a black box ([`crate::blackbox`]). The space searched is the
//! standard prelude's: every pipeline that can take the box's operands (T-, ST-, GST-,
//! TR-, GTR- and E-FDPA, the FTZ multiply-add, sequential FMA, integer MMA and the
//! single-bit forms), each with its numeric and rounding parameters ([`families`]).
//!
//! The loop, all of it driven by the box's answers:
//! 1. **Probes.** From the corner-case catalogue ([`crate::corners`]): the feature-probe
//!    battery ([`crate::probes::battery`]: precision around F, ties at ±¼, ½, ¾ ulp,
//!    overflow, NaN and Inf, subnormals, signed zeros), signed zero sums and NaN
//!    payloads, the structured corner cases ([`crate::corners::structured`]) at every
//!    alignment cut the space allows (precision at the cut, truncation direction, ties
//!    decided by a bit at the cut, carries, chain and group boundaries) and random inputs
//!    concentrated on them; the box answers them all in one batch.
//! 2. **Narrowing.** Per pipeline, a coordinate search: each parameter in turn is set to
//!    the value of its domain that disagrees with the fewest answers, until no parameter
//!    moves. Candidates are evaluated on the interpreter against the probes that killed
//!    candidates before (move-to-front), and stop at the first disagreement more than the
//!    best so far; a survivor is checked on all probes by its JIT kernel.
//! 3. **Separation.** Candidates that agree with every answer so far (another value of
//!    one parameter, or the best of another pipeline) are rivals. A rival proven to
//!    compute the same as the winner on every input ([`crate::observability`]) is
//!    unobservable and reported so; the others get targeted probes: the structured corner
//!    cases of the winner and its rivals (zeros of growing exponent for e_zero, chain and
//!    group boundaries, cuts at every F and P still in play), then a witness search
//!    ([`crate::witness::find`]) per rival. The box answers; narrowing runs again.
//! 4. **Verification.** The winner runs on `verify` random inputs drawn to stress its own
//!    parameters ([`crate::witness::RandomInputs`]); any difference is a failure with a
//!    witness, and no spec is reported verified.

use crate::blackbox::{BlackBox, BoxError, Interface, evaluate};
use crate::conformance::matches;
use crate::corners::{self, Focus};
use crate::inputs::Input;
use crate::observability::proven_equivalent;
use crate::probes;
use crate::witness::{self, RandomInputs, SearchOptions, nan_any};
use mmac_compiler::check::Override;
use mmac_compiler::checked::Source;
use mmac_compiler::engine::{Choice, Engine, Prepared};
use mmac_compiler::exact::Dyadic;
use mmac_compiler::exact::Rounding;
use mmac_compiler::format::FormatKind;
use mmac_compiler::interp;
use mmac_compiler::ir::{self, Instruction, Overflow};
use mmac_compiler::{Checked, CheckedSpec, compile};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

/// A parameter's value: a number or a keyword (a rounding mode, an overflow rule).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    Int(i64),
    Word(&'static str),
}

impl Value {
    /// The value as the checker holds it: a number, a rounding mode or an overflow rule
    /// (None for a word that is neither).
    fn checked(&self) -> Option<ir::Value> {
        match *self {
            Value::Int(v) => Some(ir::Value::Int(v)),
            Value::Word(w) => Rounding::ALL
                .into_iter()
                .find(|r| r.keyword() == w)
                .map(ir::Value::Rounding)
                .or_else(|| {
                    [Overflow::Inf, Overflow::Saturate, Overflow::Wrap]
                        .into_iter()
                        .find(|o| o.keyword() == w)
                        .map(ir::Value::Overflow)
                }),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Word(w) => write!(f, "{w}"),
        }
    }
}

/// One point of the space: a prelude pipeline and a value for each of its parameters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Candidate {
    pub pipeline: &'static str,
    pub args: Vec<(&'static str, Value)>,
}

impl Candidate {
    fn with(&self, name: &str, v: &Value) -> Candidate {
        let mut c = self.clone();
        for (n, x) in &mut c.args {
            if *n == name {
                *x = v.clone();
            }
        }
        c
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.args.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

/// A pipeline of the prelude with the domain of each parameter for one interface.
#[derive(Clone, Debug)]
pub struct Family {
    pub pipeline: &'static str,
    /// What the library calls it.
    pub title: &'static str,
    pub params: Vec<Param>,
}

/// A parameter: its domain (in scan order), where the search starts, and the value the
/// pipeline takes when the argument is left out (not written in the spec).
#[derive(Clone, Debug)]
pub struct Param {
    pub name: &'static str,
    pub domain: Vec<Value>,
    pub start: Value,
    pub default: Option<Value>,
}

impl Family {
    fn start(&self) -> Candidate {
        Candidate {
            pipeline: self.pipeline,
            args: self
                .params
                .iter()
                .map(|p| (p.name, p.start.clone()))
                .collect(),
        }
    }

    /// The `uses` line in the library's style: parameters at their default left out.
    pub fn uses(&self, c: &Candidate) -> String {
        let args: Vec<String> = self
            .params
            .iter()
            .zip(&c.args)
            .filter(|(p, (_, v))| p.default.as_ref() != Some(v))
            .map(|(_, (n, v))| format!("{n} = {v}"))
            .collect();
        format!("{}({})", c.pipeline, args.join(", "))
    }
}

const ROUNDINGS: [&str; 5] = ["toward_zero", "nearest_even", "down", "up", "nearest_away"];

fn ints(lo: i64, hi: i64) -> Vec<Value> {
    (lo..=hi).map(Value::Int).collect()
}

fn divisors(k: usize) -> Vec<Value> {
    (1..=k)
        .filter(|d| k.is_multiple_of(*d))
        .map(|d| Value::Int(d as i64))
        .collect()
}

/// The pipelines of the prelude that could take these operands, with the domains of their
/// parameters (values the checker refuses are passed over when the search meets them).
pub fn families(iface: &Interface) -> Vec<Family> {
    let k = iface.k;
    let p = |name, domain: Vec<Value>, start: Value, default: Option<Value>| Param {
        name,
        domain,
        start,
        default,
    };
    let int = Value::Int;
    match (&iface.a.kind, &iface.d.kind) {
        (FormatKind::Int(a), FormatKind::Int(_)) => {
            if a.bits == 1 {
                return ["xor_popc", "and_popc"]
                    .into_iter()
                    .map(|pipeline| Family {
                        pipeline,
                        title: "single-bit MMA",
                        params: vec![],
                    })
                    .collect();
            }
            vec![Family {
                pipeline: "int_mma",
                title: "integer MMA",
                params: vec![p(
                    "on_overflow",
                    vec![Value::Word("wrap"), Value::Word("saturate")],
                    Value::Word("wrap"),
                    Some(Value::Word("wrap")),
                )],
            }]
        }
        (_, FormatKind::Float(d)) => {
            let dp = d.mantissa_bits as i64;
            let dmin = d.min_exponent() as i64;
            let rho_default = if iface.d.name == "f16" {
                "nearest_even"
            } else {
                "toward_zero"
            };
            let rounding = || ROUNDINGS.iter().map(|r| Value::Word(r)).collect::<Vec<_>>();
            let f = || ints(1, 64);
            let chain = || divisors(k);
            let e_zero = || ints(dmin - dp - 40, dmin + 8);
            // the rows T-, ST- and GST-FDPA share (GST without rho)
            let fdpa = || {
                vec![
                    p("F", f(), int(dp + 2), None),
                    p("L", chain(), int(k as i64), None),
                    p("e_zero", e_zero(), int(dmin - dp), None),
                    p(
                        "rho",
                        rounding(),
                        Value::Word(rho_default),
                        Some(Value::Word(rho_default)),
                    ),
                ]
            };
            // TR- and GTR-FDPA
            let two_level = || {
                vec![
                    p("F", f(), int(dp + 1), None),
                    p("F2", f(), int(dp + 8), None),
                    p("L", chain(), int(k as i64), None),
                ]
            };
            let mut fams = vec![
                Family {
                    pipeline: "t_fdpa",
                    title: "T-FDPA",
                    params: [fdpa(), vec![p("P", ints(1, dp), int(dp), Some(int(dp)))]].concat(),
                },
                Family {
                    pipeline: "tr_fdpa",
                    title: "TR-FDPA",
                    params: two_level(),
                },
                Family {
                    pipeline: "gtr_fdpa",
                    title: "GTR-FDPA",
                    params: two_level(),
                },
                Family {
                    pipeline: "e_fdpa",
                    title: "E-FDPA",
                    params: vec![p("L", chain(), int(k as i64), None)],
                },
                Family {
                    pipeline: "ftz_mul_add",
                    title: "FTZ multiply-add",
                    params: vec![p("P", divisors(k), int(2.min(k as i64)), None)],
                },
                Family {
                    pipeline: "fma",
                    title: "sequential FMA",
                    params: vec![],
                },
            ];
            if let Some((_, block)) = iface.scale {
                fams.insert(
                    0,
                    Family {
                        pipeline: "st_fdpa",
                        title: "ST-FDPA",
                        params: fdpa(),
                    },
                );
                fams.insert(
                    1,
                    Family {
                        pipeline: "gst_fdpa",
                        title: "GST-FDPA",
                        params: [
                            vec![p("G", divisors(k), int(block as i64), None)],
                            fdpa()[..3].to_vec(),
                        ]
                        .concat(),
                    },
                );
            }
            fams
        }
        _ => vec![],
    }
}

/// Where the spec is written and what it is called.
#[derive(Clone, Debug)]
pub struct Naming {
    pub arch: String,
    pub instruction: String,
}

impl Naming {
    /// `inferred` and a name from the operands: `inferred.k16.f32.f16.f16.f32`.
    pub fn default_for(iface: &Interface) -> Naming {
        Naming {
            arch: "inferred".into(),
            instruction: format!(
                "inferred.k{}.{}.{}.{}.{}",
                iface.k, iface.d.name, iface.a.name, iface.b.name, iface.c.name
            ),
        }
    }
}

/// The text of a one-instruction spec using `uses`.
pub fn spec_text(iface: &Interface, naming: &Naming, uses: &str, header: &str) -> String {
    let scale = iface
        .scale
        .as_ref()
        .map(|(f, b)| format!("    scale {} block {b}\n", f.name))
        .unwrap_or_default();
    format!(
        "{header}arch {} \"inferred by mmac infer\"\nimport std\n\ninstruction {} {{\n    shape 16 x 8 x {}\n    types a = {}, b = {}, c = {}, d = {}\n{scale}    evidence assumption\n    uses {uses}\n}}\n",
        naming.arch,
        naming.instruction,
        iface.k,
        iface.a.name,
        iface.b.name,
        iface.c.name,
        iface.d.name,
    )
}

/// How hard inference works.
#[derive(Clone, Debug)]
pub struct Options {
    /// Random cases the winner is verified on.
    pub verify: usize,
    pub seed: u64,
    /// Random probes drawn at the start, beside the structured ones.
    pub random_probes: usize,
    /// Separation rounds at most.
    pub rounds: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            verify: 10_000,
            seed: 0x1afe_2c0d,
            random_probes: 2000,
            rounds: 8,
        }
    }
}

/// One probe the box answered.
#[derive(Clone, Debug)]
pub struct Observation {
    pub name: String,
    pub input: Input,
    pub d: u64,
}

/// A case on which a candidate and the box differ.
#[derive(Clone, Debug)]
pub struct Mismatch {
    pub probe: String,
    pub input: Input,
    pub request: String,
    pub box_d: u64,
    pub candidate_d: Option<u64>,
}

/// What was learnt of one parameter.
#[derive(Clone, Debug)]
pub struct ParameterReport {
    pub name: String,
    pub value: String,
    /// Each line: an alternative and the probe that rules it out, or why it could not be.
    pub evidence: Vec<String>,
}

/// The outcome of inference.
#[derive(Clone, Debug)]
pub struct Inference {
    pub family: String,
    pub uses: String,
    /// The spec: a comment block (parameters, probes, verification) and the instruction.
    pub spec: String,
    pub parameters: Vec<ParameterReport>,
    /// Other pipelines' best candidates and how they fail.
    pub other_families: Vec<String>,
    /// Cases the box answered: probes, then verification.
    pub probes: usize,
    pub verify_cases: usize,
    /// Some: the winner failed (a probe or verification case it gets wrong).
    pub failure: Option<Mismatch>,
    /// Rivals no probe separated and no proof covers (reported, never hidden).
    pub unresolved: Vec<String>,
}

impl Inference {
    pub fn verified(&self) -> bool {
        self.failure.is_none()
    }
}

/// Why inference could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum InferError {
    #[error(transparent)]
    Box(#[from] BoxError),
    #[error("no pipeline of the prelude takes these operands ({0})")]
    NoFamily(String),
}

struct Compiled {
    v: CheckedSpec,
    /// Its engine, prepared when first needed.
    engine: Option<Prepared>,
}

impl Compiled {
    fn checked(&self) -> Checked<'_> {
        self.v.get(0)
    }
    fn inst(&self) -> &Instruction {
        self.checked().instruction()
    }
    /// Its engine: the kernel compiled quickly (on first use: it runs the probes and a
    /// few thousand verification cases, so compile time dominates), else the interpreter.
    fn engine(&mut self) -> Engine<'_> {
        let checked = self.v.get(0);
        let prepared = self
            .engine
            .get_or_insert_with(|| Engine::prepare(checked, Choice::QUICK));
        Engine::prepared(checked, prepared)
    }
}

/// Probes the interpreter runs on a candidate before its JIT kernel runs all of them.
const QUICK: usize = 48;

/// Searches begun again from another start and sample when the best candidate still
/// disagrees with some answer.
const RESTARTS: usize = 4;

/// About how many probes a sampled scope holds.
const SAMPLE: usize = 300;

/// The probes a candidate is scored on. Narrowing runs on a sample first (the
/// interpreter alone, no kernel compiled), then on every probe; and on the high probes
/// (out of reach of every e_zero) before all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Scope {
    All,
    High,
    Sample,
    HighSample,
}

struct Search<'a> {
    iface: &'a Interface,
    naming: &'a Naming,
    bx: &'a mut dyn BlackBox,
    obs: Vec<Observation>,
    seen: HashSet<Input>,
    /// Probe indices, the ones that killed candidates most recently first.
    order: Vec<usize>,
    compiled: HashMap<Candidate, Option<Rc<std::cell::RefCell<Compiled>>>>,
    /// Per family, the parsed spec of its start, which candidates are checked from.
    templates: HashMap<&'static str, Option<Arc<Source>>>,
    /// Exact disagreement counts (on all probes, or on the high ones), valid while
    /// `obs.len()` is the first field.
    counts: HashMap<(Candidate, Scope), (usize, usize)>,
    /// Per probe: does some term (c or a product) lie above every e_zero in the domain?
    /// On such a probe no exponent of zero can act, so parameters coupled with e_zero
    /// through the cut `e_zero - F` are narrowed on these first.
    high: Vec<bool>,
    /// Which probes the sampled scopes take (moved on a restart).
    sample_offset: usize,
    /// The exponent above which a probe is high: the largest e_zero of the domain, plus
    /// a margin for the products' carry.
    high_above: i64,
}

/// The largest exponent of a term of the input (c, or a product with its block's
/// scales); infinite for NaN and Inf elements, None when every term is zero.
fn top_exponent(iface: &Interface, input: &Input) -> Option<i64> {
    use mmac_compiler::format::Decoded;
    let value = |f: &mmac_compiler::format::Format, raw: u64| -> Result<Option<Dyadic>, ()> {
        match f.decode(raw) {
            Decoded::Finite(x) if x.is_zero() => Ok(None),
            Decoded::Finite(x) => Ok(Some(x.value())),
            _ => Err(()),
        }
    };
    let int_like = |f: &mmac_compiler::format::Format| f.as_int().is_some();
    if int_like(&iface.d) {
        return Some(i64::MAX);
    }
    let mut top: Option<i64> = None;
    let mut see = |v: Option<Dyadic>| {
        if let Some(e) = v.and_then(|v| v.leading_exponent()) {
            top = Some(top.map_or(e, |t: i64| t.max(e)));
        }
    };
    match value(&iface.c, input.c) {
        Ok(v) => see(v),
        Err(()) => return Some(i64::MAX),
    }
    for i in 0..input.a.len().min(input.b.len()) {
        let (Ok(x), Ok(y)) = (value(&iface.a, input.a[i]), value(&iface.b, input.b[i])) else {
            return Some(i64::MAX);
        };
        let mut prod = match (x, y) {
            (Some(x), Some(y)) => x.mul(&y),
            _ => continue,
        };
        if let Some((f, block)) = &iface.scale {
            let j = i / block;
            let (Some(&ra), Some(&rb)) = (input.sa.get(j), input.sb.get(j)) else {
                continue;
            };
            match (value(f, ra), value(f, rb)) {
                (Ok(Some(u)), Ok(Some(w))) => prod = prod.mul(&u).mul(&w),
                (Ok(_), Ok(_)) => continue,
                _ => return Some(i64::MAX),
            }
        }
        see(Some(prod));
    }
    top
}

impl<'a> Search<'a> {
    /// A search that has asked nothing yet.
    fn new(iface: &'a Interface, naming: &'a Naming, bx: &'a mut dyn BlackBox) -> Search<'a> {
        Search {
            iface,
            naming,
            bx,
            obs: vec![],
            seen: HashSet::new(),
            order: vec![],
            compiled: HashMap::new(),
            templates: HashMap::new(),
            counts: HashMap::new(),
            high: vec![],
            sample_offset: 0,
            high_above: iface
                .d
                .as_float()
                .map_or(i64::MAX, |d| d.min_exponent() as i64 + 8 + 2),
        }
    }

    /// Candidate `c`, checked (None when it does not check), compiled once.
    fn compile(&mut self, fam: &Family, c: &Candidate) -> Option<Rc<std::cell::RefCell<Compiled>>> {
        if let Some(x) = self.compiled.get(c) {
            return x.clone();
        }
        let out = self
            .check(fam, c)
            .map(|v| Rc::new(std::cell::RefCell::new(Compiled { v, engine: None })));
        self.compiled.insert(c.clone(), out.clone());
        out
    }

    /// Candidate `c` through the checker: the spec of its family's start, parsed once, with
    /// every parameter moved to `c`'s value by an override (no spec text per candidate).
    fn check(&mut self, fam: &Family, c: &Candidate) -> Option<CheckedSpec> {
        let (iface, naming) = (self.iface, self.naming);
        let template = self
            .templates
            .entry(fam.pipeline)
            .or_insert_with(|| {
                let text = spec_text(iface, naming, &fam.uses(&fam.start()), "");
                Source::parse("inferred.mma", &text).ok()
            })
            .clone()?;
        let overrides = c
            .args
            .iter()
            .map(|(name, v)| {
                Some(Override {
                    instruction: naming.instruction.clone(),
                    parameter: name.to_string(),
                    value: v.checked()?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        template
            .check_instruction(&naming.instruction, &overrides)
            .ok()
    }

    /// Ask the box about new inputs (those not asked before).
    fn ask(&mut self, named: Vec<(String, Input)>) -> Result<usize, BoxError> {
        let fresh: Vec<(String, Input)> = named
            .into_iter()
            .filter(|(_, i)| self.iface.misfit(i).is_none() && self.seen.insert(i.clone()))
            .collect();
        if fresh.is_empty() {
            return Ok(0);
        }
        let inputs: Vec<Input> = fresh.iter().map(|(_, i)| i.clone()).collect();
        let mut answers = vec![];
        for chunk in inputs.chunks(4096) {
            answers.extend(self.bx.answer(chunk)?);
        }
        let n = fresh.len();
        for ((name, input), d) in fresh.into_iter().zip(answers) {
            // new probes go first: they were chosen to separate the current rivals
            self.order.insert(0, self.obs.len());
            self.high
                .push(top_exponent(self.iface, &input).is_some_and(|e| e > self.high_above));
            self.obs.push(Observation { name, input, d });
        }
        Ok(n)
    }

    /// Disagreements of a candidate with the box, counted up to `bound + 1` (a count above
    /// `bound` is only a lower bound). `None`: the candidate does not check.
    fn disagreements(&mut self, fam: &Family, c: &Candidate, bound: usize) -> Option<usize> {
        self.disagreements_on(fam, c, bound, Scope::All)
    }

    fn in_scope(&self, i: usize, scope: Scope) -> bool {
        let sampled = || (i + self.sample_offset).is_multiple_of((self.obs.len() / SAMPLE).max(1));
        match scope {
            Scope::All => true,
            Scope::High => self.high[i],
            Scope::Sample => sampled(),
            Scope::HighSample => self.high[i] && sampled(),
        }
    }

    /// [`Search::disagreements`] on the probes of a scope.
    fn disagreements_on(
        &mut self,
        fam: &Family,
        c: &Candidate,
        bound: usize,
        scope: Scope,
    ) -> Option<usize> {
        let key = (c.clone(), scope);
        if let Some(&(n, count)) = self.counts.get(&key)
            && n == self.obs.len()
        {
            return Some(count);
        }
        let comp = self.compile(fam, c)?;
        let mut comp = comp.borrow_mut();
        let d = comp.inst().arithmetic.d.clone();
        let nan = nan_any(comp.inst());
        let mut wrong = 0;
        let mut first_killer = None;
        let sampled = matches!(scope, Scope::Sample | Scope::HighSample);
        let quick = if sampled { self.order.len() } else { QUICK };
        for pos in 0..self.order.len().min(quick) {
            if !self.in_scope(self.order[pos], scope) {
                continue;
            }
            let o = &self.obs[self.order[pos]];
            let ok = interp::run(comp.checked(), &o.input.operands())
                .is_ok_and(|got| matches(&d, o.d, got, nan));
            if !ok {
                wrong += 1;
                first_killer.get_or_insert(pos);
                if wrong > bound {
                    break;
                }
            }
        }
        if wrong <= bound && self.order.len() > quick {
            // every probe, on the JIT
            let inputs: Vec<Input> = self.obs.iter().map(|o| o.input.clone()).collect();
            let got = evaluate(&comp.engine(), &inputs);
            wrong = 0;
            first_killer = None;
            for (pos, &i) in self.order.iter().enumerate() {
                if !self.in_scope(i, scope) {
                    continue;
                }
                let ok = got
                    .as_ref()
                    .is_ok_and(|g| matches(&d, self.obs[i].d, g[i], nan));
                if !ok {
                    wrong += 1;
                    first_killer.get_or_insert(pos);
                }
            }
            self.counts.insert(key, (self.obs.len(), wrong));
        } else if wrong <= bound {
            self.counts.insert(key, (self.obs.len(), wrong));
        }
        if let Some(pos) = first_killer
            && pos > 0
        {
            let i = self.order.remove(pos);
            self.order.insert(0, i);
        }
        Some(wrong)
    }

    /// The first probe a candidate gets wrong, and how many it gets wrong (all probes).
    fn first_wrong(&mut self, fam: &Family, c: &Candidate) -> Option<(usize, Mismatch)> {
        let comp = self.compile(fam, c)?;
        let mut comp = comp.borrow_mut();
        let inputs: Vec<Input> = self.obs.iter().map(|o| o.input.clone()).collect();
        let got = evaluate(&comp.engine(), &inputs).ok();
        let d = &comp.inst().arithmetic.d;
        let nan = nan_any(comp.inst());
        let mut first = None;
        let mut count = 0;
        for (i, o) in self.obs.iter().enumerate() {
            let mine = got.as_ref().map(|g| g[i]);
            if mine.is_some_and(|m| matches(d, o.d, m, nan)) {
                continue;
            }
            count += 1;
            first.get_or_insert_with(|| Mismatch {
                probe: o.name.clone(),
                input: o.input.clone(),
                request: self.iface.request(&o.input),
                box_d: o.d,
                candidate_d: mine,
            });
        }
        first.map(|m| (count, m))
    }

    /// Coordinate search within one family from `start`.
    fn narrow(&mut self, fam: &Family, start: Candidate) -> Option<(Candidate, usize)> {
        // parameters coupled with e_zero first, on the probes no e_zero can reach
        let mut cur = start;
        let stages: &[(Scope, &str)] = if fam.params.iter().any(|p| p.name == "e_zero") {
            &[
                (Scope::HighSample, "e_zero"),
                (Scope::High, "e_zero"),
                (Scope::Sample, ""),
            ]
        } else {
            &[(Scope::Sample, "")]
        };
        let mut sampled_wrong = 0;
        for &(scope, frozen) in stages {
            if let Some((c, n)) = self.narrow_on(fam, cur.clone(), scope, frozen) {
                cur = c;
                sampled_wrong = n;
            }
        }
        if sampled_wrong > 0 {
            // wrong on the sample: no search on every probe can make it right; its count
            // there is all that is reported
            let n = self.disagreements(fam, &cur, usize::MAX)?;
            return Some((cur, n));
        }
        self.narrow_on(fam, cur, Scope::All, "")
    }

    /// Coordinate search on the probes of a scope, leaving `frozen` alone.
    fn narrow_on(
        &mut self,
        fam: &Family,
        start: Candidate,
        scope: Scope,
        frozen: &str,
    ) -> Option<(Candidate, usize)> {
        let mut cur = start;
        let mut best = self.disagreements_on(fam, &cur, usize::MAX, scope)?;
        for _round in 0..6 {
            let mut moved = false;
            for p in fam.params.iter().filter(|p| p.name != frozen) {
                for v in &p.domain {
                    if best == 0 {
                        break;
                    }
                    let c = cur.with(p.name, v);
                    if c == cur {
                        continue;
                    }
                    if let Some(n) = self.disagreements_on(fam, &c, best.saturating_sub(1), scope)
                        && n < best
                    {
                        best = n;
                        cur = c;
                        moved = true;
                    }
                }
            }
            if !moved || best == 0 {
                break;
            }
        }
        Some((cur, best))
    }

    /// The single-parameter alternatives of `c` that agree with every answer, each with
    /// the proof that it computes what `c` computes on every input, when there is one
    /// (such an alternative is not evaluated: no answer can tell it apart).
    fn ties(&mut self, fam: &Family, c: &Candidate) -> Vec<(Candidate, Option<String>)> {
        let mut out = vec![];
        let Some(winner) = self.compile(fam, c) else {
            return out;
        };
        let winner = winner.borrow().v.clone();
        for p in &fam.params {
            for v in &p.domain {
                let alt = c.with(p.name, v);
                if alt == *c {
                    continue;
                }
                let Some(comp) = self.compile(fam, &alt) else {
                    continue;
                };
                let proof = proven_equivalent(winner.get(0), comp.borrow().inst());
                if proof.is_some() {
                    out.push((alt, proof));
                } else if self.disagreements(fam, &alt, 0) == Some(0) {
                    out.push((alt, None));
                }
            }
        }
        out
    }
}

/// Start a family's search where the best candidate so far of a family with the same
/// parameter names lies (a T-FDPA's F is a good first guess for ST-FDPA's).
fn start_for(fam: &Family, found: &[(usize, Candidate, usize)]) -> Candidate {
    let mut c = fam.start();
    if let Some((_, best, _)) = found.iter().min_by_key(|(_, _, n)| *n) {
        for (name, v) in &best.args {
            if let Some(p) = fam.params.iter().find(|p| p.name == *name)
                && p.domain.contains(v)
            {
                c = c.with(name, v);
            }
        }
    }
    c
}

fn initial_probes(
    seed: &Instruction,
    iface: &Interface,
    options: &Options,
) -> Vec<(String, Input)> {
    let mut out: Vec<(String, Input)> = probes::battery(seed)
        .into_iter()
        .map(|p| {
            // the battery's labels name the seed's F, which is only where the probes were
            // built around, not a finding
            let mut name = p.name.clone();
            if let Some(i) = name.find(" (alignment F = ") {
                name.truncate(i);
            }
            (format!("battery: {name}"), p.input())
        })
        .collect();
    let k = iface.k;
    let dp = iface.d.as_float().map_or(23, |d| d.mantissa_bits as i64);
    let chains: Vec<usize> = (1..k).filter(|l| k.is_multiple_of(*l)).collect();
    let focus = Focus {
        keeps: (1..=56).collect(),
        precisions: vec![dp],
        zero_exponents: vec![],
        chains: chains.clone(),
        groups: chains,
        drops: vec![],
        references: vec![],
    };
    out.extend(corners::signed_zeros(iface));
    out.extend(corners::nan_payloads(iface));
    out.extend(corners::structured(seed, &focus));
    let mut random = RandomInputs::new(seed, &focus, options.seed);
    for i in 0..options.random_probes {
        out.push((format!("random probe {i}"), random.draw()));
    }
    out
}

/// The NaN rule of the box, decided on its NaN answers once the arithmetic is known: the
/// pipeline's own rule when it gives every one of them bit for bit, else the first of
/// `canonical`, `propagate_c_first`, `propagate_products_first` that does (written as
/// `nan RULE` on the uses line), else the pipeline's rule with the reason. Returns the
/// uses suffix (empty when the pipeline's rule stands) and the evidence.
fn nan_rule(
    search: &Search,
    iface: &Interface,
    naming: &Naming,
    uses: &str,
    own: &Instruction,
) -> (String, Vec<String>) {
    use mmac_compiler::ir::{NanOrder, NanPolicy, Pipeline};
    let own_rule = match &own.arithmetic.pipeline {
        Pipeline::Fused(f) => f.nan,
        Pipeline::Sequential(s) => s.nan,
        _ => return (String::new(), vec![]),
    };
    let d = &own.arithmetic.d;
    let nans: Vec<&Observation> = search
        .obs
        .iter()
        .filter(|o| d.decode(o.d).is_nan())
        .collect();
    if nans.is_empty() {
        return (
            String::new(),
            vec![format!(
                "no probe made the box answer a NaN; the pipeline's `nan {}` stands",
                own_rule.word()
            )],
        );
    }
    // every NaN answer, exactly, under a rule
    let explains = |rule: NanPolicy| -> Option<bool> {
        let suffix = if rule == own_rule {
            String::new()
        } else {
            format!(" nan {}", rule.word())
        };
        let text = spec_text(iface, naming, &format!("{uses}{suffix}"), "");
        let v = compile("inferred.mma", &text).ok()?;
        Some(
            nans.iter()
                .all(|o| interp::run(v.get(0), &o.input.operands()).is_ok_and(|got| got == o.d)),
        )
    };
    let canonical = d.encode_nan();
    let all_canonical = nans.iter().all(|o| Some(o.d) == canonical);
    let mut evidence = vec![format!(
        "{} of the box's answers are NaNs{}",
        nans.len(),
        if all_canonical {
            format!(", every one the canonical NaN {:x}", canonical.unwrap_or(0))
        } else {
            String::new()
        }
    )];
    let rules = [
        NanPolicy::Canonical,
        NanPolicy::Propagate(NanOrder::CFirst),
        NanPolicy::Propagate(NanOrder::ProductsFirst),
    ];
    if own_rule != NanPolicy::Ieee && explains(own_rule) == Some(true) {
        evidence.push(format!(
            "the pipeline's `nan {}` gives each one",
            own_rule.word()
        ));
        return (String::new(), evidence);
    }
    for rule in rules {
        if explains(rule) == Some(true) {
            evidence.push(format!(
                "`nan {}` gives each one, where the pipeline's `nan {}` {}",
                rule.word(),
                own_rule.word(),
                if own_rule == NanPolicy::Ieee {
                    "leaves the NaN unpinned"
                } else {
                    "does not"
                }
            ));
            return (format!(" nan {}", rule.word()), evidence);
        }
    }
    evidence.push(format!(
        "no NaN rule the language states gives them all (canonical; the first input NaN's payload, c first or products first); the spec keeps the pipeline's `nan {}`",
        own_rule.word()
    ));
    (String::new(), evidence)
}

/// The word of an instruction's own NaN rule.
fn own_nan_word(inst: &Instruction) -> String {
    use mmac_compiler::ir::Pipeline;
    match &inst.arithmetic.pipeline {
        Pipeline::Fused(f) => f.nan.word().to_string(),
        Pipeline::Sequential(s) => s.nan.word().to_string(),
        _ => "-".to_string(),
    }
}

/// A mismatch in one line: the probe's name and both answers (the request itself is in
/// [`Mismatch::request`]).
fn describe(m: &Mismatch) -> String {
    let mine = m
        .candidate_d
        .map_or("cannot evaluate it".to_string(), |d| format!("gives {d:x}"));
    format!("`{}`: the box answers {:x}, this {mine}", m.probe, m.box_d)
}

/// Infer the box's arithmetic (module docs). Errors are the box's failures; a box no
/// candidate reproduces is an [`Inference`] with a failure.
pub fn infer(
    bx: &mut dyn BlackBox,
    iface: &Interface,
    naming: &Naming,
    command: &str,
    options: &Options,
) -> Result<Inference, InferError> {
    let fams = families(iface);
    let mut search = Search::new(iface, naming, bx);
    // any candidate that checks gives the operands' shape for building probes
    let seed = fams.iter().find_map(|f| search.compile(f, &f.start()));
    let Some(seed) = seed else {
        return Err(InferError::NoFamily(format!(
            "a = {}, b = {}, c = {}, d = {}, k = {}",
            iface.a.name, iface.b.name, iface.c.name, iface.d.name, iface.k
        )));
    };
    let seed_inst = seed.borrow().inst().clone();
    let progress = Progress::new();
    search.ask(initial_probes(&seed_inst, iface, options))?;
    progress.note("initial probes answered", &search);
    let narrowed = narrow_and_separate(&mut search, &fams, options, &progress)?;
    progress.note("narrowed", &search);

    let (bfi, winner, wrong) = narrowed.best.clone();
    let fam = &fams[bfi];
    let mut uses = fam.uses(&winner);
    // the NaN rule, decided on the box's NaN answers (exactly, where the narrowing let
    // any NaN match any NaN under `nan ieee`)
    let mut nan_report: Option<ParameterReport> = None;
    if wrong == 0
        && let Some(own) = search.compile(fam, &winner)
    {
        let own = own.borrow().inst().clone();
        let (suffix, evidence) = nan_rule(&search, iface, naming, &uses, &own);
        uses.push_str(&suffix);
        if !evidence.is_empty() {
            nan_report = Some(ParameterReport {
                name: "nan".into(),
                value: suffix
                    .strip_prefix(" nan ")
                    .map_or_else(|| own_nan_word(&own), str::to_string),
                evidence,
            });
        }
    }
    let mut parameters = parameter_reports(&mut search, fam, &winner, &narrowed.unobservable);
    parameters.extend(nan_report);
    let other_families = other_family_lines(&mut search, &fams, bfi, &narrowed.found);
    let probes_asked = search.obs.len();
    progress.note("evidence gathered", &search);

    let (verify_cases, failure) = if wrong > 0 {
        (0, search.first_wrong(fam, &winner).map(|(_, m)| m))
    } else {
        verify(&mut search, &uses, options)?
    };
    progress.note("verified", &search);
    let mut inference = Inference {
        family: fam.pipeline.to_string(),
        uses,
        spec: String::new(),
        parameters,
        other_families,
        probes: probes_asked,
        verify_cases,
        failure,
        unresolved: narrowed.unresolved,
    };
    let header = header(&inference, fam, iface, command);
    inference.spec = spec_text(iface, naming, &inference.uses, &header);
    Ok(inference)
}

/// `MMAC_INFER_TRACE`: a line on stderr at each phase, with the time and the search's size.
struct Progress {
    started: std::time::Instant,
    trace: bool,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            started: std::time::Instant::now(),
            trace: std::env::var_os("MMAC_INFER_TRACE").is_some(),
        }
    }

    fn note(&self, what: &str, search: &Search) {
        if !self.trace {
            return;
        }
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "infer: {:>8.3}s {what} ({} probes, {} candidates, {} kernels)",
            self.started.elapsed().as_secs_f64(),
            search.obs.len(),
            search.compiled.len(),
            search
                .compiled
                .values()
                .flatten()
                .filter(|c| c.borrow().engine.is_some())
                .count()
        );
    }
}

/// Where narrowing ends: the best candidate (its family, its values, the probes it gets
/// wrong), the best of every family, the parameter values proven equivalent to the
/// best's, and the rivals nothing told apart.
struct Narrowed {
    best: (usize, Candidate, usize),
    found: Vec<(usize, Candidate, usize)>,
    unobservable: HashMap<&'static str, Vec<(Value, String)>>,
    unresolved: Vec<String>,
}

/// Rounds of narrowing every family on the probes so far (restarting from elsewhere when
/// stuck), then separating the best from its rivals with new probes, until no rival is
/// open, nothing new was asked, or the rounds run out.
fn narrow_and_separate(
    search: &mut Search,
    fams: &[Family],
    options: &Options,
    progress: &Progress,
) -> Result<Narrowed, InferError> {
    let mut round = 0;
    let mut restarts = 0;
    // what the last separation proved and left open
    let mut unobservable = HashMap::new();
    let mut unresolved = vec![];
    loop {
        round += 1;
        progress.note(&format!("round {round}"), search);
        let mut found = vec![];
        for (fi, fam) in fams.iter().enumerate() {
            // a restart begins from the family's own start, on another sample
            let start = if restarts % 2 == 1 {
                fam.start()
            } else {
                start_for(fam, &found)
            };
            if let Some((c, n)) = search.narrow(fam, start) {
                found.push((fi, c, n));
            }
        }
        // the seed checked, so its family narrows to some candidate
        let Some(best) = found.iter().min_by_key(|(fi, _, n)| (*n, *fi)).cloned() else {
            return Err(InferError::NoFamily(
                "no candidate of any family checks".to_string(),
            ));
        };
        let mut narrowed = Narrowed {
            best,
            found,
            unobservable: std::mem::take(&mut unobservable),
            unresolved: std::mem::take(&mut unresolved),
        };
        if narrowed.best.2 > 0 && restarts < RESTARTS && round <= options.rounds {
            // stuck where no parameter alone can move: search again from elsewhere
            restarts += 1;
            search.sample_offset += 1;
            search
                .counts
                .retain(|(_, scope), _| matches!(scope, Scope::All | Scope::High));
            progress.note(&format!("restart {restarts}"), search);
            unobservable = narrowed.unobservable;
            unresolved = narrowed.unresolved;
            continue;
        }
        if narrowed.best.2 > 0 || round > options.rounds {
            return Ok(narrowed);
        }
        let asked = separate_rivals(search, fams, &mut narrowed, options, round, progress)?;
        if asked == 0 {
            return Ok(narrowed);
        }
        unobservable = narrowed.unobservable;
        unresolved = narrowed.unresolved;
    }
}

/// One round of separation: the best's rivals (other values of one parameter, other
/// families) that agree on every probe so far are proven equivalent (recorded in
/// `narrowed.unobservable`, replacing the last round's), or asked the corner cases and
/// random inputs focused on the best and them, and then witness searches; rivals nothing
/// separates are recorded in `narrowed.unresolved`. Returns how many new probes were
/// asked (0 when no rival is open).
fn separate_rivals(
    search: &mut Search,
    fams: &[Family],
    narrowed: &mut Narrowed,
    options: &Options,
    round: usize,
    progress: &Progress,
) -> Result<usize, InferError> {
    let best = &narrowed.best;
    let fam = &fams[best.0];
    let mut rivals: Vec<(usize, Candidate)> = search
        .ties(fam, &best.1)
        .into_iter()
        .map(|(c, _)| (best.0, c))
        .collect();
    rivals.extend(
        narrowed
            .found
            .iter()
            .filter(|(fi, _, n)| *n == 0 && *fi != best.0)
            .map(|(fi, c, _)| (*fi, c.clone())),
    );
    progress.note(
        &format!("{} rivals of {}", rivals.len(), fam.uses(&best.1)),
        search,
    );
    let Some(winner) = search.compile(fam, &best.1) else {
        return Ok(0);
    };
    let winner = winner.borrow().v.clone();
    let w_inst = winner.get(0).instruction().clone();
    narrowed.unobservable.clear();
    narrowed.unresolved.clear();
    let mut open = vec![];
    for (fi, r) in &rivals {
        let Some(rc) = search.compile(&fams[*fi], r) else {
            continue;
        };
        let r_inst = rc.borrow().inst().clone();
        if let Some(why) = proven_equivalent(winner.get(0), &r_inst) {
            if *fi == best.0
                && let Some((name, v)) = r.args.iter().find(|(n, v)| best.1.get(n) != Some(v))
            {
                narrowed
                    .unobservable
                    .entry(name)
                    .or_default()
                    .push((v.clone(), why));
            }
            continue;
        }
        open.push((*fi, r.clone(), rc));
    }
    if open.is_empty() {
        return Ok(0);
    }
    // targeted probes: the corner cases of the winner and every open rival together
    let insts: Vec<Instruction> = std::iter::once(w_inst.clone())
        .chain(open.iter().map(|(_, _, rc)| rc.borrow().inst().clone()))
        .collect();
    let refs: Vec<&Instruction> = insts.iter().collect();
    let focus = Focus::of(&refs);
    let mut asked = search.ask(corners::structured(&w_inst, &focus))?;
    let mut random = RandomInputs::new(&w_inst, &focus, options.seed ^ round as u64);
    asked += search.ask(
        (0..1000)
            .map(|i| (format!("random probe {i} (round {round})"), random.draw()))
            .collect(),
    )?;
    // rivals that still agree get a witness search each
    let still: Vec<_> = open
        .iter()
        .filter(|(fi, r, _)| search.disagreements(&fams[*fi], r, 0) == Some(0))
        .cloned()
        .collect();
    let mut witnesses = vec![];
    for (_, r, rc) in still.iter().take(24) {
        let rc = rc.borrow();
        let opts = SearchOptions {
            random_draws: 8192,
            seed: options.seed,
            wanted: 1,
        };
        match witness::find(winner.get(0), rc.checked(), &opts) {
            Ok(ws) if !ws.is_empty() => witnesses.extend(ws.into_iter().map(|w| {
                (
                    format!("witness against {} ({})", fams_uses(fams, r), w.origin),
                    w.input,
                )
            })),
            _ => narrowed.unresolved.push(format!(
                "{} agrees with every probe; no witness found and no proof that it is equivalent",
                fams_uses(fams, r)
            )),
        }
    }
    progress.note("witness searches done", search);
    asked += search.ask(witnesses)?;
    Ok(asked)
}

/// The evidence for each parameter of the winner: its neighbouring values (every other
/// value, for a parameter that is not a number) and the probes that rule them out, or
/// the proof that they are equivalent.
fn parameter_reports(
    search: &mut Search,
    fam: &Family,
    winner: &Candidate,
    unobservable: &HashMap<&'static str, Vec<(Value, String)>>,
) -> Vec<ParameterReport> {
    let mut parameters = vec![];
    for p in &fam.params {
        // a candidate of a family has a value for each of its parameters
        let Some(v) = winner.get(p.name).cloned() else {
            continue;
        };
        let mut evidence = vec![];
        let at = p.domain.iter().position(|x| *x == v);
        let alternatives: Vec<Value> = match (&v, at) {
            (Value::Int(_), Some(i)) => [i.checked_sub(1), Some(i + 1)]
                .into_iter()
                .flatten()
                .filter_map(|j| p.domain.get(j).cloned())
                .collect(),
            _ => p.domain.iter().filter(|x| **x != v).cloned().collect(),
        };
        let proven = unobservable.get(p.name);
        for alt in alternatives {
            let c = winner.with(p.name, &alt);
            if let Some(list) = proven
                && list.iter().any(|(x, _)| *x == alt)
            {
                evidence.push(format!("{} = {alt} is proven equivalent (below)", p.name));
                continue;
            }
            match search.first_wrong(fam, &c) {
                None if search.compile(fam, &c).is_none() => {
                    evidence.push(format!("{} = {alt} does not check", p.name))
                }
                None => evidence.push(format!("{} = {alt} agrees with every probe", p.name)),
                Some((n, m)) => evidence.push(format!(
                    "{} = {alt} disagrees on {n} of {} probes, first {}",
                    p.name,
                    search.obs.len(),
                    describe(&m)
                )),
            }
        }
        if let Some(list) = proven {
            let mut vals: Vec<Value> = list.iter().map(|(v, _)| v.clone()).collect();
            vals.push(v.clone());
            evidence.push(format!(
                "unobservable at these formats: {} = {} give the same result on every input (proof: {}); the spec takes {v}",
                p.name,
                spans(&vals),
                list[0].1
            ));
        }
        parameters.push(ParameterReport {
            name: p.name.to_string(),
            value: v.to_string(),
            evidence,
        });
    }
    parameters
}

/// One line per other family: its best candidate and the first probe it gets wrong.
fn other_family_lines(
    search: &mut Search,
    fams: &[Family],
    best: usize,
    found: &[(usize, Candidate, usize)],
) -> Vec<String> {
    let mut lines = vec![];
    for (fi, c, n) in found {
        if *fi == best {
            continue;
        }
        let f = &fams[*fi];
        lines.push(match search.first_wrong(f, c) {
            Some((_, m)) => format!(
                "{} ({}): at best {}, disagrees on {n} probes, first {}",
                f.pipeline,
                f.title,
                f.uses(c),
                describe(&m)
            ),
            None => format!(
                "{} ({}): {} agrees with every probe",
                f.pipeline,
                f.title,
                f.uses(c)
            ),
        });
    }
    lines
}

/// The spec as written (the winner with its NaN rule) against the box on
/// `options.verify` random inputs drawn to stress its parameters: how many were asked and
/// the first that disagrees.
fn verify(
    search: &mut Search,
    uses: &str,
    options: &Options,
) -> Result<(usize, Option<Mismatch>), InferError> {
    let iface = search.iface;
    let written = spec_text(iface, search.naming, uses, "");
    let v = match compile("inferred.mma", &written) {
        Ok(v) => v,
        Err(e) => {
            return Err(InferError::NoFamily(format!(
                "the inferred spec does not check: {}",
                e.render_plain(100)
            )));
        }
    };
    let inst = v.get(0).instruction();
    let engine = Engine::new(v.get(0), Choice::QUICK);
    let focus = Focus::of(&[inst]);
    let mut random = RandomInputs::new(inst, &focus, options.seed.wrapping_mul(31) ^ 0x7e51);
    let nan = nan_any(inst);
    let d = &inst.arithmetic.d;
    let mut cases = 0;
    while cases < options.verify {
        let n = 4096.min(options.verify - cases);
        let batch: Vec<Input> = (0..n).map(|_| random.draw()).collect();
        let want = search.bx.answer(&batch)?;
        let got = evaluate(&engine, &batch).ok();
        for (i, input) in batch.iter().enumerate() {
            let mine = got.as_ref().map(|g| g[i]);
            if !mine.is_some_and(|m| matches(d, want[i], m, nan)) {
                let failure = Mismatch {
                    probe: format!("verification case {}", cases + i + 1),
                    input: input.clone(),
                    request: iface.request(input),
                    box_d: want[i],
                    candidate_d: mine,
                };
                return Ok((cases + n, Some(failure)));
            }
        }
        cases += n;
    }
    Ok((cases, None))
}

/// The inferred spec's header comment: the box, the operands, the algorithm chosen over
/// the others, every parameter with its evidence, what is unresolved, and the verdict.
fn header(inference: &Inference, fam: &Family, iface: &Interface, command: &str) -> String {
    let mut lines = vec![
        format!("Inferred by `mmac infer` from the box `{command}`."),
        format!(
            "operands: a = {}, b = {}, c = {}, d = {}, k = {}{}",
            iface.a.name,
            iface.b.name,
            iface.c.name,
            iface.d.name,
            iface.k,
            iface
                .scale
                .as_ref()
                .map(|(f, b)| format!(", scale {} block {b}", f.name))
                .unwrap_or_default()
        ),
    ];
    let probes = inference.probes;
    lines.push(if inference.other_families.is_empty() {
        format!(
            "algorithm: {} ({}), the only pipeline of the prelude for these operands; {probes} probes",
            fam.pipeline, fam.title
        )
    } else {
        format!(
            "algorithm: {} ({}), chosen over every other pipeline of the prelude on {probes} probes:",
            fam.pipeline, fam.title
        )
    });
    lines.extend(inference.other_families.iter().map(|l| format!("  {l}")));
    for p in &inference.parameters {
        lines.push(format!("{} = {}", p.name, p.value));
        lines.extend(p.evidence.iter().map(|e| format!("  {e}")));
    }
    lines.extend(
        inference
            .unresolved
            .iter()
            .map(|u| format!("unresolved: {u}")),
    );
    lines.push(match &inference.failure {
        None => format!(
            "verified: {} random cases drawn to stress these parameters agree bit for bit",
            inference.verify_cases
        ),
        Some(m) => format!(
            "NOT VERIFIED: the box answers d={:x} but this spec gives {} on {}",
            m.box_d,
            m.candidate_d
                .map_or("an error".into(), |d| format!("d={d:x}")),
            describe(m)
        ),
    });
    lines.iter().map(|l| format!("// {l}\n")).collect()
}

/// Values as a short list: runs of consecutive integers as `lo..=hi`.
fn spans(values: &[Value]) -> String {
    let mut ints: Vec<i64> = values
        .iter()
        .filter_map(|v| match v {
            Value::Int(i) => Some(*i),
            Value::Word(_) => None,
        })
        .collect();
    ints.sort();
    ints.dedup();
    let mut parts: Vec<String> = values
        .iter()
        .filter_map(|v| match v {
            Value::Word(w) => Some(w.to_string()),
            Value::Int(_) => None,
        })
        .collect();
    let mut i = 0;
    while i < ints.len() {
        let mut j = i;
        while j + 1 < ints.len() && ints[j + 1] == ints[j] + 1 {
            j += 1;
        }
        parts.push(if j > i {
            format!("{}..={}", ints[i], ints[j])
        } else {
            ints[i].to_string()
        });
        i = j + 1;
    }
    parts.join(", ")
}

fn fams_uses(fams: &[Family], c: &Candidate) -> String {
    fams.iter()
        .find(|f| f.pipeline == c.pipeline)
        .map_or_else(|| c.pipeline.to_string(), |f| f.uses(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_lists_are_written_as_runs() {
        let v = |xs: &[i64]| xs.iter().map(|&x| Value::Int(x)).collect::<Vec<_>>();
        assert_eq!(spans(&v(&[-3, -5, -4, 1, 7, 8])), "-5..=-3, 1, 7..=8");
        assert_eq!(spans(&[Value::Word("up"), Value::Int(2)]), "up, 2");
    }

    /// The library's style: arguments at their pipeline default are left out.
    #[test]
    fn uses_lines_leave_defaults_out() {
        let iface = Interface::parse("a=f16,b=f16,c=f32,d=f32", 16, None).unwrap();
        let fams = families(&iface);
        let t = fams.iter().find(|f| f.pipeline == "t_fdpa").unwrap();
        let c = t
            .start()
            .with("F", &Value::Int(25))
            .with("L", &Value::Int(16))
            .with("e_zero", &Value::Int(-133));
        assert_eq!(t.uses(&c), "t_fdpa(F = 25, L = 16, e_zero = -133)");
        let c = c.with("rho", &Value::Word("nearest_even"));
        assert_eq!(
            t.uses(&c),
            "t_fdpa(F = 25, L = 16, e_zero = -133, rho = nearest_even)"
        );
        let i = Interface::parse("a=s8,b=u8,c=s32,d=s32", 16, None).unwrap();
        let fams = families(&i);
        assert_eq!(fams.len(), 1);
        assert_eq!(fams[0].uses(&fams[0].start()), "int_mma()");
    }
}
